// Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, and the ops_reduce table, which also lists
// norm.c's normalisations and pool.c's pooling ops. Reductions accumulate in double (int64 for
// integer sums, products, extrema), rounding once on store: float32 is as exact as ONNX's numpy.
#include "reduce_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const DType reduce_float_types[] = {DT_FLOAT16, DT_BFLOAT16, DT_FLOAT, DT_DOUBLE, DT_UNDEFINED};

static const DType reduce_num_types[] = {DT_FLOAT16, DT_BFLOAT16, DT_FLOAT,  DT_DOUBLE,   DT_INT32,
                                         DT_INT64,   DT_UINT32,   DT_UINT64, DT_UNDEFINED};
// ReduceMax/ReduceMin also take 8-bit integers (opset 12) and bool (opset 20); ArgMax/ArgMin all
// integer widths.
static const DType reduce_minmax_types[] = {DT_FLOAT16, DT_BFLOAT16, DT_FLOAT, DT_DOUBLE,
                                            DT_INT8,    DT_UINT8,    DT_INT32, DT_INT64,
                                            DT_UINT32,  DT_UINT64,   DT_BOOL,  DT_UNDEFINED};
static const DType arg_types[] = {DT_FLOAT16, DT_BFLOAT16, DT_FLOAT,    DT_DOUBLE, DT_INT8,
                                  DT_UINT8,   DT_INT16,    DT_UINT16,   DT_INT32,  DT_UINT32,
                                  DT_INT64,   DT_UINT64,   DT_UNDEFINED};

// ---- Reduce* ----

typedef enum RedKind {
    R_SUM,
    R_MEAN,
    R_MAX,
    R_MIN,
    R_PROD,
    R_L1,
    R_L2,
    R_LOGSUM,
    R_LOGSUMEXP,
    R_SUMSQ,
} RedKind;

typedef struct ReduceDef {
    const char *op;
    RedKind kind;
    int axes_input_since; // opset from which axes is an input instead of an attribute
} ReduceDef;

static const ReduceDef reduce_defs[] = {
    {"ReduceSum", R_SUM, 13},
    {"ReduceMean", R_MEAN, 18},
    {"ReduceMax", R_MAX, 18},
    {"ReduceMin", R_MIN, 18},
    {"ReduceProd", R_PROD, 18},
    {"ReduceL1", R_L1, 18},
    {"ReduceL2", R_L2, 18},
    {"ReduceLogSum", R_LOGSUM, 18},
    {"ReduceLogSumExp", R_LOGSUMEXP, 18},
    {"ReduceSumSquare", R_SUMSQ, 18},
};

static const ReduceDef *reduce_def(const char *op) {
    for (size_t i = 0; i < ORCH_COUNT(reduce_defs); i++)
        if (strcmp(reduce_defs[i].op, op) == 0)
            return &reduce_defs[i];
    ORCH_ASSERT(!"reduce_def: op not in reduce_defs");
    return NULL;
}

// Marks the axes a Reduce* node reduces, from the axes attribute (older opsets) or the constant
// axes input. No axes means all of them, or none when noop_with_empty_axes is set; reducing none
// still applies the op's per-element part (ReduceSumSquare squares), as the ONNX reference does.
static int reduce_axes(const Graph *g, const Node *n, const ReduceDef *def, int rank, bool *reduced,
                       Err *e) {
    int64_t axes[ORCH_MAX_RANK];
    int count = -1;
    bool noop = false;
    const Tensor *axes_in = node_input(g, n, 1);
    if (n->opset < def->axes_input_since) {
        if (axes_in)
            return op_err(e, ST_INVALID, n, "axes is an attribute, not an input, before opset %d",
                          def->axes_input_since);
        const int64_t *v;
        count = node_attr_ints(n, "axes", &v);
        if (count > ORCH_MAX_RANK)
            return op_err(e, ST_INVALID, n, "axes lists %d values for rank %d", count, rank);
        for (int i = 0; i < count; i++)
            axes[i] = v[i];
    } else {
        if (node_attr(n, "axes"))
            return op_err(e, ST_INVALID, n, "axes is an input, not an attribute, since opset %d",
                          def->axes_input_since);
        if (axes_in && axes_in->rank > 1)
            return op_err(e, ST_INVALID, n, "axes input '%s' must be 1-D, got rank %d",
                          axes_in->name, axes_in->rank);
        int rc = op_const_ints(g, n, 1, axes, ORCH_MAX_RANK, &count, e);
        if (rc)
            return rc;
        noop = node_attr_i(n, "noop_with_empty_axes", 0) != 0;
    }
    for (int d = 0; d < rank; d++)
        reduced[d] = count <= 0 && !noop;
    for (int i = 0; i < count && rank > 0; i++) {
        int ax;
        int rc = op_axis(n, axes[i], rank, "axes value", &ax, e);
        if (rc)
            return rc;
        if (reduced[ax])
            return op_err(e, ST_INVALID, n, "axis %d is listed twice in axes", ax);
        reduced[ax] = true;
    }
    return ST_OK;
}

static int infer_reduce(Graph *g, Node *n, Err *e) {
    const ReduceDef *def = reduce_def(n->op);
    const DType *types =
        def->kind == R_MAX || def->kind == R_MIN ? reduce_minmax_types : reduce_num_types;
    int rc = op_need_dtype(g, n, 0, types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    bool reduced[ORCH_MAX_RANK];
    rc = reduce_axes(g, n, def, x->rank, reduced, e);
    if (rc)
        return rc;
    bool keep = node_attr_i(n, "keepdims", 1) != 0;
    int rank = 0;
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (!reduced[d])
            dims[rank++] = x->dims[d];
        else if (keep)
            dims[rank++] = 1;
    }
    tensor_set_shape(node_output(g, n, 0), x->dtype, rank, dims);
    return ST_OK;
}

// Output element offsets for each input axis (0 on reduced axes) and the reduced element count.
static int64_t reduce_strides(const Tensor *x, const bool *reduced, int64_t *ostr) {
    int64_t s = 1, count = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostr[d] = reduced[d] ? 0 : s;
        if (reduced[d])
            count *= x->dims[d];
        else
            s *= x->dims[d];
    }
    return count;
}

// Sums, products and extrema of integers stay in int64 (wrapping like the fixed-width types do,
// through unsigned arithmetic) so int64 values above 2^53 are exact.
static bool reduce_in_int(DType t, RedKind k) {
    return !dtype_is_float(t) && k != R_L2 && k != R_LOGSUM && k != R_LOGSUMEXP;
}

static void int_limits(DType t, int64_t *lo, int64_t *hi) {
    switch (t) {
    case DT_BOOL: *lo = 0, *hi = 1; return;
    case DT_INT8: *lo = INT8_MIN, *hi = INT8_MAX; return;
    case DT_UINT8: *lo = 0, *hi = UINT8_MAX; return;
    case DT_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return;
    case DT_UINT32: *lo = 0, *hi = UINT32_MAX; return;
    case DT_UINT64: *lo = 0, *hi = INT64_MAX; return;
    default: *lo = INT64_MIN, *hi = INT64_MAX; return;
    }
}

static void reduce_int(const OpRun *r, RedKind k, const int64_t *ostr, int64_t count,
                       int64_t *acc) {
    const Tensor *x = r->in[0], *out = r->out[0];
    int64_t on = tensor_numel(out), xn = tensor_numel(x), lo, hi;
    int_limits(x->dtype, &lo, &hi);
    // Empty reductions give the identity of the op: ONNX's reference fills ReduceMax of nothing
    // with the type's lowest value and ReduceMin with its highest.
    int64_t init = k == R_PROD ? 1 : k == R_MAX ? lo : k == R_MIN ? hi : 0;
    for (int64_t o = 0; o < on; o++)
        acc[o] = init;
    Walk w;
    walk_init(&w, x->rank, x->dims);
    walk_add(&w, ostr);
    for (int64_t i = 0; i < xn; i++, walk_next(&w)) {
        int64_t v = elem_get_i64(x->dtype, r->x[0], i), *a = &acc[w.off[0]];
        uint64_t ua = (uint64_t)*a, uv = (uint64_t)v;
        switch (k) {
        case R_SUM:
        case R_MEAN: *a = (int64_t)(ua + uv); break;
        case R_L1: *a = (int64_t)(ua + (v < 0 ? 0 - uv : uv)); break;
        case R_SUMSQ: *a = (int64_t)(ua + uv * uv); break;
        case R_PROD: *a = (int64_t)(ua * uv); break;
        case R_MAX: *a = v > *a ? v : *a; break;
        case R_MIN: *a = v < *a ? v : *a; break;
        default: ORCH_ASSERT(!"reduce_int: kind reduced in double");
        }
    }
    for (int64_t o = 0; o < on; o++)
        elem_set_i64(out->dtype, r->y[0], o, k == R_MEAN ? (count ? acc[o] / count : 0) : acc[o]);
}

static void reduce_f64(const OpRun *r, RedKind k, const int64_t *ostr, int64_t count, double *acc,
                       double *mx) {
    const Tensor *x = r->in[0], *out = r->out[0];
    int64_t on = tensor_numel(out), xn = tensor_numel(x);
    double init = k == R_PROD ? 1.0 : k == R_MAX ? -INFINITY : k == R_MIN ? INFINITY : 0.0;
    for (int64_t o = 0; o < on; o++)
        acc[o] = init;
    Walk w;
    if (k == R_LOGSUMEXP) {
        // Shift by the largest finite value so exp cannot overflow; with none, log(sum(exp(x)))
        // is already exact (all -inf gives -inf, a +inf gives +inf).
        for (int64_t o = 0; o < on; o++)
            mx[o] = -INFINITY;
        walk_init(&w, x->rank, x->dims);
        walk_add(&w, ostr);
        for (int64_t i = 0; i < xn; i++, walk_next(&w)) {
            double v = ld(x->dtype, r->x[0], i);
            if (isfinite(v) && v > mx[w.off[0]])
                mx[w.off[0]] = v;
        }
        for (int64_t o = 0; o < on; o++)
            if (mx[o] == -INFINITY)
                mx[o] = 0;
    }
    walk_init(&w, x->rank, x->dims);
    walk_add(&w, ostr);
    for (int64_t i = 0; i < xn; i++, walk_next(&w)) {
        double v = ld(x->dtype, r->x[0], i), *a = &acc[w.off[0]];
        switch (k) {
        case R_SUM:
        case R_MEAN:
        case R_LOGSUM: *a += v; break;
        case R_L1: *a += fabs(v); break;
        case R_L2:
        case R_SUMSQ: *a += v * v; break;
        case R_PROD: *a *= v; break;
        // NaN propagates, as numpy's maximum/minimum do.
        case R_MAX: *a = isnan(v) || v > *a ? v : *a; break;
        case R_MIN: *a = isnan(v) || v < *a ? v : *a; break;
        case R_LOGSUMEXP: *a += exp(v - mx[w.off[0]]); break;
        }
    }
    for (int64_t o = 0; o < on; o++) {
        double v = acc[o];
        switch (k) {
        case R_MEAN: v = v / (double)count; break; // 0/0: NaN for an empty set, as numpy
        case R_L2: v = sqrt(v); break;
        case R_LOGSUM: v = log(v); break;
        case R_LOGSUMEXP: v = log(v) + mx[o]; break;
        default: break;
        }
        st(out->dtype, r->y[0], o, v);
    }
}

static int run_reduce(const OpRun *r, Err *e) {
    const ReduceDef *def = reduce_def(r->n->op);
    const Tensor *x = r->in[0];
    bool reduced[ORCH_MAX_RANK];
    int rc = reduce_axes(r->g, r->n, def, x->rank, reduced, e);
    if (rc)
        return rc;
    int64_t ostr[ORCH_MAX_RANK];
    int64_t count = reduce_strides(x, reduced, ostr);
    int64_t on = tensor_numel(r->out[0]);
    if (on == 0)
        return ST_OK;
    if (reduce_in_int(x->dtype, def->kind)) {
        int64_t *acc = malloc(sizeof(int64_t) * (size_t)on);
        if (!acc)
            return op_err(e, ST_RUNTIME, r->n, "out of memory");
        reduce_int(r, def->kind, ostr, count, acc);
        free(acc);
        return ST_OK;
    }
    double *acc = malloc(sizeof(double) * (size_t)on * 2);
    if (!acc)
        return op_err(e, ST_RUNTIME, r->n, "out of memory");
    reduce_f64(r, def->kind, ostr, count, acc, acc + on);
    free(acc);
    return ST_OK;
}

// ---- ArgMax, ArgMin ----

// Compares elements a and b: > 0 when a is the better (larger for max), 0 when tied. NaN beats
// every number and ties with NaN, as numpy's argmax/argmin treat it.
static int arg_cmp(DType t, const void *p, int64_t a, int64_t b, bool max) {
    int c;
    if (dtype_is_float(t)) {
        double va = ld(t, p, a), vb = ld(t, p, b);
        if (isnan(va) || isnan(vb))
            return isnan(va) - isnan(vb);
        c = (va > vb) - (va < vb);
    } else if (t == DT_UINT64) {
        uint64_t va = ((const uint64_t *)p)[a], vb = ((const uint64_t *)p)[b];
        c = (va > vb) - (va < vb);
    } else {
        int64_t va = elem_get_i64(t, p, a), vb = elem_get_i64(t, p, b);
        c = (va > vb) - (va < vb);
    }
    return max ? c : -c;
}

// Position along an axis (len elements stride apart from base) of the best element; ties go to
// the first position, or the last with `last`.
static int64_t arg_best(DType t, const void *p, int64_t base, int64_t len, int64_t stride, bool max,
                        bool last) {
    int64_t best = 0;
    for (int64_t k = 1; k < len; k++) {
        int c = arg_cmp(t, p, base + k * stride, base + best * stride, max);
        if (c > 0 || (c == 0 && last))
            best = k;
    }
    return best;
}

static int infer_arg(Graph *g, Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, arg_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 1)
        return op_err(e, ST_INVALID, n, "input must have rank >= 1, got a scalar");
    int axis;
    rc = op_axis(n, node_attr_i(n, "axis", 0), x->rank, "axis", &axis, e);
    if (rc)
        return rc;
    int64_t dims[ORCH_MAX_RANK];
    int rank = 0;
    bool keep = node_attr_i(n, "keepdims", 1) != 0;
    for (int d = 0; d < x->rank; d++)
        if (d != axis || keep)
            dims[rank++] = d == axis ? 1 : x->dims[d];
    if (x->dims[axis] == 0 && dims_prod(dims, 0, rank) > 0)
        return op_err(e, ST_INVALID, n, "axis %d has size 0: there is no element to pick", axis);
    tensor_set_shape(node_output(g, n, 0), DT_INT64, rank, dims);
    return ST_OK;
}

static int run_arg(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    int axis;
    op_axis(r->n, node_attr_i(r->n, "axis", 0), x->rank, "axis", &axis, e);
    bool max = strcmp(r->n->op, "ArgMax") == 0;
    bool last = node_attr_i(r->n, "select_last_index", 0) != 0;
    int64_t outer = dims_prod(x->dims, 0, axis), len = x->dims[axis];
    int64_t inner = dims_prod(x->dims, axis + 1, x->rank);
    int64_t *y = r->y[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            y[o * inner + i] =
                arg_best(x->dtype, r->x[0], o * len * inner + i, len, inner, max, last);
    return ST_OK;
}

// ---- Softmax, LogSoftmax, Hardmax ----

// Default axis and meaning changed at opset 13: before, the input is seen as 2-D [outer, rest]
// split at axis (default 1); from 13 the op runs along the one axis (default -1).
static int softmax_geom(const Node *n, const Tensor *x, int64_t *outer, int64_t *len,
                        int64_t *inner, Err *e) {
    bool coerce = n->opset < 13;
    int axis;
    int rc = op_axis(n, node_attr_i(n, "axis", coerce ? 1 : -1), x->rank, "axis", &axis, e);
    if (rc)
        return rc;
    *outer = dims_prod(x->dims, 0, axis);
    *len = coerce ? dims_prod(x->dims, axis, x->rank) : x->dims[axis];
    *inner = coerce ? 1 : dims_prod(x->dims, axis + 1, x->rank);
    return ST_OK;
}

static int infer_softmax(Graph *g, Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 1)
        return op_err(e, ST_INVALID, n, "input must have rank >= 1, got a scalar");
    int64_t outer, len, inner;
    rc = softmax_geom(n, x, &outer, &len, &inner, e);
    if (rc)
        return rc;
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

static int run_softmax(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    DType t = x->dtype;
    int64_t outer, len, inner;
    int rc = softmax_geom(r->n, x, &outer, &len, &inner, e);
    if (rc)
        return rc;
    bool hard = strcmp(r->n->op, "Hardmax") == 0, logsm = strcmp(r->n->op, "LogSoftmax") == 0;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            if (hard) {
                int64_t best = arg_best(t, r->x[0], base, len, inner, true, false);
                for (int64_t k = 0; k < len; k++)
                    st(t, r->y[0], base + k * inner, k == best ? 1.0 : 0.0);
                continue;
            }
            // Subtracting the max keeps exp in range.
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = ld(t, r->x[0], base + k * inner);
                mx = isnan(v) || v > mx ? v : mx;
            }
            for (int64_t k = 0; k < len; k++)
                sum += exp(ld(t, r->x[0], base + k * inner) - mx);
            double logsum = log(sum);
            for (int64_t k = 0; k < len; k++) {
                double v = ld(t, r->x[0], base + k * inner) - mx;
                st(t, r->y[0], base + k * inner, logsm ? v - logsum : exp(v) / sum);
            }
        }
    }
    return ST_OK;
}

const OpDef ops_reduce[] = {
    {"ReduceSum", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceMean", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceMax", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceMin", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceProd", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceL1", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceL2", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceLogSum", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceLogSumExp", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ReduceSumSquare", infer_reduce, run_reduce, 1, 2, 1, 1, 0},
    {"ArgMax", infer_arg, run_arg, 1, 1, 1, 1, 0},
    {"ArgMin", infer_arg, run_arg, 1, 1, 1, 1, 0},
    {"Softmax", infer_softmax, run_softmax, 1, 1, 1, 1, 0},
    {"LogSoftmax", infer_softmax, run_softmax, 1, 1, 1, 1, 0},
    {"Hardmax", infer_softmax, run_softmax, 1, 1, 1, 1, 0},
    {"BatchNormalization", norm_infer_batch, norm_run_batch, 5, 5, 1, 5, 0},
    {"InstanceNormalization", norm_infer_instance, norm_run_instance, 3, 3, 1, 1, 0},
    {"LayerNormalization", norm_infer_layer, norm_run_layer, 2, 3, 1, 3, 0},
    {"GroupNormalization", norm_infer_group, norm_run_group, 3, 3, 1, 1, 0},
    {"LpNormalization", norm_infer_lp, norm_run_lp, 1, 1, 1, 1, 0},
    {"MeanVarianceNormalization", norm_infer_mvn, norm_run_mvn, 1, 1, 1, 1, 0},
    {"MaxPool", pool_infer, pool_run, 1, 1, 1, 2, 0},
    {"AveragePool", pool_infer, pool_run, 1, 1, 1, 1, 0},
    {"LpPool", pool_infer, pool_run, 1, 1, 1, 1, 0},
    {"GlobalMaxPool", pool_infer_global, pool_run_global, 1, 1, 1, 1, 0},
    {"GlobalAveragePool", pool_infer_global, pool_run_global, 1, 1, 1, 1, 0},
    {"GlobalLpPool", pool_infer_global, pool_run_global, 1, 1, 1, 1, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
