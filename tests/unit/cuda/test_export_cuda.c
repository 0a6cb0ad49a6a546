// orch export of CUDA artefacts (export_cuda.c), on artefacts made here as the compile driver
// makes them: a model (Conv, Relu, Flatten, MatMul + bias, Softmax, TopK with its indices, a
// constant output) imported, one kernel per primitive with the CUDA target's
// first config for a GPU (detected, else a described H100), the module's source and launch table
// (cuda_lab_module_source), its cubin where NVRTC exists, written with artifact_write_plans.
// Two variants: generated kernels only, and the MatMul / Conv as cuBLASLt / cuDNN calls (on a GPU
// the libraries' heuristics' first algorithm, else a call made up for building only).
// Everywhere: the tree's files; kernels.cu the artefact's source byte for byte; weights.bin the
// packed constants and model.cu's checksum of them; one <<<grid, block, smem>>> launch per kernel
// launch with the launch table's geometry; refusals naming the launch (an interpreted one, one
// the launch table lacks), an artefact without source refused, and no folder made.
// Where nvcc exists (ORCH_NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc): make builds
// the tree, and its kernels.cubin (NVRTC at build time) is the artefact's cubin byte for byte. With
// a GPU: the runner's outputs bit-identical to the session's on the same random inputs
// (ORCH_REQUIRE_GPU=1: skipping that is a failure). EXPORT_INCDIRS / EXPORT_LIBDIRS: the Makefile's
// INCDIRS / LIBDIRS (cuDNN's folders). Usage: unit_export_cuda [seed]
#define _GNU_SOURCE
#include "../check.h"
#include "../model_builder.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_lab.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/session_cuda.h"
#include "backend/export_tree.h"
#include "backend/kernel_lab.h"
#include "backend/target.h"
#include "candidates/candidates.h"
#include "compile/compile.h"
#include "cuda_test_artifact.h"
#include "plan/artifact.h"
#include "plan/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static const CudaApi *g_api; // NULL without a GPU
static Err g_load_err;
static bool g_have_nvrtc;
static CudaHw g_hw; // detected on a GPU, else a described H100
static char g_nvcc[1024], g_tmp[1024];

static double rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0;
}

static Onnx__TensorProto *weight(MB *b, const char *name, int rank, const int64_t *dims) {
    Onnx__TensorProto *t = mb_tensor(b, name, 1, rank, dims);
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    t->n_float_data = (size_t)n;
    t->float_data = arena_alloc(b->a, sizeof(float) * (size_t)n); // freed with the builder
    for (int64_t i = 0; i < n; i++)
        t->float_data[i] = (float)(rnd() - 0.5);
    return t;
}

// x [2,3,9,9]: y = Softmax(Flatten(Relu(Conv(x))) W + b) [2,10]; TopK(y, 3) -> v, i; the
// constant b2 as an output too.
static uint8_t *model_bytes(size_t *len) {
    MB *b = mb_new(17);
    const int64_t xd[] = {2, 3, 9, 9}, wd[] = {4, 3, 3, 3}, bd[] = {4}, w2[] = {324, 10},
                  b2[] = {10}, kd[] = {1};
    mb_input(b, "x", 1, 4, xd);
    mb_init(b, weight(b, "w", 4, wd));
    mb_init(b, weight(b, "bc", 1, bd));
    mb_init(b, weight(b, "w2", 2, w2));
    mb_init(b, weight(b, "b2", 1, b2));
    Onnx__TensorProto *k = mb_tensor(b, "k", 7, 1, kd);
    k->n_int64_data = 1;
    k->int64_data = arena_alloc(b->a, sizeof(int64_t));
    k->int64_data[0] = 3;
    mb_init(b, k);
    const int64_t pads[] = {1, 1, 1, 1};
    mb_node(b, "Conv", "conv", "x,w,bc", "c", mb_attr_ints(b, "pads", 4, pads), NULL);
    mb_node(b, "Relu", "relu", "c", "r", NULL);
    mb_node(b, "Flatten", "flatten", "r", "f", mb_attr_i(b, "axis", 1), NULL);
    mb_node(b, "MatMul", "fc", "f,w2", "mm", NULL);
    mb_node(b, "Add", "fc_bias", "mm,b2", "lo", NULL);
    mb_node(b, "Softmax", "softmax", "lo", "y", mb_attr_i(b, "axis", -1), NULL);
    mb_node(b, "TopK", "top3", "y,k", "v,i", NULL);
    for (const char *const *o = (const char *const[]){"y", "v", "i", "b2", NULL}; *o; o++)
        mb_output(b, *o);
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

enum { VAR_KERNELS = 0, VAR_LIBS = 1 };
// How an artefact is made wrong on purpose.
enum { BAD_NONE = 0, BAD_NO_SOURCE = 1, BAD_INTERP = 2, BAD_NO_ENTRY = 3 };

typedef struct Built {
    char path[1200];
    int n_launches, n_lib, n_gen, n_blas, n_dnn;
    uint8_t *onnx;
    size_t onnx_size;
} Built;

static bool has_linear(const PrimGraph *pg, const Candidate *c) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_LINEAR)
            return true;
    return false;
}

// A library config for a LINEAR candidate: on a GPU the heuristics' first, else one made up from
// the analysis (buildable, never run). false where the libraries cannot compute it.
static bool lib_config(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt,
                       KernelConfig *cfg) {
    if (g_api) {
        KernelConfig k[4];
        if (blaslt_configs(pg, c, &g_hw, opt, k, 1) == 1 || dnn_configs(pg, c, &g_hw, opt, k, 1))
            return *cfg = k[0], true;
        return false;
    }
    BlasLtCall bl;
    DnnCall dn;
    if (blaslt_analyse(pg, c, opt, &bl) && bl.version) {
        blaslt_config_pack(&(CuBlasLtConfig){.workspace = 4096, .compute = bl.compute}, cfg);
        return true;
    }
    if (dnn_analyse(pg, c, opt, &dn) && dn.version) {
        dnn_config_pack(&(CuDnnConfig){.algo = DNN_ALGO_IMPLICIT_PRECOMP_GEMM,
                                       .math = DNN_MATH_FMA,
                                       .workspace = 8192},
                        cfg);
        return true;
    }
    return false;
}

// Makes the artefact of variant var, damaged as bad says, into b->path.
static int build(int var, int bad, Built *b, Err *e) {
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s/export_cuda_%d_%d.orch", g_tmp, var, bad);
    b->onnx = model_bytes(&b->onnx_size);
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    Plan *plan = NULL;
    int rc = compile_import(b->onnx, b->onnx_size, "export_model", NULL, NULL, false, &g, &pg, e);
    CandRules rules = cand_rules_default();
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &rules, 0, &cs, e);
    int np = pg ? pg->n_prims : 0, n = 0, ng = 0;
    int *order = xcalloc((size_t)np + 1, sizeof(int)), *gen = xcalloc((size_t)np + 1, sizeof(int));
    PlanKernelSpec *spec = xcalloc((size_t)np + 1, sizeof *spec);
    char(*names)[64] = xcalloc((size_t)np + 1, sizeof *names);
    KernelConfig *cfgs = xcalloc((size_t)np + 1, sizeof *cfgs);
    TargetMachine m = {.target = &target_cuda, .opt = {.precision = PREC_FP32}, .model = &g_hw};
    for (int p = 0; rc == ST_OK && p < np; p++) {
        int c = -1;
        for (int i = 0; i < cs->n && c < 0; i++)
            if (cs->c[i].n_prims == 1 && cs->c[i].prims[0] == p)
                c = i;
        ORCH_ASSERT(c >= 0);
        const Candidate *cd = &cs->c[c];
        order[n] = c;
        KernelConfig k[8], chosen;
        bool ok = false;
        if (var == VAR_LIBS && has_linear(pg, cd))
            ok = lib_config(pg, cd, &m.opt, &chosen);
        if (!ok && target_cuda.supports(&m, pg, cd)) {
            int nk = target_cuda.configs(&m, pg, cd, k, 8);
            for (int j = 0; j < nk && !ok; j++)
                if (k[j].cls != CUCLS_BLASLT && k[j].cls != CUCLS_CUDNN)
                    ok = true, chosen = k[j];
        }
        // The Relu on the primitive interpreter, for the refusal.
        bool interp = bad == BAD_INTERP && pg->prims[p]->kind == PRIM_ELEMWISE &&
                      pg->prims[p]->origin && strcmp(pg->prims[p]->origin, "relu") == 0;
        if (ok && !interp) {
            cfgs[ng] = chosen;
            lab_kernel_name(pg, cd, &chosen, names[n], sizeof names[n]);
            spec[n] = (PlanKernelSpec){PLAN_GENERATED, names[n]};
            gen[ng++] = c;
            b->n_blas += chosen.cls == CUCLS_BLASLT;
            b->n_dnn += chosen.cls == CUCLS_CUDNN;
            b->n_lib = b->n_blas + b->n_dnn;
        } else {
            spec[n].kind = pg->prims[p]->kind == PRIM_OPAQUE ? PLAN_OPAQUE : PLAN_INTERP;
        }
        n++;
    }
    b->n_gen = ng;
    Selection sel = {.n = n, .kernels = order};
    uint8_t *plan_bytes = NULL, *blob = NULL;
    size_t plan_size = 0, blob_len = 0;
    if (rc == ST_OK && (rc = plan_build(pg, cs, &sel, spec, &plan, e)) == ST_OK)
        rc = plan_write(plan, &plan_bytes, &plan_size, e);
    if (plan)
        b->n_launches = plan->n_launches;
    CudaEmitter em = {cugen_emit, cugen_prelude(), {.precision = PREC_FP32}};
    char *src = NULL;
    CudaLaunchTable t = {0};
    void *cubin = NULL;
    size_t cubin_size = 0;
    if (rc == ST_OK)
        rc = cuda_lab_module_source(pg, cs, gen, cfgs, ng, &g_hw, &em, &src, &t, e);
    if (rc == ST_OK && g_have_nvrtc) {
        CudaLaunchTable t2;
        rc = cuda_lab_build_module(pg, cs, gen, cfgs, ng, &g_hw, &em, &cubin, &cubin_size, &t2, e);
        if (rc == ST_OK)
            CHECK(t2.n == t.n); // the same kernels as the source's
        cuda_launch_table_free(&t2);
    }
    if (rc == ST_OK && bad == BAD_NO_ENTRY) { // the table without its first generated kernel
        CudaLaunchTable t3 = {0};
        for (int i = 1; i < t.n; i++)
            cuda_launch_table_set(&t3, t.symbols[i], &t.launches[i]);
        cuda_launch_table_free(&t);
        t = t3;
    }
    static const uint8_t fake[64] = {0x7f, 'E', 'L', 'F'};
    if (rc == ST_OK)
        rc = cuda_module_pack(cubin ? cubin : fake, cubin ? cubin_size : sizeof fake, &t, &blob,
                              &blob_len, e);
    ArtifactHeader h = cuda_test_header(&g_hw, b->onnx, b->onnx_size);
    ArtifactPlan ap = {.kernels = n,
                       .plan = plan_bytes,
                       .plan_size = plan_size,
                       .so = blob,
                       .so_size = blob_len,
                       .src = bad == BAD_NO_SOURCE ? NULL : (const uint8_t *)src,
                       .src_size = bad == BAD_NO_SOURCE || !src ? 0 : strlen(src)};
    if (rc == ST_OK)
        rc = artifact_write_plans(b->path, &h, b->onnx, b->onnx_size, NULL, 0, &ap, 1, e);
    // The cubin beside it, for the machine-code comparison.
    if (rc == ST_OK && cubin) {
        char cp[1300];
        snprintf(cp, sizeof cp, "%s.cubin", b->path);
        FILE *f = fopen(cp, "wb");
        if (f) {
            fwrite(cubin, 1, cubin_size, f);
            fclose(f);
        }
    }
    free(src);
    free(cubin);
    free(blob);
    free(plan_bytes);
    cuda_launch_table_free(&t);
    free(order);
    free(gen);
    free(spec);
    free(names);
    free(cfgs);
    plan_free(plan);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    return rc;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xmalloc((size_t)len + 1);
    size_t got = fread(s, 1, (size_t)len, f);
    fclose(f);
    s[got] = '\0';
    if (n)
        *n = got;
    return s;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

// Whether the run can be made; without a GPU it is skipped, a failure under ORCH_REQUIRE_GPU=1.
static bool gpu_or_skip(void) {
    const char *req = getenv("ORCH_REQUIRE_GPU");
    bool required = req && *req && strcmp(req, "0") != 0;
    if (!g_api) {
        printf("  %s the run: no CUDA device on this machine (%s)\n",
               required ? "cannot make (ORCH_REQUIRE_GPU=1)" : "skip", g_load_err.msg);
        CHECK(!required);
    }
    return g_api != NULL;
}

// The artefact's cubin, written beside it by build().
static const char *cp_of(const char *art, char *buf, size_t n) {
    snprintf(buf, n, "%s.cubin", art);
    return buf;
}

// Runs the tree's runner and the session on the same random inputs; compares every output's bytes.
static void run_and_compare(const char *art, const char *dir) {
    ArtifactContents a = {0};
    Err e = {0};
    CHECK_MSG(artifact_read(art, &a, &e) == ST_OK, "%s", e.msg);
    HwInfo now;
    cuda_hw_info(&g_hw, &now);
    CudaSession *s = NULL;
    int rc = cuda_session_create_artifact(&a, &now, NULL, &s, &e);
    CHECK_MSG(rc == ST_OK, "session: %s", e.msg);
    const PrimGraph *pg = s ? cuda_session_graph(s) : NULL;
    int ni = pg ? pg->n_inputs : 0, no = pg ? pg->n_outputs : 0;
    void **in = xcalloc((size_t)ni + 1, sizeof(void *)),
         **out = xcalloc((size_t)no + 1, sizeof(void *));
    char cmd[8192];
    int at = snprintf(cmd, sizeof cmd, "'%s/model' '%s/weights.bin'", dir, dir);
    for (int i = 0; i < ni; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        size_t bytes = tensor_nbytes(t);
        float *x = xmalloc(bytes + 1);
        for (size_t k = 0; k < bytes / 4; k++)
            x[k] = (float)(2 * rnd() - 1);
        in[i] = x;
        char p[1300];
        snprintf(p, sizeof p, "%s/in%d.bin", dir, i);
        FILE *f = fopen(p, "wb");
        CHECK(f && fwrite(x, 1, bytes, f) == bytes);
        if (f)
            fclose(f);
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " '%s'", p);
    }
    for (int i = 0; i < no; i++) {
        out[i] = xcalloc(tensor_nbytes(pg->tensors[pg->outputs[i]]) + 1, 1);
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " '%s/out%d.bin'", dir, i);
    }
    if (s) {
        rc = cuda_session_run(s, (const void *const *)in, out, &e);
        CHECK_MSG(rc == ST_OK, "session run: %s", e.msg);
        CHECK_MSG(sh("%s", cmd) == 0, "the runner failed: %s", cmd);
    }
    for (int i = 0; s && i < no; i++) {
        char p[1300];
        snprintf(p, sizeof p, "%s/out%d.bin", dir, i);
        size_t got = 0;
        char *bytes = slurp(p, &got);
        size_t want = tensor_nbytes(pg->tensors[pg->outputs[i]]);
        CHECK_MSG(bytes && got == want && memcmp(bytes, out[i], want) == 0,
                  "output '%s' differs from the session's", pg->tensors[pg->outputs[i]]->name);
        free(bytes);
    }
    if (s)
        printf("  %d outputs bit-identical to the session's\n", no);
    for (int i = 0; i < ni; i++)
        free(in[i]);
    for (int i = 0; i < no; i++)
        free(out[i]);
    free(in);
    free(out);
    cuda_session_free(s);
    artifact_contents_free(&a);
}

// The artefact of variant var damaged as bad says, read into *a; dir: where its tree goes (none
// there yet).
static int made(int var, int bad, Built *b, ArtifactContents *a, char *dir, size_t n, Err *e) {
    int rc = build(var, bad, b, e);
    CHECK_MSG(rc == ST_OK, "making the artefact: %s", e->msg);
    if (rc == ST_OK)
        CHECK_MSG((rc = artifact_read(b->path, a, e)) == ST_OK, "%s", e->msg);
    snprintf(dir, n, "%s.tree", b->path);
    sh("rm -rf '%s'", dir);
    return rc;
}

// Exports the artefact of variant var and checks the tree; builds and runs it where it can.
static void tree_case(int var) {
    Built b;
    Err e = {0};
    ArtifactContents a = {0};
    char dir[1300];
    int rc = made(var, BAD_NONE, &b, &a, dir, sizeof dir, &e);
    if (var == VAR_LIBS)
        // The MatMul's and the Conv's, where this machine's libraries load.
        CHECK_MSG(b.n_blas == (blaslt_version() != 0) && b.n_dnn == (dnn_version() != 0),
                  "%d cuBLASLt and %d cuDNN calls", b.n_blas, b.n_dnn);
    ArtifactContents view;
    if (rc == ST_OK) {
        artifact_plan_view(&a, 0, &view);
        rc = target_cuda.export_tree(&view, dir, stdout, &e);
        CHECK_MSG(rc == ST_OK, "export: %s", e.msg);
    }
    char p[1400];
    size_t n = 0;
    snprintf(p, sizeof p, "%s/kernels.cu", dir);
    char *k = rc ? NULL : slurp(p, &n);
    CHECK(k && n == a.src_size && memcmp(k, a.src, n) == 0);
    snprintf(p, sizeof p, "%s/model.cu", dir);
    char *mc = rc ? NULL : slurp(p, NULL);
    CHECK(mc);
    // One launch per generated kernel launch, with the table's geometry.
    const uint8_t *cubin;
    size_t cubin_size;
    CudaLaunchTable t = {0};
    ExportPlan x = {0};
    if (rc == ST_OK && mc) {
        CHECK(cuda_module_unpack(a.so, a.so_size, "test", &cubin, &cubin_size, &t, &e) == ST_OK);
        CHECK_MSG(export_open(&view, &x, &e) == ST_OK, "%s", e.msg);
        int launches = 0, libs = 0;
        for (int i = 0; x.P && i < x.P->n_launches; i++) {
            const PlanLaunch *L = &x.P->launches[i];
            const CudaLaunch *g =
                L->kind == PLAN_GENERATED ? cuda_launch_table_find(&t, L->symbol) : NULL;
            if (!g)
                continue;
            if (g->lib) {
                libs++;
                continue;
            }
            char head[256], want[256];
            snprintf(head, sizeof head, "// launch %d: %s,", i, L->symbol);
            snprintf(want, sizeof want, ", %u, %u, %u, %u, %u, %u, %u, m->stream, args, NULL);",
                     g->grid[0], g->grid[1], g->grid[2], g->block[0], g->block[1], g->block[2],
                     g->smem);
            const char *at = strstr(mc, head), *call = at ? strstr(at, "cuLaunchKernel(") : NULL;
            const char *geo = call ? strstr(call, want) : NULL;
            CHECK_MSG(geo && geo - call < 80, "model.cu lacks launch %d as %s...%s", i, head, want);
            launches++;
        }
        const char *q = mc;
        int found = 0;
        while ((q = strstr(q, "cuLaunchKernel(")))
            found++, q++;
        CHECK_MSG(found == launches, "%d launches in model.cu, %d in the plan", found, launches);
        CHECK(libs == b.n_lib);
        CHECK((strstr(mc, "#include <cublasLt.h>") != NULL) == (b.n_blas > 0));
        CHECK((strstr(mc, "#include <cudnn.h>") != NULL) == (b.n_dnn > 0));
        CHECK(strstr(mc, "flags + 0") != NULL); // TopK's status word
        snprintf(p, sizeof p, "%s/weights.bin", dir);
        size_t wn = 0;
        char *w = slurp(p, &wn);
        CHECK(w && wn == (size_t)x.P->const_bytes && memcmp(w, x.blob, wn) == 0);
        char fnv[64];
        snprintf(fnv, sizeof fnv, "0x%016llxull",
                 (unsigned long long)export_fnv1a64((const uint8_t *)w, wn));
        CHECK(strstr(mc, fnv) != NULL);
        free(w);
        printf("  %d launches: %d kernel launches, %d library calls\n", x.P ? x.P->n_launches : 0,
               launches, libs);
    }
    if (rc == ST_OK && !g_nvcc[0])
        printf("  skip the build: no nvcc\n");
    if (rc == ST_OK && g_nvcc[0]) {
        const char *inc = getenv("EXPORT_INCDIRS"), *lib = getenv("EXPORT_LIBDIRS");
        int mk = sh("make -s -C '%s' NVCC='%s' INCDIRS='%s' LIBDIRS='%s' > '%s/build.log' 2>&1",
                    dir, g_nvcc, inc ? inc : "", lib ? lib : "", dir);
        char lp[1400], lp2[1400];
        snprintf(lp, sizeof lp, "%s/build.log", dir);
        char *log = slurp(lp, NULL);
        // A machine whose toolkit lacks cuDNN (pip's wheel holds it): said, not a failure.
        bool no_dnn = mk != 0 && var == VAR_LIBS && log &&
                      (strstr(log, "cudnn.h: No such file") || strstr(log, "-l:libcudnn"));
        if (no_dnn)
            printf("  skip the build: cuDNN's header or library is not where nvcc looks (set "
                   "EXPORT_INCDIRS / EXPORT_LIBDIRS)\n");
        else
            CHECK_MSG(mk == 0, "make failed:\n%.3000s", log ? log : "");
        free(log);
        // The kernels the tree built are the artefact's cubin, byte for byte.
        snprintf(lp, sizeof lp, "%s/kernels.cubin", dir);
        size_t n1 = 0, n2 = 0;
        char *c1 = mk == 0 && g_have_nvrtc ? slurp(lp, &n1) : NULL;
        char *c2 = c1 ? slurp(cp_of(b.path, lp2, sizeof lp2), &n2) : NULL;
        if (c1 && c2) {
            CHECK_MSG(n1 == n2 && memcmp(c1, c2, n1) == 0,
                      "the tree's kernels.cubin (%zu bytes) is not the artefact's (%zu bytes)", n1,
                      n2);
            printf("  the tree's kernels: the artefact's cubin byte for byte (%zu bytes)\n", n1);
        } else if (mk == 0) {
            printf("  skip the cubin comparison: no NVRTC\n");
        }
        free(c1);
        free(c2);
        if (mk == 0 && gpu_or_skip())
            run_and_compare(b.path, dir);
    }
    free(k);
    free(mc);
    cuda_launch_table_free(&t);
    export_close(&x);
    artifact_contents_free(&a);
    free(b.onnx);
}

static void test_tree_kernels(void) {
    tree_case(VAR_KERNELS);
}

static void test_tree_libraries(void) {
    tree_case(VAR_LIBS);
}

// A damaged or unexportable artefact: refused with one message naming why, no folder made.
static void refused(int bad, const char *want) {
    Built b;
    Err e = {0};
    ArtifactContents a = {0};
    char dir[1300];
    int rc = made(VAR_KERNELS, bad, &b, &a, dir, sizeof dir, &e);
    if (rc == ST_OK) {
        ArtifactContents view;
        artifact_plan_view(&a, 0, &view);
        rc = target_cuda.export_tree(&view, dir, NULL, &e);
        CHECK_MSG(rc == ST_UNSUPPORTED && strstr(e.msg, want), "rc %d: %s", rc, e.msg);
        printf("  %s\n", e.msg);
        struct stat st;
        CHECK(stat(dir, &st) != 0);
    }
    artifact_contents_free(&a);
    free(b.onnx);
}

static void test_refuse_no_source(void) {
    refused(BAD_NO_SOURCE, "carries no kernel source");
}

static void test_refuse_interpreted(void) {
    refused(BAD_INTERP, "ONNX nodes 'relu') runs on orch's primitive interpreter");
}

static void test_refuse_no_entry(void) {
    refused(BAD_NO_ENTRY, "launch table has no entry for it");
}

// The folder the artefacts and trees go to (kept when a case fails).
static bool make_tmp(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/orch_export_cuda_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(g_tmp))
        return true;
    printf("FAIL cannot make a temporary folder in %s\n", tmp && *tmp ? tmp : "/tmp");
    return false;
}

static void find_nvcc(void) {
    const char *env = getenv("ORCH_NVCC");
    if (env && *env) {
        snprintf(g_nvcc, sizeof g_nvcc, "%s", env);
        return;
    }
    if (sh("command -v nvcc > /dev/null 2>&1") == 0)
        snprintf(g_nvcc, sizeof g_nvcc, "nvcc");
    else if (access("/usr/local/cuda/bin/nvcc", X_OK) == 0)
        snprintf(g_nvcc, sizeof g_nvcc, "/usr/local/cuda/bin/nvcc");
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    g_api = cuda_api_load(&g_load_err);
    Err en = {0};
    g_have_nvrtc = nvrtc_load(&en) == ST_OK;
    if (!g_have_nvrtc)
        printf("nvrtc: %s\n", en.msg);
    if (g_api && cuda_hw_detect(&g_hw, NULL, &g_load_err) != ST_OK)
        g_api = NULL;
    if (!g_api) { // a described H100 (test_cugen_models's)
        memset(&g_hw, 0, sizeof g_hw);
        snprintf(g_hw.name, sizeof g_hw.name, "NVIDIA H100 (described)");
        g_hw.cc_major = 9;
        cuda_arch_name(9, 0, g_hw.arch, sizeof g_hw.arch);
        g_hw.sm_count = 132;
        g_hw.warp_size = 32;
        g_hw.max_threads_per_block = 1024;
        g_hw.max_threads_per_sm = 2048;
        g_hw.regs_per_block = g_hw.regs_per_sm = 65536;
        g_hw.smem_per_block = 48 * 1024;
        g_hw.smem_per_block_optin = 227 * 1024;
        g_hw.smem_per_sm = 228 * 1024;
        g_hw.l2_bytes = 50 << 20;
        g_hw.clock_khz = 1980000;
        g_hw.dram_bw = 3.35e12;
    }
    if (g_have_nvrtc && !g_api)
        nvrtc_version(&g_hw.nvrtc_major, &g_hw.nvrtc_minor);
    printf("device: %s (%s)\n", g_hw.name, g_hw.arch);
    find_nvcc();
    printf("nvcc: %s\n", g_nvcc[0] ? g_nvcc : "none");
    if (!make_tmp())
        return 1;
    RUN(test_tree_kernels);
    RUN(test_tree_libraries);
    RUN(test_refuse_no_source);
    RUN(test_refuse_interpreted);
    RUN(test_refuse_no_entry);
    if (!check_n_fail)
        sh("rm -rf '%s'", g_tmp);
    else
        printf("trees kept in %s\n", g_tmp);
    return CHECK_DONE();
}
