// The CUDA target's typed configs (cugen.h's typed configs): every config each kernel class
// proposes for the canonical graphs (canonical_graphs.h; also stored as float16 and bfloat16)
// and a few attention shapes (attn_graphs.h: a decoding step, whose key splits and key warps
// are offered; TopK and CumSum: the operator kernels), on a described A100, H100, T4 and a device
// the driver told nothing about, under every precision, is unpacked into its class's struct and
// packed back: the KernelConfig must come back identical (class, every p[] slot, the desc), since
// the profile database keys on them. The library classes (cuBLASLt, cuDNN), whose configs come from
// the libraries' heuristics on a GPU, round-trip what those return here (none without a GPU) and
// hand-made configs of every form their descs take. No GPU or NVRTC needed.
#include "attn_graphs.h"
#include "canonical_graphs.h"
#include "check.h"
#include "cuda_hw.h"

#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_attn.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/cugen_mlp.h"
#include "backend/cuda/cugen_opq.h"
#include "candidates/candidates.h"
#include "passes/passes.h"

#include <stdio.h>
#include <string.h>

// Configs seen per class (CUCLS_POINTWISE .. CUCLS_ATTN).
static int g_seen[32];

static bool same_config(const KernelConfig *a, const KernelConfig *b) {
    return a->cls == b->cls && !memcmp(a->p, b->p, sizeof a->p) && !strcmp(a->desc, b->desc);
}

// Unpacks k into its class's struct (checking the other classes' unpack refuse it) and packs it
// back into *out; false for a class without a typed config.
static bool repack(const KernelConfig *k, KernelConfig *out) {
    CuPointwiseConfig pc;
    CuReduceConfig rc;
    CuLinearConfig lc;
    CuMlpConfig mc;
    CuAttnConfig ac;
    CuBlasLtConfig bc;
    CuDnnConfig dc;
    CuOpqConfig oc;
    int claimed = cupw_config_unpack(k, &pc) + cured_config_unpack(k, &rc) +
                  culin_config_unpack(k, &lc) + cumlp_config_unpack(k, &mc) +
                  cuattn_config_unpack(k, &ac) + blaslt_config_unpack(k, &bc) +
                  dnn_config_unpack(k, &dc) + cuopq_config_unpack(k, &oc);
    CHECK_MSG(claimed == 1, "config '%s' (class %d) unpacked by %d classes", k->desc, k->cls,
              claimed);
    memset(out, 0x5a, sizeof *out);
    out->score = k->score;
    switch (k->cls) {
    case CUCLS_POINTWISE: cupw_config_pack(&pc, out); break;
    case CUCLS_REDUCE: cured_config_pack(&rc, out); break;
    case CUCLS_MATMUL:
    case CUCLS_CONV: culin_config_pack(&lc, out); break;
    case CUCLS_MLP: cumlp_config_pack(&mc, out); break;
    case CUCLS_ATTN: cuattn_config_pack(&ac, out); break;
    case CUCLS_BLASLT: blaslt_config_pack(&bc, out); break;
    case CUCLS_CUDNN: dnn_config_pack(&dc, out); break;
    case CUCLS_OPAQUE: cuopq_config_pack(&oc, out); break;
    default: return false;
    }
    return true;
}

static void check_roundtrip(const char *what, const KernelConfig *k) {
    KernelConfig back;
    bool typed = repack(k, &back);
    CHECK_MSG(typed, "%s: config '%s' of class %d has no typed config", what, k->desc, k->cls);
    if (!typed)
        return;
    CHECK_MSG(same_config(k, &back) && back.score == k->score,
              "%s: '%s' p=%lld,%lld,%lld,%lld,%lld,%lld came back as '%s' p=%lld,%lld,%lld,%lld,"
              "%lld,%lld",
              what, k->desc, (long long)k->p[0], (long long)k->p[1], (long long)k->p[2],
              (long long)k->p[3], (long long)k->p[4], (long long)k->p[5], back.desc,
              (long long)back.p[0], (long long)back.p[1], (long long)back.p[2],
              (long long)back.p[3], (long long)back.p[4], (long long)back.p[5]);
    if (k->cls >= 0 && k->cls < (int)ORCH_COUNT(g_seen))
        g_seen[k->cls]++;
}

typedef struct Variant {
    const char *name;
    TargetOptions opt;
} Variant;

static const Variant g_variants[] = {
    {"fp32", {.precision = PREC_FP32}},
    {"tf32", {.precision = PREC_TF32}},
    {"fp16", {.precision = PREC_FP16}},
    {"bf16", {.precision = PREC_BF16}},
    {"fp16 half storage", {.precision = PREC_FP16, .half_storage = true}},
    {"bf16 half storage", {.precision = PREC_BF16, .half_storage = true}},
};

// Every config of every distinct supported candidate of pg, on every device and variant.
static int roundtrip_graph(const char *name, const PrimGraph *pg, const CudaHw *hws, int nhw) {
    CandRules rules = cand_rules_default();
    rules.mlp_chains = true;
    rules.attention = true;
    CandidateSet *cs = NULL;
    Err e = {0};
    int rc = cand_enumerate(pg, &rules, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: candidates: %s", name, e.msg);
    if (rc)
        return 0;
    int n_cfg = 0;
    for (size_t v = 0; v < ORCH_COUNT(g_variants); v++)
        for (int h = 0; h < nhw; h++) {
            TargetMachine m = {
                .target = &target_cuda, .opt = g_variants[v].opt, .model = (void *)&hws[h]};
            for (int i = 0; i < cs->n; i++) {
                bool first = true;
                for (int j = 0; j < i && first; j++)
                    first = cs->c[j].signature != cs->c[i].signature;
                const Candidate *c = &cs->c[i];
                if (!first || !target_cuda.supports(&m, pg, c))
                    continue;
                KernelConfig cf[64];
                int n = target_cuda.configs(&m, pg, c, cf, (int)ORCH_COUNT(cf));
                char what[256];
                snprintf(what, sizeof what, "%s, candidate %d, %s, %s", name, c->id,
                         hws[h].name[0] ? hws[h].name : "unknown device", g_variants[v].name);
                for (int k = 0; k < n; k++)
                    check_roundtrip(what, &cf[k]);
                n_cfg += n;
            }
        }
    cand_set_free(cs);
    return n_cfg;
}

static CudaHw g_hw[4];

static void canonical_graphs_roundtrip(void) {
    int n_cfg = 0, n_graphs = 0;
    for (size_t g = 0; g < ORCH_COUNT(canonical_graphs); g++)
        for (int st = 0; st < 3; st++) { // float32, stored as float16, as bfloat16
            Err e = {0};
            PrimGraph *pg = canonical_graph_build(&canonical_graphs[g], &e);
            CHECK_MSG(pg != NULL, "%s: %s", canonical_graphs[g].name, e.msg);
            if (!pg)
                continue;
            StorageStats ss = {0};
            if (st && pass_store_reduced(pg, st == 1 ? DT_FLOAT16 : DT_BFLOAT16, NULL, &ss, &e)) {
                CHECK_MSG(false, "%s: storage: %s", canonical_graphs[g].name, e.msg);
                prim_graph_free(pg);
                continue;
            }
            char name[96];
            snprintf(name, sizeof name, "%s%s", canonical_graphs[g].name,
                     st == 1   ? " (float16)"
                     : st == 2 ? " (bfloat16)"
                               : "");
            n_cfg += roundtrip_graph(name, pg, g_hw, (int)ORCH_COUNT(g_hw));
            n_graphs++;
            prim_graph_free(pg);
        }
    printf("  %d graphs, %d configs round-tripped\n", n_graphs, n_cfg);
}

// Attention shapes whose configs take the rarer forms: a decoding step (1 query, 1024 keys:
// key splits, key warps), head dims of 128 (q=smem), half tensors.
static void attention_roundtrip(void) {
    static const struct {
        int64_t B, H, M, N, D, Dv;
        DType dt;
    } cases[] = {
        {1, 4, 1, 1024, 64, 64, 0},          {2, 12, 128, 128, 64, 64, 0},
        {1, 2, 64, 96, 128, 128, 0},         {1, 4, 1, 512, 64, 64, DT_FLOAT16},
        {2, 4, 64, 64, 64, 32, DT_BFLOAT16},
    };
    int n_cfg = 0, before = g_seen[CUCLS_ATTN];
    for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
        AttnCase k = {.B = cases[i].B,
                      .H = cases[i].H,
                      .M = cases[i].M,
                      .N = cases[i].N,
                      .D = cases[i].D,
                      .Dv = cases[i].Dv,
                      .mask = ATTN_MASK_KEYS,
                      .scale = ATTN_SCALE_MUL,
                      .dt = cases[i].dt};
        attn_case_name(&k);
        PrimGraph *pg = attn_graph(&k);
        Err e = {0};
        int rc = fission_cleanup(pg, NULL, &e);
        if (rc == ST_OK)
            rc = prim_graph_verify(pg, &e);
        CHECK_MSG(rc == ST_OK, "%s: %s", k.name, e.msg);
        if (rc == ST_OK)
            n_cfg += roundtrip_graph(k.name, pg, g_hw, (int)ORCH_COUNT(g_hw));
        prim_graph_free(pg);
    }
    printf("  %d attention graphs, %d configs round-tripped\n", (int)ORCH_COUNT(cases), n_cfg);
    CHECK(g_seen[CUCLS_ATTN] > before);
}

// The library classes: whatever their heuristics return here, and hand-made configs of every
// desc form (float32, TF32 and half compute types; half storage types; every cuDNN math type and
// data type).
static void library_roundtrip(void) {
    static const int32_t computes[] = {
        BLASLT_COMPUTE(BLASLT_COMPUTE_32F, 0, 0),
        BLASLT_COMPUTE(BLASLT_COMPUTE_32F_FAST_TF32, 0, 0),
        BLASLT_COMPUTE(BLASLT_COMPUTE_32F_FAST_16F, 0, 0),
        BLASLT_COMPUTE(BLASLT_COMPUTE_32F_FAST_16BF, 0, 0),
        BLASLT_COMPUTE(BLASLT_COMPUTE_32F, BLASLT_R_16F, BLASLT_R_16F),
        BLASLT_COMPUTE(BLASLT_COMPUTE_32F, BLASLT_R_16BF, BLASLT_R_32F),
    };
    for (size_t i = 0; i < ORCH_COUNT(computes); i++) {
        CuBlasLtConfig bc = {.workspace = 4096 * (int64_t)i,
                             .rank = (int64_t)i,
                             .id = 21 + (int32_t)i,
                             .splitk = (int32_t)i,
                             .tile = 18,
                             .stages = 20,
                             .red = 1,
                             .swz = (uint32_t)i % 2,
                             .cust = 3,
                             .inner = 7,
                             .cluster = 2,
                             .compute = computes[i]};
        for (int q = 0; q < 8; q++)
            bc.algo[q] = 0x0123456789abcdefull * (uint64_t)(q + 1) + i;
        KernelConfig k;
        k.score = 1e-6;
        blaslt_config_pack(&bc, &k);
        CuBlasLtConfig back;
        CHECK(blaslt_config_unpack(&k, &back) && !memcmp(&back, &bc, sizeof bc));
        check_roundtrip("cuBLASLt (made here)", &k);
    }
    static const int datas[] = {DNN_DATA_FLOAT, DNN_DATA_HALF, DNN_DATA_BFLOAT16};
    for (int algo = 0; algo < DNN_ALGO_COUNT; algo++)
        for (int math = DNN_MATH_DEFAULT; math <= DNN_MATH_FMA; math++)
            for (size_t d = 0; d < ORCH_COUNT(datas); d++) {
                CuDnnConfig dc = {.algo = algo,
                                  .math = math,
                                  .workspace = 1000 * algo,
                                  .rank = math,
                                  .data = datas[d]};
                KernelConfig k;
                k.score = 2e-6;
                dnn_config_pack(&dc, &k);
                CuDnnConfig back;
                CHECK(dnn_config_unpack(&k, &back) && back.algo == dc.algo &&
                      back.math == dc.math && back.workspace == dc.workspace &&
                      back.rank == dc.rank && back.data == dc.data);
                check_roundtrip("cuDNN (made here)", &k);
            }
    // The heuristics' own configs (a GPU and the libraries: otherwise none).
    Err e = {0};
    int n_lib = 0;
    for (size_t g = 0; g < ORCH_COUNT(canonical_graphs); g++) {
        PrimGraph *pg = canonical_graph_build(&canonical_graphs[g], &e);
        CandidateSet *cs = NULL;
        if (!pg || cand_enumerate(pg, NULL, 0, &cs, &e)) {
            prim_graph_free(pg);
            continue;
        }
        for (int i = 0; i < cs->n; i++) {
            KernelConfig cf[8];
            int n = blaslt_configs(pg, &cs->c[i], NULL, &g_variants[0].opt, cf, 8);
            n += dnn_configs(pg, &cs->c[i], NULL, &g_variants[0].opt, cf + n, 8 - n);
            for (int k = 0; k < n; k++)
                check_roundtrip(canonical_graphs[g].name, &cf[k]);
            n_lib += n;
        }
        cand_set_free(cs);
        prim_graph_free(pg);
    }
    printf("  %d configs from the libraries' heuristics round-tripped%s\n", n_lib,
           blaslt_available() || dnn_available() ? "" : " (no cuBLASLt / cuDNN here)");
}

// A config of another class is refused by each unpack; pack writes p[] slots a class does not use
// as 0 and leaves the score.
static void pack_clears(void) {
    KernelConfig k;
    memset(&k, 0x7f, sizeof k);
    k.score = 42;
    cured_config_pack(&(CuReduceConfig){.block = 256, .tpr = 32, .grid = 1}, &k);
    CHECK(k.cls == CUCLS_REDUCE && k.score == 42 && k.p[4] == 0 && k.p[11] == 0 &&
          !strcmp(k.desc, "cls=cured bs=256 tpr=32"));
    for (size_t i = strlen(k.desc); i < sizeof k.desc; i++)
        CHECK(k.desc[i] == 0);
    CuPointwiseConfig pc;
    CuMlpConfig mc;
    CHECK(!cupw_config_unpack(&k, &pc) && !cumlp_config_unpack(&k, &mc));
    culin_config_pack(
        &(CuLinearConfig){
            .conv = true, .var = CUV_TCCONV, .bm = 4, .bn = 32, .tm = 2, .bk = 264, .bf16 = true},
        &k);
    CHECK(k.cls == CUCLS_CONV && !strcmp(k.desc, "cls=cuconv v=bf16dc bh=4 bw=32 mt=2 pb=264"));
    CuLinearConfig lc;
    CHECK(culin_config_unpack(&k, &lc) && lc.bf16 && lc.conv && lc.bk == 264);
}

// Every generated class was among the configs round-tripped.
static void every_class_seen(void) {
    static const struct {
        int cls;
        const char *name;
    } want[] = {
        {CUCLS_POINTWISE, "pointwise"}, {CUCLS_REDUCE, "reduction"}, {CUCLS_MATMUL, "matmul"},
        {CUCLS_CONV, "convolution"},    {CUCLS_MLP, "MLP chain"},    {CUCLS_ATTN, "attention"},
        {CUCLS_BLASLT, "cuBLASLt"},     {CUCLS_CUDNN, "cuDNN"},      {CUCLS_OPAQUE, "operator"}};
    for (size_t i = 0; i < ORCH_COUNT(want); i++) {
        printf("  %-12s %d configs\n", want[i].name, g_seen[want[i].cls]);
        CHECK_MSG(g_seen[want[i].cls] > 0, "no %s config was round-tripped", want[i].name);
    }
}

int main(void) {
    cuda_hw_described(&g_hw[0], "A100-SXM4-80GB", 80, 108, 167936, 40 << 20, 1410000, 2.039e12,
                      2048);
    cuda_hw_described(&g_hw[1], "H100 SXM", 90, 132, 233472, 50 << 20, 1980000, 3.35e12, 2048);
    cuda_hw_described(&g_hw[2], "Tesla T4", 75, 40, 65536, 4 << 20, 1590000, 3.2e11, 1024);
    memset(&g_hw[3], 0, sizeof g_hw[3]); // a device the driver told nothing about
    RUN(pack_clears);
    RUN(canonical_graphs_roundtrip);
    RUN(attention_roundtrip);
    RUN(library_roundtrip);
    RUN(every_class_seen);
    return CHECK_DONE();
}
