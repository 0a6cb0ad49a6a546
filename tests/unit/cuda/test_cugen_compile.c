// The CUDA target's pointwise and reduction emitters (src/backend/cuda/cugen.h, cugen_pw_*):
// primitive graphs built with the fission builders (the C target's test graphs, on random odd
// shapes, plus larger ones that reach the float4, warp-per-row and block-per-row kernels),
// every candidate cugen_pw_supports accepts, every config it proposes, emitted into a few NVRTC
// programs of many kernels each and compiled for sm_80 and sm_90a in parallel threads. An NVRTC
// error prints the kernel it points into and the log. Without NVRTC the test prints a skip line
// and passes. Where a CUDA device exists (cuda_api_load succeeds; ORCH_REQUIRE_GPU=1: a failure
// where none does) the kernels are also compiled for it, run on random inputs and compared with
// prim_eval's values of the same tensors:
// |got-ref| <= 1e-4*|ref| + 1e-4*max|ref| for floats (NaN matches NaN), exact for integers and
// bool; outputs are poisoned before the run and a guard band after them is checked; row-cached
// reduction kernels must also equal their uncached siblings bit for bit (test_row_cache's graphs).
// Usage: unit_cugen_compile [seed]   (ORCH_TEST_SEED also sets the seed; ORCH_CUGEN_EMIT_ONLY=1
// emits without compiling except for a GPU; CUGEN_DUMP=FILE writes
// the source of a failing program there; ORCH_CUGEN_ALL=1 compiles every supported candidate with
// every config, thousands of kernels, instead of a cover of the primitives)
#include "../gpu_check.h"
#include "../pointwise_graphs.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/nvrtc.h"
#include "candidates/candidates.h"
#include "codegen/cexpr.h"
#include "interp/prim_interp.h"
#include "passes/passes.h"
#include "prim/prim_build.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// The emitters' options under float32 (the default).
static const TargetOptions g_fp32 = {.precision = PREC_FP32};

// The named fields of a pointwise or reduction config (cugen.h).
static CuPointwiseConfig pwcfg(const KernelConfig *k) {
    CuPointwiseConfig q;
    cupw_config_unpack(k, &q);
    return q;
}

static CuReduceConfig redcfg(const KernelConfig *k) {
    CuReduceConfig q;
    cured_config_unpack(k, &q);
    return q;
}
static int n_half_float; // kernels of reduced-precision graphs computing half values in float

// ---- graphs only the CUDA target's test builds ----

// Row-cache graphs: fission's clean-up merges the elementwise chains as a compile does, and
// candidates of up to 8 primitives hold a whole chain (the kernels the row cache is for).
static void g_cleanup(G *g) {
    g->max_prims = 8;
    g->cache_exact = true;
    CleanupStats st = {0};
    Err e = {0};
    if (fission_cleanup(g->pg, &st, &e)) {
        printf("  %s: clean-up: %s\n", g->name, e.msg);
        g->failures++;
    }
}

static void build_softmax_merged(const char *name, int64_t rows, int64_t cols) {
    build_softmax(name, rows, cols);
    g_cleanup(&graphs[n_graphs - 1]);
}

// BERT's epilogue: residual add, then LayerNorm over rows of `cols`.
static void build_ln_residual(const char *name, DType dt, int64_t rows, int64_t cols) {
    G *g = g_new(name);
    int64_t d[2] = {rows, cols}, dw[1] = {cols};
    int x = g_in(g, dt, 2, d), res = g_in(g, dt, 2, d);
    int w = cst(g, dt, 1, dw), b = cst(g, dt, 1, dw);
    int h = pb_ew2(&g->b, EW_ADD, x, res);
    int mu = pb_reduce(&g->b, RED_MEAN, h, 2, true, false);
    int xc = pb_ew2(&g->b, EW_SUB, h, mu);
    int var = pb_reduce(&g->b, RED_MEAN, pb_ew2(&g->b, EW_MUL, xc, xc), 2, true, false);
    int rs = pb_ew1(&g->b, EW_RSQRT, pb_ew2i(&g->b, EW_ADD, var, 1e-12));
    g_out(g, pb_ew2(&g->b, EW_ADD, pb_ew2(&g->b, EW_MUL, pb_ew2(&g->b, EW_MUL, xc, rs), w), b));
    g_cleanup(g);
}

// RMSNorm: the first reduction reads x*x, the tail x (the cache holds x, the operand).
static void build_rmsnorm(const char *name, int64_t rows, int64_t cols) {
    G *g = g_new(name);
    int64_t d[2] = {rows, cols}, dw[1] = {cols};
    int x = g_in(g, DT_FLOAT, 2, d);
    int w = cst(g, DT_FLOAT, 1, dw);
    int ms = pb_reduce(&g->b, RED_MEAN, pb_ew2(&g->b, EW_MUL, x, x), 2, true, false);
    int rs = pb_ew1(&g->b, EW_RSQRT, pb_ew2i(&g->b, EW_ADD, ms, 1e-6));
    g_out(g, pb_ew2(&g->b, EW_MUL, pb_ew2(&g->b, EW_MUL, x, rs), w));
    g_cleanup(g);
}

// Max/min-like reductions and elementwise ops on hostile inputs (G.hostile): pooling windows
// over a -inf padded input, max, min, argmax and argmin over short rows (a thread per position),
// long ones (a warp or block per row, grid splits: a NaN in one lane must reach every lane, and
// an argmax's first NaN must win the (value, index) combine) and outer axes, Max/Min/Relu.
static void build_hostile(const char *name) {
    G *g = g_new(name);
    g->hostile = true;
    int64_t d[2] = {6, 3001}, ds[3] = {odd_dim() + 2, 7, odd_dim() + 3}, dp[4] = {1, 3, 9, 37};
    int x = g_in(g, DT_FLOAT, 2, d), s = g_in(g, DT_FLOAT, 3, ds), p = g_in(g, DT_FLOAT, 4, dp);
    g_out(g, pb_reduce(&g->b, RED_MAX, x, 2, true, false));
    g_out(g, pb_reduce(&g->b, RED_MIN, pb_ew2i(&g->b, EW_MUL, x, 0.5), 2, false, false));
    g_out(g, pb_reduce(&g->b, RED_ARGMAX, x, 2, false, false));
    g_out(g, pb_reduce(&g->b, RED_ARGMIN, x, 2, true, true));
    g_out(g, pb_reduce(&g->b, RED_MAX, s, 4, false, false));
    g_out(g, pb_reduce(&g->b, RED_MIN, s, 1, true, false));
    g_out(g, pb_reduce(&g->b, RED_ARGMAX, s, 1, false, true));
    g_out(g, pb_reduce(&g->b, RED_MAX, pb_ew1(&g->b, EW_RELU, s), 7, false, false));
    g_out(g, pb_ew2(&g->b, EW_MIN, pb_ew2(&g->b, EW_MAX, x, pb_ew2i(&g->b, EW_MUL, x, -1)),
                    pb_ew1(&g->b, EW_RELU, x)));
    // 3x3 windows, stride 1, pads 1, as fission builds MaxPool.
    int64_t H = dp[2], W = dp[3], th[11], tw[39], ih[27], iw[111];
    for (int64_t i = 0; i < H + 2; i++)
        th[i] = i >= 1 && i <= H ? i - 1 : -1;
    for (int64_t i = 0; i < W + 2; i++)
        tw[i] = i >= 1 && i <= W ? i - 1 : -1;
    for (int64_t o = 0; o < H; o++)
        for (int64_t k = 0; k < 3; k++)
            ih[o * 3 + k] = o + k;
    for (int64_t o = 0; o < W; o++)
        for (int64_t k = 0; k < 3; k++)
            iw[o * 3 + k] = o + k;
    int64_t pd[4] = {1, 3, H + 2, W + 2}, hd[2] = {H, 3}, wd[2] = {W, 3};
    int padded = pb_table(&g->b, p, pd, (int64_t *[]){NULL, NULL, th, tw}, -INFINITY);
    int win = pb_gather(&g->b, pb_gather(&g->b, padded, 2, 2, hd, ih), 4, 2, wd, iw);
    int t = pb_transpose(&g->b, win, (int[]){0, 1, 2, 4, 3, 5}); // [1, 3, H, W, 3, 3]
    g_out(g, pb_reduce(&g->b, RED_MAX, t, 16 | 32, false, false));
    // One layout per window, as fission's clean-up leaves it.
    CleanupStats st = {0};
    Err e = {0};
    if (fission_cleanup(g->pg, &st, &e)) {
        printf("  %s: clean-up: %s\n", g->name, e.msg);
        g->failures++;
    }
}

// ---- larger graphs for the GPU kernel shapes ----

// float4 groups: a bias-GELU with a residual (every input unit-stride or a broadcast), and a
// slice at an offset that is a multiple of 4 and one that is not.
static void build_vec(const char *name) {
    G *g = g_new(name);
    int64_t d[2] = {64, 1024}, db[1] = {1024};
    int x = g_in(g, DT_FLOAT, 2, d), res = g_in(g, DT_FLOAT, 2, d), b = cst(g, DT_FLOAT, 1, db);
    int h = pb_ew2(&g->b, EW_ADD, x, b);
    int e = pb_ew1(&g->b, EW_ERF, pb_ew2i(&g->b, EW_MUL, h, 0.7071067811865476));
    int ge = pb_ew2(&g->b, EW_MUL, pb_ew2i(&g->b, EW_MUL, h, 0.5), pb_ew2i(&g->b, EW_ADD, e, 1.0));
    g_out(g, pb_ew2(&g->b, EW_ADD, ge, res));
    int64_t st[2] = {0, 4}, step[2] = {1, 1}, sd[2] = {64, 1016};
    g_out(g, pb_ew1(&g->b, EW_TANH, pb_slice(&g->b, res, st, step, sd)));
    int64_t st2[2] = {1, 3}, sd2[2] = {63, 1020};
    g_out(g, pb_ew1(&g->b, EW_SIGMOID, pb_slice(&g->b, x, st2, step, sd2)));
    int parts[2] = {x, res};
    g_out(g, pb_ew2i(&g->b, EW_MUL, pb_concat(&g->b, 2, parts, 1), 3.0));
    // Concat along the outer axis: each input is a constant offset of the flat index, loaded
    // under a condition (float4 groups must not read outside the input they do not select:
    // segformer's decode-head Concat faulted so), once with region sizes that are multiples of 4
    // and once with a group straddling the boundary.
    g_out(g, pb_ew1(&g->b, EW_NEG, pb_concat(&g->b, 2, parts, 0)));
    int64_t d3[2] = {3, 5}, d4[2] = {5, 5};
    int parts2[3] = {g_in(g, DT_FLOAT, 2, d3), g_in(g, DT_FLOAT, 2, d4), g_in(g, DT_FLOAT, 2, d3)};
    g_out(g, pb_ew2i(&g->b, EW_ADD, pb_concat(&g->b, 3, parts2, 0), 1.0));
}

// Long rows (block per row), rows of medium length (warp per row), a channel reduction of NCHW
// (kept axes after the reduced one: a thread per position), a column sum, InstanceNorm, a
// reduction of everything and argmax over long rows.
static void build_rows(const char *name) {
    G *g = g_new(name);
    int64_t d[2] = {8, 4099};
    int x = g_in(g, DT_FLOAT, 2, d);
    int m = pb_reduce(&g->b, RED_MAX, x, 2, true, false);
    int e = pb_ew1(&g->b, EW_EXP, pb_ew2(&g->b, EW_SUB, x, m));
    int s = pb_reduce(&g->b, RED_SUM, e, 2, true, false);
    g_out(g, pb_ew2(&g->b, EW_DIV, e, s));
    g_out(g, pb_reduce(&g->b, RED_ARGMAX, pb_ew1(&g->b, EW_FLOOR, pb_ew2i(&g->b, EW_MUL, x, 3.0)),
                       2, false, false));
    g_out(g, pb_reduce(&g->b, RED_ARGMIN, pb_ew1(&g->b, EW_ROUND, x), 2, true, true));
    int64_t dl[1] = {100003};
    int l = g_in(g, DT_FLOAT, 1, dl);
    g_out(g, pb_reduce(&g->b, RED_SUM, pb_ew1(&g->b, EW_ABS, l), 1, false, false));
}

static void build_norms(const char *name) {
    G *g = g_new(name);
    int64_t d[2] = {32, 768}, dw[1] = {768};
    int x = g_in(g, DT_FLOAT, 2, d);
    int w = cst(g, DT_FLOAT, 1, dw), b = cst(g, DT_FLOAT, 1, dw);
    int mu = pb_reduce(&g->b, RED_MEAN, x, 2, true, false);
    int xc = pb_ew2(&g->b, EW_SUB, x, mu);
    int var = pb_reduce(&g->b, RED_MEAN, pb_ew2(&g->b, EW_MUL, xc, xc), 2, true, false);
    int rs = pb_ew1(&g->b, EW_RSQRT, pb_ew2i(&g->b, EW_ADD, var, 1e-5));
    g_out(g, pb_ew2(&g->b, EW_ADD, pb_ew2(&g->b, EW_MUL, pb_ew2(&g->b, EW_MUL, xc, rs), w), b));
    // InstanceNorm over H, W of NCHW.
    int64_t di[4] = {2, 8, 33, 17};
    int xi = g_in(g, DT_FLOAT, 4, di);
    int mi = pb_reduce(&g->b, RED_MEAN, xi, 12, true, false);
    int ci = pb_ew2(&g->b, EW_SUB, xi, mi);
    int vi = pb_reduce(&g->b, RED_MEAN, pb_ew2(&g->b, EW_MUL, ci, ci), 12, true, false);
    g_out(g, pb_ew2(&g->b, EW_MUL, ci, pb_ew1(&g->b, EW_RSQRT, pb_ew2i(&g->b, EW_ADD, vi, 1e-5))));
    // Channel mean of NCHW and a column sum.
    int64_t dc[4] = {2, 64, 9, 11};
    int xc4 = g_in(g, DT_FLOAT, 4, dc);
    g_out(g, pb_ew2i(&g->b, EW_MUL, pb_reduce(&g->b, RED_MEAN, xc4, 2, true, false), 2.0));
    int64_t dk[2] = {1000, 33};
    int xk = g_in(g, DT_FLOAT, 2, dk);
    g_out(g, pb_reduce(&g->b, RED_SUM, pb_ew1(&g->b, EW_EXP, xk), 1, false, false));
    int64_t dh[2] = {16, 300};
    int xh = g_in(g, DT_FLOAT16, 2, dh);
    g_out(g, pb_reduce(&g->b, RED_MAX, pb_ew1(&g->b, EW_SIN, xh), 2, false, false));
    int xb = g_in(g, DT_INT32, 2, dh);
    g_out(g, pb_reduce(&g->b, RED_SUM, pb_ew2i(&g->b, EW_MUL, xb, 3), 2, false, false));
}

// Grid-split reductions (few positions, long rows: G blocks per position meet at a grid
// barrier): InstanceNorm read through the channels-last pass's transpose, NHWC float32 and
// float16 under a reduced precision, a long sum, argmax and max (NaN flags, indices) over two
// long rows.
static void build_grid_norms(const char *name, DType dt, int64_t h, int64_t w, int64_t ch) {
    G *g = g_new(name);
    g->max_prims = 8;
    int64_t d[4] = {1, h, w, ch};
    static const int to_nchw[4] = {0, 3, 1, 2};
    int x = pb_transpose(&g->b, g_in(g, dt, 4, d), to_nchw);
    int mi = pb_reduce(&g->b, RED_MEAN, x, 12, true, false);
    int ci = pb_ew2(&g->b, EW_SUB, x, mi);
    int vi = pb_reduce(&g->b, RED_MEAN, pb_ew2(&g->b, EW_MUL, ci, ci), 12, true, false);
    g_out(g, pb_ew2(&g->b, EW_MUL, ci, pb_ew1(&g->b, EW_RSQRT, pb_ew2i(&g->b, EW_ADD, vi, 1e-5))));
    if (dt != DT_FLOAT)
        return;
    int64_t dl[2] = {2, 50021};
    int l = g_in(g, DT_FLOAT, 2, dl);
    g_out(g, pb_reduce(&g->b, RED_ARGMAX, l, 2, false, false));
    g_out(g, pb_reduce(&g->b, RED_MAX, pb_ew1(&g->b, EW_SIN, l), 2, true, false));
    int64_t d1[1] = {300007};
    g_out(g, pb_reduce(&g->b, RED_SUM, g_in(g, DT_FLOAT, 1, d1), 1, false, false));
}

// Transposing pointwise kernels (the tiled config, tr=A: 32 x 32 tiles through shared memory):
// NCHW -> NHWC after a ReLU at odd sizes; the style transfer's reflect pad written NHWC, in
// float16; a channel concat of two NCHW tensors written NHWC (the conv after it reads NHWC).
static void build_transposes(const char *name, DType dt) {
    G *g = g_new(name);
    static const int to_nhwc[4] = {0, 2, 3, 1};
    int64_t d0[4] = {1, 37, 29, 45};
    g_out(g, pb_transpose(&g->b, pb_ew1(&g->b, EW_RELU, g_in(g, dt, 4, d0)), to_nhwc));
    int64_t d1[4] = {1, 40, 14, 14}, dp[4] = {1, 40, 16, 16};
    int64_t reflect[16];
    for (int i = 0; i < 16; i++)
        reflect[i] = i == 0 ? 1 : i == 15 ? 12 : i - 1;
    int64_t *tabs[4] = {NULL, NULL, reflect, reflect};
    int pad = pb_table(&g->b, pb_ew1(&g->b, EW_RELU, g_in(g, dt, 4, d1)), dp, tabs, 0.0);
    g_out(g, pb_transpose(&g->b, pad, to_nhwc));
    int64_t da[4] = {1, 33, 9, 11}, db[4] = {1, 17, 9, 11};
    const int cat[2] = {g_in(g, dt, 4, da), g_in(g, dt, 4, db)};
    g_out(g, pb_transpose(&g->b, pb_concat(&g->b, 2, cat, 1), to_nhwc));
}

// ---- kernels and programs ----

typedef struct Kernel {
    int graph, cand, prog;
    int line0, line1; // the kernel's lines in its program (1-based, inclusive)
    KernelConfig cfg;
    CudaLaunch launch;
    char fn[48];
    unsigned char *got; // a reduction kernel's output on the GPU (row-cache comparisons)
} Kernel;

#define MAX_PROGS 256
#define PER_PROG 60

static Kernel *ks;
static int nk, n_progs;
static StrBuf progs[MAX_PROGS];
static int prog_lines[MAX_PROGS];
static int n_refused, n_emit_fail;
static int n_pw_vec, n_pw_scalar, n_red_thread, n_red_warp, n_red_block, n_red_split;
static int n_red_grid;                                // grid-split reductions
static int n_pw_tiled;                                // transposes through shared memory
static int n_red_cached, n_cached_same, n_cached_cmp; // row-cached kernels; GPU: bit-identical

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

// The H100 SXM the lead's GPU run uses, for configs and launch geometry where no GPU is here.
static void hw_h100(CudaHw *hw) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "NVIDIA H100 80GB HBM3 (model)");
    hw->cc_major = 9;
    snprintf(hw->arch, sizeof hw->arch, "sm_90a");
    hw->sm_count = 132;
    hw->warp_size = 32;
    hw->max_threads_per_block = 1024;
    hw->max_threads_per_sm = 2048;
    hw->regs_per_block = hw->regs_per_sm = 65536;
    hw->smem_per_block = 48 * 1024;
    hw->smem_per_block_optin = 227 * 1024;
    hw->smem_per_sm = 228 * 1024;
    hw->l2_bytes = 50 << 20;
    hw->clock_khz = 1980000;
    hw->dram_bw = 3.35e12;
}

static void emit_all(const CudaHw *hw) {
    for (int gi = 0; gi < n_graphs; gi++) {
        G *g = &graphs[gi];
        Err e = {0};
        int rc = prim_graph_verify(g->pg, &e);
        CandRules rules = cand_rules_default();
        rules.max_prims = g->max_prims ? g->max_prims : 5;
        if (rc == ST_OK)
            rc = cand_enumerate(g->pg, &rules, 0, &g->cs, &e);
        if (rc) {
            printf("  %s: %s\n", g->name, e.msg);
            g->failures++;
            continue;
        }
        g->built = true;
        // The candidates compiled: all with ORCH_CUGEN_ALL set; else a greedy cover of the
        // graph's primitives by supported candidates, largest first (every operation and every
        // fusion shape the emitters see, in a few hundred kernels rather than thousands).
        bool all = getenv("ORCH_CUGEN_ALL") != NULL;
        bool *sup = xcalloc((size_t)g->cs->n + 1, sizeof(bool));
        bool *pick = xcalloc((size_t)g->cs->n + 1, sizeof(bool));
        bool *covered = xcalloc((size_t)g->pg->n_prims + 1, sizeof(bool));
        for (int ci = 0; ci < g->cs->n; ci++) {
            sup[ci] = cugen_pw_supports(g->pg, &g->cs->c[ci], &g_fp32);
            n_refused += !sup[ci];
            pick[ci] = all && sup[ci];
        }
        for (;;) {
            int best = -1, best_new = 0;
            for (int ci = 0; ci < g->cs->n && !all; ci++) {
                const Candidate *c = &g->cs->c[ci];
                int fresh = 0;
                for (int k = 0; k < c->n_prims && sup[ci] && !pick[ci]; k++)
                    fresh += !covered[c->prims[k]];
                if (fresh > best_new) {
                    best = ci;
                    best_new = fresh;
                }
            }
            if (best < 0)
                break;
            pick[best] = true;
            for (int k = 0; k < g->cs->c[best].n_prims; k++)
                covered[g->cs->c[best].prims[k]] = true;
        }
        int n_picked = 0;
        for (int ci = 0; ci < g->cs->n; ci++) {
            const Candidate *c = &g->cs->c[ci];
            if (!pick[ci])
                continue;
            n_picked++;
            KernelConfig cfg[16];
            int n = cugen_pw_configs(g->pg, c, hw, &g_fp32, cfg, 16);
            if (n < 1) {
                printf("  %s: candidate %d supported but no configs\n", g->name, ci);
                g->failures++;
            }
            for (int k = 0; k < n; k++) {
                // Pointwise: the best config and, for every third candidate, one other in turn
                // (each kind is exercised while the compile time stays small).
                if (!all && cfg[0].cls == CUCLS_POINTWISE && k > 0 &&
                    (n_picked % 3 != 0 || k != 1 + (n_picked / 3 + gi) % ORCH_MAX(n - 1, 1)))
                    continue;
                if (n_progs == 0 || prog_lines[n_progs - 1] >= PER_PROG) {
                    ORCH_ASSERT(n_progs < MAX_PROGS);
                    sb_init(&progs[n_progs]);
                    sb_puts(&progs[n_progs], cugen_prelude());
                    prog_lines[n_progs] = 0;
                    n_progs++;
                }
                if (nk % 256 == 0)
                    ks = xrealloc(ks, sizeof(Kernel) * (size_t)(nk + 256));
                Kernel *kn = &ks[nk];
                memset(kn, 0, sizeof *kn);
                kn->graph = gi;
                kn->cand = ci;
                kn->prog = n_progs - 1;
                kn->cfg = cfg[k];
                snprintf(kn->fn, sizeof kn->fn, "k_%d_%d_%d", gi, ci, k);
                StrBuf *p = &progs[kn->prog];
                kn->line0 = count_lines(p->s) + 1;
                Err ee = {0};
                const TargetOptions o = {.precision = g->prec};
                const size_t off = p->len;
                int erc = cugen_pw_emit(g->pg, c, &cfg[k], hw, &o, kn->fn, p, &kn->launch, &ee);
                n_half_float += g->prec != PREC_FP32 && !erc &&
                                (strstr(p->s + off, "orch_round_f16f((") ||
                                 strstr(p->s + off, "orch_round_bf16f(("));
                if (erc) {
                    printf("  %s: emit of candidate %d (%s) failed: %s\n", g->name, ci, cfg[k].desc,
                           ee.msg);
                    g->failures++;
                    n_emit_fail++;
                    continue;
                }
                kn->line1 = count_lines(p->s);
                prog_lines[kn->prog]++; // kernels in the program
                CuPointwiseConfig pq = pwcfg(&cfg[k]);
                CuReduceConfig rq = redcfg(&cfg[k]);
                if (cfg[k].cls == CUCLS_POINTWISE && pq.tr > 0)
                    n_pw_tiled++;
                else if (cfg[k].cls == CUCLS_POINTWISE && pq.vec == 4)
                    n_pw_vec++;
                else if (cfg[k].cls == CUCLS_POINTWISE)
                    n_pw_scalar++;
                else if (rq.split == 1)
                    n_red_split++;
                else if (rq.tpr == 1)
                    n_red_thread++;
                else if (rq.tpr == 32)
                    n_red_warp++;
                else
                    n_red_block++;
                n_red_cached += cfg[k].cls == CUCLS_REDUCE && rq.cache > 0;
                n_red_grid += cfg[k].cls == CUCLS_REDUCE && rq.grid > 1;
                g->kernels++;
                nk++;
            }
        }
        free(sup);
        free(pick);
        free(covered);
    }
}

// ---- compiling ----

#define MAX_ARCH 3

typedef struct Job {
    int prog, arch;
    int status;
    char msg[1024];
    void *cubin;
    size_t size;
} Job;

static const char *archs[MAX_ARCH];
static int n_archs, gpu_arch = -1; // gpu_arch: index of the device's arch, -1 without a GPU
static Job *jobs;
static int n_jobs, next_job;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;

static void *compile_worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&job_lock);
        int j = next_job < n_jobs ? next_job++ : -1;
        pthread_mutex_unlock(&job_lock);
        if (j < 0)
            return NULL;
        Job *jb = &jobs[j];
        char name[32];
        snprintf(name, sizeof name, "cugen_test_%d.cu", jb->prog);
        NvrtcOptions opt = {.arch = archs[jb->arch]};
        Err e = {0};
        if (getenv("ORCH_CUGEN_EMIT_ONLY") && jb->arch != gpu_arch) { // sanitizer pass
            jb->status = ST_OK;
            continue;
        }
        // make test (ORCH_CUGEN_SM90_ONLY=1): the described H100 alone; make test-nvrtc: both.
        const char *only = getenv("ORCH_CUGEN_SM90_ONLY");
        if (only && strcmp(only, "0") != 0 && gpu_arch < 0 && strcmp(archs[jb->arch], "sm_90a")) {
            jb->status = ST_OK;
            continue;
        }
        jb->status = nvrtc_compile(progs[jb->prog].s, name, &opt, &jb->cubin, &jb->size, &e);
        snprintf(jb->msg, sizeof jb->msg, "%s", e.msg);
    }
}

// The kernel of program prog that the first "(LINE)" of an NVRTC log points into.
static const Kernel *kernel_at(int prog, const char *log) {
    const char *p = strstr(log, ".cu(");
    if (!p)
        return NULL;
    int line = atoi(p + 4);
    for (int i = 0; i < nk; i++)
        if (ks[i].prog == prog && ks[i].line0 <= line && line <= ks[i].line1)
            return &ks[i];
    return NULL;
}

static void print_kernel(const Kernel *kn) {
    const char *s = progs[kn->prog].s;
    int line = 1;
    for (; *s && line < kn->line0; s++)
        line += *s == '\n';
    const char *end = s;
    for (; *end && line <= kn->line1; end++)
        line += *end == '\n';
    printf("  kernel %s (%s), lines %d-%d:\n%.*s", kn->fn, kn->cfg.desc, kn->line0, kn->line1,
           (int)(end - s), s);
}

static int compile_all(void) {
    n_jobs = n_progs * n_archs;
    jobs = xcalloc((size_t)n_jobs + 1, sizeof(Job));
    for (int a = 0; a < n_archs; a++)
        for (int p = 0; p < n_progs; p++) {
            jobs[a * n_progs + p].prog = p;
            jobs[a * n_progs + p].arch = a;
        }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)ORCH_MIN(ORCH_MAX(cpus, 2), 32);
    pthread_t th[32];
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, compile_worker, NULL);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    int failed = 0;
    for (int j = 0; j < n_jobs; j++) {
        Job *jb = &jobs[j];
        if (jb->status == ST_OK)
            continue;
        failed++;
        printf("  program %d for %s: %s\n", jb->prog, archs[jb->arch], jb->msg);
        const Kernel *kn = kernel_at(jb->prog, jb->msg);
        if (kn && failed <= 3)
            print_kernel(kn);
        for (int i = 0; i < nk; i++)
            if (ks[i].prog == jb->prog)
                graphs[ks[i].graph].failures++;
        const char *dump = getenv("CUGEN_DUMP");
        if (dump) {
            FILE *f = fopen(dump, "w");
            if (f) {
                fputs(progs[jb->prog].s, f);
                fclose(f);
            }
        }
    }
    return failed;
}

// ---- running (a CUDA device only) ----

static const CudaApi *api;
static CudaDevice dev;

typedef struct OrchArgsHost {
    CUdeviceptr in[ORCH_CUDA_MAX_IN];
    CUdeviceptr out;
} OrchArgsHost;

#define GUARD 256

// Row-cached kernels of graph gi against their uncached siblings (same block, threads per
// position and split), both run and matched with the interpreter: the cache holds the values the
// uncached kernel computes, reduced in the same order, so the outputs should agree bit for bit
// (checked on the row-cache graphs, whose cached tensors end in no multiply an FMA contraction
// could treat differently; counted elsewhere).
static void cached_vs_uncached(int gi) {
    G *g = &graphs[gi];
    for (int i = 0; i < nk; i++) {
        const Kernel *kc = &ks[i];
        CuReduceConfig rc = redcfg(&kc->cfg);
        if (kc->graph != gi || !kc->got || rc.cache == 0)
            continue;
        for (int j = 0; j < nk; j++) {
            const Kernel *ku = &ks[j];
            CuReduceConfig ru = redcfg(&ku->cfg);
            if (ku->graph != gi || ku->cand != kc->cand || !ku->got || ru.cache != 0 ||
                ru.block != rc.block || ru.tpr != rc.tpr || ru.split != rc.split ||
                ru.grid != rc.grid)
                continue;
            const Tensor *o = g->pg->tensors[g->cs->c[kc->cand].output];
            bool same = !memcmp(kc->got, ku->got, tensor_nbytes(o));
            n_cached_cmp++;
            n_cached_same += same;
            if (!same) {
                printf("  %s: kernel %s (%s) differs from %s (%s) in some bits\n", g->name, kc->fn,
                       kc->cfg.desc, ku->fn, ku->cfg.desc);
                g->failures += g->cache_exact;
            }
        }
    }
}

// Runs every kernel of the programs compiled for the device; returns false when the context
// broke (later launches cannot run).
static bool run_all(void) {
    Err e = {0};
    CUmodule *mods = xcalloc((size_t)n_progs + 1, sizeof(CUmodule));
    for (int p = 0; p < n_progs; p++) {
        const Job *jb = &jobs[gpu_arch * n_progs + p];
        if (jb->status == ST_OK && CUDA_TRY(api, &e, cuModuleLoadData, &mods[p], jb->cubin)) {
            printf("  program %d: %s\n", p, e.msg);
            mods[p] = NULL;
        }
    }
    bool alive = true;
    for (int gi = 0; gi < n_graphs && alive; gi++) {
        G *g = &graphs[gi];
        if (!g->built)
            continue;
        if (compute_values(g, &e)) {
            printf("  %s: prim_eval: %s\n", g->name, e.msg);
            g->failures++;
            continue;
        }
        // Every tensor a kernel may read, on the device once.
        CUdeviceptr *dv = xcalloc((size_t)g->pg->n_tensors + 1, sizeof(CUdeviceptr));
        for (int t = 0; t < g->pg->n_tensors && alive; t++) {
            const Tensor *T = g->pg->tensors[t];
            const void *h = T->kind == TK_CONST ? T->data : g->val[t];
            size_t bytes = tensor_nbytes(T);
            if (!h || bytes == 0)
                continue;
            if (CUDA_TRY(api, &e, cuMemAlloc, &dv[t], bytes) ||
                CUDA_TRY(api, &e, cuMemcpyHtoD, dv[t], h, bytes)) {
                printf("  %s: %s\n", g->name, e.msg);
                alive = false;
            }
        }
        for (int i = 0; i < nk && alive; i++) {
            Kernel *kn = &ks[i];
            if (kn->graph != gi)
                continue;
            const Candidate *c = &g->cs->c[kn->cand];
            CUfunction fn = NULL;
            if (!mods[kn->prog] ||
                CUDA_TRY(api, &e, cuModuleGetFunction, &fn, mods[kn->prog], kn->fn)) {
                g->failures++;
                continue;
            }
            const Tensor *o = g->pg->tensors[c->output];
            size_t bytes = tensor_nbytes(o);
            OrchArgsHost args;
            memset(&args, 0, sizeof args);
            for (int j = 0; j < c->n_inputs; j++)
                args.in[j] = dv[c->inputs[j]];
            unsigned char *got = xmalloc(bytes + GUARD);
            void *params[] = {&args};
            const CudaLaunch *L = &kn->launch;
            if (CUDA_TRY(api, &e, cuMemAlloc, &args.out, bytes + GUARD) ||
                CUDA_TRY(api, &e, cuMemsetD8, args.out, 0xa5, bytes + GUARD) ||
                CUDA_TRY(api, &e, cuLaunchKernel, fn, L->grid[0], L->grid[1], L->grid[2],
                         L->block[0], L->block[1], L->block[2], L->smem, NULL, params, NULL) ||
                CUDA_TRY(api, &e, cuCtxSynchronize) ||
                CUDA_TRY(api, &e, cuMemcpyDtoH, got, args.out, bytes + GUARD)) {
                printf("  %s: kernel %s (%s): %s\n", g->name, kn->fn, kn->cfg.desc, e.msg);
                print_kernel(kn);
                g->failures++;
                alive = false;
            } else {
                int64_t bad = -1;
                bool guard_ok = true;
                for (size_t b = bytes; b < bytes + GUARD; b++)
                    guard_ok = guard_ok && got[b] == 0xa5;
                double tol = g->prec == PREC_FP32      ? 1e-4
                             : o->dtype == DT_BFLOAT16 ? 1.6e-2
                             : o->dtype == DT_FLOAT16  ? 2e-3
                                                       : 1e-4;
                if (!close_enough(o->dtype, got, g->val[o->id], tensor_numel(o), tol, &bad)) {
                    if (g->failures < 4) {
                        char sh[64];
                        printf("  %s: kernel %s (%d prims, %s, %s) differs at %lld: got %g want "
                               "%g\n",
                               g->name, kn->fn, c->n_prims, kn->cfg.desc,
                               tensor_shape_str(o, sh, sizeof sh), (long long)bad,
                               elem_get_f64(o->dtype, got, bad),
                               elem_get_f64(o->dtype, g->val[o->id], bad));
                        if (g->failures == 0)
                            print_kernel(kn);
                    }
                    g->failures++;
                } else if (!guard_ok) {
                    printf("  %s: kernel %s wrote past its output\n", g->name, kn->fn);
                    g->failures++;
                } else {
                    g->ran++;
                    if (kn->cfg.cls == CUCLS_REDUCE) {
                        kn->got = got;
                        got = NULL;
                    }
                }
            }
            if (args.out)
                api->cuMemFree(args.out);
            free(got);
        }
        cached_vs_uncached(gi);
        for (int t = 0; t < g->pg->n_tensors; t++)
            if (dv[t])
                api->cuMemFree(dv[t]);
        free(dv);
    }
    for (int p = 0; p < n_progs; p++)
        if (mods[p])
            api->cuModuleUnload(mods[p]);
    free(mods);
    return alive;
}

static void free_all(void) {
    free_graphs();
    for (int i = 0; i < nk; i++)
        free(ks[i].got);
    for (int j = 0; j < n_jobs; j++)
        free(jobs[j].cubin);
    free(jobs);
    for (int p = 0; p < n_progs; p++)
        sb_free(&progs[p]);
    free(ks);
}

// ---- cases ----

static bool have_nvrtc, have_gpu;
static Err g_gpu_err; // why there is no GPU half
static int current;

static void graph_case(void) {
    G *g = &graphs[current];
    CHECK_MSG(g->built && g->failures == 0 && g->kernels > 0, "%s: %d kernels, %d failures",
              g->name, g->kernels, g->failures);
    if (have_gpu)
        CHECK_MSG(g->ran == g->kernels, "%s: %d of %d kernels ran and matched", g->name, g->ran,
                  g->kernels);
}

// Every kernel shape was generated: float4 and scalar pointwise, reductions with a thread, a
// warp and a block per position, and split (several threads per position, 32 positions a block);
// and the whole softmax, LayerNorm and InstanceNorm chains are single kernels.
static void test_coverage(void) {
    CHECK_MSG(n_pw_vec > 0 && n_pw_scalar > 0 && n_red_thread > 0 && n_red_warp > 0 &&
                  n_red_block > 0 && n_red_split > 0,
              "pointwise vec %d scalar %d, reduce thread %d warp %d block %d split %d", n_pw_vec,
              n_pw_scalar, n_red_thread, n_red_warp, n_red_block, n_red_split);
    CHECK_MSG(n_emit_fail == 0, "%d emits failed", n_emit_fail);
    CHECK_MSG(n_red_cached > 0, "no row-cached reduction kernel");
    CHECK_MSG(n_red_grid >= 4, "%d grid-split reductions", n_red_grid);
    CHECK_MSG(n_pw_tiled >= 3, "%d tiled transposing pointwise kernels", n_pw_tiled);
    int whole_chains = 0;
    for (int gi = 0; gi < n_graphs; gi++) {
        G *g = &graphs[gi];
        if (!g->built || (strcmp(g->name, "rows") && strcmp(g->name, "softmax_big")))
            continue;
        for (int ci = 0; ci < g->cs->n; ci++) {
            const Candidate *c = &g->cs->c[ci];
            int reds = 0;
            for (int k = 0; k < c->n_prims; k++)
                reds += g->pg->prims[c->prims[k]]->kind == PRIM_REDUCE;
            if (reds == 2 && c->n_prims == 5 && cugen_pw_supports(g->pg, c, &g_fp32))
                whole_chains++;
        }
    }
    CHECK_MSG(whole_chains >= 2, "%d whole softmax chains supported", whole_chains);
}

// The row cache (emit_reduce_cuda.c) on the row-cache graphs' candidates with a tail over the
// row: cached variants only of warp or block per position configs (or grid splits, whose G blocks
// share a row) where each thread's share of the row fits (ceil(cols / (tpr G)) <= 16 slots, 8 of
// float16 values held in double), and on the whole chains (all 12 graphs with a cache; 16385
// columns only in grid splits) of every such config; scored
// below the uncached sibling; the cached kernel reads each row input once where the uncached one
// reads it in every pass; a slot count that does not fit the row is refused.
static int count_str(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_row_cache(void) {
    CudaHw hw;
    hw_h100(&hw);
    int chains = 0, with_cache = 0;
    for (int gi = 0; gi < n_graphs; gi++) {
        G *g = &graphs[gi];
        if (!g->built || !g->cache_exact)
            continue;
        const PrimGraph *pg = g->pg;
        for (int ci = 0; ci < g->cs->n; ci++) {
            const Candidate *c = &g->cs->c[ci];
            const Tensor *A = NULL, *T = pg->tensors[c->output];
            int reds = 0;
            for (int k = 0; k < c->n_prims; k++) {
                const Prim *p = pg->prims[c->prims[k]];
                if (p->kind == PRIM_REDUCE && reds++ == 0)
                    A = pg->tensors[p->in[0]];
            }
            if (!A || !pass_same_dims(A, T) || !cugen_pw_supports(pg, c, &g_fp32))
                continue;
            // The whole chain (every primitive of the graph) reads one row tensor in every
            // pass; parts of it may read several (sq in the variance, d in the tail), where the
            // cache does not apply.
            bool whole = c->n_prims == pg->n_prims;
            chains += whole;
            int64_t cols = A->dims[A->rank - 1];
            KernelConfig cfg[16];
            int n = cugen_pw_configs(pg, c, &hw, &g_fp32, cfg, 16), cached = 0;
            for (int k = 0; k < n; k++) {
                // A grid split's G blocks share the row: each thread holds 1/G of its share.
                CuReduceConfig rk = redcfg(&cfg[k]);
                int64_t tpr = rk.tpr, gs = ORCH_MAX(rk.grid, 1);
                int64_t slots = (cols + tpr * gs - 1) / (tpr * gs);
                int sib = -1;
                for (int j = 0; j < n; j++) {
                    CuReduceConfig rj = redcfg(&cfg[j]);
                    if (j != k && rj.block == rk.block && rj.tpr == tpr && rj.split == rk.split &&
                        rj.grid == rk.grid && (rj.cache == 0) != (rk.cache == 0))
                        sib = j;
                }
                bool fits =
                    (rk.split ? gs > 1 : tpr >= 32) && slots <= (A->dtype == DT_FLOAT ? 16 : 8);
                // (Grid splits share two slots of the measured set: a sibling may be cut.)
                CHECK_MSG(whole && gs == 1 ? fits == (sib >= 0) : fits || sib < 0,
                          "%s: %s: cached sibling %d, fits %d, whole chain %d", g->name,
                          cfg[k].desc, sib >= 0, fits, whole);
                if (rk.cache == 0)
                    continue;
                cached++;
                CHECK_MSG(rk.cache == slots && fits, "%s: %s over rows of %lld", g->name,
                          cfg[k].desc, (long long)cols);
                if (sib < 0)
                    continue;
                CHECK_MSG(cfg[k].score < cfg[sib].score, "%s: %s scored %g, uncached %g", g->name,
                          cfg[k].desc, cfg[k].score, cfg[sib].score);
                // Loads of the row inputs (graph inputs of the space's shape).
                StrBuf src[2];
                CudaLaunch l;
                for (int v = 0; v < 2; v++) {
                    sb_init(&src[v]);
                    Err e = {0};
                    int rc =
                        cugen_pw_emit(pg, c, &cfg[v ? sib : k], &hw, &g_fp32, "k", &src[v], &l, &e);
                    CHECK_MSG(rc == ST_OK, "%s: %s: %s", g->name, cfg[v ? sib : k].desc, e.msg);
                }
                for (int i = 0; i < pg->n_inputs; i++) {
                    int j = cgen_input_pos(c, pg->inputs[i]);
                    if (j < 0 || !pass_same_dims(pg->tensors[pg->inputs[i]], A))
                        continue;
                    char ld[16];
                    snprintf(ld, sizeof ld, "in%d[", j);
                    int nc = count_str(src[0].s, ld), nu = count_str(src[1].s, ld);
                    CHECK_MSG(nc == 1 && nu >= 2, "%s: %s reads %s %d times, uncached %d", g->name,
                              cfg[k].desc, ld, nc, nu);
                }
                sb_free(&src[0]);
                sb_free(&src[1]);
                // One slot more than the row needs (or 17) is not a config.
                KernelConfig bad;
                rk.cache = slots + 1;
                cured_config_pack(&rk, &bad);
                StrBuf s;
                sb_init(&s);
                Err e = {0};
                CHECK(cugen_pw_emit(pg, c, &bad, &hw, &g_fp32, "k", &s, &l, &e) == ST_INVALID);
                sb_free(&s);
            }
            with_cache += whole && cached > 0;
            // Rows past every block's cache: only grid splits (each block a share) hold them.
            for (int k = 0; k < n && cols > 16 * 1024; k++)
                cached -= redcfg(&cfg[k]).cache > 0 && redcfg(&cfg[k]).grid > 1;
            if (cols > 16 * 1024)
                CHECK_MSG(cached == 0, "%s: %d cached configs over rows of %lld", g->name, cached,
                          (long long)cols);
        }
    }
    CHECK_MSG(chains == 12 && with_cache == 12, "%d whole chains, %d with a row cache", chains,
              with_cache);
}

static void test_prelude(void) {
    const char *p = cugen_prelude();
    CHECK(strstr(p, orch_cuda_prelude()) == p);
    static const char *const helpers[] = {
        "orch_expf(",       "orch_tanhf(",       "orch_erff(",        "orch_sigmoidf(",
        "orch_sigmoid(",    "orch_softplusf(",   "orch_softplus(",    "orch_fminf(",
        "orch_fmaxf(",      "orch_fmin(",        "orch_fmax(",        "orch_idiv(",
        "orch_imod(",       "orch_ifmod(",       "orch_ipow(",        "orch_shl(",
        "orch_shr(",        "orch_sat(",         "orch_sat_u64(",     "orch_f16_to_f32(",
        "orch_f32_to_f16(", "orch_bf16_to_f32(", "orch_f32_to_bf16(", "orch_round_f16(",
        "orch_round_bf16(", "struct OrchArgs"};
    for (size_t i = 0; i < ORCH_COUNT(helpers); i++)
        CHECK_MSG(strstr(p, helpers[i]) != NULL, "prelude lacks %s", helpers[i]);
}

// Reduced precisions emit the prelude's special-function-unit transcendentals
// (cugen_cexpr_dialect): a kernel of exp, sin, cos and sigmoid emitted under FP16 calls
// orch_fast_*f and under FP32 never does; on a GPU those helpers are checked against double
// references over dense sweeps and special values at the bounds prelude_cuda.c states.
static void test_fast_math(void) {
    PrimGraph *pg = prim_graph_create(graph_create("fast_math"));
    PB b = {pg, "fast_math"};
    int64_t dims[1] = {1031};
    Tensor *t = pg_add_tensor(pg, "x", DT_FLOAT, 1, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int));
    pg->inputs[pg->n_inputs++] = t->id;
    int x = t->id;
    int y = pb_ew2(&b, EW_ADD, pb_ew1(&b, EW_EXP, x), pb_ew1(&b, EW_SIN, x));
    y = pb_ew2(&b, EW_ADD, y, pb_ew1(&b, EW_COS, x));
    y = pb_ew2(&b, EW_MUL, y, pb_ew1(&b, EW_SIGMOID, x));
    pg->outputs = xrealloc(pg->outputs, sizeof(int));
    pg->outputs[pg->n_outputs++] = y;
    Err e = {0};
    CandRules rules = cand_rules_default();
    CandidateSet *cs = NULL;
    CHECK(prim_graph_verify(pg, &e) == ST_OK && cand_enumerate(pg, &rules, 0, &cs, &e) == ST_OK);
    const Candidate *whole = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if (cs->c[i].n_prims == pg->n_prims && cugen_pw_supports(pg, &cs->c[i], &g_fp32))
            whole = &cs->c[i];
    CHECK_MSG(whole != NULL, "no single kernel for the %d primitives", pg->n_prims);
    CudaHw hw;
    hw_h100(&hw);
    static const char *const fast[] = {"orch_fast_expf(", "orch_fast_sinf(", "orch_fast_cosf(",
                                       "orch_fast_sigmoidf("};
    for (int u = 0; whole && u < 2; u++) {
        const TargetOptions o = {.precision = u ? PREC_FP16 : PREC_FP32};
        KernelConfig cfg[4];
        int n = cugen_pw_configs(pg, whole, &hw, &o, cfg, 4);
        StrBuf src;
        sb_init(&src);
        CudaLaunch ln;
        CHECK(n > 0 && cugen_emit(pg, whole, &cfg[0], &hw, &o, "k", &src, &ln, &e) == ST_OK);
        for (size_t i = 0; i < ORCH_COUNT(fast); i++)
            CHECK_MSG((strstr(src.s, fast[i]) != NULL) == (u == 1), "%s: %s %s", fast[i],
                      u ? "fp16 lacks it" : "fp32 calls it", src.s);
        // float32's sin is the prelude's (test_exact_math checks it).
        CHECK_MSG((strstr(src.s, "orch_sinf(") != NULL) == (u == 0), "orch_sinf: %s %s",
                  u ? "fp16 calls it" : "fp32 lacks it", src.s);
        sb_free(&src);
    }
    cand_set_free(cs);
    const Graph *gsrc = pg->src;
    prim_graph_free(pg);
    graph_free((Graph *)gsrc);

    // The helpers themselves, on the GPU: out[4 i + f] = f-th helper of in[i].
    StrBuf k;
    sb_init(&k);
    sb_puts(&k, cugen_prelude());
    sb_puts(&k, "extern \"C\" __global__ void fast_check(const float *in, float *out, int n) {\n"
                "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (i >= n) return;\n"
                "    const float v = in[i];\n"
                "    out[4 * i] = orch_fast_expf(v);\n"
                "    out[4 * i + 1] = orch_fast_sinf(v);\n"
                "    out[4 * i + 2] = orch_fast_cosf(v);\n"
                "    out[4 * i + 3] = orch_fast_sigmoidf(v);\n"
                "}\n");
    for (int a = 0; a < n_archs; a++) {
        if (getenv("ORCH_CUGEN_EMIT_ONLY") && a != gpu_arch) // the sanitizer pass
            continue;
        void *cubin = NULL;
        size_t size = 0;
        NvrtcOptions opt = {.arch = archs[a]};
        int rc = nvrtc_compile(k.s, "fast_check.cu", &opt, &cubin, &size, &e);
        CHECK_MSG(rc == ST_OK, "%s: %s", archs[a], e.msg);
        if (rc != ST_OK || a != gpu_arch || !have_gpu) {
            free(cubin);
            continue;
        }
        // Dense sweeps over [-1, 1], [-100, 100] and [-1e4, 1e4], random values, and the
        // special ones.
        enum { N = 3 * 100000 + 100000 + 9 };
        float *in = xmalloc(sizeof(float) * N), *got = xmalloc(sizeof(float) * 4 * N);
        int n = 0;
        static const double spans[3] = {1, 100, 1e4};
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < 100000; i++)
                in[n++] = (float)(-spans[r] + 2 * spans[r] * i / 99999.0);
        for (int i = 0; i < 100000; i++)
            in[n++] = (float)unif(-120, 120);
        const float special[9] = {0.0f,   -0.0f,   NAN,   INFINITY, -INFINITY,
                                  1e-40f, -1e-40f, 88.7f, -104.0f};
        for (int i = 0; i < 9; i++)
            in[n++] = special[i];
        CUmodule mod = NULL;
        CUfunction fn = NULL;
        CUdeviceptr din = 0, dout = 0;
        void *params[3] = {&din, &dout, &n};
        Err ge = {0};
        bool ok = !(CUDA_TRY(api, &ge, cuModuleLoadData, &mod, cubin) ||
                    CUDA_TRY(api, &ge, cuModuleGetFunction, &fn, mod, "fast_check") ||
                    CUDA_TRY(api, &ge, cuMemAlloc, &din, sizeof(float) * N) ||
                    CUDA_TRY(api, &ge, cuMemAlloc, &dout, sizeof(float) * 4 * N) ||
                    CUDA_TRY(api, &ge, cuMemcpyHtoD, din, in, sizeof(float) * N) ||
                    CUDA_TRY(api, &ge, cuMemsetD8, dout, 0xa5, sizeof(float) * 4 * N) ||
                    CUDA_TRY(api, &ge, cuLaunchKernel, fn, (unsigned)((n + 255) / 256), 1, 1, 256,
                             1, 1, 0, NULL, params, NULL) ||
                    CUDA_TRY(api, &ge, cuCtxSynchronize) ||
                    CUDA_TRY(api, &ge, cuMemcpyDtoH, got, dout, sizeof(float) * 4 * N));
        CHECK_MSG(ok, "fast_check: %s", ge.msg);
        double worst[4] = {0};
        int bad = 0;
        for (int i = 0; ok && i < n; i++) {
            const double v = in[i];
            // exp: (2 + 1.2 |x|) ulp (ex2.approx of the rounded x log2 e), flushed under
            // 2^-126 (2^-125: a result at the edge may flush); sin/cos: 2e-6 absolute for
            // |x| <= 1e4; sigmoid: exp's error of -|x| plus 2 ulp (rcp.approx), flushed.
            // (exp as a float: past FLT_MAX it is infinite)
            double ref[4] = {(double)(float)exp(v), sin(v), cos(v),
                             v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v))};
            double bound[4] = {(2 + 1.2 * fabs(v)) * ldexp(fabs(ref[0]), -23) + 0x1p-125, 2e-6,
                               2e-6, (5 + 1.2 * fabs(v)) * ldexp(fabs(ref[3]), -23) + 0x1p-125};
            for (int f = 0; f < 4; f++) {
                const double g = got[4 * i + f];
                bool good;
                if (isnan(v) || (isinf(v) && (f == 1 || f == 2)))
                    good = isnan(g);
                else if (isinf(ref[f]) || isinf(v)) // (the bound of an infinite x is NaN)
                    good = g == ref[f];
                else {
                    const double d = fabs(g - ref[f]);
                    // (within the bound of FLT_MAX, the rounding may overflow)
                    good = d <= bound[f] ||
                           (isinf(g) && g * ref[f] > 0 && fabs(ref[f]) + bound[f] > FLT_MAX);
                    if (bound[f] > 0 && d / bound[f] > worst[f])
                        worst[f] = d / bound[f];
                }
                if (!good && bad++ < 8)
                    printf("    fast %s(%.9g) = %.9g, reference %.9g\n",
                           (const char *[]){"exp", "sin", "cos", "sigmoid"}[f], v, g, ref[f]);
            }
        }
        CHECK_MSG(bad == 0, "%d fast-math values out of bounds", bad);
        if (ok)
            printf("  fast math on the GPU (%d values): largest error / bound: exp %.2f sin %.2f "
                   "cos %.2f sigmoid %.2f\n",
                   n, worst[0], worst[1], worst[2], worst[3]);
        if (din)
            api->cuMemFree(din);
        if (dout)
            api->cuMemFree(dout);
        if (mod)
            api->cuModuleUnload(mod);
        free(in);
        free(got);
        free(cubin);
    }
    sb_free(&k);
}

// Runs kernel `name` of `src` (float *in, float *out, int n; nf outputs per input) on the GPU
// over in[0..n); false (and a failed check) when a CUDA call fails.
static bool run_unary_kernel(const void *cubin, const char *name, const float *in, int n, int nf,
                             float *got) {
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    CUdeviceptr din = 0, dout = 0;
    void *params[3] = {&din, &dout, &n};
    size_t out_bytes = sizeof(float) * (size_t)nf * (size_t)n;
    Err ge = {0};
    bool ok = !(CUDA_TRY(api, &ge, cuModuleLoadData, &mod, cubin) ||
                CUDA_TRY(api, &ge, cuModuleGetFunction, &fn, mod, name) ||
                CUDA_TRY(api, &ge, cuMemAlloc, &din, sizeof(float) * (size_t)n) ||
                CUDA_TRY(api, &ge, cuMemAlloc, &dout, out_bytes) ||
                CUDA_TRY(api, &ge, cuMemcpyHtoD, din, in, sizeof(float) * (size_t)n) ||
                CUDA_TRY(api, &ge, cuMemsetD8, dout, 0xa5, out_bytes) ||
                CUDA_TRY(api, &ge, cuLaunchKernel, fn, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1,
                         0, NULL, params, NULL) ||
                CUDA_TRY(api, &ge, cuCtxSynchronize) ||
                CUDA_TRY(api, &ge, cuMemcpyDtoH, got, dout, out_bytes));
    CHECK_MSG(ok, "%s: %s", name, ge.msg);
    if (din)
        api->cuMemFree(din);
    if (dout)
        api->cuMemFree(dout);
    if (mod)
        api->cuModuleUnload(mod);
    return ok;
}

// One ulp of float at |v| (the subnormals' spacing below 2^-126).
static double float_ulp(double v) {
    v = fabs(v);
    if (v < 0x1p-126)
        return 0x1p-149;
    int ex;
    frexp(v, &ex);
    return ldexp(1.0, ex - 24);
}

// The prelude's float32 transcendentals that replace CUDA's (orch_sinf / orch_cosf: a polynomial
// after a three-part reduction by pi; orch_sigmoidf: its reciprocal by rcp.approx and a Newton
// step), on the GPU against double references: sin and cos within 2 ulp (the reduction's range,
// 65536, on both sides of its edge; sinf / cosf past it), sigmoid within 4.5 ulp (expf's 2, the
// reciprocal's 1, the product's half) plus the smallest subnormal; -0 keeps its sign, NaN and
// infinities as libm.
static void test_exact_math(void) {
    StrBuf k;
    sb_init(&k);
    sb_puts(&k, cugen_prelude());
    sb_puts(&k, "extern \"C\" __global__ void exact_check(const float *in, float *out, int n) {\n"
                "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (i >= n) return;\n"
                "    out[3 * i] = orch_sinf(in[i]);\n"
                "    out[3 * i + 1] = orch_sigmoidf(in[i]);\n"
                "    out[3 * i + 2] = orch_cosf(in[i]);\n"
                "}\n");
    for (int a = 0; a < n_archs; a++) {
        if (getenv("ORCH_CUGEN_EMIT_ONLY") && a != gpu_arch) // the sanitizer pass
            continue;
        void *cubin = NULL;
        size_t size = 0;
        NvrtcOptions opt = {.arch = archs[a]};
        Err e = {0};
        int rc = nvrtc_compile(k.s, "exact_check.cu", &opt, &cubin, &size, &e);
        CHECK_MSG(rc == ST_OK, "%s: %s", archs[a], e.msg);
        if (rc != ST_OK || a != gpu_arch || !have_gpu) {
            free(cubin);
            continue;
        }
        // Dense sweeps over [-1, 1], [-100, 100], [-70000, 70000] (across the reduction's edge),
        // random magnitudes from 1e-30 to 1e30 of both signs, random bit patterns, specials.
        enum { SWEEP = 400000, N = 3 * SWEEP + 2 * SWEEP + 16 };
        float *in = xmalloc(sizeof(float) * N), *got = xmalloc(sizeof(float) * 3 * N);
        int n = 0;
        static const double spans[3] = {1, 100, 70000};
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < SWEEP; i++)
                in[n++] = (float)(-spans[r] + 2 * spans[r] * i / (SWEEP - 1.0));
        for (int i = 0; i < SWEEP; i++)
            in[n++] = (float)((rnd() & 1 ? 1 : -1) * pow(10.0, unif(-30, 30)));
        for (int i = 0; i < SWEEP; i++) {
            uint32_t bits = (uint32_t)rnd();
            memcpy(&in[n++], &bits, 4);
        }
        const float special[16] = {
            0.0f,     -0.0f,     NAN,       INFINITY,    -INFINITY,   1e-40f, -1e-40f, 0x1p-12f,
            65536.0f, -65536.0f, 65536.01f, 3.14159274f, 1.57079637f, 88.7f,  -104.0f, -87.0f};
        for (int i = 0; i < 16; i++)
            in[n++] = special[i];
        if (run_unary_kernel(cubin, "exact_check", in, n, 3, got)) {
            double worst[3] = {0};
            int bad = 0;
            for (int i = 0; i < n; i++) {
                const double v = in[i];
                const double ref[3] = {sin(v), v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v)),
                                       cos(v)};
                for (int f = 0; f < 3; f++) {
                    const double g = got[3 * i + f];
                    bool good;
                    double err = 0;
                    if (isnan(ref[f]) || isnan(g))
                        good = isnan(ref[f]) && isnan(g);
                    else if (ref[f] == 0) // sin(+-0): the same zero
                        good = g == 0 && signbit(g) == signbit(ref[f]);
                    else {
                        err = fabs(g - ref[f]) /
                              (f != 1 ? 2 * float_ulp(ref[f]) : 4.5 * float_ulp(ref[f]) + 0x1p-149);
                        good = err <= 1;
                    }
                    worst[f] = fmax(worst[f], err);
                    if (!good && bad++ < 8)
                        printf("    orch_%s(%.9g) = %.9g, reference %.9g\n",
                               f == 2 ? "cosf"
                               : f    ? "sigmoidf"
                                      : "sinf",
                               v, g, ref[f]);
                }
            }
            CHECK_MSG(bad == 0, "%d float32 math values out of bounds", bad);
            printf("  float32 math on the GPU (%d values): largest error / bound: sin %.2f "
                   "sigmoid %.2f cos %.2f\n",
                   n, worst[0], worst[1], worst[2]);
        }
        free(in);
        free(got);
        free(cubin);
    }
    sb_free(&k);
}

// The prelude's half <-> float conversions (the hardware's cvt) against the host's
// (src/ir/dtype.c): every half to float bit for bit, and float to half on every half's value,
// the midpoints between neighbours (ties go to even), one float ulp either side of them,
// random floats, overflow, subnormals and the specials. A NaN must stay a NaN.
static void test_half_conversions(void) {
    StrBuf k;
    sb_init(&k);
    sb_puts(&k, cugen_prelude());
    sb_puts(&k, "extern \"C\" __global__ void half_check(const float *in, float *widened,\n"
                "                                        unsigned short *narrowed, int n) {\n"
                "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (i < 65536) widened[i] = orch_f16_to_f32((uint16_t)i);\n"
                "    if (i < n) narrowed[i] = orch_f32_to_f16(in[i]);\n"
                "}\n");
    enum { N = 65536 * 4 + 100000 + 8 };
    float *in = xmalloc(sizeof(float) * N), *wide = xmalloc(sizeof(float) * 65536);
    uint16_t *narrow = xmalloc(sizeof(uint16_t) * N);
    int n = 0;
    for (int h = 0; h < 65536; h++) {
        float v = f16_to_f32((uint16_t)h), next = f16_to_f32((uint16_t)(h + 1));
        in[n++] = v;
        if ((h & 0x7c00) == 0x7c00 || ((h + 1) & 0x7c00) == 0x7c00 || h == 0x7fff)
            continue;
        float mid = (float)(((double)v + (double)next) / 2); // exact: halves have 11 bits
        in[n++] = mid;
        in[n++] = nextafterf(mid, INFINITY);
        in[n++] = nextafterf(mid, -INFINITY);
    }
    for (int i = 0; i < 100000; i++)
        in[n++] = (float)unif(-70000, 70000) * (i % 3 == 0 ? 1e-6f : 1.0f);
    const float special[8] = {65519.0f, 65520.0f, -65520.0f, 1e-8f, -3e-8f, 1e30f, NAN, -NAN};
    for (int i = 0; i < 8; i++)
        in[n++] = special[i];
    Err e = {0};
    for (int a = 0; a < n_archs; a++) {
        if (getenv("ORCH_CUGEN_EMIT_ONLY") && a != gpu_arch) // the sanitizer pass
            continue;
        void *cubin = NULL;
        size_t size = 0;
        NvrtcOptions opt = {.arch = archs[a]};
        int rc = nvrtc_compile(k.s, "half_check.cu", &opt, &cubin, &size, &e);
        CHECK_MSG(rc == ST_OK, "%s: %s", archs[a], e.msg);
        if (rc != ST_OK || a != gpu_arch || !have_gpu) {
            free(cubin);
            continue;
        }
        CUmodule mod = NULL;
        CUfunction fn = NULL;
        CUdeviceptr din = 0, dwide = 0, dnarrow = 0;
        void *params[4] = {&din, &dwide, &dnarrow, &n};
        Err ge = {0};
        bool ok = !(CUDA_TRY(api, &ge, cuModuleLoadData, &mod, cubin) ||
                    CUDA_TRY(api, &ge, cuModuleGetFunction, &fn, mod, "half_check") ||
                    CUDA_TRY(api, &ge, cuMemAlloc, &din, sizeof(float) * N) ||
                    CUDA_TRY(api, &ge, cuMemAlloc, &dwide, sizeof(float) * 65536) ||
                    CUDA_TRY(api, &ge, cuMemAlloc, &dnarrow, sizeof(uint16_t) * N) ||
                    CUDA_TRY(api, &ge, cuMemcpyHtoD, din, in, sizeof(float) * N) ||
                    CUDA_TRY(api, &ge, cuLaunchKernel, fn, (unsigned)((n + 255) / 256), 1, 1, 256,
                             1, 1, 0, NULL, params, NULL) ||
                    CUDA_TRY(api, &ge, cuCtxSynchronize) ||
                    CUDA_TRY(api, &ge, cuMemcpyDtoH, wide, dwide, sizeof(float) * 65536) ||
                    CUDA_TRY(api, &ge, cuMemcpyDtoH, narrow, dnarrow, sizeof(uint16_t) * N));
        CHECK_MSG(ok, "half_check: %s", ge.msg);
        int bad = 0;
        for (int h = 0; ok && h < 65536; h++) {
            float ref = f16_to_f32((uint16_t)h);
            bool good = isnan(ref) ? isnan(wide[h]) : memcmp(&ref, &wide[h], 4) == 0;
            if (!good && bad++ < 8)
                printf("    half 0x%04x -> %.9g, host %.9g\n", h, wide[h], ref);
        }
        for (int i = 0; ok && i < n; i++) {
            uint16_t ref = f32_to_f16(in[i]);
            bool good = isnan(in[i]) ? (narrow[i] & 0x7fff) > 0x7c00 : narrow[i] == ref;
            if (!good && bad++ < 8)
                printf("    %.9g -> half 0x%04x, host 0x%04x\n", in[i], narrow[i], ref);
        }
        CHECK_MSG(bad == 0, "%d half conversions differ from the host's", bad);
        if (ok)
            printf("  half conversions on the GPU: 65536 halves widened, %d floats narrowed\n", n);
        if (din)
            api->cuMemFree(din);
        if (dwide)
            api->cuMemFree(dwide);
        if (dnarrow)
            api->cuMemFree(dnarrow);
        if (mod)
            api->cuModuleUnload(mod);
        free(cubin);
    }
    free(in);
    free(wide);
    free(narrow);
    sb_free(&k);
}

// Without a GPU its half is skipped: a line saying why, or a failure under ORCH_REQUIRE_GPU.
static void gpu_half(void) {
    gpu_check_skip("GPU half (%s)", g_gpu_err.msg[0] ? g_gpu_err.msg : "no CUDA device");
}

int main(int argc, char **argv) {
    const char *env = getenv("ORCH_TEST_SEED");
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10)
                    : env    ? strtoull(env, NULL, 10)
                             : (uint64_t)time(NULL);
    rng_state = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    RUN(test_prelude);
    Err e = {0};
    have_nvrtc = nvrtc_load(&e) == ST_OK;
    if (!have_nvrtc) {
        printf("  skip: NVRTC cannot be loaded (%s): no CUDA kernels compiled\n", e.msg);
        return CHECK_DONE();
    }
    int vmaj, vmin;
    nvrtc_version(&vmaj, &vmin);
    printf("  NVRTC %d.%d (%s)\n", vmaj, vmin, nvrtc_path());
    CudaHw hw;
    hw_h100(&hw);
    api = cuda_api_load(&g_gpu_err);
    if (api && cuda_hw_detect(&hw, NULL, &g_gpu_err) == ST_OK &&
        cuda_device_open(api, 0, &dev, &g_gpu_err) == ST_OK)
        have_gpu = true;
    else
        hw_h100(&hw);
    if (have_gpu)
        printf("  GPU: %s (%s, %d SMs)\n", hw.name, hw.arch, hw.sm_count);
    else
        RUN(gpu_half);
    archs[n_archs++] = "sm_80";
    archs[n_archs++] = "sm_90a";
    if (have_gpu) {
        gpu_arch = -1;
        for (int a = 0; a < n_archs; a++)
            if (!strcmp(archs[a], hw.arch))
                gpu_arch = a;
        if (gpu_arch < 0) {
            gpu_arch = n_archs;
            archs[n_archs++] = hw.arch;
        }
    }
    build_unary(DT_FLOAT, "unary_f32", false);
    build_unary(DT_DOUBLE, "unary_f64", true);
    build_unary(DT_FLOAT16, "unary_f16", true);
    build_binary_float(DT_FLOAT, "binary_f32");
    build_binary_float(DT_BFLOAT16, "binary_bf16");
    // Half storage's kernels (a reduced-precision compile): half values computed in float.
    build_unary(DT_FLOAT16, "unary_f16_fast", false);
    graphs[n_graphs - 1].prec = PREC_FP16;
    build_binary_float(DT_BFLOAT16, "binary_bf16_fast");
    graphs[n_graphs - 1].prec = PREC_BF16;
    build_int(DT_INT32, "int32");
    build_int(DT_INT8, "int8");
    build_int(DT_INT64, "int64");
    build_int(DT_UINT32, "uint32");
    build_int(DT_UINT64, "uint64");
    build_casts("casts");
    build_layout("layout");
    build_layout_int("layout_int");
    build_big("big");
    build_softmax("softmax", odd_dim(), odd_dim() + 40);
    build_softmax("softmax_big", 64, 1031);
    build_layernorm("layernorm");
    build_reductions("reductions");
    build_reduce_offrow("reduce_offrow");
    build_vec("vec");
    build_rows("rows");
    build_norms("norms");
    build_grid_norms("grid_norms", DT_FLOAT, 24, 20, 96);
    build_grid_norms("grid_norms_f16", DT_FLOAT16, 28, 28, 64);
    graphs[n_graphs - 1].prec = PREC_FP16;
    build_transposes("transposes", DT_FLOAT);
    build_transposes("transposes_f16", DT_FLOAT16);
    graphs[n_graphs - 1].prec = PREC_FP16;
    // Row cache: BERT's 128 x 768, other widths, odd ones, a row shorter than a warp (one slot),
    // rows of exactly 128 x 16 slots, one past a 128-thread cache (256 threads hold it) and one
    // past every cache (16385 > 1024 x 16: the uncached kernels only).
    build_ln_residual("ln_res_768", DT_FLOAT, 128, 768);
    build_ln_residual("ln_res_1024", DT_FLOAT, 8, 1024);
    build_ln_residual("ln_res_769", DT_FLOAT, 8, 769);
    build_ln_residual("ln_res_1000", DT_FLOAT, 8, 1000);
    build_ln_residual("ln_res_20", DT_FLOAT, 16, 20);
    build_ln_residual("ln_res_2048", DT_FLOAT, 4, 2048);
    build_ln_residual("ln_res_2049", DT_FLOAT, 4, 2049);
    build_ln_residual("ln_res_16385", DT_FLOAT, 2, 16385);
    build_ln_residual("ln_res_f16_768", DT_FLOAT16, 8, 768); // values in double: 8 slots
    build_rmsnorm("rms_768", 8, 768);
    build_softmax_merged("softmax_rows", 32, 768);
    build_softmax_merged("softmax_rows_odd", 8, 333);
    build_hostile("hostile");
    struct timespec t0, t1, t2, t3;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    emit_all(&hw);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %d kernels in %d programs (%d candidates refused): pointwise %d scalar + %d float4, "
           "%d tiled, reduce %d thread + %d warp + %d block per position + %d split (%d "
           "row-cached, %d grid-split); emitted in %.1f s\n",
           nk, n_progs, n_refused, n_pw_scalar, n_pw_vec, n_pw_tiled, n_red_thread, n_red_warp,
           n_red_block, n_red_split, n_red_cached, n_red_grid,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    CHECK_MSG(n_half_float > 0, "no kernel of the fp16/bf16 graphs computes half values in float");
    const char *dump_dir = getenv("CUGEN_DUMP_DIR"); // every program's source, to read
    for (int p = 0; dump_dir && p < n_progs; p++) {
        char path[512];
        snprintf(path, sizeof path, "%s/prog%03d.cu", dump_dir, p);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(progs[p].s, f);
            fclose(f);
        }
    }
    int failed = compile_all();
    clock_gettime(CLOCK_MONOTONIC, &t2);
    printf("  %d compiles (%d programs x %d archs), %d failed, in %.1f s\n", n_jobs, n_progs,
           n_archs, failed, (double)(t2.tv_sec - t1.tv_sec) + (t2.tv_nsec - t1.tv_nsec) * 1e-9);
    if (have_gpu) {
        run_all();
        clock_gettime(CLOCK_MONOTONIC, &t3);
        printf("  ran on the GPU in %.1f s; %d of %d row-cached kernels bit-identical to their "
               "uncached siblings\n",
               (double)(t3.tv_sec - t2.tv_sec) + (t3.tv_nsec - t2.tv_nsec) * 1e-9, n_cached_same,
               n_cached_cmp);
    }
    RUN(test_coverage);
    RUN(test_row_cache);
    RUN(test_fast_math);
    RUN(test_exact_math);
    RUN(test_half_conversions);
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
    free_all();
    if (have_gpu)
        cuda_device_close(&dev);
    return CHECK_DONE();
}
