// The C target's fused MLP chain kernel (cgen_mlp.h). One OpenMP task per tile of RT
// rows computes every layer of the chain for those rows, ping-ponging between two per-thread
// buffers of RT x (widest padded layer) floats that stay in L1/L2, so no intermediate activation
// reaches memory. Each layer is a register-tiled product (MR rows x NV vectors of ORCH_LV floats
// accumulated over K with orch_lv_fma), then its epilogue through cexpr (bias, activation; an
// epilogue that reads the layer's input, MlpChain.xin, reads it from the other buffer or the
// chain's input rows, pinned in cexpr) on the finished tile; the last layer's epilogue writes
// the output rows. An epilogue with row reductions (MlpChain.red: a LayerNorm's mean and
// variance) computes them per row first, each a double-accumulated loop over the row's products
// in the tile (float32 sums), into locals that the elementwise pass reads as broadcast row
// statistics.
// Widths: a layer's columns are padded to NP = 16 * ceil(N / 16), a multiple of every vector
// width (4, 8, 16 floats), so the micro-kernel has no column tail. A weight whose N is not a
// multiple of 16 is copied once per call into a zero-padded [K][NP] block; the padded columns of
// a tile (products with zero weights, or epilogue-free raw sums) are never read: the next
// layer's K loop stops at the real width, and epilogues run over the real columns only.
// Needs: cgen_prelude() and cgen_lin_prelude() in the translation unit. Guarantees: the output
// of the candidate as prim_interp.c computes it, up to float32 reassociation of the sums (row
// statistics summed in float32 where the interpreter sums in double).
#include "cgen.h"
#include "cgen_mlp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// KernelConfig.p[] slots of CMlpConfig's fields (cgen_mlp.h).
enum { P_RT, P_MR, P_NV };

// ---- emission ----

static int64_t padw(int64_t n) {
    return (n + 15) / 16 * 16;
}

typedef struct Em {
    const MlpChain *m;
    const char *fn;
    StrBuf *s;
    Cexpr *x;
    int cur;  // the layer whose LINEAR output the reader answers for
    int n_rs; // row statistics of that layer already computed (rs_<k> locals, k < n_rs)
} Em;

// Reads of the current layer's product (the local acc) and of its row statistics computed so
// far (rs_<k>: MlpChain.red's k-th reduction of the row).
static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    (void)code;
    (void)indent;
    const Em *E = ctx;
    for (int k = 0; E->cur >= 0 && k < E->n_rs; k++)
        if (rq->tensor == E->m->pg->prims[E->m->red[E->cur][k]]->out[0]) {
            snprintf(out, cap, "rs_%d", k);
            return ST_OK;
        }
    if (E->cur < 0 || rq->tensor != E->m->tl[E->cur])
        return err_set(e, ST_UNSUPPORTED,
                       "mlp kernel %s: tensor %d is not the current layer's product", E->fn,
                       rq->tensor);
    snprintf(out, cap, "acc");
    return ST_OK;
}

// One register block: rows r.. r+mr-1 of a (row stride as), columns j.. j+nv*ORCH_LV-1 of the
// layer's padded product, accumulated over K in registers and stored into c (row stride NP).
static void emit_block(StrBuf *s, int ind, int mr, int nv, int64_t K, int64_t NP) {
    sb_line(s, ind, "{\n");
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++)
            sb_line(s, ind + 1, "orch_lv s%d_%d = orch_lv_zero();\n", i, v);
    sb_line(s, ind + 1, "const float *restrict wp = w + j;\n");
    sb_line(s, ind + 1, "for (int64_t k = 0; k < %lld; k++, wp += %lld) {\n", (long long)K,
            (long long)NP);
    for (int v = 0; v < nv; v++)
        sb_line(s, ind + 2, "const orch_lv w%d = orch_lv_load(wp + %d * ORCH_LV);\n", v, v);
    for (int i = 0; i < mr; i++) {
        sb_line(s, ind + 2, "{ const orch_lv x = orch_lv_set1(a[(r + %d) * as + k]);\n", i);
        for (int v = 0; v < nv; v++)
            sb_line(s, ind + 3, "s%d_%d = orch_lv_fma(x, w%d, s%d_%d);\n", i, v, v, i, v);
        sb_line(s, ind + 2, "}\n");
    }
    sb_line(s, ind + 1, "}\n");
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++)
            sb_line(s, ind + 1, "orch_lv_store(c + (r + %d) * %lld + j + %d * ORCH_LV, s%d_%d);\n",
                    i, (long long)NP, v, i, v);
    sb_line(s, ind, "}\n");
}

// fn_l<l>(a, as, w, c, m): c[r][0..NP) = sum_k a[r*as + k] w[k][0..NP) for r < m.
static void emit_layer_mm(Em *E, int l, int mr, int nv) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    int64_t K = m->K[l], NP = padw(m->N[l]);
    sb_printf(s,
              "static void %s_l%d(const float *restrict a, int64_t as, const float *restrict w, "
              "float *restrict c, int64_t m) {\n",
              E->fn, l);
    sb_line(s, 1, "int64_t r = 0;\n");
    // Full blocks of mr rows, then single rows; per row block, nv vectors then one at a time.
    for (int pass = 0; pass < 2; pass++) {
        int rows = pass == 0 ? mr : 1;
        if (pass == 0)
            sb_line(s, 1, "for (; r + %d <= m; r += %d) {\n", rows, rows);
        else
            sb_line(s, 1, "for (; r < m; r++) {\n");
        sb_line(s, 2, "int64_t j = 0;\n");
        if (nv > 1) {
            sb_line(s, 2, "for (; j + %d * ORCH_LV <= %lld; j += %d * ORCH_LV)\n", nv,
                    (long long)NP, nv);
            emit_block(s, 3, rows, nv, K, NP);
        }
        sb_line(s, 2, "for (; j < %lld; j += ORCH_LV)\n", (long long)NP);
        emit_block(s, 3, rows, 1, K, NP);
        sb_line(s, 1, "}\n");
    }
    sb_puts(s, "}\n\n");
}

// Row statistic k of layer l (MlpChain.red): a sum over the row's real columns of the
// reduction's input, as cexpr computes it from the products (acc), the layer's input (xin_)
// and the earlier statistics, divided for a mean and converted once to the statistic's dtype:
// the local rs_<k>. The sum is float32 in vector lanes (one partial sum per lane, added at the
// end), also where the graph's statistic is float64 (the LayerNorm rule's mean; the
// interpreter sums in double): summed in double the two LayerNorm statistics took 0.55 of a
// 1.7 ms 2 x 128-wide chain (4096 rows, the 2-core Xeon, AVX-512), in float32 the chain beat
// the unfused plan. Sines here take libm's path (no guard): the row's reductions are few beside
// the products.
static int emit_row_stat(Em *E, int l, int k, const char *const *ix, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    const Prim *p = m->pg->prims[m->red[l][k]];
    int64_t N = m->N[l];
    StrBuf body;
    sb_init(&body);
    char v[64];
    cexpr_pin(E->x, m->xin[l] ? m->in[l] : -1, "xin_");
    int rc = cexpr_value(E->x, p->in[0], ix, &body, 3, v, sizeof v, e);
    cexpr_forget(E->x);
    cexpr_pin(E->x, -1, NULL);
    if (rc) {
        sb_free(&body);
        return rc;
    }
    sb_line(s, 2, "float rsum_%d = 0.0f;\n", k);
    sb_line(s, 2, "#pragma omp simd reduction(+ : rsum_%d)\n", k);
    sb_line(s, 2, "for (int64_t j = 0; j < %lld; j++) {\n", (long long)N);
    sb_line(s, 3, "const float acc = crow[j];\n");
    sb_line(s, 3, "(void)acc;\n");
    if (m->xin[l])
        sb_line(s, 3, "const float xin_ = xa[r * xs + j];\n");
    sb_puts(s, body.s ? body.s : "");
    sb_line(s, 3, "rsum_%d += (float)%s;\n", k, v);
    sb_line(s, 2, "}\n");
    sb_free(&body);
    // The statistic is a float32 value whatever its dtype, and says so: a double statistic is
    // written (double)(float)..., so that GCC narrows the epilogue's (float)((double)v - rs)
    // back to float32 arithmetic. Left a double of unknown precision, the widening next to a
    // ReLU's select kept the epilogue's column loop scalar ("control flow in loop"): a 2-layer
    // 64-wide Linear-ReLU-LayerNorm chain took 6.1 ms where its four kernels took 0.93 ms.
    const char *vt = cgen_vtype(m->pg->tensors[p->out[0]]->dtype);
    if (p->red.op == RED_MEAN)
        sb_line(s, 2, "const %s rs_%d = (%s)(rsum_%d / %lld.0f);\n", vt, k, vt, k, (long long)N);
    else
        sb_line(s, 2, "const %s rs_%d = (%s)rsum_%d;\n", vt, k, vt, k);
    E->n_rs = k + 1;
    return ST_OK;
}

// fn_e<l>(c, in, i0, m, xa, xs[, y]): layer l's epilogue on the tile's rows i0.. i0+m-1, in place
// in c (row stride NP), or into the output rows of y for the last layer. xa (row stride xs) holds
// the layer's input rows, which the epilogue reads where it is gated by or adds its input
// (MlpChain.xin): the previous layer's buffer, or the chain's input rows.
static int emit_layer_epi(Em *E, int l, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    bool last = l == m->n - 1;
    int64_t N = m->N[l], NP = padw(N);
    sb_printf(s,
              "static void %s_e%d(float *restrict c, const void *const *in_, int64_t i0, int64_t "
              "m, const float *restrict xa, int64_t xs%s) {\n",
              E->fn, l, last ? ", float *restrict y" : "");
    // The input pointers copied into a local array whose address never escapes, so that GCC
    // knows the stores into the rows cannot change them and loads a bias or a LayerNorm weight
    // as contiguous vectors; read through the caller's array, the row statistics' simd loops
    // fetched them with gathers.
    int n_in = ORCH_MAX(m->c->n_inputs, 1);
    sb_line(s, 1, "const void *in[%d];\n", n_in);
    sb_line(s, 1, "for (int q = 0; q < %d; q++)\n", n_in);
    sb_line(s, 2, "in[q] = in_[q];\n");
    sb_line(s, 1, "(void)in;\n");
    sb_line(s, 1, "(void)xa;\n");
    sb_line(s, 1, "(void)xs;\n");
    sb_line(s, 1, "for (int64_t r = 0; r < m; r++) {\n");
    sb_line(s, 2, "int64_t q_r = i0 + r;\n");
    char names[ORCH_MAX_RANK][24];
    const char *ix[ORCH_MAX_RANK];
    for (int d = m->rank - 2; d >= 0; d--) {
        snprintf(names[d], sizeof names[d], "e_i%d", d);
        sb_line(s, 2, "const int64_t e_i%d = q_r %% %lld; q_r /= %lld; (void)e_i%d;\n", d,
                (long long)m->lead[d], (long long)m->lead[d], d);
        ix[d] = names[d];
    }
    ix[m->rank - 1] = "j";
    sb_line(s, 2, "float *restrict crow = c + r * %lld;\n", (long long)NP);
    if (last)
        sb_line(s, 2, "float *restrict yrow = y + (i0 + r) * %lld;\n", (long long)N);
    E->cur = l;
    E->n_rs = 0;
    for (int k = 0; k < m->n_red[l]; k++) {
        int rc = emit_row_stat(E, l, k, ix, e);
        if (rc) {
            E->cur = -1;
            return rc;
        }
    }
    // A float32 sine takes the prelude's common path with its range check left to a flag
    // (cexpr_set_sin_guard), so that the row's loop has no library call and vectorises; where
    // some |x| > 65536 raised it, the row is computed again exactly (libm's sinf), reading the
    // products the first pass left in place (it wrote into t_).
    StrBuf body;
    sb_init(&body);
    char v[64], vx[64];
    cexpr_set_sin_guard(E->x, "big_");
    int before = cexpr_sin_guards(E->x);
    // The layer's input is the local xin_ (pinned: never recomputed from an earlier layer).
    cexpr_pin(E->x, m->xin[l] ? m->in[l] : -1, "xin_");
    int rc = cexpr_value(E->x, m->act[l], ix, &body, 3, v, sizeof v, e);
    int guards = cexpr_sin_guards(E->x) - before;
    cexpr_set_sin_guard(E->x, NULL);
    cexpr_forget(E->x);
    cexpr_pin(E->x, -1, NULL);
    const char *dst = last ? "yrow" : "crow";
    if (!rc && guards) {
        sb_line(s, 2, "float t_[%lld];\n", (long long)N);
        sb_line(s, 2, "int big_ = 0;\n");
    }
    sb_line(s, 2, "for (int64_t j = 0; j < %lld; j++) {\n", (long long)N);
    sb_line(s, 3, "const float acc = crow[j];\n");
    if (m->xin[l])
        sb_line(s, 3, "const float xin_ = xa[r * xs + j];\n");
    sb_puts(s, body.s ? body.s : "");
    sb_line(s, 3, "%s[j] = %s;\n", guards ? "t_" : dst, v);
    sb_line(s, 2, "}\n");
    sb_free(&body);
    if (!rc && guards) {
        sb_line(s, 2, "if (big_) {\n");
        sb_line(s, 3, "for (int64_t j = 0; j < %lld; j++) {\n", (long long)N);
        sb_line(s, 4, "const float acc = crow[j];\n");
        if (m->xin[l])
            sb_line(s, 4, "const float xin_ = xa[r * xs + j];\n");
        cexpr_pin(E->x, m->xin[l] ? m->in[l] : -1, "xin_");
        rc = cexpr_value(E->x, m->act[l], ix, s, 4, vx, sizeof vx, e);
        cexpr_forget(E->x);
        cexpr_pin(E->x, -1, NULL);
        sb_line(s, 4, "t_[j] = %s;\n", vx);
        sb_line(s, 3, "}\n");
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "for (int64_t j = 0; j < %lld; j++)\n", (long long)N);
        sb_line(s, 3, "%s[j] = t_[j];\n", dst);
    }
    E->cur = -1;
    E->n_rs = 0;
    if (rc)
        return rc;
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}

static double flops_of(const MlpChain *m) {
    double f = 0;
    for (int l = 0; l < m->n; l++)
        f += 2.0 * (double)m->R * (double)m->K[l] * (double)m->N[l];
    return f;
}

static int emit_kernel(const MlpChain *m, const KernelConfig *cfg, const char *fn, StrBuf *src,
                       Err *e) {
    CMlpConfig t;
    cgen_mlp_config_unpack(cfg, &t);
    int64_t RT = t.rt;
    int mr = t.mr, nv = t.nv;
    if (RT < 1 || mr < 1 || mr > 16 || nv < 1 || nv > 8)
        return err_set(e, ST_USAGE, "mlp kernel %s: bad config '%s'", fn, cfg->desc);
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Em E = {m, fn, &body, cexpr_create(m->pg, m->c, fn, &decls), -1, 0};
    cexpr_set_reader(E.x, reader, &E);
    int rc = ST_OK;
    int64_t wmax = 0, pk = 0;
    for (int l = 0; l < m->n && !rc; l++) {
        emit_layer_mm(&E, l, mr, nv);
        if (m->epi[l] || l == m->n - 1)
            rc = emit_layer_epi(&E, l, e);
        wmax = ORCH_MAX(wmax, padw(m->N[l]));
        if (m->N[l] % 16)
            pk += m->K[l] * padw(m->N[l]);
    }
    if (rc) {
        cexpr_free(E.x);
        sb_free(&decls);
        sb_free(&body);
        return rc;
    }
    int64_t NT = (m->R + RT - 1) / RT;
    bool par = NT > 1 && flops_of(m) >= 2e6;
    StrBuf *s = &body;
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", fn);
    sb_line(s, 1, "float *restrict y = (float *)out;\n");
    sb_line(s, 1, "const float *restrict x = (const float *)in[%d];\n", m->x_pos);
    if (pk)
        sb_line(s, 1, "float *pk = (float *)aligned_alloc(64, %lld);\n",
                (long long)((pk * 4 + 63) / 64 * 64));
    int64_t off = 0;
    for (int l = 0; l < m->n; l++) {
        int64_t N = m->N[l], NP = padw(N);
        if (N % 16 == 0) {
            sb_line(s, 1, "const float *restrict w%d = (const float *)in[%d];\n", l, m->w_pos[l]);
            continue;
        }
        // Zero-padded copy: the micro-kernel reads whole vectors of every padded row.
        sb_line(s, 1, "float *w%d = pk + %lld;\n", l, (long long)off);
        sb_line(s, 1, "for (int64_t k = 0; k < %lld; k++)\n", (long long)m->K[l]);
        sb_line(s, 2, "for (int64_t j = 0; j < %lld; j++)\n", (long long)NP);
        sb_line(s, 3,
                "w%d[k * %lld + j] = j < %lld ? ((const float *)in[%d])[k * %lld + j] : 0.0f;\n", l,
                (long long)NP, (long long)N, m->w_pos[l], (long long)N);
        off += m->K[l] * NP;
    }
    sb_line(s, 1, "#pragma omp parallel if (%d)\n", par);
    sb_line(s, 1, "{\n");
    int64_t bytes = (RT * wmax * 4 + 63) / 64 * 64;
    sb_line(s, 2, "float *b0 = (float *)aligned_alloc(64, %lld);\n", (long long)bytes);
    sb_line(s, 2, "float *b1 = (float *)aligned_alloc(64, %lld);\n", (long long)bytes);
    sb_line(s, 2, "#pragma omp for schedule(static)\n");
    sb_line(s, 2, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)NT);
    sb_line(s, 3, "const int64_t i0 = t * %lld;\n", (long long)RT);
    sb_line(s, 3, "const int64_t m = %lld - i0 < %lld ? %lld - i0 : %lld;\n", (long long)m->R,
            (long long)RT, (long long)m->R, (long long)RT);
    for (int l = 0; l < m->n; l++) {
        const char *dst = l % 2 ? "b1" : "b0", *srcb = l % 2 ? "b0" : "b1";
        // The layer's input rows and their stride (its epilogue may read them).
        char xa[64];
        int64_t xs = l == 0 ? m->K[0] : padw(m->N[l - 1]);
        if (l == 0)
            snprintf(xa, sizeof xa, "x + i0 * %lld", (long long)m->K[0]);
        else
            snprintf(xa, sizeof xa, "%s", srcb);
        sb_line(s, 3, "%s_l%d(%s, %lld, w%d, %s, m);\n", fn, l, xa, (long long)xs, l, dst);
        if (l == m->n - 1)
            sb_line(s, 3, "%s_e%d(%s, in, i0, m, %s, %lld, y);\n", fn, l, dst, xa, (long long)xs);
        else if (m->epi[l])
            sb_line(s, 3, "%s_e%d(%s, in, i0, m, %s, %lld);\n", fn, l, dst, xa, (long long)xs);
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "free(b0);\n");
    sb_line(s, 2, "free(b1);\n");
    sb_line(s, 1, "}\n");
    if (pk)
        sb_line(s, 1, "free(pk);\n");
    sb_puts(s, "}\n\n");
    sb_puts(src, decls.s ? decls.s : "");
    sb_puts(src, body.s ? body.s : "");
    cexpr_free(E.x);
    sb_free(&decls);
    sb_free(&body);
    return ST_OK;
}

void cgen_mlp_config_pack(const CMlpConfig *t, KernelConfig *k) {
    memset(k, 0, sizeof *k);
    k->cls = CCLS_MLP;
    k->p[P_RT] = t->rt;
    k->p[P_MR] = t->mr;
    k->p[P_NV] = t->nv;
    snprintf(k->desc, sizeof k->desc, "cls=mlp rt=%lld mr=%d nv=%d", (long long)t->rt, t->mr,
             t->nv);
}

void cgen_mlp_config_unpack(const KernelConfig *k, CMlpConfig *t) {
    t->rt = k->p[P_RT];
    t->mr = (int)k->p[P_MR];
    t->nv = (int)k->p[P_NV];
}

bool cgen_mlp_supports(const PrimGraph *pg, const Candidate *c) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || m.dtype != DT_FLOAT)
        return false;
    // Dry run: cexpr decides whether every epilogue can be emitted from its layer's product.
    KernelConfig k;
    cgen_mlp_config_pack(&(CMlpConfig){.rt = 32, .mr = 4, .nv = 2}, &k);
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&m, &k, "orch_dry", &s, &e);
    sb_free(&s);
    return rc == ST_OK;
}

// The fitted constants of the MLP chain kernels' CPU model and the configs offered. "Not
// recorded": no measurement behind the number was written down, and none of these is recorded
// as checked on three or more shapes; "not fitted": a default or a definition rather than a
// tuned number.
typedef struct CpuMlpModel {
    // FMA instructions a core issues per cycle: 2. Not recorded.
    double fma_pipes;
    // Core clock of the peak: 3 GHz. Not recorded.
    double clock_hz;
    // The peak's factor without FMA (a multiply and an add issue separately): 0.5. Not fitted.
    double no_fma;
    // A register block's overhead per row, in FMA slots (the broadcasts of A): 0.5. Not
    // recorded.
    double bcast_row;
    // Accumulator vectors that keep the FMA pipes busy: 8. Not recorded.
    double acc_full;
    // Factor when accumulators, weight vectors and a broadcast exceed the vector registers:
    // 0.4. Not recorded.
    double spill;
    // Cost of a tile's last rows (fewer than mr: single-row blocks) relative to a full block's
    // row: 2. Not recorded.
    double tail_row;
    // Seconds per output element of a layer's epilogue, and again per row reduction in it (its
    // pass over the row): 4e-9. Not recorded.
    double epi_s;
    // L2 bytes assumed where HwInfo has none: 512 KiB. Not fitted.
    double l2;
    // Weight bytes counted against L2 at most (the rest streams): 256 KiB. Not recorded.
    double w_l2_max;
    // Factor when the tile's buffers and weights exceed L2 (they spill to L3): 1.3. Not
    // recorded.
    double l2_over;
    // Bytes/s from memory, all cores: 20e9. Not recorded.
    double bw_mem;
    // Seconds a parallel kernel's fork and join cost: 3e-6. Not recorded.
    double fork_s;
    // Rows per tile offered: 16 to 256. Not recorded.
    int64_t rts[5];
    // Register blocks (rows x vectors) offered on AVX-512: 6x4, 4x4, 8x2, 4x2. Not recorded.
    int blocks_avx512[4][2];
    // ... on narrower vectors: 6x2, 4x2, 3x4, 2x4. Not recorded.
    int blocks_narrow[4][2];
} CpuMlpModel;

static const CpuMlpModel cpu_mlp_model = {
    .fma_pipes = 2.0,
    .clock_hz = 3e9,
    .no_fma = 0.5,
    .bcast_row = 0.5,
    .acc_full = 8.0,
    .spill = 0.4,
    .tail_row = 2.0,
    .epi_s = 4e-9,
    .l2 = 524288.0,
    .w_l2_max = 4.0 * 256 * 256,
    .l2_over = 1.3,
    .bw_mem = 20e9,
    .fork_s = 3e-6,
    .rts = {16, 32, 64, 128, 256},
    .blocks_avx512 = {{6, 4}, {4, 4}, {8, 2}, {4, 2}},
    .blocks_narrow = {{6, 2}, {4, 2}, {3, 4}, {2, 4}},
};

// The model: FMAs at a fraction of peak that grows with the register block (broadcast and
// weight loads per FMA shrink), tiles spread over the cores in waves, and the epilogues' vector
// work; the chain's input and output cross memory once.
static double score(const MlpChain *m, const HwInfo *hw, int64_t RT, int mr, int nv) {
    const CpuMlpModel *P = &cpu_mlp_model;
    int lanes = hw && hw->simd_bytes >= 16 ? hw->simd_bytes / 4 : 4;
    int cores = hw && hw->cores > 0 ? hw->cores : 1;
    double peak = lanes * 2.0 * P->fma_pipes * P->clock_hz * (hw && hw->fma ? 1.0 : P->no_fma);
    double t = 0;
    for (int l = 0; l < m->n; l++) {
        double NP = (double)padw(m->N[l]);
        double vecs = NP / lanes;
        double nvu = ORCH_MIN((double)nv, vecs); // vectors per block actually used
        double acc = mr * nvu;
        double eff = acc / (acc + nvu + mr * P->bcast_row) * ORCH_MIN(1.0, acc / P->acc_full);
        if (acc + nvu + 1 > (lanes == 16 ? 32 : 16))
            eff *= P->spill;
        double rows = (double)RT;
        double tail = fmod((double)m->R < rows ? (double)m->R : rows, (double)mr);
        double rows_eff = rows + tail * P->tail_row;
        t += 2.0 * rows_eff * (double)m->K[l] * NP / (peak * eff) +
             rows * (double)m->N[l] * P->epi_s * (1 + m->n_red[l]);
    }
    double tiles = ceil((double)m->R / (double)RT);
    double waves = ceil(tiles / cores);
    double bytes = 4.0 * (double)m->R * (double)(m->K[0] + m->N[m->n - 1]);
    // Per-tile buffers beyond L2 spill to L3.
    double l2 = hw && hw->l2 > 0 ? (double)hw->l2 : P->l2;
    double wmax = 0, wbytes = 0;
    for (int l = 0; l < m->n; l++) {
        wmax = ORCH_MAX(wmax, (double)padw(m->N[l]));
        wbytes += 4.0 * (double)m->K[l] * (double)padw(m->N[l]);
    }
    double buf = 2.0 * (double)RT * wmax * 4.0;
    double slow = buf + ORCH_MIN(wbytes, P->w_l2_max) > l2 ? P->l2_over : 1.0;
    return waves * t * slow + bytes / P->bw_mem + (tiles > 1 ? P->fork_s : 0);
}

int cgen_mlp_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || m.dtype != DT_FLOAT || k < 1)
        return 0;
    const CpuMlpModel *P = &cpu_mlp_model;
    int wide = hw && hw->simd_bytes >= 64;
    const int(*blocks)[2] = wide ? P->blocks_avx512 : P->blocks_narrow;
    KernelConfig cand[64];
    int n = 0;
    for (size_t i = 0; i < ORCH_COUNT(P->rts); i++) {
        int64_t RT = P->rts[i];
        if (RT > P->rts[0] && (RT / 2) >= m.R)
            continue; // one tile already holds every row
        for (int b = 0; b < (int)ORCH_COUNT(P->blocks_avx512) && n < (int)ORCH_COUNT(cand); b++) {
            CMlpConfig t = {.rt = RT, .mr = blocks[b][0], .nv = blocks[b][1]};
            KernelConfig *kc = &cand[n++];
            cgen_mlp_config_pack(&t, kc);
            kc->score = score(&m, hw, t.rt, t.mr, t.nv);
        }
    }
    return cgen_sort_configs(cand, n, out, k);
}

int cgen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || m.dtype != DT_FLOAT)
        return err_set(e, ST_UNSUPPORTED, "mlp kernel %s: candidate %d is not a float32 MLP chain",
                       fn, c->id);
    return emit_kernel(&m, cfg, fn, src, e);
}
