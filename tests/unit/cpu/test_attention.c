// Unit tests of fused attention on the C target: candidates/attention.c proposes
// scaled-dot-product attention (Q·Kt, the pre-softmax chain, softmax over the keys, P·V) as one
// candidate, plus a variant that takes in the head-split layouts producing Q, Kt and V; the C
// target (backend/cpu/emit_attention.c) generates both with an online softmax.
//   detection: on the graphs of attn_graphs.h (split or not, every mask kind and scale) the
//   enumerator proposes exactly the core and the layouts variant, attn_analyse reads their shapes;
//   hand-built near misses (softmax over another axis, an intermediate that is a graph output or
//   has another reader, a V that is not [..., N, Dv], a third matmul) give no attention candidate.
//   CPU: both candidates of every graph, in their best configs (up to 12 for a few), are
//   emitted into two translation units built in parallel, run on random inputs (masks of 0 and
//   -10000) and compared with the primitive interpreter at |got - ref| <= 1e-4 |ref| +
//   1e-4 max|ref|. Sequence lengths 1 to 4096 (M != N too), head dims 24 to 256, Dv != D; O's
//   heads merged back by the candidate's output layout ([B, M, H * Dv], as PyTorch's permute and
//   view after the attention). Grouped-query attention (K and V heads shared by H / Hkv query
//   heads through repeat_kv's Expand): the variant's K/V group is found (never the core's, whose
//   K and V are expanded copies), and kernels of both task forms (per head, per K/V group) run.
// Environment: ORCH_TEST_SEED; ORCH_TEST_ONLY=CASE runs one case; ORCH_ATTN_TIME=1 prints every
// kernel's time (best of 5); ORCH_ATTN_FULL=1 adds an exhaustive sweep (every mask x scale x
// split over lengths and head dims). Under a sanitizer build the 4096 x 4096 case is left out
// (the interpreter's score matrices are 64 MiB each).
#include "../attn_graphs.h"
#include "candidates/attention.h"
#include "candidates/candidates.h"
#include "../check.h"
#include "../graph_builder.h"
#include "prim/prim_build.h"
#include "passes/passes.h"
#include "interp/prim_interp.h"
#include "backend/cpu/cbuild.h"
#include "backend/cpu/cgen_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define ATTN_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_SANITIZED 1
#endif
#endif
#ifndef ATTN_SANITIZED
#define ATTN_SANITIZED 0
#endif

static HwInfo g_hw;
static TargetMachine g_m; // the CPU target on this machine (g_hw is its hw)
static int g_graphs, g_kernels;
static bool g_time; // ORCH_ATTN_TIME=1: print each kernel's time

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *rand_buf(int64_t n) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64 + 64));
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    return p;
}

// Cleans up, verifies and enumerates with attention (and MLP chains) on; NULL on failure.
static CandidateSet *enumerate(const char *name, PrimGraph *pg) {
    Err e = {0};
    int rc = fission_cleanup(pg, NULL, &e);
    if (rc == ST_OK)
        rc = prim_graph_verify(pg, &e);
    CandRules r = cand_rules_default();
    r.attention = true;
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &r, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
    return rc == ST_OK ? cs : NULL;
}

// The attention candidates of cs (attn_analyse accepts them) into out; returns how many. Every
// multi-LINEAR candidate must be one of them or an MLP chain the CPU target handles as one.
static int attention_candidates(const char *name, const PrimGraph *pg, const CandidateSet *cs,
                                const Candidate **out, int cap) {
    int n = 0;
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        AttnSpec a;
        if (cand_count_linear(pg, c) < 2)
            continue;
        if (attn_analyse(pg, c, &a)) {
            CHECK_MSG(n < cap, "%s: more than %d attention candidates", name, cap);
            if (n < cap)
                out[n++] = c;
            CHECK_MSG(target_cpu.supports(&g_m, pg, c), "%s: attention candidate %d refused by the CPU",
                      name, c->id);
        }
    }
    return n;
}

// ---- evaluation ----

// Every tensor of the graph computed by the interpreter: inputs random in [-1, 1), the mask input
// 0 / -10000. Tensors other than those in `keep` (n_keep ids) are freed afterwards.
static void **eval_keep(const PrimGraph *pg, const int *keep, int n_keep) {
    void **buf = xcalloc((size_t)pg->n_tensors, sizeof(void *));
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        if (T->data) {
            size_t nb = tensor_nbytes(T);
            buf[t] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
            memcpy(buf[t], T->data, nb);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *T = pg->tensors[pg->inputs[i]];
        float *v = rand_buf(tensor_numel(T));
        if (strncmp(T->name, "mask", 4) == 0)
            attn_fill_mask(T->name, v, tensor_numel(T) / T->dims[T->rank - 1],
                           T->dims[T->rank - 1]);
        buf[pg->inputs[i]] = v;
    }
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        for (int j = 0; j < p->n_in; j++)
            x[j] = buf[p->in[j]];
        size_t nb = tensor_nbytes(pg->tensors[p->out[0]]);
        buf[p->out[0]] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
        Err e = {0};
        int rc = prim_eval(pg, p, x, buf[p->out[0]], &e);
        ORCH_ASSERT(rc == ST_OK);
        free(x);
    }
    for (int t = 0; t < pg->n_tensors; t++) {
        bool kept = false;
        for (int i = 0; i < n_keep && !kept; i++)
            kept = keep[i] == t;
        if (!kept) {
            free(buf[t]);
            buf[t] = NULL;
        }
    }
    return buf;
}

static void free_all(const PrimGraph *pg, void **buf) {
    for (int t = 0; buf && t < pg->n_tensors; t++)
        free(buf[t]);
    free(buf);
}

// The worst excess over |got - ref| <= 1e-4 |ref| + 1e-4 max|ref| (<= 0: pass).
static double compare(const float *got, const float *ref, int64_t n, int64_t *bad) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    double worst = -1;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), tol = 1e-4 * fabs(ref[i]) + 1e-4 * mx;
        if (!(d <= tol) && (*bad < 0 || d - tol > worst)) {
            worst = isnan(d) ? INFINITY : d - tol;
            *bad = i;
        }
    }
    return worst;
}

// ---- detection on attn_graphs.h ----

// The pre-softmax primitives after clean-up: the scale and the mask merge into one ELEMWISE.
static int expected_pre(const AttnCase *k) {
    return k->scale != ATTN_SCALE_NONE || k->mask != ATTN_MASK_NONE ? 1 : 0;
}

// Checks what the enumerator proposes for attn_graph(k): exactly two attention candidates, the
// core (no layouts; inputs q, Kt, V as the layouts leave them) and the variant with the layouts
// producing Kt (not split: the K transpose) or Q, Kt and V (split: the head-split reshape +
// transposes, composed into one LAYOUT each), reading only graph inputs and constants. Fills
// att[0] (core) and att[1] (variant).
static bool check_detection(const AttnCase *k, const PrimGraph *pg, const CandidateSet *cs,
                            const Candidate **att) {
    const Candidate *found[8];
    int n = attention_candidates(k->name, pg, cs, found, 8),
        want = (k->out_merge ? 2 : 1) * (k->rope ? 3 : 2);
    CHECK_MSG(cs->stats.attention == want && n == want, "%s: stats.attention %d, %d accepted",
              k->name, cs->stats.attention, n);
    if (n != want)
        return false;
    att[0] = att[1] = att[2] = NULL;
    int merged = 0;
    for (int i = 0; i < n; i++) {
        AttnSpec a;
        attn_analyse(pg, found[i], &a);
        if (k->out_merge) { // the two ending with the merge are checked (and run) below
            if (a.out_layout < 0) {
                CHECK_MSG(a.y == a.out && found[i]->output == a.out, "%s: output", k->name);
                continue;
            }
            merged++;
            // O [B, H, M, Dv] at b * M*H*Dv + h * Dv + m * H*Dv + c of [B, M, H * Dv].
            const int64_t HD = k->H * k->Dv,
                          want_st[4] = {k->B > 1 ? k->M * HD : 0, k->H > 1 ? k->Dv : 0,
                                        k->M > 1 ? HD : 0, 1};
            for (int d = 0; d < 4; d++)
                CHECK_MSG(a.ostride[d] == want_st[d], "%s: ostride[%d] %lld, expected %lld",
                          k->name, d, (long long)a.ostride[d], (long long)want_st[d]);
        }
        att[a.n_prologue > 0 ? 2 : a.n_layouts > 0] = found[i];
        CHECK_MSG(a.M == k->M && a.N == k->N && a.D == k->D && a.Dv == k->Dv &&
                      a.B == k->B * k->H && a.rank == 4 && a.lead[0] == k->B && a.lead[1] == k->H,
                  "%s: analysed M %lld N %lld D %lld Dv %lld B %lld rank %d", k->name,
                  (long long)a.M, (long long)a.N, (long long)a.D, (long long)a.Dv, (long long)a.B,
                  a.rank);
        CHECK_MSG(a.n_pre == expected_pre(k), "%s: n_pre %d, expected %d", k->name, a.n_pre,
                  expected_pre(k));
        CHECK_MSG(a.nan_to_zero == k->nan_guard, "%s: nan_to_zero %d", k->name, a.nan_to_zero);
        const bool gqa = attn_kv_heads(k) != k->H;
        CHECK_MSG(a.n_prologue > 0 || a.n_layouts == 0 ||
                      a.n_layouts == ((k->split && !k->rope) || k->packed ? 3
                                      : gqa || k->split                   ? 2
                                                                          : 1),
                  "%s: %d layouts in the variant", k->name, a.n_layouts);
        // Rotary embeddings: the prologue variant computes both rotations (a NEG and the
        // rotation's MUL-MUL-ADD program each) from the inputs.
        CHECK_MSG(a.n_prologue == 0 || (k->rope && a.n_prologue == 4),
                  "%s: %d elementwise primitives in the prologue", k->name, a.n_prologue);
        // The K/V head group: found where the variant reads K and V through repeat_kv, never
        // in the core (its K^T and V are expanded copies) nor without grouping.
        const int64_t want_g =
            gqa && (a.n_layouts > 0 || a.n_prologue > 0) ? k->H / attn_kv_heads(k) : 1;
        CHECK_MSG(a.kv_group == want_g && a.kv_axis == (want_g > 1 ? 1 : -1),
                  "%s (%d layouts): kv_group %lld on axis %d, expected %lld", k->name, a.n_layouts,
                  (long long)a.kv_group, a.kv_axis, (long long)want_g);
        CHECK_MSG((k->out_merge || a.out == pg->outputs[0]) && a.y == pg->outputs[0] &&
                      found[i]->output == pg->outputs[0],
                  "%s: the candidate's output is not O (merged)", k->name);
        // The pre-softmax chain's extra operands (mask, constants) and, in the variant, the
        // projections are read in place.
        const bool in_place = a.n_prologue > 0 || (a.n_layouts > 0 && !k->rope);
        for (int j = 0; in_place && j < found[i]->n_inputs; j++) {
            const Tensor *T = pg->tensors[found[i]->inputs[j]];
            CHECK_MSG(T->kind == TK_INPUT || T->data, "%s: variant input '%s' is computed", k->name,
                      T->name);
        }
        int expect_prims = 6 + a.n_pre + a.n_layouts + a.n_prologue + (a.out_layout >= 0);
        CHECK_MSG(found[i]->n_prims == expect_prims, "%s: %d prims, expected %d", k->name,
                  found[i]->n_prims, expect_prims);
    }
    CHECK_MSG(!k->out_merge || merged == (k->rope ? 3 : 2), "%s: %d candidates end with the merge",
              k->name, merged);
    CHECK_MSG(att[0] && att[1] && (!k->rope || att[2]), "%s: not one core and one variant%s",
              k->name, k->rope ? " and one with the rotary prologue" : "");
    return att[0] && att[1] && (!k->rope || att[2]);
}

static void detection(void) {
    for (int split = 0; split < 4; split++) // 2, 3: grouped-query (6 query heads, 2 or 1 K/V)
        for (int mask = 0; mask < ATTN_MASK_COUNT; mask++)
            for (int scale = 0; scale < ATTN_SCALE_COUNT; scale++) {
                AttnCase k = {.B = 2,
                              .H = split < 2 ? 3 : 6,
                              .M = 5,
                              .N = 9,
                              .D = 8,
                              .Dv = 12,
                              .mask = mask,
                              .scale = scale,
                              .split = split % 2,
                              .Hkv = split < 2 ? 0 : 4 - split};
                attn_case_name(&k);
                PrimGraph *pg = attn_graph(&k);
                CandidateSet *cs = enumerate(k.name, pg);
                const Candidate *att[3];
                if (cs && check_detection(&k, pg, cs, att)) {
                    // Without one of its core primitives the variant is no attention; without
                    // one of its layouts it is one with a layout less.
                    const Candidate *c = att[1];
                    AttnSpec a, full;
                    attn_analyse(pg, c, &full);
                    for (int drop = 0; drop < c->n_prims; drop++) {
                        Candidate d = *c;
                        int p2[32], n2 = 0;
                        for (int i = 0; i < c->n_prims; i++)
                            if (i != drop)
                                p2[n2++] = c->prims[i];
                        d.prims = p2;
                        d.n_prims = n2;
                        if (pg->prims[c->prims[drop]]->kind == PRIM_LAYOUT)
                            CHECK_MSG(attn_analyse(pg, &d, &a) && a.n_layouts == full.n_layouts - 1,
                                      "%s: refused without layout %d", k.name, c->prims[drop]);
                        else
                            CHECK_MSG(!attn_analyse(pg, &d, &a), "%s: accepted without prim %d",
                                      k.name, c->prims[drop]);
                    }
                }
                cand_set_free(cs);
                prim_graph_free(pg);
            }
    // Rotary embeddings on Q and K (split or not, grouped or not): a third variant computes
    // them from the inputs (the prologue), ending with the heads' merge too where O is merged.
    for (int i = 0; i < 8; i++) {
        AttnCase k = {.B = 2,
                      .H = 4,
                      .Hkv = i % 4 < 2 ? 2 : 0,
                      .M = 5,
                      .N = 9,
                      .D = 8,
                      .Dv = 8,
                      .mask = i % 2 ? ATTN_MASK_CAUSAL : ATTN_MASK_NONE,
                      .scale = ATTN_SCALE_MUL,
                      .split = i % 4 == 1 || i % 4 == 3,
                      .rope = true,
                      .out_merge = i >= 4};
        attn_case_name(&k);
        PrimGraph *pg = attn_graph(&k);
        CandidateSet *cs = enumerate(k.name, pg);
        const Candidate *att[3];
        if (cs)
            check_detection(&k, pg, cs, att);
        cand_set_free(cs);
        prim_graph_free(pg);
    }
}

// ---- near misses, built by hand ----

enum {
    NEG_NONE,     // the control: a plain attention (Q and Kt inputs: the core alone)
    NEG_AXIS,     // softmax over the queries' axis
    NEG_OUT_S,    // the raw scores are also a graph output
    NEG_OUT_E,    // exp(S - max) is also a graph output
    NEG_OUT_P,    // the weights P are also a graph output
    NEG_READ_S,   // the scores feed another primitive too
    NEG_READ_E,   // E feeds another primitive too
    NEG_READ_P,   // P feeds another primitive too
    NEG_V_RANK2,  // V is a [N, Dv] constant broadcast over the heads, not [..., N, Dv]
    NEG_V_RANK3,  // V is [H, N, Dv], broadcast over the batch: not of O's rank
    NEG_THIRD_MM, // (P·W)·V: a third matmul between the softmax and the value product
    NEG_COUNT
};

static const char *neg_name[] = {"control",    "softmax_axis2",  "scores_output",
                                 "exp_output", "weights_output", "scores_reader",
                                 "exp_reader", "weights_reader", "v_rank2",
                                 "v_rank3",    "third_matmul"};

static int add_input(PrimGraph *pg, const char *name, int rank, const int64_t *dims) {
    return attn_graph_input(pg, name, DT_FLOAT, rank, dims);
}

// A graph of [1, 2, M, D] attention with the near miss `kind`.
static PrimGraph *neg_graph(int kind) {
    const int64_t B = 1, H = 2, M = 6, N = 6, D = 8, Dv = 8;
    PrimGraph *pg = prim_graph_create(NULL);
    PB b = {pg, "neg"};
    const int64_t qd[] = {B, H, M, D}, kd[] = {B, H, D, N}, vd[] = {B, H, N, Dv};
    int q = add_input(pg, "q", 4, qd), kt = add_input(pg, "kt", 4, kd);
    int s = pb_ew2i(&b, EW_MUL, pb_matmul(&b, q, kt), 0.35);
    int s_raw = pg->prims[pg->n_prims - 1]->in[0];
    uint32_t axis = kind == NEG_AXIS ? 1u << 2 : 1u << 3;
    int mx = pb_reduce(&b, RED_MAX, s, axis, true, false);
    int e = attn_sub_exp(&b, s, mx, DT_FLOAT);
    int l = pb_reduce(&b, RED_SUM, e, axis, true, false);
    int p = pb_ew2(&b, EW_DIV, e, l);
    int v;
    if (kind == NEG_V_RANK2) {
        const int64_t v2[] = {N, Dv};
        float *w = rand_buf(N * Dv);
        v = pb_const(&b, DT_FLOAT, 2, v2, w);
        free(w);
    } else if (kind == NEG_V_RANK3) {
        v = add_input(pg, "v", 3, vd + 1);
    } else {
        v = add_input(pg, "v", 4, vd);
    }
    if (kind == NEG_THIRD_MM) {
        const int64_t wd[] = {N, N};
        float *w = rand_buf(N * N);
        p = pb_matmul(&b, p, pb_const(&b, DT_FLOAT, 2, wd, w));
        free(w);
    }
    int o = pb_matmul(&b, p, v);
    gb_output(pg, o);
    if (kind == NEG_OUT_S)
        gb_output(pg, s_raw);
    if (kind == NEG_OUT_E)
        gb_output(pg, e);
    if (kind == NEG_OUT_P)
        gb_output(pg, p);
    if (kind == NEG_READ_S)
        gb_output(pg, pb_ew1(&b, EW_TANH, s_raw));
    if (kind == NEG_READ_E)
        gb_output(pg, pb_reduce(&b, RED_MAX, e, 1u << 2, true, false));
    if (kind == NEG_READ_P)
        gb_output(pg, pb_ew1(&b, EW_NEG, p));
    return pg;
}

static void near_misses(void) {
    for (int kind = 0; kind < NEG_COUNT; kind++) {
        PrimGraph *pg = neg_graph(kind);
        CandidateSet *cs = enumerate(neg_name[kind], pg);
        if (cs) {
            const Candidate *found[8];
            int n = attention_candidates(neg_name[kind], pg, cs, found, 8);
            int want = kind == NEG_NONE ? 1 : 0;
            CHECK_MSG(n == want && cs->stats.attention == want,
                      "%s: %d attention candidates (stats %d), expected %d", neg_name[kind], n,
                      cs->stats.attention, want);
            // Whatever else has two matmuls is refused or handled by the MLP emitter, without
            // a crash.
            for (int i = 0; i < cs->n; i++)
                if (cand_count_linear(pg, &cs->c[i]) >= 2)
                    (void)target_cpu.supports(&g_m, pg, &cs->c[i]);
        }
        cand_set_free(cs);
        prim_graph_free(pg);
    }
    // A valid attention followed by an output projection: the two attention candidates, none
    // with the third matmul; the core plus the projection is no attention.
    AttnCase k = {.B = 1, .H = 2, .M = 6, .N = 6, .D = 8, .Dv = 8, .scale = ATTN_SCALE_MUL};
    attn_case_name(&k);
    PrimGraph *pg = attn_graph(&k);
    PB b = {pg, "proj"};
    const int64_t wd[] = {8, 8};
    float *w = rand_buf(64);
    int o = pb_matmul(&b, pg->outputs[0], pb_const(&b, DT_FLOAT, 2, wd, w));
    free(w);
    pg->outputs[0] = o;
    CandidateSet *cs = enumerate("projection", pg);
    if (cs) {
        const Candidate *found[8];
        int n = attention_candidates("projection", pg, cs, found, 8);
        CHECK_MSG(n == 2 && cs->stats.attention == 2, "projection: %d attention candidates", n);
        for (int i = 0; i < n; i++) {
            CHECK(cand_count_linear(pg, found[i]) == 2);
            Candidate c = *found[i];
            int prims[32];
            memcpy(prims, c.prims, sizeof(int) * (size_t)c.n_prims);
            int proj = -1;
            for (int q = 0; q < pg->n_prims; q++)
                if (pg->prims[q]->kind == PRIM_LINEAR && pg->prims[q]->out[0] == o)
                    proj = q;
            CHECK(proj > prims[c.n_prims - 1]);
            prims[c.n_prims++] = proj;
            c.prims = prims;
            c.output = o;
            AttnSpec a;
            CHECK_MSG(!attn_analyse(pg, &c, &a), "projection: accepted with three matmuls");
        }
    }
    cand_set_free(cs);
    prim_graph_free(pg);
}

// ---- CPU kernels ----

typedef struct Job {
    int graph;
    const Candidate *c;
    KernelConfig cfg;
    char fn[48];
} Job;

typedef struct Prepared {
    AttnCase k;
    PrimGraph *pg;
    CandidateSet *cs;
    const Candidate *att[3];
    void **buf;
    int unit; // which of the batch's two sources holds its kernels
} Prepared;

typedef struct Batch {
    Prepared *g;
    int n, cap;
    Job *jobs;
    int n_jobs, cap_jobs;
    StrBuf src[2];
    double t_interp, t_emit;
} Batch;

// Builds, checks and evaluates the graph of k, and emits its attention candidates (the core, the
// layouts variant and, with rotary embeddings, the prologue variant; in their k best configs)
// into one of the batch's two sources.
static void add_case(Batch *bt, AttnCase k, int configs) {
    attn_case_name(&k);
    PrimGraph *pg = attn_graph(&k);
    CandidateSet *cs = enumerate(k.name, pg);
    const Candidate *att[3];
    const int n_att = k.rope ? 3 : 2; // with rotary embeddings, the prologue variant too
    if (!cs || !check_detection(&k, pg, cs, att)) {
        cand_set_free(cs);
        prim_graph_free(pg);
        return;
    }
    double t0 = now();
    int keep[64], nk = 0;
    keep[nk++] = pg->outputs[0];
    for (int i = 0; i < n_att; i++)
        for (int j = 0; j < att[i]->n_inputs && nk < 64; j++)
            keep[nk++] = att[i]->inputs[j];
    void **buf = eval_keep(pg, keep, nk);
    double t1 = now();
    if (bt->n == bt->cap) {
        bt->cap = bt->cap ? 2 * bt->cap : 16;
        bt->g = xrealloc(bt->g, sizeof(Prepared) * (size_t)bt->cap);
    }
    int gi = bt->n++;
    Prepared *P = &bt->g[gi];
    P->k = k;
    P->pg = pg;
    P->cs = cs;
    for (int i = 0; i < 3; i++)
        P->att[i] = i < n_att ? att[i] : NULL;
    P->buf = buf;
    // The shorter of the two sources takes the graph's kernels.
    P->unit = bt->src[0].len <= bt->src[1].len ? 0 : 1;
    StrBuf *src = &bt->src[P->unit];
    for (int i = 0; i < n_att; i++) {
        KernelConfig cf[64];
        int n = target_cpu.configs(&g_m, pg, att[i], cf, 64);
        CHECK_MSG(n >= 1, "%s: no CPU config", k.name);
        // The best `configs`, and, for a grouped-query attention, the best of each task form
        // (a task per K/V group, gq=1, and per head) where those leave it out.
        AttnSpec as;
        attn_analyse(pg, att[i], &as);
        int m = n < configs ? n : configs;
        for (int form = 0; form < 2 && as.kv_group > 1; form++) {
            bool have = false;
            for (int q = 0; q < m && !have; q++)
                have = (strstr(cf[q].desc, "gq=1") != NULL) == (form == 1);
            for (int q = m; q < n && !have; q++)
                if ((strstr(cf[q].desc, "gq=1") != NULL) == (form == 1)) {
                    cf[m++] = cf[q];
                    have = true;
                }
            CHECK_MSG(have, "%s: no config with gq=%d", k.name, form);
        }
        n = m;
        for (int q = 0; q < n; q++) {
            if (bt->n_jobs == bt->cap_jobs) {
                bt->cap_jobs = bt->cap_jobs ? 2 * bt->cap_jobs : 64;
                bt->jobs = xrealloc(bt->jobs, sizeof(Job) * (size_t)bt->cap_jobs);
            }
            Job *j = &bt->jobs[bt->n_jobs++];
            j->graph = gi;
            j->c = att[i];
            j->cfg = cf[q];
            snprintf(j->fn, sizeof j->fn, "attn_%d_%d_%d", gi, i, q);
            Err e = {0};
            CHECK_MSG(cf[q].cls == CCLS_ATTN, "%s: config '%s' is not an attention kernel's",
                      k.name, cf[q].desc);
            CHECK_MSG(target_cpu.emit(&g_m, pg, att[i], &cf[q], j->fn, src, &e) == ST_OK,
                      "%s: emit '%s': %s", k.name, cf[q].desc, e.msg);
        }
    }
    bt->t_interp += t1 - t0;
    bt->t_emit += now() - t1;
}

// Builds the two sources in parallel, runs every kernel and compares it with the interpreter.
static void run_batch(Batch *bt) {
    double t0 = now();
    const char *srcs[2] = {bt->src[0].s, bt->src[1].s};
    CModule *mods[2] = {NULL, NULL};
    int status[2] = {0, 0};
    char *msgs[2] = {NULL, NULL};
    Err e = {0};
    int nsrc = bt->src[1].len > strlen(target_cpu.prelude(&g_m)) ? 2 : 1;
    int rc = cbuild_modules(srcs, nsrc, NULL, 2, mods, status, msgs, &e);
    CHECK_MSG(rc == ST_OK, "build: %s", e.msg);
    for (int i = 0; i < nsrc; i++)
        CHECK_MSG(status[i] == ST_OK, "build of unit %d: %.800s", i, msgs[i] ? msgs[i] : "");
    double t1 = now();
    for (int i = 0; rc == ST_OK && i < bt->n_jobs; i++) {
        const Job *j = &bt->jobs[i];
        const Prepared *P = &bt->g[j->graph];
        CModule *m = mods[P->unit];
        CKernelFn f = m ? (CKernelFn)cmodule_sym(m, j->fn) : NULL;
        CHECK_MSG(f != NULL, "%s: no kernel %s", P->k.name, j->fn);
        if (!f)
            continue;
        const void *in[64];
        for (int q = 0; q < j->c->n_inputs; q++)
            in[q] = P->buf[j->c->inputs[q]];
        int64_t n = tensor_numel(P->pg->tensors[j->c->output]);
        float *out = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
        for (int64_t x = 0; x < n; x++)
            out[x] = NAN;
        f(in, out);
        if (g_time) { // ORCH_ATTN_TIME=1: the best of 5 runs
            double best = INFINITY;
            for (int r = 0; r < 5; r++) {
                double t = now();
                f(in, out);
                best = fmin(best, now() - t);
            }
            printf("    %-56s %-36s %9.3f ms\n", P->k.name, j->cfg.desc, best * 1e3);
        }
        int64_t bad;
        const float *ref = P->buf[j->c->output];
        double w = compare(out, ref, n, &bad);
        CHECK_MSG(w <= 0, "%s: candidate %d (%d prims) '%s': out[%lld] = %g, want %g", P->k.name,
                  j->c->id, j->c->n_prims, j->cfg.desc, (long long)bad, bad >= 0 ? out[bad] : 0.0,
                  bad >= 0 ? ref[bad] : 0.0);
        free(out);
        g_kernels++;
    }
    printf("  %d graphs, %d kernels: interpreter %.1f s, emit %.1f s, cc %.1f s, run %.1f s\n",
           bt->n, bt->n_jobs, bt->t_interp, bt->t_emit, t1 - t0, now() - t1);
    g_graphs += bt->n;
    for (int i = 0; i < 2; i++) {
        cmodule_free(mods[i]);
        free(msgs[i]);
        sb_free(&bt->src[i]);
    }
    for (int i = 0; i < bt->n; i++) {
        free_all(bt->g[i].pg, bt->g[i].buf);
        cand_set_free(bt->g[i].cs);
        prim_graph_free(bt->g[i].pg);
    }
    free(bt->g);
    free(bt->jobs);
}

static void batch_init(Batch *bt) {
    memset(bt, 0, sizeof *bt);
    for (int i = 0; i < 2; i++) {
        sb_init(&bt->src[i]);
        sb_puts(&bt->src[i], target_cpu.prelude(&g_m));
    }
}

enum {
    NONE = ATTN_MASK_NONE,
    KEYS = ATTN_MASK_KEYS,
    FULL = ATTN_MASK_FULL,
    CAUSAL = ATTN_MASK_CAUSAL
};
enum { NOSC = ATTN_SCALE_NONE, MUL = ATTN_SCALE_MUL, DIV = ATTN_SCALE_DIV };

// Hand-picked shapes: every length of the issue as M and as N, M != N both ways (causal with
// N < M has rows with every key masked), head dims 24 to 256, Dv != D, every mask and scale.
static void cpu_fixed(void) {
    static const struct {
        int64_t B, H, M, N, D, Dv;
        int mask, scale;
        bool split;
        int configs;
    } cs[] = {
        {1, 1, 1, 1, 32, 32, NONE, NOSC, false, 1},
        {1, 2, 2, 2, 64, 64, KEYS, MUL, true, 1},
        {2, 1, 7, 7, 24, 24, CAUSAL, DIV, false, 1},
        {1, 3, 16, 16, 40, 40, FULL, MUL, true, 1},
        {2, 2, 33, 33, 64, 64, CAUSAL, MUL, true, 12},
        {1, 2, 64, 64, 128, 128, KEYS, DIV, false, 3},
        {1, 1, 127, 127, 32, 48, FULL, NOSC, true, 1},
        {2, 1, 128, 128, 64, 64, CAUSAL, DIV, true, 3},
        {1, 12, 128, 128, 64, 64, CAUSAL, MUL, true, 1}, // GPT-2 small's attention
        {1, 2, 257, 257, 40, 24, KEYS, MUL, false, 6},
        {1, 1, 1024, 1024, 64, 64, CAUSAL, MUL, true, 1},
        {1, 2, 1, 257, 64, 64, NONE, MUL, true, 1},
        {1, 1, 7, 1024, 32, 32, KEYS, DIV, false, 1},
        {2, 2, 127, 33, 24, 40, FULL, DIV, true, 1},
        {1, 1, 33, 2, 128, 64, CAUSAL, NOSC, false, 1},
        {1, 1, 16, 64, 256, 256, NONE, MUL, true, 1},
        {1, 1, 128, 7, 128, 128, NONE, DIV, true, 1},
        {1, 2, 64, 4096, 32, 32, KEYS, DIV, false, 1},
        {1, 1, 4096, 4096, 64, 64, CAUSAL, MUL, true, 1},
    };
    Batch bt;
    batch_init(&bt);
    for (size_t i = 0; i < ORCH_COUNT(cs); i++) {
        if (ATTN_SANITIZED && cs[i].N == 4096 && cs[i].M == 4096)
            continue;
        AttnCase k = {.B = cs[i].B,
                      .H = cs[i].H,
                      .M = cs[i].M,
                      .N = cs[i].N,
                      .D = cs[i].D,
                      .Dv = cs[i].Dv,
                      .mask = cs[i].mask,
                      .scale = cs[i].scale,
                      .split = cs[i].split};
        add_case(&bt, k, cs[i].configs);
    }
    // PyTorch's SDPA export: P's NaNs become 0, with -inf masks and rows masked whole (O = 0).
    for (int i = 0; i < 2; i++) {
        AttnCase k = {.B = 2, .H = 2, .M = i ? 33 : 16, .N = i ? 77 : 16, .D = 64, .Dv = 64,
                      .mask = FULL, .scale = MUL, .split = i == 1, .nan_guard = true};
        add_case(&bt, k, 2);
    }
    // O's heads merged back by the candidate ([B, M, H * Dv]: rows H * Dv apart, heads Dv):
    // split or not, ViT-B/16's shape in one head pair and an odd one with a 1-row batch.
    static const struct {
        int64_t B, H, M, N, D, Dv;
        bool split;
    } mg[] = {
        {1, 2, 197, 197, 64, 64, true}, {2, 3, 5, 9, 8, 12, false}, {1, 1, 7, 3, 24, 40, true}};
    for (size_t i = 0; i < ORCH_COUNT(mg); i++) {
        AttnCase k = {.B = mg[i].B,
                      .H = mg[i].H,
                      .M = mg[i].M,
                      .N = mg[i].N,
                      .D = mg[i].D,
                      .Dv = mg[i].Dv,
                      .mask = i == 1 ? KEYS : NONE,
                      .scale = MUL,
                      .split = mg[i].split,
                      .out_merge = true};
        add_case(&bt, k, 2);
    }
    // One packed projection [M, B, 3 * H * D] split by Gathers (torch's MultiheadAttention, as
    // ViT exports it): the variant reads Q, K and V in place through one composed LAYOUT each.
    static const struct {
        int64_t B, H, M, D;
        int mask;
    } pk[] = {{1, 2, 197, 64, NONE}, {2, 3, 7, 24, KEYS}, {1, 1, 1, 32, CAUSAL}};
    for (size_t i = 0; i < ORCH_COUNT(pk); i++) {
        AttnCase k = {.B = pk[i].B,
                      .H = pk[i].H,
                      .M = pk[i].M,
                      .N = pk[i].M,
                      .D = pk[i].D,
                      .Dv = pk[i].D,
                      .mask = pk[i].mask,
                      .scale = MUL,
                      .packed = true,
                      .out_merge = i == 0};
        add_case(&bt, k, 2);
    }
    if (ATTN_SANITIZED)
        printf("  sanitizer build: the 4096 x 4096 case left out\n");
    run_batch(&bt);
}

// Grouped-query attention (K and V heads read by H / Hkv query heads through repeat_kv):
// the Llama block's 8 / 2 heads of 64 x 32, causal; multi-query; odd lengths; the heads merged
// back; the 16 / 4 heads of the full Llama with a key mask. Then rotary embeddings computed in
// the kernel's prologue: the Llama block, plain multi-head attention, odd lengths, multi-query.
static void cpu_gqa(void) {
    Batch bt;
    batch_init(&bt);
    static const struct {
        int64_t B, H, Hkv, M, N, D;
        int mask;
        bool split, merge, rope;
        int configs;
    } gq[] = {{1, 8, 2, 64, 64, 32, CAUSAL, true, true, false, 12},
              {2, 4, 1, 33, 33, 24, CAUSAL, false, false, false, 6},
              {1, 6, 3, 7, 130, 40, KEYS, true, false, false, 4},
              {1, 16, 4, 256, 256, 64, FULL, true, true, false, 3},
              {2, 4, 2, 1, 17, 32, NONE, false, false, false, 2},
              {1, 8, 2, 64, 64, 32, CAUSAL, true, true, true, 4},
              {2, 3, 0, 33, 33, 24, KEYS, false, false, true, 4},
              {1, 4, 1, 7, 130, 40, CAUSAL, true, false, true, 4}};
    for (size_t i = 0; i < ORCH_COUNT(gq); i++) {
        AttnCase k = {.B = gq[i].B,
                      .H = gq[i].H,
                      .Hkv = gq[i].Hkv,
                      .M = gq[i].M,
                      .N = gq[i].N,
                      .D = gq[i].D,
                      .Dv = gq[i].D,
                      .mask = gq[i].mask,
                      .scale = MUL,
                      .split = gq[i].split,
                      .out_merge = gq[i].merge,
                      .rope = gq[i].rope};
        add_case(&bt, k, gq[i].configs);
    }
    run_batch(&bt);
}

// Random shapes from the lengths and head dims.
static void cpu_random(void) {
    static const int64_t lens[] = {1, 2, 7, 16, 33, 64, 127, 128, 257};
    static const int64_t heads[] = {24, 32, 40, 64, 128};
    Batch bt;
    batch_init(&bt);
    for (int it = 0; it < 8; it++) {
        AttnCase k = {.B = 1 + rand() % 2, .H = 1 + rand() % 3};
        k.M = lens[rand() % (int)ORCH_COUNT(lens)];
        k.N = lens[rand() % (int)ORCH_COUNT(lens)];
        k.D = heads[rand() % (int)ORCH_COUNT(heads)];
        k.Dv = rand() % 2 ? k.D : heads[rand() % (int)ORCH_COUNT(heads)];
        k.mask = rand() % ATTN_MASK_COUNT;
        k.scale = rand() % ATTN_SCALE_COUNT;
        k.split = rand() % 2;
        add_case(&bt, k, 1);
    }
    run_batch(&bt);
}

// ORCH_ATTN_FULL=1: every mask x scale x split over lengths and head dims.
static void cpu_full(void) {
    const char *full = getenv("ORCH_ATTN_FULL");
    if (!full || strcmp(full, "0") == 0) {
        printf("  skip: the exhaustive sweep (set ORCH_ATTN_FULL=1)\n");
        return;
    }
    static const int64_t lens[][2] = {{1, 1},     {2, 7},    {16, 16},  {33, 127},
                                      {128, 128}, {257, 64}, {64, 1024}};
    static const int64_t heads[][2] = {{32, 32}, {64, 64}, {128, 128}, {24, 40}, {40, 24}};
    for (size_t h = 0; h < ORCH_COUNT(heads); h++) {
        Batch bt;
        batch_init(&bt);
        for (size_t l = 0; l < ORCH_COUNT(lens); l++)
            for (int mask = 0; mask < ATTN_MASK_COUNT; mask++)
                for (int scale = 0; scale < ATTN_SCALE_COUNT; scale++)
                    for (int split = 0; split < 2; split++) {
                        AttnCase k = {.B = 2,
                                      .H = 2,
                                      .M = lens[l][0],
                                      .N = lens[l][1],
                                      .D = heads[h][0],
                                      .Dv = heads[h][1],
                                      .mask = mask,
                                      .scale = scale,
                                      .split = split};
                        add_case(&bt, k, 3);
                    }
        run_batch(&bt);
    }
}

static void counts(void) {
    printf("  %d graphs, %d CPU kernels checked\n", g_graphs, g_kernels);
    CHECK(g_kernels >= 60);
}

int main(void) {
    unsigned seed =
        getenv("ORCH_TEST_SEED") ? (unsigned)atoi(getenv("ORCH_TEST_SEED")) : (unsigned)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("seed %u\n", seed);
    srand(seed);
    Err e = {0};
    if (target_open(&target_cpu, NULL, &g_m, &e) != ST_OK) {
        printf("hw_detect: %s\n", e.msg);
        return 1;
    }
    g_hw = g_m.hw;
    printf("hw: %s\n", g_hw.fingerprint);
    g_time = getenv("ORCH_ATTN_TIME") && strcmp(getenv("ORCH_ATTN_TIME"), "0") != 0;
    const char *only = getenv("ORCH_TEST_ONLY");
#define RUN_CASE(fn)                                                                               \
    do {                                                                                           \
        if (!only || strcmp(only, #fn) == 0)                                                       \
            RUN(fn);                                                                               \
    } while (0)
    RUN_CASE(detection);
    RUN_CASE(near_misses);
    RUN_CASE(cpu_fixed);
    RUN_CASE(cpu_gqa);
    RUN_CASE(cpu_random);
    RUN_CASE(cpu_full);
    if (!only)
        RUN(counts);
    return CHECK_DONE();
}
