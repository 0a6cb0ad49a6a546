// Unit tests of candidate enumeration (candidates/candidates.h). Small primitive graphs built with
// the builders; every enumeration is checked by an independent validator (convex, one sink,
// inputs, one segment, no duplicates, every primitive's singleton), exact candidate lists on
// diamonds and skips, the default rules (LINEAR, OPAQUE, reductions, caps), and, on random DAGs
// (printed seed), equality with a brute force over all subsets. Signatures: equal for identical
// blocks, different for other shapes or parameters. Segments: cut at the narrow waists.
#include "candidates/candidates.h"
#include "../check.h"
#include "prim/prim_build.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- test graphs ----

typedef struct G {
    PrimGraph *pg;
    PB b;
} G;

static void g_init(G *g) {
    g->pg = prim_graph_create(graph_create("test"));
    g->b = (PB){g->pg, "test"};
}

static void g_free(G *g) {
    const Graph *src = g->pg->src;
    prim_graph_free(g->pg);
    graph_free((Graph *)src);
}

static int g_input(G *g, int rank, const int64_t *dims) {
    PrimGraph *pg = g->pg;
    char name[32];
    snprintf(name, sizeof name, "x%d", pg->n_inputs);
    Tensor *t = pg_add_tensor(pg, name, DT_FLOAT, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

// A float constant; its values do not matter to enumeration (1, 2, 3, ... or `base` + i).
static int g_const(G *g, int rank, const int64_t *dims, float base) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = base + (float)i;
    int t = pb_const(&g->b, DT_FLOAT, rank, dims, v);
    free(v);
    return t;
}

static void g_output(G *g, int t) {
    PrimGraph *pg = g->pg;
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = t;
}

// An OPAQUE primitive with one input and an output of the same shape (its node is never run here).
static int g_opaque(G *g, int a) {
    Prim *p = pg_add_prim(g->pg, PRIM_OPAQUE, 1, 1, "opaque");
    p->node = graph_add_node((Graph *)g->pg->src, "Custom", "test", "opaque", 1, 1, 0);
    p->in[0] = a;
    const Tensor *in = g->pg->tensors[a];
    Tensor *t = pg_add_tensor(g->pg, "opaque_out", in->dtype, in->rank, in->dims);
    t->producer = g->pg->n_prims - 1;
    p->out[0] = t->id;
    return t->id;
}

static int prim_of(const G *g, int t) {
    return g->pg->tensors[t]->producer;
}

static CandidateSet *enumerate(G *g, int max_prims, int max_inputs, int max_segment) {
    CandRules r = cand_rules_default();
    if (max_prims)
        r.max_prims = max_prims;
    if (max_inputs)
        r.max_inputs = max_inputs;
    CandidateSet *cs = NULL;
    Err e = {0};
    int rc = prim_graph_verify(g->pg, &e);
    if (rc == ST_OK)
        rc = cand_enumerate(g->pg, &r, max_segment, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    return cs;
}

// ---- an independent validator ----

// reach[a * n + b]: a path from primitive a to primitive b (reflexive), by tensor producers.
static bool *reach_matrix(const PrimGraph *pg) {
    int n = pg->n_prims;
    bool *r = xcalloc((size_t)n * (size_t)n + 1, 1);
    for (int b = 0; b < n; b++) {
        r[b * n + b] = true;
        const Prim *p = pg->prims[b];
        for (int j = 0; j < p->n_in; j++) {
            int q = p->in[j] >= 0 ? pg->tensors[p->in[j]]->producer : -1;
            if (q < 0)
                continue;
            for (int a = 0; a < n; a++)
                r[a * n + b] |= r[a * n + q];
        }
    }
    return r;
}

static bool member(const Candidate *c, int k) {
    for (int i = 0; i < c->n_prims; i++)
        if (c->prims[i] == k)
            return true;
    return false;
}

static int cmp_cand(const void *a, const void *b) {
    const Candidate *x = *(const Candidate *const *)a, *y = *(const Candidate *const *)b;
    if (x->n_prims != y->n_prims)
        return x->n_prims - y->n_prims;
    for (int i = 0; i < x->n_prims; i++)
        if (x->prims[i] != y->prims[i])
            return x->prims[i] - y->prims[i];
    return 0;
}

// Every candidate: ascending, convex, one sink, inputs exactly the tensors read from outside,
// output the sink's, in one segment, within max_prims; no duplicates; every primitive's
// singleton present.
static void validate(const CandidateSet *cs, int max_prims) {
    const PrimGraph *pg = cs->pg;
    int n = pg->n_prims;
    bool *reach = reach_matrix(pg);
    bool *single = xcalloc((size_t)n + 1, 1);
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        CHECK(c->id == i && c->n_prims >= 1 && c->n_prims <= max_prims);
        for (int k = 1; k < c->n_prims; k++)
            CHECK(c->prims[k] > c->prims[k - 1]);
        int sink = c->prims[c->n_prims - 1];
        CHECK(c->output == pg->prims[sink]->out[0]);
        if (c->n_prims == 1)
            single[sink] = true;
        for (int k = 0; k < c->n_prims; k++) {
            int a = c->prims[k];
            CHECK_MSG(cs->segment_of_prim[a] == c->segment, "candidate %d spans segments", i);
            CHECK_MSG(reach[a * n + sink], "candidate %d: prim %d does not reach the sink", i, a);
            for (int x = c->prims[0]; x < sink; x++)
                if (!member(c, x) && reach[a * n + x])
                    for (int m = 0; m < c->n_prims; m++)
                        CHECK_MSG(!reach[x * n + c->prims[m]],
                                  "candidate %d not convex: %d -> %d -> %d", i, a, x, c->prims[m]);
        }
        // Inputs: recomputed here as the tensors members read whose producer is not a member.
        int ins[256], n_ins = 0;
        for (int k = 0; k < c->n_prims; k++) {
            const Prim *p = pg->prims[c->prims[k]];
            for (int j = 0; j < p->n_in; j++) {
                int t = p->in[j], q = pg->tensors[t]->producer;
                if (q >= 0 && member(c, q))
                    continue;
                bool dup = false;
                for (int u = 0; u < n_ins; u++)
                    dup |= ins[u] == t;
                if (!dup && n_ins < 256)
                    ins[n_ins++] = t;
            }
        }
        CHECK(c->n_inputs == n_ins);
        for (int u = 0; u < n_ins; u++) {
            bool found = false;
            for (int v = 0; v < c->n_inputs; v++)
                found |= c->inputs[v] == ins[u];
            CHECK(found);
        }
        // Each once, in the canonical order of the signature's walk.
        for (int v = 1; v < c->n_inputs; v++)
            for (int u = 0; u < v; u++)
                CHECK(c->inputs[u] != c->inputs[v]);
        int canon[256];
        CHECK(cand_canonical_inputs(pg, c->prims, c->n_prims, canon) == c->n_inputs);
        CHECK(memcmp(canon, c->inputs, sizeof(int) * (size_t)c->n_inputs) == 0);
    }
    for (int k = 0; k < n; k++)
        CHECK_MSG(single[k], "prim %d has no singleton", k);
    const Candidate **sorted = xmalloc(sizeof(Candidate *) * (size_t)(cs->n + 1));
    for (int i = 0; i < cs->n; i++)
        sorted[i] = &cs->c[i];
    qsort(sorted, (size_t)cs->n, sizeof *sorted, cmp_cand);
    for (int i = 1; i < cs->n; i++)
        CHECK_MSG(cmp_cand(&sorted[i - 1], &sorted[i]) != 0, "duplicate candidate");
    CHECK(cs->stats.candidates == cs->n && cs->stats.prims == n);
    free(sorted);
    free(single);
    free(reach);
}

// The candidate with exactly these primitives (ascending), or -1.
static int find(const CandidateSet *cs, const int *prims, int n) {
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].n_prims == n && memcmp(cs->c[i].prims, prims, sizeof(int) * (size_t)n) == 0)
            return i;
    return -1;
}

// Bitmask of a candidate's primitives (graphs of at most 64 primitives).
static uint64_t mask_of(const Candidate *c) {
    uint64_t m = 0;
    for (int k = 0; k < c->n_prims; k++)
        m |= 1ull << c->prims[k];
    return m;
}

static int n_with_sink(const CandidateSet *cs, int sink) {
    int k = 0;
    for (int i = 0; i < cs->n; i++)
        k += cs->c[i].prims[cs->c[i].n_prims - 1] == sink;
    return k;
}

static bool any_holds_both(const CandidateSet *cs, int a, int b) {
    for (int i = 0; i < cs->n; i++)
        if (member(&cs->c[i], a) && member(&cs->c[i], b))
            return true;
    return false;
}

static const int64_t V4[1] = {4}, M44[2] = {4, 4};

// ---- convexity and shapes of sets ----

// x -> a -> b -> c with a skip a -> c: {a, c} would need b computed outside between them.
static void test_reentry_never(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 1, V4);
    int a = pb_ew1(&g.b, EW_EXP, x);
    int b = pb_ew1(&g.b, EW_NEG, a);
    int c = pb_ew2(&g.b, EW_ADD, a, b);
    g_output(&g, c);
    CandidateSet *cs = enumerate(&g, 0, 0, 0);
    validate(cs, 8);
    int pa = prim_of(&g, a), pb = prim_of(&g, b), pc = prim_of(&g, c);
    int ac[2] = {pa, pc}, bc[2] = {pb, pc}, abc[3] = {pa, pb, pc};
    CHECK(find(cs, ac, 2) < 0);
    CHECK(find(cs, bc, 2) >= 0 && find(cs, abc, 3) >= 0);
    CHECK(n_with_sink(cs, pc) == 3);
    CHECK(cs->n == 1 + 2 + 3);
    cand_set_free(cs);
    g_free(&g);
}

// a -> {b, c} -> d: with sink d exactly {d}, {b,d}, {c,d}, {b,c,d}, {a,b,c,d}; never {a,b,d}.
static void test_diamond(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 1, V4);
    int a = pb_ew1(&g.b, EW_EXP, x);
    int b = pb_ew1(&g.b, EW_NEG, a);
    int c = pb_ew1(&g.b, EW_ABS, a);
    int d = pb_ew2(&g.b, EW_ADD, b, c);
    g_output(&g, d);
    CandidateSet *cs = enumerate(&g, 0, 0, 0);
    validate(cs, 8);
    int pa = prim_of(&g, a), pb = prim_of(&g, b), pc = prim_of(&g, c), pd = prim_of(&g, d);
    uint64_t want[] = {1ull << pd, 1ull << pb | 1ull << pd, 1ull << pc | 1ull << pd,
                       1ull << pb | 1ull << pc | 1ull << pd,
                       1ull << pa | 1ull << pb | 1ull << pc | 1ull << pd};
    CHECK(n_with_sink(cs, pd) == 5);
    for (size_t w = 0; w < ORCH_COUNT(want); w++) {
        bool found = false;
        for (int i = 0; i < cs->n; i++)
            found |= mask_of(&cs->c[i]) == want[w];
        CHECK_MSG(found, "diamond set %zu missing", w);
    }
    int abd[3] = {pa, pb, pd};
    CHECK(find(cs, abd, 3) < 0);
    int full[4] = {pa, pb, pc, pd};
    int k = find(cs, full, 4);
    CHECK(k >= 0 && cs->c[k].n_inputs == 1 && cs->c[k].inputs[0] == x);
    cand_set_free(cs);
    g_free(&g);
}

// z = a + chain(a) with a chain of 5 between: a set with a and z holds the whole chain, so with a
// cap of 6 primitives no candidate joins them, and with 7 exactly one does.
static void test_long_skip(void) {
    for (int cap = 6; cap <= 7; cap++) {
        G g;
        g_init(&g);
        int x = g_input(&g, 1, V4);
        int a = pb_ew1(&g.b, EW_EXP, x), t = a;
        for (int i = 0; i < 5; i++)
            t = pb_ew1(&g.b, i % 2 ? EW_NEG : EW_TANH, t);
        int z = pb_ew2(&g.b, EW_ADD, a, t);
        g_output(&g, z);
        CandidateSet *cs = enumerate(&g, cap, 0, 0);
        validate(cs, cap);
        int joined = 0;
        for (int i = 0; i < cs->n; i++)
            if (member(&cs->c[i], prim_of(&g, a)) && member(&cs->c[i], prim_of(&g, z))) {
                joined++;
                CHECK(cs->c[i].n_prims == 7);
            }
        CHECK_MSG(joined == (cap == 7), "cap %d: %d sets join the skip", cap, joined);
        // Sink z: {z} and z with the last 1..5 chain primitives (cap 6), plus the full set (7).
        CHECK(n_with_sink(cs, prim_of(&g, z)) == (cap == 7 ? 7 : 6));
        cand_set_free(cs);
        g_free(&g);
    }
}

// ---- the default rules ----

static void test_linear_rules(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 2, M44);
    int w1 = g_const(&g, 2, M44, 1), w2 = g_const(&g, 2, M44, 2);
    int e1 = pb_ew1(&g.b, EW_EXP, x);
    int m1 = pb_matmul(&g.b, e1, w1);
    int e2 = pb_ew1(&g.b, EW_RELU, m1);
    int m2 = pb_matmul(&g.b, e2, w2);
    int e3 = pb_ew1(&g.b, EW_TANH, m2);
    // A reduction feeding a LINEAR (prologue: not allowed) and one after it (epilogue: allowed).
    int r = pb_reduce(&g.b, RED_SUM, x, 2, true, false); // [4,1]
    int s = pb_ew2(&g.b, EW_SUB, x, r);
    int m3 = pb_matmul(&g.b, s, w1);
    int r2 = pb_reduce(&g.b, RED_MAX, m3, 2, true, false);
    int d = pb_ew2(&g.b, EW_SUB, m3, r2);
    g_output(&g, e3);
    g_output(&g, d);
    CandidateSet *cs = enumerate(&g, 0, 0, 0);
    validate(cs, 8);
    int P[] = {prim_of(&g, e1), prim_of(&g, m1), prim_of(&g, e2)};
    CHECK_MSG(find(cs, P, 3) >= 0, "prologue + LINEAR + epilogue missing");
    CHECK(!any_holds_both(cs, prim_of(&g, m1), prim_of(&g, m2)));
    CHECK(!any_holds_both(cs, prim_of(&g, r), prim_of(&g, m3)));
    int sm[2] = {prim_of(&g, s), prim_of(&g, m3)};
    CHECK(find(cs, sm, 2) >= 0);
    int ep[3] = {prim_of(&g, m3), prim_of(&g, r2), prim_of(&g, d)};
    CHECK_MSG(find(cs, ep, 3) >= 0, "LINEAR with a reduce epilogue missing");
    // The rule function directly.
    CandRules rules = cand_rules_default();
    int two[2] = {prim_of(&g, m1), prim_of(&g, m2)};
    CHECK(!cand_rules_default_accepts(&rules, g.pg, two, 2));
    CHECK(cand_rules_default_accepts(&rules, g.pg, sm, 2));
    cand_set_free(cs);
    g_free(&g);
}

// OPAQUE primitives are only ever alone, and sets never grow through one (a hull that would
// contain one is rejected).
static void test_opaque_alone(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 1, V4);
    int a = pb_ew1(&g.b, EW_EXP, x);
    int o = g_opaque(&g, a);
    int c = pb_ew2(&g.b, EW_ADD, o, a); // a -> o -> c and a -> c
    int d = pb_ew1(&g.b, EW_NEG, c);
    g_output(&g, d);
    CandidateSet *cs = enumerate(&g, 0, 0, 0);
    validate(cs, 8);
    int po = prim_of(&g, o);
    for (int i = 0; i < cs->n; i++)
        if (member(&cs->c[i], po))
            CHECK(cs->c[i].n_prims == 1);
    CHECK(n_with_sink(cs, prim_of(&g, c)) == 1); // {a, c} is not convex, its hull holds o
    CHECK(n_with_sink(cs, prim_of(&g, d)) == 2);
    int one[1] = {po}, pair[2] = {prim_of(&g, a), po};
    CandRules rules = cand_rules_default();
    CHECK(cand_rules_default_accepts(&rules, g.pg, one, 1));
    CHECK(!cand_rules_default_accepts(&rules, g.pg, pair, 2));
    cand_set_free(cs);
    g_free(&g);
}

// Softmax's max and sum agree (same axes of same-shaped inputs); reductions over other axes, or
// of other shapes, never share a kernel.
static void test_reductions_agree(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 2, M44);
    int r1 = pb_reduce(&g.b, RED_MAX, x, 2, true, false);
    int e = pb_ew1(&g.b, EW_EXP, pb_ew2(&g.b, EW_SUB, x, r1));
    int r2 = pb_reduce(&g.b, RED_SUM, e, 2, true, false);
    int sm = pb_ew2(&g.b, EW_DIV, e, r2);
    int r3 = pb_reduce(&g.b, RED_SUM, x, 1, true, false); // axis 0: [1,4]
    int z = pb_ew2(&g.b, EW_ADD, r1, r3);
    const int64_t d48[2] = {4, 8};
    int y = g_input(&g, 2, d48);
    int r4 = pb_reduce(&g.b, RED_SUM, y, 2, true, false); // same axis, other shape: [4,1]
    int z2 = pb_ew2(&g.b, EW_ADD, r1, r4);
    g_output(&g, sm);
    g_output(&g, z);
    g_output(&g, z2);
    CandidateSet *cs = enumerate(&g, 0, 0, 0);
    validate(cs, 8);
    int P[5] = {prim_of(&g, r1), prim_of(&g, e) - 1, prim_of(&g, e), prim_of(&g, r2),
                prim_of(&g, sm)};
    CHECK_MSG(find(cs, P, 5) >= 0, "the whole softmax is not a candidate");
    CHECK(!any_holds_both(cs, prim_of(&g, r1), prim_of(&g, r3)));
    CHECK(!any_holds_both(cs, prim_of(&g, r1), prim_of(&g, r4)));
    int q[2] = {prim_of(&g, r3), prim_of(&g, z)};
    CHECK(find(cs, q, 2) >= 0);
    cand_set_free(cs);
    g_free(&g);
}

// A chain of 10 under a cap of 3: every sink has min(i+1, 3) sets.
static void test_max_prims(void) {
    G g;
    g_init(&g);
    int t = g_input(&g, 1, V4);
    for (int i = 0; i < 10; i++)
        t = pb_ew1(&g.b, i % 2 ? EW_EXP : EW_NEG, t);
    g_output(&g, t);
    CandidateSet *cs = enumerate(&g, 3, 0, 0);
    validate(cs, 3);
    CHECK_MSG(cs->n == 1 + 2 + 3 * 8, "%d candidates", cs->n);
    cand_set_free(cs);
    g_free(&g);
}

// d = neg(a) + abs(a): with one external input allowed, {b, d} and {c, d} (two inputs each) are
// not candidates but are grown through to {b, c, d} and {a, b, c, d}.
static void test_max_inputs(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 1, V4);
    int a = pb_ew1(&g.b, EW_EXP, x);
    int b = pb_ew1(&g.b, EW_NEG, a);
    int c = pb_ew1(&g.b, EW_ABS, a);
    int d = pb_ew2(&g.b, EW_ADD, b, c);
    g_output(&g, d);
    CandidateSet *cs = enumerate(&g, 0, 1, 0);
    validate(cs, 8);
    int pa = prim_of(&g, a), pb = prim_of(&g, b), pc = prim_of(&g, c), pd = prim_of(&g, d);
    int bd[2] = {pb, pd}, bcd[3] = {pb, pc, pd}, abcd[4] = {pa, pb, pc, pd}, dd[1] = {pd};
    CHECK(find(cs, dd, 1) >= 0); // singletons whatever their inputs
    CHECK(find(cs, bd, 2) < 0);
    CHECK(find(cs, bcd, 3) >= 0 && find(cs, abcd, 4) >= 0);
    CHECK(n_with_sink(cs, pd) == 3);
    cand_set_free(cs);
    g_free(&g);
}

// A concat of 12 three-primitive chains has 44928 candidate sets of at most 8 primitives: the
// search of that sink stops at its budget, reported, after every set of at most 5 primitives
// (fewer growth steps come first).
static void test_sink_budget(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 1, V4), ends[12];
    for (int i = 0; i < 12; i++)
        ends[i] = pb_ew1(&g.b, EW_TANH, pb_ew1(&g.b, EW_NEG, pb_ew1(&g.b, EW_EXP, x)));
    int c = pb_concat(&g.b, 12, ends, 0);
    g_output(&g, c);
    CandidateSet *cs = enumerate(&g, 0, 20, 0);
    validate(cs, 8);
    int pc = prim_of(&g, c), small = 0, total = n_with_sink(cs, pc);
    for (int i = 0; i < cs->n; i++)
        small += cs->c[i].prims[cs->c[i].n_prims - 1] == pc && cs->c[i].n_prims <= 5;
    CHECK(cs->stats.truncated_sinks == 1);
    CHECK_MSG(small == 1 + 12 + 78 + 364 + 1353, "%d sets of at most 5", small);
    CHECK_MSG(total > small && total < 44928, "%d sets", total);
    cand_set_free(cs);
    g_free(&g);
}

// ---- random DAGs against a brute force over all subsets ----

static uint64_t rng = 1;
static uint64_t next_rand(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}
static int rand_below(int n) {
    return (int)(next_rand() >> 33) % n;
}

// Up to 12 primitives over [4,4], [4,1] and [1,4] tensors: elementwise, reductions, matmuls,
// now and then an OPAQUE one.
static void random_graph(G *g, int n) {
    int pool[64], np = 0, square[64], ns = 0;
    pool[np++] = square[ns++] = g_input(g, 2, M44);
    if (rand_below(2))
        pool[np++] = square[ns++] = g_input(g, 2, M44);
    int w = g_const(g, 2, M44, 1);
    for (int i = 0; i < n; i++) {
        int a = pool[rand_below(np)], kind = rand_below(10), t;
        if (kind < 3)
            t = pb_ew1(&g->b, kind ? EW_EXP : EW_NEG, a);
        else if (kind < 6)
            t = pb_ew2(&g->b, EW_ADD, a, pool[rand_below(np)]);
        else if (kind < 8 && g->pg->tensors[a]->dims[0] == 4 && g->pg->tensors[a]->dims[1] == 4)
            t = pb_reduce(&g->b, RED_SUM, a, rand_below(2) ? 1 : 2, true, false);
        else if (kind < 9)
            t = pb_matmul(&g->b, square[rand_below(ns)],
                          rand_below(2) ? w : square[rand_below(ns)]);
        else
            t = g_opaque(g, a);
        const Tensor *tt = g->pg->tensors[t];
        pool[np++] = t;
        if (tt->dims[0] == 4 && tt->dims[1] == 4)
            square[ns++] = t;
    }
    g_output(g, pool[np - 1]);
}

// Whether subset s (bitmask, n <= 16) is a candidate by definition.
static bool brute_ok(const PrimGraph *pg, const bool *reach, const CandidateSet *cs, uint64_t s,
                     const CandRules *r) {
    int n = pg->n_prims, prims[64], k = 0;
    for (int i = 0; i < n; i++)
        if (s >> i & 1)
            prims[k++] = i;
    if (k == 1)
        return true;
    if (k > r->max_prims)
        return false;
    int sink = prims[k - 1];
    for (int i = 0; i < k; i++) {
        if (pg->prims[prims[i]]->kind == PRIM_OPAQUE ||
            cs->segment_of_prim[prims[i]] != cs->segment_of_prim[sink])
            return false;
        if (i < k - 1) { // a consumer inside
            bool fed = false;
            for (int j = i + 1; j < k; j++)
                for (int q = 0; q < pg->prims[prims[j]]->n_in; q++)
                    fed |= pg->tensors[pg->prims[prims[j]]->in[q]]->producer == prims[i];
            if (!fed)
                return false;
        }
    }
    for (int x = 0; x < n; x++) // convex
        if (!(s >> x & 1))
            for (int a = 0; a < k; a++)
                for (int c = 0; c < k; c++)
                    if (reach[prims[a] * n + x] && reach[x * n + prims[c]])
                        return false;
    if (!cand_rules_default_accepts(r, pg, prims, k))
        return false;
    int ins[64], n_ins = 0, n_var = 0;
    for (int i = 0; i < k; i++) {
        const Prim *p = pg->prims[prims[i]];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j], q = pg->tensors[t]->producer;
            bool dup = q >= 0 && (s >> q & 1);
            for (int u = 0; u < n_ins && !dup; u++)
                dup = ins[u] == t;
            if (!dup) {
                ins[n_ins++] = t;
                n_var += !pg_is_const(pg, t);
            }
        }
    }
    return n_var <= r->max_inputs;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t seed;

static void test_random_vs_brute_force(void) {
    rng = seed * 2654435761u + 1;
    int graphs = 500, mismatches = 0;
    for (int gi = 0; gi < graphs && !mismatches; gi++) {
        G g;
        g_init(&g);
        random_graph(&g, 4 + rand_below(9));
        int caps[] = {2, 3, 5, 8}, ins[] = {1, 2, 6};
        CandRules r = cand_rules_default();
        r.max_prims = caps[rand_below(4)];
        r.max_inputs = ins[rand_below(3)];
        int max_segment = rand_below(3) ? 64 : 3 + rand_below(4);
        CandidateSet *cs = NULL;
        Err e = {0};
        CHECK(prim_graph_verify(g.pg, &e) == ST_OK);
        CHECK_MSG(cand_enumerate(g.pg, &r, max_segment, &cs, &e) == ST_OK, "%s", e.msg);
        if (!cs) {
            g_free(&g);
            break;
        }
        validate(cs, r.max_prims);
        int n = g.pg->n_prims;
        bool *reach = reach_matrix(g.pg);
        uint64_t *want = xmalloc(sizeof(uint64_t) << n),
                 *got = xmalloc(sizeof(uint64_t) * (size_t)cs->n);
        int nw = 0;
        for (uint64_t s = 1; s < (1ull << n); s++)
            if (brute_ok(g.pg, reach, cs, s, &r))
                want[nw++] = s;
        for (int i = 0; i < cs->n; i++)
            got[i] = mask_of(&cs->c[i]);
        qsort(got, (size_t)cs->n, sizeof(uint64_t), cmp_u64);
        bool same = nw == cs->n && memcmp(want, got, sizeof(uint64_t) * (size_t)nw) == 0;
        CHECK_MSG(same,
                  "graph %d (%d prims, cap %d, inputs %d, segment %d): %d candidates, brute "
                  "force %d",
                  gi, n, r.max_prims, r.max_inputs, max_segment, cs->n, nw);
        mismatches += !same;
        free(want);
        free(got);
        free(reach);
        cand_set_free(cs);
        g_free(&g);
    }
}

// ---- signatures ----

// A pre-norm residual block over x [2,4,h]: LayerNorm-like statistics, a matmul by its own
// weights, bias, tanh, residual add. Returns the output; *first/*last: its primitive range.
static int block(G *g, int x, int h, float wbase, int *first, int *last) {
    *first = g->pg->n_prims;
    int mu = pb_reduce(&g->b, RED_MEAN, x, 4, true, false);
    int s = pb_ew2(&g->b, EW_SUB, x, mu);
    int v = pb_reduce(&g->b, RED_MEAN, pb_ew2(&g->b, EW_MUL, s, s), 4, true, false);
    int n = pb_ew2(&g->b, EW_MUL, s, pb_ew1(&g->b, EW_RSQRT, pb_ew2i(&g->b, EW_ADD, v, 1e-5)));
    const int64_t wd[2] = {h, h}, bd[1] = {h};
    int m = pb_matmul(&g->b, n, g_const(g, 2, wd, wbase));
    int a = pb_ew1(&g->b, EW_TANH, pb_ew2(&g->b, EW_ADD, m, g_const(g, 1, bd, wbase + 7)));
    int y = pb_ew2(&g->b, EW_ADD, a, x);
    *last = g->pg->n_prims - 1;
    return y;
}

// Three identical blocks: every candidate inside block 1 has a twin in blocks 2 and 3 (same
// primitives shifted by the block length) with the same signature; a block over another hidden
// size shares no signature with them where its shapes differ.
static void test_signature_blocks(void) {
    G g;
    g_init(&g);
    const int64_t xd[3] = {2, 4, 16}, yd[3] = {2, 4, 8};
    int x = g_input(&g, 3, xd), f[4], l[4];
    int t = x;
    for (int i = 0; i < 3; i++)
        t = block(&g, t, 16, (float)i * 10, &f[i], &l[i]);
    g_output(&g, t);
    int u = block(&g, g_input(&g, 3, yd), 8, 0, &f[3], &l[3]);
    g_output(&g, u);
    int len = l[0] - f[0] + 1;
    CandidateSet *cs = enumerate(&g, 0, 0, 1000);
    validate(cs, 8);
    int in_block = 0, with_matmul = 0;
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        if (c->prims[0] < f[0] || c->prims[c->n_prims - 1] > l[0])
            continue;
        in_block++;
        int shifted[8];
        for (int b = 1; b < 3; b++) {
            for (int k = 0; k < c->n_prims; k++)
                shifted[k] = c->prims[k] + b * len;
            int j = find(cs, shifted, c->n_prims);
            CHECK_MSG(j >= 0 && cs->c[j].signature == c->signature,
                      "candidate %d has no equal twin in block %d", i, b + 1);
            for (int k = 0; k < c->n_prims; k++)
                shifted[k] = c->prims[k] - f[0] + f[3];
            j = find(cs, shifted, c->n_prims);
            CHECK(j >= 0);
            bool has_mm = false;
            for (int k = 0; k < c->n_prims; k++)
                has_mm |= g.pg->prims[c->prims[k]]->kind == PRIM_LINEAR;
            if (j >= 0 && has_mm) {
                with_matmul++;
                CHECK_MSG(cs->c[j].signature != c->signature, "hidden 8 and 16 share a signature");
            }
        }
    }
    CHECK(in_block > 20 && with_matmul > 0);
    // Distinct signatures: a fourth identical block adds candidates but no new signature.
    int sig3 = cs->stats.signatures, n3 = cs->n;
    cand_set_free(cs);
    t = block(&g, t, 16, 40, &f[0], &l[0]);
    g.pg->outputs[0] = t;
    cs = enumerate(&g, 0, 0, 1000);
    CHECK_MSG(cs->stats.signatures == sig3 && cs->n > n3,
              "signatures %d -> %d, candidates %d -> %d", sig3, cs->stats.signatures, n3, cs->n);
    cand_set_free(cs);
    g_free(&g);
}

// Twins whose operands come in the other tensor-id order (x - y with x older, then q - p with p
// older): equal signatures, and inputs listed by operand role, not by id, so one generated kernel
// serves both (the kernel ABI passes c->inputs in order).
static void test_canonical_inputs(void) {
    G g;
    g_init(&g);
    const int64_t d[2] = {3, 5};
    int x = g_input(&g, 2, d), y = g_input(&g, 2, d);
    int s1 = pb_ew2(&g.b, EW_SUB, x, y);
    int p = pb_ew1(&g.b, EW_TANH, s1), q = pb_ew1(&g.b, EW_EXP, s1);
    int s2 = pb_ew2(&g.b, EW_SUB, q, p);
    g_output(&g, s2);
    CandidateSet *cs = enumerate(&g, 0, 0, 1000);
    validate(cs, 8);
    const Candidate *c1 = NULL, *c2 = NULL;
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        if (c->n_prims == 1 && c->output == s1)
            c1 = c;
        if (c->n_prims == 1 && c->output == s2)
            c2 = c;
    }
    CHECK(c1 && c2 && c1->signature == c2->signature);
    CHECK(c1 && c1->n_inputs == 2 && c1->inputs[0] == x && c1->inputs[1] == y);
    CHECK(c2 && c2->n_inputs == 2 && c2->inputs[0] == q && c2->inputs[1] == p && q > p);
    cand_set_free(cs);
    g_free(&g);
}

// Direct signatures: operand order, ops, immediates, axes, perms and tables all count; names and
// positions do not.
static void test_signature_params(void) {
    G g;
    g_init(&g);
    int x = g_input(&g, 2, M44), y = g_input(&g, 2, M44);
    int k[12];
    k[0] = prim_of(&g, pb_ew2(&g.b, EW_SUB, x, y));
    k[1] = prim_of(&g, pb_ew2(&g.b, EW_SUB, y, x)); // same structure, other tensors: equal
    k[2] = prim_of(&g, pb_ew2(&g.b, EW_SUB, x, x)); // one tensor read twice: differs
    k[3] = prim_of(&g, pb_ew2i(&g.b, EW_ADD, x, 1e-5));
    k[4] = prim_of(&g, pb_ew2i(&g.b, EW_ADD, x, 1e-6));
    k[5] = prim_of(&g, pb_reduce(&g.b, RED_SUM, x, 1, true, false));
    k[6] = prim_of(&g, pb_reduce(&g.b, RED_SUM, x, 2, true, false));
    int p01[2] = {0, 1}, p10[2] = {1, 0};
    k[7] = prim_of(&g, pb_transpose(&g.b, x, p01));
    k[8] = prim_of(&g, pb_transpose(&g.b, x, p10));
    int64_t t1[4] = {0, 1, 2, 3}, t2[4] = {3, 2, 1, 0};
    int64_t *tab1[2] = {t1, NULL}, *tab2[2] = {t2, NULL};
    k[9] = prim_of(&g, pb_table(&g.b, x, M44, tab1, 0));
    k[10] = prim_of(&g, pb_table(&g.b, x, M44, tab2, 0));
    const int64_t d8[2] = {4, 8};
    int z = g_input(&g, 2, d8);
    k[11] = prim_of(&g, pb_ew2(&g.b, EW_SUB, z, z));
    uint64_t s[12];
    for (int i = 0; i < 12; i++)
        s[i] = cand_signature(g.pg, &k[i], 1);
    CHECK(s[0] == s[1]);
    CHECK(s[0] != s[2] && s[2] != s[11]);
    CHECK(s[3] != s[4] && s[5] != s[6] && s[7] != s[8] && s[9] != s[10]);
    // Operand order inside a set: a - b against b - a of the same producers.
    int a = pb_ew1(&g.b, EW_EXP, x), b = pb_ew1(&g.b, EW_EXP, y);
    int c1 = pb_ew2(&g.b, EW_SUB, a, b);
    int a2 = pb_ew1(&g.b, EW_EXP, x), b2 = pb_ew1(&g.b, EW_NEG, y);
    int c2 = pb_ew2(&g.b, EW_SUB, a2, b2), c3 = pb_ew2(&g.b, EW_SUB, b2, a2);
    int S1[3] = {prim_of(&g, a), prim_of(&g, b), prim_of(&g, c1)};
    int S2[3] = {prim_of(&g, a2), prim_of(&g, b2), prim_of(&g, c2)};
    int S3[3] = {prim_of(&g, a2), prim_of(&g, b2), prim_of(&g, c3)};
    CHECK(cand_signature(g.pg, S2, 3) != cand_signature(g.pg, S3, 3));
    CHECK(cand_signature(g.pg, S1, 3) != cand_signature(g.pg, S2, 3)); // exp vs neg
    // Constant values do not count, their shapes do.
    int q1 = prim_of(&g, pb_ew2(&g.b, EW_MUL, x, g_const(&g, 2, M44, 1)));
    int q2 = prim_of(&g, pb_ew2(&g.b, EW_MUL, x, g_const(&g, 2, M44, 5)));
    int64_t v4 = 4;
    int q3 = prim_of(&g, pb_ew2(&g.b, EW_MUL, x, g_const(&g, 1, &v4, 1)));
    CHECK(cand_signature(g.pg, &q1, 1) == cand_signature(g.pg, &q2, 1));
    CHECK(cand_signature(g.pg, &q1, 1) != cand_signature(g.pg, &q3, 1));
    g_free(&g);
}

// ---- segments ----

// x0 = exp(input), then blocks y = (neg(exp x) + abs(exp x)) + x of 5 primitives each: inside a
// block at least 2 tensors cross every boundary, between blocks only the block's output. Under a
// cap of 8 the cuts fall exactly between blocks.
static void test_segments(void) {
    G g;
    g_init(&g);
    int t = pb_ew1(&g.b, EW_EXP, g_input(&g, 1, V4));
    int blocks = 6;
    for (int i = 0; i < blocks; i++) {
        int a = pb_ew1(&g.b, EW_EXP, t);
        int d = pb_ew2(&g.b, EW_ADD, pb_ew1(&g.b, EW_NEG, a), pb_ew1(&g.b, EW_ABS, a));
        t = pb_ew2(&g.b, EW_ADD, d, t);
    }
    g_output(&g, t);
    CandidateSet *cs = enumerate(&g, 0, 0, 8);
    validate(cs, 8);
    CHECK_MSG(cs->n_segments == blocks, "%d segments", cs->n_segments);
    CHECK(cs->stats.segments == cs->n_segments && cs->stats.max_segment_prims == 6);
    for (int k = 0; k < g.pg->n_prims; k++) {
        int want = k < 6 ? 0 : (k - 1) / 5;
        CHECK_MSG(cs->segment_of_prim[k] == want, "prim %d in segment %d, want %d", k,
                  cs->segment_of_prim[k], want);
    }
    cand_set_free(cs);
    // The whole graph fits: one segment, and candidates now span the former cuts.
    cs = enumerate(&g, 0, 0, 0);
    CHECK(cs->n_segments == 1);
    int across = 0;
    for (int i = 0; i < cs->n; i++)
        across += cs->c[i].prims[0] < 6 && cs->c[i].prims[cs->c[i].n_prims - 1] >= 6;
    CHECK(across > 0);
    cand_set_free(cs);
    g_free(&g);
}

static void test_usage_errors(void) {
    G g;
    g_init(&g);
    g_output(&g, pb_ew1(&g.b, EW_EXP, g_input(&g, 1, V4)));
    CandidateSet *cs = NULL;
    Err e = {0};
    CHECK(cand_enumerate(g.pg, NULL, -1, &cs, &e) == ST_USAGE && cs == NULL);
    Err e1 = {0};
    CHECK(cand_enumerate(g.pg, NULL, 1 << 20, &cs, &e1) == ST_USAGE && cs == NULL);
    Err e2 = {0};
    CHECK(cand_enumerate(g.pg, NULL, 0, &cs, &e2) == ST_OK && cs && cs->n == 1);
    cand_set_free(cs);
    cand_set_free(NULL);
    g_free(&g);
}

int main(int argc, char **argv) {
    seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (repeat with: unit_candidates %llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    RUN(test_reentry_never);
    RUN(test_diamond);
    RUN(test_long_skip);
    RUN(test_linear_rules);
    RUN(test_opaque_alone);
    RUN(test_reductions_agree);
    RUN(test_max_prims);
    RUN(test_max_inputs);
    RUN(test_sink_budget);
    RUN(test_random_vs_brute_force);
    RUN(test_signature_blocks);
    RUN(test_canonical_inputs);
    RUN(test_signature_params);
    RUN(test_segments);
    RUN(test_usage_errors);
    return CHECK_DONE();
}
