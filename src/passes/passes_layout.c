// Layout clean-up (see passes.h): identity stages and identity primitives are removed, chains
// of single-input layouts are composed into one primitive whose adjacent reshapes and transposes
// are merged. Stage semantics are index_map.c's: stage 0 is nearest the output.
#include "passes.h"

#include <stdlib.h>
#include <string.h>

// The index space a stage maps from: the previous stage's input, or the primitive's output.
static void stage_out(const PrimGraph *pg, const Prim *p, const LayoutStage *stages, int s,
                      int *rank, const int64_t **dims) {
    if (s == 0) {
        const Tensor *o = pg->tensors[p->out[0]];
        *rank = o->rank;
        *dims = o->dims;
    } else {
        *rank = stages[s - 1].in_rank;
        *dims = stages[s - 1].in_dims;
    }
}

static bool identity_stage(const LayoutStage *st, int rank, const int64_t *dims) {
    if (st->in_rank != rank)
        return false;
    for (int d = 0; d < rank; d++)
        if (st->in_dims[d] != dims[d])
            return false;
    switch (st->kind) {
    case LS_TRANSPOSE:
        for (int d = 0; d < rank; d++)
            if (st->perm[d] != d)
                return false;
        return true;
    case LS_RESHAPE:
    case LS_BROADCAST: return true;
    case LS_SLICE:
        for (int d = 0; d < rank; d++)
            if (st->start[d] != 0 || (st->step[d] != 1 && dims[d] > 1))
                return false;
        return true;
    case LS_TABLE:
        for (int d = 0; d < rank; d++)
            for (int64_t i = 0; st->table[d] && i < dims[d]; i++)
                if (st->table[d][i] != i)
                    return false;
        return true;
    case LS_GATHER:
        // Same rank in and out: one index axis as long as the gathered axis.
        for (int64_t i = 0; i < dims[st->axis]; i++)
            if (st->idx[i] != i)
                return false;
        return true;
    }
    return false;
}

// An elementwise copy (or cast to the same type) of one input of the output's shape.
static bool identity_elemwise(const PrimGraph *pg, const Prim *p) {
    if (p->n_in != 1 || p->ew.n != 1)
        return false;
    const EwInstr *ins = &p->ew.code[0];
    const Tensor *in = pg->tensors[p->in[0]], *out = pg->tensors[p->out[0]];
    return (ins->op == EW_COPY || ins->op == EW_CAST) && ins->arg[0].src == EWS_INPUT &&
           in->dtype == out->dtype && pass_same_dims(in, out);
}

// Drops identity stages of a single-input chain; returns how many. A chain that would be left
// without stages keeps them (the caller bypasses the primitive instead).
static int drop_identity_stages(PrimGraph *pg, Prim *p) {
    LayoutParams *L = &p->lay;
    bool *id = xcalloc((size_t)L->n_stages, 1);
    int n = 0;
    for (int s = 0; s < L->n_stages; s++) {
        int rank;
        const int64_t *dims;
        // Removing a stage whose input and output index spaces are equal keeps its neighbours'
        // spaces unchanged, so the test can use the original chain.
        stage_out(pg, p, L->stages, s, &rank, &dims);
        id[s] = identity_stage(&L->stages[s], rank, dims);
        n += !id[s];
    }
    int dropped = L->n_stages - n;
    if (n > 0 && dropped > 0) {
        LayoutStage *kept = arena_alloc(pg->arena, sizeof(LayoutStage) * (size_t)n);
        for (int s = 0, w = 0; s < L->n_stages; s++)
            if (!id[s])
                kept[w++] = L->stages[s];
        L->stages = kept;
        L->n_stages = n;
    }
    free(id);
    return dropped;
}

int pass_remove_identities(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    PassRepl r;
    pass_uses_build(pg, &u);
    pass_repl_init(pg, &r);
    int killed = 0, dropped = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *p = pg->prims[k];
        pass_repl_inputs(&r, p);
        bool identity = false;
        if (p->kind == PRIM_LAYOUT && p->lay.concat) {
            identity = p->n_in == 1;
        } else if (p->kind == PRIM_LAYOUT) {
            int n = p->lay.n_stages, d = drop_identity_stages(pg, p);
            identity = d == n;
            if (!identity)
                dropped += d;
        } else if (p->kind == PRIM_ELEMWISE) {
            identity = identity_elemwise(pg, p);
        }
        // A graph output keeps its own tensor (and the primitive computing it).
        if (identity && !u.is_output[p->out[0]]) {
            r.to[p->out[0]] = p->in[0];
            p->dead = true;
            killed++;
        }
    }
    st->identities += killed + dropped;
    pass_repl_free(&r);
    pass_uses_free(&u);
    pass_finish(pg, killed);
    return ST_OK;
}

// ---- composition ----

static bool has_padding(const PrimGraph *pg, const Prim *p) {
    const LayoutParams *L = &p->lay;
    for (int s = 0; s < L->n_stages; s++) {
        const LayoutStage *st = &L->stages[s];
        if (st->kind != LS_TABLE)
            continue;
        int rank;
        const int64_t *dims;
        stage_out(pg, p, L->stages, s, &rank, &dims);
        for (int d = 0; d < rank; d++)
            for (int64_t i = 0; st->table[d] && i < dims[d]; i++)
                if (st->table[d][i] < 0)
                    return true;
    }
    return false;
}

// A transpose that keeps the order of the non-unit axes moves no element: a reshape.
static bool transpose_is_reshape(const LayoutStage *st, int rank) {
    int last = -1;
    for (int d = 0; d < rank; d++) {
        int a = st->perm[d];
        if (st->in_dims[a] == 1)
            continue;
        if (a < last)
            return false;
        last = a;
    }
    return true;
}

static void remove_stage(LayoutParams *L, int s) {
    memmove(&L->stages[s], &L->stages[s + 1], sizeof(LayoutStage) * (size_t)(L->n_stages - s - 1));
    L->n_stages--;
}

// Adjacent tables a (nearer the output, over out_dims) then b, as one table stage: an index
// looked up in a, then in b; -1 (the pad value, one per primitive) stays -1. One lookup per
// element instead of a table indexed by a table: GCC vectorises a gather through one table
// beside a select, but not through two (a reflect pad of a nearest upsample, the style transfer
// net's decoder, kept its InstanceNorm + ReLU + pad loop scalar).
static void compose_tables(Arena *arena, LayoutStage *a, const LayoutStage *b,
                           const int64_t *out_dims) {
    for (int d = 0; d < a->in_rank; d++) {
        if (!b->table[d])
            continue;
        if (!a->table[d]) {
            a->table[d] = b->table[d]; // a is the identity on this axis: its length is b's
            continue;
        }
        int64_t n = out_dims[d] ? out_dims[d] : 1;
        int64_t *t = arena_alloc(arena, sizeof(int64_t) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            t[i] = a->table[d][i] < 0 ? -1 : b->table[d][a->table[d][i]];
        a->table[d] = t;
    }
    memcpy(a->in_dims, b->in_dims, sizeof a->in_dims);
}

// Merges adjacent reshapes and transposes, and adjacent tables (the stages array is the
// caller's, in the arena; out_dims: the primitive's output dims).
static int simplify_chain(Arena *arena, LayoutParams *L, const int64_t *out_dims) {
    int changed = 0;
    for (int s = 0; s < L->n_stages; s++)
        if (L->stages[s].kind == LS_TRANSPOSE &&
            transpose_is_reshape(&L->stages[s], L->stages[s].in_rank)) {
            L->stages[s].kind = LS_RESHAPE;
            changed++;
        }
    for (int s = 0; s + 1 < L->n_stages;) {
        LayoutStage *a = &L->stages[s], *b = &L->stages[s + 1];
        if (a->kind == LS_RESHAPE && b->kind == LS_RESHAPE) {
            // Both keep the element order: b's input dims are the merged stage's.
            remove_stage(L, s);
            changed++;
        } else if (a->kind == LS_TRANSPOSE && b->kind == LS_TRANSPOSE) {
            // in_b[q[p[d]]] = out_a[d]: the composed perm is q[p[d]].
            int perm[ORCH_MAX_RANK];
            for (int d = 0; d < a->in_rank; d++)
                perm[d] = b->perm[a->perm[d]];
            memcpy(b->perm, perm, sizeof perm);
            remove_stage(L, s);
            changed++;
        } else if (a->kind == LS_TABLE && b->kind == LS_TABLE && a->in_rank == b->in_rank) {
            compose_tables(arena, a, b, s == 0 ? out_dims : L->stages[s - 1].in_dims);
            remove_stage(L, s + 1);
            changed++;
        } else {
            s++;
        }
    }
    return changed;
}

// Whether every live reader of t is a single-input, non-concat layout (then each can absorb t's
// producer: a layout only moves elements, so reading through the composed map reads what the
// intermediate held, and no reader needs the intermediate itself).
static bool only_layout_readers(const PrimGraph *pg, int t) {
    for (int k = 0; k < pg->n_prims; k++) {
        const Prim *q = pg->prims[k];
        if (q->dead)
            continue;
        for (int j = 0; j < q->n_in; j++)
            if (q->in[j] == t && (q->kind != PRIM_LAYOUT || q->lay.concat || q->n_in != 1))
                return false;
    }
    return true;
}

static bool tensor_read(const PrimGraph *pg, int t) {
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_in && !pg->prims[k]->dead; j++)
            if (pg->prims[k]->in[j] == t)
                return true;
    return false;
}

int pass_compose_layouts(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    pass_uses_build(pg, &u);
    int killed = 0, changed = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *c = pg->prims[k];
        if (c->kind != PRIM_LAYOUT || c->lay.concat)
            continue;
        for (;;) {
            int t = c->in[0];
            Prim *p = u.producer[t] >= 0 ? pg->prims[u.producer[t]] : NULL;
            // The count may be stale upwards only (merges replace a consumer by its consumer),
            // so 1 means this chain is the only reader. A layout read by several layouts alone
            // (a packed QKV split into its three head-split views) is composed into each of
            // them, so each reads the tensor below it in place; it dies with its last reader.
            if (!p || p->dead || p->kind != PRIM_LAYOUT || p->lay.concat || u.count[t] < 1 ||
                u.is_output[t])
                break;
            bool shared = u.count[t] > 1;
            if (shared && !only_layout_readers(pg, t))
                break;
            bool pc = has_padding(pg, c), pp = has_padding(pg, p);
            if (pc && pp && memcmp(&c->lay.pad_value, &p->lay.pad_value, sizeof(double)) != 0)
                break;
            int n = c->lay.n_stages + p->lay.n_stages;
            LayoutStage *stages = arena_alloc(pg->arena, sizeof(LayoutStage) * (size_t)n);
            memcpy(stages, c->lay.stages, sizeof(LayoutStage) * (size_t)c->lay.n_stages);
            memcpy(stages + c->lay.n_stages, p->lay.stages,
                   sizeof(LayoutStage) * (size_t)p->lay.n_stages);
            if (!pc)
                c->lay.pad_value = p->lay.pad_value;
            c->lay.stages = stages;
            c->lay.n_stages = n;
            c->in[0] = p->in[0];
            if (shared) {
                // c reads p's input now (counts stay at or above the true number of readers).
                u.count[t]--;
                u.count[p->in[0]]++;
                if (tensor_read(pg, t))
                    continue; // p lives on for its other readers
                u.count[p->in[0]]--;
            }
            p->dead = true;
            killed++;
        }
        // Simplified on a copy: stage arrays are not owned by one primitive.
        LayoutParams tmp = c->lay;
        tmp.stages =
            arena_memdup(pg->arena, c->lay.stages, sizeof(LayoutStage) * (size_t)c->lay.n_stages);
        int n = simplify_chain(pg->arena, &tmp, pg->tensors[c->out[0]]->dims);
        if (n) {
            c->lay = tmp;
            changed += n;
        }
    }
    st->layouts_composed += killed + changed;
    pass_uses_free(&u);
    pass_finish(pg, killed);
    return ST_OK;
}
