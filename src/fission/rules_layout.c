// Fission rules for layout ONNX ops: each becomes LAYOUT primitives (index maps), so that a
// consumer can later read through them without materialising the tensor; Resize's linear and
// cubic modes add the weighted sums (ELEMWISE) over gathered taps. Attributes and constant
// inputs were validated by the ops' shape rules (src/ops/layout.c, indexing.c, resize.c); the
// index arithmetic here follows those reference kernels step by step.
#include "fission.h"

#include "../ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// A constant integer input (axes, pads, starts...); count -1 when absent. The shape rule already
// read it, so a failure here only means "not constant": the node stays opaque.
static bool const_ints(const FissionCtx *fc, int i, int64_t *v, int max, int *count) {
    Err e = {0};
    return op_const_ints(fc->g, fc->n, i, v, max, count, &e) == ST_OK;
}

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

// Slice: the start and step per axis as layout.c's slice_plan gives them (a start clamped to
// [0, dim] for a positive step, to [0, dim - 1] for a negative one); the counts are the output's
// dims, which the ends decided.
static int rule_slice(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    int64_t starts[ORCH_MAX_RANK], axes[ORCH_MAX_RANK], steps[ORCH_MAX_RANK];
    int ns, na, nst;
    if (!const_ints(fc, 1, starts, ORCH_MAX_RANK, &ns) ||
        !const_ints(fc, 3, axes, ORCH_MAX_RANK, &na) ||
        !const_ints(fc, 4, steps, ORCH_MAX_RANK, &nst))
        return ST_UNSUPPORTED;
    int64_t start[ORCH_MAX_RANK], step[ORCH_MAX_RANK];
    for (int d = 0; d < X->rank; d++) {
        start[d] = 0;
        step[d] = 1;
    }
    for (int i = 0; i < ns; i++) {
        int d = norm_axis(na >= 0 ? axes[i] : i, X->rank);
        int64_t dim = X->dims[d], st = nst >= 0 ? steps[i] : 1, s = starts[i];
        if (s < 0)
            s += dim;
        s = st > 0 ? ORCH_MAX(0, ORCH_MIN(s, dim)) : ORCH_MAX(0, ORCH_MIN(s, dim - 1));
        // An empty or one-element axis reads from 0 (or s) with step 1, as the reference does.
        start[d] = Y->dims[d] > 0 ? s : 0;
        step[d] = Y->dims[d] > 1 ? st : 1;
    }
    fc_set_out(fc, 0, pb_slice(&fc->b, fc_in(fc, 0), start, step, Y->dims));
    return ST_OK;
}

// Split sizes as layout.c's split_sizes computes them: the split attribute (< 13) or input
// (>= 13), else equal parts, from opset 18 ceil(dim / outputs) with a smaller last one.
static bool split_sizes(const FissionCtx *fc, int64_t dim, int64_t *sizes) {
    const Node *n = fc->n;
    int count = n->n_out, given = -1;
    if (n->opset < 13) {
        const int64_t *v;
        given = node_attr_ints(n, "split", &v);
        for (int i = 0; i < given && i < count; i++)
            sizes[i] = v[i];
    } else if (!const_ints(fc, 1, sizes, count + 1, &given)) {
        return false;
    }
    if (given >= 0)
        return true;
    int64_t part = n->opset >= 18 ? (dim + count - 1) / count : dim / count;
    for (int i = 0; i < count; i++)
        sizes[i] = i < count - 1 ? part : dim - part * (count - 1);
    return true;
}

// Split: one slice per (present) output.
static int rule_split(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    int axis = norm_axis(node_attr_i(fc->n, "axis", 0), X->rank), count = fc->n->n_out;
    int64_t *sizes = xmalloc(sizeof(int64_t) * (size_t)(count + 1));
    if (!split_sizes(fc, X->dims[axis], sizes)) {
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

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

// Input index for output position o of an axis of size dim padded by `begin` (negative: crop);
// -1 reads the constant. The same arithmetic as layout.c's pad_source.
static int64_t pad_source(int mode, int64_t o, int64_t begin, int64_t dim) {
    int64_t s = o - begin;
    if (s >= 0 && s < dim)
        return s;
    switch (mode) {
    case PAD_EDGE: return s < 0 ? 0 : dim - 1;
    case PAD_WRAP: return (s % dim + dim) % dim;
    case PAD_REFLECT: {
        if (dim == 1)
            return 0;
        int64_t period = 2 * (dim - 1), m = (s % period + period) % period;
        return m < dim ? m : period - m;
    }
    default: return -1;
    }
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

static int rule_pad(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    const char *mode_s = node_attr_s(fc->n, "mode", "constant");
    int mode = -1;
    for (int i = 0; i < (int)ORCH_COUNT(modes); i++)
        if (strcmp(mode_s, modes[i]) == 0)
            mode = i;
    int64_t pads[2 * ORCH_MAX_RANK], axes[ORCH_MAX_RANK];
    int np, na;
    double value;
    if (mode < 0 || !const_ints(fc, 1, pads, 2 * ORCH_MAX_RANK, &np) ||
        !const_ints(fc, 3, axes, ORCH_MAX_RANK, &na) || !pad_constant(fc, &value))
        return ST_UNSUPPORTED;
    if (na < 0) {
        na = X->rank;
        for (int i = 0; i < na; i++)
            axes[i] = i;
    }
    int64_t begin[ORCH_MAX_RANK] = {0};
    for (int i = 0; i < na; i++)
        begin[norm_axis(axes[i], X->rank)] = pads[i];
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    for (int d = 0; d < X->rank; d++) {
        if (begin[d] == 0 && Y->dims[d] == X->dims[d])
            continue;
        tables[d] = xmalloc(sizeof(int64_t) * (size_t)(Y->dims[d] + 1));
        for (int64_t o = 0; o < Y->dims[d]; o++)
            tables[d][o] = pad_source(mode, o, begin[d], X->dims[d]);
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

// A port of resize.c: per resized axis, each output position's window of input positions and
// their weights, computed with the reference's arithmetic (coordinate transformation, window
// start, nearest tie rule, cubic and antialias weights, exclude_outside), so ties fall the same
// way. Nearest is one LS_TABLE (the window's floor or ceil side); linear and cubic are, axis after
// axis, one table per window tap and a weighted sum, out = sum_k w_k[o] * x[clamp(start[o] + k)].
// The sums run in the tensor's dtype (float32 or double) where the reference keeps double
// between axes, so float32 results differ by a rounding or so.
enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
enum {
    CT_HALF_PIXEL,
    CT_HALF_PIXEL_SYMMETRIC,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_ASYMMETRIC,
    CT_TF_CROP_AND_RESIZE,
    CT_TF_HALF_PIXEL_FOR_NN,
};
enum { NEAREST_PREFER_FLOOR, NEAREST_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL };

// Wider windows (antialiased downscales by more than 1/8) stay opaque: too many primitives.
enum { RESIZE_MAX_TAPS = 16 };

typedef struct ResizePlan {
    int mode, coord, nearest;
    double cubic_a;
    bool exclude_outside, antialias;
    bool roi_f32; // roi arithmetic rounds to float32 (resize.c's source_coord says why)
    int64_t in[ORCH_MAX_RANK], out[ORCH_MAX_RANK];
    double scale[ORCH_MAX_RANK];
    double roi[ORCH_MAX_RANK][2];
} ResizePlan;

static int pick(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

// An input given as an empty tensor counts as absent (opsets 11-12 required roi and scales).
static const Tensor *given(const FissionCtx *fc, int i) {
    const Tensor *t = fc_in_t(fc, i);
    return t && tensor_numel(t) > 0 ? t : NULL;
}

// Attributes, and the scales from the scales input or from sizes with keep_aspect_ratio_policy
// (resize_plan); false when scales, sizes or a needed roi are not constants.
static bool resize_plan(const FissionCtx *fc, ResizePlan *p) {
    static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
    static const char *const coords[] = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",   "align_corners",
        "asymmetric", "tf_crop_and_resize",   "tf_half_pixel_for_nn", NULL};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil", NULL};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller", NULL};
    const Node *n = fc->n;
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    const Tensor *scales = given(fc, 2), *sizes = given(fc, 3), *roi = given(fc, 1);
    p->mode = pick(node_attr_s(n, "mode", "nearest"), modes);
    p->coord = pick(node_attr_s(n, "coordinate_transformation_mode", "half_pixel"), coords);
    p->nearest = pick(node_attr_s(n, "nearest_mode", "round_prefer_floor"), nearests);
    p->cubic_a = node_attr_f(n, "cubic_coeff_a", -0.75f);
    p->exclude_outside = node_attr_i(n, "exclude_outside", 0) != 0;
    p->antialias = node_attr_i(n, "antialias", 0) != 0 && p->mode != MODE_NEAREST;
    const Tensor *src = scales ? scales : sizes;
    if (!src || src->kind != TK_CONST)
        return false;
    int axes[ORCH_MAX_RANK];
    const int64_t *ax;
    int n_axes = node_attr_ints(n, "axes", &ax);
    bool listed = n_axes >= 0;
    if (!listed)
        n_axes = X->rank;
    for (int i = 0; i < n_axes; i++)
        axes[i] = listed ? norm_axis(ax[i], X->rank) : i;
    for (int d = 0; d < X->rank; d++) {
        p->in[d] = X->dims[d];
        p->out[d] = Y->dims[d];
        p->scale[d] = 1.0;
        p->roi[d][0] = 0;
        p->roi[d][1] = 1;
    }
    if (scales) {
        for (int i = 0; i < n_axes; i++)
            p->scale[axes[i]] = elem_get_f64(scales->dtype, scales->data, i);
    } else {
        int keep = pick(node_attr_s(n, "keep_aspect_ratio_policy", "stretch"), policies);
        double common = keep == 1 ? INFINITY : 0;
        for (int i = 0; i < n_axes; i++) {
            int d = axes[i];
            int64_t size = ((const int64_t *)sizes->data)[i];
            p->scale[d] = p->in[d] ? (double)size / (double)p->in[d] : 1.0;
            common = keep == 1 ? fmin(common, p->scale[d]) : fmax(common, p->scale[d]);
        }
        for (int i = 0; i < n_axes && keep > 0; i++)
            p->scale[axes[i]] = common;
    }
    p->roi_f32 = false;
    if (p->coord == CT_TF_CROP_AND_RESIZE) {
        if (!roi || roi->kind != TK_CONST)
            return false;
        p->roi_f32 = roi->dtype == DT_FLOAT;
        for (int i = 0; i < n_axes; i++) {
            p->roi[axes[i]][0] = elem_get_f64(roi->dtype, roi->data, i);
            p->roi[axes[i]][1] = elem_get_f64(roi->dtype, roi->data, n_axes + i);
        }
    }
    return true;
}

static double narrow(const ResizePlan *p, double v) {
    return p->roi_f32 ? (double)(float)v : v;
}

static double source_coord(const ResizePlan *p, int d, int64_t o, bool *outside) {
    double in = (double)p->in[d], scale = p->scale[d], out_w = scale * in, y = (double)o, x;
    const double *roi = p->roi[d];
    *outside = false;
    switch (p->coord) {
    case CT_ALIGN_CORNERS: x = out_w == 1 ? 0 : y * (in - 1) / (out_w - 1); break;
    case CT_ASYMMETRIC: x = y / scale; break;
    case CT_TF_CROP_AND_RESIZE: {
        double span = narrow(p, roi[1] - roi[0]), base = narrow(p, roi[0] * (in - 1));
        x = out_w == 1 ? narrow(p, narrow(p, span * (in - 1)) / 2 + base)
                       : y * span * (in - 1) / (out_w - 1) + base;
        *outside = x < 0 || x > in - 1;
        break;
    }
    // A length-1 output reads coordinate 0 as the spec and ONNX Runtime say (the onnx
    // reference evaluator uses -0.5, which only cubic and antialias windows can tell apart).
    case CT_PYTORCH_HALF_PIXEL: x = out_w == 1 ? 0.0 : (y + 0.5) / scale - 0.5; break;
    case CT_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)p->out[d] / out_w, center = in / 2;
        x = center * (1 - adjustment) + (y + 0.5) / scale - 0.5;
        break;
    }
    case CT_TF_HALF_PIXEL_FOR_NN: x = (y + 0.5) / scale; break;
    default: x = (y + 0.5) / scale - 0.5; break;
    }
    return x;
}

static double cubic_weight(double x, double A) {
    x = fabs(x);
    double x2 = x * x, x3 = x * x2;
    if (x <= 1)
        return (A + 2) * x3 - (A + 3) * x2 + 1;
    if (x < 2)
        return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
    return 0;
}

// Window size: 2 for nearest and linear, 4 for cubic, wider when antialiasing a downscale.
static int window_size(const ResizePlan *p, double scale) {
    double s = fmin(scale, 1.0);
    if (p->antialias && p->mode == MODE_LINEAR)
        return 2 - 2 * (int)(floor(-1 / s) + 1);
    if (p->antialias && p->mode == MODE_CUBIC)
        return 2 - 2 * (int)(floor(-2 / s) + 1);
    return p->mode == MODE_CUBIC ? 4 : 2;
}

// Weights for the fraction `ratio` in (0, 1] of the source position past the window's centre.
static void weights(const ResizePlan *p, double ratio, double scale, int n, double *w) {
    double A = p->cubic_a, s = fmin(scale, 1.0), sum = 0;
    if (p->mode == MODE_NEAREST) {
        bool ceil_side;
        if (ratio == 1)
            ceil_side = true;
        else if (p->nearest == NEAREST_PREFER_FLOOR)
            ceil_side = ratio > 0.5;
        else if (p->nearest == NEAREST_PREFER_CEIL)
            ceil_side = ratio >= 0.5;
        else
            ceil_side = p->nearest == NEAREST_CEIL;
        w[0] = !ceil_side;
        w[1] = ceil_side;
        return;
    }
    if (!p->antialias && p->mode == MODE_LINEAR) {
        w[0] = 1 - ratio;
        w[1] = ratio;
        return;
    }
    if (!p->antialias) {
        double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        w[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
        w[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
        w[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
        w[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
        return;
    }
    int first = p->mode == MODE_LINEAR ? (int)(floor(-1 / s) + 1) : (int)(floor(-2 / s) + 1);
    for (int i = 0; i < n; i++) {
        double arg = ((double)(first + i) - ratio) * s;
        w[i] = p->mode == MODE_LINEAR ? fmin(fmax(1 - fabs(arg), 0), 1) : cubic_weight(arg, A);
        sum += w[i];
    }
    for (int i = 0; i < n; i++)
        w[i] /= sum;
}

// The window of output position o along axis d: n weights over input positions start.. (to be
// clamped); false when o lies outside the roi (the extrapolation value).
static bool window_at(const ResizePlan *p, int d, int64_t o, int n, double *w, int64_t *start) {
    bool outside;
    double x = source_coord(p, d, o, &outside);
    if (outside || isnan(x)) // a NaN roi extrapolates too
        return false;
    double xi = floor(x), ratio = x == xi ? 1 : x - xi;
    weights(p, ratio, p->scale[d], n, w);
    // The n positions nearest x, ties to the smaller one (the reference's edge-padded
    // neighbourhood), in coordinates of the unpadded input.
    int pad = (n + 1) / 2;
    double xp = x + pad, pp = floor(xp), frac = xp - pp;
    int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                             : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    *start = (int64_t)pp + off - pad;
    if (p->exclude_outside && p->mode != MODE_NEAREST) {
        double sum = 0;
        for (int k = 0; k < n; k++) {
            int64_t at = *start + k;
            if (at < 0 || at >= p->in[d])
                w[k] = 0;
            sum += w[k];
        }
        for (int k = 0; k < n; k++)
            w[k] /= sum == 0 ? 1 : sum;
    }
    return true;
}

static int64_t clamp_index(int64_t v, int64_t hi) {
    return v < 0 ? 0 : v > hi ? hi : v;
}

// The reference leaves an axis alone when its scale is 1 (math.isclose), its size unchanged and
// its roi (tf_crop_and_resize) the whole axis.
static bool axis_is_identity(const ResizePlan *p, int d) {
    double a = p->scale[d], r1 = p->roi[d][1];
    bool one = fabs(a - 1) <= 1e-9 * fmax(fabs(a), 1.0);
    bool whole = p->coord != CT_TF_CROP_AND_RESIZE ||
                 (p->roi[d][0] == 0 && fabs(r1 - 1) <= 1e-9 * fmax(fabs(r1), 1.0));
    return one && p->out[d] == p->in[d] && whole;
}

// Nearest: the source index per output position and axis (-1: the extrapolation value).
static int resize_nearest(FissionCtx *fc, const ResizePlan *p, double extrapolation) {
    const Tensor *X = fc_in_t(fc, 0), *Y = fc_out_t(fc, 0);
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    for (int d = 0; d < X->rank; d++) {
        if (axis_is_identity(p, d))
            continue;
        tables[d] = xmalloc(sizeof(int64_t) * (size_t)(Y->dims[d] + 1));
        for (int64_t o = 0; o < Y->dims[d]; o++) {
            double w[2];
            int64_t start;
            bool inside = window_at(p, d, o, 2, w, &start);
            tables[d][o] = inside ? clamp_index(start + (w[0] ? 0 : 1), p->in[d] - 1) : -1;
        }
    }
    fc_set_out(fc, 0, pb_table(&fc->b, fc_in(fc, 0), Y->dims, tables, extrapolation));
    free_tables(X->rank, tables);
    return ST_OK;
}

// Linear or cubic along axis d of x: one table and one weight per tap, summed in tap order as
// the reference does. An output position outside the roi reads the extrapolation value (the
// tables' pad value) with weight 1 on the first tap and 0 on the others.
static int interpolate_axis(FissionCtx *fc, const ResizePlan *p, int d, int x,
                            double extrapolation) {
    const Tensor *X = pb_t(&fc->b, x);
    int rank = X->rank, n = window_size(p, p->scale[d]);
    int64_t out = p->out[d], dims[ORCH_MAX_RANK], wdims[ORCH_MAX_RANK];
    memcpy(dims, X->dims, sizeof(int64_t) * (size_t)rank);
    dims[d] = out;
    // The weights of a tap as [out, 1, ...]: they broadcast along the axes after d.
    wdims[0] = out;
    for (int k = 1; k < rank - d; k++)
        wdims[k] = 1;
    double *w = xmalloc(sizeof(double) * (size_t)(out * n + 1));
    int64_t *start = xmalloc(sizeof(int64_t) * (size_t)(out + 1));
    bool *inside = xmalloc((size_t)out + 1);
    int64_t *tables[ORCH_MAX_RANK] = {NULL};
    tables[d] = xmalloc(sizeof(int64_t) * (size_t)(out + 1));
    void *wk = xmalloc(dtype_size(X->dtype) * (size_t)(out + 1));
    for (int64_t o = 0; o < out; o++)
        inside[o] = window_at(p, d, o, n, w + o * n, &start[o]);
    int y = -1;
    for (int k = 0; k < n; k++) {
        for (int64_t o = 0; o < out; o++) {
            tables[d][o] = inside[o] ? clamp_index(start[o] + k, p->in[d] - 1) : -1;
            elem_set_f64(X->dtype, wk, o, inside[o] ? w[o * n + k] : k == 0);
        }
        int g = pb_table(&fc->b, x, dims, tables, extrapolation);
        int t = pb_ew2(&fc->b, EW_MUL, pb_const(&fc->b, X->dtype, rank - d, wdims, wk), g);
        y = k == 0 ? t : pb_ew2(&fc->b, EW_ADD, y, t);
    }
    free(w);
    free(start);
    free(inside);
    free(wk);
    free_tables(rank, tables);
    return y;
}

static int rule_resize(FissionCtx *fc) {
    ResizePlan p;
    const Tensor *X = fc_in_t(fc, 0);
    if (!resize_plan(fc, &p))
        return ST_UNSUPPORTED;
    double extrapolation = node_attr_f(fc->n, "extrapolation_value", 0.0f);
    if (p.mode == MODE_NEAREST)
        return resize_nearest(fc, &p, extrapolation);
    // Float32 and double only (half precision would round between taps); a non-finite
    // extrapolation value would turn into NaN under a zero weight.
    if ((X->dtype != DT_FLOAT && X->dtype != DT_DOUBLE) ||
        (p.coord == CT_TF_CROP_AND_RESIZE && !isfinite(extrapolation)))
        return ST_UNSUPPORTED;
    for (int d = 0; d < X->rank; d++)
        if (!axis_is_identity(&p, d) && window_size(&p, p.scale[d]) > RESIZE_MAX_TAPS)
            return ST_UNSUPPORTED;
    int y = fc_in(fc, 0);
    for (int d = 0; d < X->rank; d++)
        if (!axis_is_identity(&p, d))
            y = interpolate_axis(fc, &p, d, y, extrapolation);
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
