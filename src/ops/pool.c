// Pooling ONNX ops over [N, C, spatial...] inputs of any spatial rank: MaxPool (with the optional
// Indices output), AveragePool, LpPool, and their Global* forms. One window walker serves all
// three windowed ops: it visits the dilated kernel taps and skips those in the padding.
#include "pool.h"
#include "reduce_internal.h"

#include <math.h>
#include <string.h>

typedef enum PoolKind { P_MAX, P_AVG, P_LP } PoolKind;

static PoolKind pool_kind(const char *op) {
    if (strstr(op, "MaxPool"))
        return P_MAX;
    return strstr(op, "AveragePool") ? P_AVG : P_LP;
}

// The largest kernel size, stride, dilation or pad accepted: the window arithmetic ((k - 1) * d
// + 1, the padded input) then stays far inside int64 (a fuzzed MaxPool with a dilation of 2^62
// overflowed it).
#define POOL_MAX_ATTR INT32_MAX

// Reads an ints attribute of exactly len values in [lo, POOL_MAX_ATTR] into v, or dflt
// everywhere when absent.
static int pool_ints(const Node *n, const char *name, int len, int64_t lo, int64_t dflt, int64_t *v,
                     Err *e) {
    const int64_t *a;
    int count = node_attr_ints(n, name, &a);
    if (count < 0) {
        for (int i = 0; i < len; i++)
            v[i] = dflt;
        return ST_OK;
    }
    if (count != len)
        return op_err(e, ST_INVALID, n, "%s has %d values, expected %d", name, count, len);
    for (int i = 0; i < len; i++) {
        if (a[i] < lo || a[i] > POOL_MAX_ATTR)
            return op_err(e, ST_INVALID, n, "%s[%d] = %lld, must be in [%lld, %lld]", name, i,
                          (long long)a[i], (long long)lo, (long long)POOL_MAX_ATTR);
        v[i] = a[i];
    }
    return ST_OK;
}

// Output sizes and effective pads as the ONNX spec defines them, including its rule that with
// ceil_mode a window may not start in the end padding (else the last output is dropped).
int pool_geom(const Node *n, const Tensor *x, PoolGeom *p, Err *e) {
    int S = x->rank - 2, rc;
    p->S = S;
    const int64_t *ks;
    if (node_attr_ints(n, "kernel_shape", &ks) < 0)
        return op_err(e, ST_INVALID, n, "the kernel_shape attribute is required");
    int64_t pads[2 * ORCH_MAX_RANK];
    if ((rc = pool_ints(n, "kernel_shape", S, 1, 1, p->k, e)) ||
        (rc = pool_ints(n, "strides", S, 1, 1, p->s, e)) ||
        (rc = pool_ints(n, "dilations", S, 1, 1, p->d, e)) ||
        (rc = pool_ints(n, "pads", 2 * S, 0, 0, pads, e)))
        return rc;
    const char *auto_pad = node_attr_s(n, "auto_pad", "NOTSET");
    bool same_upper = strcmp(auto_pad, "SAME_UPPER") == 0;
    bool same = same_upper || strcmp(auto_pad, "SAME_LOWER") == 0;
    bool valid = strcmp(auto_pad, "VALID") == 0;
    if (!same && !valid && strcmp(auto_pad, "NOTSET") != 0)
        return op_err(e, ST_INVALID, n,
                      "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                      auto_pad);
    bool ceil_mode = node_attr_i(n, "ceil_mode", 0) != 0;
    p->include_pad = node_attr_i(n, "count_include_pad", 0) != 0;
    p->col_major = node_attr_i(n, "storage_order", 0) != 0;
    p->p = (double)node_attr_i(n, "p", 2);
    for (int i = 0; i < S; i++) {
        int64_t in = x->dims[2 + i], extent = (p->k[i] - 1) * p->d[i] + 1;
        p->in[i] = in;
        if (same) {
            // With auto_pad the output size does not depend on ceil_mode (the ceil and floor
            // formulas of the spec agree for integers).
            p->out[i] = (in + p->s[i] - 1) / p->s[i];
            int64_t total = ORCH_MAX(0, (p->out[i] - 1) * p->s[i] + extent - in);
            p->pb[i] = same_upper ? total / 2 : total - total / 2;
            p->pe[i] = total - p->pb[i];
            continue;
        }
        p->pb[i] = valid ? 0 : pads[i];
        p->pe[i] = valid ? 0 : pads[S + i];
        int64_t span = in + p->pb[i] + p->pe[i] - extent;
        if (span < 0)
            return op_err(e, ST_INVALID, n,
                          "spatial axis %d: the window (extent %lld) is larger than the padded "
                          "input (%lld)",
                          i, (long long)extent, (long long)(in + p->pb[i] + p->pe[i]));
        p->out[i] = (ceil_mode && !valid ? (span + p->s[i] - 1) / p->s[i] : span / p->s[i]) + 1;
        if (ceil_mode && !valid && (p->out[i] - 1) * p->s[i] >= in + p->pb[i])
            p->out[i]--;
    }
    return ST_OK;
}

static const DType maxpool_types[] = {DT_FLOAT16, DT_BFLOAT16, DT_FLOAT,    DT_DOUBLE,
                                      DT_INT8,    DT_UINT8,    DT_UNDEFINED};

int pool_infer(Graph *g, Node *n, Err *e) {
    PoolKind kind = pool_kind(n->op);
    int rc = op_need_dtype(g, n, 0, kind == P_MAX ? maxpool_types : reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 3)
        return op_err(e, ST_INVALID, n, "input must be [N, C, spatial...] (rank >= 3), got rank %d",
                      x->rank);
    PoolGeom p;
    if ((rc = pool_geom(n, x, &p, e)))
        return rc;
    int64_t storage = node_attr_i(n, "storage_order", 0);
    if (kind == P_MAX && storage != 0 && storage != 1)
        return op_err(e, ST_INVALID, n, "storage_order must be 0 or 1, got %lld",
                      (long long)storage);
    if (kind == P_LP && node_attr_i(n, "p", 2) < 1)
        return op_err(e, ST_INVALID, n, "p must be >= 1, got %lld",
                      (long long)node_attr_i(n, "p", 2));
    int64_t dims[ORCH_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < p.S; i++)
        dims[2 + i] = p.out[i];
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, dims);
    Tensor *idx = node_output(g, n, 1);
    if (idx)
        tensor_set_shape(idx, DT_INT64, x->rank, dims);
    return ST_OK;
}

// Computes output element (one channel plane, at output position o) over its window. MaxPool's
// index counts in the whole input, row-major or (storage_order 1) column-major over the spatial
// axes. A window lying wholly in the padding gives -inf (index -1), or NaN for an average over
// no elements. A NaN in a max window gives NaN wherever it sits.
static void pool_window(const OpRun *r, const PoolGeom *p, PoolKind kind, int64_t plane,
                        const int64_t *o, int64_t at) {
    DType t = r->in[0]->dtype;
    int S = p->S;
    int64_t plane_size = dims_prod(p->in, 0, S), base = plane * plane_size;
    int64_t taps = dims_prod(p->k, 0, S), kk[ORCH_MAX_RANK] = {0};
    double acc = kind == P_MAX ? -INFINITY : 0;
    int64_t count = 0, best = -1;
    for (int64_t tap = 0; tap < taps; tap++) {
        bool inside = true, in_pads = true;
        int64_t row = 0, col = 0, col_stride = 1;
        for (int i = 0; i < S; i++) {
            int64_t pos = o[i] * p->s[i] - p->pb[i] + kk[i] * p->d[i];
            inside = inside && pos >= 0 && pos < p->in[i];
            in_pads = in_pads && pos < p->in[i] + p->pe[i];
            row = row * p->in[i] + pos;
            col += pos * col_stride;
            col_stride *= p->in[i];
        }
        for (int i = S - 1; i >= 0 && ++kk[i] == p->k[i]; i--)
            kk[i] = 0;
        count += kind == P_AVG && p->include_pad ? in_pads : inside;
        if (!inside)
            continue;
        double v = ld(t, r->x[0], base + row);
        if (kind == P_MAX) {
            // NaN propagates (docs/numerics.md): the first NaN of the window wins, else the first
            // maximum, as ArgMax picks.
            if (best < 0 || (isnan(v) && !isnan(acc)) || v > acc) {
                acc = v;
                best = p->col_major ? col : row;
            }
        } else {
            acc += kind == P_AVG ? v : pow(fabs(v), p->p);
        }
    }
    double y = kind == P_MAX ? acc : kind == P_AVG ? acc / (double)count : pow(acc, 1.0 / p->p);
    st(t, r->y[0], at, y);
    if (kind == P_MAX && r->n->n_out > 1 && r->out[1])
        ((int64_t *)r->y[1])[at] = best < 0 ? -1 : base + best;
}

int pool_run(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    PoolGeom p;
    int rc = pool_geom(r->n, x, &p, e);
    if (rc)
        return rc;
    PoolKind kind = pool_kind(r->n->op);
    int64_t planes = x->dims[0] * x->dims[1], outs = dims_prod(p.out, 0, p.S), at = 0;
    for (int64_t plane = 0; plane < planes; plane++) {
        int64_t o[ORCH_MAX_RANK] = {0};
        for (int64_t k = 0; k < outs; k++, at++) {
            pool_window(r, &p, kind, plane, o, at);
            for (int i = p.S - 1; i >= 0 && ++o[i] == p.out[i]; i--)
                o[i] = 0;
        }
    }
    return ST_OK;
}

// ---- GlobalMaxPool, GlobalAveragePool, GlobalLpPool ----

int pool_infer_global(Graph *g, Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 2)
        return op_err(e, ST_INVALID, n, "input must be [N, C, spatial...] (rank >= 2), got rank %d",
                      x->rank);
    if (pool_kind(n->op) == P_LP && node_attr_i(n, "p", 2) < 1)
        return op_err(e, ST_INVALID, n, "p must be >= 1, got %lld",
                      (long long)node_attr_i(n, "p", 2));
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < 2 ? x->dims[d] : 1;
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, dims);
    return ST_OK;
}

int pool_run_global(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    DType t = x->dtype;
    PoolKind kind = pool_kind(r->n->op);
    double pw = (double)node_attr_i(r->n, "p", 2);
    int64_t planes = x->dims[0] * x->dims[1], size = dims_prod(x->dims, 2, x->rank);
    for (int64_t plane = 0; plane < planes; plane++) {
        double acc = kind == P_MAX ? -INFINITY : 0;
        for (int64_t i = plane * size; i < (plane + 1) * size; i++) {
            double v = ld(t, r->x[0], i);
            if (kind == P_MAX) // NaN propagates, as in MaxPool
                acc = isnan(v) || v > acc ? v : acc;
            else
                acc += kind == P_AVG ? v : pow(fabs(v), pw);
        }
        double y = kind == P_MAX ? acc : kind == P_AVG ? acc / (double)size : pow(acc, 1.0 / pw);
        st(t, r->y[0], plane, y);
    }
    return ST_OK;
}
