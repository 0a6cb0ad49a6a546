// Internal interface of the CUDA target's emitters (target_cuda.c dispatches to these):
// pointwise/reduction kernels (cugen_pw_*, emit_pointwise_cuda.c / emit_reduce_cuda.c) and
// matmul/convolution kernels (cugen_lin_*, emit_linear_cuda.c ...). CUDA C for NVRTC, compiled
// for the device's exact architecture; no toolkit header is included (cugen_prelude defines what
// kernels use).
//
// The CUDA kernel ABI:
//     extern "C" __global__ void NAME(OrchArgs a);
//     struct OrchArgs { const void *in[ORCH_CUDA_MAX_IN]; void *out; };  (in cugen_prelude)
// a.in[i] is the device buffer of candidate input c->inputs[i] (canonical order, constants
// included), a.out that of c->output; 256-byte aligned dense row-major buffers; out never
// overlaps an input. The launch geometry is fixed at emit time (shapes are static) and returned
// in CudaLaunch; the runtime launches exactly that, with `smem` bytes of dynamic shared memory.
// An operator kernel (a candidate that is one OPAQUE primitive, ckernel_op_abi of its sink;
// cugen_opq.h) takes the same struct with ORCH_CUDA_OP_SLOTS more slots after its NI inputs:
// a.out is the primitive's output 0, a.in[NI] its output 1 (TopK's indices), each 0 where the
// node leaves it out, and a.in[NI + 1] a device int, the status word: the kernel stores
// CKERNEL_ERR_INDEX (target.h) there when an index operand is out of range and never clears it
// (whoever launches it does, before the launch).
// Needs: a verified primitive graph and a candidate of it. Guarantees: the kernel computes the
// candidate's output as prim.h defines it (float32 in float; the compile driver checks every
// kernel against the primitive interpreter).
#ifndef ORCH_CUGEN_H
#define ORCH_CUGEN_H

#include "../../base/strbuf.h"
#include "../../candidates/candidates.h"
#include "../target.h"
#include "cublaslt.h"
#include "cuda_api.h"
#include "cudnn.h"

#include <string.h>

#define ORCH_CUDA_MAX_IN 32
#define ORCH_CUDA_OP_SLOTS 2 // an operator kernel's output 1 and status word (above)

// CudaLaunch.lib: which library call runs in place of a kernel (0: a generated kernel).
enum { CUDA_LIB_NONE = 0, CUDA_LIB_BLASLT = 1, CUDA_LIB_CUDNN = 2 };

// How the runtime runs one kernel: a generated kernel's launch geometry, or (lib) a library call
// in place of a kernel (cublaslt.h, cudnn.h; grid, block and smem are then zero).
typedef struct CudaLaunch {
    unsigned grid[3], block[3];
    unsigned smem; // dynamic shared memory bytes (> 48 KiB needs the opt-in attribute)
    int lib;       // CUDA_LIB_*: BLASLT, blas says which call; CUDNN, dnn does
    BlasLtCall blas;
    DnnCall dnn;
} CudaLaunch;

// Kernel classes of the CUDA target (KernelConfig.cls). CUCLS_BLASLT: a cuBLASLt matmul
// (cublaslt.h), CUCLS_CUDNN a cuDNN convolution (cudnn.h), each emitted as a call descriptor,
// not as code.
enum {
    CUCLS_POINTWISE = 11,
    CUCLS_REDUCE = 12,
    CUCLS_MATMUL = 13,
    CUCLS_CONV = 14,
    CUCLS_BLASLT = 15,
    CUCLS_CUDNN = 16
};

// ---- typed configs ----
// Each class's knobs as named fields, and a pair of functions per class: pack writes cls, p[]
// (every slot; the ones a class does not use are 0) and the canonical desc into a KernelConfig,
// leaving its score; unpack reads them back (false where the config is of another class). p[]
// and desc are what the profile database and the tests key on: pack writes them exactly as the
// configs have always been written, and unpack followed by pack gives back the same p[] and desc.
// Fields hold p[]'s values as they are (int64_t), so a malformed config reaches the emitter's
// checks unchanged. Classes: CuPointwiseConfig, CuReduceConfig (below), CuLinearConfig
// (cugen_linear.h: matmul and convolution), CuMlpConfig (cugen_mlp.h), CuAttnConfig
// (cugen_attn.h), CuBlasLtConfig (cublaslt.h), CuDnnConfig (cudnn.h), CuOpqConfig (cugen_opq.h).

// What every pack starts with: cls set, flags, p[] and desc cleared (the score is the caller's).
static inline void cugen_config_clear(KernelConfig *k, int cls) {
    k->cls = cls;
    k->flags = 0; // every CUDA config computes as exactly as its precision says
    memset(k->p, 0, sizeof k->p);
    memset(k->desc, 0, sizeof k->desc);
}

// CUCLS_POINTWISE: p[0] block, p[1] ept, p[2] vec, p[3] tr; desc "cls=cupw bs=B vec=V ept=E", or
// "cls=cupw bs=B tr=A" for the tiled transpose.
typedef struct CuPointwiseConfig {
    int64_t block; // threads a block
    int64_t ept;   // elements a thread computes a grid-stride step
    int64_t vec;   // 4: groups of 4 (float4; ushort4 for half types), 1: scalar elements
    int64_t tr;    // A + 1: the output in 32 x 32 tiles over axis A and the last axis, staged
                   // through shared memory (ept and vec then unused); 0: the flat walk
} CuPointwiseConfig;
void cupw_config_pack(const CuPointwiseConfig *pc, KernelConfig *k);
bool cupw_config_unpack(const KernelConfig *k, CuPointwiseConfig *pc);

// CUCLS_REDUCE: p[0] block, p[1] tpr, p[2] split, p[3] cache, p[5] grid (p[4] unused); desc
// "cls=cured bs=B tpr=T[ split][ cache=C][ grid=G]".
typedef struct CuReduceConfig {
    int64_t block; // threads a block
    int64_t tpr;   // threads a position: 1, 32 or the block; with split, 2..32
    int64_t split; // 1: 32 positions a block, tpr threads each at a stride of 32 (block 32 tpr)
    int64_t cache; // row cache slots a thread (0: none)
    int64_t grid;  // blocks sharing each position group across a grid barrier (0 or 1: none)
} CuReduceConfig;
void cured_config_pack(const CuReduceConfig *rc, KernelConfig *k);
bool cured_config_unpack(const KernelConfig *k, CuReduceConfig *rc);

// ---- pointwise and reduction kernels ----
bool cugen_pw_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt);
int cugen_pw_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                     const TargetOptions *opt, KernelConfig *out, int k);
int cugen_pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                  const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                  CudaLaunch *launch, Err *e);

// ---- matmul and convolution kernels (exactly one LINEAR) ----
bool cugen_lin_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt);
int cugen_lin_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k);
int cugen_lin_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e);

// Dispatches on cfg->cls: CUCLS_OPAQUE to cugen_opq_emit, CUCLS_POINTWISE / CUCLS_REDUCE to
// cugen_pw_emit, CUCLS_MATMUL /
// CUCLS_CONV to cugen_lin_emit, CUCLS_BLASLT to blaslt_call and CUCLS_CUDNN to dnn_call
// (launch->lib set, only a comment appended to src) (target_cuda.c). The CudaEmitFn of
// cuda_lab.h. Like every emit function here, a pure function of its arguments: opt (the
// compile's options: the precision, half storage) decides with the config what code is emitted.
int cugen_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const CudaHw *hw,
               const TargetOptions *opt, const char *fn, StrBuf *src, CudaLaunch *launch, Err *e);

// The text every CUDA translation unit starts with: orch_cuda_prelude() (nvrtc.h), the OrchArgs
// struct, and device versions of every orch_* helper the value expressions (codegen/cexpr.h)
// call.
const char *cugen_prelude(void);
// Makes x emit the CUDA dialect (cexpr_set_cuda), with the prelude's special-function-unit
// transcendentals (cexpr_set_fast_math) when fast: cugen_fast_math of the compile's options.
// Every CUDA emitter's Cexpr goes through it, so the code a config emits follows the precision
// the compile runs under (the compile driver keys its profile records by it too).
typedef struct Cexpr Cexpr;
void cugen_cexpr_dialect(Cexpr *x, bool fast);
// Whether the emitters take the fast transcendentals: under a reduced precision (tf32, fp16,
// bf16), whose tolerances are far above their errors.
static inline bool cugen_fast_math(const TargetOptions *opt) {
    return opt->precision != PREC_FP32;
}

#endif
