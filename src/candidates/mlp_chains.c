// Multi-layer MLP chain candidates: besides the single-LINEAR candidates of Korch's
// rule, a chain of small dense layers y = act_n(... act_1(x W1 + b1) ... Wn + bn) is proposed as
// one kernel, so a target can keep the activations of a row tile on chip between layers; the BLP
// chooses between the chain and the single-layer kernels by cost.
// Needs: cand_enumerate's producer map and per-primitive hashes. Guarantees: every candidate added
// has at least 2 and at most MLP_MAX_LAYERS LINEAR primitives, lies in one segment, is convex with
// one sink, reads exactly one non-constant tensor (the first layer's input, or the float32 tensor
// its CAST prologue reads), and differs from every candidate of the single-LINEAR enumeration
// (those have at most one LINEAR).
//
// A layer is a LIN_MATMUL of an activation [..., M, K] (rank >= 2, its batch dims not broadcast)
// by a constant 2-D weight [K, N] with K, N <= MLP_MAX_WIDTH, activation, weight and product of
// one dtype: float32, or float16 / bfloat16 (half storage, --precision fp16 / bf16); followed by
// its epilogue, found by structure: the elementwise primitives that compute, from the layer's
// product t, its input x and constants, one tensor y of t's shape (its dtype, or float32 after a
// half layer: the CAST to a float32 model output that half storage ends with; no layer follows
// it, its input must be half), every tensor made on the way read only inside the epilogue and no
// graph output: a bias and activation, a gate f(t + b) * g(x), a residual x + f(t + b), any
// elementwise function of (t, x); row reductions (sums and means over the last axis into [..., 1]
// statistics that later steps broadcast back) may sit among them, so a LayerNorm between layers
// (LN(f(t + b)), f(LN(t + b)), LN(x + f(t + b))) belongs to the layer before it. Layer i+1 follows
// layer i when the end y of layer i's epilogue is no graph output and is read by layer i+1's LINEAR
// as its left operand and otherwise only by layer i+1's epilogue (whose x it is). Every contiguous
// run of 2..MLP_MAX_LAYERS layers of a chain becomes a candidate: its LINEARs and their epilogues;
// the last layer keeps its whole epilogue. Where the run's first input is a half tensor made by a
// one-instruction CAST from float32 and read by that layer and its epilogue alone (half storage's
// twin of a float32 model input), the run is proposed a second time with the CAST in it, so the
// kernel reads the float32 tensor and rounds it as it loads it instead of a kernel of its own
// writing the half copy.
#include "candidates_internal.h"

#include <stdlib.h>
#include <string.h>

#define MLP_MAX_LAYERS 8
#define MLP_MAX_WIDTH 256
#define MLP_MAX_EPI 16 // epilogue primitives per layer (merged graphs: one or two; a LayerNorm 8)

bool cand_mlp_layer_ok(const PrimGraph *pg, const Prim *p) {
    if (p->kind != PRIM_LINEAR || p->lin.op != LIN_MATMUL || p->n_in != 2 || p->n_out != 1 ||
        p->in[0] < 0 || p->in[1] < 0 || p->out[0] < 0 || p->in[0] == p->in[1])
        return false;
    const Tensor *x = pg->tensors[p->in[0]], *w = pg->tensors[p->in[1]],
                 *y = pg->tensors[p->out[0]];
    DType dt = x->dtype;
    if ((dt != DT_FLOAT && dt != DT_FLOAT16 && dt != DT_BFLOAT16) || w->dtype != dt ||
        y->dtype != dt || w->rank != 2 || !pg_is_const(pg, p->in[1]) || x->rank < 2 ||
        y->rank != x->rank)
        return false;
    int64_t K = w->dims[0], N = w->dims[1];
    if (K < 1 || N < 1 || K > MLP_MAX_WIDTH || N > MLP_MAX_WIDTH || x->dims[x->rank - 1] != K ||
        y->dims[y->rank - 1] != N)
        return false;
    for (int d = 0; d + 1 < x->rank; d++)
        if (x->dims[d] != y->dims[d])
            return false;
    return tensor_numel(y) > 0;
}

typedef struct Chains {
    const PrimGraph *pg;
    const int *producer;
    const int *segment_of_prim;
    int *n_cons;   // per tensor: primitives reading it
    int *cons_off; // per tensor: its readers are cons[cons_off[t] .. cons_off[t + 1])
    int *cons;
    bool *is_out; // per tensor: a graph output
} Chains;

static bool has(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

// Whether tensor o has the product's shape `t` (full), or its row shape [..., 1] (!full).
static bool layer_shaped(const Tensor *o, const Tensor *t, bool full) {
    if (o->rank != t->rank)
        return false;
    for (int d = 0; d + 1 < t->rank; d++)
        if (o->dims[d] != t->dims[d])
            return false;
    return o->dims[t->rank - 1] == (full ? t->dims[t->rank - 1] : 1);
}

// Whether primitive q may join layer lin's epilogue, whose tensors so far are the product t and
// the outputs of the primitives in epi (n of them), x being the layer's input: a primitive of
// the layer's segment with one output whose operands are those tensors, x, or constants; either
// ELEMWISE, its output of the product's shape or of its row shape [..., 1] (a row statistic), in
// the product's dtype or float32 (float64: the LayerNorm rule's mean), or a row reduction: a sum
// or mean over the last axis, keepdims, of a tensor of the product's shape into a float row
// statistic (a LayerNorm's mean and variance; the row is whole in a chain's tile).
static bool epi_prim_ok(const Chains *C, int lin, int q, const int *epi, int n, int x) {
    const PrimGraph *pg = C->pg;
    const Prim *p = pg->prims[q];
    int t = pg->prims[lin]->out[0];
    if ((p->kind != PRIM_ELEMWISE && p->kind != PRIM_REDUCE) ||
        C->segment_of_prim[q] != C->segment_of_prim[lin] || p->n_out != 1 || p->out[0] < 0 ||
        has(epi, n, q))
        return false;
    const Tensor *o = pg->tensors[p->out[0]], *shape = pg->tensors[t];
    if (p->kind == PRIM_REDUCE) {
        if (p->n_in != 1 || p->in[0] < 0 || (p->red.op != RED_SUM && p->red.op != RED_MEAN) ||
            p->red.axes != 1u << (shape->rank - 1) || !p->red.keepdims ||
            !dtype_is_float(o->dtype) || !layer_shaped(o, shape, false) ||
            !layer_shaped(pg->tensors[p->in[0]], shape, true))
            return false;
    } else if ((o->dtype != shape->dtype && o->dtype != DT_FLOAT && o->dtype != DT_DOUBLE) ||
               !(layer_shaped(o, shape, true) || layer_shaped(o, shape, false))) {
        return false;
    }
    for (int j = 0; j < p->n_in; j++) {
        int u = p->in[j];
        bool made = false;
        for (int i = 0; i < n && !made; i++)
            made = pg->prims[epi[i]]->out[0] == u;
        if (u < 0 || !(u == t || u == x || made || pg_is_const(pg, u)))
            return false;
    }
    return true;
}

// The epilogue of layer `lin` (x = its input, t = its product): found by structure, not by
// pattern. First the closure: every ELEMWISE primitive that reads only t, x, constants and
// tensors of the closure (in the order found, a topological one; x's own readers such as a gate
// g(x) included). Then the tail: the latest tensor y of the closure (or t itself) such that
// y depends on t, has t's shape and dtype (or float32), and every other tensor that y's
// computation makes inside the closure (t included) is read only by that computation and is no
// graph output; the epilogue is y's
// ancestors in the closure. So gated f(t + b) * g(x), residual x + f(t + b) and any other
// elementwise function of (t, x) are one layer, and a reader outside stops the epilogue before
// it. Writes the primitives into epi (at most MLP_MAX_EPI), returns their count; *tail receives y.
static int epilogue(const Chains *C, int lin, int *epi, int *tail) {
    const PrimGraph *pg = C->pg;
    int t = pg->prims[lin]->out[0], x = pg->prims[lin]->in[0];
    int clo[MLP_MAX_EPI], nc = 0;
    for (bool grew = true; grew && nc < MLP_MAX_EPI;) {
        grew = false;
        // Readers of t and of the closure's outputs, then of x (last: where x has many readers
        // the closure's room goes to the product's side first).
        for (int s = -1; s <= nc && nc < MLP_MAX_EPI; s++) {
            int u = s == nc ? x : s == -1 ? t : pg->prims[clo[s]]->out[0];
            if (u < 0)
                continue;
            for (int i = C->cons_off[u]; i < C->cons_off[u + 1] && nc < MLP_MAX_EPI; i++) {
                int q = C->cons[i];
                if (q != lin && epi_prim_ok(C, lin, q, clo, nc, x)) {
                    clo[nc++] = q;
                    grew = true;
                }
            }
        }
    }
    // Tails, latest first; t itself (no epilogue) always qualifies.
    for (int yi = nc - 1; yi >= 0; yi--) {
        int y = pg->prims[clo[yi]]->out[0];
        const Tensor *ty = pg->tensors[y], *tt = pg->tensors[t];
        if (!layer_shaped(ty, tt, true) || (ty->dtype != tt->dtype && ty->dtype != DT_FLOAT))
            continue; // a row statistic or a float64 intermediate is no layer's result
        // Ancestors of y in the closure (the closure's order is topological: walk it backwards).
        bool need[MLP_MAX_EPI] = {false};
        need[yi] = true;
        bool on_t = false;
        for (int i = yi; i >= 0; i--) {
            if (!need[i])
                continue;
            const Prim *p = pg->prims[clo[i]];
            for (int j = 0; j < p->n_in; j++) {
                on_t = on_t || p->in[j] == t;
                for (int a = 0; a < i; a++)
                    if (pg->prims[clo[a]]->out[0] == p->in[j])
                        need[a] = true;
            }
        }
        if (!on_t)
            continue;
        int n = 0;
        for (int i = 0; i <= yi; i++)
            if (need[i])
                epi[n++] = clo[i];
        // Every tensor made on the way (t and the outputs but y) is read inside alone.
        bool ok = true;
        for (int s = -1; s < n && ok; s++) {
            int u = s < 0 ? t : pg->prims[epi[s]]->out[0];
            if (u == y)
                continue;
            ok = !C->is_out[u];
            for (int i = C->cons_off[u]; i < C->cons_off[u + 1] && ok; i++)
                ok = has(epi, n, C->cons[i]);
        }
        if (ok) {
            *tail = y;
            return n;
        }
    }
    *tail = t;
    return 0;
}

// Whether every reader of tensor u is the LINEAR lin or a primitive of lin's epilogue.
static bool read_by_layer(const Chains *C, int u, int lin) {
    int epi[MLP_MAX_EPI], tail;
    int n = epilogue(C, lin, epi, &tail);
    for (int i = C->cons_off[u]; i < C->cons_off[u + 1]; i++)
        if (C->cons[i] != lin && !has(epi, n, C->cons[i]))
            return false;
    return true;
}

// The CAST primitive that makes layer lin's input from a float32 tensor, read by lin and its
// epilogue alone (-1: none).
static int cast_prologue(const Chains *C, int lin) {
    const PrimGraph *pg = C->pg;
    int t = pg->prims[lin]->in[0], k = C->producer[t];
    if (k < 0 || C->is_out[t] || !read_by_layer(C, t, lin) ||
        C->segment_of_prim[k] != C->segment_of_prim[lin])
        return -1;
    const Prim *p = pg->prims[k];
    if (p->kind != PRIM_ELEMWISE || p->n_in != 1 || p->n_out != 1 || p->in[0] < 0 || p->ew.n != 1 ||
        p->ew.code[0].op != EW_CAST || p->ew.code[0].arg[0].src != EWS_INPUT ||
        pg->tensors[p->in[0]]->dtype != DT_FLOAT || p->ew.code[0].dtype != pg->tensors[t]->dtype)
        return -1;
    return k;
}

// The layer following `lin` (-1: none); tail is the end of lin's epilogue. Its readers: one
// LINEAR taking it as the left operand, and that layer's epilogue (a gate or a residual reading
// the layer's input).
static int next_layer(const Chains *C, int lin, int tail) {
    const PrimGraph *pg = C->pg;
    if (C->is_out[tail])
        return -1;
    int q = -1;
    for (int i = C->cons_off[tail]; i < C->cons_off[tail + 1]; i++) {
        int k = C->cons[i];
        const Prim *p = pg->prims[k];
        if (p->kind != PRIM_LINEAR)
            continue;
        if (q >= 0)
            return -1; // two layers read it
        q = k;
    }
    if (q < 0)
        return -1;
    const Prim *p = pg->prims[q];
    if (C->segment_of_prim[q] != C->segment_of_prim[lin] || !cand_mlp_layer_ok(pg, p) ||
        p->in[0] != tail || !read_by_layer(C, tail, q))
        return -1;
    return q;
}

int cand_add_mlp_chains(CandidateSet *cs, const PrimGraph *pg, const int *producer,
                        const uint64_t *prim_hash) {
    int nt = pg->n_tensors, np = pg->n_prims, added = 0;
    Chains C = {pg,
                producer,
                cs->segment_of_prim,
                xcalloc((size_t)nt + 1, sizeof(int)),
                xcalloc((size_t)nt + 2, sizeof(int)),
                NULL,
                xcalloc((size_t)nt + 1, sizeof(bool))};
    for (int i = 0; i < pg->n_outputs; i++)
        if (pg->outputs[i] >= 0 && pg->outputs[i] < nt)
            C.is_out[pg->outputs[i]] = true;
    for (int k = 0; k < np; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            bool again = false; // a primitive reading t twice is one reader
            for (int a = 0; a < j && !again; a++)
                again = p->in[a] == t;
            if (t < 0 || again)
                continue;
            C.n_cons[t]++;
        }
    }
    for (int t = 0; t < nt; t++)
        C.cons_off[t + 1] = C.cons_off[t] + C.n_cons[t];
    C.cons = xmalloc(sizeof(int) * ((size_t)C.cons_off[nt] + 1));
    int *fill = xcalloc((size_t)nt + 1, sizeof(int));
    for (int k = 0; k < np; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            bool again = false;
            for (int a = 0; a < j && !again; a++)
                again = p->in[a] == t;
            if (t >= 0 && !again)
                C.cons[C.cons_off[t] + fill[t]++] = k;
        }
    }
    free(fill);
    // Per layer: the next layer, and whether a layer leads to it.
    int *nxt = xmalloc(sizeof(int) * ((size_t)np + 1));
    bool *has_prev = xcalloc((size_t)np + 1, sizeof(bool));
    int epi[MLP_MAX_EPI];
    for (int k = 0; k < np; k++) {
        nxt[k] = -1;
        if (!cand_mlp_layer_ok(pg, pg->prims[k]))
            continue;
        int tail;
        epilogue(&C, k, epi, &tail);
        nxt[k] = next_layer(&C, k, tail);
    }
    for (int k = 0; k < np; k++)
        if (nxt[k] >= 0)
            has_prev[nxt[k]] = true;
    int *layers = xmalloc(sizeof(int) * ((size_t)np + 1));
    int *members = xmalloc(sizeof(int) * (MLP_MAX_LAYERS * (MLP_MAX_EPI + 1) + 1));
    for (int k = 0; k < np; k++) {
        if (nxt[k] < 0 || has_prev[k])
            continue; // not the first layer of a chain
        int nl = 0;
        for (int l = k; l >= 0; l = nxt[l])
            layers[nl++] = l;
        for (int i = 0; i < nl; i++)
            for (int j = i + 1; j < nl && j - i < MLP_MAX_LAYERS; j++) {
                int n = 0, tail;
                for (int l = i; l <= j; l++) {
                    members[n++] = layers[l];
                    n += epilogue(&C, layers[l], members + n, &tail);
                }
                qsort(members, (size_t)n, sizeof(int), cand_cmp_int);
                cand_append(cs, pg, prim_hash, members, n, cs->segment_of_prim[layers[i]]);
                added++;
                int cast = cast_prologue(&C, layers[i]);
                if (cast >= 0) {
                    members[n++] = cast;
                    qsort(members, (size_t)n, sizeof(int), cand_cmp_int);
                    cand_append(cs, pg, prim_hash, members, n, cs->segment_of_prim[layers[i]]);
                    added++;
                }
            }
    }
    free(members);
    free(layers);
    free(nxt);
    free(has_prev);
    free(C.n_cons);
    free(C.cons_off);
    free(C.cons);
    free(C.is_out);
    return added;
}

int cand_cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void cand_append(CandidateSet *cs, const PrimGraph *pg, const uint64_t *prim_hash,
                 const int *members, int n, int segment) {
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 1024;
        cs->c = xrealloc(cs->c, sizeof(Candidate) * (size_t)cs->cap);
    }
    Candidate *c = &cs->c[cs->n];
    memset(c, 0, sizeof *c);
    c->id = cs->n++;
    c->n_prims = n;
    c->prims = arena_memdup(cs->arena, members, sizeof(int) * (size_t)n);
    c->output = pg->prims[members[n - 1]]->out[0];
    int cap = 0;
    for (int i = 0; i < n; i++)
        cap += pg->prims[members[i]]->n_in;
    c->inputs = arena_alloc(cs->arena, sizeof(int) * (size_t)(cap + 1));
    int n_ext = 0;
    c->signature = cand_signature_hashed(pg, members, n, prim_hash, c->inputs, &n_ext);
    c->n_inputs = n_ext;
    c->segment = segment;
}

int cand_count_linear(const PrimGraph *pg, const Candidate *c) {
    int n = 0;
    for (int i = 0; i < c->n_prims; i++)
        n += pg->prims[c->prims[i]]->kind == PRIM_LINEAR;
    return n;
}
