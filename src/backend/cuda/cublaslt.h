// cuBLASLt as a source of library candidates for the CUDA target: a candidate made of
// one MATMUL LINEAR whose operands are candidate inputs read in place (each optionally through one
// LAYOUT that swaps its last two axes), with an epilogue cuBLASLt computes exactly (a scalar alpha,
// a bias broadcast along N, ReLU; GELU where the program is its tanh form, or, under a reduced
// precision, the erf form its tanh approximation stays within 5e-4 of) becomes one cublasLtMatmul
// call per heuristic algorithm, each a KernelConfig of class CUCLS_BLASLT that the lab checks and
// times like a generated kernel. The library is dlopened by its sonames (libcublasLt.so.13 /
// .so.12 / .so: ORCH_CUDA_LIB_DIR, the loader path, the CUDA toolkit's lib64; cuda_libs.h); its
// prototypes, enums and opaque struct sizes are declared in cublaslt.c with the values of
// CUDA 13.0's cublasLt.h. No library: no library candidates, never an error. Storage types: float32
// operands as stored by default; under half storage (fp16 / bf16) A and B of CUDA_R_16F /
// CUDA_R_16BF with float accumulation (CUBLAS_COMPUTE_32F), and D (with the bias) of the
// candidate's output type: the operands' half type, or float32 where the epilogue ends in the
// model's float32 output (cuBLASLt's table: 16F/16BF inputs give 16F/16BF or 32F output). Row-major
// C (M x N) = A (M x K) B (K x N) is computed as the column-major C^T = B^T A^T: cuBLASLt's "A" is
// our B and its "B" our A, its m = N and n = M; a bias along N is then its bias along rows. Needs:
// a GPU for the heuristics and the calls (cuda_api.h); the descriptors and the analysis need none.
// Guarantees: a BlasLtCall describes one call completely (what the CUDA module blob stores);
// blaslt_op_run computes the candidate's output as prim.h defines it, up to float rounding.
#ifndef ORCH_CUBLASLT_H
#define ORCH_CUBLASLT_H

#include "../../candidates/candidates.h"
#include "../target.h"
#include "cuda_api.h"

// cublasLtEpilogue_t values the analysis produces.
enum {
    BLASLT_EPI_NONE = 1,       // CUBLASLT_EPILOGUE_DEFAULT
    BLASLT_EPI_RELU = 2,       // CUBLASLT_EPILOGUE_RELU
    BLASLT_EPI_BIAS = 4,       // CUBLASLT_EPILOGUE_BIAS: + bias[row of cuBLASLt's D] = bias[j]
    BLASLT_EPI_RELU_BIAS = 6,  // CUBLASLT_EPILOGUE_RELU_BIAS
    BLASLT_EPI_GELU = 32,      // CUBLASLT_EPILOGUE_GELU (the tanh approximation)
    BLASLT_EPI_GELU_BIAS = 36, // CUBLASLT_EPILOGUE_GELU_BIAS
};
// cublasComputeType_t values (CUBLAS_COMPUTE_32F*): float32 operands take the one the
// compile's precision asks for (cugen_prec_of), half operands CUBLAS_COMPUTE_32F.
enum {
    BLASLT_COMPUTE_32F = 68,
    BLASLT_COMPUTE_32F_FAST_16F = 74,
    BLASLT_COMPUTE_32F_FAST_16BF = 75,
    BLASLT_COMPUTE_32F_FAST_TF32 = 77,
};
// cudaDataType_t values of the matrices.
enum { BLASLT_R_32F = 0, BLASLT_R_16F = 2, BLASLT_R_16BF = 14 };
// BlasLtCall.compute packs the compute type (bits 0-7) with the cudaDataType_t of A and B (bits
// 8-15) and of C = D and the bias (bits 16-23): the CUDA module blob stores compute as one u32, so
// the storage types travel with every call unchanged, and a float32 call (both types 0) is the
// bare compute type it always was.
#define BLASLT_COMPUTE(ct, ab, cd) ((int32_t)((ct) | (ab) << 8 | (cd) << 16))
#define BLASLT_COMPUTE_TYPE(c) ((c)&0xff)
#define BLASLT_TYPE_AB(c) (((c) >> 8) & 0xff)
#define BLASLT_TYPE_CD(c) (((c) >> 16) & 0xff)
// The workspace the heuristics may ask for (cuBLAS recommends 32 MiB on Hopper).
#define BLASLT_MAX_WORKSPACE ((uint64_t)32 << 20)

// One call, in cuBLASLt's column-major terms (see above). Plain data: stored in the launch table.
typedef struct BlasLtCall {
    int32_t m, n, k;          // cuBLASLt's problem: m = our N, n = our M
    int32_t trans_a, trans_b; // cublasOperation_t (0 N, 1 T) of its A (our B) and B (our A)
    int64_t lda, ldb, ldc;    // leading dimensions (elements) of A, B and C = D
    int32_t batch;            // strided batch count, 1 when none
    int64_t stride_a, stride_b, stride_c; // batch strides in elements; 0: broadcast
    int32_t epilogue;                     // BLASLT_EPI_*
    int32_t compute;                      // BLASLT_COMPUTE(compute type, A/B type, C/D type)
    float alpha;                          // beta: 1 with a residual C (in_res), else 0
    int32_t in_a, in_b, in_bias; // candidate input positions (cugen.h ABI) of A, B, bias (-1)
    int32_t in_res; // ... of C, a residual of D's shape and type added before the bias and
                    // ReLU epilogue (D = alpha A B + C + bias), -1 none
    uint32_t align_a, align_b, align_c; // byte alignment the heuristics assumed per matrix
    uint64_t algo[8];                   // cublasLtMatmulAlgo_t
    uint64_t workspace;                 // bytes the algorithm needs
    uint64_t version;                   // cublasLtGetVersion() it was chosen with
} BlasLtCall;

// KernelConfig.p[] of class CUCLS_BLASLT: the algorithm's 64 bytes, its workspace bytes, its
// heuristic rank.
enum { BLP_ALGO = 0, BLP_WORKSPACE = 8, BLP_RANK = 9 };

// The typed config of CUCLS_BLASLT (cugen.h's typed configs): p[]'s algorithm, workspace and
// rank, and what the desc names beside them: the algorithm's attributes as the library reported
// them when the config was made, and the call's compute and storage types (desc "cls=cublaslt
// algo=ID tile=T stages=S splitk=K red=R swz=W cust=C inner=I cluster=L ct=32f|tf32|16f|16bf",
// then " ab=16f|16bf cd=.." where A/B or C/D are half). Unpacking reads those from the desc (all
// 0 where it is not in this form); the call itself needs only p[] (blaslt_call).
typedef struct CuBlasLtConfig {
    uint64_t algo[8];   // BLP_ALGO..: the cublasLtMatmulAlgo_t
    int64_t workspace;  // BLP_WORKSPACE: bytes the algorithm needs
    int64_t rank;       // BLP_RANK: its rank in the heuristic's answer
    int32_t id, splitk; // CUBLASLT_ALGO_CONFIG_ID, SPLITK_NUM
    uint32_t tile, stages, red, swz, cust, inner, cluster; // TILE_ID, STAGES_ID, REDUCTION_SCHEME,
                                                           // CTA_SWIZZLING, CUSTOM_OPTION,
                                                           // INNER_SHAPE_ID, CLUSTER_SHAPE_ID
    int32_t compute; // BLASLT_COMPUTE(compute type, A/B type, C/D type) of the call
} CuBlasLtConfig;
void blaslt_config_pack(const CuBlasLtConfig *bc, KernelConfig *k);
bool blaslt_config_unpack(const KernelConfig *k, CuBlasLtConfig *bc);

// The candidate's call without an algorithm (algo, workspace zero; version of this machine's
// library, 0 without one); false when cuBLASLt cannot compute this candidate exactly. opt: the
// compile's options (the precision decides the compute type and whether an erf GELU is taken).
bool blaslt_analyse(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt,
                    BlasLtCall *call);

// Whether the library loads on this machine (cached; searched for once).
bool blaslt_available(void);
// cublasLtGetVersion() of the loaded library (e.g. 130100 for 13.1.0); 0 when absent.
uint64_t blaslt_version(void);
// The path or soname that was opened, or the reason none was ("" before the first attempt).
const char *blaslt_describe_load(void);

// Up to k configs of class CUCLS_BLASLT from cublasLtMatmulAlgoGetHeuristic (best first), desc
// "cls=cublaslt algo=ID tile=T stages=S splitk=K red=R swz=W cust=C inner=I cluster=L ct=32f"
// (half operands: "ct=32f ab=16f cd=16f", the types of A/B and of C/D).
// Needs the GPU hw describes (its primary context); 0 when the library, the device or the
// candidate does not allow any.
int blaslt_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                   const TargetOptions *opt, KernelConfig *out, int k);
// The same for an analysed call (blaslt_analyse's) on the GPU of that ordinal (cublaslt.c: the
// library side; blaslt_configs is the candidate side, cublaslt_analysis.c).
int blaslt_configs_of_call(BlasLtCall call, int ordinal, KernelConfig *out, int k);
// The call of a config blaslt_configs returned under the same opt (ST_UNSUPPORTED when the
// candidate is not one).
int blaslt_call(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                const TargetOptions *opt, BlasLtCall *call, Err *e);

// One call made ready to run: its cuBLASLt descriptors (created with the device's context current).
typedef struct BlasLtOp {
    BlasLtCall call;
    void *desc, *la, *lb, *lc; // cublasLtMatmulDesc_t, cublasLtMatrixLayout_t x 3
} BlasLtOp;

// Refuses a call chosen with another library version: "compiled with cuBLASLt X, this machine
// has Y: recompile" (ST_INVALID), or ST_UNSUPPORTED when there is no library.
int blaslt_check_version(const BlasLtCall *call, Err *e);
// Creates the process's cuBLASLt handle for device `ordinal` (one per GPU) if need be (binding
// its primary context on the calling thread). Call it before capturing calls into a CUDA graph:
// creating a handle is not capturable. ST_UNSUPPORTED without the library or a GPU.
int blaslt_init(int ordinal, Err *e);
int blaslt_op_create(const BlasLtCall *call, BlasLtOp *op, Err *e);
void blaslt_op_destroy(BlasLtOp *op); // accepts a zeroed op
// Queues the call on stream (capturable): a, b, bias, res are the device addresses of its A, B,
// bias and residual C (0 without one), d the output; ws a device buffer of at least
// call.workspace bytes. It runs with the handle of the GPU whose context is current on the
// calling thread (cuda_current_ordinal; blaslt_init made it).
int blaslt_op_run(const BlasLtOp *op, CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias,
                  CUdeviceptr res, CUdeviceptr d, CUdeviceptr ws, uint64_t ws_bytes,
                  CUstream stream, Err *e);
// Whether calls can be made here: the library loads and a handle opens on device 0 (a GPU).
bool blaslt_ready(void);
// Plausibility of an untrusted call (from a blob): false and a reason in why.
bool blaslt_call_valid(const BlasLtCall *call, char *why, size_t n);
// A one-line description of the call (comments, messages).
void blaslt_call_str(const BlasLtCall *call, char *buf, size_t n);

#endif
