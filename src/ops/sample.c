// The sampling ops: GridSample (opsets 16 and 20; 4-D: bilinear, nearest, bicubic; 5-D at
// opset 20: trilinear, nearest; zeros, border and reflection padding; align_corners) and RoiAlign
// (opsets 10 and 16: avg and max, half_pixel and output_half_pixel, adaptive or fixed sampling).
// Needs static shapes. Guarantees ONNX Runtime's arithmetic carried out in double and rounded once
// to the output type, which the operator kernels (codegen/opaque_values.c) reproduce step for step.
#include "sample.h"

#include "ops.h"

#include <math.h>
#include <string.h>

// Every product, sum and quotient is rounded on its own, none fused into an FMA, so the operator
// kernels, which keep the same rule, agree bit for bit whatever the compilers contract.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

// ---- geometry ----

static int need_float(const Node *n, const Tensor *t, const char *what, Err *e) {
    if (!dtype_is_float(t->dtype))
        return op_err(e, ST_UNSUPPORTED, n, "%s '%s' has dtype %s; orch supports float types", what,
                      t->name, dtype_name(t->dtype));
    return ST_OK;
}

int gridsample_geom(const Node *n, const Tensor *x, const Tensor *grid, GridSampleGeom *g, Err *e) {
    memset(g, 0, sizeof *g);
    int rc;
    if ((rc = need_float(n, x, "input X", e)) || (rc = need_float(n, grid, "grid", e)))
        return rc;
    // Opset 20 renamed bilinear/bicubic to linear/cubic when it added N-D sampling.
    bool v20 = n->opset >= 20;
    if (!v20 && x->rank != 4)
        return op_err(e, ST_INVALID, n,
                      "input X has rank %d; GridSample at opset %d takes 4-D X (N, C, H, W) only "
                      "(5-D X needs opset 20)",
                      x->rank, n->opset);
    if (x->rank != 4 && x->rank != 5)
        return op_err(e, ST_UNSUPPORTED, n,
                      "input X has rank %d; orch supports GridSample over 4-D X (N, C, H, W) and "
                      "5-D X (N, C, D, H, W)",
                      x->rank);
    g->sr = x->rank - 2;
    if (grid->rank != x->rank || grid->dims[g->sr + 1] != g->sr || grid->dims[0] != x->dims[0])
        return op_err(e, ST_INVALID, n, "grid '%s' must have shape (%lld, %s, %d) for a %d-D X",
                      grid->name, (long long)x->dims[0],
                      g->sr == 2 ? "H_out, W_out" : "D_out, H_out, W_out", g->sr, x->rank);
    const char *mode = node_attr_s(n, "mode", v20 ? "linear" : "bilinear");
    if (strcmp(mode, v20 ? "linear" : "bilinear") == 0)
        g->mode = SAMPLE_LINEAR;
    else if (strcmp(mode, "nearest") == 0)
        g->mode = SAMPLE_NEAREST;
    else if (strcmp(mode, v20 ? "cubic" : "bicubic") == 0)
        g->mode = SAMPLE_CUBIC;
    else
        return op_err(e, ST_INVALID, n, "mode '%s' is not one of %s at opset %d", mode,
                      v20 ? "linear, nearest, cubic" : "bilinear, nearest, bicubic", n->opset);
    if (g->mode == SAMPLE_CUBIC && g->sr != 2)
        return op_err(e, ST_INVALID, n,
                      "mode 'cubic' over a %d-D X: ONNX defines cubic GridSample for 4-D X only "
                      "(use linear or nearest)",
                      x->rank);
    const char *pad = node_attr_s(n, "padding_mode", "zeros");
    if (strcmp(pad, "zeros") == 0)
        g->pad = SAMPLE_PAD_ZEROS;
    else if (strcmp(pad, "border") == 0)
        g->pad = SAMPLE_PAD_BORDER;
    else if (strcmp(pad, "reflection") == 0)
        g->pad = SAMPLE_PAD_REFLECTION;
    else
        return op_err(e, ST_INVALID, n, "padding_mode '%s' is not zeros, border or reflection",
                      pad);
    g->align_corners = node_attr_i(n, "align_corners", 0) != 0;
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->plane = g->points = 1;
    for (int a = 0; a < g->sr; a++) {
        g->in[a] = x->dims[2 + a];
        g->out[a] = grid->dims[1 + a];
        g->plane *= g->in[a];
        g->points *= g->out[a];
    }
    if (g->plane == 0 && g->pad != SAMPLE_PAD_ZEROS && g->N * g->C * g->points > 0)
        return op_err(e, ST_INVALID, n, "%s padding needs a non-empty image", pad);
    return ST_OK;
}

int gridsample_axis_taps(const GridSampleGeom *g) {
    return g->mode == SAMPLE_NEAREST ? 1 : g->mode == SAMPLE_LINEAR ? 2 : 4;
}

int gridsample_taps(const GridSampleGeom *g) {
    int k = gridsample_axis_taps(g), t = 1;
    for (int a = 0; a < g->sr; a++)
        t *= k;
    return t;
}

int roialign_geom(const Node *n, const Tensor *x, const Tensor *rois, const Tensor *idx,
                  RoiAlignGeom *g, Err *e) {
    memset(g, 0, sizeof *g);
    int rc;
    if ((rc = need_float(n, x, "input X", e)) || (rc = need_float(n, rois, "rois", e)))
        return rc;
    if (idx->dtype != DT_INT64 && idx->dtype != DT_INT32)
        return op_err(e, ST_INVALID, n, "batch_indices '%s' must be int64, got %s", idx->name,
                      dtype_name(idx->dtype));
    if (x->rank != 4)
        return op_err(e, ST_INVALID, n, "input X must be 4-D (N, C, H, W), got rank %d", x->rank);
    if (rois->rank != 2 || rois->dims[1] != 4 || idx->rank != 1 || idx->dims[0] != rois->dims[0])
        return op_err(e, ST_INVALID, n, "rois must be (num_rois, 4) and batch_indices (num_rois)");
    const char *mode = node_attr_s(n, "mode", "avg");
    if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0)
        return op_err(e, ST_INVALID, n, "mode '%s' is not avg or max", mode);
    g->max = mode[1] == 'a';
    // Opset 10 had no attribute and behaved as output_half_pixel.
    const char *ctm = node_attr_s(n, "coordinate_transformation_mode",
                                  n->opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0)
        return op_err(e, ST_INVALID, n,
                      "coordinate_transformation_mode '%s' is not half_pixel or "
                      "output_half_pixel",
                      ctm);
    g->half_pixel = strcmp(ctm, "half_pixel") == 0;
    g->sampling_ratio = node_attr_i(n, "sampling_ratio", 0);
    g->spatial_scale = node_attr_f(n, "spatial_scale", 1.0f);
    g->OH = node_attr_i(n, "output_height", 1);
    g->OW = node_attr_i(n, "output_width", 1);
    if (g->sampling_ratio < 0 || g->OH < 1 || g->OW < 1 || g->OH > (1 << 20) || g->OW > (1 << 20))
        return op_err(e, ST_INVALID, n,
                      "sampling_ratio must be >= 0 and output_height, output_width in 1..2^20");
    if (g->sampling_ratio > ROI_GRID_MAX)
        return op_err(e, ST_UNSUPPORTED, n,
                      "sampling_ratio %lld is above %d, orch's bound on the samples along each "
                      "axis of a bin (every sample of every bin is computed)",
                      (long long)g->sampling_ratio, ROI_GRID_MAX);
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->H = x->dims[2];
    g->W = x->dims[3];
    g->R = rois->dims[0];
    if ((g->H == 0 || g->W == 0) && g->R * g->C > 0)
        return op_err(e, ST_INVALID, n, "RoiAlign needs a non-empty feature map");
    return ST_OK;
}

// Which NaN an operation on two NaNs gives depends on the operand order a compiler picks (it
// may commute a product), so a NaN result is stored as the positive quiet NaN, here and in the
// kernels alike.
static double canonical_nan(double v) {
    if (v != v) {
        const uint64_t q = 0x7ff8000000000000ull;
        memcpy(&v, &q, sizeof v);
    }
    return v;
}

// ---- GridSample ----

// A coordinate to an index: floor done by the caller; NaN and huge values land far outside
// every image (ONNX Runtime's cast is undefined there), so they read padding, never memory.
static int64_t to_index(double v) {
    if (!(v >= -4e15))
        return -(int64_t)4e15;
    return v > 4e15 ? (int64_t)4e15 : (int64_t)v;
}

// Reflects x by the near border until it lies in [lo, hi] (ONNX Runtime's GsReflect).
static double gs_reflect(double x, double lo, double hi) {
    double range = hi - lo;
    if (!(range > 0))
        return lo;
    if (x < lo) {
        double dx = lo - x, k = floor(dx / range), r = dx - k * range;
        return fmod(k, 2.0) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, k = floor(dx / range), r = dx - k * range;
        return fmod(k, 2.0) == 0 ? hi - r : lo + r;
    }
    return x;
}

static int64_t clamp_i(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

// Index v along an axis of len pixels after padding: -1 where zero padding reads 0; reflection's
// result lies inside already (the clamp only guards it). ONNX Runtime's PixelAtGrid(3D), an axis
// at a time.
static int64_t gs_pad_index(const GridSampleGeom *g, int64_t v, int64_t len) {
    if (g->pad == SAMPLE_PAD_ZEROS)
        return v < 0 || v >= len ? -1 : v;
    if (g->pad == SAMPLE_PAD_REFLECTION)
        v = to_index(gs_reflect((double)v, g->align_corners ? 0 : -0.5,
                                g->align_corners ? (double)len - 1.0 : (double)len - 0.5));
    return clamp_i(v, 0, len - 1);
}

static double gs_denormalize(double v, int64_t len, bool align) {
    return align ? (v + 1) / 2 * (double)(len - 1) : ((v + 1) * (double)len - 1) / 2;
}

// Keys' cubic convolution coefficients with alpha -0.75 (ONNX Runtime's GsGetCubicCoeffs).
static void gs_cubic_coeffs(double x, double c[4]) {
    const double A = -0.75;
    x = fabs(x);
    c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
    c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((A * (2 - x) - 5 * A) * (2 - x) + 8 * A) * (2 - x) - 4 * A;
}

// What one grid point reads, the same for every channel: k taps along each of the sr axes, their
// k^sr offsets in the image (outermost axis slowest; -1 reads 0) and each axis's weights.
typedef struct GsTaps {
    int64_t off[16];
    double w[3][4];
} GsTaps;

// The grid point's taps from its sr coordinates gp (innermost first, as the grid stores them):
// nearest rounds half to even; linear's weights are (f + 1 - c, c - f) about f = floor(c);
// cubic's the Keys coefficients about floor(c) - 1. The operator kernels' fn_plan_of.
static void gs_taps(const GridSampleGeom *g, DType gt, const void *grid, int64_t gp, GsTaps *t) {
    int k = gridsample_axis_taps(g), n = gridsample_taps(g);
    ORCH_ASSERT(g->sr <= 3 && n <= 16); // gridsample_geom refuses cubic over 5-D X
    int64_t ix[3][4], stride = 1;
    for (int a = g->sr - 1; a >= 0; a--) {
        double c = gs_denormalize(elem_get_f64(gt, grid, gp + (g->sr - 1 - a)), g->in[a],
                                  g->align_corners);
        int64_t f;
        if (g->mode == SAMPLE_NEAREST) {
            f = to_index(nearbyint(c));
        } else if (g->mode == SAMPLE_LINEAR) {
            f = to_index(floor(c));
            t->w[a][0] = (double)(f + 1) - c;
            t->w[a][1] = c - (double)f;
        } else {
            f = to_index(floor(c)) - 1;
            gs_cubic_coeffs(c - (double)f - 1, t->w[a]);
        }
        // Scaled by the axis's stride now, so a tap's offset is a sum; -1 stays the only negative.
        for (int i = 0; i < k; i++) {
            int64_t v = gs_pad_index(g, f + i, g->in[a]);
            ix[a][i] = v < 0 ? -1 : v * stride;
        }
        stride *= g->in[a];
    }
    for (int q = 0; q < n; q++) {
        int64_t off = 0;
        bool out = false;
        for (int a = g->sr - 1, r = q; a >= 0; a--, r /= k) {
            out |= ix[a][r % k] < 0;
            off += ix[a][r % k];
        }
        t->off[q] = out ? -1 : off;
    }
}

// The value at one grid point over the image at base: the taps' pixels weighted along the
// innermost axis first, each sum left to right (bilinear: dy2 * (dx2 * p11 + dx1 * p12) +
// dy1 * (dx2 * p21 + dx1 * p22), ONNX Runtime's order; trilinear then dz2 * .. + dz1 * ..).
static double gs_value(const GridSampleGeom *g, const GsTaps *t, DType xt, const void *x,
                       int64_t base) {
    int k = gridsample_axis_taps(g), n = gridsample_taps(g);
    double p[16];
    for (int q = 0; q < n; q++)
        p[q] = t->off[q] < 0 ? 0.0 : elem_get_f64(xt, x, base + t->off[q]);
    if (g->mode == SAMPLE_NEAREST)
        return p[0];
    for (int a = g->sr - 1; a >= 0; a--) {
        n /= k;
        for (int q = 0; q < n; q++) {
            double acc = t->w[a][0] * p[q * k];
            for (int i = 1; i < k; i++)
                acc = acc + t->w[a][i] * p[q * k + i];
            p[q] = acc;
        }
    }
    return p[0];
}

static int infer_gridsample(Graph *g, Node *n, Err *e) {
    GridSampleGeom gs;
    int rc = gridsample_geom(n, node_input(g, n, 0), node_input(g, n, 1), &gs, e);
    if (rc)
        return rc;
    int64_t dims[5] = {gs.N, gs.C, gs.out[0], gs.out[1], gs.out[2]};
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, gs.sr + 2, dims);
    return ST_OK;
}

static int run_gridsample(const OpRun *r, Err *e) {
    GridSampleGeom g;
    int rc = gridsample_geom(r->n, r->in[0], r->in[1], &g, e);
    if (rc)
        return rc;
    DType xt = r->in[0]->dtype, gt = r->in[1]->dtype, yt = r->out[0]->dtype;
    for (int64_t b = 0; b < g.N; b++)
        for (int64_t p = 0; p < g.points; p++) {
            GsTaps t;
            gs_taps(&g, gt, r->x[1], (b * g.points + p) * g.sr, &t);
            for (int64_t c = 0; c < g.C; c++) {
                double v = gs_value(&g, &t, xt, r->x[0], (b * g.C + c) * g.plane);
                elem_set_f64(yt, r->y[0], (b * g.C + c) * g.points + p, canonical_nan(v));
            }
        }
    return ST_OK;
}

// ---- RoiAlign ----

// Samples per bin along one axis: sampling_ratio, or ceil(roi size / output size), kept within
// ROI_GRID_MAX so that an absurd ROI costs bounded time (ONNX Runtime's count is unbounded there:
// a spatial_scale of 8e25 made 65536 x 65536 samples a bin, a run of hours). Only a ROI more
// than ROI_GRID_MAX bins' heights tall, far off any feature map, reaches the bound.
static int64_t roi_grid(int64_t ratio, double size, int64_t out) {
    if (ratio > 0)
        return ratio;
    double v = ceil(size / (double)out);
    return !(v > 0) ? 0 : v > ROI_GRID_MAX ? ROI_GRID_MAX : (int64_t)v;
}

static double max_of(double a, double b) {
    return a < b ? b : a; // std::max
}

static int infer_roialign(Graph *g, Node *n, Err *e) {
    RoiAlignGeom ra;
    int rc =
        roialign_geom(n, node_input(g, n, 0), node_input(g, n, 1), node_input(g, n, 2), &ra, e);
    if (rc)
        return rc;
    int64_t dims[4] = {ra.R, ra.C, ra.OH, ra.OW};
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, 4, dims);
    return ST_OK;
}

static int run_roialign(const OpRun *r, Err *e) {
    RoiAlignGeom g;
    int rc = roialign_geom(r->n, r->in[0], r->in[1], r->in[2], &g, e);
    if (rc)
        return rc;
    DType xt = r->in[0]->dtype, rt = r->in[1]->dtype, yt = r->out[0]->dtype;
    for (int64_t q = 0; q < g.R; q++) {
        int64_t b = elem_get_i64(r->in[2]->dtype, r->x[2], q);
        if (b < 0 || b >= g.N)
            return op_err(e, ST_INVALID, r->n,
                          "batch index %lld (element %lld of '%s') is out of range for %lld "
                          "images",
                          (long long)b, (long long)q, r->in[2]->name, (long long)g.N);
    }
    double off = g.half_pixel ? 0.5 : 0.0, H = (double)g.H, W = (double)g.W;
    int64_t k = 0;
    for (int64_t q = 0; q < g.R; q++) {
        int64_t b = elem_get_i64(r->in[2]->dtype, r->x[2], q);
        double x1 = elem_get_f64(rt, r->x[1], q * 4) * g.spatial_scale - off;
        double y1 = elem_get_f64(rt, r->x[1], q * 4 + 1) * g.spatial_scale - off;
        double x2 = elem_get_f64(rt, r->x[1], q * 4 + 2) * g.spatial_scale - off;
        double y2 = elem_get_f64(rt, r->x[1], q * 4 + 3) * g.spatial_scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!g.half_pixel) { // malformed ROIs become 1x1
            rw = max_of(rw, 1.0);
            rh = max_of(rh, 1.0);
        }
        double bh = rh / (double)g.OH, bw = rw / (double)g.OW;
        int64_t gh = roi_grid(g.sampling_ratio, rh, g.OH),
                gw = roi_grid(g.sampling_ratio, rw, g.OW);
        double count = (double)ORCH_MAX(gh * gw, 1);
        for (int64_t c = 0; c < g.C; c++) {
            int64_t base = (b * g.C + c) * g.H * g.W;
            for (int64_t ph = 0; ph < g.OH; ph++)
                for (int64_t pw = 0; pw < g.OW; pw++, k++) {
                    double acc = 0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double y = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double x = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            // Outside the map by more than a pixel: weights 0 at position 0.
                            int64_t p1 = 0, p2 = 0, p3 = 0, p4 = 0;
                            double w1 = 0, w2 = 0, w3 = 0, w4 = 0;
                            if (y >= -1.0 && y <= H && x >= -1.0 && x <= W) {
                                double yy = y <= 0 ? 0 : y, xx = x <= 0 ? 0 : x;
                                int64_t ylo = (int64_t)yy, xlo = (int64_t)xx, yhi, xhi;
                                if (ylo >= g.H - 1) {
                                    yhi = ylo = g.H - 1;
                                    yy = (double)ylo;
                                } else {
                                    yhi = ylo + 1;
                                }
                                if (xlo >= g.W - 1) {
                                    xhi = xlo = g.W - 1;
                                    xx = (double)xlo;
                                } else {
                                    xhi = xlo + 1;
                                }
                                double ly = yy - (double)ylo, lx = xx - (double)xlo;
                                double hy = 1. - ly, hx = 1. - lx;
                                w1 = hy * hx;
                                w2 = hy * lx;
                                w3 = ly * hx;
                                w4 = ly * lx;
                                p1 = ylo * g.W + xlo;
                                p2 = ylo * g.W + xhi;
                                p3 = yhi * g.W + xlo;
                                p4 = yhi * g.W + xhi;
                            }
                            double v1 = w1 * elem_get_f64(xt, r->x[0], base + p1);
                            double v2 = w2 * elem_get_f64(xt, r->x[0], base + p2);
                            double v3 = w3 * elem_get_f64(xt, r->x[0], base + p3);
                            double v4 = w4 * elem_get_f64(xt, r->x[0], base + p4);
                            if (!g.max) {
                                acc += v1 + v2 + v3 + v4;
                            } else {
                                double v = max_of(max_of(max_of(v1, v2), v3), v4);
                                acc = first ? v : max_of(acc, v);
                                first = false;
                            }
                        }
                    }
                    elem_set_f64(yt, r->y[0], k, canonical_nan(g.max ? acc : acc / count));
                }
        }
    }
    return ST_OK;
}

const OpDef ops_sample[] = {
    {"GridSample", infer_gridsample, run_gridsample, 2, 2, 1, 1, 0},
    {"RoiAlign", infer_roialign, run_roialign, 3, 3, 1, 1, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
