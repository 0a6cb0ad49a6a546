// A small loop-nest representation with schedule transformations for the C target's emitters
// (after TVM's schedule primitives): named iteration axes, loops derived from them by split, fuse
// and reorder, loop kinds (serial, OpenMP parallel, SIMD vector, unrolled), statements attached
// before or after a loop's inner loop (compute-at) or as the innermost body, and a printer.
// Guarantees: every axis variable is defined (as a loop variable or from the loop variables it
// was split/fused into) before any statement at or below its innermost loop; tails of splits are
// handled by min() bounds, so no iteration outside an axis's extent runs.
#ifndef ORCH_LOOPNEST_H
#define ORCH_LOOPNEST_H

#include "../../base/strbuf.h"

#include <stdbool.h>

#include <stdint.h>

typedef enum LoopKind { LK_SERIAL, LK_PARALLEL, LK_VECTOR, LK_UNROLL } LoopKind;

typedef struct LoopNest LoopNest;

// prefix names the loop variables it invents ("<prefix>o0", ...), unique in the function.
LoopNest *ln_create(const char *prefix);
void ln_free(LoopNest *n); // accepts NULL

// An iteration axis `name` (a C identifier, defined as const int64_t) over [0, extent); it gets
// a loop of its own, appended innermost. Returns the loop id.
int ln_axis(LoopNest *n, const char *name, int64_t extent);
// Splits loop l into an outer loop over ceil(extent/factor) and an inner one of at most factor
// iterations (min() bound on the tail); the outer takes l's place, the inner follows it.
// Writes both ids.
void ln_split(LoopNest *n, int l, int64_t factor, int *outer, int *inner);
// Fuses loop a with loop b (b must be directly inside a) into one loop; returns its id.
int ln_fuse(LoopNest *n, int a, int b);
// Puts the listed loops (all of them, each once) in this order, outermost first.
void ln_reorder(LoopNest *n, const int *order, int count);
// Kind of a loop. LK_PARALLEL: `#pragma omp parallel for` when `work` (elements, or a cost in
// similar units) exceeds the fork threshold, serial otherwise (shapes are static, so the test is
// made here and tiny kernels never fork); LK_VECTOR: `#pragma omp simd` with an optional clause
// (e.g. "reduction(+:acc)"); LK_UNROLL: `#pragma GCC unroll factor`.
void ln_parallel(LoopNest *n, int l, int64_t work);
// ln_parallel with a clause on its pragma (e.g. "reduction(|:flag)"; printed only where the
// loop forks).
void ln_parallel_clause(LoopNest *n, int l, int64_t work, const char *clause);
void ln_vector(LoopNest *n, int l, const char *clause);
void ln_unroll(LoopNest *n, int l, int factor);
int64_t ln_extent(const LoopNest *n, int l);
// The loop's position in the current order (0 = outermost).
int ln_depth(const LoopNest *n, int l);
// The C variable iterating loop l (for statements that index by loop rather than axis).
const char *ln_var(const LoopNest *n, int l);

// Statements (one or more lines of C, without indentation) attached inside loop l before
// (ln_pre) or after (ln_post) its inner loop, or before/after the whole nest when l is -1.
// ln_body appends to the innermost body. The text is copied.
void ln_pre(LoopNest *n, int l, const char *text);
void ln_post(LoopNest *n, int l, const char *text);
void ln_body(LoopNest *n, const char *text);
// Compute-at of a whole nest: `child` is printed inside loop l (before its inner loop when
// `after` is false) and owned (freed) by n from now on.
void ln_attach(LoopNest *n, int l, bool after, LoopNest *child);

// Interior split of loop l, which must end up innermost, over [0, extent) with the axis's
// variable as its own: `bounds` (statements, printed before it) declare the int64_t variables
// lo and hi with 0 <= lo <= hi <= extent; the loop is printed as [0, lo) and [hi, extent) with
// the ordinary body, serial, and [lo, hi) with `interior` as its body and l's kind (SIMD). A
// nest where l is not such a loop prints the ordinary body throughout (always correct).
void ln_split_interior(LoopNest *n, int l, const char *bounds, const char *lo, const char *hi,
                       const char *interior);

// Prints the nest as C at the given indentation.
void ln_print(const LoopNest *n, StrBuf *out, int indent);

// The fork threshold of ln_parallel (work units): a loop with less work runs serially. The
// pointwise model (cgen_estimate) forks at it too. Not recorded how it was chosen.
#define LN_PARALLEL_MIN_WORK 32768

#endif
