// Convolution-specific kernel of the CUDA target's linear emitter (see cugen_lin_internal.h): the
// direct depthwise 2-D convolution (one input channel per group): a thread per output element,
// the KH x KW window unrolled with the filter taps read once each (registers), padding as zeros,
// the epilogue applied before the store. Grouped and dense convolutions go through the implicit
// GEMM of emit_matmul_cuda.c, whose staging loop computes patch elements (lin_emit_b_value).
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
    sb_line(s, 1, "o[t] = %s;\n", v);
    sb_puts(s, "}\n\n");
    ln->grid[0] = (unsigned)((total + 255) / 256);
    ln->grid[1] = ln->grid[2] = 1;
    ln->block[0] = 256;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = 0;
    return ST_OK;
}
