// The clean-up driver and the graph-wide passes (see passes.h): constant folding, common
// subexpression elimination, dead primitive elimination, and the helpers every pass file shares.
// The rewriting passes live in passes_layout.c, passes_elementwise.c, passes_batchnorm.c,
// passes_conv_taps.c and passes_scale.c.
#include "passes.h"

#include "../ops/fold.h"
#include "../interp/prim_interp.h"

#include <stdlib.h>
#include <string.h>

// ---- shared helpers ----

void pass_uses_build(const PrimGraph *pg, PassUses *u) {
    size_t n = (size_t)pg->n_tensors + 1;
    u->count = xcalloc(n, sizeof(int));
    u->consumer = xmalloc(n * sizeof(int));
    u->producer = xmalloc(n * sizeof(int));
    u->is_output = xcalloc(n, 1);
    for (int i = 0; i < pg->n_tensors; i++)
        u->consumer[i] = u->producer[i] = -1;
    for (int k = 0; k < pg->n_prims; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                u->producer[p->out[j]] = k;
        if (p->dead)
            continue;
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t >= 0 && u->consumer[t] != k) {
                u->count[t]++;
                u->consumer[t] = k;
            }
        }
    }
    for (int i = 0; i < pg->n_outputs; i++)
        u->is_output[pg->outputs[i]] = true;
}

void pass_uses_free(PassUses *u) {
    free(u->count);
    free(u->consumer);
    free(u->producer);
    free(u->is_output);
}

void pass_repl_init(const PrimGraph *pg, PassRepl *r) {
    r->n = pg->n_tensors;
    r->to = xmalloc(sizeof(int) * (size_t)(r->n + 1));
    for (int i = 0; i < r->n; i++)
        r->to[i] = -1;
}

void pass_repl_free(PassRepl *r) {
    free(r->to);
}

int pass_repl_resolve(const PassRepl *r, int t) {
    while (t >= 0 && t < r->n && r->to[t] >= 0)
        t = r->to[t];
    return t;
}

void pass_repl_inputs(const PassRepl *r, Prim *p) {
    for (int j = 0; j < p->n_in; j++)
        p->in[j] = pass_repl_resolve(r, p->in[j]);
}

void pass_finish(PrimGraph *pg, int killed) {
    if (killed)
        prim_graph_compact(pg);
}

// Stable topological order: each primitive after the producers of its inputs, otherwise in the
// order it had.
void pass_sort_topologically(PrimGraph *pg) {
    int n = pg->n_prims;
    int *prod = xmalloc(sizeof(int) * ((size_t)pg->n_tensors + 1));
    for (int t = 0; t < pg->n_tensors; t++)
        prod[t] = -1;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < pg->prims[k]->n_out; j++)
            if (pg->prims[k]->out[j] >= 0)
                prod[pg->prims[k]->out[j]] = k;
    bool *placed = xcalloc((size_t)n + 1, 1);
    int *stack = xmalloc(sizeof(int) * ((size_t)n + 1)),
        *next = xcalloc((size_t)n + 1, sizeof(int));
    Prim **order = xmalloc(sizeof(Prim *) * ((size_t)n + 1));
    int w = 0;
    for (int root = 0; root < n; root++) {
        if (placed[root])
            continue;
        int sp = 0;
        stack[sp++] = root;
        while (sp > 0) {
            int k = stack[sp - 1];
            const Prim *p = pg->prims[k];
            // The next unplaced producer of k's inputs goes first. The graph is acyclic, so k is
            // not on the stack twice.
            while (next[k] < p->n_in) {
                int t = p->in[next[k]++];
                int q = t >= 0 ? prod[t] : -1;
                if (q >= 0 && !placed[q]) {
                    stack[sp++] = q;
                    break;
                }
            }
            if (stack[sp - 1] != k)
                continue;
            sp--;
            placed[k] = true;
            order[w++] = pg->prims[k];
        }
    }
    memcpy(pg->prims, order, sizeof(Prim *) * (size_t)n);
    free(prod);
    free(placed);
    free(stack);
    free(next);
    free(order);
}

bool pass_same_dims(const Tensor *a, const Tensor *b) {
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

// ---- constant folding ----

// Bounded by the import's FoldLimits (ir/fold.h): the same node bytes, the same work per node
// and in all.
// Below this size a folded constant may be larger than its inputs (a broadcast scalar is fine).
#define FOLD_FREE_BYTES ((size_t)64 << 10)

static bool foldable(const PrimGraph *pg, const Prim *p, const PassUses *u, const FoldLimits *lim,
                     double *spent_flops) {
    if (p->kind == PRIM_OPAQUE || p->n_in < 1 || p->n_out != 1 || u->is_output[p->out[0]])
        return false;
    const Tensor *o = pg->tensors[p->out[0]];
    size_t in_bytes = 0, bytes = tensor_nbytes(o);
    if (dtype_size(o->dtype) == 0 || bytes > lim->node_bytes)
        return false;
    for (int j = 0; j < p->n_in; j++) {
        if (!pg_is_const(pg, p->in[j]))
            return false;
        const Tensor *t = pg->tensors[p->in[j]];
        if (dtype_size(t->dtype) == 0 || (!t->data && tensor_numel(t) > 0))
            return false;
        in_bytes += tensor_nbytes(t);
    }
    if (bytes > FOLD_FREE_BYTES && bytes > in_bytes)
        return false;
    double flops = prim_flops(pg, p);
    if (flops > lim->node_flops || *spent_flops + flops > lim->total_flops)
        return false;
    *spent_flops += flops;
    return true;
}

int pass_fold_constants(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    PassRepl r;
    pass_uses_build(pg, &u);
    pass_repl_init(pg, &r);
    int killed = 0;
    FoldLimits lim = fold_limits();
    double spent_flops = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *p = pg->prims[k];
        pass_repl_inputs(&r, p);
        if (!foldable(pg, p, &u, &lim, &spent_flops))
            continue;
        const Tensor *o = pg->tensors[p->out[0]];
        size_t bytes = tensor_nbytes(o);
        void *y = malloc(bytes ? bytes : 1);
        if (!y)
            continue; // folding is an optimisation: without the memory the primitive stays
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        for (int j = 0; j < p->n_in; j++)
            x[j] = pg->tensors[p->in[j]]->data;
        // A primitive the interpreter cannot evaluate (e.g. a non-float convolution) stays.
        Err local = {0};
        int rc = prim_eval(pg, p, x, y, &local);
        free(x);
        if (rc != ST_OK) {
            free(y);
            continue;
        }
        int out = p->out[0];
        Tensor *c = pg_add_const(pg, o->name, o->dtype, o->rank, o->dims, y, true);
        r.to[out] = c->id;
        p->dead = true;
        killed++;
    }
    st->folded += killed;
    pass_repl_free(&r);
    pass_uses_free(&u);
    pass_finish(pg, killed);
    return ST_OK;
}

// ---- common subexpression elimination ----

#define CSE_CONST_MAX_BYTES ((size_t)64 << 10)

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_shape(uint64_t h, const Tensor *t) {
    h = mix(h, (uint64_t)t->dtype);
    h = mix(h, (uint64_t)t->rank);
    for (int d = 0; d < t->rank; d++)
        h = mix(h, (uint64_t)t->dims[d]);
    return h;
}

static bool same_shape(const Tensor *a, const Tensor *b) {
    return a->dtype == b->dtype && pass_same_dims(a, b);
}

static bool same_f64(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

static bool same_i64s(const int64_t *a, const int64_t *b, int64_t n) {
    return n <= 0 || memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0;
}

static bool same_arg(const EwArg *a, const EwArg *b) {
    if (a->src != b->src)
        return false;
    return a->src == EWS_IMM ? same_f64(a->imm, b->imm) : a->index == b->index;
}

static bool same_program(const EwProgram *a, const EwProgram *b) {
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        const EwInstr *x = &a->code[i], *y = &b->code[i];
        if (x->op != y->op || x->dtype != y->dtype)
            return false;
        for (int k = 0; k < ew_op_arity(x->op); k++)
            if (!same_arg(&x->arg[k], &y->arg[k]))
                return false;
    }
    return true;
}

// Stage s maps an index of `rank`/`dims` (the previous stage's input, or the output) to its own.
static bool same_stage(const LayoutStage *a, const LayoutStage *b, int rank, const int64_t *dims) {
    if (a->kind != b->kind || a->in_rank != b->in_rank ||
        !same_i64s(a->in_dims, b->in_dims, a->in_rank))
        return false;
    switch (a->kind) {
    case LS_TRANSPOSE: return memcmp(a->perm, b->perm, sizeof(int) * (size_t)rank) == 0;
    case LS_RESHAPE:
    case LS_BROADCAST: return true;
    case LS_SLICE: return same_i64s(a->start, b->start, rank) && same_i64s(a->step, b->step, rank);
    case LS_TABLE:
        for (int d = 0; d < rank; d++) {
            if (!a->table[d] != !b->table[d])
                return false;
            if (a->table[d] && !same_i64s(a->table[d], b->table[d], dims[d]))
                return false;
        }
        return true;
    case LS_GATHER: {
        if (a->axis != b->axis || a->idx_rank != b->idx_rank ||
            !same_i64s(a->idx_dims, b->idx_dims, a->idx_rank))
            return false;
        int64_t n = 1;
        for (int d = 0; d < a->idx_rank; d++)
            n *= a->idx_dims[d];
        return same_i64s(a->idx, b->idx, n);
    }
    }
    return false;
}

static bool same_layout(const PrimGraph *pg, const Prim *a, const Prim *b) {
    const LayoutParams *x = &a->lay, *y = &b->lay;
    if (x->concat != y->concat || x->n_stages != y->n_stages ||
        !same_f64(x->pad_value, y->pad_value))
        return false;
    if (x->concat)
        return x->axis == y->axis;
    const Tensor *o = pg->tensors[a->out[0]];
    int rank = o->rank;
    const int64_t *dims = o->dims;
    for (int s = 0; s < x->n_stages; s++) {
        if (!same_stage(&x->stages[s], &y->stages[s], rank, dims))
            return false;
        rank = x->stages[s].in_rank;
        dims = x->stages[s].in_dims;
    }
    return true;
}

static bool same_linear(const LinearParams *a, const LinearParams *b) {
    if (a->op != b->op)
        return false;
    if (a->op == LIN_MATMUL)
        return true;
    int n = a->n_spatial;
    return n == b->n_spatial && a->group == b->group && same_i64s(a->stride, b->stride, n) &&
           same_i64s(a->dilation, b->dilation, n) && same_i64s(a->pad_begin, b->pad_begin, n) &&
           same_i64s(a->pad_end, b->pad_end, n) && same_i64s(a->out_pad, b->out_pad, n);
}

static bool same_prim(const PrimGraph *pg, const Prim *a, const Prim *b) {
    if (a->kind != b->kind || a->n_in != b->n_in ||
        !same_shape(pg->tensors[a->out[0]], pg->tensors[b->out[0]]))
        return false;
    for (int j = 0; j < a->n_in; j++)
        if (a->in[j] != b->in[j])
            return false;
    switch (a->kind) {
    case PRIM_ELEMWISE: return same_program(&a->ew, &b->ew);
    case PRIM_REDUCE:
        return a->red.op == b->red.op && a->red.axes == b->red.axes &&
               a->red.keepdims == b->red.keepdims && a->red.select_last == b->red.select_last;
    case PRIM_LAYOUT: return same_layout(pg, a, b);
    case PRIM_LINEAR: return same_linear(&a->lin, &b->lin);
    default: return false;
    }
}

static uint64_t hash_prim(const PrimGraph *pg, const Prim *p) {
    uint64_t h = mix((uint64_t)p->kind, (uint64_t)p->n_in);
    for (int j = 0; j < p->n_in; j++)
        h = mix(h, (uint64_t)p->in[j]);
    h = hash_shape(h, pg->tensors[p->out[0]]);
    switch (p->kind) {
    case PRIM_ELEMWISE:
        h = mix(h, (uint64_t)p->ew.n);
        for (int i = 0; i < p->ew.n; i++)
            h = mix(h, (uint64_t)p->ew.code[i].op);
        break;
    case PRIM_REDUCE: h = mix(mix(h, (uint64_t)p->red.op), p->red.axes); break;
    case PRIM_LAYOUT:
        h = mix(mix(h, (uint64_t)p->lay.n_stages), p->lay.n_stages ? p->lay.stages[0].kind : 99);
        break;
    default: h = mix(h, (uint64_t)p->lin.op);
    }
    return h;
}

// Open addressing over candidate ids (prim indices or tensor ids) with their hashes.
typedef struct Table {
    int *slot; // -1 empty
    uint64_t *hash;
    size_t mask;
} Table;

static void table_init(Table *t, int n) {
    size_t cap = 16;
    while (cap < 2 * (size_t)n + 2)
        cap *= 2;
    t->slot = xmalloc(sizeof(int) * cap);
    t->hash = xmalloc(sizeof(uint64_t) * cap);
    t->mask = cap - 1;
    for (size_t i = 0; i < cap; i++)
        t->slot[i] = -1;
}

static void table_free(Table *t) {
    free(t->slot);
    free(t->hash);
}

static bool same_const(const PrimGraph *pg, int a, int b) {
    const Tensor *x = pg->tensors[a], *y = pg->tensors[b];
    return same_shape(x, y) && memcmp(x->data, y->data, tensor_nbytes(x)) == 0;
}

// Identical small constants used by some primitive: later ones are replaced by the first.
static int dedupe_constants(PrimGraph *pg, const PassUses *u, PassRepl *r) {
    Table t;
    table_init(&t, pg->n_tensors);
    int n = 0;
    for (int i = 0; i < pg->n_tensors; i++) {
        const Tensor *c = pg->tensors[i];
        if (c->kind != TK_CONST || !u->count[i] || !c->data || dtype_size(c->dtype) == 0 ||
            tensor_nbytes(c) > CSE_CONST_MAX_BYTES)
            continue;
        uint64_t h = hash_bytes(hash_shape(0, c), c->data, tensor_nbytes(c));
        size_t s = h & t.mask;
        for (; t.slot[s] >= 0; s = (s + 1) & t.mask)
            if (t.hash[s] == h && same_const(pg, t.slot[s], i))
                break;
        if (t.slot[s] >= 0) {
            r->to[i] = t.slot[s];
            n++;
        } else {
            t.slot[s] = i;
            t.hash[s] = h;
        }
    }
    table_free(&t);
    return n;
}

int pass_cse(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    PassRepl r;
    pass_uses_build(pg, &u);
    pass_repl_init(pg, &r);
    int merged = dedupe_constants(pg, &u, &r), killed = 0;
    Table t;
    table_init(&t, pg->n_prims);
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *p = pg->prims[k];
        pass_repl_inputs(&r, p);
        // Opaque nodes may be random or stateful; a graph output must keep its own tensor.
        if (p->kind == PRIM_OPAQUE || p->n_out != 1)
            continue;
        uint64_t h = hash_prim(pg, p);
        size_t s = h & t.mask;
        for (; t.slot[s] >= 0; s = (s + 1) & t.mask)
            if (t.hash[s] == h && same_prim(pg, pg->prims[t.slot[s]], p))
                break;
        if (t.slot[s] < 0) {
            t.slot[s] = k;
            t.hash[s] = h;
        } else if (!u.is_output[p->out[0]]) {
            r.to[p->out[0]] = pg->prims[t.slot[s]]->out[0];
            p->dead = true;
            killed++;
        }
    }
    table_free(&t);
    st->cse += merged + killed;
    pass_repl_free(&r);
    pass_uses_free(&u);
    pass_finish(pg, killed || merged);
    return ST_OK;
}

// ---- dead primitive elimination ----

int pass_dead_code(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    bool *need = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int i = 0; i < pg->n_outputs; i++)
        need[pg->outputs[i]] = true;
    int killed = 0;
    for (int k = pg->n_prims - 1; k >= 0; k--) {
        Prim *p = pg->prims[k];
        bool live = false;
        for (int j = 0; j < p->n_out; j++)
            live |= p->out[j] >= 0 && need[p->out[j]];
        if (!live) {
            p->dead = true;
            killed++;
            continue;
        }
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] >= 0)
                need[p->in[j]] = true;
    }
    free(need);
    st->dead += killed;
    pass_finish(pg, killed);
    return ST_OK;
}

// ---- the driver ----

typedef int (*PassFn)(PrimGraph *pg, CleanupStats *st, Err *e);

typedef struct PassDef {
    const char *name;
    PassFn run;
} PassDef;

// Folding first, so BatchNorm's scale is a constant when its chain is matched (and a computed
// convolution weight a constant the tap trimming slices); BatchNorm and scale
// hoisting before elementwise merging, which would hide their chains inside one program (a
// scale would join its producer's program); CSE after canonicalisation;
// dead code last, to drop what the others bypassed.
static const PassDef passes[] = {
    {"constant folding", pass_fold_constants},
    {"batchnorm folding", pass_fold_batchnorm},
    {"dead convolution taps", pass_trim_conv_taps},
    {"identity removal", pass_remove_identities},
    {"layout composition", pass_compose_layouts},
    {"scale hoisting", pass_hoist_scales},
    {"elementwise merging", pass_merge_elementwise},
    {"common subexpressions", pass_cse},
    {"dead primitives", pass_dead_code},
};

#define CLEANUP_MAX_ROUNDS 16

static int changes(const CleanupStats *s) {
    return s->folded + s->bn_folded + s->taps_trimmed + s->identities + s->layouts_composed +
           s->scales_hoisted + s->ew_merged + s->ew_canonicalised + s->cse + s->dead;
}

int fission_cleanup(PrimGraph *pg, CleanupStats *st, Err *e) {
    CleanupStats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    st->prims_before = pg->n_prims;
    int rc = pass_dead_code(pg, st, e);
    for (int round = 0; round < CLEANUP_MAX_ROUNDS && rc == ST_OK; round++) {
        int before = changes(st);
        st->iterations++;
        for (size_t i = 0; i < ORCH_COUNT(passes) && rc == ST_OK; i++) {
            rc = passes[i].run(pg, st, e);
            if (rc == ST_OK)
                rc = prim_graph_verify(pg, e);
            if (rc)
                err_prefix(e, "after %s: ", passes[i].name);
        }
        if (changes(st) == before)
            break;
    }
    st->prims_after = pg->n_prims;
    return rc;
}
