// Builders that append one primitive to a primitive graph and return its output tensor id. Used
// by the fission rules and the clean-up passes. Output shapes are computed here; a call that does
// not fit its operands' shapes is a bug in the caller (assertion).
#ifndef ORCH_PRIM_BUILD_H
#define ORCH_PRIM_BUILD_H

#include "prim.h"

typedef struct PB {
    PrimGraph *pg;
    const char *origin; // provenance stamped on every primitive built (the ONNX node name)
} PB;

const Tensor *pb_t(const PB *b, int t);

int pb_ew1(PB *b, EwOp op, int a);
int pb_ew2(PB *b, EwOp op, int a, int c);
int pb_ew2i(PB *b, EwOp op, int a, double imm); // a OP imm
int pb_ewi2(PB *b, EwOp op, double imm, int c); // imm OP c
int pb_where(PB *b, int cond, int x, int y);
int pb_cast(PB *b, int a, DType to);
// An elementwise primitive from a whole program (inputs given); the output dtype is the last
// instruction's. The program is copied.
int pb_ew_program(PB *b, int n_in, const int *ins, const EwProgram *prog);

int pb_reduce(PB *b, RedOp op, int a, uint32_t axes, bool keepdims, bool select_last);

int pb_transpose(PB *b, int a, const int *perm);
int pb_reshape(PB *b, int a, int rank, const int64_t *dims);
int pb_slice(PB *b, int a, const int64_t *start, const int64_t *step, const int64_t *out_dims);
int pb_broadcast(PB *b, int a, int rank, const int64_t *dims);
// Per-axis tables (NULL = identity axis), copied; entries -1 read pad_value.
int pb_table(PB *b, int a, const int64_t *out_dims, int64_t *const *tables, double pad_value);
int pb_gather(PB *b, int a, int axis, int q, const int64_t *idx_dims, const int64_t *idx);
int pb_concat(PB *b, int n, const int *ins, int axis);

int pb_matmul(PB *b, int a, int c);
int pb_conv(PB *b, const LinearParams *lp, int x, int w, const int64_t *out_dims);

// Constants (data copied).
int pb_const(PB *b, DType dtype, int rank, const int64_t *dims, const void *data);
int pb_const_scalar(PB *b, DType dtype, double v);

#endif
