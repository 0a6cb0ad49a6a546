// Fission rules for layout ONNX ops: each becomes LAYOUT primitives (index maps), so that a
// consumer can later read through them without materialising the tensor; Resize's linear and
// cubic modes add the weighted sums (ELEMWISE) over gathered taps. Attributes and constant
// inputs were validated by the ops' shape rules (src/ops/layout.c, indexing.c, resize.c); Slice,
// Split, Pad and Resize take their index arithmetic from the reference ops (src/ops/layout.h,
// resize.h), whose plans fail here only for an input that is not constant: the node stays opaque.
#include "fission.h"

#include "../ops/layout.h"
#include "../ops/ops.h"
#include "../ops/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int norm_axis(int64_t axis, int rank) {
    return (int)(axis < 0 ? axis + rank : axis);
}

// Identity, and Dropout in inference: the output is the input itself; Dropout's optional mask
// is all true (a broadcast scalar).
static int rule_identity(FissionCtx *fc) {
    fc_set_out(fc, 0, fc_in(fc, 0));
    if (fc->n->n_out > 1 && fc_out_t(fc, 1)) {
        const Tensor *M = fc_out_t(fc, 1);
        int one = pb_const_scalar(&fc->b, DT_BOOL, 1);
        fc_set_out(fc, 1, pb_broadcast(&fc->b, one, M->rank, M->dims));
    }
    return ST_OK;
}

static int rule_transpose(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    int perm[ORCH_MAX_RANK];
    const int64_t *p;
    int n = node_attr_ints(fc->n, "perm", &p);
    for (int d = 0; d < X->rank; d++)
        perm[d] = n == X->rank ? (int)p[d] : X->rank - 1 - d;
    fc_set_out(fc, 0, pb_transpose(&fc->b, fc_in(fc, 0), perm));
    return ST_OK;
}

// Every op that only changes dims over the same element order: one reshape to the output shape.
static int rule_reshape(FissionCtx *fc) {
    const Tensor *Y = fc_out_t(fc, 0);
    fc_set_out(fc, 0, pb_reshape(&fc->b, fc_in(fc, 0), Y->rank, Y->dims));
    return ST_OK;
}

// ---- Slice, Split, Concat ----

// Slice: the start and step per axis from layout.h's plan; the counts are the output's dims.
static int rule_slice(FissionCtx *fc) {
    SlicePlan p;
    Err e = {0};
    if (layout_slice_plan(fc->g, fc->n, fc_in_t(fc, 0), &p, &e) != ST_OK)
        return ST_UNSUPPORTED;
    fc_set_out(fc, 0, pb_slice(&fc->b, fc_in(fc, 0), p.start, p.step, fc_out_t(fc, 0)->dims));
    return ST_OK;
}

// Split: one slice per (present) output, of the sizes layout.h gives.
static int rule_split(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    int axis = norm_axis(node_attr_i(fc->n, "axis", 0), X->rank), count = fc->n->n_out;
    int64_t *sizes = xmalloc(sizeof(int64_t) * (size_t)(count + 1));
    Err e = {0};
    if (layout_split_sizes(fc->g, fc->n, X, axis, sizes, &e) != ST_OK) {
        free(sizes);
        return ST_UNSUPPORTED;
    }
    int64_t start[ORCH_MAX_RANK] = {0}, step[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
    for (int d = 0; d < X->rank; d++) {
        step[d] = 1;
        dims[d] = X->dims[d];
    }
    for (int i = 0; i < count; i++) {
        dims[axis] = sizes[i];
        if (fc_out_t(fc, i))
            fc_set_out(fc, i, pb_slice(&fc->b, fc_in(fc, 0), start, step, dims));
        start[axis] += sizes[i];
    }
    free(sizes);
    return ST_OK;
}

static int rule_concat(FissionCtx *fc) {
    int n = fc->n->n_in, rank = fc_out_rank(fc, 0);
    int *ins = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        ins[i] = fc_in(fc, i);
    int y = pb_concat(&fc->b, n, ins, norm_axis(node_attr_i(fc->n, "axis", 0), rank));
    free(ins);
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// ---- Expand, Tile, Pad ----

static int rule_expand(FissionCtx *fc) {
    const Tensor *Y = fc_out_t(fc, 0);
    fc_set_out(fc, 0, pb_broadcast(&fc->b, fc_in(fc, 0), Y->rank, Y->dims));
    return ST_OK;
}

// Frees the per-axis tables a rule built for pb_table (which copies them); NULL: identity axis.
static void free_tables(int rank, int64_t **tables) {
    for (int d = 0; d < rank; d++)
        free(tables[d]);
}

// Tile: output position o of an axis reads input position o mod dim.
static int rule_tile(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    for (int d = 0; d < X->rank; d++) {
        if (Y->dims[d] == X->dims[d])
            continue;
        tables[d] = xmalloc(sizeof(int64_t) * (size_t)(Y->dims[d] + 1));
        for (int64_t o = 0; o < Y->dims[d]; o++)
            tables[d][o] = o % X->dims[d];
    }
    fc_set_out(fc, 0, pb_table(&fc->b, fc_in(fc, 0), Y->dims, tables, 0));
    free_tables(X->rank, tables);
    return ST_OK;
}

// The constant of Pad (input 2; absent or empty: zero). The layout primitive carries it as a
// double, so an integer that a double cannot hold exactly stays with the reference op.
static bool pad_constant(const FissionCtx *fc, double *v) {
    const Tensor *t = fc_in_t(fc, 2);
    *v = 0;
    if (!t || tensor_numel(t) == 0)
        return true;
    if (t->kind != TK_CONST)
        return false;
    *v = elem_get_f64(t->dtype, t->data, 0);
    if (dtype_is_float(t->dtype))
        return true;
    uint64_t back = 0;
    elem_set_f64(t->dtype, &back, 0, *v);
    return elem_get_i64(t->dtype, &back, 0) == elem_get_i64(t->dtype, t->data, 0);
}

// Pad: per padded axis, a table of layout.h's source indices (-1: the constant).
static int rule_pad(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    PadPlan p;
    int64_t dims[ORCH_MAX_RANK];
    double value;
    Err e = {0};
    if (layout_pad_plan(fc->g, fc->n, X, &p, dims, &e) != ST_OK || !pad_constant(fc, &value))
        return ST_UNSUPPORTED;
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    for (int d = 0; d < X->rank; d++) {
        if (p.begin[d] == 0 && Y->dims[d] == X->dims[d])
            continue;
        tables[d] = xmalloc(sizeof(int64_t) * (size_t)(Y->dims[d] + 1));
        for (int64_t o = 0; o < Y->dims[d]; o++)
            tables[d][o] = layout_pad_source(p.mode, o, p.begin[d], X->dims[d]);
    }
    fc_set_out(fc, 0, pb_table(&fc->b, fc_in(fc, 0), Y->dims, tables, value));
    free_tables(X->rank, tables);
    return ST_OK;
}

// ---- DepthToSpace, SpaceToDepth: reshape to 6-D, transpose, reshape ----

static int depth_space(FissionCtx *fc, bool to_space) {
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    int64_t b = node_attr_i(fc->n, "blocksize", 1);
    int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3];
    int64_t d6[6];
    const int *perm;
    // DCR: [N, b, b, C', H, W] -> [0,3,4,1,5,2]; CRD: [N, C', b, b, H, W] -> [0,1,4,2,5,3];
    // SpaceToDepth: [N, C, H/b, b, W/b, b] -> [0,3,5,1,2,4].
    static const int dcr_perm[6] = {0, 3, 4, 1, 5, 2}, crd_perm[6] = {0, 1, 4, 2, 5, 3},
                     s2d_perm[6] = {0, 3, 5, 1, 2, 4};
    if (to_space) {
        bool dcr = strcmp(node_attr_s(fc->n, "mode", "DCR"), "DCR") == 0;
        int64_t Cb = C / (b * b), dcr_dims[6] = {N, b, b, Cb, H, W},
                crd_dims[6] = {N, Cb, b, b, H, W};
        memcpy(d6, dcr ? dcr_dims : crd_dims, sizeof d6);
        perm = dcr ? dcr_perm : crd_perm;
    } else {
        int64_t s2d_dims[6] = {N, C, H / b, b, W / b, b};
        memcpy(d6, s2d_dims, sizeof d6);
        perm = s2d_perm;
    }
    int t = pb_reshape(&fc->b, fc_in(fc, 0), 6, d6);
    t = pb_transpose(&fc->b, t, perm);
    fc_set_out(fc, 0, pb_reshape(&fc->b, t, Y->rank, Y->dims));
    return ST_OK;
}

static int rule_depth_to_space(FissionCtx *fc) {
    return depth_space(fc, true);
}
static int rule_space_to_depth(FissionCtx *fc) {
    return depth_space(fc, false);
}

// ---- Gather with constant indices ----

// Run-time indices stay opaque (the reference checks them); so do constant ones out of range,
// which the reference reports as an error when it runs.
static int rule_gather(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0), *I = fc_in_t(fc, 1);
    if (I->kind != TK_CONST)
        return ST_UNSUPPORTED;
    int axis = norm_axis(node_attr_i(fc->n, "axis", 0), X->rank);
    int64_t n = tensor_numel(I), size = X->dims[axis];
    int64_t *idx = xmalloc(sizeof(int64_t) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        int64_t v = elem_get_i64(I->dtype, I->data, i);
        if (v < -size || v >= size) {
            free(idx);
            return ST_UNSUPPORTED;
        }
        idx[i] = v < 0 ? v + size : v;
    }
    fc_set_out(fc, 0, pb_gather(&fc->b, fc_in(fc, 0), axis, I->rank, I->dims, idx));
    free(idx);
    return ST_OK;
}

// ---- Resize ----

// Per resized axis, each output position's taps (input positions and weights) as resize.h
// computes them for the reference op, so ties fall the same way. Nearest is one LS_TABLE (the
// window's floor or ceil side); linear and cubic are, axis after axis, one table per tap and a
// weighted sum, out = sum_k w_k[o] * x[src_k[o]]. The sums run in the tensor's dtype (float32 or
// double) where the reference keeps double between axes, so float32 results differ by a rounding
// or so.

// Wider windows (antialiased downscales by more than 1/8) stay opaque: too many primitives.
enum { RESIZE_MAX_TAPS = 16 };

// Nearest: the source index per output position and axis (-1: the extrapolation value).
static int resize_nearest(FissionCtx *fc, const ResizePlan *p, int x) {
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    for (int d = 0; d < p->rank; d++) {
        if (resize_axis_is_identity(p, d))
            continue;
        tables[d] = xmalloc(sizeof(int64_t) * (size_t)(p->out[d] + 1));
        for (int64_t o = 0; o < p->out[d]; o++)
            tables[d][o] = resize_nearest_source(p, d, o);
    }
    int y = pb_table(&fc->b, x, p->out, tables, p->extrapolation);
    free_tables(p->rank, tables);
    return y;
}

// Linear or cubic along axis d of x: one table and one weight per tap, summed in tap order as
// the reference does. An output position outside the roi reads the extrapolation value (the
// tables' pad value) with weight 1 on the first tap and 0 on the others.
static int interpolate_axis(FissionCtx *fc, const ResizePlan *p, int d, int x) {
    const Tensor *X = pb_t(&fc->b, x);
    int rank = X->rank, n = resize_taps_per_output(p, d);
    int64_t out = p->out[d], dims[ORCH_MAX_RANK], wdims[ORCH_MAX_RANK];
    memcpy(dims, X->dims, sizeof(int64_t) * (size_t)rank);
    dims[d] = out;
    // The weights of a tap as [out, 1, ...]: they broadcast along the axes after d.
    wdims[0] = out;
    for (int k = 1; k < rank - d; k++)
        wdims[k] = 1;
    double *w = xmalloc(sizeof(double) * (size_t)(out * n + 1));
    int64_t *src = xmalloc(sizeof(int64_t) * (size_t)(out * n + 1));
    bool *inside = xmalloc((size_t)out + 1);
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    tables[d] = xmalloc(sizeof(int64_t) * (size_t)(out + 1));
    void *wk = xmalloc(dtype_size(X->dtype) * (size_t)(out + 1));
    for (int64_t o = 0; o < out; o++)
        inside[o] = resize_taps(p, d, o, src + o * n, w + o * n);
    int y = -1;
    for (int k = 0; k < n; k++) {
        for (int64_t o = 0; o < out; o++) {
            tables[d][o] = inside[o] ? src[o * n + k] : -1;
            elem_set_f64(X->dtype, wk, o, inside[o] ? w[o * n + k] : k == 0);
        }
        int g = pb_table(&fc->b, x, dims, tables, p->extrapolation);
        int t = pb_ew2(&fc->b, EW_MUL, pb_const(&fc->b, X->dtype, rank - d, wdims, wk), g);
        y = k == 0 ? t : pb_ew2(&fc->b, EW_ADD, y, t);
    }
    free(w);
    free(src);
    free(inside);
    free(wk);
    free_tables(rank, tables);
    return y;
}

int fission_resize(FissionCtx *fc, const ResizePlan *p, int x) {
    if (p->mode == RESIZE_NEAREST)
        return resize_nearest(fc, p, x);
    // Float32 and double only (half precision would round between taps); a non-finite
    // extrapolation value would turn into NaN under a zero weight.
    DType t = pb_t(&fc->b, x)->dtype;
    if ((t != DT_FLOAT && t != DT_DOUBLE) ||
        (p->coord == RESIZE_TF_CROP_AND_RESIZE && !isfinite(p->extrapolation)))
        return -1;
    for (int d = 0; d < p->rank; d++)
        if (!resize_axis_is_identity(p, d) && resize_taps_per_output(p, d) > RESIZE_MAX_TAPS)
            return -1;
    // Shrinking axes first: every intermediate at most max(input, output) (resize.h).
    int order[ORCH_MAX_RANK], n_axes = resize_axis_order(p, order);
    int y = x;
    for (int i = 0; i < n_axes; i++)
        y = interpolate_axis(fc, p, order[i], y);
    return y;
}

// Scales, sizes and a tf_crop_and_resize roi must be constants.
static int rule_resize(FissionCtx *fc) {
    ResizePlan p;
    Err e = {0};
    const Tensor *roi = fc_in_t(fc, 1);
    if (resize_plan(fc->g, fc->n, &p, &e) != ST_OK)
        return ST_UNSUPPORTED;
    if (p.coord == RESIZE_TF_CROP_AND_RESIZE) {
        if (roi->kind != TK_CONST)
            return ST_UNSUPPORTED;
        resize_set_roi(&p, roi->dtype, roi->data);
    }
    int y = fission_resize(fc, &p, fc_in(fc, 0));
    if (y < 0)
        return ST_UNSUPPORTED;
    fc_set_out(fc, 0, y);
    return ST_OK;
}

const FissionRuleDef fission_rules_layout[] = {
    {"Identity", rule_identity},
    {"Dropout", rule_identity},
    {"Transpose", rule_transpose},
    {"Reshape", rule_reshape},
    {"Flatten", rule_reshape},
    {"Squeeze", rule_reshape},
    {"Unsqueeze", rule_reshape},
    {"Slice", rule_slice},
    {"Split", rule_split},
    {"Concat", rule_concat},
    {"Expand", rule_expand},
    {"Tile", rule_tile},
    {"Pad", rule_pad},
    {"DepthToSpace", rule_depth_to_space},
    {"SpaceToDepth", rule_space_to_depth},
    {"Gather", rule_gather},
    {"Resize", rule_resize},
    {NULL, NULL},
};
