// Speed of the C target's linear kernels (emit_linear.c, emit_matmul.c, emit_conv.c) on this
// machine: for each case the largest candidate the emitter supports is generated in the top k
// configs its hardware model proposes, built, checked against the primitive interpreter
// (|got - ref| <= 1e-4 |ref| + 1e-4 max|ref|) and timed (best of 5 runs after a warm-up), and its
// GFLOP/s printed next to the model's estimate; then the interpreter's own implementation
// (src/ops: gemm_f32, im2col / col2im) where the candidate is the LINEAR alone. Cases: a 512^3
// matmul (and gemm_f32 on it), a 1x1024 x 1024x4096 GEMV, 3x3 64->64 conv on 56x56, ResNet-18's
// layer4 3x3 conv (512 channels, 7x7), a 1x1 conv with and without a bias + relu epilogue, a
// depthwise 3x3 conv and a 3x3 stride-2 transposed conv; GPT-2's three projections at 64 tokens;
// ResNet-18's 3x3 convs of layer2 and layer3. -cold: caches flushed before each timed run. See README.md here.
// Usage: cpu_gemm_speed [-k N] [-r RUNS] [CASE...]    (-k: configs measured per case, default 1
// or 2; -r: timed runs per kernel, the best kept, default 5;
// CASE: run only the cases whose name contains it). Exit status 1 when a kernel computed a wrong
// result. Threads: OpenMP's (OMP_NUM_THREADS).
#include "../../tests/unit/graph_builder.h" // the unit tests' graph inputs and outputs
#include "backend/cpu/cbuild.h"
#include "backend/cpu/cgen.h"
#include "backend/cpu/cgen_linear.h"
#include "candidates/candidates.h"
#include "interp/prim_interp.h"
#include "ops/gemm.h"
#include "prim/prim_build.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static HwInfo g_hw;
static int g_k;       // configs per case (-k); 0: the case's default
static char **g_only; // case name filters
static int g_n_only;
static int g_wrong; // kernels that computed a wrong result
static int g_reps = 5; // timed runs per kernel, the best kept (-r)

// -cputime: the calling thread's CPU time instead of the wall clock, for comparing kernels at
// OMP_NUM_THREADS=1 on a machine other processes share (time-slicing then does not count).
static int g_cputime;

static double now(void) {
    struct timespec ts;
    clock_gettime(g_cputime ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static float *rand_buf(int64_t n) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static int add_const(PB *b, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = rand_buf(n);
    int t = pb_const(b, DT_FLOAT, rank, dims, v);
    free(v);
    return t;
}

// Every tensor of the graph computed by the interpreter (graph inputs random).
static void **eval_all(const PrimGraph *pg) {
    void **buf = xcalloc((size_t)pg->n_tensors, sizeof(void *));
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        if (T->data) {
            size_t nb = tensor_nbytes(T);
            buf[t] = aligned_alloc(64, (nb + 63) / 64 * 64);
            memcpy(buf[t], T->data, nb);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++)
        buf[pg->inputs[i]] = rand_buf(tensor_numel(pg->tensors[pg->inputs[i]]));
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        if (p->dead)
            continue;
        const void *x[8];
        for (int j = 0; j < p->n_in; j++)
            x[j] = buf[p->in[j]];
        const Tensor *o = pg->tensors[p->out[0]];
        size_t nb = tensor_nbytes(o);
        buf[p->out[0]] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
        Err e = {0};
        int rc = prim_eval(pg, p, x, buf[p->out[0]], &e);
        ORCH_ASSERT(rc == ST_OK);
    }
    return buf;
}

// Whether got matches ref within the tolerance.
static bool matches(const float *got, const float *ref, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), tol = 1e-4 * fabs(ref[i]) + 1e-4 * mx;
        if (!(d <= tol))
            return false;
    }
    return true;
}

// The kernel's inputs: buf's values, those it reads reordered (target.h's NAME_prepack) passed
// through its fn_prepack as the runtime session does, into reordered[] (freed by the caller).
static void kernel_inputs(CModule *mod, const char *fn, const PrimGraph *pg, const Candidate *c,
                          void **buf, const void **in, void **reordered) {
    char pname[64];
    ckernel_prepack_name(fn, pname, sizeof pname);
    CPrepackFn pf = (CPrepackFn)cmodule_sym(mod, pname);
    for (int j = 0; j < c->n_inputs; j++) {
        in[j] = buf[c->inputs[j]];
        reordered[j] = NULL;
        if (pf && pf(j, NULL, NULL)) {
            size_t nb = (size_t)ckernel_prepack_bytes(
                pf, j, (int64_t)tensor_nbytes(pg->tensors[c->inputs[j]]));
            reordered[j] = aligned_alloc(64, (nb + 63) / 64 * 64);
            ORCH_ASSERT(pf(j, in[j], reordered[j]) == 1);
            in[j] = reordered[j];
        }
    }
}

// -cold: before each timed run, this many bytes are written so that the kernel's operands come
// from memory as in a model whose layers' weights do not stay cached (64 MiB: beyond L2 of any
// core here, and it evicts most of a shared L3's share).
static int g_cold;
static char *g_flush;
enum { FLUSH_BYTES = 64 << 20 };

static void flush_caches(void) {
    if (!g_flush)
        g_flush = malloc(FLUSH_BYTES);
    for (size_t i = 0; i < FLUSH_BYTES; i += 64)
        g_flush[i] = (char)(g_flush[i] + 1);
}

static double best_time(CKernelFn f, const void *const *in, void *out, int reps) {
    f(in, out);
    double best = 1e30;
    if (g_cold)
        reps *= 2;
    for (int r = 0; r < reps; r++) {
        if (g_cold)
            flush_caches();
        double t0 = now();
        f(in, out);
        best = fmin(best, now() - t0);
    }
    return best;
}

static bool wanted(const char *name) {
    if (!g_n_only)
        return true;
    for (int i = 0; i < g_n_only; i++)
        if (strstr(name, g_only[i]))
            return true;
    return false;
}

// Generates, builds, checks and times the top configs of pg's largest supported linear
// candidate (flops: the work of one run). Frees pg.
static void speed_graph(const char *name, PrimGraph *pg, double flops, int k_default) {
    int k = g_k > 0 ? g_k : k_default;
    if (!wanted(name)) {
        prim_graph_free(pg);
        return;
    }
    Err e = {0};
    CandidateSet *cs = NULL;
    if (prim_graph_verify(pg, &e) != ST_OK || cand_enumerate(pg, NULL, 0, &cs, &e) != ST_OK) {
        printf("  %s: %s\n", name, e.msg);
        g_wrong++;
        prim_graph_free(pg);
        return;
    }
    void **buf = eval_all(pg);
    // The largest supported candidate: the LINEAR with its whole epilogue when there is one.
    const Candidate *c = NULL;
    for (int i = 0; i < cs->n; i++)
        if ((!c || cs->c[i].n_prims > c->n_prims) && cgen_lin_supports(pg, &cs->c[i]))
            c = &cs->c[i];
    KernelConfig cf[64];
    int n = c ? cgen_lin_configs(pg, c, &g_hw, cf, k < 64 ? k : 64) : 0;
    StrBuf src;
    sb_init(&src);
    sb_puts(&src, cgen_prelude());
    sb_puts(&src, cgen_lin_prelude());
    for (int i = 0; i < n && e.code == ST_OK; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "s_%d", i);
        cgen_lin_emit(pg, c, &cf[i], fn, &src, &e);
    }
    CModule *mod = NULL;
    if (!c)
        printf("  %s: no linear candidate\n", name);
    else if (e.code != ST_OK || cbuild_module(src.s, NULL, name, &mod, &e) != ST_OK)
        printf("  %s: %.300s\n", name, e.msg);
    if (!mod)
        g_wrong++;
    int64_t on = c ? tensor_numel(pg->tensors[c->output]) : 0;
    float *out = aligned_alloc(64, (size_t)(on * 4 + 63) / 64 * 64 + 64);
    for (int i = 0; mod && i < n; i++) {
        char fn[32];
        snprintf(fn, sizeof fn, "s_%d", i);
        CKernelFn f = (CKernelFn)cmodule_sym(mod, fn);
        const void *in[16];
        void *reordered[16];
        kernel_inputs(mod, fn, pg, c, buf, in, reordered);
        double t = best_time(f, in, out, g_reps);
        for (int j = 0; j < c->n_inputs; j++)
            free(reordered[j]);
        bool ok = matches(out, buf[c->output], on);
        g_wrong += !ok;
        printf("  %s %-72s %7.1f GFLOP/s (model %.3g ms, %d threads)%s\n", name, cf[i].desc,
               flops / t * 1e-9, cf[i].score * 1e3, omp_get_max_threads(), ok ? "" : " WRONG");
    }
    // The interpreter's implementation (src/ops: gemm_f32, im2col / col2im) for comparison,
    // where the reference needs no epilogue.
    if (mod && c->n_prims == 1) {
        const Prim *p = pg->prims[c->prims[0]];
        const void *x[2] = {buf[p->in[0]], buf[p->in[1]]};
        double best = 1e30;
        for (int r = 0; r < 4; r++) {
            double t0 = now();
            ORCH_ASSERT(prim_eval(pg, p, x, out, &e) == ST_OK);
            if (r)
                best = fmin(best, now() - t0);
        }
        printf("  %s prim_eval (src/ops reference) %7.1f GFLOP/s\n", name, flops / best * 1e-9);
    }
    free(out);
    cmodule_free(mod);
    sb_free(&src);
    for (int t = 0; t < pg->n_tensors; t++)
        free(buf[t]);
    free(buf);
    cand_set_free(cs);
    prim_graph_free(pg);
}

static void mm512(void) {
    const int64_t S = 512;
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t ad[] = {S, S};
    int a = gb_input(pg, "a", 2, ad);
    PB b = {pg, "mm"};
    int w = add_const(&b, 2, ad);
    gb_output(pg, pb_matmul(&b, a, w));
    speed_graph("mm512", pg, 2.0 * S * S * S, 2);
    if (!wanted("mm512"))
        return;
    float *A = rand_buf(S * S), *B = rand_buf(S * S), *C = rand_buf(S * S);
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = now();
        gemm_f32(false, false, S, S, S, 1.0f, A, S, B, S, 0.0f, C, S);
        if (r)
            best = fmin(best, now() - t0);
    }
    printf("  mm512 gemm_f32 (src/ops/gemm.c) %7.1f GFLOP/s\n", 2.0 * S * S * S / best * 1e-9);
    free(A);
    free(B);
    free(C);
}

// A batch-1 transformer's projections: GPT-2 small at 64 tokens (c_attn, c_fc, c_proj).
static void gpt2(void) {
    static const int64_t shapes[3][3] = {{64, 768, 2304}, {64, 768, 3072}, {64, 3072, 768}};
    static const char *names[3] = {"gpt2_attn_64x768x2304", "gpt2_fc_64x768x3072",
                                   "gpt2_proj_64x3072x768"};
    for (int i = 0; i < 3; i++) {
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t ad[] = {shapes[i][0], shapes[i][1]}, wd[] = {shapes[i][1], shapes[i][2]};
        int a = gb_input(pg, "a", 2, ad);
        PB b = {pg, "gpt2"};
        int w = add_const(&b, 2, wd);
        gb_output(pg, pb_matmul(&b, a, w));
        speed_graph(names[i], pg, 2.0 * shapes[i][0] * shapes[i][1] * shapes[i][2], 2);
    }
}

static void gemv(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t vd[] = {1, 1024}, wd[] = {1024, 4096};
    int a = gb_input(pg, "a", 2, vd);
    PB b = {pg, "gemv"};
    int w = add_const(&b, 2, wd);
    gb_output(pg, pb_matmul(&b, a, w));
    speed_graph("gemv1x4096x1024", pg, 2.0 * 4096 * 1024, 1);
}

static void convs(void) {
    LinearParams lp = {.op = LIN_CONV,
                       .n_spatial = 2,
                       .group = 1,
                       .stride = {1, 1},
                       .dilation = {1, 1},
                       .pad_begin = {1, 1},
                       .pad_end = {1, 1}};
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {1, 64, 56, 56}, wd[] = {64, 64, 3, 3};
    int x = gb_input(pg, "x", 4, xd);
    PB b = {pg, "conv"};
    int cw = add_const(&b, 4, wd);
    gb_output(pg, pb_conv(&b, &lp, x, cw, xd));
    speed_graph("conv3x3_64_56", pg, 2.0 * 64 * 64 * 9 * 56 * 56, 2);
    // ResNet-18's layer4: 512 channels, 7x7 pixels (49: a narrow last tile).
    pg = prim_graph_create(NULL);
    const int64_t x4[] = {1, 512, 7, 7}, w4[] = {512, 512, 3, 3};
    x = gb_input(pg, "x", 4, x4);
    b = (PB){pg, "conv"};
    cw = add_const(&b, 4, w4);
    gb_output(pg, pb_conv(&b, &lp, x, cw, x4));
    speed_graph("conv3x3_512_7", pg, 2.0 * 512 * 512 * 9 * 49, 2);
    // ResNet-18's stem: 7x7 stride 2, 3 -> 64 channels, 224x224 -> 112x112.
    pg = prim_graph_create(NULL);
    const int64_t xs[] = {1, 3, 224, 224}, ws[] = {64, 3, 7, 7}, os[] = {1, 64, 112, 112};
    x = gb_input(pg, "x", 4, xs);
    b = (PB){pg, "conv"};
    cw = add_const(&b, 4, ws);
    LinearParams sp = {.op = LIN_CONV,
                       .n_spatial = 2,
                       .group = 1,
                       .stride = {2, 2},
                       .dilation = {1, 1},
                       .pad_begin = {3, 3},
                       .pad_end = {3, 3}};
    gb_output(pg, pb_conv(&b, &sp, x, cw, os));
    speed_graph("conv7x7_s2_3_224", pg, 2.0 * 64 * 3 * 49 * 112 * 112, 2);
    // ResNet-18's layer3: 256 channels, 14x14 pixels (196).
    pg = prim_graph_create(NULL);
    const int64_t x3[] = {1, 256, 14, 14}, w3[] = {256, 256, 3, 3};
    x = gb_input(pg, "x", 4, x3);
    b = (PB){pg, "conv"};
    cw = add_const(&b, 4, w3);
    gb_output(pg, pb_conv(&b, &lp, x, cw, x3));
    speed_graph("conv3x3_256_14", pg, 2.0 * 256 * 256 * 9 * 196, 2);
    // ResNet-18's layer2: 128 channels, 28x28 pixels (784).
    pg = prim_graph_create(NULL);
    const int64_t x2[] = {1, 128, 28, 28}, w2[] = {128, 128, 3, 3};
    x = gb_input(pg, "x", 4, x2);
    b = (PB){pg, "conv"};
    cw = add_const(&b, 4, w2);
    gb_output(pg, pb_conv(&b, &lp, x, cw, x2));
    speed_graph("conv3x3_128_28", pg, 2.0 * 128 * 128 * 9 * 784, 2);
    // A 1x1 conv with a fused bias + relu epilogue (the epilogue is a large share when K is
    // small), and the same conv alone.
    for (int fused = 1; fused >= 0; fused--) {
        pg = prim_graph_create(NULL);
        const int64_t pd[] = {1, 64, 56, 56}, pwd[] = {64, 64, 1, 1}, pbd[] = {1, 64, 1, 1};
        x = gb_input(pg, "x", 4, pd);
        b = (PB){pg, "conv1x1"};
        cw = add_const(&b, 4, pwd);
        LinearParams lp1 = {
            .op = LIN_CONV, .n_spatial = 2, .group = 1, .stride = {1, 1}, .dilation = {1, 1}};
        int y = pb_conv(&b, &lp1, x, cw, pd);
        if (fused)
            y = pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, y, add_const(&b, 4, pbd)));
        gb_output(pg, y);
        speed_graph(fused ? "conv1x1_64_56_bias_relu" : "conv1x1_64_56", pg,
                    2.0 * 64 * 64 * 56 * 56, 1);
    }
    // A MobileNet depthwise layer: 3x3, 32 channels, 112x112.
    pg = prim_graph_create(NULL);
    const int64_t dd[] = {1, 32, 112, 112}, dwd[] = {32, 1, 3, 3};
    x = gb_input(pg, "x", 4, dd);
    b = (PB){pg, "dw"};
    cw = add_const(&b, 4, dwd);
    LinearParams dp = lp;
    dp.group = 32;
    gb_output(pg, pb_conv(&b, &dp, x, cw, dd));
    speed_graph("dw3x3_32_112", pg, 2.0 * 32 * 9 * 112 * 112, 1);
    // A style-transfer upsampling layer: ConvTranspose 3x3 stride 2, 64 -> 32 channels, 32x32.
    pg = prim_graph_create(NULL);
    const int64_t td[] = {1, 64, 32, 32}, twd[] = {64, 32, 3, 3}, tod[] = {1, 32, 64, 64};
    x = gb_input(pg, "x", 4, td);
    b = (PB){pg, "convT"};
    cw = add_const(&b, 4, twd);
    LinearParams tp = {.op = LIN_CONV_TRANSPOSE,
                       .n_spatial = 2,
                       .group = 1,
                       .stride = {2, 2},
                       .dilation = {1, 1},
                       .pad_begin = {1, 1},
                       .pad_end = {0, 0},
                       .out_pad = {1, 1}};
    gb_output(pg, pb_conv(&b, &tp, x, cw, tod));
    speed_graph("convT3x3_s2_64_32", pg, 2.0 * 64 * 32 * 9 * 32 * 32, 1);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-k") && i + 1 < argc) {
            g_k = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            g_reps = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 5;
        } else if (!strcmp(argv[i], "-cold")) {
            g_cold = 1;
        } else if (!strcmp(argv[i], "-cputime")) {
            g_cputime = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [-k CONFIGS] [-r RUNS] [-cold] [-cputime] [CASE...]\n", argv[0]);
            return 2;
        } else {
            g_only = argv + i;
            g_n_only = argc - i;
            break;
        }
    }
    srand(1);
    TargetMachine m;
    Err e = {0};
    if (target_open(&target_cpu, NULL, &m, &e) != ST_OK) {
        fprintf(stderr, "cpu target: %s\n", e.msg);
        return 1;
    }
    g_hw = m.hw;
    printf("hw: %s\n", g_hw.fingerprint);
    mm512();
    gemv();
    gpt2();
    convs();
    target_close(&m);
    if (g_wrong)
        printf("%d kernels wrong or not built\n", g_wrong);
    return g_wrong ? 1 : 0;
}
