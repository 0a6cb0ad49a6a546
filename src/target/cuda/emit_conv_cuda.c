// Convolution-specific kernel of the CUDA target's linear emitter (see cugen_lin_internal.h): the
// direct depthwise 2-D convolution (one input channel per group): a thread per output element,
// the KH x KW window unrolled with the filter taps read once each (registers), padding as zeros,
// the epilogue applied before the store; and the direct 2-D convolution to a few output channels
// (a network's last RGB layer: 32 -> 3 channels through a 9x9 window), where the implicit GEMM's
// tiles would be mostly padding and every gathered patch element would serve only M rows: a thread
// per output pixel computes all M channels of its group, each patch element gathered once and
// multiplied by M weights staged in shared memory (read as broadcasts). Other grouped and dense
// convolutions go through the implicit GEMM of emit_matmul_cuda.c, whose staging loop computes
// patch elements (lin_emit_b_value). Half tensors are read converted to float (culin_a_value,
// culin_patch_value), accumulated in float32 and stored rounded (culin_emit_store).
#define ORCH_CGEN_LINEAR_INTERNAL
#include "cugen_lin_internal.h"

#include <stdio.h>

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
    culin_kernel_head(E, 256);
    sb_line(s, 1, "const int64_t t = (int64_t)blockIdx.x * 256 + threadIdx.x;\n");
    sb_line(s, 1, "if (t >= %lld) return;\n", (long long)total);
    sb_line(s, 1, "const int64_t x_o1 = t %% %lld, x_o0 = (t / %lld) %% %lld;\n", OW, OW, OH);
    sb_line(s, 1, "const int64_t e_ocg = (t / %lld) %% %lld, q_n = t / %lld;\n", OH * OW,
            (long long)L->OC, OH * OW * (long long)L->OC);
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
    int rc = culin_a_value(E, 3, "dw_i", "dw_k", "wv", e);
    if (!rc)
        rc = culin_patch_value(E, 3, "xv", e);
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
    culin_emit_store(E, 1, "o[t]", v);
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
    int bs = (int)E->cfg->p[CUL_BN];
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
    sb_line(s, 1, "const int64_t q_g = (t / %lld) %% %lld, q_n = t / %lld;\n", P,
            (long long)L->G, P * (long long)L->G);
    int rc = ST_OK;
    if (L->G == 1) {
        // Stage the weights of the one group once per block.
        sb_line(s, 1, "for (int64_t r_ = threadIdx.x; r_ < %lld; r_ += %d) {\n", M * K, bs);
        sb_line(s, 2, "const int64_t dr_i = r_ / %lld, dr_k = r_ %% %lld;\n", K, K);
        sb_line(s, 2, "const int64_t q_g = 0;\n");
        sb_line(s, 2, "float wv;\n");
        rc = culin_a_value(E, 2, "dr_i", "dr_k", "wv", e);
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
    rc = culin_patch_value(E, 4, "xv", e);
    if (rc)
        return rc;
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int i = 0; i < %lld; i++) {\n", M);
    if (L->G == 1) {
        sb_line(s, 5, "acc[i] = fmaf(wr_[i * %lld + dk], xv, acc[i]);\n", K);
    } else {
        sb_line(s, 5, "const int64_t dr_i = i;\n");
        sb_line(s, 5, "float wv;\n");
        rc = culin_a_value(E, 5, "dr_i", "dk", "wv", e);
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
