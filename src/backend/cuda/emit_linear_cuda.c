// Linear kernels of the CUDA target (cugen.h's cugen_lin_*, knobs in cugen_linear.h): the rules
// of the candidates it takes, the operand reads of half storage, the Roller-style hardware model
// that proposes configs, and the entry points. The kernel bodies are in emit_matmul_cuda.c (tiled
// SIMT GEMM, TF32 / FP16 / BF16 mma.sync GEMMs, GEMV) and emit_conv_cuda.c (depthwise direct).
// Every product is codegen's batch of GEMMs C[b] (M x N) = A[b] (M x K) * B[b] (K x N) written at
// out + (b*M + i)*N + j, as the C target's linear emitter sees it too (linear_spec.h's Lin; the
// value helpers of linear_values.h emit plain C over `in[]` and int64_t, valid CUDA C):
//   matmul  A, B the operands (batch dims broadcast), b runs over the output's batch dims on
//           gridDim.z (folded into M when B is shared and A is a dense kernel input);
//   conv    b = n*G + g, A = the weights of group g (OC/G x C/G*KH*KW), B = the virtual im2col
//           patch matrix of image n, group g, computed element by element while staging shared
//           memory (a 1x1 stride-1 unpadded conv reads X in place: a plain GEMM).
// Half storage (--precision fp16 / bf16 with half tensors): operands and LINEAR output all float16
// or all bfloat16, the sink that type or float32 (a candidate ending with the CAST to a model
// output); every variant converts on load and accumulates in float32, the tensor-core one of the
// type stages the operands as stored (emit_matmul_cuda.c); the LINEAR's value is rounded once to
// its type where an epilogue reads it, the sink's once on store.
// Convolutions of 1 to 3 spatial axes, transposed ones too, go through the implicit GEMM (the
// direct and tensor-core direct kernels take 2-D ones). Refused (cugen_lin_supports false):
// operands of other or mixed dtypes, REDUCE/OPAQUE primitives, epilogues not elementwise at the
// LINEAR's output shape.
#include "cost_models.h"
#include "cugen_lin_internal.h"
#include "device_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Fills L (codegen's analysis) for what this emitter generates: matmul of any rank, 1-D to 3-D
// convolution (transposed too), float32 or half operands, at most ORCH_CUDA_MAX_IN inputs, and at
// most 65535 GEMMs (grid.z) so that indices stay below 2^31 per operand in the launch geometry.
static bool analyse(const PrimGraph *pg, const Candidate *c, Lin *L, bool views) {
    LinRules rules = {
        .half = true, .views = views, .max_inputs = ORCH_CUDA_MAX_IN, .max_batch = 65535};
    return lin_spec_analyse(pg, c, &rules, L);
}

bool culin_analyse(const PrimGraph *pg, const Candidate *c, Lin *L) {
    return analyse(pg, c, L, false);
}

bool culin_analyse_views(const PrimGraph *pg, const Candidate *c, Lin *L) {
    return analyse(pg, c, L, true);
}

// ---- emission helpers shared by the kernel bodies ----

static int culin_reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out,
                        size_t cap, Err *e) {
    (void)code;
    (void)indent;
    const Emit *E = ctx;
    if (rq->tensor != E->L->tl || !E->acc)
        return err_set(e, ST_UNSUPPORTED, "CUDA linear kernel %s: tensor %d is not computable here",
                       E->fn, rq->tensor);
    if (culin_half(E->L)) {
        // The LINEAR's half output as the interpreter has it: the float sum rounded once.
        char r[96];
        snprintf(r, sizeof r, "%s(%s)", culin_f2h_fn(E->L), E->acc);
        culin_h2f(E->L, r, out, cap);
        return ST_OK;
    }
    snprintf(out, cap, "%s", E->acc);
    return ST_OK;
}

// File-scope half <-> float conversions of the generated linear kernels (hardware cvt; the
// prelude's portable versions loop over subnormals), once per translation unit.
static const char HALF_HELPERS[] =
    "#ifndef ORCH_LIN_HALF_CVT\n"
    "#define ORCH_LIN_HALF_CVT\n"
    "ORCH_DEV float orch_lin_h2f(uint16_t h) {\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    return f;\n"
    "}\n"
    "ORCH_DEV uint16_t orch_lin_f2h(float x) {\n"
    "    uint16_t h;\n"
    "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x));\n"
    "    return h;\n"
    "}\n"
    "ORCH_DEV float orch_lin_b2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }\n"
    "ORCH_DEV uint16_t orch_lin_f2b(float x) {\n"
    "    uint16_t h;\n"
    "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x));\n"
    "    return h;\n"
    "}\n"
    "#endif\n";

void culin_h2f(const Lin *L, const char *x, char *buf, size_t cap) {
    snprintf(buf, cap, "%s(%s)", culin_dtype(L) == DT_BFLOAT16 ? "orch_lin_b2f" : "orch_lin_h2f",
             x);
}

const char *culin_f2h_fn(const Lin *L) {
    return culin_dtype(L) == DT_BFLOAT16 ? "orch_lin_f2b" : "orch_lin_f2h";
}

void culin_emit_store(const Emit *E, int ind, const char *lhs, const char *v) {
    DType st = lin_t(E->L, E->L->sink)->dtype;
    if (st == DT_FLOAT)
        sb_line(E->s, ind, "%s = %s;\n", lhs, v);
    else // the value is float (the accumulator) or already of the sink's type (epilogue)
        sb_line(E->s, ind, "%s = %s((float)(%s));\n", lhs,
                st == DT_BFLOAT16 ? "orch_lin_f2b" : "orch_lin_f2h", v);
}

// The element read of codegen's operand helpers (Emit.load) under half storage: a half kernel
// input read in place at flat offset `off` through its typed pointer, converted to float.
static void half_load(const Emit *E, int ind, int input, const char *off, const char *dst) {
    char ld[256], v[320];
    snprintf(ld, sizeof ld, "in%d[%s]", input, off);
    culin_h2f(E->L, ld, v, sizeof v);
    sb_line(E->s, ind, "%s = %s;\n", dst, v);
}

void culin_kernel_head(const Emit *E, int nthreads) {
    StrBuf *s = E->s;
    if (culin_half(E->L))
        sb_puts(s, HALF_HELPERS);
    if (nthreads > 0)
        sb_printf(s, "ORCH_KERNEL void __launch_bounds__(%d) %s(OrchArgs a) {\n", nthreads, E->fn);
    else
        sb_printf(s, "ORCH_KERNEL void %s(OrchArgs a) {\n", E->fn);
    // A local copy indexed by constants only: it lives in registers (the value helpers read
    // `in[j]` as the C target's kernels do).
    // cexpr (in its CUDA dialect) and this emitter's own loads read input j through in<j>.
    const Candidate *c = E->L->c;
    int n = c->n_inputs;
    sb_line(s, 1, "const void *in[%d];\n", n > 0 ? n : 1);
    for (int j = 0; j < n; j++) {
        const char *ct = cgen_ctype(E->L->pg->tensors[c->inputs[j]]->dtype);
        sb_line(s, 1, "in[%d] = a.in[%d];\n", j, j);
        sb_line(s, 1, "const %s *__restrict__ in%d = (const %s *)a.in[%d];\n", ct, j, ct, j);
        sb_line(s, 1, "(void)in%d;\n", j);
    }
    sb_line(s, 1, "(void)in;\n");
    const char *ot = cgen_ctype(lin_t(E->L, E->L->sink)->dtype);
    sb_line(s, 1, "%s *o = (%s *)a.out;\n", ot, ot);
}

// Statements computing the candidate's output from the LINEAR's value `acc` (a float in scope)
// at GEMM coordinates (b, i, j), with b's coordinates declared (matmul bq.. unless folded, conv
// q_n/q_g); `dst` receives the name of the final value.
int culin_emit_epi_value(Emit *E, int ind, const char *acc, const char *i, const char *j, char *dst,
                         size_t cap, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (!L->epi) {
        snprintf(dst, cap, "%s", acc);
        return ST_OK;
    }
    const Tensor *O = lin_t(L, L->tl);
    char bidx[ORCH_MAX_RANK][32];
    const char *ix[ORCH_MAX_RANK];
    if (L->conv) {
        if (L->S == 2) {
            sb_line(s, ind, "const int64_t e_o1 = (%s) %% %lld, e_o0 = (%s) / %lld;\n", j,
                    (long long)L->out[1], j, (long long)L->out[1]);
        } else { // the output pixel j split over 1 or 3 spatial axes, the last fastest
            sb_line(s, ind, "int64_t e_r = (%s);\n", j);
            for (int d = L->S - 1; d >= 0; d--)
                sb_line(s, ind, "const int64_t e_o%d = e_r %% %lld; e_r /= %lld;\n", d,
                        (long long)L->out[d], (long long)L->out[d]);
            sb_line(s, ind, "(void)e_r;\n");
        }
        sb_line(s, ind, "const int64_t e_oc = q_g * %lld + (%s);\n", (long long)L->OCg, i);
        static const char *const eo[3] = {"e_o0", "e_o1", "e_o2"};
        ix[0] = "q_n";
        ix[1] = "e_oc";
        for (int d = 0; d < L->S; d++)
            ix[2 + d] = eo[d];
    } else {
        if (L->m0) {
            // Folded batch: the output batch coordinates come from the row.
            sb_line(s, ind, "int64_t q_r = (%s) / %lld;\n", i, (long long)L->m0);
            sb_line(s, ind, "const int64_t f_i = (%s) %% %lld;\n", i, (long long)L->m0);
            for (int d = L->nbd - 1; d >= 0; d--)
                sb_line(s, ind, "const int64_t bq%d = q_r %% %lld; q_r /= %lld;\n", d,
                        (long long)L->bd[d], (long long)L->bd[d]);
        }
        for (int d = 0; d < O->rank - 2; d++) {
            snprintf(bidx[d], sizeof bidx[d], "bq%d", d);
            ix[d] = bidx[d];
        }
        sb_line(s, ind, "const int64_t e_i = %s, e_j = %s;\n", L->m0 ? "f_i" : i, j);
        ix[O->rank - 2] = "e_i";
        ix[O->rank - 1] = "e_j";
    }
    E->acc = acc;
    int rc = cexpr_value(E->x, L->sink, ix, s, ind, dst, cap, e);
    E->acc = NULL;
    cexpr_forget(E->x);
    return rc;
}

// ---- the hardware model ----

static double cdiv(double a, double b) {
    return ceil(a / b);
}

// Blocks of `threads` threads, `regs` registers each (at least 32) and `smem` bytes resident on
// one SM (device_model.h).
static int blocks_per_sm(const CuDevice *h, int threads, int regs, double smem) {
    return cudev_blocks_per_sm(h, threads, ORCH_MAX(regs, 32), (int64_t)smem);
}

static double overlap(double a, double b) {
    return ORCH_MAX(a, b) + CUDA_MATMUL_MODEL.overlap * ORCH_MIN(a, b);
}

// Unique bytes of the operands and the result.
static double unique_bytes(const Lin *L) {
    return (double)dtype_size(culin_dtype(L)) *
           (double)(tensor_numel(lin_t(L, L->ta)) + tensor_numel(lin_t(L, L->tb)) +
                    tensor_numel(lin_t(L, L->tl)));
}

// Registers a SIMT thread needs: its tile, the operand fragments, the staged prefetch, indices.
int culin_simt_regs(const Lin *L, const CuLinearConfig *P) {
    int64_t nt = (P->bm / P->tm) * (P->bn / P->tn);
    int64_t pre = (P->bm * P->bk + nt - 1) / nt + (P->bn * P->bk + nt - 1) / nt;
    (void)L;
    return (int)(P->tm * P->tn + P->tm + P->tn + pre + 40);
}

// The fraction of FMA peak a thread tile reaches with enough warps resident (per K step a thread
// reads tm + tn floats from shared memory for tm*tn FMAs), and how much of the SM a block's warps
// keep busy (CUDA_MATMUL_MODEL: calibrated on an H100).
static double tile_eff(double tm, double tn) {
    const CudaMatmulModel *cm = &CUDA_MATMUL_MODEL;
    double ratio = tm * tn / (tm + tn); // 2 (4x4), 2.67 (8x4), 4 (8x8)
    return ratio >= cm->tile_r_hi    ? cm->tile_eff_hi
           : ratio >= cm->tile_r_mid ? cm->tile_eff_mid
                                     : cm->tile_eff_lo;
}

static double warp_eff(double warps) {
    return ORCH_MIN(1.0, CUDA_MATMUL_MODEL.warp_eff0 + warps / CUDA_MATMUL_MODEL.warp_eff_warps);
}

// tc: the tensor-core speed-up over float32 FMAs per SM (0: SIMT); the mma kernels' warp tiles
// are 32 x 32.
static double score_simt(const Lin *L, const CuDevice *h, const CuLinearConfig *P, double tc) {
    const CudaMatmulModel *cm = &CUDA_MATMUL_MODEL;
    bool tf32 = tc > 0;
    double bm = (double)P->bm, bn = (double)P->bn, tm = (double)P->tm, tn = (double)P->tn,
           bk = (double)P->bk;
    double M = (double)L->M, N = (double)L->N, K = (double)L->K, B = (double)L->batch;
    int nt = tf32 ? (int)((bm / 32) * (bn / 32) * 32) : (int)((bm / tm) * (bn / tn));
    double smem = (double)culin_smem_bytes(P);
    int bpsm = blocks_per_sm(h, nt, tf32 ? cm->tc_regs : culin_simt_regs(L, P), smem);
    if (bpsm < 1)
        return 1e30;
    // Split-K: S times the blocks, each over K / S; the partial tiles go through L2 twice. On
    // the tensor cores, whose K ranges take little time, the last block of a tile reading its S
    // partials alone (at about half an SM's share of L2; S x 32 KiB for a 64 x 128 tile) is
    // charged too; the SIMT estimate, whose choices were measured on an H100, stays as it was.
    double S = P->split > 1 ? (double)P->split : 1.0;
    double t_split = S > 1 ? 2.0 * 4.0 * S * B * M * N / cudev_l2_bw(h) + cm->split_sync_s : 0.0;
    if (S > 1 && tf32)
        t_split += 4.0 * S * bm * bn / (cm->split_sum_l2_share * cudev_l2_bw(h) / h->sms);
    K = cdiv(cdiv(K, bk), S) * bk;
    // Blocks are spread evenly: the busiest SM runs ceil(tiles / SMs) of them, up to bpsm at once.
    double tiles = B * cdiv(M, bm) * cdiv(N, bn) * S;
    double per_sm = cudev_per_sm(h, tiles);
    double resident = ORCH_MIN((double)bpsm, per_sm);
    double eff = (tf32 ? cm->tc_eff : tile_eff(tm, tn)) * warp_eff(resident * nt / 32.0);
    if (bk < cm->bk_thin)
        eff *= cm->bk_thin_eff; // twice the barriers per K
    double peak_sm = cudev_fp32_peak(h) / h->sms * (tf32 ? tc : 1.0);
    double t_comp = per_sm * 2.0 * bm * bn * K / (peak_sm * eff);
    // The implicit-GEMM patch gather: index arithmetic per staged element.
    if (L->conv && !L->b_direct_ok)
        t_comp *= cm->gather;
    // A is re-read once per column of tiles, B once per row of tiles (Roller's traffic model);
    // from L2 when the operands fit, from DRAM otherwise.
    double reread = (double)dtype_size(culin_dtype(L)) * B * M * N * K * S * (1.0 / bn + 1.0 / bm);
    double ub = unique_bytes(L);
    double t_mem =
        ub / h->dram_bw + (ub <= cm->l2_fit * h->l2 ? reread / cudev_l2_bw(h)
                                                    : reread / h->dram_bw * cm->dram_reread);
    return overlap(t_comp, t_mem) + t_split + CUDA_ARCH.launch_s;
}

// The tensor-core direct convolution (culin_emit_tcconv), per block: the mma issue (m16n8k16
// cycles per SM sub-partition, as the attention model takes it) beside the shared-memory reads
// (an ldmatrix.x4 of the input tile per 16 pixels, tap and 16 channels: 512 bytes at 128 a cycle,
// twice that at stride 2, whose rows share banks; the B fragments' 32-bit reads), the two
// overlapping; then the staging of the input tile and of every weight (from L2 by cp.async;
// element copies at a few lane instructions each, more through cexpr), which the block waits
// for, hidden in part by the other resident blocks. Few resident warps leave the mma and
// ldmatrix latencies exposed. The constants are CUDA_MATMUL_MODEL's tcc_*.
static double score_tcconv(const Lin *L, const CuDevice *h, const CuLinearConfig *P) {
    const CudaMatmulModel *cm = &CUDA_MATMUL_MODEL;
    CuTcConv t;
    CuTcGeo g;
    if (!culin_tcconv_ok(L, &t) || !culin_tcconv_geo(L, &t, P, &g) ||
        (double)g.smem > h->smem_optin)
        return 1e30;
    int nt = g.threads;
    double smem = (double)g.smem;
    double BH = (double)P->bm, BW = (double)P->bn;
    double KK = (double)(L->k[0] * L->k[1]), steps = (double)g.KS / 16.0;
    double tiles16 = BH * BW / 16.0, warps = nt / 32.0;
    double mma = tiles16 * steps * (double)t.NT * cm->tcc_mma_cycles / CUDA_ARCH.schedulers;
    double lds = tiles16 * steps * cm->tcc_ldsm_cycles * (L->st[1] > 1 ? 2.0 : 1.0) +
                 warps * steps * t.NT * cm->tcc_bfrag_cycles;
    double xel = (double)(g.TH * g.TW * t.Cp), wel = (double)(L->OC * g.KS);
    (void)KK;
    double stage_x = (t.x16 ? xel * 2.0 / cm->tcc_cp_bytes_cycle
                            : xel * (t.x.affine ? cm->tcc_copy_x_instr : cm->tcc_copy_cexpr_instr) /
                                  CUDA_ARCH.fp32_lanes) +
                     cm->tcc_stage_cycles;
    double stage_w =
        (t.w16 || t.wraw ? (double)g.wsm * 2.0 / cm->tcc_cp_bytes_cycle
                         : wel * (t.w.affine ? cm->tcc_copy_w_instr : cm->tcc_copy_cexpr_instr) /
                               CUDA_ARCH.fp32_lanes) +
        cm->tcc_stage_cycles;
    if (t.wraw) // B fragments as four 16-bit gathers
        lds += warps * steps * t.NT * cm->tcc_bfrag_cycles;
    int bpsm = blocks_per_sm(h, nt, culin_tcconv_regs(&t, P), smem);
    if (bpsm < 1)
        return 1e30;
    // Persistent blocks (bk > 0) stage the weights once for all their tiles.
    double tiles = (double)L->NI * cdiv((double)L->out[0], BH) * cdiv((double)L->out[1], BW);
    double blocks = P->bk > 0 ? (double)P->bk : tiles;
    double per_sm = cudev_per_sm(h, tiles), blocks_sm = cudev_per_sm(h, blocks);
    double resident = ORCH_MIN((double)bpsm, blocks_sm);
    double eff = ORCH_MIN(1.0, cm->tcc_eff0 + resident * warps / cm->tcc_eff_warps);
    double hide = ORCH_MIN(resident, cm->tcc_hide);
    double cycles =
        per_sm * (ORCH_MAX(mma, lds) / eff + stage_x / hide) + blocks_sm * stage_w / hide;
    double t_mem = unique_bytes(L) / h->dram_bw;
    return ORCH_MAX(cycles / h->clock, t_mem) + CUDA_ARCH.launch_s;
}

static double score_cfg(const Lin *L, const CuDevice *h, const CuLinearConfig *P) {
    const CudaMatmulModel *cm = &CUDA_MATMUL_MODEL;
    double flops = 2.0 * (double)L->batch * (double)L->M * (double)L->N * (double)L->K;
    switch (P->var) {
    case CUV_SIMT: return score_simt(L, h, P, 0);
    case CUV_TF32: return score_simt(L, h, P, cm->tc_tf32);
    // Half the operand bytes through shared memory and twice TF32's tensor-core rate.
    case CUV_F16:
    case CUV_BF16: return score_simt(L, h, P, cm->tc_half);
    case CUV_GEMV:
    case CUV_GEMVK: {
        // Bandwidth bound: B streamed once; lanes on columns read B rows coalesced when B is a
        // kernel input; lanes on K do so when B is a transposed view (computed by cexpr).
        double cols = P->var == CUV_GEMV ? 32.0 : 8.0;
        double tiles = (double)L->batch * cdiv((double)L->N, cols);
        bool coalesced = (P->var == CUV_GEMV) == (L->pb >= 0);
        double t_mem = unique_bytes(L) / h->dram_bw * (coalesced ? 1.0 : cm->gemv_uncoalesced);
        double t_comp = flops / (cudev_fp32_peak(h) * cm->gemv_peak);
        return overlap(t_comp, t_mem) / cudev_wave_eff(h, tiles, cm->gemv_bpsm) +
               CUDA_ARCH.launch_s;
    }
    case CUV_TCCONV: return score_tcconv(L, h, P);
    case CUV_DIRECT: {
        // A thread per output pixel: per window element one patch gather (index arithmetic and
        // the prologue) and M FMAs with broadcast weights; lanes at a share of their rate (the
        // gather's integer work).
        double px = (double)L->NI * (double)L->G * (double)L->out[0] * (double)L->out[1];
        double lane_ops = px * (double)L->K * ((double)L->OCg + cm->direct_gather_instr);
        double t_comp = lane_ops / (0.5 * cudev_fp32_peak(h) * cm->direct_rate);
        double tiles = cdiv(px, (double)P->bn);
        return overlap(t_comp, unique_bytes(L) / h->dram_bw) /
                   cudev_wave_eff(h, tiles, (int)(h->threads_sm / P->bn)) +
               CUDA_ARCH.launch_s;
    }
    default: { // depthwise direct
        double t_comp = flops / (cudev_fp32_peak(h) * cm->dw_peak);
        double tiles = cdiv((double)tensor_numel(lin_t(L, L->tl)), cm->dw_block);
        return overlap(t_comp, unique_bytes(L) * cm->dw_traffic / h->dram_bw) /
                   cudev_wave_eff(h, tiles, cm->dw_bpsm) +
               CUDA_ARCH.launch_s;
    }
    }
}

void culin_config_pack(const CuLinearConfig *lc, KernelConfig *k) {
    cugen_config_clear(k, lc->conv ? CUCLS_CONV : CUCLS_MATMUL);
    k->p[CUL_VAR] = lc->var;
    k->p[CUL_BM] = lc->bm;
    k->p[CUL_BN] = lc->bn;
    k->p[CUL_BK] = lc->bk;
    k->p[CUL_TM] = lc->tm;
    k->p[CUL_TN] = lc->tn;
    k->p[CUL_SPLIT] = lc->split;
    const char *cls = lc->conv ? "cuconv" : "cumm";
    switch (lc->var) {
    case CUV_SIMT:
    case CUV_TF32:
    case CUV_F16:
    case CUV_BF16:
        // The variant names the arithmetic: the database never mixes measurements across
        // precisions.
        snprintf(k->desc, sizeof k->desc, "cls=%s v=%s bm=%lld bn=%lld bk=%lld tm=%lld tn=%lld",
                 cls,
                 lc->var == CUV_SIMT   ? "simt"
                 : lc->var == CUV_TF32 ? "tf32"
                 : lc->var == CUV_F16  ? "f16"
                                       : "bf16",
                 (long long)lc->bm, (long long)lc->bn, (long long)lc->bk, (long long)lc->tm,
                 (long long)lc->tn);
        if (lc->split > 1) { // only then: the keys of unsplit configs stay as they were
            size_t n = strlen(k->desc);
            snprintf(k->desc + n, sizeof k->desc - n, " sk=%lld", (long long)lc->split);
        }
        break;
    case CUV_GEMV:
    case CUV_GEMVK:
        snprintf(k->desc, sizeof k->desc, "cls=%s v=%s jb=%lld", cls,
                 lc->var == CUV_GEMV ? "gemv" : "gemvk", (long long)lc->bn);
        break;
    case CUV_DIRECT:
        snprintf(k->desc, sizeof k->desc, "cls=%s v=direct bs=%lld", cls, (long long)lc->bn);
        break;
    case CUV_TCCONV:
        snprintf(k->desc, sizeof k->desc, "cls=%s v=%sdc bh=%lld bw=%lld mt=%lld", cls,
                 lc->bf16 ? "bf16" : "f16", (long long)lc->bm, (long long)lc->bn,
                 (long long)lc->tm);
        if (lc->bk > 0) { // persistent blocks
            size_t n = strlen(k->desc);
            snprintf(k->desc + n, sizeof k->desc - n, " pb=%lld", (long long)lc->bk);
        }
        break;
    default: snprintf(k->desc, sizeof k->desc, "cls=%s v=dw", cls); break;
    }
}

bool culin_config_unpack(const KernelConfig *k, CuLinearConfig *lc) {
    const int64_t *P = k->p;
    *lc = (CuLinearConfig){.conv = k->cls == CUCLS_CONV,
                           .var = P[CUL_VAR],
                           .bm = P[CUL_BM],
                           .bn = P[CUL_BN],
                           .bk = P[CUL_BK],
                           .tm = P[CUL_TM],
                           .tn = P[CUL_TN],
                           .split = P[CUL_SPLIT],
                           .bf16 = P[CUL_VAR] == CUV_TCCONV && strstr(k->desc, " v=bf16dc ")};
    return k->cls == CUCLS_MATMUL || k->cls == CUCLS_CONV;
}

static int cfg_cmp(const void *a, const void *b) {
    const KernelConfig *x = a, *y = b;
    return x->score < y->score ? -1 : x->score > y->score ? 1 : strcmp(x->desc, y->desc);
}

int64_t culin_smem_bytes(const CuLinearConfig *P) {
    if (P->var == CUV_TF32) // A and B tiles, double-buffered, rows padded by 4 floats
        return 2 * (P->bm * (P->bk + 4) + P->bk * (P->bn + 8)) * 4;
    if (P->var == CUV_F16 || P->var == CUV_BF16) // k-pair words, rows padded by 8
        return 2 * (P->bk / 2) * (P->bm + 8 + P->bn + 8) * 4;
    return 2 * P->bk * (P->bm + 4 + P->bn + 4) * 4;
}

// Split-K copies of config out[n - 1] (at out[n]..; returns how many) where its tiles leave SMs
// idle and K is long: S = 2, 4, .. blocks per tile, each over at least min_slices K slices, up to
// about two waves of blocks (the first S that fills one wave is the last offered), within the
// workspace bound and grid.z.
static int add_splits(const Lin *L, const CuDevice *h, CuLinearConfig *out, int n, int cap,
                      int min_slices) {
    const CuLinearConfig *P = &out[n - 1];
    double tiles =
        (double)L->batch * cdiv((double)L->M, (double)P->bm) * cdiv((double)L->N, (double)P->bn);
    double slices = cdiv((double)L->K, (double)P->bk);
    int added = 0;
    for (int sk = 2; sk <= CUDA_MATMUL_MODEL.split_max && n + added < cap; sk *= 2) {
        if (tiles * sk > CUDA_MATMUL_MODEL.split_waves * h->sms ||
            slices < (double)min_slices * sk ||
            (double)sk * L->batch * L->M * L->N > CULIN_SPLIT_MAX_WS ||
            (double)sk * L->batch > 65535)
            break;
        out[n + added] = out[n - 1];
        out[n + added].split = sk;
        added++;
        if (tiles * sk >= h->sms)
            break;
    }
    return added;
}

// Every legal config, unscored: SIMT block tiles aligned to warps (threads a multiple of 32),
// within the static shared-memory limit and the registers per SM; the tensor-core tiles of the
// precision (opt, cugen_prec_of) on devices that have them (sm_80 and later; tc).
static int enum_cfgs(const Lin *L, const CuDevice *h, bool tc, const TargetOptions *opt,
                     CuLinearConfig *out, int cap) {
    // A depthwise convolution (one input and one output channel a group) is a batch of GEMMs
    // with one row and K = the window: the tiles would be almost all padding, and the model,
    // which charges no per-group cost, ranked them first, so the direct kernel was never
    // measured (MobileNetV2's stride-2 96-channel depthwise conv: 106 us at the first tile).
    if (L->dw_ok && L->OCg == 1 && cap > 0) {
        out[0] = (CuLinearConfig){.conv = L->conv, .var = CUV_DW};
        return 1;
    }
    static const int simt[][5] = {
        // bm, bn, bk, tm, tn
        {128, 128, 8, 8, 8},
        {128, 128, 16, 8, 8},
        {128, 64, 8, 8, 8},
        {64, 128, 8, 8, 8},
        {128, 64, 16, 8, 4},
        {64, 64, 8, 8, 8},
        {64, 64, 16, 4, 4},
        {64, 32, 16, 4, 4},
        {32, 64, 16, 4, 4},
        {32, 32, 16, 4, 4},
        {128, 32, 16, 8, 4},
        {16, 64, 16, 4, 4},
        {64, 16, 16, 4, 4},
        {64, 128, 16, 8, 4},
        {128, 128, 16, 8, 4},
        {64, 64, 16, 8, 4},
        // M of a few rows (a convolution to 3 output channels): tiles 4 or 8 rows high.
        {4, 256, 16, 4, 4},
        {8, 256, 16, 4, 4},
        {8, 128, 16, 4, 4},
    };
    int n = 0;
    for (size_t i = 0; i < ORCH_COUNT(simt) && n < cap; i++) {
        CuLinearConfig *k = &out[n];
        *k = (CuLinearConfig){.conv = L->conv,
                              .var = CUV_SIMT,
                              .bm = simt[i][0],
                              .bn = simt[i][1],
                              .bk = simt[i][2],
                              .tm = simt[i][3],
                              .tn = simt[i][4]};
        int nt = (simt[i][0] / simt[i][3]) * (simt[i][1] / simt[i][4]);
        if (nt % 32 || nt > 1024 || (double)culin_smem_bytes(k) > h->smem_block ||
            culin_simt_regs(L, k) > CUDA_ARCH.max_regs ||
            blocks_per_sm(h, nt, culin_simt_regs(L, k), (double)culin_smem_bytes(k)) < 1 ||
            cdiv((double)L->M, simt[i][0]) > 65535)
            continue;
        n++;
        // Split-K where the tiles leave SMs idle and K is long: at least 8 K slices per split.
        n += add_splits(L, h, out, n, cap, CUDA_MATMUL_MODEL.split_slices_simt);
    }
    // Half tensors: the tensor cores of their type (products of halves are exact in float32, so
    // whatever the precision), never TF32 (its operands would be float32).
    DType dt = culin_dtype(L);
    int tcv = !tc                                   ? -1
              : dt == DT_FLOAT16                    ? CUV_F16
              : dt == DT_BFLOAT16                   ? CUV_BF16
              : cugen_prec_of(opt, dt) == PREC_TF32 ? CUV_TF32
              : cugen_prec_of(opt, dt) == PREC_FP16 ? CUV_F16
              : cugen_prec_of(opt, dt) == PREC_BF16 ? CUV_BF16
                                                    : -1;
    if (tcv >= 0) {
        // Warp tiles of 32 x 32 (2 x 4 mma tiles per warp: m16n8k8 per k8 step for TF32,
        // m16n8k16 per k16 step for FP16 / BF16, whose half-size operands allow twice the K
        // slice in the same shared memory).
        static const int tf[][3] = {{128, 128, 16}, {128, 64, 16}, {64, 64, 16}, {64, 32, 16}};
        for (size_t i = 0; i < ORCH_COUNT(tf) && n < cap; i++) {
            CuLinearConfig *k = &out[n];
            *k = (CuLinearConfig){.conv = L->conv,
                                  .var = tcv,
                                  .bm = tf[i][0],
                                  .bn = tf[i][1],
                                  .bk = tcv == CUV_TF32 ? tf[i][2] : 2 * tf[i][2],
                                  .tm = 32,
                                  .tn = 32};
            if ((double)culin_smem_bytes(k) > h->smem_block || cdiv((double)L->M, tf[i][0]) > 65535)
                continue;
            n++;
            // Split-K likewise, at least 4 slices per split (a slice is 16 or 32 deep here, 8 or
            // 16 in the SIMT tiles): ResNet's 7x7- and 14x14-pixel 3x3 convs have 8 to 32 tiles.
            n += add_splits(L, h, out, n, cap, CUDA_MATMUL_MODEL.split_slices_tc);
        }
    }
    if (!L->conv && L->M <= 8 && n + 2 <= cap) {
        for (int v = CUV_GEMV; v <= CUV_GEMVK; v++)
            out[n++] = (CuLinearConfig){.conv = L->conv, .var = v, .bn = v == CUV_GEMV ? 32 : 8};
    }
    if (L->dw_ok && n < cap)
        out[n++] = (CuLinearConfig){.conv = L->conv, .var = CUV_DW};
    // The tensor-core direct convolution: blocks of BH x BW pixels, 2 to 8 warps of MT 16-pixel
    // tiles, within the opt-in shared memory (sm_80 and later).
    CuTcConv tcc;
    if (tc && culin_tcconv_ok(L, &tcc)) {
        static const int tcs[][3] = {
            // bh, bw, mt
            {2, 32, 1}, {4, 32, 1}, {4, 32, 2}, {8, 32, 2}, {8, 32, 4}, {4, 64, 2},
            {4, 64, 4}, {8, 64, 4}, {2, 64, 2}, {8, 16, 1}, {8, 16, 2}, {16, 16, 2},
        };
        for (size_t i = 0; i < ORCH_COUNT(tcs) && n < cap; i++) {
            CuLinearConfig *k = &out[n];
            *k = (CuLinearConfig){.conv = L->conv,
                                  .var = CUV_TCCONV,
                                  .bm = tcs[i][0],
                                  .bn = tcs[i][1],
                                  .tm = tcs[i][2],
                                  .bf16 = culin_dtype(L) == DT_BFLOAT16};
            CuTcGeo g;
            if (!culin_tcconv_geo(L, &tcc, k, &g) || (double)g.smem > h->smem_optin ||
                g.threads < 64 || g.threads > 256 || k->tm * tcc.NT > 16)
                continue;
            int bpsm = blocks_per_sm(h, g.threads, culin_tcconv_regs(&tcc, k), (double)g.smem);
            double tiles = (double)L->NI * cdiv((double)L->out[0], (double)k->bm) *
                           cdiv((double)L->out[1], (double)k->bn);
            if (bpsm < 1 || tiles > 2147483647.0)
                continue;
            n++;
            // Where the tiles outnumber the resident slots: persistent blocks, one per slot,
            // each staging the weights once for the tiles it loops over.
            double slots = cudev_slots(h, bpsm);
            if (tiles > slots && n < cap) {
                out[n] = out[n - 1];
                out[n].bk = (int64_t)slots;
                n++;
            }
        }
    }
    for (int bs = 128; bs <= 256 && culin_direct_ok(L) && n < cap; bs *= 2)
        out[n++] = (CuLinearConfig){.conv = L->conv, .var = CUV_DIRECT, .bn = bs};
    return n;
}

int cugen_lin_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k) {
    Lin L;
    if (k <= 0 || !culin_analyse(pg, c, &L))
        return 0;
    const CuDevice h = cudev_of(hw);
    CuLinearConfig lcs[256];
    KernelConfig all[ORCH_COUNT(lcs)];
    // Tensor cores with TF32 / BF16 inputs: sm_80 and later (an unknown device: assumed).
    bool tc = h.cc_major <= 0 || h.cc_major >= 8;
    int n = enum_cfgs(&L, &h, tc, opt, lcs, (int)ORCH_COUNT(lcs));
    for (int i = 0; i < n; i++) {
        culin_config_pack(&lcs[i], &all[i]);
        all[i].score = score_cfg(&L, &h, &lcs[i]);
    }
    qsort(all, (size_t)n, sizeof *all, cfg_cmp);
    for (int i = 0; i < n; i++)
        culin_config_unpack(&all[i], &lcs[i]);
    // Every variant's best config is measured when k allows (the model ranks variants less
    // surely than tiles of one variant: it missed by 10x on a 3-channel 9x9 convolution), split
    // and unsplit tensor-core configs counting as two (the summing block's cost is an estimate
    // not yet checked on a GPU), then the rest by score; the result stays in score order.
    int m = 0;
    bool taken[256] = {false};
    for (int i = 0; i < n && m < k; i++) {
        bool first = true;
        for (int j = 0; j < i && first; j++)
            first = lcs[j].var != lcs[i].var ||
                    (lcs[i].var != CUV_SIMT && (lcs[j].split > 1) != (lcs[i].split > 1));
        if (first) {
            taken[i] = true;
            m++;
        }
    }
    for (int i = 0; i < n && m < k; i++)
        if (!taken[i]) {
            taken[i] = true;
            m++;
        }
    m = 0;
    for (int i = 0; i < n; i++)
        if (taken[i])
            out[m++] = all[i];
    return m;
}

// ---- entry points ----

static int emit_kernel(const Lin *L, const KernelConfig *cfg, const CudaHw *hw,
                       const TargetOptions *opt, const char *fn, StrBuf *src, CudaLaunch *launch,
                       Err *e) {
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Emit E = {.L = L, .cfg = cfg, .fn = fn, .s = &body, .load = culin_half(L) ? half_load : NULL};
    E.x = cexpr_create(L->pg, L->c, fn, &decls);
    cugen_cexpr_dialect(E.x, cugen_fast_math(opt));
    cexpr_set_reader(E.x, culin_reader, &E);
    CudaLaunch ln;
    memset(&ln, 0, sizeof ln);
    int rc;
    CuLinearConfig lc;
    culin_config_unpack(cfg, &lc);
    switch (lc.var) {
    case CUV_SIMT: rc = culin_emit_simt(&E, &ln, e); break;
    case CUV_TF32: rc = culin_emit_tf32(&E, &ln, e); break;
    case CUV_F16:
    case CUV_BF16: rc = culin_emit_mma16(&E, &ln, e); break;
    case CUV_GEMV:
    case CUV_GEMVK: rc = culin_emit_gemv(&E, &ln, e); break;
    case CUV_DW: rc = culin_emit_dw(&E, &ln, e); break;
    case CUV_DIRECT: rc = culin_emit_direct(&E, &ln, e); break;
    case CUV_TCCONV: rc = culin_emit_tcconv(&E, &ln, e); break;
    default:
        rc = err_set(e, ST_INVALID, "CUDA linear kernel %s: unknown config '%s'", fn, cfg->desc);
    }
    (void)hw;
    cexpr_free(E.x);
    if (!rc) {
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s);
        if (launch)
            *launch = ln;
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

static void dry_cfg(const Lin *L, KernelConfig *k) {
    CuLinearConfig lc = {
        .conv = L->conv, .var = CUV_SIMT, .bm = 32, .bn = 32, .bk = 16, .tm = 4, .tn = 4};
    culin_config_pack(&lc, k);
    k->score = 0;
}

bool cugen_lin_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    Lin L;
    if (!culin_analyse(pg, c, &L))
        return false;
    // Dry run: cexpr decides whether every prologue and epilogue value can be emitted.
    KernelConfig k;
    dry_cfg(&L, &k);
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&L, &k, NULL, opt, "orch_dry", &s, NULL, &e);
    sb_free(&s);
    return rc == ST_OK;
}

int cugen_lin_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e) {
    Lin L;
    if (!culin_analyse(pg, c, &L))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA linear kernel %s: candidate %d is not generated here", fn, c->id);
    return emit_kernel(&L, cfg, hw, opt, fn, src, launch, e);
}
