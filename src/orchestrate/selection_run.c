// Kernel-by-kernel execution of a selection (see kernel_interp.h). Two stores keep the isolation
// honest: `mat` holds what exists between kernels (graph inputs, constants, the outputs of the
// kernels run so far), and each kernel evaluates its primitives into a store of its own that is
// dropped when the kernel ends, all but the sink's output. A primitive's operand comes from the
// kernel's own store when its producer is in the kernel, else from `mat`, and then it must be one
// of the candidate's declared inputs: so a wrong input list, a selection out of order, or a
// tensor no selected kernel writes shows up as an error rather than as a lucky read.
#include "selection_run.h"

#include "../ops/ops.h"
#include "../interp/prim_interp.h"

#include <stdlib.h>
#include <string.h>

static bool has_input(const Candidate *c, int t) {
    for (int i = 0; i < c->n_inputs; i++)
        if (c->inputs[i] == t)
            return true;
    return false;
}

// A kernel's private values: the outputs of its primitives, by tensor id.
typedef struct Local {
    int n, cap;
    int *t;
    void **v;
} Local;

static void *local_get(const Local *l, int t) {
    for (int i = 0; i < l->n; i++)
        if (l->t[i] == t)
            return l->v[i];
    return NULL;
}

static void local_put(Local *l, int t, void *v) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->t = xrealloc(l->t, sizeof(int) * (size_t)l->cap);
        l->v = xrealloc(l->v, sizeof(void *) * (size_t)l->cap);
    }
    l->t[l->n] = t;
    l->v[l->n++] = v;
}

// Whether the kernel of candidate c writes tensor t: its output, or any output of an opaque
// sink (an opaque primitive runs alone and materialises all it computes, as orchestrate.c
// counts it).
static bool kernel_writes(const PrimGraph *pg, const Candidate *c, int t) {
    if (t == c->output)
        return true;
    const Prim *s = pg->prims[c->prims[c->n_prims - 1]];
    for (int j = 0; s->kind == PRIM_OPAQUE && j < s->n_out; j++)
        if (s->out[j] == t)
            return true;
    return false;
}

// Runs candidate c and moves what it writes into mat (owned); the rest of its values are freed.
static int run_kernel(const PrimGraph *pg, const Candidate *c, int pos, void **mat, bool *owned,
                      const bool *in_kernel, Err *e) {
    Local loc = {0};
    int rc = ST_OK;
    for (int i = 0; i < c->n_prims && rc == ST_OK; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        void **y = xcalloc((size_t)p->n_out + 1, sizeof(void *));
        for (int j = 0; j < p->n_in && rc == ST_OK; j++) {
            int t = p->in[j];
            if (t < 0)
                continue;
            const Tensor *tt = pg->tensors[t];
            if (tt->kind == TK_VALUE && in_kernel[tt->producer]) {
                x[j] = local_get(&loc, t);
                ORCH_ASSERT(x[j]); // producers come first: prims are in topological order
            } else if (!has_input(c, t)) {
                rc = err_set(e, ST_RUNTIME,
                             "kernel %d (candidate %d): primitive #%d reads '%s', which is not "
                             "among the candidate's inputs (a bug in the candidate set)",
                             pos, c->id, p->id, tt->name);
            } else if (!(x[j] = mat[t])) {
                rc = err_set(e, ST_RUNTIME,
                             "kernel %d (candidate %d): input '%s' was not materialised by an "
                             "earlier kernel (the selection is infeasible or out of order)",
                             pos, c->id, tt->name);
            }
        }
        for (int j = 0; j < p->n_out && rc == ST_OK; j++) {
            if (p->out[j] < 0)
                continue;
            const Tensor *t = pg->tensors[p->out[j]];
            size_t bytes = tensor_nbytes(t);
            if (!(y[j] = malloc(bytes ? bytes : 1))) {
                rc = err_set(e, ST_RUNTIME, "out of memory for '%s'", t->name);
                break;
            }
            memset(y[j], 0xff, bytes); // poison: a primitive that skips elements shows
            local_put(&loc, p->out[j], y[j]);
        }
        if (rc == ST_OK)
            rc = p->kind == PRIM_OPAQUE ? prim_eval_opaque(pg, p, x, y, e)
                                        : prim_eval(pg, p, x, y[0], e);
        free(x);
        free(y);
    }
    bool wrote = false;
    for (int i = 0; i < loc.n; i++) {
        int t = loc.t[i];
        if (rc != ST_OK || !kernel_writes(pg, c, t)) {
            free(loc.v[i]);
            continue;
        }
        // Two selected kernels writing one tensor is wasteful but valid: the later copy wins
        // (both hold the same values).
        if (owned[t])
            free(mat[t]);
        mat[t] = loc.v[i];
        owned[t] = true;
        wrote |= t == c->output;
    }
    free(loc.t);
    free(loc.v);
    if (rc == ST_OK && !wrote)
        rc = err_set(e, ST_RUNTIME, "kernel %d (candidate %d): no primitive computes its output",
                     pos, c->id);
    return rc;
}

int selection_run(const PrimGraph *pg, const CandidateSet *cs, const Selection *sel,
                  const void *const *inputs, void **outputs, Err *e) {
    int nt = pg->n_tensors;
    void **mat = xcalloc((size_t)nt + 1, sizeof(void *));
    bool *owned = xcalloc((size_t)nt + 1, 1);
    int *last_use = xmalloc(sizeof(int) * (size_t)(nt + 1));
    bool *in_kernel = xcalloc((size_t)pg->n_prims + 1, 1);
    for (int i = 0; i < nt; i++) {
        last_use[i] = -1;
        if (pg->tensors[i]->kind == TK_CONST)
            mat[i] = pg->tensors[i]->data;
    }
    for (int i = 0; i < pg->n_inputs; i++)
        mat[pg->inputs[i]] = (void *)inputs[i];
    // A materialised tensor lives until the last kernel that reads it; outputs to the end.
    for (int k = 0; k < sel->n; k++) {
        const Candidate *c = &cs->c[sel->kernels[k]];
        for (int j = 0; j < c->n_inputs; j++)
            last_use[c->inputs[j]] = k;
    }
    for (int i = 0; i < pg->n_outputs; i++)
        last_use[pg->outputs[i]] = sel->n;
    int rc = ST_OK;
    for (int k = 0; k < sel->n && rc == ST_OK; k++) {
        ORCH_ASSERT(sel->kernels[k] >= 0 && sel->kernels[k] < cs->n);
        const Candidate *c = &cs->c[sel->kernels[k]];
        for (int i = 0; i < c->n_prims; i++)
            in_kernel[c->prims[i]] = true;
        rc = run_kernel(pg, c, k, mat, owned, in_kernel, e);
        for (int i = 0; i < c->n_prims; i++)
            in_kernel[c->prims[i]] = false;
        if (rc)
            break;
        for (int j = 0; j < c->n_inputs; j++) {
            int t = c->inputs[j];
            if (owned[t] && last_use[t] == k) {
                free(mat[t]);
                mat[t] = NULL;
                owned[t] = false;
            }
        }
    }
    for (int i = 0; i < pg->n_outputs; i++) {
        outputs[i] = NULL;
        if (rc)
            continue;
        const Tensor *t = pg->tensors[pg->outputs[i]];
        if (!mat[pg->outputs[i]]) {
            rc = err_set(e, ST_RUNTIME, "graph output '%s' was not written by any selected kernel",
                         t->name);
            continue;
        }
        size_t bytes = tensor_nbytes(t);
        if (!(outputs[i] = malloc(bytes ? bytes : 1))) {
            rc = err_set(e, ST_RUNTIME, "out of memory for output '%s'", t->name);
            continue;
        }
        if (bytes)
            memcpy(outputs[i], mat[pg->outputs[i]], bytes);
    }
    if (rc)
        for (int i = 0; i < pg->n_outputs; i++) {
            free(outputs[i]);
            outputs[i] = NULL;
        }
    for (int i = 0; i < nt; i++)
        if (owned[i])
            free(mat[i]);
    free(mat);
    free(owned);
    free(last_use);
    free(in_kernel);
    if (rc && pg->src && pg->src->path)
        err_prefix(e, "%s: ", pg->src->path);
    return rc;
}
