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
// its epilogue: the longest path of ELEMWISE primitives whose chain operand has this one consumer
// and is no graph output, whose other operands are constants, and whose output has the layer's
// output shape and its dtype, or float32 after a half layer (the CAST to a float32 model output
// that half storage ends with; no layer follows it, its input must be half). Layer i+1 follows
// layer i when the end of layer i's epilogue has exactly one consumer, layer i+1's LINEAR, as its
// left operand, and is no graph output. Every contiguous run of 2..MLP_MAX_LAYERS layers of a chain
// becomes a candidate: its LINEARs and their epilogues; the last layer keeps its whole epilogue.
// Where the run's first input is a half tensor made by a one-instruction CAST from float32 and read
// by that layer alone (half storage's twin of a float32 model input), the run is proposed a second
// time with the CAST in it, so the kernel reads the float32 tensor and rounds it as it loads it
// instead of a kernel of its own writing the half copy.
#include "candidates_internal.h"

#include <stdlib.h>
#include <string.h>

#define MLP_MAX_LAYERS 8
#define MLP_MAX_WIDTH 256
#define MLP_MAX_EPI 16 // epilogue primitives per layer (merged graphs have one or two)

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
    int *n_cons;    // per tensor: primitives reading it
    int *sole_cons; // per tensor: the reader when there is one
    bool *is_out;   // per tensor: a graph output
} Chains;

// The epilogue of layer `lin`: its primitives into epi (at most MLP_MAX_EPI), returns their
// count; *tail receives the tensor the layer ends with.
static int epilogue(const Chains *C, int lin, int *epi, int *tail) {
    const PrimGraph *pg = C->pg;
    int t = pg->prims[lin]->out[0], n = 0, seg = C->segment_of_prim[lin];
    const Tensor *shape = pg->tensors[t];
    while (n < MLP_MAX_EPI && !C->is_out[t] && C->n_cons[t] == 1) {
        int q = C->sole_cons[t];
        const Prim *p = pg->prims[q];
        if (p->kind != PRIM_ELEMWISE || C->segment_of_prim[q] != seg || p->n_out != 1 ||
            p->out[0] < 0)
            break;
        const Tensor *o = pg->tensors[p->out[0]];
        bool ok = (o->dtype == shape->dtype || o->dtype == DT_FLOAT) && tensor_same_shape(o, shape);
        for (int j = 0; ok && j < p->n_in; j++)
            ok = p->in[j] == t || (p->in[j] >= 0 && pg_is_const(pg, p->in[j]));
        if (!ok)
            break;
        epi[n++] = q;
        t = p->out[0];
    }
    *tail = t;
    return n;
}

// The CAST primitive that makes layer lin's input from a float32 tensor, read by lin alone (-1:
// none).
static int cast_prologue(const Chains *C, int lin) {
    const PrimGraph *pg = C->pg;
    int t = pg->prims[lin]->in[0], k = C->producer[t];
    if (k < 0 || C->is_out[t] || C->n_cons[t] != 1 ||
        C->segment_of_prim[k] != C->segment_of_prim[lin])
        return -1;
    const Prim *p = pg->prims[k];
    if (p->kind != PRIM_ELEMWISE || p->n_in != 1 || p->n_out != 1 || p->in[0] < 0 || p->ew.n != 1 ||
        p->ew.code[0].op != EW_CAST || p->ew.code[0].arg[0].src != EWS_INPUT ||
        pg->tensors[p->in[0]]->dtype != DT_FLOAT || p->ew.code[0].dtype != pg->tensors[t]->dtype)
        return -1;
    return k;
}

// The layer following `lin` (-1: none); tail is the end of lin's epilogue.
static int next_layer(const Chains *C, int lin, int tail) {
    const PrimGraph *pg = C->pg;
    if (C->is_out[tail] || C->n_cons[tail] != 1)
        return -1;
    int q = C->sole_cons[tail];
    const Prim *p = pg->prims[q];
    if (C->segment_of_prim[q] != C->segment_of_prim[lin] || !cand_mlp_layer_ok(pg, p) ||
        p->in[0] != tail || !tensor_same_shape(pg->tensors[tail], pg->tensors[p->in[0]]))
        return -1;
    return q;
}

int cand_add_mlp_chains(CandidateSet *cs, const PrimGraph *pg, const int *producer,
                        const uint64_t *prim_hash) {
    int nt = pg->n_tensors, np = pg->n_prims, added = 0;
    Chains C = {pg, producer, cs->segment_of_prim, xcalloc((size_t)nt + 1, sizeof(int)),
                xmalloc(sizeof(int) * ((size_t)nt + 1)), xcalloc((size_t)nt + 1, sizeof(bool))};
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
            C.sole_cons[t] = k;
        }
    }
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
    free(C.sole_cons);
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
