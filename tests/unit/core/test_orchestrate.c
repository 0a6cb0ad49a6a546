// Unit tests of optimal orchestration (orchestrate/orchestrate.h). The program solved by CBC is
// compared with the exhaustive search on random primitive DAGs with random costs (printed seed),
// over random convex single-sink candidate sets and over cand_enumerate's; every selection is
// checked, independently of orchestrate.c, to execute in its order with each input written
// first. Edge cases: one node,
// an output read by another primitive, outputs that need no kernel (and the COPY fission adds
// for them), diamonds, long skips, duplicate writers, an opaque primitive with two outputs,
// infeasible candidate sets (clear errors), and the time limit.
#include "base/arena.h"
#include "../check.h"
#include "prim/prim_build.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "orchestrate/orchestrate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;

static uint64_t rnd_u64(void) { // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double rnd01(void) {
    return (double)(rnd_u64() >> 11) / 9007199254740992.0;
}
static int rnd_int(int n) {
    return (int)(rnd_u64() % (uint64_t)n);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---- primitive graphs built directly (no ONNX model) ----

typedef struct TG {
    Graph *src;
    PrimGraph *pg;
    PB b;
    char origin[32];
} TG;

static void tg_init(TG *g) {
    memset(g, 0, sizeof *g);
    g->src = graph_create("test");
    g->pg = prim_graph_create(g->src);
    g->b = (PB){g->pg, "test"};
}

static void tg_free(TG *g) {
    prim_graph_free(g->pg);
    graph_free(g->src);
}

// Names the next primitives' origin "nI" (error messages name it).
static void tg_origin(TG *g, int i) {
    snprintf(g->origin, sizeof g->origin, "n%d", i);
    g->b.origin = g->origin;
}

static int tg_input(TG *g, int rank, const int64_t *dims) {
    PrimGraph *pg = g->pg;
    char name[32];
    snprintf(name, sizeof name, "x%d", pg->n_inputs);
    Tensor *t = pg_add_tensor(pg, name, DT_FLOAT, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

static void tg_output(TG *g, int t) {
    PrimGraph *pg = g->pg;
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = t;
}

static int tg_weight(TG *g) {
    const int64_t dims[2] = {8, 8};
    float w[64];
    for (int i = 0; i < 64; i++)
        w[i] = (float)(rnd01() - 0.5);
    return pb_const(&g->b, DT_FLOAT, 2, dims, w);
}

static bool is_free(const PrimGraph *pg, int t) {
    return pg->tensors[t]->kind == TK_INPUT || pg->tensors[t]->kind == TK_CONST;
}

// A random DAG of n primitives over [4,8] and [4,1] values: unary and binary elementwise
// (broadcasting), row sums, matmuls with a constant. Operands are often recent values (chains)
// and otherwise any earlier value (long skips, diamonds). Every unread value is an output, and
// sometimes a value that others read is one too.
static void random_graph(TG *g, int n) {
    const int64_t full[2] = {4, 8};
    int vals[256], nv = 0;
    int n_in = 1 + rnd_int(2);
    for (int i = 0; i < n_in; i++)
        vals[nv++] = tg_input(g, 2, full);
    int w = tg_weight(g);
    static const EwOp un[] = {EW_EXP, EW_NEG, EW_RELU, EW_TANH};
    static const EwOp bin[] = {EW_ADD, EW_MUL, EW_SUB};
    for (int p = 0; p < n; p++) {
        tg_origin(g, p);
        int a = rnd_int(2) ? vals[nv - 1 - rnd_int(ORCH_MIN(nv, 3))] : vals[rnd_int(nv)];
        int c = vals[rnd_int(nv)];
        bool a_full = pb_t(&g->b, a)->dims[1] == 8;
        int r = rnd_int(100), t;
        if (r < 30)
            t = pb_ew1(&g->b, un[rnd_int(4)], a);
        else if (r < 60)
            t = pb_ew2(&g->b, bin[rnd_int(3)], a, c);
        else if (r < 80 && a_full)
            t = pb_reduce(&g->b, RED_SUM, a, 1u << 1, true, false);
        else if (a_full)
            t = pb_matmul(&g->b, a, w);
        else
            t = pb_ew1(&g->b, un[rnd_int(4)], a);
        ORCH_ASSERT(nv < 256);
        vals[nv++] = t;
    }
    PrimGraph *pg = g->pg;
    bool *read = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_in; j++)
            read[pg->prims[k]->in[j]] = true;
    for (int k = 0; k < pg->n_prims; k++)
        if (!read[pg->prims[k]->out[0]])
            tg_output(g, pg->prims[k]->out[0]);
    if (n > 1 && rnd_int(3) == 0) {
        int t = pg->prims[rnd_int(n)]->out[0];
        if (read[t])
            tg_output(g, t);
    }
    if (rnd_int(10) == 0)
        tg_output(g, pg->inputs[0]); // needs no kernel
    free(read);
}

// ---- candidate sets built directly ----

static CandidateSet *cs_new(const PrimGraph *pg, int cap) {
    Arena *a = arena_create();
    CandidateSet *cs = arena_alloc(a, sizeof *cs);
    cs->arena = a;
    cs->pg = pg;
    cs->cap = cap;
    cs->c = arena_alloc(a, sizeof(Candidate) * (size_t)cap);
    return cs;
}

static void cs_free(CandidateSet *cs) {
    if (cs)
        arena_free(cs->arena);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// A candidate computing `prims` (any order); its sink is the last in topological order, its
// inputs every tensor members read from outside (constants included).
static Candidate *cs_add(CandidateSet *cs, const int *prims, int n, double cost) {
    ORCH_ASSERT(cs->n < cs->cap);
    const PrimGraph *pg = cs->pg;
    Candidate *c = &cs->c[cs->n];
    c->id = cs->n++;
    c->n_prims = n;
    c->prims = arena_memdup(cs->arena, prims, sizeof(int) * (size_t)n);
    qsort(c->prims, (size_t)n, sizeof(int), cmp_int);
    c->output = pg->prims[c->prims[n - 1]]->out[0];
    int ins[64], ni = 0;
    for (int i = 0; i < n; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j], prod = pg->tensors[t]->producer;
            bool inside = false, seen = false;
            for (int q = 0; q < n; q++)
                inside |= prod == c->prims[q];
            for (int q = 0; q < ni; q++)
                seen |= ins[q] == t;
            if (!inside && !seen) {
                ORCH_ASSERT(ni < 64);
                ins[ni++] = t;
            }
        }
    }
    qsort(ins, (size_t)ni, sizeof(int), cmp_int);
    c->n_inputs = ni;
    c->inputs = arena_memdup(cs->arena, ins, sizeof(int) * (size_t)(ni ? ni : 1));
    c->cost = cost;
    return c;
}

static Candidate *cs_add1(CandidateSet *cs, int prim, double cost) {
    return cs_add(cs, &prim, 1, cost);
}

// Ancestor sets over primitive indices: anc(p) holds p and every primitive p depends on.
typedef struct Reach {
    int n, w;
    uint64_t *bits;
} Reach;

static bool reaches(const Reach *r, int a, int b) { // a ⇝ b
    return r->bits[(size_t)b * (size_t)r->w + (size_t)(a / 64)] >> (a % 64) & 1;
}

static Reach reach_build(const PrimGraph *pg) {
    Reach r = {pg->n_prims, (pg->n_prims + 63) / 64, NULL};
    r.bits = xcalloc((size_t)r.n * (size_t)r.w + 1, sizeof(uint64_t));
    for (int p = 0; p < r.n; p++) {
        uint64_t *row = r.bits + (size_t)p * (size_t)r.w;
        row[p / 64] |= 1ull << (p % 64);
        const Prim *pr = pg->prims[p];
        for (int j = 0; j < pr->n_in; j++) {
            int q = pr->in[j] >= 0 ? pg->tensors[pr->in[j]]->producer : -1;
            for (int i = 0; q >= 0 && i < r.w; i++)
                row[i] |= r.bits[(size_t)q * (size_t)r.w + (size_t)i];
        }
    }
    return r;
}

// A random convex set with sink s: grown by producers of members' inputs, closed under paths
// between members after each step. Returns its size (0 if it outgrew max).
static int random_convex(const PrimGraph *pg, const Reach *r, int s, int target, int max,
                         int *set) {
    int n = 1;
    set[0] = s;
    bool *in = xcalloc((size_t)pg->n_prims + 1, 1);
    in[s] = true;
    while (n < target) {
        int front[256], nf = 0;
        for (int i = 0; i < n; i++) {
            const Prim *p = pg->prims[set[i]];
            for (int j = 0; j < p->n_in && nf < 256; j++) {
                int q = pg->tensors[p->in[j]]->producer;
                if (q >= 0 && !in[q])
                    front[nf++] = q;
            }
        }
        if (!nf)
            break;
        int q = front[rnd_int(nf)];
        in[q] = true;
        set[n++] = q;
        // Convex closure: everything on a path from a member to a member (all reach s).
        for (int v = 0; v < s && n <= max; v++) {
            if (in[v] || !reaches(r, v, s))
                continue;
            for (int i = 0; i < n; i++)
                if (set[i] != v && reaches(r, set[i], v)) {
                    bool to_member = false;
                    for (int j = 0; j < n && !to_member; j++)
                        to_member = reaches(r, v, set[j]);
                    if (to_member) {
                        in[v] = true;
                        set[n++] = v;
                    }
                    break;
                }
        }
        if (n > max) {
            n = 0;
            break;
        }
    }
    free(in);
    return n;
}

// Checks a set is convex and single-sink (the test's own generator is under test here too).
static bool convex_single_sink(const PrimGraph *pg, const Reach *r, const Candidate *c) {
    int s = c->prims[c->n_prims - 1];
    for (int i = 0; i < c->n_prims; i++)
        if (!reaches(r, c->prims[i], s))
            return false;
    for (int v = 0; v < pg->n_prims; v++) {
        bool member = false, from = false, to = false;
        for (int i = 0; i < c->n_prims; i++) {
            member |= c->prims[i] == v;
            from |= c->prims[i] != v && reaches(r, c->prims[i], v);
            to |= c->prims[i] != v && reaches(r, v, c->prims[i]);
        }
        if (!member && from && to)
            return false;
    }
    return true;
}

// All singletons (cost 1..100 us, 3% unprofilable) and random convex sets up to `total`
// candidates, costing 0.3..1.3 times their members' singletons (5% unprofilable).
static CandidateSet *random_candidates(const PrimGraph *pg, int total, int max_prims,
                                       bool unprofilable) {
    CandidateSet *cs = cs_new(pg, total + pg->n_prims + 1);
    double *single = xmalloc(sizeof(double) * (size_t)(pg->n_prims + 1));
    for (int p = 0; p < pg->n_prims; p++) {
        single[p] = 1e-6 * (1 + 99 * rnd01());
        double cost = unprofilable && rnd_int(100) < 3 ? INFINITY : single[p];
        cs_add1(cs, p, cost);
    }
    Reach r = reach_build(pg);
    int *set = xmalloc(sizeof(int) * (size_t)(max_prims + pg->n_prims + 1));
    for (int tries = 0; cs->n < total && tries < 20 * total; tries++) {
        int s = rnd_int(pg->n_prims);
        int n = random_convex(pg, &r, s, 2 + rnd_int(max_prims - 1), max_prims, set);
        if (n < 2)
            continue;
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += single[set[i]];
        double cost = unprofilable && rnd_int(100) < 5 ? INFINITY : sum * (0.3 + rnd01());
        Candidate *c = cs_add(cs, set, n, cost);
        ORCH_ASSERT(convex_single_sink(pg, &r, c));
    }
    free(set);
    free(r.bits);
    free(single);
    return cs;
}

// ---- the independent check of a selection ----

// The kernels run in their order: sinks increase, every input is free or written by an earlier
// kernel, no tensor is written twice, every output is written (or free), only finite costs, the
// objective is their sum, the materialised tensors are what they write, bound <= objective.
static bool selection_ok(const CandidateSet *cs, const Selection *sel, char *why, size_t len) {
    const PrimGraph *pg = cs->pg;
    bool *written = xcalloc((size_t)pg->n_tensors + 1, 1);
    double sum = 0;
    int last = -1, nm = 0;
    bool ok = true;
    for (int i = 0; i < sel->n && ok; i++) {
        const Candidate *c = &cs->c[sel->kernels[i]];
        int s = c->prims[c->n_prims - 1];
        const Prim *sp = pg->prims[s];
        if (s <= last) {
            snprintf(why, len, "kernel %d runs after a later sink", i);
            ok = false;
        }
        last = s;
        for (int j = 0; j < c->n_inputs && ok; j++) {
            int t = c->inputs[j];
            if (t >= 0 && !is_free(pg, t) && !written[t]) {
                snprintf(why, len, "kernel %d (candidate %d) reads '%s' before it is written", i,
                         sel->kernels[i], pg->tensors[t]->name);
                ok = false;
            }
        }
        int n_w = sp->kind == PRIM_OPAQUE ? sp->n_out : 1;
        for (int j = 0; j < n_w && ok; j++) {
            int t = sp->kind == PRIM_OPAQUE ? sp->out[j] : c->output;
            if (t < 0)
                continue;
            if (written[t] || nm >= sel->n_materialised || sel->materialised[nm] != t) {
                snprintf(why, len, "tensor '%s' written twice or not listed as materialised",
                         pg->tensors[t]->name);
                ok = false;
            }
            written[t] = true;
            nm++;
        }
        if (!isfinite(c->cost)) {
            snprintf(why, len, "an unprofilable candidate was selected");
            ok = false;
        }
        sum += c->cost;
    }
    for (int i = 0; i < pg->n_outputs && ok; i++) {
        int t = pg->outputs[i];
        if (!is_free(pg, t) && !written[t]) {
            snprintf(why, len, "graph output '%s' not written", pg->tensors[t]->name);
            ok = false;
        }
    }
    if (ok && nm != sel->n_materialised) {
        snprintf(why, len, "%d materialised listed, %d written", sel->n_materialised, nm);
        ok = false;
    }
    if (ok && fabs(sum - sel->objective) > 1e-12 * sum) {
        snprintf(why, len, "objective %.17g, kernels sum to %.17g", sel->objective, sum);
        ok = false;
    }
    if (ok && !(sel->bound <= sel->objective && sel->gap >= 0 && sel->gap <= 1 &&
                (!sel->optimal || sel->gap == 0))) {
        snprintf(why, len, "bound %g objective %g gap %g optimal %d", sel->bound, sel->objective,
                 sel->gap, sel->optimal);
        ok = false;
    }
    free(written);
    return ok;
}

// Orchestrates and checks the selection; returns the status.
static int solve_checked(const CandidateSet *cs, const OrchOptions *opt, Selection *sel, Err *e) {
    int rc = orchestrate(cs, opt, sel, e);
    if (rc == ST_OK) {
        char why[512];
        bool ok = selection_ok(cs, sel, why, sizeof why);
        CHECK_MSG(ok, "%s", why);
    }
    return rc;
}

// ---- random DAGs against the exhaustive search ----

static void test_random_vs_brute_force(void) {
    int instances = 0, infeasible = 0, fused = 0, max_vars = 0, max_rows = 0;
    double solve_s = 0, max_s = 0;
    char msg[256] = "";
    for (int it = 0; it < 500 && !check_failed_case; it++) {
        TG g;
        tg_init(&g);
        int n = 1 + rnd_int(14);
        random_graph(&g, n);
        Err e = {0};
        CHECK_MSG(prim_graph_verify(g.pg, &e) == ST_OK, "%s", e.msg);
        CandidateSet *cs = random_candidates(g.pg, 16 + rnd_int(7), 6, true);
        Selection sel;
        double best = 0;
        Err eb = {0};
        int rb = orchestrate_brute_force(cs, &best, &eb);
        int rc = solve_checked(cs, NULL, &sel, &e);
        instances++;
        if (rb == ST_INVALID) {
            infeasible++;
            CHECK_MSG(rc == ST_INVALID && strstr(e.msg, "cannot be computed"),
                      "instance %d: brute force infeasible, orchestrate rc %d: %s", it, rc, e.msg);
        } else {
            CHECK_MSG(rb == ST_OK, "instance %d: %s", it, eb.msg);
            CHECK_MSG(rc == ST_OK, "instance %d: %s", it, e.msg);
            if (rc == ST_OK && rb == ST_OK) {
                CHECK_MSG(sel.optimal && fabs(sel.objective - best) <= 1e-9 * best,
                          "instance %d (%d prims, %d candidates): BLP %.17g, brute force %.17g", it,
                          n, cs->n, sel.objective, best);
                for (int i = 0; i < sel.n; i++)
                    fused += cs->c[sel.kernels[i]].n_prims > 1;
                solve_s += sel.seconds;
                max_s = ORCH_MAX(max_s, sel.seconds);
                max_vars = ORCH_MAX(max_vars, sel.variables);
                max_rows = ORCH_MAX(max_rows, sel.constraints);
            }
        }
        if (check_failed_case)
            snprintf(msg, sizeof msg, "  failing instance %d (rerun with the same seed)\n", it);
        selection_free(&sel);
        cs_free(cs);
        tg_free(&g);
    }
    printf("%s  %d instances (%d infeasible), %d fused kernels selected, up to %d variables and %d "
           "constraints, CBC %.3f s total, %.4f s max\n",
           msg, instances, infeasible, fused, max_vars, max_rows, solve_s, max_s);
    CHECK(instances >= 500 && fused > 0 && infeasible > 0);
}

// The same on candidates from cand_enumerate (default rules, a random size cap): the full set
// is orchestrated and checked; the exhaustive search runs on all its singletons and a random
// subset of the rest (at most 22 candidates), which the program must match, and the full set can
// only do better.
static void test_enumerated_vs_brute_force(void) {
    int instances = 0, compared = 0, max_cands = 0;
    for (int it = 0; it < 200 && !check_failed_case; it++) {
        TG g;
        tg_init(&g);
        int n = 1 + rnd_int(14);
        random_graph(&g, n);
        Err e = {0};
        CandRules rules = cand_rules_default();
        rules.max_prims = 2 + rnd_int(7);
        CandidateSet *all = NULL;
        CHECK_MSG(cand_enumerate(g.pg, &rules, 0, &all, &e) == ST_OK, "instance %d: %s", it, e.msg);
        if (!all) {
            tg_free(&g);
            break;
        }
        double *single = xmalloc(sizeof(double) * (size_t)(g.pg->n_prims + 1));
        for (int p = 0; p < g.pg->n_prims; p++)
            single[p] = 1e-6 * (1 + 99 * rnd01());
        for (int k = 0; k < all->n; k++) {
            Candidate *c = &all->c[k];
            double sum = 0;
            for (int i = 0; i < c->n_prims; i++)
                sum += single[c->prims[i]];
            c->cost = c->n_prims == 1 ? sum : sum * (0.3 + rnd01());
        }
        max_cands = ORCH_MAX(max_cands, all->n);
        Selection sel_all, sel;
        CHECK_MSG(solve_checked(all, NULL, &sel_all, &e) == ST_OK, "instance %d: %s", it, e.msg);
        // The subset: singletons first, then the others in random order.
        CandidateSet *sub = cs_new(g.pg, 24);
        for (int k = 0; k < all->n; k++)
            if (all->c[k].n_prims == 1)
                sub->c[sub->n++] = all->c[k];
        for (int k = 0; k < all->n && sub->n < 22; k++) {
            int j = k + rnd_int(all->n - k);
            Candidate tmp = all->c[k];
            all->c[k] = all->c[j];
            all->c[j] = tmp;
            if (all->c[k].n_prims > 1)
                sub->c[sub->n++] = all->c[k];
        }
        double best = 0;
        Err eb = {0};
        CHECK_MSG(orchestrate_brute_force(sub, &best, &eb) == ST_OK, "instance %d: %s", it, eb.msg);
        CHECK_MSG(solve_checked(sub, NULL, &sel, &e) == ST_OK, "instance %d: %s", it, e.msg);
        if (sel.optimal && sel_all.optimal) {
            CHECK_MSG(fabs(sel.objective - best) <= 1e-9 * best,
                      "instance %d (%d prims, %d of %d candidates): BLP %.17g, brute force %.17g",
                      it, n, sub->n, all->n, sel.objective, best);
            CHECK_MSG(sel_all.objective <= best * (1 + 1e-9),
                      "instance %d: all %d candidates %.17g, a subset %.17g", it, all->n,
                      sel_all.objective, best);
            compared++;
        } else {
            CHECK_MSG(false, "instance %d: not proven optimal", it);
        }
        instances++;
        selection_free(&sel);
        selection_free(&sel_all);
        cs_free(sub);
        cand_set_free(all);
        free(single);
        tg_free(&g);
    }
    printf("  %d instances, %d compared, up to %d enumerated candidates\n", instances, compared,
           max_cands);
    CHECK(compared >= 200);
}

// ---- edge cases ----

static const int64_t dims48[2] = {4, 8};

static void test_single_node(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    tg_origin(&g, 0);
    int y = pb_ew1(&g.b, EW_EXP, x);
    tg_output(&g, y);
    CandidateSet *cs = cs_new(g.pg, 4);
    cs_add1(cs, 0, 3e-6);
    Selection sel;
    Err e = {0};
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(sel.n == 1 && sel.kernels[0] == 0 && sel.n_materialised == 1 &&
          sel.materialised[0] == y && sel.objective == 3e-6 && sel.optimal && sel.gap == 0 &&
          sel.variables == 1 && sel.constraints == 1);
    selection_free(&sel);
    cs_free(cs);
    tg_free(&g);
}

// a = exp(x) is an output and read by b = neg(a), also an output. The fused {exp, neg} is the
// cheapest way to b, but a must still be written by a kernel of its own.
static void test_output_also_intermediate(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    tg_origin(&g, 0);
    int a = pb_ew1(&g.b, EW_EXP, x);
    tg_origin(&g, 1);
    int b = pb_ew1(&g.b, EW_NEG, a);
    tg_output(&g, a);
    tg_output(&g, b);
    CandidateSet *cs = cs_new(g.pg, 4);
    cs_add1(cs, 0, 1e-6);
    cs_add1(cs, 1, 1e-6);
    int both[2] = {0, 1};
    cs_add(cs, both, 2, 0.5e-6);
    Selection sel;
    Err e = {0};
    double best = 0;
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(orchestrate_brute_force(cs, &best, &e) == ST_OK);
    CHECK(sel.n == 2 && sel.kernels[0] == 0 && sel.kernels[1] == 2 && sel.materialised[0] == a &&
          sel.materialised[1] == b && fabs(sel.objective - 1.5e-6) < 1e-18 &&
          fabs(best - 1.5e-6) < 1e-18);
    selection_free(&sel);
    cs_free(cs);
    tg_free(&g);
}

// Outputs that need no kernel: a graph input and a constant listed as outputs (nothing to
// compute: the plan copies them), next to a computed one; and a graph whose only output is
// its input (an empty selection, no solver run).
static void test_free_outputs(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    int w = tg_weight(&g);
    tg_origin(&g, 0);
    int y = pb_ew1(&g.b, EW_EXP, x);
    tg_output(&g, x);
    tg_output(&g, y);
    tg_output(&g, w);
    tg_output(&g, x);
    CandidateSet *cs = cs_new(g.pg, 4);
    cs_add1(cs, 0, 2e-6);
    Selection sel;
    Err e = {0};
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(sel.n == 1 && sel.n_materialised == 1 && sel.materialised[0] == y &&
          sel.constraints == 1);
    selection_free(&sel);
    cs_free(cs);
    tg_free(&g);

    tg_init(&g);
    x = tg_input(&g, 2, dims48);
    tg_output(&g, x);
    cs = cs_new(g.pg, 1);
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(sel.n == 0 && sel.n_materialised == 0 && sel.objective == 0 && sel.optimal &&
          sel.variables == 0 && sel.constraints == 0);
    selection_free(&sel);
    cs_free(cs);
    tg_free(&g);
}

static Graph *load_folded(MB *b) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    Err e = {0};
    if (onnx_load_memory(buf, len, "orchestrate.onnx", NULL, NULL, &g, &e) == ST_OK &&
        graph_infer_and_fold(g, NULL, &e) != ST_OK) {
        graph_free(g);
        g = NULL;
    }
    if (!g)
        printf("  load: %s\n", e.msg);
    free(buf);
    return g;
}

// From an ONNX model whose outputs are its input x and relu(x): fission (with clean-up) gives
// the output "x" a COPY primitive of its own, so the orchestrated program computes it.
static void test_fission_copies_input_outputs(void) {
    const int64_t d[] = {2, 3};
    MB *mb = mb_new(17);
    mb_input(mb, "x", 1, 2, d);
    mb_node(mb, "Relu", "relu", "x", "y", NULL);
    mb_output(mb, "x");
    mb_output(mb, "y");
    Graph *g = load_folded(mb);
    mb_free(mb);
    CHECK(g != NULL);
    if (!g)
        return;
    PrimGraph *pg = NULL;
    Err e = {0};
    CHECK_MSG(fission_run(g, NULL, &pg, NULL, &e) == ST_OK && fission_cleanup(pg, NULL, &e) == 0,
              "%s", e.msg);
    if (pg) {
        CHECK(pg->n_outputs == 2);
        const Tensor *t = pg->tensors[pg->outputs[0]];
        CHECK(t->kind == TK_VALUE && t->producer >= 0 &&
              pg->prims[t->producer]->kind == PRIM_ELEMWISE &&
              pg->prims[t->producer]->ew.code[pg->prims[t->producer]->ew.n - 1].op == EW_COPY &&
              !strcmp(t->name, "x"));
        CandidateSet *cs = cs_new(pg, pg->n_prims + 1);
        for (int p = 0; p < pg->n_prims; p++)
            cs_add1(cs, p, 1e-6);
        Selection sel;
        CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
        CHECK(sel.n == 2 && sel.n_materialised == 2);
        selection_free(&sel);
        cs_free(cs);
    }
    prim_graph_free(pg);
    graph_free(g);
}

// Diamond: a = exp(x); b = neg(a); c = relu(a); d = b + c. {a, b, d} is not convex (a -> c ->
// d leaves and re-enters); {b, c, d} with a kernel for a, or all four in one, are.
static void test_diamond(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    tg_origin(&g, 0);
    int a = pb_ew1(&g.b, EW_EXP, x);
    tg_origin(&g, 1);
    int b = pb_ew1(&g.b, EW_NEG, a);
    tg_origin(&g, 2);
    int c = pb_ew1(&g.b, EW_RELU, a);
    tg_origin(&g, 3);
    int d = pb_ew2(&g.b, EW_ADD, b, c);
    tg_output(&g, d);
    static const double cases[][3] = {
        // cost of {b,c,d}, of {a,b,c,d}; expected objective (singletons cost 1 each)
        {1.5, 3.0, 2.5}, // a alone + {b,c,d}
        {1.5, 2.0, 2.0}, // everything fused
        {3.5, 5.0, 3.9}, // a, b alone + {c,d} (1.9)
    };
    Reach r = reach_build(g.pg);
    for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
        CandidateSet *cs = cs_new(g.pg, 8);
        for (int p = 0; p < 4; p++)
            cs_add1(cs, p, 1e-6);
        int bcd[3] = {1, 2, 3}, all[4] = {0, 1, 2, 3}, bd[2] = {1, 3}, cd[2] = {2, 3};
        cs_add(cs, bcd, 3, cases[i][0] * 1e-6);
        cs_add(cs, all, 4, cases[i][1] * 1e-6);
        cs_add(cs, bd, 2, 1.9e-6);
        cs_add(cs, cd, 2, 1.9e-6);
        for (int k = 0; k < cs->n; k++)
            CHECK(convex_single_sink(g.pg, &r, &cs->c[k]));
        Selection sel;
        Err e = {0};
        double best = 0;
        CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
        CHECK(orchestrate_brute_force(cs, &best, &e) == ST_OK);
        CHECK_MSG(fabs(sel.objective - cases[i][2] * 1e-6) < 1e-15 &&
                      fabs(best - sel.objective) < 1e-15,
                  "case %zu: objective %g, brute force %g, expected %g", i, sel.objective, best,
                  cases[i][2] * 1e-6);
        selection_free(&sel);
        cs_free(cs);
    }
    (void)d;
    free(r.bits);
    tg_free(&g);
}

// Long skip: a chain x -> p0 -> ... -> p5 and p6 = p5 + p0. Windows of the chain, and windows
// ending at p6 that recompute p0 or read it. The cheapest choice reads p0 across the chain.
static void test_long_skip(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    int v[7];
    tg_origin(&g, 0);
    v[0] = pb_ew1(&g.b, EW_EXP, x);
    for (int i = 1; i < 6; i++) {
        tg_origin(&g, i);
        v[i] = pb_ew1(&g.b, i % 2 ? EW_NEG : EW_TANH, v[i - 1]);
    }
    tg_origin(&g, 6);
    v[6] = pb_ew2(&g.b, EW_ADD, v[5], v[0]);
    tg_output(&g, v[6]);
    Reach r = reach_build(g.pg);
    for (int rep = 0; rep < 40; rep++) {
        CandidateSet *cs = cs_new(g.pg, 64);
        for (int p = 0; p < 7; p++)
            cs_add1(cs, p, 1e-6 * (1 + rnd01()));
        for (int lo = 0; lo < 7; lo++)
            for (int hi = lo + 1; hi < 7 && cs->n < 24; hi++) {
                int set[7], n = 0;
                for (int p = lo; p <= hi; p++)
                    set[n++] = p;
                Candidate *c = cs_add(cs, set, n, 1e-6 * n * (0.4 + rnd01()));
                CHECK(convex_single_sink(g.pg, &r, c));
            }
        Selection sel;
        Err e = {0};
        double best = 0;
        CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
        CHECK(orchestrate_brute_force(cs, &best, &e) == ST_OK);
        CHECK_MSG(fabs(sel.objective - best) <= 1e-9 * best, "rep %d: BLP %.17g brute force %.17g",
                  rep, sel.objective, best);
        selection_free(&sel);
        cs_free(cs);
    }
    free(r.bits);
    tg_free(&g);
}

// Several kernels writing one tensor, all free of cost: the solver may pick any number of
// them, the selection keeps one per tensor.
static void test_duplicate_writers(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    tg_origin(&g, 0);
    int a = pb_ew1(&g.b, EW_EXP, x);
    tg_origin(&g, 1);
    int y = pb_ew1(&g.b, EW_NEG, a);
    tg_output(&g, y);
    CandidateSet *cs = cs_new(g.pg, 8);
    int both[2] = {0, 1};
    cs_add1(cs, 0, 0);
    cs_add1(cs, 0, 0);
    cs_add1(cs, 1, 0);
    cs_add(cs, both, 2, 0);
    cs_add(cs, both, 2, 0);
    Selection sel;
    Err e = {0};
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(sel.objective == 0 && sel.n >= 1 && sel.n <= 2);
    selection_free(&sel);
    cs_free(cs);

    // Two writers of y: the dearer one is never kept, whatever the solver returns.
    cs = cs_new(g.pg, 8);
    cs_add1(cs, 0, 1e-6);
    cs_add1(cs, 1, 1e-6);
    cs_add(cs, both, 2, 1.5e-6);
    cs_add(cs, both, 2, 1.2e-6);
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(sel.n == 1 && sel.kernels[0] == 3 && sel.objective == 1.2e-6);
    selection_free(&sel);
    cs_free(cs);
    tg_free(&g);
}

// An opaque primitive with two outputs, both read: one kernel writes both (materialised both).
static void test_opaque_two_outputs(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    Prim *op = pg_add_prim(g.pg, PRIM_OPAQUE, 1, 2, "split");
    op->in[0] = x;
    for (int j = 0; j < 2; j++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", j);
        Tensor *t = pg_add_tensor(g.pg, name, DT_FLOAT, 2, dims48);
        t->producer = g.pg->n_prims - 1;
        op->out[j] = t->id;
    }
    tg_origin(&g, 1);
    int y = pb_ew2(&g.b, EW_ADD, op->out[0], op->out[1]);
    tg_output(&g, y);
    CandidateSet *cs = cs_new(g.pg, 4);
    Candidate *c = cs_add1(cs, 0, 5e-6);
    c->output = op->out[0];
    cs_add1(cs, 1, 1e-6);
    Selection sel;
    Err e = {0};
    double best = 0;
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(orchestrate_brute_force(cs, &best, &e) == ST_OK && fabs(best - 6e-6) < 1e-18);
    CHECK(sel.n == 2 && sel.n_materialised == 3 && sel.materialised[0] == op->out[0] &&
          sel.materialised[1] == op->out[1] && sel.materialised[2] == y);
    selection_free(&sel);
    cs_free(cs);
    tg_free(&g);
}

// Candidate sets that cannot compute an output: the error names the tensor nothing writes.
static void test_infeasible(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, dims48);
    tg_origin(&g, 0);
    int a = pb_ew1(&g.b, EW_EXP, x);
    tg_origin(&g, 1);
    int y = pb_ew1(&g.b, EW_NEG, a);
    g.pg->tensors[a]->name = "a_tensor";
    g.pg->tensors[y]->name = "y_out";
    tg_output(&g, y);
    Selection sel;
    Err e = {0};
    double best = 0;

    // The only producer of a removed: y's kernel cannot run.
    CandidateSet *cs = cs_new(g.pg, 4);
    cs_add1(cs, 1, 1e-6);
    CHECK(orchestrate(cs, NULL, &sel, &e) == ST_INVALID);
    printf("  %s\n", e.msg);
    CHECK(strstr(e.msg, "'y_out'") && strstr(e.msg, "needs tensor 'a_tensor'") &&
          strstr(e.msg, "no candidate kernel writes") && strstr(e.msg, "n0"));
    CHECK(sel.n == 0 && sel.kernels == NULL);
    Err eb = {0};
    CHECK(orchestrate_brute_force(cs, &best, &eb) == ST_INVALID);
    cs_free(cs);

    // Nothing writes the output itself.
    memset(&e, 0, sizeof e);
    cs = cs_new(g.pg, 4);
    cs_add1(cs, 0, 1e-6);
    CHECK(orchestrate(cs, NULL, &sel, &e) == ST_INVALID);
    printf("  %s\n", e.msg);
    CHECK(strstr(e.msg, "graph output 'y_out' cannot be computed: no candidate kernel writes it"));
    cs_free(cs);

    // Only an unprofilable kernel writes a.
    memset(&e, 0, sizeof e);
    cs = cs_new(g.pg, 4);
    cs_add1(cs, 0, INFINITY);
    cs_add1(cs, 1, 1e-6);
    CHECK(orchestrate(cs, NULL, &sel, &e) == ST_INVALID);
    printf("  %s\n", e.msg);
    CHECK(strstr(e.msg, "'a_tensor'") && strstr(e.msg, "unprofilable"));
    cs_free(cs);

    // Unprofilable candidates are skipped when another way exists.
    memset(&e, 0, sizeof e);
    cs = cs_new(g.pg, 4);
    int both[2] = {0, 1};
    cs_add1(cs, 0, INFINITY);
    cs_add1(cs, 1, 1e-6);
    cs_add(cs, both, 2, 3e-6);
    CHECK_MSG(solve_checked(cs, NULL, &sel, &e) == ST_OK, "%s", e.msg);
    CHECK(sel.n == 1 && sel.kernels[0] == 2 && sel.variables == 1);
    selection_free(&sel);
    cs_free(cs);

    // A negative cost is refused.
    memset(&e, 0, sizeof e);
    cs = cs_new(g.pg, 4);
    cs_add1(cs, 0, 1e-6);
    cs_add1(cs, 1, -1e-6);
    CHECK(orchestrate(cs, NULL, &sel, &e) == ST_INVALID && strstr(e.msg, "negative cost"));
    cs_free(cs);
    tg_free(&g);
}

// A large random instance under a tiny time limit keeps the best selection found, with a
// valid bound: no better than the optimum the same program reaches without the limit.
static void test_time_limit(void) {
    TG g;
    tg_init(&g);
    random_graph(&g, 120);
    CandidateSet *cs = random_candidates(g.pg, 1500, 8, false);
    Selection lim, full;
    Err e = {0};
    OrchOptions o = {.time_limit = 1e-3};
    int rc = solve_checked(cs, &o, &lim, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    o.time_limit = 300;
    int rf = solve_checked(cs, &o, &full, &e);
    CHECK_MSG(rf == ST_OK, "%s", e.msg);
    printf("  %d candidates, %d variables, %d constraints\n", cs->n, lim.variables,
           lim.constraints);
    printf("  limit 1 ms: objective %.6g s, bound %.6g s, gap %.3g%%, optimal %d, %.3f s\n",
           lim.objective, lim.bound, 100 * lim.gap, lim.optimal, lim.seconds);
    printf("  limit 300 s: objective %.6g s, bound %.6g s, gap %.3g%%, optimal %d, %.3f s\n",
           full.objective, full.bound, 100 * full.gap, full.optimal, full.seconds);
    if (rc == ST_OK && rf == ST_OK) {
        CHECK(!lim.optimal && full.optimal);
        CHECK(full.objective <= lim.objective * (1 + 1e-12));
        CHECK(lim.bound <= full.objective * (1 + 1e-9));
    }
    selection_free(&lim);
    selection_free(&full);
    cs_free(cs);
    tg_free(&g);
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (repeat with: unit_orchestrate %llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    rng_state = seed * 2654435761u + 1;
    double t0 = now_s();
    RUN(test_single_node);
    RUN(test_output_also_intermediate);
    RUN(test_free_outputs);
    RUN(test_fission_copies_input_outputs);
    RUN(test_diamond);
    RUN(test_long_skip);
    RUN(test_duplicate_writers);
    RUN(test_opaque_two_outputs);
    RUN(test_infeasible);
    RUN(test_random_vs_brute_force);
    RUN(test_enumerated_vs_brute_force);
    RUN(test_time_limit);
    printf("%.1f s\n", now_s() - t0);
    return CHECK_DONE();
}
