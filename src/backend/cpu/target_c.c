// The CPU target: C kernels built with the system compiler (target.h's interface). It reads the
// machine (model, cores, SIMD width, caches, compiler) and hands each candidate to the emitter of
// its class: pointwise and reduction kernels (cgen.h), matmul and convolution kernels
// (cgen_linear.h), MLP chains and attention, operator kernels (cgen_opaque.h: a candidate that
// is one OPAQUE primitive of an operator opaque_spec.h describes; the others run their reference
// op). Its lab (lab_cpu.c) builds units with the system compiler in parallel processes, its
// artefact module is one shared object, and its sessions run plans on the host (session_cpu.h).
#define _GNU_SOURCE
#include "../../base/file.h"
#include "../../candidates/attention.h"
#include "../kernel_lab.h"
#include "../target.h"
#include "cbuild.h"
#include "cgen.h"
#include "cgen_attn.h"
#include "cgen_linear.h"
#include "cgen_mlp.h"
#include "cgen_opaque.h"
#include "cpu_backend.h"

#include <pthread.h>
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

static int cpu_hw_detect(HwInfo *hw, int threads, Err *e) {
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
    snprintf(hw->compiler, sizeof hw->compiler, "%s", cbuild_compiler_version());
    snprintf(hw->fingerprint, sizeof hw->fingerprint,
             "cpu|%s|threads=%d|simd=%d%s|L1d=%lldK L2=%lldK L3=%lldK|%s", hw->model, hw->cores,
             hw->simd_bytes * 8, hw->fma ? "+fma" : "", (long long)(hw->l1d / 1024),
             (long long)(hw->l2 / 1024), (long long)(hw->l3 / 1024), hw->compiler);
    return ST_OK;
}

static bool has_linear(const PrimGraph *pg, const Candidate *c) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_LINEAR)
            return true;
    return false;
}

static bool has_opaque(const PrimGraph *pg, const Candidate *c) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_OPAQUE)
            return true;
    return false;
}

static bool is_attention(const PrimGraph *pg, const Candidate *c) {
    AttnSpec a;
    return attn_analyse(pg, c, &a);
}

static char *prelude_text;

static void build_prelude(void) {
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, cgen_prelude());
    sb_puts(&b, "\n");
    sb_puts(&b, cgen_lin_prelude());
    sb_puts(&b, "\n");
    prelude_text = sb_take(&b);
}

static int cpu_check_options(const TargetOptions *opt, Err *e) {
    if (opt->precision != PREC_FP32)
        return err_set(e, ST_USAGE,
                       "precision %s needs the cuda target; the cpu target computes in float32",
                       precision_name(opt->precision));
    if (opt->half_storage)
        return err_set(e, ST_USAGE,
                       "half storage needs the cuda target and precision fp16 or bf16");
    if (opt->threads < 0)
        return err_set(e, ST_USAGE, "--threads must be at least 1 (got %d)", opt->threads);
    return ST_OK;
}

static int cpu_open(TargetMachine *m, Err *e) {
    m->model = NULL;
    return cpu_hw_detect(&m->hw, m->opt.threads, e);
}

static void cpu_close(TargetMachine *m) {
    (void)m;
}

static bool cpu_prefers_channels_last(const TargetMachine *m) {
    (void)m; // the C kernels are generated for the model's own layouts
    return false;
}

static const char *cpu_db_name(const TargetMachine *m) {
    (void)m;
    return "cpu";
}

static bool cpu_supports(const TargetMachine *m, const PrimGraph *pg, const Candidate *c) {
    (void)m;
    if (has_opaque(pg, c)) // an operator kernel (OPAQUE primitives come alone)
        return cgen_opq_supports(pg, c);
    if (cand_count_linear(pg, c) >= 2) // fused attention or an MLP chain
        return is_attention(pg, c) ? cgen_attn_supports(pg, c) : cgen_mlp_supports(pg, c);
    return has_linear(pg, c) ? cgen_lin_supports(pg, c) : cgen_pw_supports(pg, c);
}

static int cpu_configs(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                       KernelConfig *out, int k) {
    const HwInfo *hw = &m->hw;
    if (has_opaque(pg, c))
        return cgen_opq_configs(pg, c, hw, out, k);
    if (cand_count_linear(pg, c) >= 2)
        return is_attention(pg, c) ? cgen_attn_configs(pg, c, hw, out, k)
                                   : cgen_mlp_configs(pg, c, hw, out, k);
    return has_linear(pg, c) ? cgen_lin_configs(pg, c, hw, out, k)
                             : cgen_pw_configs(pg, c, hw, out, k);
}

static int cpu_emit(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                    const KernelConfig *cfg, const char *fn, StrBuf *src, Err *e) {
    (void)m;
    if (cfg->cls == CCLS_MLP)
        return cgen_mlp_emit(pg, c, cfg, fn, src, e);
    if (cfg->cls == CCLS_ATTN)
        return cgen_attn_emit(pg, c, cfg, fn, src, e);
    if (cfg->cls == CCLS_OPAQUE)
        return cgen_opq_emit(pg, c, cfg, fn, src, e);
    return has_linear(pg, c) ? cgen_lin_emit(pg, c, cfg, fn, src, e)
                             : cgen_pw_emit(pg, c, cfg, fn, src, e);
}

static const char *cpu_prelude(const TargetMachine *m) {
    (void)m;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_prelude);
    return prelude_text;
}

// The artefact's module: one shared object. A unit the lab built that holds every chosen kernel
// serves as it (extra kernels in it are harmless), which saves a build; otherwise the chosen
// kernels are emitted into one unit and built.
static int cpu_build(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                     const int *cands, const KernelConfig *cfgs, const char *const *names, int n,
                     void *const *lab_modules, int n_lab_modules, uint8_t **blob, size_t *size,
                     Err *e) {
    *blob = NULL;
    *size = 0;
    if (n == 0)
        return ST_OK;
    CModule *reuse = NULL;
    for (int u = 0; u < n_lab_modules && !reuse; u++) {
        bool all = true;
        for (int i = 0; i < n && all; i++)
            all = cmodule_sym(lab_modules[u], names[i]) != NULL;
        if (all)
            reuse = lab_modules[u];
    }
    CModule *mod = NULL;
    int rc = ST_OK;
    if (!reuse) {
        StrBuf src;
        sb_init(&src);
        sb_puts(&src, cpu_prelude(m));
        for (int i = 0; i < n && rc == ST_OK; i++) {
            // A kernel chosen twice (two layers with one signature) is emitted once.
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                seen = strcmp(names[j], names[i]) == 0;
            if (!seen)
                rc = cpu_emit(m, pg, &cs->c[cands[i]], &cfgs[i], names[i], &src, e);
        }
        if (rc == ST_OK)
            rc = cbuild_module(src.s, NULL, "the chosen kernels", &mod, e);
        sb_free(&src);
    }
    if (rc == ST_OK)
        rc = file_read_all(cmodule_path(reuse ? reuse : mod), (int64_t)1 << 34, blob, size, e);
    cmodule_free(mod);
    return rc;
}

static void cpu_lab_modules_free(void *const *mods, int n) {
    for (int i = 0; mods && i < n; i++)
        cmodule_free(mods[i]);
}

const Target target_cpu = {
    .name = "cpu",
    .check_options = cpu_check_options,
    .open = cpu_open,
    .close = cpu_close,
    .calibrate = NULL,
    .prefers_channels_last = cpu_prefers_channels_last,
    .db_name = cpu_db_name,
    .supports = cpu_supports,
    .configs = cpu_configs,
    .emit = cpu_emit,
    .prelude = cpu_prelude,
    .lab_run = cpu_lab_run,
    .build = cpu_build,
    .lab_modules_free = cpu_lab_modules_free,
    .session = &cpu_session_ops,
};
