// Unit tests of the CUDA target's fused attention kernels (backend/cuda/emit_attention_cuda.c).
// Attention graphs (attn_graphs.h: head split or not, every mask kind and scale, odd
// sequence lengths and head dims, Dv != D) are cleaned up and enumerated with attention on; each
// must give exactly two attention candidates (the core, and the variant reading the projections
// through its LAYOUT primitives), both accepted by the CUDA target.
//   compile: every config of both candidates for a described A100 (sm_80) and H100 (sm_90a) is
//   emitted through cugen_emit (the target's dispatch), its launch checked against the device
//   (shared memory, threads, grid), and compiled by NVRTC, many kernels per program, the
//   programs in parallel threads; the quick cases compile their best configs only (NVRTC takes
//   ~0.1 s a kernel). Skips NVRTC when it cannot be loaded, or with ORCH_CUGEN_EMIT_ONLY=1 (the
//   sanitizer pass).
//   The same for the tensor-core configs under each reduced precision (TargetOptions.precision
//   tf32, fp16, bf16: every one emitted, the best of a third of the cases compiled), and the
//   configs offered: tensor cores only under those precisions and on sm_80+; the causal bound
//   found from a constant mask (and not from a mask input), and its model time.
//   GPU: on a GPU, sequence lengths 1 .. 4096 (non-multiples of every tile), head dims 32, 64,
//   128, 256 and odd ones, Dv != D, every mask kind and scale, split or not: the best configs of
//   both candidates, SIMT and (per precision) tensor-core ones, run on random inputs and are
//   compared with the primitive interpreter at |got - ref| <= tol (|ref| + max|ref|): tol 1e-4
//   for SIMT float32; for tensor cores 4u, u the unit roundoff of the operands (2^-11 for TF32
//   and FP16: 1.95e-3; 2^-8 for BF16: 1.56e-2), times sqrt(D) where the scores are not scaled
//   by 1/sqrt(D) (their rounding error grows with them). The best config's time (CUDA events,
//   median) is printed per case and kind, and SIMT against tensor cores on BERT's shapes.
//   Without a GPU the case prints a skip line (ORCH_REQUIRE_GPU=1: a failure).
//   Half storage (every tensor float16 or bfloat16, as the half-storage pass leaves them; some
//   with O cast to a float32 output, the CAST inside the candidate): every config under the
//   matching precision emitted for both GPUs, the best SIMT and tensor-core ones compiled, the
//   tensor-core kernels checked to stage half tiles as they lie (16-byte cp.async where rows
//   allow; V's fragments by ldmatrix) and to be offered only for the mma of the storage type; on
//   a GPU, lengths 1, odd and past a tile, head dims 32, 64, 128 and odd, every mask kind, run
//   against the interpreter
//   (which rounds every intermediate to half) at tol 4u, u the storage type's unit roundoff,
//   times sqrt(D) for unscaled scores.
//   Grouped-query attention (K/V heads shared through repeat_kv): the variant's K/V group, its
//   cp.async configs reading K and V tiles from the K/V heads, the best configs compiled; on a
//   GPU, run against the interpreter with the other lengths. Rotary embeddings on Q and K: the
//   variant computing them in the prologue accepted, its best configs compiled (and on a GPU run).
//   Tensor-core key splits (blocks merging through a global workspace) and key warps (warps of
//   a block sharing each key tile, merging through shared memory): the best configs with each,
//   on a GPU, against the interpreter (decoding, splits past the causal bound, masks, odd head
//   dims, half storage); every tensor-core config of the transformer block's shape timed.
// Environment: ORCH_TEST_SEED; ORCH_TEST_ONLY=CASE runs one case; ORCH_ATTN_ALL=1 compiles every
// config of every compile case; ORCH_ATTN_DUMP=I prints the sm_90a programs of compile case I (from
// 1).
#include "../attn_graphs.h"
#include "candidates/attention.h"
#include "candidates/candidates.h"
#include "../cuda_hw.h"
#include "../gpu_check.h"
#include "passes/passes.h"
#include "interp/prim_interp.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_attn.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/nvrtc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// The named fields of attention config k (cugen_attn.h).
static CuAttnConfig acfg(const KernelConfig *k) {
    CuAttnConfig a;
    cuattn_config_unpack(k, &a);
    return a;
}

static CudaHw g_cu[2]; // described A100 (sm_80), H100 (sm_90a)
static CudaHw g_t4;    // a described T4 (sm_75): no tensor-core attention
static bool g_nvrtc, g_emit_only;
// make test (no GPU): ORCH_CUGEN_SM90_ONLY=1 compiles nothing for the A100, ORCH_CUGEN_SAMPLE > 1
// leaves out the every-N-th spreads; every config is still emitted and its launch checked.
static bool g_sm90_only, g_sampled;
// emit_case keeps only the tensor-core configs with key splits (g_keep_split) or key warps
// (g_keep_kw) where set.
static bool g_keep_split, g_keep_kw;
static const CudaApi *g_api;
static CudaDevice g_dev;
static CudaHw g_dhw; // the detected device
static Err g_gpu_err;
static int g_cases, g_emitted, g_compiled, g_gpu_ran;

// The reduced precisions and the tensor-core arithmetic each selects; u: the operands' unit
// roundoff.
typedef struct Prec {
    Precision prec;
    int mma;
    const char *name;
    double u;
} Prec;
static const Prec g_precs[] = {
    {PREC_TF32, CUA_MMA_TF32, "tf32", 0x1p-11},
    {PREC_FP16, CUA_MMA_F16, "fp16", 0x1p-11},
    {PREC_BF16, CUA_MMA_BF16, "bf16", 0x1p-8},
};
// The emitters' options under float32 (the default) and under precision p.
static const TargetOptions g_fp32 = {.precision = PREC_FP32};
static TargetOptions prec_opt(Precision p) {
    return (TargetOptions){.precision = p};
}
static const char *const g_kind[] = {"simt", "tf32", "fp16", "bf16"}; // by CUA_MMA_*
static double g_worst[4];      // the largest |got - ref| / bound per kind (GPU half)
static double g_worst_half[4]; // the same, half-storage cases

// The comparison's tol (see the top): 1e-4 for SIMT float32, 4u for tensor cores, times sqrt(D)
// for unscaled scores.
static double tolerance(const AttnCase *k, int mma) {
    if (attn_dt(k) != DT_FLOAT) // half storage: the reference rounds S, E, l, P and O to half
        return 4 * (k->dt == DT_FLOAT16 ? 0x1p-11 : 0x1p-8) *
               (k->scale == ATTN_SCALE_NONE ? fmax(1.0, sqrt((double)k->D)) : 1.0);
    if (mma == CUA_MMA_SIMT)
        return 1e-4;
    double u = g_precs[mma - 1].u;
    return 4 * u * (k->scale == ATTN_SCALE_NONE ? fmax(1.0, sqrt((double)k->D)) : 1.0);
}

// The g_precs index of a half-storage case's precision (fp16 for float16, bf16 for bfloat16);
// -1 for float32.
static int half_prec(const AttnCase *k) {
    return attn_dt(k) == DT_FLOAT16 ? 1 : attn_dt(k) == DT_BFLOAT16 ? 2 : -1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

// ---- one case: its graph and attention candidates ----

typedef struct Prep {
    AttnCase k;
    PrimGraph *pg;
    CandidateSet *cs;
    const Candidate *cand[2]; // the core, the variant with the LAYOUT primitives (with cast_out:
                              // both ending with the CAST to float32)
} Prep;

static void prep_free(Prep *p) {
    cand_set_free(p->cs);
    prim_graph_free(p->pg);
    memset(p, 0, sizeof *p);
}

// Builds, cleans up and enumerates the case; false (a failed check) unless it has exactly the
// two attention candidates (four with cast_out: each also ending with the CAST), all accepted
// by the CUDA target.
static bool prep(Prep *p, const AttnCase *k) {
    memset(p, 0, sizeof *p);
    p->k = *k;
    p->pg = attn_graph(k);
    Err e = {0};
    int rc = fission_cleanup(p->pg, NULL, &e);
    if (rc == ST_OK)
        rc = prim_graph_verify(p->pg, &e);
    CandRules r = cand_rules_default();
    r.attention = true;
    if (rc == ST_OK)
        rc = cand_enumerate(p->pg, &r, 0, &p->cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", k->name, e.msg);
    if (rc != ST_OK)
        return false;
    int n = 0;
    for (int i = 0; i < p->cs->n; i++) {
        AttnSpec a;
        const Candidate *c = &p->cs->c[i];
        if (!attn_analyse(p->pg, c, &a))
            continue;
        // With rotary embeddings the variant is the one computing them (the prologue).
        bool layouts_only = k->rope && a.n_layouts > 0 && a.n_prologue == 0;
        if ((a.cast >= 0) == k->cast_out && (a.out_layout >= 0) == k->out_merge && !layouts_only)
            p->cand[a.n_layouts > 0 || a.n_prologue > 0] = c;
        n++;
        CHECK_MSG(a.dt == attn_dt(k) && (a.cast < 0 || k->cast_out),
                  "%s: analysed as dtype %d, cast %d", k->name, (int)a.dt, a.cast);
        CHECK_MSG(a.M == k->M && a.N == k->N && a.D == k->D && a.Dv == k->Dv &&
                      a.B == k->B * k->H,
                  "%s: analysed as M %lld N %lld D %lld Dv %lld B %lld", k->name, (long long)a.M,
                  (long long)a.N, (long long)a.D, (long long)a.Dv, (long long)a.B);
        CHECK_MSG(target_cuda.supports(&(TargetMachine){.target = &target_cuda}, p->pg, c) &&
                      cugen_attn_supports(p->pg, c, &g_fp32),
                  "%s: attention candidate %d (%d prims) refused by the CUDA target", k->name,
                  c->id, c->n_prims);
    }
    const int want = (k->cast_out || k->out_merge ? 2 : 1) * (k->rope ? 3 : 2);
    CHECK_MSG(n == want && p->cand[0] && p->cand[1] && p->cs->stats.attention == want,
              "%s: %d attention candidates (stats %d), expected the core and its layout variant%s",
              k->name, n, p->cs->stats.attention, k->cast_out ? ", with and without the CAST" : "");
    return n == want && p->cand[0] && p->cand[1];
}

// ---- emission and NVRTC ----

typedef struct Job {
    const Prep *p;
    const Candidate *c;
    KernelConfig cfg;
    CudaLaunch ln;
    char fn[48];
    double ms; // measured (GPU half)
} Job;

typedef struct Program {
    StrBuf src;
    Job *jobs;
    int nj, cap;
    int case_idx;
    const char *arch;
    int rc;
    Err e;
    void *cubin;
    size_t size;
} Program;

// Programs to compile, each of at most `chunk` kernels of one case and architecture (NVRTC
// compiles a program's kernels one after another; programs compile in parallel).
typedef struct Batch {
    Program *g;
    int n, cap;
    int chunk;
} Batch;

static Program *batch_open(Batch *b, int case_idx, const char *arch) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 16;
        b->g = xrealloc(b->g, sizeof(Program) * (size_t)b->cap);
    }
    Program *g = &b->g[b->n++];
    memset(g, 0, sizeof *g);
    sb_init(&g->src);
    sb_puts(&g->src, cugen_prelude());
    g->case_idx = case_idx;
    g->arch = arch;
    return g;
}

static void batch_free(Batch *b) {
    for (int i = 0; i < b->n; i++) {
        sb_free(&b->g[i].src);
        free(b->g[i].jobs);
        free(b->g[i].cubin);
    }
    free(b->g);
    memset(b, 0, sizeof *b);
}

// Emits the best k configs of kind `mma` (CUA_MMA_*; -1: any) of both candidates of case p for
// hw (through cugen_emit, the target's dispatch) and checks each launch against the device; the
// configs q < n_best, and every stride-th (stride > 0), go into the batch's programs to be
// compiled.
static void emit_case(Batch *b, const Prep *p, int case_idx, const CudaHw *hw,
                      const TargetOptions *opt, int k, int n_best, int stride, bool with_cp0,
                      int mma) {
    Program *g = NULL;
    if (g_sm90_only && hw->cc_major < 9)
        n_best = 0, stride = 0;
    if (g_sampled)
        stride = 0;
    for (int ci = 0; ci < 2; ci++) {
        const Candidate *c = p->cand[ci];
        KernelConfig cf[2 * 640];
        int n = cugen_attn_configs(p->pg, c, hw, opt, cf, 640), kept = 0;
        for (int q = 0; q < n; q++)
            if ((mma < 0 || acfg(&cf[q]).mma == mma) && kept < k &&
                (!g_keep_split || acfg(&cf[q]).split > 1) && (!g_keep_kw || acfg(&cf[q]).kw > 1))
                cf[kept++] = cf[q];
        n = kept;
        CHECK_MSG(n >= 1, "%s: no config of kind %d for %s", p->k.name, mma, hw->arch);
        // with_cp0: each cp.async config also staging through registers and cexpr.
        for (int q = 0, n0 = n; with_cp0 && q < n0; q++) {
            CuAttnConfig ac = acfg(&cf[q]);
            if (ac.cp != 1)
                continue;
            ac.cp = 0;
            cuattn_config_pack(&ac, &cf[n]);
            cf[n].score = cf[q].score;
            n++;
        }
        if (with_cp0)
            n_best = n;
        for (int q = 0; q < n; q++) {
            bool compile = q < n_best || (stride > 0 && q % stride == 0);
            Job j;
            memset(&j, 0, sizeof j);
            j.p = p;
            j.c = c;
            j.cfg = cf[q];
            snprintf(j.fn, sizeof j.fn, "attn_%d_%d_%d_%d", case_idx, ci, mma < 0 ? 0 : mma, q);
            StrBuf scratch;
            sb_init(&scratch);
            if (compile && (!g || g->nj >= b->chunk))
                g = batch_open(b, case_idx, hw->arch);
            Err e = {0};
            int rc = cugen_emit(p->pg, c, &cf[q], hw, opt, j.fn, compile ? &g->src : &scratch,
                                &j.ln, &e);
            sb_free(&scratch);
            CHECK_MSG(rc == ST_OK, "%s: emit '%s' for %s: %s", p->k.name, cf[q].desc, hw->arch,
                      e.msg);
            if (rc)
                continue;
            AttnSpec a;
            attn_analyse(p->pg, c, &a);
            unsigned threads = j.ln.block[0] * j.ln.block[1] * j.ln.block[2];
            CHECK_MSG(j.ln.smem <= (unsigned)hw->smem_per_block_optin && threads <= 1024 &&
                          threads % 32 == 0 && j.ln.grid[0] >= (unsigned)a.B &&
                          j.ln.grid[0] % (unsigned)a.B == 0 && !j.ln.lib,
                      "%s '%s' on %s: grid %u, block %u, smem %u", p->k.name, cf[q].desc,
                      hw->arch, j.ln.grid[0], threads, j.ln.smem);
            g_emitted++;
            if (!compile)
                continue;
            if (g->nj == g->cap) {
                g->cap = g->cap ? 2 * g->cap : 16;
                g->jobs = xrealloc(g->jobs, sizeof(Job) * (size_t)g->cap);
            }
            g->jobs[g->nj++] = j;
        }
    }
}

static void *compile_thread(void *arg) {
    Program *g = arg;
    NvrtcOptions o = {.arch = g->arch};
    g->rc = nvrtc_compile(g->src.s, "attention", &o, &g->cubin, &g->size, &g->e);
    return NULL;
}

// Compiles the batch's programs on `par` threads, each taking the next program left; checks
// each.
typedef struct Pool {
    Batch *b;
    int next;
    pthread_mutex_t mu;
} Pool;

static void *pool_thread(void *arg) {
    Pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->b->n)
            return NULL;
        compile_thread(&p->b->g[i]);
    }
}

static void compile_all(Batch *b, int par) {
    if (!g_nvrtc || g_emit_only)
        return;
    Pool pool = {b, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[64];
    par = ORCH_MAX(1, ORCH_MIN(par, 64));
    for (int i = 0; i < par; i++)
        pthread_create(&th[i], NULL, pool_thread, &pool);
    for (int i = 0; i < par; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < b->n; i++) {
        Program *g = &b->g[i];
        CHECK_MSG(g->rc == ST_OK, "%s (%d kernels): %.1500s", g->arch, g->nj, g->e.msg);
        if (g->rc == ST_OK)
            g_compiled += g->nj;
    }
}

// Threads for NVRTC: the machine's cores (2 on the CI machine).
static int cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return (int)ORCH_MAX(2, ORCH_MIN(n, 32));
}

// ---- the compile half ----

static AttnCase mk(int64_t B, int64_t H, int64_t M, int64_t N, int64_t D, int64_t Dv, int mask,
                   int scale, bool split) {
    AttnCase k = {.B = B, .H = H, .M = M, .N = N, .D = D, .Dv = Dv, .mask = mask,
                  .scale = scale, .split = split};
    attn_case_name(&k);
    return k;
}

// K^T dim-major (a model's materialised K^T; the tensor-core kernel copies its tiles as they lie
// where N % 4 == 0).
static AttnCase mk_ktdim(int64_t B, int64_t H, int64_t M, int64_t N, int64_t D, int64_t Dv,
                         int mask, int scale) {
    AttnCase k = mk(B, H, M, N, D, Dv, mask, scale, false);
    k.kt_dim_major = true;
    attn_case_name(&k);
    return k;
}

// O's heads merged back by the candidate ([B, M, H * Dv], PyTorch's permute + view after SDPA).
static AttnCase mk_merged(int64_t B, int64_t H, int64_t M, int64_t N, int64_t D, int64_t Dv,
                          int mask, bool split) {
    AttnCase k = mk(B, H, M, N, D, Dv, mask, ATTN_SCALE_MUL, split);
    k.out_merge = true;
    attn_case_name(&k);
    return k;
}

// Q, K and V from one packed projection [M, B, 3 * H * D] (torch's MultiheadAttention, ViT):
// the layout variant reads it in place.
static AttnCase mk_packed(int64_t B, int64_t H, int64_t M, int64_t D, int mask, bool out_merge) {
    AttnCase k = mk(B, H, M, M, D, D, mask, ATTN_SCALE_MUL, false);
    k.packed = true;
    k.out_merge = out_merge;
    attn_case_name(&k);
    return k;
}

// Grouped-query attention: Hkv K/V heads read by H / Hkv query heads through repeat_kv (dt 0:
// float32, else half storage).
static AttnCase mk_gqa(int64_t B, int64_t H, int64_t Hkv, int64_t M, int64_t N, int64_t D, int mask,
                       bool split, DType dt) {
    AttnCase k = mk(B, H, M, N, D, D, mask, ATTN_SCALE_MUL, split);
    k.Hkv = Hkv;
    k.dt = dt;
    attn_case_name(&k);
    return k;
}

// The case with rotary embeddings on Q and K (its prologue variant is the one run).
static AttnCase with_rope(AttnCase k) {
    k.rope = true;
    attn_case_name(&k);
    return k;
}

// PyTorch's SDPA export: P = WHERE(ISNAN(E / l), 0, E / l), -inf masks, whole rows masked.
static AttnCase mk_guard(int64_t B, int64_t H, int64_t M, int64_t N, int64_t D, int64_t Dv,
                         bool split) {
    AttnCase k = mk(B, H, M, N, D, Dv, ATTN_MASK_FULL, ATTN_SCALE_MUL, split);
    k.nan_guard = true;
    attn_case_name(&k);
    return k;
}

// A dim-major K^T (a model's materialised K^T) is staged as it lies by the tensor-core configs
// with cp.async where N % 4 == 0 (their key fragments read down its d rows), and not otherwise:
// not for N % 4 != 0, not for a key-major K (the layout variant reading [B, H, N, D] through
// the transpose; the core candidate reads the transpose's output, dim-major), not by SIMT.
static void ktdim_staging(void) {
    const struct {
        AttnCase k;
        bool want[2]; // core, layout variant
    } cases[] = {
        {mk_ktdim(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL), {true, true}},
        {mk_ktdim(1, 2, 33, 127, 33, 17, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV), {false, false}},
        {mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false), {true, false}},
    };
    const TargetOptions fp16 = prec_opt(PREC_FP16);
    for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
        Prep p;
        if (!prep(&p, &cases[i].k))
            continue;
        for (int ci = 0; ci < 2; ci++) {
            KernelConfig cf[640];
            int n = cugen_attn_configs(p.pg, p.cand[ci], &g_cu[1], &fp16, cf, 640), seen = 0;
            for (int q = 0; q < n; q++) {
                StrBuf src;
                sb_init(&src);
                CudaLaunch ln;
                Err e = {0};
                CHECK_MSG(cugen_emit(p.pg, p.cand[ci], &cf[q], &g_cu[1], &fp16, "k", &src, &ln,
                                     &e) == ST_OK,
                          "%s %s: %s", cases[i].k.name, cf[q].desc, e.msg);
                bool tc_cp = acfg(&cf[q]).mma != CUA_MMA_SIMT && acfg(&cf[q]).cp != 0;
                bool staged = src.s && strstr(src.s, "orch_attn_vfrag_f16(bf, Kb") != NULL;
                CHECK_MSG(staged == (cases[i].want[ci] && tc_cp), "%s candidate %d %s: K^T %s",
                          cases[i].k.name, ci, cf[q].desc,
                          staged ? "staged dim-major" : "not staged dim-major");
                seen += staged;
                sb_free(&src);
            }
            if (cases[i].want[ci])
                CHECK_MSG(seen > 0, "%s candidate %d: no dim-major staging", cases[i].k.name, ci);
        }
        prep_free(&p);
    }
}

// Every mask kind and scale, split or not, single rows and keys, odd and large head dims.
static void compile_cases(void) {
    const AttnCase cases[] = {
        mk(2, 3, 7, 33, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, true),
        mk(1, 2, 1, 1, 32, 32, ATTN_MASK_NONE, ATTN_SCALE_NONE, false),
        mk(1, 2, 33, 127, 33, 17, ATTN_MASK_FULL, ATTN_SCALE_DIV, false),
        mk(2, 1, 128, 128, 128, 128, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true),
        mk(1, 1, 5, 300, 256, 256, ATTN_MASK_CAUSAL, ATTN_SCALE_NONE, true),
        mk(1, 4, 257, 7, 48, 80, ATTN_MASK_KEYS, ATTN_SCALE_DIV, false),
        mk(1, 12, 128, 128, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, true),
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false),
        mk(3, 2, 1000, 1, 16, 8, ATTN_MASK_FULL, ATTN_SCALE_MUL, true),
        mk(1, 2, 4096, 4096, 256, 16, ATTN_MASK_NONE, ATTN_SCALE_DIV, false),
        mk_guard(2, 2, 33, 77, 64, 64, true),
        mk_ktdim(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL),
        mk_ktdim(1, 2, 33, 128, 33, 17, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV),
        mk_merged(1, 12, 197, 197, 64, 64, ATTN_MASK_NONE, true),
        mk_merged(2, 3, 33, 77, 32, 48, ATTN_MASK_KEYS, false),
        mk_packed(1, 12, 197, 64, ATTN_MASK_NONE, true),
        mk_packed(2, 3, 33, 24, ATTN_MASK_CAUSAL, false),
    };
    const int nc = (int)ORCH_COUNT(cases);
    bool all = getenv("ORCH_ATTN_ALL") && strcmp(getenv("ORCH_ATTN_ALL"), "0") != 0;
    Prep *ps = xcalloc((size_t)nc, sizeof(Prep));
    Batch b = {.chunk = 8};
    int dump = getenv("ORCH_ATTN_DUMP") ? atoi(getenv("ORCH_ATTN_DUMP")) : 0;
    double t0 = now();
    for (int i = 0; i < nc; i++) {
        if (!prep(&ps[i], &cases[i]))
            continue;
        g_cases++;
        // Every config is emitted; NVRTC compiles (~0.25 s a kernel) the best one of each
        // candidate for the H100 and every 24th of two cases (spreading the tile shapes, splits
        // and staging variants over odd dims), the best one of half the cases for the A100; all
        // of them with ORCH_ATTN_ALL=1.
        bool spread = i == 0 || i == 2;
        emit_case(&b, &ps[i], i, &g_cu[1], &g_fp32, 640, all ? 640 : 1,
                  all      ? 0
                  : spread ? 24
                           : 0,
                  false, CUA_MMA_SIMT);
        emit_case(&b, &ps[i], i, &g_cu[0], &g_fp32, 640,
                  all     ? 640
                  : i % 2 ? 0
                          : 1,
                  0, false, CUA_MMA_SIMT);
        // The tensor-core configs under each precision: every one emitted, the best of each
        // candidate compiled for a third of the cases (the H100; the A100 on every other of
        // them), all with ORCH_ATTN_ALL=1.
        for (int pi = 0; pi < (int)ORCH_COUNT(g_precs); pi++) {
            const TargetOptions o = prec_opt(g_precs[pi].prec);
            bool mine = i % 3 == pi;
            emit_case(&b, &ps[i], i, &g_cu[1], &o, 640,
                      all    ? 640
                      : mine ? 1
                             : 0,
                      0, false, g_precs[pi].mma);
            emit_case(&b, &ps[i], i, &g_cu[0], &o, 640,
                      all             ? 640
                      : mine && i % 2 ? 1
                                      : 0,
                      0, false, g_precs[pi].mma);
        }
        for (int q = 0; q < b.n && dump == i + 1; q++)
            if (b.g[q].case_idx == i && b.g[q].arch == g_cu[1].arch)
                printf("//// program %d\n%s\n", q, b.g[q].src.s);
        KernelConfig best;
        if (cugen_attn_configs(ps[i].pg, ps[i].cand[1], &g_cu[1], &g_fp32, &best, 1) == 1)
            printf("  %-58s H100 best '%s' (model %.1f us)\n", cases[i].name, best.desc + 9,
                   best.score * 1e6);
    }
    double t1 = now();
    compile_all(&b, cpus());
    printf("  %d kernels emitted in %.2f s; %d compiled by NVRTC in %.1f s%s\n", g_emitted,
           t1 - t0, g_compiled, now() - t1,
           !g_nvrtc ? " (no NVRTC)" : g_emit_only ? " (ORCH_CUGEN_EMIT_ONLY)" : "");
    CHECK(g_emitted > 500);
    CHECK(!g_nvrtc || g_emit_only || g_compiled >= (g_sm90_only || g_sampled ? 20 : 70));
    batch_free(&b);
    for (int i = 0; i < nc; i++)
        prep_free(&ps[i]);
    free(ps);
}

// Half storage: dtype dt (DT_FLOAT16 / DT_BFLOAT16), O cast to a float32 output when cast_out.
static AttnCase mk_half(DType dt, int64_t B, int64_t H, int64_t M, int64_t N, int64_t D, int64_t Dv,
                        int mask, int scale, bool split, bool cast_out) {
    AttnCase k = mk(B, H, M, N, D, Dv, mask, scale, split);
    k.dt = dt;
    k.cast_out = cast_out;
    attn_case_name(&k);
    return k;
}

static AttnCase with_ktdim(AttnCase k) {
    k.kt_dim_major = true;
    attn_case_name(&k);
    return k;
}

static AttnCase with_packed(AttnCase k) {
    k.packed = true;
    k.split = false;
    attn_case_name(&k);
    return k;
}

static AttnCase with_guard(AttnCase k) {
    k.mask = ATTN_MASK_FULL;
    k.nan_guard = true;
    attn_case_name(&k);
    return k;
}

// Half storage (float16, bfloat16): every config under the storage type's precision emitted for
// the H100 and the A100, the best SIMT and the best two tensor-core configs of each candidate
// compiled for the H100 (and every 16th of two cases), the best of each kind for the A100 on
// every other case. The tensor-core configs: only the storage type's mma (none under another
// precision), fragments read from half tiles, 16-byte cp.async of 8 halves exactly where a
// tile's rows allow it (D or Dv a multiple of 8, or a dim-major K^T with N a multiple of 8).
static void compile_half(void) {
    const DType F16 = DT_FLOAT16, BF16 = DT_BFLOAT16;
    const AttnCase cases[] = {
        mk_half(F16, 2, 3, 7, 33, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, true, false),
        mk_half(BF16, 1, 2, 1, 1, 32, 32, ATTN_MASK_NONE, ATTN_SCALE_NONE, false, false),
        mk_half(F16, 1, 2, 33, 127, 33, 17, ATTN_MASK_FULL, ATTN_SCALE_DIV, false, false),
        mk_half(BF16, 2, 1, 128, 128, 128, 128, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true, false),
        mk_half(F16, 1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, true),
        mk_half(F16, 1, 1, 5, 300, 256, 256, ATTN_MASK_CAUSAL, ATTN_SCALE_NONE, true, false),
        mk_half(BF16, 2, 3, 257, 33, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV, true, true),
        with_ktdim(
            mk_half(F16, 1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, false)),
        with_ktdim(
            mk_half(BF16, 1, 2, 33, 128, 33, 17, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV, false, false)),
        with_guard(
            mk_half(BF16, 2, 2, 33, 77, 64, 64, ATTN_MASK_FULL, ATTN_SCALE_MUL, true, false)),
        with_packed(
            mk_half(F16, 1, 12, 197, 197, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, false)),
    };
    const int nc = (int)ORCH_COUNT(cases);
    Prep *ps = xcalloc((size_t)nc, sizeof(Prep));
    Batch b = {.chunk = 8};
    int emitted0 = g_emitted, compiled0 = g_compiled;
    double t0 = now();
    for (int i = 0; i < nc; i++) {
        const AttnCase *k = &cases[i];
        if (!prep(&ps[i], k))
            continue;
        const int own = half_prec(k);
        // Under another precision (fp32, tf32, the other half type): SIMT configs only.
        for (int pi = -1; pi < (int)ORCH_COUNT(g_precs); pi++) {
            if (pi == own)
                continue;
            const TargetOptions o = pi < 0 ? g_fp32 : prec_opt(g_precs[pi].prec);
            KernelConfig cf[640];
            int n = cugen_attn_configs(ps[i].pg, ps[i].cand[1], &g_cu[1], &o, cf, 640), tc = 0;
            for (int q = 0; q < n; q++)
                tc += acfg(&cf[q]).mma != CUA_MMA_SIMT;
            CHECK_MSG(n >= 1 && tc == 0, "%s under %s: %d configs, %d tensor-core", k->name,
                      pi < 0 ? "fp32" : g_precs[pi].name, n, tc);
        }
        const TargetOptions oo = prec_opt(g_precs[own].prec);
        bool spread = i == 0 || i == 3;
        emit_case(&b, &ps[i], i, &g_cu[1], &oo, 640, 1, 0, false, CUA_MMA_SIMT);
        emit_case(&b, &ps[i], i, &g_cu[1], &oo, 640, 2, spread ? 16 : 0, false, g_precs[own].mma);
        emit_case(&b, &ps[i], i, &g_cu[0], &oo, 640, i % 2 ? 0 : 1, 0, false, CUA_MMA_SIMT);
        emit_case(&b, &ps[i], i, &g_cu[0], &oo, 640, i % 2 ? 0 : 1, 0, false, g_precs[own].mma);
        // The tensor-core sources of the layouts candidate.
        const bool want16 = k->D % 8 == 0 || k->Dv % 8 == 0 || (k->kt_dim_major && k->N % 8 == 0);
        KernelConfig cf[640];
        int n = cugen_attn_configs(ps[i].pg, ps[i].cand[1], &g_cu[1], &oo, cf, 640), cp16 = 0,
            ncp = 0;
        for (int q = 0; q < n; q++) {
            if (acfg(&cf[q]).mma == CUA_MMA_SIMT)
                continue;
            CHECK_MSG(acfg(&cf[q]).mma == g_precs[own].mma, "%s: config '%s' under %s", k->name,
                      cf[q].desc, g_precs[own].name);
            StrBuf src;
            sb_init(&src);
            CudaLaunch ln;
            Err e = {0};
            int rc = cugen_emit(ps[i].pg, ps[i].cand[1], &cf[q], &g_cu[1], &oo, "k", &src, &ln, &e);
            CHECK_MSG(rc == ST_OK && strstr(src.s, "orch_attn_ldsm4t(b4, Vb") &&
                          !strstr(src.s, "orch_attn_vfrag_f16(bf") &&
                          !strstr(src.s, "orch_attn_vfrag_bf16(bf"),
                      "%s '%s': %s", k->name, cf[q].desc,
                      rc ? e.msg : "fragments not read from half tiles");
            if (rc == ST_OK && acfg(&cf[q]).cp) {
                ncp++;
                cp16 += strstr(src.s, "orch_attn_cph16(") != NULL;
            }
            sb_free(&src);
        }
        CHECK_MSG(ncp > 0 && (cp16 > 0) == want16,
                  "%s: %d of %d cp.async configs copy 16 bytes of halves (want %s)", k->name, cp16,
                  ncp, want16 ? "some" : "none");
        KernelConfig best;
        if (cugen_attn_configs(ps[i].pg, ps[i].cand[1], &g_cu[1], &oo, &best, 1) == 1)
            printf("  %-66s H100 best '%s' (model %.1f us)\n", k->name, best.desc + 9,
                   best.score * 1e6);
    }
    double t1 = now();
    compile_all(&b, cpus());
    printf("  %d kernels emitted in %.2f s; %d compiled by NVRTC in %.1f s%s\n",
           g_emitted - emitted0, t1 - t0, g_compiled - compiled0, now() - t1,
           !g_nvrtc      ? " (no NVRTC)"
           : g_emit_only ? " (ORCH_CUGEN_EMIT_ONLY)"
                         : "");
    CHECK(g_emitted - emitted0 > 300);
    CHECK(!g_nvrtc || g_emit_only ||
          g_compiled - compiled0 >= (g_sm90_only || g_sampled ? 20 : 50));
    batch_free(&b);
    for (int i = 0; i < nc; i++)
        prep_free(&ps[i]);
    free(ps);
}

// A packed projection read in place (ViT's QKV through three composed LAYOUTs with a Gather of
// a scalar index each): the loads are affine, so the layout variant has cp.async configs, SIMT
// and, under fp16 half storage, tensor-core ones copying 16 bytes.
static void packed_affine(void) {
    const AttnCase cases[] = {
        mk_packed(1, 12, 197, 64, ATTN_MASK_NONE, true),
        with_packed(mk_half(DT_FLOAT16, 1, 12, 197, 197, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL,
                            false, false)),
    };
    for (int i = 0; i < (int)ORCH_COUNT(cases); i++) {
        Prep p;
        if (!prep(&p, &cases[i]))
            continue;
        const int own = half_prec(&cases[i]);
        const TargetOptions o = own < 0 ? g_fp32 : prec_opt(g_precs[own].prec);
        KernelConfig cf[640];
        int n = cugen_attn_configs(p.pg, p.cand[1], &g_cu[1], &o, cf, 640), cp = 0, tc_cp16 = 0;
        for (int q = 0; q < n; q++) {
            if (!acfg(&cf[q]).cp)
                continue;
            cp++;
            if (own >= 0 && acfg(&cf[q]).mma != CUA_MMA_SIMT && tc_cp16 == 0) {
                StrBuf src;
                sb_init(&src);
                CudaLaunch ln;
                Err e = {0};
                if (cugen_emit(p.pg, p.cand[1], &cf[q], &g_cu[1], &o, "k", &src, &ln, &e) == ST_OK)
                    tc_cp16 += strstr(src.s, "orch_attn_cph16(") != NULL;
                sb_free(&src);
            }
        }
        CHECK_MSG(cp > 0, "%s: none of %d configs of the in-place variant stages by cp.async",
                  cases[i].name, n);
        CHECK_MSG(own < 0 || tc_cp16 > 0, "%s: no tensor-core config copies 16 bytes",
                  cases[i].name);
        printf("  %s: %d of %d configs by cp.async\n", cases[i].name, cp, n);
        prep_free(&p);
    }
}

// Grouped-query attention: the variant reading K and V through repeat_kv finds the K/V group,
// and its cp.async configs copy K and V tiles from the K/V heads (the block's base divides the
// head coordinate by the group); the best SIMT and tensor-core configs compile for both GPUs.
static void gqa_affine(void) {
    const AttnCase cases[] = {
        mk_gqa(1, 8, 2, 64, 64, 32, ATTN_MASK_CAUSAL, true, 0), // the Llama test block
        mk_gqa(2, 4, 1, 33, 77, 24, ATTN_MASK_KEYS, false, 0),  // multi-query, odd lengths
        mk_gqa(1, 16, 4, 256, 256, 64, ATTN_MASK_CAUSAL, true, DT_FLOAT16),
    };
    Prep ps[ORCH_COUNT(cases)];
    Batch b = {.chunk = 4};
    for (int i = 0; i < (int)ORCH_COUNT(cases); i++) {
        Prep *p = &ps[i];
        if (!prep(p, &cases[i])) {
            memset(p, 0, sizeof *p);
            continue;
        }
        const int64_t G = cases[i].H / cases[i].Hkv;
        AttnSpec a;
        attn_analyse(p->pg, p->cand[1], &a);
        CHECK_MSG(a.kv_group == G && a.kv_axis == 1, "%s: K/V group %lld on axis %d", cases[i].name,
                  (long long)a.kv_group, a.kv_axis);
        const int own = half_prec(&cases[i]);
        const TargetOptions o = own < 0 ? g_fp32 : prec_opt(g_precs[own].prec);
        KernelConfig cf[640];
        int n = cugen_attn_configs(p->pg, p->cand[1], &g_cu[1], &o, cf, 640), grouped = 0;
        char base[64];
        snprintf(base, sizeof base, " + a_l1 / %lld * ", (long long)G);
        for (int q = 0; q < n; q++) {
            if (!acfg(&cf[q]).cp)
                continue;
            StrBuf src;
            sb_init(&src);
            CudaLaunch ln;
            Err e = {0};
            CHECK_MSG(cugen_emit(p->pg, p->cand[1], &cf[q], &g_cu[1], &o, "k", &src, &ln, &e) ==
                          ST_OK,
                      "%s %s: %s", cases[i].name, cf[q].desc, e.msg);
            // Each base's line: the head coordinate divided by the group (one K/V head: no
            // head term at all).
            bool ok = src.s != NULL;
            for (int t = 0; t < 2 && ok; t++) {
                const char *l = strstr(src.s, t ? "*g_v = " : "*g_k = ");
                const char *h = l ? strstr(l, cases[i].Hkv > 1 ? base : "a_l1") : NULL;
                bool in_line = h && h < strchr(l, ';');
                ok = l && (cases[i].Hkv > 1 ? in_line : !in_line);
            }
            grouped += ok;
            sb_free(&src);
        }
        CHECK_MSG(grouped > 0, "%s: no cp.async config reads K and V from the K/V heads",
                  cases[i].name);
        printf("  %s: %d configs copy K and V tiles from the K/V heads\n", cases[i].name, grouped);
        for (int h = 0; h < 2; h++) {
            emit_case(&b, p, i, &g_cu[h], &g_fp32, 1, 1, 0, false, CUA_MMA_SIMT);
            const TargetOptions tc = prec_opt(own < 0 ? PREC_TF32 : g_precs[own].prec);
            emit_case(&b, p, i, &g_cu[h], &tc, 1, 1, 0, false,
                      own < 0 ? CUA_MMA_TF32 : g_precs[own].mma);
        }
    }
    int compiled0 = g_compiled;
    compile_all(&b, cpus());
    if (g_nvrtc && !g_emit_only)
        printf("  %d kernels compiled by NVRTC\n", g_compiled - compiled0);
    else
        printf("  NVRTC not loaded: emitted only\n");
    batch_free(&b);
    for (int i = 0; i < (int)ORCH_COUNT(cases); i++)
        if (ps[i].pg)
            prep_free(&ps[i]);
}

// Rotary embeddings computed in the kernel's prologue (the variant taking in the rotations of Q
// and K): accepted by the CUDA target, its best SIMT and tensor-core configs compiled for both
// GPUs (Q and K staged through cexpr, which computes the rotation as it loads).
static void rope_prologue(void) {
    AttnCase cases[] = {
        mk_gqa(1, 8, 2, 64, 64, 32, ATTN_MASK_CAUSAL, true, 0),
        mk_gqa(2, 3, 0, 33, 77, 24, ATTN_MASK_KEYS, false, 0),
        mk_gqa(1, 16, 4, 256, 256, 64, ATTN_MASK_CAUSAL, true, DT_FLOAT16),
    };
    Prep ps[ORCH_COUNT(cases)];
    Batch b = {.chunk = 4};
    for (int i = 0; i < (int)ORCH_COUNT(cases); i++) {
        cases[i].rope = true;
        attn_case_name(&cases[i]);
        Prep *p = &ps[i];
        if (!prep(p, &cases[i])) {
            memset(p, 0, sizeof *p);
            continue;
        }
        AttnSpec a;
        attn_analyse(p->pg, p->cand[1], &a);
        CHECK_MSG(a.n_prologue == 4, "%s: %d elementwise primitives in the prologue", cases[i].name,
                  a.n_prologue);
        const int own = half_prec(&cases[i]);
        for (int h = 0; h < 2; h++) {
            emit_case(&b, p, i, &g_cu[h], &g_fp32, 1, 1, 0, false, CUA_MMA_SIMT);
            const TargetOptions tc = prec_opt(own < 0 ? PREC_TF32 : g_precs[own].prec);
            emit_case(&b, p, i, &g_cu[h], &tc, 1, 1, 0, false,
                      own < 0 ? CUA_MMA_TF32 : g_precs[own].mma);
        }
    }
    int compiled0 = g_compiled;
    compile_all(&b, cpus());
    if (g_nvrtc && !g_emit_only)
        printf("  %d kernels compiled by NVRTC\n", g_compiled - compiled0);
    batch_free(&b);
    for (int i = 0; i < (int)ORCH_COUNT(cases); i++)
        if (ps[i].pg)
            prep_free(&ps[i]);
}

// The configs' model: sorted, every config of the attention class, key splits for decoding,
// head dims past ATTN_MAX_HEAD refused.
static void configs_model(void) {
    AttnCase k = mk(1, 12, 128, 128, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, true);
    Prep p;
    if (!prep(&p, &k))
        return;
    for (int u = 0; u < 2; u++) {
        KernelConfig cf[256];
        int n = cugen_attn_configs(p.pg, p.cand[1], &g_cu[u], &g_fp32, cf, 256);
        CHECK_MSG(n >= 8, "%s: %d configs", g_cu[u].arch, n);
        for (int i = 1; i < n; i++)
            CHECK(cf[i - 1].score <= cf[i].score && cf[i].cls == CUCLS_ATTN);
        for (int i = 0; i < n && i < 3; i++)
            printf("    %s %-40s %.2f us\n", g_cu[u].arch, cf[i].desc, cf[i].score * 1e6);
    }
    // One query against 4096 keys on 4 heads: the model splits the keys (4 blocks alone would
    // leave 128 SMs idle).
    AttnCase dec = mk(1, 4, 1, 4096, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true);
    Prep pd;
    if (prep(&pd, &dec)) {
        KernelConfig best;
        CHECK(cugen_attn_configs(pd.pg, pd.cand[1], &g_cu[1], &g_fp32, &best, 1) == 1);
        CHECK_MSG(acfg(&best).split >= 8, "decoding: '%s'", best.desc);
        printf("    decoding (1 x 4096): %s, %.1f us\n", best.desc, best.score * 1e6);
        prep_free(&pd);
    }
    // Head dims past ATTN_MAX_HEAD are no attention candidates.
    AttnCase wide = mk(1, 1, 16, 16, ATTN_MAX_HEAD + 8, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false);
    PrimGraph *pg = attn_graph(&wide);
    Err e = {0};
    CHECK(fission_cleanup(pg, NULL, &e) == ST_OK);
    CandRules r = cand_rules_default();
    r.attention = true;
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, &r, 0, &cs, &e) == ST_OK);
    for (int i = 0; cs && i < cs->n; i++)
        CHECK(!cugen_attn_supports(pg, &cs->c[i], &g_fp32));
    cand_set_free(cs);
    prim_graph_free(pg);
    prep_free(&p);
}

// The tensor-core configs: offered beside the SIMT ones under each reduced precision on sm_80
// and sm_90a, with the kind the precision names; never under fp32 (exact float32 FMAs), nor on
// sm_75. Prints the model's best of each kind.
static void configs_precision(void) {
    AttnCase k = mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false);
    Prep p;
    if (!prep(&p, &k))
        return;
    KernelConfig cf[640];
    for (int pi = -1; pi < (int)ORCH_COUNT(g_precs); pi++) {
        const TargetOptions o = pi < 0 ? g_fp32 : prec_opt(g_precs[pi].prec);
        for (int u = 0; u < 3; u++) {
            const CudaHw *hw = u < 2 ? &g_cu[u] : &g_t4;
            int n = cugen_attn_configs(p.pg, p.cand[1], hw, &o, cf, 640), simt = 0, tc = 0,
                other = 0;
            for (int i = 0; i < n; i++) {
                int m = (int)acfg(&cf[i]).mma;
                simt += m == CUA_MMA_SIMT;
                tc += pi >= 0 && m == g_precs[pi].mma;
                other += m != CUA_MMA_SIMT && (pi < 0 || m != g_precs[pi].mma);
            }
            bool want_tc = pi >= 0 && u < 2;
            CHECK_MSG(simt >= 8 && (tc >= 4) == want_tc && other == 0,
                      "%s under %s: %d SIMT, %d tensor-core, %d other configs", hw->arch,
                      pi < 0 ? "fp32" : g_precs[pi].name, simt, tc, other);
            int best_tc = -1, best_simt = -1;
            for (int i = n - 1; i >= 0; i--)
                *(acfg(&cf[i]).mma ? &best_tc : &best_simt) = i;
            if (pi >= 0 && u == 1 && best_tc >= 0 && best_simt >= 0)
                printf("    %s %s best %-40s %.2f us (SIMT best %.2f us)\n", hw->arch,
                       g_precs[pi].name, cf[best_tc].desc, cf[best_tc].score * 1e6,
                       cf[best_simt].score * 1e6);
        }
    }
    prep_free(&p);
}

// The best config of kind mma of case k's layouts candidate for the H100: its emitted source
// (NULL on failure) and model time.
static char *best_source(const AttnCase *k, int mma, double *score) {
    Prep p;
    if (!prep(&p, k))
        return NULL;
    const TargetOptions o = mma ? prec_opt(g_precs[mma - 1].prec) : g_fp32;
    KernelConfig cf[640];
    int n = cugen_attn_configs(p.pg, p.cand[1], &g_cu[1], &o, cf, 640), q = 0;
    while (q < n && acfg(&cf[q]).mma != mma)
        q++;
    char *out = NULL;
    if (q < n) {
        StrBuf src;
        sb_init(&src);
        CudaLaunch ln;
        Err e = {0};
        if (cugen_emit(p.pg, p.cand[1], &cf[q], &g_cu[1], &g_fp32, "attn_best", &src, &ln, &e) ==
            ST_OK)
            out = strdup(src.s);
        CHECK_MSG(out, "%s '%s': %s", k->name, cf[q].desc, e.msg);
        sb_free(&src);
        *score = cf[q].score;
    }
    prep_free(&p);
    return out;
}

// Causal tile skipping: the bound is found from GPT-2's constant WHERE mask (M = N: a query
// tile stops after the key of its last row; M = 257 > N = 33: rows below 224 have no key left,
// their tiles keep every key, the others stop at row - 224), in both designs (the tensor-core
// kernel also per warp), and not from a mask input; the model's time of a causal 12 x 512 x
// 512 is below 0.8 of the unmasked one for both (0.56 to 0.63 of the key tiles are kept).
static void causal_bound(void) {
    const struct {
        AttnCase k;
        const char *want[2]; // in the source (NULL: "kcut" must be absent)
    } cases[] = {
        {mk(1, 12, 512, 512, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, false),
         {"const int64_t kcut = q0 >= 0 ? ORCH_MIN_I64(q0 + ", "(int64_t)512) + 0 : (int64_t)512;"}},
        {mk(2, 3, 257, 33, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV, true),
         {"const int64_t kcut = q0 >= 224 ? ORCH_MIN_I64(q0 + ", "(int64_t)257) + -224 : "}},
        {mk(1, 12, 512, 512, 64, 64, ATTN_MASK_FULL, ATTN_SCALE_MUL, false), {NULL, NULL}},
    };
    for (size_t i = 0; i < ORCH_COUNT(cases); i++)
        for (int mma = 0; mma <= CUA_MMA_F16; mma += CUA_MMA_F16) {
            double sc = 0;
            char *src = best_source(&cases[i].k, mma, &sc);
            if (!src)
                continue;
            if (cases[i].want[0])
                CHECK_MSG(strstr(src, cases[i].want[0]) && strstr(src, cases[i].want[1]) &&
                              (mma == 0 || strstr(src, "kwarp = q0 + wrow >= ")),
                          "%s (%s): no causal bound '%s ... %s' in the kernel", cases[i].k.name,
                          g_kind[mma], cases[i].want[0], cases[i].want[1]);
            else
                CHECK_MSG(!strstr(src, "kcut"), "%s (%s): a causal bound from a mask input",
                          cases[i].k.name, g_kind[mma]);
            free(src);
        }
    for (int mma = 0; mma <= CUA_MMA_F16; mma += CUA_MMA_F16) {
        AttnCase causal = mk(1, 12, 512, 512, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, false),
                 plain = mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false);
        double tc = 0, tp = 0;
        free(best_source(&causal, mma, &tc));
        free(best_source(&plain, mma, &tp));
        printf("    %s 12 x 512 x 512: causal %.1f us, unmasked %.1f us (model)\n", g_kind[mma],
               tc * 1e6, tp * 1e6);
        CHECK_MSG(tc > 0 && tc < 0.8 * tp, "%s: causal %.1f us, unmasked %.1f us", g_kind[mma],
                  tc * 1e6, tp * 1e6);
    }
}

// ---- the GPU half ----

// Every tensor of the graph by the interpreter; inputs random (the mask input 0 / -10000),
// stored in the input's dtype (half inputs: the float32 draws rounded).
static void **eval_all(const PrimGraph *pg) {
    void **buf = xcalloc((size_t)pg->n_tensors, sizeof(void *));
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        if (T->data) {
            size_t nb = tensor_nbytes(T);
            buf[t] = xmalloc(nb + 64);
            memcpy(buf[t], T->data, nb);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *T = pg->tensors[pg->inputs[i]];
        int64_t n = tensor_numel(T);
        float *v = xmalloc(sizeof(float) * (size_t)(n + 16));
        if (strncmp(T->name, "mask", 4) == 0)
            attn_fill_mask(T->name, v, n / T->dims[T->rank - 1], T->dims[T->rank - 1]);
        else
            for (int64_t x = 0; x < n; x++)
                v[x] = frand();
        if (T->dtype != DT_FLOAT) { // half: v's first n * 2 bytes, in place
            for (int64_t x = 0; x < n; x++)
                elem_set_f64(T->dtype, v, x, v[x]);
        }
        buf[pg->inputs[i]] = v;
    }
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        if (p->dead)
            continue;
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        for (int j = 0; j < p->n_in; j++)
            x[j] = buf[p->in[j]];
        buf[p->out[0]] = xmalloc(tensor_nbytes(pg->tensors[p->out[0]]) + 64);
        Err e = {0};
        int rc = prim_eval(pg, p, x, buf[p->out[0]], &e);
        ORCH_ASSERT(rc == ST_OK);
        free(x);
    }
    return buf;
}

static void free_all(const PrimGraph *pg, void **buf) {
    for (int t = 0; t < pg->n_tensors; t++)
        free(buf[t]);
    free(buf);
}

// The worst excess over |got - ref| <= tol (|ref| + max|ref|) (<= 0: pass); *ratio: the
// largest |got - ref| / (tol (|ref| + max|ref|)).
static double compare(const float *got, const float *ref, int64_t n, double tol, int64_t *bad,
                      double *ratio) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    double worst = -1;
    *bad = -1;
    *ratio = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), bound = tol * (fabs(ref[i]) + mx);
        *ratio = fmax(*ratio, isnan(d) ? INFINITY : bound > 0 ? d / bound : d > 0 ? INFINITY : 0);
        if (!(d <= bound) && (*bad < 0 || d - bound > worst)) {
            worst = isnan(d) ? INFINITY : d - bound;
            *bad = i;
        }
    }
    return worst;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// Runs every job of g on the case's interpreter values; checks each; times each (`reps`
// launches a sample; 0: none).
static void gpu_run(Program *g, void **buf, int reps) {
    const CudaApi *cu = g_api;
    Err e = {0};
    CUmodule mod = NULL;
    if (CUDA_TRY(cu, &e, cuModuleLoadData, &mod, g->cubin)) {
        CHECK_MSG(false, "%s", e.msg);
        return;
    }
    CUevent ev[2];
    bool evs = !CUDA_TRY(cu, &e, cuEventCreate, &ev[0], CU_EVENT_DEFAULT) &&
               !CUDA_TRY(cu, &e, cuEventCreate, &ev[1], CU_EVENT_DEFAULT);
    CHECK_MSG(evs, "%s", e.msg);
    for (int i = 0; evs && i < g->nj; i++) {
        Job *j = &g->jobs[i];
        const PrimGraph *pg = j->p->pg;
        const Candidate *c = j->c;
        CUfunction f;
        struct {
            CUdeviceptr in[ORCH_CUDA_MAX_IN];
            CUdeviceptr out;
        } args;
        memset(&args, 0, sizeof args);
        bool ok = !CUDA_TRY(cu, &e, cuModuleGetFunction, &f, mod, j->fn);
        if (ok && j->ln.smem > 48 * 1024)
            ok = !CUDA_TRY(cu, &e, cuFuncSetAttribute, f,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)j->ln.smem);
        for (int q = 0; ok && q < c->n_inputs; q++) {
            size_t nb = tensor_nbytes(pg->tensors[c->inputs[q]]);
            ok = !CUDA_TRY(cu, &e, cuMemAlloc, &args.in[q], nb + 16) &&
                 !CUDA_TRY(cu, &e, cuMemcpyHtoD, args.in[q], buf[c->inputs[q]], nb);
        }
        const Tensor *Y = pg->tensors[c->output];
        int64_t n = tensor_numel(Y);
        size_t ynb = tensor_nbytes(Y);
        float *got = xmalloc((size_t)n * 4 + 16);
        ok = ok && !CUDA_TRY(cu, &e, cuMemAlloc, &args.out, ynb) &&
             !CUDA_TRY(cu, &e, cuMemsetD8, args.out, 0xff, ynb); // NaN poison (half too)
        void *params[] = {&args};
#define LAUNCH()                                                                                   \
    CUDA_TRY(cu, &e, cuLaunchKernel, f, j->ln.grid[0], j->ln.grid[1], j->ln.grid[2],               \
             j->ln.block[0], j->ln.block[1], j->ln.block[2], j->ln.smem, NULL, params, NULL)
        ok = ok && !LAUNCH() && !CUDA_TRY(cu, &e, cuCtxSynchronize) &&
             !CUDA_TRY(cu, &e, cuMemcpyDtoH, got, args.out, ynb);
        CHECK_MSG(ok, "%s: %s '%s': %s", j->p->k.name, j->fn, j->cfg.desc, e.msg);
        if (ok) {
            int64_t bad;
            double ratio;
            int mma = (int)acfg(&j->cfg).mma;
            const float *ref = buf[c->output];
            float *ref32 = NULL;
            if (Y->dtype != DT_FLOAT) { // half: both widened (back to front: got in place)
                ref32 = xmalloc((size_t)n * 4 + 16);
                for (int64_t q = n - 1; q >= 0; q--) {
                    got[q] = (float)elem_get_f64(Y->dtype, got, q);
                    ref32[q] = (float)elem_get_f64(Y->dtype, buf[c->output], q);
                }
                ref = ref32;
            }
            double w = compare(got, ref, n, tolerance(&j->p->k, mma), &bad, &ratio);
            const AttnCase *k = &j->p->k;
            // The bad element's batch index, row and column, for a layout bug's pattern.
            int64_t col = bad >= 0 ? bad % k->Dv : 0, row = bad >= 0 ? bad / k->Dv % k->M : 0;
            // How many elements are off, and the first and last (batch x row) they fall in.
            int64_t n_bad = 0, r_lo = -1, r_hi = -1;
            for (int64_t q = 0; w > 0 && q < n; q++) {
                double d = fabs((double)got[q] - ref[q]);
                if (isnan(got[q]) != isnan(ref[q]) ||
                    (!isnan(got[q]) && d > 1e-2 * (fabs(ref[q]) + 1))) {
                    n_bad++;
                    r_hi = q / k->Dv;
                    if (r_lo < 0)
                        r_lo = r_hi;
                }
            }
            CHECK_MSG(w <= 0,
                      "%s: GPU candidate %d (%d prims) '%s': out[%lld] (batch %lld, row %lld, "
                      "column %lld) = %g, want %g (%.3g of the bound); %lld grossly off, in rows "
                      "%lld .. %lld of batch x M",
                      k->name, c->id, c->n_prims, j->cfg.desc, (long long)bad,
                      (long long)(bad >= 0 ? bad / (k->Dv * k->M) : 0), (long long)row,
                      (long long)col, bad >= 0 ? got[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0, ratio,
                      (long long)n_bad, (long long)r_lo, (long long)r_hi);
            double *worst = attn_dt(k) != DT_FLOAT ? g_worst_half : g_worst;
            worst[mma] = fmax(worst[mma], ratio);
            free(ref32);
            g_gpu_ran++;
        }
        // `reps` back-to-back launches between two events, 5 times after 3 warm-up launches:
        // the median of the per-launch averages (a GPU time, the host's launch overhead hidden
        // behind the previous kernel as in a plan's run).
        float times[5];
        for (int r = 0; ok && reps > 0 && r < 3; r++)
            ok = !LAUNCH();
        for (int r = 0; ok && reps > 0 && r < 5; r++) {
            ok = !CUDA_TRY(cu, &e, cuEventRecord, ev[0], NULL);
            for (int q = 0; ok && q < reps; q++)
                ok = !LAUNCH();
            ok = ok && !CUDA_TRY(cu, &e, cuEventRecord, ev[1], NULL) &&
                 !CUDA_TRY(cu, &e, cuEventSynchronize, ev[1]);
            float ms = 0;
            ok = ok && !CUDA_TRY(cu, &e, cuEventElapsedTime, &ms, ev[0], ev[1]);
            times[r] = ms / (float)reps;
        }
#undef LAUNCH
        CHECK_MSG(ok, "%s: timing %s '%s': %s", j->p->k.name, j->fn, j->cfg.desc, e.msg);
        if (ok && reps > 0) {
            qsort(times, 5, sizeof(float), cmp_float);
            j->ms = times[2];
        }
        free(got);
        for (int q = 0; q < c->n_inputs; q++)
            if (args.in[q])
                cu->cuMemFree(args.in[q]);
        if (args.out)
            cu->cuMemFree(args.out);
    }
    if (evs) {
        cu->cuEventDestroy(ev[0]);
        cu->cuEventDestroy(ev[1]);
    }
    cu->cuModuleUnload(mod);
}

// Runs the cases on the GPU: the best `k_simt` SIMT configs of both candidates each and, under
// each reduced precision, the best `k_tc` tensor-core ones (with with_cp0 each of them staging
// through registers as well), compiled in parallel, checked, and timed (`reps` launches a
// sample; none when 0); prints per case the best time of each kind, and leaves it (ms, over
// both candidates; 0: none) in best_ms[case][kind] when given. A half-storage case compiles
// under its own precision only (fp16 or bf16, as the half-storage compile does), SIMT included.
static void gpu_cases_run(const AttnCase *cases, int nc, int k_simt, int k_tc, int reps,
                          bool with_cp0, double (*best_ms)[4]) {
    Prep *ps = xcalloc((size_t)nc, sizeof(Prep));
    Batch b = {.chunk = 6};
    double t0 = now();
    for (int i = 0; i < nc; i++) {
        if (!prep(&ps[i], &cases[i]))
            continue;
        const int own = half_prec(&cases[i]); // index into g_precs; -1: float32
        const TargetOptions os = own >= 0 ? prec_opt(g_precs[own].prec) : g_fp32;
        if (k_simt > 0)
            emit_case(&b, &ps[i], i, &g_dhw, &os, k_simt, k_simt, 0, with_cp0, CUA_MMA_SIMT);
        for (int pi = 0; k_tc > 0 && g_dhw.cc_major >= 8 && pi < (int)ORCH_COUNT(g_precs); pi++) {
            if (own >= 0 && pi != own)
                continue;
            const TargetOptions o = prec_opt(g_precs[pi].prec);
            emit_case(&b, &ps[i], i, &g_dhw, &o, k_tc, k_tc, 0, with_cp0, g_precs[pi].mma);
        }
    }
    double t1 = now();
    compile_all(&b, cpus());
    double t2 = now(), t_interp = 0;
    for (int i = 0; i < nc; i++) {
        if (!ps[i].pg)
            continue;
        double t = now();
        void **buf = eval_all(ps[i].pg);
        t_interp += now() - t;
        const Job *best[4] = {NULL, NULL, NULL, NULL}; // per kind, over both candidates
        const Job *best_simt[2] = {NULL, NULL};       // per candidate
        for (int q = 0; q < b.n; q++) {
            Program *g = &b.g[q];
            if (g->case_idx != i || g->rc != ST_OK || !g->cubin)
                continue;
            gpu_run(g, buf, reps);
            for (int x = 0; x < g->nj; x++) {
                const Job *j = &g->jobs[x];
                int kind = (int)acfg(&j->cfg).mma, ci = j->c == ps[i].cand[1];
                if (j->ms > 0 && (!best[kind] || j->ms < best[kind]->ms))
                    best[kind] = j;
                if (kind == CUA_MMA_SIMT && j->ms > 0 && (!best_simt[ci] || j->ms < best_simt[ci]->ms))
                    best_simt[ci] = j;
            }
        }
        if (reps > 0) {
            printf("  %s\n   ", cases[i].name);
            for (int kind = 0; kind < 4; kind++)
                if (best[kind])
                    printf(" %s %s %.1f us (%s)", g_kind[kind],
                           best[kind]->c == ps[i].cand[1] ? "layouts" : "core",
                           best[kind]->ms * 1e3, best[kind]->cfg.desc + 9);
            printf("\n");
        }
        for (int kind = 0; best_ms && kind < 4; kind++)
            best_ms[i][kind] = best[kind] ? best[kind]->ms : 0;
        // With every SIMT config measured: the model's first five against the measured best
        // (the lab measures the model's first few).
        for (int ci = 0; ci < 2 && k_simt >= 32; ci++) {
            int rank = 0, seen = 0;
            for (int q = 0; q < b.n; q++)
                for (int x = 0; b.g[q].case_idx == i && x < b.g[q].nj; x++) {
                    const Job *j = &b.g[q].jobs[x];
                    if (j->c != ps[i].cand[ci] || acfg(&j->cfg).mma != CUA_MMA_SIMT)
                        continue;
                    if (j == best_simt[ci])
                        rank = seen;
                    if (seen++ < 5)
                        printf("      %s model #%d %-44s model %6.1f us, measured %6.1f us\n",
                               ci ? "layouts" : "core", seen, j->cfg.desc + 9, j->cfg.score * 1e6,
                               j->ms * 1e3);
                }
            printf("      %s: the measured best is the model's #%d of %d\n",
                   ci ? "layouts" : "core", rank + 1, seen);
        }
        // With every tensor-core config measured: each in the model's order, beside its time.
        for (int ci = 0; ci < 2 && k_tc >= 32; ci++) {
            int seen = 0;
            for (int q = 0; q < b.n; q++)
                for (int x = 0; b.g[q].case_idx == i && x < b.g[q].nj; x++) {
                    const Job *j = &b.g[q].jobs[x];
                    if (j->c != ps[i].cand[ci] || acfg(&j->cfg).mma == CUA_MMA_SIMT)
                        continue;
                    printf("      %s model #%d %-48s model %6.1f us, measured %6.1f us\n",
                           ci ? "layouts" : "core", ++seen, j->cfg.desc + 9, j->cfg.score * 1e6,
                           j->ms * 1e3);
                }
        }
        free_all(ps[i].pg, buf);
        g_cases++;
    }
    printf("  %d cases: emit %.1f s, NVRTC %.1f s, interpreter %.1f s, runs %.1f s\n", nc,
           t1 - t0, t2 - t1, t_interp, now() - t2 - t_interp);
    batch_free(&b);
    for (int i = 0; i < nc; i++)
        prep_free(&ps[i]);
    free(ps);
}

// The largest error seen per kind, against its bound.
static void print_worst(void) {
    printf("  largest |got - ref| / bound:");
    for (int kind = 0; kind < 4; kind++)
        printf(" %s %.3f", g_kind[kind], g_worst[kind]);
    printf("; half storage:");
    for (int kind = 0; kind < 4; kind++)
        printf(" %s %.3f", g_kind[kind], g_worst_half[kind]);
    printf("\n");
}

static bool gpu_skip(void) {
    if (g_api)
        return false;
    gpu_check_skip("no CUDA device on this machine (%s)", g_gpu_err.msg);
    return true;
}

// Sequence lengths 1 .. 4096 (M = N and M != N), head dims 32, 64, 128 and odd ones, every
// mask kind and scale, split and not.
static void gpu_lengths(void) {
    if (gpu_skip())
        return;
    static const int64_t L[] = {1, 2, 7, 33, 127, 128, 257, 1000, 4096};
    static const int64_t Ds[] = {32, 64, 128, 33};
    AttnCase cases[64];
    int n = 0;
    for (int i = 0; i < (int)ORCH_COUNT(L); i++) {
        int64_t D = Ds[i % 4], B = L[i] >= 1000 ? 1 : 2, H = L[i] >= 1000 ? 2 : 3;
        cases[n++] = mk(B, H, L[i], L[i], D, D, i % ATTN_MASK_COUNT, i % ATTN_SCALE_COUNT,
                        i % 2 == 0);
        cases[n++] = mk(B, H, L[i], L[i], Ds[(i + 1) % 4], Ds[(i + 1) % 4],
                        (i + 2) % ATTN_MASK_COUNT, (i + 1) % ATTN_SCALE_COUNT, i % 2 == 1);
    }
    // M != N: decoding (one query, many keys), few keys, and the causal mask's offset.
    cases[n++] = mk(1, 4, 1, 4096, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true);
    cases[n++] = mk(2, 2, 1, 257, 128, 128, ATTN_MASK_KEYS, ATTN_SCALE_DIV, false);
    cases[n++] = mk(1, 2, 4096, 1, 64, 64, ATTN_MASK_FULL, ATTN_SCALE_MUL, false);
    cases[n++] = mk(2, 3, 7, 1000, 32, 32, ATTN_MASK_CAUSAL, ATTN_SCALE_NONE, false);
    cases[n++] = mk(2, 3, 257, 33, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV, true);
    cases[n++] = mk(1, 3, 1000, 127, 33, 33, ATTN_MASK_KEYS, ATTN_SCALE_MUL, true);
    // K^T dim-major: tiles copied as they lie (N % 4 == 0), and the fallback (N % 4 != 0).
    cases[n++] = mk_ktdim(2, 3, 128, 128, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL);
    cases[n++] = mk_ktdim(1, 2, 257, 1000, 33, 48, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV);
    cases[n++] = mk_ktdim(2, 2, 7, 4096, 128, 128, ATTN_MASK_FULL, ATTN_SCALE_NONE);
    cases[n++] = mk_ktdim(1, 3, 33, 127, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL);
    cases[n++] = mk_ktdim(1, 2, 1, 4, 32, 32, ATTN_MASK_NONE, ATTN_SCALE_NONE);
    // O's heads merged back by the kernel: ViT-B/16's layer, odd lengths, not split.
    cases[n++] = mk_merged(1, 12, 197, 197, 64, 64, ATTN_MASK_NONE, true);
    cases[n++] = mk_merged(2, 3, 33, 77, 32, 48, ATTN_MASK_KEYS, false);
    cases[n++] = mk_merged(1, 2, 1000, 7, 64, 64, ATTN_MASK_CAUSAL, true);
    // Q, K and V read in place from a packed projection: ViT-B/16's layer, odd lengths.
    cases[n++] = mk_packed(1, 12, 197, 64, ATTN_MASK_NONE, true);
    cases[n++] = mk_packed(2, 3, 33, 32, ATTN_MASK_KEYS, false);
    cases[n++] = mk_packed(1, 2, 1, 128, ATTN_MASK_CAUSAL, true);
    // Grouped-query attention, K and V read from their K/V heads: Llama's test block, the full
    // Llama's 16 / 4 heads, multi-query with odd lengths, decoding.
    cases[n++] = mk_gqa(1, 8, 2, 64, 64, 32, ATTN_MASK_CAUSAL, true, 0);
    cases[n++] = mk_gqa(1, 16, 4, 256, 256, 64, ATTN_MASK_CAUSAL, true, 0);
    cases[n++] = mk_gqa(2, 4, 1, 33, 77, 24, ATTN_MASK_KEYS, false, 0);
    cases[n++] = mk_gqa(1, 8, 2, 1, 1000, 64, ATTN_MASK_NONE, true, 0);
    // Rotary embeddings computed in the prologue: the Llama block, plain multi-head, odd lengths.
    cases[n++] = with_rope(mk_gqa(1, 8, 2, 64, 64, 32, ATTN_MASK_CAUSAL, true, 0));
    cases[n++] = with_rope(mk_gqa(2, 3, 0, 33, 77, 24, ATTN_MASK_KEYS, false, 0));
    cases[n++] = with_rope(mk_gqa(1, 16, 4, 256, 256, 64, ATTN_MASK_CAUSAL, true, 0));
    gpu_cases_run(cases, n, 6, 2, 10, false, NULL);
    print_worst();
}

// Dv != D, the largest head dims, odd shapes, every mask with every scale; each config with
// cp.async staging and with staging through registers (cexpr loads).
static void gpu_heads(void) {
    if (gpu_skip())
        return;
    AttnCase cases[64];
    int n = 0;
    cases[n++] = mk(2, 3, 127, 257, 64, 32, ATTN_MASK_KEYS, ATTN_SCALE_MUL, true);
    cases[n++] = mk(2, 2, 257, 128, 48, 80, ATTN_MASK_FULL, ATTN_SCALE_DIV, false);
    cases[n++] = mk(1, 2, 128, 1000, 256, 256, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true);
    cases[n++] = mk(1, 2, 1000, 128, 256, 16, ATTN_MASK_NONE, ATTN_SCALE_NONE, false);
    cases[n++] = mk(2, 2, 33, 77, 17, 130, ATTN_MASK_KEYS, ATTN_SCALE_DIV, true);
    cases[n++] = mk(1, 2, 200, 300, 1, 3, ATTN_MASK_FULL, ATTN_SCALE_MUL, false);
    for (int mask = 0; mask < ATTN_MASK_COUNT; mask++)
        for (int scale = 0; scale < ATTN_SCALE_COUNT; scale++)
            cases[n++] = mk(1 + scale % 2, 2, 65, 129, 64, 64, mask, scale, (mask + scale) % 2);
    cases[n++] = mk_guard(2, 2, 33, 77, 64, 64, true);
    cases[n++] = mk_guard(1, 12, 128, 128, 64, 64, false);
    gpu_cases_run(cases, n, 3, 2, 5, true, NULL);
    print_worst();
}

// The model's first 64 configs of the BERT-base and transformer-block shapes, 32 of a batch of
// 8, 12 of the masked variants, timed (the numbers that stand against PyTorch's fused SDPA).
static void gpu_timing(void) {
    if (gpu_skip())
        return;
    const AttnCase wide[] = {
        mk(1, 12, 128, 128, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false),
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false),
    };
    gpu_cases_run(wide, 2, 64, 0, 20, false, NULL);
    const AttnCase batch[] = {mk(8, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false)};
    gpu_cases_run(batch, 1, 32, 0, 20, false, NULL);
    const AttnCase masked[] = {
        mk(1, 12, 128, 128, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, false),
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, false),
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true),
        mk(1, 12, 1, 4096, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, true),
    };
    gpu_cases_run(masked, 4, 12, 0, 20, false, NULL);
}

// SIMT float32 against tensor cores on BERT-base's shapes (12 heads of 128 and 512 tokens, head
// dim 64) and GPT-2's causal one: the best measured of the model's first 16 SIMT configs and of
// every tensor-core config per precision (all checked at their tolerance).
static void gpu_tc_timing(void) {
    if (gpu_skip())
        return;
    const AttnCase cases[] = {
        mk(1, 12, 128, 128, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false),
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false),
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true),
        mk_ktdim(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL),
    };
    double best[4][4];
    gpu_cases_run(cases, 4, 16, 16, 20, false, best);
    for (int i = 0; i < 4; i++) {
        printf("  SIMT vs tensor cores, %s: simt %.1f us", cases[i].name, best[i][0] * 1e3);
        for (int kind = 1; kind < 4; kind++)
            if (best[i][kind] > 0)
                printf(", %s %.1f us (%.2fx)", g_kind[kind], best[i][kind] * 1e3,
                       best[i][0] / best[i][kind]);
        printf("\n");
    }
    print_worst();
}

// Half storage on the GPU: sequence lengths 1, odd and past a tile (M = N and decoding), head
// dims 32, 64, 128 and odd ones, every mask kind and scale, split or not, K^T dim-major, the
// NaN guard and O cast to float32; the best 2 SIMT and 3 tensor-core configs of both
// candidates under the storage type's precision, and on BERT-base's shape the float32
// attention's best fp16 tensor-core time against float16 storage's.
static void gpu_half(void) {
    if (gpu_skip())
        return;
    const DType F16 = DT_FLOAT16, BF16 = DT_BFLOAT16;
    static const int64_t L[] = {1, 7, 33, 127, 257, 1000};
    static const int64_t Ds[] = {32, 64, 128, 33};
    AttnCase cases[64];
    int n = 0;
    for (int i = 0; i < (int)ORCH_COUNT(L); i++) {
        int64_t D = Ds[i % 4], B = L[i] >= 1000 ? 1 : 2, H = L[i] >= 1000 ? 2 : 3;
        cases[n++] = mk_half(i % 2 ? BF16 : F16, B, H, L[i], L[i], D, D, i % ATTN_MASK_COUNT,
                             i % ATTN_SCALE_COUNT, i % 2 == 0, i == 3);
        cases[n++] =
            mk_half(i % 2 ? F16 : BF16, B, H, L[i], L[i], Ds[(i + 1) % 4], Ds[(i + 1) % 4],
                    (i + 2) % ATTN_MASK_COUNT, (i + 1) % ATTN_SCALE_COUNT, i % 2 == 1, i == 4);
    }
    cases[n++] = mk_half(F16, 1, 4, 1, 4096, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true, false);
    cases[n++] =
        mk_half(BF16, 2, 3, 7, 1000, 32, 32, ATTN_MASK_CAUSAL, ATTN_SCALE_NONE, false, false);
    cases[n++] = mk_half(F16, 2, 2, 33, 77, 17, 130, ATTN_MASK_KEYS, ATTN_SCALE_DIV, true, true);
    cases[n++] =
        mk_half(BF16, 1, 2, 128, 300, 256, 256, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true, false);
    cases[n++] = with_ktdim(
        mk_half(F16, 2, 3, 128, 128, 64, 64, ATTN_MASK_KEYS, ATTN_SCALE_MUL, false, false));
    cases[n++] = with_ktdim(
        mk_half(BF16, 1, 2, 257, 1000, 33, 48, ATTN_MASK_CAUSAL, ATTN_SCALE_DIV, false, true));
    cases[n++] =
        with_guard(mk_half(F16, 2, 2, 33, 77, 64, 64, ATTN_MASK_FULL, ATTN_SCALE_MUL, true, false));
    cases[n++] = with_guard(
        mk_half(BF16, 1, 12, 128, 128, 64, 64, ATTN_MASK_FULL, ATTN_SCALE_MUL, false, false));
    cases[n++] = with_packed(
        mk_half(F16, 1, 12, 197, 197, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, false));
    cases[n++] = mk_gqa(1, 16, 4, 256, 256, 64, ATTN_MASK_CAUSAL, true, F16);
    cases[n++] = mk_gqa(2, 4, 1, 33, 77, 32, ATTN_MASK_KEYS, false, BF16);
    cases[n++] = with_rope(mk_gqa(1, 8, 2, 64, 64, 32, ATTN_MASK_CAUSAL, true, F16));
    cases[n++] = with_packed(
        mk_half(BF16, 2, 3, 33, 33, 32, 32, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, false, true));
    gpu_cases_run(cases, n, 2, 3, 5, false, NULL);
    const AttnCase bert[] = {
        mk(1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false),
        mk_half(F16, 1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, false),
        mk_half(F16, 1, 12, 512, 512, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true, false),
    };
    double best[3][4];
    gpu_cases_run(bert, 3, 2, 12, 20, false, best);
    printf("  12 x 512 x 512: float32 storage fp16 tensor cores %.1f us, float16 storage %.1f us "
           "(causal %.1f us)\n",
           best[0][CUA_MMA_F16] * 1e3, best[1][CUA_MMA_F16] * 1e3, best[2][CUA_MMA_F16] * 1e3);
    print_worst();
}

// Key splits and key warps of the tensor-core kernel: of each case (decoding, few query tiles
// against many keys, splits past the causal bound, odd head dims, masks, half storage, the NaN
// guard, Q, K and V read in place), the model's best 12 configs per kind with key splits, then
// with key warps, run against the interpreter.
static void gpu_tc_split(void) {
    if (gpu_skip())
        return;
    const DType F16 = DT_FLOAT16, BF16 = DT_BFLOAT16;
    const AttnCase cases[] = {
        mk(1, 4, 1, 4096, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true),
        mk(2, 3, 33, 1000, 32, 32, ATTN_MASK_KEYS, ATTN_SCALE_DIV, false),
        mk(1, 2, 257, 300, 128, 128, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true),
        mk(2, 2, 65, 129, 33, 48, ATTN_MASK_FULL, ATTN_SCALE_NONE, false),
        mk_half(F16, 1, 4, 1, 4096, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true, false),
        mk_half(BF16, 2, 3, 7, 1000, 32, 32, ATTN_MASK_CAUSAL, ATTN_SCALE_NONE, false, true),
        mk_half(F16, 1, 12, 512, 512, 64, 64, ATTN_MASK_CAUSAL, ATTN_SCALE_MUL, true, false),
        with_guard(mk_half(F16, 2, 2, 33, 77, 64, 64, ATTN_MASK_FULL, ATTN_SCALE_MUL, true, false)),
        with_packed(
            mk_half(F16, 1, 12, 197, 197, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, false)),
    };
    g_keep_split = true;
    gpu_cases_run(cases, (int)ORCH_COUNT(cases), 0, 12, 3, false, NULL);
    g_keep_split = false;
    g_keep_kw = true;
    gpu_cases_run(cases, (int)ORCH_COUNT(cases), 0, 12, 3, false, NULL);
    g_keep_kw = false;
    print_worst();
}

// On the transformer block's shape (12 heads of 512 x 512 x 64 in float16 storage), every
// tensor-core config timed beside the model's estimate.
static void gpu_tc_block(void) {
    if (gpu_skip())
        return;
    const AttnCase block[] = {
        mk_half(DT_FLOAT16, 1, 12, 512, 512, 64, 64, ATTN_MASK_NONE, ATTN_SCALE_MUL, false, false)};
    gpu_cases_run(block, 1, 0, 200, 30, false, NULL);
    print_worst();
}

static void gpu_present(void) {
    if (gpu_skip())
        return;
    printf("  GPU: %d kernels run and compared\n", g_gpu_ran);
    CHECK(g_gpu_ran > 0);
}

int main(void) {
    unsigned seed =
        getenv("ORCH_TEST_SEED") ? (unsigned)atoi(getenv("ORCH_TEST_SEED")) : (unsigned)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("seed %u\n", seed);
    srand(seed);
    Err en = {0};
    g_nvrtc = nvrtc_load(&en) == ST_OK;
    g_emit_only = getenv("ORCH_CUGEN_EMIT_ONLY") && strcmp(getenv("ORCH_CUGEN_EMIT_ONLY"), "0");
    g_sm90_only = getenv("ORCH_CUGEN_SM90_ONLY") && strcmp(getenv("ORCH_CUGEN_SM90_ONLY"), "0");
    g_sampled = getenv("ORCH_CUGEN_SAMPLE") && atoi(getenv("ORCH_CUGEN_SAMPLE")) > 1;
    if (!g_nvrtc)
        printf("skip: NVRTC compiles: NVRTC unavailable (%s)\n", en.msg);
    cuda_hw_described(&g_cu[0], "A100-SXM4-80GB", 80, 108, 167936, 40 << 20, 1410000, 2.039e12,
                      2048);
    cuda_hw_described(&g_cu[1], "H100 SXM", 90, 132, 233472, 50 << 20, 1980000, 3.35e12, 2048);
    cuda_hw_described(&g_t4, "Tesla T4", 75, 40, 65536, 4 << 20, 1590000, 3.2e11, 2048);
    g_api = g_nvrtc ? cuda_api_load(&g_gpu_err) : NULL;
    if (!g_nvrtc)
        snprintf(g_gpu_err.msg, sizeof g_gpu_err.msg, "no NVRTC");
    if (g_api && (cuda_device_open(g_api, 0, &g_dev, &g_gpu_err) != ST_OK ||
                  cuda_hw_detect(&g_dhw, NULL, &g_gpu_err) != ST_OK))
        g_api = NULL;
    if (g_api) {
        g_emit_only = false; // a GPU machine compiles whatever the sanitizer setting says
        g_sm90_only = g_sampled = false;
        printf("GPU: %s (%s, %d SMs)\n", g_dhw.name, g_dhw.arch, g_dhw.sm_count);
    }
    const char *only = getenv("ORCH_TEST_ONLY");
#define RUN_CASE(fn)                                                                               \
    do {                                                                                           \
        if (!only || strcmp(only, #fn) == 0)                                                       \
            RUN(fn);                                                                               \
    } while (0)
    RUN_CASE(configs_model);
    RUN_CASE(configs_precision);
    RUN_CASE(causal_bound);
    RUN_CASE(ktdim_staging);
    RUN_CASE(packed_affine);
    RUN_CASE(gqa_affine);
    RUN_CASE(rope_prologue);
    RUN_CASE(compile_cases);
    RUN_CASE(compile_half);
    RUN_CASE(gpu_timing);
    RUN_CASE(gpu_tc_timing);
    RUN_CASE(gpu_lengths);
    RUN_CASE(gpu_heads);
    RUN_CASE(gpu_half);
    RUN_CASE(gpu_tc_split);
    RUN_CASE(gpu_tc_block);
    if (!only)
        RUN(gpu_present);
    if (g_api)
        cuda_device_close(&g_dev);
    return CHECK_DONE();
}
