// lin_spec_analyse (linear_spec.h): a candidate of one LINEAR primitive seen as a batch of GEMMs.
#include "linear_spec.h"

#include "cexpr.h"

#include <stdlib.h>
#include <string.h>

bool lin_spec_analyse(const PrimGraph *pg, const Candidate *c, const LinRules *rules, Lin *L) {
    memset(L, 0, sizeof *L);
    L->pg = pg;
    L->c = c;
    int li = -1;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        if (p->kind == PRIM_OPAQUE || p->kind == PRIM_REDUCE)
            return false;
        if (p->kind == PRIM_LINEAR) {
            if (li >= 0)
                return false;
            li = i;
        }
    }
    if (li < 0 || (rules->max_inputs > 0 && c->n_inputs > rules->max_inputs))
        return false;
    const Prim *p = pg->prims[c->prims[li]];
    if (p->n_in != 2)
        return false;
    L->p = p;
    L->ta = p->in[0];
    L->tb = p->in[1];
    L->tl = p->out[0];
    L->sink = c->output;
    L->epi = L->sink != L->tl;
    const Tensor *A = lin_t(L, L->ta), *B = lin_t(L, L->tb), *O = lin_t(L, L->tl);
    DType dt = O->dtype, st = lin_t(L, L->sink)->dtype;
    bool dt_ok = dt == DT_FLOAT || (rules->half && (dt == DT_FLOAT16 || dt == DT_BFLOAT16));
    if (!dt_ok || A->dtype != dt || B->dtype != dt || (st != DT_FLOAT && st != dt))
        return false;
    // Epilogue: everything reading the LINEAR's result (directly or not) must be elementwise at
    // its shape, so each output element is finished from its own accumulator.
    bool *down = xcalloc((size_t)pg->n_tensors, sizeof(bool));
    down[L->tl] = true;
    bool ok = true;
    for (int i = li + 1; i < c->n_prims && ok; i++) {
        const Prim *q = pg->prims[c->prims[i]];
        bool reads = false;
        for (int j = 0; j < q->n_in; j++)
            reads |= q->in[j] >= 0 && down[q->in[j]];
        if (!reads)
            continue;
        if (rules->views && q->n_out == 1 && tensor_numel(lin_t(L, q->out[0])) == tensor_numel(O) &&
            (q->kind == PRIM_ELEMWISE || prim_layout_is_view(pg, q)))
            down[q->out[0]] = true; // the caller checks shapes along its views
        else if (q->kind != PRIM_ELEMWISE || q->n_out != 1 ||
                 !tensor_same_shape(lin_t(L, q->out[0]), O))
            ok = false;
        else
            down[q->out[0]] = true;
    }
    ok = ok && down[L->sink];
    free(down);
    if (!ok)
        return false;
    L->pa = cgen_input_pos(c, L->ta);
    L->pb = cgen_input_pos(c, L->tb);
    int r = O->rank;
    int b_uses = 0; // reads of the LINEAR's second operand (B, or a conv's W) in the kernel
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *q = pg->prims[c->prims[i]];
        for (int j = 0; j < q->n_in; j++)
            b_uses += q->in[j] == L->tb;
    }
    if (p->lin.op == LIN_MATMUL) {
        if (A->rank < 2 || B->rank < 2 || r < 2)
            return false;
        L->M = O->dims[r - 2];
        L->N = O->dims[r - 1];
        L->K = A->dims[A->rank - 1];
        L->nbd = r - 2;
        L->batch = 1;
        int64_t st_a = 1, st_b = 1;
        for (int d = r - 3; d >= 0; d--) {
            int da = d - (r - A->rank), db = d - (r - B->rank);
            int64_t xa = da >= 0 ? A->dims[da] : 1, xb = db >= 0 ? B->dims[db] : 1;
            L->bd[d] = O->dims[d];
            L->sa[d] = xa == 1 ? 0 : st_a;
            L->sb[d] = xb == 1 ? 0 : st_b;
            st_a *= xa;
            st_b *= xb;
            L->batch *= O->dims[d];
        }
        L->b_direct_ok = true;
        // B a constant read by nothing else in the kernel: its bytes can be reordered at load.
        L->b_prepack_ok = L->pb >= 0 && B->kind == TK_CONST && b_uses == 1;
        // A batch of row blocks times one shared B (activations times a weight) is one product
        // with batch*M rows: bigger tiles, B packed once. A must be a dense kernel input.
        bool dense_a = L->pa >= 0 && A->rank == r;
        for (int d = 0; d < r - 2 && dense_a; d++)
            dense_a = A->dims[d] == O->dims[d] && L->sb[d] == 0;
        if (dense_a && L->batch > 1) {
            L->m0 = L->M;
            L->M *= L->batch;
            L->batch = 1;
        }
    } else {
        const LinearParams *lp = &p->lin;
        if (rules->conv_2d_only && (lp->op != LIN_CONV || lp->n_spatial != 2))
            return false;
        L->conv = true;
        L->convt = lp->op == LIN_CONV_TRANSPOSE;
        L->S = lp->n_spatial;
        if (L->S < 1 || L->S > 3 || r != 2 + L->S || lp->group < 1)
            return false;
        L->NI = A->dims[0];
        L->C = A->dims[1];
        L->OC = O->dims[1];
        L->G = lp->group;
        if (L->C % L->G || L->OC % L->G)
            return false;
        L->Cg = L->C / L->G;
        L->OCg = L->OC / L->G;
        // W is [OC, C/G, k...] for conv, [C, OC/G, k...] for conv transpose.
        if (B->rank != r || B->dims[0] != (L->convt ? L->C : L->OC) ||
            B->dims[1] != (L->convt ? L->OCg : L->Cg))
            return false;
        L->kpix = 1;
        L->ipix = 1;
        int64_t opix = 1;
        bool unit = true;
        for (int d = 0; d < L->S; d++) {
            L->in[d] = A->dims[2 + d];
            L->out[d] = O->dims[2 + d];
            L->k[d] = B->dims[2 + d];
            L->st[d] = lp->stride[d];
            L->dil[d] = lp->dilation[d];
            L->pad[d] = lp->pad_begin[d];
            L->kpix *= L->k[d];
            L->ipix *= L->in[d];
            opix *= L->out[d];
            unit &= L->k[d] == 1 && L->st[d] == 1 && L->pad[d] == 0 && L->in[d] == L->out[d];
        }
        L->batch = L->NI * L->G;
        L->M = L->OCg;
        L->N = opix;
        // W a constant read by nothing else in the kernel: reorderable at load.
        L->w_prepack_ok = !L->convt && L->pb >= 0 && B->kind == TK_CONST && b_uses == 1;
        L->K = L->Cg * L->kpix;
        L->b_direct_ok = unit && !L->convt;
        L->dw_ok = L->Cg == 1 && L->S == 2 && !L->convt;
    }
    return L->M > 0 && L->N > 0 && L->K > 0 && L->batch > 0 &&
           (rules->max_batch <= 0 || L->batch <= rules->max_batch);
}
