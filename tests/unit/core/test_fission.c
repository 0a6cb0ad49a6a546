// Unit tests of operator fission: the attention rewrite (division moved after the MatMul, same
// values), softmax stability for huge logits, the driver's opaque fallback, the 1x1
// convolution over upsampled maps moved before their resizes, and unrolled LSTM steps sharing
// their kernels.
#include "../check.h"
#include "prim/prim_build.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "interp/interp.h"
#include "interp/prim_interp.h"
#include "candidates/candidates.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Graph *load_folded(MB *b) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    Err e = {0};
    if (onnx_load_memory(buf, len, "fission.onnx", NULL, NULL, &g, &e) == ST_OK &&
        graph_infer_and_fold(g, NULL, &e) != ST_OK) {
        graph_free(g);
        g = NULL;
    }
    if (!g)
        printf("  load: %s\n", e.msg);
    free(buf);
    return g;
}

static uint64_t seed = 20261122;
static float rnd(void) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((seed >> 40) & 0xffffff) / 16777216.0f * 2 - 1;
}

// Q [1,2,4,8] x K^T [1,2,8,4] -> softmax -> x V [1,2,4,8]
static MB *attention_model(float logit_scale) {
    const int64_t qd[] = {1, 2, 4, 8};
    MB *b = mb_new(17);
    mb_input(b, "q", 1, 4, qd);
    mb_input(b, "k", 1, 4, qd);
    mb_input(b, "v", 1, 4, qd);
    int64_t perm[] = {0, 1, 3, 2};
    mb_node(b, "Transpose", "kt", "k", "kT", mb_attr_ints(b, "perm", 4, perm), NULL);
    mb_node(b, "MatMul", "scores", "q,kT", "s", NULL);
    float scale = logit_scale;
    const int64_t one[] = {1};
    mb_init(b, mb_raw(b, "scale", 1, 1, one, &scale, 4));
    mb_node(b, "Mul", "scaled", "s,scale", "s2", NULL);
    mb_node(b, "Softmax", "softmax", "s2", "p", mb_attr_i(b, "axis", -1), NULL);
    mb_node(b, "MatMul", "context", "p,v", "y", NULL);
    mb_output(b, "y");
    return b;
}

static void run_both(Graph *g, bool rewrite, float *ref, float *got, int *rewrites, int *div_pos,
                     int *mm_pos) {
    float q[64], k[64], v[64];
    for (int i = 0; i < 64; i++) {
        q[i] = rnd();
        k[i] = rnd();
        v[i] = rnd();
    }
    const void *ins[3] = {q, k, v};
    void *out[1] = {NULL};
    Err e = {0};
    CHECK(interp_run(g, ins, out, NULL, &e) == ST_OK);
    if (out[0])
        memcpy(ref, out[0], sizeof(float) * 64);
    free(out[0]);
    PrimGraph *pg = NULL;
    FissionOptions fo = {.attention_rewrite = rewrite};
    FissionStats st = {0};
    CHECK_MSG(fission_run(g, &fo, &pg, &st, &e) == ST_OK, "%s", e.msg);
    if (!pg)
        return;
    *rewrites = st.attention_rewrites;
    *div_pos = *mm_pos = -1;
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        if (p->kind == PRIM_ELEMWISE && p->ew.n == 1 && p->ew.code[0].op == EW_DIV)
            *div_pos = i;
        if (p->kind == PRIM_LINEAR && strcmp(p->origin, "context") == 0)
            *mm_pos = i;
    }
    CHECK(prim_interp_run(pg, ins, out, &e) == ST_OK);
    if (out[0])
        memcpy(got, out[0], sizeof(float) * 64);
    free(out[0]);
    prim_graph_free(pg);
}

static void attention_rewrite(void) {
    MB *b = attention_model(0.35f);
    Graph *g = load_folded(b);
    CHECK(g != NULL);
    if (g) {
        float ref[64], plain[64], moved[64];
        int n1 = -1, n2 = -1, d1, m1, d2, m2;
        seed = 7;
        run_both(g, false, ref, plain, &n1, &d1, &m1);
        seed = 7;
        run_both(g, true, ref, moved, &n2, &d2, &m2);
        CHECK(n1 == 0 && n2 == 1);
        CHECK_MSG(d1 < m1 && d2 > m2, "division at %d/%d, matmul at %d/%d", d1, d2, m1, m2);
        double worst = 0;
        for (int i = 0; i < 64; i++) {
            worst = fmax(worst, fabs(plain[i] - ref[i]) / (1e-6 + 1e-5 * fabs(ref[i])));
            worst = fmax(worst, fabs(moved[i] - ref[i]) / (1e-6 + 1e-5 * fabs(ref[i])));
        }
        CHECK_MSG(worst <= 1, "error %.3g of the tolerance", worst);
    }
    graph_free(g);
    mb_free(b);
}

// Logits around 1e4: without the max subtraction exp overflows to inf and the result is NaN.
static void softmax_huge_logits(void) {
    MB *b = attention_model(2e4f);
    Graph *g = load_folded(b);
    if (g) {
        float ref[64], got[64];
        int n, d, m;
        seed = 11;
        run_both(g, true, ref, got, &n, &d, &m);
        bool finite = true;
        double worst = 0;
        for (int i = 0; i < 64; i++) {
            finite = finite && isfinite(got[i]) && isfinite(ref[i]);
            worst = fmax(worst, fabs(got[i] - ref[i]) / (1e-6 + 1e-5 * fabs(ref[i])));
        }
        CHECK(finite);
        CHECK_MSG(worst <= 1, "error %.3g of the tolerance", worst);
    }
    graph_free(g);
    mb_free(b);
}

// Runs a one-input model through both engines on the given input; returns the worst error in
// units of the tolerance (rtol 1e-5, atol 1e-6), or -1 on failure.
static double engines_agree(MB *b, const float *x, int n_out) {
    Graph *g = load_folded(b);
    if (!g)
        return -1;
    PrimGraph *pg = NULL;
    Err e = {0};
    double worst = -1;
    const void *ins[1] = {x};
    void *a[1] = {NULL}, *r[1] = {NULL};
    if (fission_run(g, NULL, &pg, NULL, &e) == ST_OK && prim_interp_run(pg, ins, a, &e) == ST_OK &&
        interp_run(g, ins, r, NULL, &e) == ST_OK) {
        worst = 0;
        const float *fa = a[0], *fr = r[0];
        for (int i = 0; i < n_out; i++) {
            if (!isfinite(fa[i]) || !isfinite(fr[i]))
                worst = INFINITY;
            worst = fmax(worst, fabs(fa[i] - fr[i]) / (1e-6 + 1e-5 * fabs(fr[i])));
        }
    } else {
        printf("  %s\n", e.msg);
    }
    free(a[0]);
    free(r[0]);
    prim_graph_free(pg);
    graph_free(g);
    return worst;
}

// LayerNorm of a constant row (variance 0: the result is the bias) and of 1e4 + small noise,
// where a float32 mean would lose the noise.
static void layernorm_hard_rows(void) {
    const int64_t xd[] = {2, 16}, cd[] = {16};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 2, xd);
    float scale[16], bias[16], x[32];
    for (int i = 0; i < 16; i++) {
        scale[i] = 1 + 0.1f * rnd();
        bias[i] = 0.1f * rnd();
    }
    mb_init(b, mb_raw(b, "scale", 1, 1, cd, scale, sizeof scale));
    mb_init(b, mb_raw(b, "bias", 1, 1, cd, bias, sizeof bias));
    mb_node(b, "LayerNormalization", "ln", "x,scale,bias", "y", mb_attr_i(b, "axis", -1), NULL);
    mb_output(b, "y");
    for (int i = 0; i < 16; i++) {
        x[i] = 3.25f;                  // constant row
        x[16 + i] = 1e4f + 0.01f * rnd(); // large mean, small spread
    }
    double worst = engines_agree(b, x, 32);
    CHECK_MSG(worst >= 0 && worst <= 1, "error %.3g of the tolerance", worst);
    mb_free(b);
}

// InstanceNorm over 8x8 planes whose mean is 1e4.
static void instancenorm_large_mean(void) {
    const int64_t xd[] = {1, 3, 8, 8}, cd[] = {3};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 4, xd);
    float scale[3] = {1.5f, 0.5f, -1}, bias[3] = {0.25f, 0, -0.5f}, x[192];
    mb_init(b, mb_raw(b, "scale", 1, 1, cd, scale, sizeof scale));
    mb_init(b, mb_raw(b, "bias", 1, 1, cd, bias, sizeof bias));
    mb_node(b, "InstanceNormalization", "in", "x,scale,bias", "y", NULL);
    mb_output(b, "y");
    for (int i = 0; i < 192; i++)
        x[i] = 1e4f + 0.05f * rnd();
    double worst = engines_agree(b, x, 192);
    CHECK_MSG(worst >= 0 && worst <= 1, "error %.3g of the tolerance", worst);
    mb_free(b);
}

// A node without a rule (TopK) becomes one OPAQUE primitive running the reference op.
static void opaque_fallback(void) {
    const int64_t xd[] = {2, 6}, one[] = {1};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 2, xd);
    int64_t k = 3;
    mb_init(b, mb_raw(b, "k", 7, 1, one, &k, 8));
    mb_node(b, "TopK", "topk", "x,k", "vals,idx", NULL);
    mb_node(b, "Relu", "relu", "vals", "y", NULL);
    mb_output(b, "y");
    mb_output(b, "idx");
    Graph *g = load_folded(b);
    if (g) {
        PrimGraph *pg = NULL;
        FissionStats st = {0};
        Err e = {0};
        CHECK_MSG(fission_run(g, NULL, &pg, &st, &e) == ST_OK, "%s", e.msg);
        CHECK(st.opaque == 1 && st.ruled == 1);
        int counts[PRIM_KIND_COUNT];
        if (pg) {
            prim_graph_counts(pg, counts);
            CHECK(counts[PRIM_OPAQUE] == 1 && counts[PRIM_ELEMWISE] >= 1);
            float x[12];
            for (int i = 0; i < 12; i++)
                x[i] = rnd();
            const void *ins[1] = {x};
            void *a[2] = {NULL, NULL}, *r[2] = {NULL, NULL};
            CHECK(prim_interp_run(pg, ins, a, &e) == ST_OK);
            CHECK(interp_run(g, ins, r, NULL, &e) == ST_OK);
            CHECK(a[0] && r[0] && memcmp(a[0], r[0], 6 * sizeof(float)) == 0);
            CHECK(a[1] && r[1] && memcmp(a[1], r[1], 6 * sizeof(int64_t)) == 0);
            for (int i = 0; i < 2; i++) {
                free(a[i]);
                free(r[i]);
            }
        }
        prim_graph_free(pg);
    }
    graph_free(g);
    mb_free(b);
}

// prim_interp_run_rounded: every float operand of a LINEAR primitive rounded to the given
// mantissa bits (to nearest, ties to even), nothing else: the product of [1 + 2^-11, 1.5, 3]
// (a tie at 10 bits, two exact values) with [1, 1 + 3 * 2^-11, 0.25] (a tie rounding up to
// even at 10 bits) plus 2^-11 added after it (an elementwise primitive: not rounded).
static void rounded_linear_operands(void) {
    PrimGraph *pg = prim_graph_create(graph_create("rounded"));
    PB b = {pg, "rounded"};
    const int64_t xd[2] = {1, 3}, wd[2] = {3, 1};
    int x = -1, w = -1;
    for (int i = 0; i < 2; i++) {
        Tensor *t = pg_add_tensor(pg, i ? "w" : "x", DT_FLOAT, 2, i ? wd : xd);
        t->kind = TK_INPUT;
        pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
        pg->inputs[pg->n_inputs++] = t->id;
        *(i ? &w : &x) = t->id;
    }
    int y = pb_ew2i(&b, EW_ADD, pb_matmul(&b, x, w), ldexp(1.0, -11));
    pg->outputs = xrealloc(pg->outputs, sizeof(int));
    pg->outputs[pg->n_outputs++] = y;
    const float xv[3] = {1.0f + 0x1p-11f, 1.5f, 3.0f}, wv[3] = {1.0f, 1.0f + 3 * 0x1p-11f, 0.25f};
    const void *ins[2] = {xv, wv};
    Err e = {0};
    CHECK_MSG(prim_graph_verify(pg, &e) == ST_OK, "%s", e.msg);
    void *out[1] = {NULL};
    // exact; 10 bits: 1 * 1 + 1.5 * (1 + 2^-9) + 0.75; 7 bits: 1 + 1.5 + 0.75 (1 + 3 * 2^-11
    // is below the tie at 7 bits)
    const double want[3] = {(1 + 0x1p-11) + 1.5 * (1 + 3 * 0x1p-11) + 0.75 + 0x1p-11,
                            1 + 1.5 * (1 + 0x1p-9) + 0.75 + 0x1p-11, 1 + 1.5 + 0.75 + 0x1p-11};
    for (int u = 0; u < 3; u++) {
        int rc = u == 0 ? prim_interp_run(pg, ins, out, &e)
                        : prim_interp_run_rounded(pg, ins, out, u == 1 ? 10 : 7, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        if (rc == ST_OK)
            CHECK_MSG(fabs(((float *)out[0])[0] - want[u]) <= 1e-6 * want[u], "%s: %.9g, want %.9g",
                      u == 0   ? "exact"
                      : u == 1 ? "10 bits"
                               : "7 bits",
                      ((float *)out[0])[0], want[u]);
        free(out[0]);
        out[0] = NULL;
    }
    // The inputs themselves are left as they were.
    CHECK(xv[0] == 1.0f + 0x1p-11f && wv[1] == 1.0f + 3 * 0x1p-11f);
    const Graph *src = pg->src;
    prim_graph_free(pg);
    graph_free((Graph *)src);
}

// A 1x1 convolution over a concat of upsampled maps runs, for each upsampled part, at the
// source's resolution before the resize (rules_linear.c): a at full resolution and d
// (downsampled) stay one convolution over their own concat; b (linear), c (nearest, by sizes)
// and e (cubic) move before their resizes. `shared` makes the concat a graph output too, which
// keeps the plain form.
static MB *upsampled_concat_model(bool shared) {
    MB *b = mb_new(13);
    const int64_t da[] = {1, 3, 8, 8}, db[] = {1, 2, 4, 4}, dc[] = {1, 4, 2, 3},
                  dd[] = {1, 2, 16, 16}, de[] = {1, 1, 3, 3};
    mb_input(b, "a", 1, 4, da);
    mb_input(b, "b", 1, 4, db);
    mb_input(b, "c", 1, 4, dc);
    mb_input(b, "d", 1, 4, dd);
    mb_input(b, "e", 1, 4, de);
    const int64_t four[] = {4}, one[] = {1}, five[] = {5};
    float up2[] = {1, 1, 2, 2}, down2[] = {1, 1, 0.5f, 0.5f};
    int64_t size_c[] = {1, 4, 8, 8}, size_e[] = {1, 1, 8, 8};
    float empty_roi = 0;
    const int64_t zero[] = {0};
    mb_init(b, mb_raw(b, "roi", 1, 1, zero, &empty_roi, 0));
    mb_init(b, mb_raw(b, "up2", 1, 1, four, up2, sizeof up2));
    mb_init(b, mb_raw(b, "down2", 1, 1, four, down2, sizeof down2));
    mb_init(b, mb_raw(b, "size_c", 7, 1, four, size_c, sizeof size_c));
    mb_init(b, mb_raw(b, "size_e", 7, 1, four, size_e, sizeof size_e));
    mb_node(b, "Resize", "rb", "b,roi,up2", "rb", mb_attr_s(b, "mode", "linear"), NULL);
    mb_node(b, "Resize", "rc", "c,roi,,size_c", "rc", mb_attr_s(b, "mode", "nearest"), NULL);
    mb_node(b, "Resize", "rd", "d,roi,down2", "rd", mb_attr_s(b, "mode", "linear"), NULL);
    mb_node(b, "Resize", "re", "e,roi,,size_e", "re", mb_attr_s(b, "mode", "cubic"),
            mb_attr_s(b, "coordinate_transformation_mode", "align_corners"), NULL);
    mb_node(b, "Concat", "cat", "a,rb,rc,rd,re", "x", mb_attr_i(b, "axis", 1), NULL);
    float w[5 * 12], bias[5];
    for (int i = 0; i < 5 * 12; i++)
        w[i] = rnd();
    for (int i = 0; i < 5; i++)
        bias[i] = rnd();
    const int64_t wd[] = {5, 12, 1, 1};
    mb_init(b, mb_raw(b, "w", 1, 4, wd, w, sizeof w));
    mb_init(b, mb_raw(b, "bias", 1, 1, five, bias, sizeof bias));
    mb_node(b, "Conv", "fuse", "x,w,bias", "z",
            mb_attr_ints(b, "kernel_shape", 2, (const int64_t[]){1, 1}), NULL);
    mb_node(b, "Relu", "relu", "z", "y", NULL);
    mb_output(b, "y");
    if (shared)
        mb_output(b, "x");
    (void)one;
    return b;
}

static void conv_over_upsampled_concat(void) {
    for (int shared = 0; shared < 2; shared++) {
        seed = 31 + (uint64_t)shared;
        MB *b = upsampled_concat_model(shared);
        Graph *g = load_folded(b);
        CHECK(g != NULL);
        if (!g) {
            mb_free(b);
            continue;
        }
        enum { NA = 192, NB = 32, NC = 24, ND = 512, NE = 9, NY = 320, NX = 768 };
        static float a[NA], bb[NB], c[NC], d[ND], e_[NE];
        float *bufs[] = {a, bb, c, d, e_};
        int lens[] = {NA, NB, NC, ND, NE};
        for (int k = 0; k < 5; k++)
            for (int i = 0; i < lens[k]; i++)
                bufs[k][i] = rnd();
        const void *ins[5] = {a, bb, c, d, e_};
        void *ref[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
        Err e = {0};
        CHECK_MSG(interp_run(g, ins, ref, NULL, &e) == ST_OK, "%s", e.msg);
        PrimGraph *pg = NULL;
        CHECK_MSG(fission_run(g, NULL, &pg, NULL, &e) == ST_OK, "%s", e.msg);
        // The clean-up drops the plain form's concat and resizes, which nothing reads now.
        CHECK_MSG(!pg || fission_cleanup(pg, NULL, &e) == ST_OK, "%s", e.msg);
        if (pg && ref[0]) {
            // The convolutions and what they read: split, one over [a, rd] (5 channels at 8x8)
            // and one per moved part at its source's resolution; shared, one over all 12.
            int n_conv = 0, low_res = 0, concats = 0;
            for (int i = 0; i < pg->n_prims; i++) {
                const Prim *p = pg->prims[i];
                if (p->kind == PRIM_LAYOUT && p->lay.concat)
                    concats++;
                if (p->kind != PRIM_LINEAR)
                    continue;
                n_conv++;
                const Tensor *X = pg->tensors[p->in[0]];
                low_res += X->dims[2] * X->dims[3] < 64;
            }
            if (shared)
                CHECK_MSG(n_conv == 1 && low_res == 0 && concats == 1, "%d convs, %d low, %d cat",
                          n_conv, low_res, concats);
            else
                CHECK_MSG(n_conv == 4 && low_res == 3 && concats == 1, "%d convs, %d low, %d cat",
                          n_conv, low_res, concats);
            CHECK_MSG(prim_interp_run(pg, ins, got, &e) == ST_OK, "%s", e.msg);
            for (int k = 0; k <= shared; k++) {
                if (!got[k])
                    continue;
                double worst = 0;
                const float *r = ref[k], *o = got[k];
                for (int i = 0; i < (k ? NX : NY); i++)
                    worst = fmax(worst, fabs(o[i] - r[i]) / (1e-5 + 1e-5 * fabs(r[i])));
                CHECK_MSG(worst <= 1, "output %d: error %.3g of the tolerance", k, worst);
            }
        }
        for (int k = 0; k < 2; k++) {
            free(ref[k]);
            free(got[k]);
        }
        prim_graph_free(pg);
        graph_free(g);
        mb_free(b);
    }
}

// A one-layer LSTM over T steps (batch 1, input 8, hidden 32: steps picked by a mask) with
// random weights and bias, its Y the output.
static MB *lstm_model(int64_t T) {
    enum { I = 8, H = 32 };
    const int64_t xd[] = {T, 1, I}, wd[] = {1, 4 * H, I}, rd[] = {1, 4 * H, H}, bd[] = {1, 8 * H};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 3, xd);
    float *w = malloc(sizeof(float) * 4 * H * H);
    for (int i = 0; i < 4 * H * H; i++)
        w[i] = rnd() * 0.3f;
    mb_init(b, mb_raw(b, "w", 1, 3, wd, w, sizeof(float) * 4 * H * I));
    mb_init(b, mb_raw(b, "r", 1, 3, rd, w, sizeof(float) * 4 * H * H));
    mb_init(b, mb_raw(b, "bias", 1, 2, bd, w + 7, sizeof(float) * 8 * H));
    free(w);
    mb_node(b, "LSTM", "lstm", "x,w,r,bias", "y", mb_attr_i(b, "hidden_size", H), NULL);
    mb_output(b, "y");
    return b;
}

// The distinct kernel signatures of a model after fission and clean-up, or -1.
static int signatures(MB *b) {
    Graph *g = load_folded(b);
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    Err e = {0};
    CandRules rules = cand_rules_default();
    int n = -1;
    if (g && fission_run(g, NULL, &pg, NULL, &e) == ST_OK && fission_cleanup(pg, NULL, &e) == ST_OK &&
        cand_enumerate(pg, &rules, 0, &cs, &e) == ST_OK)
        n = cs->stats.signatures;
    else
        printf("  %s\n", e.msg);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    return n;
}

// Every step of an unrolled LSTM runs the same kernels: the kernels to tune grow by at most two
// per step, where a slice per step would add dozens, and the steps still compute the reference's
// values.
static void lstm_steps_share_kernels(void) {
    MB *b16 = lstm_model(16), *b64 = lstm_model(64), *b128 = lstm_model(128);
    int s16 = signatures(b16), s64 = signatures(b64), s128 = signatures(b128);
    mb_free(b128);
    printf("  distinct signatures: %d at T = 16, %d at T = 64, %d at T = 128\n", s16, s64, s128);
    // A slice per step adds dozens per step; the blocks add a few per 16 steps, and the output's
    // concat tree (32 steps a concat, for kernels' bounded inputs) about one and a half per step
    // through the segment cuts it moves (517, 563, 695 when written).
    CHECK_MSG(s16 > 0 && s64 >= s16 && s64 - s16 <= 2 * 48 && s128 - s16 <= 2 * 112,
              "distinct signatures: %d at T = 16, %d at T = 64, %d at T = 128", s16, s64, s128);
    float x[64 * 8];
    for (int i = 0; i < 64 * 8; i++)
        x[i] = rnd();
    double worst = engines_agree(b64, x, 64 * 32);
    CHECK_MSG(worst >= 0 && worst <= 1, "engines differ: %g tolerances", worst);
    mb_free(b16);
    mb_free(b64);
}

int main(void) {
    RUN(attention_rewrite);
    RUN(softmax_huge_logits);
    RUN(layernorm_hard_rows);
    RUN(instancenorm_large_mean);
    RUN(opaque_fallback);
    RUN(rounded_linear_operands);
    RUN(conv_over_upsampled_concat);
    RUN(lstm_steps_share_kernels);
    return CHECK_DONE();
}
