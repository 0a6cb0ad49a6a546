// Resize (opsets 11-21): nearest, linear and cubic interpolation over any axes, every coordinate
// transformation mode, antialiasing, keep_aspect_ratio_policy and axes (opset 18). It follows the
// ONNX reference (onnx/reference/ops/op_resize.py) step by step: one axis at a time in double,
// each output position a weighted sum over a window of clamped input positions (that arithmetic,
// resize.h, is shared with the fission rule). Nearest copies whole elements, so it runs on every
// dtype; linear and cubic on float dtypes.
#include "resize.h"

#include "layout_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Maps a string attribute to its index in names (NULL-terminated); -1 if absent from the list.
static int pick(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int read_attrs(const Node *n, ResizePlan *p, Err *e) {
    static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
    static const char *const coords[] = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",   "align_corners",
        "asymmetric", "tf_crop_and_resize",   "tf_half_pixel_for_nn", NULL};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil", NULL};
    const char *mode = node_attr_s(n, "mode", "nearest");
    const char *coord = node_attr_s(n, "coordinate_transformation_mode", "half_pixel");
    const char *nearest = node_attr_s(n, "nearest_mode", "round_prefer_floor");
    p->mode = pick(mode, modes);
    p->coord = pick(coord, coords);
    p->nearest = pick(nearest, nearests);
    if (p->mode < 0)
        return op_err(e, ST_INVALID, n, "mode '%s' is not nearest, linear or cubic", mode);
    if (p->coord < 0 || (p->coord == RESIZE_TF_HALF_PIXEL_FOR_NN && n->opset >= 13) ||
        (p->coord == RESIZE_HALF_PIXEL_SYMMETRIC && n->opset < 19))
        return op_err(e, ST_INVALID, n,
                      "coordinate_transformation_mode '%s' is not valid in opset %d", coord,
                      n->opset);
    if (p->nearest < 0)
        return op_err(e, ST_INVALID, n, "nearest_mode '%s' is not valid", nearest);
    p->cubic_a = node_attr_f(n, "cubic_coeff_a", -0.75f);
    p->extrapolation = node_attr_f(n, "extrapolation_value", 0.0f);
    p->exclude_outside = node_attr_i(n, "exclude_outside", 0) != 0;
    p->antialias = node_attr_i(n, "antialias", 0) != 0 && p->mode != RESIZE_NEAREST;
    if (n->opset < 18 && (node_attr(n, "antialias") || node_attr(n, "axes") ||
                          node_attr(n, "keep_aspect_ratio_policy")))
        return op_err(e, ST_INVALID, n,
                      "antialias, axes and keep_aspect_ratio_policy exist from opset 18");
    return ST_OK;
}

// Antialiasing a downscale by s averages over about 2/s (linear) or 4/s (cubic) inputs.
static int check_windows(const Node *n, const ResizePlan *p, Err *e) {
    for (int d = 0; d < p->rank && p->antialias; d++)
        if (p->scale[d] < 1e-4)
            return op_err(e, ST_UNSUPPORTED, n,
                          "antialiasing a downscale by %g (axis %d) is not supported", p->scale[d],
                          d);
    return ST_OK;
}

// An input given as an empty tensor counts as absent (opsets 11-12 required roi and scales).
static const Tensor *given(const Graph *g, const Node *n, int i) {
    const Tensor *t = node_input(g, n, i);
    return t && tensor_numel(t) > 0 ? t : NULL;
}

// The output shape and per-axis scales from scales (input 2) or sizes (input 3), both constant.
int resize_plan(const Graph *g, const Node *n, ResizePlan *p, Err *e) {
    const Tensor *x = node_input(g, n, 0), *scales = given(g, n, 2), *sizes = given(g, n, 3);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = read_attrs(n, p, e)))
        return rc;
    if (x->rank == 0)
        return op_err(e, ST_INVALID, n, "input must have rank 1 or more");
    if (p->mode != RESIZE_NEAREST && !dtype_is_float(x->dtype))
        return op_err(e, ST_UNSUPPORTED, n,
                      "%s interpolation of %s input is not supported (float dtypes only; nearest "
                      "runs on any dtype)",
                      node_attr_s(n, "mode", ""), dtype_name(x->dtype));
    p->rank = x->rank;
    const int64_t *axes;
    int n_axes = node_attr_ints(n, "axes", &axes);
    bool seen[ORCH_MAX_RANK] = {false};
    p->n_axes = n_axes < 0 ? x->rank : n_axes;
    for (int i = 0; i < p->n_axes; i++) {
        if (n_axes < 0)
            p->axes[i] = i;
        else if ((rc = op_axis(n, axes[i], x->rank, "axis", &p->axes[i], e)))
            return rc;
        if (seen[p->axes[i]])
            return op_err(e, ST_INVALID, n, "axis %d is listed twice", p->axes[i]);
        seen[p->axes[i]] = true;
    }
    for (int d = 0; d < x->rank; d++) {
        p->in[d] = p->out[d] = x->dims[d];
        p->scale[d] = 1.0;
        p->roi[d][0] = 0;
        p->roi[d][1] = 1;
    }
    p->roi_f32 = false;
    if ((scales != NULL) == (sizes != NULL))
        return op_err(e, ST_INVALID, n, "exactly one of scales and sizes must be given");
    const Tensor *src = scales ? scales : sizes;
    if (src->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "input %d ('%s') must be a constant (orch needs static shapes), but it is "
                      "computed at run time",
                      scales ? 2 : 3, src->name);
    if (tensor_numel(src) != p->n_axes || src->rank != 1)
        return op_err(e, ST_INVALID, n, "%s '%s' must be 1-D with %d entries",
                      scales ? "scales" : "sizes", src->name, p->n_axes);
    if (scales) {
        if (!dtype_is_float(scales->dtype))
            return op_err(e, ST_INVALID, n, "scales must be float, got %s",
                          dtype_name(scales->dtype));
        for (int i = 0; i < p->n_axes; i++) {
            int d = p->axes[i];
            double s = elem_get_f64(scales->dtype, scales->data, i), size = s * (double)p->in[d];
            if (!(s > 0) || !(size < 0x1p50))
                return op_err(e, ST_INVALID, n, "scale %g for axis %d is invalid", s, d);
            p->scale[d] = s;
            p->out[d] = (int64_t)size;
        }
        return check_windows(n, p, e);
    }
    if (sizes->dtype != DT_INT64)
        return op_err(e, ST_INVALID, n, "sizes must be int64, got %s", dtype_name(sizes->dtype));
    const char *policy = node_attr_s(n, "keep_aspect_ratio_policy", "stretch");
    int keep = pick(policy, (const char *const[]){"stretch", "not_larger", "not_smaller", NULL});
    if (keep < 0)
        return op_err(e, ST_INVALID, n, "keep_aspect_ratio_policy '%s' is not valid", policy);
    double common = keep == 1 ? INFINITY : 0;
    for (int i = 0; i < p->n_axes; i++) {
        int d = p->axes[i];
        int64_t size = ((const int64_t *)sizes->data)[i];
        if (size < 0 || (p->in[d] == 0 && size > 0))
            return op_err(e, ST_INVALID, n, "size %lld for axis %d (of size %lld) is invalid",
                          (long long)size, d, (long long)p->in[d]);
        p->out[d] = size;
        p->scale[d] = p->in[d] ? (double)size / (double)p->in[d] : 1.0;
        common = keep == 1 ? fmin(common, p->scale[d]) : fmax(common, p->scale[d]);
    }
    if (keep > 0) {
        // One scale for every listed axis; sizes round half up.
        for (int i = 0; i < p->n_axes; i++) {
            int d = p->axes[i];
            double size = common * (double)p->in[d] + 0.5;
            if (!(size < 0x1p50))
                return op_err(e, ST_INVALID, n, "size for axis %d overflows", d);
            p->scale[d] = common;
            p->out[d] = (int64_t)size;
        }
    }
    return check_windows(n, p, e);
}

int layout_infer_resize(Graph *g, Node *n, Err *e) {
    ResizePlan p;
    int rc = resize_plan(g, n, &p, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0), *roi = given(g, n, 1);
    if (p.coord == RESIZE_TF_CROP_AND_RESIZE &&
        (!roi || tensor_numel(roi) != 2 * p.n_axes || !dtype_is_float(roi->dtype)))
        return op_err(e, ST_INVALID, n, "tf_crop_and_resize needs a float roi of %d values",
                      2 * p.n_axes);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, p.out);
    return ST_OK;
}

// ---- one axis ----

static double narrow(const ResizePlan *p, double v) {
    return p->roi_f32 ? (double)(float)v : v;
}

static double source_coord(const ResizePlan *p, int d, int64_t o, bool *outside) {
    double in = (double)p->in[d], scale = p->scale[d], out_w = scale * in, y = (double)o, x;
    const double *roi = p->roi[d];
    *outside = false;
    switch (p->coord) {
    case RESIZE_ALIGN_CORNERS: x = out_w == 1 ? 0 : y * (in - 1) / (out_w - 1); break;
    case RESIZE_ASYMMETRIC: x = y / scale; break;
    case RESIZE_TF_CROP_AND_RESIZE: {
        // The reference does the roi-only arithmetic in roi's dtype (numpy float32 scalars);
        // it decides ties of nearest, so it is reproduced.
        double span = narrow(p, roi[1] - roi[0]), base = narrow(p, roi[0] * (in - 1));
        x = out_w == 1 ? narrow(p, narrow(p, span * (in - 1)) / 2 + base)
                       : y * span * (in - 1) / (out_w - 1) + base;
        *outside = x < 0 || x > in - 1;
        break;
    }
    // A length-1 output reads coordinate 0 as the spec and ONNX Runtime say (the onnx
    // reference evaluator uses -0.5, which only cubic and antialias windows can tell apart).
    case RESIZE_PYTORCH_HALF_PIXEL: x = out_w == 1 ? 0.0 : (y + 0.5) / scale - 0.5; break;
    case RESIZE_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)p->out[d] / out_w, center = in / 2;
        x = center * (1 - adjustment) + (y + 0.5) / scale - 0.5;
        break;
    }
    case RESIZE_TF_HALF_PIXEL_FOR_NN: x = (y + 0.5) / scale; break;
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

int resize_taps_per_output(const ResizePlan *p, int d) {
    double s = fmin(p->scale[d], 1.0);
    if (p->antialias && p->mode == RESIZE_LINEAR)
        return 2 - 2 * (int)(floor(-1 / s) + 1);
    if (p->antialias && p->mode == RESIZE_CUBIC)
        return 2 - 2 * (int)(floor(-2 / s) + 1);
    return p->mode == RESIZE_CUBIC ? 4 : 2;
}

// Weights for the fraction `ratio` in (0, 1] of the source position past the window's centre.
static void weights(const ResizePlan *p, double ratio, double scale, int n, double *w) {
    double A = p->cubic_a, s = fmin(scale, 1.0), sum = 0;
    if (p->mode == RESIZE_NEAREST) {
        bool ceil_side;
        if (ratio == 1)
            ceil_side = true;
        else if (p->nearest == RESIZE_PREFER_FLOOR)
            ceil_side = ratio > 0.5;
        else if (p->nearest == RESIZE_PREFER_CEIL)
            ceil_side = ratio >= 0.5;
        else
            ceil_side = p->nearest == RESIZE_CEIL;
        w[0] = !ceil_side;
        w[1] = ceil_side;
        return;
    }
    if (!p->antialias && p->mode == RESIZE_LINEAR) {
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
    int first = p->mode == RESIZE_LINEAR ? (int)(floor(-1 / s) + 1) : (int)(floor(-2 / s) + 1);
    for (int i = 0; i < n; i++) {
        double arg = ((double)(first + i) - ratio) * s;
        w[i] = p->mode == RESIZE_LINEAR ? fmin(fmax(1 - fabs(arg), 0), 1) : cubic_weight(arg, A);
        sum += w[i];
    }
    for (int i = 0; i < n; i++)
        w[i] /= sum;
}

static int64_t clamp(int64_t v, int64_t hi) {
    return v < 0 ? 0 : v > hi ? hi : v;
}

bool resize_taps(const ResizePlan *p, int d, int64_t o, int64_t *src, double *w) {
    bool outside;
    double x = source_coord(p, d, o, &outside);
    if (outside || isnan(x)) // a NaN roi extrapolates too
        return false;
    int n = resize_taps_per_output(p, d);
    double xi = floor(x), ratio = x == xi ? 1 : x - xi;
    weights(p, ratio, p->scale[d], n, w);
    // The n positions nearest x, ties to the smaller one (the reference's edge-padded
    // neighbourhood), in coordinates of the unpadded input.
    int pad = (n + 1) / 2;
    double xp = x + pad, pp = floor(xp), frac = xp - pp;
    int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                             : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    int64_t start = (int64_t)pp + off - pad;
    if (p->exclude_outside && p->mode != RESIZE_NEAREST) {
        double sum = 0;
        for (int k = 0; k < n; k++) {
            if (start + k < 0 || start + k >= p->in[d])
                w[k] = 0;
            sum += w[k];
        }
        for (int k = 0; k < n; k++)
            w[k] /= sum == 0 ? 1 : sum;
    }
    for (int k = 0; k < n; k++)
        src[k] = clamp(start + k, p->in[d] - 1);
    return true;
}

int64_t resize_nearest_source(const ResizePlan *p, int d, int64_t o) {
    int64_t src[2];
    double w[2];
    return resize_taps(p, d, o, src, w) ? src[w[0] ? 0 : 1] : -1;
}

static bool is_close(double a, double b) {
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

// The reference leaves an axis alone when its scale is 1 (math.isclose), its size unchanged and
// its roi (tf_crop_and_resize) the whole axis.
bool resize_axis_is_identity(const ResizePlan *p, int d) {
    const double *roi = p->roi[d];
    bool whole = p->coord != RESIZE_TF_CROP_AND_RESIZE || (roi[0] == 0 && is_close(roi[1], 1));
    return is_close(p->scale[d], 1) && p->out[d] == p->in[d] && whole;
}

int resize_axis_order(const ResizePlan *p, int order[ORCH_MAX_RANK]) {
    int n_axes = 0;
    for (int d = 0; d < p->rank; d++) {
        if (resize_axis_is_identity(p, d))
            continue;
        double r = (double)p->out[d] / (double)(p->in[d] ? p->in[d] : 1);
        int i = n_axes++;
        for (; i > 0; i--) { // insertion: equal ratios keep axis order
            int q = order[i - 1];
            if ((double)p->out[q] / (double)(p->in[q] ? p->in[q] : 1) <= r)
                break;
            order[i] = q;
        }
        order[i] = d;
    }
    return n_axes;
}

void resize_set_roi(ResizePlan *p, DType t, const void *roi) {
    p->roi_f32 = t == DT_FLOAT;
    for (int i = 0; i < p->n_axes; i++) {
        p->roi[p->axes[i]][0] = elem_get_f64(t, roi, i);
        p->roi[p->axes[i]][1] = elem_get_f64(t, roi, p->n_axes + i);
    }
}

// ---- kernels ----

// Nearest: one input position per output position and axis; copies elements of any dtype.
static int run_nearest(const OpRun *r, const ResizePlan *p, Err *e) {
    const Tensor *x = r->in[0];
    int64_t *src[ORCH_MAX_RANK] = {NULL};
    int rc = ST_OK;
    for (int d = 0; d < p->rank && rc == ST_OK; d++) {
        src[d] = malloc(sizeof(int64_t) * (size_t)(p->out[d] + 1));
        if (!src[d]) {
            rc = op_err(e, ST_RUNTIME, r->n, "out of memory");
        } else {
            bool identity = resize_axis_is_identity(p, d);
            for (int64_t o = 0; o < p->out[d]; o++)
                src[d][o] = identity ? o : resize_nearest_source(p, d, o);
        }
    }
    unsigned char value[16] = {0};
    elem_set_f64(x->dtype, value, 0, p->extrapolation);
    if (rc == ST_OK)
        layout_gather_maps(r->y[0], r->x[0], dtype_size(x->dtype), p->rank, x->dims, p->out, src,
                           value);
    for (int d = 0; d < p->rank; d++)
        free(src[d]);
    return rc;
}

// The taps of every output position along one axis.
typedef struct Window {
    int n;         // taps per output position
    int64_t *src;  // [out * n]
    double *w;     // [out * n]
    bool *outside; // [out]: reads the extrapolation value
} Window;

static int window_build(const ResizePlan *p, int d, Window *win) {
    int64_t out = p->out[d];
    int n = win->n = resize_taps_per_output(p, d);
    win->src = malloc(sizeof(int64_t) * (size_t)(out * n + 1));
    win->w = malloc(sizeof(double) * (size_t)(out * n + 1));
    win->outside = malloc(sizeof(bool) * (size_t)(out + 1));
    if (!win->src || !win->w || !win->outside)
        return ST_RUNTIME;
    for (int64_t o = 0; o < out; o++)
        win->outside[o] = !resize_taps(p, d, o, win->src + o * n, win->w + o * n);
    return ST_OK;
}

static void window_free(Window *win) {
    free(win->src);
    free(win->w);
    free(win->outside);
}

// Linear and cubic: axis by axis in double, each a weighted sum over the axis' window.
static int run_interpolate(const OpRun *r, const ResizePlan *p, Err *e) {
    const Tensor *x = r->in[0];
    int64_t dims[ORCH_MAX_RANK], numel = tensor_numel(x);
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    double *cur = malloc(sizeof(double) * (size_t)(numel + 1));
    if (!cur)
        return op_err(e, ST_RUNTIME, r->n, "out of memory");
    for (int64_t i = 0; i < numel; i++)
        cur[i] = elem_get_f64(x->dtype, r->x[0], i);
    // Shrinking axes first (resize_axis_order): intermediates stay within max(input, output).
    int order[ORCH_MAX_RANK], n_axes = resize_axis_order(p, order);
    for (int j = 0; j < n_axes; j++) {
        int d = order[j];
        int64_t outer = 1, inner = 1, in = dims[d], out = p->out[d];
        for (int k = 0; k < d; k++)
            outer *= dims[k];
        for (int k = d + 1; k < p->rank; k++)
            inner *= dims[k];
        Window win = {0};
        double *next = malloc(sizeof(double) * (size_t)(outer * out * inner + 1));
        if (!next || window_build(p, d, &win)) {
            free(next);
            free(cur);
            window_free(&win);
            return op_err(e, ST_RUNTIME, r->n, "out of memory");
        }
        for (int64_t a = 0; a < outer; a++)
            for (int64_t o = 0; o < out; o++) {
                const double *w = win.w + o * win.n;
                const int64_t *src = win.src + o * win.n;
                for (int64_t i = 0; i < inner; i++) {
                    double v = 0;
                    if (win.outside[o]) {
                        v = p->extrapolation;
                    } else {
                        for (int k = 0; k < win.n; k++)
                            v += w[k] * cur[(a * in + src[k]) * inner + i];
                    }
                    next[(a * out + o) * inner + i] = v;
                }
            }
        window_free(&win);
        free(cur);
        cur = next;
        dims[d] = out;
    }
    int64_t total = tensor_numel(r->out[0]);
    for (int64_t i = 0; i < total; i++)
        elem_set_f64(x->dtype, r->y[0], i, cur[i]);
    free(cur);
    return ST_OK;
}

int layout_run_resize(const OpRun *r, Err *e) {
    ResizePlan p;
    int rc = resize_plan(r->g, r->n, &p, e);
    if (rc)
        return rc;
    if (tensor_numel(r->out[0]) == 0)
        return ST_OK;
    // The roi is read at run time: it need not be a constant.
    if (p.coord == RESIZE_TF_CROP_AND_RESIZE)
        resize_set_roi(&p, r->in[1]->dtype, r->x[1]);
    return p.mode == RESIZE_NEAREST ? run_nearest(r, &p, e) : run_interpolate(r, &p, e);
}
