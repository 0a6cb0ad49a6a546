// The CUDA runtime session: runs a plan whose generated kernels are in one cubin, on device 0.
// Creation does everything that allocates or can fail: loads the cubin (cuModuleLoadData), looks
// every generated launch's function and geometry up (or, for a cuBLASLt or cuDNN call, checks the
// library version it was chosen with and creates its descriptors; one workspace serves every
// call; a cuDNN call runs once before the capture),
// allocates ONE device arena of plan->arena_bytes, packs the constants (plan_pack_constants) and
// uploads them once, allocates a device buffer per graph input and output, fills every launch's
// OrchArgs once, and captures the launch list on a stream as CUDA graphs (one per run of
// consecutive device launches). A run copies the inputs in, replays the graphs (cuGraphLaunch) and
// copies the outputs out.
//
// Slow path: PLAN_INTERP and PLAN_OPAQUE launches run on the host (prim_eval / prim_eval_opaque,
// as session.c does) and split the launch list into segments; before one, the tensors it reads
// are copied to host buffers (allocated at creation), after it the tensors it writes are copied
// back. Each such launch costs a stream synchronisation and two PCIe transfers.
//
// Operator kernels (generated launches of one OPAQUE primitive, cugen.h's operator ABI) get every
// output of the primitive and a status word each, cleared at the start of a run and copied back
// with the outputs; a set word (an index out of range) makes the run fail with the reference op's
// own message: the launches before it run again one by one and its operands come to the host
// for prim_eval_opaque (the only path of a run that allocates).
//
// The cubin travels with its launch table (the geometry the emitter fixed for each kernel, keyed
// by the kernel's symbol) in one "CUDA module" blob: cuda_module_pack / cuda_module_unpack. For an
// artefact of target "cuda" that blob is the artefact's third section (where the CPU target keeps
// its shared object).
// Needs: the driver (cuda_api_load) and a device; a plan whose PLAN_GENERATED symbols are all in
// the cubin and the table. Guarantees: outputs written to the caller's buffers, or an error naming
// the launch (or graph segment) and the driver's reason; no host or device allocation in a run
// but for the error path of an operator kernel.
#ifndef ORCH_SESSION_CUDA_H
#define ORCH_SESSION_CUDA_H

#include "../../plan/artifact.h"
#include "../../plan/plan.h"
#include "cugen.h"

// The launch geometry of every generated kernel, keyed by its symbol (lab_kernel_name): equal
// symbols mean an equal candidate signature and config, hence equal geometry.
typedef struct CudaLaunchTable {
    int n, cap;
    char **symbols; // owned
    CudaLaunch *launches;
} CudaLaunchTable;

// Adds (or replaces) symbol's geometry. The table starts zeroed.
void cuda_launch_table_set(CudaLaunchTable *t, const char *symbol, const CudaLaunch *l);
// NULL when the symbol is not in the table.
const CudaLaunch *cuda_launch_table_find(const CudaLaunchTable *t, const char *symbol);
void cuda_launch_table_free(CudaLaunchTable *t); // leaves it zeroed; accepts a zeroed table

// The CUDA module blob (little-endian): magic "ORCHCUMD" (8) | format u32 (2) | entries u32 |
// each entry: symbol length u32, symbol bytes, kind u32 (0 kernel, 1 cuBLASLt call, 2 cuDNN call),
// then for a kernel grid[3] u32, block[3] u32, smem u32, for a cuBLASLt call its BlasLtCall field
// by field (32-bit fields u32, 64-bit ones u64, alpha's bits, algo 8 x u64), for a cuDNN call its
// DnnCall's 32-bit fields in declaration order (n .. in_z) as u32, alpha's bits, workspace and
// version as u64 | zero padding to a multiple of 64 |
// cubin size u64 | zero padding to a multiple of 64 | the cubin | checksum u64 (plan_hash64 of
// everything before it). The cubin starts 64-byte aligned in the blob. Format 1 (no kind, kernels
// only) is still read.
int cuda_module_pack(const void *cubin, size_t cubin_size, const CudaLaunchTable *t, uint8_t **buf,
                     size_t *len, Err *e);
// Untrusted bytes: every size, the checksum and each geometry's plausibility (non-zero grid and
// block dimensions, block of at most 1024 threads; a call's blaslt_call_valid / dnn_call_valid) are
// checked; a bad blob is ST_INVALID naming `what`, never a crash. *cubin points into buf; *t
// receives copies of the entries.
int cuda_module_unpack(const uint8_t *buf, size_t len, const char *what, const uint8_t **cubin,
                       size_t *cubin_size, CudaLaunchTable *t, Err *e);

// A helper kernel the cubin may hold (cuda_lab_build_module adds it):
//     extern "C" __global__ void orch_spin(long long cycles);  (spins on clock64)
// Profiled runs queue it before each launch so the host's submission latency stays out of the
// launch's events; without it they still run, with that latency in the small launches' times.
#define CUDA_SPIN_SYMBOL "orch_spin"

typedef struct CudaSession CudaSession;

// pg and plan are borrowed and must outlive the session; the cubin and the table are only read
// during the call. opt may be NULL (threads: OpenMP threads of the host launches).
// ST_UNSUPPORTED with CUDA_NO_DRIVER_MSG / CUDA_NO_DEVICE_MSG where there is no GPU; ST_INVALID
// when the plan names a kernel the cubin or the table lacks, or a launch has more inputs than
// ORCH_CUDA_MAX_IN; ST_RUNTIME for driver failures (out of memory names the sizes).
int cuda_session_create(const PrimGraph *pg, const Plan *plan, const void *cubin, size_t cubin_size,
                        const CudaLaunchTable *launches, const SessionOptions *opt,
                        CudaSession **out, Err *e);
void cuda_session_free(CudaSession *s); // accepts NULL

// From an artefact of target "cuda" whose third section is a CUDA module blob: refuses another
// target or, unless opt->allow_foreign_device, another GPU's fingerprint (hw_now: cuda_hw_detect
// of this machine; NULL only with allow_foreign_device); re-imports the ONNX bytes exactly as
// session_create does, checks the stored plan (plan_read), unpacks the blob and creates the
// session, which then owns the graph and plan. a may be freed after the call.
int cuda_session_create_artifact(const ArtifactContents *a, const HwInfo *hw_now,
                                 const SessionOptions *opt, CudaSession **out, Err *e);

// Runs the model once from host buffers: inputs[i] is graph input pg->inputs[i], outputs[i]
// receives graph output pg->outputs[i] (dense row-major; a zero-byte tensor's buffer may be
// NULL). One run at a time per session.
int cuda_session_run(CudaSession *s, const void *const *inputs, void *const *outputs, Err *e);

// The same from device buffers of the session's GPU (its primary context: what the CUDA runtime,
// PyTorch and CuPy allocate in): inputs are copied device to device into the session's input
// buffers, the graphs replay, the outputs are copied out, all on the session's stream, which is
// synchronised before returning. The run is ordered after the work queued on `after` (a
// CUstream of the caller; NULL: the legacy default stream), so a producer's kernels finish first.
// A pointer that is not device memory of this GPU is refused (ST_USAGE) naming the tensor.
int cuda_session_run_device(CudaSession *s, const CUdeviceptr *inputs, const CUdeviceptr *outputs,
                            CUstream after, Err *e);

// GPU seconds of `runs` back-to-back runs on the inputs already in the session's device buffers
// (a cuda_session_run before sets them): the host queues every run's graphs between CUDA events
// and waits once at the end, so seconds[r] is run r's span on the GPU timeline — how PyTorch's
// event timings are taken, comparable with them. Runs with host launches include their copies
// and synchronisations. Not while profiling.
int cuda_session_time_replays(CudaSession *s, int runs, double *seconds, Err *e);

// Per-launch timing of the following runs: launches are issued one by one (no graph replay)
// between CUDA events (GPU seconds); host launches are timed on the host clock, their copies
// included. Profiled runs are slower than plain ones; turn it off to return to graph replay.
void cuda_session_set_profiling(CudaSession *s, int on);
// Seconds per launch of the last profiled run (cuda_session_num_launches entries), NULL before.
const double *cuda_session_kernel_times(const CudaSession *s);

int cuda_session_num_launches(const CudaSession *s);
int cuda_session_num_kernels(const CudaSession *s); // launches of the selection (copies excluded)
int cuda_session_num_graphs(const CudaSession *s);  // captured device segments
// As session.h: "symbol", "interp:KIND#ID", "opaque:OP" or "copy:TENSOR"; "cublaslt:symbol"
// for a cuBLASLt call, "cudnn:symbol" for a cuDNN call.
const char *cuda_session_launch_name(const CudaSession *s, int i);
const char *cuda_session_launch_nodes(const CudaSession *s, int i);
const PrimGraph *cuda_session_graph(const CudaSession *s);
const Plan *cuda_session_plan(const CudaSession *s);
// The device the session runs on (bind it on a thread before allocating device buffers for
// cuda_session_run_device with its api).
const CudaDevice *cuda_session_device(const CudaSession *s);
int cuda_session_threads(const CudaSession *s); // host threads of the interpreted launches

// The slots of target_cuda.session.
extern const TargetSessionOps cuda_session_ops;

#endif
