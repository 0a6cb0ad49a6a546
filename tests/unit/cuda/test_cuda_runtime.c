// The CUDA target's execution side: the kernel lab (cuda_lab.h) and the runtime session
// (session_cuda.h), driven by kernels written here by hand (an elementwise add and a row softmax
// following the cugen.h ABI), so they are tested independently of the CUDA emitters.
// Everywhere: the CUDA module blob (pack, unpack, every truncation and corruption rejected) and,
// where NVRTC exists, the module build (one cubin, the launch table, duplicates emitted once).
// Without a GPU: cuda_lab_run and cuda_session_create fail with the no-driver message. With one:
// the lab checks and times good kernels and classifies bad ones (wrong result, compile error in a
// shared program, emit failure, impossible geometry, skipped by before_run; last, a faulting
// kernel, which stops the lab with a clear error), flushes L2 for big inputs; a plan of generated
// kernels, a host (PLAN_INTERP) launch and a copy runs through the session against
// prim_interp_run (|got - ref| <= 1e-5 + 1e-5 |ref|), twice (graph replay), profiled, and from
// device buffers; and an artefact of target "cuda" (header checks, re-import, the blob) runs
// through cuda_session_create_artifact. Usage: unit_cuda_runtime [seed]  (ORCH_TEST_NO_CRASH=1
// leaves out the faulting kernel, for compute-sanitizer)
#define _GNU_SOURCE
#include "candidates/candidates.h"
#include "../check.h"
#include "compile/compile.h"
#include "prim/prim_build.h"
#include "../model_builder.h"
#include "plan/artifact.h"
#include "plan/plan.h"
#include "interp/prim_interp.h"
#include "backend/cuda/session_cuda.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_lab.h"
#include "backend/cuda/nvrtc.h"
#include "cuda_test_artifact.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static const CudaApi *g_api; // NULL without a GPU
static Err g_load_err;
static bool g_driver_present; // libcuda.so.1 opens (the oracle for the no-driver cases)
static bool g_have_nvrtc;
static CudaHw g_hw; // detected on a GPU, else an sm_90a description for compiles

static double rnd(void) { // uniform in [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0;
}

// Values in ±[0.1, 2): never zero.
static void fill(const Tensor *t, void *p) {
    float *f = p;
    for (int64_t i = 0; i < tensor_numel(t); i++)
        f[i] = (float)((0.1 + 1.9 * rnd()) * (rnd() < 0.5 ? -1 : 1));
}

// ---- the hand-written kernels and their emitter ----

// KernelConfig.p[0]: threads per block; p[1]: the variant below.
enum { VAR_GOOD, VAR_WRONG, VAR_NO_COMPILE, VAR_EMIT_FAILS, VAR_BAD_GEOMETRY, VAR_CRASH };
static int g_emits; // emitter calls

static KernelConfig test_cfg(int block, int var) {
    KernelConfig k;
    memset(&k, 0, sizeof k);
    k.cls = 99;
    k.p[0] = block;
    k.p[1] = var;
    snprintf(k.desc, sizeof k.desc, "test block=%d var=%d", block, var);
    return k;
}

static char g_prelude[16384];

static const char *test_prelude(void) {
    snprintf(g_prelude, sizeof g_prelude, "%s%s", orch_cuda_prelude(),
             "struct OrchArgs { const void *in[32]; void *out; };\n");
    return g_prelude;
}

static bool is_add(const PrimGraph *pg, const Candidate *c) {
    if (c->n_prims != 1 || c->n_inputs != 2 || pg->prims[c->prims[0]]->kind != PRIM_ELEMWISE)
        return false;
    int64_t n = tensor_numel(pg->tensors[c->output]);
    return tensor_numel(pg->tensors[c->inputs[0]]) == n &&
           tensor_numel(pg->tensors[c->inputs[1]]) == n;
}

static bool is_softmax(const PrimGraph *pg, const Candidate *c) {
    const Tensor *o = pg->tensors[c->output];
    return c->n_prims == 5 && c->n_inputs == 1 && o->rank == 2 &&
           pg->prims[c->prims[0]]->kind == PRIM_REDUCE;
}

static int test_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                     const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                     CudaLaunch *l, Err *e) {
    (void)hw;
    (void)opt;
    g_emits++;
    int block = (int)cfg->p[0], var = (int)cfg->p[1];
    if (var == VAR_EMIT_FAILS)
        return err_set(e, ST_UNSUPPORTED, "test emitter: variant %d refuses", var);
    const Tensor *o = pg->tensors[c->output];
    memset(l, 0, sizeof *l);
    l->block[0] = (unsigned)(var == VAR_BAD_GEOMETRY ? 2048 : block);
    l->block[1] = l->block[2] = l->grid[1] = l->grid[2] = 1;
    const char *garbage = var == VAR_NO_COMPILE ? "    this is not CUDA;\n" : "";
    const char *crash =
        var == VAR_CRASH
            ? "    if (threadIdx.x == 0) ((volatile float *)a.out)[-(1LL << 40)] = 1;\n"
            : "";
    if (is_add(pg, c)) {
        int64_t n = tensor_numel(o);
        l->grid[0] = (unsigned)ORCH_MIN((n + block - 1) / block, 65535);
        sb_printf(
            src,
            "ORCH_KERNEL void %s(OrchArgs a) {\n%s%s"
            "    const float *x = (const float *)a.in[0], *y = (const float *)a.in[1];\n"
            "    float *z = (float *)a.out;\n"
            "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < %lldLL;\n"
            "         i += (int64_t)gridDim.x * blockDim.x)\n"
            "        z[i] = x[i] %c y[i];\n"
            "}\n",
            fn, garbage, crash, (long long)n, var == VAR_WRONG ? '-' : '+');
        return ST_OK;
    }
    if (is_softmax(pg, c)) {
        long long R = o->dims[0], C = o->dims[1];
        l->grid[0] = (unsigned)R;
        sb_printf(src,
                  "ORCH_KERNEL void %s(OrchArgs a) {\n%s%s"
                  "    __shared__ float scratch[32];\n"
                  "    const float *x = (const float *)a.in[0] + (int64_t)blockIdx.x * %lld;\n"
                  "    float *y = (float *)a.out + (int64_t)blockIdx.x * %lld;\n"
                  "    float m = -ORCH_INF, s = 0.0f;\n"
                  "    for (int c = threadIdx.x; c < %lld; c += blockDim.x) m = fmaxf(m, x[c]);\n"
                  "    m = orch_block_max(m, scratch);\n"
                  "    for (int c = threadIdx.x; c < %lld; c += blockDim.x) s += expf(x[c] - m);\n"
                  "    s = orch_block_sum(s, scratch);\n"
                  "    for (int c = threadIdx.x; c < %lld; c += blockDim.x)\n"
                  "        y[c] = expf(x[c] - m) / s%s;\n"
                  "}\n",
                  fn, garbage, crash, C, C, C, C, C, var == VAR_WRONG ? " * 1.01f" : "");
        return ST_OK;
    }
    return err_set(e, ST_UNSUPPORTED, "test emitter: not an add or a softmax");
}

static CudaEmitter test_emitter(void) {
    return (CudaEmitter){test_emit, test_prelude(), {.precision = PREC_FP32}};
}

// ---- the test graph ----
// x, y [R, C] inputs, k [R, C] a constant: a = x + y; p = softmax_rows(a) (max, sub, exp, sum,
// div); z = tanh(p); w = z + k. Outputs w, p, x (the last one a plan copy).

typedef struct TG {
    PrimGraph *pg;
    PB b;
    void *in[2];
    int x, y, k, a, p, z, w;
    CandidateSet *cs;
    int c_add1, c_soft, c_tanh, c_add2; // candidate indices
} TG;

static int find_cand(const CandidateSet *cs, int output, int n_prims) {
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].output == output && cs->c[i].n_prims == n_prims)
            return i;
    return -1;
}

static int add_input(TG *g, int rank, const int64_t *dims) {
    PrimGraph *pg = g->pg;
    char name[32];
    snprintf(name, sizeof name, "x%d", pg->n_inputs);
    Tensor *t = pg_add_tensor(pg, name, DT_FLOAT, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    g->in[pg->n_inputs] = xmalloc(tensor_nbytes(t) + 1);
    fill(t, g->in[pg->n_inputs]);
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

static void add_output(TG *g, int t) {
    PrimGraph *pg = g->pg;
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = t;
}

// full: the whole graph above; else only a = x + y (output a).
static bool tg_build(TG *g, int64_t R, int64_t C, bool full) {
    memset(g, 0, sizeof *g);
    g->pg = prim_graph_create(graph_create("test"));
    g->b = (PB){g->pg, "node"};
    const int64_t d[2] = {R, C};
    g->x = add_input(g, 2, d);
    g->y = add_input(g, 2, d);
    g->b.origin = "add_node";
    g->a = pb_ew2(&g->b, EW_ADD, g->x, g->y);
    if (full) {
        float *kd = xmalloc(sizeof(float) * (size_t)(R * C));
        for (int64_t i = 0; i < R * C; i++)
            kd[i] = (float)(0.5 + rnd());
        g->b.origin = "const_node";
        g->k = pb_const(&g->b, DT_FLOAT, 2, d, kd);
        free(kd);
        g->b.origin = "softmax_node";
        int m = pb_reduce(&g->b, RED_MAX, g->a, 1u << 1, true, false);
        int e = pb_ew1(&g->b, EW_EXP, pb_ew2(&g->b, EW_SUB, g->a, m));
        int s = pb_reduce(&g->b, RED_SUM, e, 1u << 1, true, false);
        g->p = pb_ew2(&g->b, EW_DIV, e, s);
        g->b.origin = "tanh_node";
        g->z = pb_ew1(&g->b, EW_TANH, g->p);
        g->b.origin = "add2_node";
        g->w = pb_ew2(&g->b, EW_ADD, g->z, g->k);
        add_output(g, g->w);
        add_output(g, g->p);
        add_output(g, g->x);
    } else {
        add_output(g, g->a);
    }
    Err e = {0};
    int rc = prim_graph_verify(g->pg, &e);
    CHECK_MSG(rc == ST_OK, "prim_graph_verify: %s", e.msg);
    CandRules rules = cand_rules_default();
    if (rc == ST_OK)
        rc = cand_enumerate(g->pg, &rules, 0, &g->cs, &e);
    CHECK_MSG(rc == ST_OK, "cand_enumerate: %s", e.msg);
    if (rc)
        return false;
    g->c_add1 = find_cand(g->cs, g->a, 1);
    CHECK(g->c_add1 >= 0 && is_add(g->pg, &g->cs->c[g->c_add1]));
    if (full) {
        g->c_soft = find_cand(g->cs, g->p, 5);
        g->c_tanh = find_cand(g->cs, g->z, 1);
        g->c_add2 = find_cand(g->cs, g->w, 1);
        CHECK_MSG(g->c_soft >= 0 && g->c_soft < g->cs->n && g->cs->c[g->c_soft].n_inputs == 1 &&
                      g->cs->c[g->c_soft].inputs[0] == g->a &&
                      is_softmax(g->pg, &g->cs->c[g->c_soft]),
                  "no softmax candidate reading a");
        CHECK(g->c_tanh >= 0 && g->c_add2 >= 0 && is_add(g->pg, &g->cs->c[g->c_add2]));
        return g->c_add1 >= 0 && g->c_soft >= 0 && g->c_tanh >= 0 && g->c_add2 >= 0 &&
               is_softmax(g->pg, &g->cs->c[g->c_soft]) && !check_failed_case;
    }
    return g->c_add1 >= 0;
}

static void tg_free(TG *g) {
    for (int i = 0; i < 2; i++)
        free(g->in[i]);
    cand_set_free(g->cs);
    if (g->pg) {
        const Graph *src = g->pg->src;
        prim_graph_free(g->pg);
        graph_free((Graph *)src);
    }
}

// The plan {add1, softmax, tanh (PLAN_INTERP), add2} with the GOOD configs.
static KernelConfig g_plan_cfg[4];
static char g_plan_names[4][64];

static Plan *tg_plan(TG *g) {
    int order[4] = {g->c_add1, g->c_soft, g->c_tanh, g->c_add2};
    Selection sel = {.n = 4, .kernels = order};
    PlanKernelSpec spec[4];
    g_plan_cfg[0] = g_plan_cfg[3] = test_cfg(128, VAR_GOOD);
    g_plan_cfg[1] = test_cfg(64, VAR_GOOD);
    g_plan_cfg[2] = test_cfg(0, VAR_GOOD);
    for (int i = 0; i < 4; i++) {
        const Candidate *c = &g->cs->c[order[i]];
        lab_kernel_name(g->pg, c, &g_plan_cfg[i], g_plan_names[i], sizeof g_plan_names[i]);
        spec[i] = i == 2 ? (PlanKernelSpec){PLAN_INTERP, NULL}
                         : (PlanKernelSpec){PLAN_GENERATED, g_plan_names[i]};
    }
    Plan *p = NULL;
    Err e = {0};
    int rc = plan_build(g->pg, g->cs, &sel, spec, &p, &e);
    CHECK_MSG(rc == ST_OK, "plan_build: %s", e.msg);
    return p;
}

// ---- cases that run everywhere ----

static void test_module_blob(void) {
    CudaLaunchTable t = {0};
    CudaLaunch l1 = {.grid = {10, 2, 1}, .block = {256, 1, 1}};
    CudaLaunch l2 = {.grid = {3, 1, 1}, .block = {32, 4, 2}, .smem = 65536};
    cuda_launch_table_set(&t, "orch_kaaaa_1", &l1);
    cuda_launch_table_set(&t, "orch_kbbbb_2", &l2);
    cuda_launch_table_set(&t, "orch_kaaaa_1", &l1); // replaces, does not add
    CHECK(t.n == 2);
    uint8_t cubin[200];
    for (size_t i = 0; i < sizeof cubin; i++)
        cubin[i] = (uint8_t)(rnd() * 256);
    uint8_t *buf = NULL;
    size_t len = 0;
    Err e = {0};
    CHECK(cuda_module_pack(cubin, sizeof cubin, &t, &buf, &len, &e) == ST_OK);
    const uint8_t *img = NULL;
    size_t img_size = 0;
    CudaLaunchTable u = {0};
    CHECK_MSG(cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e) == ST_OK, "%s", e.msg);
    CHECK(img_size == sizeof cubin && img && memcmp(img, cubin, sizeof cubin) == 0);
    CHECK(img && (img - buf) % 64 == 0);
    CHECK(u.n == 2);
    const CudaLaunch *f = cuda_launch_table_find(&u, "orch_kbbbb_2");
    CHECK(f && memcmp(f, &l2, sizeof l2) == 0);
    CHECK(cuda_launch_table_find(&u, "orch_kcccc_3") == NULL);
    cuda_launch_table_free(&u);
    // Every truncation and every single-byte corruption is refused with a message.
    int accepted = 0;
    for (size_t n = 0; n < len; n++) {
        Err e2 = {0};
        if (cuda_module_unpack(buf, n, "blob", &img, &img_size, &u, &e2) != ST_INVALID ||
            !strstr(e2.msg, "blob"))
            accepted++;
        cuda_launch_table_free(&u);
    }
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x5a;
        Err e2 = {0};
        if (cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e2) != ST_INVALID)
            accepted++;
        cuda_launch_table_free(&u);
        buf[i] ^= 0x5a;
    }
    CHECK_MSG(accepted == 0, "%d damaged blobs accepted", accepted);
    free(buf);
    // An impossible geometry is refused even with a right checksum.
    CudaLaunch bad = {.grid = {0, 1, 1}, .block = {128, 1, 1}};
    cuda_launch_table_set(&t, "orch_kdddd_4", &bad);
    CHECK(cuda_module_pack(cubin, sizeof cubin, &t, &buf, &len, &e) == ST_OK);
    Err e3 = {0};
    CHECK(cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e3) == ST_INVALID);
    CHECK_MSG(strstr(e3.msg, "impossible launch"), "%s", e3.msg);
    CHECK(u.n == 0);
    free(buf);
    cuda_launch_table_free(&t);
    CHECK(t.n == 0 && !t.symbols);
}

// One cubin for the plan's kernels: the add twice (once emitted), the softmax once.
static void test_build_module(void) {
    if (!g_have_nvrtc) {
        printf("  skip: no NVRTC on this machine\n");
        return;
    }
    TG g;
    if (tg_build(&g, 6, 37, true)) {
        int cands[3] = {g.c_add1, g.c_soft, g.c_add1};
        KernelConfig cfgs[3] = {test_cfg(128, VAR_GOOD), test_cfg(64, VAR_GOOD),
                                test_cfg(128, VAR_GOOD)};
        CudaEmitter em = test_emitter();
        void *cubin = NULL;
        size_t size = 0;
        CudaLaunchTable t;
        Err e = {0};
        g_emits = 0;
        int rc =
            cuda_lab_build_module(g.pg, g.cs, cands, cfgs, 3, &g_hw, &em, &cubin, &size, &t, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        CHECK(g_emits == 2 && t.n == 2);
        CHECK(size > 4 && cubin &&
              memcmp(cubin,
                     "\x7f"
                     "ELF",
                     4) == 0);
        char name[64];
        lab_kernel_name(g.pg, &g.cs->c[g.c_soft], &cfgs[1], name, sizeof name);
        const CudaLaunch *l = cuda_launch_table_find(&t, name);
        CHECK(l && l->grid[0] == 6 && l->block[0] == 64 && l->grid[1] == 1);
        free(cubin);
        cuda_launch_table_free(&t);
        // A kernel that does not compile, and one the emitter refuses: errors, no table.
        cfgs[1] = test_cfg(64, VAR_NO_COMPILE);
        e = (Err){0};
        CHECK(cuda_lab_build_module(g.pg, g.cs, cands, cfgs, 3, &g_hw, &em, &cubin, &size, &t,
                                    &e) != ST_OK);
        CHECK_MSG(strstr(e.msg, "NVRTC") && !cubin && t.n == 0, "%s", e.msg);
        cfgs[1] = test_cfg(64, VAR_EMIT_FAILS);
        e = (Err){0};
        CHECK(cuda_lab_build_module(g.pg, g.cs, cands, cfgs, 3, &g_hw, &em, &cubin, &size, &t,
                                    &e) == ST_UNSUPPORTED);
        CHECK_MSG(strstr(e.msg, "refuses") && strstr(e.msg, "var=3") && t.n == 0, "%s", e.msg);
    }
    tg_free(&g);
}

static void test_lab_no_driver(void) {
    if (g_driver_present) {
        printf("  skip: a CUDA driver is present\n");
        return;
    }
    TG g;
    if (tg_build(&g, 6, 37, false)) {
        void **values = NULL;
        Err e = {0};
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &values, &e) == ST_OK);
        LabJob jobs[2] = {{.cand = g.c_add1, .cfg = test_cfg(128, VAR_GOOD)},
                          {.cand = g.c_add1, .cfg = test_cfg(256, VAR_GOOD)}};
        jobs[0].status = jobs[1].status = LAB_OK;
        LabOptions lo = {0};
        CudaEmitter em = test_emitter();
        g_emits = 0;
        e = (Err){0};
        CHECK(cuda_lab_run(g.pg, g.cs, values, jobs, 2, &lo, &g_hw, &em, &e) == ST_UNSUPPORTED);
        CHECK_MSG(strcmp(e.msg, CUDA_NO_DRIVER_MSG) == 0, "%s", e.msg);
        CHECK(jobs[0].status == LAB_SKIPPED && jobs[1].status == LAB_SKIPPED && g_emits == 0);
        prim_values_free(g.pg, values);
    }
    tg_free(&g);
}

static void test_session_no_driver(void) {
    if (g_driver_present) {
        printf("  skip: a CUDA driver is present\n");
        return;
    }
    TG g;
    if (tg_build(&g, 6, 37, true)) {
        Plan *p = tg_plan(&g);
        CudaLaunchTable t = {0};
        CudaLaunch l = {.grid = {1, 1, 1}, .block = {128, 1, 1}};
        for (int i = 0; i < 4; i++)
            cuda_launch_table_set(&t, g_plan_names[i], &l);
        static const uint8_t fake[64] = {0x7f, 'E', 'L', 'F'};
        CudaSession *s = (CudaSession *)&t; // must be reset to NULL
        Err e = {0};
        CHECK(p &&
              cuda_session_create(g.pg, p, fake, sizeof fake, &t, NULL, &s, &e) == ST_UNSUPPORTED);
        CHECK_MSG(strcmp(e.msg, CUDA_NO_DRIVER_MSG) == 0, "%s", e.msg);
        CHECK(s == NULL);
        cuda_session_free(NULL);
        cuda_launch_table_free(&t);
        plan_free(p);
    }
    tg_free(&g);
}

// ---- cases on a GPU ----

static bool need_gpu(void) {
    if (g_api)
        return true;
    const char *req = getenv("ORCH_REQUIRE_GPU");
    CHECK_MSG(!(req && *req && strcmp(req, "0") != 0), "ORCH_REQUIRE_GPU is set, but: %s",
              g_load_err.msg);
    printf("  skip: no CUDA device on this machine (%s)\n", g_load_err.msg);
    return false;
}

static int g_before, g_results, g_last_done;

static int before_run(void *ctx, const LabJob *j) {
    (void)ctx;
    g_before++;
    return j->cfg.p[0] == 512; // the "crashed before" kernel
}

static void on_result(void *ctx, const LabJob *j, int done, int total) {
    (void)ctx;
    (void)total;
    g_results++;
    CHECK_MSG(done == g_last_done + 1, "done %d after %d", done, g_last_done);
    g_last_done = done;
    printf("  %-22s %-14s %9.2f us  reps %6d  spread %.3f  %s\n", j->cfg.desc,
           j->status == LAB_OK        ? "ok"
           : j->status == LAB_WRONG   ? "wrong"
           : j->status == LAB_SKIPPED ? "skipped"
                                      : "build failed",
           1e6 * j->median_s, j->reps, j->spread, j->note);
}

static bool timing_sane(const LabJob *j) {
    return j->status == LAB_OK && j->median_s > 0 && j->median_s < 1e-2 && j->min_s > 0 &&
           j->min_s <= j->median_s && j->reps >= 20 && j->spread >= 0 && j->max_err <= 1;
}

static void test_gpu_lab(void) {
    if (!need_gpu())
        return;
    TG g;
    if (tg_build(&g, 6, 37, true)) {
        void **values = NULL;
        Err e = {0};
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &values, &e) == ST_OK);
        int A = g.c_add1, S = g.c_soft;
        LabJob jobs[] = {
            {.cand = A, .cfg = test_cfg(256, VAR_GOOD)},
            {.cand = S, .cfg = test_cfg(64, VAR_GOOD)},
            {.cand = S, .cfg = test_cfg(128, VAR_NO_COMPILE)}, // spoils program 0: it is split
            {.cand = A, .cfg = test_cfg(128, VAR_WRONG)},
            {.cand = A, .cfg = test_cfg(64, VAR_EMIT_FAILS)},
            {.cand = S, .cfg = test_cfg(128, VAR_GOOD)},
            {.cand = A, .cfg = test_cfg(32, VAR_BAD_GEOMETRY)},
            {.cand = A, .cfg = test_cfg(512, VAR_GOOD)}, // before_run says skip
            {.cand = S, .cfg = test_cfg(32, VAR_WRONG)},
        };
        int n = (int)ORCH_COUNT(jobs);
        LabOptions lo = {
            .per_unit = 3, .jobs = 2, .before_run = before_run, .on_result = on_result};
        CudaEmitter em = test_emitter();
        g_before = g_results = g_last_done = 0;
        e = (Err){0};
        int rc = cuda_lab_run(g.pg, g.cs, values, jobs, n, &lo, &g_hw, &em, &e);
        CHECK_MSG(rc == ST_OK, "cuda_lab_run: %s", e.msg);
        CHECK_MSG(g_results == n, "%d results for %d jobs", g_results, n);
        CHECK_MSG(g_before == 6, "before_run called %d times", g_before);
        CHECK(timing_sane(&jobs[0]) && timing_sane(&jobs[1]) && timing_sane(&jobs[5]));
        CHECK_MSG(jobs[2].status == LAB_BUILD_FAILED && strstr(jobs[2].note, "NVRTC"), "%s",
                  jobs[2].note);
        CHECK_MSG(jobs[3].status == LAB_WRONG && jobs[3].reps == 0, "%s", jobs[3].note);
        CHECK_MSG(jobs[4].status == LAB_BUILD_FAILED && strncmp(jobs[4].note, "emit:", 5) == 0,
                  "%s", jobs[4].note);
        CHECK_MSG(jobs[6].status == LAB_BUILD_FAILED && strstr(jobs[6].note, "emitter bug"), "%s",
                  jobs[6].note);
        CHECK(jobs[7].status == LAB_SKIPPED);
        CHECK_MSG(jobs[8].status == LAB_WRONG && jobs[8].max_err > 1, "%s", jobs[8].note);
        prim_values_free(g.pg, values);
    }
    tg_free(&g);
}

// A faulting kernel is marked and reported, the lab stops with an error saying why (a CUDA
// context does not recover within a process). It runs last: the process cannot use the GPU
// afterwards.
static void test_gpu_lab_crash(void) {
    if (!need_gpu())
        return;
    const char *no = getenv("ORCH_TEST_NO_CRASH"); // e.g. under compute-sanitizer memcheck
    if (no && *no && strcmp(no, "0") != 0) {
        printf("  skip: ORCH_TEST_NO_CRASH is set\n");
        return;
    }
    TG g;
    if (tg_build(&g, 6, 37, false)) {
        void **values = NULL;
        Err e = {0};
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &values, &e) == ST_OK);
        LabJob jobs[] = {{.cand = g.c_add1, .cfg = test_cfg(128, VAR_CRASH)},
                         {.cand = g.c_add1, .cfg = test_cfg(256, VAR_GOOD)}};
        LabOptions lo = {.per_unit = 8, .max_reps = 5, .on_result = on_result};
        CudaEmitter em = test_emitter();
        e = (Err){0};
        g_results = g_last_done = 0;
        int rc = cuda_lab_run(g.pg, g.cs, values, jobs, 2, &lo, &g_hw, &em, &e);
        CHECK_MSG(rc == ST_RUNTIME && strstr(e.msg, "crashed the context of GPU") &&
                      strstr(e.msg, "var=5"),
                  "cuda_lab_run: %d: %s", rc, e.msg);
        CHECK_MSG(jobs[0].status == LAB_WRONG && strstr(jobs[0].note, "crashed"), "%s",
                  jobs[0].note);
        CHECK_MSG(jobs[1].status == LAB_SKIPPED && strstr(jobs[1].note, "not run"), "%s",
                  jobs[1].note);
        CHECK(g_results == 1);
        prim_values_free(g.pg, values);
    }
    tg_free(&g);
}

// Inputs of 2 x 16 MiB: above half of an H100's L2, so each sample is one launch after a flush.
static void test_gpu_lab_flush(void) {
    if (!need_gpu())
        return;
    TG g;
    if (tg_build(&g, 2048, 2048, false)) {
        void **values = NULL;
        Err e = {0};
        CHECK(prim_interp_values(g.pg, (const void *const *)g.in, &values, &e) == ST_OK);
        LabJob job = {.cand = g.c_add1, .cfg = test_cfg(256, VAR_GOOD)};
        LabOptions lo = {0};
        CudaEmitter em = test_emitter();
        e = (Err){0};
        int rc = cuda_lab_run(g.pg, g.cs, values, &job, 1, &lo, &g_hw, &em, &e);
        CHECK_MSG(rc == ST_OK, "cuda_lab_run: %s", e.msg);
        bool flushed = g_hw.l2_bytes > 0 && (int64_t)2 * 2048 * 2048 * 4 > g_hw.l2_bytes / 2;
        CHECK_MSG(timing_sane(&job) && (!flushed || job.reps == 20), "%s: reps %d", job.note,
                  job.reps);
        // 48 MiB moved: a time below what the DRAM can do would mean the L2 served it.
        double floor_s = g_hw.dram_bw > 0 ? 48.0 * 1024 * 1024 / g_hw.dram_bw : 0;
        printf("  %.1f us for 48 MiB (DRAM bound %.1f us), %s\n", 1e6 * job.median_s, 1e6 * floor_s,
               flushed ? "L2 flushed" : "no flush needed");
        CHECK(!flushed || job.min_s >= 0.8 * floor_s);
        prim_values_free(g.pg, values);
    }
    tg_free(&g);
}

static bool close_enough(const Tensor *t, const float *got, const float *ref) {
    for (int64_t i = 0; i < tensor_numel(t); i++)
        if (!(fabsf(got[i] - ref[i]) <= 1e-5f + 1e-5f * fabsf(ref[i]))) {
            printf("  output '%s' element %lld: %.9g, the interpreter says %.9g\n", t->name,
                   (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

// Runs the session (host or device buffers) on fresh inputs and compares with the interpreter.
static bool session_matches(TG *g, CudaSession *s, bool device) {
    const PrimGraph *pg = g->pg;
    for (int i = 0; i < 2; i++)
        fill(pg->tensors[pg->inputs[i]], g->in[i]);
    void *ref[3] = {0}, *got[3] = {0};
    Err e = {0};
    bool ok = prim_interp_run(pg, (const void *const *)g->in, ref, &e) == ST_OK;
    CHECK_MSG(ok, "prim_interp_run: %s", e.msg);
    for (int i = 0; i < 3; i++) {
        size_t b = tensor_nbytes(pg->tensors[pg->outputs[i]]);
        got[i] = xmalloc(b);
        memset(got[i], 0xff, b);
    }
    if (ok && !device) {
        int rc = cuda_session_run(s, (const void *const *)g->in, got, &e);
        CHECK_MSG(rc == ST_OK, "cuda_session_run: %s", e.msg);
        ok = rc == ST_OK;
    } else if (ok) {
        const CudaDevice *dev = cuda_session_device(s);
        CUdeviceptr din[2] = {0}, dout[3] = {0};
        ok = cuda_device_bind(dev, &e) == ST_OK;
        for (int i = 0; i < 2 && ok; i++) {
            size_t b = tensor_nbytes(pg->tensors[pg->inputs[i]]);
            ok = CUDA_TRY(g_api, &e, cuMemAlloc, &din[i], b) == ST_OK &&
                 CUDA_TRY(g_api, &e, cuMemcpyHtoD, din[i], g->in[i], b) == ST_OK;
        }
        for (int i = 0; i < 3 && ok; i++)
            ok = CUDA_TRY(g_api, &e, cuMemAlloc, &dout[i],
                          tensor_nbytes(pg->tensors[pg->outputs[i]])) == ST_OK;
        if (ok) {
            int rc = cuda_session_run_device(s, din, dout, NULL, &e);
            CHECK_MSG(rc == ST_OK, "cuda_session_run_device: %s", e.msg);
            ok = rc == ST_OK;
        }
        for (int i = 0; i < 3 && ok; i++)
            ok = CUDA_TRY(g_api, &e, cuMemcpyDtoH, got[i], dout[i],
                          tensor_nbytes(pg->tensors[pg->outputs[i]])) == ST_OK;
        CHECK_MSG(ok, "device buffers: %s", e.msg);
        for (int i = 0; i < 2; i++)
            if (din[i])
                g_api->cuMemFree(din[i]);
        for (int i = 0; i < 3; i++)
            if (dout[i])
                g_api->cuMemFree(dout[i]);
    }
    for (int i = 0; i < 3 && ok; i++)
        ok = close_enough(pg->tensors[pg->outputs[i]], got[i], ref[i]);
    CHECK(ok);
    for (int i = 0; i < 3; i++) {
        free(ref[i]);
        free(got[i]);
    }
    return ok;
}

static void test_gpu_session(void) {
    if (!need_gpu())
        return;
    TG g;
    if (tg_build(&g, 6, 37, true)) {
        Plan *p = tg_plan(&g);
        int cands[3] = {g.c_add1, g.c_soft, g.c_add2};
        KernelConfig cfgs[3] = {g_plan_cfg[0], g_plan_cfg[1], g_plan_cfg[3]};
        CudaEmitter em = test_emitter();
        void *cubin = NULL;
        size_t size = 0;
        CudaLaunchTable t;
        Err e = {0};
        int rc =
            p ? cuda_lab_build_module(g.pg, g.cs, cands, cfgs, 3, &g_hw, &em, &cubin, &size, &t, &e)
              : ST_INVALID;
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        // Through the blob, as an artefact would carry it.
        uint8_t *blob = NULL;
        size_t blob_len = 0;
        const uint8_t *img = NULL;
        size_t img_size = 0;
        CudaLaunchTable t2 = {0};
        if (rc == ST_OK)
            rc = cuda_module_pack(cubin, size, &t, &blob, &blob_len, &e);
        if (rc == ST_OK)
            rc = cuda_module_unpack(blob, blob_len, "test", &img, &img_size, &t2, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        CudaSession *s = NULL;
        if (rc == ST_OK) {
            rc = cuda_session_create(g.pg, p, img, img_size, &t2, NULL, &s, &e);
            CHECK_MSG(rc == ST_OK, "cuda_session_create: %s", e.msg);
        }
        if (s) {
            CHECK(p->n_launches == 5 && cuda_session_num_launches(s) == 5);
            CHECK(cuda_session_num_kernels(s) == 4);
            CHECK_MSG(cuda_session_num_graphs(s) == 2, "%d graphs", cuda_session_num_graphs(s));
            CHECK(strcmp(cuda_session_launch_name(s, 0), g_plan_names[0]) == 0);
            CHECK(strncmp(cuda_session_launch_name(s, 2), "interp:", 7) == 0);
            CHECK(strcmp(cuda_session_launch_nodes(s, 2), "tanh_node") == 0);
            CHECK(strncmp(cuda_session_launch_name(s, 4), "copy:", 5) == 0);
            CHECK(cuda_session_kernel_times(s) == NULL);
            // Graph replay, twice, on fresh inputs each time.
            CHECK(session_matches(&g, s, false));
            CHECK(session_matches(&g, s, false));
            // Profiled: launch by launch between events.
            cuda_session_set_profiling(s, 1);
            CHECK(session_matches(&g, s, false));
            const double *times = cuda_session_kernel_times(s);
            CHECK(times != NULL);
            for (int k = 0; times && k < 5; k++) {
                printf("  launch %d %-40s %9.2f us\n", k, cuda_session_launch_name(s, k),
                       1e6 * times[k]);
                CHECK_MSG(times[k] >= 0 && times[k] < 1 && (k == 4 || times[k] > 0),
                          "launch %d: %g s", k, times[k]);
            }
            cuda_session_set_profiling(s, 0);
            CHECK(session_matches(&g, s, true)); // device buffers, graph replay
            // A missing buffer is a usage error, not a crash.
            Err e2 = {0};
            CHECK(cuda_session_run(s, NULL, NULL, &e2) == ST_USAGE);
        }
        cuda_session_free(s);
        // A table without the softmax kernel, no cubin at all: refused with the kernel named.
        if (rc == ST_OK) {
            CudaLaunchTable t3 = {0};
            cuda_launch_table_set(&t3, g_plan_names[0],
                                  cuda_launch_table_find(&t2, g_plan_names[0]));
            Err e3 = {0};
            s = NULL;
            CHECK(cuda_session_create(g.pg, p, img, img_size, &t3, NULL, &s, &e3) == ST_INVALID);
            CHECK_MSG(strstr(e3.msg, g_plan_names[1]) && s == NULL, "%s", e3.msg);
            e3 = (Err){0};
            CHECK(cuda_session_create(g.pg, p, NULL, 0, &t2, NULL, &s, &e3) == ST_INVALID);
            CHECK_MSG(strstr(e3.msg, "no cubin") && s == NULL, "%s", e3.msg);
            cuda_launch_table_free(&t3);
        }
        cuda_launch_table_free(&t2);
        if (rc == ST_OK || cubin)
            cuda_launch_table_free(&t);
        free(blob);
        free(cubin);
        plan_free(p);
    }
    tg_free(&g);
}

// ---- an artefact of target "cuda" ----

// x, y [6, 37]: a = Add(x, y) (generated), p = Softmax(a), z = Tanh(p); outputs p, z, a. Every
// other primitive runs on the host (PLAN_INTERP / PLAN_OPAQUE), whatever fission makes of them.
static uint8_t *cuda_model(size_t *len) {
    const int64_t d[] = {6, 37};
    MB *b = mb_new(13);
    mb_input(b, "x", 1, 2, d);
    mb_input(b, "y", 1, 2, d);
    mb_node(b, "Add", "add", "x,y", "a", NULL);
    mb_node(b, "Softmax", "softmax", "a", "p", mb_attr_i(b, "axis", -1), NULL);
    mb_node(b, "Tanh", "tanh", "p", "z", NULL);
    mb_output(b, "p");
    mb_output(b, "z");
    mb_output(b, "a");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

static void test_artifact_session(void) {
    size_t onnx_size = 0;
    uint8_t *onnx = cuda_model(&onnx_size);
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    Plan *plan = NULL;
    uint8_t *plan_bytes = NULL, *blob = NULL;
    size_t plan_size = 0, blob_len = 0;
    void *cubin = NULL;
    size_t cubin_size = 0;
    CudaLaunchTable t = {0};
    Err e = {0};
    int rc = compile_import(onnx, onnx_size, "cuda_model", NULL, NULL, false, &g, &pg, &e);
    CandRules rules = cand_rules_default();
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &rules, 0, &cs, &e);
    // One kernel per primitive, in graph order: the adds generated, the rest on the host.
    int n = 0, n_gen = 0;
    int *order = xcalloc((size_t)(pg ? pg->n_prims : 0) + 1, sizeof(int));
    PlanKernelSpec *spec = xcalloc((size_t)(pg ? pg->n_prims : 0) + 1, sizeof *spec);
    char(*names)[64] = xcalloc((size_t)(pg ? pg->n_prims : 0) + 1, sizeof *names);
    int *gen = xcalloc((size_t)(pg ? pg->n_prims : 0) + 1, sizeof(int));
    KernelConfig *cfgs = xcalloc((size_t)(pg ? pg->n_prims : 0) + 1, sizeof(KernelConfig));
    for (int p = 0; rc == ST_OK && p < pg->n_prims; p++) {
        int c = -1;
        for (int i = 0; i < cs->n && c < 0; i++)
            if (cs->c[i].n_prims == 1 && cs->c[i].prims[0] == p)
                c = i;
        CHECK_MSG(c >= 0, "no singleton for primitive %d", p);
        if (c < 0) {
            rc = ST_INVALID;
            break;
        }
        order[n] = c;
        if (is_add(pg, &cs->c[c])) {
            cfgs[n_gen] = test_cfg(128, VAR_GOOD);
            lab_kernel_name(pg, &cs->c[c], &cfgs[n_gen], names[n], sizeof names[n]);
            spec[n] = (PlanKernelSpec){PLAN_GENERATED, names[n]};
            gen[n_gen++] = c;
        } else {
            spec[n].kind = pg->prims[p]->kind == PRIM_OPAQUE ? PLAN_OPAQUE : PLAN_INTERP;
        }
        n++;
    }
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    CHECK(n_gen == 1 || rc != ST_OK);
    Selection sel = {.n = n, .kernels = order};
    if (rc == ST_OK && (rc = plan_build(pg, cs, &sel, spec, &plan, &e)) == ST_OK)
        rc = plan_write(plan, &plan_bytes, &plan_size, &e);
    CHECK_MSG(rc == ST_OK, "plan: %s", e.msg);
    static const uint8_t fake[64] = {0x7f, 'E', 'L', 'F'};
    if (rc == ST_OK && g_have_nvrtc)
        rc = cuda_lab_build_module(
            pg, cs, gen, cfgs, n_gen, &g_hw,
            &(CudaEmitter){test_emit, test_prelude(), {.precision = PREC_FP32}}, &cubin,
            &cubin_size, &t, &e);
    else if (rc == ST_OK) // without NVRTC (and so without a GPU) the bytes are never loaded
        cuda_launch_table_set(&t, names[0], &(CudaLaunch){.grid = {1, 1, 1}, .block = {128, 1, 1}});
    if (rc == ST_OK)
        rc = cuda_module_pack(cubin ? cubin : fake, cubin ? cubin_size : sizeof fake, &t, &blob,
                              &blob_len, &e);
    CHECK_MSG(rc == ST_OK, "module: %s", e.msg);
    HwInfo hw_now;
    cuda_hw_info(&g_hw, &hw_now);
    ArtifactHeader h = cuda_test_header(&g_hw, onnx, onnx_size);
    h.kernels = n;
    char path[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/orch_cuda_rt_%d.orch", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    ArtifactContents a = {0};
    if (rc == ST_OK)
        rc = artifact_write(path, &h, onnx, onnx_size, plan_bytes, plan_size, blob, blob_len, &e);
    if (rc == ST_OK)
        rc = artifact_read(path, &a, &e);
    remove(path);
    CHECK_MSG(rc == ST_OK, "artefact: %s", e.msg);
    CudaSession *s = NULL;
    if (rc == ST_OK) {
        // Another GPU, another target: refused before anything is loaded.
        HwInfo other = hw_now;
        snprintf(other.fingerprint, sizeof other.fingerprint, "cuda|another GPU");
        Err e2 = {0};
        CHECK(cuda_session_create_artifact(&a, &other, NULL, &s, &e2) == ST_INVALID && !s);
        CHECK_MSG(strstr(e2.msg, "different GPU"), "%s", e2.msg);
        snprintf(a.h.target, sizeof a.h.target, "cpu");
        e2 = (Err){0};
        CHECK(cuda_session_create_artifact(&a, &hw_now, NULL, &s, &e2) == ST_INVALID && !s);
        CHECK_MSG(strstr(e2.msg, "'cpu' target"), "%s", e2.msg);
        snprintf(a.h.target, sizeof a.h.target, "cuda");
        e2 = (Err){0};
        SessionOptions any = {.allow_foreign_device = true};
        int rc2 =
            cuda_session_create_artifact(&a, g_api ? &hw_now : NULL, g_api ? NULL : &any, &s, &e2);
        if (!g_driver_present) { // the import ran; the driver is what is missing
            CHECK_MSG(rc2 == ST_UNSUPPORTED && strstr(e2.msg, CUDA_NO_DRIVER_MSG) && !s, "%s",
                      e2.msg);
        } else if (g_api) {
            CHECK_MSG(rc2 == ST_OK && s, "cuda_session_create_artifact: %s", e2.msg);
        }
    }
    if (s) {
        // The session's own graph (re-imported) against the interpreter on the original one.
        const PrimGraph *spg = cuda_session_graph(s);
        void *in[2], *ref[3] = {0}, *got[3] = {0};
        for (int i = 0; i < 2; i++) {
            const Tensor *ti = pg->tensors[pg->inputs[i]];
            in[i] = xmalloc(tensor_nbytes(ti));
            fill(ti, in[i]);
        }
        CHECK(spg->n_outputs == 3 && pg->n_outputs == 3);
        CHECK(prim_interp_run(pg, (const void *const *)in, ref, &e) == ST_OK);
        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < 3; i++) {
                size_t b = tensor_nbytes(pg->tensors[pg->outputs[i]]);
                free(got[i]);
                got[i] = xmalloc(b);
                memset(got[i], 0xff, b);
            }
            Err e3 = {0};
            int rr = cuda_session_run(s, (const void *const *)in, got, &e3);
            CHECK_MSG(rr == ST_OK, "cuda_session_run: %s", e3.msg);
            for (int i = 0; i < 3 && rr == ST_OK; i++)
                CHECK(close_enough(pg->tensors[pg->outputs[i]], got[i], ref[i]));
        }
        printf("  %d launches, %d CUDA graphs\n", cuda_session_num_launches(s),
               cuda_session_num_graphs(s));
        for (int i = 0; i < 3; i++) {
            free(ref[i]);
            free(got[i]);
        }
        for (int i = 0; i < 2; i++)
            free(in[i]);
    }
    cuda_session_free(s);
    artifact_contents_free(&a);
    cuda_launch_table_free(&t);
    free(cubin);
    free(blob);
    free(plan_bytes);
    plan_free(plan);
    free(order);
    free(spec);
    free(names);
    free(gen);
    free(cfgs);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    free(onnx);
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    g_driver_present = h != NULL;
    if (h)
        dlclose(h);
    g_api = cuda_api_load(&g_load_err);
    printf("driver: %s\n", g_api ? "present, with a device" : g_load_err.msg);
    Err en = {0};
    g_have_nvrtc = nvrtc_load(&en) == ST_OK;
    if (!g_have_nvrtc)
        printf("nvrtc: %s\n", en.msg);
    if (g_api) {
        Err eh = {0};
        if (cuda_hw_detect(&g_hw, NULL, &eh) != ST_OK) {
            printf("cuda_hw_detect: %s\n", eh.msg);
            g_api = NULL; // the GPU cases then fail under ORCH_REQUIRE_GPU, else skip
            snprintf(g_load_err.msg, sizeof g_load_err.msg, "%s", eh.msg);
        } else {
            printf("device: %s (%s, %d SMs, L2 %lld bytes)\n", g_hw.name, g_hw.arch, g_hw.sm_count,
                   (long long)g_hw.l2_bytes);
        }
    }
    if (!g_api) { // a description of an H100 for compile-only cases
        snprintf(g_hw.name, sizeof g_hw.name, "NVIDIA H100 (described)");
        g_hw.cc_major = 9;
        cuda_arch_name(9, 0, g_hw.arch, sizeof g_hw.arch);
        if (g_have_nvrtc && !nvrtc_supports_cc(90))
            cuda_arch_name(8, 0, g_hw.arch, sizeof g_hw.arch);
        g_hw.max_threads_per_block = 1024;
        g_hw.smem_per_block_optin = 227 * 1024;
        g_hw.l2_bytes = 50 * 1024 * 1024;
    }

    RUN(test_module_blob);
    RUN(test_build_module);
    RUN(test_lab_no_driver);
    RUN(test_session_no_driver);
    RUN(test_gpu_lab);
    RUN(test_gpu_lab_flush);
    RUN(test_gpu_session);
    RUN(test_artifact_session);
    RUN(test_gpu_lab_crash); // last: CUDA is unusable in this process afterwards
    return CHECK_DONE();
}
