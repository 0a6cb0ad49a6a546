// Unit test of the primitive graph clean-up passes (fission/passes.h). Each case builds a small
// primitive graph, runs it on the primitive interpreter with random inputs (printed seed, no
// zeros, some cases with values of 1e4 or constant rows), applies a pass, checks what changed
// (primitive counts and kinds) and runs it again. Every pass but BatchNorm folding must give
// bit-identical outputs; BatchNorm folding rounds W * scale and the combined bias once, checked
// against a bound from the magnitude before normalisation (see bn_case).
#include "../check.h"
#include "interp/prim_interp.h"
#include "passes/passes.h"
#include "prim/prim_build.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;

static double rnd(void) { // uniform in [-1, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

// Uniform in [-scale, scale) + offset, never zero.
static double rnd_nz(double scale, double offset) {
    double v = rnd();
    if (fabs(v) < 1e-3)
        v = 0.5;
    return v * scale + offset;
}

static void fill(DType t, void *p, int64_t n, double scale, double offset) {
    for (int64_t i = 0; i < n; i++) {
        double v = rnd_nz(scale, offset);
        if (dtype_is_float(t))
            elem_set_f64(t, p, i, v);
        else
            elem_set_i64(t, p, i, (int64_t)v == 0 ? 1 : (int64_t)v);
    }
}

// ---- a test graph: inputs, outputs, random bindings and a reference run ----

typedef struct TG {
    PrimGraph *pg;
    PB b;
    void *in[8];
    void *ref[8]; // outputs before the pass
} TG;

static void tg_init(TG *g) {
    memset(g, 0, sizeof *g);
    g->pg = prim_graph_create(graph_create("test"));
    g->b = (PB){g->pg, "test"};
}

static void tg_free(TG *g) {
    for (int i = 0; i < 8; i++) {
        free(g->in[i]);
        free(g->ref[i]);
    }
    const Graph *src = g->pg->src;
    prim_graph_free(g->pg);
    graph_free((Graph *)src);
}

// A graph input filled with random values (uniform ±scale around offset).
static int tg_input(TG *g, DType dt, int rank, const int64_t *dims, double scale, double offset) {
    PrimGraph *pg = g->pg;
    char name[32];
    snprintf(name, sizeof name, "x%d", pg->n_inputs);
    Tensor *t = pg_add_tensor(pg, name, dt, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    g->in[pg->n_inputs] = xmalloc(tensor_nbytes(t) + 1);
    fill(dt, g->in[pg->n_inputs], tensor_numel(t), scale, offset);
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

static int tg_const(TG *g, DType dt, int rank, const int64_t *dims, double scale, double offset) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    void *data = xmalloc((size_t)n * dtype_size(dt) + 1);
    fill(dt, data, n, scale, offset);
    int t = pb_const(&g->b, dt, rank, dims, data);
    free(data);
    return t;
}

static void tg_output(TG *g, int t, const char *name) {
    PrimGraph *pg = g->pg;
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->tensors[t]->name = arena_strdup(pg->arena, name);
    pg->outputs[pg->n_outputs++] = t;
}

static int run(TG *g, void **out) {
    Err e = {0};
    int rc = prim_graph_verify(g->pg, &e);
    if (rc == ST_OK)
        rc = prim_interp_run(g->pg, (const void *const *)g->in, out, &e);
    if (rc)
        printf("  %s\n", e.msg);
    return rc;
}

// Verifies and runs the graph as built: the reference outputs.
static void tg_reference(TG *g) {
    CHECK(run(g, g->ref) == ST_OK);
}

// Runs again and compares with the reference: bit for bit (atol < 0), or within atol.
static void tg_compare(TG *g, double atol) {
    void *out[8] = {0};
    CHECK(run(g, out) == ST_OK);
    for (int i = 0; i < g->pg->n_outputs && out[i] && g->ref[i]; i++) {
        const Tensor *t = g->pg->tensors[g->pg->outputs[i]];
        if (atol < 0) {
            CHECK_MSG(memcmp(out[i], g->ref[i], tensor_nbytes(t)) == 0, "output %s differs",
                      t->name);
            continue;
        }
        double worst = 0;
        for (int64_t k = 0; k < tensor_numel(t); k++) {
            double d =
                fabs(elem_get_f64(t->dtype, out[i], k) - elem_get_f64(t->dtype, g->ref[i], k));
            worst = fmax(worst, isnan(d) ? INFINITY : d);
        }
        CHECK_MSG(worst <= atol, "output %s: max error %g > %g", t->name, worst, atol);
    }
    for (int i = 0; i < 8; i++)
        free(out[i]);
}

static int count(const PrimGraph *pg, PrimKind k) {
    int c[PRIM_KIND_COUNT];
    prim_graph_counts(pg, c);
    return c[k];
}

// Runs one pass and the verifier.
static int apply(TG *g, int (*pass)(PrimGraph *, CleanupStats *, Err *), CleanupStats *st) {
    Err e = {0};
    int rc = pass(g->pg, st, &e);
    if (rc == ST_OK)
        rc = prim_graph_verify(g->pg, &e);
    if (rc)
        printf("  %s\n", e.msg);
    return rc;
}

static int cleanup(TG *g, CleanupStats *st) {
    Err e = {0};
    int rc = fission_cleanup(g->pg, st, &e);
    if (rc)
        printf("  %s\n", e.msg);
    return rc;
}

// The producer of tensor t (after compaction producers are indices).
static const Prim *producer(const PrimGraph *pg, int t) {
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_out; j++)
            if (pg->prims[k]->out[j] == t)
                return pg->prims[k];
    return NULL;
}

// ---- constant folding ----

// A transposed weight and BatchNorm-style scale math over constants become constants.
static void test_fold_weight_subgraphs(void) {
    TG g;
    tg_init(&g);
    int64_t xd[2] = {3, 4}, wd[2] = {5, 4}, cd[1] = {5};
    int x = tg_input(&g, DT_FLOAT, 2, xd, 1, 0);
    int w = tg_const(&g, DT_FLOAT, 2, wd, 1, 0);
    int perm[2] = {1, 0};
    int wt = pb_transpose(&g.b, w, perm);
    int var = tg_const(&g, DT_FLOAT, 1, cd, 0.5, 1), gamma = tg_const(&g, DT_FLOAT, 1, cd, 1, 0);
    int scale =
        pb_ew2(&g.b, EW_MUL, gamma, pb_ew1(&g.b, EW_RSQRT, pb_ew2i(&g.b, EW_ADD, var, 1e-5)));
    int y = pb_ew2(&g.b, EW_MUL, pb_matmul(&g.b, x, wt), scale);
    tg_output(&g, y, "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_fold_constants, &st) == ST_OK);
    CHECK(st.folded == 4);
    CHECK(count(g.pg, PRIM_LAYOUT) == 0 && count(g.pg, PRIM_ELEMWISE) == 1);
    CHECK(count(g.pg, PRIM_LINEAR) == 1);
    CHECK(pg_is_const(g.pg, g.pg->prims[0]->in[1]));
    tg_compare(&g, -1);
    tg_free(&g);
}

// Not folded: a broadcast that would expand a scalar into 256 KiB, and a graph output.
static void test_fold_limits(void) {
    TG g;
    tg_init(&g);
    int64_t big[2] = {256, 256};
    int x = tg_input(&g, DT_FLOAT, 2, big, 1, 0);
    int s = pb_const_scalar(&g.b, DT_FLOAT, 3.0);
    int bc = pb_broadcast(&g.b, s, 2, big);
    tg_output(&g, pb_ew2(&g.b, EW_MUL, x, bc), "y");
    tg_output(&g, pb_ew1(&g.b, EW_COPY, s), "c");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_fold_constants, &st) == ST_OK);
    CHECK(st.folded == 0 && g.pg->n_prims == 3);
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- BatchNorm folding ----

static LinearParams conv2d(int group, int pad) {
    LinearParams lp = {.op = LIN_CONV, .n_spatial = 2, .group = group};
    for (int d = 0; d < 2; d++) {
        lp.stride[d] = lp.dilation[d] = 1;
        lp.pad_begin[d] = lp.pad_end[d] = pad;
    }
    return lp;
}

// conv → +bias → -mean → *(gamma * rsqrt(var + eps)) → +beta → relu. With large activations
// the mean is set to what the conv gives for the offset, so the chain cancels most of the value:
// the folded form's rounding is then bounded by a few ulps of the pre-BN magnitude P times the
// scale (at most 1.5 here): |got-ref| <= 8 * FLT_EPSILON * P * 1.5.
static void bn_case(int group, double x_offset) {
    TG g;
    tg_init(&g);
    enum { M = 6 };
    int64_t xd[4] = {2, 4, 6, 5}, wd[4] = {M, 4 / group, 3, 3}, yd[4] = {2, M, 6, 5};
    int64_t c3[3] = {M, 1, 1}, c4[4] = {1, M, 1, 1}, c1[1] = {M};
    int x = tg_input(&g, DT_FLOAT, 4, xd, 1, x_offset);
    int w = tg_const(&g, DT_FLOAT, 4, wd, 1, 0);
    int bias = tg_const(&g, DT_FLOAT, 3, c3, 1, 0);
    const float *wv = g.pg->tensors[w]->data, *bv = g.pg->tensors[bias]->data;
    int64_t per = tensor_numel(g.pg->tensors[w]) / M;
    float mean[M];
    double P = 0;
    for (int m = 0; m < M; m++) {
        double sum = 0, mag = 0;
        for (int64_t i = 0; i < per; i++) {
            sum += wv[m * per + i];
            mag += fabs(wv[m * per + i]);
        }
        mean[m] = (float)(x_offset * sum + bv[m] + rnd_nz(1, 0));
        P = fmax(P, (fabs(x_offset) + 1) * mag + fabs(bv[m]) + fabs(mean[m]));
    }
    LinearParams lp = conv2d(group, 1);
    int y = pb_conv(&g.b, &lp, x, w, yd);
    y = pb_ew2(&g.b, EW_ADD, y, bias);
    y = pb_ew2(&g.b, EW_SUB, y, pb_const(&g.b, DT_FLOAT, 4, c4, mean));
    int var = tg_const(&g, DT_FLOAT, 1, c1, 0.5, 1), gamma = tg_const(&g, DT_FLOAT, 1, c1, 1, 0);
    int scale =
        pb_ew2(&g.b, EW_MUL, gamma, pb_ew1(&g.b, EW_RSQRT, pb_ew2i(&g.b, EW_ADD, var, 1e-5)));
    scale = pb_reshape(&g.b, scale, 3, c3);
    y = pb_ew2(&g.b, EW_MUL, scale, y);
    y = pb_ew2(&g.b, EW_ADD, y, tg_const(&g, DT_FLOAT, 3, c3, 1, 0));
    tg_output(&g, pb_ew1(&g.b, EW_RELU, y), "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_fold_constants, &st) == ST_OK);
    CHECK(apply(&g, pass_fold_batchnorm, &st) == ST_OK);
    CHECK(st.bn_folded == 1);
    CHECK(g.pg->n_prims == 3 && count(g.pg, PRIM_LINEAR) == 1 && count(g.pg, PRIM_ELEMWISE) == 2);
    const Prim *add = g.pg->prims[1];
    CHECK(add->ew.n == 1 && add->ew.code[0].op == EW_ADD && add->in[0] == g.pg->prims[0]->out[0]);
    tg_compare(&g, 8 * FLT_EPSILON * P * 1.5);
    tg_free(&g);
}

static void test_bn_fold(void) {
    bn_case(1, 0);
}
static void test_bn_fold_grouped(void) {
    bn_case(2, 0);
}
static void test_bn_fold_large_values(void) {
    bn_case(1, 1e4);
}

// Not folded: the conv's output read twice, and a scale that varies over space.
static void test_bn_no_fold(void) {
    TG g;
    tg_init(&g);
    int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {3, 2, 1, 1}, yd[4] = {1, 3, 4, 4};
    int64_t sp[4] = {1, 1, 4, 4}, c3[3] = {3, 1, 1};
    int x = tg_input(&g, DT_FLOAT, 4, xd, 1, 0);
    LinearParams lp = conv2d(1, 0);
    int y1 = pb_conv(&g.b, &lp, x, tg_const(&g, DT_FLOAT, 4, wd, 1, 0), yd);
    int a = pb_ew2(&g.b, EW_MUL, y1, tg_const(&g, DT_FLOAT, 3, c3, 1, 0));
    tg_output(&g, pb_ew2(&g.b, EW_ADD, a, y1), "a");
    int y2 = pb_conv(&g.b, &lp, x, tg_const(&g, DT_FLOAT, 4, wd, 1, 0), yd);
    tg_output(&g, pb_ew2(&g.b, EW_MUL, y2, tg_const(&g, DT_FLOAT, 4, sp, 1, 0)), "b");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_fold_batchnorm, &st) == ST_OK);
    CHECK(st.bn_folded == 0 && g.pg->n_prims == 5);
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- dead convolution taps ----

// Whether tap j of an axis reads a row inside [0, in) for some output y (brute force).
static bool brute_live(int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb, int64_t j) {
    for (int64_t y = 0; y < out; y++) {
        int64_t r = y * s - pb + j * d;
        if (r >= 0 && r < in)
            return true;
    }
    return false;
}

// The output length of an axis (ONNX's formula); < 1 when the geometry has no output.
static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
    int64_t span = d * (k - 1) + 1, n = in + pb + pe - span;
    return n < 0 ? 0 : n / s + 1;
}

// One axis checked against brute force: the live span, and that the trim reads the same rows at
// every output position with pads >= 0 and the same output length.
static void check_axis(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
    int64_t out = conv_out(in, k, s, d, pb, pe), first, last;
    if (out < 1)
        return;
    bool any = pass_conv_live_taps(in, out, k, s, d, pb, &first, &last);
    int64_t bf = -1, bl = -1;
    for (int64_t j = 0; j < k; j++)
        if (brute_live(in, out, s, d, pb, j)) {
            bl = j;
            if (bf < 0)
                bf = j;
        }
    CHECK_MSG(any == (bf >= 0), "in %lld k %lld s %lld d %lld pads %lld,%lld: any %d",
              (long long)in, (long long)k, (long long)s, (long long)d, (long long)pb, (long long)pe,
              any);
    if (!any)
        return;
    CHECK_MSG(first == bf && last == bl,
              "in %lld k %lld s %lld d %lld pb %lld: [%lld, %lld] vs "
              "[%lld, %lld]",
              (long long)in, (long long)k, (long long)s, (long long)d, (long long)pb,
              (long long)first, (long long)last, (long long)bf, (long long)bl);
    ConvAxisTrim t;
    CHECK(pass_conv_trim_axis(in, out, k, s, d, pb, &t));
    CHECK_MSG(t.pad_begin >= 0 && t.pad_end >= 0 && t.k >= 1 && t.first >= 0 &&
                  t.first + t.k <= k && conv_out(in, t.k, s, d, t.pad_begin, t.pad_end) == out,
              "in %lld k %lld s %lld d %lld pads %lld,%lld: trim first %lld k %lld pads %lld,%lld",
              (long long)in, (long long)k, (long long)s, (long long)d, (long long)pb, (long long)pe,
              (long long)t.first, (long long)t.k, (long long)t.pad_begin, (long long)t.pad_end);
    // Every live read of the original is a read of the trim at the same tap, and back.
    for (int64_t y = 0; y < out; y++)
        for (int64_t j = 0; j < k; j++) {
            int64_t r = y * s - pb + j * d;
            bool kept = j >= t.first && j < t.first + t.k;
            if (kept)
                CHECK(y * s - t.pad_begin + (j - t.first) * d == r);
            else
                CHECK(r < 0 || r >= in);
        }
    // Maximal: a dead end stays only where dropping it needs a negative pad.
    if (t.first != bf)
        CHECK(t.first == 0 && pb - bf * d < 0);
    if (t.first + t.k - 1 != bl)
        CHECK(t.first + t.k == k);
}

// The tap arithmetic: the named edge cases, then random geometries against brute force.
static void test_conv_live_taps(void) {
    int64_t f, l;
    ConvAxisTrim t;
    // ASPP: 3x3, dilation 12 or 24 = padding, on 12 and 14: the centre alone; dilation 6 on 12
    // keeps all three, and so does dilation 12 on 14 (rows 12 and 13 reach back to 0 and 1).
    CHECK(pass_conv_live_taps(12, 12, 3, 1, 12, 12, &f, &l) && f == 1 && l == 1);
    CHECK(pass_conv_trim_axis(12, 12, 3, 1, 24, 24, &t) && t.first == 1 && t.k == 1 &&
          t.pad_begin == 0 && t.pad_end == 0);
    CHECK(pass_conv_live_taps(12, 12, 3, 1, 6, 6, &f, &l) && f == 0 && l == 2);
    CHECK(pass_conv_live_taps(14, 14, 3, 1, 12, 12, &f, &l) && f == 0 && l == 2);
    CHECK(pass_conv_live_taps(14, 14, 3, 1, 36, 36, &f, &l) && f == 1 && l == 1);
    // Stride 2: out 6 on 12 with dilation 24; the last row read by tap 1 is 10.
    CHECK(pass_conv_trim_axis(12, 6, 3, 2, 24, 24, &t) && t.first == 1 && t.k == 1 &&
          t.pad_begin == 0 && t.pad_end == 0);
    // Dilation 1 with huge pads: 7 taps, pads 10 on 4 rows, out 18; taps 0..6 all reach a row.
    CHECK(pass_conv_live_taps(4, 18, 7, 1, 1, 10, &f, &l) && f == 0 && l == 6);
    // ...and with stride 8 (out 3: rows -10.., -2.., 6..): tap 0 reads -10, -2, 6: dead.
    CHECK(pass_conv_live_taps(4, 3, 7, 8, 1, 10, &f, &l) && f == 2 && l == 5);
    // Asymmetric pads 12 / 6 on 12 rows: out 6, the centre reads rows 0..5; dropping tap 2 would
    // need pad_end -6 (rows 6..11 are read by no output), so it stays.
    CHECK(pass_conv_trim_axis(12, 6, 3, 1, 12, 12, &t) && t.first == 1 && t.k == 2 &&
          t.pad_begin == 0 && t.pad_end == 6);
    // A first live tap past the padding (dilation 4, pad 2, out 1: rows -2, 2, 6 of 3): dropping
    // tap 0 would need pad_begin -2, so it stays; tap 2 goes.
    CHECK(pass_conv_live_taps(3, 1, 3, 1, 4, 2, &f, &l) && f == 1 && l == 1);
    CHECK(pass_conv_trim_axis(3, 1, 3, 1, 4, 2, &t) && t.first == 0 && t.k == 2 &&
          t.pad_begin == 2 && t.pad_end == 0);
    // No tap live: stride 6 jumps over 2 rows (rows -3, -2 then 3, 4).
    CHECK(!pass_conv_live_taps(2, 2, 2, 6, 1, 3, &f, &l));
    CHECK(!pass_conv_trim_axis(2, 2, 2, 6, 1, 3, &t) && t.first == 0 && t.k == 2);
    // An interior dead tap stays: stride 5 over 3 rows, dilation 2, pad 4: tap 0 reads -4 and 1,
    // tap 1 -2 and 3 (never the input), tap 2 0 and 5.
    CHECK(pass_conv_live_taps(3, 2, 3, 5, 2, 4, &f, &l) && f == 0 && l == 2);
    CHECK(!brute_live(3, 2, 5, 2, 4, 1));
    // 1x1 and kernel 1: nothing to drop.
    CHECK(pass_conv_trim_axis(12, 12, 1, 1, 1, 0, &t) && t.first == 0 && t.k == 1);
    int n = 0;
    for (int64_t in = 1; in <= 9; in++)
        for (int64_t k = 1; k <= 5; k++)
            for (int64_t s = 1; s <= 4; s++)
                for (int64_t d = 1; d <= 6; d++)
                    for (int64_t pb = 0; pb <= 14; pb += 1 + (pb > 4))
                        for (int64_t pe = 0; pe <= 14; pe += 1 + (pe > 4)) {
                            check_axis(in, k, s, d, pb, pe);
                            n++;
                        }
    for (int i = 0; i < 2000; i++) {
        int64_t in = 1 + (int64_t)(fabs(rnd()) * 40), k = 1 + (int64_t)(fabs(rnd()) * 7);
        int64_t s = 1 + (int64_t)(fabs(rnd()) * 6), d = 1 + (int64_t)(fabs(rnd()) * 40);
        check_axis(in, k, s, d, (int64_t)(fabs(rnd()) * 80), (int64_t)(fabs(rnd()) * 80));
        n++;
    }
    printf("  %d geometries\n", n);
}

// A convolution of ns spatial axes: X [2, C, in...] a graph input, W a constant (or a graph
// input with w_input), output dims from the ONNX formula; *w receives W's tensor.
typedef struct ConvCase {
    int ns, C, M, group;
    int64_t in[3], k[3], stride[3], dil[3], pb[3], pe[3];
} ConvCase;

static int conv_case(TG *g, const ConvCase *c, bool w_input, int *w) {
    int64_t xd[5] = {2, c->C}, wd[5] = {c->M, c->C / c->group}, yd[5] = {2, c->M};
    LinearParams lp = {.op = LIN_CONV, .n_spatial = c->ns, .group = c->group};
    int64_t fan = c->C / c->group;
    for (int d = 0; d < c->ns; d++) {
        xd[2 + d] = c->in[d];
        wd[2 + d] = c->k[d];
        yd[2 + d] = conv_out(c->in[d], c->k[d], c->stride[d], c->dil[d], c->pb[d], c->pe[d]);
        lp.stride[d] = c->stride[d];
        lp.dilation[d] = c->dil[d];
        lp.pad_begin[d] = c->pb[d];
        lp.pad_end[d] = c->pe[d];
        fan *= c->k[d];
    }
    int x = tg_input(g, DT_FLOAT, 2 + c->ns, xd, 1, 0);
    *w = w_input ? tg_input(g, DT_FLOAT, 2 + c->ns, wd, 1.0 / sqrt((double)fan), 0)
                 : tg_const(g, DT_FLOAT, 2 + c->ns, wd, 1.0 / sqrt((double)fan), 0);
    return pb_conv(&g->b, &lp, x, *w, yd);
}

// The graph's only convolution.
static const Prim *the_conv(const PrimGraph *pg) {
    const Prim *c = NULL;
    for (int k = 0; k < pg->n_prims; k++)
        if (pg->prims[k]->kind == PRIM_LINEAR)
            c = pg->prims[k];
    return c;
}

// Runs the pass on one convolution (+ bias + ReLU) and checks the kernel's dims and pads after it
// (k_after, pb_after; k_after NULL: the convolution must stay as it was), then the outputs
// against the graph before (the products summed in another order: 1e-5 on values of about 1).
static void taps_case(const char *what, const ConvCase *c, bool w_input, const int64_t *k_after,
                      const int64_t *pb_after) {
    TG g;
    tg_init(&g);
    int w;
    int y = conv_case(&g, c, w_input, &w);
    int64_t bd[4] = {c->M, 1, 1, 1};
    y = pb_ew2(&g.b, EW_ADD, y, tg_const(&g, DT_FLOAT, c->ns + 1, bd, 0.1, 0));
    tg_output(&g, pb_ew1(&g.b, EW_RELU, y), "y");
    tg_reference(&g);
    CleanupStats st = {0};
    int n0 = g.pg->n_prims;
    CHECK_MSG(apply(&g, pass_trim_conv_taps, &st) == ST_OK, "%s", what);
    CHECK_MSG(st.taps_trimmed == (k_after != NULL), "%s: %d trimmed", what, st.taps_trimmed);
    const Prim *p = the_conv(g.pg);
    const Tensor *W = g.pg->tensors[p->in[1]];
    for (int d = 0; d < c->ns; d++) {
        int64_t want = k_after ? k_after[d] : c->k[d], pb = k_after ? pb_after[d] : c->pb[d];
        CHECK_MSG(W->dims[2 + d] == want && p->lin.pad_begin[d] == pb,
                  "%s: axis %d kernel %lld pad %lld, want %lld and %lld", what, d,
                  (long long)W->dims[2 + d], (long long)p->lin.pad_begin[d], (long long)want,
                  (long long)pb);
        // A single tap's dilation is 1 (the 1x1 paths take it).
        CHECK_MSG(!k_after || want != 1 || p->lin.dilation[d] == 1, "%s: axis %d dilation %lld",
                  what, d, (long long)p->lin.dilation[d]);
    }
    // A computed weight is sliced by a layout primitive, a constant one replaced.
    CHECK_MSG(g.pg->n_prims == n0 + (w_input && k_after), "%s: %d primitives", what, g.pg->n_prims);
    CHECK(!k_after || p->in[1] != w);
    CHECK(!k_after || w_input || pg_is_const(g.pg, p->in[1]));
    tg_compare(&g, 1e-5);
    // Once is enough: the pass leaves nothing for a second round.
    CleanupStats again = {0};
    CHECK(apply(&g, pass_trim_conv_taps, &again) == ST_OK && again.taps_trimmed == 0);
    tg_free(&g);
}

static void test_conv_taps_2d(void) {
    // ASPP on 12x12: dilation 6 stays, 12 and 24 become 1x1.
    ConvCase a = {2, 5, 4, 1, {12, 12}, {3, 3}, {1, 1}, {6, 6}, {6, 6}, {6, 6}};
    taps_case("aspp d6", &a, false, NULL, NULL);
    int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    a.dil[0] = a.dil[1] = a.pb[0] = a.pb[1] = a.pe[0] = a.pe[1] = 12;
    taps_case("aspp d12", &a, false, one, zero);
    a.dil[0] = a.dil[1] = a.pb[0] = a.pb[1] = a.pe[0] = a.pe[1] = 24;
    taps_case("aspp d24", &a, false, one, zero);
    // The weight given at run time: a slice primitive.
    taps_case("aspp d24, computed weight", &a, true, one, zero);
    // Depthwise, stride 2, on a 7x9 map (odd, prime): 3x3 of dilation 9 → 1x1.
    ConvCase dw = {2, 6, 6, 6, {7, 9}, {3, 3}, {2, 2}, {9, 9}, {9, 9}, {9, 9}};
    taps_case("depthwise s2", &dw, false, one, zero);
    // Grouped (2 groups), 5x3 kernel, dilation (3, 2) with pads (6, 2) on 5x7: rows y-6, y-3,
    // y, y+3, y+6 of 5: the outer two dead on the height; the width keeps all three.
    ConvCase gr = {2, 4, 6, 2, {5, 7}, {5, 3}, {1, 1}, {3, 2}, {6, 2}, {6, 2}};
    int64_t gk[2] = {3, 3}, gp[2] = {3, 2};
    taps_case("grouped 5x3", &gr, false, gk, gp);
    // Asymmetric pads (12, 0 / 6, 24) on 12x12: the height keeps taps 1..2, the width tap 0.
    ConvCase as = {2, 3, 4, 1, {12, 12}, {3, 3}, {1, 1}, {12, 12}, {12, 0}, {6, 24}};
    int64_t ak[2] = {2, 1}, ap[2] = {0, 0};
    taps_case("asymmetric", &as, false, ak, ap);
    // Dilation 1 with pads 8 on a 3x3 map (5x5 kernel, stride 4: out 4x4): rows -8.., -4.., 0..,
    // 4..: tap 0 reads -8, -4, 0: live; tap 4 reads -4, 0, 4: live: nothing dropped.
    ConvCase hp = {2, 2, 3, 1, {3, 3}, {5, 5}, {4, 4}, {1, 1}, {8, 8}, {8, 8}};
    taps_case("dilation 1, pads 8, stride 4", &hp, false, NULL, NULL);
    // An axis without a live tap: left as it is (the product is zero).
    ConvCase dead = {2, 2, 3, 1, {2, 4}, {2, 3}, {6, 1}, {1, 4}, {3, 4}, {3, 4}};
    taps_case("no live tap on the height", &dead, false, NULL, NULL);
    // An interior dead tap only: left as it is.
    ConvCase mid = {2, 2, 3, 1, {3, 3}, {3, 1}, {5, 1}, {2, 1}, {4, 0}, {3, 0}};
    taps_case("interior dead tap", &mid, false, NULL, NULL);
}

static void test_conv_taps_1d_3d(void) {
    // Conv1d, dilation 10 on 10 steps: 1-tap; kernel 5 of dilation 6, pads 12: taps 1..3.
    ConvCase a = {1, 4, 3, 1, {10}, {3}, {1}, {10}, {10}, {10}};
    int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    taps_case("1-D d10", &a, false, one, zero);
    taps_case("1-D d10, computed weight", &a, true, one, zero);
    ConvCase b = {1, 4, 3, 1, {10}, {5}, {1}, {6}, {12}, {12}};
    int64_t bk[1] = {3}, bp[1] = {6};
    taps_case("1-D k5", &b, false, bk, bp);
    // Conv3d: 3x3x3 of dilation (4, 1, 5) on 3x4x5, pads (4, 1, 5): depth and width 1 tap, the
    // height keeps 3; stride (1, 2, 1).
    ConvCase c = {3, 3, 2, 1, {3, 4, 5}, {3, 3, 3}, {1, 2, 1}, {4, 1, 5}, {4, 1, 5}, {4, 1, 5}};
    int64_t ck[3] = {1, 3, 1}, cp[3] = {0, 1, 0};
    taps_case("3-D", &c, false, ck, cp);
    taps_case("3-D, computed weight", &c, true, ck, cp);
}

// Through the whole clean-up: a BatchNorm-style scale folded into the weight and the taps dropped
// from the folded weight, in any order.
static void test_conv_taps_cleanup(void) {
    TG g;
    tg_init(&g);
    ConvCase a = {2, 4, 5, 1, {6, 6}, {3, 3}, {1, 1}, {6, 6}, {6, 6}, {6, 6}};
    int w;
    int y = conv_case(&g, &a, false, &w);
    int64_t c4[4] = {1, 5, 1, 1};
    y = pb_ew2(&g.b, EW_MUL, y, tg_const(&g, DT_FLOAT, 4, c4, 0.5, 1));
    y = pb_ew2(&g.b, EW_ADD, y, tg_const(&g, DT_FLOAT, 4, c4, 0.5, 0));
    tg_output(&g, pb_ew1(&g.b, EW_RELU, y), "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(cleanup(&g, &st) == ST_OK);
    CHECK(st.bn_folded == 1 && st.taps_trimmed == 1);
    const Prim *p = the_conv(g.pg);
    const Tensor *W = g.pg->tensors[p->in[1]];
    CHECK(W->dims[2] == 1 && W->dims[3] == 1 && p->lin.pad_begin[0] == 0 &&
          p->lin.pad_begin[1] == 0);
    tg_compare(&g, 1e-5);
    tg_free(&g);
}

// ---- identity layouts ----

static void test_identity_layouts(void) {
    TG g;
    tg_init(&g);
    int64_t d[3] = {2, 3, 4}, zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    int x = tg_input(&g, DT_FLOAT, 3, d, 1, 0);
    int perm[3] = {0, 1, 2};
    int t = pb_transpose(&g.b, x, perm);
    t = pb_reshape(&g.b, t, 3, d);
    t = pb_slice(&g.b, t, zero, one, d);
    t = pb_ew1(&g.b, EW_COPY, t);
    int y = pb_ew1(&g.b, EW_RELU, t);
    tg_output(&g, y, "y");
    // An identity layout computing a graph output stays.
    tg_output(&g, pb_reshape(&g.b, x, 3, d), "z");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_remove_identities, &st) == ST_OK);
    CHECK(st.identities == 4 && g.pg->n_prims == 2);
    CHECK(g.pg->prims[0]->kind == PRIM_ELEMWISE && g.pg->prims[0]->in[0] == x);
    CHECK(g.pg->outputs[0] == y && g.pg->outputs[1] == g.pg->prims[1]->out[0]);
    CHECK(strcmp(g.pg->tensors[g.pg->outputs[1]]->name, "z") == 0);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Identity stages inside a longer chain are dropped, the rest kept.
static void test_identity_stages(void) {
    TG g;
    tg_init(&g);
    int64_t d[3] = {2, 3, 4};
    int x = tg_input(&g, DT_FLOAT, 3, d, 1, 0);
    int p1[3] = {2, 0, 1};
    int64_t td[3] = {4, 2, 3}, zero[3] = {0, 0, 0}, one[3] = {1, 1, 1}, rd[2] = {4, 6};
    int t = pb_slice(&g.b, pb_transpose(&g.b, x, p1), zero, one, td);
    t = pb_reshape(&g.b, t, 2, rd);
    tg_output(&g, pb_ew1(&g.b, EW_NEG, t), "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_compose_layouts, &st) == ST_OK);
    CHECK(count(g.pg, PRIM_LAYOUT) == 1 && g.pg->prims[0]->lay.n_stages == 3);
    CHECK(apply(&g, pass_remove_identities, &st) == ST_OK);
    CHECK(st.identities == 1);
    CHECK(count(g.pg, PRIM_LAYOUT) == 1 && g.pg->prims[0]->lay.n_stages == 2);
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- layout composition ----

// transpose ∘ transpose → one perm; reshape ∘ reshape → one reshape; a transpose and its
// inverse vanish under the whole clean-up.
static void test_compose_transposes_reshapes(void) {
    TG g;
    tg_init(&g);
    int64_t d[4] = {2, 3, 4, 5}, r1[2] = {6, 20}, r2[3] = {6, 4, 5};
    int x = tg_input(&g, DT_FLOAT, 4, d, 1, 0);
    int pa[4] = {0, 2, 1, 3}, pb[4] = {3, 1, 0, 2};
    int t = pb_transpose(&g.b, pb_transpose(&g.b, x, pa), pb);
    tg_output(&g, pb_ew1(&g.b, EW_EXP, t), "y");
    int r = pb_reshape(&g.b, pb_reshape(&g.b, x, 2, r1), 3, r2);
    tg_output(&g, pb_ew1(&g.b, EW_EXP, r), "z");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_compose_layouts, &st) == ST_OK);
    CHECK(count(g.pg, PRIM_LAYOUT) == 2);
    for (int k = 0; k < g.pg->n_prims; k++)
        if (g.pg->prims[k]->kind == PRIM_LAYOUT)
            CHECK(g.pg->prims[k]->lay.n_stages == 1);
    tg_compare(&g, -1);
    tg_free(&g);

    tg_init(&g);
    int inv[4] = {0, 2, 1, 3};
    x = tg_input(&g, DT_FLOAT, 4, d, 1, 0);
    t = pb_transpose(&g.b, pb_transpose(&g.b, x, pa), inv);
    // A transpose over unit axes only is a reshape, so it merges with the reshapes around it.
    int64_t u1[4] = {6, 1, 4, 5}, u2[2] = {6, 20};
    int pu[4] = {1, 0, 2, 3};
    t = pb_reshape(&g.b, pb_transpose(&g.b, pb_reshape(&g.b, t, 4, u1), pu), 2, u2);
    tg_output(&g, pb_ew1(&g.b, EW_EXP, t), "y");
    tg_reference(&g);
    CHECK(cleanup(&g, &st) == ST_OK);
    CHECK(count(g.pg, PRIM_LAYOUT) == 1 && g.pg->prims[0]->lay.n_stages == 1);
    CHECK(g.pg->prims[0]->lay.stages[0].kind == LS_RESHAPE);
    tg_compare(&g, -1);
    tg_free(&g);

    tg_init(&g);
    int p3[4] = {2, 0, 3, 1}, p3inv[4] = {1, 3, 0, 2};
    x = tg_input(&g, DT_FLOAT, 4, d, 1, 0);
    tg_output(&g, pb_ew1(&g.b, EW_EXP, pb_transpose(&g.b, pb_transpose(&g.b, x, p3), p3inv)), "y");
    tg_reference(&g);
    CHECK(cleanup(&g, &st) == ST_OK);
    CHECK(g.pg->n_prims == 1 && g.pg->prims[0]->in[0] == x);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Slice, gather, padded table and broadcast composed: the index maps chain correctly.
static void test_compose_general(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {6, 5}, start[2] = {1, 4}, step[2] = {2, -1}, sd[2] = {3, 5};
    int x = tg_input(&g, DT_FLOAT, 2, d, 1, 0);
    int t = pb_slice(&g.b, x, start, step, sd);
    int64_t idx[4] = {2, 0, 0, 1}, qd[2] = {2, 2};
    t = pb_gather(&g.b, t, 0, 2, qd, idx); // [2, 2, 5]
    int64_t td[3] = {2, 2, 7}, tab[7] = {-1, 0, 1, 2, 3, 4, -1};
    int64_t *tables[3] = {NULL, NULL, tab};
    t = pb_table(&g.b, t, td, tables, 0.25);
    int64_t bd[4] = {3, 2, 2, 7};
    t = pb_broadcast(&g.b, t, 4, bd);
    tg_output(&g, pb_ew1(&g.b, EW_NEG, t), "y");
    // A second reader keeps its producer separate.
    int s2 = pb_transpose(&g.b, x, (int[]){1, 0});
    tg_output(&g, pb_ew2(&g.b, EW_ADD, pb_transpose(&g.b, s2, (int[]){1, 0}), x), "z");
    tg_output(&g, pb_ew1(&g.b, EW_EXP, s2), "w");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_compose_layouts, &st) == ST_OK);
    CHECK(count(g.pg, PRIM_LAYOUT) == 3);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Two padded tables with different pad values are not composed.
static void test_compose_pad_values(void) {
    TG g;
    tg_init(&g);
    int64_t d[1] = {4}, d6[1] = {6}, d8[1] = {8};
    int64_t t1[6] = {-1, 0, 1, 2, 3, -1}, t2[8] = {-1, 0, 1, 2, 3, 4, 5, -1};
    int x = tg_input(&g, DT_FLOAT, 1, d, 1, 0);
    int64_t *tb1[1] = {t1}, *tb2[1] = {t2};
    int a = pb_table(&g.b, pb_table(&g.b, x, d6, tb1, 1.0), d8, tb2, 2.0);
    int b = pb_table(&g.b, pb_table(&g.b, x, d6, tb1, 3.0), d8, tb2, 3.0);
    tg_output(&g, pb_ew1(&g.b, EW_NEG, a), "a");
    tg_output(&g, pb_ew1(&g.b, EW_NEG, b), "b");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_compose_layouts, &st) == ST_OK);
    CHECK(count(g.pg, PRIM_LAYOUT) == 3);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Adjacent tables become one table stage (one lookup per element): a reflect-like map of a
// nearest upsample on one axis, a padded map after an identity on the other, both orders of a
// NULL (identity) axis; pad entries of either stay the pad value.
static void test_compose_tables(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {3, 4}, d1[2] = {6, 4}, d2[2] = {8, 6};
    int64_t up[6] = {0, 0, 1, 1, 2, 2};         // axis 0: 3 -> 6 (nearest, x2)
    int64_t refl[8] = {1, 0, 1, 2, 3, 4, 5, 4}; // axis 0: 6 -> 8 (reflect by 1)
    int64_t padw[6] = {-1, 0, 1, 2, 3, -1};     // axis 1: 4 -> 6 (pad by 1)
    int x = tg_input(&g, DT_FLOAT, 2, d, 1, 0);
    int64_t *ta[2] = {up, NULL}, *tb[2] = {refl, padw};
    int t = pb_table(&g.b, pb_table(&g.b, x, d1, ta, 0.5), d2, tb, 0.5);
    tg_output(&g, pb_ew1(&g.b, EW_NEG, t), "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_compose_layouts, &st) == ST_OK);
    int layouts = 0, stages = -1, kind = -1;
    for (int k = 0; k < g.pg->n_prims; k++)
        if (!g.pg->prims[k]->dead && g.pg->prims[k]->kind == PRIM_LAYOUT) {
            layouts++;
            stages = g.pg->prims[k]->lay.n_stages;
            kind = (int)g.pg->prims[k]->lay.stages[0].kind;
        }
    CHECK_MSG(layouts == 1 && stages == 1 && kind == LS_TABLE, "%d layouts, %d stages", layouts,
              stages);
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- elementwise merging ----

static void test_merge_chain(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {4, 5};
    int x = tg_input(&g, DT_FLOAT, 2, d, 2, 0), y = tg_input(&g, DT_FLOAT, 2, d, 2, 0);
    int a = pb_ew2(&g.b, EW_ADD, y, x);
    int b = pb_ew2(&g.b, EW_MUL, a, x);
    int c = pb_ew1(&g.b, EW_EXP, b);
    int r = pb_ew2(&g.b, EW_SUB, c, y);
    tg_output(&g, r, "r");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_merge_elementwise, &st) == ST_OK);
    CHECK(st.ew_merged == 3 && g.pg->n_prims == 1);
    const Prim *p = g.pg->prims[0];
    CHECK(p->n_in == 2 && p->in[0] == x && p->in[1] == y && p->ew.n == 4);
    CHECK(p->ew.code[0].op == EW_ADD && p->ew.code[0].arg[0].index == 0); // x before y
    CHECK(g.pg->outputs[0] == r && strcmp(g.pg->tensors[r]->name, "r") == 0);
    tg_compare(&g, -1);
    CleanupStats st2 = {0};
    CHECK(apply(&g, pass_merge_elementwise, &st2) == ST_OK);
    CHECK(st2.ew_merged == 0 && st2.ew_canonicalised == 0); // canonical form is a fixpoint
    tg_free(&g);
}

// A consumer absorbing two producers, one with a producer of its own: the program is the one
// absorbing them one at a time gives (the consumer's first input first, each absorbed program
// placed before what it had absorbed so far), so the tree's order is [TANH, EXP, ABS, SUB].
static void test_merge_tree_order(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {4, 5};
    int x = tg_input(&g, DT_FLOAT, 2, d, 2, 0), y = tg_input(&g, DT_FLOAT, 2, d, 2, 0);
    int a = pb_ew1(&g.b, EW_ABS, pb_ew1(&g.b, EW_EXP, x));
    int b = pb_ew1(&g.b, EW_TANH, y);
    tg_output(&g, pb_ew2(&g.b, EW_SUB, a, b), "r");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_merge_elementwise, &st) == ST_OK);
    CHECK(st.ew_merged == 3 && g.pg->n_prims == 1);
    const Prim *p = g.pg->prims[0];
    CHECK(p->ew.n == 4 && p->ew.code[0].op == EW_TANH && p->ew.code[1].op == EW_EXP &&
          p->ew.code[2].op == EW_ABS && p->ew.code[3].op == EW_SUB);
    CHECK(p->n_in == 2 && p->in[0] == y && p->in[1] == x);
    tg_compare(&g, -1);
    tg_free(&g);
}

// A chain of 20,000 elementwise primitives becomes one program in one pass, in time linear in
// its length: absorbing one producer at a time copied and canonicalised the growing program
// (O(n^2) instructions kept, O(n^3) time: minutes here). The bound is a hundred times the
// time it takes under the sanitizers.
static void test_merge_long_chain(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {3, 7};
    int x = tg_input(&g, DT_FLOAT, 2, d, 2, 0);
    const int n = 20000;
    for (int i = 0; i < n; i++)
        x = i % 4 == 3 ? pb_ew1(&g.b, EW_TANH, x)
                       : pb_ew2i(&g.b, i % 2 ? EW_MUL : EW_ADD, x, 0.5 + (i % 3) * 0.25);
    tg_output(&g, x, "r");
    tg_reference(&g);
    CleanupStats st = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(apply(&g, pass_merge_elementwise, &st) == ST_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("  %d primitives merged in %.3f s\n", n, secs);
    CHECK(secs < 20);
    CHECK(st.ew_merged == n - 1 && g.pg->n_prims == 1 && g.pg->prims[0]->ew.n == n);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Rounding to narrow types inside a merged program is kept: float16 and wrapping int32.
static void test_merge_exact_narrow_types(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {8, 16};
    int x = tg_input(&g, DT_FLOAT, 2, d, 1e4, 0);
    int h = pb_cast(&g.b, x, DT_FLOAT16);
    h = pb_ew2i(&g.b, EW_MUL, h, 3.3);
    h = pb_ew2(&g.b, EW_ADD, h, pb_cast(&g.b, x, DT_FLOAT16));
    tg_output(&g, pb_ew2(&g.b, EW_SUB, pb_cast(&g.b, h, DT_FLOAT), x), "f");
    int i = tg_input(&g, DT_INT32, 2, d, 2e9, 0);
    int j = pb_ew2(&g.b, EW_MUL, i, i);
    j = pb_ew2(&g.b, EW_ADD, j, i);
    tg_output(&g, pb_ew2i(&g.b, EW_DIV, j, 7), "i");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_merge_elementwise, &st) == ST_OK);
    CHECK(g.pg->n_prims == 2);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Not merged: a producer read twice, and a broadcast intermediate. Merged: a value used twice
// by one consumer (one input after deduplication).
static void test_merge_limits(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {4, 5}, col[2] = {4, 1};
    int x = tg_input(&g, DT_FLOAT, 2, d, 1, 0), v = tg_input(&g, DT_FLOAT, 2, col, 1, 0);
    int e = pb_ew1(&g.b, EW_EXP, x);
    tg_output(&g, pb_ew2(&g.b, EW_ADD, e, x), "a");
    tg_output(&g, pb_ew2(&g.b, EW_MUL, e, x), "b");
    int s = pb_ew1(&g.b, EW_SQRT, pb_ew1(&g.b, EW_ABS, v));
    tg_output(&g, pb_ew2(&g.b, EW_MUL, x, s), "c");
    int t = pb_ew1(&g.b, EW_TANH, x);
    tg_output(&g, pb_ew2(&g.b, EW_MUL, t, t), "d");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_merge_elementwise, &st) == ST_OK);
    // exp, a, b stay; abs merges into sqrt, not into c; tanh merges into d.
    CHECK(st.ew_merged == 2 && g.pg->n_prims == 6);
    const Prim *d_p = producer(g.pg, g.pg->outputs[3]);
    CHECK(d_p && d_p->n_in == 1 && d_p->ew.n == 2 && d_p->ew.code[1].arg[0].src == EWS_INSTR &&
          d_p->ew.code[1].arg[1].src == EWS_INSTR);
    tg_compare(&g, -1);
    tg_free(&g);
}

// One-element constants become immediates (same values read, same domain); a program keeps at
// least one input.
static void test_scalar_constants(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {3, 4}, one[2] = {1, 1};
    int x = tg_input(&g, DT_FLOAT, 2, d, 1, 0), y = tg_input(&g, DT_FLOAT, 2, d, 1, 0);
    int c = tg_const(&g, DT_FLOAT, 2, one, 0.1, 0);
    uint16_t h = f32_to_f16(3.3f);
    uint8_t yes = 1;
    int a = pb_ew2(&g.b, EW_ADD, x, c);
    a = pb_ew2(&g.b, EW_MUL, pb_cast(&g.b, a, DT_FLOAT16), pb_const(&g.b, DT_FLOAT16, 0, NULL, &h));
    a = pb_where(&g.b, pb_const(&g.b, DT_BOOL, 0, NULL, &yes), pb_cast(&g.b, a, DT_FLOAT), y);
    tg_output(&g, a, "a");
    tg_output(&g, pb_ew1(&g.b, EW_COPY, c), "c");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(cleanup(&g, &st) == ST_OK);
    CHECK(g.pg->n_prims == 2);
    const Prim *p = producer(g.pg, g.pg->outputs[0]);
    CHECK(p && p->n_in == 2 && p->in[0] == x && p->in[1] == y);
    p = producer(g.pg, g.pg->outputs[1]);
    CHECK(p && p->n_in == 1 && p->ew.code[0].arg[0].src == EWS_INPUT);
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- scale hoisting ----

// The attention export: S = (Q * c) x (K^T * c) with Q, K^T head-split transposes of inputs
// becomes (Q x K^T) * c^2, the scale a MUL of the product (its name kept: a graph output here);
// a DIV by a one-element constant hoists as its reciprocal. Within float rounding of the scores.
static void test_hoist_scales(void) {
    TG g;
    tg_init(&g);
    int64_t qd[3] = {5, 3, 8}, kd[3] = {7, 3, 8}, one[1] = {1};
    int q = tg_input(&g, DT_FLOAT, 3, qd, 1, 0), k = tg_input(&g, DT_FLOAT, 3, kd, 1, 0);
    int perm_q[3] = {1, 0, 2}, perm_k[3] = {1, 2, 0};
    int qh = pb_transpose(&g.b, q, perm_q), kt = pb_transpose(&g.b, k, perm_k); // [3,5,8] [3,8,7]
    int qs = pb_ew2i(&g.b, EW_MUL, qh, 0.5946035575);
    int c = tg_const(&g, DT_FLOAT, 1, one, 0.5, 2);
    int ks = pb_ew2(&g.b, EW_DIV, kt, c);
    int s = pb_matmul(&g.b, qs, ks);
    tg_output(&g, s, "scores");
    // A scale read twice stays: the MatMul is not its only reader.
    int64_t ad[2] = {4, 6}, bd[2] = {6, 5};
    int a = tg_input(&g, DT_FLOAT, 2, ad, 1, 0), b = tg_input(&g, DT_FLOAT, 2, bd, 1, 0);
    int as = pb_ew2i(&g.b, EW_MUL, a, 3.0);
    tg_output(&g, pb_matmul(&g.b, as, b), "shared");
    tg_output(&g, pb_ew1(&g.b, EW_NEG, as), "as_neg");
    // An elementwise operand that is no scalar scale (a per-column factor) stays.
    int64_t cd[2] = {1, 6};
    int col = tg_const(&g, DT_FLOAT, 2, cd, 1, 0);
    tg_output(&g, pb_matmul(&g.b, pb_ew2(&g.b, EW_MUL, a, col), b), "per_column");
    // A scale of an elementwise value stays (the merge folds it in): GELU's trailing 0.5.
    int gx = pb_ew2i(&g.b, EW_MUL, a, 1.5);
    int gelu =
        pb_ew2i(&g.b, EW_MUL,
                pb_ew2(&g.b, EW_MUL, gx,
                       pb_ew2i(&g.b, EW_ADD,
                               pb_ew1(&g.b, EW_ERF, pb_ew2i(&g.b, EW_DIV, gx, 1.41421356)), 1.0)),
                0.5);
    tg_output(&g, pb_matmul(&g.b, gelu, b), "gelu");
    tg_reference(&g);
    CleanupStats st = {0};
    int ew0 = count(g.pg, PRIM_ELEMWISE);
    CHECK(apply(&g, pass_hoist_scales, &st) == ST_OK);
    CHECK_MSG(st.scales_hoisted == 2, "%d hoisted", st.scales_hoisted);
    CHECK(count(g.pg, PRIM_ELEMWISE) == ew0 - 1);
    const Prim *p = producer(g.pg, g.pg->outputs[0]);
    CHECK(p && p->kind == PRIM_ELEMWISE && p->ew.n == 1 && p->ew.code[0].op == EW_MUL &&
          p->ew.code[0].arg[1].src == EWS_IMM);
    const Prim *mm = p ? producer(g.pg, p->in[0]) : NULL;
    CHECK(mm && mm->kind == PRIM_LINEAR && mm->in[0] == qh && mm->in[1] == kt);
    p = producer(g.pg, g.pg->outputs[1]);
    CHECK(p && p->kind == PRIM_LINEAR && p->in[0] == as);
    p = producer(g.pg, g.pg->outputs[3]);
    CHECK(p && p->kind == PRIM_LINEAR && p->in[0] != a);
    p = producer(g.pg, g.pg->outputs[4]);
    CHECK(p && p->kind == PRIM_LINEAR && p->in[0] == gelu);
    tg_compare(&g, 1e-5);
    // The whole clean-up reaches the same graph and keeps it (a second run changes nothing).
    CHECK(cleanup(&g, &st) == ST_OK);
    int n = g.pg->n_prims;
    CleanupStats again = {0};
    CHECK(cleanup(&g, &again) == ST_OK && again.scales_hoisted == 0 && g.pg->n_prims == n);
    tg_compare(&g, 1e-5);
    tg_free(&g);
}

// Factors that cancel (x * 4 and y / 4) leave the bare product, no MUL after it.
static void test_hoist_scales_cancel(void) {
    TG g;
    tg_init(&g);
    int64_t ad[2] = {3, 4}, bd[2] = {4, 2};
    int a = tg_input(&g, DT_FLOAT, 2, ad, 1, 0), b = tg_input(&g, DT_FLOAT, 2, bd, 1, 0);
    int y = pb_matmul(&g.b, pb_ew2i(&g.b, EW_MUL, a, 4.0), pb_ew2i(&g.b, EW_DIV, b, 4.0));
    tg_output(&g, y, "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_hoist_scales, &st) == ST_OK);
    CHECK(st.scales_hoisted == 2 && g.pg->n_prims == 1 && count(g.pg, PRIM_LINEAR) == 1);
    tg_compare(&g, -1); // powers of two: exact
    tg_free(&g);
}

// ---- common subexpressions ----

static void test_cse(void) {
    TG g;
    tg_init(&g);
    int64_t d[3] = {2, 3, 4}, w[2] = {4, 3};
    int x = tg_input(&g, DT_FLOAT, 3, d, 1, 0), y = tg_input(&g, DT_FLOAT, 3, d, 1, 0);
    int wc = tg_const(&g, DT_FLOAT, 2, w, 1, 0);
    int perm[3] = {0, 2, 1};
    int r1 = pb_reduce(&g.b, RED_MAX, x, 4, true, false),
        r2 = pb_reduce(&g.b, RED_MAX, x, 4, true, false);
    int t1 = pb_transpose(&g.b, x, perm), t2 = pb_transpose(&g.b, x, perm);
    int m1 = pb_matmul(&g.b, x, wc), m2 = pb_matmul(&g.b, x, wc);
    // Commuted operands and equal constants: the same after canonicalisation and deduplication.
    int a1 = pb_ew2(&g.b, EW_ADD, x, y), a2 = pb_ew2(&g.b, EW_ADD, y, x);
    int c1 = pb_ew2(&g.b, EW_MUL, x, pb_const_scalar(&g.b, DT_FLOAT, 2.5));
    int c2 = pb_ew2(&g.b, EW_MUL, x, pb_const_scalar(&g.b, DT_FLOAT, 2.5));
    int outs[10] = {r1, r2, t1, t2, m1, m2, a1, a2, c1, c2};
    for (int i = 0; i < 10; i += 2) {
        char name[8];
        snprintf(name, sizeof name, "o%d", i / 2);
        tg_output(&g, pb_ew2(&g.b, EW_SUB, outs[i], outs[i + 1]), name);
    }
    // Two identical primitives that are both graph outputs keep their tensors.
    tg_output(&g, pb_ew1(&g.b, EW_ABS, x), "p");
    tg_output(&g, pb_ew1(&g.b, EW_ABS, x), "q");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_cse, &st) == ST_OK);
    CHECK(st.cse == 5); // reduce, transpose, matmul, the 2.5 constant, then the c pair
    CHECK(count(g.pg, PRIM_REDUCE) == 1 && count(g.pg, PRIM_LAYOUT) == 1);
    CHECK(count(g.pg, PRIM_LINEAR) == 1);
    CHECK(cleanup(&g, &st) == ST_OK);
    CHECK(count(g.pg, PRIM_ELEMWISE) == 7); // o0..o4 (a and c inlined), p, q
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- dead code ----

static void test_dead_code(void) {
    TG g;
    tg_init(&g);
    int64_t d[2] = {3, 3};
    int x = tg_input(&g, DT_FLOAT, 2, d, 1, 0);
    pb_ew1(&g.b, EW_EXP, pb_reduce(&g.b, RED_SUM, x, 1, false, false));
    tg_output(&g, pb_ew1(&g.b, EW_NEG, x), "y");
    tg_reference(&g);
    CleanupStats st = {0};
    CHECK(apply(&g, pass_dead_code, &st) == ST_OK);
    CHECK(st.dead == 2 && g.pg->n_prims == 1);
    CHECK(g.pg->n_inputs == 1 && g.pg->inputs[0] == x);
    tg_compare(&g, -1);
    tg_free(&g);
}

// ---- the whole clean-up ----

// A layer-norm + attention-like block with weight transposes, reshapes, softmax over rows that
// include constant rows and values of 1e4: everything exact but the block gets smaller.
static void test_cleanup_block(void) {
    TG g;
    tg_init(&g);
    int64_t xd[3] = {2, 6, 8}, wd[2] = {8, 8};
    int x = tg_input(&g, DT_FLOAT, 3, xd, 1, 0);
    // Constant rows and large values.
    float *xv = g.in[0];
    for (int i = 0; i < 8; i++) {
        xv[i] = 1e4f;
        xv[8 + i] = -3.0f;
        xv[16 + i] *= 1e4f;
    }
    int m = pb_reduce(&g.b, RED_MEAN, x, 4, true, false);
    int c = pb_ew2(&g.b, EW_SUB, x, m);
    int var = pb_reduce(&g.b, RED_MEAN, pb_ew2(&g.b, EW_MUL, c, c), 4, true, false);
    int n = pb_ew2(&g.b, EW_MUL, c, pb_ew1(&g.b, EW_RSQRT, pb_ew2i(&g.b, EW_ADD, var, 1e-5)));
    int perm[2] = {1, 0};
    int q = pb_matmul(&g.b, n, pb_transpose(&g.b, tg_const(&g, DT_FLOAT, 2, wd, 0.3, 0), perm));
    int k = pb_matmul(&g.b, n, pb_transpose(&g.b, tg_const(&g, DT_FLOAT, 2, wd, 0.3, 0), perm));
    int64_t hd[4] = {2, 6, 2, 4};
    int p4[4] = {0, 2, 1, 3}, pk[4] = {0, 2, 3, 1};
    int qh = pb_transpose(&g.b, pb_reshape(&g.b, q, 4, hd), p4);
    int kh = pb_transpose(&g.b, pb_reshape(&g.b, k, 4, hd), pk);
    int s = pb_ew2i(&g.b, EW_MUL, pb_matmul(&g.b, qh, kh), 0.5);
    int mx = pb_reduce(&g.b, RED_MAX, s, 8, true, false);
    int ex = pb_ew1(&g.b, EW_EXP, pb_ew2(&g.b, EW_SUB, s, mx));
    int sm = pb_ew2(&g.b, EW_DIV, ex, pb_reduce(&g.b, RED_SUM, ex, 8, true, false));
    int o = pb_matmul(&g.b, sm, pb_transpose(&g.b, pb_reshape(&g.b, n, 4, hd), p4));
    int back[4] = {0, 2, 1, 3};
    o = pb_reshape(&g.b, pb_transpose(&g.b, o, back), 3, xd);
    int y = pb_ew2(&g.b, EW_ADD, o, x);
    tg_output(&g, y, "y");
    tg_output(&g, pb_ew1(&g.b, EW_COPY, sm), "attn");
    pb_ew1(&g.b, EW_LOG, x); // dead
    tg_reference(&g);
    int before = g.pg->n_prims;
    CleanupStats st = {0};
    CHECK(cleanup(&g, &st) == ST_OK);
    CHECK(st.prims_before == before && st.prims_after == g.pg->n_prims);
    CHECK(st.folded == 2 && st.dead >= 1 && st.ew_merged > 0 && st.layouts_composed > 0);
    CHECK(g.pg->n_prims < before - 6);
    CHECK(g.pg->n_inputs == 1 && g.pg->inputs[0] == x && g.pg->outputs[0] == y);
    CHECK(strcmp(g.pg->tensors[g.pg->outputs[1]]->name, "attn") == 0);
    printf("  block: %d -> %d primitives in %d rounds\n", before, g.pg->n_prims, st.iterations);
    tg_compare(&g, -1);
    tg_free(&g);
}

// Half storage (pass_store_reduced) on a block with every kind of primitive: a strided conv with
// bias and ReLU, global average pooling (a mean of a conv's output), a LayerNorm over values up to
// 1e3 (its squares overflow half: the pass keeps sums in float32), attention, a residual. Checks
// the types the pass leaves (interface and sums float32, everything else half, weights converted
// by rounding to nearest) and the outputs against the float32 graph's within half precision.
static void store_case(DType to) {
    TG g;
    tg_init(&g);
    int64_t xd[4] = {1, 3, 9, 9}, wd[4] = {8, 3, 3, 3}, bd[4] = {1, 8, 1, 1};
    int x = tg_input(&g, DT_FLOAT, 4, xd, 1, 0);
    int w = tg_const(&g, DT_FLOAT, 4, wd, 0.4, 0);
    float w0 = ((const float *)g.pg->tensors[w]->data)[0];
    LinearParams lp = {.op = LIN_CONV, .n_spatial = 2, .group = 1};
    for (int d = 0; d < 2; d++) {
        lp.stride[d] = 2;
        lp.dilation[d] = 1;
        lp.pad_begin[d] = lp.pad_end[d] = 1;
    }
    int64_t cd[4] = {1, 8, 5, 5};
    int c = pb_conv(&g.b, &lp, x, w, cd);
    c = pb_ew1(&g.b, EW_RELU, pb_ew2(&g.b, EW_ADD, c, tg_const(&g, DT_FLOAT, 4, bd, 0.1, 0)));
    int pool = pb_reduce(&g.b, RED_MEAN, c, 12, false, false); // [1, 8]
    // Tokens: [1, 25, 8] scaled to about 1e3, LayerNorm over the 8 channels.
    int64_t td[3] = {1, 8, 25};
    int perm3[3] = {0, 2, 1};
    int tok = pb_ew2i(&g.b, EW_MUL, pb_transpose(&g.b, pb_reshape(&g.b, c, 3, td), perm3), 2000.0);
    int m = pb_reduce(&g.b, RED_MEAN, tok, 4, true, false);
    int ce = pb_ew2(&g.b, EW_SUB, tok, m);
    int var = pb_reduce(&g.b, RED_MEAN, pb_ew2(&g.b, EW_MUL, ce, ce), 4, true, false);
    int n = pb_ew2(&g.b, EW_MUL, ce, pb_ew1(&g.b, EW_RSQRT, pb_ew2i(&g.b, EW_ADD, var, 1e-5)));
    int64_t qd[2] = {8, 8};
    int q = pb_matmul(&g.b, n, tg_const(&g, DT_FLOAT, 2, qd, 0.3, 0));
    int k = pb_matmul(&g.b, n, tg_const(&g, DT_FLOAT, 2, qd, 0.3, 0));
    int s = pb_ew2i(&g.b, EW_MUL, pb_matmul(&g.b, q, pb_transpose(&g.b, k, perm3)), 0.35);
    int mx = pb_reduce(&g.b, RED_MAX, s, 4, true, false);
    int ex = pb_ew1(&g.b, EW_EXP, pb_ew2(&g.b, EW_SUB, s, mx));
    int sm = pb_ew2(&g.b, EW_DIV, ex, pb_reduce(&g.b, RED_SUM, ex, 4, true, false));
    int y = pb_ew2(&g.b, EW_ADD, pb_matmul(&g.b, sm, n), n);
    tg_output(&g, y, "y");
    tg_output(&g, pool, "pool");
    tg_reference(&g);
    CHECK(cleanup(&g, NULL) == ST_OK);
    StorageStats st = {0};
    Err e = {0};
    int rc = pass_store_reduced(g.pg, to, NULL, &st, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    const PrimGraph *pg = g.pg;
    CHECK(pg->tensors[pg->inputs[0]]->dtype == DT_FLOAT);
    for (int i = 0; i < pg->n_outputs; i++)
        CHECK(pg->tensors[pg->outputs[i]]->dtype == DT_FLOAT);
    int linear = 0, sums = 0, softmax_sums = 0, half_in_sums = 0, ew_f32 = 0, ew_half = 0;
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        bool sum = p->kind == PRIM_REDUCE && (p->red.op == RED_SUM || p->red.op == RED_MEAN);
        // The softmax's denominator (a sum of exps) stays half: it cannot overflow.
        const Tensor *rin = sum ? pg->tensors[p->in[0]] : NULL;
        if (sum && rin->producer >= 0 && pg->prims[rin->producer]->kind == PRIM_ELEMWISE &&
            pg->prims[rin->producer]->ew.code[pg->prims[rin->producer]->ew.n - 1].op == EW_EXP) {
            softmax_sums++;
            sum = false;
        }
        if (p->kind == PRIM_LINEAR || p->kind == PRIM_LAYOUT || (p->kind == PRIM_REDUCE && !sum)) {
            linear += p->kind == PRIM_LINEAR;
            for (int j = 0; j < p->n_in; j++)
                CHECK_MSG(pg->tensors[p->in[j]]->dtype == to, "%s input %d is %s",
                          prim_kind_name(p->kind), j, dtype_name(pg->tensors[p->in[j]]->dtype));
            CHECK(pg->tensors[p->out[0]]->dtype == to);
        }
        if (sum) {
            sums++;
            // Read as stored (half values need no cast), written float32.
            half_in_sums += pg->tensors[p->in[0]]->dtype == to;
            CHECK_MSG(pg->tensors[p->out[0]]->dtype == DT_FLOAT, "%s of %s (%s) is %s",
                      red_op_name(p->red.op), pg->tensors[p->in[0]]->name,
                      dtype_name(pg->tensors[p->in[0]]->dtype),
                      dtype_name(pg->tensors[p->out[0]]->dtype));
        }
        if (p->kind == PRIM_ELEMWISE && pg->tensors[p->out[0]]->dtype == to) {
            // Half arithmetic, except where a float32 value (a variance) comes in.
            bool f32_in = false, f32_ops = false;
            for (int j = 0; j < p->n_in; j++)
                f32_in |= pg->tensors[p->in[j]]->dtype == DT_FLOAT;
            for (int j = 0; j + 1 < p->ew.n; j++)
                f32_ops |= p->ew.code[j].dtype == DT_FLOAT;
            const EwInstr *last = &p->ew.code[p->ew.n - 1];
            CHECK(last->dtype == to &&
                  (f32_in ? last->op == EW_CAST && f32_ops == (p->ew.n > 1) : !f32_ops));
            ew_f32 += f32_in && p->ew.n > 1;
            ew_half += !f32_in;
        }
        if (p->kind == PRIM_LINEAR && p->lin.op == LIN_CONV) {
            const Tensor *W = pg->tensors[p->in[1]];
            float h = to == DT_FLOAT16 ? f16_to_f32(((const uint16_t *)W->data)[0])
                                       : bf16_to_f32(((const uint16_t *)W->data)[0]);
            CHECK_MSG(W->kind == TK_CONST && h == (to == DT_FLOAT16 ? f16_to_f32(f32_to_f16(w0))
                                                                    : bf16_to_f32(f32_to_bf16(w0))),
                      "weight %g stored as %g", w0, h);
        }
    }
    CHECK(linear == 5 && sums == 3 && softmax_sums == 1 && half_in_sums == 2 && st.retyped > 10 &&
          st.casts >= 1 && st.const_bytes > 0);
    CHECK_MSG(ew_f32 >= 2 && ew_half >= 2, "%d float32, %d half elementwise programs", ew_f32,
              ew_half);
    printf("  %s: %d tensors retyped, %d casts, %lld bytes of constants converted\n",
           dtype_name(to), st.retyped, st.casts, (long long)st.const_bytes);
    // Half the model's precision: max error relative to each output's largest value.
    void *out[8] = {0};
    CHECK(run(&g, out) == ST_OK);
    double bound = to == DT_FLOAT16 ? 1e-2 : 6e-2;
    for (int i = 0; i < pg->n_outputs && out[i]; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        double top = 0, worst = 0;
        for (int64_t j = 0; j < tensor_numel(t); j++) {
            double r = ((const float *)g.ref[i])[j], v = ((const float *)out[i])[j];
            top = fmax(top, fabs(r));
            worst = fmax(worst, isfinite(v) ? fabs(v - r) : INFINITY);
        }
        CHECK_MSG(worst <= bound * top, "%s output %s: error %g of max %g", dtype_name(to), t->name,
                  worst / top, top);
        printf("    %s: largest error %.2g of max|%s| = %.3g\n", dtype_name(to), worst / top,
               t->name, top);
        free(out[i]);
    }
    tg_free(&g);
}

// storage_f16_peak: the largest |value| a float16 tensor holds on given inputs, the compile
// driver's range warning. x * k in half, k = 1000 (in range) and 1e5 (past 65504: infinite).
static void test_storage_peak(void) {
    static const double ks[2] = {1000.0, 1e5};
    for (int c = 0; c < 2; c++) {
        TG g;
        tg_init(&g);
        int64_t xd[2] = {3, 17};
        int x = tg_input(&g, DT_FLOAT, 2, xd, 1, 0);
        int t = pb_ew2i(&g.b, EW_MUL, x, ks[c]);
        tg_output(&g, pb_ew1(&g.b, EW_NEG, t), "y");
        Err e = {0};
        CHECK(pass_store_reduced(g.pg, DT_FLOAT16, NULL, NULL, &e) == ST_OK);
        CHECK(g.pg->tensors[t]->dtype == DT_FLOAT16);
        void **vals = NULL;
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &vals, &e) == ST_OK);
        double mx = 0;
        for (int i = 0; i < 3 * 17; i++)
            mx = fmax(mx, fabs(((const float *)g.in[0])[i]));
        int at = -2;
        double peak = vals ? storage_f16_peak(g.pg, vals, &at) : 0;
        // x's half twin holds at most 1; x * k is computed in half from it (each rounded to
        // nearest, monotonic: the largest is the rounding of the largest), infinite past 65504.
        uint16_t h;
        elem_set_f64(DT_FLOAT16, &h, 0, mx);
        elem_set_f64(DT_FLOAT16, &h, 0, f16_to_f32(h) * ks[c]);
        double want = f16_to_f32(h);
        CHECK_MSG(peak == want && at >= 0 && (c == 0 ? at == t : isinf(peak)),
                  "k = %g: peak %g at tensor %d, want %g at %d", ks[c], peak, at, want, t);
        prim_values_free(g.pg, vals);
        tg_free(&g);
    }
}

// Linear attention as EfficientViT computes it: y = (Q (K^T V)) / (Q sum(K)^T), Q = relu(x Wq),
// K = relu(x Wk), V = x Wv over 64 tokens scaled by 30: the numerator's and the denominator's
// values pass 65504 while y stays small. Built twice from the same seed (wide_set: with the
// wide set storage_range_wide finds on the float32 graph's values, else without).
static int linear_attention(TG *g) {
    int64_t xd[3] = {1, 64, 16}, wd[2] = {16, 16};
    int perm3[3] = {0, 2, 1};
    int x = tg_input(g, DT_FLOAT, 3, xd, 1, 0);
    int q = pb_ew1(&g->b, EW_RELU, pb_matmul(&g->b, x, tg_const(g, DT_FLOAT, 2, wd, 30, 0)));
    int k = pb_ew1(&g->b, EW_RELU, pb_matmul(&g->b, x, tg_const(g, DT_FLOAT, 2, wd, 30, 0)));
    int v = pb_matmul(&g->b, x, tg_const(g, DT_FLOAT, 2, wd, 30, 0));
    int num = pb_matmul(&g->b, q, pb_matmul(&g->b, pb_transpose(&g->b, k, perm3), v));
    int ksum = pb_transpose(&g->b, pb_reduce(&g->b, RED_SUM, k, 2, true, false), perm3);
    int den = pb_matmul(&g->b, q, ksum);
    tg_output(g, pb_ew2(&g->b, EW_DIV, num, pb_ew2i(&g->b, EW_ADD, den, 1e-3)), "y");
    return num;
}

// Half storage's range rule (storage_range_wide, pass_store_reduced's wide set): on the linear
// attention above, float16 storage alone overflows (y is NaN); with the tensors past 65504 / 64
// kept float32, and the products and layouts touching them computed in float32, y matches the
// float32 graph within half precision. The wide set survives the artefact's text form.
static void test_storage_range(void) {
    uint64_t seed = rng_state;
    for (int with = 0; with < 2; with++) {
        rng_state = seed;
        TG g;
        tg_init(&g);
        int num = linear_attention(&g);
        tg_reference(&g);
        CHECK(cleanup(&g, NULL) == ST_OK);
        Err e = {0};
        void **vals = NULL;
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &vals, &e) == ST_OK);
        bool *wide = xcalloc((size_t)g.pg->n_tensors + 1, 1);
        RangeStats rs;
        int n =
            vals ? storage_range_wide(g.pg, vals, STORAGE_F16_HIGH, STORAGE_F16_LOW, wide, &rs) : 0;
        prim_values_free(g.pg, vals);
        // The numerator, its K^T V and the denominator are wide; x (|x| < 1) and the weights
        // (30) are not, and the rest stays under the limit; nothing is tiny.
        CHECK_MSG(n >= 3 && rs.overflow == n && rs.underflow == 0 && rs.smallest_tensor == -1 &&
                      wide[num] && !wide[g.pg->inputs[0]] && rs.peak <= STORAGE_F16_HIGH &&
                      rs.peak_tensor >= 0 && !wide[rs.peak_tensor],
                  "%d wide tensors (%d tiny), num %d, peak %g", n, rs.underflow, wide[num],
                  rs.peak);
        char text[256];
        CHECK(storage_wide_format(wide, g.pg->n_tensors, text, sizeof text));
        bool *back = xcalloc((size_t)g.pg->n_tensors + 1, 1);
        CHECK(storage_wide_parse(text, g.pg->n_tensors, back, &e) == ST_OK &&
              memcmp(back, wide, (size_t)g.pg->n_tensors) == 0);
        char small[2];
        CHECK(!storage_wide_format(wide, g.pg->n_tensors, small, sizeof small)); // does not fit
        free(back);
        StorageStats st = {0};
        CHECK(pass_store_reduced(g.pg, DT_FLOAT16, with ? wide : NULL, &st, &e) == ST_OK);
        const PrimGraph *pg = g.pg;
        int f32_products = 0, half_products = 0;
        for (int i = 0; i < pg->n_prims; i++) {
            const Prim *p = pg->prims[i];
            if (p->kind != PRIM_LINEAR && p->kind != PRIM_LAYOUT)
                continue;
            bool f32 = pg->tensors[p->out[0]]->dtype == DT_FLOAT;
            for (int j = 0; j < p->n_in; j++) // one dtype per primitive
                CHECK(pg->tensors[p->in[j]]->dtype == pg->tensors[p->out[0]]->dtype);
            if (p->kind == PRIM_LINEAR) {
                f32_products += f32;
                half_products += !f32;
            }
        }
        void *out[8] = {0};
        CHECK(run(&g, out) == ST_OK);
        double top = 0, worst = 0;
        for (int64_t j = 0; out[0] && j < 64 * 16; j++) {
            double r = ((const float *)g.ref[0])[j], v = ((const float *)out[0])[j];
            top = fmax(top, fabs(r));
            worst = fmax(worst, isfinite(v) ? fabs(v - r) : INFINITY);
        }
        free(out[0]);
        if (with) {
            // Q K^T V's three products and the denominator's are float32; x's three half.
            CHECK_MSG(st.wide_tensors == n && st.wide_prims >= 4 && f32_products == 3 &&
                          half_products == 3,
                      "%d wide tensors, %d wide primitives, %d float32 / %d half products",
                      st.wide_tensors, st.wide_prims, f32_products, half_products);
            CHECK_MSG(worst <= 1e-2 * top, "error %g of max %g", worst / top, top);
            printf("  %d tensors past 65504/64 kept float32 (%s), %d primitives: error %.2g of "
                   "max|y| = %.3g\n",
                   n, text, st.wide_prims, worst / top, top);
        } else {
            CHECK_MSG(!(worst <= 1e-2 * top), "float16 alone: error %g", worst / top);
            CHECK(st.wide_tensors == 0 && f32_products == 0);
        }
        free(wide);
        tg_free(&g);
    }
    // Text that is not a list, ids out of order or out of range: refused with a reason.
    static const char *const bad[] = {"x", "3-", "5,2", "4-2", "1,", "99", "2,2", "1;2"};
    bool w[10];
    for (size_t i = 0; i < ORCH_COUNT(bad); i++) {
        Err e = {0};
        CHECK_MSG(storage_wide_parse(bad[i], 10, w, &e) == ST_INVALID && e.msg[0], "'%s' accepted",
                  bad[i]);
    }
    Err e = {0};
    CHECK(storage_wide_parse("0,3-5,9", 10, w, &e) == ST_OK && w[0] && !w[1] && w[3] && w[5] &&
          !w[6] && w[9]);
    CHECK(storage_wide_parse("", 10, w, &e) == ST_OK && !w[0]);
}

// Activations that float16 cannot hold from below, as a randomly initialised MobileNetV2's: z =
// relu(x Wa) + 1 is healthy, but t = h W1 and y = t W2 with weights of 1e-5 come to about 4e-5
// (float16 subnormals) and 1e-9 (under 2^-25: zero in float16). Built twice from the same seed:
// with the overflow rule alone (low = 0) storage flushes y to zero, and storage_deviation, scaled
// by the float32 output, says 1 and the verdict refuses naming y; with the underflow rule the
// tiny tensors (W1, W2, t, y) stay float32 with the two products touching them, and y matches
// the float32 graph within float16's rounding of the half product before them. The wide set
// survives the artefact's text form.
static int tiny_chain(TG *g, int *t_out, int *h_out) {
    int64_t xd[2] = {24, 16}, wd[2] = {16, 16};
    int x = tg_input(g, DT_FLOAT, 2, xd, 1, 0);
    int h = pb_ew1(&g->b, EW_RELU, pb_matmul(&g->b, x, tg_const(g, DT_FLOAT, 2, wd, 1, 0)));
    int t = pb_matmul(&g->b, h, tg_const(g, DT_FLOAT, 2, wd, 1e-5, 0));
    int y = pb_matmul(&g->b, t, tg_const(g, DT_FLOAT, 2, wd, 1e-5, 0));
    tg_output(g, pb_ew2i(&g->b, EW_ADD, h, 1.0), "z");
    tg_output(g, y, "y");
    *t_out = t;
    *h_out = h;
    return y;
}

static void test_storage_underflow(void) {
    uint64_t seed = rng_state;
    for (int with = 0; with < 2; with++) {
        rng_state = seed;
        TG g;
        tg_init(&g);
        int t, h, y = tiny_chain(&g, &t, &h);
        tg_reference(&g);
        CHECK(cleanup(&g, NULL) == ST_OK);
        Err e = {0};
        void **vals = NULL;
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &vals, &e) == ST_OK);
        bool *wide = xcalloc((size_t)g.pg->n_tensors + 1, 1);
        RangeStats rs;
        int n = vals ? storage_range_wide(g.pg, vals, STORAGE_F16_HIGH, with ? STORAGE_F16_LOW : 0,
                                          wide, &rs)
                     : 0;
        prim_values_free(g.pg, vals);
        double ymax = 0;
        for (int64_t j = 0; j < 24 * 16; j++)
            ymax = fmax(ymax, fabs(((const float *)g.ref[1])[j]));
        CHECK_MSG(ymax > 1e-10 && ymax < 0x1p-25, "max|y| = %g: not under float16's subnormals",
                  ymax);
        if (with) {
            // W1, W2, t and y are tiny, y the smallest; x, Wa, h and z are not.
            int consts = 0;
            for (int i = 0; i < g.pg->n_tensors; i++)
                consts += wide[i] && g.pg->tensors[i]->kind == TK_CONST;
            CHECK_MSG(n == 4 && rs.underflow == 4 && rs.overflow == 0 && consts == 2 && wide[t] &&
                          wide[y] && !wide[h] && !wide[g.pg->inputs[0]] &&
                          rs.smallest_tensor == y && rs.smallest > 0 && rs.smallest < 0x1p-25,
                      "%d wide (%d tiny, %d constants), t %d y %d h %d, smallest %d", n,
                      rs.underflow, consts, wide[t], wide[y], wide[h], rs.smallest_tensor);
            char text[256];
            bool *back = xcalloc((size_t)g.pg->n_tensors + 1, 1);
            CHECK(storage_wide_format(wide, g.pg->n_tensors, text, sizeof text) &&
                  storage_wide_parse(text, g.pg->n_tensors, back, &e) == ST_OK &&
                  memcmp(back, wide, (size_t)g.pg->n_tensors) == 0);
            free(back);
            printf("  %d tiny tensors kept float32 (%s), the smallest max|value| %.3g\n", n, text,
                   rs.smallest);
        } else {
            CHECK(n == 0 && rs.underflow == 0);
        }
        StorageStats st = {0};
        CHECK(pass_store_reduced(g.pg, DT_FLOAT16, with ? wide : NULL, &st, &e) == ST_OK);
        int f32_products = 0;
        for (int i = 0; i < g.pg->n_prims; i++)
            f32_products += g.pg->prims[i]->kind == PRIM_LINEAR &&
                            g.pg->tensors[g.pg->prims[i]->out[0]]->dtype == DT_FLOAT;
        CHECK_MSG(f32_products == (with ? 2 : 0) && st.wide_tensors == n,
                  "%d float32 products, %d wide tensors", f32_products, st.wide_tensors);
        void *out[8] = {0};
        CHECK(run(&g, out) == ST_OK);
        if (out[0] && out[1]) {
            int at = -2;
            double scale = 0;
            double dev = storage_deviation(g.pg, g.ref, out, &at, &scale);
            Err ve = {0};
            int verdict = storage_deviation_verdict(g.pg, DT_FLOAT16, dev, at, scale, &ve);
            if (with) {
                CHECK_MSG(dev < 1e-2 && verdict == ST_OK, "deviation %g at output %d", dev, at);
                printf("  with them: deviation %.2g of max|%s| = %.3g\n", dev,
                       at >= 0 ? g.pg->tensors[g.pg->outputs[at]]->name : "-", scale);
            } else {
                bool zeros = true;
                for (int64_t j = 0; j < 24 * 16; j++)
                    zeros &= ((const float *)out[1])[j] == 0;
                CHECK_MSG(zeros, "float16 storage alone kept y's values");
                CHECK_MSG(dev == 1.0 && at == 1 && scale == ymax, "deviation %g at output %d", dev,
                          at);
                CHECK_MSG(verdict == ST_UNSUPPORTED && strstr(ve.msg, "output 'y'") &&
                              strstr(ve.msg, "--precision bf16") &&
                              strstr(ve.msg, "--half-storage"),
                          "%s", ve.msg);
                printf("  without them: y flushed to zero, deviation %g: %s\n", dev, ve.msg);
            }
        }
        for (int i = 0; i < 8; i++)
            free(out[i]);
        free(wide);
        tg_free(&g);
    }
}

// storage_deviation on a healthy model: the same chain with weights of 1 (no tiny tensor, no wide
// set) moves under float16 storage by about its rounding, far under the limit; and an output
// that is 0 everywhere in float32 has no scale and is skipped, while a half output that became
// infinite where float32 is finite counts as infinitely far.
static void test_storage_deviation(void) {
    TG g;
    tg_init(&g);
    int64_t xd[2] = {24, 16}, wd[2] = {16, 16};
    int x = tg_input(&g, DT_FLOAT, 2, xd, 1, 0);
    int h = pb_ew1(&g.b, EW_RELU, pb_matmul(&g.b, x, tg_const(&g, DT_FLOAT, 2, wd, 1, 0)));
    int y = pb_matmul(&g.b, pb_matmul(&g.b, h, tg_const(&g, DT_FLOAT, 2, wd, 1, 0)),
                      tg_const(&g, DT_FLOAT, 2, wd, 1, 0));
    tg_output(&g, y, "y");
    tg_reference(&g);
    CHECK(cleanup(&g, NULL) == ST_OK);
    Err e = {0};
    CHECK(pass_store_reduced(g.pg, DT_FLOAT16, NULL, NULL, &e) == ST_OK);
    void *out[8] = {0};
    CHECK(run(&g, out) == ST_OK);
    if (out[0]) {
        int at = -2;
        double scale = 0, dev = storage_deviation(g.pg, g.ref, out, &at, &scale);
        CHECK_MSG(dev > 0 && dev < 1e-2 && at == 0 && scale > 1, "deviation %g at %d", dev, at);
        CHECK(storage_deviation_verdict(g.pg, DT_FLOAT16, dev, at, scale, &e) == ST_OK);
        printf("  healthy: deviation %.2g of max|y| = %.3g\n", dev, scale);
        // A float32 output of zeros: no scale, not measured.
        float *zero = xcalloc(24 * 16, sizeof(float));
        void *z[1] = {zero};
        CHECK(storage_deviation(g.pg, z, out, &at, &scale) == 0 && at == -1);
        // One element infinite in half: infinitely far, refused with bfloat16's remedy.
        ((float *)out[0])[5] = INFINITY;
        dev = storage_deviation(g.pg, g.ref, out, &at, &scale);
        Err ve = {0};
        CHECK(isinf(dev) && at == 0 &&
              storage_deviation_verdict(g.pg, DT_BFLOAT16, dev, at, scale, &ve) == ST_UNSUPPORTED &&
              strstr(ve.msg, "'y'") && strstr(ve.msg, "without --half-storage") &&
              !strstr(ve.msg, "--precision bf16"));
        // The limit itself passes; just past it is refused.
        CHECK(storage_deviation_verdict(g.pg, DT_FLOAT16, STORAGE_DEVIATION_LIMIT, 0, 1, &e) ==
                  ST_OK &&
              storage_deviation_verdict(g.pg, DT_FLOAT16, nextafter(STORAGE_DEVIATION_LIMIT, 1.0),
                                        0, 1, &ve) == ST_UNSUPPORTED);
        free(zero);
    }
    free(out[0]);
    tg_free(&g);
}

// The range limits at their boundaries, on constants whose largest |value| (one negative, to
// count magnitudes) is just under, at and just over each: under STORAGE_F16_LOW is wide, at or
// over it is not; past STORAGE_F16_HIGH is wide, at it is not; all zeros is not (nothing to
// lose); a float16 constant under the low limit is the model's own type, not a storage loss. An
// activation (values given, not data) follows the same rule.
static void test_storage_range_limits(void) {
    TG g;
    tg_init(&g);
    double lo = STORAGE_F16_LOW, hi = STORAGE_F16_HIGH;
    const double maxes[] = {
        nextafterf((float)lo, 0),    lo, nextafterf((float)lo, 1), nextafterf((float)hi, 0), hi,
        nextafterf((float)hi, 2048), 0};
    const bool want[] = {true, false, false, false, false, true, false};
    int64_t d4[1] = {4};
    int ids[8];
    for (int c = 0; c < 7; c++) {
        float v[4] = {(float)-maxes[c], (float)maxes[c] / 2, (float)maxes[c] / 4,
                      (float)maxes[c] / 8};
        ids[c] = pb_const(&g.b, DT_FLOAT, 1, d4, v);
    }
    uint16_t hv[4];
    for (int i = 0; i < 4; i++)
        elem_set_f64(DT_FLOAT16, hv, i, 1e-6 * (i + 1));
    int half_const = pb_const(&g.b, DT_FLOAT16, 1, d4, hv);
    int act = pg_add_tensor(g.pg, "act", DT_FLOAT, 1, d4)->id;
    float av[4] = {1e-7f, -3e-6f, 2e-6f, 0};
    void **vals = xcalloc((size_t)g.pg->n_tensors + 1, sizeof(void *));
    vals[act] = av;
    bool *wide = xcalloc((size_t)g.pg->n_tensors + 1, 1);
    RangeStats rs;
    int n = storage_range_wide(g.pg, vals, hi, lo, wide, &rs);
    for (int c = 0; c < 7; c++)
        CHECK_MSG(wide[ids[c]] == want[c], "max|value| %.9g: wide %d, want %d", maxes[c],
                  wide[ids[c]], want[c]);
    CHECK(!wide[half_const] && wide[act]);
    CHECK_MSG(n == 3 && rs.overflow == 1 && rs.underflow == 2 && rs.smallest_tensor == act &&
                  rs.smallest == (double)-av[1] && rs.peak_tensor == ids[4] && rs.peak == hi,
              "%d wide: %d over, %d under, smallest %d (%g), peak %d (%g)", n, rs.overflow,
              rs.underflow, rs.smallest_tensor, rs.smallest, rs.peak_tensor, rs.peak);
    free(vals);
    free(wide);
    tg_free(&g);
}

static void test_store_reduced(void) {
    // Fixed data: on about 1 seed in 300 a token's 8 channels come out of the ReLU nearly equal,
    // and its LayerNorm (of values near 1e3) amplifies bfloat16's rounding past any sane bound.
    // The check is of the pass on a well-conditioned block, not of bfloat16 on an ill-conditioned
    // one; the suite's seed still drives every other test.
    uint64_t saved = rng_state;
    rng_state = 0x5eed5107ull;
    store_case(DT_FLOAT16);
    store_case(DT_BFLOAT16);
    rng_state = saved;
}

// Channels-last pairs (pass_channels_last) on a residual block: conv + bias + ReLU, conv + bias
// + the block's input + ReLU, then a depthwise conv (its weights already KRSC-ordered) and a
// global mean of the block's output. Every conv input and epilogue end gets an NHWC twin that
// each reader reads back through its own transpose; the outputs stay bit-identical.
static void channels_last_case(DType dt) {
    TG g;
    tg_init(&g);
    int64_t xd[4] = {2, 8, 6, 5}, wd[4] = {8, 8, 3, 3}, dwd[4] = {8, 1, 3, 3}, bd[4] = {1, 8, 1, 1};
    int x = tg_input(&g, DT_FLOAT, 4, xd, 1, 0);
    LinearParams lp = conv2d(1, 1), dw = conv2d(8, 1);
    int a1 = pb_ew1(&g.b, EW_RELU,
                    pb_ew2(&g.b, EW_ADD,
                           pb_conv(&g.b, &lp, x, tg_const(&g, DT_FLOAT, 4, wd, 0.3, 0), xd),
                           tg_const(&g, DT_FLOAT, 4, bd, 1, 0)));
    int c2 = pb_conv(&g.b, &lp, a1, tg_const(&g, DT_FLOAT, 4, wd, 0.3, 0), xd);
    int a2 = pb_ew1(
        &g.b, EW_RELU,
        pb_ew2(&g.b, EW_ADD, pb_ew2(&g.b, EW_ADD, c2, tg_const(&g, DT_FLOAT, 4, bd, 1, 0)), x));
    int y = pb_ew2(&g.b, EW_ADD, pb_conv(&g.b, &dw, a2, tg_const(&g, DT_FLOAT, 4, dwd, 0.3, 0), xd),
                   tg_const(&g, DT_FLOAT, 4, bd, 1, 0));
    tg_output(&g, y, "y");
    tg_output(&g, pb_reduce(&g.b, RED_MEAN, a2, 12, true, false), "pool");
    CleanupStats cst = {0};
    CHECK(cleanup(&g, &cst) == ST_OK);
    Err e = {0};
    if (dt != DT_FLOAT)
        CHECK(pass_store_reduced(g.pg, dt, NULL, NULL, &e) == ST_OK);
    tg_reference(&g);
    int layouts = count(g.pg, PRIM_LAYOUT), prims = g.pg->n_prims;
    NhwcStats st = {0};
    CHECK(pass_channels_last(g.pg, &st, &e) == ST_OK);
    CHECK(prim_graph_verify(g.pg, &e) == ST_OK);
    // x (conv 1 and the residual), a1 (conv 2), a2 (the depthwise conv and the mean); the
    // depthwise weights are the same bytes either way. Under half storage x is the CAST of the
    // float32 input, and the depthwise conv's half epilogue value (read by the CAST to the
    // float32 output) is paired too.
    printf("  %s: %d convs, %d tensors, %d readers, %d weights; %d -> %d primitives\n",
           dtype_name(dt), st.convs, st.tensors, st.readers, st.weights, prims, g.pg->n_prims);
    int half = dt != DT_FLOAT;
    CHECK(st.convs == 3 && st.tensors == 3 + half && st.readers == 5 + half && st.weights == 2);
    CHECK(count(g.pg, PRIM_LAYOUT) == layouts + st.tensors + st.readers + st.weights);
    // Each conv reads a transpose back of an NHWC tensor, and 3x3 dense weights a KRSC constant.
    for (int k = 0; k < g.pg->n_prims; k++) {
        const Prim *p = g.pg->prims[k];
        if (p->kind != PRIM_LINEAR)
            continue;
        const Prim *in = producer(g.pg, p->in[0]);
        CHECK(in && in->kind == PRIM_LAYOUT && in->lay.stages[0].kind == LS_TRANSPOSE &&
              in->lay.stages[0].perm[1] == 3);
        const Tensor *nhwc = g.pg->tensors[in->in[0]];
        CHECK(nhwc->dims[3] == 8 && nhwc->dims[1] == 6 && nhwc->dims[2] == 5);
        const Prim *w = producer(g.pg, p->in[1]);
        if (p->lin.group == 1)
            CHECK(w && w->kind == PRIM_LAYOUT && pg_is_const(g.pg, w->in[0]) &&
                  g.pg->tensors[w->in[0]]->dims[3] == 8 && g.pg->tensors[w->in[0]]->dims[1] == 3);
        else
            CHECK(pg_is_const(g.pg, p->in[1]));
    }
    CHECK(strcmp(g.pg->tensors[g.pg->outputs[0]]->name, "y") == 0);
    tg_compare(&g, -1);
    // The clean-up undoes it: the pairs compose to identities (which is why the compile driver
    // runs the pass after it).
    CHECK(cleanup(&g, &cst) == ST_OK);
    CHECK(count(g.pg, PRIM_LAYOUT) == layouts);
    tg_compare(&g, -1);
    tg_free(&g);
}

// A block with a downsampling branch: relu(conv(relu(conv(x) + b1)) + b2 + (conv1x1(x) + b3)).
// The merged residual program's two biases become one constant (the sum reassociated: float
// rounding), and the 1x1 branch's raw output is paired, to be read as the 3x3 call's z.
static void channels_last_downsample(void) {
    TG g;
    tg_init(&g);
    int64_t xd[4] = {1, 8, 6, 6}, wd[4] = {8, 8, 3, 3}, w1[4] = {8, 8, 1, 1}, bd[4] = {1, 8, 1, 1};
    int x = tg_input(&g, DT_FLOAT, 4, xd, 1, 0);
    LinearParams lp = conv2d(1, 1), one = conv2d(1, 0);
    int a1 = pb_ew1(&g.b, EW_RELU,
                    pb_ew2(&g.b, EW_ADD,
                           pb_conv(&g.b, &lp, x, tg_const(&g, DT_FLOAT, 4, wd, 0.3, 0), xd),
                           tg_const(&g, DT_FLOAT, 4, bd, 1, 0)));
    int main =
        pb_ew2(&g.b, EW_ADD, pb_conv(&g.b, &lp, a1, tg_const(&g, DT_FLOAT, 4, wd, 0.3, 0), xd),
               tg_const(&g, DT_FLOAT, 4, bd, 1, 0));
    int ds = pb_ew2(&g.b, EW_ADD, pb_conv(&g.b, &one, x, tg_const(&g, DT_FLOAT, 4, w1, 0.3, 0), xd),
                    tg_const(&g, DT_FLOAT, 4, bd, 1, 0));
    int a2 = pb_ew1(&g.b, EW_RELU, pb_ew2(&g.b, EW_ADD, main, ds));
    tg_output(&g, pb_reduce(&g.b, RED_MAX, a2, 12, true, false), "pool");
    CleanupStats cst = {0};
    CHECK(cleanup(&g, &cst) == ST_OK);
    tg_reference(&g);
    Err e = {0};
    NhwcStats st = {0};
    CHECK(pass_channels_last(g.pg, &st, &e) == ST_OK);
    CHECK(prim_graph_verify(g.pg, &e) == ST_OK);
    printf("  downsample: %d convs, %d tensors, %d readers, %d weights, %d biases combined\n",
           st.convs, st.tensors, st.readers, st.weights, st.biases_combined);
    // x, a1, a2 and the 1x1 conv's raw output; two 3x3 weights.
    CHECK(st.convs == 3 && st.biases_combined == 1 && st.tensors == 4 && st.weights == 2);
    // The residual program: one per-channel constant among its inputs.
    for (int k = 0; k < g.pg->n_prims; k++) {
        const Prim *p = g.pg->prims[k];
        int consts = 0;
        for (int j = 0; j < p->n_in; j++)
            consts += pg_is_const(g.pg, p->in[j]);
        if (p->kind == PRIM_ELEMWISE && p->n_in >= 3)
            CHECK_MSG(consts == 1, "residual program with %d constants", consts);
    }
    tg_compare(&g, 1e-5);
    tg_free(&g);
}

static void test_channels_last(void) {
    channels_last_case(DT_FLOAT);
    channels_last_case(DT_FLOAT16);
    channels_last_downsample();
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (repeat with: unit_passes %llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    rng_state = seed * 2654435761u + 1;
    RUN(test_fold_weight_subgraphs);
    RUN(test_fold_limits);
    RUN(test_bn_fold);
    RUN(test_bn_fold_grouped);
    RUN(test_bn_fold_large_values);
    RUN(test_bn_no_fold);
    RUN(test_conv_live_taps);
    RUN(test_conv_taps_2d);
    RUN(test_conv_taps_1d_3d);
    RUN(test_conv_taps_cleanup);
    RUN(test_identity_layouts);
    RUN(test_identity_stages);
    RUN(test_compose_transposes_reshapes);
    RUN(test_compose_general);
    RUN(test_compose_pad_values);
    RUN(test_compose_tables);
    RUN(test_merge_chain);
    RUN(test_merge_tree_order);
    RUN(test_merge_long_chain);
    RUN(test_merge_exact_narrow_types);
    RUN(test_merge_limits);
    RUN(test_scalar_constants);
    RUN(test_hoist_scales);
    RUN(test_hoist_scales_cancel);
    RUN(test_cse);
    RUN(test_dead_code);
    RUN(test_cleanup_block);
    RUN(test_store_reduced);
    RUN(test_storage_peak);
    RUN(test_storage_range);
    RUN(test_storage_underflow);
    RUN(test_storage_deviation);
    RUN(test_storage_range_limits);
    RUN(test_channels_last);
    return CHECK_DONE();
}
