// The CPU target's sessions: run a plan on the host. The shared object of generated C kernels is
// loaded from memory, every launch's pointer arrays are prepared once at creation, and a run
// patches the caller's buffers in and calls the launches in order (reference code for PLAN_INTERP
// and PLAN_OPAQUE launches, memmove for copies). runtime/session.h is the front end over these
// (cpu_session_ops); the compile driver and tests also run plans held in memory through
// cpu_session_create_from_plan.
// Needs: an artefact of target "cpu" checked against this machine, or a graph and plan in memory.
// Guarantees: outputs written to the caller's buffers; no allocation in a run for generated
// kernels and copies (but an operator kernel's scratch past 64 KiB a thread: TopK over very long
// lines, docs/kernels/operators.md); errors name the file, the launch and the ONNX nodes.
#ifndef ORCH_SESSION_CPU_H
#define ORCH_SESSION_CPU_H

#include "../../plan/artifact.h"
#include "../../plan/plan.h"
#include "../target.h"

typedef struct CpuSession CpuSession;

// Finds a generated kernel by symbol (NULL: none of that name).
typedef void *(*CpuResolveFn)(void *ctx, const char *symbol);

// From an artefact (its shared object loaded from memory). opt NULL: defaults.
int cpu_session_create(const ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                       CpuSession **out, Err *e);
// From a primitive graph and plan in memory; pg and plan are borrowed and must outlive the
// session; resolve(ctx, symbol) finds the generated kernels (NULL resolve: the plan has none).
int cpu_session_create_from_plan(const PrimGraph *pg, const Plan *plan, CpuResolveFn resolve,
                                 void *ctx, const SessionOptions *opt, CpuSession **out, Err *e);
void cpu_session_free(CpuSession *s); // accepts NULL
int cpu_session_run(CpuSession *s, const void *const *inputs, void *const *outputs, Err *e);
void cpu_session_set_profiling(CpuSession *s, int on);
const double *cpu_session_kernel_times(const CpuSession *s);
int cpu_session_num_launches(const CpuSession *s);
int cpu_session_num_kernels(const CpuSession *s);
const char *cpu_session_launch_name(const CpuSession *s, int i);
const char *cpu_session_launch_nodes(const CpuSession *s, int i);
const PrimGraph *cpu_session_graph(const CpuSession *s);
const Plan *cpu_session_plan(const CpuSession *s);
int cpu_session_threads(const CpuSession *s);
// Bytes of constants the launches read in place from the artefact's weights section, and bytes of
// the session's own constant blob (copied, reordered or folded constants).
int64_t cpu_session_in_place_bytes(const CpuSession *s);
int64_t cpu_session_blob_bytes(const CpuSession *s);

// Loads a shared object of kernels from memory (the artefact's module) for dlsym; *memfd: the
// anonymous file to close after dlclose (-1: none). path names the artefact in messages.
int cpu_load_object(const uint8_t *so, size_t n, const char *path, void **dl, int *memfd, Err *e);
// Who reads each constant a kernel reorders at load (NAME_prepack, pf[launch] or NULL), for the
// session and the exporter alike: own_l/own_j[t] the first reordering reader (launch, input
// position; -1 none), shared[t] (zeroed by the caller) true when another reader wants another
// order or the original, so t is reordered into private copies, not in place. A reordered input
// that is no constant is an error naming `what`, the kernel and the launch.
int cpu_prepack_readers(const Plan *P, const CPrepackFn *pf, const char *what, int *own_l,
                        int *own_j, bool *shared, Err *e);

// The slots of target_cpu.session.
extern const TargetSessionOps cpu_session_ops;

#endif
