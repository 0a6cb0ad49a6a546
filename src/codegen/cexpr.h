// Value expressions shared by the C and CUDA emitters: the value of a tensor at an index, emitted
// as statements of C (or of CUDA C, the dialect of cexpr_set_cuda) by recursion through a
// candidate's pointwise primitives, and the C types and literals values take.
// Needs: a verified primitive graph and a candidate of it. Guarantees: the emitted code computes
// exactly what prim_interp.c computes (float32 math may run in float; float16/bfloat16 values are
// computed in double and rounded after every instruction), calling only helpers named orch_*,
// which each target's prelude defines (cgen_prelude, cugen_prelude).
#ifndef ORCH_CODEGEN_CEXPR_H
#define ORCH_CODEGEN_CEXPR_H

#include "../base/strbuf.h"
#include "../candidates/candidates.h"

// ---- C types of values ----
// Storage type of a dtype in buffers ("float", "uint16_t" for float16/bfloat16, "uint8_t" for
// bool, ...), and the type of locals holding its values ("float", "double" for float16/bfloat16
// and float64, the storage type for integers and bool).
const char *cgen_ctype(DType t);
const char *cgen_vtype(DType t);
// Writes into buf a C expression converting the storage-typed lvalue/expression `x` of dtype t to
// its value type, and the reverse for stores (value already representable).
void cgen_load_expr(DType t, const char *x, char *buf, size_t cap);
void cgen_store_expr(DType t, const char *v, char *buf, size_t cap);
// A C literal of value type for v converted to dtype t as prim_interp converts constants
// (saturating for integers; "NAN", "INFINITY" spelled out).
void cgen_literal(DType t, double v, char *buf, size_t cap);
// Position of tensor t in c->inputs, or -1.
int cgen_input_pos(const Candidate *c, int t);

// ---- value expressions ----
// Emits C statements computing the value of a tensor at a multi-index, recursing through the
// candidate's pointwise primitives (ELEMWISE, LAYOUT incl. concat) down to kernel inputs (loads
// from `in[j]`, which the kernel declares as `const void *const *in`) and to tensors produced in
// the kernel by other primitives (REDUCE, LINEAR), which a reader callback supplies.
//
// Index maps are composed symbolically over the root coordinates (the index the caller passes):
// where the composed map of a leaf is affine in them the load is `in[base + sum(r_d * s_d)]`, so
// a loop over a root coordinate stays unit-stride; elsewhere (tables, gathers, pads, concat) it
// emits general code. Static tables go to the `decls` buffer (file scope, before the function).

typedef struct Cexpr Cexpr;

// A request to the reader: tensor `tensor` (rank `rank`) at coordinates idx[d] (C expressions of
// type int64_t). When `affine` is true, coordinate d also equals cst[d] + sum_r coef[d][r] *
// root_r over the root coordinates of the cexpr_value call that led here (the reduce emitter uses
// this to check that a read stays on the current row).
typedef struct CexprRead {
    int tensor;
    int rank;
    const char *const *idx;
    bool affine;
    const int64_t (*coef)[ORCH_MAX_RANK];
    const int64_t *cst;
} CexprRead;

// Writes into out (cap bytes) a C expression of the tensor's value type holding the value, after
// appending any statements it needs to code at `indent`. Returns ST_OK or an error code (set e):
// the emission fails then (an emitter dry-runs to decide what it supports).
typedef int (*CexprReader)(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out,
                           size_t cap, Err *e);

// fn names the kernel (prefix of tables and locals); decls receives file-scope declarations.
Cexpr *cexpr_create(const PrimGraph *pg, const Candidate *c, const char *fn, StrBuf *decls);
void cexpr_free(Cexpr *x); // accepts NULL
void cexpr_set_reader(Cexpr *x, CexprReader fn, void *ctx);
// Whether tensor t is computed inside the candidate by a primitive cexpr recurses through
// (ELEMWISE/LAYOUT), as opposed to a kernel input or a reader-supplied tensor.
bool cexpr_is_pointwise(const Cexpr *x, int t);

// Emits into code (at indent) statements computing tensor t at the root index idx (t's rank C
// expressions of type int64_t, evaluated possibly several times: pass variables); the name of a
// local of type cgen_vtype(t's dtype) holding the value is written to out. Values computed
// earlier at the same index in the same block are reused; call cexpr_forget when code leaves a
// block (a loop body) in which values were computed.
int cexpr_value(Cexpr *x, int t, const char *const *idx, StrBuf *code, int indent, char *out,
                size_t cap, Err *e);
void cexpr_forget(Cexpr *x);
// Flat view of the root: coordinates first..rank-1 of the roots passed to cexpr_value are the
// mixed-radix digits of one variable `var` (the caller passes them as div/mod expressions of it).
// Loads whose offsets are contiguous over those coordinates then read `base + var * s` (one
// unit-stride loop over var); others keep the digits and set the broken flag, which tells the
// caller the flat loop would not stay unit-stride. first < 0: no flat view.
void cexpr_set_flat(Cexpr *x, int first, const char *var);
bool cexpr_flat_broken(const Cexpr *x);
// CUDA C for NVRTC (src/backend/cuda): tables are `__device__ static const`, and input j is read
// through `in<j>[offset]`, a `const T *__restrict__` local the kernel declares, instead of
// `in[j]`. Called helpers keep their names (the CUDA prelude defines device versions).
void cexpr_set_cuda(Cexpr *x, bool cuda);
// Index locals (table lookups, general coordinates) and tables as 32-bit int instead of
// int64_t, for a caller that has checked every offset the kernel forms stays below 2^31 and
// declares its root coordinates int too: 64-bit integer arithmetic is several instructions
// per operation on a GPU, and it was a large share of an elementwise kernel's.
void cexpr_set_index32(Cexpr *x, bool on);
// With the CUDA dialect: exp, sin, cos and sigmoid in float32 call the CUDA prelude's
// special-function-unit versions (orch_fast_*f: a few ulp for exp and sigmoid, ~1e-6 absolute
// for sin/cos over |x| < 1e5), for kernels compiled under a reduced precision, whose tolerance
// those errors are far inside. Off by default (libm accuracy).
void cexpr_set_fast_math(Cexpr *x, bool fast);
// Float32 sin (not CUDA fast math) calls the prelude's common path alone, orch_sinf_guarded(x,
// FLAG), which sets the caller's FLAG (CUDA: a bool; C: an int, passed as &FLAG) where
// |x| > 65536 (its result is then wrong: the caller redoes the elements without the guard,
// rarely: once per warp on CUDA, so that the elements of an unrolled epilogue are free of
// orch_sinf's branch; once per row in C, so that the loop has no library call and vectorises).
// NULL or "": off (C: libm's sinf). Float32 cos likewise calls orch_cosf_guarded.
// cexpr_sin_guards counts the guarded sines and cosines emitted so far.
void cexpr_set_sin_guard(Cexpr *x, const char *flag);
int cexpr_sin_guards(const Cexpr *x);
// A hook for vectorised kernels, consulted (when set) for every load of kernel input j whose
// offset in the flat view with first == 0 is exactly `cst + var` (unit stride along the whole
// root): returning true with an expression of storage type t in out replaces the load.
typedef bool (*CexprLoadHook)(void *ctx, int j, DType t, int64_t cst, char *out, size_t cap);
void cexpr_set_load_hook(Cexpr *x, CexprLoadHook fn, void *ctx);
// A fresh local name "<prefix><n>" unique within the kernel.
void cexpr_fresh(Cexpr *x, const char *prefix, char *out, size_t cap);
// The C type of the locals cexpr_value writes for dtype t (cgen_vtype, but float for half types
// under the CUDA dialect's fast math).
const char *cexpr_vtype(const Cexpr *x, DType t);
// A row cache (the CUDA reduction emitter): while pinned, a request for tensor t at exactly the
// root index of the current cexpr_value call (t shaped as the root, identity map) yields `var`,
// a local the caller filled with cexpr_value of t at that same index (so the value is the same
// to the bit), instead of emitting t's computation again. t < 0 unpins. cexpr_pin_hits counts
// the requests answered so, over the Cexpr's life.
void cexpr_pin(Cexpr *x, int t, const char *var);
int cexpr_pin_hits(const Cexpr *x);

// Interior splitting of an innermost loop (C dialect; a pooling window over a padded input):
// after cexpr_interior_begin(x, var), emission records every padded coordinate it clamps
// branch-free whose form is affine in the root coordinates, as rest + s * var (var: the loop's
// variable, passed as one root coordinate's index expression). cexpr_interior_bounds then emits
// statements, valid where the loop starts, that declare `int64_t lo, hi` (the names given)
// bounding the range of var in [0, n) where all of those coordinates are in range, and returns
// true; it returns false (and emits nothing) when none was recorded or one was not of that form. In
// interior mode (cexpr_interior_mode) emission takes the recorded kinds of coordinates as in range:
// no clamp and no pad select, so the loads become strided and vectorise; such code is valid only
// for q in [lo, hi). cexpr_interior_end stops recording. Other coordinates are emitted the same way
// in both modes.
void cexpr_interior_begin(Cexpr *x, const char *var);
bool cexpr_interior_bounds(Cexpr *x, int64_t n, StrBuf *code, int indent, const char *lo,
                           const char *hi);
void cexpr_interior_mode(Cexpr *x, bool on);
void cexpr_interior_end(Cexpr *x);

#endif
