// The pieces of operator-kernel text (opaque_spec.h) that the emitters of both targets write the
// same way: stored values to and from the type they are computed in, a CumSum step, an index read,
// wrapped once and checked, the ordering keys of TopK and Hardmax, a scatter's combine, Hardmax's
// scan of a line, TopK's output stores, Trilu's diagonal, operand pointers. The text is plain C
// over int64_t, which is also valid CUDA C; where the targets spell a thing differently (CUDA's
// __restrict__, its device qualifiers and rounded intrinsics, which nothing fuses into an FMA) the
// dialect says which, and what only a backend knows (how a kernel records a bad index) comes in
// as text.
// Needs: an OpqSpec from opq_analyse for the spec-reading helpers. Guarantees: statements are
// appended to the StrBuf with sb_line's indentation; expressions go into the caller's buffer.
#ifndef ORCH_CODEGEN_OPAQUE_VALUES_H
#define ORCH_CODEGEN_OPAQUE_VALUES_H

#include "../base/strbuf.h"
#include "opaque_spec.h"

// Which target's spelling. C: `restrict`, operands in[j], output out[0], `static inline`
// helpers. CUDA: `__restrict__`, operands a.in[j], output a.out, __device__ helpers, locals
// that never change declared const.
typedef enum OpqDialect { OPQ_DIALECT_C, OPQ_DIALECT_CUDA } OpqDialect;

// The float type a value of dtype t is computed in (float16/bfloat16: float, exact).
const char *opq_ftype(DType t);
// A stored value of t (expression e) as its computation type, and back, into buf.
void opq_load_f(DType t, const char *e, char *buf, size_t n);
void opq_store_f(DType t, const char *e, char *buf, size_t n);

// One step of a sum, a + v (a: the sum so far, v: the next element; both stored values of t) as
// the reference computes it, into buf: floats in their computation type rounded back to t,
// integers wrapping.
void opq_cumsum_step(DType t, const char *a, const char *v, char *buf, size_t n);
// The statements of one step of a CumSum line: dst gets acc before the step when exclusive,
// after it otherwise.
void opq_emit_cumsum_acc(StrBuf *b, int indent, DType t, bool exclusive, const char *acc,
                         const char *v, const char *dst);

// Declares int64_t v read from index expression src, wraps a negative one once by size and
// checks it lies in [0, size): on failure runs `mark` (how the kernel records a bad index), then
// `on_bad`.
void opq_emit_index(StrBuf *b, int indent, const char *v, const char *src, const char *size,
                    const char *mark, const char *on_bad);

// Whether t's ordering keys need 64 bits, and their unsigned type.
bool opq_wide_key(DType t);
const char *opq_key_type(DType t);
// The helper fn_key(T v): an unsigned key whose order is the reference's order of t's values
// (NaN above every number, all NaN equal, -0 equal to +0), reversed for !largest. Floats are
// keyed in their own bits (sign-magnitude made monotone) without branches, so a loop of keys
// vectorises.
void opq_emit_key(StrBuf *b, OpqDialect d, const char *fn, DType t, bool largest);

// y = combine(y, u) for a scatter's reduction red over elements of t (yv, uv: lvalue and value),
// in the reference's arithmetic (combine in src/ops/indexing.c): floats in their computation
// type, integers wrapping in 64 bits.
void opq_emit_combine(StrBuf *b, OpqDialect d, int indent, DType t, OpqRed red, const char *yv,
                      const char *uv);

// Hardmax: the constants one and zero of t, then the scan of the line at `base` (LEN elements
// INNER apart) for its first best (a later element must rank strictly higher: NaN above all, as
// ArgMax) and the line's output. bj is declared by the caller.
void opq_emit_hardmax_consts(StrBuf *b, int indent, DType t);
void opq_emit_hardmax_scan(StrBuf *b, OpqDialect d, const char *fn, DType t);

// TopK: stores output position `to` of the line xl (elements INNER apart) from position pos, into
// each output present (yv, yi may be NULL).
void opq_emit_topk_store(StrBuf *b, int indent, const char *pos);

// Trilu: int64_t k, the diagonal (operand karg when the spec has one, 0 otherwise), clamped to
// [-(ROWS + COLS), ROWS + COLS].
void opq_emit_trilu_k(StrBuf *b, const OpqSpec *s, const char *karg);

// OneHot: declares int64_t v, the index at (o, i) of `ind` (INNER apart), wrapped once by DEPTH.
// An index still outside [0, DEPTH) selects nothing (no error), as in the reference op.
void opq_emit_one_hot_index(StrBuf *b, int indent);

// LpPool: the elements of an input plane, the outputs of a plane and the taps of a window.
void opq_pool_sizes(const PoolGeom *g, int64_t *plane, int64_t *outs, int64_t *taps);
// LpPool: skips a tap outside the input (`inside` in scope), else declares double v, |x| at
// xp[row] in double (exact for every float type).
void opq_emit_lp_tap(StrBuf *b, OpqDialect d, DType t);

// GridSample / RoiAlign: the helpers one kernel's elements call, prefixed fn. GridSample (4-D or
// 5-D X): fn_plan_of(gp, &plan) (what the grid point whose coordinates start at gp reads, the
// same for every channel) and fn_apply(xp, &plan) (its value over image xp); RoiAlign: fn_roi(xp,
// roi, ph, pw) (output (ph, pw) of ROI roi over plane xp). Values in double, step for step
// src/ops/sample.c's reference arithmetic, every operation rounded on its own (no FMA); fn_out(v)
// makes a NaN the canonical one. opq_emit_sample_close ends the helpers' arithmetic rule after the
// kernel. opq_sample_store: such a double stored as t (half types through float rounded to odd, as
// elem_set_f64).
void opq_emit_sample_helpers(StrBuf *b, OpqDialect d, const char *fn, const OpqSpec *s);
void opq_emit_sample_close(StrBuf *b, OpqDialect d);
void opq_sample_store(DType t, const char *v, char *buf, size_t n);

// `const T *R name = (const T *)IN[slot];` and `T *R name = (T *)OUT;` in d's spelling.
void opq_emit_in_ptr(StrBuf *b, OpqDialect d, int indent, const char *ct, const char *name,
                     int slot);
void opq_emit_out_ptr(StrBuf *b, OpqDialect d, int indent, const char *ct, const char *name);

#endif
