// Primitive builders (see build.h).
#include "prim_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const Tensor *pb_t(const PB *b, int t) {
    ORCH_ASSERT(t >= 0 && t < b->pg->n_tensors);
    return b->pg->tensors[t];
}

static int out_tensor(PB *b, Prim *p, DType dtype, int rank, const int64_t *dims) {
    char name[256];
    snprintf(name, sizeof name, "%.200s/%s%d", b->origin, prim_kind_name(p->kind), p->id);
    Tensor *t = pg_add_tensor(b->pg, name, dtype, rank, dims);
    ORCH_ASSERT(b->pg->prims[b->pg->n_prims - 1] == p); // builders append: index = last
    t->producer = b->pg->n_prims - 1;
    p->out[0] = t->id;
    return t->id;
}

static bool ew_bool_result(EwOp op) {
    switch (op) {
    case EW_EQ: case EW_LT: case EW_LE: case EW_GT: case EW_GE: case EW_AND: case EW_OR:
    case EW_XOR: case EW_NOT: case EW_ISNAN: case EW_ISINF: case EW_ISPOSINF: case EW_ISNEGINF:
        return true;
    default:
        return false;
    }
}

static void broadcast_dims(PB *b, int n, const int *ins, int *rank, int64_t *dims) {
    int r = 0;
    for (int i = 0; i < n; i++)
        r = ORCH_MAX(r, pb_t(b, ins[i])->rank);
    for (int d = 0; d < r; d++)
        dims[d] = 1;
    for (int i = 0; i < n; i++) {
        const Tensor *t = pb_t(b, ins[i]);
        for (int d = 0; d < t->rank; d++) {
            int64_t *o = &dims[r - t->rank + d];
            ORCH_ASSERT(*o == 1 || t->dims[d] == 1 || *o == t->dims[d]);
            if (t->dims[d] != 1)
                *o = t->dims[d];
        }
    }
    *rank = r;
}

int pb_ew_program(PB *b, int n_in, const int *ins, const EwProgram *prog) {
    Prim *p = pg_add_prim(b->pg, PRIM_ELEMWISE, n_in, 1, b->origin);
    for (int i = 0; i < n_in; i++)
        p->in[i] = ins[i];
    p->ew.n = prog->n;
    p->ew.code = arena_memdup(b->pg->arena, prog->code, sizeof(EwInstr) * (size_t)prog->n);
    int rank;
    int64_t dims[ORCH_MAX_RANK];
    broadcast_dims(b, n_in, ins, &rank, dims);
    return out_tensor(b, p, prog->code[prog->n - 1].dtype, rank, dims);
}

// One instruction over operands that are inputs (index >= 0) or immediates.
static int ew_single(PB *b, EwOp op, DType dtype, int n, const int *ops, const double *imms) {
    EwInstr ins = {.op = op, .dtype = dtype};
    int tens[3], nt = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i] >= 0) {
            ins.arg[i] = (EwArg){EWS_INPUT, nt, 0};
            tens[nt++] = ops[i];
        } else {
            ins.arg[i] = (EwArg){EWS_IMM, 0, imms[i]};
        }
    }
    ORCH_ASSERT(nt > 0);
    EwProgram prog = {1, &ins};
    return pb_ew_program(b, nt, tens, &prog);
}

static DType result_dtype(EwOp op, int first_tensor_operand, PB *b) {
    return ew_bool_result(op) ? DT_BOOL : pb_t(b, first_tensor_operand)->dtype;
}

int pb_ew1(PB *b, EwOp op, int a) {
    ORCH_ASSERT(ew_op_arity(op) == 1 && op != EW_CAST);
    int ops[1] = {a};
    double none[1] = {0};
    return ew_single(b, op, result_dtype(op, a, b), 1, ops, none);
}

int pb_ew2(PB *b, EwOp op, int a, int c) {
    ORCH_ASSERT(ew_op_arity(op) == 2);
    int ops[2] = {a, c};
    double none[2] = {0, 0};
    return ew_single(b, op, result_dtype(op, a, b), 2, ops, none);
}

int pb_ew2i(PB *b, EwOp op, int a, double imm) {
    ORCH_ASSERT(ew_op_arity(op) == 2);
    int ops[2] = {a, -1};
    double imms[2] = {0, imm};
    return ew_single(b, op, result_dtype(op, a, b), 2, ops, imms);
}

int pb_ewi2(PB *b, EwOp op, double imm, int c) {
    ORCH_ASSERT(ew_op_arity(op) == 2);
    int ops[2] = {-1, c};
    double imms[2] = {imm, 0};
    return ew_single(b, op, result_dtype(op, c, b), 2, ops, imms);
}

int pb_where(PB *b, int cond, int x, int y) {
    int ops[3] = {cond, x, y};
    double none[3] = {0, 0, 0};
    return ew_single(b, EW_WHERE, pb_t(b, x)->dtype, 3, ops, none);
}

int pb_cast(PB *b, int a, DType to) {
    int ops[1] = {a};
    double none[1] = {0};
    return ew_single(b, EW_CAST, to, 1, ops, none);
}

int pb_reduce(PB *b, RedOp op, int a, uint32_t axes, bool keepdims, bool select_last) {
    const Tensor *in = pb_t(b, a);
    ORCH_ASSERT((axes >> in->rank) == 0);
    Prim *p = pg_add_prim(b->pg, PRIM_REDUCE, 1, 1, b->origin);
    p->in[0] = a;
    p->red = (ReduceParams){op, axes, keepdims, select_last};
    int64_t dims[ORCH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < in->rank; d++) {
        if (axes & (1u << d)) {
            if (keepdims)
                dims[r++] = 1;
        } else {
            dims[r++] = in->dims[d];
        }
    }
    DType dt = (op == RED_ARGMAX || op == RED_ARGMIN) ? DT_INT64 : in->dtype;
    return out_tensor(b, p, dt, r, dims);
}

// A one-stage layout primitive; the caller fills the stage.
static Prim *layout_prim(PB *b, int a, LayoutStage **st) {
    Prim *p = pg_add_prim(b->pg, PRIM_LAYOUT, 1, 1, b->origin);
    p->in[0] = a;
    p->lay.n_stages = 1;
    p->lay.stages = arena_alloc(b->pg->arena, sizeof(LayoutStage));
    const Tensor *in = pb_t(b, a);
    LayoutStage *s = &p->lay.stages[0];
    s->in_rank = in->rank;
    memcpy(s->in_dims, in->dims, sizeof(int64_t) * (size_t)in->rank);
    *st = s;
    return p;
}

int pb_transpose(PB *b, int a, const int *perm) {
    LayoutStage *s;
    Prim *p = layout_prim(b, a, &s);
    s->kind = LS_TRANSPOSE;
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < s->in_rank; d++) {
        s->perm[d] = perm[d];
        dims[d] = s->in_dims[perm[d]];
    }
    return out_tensor(b, p, pb_t(b, a)->dtype, s->in_rank, dims);
}

int pb_reshape(PB *b, int a, int rank, const int64_t *dims) {
    LayoutStage *s;
    Prim *p = layout_prim(b, a, &s);
    s->kind = LS_RESHAPE;
    return out_tensor(b, p, pb_t(b, a)->dtype, rank, dims);
}

int pb_slice(PB *b, int a, const int64_t *start, const int64_t *step, const int64_t *out_dims) {
    LayoutStage *s;
    Prim *p = layout_prim(b, a, &s);
    s->kind = LS_SLICE;
    memcpy(s->start, start, sizeof(int64_t) * (size_t)s->in_rank);
    memcpy(s->step, step, sizeof(int64_t) * (size_t)s->in_rank);
    return out_tensor(b, p, pb_t(b, a)->dtype, s->in_rank, out_dims);
}

int pb_broadcast(PB *b, int a, int rank, const int64_t *dims) {
    LayoutStage *s;
    Prim *p = layout_prim(b, a, &s);
    s->kind = LS_BROADCAST;
    return out_tensor(b, p, pb_t(b, a)->dtype, rank, dims);
}

int pb_table(PB *b, int a, const int64_t *out_dims, int64_t *const *tables, double pad_value) {
    LayoutStage *s;
    Prim *p = layout_prim(b, a, &s);
    s->kind = LS_TABLE;
    p->lay.pad_value = pad_value;
    for (int d = 0; d < s->in_rank; d++)
        s->table[d] = tables[d] ? arena_memdup(b->pg->arena, tables[d],
                                               sizeof(int64_t) * (size_t)(out_dims[d] ? out_dims[d] : 1))
                                : NULL;
    return out_tensor(b, p, pb_t(b, a)->dtype, s->in_rank, out_dims);
}

int pb_gather(PB *b, int a, int axis, int q, const int64_t *idx_dims, const int64_t *idx) {
    LayoutStage *s;
    Prim *p = layout_prim(b, a, &s);
    s->kind = LS_GATHER;
    s->axis = axis;
    s->idx_rank = q;
    int64_t n = 1;
    for (int d = 0; d < q; d++) {
        s->idx_dims[d] = idx_dims[d];
        n *= idx_dims[d];
    }
    s->idx = arena_memdup(b->pg->arena, idx, sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t dims[ORCH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < s->in_rank; d++) {
        if (d == axis)
            for (int k = 0; k < q; k++)
                dims[r++] = idx_dims[k];
        else
            dims[r++] = s->in_dims[d];
    }
    ORCH_ASSERT(r <= ORCH_MAX_RANK);
    return out_tensor(b, p, pb_t(b, a)->dtype, r, dims);
}

int pb_concat(PB *b, int n, const int *ins, int axis) {
    Prim *p = pg_add_prim(b->pg, PRIM_LAYOUT, n, 1, b->origin);
    p->lay.concat = true;
    p->lay.axis = axis;
    const Tensor *t0 = pb_t(b, ins[0]);
    int64_t dims[ORCH_MAX_RANK];
    memcpy(dims, t0->dims, sizeof(int64_t) * (size_t)t0->rank);
    dims[axis] = 0;
    for (int i = 0; i < n; i++) {
        p->in[i] = ins[i];
        dims[axis] += pb_t(b, ins[i])->dims[axis];
    }
    return out_tensor(b, p, t0->dtype, t0->rank, dims);
}

int pb_matmul(PB *b, int a, int c) {
    const Tensor *A = pb_t(b, a), *B = pb_t(b, c);
    ORCH_ASSERT(A->rank >= 2 && B->rank >= 2 && A->dims[A->rank - 1] == B->dims[B->rank - 2]);
    Prim *p = pg_add_prim(b->pg, PRIM_LINEAR, 2, 1, b->origin);
    p->in[0] = a;
    p->in[1] = c;
    p->lin.op = LIN_MATMUL;
    int r = ORCH_MAX(A->rank, B->rank);
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < r - 2; d++) {
        int da = d - (r - A->rank), db = d - (r - B->rank);
        int64_t x = da >= 0 ? A->dims[da] : 1, y = db >= 0 ? B->dims[db] : 1;
        ORCH_ASSERT(x == y || x == 1 || y == 1);
        dims[d] = x == 1 ? y : x;
    }
    dims[r - 2] = A->dims[A->rank - 2];
    dims[r - 1] = B->dims[B->rank - 1];
    return out_tensor(b, p, A->dtype, r, dims);
}

int pb_conv(PB *b, const LinearParams *lp, int x, int w, const int64_t *out_dims) {
    Prim *p = pg_add_prim(b->pg, PRIM_LINEAR, 2, 1, b->origin);
    p->in[0] = x;
    p->in[1] = w;
    p->lin = *lp;
    const Tensor *X = pb_t(b, x);
    return out_tensor(b, p, X->dtype, X->rank, out_dims);
}

int pb_const(PB *b, DType dtype, int rank, const int64_t *dims, const void *data) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    size_t bytes = (size_t)n * dtype_size(dtype);
    void *copy = xmalloc(bytes ? bytes : 1);
    if (bytes)
        memcpy(copy, data, bytes);
    char name[256];
    snprintf(name, sizeof name, "%.200s/const%d", b->origin, b->pg->n_tensors);
    return pg_add_const(b->pg, name, dtype, rank, dims, copy, true)->id;
}

int pb_const_scalar(PB *b, DType dtype, double v) {
    uint64_t buf = 0;
    elem_set_f64(dtype, &buf, 0, v);
    return pb_const(b, dtype, 0, NULL, &buf);
}
