// orch — a tensor program optimizer. The public C API.
//
// The API loads an ONNX model (shapes inferred, shape-only subgraphs folded) and runs it on a
// reference interpreter (per ONNX operator, or per primitive after operator fission), and
// compiles a model for a target into an artefact that an orch_session runs (see below).
//
// Example:
//     orch_ctx *ctx = orch_ctx_create();
//     orch_model *m = NULL;
//     orch_load_options opt = {.input_shapes = "x:1x3x224x224"};
//     if (orch_model_load(ctx, "model.onnx", &opt, &m) != ORCH_OK) {
//         fprintf(stderr, "%s\n", orch_last_error(ctx));
//     } else {
//         orch_tensor in, out;
//         orch_model_input_info(m, 0, &in);   in.data = my_input;   // in.nbytes bytes
//         orch_model_output_info(m, 0, &out); out.data = my_output; // caller-owned
//         orch_model_run_reference(ctx, m, &in, 1, &out, 1);
//     }
//     orch_model_free(m);
//     orch_ctx_free(ctx);
//
// Every function that can fail returns an orch_status and keeps the first error's message in the
// context (orch_last_error); the library never exits. Free functions accept NULL.
//
// Libraries and compatibility. liborch (pkg-config `orch`) has everything below; liborch-runtime
// (pkg-config `orch-runtime`) has only what runs artefacts: contexts and errors, orch_version and
// the orch_session_* functions, and links no solver, database or linear-algebra library. Within
// one major version (ORCH_VERSION_MAJOR; while it is 0, within one minor version) a program
// built against this header runs with any later release of the libraries: functions are only
// added, option structs only grow at their end (zero-initialise them), enum values keep their
// numbers. The shared libraries' SONAME carries that version (liborch.so.0.1); an artefact
// records the orch that compiled it and is refused, with a message, by an orch that cannot
// read its format.
#ifndef ORCH_H
#define ORCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORCH_VERSION "0.1.0"
#define ORCH_VERSION_MAJOR 0
#define ORCH_VERSION_MINOR 1
#define ORCH_VERSION_PATCH 0
#define ORCH_MAX_DIMS 8

typedef enum orch_status {
    ORCH_OK = 0,
    ORCH_ERR_USAGE = 1,       // API misuse or bad option
    ORCH_ERR_INVALID = 2,     // malformed model or input
    ORCH_ERR_UNSUPPORTED = 3, // valid ONNX that orch does not handle (yet)
    ORCH_ERR_MISMATCH = 4,    // outputs differ from expected ones
    ORCH_ERR_RUNTIME = 5,     // I/O, memory or internal failure
} orch_status;

// Element types, numbered as ONNX TensorProto.DataType.
typedef enum orch_dtype {
    ORCH_FLOAT32 = 1,
    ORCH_UINT8 = 2,
    ORCH_INT8 = 3,
    ORCH_UINT16 = 4,
    ORCH_INT16 = 5,
    ORCH_INT32 = 6,
    ORCH_INT64 = 7,
    ORCH_BOOL = 9,
    ORCH_FLOAT16 = 10,
    ORCH_FLOAT64 = 11,
    ORCH_UINT32 = 12,
    ORCH_UINT64 = 13,
    ORCH_BFLOAT16 = 16,
} orch_dtype;

typedef struct orch_tensor {
    const char *name; // graph input/output name; for inputs NULL means "by position"
    orch_dtype dtype;
    int rank;
    int64_t dims[ORCH_MAX_DIMS];
    void *data;    // caller-owned, dense row-major
    size_t nbytes; // size of data in bytes
} orch_tensor;

typedef struct orch_ctx orch_ctx;
typedef struct orch_model orch_model;

// The version of the library the program runs with ("0.1.0"), which may be later than the
// ORCH_VERSION it was built against.
const char *orch_version(void);
orch_ctx *orch_ctx_create(void);
void orch_ctx_free(orch_ctx *ctx);
const char *orch_last_error(const orch_ctx *ctx); // "" when no error
orch_status orch_last_status(const orch_ctx *ctx);
void orch_clear_error(orch_ctx *ctx);

// What orch_model_run_reference runs. Both compute the same outputs up to float rounding (the
// clean-up passes fold constants and BatchNorm scales into weights); the primitive engine runs
// the model as the later stages see it.
typedef enum orch_engine {
    ORCH_ENGINE_OPS = 0,   // one ONNX operator at a time, with the reference ops (the default)
    ORCH_ENGINE_PRIMS = 1, // operator fission into primitives and the clean-up passes at load
                           // time, then the primitive interpreter one primitive at a time
} orch_engine;

// Zero-initialised options are the defaults.
typedef struct orch_load_options {
    // Binds symbolic input dimensions: "x:1x3x224x224,mask:1x128". NULL when none are symbolic.
    const char *input_shapes;
    orch_engine engine;
    // ORCH_ENGINE_PRIMS: non-zero skips the clean-up passes (the graph as fission made it).
    int no_cleanup;
    // ORCH_ENGINE_PRIMS: non-zero moves attention's softmax division after the second MatMul
    // (softmax(x) @ V = (exp(x - max) @ V) / sum), so exp can fuse into the MatMul.
    int attention_rewrite;
} orch_load_options;

orch_status orch_model_load(orch_ctx *ctx, const char *path, const orch_load_options *opt,
                            orch_model **out);
orch_status orch_model_load_memory(orch_ctx *ctx, const void *data, size_t size,
                                   const orch_load_options *opt, orch_model **out);
void orch_model_free(orch_model *m);

int orch_model_num_inputs(const orch_model *m);
int orch_model_num_outputs(const orch_model *m);
// Fills name, dtype, rank, dims and nbytes (data = NULL). Names live as long as the model.
orch_status orch_model_input_info(const orch_model *m, int i, orch_tensor *info);
orch_status orch_model_output_info(const orch_model *m, int i, orch_tensor *info);

// Runs the model on the reference interpreter of the engine it was loaded for. Inputs are
// matched by name (or by position when name is NULL) and must have the model's dtype and shape;
// outputs likewise, into caller buffers of at least the reported nbytes.
orch_status orch_model_run_reference(orch_ctx *ctx, orch_model *m, const orch_tensor *inputs,
                                     int n_inputs, orch_tensor *outputs, int n_outputs);

// ---- compiling and running compiled models ----
//
//     orch_compile_options co = {.target = "cpu"};           // zero = defaults
//     orch_compile(ctx, "model.onnx", &co, "model.orch");   // tunes, solves, builds, checks
//     orch_session *s = NULL;
//     orch_session_create(ctx, "model.orch", NULL, &s);     // checks the artefact fits here
//     orch_session_run(ctx, s, &in, 1, &out, 1);            // no allocation for generated kernels
//     orch_session_free(s);

// Zero-initialised options are the defaults.
typedef struct orch_compile_options {
    const char *target;       // "cpu" or "cuda" (NULL: cpu)
    const char *db_path;      // profile database (NULL: ~/.cache/orch/profile.db)
    const char *input_shapes; // as for orch_load_options
    int attention_rewrite;    // as for orch_load_options
    int threads;              // threads of the generated kernels (0: every core available)
    int top_k;                // configs measured per chosen kernel (0: 8)
    int jobs;                 // parallel compiler processes (0: cores)
    double time_limit;        // seconds for the orchestration solver (0: its default)
    int verbose;              // non-zero: progress lines and the summary on stderr
    // Arithmetic of matmuls and convolutions: "fp32" (NULL: exact float32), or "tf32", "fp16",
    // "bf16" (target "cuda" only: tensor cores with operands rounded to that format, float32
    // accumulation and storage; checked against the reference at the tolerance README.md
    // states). Anything else: ORCH_ERR_USAGE.
    const char *precision;
    // (The fields below came later; those above keep their places.)
    // Non-zero, with precision "fp16" or "bf16" on target "cuda": tensors are stored in that type
    // (the model's inputs and outputs stay float32), as orch compile --half-storage.
    int half_storage;
    int no_mlp_chains; // non-zero: no MLP chain candidates (orch compile --no-mlp-chains)
    int no_attention;  // non-zero: no fused attention candidates (--no-attention)
    // Channels-last layouts for the convolutions under half storage (--layout): "auto" (NULL:
    // where cuDNN loads), "nchw" (never), "nhwc" (even without cuDNN). Anything else, or other
    // than auto without half_storage: ORCH_ERR_USAGE.
    const char *layout;
    // With verbose: 1 prints why each matmul/conv primitive runs where it does after the solve,
    // 2 also every candidate computing it (--explain, --explain-all); 0 nothing.
    int explain;
    // Non-zero: a kernel the target does not generate (an interpreter would run it) fails the
    // compile with ORCH_ERR_UNSUPPORTED, whose message (orch_last_error) names the ops and ONNX
    // nodes, and no artefact is written (orch compile --strict); an artefact compiled so records
    // it. Zero: such kernels run on the interpreters (verbose's summary lists them).
    int strict;
    // Several shape sets, each spelt as input_shapes ("x:1x3x224x224"), compiled into one
    // artefact with one plan per set (at most 16) and the weights once; input_shapes must then be
    // NULL. A session runs the plan matching its inputs (orch_session_num_shape_sets). 0: the
    // one set input_shapes gives.
    const char *const *shape_sets;
    int n_shape_sets;
    // The GPUs that measure on target "cuda" (orch compile --gpus): "all" (NULL: every GPU of
    // GPU 0's kind), a count ("2"), or ordinals including 0 ("0,2"); the plan does not depend on
    // it, only the tuning's wall time. Malformed, or given for target "cpu": ORCH_ERR_USAGE.
    const char *gpus;
} orch_compile_options;

// Compiles the ONNX model at onnx_path into the artefact out_path (written atomically; left
// untouched on failure).
orch_status orch_compile(orch_ctx *ctx, const char *onnx_path, const orch_compile_options *opt,
                         const char *out_path);

typedef struct orch_session orch_session;

// Zero-initialised options are the defaults.
typedef struct orch_session_options {
    int threads;              // OpenMP threads (0: the artefact's own setting)
    int allow_foreign_device; // non-zero: run an artefact compiled for another CPU (at your risk)
    // CPU: a run uses fewer threads while other processes keep this process's cores busy (one
    // less per busy core, probed every 0.1 s), because OpenMP threads waiting at a barrier for a
    // descheduled teammate make a shared machine's runs tens of times slower. Non-zero: always
    // `threads` threads.
    int fixed_threads;
} orch_session_options;

// Loads a compiled artefact (file or memory) and prepares it to run: checks every header field
// against this orch and this machine, loads the kernels, plans memory. opt may be NULL.
// Never run an artefact you did not compile or do not trust: it contains native code, which is
// loaded and run. The checks catch damage, not malice.
orch_status orch_session_create(orch_ctx *ctx, const char *artifact_path,
                                const orch_session_options *opt, orch_session **out);
orch_status orch_session_create_from_memory(orch_ctx *ctx, const void *data, size_t size,
                                            const orch_session_options *opt, orch_session **out);
void orch_session_free(orch_session *s);

int orch_session_num_inputs(const orch_session *s);
int orch_session_num_outputs(const orch_session *s);
// The shapes are those of the artefact's first shape set (its only one unless it was compiled
// with several: see below).
orch_status orch_session_input_info(const orch_session *s, int i, orch_tensor *info);
orch_status orch_session_output_info(const orch_session *s, int i, orch_tensor *info);

// An artefact compiled for several shape sets (orch_compile_options.shape_sets, orch compile
// --input-shapes given several times) holds one plan per set; orch_session_run picks the one
// whose input shapes equal the inputs' and refuses any other shape with ORCH_ERR_INVALID, naming
// the shapes the artefact serves. Sets are numbered 0..orch_session_num_shape_sets - 1 in the
// order they were compiled; the info functions give set `set`'s tensors (same names and dtypes
// in every set, other shapes).
int orch_session_num_shape_sets(const orch_session *s); // 1 for a one-shape artefact
orch_status orch_session_shape_set_input_info(const orch_session *s, int set, int i,
                                              orch_tensor *info);
orch_status orch_session_shape_set_output_info(const orch_session *s, int set, int i,
                                               orch_tensor *info);

// Runs the compiled model; inputs and outputs as for orch_model_run_reference (caller-owned),
// with the shapes of one of the artefact's shape sets (the plan is chosen by them).
// Thread-safe: several threads may run one session at once, each with its own orch_ctx (a
// context holds the last error and is not shared). On the CPU concurrent runs proceed in
// parallel, sharing the kernels and weights, each with its own activation memory (the session
// keeps one such workspace per run that overlapped another, until it is freed); on CUDA they
// take turns on the session's stream and graphs.
orch_status orch_session_run(orch_ctx *ctx, orch_session *s, const orch_tensor *inputs,
                             int n_inputs, orch_tensor *outputs, int n_outputs);

// The same with the tensors' data in device memory, for a pipeline that keeps its tensors on
// the GPU: on a CUDA artefact every data pointer is device memory of the session's GPU
// (cudaMalloc, cuMemAlloc, a PyTorch or CuPy tensor's data_ptr(); the CUDA runtime's primary
// context, which orch shares), and `stream` is the caller's cudaStream_t / CUstream (NULL: the
// default stream): the run starts after the work queued on it so far, and the outputs are
// written when the call returns (the call waits for the run). No host copies: the inputs and
// outputs are copied device to device into and out of the session's own buffers, which its
// CUDA graphs were captured with. A pointer that is not device memory of that GPU is refused
// (ORCH_ERR_USAGE) naming the tensor. On a CPU artefact device memory is host memory: the
// same as orch_session_run, with stream NULL.
orch_status orch_session_run_device(orch_ctx *ctx, orch_session *s, const orch_tensor *inputs,
                                    int n_inputs, orch_tensor *outputs, int n_outputs,
                                    void *stream);

#ifdef __cplusplus
}
#endif
#endif
