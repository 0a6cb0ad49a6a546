// Fused attention candidates (attention.h). From every LIN_MATMUL O = P · V the matcher
// walks back through the fissioned softmax (DIV by a sum-reduce of an EXP(SUB) of a max-reduce)
// and the pre-softmax ELEMWISE chain to the score MatMul S = Q · Kt. The same matcher serves the
// enumerator (over the whole graph's producers, with consumer checks) and attn_analyse (over the
// candidate's own primitives), so the two agree on what an attention is. attn_analyse also finds
// the K/V head group of grouped-query attention on the member layouts' index maps.
// Convexity: every tensor the candidate computes, except O, is read only inside it and is no
// graph output, so no path leaves the set and re-enters it. Under half storage every tensor of
// the attention has the dtype of O; instructions may compute in float32 or in that dtype.
#include "attention.h"

#include "../prim/index_map.h"
#include "candidates_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct Match {
    const PrimGraph *pg;
    const int *producer; // tensor -> primitive (-1: none / outside)
} Match;

static const Prim *prim_of(const Match *m, int t, int *idx) {
    int k = t >= 0 && t < m->pg->n_tensors ? m->producer[t] : -1;
    if (idx)
        *idx = k;
    return k >= 0 ? m->pg->prims[k] : NULL;
}

static bool is_dt(const PrimGraph *pg, int t, DType dt) {
    return t >= 0 && pg->tensors[t]->dtype == dt;
}

// An instruction result type of the attention's arithmetic: float32, or its own half type.
static bool ew_float(DType ins, DType dt) {
    return ins == DT_FLOAT || ins == dt;
}

// A REDUCE op over the last axis of in (rank r), keepdims.
static bool last_axis_reduce(const PrimGraph *pg, const Prim *p, RedOp op, int in, DType dt) {
    if (!p || p->kind != PRIM_REDUCE || p->red.op != op || p->n_in != 1 || p->n_out != 1 ||
        p->in[0] != in || !p->red.keepdims || !is_dt(pg, p->out[0], dt))
        return false;
    int r = pg->tensors[in]->rank;
    return p->red.axes == (1u << (r - 1));
}

// An ELEMWISE whose program is exactly ops[0](in a, in b) [then ops[1](%0)]; *a_pos/*b_pos get
// which of the primitive's inputs the instruction reads first and second.
static bool ew_binary(const Prim *p, EwOp op0, int n_ops, EwOp op1, DType dt, int *first,
                      int *second) {
    if (!p || p->kind != PRIM_ELEMWISE || p->n_in != 2 || p->n_out != 1 || p->ew.n != n_ops)
        return false;
    const EwInstr *i0 = &p->ew.code[0];
    if (i0->op != op0 || !ew_float(i0->dtype, dt) || i0->arg[0].src != EWS_INPUT ||
        i0->arg[1].src != EWS_INPUT || i0->arg[0].index == i0->arg[1].index)
        return false;
    if (n_ops == 2) {
        const EwInstr *i1 = &p->ew.code[1];
        if (i1->op != op1 || !ew_float(i1->dtype, dt) || i1->arg[0].src != EWS_INSTR ||
            i1->arg[0].index != 0)
            return false;
    }
    *first = p->in[i0->arg[0].index];
    *second = p->in[i0->arg[1].index];
    return true;
}

// P = E / l: one DIV of the two inputs, or that DIV with NaNs replaced by 0 (PyTorch's export of
// scaled_dot_product_attention: %1 = ISNAN(%0); %2 = WHERE(%1, 0, %0)).
static bool div_program(const Prim *p, DType dt, int *e_t, int *l_t, bool *nan_to_zero) {
    if (!p || p->kind != PRIM_ELEMWISE || (p->ew.n != 1 && p->ew.n != 3))
        return false;
    *nan_to_zero = p->ew.n == 3;
    if (p->ew.n == 3) {
        const EwInstr *i1 = &p->ew.code[1], *i2 = &p->ew.code[2];
        if (i1->op != EW_ISNAN || i1->arg[0].src != EWS_INSTR || i1->arg[0].index != 0 ||
            i2->op != EW_WHERE || !ew_float(i2->dtype, dt) || i2->arg[0].src != EWS_INSTR ||
            i2->arg[0].index != 1 || i2->arg[1].src != EWS_IMM || i2->arg[1].imm != 0.0 ||
            i2->arg[2].src != EWS_INSTR || i2->arg[2].index != 0)
            return false;
    }
    const EwInstr *i0 = &p->ew.code[0];
    if (p->n_in != 2 || p->n_out != 1 || i0->op != EW_DIV || !ew_float(i0->dtype, dt) ||
        i0->arg[0].src != EWS_INPUT || i0->arg[1].src != EWS_INPUT ||
        i0->arg[0].index == i0->arg[1].index)
        return false;
    *e_t = p->in[i0->arg[0].index];
    *l_t = p->in[i0->arg[1].index];
    return true;
}

// Dims of x (rank r) are the batch dims of O or 1, then the two given matrix dims.
static bool operand_ok(const PrimGraph *pg, int x, const AttnSpec *a, int64_t rows, int64_t cols) {
    const Tensor *t = pg->tensors[x];
    if (t->rank != a->rank || t->dtype != a->dt)
        return false;
    for (int d = 0; d + 2 < a->rank; d++)
        if (t->dims[d] != a->lead[d] && t->dims[d] != 1)
            return false;
    return t->dims[a->rank - 2] == rows && t->dims[a->rank - 1] == cols;
}

// Dense element strides of tensor t (0 on unit axes).
static void dense_strides(const Tensor *t, int64_t *stride) {
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        stride[d] = t->dims[d] == 1 ? 0 : s;
        s *= t->dims[d];
    }
}

// The offset in Y of the element LAYOUT p (transposes and reshapes only, Y = p(O)) takes from
// O's element oi: the stages inverted, from the input side (a transpose's inverse permutes back,
// a reshape keeps the flat offset).
static int64_t inverse_offset(const Prim *p, const Tensor *Y, const Tensor *O, const int64_t *oi) {
    int64_t cur[ORCH_MAX_RANK], nxt[ORCH_MAX_RANK];
    memcpy(cur, oi, sizeof(int64_t) * (size_t)O->rank);
    for (int k = p->lay.n_stages - 1; k >= 0; k--) {
        const LayoutStage *st = &p->lay.stages[k];
        int orank = k == 0 ? Y->rank : p->lay.stages[k - 1].in_rank;
        const int64_t *odims = k == 0 ? Y->dims : p->lay.stages[k - 1].in_dims;
        if (st->kind == LS_TRANSPOSE) {
            for (int d = 0; d < orank; d++) // in[perm[d]] = out[d]
                nxt[d] = cur[st->perm[d]];
        } else {
            int64_t f = 0;
            for (int d = 0; d < st->in_rank; d++)
                f = f * st->in_dims[d] + cur[d];
            for (int d = orank - 1; d >= 0; d--) {
                nxt[d] = f % odims[d];
                f /= odims[d];
            }
        }
        memcpy(cur, nxt, sizeof cur);
    }
    int64_t off = 0;
    for (int d = 0; d < Y->rank; d++)
        off = off * Y->dims[d] + cur[d];
    return off;
}

// Whether LAYOUT p, reading O alone into Y, writes O's element i at sum_d stride[d] * i[d] of Y
// with O's last axis unit-stride (fills stride). Checked at every point of small tensors, else
// on the axis lines through both corners and at 512 pseudo-random points.
static bool out_layout_strides(const PrimGraph *pg, const Prim *p, int64_t *stride) {
    if (p->kind != PRIM_LAYOUT || p->lay.concat || p->n_in != 1 || p->n_out != 1 ||
        p->lay.n_stages < 1)
        return false;
    const Tensor *O = pg->tensors[p->in[0]], *Y = pg->tensors[p->out[0]];
    if (O->dtype != Y->dtype || tensor_numel(O) != tensor_numel(Y) || O->rank < 2)
        return false;
    for (int k = 0; k < p->lay.n_stages; k++)
        if (p->lay.stages[k].kind != LS_TRANSPOSE && p->lay.stages[k].kind != LS_RESHAPE)
            return false;
    const int r = O->rank;
    int64_t idx[ORCH_MAX_RANK] = {0};
    if (inverse_offset(p, Y, O, idx) != 0)
        return false;
    for (int d = 0; d < r; d++) {
        stride[d] = 0;
        if (O->dims[d] == 1)
            continue;
        idx[d] = 1;
        stride[d] = inverse_offset(p, Y, O, idx);
        idx[d] = 0;
    }
    if (O->dims[r - 1] > 1 && stride[r - 1] != 1)
        return false;
    stride[r - 1] = 1;
    int64_t n = tensor_numel(O), points = n <= 4096 ? n : 2 * r * 512 + 512;
    uint64_t z = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < points; i++) {
        if (n <= 4096) {
            int64_t f = i;
            for (int q = r - 1; q >= 0; q--) {
                idx[q] = f % O->dims[q];
                f /= O->dims[q];
            }
        } else if (i < 2 * r * 512) { // axis lines through the origin and the far corner
            int64_t line = i / 512, step = i % 512;
            int axis = (int)(line % r), corner = (int)(line / r);
            for (int q = 0; q < r; q++)
                idx[q] = corner ? O->dims[q] - 1 : 0;
            idx[axis] = step * O->dims[axis] / 512;
        } else {
            for (int q = 0; q < r; q++) {
                z ^= z << 13;
                z ^= z >> 7;
                z ^= z << 17;
                idx[q] = (int64_t)(z % (uint64_t)O->dims[q]);
            }
        }
        int64_t want = 0;
        for (int q = 0; q < r; q++)
            want += stride[q] * idx[q];
        if (inverse_offset(p, Y, O, idx) != want)
            return false;
    }
    return true;
}

// Matches the attention ending at the MatMul mm2 (a prim index); fills a's structure fields.
static bool match(const Match *m, int mm2, AttnSpec *a) {
    const PrimGraph *pg = m->pg;
    memset(a, 0, sizeof *a);
    a->pg = pg;
    const Prim *o = pg->prims[mm2];
    if (o->kind != PRIM_LINEAR || o->lin.op != LIN_MATMUL || o->n_in != 2 || o->n_out != 1 ||
        o->out[0] < 0)
        return false;
    const DType dt = pg->tensors[o->out[0]]->dtype;
    if (dt != DT_FLOAT && dt != DT_FLOAT16 && dt != DT_BFLOAT16)
        return false;
    a->dt = dt;
    a->mm2 = mm2;
    a->out = a->y = o->out[0];
    a->cast = a->out_layout = -1;
    a->kv_axis = -1;
    a->kv_group = 1;
    dense_strides(pg->tensors[a->out], a->ostride);
    a->v = o->in[1];
    int P = o->in[0];
    const Prim *div = prim_of(m, P, &a->ew_div);
    int e_t, l_t, sp, mx;
    if (!div_program(div, dt, &e_t, &l_t, &a->nan_to_zero) || !is_dt(pg, P, dt))
        return false;
    const Prim *sum = prim_of(m, l_t, &a->red_sum);
    if (!last_axis_reduce(pg, sum, RED_SUM, e_t, dt))
        return false;
    const Prim *ex = prim_of(m, e_t, &a->ew_exp);
    if (!ew_binary(ex, EW_SUB, 2, EW_EXP, dt, &sp, &mx) || !is_dt(pg, e_t, dt))
        return false;
    const Prim *rmax = prim_of(m, mx, &a->red_max);
    if (!last_axis_reduce(pg, rmax, RED_MAX, sp, dt))
        return false;
    a->sp = sp;
    // Back through the pre-softmax chain: each link reads the chain tensor (the input of the
    // scores' full shape produced by an ELEMWISE or the MatMul) once.
    const Tensor *S = pg->tensors[sp];
    int t = sp, n_pre = 0, pre_rev[8];
    for (;;) {
        int k;
        const Prim *p = prim_of(m, t, &k);
        if (!p || !is_dt(pg, t, dt) || !tensor_same_shape(pg->tensors[t], S))
            return false;
        if (p->kind == PRIM_LINEAR) {
            if (p->lin.op != LIN_MATMUL || p->n_in != 2 || p->n_out != 1)
                return false;
            a->mm1 = k;
            a->s = t;
            a->q = p->in[0];
            a->kt = p->in[1];
            break;
        }
        if (p->kind != PRIM_ELEMWISE || p->n_out != 1 || n_pre == 8)
            return false;
        int chain = -1;
        for (int j = 0; j < p->n_in; j++) {
            int u = p->in[j];
            const Prim *q = prim_of(m, u, NULL);
            if (u < 0 || !q || !tensor_same_shape(pg->tensors[u], S) ||
                (q->kind != PRIM_ELEMWISE && q->kind != PRIM_LINEAR))
                continue;
            if (chain >= 0 && chain != u)
                return false; // two candidates for the chain: not attention's shape
            chain = u;
        }
        if (chain < 0)
            return false;
        pre_rev[n_pre++] = k;
        t = chain;
    }
    a->n_pre = n_pre;
    for (int i = 0; i < n_pre; i++)
        a->pre[i] = pre_rev[n_pre - 1 - i];
    // Shapes: S [..., M, N], O [..., M, Dv], P = S's shape.
    const Tensor *O = pg->tensors[a->out];
    a->rank = S->rank;
    if (a->rank < 2 || O->rank != a->rank || !tensor_same_shape(pg->tensors[P], S) ||
        !tensor_same_shape(pg->tensors[e_t], S))
        return false;
    a->B = 1;
    for (int d = 0; d + 2 < a->rank; d++) {
        a->lead[d] = S->dims[d];
        a->B *= S->dims[d];
        if (O->dims[d] != S->dims[d])
            return false;
    }
    a->M = S->dims[a->rank - 2];
    a->N = S->dims[a->rank - 1];
    a->Dv = O->dims[a->rank - 1];
    a->D = pg->tensors[a->q]->dims[pg->tensors[a->q]->rank - 1];
    if (O->dims[a->rank - 2] != a->M || a->M < 1 || a->N < 1 || a->D < 1 || a->Dv < 1 ||
        a->D > ATTN_MAX_HEAD || a->Dv > ATTN_MAX_HEAD || a->B < 1)
        return false;
    return operand_ok(pg, a->q, a, a->M, a->D) && operand_ok(pg, a->kt, a, a->D, a->N) &&
           operand_ok(pg, a->v, a, a->N, a->Dv) && a->q != a->kt;
}

// Whether p is one CAST of its single input to float32 (the storage pass's boundary).
static bool cast_to_f32(const Prim *p) {
    return p->kind == PRIM_ELEMWISE && p->n_in == 1 && p->n_out == 1 && p->ew.n == 1 &&
           p->ew.code[0].op == EW_CAST && p->ew.code[0].dtype == DT_FLOAT &&
           p->ew.code[0].arg[0].src == EWS_INPUT && p->ew.code[0].arg[0].index == 0;
}

// The primitives of the core (without layouts), in no particular order; returns how many.
static int core_members(const AttnSpec *a, int *out) {
    int n = 0;
    out[n++] = a->mm1;
    for (int i = 0; i < a->n_pre; i++)
        out[n++] = a->pre[i];
    out[n++] = a->red_max;
    out[n++] = a->ew_exp;
    out[n++] = a->red_sum;
    out[n++] = a->ew_div;
    out[n++] = a->mm2;
    return n;
}

// The source of tensor t's element idx: the first tensor up the chain of member LAYOUTs
// (producer[] maps only the candidate's members) that is a kernel input or a member ELEMWISE's
// output (one element of it is one value), and the element's dense offset in it; false where the
// element is padding or another member (a concat) produces t.
static bool source_of(const PrimGraph *pg, const int *producer, int t, const int64_t *idx, int *src,
                      int64_t *off) {
    int64_t cur[ORCH_MAX_RANK], in[ORCH_MAX_RANK];
    memcpy(cur, idx, sizeof(int64_t) * (size_t)pg->tensors[t]->rank);
    for (int hop = 0; hop < 8; hop++) {
        const Tensor *T = pg->tensors[t];
        int k = producer[t];
        if (k < 0 || pg->prims[k]->kind == PRIM_ELEMWISE) { // an input or a computed value
            int64_t o = 0;
            for (int d = 0; d < T->rank; d++)
                o = o * T->dims[d] + cur[d];
            *src = t;
            *off = o;
            return true;
        }
        const Prim *p = pg->prims[k];
        if (p->kind != PRIM_LAYOUT || p->lay.concat || p->n_in != 1 || p->in[0] < 0 ||
            !layout_map_index(&p->lay, T->rank, T->dims, cur, in))
            return false;
        t = p->in[0];
        memcpy(cur, in, sizeof(int64_t) * (size_t)pg->tensors[t]->rank);
    }
    return false;
}

// Whether x's (K^T's or V's) element at idx and the one at idx with idx[axis] rounded down to a
// multiple of g are the same source element: at every point of small tensors, else on the axis
// lines through both corners and at 512 pseudo-random points. A unit (broadcast) axis is.
static bool kv_grouped(const PrimGraph *pg, const int *producer, int x, int axis, int64_t g) {
    const Tensor *T = pg->tensors[x];
    if (T->dims[axis] == 1)
        return true;
    const int r = T->rank;
    int64_t n = tensor_numel(T), points = n <= 4096 ? n : 2 * r * 512 + 512;
    int64_t idx[ORCH_MAX_RANK], rep[ORCH_MAX_RANK];
    uint64_t z = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < points; i++) {
        if (n <= 4096) {
            int64_t f = i;
            for (int q = r - 1; q >= 0; q--) {
                idx[q] = f % T->dims[q];
                f /= T->dims[q];
            }
        } else if (i < 2 * r * 512) { // axis lines through the origin and the far corner
            int64_t line = i / 512, step = i % 512;
            int ax = (int)(line % r), corner = (int)(line / r);
            for (int q = 0; q < r; q++)
                idx[q] = corner ? T->dims[q] - 1 : 0;
            idx[ax] = step * T->dims[ax] / 512;
        } else {
            for (int q = 0; q < r; q++) {
                z ^= z << 13;
                z ^= z >> 7;
                z ^= z << 17;
                idx[q] = (int64_t)(z % (uint64_t)T->dims[q]);
            }
        }
        memcpy(rep, idx, sizeof(int64_t) * (size_t)r);
        rep[axis] -= rep[axis] % g;
        if (rep[axis] == idx[axis])
            continue;
        int s1, s2;
        int64_t o1, o2;
        if (!source_of(pg, producer, x, idx, &s1, &o1) ||
            !source_of(pg, producer, x, rep, &s2, &o2) || s1 != s2 || o1 != o2)
            return false;
    }
    return true;
}

// The K/V head group (AttnSpec.kv_axis, kv_group): the lead axis and the largest divisor of its
// length under which K^T and V both read one source element per group of consecutive indices.
static void kv_group_of(const PrimGraph *pg, const int *producer, AttnSpec *a) {
    a->kv_axis = -1;
    a->kv_group = 1;
    for (int d = 0; d + 2 < a->rank; d++)
        for (int64_t g = a->lead[d]; g > a->kv_group; g--)
            if (a->lead[d] % g == 0 && kv_grouped(pg, producer, a->kt, d, g) &&
                kv_grouped(pg, producer, a->v, d, g)) {
                a->kv_axis = d;
                a->kv_group = g;
                break;
            }
}

bool attn_analyse(const PrimGraph *pg, const Candidate *c, AttnSpec *a) {
    if (c->n_prims < 6 || c->n_prims > ATTN_MAX_PRIMS || cand_count_linear(pg, c) != 2)
        return false;
    int *producer = xmalloc(sizeof(int) * ((size_t)pg->n_tensors + 1));
    for (int t = 0; t < pg->n_tensors; t++)
        producer[t] = -1;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                producer[p->out[j]] = c->prims[i];
    }
    Match m = {pg, producer};
    int sink = c->prims[c->n_prims - 1], cast = -1, olay = -1;
    const Prim *last = pg->prims[sink];
    if (cast_to_f32(last)) { // a half O cast to float32 ends the candidate
        cast = sink;
        sink = producer[last->in[0]];
    } else if (last->kind == PRIM_LAYOUT && last->n_in == 1 && last->n_out == 1 &&
               last->out[0] == c->output && last->in[0] >= 0) { // O's heads merged back
        olay = sink;
        sink = producer[last->in[0]];
    }
    bool ok = sink >= 0 && pg->prims[sink]->n_out == 1 &&
              (cast >= 0 || olay >= 0 || pg->prims[sink]->out[0] == c->output) &&
              match(&m, sink, a);
    if (ok && cast >= 0) {
        ok = a->dt != DT_FLOAT && pg->prims[cast]->out[0] == c->output;
        a->cast = cast;
        a->y = c->output;
    }
    if (ok && olay >= 0) {
        ok = last->in[0] == a->out && out_layout_strides(pg, last, a->ostride);
        a->out_layout = olay;
        a->y = c->output;
    }
    if (ok) {
        // Every member is a core primitive, the CAST, the output LAYOUT or a prologue member:
        // a LAYOUT or ELEMWISE producing Q, Kt or V, or read by another prologue member (the
        // enumerator's closure keeps every reader of a prologue tensor inside the candidate).
        int core[18], nc = core_members(a, core), nl = 0, ne = 0;
        if (cast >= 0)
            core[nc++] = cast;
        if (olay >= 0)
            core[nc++] = olay;
        bool *pro = xcalloc((size_t)c->n_prims + 1, sizeof(bool));
        for (int i = 0; i < c->n_prims; i++) {
            int k = c->prims[i];
            pro[i] = true;
            for (int j = 0; j < nc && pro[i]; j++)
                pro[i] = core[j] != k;
        }
        for (int i = 0; i < c->n_prims && ok; i++) {
            if (!pro[i])
                continue;
            const Prim *p = pg->prims[c->prims[i]];
            ok = (p->kind == PRIM_LAYOUT || p->kind == PRIM_ELEMWISE) && p->n_out == 1 &&
                 p->out[0] >= 0;
            bool feeds = ok && (p->out[0] == a->q || p->out[0] == a->kt || p->out[0] == a->v);
            for (int j = 0; ok && !feeds && j < c->n_prims; j++) {
                const Prim *r = pg->prims[c->prims[j]];
                for (int q = 0; pro[j] && j != i && q < r->n_in && !feeds; q++)
                    feeds = r->in[q] == p->out[0];
            }
            ok = ok && feeds;
            nl += p->kind == PRIM_LAYOUT;
            ne += p->kind == PRIM_ELEMWISE;
        }
        free(pro);
        ok = ok && c->n_prims == nc + nl + ne;
        a->n_layouts = nl;
        a->n_prologue = ne;
        a->c = c;
    }
    if (ok)
        kv_group_of(pg, producer, a);
    free(producer);
    return ok;
}

// ---- enumeration ----

// Readers of every tensor (a primitive reading t twice counts once) and graph outputs.
typedef struct Uses {
    int *n_cons;
    int *cons_off, *cons; // CSR: readers of t at cons[cons_off[t] .. cons_off[t + 1])
    bool *is_out;
} Uses;

static void uses_build(const PrimGraph *pg, Uses *u) {
    int nt = pg->n_tensors;
    u->n_cons = xcalloc((size_t)nt + 1, sizeof(int));
    u->cons_off = xcalloc((size_t)nt + 2, sizeof(int));
    u->is_out = xcalloc((size_t)nt + 1, sizeof(bool));
    u->cons = NULL;
    for (int i = 0; i < pg->n_outputs; i++)
        if (pg->outputs[i] >= 0 && pg->outputs[i] < nt)
            u->is_out[pg->outputs[i]] = true;
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int t = 0; t < nt; t++) {
                u->cons_off[t + 1] = u->cons_off[t] + u->n_cons[t];
                u->n_cons[t] = 0;
            }
            total = u->cons_off[nt];
            u->cons = xmalloc(sizeof(int) * ((size_t)total + 1));
        }
        for (int k = 0; k < pg->n_prims; k++) {
            const Prim *p = pg->prims[k];
            for (int j = 0; j < p->n_in; j++) {
                int t = p->in[j];
                bool again = false;
                for (int q = 0; q < j && !again; q++)
                    again = p->in[q] == t;
                if (t < 0 || again)
                    continue;
                if (pass == 1)
                    u->cons[u->cons_off[t] + u->n_cons[t]] = k;
                u->n_cons[t]++;
            }
        }
    }
}

static void uses_free(Uses *u) {
    free(u->n_cons);
    free(u->cons_off);
    free(u->cons);
    free(u->is_out);
}

static bool in_set(const int *set, int n, int k) {
    for (int i = 0; i < n; i++)
        if (set[i] == k)
            return true;
    return false;
}

// Every tensor a member computes, except the sink's output, is read only by members and is no
// graph output; every member lies in one segment.
static bool closed(const PrimGraph *pg, const Uses *u, const int *seg, const int *set, int n,
                   int sink) {
    for (int i = 0; i < n; i++) {
        const Prim *p = pg->prims[set[i]];
        if (seg[set[i]] != seg[sink] || p->n_out != 1)
            return false;
        if (set[i] == sink)
            continue;
        int t = p->out[0];
        if (u->is_out[t])
            return false;
        for (int j = u->cons_off[t]; j < u->cons_off[t] + u->n_cons[t]; j++)
            if (!in_set(set, n, u->cons[j]))
                return false;
    }
    return true;
}

// Appends the candidate of the n prims in set (sorted here) ending at sink, and, when `cast` >=
// 0 (the CAST reading a half O alone), the same ending with the CAST; returns how many.
static int append(CandidateSet *cs, const PrimGraph *pg, const Uses *u, const uint64_t *prim_hash,
                  const int *set, int n, int sink, int cast) {
    int s[ATTN_MAX_PRIMS + 2], added = 0;
    memcpy(s, set, sizeof(int) * (size_t)n);
    qsort(s, (size_t)n, sizeof(int), cand_cmp_int);
    cand_append(cs, pg, prim_hash, s, n, cs->segment_of_prim[sink]);
    added++;
    if (cast >= 0) {
        s[n] = cast;
        if (closed(pg, u, cs->segment_of_prim, s, n + 1, cast)) {
            cand_append(cs, pg, prim_hash, s, n + 1, cs->segment_of_prim[cast]);
            added++;
        }
    }
    return added;
}

// Grows set[n0 .. n) (the prologue: LAYOUTs producing Q, Kt and V) by every ELEMWISE or LAYOUT
// producing a tensor Q, Kt, V or a prologue member reads, where the set stays closed (all its
// readers inside, one segment), until nothing more joins or the set has `cap` members; returns
// the new n. *rotary: the prologue holds an ELEMWISE and a concat (rotate_half's cat).
static int grow_prologue(const PrimGraph *pg, const Uses *u, const int *seg, const int *producer,
                         const AttnSpec *a, int *set, int n0, int n, int cap, int sink,
                         bool *rotary) {
    for (bool grew = true; grew;) {
        grew = false;
        for (int i = n0 - 3; i < n && n < cap; i++) {
            const Prim *r = i >= n0 ? pg->prims[set[i]] : NULL;
            const int ops[3] = {a->q, a->kt, a->v};
            for (int j = 0; j < (r ? r->n_in : 1) && n < cap; j++) {
                int t = r ? r->in[j] : ops[i - (n0 - 3)];
                int pk = t >= 0 ? producer[t] : -1;
                if (pk < 0 || in_set(set, n, pk) || pg->prims[pk]->n_out != 1 ||
                    (pg->prims[pk]->kind != PRIM_ELEMWISE && pg->prims[pk]->kind != PRIM_LAYOUT))
                    continue;
                set[n++] = pk;
                if (closed(pg, u, seg, set, n, sink))
                    grew = true;
                else
                    n--;
            }
        }
    }
    bool ew = false, cat = false;
    for (int i = n0; i < n; i++) {
        const Prim *p = pg->prims[set[i]];
        ew |= p->kind == PRIM_ELEMWISE;
        cat |= p->kind == PRIM_LAYOUT && p->lay.concat;
    }
    *rotary = ew && cat;
    return n;
}

int cand_add_attention(CandidateSet *cs, const PrimGraph *pg, const int *producer,
                       const uint64_t *prim_hash) {
    Uses u;
    uses_build(pg, &u);
    Match m = {pg, producer};
    int added = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        AttnSpec a;
        if (pg->prims[k]->kind != PRIM_LINEAR || !match(&m, k, &a))
            continue;
        int set[ATTN_MAX_PRIMS + 2], n = core_members(&a, set);
        if (!closed(pg, &u, cs->segment_of_prim, set, n, k))
            continue;
        // A half O read by one CAST to float32 alone: the variants ending with it as well.
        int cast = -1;
        if (a.dt != DT_FLOAT && u.n_cons[a.out] == 1 && !u.is_out[a.out]) {
            int r = u.cons[u.cons_off[a.out]];
            if (cast_to_f32(pg->prims[r]))
                cast = r;
        }
        added += append(cs, pg, &u, prim_hash, set, n, k, cast);
        // The variant reading the projections in place: the LAYOUT producers of Q, Kt and V
        // that feed only this attention.
        int n0 = n;
        const int ops[3] = {a.q, a.kt, a.v};
        for (int i = 0; i < 3; i++) {
            int pk = producer[ops[i]];
            if (pk < 0 || pg->prims[pk]->kind != PRIM_LAYOUT || in_set(set, n, pk))
                continue;
            set[n++] = pk;
            if (!closed(pg, &u, cs->segment_of_prim, set, n, k))
                n--;
        }
        if (n > n0)
            added += append(cs, pg, &u, prim_hash, set, n, k, cast);
        // The variant computing Q and K from the projections as it stages them: the prologue
        // grown back through ELEMWISE and LAYOUT producers, proposed where it holds rotary
        // embeddings (an ELEMWISE and a concat). Other elementwise producers (a bias add) fuse
        // into the projection's epilogue, so they are left there.
        int nv = n > n0 ? 2 : 1, sizes[3] = {n0, n, 0};
        bool rotary = false;
        int np = grow_prologue(pg, &u, cs->segment_of_prim, producer, &a, set, n0, n,
                               ATTN_MAX_PRIMS - 2, k, &rotary);
        if (rotary) {
            added += append(cs, pg, &u, prim_hash, set, np, k, cast);
            if (n == n0)
                sizes[1] = np;
            else
                sizes[nv] = np;
            nv++;
        }
        // O read by one LAYOUT alone that merges the heads back (rows stay unit-stride): each
        // variant again, ending with it (a float32 O: a half one ends with its CAST instead).
        int64_t ostride[ORCH_MAX_RANK];
        if (cast < 0 && u.n_cons[a.out] == 1 && !u.is_out[a.out]) {
            int r = u.cons[u.cons_off[a.out]];
            if (out_layout_strides(pg, pg->prims[r], ostride)) {
                for (int v = 0; v < nv; v++) {
                    int m2 = sizes[v], s2[ATTN_MAX_PRIMS + 2];
                    memcpy(s2, set, sizeof(int) * (size_t)m2);
                    s2[m2] = r;
                    if (closed(pg, &u, cs->segment_of_prim, s2, m2 + 1, r))
                        added += append(cs, pg, &u, prim_hash, s2, m2 + 1, r, -1);
                }
            }
        }
    }
    uses_free(&u);
    return added;
}
