// Contention on this process's cores (contention.h): /proc/stat's per-core busy time over the
// cores of the affinity mask, less this process's own CPU time, between two samples.
// Needs: Linux /proc (elsewhere every sample is "unknown"). Guarantees: no allocation, one file
// read per sample, safe from any thread.
#define _GNU_SOURCE
#include "contention.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double self_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

CpuBusySample cpu_busy_sample(void) {
    CpuBusySample s = {.t = monotonic_s(), .self = self_cpu_s()};
    cpu_set_t set;
    CPU_ZERO(&set);
    bool masked = sched_getaffinity(0, sizeof set, &set) == 0;
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    if (!f || hz <= 0) {
        if (f)
            fclose(f);
        return s;
    }
    char line[512];
    unsigned long long busy = 0;
    while (fgets(line, sizeof line, f)) {
        // "cpuN user nice system idle iowait irq softirq steal ..." in clock ticks; the
        // aggregate "cpu " line is skipped, only the cores this process may use count.
        if (strncmp(line, "cpu", 3) != 0)
            break;
        if (line[3] < '0' || line[3] > '9')
            continue;
        char *end;
        long cpu = strtol(line + 3, &end, 10);
        if (cpu < 0 || cpu >= CPU_SETSIZE || (masked && !CPU_ISSET((int)cpu, &set)))
            continue;
        unsigned long long v[8] = {0};
        int n = sscanf(end, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5], &v[6], &v[7]);
        if (n < 4)
            continue;
        // Busy: everything but idle (v[3]) and iowait (v[4]); steal counts, since a core the
        // hypervisor gives elsewhere is as unavailable as one another process holds.
        busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        s.cores++;
    }
    fclose(f);
    s.busy = (double)busy / (double)hz;
    s.ok = s.cores > 0;
    return s;
}

double cpu_busy_elsewhere(const CpuBusySample *a, const CpuBusySample *b) {
    double dt = b->t - a->t;
    if (!a->ok || !b->ok || a->cores != b->cores || dt < 0.01)
        return -1;
    // This process's CPU time may include cores outside the mask only if the mask changed
    // between the samples; the difference is then clamped.
    double others = ((b->busy - a->busy) - (b->self - a->self)) / dt;
    return others < 0 ? 0 : others > a->cores ? a->cores : others;
}

int cpu_threads_under_contention(int requested, int cores, double busy_elsewhere) {
    if (requested <= 1 || cores <= 0 || busy_elsewhere < 0)
        return requested < 1 ? 1 : requested;
    // Cores left to this process, rounding a busy fraction up once it passes a quarter core:
    // 0.2 cores of background work keep every thread, a spinning process (0.9-1.0) takes one.
    int taken = (int)(busy_elsewhere + 0.75);
    if (taken == 0)
        return requested;
    int free_cores = cores - taken;
    int t = requested < free_cores ? requested : free_cores;
    return t < 1 ? 1 : t;
}
