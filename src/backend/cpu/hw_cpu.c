// This machine as the CPU target sees it (hw_cpu.h): the CPU model, SIMD width and FMA from
// /proc/cpuinfo, the caches from sysfs, the cores this process may use, and the compiler; and
// whether an artefact's fingerprint names this machine; with the host sessions, the CPU target's
// run-time half (target.h's TargetRuntime).
#define _GNU_SOURCE
#include "hw_cpu.h"

#include "cbuild.h"
#include "session_cpu.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Reads one sysfs/procfs text file into buf; false when unreadable.
static bool read_text(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    return got > 0;
}

// "48K", "2048K", "32M" → bytes.
static int64_t parse_size(const char *s) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end && (*end == 'K' || *end == 'k'))
        v *= 1024;
    else if (end && (*end == 'M' || *end == 'm'))
        v *= 1024 * 1024;
    return v > 0 ? (int64_t)v : 0;
}

static void read_caches(HwInfo *hw) {
    for (int i = 0; i < 8; i++) {
        char path[128], level[16], type[32], size[32], line[16];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!read_text(path, level, sizeof level))
            break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_text(path, type, sizeof type))
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!read_text(path, size, sizeof size))
            continue;
        int lv = atoi(level);
        int64_t bytes = parse_size(size);
        if (lv == 1 && strncmp(type, "Data", 4) == 0)
            hw->l1d = bytes;
        else if (lv == 2 && strncmp(type, "Instruction", 11) != 0)
            hw->l2 = bytes;
        else if (lv == 3)
            hw->l3 = bytes;
        snprintf(path, sizeof path,
                 "/sys/devices/system/cpu/cpu0/cache/index%d/coherency_line_size", i);
        if (read_text(path, line, sizeof line) && atoi(line) > 0)
            hw->line = atoi(line);
    }
}

// The "flags" line of /proc/cpuinfo decides the vector width the emitted code may assume; the
// compiler's -march=native sees the same flags.
static void read_cpuinfo(HwInfo *hw) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    bool have_model = false, have_flags = false;
    while (f && fgets(line, sizeof line, f) && !(have_model && have_flags)) {
        if (!have_model && strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(hw->model, sizeof hw->model, "%s", v);
            hw->model[strcspn(hw->model, "\n")] = '\0';
            have_model = true;
        } else if (!have_flags &&
                   (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0)) {
            strcat(line, " ");
            if (strstr(line, " avx512f "))
                hw->simd_bytes = 64;
            else if (strstr(line, " avx2 "))
                hw->simd_bytes = 32;
            hw->fma = strstr(line, " fma ") != NULL || strstr(line, " asimd ") != NULL;
            have_flags = true;
        }
    }
    if (f)
        fclose(f);
    if (!have_model)
        snprintf(hw->model, sizeof hw->model, "unknown CPU");
}

int cpu_hw_detect(HwInfo *hw, int threads, bool with_compiler, Err *e) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->target, sizeof hw->target, "cpu");
    hw->simd_bytes = 16;
    hw->line = 64;
    read_cpuinfo(hw);
    read_caches(hw);
    cpu_set_t set;
    int avail = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        avail = CPU_COUNT(&set);
    if (avail <= 0)
        avail = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (avail <= 0)
        avail = 1;
    if (threads < 0)
        return err_set(e, ST_USAGE, "--threads must be at least 1 (got %d)", threads);
    hw->cores = threads > 0 ? threads : avail;
    if (!hw->l1d)
        hw->l1d = 32 * 1024;
    if (!hw->l2)
        hw->l2 = 512 * 1024;
    // The compiler is part of what the kernels were tuned with, not of what runs them: a program
    // that only runs artefacts needs none (cpu_same_machine leaves it out).
    snprintf(hw->compiler, sizeof hw->compiler, "%s",
             with_compiler ? cbuild_compiler_version() : "(not asked)");
    snprintf(hw->fingerprint, sizeof hw->fingerprint,
             "cpu|%s|threads=%d|simd=%d%s|L1d=%lldK L2=%lldK L3=%lldK|%s", hw->model, hw->cores,
             hw->simd_bytes * 8, hw->fma ? "+fma" : "", (long long)(hw->l1d / 1024),
             (long long)(hw->l2 / 1024), (long long)(hw->l3 / 1024), hw->compiler);
    return ST_OK;
}

bool cpu_same_machine(const char *fingerprint, const HwInfo *now) {
    // Everything up to the last field, the compiler's version.
    const char *a = strrchr(fingerprint, '|'), *b = strrchr(now->fingerprint, '|');
    if (!a || !b)
        return strcmp(fingerprint, now->fingerprint) == 0;
    size_t n = (size_t)(a - fingerprint);
    return n == (size_t)(b - now->fingerprint) && strncmp(fingerprint, now->fingerprint, n) == 0;
}

static int runtime_detect(int threads, HwInfo *hw, Err *e) {
    return cpu_hw_detect(hw, threads, false, e);
}

const TargetRuntime target_runtime_cpu = {
    .name = "cpu",
    .detect = runtime_detect,
    .same_machine = cpu_same_machine,
    .session = &cpu_session_ops,
};
