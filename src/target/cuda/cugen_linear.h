// Knobs and config layout of the CUDA target's linear emitter (emit_linear_cuda.c: cugen_lin_* of
// cugen.h): matmul / batched matmul as a shared-memory tiled SIMT GEMM (or a TF32 tensor-core
// mma.sync GEMM when the precision allows), skinny products (M <= 8) as GEMV kernels, 2-D
// convolution as an implicit GEMM (1x1 stride-1 as a plain GEMM), depthwise 2-D convolution as a
// direct kernel. Needs nothing beyond cugen.h. Guarantees: the config params below are what
// cugen_lin_configs writes and cugen_lin_emit reads; descs are canonical
// ("cls=cumm v=simt bm=128 bn=128 bk=8 tm=8 tn=8").
#ifndef ORCH_CUGEN_LINEAR_H
#define ORCH_CUGEN_LINEAR_H

#include "cugen.h"

// The arithmetic linear kernels may use. FP32: exact float32 FMAs (the default). TF32: the
// operands are rounded to TF32 (cvt.rna) and multiplied on tensor cores, accumulating in float32;
// only then does cugen_lin_configs offer the tensor-core configs (v=tf32).
typedef enum { CUGEN_PREC_FP32 = 0, CUGEN_PREC_TF32 = 1 } CugenPrecision;
extern CugenPrecision cugen_lin_precision;

// Variants (KernelConfig.p[CUL_VAR]).
enum { CUV_SIMT = 0, CUV_GEMV = 1, CUV_GEMVK = 2, CUV_DW = 3, CUV_TF32 = 4 };
// KernelConfig.p[] slots: block tile BM x BN, K slice BK, per-thread tile TM x TN (simt; warp
// tile for tf32), and for the GEMV kernels the columns per block in CUL_BN.
enum { CUL_VAR = 0, CUL_BM, CUL_BN, CUL_BK, CUL_TM, CUL_TN };

#endif
