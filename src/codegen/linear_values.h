// The operands of a linear candidate (linear_spec.h) as statements, for the linear emitters of
// both targets: A[b](i, k), B[b](k, j) and the convolution patch element, read in place from
// kernel inputs or through cexpr's value expressions for what prologues compute. The text is
// plain C over `in[j]` (the kernel's `const void *const *in`) and int64_t, which is also valid
// CUDA C; an emitter with other storage (the CUDA target's half tensors) supplies the element
// read (Emit.load) and leaves the indexing to these.
// Needs: a Lin from lin_spec_analyse, the Cexpr of the kernel (its reader answering for the
// LINEAR's output where an epilogue reads it). Guarantees: every value is the float32 the
// primitive interpreter reads there (0 over a convolution's padding).
#ifndef ORCH_CODEGEN_LINEAR_VALUES_H
#define ORCH_CODEGEN_LINEAR_VALUES_H

#include "../base/strbuf.h"
#include "cexpr.h"
#include "linear_spec.h"

// What a linear emitter carries while generating one kernel. codegen sits below the backends:
// the config is the backend's own type (backend/target.h), named here, never read.
typedef struct Emit {
    const Lin *L;
    const struct KernelConfig *cfg;
    const char *fn;
    StrBuf *s; // function definitions
    Cexpr *x;
    const char *acc; // the reader's answer for the LINEAR output (the epilogue's accumulator)
    bool local;      // C: the kernel function is a static helper of another (col2im's GEMM)
    bool patch_tab;  // CUDA: the conv patch is gathered through the per-slice table
                     // (emit_matmul_cuda.c, patch_tab_setup)
    // Statements setting the float lvalue dst to kernel input `input`'s element at flat offset
    // `off` (an int64_t expression); NULL: float32 storage, `((const float *)in[input])[off]`.
    // The CUDA target's half storage reads and converts its float16 / bfloat16 elements here.
    void (*load)(const struct Emit *E, int ind, int input, const char *off, const char *dst);
} Emit;

// Reads kernel input `input` at `off` into dst through E->load (see Emit).
void lin_emit_load(const Emit *E, int ind, int input, const char *off, const char *dst);

// Declares b's coordinates: matmul bq0.. (and aoff/boff, the operands' batch offsets in
// elements, when `offsets`), conv q_n and q_g.
void lin_emit_batch_coords(const Emit *E, int ind, bool offsets);
// Statements setting the float lvalue dst to A[b](i, k) / B[b](k, j) (i, j, k: int64_t
// variables or expressions of them; batch coordinates in scope). Conv B reads handle padding.
int lin_emit_a_value(Emit *E, int ind, const char *i, const char *k, const char *dst, Err *e);
int lin_emit_b_value(Emit *E, int ind, const char *k, const char *j, const char *dst, Err *e);
// Declares the conv patch coordinates of GEMM row k, column j: x_c (the channel, q_g in scope),
// x_k0.. (kernel offsets) and x_o0.. (output coordinates).
void lin_emit_patch_coords(const Emit *E, int ind, const char *k, const char *j);
// The conv patch element at x_c, x_k0.., x_o0.. (int64_t variables in scope, with q_n): 0 where
// the window hangs over the padding (or, transposed, where the stride does not divide).
int lin_emit_patch_value(Emit *E, int ind, const char *dst, Err *e);

#endif
