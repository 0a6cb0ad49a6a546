// mlp_analyse (mlp_spec.h): a candidate of LINEAR layers and ELEMWISE epilogues seen as a chain.
#include "mlp_spec.h"

#include "cexpr.h"

#include <string.h>

static const Tensor *mt(const MlpChain *m, int t) {
    return m->pg->tensors[t];
}

static bool lead_eq(const MlpChain *m, const Tensor *t) {
    if (t->rank != m->rank || (t->dtype != m->dtype && t->dtype != DT_FLOAT))
        return false;
    for (int d = 0; d + 1 < m->rank; d++)
        if (t->dims[d] != m->lead[d])
            return false;
    return true;
}

// Whether primitive k of candidate c is a one-instruction CAST of a float32 kernel input to half,
// whose output is `t`.
static bool x_cast_prologue(const PrimGraph *pg, const Candidate *c, int k, int t) {
    const Prim *p = pg->prims[k];
    if (p->kind != PRIM_ELEMWISE || p->n_in != 1 || p->n_out != 1 || p->out[0] != t ||
        p->ew.n != 1 || p->ew.code[0].op != EW_CAST || p->ew.code[0].arg[0].src != EWS_INPUT ||
        p->ew.code[0].arg[0].index != 0 || p->in[0] < 0 || cgen_input_pos(c, p->in[0]) < 0)
        return false;
    DType to = pg->tensors[t]->dtype;
    return pg->tensors[p->in[0]]->dtype == DT_FLOAT && (to == DT_FLOAT16 || to == DT_BFLOAT16) &&
           p->ew.code[0].dtype == to;
}

// Position in c->prims of the primitive writing tensor u (-1: none in the candidate).
static int maker(const MlpChain *m, int u) {
    const Candidate *c = m->c;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = m->pg->prims[c->prims[i]];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] == u)
                return i;
    }
    return -1;
}

// Layer l's epilogue: the ELEMWISE primitives found walking back from act_l, stopping at the
// product tl_l, the layer's input in_l and constants, each claimed for layer l (m->owner). False
// where the walk meets anything else (another layer's tensor, a primitive already claimed, a
// non-constant kernel input) or never reaches the product.
static bool claim_epilogue(MlpChain *m, int l) {
    const PrimGraph *pg = m->pg;
    int stack[MLP_CAND_PRIMS_MAX + 8], sp = 0;
    bool on_t = false;
    stack[sp++] = m->act[l];
    while (sp > 0) {
        int u = stack[--sp];
        if (u == m->tl[l]) {
            on_t = true;
            continue;
        }
        if (u == m->in[l]) {
            m->xin[l] = true;
            continue;
        }
        int i = maker(m, u);
        if (i < 0) {
            if (!pg_is_const(pg, u))
                return false;
            continue;
        }
        const Prim *p = pg->prims[m->c->prims[i]];
        if (m->owner[i] == l)
            continue; // reached twice (a diamond)
        if (m->owner[i] != -2 || (p->kind != PRIM_ELEMWISE && p->kind != PRIM_REDUCE) ||
            p->n_out != 1)
            return false;
        m->owner[i] = l;
        for (int j = 0; j < p->n_in; j++) {
            if (p->in[j] < 0 || sp == (int)ORCH_COUNT(stack))
                return false;
            stack[sp++] = p->in[j];
        }
    }
    return on_t;
}

// Whether tensor u has layer l's output shape (full) or its row shape [lead..., 1] (!full).
static bool layer_shaped(const MlpChain *m, int l, int u, bool full) {
    const Tensor *t = mt(m, u);
    if (t->rank != m->rank)
        return false;
    for (int d = 0; d + 1 < m->rank; d++)
        if (t->dims[d] != m->lead[d])
            return false;
    return t->dims[m->rank - 1] == (full ? m->N[l] : 1);
}

// Epilogue primitive k of layer l: an ELEMWISE one writes a tensor of the layer's output shape
// or of its row shape (numpy broadcasting then reads a row statistic along its own row); a REDUCE
// one is a row reduction (MlpChain.red), recorded in the layer's list.
static bool epi_shape_ok(MlpChain *m, int l, int k) {
    const Prim *p = m->pg->prims[k];
    int o = p->out[0];
    if (o < 0)
        return false;
    if (p->kind == PRIM_ELEMWISE)
        return layer_shaped(m, l, o, true) || layer_shaped(m, l, o, false);
    const Tensor *in = p->n_in == 1 && p->in[0] >= 0 ? mt(m, p->in[0]) : NULL;
    if (!in || (p->red.op != RED_SUM && p->red.op != RED_MEAN) ||
        p->red.axes != 1u << (m->rank - 1) || !p->red.keepdims ||
        !layer_shaped(m, l, p->in[0], true) || !layer_shaped(m, l, o, false) ||
        !dtype_is_float(in->dtype) || !dtype_is_float(mt(m, o)->dtype) ||
        m->n_red[l] == MLP_RED_MAX)
        return false;
    m->red[l][m->n_red[l]++] = k;
    m->any_red = true;
    return true;
}

bool mlp_analyse(const PrimGraph *pg, const Candidate *c, MlpChain *m) {
    memset(m, 0, sizeof *m);
    m->pg = pg;
    m->c = c;
    m->x_cast_prim = -1;
    if (c->n_prims > MLP_CAND_PRIMS_MAX)
        return false;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        if (p->kind == PRIM_LINEAR) {
            if (m->n == MLP_LAYERS_MAX || !cand_mlp_layer_ok(pg, p))
                return false;
            m->lin[m->n++] = c->prims[i];
        } else if ((p->kind != PRIM_ELEMWISE && p->kind != PRIM_REDUCE) || p->n_out != 1) {
            return false;
        }
    }
    if (m->n < 2 || c->output < 0)
        return false;
    m->dtype = pg->tensors[pg->prims[m->lin[0]]->out[0]]->dtype;
    for (int l = 0; l < m->n; l++) {
        const Prim *p = pg->prims[m->lin[l]];
        m->tl[l] = p->out[0];
        m->in[l] = p->in[0];
        m->w_pos[l] = cgen_input_pos(c, p->in[1]);
        const Tensor *w = pg->tensors[p->in[1]];
        m->K[l] = w->dims[0];
        m->N[l] = w->dims[1];
        if (m->w_pos[l] < 0)
            return false;
        if (l == 0) {
            m->x_pos = cgen_input_pos(c, p->in[0]);
            for (int i = 0; m->x_pos < 0 && i < c->n_prims; i++)
                if (x_cast_prologue(pg, c, c->prims[i], p->in[0])) {
                    m->x_cast = true;
                    m->x_cast_prim = c->prims[i];
                    m->x_pos = cgen_input_pos(c, pg->prims[c->prims[i]]->in[0]);
                }
            if (m->x_pos < 0)
                return false;
        } else {
            // The previous layer's result, computed in the kernel.
            if (cgen_input_pos(c, p->in[0]) >= 0 || m->K[l] != m->N[l - 1])
                return false;
            m->act[l - 1] = p->in[0];
        }
    }
    m->act[m->n - 1] = c->output;
    const Tensor *y0 = mt(m, m->tl[0]);
    m->rank = y0->rank;
    m->R = 1;
    for (int d = 0; d + 1 < m->rank; d++) {
        m->lead[d] = y0->dims[d];
        m->R *= y0->dims[d];
    }
    for (int l = 0; l < m->n; l++) {
        const Tensor *a = mt(m, m->act[l]), *t = mt(m, m->tl[l]);
        if (!lead_eq(m, a) || !lead_eq(m, t) || a->dims[m->rank - 1] != m->N[l] ||
            t->dims[m->rank - 1] != m->N[l])
            return false;
        m->epi[l] = m->act[l] != m->tl[l];
    }
    // Every ELEMWISE primitive in exactly one layer's epilogue (or the input's CAST).
    for (int i = 0; i < c->n_prims; i++) {
        PrimKind k = pg->prims[c->prims[i]]->kind;
        m->owner[i] =
            (k == PRIM_ELEMWISE || k == PRIM_REDUCE) && c->prims[i] != m->x_cast_prim ? -2 : -1;
    }
    for (int l = 0; l < m->n; l++) {
        if (m->act[l] == m->in[l] || !claim_epilogue(m, l))
            return false;
        if (m->xin[l] && m->K[l] != m->N[l])
            return false;
        m->any_xin = m->any_xin || m->xin[l];
    }
    for (int i = 0; i < c->n_prims; i++)
        if (m->owner[i] == -2 || (m->owner[i] >= 0 && !epi_shape_ok(m, m->owner[i], c->prims[i])))
            return false;
    // Every layer's tensors of one dtype (each is one by cand_mlp_layer_ok), so that the layers'
    // products feed each other as they are.
    for (int l = 0; l < m->n; l++)
        if (mt(m, m->tl[l])->dtype != m->dtype ||
            (l + 1 < m->n && mt(m, m->act[l])->dtype != m->dtype))
            return false;
    DType xt = mt(m, c->inputs[m->x_pos])->dtype;
    return m->R > 0 && (m->x_cast ? xt == DT_FLOAT && m->dtype != DT_FLOAT : xt == m->dtype) &&
           lead_eq(m, mt(m, c->inputs[m->x_pos]));
}
