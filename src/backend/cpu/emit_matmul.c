// Matmul-shaped kernel bodies of the C target's linear emitter (see cgen_linear.h): the BLIS-style
// packed GEMM that matmuls and implicit-GEMM convolutions share (register-tile micro-kernel for
// AVX-512 / AVX2 / portable vectors, a column kernel for tiles narrower than nr, A and B packers
// evaluating prologues, per-tile epilogue),
// and the GEMV (few rows) and dot (few columns) paths.
// Needs: an analysed candidate (Emit). Guarantees: kernels follow the ABI of target.h.
#define ORCH_CGEN_LINEAR_INTERNAL
#include "cgen_linear.h"

#include <stdio.h>

// The register-tile micro-kernel for vector width w: C[mr x nr] (+)= A panel * B panel. Packed A
// holds mr values per k; strided A (lda) is read in place. B rows are rsb floats apart.
static void emit_uk_body_x(StrBuf *s, int mr, int nr, int w, bool strided, bool indirect);

static void emit_uk_body(StrBuf *s, int mr, int nr, int w, bool strided) {
    emit_uk_body_x(s, mr, nr, w, strided, false);
}

// indirect: row p of the B panel starts at b + koff[p] (the padded-input conv).
static void emit_uk_body_x(StrBuf *s, int mr, int nr, int w, bool strided, bool indirect) {
    int nv = nr / w;
    for (int i = 0; i < mr; i++) {
        sb_puts(s, "    orch_lv");
        for (int v = 0; v < nv; v++)
            sb_printf(s, "%s c%d_%d = orch_lv_zero()", v ? "," : "", i, v);
        sb_puts(s, ";\n");
    }
    sb_puts(s, "    for (int64_t p = 0; p < kc; p++) {\n");
    if (indirect)
        sb_puts(s, "        const float *restrict bq = b + koff[p];\n");
    for (int v = 0; v < nv; v++)
        sb_printf(s, "        const orch_lv b%d = orch_lv_load(%s + %d);\n", v,
                  indirect ? "bq" : "b", v * w);
    for (int i = 0; i < mr; i++) {
        if (strided)
            sb_printf(s, "        { const orch_lv a_ = orch_lv_set1(a[%d * lda]);", i);
        else
            sb_printf(s, "        { const orch_lv a_ = orch_lv_set1(a[%d]);", i);
        for (int v = 0; v < nv; v++)
            sb_printf(s, " c%d_%d = orch_lv_fma(a_, b%d, c%d_%d);", i, v, v, i, v);
        sb_puts(s, " }\n");
    }
    if (indirect)
        sb_printf(s, "        a += %d;\n    }\n", mr);
    else
        sb_printf(s, "        a += %d;\n        b += rsb;\n    }\n", strided ? 1 : mr);
    sb_puts(s, "    if (accum) {\n");
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++)
            sb_printf(s, "        c%d_%d = orch_lv_add(c%d_%d, orch_lv_load(c + %d * ldc + %d));\n",
                      i, v, i, v, i, v * w);
    sb_puts(s, "    }\n");
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++)
            sb_printf(s, "    orch_lv_store(c + %d * ldc + %d, c%d_%d);\n", i, v * w, i, v);
}

static void emit_uk(Emit *E, const char *name, int mr, int nr, bool strided) {
    StrBuf *s = E->s;
    sb_printf(s,
              "static inline __attribute__((always_inline)) void %s_%s(int64_t kc, const float "
              "*restrict a,%s const float *restrict b, int64_t rsb, float *restrict c, int64_t "
              "ldc, int accum) {\n",
              E->fn, name, strided ? " int64_t lda," : "");
    sb_puts(s, "#if ORCH_LV == 16\n");
    emit_uk_body(s, mr, nr, 16, strided);
    sb_puts(s, "#elif ORCH_LV == 8\n");
    emit_uk_body(s, mr, nr, 8, strided);
    sb_puts(s, "#else\n");
    emit_uk_body(s, mr, nr, 4, strided);
    sb_puts(s, "#endif\n}\n\n");
}

void lin_emit_uk(Emit *E, const char *name, int mr, int nr) {
    emit_uk(E, name, mr, nr, false);
}

// The column micro-kernel for a tile narrower than nr (packed A, mr a multiple of every vector
// width): the vectors run down mr rows of the A panel and each of the n columns broadcasts its B
// value, so a tail of n columns costs n/nr of a full tile instead of all of it (a 7x7 image has
// 49 pixels: 64 computed with nr=16 or 32). T columns at a time with U partial sums over k, so
// T*U >= 4 FMA chains hide the latency; rows past m are not stored.
// trans (the column-tile mode, fn_ukt): the sums go to a column-major buffer instead, column j
// at c + j * ldc, all mr rows as whole vectors (added to what is there when accum); the columns
// per step are as many as the accumulators fit in the vector registers (16 on AVX2, 32 on
// AVX-512) beside the A vectors and a broadcast, at most 8.
static void emit_ukc_body_x(StrBuf *s, int mr, int w, bool trans) {
    int nv = mr / w;
    int regs = w == 16 ? 32 : 16;
    int T1 = ORCH_MAX(1, ORCH_MIN(8, (regs - nv - 2) / nv));
    int U2 = ORCH_MAX(1, ORCH_MIN(4, (regs - 2) / (2 * nv)));
    int Ts[3] = {8, 4, 1}, Us[3] = {1, 2, 4};
    int nq = 3;
    if (trans) {
        Ts[0] = T1;
        Us[0] = 1;
        Ts[1] = 1;
        Us[1] = U2;
        nq = T1 > 1 ? 2 : 1;
        if (nq == 1)
            Us[0] = U2;
    } else {
        sb_printf(s, "    float tmp[%d] __attribute__((aligned(64)));\n", mr);
    }
    sb_puts(s, "    int64_t j = 0;\n");
    for (int q = 0; q < nq; q++) {
        int T = Ts[q], U = Us[q];
        sb_printf(s, "    for (; j + %d <= n; j += %d) {\n", T, T);
        for (int u = 0; u < U; u++)
            for (int t = 0; t < T; t++) {
                sb_puts(s, "        orch_lv");
                for (int v = 0; v < nv; v++)
                    sb_printf(s, "%s c%d_%d_%d = orch_lv_zero()", v ? "," : "", u, t, v);
                sb_puts(s, ";\n");
            }
        sb_puts(s, "        const float *restrict ap = a, *restrict bq = b + j;\n");
        sb_puts(s, "        int64_t p = 0;\n");
        for (int tail = 0; tail < 2; tail++) {
            int uu = tail ? 1 : U;
            if (!tail)
                sb_printf(s, "        for (; p + %d <= kc; p += %d) {\n", U, U);
            else if (U > 1)
                sb_puts(s, "        for (; p < kc; p++) {\n");
            else
                break;
            for (int u = 0; u < uu; u++) {
                for (int v = 0; v < nv; v++)
                    sb_printf(s, "            const orch_lv a%d_%d = orch_lv_load(ap + %d);\n", u,
                              v, u * mr + v * w);
                for (int t = 0; t < T; t++) {
                    sb_printf(s,
                              "            { const orch_lv b_ = orch_lv_set1(bq[%d * rsb + %d]);",
                              u, t);
                    for (int v = 0; v < nv; v++)
                        sb_printf(s, " c%d_%d_%d = orch_lv_fma(a%d_%d, b_, c%d_%d_%d);", u, t, v, u,
                                  v, u, t, v);
                    sb_puts(s, " }\n");
                }
            }
            sb_printf(s, "            ap += %d; bq += %d * rsb;\n        }\n", uu * mr, uu);
        }
        for (int t = 0; t < T && trans; t++)
            for (int v = 0; v < nv; v++) {
                sb_printf(s, "        { float *cq = c + (j + %d) * ldc + %d; orch_lv s_ = ", t,
                          v * w);
                for (int u = 1; u < U; u++)
                    sb_puts(s, "orch_lv_add(");
                sb_printf(s, "c0_%d_%d", t, v);
                for (int u = 1; u < U; u++)
                    sb_printf(s, ", c%d_%d_%d)", u, t, v);
                sb_puts(s, "; orch_lv_store(cq, accum ? orch_lv_add(s_, orch_lv_load(cq)) : s_); }\n");
            }
        for (int t = 0; t < T && !trans; t++) {
            for (int v = 0; v < nv; v++) {
                sb_printf(s, "        orch_lv_store(tmp + %d, ", v * w);
                for (int u = 1; u < U; u++)
                    sb_puts(s, "orch_lv_add(");
                sb_printf(s, "c0_%d_%d", t, v);
                for (int u = 1; u < U; u++)
                    sb_printf(s, ", c%d_%d_%d)", u, t, v);
                sb_puts(s, ");\n");
            }
            sb_printf(s,
                      "        for (int64_t i = 0; i < m; i++) c[i * ldc + j + %d] = (accum ? "
                      "c[i * ldc + j + %d] : 0.0f) + tmp[i];\n",
                      t, t);
        }
        sb_puts(s, "    }\n");
    }
}

static void emit_ukc_body(StrBuf *s, int mr, int w) {
    emit_ukc_body_x(s, mr, w, false);
}

// fn_ukt: the column kernel into a column-major buffer (emit_ukc_body_x's trans).
static void emit_ukt(Emit *E, int mr) {
    StrBuf *s = E->s;
    sb_printf(s,
              "static inline __attribute__((always_inline)) void %s_ukt(int64_t kc, const float "
              "*restrict a, const float *restrict b, int64_t rsb, int64_t n, float *restrict c, "
              "int64_t ldc, int accum) {\n",
              E->fn);
    sb_puts(s, "#if ORCH_LV == 16\n");
    emit_ukc_body_x(s, mr, 16, true);
    sb_puts(s, "#elif ORCH_LV == 8\n");
    emit_ukc_body_x(s, mr, 8, true);
    sb_puts(s, "#else\n");
    emit_ukc_body_x(s, mr, 4, true);
    sb_puts(s, "#endif\n}\n\n");
}

static void emit_ukc(Emit *E, int mr) {
    StrBuf *s = E->s;
    sb_printf(s,
              "static inline __attribute__((always_inline)) void %s_ukc(int64_t kc, const float "
              "*restrict a, const float *restrict b, int64_t rsb, int64_t n, int64_t m, float "
              "*restrict c, int64_t ldc, int accum) {\n",
              E->fn);
    sb_puts(s, "#if ORCH_LV == 16\n");
    emit_ukc_body(s, mr, 16);
    sb_puts(s, "#elif ORCH_LV == 8\n");
    emit_ukc_body(s, mr, 8);
    sb_puts(s, "#else\n");
    emit_ukc_body(s, mr, 4);
    sb_puts(s, "#endif\n}\n\n");
}

// fn_packa: rows i0..i0+mc, columns p0..p0+kc of A[b] into panels of mr rows (zero rows past mc).
static int emit_packa(Emit *E, int mr, Err *e) {
    StrBuf *s = E->s;
    sb_printf(s,
              "static void %s_packa(float *restrict Ap, const void *const *in, int64_t b, "
              "int64_t i0, int64_t mc, int64_t p0, int64_t kc) {\n",
              E->fn);
    const Lin *L = E->L;
    lin_emit_batch_coords(E, 1, true);
    sb_line(s, 1, "for (int64_t s = 0; s < mc; s += %d) {\n", mr);
    sb_line(s, 2, "float *restrict d = Ap + s * kc;\n");
    // A row-major in place (conv weights, a matmul input): full panels read mr rows side by
    // side so each step writes mr contiguous floats (row by row, every store is a new line).
    bool direct = L->conv ? L->pb >= 0 && !L->convt : L->pa >= 0 && !L->a_trans;
    if (direct) {
        if (L->conv)
            sb_line(s, 2,
                    "const float *restrict r = (const float *)in[%d] + (q_g * %lld + i0 + s) * "
                    "%lld + p0;\n",
                    L->pb, (long long)L->OCg, (long long)L->K);
        else
            sb_line(s, 2,
                    "const float *restrict r = (const float *)in[%d] + aoff + (i0 + s) * "
                    "%lld + p0;\n",
                    L->pa, (long long)L->K);
        sb_line(s, 2, "if (s + %d <= mc) {\n", mr);
        sb_line(s, 3, "for (int64_t p = 0; p < kc; p++)\n");
        sb_line(s, 4, "for (int64_t ii = 0; ii < %d; ii++) d[p * %d + ii] = r[ii * %lld + p];\n",
                mr, mr, (long long)L->K);
        sb_line(s, 3, "continue;\n");
        sb_line(s, 2, "}\n");
    }
    sb_line(s, 2, "for (int64_t ii = 0; ii < %d; ii++) {\n", mr);
    sb_line(s, 3, "if (s + ii >= mc) {\n");
    sb_line(s, 4, "for (int64_t p = 0; p < kc; p++) d[p * %d + ii] = 0.0f;\n", mr);
    sb_line(s, 4, "continue;\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "const int64_t i = i0 + s + ii;\n");
    sb_line(s, 3, "for (int64_t p = 0; p < kc; p++) {\n");
    sb_line(s, 4, "const int64_t k = p0 + p;\n");
    char dst[32];
    snprintf(dst, sizeof dst, "d[p * %d + ii]", mr);
    int rc = lin_emit_a_value(E, 4, "i", "k", dst, e);
    if (rc)
        return rc;
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

// fn_packb: rows p0..p0+kc, columns j0..j0+nc of B[b] into panels of nr columns (zero past nc);
// kc_max: the config's kc, the most rows a call packs.
static int emit_packb(Emit *E, int nr, int64_t kc_max, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_printf(s,
              "static void %s_packb(float *restrict Bp, const void *const *in, int64_t b, "
              "int64_t p0, int64_t kc, int64_t j0, int64_t nc) {\n",
              E->fn);
    lin_emit_batch_coords(E, 1, true);
    if (L->conv && L->pa >= 0) {
        lin_emit_packb_conv(E, nr, kc_max);
        sb_puts(s, "}\n\n");
        return ST_OK;
    }
    sb_line(s, 1, "for (int64_t s = 0; s < nc; s += %d) {\n", nr);
    sb_line(s, 2, "float *restrict d = Bp + s * kc;\n");
    sb_line(s, 2, "const int64_t w = nc - s < %d ? nc - s : %d;\n", nr, nr);
    if (L->conv) {
        // Patch panels: kernel offsets once per row, output coordinates stepped per column.
        int l = L->S - 1;
        sb_line(s, 2, "int64_t o_r = j0 + s;\n");
        for (int d = l; d >= 0; d--)
            sb_line(s, 2, "const int64_t o_s%d = o_r %% %lld; o_r /= %lld;\n", d,
                    (long long)L->out[d], (long long)L->out[d]);
        sb_line(s, 2, "for (int64_t p = 0; p < kc; p++, d += %d) {\n", nr);
        sb_line(s, 3, "int64_t x_r = p0 + p;\n");
        for (int d = l; d >= 0; d--)
            sb_line(s, 3, "const int64_t x_k%d = x_r %% %lld; x_r /= %lld;\n", d,
                    (long long)L->k[d], (long long)L->k[d]);
        sb_line(s, 3, "const int64_t x_c = q_g * %lld + x_r;\n", (long long)L->Cg);
        for (int d = l; d >= 0; d--)
            sb_line(s, 3, "int64_t x_o%d = o_s%d;\n", d, d);
        sb_line(s, 3, "int64_t jj = 0;\n");
        sb_line(s, 3, "for (; jj < w; jj++) {\n");
        int rc = lin_emit_patch_value(E, 4, "d[jj]", e);
        if (rc)
            return rc;
        for (int d = l; d > 0; d--) {
            sb_line(s, 4, "if (++x_o%d < %lld) continue;\n", d, (long long)L->out[d]);
            sb_line(s, 4, "x_o%d = 0;\n", d);
        }
        sb_line(s, 4, "++x_o0;\n");
        sb_line(s, 3, "}\n");
        sb_line(s, 3, "for (; jj < %d; jj++) d[jj] = 0.0f;\n", nr);
        sb_line(s, 2, "}\n");
        sb_line(s, 1, "}\n");
        sb_puts(s, "}\n\n");
        return ST_OK;
    }
    sb_line(s, 2, "for (int64_t p = 0; p < kc; p++, d += %d) {\n", nr);
    sb_line(s, 3, "const int64_t k = p0 + p;\n");
    sb_line(s, 3, "int64_t jj = 0;\n");
    sb_line(s, 3, "for (; jj < w; jj++) {\n");
    sb_line(s, 4, "const int64_t j = j0 + s + jj;\n");
    int rc = lin_emit_b_value(E, 4, "k", "j", "d[jj]", e);
    if (rc)
        return rc;
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "for (; jj < %d; jj++) d[jj] = 0.0f;\n", nr);
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

// packb = CLIN_PACK_PREPACKED: B is a constant the loader reorders once with fn_prepack (the
// cgen_linear.h ABI), so the kernel reads each kc x nr panel as one contiguous run: no packing
// per call and no 4 KiB-strided rows. The order, per K x N matrix of B: k-blocks of kc rows
// (the last may be shorter), in each the panels of nr columns (the last may be narrower, w
// columns, stored w wide: the reordered matrix has exactly B's bytes), each panel row-major.
// fn_padb copies the narrow last panel into a zero-padded nr-wide one for the micro-kernels.
static int emit_prepack(Emit *E, int64_t kc, int nr) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    const Tensor *B = lin_t(L, L->tb);
    int64_t K = L->K, N = L->N, mats = tensor_numel(B) / (K * N);
    sb_printf(s,
              "int %s_prepack(int input, const void *src, void *dst) {\n"
              "    if (input != %d) return 0;\n"
              "    if (!src || !dst) return 1;\n"
              "    const float *restrict m = (const float *)src;\n"
              "    float *restrict d = (float *)dst;\n"
              "    for (int64_t q = 0; q < %lld; q++, m += %lld)\n"
              "        for (int64_t p0 = 0; p0 < %lld; p0 += %lld) {\n"
              "            const int64_t kc = %lld - p0 < %lld ? %lld - p0 : %lld;\n"
              "            for (int64_t js = 0; js < %lld; js += %d) {\n"
              "                const int64_t w = %lld - js < %d ? %lld - js : %d;\n"
              "                for (int64_t p = 0; p < kc; p++)\n"
              "                    for (int64_t jj = 0; jj < w; jj++) *d++ = m[(p0 + p) * %lld + "
              "js + jj];\n"
              "            }\n"
              "        }\n"
              "    return 1;\n"
              "}\n\n",
              E->fn, L->pb, (long long)mats, (long long)(K * N), (long long)K, (long long)kc,
              (long long)K, (long long)kc, (long long)K, (long long)kc, (long long)N, nr,
              (long long)N, nr, (long long)N, nr, (long long)N);
    sb_printf(s,
              "static void %s_padb(float *restrict Bp, const float *restrict pp, int64_t kc, "
              "int64_t n) {\n"
              "    for (int64_t p = 0; p < kc; p++) {\n"
              "        int64_t jj = 0;\n"
              "        for (; jj < n; jj++) Bp[p * %d + jj] = pp[p * n + jj];\n"
              "        for (; jj < %d; jj++) Bp[p * %d + jj] = 0.0f;\n"
              "    }\n"
              "}\n\n",
              E->fn, nr, nr, nr);
    return ST_OK;
}

// One register tile of the row-tile GEMM (inside lin_emit_tiled's ir loop): the row micro-kernel
// into C or, for a partial tile, into ct and added from there; a narrow tile through the column
// kernel where colk.
static void emit_tile_body(Emit *E, int mr, int nr, bool colk, bool packa, int64_t lda) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_line(s, 6, "const int full = m == %d && n == %d;\n", mr, nr);
    sb_line(s, 6, "float *cd = full ? cp : ct;\n");
    sb_line(s, 6, "const int64_t ldc = full ? %lld : %d;\n", (long long)L->N, nr);
    if (colk) {
        sb_line(s, 6, "if (n < %d) {\n", nr);
        if (packa)
            sb_line(s, 7, "%s_ukc(kc, Ap + ir * kc, bp, rsb, n, m, cp, %lld, p0 > 0);\n", E->fn,
                    (long long)L->N);
        else
            sb_line(s, 7,
                    "%s_packa(Ap, in, b, i0 + ir, m, p0, kc); %s_ukc(kc, Ap, bp, rsb, n, m, cp, "
                    "%lld, p0 > 0);\n",
                    E->fn, E->fn, (long long)L->N);
        if (L->epi)
            sb_line(s, 7, "if (last) %s_epi(o, in, b, i0 + ir, m, j0 + jr, n);\n", E->fn);
        sb_line(s, 7, "continue;\n");
        sb_line(s, 6, "}\n");
    }
    if (packa) {
        sb_line(s, 6, "%s_ukp(kc, Ap + ir * kc, bp, rsb, cd, ldc, full && p0 > 0);\n", E->fn);
    } else {
        sb_line(s, 6,
                "if (m == %d) %s_uks(kc, Ab + (i0 + ir) * %lld + p0, %lld, bp, rsb, cd, ldc, "
                "full && p0 > 0);\n",
                mr, E->fn, (long long)lda, (long long)lda);
        sb_line(s, 6,
                "else { %s_packa(Ap, in, b, i0 + ir, m, p0, kc); %s_ukp(kc, Ap, bp, rsb, "
                "cd, ldc, 0); }\n",
                E->fn, E->fn);
    }
    sb_line(s, 6, "if (!full)\n");
    sb_line(s, 7, "for (int64_t ii = 0; ii < m; ii++)\n");
    sb_line(s, 8, "for (int64_t jj = 0; jj < n; jj++)\n");
    sb_line(s, 9, "cp[ii * %lld + jj] = (p0 > 0 ? cp[ii * %lld + jj] : 0.0f) + ct[ii * %d + jj];\n",
            (long long)L->N, (long long)L->N, nr);
    if (L->epi)
        sb_line(s, 6, "if (last) %s_epi(o, in, b, i0 + ir, m, j0 + jr, n);\n", E->fn);
}

static int emit_prepack_w(Emit *E, int64_t kc, int mr);

int lin_emit_tiled(Emit *E, Err *e) {
    const Lin *L = E->L;
    CLinConfig t;
    cgen_lin_config_unpack(E->cfg, &t);
    StrBuf *s = E->s;
    int mr = t.mr, nr = t.nr;
    int64_t kc = t.kc, mc = t.mc, nc = t.nc;
    // Operands a prologue computes are always packed; so is a conv's patch matrix unless the
    // conv is 1x1 stride-1 unpadded (then X is B in place).
    // packa = CLIN_PACK_PREPACKED (a conv's constant W): the column-tile mode. W is reordered
    // at load into mr-row panels (fn_prepack_w's order) and every tile runs the column kernel,
    // vectors down the output channels and patch values broadcast, into a column-major
    // accumulator block Ct (mc x nc per task) that is transposed into the output after the last
    // k-block: few output pixels (ResNet's 7x7 and 14x14 layers) fill no wide row tile, and W,
    // the large operand there, is read once per call in the order the kernel uses it.
    bool wcol = L->conv && t.packa == CLIN_PACK_PREPACKED;
    if (wcol && (!L->w_prepack_ok || L->convt || mr % 16))
        return err_set(e, ST_INVALID, "linear kernel %s: bad config '%s'", E->fn, E->cfg->desc);
    bool packa = wcol ? false
                      : L->conv ? t.packa || L->pb < 0 || L->convt
                                : t.packa || L->pa < 0 || L->a_trans;
    bool prepacked = t.packb == CLIN_PACK_PREPACKED;
    bool packb = L->conv ? t.packb || !L->b_direct_ok || L->pa < 0
                         : t.packb == CLIN_PACK_PER_CALL || L->pb < 0;
    if (mr < 1 || nr < 16 || nr % 16 || kc < 1 || mc < mr || mc % mr || nc < nr || nc % nr ||
        t.packb < 0 || t.packb > CLIN_PACK_PREPACKED || (prepacked && !L->b_prepack_ok))
        return err_set(e, ST_INVALID, "linear kernel %s: bad config '%s'", E->fn, E->cfg->desc);
    // Tiles narrower than nr go through the column kernel when its vectors fit mr exactly (A
    // read in place is packed for it: one mr x kc panel per narrow tile).
    bool colk = mr % 16 == 0 && !wcol;
    if (wcol) {
        emit_ukt(E, mr);
    } else {
        emit_uk(E, "ukp", mr, nr, false);
        if (colk)
            emit_ukc(E, mr);
        if (!packa)
            emit_uk(E, "uks", mr, nr, true);
    }
    int rc = wcol ? emit_prepack_w(E, kc, mr) : emit_packa(E, mr, e);
    if (!rc)
        rc = prepacked ? emit_prepack(E, kc, nr) : emit_packb(E, nr, kc, e);
    if (!rc && L->epi)
        rc = lin_emit_epilogue(E, e);
    if (rc)
        return rc;
    // Direct operand pointers and leading dimensions.
    const char *ab, *bb;
    char abuf[128], bbuf[160];
    int64_t lda = L->K, ldb = L->N;
    if (L->conv) {
        snprintf(abuf, sizeof abuf, "(const float *)in[%d] + q_g * %lld", L->pb,
                 (long long)(L->OCg * L->K));
        snprintf(bbuf, sizeof bbuf, "(const float *)in[%d] + (q_n * %lld + q_g * %lld) * %lld",
                 L->pa, (long long)L->C, (long long)L->Cg, (long long)L->ipix);
    } else {
        snprintf(abuf, sizeof abuf, "(const float *)in[%d] + aoff", L->pa);
        snprintf(bbuf, sizeof bbuf, "(const float *)in[%d] + boff", L->pb);
    }
    ab = packa ? "NULL" : abuf;
    bb = packb ? "NULL" : bbuf;
    int64_t mt = (L->M + mc - 1) / mc, nt = (L->N + nc - 1) / nc;
    int64_t mcr = ORCH_MIN(mc, (L->M + mr - 1) / mr * mr);
    int64_t ncr = ORCH_MIN(nc, (L->N + nr - 1) / nr * nr);
    int64_t kcr = ORCH_MIN(kc, L->K);
    int64_t tiles = L->batch * mt * nt;
    // Column tiles with a packed patch matrix pack it once per call, shared by the tasks: every
    // (image and group, panel of nr columns, k-block) by one thread first, then the tiles read
    // it (per task it would be gathered once per M block). Panel pan of batch entry b holds K
    // rows of nr floats at Bs + (b * npan + pan) * K * nr.
    bool shared = wcol && packb;
    int64_t npan = (L->N + nr - 1) / nr, nkb = (L->K + kc - 1) / kc;
    int64_t ptasks = shared ? L->batch * npan * nkb : 0;
    sb_printf(s, "%svoid %s(const void *const *in, void *out) {\n", E->local ? "static " : "",
              E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    if (shared)
        sb_line(s, 1, "float *Bs = (float *)aligned_alloc(64, %lld);\n",
                (long long)((L->batch * npan * L->K * nr * 4 + 63) / 64 * 64));
    sb_line(s, 1, "#pragma omp parallel if (%d)\n",
            (tiles > 1 || ptasks > 1) && lin_worth_parallel(L));
    sb_line(s, 1, "{\n");
    if (shared) {
        sb_line(s, 2, "#pragma omp for schedule(static)\n");
        sb_line(s, 2, "for (int64_t u = 0; u < %lld; u++) {\n", (long long)ptasks);
        sb_line(s, 3, "const int64_t b = u / %lld, r = u %% %lld;\n", (long long)(npan * nkb),
                (long long)(npan * nkb));
        sb_line(s, 3, "const int64_t pan = r / %lld, p0 = r %% %lld * %lld;\n", (long long)nkb,
                (long long)nkb, (long long)kc);
        sb_line(s, 3, "const int64_t kc = %lld - p0 < %lld ? %lld - p0 : %lld;\n", (long long)L->K,
                (long long)kc, (long long)L->K, (long long)kc);
        sb_line(s, 3, "const int64_t jn = %lld - pan * %d < %d ? %lld - pan * %d : %d;\n",
                (long long)L->N, nr, nr, (long long)L->N, nr, nr);
        sb_line(s, 3, "%s_packb(Bs + ((b * %lld + pan) * %lld + p0) * %d, in, b, p0, kc, pan * %d, "
                "jn);\n", E->fn, (long long)npan, (long long)L->K, nr, nr);
        sb_line(s, 2, "}\n");
    }
    sb_line(s, 2, "float *Ap = (float *)aligned_alloc(64, %lld);\n",
            (long long)((mcr * kcr * 4 + 63) / 64 * 64));
    sb_line(s, 2, "float *Bp = (float *)aligned_alloc(64, %lld);\n",
            (long long)((ncr * kcr * 4 + 63) / 64 * 64));
    if (!wcol)
        sb_line(s, 2, "float ct[%d] __attribute__((aligned(64)));\n", mr * nr);
    else
        sb_line(s, 2, "float *Ct = (float *)aligned_alloc(64, %lld);\n",
                (long long)((mcr * ncr * 4 + 63) / 64 * 64));
    sb_line(s, 2, "#pragma omp for schedule(static)\n");
    sb_line(s, 2, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)tiles);
    sb_line(s, 3, "const int64_t b = t / %lld, r = t %% %lld;\n", (long long)(mt * nt),
            (long long)(mt * nt));
    sb_line(s, 3, "const int64_t i0 = r %% %lld * %lld, j0 = r / %lld * %lld;\n", (long long)mt,
            (long long)mc, (long long)mt, (long long)nc);
    sb_line(s, 3, "const int64_t mc = %lld - i0 < %lld ? %lld - i0 : %lld;\n", (long long)L->M,
            (long long)mc, (long long)L->M, (long long)mc);
    sb_line(s, 3, "const int64_t nc = %lld - j0 < %lld ? %lld - j0 : %lld;\n", (long long)L->N,
            (long long)nc, (long long)L->N, (long long)nc);
    lin_emit_batch_coords(E, 3, true);
    sb_line(s, 3, "const float *Ab = %s, *Bb = %s;\n", ab, bb);
    sb_line(s, 3, "(void)Ab; (void)Bb;\n");
    sb_line(s, 3, "for (int64_t p0 = 0; p0 < %lld; p0 += %lld) {\n", (long long)L->K,
            (long long)kc);
    sb_line(s, 4, "const int64_t kc = %lld - p0 < %lld ? %lld - p0 : %lld;\n", (long long)L->K,
            (long long)kc, (long long)L->K, (long long)kc);
    sb_line(s, 4, "const int last = p0 + kc >= %lld;\n", (long long)L->K);
    sb_line(s, 4, "(void)last;\n");
    if (packa)
        sb_line(s, 4, "%s_packa(Ap, in, b, i0, mc, p0, kc);\n", E->fn);
    if (packb && !shared)
        sb_line(s, 4, "%s_packb(Bp, in, b, p0, kc, j0, nc);\n", E->fn);
    sb_line(s, 4, "for (int64_t jr = 0; jr < nc; jr += %d) {\n", nr);
    sb_line(s, 5, "const int64_t n = nc - jr < %d ? nc - jr : %d;\n", nr, nr);
    sb_line(s, 5, "const float *bp;\n");
    sb_line(s, 5, "int64_t rsb;\n");
    if (shared) {
        sb_line(s, 5, "bp = Bs + ((b * %lld + (j0 + jr) / %d) * %lld + p0) * %d; rsb = %d;\n",
                (long long)npan, nr, (long long)L->K, nr, nr);
    } else if (packb) {
        sb_line(s, 5, "bp = Bp + jr * kc; rsb = %d;\n", nr);
    } else if (prepacked) {
        // fn_prepack's order: the panel of columns j0 + jr .. of k-block p0 starts at
        // p0 * N + (j0 + jr) * kc, kc x n floats (n < nr only in the last panel).
        sb_line(s, 5, "const float *pp = Bb + p0 * %lld + (j0 + jr) * kc;\n", (long long)ldb);
        sb_line(s, 5, "if (n == %d) { bp = pp; rsb = %d; }\n", nr, nr);
        sb_line(s, 5, "else { %s_padb(Bp, pp, kc, n); bp = Bp; rsb = %d; }\n", E->fn, nr);
    } else {
        sb_line(s, 5, "if (n == %d) { bp = Bb + p0 * %lld + j0 + jr; rsb = %lld; }\n", nr,
                (long long)ldb, (long long)ldb);
        sb_line(s, 5, "else { %s_packb(Bp, in, b, p0, kc, j0 + jr, n); bp = Bp; rsb = %d; }\n",
                E->fn, nr);
    }
    sb_line(s, 5, "for (int64_t ir = 0; ir < mc; ir += %d) {\n", mr);
    sb_line(s, 6, "const int64_t m = mc - ir < %d ? mc - ir : %d;\n", mr, mr);
    sb_line(s, 6, "float *cp = o + (b * %lld + i0 + ir) * %lld + j0 + jr;\n", (long long)L->M,
            (long long)L->N);
    if (wcol) {
        // fn_prepack_w's order: rows i.. of k-block p0 at q_g * M * K + p0 * M + i * kc.
        sb_line(s, 6, "const float *ap = Ab + p0 * %lld + (i0 + ir) * kc;\n", (long long)L->M);
        sb_line(s, 6, "if (m < %d) { %s_pada(Ap, ap, kc, m); ap = Ap; }\n", mr, E->fn);
        sb_line(s, 6, "float *cq = Ct + jr * %lld + ir;\n", (long long)mcr);
        sb_line(s, 6, "%s_ukt(kc, ap, bp, rsb, n, cq, %lld, p0 > 0);\n", E->fn, (long long)mcr);
        sb_line(s, 6, "if (last) {\n");
        sb_line(s, 7, "for (int64_t ii = 0; ii < m; ii++)\n");
        sb_line(s, 8, "for (int64_t jj = 0; jj < n; jj++) cp[ii * %lld + jj] = cq[jj * %lld + ii];\n",
                (long long)L->N, (long long)mcr);
        if (L->epi)
            sb_line(s, 7, "%s_epi(o, in, b, i0 + ir, m, j0 + jr, n);\n", E->fn);
        sb_line(s, 6, "}\n");
    } else {
        emit_tile_body(E, mr, nr, colk, packa, lda);
    }
    sb_line(s, 5, "}\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "free(Ap);\n");
    sb_line(s, 2, "free(Bp);\n");
    if (wcol)
        sb_line(s, 2, "free(Ct);\n");
    sb_line(s, 1, "}\n");
    if (shared)
        sb_line(s, 1, "free(Bs);\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}
// packa = CLIN_PACK_PREPACKED (padconv): the conv weights W (the GEMM's A, OCg x K per group) are
// reordered once at load (the cgen_linear.h ABI) into the panels the micro-kernel reads: per
// group, k-blocks of kc columns (the last may be shorter), in each the panels of mr rows (the
// last may have fewer, m rows, stored m wide: exactly W's bytes), each panel k-major (mr values
// per k). fn_pada copies a short last panel into a zero-padded mr-row one.
static int emit_prepack_w(Emit *E, int64_t kc, int mr) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    int64_t M = L->M, K = L->K;
    sb_printf(s,
              "int %s_prepack(int input, const void *src, void *dst) {\n"
              "    if (input != %d) return 0;\n"
              "    if (!src || !dst) return 1;\n"
              "    const float *restrict w = (const float *)src;\n"
              "    float *restrict d = (float *)dst;\n"
              "    for (int64_t g = 0; g < %lld; g++, w += %lld)\n"
              "        for (int64_t p0 = 0; p0 < %lld; p0 += %lld) {\n"
              "            const int64_t kc = %lld - p0 < %lld ? %lld - p0 : %lld;\n"
              "            for (int64_t i = 0; i < %lld; i += %d) {\n"
              "                const int64_t m = %lld - i < %d ? %lld - i : %d;\n"
              "                for (int64_t p = 0; p < kc; p++)\n"
              "                    for (int64_t ii = 0; ii < m; ii++) *d++ = w[(i + ii) * %lld + "
              "p0 + p];\n"
              "            }\n"
              "        }\n"
              "    return 1;\n"
              "}\n\n",
              E->fn, L->pb, (long long)L->G, (long long)(M * K), (long long)K, (long long)kc,
              (long long)K, (long long)kc, (long long)K, (long long)kc, (long long)M, mr,
              (long long)M, mr, (long long)M, mr, (long long)K);
    sb_printf(s,
              "static void %s_pada(float *restrict Ap, const float *restrict ap, int64_t kc, "
              "int64_t m) {\n"
              "    for (int64_t p = 0; p < kc; p++) {\n"
              "        int64_t ii = 0;\n"
              "        for (; ii < m; ii++) Ap[p * %d + ii] = ap[p * m + ii];\n"
              "        for (; ii < %d; ii++) Ap[p * %d + ii] = 0.0f;\n"
              "    }\n"
              "}\n\n",
              E->fn, mr, mr, mr);
    return ST_OK;
}

// ---- 2-D convolution from a padded, phase-split copy of X ----

// The geometry of lin_emit_padconv for R output rows per task (strides sh, sw; dilation 1).
// Xp holds, per phase (kh % sh, kw % sw) and channel, RI rows of Wq columns: row r', column x'
// of phase (a, c2) is input (sh * (oh0 + r') + a - padT, sw * x' + c2 - padL), zero outside.
typedef struct PadGeo {
    int64_t sh, sw, Wq, RI, plane, phases;
} PadGeo;

static PadGeo pad_geo(const Lin *L, int64_t R) {
    PadGeo g;
    g.sh = L->st[0];
    g.sw = L->st[1];
    g.Wq = L->out[1] + (L->k[1] - 1) / g.sw;
    g.RI = R + (L->k[0] - 1) / g.sh;
    g.plane = g.RI * g.Wq;
    g.phases = g.sh * g.sw;
    return g;
}

bool lin_padconv_ok(const Lin *L) {
    if (!(L->conv && !L->convt && L->S == 2 && L->pa >= 0 && L->st[0] >= 1 && L->st[0] <= 4 &&
          L->st[1] >= 1 && L->st[1] <= 4 && L->dil[0] == 1 && L->dil[1] == 1))
        return false;
    // The offset table is a static array of K int32 entries in the source: keep both small.
    PadGeo g = pad_geo(L, 1);
    return L->K <= ((int64_t)1 << 16) && g.phases * L->Cg * g.plane * 4 < ((int64_t)1 << 30);
}

double lin_padconv_fill(const Lin *L, int64_t R) {
    PadGeo g = pad_geo(L, R);
    return (double)(g.phases * L->Cg * g.plane);
}

// A 2-D convolution (any stride up to 4, dilation 1) without im2col. Each task (image and group
// b, R output rows from oh0) copies the input its rows need into Xp, zero-padded and split into
// stride phases (pad_geo): then the input of output pixel (r, x) at channel c and kernel offset
// (kh, kw) is Xp[q + koff[p]] with q = r * Wq + x and koff[p] = ((kh % sh) * sw + kw % sw) *
// Cg * plane + c * plane + (kh / sh) * Wq + kw / sw (p the GEMM's k = (c * KH + kh) * KW + kw),
// so an nr-wide run of q is one contiguous row of the B panel at every k, read in place by the
// indirect micro-kernel. Columns x >= OW of each Wq-wide row are computed and dropped, which
// lets panels run across output rows. Panels inside one row's valid columns store straight
// into the output; others go through ct and are scattered. A is packed per task (mc x kc
// blocks), the epilogue runs per row segment.
int lin_emit_padconv(Emit *E, Err *e) {
    const Lin *L = E->L;
    CLinConfig t;
    cgen_lin_config_unpack(E->cfg, &t);
    StrBuf *s = E->s;
    int mr = t.mr, nr = t.nr;
    int64_t kc = t.kc, mc = t.mc, R = t.rows;
    if (!lin_padconv_ok(L) || mr < 1 || nr < 16 || nr % 16 || kc < 1 || mc < mr || mc % mr || R < 1)
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int64_t H = L->in[0], W = L->in[1], OH = L->out[0], OW = L->out[1], KH = L->k[0], KW = L->k[1];
    int64_t padT = L->pad[0], padL = L->pad[1];
    R = ORCH_MIN(R, OH);
    PadGeo g = pad_geo(L, R);
    int64_t Wp = g.Wq, RI = g.RI, plane = g.plane, sh = g.sh, sw = g.sw;
    int64_t nrb = (OH + R - 1) / R, tasks = L->batch * nrb;
    int64_t xp = g.phases * L->Cg * plane + Wp + nr; // slack: the last panels read past the end
    int64_t kcr = ORCH_MIN(kc, L->K), mcr = ORCH_MIN(mc, (L->M + mr - 1) / mr * mr);
    // The indirect micro-kernel.
    sb_printf(s,
              "static inline __attribute__((always_inline)) void %s_uko(int64_t kc, const float "
              "*restrict a, const float *restrict b, const int32_t *restrict koff, float "
              "*restrict c, int64_t ldc, int accum) {\n",
              E->fn);
    sb_puts(s, "#if ORCH_LV == 16\n");
    emit_uk_body_x(s, mr, nr, 16, false, true);
    sb_puts(s, "#elif ORCH_LV == 8\n");
    emit_uk_body_x(s, mr, nr, 8, false, true);
    sb_puts(s, "#else\n");
    emit_uk_body_x(s, mr, nr, 4, false, true);
    sb_puts(s, "#endif\n}\n\n");
    bool wpre = t.packa == CLIN_PACK_PREPACKED;
    if (wpre && !L->w_prepack_ok)
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int rc = wpre ? emit_prepack_w(E, kc, mr) : emit_packa(E, mr, e);
    if (!rc && L->epi)
        rc = lin_emit_epilogue(E, e);
    if (rc)
        return rc;
    sb_printf(s, "static const int32_t %s_koff[%lld] = {", E->fn, (long long)L->K);
    for (int64_t p = 0; p < L->K; p++) {
        int64_t kw = p % KW, kh = p / KW % KH, c = p / (KW * KH);
        int64_t off =
            ((kh % sh) * sw + kw % sw) * L->Cg * plane + c * plane + (kh / sh) * Wp + kw / sw;
        sb_printf(s, "%s%lld", p == 0 ? "\n    " : p % 16 ? ", " : ",\n    ", (long long)off);
    }
    sb_puts(s, "};\n\n");
    // The epilogue over the valid columns of q0 .. q0 + nq (one call per output row touched).
    char epi[512] = "";
    if (L->epi)
        snprintf(
            epi, sizeof epi,
            "for (int64_t q = q0; q < q0 + nq;) { const int64_t rr = q / %lld, xx = q %% "
            "%lld, e = rr * %lld + %lld < q0 + nq ? %lld : q0 + nq - rr * %lld; if (xx < %lld) "
            "%s_epi(o, in, b, i0 + ir, m, (oh0 + rr) * %lld + xx, (e < %lld ? e : %lld) - xx); "
            "q = rr * %lld + %lld; }",
            (long long)Wp, (long long)Wp, (long long)Wp, (long long)Wp, (long long)Wp,
            (long long)Wp, (long long)OW, E->fn, (long long)OW, (long long)OW, (long long)OW,
            (long long)Wp, (long long)Wp);
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    sb_line(s, 1, "#pragma omp parallel if (%d)\n", tasks > 1 && lin_worth_parallel(L));
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "float *Ap = (float *)aligned_alloc(64, %lld);\n",
            (long long)((mcr * kcr * 4 + 63) / 64 * 64));
    sb_line(s, 2, "float *Xp = (float *)aligned_alloc(64, %lld);\n",
            (long long)((xp * 4 + 63) / 64 * 64));
    sb_line(s, 2, "float ct[%d] __attribute__((aligned(64)));\n", mr * nr);
    sb_line(s, 2, "#pragma omp for schedule(static)\n");
    sb_line(s, 2, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)tasks);
    sb_line(s, 3, "const int64_t b = t / %lld, oh0 = t %% %lld * %lld;\n", (long long)nrb,
            (long long)nrb, (long long)R);
    sb_line(s, 3, "const int64_t rows = %lld - oh0 < %lld ? %lld - oh0 : %lld;\n", (long long)OH,
            (long long)R, (long long)OH, (long long)R);
    lin_emit_batch_coords(E, 3, false);
    sb_line(s, 3,
            "const float *restrict X = (const float *)in[%d] + (q_n * %lld + q_g * %lld) * %lld;\n",
            L->pa, (long long)L->C, (long long)L->Cg, (long long)(H * W));
    // The padded phase rows: zero columns left and right of the input's, zero rows outside.
    sb_line(s, 3, "for (int64_t ph = 0; ph < %lld; ph++)\n", (long long)g.phases);
    sb_line(s, 3, "for (int64_t c = 0; c < %lld; c++)\n", (long long)L->Cg);
    sb_line(s, 4, "for (int64_t r = 0; r < %lld; r++) {\n", (long long)RI);
    sb_line(s, 5, "float *restrict d = Xp + (ph * %lld + c) * %lld + r * %lld;\n", (long long)L->Cg,
            (long long)plane, (long long)Wp);
    sb_line(s, 5, "const int64_t ih = (oh0 + r) * %lld + ph / %lld - %lld;\n", (long long)sh,
            (long long)sw, (long long)padT);
    sb_line(s, 5, "if (ih < 0 || ih >= %lld) { memset(d, 0, %lld); continue; }\n", (long long)H,
            (long long)(Wp * 4));
    sb_line(s, 5, "const float *restrict sr = X + (c * %lld + ih) * %lld;\n", (long long)H,
            (long long)W);
    if (sw == 1) {
        // Columns x = iw + padL for iw in [0, W), clipped to [0, Wp).
        int64_t x_lo = ORCH_MIN(ORCH_MAX(padL, 0), Wp), x_hi = ORCH_MIN(W + padL, Wp);
        int64_t iw_lo = x_lo - padL;
        if (x_lo > 0)
            sb_line(s, 5, "memset(d, 0, %lld);\n", (long long)(x_lo * 4));
        if (x_hi > x_lo)
            sb_line(s, 5, "memcpy(d + %lld, sr + %lld, %lld);\n", (long long)x_lo, (long long)iw_lo,
                    (long long)((x_hi - x_lo) * 4));
        if (ORCH_MAX(x_hi, x_lo) < Wp)
            sb_line(s, 5, "memset(d + %lld, 0, %lld);\n", (long long)ORCH_MAX(x_hi, x_lo),
                    (long long)((Wp - ORCH_MAX(x_hi, x_lo)) * 4));
    } else {
        sb_line(s, 5, "for (int64_t x = 0; x < %lld; x++) {\n", (long long)Wp);
        sb_line(s, 6, "const int64_t iw = x * %lld + ph %% %lld - %lld;\n", (long long)sw,
                (long long)sw, (long long)padL);
        sb_line(s, 6, "d[x] = iw >= 0 && iw < %lld ? sr[iw < 0 ? 0 : iw] : 0.0f;\n", (long long)W);
        sb_line(s, 5, "}\n");
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "memset(Xp + %lld, 0, %lld);\n", (long long)(g.phases * L->Cg * plane),
            (long long)((Wp + nr) * 4));
    sb_line(s, 3, "const int64_t Q = rows * %lld;\n", (long long)Wp);
    sb_line(s, 3, "for (int64_t p0 = 0; p0 < %lld; p0 += %lld) {\n", (long long)L->K,
            (long long)kc);
    sb_line(s, 4, "const int64_t kc = %lld - p0 < %lld ? %lld - p0 : %lld;\n", (long long)L->K,
            (long long)kc, (long long)L->K, (long long)kc);
    sb_line(s, 4, "const int last = p0 + kc >= %lld;\n", (long long)L->K);
    sb_line(s, 4, "(void)last;\n");
    sb_line(s, 4, "for (int64_t i0 = 0; i0 < %lld; i0 += %lld) {\n", (long long)L->M,
            (long long)mc);
    sb_line(s, 5, "const int64_t mc = %lld - i0 < %lld ? %lld - i0 : %lld;\n", (long long)L->M,
            (long long)mc, (long long)L->M, (long long)mc);
    if (!wpre)
        sb_line(s, 5, "%s_packa(Ap, in, b, i0, mc, p0, kc);\n", E->fn);
    sb_line(s, 5, "for (int64_t q0 = 0; q0 < Q; q0 += %d) {\n", nr);
    sb_line(s, 6, "const int64_t nq = Q - q0 < %d ? Q - q0 : %d;\n", nr, nr);
    sb_line(s, 6, "const int64_t r0 = q0 / %lld, x0 = q0 %% %lld;\n", (long long)Wp, (long long)Wp);
    sb_line(s, 6, "const int direct = x0 + %d <= %lld;\n", nr, (long long)OW);
    sb_line(s, 6, "for (int64_t ir = 0; ir < mc; ir += %d) {\n", mr);
    sb_line(s, 7, "const int64_t m = mc - ir < %d ? mc - ir : %d;\n", mr, mr);
    sb_line(s, 7, "float *cp = o + (b * %lld + i0 + ir) * %lld + (oh0 + r0) * %lld + x0;\n",
            (long long)L->M, (long long)L->N, (long long)OW);
    sb_line(s, 7, "const int full = direct && m == %d;\n", mr);
    if (wpre) {
        // fn_prepack_w's order: rows i.. of k-block p0 at q_g * M * K + p0 * M + i * kc.
        sb_line(
            s, 7,
            "const float *ap = (const float *)in[%d] + q_g * %lld + p0 * %lld + (i0 + ir) * kc;\n",
            L->pb, (long long)(L->M * L->K), (long long)L->M);
        sb_line(s, 7, "if (m < %d) { %s_pada(Ap, ap, kc, m); ap = Ap; }\n", mr, E->fn);
    } else {
        sb_line(s, 7, "const float *ap = Ap + ir * kc;\n");
    }
    sb_line(s, 7,
            "%s_uko(kc, ap, Xp + q0, %s_koff + p0, full ? cp : ct, full ? %lld : "
            "%d, full && p0 > 0);\n",
            E->fn, E->fn, (long long)L->N, nr);
    sb_line(s, 7, "if (!full)\n");
    sb_line(s, 8, "for (int64_t jj = 0; jj < nq; jj++) {\n");
    sb_line(s, 9, "const int64_t rr = (q0 + jj) / %lld, xx = (q0 + jj) %% %lld;\n", (long long)Wp,
            (long long)Wp);
    sb_line(s, 9, "if (xx >= %lld) continue;\n", (long long)OW);
    sb_line(s, 9, "float *y = o + (b * %lld + i0 + ir) * %lld + (oh0 + rr) * %lld + xx;\n",
            (long long)L->M, (long long)L->N, (long long)OW);
    sb_line(s, 9, "for (int64_t ii = 0; ii < m; ii++)\n");
    sb_line(s, 10, "y[ii * %lld] = (p0 > 0 ? y[ii * %lld] : 0.0f) + ct[ii * %d + jj];\n",
            (long long)L->N, (long long)L->N, nr);
    sb_line(s, 8, "}\n");
    if (L->epi)
        sb_line(s, 7, "if (last) { %s }\n", epi);
    sb_line(s, 6, "}\n");
    sb_line(s, 5, "}\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "free(Ap);\n");
    sb_line(s, 2, "free(Xp);\n");
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

// ---- skinny matmuls ----

// M <= 8: out rows are few, so each thread owns a block of jb columns of all rows and streams B
// (read in place) once; the tiled kernel would pad M to mr and pack all of B.
int lin_emit_gemv(Emit *E, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CLinConfig t;
    cgen_lin_config_unpack(E->cfg, &t);
    int64_t jb = t.jb;
    if (L->conv || L->pb < 0 || L->M > 8 || jb < 8)
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int rc = L->epi ? lin_emit_epilogue(E, e) : ST_OK;
    if (rc)
        return rc;
    int64_t nb = (L->N + jb - 1) / jb;
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    sb_line(s, 1, "#pragma omp parallel for if (%d) schedule(static)\n",
            L->batch * nb > 1 && lin_worth_parallel(L));
    sb_line(s, 1, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)(L->batch * nb));
    sb_line(s, 2, "const int64_t b = t / %lld, j0 = t %% %lld * %lld;\n", (long long)nb,
            (long long)nb, (long long)jb);
    sb_line(s, 2, "const int64_t n = %lld - j0 < %lld ? %lld - j0 : %lld;\n", (long long)L->N,
            (long long)jb, (long long)L->N, (long long)jb);
    lin_emit_batch_coords(E, 2, true);
    sb_line(s, 2, "const float *restrict Bb = (const float *)in[%d] + boff + j0;\n", L->pb);
    sb_line(s, 2, "enum { JB = %lld };\n", (long long)jb);
    sb_line(s, 2, "float acc[%lld][JB] __attribute__((aligned(64)));\n", (long long)L->M);
    sb_line(s, 2, "memset(acc, 0, sizeof acc);\n");
    // Full blocks: four B rows per step, so each accumulator is loaded and stored once per four
    // rows (the accumulators live in L1: jb x M does not fit the registers).
    for (int full = 1; full >= 0; full--) {
        sb_line(s, 2, full ? "if (n == %lld) {\n" : "} else {\n", (long long)jb);
        sb_line(s, 3, "int64_t k = 0;\n");
        for (int step = full ? 4 : 1; step >= 1; step -= 3) {
            sb_line(s, 3, "for (; k + %d <= %lld; k += %d) {\n", step, (long long)L->K, step);
            for (int u = 0; u < step; u++) {
                sb_line(s, 4, "const float *restrict br%d = Bb + (k + %d) * %lld;\n", u, u,
                        (long long)L->N);
            }
            for (int64_t i = 0; i < L->M; i++) {
                sb_line(s, 4, "{\n");
                for (int u = 0; u < step; u++) {
                    char iv[48], kv[32], av[16];
                    snprintf(iv, sizeof iv, "(int64_t)%lld", (long long)i);
                    snprintf(kv, sizeof kv, "k_%d", u);
                    snprintf(av, sizeof av, "av%d", u);
                    sb_line(s, 5, "const int64_t k_%d = k + %d;\n", u, u);
                    sb_line(s, 5, "float av%d;\n", u);
                    rc = lin_emit_a_value(E, 5, iv, kv, av, e);
                    if (rc)
                        return rc;
                }
                if (full)
                    sb_line(s, 5, "#pragma omp simd\n");
                sb_line(s, 5, "for (int64_t jj = 0; jj < %s; jj++)\n", full ? "JB" : "n");
                sb_line(s, 6, "acc[%lld][jj] += av0 * br0[jj]", (long long)i);
                for (int u = 1; u < step; u++)
                    sb_printf(s, " + av%d * br%d[jj]", u, u);
                sb_puts(s, ";\n");
                sb_line(s, 4, "}\n");
            }
            sb_line(s, 3, "}\n");
            if (step == 1)
                break;
        }
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "for (int64_t i = 0; i < %lld; i++)\n", (long long)L->M);
    sb_line(s, 3,
            "for (int64_t jj = 0; jj < n; jj++) o[(b * %lld + i) * %lld + j0 + jj] = acc[i][jj];\n",
            (long long)L->M, (long long)L->N);
    if (L->epi)
        sb_line(s, 2, "%s_epi(o, in, b, 0, %lld, j0, n);\n", E->fn, (long long)L->M);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

// N <= 4: each output is a dot product of an A row (contiguous) with a B column.
int lin_emit_dot(Emit *E, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (L->conv || L->pa < 0 || L->pb < 0 || L->N > 4)
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int rc = L->epi ? lin_emit_epilogue(E, e) : ST_OK;
    if (rc)
        return rc;
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    sb_line(s, 1, "#pragma omp parallel for if (%d) schedule(static)\n",
            L->batch * L->M > 1 && lin_worth_parallel(L));
    sb_line(s, 1, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)(L->batch * L->M));
    sb_line(s, 2, "const int64_t b = t / %lld, i = t %% %lld;\n", (long long)L->M, (long long)L->M);
    lin_emit_batch_coords(E, 2, true);
    sb_line(s, 2, "const float *restrict ar = (const float *)in[%d] + aoff + i * %lld;\n", L->pa,
            (long long)L->K);
    sb_line(s, 2, "const float *restrict bc = (const float *)in[%d] + boff;\n", L->pb);
    sb_line(s, 2, "for (int64_t j = 0; j < %lld; j++) {\n", (long long)L->N);
    sb_line(s, 3, "float acc = 0.0f;\n");
    sb_line(s, 3, "#pragma omp simd reduction(+ : acc)\n");
    sb_line(s, 3, "for (int64_t k = 0; k < %lld; k++) acc += ar[k] * bc[k * %lld + j];\n",
            (long long)L->K, (long long)L->N);
    sb_line(s, 3, "o[t * %lld + j] = acc;\n", (long long)L->N);
    sb_line(s, 2, "}\n");
    if (L->epi)
        sb_line(s, 2, "%s_epi(o, in, b, i, 1, 0, %lld);\n", E->fn, (long long)L->N);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}
