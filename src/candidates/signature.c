// Canonical signatures of candidate kernels: a 64-bit hash of a set of primitives that depends on
// its structure, parameters, dtypes and shapes, never on tensor names, primitive ids or where the
// set sits in the graph, so that the 12 identical layers of a transformer give equal signatures
// and share one profile entry. Needs the set's producer links (Tensor.producer) to be current.
//
// Canonical order: a depth-first walk from the sink through the operands in operand order,
// numbering primitives in post-order; external tensors are numbered by first use in that order.
// Two sets that correspond one-to-one with operand order preserved are walked identically.
// Constant *values* are not hashed (two layers' weights differ), their dtypes and shapes are;
// parameters that live in a primitive (immediates, layout tables, gather indices) are.
#include "candidates_internal.h"

#include <stdlib.h>
#include <string.h>

// splitmix64's finaliser: every input bit affects every output bit.
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static void h_u64(uint64_t *h, uint64_t v) {
    *h = mix64(*h ^ mix64(v + 0x9e3779b97f4a7c15ull));
}

static void h_f64(uint64_t *h, double v) {
    if (v == 0)
        v = 0; // -0.0 and 0.0 compute the same
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    h_u64(h, bits);
}

static void h_i64s(uint64_t *h, const int64_t *v, int64_t n) {
    h_u64(h, (uint64_t)n);
    for (int64_t i = 0; v && i < n; i++)
        h_u64(h, (uint64_t)v[i]);
}

static void h_str(uint64_t *h, const char *s) {
    if (!s) {
        h_u64(h, 0x5a5a);
        return;
    }
    size_t n = strlen(s);
    h_u64(h, n);
    for (size_t i = 0; i < n; i++)
        h_u64(h, (unsigned char)s[i]);
}

static void h_shape(uint64_t *h, const Tensor *t) {
    h_u64(h, (uint64_t)t->dtype);
    h_i64s(h, t->dims, t->rank);
}

static int64_t prod(const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

static void h_layout(uint64_t *h, const PrimGraph *pg, const Prim *p) {
    const LayoutParams *l = &p->lay;
    h_u64(h, l->concat);
    h_u64(h, (uint64_t)l->axis);
    h_f64(h, l->pad_value);
    h_u64(h, (uint64_t)l->n_stages);
    // Stage 0 maps the primitive's output space; stage k maps stage k-1's input space.
    const Tensor *out = pg->tensors[p->out[0]];
    int out_rank = out->rank;
    const int64_t *out_dims = out->dims;
    for (int k = 0; k < l->n_stages; k++) {
        const LayoutStage *s = &l->stages[k];
        h_u64(h, (uint64_t)s->kind);
        h_i64s(h, s->in_dims, s->in_rank);
        switch (s->kind) {
        case LS_TRANSPOSE:
            for (int d = 0; d < s->in_rank; d++)
                h_u64(h, (uint64_t)s->perm[d]);
            break;
        case LS_SLICE:
            h_i64s(h, s->start, s->in_rank);
            h_i64s(h, s->step, s->in_rank);
            break;
        case LS_TABLE:
            for (int d = 0; d < s->in_rank; d++) {
                h_u64(h, s->table[d] != NULL);
                if (s->table[d])
                    h_i64s(h, s->table[d], d < out_rank && out_dims[d] ? out_dims[d] : 1);
            }
            break;
        case LS_GATHER: {
            h_u64(h, (uint64_t)s->axis);
            h_i64s(h, s->idx_dims, s->idx_rank);
            int64_t n = prod(s->idx_dims, s->idx_rank);
            h_i64s(h, s->idx, n ? n : 1);
            break;
        }
        case LS_RESHAPE:
        case LS_BROADCAST: break; // the dims before and after say everything
        }
        out_rank = s->in_rank;
        out_dims = s->in_dims;
    }
}

static void h_opaque(uint64_t *h, const Prim *p) {
    const Node *n = p->node;
    if (!n)
        return;
    h_str(h, n->op);
    h_str(h, n->domain);
    h_u64(h, (uint64_t)n->opset);
    h_u64(h, (uint64_t)n->n_attr);
    for (int a = 0; a < n->n_attr; a++) {
        const Attr *at = &n->attr[a];
        h_str(h, at->name);
        h_u64(h, (uint64_t)at->type);
        switch (at->type) {
        case AT_INT: h_u64(h, (uint64_t)at->i); break;
        case AT_FLOAT: h_f64(h, at->f); break;
        case AT_STRING: h_str(h, at->s); break;
        case AT_INTS: h_i64s(h, at->ints, at->n); break;
        case AT_FLOATS:
            for (int i = 0; i < at->n; i++)
                h_f64(h, at->floats[i]);
            break;
        case AT_STRINGS:
            for (int i = 0; i < at->n; i++)
                h_str(h, at->strings[i]);
            break;
        case AT_TENSOR:
            if (at->t) {
                h_shape(h, at->t);
                size_t nb = at->t->data ? tensor_nbytes(at->t) : 0;
                const unsigned char *d = at->t->data;
                for (size_t i = 0; i < nb; i++)
                    h_u64(h, d[i]);
            }
            break;
        default:
            // Subgraphs and rarer payloads: no structural hash, so the node is its own kernel
            // kind (its name keeps it apart from every other node; sharing is only lost).
            h_str(h, n->name);
            break;
        }
    }
}

uint64_t cand_prim_hash(const PrimGraph *pg, const Prim *p) {
    uint64_t h = 0x6f72636853494721ull;
    h_u64(&h, (uint64_t)p->kind);
    h_u64(&h, (uint64_t)p->n_in);
    h_u64(&h, (uint64_t)p->n_out);
    for (int j = 0; j < p->n_out; j++) {
        h_u64(&h, p->out[j] >= 0);
        if (p->out[j] >= 0)
            h_shape(&h, pg->tensors[p->out[j]]);
    }
    switch (p->kind) {
    case PRIM_ELEMWISE:
        h_u64(&h, (uint64_t)p->ew.n);
        for (int i = 0; i < p->ew.n; i++) {
            const EwInstr *in = &p->ew.code[i];
            h_u64(&h, (uint64_t)in->op);
            h_u64(&h, (uint64_t)in->dtype);
            for (int a = 0; a < ew_op_arity(in->op); a++) {
                h_u64(&h, (uint64_t)in->arg[a].src);
                if (in->arg[a].src == EWS_IMM)
                    h_f64(&h, in->arg[a].imm);
                else
                    h_u64(&h, (uint64_t)in->arg[a].index);
            }
        }
        break;
    case PRIM_REDUCE:
        h_u64(&h, (uint64_t)p->red.op);
        h_u64(&h, p->red.axes);
        h_u64(&h, p->red.keepdims);
        h_u64(&h, p->red.select_last);
        break;
    case PRIM_LAYOUT: h_layout(&h, pg, p); break;
    case PRIM_LINEAR: {
        const LinearParams *l = &p->lin;
        h_u64(&h, (uint64_t)l->op);
        if (l->op != LIN_MATMUL) {
            h_u64(&h, (uint64_t)l->n_spatial);
            h_u64(&h, (uint64_t)l->group);
            h_i64s(&h, l->stride, l->n_spatial);
            h_i64s(&h, l->dilation, l->n_spatial);
            h_i64s(&h, l->pad_begin, l->n_spatial);
            h_i64s(&h, l->pad_end, l->n_spatial);
            h_i64s(&h, l->out_pad, l->n_spatial);
        }
        break;
    }
    case PRIM_OPAQUE: h_opaque(&h, p); break;
    case PRIM_KIND_COUNT: ORCH_ASSERT(!"bad primitive kind");
    }
    return h;
}

// ---- the set ----

typedef struct TOut {
    int tensor, member;
} TOut;

static int cmp_tout(const void *a, const void *b) {
    const TOut *x = a, *y = b;
    return (x->tensor > y->tensor) - (x->tensor < y->tensor);
}

typedef struct Walk {
    const PrimGraph *pg;
    const int *prims;
    int n;
    TOut *outs; // (tensor, member) sorted by tensor: which member writes a tensor
    int n_outs;
    int *order;    // member -> canonical number, -1 unvisited
    int *by_order; // canonical number -> member
    int next;
} Walk;

static int member_writing(const Walk *w, int t) {
    TOut key = {t, 0};
    const TOut *f = bsearch(&key, w->outs, (size_t)w->n_outs, sizeof key, cmp_tout);
    return f ? f->member : -1;
}

// Post-order from member m through its operands in operand order. Recursion depth is bounded by
// the set's size (a handful of primitives for real candidates).
static void visit(Walk *w, int m) {
    w->order[m] = -2; // on the path
    const Prim *p = w->pg->prims[w->prims[m]];
    for (int j = 0; j < p->n_in; j++) {
        int src = p->in[j] >= 0 ? member_writing(w, p->in[j]) : -1;
        if (src >= 0 && w->order[src] == -1)
            visit(w, src);
    }
    w->by_order[w->next] = m;
    w->order[m] = w->next++;
}

uint64_t cand_signature_hashed(const PrimGraph *pg, const int *prims, int n,
                               const uint64_t *prim_hash, int *ext_order, int *n_ext_out) {
    uint64_t h = 0x7369676e61747572ull;
    h_u64(&h, (uint64_t)n);
    if (n <= 0)
        return h;
    Walk w = {pg, prims, n, NULL, 0, NULL, NULL, 0};
    int n_out = 0;
    for (int m = 0; m < n; m++)
        n_out += pg->prims[prims[m]]->n_out;
    w.outs = xmalloc(sizeof(TOut) * (size_t)(n_out + 1));
    for (int m = 0; m < n; m++) {
        const Prim *p = pg->prims[prims[m]];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                w.outs[w.n_outs++] = (TOut){p->out[j], m};
    }
    qsort(w.outs, (size_t)w.n_outs, sizeof(TOut), cmp_tout);
    w.order = xmalloc(sizeof(int) * (size_t)n);
    w.by_order = xmalloc(sizeof(int) * (size_t)n);
    for (int m = 0; m < n; m++)
        w.order[m] = -1;
    // The sink is the last member in topological order; members it does not reach (only in sets
    // that are not single-sink) follow from the later ones down.
    for (int m = n - 1; m >= 0; m--)
        if (w.order[m] == -1)
            visit(&w, m);

    // External tensors, numbered by first use in canonical order: (tensor, slot) sorted by tensor.
    int n_ext_cap = 0;
    for (int m = 0; m < n; m++)
        n_ext_cap += pg->prims[prims[m]]->n_in;
    TOut *ext = xmalloc(sizeof(TOut) * (size_t)(n_ext_cap + 1));
    int n_ext = 0;
    for (int k = 0; k < n; k++) {
        int m = w.by_order[k];
        const Prim *p = pg->prims[prims[m]];
        h_u64(&h, prim_hash ? prim_hash[prims[m]] : cand_prim_hash(pg, p));
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t < 0) {
                h_u64(&h, 1); // absent optional operand
                continue;
            }
            int src = member_writing(&w, t);
            if (src >= 0) {
                const Prim *q = pg->prims[prims[src]];
                int slot = 0;
                while (slot < q->n_out && q->out[slot] != t)
                    slot++;
                h_u64(&h, 2);
                h_u64(&h, (uint64_t)w.order[src]);
                h_u64(&h, (uint64_t)slot);
                continue;
            }
            int e = 0;
            while (e < n_ext && ext[e].tensor != t) // sets are small; a scan is enough
                e++;
            if (e == n_ext)
                ext[n_ext++] = (TOut){t, e};
            const Tensor *tt = pg->tensors[t];
            h_u64(&h, 3);
            h_u64(&h, (uint64_t)e);
            h_u64(&h, tt->kind == TK_CONST);
            h_shape(&h, tt);
        }
    }
    if (ext_order)
        for (int e = 0; e < n_ext; e++)
            ext_order[e] = ext[e].tensor;
    if (n_ext_out)
        *n_ext_out = n_ext;
    free(ext);
    free(w.outs);
    free(w.order);
    free(w.by_order);
    return h;
}

uint64_t cand_signature(const PrimGraph *pg, const int *prims, int n) {
    return cand_signature_hashed(pg, prims, n, NULL, NULL, NULL);
}

int cand_canonical_inputs(const PrimGraph *pg, const int *prims, int n, int *out) {
    int n_ext = 0;
    cand_signature_hashed(pg, prims, n, NULL, out, &n_ext);
    return n_ext;
}
