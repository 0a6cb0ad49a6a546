// The CPU target's parts that its Target instance (target_c.c) assembles: the lab and orch
// export.
#ifndef ORCH_CPU_BACKEND_H
#define ORCH_CPU_BACKEND_H

#include "../kernel_lab.h"
#include "session_cpu.h"

// The target's lab_run slot (kernel_lab.h's contract), lab_cpu.c.
int cpu_lab_run(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs, void **values,
                LabJob *jobs, int n, const LabOptions *opt, Err *e);

// The target's export_tree slot (export_cpu.c): one plan as a C source tree.
int cpu_export_tree(const ArtifactContents *a, const char *dir, FILE *progress, Err *e);

#endif
