// The operand values of a linear candidate (linear_values.h): plain C over `in[]` and int64_t,
// which is also valid CUDA C.
#include "linear_values.h"

#include <stdio.h>

void lin_emit_load(const Emit *E, int ind, int input, const char *off, const char *dst) {
    if (E->load)
        E->load(E, ind, input, off, dst);
    else
        sb_line(E->s, ind, "%s = ((const float *)in[%d])[%s];\n", dst, input, off);
}

// Batch coordinates of the output (matmul: bq0.. from b) and, when asked, the operands' batch
// offsets in elements (aoff, boff).
void lin_emit_batch_coords(const Emit *E, int ind, bool offsets) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (L->conv) {
        sb_line(s, ind, "const int64_t q_n = b / %lld, q_g = b %% %lld;\n", (long long)L->G,
                (long long)L->G);
        sb_line(s, ind, "(void)q_n; (void)q_g;\n");
        return;
    }
    sb_line(s, ind, "int64_t q_r = b;\n");
    for (int d = L->nbd - 1; d >= 0; d--)
        sb_line(s, ind, "const int64_t bq%d = q_r %% %lld; q_r /= %lld; (void)bq%d;\n", d,
                (long long)L->bd[d], (long long)L->bd[d], d);
    sb_line(s, ind, "(void)q_r;\n");
    if (offsets) {
        sb_line(s, ind, "int64_t aoff = 0, boff = 0;\n");
        for (int d = 0; d < L->nbd; d++) {
            if (L->sa[d])
                sb_line(s, ind, "aoff += bq%d * %lld;\n", d, (long long)(L->sa[d] * L->M * L->K));
            if (L->sb[d])
                sb_line(s, ind, "boff += bq%d * %lld;\n", d, (long long)(L->sb[d] * L->K * L->N));
        }
        sb_line(s, ind, "(void)aoff; (void)boff;\n");
    }
}

// A matmul operand t computed in the kernel (a prologue's value) at (row, col) of batch bq..
// (its broadcast batch dims read at 0), through cexpr.
static int matmul_operand(Emit *E, int ind, int t, const char *row, const char *col,
                          const char *dst, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    const Tensor *T = lin_t(L, t);
    char bidx[ORCH_MAX_RANK][16];
    const char *ix[ORCH_MAX_RANK];
    int r = lin_t(L, L->tl)->rank;
    for (int d = 0; d < T->rank - 2; d++) {
        int od = d + (r - T->rank);
        snprintf(bidx[d], sizeof bidx[d], T->dims[d] == 1 ? "0" : "bq%d", od);
        ix[d] = bidx[d];
    }
    ix[T->rank - 2] = row;
    ix[T->rank - 1] = col;
    sb_line(s, ind, "{\n");
    char v[64];
    int rc = cexpr_value(E->x, t, ix, s, ind + 1, v, sizeof v, e);
    if (rc)
        return rc;
    sb_line(s, ind + 1, "%s = %s;\n", dst, v);
    sb_line(s, ind, "}\n");
    cexpr_forget(E->x);
    return ST_OK;
}

// A convolution's W computed in the kernel (a prologue's value) at its first two coordinates
// (c0, c1) and the kernel offsets split off w_r (an int64_t local in scope), through cexpr.
static int conv_w_value(Emit *E, int ind, const char *c0, const char *c1, const char *dst, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    for (int d = L->S - 1; d >= 0; d--)
        sb_line(s, ind, "const int64_t w_k%d = w_r %% %lld; w_r /= %lld;\n", d, (long long)L->k[d],
                (long long)L->k[d]);
    const char *ix[5] = {c0, c1, "w_k0", "w_k1", "w_k2"};
    char v[64];
    int rc = cexpr_value(E->x, L->tb, ix, s, ind, v, sizeof v, e);
    if (rc)
        return rc;
    sb_line(s, ind, "%s = %s;\n", dst, v);
    cexpr_forget(E->x);
    return ST_OK;
}

// Statements setting `dst` (a float lvalue) to A[b](i, k) or B[b](k, j); i/k/j are int64_t
// variables in scope, batch coordinates too. Conv B reads are bounds-checked (padding).
int lin_emit_a_value(Emit *E, int ind, const char *i, const char *k, const char *dst, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (L->convt) {
        // W[g*Cg + c][i][kernel offset] for k = c*kpix + kernel offset.
        sb_line(s, ind, "{\n");
        sb_line(s, ind + 1,
                "const int64_t w_c = q_g * %lld + %s / %lld, w_m = %s, w_q = %s %% %lld;\n",
                (long long)L->Cg, k, (long long)L->kpix, i, k, (long long)L->kpix);
        if (L->pb >= 0) {
            char off[96];
            snprintf(off, sizeof off, "(w_c * %lld + w_m) * %lld + w_q", (long long)L->OCg,
                     (long long)L->kpix);
            lin_emit_load(E, ind + 1, L->pb, off, dst);
        } else {
            sb_line(s, ind + 1, "int64_t w_r = w_q;\n");
            int rc = conv_w_value(E, ind + 1, "w_c", "w_m", dst, e);
            if (rc)
                return rc;
        }
        sb_line(s, ind, "}\n");
        return ST_OK;
    }
    if (L->conv) {
        if (L->pb >= 0) {
            char off[160];
            snprintf(off, sizeof off, "(q_g * %lld + %s) * %lld + %s", (long long)L->OCg, i,
                     (long long)L->K, k);
            lin_emit_load(E, ind, L->pb, off, dst);
            return ST_OK;
        }
        // W index (oc, ci, kernel coords) from k.
        char idx[5][48];
        snprintf(idx[0], sizeof idx[0], "q_g * %lld + %s", (long long)L->OCg, i);
        sb_line(s, ind, "{\n");
        sb_line(s, ind + 1, "int64_t w_oc = %s, w_r = %s;\n", idx[0], k);
        int rc = conv_w_value(E, ind + 1, "w_oc", "w_r", dst, e);
        if (rc)
            return rc;
        sb_line(s, ind, "}\n");
        return ST_OK;
    }
    if (L->pa >= 0 && L->a_trans) {
        char off[160];
        snprintf(off, sizeof off, "aoff + %s * %lld + %s", k, (long long)L->M, i);
        lin_emit_load(E, ind, L->pa, off, dst);
        return ST_OK;
    }
    if (L->pa >= 0) {
        char off[160];
        snprintf(off, sizeof off, "aoff + %s * %lld + %s", i, (long long)L->K, k);
        lin_emit_load(E, ind, L->pa, off, dst);
        return ST_OK;
    }
    return matmul_operand(E, ind, L->ta, i, k, dst, e);
}

int lin_emit_b_value(Emit *E, int ind, const char *k, const char *j, const char *dst, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (!L->conv) {
        if (L->pb >= 0) {
            char off[160];
            snprintf(off, sizeof off, "boff + %s * %lld + %s", k, (long long)L->N, j);
            lin_emit_load(E, ind, L->pb, off, dst);
            return ST_OK;
        }
        return matmul_operand(E, ind, L->tb, k, j, dst, e);
    }
    sb_line(s, ind, "{\n");
    lin_emit_patch_coords(E, ind + 1, k, j);
    int rc = lin_emit_patch_value(E, ind + 1, dst, e);
    sb_line(s, ind, "}\n");
    return rc;
}

// The patch element's coordinates: channel and kernel offsets from k, output coordinates from j.
void lin_emit_patch_coords(const Emit *E, int ind, const char *k, const char *j) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_line(s, ind, "int64_t x_r = %s, o_r = %s;\n", k, j);
    for (int d = L->S - 1; d >= 0; d--) {
        sb_line(s, ind, "const int64_t x_k%d = x_r %% %lld; x_r /= %lld;\n", d, (long long)L->k[d],
                (long long)L->k[d]);
        sb_line(s, ind, "const int64_t x_o%d = o_r %% %lld; o_r /= %lld;\n", d,
                (long long)L->out[d], (long long)L->out[d]);
    }
    sb_line(s, ind, "const int64_t x_c = q_g * %lld + x_r;\n", (long long)L->Cg);
}

int lin_emit_patch_value(Emit *E, int ind, const char *dst, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_line(s, ind, "{\n");
    ind++;
    // Conv: input position o*stride - pad + k*dil. Conv transpose (the scatter o = i*stride -
    // pad + k*dil read backwards): i = (o + pad - k*dil) / stride where that divides.
    for (int d = 0; d < L->S; d++) {
        if (L->convt) {
            sb_line(s, ind, "const int64_t x_t%d = x_o%d + %lld - x_k%d * %lld;\n", d, d,
                    (long long)L->pad[d], d, (long long)L->dil[d]);
            sb_line(s, ind, "const int64_t x_i%d = x_t%d / %lld;\n", d, d, (long long)L->st[d]);
        } else {
            sb_line(s, ind, "const int64_t x_i%d = x_o%d * %lld - %lld + x_k%d * %lld;\n", d, d,
                    (long long)L->st[d], (long long)L->pad[d], d, (long long)L->dil[d]);
        }
    }
    sb_line(s, ind, "%s = 0.0f;\n", dst);
    sb_line(s, ind, "if (");
    for (int d = 0; d < L->S; d++) {
        if (L->convt)
            sb_printf(s, "%sx_t%d >= 0 && x_t%d %% %lld == 0 && x_i%d < %lld", d ? " && " : "", d,
                      d, (long long)L->st[d], d, (long long)L->in[d]);
        else
            sb_printf(s, "%s(uint64_t)x_i%d < %lluu", d ? " && " : "", d,
                      (unsigned long long)L->in[d]);
    }
    sb_puts(s, ") {\n");
    if (L->pa >= 0) {
        sb_line(s, ind + 1, "int64_t x_off = q_n * %lld + x_c;\n", (long long)L->C);
        for (int d = 0; d < L->S; d++)
            sb_line(s, ind + 1, "x_off = x_off * %lld + x_i%d;\n", (long long)L->in[d], d);
        lin_emit_load(E, ind + 1, L->pa, "x_off", dst);
    } else {
        const char *ix[5] = {"q_n", "x_c", "x_i0", "x_i1", "x_i2"};
        char v[64];
        int rc = cexpr_value(E->x, L->ta, ix, s, ind + 1, v, sizeof v, e);
        if (rc)
            return rc;
        sb_line(s, ind + 1, "%s = %s;\n", dst, v);
        cexpr_forget(E->x);
    }
    sb_line(s, ind, "}\n");
    sb_line(s, ind - 1, "}\n");
    return ST_OK;
}
