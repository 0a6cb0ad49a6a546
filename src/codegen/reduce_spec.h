// What the reduction emitters of both targets (backend/cpu/emit_reduce.c,
// backend/cuda/emit_reduce_cuda.c) read off a REDUCE primitive of a candidate alike: whether a
// value expression reads its output on the row being reduced (their fused kernels answer cexpr's
// reads of a reduction's output from the row's own result only), its accumulator's initial
// value, the conversion of its result to the output's dtype, and the index and offset of its
// output element.
// Needs: a verified primitive graph; the reduction's space: the rank of the REDUCE's input and
// its reduced axes (a bit mask). Guarantees: prim_interp.c's reduction semantics; *truncated set
// where a fixed buffer cut the text (fmt.h).
#ifndef ORCH_CODEGEN_REDUCE_SPEC_H
#define ORCH_CODEGEN_REDUCE_SPEC_H

#include "cexpr.h"

// Whether cexpr's request rq for the output of reduction p reads it at the current row: every
// kept coordinate is the root coordinate of its axis (root_is_space: the root is the reduction
// space, its axis d; else the root has the output's shape, its axis j) and every reduced one
// kept by keepdims is 0, all affine in the root (CexprRead.affine).
bool red_read_on_row(const PrimGraph *pg, const Prim *p, int rank, uint32_t red, bool root_is_space,
                     const CexprRead *rq);
// The initial value of an accumulator of op in the float (fl) or the integer domain.
const char *red_init(RedOp op, bool fl);
// Into buf: val, the result of a reduction (the float domain's double, the integer domain's
// int64_t, or the index of an arg reduction: arg), converted to the value type of dtype ot as
// prim_interp's normalise does.
void red_result_conv(DType ot, bool arg, const char *val, char *buf, size_t cap, bool *truncated);
// Into buf: the offset in the dense tensor T of the coordinates idx (C expressions).
void red_dense_offset(const Tensor *T, const char *const *idx, char *buf, size_t cap,
                      bool *truncated);
// The index of the reduction's output element in the space's variables i<d>: reduced axes
// dropped, or 0 where keepdims keeps them. Fills names and idx (rank entries at most); returns
// the output's rank.
int red_out_idx(int rank, uint32_t red, bool keepdims, char names[][16], const char **idx);

#endif
