// Convolution-specific parts of the C target's linear emitter (see cgen_linear.h): the patch
// packer of the implicit GEMM when X is a kernel input (strided row copies, padding as zeros), and
// the direct depthwise 2-D kernel.
// Needs: an analysed conv candidate (Emit). Guarantees: kernels follow the ABI of target.h.
#define ORCH_CGEN_LINEAR_INTERNAL
#include "cgen_linear.h"

#include <stdio.h>

// The fast patch packer for a conv whose X is a kernel input: each (channel, kernel offset) row
// of the panel is a run of output pixels; along the last spatial axis it is a strided copy of an
// input row with zeros where the window hangs over the padding (transposed: a copy of an input
// row into every stride-th column, zeros between). kc_max: the most rows a call packs.
void lin_emit_packb_conv(Emit *E, int nr, int64_t kc_max) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    int S = L->S, l = S - 1;
    long long kcmax = (long long)kc_max;
    sb_line(s, 1, "const float *restrict X = (const float *)in[%d];\n", L->pa);
    // Channel and kernel offsets of each panel row, decomposed once rather than per panel.
    sb_line(s, 1, "int64_t tc[%lld]", kcmax);
    for (int d = 0; d <= l; d++)
        sb_printf(s, ", tk%d[%lld]", d, kcmax);
    sb_puts(s, ";\n");
    sb_line(s, 1, "for (int64_t p = 0; p < kc; p++) {\n");
    sb_line(s, 2, "int64_t x_r = p0 + p;\n");
    for (int d = l; d >= 0; d--)
        sb_line(s, 2, "tk%d[p] = x_r %% %lld; x_r /= %lld;\n", d, (long long)L->k[d],
                (long long)L->k[d]);
    sb_line(s, 2, "tc[p] = (q_n * %lld + q_g * %lld + x_r) * %lld;\n", (long long)L->C,
            (long long)L->Cg, (long long)L->ipix);
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "for (int64_t s = 0; s < nc; s += %d) {\n", nr);
    sb_line(s, 2, "float *restrict d = Bp + s * kc;\n");
    sb_line(s, 2, "const int64_t w = nc - s < %d ? nc - s : %d;\n", nr, nr);
    sb_line(s, 2, "int64_t o_r = j0 + s;\n");
    for (int d = l; d >= 0; d--)
        sb_line(s, 2, "const int64_t o_s%d = o_r %% %lld; o_r /= %lld;\n", d, (long long)L->out[d],
                (long long)L->out[d]);
    sb_line(s, 2, "for (int64_t p = 0; p < kc; p++, d += %d) {\n", nr);
    for (int d = l; d >= 0; d--)
        sb_line(s, 3, "const int64_t x_k%d = tk%d[p];\n", d, d);
    sb_line(s, 3, "const float *restrict xc = X + tc[p];\n");
    for (int d = l; d >= 0; d--)
        sb_line(s, 3, "int64_t x_o%d = o_s%d;\n", d, d);
    sb_line(s, 3, "int64_t jj = 0;\n");
    sb_line(s, 3, "while (jj < w) {\n");
    sb_line(s, 4, "int64_t len = %lld - x_o%d; if (len > w - jj) len = w - jj;\n",
            (long long)L->out[l], l);
    sb_line(s, 4, "float *restrict dd = d + jj;\n");
    sb_line(s, 4, "const float *restrict xr = xc;\n");
    sb_line(s, 4, "int ok = 1;\n");
    int64_t rowlen = 1;
    for (int d = l - 1; d >= 0; d--) {
        rowlen *= L->in[d + 1];
        if (L->convt) {
            // Transposed: input row (o + pad - k*dil) / stride where the stride divides.
            sb_line(s, 4, "{ const int64_t xt = x_o%d + %lld - x_k%d * %lld;", d,
                    (long long)L->pad[d], d, (long long)L->dil[d]);
            sb_printf(s,
                      " if (xt < 0 || xt %% %lld || xt / %lld >= %lld) ok = 0; else xr += xt / "
                      "%lld * %lld; }\n",
                      (long long)L->st[d], (long long)L->st[d], (long long)L->in[d],
                      (long long)L->st[d], (long long)rowlen);
            continue;
        }
        sb_line(s, 4, "{ const int64_t xi = x_o%d * %lld - %lld + x_k%d * %lld;", d,
                (long long)L->st[d], (long long)L->pad[d], d, (long long)L->dil[d]);
        sb_printf(s, " if ((uint64_t)xi >= %lluu) ok = 0; else xr += xi * %lld; }\n",
                  (unsigned long long)L->in[d], (long long)rowlen);
    }
    sb_line(s, 4, "if (!ok) {\n");
    sb_line(s, 5, "for (int64_t t = 0; t < len; t++) dd[t] = 0.0f;\n");
    sb_line(s, 4, "} else {\n");
    if (L->convt) {
        // Transposed: column t reads input (xb + t) / stride where xb + t >= 0 is a multiple of
        // the stride below in*stride: every stride-th column from the first such t.
        long long st = L->st[l];
        sb_line(s, 5, "const int64_t xb = x_o%d + %lld - x_k%d * %lld;\n", l, (long long)L->pad[l],
                l, (long long)L->dil[l]);
        sb_line(s, 5, "for (int64_t t = 0; t < len; t++) dd[t] = 0.0f;\n");
        sb_line(s, 5, "int64_t t = xb < 0 ? -xb : 0;\n");
        sb_line(s, 5, "{ const int64_t r = (xb + t) %% %lld; if (r) t += %lld - r; }\n", st, st);
        sb_line(s, 5, "int64_t hi = %lld - xb; if (hi > len) hi = len;\n",
                (long long)((L->in[l] - 1) * st + 1));
        sb_line(s, 5, "for (; t < hi; t += %lld) dd[t] = xr[(xb + t) / %lld];\n", st, st);
    } else {
        // x = xb + t*st along the last axis; the valid t are [lo, hi).
        sb_line(s, 5, "const int64_t xb = x_o%d * %lld - %lld + x_k%d * %lld;\n", l,
                (long long)L->st[l], (long long)L->pad[l], l, (long long)L->dil[l]);
        sb_line(s, 5, "int64_t lo = xb < 0 ? (-xb + %lld) / %lld : 0; if (lo > len) lo = len;\n",
                (long long)(L->st[l] - 1), (long long)L->st[l]);
        sb_line(s, 5,
                "int64_t hi = xb > %lld ? 0 : (%lld - xb) / %lld + 1; if (hi > len) hi = len; "
                "if (hi < lo) hi = lo;\n",
                (long long)(L->in[l] - 1), (long long)(L->in[l] - 1), (long long)L->st[l]);
        sb_line(s, 5, "for (int64_t t = 0; t < lo; t++) dd[t] = 0.0f;\n");
        if (L->st[l] == 1)
            sb_line(s, 5, "for (int64_t t = lo; t < hi; t++) dd[t] = xr[xb + t];\n");
        else
            sb_line(s, 5, "for (int64_t t = lo; t < hi; t++) dd[t] = xr[xb + t * %lld];\n",
                    (long long)L->st[l]);
        sb_line(s, 5, "for (int64_t t = hi; t < len; t++) dd[t] = 0.0f;\n");
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "jj += len;\n");
    sb_line(s, 4, "x_o%d = 0;\n", l);
    for (int d = l - 1; d >= 0; d--)
        sb_line(s, 4, "if (++x_o%d < %lld) goto next; x_o%d = 0;\n", d, (long long)L->out[d], d);
    if (l > 0)
        sb_line(s, 4, "next:;\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "for (; jj < %d; jj++) d[jj] = 0.0f;\n", nr);
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
}

// ---- depthwise 2-D convolution, direct ----

// One (image, output channel) plane per task: the input plane is copied once into a zero-padded
// buffer (the prologue evaluated on the way), then every output row is one vectorised pass along
// the row, the KH*KW taps unrolled with their weights in registers and no padding test; the
// epilogue runs over the finished plane. (Accumulating tap by tap into the output row instead,
// as before, loaded and stored each row KH*KW times: 3x ONNX Runtime's time on MobileNetV2's
// 56x56 planes.)
int lin_emit_dw(Emit *E, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (!L->dw_ok)
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int rc = L->epi ? lin_emit_epilogue(E, e) : ST_OK;
    if (rc)
        return rc;
    long long IH = L->in[0], IW = L->in[1], OH = L->out[0], OW = L->out[1], KH = L->k[0],
              KW = L->k[1], SH = L->st[0], SW = L->st[1], DH = L->dil[0], DW = L->dil[1],
              PH = L->pad[0], PW = L->pad[1];
    // The padded plane: the rows and columns the taps read.
    long long HP = (OH - 1) * SH + (KH - 1) * DH + 1, WP = (OW - 1) * SW + (KW - 1) * DW + 1;
    long long IWC = ORCH_MIN(IW, WP - PW); // input columns inside it
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    sb_line(s, 1, "#pragma omp parallel if (%d)\n", L->NI * L->OC > 1 && lin_worth_parallel(L));
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "float *restrict xp = (float *)aligned_alloc(64, %lld);\n",
            (HP * WP * 4 + 63) / 64 * 64);
    sb_line(s, 2, "if (!xp) abort();\n");
    sb_line(s, 2, "#pragma omp for schedule(static)\n");
    sb_line(s, 2, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)(L->NI * L->OC));
    sb_line(s, 3, "const int64_t q_n = t / %lld, oc = t %% %lld, ch = oc / %lld;\n",
            (long long)L->OC, (long long)L->OC, (long long)L->OCg);
    sb_line(s, 3, "for (int64_t r = 0; r < %lld; r++) {\n", HP);
    sb_line(s, 4, "float *restrict xr = xp + r * %lld;\n", WP);
    sb_line(s, 4, "const int64_t ih = r - %lld;\n", PH);
    sb_line(s, 4, "if ((uint64_t)ih >= %lluu) {\n", (unsigned long long)IH);
    sb_line(s, 5, "memset(xr, 0, %lld);\n", WP * 4);
    sb_line(s, 5, "continue;\n");
    sb_line(s, 4, "}\n");
    if (PW > 0)
        sb_line(s, 4, "memset(xr, 0, %lld);\n", PW * 4);
    if (PW + IWC < WP)
        sb_line(s, 4, "memset(xr + %lld, 0, %lld);\n", PW + IWC, (WP - PW - IWC) * 4);
    sb_line(s, 4, "float *restrict xd = xr + %lld;\n", PW);
    if (L->pa >= 0) {
        sb_line(s, 4, "memcpy(xd, (const float *)in[%d] + ((q_n * %lld + ch) * %lld + ih) * %lld, "
                      "%lld);\n",
                L->pa, (long long)L->C, IH, IW, IWC * 4);
    } else {
        sb_line(s, 4, "#pragma omp simd\n");
        sb_line(s, 4, "for (int64_t iw = 0; iw < %lld; iw++) {\n", IWC);
        const char *ix[4] = {"q_n", "ch", "ih", "iw"};
        char v[64];
        rc = cexpr_value(E->x, L->ta, ix, s, 5, v, sizeof v, e);
        if (rc)
            return rc;
        cexpr_forget(E->x);
        sb_line(s, 5, "xd[iw] = %s;\n", v);
        sb_line(s, 4, "}\n");
    }
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "float wl[%lld];\n", KH * KW);
    if (L->pb >= 0) {
        sb_line(s, 3, "memcpy(wl, (const float *)in[%d] + oc * %lld, sizeof wl);\n", L->pb,
                KH * KW);
    } else {
        sb_line(s, 3, "for (int64_t kh = 0; kh < %lld; kh++)\n", KH);
        sb_line(s, 4, "for (int64_t kw = 0; kw < %lld; kw++) {\n", KW);
        sb_line(s, 5, "const int64_t z = 0;\n");
        const char *ix[4] = {"oc", "z", "kh", "kw"};
        char v[64];
        rc = cexpr_value(E->x, L->tb, ix, s, 5, v, sizeof v, e);
        if (rc)
            return rc;
        cexpr_forget(E->x);
        sb_line(s, 5, "wl[kh * %lld + kw] = %s;\n", KW, v);
        sb_line(s, 4, "}\n");
    }
    for (long long k = 0; k < KH * KW; k++)
        sb_line(s, 3, "const float w%lld = wl[%lld];\n", k, k);
    sb_line(s, 3, "float *restrict y = o + t * %lld;\n", OH * OW);
    sb_line(s, 3, "for (int64_t oh = 0; oh < %lld; oh++) {\n", OH);
    sb_line(s, 4, "const float *restrict x0 = xp + oh * %lld;\n", SH * WP);
    sb_line(s, 4, "float *restrict yr = y + oh * %lld;\n", OW);
    sb_line(s, 4, "#pragma omp simd\n");
    sb_line(s, 4, "for (int64_t ow = 0; ow < %lld; ow++) {\n", OW);
    sb_line(s, 5, "const float *restrict xq = x0 + ow * %lld;\n", SW);
    sb_line(s, 5, "float a = 0.0f;\n");
    for (long long kh = 0; kh < KH; kh++)
        for (long long kw = 0; kw < KW; kw++)
            sb_line(s, 5, "a += w%lld * xq[%lld];\n", kh * KW + kw, kh * DH * WP + kw * DW);
    sb_line(s, 5, "yr[ow] = a;\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    if (L->epi)
        sb_line(s, 3, "%s_epi(o, in, q_n * %lld + ch, oc %% %lld, 1, 0, %lld);\n", E->fn,
                (long long)L->G, (long long)L->OCg, OH * OW);
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "free(xp);\n");
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

// ---- transposed convolution as GEMM + col2im ----

bool lin_convt_col_view(const Lin *L, Lin *G) {
    if (!L->convt || L->pa < 0 || L->pb < 0)
        return false;
    // col[b][(m, offset)][pixel] with b = n*G + g: A = W of group g read transposed (its rows
    // are the input channels), B = X of image n, group g in place.
    *G = *L;
    G->conv = G->convt = G->epi = G->dw_ok = false;
    G->a_trans = true;
    G->ta = L->tb;
    G->tb = L->ta;
    G->pa = L->pb;
    G->pb = L->pa;
    G->M = L->OCg * L->kpix;
    G->N = L->ipix;
    G->K = L->Cg;
    G->batch = L->NI * L->G;
    G->nbd = 2;
    G->bd[0] = L->NI;
    G->bd[1] = L->G;
    G->sa[0] = 0;
    G->sa[1] = 1;
    G->sb[0] = L->G;
    G->sb[1] = 1;
    G->b_direct_ok = true;
    return true;
}

// The GEMM into a temporary col buffer (fn_gemm), then per (image, output channel) plane: zero,
// scatter-add every kernel offset's column row (strided along the last axis), epilogue.
int lin_emit_col2im(Emit *E, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    Lin G;
    if (!lin_convt_col_view(L, &G))
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    char gfn[160];
    snprintf(gfn, sizeof gfn, "%s_gemm", E->fn);
    Emit EG = *E;
    EG.L = &G;
    EG.fn = gfn;
    EG.local = true;
    int rc = lin_emit_tiled(&EG, e);
    if (!rc && L->epi)
        rc = lin_emit_epilogue(E, e);
    if (rc)
        return rc;
    int S = L->S, l = S - 1;
    long long opix = (long long)L->N, ipix = (long long)L->ipix, kpix = (long long)L->kpix;
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    sb_line(s, 1, "float *col = (float *)aligned_alloc(64, %lld);\n",
            (long long)((G.batch * G.M * G.N * 4 + 63) / 64 * 64));
    sb_line(s, 1, "if (!col) abort();\n");
    sb_line(s, 1, "%s(in, col);\n", gfn);
    sb_line(s, 1, "#pragma omp parallel for if (%d) schedule(static)\n",
            L->NI * L->OC > 1 && lin_worth_parallel(L));
    sb_line(s, 1, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)(L->NI * L->OC));
    sb_line(s, 2, "const int64_t q_n = t / %lld, oc = t %% %lld, g = oc / %lld, m = oc %% %lld;\n",
            (long long)L->OC, (long long)L->OC, (long long)L->OCg, (long long)L->OCg);
    sb_line(s, 2, "float *restrict y = o + t * %lld;\n", opix);
    sb_line(s, 2, "for (int64_t x = 0; x < %lld; x++) y[x] = 0.0f;\n", opix);
    sb_line(s, 2, "const float *restrict cb = col + ((q_n * %lld + g) * %lld + m) * %lld;\n",
            (long long)L->G, (long long)L->OCg, kpix * ipix);
    sb_line(s, 2, "for (int64_t k = 0; k < %lld; k++) {\n", kpix);
    sb_line(s, 3, "int64_t k_r = k;\n");
    for (int d = l; d >= 0; d--)
        sb_line(s, 3, "const int64_t k%d = k_r %% %lld; k_r /= %lld;\n", d, (long long)L->k[d],
                (long long)L->k[d]);
    sb_line(s, 3, "const float *restrict cr = cb + k * %lld;\n", ipix);
    // Outer axes: input i -> output i*stride - pad + k*dil, skipped when outside.
    for (int d = 0; d < l; d++) {
        sb_line(s, 3 + d, "for (int64_t i%d = 0; i%d < %lld; i%d++) {\n", d, d, (long long)L->in[d],
                d);
        sb_line(s, 4 + d, "const int64_t o%d = i%d * %lld - %lld + k%d * %lld;\n", d, d,
                (long long)L->st[d], (long long)L->pad[d], d, (long long)L->dil[d]);
        sb_line(s, 4 + d, "if ((uint64_t)o%d >= %lluu) continue;\n", d,
                (unsigned long long)L->out[d]);
    }
    int ind = 3 + l;
    sb_line(s, ind, "int64_t yo = 0, ci = 0;\n");
    for (int d = 0; d < l; d++)
        sb_line(s, ind, "yo = yo * %lld + o%d; ci = ci * %lld + i%d;\n", (long long)L->out[d], d,
                (long long)L->in[d], d);
    sb_line(s, ind, "float *restrict yr = y + yo * %lld;\n", (long long)L->out[l]);
    sb_line(s, ind, "const float *restrict crr = cr + ci * %lld;\n", (long long)L->in[l]);
    // Last axis: output i*stride + ob for the inputs i in [lo, hi).
    long long st = L->st[l], in_l = L->in[l], out_l = L->out[l];
    sb_line(s, ind, "const int64_t ob = k%d * %lld - %lld;\n", l, (long long)L->dil[l],
            (long long)L->pad[l]);
    sb_line(s, ind, "int64_t lo = ob < 0 ? (-ob + %lld) / %lld : 0;\n", st - 1, st);
    sb_line(s, ind,
            "int64_t hi = ob > %lld ? 0 : (%lld - ob) / %lld + 1; if (hi > %lld) hi = %lld;\n",
            out_l - 1, out_l - 1, st, in_l, in_l);
    sb_line(s, ind, "for (int64_t i = lo; i < hi; i++) yr[i * %lld + ob] += crr[i];\n", st);
    for (int d = l - 1; d >= 0; d--)
        sb_line(s, 3 + d, "}\n");
    sb_line(s, 2, "}\n");
    if (L->epi)
        sb_line(s, 2, "%s_epi(o, in, q_n * %lld + g, m, 1, 0, %lld);\n", E->fn, (long long)L->G,
                opix);
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "free(col);\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}
