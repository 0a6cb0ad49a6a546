// The backend interface: everything that differs between targets (CPU with generated C, CUDA
// with NVRTC and libraries) sits behind one static instance of struct Target per target, so the
// compile driver (src/compile) and the session front end (src/runtime) never name a target:
// checking the options, detecting the machine and modelling it, which candidates it generates,
// the top-k configs its hardware model proposes, the source it emits for a (candidate, config),
// its kernel lab (build, check against the primitive interpreter, time), the module an artefact
// carries, and the sessions that run artefacts.
// Needs: a verified primitive graph and its candidate set. Guarantees: emitted kernels follow the
// target's kernel ABI (the C one below) and compute the candidate's output exactly as prim.h
// defines it (up to float rounding; the lab checks every kernel against the primitive
// interpreter).
#ifndef ORCH_TARGET_H
#define ORCH_TARGET_H

#include "../base/common.h"
#include "../base/strbuf.h"
#include "../candidates/candidates.h"

#include <stdio.h>

// The machine kernels are generated and tuned for. Filled by the target's hw_detect; every field
// that changes a measurement goes into the fingerprint, which keys the profile database.
typedef struct HwInfo {
    char target[16];       // "cpu", "cuda"
    char model[128];       // CPU model name / GPU name
    int cores;             // cores the kernels may use (OpenMP threads) / SM count
    int simd_bytes;        // vector register width: 16 (SSE, NEON), 32 (AVX2), 64 (AVX-512)
    bool fma;              // fused multiply-add instructions
    int64_t l1d, l2, l3;   // data cache bytes: per core (l1d, l2), shared (l3); 0 when unknown
    int64_t line;          // cache line bytes
    char compiler[128];    // "gcc 12.2.0" (the C target's system compiler)
    char fingerprint[512]; // one line: target, model, cores, ISA, caches, compiler
} HwInfo;

// One point of a kernel's configuration space. The meaning of p[] belongs to the kernel class that
// proposed it (see the class's emitter); desc is its canonical text ("cls=gemm mr=6 nr=16 kc=256
// mc=96 nc=1024 par=n"), so equal configs compare equal. The profile database keys a measurement
// by the desc and a hash of the source the config emits (compile.c), so a changed generator never
// reuses the time of other code.
#define KCFG_MAX_PARAMS 12
typedef struct KernelConfig {
    int cls;                    // kernel class (the target's own numbering)
    int64_t p[KCFG_MAX_PARAMS]; // class-specific knobs
    double score;               // the hardware model's estimate in seconds; lower is better
    unsigned flags;             // KCFG_* below
    char desc[128];
} KernelConfig;
// The config computes its candidate with more rounding error than the direct evaluation (Winograd
// F(4x4)'s transforms): within the lab's check for one kernel, but such errors compound over a
// deep plan, so a compile whose plan holds these configs and misses its end-to-end check leaves
// them out and solves again (compile.c). Not part of desc: the code and its timing are the same.
#define KCFG_REDUCED_EXACTNESS 1u

// Sorts n configs by score into out (at most k, duplicates of desc dropped: the first, best
// scored, stays); returns how many. cand is reordered. Shared by the config functions of both
// targets' emitters.
int cgen_sort_configs(KernelConfig *cand, int n, KernelConfig *out, int k);

// The kernel ABI of the C target (the CUDA target has its own launch ABI):
//     void NAME(const void *const *in, void *out);
// in[i] is the dense row-major buffer of candidate input c->inputs[i] (constants included, in
// the candidate's canonical order, so candidates with equal signatures share one kernel); out is
// the dense buffer of c->output. Kernels allocate nothing they do not free, keep no state between
// calls, and may use OpenMP (the caller sets the thread count). Buffers are 64-byte aligned; out
// never overlaps an input.
typedef void (*CKernelFn)(const void *const *in, void *out);
// An operator kernel (a candidate that is one OPAQUE primitive: an ONNX operator without a
// fission rule, codegen/opaque_spec.h) has the operator ABI instead, since an operator may write
// several outputs (TopK's values and indices) and may find its run-time operands invalid (an
// index out of range):
//     int NAME(const void *const *in, void *const *out);
// in[] as above; out[j] is the dense buffer of the primitive's output j (NULL where the node
// leaves output j out; the kernel then does not write it). It returns 0, or CKERNEL_ERR_INDEX
// when an index operand is out of range: it then reads and writes nothing outside its buffers,
// its outputs are unspecified, and the caller reports the reference op's own message
// (prim_eval_opaque on the same operands gives it); CKERNEL_ERR_NOMEM when its scratch memory
// could not be allocated. Buffers and threads as above. A kernel takes the operator ABI exactly
// when ckernel_op_abi(its sink) holds; nothing else records it.
typedef int (*COpKernelFn)(const void *const *in, void *const *out);
enum { CKERNEL_OK = 0, CKERNEL_ERR_INDEX = 1, CKERNEL_ERR_NOMEM = 2 };
static inline bool ckernel_op_abi(const Prim *sink) {
    return sink->kind == PRIM_OPAQUE;
}
// A kernel may also export
//     int NAME_prepack(int i, const void *src, void *dst);
// for inputs it reads in its own order rather than row-major (a constant weight reordered once
// at load instead of packed on every call): it returns 1 for such an input i, and then, when
// src and dst are not NULL, writes into dst (tensor_nbytes of the input, not overlapping src)
// the bytes of src reordered; 0 for any other input. Whoever calls NAME passes in[i] = that
// reordered copy for those inputs (ckernel_prepack below; runtime/session.c, the kernel lab).
// A copy may also be larger than the input (a transform, not a reordering: Winograd's weights):
// then NAME_prepack(i, NULL, p), p pointing to an int64_t, stores its size in bytes there
// (ckernel_prepack_bytes); kernels whose copy has the input's size leave *p alone.
typedef int (*CPrepackFn)(int input, const void *src, void *dst);
// The bytes of pf's copy of input i, whose own size is input_bytes.
static inline int64_t ckernel_prepack_bytes(CPrepackFn pf, int i, int64_t input_bytes) {
    int64_t b = input_bytes;
    pf(i, NULL, &b);
    return b;
}
// Name of NAME's prepack entry point ("NAME_prepack") into buf.
void ckernel_prepack_name(const char *kernel, char *buf, size_t n);

// The arithmetic of linear kernels (matmul, convolution), orch compile --precision. Storage is
// float32 unless half storage is asked for, and accumulation always float32; TF32/FP16/BF16 round
// the operands of the products to 10/10/7 explicit mantissa bits (tensor cores). A target says
// which it offers (check_options).
typedef enum Precision {
    PREC_FP32 = 0, // exact float32 arithmetic (the default)
    PREC_TF32 = 1,
    PREC_FP16 = 2,
    PREC_BF16 = 3
} Precision;

// What a compile asks of a backend beyond the graph. Passed to every slot that proposes or emits
// code, never kept in a global, so compiles with different options can share a process.
typedef struct TargetOptions {
    Precision precision; // linear kernels' arithmetic
    bool half_storage;   // tensors stored in the reduced type (fp16 / bf16); the float32
                         // products left (tensors kept float32 for their range) stay exact
    int threads;         // the kernels' host threads (CPU; 0: every core this process may use)
    const char *gpus;    // the GPUs the lab measures on (CUDA): "all" (NULL too), a count or a
                         // list of ordinals (kernel_lab.h's lab_devices_parse); never changes
                         // what is emitted or chosen, only how fast tuning goes
} TargetOptions;

// One machine as a backend sees it, for one compile: the detected hardware (the profile
// database's fingerprint), the options, and the backend's own model of the device (the CUDA
// target's CudaHw with its measured bandwidth; NULL for the CPU). Made by open, freed by close.
typedef struct TargetMachine {
    const struct Target *target;
    HwInfo hw;
    TargetOptions opt;
    void *model;
} TargetMachine;

// How an artefact's session runs (runtime/session.h is the front end over these).
typedef struct SessionOptions {
    int threads;               // OpenMP threads for the kernels; 0: the artefact's thread count
                               // (and where that is 0 too, OpenMP's default)
    bool allow_foreign_device; // run an artefact compiled for another machine's fingerprint
    bool fixed_threads;        // CPU: always `threads` threads, even while other processes keep
                               // this process's cores busy (by default a run then uses fewer)
} SessionOptions;

struct LabJob;
struct LabOptions;
struct ArtifactContents;
struct Plan;
struct ProfileDb;
typedef struct TargetSession TargetSession; // a backend's session, opaque to the front end

// A backend's sessions: what runtime/session.c forwards to. Every slot is set.
typedef struct TargetSessionOps {
    // From an artefact of this target whose header the front end has checked against hw_now.
    int (*create)(const struct ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                  TargetSession **out, Err *e);
    void (*free)(TargetSession *s);
    int (*run)(TargetSession *s, const void *const *inputs, void *const *outputs, Err *e);
    // The same with buffers in the target's device memory (CUDA: device pointers of the session's
    // GPU), ordered after the work queued on `stream` (the caller's; NULL: the default stream)
    // and finished on return. The CPU's device memory is host memory: run, with stream NULL.
    int (*run_device)(TargetSession *s, const void *const *inputs, void *const *outputs,
                      void *stream, Err *e);
    // Whether run may be called from several threads at once (each run then has its own
    // workspace); otherwise the front end makes them take turns.
    bool concurrent_runs;
    // Device-timeline seconds of `runs` back-to-back runs; ST_UNSUPPORTED where the target has no
    // device timeline (the CPU).
    int (*time_device)(TargetSession *s, int runs, double *seconds, Err *e);
    void (*set_profiling)(TargetSession *s, int on);
    const double *(*kernel_times)(const TargetSession *s);
    int (*num_launches)(const TargetSession *s);
    int (*num_kernels)(const TargetSession *s);
    const char *(*launch_name)(const TargetSession *s, int i);
    const char *(*launch_nodes)(const TargetSession *s, int i);
    const PrimGraph *(*graph)(const TargetSession *s);
    const struct Plan *(*plan)(const TargetSession *s);
    int (*threads)(const TargetSession *s);
} TargetSessionOps;

// The whole backend: everything the compile driver (src/compile) and the session front end
// (src/runtime) need, so neither names a particular target. One static instance per target.
typedef struct Target {
    const char *name; // "cpu", "cuda"
    // Refuses options the target cannot honour (a precision it does not offer...) with ST_USAGE.
    int (*check_options)(const TargetOptions *opt, Err *e);
    // Detects this machine and builds the backend's device model into m (m->target, m->opt set
    // by the caller). close frees what open allocated; it accepts a machine open failed on.
    int (*open)(TargetMachine *m, Err *e);
    void (*close)(TargetMachine *m);
    // Measures what the device model needs once per device (the GPU's memory bandwidth), kept in
    // db under the machine's fingerprint; NULL where there is nothing. Never fails: a failed
    // measurement leaves the model's estimate and prints a warning to progress (may be NULL).
    void (*calibrate)(TargetMachine *m, struct ProfileDb *db, FILE *progress);
    // Whether half storage's convolutions get channels-last (NHWC) twins when the layout is left
    // to orch: where something reads them faster (the CUDA target with cuDNN).
    bool (*prefers_channels_last)(const TargetMachine *m);
    // The target name profile records are kept under: where the options change the code emitted
    // for one config (the CUDA target's fast math under a reduced precision), another name.
    const char *(*db_name)(const TargetMachine *m);
    // Whether emit can generate this candidate. An OPAQUE primitive it does not generate (an
    // operator kernel, the operator ABI above) runs with its reference op. Reads m's options only
    // (m->model and m->hw may be empty): orch info asks it of every target without a device.
    bool (*supports)(const TargetMachine *m, const PrimGraph *pg, const Candidate *c);
    // Up to k configs, best estimate first; returns how many (>= 1 when supported).
    int (*configs)(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                   KernelConfig *out, int k);
    // Appends one function definition named fn to src (helpers it needs are static and named
    // after fn, so many kernels can share one translation unit).
    int (*emit)(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                const KernelConfig *cfg, const char *fn, StrBuf *src, Err *e);
    // The text every translation unit starts with (includes, shared inline helpers).
    const char *(*prelude)(const TargetMachine *m);
    // The kernel lab: builds, checks against values (the primitive interpreter's tensors) and
    // times the jobs (kernel_lab.h).
    int (*lab_run)(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                   void **values, struct LabJob *jobs, int n, const struct LabOptions *lo, Err *e);
    // The devices the lab measures on: their count (ordinals in ordinals[0..count), at most
    // max), and in note one line for the compile's log naming any device of the machine left out
    // and why ("" when none was). NULL where the lab runs on the host alone (the CPU).
    int (*lab_devices)(const TargetMachine *m, int *ordinals, int max, char *note, size_t note_n);
    // Builds the chosen kernels (cands[i] with cfgs[i], named names[i]; a name listed twice is
    // built once) into the module the artefact carries (*blob, malloc'd; NULL, 0 for n = 0).
    // lab_modules: what lab_run handed over through LabOptions.keep, which the build may reuse.
    int (*build)(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                 const int *cands, const KernelConfig *cfgs, const char *const *names, int n,
                 void *const *lab_modules, int n_lab_modules, uint8_t **blob, size_t *size, Err *e);
    // Frees what LabOptions.keep handed over (accepts NULL).
    void (*lab_modules_free)(void *const *lab_modules, int n);
    // The source build compiles for the same kernels (*src malloc'd, NUL-terminated; NULL for
    // n = 0: the C target's translation unit, the CUDA target's NVRTC program), which the
    // artefact keeps for orch export; NULL where the target keeps none.
    int (*module_source)(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                         const int *cands, const KernelConfig *cfgs, const char *const *names,
                         int n, char **src, Err *e);
    // Where the built module is a function of module_source's text alone on one device: what
    // else decides it (the compiler, its version and flags), which the compile adds to the key
    // under which it keeps the module in the profile database and reuses it when a later compile
    // chooses the same kernels. NULL: the module is built every time.
    const char *(*module_identity)(const TargetMachine *m);
    // orch export: one plan of an artefact of this target (a one-plan view, artifact_plan_view)
    // as a source tree in dir that builds and runs without orch; NULL where the target has none.
    int (*export_tree)(const struct ArtifactContents *a, const char *dir, FILE *progress, Err *e);
    const struct TargetRuntime *runtime;
} Target;

extern const Target target_cpu;
extern const Target target_cuda;

// A backend's run-time half: what a program that only runs artefacts needs of it, and all that
// liborch-runtime links of a backend (no emitter, lab, solver or database). Every slot is set.
typedef struct TargetRuntime {
    const char *name;
    // This machine as an artefact's fingerprint describes one, with the kernels on `threads`
    // threads (0: the backend's default); no compiler or device model is consulted beyond what
    // the fingerprint names.
    int (*detect)(int threads, HwInfo *hw, Err *e);
    // Whether an artefact compiled for `fingerprint` runs as compiled on the machine `now`.
    bool (*same_machine)(const char *fingerprint, const HwInfo *now);
    const TargetSessionOps *session;
} TargetRuntime;

extern const TargetRuntime target_runtime_cpu;
extern const TargetRuntime target_runtime_cuda;

// Looks a backend's run-time half up by target name ("cpu", "cuda"); NULL when there is none.
const TargetRuntime *target_runtime_find(const char *name);

// Looks a target up by name ("cpu", "cuda"); NULL when there is none of that name.
const Target *target_find(const char *name);
// Every target of this build, in the order `orch info` lists them.
#define TARGET_COUNT 2
extern const Target *const target_all[TARGET_COUNT];
// The names target_find knows, for messages: "cpu, cuda".
const char *target_names(void);

// Checks opt (NULL: defaults) against target t and opens this machine for it (check_options, then
// open); on failure the machine holds nothing. target_close frees it (accepts a zeroed machine).
int target_open(const Target *t, const TargetOptions *opt, TargetMachine *m, Err *e);
void target_close(TargetMachine *m);
// This machine's description for target t with the kernels on `threads` threads (0: every core):
// what an artefact's fingerprint is checked against.
int target_detect(const Target *t, int threads, HwInfo *hw, Err *e);

#endif
