// Unit tests of the C target's typed configs (CPwConfig, CRedConfig: cgen.h; CLinConfig:
// cgen_linear.h; CMlpConfig: cgen_mlp.h; CAttnConfig: cgen_attn.h; COpqConfig: cgen_opaque.h):
//   round trip: every config the target proposes (up to 64 a candidate) for every candidate of a
//   few graphs — an elementwise chain, a softmax, matmuls (tiled, GEMV, dot), convolutions
//   (tiled, padded-input, depthwise, transposed with col2im), an MLP chain, an attention, a TopK
//   and a CumSum (operator kernels) — on
//   three model machines (AVX-512 on 16 cores, AVX2 on 2, 128-bit vectors without FMA on 4 and no
//   L3) unpacks into its class's struct and packs back into the identical KernelConfig (cls,
//   p[], desc), its fields within what the emitters accept; every class and linear variant is
//   seen;
//   layout: hand-written structs of every class pack into the p[] and the desc text the profile
//   database keys on (a change there orphans every stored measurement).
// No kernel is built: the emitters' output for these configs is the other suites' concern.
#include "../attn_graphs.h"
#include "../check.h"
#include "../graph_builder.h"
#include "../model_builder.h"
#include "backend/cpu/cgen.h"
#include "backend/cpu/cgen_attn.h"
#include "backend/cpu/cgen_linear.h"
#include "backend/cpu/cgen_mlp.h"
#include "backend/cpu/cgen_opaque.h"
#include "candidates/candidates.h"
#include "fission/fission.h"
#include "onnx/load.h"
#include "ops/fold.h"
#include "passes/passes.h"
#include "prim/prim_build.h"

#include <stdlib.h>
#include <string.h>

enum { NHW = 3, MAXK = 64 };
static HwInfo g_hw[NHW];
// Configs seen per class (KernelConfig.cls, 1..8) and per linear variant (CLIN_*, 0..6).
static int g_seen_cls[9], g_seen_var[7], g_configs;

static void model_machines(void) {
    memset(g_hw, 0, sizeof g_hw);
    for (int h = 0; h < NHW; h++) {
        snprintf(g_hw[h].target, sizeof g_hw[h].target, "cpu");
        g_hw[h].l1d = 32768;
        g_hw[h].line = 64;
        g_hw[h].fma = true;
    }
    snprintf(g_hw[0].model, sizeof g_hw[0].model, "avx512");
    g_hw[0].cores = 16;
    g_hw[0].simd_bytes = 64;
    g_hw[0].l2 = 1048576;
    g_hw[0].l3 = 33554432;
    snprintf(g_hw[1].model, sizeof g_hw[1].model, "avx2");
    g_hw[1].cores = 2;
    g_hw[1].simd_bytes = 32;
    g_hw[1].l2 = 262144;
    g_hw[1].l3 = 33554432;
    snprintf(g_hw[2].model, sizeof g_hw[2].model, "sse");
    g_hw[2].cores = 4;
    g_hw[2].simd_bytes = 16;
    g_hw[2].fma = false;
    g_hw[2].l1d = 49152;
    g_hw[2].l2 = 524288;
}

// Unpacks k with its class's function and packs it back into *back; false for a class that is
// not the C target's.
static bool repack(const KernelConfig *k, KernelConfig *back) {
    switch (k->cls) {
    case CCLS_POINTWISE: {
        CPwConfig t;
        cgen_pw_config_unpack(k, &t);
        cgen_pw_config_pack(&t, back);
        return true;
    }
    case CCLS_REDUCE: {
        CRedConfig t;
        cgen_red_config_unpack(k, &t);
        cgen_red_config_pack(&t, back);
        return true;
    }
    case CCLS_MATMUL:
    case CCLS_CONV:
    case CCLS_DWCONV: {
        CLinConfig t;
        cgen_lin_config_unpack(k, &t);
        cgen_lin_config_pack(&t, back);
        return true;
    }
    case CCLS_MLP: {
        CMlpConfig t;
        cgen_mlp_config_unpack(k, &t);
        cgen_mlp_config_pack(&t, back);
        return true;
    }
    case CCLS_ATTN: {
        CAttnConfig t;
        cgen_attn_config_unpack(k, &t);
        cgen_attn_config_pack(&t, back);
        return true;
    }
    case CCLS_OPAQUE: {
        COpqConfig t;
        cgen_opq_config_unpack(k, &t);
        cgen_opq_config_pack(&t, back);
        return true;
    }
    default: return false;
    }
}

static bool same_config(const KernelConfig *a, const KernelConfig *b) {
    return a->cls == b->cls && !memcmp(a->p, b->p, sizeof a->p) && !strcmp(a->desc, b->desc);
}

// The typed fields are within what the class's emitter accepts.
static bool fields_ok(const KernelConfig *k) {
    switch (k->cls) {
    case CCLS_POINTWISE: {
        CPwConfig t;
        cgen_pw_config_unpack(k, &t);
        return t.flat >= 0 && t.chunk >= 0;
    }
    case CCLS_REDUCE: return k->p[0] == 0 || k->p[0] == 1;
    case CCLS_MATMUL:
    case CCLS_CONV:
    case CCLS_DWCONV: {
        CLinConfig t;
        cgen_lin_config_unpack(k, &t);
        switch (t.variant) {
        case CLIN_TILE:
        case CLIN_COL2IM:
            // packA = 2 on a conv's tile: the column-tile mode (W reordered at load).
            return t.mr >= 1 && t.nr >= 16 && t.nr % 16 == 0 && t.kc >= 1 && t.mc >= t.mr &&
                   t.mc % t.mr == 0 && t.nc >= t.nr && t.nc % t.nr == 0 && t.packa >= 0 &&
                   t.packa <= (k->cls == CCLS_CONV && t.variant == CLIN_TILE
                                   ? CLIN_PACK_PREPACKED
                                   : CLIN_PACK_PER_CALL) &&
                   t.packb >= 0 && t.packb <= CLIN_PACK_PREPACKED;
        case CLIN_PADCONV:
            return k->cls == CCLS_CONV && t.mr >= 1 && t.nr >= 16 && t.nr % 16 == 0 && t.kc >= 1 &&
                   t.mc >= t.mr && t.mc % t.mr == 0 && t.rows >= 1 &&
                   (t.packa == CLIN_PACK_PER_CALL || t.packa == CLIN_PACK_PREPACKED);
        case CLIN_WINOGRAD:
            return k->cls == CCLS_CONV && (t.wm == 2 || t.wm == 4) && t.mr >= 1 && t.nr >= 16 &&
                   t.nr % 16 == 0 && t.mc >= t.mr && t.mc % t.mr == 0 && t.rows >= 1 &&
                   t.kc == 0 && t.packa == 0 && t.packb == 0;
        case CLIN_GEMV: return k->cls == CCLS_MATMUL && t.jb >= 8;
        case CLIN_DOT: return k->cls == CCLS_MATMUL;
        case CLIN_DIRECT: return k->cls == CCLS_DWCONV;
        default: return false;
        }
    }
    case CCLS_MLP: {
        CMlpConfig t;
        cgen_mlp_config_unpack(k, &t);
        return t.rt >= 1 && t.mr >= 1 && t.mr <= 16 && t.nv >= 1 && t.nv <= 8;
    }
    case CCLS_ATTN: {
        CAttnConfig t;
        cgen_attn_config_unpack(k, &t);
        return t.bm >= 1 && t.bm <= 1024 && t.bn >= 16 && t.bn <= 1024 && t.bn % 16 == 0 &&
               t.mr >= 1 && t.mr <= 16 && t.nv >= 1 && t.nv <= 8 && (t.st == 0 || t.st == 1);
    }
    case CCLS_OPAQUE: {
        COpqConfig t;
        cgen_opq_config_unpack(k, &t);
        return t.alg >= COPQ_ALG_PLAIN && t.alg <= COPQ_ALG_RADIX;
    }
    default: return false;
    }
}

// Every config of every supported candidate of pg (cleaned up, verified, enumerated with MLP
// chains and attention) on every model machine: repacked identically, fields in range. Frees pg.
static void check_graph(const char *name, PrimGraph *pg) {
    Err e = {0};
    int rc = fission_cleanup(pg, NULL, &e);
    if (rc == ST_OK)
        rc = prim_graph_verify(pg, &e);
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    r.attention = true;
    CandidateSet *cs = NULL;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &r, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
    int supported = 0, configs = 0;
    for (int i = 0; cs && i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        for (int h = 0; h < NHW; h++) {
            TargetMachine m = {.target = &target_cpu, .hw = g_hw[h]};
            if (!target_cpu.supports(&m, pg, c))
                continue;
            supported++;
            KernelConfig cf[MAXK];
            int n = target_cpu.configs(&m, pg, c, cf, MAXK);
            CHECK_MSG(n >= 1, "%s: candidate %d supported on %s but no config", name, c->id,
                      g_hw[h].model);
            for (int j = 0; j < n; j++) {
                KernelConfig back;
                memset(&back, 0x5a, sizeof back);
                bool known = repack(&cf[j], &back);
                CHECK_MSG(known, "%s: config '%s' of class %d", name, cf[j].desc, cf[j].cls);
                if (!known)
                    continue;
                CHECK_MSG(back.score == 0, "%s: pack left score %g", name, back.score);
                CHECK_MSG(same_config(&back, &cf[j]),
                          "%s on %s: config '%s' repacks as '%s' (p[0..7] %lld %lld %lld %lld "
                          "%lld %lld %lld %lld)",
                          name, g_hw[h].model, cf[j].desc, back.desc, (long long)back.p[0],
                          (long long)back.p[1], (long long)back.p[2], (long long)back.p[3],
                          (long long)back.p[4], (long long)back.p[5], (long long)back.p[6],
                          (long long)back.p[7]);
                CHECK_MSG(fields_ok(&cf[j]), "%s on %s: config '%s' out of range", name,
                          g_hw[h].model, cf[j].desc);
                g_seen_cls[cf[j].cls]++;
                if (cf[j].cls >= CCLS_MATMUL && cf[j].cls <= CCLS_DWCONV) {
                    CLinConfig t;
                    cgen_lin_config_unpack(&cf[j], &t);
                    if (t.variant >= 0 && t.variant < 7)
                        g_seen_var[t.variant]++;
                }
                configs++;
            }
        }
    }
    printf("  %s: %d candidates x machines supported, %d configs repacked\n", name, supported,
           configs);
    CHECK_MSG(supported > 0, "%s: nothing supported", name);
    g_configs += configs;
    cand_set_free(cs);
    prim_graph_free(pg);
}

// ---- graphs ----

// A constant of the given shape (values do not matter: nothing runs).
static int add_const(PB *b, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = xcalloc((size_t)n, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i % 7) * 0.125f - 0.375f;
    int t = pb_const(b, DT_FLOAT, rank, dims, v);
    free(v);
    return t;
}

// sigmoid(x) * y over a long flat run (chunked configs), and a softmax over rows (fused and
// materialised reductions).
static void pointwise_and_reduce(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t d[] = {16, 20000};
    int x = gb_input(pg, "x", 2, d), y = gb_input(pg, "y", 2, d);
    PB b = {pg, "pw"};
    gb_output(pg, pb_ew2(&b, EW_MUL, pb_ew1(&b, EW_SIGMOID, x), y));
    check_graph("sigmoid_mul", pg);

    pg = prim_graph_create(NULL);
    const int64_t sd[] = {32, 100};
    x = gb_input(pg, "x", 2, sd);
    b = (PB){pg, "softmax"};
    int mx = pb_reduce(&b, RED_MAX, x, 1u << 1, true, false);
    int ex = pb_ew1(&b, EW_EXP, pb_ew2(&b, EW_SUB, x, mx));
    int sum = pb_reduce(&b, RED_SUM, ex, 1u << 1, true, false);
    gb_output(pg, pb_ew2(&b, EW_DIV, ex, sum));
    check_graph("softmax", pg);
}

// Matmuls: a tiled one with a constant B (prepacked) and a bias + relu epilogue, a GEMV shape
// (M <= 8) and a dot shape (N <= 4, both operands inputs).
static void matmuls(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t ad[] = {64, 96}, wd[] = {96, 80}, bd[] = {80};
    int a = gb_input(pg, "a", 2, ad);
    PB b = {pg, "mm"};
    int y = pb_matmul(&b, a, add_const(&b, 2, wd));
    gb_output(pg, pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, y, add_const(&b, 1, bd))));
    check_graph("matmul_bias_relu", pg);

    pg = prim_graph_create(NULL);
    const int64_t vd[] = {4, 256}, vw[] = {256, 512};
    a = gb_input(pg, "a", 2, vd);
    b = (PB){pg, "gemv"};
    gb_output(pg, pb_matmul(&b, a, add_const(&b, 2, vw)));
    check_graph("gemv", pg);

    pg = prim_graph_create(NULL);
    const int64_t xd[] = {32, 64}, nd[] = {64, 2};
    a = gb_input(pg, "a", 2, xd);
    int bb = gb_input(pg, "b", 2, nd);
    b = (PB){pg, "dot"};
    gb_output(pg, pb_matmul(&b, a, bb));
    check_graph("dot", pg);
}

// Convolutions: 3x3 (tiled and padded-input), depthwise (direct), transposed stride 2 (gather
// and col2im).
static void convs(void) {
    LinearParams lp = {.op = LIN_CONV,
                       .n_spatial = 2,
                       .group = 1,
                       .stride = {1, 1},
                       .dilation = {1, 1},
                       .pad_begin = {1, 1},
                       .pad_end = {1, 1}};
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {1, 16, 20, 20}, wd[] = {32, 16, 3, 3}, od[] = {1, 32, 20, 20};
    int x = gb_input(pg, "x", 4, xd);
    PB b = {pg, "conv"};
    gb_output(pg, pb_conv(&b, &lp, x, add_const(&b, 4, wd), od));
    check_graph("conv3x3", pg);

    pg = prim_graph_create(NULL);
    const int64_t dwd[] = {16, 1, 3, 3};
    x = gb_input(pg, "x", 4, xd);
    b = (PB){pg, "dw"};
    LinearParams dp = lp;
    dp.group = 16;
    gb_output(pg, pb_conv(&b, &dp, x, add_const(&b, 4, dwd), xd));
    check_graph("depthwise3x3", pg);

    pg = prim_graph_create(NULL);
    const int64_t td[] = {1, 8, 32, 32}, twd[] = {8, 4, 3, 3}, tod[] = {1, 4, 64, 64};
    x = gb_input(pg, "x", 4, td);
    b = (PB){pg, "convT"};
    LinearParams tp = {.op = LIN_CONV_TRANSPOSE,
                       .n_spatial = 2,
                       .group = 1,
                       .stride = {2, 2},
                       .dilation = {1, 1},
                       .pad_begin = {1, 1},
                       .pad_end = {0, 0},
                       .out_pad = {1, 1}};
    gb_output(pg, pb_conv(&b, &tp, x, add_const(&b, 4, twd), tod));
    check_graph("convT3x3_s2", pg);
}

// Two dense layers with bias + relu between them (an MLP chain), and an attention.
static void chains(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {256, 32}, w1[] = {32, 48}, b1[] = {48}, w2[] = {48, 16}, b2[] = {16};
    int x = gb_input(pg, "x", 2, xd);
    PB b = {pg, "mlp"};
    int h = pb_ew2(&b, EW_ADD, pb_matmul(&b, x, add_const(&b, 2, w1)), add_const(&b, 1, b1));
    h = pb_ew1(&b, EW_RELU, h);
    gb_output(pg, pb_ew2(&b, EW_ADD, pb_matmul(&b, h, add_const(&b, 2, w2)), add_const(&b, 1, b2)));
    check_graph("mlp2", pg);

    AttnCase k = {.B = 1, .H = 2, .M = 96, .N = 80, .D = 32, .Dv = 32, .scale = ATTN_SCALE_MUL};
    attn_case_name(&k);
    check_graph(k.name, attn_graph(&k));
}

// A model's graph after loading, folding, fission and clean-up (operators without a fission
// rule stay OPAQUE primitives with their ONNX node).
static PrimGraph *model_graph(MB *b) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    FissionStats st = {0};
    Err e = {0};
    int rc = onnx_load_memory(buf, len, "configs.onnx", NULL, NULL, &g, &e);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(g, NULL, &e);
    if (rc == ST_OK)
        rc = fission_run(g, NULL, &pg, &st, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    free(buf);
    mb_free(b);
    if (!pg)
        graph_free(g);
    return pg; // its src, the graph, outlives it: the caller frees both
}

// Operator kernels: a TopK (two algorithms) and a CumSum.
static void operators(void) {
    const int64_t xd[] = {64, 1000}, one = 1, k = 10, axis = 1;
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 2, xd);
    mb_init(b, mb_raw(b, "k", 7, 1, &one, &k, 8));
    mb_node(b, "TopK", "topk", "x,k", "v,i", NULL);
    mb_output(b, "v");
    mb_output(b, "i");
    PrimGraph *pg = model_graph(b);
    const Graph *g = pg ? pg->src : NULL;
    if (pg)
        check_graph("topk", pg);
    graph_free((Graph *)g);
    b = mb_new(17);
    mb_input(b, "x", 1, 2, xd);
    mb_init(b, mb_raw(b, "a", 7, 0, &one, &axis, 8));
    mb_node(b, "CumSum", "cumsum", "x,a", "y", NULL);
    mb_output(b, "y");
    pg = model_graph(b);
    g = pg ? pg->src : NULL;
    if (pg)
        check_graph("cumsum", pg);
    graph_free((Graph *)g);
}

static void every_class_seen(void) {
    static const char *cls[] = {"", "pw", "red", "matmul", "conv", "dwconv", "mlp", "attn", "op"};
    static const char *var[] = {"tile", "gemv", "dot", "direct", "col2im", "padconv", "winograd"};
    printf("  %d configs:", g_configs);
    for (int c = 1; c < 9; c++)
        printf(" %s %d", cls[c], g_seen_cls[c]);
    printf("; linear variants:");
    for (int v = 0; v < 7; v++)
        printf(" %s %d", var[v], g_seen_var[v]);
    printf("\n");
    for (int c = 1; c < 9; c++)
        CHECK_MSG(g_seen_cls[c] > 0, "no config of class %s", cls[c]);
    for (int v = 0; v < 7; v++)
        CHECK_MSG(g_seen_var[v] > 0, "no linear config of variant %s", var[v]);
}

// The p[] layout and desc text of one struct per class and variant.
static void check_layout(const KernelConfig *k, int cls, const int64_t *p, int np,
                         const char *desc) {
    int64_t want[KCFG_MAX_PARAMS] = {0};
    memcpy(want, p, sizeof(int64_t) * (size_t)np);
    CHECK_MSG(k->cls == cls, "'%s': cls %d, want %d", desc, k->cls, cls);
    CHECK_MSG(!memcmp(k->p, want, sizeof want),
              "'%s': p[] differs (p[0..5] %lld %lld %lld %lld %lld %lld)", desc, (long long)k->p[0],
              (long long)k->p[1], (long long)k->p[2], (long long)k->p[3], (long long)k->p[4],
              (long long)k->p[5]);
    CHECK_MSG(!strcmp(k->desc, desc), "desc '%s', want '%s'", k->desc, desc);
}

static void canonical_layouts(void) {
    KernelConfig k;
    cgen_pw_config_pack(&(CPwConfig){.flat = 1, .chunk = 4096, .par = true}, &k);
    check_layout(&k, CCLS_POINTWISE, (const int64_t[]){4096, 1, 1}, 3,
                 "cls=pw flat=1 chunk=4096 par=1");
    cgen_red_config_pack(&(CRedConfig){.fused = true, .par = false}, &k);
    check_layout(&k, CCLS_REDUCE, (const int64_t[]){1, 0}, 2, "cls=red mode=fused par=0");
    cgen_red_config_pack(&(CRedConfig){.fused = false, .par = true}, &k);
    check_layout(&k, CCLS_REDUCE, (const int64_t[]){0, 1}, 2, "cls=red mode=mat par=1");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_MATMUL,
                                       .variant = CLIN_TILE,
                                       .mr = 6,
                                       .nr = 16,
                                       .kc = 256,
                                       .mc = 96,
                                       .nc = 1024,
                                       .packa = 1,
                                       .packb = CLIN_PACK_PREPACKED},
                         &k);
    check_layout(&k, CCLS_MATMUL, (const int64_t[]){0, 6, 16, 256, 96, 1024, 1, 2}, 8,
                 "cls=matmul v=tile mr=6 nr=16 kc=256 mc=96 nc=1024 packA=1 packB=2");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_CONV,
                                       .variant = CLIN_COL2IM,
                                       .mr = 8,
                                       .nr = 32,
                                       .kc = 64,
                                       .mc = 16,
                                       .nc = 64,
                                       .packa = 0,
                                       .packb = 1},
                         &k);
    check_layout(&k, CCLS_CONV, (const int64_t[]){4, 8, 32, 64, 16, 64, 0, 1}, 8,
                 "cls=conv v=col2im mr=8 nr=32 kc=64 mc=16 nc=64 packA=0 packB=1");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_CONV,
                                       .variant = CLIN_PADCONV,
                                       .mr = 12,
                                       .nr = 32,
                                       .kc = 144,
                                       .mc = 36,
                                       .rows = 7,
                                       .packa = CLIN_PACK_PREPACKED},
                         &k);
    check_layout(&k, CCLS_CONV, (const int64_t[]){5, 12, 32, 144, 36, 7, 2}, 7,
                 "cls=conv v=padconv mr=12 nr=32 kc=144 mc=36 rows=7 packA=2");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_CONV,
                                       .variant = CLIN_WINOGRAD,
                                       .wm = 4,
                                       .mr = 8,
                                       .nr = 32,
                                       .mc = 64,
                                       .rows = 3},
                         &k);
    check_layout(&k, CCLS_CONV, (const int64_t[]){6, 8, 32, 4, 64, 3}, 6,
                 "cls=conv v=winograd m=4 mr=8 nr=32 mc=64 rows=3");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_MATMUL, .variant = CLIN_GEMV, .jb = 256}, &k);
    check_layout(&k, CCLS_MATMUL, (const int64_t[]){1, 0, 256}, 3, "cls=matmul v=gemv jb=256");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_MATMUL, .variant = CLIN_DOT}, &k);
    check_layout(&k, CCLS_MATMUL, (const int64_t[]){2}, 1, "cls=matmul v=dot");
    cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_DWCONV, .variant = CLIN_DIRECT}, &k);
    check_layout(&k, CCLS_DWCONV, (const int64_t[]){3}, 1, "cls=dwconv v=direct");
    cgen_mlp_config_pack(&(CMlpConfig){.rt = 64, .mr = 6, .nv = 4}, &k);
    check_layout(&k, CCLS_MLP, (const int64_t[]){64, 6, 4}, 3, "cls=mlp rt=64 mr=6 nv=4");
    cgen_attn_config_pack(&(CAttnConfig){.bm = 32, .bn = 128, .mr = 8, .nv = 2, .st = 1}, &k);
    check_layout(&k, CCLS_ATTN, (const int64_t[]){32, 128, 8, 2, 1}, 5,
                 "cls=attn bm=32 bn=128 mr=8 nv=2 st=1");
    cgen_opq_config_pack(&(COpqConfig){.alg = COPQ_ALG_SELECT, .par = true}, &k);
    check_layout(&k, CCLS_OPAQUE, (const int64_t[]){1, 1}, 2, "cls=op alg=select par=1");
    cgen_opq_config_pack(&(COpqConfig){.alg = COPQ_ALG_RADIX, .par = false}, &k);
    check_layout(&k, CCLS_OPAQUE, (const int64_t[]){2, 0}, 2, "cls=op alg=radix par=0");
    cgen_opq_config_pack(&(COpqConfig){.alg = COPQ_ALG_PLAIN, .par = true}, &k);
    check_layout(&k, CCLS_OPAQUE, (const int64_t[]){0, 1}, 2, "cls=op alg=plain par=1");
}

int main(void) {
    model_machines();
    RUN(canonical_layouts);
    RUN(pointwise_and_reduce);
    RUN(matmuls);
    RUN(convs);
    RUN(chains);
    RUN(operators);
    RUN(every_class_seen);
    return CHECK_DONE();
}
