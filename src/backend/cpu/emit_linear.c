// Linear kernels of the C target (see cgen_linear.h): the epilogues, the Roller/BLIS hardware
// model that proposes configs, and the entry points (kernel bodies: emit_matmul.c, emit_conv.c).
// The candidate is codegen's batch of GEMMs (linear_spec.h), its operands' values come from
// codegen/linear_values.h; a transposed conv may also go (col2im variant) as a plain GEMM of W^T
// and X into a column buffer scattered back into the output.
// Names in comments: M, N, K the GEMM sizes; mr x nr the register tile; kc, mc, nc the cache
// blocks of K, M, N (BLIS); G groups; S spatial dims.
#define ORCH_CGEN_LINEAR_INTERNAL
#include "cgen_linear.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Fills L; false when the candidate is outside what this emitter generates: float32, convolutions
// of 1 to 3 spatial dims, transposed ones too.
static bool lin_analyse(const PrimGraph *pg, const Candidate *c, Lin *L) {
    static const LinRules rules = {0};
    return lin_spec_analyse(pg, c, &rules, L);
}

// ---- emission helpers ----

static int lin_reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out,
                      size_t cap, Err *e) {
    (void)code;
    (void)indent;
    const Emit *E = ctx;
    if (rq->tensor != E->L->tl || !E->acc)
        return err_set(e, ST_UNSUPPORTED, "linear kernel %s: tensor %d is not computable here",
                       E->fn, rq->tensor);
    snprintf(out, cap, "%s", E->acc);
    return ST_OK;
}

// The epilogue's per-column lines: the product and (convolutions) the output coordinates.
static void epi_col_pre(const Lin *L, StrBuf *s, int ind) {
    sb_line(s, ind, "const float acc = orow[j];\n");
    if (L->conv) {
        sb_line(s, ind, "int64_t o_r = j;\n");
        for (int d = L->S - 1; d >= 0; d--)
            sb_line(s, ind, "const int64_t e_o%d = o_r %% %lld; o_r /= %lld;\n", d,
                    (long long)L->out[d], (long long)L->out[d]);
        sb_line(s, ind, "const int64_t e_oc = q_g * %lld + i;\n", (long long)L->OCg);
    }
}

// fn_epi: applies the epilogue in place to rows i0..i0+m, columns j0..j0+n of C[b].
int lin_emit_epilogue(Emit *E, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_printf(s,
              "static void %s_epi(float *restrict o, const void *const *in, int64_t b, int64_t "
              "i0, int64_t m, int64_t j0, int64_t n) {\n",
              E->fn);
    if (!L->m0)
        lin_emit_batch_coords(E, 1, false);
    sb_line(s, 1, "for (int64_t i = i0; i < i0 + m; i++) {\n");
    sb_line(s, 2, "float *restrict orow = o + (b * %lld + i) * %lld;\n", (long long)L->M,
            (long long)L->N);
    if (L->m0) {
        // Folded batch: the output batch coordinates come from the row.
        sb_line(s, 2, "int64_t q_r = i / %lld;\n", (long long)L->m0);
        sb_line(s, 2, "const int64_t f_i = i %% %lld;\n", (long long)L->m0);
        for (int d = L->nbd - 1; d >= 0; d--)
            sb_line(s, 2, "const int64_t bq%d = q_r %% %lld; q_r /= %lld;\n", d,
                    (long long)L->bd[d], (long long)L->bd[d]);
    }
    const Tensor *O = lin_t(L, L->tl);
    char bidx[ORCH_MAX_RANK][32];
    const char *ix[ORCH_MAX_RANK];
    if (L->conv) {
        ix[0] = "q_n";
        ix[1] = "e_oc";
        for (int d = 0; d < L->S; d++) {
            snprintf(bidx[d], sizeof bidx[d], "e_o%d", d);
            ix[2 + d] = bidx[d];
        }
    } else {
        for (int d = 0; d < O->rank - 2; d++) {
            snprintf(bidx[d], sizeof bidx[d], "bq%d", d);
            ix[d] = bidx[d];
        }
        ix[O->rank - 2] = L->m0 ? "f_i" : "i";
        ix[O->rank - 1] = "j";
    }
    // A float32 sine takes the prelude's common path with its range check left to a flag
    // (cexpr_set_sin_guard), so that the column loop has no library call and vectorises: the
    // columns go in chunks of 64 into t_, a chunk where some |x| > 65536 raised the flag is
    // computed again with libm's sinf from the products still in orow, then copied there.
    // Without a sine, in place as before.
    E->acc = "acc";
    StrBuf body;
    sb_init(&body);
    char v[64];
    cexpr_set_sin_guard(E->x, "big_");
    int before = cexpr_sin_guards(E->x);
    int rc = cexpr_value(E->x, L->sink, ix, &body, 4, v, sizeof v, e);
    bool guarded = cexpr_sin_guards(E->x) > before;
    cexpr_set_sin_guard(E->x, NULL);
    cexpr_forget(E->x);
    if (!rc && !guarded) {
        // Without the pragma GCC keeps min / max / select chains (ReLU, ReLU6, NaN-propagating
        // clamps) as branches, element by element: ten times the product's own time.
        sb_line(s, 2, "#pragma omp simd\n");
        sb_line(s, 2, "for (int64_t j = j0; j < j0 + n; j++) {\n");
        epi_col_pre(L, s, 3);
        rc = cexpr_value(E->x, L->sink, ix, s, 3, v, sizeof v, e);
        cexpr_forget(E->x);
        sb_line(s, 3, "orow[j] = %s;\n", v);
        sb_line(s, 2, "}\n");
    } else if (!rc) {
        sb_line(s, 2, "for (int64_t jc = j0; jc < j0 + n; jc += 64) {\n");
        sb_line(s, 3, "const int64_t je = jc + 64 < j0 + n ? jc + 64 : j0 + n;\n");
        sb_line(s, 3, "float t_[64];\n");
        sb_line(s, 3, "int big_ = 0;\n");
        sb_line(s, 3, "for (int64_t j = jc; j < je; j++) {\n");
        epi_col_pre(L, s, 4);
        sb_puts(s, body.s);
        sb_line(s, 4, "t_[j - jc] = %s;\n", v);
        sb_line(s, 3, "}\n");
        sb_line(s, 3, "if (big_) {\n");
        sb_line(s, 4, "for (int64_t j = jc; j < je; j++) {\n");
        epi_col_pre(L, s, 5);
        rc = cexpr_value(E->x, L->sink, ix, s, 5, v, sizeof v, e);
        cexpr_forget(E->x);
        sb_line(s, 5, "t_[j - jc] = %s;\n", v);
        sb_line(s, 4, "}\n");
        sb_line(s, 3, "}\n");
        sb_line(s, 3, "for (int64_t j = jc; j < je; j++)\n");
        sb_line(s, 4, "orow[j] = t_[j - jc];\n");
        sb_line(s, 2, "}\n");
    }
    E->acc = NULL;
    sb_free(&body);
    if (rc)
        return rc;
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

// ---- the hardware model ----

// The fitted constants of the linear kernels' CPU model: the machine, the register tile's
// efficiency, the configs the GEMM offers. "Not recorded": no measurement behind the number was
// written down, and none of these is recorded as checked on three or more shapes; "not fitted":
// a default or a definition rather than a tuned number.
typedef struct CpuTileSet {
    // Tiles in mr_nr.
    int n;
    // The register tiles offered: rows x columns.
    int mr_nr[6][2];
} CpuTileSet;

typedef struct CpuGemmModel {
    // -- The machine (hw_model, par_time, overlap, mem_floor).
    // FMA instructions a core issues per cycle: 2. Not recorded.
    double fma_pipes;
    // Core clock of the peak: 3 GHz. Not recorded.
    double clock_hz;
    // The peak's factor without FMA (a multiply and an add issue separately): 0.5. Not fitted.
    double no_fma;
    // Cache bytes assumed where HwInfo has 0 (L3 on a machine without one): 32 KiB, 512 KiB,
    // 8 MiB. Not fitted.
    double l1, l2, l3;
    // Bytes/s from memory, all cores: 20e9. Not recorded.
    double bw_mem;
    // Bytes/s of operands that fit in L2 together: 100e9. Not recorded.
    double bw_l2;
    // Bytes/s of operands that fit in L3 together: 50e9. Not recorded.
    double bw_l3;
    // Share of the shorter of compute and memory time that does not overlap the longer: 0.25.
    // Not recorded.
    double overlap;
    // Seconds a parallel kernel's fork and join cost: 3e-6. Not recorded.
    double fork_s;
    // Flops from which a kernel forks (lin_worth_parallel: the model's and the emitted kernels'
    // rule): 2e6. Not recorded.
    double par_min_flops;
    // -- The register tile's efficiency (score_tile, score_padconv).
    // Accumulator vectors (mr x nr / lanes) that keep the FMA pipes busy: 8. Not recorded.
    double acc_full;
    // Factor when accumulators, B vectors and a broadcast exceed the vector registers: 0.4. Not
    // recorded.
    double spill;
    // Registers short of the file within which a tile has no slack: 2. Not recorded.
    int slack_regs;
    // Factor of a tile without that slack (the compiler tends to spill around the loop): 0.93.
    // Not recorded.
    double no_slack;
    // Factor of a 16 x 16 tile (AVX-512: sixteen broadcasts per B vector, the load ports limit):
    // 0.7. Fitted on ResNet-18's layer3/layer4 convs only (at best on par with 8 x 32 on full
    // tiles); machine not recorded.
    double tile16;
    // Share of L1 a kc x nr B panel should fit in (also where kc is chosen from): 0.5. Not
    // recorded.
    double l1_frac;
    // Factor when it does not: 0.8. Not recorded.
    double l1_over;
    // Share of L2 an mc x kc A block should fit in (also where mc is chosen from): 0.5. Not
    // recorded.
    double l2_frac;
    // Factor when it does not: 0.85. Not recorded.
    double l2_over;
    // Share of L2 a packed kc x nc B block (written, then read back panel by panel) should fit
    // in: 0.5. Not recorded.
    double packb_l2_frac;
    // Factor when it does not: 0.9. Not recorded.
    double packb_l2_over;
    // An operand read in place with rows a multiple of this many bytes apart thrashes L1 sets:
    // 4 KiB. Not fitted.
    int64_t alias_bytes;
    // Factor for A or B read so (B also when narrower than nr): 0.75. Not recorded.
    double alias;
    // Cost of a narrow last tile's column in the column kernel, relative to a full tile's
    // column: 1.3. Not recorded.
    double colk_col;
    // Seconds per element of A packed (index arithmetic, a store): 0.5e-9. Not recorded.
    double packa_s;
    // Seconds per element of a matmul's B packed: 0.5e-9. Not recorded.
    double packb_s;
    // gemv's share of peak: 0.35. Not recorded.
    double gemv_eff;
    // dot's share of peak for N = 1: 0.35. Not recorded.
    double dot_eff_n1;
    // dot's share of peak for N = 2..4: 0.1. Not recorded.
    double dot_eff;
    // Accumulator vectors the column-tile mode's kernel (packA=2 on a conv's tile) runs at
    // most: 8 columns of mr / lanes vectors, as many as fit 32 registers beside the A vectors
    // and a broadcast (emit_ukc_body_x). Not fitted: the emitter's rule.
    int col_acc_max;
    // Factor of the column-tile mode on top of the accumulator count: its B values are
    // broadcast from a packed panel row (one load per FMA row) and the sums are written to a
    // column-major block once per k-block: 0.9. Not fitted.
    double col_eff;
    // -- The configs offered (enum_cfgs).
    // AVX-512 tiles (16 lanes, 32 registers: up to 14 x 2 accumulators plus two B vectors and a
    // broadcast): 16x16, 6x32, 8x32, 12x32, 14x32, 8x16. Not recorded (16 x 16: see tile16).
    CpuTileSet tiles16;
    // AVX2 tiles (8 lanes): 6x16, 4x16. Not recorded.
    CpuTileSet tiles8;
    // Portable vectors' tiles (4 lanes): 4x16. Not recorded.
    // The column-tile mode's rows (two and three AVX-512 vectors) and B panel widths: 32, 48;
    // 32, 64. Not fitted yet (see docs/kernels/cpu_gemm.md for what was measured).
    int64_t col_mr[2], col_nr[2];
    // Column tiles are offered up to this many output pixels: 512, between ResNet-18's layer3
    // (196 pixels: on par with the padded-input conv) and layer2 (784: behind it); the shared
    // patch matrix is K x N floats. Measured on those two and layer4 (49 pixels) only.
    int64_t col_max_n;
    CpuTileSet tiles4;
    // kc from L1 is rounded down to a multiple of this, and at least it: 16. Not recorded.
    int64_t kc_step;
    // kc offered besides L1's: 256, 512. Not recorded.
    int64_t kc_fixed[2];
    // mc offered besides L2's and the cores' split (rounded up to mr): 96. Not recorded.
    int64_t mc_fixed;
    // Share of L3 per core nc is chosen from: 0.25. Not recorded.
    double l3_frac;
    // nc offered as this many nr-column panels: 16, 64. Not recorded.
    int64_t nc_panels[2];
    // gemv offered up to this M (its emitter takes at most 8): 8. Not recorded.
    int64_t gemv_max_m;
    // gemv's columns per task: 64, 256. Not recorded.
    int64_t gemv_jb[2];
    // dot offered up to this N (its emitter takes at most 4): 4. Not recorded.
    int64_t dot_max_n;
} CpuGemmModel;

static const CpuGemmModel cpu_gemm_model = {
    .fma_pipes = 2.0,
    .clock_hz = 3e9,
    .no_fma = 0.5,
    .l1 = 32768.0,
    .l2 = 524288.0,
    .l3 = 8388608.0,
    .bw_mem = 20e9,
    .bw_l2 = 100e9,
    .bw_l3 = 50e9,
    .overlap = 0.25,
    .fork_s = 3e-6,
    .par_min_flops = 2e6,
    .acc_full = 8.0,
    .spill = 0.4,
    .slack_regs = 2,
    .no_slack = 0.93,
    .tile16 = 0.7,
    .l1_frac = 0.5,
    .l1_over = 0.8,
    .l2_frac = 0.5,
    .l2_over = 0.85,
    .packb_l2_frac = 0.5,
    .packb_l2_over = 0.9,
    .alias_bytes = 4096,
    .alias = 0.75,
    .colk_col = 1.3,
    .packa_s = 0.5e-9,
    .packb_s = 0.5e-9,
    .gemv_eff = 0.35,
    .dot_eff_n1 = 0.35,
    .dot_eff = 0.1,
    .tiles16 = {6, {{16, 16}, {6, 32}, {8, 32}, {12, 32}, {14, 32}, {8, 16}}},
    .tiles8 = {2, {{6, 16}, {4, 16}}},
    .tiles4 = {1, {{4, 16}}},
    .col_mr = {32, 48},
    .col_nr = {32, 64},
    .col_max_n = 512,
    .kc_step = 16,
    .kc_fixed = {256, 512},
    .mc_fixed = 96,
    .l3_frac = 0.25,
    .nc_panels = {16, 64},
    .col_acc_max = 24,
    .col_eff = 0.9,
    .gemv_max_m = 8,
    .gemv_jb = {64, 256},
    .dot_max_n = 4,
};

// The convolution-specific constants: the patch gather, the padded-input variant, the
// depthwise and col2im paths (the register tile's efficiency is CpuGemmModel's). Same
// conventions as CpuGemmModel.
typedef struct CpuConvModel {
    // Seconds per element of the patch matrix packed (the gather): 1e-9. Not recorded.
    double packb_s;
    // The direct depthwise kernel's share of peak: 0.3. Not recorded.
    double dw_eff;
    // Seconds per column element col2im scatters back (over the cores): 1e-9. Not recorded.
    double col2im_s;
    // -- padconv (score_padconv, enum_cfgs).
    // Seconds per float copied into a task's padded rows: 0.3e-9. Not recorded.
    double fill_s;
    // Seconds per element of the panels crossing a row edge (through ct and a scatter): 1e-9.
    // Not recorded.
    double scatter_s;
    // Output rows per task for this many tasks per core: 2. Not recorded.
    double tasks_per_core;
    // ... or for the padded rows to fit this share of L2: 0.5. Not recorded.
    double rows_l2_frac;
    // kc for the B rows (nr floats at kc scattered offsets) to stay in this share of L1 across
    // the row panels of A: 0.5. Not recorded.
    double kc_l1_frac;
    // Cache lines one such B row touches when unaligned: 3. Not fitted.
    double b_row_lines;
    // Cache line bytes assumed there: 64. Not fitted.
    double line;
    // mc for an mc x kc A block in this share of L2: 0.25. Not recorded.
    double mc_l2_frac;
    // -- winograd (score_winograd, enum_cfgs).
    // Seconds per transformed input value written (B^T d B, one vector loop over a task's
    // tiles, loads interleaved by m) and per GEMM result read by the output transform (A^T M A,
    // stores interleaved by m, rows copied out): 0.3e-9 each. Fitted on ResNet-18's 64-channel
    // 56x56 3x3 conv at one thread (Xeon, AVX-512; m = 4: 0.97 ms measured, 0.6 ms from the GEMM
    // at the tile's efficiency and the copies), checked on its 128-channel 28x28 (0.79 ms
    // measured, 0.67 ms modelled).
    double wino_in_s;
    double wino_out_s;
    // Tile rows per task for a task's scratch (padded rows, transformed input, GEMM results) to
    // fit this share of L2: 0.5. Not fitted.
    double wino_l2_frac;
    // Factor on the register tile's efficiency: the B panel's rows are a task's padded tile
    // count apart, read from L2 for every mr output channels: 0.9. Not fitted.
    double wino_eff;
    // Winograd is offered only where reading its transformed weights from memory, once per row
    // block, takes at most this share of the direct conv's FLOPs at the cores' peak: 1. The lab
    // times a kernel with its weights hot; in a plan the other layers evict them. ResNet-18's
    // 512-channel 7x7 layer at m = 2 (16.8 MB of transformed weights, ratio 2.8) measured
    // 1.18 ms in the lab and 6.5 ms in the plan (one thread; the column tile it displaced: 4.4
    // ms); its 256-channel 14x14 layer (4.2 MB, ratio 0.7) kept its gain there (2.1 against 2.7
    // ms). 2-core Xeon, AVX-512, a loaded machine.
    double wino_max_u_ratio;
} CpuConvModel;

static const CpuConvModel cpu_conv_model = {
    .packb_s = 1.0e-9,
    .dw_eff = 0.3,
    .col2im_s = 1e-9,
    .fill_s = 0.3e-9,
    .scatter_s = 1e-9,
    .tasks_per_core = 2.0,
    .rows_l2_frac = 0.5,
    .kc_l1_frac = 0.5,
    .b_row_lines = 3.0,
    .line = 64.0,
    .mc_l2_frac = 0.25,
    .wino_in_s = 0.3e-9,
    .wino_out_s = 0.3e-9,
    .wino_l2_frac = 0.5,
    .wino_eff = 0.9,
    .wino_max_u_ratio = 1.0,
};

// Whether the generated kernel forks: enough work to pay for waking the threads.
bool lin_worth_parallel(const Lin *L) {
    return 2.0 * (double)L->batch * (double)L->M * (double)L->N * (double)L->K >=
           cpu_gemm_model.par_min_flops;
}

typedef struct Hw {
    int cores, lanes, vregs;
    double peak; // flop/s of one core
    double l1, l2, l3;
    double bw; // bytes/s from memory, all cores
} Hw;

static Hw hw_model(const HwInfo *hw) {
    const CpuGemmModel *G = &cpu_gemm_model;
    Hw h;
    h.cores = hw && hw->cores > 0 ? hw->cores : 1;
    int sb = hw && hw->simd_bytes >= 16 ? hw->simd_bytes : 16;
    h.lanes = sb / 4;
    h.vregs = sb == 64 ? 32 : 16;
    // Two flops an FMA, fma_pipes FMAs a cycle; without FMA a multiply and an add issue
    // separately.
    h.peak = h.lanes * 2.0 * G->fma_pipes * G->clock_hz * (hw && hw->fma ? 1.0 : G->no_fma);
    h.l1 = hw && hw->l1d > 0 ? (double)hw->l1d : G->l1;
    h.l2 = hw && hw->l2 > 0 ? (double)hw->l2 : G->l2;
    h.l3 = hw && hw->l3 > 0 ? (double)hw->l3 : G->l3;
    h.bw = G->bw_mem;
    return h;
}

static double cdiv(double a, double b) {
    return ceil(a / b);
}

// Threads actually used on `tasks` independent tasks, and the fraction of their time spent busy.
static double par_time(const Lin *L, const Hw *h, double tasks, double t1) {
    if (!lin_worth_parallel(L) || tasks <= 1)
        return t1;
    double thr = ORCH_MIN((double)h->cores, tasks);
    double waves = cdiv(tasks, thr);
    return t1 / tasks * waves + cpu_gemm_model.fork_s;
}

// Compute and memory time overlap, but not perfectly.
static double overlap(double t_comp, double t_mem) {
    return ORCH_MAX(t_comp, t_mem) + cpu_gemm_model.overlap * ORCH_MIN(t_comp, t_mem);
}

// Moving every operand and the result once, at the bandwidth of the level they fit in.
static double mem_floor(const Lin *L, const Hw *h) {
    const CpuGemmModel *G = &cpu_gemm_model;
    double bytes = 4.0 * (double)(tensor_numel(lin_t(L, L->ta)) + tensor_numel(lin_t(L, L->tb)) +
                                  tensor_numel(lin_t(L, L->tl)));
    double bw = bytes <= h->l2 ? G->bw_l2 : bytes <= h->l3 ? G->bw_l3 : h->bw;
    return bytes / bw;
}

// The tiled kernel's time on the cores: its tasks (batch x M blocks x N blocks, M blocks
// fastest) go to the threads in contiguous static chunks (OpenMP's schedule(static): the first
// tasks % threads threads one more), and the busiest thread's share of the padded work sets the
// time. Blocks at the edges are smaller (GPT-2's c_fc, N = 3072 in blocks of 2304: one thread
// got 3/4 of the work), which counting tasks alone misses.
static double par_time_tiles(const Lin *L, const Hw *h, const CLinConfig *t, double t1) {
    double mt = cdiv((double)L->M, (double)t->mc), nt = cdiv((double)L->N, (double)t->nc);
    int64_t tasks = (int64_t)((double)L->batch * mt * nt);
    if (!lin_worth_parallel(L) || tasks <= 1)
        return t1;
    int64_t thr = ORCH_MIN((int64_t)h->cores, tasks);
    int64_t q = tasks / thr, rem = tasks % thr, per = (int64_t)(mt * nt);
    double total = 0, busiest = 0;
    for (int64_t i = 0, t0 = 0; i < thr; i++) {
        int64_t cnt = q + (i < rem);
        double w = 0;
        for (int64_t k = t0; k < t0 + cnt; k++) {
            int64_t r = k % per, ib = r % (int64_t)mt, jb = r / (int64_t)mt;
            double rows = (double)ORCH_MIN(t->mc, L->M - ib * t->mc);
            double cols = (double)ORCH_MIN(t->nc, L->N - jb * t->nc);
            w += cdiv(rows, (double)t->mr) * cdiv(cols, (double)t->nr);
        }
        total += w;
        busiest = ORCH_MAX(busiest, w);
        t0 += cnt;
    }
    return total > 0 ? t1 * busiest / total + cpu_gemm_model.fork_s : t1;
}

static double score_tile(const Lin *L, const Hw *h, const CLinConfig *t) {
    const CpuGemmModel *G = &cpu_gemm_model;
    double mr = (double)t->mr, nr = (double)t->nr, kc = (double)t->kc, mc = (double)t->mc,
           nc = (double)t->nc;
    double M = (double)L->M, N = (double)L->N, K = (double)L->K, B = (double)L->batch;
    double nv = nr / h->lanes;
    double acc = mr * nv;
    bool wcol = L->conv && t->packa == CLIN_PACK_PREPACKED;
    if (wcol) {
        // The column kernel: vectors down mr rows, up to 8 columns per step.
        double vr = mr / h->lanes;
        nv = vr;
        acc = vr * ORCH_MAX(1.0, ORCH_MIN(8.0, floor((h->vregs - vr - 2) / vr)));
        acc = ORCH_MIN(acc, (double)G->col_acc_max);
    }
    double eff = ORCH_MIN(1.0, acc / G->acc_full) * acc / (acc + 1.0);
    if (wcol)
        eff *= G->col_eff;
    if (acc + nv + 1 > h->vregs)
        eff *= G->spill;
    else if (acc + nv + 1 > h->vregs - G->slack_regs)
        eff *= G->no_slack;
    if (mr >= 16 && nv == 1 && !wcol) // the 16 x 16 tile
        eff *= G->tile16;
    // The column-tile mode re-reads its A panel (mr x kc) for every 8 columns: it should stay in
    // L1 (its B panel is re-read once per mr rows, from L2).
    if (wcol ? mr * kc * 4 > h->l1 * G->l1_frac : kc * nr * 4 > h->l1 * G->l1_frac)
        eff *= G->l1_over;
    if (mc * kc * 4 > h->l2 * G->l2_frac)
        eff *= G->l2_over;
    bool packa = t->packa == CLIN_PACK_PER_CALL, packb = t->packb == CLIN_PACK_PER_CALL;
    bool prepacked = t->packb == CLIN_PACK_PREPACKED;
    // A packed B block is written, then read back panel by panel: it should stay in L2.
    if ((packb || (L->conv && !L->b_direct_ok)) && kc * nc * 4 > h->l2 * G->packb_l2_frac)
        eff *= G->packb_l2_over;
    int64_t lda = L->K, ldb = L->N;
    if (!packa && !wcol && (lda * 4) % G->alias_bytes == 0)
        eff *= G->alias;
    // B in place with rows 4 KiB apart thrashes L1 sets; prepacked panels are contiguous.
    if (!packb && !prepacked && ((ldb * 4) % G->alias_bytes == 0 || ldb < nr))
        eff *= G->alias;
    double Mp = cdiv(M, mr) * mr, Np = cdiv(N, nr) * nr;
    // The column kernel (mr a multiple of the vector) computes a narrow last tile
    // column by column, somewhat slower per column than a full tile.
    if (wcol)
        Np = N;
    else if (t->mr % 16 == 0 && (int64_t)N % t->nr)
        Np = floor(N / nr) * nr + (double)((int64_t)N % t->nr) * G->colk_col;
    double t_comp = 2.0 * B * Mp * Np * K / (h->peak * eff);
    // Packing: per element (index arithmetic, a store), more through the patch gather.
    double mt = cdiv(M, mc), nt = cdiv(N, nc);
    double pk = 0;
    if (packa)
        pk += B * M * K * nt * G->packa_s;
    // (Column tiles pack the patch matrix once per call, shared by the tasks.)
    if (packb || (wcol && !L->b_direct_ok))
        pk += B * K * N * (wcol ? 1.0 : mt) * (L->conv ? cpu_conv_model.packb_s : G->packb_s);
    double t1 = t_comp + pk;
    // B is read once per M block: where a task's K x nc slab of B does not stay in L2 for the
    // next M block, every block after the first reads it again from L3 (GPT-2's projections at
    // 64 tokens: mc = 32 read the 4.7 MB slab of c_fc twice; mc = 64 measured ahead hot, 1 and 2
    // threads, cpu_gemm_speed gpt2_fc).
    double tm = mem_floor(L, h);
    if (mt > 1 && K * nc * 4 > h->l2)
        tm += 4.0 * B * K * N * (mt - 1) / G->bw_l3;
    return overlap(par_time_tiles(L, h, t, t1), tm);
}

// The padded-input conv: the tile's FMA efficiency over the padded width (KW - 1 wasted columns
// of every Wp), no B packing, the padded rows copied once per task and A packed per task.
static double score_padconv(const Lin *L, const Hw *h, const CLinConfig *t) {
    const CpuGemmModel *G = &cpu_gemm_model;
    const CpuConvModel *C = &cpu_conv_model;
    double mr = (double)t->mr, nr = (double)t->nr, kc = (double)t->kc, mc = (double)t->mc;
    double R = (double)ORCH_MIN(t->rows, L->out[0]);
    double nv = nr / h->lanes, acc = mr * nv;
    double eff = ORCH_MIN(1.0, acc / G->acc_full) * acc / (acc + 1.0);
    if (acc + nv + 1 > h->vregs)
        eff *= G->spill;
    if (mc * kc * 4 > h->l2 * G->l2_frac)
        eff *= G->l2_over;
    double Wp = (double)(L->out[1] + (L->k[1] - 1) / L->st[1]), B = (double)L->batch;
    double Mp = cdiv((double)L->M, mr) * mr, Q = (double)L->out[0] * Wp;
    double Qp = cdiv(Q, nr) * nr;
    double nrb = cdiv((double)L->out[0], R), tasks = B * nrb;
    double t_comp = 2.0 * B * Mp * Qp * (double)L->K / (h->peak * eff);
    double xp = lin_padconv_fill(L, (int64_t)R);
    double t_fill = tasks * xp * C->fill_s;
    double t_packa =
        t->packa == CLIN_PACK_PREPACKED ? 0 : tasks * (double)L->M * (double)L->K * G->packa_s;
    // Panels crossing a row edge go through ct and a scatter.
    double t_scatter = B * Mp * (double)L->out[0] * nr * C->scatter_s;
    double t1 = t_comp + t_fill + t_packa + t_scatter;
    return overlap(par_time(L, h, tasks, t1), mem_floor(L, h));
}

// Winograd F(m x m, 3 x 3): (m + 2)^2 GEMMs of OC x C by the task's padded tile columns at the
// register tile's efficiency, the input transform (per output-channel block of a task), the
// padded rows copied, the output transform.
static double score_winograd(const Lin *L, const Hw *h, const CLinConfig *t) {
    const CpuGemmModel *G = &cpu_gemm_model;
    const CpuConvModel *C = &cpu_conv_model;
    double mr = (double)t->mr, nr = (double)t->nr;
    int m = t->wm, a = m + 2;
    double T = (double)(a * a);
    double nv = nr / h->lanes, acc = mr * nv;
    double eff = ORCH_MIN(1.0, acc / G->acc_full) * acc / (acc + 1.0) * C->wino_eff;
    if (acc + nv + 1 > h->vregs)
        eff *= G->spill;
    else if (acc + nv + 1 > h->vregs - G->slack_regs)
        eff *= G->no_slack;
    if (mr * (double)L->C * 4 > h->l1 * G->l1_frac)
        eff *= G->l1_over;
    int64_t TH = (L->out[0] + m - 1) / m, TW = (L->out[1] + m - 1) / m;
    int64_t R = ORCH_MIN(t->rows, TH);
    double Mr = cdiv((double)L->OC, mr) * mr, mc = ORCH_MIN((double)t->mc, Mr);
    double nob = cdiv(Mr, mc), nrb = cdiv((double)TH, (double)R), B = (double)L->batch;
    // GEMM columns over the row blocks (a dummy tile per tile row, whole nr panels): full
    // blocks and the last.
    int64_t last = TH - (int64_t)(nrb - 1) * R;
    double cols = (nrb - 1) * cdiv((double)(R * (TW + 1)), nr) * nr +
                  cdiv((double)(last * (TW + 1)), nr) * nr;
    double Cc = (double)L->C;
    double t_gemm = 2.0 * B * T * Mr * Cc * cols / (h->peak * eff);
    double tiles = (double)(TH * (TW + 1));
    double t_in = B * nob * T * Cc * tiles * C->wino_in_s;
    // The strips: copied rows, or X's values one by one through a fused prologue (as the patch
    // gather).
    double t_fill = B * nob * Cc * (double)(a * TH * (TW + 1) * m) *
                    (L->pa >= 0 ? C->fill_s : C->packb_s);
    double t_out = B * T * (double)L->OC * tiles * C->wino_out_s;
    if (lin_winograd_bytes(L, m, R, t->nr, t->mr) > h->l2 * C->wino_l2_frac)
        t_gemm /= G->l2_over;
    double t1 = t_gemm + t_in + t_fill + t_out;
    // Every row block reads its output channels' transformed weights once: (m + 2)^2 / 9 of W's
    // bytes, from L3 or memory (ResNet's 512-channel layers: 16.8 MB at m = 2, read at batch 1
    // for 49 pixels).
    double ub = 4.0 * T * Mr * Cc;
    double tm = mem_floor(L, h) + B * nrb * ub / (ub <= h->l3 ? G->bw_l3 : h->bw);
    return overlap(par_time(L, h, B * nrb * nob, t1), tm);
}

static double score_cfg(const Lin *L, const Hw *h, const CLinConfig *t) {
    const CpuGemmModel *G = &cpu_gemm_model;
    double flops = 2.0 * (double)L->batch * (double)L->M * (double)L->N * (double)L->K;
    switch (t->variant) {
    case CLIN_TILE: return score_tile(L, h, t);
    case CLIN_PADCONV: return score_padconv(L, h, t);
    case CLIN_WINOGRAD: return score_winograd(L, h, t);
    case CLIN_GEMV: {
        double tasks = (double)L->batch * cdiv((double)L->N, (double)t->jb);
        double t1 = flops / (h->peak * G->gemv_eff);
        return overlap(par_time(L, h, tasks, t1), mem_floor(L, h));
    }
    case CLIN_DOT: {
        double t1 = flops / (h->peak * (L->N == 1 ? G->dot_eff_n1 : G->dot_eff));
        return overlap(par_time(L, h, (double)(L->batch * L->M), t1), mem_floor(L, h));
    }
    default: {
        double t1 = flops / (h->peak * cpu_conv_model.dw_eff);
        return overlap(par_time(L, h, (double)(L->NI * L->OC), t1), mem_floor(L, h));
    }
    }
}

// KernelConfig.p[] slots of a linear config.
enum { P_VAR, P_MR, P_NR, P_KC, P_MC, P_NC, P_PACKA, P_PACKB };

void cgen_lin_config_pack(const CLinConfig *t, KernelConfig *k) {
    memset(k, 0, sizeof *k);
    k->cls = t->cls;
    int64_t *P = k->p;
    P[P_VAR] = t->variant;
    const char *cls = t->cls == CCLS_MATMUL ? "matmul" : t->cls == CCLS_CONV ? "conv" : "dwconv";
    switch (t->variant) {
    case CLIN_TILE:
    case CLIN_COL2IM:
        P[P_MR] = t->mr;
        P[P_NR] = t->nr;
        P[P_KC] = t->kc;
        P[P_MC] = t->mc;
        P[P_NC] = t->nc;
        P[P_PACKA] = t->packa;
        P[P_PACKB] = t->packb;
        snprintf(k->desc, sizeof k->desc,
                 "cls=%s v=%s mr=%d nr=%d kc=%lld mc=%lld nc=%lld packA=%d packB=%d", cls,
                 t->variant == CLIN_TILE ? "tile" : "col2im", t->mr, t->nr, (long long)t->kc,
                 (long long)t->mc, (long long)t->nc, t->packa, t->packb);
        break;
    case CLIN_GEMV:
        P[P_NR] = t->jb;
        snprintf(k->desc, sizeof k->desc, "cls=%s v=gemv jb=%lld", cls, (long long)t->jb);
        break;
    case CLIN_PADCONV:
        P[P_MR] = t->mr;
        P[P_NR] = t->nr;
        P[P_KC] = t->kc;
        P[P_MC] = t->mc;
        P[P_NC] = t->rows;
        P[P_PACKA] = t->packa;
        snprintf(k->desc, sizeof k->desc,
                 "cls=%s v=padconv mr=%d nr=%d kc=%lld mc=%lld rows=%lld packA=%d", cls, t->mr,
                 t->nr, (long long)t->kc, (long long)t->mc, (long long)t->rows, t->packa);
        break;
    case CLIN_WINOGRAD:
        P[P_MR] = t->mr;
        P[P_NR] = t->nr;
        P[P_KC] = t->wm;
        P[P_MC] = t->mc;
        P[P_NC] = t->rows;
        snprintf(k->desc, sizeof k->desc, "cls=%s v=winograd m=%d mr=%d nr=%d mc=%lld rows=%lld",
                 cls, t->wm, t->mr, t->nr, (long long)t->mc, (long long)t->rows);
        // F(4x4)'s transforms (4, 5, 8 and 1/24) give about ten times F(2x2)'s error a layer.
        if (t->wm > 2)
            k->flags |= KCFG_REDUCED_EXACTNESS;
        break;
    case CLIN_DOT: snprintf(k->desc, sizeof k->desc, "cls=%s v=dot", cls); break;
    default: snprintf(k->desc, sizeof k->desc, "cls=%s v=direct", cls); break;
    }
}

void cgen_lin_config_unpack(const KernelConfig *k, CLinConfig *t) {
    const int64_t *P = k->p;
    memset(t, 0, sizeof *t);
    t->cls = k->cls;
    t->variant = (int)P[P_VAR];
    switch (P[P_VAR]) {
    case CLIN_TILE:
    case CLIN_COL2IM:
    case CLIN_PADCONV:
        t->mr = (int)P[P_MR];
        t->nr = (int)P[P_NR];
        t->kc = P[P_KC];
        t->mc = P[P_MC];
        if (P[P_VAR] == CLIN_PADCONV)
            t->rows = P[P_NC];
        else
            t->nc = P[P_NC];
        t->packa = (int)P[P_PACKA];
        if (P[P_VAR] != CLIN_PADCONV)
            t->packb = (int)P[P_PACKB];
        break;
    case CLIN_GEMV: t->jb = P[P_NR]; break;
    case CLIN_WINOGRAD:
        t->mr = (int)P[P_MR];
        t->nr = (int)P[P_NR];
        t->wm = (int)P[P_KC];
        t->mc = P[P_MC];
        t->rows = P[P_NC];
        break;
    default: break;
    }
}

static int cfg_cmp(const void *a, const void *b) {
    const KernelConfig *x = a, *y = b;
    return x->score < y->score ? -1 : x->score > y->score ? 1 : strcmp(x->desc, y->desc);
}

static void add_val(int64_t *v, int *n, int64_t x) {
    for (int i = 0; i < *n; i++)
        if (v[i] == x)
            return;
    v[(*n)++] = x;
}

// Every legal config the model considers, unscored: register tiles for the vector width, kc
// from L1, mc from L2, nc from L3 and from splitting the work over the cores, packing choices.
static int enum_cfgs(const Lin *L, const Hw *h, KernelConfig *out, int cap) {
    const CpuGemmModel *G = &cpu_gemm_model;
    const CpuConvModel *C = &cpu_conv_model;
    int n = 0;
    int cls = !L->conv ? CCLS_MATMUL : CCLS_CONV;
    bool a_direct = L->conv ? L->pb >= 0 && !L->convt : L->pa >= 0 && !L->a_trans;
    bool b_direct = L->b_direct_ok && (L->conv ? L->pa >= 0 : L->pb >= 0);
    int pb_max = !L->conv && L->b_prepack_ok ? CLIN_PACK_PREPACKED : CLIN_PACK_PER_CALL;
    // The register tiles for the vector width. On AVX-512 a 16 x 16 tile is one vector down the
    // 16 rows of an A panel, so a tile narrower than nr goes through the column kernel (few
    // output pixels: 49 of a 7x7 image).
    const CpuTileSet *ts = h->lanes >= 16 ? &G->tiles16 : h->lanes >= 8 ? &G->tiles8 : &G->tiles4;
    const int(*shapes)[2] = ts->mr_nr;
    int ns = ts->n;
    for (int si = 0; si < ns; si++) {
        int64_t mr = shapes[si][0], nr = shapes[si][1];
        int64_t Mr = (L->M + mr - 1) / mr * mr, Nr = (L->N + nr - 1) / nr * nr;
        int64_t kcs[1 + ORCH_COUNT(cpu_gemm_model.kc_fixed)];
        int nk = 0;
        int64_t kc_l1 = ORCH_MAX(G->kc_step, (int64_t)(h->l1 * G->l1_frac / (double)(nr * 4)) /
                                                 G->kc_step * G->kc_step);
        add_val(kcs, &nk, ORCH_MIN(L->K, kc_l1));
        for (size_t i = 0; i < ORCH_COUNT(G->kc_fixed); i++)
            add_val(kcs, &nk, ORCH_MIN(L->K, G->kc_fixed[i]));
        for (int ki = 0; ki < nk; ki++) {
            int64_t kc = kcs[ki];
            int64_t mcs[3], ncs[2 + ORCH_COUNT(cpu_gemm_model.nc_panels)];
            int nm = 0, nn = 0;
            int64_t mc_l2 =
                ORCH_MAX(mr, (int64_t)(h->l2 * G->l2_frac / (double)(kc * 4)) / mr * mr);
            int64_t mc_par = ORCH_MAX(mr, (Mr / mr + h->cores - 1) / h->cores * mr);
            add_val(mcs, &nm, ORCH_MIN(Mr, mc_l2));
            // A conv whose activations outweigh its weights (N > 2M: MobileNet's 1x1 projections)
            // splits its pixels over the threads, not its output channels: split by channel,
            // every thread reads all of the activations, which in a plan the threads before it
            // have just written into their own caches. The lab, reading them from the shared
            // cache, ranked that split first (192->32 at 28x28: 48 us in the lab, 81 in the
            // plan; split by pixel 60 and 61 us).
            bool pixels_split = L->conv && L->N > 2 * L->M;
            if (!pixels_split) {
                add_val(mcs, &nm, ORCH_MIN(Mr, ORCH_MIN(mc_l2, mc_par)));
                add_val(mcs, &nm, ORCH_MIN(Mr, mr * ((G->mc_fixed + mr - 1) / mr)));
            }
            int64_t nc_par = ORCH_MAX(nr, (Nr / nr + h->cores - 1) / h->cores * nr);
            int64_t nc_l3 =
                ORCH_MAX(nr, (int64_t)(h->l3 * G->l3_frac / h->cores / (double)(kc * 4)) / nr * nr);
            add_val(ncs, &nn, ORCH_MIN(Nr, nc_l3));
            add_val(ncs, &nn, ORCH_MIN(Nr, ORCH_MIN(nc_l3, nc_par)));
            for (size_t i = 0; i < ORCH_COUNT(G->nc_panels); i++)
                add_val(ncs, &nn, ORCH_MIN(Nr, nr * G->nc_panels[i]));
            for (int mi = 0; mi < nm; mi++)
                for (int ni = 0; ni < nn; ni++)
                    for (int pa = a_direct ? 0 : 1; pa <= 1; pa++)
                        for (int pb = b_direct ? 0 : 1; pb <= pb_max; pb++) {
                            if (n >= cap)
                                return n;
                            CLinConfig t = {.cls = cls,
                                            .variant = CLIN_TILE,
                                            .mr = (int)mr,
                                            .nr = (int)nr,
                                            .kc = kc,
                                            .mc = mcs[mi],
                                            .nc = ncs[ni],
                                            .packa = pa,
                                            .packb = pb};
                            cgen_lin_config_pack(&t, &out[n++]);
                        }
        }
    }
    if (L->conv && !L->convt && L->w_prepack_ok && h->lanes >= 16 && L->N <= G->col_max_n) {
        // The column-tile mode (W reordered at load, vectors down the output channels): mr of
        // two and three vectors, B panels of 32 and 64 columns, kc for the mr x kc A panel in
        // L1 (it is re-read for every 8 columns) or 256.
        for (size_t ci = 0; ci < ORCH_COUNT(G->col_mr); ci++) {
            int64_t mr = G->col_mr[ci];
            int64_t Mr = (L->M + mr - 1) / mr * mr;
            int64_t kc_l1 = ORCH_MAX(G->kc_step, (int64_t)(h->l1 * G->l1_frac / (double)(mr * 4)) /
                                                     G->kc_step * G->kc_step);
            int64_t kcs[2] = {ORCH_MIN(L->K, kc_l1), ORCH_MIN(L->K, G->kc_fixed[0])};
            int64_t mcs[2] = {ORCH_MIN(Mr, ORCH_MAX(mr, (Mr / mr + h->cores - 1) / h->cores * mr)),
                              Mr};
            for (size_t ni = 0; ni < ORCH_COUNT(G->col_nr); ni++) {
                int64_t nr = G->col_nr[ni];
                int64_t Nr = (L->N + nr - 1) / nr * nr;
                int64_t nc_par = ORCH_MAX(nr, (Nr / nr + h->cores - 1) / h->cores * nr);
                int64_t ncs[2] = {ORCH_MIN(Nr, nc_par), ORCH_MIN(Nr, nr * G->nc_panels[0])};
                for (int ki = 0; ki < 2; ki++)
                    for (int mi = 0; mi < 2; mi++)
                        for (int nj = 0; nj < 2; nj++) {
                            if ((ki && kcs[1] == kcs[0]) || (mi && mcs[1] == mcs[0]) ||
                                (nj && ncs[1] == ncs[0]))
                                continue;
                            if (n >= cap)
                                return n;
                            CLinConfig t = {.cls = cls,
                                            .variant = CLIN_TILE,
                                            .mr = (int)mr,
                                            .nr = (int)nr,
                                            .kc = kcs[ki],
                                            .mc = mcs[mi],
                                            .nc = ncs[nj],
                                            .packa = CLIN_PACK_PREPACKED,
                                            .packb = b_direct ? 0 : 1};
                            cgen_lin_config_pack(&t, &out[n++]);
                        }
            }
        }
    }
    if (lin_padconv_ok(L)) {
        // Output rows per task: enough tasks for the cores, the padded rows within part of L2.
        int64_t OH = L->out[0], Wp = L->out[1] + (L->k[1] - 1) / L->st[1];
        int64_t per_img =
            ORCH_MAX(1, (int64_t)ceil(C->tasks_per_core * h->cores / (double)L->batch));
        int64_t r_par = ORCH_MAX(1, (OH + per_img - 1) / per_img);
        double row_bytes = 4.0 * (double)(L->st[0] * L->st[1] * L->Cg) * (double)Wp;
        int64_t r_l2 =
            ORCH_MAX(1, (int64_t)(h->l2 * C->rows_l2_frac / row_bytes) - (L->k[0] - 1) / L->st[0]);
        int64_t rs[2] = {ORCH_MIN(r_par, r_l2), ORCH_MIN(OH, r_l2)};
        for (int si = 0; si < ns; si++) {
            int64_t mr = shapes[si][0], nr = shapes[si][1];
            if (nr < 16 || mr == 16)
                continue;
            int64_t Mr = (L->M + mr - 1) / mr * mr;
            // kc: all of K, or a block whose B rows (nr floats at kc scattered offsets, three
            // lines each when unaligned) stay within L1 across the row panels of A.
            int64_t kc_l1 =
                ORCH_MAX(G->kc_step, (int64_t)(h->l1 * C->kc_l1_frac / (C->b_row_lines * C->line)) /
                                         G->kc_step * G->kc_step);
            int64_t kcs[2] = {L->K, ORCH_MIN(L->K, kc_l1)};
            for (int ki = 0; ki < 2; ki++) {
                if (ki && kcs[1] == kcs[0])
                    continue;
                int64_t mc_l2 = ORCH_MAX(
                    mr, (int64_t)(h->l2 * C->mc_l2_frac / (double)(kcs[ki] * 4)) / mr * mr);
                for (int ri = 0; ri < 2; ri++) {
                    if (ri && rs[1] == rs[0])
                        continue;
                    if (n >= cap)
                        return n;
                    CLinConfig t = {.cls = CCLS_CONV,
                                    .variant = CLIN_PADCONV,
                                    .mr = (int)mr,
                                    .nr = (int)nr,
                                    .kc = kcs[ki],
                                    .mc = ORCH_MIN(Mr, mc_l2),
                                    .rows = rs[ri],
                                    .packa =
                                        L->w_prepack_ok ? CLIN_PACK_PREPACKED : CLIN_PACK_PER_CALL};
                    cgen_lin_config_pack(&t, &out[n++]);
                }
            }
        }
    }
    if (lin_winograd_ok(L)) {
        // Winograd F(2x2) and F(4x4): the row tiles of the padded-input conv; tile rows per task
        // for enough tasks over the cores, or for the task's scratch to fit part of L2; output
        // channels all in one task, or split over the cores where the tile rows are few.
        // F(4x4)'s error, ten times F(2x2)'s a layer, can compound through a deep ResNet past
        // the compile's end-to-end check (FCN-ResNet50: 2.46e-4 against a bound of 2.38e-4), so
        // its configs carry KCFG_REDUCED_EXACTNESS and the compile leaves them out where a plan
        // holding them misses the check.
        for (int wm = 2; wm <= 4; wm += 2) {
            int64_t TH = (L->out[0] + wm - 1) / wm;
            for (int si = 0; si < ns; si++) {
                int64_t mr = shapes[si][0], nr = shapes[si][1];
                if (nr < 16 || mr == 16)
                    continue;
                int64_t Mr = (L->M + mr - 1) / mr * mr;
                int64_t per_img =
                    ORCH_MAX(1, (int64_t)ceil(C->tasks_per_core * h->cores / (double)L->batch));
                int64_t r_par = ORCH_MAX(1, (TH + per_img - 1) / per_img), r_l2 = 1;
                while (r_l2 < TH && lin_winograd_bytes(L, wm, r_l2 + 1, (int)nr, (int)mr) <=
                                        h->l2 * C->wino_l2_frac)
                    r_l2++;
                // ... or the tile rows (up to r_l2) whose GEMM columns, a dummy tile per row,
                // fill the nr-wide panels best (ResNet's 14x14 at m = 4: 3 rows of 5 tiles fill
                // 15 of 16 columns, 4 rows 20 of 32).
                int64_t TW1 = (L->out[1] + wm - 1) / wm + 1, r_fill = 1;
                double fill_best = 0;
                for (int64_t r = 1; r <= r_l2; r++) {
                    double f = (double)(r * TW1) / (double)((r * TW1 + nr - 1) / nr * nr);
                    if (f >= fill_best - 1e-9)
                        fill_best = f, r_fill = r;
                }
                int64_t rs[3] = {ORCH_MIN(r_par, r_l2), r_l2, r_fill};
                int64_t mcs[2] = {Mr, ORCH_MAX(mr, (Mr / mr + h->cores - 1) / h->cores * mr)};
                // The transformed weights from memory once per row block, against the direct
                // conv's FLOPs at the cores' peak (wino_max_u_ratio).
                double u_bytes = 4.0 * (double)((wm + 2) * (wm + 2)) * (double)(Mr * L->C);
                double t_direct = 2.0 * (double)(L->batch * L->M * L->N * L->K) /
                                  (h->peak * (double)h->cores);
                for (int ri = 0; ri < 3; ri++)
                    for (int mi = 0; mi < 2; mi++) {
                        if ((ri && rs[ri] == rs[0]) || (ri == 2 && rs[2] == rs[1]) ||
                            (mi && mcs[1] == mcs[0]))
                            continue;
                        double nrb = (double)((TH + rs[ri] - 1) / rs[ri]) * (double)L->batch;
                        if (nrb * u_bytes / h->bw > C->wino_max_u_ratio * t_direct)
                            continue;
                        if (n >= cap)
                            return n;
                        CLinConfig t = {.cls = CCLS_CONV,
                                        .variant = CLIN_WINOGRAD,
                                        .wm = wm,
                                        .mr = (int)mr,
                                        .nr = (int)nr,
                                        .mc = mcs[mi],
                                        .rows = rs[ri]};
                        cgen_lin_config_pack(&t, &out[n++]);
                    }
            }
        }
    }
    if (!L->conv && L->pb >= 0 && L->M <= G->gemv_max_m && n + (int)ORCH_COUNT(G->gemv_jb) <= cap) {
        for (size_t i = 0; i < ORCH_COUNT(G->gemv_jb); i++)
            cgen_lin_config_pack(
                &(CLinConfig){.cls = cls, .variant = CLIN_GEMV, .jb = G->gemv_jb[i]}, &out[n++]);
    }
    if (!L->conv && L->pa >= 0 && L->pb >= 0 && L->N <= G->dot_max_n && n < cap)
        cgen_lin_config_pack(&(CLinConfig){.cls = cls, .variant = CLIN_DOT}, &out[n++]);
    if (L->dw_ok && n < cap)
        cgen_lin_config_pack(&(CLinConfig){.cls = CCLS_DWCONV, .variant = CLIN_DIRECT}, &out[n++]);
    return n;
}

// Whether a and b have the same variant (winograd: and m), and with `tile`, the same register
// tile rows and packing.
static bool same_structure(const KernelConfig *a, const KernelConfig *b, bool tile) {
    CLinConfig x, y;
    cgen_lin_config_unpack(a, &x);
    cgen_lin_config_unpack(b, &y);
    return x.variant == y.variant && x.wm == y.wm &&
           (!tile || (x.mr == y.mr && x.packa == y.packa && x.packb == y.packb));
}

// Different structure (variant, register tile, packing) first, so the top k measured configs
// differ in what matters most; then the rest by score.
static int pick_diverse(KernelConfig *all, int n, KernelConfig *out, int k) {
    qsort(all, (size_t)n, sizeof *all, cfg_cmp);
    bool *taken = xcalloc((size_t)n, sizeof(bool));
    int m = 0;
    // The best of every variant first: the model ranks variants less surely than configs of
    // one variant (it put the padded-input conv 2x ahead of the tiled one where they measure
    // alike), so each gets measured.
    for (int i = 0; i < n && m < k; i++) {
        bool fresh = true;
        for (int j = 0; j < m && fresh; j++)
            fresh = !same_structure(&out[j], &all[i], false);
        if (fresh) {
            out[m++] = all[i];
            taken[i] = true;
        }
    }
    for (int i = 0; i < n && m < k; i++) {
        if (taken[i])
            continue;
        bool fresh = true;
        for (int j = 0; j < m && fresh; j++)
            fresh = !same_structure(&out[j], &all[i], true);
        if (fresh) {
            out[m++] = all[i];
            taken[i] = true;
        }
    }
    for (int i = 0; i < n && m < k; i++)
        if (!taken[i])
            out[m++] = all[i];
    free(taken);
    qsort(out, (size_t)m, sizeof *out, cfg_cmp);
    return m;
}

int cgen_lin_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k) {
    Lin L;
    if (k <= 0 || !lin_analyse(pg, c, &L))
        return 0;
    Hw h = hw_model(hw);
    enum { CAP = 1024 };
    KernelConfig *all = xmalloc(sizeof(KernelConfig) * CAP);
    int n = enum_cfgs(&L, &h, all, CAP);
    for (int i = 0; i < n; i++) {
        CLinConfig t;
        cgen_lin_config_unpack(&all[i], &t);
        all[i].score = score_cfg(&L, &h, &t);
    }
    // A strided transposed conv gathers mostly zeros; GEMM + col2im computes no zeros but
    // scatters the columns back (about a nanosecond per column element, over the cores).
    Lin G;
    if (lin_convt_col_view(&L, &G)) {
        int n0 = n, ng = enum_cfgs(&G, &h, all + n, CAP - n);
        double scatter = (double)(G.batch * G.M * G.N) * cpu_conv_model.col2im_s / h.cores;
        for (int i = n0; i < n0 + ng; i++) {
            CLinConfig t;
            cgen_lin_config_unpack(&all[i], &t);
            if (t.variant != CLIN_TILE) // the GEMM view's skinny paths do not apply
                continue;
            t.cls = CCLS_CONV;
            t.variant = CLIN_COL2IM;
            cgen_lin_config_pack(&t, &all[n]);
            all[n].score = score_tile(&G, &h, &t) + scatter;
            n++;
        }
    }
    // Equal descs cannot occur (the enumeration deduplicates), so pick_diverse sees distinct ones.
    int m = pick_diverse(all, n, out, k);
    free(all);
    return m;
}

// ---- entry points ----

static int emit_kernel(const Lin *L, const KernelConfig *cfg, const char *fn, StrBuf *src, Err *e) {
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Emit E = {.L = L, .cfg = cfg, .fn = fn, .s = &body};
    E.x = cexpr_create(L->pg, L->c, fn, &decls);
    cexpr_set_reader(E.x, lin_reader, &E);
    CLinConfig t;
    cgen_lin_config_unpack(cfg, &t);
    int rc;
    switch (t.variant) {
    case CLIN_TILE: rc = lin_emit_tiled(&E, e); break;
    case CLIN_GEMV: rc = lin_emit_gemv(&E, e); break;
    case CLIN_DOT: rc = lin_emit_dot(&E, e); break;
    case CLIN_DIRECT: rc = lin_emit_dw(&E, e); break;
    case CLIN_COL2IM: rc = lin_emit_col2im(&E, e); break;
    case CLIN_PADCONV: rc = lin_emit_padconv(&E, e); break;
    case CLIN_WINOGRAD: rc = lin_emit_winograd(&E, e); break;
    default: rc = err_set(e, ST_INVALID, "linear kernel %s: unknown config '%s'", fn, cfg->desc);
    }
    cexpr_free(E.x);
    if (!rc) {
        sb_puts(src, decls.s);
        sb_puts(src, body.s);
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

bool cgen_lin_supports(const PrimGraph *pg, const Candidate *c) {
    Lin L;
    if (!lin_analyse(pg, c, &L))
        return false;
    // Dry run: cexpr decides whether every prologue and epilogue value can be emitted.
    KernelConfig k;
    cgen_lin_config_pack(&(CLinConfig){.cls = L.conv ? CCLS_CONV : CCLS_MATMUL,
                                       .variant = CLIN_TILE,
                                       .mr = 4,
                                       .nr = 16,
                                       .kc = 64,
                                       .mc = 8,
                                       .nc = 32,
                                       .packa = CLIN_PACK_PER_CALL,
                                       .packb = CLIN_PACK_PER_CALL},
                         &k);
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&L, &k, "orch_dry", &s, &e);
    sb_free(&s);
    return rc == ST_OK;
}

int cgen_lin_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e) {
    Lin L;
    if (!lin_analyse(pg, c, &L))
        return err_set(e, ST_UNSUPPORTED, "linear kernel %s: candidate %d is not generated here",
                       fn, c->id);
    return emit_kernel(&L, cfg, fn, src, e);
}

// GCC vector extensions rather than <immintrin.h>: the same instructions (loads and stores
// through an unaligned, may_alias vector type are vmovups; through memcpy GCC picked the
// integer vmovdqu), the splat vbroadcastss, a * b + c contracts to vfmadd under
// GNU C's default -ffp-contract=fast), while parsing immintrin.h took ~0.7 of the ~0.9 s that
// every kernel unit cost gcc -O3 (0.16 s without it, a one-kernel unit; AMD EPYC, gcc 12).
// The splat is x - 0, which GCC folds (x + 0 it may not: -0 + 0 is +0).
const char *cgen_lin_prelude(void) {
    return "// Vector helpers of the linear kernels: one register of ORCH_LV floats.\n"
           "#include <stdlib.h>\n"
           "#include <string.h>\n"
           "#include <stdint.h>\n"
           "#if defined(__AVX512F__)\n"
           "#define ORCH_LV 16\n"
           "#elif defined(__AVX2__) && defined(__FMA__)\n"
           "#define ORCH_LV 8\n"
           "#else\n"
           "#define ORCH_LV 4\n"
           "#endif\n"
           "typedef float orch_lv __attribute__((vector_size(ORCH_LV * 4)));\n"
           "typedef float orch_lv_u __attribute__((vector_size(ORCH_LV * 4), aligned(4), "
           "may_alias));\n"
           "static inline orch_lv orch_lv_load(const float *p) { return *(const orch_lv_u *)p; }\n"
           "static inline void orch_lv_store(float *p, orch_lv v) { *(orch_lv_u *)p = v; }\n"
           "static inline orch_lv orch_lv_set1(float x) { return x - (orch_lv){0}; }\n"
           "static inline orch_lv orch_lv_fma(orch_lv a, orch_lv b, orch_lv c) { return a * b + "
           "c; }\n"
           "static inline orch_lv orch_lv_add(orch_lv a, orch_lv b) { return a + b; }\n"
           "static inline orch_lv orch_lv_zero(void) { return (orch_lv){0}; }\n\n";
}
