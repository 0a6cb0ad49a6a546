// Normalisation ONNX ops: BatchNormalization (inference), Instance-, Layer-, Group-, Lp- and
// MeanVarianceNormalization. Means and variances are computed in double in two passes (mean, then
// mean squared deviation): as exact as ONNX's float32 reference, and a variance is never negative.
#include "reduce_internal.h"

#include <math.h>
#include <stdlib.h>

// Mean and population variance of len elements of x starting at off.
static void block_stats(DType t, const void *x, int64_t off, int64_t len, double *mean,
                        double *var) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < len; i++)
        s += ld(t, x, off + i);
    double m = len ? s / (double)len : 0;
    for (int64_t i = 0; i < len; i++) {
        double d = ld(t, x, off + i) - m;
        ss += d * d;
    }
    *mean = m;
    *var = len ? ss / (double)len : 0;
}

// Requires input i to be a float tensor of shape [count]; `what` names it in the message.
static int need_vector(const Graph *g, const Node *n, int i, int64_t count, const char *what,
                       Err *e) {
    int rc = op_need_dtype(g, n, i, reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *t = node_input(g, n, i);
    if (t->rank != 1 || t->dims[0] != count) {
        char s[128];
        return op_err(e, ST_INVALID, n, "%s '%s' must have shape [%lld], got %s", what, t->name,
                      (long long)count, tensor_shape_str(t, s, sizeof s));
    }
    return ST_OK;
}

// Requires input 0 to be a float tensor of rank >= 2 laid out [N, C, ...].
static int need_nc(const Graph *g, const Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 2)
        return op_err(e, ST_INVALID, n, "input must be [N, C, ...] (rank >= 2), got rank %d",
                      x->rank);
    return ST_OK;
}

static void same_shape_out(Graph *g, Node *n) {
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
}

// ---- BatchNormalization ----

int norm_infer_batch(Graph *g, Node *n, Err *e) {
    int rc = need_nc(g, n, e);
    if (rc)
        return rc;
    if (node_attr_i(n, "training_mode", 0) != 0)
        return op_err(e, ST_UNSUPPORTED, n,
                      "training_mode=1 is not supported: orch runs inference only (export the "
                      "model in eval mode)");
    for (int j = 1; j < n->n_out; j++)
        if (node_output(g, n, j))
            return op_err(e, ST_UNSUPPORTED, n,
                          "output %d (a training statistic) is not supported: orch runs "
                          "inference only, where BatchNormalization has the single output Y",
                          j);
    const Tensor *x = node_input(g, n, 0);
    static const char *const what[] = {"", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i <= 4; i++) {
        rc = need_vector(g, n, i, x->dims[1], what[i], e);
        if (rc)
            return rc;
    }
    same_shape_out(g, n);
    return ST_OK;
}

int norm_run_batch(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    DType t = x->dtype;
    double eps = node_attr_f(r->n, "epsilon", 1e-5f);
    int64_t N = x->dims[0], C = x->dims[1], S = dims_prod(x->dims, 2, x->rank);
    for (int64_t c = 0; c < C; c++) {
        double scale = ld(r->in[1]->dtype, r->x[1], c), bias = ld(r->in[2]->dtype, r->x[2], c);
        double mean = ld(r->in[3]->dtype, r->x[3], c), var = ld(r->in[4]->dtype, r->x[4], c);
        double a = scale / sqrt(var + eps);
        for (int64_t b = 0; b < N; b++) {
            int64_t off = (b * C + c) * S;
            for (int64_t i = 0; i < S; i++)
                st(t, r->y[0], off + i, (ld(t, r->x[0], off + i) - mean) * a + bias);
        }
    }
    return ST_OK;
}

// ---- InstanceNormalization, GroupNormalization ----

int norm_infer_instance(Graph *g, Node *n, Err *e) {
    int rc = need_nc(g, n, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if ((rc = need_vector(g, n, 1, x->dims[1], "scale", e)) ||
        (rc = need_vector(g, n, 2, x->dims[1], "B", e)))
        return rc;
    same_shape_out(g, n);
    return ST_OK;
}

// Normalises each of N*G contiguous groups of C/G channels, then applies scale and bias per
// channel (per_channel) or per group. InstanceNormalization is the case G = C.
static void group_norm(const OpRun *r, int64_t G, bool per_channel) {
    const Tensor *x = r->in[0];
    DType t = x->dtype;
    double eps = node_attr_f(r->n, "epsilon", 1e-5f);
    int64_t N = x->dims[0], C = x->dims[1], S = dims_prod(x->dims, 2, x->rank), CG = C / G;
    for (int64_t b = 0; b < N; b++) {
        for (int64_t grp = 0; grp < G; grp++) {
            int64_t off = (b * C + grp * CG) * S;
            double mean, var;
            block_stats(t, r->x[0], off, CG * S, &mean, &var);
            double inv = 1.0 / sqrt(var + eps);
            for (int64_t c = 0; c < CG; c++) {
                int64_t p = per_channel ? grp * CG + c : grp;
                double scale = ld(r->in[1]->dtype, r->x[1], p);
                double bias = ld(r->in[2]->dtype, r->x[2], p);
                for (int64_t i = off + c * S; i < off + (c + 1) * S; i++)
                    st(t, r->y[0], i, (ld(t, r->x[0], i) - mean) * inv * scale + bias);
            }
        }
    }
}

int norm_run_instance(const OpRun *r, Err *e) {
    (void)e;
    group_norm(r, r->in[0]->dims[1], true);
    return ST_OK;
}

// GroupNormalization-18 takes scale and bias per group; opset 21 changed them to per channel.
int norm_infer_group(Graph *g, Node *n, Err *e) {
    int rc = need_nc(g, n, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    const Attr *a = node_attr(n, "num_groups");
    if (!a || a->type != AT_INT)
        return op_err(e, ST_INVALID, n, "the int attribute num_groups is required");
    int64_t G = a->i, C = x->dims[1];
    if (G <= 0 || C % G != 0)
        return op_err(e, ST_INVALID, n, "num_groups %lld must be positive and divide C = %lld",
                      (long long)G, (long long)C);
    int64_t per = n->opset >= 21 ? C : G;
    int64_t stash = node_attr_i(n, "stash_type", 1);
    if (stash != DT_FLOAT && stash != DT_DOUBLE && stash != DT_FLOAT16 && stash != DT_BFLOAT16)
        return op_err(e, ST_INVALID, n, "stash_type %lld is not a float type", (long long)stash);
    if ((rc = need_vector(g, n, 1, per, "scale", e)) || (rc = need_vector(g, n, 2, per, "bias", e)))
        return rc;
    same_shape_out(g, n);
    return ST_OK;
}

int norm_run_group(const OpRun *r, Err *e) {
    (void)e;
    group_norm(r, node_attr_i(r->n, "num_groups", 1), r->n->opset >= 21);
    return ST_OK;
}

// ---- LayerNormalization ----

// Requires input i (absent allowed when optional) to broadcast to x's shape one way.
static int need_unidirectional(const Graph *g, const Node *n, int i, const Tensor *x, Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (!t)
        return ST_OK;
    int rc = op_need_dtype(g, n, i, reduce_float_types, e);
    if (rc)
        return rc;
    bool ok = t->rank <= x->rank;
    for (int d = 0; ok && d < t->rank; d++) {
        int64_t v = t->dims[d], xv = x->dims[x->rank - t->rank + d];
        ok = v == xv || v == 1;
    }
    if (!ok) {
        char a[128], b[128];
        return op_err(e, ST_INVALID, n, "input %d ('%s', shape %s) does not broadcast to X's %s", i,
                      t->name, tensor_shape_str(t, a, sizeof a), tensor_shape_str(x, b, sizeof b));
    }
    return ST_OK;
}

int norm_infer_layer(Graph *g, Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 1)
        return op_err(e, ST_INVALID, n, "X must have rank >= 1, got a scalar");
    int axis;
    if ((rc = op_axis(n, node_attr_i(n, "axis", -1), x->rank, "axis", &axis, e)))
        return rc;
    int64_t stash = node_attr_i(n, "stash_type", 1);
    if (stash != DT_FLOAT && stash != DT_DOUBLE && stash != DT_FLOAT16 && stash != DT_BFLOAT16)
        return op_err(e, ST_INVALID, n, "stash_type %lld is not a float type", (long long)stash);
    if ((rc = need_unidirectional(g, n, 1, x, e)) || (rc = need_unidirectional(g, n, 2, x, e)))
        return rc;
    same_shape_out(g, n);
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < axis ? x->dims[d] : 1;
    for (int j = 1; j <= 2; j++) {
        Tensor *o = node_output(g, n, j);
        if (o)
            tensor_set_shape(o, (DType)stash, x->rank, dims);
    }
    return ST_OK;
}

int norm_run_layer(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0], *w = r->in[1], *bias = r->n->n_in > 2 ? r->in[2] : NULL;
    DType t = x->dtype;
    int axis;
    op_axis(r->n, node_attr_i(r->n, "axis", -1), x->rank, "axis", &axis, e);
    double eps = node_attr_f(r->n, "epsilon", 1e-5f);
    int64_t rows = dims_prod(x->dims, 0, axis), cols = dims_prod(x->dims, axis, x->rank);
    int64_t sw[ORCH_MAX_RANK], sb[ORCH_MAX_RANK];
    Walk walk;
    walk_init(&walk, x->rank, x->dims);
    op_broadcast_strides(w, x->rank, x->dims, sw);
    walk_add(&walk, sw);
    if (bias) {
        op_broadcast_strides(bias, x->rank, x->dims, sb);
        walk_add(&walk, sb);
    }
    for (int64_t row = 0; row < rows; row++) {
        int64_t off = row * cols;
        double mean, var;
        block_stats(t, r->x[0], off, cols, &mean, &var);
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t i = off; i < off + cols; i++, walk_next(&walk)) {
            double v = (ld(t, r->x[0], i) - mean) * inv * ld(w->dtype, r->x[1], walk.off[0]);
            if (bias)
                v += ld(bias->dtype, r->x[2], walk.off[1]);
            st(t, r->y[0], i, v);
        }
        if (r->n->n_out > 1 && r->out[1])
            st(r->out[1]->dtype, r->y[1], row, mean);
        if (r->n->n_out > 2 && r->out[2])
            st(r->out[2]->dtype, r->y[2], row, inv);
    }
    return ST_OK;
}

// ---- LpNormalization ----

int norm_infer_lp(Graph *g, Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, reduce_float_types, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    if (x->rank < 1)
        return op_err(e, ST_INVALID, n, "input must have rank >= 1, got a scalar");
    int axis;
    if ((rc = op_axis(n, node_attr_i(n, "axis", -1), x->rank, "axis", &axis, e)))
        return rc;
    int64_t p = node_attr_i(n, "p", 2);
    if (p != 1 && p != 2)
        return op_err(e, ST_INVALID, n, "p must be 1 or 2, got %lld", (long long)p);
    same_shape_out(g, n);
    return ST_OK;
}

// A zero norm gives zeros rather than 0/0, as the spec asks.
int norm_run_lp(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    DType t = x->dtype;
    int axis;
    op_axis(r->n, node_attr_i(r->n, "axis", -1), x->rank, "axis", &axis, e);
    bool l1 = node_attr_i(r->n, "p", 2) == 1;
    int64_t outer = dims_prod(x->dims, 0, axis), len = x->dims[axis];
    int64_t inner = dims_prod(x->dims, axis + 1, x->rank);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double norm = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = ld(t, r->x[0], base + k * inner);
                norm += l1 ? fabs(v) : v * v;
            }
            norm = l1 ? norm : sqrt(norm);
            for (int64_t k = 0; k < len; k++) {
                int64_t at = base + k * inner;
                st(t, r->y[0], at, norm == 0 ? 0.0 : ld(t, r->x[0], at) / norm);
            }
        }
    }
    return ST_OK;
}

// ---- MeanVarianceNormalization ----

// Marks the axes attribute (default [0, 2, 3]) in reduced.
static int mvn_axes(const Node *n, int rank, bool *reduced, Err *e) {
    static const int64_t dflt[] = {0, 2, 3};
    const int64_t *axes = dflt;
    int count = node_attr_ints(n, "axes", &axes);
    if (count < 0) {
        axes = dflt;
        count = 3;
    }
    for (int d = 0; d < rank; d++)
        reduced[d] = false;
    for (int i = 0; i < count; i++) {
        int ax;
        int rc = op_axis(n, axes[i], rank, "axes value", &ax, e);
        if (rc)
            return rc;
        if (ax >= rank)
            return op_err(e, ST_INVALID, n, "axes value %d is out of range for rank %d", ax, rank);
        if (reduced[ax])
            return op_err(e, ST_INVALID, n, "axis %d is listed twice in axes", ax);
        reduced[ax] = true;
    }
    return ST_OK;
}

int norm_infer_mvn(Graph *g, Node *n, Err *e) {
    int rc = op_need_dtype(g, n, 0, reduce_float_types, e);
    if (rc)
        return rc;
    bool reduced[ORCH_MAX_RANK];
    if ((rc = mvn_axes(n, node_input(g, n, 0)->rank, reduced, e)))
        return rc;
    same_shape_out(g, n);
    return ST_OK;
}

// (X - mean) / (sqrt(variance) + 1e-9): the epsilon goes on the deviation, as in the ONNX
// function body.
int norm_run_mvn(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    DType t = x->dtype;
    bool reduced[ORCH_MAX_RANK];
    mvn_axes(r->n, x->rank, reduced, e);
    int64_t ostr[ORCH_MAX_RANK], s = 1, count = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostr[d] = reduced[d] ? 0 : s;
        count *= reduced[d] ? x->dims[d] : 1;
        s *= reduced[d] ? 1 : x->dims[d];
    }
    int64_t xn = tensor_numel(x), groups = s;
    if (xn == 0)
        return ST_OK;
    double *mean = calloc((size_t)groups * 2, sizeof(double)), *var = mean + groups;
    if (!mean)
        return op_err(e, ST_RUNTIME, r->n, "out of memory");
    Walk w;
    walk_init(&w, x->rank, x->dims);
    walk_add(&w, ostr);
    for (int64_t i = 0; i < xn; i++, walk_next(&w))
        mean[w.off[0]] += ld(t, r->x[0], i);
    for (int64_t gi = 0; gi < groups; gi++)
        mean[gi] /= (double)count;
    walk_init(&w, x->rank, x->dims);
    walk_add(&w, ostr);
    for (int64_t i = 0; i < xn; i++, walk_next(&w)) {
        double d = ld(t, r->x[0], i) - mean[w.off[0]];
        var[w.off[0]] += d * d;
    }
    walk_init(&w, x->rank, x->dims);
    walk_add(&w, ostr);
    for (int64_t i = 0; i < xn; i++, walk_next(&w)) {
        int64_t gi = w.off[0];
        double sd = sqrt(var[gi] / (double)count);
        st(t, r->y[0], i, (ld(t, r->x[0], i) - mean[gi]) / (sd + 1e-9));
    }
    free(mean);
    return ST_OK;
}
