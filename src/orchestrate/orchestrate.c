// Optimal orchestration (orchestrate.h): which candidate kernels to run. Needs a candidate set of
// single-sink candidates with costs; guarantees a selection that runs in the order of its sinks
// with every input written first, each tensor written once, at least cost when proven optimal.
//
// The steps, all exact (they keep the optimum):
//  1. What can run: a fixed point over the candidates finds the producible tensors; an output
//     that is not is reported by name (the tensor that nothing writes), not as "infeasible".
//     Unprofilable candidates (non-finite cost) and those with unproducible inputs are dropped.
//  2. Dominance: a candidate is dropped when another with the same output costs no more and
//     reads a subset of its inputs.
//  3. Forced tensors: every primitive an output depends on is computed by some selected kernel
//     (a kernel's inputs are materialised, by induction). So a tensor that a live primitive reads
//     and that no candidate containing that reader computes inside is written by every feasible
//     selection: segment boundaries (candidates never span one) and graph outputs are such.
//  4. Components: with forced tensors always written, the program falls apart into components
//     linked only through them; each is solved by CBC on its own (orchestrate_cbc.c), which
//     beats one program whose branch and bound multiplies the components' gaps.
//  5. A greedy selection (the cheapest writer of each needed tensor) is each component's
//     fallback, so a time limit always leaves a feasible answer (the time limit is shared: each
//     component gets what the earlier ones left, and once it is spent the rest keep theirs
//     without calling CBC). The union of the parts is reduced to one writer per needed tensor and
//     ordered by sinks.
#include "orchestrate_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// An opaque primitive runs alone and materialises all it computes; every candidate otherwise
// writes its output. All are outputs of the sink, so ordering by sinks stays valid.
int orch_writes(const PrimGraph *pg, const Candidate *c, const int **w) {
    const Prim *s = pg->prims[c->prims[c->n_prims - 1]];
    if (s->kind == PRIM_OPAQUE) {
        *w = s->out;
        return s->n_out;
    }
    *w = &c->output;
    return 1;
}

static const char *tname(const PrimGraph *pg, int t) {
    const char *s = pg->tensors[t]->name;
    return s && *s ? s : "(unnamed)";
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void prob_free(Prob *P) {
    free(P->sink);
    free(P->order);
    free(P->is_free);
    free(P->producible);
    free(P->usable);
    free(P->wstart);
    free(P->wlist);
    free(P->outs);
    free(P->forced);
    free(P->live);
    free(P->covering);
    memset(P, 0, sizeof *P);
}

// The usable candidates writing each tensor, as CSR.
static void build_writers(Prob *P) {
    const PrimGraph *pg = P->pg;
    int nt = pg->n_tensors;
    free(P->wstart);
    free(P->wlist);
    P->wstart = xcalloc((size_t)nt + 2, sizeof(int));
    for (int k = 0; k < P->n; k++) {
        if (!P->usable[k])
            continue;
        const int *w;
        int nw = orch_writes(pg, &P->cs->c[k], &w);
        for (int j = 0; j < nw; j++)
            if (w[j] >= 0)
                P->wstart[w[j] + 1]++;
    }
    for (int t = 0; t < nt; t++)
        P->wstart[t + 1] += P->wstart[t];
    P->wlist = xmalloc(sizeof(int) * (size_t)(P->wstart[nt] + 1));
    int *fill = xmalloc(sizeof(int) * (size_t)(nt + 1));
    memcpy(fill, P->wstart, sizeof(int) * (size_t)nt);
    for (int i = 0; i < P->n; i++) {
        int k = P->order[i]; // so each tensor's writers come in sink-then-index order
        if (!P->usable[k])
            continue;
        const int *w;
        int nw = orch_writes(pg, &P->cs->c[k], &w);
        for (int j = 0; j < nw; j++)
            if (w[j] >= 0)
                P->wlist[fill[w[j]]++] = k;
    }
    free(fill);
}

// Step 1: checks the candidates' invariants (bugs of the enumerator: assertions), refuses
// negative costs, and finds what can run.
static int prob_init(Prob *P, const CandidateSet *cs, Err *e) {
    memset(P, 0, sizeof *P);
    const PrimGraph *pg = cs->pg;
    int n = cs->n, nt = pg->n_tensors;
    P->cs = cs;
    P->pg = pg;
    P->n = n;
    P->sink = xmalloc(sizeof(int) * (size_t)(n + 1));
    P->order = xmalloc(sizeof(int) * (size_t)(n + 1));
    P->is_free = xcalloc((size_t)nt + 1, 1);
    P->producible = xcalloc((size_t)nt + 1, 1);
    P->usable = xcalloc((size_t)n + 1, 1);
    P->forced = xcalloc((size_t)nt + 1, 1);
    P->outs = xmalloc(sizeof(int) * (size_t)(pg->n_outputs + 1));
    for (int t = 0; t < nt; t++)
        P->is_free[t] = pg->tensors[t]->kind == TK_INPUT || pg->tensors[t]->kind == TK_CONST;
    for (int i = 0; i < pg->n_inputs; i++)
        P->is_free[pg->inputs[i]] = true;

    int64_t *keys = xmalloc(sizeof(int64_t) * (size_t)(n + 1));
    for (int k = 0; k < n; k++) {
        const Candidate *c = &cs->c[k];
        ORCH_ASSERT(c->n_prims >= 1 && c->output >= 0 && c->output < nt);
        for (int i = 0; i < c->n_prims; i++)
            ORCH_ASSERT(c->prims[i] >= 0 && c->prims[i] < pg->n_prims);
        for (int i = 0; i < c->n_inputs; i++)
            ORCH_ASSERT(c->inputs[i] < nt);
        P->sink[k] = c->prims[c->n_prims - 1];
        // The single-sink property that makes every selection executable in sink order.
        ORCH_ASSERT(pg->tensors[c->output]->producer == P->sink[k]);
        if (isfinite(c->cost) && c->cost < 0) {
            free(keys);
            return err_set(e, ST_INVALID,
                           "orchestrate: candidate %d (sink primitive #%d from '%s') has a "
                           "negative cost %g; costs are times in seconds",
                           k, pg->prims[P->sink[k]]->id, pg->prims[P->sink[k]]->origin, c->cost);
        }
        keys[k] = (int64_t)P->sink[k] << 32 | k;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_i64);
    for (int k = 0; k < n; k++)
        P->order[k] = (int)(keys[k] & 0xffffffff);
    free(keys);

    // Inputs come from earlier sinks, so one pass in sink order settles the fixed point; the
    // loop only confirms it.
    memcpy(P->producible, P->is_free, (size_t)nt);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < n; i++) {
            int k = P->order[i];
            const Candidate *c = &cs->c[k];
            if (P->usable[k] || !isfinite(c->cost))
                continue;
            bool ok = true;
            for (int j = 0; j < c->n_inputs && ok; j++)
                ok = c->inputs[j] < 0 || P->producible[c->inputs[j]];
            if (!ok)
                continue;
            P->usable[k] = changed = true;
            const int *w;
            int nw = orch_writes(pg, c, &w);
            for (int j = 0; j < nw; j++)
                if (w[j] >= 0)
                    P->producible[w[j]] = true;
        }
    }
    build_writers(P);

    for (int i = 0; i < pg->n_outputs; i++) {
        int t = pg->outputs[i];
        bool seen = P->is_free[t];
        for (int j = 0; j < P->n_outs && !seen; j++)
            seen = P->outs[j] == t;
        if (!seen)
            P->outs[P->n_outs++] = t;
    }
    return ST_OK;
}

static void describe_tensor(const PrimGraph *pg, int t, char *buf, size_t len) {
    int p = pg->tensors[t]->producer;
    if (p >= 0 && p < pg->n_prims)
        snprintf(buf, len, "output of primitive #%d %s from '%s'", pg->prims[p]->id,
                 prim_kind_name(pg->prims[p]->kind), pg->prims[p]->origin);
    else
        snprintf(buf, len, "no primitive computes it");
}

// Explains why graph output `t` cannot be produced: follows an unproducible input of a
// finite-cost writer down to a tensor that no candidate (or only unprofilable ones) writes.
static int explain_unproducible(const Prob *P, int t, Err *e) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    int out = t;
    for (;;) {
        int writer = -1, unprofilable = 0;
        for (int k = 0; k < P->n && writer < 0; k++) {
            const int *w;
            int nw = orch_writes(pg, &cs->c[k], &w);
            for (int j = 0; j < nw; j++) {
                if (w[j] != t)
                    continue;
                if (isfinite(cs->c[k].cost))
                    writer = k;
                else
                    unprofilable++;
            }
        }
        if (writer < 0) {
            char what[512];
            describe_tensor(pg, t, what, sizeof what);
            const char *why = unprofilable ? "only unprofilable candidates (non-finite cost) write"
                                           : "no candidate kernel writes";
            if (t == out)
                return err_set(e, ST_INVALID,
                               "orchestrate: graph output '%s' cannot be computed: %s it (%s); the "
                               "candidate set or the target's rules leave it uncovered",
                               tname(pg, out), why, what);
            return err_set(e, ST_INVALID,
                           "orchestrate: graph output '%s' cannot be computed: it needs tensor "
                           "'%s', and %s that tensor (%s); the candidate set or the target's rules "
                           "leave it uncovered",
                           tname(pg, out), tname(pg, t), why, what);
        }
        // A finite-cost writer that cannot run has an input nothing produces, computed earlier
        // in the graph: the walk goes strictly backwards and ends.
        const Candidate *c = &cs->c[writer];
        int next = -1;
        for (int j = 0; j < c->n_inputs && next < 0; j++)
            if (c->inputs[j] >= 0 && !P->producible[c->inputs[j]])
                next = c->inputs[j];
        ORCH_ASSERT(next >= 0 && next != t);
        t = next;
    }
}

// Non-free inputs of a, all among b's? (Candidates' input lists are short: a scan suffices.)
static bool inputs_subset(const Prob *P, const Candidate *a, const Candidate *b) {
    for (int i = 0; i < a->n_inputs; i++) {
        int t = a->inputs[i];
        if (t < 0 || P->is_free[t])
            continue;
        int j = 0;
        while (j < b->n_inputs && b->inputs[j] != t)
            j++;
        if (j == b->n_inputs)
            return false;
    }
    return true;
}

// Step 2: whatever a dominated candidate does in a selection, its dominator does for no more,
// needing fewer tensors. Dominance is transitive and acyclic (ties go to the lower index), so
// every dropped candidate keeps an undominated dominator.
static void drop_dominated(Prob *P) {
    const CandidateSet *cs = P->cs;
    int dropped = 0;
    for (int i = 0; i < P->n;) {
        int end = i;
        while (end < P->n && P->sink[P->order[end]] == P->sink[P->order[i]])
            end++;
        for (int a = i; a < end; a++) {
            int k = P->order[a];
            if (!P->usable[k])
                continue;
            const Candidate *ck = &cs->c[k];
            for (int b = i; b < end; b++) {
                int d = P->order[b];
                if (d == k || !P->usable[d])
                    continue;
                const Candidate *cd = &cs->c[d];
                // Equal cost and inputs: the lower index stays.
                if (cd->output == ck->output && cd->cost <= ck->cost && inputs_subset(P, cd, ck) &&
                    (cd->cost < ck->cost || !inputs_subset(P, ck, cd) || d < k)) {
                    P->usable[k] = false;
                    dropped++;
                    break;
                }
            }
        }
        i = end;
    }
    if (dropped)
        build_writers(P);
}

// Step 3: live primitives (an output depends on them), the tensors they force, and how many
// candidates contain each primitive (for the cover rows of orchestrate_cbc.c).
static void find_live_and_forced(Prob *P) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    int np = pg->n_prims;
    bool *live = xcalloc((size_t)np + 1, 1);
    for (int i = 0; i < P->n_outs; i++) {
        int p = pg->tensors[P->outs[i]]->producer;
        if (p >= 0)
            live[p] = true;
    }
    for (int p = np - 1; p >= 0; p--) {
        const Prim *pr = pg->prims[p];
        for (int j = 0; j < pr->n_in && live[p]; j++) {
            int t = pr->in[j];
            if (t >= 0 && pg->tensors[t]->producer >= 0)
                live[pg->tensors[t]->producer] = true;
        }
    }
    // internal[slot]: some usable candidate computes the reader of input slot `slot` and that
    // input's producer together.
    int *first = xmalloc(sizeof(int) * (size_t)(np + 1));
    first[0] = 0;
    for (int p = 0; p < np; p++)
        first[p + 1] = first[p] + pg->prims[p]->n_in;
    bool *internal = xcalloc((size_t)first[np] + 1, 1);
    int *member = xcalloc((size_t)np + 1, sizeof(int)); // == k + 1: in candidate k
    for (int k = 0; k < P->n; k++) {
        if (!P->usable[k])
            continue;
        const Candidate *c = &cs->c[k];
        for (int i = 0; i < c->n_prims; i++)
            member[c->prims[i]] = k + 1;
        for (int i = 0; i < c->n_prims; i++) {
            const Prim *q = pg->prims[c->prims[i]];
            for (int j = 0; j < q->n_in; j++) {
                int t = q->in[j], pr = t >= 0 ? pg->tensors[t]->producer : -1;
                if (pr >= 0 && member[pr] == k + 1)
                    internal[first[c->prims[i]] + j] = true;
            }
        }
    }
    for (int i = 0; i < P->n_outs; i++)
        P->forced[P->outs[i]] = true;
    for (int p = 0; p < np; p++) {
        const Prim *q = pg->prims[p];
        for (int j = 0; j < q->n_in && live[p]; j++) {
            int t = q->in[j];
            if (t >= 0 && !P->is_free[t] && !internal[first[p] + j])
                P->forced[t] = true;
        }
    }
    P->live = live;
    P->covering = xcalloc((size_t)np + 1, sizeof(int));
    for (int k = 0; k < P->n; k++)
        for (int i = 0; i < cs->c[k].n_prims && P->usable[k]; i++)
            P->covering[cs->c[k].prims[i]]++;
    free(first);
    free(internal);
    free(member);
}

// From a selection `in` that satisfies the program, keeps for every needed tensor (a graph
// output, or an input of a kept kernel) the cheapest selected kernel writing it. The result
// satisfies the program too, costs no more than `in` (costs are >= 0) and writes each tensor
// once. Returns false, with *bad the unwritten tensor, if `in` does not satisfy the program.
static bool reduce_selection(const Prob *P, const bool *in, bool *out, int *bad) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    bool *needed = xcalloc((size_t)pg->n_tensors + 1, 1);
    bool *done = xcalloc((size_t)pg->n_tensors + 1, 1);
    memset(out, 0, (size_t)P->n);
    for (int i = 0; i < P->n_outs; i++)
        needed[P->outs[i]] = true;
    bool ok = true;
    // Every writer of t has t's producer as its sink, and a kernel's inputs come from earlier
    // primitives: walking the primitives backwards meets each need after all its consumers.
    for (int p = pg->n_prims - 1; p >= 0 && ok; p--) {
        const Prim *pr = pg->prims[p];
        for (int j = 0; j < pr->n_out && ok; j++) {
            int t = pr->out[j];
            if (t < 0 || !needed[t] || done[t])
                continue;
            int best = -1;
            for (int i = P->wstart[t]; i < P->wstart[t + 1]; i++) {
                int k = P->wlist[i];
                if (in[k] && (best < 0 || cs->c[k].cost < cs->c[best].cost))
                    best = k;
            }
            if (best < 0) {
                *bad = t;
                ok = false;
                break;
            }
            out[best] = true;
            const Candidate *c = &cs->c[best];
            const int *w;
            int nw = orch_writes(pg, c, &w);
            for (int i = 0; i < nw; i++)
                if (w[i] >= 0)
                    done[w[i]] = true;
            for (int i = 0; i < c->n_inputs; i++)
                if (c->inputs[i] >= 0 && !P->is_free[c->inputs[i]])
                    needed[c->inputs[i]] = true;
        }
    }
    for (int t = 0; t < pg->n_tensors && ok; t++)
        if (needed[t] && !done[t]) {
            *bad = t;
            ok = false;
        }
    free(needed);
    free(done);
    return ok;
}

// ---- step 4: components ----

static int uf_find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void uf_union(int *parent, int a, int b) {
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a != b)
        parent[a < b ? b : a] = a < b ? a : b;
}

typedef struct Components {
    int n;
    int *cstart, *clist; // candidates of component i: clist[cstart[i] .. cstart[i+1]), sink order
    int *tstart, *tlist; // its forced tensors
} Components;

// Writers of one tensor share a component (they exclude each other), and so do a candidate and
// the writers of each of its inputs that is neither free nor forced.
static void find_components(const Prob *P, Components *C) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    int *parent = xmalloc(sizeof(int) * (size_t)(P->n + 1));
    for (int k = 0; k < P->n; k++)
        parent[k] = k;
    for (int t = 0; t < pg->n_tensors; t++)
        for (int j = P->wstart[t] + 1; j < P->wstart[t + 1]; j++)
            uf_union(parent, P->wlist[P->wstart[t]], P->wlist[j]);
    for (int k = 0; k < P->n; k++) {
        if (!P->usable[k])
            continue;
        const Candidate *c = &cs->c[k];
        for (int i = 0; i < c->n_inputs; i++) {
            int t = c->inputs[i];
            if (t >= 0 && !P->is_free[t] && !P->forced[t]) {
                ORCH_ASSERT(P->wstart[t + 1] > P->wstart[t]);
                uf_union(parent, k, P->wlist[P->wstart[t]]);
            }
        }
    }
    int *id = xmalloc(sizeof(int) * (size_t)(P->n + 1));
    for (int k = 0; k < P->n; k++)
        id[k] = -1;
    C->n = 0;
    for (int i = 0; i < P->n; i++) {
        int k = P->order[i];
        if (P->usable[k] && id[uf_find(parent, k)] < 0)
            id[uf_find(parent, k)] = C->n++;
    }
    C->cstart = xcalloc((size_t)C->n + 2, sizeof(int));
    C->tstart = xcalloc((size_t)C->n + 2, sizeof(int));
    for (int k = 0; k < P->n; k++)
        if (P->usable[k])
            C->cstart[id[uf_find(parent, k)] + 1]++;
    for (int t = 0; t < pg->n_tensors; t++)
        if (P->forced[t]) {
            ORCH_ASSERT(P->wstart[t + 1] > P->wstart[t]); // producible, as its reader runs
            C->tstart[id[uf_find(parent, P->wlist[P->wstart[t]])] + 1]++;
        }
    for (int i = 0; i < C->n; i++) {
        C->cstart[i + 1] += C->cstart[i];
        C->tstart[i + 1] += C->tstart[i];
    }
    C->clist = xmalloc(sizeof(int) * (size_t)(C->cstart[C->n] + 1));
    C->tlist = xmalloc(sizeof(int) * (size_t)(C->tstart[C->n] + 1));
    int *cf = xmalloc(sizeof(int) * (size_t)(C->n + 1)),
        *tf = xmalloc(sizeof(int) * (size_t)(C->n + 1));
    memcpy(cf, C->cstart, sizeof(int) * (size_t)C->n);
    memcpy(tf, C->tstart, sizeof(int) * (size_t)C->n);
    for (int i = 0; i < P->n; i++) {
        int k = P->order[i];
        if (P->usable[k])
            C->clist[cf[id[uf_find(parent, k)]]++] = k;
    }
    for (int t = 0; t < pg->n_tensors; t++)
        if (P->forced[t])
            C->tlist[tf[id[uf_find(parent, P->wlist[P->wstart[t]])]]++] = t;
    free(cf);
    free(tf);
    free(id);
    free(parent);
}

static void components_free(Components *C) {
    free(C->cstart);
    free(C->clist);
    free(C->tstart);
    free(C->tlist);
}

// Fills the selection in sink order and checks that it executes: every input of a kernel is
// free or written by an earlier kernel, every output written, each tensor written once.
static void fill_selection(const Prob *P, const bool *chosen, Selection *sel) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    int n = 0, nm = 0;
    for (int k = 0; k < P->n; k++)
        if (chosen[k]) {
            const int *w;
            n++;
            nm += orch_writes(pg, &cs->c[k], &w);
        }
    sel->kernels = xmalloc(sizeof(int) * (size_t)(n + 1));
    sel->materialised = xmalloc(sizeof(int) * (size_t)(nm + 1));
    bool *written = xcalloc((size_t)pg->n_tensors + 1, 1);
    int last_sink = -1;
    for (int i = 0; i < P->n; i++) {
        int k = P->order[i];
        if (!chosen[k])
            continue;
        const Candidate *c = &cs->c[k];
        ORCH_ASSERT(P->sink[k] > last_sink); // one kernel per sink after reduce_selection
        last_sink = P->sink[k];
        for (int j = 0; j < c->n_inputs; j++) {
            int t = c->inputs[j];
            ORCH_ASSERT(t < 0 || P->is_free[t] || written[t]);
        }
        const int *w;
        int nw = orch_writes(pg, c, &w);
        for (int j = 0; j < nw; j++) {
            if (w[j] < 0)
                continue;
            ORCH_ASSERT(!written[w[j]]);
            written[w[j]] = true;
            sel->materialised[sel->n_materialised++] = w[j];
        }
        sel->kernels[sel->n++] = k;
        sel->objective += c->cost;
    }
    for (int i = 0; i < pg->n_outputs; i++)
        ORCH_ASSERT(P->is_free[pg->outputs[i]] || written[pg->outputs[i]]);
    free(written);
}

int orchestrate(const CandidateSet *cs, const OrchOptions *opt, Selection *sel, Err *e) {
    double t0 = now_s();
    double limit = opt && opt->time_limit > 0 ? opt->time_limit : 60.0;
    memset(sel, 0, sizeof *sel);
    Prob P;
    int rc = prob_init(&P, cs, e);
    for (int i = 0; i < P.n_outs && rc == ST_OK; i++)
        if (!P.producible[P.outs[i]])
            rc = explain_unproducible(&P, P.outs[i], e);
    if (rc) {
        prob_free(&P);
        return rc;
    }
    drop_dominated(&P);
    find_live_and_forced(&P);
    bool *greedy = xcalloc((size_t)P.n + 1, 1), *parts = xcalloc((size_t)P.n + 1, 1);
    bool *reduced = xcalloc((size_t)P.n + 1, 1);
    int bad = -1;
    // Step 5's start: feasible because every needed tensor is producible.
    bool feasible = reduce_selection(&P, P.usable, greedy, &bad);
    ORCH_ASSERT(feasible);

    Components C;
    find_components(&P, &C);
    int *col = xmalloc(sizeof(int) * (size_t)(P.n + 1));
    for (int k = 0; k < P.n; k++)
        col[k] = -1;
    double bound = 0;
    bool optimal = true;
    int cbc_calls = 0;
    for (int i = 0; i < C.n && rc == ST_OK; i++) {
        const int *cands = C.clist + C.cstart[i], *targets = C.tlist + C.tstart[i];
        int n = C.cstart[i + 1] - C.cstart[i], nt = C.tstart[i + 1] - C.tstart[i];
        if (nt == 0)
            continue; // nothing needs what it writes
        if (n == 1) {
            parts[cands[0]] = true;
            bound += cs->c[cands[0]].cost;
            sel->variables++;
            sel->constraints += nt;
            continue;
        }
        OrchPart part;
        double left = limit - (now_s() - t0);
        if (left <= 0 && cbc_calls > 0) {
            // Out of time: the greedy start, without CBC, whose setup and presolve alone take
            // a tenth of a second a component (hundreds of them would stretch the limit by
            // minutes). Its bound is the trivial one, costs being >= 0.
            for (int j = 0; j < n; j++)
                parts[cands[j]] = greedy[cands[j]];
            optimal = false;
            sel->variables += n;
            continue;
        }
        left = ORCH_MAX(left, 1e-3);
        cbc_calls++;
        rc = orch_cbc_solve(&P, cands, n, targets, nt, greedy, left, opt ? opt->log_level : 0, col,
                            parts, &part, e);
        if (rc)
            break;
        // Under a time limit CBC may have nothing, or something worse than the start.
        double got = 0, fallback = 0;
        for (int j = 0; j < n; j++) {
            got += parts[cands[j]] ? cs->c[cands[j]].cost : 0;
            fallback += greedy[cands[j]] ? cs->c[cands[j]].cost : 0;
        }
        if (!part.have || (!part.optimal && fallback < got))
            for (int j = 0; j < n; j++)
                parts[cands[j]] = greedy[cands[j]];
        bound += part.bound;
        optimal &= part.optimal;
        sel->variables += part.variables;
        sel->constraints += part.constraints;
    }
    if (rc == ST_OK && !reduce_selection(&P, parts, reduced, &bad))
        rc = err_set(e, ST_RUNTIME,
                     "orchestrate: CBC's solution leaves tensor '%s' unwritten: a solver failure",
                     tname(P.pg, bad));
    if (rc == ST_OK) {
        fill_selection(&P, reduced, sel);
        sel->optimal = optimal;
        sel->bound = optimal ? sel->objective : ORCH_MIN(bound, sel->objective);
        sel->gap = sel->objective > 0 ? (sel->objective - sel->bound) / sel->objective : 0.0;
        sel->seconds = now_s() - t0;
    } else {
        memset(sel, 0, sizeof *sel);
    }
    free(col);
    components_free(&C);
    free(greedy);
    free(parts);
    free(reduced);
    prob_free(&P);
    return rc;
}

void selection_free(Selection *sel) {
    if (!sel)
        return;
    free(sel->kernels);
    free(sel->materialised);
    memset(sel, 0, sizeof *sel);
}

// ---- exhaustive search (tests) ----
// Independent of the program and of the reductions above: every subset of the finite-cost
// candidates is a leaf, checked against the constraints from scratch. Two prunings that never
// drop a feasible improving subset keep it fast: a partial cost at or above the best, and a
// tensor needed by a chosen kernel (or a graph output) whose writers are all decided and none
// chosen (candidates go by descending sink, so all writers of a tensor are consecutive and its
// consumers come first).

typedef struct BF {
    const Prob *P;
    int m;        // finite-cost candidates
    int *cand;    // by descending sink
    bool *in;     // per candidate: chosen
    int *demand;  // per tensor: graph output or input of a chosen kernel (count)
    int *written; // per tensor: chosen writers (count)
    double best;
} BF;

static bool bf_feasible(const BF *b) {
    const Prob *P = b->P;
    const PrimGraph *pg = P->pg;
    bool *w = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < P->n; k++) {
        if (!b->in[k])
            continue;
        const int *ws;
        int nw = orch_writes(pg, &P->cs->c[k], &ws);
        for (int j = 0; j < nw; j++)
            if (ws[j] >= 0)
                w[ws[j]] = true;
    }
    bool ok = true;
    for (int i = 0; i < pg->n_outputs && ok; i++)
        ok = P->is_free[pg->outputs[i]] || w[pg->outputs[i]];
    for (int k = 0; k < P->n && ok; k++) {
        if (!b->in[k])
            continue;
        const Candidate *c = &P->cs->c[k];
        for (int j = 0; j < c->n_inputs && ok; j++)
            ok = c->inputs[j] < 0 || P->is_free[c->inputs[j]] || w[c->inputs[j]];
    }
    free(w);
    return ok;
}

static void bf_search(BF *b, int i, double cost) {
    const Prob *P = b->P;
    if (cost >= b->best)
        return;
    if (i > 0 && (i == b->m || P->sink[b->cand[i]] != P->sink[b->cand[i - 1]])) {
        const Prim *p = P->pg->prims[P->sink[b->cand[i - 1]]];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0 && b->demand[p->out[j]] > 0 && !b->written[p->out[j]])
                return;
    }
    if (i == b->m) {
        if (bf_feasible(b))
            b->best = cost;
        return;
    }
    int k = b->cand[i];
    const Candidate *c = &P->cs->c[k];
    const int *w;
    int nw = orch_writes(P->pg, c, &w);
    b->in[k] = true;
    for (int j = 0; j < nw; j++)
        if (w[j] >= 0)
            b->written[w[j]]++;
    for (int j = 0; j < c->n_inputs; j++)
        if (c->inputs[j] >= 0 && !P->is_free[c->inputs[j]])
            b->demand[c->inputs[j]]++;
    bf_search(b, i + 1, cost + c->cost);
    for (int j = 0; j < nw; j++)
        if (w[j] >= 0)
            b->written[w[j]]--;
    for (int j = 0; j < c->n_inputs; j++)
        if (c->inputs[j] >= 0 && !P->is_free[c->inputs[j]])
            b->demand[c->inputs[j]]--;
    b->in[k] = false;
    bf_search(b, i + 1, cost);
}

int orchestrate_brute_force(const CandidateSet *cs, double *best, Err *e) {
    Prob P;
    int rc = prob_init(&P, cs, e);
    if (rc) {
        prob_free(&P);
        return rc;
    }
    BF b = {.P = &P, .best = INFINITY};
    b.cand = xmalloc(sizeof(int) * (size_t)(P.n + 1));
    for (int i = P.n - 1; i >= 0; i--)
        if (isfinite(cs->c[P.order[i]].cost))
            b.cand[b.m++] = P.order[i];
    if (b.m > 24) {
        free(b.cand);
        prob_free(&P);
        return err_set(e, ST_USAGE, "orchestrate_brute_force: %d candidates, at most 24", b.m);
    }
    b.in = xcalloc((size_t)P.n + 1, 1);
    b.demand = xcalloc((size_t)P.pg->n_tensors + 1, sizeof(int));
    b.written = xcalloc((size_t)P.pg->n_tensors + 1, sizeof(int));
    for (int i = 0; i < P.pg->n_outputs; i++)
        if (!P.is_free[P.pg->outputs[i]])
            b.demand[P.pg->outputs[i]]++;
    bf_search(&b, 0, 0.0);
    *best = b.best;
    if (!isfinite(b.best))
        rc = err_set(e, ST_INVALID, "orchestrate_brute_force: no selection computes the outputs");
    free(b.cand);
    free(b.in);
    free(b.demand);
    free(b.written);
    prob_free(&P);
    return rc;
}
