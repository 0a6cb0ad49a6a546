// The C target's emitter for candidates built around one LINEAR primitive (emit_linear.c,
// emit_matmul.c, emit_conv.c): matmul (batched, broadcast batch dims) as a BLIS-style packed GEMM
// with an AVX-512/AVX2/portable register-tile micro-kernel, GEMV and dot paths for skinny
// products; 1-, 2- and 3-D convolution and transposed convolution as an implicit GEMM (patch
// panels packed per tile, never a materialised im2col; the transposed one gathers input pixels
// where the stride divides); depthwise 2-D convolution as a direct kernel. Pointwise primitives
// feeding the LINEAR's operands (prologues) are evaluated while packing; pointwise primitives
// after it up to the sink (epilogues) are applied as each output tile is finished. The candidate
// is codegen's batch of GEMMs (linear_spec.h); values come from codegen (linear_values.h, cexpr.h).
// Needs: a verified primitive graph and a candidate of it. Guarantees: emitted kernels follow the
// kernel ABI of target.h and compute the candidate's output as prim_interp.c does, up to float
// rounding (sums are reassociated).
#ifndef ORCH_CGEN_LINEAR_H
#define ORCH_CGEN_LINEAR_H

#include "../../base/strbuf.h"
#include "../../candidates/candidates.h"
#include "../target.h"

// Kernel classes of the linear emitter (KernelConfig.cls; 1 and 2 are cgen.h's).
enum { CCLS_MATMUL = 3, CCLS_CONV = 4, CCLS_DWCONV = 5 };

// Exactly one LINEAR (matmul, or convolution / transposed convolution with 1 to 3 spatial dims;
// float32), no OPAQUE or REDUCE primitive, epilogue primitives elementwise at the LINEAR's output
// shape, and every value expressible by cexpr.
bool cgen_lin_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs, best estimate first (score: the hardware model's seconds); returns how many.
int cgen_lin_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
// Appends the definition of `void fn(const void *const *in, void *out)` and its static helpers
// (named fn_*) to src. A config with P_PACKB = 2 (a constant B) also defines
// `int fn_prepack(int input, const void *src, void *dst)`: the kernel then reads that input in
// the layout fn_prepack writes (the same bytes, reordered), which whoever loads the kernel must
// apply once to the constant (runtime/session.c, the kernel lab; see cprepack.h).
int cgen_lin_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);
// Vector helpers (orch_lv_*) the micro-kernels use; appended after cgen_prelude().
const char *cgen_lin_prelude(void);

// ---- internal: shared by emit_linear.c, emit_matmul.c and emit_conv.c only ----
#ifdef ORCH_CGEN_LINEAR_INTERNAL
#include "../../codegen/linear_values.h"
#include "cgen.h"

// Variants (KernelConfig.p[0]). V_PADCONV: a 2-D conv read from a zero-padded, stride-phase-split
// copy of X's rows (no im2col; lin_emit_padconv), p[P_NC] = output rows per task.
enum { V_TILE = 0, V_GEMV = 1, V_DOT = 2, V_DW = 3, V_COL2IM = 4, V_PADCONV = 5 };
// KernelConfig.p[] slots.
enum { P_VAR, P_MR, P_NR, P_KC, P_MC, P_NC, P_PACKA, P_PACKB };
// P_PACKB values: B read in place (0), packed per call into panels (1), or packed once at load
// by fn_prepack into the panel order the kernel reads in place (2).
enum { PACKB_DIRECT = 0, PACKB_PER_CALL = 1, PACKB_PREPACKED = 2 };
// P_PACKA = 2 (padconv): W reordered once at load into mr-row panels per kc-block.
enum { PACKA_PREPACKED = 2 };
// Configs with P_PACKB = PACKB_PREPACKED are offered where Lin.b_prepack_ok (see fn_prepack in
// cgen_lin_emit), padconv configs with P_PACKA = PACKA_PREPACKED where Lin.w_prepack_ok.

// fn_epi(o, in, b, i0, m, j0, n): the epilogue applied in place to rows i0..i0+m, columns
// j0..j0+n of C[b].
int lin_emit_epilogue(Emit *E, Err *e);
// Whether a kernel forks: enough work to pay for waking the threads.
bool lin_worth_parallel(const Lin *L);

// emit_matmul.c: the packed GEMM (matmul and implicit-GEMM conv), GEMV and dot paths.
int lin_emit_tiled(Emit *E, Err *e);
// Whether lin_emit_padconv applies: a 2-D conv, strides up to 4, dilation 1, X a kernel input;
// the floats a task copies into its padded buffer for R output rows.
bool lin_padconv_ok(const Lin *L);
double lin_padconv_fill(const Lin *L, int64_t R);
int lin_emit_padconv(Emit *E, Err *e);
int lin_emit_gemv(Emit *E, Err *e);
int lin_emit_dot(Emit *E, Err *e);

// emit_conv.c: the patch packer of a conv reading X in place (fn_packb's body), the depthwise
// direct kernel.
void lin_emit_packb_conv(Emit *E, int nr);
int lin_emit_dw(Emit *E, Err *e);
// Transposed conv as GEMM + col2im: the matmul view of its GEMM col[(m, kernel offset)][pixel] =
// sum_c W[c][m][offset] X[c][pixel] (X and W kernel inputs), and the kernel using it.
bool lin_convt_col_view(const Lin *L, Lin *G);
int lin_emit_col2im(Emit *E, Err *e);
#endif

#endif
