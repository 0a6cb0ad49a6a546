// This machine as the CPU target sees it: what the compile tunes for and what an artefact's
// session checks it runs on (hw_cpu.c).
#ifndef ORCH_BACKEND_CPU_HW_CPU_H
#define ORCH_BACKEND_CPU_HW_CPU_H

#include "../target.h"

// Fills hw (target "cpu", fingerprint "cpu|MODEL|threads=N|simd=BITS[+fma]|L1d=.. L2=.. L3=..|
// COMPILER") for `threads` threads (0: the cores this process may use). with_compiler asks the
// system compiler its version (a process); without it the field says so.
int cpu_hw_detect(HwInfo *hw, int threads, bool with_compiler, Err *e);
// Whether an artefact compiled for `fingerprint` runs as compiled on the machine `now`: the
// same fingerprint but for the compiler, which only the compile needs.
bool cpu_same_machine(const char *fingerprint, const HwInfo *now);

#endif
