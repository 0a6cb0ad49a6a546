// cuDNN as a source of library candidates for the CUDA target, next to cuBLASLt
// (cublaslt.h): a candidate made of one 2-D LIN_CONV (any stride, padding cuDNN's symmetric pads
// express, dilation, groups, depthwise included) whose X is a candidate input read in place
// (NCHW or NHWC, below; float32, or under half storage float16 / bfloat16 with X, W, the bias, z
// and Y all of that type) and whose W is a constant, followed by an epilogue cuDNN's legacy
// convolution API computes (y = act(alpha * conv(x) + z + bias): a scalar alpha, a bias along C, a
// residual z of the output's shape only with a bias, ReLU only after the bias) becomes one cuDNN
// call per heuristic algorithm (cudnnGetConvolutionForwardAlgorithm_v7), each a KernelConfig of
// class CUCLS_CUDNN that the lab checks and times like a generated kernel. The library is dlopened
// by its sonames (libcudnn.so.9 / .so.8 / .so: ORCH_CUDA_LIB_DIR, the loader path, the CUDA
// toolkit's lib folders; cuda_libs.h); its prototypes and enums are declared in cudnn.c with the
// values of cuDNN 9's cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h. No library: no cuDNN candidates,
// never an error. Math: under --precision fp32 every call runs with CUDNN_FMA_MATH (cuDNN's default
// math would let float32 convolutions use TF32 tensor cores on Ampere and later); tensor-op math
// only where the precision allows it (tf32, fp16, bf16; down-conversion to half only under
// fp16). Half tensors: cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations (float32 convolution
// compute type: products accumulated in float32, alpha and the epilogue in float32, Y rounded
// once), asked with tensor-op math. Layouts: X, z and Y NCHW as the primitives define them, or all
// three channels-last: X (and z) read through transposes of NHWC candidate inputs and Y written
// through the transpose to NHWC that ends the candidate (pass_channels_last's pairs); W KCRS in
// place, or KRSC read through a transpose of a constant (either is KRSC where C/groups or R x S is
// 1), with either data layout. Needs: a GPU for the heuristics and the calls (cuda_api.h); the
// analysis and the descriptors need none. Guarantees: a DnnCall describes one call completely (what
// the CUDA module blob stores); dnn_op_run computes the candidate's output as prim.h defines it, up
// to float rounding.
#ifndef ORCH_CUDNN_H
#define ORCH_CUDNN_H

#include "../../candidates/candidates.h"
#include "../target.h"
#include "cuda_api.h"

// The epilogue (DnnCall.epilogue), flags: y = [relu](alpha * conv(x) [+ z] [+ bias]). A z or a
// ReLU comes only with a bias (cudnnConvolutionBiasActivationForward needs one).
enum {
    DNN_EPI_BIAS = 1, // + bias[channel]
    DNN_EPI_RELU = 2, // then max(., 0)
    DNN_EPI_Z = 4,    // + z, a tensor of the output's shape
    // Layout flags riding in the same word (the module blob's format is unchanged):
    DNN_LAYOUT_NHWC = 8,  // X, z and Y stored channels-last (NHWC); else NCHW
    DNN_FILTER_KRSC = 16, // W stored K x R x S x C/groups (cuDNN's NHWC filter); else KCRS
};
#define DNN_EPI_MASK 7
// cudnnMathType_t.
enum {
    DNN_MATH_DEFAULT = 0,
    DNN_MATH_TENSOR_OP = 1,
    DNN_MATH_TENSOR_OP_CONVERT = 2, // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (to half)
    DNN_MATH_FMA = 3,
};
// cudnnDataType_t of the tensors.
enum { DNN_DATA_FLOAT = 0, DNN_DATA_HALF = 2, DNN_DATA_BFLOAT16 = 9 };
// DnnCall.math packs the cudnnMathType_t (bits 0-7) with the cudnnDataType_t of X, W, the bias,
// z and Y (bits 8-15): the CUDA module blob stores math as one u32, so the type travels with
// every call unchanged, and a float32 call (type 0) is the bare math type it always was.
#define DNN_MATH(math, dtype) ((int32_t)((math) | (dtype) << 8))
#define DNN_MATH_TYPE(m) ((m)&0xff)
#define DNN_DATA_TYPE(m) (((m) >> 8) & 0xff)
// cudnnConvolutionFwdAlgo_t values are 0 .. DNN_ALGO_COUNT - 1.
#define DNN_ALGO_COUNT 8
#define DNN_ALGO_IMPLICIT_PRECOMP_GEMM 1
#define DNN_ALGO_FFT 4
#define DNN_ALGO_FFT_TILING 5
#define DNN_ALGO_WINOGRAD 6
#define DNN_ALGO_WINOGRAD_NONFUSED 7
// The workspace an algorithm may ask for (FFT algorithms of large convolutions ask for more;
// they are left out).
#define DNN_MAX_WORKSPACE ((uint64_t)128 << 20)

// One call. Plain data: stored in the launch table.
typedef struct DnnCall {
    int32_t n, c, h, w;                // X: n x c x h x w
    int32_t k, r, s;                   // W: k x c/groups x r x s
    int32_t groups;                    // 1 ... c; c/groups input channels per group
    int32_t pad[2], stride[2], dil[2]; // (height, width); the padding is symmetric
    int32_t p, q;                      // Y: n x k x p x q
    int32_t epilogue;                  // DNN_EPI_* flags
    float alpha;
    int32_t math;                      // DNN_MATH(DNN_MATH_*, DNN_DATA_*)
    int32_t algo;                      // cudnnConvolutionFwdAlgo_t; -1 before a config chose one
    int32_t in_x, in_w, in_bias, in_z; // candidate input positions (cugen.h ABI); -1: none
    uint64_t workspace;                // bytes the algorithm needs
    uint64_t version;                  // cudnnGetVersion() it was chosen with
} DnnCall;

// KernelConfig.p[] of class CUCLS_CUDNN: the algorithm, the math type, the workspace bytes, the
// heuristic rank.
enum { DNP_ALGO = 0, DNP_MATH = 1, DNP_WORKSPACE = 2, DNP_RANK = 3 };

// The typed config of CUCLS_CUDNN (cugen.h's typed configs): p[]'s slots, and the tensors' type
// the desc names beside them ("cls=cudnn algo=NAME math=fma|default|tensor_op|
// tensor_op_convert", then " data=half|bf16" for half tensors; unpacked from the desc, float
// where it names none).
typedef struct CuDnnConfig {
    int64_t algo;      // DNP_ALGO: cudnnConvolutionFwdAlgo_t
    int64_t math;      // DNP_MATH: DNN_MATH_* (the bare math type)
    int64_t workspace; // DNP_WORKSPACE: bytes the algorithm needs with that math type
    int64_t rank;      // DNP_RANK: its rank in the heuristic's answer
    int data;          // DNN_DATA_* of the tensors (desc only)
} CuDnnConfig;
void dnn_config_pack(const CuDnnConfig *dc, KernelConfig *k);
bool dnn_config_unpack(const KernelConfig *k, CuDnnConfig *dc);

// The candidate's call without an algorithm (algo -1, workspace 0, math the one the precision
// asks the heuristics for; version of this machine's library, 0 without one); false when cuDNN
// cannot compute this candidate exactly. opt: the compile's options (cugen_prec_of).
bool dnn_analyse(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt, DnnCall *call);

// Whether the library loads on this machine (cached; searched for once).
bool dnn_available(void);
// cudnnGetVersion() of the loaded library (e.g. 91400 for 9.14.0); 0 when absent.
uint64_t dnn_version(void);
// The path or soname that was opened, or the reason none was.
const char *dnn_describe_load(void);

// Up to k configs of class CUCLS_CUDNN, one per heuristic algorithm and math type the precision
// allows whose workspace is at most DNN_MAX_WORKSPACE (best first; under fp32 no Winograd
// algorithm, whose transforms miss the fp32 check), desc
// "cls=cudnn algo=NAME math=fma|default|tensor_op|tensor_op_convert" (half tensors: and
// " data=half|bf16"); KernelConfig.p[DNP_MATH] holds the bare math type. Needs the GPU hw
// describes; 0 when the library, the device or the candidate does not allow any.
int dnn_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, const TargetOptions *opt,
                KernelConfig *out, int k);
// The same for an analysed call (dnn_analyse's) on the GPU of that ordinal (cudnn.c: the
// library side; dnn_configs is the candidate side, cudnn_analysis.c).
int dnn_configs_of_call(DnnCall call, int ordinal, const TargetOptions *opt, KernelConfig *out,
                        int k);
// The call of a config dnn_configs returned under the same opt (ST_UNSUPPORTED when the
// candidate is not one).
int dnn_call(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
             const TargetOptions *opt, DnnCall *call, Err *e);

// One call made ready to run: its cuDNN descriptors.
typedef struct DnnOp {
    DnnCall call;
    void *x, *y, *bias; // cudnnTensorDescriptor_t
    void *w;            // cudnnFilterDescriptor_t
    void *conv;         // cudnnConvolutionDescriptor_t
    void *act;          // cudnnActivationDescriptor_t (with a bias)
} DnnOp;

// Refuses a call chosen with another library version: "compiled with cuDNN X, this machine has
// Y: recompile" (ST_INVALID), or ST_UNSUPPORTED when there is no library.
int dnn_check_version(const DnnCall *call, Err *e);
// Creates the process's cuDNN handle for device `ordinal` (one per GPU) if need be (binding its
// primary context on the calling thread). Call it before capturing calls into a CUDA graph:
// creating a handle is not capturable. ST_UNSUPPORTED without the library or a GPU.
int dnn_init(int ordinal, Err *e);
int dnn_op_create(const DnnCall *call, DnnOp *op, Err *e);
void dnn_op_destroy(DnnOp *op); // accepts a zeroed op
// Queues the call on stream (capturable): x, w, bias, z the device addresses of its operands
// (0 for an absent one), y the output; ws a device buffer of at least call.workspace bytes.
// It runs with the handle of the GPU whose context is current on the calling thread
// (cuda_current_ordinal; dnn_init made it). The handles are shared: calls from several threads
// are serialised.
int dnn_op_run(const DnnOp *op, CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr z,
               CUdeviceptr y, CUdeviceptr ws, uint64_t ws_bytes, CUstream stream, Err *e);
// Plausibility of an untrusted call (from a blob): false and a reason in why.
bool dnn_call_valid(const DnnCall *call, char *why, size_t n);
// A one-line description of the call (comments, messages).
void dnn_call_str(const DnnCall *call, char *buf, size_t n);

#endif
