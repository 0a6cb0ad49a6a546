// The runtime session: runs a compiled model, whatever its target. Created from an artefact
// (artifact.h): refuses one compiled for another machine, then hands it to the session slots of
// the target that built it (target.h's TargetSessionOps), which load its kernels, re-import the
// ONNX bytes with the recorded options, check the stored plan against that graph, and prepare
// every launch once; a run only patches the caller's buffers in and calls the launches in order.
// An artefact with several shape sets gives a session per plan under one front: the calls below
// act on the first plan; session_for_plan reaches the others and session_find_plan picks the one
// whose input shapes match.
// Needs: an artefact read by artifact_read (or a graph and plan in memory). Guarantees: outputs
// written to the caller's buffers; no allocation in session_run for generated kernels and
// copies (launches run on the reference code, PLAN_INTERP and PLAN_OPAQUE, allocate inside
// prim_eval / the reference ops); errors name the file, the launch and the ONNX nodes.
#ifndef ORCH_SESSION_H
#define ORCH_SESSION_H

#include "../backend/target.h"
#include "../plan/artifact.h"
#include "../plan/plan.h"

typedef struct Session Session;

// From an artefact. hw_now describes this machine (hw_detect with the artefact's thread count,
// so that the fingerprints compare like with like); it may be NULL only with
// allow_foreign_device. opt NULL: defaults. a may be freed after the call.
int session_create(const ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                   Session **out, Err *e);

// From a primitive graph and plan in memory, run by the host executor (the CPU target's
// session; tests). pg and plan are borrowed and must outlive the session; resolve(ctx, symbol)
// finds the generated kernels (NULL resolve: the plan must have none).
typedef void *(*SessionResolveFn)(void *ctx, const char *symbol);
int session_create_from_plan(const PrimGraph *pg, const Plan *plan, SessionResolveFn resolve,
                             void *ctx, const SessionOptions *opt, Session **out, Err *e);

void session_free(Session *s); // accepts NULL

// The plans (shape sets) the session serves: 1 but for an artefact compiled for several.
int session_num_plans(const Session *s);
// The session of plan k (0 <= k < session_num_plans; s itself for a one-plan session), owned by
// s: every call below applies to it.
Session *session_for_plan(Session *s, int k);
// The plan whose graph inputs (in graph order) have exactly these ranks and dims; -1 for none.
int session_find_plan(const Session *s, const int *ranks, const int64_t *const *dims);
// "NAME:DIMS,..." of plan k's inputs (as --input-shapes spells them) into buf.
void session_plan_shapes(const Session *s, int k, char *buf, size_t n);
// Every plan's shapes, " | "-separated, into buf (for messages naming what the artefact serves).
void session_served_shapes(const Session *s, char *buf, size_t n);

// Runs the model once. inputs[i] is graph input pg->inputs[i], outputs[i] receives graph output
// pg->outputs[i]; both caller-owned, dense row-major, not overlapping each other. Buffers that
// are not 64-byte aligned are staged through aligned copies made at creation. A zero-byte
// tensor's buffer may be NULL. One run at a time per session (the arena is the session's);
// sessions are independent of each other.
int session_run(Session *s, const void *const *inputs, void *const *outputs, Err *e);
// The same with buffers in the target's device memory, after the work queued on the caller's
// stream (TargetSessionOps.run_device).
int session_run_device(Session *s, const void *const *inputs, void *const *outputs, void *stream,
                       Err *e);

// Device-timeline seconds of `runs` back-to-back runs on the last run's inputs; ST_UNSUPPORTED
// for a target without a device timeline (the CPU).
int session_time_device(Session *s, int runs, double *seconds, Err *e);

// Per-launch timing (clock_gettime MONOTONIC around each launch) of the following runs.
void session_set_profiling(Session *s, int on);
// Seconds per launch of the last profiled run (session_num_launches entries), NULL before one.
const double *session_kernel_times(const Session *s);

int session_num_launches(const Session *s);
int session_num_kernels(const Session *s); // launches from the selection (copies excluded)
// "symbol" for generated kernels, "interp:KIND#ID", "opaque:OP" or "copy:TENSOR" otherwise.
const char *session_launch_name(const Session *s, int i);
// The ONNX nodes launch i covers, ", "-separated ("" for copies).
const char *session_launch_nodes(const Session *s, int i);
const PrimGraph *session_graph(const Session *s); // inputs, outputs: names, dtypes, shapes
const Plan *session_plan(const Session *s);
// The OpenMP thread count the runs use (0: OpenMP's default), for reports.
int session_threads(const Session *s);

#endif
