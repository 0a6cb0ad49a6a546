// Knobs and config layout of the CUDA target's linear emitter (emit_linear_cuda.c: cugen_lin_* of
// cugen.h): matmul / batched matmul as a shared-memory tiled SIMT GEMM (or a TF32 / FP16 / BF16
// tensor-core mma.sync GEMM when the precision allows), skinny products (M <= 8) as GEMV kernels,
// 2-D convolution as an implicit GEMM (1x1 stride-1 as a plain GEMM), depthwise 2-D convolution as
// a direct kernel. Needs nothing beyond cugen.h. Guarantees: the config params below are what
// cugen_lin_configs writes and cugen_lin_emit reads; descs are canonical ("cls=cumm v=simt bm=128
// bn=128 bk=8 tm=8 tn=8").
#ifndef ORCH_CUGEN_LINEAR_H
#define ORCH_CUGEN_LINEAR_H

#include "cugen.h"

// The arithmetic linear kernels may use: the compile's TargetOptions.precision (orch compile
// --precision; target.h). FP32: exact float32 FMAs (the default). TF32: the operands are rounded
// to TF32 (cvt.rna) and multiplied on tensor cores (mma.m16n8k8), accumulating in float32; only
// then does cugen_lin_configs offer those configs (v=tf32). FP16 / BF16: operands rounded to half
// / bfloat16 (cvt.rn) as they are staged into shared memory, multiplied on tensor cores
// (mma.m16n8k16), accumulation and storage stay float32 (v=f16 / v=bf16). Under every precision
// the SIMT float32 configs stay offered too: the measured times decide.
// The options are an argument of every configs, supports and emit function (no global holds
// them), so compiles with different options can share a process. They only select the configs
// offered (and, through cugen_fast_math, the transcendentals the code calls); cugen_lin_emit
// follows the config given, whatever it says.
// Half storage (the candidate's operands all float16 or all bfloat16, as the storage pass leaves
// them under fp16 / bf16): every variant reads and writes the tensors as stored, accumulating in
// float32, and the tensor-core variant of their type (v=f16 / v=bf16) is offered whatever the
// precision says (products of halves are exact in float32, so it is as exact as SIMT); TF32 never
// is. Under half storage (TargetOptions.half_storage) float32 products are computed exactly
// whatever the precision says (SIMT FMAs, cuBLASLt's and cuDNN's float32 math): the only float32
// products left there are those the storage pass kept float32 for their range, whose operands
// rounded to half would overflow (pass_store_reduced).
// The precision products of dtype dt are offered under: FP32 for float32 under half storage,
// else opt->precision.
static inline Precision cugen_prec_of(const TargetOptions *opt, DType dt) {
    return dt == DT_FLOAT && opt->half_storage ? PREC_FP32 : opt->precision;
}

// Variants (KernelConfig.p[CUL_VAR]).
enum {
    CUV_SIMT = 0,
    CUV_GEMV = 1,
    CUV_GEMVK = 2,
    CUV_DW = 3,
    CUV_TF32 = 4,
    CUV_F16 = 5,    // FP16 operands, mma.m16n8k16
    CUV_BF16 = 6,   // BF16 operands, mma.m16n8k16
    CUV_DIRECT = 7, // 2-D convolution to a few output channels: a thread per output pixel
    CUV_TCCONV = 8  // direct 2-D convolution on the tensor cores (half tensors): pixels as M
};
// KernelConfig.p[] slots: block tile BM x BN, K slice BK, per-thread tile TM x TN (simt; warp
// tile for the tensor-core variants), and for the GEMV kernels the columns per block in CUL_BN.
enum { CUL_VAR = 0, CUL_BM, CUL_BN, CUL_BK, CUL_TM, CUL_TN, CUL_SPLIT };
// The typed config (cugen.h's typed configs) of CUCLS_MATMUL and CUCLS_CONV: the slots above as
// named fields. desc: "cls=cumm|cuconv v=simt|tf32|f16|bf16 bm=.. bn=.. bk=.. tm=.. tn=..[ sk=S]",
// "v=gemv jb=32", "v=gemvk jb=8", "v=direct bs=B", "v=f16dc|bf16dc bh=.. bw=.. mt=..[ pb=P]",
// "v=dw".
typedef struct CuLinearConfig {
    bool conv;     // class CUCLS_CONV (desc cls=cuconv), else CUCLS_MATMUL (cls=cumm)
    int64_t var;   // CUL_VAR: CUV_*
    int64_t bm;    // CUL_BM: block tile rows; tcconv: output rows of a block (BH)
    int64_t bn;    // CUL_BN: block tile columns; tcconv: output columns of a block (BW); gemv,
                   // gemvk: columns a block (jb); direct: threads a block
    int64_t bk;    // CUL_BK: K slice; tcconv: persistent blocks (0: a block a tile)
    int64_t tm;    // CUL_TM: thread tile rows (simt), warp tile rows (32; tensor cores);
                   // tcconv: m16 pixel tiles a warp (MT)
    int64_t tn;    // CUL_TN: thread tile columns (simt), warp tile columns (32; tensor cores)
    int64_t split; // CUL_SPLIT: split-K blocks a tile (0 or 1: none)
    bool bf16;     // tcconv: its type is bfloat16 (desc v=bf16dc, else v=f16dc); in the desc
                   // only, not in p[]
} CuLinearConfig;
void culin_config_pack(const CuLinearConfig *lc, KernelConfig *k);
bool culin_config_unpack(const KernelConfig *k, CuLinearConfig *lc);

// CUL_SPLIT (simt and the tensor-core variants tf32 / f16 / bf16; 0 or 1: none): split-K over
// S thread blocks per output tile, for products whose tiles cannot fill the SMs (ResNet's 7x7-
// and 14x14-pixel convs, M = 128 matmuls with a long K). Each block multiplies one K range (a
// run of whole BK slices: the tensor cores' K step and the cp.async staging stay aligned; the
// last ranges may be partial or empty) and writes its float32 partial tile to a workspace in the
// module's global memory (a __device__ array of the kernel, at most CULIN_SPLIT_MAX_WS floats);
// the last block of a tile to finish (a per-tile counter, reset by that block) sums the S
// partials in split order, so the result is deterministic, and runs the epilogue. Blocks of one
// kernel launch share the counters: launches of one kernel must not overlap.

#endif
