// Primitive graph construction, compaction, counting and the verifier (see prim.h).
#include "prim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"elementwise", "reduce", "layout", "linear", "opaque"};

const char *prim_kind_name(PrimKind k) {
    return (unsigned)k < PRIM_KIND_COUNT ? kind_names[k] : "?";
}

static const char *const ew_names[] = {
#define EW_NAME(name, arity) #name,
    EW_OPS(EW_NAME)
#undef EW_NAME
};
static const int ew_arities[] = {
#define EW_ARITY(name, arity) arity,
    EW_OPS(EW_ARITY)
#undef EW_ARITY
};

const char *ew_op_name(EwOp op) { return (unsigned)op < EW_OP_COUNT ? ew_names[op] : "?"; }
int ew_op_arity(EwOp op) { return (unsigned)op < EW_OP_COUNT ? ew_arities[op] : 0; }

const char *red_op_name(RedOp op) {
    static const char *const names[] = {"sum", "mean", "max", "min", "prod", "argmax", "argmin"};
    return (unsigned)op < ORCH_COUNT(names) ? names[op] : "?";
}

PrimGraph *prim_graph_create(const Graph *src) {
    PrimGraph *pg = xcalloc(1, sizeof *pg);
    pg->arena = arena_create();
    pg->src = src;
    return pg;
}

void prim_graph_free(PrimGraph *pg) {
    if (!pg)
        return;
    for (int i = 0; i < pg->n_tensors; i++)
        if (pg->owns_data[i])
            free(pg->tensors[i]->data);
    free(pg->tensors);
    free(pg->owns_data);
    free(pg->prims);
    free(pg->inputs);
    free(pg->outputs);
    arena_free(pg->arena);
    free(pg);
}

static Tensor *new_tensor(PrimGraph *pg, const char *name, DType dtype, int rank,
                          const int64_t *dims) {
    if (pg->n_tensors == pg->cap_tensors) {
        pg->cap_tensors = pg->cap_tensors ? 2 * pg->cap_tensors : 64;
        pg->tensors = xrealloc(pg->tensors, sizeof(Tensor *) * (size_t)pg->cap_tensors);
        pg->owns_data = xrealloc(pg->owns_data, sizeof(bool) * (size_t)pg->cap_tensors);
    }
    Tensor *t = arena_alloc(pg->arena, sizeof *t);
    t->id = pg->n_tensors;
    t->name = arena_strdup(pg->arena, name);
    t->producer = -1;
    tensor_set_shape(t, dtype, rank, dims);
    pg->owns_data[t->id] = false;
    pg->tensors[pg->n_tensors++] = t;
    return t;
}

Tensor *pg_add_tensor(PrimGraph *pg, const char *name, DType dtype, int rank, const int64_t *dims) {
    Tensor *t = new_tensor(pg, name, dtype, rank, dims);
    t->kind = TK_VALUE;
    return t;
}

Tensor *pg_add_const(PrimGraph *pg, const char *name, DType dtype, int rank, const int64_t *dims,
                     void *data, bool owned) {
    Tensor *t = new_tensor(pg, name, dtype, rank, dims);
    t->kind = TK_CONST;
    t->data = data;
    pg->owns_data[t->id] = owned;
    return t;
}

Prim *pg_add_prim(PrimGraph *pg, PrimKind kind, int n_in, int n_out, const char *origin) {
    if (pg->n_prims == pg->cap_prims) {
        pg->cap_prims = pg->cap_prims ? 2 * pg->cap_prims : 64;
        pg->prims = xrealloc(pg->prims, sizeof(Prim *) * (size_t)pg->cap_prims);
    }
    Prim *p = arena_alloc(pg->arena, sizeof *p);
    p->id = pg->next_prim_id++;
    p->kind = kind;
    p->n_in = n_in;
    p->n_out = n_out;
    p->in = arena_alloc(pg->arena, sizeof(int) * (size_t)(n_in ? n_in : 1));
    p->out = arena_alloc(pg->arena, sizeof(int) * (size_t)(n_out ? n_out : 1));
    for (int i = 0; i < n_in; i++)
        p->in[i] = -1;
    for (int i = 0; i < n_out; i++)
        p->out[i] = -1;
    p->origin = arena_strdup(pg->arena, origin ? origin : "");
    pg->prims[pg->n_prims++] = p;
    return p;
}

bool pg_is_const(const PrimGraph *pg, int t) {
    return t >= 0 && t < pg->n_tensors && pg->tensors[t]->kind == TK_CONST;
}

void prim_graph_compact(PrimGraph *pg) {
    int w = 0;
    for (int k = 0; k < pg->n_prims; k++)
        if (!pg->prims[k]->dead)
            pg->prims[w++] = pg->prims[k];
    pg->n_prims = w;
    bool *used = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_in; j++)
            if (pg->prims[k]->in[j] >= 0)
                used[pg->prims[k]->in[j]] = true;
    for (int i = 0; i < pg->n_outputs; i++)
        used[pg->outputs[i]] = true;
    for (int i = 0; i < pg->n_tensors; i++)
        if (!used[i] && pg->owns_data[i]) {
            free(pg->tensors[i]->data);
            pg->tensors[i]->data = NULL;
            pg->owns_data[i] = false;
        }
    for (int i = 0; i < pg->n_tensors; i++)
        pg->tensors[i]->producer = -1;
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_out; j++)
            if (pg->prims[k]->out[j] >= 0)
                pg->tensors[pg->prims[k]->out[j]]->producer = k;
    free(used);
}

void prim_graph_counts(const PrimGraph *pg, int counts[PRIM_KIND_COUNT]) {
    memset(counts, 0, sizeof(int) * PRIM_KIND_COUNT);
    for (int k = 0; k < pg->n_prims; k++)
        if (!pg->prims[k]->dead)
            counts[pg->prims[k]->kind]++;
}

// ---- verifier ----

static int bad(Err *e, const Prim *p, const char *what) {
    return err_set(e, ST_RUNTIME, "primitive verifier: %s #%d (from '%s'): %s",
                   prim_kind_name(p->kind), p->id, p->origin, what);
}

static bool same_dims(int r1, const int64_t *a, int r2, const int64_t *b) {
    if (r1 != r2)
        return false;
    for (int d = 0; d < r1; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

static int64_t numel_of(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    return n;
}

static int verify_layout(const PrimGraph *pg, const Prim *p, Err *e) {
    const Tensor *out = pg->tensors[p->out[0]];
    const LayoutParams *L = &p->lay;
    if (L->concat) {
        int64_t sum = 0;
        for (int j = 0; j < p->n_in; j++) {
            const Tensor *t = pg->tensors[p->in[j]];
            if (t->rank != out->rank || t->dtype != out->dtype)
                return bad(e, p, "concat input rank or dtype differs from the output");
            for (int d = 0; d < out->rank; d++)
                if (d != L->axis && t->dims[d] != out->dims[d])
                    return bad(e, p, "concat inputs differ off the axis");
            sum += t->dims[L->axis];
        }
        return sum == out->dims[L->axis] ? ST_OK : bad(e, p, "concat sizes do not add up");
    }
    if (p->n_in != 1 || L->n_stages < 1)
        return bad(e, p, "a layout chain needs one input and at least one stage");
    int rank = out->rank;
    const int64_t *dims = out->dims;
    for (int s = 0; s < L->n_stages; s++) {
        const LayoutStage *st = &L->stages[s];
        int ir = st->in_rank;
        const int64_t *id = st->in_dims;
        switch (st->kind) {
        case LS_TRANSPOSE:
            if (ir != rank)
                return bad(e, p, "transpose changes rank");
            for (int d = 0; d < rank; d++)
                if (st->perm[d] < 0 || st->perm[d] >= rank || id[st->perm[d]] != dims[d])
                    return bad(e, p, "transpose perm does not match the dims");
            break;
        case LS_RESHAPE:
            if (numel_of(ir, id) != numel_of(rank, dims))
                return bad(e, p, "reshape changes the element count");
            break;
        case LS_SLICE:
            if (ir != rank)
                return bad(e, p, "slice changes rank");
            for (int d = 0; d < rank; d++) {
                if (dims[d] == 0)
                    continue;
                int64_t last = st->start[d] + (dims[d] - 1) * st->step[d];
                if (st->start[d] < 0 || st->start[d] >= id[d] || last < 0 || last >= id[d])
                    return bad(e, p, "slice reads outside its input");
            }
            break;
        case LS_BROADCAST:
            if (ir > rank)
                return bad(e, p, "broadcast lowers rank");
            for (int d = 0; d < ir; d++)
                if (id[d] != 1 && id[d] != dims[rank - ir + d])
                    return bad(e, p, "broadcast dims incompatible");
            break;
        case LS_TABLE:
            if (ir != rank)
                return bad(e, p, "table stage changes rank");
            for (int d = 0; d < rank; d++) {
                if (!st->table[d]) {
                    if (id[d] != dims[d])
                        return bad(e, p, "identity axis of a table stage changes size");
                    continue;
                }
                for (int64_t i = 0; i < dims[d]; i++)
                    if (st->table[d][i] < -1 || st->table[d][i] >= id[d])
                        return bad(e, p, "table entry outside the input");
            }
            break;
        case LS_GATHER: {
            if (rank != ir - 1 + st->idx_rank || st->axis < 0 || st->axis >= ir)
                return bad(e, p, "gather ranks inconsistent");
            int64_t n = numel_of(st->idx_rank, st->idx_dims);
            for (int64_t i = 0; i < n; i++)
                if (st->idx[i] < 0 || st->idx[i] >= id[st->axis])
                    return bad(e, p, "gather index outside the input");
            break;
        }
        default:
            return bad(e, p, "unknown layout stage");
        }
        rank = ir;
        dims = id;
    }
    const Tensor *in = pg->tensors[p->in[0]];
    if (!same_dims(rank, dims, in->rank, in->dims) || in->dtype != out->dtype)
        return bad(e, p, "the chain's input dims or dtype differ from the input tensor's");
    return ST_OK;
}

static int verify_prim(const PrimGraph *pg, const Prim *p, Err *e) {
    if (p->kind == PRIM_OPAQUE)
        return p->node ? ST_OK : bad(e, p, "opaque primitive without its ONNX node");
    if (p->n_out != 1)
        return bad(e, p, "must have exactly one output");
    const Tensor *out = pg->tensors[p->out[0]];
    for (int j = 0; j < p->n_in; j++)
        if (p->in[j] < 0)
            return bad(e, p, "absent input");
    switch (p->kind) {
    case PRIM_ELEMWISE: {
        const EwProgram *pr = &p->ew;
        if (pr->n < 1)
            return bad(e, p, "empty elementwise program");
        for (int i = 0; i < pr->n; i++)
            for (int a = 0; a < ew_op_arity(pr->code[i].op); a++) {
                const EwArg *arg = &pr->code[i].arg[a];
                if ((arg->src == EWS_INPUT && (arg->index < 0 || arg->index >= p->n_in)) ||
                    (arg->src == EWS_INSTR && (arg->index < 0 || arg->index >= i)))
                    return bad(e, p, "elementwise operand out of range");
            }
        if (pr->code[pr->n - 1].dtype != out->dtype)
            return bad(e, p, "elementwise result dtype differs from the output's");
        for (int j = 0; j < p->n_in; j++) {
            const Tensor *t = pg->tensors[p->in[j]];
            if (t->rank > out->rank)
                return bad(e, p, "an input has a higher rank than the output");
            for (int d = 0; d < t->rank; d++) {
                int64_t od = out->dims[out->rank - t->rank + d];
                if (t->dims[d] != od && t->dims[d] != 1)
                    return bad(e, p, "an input does not broadcast to the output");
            }
        }
        return ST_OK;
    }
    case PRIM_REDUCE: {
        const Tensor *in = pg->tensors[p->in[0]];
        int64_t dims[ORCH_MAX_RANK];
        int r = 0;
        for (int d = 0; d < in->rank; d++) {
            if (p->red.axes & (1u << d)) {
                if (p->red.keepdims)
                    dims[r++] = 1;
            } else {
                dims[r++] = in->dims[d];
            }
        }
        if (p->red.axes >> in->rank)
            return bad(e, p, "reduces an axis past the input's rank");
        return same_dims(r, dims, out->rank, out->dims) ? ST_OK
                                                        : bad(e, p, "reduce output shape wrong");
    }
    case PRIM_LAYOUT:
        return verify_layout(pg, p, e);
    case PRIM_LINEAR: {
        const Tensor *a = pg->tensors[p->in[0]], *b = pg->tensors[p->in[1]];
        if (p->lin.op == LIN_MATMUL) {
            if (a->rank < 2 || b->rank < 2 || out->rank != ORCH_MAX(a->rank, b->rank))
                return bad(e, p, "matmul ranks");
            if (a->dims[a->rank - 1] != b->dims[b->rank - 2] ||
                out->dims[out->rank - 2] != a->dims[a->rank - 2] ||
                out->dims[out->rank - 1] != b->dims[b->rank - 1])
                return bad(e, p, "matmul dims");
            return ST_OK;
        }
        if (a->rank != 2 + p->lin.n_spatial || b->rank != a->rank || out->rank != a->rank)
            return bad(e, p, "conv ranks");
        return ST_OK;
    }
    default:
        return bad(e, p, "unknown kind");
    }
}

int prim_graph_verify(const PrimGraph *pg, Err *e) {
    bool *defined = xcalloc((size_t)pg->n_tensors + 1, 1);
    int rc = ST_OK;
    for (int i = 0; i < pg->n_tensors; i++)
        if (pg->tensors[i]->kind != TK_VALUE)
            defined[i] = true;
    for (int k = 0; k < pg->n_prims && rc == ST_OK; k++) {
        const Prim *p = pg->prims[k];
        if (p->dead) {
            rc = bad(e, p, "dead primitive left in the list");
            break;
        }
        for (int j = 0; j < p->n_in && rc == ST_OK; j++)
            if (p->in[j] >= 0 && (p->in[j] >= pg->n_tensors || !defined[p->in[j]]))
                rc = bad(e, p, "input used before it is defined");
        for (int j = 0; j < p->n_out && rc == ST_OK; j++) {
            int t = p->out[j];
            if (t < 0)
                continue;
            if (defined[t])
                rc = bad(e, p, "output defined twice");
            defined[t] = true;
        }
        if (rc == ST_OK)
            rc = verify_prim(pg, p, e);
    }
    for (int i = 0; i < pg->n_outputs && rc == ST_OK; i++)
        if (!defined[pg->outputs[i]])
            rc = err_set(e, ST_RUNTIME, "primitive verifier: graph output '%s' never computed",
                         pg->tensors[pg->outputs[i]]->name);
    free(defined);
    return rc;
}

// FLOPs of one primitive. Counting conventions: a multiply-add is 2; an elementwise program
// costs one FLOP per instruction and element (transcendental functions are not weighted: on
// these devices they are rarely what bounds a memory-bound kernel); a reduction one per input
// element; a layout none (index arithmetic only).
double prim_flops(const PrimGraph *pg, const Prim *p) {
    const Tensor *y = p->out[0] >= 0 ? pg->tensors[p->out[0]] : NULL;
    switch (p->kind) {
    case PRIM_ELEMWISE: return (double)p->ew.n * (double)tensor_numel(y);
    case PRIM_REDUCE: return (double)tensor_numel(pg->tensors[p->in[0]]);
    case PRIM_LAYOUT: return 0;
    case PRIM_LINEAR: {
        const Tensor *x = pg->tensors[p->in[0]], *w = pg->tensors[p->in[1]];
        if (p->lin.op == LIN_MATMUL) // [..., M, K] x [..., K, N]: 2 * (batch * M * N) * K
            return 2.0 * (double)tensor_numel(y) * (double)x->dims[x->rank - 1];
        double k_pix = 1;
        for (int d = 2; d < w->rank; d++)
            k_pix *= (double)w->dims[d];
        // Conv: W is [Cout, Cin/g, k...], each output element sums Cin/g * kernel products.
        // ConvTranspose: W is [Cin, Cout/g, k...], each input element scatters into Cout/g *
        // kernel.
        double per = (double)w->dims[1] * k_pix;
        return 2.0 * per * (double)tensor_numel(p->lin.op == LIN_CONV ? y : x);
    }
    case PRIM_OPAQUE: { // unknown work: one operation per output element
        double n = 0;
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                n += (double)tensor_numel(pg->tensors[p->out[j]]);
        return n;
    }
    default: return 0;
    }
}

bool prim_layout_is_view(const PrimGraph *pg, const Prim *p) {
    const LayoutParams *lp = &p->lay;
    if (p->kind != PRIM_LAYOUT || lp->concat || p->n_in != 1 || p->n_out != 1 || lp->n_stages < 1 ||
        pg->tensors[p->in[0]]->dtype != pg->tensors[p->out[0]]->dtype)
        return false;
    for (int s = 0; s < lp->n_stages; s++) {
        const LayoutStage *st = &lp->stages[s];
        if (st->kind == LS_RESHAPE)
            continue;
        if (st->kind != LS_TRANSPOSE)
            return false;
        int last = -1;
        for (int d = 0; d < st->in_rank; d++) {
            int a = st->perm[d];
            if (st->in_dims[a] == 1)
                continue;
            if (a < last)
                return false;
            last = a;
        }
    }
    return true;
}
