// Fission rules for reductions and normalisations: Softmax/LogSoftmax, Reduce*, ArgMax/ArgMin,
// Layer/Instance/Group/Batch/MeanVariance/Lp normalisation and the global pools become REDUCE +
// ELEMWISE (+ LAYOUT reshape) primitives computing what the reference ops in src/ops compute.
// Numerics: float16/bfloat16 inputs are computed in float32 and cast back once, and a mean that
// centres values is kept in double, as the reference ops do, so large means keep their noise.
// MaxPool and AveragePool (1 to 3 spatial axes) become one LAYOUT that gathers every window
// (padding read as -inf or 0) followed by a REDUCE over the window axes; an average divides by a
// constant tensor of per-position counts, so count_include_pad and ceil_mode's clipped windows
// count exactly as the reference op counts. MaxPool's Indices output, LpPool and Hardmax have
// no rule yet and stay OPAQUE.
#include "fission.h"

#include "../ops/pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- helpers ----

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

// Bits [from, to): the axes a range reduction covers.
static uint32_t axes_range(int from, int to) {
    uint32_t m = 0;
    for (int d = from; d < to; d++)
        m |= 1u << d;
    return m;
}

// Half-precision tensors are computed in float32: a chain of half roundings (squares, sums,
// variances) would drift far from the reference's single rounding.
static DType work_dtype(DType t) { return t == DT_FLOAT16 || t == DT_BFLOAT16 ? DT_FLOAT : t; }

static int to_dtype(FissionCtx *fc, int t, DType d) {
    return pb_t(&fc->b, t)->dtype == d ? t : pb_cast(&fc->b, t, d);
}

// A REDUCE, or the input itself when no axis is reduced (each element reduces alone).
static int reduce(FissionCtx *fc, RedOp op, int x, uint32_t axes, bool keep) {
    return axes ? pb_reduce(&fc->b, op, x, axes, keep, false) : x;
}

// Casts the result back to the output dtype and gives it the output shape (a reduction built
// with keepdims for broadcasting, where the node drops the axes). A result that is still one of
// the node's inputs is copied, so the output is a tensor of its own.
static void set_result(FissionCtx *fc, int i, int y) {
    const Tensor *Y = fc_out_t(fc, i);
    y = to_dtype(fc, y, Y->dtype);
    const Tensor *t = pb_t(&fc->b, y);
    bool same = t->rank == Y->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = t->dims[d] == Y->dims[d];
    if (!same)
        y = pb_reshape(&fc->b, y, Y->rank, Y->dims);
    for (int j = 0; j < fc->n->n_in; j++)
        if (y == fc_in(fc, j))
            y = pb_ew1(&fc->b, EW_COPY, y);
    fc_set_out(fc, i, y);
}

// The mean over axes (kept) in double, and x minus it in x's dtype. A float32 mean of values
// near 1e4 is off by up to 5e-4, which swamps the variance of small noise around it; the
// reference ops centre with a double mean.
static int centre(FissionCtx *fc, int x, uint32_t axes, int *mean) {
    *mean = reduce(fc, RED_MEAN, to_dtype(fc, x, DT_DOUBLE), axes, true);
    return pb_ew2(&fc->b, EW_SUB, x, *mean);
}

// Population variance of centred values c over axes (kept).
static int variance(FissionCtx *fc, int c, uint32_t axes) {
    return reduce(fc, RED_MEAN, pb_ew2(&fc->b, EW_MUL, c, c), axes, true);
}

// 1 / sqrt(var + eps), eps as the float attribute's value.
static int inv_std(FissionCtx *fc, int var, double eps) {
    return pb_ew1(&fc->b, EW_RSQRT, pb_ew2i(&fc->b, EW_ADD, var, eps));
}

// A per-channel vector [C] (or any 1-D parameter) as [C, 1, ...] of the given rank, in dtype W,
// so it broadcasts over the spatial axes of [N, C, spatial...].
static int channel_vec(FissionCtx *fc, int v, int rank, DType W) {
    v = to_dtype(fc, v, W);
    const Tensor *t = pb_t(&fc->b, v);
    if (rank == 1)
        return v;
    int64_t dims[ORCH_MAX_RANK];
    dims[0] = t->dims[0];
    for (int d = 1; d < rank; d++)
        dims[d] = 1;
    return pb_reshape(&fc->b, v, rank, dims);
}

// ---- Softmax, LogSoftmax ----

// Subtracts the max first, so large logits do not overflow: m = max(x), e = exp(x - m),
// s = sum(e), y = e / s (log: x - m - log s). Before opset 13 the input is seen as 2-D split at
// axis (default 1); reducing over all axes from axis on is the same computation without the
// reshapes.
static int rule_softmax(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    if (!dtype_is_float(X->dtype))
        return ST_UNSUPPORTED;
    bool coerce = fc->n->opset < 13;
    int axis = norm_axis(node_attr_i(fc->n, "axis", coerce ? 1 : -1), X->rank);
    uint32_t axes = coerce ? axes_range(axis, X->rank) : 1u << axis;
    bool log_form = strcmp(fc->n->op, "LogSoftmax") == 0;
    int x = to_dtype(fc, fc_in(fc, 0), work_dtype(X->dtype));
    int m = reduce(fc, RED_MAX, x, axes, true);
    int c = pb_ew2(&fc->b, EW_SUB, x, m);
    int ex = pb_ew1(&fc->b, EW_EXP, c);
    int s = reduce(fc, RED_SUM, ex, axes, true);
    int y = log_form ? pb_ew2(&fc->b, EW_SUB, c, pb_ew1(&fc->b, EW_LOG, s))
                     : pb_ew2(&fc->b, EW_DIV, ex, s);
    set_result(fc, 0, y);
    return ST_OK;
}

// ---- Reduce* ----

typedef enum RedKind { K_PLAIN, K_L1, K_L2, K_SUMSQ, K_LOGSUM, K_LOGSUMEXP } RedKind;

typedef struct ReduceDef {
    const char *op;
    RedKind kind;
    RedOp red;
    int axes_input_since; // opset from which axes is an input instead of an attribute
} ReduceDef;

static const ReduceDef reduce_defs[] = {
    {"ReduceSum", K_PLAIN, RED_SUM, 13},     {"ReduceMean", K_PLAIN, RED_MEAN, 18},
    {"ReduceMax", K_PLAIN, RED_MAX, 18},     {"ReduceMin", K_PLAIN, RED_MIN, 18},
    {"ReduceProd", K_PLAIN, RED_PROD, 18},   {"ReduceL1", K_L1, RED_SUM, 18},
    {"ReduceL2", K_L2, RED_SUM, 18},         {"ReduceSumSquare", K_SUMSQ, RED_SUM, 18},
    {"ReduceLogSum", K_LOGSUM, RED_SUM, 18}, {"ReduceLogSumExp", K_LOGSUMEXP, RED_SUM, 18},
};

// The reduced axes of a Reduce* node as a mask, from the axes attribute (older opsets) or the
// constant axes input; none listed means all, or none with noop_with_empty_axes.
static int reduce_mask(FissionCtx *fc, const ReduceDef *def, int rank, uint32_t *mask) {
    const Node *n = fc->n;
    int64_t axes[ORCH_MAX_RANK];
    int count = 0;
    bool noop = false;
    if (n->opset < def->axes_input_since) {
        const int64_t *v;
        count = node_attr_ints(n, "axes", &v);
        for (int i = 0; i < count && i < ORCH_MAX_RANK; i++)
            axes[i] = v[i];
    } else {
        const Tensor *A = fc_in_t(fc, 1);
        if (A && A->kind != TK_CONST)
            return ST_UNSUPPORTED;
        count = A ? (int)tensor_numel(A) : 0;
        for (int i = 0; i < count && i < ORCH_MAX_RANK; i++)
            axes[i] = elem_get_i64(A->dtype, A->data, i);
        noop = node_attr_i(n, "noop_with_empty_axes", 0) != 0;
    }
    *mask = count <= 0 && !noop ? axes_range(0, rank) : 0;
    for (int i = 0; i < count && rank > 0; i++)
        *mask |= 1u << norm_axis(axes[i], rank);
    return ST_OK;
}

// log(sum(exp(x - m))) + m over axes (kept), m the largest finite value (0 where there is none)
// as the reference op takes it: finite values cannot overflow exp, and rows with infinities or
// NaN give what the unshifted formula gives.
static int logsumexp(FissionCtx *fc, int x, uint32_t axes) {
    PB *b = &fc->b;
    DType t = pb_t(b, x)->dtype;
    int nonfinite = pb_ew2(b, EW_OR, pb_ew1(b, EW_ISINF, x), pb_ew1(b, EW_ISNAN, x));
    int finite_x = pb_where(b, nonfinite, pb_const_scalar(b, t, -INFINITY), x);
    int m = reduce(fc, RED_MAX, finite_x, axes, true);
    m = pb_where(b, pb_ew2i(b, EW_EQ, m, -INFINITY), pb_const_scalar(b, t, 0), m);
    int s = reduce(fc, RED_SUM, pb_ew1(b, EW_EXP, pb_ew2(b, EW_SUB, x, m)), axes, true);
    return pb_ew2(b, EW_ADD, pb_ew1(b, EW_LOG, s), m);
}

static int rule_reduce(FissionCtx *fc) {
    const ReduceDef *def = NULL;
    for (size_t i = 0; i < ORCH_COUNT(reduce_defs); i++)
        if (strcmp(reduce_defs[i].op, fc->n->op) == 0)
            def = &reduce_defs[i];
    ORCH_ASSERT(def);
    const Tensor *X = fc_in_t(fc, 0);
    uint32_t axes;
    if (reduce_mask(fc, def, X->rank, &axes))
        return ST_UNSUPPORTED;
    bool keep = node_attr_i(fc->n, "keepdims", 1) != 0;
    bool fl = dtype_is_float(X->dtype);
    int64_t count = 1;
    for (int d = 0; d < X->rank; d++)
        if (axes & (1u << d))
            count *= X->dims[d];
    // An empty integer max/min gives the type's extreme in the reference, INT64's in a REDUCE.
    if (!fl && count == 0 && (def->red == RED_MAX || def->red == RED_MIN))
        return ST_UNSUPPORTED;
    // The reference computes L2, LogSum and LogSumExp of integers in double, the rest in int64;
    // half-precision squares and sums go through float32.
    bool in_double = def->kind == K_L2 || def->kind == K_LOGSUM || def->kind == K_LOGSUMEXP;
    DType W = !fl ? (in_double ? DT_DOUBLE : X->dtype)
                  : def->kind == K_PLAIN || def->kind == K_L1 ? X->dtype : work_dtype(X->dtype);
    int x = to_dtype(fc, fc_in(fc, 0), W), y = -1;
    switch (def->kind) {
    case K_PLAIN: y = reduce(fc, def->red, x, axes, keep); break;
    case K_L1: y = reduce(fc, RED_SUM, pb_ew1(&fc->b, EW_ABS, x), axes, keep); break;
    case K_SUMSQ: y = reduce(fc, RED_SUM, pb_ew2(&fc->b, EW_MUL, x, x), axes, keep); break;
    case K_L2:
        y = pb_ew1(&fc->b, EW_SQRT, reduce(fc, RED_SUM, pb_ew2(&fc->b, EW_MUL, x, x), axes, keep));
        break;
    case K_LOGSUM: y = pb_ew1(&fc->b, EW_LOG, reduce(fc, RED_SUM, x, axes, keep)); break;
    case K_LOGSUMEXP: y = logsumexp(fc, x, axes); break;
    }
    set_result(fc, 0, y);
    return ST_OK;
}

// ---- ArgMax, ArgMin ----

static int rule_arg(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    // A REDUCE compares uint64 as int64 (values from 2^63 on would order wrongly).
    if (X->dtype == DT_UINT64)
        return ST_UNSUPPORTED;
    int axis = norm_axis(node_attr_i(fc->n, "axis", 0), X->rank);
    RedOp op = strcmp(fc->n->op, "ArgMax") == 0 ? RED_ARGMAX : RED_ARGMIN;
    bool keep = node_attr_i(fc->n, "keepdims", 1) != 0;
    bool last = node_attr_i(fc->n, "select_last_index", 0) != 0;
    fc_set_out(fc, 0, pb_reduce(&fc->b, op, fc_in(fc, 0), 1u << axis, keep, last));
    return ST_OK;
}

// ---- normalisations ----

// (x - mean) * inv_std * scale + bias with the statistics over axes; scale and bias broadcast.
static int normalise(FissionCtx *fc, int x, uint32_t axes, int scale, int bias, int *mean,
                     int *inv) {
    int c = centre(fc, x, axes, mean);
    *inv = inv_std(fc, variance(fc, c, axes), node_attr_f(fc->n, "epsilon", 1e-5f));
    int y = pb_ew2(&fc->b, EW_MUL, pb_ew2(&fc->b, EW_MUL, c, *inv), scale);
    return bias >= 0 ? pb_ew2(&fc->b, EW_ADD, y, bias) : y;
}

// Statistics over the axes from `axis` on; the optional Mean and InvStdDev outputs (stash_type)
// are the statistics themselves.
static int rule_layer_norm(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    if (tensor_numel(X) == 0) // the reference's statistics of an empty row are 0, a REDUCE's NaN
        return ST_UNSUPPORTED;
    int axis = norm_axis(node_attr_i(fc->n, "axis", -1), X->rank);
    DType W = work_dtype(X->dtype);
    int x = to_dtype(fc, fc_in(fc, 0), W), mean, inv;
    int scale = to_dtype(fc, fc_in(fc, 1), W);
    int bias = fc_in(fc, 2) >= 0 ? to_dtype(fc, fc_in(fc, 2), W) : -1;
    set_result(fc, 0, normalise(fc, x, axes_range(axis, X->rank), scale, bias, &mean, &inv));
    if (fc->n->n_out > 1 && fc_out_t(fc, 1))
        set_result(fc, 1, mean);
    if (fc->n->n_out > 2 && fc_out_t(fc, 2))
        set_result(fc, 2, inv);
    return ST_OK;
}

// Statistics per (n, c) over the spatial axes of [N, C, spatial...].
static int rule_instance_norm(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    if (tensor_numel(X) == 0)
        return ST_UNSUPPORTED;
    DType W = work_dtype(X->dtype);
    int x = to_dtype(fc, fc_in(fc, 0), W), mean, inv;
    int scale = channel_vec(fc, fc_in(fc, 1), X->rank - 1, W);
    int bias = channel_vec(fc, fc_in(fc, 2), X->rank - 1, W);
    set_result(fc, 0, normalise(fc, x, axes_range(2, X->rank), scale, bias, &mean, &inv));
    return ST_OK;
}

// x seen as [N, G, C/G, S] (S the spatial size), statistics over the last two axes, scale and
// bias per channel ([G, C/G, 1]) or, before opset 21, per group ([G, 1, 1]).
static int rule_group_norm(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    if (tensor_numel(X) == 0)
        return ST_UNSUPPORTED;
    DType W = work_dtype(X->dtype);
    int64_t G = node_attr_i(fc->n, "num_groups", 1), C = X->dims[1], S = 1;
    for (int d = 2; d < X->rank; d++)
        S *= X->dims[d];
    int64_t grouped[4] = {X->dims[0], G, C / G, S};
    int64_t pdims[3] = {G, fc->n->opset >= 21 ? C / G : 1, 1};
    int x = pb_reshape(&fc->b, to_dtype(fc, fc_in(fc, 0), W), 4, grouped), mean, inv;
    int scale = pb_reshape(&fc->b, to_dtype(fc, fc_in(fc, 1), W), 3, pdims);
    int bias = pb_reshape(&fc->b, to_dtype(fc, fc_in(fc, 2), W), 3, pdims);
    set_result(fc, 0, normalise(fc, x, axes_range(2, 4), scale, bias, &mean, &inv));
    return ST_OK;
}

// Inference BatchNormalization is a per-channel affine map. With constant parameters it is
// folded here into y = x * s + t, s = scale / sqrt(var + eps), t = bias - mean * s (s as stored,
// so x = mean gives bias), which a later pass can fold into a preceding Conv. Otherwise the
// reference formula y = (x - mean) * (scale / sqrt(var + eps)) + bias on [C, 1, ...] vectors.
static int rule_batch_norm(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    DType W = work_dtype(X->dtype);
    int rank = X->rank - 1; // of the [C, 1, ...] parameter views
    int64_t C = X->dims[1];
    double eps = node_attr_f(fc->n, "epsilon", 1e-5f);
    int x = to_dtype(fc, fc_in(fc, 0), W), y;
    bool constant = true;
    for (int i = 1; i <= 4; i++)
        constant &= fc_in_t(fc, i)->kind == TK_CONST;
    if (constant) {
        size_t es = dtype_size(W);
        unsigned char *s = xmalloc(es * (size_t)(C + 1)), *t = xmalloc(es * (size_t)(C + 1));
        const Tensor *P[5];
        for (int i = 1; i <= 4; i++)
            P[i] = fc_in_t(fc, i);
        for (int64_t ch = 0; ch < C; ch++) {
            double sc = elem_get_f64(P[1]->dtype, P[1]->data, ch);
            double bias = elem_get_f64(P[2]->dtype, P[2]->data, ch);
            double mean = elem_get_f64(P[3]->dtype, P[3]->data, ch);
            double var = elem_get_f64(P[4]->dtype, P[4]->data, ch);
            elem_set_f64(W, s, ch, sc / sqrt(var + eps));
            elem_set_f64(W, t, ch, bias - mean * elem_get_f64(W, s, ch));
        }
        int64_t dims[ORCH_MAX_RANK];
        dims[0] = C;
        for (int d = 1; d < rank; d++)
            dims[d] = 1;
        int sv = pb_const(&fc->b, W, rank, dims, s), tv = pb_const(&fc->b, W, rank, dims, t);
        free(s);
        free(t);
        y = pb_ew2(&fc->b, EW_ADD, pb_ew2(&fc->b, EW_MUL, x, sv), tv);
    } else {
        int scale = channel_vec(fc, fc_in(fc, 1), rank, W);
        int bias = channel_vec(fc, fc_in(fc, 2), rank, W);
        int mean = channel_vec(fc, fc_in(fc, 3), rank, W);
        int var = channel_vec(fc, fc_in(fc, 4), rank, W);
        int sd = pb_ew1(&fc->b, EW_SQRT, pb_ew2i(&fc->b, EW_ADD, var, eps));
        int a = pb_ew2(&fc->b, EW_DIV, scale, sd);
        y = pb_ew2(&fc->b, EW_ADD, pb_ew2(&fc->b, EW_MUL, pb_ew2(&fc->b, EW_SUB, x, mean), a),
                   bias);
    }
    set_result(fc, 0, y);
    return ST_OK;
}

// (x - mean) / (sqrt(variance) + 1e-9) over the axes attribute (default [0, 2, 3]): the epsilon
// goes on the deviation, as in the ONNX function body.
static int rule_mvn(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    if (tensor_numel(X) == 0)
        return ST_UNSUPPORTED;
    static const int64_t dflt[] = {0, 2, 3};
    const int64_t *list;
    int count = node_attr_ints(fc->n, "axes", &list);
    if (count < 0) {
        list = dflt;
        count = 3;
    }
    uint32_t axes = 0;
    for (int i = 0; i < count; i++)
        axes |= 1u << norm_axis(list[i], X->rank);
    int x = to_dtype(fc, fc_in(fc, 0), work_dtype(X->dtype)), mean;
    int c = centre(fc, x, axes, &mean);
    int sd = pb_ew1(&fc->b, EW_SQRT, variance(fc, c, axes));
    set_result(fc, 0, pb_ew2(&fc->b, EW_DIV, c, pb_ew2i(&fc->b, EW_ADD, sd, 1e-9)));
    return ST_OK;
}

// x / ||x||_p along axis (p = 1 or 2); a zero norm gives zeros rather than 0/0, as the spec asks.
static int rule_lp_norm(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    PB *b = &fc->b;
    uint32_t axes = 1u << norm_axis(node_attr_i(fc->n, "axis", -1), X->rank);
    DType W = work_dtype(X->dtype);
    int x = to_dtype(fc, fc_in(fc, 0), W), norm;
    if (node_attr_i(fc->n, "p", 2) == 1)
        norm = reduce(fc, RED_SUM, pb_ew1(b, EW_ABS, x), axes, true);
    else
        norm = pb_ew1(b, EW_SQRT, reduce(fc, RED_SUM, pb_ew2(b, EW_MUL, x, x), axes, true));
    int zero = pb_const_scalar(b, W, 0);
    int y = pb_where(b, pb_ew2i(b, EW_EQ, norm, 0), zero, pb_ew2(b, EW_DIV, x, norm));
    set_result(fc, 0, y);
    return ST_OK;
}

// ---- global pools ----

// A reduction over the spatial axes of [N, C, spatial...], kept as 1s. Max and mean reduce the
// input dtype directly (double accumulation, one rounding); Lp is (sum |x|^p)^(1/p).
static int rule_global_pool(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    uint32_t axes = axes_range(2, X->rank);
    int x = fc_in(fc, 0), y;
    if (strcmp(fc->n->op, "GlobalMaxPool") == 0) {
        y = reduce(fc, RED_MAX, x, axes, true);
    } else if (strcmp(fc->n->op, "GlobalAveragePool") == 0) {
        y = reduce(fc, RED_MEAN, x, axes, true);
    } else {
        double p = (double)node_attr_i(fc->n, "p", 2);
        x = to_dtype(fc, x, work_dtype(X->dtype));
        int powed = pb_ew2i(&fc->b, EW_POW, pb_ew1(&fc->b, EW_ABS, x), p);
        y = pb_ew2i(&fc->b, EW_POW, reduce(fc, RED_SUM, powed, axes, true), 1.0 / p);
    }
    set_result(fc, 0, y);
    return ST_OK;
}

// ---- windowed pools ----

// x [N, C, in...] → [N, C, out..., k...]: a table pads every spatial axis (pad value outside the
// input: pos = o*s + t*d - pb), gathers pick each window's taps along each axis, a transpose moves
// the tap axes last.
static int pool_windows(FissionCtx *fc, int x, const PoolGeom *p, double pad_value) {
    PB *b = &fc->b;
    const Tensor *X = pb_t(b, x);
    int S = p->S;
    // Padded extent per axis: every position a window reads, from -pb on.
    int64_t pdims[ORCH_MAX_RANK];
    int64_t *tables[ORCH_MAX_RANK] = {0};
    memcpy(pdims, X->dims, sizeof(int64_t) * (size_t)X->rank);
    for (int i = 0; i < S; i++) {
        int64_t last = (p->out[i] - 1) * p->s[i] + (p->k[i] - 1) * p->d[i]; // in padded coords
        pdims[2 + i] = last + 1;
        tables[2 + i] = xmalloc(sizeof(int64_t) * (size_t)(last + 1));
        for (int64_t q = 0; q <= last; q++) {
            int64_t pos = q - p->pb[i];
            tables[2 + i][q] = pos >= 0 && pos < p->in[i] ? pos : -1;
        }
    }
    int t = pb_table(b, x, pdims, tables, pad_value);
    for (int i = 0; i < ORCH_MAX_RANK; i++)
        free(tables[i]);
    // Gather axis 2+2i (after i earlier gathers each added one axis) with idx[o][tap].
    for (int i = 0; i < S; i++) {
        int64_t n = p->out[i] * p->k[i];
        int64_t *idx = xmalloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        for (int64_t o = 0; o < p->out[i]; o++)
            for (int64_t k = 0; k < p->k[i]; k++)
                idx[o * p->k[i] + k] = o * p->s[i] + k * p->d[i];
        int64_t idims[2] = {p->out[i], p->k[i]};
        t = pb_gather(b, t, 2 + 2 * i, 2, idims, idx);
        free(idx);
    }
    // [N, C, o0, k0, o1, k1, ...] → [N, C, o0, o1, ..., k0, k1, ...]
    int perm[ORCH_MAX_RANK] = {0, 1};
    for (int i = 0; i < S; i++) {
        perm[2 + i] = 2 + 2 * i;
        perm[2 + S + i] = 3 + 2 * i;
    }
    return pb_transpose(b, t, perm);
}

static int rule_pool(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    bool is_max = strcmp(fc->n->op, "MaxPool") == 0;
    // The Indices output, and pools whose windows would need more than 8 axes, stay opaque.
    if ((is_max && fc->n->n_out > 1 && fc_out_t(fc, 1)) || X->rank < 3 || X->rank > 5)
        return ST_UNSUPPORTED;
    PoolGeom p;
    Err e = {0};
    if (pool_geom(fc->n, X, &p, &e))
        return ST_UNSUPPORTED; // the shape rule already checked it; keep the reference's message
    int S = p.S;
    uint32_t taps = axes_range(2 + S, 2 + 2 * S);
    PB *b = &fc->b;
    if (is_max) {
        int w = pool_windows(fc, fc_in(fc, 0), &p, -INFINITY);
        set_result(fc, 0, pb_reduce(b, RED_MAX, w, taps, false, false));
        return ST_OK;
    }
    DType W = work_dtype(X->dtype);
    int w = pool_windows(fc, to_dtype(fc, fc_in(fc, 0), W), &p, 0.0);
    int sum = pb_reduce(b, RED_SUM, w, taps, false, false);
    // Taps counted per output position: inside the input, or (count_include_pad) inside the
    // input plus its declared pads; windows past the end pad (ceil_mode) never count those taps.
    int64_t cdims[ORCH_MAX_RANK] = {1, 1}, n = 1;
    for (int i = 0; i < S; i++) {
        cdims[2 + i] = p.out[i];
        n *= p.out[i];
    }
    double *counts = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t at = 0; at < n; at++) {
        int64_t rest = at, count = 1;
        for (int i = S - 1; i >= 0; i--) {
            int64_t o = rest % p.out[i], c = 0;
            rest /= p.out[i];
            for (int64_t k = 0; k < p.k[i]; k++) {
                int64_t pos = o * p.s[i] - p.pb[i] + k * p.d[i];
                c += p.include_pad ? (pos >= -p.pb[i] && pos < p.in[i] + p.pe[i])
                                   : (pos >= 0 && pos < p.in[i]);
            }
            count *= c;
        }
        counts[at] = (double)count;
    }
    int cnt = pb_const(b, DT_DOUBLE, 2 + S, cdims, counts);
    free(counts);
    set_result(fc, 0, pb_ew2(b, EW_DIV, sum, to_dtype(fc, cnt, W)));
    return ST_OK;
}

const FissionRuleDef fission_rules_reduce[] = {
    {"MaxPool", rule_pool},
    {"AveragePool", rule_pool},
    {"Softmax", rule_softmax},
    {"LogSoftmax", rule_softmax},
    {"ReduceSum", rule_reduce},
    {"ReduceMean", rule_reduce},
    {"ReduceMax", rule_reduce},
    {"ReduceMin", rule_reduce},
    {"ReduceProd", rule_reduce},
    {"ReduceL1", rule_reduce},
    {"ReduceL2", rule_reduce},
    {"ReduceSumSquare", rule_reduce},
    {"ReduceLogSum", rule_reduce},
    {"ReduceLogSumExp", rule_reduce},
    {"ArgMax", rule_arg},
    {"ArgMin", rule_arg},
    {"LayerNormalization", rule_layer_norm},
    {"InstanceNormalization", rule_instance_norm},
    {"GroupNormalization", rule_group_norm},
    {"BatchNormalization", rule_batch_norm},
    {"MeanVarianceNormalization", rule_mvn},
    {"LpNormalization", rule_lp_norm},
    {"GlobalAveragePool", rule_global_pool},
    {"GlobalMaxPool", rule_global_pool},
    {"GlobalLpPool", rule_global_pool},
    {NULL, NULL},
};
