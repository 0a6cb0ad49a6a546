// The C target's fused attention kernel (cgen_attn.h). One OpenMP task per (batch index
// over O's lead dims, block of BM query rows): the block's Q rows are staged once, then for each
// tile of BN keys the tile's K^T ([D][BN]) and V ([BN][DvP]) are staged through cexpr (so head
// split transposes, broadcast batch dims and strided layouts are read once, unit-stride where the
// source is), the block's scores come from a register-tiled product (rows x vectors of keys, no
// horizontal sums), the pre-softmax chain runs on them through cexpr (its reader answers the raw
// score; masks load as kernel inputs), and an online softmax (running max m and sum l per row;
// the row's accumulators are rescaled by exp(m_old - m_new) when the max grows) turns them into
// weights that a second register-tiled product adds into the block's O accumulators. O = acc / l
// at the end. Only BM x BN scores exist at a time, in a per-thread buffer. With config st=1 the
// key tiles of every batch index are staged once, before the blocks, into whole-batch buffers
// (for many blocks per batch index, where per-block staging would repeat the transposes).
// Grouped-query attention (config gq=1, AttnSpec.kv_group G > 1): a task takes the block's rows
// of the G heads that share one K and V, stages each key tile once (read at the group's first
// head) and runs the G heads' products and softmax steps against it, so K and V are read in
// place once per group, never expanded to every head.
// Widths: V's rows are padded to DvP = 16 * ceil(Dv / 16) and a key tile's K^T columns to a
// multiple of 16, both with zeros, and the scores past a tile's keys are -inf (weight 0), so the
// vector loops have no tails for any ORCH_LV (4, 8, 16).
// Needs: cgen_prelude() and cgen_lin_prelude() (orch_lv_*) in the translation unit.
// Guarantees: the output of the candidate as prim_interp.c computes it, up to float32 rounding.
#include "../../candidates/attention.h"
#include "cgen.h"
#include "cgen_attn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// KernelConfig.p[] slots of CAttnConfig's fields (cgen_attn.h).
enum { P_BM, P_BN, P_MR, P_NV, P_ST, P_GQ };

static int64_t pad16(int64_t n) {
    return (n + 15) / 16 * 16;
}

typedef struct Em {
    const AttnSpec *a;
    const char *fn;
    Cexpr *x;
} Em;

// Answers the raw score S at the chain's index, which is the current (row, key) of the
// pre-softmax loop: every link of the chain has S's shape, so the index must be the identity.
static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    (void)code;
    (void)indent;
    const Em *E = ctx;
    const AttnSpec *a = E->a;
    bool ok = rq->tensor == a->s && rq->affine && rq->rank == a->rank;
    const Tensor *S = a->pg->tensors[a->s];
    for (int d = 0; ok && d < rq->rank; d++) {
        ok = rq->cst[d] == 0;
        for (int q = 0; ok && q < rq->rank; q++)
            ok = rq->coef[d][q] == (q == d && S->dims[d] != 1 ? 1 : 0);
    }
    if (!ok)
        return err_set(e, ST_UNSUPPORTED,
                       "attention kernel %s: the pre-softmax chain reads tensor %d other than the "
                       "scores at their own index",
                       E->fn, rq->tensor);
    snprintf(out, cap, "a_sraw");
    return ST_OK;
}

// static void NAME(a, b, c, m, kn, nc): c[r][j] (+)= sum_{k < kn} a[r*lda + k] b[k*ldb + j] for
// r < m, j < nc (nc a multiple of 16): blocks of mr rows x nv vectors accumulated in registers,
// then single rows and single vectors.
static void emit_panel(StrBuf *s, const char *fn, const char *name, int mr, int nv, int64_t lda,
                       int64_t ldb, int64_t ldc, bool accumulate) {
    sb_printf(s,
              "static void %s_%s(const float *restrict a, const float *restrict b, "
              "float *restrict c, int64_t m, int64_t kn, int64_t nc) {\n",
              fn, name);
    sb_line(s, 1, "int64_t r = 0;\n");
    for (int pass = 0; pass < 2; pass++) {
        int rows = pass == 0 ? mr : 1;
        if (pass == 0)
            sb_line(s, 1, "for (; r + %d <= m; r += %d) {\n", rows, rows);
        else
            sb_line(s, 1, "for (; r < m; r++) {\n");
        sb_line(s, 2, "int64_t j = 0;\n");
        for (int vpass = 0; vpass < 2; vpass++) {
            int vecs = vpass == 0 ? nv : 1;
            if (vpass == 0 && nv == 1)
                continue;
            if (vpass == 0)
                sb_line(s, 2, "for (; j + %d * ORCH_LV <= nc; j += %d * ORCH_LV) {\n", vecs, vecs);
            else
                sb_line(s, 2, "for (; j < nc; j += ORCH_LV) {\n");
            for (int i = 0; i < rows; i++)
                for (int v = 0; v < vecs; v++) {
                    if (accumulate)
                        sb_line(s, 3,
                                "orch_lv s%d_%d = orch_lv_load(c + (r + %d) * %lld + j + %d * "
                                "ORCH_LV);\n",
                                i, v, i, (long long)ldc, v);
                    else
                        sb_line(s, 3, "orch_lv s%d_%d = orch_lv_zero();\n", i, v);
                }
            sb_line(s, 3, "const float *restrict bp = b + j;\n");
            sb_line(s, 3, "const float *restrict ap = a + r * %lld;\n", (long long)lda);
            sb_line(s, 3, "for (int64_t k = 0; k < kn; k++, bp += %lld) {\n", (long long)ldb);
            for (int v = 0; v < vecs; v++)
                sb_line(s, 4, "const orch_lv w%d = orch_lv_load(bp + %d * ORCH_LV);\n", v, v);
            for (int i = 0; i < rows; i++) {
                sb_line(s, 4, "{ const orch_lv x = orch_lv_set1(ap[%lld + k]);\n",
                        (long long)(i * lda));
                for (int v = 0; v < vecs; v++)
                    sb_line(s, 5, "s%d_%d = orch_lv_fma(x, w%d, s%d_%d);\n", i, v, v, i, v);
                sb_line(s, 4, "}\n");
            }
            sb_line(s, 3, "}\n");
            for (int i = 0; i < rows; i++)
                for (int v = 0; v < vecs; v++)
                    sb_line(s, 3,
                            "orch_lv_store(c + (r + %d) * %lld + j + %d * ORCH_LV, s%d_%d);\n", i,
                            (long long)ldc, v, i, v);
            sb_line(s, 2, "}\n");
        }
        sb_line(s, 1, "}\n");
    }
    sb_puts(s, "}\n\n");
}

// static float NAME_exp(x): exp(x) for the softmax's x <= 0, as prelude's orch_expf (x - k ln2
// with a two-part ln2, Taylor series to r^7, below one ulp) but 0 below -87 instead of a
// subnormal: masked scores (-FLT_MAX, -10000) give tiny weights, and computing subnormals costs
// microcode assists per element (the causal mask's half of the scores took 60% of the exp time),
// while weights under 1e-38 against a sum >= 1 change nothing a float can hold.
static void emit_exp(StrBuf *s, const char *fn) {
    sb_printf(s, "static inline float %s_exp(float x) {\n", fn);
    sb_line(s, 1, "float xc = x < -87.0f ? -87.0f : x;\n");
    sb_line(s, 1, "xc = xc > 88.0f ? 88.0f : xc;\n");
    sb_line(s, 1, "float k = rintf(xc * 1.44269504088896341f);\n");
    sb_line(s, 1, "k = k == k ? k : 0.0f;\n");
    sb_line(s, 1, "float r = xc - k * 0.693145751953125f;\n");
    sb_line(s, 1, "r = r - k * 1.428606765330187e-06f;\n");
    sb_line(s, 1, "float p = 1.0f / 5040.0f;\n");
    static const char *coef[] = {"1.0f / 720.0f", "1.0f / 120.0f", "1.0f / 24.0f", "1.0f / 6.0f",
                                 "0.5f",          "1.0f",          "1.0f"};
    for (size_t i = 0; i < ORCH_COUNT(coef); i++)
        sb_line(s, 1, "p = p * r + %s;\n", coef[i]);
    sb_line(s, 1, "union { float f; int32_t i; } sc;\n");
    sb_line(s, 1, "sc.i = ((int32_t)k + 127) << 23;\n");
    sb_line(s, 1, "return x < -87.0f ? 0.0f : p * sc.f;\n");
    sb_puts(s, "}\n\n");
}

// Emits `dst = value of tensor t at idx;` at indent, then forgets the memoised values (the
// caller's loop body ends there).
static int emit_load(Em *E, int t, const char *const *idx, const char *dst, StrBuf *s, int ind,
                     Err *e) {
    char v[64];
    int rc = cexpr_value(E->x, t, idx, s, ind, v, sizeof v, e);
    cexpr_forget(E->x);
    if (rc)
        return rc;
    sb_line(s, ind, "%s = %s;\n", dst, v);
    return ST_OK;
}

// Emits `const float a_sv = ` the pre-softmax chain's value at (a_qi, a_j0 + a_jj) from the raw
// score a_sr[a_jj] (the raw score itself when there is no chain).
static int emit_chain_value(Em *E, StrBuf *s, int ind, const char *const *ix, Err *e) {
    if (E->a->n_pre == 0) {
        sb_line(s, ind, "const float a_sv = a_sr[a_jj];\n");
        return ST_OK;
    }
    sb_line(s, ind, "const int64_t a_kj = a_j0 + a_jj;\n");
    sb_line(s, ind, "const float a_sraw = a_sr[a_jj];\n");
    return emit_load(E, E->a->sp, ix, "const float a_sv", s, ind, e);
}

// static void NAME_sm(in, sb, mb, lb, ob, m, i0, j0, nk, lead): one key tile's softmax step for
// the block's m rows: the pre-softmax chain on the scores sb (row stride BN) through cexpr, the
// running max mb, the weights exp(s - m_new) in place of the scores, the running sums lb (16
// per-lane partial sums per row, added up once at the end: no horizontal sum per tile), the
// accumulators ob rescaled by exp(m_old - m_new). In three passes over the rows (chain and max;
// the rescale factors, vectorised across rows; weights and sums) so that the rows' independent
// work overlaps instead of each row waiting on its own reductions. Loops run in chunks of 16
// lanes with per-lane partial maxima; the scores past the tile's keys, up to its width rounded
// up to 16, become -inf and weigh 0. Its own function, kept out of line: inlined, the compiler
// specialised the caller's full tiles (a constant nk) by copying these loops, and the copies
// lost their vectorisation.
static int emit_softmax(Em *E, StrBuf *s, int64_t BM, int64_t BN, int64_t DvP, Err *e) {
    const AttnSpec *a = E->a;
    const char *fn = E->fn;
    const int nl = a->rank - 2;
    sb_printf(s,
              "static __attribute__((noinline)) void %s_sm(const void *const *in, "
              "float *restrict a_sb, float *restrict a_mb, float *restrict a_lb, "
              "float *restrict a_ob, int64_t a_m, int64_t a_i0, int64_t a_j0, int64_t a_nk, "
              "const int64_t *a_lead) {\n",
              fn);
    sb_line(s, 1, "(void)in;\n");
    sb_line(s, 1, "(void)a_lead;\n");
    sb_line(s, 1, "(void)a_i0;\n");
    sb_line(s, 1, "(void)a_j0;\n");
    char lead[ORCH_MAX_RANK][16];
    const char *ix[ORCH_MAX_RANK];
    for (int d = 0; d < nl; d++) {
        snprintf(lead[d], sizeof lead[d], "a_b%d", d);
        ix[d] = lead[d];
        sb_line(s, 1, "const int64_t a_b%d = a_lead[%d];\n", d, d);
        sb_line(s, 1, "(void)a_b%d;\n", d);
    }
    ix[nl] = "a_qi";
    ix[nl + 1] = "a_kj";
    sb_line(s, 1, "const int64_t a_nkp = (a_nk + 15) / 16 * 16, a_nkf = a_nk / 16 * 16;\n");
    sb_line(s, 1, "float a_mn[%lld], a_al[%lld];\n", (long long)BM, (long long)BM);
    // Pass 1: the chain and the max (NaNs skipped, as the reference's max-reduce does): whole
    // chunks of 16 keys (the chain's loads stay affine in the lane, so they vectorise), the
    // tail keys one by one, -inf up to the rounded width; the partial maxima by halves.
    sb_line(s, 1, "for (int64_t a_r = 0; a_r < a_m; a_r++) {\n");
    sb_line(s, 2, "float *restrict a_sr = a_sb + a_r * %lld;\n", (long long)BN);
    if (a->n_pre > 0)
        sb_line(s, 2, "const int64_t a_qi = a_i0 + a_r;\n");
    sb_line(s, 2, "float a_pm[16];\n");
    sb_line(s, 2, "for (int a_l = 0; a_l < 16; a_l++)\n");
    sb_line(s, 3, "a_pm[a_l] = -INFINITY;\n");
    sb_line(s, 2, "for (int64_t a_jv = 0; a_jv < a_nkf; a_jv += 16) {\n");
    sb_line(s, 3, "#pragma omp simd\n");
    sb_line(s, 3, "for (int a_l = 0; a_l < 16; a_l++) {\n");
    sb_line(s, 4, "const int64_t a_jj = a_jv + a_l;\n");
    int rc = emit_chain_value(E, s, 4, ix, e);
    sb_line(s, 4, "a_sr[a_jj] = a_sv;\n");
    sb_line(s, 4, "a_pm[a_l] = a_sv > a_pm[a_l] ? a_sv : a_pm[a_l];\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "float a_mt = -INFINITY;\n");
    sb_line(s, 2, "for (int64_t a_jj = a_nkf; a_jj < a_nk; a_jj++) {\n");
    if (!rc)
        rc = emit_chain_value(E, s, 3, ix, e);
    sb_line(s, 3, "a_sr[a_jj] = a_sv;\n");
    sb_line(s, 3, "a_mt = a_sv > a_mt ? a_sv : a_mt;\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "for (int64_t a_jj = a_nk; a_jj < a_nkp; a_jj++)\n");
    sb_line(s, 3, "a_sr[a_jj] = -INFINITY;\n");
    for (int w = 8; w >= 1; w /= 2) {
        sb_line(s, 2, "for (int a_l = 0; a_l < %d; a_l++)\n", w);
        sb_line(s, 3, "a_pm[a_l] = a_pm[a_l + %d] > a_pm[a_l] ? a_pm[a_l + %d] : a_pm[a_l];\n", w,
                w);
    }
    sb_line(s, 2, "a_mt = a_pm[0] > a_mt ? a_pm[0] : a_mt;\n");
    sb_line(s, 2, "a_mn[a_r] = a_mt > a_mb[a_r] ? a_mt : a_mb[a_r];\n");
    sb_line(s, 1, "}\n");
    // Pass 2: the rescale factors.
    sb_line(s, 1, "#pragma omp simd\n");
    sb_line(s, 1, "for (int64_t a_r = 0; a_r < a_m; a_r++) {\n");
    sb_line(s, 2, "a_al[a_r] = %s_exp(a_mb[a_r] - a_mn[a_r]);\n", fn);
    sb_line(s, 2, "a_mb[a_r] = a_mn[a_r];\n");
    sb_line(s, 1, "}\n");
    // Pass 3: the weights (0 past the keys), the sums, the accumulators rescaled.
    sb_line(s, 1, "for (int64_t a_r = 0; a_r < a_m; a_r++) {\n");
    sb_line(s, 2, "float *restrict a_sr = a_sb + a_r * %lld;\n", (long long)BN);
    sb_line(s, 2, "float *restrict a_lr = a_lb + a_r * 16;\n");
    sb_line(s, 2, "const float a_mnew = a_mn[a_r], a_alpha = a_al[a_r];\n");
    sb_line(s, 2, "float a_ps[16];\n");
    sb_line(s, 2, "for (int a_l = 0; a_l < 16; a_l++)\n");
    sb_line(s, 3, "a_ps[a_l] = a_lr[a_l] * a_alpha;\n");
    sb_line(s, 2, "for (int64_t a_jv = 0; a_jv < a_nkp; a_jv += 16) {\n");
    sb_line(s, 3, "#pragma omp simd\n");
    sb_line(s, 3, "for (int a_l = 0; a_l < 16; a_l++) {\n");
    sb_line(s, 4, "const float a_p = %s_exp(a_sr[a_jv + a_l] - a_mnew);\n", fn);
    sb_line(s, 4, "a_sr[a_jv + a_l] = a_p;\n");
    sb_line(s, 4, "a_ps[a_l] += a_p;\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "for (int a_l = 0; a_l < 16; a_l++)\n");
    sb_line(s, 3, "a_lr[a_l] = a_ps[a_l];\n");
    sb_line(s, 2, "if (a_alpha != 1.0f)\n");
    sb_line(s, 3, "for (int64_t a_c = 0; a_c < %lld; a_c++)\n", (long long)DvP);
    sb_line(s, 4, "a_ob[a_r * %lld + a_c] *= a_alpha;\n", (long long)DvP);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return rc;
}

static double flops_of(const AttnSpec *a) {
    return 2.0 * (double)a->B * (double)a->M * (double)a->N * (double)(a->D + a->Dv);
}

// Declares the lead digits a_b<d> of the batch index `bi` (row-major over O's lead dims). With
// a K/V group (G > 1 along axis ga) bi counts groups: that axis has lead[ga] / G indices, its
// digit is a_bk and a_bs = a_bk * G is the group's first head (the index K and V are read at);
// the heads' own digit a_b<ga> = a_bs + a_h is declared in the loop over the group's heads.
static void emit_digits(StrBuf *s, int ind, const AttnSpec *a, const char *bi, int64_t G, int ga) {
    const int nl = a->rank - 2;
    if (nl > 0)
        sb_line(s, ind, "int64_t a_rest = %s;\n", bi);
    for (int d = nl - 1; d >= 0; d--) {
        if (d == ga) {
            sb_line(s, ind, "const int64_t a_bk = a_rest %% %lld; a_rest /= %lld;\n",
                    (long long)(a->lead[d] / G), (long long)(a->lead[d] / G));
            sb_line(s, ind, "const int64_t a_bs = a_bk * %lld; (void)a_bs;\n", (long long)G);
            continue;
        }
        sb_line(s, ind, "const int64_t a_b%d = a_rest %% %lld; a_rest /= %lld; (void)a_b%d;\n", d,
                (long long)a->lead[d], (long long)a->lead[d], d);
    }
}

// Stages the key tile (a_j0, a_nk) of the batch whose digits are declared: K^T into
// a_ks[d * ldk + jj] (columns up to the tile's width rounded up to 16, zero past its keys) and V
// into a_vs[jj * DvP + c] (zero past Dv), every value through cexpr. A K^T that is a kernel input
// is dense along the keys; one the candidate computes by a head-split transpose comes from rows
// of keys dense along d: the loop order follows.
static int emit_stage_tile(Em *E, StrBuf *s, int ind, const char **ix, int64_t ldk, Err *e) {
    const AttnSpec *a = E->a;
    const int nl = a->rank - 2;
    const int64_t D = a->D, Dv = a->Dv, DvP = pad16(Dv);
    char dst[128];
    ix[nl] = "a_d";
    ix[nl + 1] = "a_kj";
    snprintf(dst, sizeof dst, "a_ks[a_d * %lld + a_jj]", (long long)ldk);
    int rc;
    if (cgen_input_pos(a->c, a->kt) >= 0) {
        sb_line(s, ind, "for (int64_t a_d = 0; a_d < %lld; a_d++)\n", (long long)D);
        sb_line(s, ind + 1, "for (int64_t a_jj = 0; a_jj < a_nk; a_jj++) {\n");
        sb_line(s, ind + 2, "const int64_t a_kj = a_j0 + a_jj;\n");
        rc = emit_load(E, a->kt, ix, dst, s, ind + 2, e);
        sb_line(s, ind + 1, "}\n");
    } else {
        sb_line(s, ind, "for (int64_t a_jj = 0; a_jj < a_nk; a_jj++) {\n");
        sb_line(s, ind + 1, "const int64_t a_kj = a_j0 + a_jj;\n");
        sb_line(s, ind + 1, "for (int64_t a_d = 0; a_d < %lld; a_d++) {\n", (long long)D);
        rc = emit_load(E, a->kt, ix, dst, s, ind + 2, e);
        sb_line(s, ind + 1, "}\n");
        sb_line(s, ind, "}\n");
    }
    sb_line(s, ind, "for (int64_t a_d = 0; a_d < %lld; a_d++)\n", (long long)D);
    sb_line(s, ind + 1, "for (int64_t a_jj = a_nk; a_jj < (a_nk + 15) / 16 * 16; a_jj++)\n");
    sb_line(s, ind + 2, "a_ks[a_d * %lld + a_jj] = 0.0f;\n", (long long)ldk);
    sb_line(s, ind, "for (int64_t a_jj = 0; a_jj < a_nk; a_jj++) {\n");
    sb_line(s, ind + 1, "const int64_t a_kj = a_j0 + a_jj;\n");
    sb_line(s, ind + 1, "for (int64_t a_c = 0; a_c < %lld; a_c++) {\n", (long long)Dv);
    ix[nl] = "a_kj";
    ix[nl + 1] = "a_c";
    snprintf(dst, sizeof dst, "a_vs[a_jj * %lld + a_c]", (long long)DvP);
    if (!rc)
        rc = emit_load(E, a->v, ix, dst, s, ind + 2, e);
    sb_line(s, ind + 1, "}\n");
    if (DvP > Dv) {
        sb_line(s, ind + 1, "for (int64_t a_c = %lld; a_c < %lld; a_c++)\n", (long long)Dv,
                (long long)DvP);
        sb_line(s, ind + 2, "a_vs[a_jj * %lld + a_c] = 0.0f;\n", (long long)DvP);
    }
    sb_line(s, ind, "}\n");
    return rc;
}

// Bytes of the whole-batch staging buffers (config st=1): K^T tile by tile, [Bk][tiles][D][BN]
// (each tile laid out as a per-block one: rows a whole batch index apart would fall into the
// same cache sets), and V [Bk][N][DvP]; Bk = B / G batch indices of distinct K and V (G: the
// K/V group a task takes, 1 without).
static int64_t staged_bytes(const AttnSpec *a, int64_t BN, int64_t G) {
    return 4 * (a->B / G) * (a->D * (a->N + BN - 1) / BN * BN + a->N * pad16(a->Dv));
}

// The fitted constants of the attention kernels' CPU model and the configs offered. "Not
// recorded": no measurement behind the number was written down, and none of these is recorded
// as checked on three or more shapes; "not fitted": a default or a definition rather than a
// tuned number.
typedef struct CpuAttnModel {
    // FMA instructions a core issues per cycle: 2. Not recorded.
    double fma_pipes;
    // Core clock of the peak: 3 GHz. Not recorded.
    double clock_hz;
    // The peak's factor without FMA (a multiply and an add issue separately): 0.5. Not fitted.
    double no_fma;
    // A register tile's overhead per row, in FMA slots (the broadcasts): 0.5. Not recorded.
    double bcast_row;
    // Accumulator vectors that keep the FMA pipes busy: 8. Not recorded.
    double acc_full;
    // Factor when accumulators, key or V vectors and a broadcast exceed the vector registers:
    // 0.4. Not recorded.
    double spill;
    // Gain per tile row (taller tiles stream the staged tiles fewer times): 0.03. Fitted on one
    // shape (8 x 2 beat 4 x 4 by 15% on 4096 keys, the tiles in L1 or not); machine not
    // recorded.
    double tall_row;
    // Cost of a block's last rows (fewer than mr: single-row tiles) relative to a full tile's
    // row: 3. Not recorded.
    double tail_row;
    // L1 and L2 bytes assumed where HwInfo has none: 32 KiB, 512 KiB. Not fitted.
    double l1, l2;
    // Share of L1 beyond which a staged K or V tile is streamed from L2 by every pass of mr
    // rows: 0.5. Not recorded.
    double tile_l1_frac;
    // Bytes/s of those passes from L2: 200e9. Not recorded.
    double bw_tile;
    // Vector operations of the softmax per score (exp, max, sum): 24. Not recorded.
    double softmax_ops;
    // ... per primitive of the pre-softmax chain: 4. Not recorded.
    double pre_ops;
    // Vector operations a core issues per second: 2.5e9. Not recorded.
    double vec_ops_s;
    // Seconds per (row, key tile) of the online softmax's bookkeeping: 30e-9. Not recorded.
    double row_tile_s;
    // Share of L2 within which a batch index's K and V are streamed from L2 by every block: 0.5.
    // Not recorded.
    double kv_l2_frac;
    // Bytes/s of that stream from L2: 100e9; from L3 or memory: 25e9. Not recorded.
    double bw_kv_l2, bw_kv_mem;
    // Seconds per element staged: K^T transposed from rows of keys (element by element): 1e-9;
    // a dense K^T or V (vector copies): 0.2e-9. Not recorded.
    double stage_kt_s, stage_dense_s;
    // Factor when a block's buffers exceed L2: 1.3; when a tile's working set exceeds L1: 1.1.
    // Not recorded.
    double l2_over, l1_over;
    // Score rows of a tile counted in its L1 working set at most: 8. Not recorded.
    int64_t tile_ws_rows;
    // Bytes/s from memory, all cores: 20e9. Not recorded.
    double bw_mem;
    // Seconds a parallel loop's fork and join cost: 3e-6. Not recorded.
    double fork_s;
    // Largest whole-batch staging buffer (st=1), bytes; also the emitter's limit: 64 MiB. Not
    // recorded.
    int64_t stage_all_max;
    // Query rows per block offered: 8 to 128. Not recorded.
    int64_t bms[5];
    // Keys per tile offered: 32 to 256. Not recorded.
    int64_t bns[4];
    // Register tiles (rows x vectors) offered on AVX-512: 4x4, 6x2, 8x2. Not recorded.
    int blocks_avx512[3][2];
    // ... on narrower vectors: 4x2, 6x2, 3x4. Not recorded.
    int blocks_narrow[3][2];
} CpuAttnModel;

static const CpuAttnModel cpu_attn_model = {
    .fma_pipes = 2.0,
    .clock_hz = 3e9,
    .no_fma = 0.5,
    .bcast_row = 0.5,
    .acc_full = 8.0,
    .spill = 0.4,
    .tall_row = 0.03,
    .tail_row = 3.0,
    .l1 = 32768.0,
    .l2 = 524288.0,
    .tile_l1_frac = 0.5,
    .bw_tile = 200e9,
    .softmax_ops = 24.0,
    .pre_ops = 4.0,
    .vec_ops_s = 2.5e9,
    .row_tile_s = 30e-9,
    .kv_l2_frac = 0.5,
    .bw_kv_l2 = 100e9,
    .bw_kv_mem = 25e9,
    .stage_kt_s = 1.0e-9,
    .stage_dense_s = 0.2e-9,
    .l2_over = 1.3,
    .l1_over = 1.1,
    .tile_ws_rows = 8,
    .bw_mem = 20e9,
    .fork_s = 3e-6,
    .stage_all_max = 64 << 20,
    .bms = {8, 16, 32, 64, 128},
    .bns = {32, 64, 128, 256},
    .blocks_avx512 = {{4, 4}, {6, 2}, {8, 2}},
    .blocks_narrow = {{4, 2}, {6, 2}, {3, 4}},
};

static int emit_kernel(const AttnSpec *a, const KernelConfig *cfg, const char *fn, StrBuf *src,
                       Err *e) {
    CAttnConfig t;
    cgen_attn_config_unpack(cfg, &t);
    int64_t BM = t.bm, BN = t.bn;
    int mr = t.mr, nv = t.nv;
    bool all = t.st == 1;
    // G heads per task sharing one K and V (the group's axis ga), or one head per task.
    const int64_t G = t.gq == 1 ? a->kv_group : 1;
    const int ga = G > 1 ? a->kv_axis : -1;
    if (BM < 1 || BM > 1024 || BN < 16 || BN > 1024 || BN % 16 || mr < 1 || mr > 16 || nv < 1 ||
        nv > 8 || t.st < 0 || t.st > 1 || t.gq < 0 || t.gq > 1 || (t.gq == 1 && G < 2) ||
        (all && staged_bytes(a, BN, G) > cpu_attn_model.stage_all_max))
        return err_set(e, ST_USAGE, "attention kernel %s: bad config '%s'", fn, cfg->desc);
    const int64_t M = a->M, N = a->N, D = a->D, Dv = a->Dv, DvP = pad16(Dv);
    const int nl = a->rank - 2; // lead dims
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Em E = {a, fn, cexpr_create(a->pg, a->c, fn, &decls)};
    cexpr_set_reader(E.x, reader, &E);
    StrBuf *s = &body;
    // S = Q·K^T of the block's rows against a tile (c = scores), and O += P·V.
    emit_panel(s, fn, "qk", mr, nv, D, BN, BN, false);
    emit_panel(s, fn, "pv", mr, nv, BN, DvP, DvP, true);
    emit_exp(s, fn);
    int rc = emit_softmax(&E, s, BM, BN, DvP, e);

    // Tasks: (batch index, or K/V group with G > 1) x block of query rows.
    const int64_t BG = a->B / G;
    int64_t NQB = (M + BM - 1) / BM, T = BG * NQB, NT = (N + BN - 1) / BN;
    bool par = T > 1 && flops_of(a) >= 2e6;
    // Index names: the lead digits of the batch index, then the two matrix coordinates; K and V
    // are read at the group's first head (a_bs), everything else at the head's own digit.
    char lead[ORCH_MAX_RANK][16];
    const char *ix[ORCH_MAX_RANK];
    for (int d = 0; d < nl; d++) {
        snprintf(lead[d], sizeof lead[d], "a_b%d", d);
        ix[d] = lead[d];
    }
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", fn);
    sb_line(s, 1, "float *restrict y = (float *)out;\n");
    if (all) {
        sb_line(s, 1, "float *a_kall = (float *)aligned_alloc(64, %lld);\n",
                (long long)(4 * BG * NT * D * BN));
        sb_line(s, 1, "float *a_vall = (float *)aligned_alloc(64, %lld);\n",
                (long long)(4 * BG * N * DvP));
    }
    sb_line(s, 1, "#pragma omp parallel if (%d)\n", par);
    sb_line(s, 1, "{\n");
    if (all) {
        // Every key tile of every batch index (K/V group) staged once, by all threads (the
        // loop's barrier ends it before any block reads them).
        sb_line(s, 2, "#pragma omp for schedule(static)\n");
        sb_line(s, 2, "for (int64_t a_t = 0; a_t < %lld; a_t++) {\n", (long long)(BG * NT));
        sb_line(s, 3, "const int64_t a_bi = a_t / %lld, a_j0 = (a_t %% %lld) * %lld;\n",
                (long long)NT, (long long)NT, (long long)BN);
        sb_line(s, 3, "const int64_t a_nk = %lld - a_j0 < %lld ? %lld - a_j0 : %lld;\n",
                (long long)N, (long long)BN, (long long)N, (long long)BN);
        emit_digits(s, 3, a, "a_bi", G, ga);
        sb_line(s, 3, "float *restrict a_ks = a_kall + (a_t / %lld * %lld + a_j0 / %lld) * %lld;\n",
                (long long)NT, (long long)NT, (long long)BN, (long long)(D * BN));
        sb_line(s, 3, "float *restrict a_vs = a_vall + (a_bi * %lld + a_j0) * %lld;\n",
                (long long)N, (long long)DvP);
        if (ga >= 0)
            ix[ga] = "a_bs";
        if (!rc)
            rc = emit_stage_tile(&E, s, 3, ix, BN, e);
        sb_line(s, 2, "}\n");
    }
    // One allocation per thread: Q rows, scores, accumulators, maxima and per-lane sums (G sets
    // of all but the scores), and K^T and V tiles when staged per tile, each part 64-byte aligned.
    const struct {
        const char *name;
        int64_t n;
    } parts[] = {
        {"qb", G * BM * D},  {"sb", BM * BN},          {"ob", G * BM * DvP},      {"mb", G * BM},
        {"lb", G * 16 * BM}, {"kb", all ? 0 : D * BN}, {"vb", all ? 0 : BN * DvP}};
    int64_t offs[ORCH_COUNT(parts)], total = 0;
    for (size_t i = 0; i < ORCH_COUNT(parts); i++) {
        offs[i] = total;
        total += (parts[i].n + 15) / 16 * 16;
    }
    sb_line(s, 2, "float *a_buf = (float *)aligned_alloc(64, %lld);\n", (long long)(total * 4));
    for (size_t i = 0; i < ORCH_COUNT(parts); i++)
        if (parts[i].n)
            sb_line(s, 2, "float *restrict a_%s = a_buf + %lld;\n", parts[i].name,
                    (long long)offs[i]);
    sb_line(s, 2, "#pragma omp for schedule(static)\n");
    sb_line(s, 2, "for (int64_t a_t = 0; a_t < %lld; a_t++) {\n", (long long)T);
    sb_line(s, 3, "const int64_t a_bi = a_t / %lld, a_i0 = (a_t %% %lld) * %lld;\n", (long long)NQB,
            (long long)NQB, (long long)BM);
    sb_line(s, 3, "const int64_t a_m = %lld - a_i0 < %lld ? %lld - a_i0 : %lld;\n", (long long)M,
            (long long)BM, (long long)M, (long long)BM);
    emit_digits(s, 3, a, "a_bi", G, ga);
    // The head loop's prologue: the head's digit, its lead index and its buffers (one head
    // without a group: the loop runs once).
    char head[1024];
    {
        int n = snprintf(head, sizeof head, "for (int64_t a_h = 0; a_h < %lld; a_h++) {\n",
                         (long long)G);
        if (ga >= 0)
            n += snprintf(head + n, sizeof head - (size_t)n, "const int64_t a_b%d = a_bs + a_h;\n",
                          ga);
        n += snprintf(head + n, sizeof head - (size_t)n, "const int64_t a_lead[%d] = {", nl + 1);
        for (int d = 0; d < nl; d++)
            n += snprintf(head + n, sizeof head - (size_t)n, "a_b%d, ", d);
        snprintf(head + n, sizeof head - (size_t)n,
                 "0};\n(void)a_lead;\n"
                 "float *restrict a_qh = a_qb + a_h * %lld, *restrict a_oh = a_ob + a_h * %lld;\n"
                 "float *restrict a_mh = a_mb + a_h * %lld, *restrict a_lh = a_lb + a_h * %lld;\n",
                 (long long)(BM * D), (long long)(BM * DvP), (long long)BM, (long long)(16 * BM));
    }
#define HEAD_OPEN(ind)                                                                             \
    do {                                                                                           \
        const char *p_ = head;                                                                     \
        for (const char *nl_; (nl_ = strchr(p_, '\n')); p_ = nl_ + 1)                              \
            sb_line(s, (ind) + (p_ == head ? 0 : 1), "%.*s\n", (int)(nl_ - p_), p_);               \
    } while (0)

    char dst[128];
    // Each head's Q rows, running maxima and sums, zeroed accumulators.
    HEAD_OPEN(3);
    sb_line(s, 4, "for (int64_t a_r = 0; a_r < a_m; a_r++) {\n");
    sb_line(s, 5, "const int64_t a_qi = a_i0 + a_r;\n");
    sb_line(s, 5, "for (int64_t a_d = 0; a_d < %lld; a_d++) {\n", (long long)D);
    if (ga >= 0)
        ix[ga] = lead[ga];
    ix[nl] = "a_qi";
    ix[nl + 1] = "a_d";
    snprintf(dst, sizeof dst, "a_qh[a_r * %lld + a_d]", (long long)D);
    if (!rc)
        rc = emit_load(&E, a->q, ix, dst, s, 6, e);
    sb_line(s, 5, "}\n");
    sb_line(s, 5, "a_mh[a_r] = -INFINITY;\n");
    sb_line(s, 5, "for (int a_l = 0; a_l < 16; a_l++)\n");
    sb_line(s, 6, "a_lh[a_r * 16 + a_l] = 0.0f;\n");
    sb_line(s, 5, "for (int64_t a_c = 0; a_c < %lld; a_c++)\n", (long long)DvP);
    sb_line(s, 6, "a_oh[a_r * %lld + a_c] = 0.0f;\n", (long long)DvP);
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");

    sb_line(s, 3, "for (int64_t a_j0 = 0; a_j0 < %lld; a_j0 += %lld) {\n", (long long)N,
            (long long)BN);
    sb_line(s, 4, "const int64_t a_nk = %lld - a_j0 < %lld ? %lld - a_j0 : %lld;\n", (long long)N,
            (long long)BN, (long long)N, (long long)BN);
    if (all) {
        sb_line(s, 4, "const float *restrict a_ks = a_kall + (a_bi * %lld + a_j0 / %lld) * %lld;\n",
                (long long)NT, (long long)BN, (long long)(D * BN));
        sb_line(s, 4, "const float *restrict a_vs = a_vall + (a_bi * %lld + a_j0) * %lld;\n",
                (long long)N, (long long)DvP);
    } else {
        sb_line(s, 4, "float *restrict a_ks = a_kb, *restrict a_vs = a_vb;\n");
        if (ga >= 0)
            ix[ga] = "a_bs";
        if (!rc)
            rc = emit_stage_tile(&E, s, 4, ix, BN, e);
        if (ga >= 0)
            ix[ga] = lead[ga];
    }
    // Each head's scores against the tile (columns rounded up to 16), softmax step, P·V.
    HEAD_OPEN(4);
    sb_line(s, 5, "%s_qk(a_qh, a_ks, a_sb, a_m, %lld, (a_nk + 15) / 16 * 16);\n", fn, (long long)D);
    sb_line(s, 5, "%s_sm(in, a_sb, a_mh, a_lh, a_oh, a_m, a_i0, a_j0, a_nk, a_lead);\n", fn);
    sb_line(s, 5, "%s_pv(a_sb, a_vs, a_oh, a_m, a_nk, %lld);\n", fn, (long long)DvP);
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    // O = acc / l, each head's rows.
    HEAD_OPEN(3);
    sb_line(s, 4, "for (int64_t a_r = 0; a_r < a_m; a_r++) {\n");
    // O's row at its place in the output (O itself, or the heads merged back: AttnSpec.ostride).
    char yoff[512] = "0";
    for (int d = 0; d < nl; d++) {
        size_t used = strlen(yoff);
        if (a->ostride[d])
            snprintf(yoff + used, sizeof yoff - used, " + a_b%d * %lld", d,
                     (long long)a->ostride[d]);
    }
    sb_line(s, 5, "float *restrict a_y = y + %s + (a_i0 + a_r) * %lld;\n", yoff,
            (long long)a->ostride[a->rank - 2]);
    sb_line(s, 5, "float a_l = 0.0f;\n");
    sb_line(s, 5, "for (int a_q = 0; a_q < 16; a_q++)\n");
    sb_line(s, 6, "a_l += a_lh[a_r * 16 + a_q];\n");
    if (a->nan_to_zero) { // a row of -inf scores: P (and so O) is 0, as the export says
        sb_line(s, 5, "for (int64_t a_c = 0; a_c < %lld; a_c++) {\n", (long long)Dv);
        sb_line(s, 6, "const float a_v = a_oh[a_r * %lld + a_c] / a_l;\n", (long long)DvP);
        sb_line(s, 6, "a_y[a_c] = isnan(a_v) ? 0.0f : a_v;\n");
        sb_line(s, 5, "}\n");
    } else {
        sb_line(s, 5, "for (int64_t a_c = 0; a_c < %lld; a_c++)\n", (long long)Dv);
        sb_line(s, 6, "a_y[a_c] = a_oh[a_r * %lld + a_c] / a_l;\n", (long long)DvP);
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
#undef HEAD_OPEN
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "free(a_buf);\n");
    sb_line(s, 1, "}\n");
    if (all) {
        sb_line(s, 1, "free(a_kall);\n");
        sb_line(s, 1, "free(a_vall);\n");
    }
    sb_puts(s, "}\n\n");
    if (!rc) {
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s ? body.s : "");
    }
    cexpr_free(E.x);
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

void cgen_attn_config_pack(const CAttnConfig *t, KernelConfig *k) {
    memset(k, 0, sizeof *k);
    k->cls = CCLS_ATTN;
    k->p[P_BM] = t->bm;
    k->p[P_BN] = t->bn;
    k->p[P_MR] = t->mr;
    k->p[P_NV] = t->nv;
    k->p[P_ST] = t->st;
    k->p[P_GQ] = t->gq;
    int n = snprintf(k->desc, sizeof k->desc, "cls=attn bm=%lld bn=%lld mr=%d nv=%d st=%d",
                     (long long)t->bm, (long long)t->bn, t->mr, t->nv, t->st);
    if (t->gq && n > 0 && (size_t)n < sizeof k->desc)
        snprintf(k->desc + n, sizeof k->desc - (size_t)n, " gq=%d", t->gq);
}

void cgen_attn_config_unpack(const KernelConfig *k, CAttnConfig *t) {
    t->bm = k->p[P_BM];
    t->bn = k->p[P_BN];
    t->mr = (int)k->p[P_MR];
    t->nv = (int)k->p[P_NV];
    t->st = (int)k->p[P_ST];
    t->gq = (int)k->p[P_GQ];
}

bool cgen_attn_supports(const PrimGraph *pg, const Candidate *c) {
    AttnSpec a;
    if (!attn_analyse(pg, c, &a) || a.dt != DT_FLOAT) // the C emitter writes float32
        return false;
    // Dry run: cexpr decides whether Q, K^T, V and the pre-softmax chain can be emitted.
    KernelConfig k;
    cgen_attn_config_pack(&(CAttnConfig){.bm = 16, .bn = 64, .mr = 4, .nv = 2, .st = 0}, &k);
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&a, &k, "orch_dry", &s, &e);
    sb_free(&s);
    return rc == ST_OK;
}

// Fraction of peak FMA throughput of an mr x nvu register tile: broadcasts and loads per FMA
// shrink as it grows, and past the register file it spills.
static double tile_eff(int mr, double nvu, int lanes) {
    const CpuAttnModel *P = &cpu_attn_model;
    double acc = mr * nvu;
    double eff = acc / (acc + nvu + mr * P->bcast_row) * ORCH_MIN(1.0, acc / P->acc_full);
    if (acc + nvu + 1 > (lanes == 16 ? 32 : 16))
        eff *= P->spill;
    // Taller tiles stream the staged tiles fewer times.
    return eff * (1.0 + P->tall_row * mr);
}

// The model, per task (a block of BM rows of one batch index, or of the G heads of a K/V group
// with gq=1: G times the products and softmax steps, the staging once): both products at the
// register tiles' efficiencies (the score product over key columns rounded up to 16, single-row
// blocks at a fraction of the speed), the softmax's vector work per score (exp, max, sum and the
// pre-softmax chain), a per-(row, tile) overhead, every block streaming its batch index's K and
// V (from L2 when they fit, from L3 or memory otherwise), staging the key tiles (per block,
// or once per batch index with st=1, which adds a pass through memory; a K^T transposed from
// rows of keys is staged element by element, a dense one and V as vector copies), and a penalty
// when the per-thread buffers leave L2 (L1 for the tile's working set); tasks spread over the
// cores in waves.
static double score(const AttnSpec *a, const HwInfo *hw, int64_t BM, int64_t BN, int mr, int nv,
                    bool all, int64_t G) {
    const CpuAttnModel *P = &cpu_attn_model;
    int lanes = hw && hw->simd_bytes >= 16 ? hw->simd_bytes / 4 : 4;
    int cores = hw && hw->cores > 0 ? hw->cores : 1;
    double peak = lanes * 2.0 * P->fma_pipes * P->clock_hz * (hw && hw->fma ? 1.0 : P->no_fma);
    double rows = (double)ORCH_MIN(BM, a->M);
    double rows_eff = rows - fmod(rows, mr) + fmod(rows, mr) * P->tail_row;
    double tiles = ceil((double)a->N / (double)BN);
    double cols = (double)(a->N / BN * BN + pad16(a->N % BN)); // score columns computed
    double DvP = (double)pad16(a->Dv);
    double e_qk =
        tile_eff(mr, ORCH_MIN((double)nv, (double)ORCH_MIN(BN, pad16(a->N)) / lanes), lanes);
    double e_pv = tile_eff(mr, ORCH_MIN((double)nv, DvP / lanes), lanes);
    double t = 2.0 * rows_eff * cols * (double)a->D / (peak * e_qk) +
               2.0 * rows_eff * (double)a->N * DvP / (peak * e_pv);
    // The products stream the key tile once per mr rows: from L2 when it exceeds L1.
    double l1 = hw && hw->l1d > 0 ? (double)hw->l1d : P->l1;
    double ktile = 4.0 * (double)(a->D * BN), vtile = 4.0 * (double)BN * DvP;
    double passes = ceil(rows / mr) * tiles;
    double l1_tile = l1 * P->tile_l1_frac;
    t += passes * ((ktile > l1_tile ? ktile : 0) + (vtile > l1_tile ? vtile : 0)) / P->bw_tile;
    double ops = P->softmax_ops + P->pre_ops * a->n_pre;
    t += rows * (double)a->N * ops / (lanes * P->vec_ops_s);
    t += rows * tiles * P->row_tile_s + rows * tiles * DvP / (lanes * P->vec_ops_s);
    // Every block streams its batch index's K and V (from the inputs or the staging buffers):
    // from L2 when they fit there, from L3 or memory otherwise.
    double kv = 4.0 * (double)a->N * (double)(a->D + a->Dv);
    double l2 = hw && hw->l2 > 0 ? (double)hw->l2 : P->l2;
    t += kv / (kv <= l2 * P->kv_l2_frac ? P->bw_kv_l2 : P->bw_kv_mem);
    bool kt_dense = cgen_input_pos(a->c, a->kt) >= 0;
    double stage = (double)a->N * ((double)a->D * (kt_dense ? P->stage_dense_s : P->stage_kt_s) +
                                   a->Dv * P->stage_dense_s);
    // A task computes G heads against one staging of the key tiles.
    t *= (double)G;
    if (!all)
        t += stage;
    double ws = 4.0 * (double)(G * BM * a->D + BM * BN + G * BM * (int64_t)DvP +
                               (all ? 0 : a->D * BN + BN * (int64_t)DvP));
    double tile_ws =
        4.0 * (double)(a->D * BN + BN * (int64_t)DvP + ORCH_MIN(BM, P->tile_ws_rows) * BN);
    if (ws > l2)
        t *= P->l2_over;
    else if (tile_ws > l1)
        t *= P->l1_over;
    double tasks = (double)(a->B / G) * ceil((double)a->M / (double)BM);
    double waves = ceil(tasks / cores);
    double bytes = 4.0 * (double)a->B *
                   ((double)a->M * (double)(a->D + a->Dv) + (double)a->N * (double)(a->D + a->Dv));
    double t_all = 0;
    if (all)
        t_all = (double)(a->B / G) * stage /
                    ORCH_MIN(cores, (double)(a->B / G) * ceil((double)a->N / BN)) +
                2.0 * (double)staged_bytes(a, BN, G) / P->bw_mem + P->fork_s;
    return waves * t + t_all + bytes / P->bw_mem + (tasks > 1 ? P->fork_s : 0);
}

int cgen_attn_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                      int k) {
    AttnSpec a;
    if (!attn_analyse(pg, c, &a) || k < 1)
        return 0;
    const CpuAttnModel *P = &cpu_attn_model;
    int wide = hw && hw->simd_bytes >= 64;
    const int(*blocks)[2] = wide ? P->blocks_avx512 : P->blocks_narrow;
    KernelConfig cand[256];
    int n = 0;
    // Grouped-query attention: every config also with a task per K/V group (gq=1).
    const int n_gq = a.kv_group > 1 ? 2 : 1;
    for (size_t i = 0; i < ORCH_COUNT(P->bms) * 2 * (size_t)n_gq; i++) {
        int64_t BM = P->bms[i / 2 % ORCH_COUNT(P->bms)];
        bool all = i % 2;
        int gq = (int)(i / (2 * ORCH_COUNT(P->bms)));
        int64_t G = gq ? a.kv_group : 1;
        // Staging once per batch index pays off only with several blocks per batch index.
        if (all && BM >= a.M)
            continue;
        if (BM > P->bms[0] && BM / 2 >= a.M)
            continue; // one block already holds every row
        for (size_t j = 0; j < ORCH_COUNT(P->bns); j++) {
            int64_t BN = P->bns[j];
            if (BN > P->bns[0] && BN / 2 >= pad16(a.N))
                continue; // one tile already holds every key
            if (all && staged_bytes(&a, BN, G) > P->stage_all_max)
                continue;
            for (int b = 0; b < (int)ORCH_COUNT(P->blocks_avx512) && n < (int)ORCH_COUNT(cand);
                 b++) {
                CAttnConfig t = {.bm = BM,
                                 .bn = BN,
                                 .mr = blocks[b][0],
                                 .nv = blocks[b][1],
                                 .st = all,
                                 .gq = gq};
                KernelConfig *kc = &cand[n++];
                cgen_attn_config_pack(&t, kc);
                kc->score = score(&a, hw, BM, BN, t.mr, t.nv, all, G);
            }
        }
    }
    return cgen_sort_configs(cand, n, out, k);
}

int cgen_attn_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                   StrBuf *src, Err *e) {
    AttnSpec a;
    if (!attn_analyse(pg, c, &a) || a.dt != DT_FLOAT) // the C emitter writes float32
        return err_set(e, ST_UNSUPPORTED, "attention kernel %s: candidate %d is not an attention",
                       fn, c->id);
    return emit_kernel(&a, cfg, fn, src, e);
}
