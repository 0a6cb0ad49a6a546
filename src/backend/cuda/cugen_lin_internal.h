// Internal interface shared by the CUDA target's linear emitter files only (emit_linear_cuda.c,
// emit_matmul_cuda.c, emit_conv_cuda.c; cuBLASLt's and cuDNN's analyses start from it too): the
// analysis (codegen's Lin, linear_spec.h), the kernel preamble and the epilogue, and the kernel
// bodies per variant.
// Needs: what codegen/linear_values.h needs. Guarantees: every body appends one kernel with the
// ABI of cugen.h to E->s and fills its launch geometry.
#ifndef ORCH_CUGEN_LIN_INTERNAL_H
#define ORCH_CUGEN_LIN_INTERNAL_H

#include "../../codegen/linear_values.h"
#include "affine_load.h"
#include "cugen_linear.h"

// Lin of the candidate (matmul of any rank, 2-D convolution); false when not generated here.
// Operands and LINEAR output all float32, or all float16, or all bfloat16 (half storage); the
// sink float32, or the operands' half type.
bool culin_analyse(const PrimGraph *pg, const Candidate *c, Lin *L);
// The same, letting the LINEAR's result pass through LAYOUTs that move no element
// (prim_layout_is_view) and the elementwise primitives after them, at the same element count:
// for a library call that writes D's bytes (cuBLASLt), whose caller checks the shapes itself.
bool culin_analyse_views(const PrimGraph *pg, const Candidate *c, Lin *L);
// The operands' dtype (DT_FLOAT, DT_FLOAT16 or DT_BFLOAT16) and whether it is a half type.
static inline DType culin_dtype(const Lin *L) {
    return lin_t(L, L->tl)->dtype;
}
static inline bool culin_half(const Lin *L) {
    return culin_dtype(L) != DT_FLOAT;
}
// `ORCH_KERNEL void [__launch_bounds__(nthreads)] fn(OrchArgs a) {`, `in[]` and `o` (a pointer
// to the sink's storage type) declared; with half tensors preceded by the file-scope conversion
// helpers orch_lin_h2f / orch_lin_f2h (float16) and orch_lin_b2f / orch_lin_f2b (bfloat16):
// hardware cvt, round to nearest even.
void culin_kernel_head(const Emit *E, int nthreads);
// `lhs = v;` with the float value v converted to the sink's storage type.
void culin_emit_store(const Emit *E, int ind, const char *lhs, const char *v);
// Half storage: the float expression converting the storage-typed expression x of the
// operands' half type (to_float), or the conversion's name of a float to it (f2h).
void culin_h2f(const Lin *L, const char *x, char *buf, size_t cap);
const char *culin_f2h_fn(const Lin *L);
// Operand values come from linear_values.h's helpers; under half storage the kernel's Emit.load
// reads a half kernel input in place, converted to float (cexpr handles prologues' half loads).
// The candidate's output value from the LINEAR's value `acc` at GEMM row i, column j (C
// expressions; batch coordinates in scope); the value's name goes to dst.
int culin_emit_epi_value(Emit *E, int ind, const char *acc, const char *i, const char *j, char *dst,
                         size_t cap, Err *e);
// The largest split-K workspace (floats: splits x batch x M x N) a kernel may declare.
#define CULIN_SPLIT_MAX_WS (4.0 * 1024 * 1024)
// Static shared memory bytes and estimated registers per thread of a tiled config.
int64_t culin_smem_bytes(const CuLinearConfig *P);
int culin_simt_regs(const Lin *L, const CuLinearConfig *P);

// Kernel bodies (emit_matmul_cuda.c, emit_conv_cuda.c).
int culin_emit_simt(Emit *E, CudaLaunch *ln, Err *e);
int culin_emit_tf32(Emit *E, CudaLaunch *ln, Err *e);
// FP16 / BF16 operands (E->cfg's variant) on mma.sync.m16n8k16, float32 accumulators.
// With half tensors (the variant's type: f16 with float16, bf16 with bfloat16) the operands are
// staged as they are stored (cp.async where aligned), read with ldmatrix.
int culin_emit_mma16(Emit *E, CudaLaunch *ln, Err *e);
int culin_emit_gemv(Emit *E, CudaLaunch *ln, Err *e);
int culin_emit_dw(Emit *E, CudaLaunch *ln, Err *e);
// Direct 2-D convolution for at most CULIN_DIRECT_MAX_M output channels per group whose weights
// fit in shared memory (culin_direct_ok).
int culin_emit_direct(Emit *E, CudaLaunch *ln, Err *e);
bool culin_direct_ok(const Lin *L);
#define CULIN_DIRECT_MAX_M 8
#define CULIN_DIRECT_MAX_W 8192 // weight floats staged in shared memory
// The direct 2-D convolution on the tensor cores (v=f16dc / v=bf16dc; emit_conv_cuda.c): half
// tensors, group 1, stride 1 or 2, dilation 1, windows up to 11 x 11, at most
// CULIN_TCCONV_MAX_OC output channels. A block computes BH x BW output pixels (CUL_BM, CUL_BN;
// BW a multiple of 16) of one image for every output channel (CUL_BK > 0: that many persistent
// blocks, each looping over tiles with the weights staged once): it stages its input tile,
// channels innermost and padded to Cp (a multiple of 16; zeros over the padding), and all the
// weights, tap-major, in shared memory, then each warp multiplies MT (CUL_TM) 16-pixel tiles per
// tap and 16-channel step: the pixels are the mma's M (ldmatrix rows straight from the tile),
// the output channels its N (n8 tiles, zero past OC). No im2col and no K-slice loop, so the
// few output channels of a network's RGB layer (3) waste only the N padding, not 16-row tiles.
#define CULIN_TCCONV_MAX_OC 64
// Up to 8 input channels the tile holds Cp = 4 or 8 channels a pixel and a k step spans
// TPS = 16 / Cp horizontally adjacent taps (packed: a 3-channel RGB input wastes 1/4 of the k
// depth, not 13/16), read as 32-bit fragment loads.
typedef struct CuTcConv {
    CuAffine x, w;        // X (the LINEAR's input) and W, where affine (else read through cexpr)
    bool x16, w16;        // staged by 16-byte cp.async (channels unit-stride, strides multiples
                          // of 8; unpacked only)
    bool wraw;            // W staged as a copy of its kernel input (not w16); B gathered
    bool packed;          // C <= 8: a k step spans TPS taps of Cp channels
    int64_t Cp, TPS, SPK; // channels a pixel in the tile; taps a k step; k steps a kernel row
                          // (packed; unpacked: TPS 1, SPK = KW, Cp / 16 steps a tap)
    int64_t NT;           // n8 tiles of output channels
} CuTcConv;
// A config's tile geometry: input tile rows x columns x channel stride (halves), the weight rows'
// k extent and stride, dynamic shared memory (bytes) and threads.
typedef struct CuTcGeo {
    int64_t TH, TW, CpS, KS, WS, wsm, smem; // wsm: halves of the weights' area
    int threads;
} CuTcGeo;
bool culin_tcconv_ok(const Lin *L, CuTcConv *t);
// Registers a thread of config P needs (estimate: accumulators, fragments, addresses).
static inline int culin_tcconv_regs(const CuTcConv *t, const CuLinearConfig *P) {
    return (int)(P->tm * t->NT * 4 + 2 * t->NT + 2 * P->tm + 48);
}
// False when the config (BH, BW, MT) is malformed.
bool culin_tcconv_geo(const Lin *L, const CuTcConv *t, const CuLinearConfig *P, CuTcGeo *g);
int culin_emit_tcconv(Emit *E, CudaLaunch *ln, Err *e);
// The cp.async / ldmatrix helpers of the half-storage tensor-core kernels (guarded: one copy per
// translation unit).
const char *culin_half_mma_helpers(void);

#endif
