// BatchNorm folding (see passes.h): a convolution followed by a chain of single-consumer
// elementwise ADD/SUB/MUL/DIV by per-channel constants computes a[m] * conv(x, W)[m] + b[m]; the
// scale a goes into W's output channels (a new constant) and one ADD of b remains. The result
// differs from the unfolded chain by the rounding of W * a and of the combined bias only.
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Per-channel value c[m] of operand k of p's only instruction: an immediate, or a constant whose
// dims are all 1 except the channel axis (axis 1 of the rank-R output). False otherwise.
static bool channel_values(const PrimGraph *pg, const Prim *p, int k, int R, int64_t M, double *c) {
    const EwArg *a = &p->ew.code[0].arg[k];
    if (a->src == EWS_IMM) {
        for (int64_t m = 0; m < M; m++)
            c[m] = a->imm;
        return true;
    }
    if (a->src != EWS_INPUT || !pg_is_const(pg, p->in[a->index]))
        return false;
    const Tensor *t = pg->tensors[p->in[a->index]];
    int pos = 1 - (R - t->rank); // the channel axis in t's dims, if t reaches it
    if (!t->data || !dtype_is_float(t->dtype))
        return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] != 1 && !(d == pos && t->dims[d] == M))
            return false;
    bool per_channel = pos >= 0 && t->dims[pos] == M;
    for (int64_t m = 0; m < M; m++)
        c[m] = elem_get_f64(t->dtype, t->data, per_channel ? m : 0);
    return true;
}

// Applies p (one instruction over `cur` and a per-channel operand) to v = a * conv + b. Returns
// false, changing nothing, when p is not such a step; *scaled tells a MUL, DIV or negation.
static bool affine_step(const PrimGraph *pg, const Prim *p, int cur, double *a, double *b,
                        double *c, bool *scaled) {
    const Tensor *y = pg->tensors[cur], *o = pg->tensors[p->out[0]];
    if (p->kind != PRIM_ELEMWISE || p->ew.n != 1 || o->dtype != y->dtype || !pass_same_dims(o, y))
        return false;
    const EwInstr *ins = &p->ew.code[0];
    if (ins->dtype != y->dtype ||
        (ins->op != EW_ADD && ins->op != EW_SUB && ins->op != EW_MUL && ins->op != EW_DIV))
        return false;
    int at = -1, n_at = 0; // operand reading cur
    for (int k = 0; k < 2; k++)
        if (ins->arg[k].src == EWS_INPUT && p->in[ins->arg[k].index] == cur) {
            at = k;
            n_at++;
        }
    int64_t M = y->dims[1];
    if (n_at != 1 || !channel_values(pg, p, 1 - at, y->rank, M, c))
        return false;
    if (ins->op == EW_DIV && at == 1)
        return false; // c / v is not affine
    for (int64_t m = 0; m < M; m++) {
        switch (ins->op) {
        case EW_SUB:
            if (at == 0) {
                b[m] -= c[m];
            } else {
                a[m] = -a[m];
                b[m] = c[m] - b[m];
            }
            break;
        case EW_MUL:
        case EW_DIV:
            a[m] = ins->op == EW_MUL ? a[m] * c[m] : a[m] / c[m];
            b[m] = ins->op == EW_MUL ? b[m] * c[m] : b[m] / c[m];
            break;
        default: b[m] += c[m]; // EW_ADD
        }
    }
    *scaled |= ins->op == EW_MUL || ins->op == EW_DIV || (ins->op == EW_SUB && at == 1);
    return true;
}

// conv's weights scaled per output channel, the chain's last primitive made `conv + bias`.
static void rewrite(PrimGraph *pg, Prim *conv, Prim *last, const double *a, const double *b) {
    const Tensor *w = pg->tensors[conv->in[1]], *y = pg->tensors[conv->out[0]];
    int64_t M = y->dims[1], n = tensor_numel(w), per = M ? n / M : 0;
    void *wd = xmalloc(tensor_nbytes(w) + 1);
    for (int64_t i = 0; i < n; i++)
        elem_set_f64(w->dtype, wd, i, elem_get_f64(w->dtype, w->data, i) * a[i / per]);
    char name[256];
    snprintf(name, sizeof name, "%.200s/bn_folded", w->name);
    int wt = pg_add_const(pg, name, w->dtype, w->rank, w->dims, wd, true)->id;
    int64_t bdims[ORCH_MAX_RANK];
    for (int d = 0; d < y->rank; d++)
        bdims[d] = d == 1 ? M : 1;
    void *bd = xmalloc((size_t)M * dtype_size(y->dtype) + 1);
    for (int64_t m = 0; m < M; m++)
        elem_set_f64(y->dtype, bd, m, b[m]);
    snprintf(name, sizeof name, "%.200s/bias", pg->tensors[last->out[0]]->name);
    int bt = pg_add_const(pg, name, y->dtype, y->rank, bdims, bd, true)->id;
    conv->in[1] = wt;
    last->n_in = 2;
    last->in = arena_alloc(pg->arena, 2 * sizeof(int));
    last->in[0] = conv->out[0];
    last->in[1] = bt;
    EwInstr add = {.op = EW_ADD, .dtype = y->dtype};
    add.arg[0] = (EwArg){EWS_INPUT, 0, 0};
    add.arg[1] = (EwArg){EWS_INPUT, 1, 0};
    last->ew.n = 1;
    last->ew.code = arena_memdup(pg->arena, &add, sizeof add);
}

int pass_fold_batchnorm(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    pass_uses_build(pg, &u);
    int killed = 0, folded = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *conv = pg->prims[k];
        if (conv->dead || conv->kind != PRIM_LINEAR || conv->lin.op != LIN_CONV ||
            !pg_is_const(pg, conv->in[1]))
            continue;
        const Tensor *w = pg->tensors[conv->in[1]], *y = pg->tensors[conv->out[0]];
        int64_t M = y->dims[1];
        if (!w->data || !dtype_is_float(w->dtype) || w->dtype != y->dtype || w->dims[0] != M ||
            M < 1)
            continue;
        double *a = xmalloc(sizeof(double) * (size_t)M), *b = xcalloc((size_t)M, sizeof(double));
        double *c = xmalloc(sizeof(double) * (size_t)M);
        for (int64_t m = 0; m < M; m++)
            a[m] = 1;
        int *chain = xmalloc(sizeof(int) * (size_t)pg->n_prims), n = 0, cur = conv->out[0];
        bool scaled = false;
        // Walk while the value has one reader; the scale must come from somewhere in the chain.
        while (!u.is_output[cur] && u.count[cur] == 1) {
            const Prim *p = pg->prims[u.consumer[cur]];
            if (p->dead || !affine_step(pg, p, cur, a, b, c, &scaled))
                break;
            chain[n++] = u.consumer[cur];
            cur = p->out[0];
        }
        if (n > 0 && scaled) {
            rewrite(pg, conv, pg->prims[chain[n - 1]], a, b);
            for (int i = 0; i < n - 1; i++)
                pg->prims[chain[i]]->dead = true;
            killed += n - 1;
            folded++;
        }
        free(a);
        free(b);
        free(c);
        free(chain);
    }
    st->bn_folded += folded;
    pass_uses_free(&u);
    pass_finish(pg, killed);
    return ST_OK;
}
