// How many of this process's cores other processes keep busy, and how many OpenMP threads a run
// should use so that none of its threads waits for a core: OpenMP threads spinning at a barrier
// while a teammate is descheduled make a run on a shared machine tens of times slower, where one
// thread fewer costs at most the share of a core the other process already took.
// Needs: Linux's /proc/stat (else every probe reports "unknown" and runs keep their threads).
#ifndef ORCH_BACKEND_CPU_CONTENTION_H
#define ORCH_BACKEND_CPU_CONTENTION_H

#include <stdbool.h>

// Busy time of the cores this process may run on, and this process's own CPU time, at one
// moment; two of them give how busy other processes kept those cores in between.
typedef struct CpuBusySample {
    double t;    // monotonic seconds
    double busy; // seconds the allowed cores spent busy, summed over them
    double self; // seconds of CPU this process used (all its threads)
    int cores;   // cores in this process's affinity mask
    bool ok;     // false where /proc/stat could not be read
} CpuBusySample;

CpuBusySample cpu_busy_sample(void);

// Cores other processes kept busy between a and b (0 when they idle; -1 unknown: a sample
// failed or less than 10 ms passed).
double cpu_busy_elsewhere(const CpuBusySample *a, const CpuBusySample *b);

// The threads a run should use: `requested`, less the cores other processes keep busy beyond
// what `requested` leaves free of `cores`; at least 1. A quarter of a core of background work
// (a shell, a daemon) changes nothing; a process spinning on a core takes one thread away.
int cpu_threads_under_contention(int requested, int cores, double busy_elsewhere);

#endif
