// The C target's pointwise and reduction emitters (src/backend/cpu/cgen.h) against the primitive
// interpreter: primitive graphs built with the fission builders on random shapes (odd sizes,
// primes, 1), every candidate the emitters accept, every config they propose, all compiled in a
// few translation units, run on random inputs and compared with prim_eval's values of the same
// tensors. Tolerance |got-ref| <= 1e-4*|ref| + 1e-4*max|ref| for floats (NaN matches NaN),
// exact for integers and bool.
#include "candidates/candidates.h"
#include "prim/prim_build.h"
#include "passes/passes.h"
#include "interp/prim_interp.h"
#include "backend/cpu/cbuild.h"
#include "backend/cpu/cgen.h"
#include "backend/cpu/loopnest.h"
#include "../check.h"
#include "../pointwise_graphs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- graphs only the C target's test builds ----

// Float32 sines and cosines past the prelude's common path (|x| > 65536, infinities, NaN) among ordinary
// ones, in a tensor large enough for the parallel loop and in a small one: the kernels take the
// vectorisable path and must redo the whole output with libm's sinf where the flag fired (a
// missing redo leaves the polynomial's value for |x| = 1e9, far off). Plus a kernel whose sines
// all stay in range.
static void build_sin_big(const char *name, int64_t rows, int64_t cols) {
    G *g = g_new(name);
    int64_t d[2] = {rows, cols};
    int x = g_in(g, DT_FLOAT, 2, d);
    float *off = xcalloc((size_t)(rows * cols), sizeof(float));
    static const float big[] = {1e9f, -70000.0f, 65536.5f, 3.0e38f, INFINITY, NAN, 123456.7f};
    for (int64_t i = 0; i < rows * cols; i += 97)
        off[i] = big[(i / 97) % (int64_t)ORCH_COUNT(big)];
    int o = pb_const(&g->b, DT_FLOAT, 2, d, off);
    free(off);
    int h = pb_ew2(&g->b, EW_ADD, x, o);
    g_out(g, pb_ew2(&g->b, EW_MUL, pb_ew1(&g->b, EW_SIN, h), pb_ew1(&g->b, EW_SIGMOID, x)));
    g_out(g, pb_ew1(&g->b, EW_SIN, pb_ew2i(&g->b, EW_MUL, x, 100.0)));
    g_out(g, pb_ew2(&g->b, EW_ADD, pb_ew1(&g->b, EW_COS, h), pb_ew1(&g->b, EW_COS, x)));
}

// Few reduced elements at the end of the shape (a pooling window, a tiny softmax): the kept axis
// before them is vectorised instead (emit_reduce.c's space_of), incl. keepdims, argmax over the
// window, a window read through a prologue, and a fused softmax over 4 columns of 40 rows.
static void build_window_reductions(const char *name) {
    G *g = g_new(name);
    int64_t d[5] = {2, odd_dim(), 19, 3, 3};
    int x = g_in(g, DT_FLOAT, 5, d);
    g_out(g, pb_reduce(&g->b, RED_MAX, x, 8 | 16, false, false));
    g_out(g, pb_reduce(&g->b, RED_MEAN, pb_ew1(&g->b, EW_EXP, x), 8 | 16, true, false));
    g_out(g, pb_reduce(&g->b, RED_ARGMAX, pb_ew1(&g->b, EW_FLOOR, x), 16, false, true));
    g_out(g, pb_ew2i(&g->b, EW_ADD, pb_reduce(&g->b, RED_MIN, x, 16, true, false), 1.0));
    int64_t ds[3] = {3, 40, 4};
    int y = g_in(g, DT_FLOAT, 3, ds);
    int m = pb_reduce(&g->b, RED_MAX, y, 4, true, false);
    int e = pb_ew1(&g->b, EW_EXP, pb_ew2(&g->b, EW_SUB, y, m));
    g_out(g, pb_ew2(&g->b, EW_DIV, e, pb_reduce(&g->b, RED_SUM, e, 4, true, false)));
}

// Pooling windows over a padded input, as fission builds MaxPool/AveragePool (pad table, a
// gather of each window's rows and columns, transpose, reduce): random kernel, stride, dilation
// and asymmetric pads, rows from 1 pixel to 65, so the reduce emitter's interior split (edges
// with clamps, an interior without; rows from 16 output columns) meets empty, partial and whole
// interiors on both sides.
static void build_pool_windows(const char *name) {
    G *g = g_new(name);
    for (int it = 0; it < 8; it++) {
        int64_t H, W, kh, kw, sh, sw, dh, dw, pt, pb, pl, pr, OH, OW;
        do {
            // Wide rows (the emitter vectorises along output columns from 16 of them on), and
            // a narrow one now and then.
            H = 1 + (int64_t)(rnd() % 12);
            W = it == 7 ? 1 + (int64_t)(rnd() % 8) : 16 + (int64_t)(rnd() % 50);
            kh = 1 + (int64_t)(rnd() % 4);
            kw = 1 + (int64_t)(rnd() % 4);
            sh = 1 + (int64_t)(rnd() % 3);
            sw = 1 + (int64_t)(rnd() % (it < 4 ? 1 : 3));
            dh = 1 + (int64_t)(rnd() % 2);
            dw = 1 + (int64_t)(rnd() % 2);
            pt = (int64_t)(rnd() % 3);
            pb = (int64_t)(rnd() % 3);
            pl = (int64_t)(rnd() % 3);
            pr = (int64_t)(rnd() % 3);
            OH = (H + pt + pb - dh * (kh - 1) - 1) / sh + 1;
            OW = (W + pl + pr - dw * (kw - 1) - 1) / sw + 1;
        } while (H + pt + pb - dh * (kh - 1) - 1 < 0 || W + pl + pr - dw * (kw - 1) - 1 < 0);
        int64_t d[4] = {1 + (int64_t)(rnd() % 2), odd_dim(), H, W};
        int x = g_in(g, DT_FLOAT, 4, d);
        bool max = it % 2 == 0;
        int64_t Hp = H + pt + pb, Wp = W + pl + pr;
        int64_t *th = xmalloc(sizeof(int64_t) * (size_t)Hp),
                *tw = xmalloc(sizeof(int64_t) * (size_t)Wp);
        for (int64_t i = 0; i < Hp; i++)
            th[i] = i - pt >= 0 && i - pt < H ? i - pt : -1;
        for (int64_t i = 0; i < Wp; i++)
            tw[i] = i - pl >= 0 && i - pl < W ? i - pl : -1;
        int64_t pd[4] = {d[0], d[1], Hp, Wp};
        int64_t *tables[4] = {NULL, NULL, th, tw};
        int padded = pb_table(&g->b, x, pd, tables, max ? -INFINITY : 0.0);
        int64_t *ih = xmalloc(sizeof(int64_t) * (size_t)(OH * kh)),
                *iw = xmalloc(sizeof(int64_t) * (size_t)(OW * kw));
        for (int64_t o = 0; o < OH; o++)
            for (int64_t k = 0; k < kh; k++)
                ih[o * kh + k] = o * sh + k * dh;
        for (int64_t o = 0; o < OW; o++)
            for (int64_t k = 0; k < kw; k++)
                iw[o * kw + k] = o * sw + k * dw;
        int64_t hd[2] = {OH, kh}, wd[2] = {OW, kw};
        int rows = pb_gather(&g->b, padded, 2, 2, hd, ih); // [N, C, OH, kh, Wp]
        int win = pb_gather(&g->b, rows, 4, 2, wd, iw);    // [N, C, OH, kh, OW, kw]
        const int perm[6] = {0, 1, 2, 4, 3, 5};
        int t = pb_transpose(&g->b, win, perm); // [N, C, OH, OW, kh, kw]
        g_out(g, pb_reduce(&g->b, max ? RED_MAX : RED_SUM, t, 16 | 32, false, false));
        free(th);
        free(tw);
        free(ih);
        free(iw);
    }
    // One layout per window, as fission's clean-up leaves it, so {layout, reduce} is a candidate.
    CleanupStats st = {0};
    Err e = {0};
    CHECK_MSG(pass_compose_layouts(g->pg, &st, &e) == ST_OK, "%s", e.msg);
}

// ---- kernels ----

typedef struct Kernel {
    int graph, cand, tu;
    KernelConfig cfg;
    char fn[48];
} Kernel;

static int run_all(void) {
    HwInfo hw = {.cores = 2, .simd_bytes = 32, .l1d = 32768, .l2 = 1 << 20, .line = 64};
    snprintf(hw.target, sizeof hw.target, "cpu");
    enum { MAX_TU = 64, PER_TU = 60 };
    StrBuf tu[MAX_TU];
    int n_tu = 0, in_tu = 0;
    Kernel *ks = NULL;
    int nk = 0, cap = 0;
    int rejected = 0, emit_fail = 0;
    for (int gi = 0; gi < n_graphs; gi++) {
        G *g = &graphs[gi];
        Err e = {0};
        int rc = prim_graph_verify(g->pg, &e);
        if (rc == ST_OK)
            rc = compute_values(g, &e);
        CandRules rules = cand_rules_default();
        rules.max_prims = 4;
        if (rc == ST_OK)
            rc = cand_enumerate(g->pg, &rules, 0, &g->cs, &e);
        if (rc) {
            printf("  %s: %s\n", g->name, e.msg);
            g->failures++;
            continue;
        }
        g->built = true;
        for (int ci = 0; ci < g->cs->n; ci++) {
            const Candidate *c = &g->cs->c[ci];
            if (!cgen_pw_supports(g->pg, c)) {
                if (getenv("CGEN_VERBOSE")) {
                    printf("  %s: refused candidate %d:", g->name, ci);
                    for (int k = 0; k < c->n_prims; k++)
                        printf(" %s", prim_kind_name(g->pg->prims[c->prims[k]]->kind));
                    KernelConfig kc = {.cls = CCLS_REDUCE};
                    StrBuf sb;
                    sb_init(&sb);
                    Err pe = {0};
                    cgen_pw_emit(g->pg, c, &kc, "probe", &sb, &pe);
                    printf(" (%s)\n", pe.msg);
                    sb_free(&sb);
                }
                rejected++;
                continue;
            }
            KernelConfig cfg[8];
            int n = cgen_pw_configs(g->pg, c, &hw, cfg, 8);
            if (getenv("CGEN_VERBOSE") && cfg[0].cls == CCLS_REDUCE) {
                KernelConfig kc;
                cgen_red_config_pack(&(CRedConfig){.fused = true, .par = true}, &kc);
                StrBuf sb;
                sb_init(&sb);
                Err pe = {0};
                cgen_pw_emit(g->pg, c, &kc, "probe", &sb, &pe);
                printf("  %s: candidate %d: %d configs, best %s; fused: %s\n", g->name, ci, n,
                       cfg[0].desc, pe.code ? pe.msg : "ok");
                sb_free(&sb);
            }
            if (n < 1) {
                printf("  %s: candidate %d supported but no configs\n", g->name, ci);
                g->failures++;
            }
            // The best config, and for every third candidate one other in turn: each config kind
            // is exercised while the compile time stays small.
            int pick[2] = {0, n > 1 && ci % 3 == 0 ? 1 + (ci / 3) % (n - 1) : -1};
            for (int pi = 0; pi < 2; pi++) {
                int k = pick[pi];
                if (k < 0)
                    continue;
                if (in_tu == 0 || in_tu == PER_TU) {
                    ORCH_ASSERT(n_tu < MAX_TU);
                    sb_init(&tu[n_tu]);
                    sb_puts(&tu[n_tu], cgen_prelude());
                    n_tu++;
                    in_tu = 0;
                }
                if (nk == cap) {
                    cap = cap ? 2 * cap : 256;
                    ks = xrealloc(ks, sizeof(Kernel) * (size_t)cap);
                }
                Kernel *kn = &ks[nk];
                kn->graph = gi;
                kn->cand = ci;
                kn->tu = n_tu - 1;
                kn->cfg = cfg[k];
                snprintf(kn->fn, sizeof kn->fn, "k_%d_%d_%d", gi, ci, k);
                Err ee = {0};
                if (cgen_pw_emit(g->pg, c, &cfg[k], kn->fn, &tu[n_tu - 1], &ee)) {
                    printf("  %s: emit of candidate %d (%s) failed: %s\n", g->name, ci,
                           cfg[k].desc, ee.msg);
                    g->failures++;
                    emit_fail++;
                    continue;
                }
                nk++;
                in_tu++;
            }
        }
    }
    printf("  %d kernels in %d translation units (%d candidates refused)\n", nk, n_tu, rejected);
    const char **srcs = xcalloc((size_t)n_tu + 1, sizeof(char *));
    CModule **mods = xcalloc((size_t)n_tu + 1, sizeof(CModule *));
    int *status = xcalloc((size_t)n_tu + 1, sizeof(int));
    char **msgs = xcalloc((size_t)n_tu + 1, sizeof(char *));
    for (int i = 0; i < n_tu; i++)
        srcs[i] = tu[i].s;
    Err e = {0};
    int rc = cbuild_modules(srcs, n_tu, NULL, 2, mods, status, msgs, &e);
    if (rc)
        printf("  build: %s\n", e.msg);
    for (int i = 0; i < n_tu; i++)
        if (status[i]) {
            printf("  translation unit %d failed to build: %s\n", i, msgs[i] ? msgs[i] : "?");
            if (getenv("CGEN_DUMP")) {
                FILE *f = fopen(getenv("CGEN_DUMP"), "w");
                if (f) {
                    fputs(srcs[i], f);
                    fclose(f);
                }
            }
        }
    for (int i = 0; i < nk; i++) {
        Kernel *kn = &ks[i];
        G *g = &graphs[kn->graph];
        const Candidate *c = &g->cs->c[kn->cand];
        CKernelFn fn = mods[kn->tu] ? (CKernelFn)cmodule_sym(mods[kn->tu], kn->fn) : NULL;
        if (!fn) {
            g->failures++;
            continue;
        }
        const void **in = xcalloc((size_t)c->n_inputs + 1, sizeof(void *));
        for (int j = 0; j < c->n_inputs; j++) {
            const Tensor *t = g->pg->tensors[c->inputs[j]];
            in[j] = t->kind == TK_CONST ? t->data : g->val[t->id];
        }
        const Tensor *o = g->pg->tensors[c->output];
        size_t bytes = tensor_nbytes(o);
        void *out = xmalloc(bytes + 1);
        memset(out, 0xa5, bytes + 1);
        fn(in, out);
        int64_t bad = -1;
        if (!close_enough(o->dtype, out, g->val[o->id], tensor_numel(o), 1e-4, &bad)) {
            if (g->failures < 4) {
                char sh[64];
                printf("  %s: candidate %d (%d prims, %s, %s) differs at %lld: got %g want %g\n",
                       g->name, kn->cand, c->n_prims, kn->cfg.desc,
                       tensor_shape_str(o, sh, sizeof sh), (long long)bad,
                       elem_get_f64(o->dtype, out, bad), elem_get_f64(o->dtype, g->val[o->id], bad));
            }
            g->failures++;
        } else if (((unsigned char *)out)[bytes] != 0xa5) {
            printf("  %s: candidate %d wrote past its output\n", g->name, kn->cand);
            g->failures++;
        }
        g->kernels++;
        free(out);
        free(in);
    }
    for (int i = 0; i < n_tu; i++) {
        cmodule_free(mods[i]);
        free(msgs[i]);
        sb_free(&tu[i]);
    }
    free(srcs);
    free(mods);
    free(status);
    free(msgs);
    free(ks);
    return emit_fail;
}

static int current;

static void graph_case(void) {
    G *g = &graphs[current];
    CHECK_MSG(g->built && g->failures == 0 && g->kernels > 0, "%s: %d kernels, %d failures",
              g->name, g->kernels, g->failures);
}

// The loop nest printer on its own: split with a tail, fuse, reorder, kinds.
static void test_loopnest(void) {
    LoopNest *ln = ln_create("t");
    int a = ln_axis(ln, "a", 10), b = ln_axis(ln, "b", 7);
    int bo, bi;
    ln_split(ln, b, 3, &bo, &bi);
    int f = ln_fuse(ln, a, bo);
    ln_parallel(ln, f, 1 << 30);
    ln_vector(ln, bi, NULL);
    ln_body(ln, "s += a * 100 + b;");
    StrBuf sb;
    sb_init(&sb);
    ln_print(ln, &sb, 0);
    CHECK(strstr(sb.s, "#pragma omp parallel for") != NULL);
    CHECK(strstr(sb.s, "#pragma omp simd") != NULL);
    CHECK(strstr(sb.s, "ORCH_MIN_I64") != NULL);
    CHECK(ln_extent(ln, f) == 30);
    sb_free(&sb);
    ln_free(ln);
}

// The C prelude's float32 sine and cosine (orch_sinf_guarded / orch_cosf_guarded, the common
// paths of an epilogue's sin and cos: cexpr_set_sin_guard), built as the kernels are (cbuild: -O3 -march=native, so the probe's loop
// is vectorised as theirs): within 2 ulp of sin / cos in double for |x| <= 65536 (random magnitudes
// from 2^-30 up, the floats nearest multiples of pi/2 up to 65536, where the reductions cancel,
// tiny ones, signed zeros, subnormals); the flag raised exactly for finite |x| > 65536; NaN for
// infinities and NaN.
static float ulp_of(float r) {
    float a = fabsf(r);
    return nextafterf(a, INFINITY) - a;
}

static void check_trig_prelude(const char *name, double (*ref)(double)) {
    StrBuf src;
    sb_init(&src);
    sb_puts(&src, cgen_prelude());
    sb_printf(&src,
              "void probe(const float *x, float *y, int n, int *big) {\n"
              "    int b = 0;\n"
              "    for (int i = 0; i < n; i++) y[i] = orch_%sf_guarded(x[i], &b);\n"
              "    *big = b;\n"
              "}\n",
              name);
    CModule *mod = NULL;
    Err e = {0};
    CHECK_MSG(cbuild_module(src.s, NULL, name, &mod, &e) == ST_OK, "%.300s", e.msg);
    sb_free(&src);
    if (!mod)
        return;
    void (*probe)(const float *, float *, int, int *) =
        (void (*)(const float *, float *, int, int *))cmodule_sym(mod, "probe");
    CHECK(probe != NULL);
    enum { N = 1 << 20 };
    float *x = xmalloc(sizeof(float) * N), *y = xmalloc(sizeof(float) * N);
    int n = 0;
    for (int k = 0; k <= 41721 && n < N; k++) // k pi/2 <= 65536
        for (int d = -2; d <= 2; d++) {
            float v = (float)(k * 1.5707963267948966);
            for (int s = 0; s < (d < 0 ? -d : d); s++)
                v = nextafterf(v, d < 0 ? -INFINITY : INFINITY);
            if (fabsf(v) <= 65536.0f) {
                x[n++] = v;
                x[n++] = -v;
            }
        }
    static const float special[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 0x1p-126f, 0x1p-12f, -0x1p-12f,
                                    0x1.fffffep-13f, 65536.0f, -65536.0f};
    for (size_t i = 0; i < ORCH_COUNT(special); i++)
        x[n++] = special[i];
    while (n < N) // magnitudes 2^-30 .. 2^16, either sign
        x[n++] = (float)((rnd() & 1 ? -1 : 1) * exp2(unif(-30.0, 16.0)));
    int big = -1;
    probe(x, y, n, &big);
    CHECK_MSG(big == 0, "flag raised for |x| <= 65536");
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float r = (float)ref((double)x[i]);
        double err = fabs((double)y[i] - ref((double)x[i])) / ulp_of(r);
        if (err > worst)
            worst = err;
        if (!(err <= 2.0) || signbit(y[i]) != signbit(r)) {
            if (bad++ < 5)
                printf("  %s(%.9g): %.9g, want %.9g (%.2f ulp)\n", name, x[i], y[i], r, err);
        }
    }
    printf("  orch_%sf_guarded: %d values, largest error %.3f ulp\n", name, n, worst);
    CHECK_MSG(bad == 0, "%d values beyond 2 ulp", bad);
    // Past the common path's range: the flag (the caller redoes those), NaN for inf and NaN.
    static const float far[] = {65536.01f, -1e5f, 1e9f, 3.4e38f, -3.4e38f};
    for (size_t i = 0; i < ORCH_COUNT(far); i++) {
        float v = far[i], w;
        big = 0;
        probe(&v, &w, 1, &big);
        CHECK_MSG(big == 1, "no flag for %s(%g)", name, v);
    }
    static const float nonfinite[] = {INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < ORCH_COUNT(nonfinite); i++) {
        float v = nonfinite[i], w = 0;
        big = 0;
        probe(&v, &w, 1, &big);
        CHECK_MSG(big == 0 && isnan(w), "%s(%g) = %g, flag %d", name, v, w, big);
    }
    free(x);
    free(y);
    cmodule_free(mod);
}

static void test_trig_prelude(void) {
    check_trig_prelude("sin", sin);
    check_trig_prelude("cos", cos);
}

int main(void) {
    const char *env = getenv("ORCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    RUN(test_loopnest);
    RUN(test_trig_prelude);
    build_unary(DT_FLOAT, "unary_f32", false);
    build_unary(DT_DOUBLE, "unary_f64", true);
    build_unary(DT_FLOAT16, "unary_f16", true);
    build_binary_float(DT_FLOAT, "binary_f32");
    build_binary_float(DT_BFLOAT16, "binary_bf16");
    build_int(DT_INT32, "int32");
    build_int(DT_INT8, "int8");
    build_int(DT_INT64, "int64");
    build_int(DT_UINT32, "uint32");
    build_int(DT_UINT64, "uint64");
    build_casts("casts");
    build_layout("layout");
    build_layout_int("layout_int");
    build_big("big");
    build_sin_big("sin_big", 67, 531);
    build_sin_big("sin_big_small", 5, 13);
    build_softmax("softmax", odd_dim(), odd_dim() + 40);
    build_softmax("softmax_big", 64, 1031);
    build_layernorm("layernorm");
    build_reductions("reductions");
    build_reduce_offrow("reduce_offrow");
    build_window_reductions("window_reductions");
    build_pool_windows("pool_windows");
    clock_t t0 = clock();
    run_all();
    printf("  (%.1f s CPU in this process)\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    for (current = 0; current < n_graphs; current++) {
        printf("  %s: %d kernels\n", graphs[current].name, graphs[current].kernels);
        check_failed_case = 0;
        graph_case();
        printf("%s %s\n", check_failed_case ? "FAIL" : "ok  ", graphs[current].name);
        if (check_failed_case)
            check_n_fail++;
        else
            check_n_pass++;
    }
    free_graphs();
    return CHECK_DONE();
}
