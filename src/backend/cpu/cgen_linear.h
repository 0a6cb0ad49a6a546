// The C target's emitter for candidates built around one LINEAR primitive (emit_linear.c,
// emit_matmul.c, emit_conv.c, emit_winograd.c): matmul (batched, broadcast batch dims) as a BLIS-style packed GEMM
// with an AVX-512/AVX2/portable register-tile micro-kernel, GEMV and dot paths for skinny
// products; 1-, 2- and 3-D convolution and transposed convolution as an implicit GEMM (patch
// panels packed per tile, never a materialised im2col; the transposed one gathers input pixels
// where the stride divides); 3x3 stride-1 convolution also as Winograd F(2x2) / F(4x4);
// depthwise 2-D convolution as a direct kernel. Pointwise primitives
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

// The kernel bodies a linear config selects (CLinConfig.variant).
enum {
    CLIN_TILE = 0,   // the packed GEMM: matmul, implicit-GEMM conv ("v=tile")
    CLIN_GEMV = 1,   // M <= 8: jb columns of every row per task, B streamed once ("v=gemv")
    CLIN_DOT = 2,    // N <= 4: dot products along K ("v=dot")
    CLIN_DIRECT = 3, // depthwise 2-D conv, direct (cls=dwconv "v=direct")
    CLIN_COL2IM = 4, // transposed conv as the GEMM of W^T and X, then col2im ("v=col2im")
    CLIN_PADCONV = 5, // 2-D conv read from a zero-padded, stride-phase-split copy of X's rows, no
                      // im2col (lin_emit_padconv; "v=padconv")
    CLIN_WINOGRAD = 6 // 3x3 stride-1 conv as Winograd F(m x m, 3 x 3), W transformed at load
                      // (lin_emit_winograd; "v=winograd")
};
// How the tile variants read B (CLinConfig.packb): in place (0), packed per call into panels
// (1), or packed once at load by fn_prepack into the panel order the kernel reads in place (2).
// CLinConfig.packa: A in place (0) or packed (1); padconv: W packed per task (1) or reordered
// once at load into mr-row panels per kc-block (2). Configs with packb = CLIN_PACK_PREPACKED are
// offered where Lin.b_prepack_ok (see fn_prepack in cgen_lin_emit), padconv configs with packa
// = CLIN_PACK_PREPACKED where Lin.w_prepack_ok.
enum { CLIN_PACK_DIRECT = 0, CLIN_PACK_PER_CALL = 1, CLIN_PACK_PREPACKED = 2 };

// A linear kernel's config (CCLS_MATMUL, CCLS_CONV, CCLS_DWCONV): the variant and its knobs;
// fields a variant does not use are 0. Canonical desc, by variant:
//   tile, col2im: "cls=C v=tile|col2im mr=.. nr=.. kc=.. mc=.. nc=.. packA=.. packB=.."
//   padconv:      "cls=C v=padconv mr=.. nr=.. kc=.. mc=.. rows=.. packA=.."
//   winograd:     "cls=conv v=winograd m=2|4 mr=.. nr=.. mc=.. rows=.."
//   gemv:         "cls=C v=gemv jb=.."
//   dot, direct:  "cls=C v=dot", "cls=C v=direct"
// (C: matmul, conv, dwconv). KernelConfig.p[]: variant, mr, nr (gemv: jb), kc (winograd: m), mc,
// nc (padconv, winograd: rows), packa, packb.
typedef struct CLinConfig {
    int cls;            // CCLS_MATMUL, CCLS_CONV or CCLS_DWCONV
    int variant;        // CLIN_*
    int mr, nr;         // register tile: rows x columns (tile, col2im, padconv)
    int64_t kc, mc, nc; // cache blocks of K, M, N (BLIS; padconv: kc and mc)
    int64_t rows;       // padconv: output rows per task; winograd: tile rows per task
    int wm;             // winograd: output tile m (F(m x m, 3 x 3)), 2 or 4
    int64_t jb;         // gemv: output columns per task
    int packa, packb;   // CLIN_PACK_* (packb: tile and col2im only)
} CLinConfig;
// Writes t into k: cls, p[] (unused slots zero), desc; score 0.
void cgen_lin_config_pack(const CLinConfig *t, KernelConfig *k);
// Reads k's p[] as the emitter does (the fields of k's variant; the rest 0).
void cgen_lin_config_unpack(const KernelConfig *k, CLinConfig *t);

// Exactly one LINEAR (matmul, or convolution / transposed convolution with 1 to 3 spatial dims;
// float32), no OPAQUE or REDUCE primitive, epilogue primitives elementwise at the LINEAR's output
// shape, and every value expressible by cexpr.
bool cgen_lin_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs, best estimate first (score: the hardware model's seconds); returns how many.
int cgen_lin_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
// Appends the definition of `void fn(const void *const *in, void *out)` and its static helpers
// (named fn_*) to src. A config with packb = CLIN_PACK_PREPACKED (a constant B) also defines
// `int fn_prepack(int input, const void *src, void *dst)`: the kernel then reads that input in
// the layout fn_prepack writes (the same bytes, reordered; the winograd variant's transformed
// weights are larger: target.h's size query), which whoever loads the kernel must apply once to
// the constant (the CPU session, the kernel lab, orch export's model_init).
int cgen_lin_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);
// Vector helpers (orch_lv_*) the micro-kernels use; appended after cgen_prelude().
const char *cgen_lin_prelude(void);

// ---- internal: shared by emit_linear.c, emit_matmul.c and emit_conv.c only ----
#ifdef ORCH_CGEN_LINEAR_INTERNAL
#include "../../codegen/linear_values.h"
#include "cgen.h"

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
// The register-tile micro-kernel fn_NAME(kc, a, b, rsb, c, ldc, accum) on a packed A panel (mr
// values per k) and B rows rsb floats apart, nr columns.
void lin_emit_uk(Emit *E, const char *name, int mr, int nr);

// emit_winograd.c. Whether the winograd variant applies: a 2-D 3x3 conv, stride 1, dilation 1,
// one group of at least LIN_WINO_MIN_C input channels (fewer leave the GEMMs too short to pay
// for the transforms), W a constant read by the conv alone (transformed at load); X a kernel
// input or computed by a fused prologue.
#define LIN_WINO_MIN_C 8
bool lin_winograd_ok(const Lin *L);
// A task's scratch bytes (padded input rows, transformed input, GEMM results) for m, R tile rows
// and the register tile.
double lin_winograd_bytes(const Lin *L, int m, int64_t R, int nr, int mr);
int lin_emit_winograd(Emit *E, Err *e);
int lin_emit_dot(Emit *E, Err *e);

// emit_conv.c: the patch packer of a conv reading X in place (fn_packb's body; kc_max: the
// config's kc), the depthwise direct kernel.
void lin_emit_packb_conv(Emit *E, int nr, int64_t kc_max);
int lin_emit_dw(Emit *E, Err *e);
// Transposed conv as GEMM + col2im: the matmul view of its GEMM col[(m, kernel offset)][pixel] =
// sum_c W[c][m][offset] X[c][pixel] (X and W kernel inputs), and the kernel using it.
bool lin_convt_col_view(const Lin *L, Lin *G);
int lin_emit_col2im(Emit *E, Err *e);
#endif

#endif
