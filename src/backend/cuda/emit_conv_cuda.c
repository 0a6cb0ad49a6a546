// Convolution-specific kernel of the CUDA target's linear emitter (see cugen_lin_internal.h): the
// direct depthwise 2-D convolution (one input channel per group): a thread per output element
// (channels fastest where X is channels-last, else pixels),
// the KH x KW window unrolled with the filter taps read once each (registers), padding as zeros,
// the epilogue applied before the store; and the direct 2-D convolution to a few output channels
// (a network's last RGB layer: 32 -> 3 channels through a 9x9 window), where the implicit GEMM's
// tiles would be mostly padding and every gathered patch element would serve only M rows: a thread
// per output pixel computes all M channels of its group, each patch element gathered once and
// multiplied by M weights staged in shared memory (read as broadcasts); and, on half tensors, the
// direct convolution on the tensor cores (v=f16dc / v=bf16dc, cugen_lin_internal.h): a block
// stages its input tile (channels innermost) and the weights in shared memory and multiplies
// 16-pixel rows of the tile, one tap and 16 channels at a time, as the mma's A operand (few
// input channels: 16 / C adjacent taps a k step), with no im2col and no M padding for a
// network's 3-channel RGB layers (the style transfer's 9x9 32 -> 3 convolution: 49.6 us in
// cuDNN, 18.4 us here on an H100). Other grouped and dense
// convolutions go through the implicit GEMM of emit_matmul_cuda.c, whose staging loop computes
// patch elements (lin_emit_b_value). Half tensors are read converted to float (culin_a_value,
// culin_patch_value), accumulated in float32 and stored rounded (culin_emit_store).
#include "cugen_lin_internal.h"

#include "affine_load.h"

#include <stdio.h>
#include <string.h>

int culin_emit_dw(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (!L->dw_ok)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    long long OH = L->out[0], OW = L->out[1], KH = L->k[0], KW = L->k[1];
    int64_t total = L->NI * L->OC * OH * OW;
    if ((total + 255) / 256 > 0x7fffffff)
        return err_set(e, ST_UNSUPPORTED, "CUDA linear kernel %s: output too large", E->fn);
    // Threads walk the channels fastest where X's channels are unit-stride (an NHWC input under
    // a transpose): a warp's window reads are then coalesced, and its stores scatter instead.
    CuAffine xa;
    cu_affine_of(L->pg, L->c, L->ta, &xa);
    bool cfast = xa.affine && xa.stride[1] == 1 && L->C > 1;
    culin_kernel_head(E, 256);
    sb_line(s, 1, "const int64_t t = (int64_t)blockIdx.x * 256 + threadIdx.x;\n");
    sb_line(s, 1, "if (t >= %lld) return;\n", (long long)total);
    if (cfast) {
        sb_line(s, 1, "const int64_t e_ocg = t %% %lld, x_o1 = (t / %lld) %% %lld;\n",
                (long long)L->OC, (long long)L->OC, OW);
        sb_line(s, 1, "const int64_t x_o0 = (t / %lld) %% %lld, q_n = t / %lld;\n",
                (long long)L->OC * OW, OH, OH * OW * (long long)L->OC);
    } else {
        sb_line(s, 1, "const int64_t x_o1 = t %% %lld, x_o0 = (t / %lld) %% %lld;\n", OW, OW, OH);
        sb_line(s, 1, "const int64_t e_ocg = (t / %lld) %% %lld, q_n = t / %lld;\n", OH * OW,
                (long long)L->OC, OH * OW * (long long)L->OC);
    }
    sb_line(s, 1, "const int64_t q_g = e_ocg / %lld, dw_i = e_ocg %% %lld;\n", (long long)L->OCg,
            (long long)L->OCg);
    sb_line(s, 1, "const int64_t x_c = q_g;\n");
    sb_line(s, 1, "float acc = 0.0f;\n");
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int kh = 0; kh < %lld; kh++) {\n", KH);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int kw = 0; kw < %lld; kw++) {\n", KW);
    sb_line(s, 3, "const int64_t x_k0 = kh, x_k1 = kw, dw_k = kh * %lld + kw;\n", KW);
    sb_line(s, 3, "float wv, xv;\n");
    int rc = lin_emit_a_value(E, 3, "dw_i", "dw_k", "wv", e);
    if (!rc)
        rc = lin_emit_patch_value(E, 3, "xv", e);
    if (rc)
        return rc;
    sb_line(s, 3, "acc = fmaf(wv, xv, acc);\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    // GEMM coordinates of the output element: row dw_i of group q_g, column the pixel.
    sb_line(s, 1, "const int64_t e_pix = x_o0 * %lld + x_o1;\n", OW);
    char v[64];
    rc = culin_emit_epi_value(E, 1, "acc", "dw_i", "e_pix", v, sizeof v, e);
    if (rc)
        return rc;
    char lhs[160] = "o[t]";
    if (cfast)
        snprintf(lhs, sizeof lhs, "o[((q_n * %lld + e_ocg) * %lld + x_o0) * %lld + x_o1]",
                 (long long)L->OC, OH, OW);
    culin_emit_store(E, 1, lhs, v);
    sb_puts(s, "}\n\n");
    ln->grid[0] = (unsigned)((total + 255) / 256);
    ln->grid[1] = ln->grid[2] = 1;
    ln->block[0] = 256;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = 0;
    return ST_OK;
}

bool culin_direct_ok(const Lin *L) {
    return L->conv && !L->convt && L->S == 2 && !L->dw_ok && L->OCg <= CULIN_DIRECT_MAX_M &&
           L->OCg * L->K <= CULIN_DIRECT_MAX_W;
}

int culin_emit_direct(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CuLinearConfig lc;
    culin_config_unpack(E->cfg, &lc);
    int bs = (int)lc.bn;
    if (!culin_direct_ok(L) || bs < 32 || bs > 1024 || bs % 32)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    long long OH = L->out[0], OW = L->out[1], KH = L->k[0], KW = L->k[1];
    long long M = L->OCg, K = L->K, Cg = L->Cg, P = OH * OW;
    int64_t total = L->NI * L->G * P;
    if ((total + bs - 1) / bs > 0x7fffffff)
        return err_set(e, ST_UNSUPPORTED, "CUDA linear kernel %s: output too large", E->fn);
    culin_kernel_head(E, bs);
    sb_line(s, 1, "__shared__ float ws_[%lld];\n", M * K);
    sb_line(s, 1, "const int64_t t = (int64_t)blockIdx.x * %d + threadIdx.x;\n", bs);
    // The block's group (blocks never straddle two groups' weights: a block's pixels may span
    // groups only when P is not a multiple of the block, so the weights are per thread's group).
    sb_line(s, 1, "const int64_t x_o1 = t %% %lld, x_o0 = (t / %lld) %% %lld;\n", OW, OW, OH);
    sb_line(s, 1, "const int64_t q_g = (t / %lld) %% %lld, q_n = t / %lld;\n", P, (long long)L->G,
            P * (long long)L->G);
    int rc = ST_OK;
    if (L->G == 1) {
        // Stage the weights of the one group once per block.
        sb_line(s, 1, "for (int64_t r_ = threadIdx.x; r_ < %lld; r_ += %d) {\n", M * K, bs);
        sb_line(s, 2, "const int64_t dr_i = r_ / %lld, dr_k = r_ %% %lld;\n", K, K);
        sb_line(s, 2, "const int64_t q_g = 0;\n");
        sb_line(s, 2, "float wv;\n");
        rc = lin_emit_a_value(E, 2, "dr_i", "dr_k", "wv", e);
        if (rc)
            return rc;
        sb_line(s, 2, "ws_[r_] = wv;\n");
        sb_line(s, 1, "}\n");
        sb_line(s, 1, "__syncthreads();\n");
        sb_line(s, 1, "if (t >= %lld) return;\n", (long long)total);
        sb_line(s, 1, "const float *wr_ = ws_;\n");
    } else {
        // Several groups: each thread reads its group's weights (the staged copy is unused).
        sb_line(s, 1, "(void)ws_;\n");
        sb_line(s, 1, "if (t >= %lld) return;\n", (long long)total);
    }
    sb_line(s, 1, "float acc[%lld];\n", M);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) acc[i] = 0.0f;\n", M);
    sb_line(s, 1, "for (int c = 0; c < %lld; c++) {\n", Cg);
    sb_line(s, 2, "const int64_t x_c = q_g * %lld + c;\n", Cg);
    sb_line(s, 2, "for (int kh = 0; kh < %lld; kh++) {\n", KH);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int kw = 0; kw < %lld; kw++) {\n", KW);
    sb_line(s, 4, "const int64_t x_k0 = kh, x_k1 = kw;\n");
    sb_line(s, 4, "const int64_t dk = (c * %lld + kh) * %lld + kw;\n", KH, KW);
    sb_line(s, 4, "float xv;\n");
    rc = lin_emit_patch_value(E, 4, "xv", e);
    if (rc)
        return rc;
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int i = 0; i < %lld; i++) {\n", M);
    if (L->G == 1) {
        sb_line(s, 5, "acc[i] = fmaf(wr_[i * %lld + dk], xv, acc[i]);\n", K);
    } else {
        sb_line(s, 5, "const int64_t dr_i = i;\n");
        sb_line(s, 5, "float wv;\n");
        rc = lin_emit_a_value(E, 5, "dr_i", "dk", "wv", e);
        if (rc)
            return rc;
        sb_line(s, 5, "acc[i] = fmaf(wv, xv, acc[i]);\n");
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    // GEMM coordinates: row i of group q_g, column the pixel; out + ((n*G + g)*M + i)*P + pix.
    sb_line(s, 1, "const int64_t e_pix = x_o0 * %lld + x_o1;\n", OW);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", M);
    sb_line(s, 2, "const int64_t dr_i = i;\n");
    sb_line(s, 2, "const float acc_v = acc[i];\n");
    char v[64];
    rc = culin_emit_epi_value(E, 2, "acc_v", "dr_i", "e_pix", v, sizeof v, e);
    if (rc)
        return rc;
    char lhs[128];
    snprintf(lhs, sizeof lhs, "o[((q_n * %lld + q_g) * %lld + i) * %lld + e_pix]", (long long)L->G,
             M, P);
    culin_emit_store(E, 2, lhs, v);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    ln->grid[0] = (unsigned)((total + bs - 1) / bs);
    ln->grid[1] = ln->grid[2] = 1;
    ln->block[0] = (unsigned)bs;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = 0;
    return ST_OK;
}

// ---- the tensor-core direct convolution (v=f16dc / v=bf16dc) ----

bool culin_tcconv_ok(const Lin *L, CuTcConv *t) {
    memset(t, 0, sizeof *t);
    if (!L->conv || L->convt || L->S != 2 || L->G != 1 || !culin_half(L) ||
        L->OC > CULIN_TCCONV_MAX_OC)
        return false;
    for (int d = 0; d < 2; d++)
        if (L->dil[d] != 1 || L->st[d] < 1 || L->st[d] > 2 || L->k[d] > 11)
            return false;
    cu_affine_of(L->pg, L->c, L->ta, &t->x);
    cu_affine_of(L->pg, L->c, L->tb, &t->w);
    // Up to 8 channels: a 16-deep k step spans 16 / Cp horizontally adjacent taps (contiguous in
    // the tile); more: Cp channels of one tap, in steps of 16.
    t->packed = L->C <= 8;
    t->Cp = L->C <= 4 ? 4 : L->C <= 8 ? 8 : (L->C + 15) / 16 * 16;
    t->TPS = t->packed ? 16 / t->Cp : 1;
    t->SPK = t->packed ? (L->k[1] + t->TPS - 1) / t->TPS : L->k[1];
    t->NT = (L->OC + 7) / 8;
    // 16-byte copies of 8 channels: channels unit-stride, every other stride and the base
    // multiples of 8 elements (an NHWC tensor, or a KRSC weight).
    const CuAffine *a[2] = {&t->x, &t->w};
    bool *ok[2] = {&t->x16, &t->w16};
    for (int i = 0; i < 2; i++) {
        *ok[i] = !t->packed && a[i]->affine && L->C % 8 == 0 && a[i]->stride[1] == 1 &&
                 a[i]->base % 8 == 0;
        for (int d = 0; d < 4 && *ok[i]; d++)
            *ok[i] = d == 1 || a[i]->stride[d] % 8 == 0;
    }
    // Otherwise, where W is a whole kernel input read in some axis order (KCRS, or KRSC under
    // a transpose), a plain copy of it: the B fragments then gather their k pairs by W's
    // strides, with no per-element index arithmetic in the staging.
    if (!t->w16 && t->w.affine && t->w.base == 0) {
        const Tensor *src = L->pg->tensors[L->c->inputs[t->w.pos]];
        t->wraw = tensor_numel(src) == L->OC * L->C * L->k[0] * L->k[1];
    }
    return true;
}

bool culin_tcconv_geo(const Lin *L, const CuTcConv *t, const CuLinearConfig *P, CuTcGeo *g) {
    memset(g, 0, sizeof *g);
    int64_t BH = P->bm, BW = P->bn, MT = P->tm;
    if (BH < 1 || BW < 16 || BW % 16 || MT < 1 || (BH * BW / 16) % MT)
        return false;
    int64_t warps = BH * BW / 16 / MT;
    if (warps < 1 || warps > 16)
        return false;
    g->TH = (BH - 1) * L->st[0] + L->k[0];
    // Packed steps read up to SPK * TPS taps: zero columns past the window.
    g->TW = (BW - 1) * L->st[1] + t->SPK * t->TPS;
    // Unpacked, channel stride Cp + 8: the 8 rows of an ldmatrix 8x8 matrix (2 Cp + 16 bytes
    // apart, an odd multiple of 16 mod 128) fall in distinct bank quads. Packed, the 32-bit
    // fragment reads of 8 pixels x 4 lanes span 8 Cp + 16 bytes: no padding needed. Weight rows
    // 8 (mod 64) halves apart: the B fragments' 32-bit reads of 8 rows x 4 lanes hit 32 banks.
    g->CpS = t->packed ? t->Cp : t->Cp + 8;
    g->KS = t->packed ? L->k[0] * t->SPK * 16 : L->k[0] * L->k[1] * t->Cp;
    g->WS = (g->KS + 63) / 64 * 64 + 8;
    g->wsm = t->wraw ? (L->OC * L->C * L->k[0] * L->k[1] + 7) / 8 * 8 : L->OC * g->WS;
    g->smem = (g->TH * g->TW * g->CpS + g->wsm) * 2;
    g->threads = (int)(warps * 32);
    return true;
}

// The k index kk of a weight row (statements declaring int kh, kw, c; kw may pass KW and c
// pass C in the padding, whose weights are zero).
static void tcconv_k_coords(StrBuf *s, int ind, const Lin *L, const CuTcConv *t, const char *kk) {
    long long KW = L->k[1], Cp = t->Cp;
    if (t->packed)
        sb_line(s, ind,
                "const int kh = %s / %lld, kw = ((%s / 16) %% %lld) * %lld + (%s %% 16) / %lld, "
                "c = %s %% %lld;\n",
                kk, (long long)t->SPK * 16, kk, (long long)t->SPK, (long long)t->TPS, kk, Cp, kk,
                Cp);
    else
        sb_line(s, ind,
                "const int kh = (%s / %lld) / %lld, kw = (%s / %lld) %% %lld, c = %s %% %lld;\n",
                kk, Cp, KW, kk, Cp, KW, kk, Cp);
}

// Whether the kernel input X is computed from (through the candidate's primitives, first
// operands back) is channels-last: rank 4 with C last and not second. X read through cexpr (a
// pad's table, a resize, a prologue) is staged along the source's unit-stride axis: along the
// channels of an NCHW source, a warp's 2-byte loads were 32 sectors each (the style transfer's
// reflect pad fused into its 9x9 convolution: 52.8 us, against 18.5 us with the pad apart).
static bool channels_last_source(const Lin *L) {
    int t = L->ta;
    for (int guard = 0; guard < L->c->n_prims && cgen_input_pos(L->c, t) < 0; guard++) {
        const Prim *p = NULL;
        for (int i = 0; i < L->c->n_prims && !p; i++) {
            const Prim *q = L->pg->prims[L->c->prims[i]];
            if (q->n_out == 1 && q->out[0] == t)
                p = q;
        }
        if (!p || p->n_in < 1)
            return false;
        t = p->in[0];
    }
    const Tensor *T = L->pg->tensors[t];
    return T->rank == 4 && T->dims[3] == L->C && T->dims[1] != L->C;
}

// Element copies into shared memory, STAGE_BATCH per thread in flight: the body (between open
// and close) reads element e_ (when below `units`) into h_ and names its destination; all the
// batch's loads issue before any store, so a thread waits on one round trip to L2 per batch,
// not one per element (a 9x9 3 -> 32 convolution's weights took 37 us copied one at a time).
#define STAGE_BATCH 8
static void stage_batch_open(StrBuf *s, long long units, int nt) {
    sb_line(s, 1, "for (int e0_ = tid; e0_ < %lld; e0_ += %d) {\n", units, nt * STAGE_BATCH);
    sb_line(s, 1, "uint16_t hb_[%d];\n", STAGE_BATCH);
    sb_line(s, 1, "int db_[%d];\n", STAGE_BATCH);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int u_ = 0; u_ < %d; u_++) {\n", STAGE_BATCH);
    sb_line(s, 2, "const int e_ = e0_ + u_ * %d;\n", nt);
    sb_line(s, 2, "db_[u_] = -1;\n");
    sb_line(s, 2, "if (e_ < %lld) {\n", units);
}

static void stage_batch_close(StrBuf *s, const char *dst) {
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int u_ = 0; u_ < %d; u_++)\n", STAGE_BATCH);
    sb_line(s, 2, "if (db_[u_] >= 0) %s[db_[u_]] = hb_[u_];\n", dst);
    sb_line(s, 1, "}\n");
}

// Stages the input tile Xs[TH][TW][CpS] at (iy0, ix0) of image q_n (zeros over the padding and
// past C); tcconv_stage_w the weights Ws[OC][WS] (k as tcconv_k_coords maps it; zeros past C and,
// packed, past KW), once per block.
static int tcconv_stage_x(Emit *E, const CuTcConv *t, const CuTcGeo *g, int nt, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    long long C = L->C, Cp = t->Cp, TH = g->TH, TW = g->TW;
    long long H = L->in[0], W = L->in[1];
    const CuAffine *x = &t->x;
    int rc = ST_OK;
    if (t->x16) {
        long long cpp = Cp / 8, units = TH * TW * cpp;
        sb_line(s, 1, "for (int e_ = tid; e_ < %lld; e_ += %d) {\n", units, nt);
        sb_line(s, 2, "const int ch = e_ %% %lld, pix = e_ / %lld;\n", cpp, cpp);
        sb_line(s, 2, "const int iy = iy0 + pix / %lld, ix = ix0 + pix %% %lld;\n", TW, TW);
        sb_line(s, 2,
                "const bool ok_ = (unsigned)iy < %lluu && (unsigned)ix < %lluu && ch * 8 < %lld;\n",
                (unsigned long long)H, (unsigned long long)W, C);
        sb_line(s, 2,
                "orch_lin_cp16(&Xs[pix * %lld + ch * 8], in%d + (ok_ ? %lld + q_n * %lld + "
                "(int64_t)iy * %lld + (int64_t)ix * %lld + ch * 8 : 0), ok_);\n",
                (long long)g->CpS, x->pos, (long long)x->base, (long long)x->stride[0],
                (long long)x->stride[2], (long long)x->stride[3]);
        sb_line(s, 1, "}\n");
    } else {
        // Element copies: along x where X is x-unit-stride (NCHW: coalesced reads), else along
        // the channels.
        bool xmajor = x->affine ? x->stride[3] == 1 : !channels_last_source(L);
        long long units = TH * TW * Cp;
        stage_batch_open(s, units, nt);
        if (xmajor) {
            sb_line(s, 2, "const int qx = e_ %% %lld, ry = (e_ / %lld) %% %lld, c = e_ / %lld;\n",
                    TW, TW, TH, TW * TH);
            sb_line(s, 2, "const int pix = ry * %lld + qx;\n", TW);
        } else {
            sb_line(s, 2, "const int c = e_ %% %lld, pix = e_ / %lld;\n", Cp, Cp);
            sb_line(s, 2, "const int ry = pix / %lld, qx = pix %% %lld;\n", TW, TW);
        }
        sb_line(s, 2, "const int iy = iy0 + ry, ix = ix0 + qx;\n");
        sb_line(s, 2, "uint16_t h_ = 0;\n");
        sb_line(s, 2, "if ((unsigned)iy < %lluu && (unsigned)ix < %lluu && c < %lld) {\n",
                (unsigned long long)H, (unsigned long long)W, C);
        if (x->affine) {
            sb_line(s, 3,
                    "h_ = in%d[%lld + q_n * %lld + (int64_t)c * %lld + (int64_t)iy * %lld + "
                    "(int64_t)ix * %lld];\n",
                    x->pos, (long long)x->base, (long long)x->stride[0], (long long)x->stride[1],
                    (long long)x->stride[2], (long long)x->stride[3]);
        } else {
            // A prologue or a gather (a pad's table): the value through cexpr, of the operand's
            // half type (exact in float, so is the rounding).
            sb_line(s, 3, "const int64_t x_c = c, x_iy = iy, x_ix = ix;\n");
            const char *ix[4] = {"q_n", "x_c", "x_iy", "x_ix"};
            char v[64];
            rc = cexpr_value(E->x, L->ta, ix, s, 3, v, sizeof v, e);
            cexpr_forget(E->x);
            if (rc)
                return rc;
            sb_line(s, 3, "h_ = %s((float)(%s));\n", culin_f2h_fn(L), v);
        }
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "hb_[u_] = h_;\n");
        sb_line(s, 2, "db_[u_] = pix * %lld + c;\n", (long long)g->CpS);
        stage_batch_close(s, "Xs");
    }
    return ST_OK;
}

static int tcconv_stage_w(Emit *E, const CuTcConv *t, const CuTcGeo *g, int nt, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    long long C = L->C, Cp = t->Cp, KW = L->k[1];
    const CuAffine *w = &t->w;
    int rc = ST_OK;
    if (t->wraw) {
        long long n = L->OC * C * L->k[0] * KW;
        if (n % 8 == 0) {
            sb_line(s, 1, "for (int e_ = tid; e_ < %lld; e_ += %d)\n", n / 8, nt);
            sb_line(s, 2, "orch_lin_cp16(&Ws[e_ * 8], in%d + e_ * 8, true);\n", w->pos);
        } else {
            stage_batch_open(s, n, nt);
            sb_line(s, 3, "const uint16_t h_ = in%d[e_];\n", w->pos);
            sb_line(s, 2, "hb_[u_] = h_;\n");
            sb_line(s, 2, "db_[u_] = e_;\n");
            stage_batch_close(s, "Ws");
        }
        return ST_OK;
    }
    if (t->w16) {
        long long cpp = Cp / 8, units = L->OC * L->k[0] * KW * cpp;
        sb_line(s, 1, "for (int e_ = tid; e_ < %lld; e_ += %d) {\n", units, nt);
        sb_line(s, 2, "const int ch = e_ %% %lld, tap = (e_ / %lld) %% %lld, oc = e_ / %lld;\n",
                cpp, cpp, (long long)(L->k[0] * KW), cpp * L->k[0] * KW);
        sb_line(s, 2, "const bool ok_ = ch * 8 < %lld;\n", C);
        sb_line(s, 2,
                "orch_lin_cp16(&Ws[oc * %lld + tap * %lld + ch * 8], in%d + (ok_ ? %lld + "
                "(int64_t)oc * %lld + (int64_t)(tap / %lld) * %lld + (int64_t)(tap %% %lld) * %lld "
                "+ ch * 8 : 0), ok_);\n",
                (long long)g->WS, Cp, w->pos, (long long)w->base, (long long)w->stride[0], KW,
                (long long)w->stride[2], KW, (long long)w->stride[3]);
        sb_line(s, 1, "}\n");
    } else {
        long long units = L->OC * g->KS;
        stage_batch_open(s, units, nt);
        sb_line(s, 2, "const int kk = e_ %% %lld, oc = e_ / %lld;\n", (long long)g->KS,
                (long long)g->KS);
        tcconv_k_coords(s, 2, L, t, "kk");
        sb_line(s, 2, "uint16_t h_ = 0;\n");
        sb_line(s, 2, "if (kw < %lld && c < %lld) {\n", KW, C);
        if (w->affine) {
            sb_line(
                s, 3,
                "h_ = in%d[%lld + (int64_t)oc * %lld + (int64_t)c * %lld + (int64_t)kh * %lld + "
                "(int64_t)kw * %lld];\n",
                w->pos, (long long)w->base, (long long)w->stride[0], (long long)w->stride[1],
                (long long)w->stride[2], (long long)w->stride[3]);
        } else {
            sb_line(s, 3, "const int64_t w_i = oc, w_k = ((int64_t)c * %lld + kh) * %lld + kw;\n",
                    (long long)L->k[0], KW);
            sb_line(s, 3, "float v_;\n");
            rc = lin_emit_a_value(E, 3, "w_i", "w_k", "v_", e);
            cexpr_forget(E->x);
            if (rc)
                return rc;
            sb_line(s, 3, "h_ = %s(v_);\n", culin_f2h_fn(L));
        }
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "hb_[u_] = h_;\n");
        sb_line(s, 2, "db_[u_] = oc * %lld + kk;\n", (long long)g->WS);
        stage_batch_close(s, "Ws");
    }
    return ST_OK;
}

// The A fragment of warp tile j at k step (kh, step) into af[4]: ldmatrix.x4 of 16 pixel rows
// of 16 channels (unpacked), or four 32-bit reads (packed: rows g and g + 8, k pairs 2t and
// 2t + 8 at 4-byte but not 16-byte aligned addresses).
static void tcconv_mma_steps(StrBuf *s, const Lin *L, const CuTcConv *t, const CuTcGeo *g,
                             long long MT, const char *ty) {
    long long NT = t->NT, OC = L->OC, Cp = t->Cp, CpS = g->CpS, TW = g->TW, KW = L->k[1];
    long long sw = L->st[1];
    sb_line(s, 1, "for (int kh = 0; kh < %lld; kh++) {\n", (long long)L->k[0]);
    sb_line(s, 2, "#pragma unroll\n");
    if (t->packed) {
        sb_line(s, 2, "for (int st = 0; st < %lld; st++) {\n", (long long)t->SPK);
        sb_line(s, 3,
                "const int toff = (kh * %lld + st * %lld) * %lld, woff = (kh * %lld + st) * 16;\n",
                TW, (long long)t->TPS, CpS, (long long)t->SPK);
        sb_line(s, 3, "{\n");
        sb_line(s, 3, "const int cs = 0;\n");
    } else {
        sb_line(s, 2, "for (int kw = 0; kw < %lld; kw++) {\n", KW);
        sb_line(s, 3, "const int toff = (kh * %lld + kw) * %lld, woff = (kh * %lld + kw) * %lld;\n",
                TW, CpS, KW, Cp);
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int cs = 0; cs < %lld; cs += 16) {\n", Cp);
    }
    sb_line(s, 4, "uint32_t bfr[%lld][2];\n", NT);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int y = 0; y < %lld; y++) {\n", NT);
    if (t->wraw) {
        // W as stored: element q of the lane's four (k = kq[q]) at wq[y][q] plus the step's
        // offset; zero past C, OC (wq < 0) and, packed, past KW.
        const CuAffine *w = &t->w;
        sb_line(s, 5, "uint32_t h_[4];\n");
        sb_line(s, 5, "#pragma unroll\n");
        sb_line(s, 5, "for (int q = 0; q < 4; q++) {\n");
        if (t->packed) {
            sb_line(s, 6, "const int kw_ = st * %lld + kq[q] / %lld;\n", (long long)t->TPS, Cp);
            sb_line(s, 6,
                    "h_[q] = wq[y][q] >= 0 && kw_ < %lld ? Ws[wq[y][q] + kh * %lld + st * %lld] : "
                    "0u;\n",
                    KW, (long long)w->stride[2], (long long)(t->TPS * w->stride[3]));
        } else {
            sb_line(s, 6,
                    "h_[q] = wq[y][q] >= 0 && cs + kq[q] < %lld ? Ws[wq[y][q] + cs * %lld + kh * "
                    "%lld + kw * %lld] : 0u;\n",
                    (long long)L->C, (long long)w->stride[1], (long long)w->stride[2],
                    (long long)w->stride[3]);
        }
        sb_line(s, 5, "}\n");
        sb_line(s, 5, "bfr[y][0] = h_[0] | h_[1] << 16;\n");
        sb_line(s, 5, "bfr[y][1] = h_[2] | h_[3] << 16;\n");
    } else {
        sb_line(s, 5, "const bool live = y * 8 + g8 < %lld;\n", OC);
        sb_line(s, 5, "bfr[y][0] = live ? *(const uint32_t *)(Ws + wrow[y] + woff + cs) : 0u;\n");
        sb_line(s, 5,
                "bfr[y][1] = live ? *(const uint32_t *)(Ws + wrow[y] + woff + cs + 8) : 0u;\n");
    }
    sb_line(s, 4, "}\n");
    // Every A fragment of the step before the products: the MT shared-memory round trips
    // overlap (the products' asm is not volatile, so the compiler may also hoist the next
    // step's loads above them).
    sb_line(s, 4, "uint32_t af[%lld][4];\n", MT);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int j = 0; j < %lld; j++) {\n", MT);
    if (t->packed) {
        sb_line(s, 5, "const uint16_t *a_ = Xs + abase[j] + toff;\n");
        sb_line(s, 5, "af[j][0] = *(const uint32_t *)a_;\n");
        sb_line(s, 5, "af[j][1] = *(const uint32_t *)(a_ + %lld);\n", 8 * sw * CpS);
        sb_line(s, 5, "af[j][2] = *(const uint32_t *)(a_ + 8);\n");
        sb_line(s, 5, "af[j][3] = *(const uint32_t *)(a_ + %lld);\n", 8 * sw * CpS + 8);
    } else {
        sb_line(s, 5, "orch_lin_ldm4(af[j], Xs + abase[j] + toff + cs);\n");
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int j = 0; j < %lld; j++)\n", MT);
    sb_line(s, 5, "#pragma unroll\n");
    sb_line(s, 5, "for (int y = 0; y < %lld; y++)\n", NT);
    sb_line(s, 6,
            "asm(\"mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 "
            "{%%0, %%1, %%2, %%3}, {%%4, %%5, %%6, %%7}, {%%8, %%9}, {%%0, %%1, %%2, %%3};\"\n",
            ty, ty);
    sb_line(s, 7,
            ": \"+f\"(acc[j][y][0]), \"+f\"(acc[j][y][1]), \"+f\"(acc[j][y][2]), "
            "\"+f\"(acc[j][y][3])\n");
    sb_line(
        s, 7,
        ": \"r\"(af[j][0]), \"r\"(af[j][1]), \"r\"(af[j][2]), \"r\"(af[j][3]), \"r\"(bfr[y][0]), "
        "\"r\"(bfr[y][1]));\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
}

int culin_emit_tcconv(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CuLinearConfig P;
    culin_config_unpack(E->cfg, &P);
    CuTcConv t;
    CuTcGeo g;
    bool bf = culin_dtype(L) == DT_BFLOAT16;
    if (!culin_tcconv_ok(L, &t) || !culin_tcconv_geo(L, &t, &P, &g) || P.var != CUV_TCCONV)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int nt = g.threads;
    long long BH = P.bm, BW = P.bn, MT = P.tm, NT = t.NT;
    long long sh = L->st[0], sw = L->st[1], TW = g.TW, CpS = g.CpS;
    long long OC = L->OC, OH = L->out[0], OW = L->out[1], P_ = OH * OW;
    if (g.TH * g.TW * g.CpS + L->NI * L->C * L->ipix >= ((int64_t)1 << 31) ||
        L->NI * ((OW + BW - 1) / BW) * ((OH + BH - 1) / BH) >= ((int64_t)1 << 31) ||
        tensor_numel(lin_t(L, L->sink)) >= ((int64_t)1 << 31))
        return err_set(e, ST_UNSUPPORTED, "CUDA linear kernel %s: tensors too large", E->fn);
    const char *ty = bf ? "bf16" : "f16";
    sb_puts(s, culin_half_mma_helpers());
    culin_kernel_head(E, nt);
    sb_line(s, 1, "extern __shared__ __align__(16) uint16_t orch_tcc_sm[];\n");
    sb_line(s, 1, "uint16_t *const Xs = orch_tcc_sm, *const Ws = orch_tcc_sm + %lld;\n",
            (long long)(g.TH * g.TW * g.CpS));
    sb_line(s, 1, "const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n");
    sb_line(s, 1, "const int g8 = lane >> 2, t4 = lane & 3;\n");
    sb_line(s, 1, "const int64_t q_g = 0;\n");
    sb_line(s, 1, "(void)q_g;\n");
    int rc = tcconv_stage_w(E, &t, &g, nt, e);
    if (rc)
        return rc;
    // Tiles: x fastest, then y, then the image; a persistent block loops over them.
    long long TX = (OW + BW - 1) / BW, TY = (OH + BH - 1) / BH, T = TX * TY * L->NI;
    sb_line(s, 1, "for (int tile = blockIdx.x; tile < %lld; tile += gridDim.x) {\n", T);
    sb_line(s, 1, "const int oy0 = ((tile / %lld) %% %lld) * %lld, ox0 = (tile %% %lld) * %lld;\n",
            TX, TY, BH, TX, BW);
    sb_line(s, 1, "const int iy0 = oy0 * %lld - %lld, ix0 = ox0 * %lld - %lld;\n", sh,
            (long long)L->pad[0], sw, (long long)L->pad[1]);
    sb_line(s, 1, "const int64_t q_n = tile / %lld;\n", TX * TY);
    // The previous tile's reads of Xs are done before it is overwritten.
    sb_line(s, 1, "__syncthreads();\n");
    rc = tcconv_stage_x(E, &t, &g, nt, e);
    if (rc)
        return rc;
    sb_line(s, 1, "orch_lin_cp_wait();\n");
    sb_line(s, 1, "__syncthreads();\n");
    // Unpacked: lane l gives ldmatrix the row address of pixel (l & 15) of each of the warp's
    // 16-pixel tiles, channels (l >> 4) * 8 on. Packed: lane (g, t) reads pixel g (and g + 8),
    // k pair 2t (and 2t + 8).
    sb_line(s, 1, "int abase[%lld];\n", MT);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int j = 0; j < %lld; j++) {\n", MT);
    if (t.packed) {
        sb_line(s, 2, "const int p = (warp * %lld + j) * 16 + g8;\n", MT);
        sb_line(s, 2,
                "abase[j] = ((p / %lld) * %lld * %lld + (p %% %lld) * %lld) * %lld + 2 * t4;\n", BW,
                sh, TW, BW, sw, CpS);
    } else {
        sb_line(s, 2, "const int p = (warp * %lld + j) * 16 + (lane & 15);\n", MT);
        sb_line(s, 2,
                "abase[j] = ((p / %lld) * %lld * %lld + (p %% %lld) * %lld) * %lld + (lane >> 4) * "
                "8;\n",
                BW, sh, TW, BW, sw, CpS);
    }
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "float acc[%lld][%lld][4];\n", MT, NT);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int j = 0; j < %lld; j++)\n", MT);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int y = 0; y < %lld; y++)\n", NT);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int z = 0; z < 4; z++) acc[j][y][z] = 0.0f;\n");
    // B fragments: lane (g, t) reads output channel y * 8 + g, k pairs 2t and 2t + 8 of the step
    // (zero past OC).
    sb_line(s, 1, "int wrow[%lld];\n", NT);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int y = 0; y < %lld; y++)\n", NT);
    sb_line(s, 2, "wrow[y] = (y * 8 + g8 < %lld ? y * 8 + g8 : 0) * %lld + 2 * t4;\n", OC,
            (long long)g.WS);
    if (t.wraw) {
        // The lane's four k of a step (2t, 2t + 1, 2t + 8, 2t + 9) and their offsets in W
        // (packed: tap kq / Cp of the step, channel kq % Cp; -1 past OC or C).
        const CuAffine *w = &t.w;
        sb_line(s, 1, "int kq[4], wq[%lld][4];\n", NT);
        sb_line(s, 1, "#pragma unroll\n");
        sb_line(s, 1, "for (int q = 0; q < 4; q++) {\n");
        sb_line(s, 2, "kq[q] = 2 * t4 + (q & 1) + (q >> 1) * 8;\n");
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int y = 0; y < %lld; y++) {\n", NT);
        sb_line(s, 3, "const int oc_ = y * 8 + g8;\n");
        if (t.packed)
            sb_line(
                s, 3,
                "wq[y][q] = oc_ < %lld && kq[q] %% %lld < %lld ? oc_ * %lld + (kq[q] %% %lld) * "
                "%lld + (kq[q] / %lld) * %lld : -1;\n",
                OC, (long long)t.Cp, (long long)L->C, (long long)w->stride[0], (long long)t.Cp,
                (long long)w->stride[1], (long long)t.Cp, (long long)w->stride[3]);
        else
            sb_line(s, 3, "wq[y][q] = oc_ < %lld ? oc_ * %lld + kq[q] * %lld : -1;\n", OC,
                    (long long)w->stride[0], (long long)w->stride[1]);
        sb_line(s, 2, "}\n");
        sb_line(s, 1, "}\n");
    }
    tcconv_mma_steps(s, L, &t, &g, MT, ty);
    // Accumulator z of tile (j, y): pixel g (+ 8 for z >= 2) of the tile, channel y * 8 + 2t
    // (+ 1 for odd z).
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int j = 0; j < %lld; j++) {\n", MT);
    sb_line(s, 2, "const int p0 = (warp * %lld + j) * 16;\n", MT);
    sb_line(s, 2, "const int oy = oy0 + p0 / %lld;\n", BW);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int y = 0; y < %lld; y++)\n", NT);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int z = 0; z < 4; z++) {\n");
    sb_line(s, 4, "const int ox = ox0 + p0 %% %lld + g8 + (z >> 1) * 8;\n", BW);
    sb_line(s, 4, "const int64_t oc = y * 8 + 2 * t4 + (z & 1);\n");
    sb_line(s, 4, "if (oy < %lld && ox < %lld && oc < %lld) {\n", OH, OW, OC);
    sb_line(s, 5, "const int64_t e_pix = (int64_t)oy * %lld + ox;\n", OW);
    sb_line(s, 5, "const float acc_v = acc[j][y][z];\n");
    char v[64];
    rc = culin_emit_epi_value(E, 5, "acc_v", "oc", "e_pix", v, sizeof v, e);
    if (rc)
        return rc;
    char lhs[128];
    snprintf(lhs, sizeof lhs, "o[(q_n * %lld + oc) * %lld + e_pix]", OC, P_);
    culin_emit_store(E, 5, lhs, v);
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "}\n"); // tiles
    sb_puts(s, "}\n\n");
    ln->grid[0] = (unsigned)(P.bk > 0 && P.bk < T ? P.bk : T);
    ln->grid[1] = 1;
    ln->grid[2] = 1;
    ln->block[0] = (unsigned)nt;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = (unsigned)g.smem;
    return ST_OK;
}
