// Op lookup across the family tables and helpers shared by op implementations (see ops.h).
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const OpDef *const op_tables[] = {ops_elementwise, ops_linear,  ops_reduce, ops_layout,
                                         ops_rnn,         ops_control, ops_sample, ops_sequence};

const OpDef *ops_find(const char *domain, const char *op) {
    if (domain && *domain && strcmp(domain, "ai.onnx") != 0)
        return NULL;
    for (size_t t = 0; t < ORCH_COUNT(op_tables); t++)
        for (const OpDef *d = op_tables[t]; d->name; d++)
            if (strcmp(d->name, op) == 0)
                return d;
    return NULL;
}

void ops_each(void (*visit)(const OpDef *def, void *ctx), void *ctx) {
    for (size_t t = 0; t < ORCH_COUNT(op_tables); t++)
        for (const OpDef *d = op_tables[t]; d->name; d++)
            visit(d, ctx);
}

int op_err(Err *e, int code, const Node *n, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(e, code, "node '%s' (%s): %s", n->name, n->op, msg);
}

int op_const_ints(const Graph *g, const Node *n, int i, int64_t *vals, int max, int *count,
                  Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (!t) {
        *count = -1;
        return ST_OK;
    }
    if (t->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "input %d ('%s') must be a constant (orch needs static shapes), but it is "
                      "computed at run time",
                      i, t->name);
    if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
        return op_err(e, ST_INVALID, n, "input %d ('%s') must be int64 or int32, got %s", i,
                      t->name, dtype_name(t->dtype));
    int64_t numel = tensor_numel(t);
    if (numel > max)
        return op_err(e, ST_INVALID, n, "input %d ('%s') has %lld values, at most %d allowed", i,
                      t->name, (long long)numel, max);
    for (int64_t k = 0; k < numel; k++)
        vals[k] = elem_get_i64(t->dtype, t->data, k);
    *count = (int)numel;
    return ST_OK;
}

int op_const_float(const Graph *g, const Node *n, int i, double dflt, double *out, Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (!t) {
        *out = dflt;
        return ST_OK;
    }
    if (t->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n, "input %d ('%s') must be a constant", i, t->name);
    if (tensor_numel(t) != 1)
        return op_err(e, ST_INVALID, n, "input %d ('%s') must hold one value", i, t->name);
    if (dtype_size(t->dtype) == 0 || t->dtype == DT_STRING)
        return op_err(e, ST_UNSUPPORTED, n, "input %d has dtype %s", i, dtype_name(t->dtype));
    *out = elem_get_f64(t->dtype, t->data, 0);
    return ST_OK;
}

int op_axis(const Node *n, int64_t axis, int rank, const char *what, int *out, Err *e) {
    int64_t r = rank;
    if (axis < -r || axis >= (r ? r : 1))
        return op_err(e, ST_INVALID, n, "%s %lld is out of range for rank %d", what,
                      (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + r : axis);
    return ST_OK;
}

int op_broadcast_shape(const Graph *g, const Node *n, int first, int count, int *rank,
                       int64_t *dims, Err *e) {
    int r = 0;
    for (int i = first; i < first + count; i++) {
        const Tensor *t = node_input(g, n, i);
        if (t && t->rank > r)
            r = t->rank;
    }
    for (int d = 0; d < r; d++)
        dims[d] = 1;
    for (int i = first; i < first + count; i++) {
        const Tensor *t = node_input(g, n, i);
        if (!t)
            continue;
        for (int d = 0; d < t->rank; d++) {
            int od = r - t->rank + d;
            int64_t v = t->dims[d];
            if (v == dims[od] || v == 1)
                continue;
            if (dims[od] == 1) {
                dims[od] = v;
                continue;
            }
            char a[128], b[128];
            shape_str(dims, r, a, sizeof a);
            tensor_shape_str(t, b, sizeof b);
            return op_err(e, ST_INVALID, n,
                          "shapes do not broadcast: %s and %s ('%s') differ in dimension %d", a,
                          b, t->name, od);
        }
    }
    *rank = r;
    return ST_OK;
}

void op_broadcast_strides(const Tensor *in, int out_rank, const int64_t *out_dims,
                          int64_t *strides) {
    int64_t s = 1;
    for (int d = out_rank - 1; d >= 0; d--) {
        int id = d - (out_rank - in->rank);
        if (id < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = (in->dims[id] == 1 && out_dims[d] != 1) ? 0 : s;
        s *= in->dims[id];
    }
}

int op_need_dtype(const Graph *g, const Node *n, int i, const DType *allowed, Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (!t)
        return op_err(e, ST_INVALID, n, "required input %d is missing", i);
    for (const DType *a = allowed; *a != DT_UNDEFINED; a++)
        if (t->dtype == *a)
            return ST_OK;
    return op_err(e, ST_UNSUPPORTED, n, "input %d ('%s') has dtype %s, which orch does not run here",
                  i, t->name, dtype_name(t->dtype));
}

