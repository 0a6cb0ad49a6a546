// Candidate kernel enumeration (see candidates.h). The graph is split into segments
// (segments.c); in each, every primitive is taken as a sink and the sets of its ancestors that a
// kernel could compute are grown from it, breadth-first (sets reached in fewer steps first).
// Needs: a verified, compacted primitive graph. Guarantees: every primitive has its singleton
// candidate; every other candidate is convex, has one sink (every member reaches it inside the
// set), lies in one segment, passes the rules, and appears once.
//
// Growth. A set S holding the sink v grows by one producer p of a member's input; convexity is
// restored by closing over every primitive on a path from p to v:
//     S' = S ∪ (ancestors*(v) ∩ descendants*(p))
// (reflexive closures over the segment, kept as bitsets). If S is convex, S' is the least convex
// set holding S and p. Every convex single-sink set is reached this way: removing one of its
// sources (a member no member feeds) leaves a smaller convex single-sink set, and adding it back
// is one growth step. A hash set of the sets seen per sink stops repeats.
//
// Pruning keeps this exact: a set the rules reject is not grown (the rules must be monotone: a
// superset of a rejected set is rejected too; the defaults are), and a set with too many inputs
// is grown only while its size leaves room to absorb the excess (each added primitive removes at
// most one external input, its own output). Only SINK_BUDGET is a heuristic cap: in very wide
// fan-in (a concat of many branches) the number of sets is combinatorial, and the search of that
// sink stops after SINK_BUDGET distinct sets, those reached in the fewest growth steps
// (counted in CandStats.truncated_sinks).
#include "candidates_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_PRIMS 8
#define DEFAULT_MAX_INPUTS 6
#define DEFAULT_MAX_SEGMENT 64
#define MAX_SEGMENT 16384 // reachability bitsets take 3 m^2 / 8 bytes for m primitives (100 MB)
#define SINK_BUDGET 4096  // distinct sets explored per sink
#define SEEN_SLOTS 8192   // power of two, at least 2 * SINK_BUDGET

CandRules cand_rules_default(void) {
    return (CandRules){DEFAULT_MAX_PRIMS, DEFAULT_MAX_INPUTS, cand_rules_default_accepts, NULL,
                       false, false};
}

// ---- the default rules (Korch's, plus fused prologues and epilogues around one LINEAR) ----

static bool reads_output_of(const PrimGraph *pg, const Prim *consumer, int producer) {
    for (int j = 0; j < consumer->n_in; j++)
        if (consumer->in[j] >= 0 && pg->tensors[consumer->in[j]]->producer == producer)
            return true;
    return false;
}

static bool same_reduction(const PrimGraph *pg, const Prim *a, const Prim *b) {
    const Tensor *x = pg->tensors[a->in[0]], *y = pg->tensors[b->in[0]];
    if (a->red.axes != b->red.axes || x->rank != y->rank)
        return false;
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] != y->dims[d])
            return false;
    return true;
}

// At most max_prims primitives; OPAQUE only alone; at most one LINEAR, whose operands may come
// through elementwise and layout prologues but not through a reduction (a reduction is an
// epilogue); all reductions reduce the same axes of same-shaped inputs, so they share one loop
// structure (softmax's max and sum, LayerNorm's two means).
bool cand_rules_default_accepts(const CandRules *r, const PrimGraph *pg, const int *prims, int n) {
    if (r && r->max_prims > 0 && n > r->max_prims)
        return false;
    int linear = -1, first_reduce = -1;
    for (int i = 0; i < n; i++) {
        const Prim *p = pg->prims[prims[i]];
        switch (p->kind) {
        case PRIM_OPAQUE:
            if (n > 1)
                return false;
            break;
        case PRIM_LINEAR:
            if (linear >= 0)
                return false;
            linear = i;
            break;
        case PRIM_REDUCE:
            if (first_reduce < 0)
                first_reduce = i;
            else if (!same_reduction(pg, pg->prims[prims[first_reduce]], p))
                return false;
            break;
        default: break;
        }
    }
    if (linear < 0 || first_reduce < 0 || first_reduce > linear)
        return true;
    // feeds[i]: member i reaches the LINEAR member inside the set (members are in topological
    // order, so one backward scan settles it).
    bool small[64], *feeds = n <= 64 ? small : xmalloc(sizeof(bool) * (size_t)n);
    bool ok = true;
    for (int i = linear; i >= 0 && ok; i--) {
        feeds[i] = i == linear;
        for (int j = i + 1; j <= linear && !feeds[i]; j++)
            feeds[i] = feeds[j] && reads_output_of(pg, pg->prims[prims[j]], prims[i]);
        ok = !(feeds[i] && i != linear && pg->prims[prims[i]]->kind == PRIM_REDUCE);
    }
    if (feeds != small)
        free(feeds);
    return ok;
}

// ---- bitsets over a segment's primitives ----

typedef uint64_t Word;

static bool bit(const Word *s, int i) {
    return s[i >> 6] >> (i & 63) & 1;
}
static void set_bit(Word *s, int i) {
    s[i >> 6] |= (Word)1 << (i & 63);
}

static int popcount(const Word *s, int W) {
    int c = 0;
    for (int w = 0; w < W; w++)
        c += __builtin_popcountll(s[w]);
    return c;
}

// Next set bit at or after i, or -1.
static int next_bit(const Word *s, int W, int i) {
    for (int w = i >> 6; w < W; w++) {
        Word x = s[w];
        if (w == i >> 6)
            x &= ~(Word)0 << (i & 63);
        if (x)
            return w * 64 + __builtin_ctzll(x);
    }
    return -1;
}

// ---- enumeration state ----

typedef struct Seg {
    int lo, m, W;     // primitives lo .. lo+m-1 of the graph; bitsets of W words
    Word *anc, *desc; // per local primitive: reflexive ancestors / descendants inside the segment
    Word *pred;       // per local primitive: the primitives writing its inputs
    Word *opaque;     // OPAQUE primitives (never grown into a set)
} Seg;

typedef struct Enum {
    const PrimGraph *pg;
    const CandRules *r;
    CandidateSet *cs;
    const int *producer; // tensor -> primitive writing it (-1: none)
    uint64_t *prim_hash; // per primitive, for signatures
    int max_prims, max_inputs;
    int *members; // scratch: a set's primitives, ascending
    int *ins;     // scratch: a set's external inputs
    Word *tmp;    // scratch bitsets: frontier, grown set
    // The sets seen for the current sink, in discovery order (the BFS queue).
    Word *pool;
    bool *expand; // pool entry still to be grown
    int pool_n;
    int *seen; // open addressing over pool indices + 1 (0: empty)
} Enum;

static uint64_t hash_set(const Word *s, int W) {
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int w = 0; w < W; w++) {
        h ^= s[w];
        h *= 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h;
}

// Adds s to the seen sets unless there; returns its pool index, -1 if it was seen before, -2 if
// it is new but the pool is full (SINK_BUDGET).
static int seen_insert(Enum *E, const Seg *sg, const Word *s) {
    size_t mask = SEEN_SLOTS - 1;
    for (size_t i = hash_set(s, sg->W) & mask;; i = (i + 1) & mask) {
        int k = E->seen[i];
        if (k == 0) {
            if (E->pool_n == SINK_BUDGET)
                return -2;
            int id = E->pool_n++;
            memcpy(E->pool + (size_t)id * (size_t)sg->W, s, sizeof(Word) * (size_t)sg->W);
            E->expand[id] = false;
            E->seen[i] = id + 1;
            return id;
        }
        if (memcmp(E->pool + (size_t)(k - 1) * (size_t)sg->W, s, sizeof(Word) * (size_t)sg->W) == 0)
            return -1;
    }
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// The set's external inputs into E->ins (ascending, constants included); returns their count and
// sets *n_var to the number that are not constants.
static int collect_inputs(Enum *E, const Seg *sg, const Word *s, const int *members, int n,
                          int *n_var) {
    int k = 0;
    *n_var = 0;
    for (int i = 0; i < n; i++) {
        const Prim *p = E->pg->prims[members[i]];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t < 0)
                continue;
            int q = E->producer[t] - sg->lo;
            if (q >= 0 && q < sg->m && bit(s, q))
                continue; // written inside the set
            int a = 0;
            while (a < k && E->ins[a] != t)
                a++;
            if (a < k)
                continue;
            E->ins[k++] = t;
            *n_var += !pg_is_const(E->pg, t);
        }
    }
    qsort(E->ins, (size_t)k, sizeof(int), cmp_int);
    return k;
}

static void emit(Enum *E, const Seg *sg, const Word *s, const int *members, int n, int segment) {
    CandidateSet *cs = E->cs;
    int n_var;
    int n_in = collect_inputs(E, sg, s, members, n, &n_var);
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 1024;
        cs->c = xrealloc(cs->c, sizeof(Candidate) * (size_t)cs->cap);
    }
    Candidate *c = &cs->c[cs->n];
    memset(c, 0, sizeof *c);
    c->id = cs->n++;
    c->n_prims = n;
    c->prims = arena_memdup(cs->arena, members, sizeof(int) * (size_t)n);
    const Prim *sink = E->pg->prims[members[n - 1]];
    c->output = -1;
    for (int j = 0; j < sink->n_out && c->output < 0; j++)
        c->output = sink->out[j];
    // Inputs in the signature's canonical order (first use in its walk), so that candidates with
    // equal signatures pass corresponding tensors in corresponding positions and share a kernel.
    c->inputs = arena_alloc(cs->arena, sizeof(int) * (size_t)(n_in ? n_in : 1));
    int n_ext = 0;
    c->signature = cand_signature_hashed(E->pg, members, n, E->prim_hash, c->inputs, &n_ext);
    ORCH_ASSERT(n_ext == n_in);
    c->n_inputs = n_in;
    c->segment = segment;
}

static int members_of(const Seg *sg, const Word *s, int *members) {
    int n = 0;
    for (int i = next_bit(s, sg->W, 0); i >= 0; i = next_bit(s, sg->W, i + 1))
        members[n++] = sg->lo + i;
    return n;
}

// All candidates with sink v (local index). Returns false when SINK_BUDGET cut the search short.
static bool grow_from(Enum *E, const Seg *sg, int v, int segment) {
    int W = sg->W;
    Word *s0 = E->tmp, *front = E->tmp + W, *grown = E->tmp + 2 * W;
    memset(s0, 0, sizeof(Word) * (size_t)W);
    set_bit(s0, v);
    E->members[0] = sg->lo + v;
    emit(E, sg, s0, E->members, 1, segment); // the singleton, whatever the rules say
    if (bit(sg->opaque, v) || E->max_prims < 2)
        return true;

    const Word *anc_v = sg->anc + (size_t)v * (size_t)W;
    memset(E->seen, 0, sizeof(int) * SEEN_SLOTS);
    E->pool_n = 0;
    E->expand[seen_insert(E, sg, s0)] = true;
    for (int k = 0; k < E->pool_n; k++) {
        if (!E->expand[k])
            continue;
        const Word *s = E->pool + (size_t)k * (size_t)W;
        // The frontier: producers of the members' inputs, outside the set, not opaque.
        memset(front, 0, sizeof(Word) * (size_t)W);
        for (int a = next_bit(s, W, 0); a >= 0; a = next_bit(s, W, a + 1))
            for (int w = 0; w < W; w++)
                front[w] |= sg->pred[(size_t)a * (size_t)W + (size_t)w];
        for (int w = 0; w < W; w++)
            front[w] &= ~s[w] & ~sg->opaque[w];
        for (int p = next_bit(front, W, 0); p >= 0; p = next_bit(front, W, p + 1)) {
            const Word *desc_p = sg->desc + (size_t)p * (size_t)W;
            bool through_opaque = false;
            for (int w = 0; w < W; w++) {
                grown[w] = s[w] | (anc_v[w] & desc_p[w]);
                through_opaque |= (grown[w] & sg->opaque[w]) != 0;
            }
            int n = popcount(grown, W);
            if (through_opaque || n > E->max_prims)
                continue;
            int id = seen_insert(E, sg, grown);
            if (id == -2)
                return false;
            if (id < 0)
                continue;
            members_of(sg, grown, E->members);
            if (E->r->accepts && !E->r->accepts(E->r, E->pg, E->members, n))
                continue;
            int n_var;
            collect_inputs(E, sg, grown, E->members, n, &n_var);
            if (n_var <= E->max_inputs)
                emit(E, sg, grown, E->members, n, segment);
            E->expand[id] = n < E->max_prims && n_var - E->max_inputs <= E->max_prims - n;
        }
    }
    return true;
}

// Reachability bitsets of one segment.
static void seg_build(Seg *sg, const PrimGraph *pg, const int *producer, int lo, int hi) {
    sg->lo = lo;
    sg->m = hi - lo;
    sg->W = (sg->m + 63) / 64;
    size_t W = (size_t)sg->W, m = (size_t)sg->m;
    sg->anc = xcalloc(m * W, sizeof(Word));
    sg->desc = xcalloc(m * W, sizeof(Word));
    sg->pred = xcalloc(m * W, sizeof(Word));
    sg->opaque = xcalloc(W, sizeof(Word));
    for (int i = 0; i < sg->m; i++) {
        const Prim *p = pg->prims[lo + i];
        Word *pred = sg->pred + (size_t)i * W, *anc = sg->anc + (size_t)i * W;
        if (p->kind == PRIM_OPAQUE)
            set_bit(sg->opaque, i);
        for (int j = 0; j < p->n_in; j++) {
            int q = p->in[j] >= 0 ? producer[p->in[j]] - lo : -1;
            if (q < 0 || q >= sg->m)
                continue; // a constant, a graph input, or written in an earlier segment
            ORCH_ASSERT(q < i);
            set_bit(pred, q);
            for (size_t w = 0; w < W; w++)
                anc[w] |= sg->anc[(size_t)q * W + w];
        }
        set_bit(anc, i);
    }
    // Descendants in reverse order: when i is reached, every consumer of i has been.
    for (int i = sg->m - 1; i >= 0; i--) {
        Word *desc = sg->desc + (size_t)i * W;
        set_bit(desc, i);
        const Word *pred = sg->pred + (size_t)i * W;
        for (int q = next_bit(pred, sg->W, 0); q >= 0; q = next_bit(pred, sg->W, q + 1))
            for (size_t w = 0; w < W; w++)
                sg->desc[(size_t)q * W + w] |= desc[w];
    }
}

static void seg_free(Seg *sg) {
    free(sg->anc);
    free(sg->desc);
    free(sg->pred);
    free(sg->opaque);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int cand_enumerate(const PrimGraph *pg, const CandRules *rules, int max_segment, CandidateSet **out,
                   Err *e) {
    *out = NULL;
    double t0 = now_seconds();
    CandRules r = rules ? *rules : cand_rules_default();
    if (r.max_prims < 0 || r.max_inputs < 0 || max_segment < 0 || max_segment > MAX_SEGMENT)
        return err_set(e, ST_USAGE,
                       "candidate enumeration: limits out of range (max_prims %d, max_inputs %d, "
                       "max_segment %d); they must be >= 0 (0: the default), max_segment <= %d",
                       r.max_prims, r.max_inputs, max_segment, MAX_SEGMENT);
    if (r.max_prims == 0)
        r.max_prims = DEFAULT_MAX_PRIMS;
    if (r.max_inputs == 0)
        r.max_inputs = DEFAULT_MAX_INPUTS;
    if (max_segment == 0)
        max_segment = DEFAULT_MAX_SEGMENT;

    int n = pg->n_prims;
    CandidateSet *cs = xcalloc(1, sizeof *cs);
    cs->arena = arena_create();
    cs->pg = pg;
    cs->segment_of_prim = xmalloc(sizeof(int) * (size_t)(n + 1));

    int *producer = xmalloc(sizeof(int) * (size_t)(pg->n_tensors + 1));
    for (int t = 0; t < pg->n_tensors; t++)
        producer[t] = -1;
    int max_in = 1;
    for (int k = 0; k < n; k++) {
        const Prim *p = pg->prims[k];
        ORCH_ASSERT(!p->dead); // callers compact the graph first
        max_in = ORCH_MAX(max_in, p->n_in);
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                producer[p->out[j]] = k;
    }
    cs->n_segments = cand_split(pg, producer, max_segment, cs->segment_of_prim);

    Enum E = {0};
    E.pg = pg;
    E.r = &r;
    E.cs = cs;
    E.producer = producer;
    E.max_prims = r.max_prims;
    E.max_inputs = r.max_inputs;
    E.prim_hash = xmalloc(sizeof(uint64_t) * (size_t)(n + 1));
    for (int k = 0; k < n; k++)
        E.prim_hash[k] = cand_prim_hash(pg, pg->prims[k]);
    int set_cap = ORCH_MIN(r.max_prims, max_segment);
    E.members = xmalloc(sizeof(int) * (size_t)(set_cap + 1));
    E.ins = xmalloc(sizeof(int) * (size_t)set_cap * (size_t)max_in + sizeof(int));
    E.seen = xmalloc(sizeof(int) * SEEN_SLOTS);
    E.expand = xmalloc(sizeof(bool) * SINK_BUDGET);
    int longest = 0;
    for (int k = 0, start = 0; k < n; k++)
        if (k + 1 == n || cs->segment_of_prim[k + 1] != cs->segment_of_prim[k]) {
            longest = ORCH_MAX(longest, k + 1 - start);
            start = k + 1;
        }
    int W_max = (longest + 63) / 64 + 1;
    E.pool = xmalloc(sizeof(Word) * SINK_BUDGET * (size_t)W_max);
    E.tmp = xmalloc(sizeof(Word) * 3 * (size_t)W_max);

    for (int lo = 0, s = 0; lo < n; s++) {
        int hi = lo;
        while (hi < n && cs->segment_of_prim[hi] == s)
            hi++;
        Seg sg;
        seg_build(&sg, pg, producer, lo, hi);
        for (int v = 0; v < sg.m; v++)
            cs->stats.truncated_sinks += !grow_from(&E, &sg, v, s);
        seg_free(&sg);
        lo = hi;
    }
    // Chains of small dense layers, beyond the one-LINEAR rule (mlp_chains.c).
    if (r.mlp_chains)
        cs->stats.mlp_chains = cand_add_mlp_chains(cs, pg, producer, E.prim_hash);
    // Scaled-dot-product attention with its softmax, per query tile (attention.c).
    if (r.attention)
        cs->stats.attention = cand_add_attention(cs, pg, producer, E.prim_hash);

    uint64_t *sig = xmalloc(sizeof(uint64_t) * (size_t)(cs->n + 1));
    for (int i = 0; i < cs->n; i++)
        sig[i] = cs->c[i].signature;
    qsort(sig, (size_t)cs->n, sizeof(uint64_t), cmp_u64);
    for (int i = 0; i < cs->n; i++)
        cs->stats.signatures += i == 0 || sig[i] != sig[i - 1];
    free(sig);

    cs->stats.prims = n;
    cs->stats.candidates = cs->n;
    cs->stats.segments = cs->n_segments;
    cs->stats.max_segment_prims = longest;
    free(producer);
    free(E.prim_hash);
    free(E.members);
    free(E.ins);
    free(E.seen);
    free(E.expand);
    free(E.pool);
    free(E.tmp);
    cs->stats.seconds = now_seconds() - t0;
    *out = cs;
    return ST_OK;
}

void cand_set_free(CandidateSet *cs) {
    if (!cs)
        return;
    arena_free(cs->arena);
    free(cs->c);
    free(cs->segment_of_prim);
    free(cs);
}
