// Plans and the runtime session without a C compiler: every kernel runs on the primitive
// interpreter (PLAN_INTERP / PLAN_OPAQUE), except hand-written PLAN_GENERATED kernels that live
// in this binary and are found through the session's resolver (one reads its constant reordered
// by its NAME_prepack: in place when it is the constant's only reader, a private copy otherwise,
// or where the copy is larger than the constant). Each plan is checked against an
// independent brute force (no two arena tensors live at the same launch overlap, liveness covers
// every read and write, peak <= sum), run through the session against prim_interp_run (bit for
// bit, with aligned and unaligned caller buffers, poisoned before the run), and serialised: the
// round trip reproduces it, every truncation and byte flip is refused or harmless, a plan read
// against another graph is refused.
//
// usage: unit_plan [MODELS_DIR [SEED]]   MODELS_DIR: every MODELS_DIR/*/model.onnx
//        (tests/models/gen_models.py) planned with every kernel on the interpreter, run through
//        the session and through a compiled artefact (no shared object), compared with
//        prim_interp_run; prints each model's arena peak against the sum of its intermediates.
#include "base/file.h"
#include "candidates/candidates.h"
#include "../check.h"
#include "../plan_cases.h"
#include "prim/prim_build.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "orchestrate/cost_model.h"
#include "orchestrate/orchestrate.h"
#include "plan/artifact.h"
#include "plan/plan.h"
#include "runtime/npy.h"
#include "interp/prim_interp.h"
#include "runtime/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Counting allocations (session_run must make none for generated kernels and copies): malloc
// and friends are interposed here and forward to glibc's. Not under AddressSanitizer, which
// interposes them itself.
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCATIONS 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static volatile int alloc_counting, alloc_count;
void *malloc(size_t n) {
    alloc_count += alloc_counting;
    return __libc_malloc(n);
}
void *calloc(size_t k, size_t n) {
    alloc_count += alloc_counting;
    return __libc_calloc(k, n);
}
void *realloc(void *p, size_t n) {
    alloc_count += alloc_counting;
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n) {
    alloc_count += alloc_counting;
    return __libc_memalign(a, n);
}
void free(void *p) { __libc_free(p); }
#endif

// ---- the pipeline: candidates, costs, selection, plan ----

typedef struct Planned {
    CandidateSet *cs;
    Selection sel;
    PlanKernelSpec *spec;
    Plan *plan;
} Planned;

static void planned_free(Planned *P) {
    plan_free(P->plan);
    free(P->spec);
    selection_free(&P->sel);
    cand_set_free(P->cs);
    memset(P, 0, sizeof *P);
}

// Singleton candidates only (the interpreter runs one primitive per launch); costs from the
// cpu model, or random when cost_seed is non-zero (an opaque node with several outputs then
// picks either of its singletons).
static int plan_interp(const PrimGraph *pg, uint64_t cost_seed, Planned *P) {
    memset(P, 0, sizeof *P);
    Err e = {0};
    CandRules rules = cand_rules_default();
    rules.max_prims = 1;
    int rc = cand_enumerate(pg, &rules, 0, &P->cs, &e);
    CHECK_MSG(rc == ST_OK, "cand_enumerate: %s", e.msg);
    if (rc)
        return rc;
    if (cost_seed) {
        uint64_t saved = rng_state;
        rng_state = cost_seed;
        for (int i = 0; i < P->cs->n; i++)
            P->cs->c[i].cost = 1e-6 * (1 + 99 * rnd());
        rng_state = saved;
    } else {
        cost_model_fill(P->cs, cost_model_find("cpu"));
    }
    OrchOptions oo = {.time_limit = 5};
    rc = orchestrate(P->cs, &oo, &P->sel, &e);
    CHECK_MSG(rc == ST_OK, "orchestrate: %s", e.msg);
    if (rc)
        return rc;
    P->spec = calloc((size_t)P->sel.n + 1, sizeof(PlanKernelSpec));
    for (int k = 0; k < P->sel.n; k++) {
        const Candidate *c = &P->cs->c[P->sel.kernels[k]];
        bool opaque = pg->prims[c->prims[0]]->kind == PRIM_OPAQUE;
        P->spec[k] = (PlanKernelSpec){opaque ? PLAN_OPAQUE : PLAN_INTERP, NULL};
    }
    rc = plan_build(pg, P->cs, &P->sel, P->spec, &P->plan, &e);
    CHECK_MSG(rc == ST_OK, "plan_build: %s", e.msg);
    return rc;
}

// ---- checks on a plan ----

// Brute force, from the launches alone: liveness covers every access, live tensors never
// overlap, offsets aligned and inside the arena, peak <= sum, every read was written before.
static void check_arena(const PrimGraph *pg, const Plan *p) {
    CHECK(p->n_tensors == pg->n_tensors);
    bool *written = calloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < p->n_launches; k++) {
        const PlanLaunch *L = &p->launches[k];
        for (int j = 0; j < L->n_in; j++) {
            int t = L->in[j];
            if (t < 0)
                continue;
            const PlanTensor *T = &p->tensors[t];
            CHECK_MSG(T->place != PLACE_NONE, "launch %d reads '%s', which has no place", k,
                      pg->tensors[t]->name);
            if (pg->tensors[t]->kind == TK_VALUE)
                CHECK_MSG(written[t], "launch %d reads '%s' before it is written", k,
                          pg->tensors[t]->name);
            if (T->place == PLACE_ARENA)
                CHECK_MSG(T->first <= k && k <= T->last, "'%s' read at %d, live %d..%d",
                          pg->tensors[t]->name, k, T->first, T->last);
        }
        for (int j = 0; j < L->n_out; j++) {
            int t = L->out[j];
            if (t < 0)
                continue;
            written[t] = true;
            const PlanTensor *T = &p->tensors[t];
            CHECK(T->place == PLACE_ARENA || T->place == PLACE_OUTPUT);
            if (T->place == PLACE_ARENA)
                CHECK_MSG(T->first <= k && k <= T->last, "'%s' written at %d, live %d..%d",
                          pg->tensors[t]->name, k, T->first, T->last);
        }
    }
    for (int i = 0; i < pg->n_outputs; i++) {
        int t = pg->outputs[i];
        CHECK(pg->tensors[t]->kind != TK_VALUE || written[t]);
    }
    int64_t sum = 0;
    for (int a = 0; a < p->n_tensors; a++) {
        const PlanTensor *A = &p->tensors[a];
        CHECK(A->bytes == (int64_t)tensor_nbytes(pg->tensors[a]));
        if (A->place == PLACE_CONST || A->place == PLACE_ARENA)
            CHECK(A->offset % PLAN_ALIGN == 0 && A->offset >= 0);
        if (A->place == PLACE_CONST)
            CHECK(A->offset + A->bytes <= p->const_bytes);
        if (A->place != PLACE_ARENA)
            continue;
        sum += (A->bytes + 63) / 64 * 64;
        CHECK(A->offset + A->bytes <= p->arena_bytes);
        for (int b = a + 1; b < p->n_tensors; b++) {
            const PlanTensor *B = &p->tensors[b];
            if (B->place != PLACE_ARENA || !A->bytes || !B->bytes)
                continue;
            bool live_together = A->first <= B->last && B->first <= A->last;
            bool overlap = A->offset < B->offset + B->bytes && B->offset < A->offset + A->bytes;
            CHECK_MSG(!(live_together && overlap),
                      "'%s' [%lld, +%lld) live %d..%d overlaps '%s' [%lld, +%lld) live %d..%d",
                      pg->tensors[a]->name, (long long)A->offset, (long long)A->bytes, A->first,
                      A->last, pg->tensors[b]->name, (long long)B->offset, (long long)B->bytes,
                      B->first, B->last);
        }
    }
    PlanStats st;
    plan_stats(p, &st);
    CHECK(st.intermediate_bytes == sum);
    CHECK_MSG(st.arena_bytes <= st.intermediate_bytes, "peak %lld > sum %lld",
              (long long)st.arena_bytes, (long long)st.intermediate_bytes);
    CHECK(st.live_peak_bytes <= st.arena_bytes);
    CHECK(st.launches == p->n_launches &&
          st.generated + st.interp + st.opaque + st.copies == st.launches);
    free(written);
}

// Two plans alike in everything but the predicted times (and the symbols' names unless
// with_symbols).
static bool plans_equal_sym(const Plan *a, const Plan *b, bool with_symbols) {
    if (a->n_tensors != b->n_tensors || a->n_launches != b->n_launches ||
        a->n_kernels != b->n_kernels || a->arena_bytes != b->arena_bytes ||
        a->const_bytes != b->const_bytes || a->const_hash != b->const_hash)
        return false;
    for (int i = 0; i < a->n_launches; i++) {
        const PlanLaunch *x = &a->launches[i], *y = &b->launches[i];
        if (x->kind != y->kind || x->signature != y->signature || x->sink != y->sink ||
            x->copy_to != y->copy_to || x->n_prims != y->n_prims || x->n_in != y->n_in ||
            x->n_out != y->n_out || x->n_nodes != y->n_nodes ||
            (x->symbol || y->symbol) != (x->symbol && y->symbol) ||
            (with_symbols && x->symbol && strcmp(x->symbol, y->symbol)))
            return false;
        if ((x->n_prims && memcmp(x->prims, y->prims, sizeof(int) * (size_t)x->n_prims)) ||
            (x->n_in && memcmp(x->in, y->in, sizeof(int) * (size_t)x->n_in)) ||
            (x->n_out && memcmp(x->out, y->out, sizeof(int) * (size_t)x->n_out)))
            return false;
        for (int j = 0; j < x->n_nodes; j++)
            if (strcmp(x->nodes[j], y->nodes[j]))
                return false;
    }
    return memcmp(a->tensors, b->tensors, sizeof(PlanTensor) * (size_t)a->n_tensors) == 0;
}

static bool plans_equal(const Plan *a, const Plan *b) {
    return plans_equal_sym(a, b, true);
}

// plan_write → plan_read gives the same plan and the same bytes; truncations are refused; byte
// flips are refused or leave an equal plan (a flipped predicted time is only a number, a flipped
// symbol that is still an identifier is refused by the session when it is not in the object).
static void check_serialisation(const PrimGraph *pg, const Plan *p, int flips) {
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    Err e = {0};
    CHECK(plan_write(p, &buf, &len, &e) == ST_OK);
    Plan *q = NULL;
    int rc = plan_read(buf, len, pg, "t.orch", NULL, 0, &q, &e);
    CHECK_MSG(rc == ST_OK, "plan_read: %s", e.msg);
    if (q) {
        CHECK(plans_equal(p, q));
        for (int i = 0; i < p->n_launches; i++)
            CHECK(p->launches[i].predicted == q->launches[i].predicted);
        CHECK(plan_write(q, &buf2, &len2, &e) == ST_OK);
        CHECK(len2 == len && memcmp(buf, buf2, len) == 0);
        free(buf2);
        plan_free(q);
    }
    int step = len > 400 ? (int)(len / 200) : 1;
    for (size_t cut = 0; cut < len; cut += (size_t)(rnd_int(step) + 1)) {
        e = (Err){0};
        q = NULL;
        CHECK_MSG(plan_read(buf, cut, pg, "t.orch", NULL, 0, &q, &e) == ST_INVALID && !q,
                  "a plan cut to %zu of %zu bytes was accepted", cut, len);
        CHECK(strstr(e.msg, "t.orch") != NULL);
    }
    for (int f = 0; f < flips && len; f++) {
        size_t at = (size_t)rnd_int((int)len);
        uint8_t saved = buf[at];
        buf[at] ^= (uint8_t)(1u << rnd_int(8));
        e = (Err){0};
        q = NULL;
        if (plan_read(buf, len, pg, "t.orch", NULL, 0, &q, &e) == ST_OK) {
            CHECK_MSG(plans_equal_sym(p, q, false), "flipping byte %zu gave another plan", at);
            plan_free(q);
        } else {
            CHECK(!q && strstr(e.msg, "t.orch") != NULL);
        }
        buf[at] = saved;
    }
    free(buf);
}

static void *aligned_poisoned(size_t n) {
    void *p = aligned_alloc(64, (n + 64) / 64 * 64 + 64);
    memset(p, 0xff, (n + 64) / 64 * 64 + 64);
    return p;
}

// Runs the session three times (aligned buffers, unaligned ones, with profiling) and compares
// every output with prim_interp_run bit for bit.
static void check_session(const PrimGraph *pg, const Plan *p, const void *const *in,
                          SessionResolveFn resolve, void *ctx) {
    Err e = {0};
    void **ref = calloc((size_t)pg->n_outputs + 1, sizeof(void *));
    int rc = prim_interp_run(pg, in, ref, &e);
    CHECK_MSG(rc == ST_OK, "prim_interp_run: %s", e.msg);
    Session *s = NULL;
    if (rc == ST_OK) {
        rc = session_create_from_plan(pg, p, resolve, ctx, NULL, &s, &e);
        CHECK_MSG(rc == ST_OK, "session_create_from_plan: %s", e.msg);
    }
    int ni = pg->n_inputs, no = pg->n_outputs;
    void **bufs = calloc((size_t)no + 1, sizeof(void *));
    void **outs = calloc((size_t)no + 1, sizeof(void *));
    const void **ins = calloc((size_t)ni + 1, sizeof(void *));
    void **in_copies = calloc((size_t)ni + 1, sizeof(void *));
    for (int run = 0; run < 3 && rc == ST_OK; run++) {
        int shift = run == 1 ? 4 : 0; // floats stay 4-aligned, buffers are not 64-aligned
        for (int i = 0; i < ni; i++) {
            size_t bytes = tensor_nbytes(pg->tensors[pg->inputs[i]]);
            in_copies[i] = aligned_poisoned(bytes);
            memcpy((char *)in_copies[i] + shift, in[i], bytes);
            ins[i] = (char *)in_copies[i] + shift;
        }
        for (int i = 0; i < no; i++) {
            bufs[i] = aligned_poisoned(tensor_nbytes(pg->tensors[pg->outputs[i]]));
            outs[i] = (char *)bufs[i] + shift;
        }
        session_set_profiling(s, run == 2);
        rc = session_run(s, ins, outs, &e);
        CHECK_MSG(rc == ST_OK, "session_run: %s", e.msg);
        for (int i = 0; i < no && rc == ST_OK; i++) {
            const Tensor *t = pg->tensors[pg->outputs[i]];
            CHECK_MSG(memcmp(outs[i], ref[i], tensor_nbytes(t)) == 0,
                      "run %d: output %d '%s' differs from prim_interp_run's", run, i, t->name);
        }
        for (int i = 0; i < ni; i++) { // inputs are never written
            size_t bytes = tensor_nbytes(pg->tensors[pg->inputs[i]]);
            CHECK(memcmp(ins[i], in[i], bytes) == 0);
            free(in_copies[i]);
        }
        for (int i = 0; i < no; i++)
            free(bufs[i]);
    }
    if (rc == ST_OK) {
        const double *times = session_kernel_times(s);
        CHECK(times != NULL && session_num_launches(s) == p->n_launches);
        for (int k = 0; times && k < p->n_launches; k++) {
            CHECK(times[k] >= 0 && times[k] < 10);
            CHECK(session_launch_name(s, k) && session_launch_nodes(s, k));
        }
        CHECK(session_launch_name(s, p->n_launches) == NULL);
        CHECK(session_graph(s) == pg && session_plan(s) == p);
    }
    session_free(s);
    for (int i = 0; i < no; i++)
        free(ref[i]);
    free(ref);
    free(bufs);
    free(outs);
    free(ins);
    free(in_copies);
}

static void check_all(const PrimGraph *pg, const void *const *in, uint64_t cost_seed, int flips) {
    Planned P;
    if (plan_interp(pg, cost_seed, &P) == ST_OK) {
        check_arena(pg, P.plan);
        check_session(pg, P.plan, in, NULL, NULL);
        check_serialisation(pg, P.plan, flips);
    }
    planned_free(&P);
}

static const int64_t d48[] = {4, 8};

// ---- cases ----

// Outputs that are graph inputs, constants, listed twice, and read by later kernels; a graph
// with nothing to compute. Copies fill the extra buffers.
static void outputs_alias(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    int w = tg_const(&g, 2, d48);
    int a = pb_ew1(&g.b, EW_EXP, x);
    int b = pb_ew2(&g.b, EW_MUL, a, w);
    tg_output(&g, b);
    tg_output(&g, x);
    tg_output(&g, a); // also read by b
    tg_output(&g, w);
    tg_output(&g, b); // twice
    tg_output(&g, x); // twice
    Err e = {0};
    CHECK_MSG(prim_graph_verify(g.pg, &e) == ST_OK, "%s", e.msg);
    Planned P;
    if (plan_interp(g.pg, 0, &P) == ST_OK) {
        const Plan *p = P.plan;
        CHECK(p->n_kernels == 2 && p->n_launches == 2 + 4);
        CHECK(p->tensors[b].place == PLACE_OUTPUT && p->tensors[b].index == 0);
        CHECK(p->tensors[a].place == PLACE_OUTPUT && p->tensors[a].index == 2);
        CHECK(p->tensors[x].place == PLACE_INPUT && p->tensors[w].place == PLACE_CONST);
        int copies_to[4] = {-1, -1, -1, -1};
        for (int i = 0; i < 4; i++) {
            CHECK(p->launches[2 + i].kind == PLAN_COPY);
            copies_to[i] = p->launches[2 + i].copy_to;
        }
        CHECK(copies_to[0] == 1 && copies_to[1] == 3 && copies_to[2] == 4 && copies_to[3] == 5);
        PlanStats st;
        plan_stats(p, &st);
        CHECK(st.copies == 4 && st.interp == 2 && st.intermediates == 0 && st.arena_bytes == 0);
        check_arena(g.pg, p);
        check_session(g.pg, p, (const void *const *)g.in, NULL, NULL);
        check_serialisation(g.pg, p, 100);
    }
    planned_free(&P);
    tg_free(&g);
    tg_init(&g); // nothing to compute: only copies
    x = tg_input(&g, 2, d48);
    tg_output(&g, x);
    tg_output(&g, tg_const(&g, 2, d48));
    check_all(g.pg, (const void *const *)g.in, 0, 50);
    tg_free(&g);
}

// A chain where every intermediate dies at once: the arena reuses two slots.
static void chain_reuses_memory(void) {
    TG g;
    tg_init(&g);
    const int64_t d[] = {64, 64};
    int t = tg_input(&g, 2, d);
    for (int i = 0; i < 12; i++)
        t = pb_ew1(&g.b, i % 2 ? EW_TANH : EW_SIGMOID, t);
    tg_output(&g, t);
    Planned P;
    if (plan_interp(g.pg, 0, &P) == ST_OK) {
        PlanStats st;
        plan_stats(P.plan, &st);
        CHECK_MSG(st.intermediates == 11 && st.arena_bytes == 2 * 64 * 64 * 4 &&
                      st.intermediate_bytes == 11 * 64 * 64 * 4,
                  "%d intermediates, arena %lld, sum %lld", st.intermediates,
                  (long long)st.arena_bytes, (long long)st.intermediate_bytes);
        check_arena(g.pg, P.plan);
        check_session(g.pg, P.plan, (const void *const *)g.in, NULL, NULL);
    }
    planned_free(&P);
    tg_free(&g);
}

// Random DAGs of up to 16 primitives over tensors of several shapes: elementwise (with
// broadcast rows), row reductions, matmuls changing the width, transposes; outputs drawn from
// every tensor (inputs, constants, intermediates, repeats).
static void random_dags(void) {
    const int graphs = 150;
    for (int gi = 0; gi < graphs && !check_failed_case; gi++) {
        TG g;
        tg_init(&g);
        int pool[64], n = 0;
        int64_t rows = 1 + rnd_int(9);
        const int64_t widths[] = {1, 3, 8, 16, 33};
        int n_in = 1 + rnd_int(2);
        for (int i = 0; i < n_in; i++) {
            const int64_t d[] = {rows, widths[rnd_int(5)]};
            pool[n++] = tg_input(&g, 2, d);
        }
        int n_prims = 1 + rnd_int(16);
        for (int k = 0; k < n_prims; k++) {
            int a = pool[rnd_int(n)];
            const Tensor *ta = g.pg->tensors[a];
            // a partner of the same shape, or a [rows, 1] column to broadcast
            int b = a;
            for (int tries = 0; tries < 4; tries++) {
                int c = pool[rnd_int(n)];
                const Tensor *tc = g.pg->tensors[c];
                if (tc->rank == 2 && tc->dims[0] == ta->dims[0] &&
                    (tc->dims[1] == ta->dims[1] || tc->dims[1] == 1))
                    b = c;
            }
            switch (rnd_int(6)) {
            case 0:
                pool[n++] =
                    pb_ew1(&g.b, (EwOp[]){EW_EXP, EW_TANH, EW_NEG, EW_SIGMOID}[rnd_int(4)], a);
                break;
            case 1:
                pool[n++] =
                    pb_ew2(&g.b, (EwOp[]){EW_ADD, EW_MUL, EW_SUB, EW_MAX}[rnd_int(4)], a, b);
                break;
            case 2:
                pool[n++] = pb_reduce(&g.b, rnd() < 0.5 ? RED_SUM : RED_MAX, a, 2, true, false);
                break;
            case 3: {
                const int64_t wd[] = {ta->dims[1], widths[rnd_int(5)]};
                pool[n++] = pb_matmul(&g.b, a, tg_const(&g, 2, wd));
                break;
            }
            case 4: {
                int t = pb_transpose(&g.b, a, (const int[]){1, 0});
                pool[n++] = pb_transpose(&g.b, pb_ew2i(&g.b, EW_MUL, t, 2.0), (const int[]){1, 0});
                break;
            }
            default: pool[n++] = pb_ew2i(&g.b, EW_ADD, a, 0.25); break;
            }
        }
        tg_output(&g, pool[n - 1]);
        for (int i = 1, n_out = 1 + rnd_int(4); i < n_out; i++)
            tg_output(&g, pool[rnd_int(n)]);
        if (rnd() < 0.2) {
            const int64_t cd[] = {2, 3};
            tg_output(&g, tg_const(&g, 2, cd));
        }
        Err e = {0};
        CHECK_MSG(prim_graph_verify(g.pg, &e) == ST_OK, "graph %d: %s", gi, e.msg);
        const void *const *in = (const void *const *)g.in;
        check_all(g.pg, in, rnd() < 0.5 ? 0 : rng_state | 1, gi < 20 ? 60 : 5);
        if (check_failed_case)
            printf("  (random graph %d of %d)\n", gi, graphs);
        tg_free(&g);
    }
}

// The arena packing alone on many random interval sets: brute-force overlap check, and the
// peak never above the sum nor below the most bytes live at once.
static void packing_brute_force(void) {
    for (int gi = 0; gi < 40 && !check_failed_case; gi++) {
        // A long chain with skips whose tensors have random widths: many intervals.
        TG g;
        tg_init(&g);
        const int64_t d0[] = {3, 1 + rnd_int(40)};
        int pool[80], n = 0;
        pool[n++] = tg_input(&g, 2, d0);
        for (int k = 0; k < 60; k++) {
            int a = pool[n - 1 - rnd_int(ORCH_MIN(n, 6))];
            const Tensor *ta = g.pg->tensors[a];
            const int64_t wd[] = {ta->dims[1], 1 + rnd_int(60)};
            pool[n++] =
                rnd() < 0.4 ? pb_matmul(&g.b, a, tg_const(&g, 2, wd)) : pb_ew1(&g.b, EW_TANH, a);
        }
        tg_output(&g, pool[n - 1]);
        Planned P;
        if (plan_interp(g.pg, 0, &P) == ST_OK) {
            check_arena(g.pg, P.plan);
            PlanStats st;
            plan_stats(P.plan, &st);
            CHECK_MSG(st.intermediates == P.sel.n - 1, "%d intermediates, %d kernels",
                      st.intermediates, P.sel.n);
            if (gi == 0)
                printf("  60 primitives: arena %lld bytes, live peak %lld, sum %lld\n",
                       (long long)st.arena_bytes, (long long)st.live_peak_bytes,
                       (long long)st.intermediate_bytes);
            if (gi < 4)
                check_session(g.pg, P.plan, (const void *const *)g.in, NULL, NULL);
        }
        planned_free(&P);
        tg_free(&g);
    }
}

// ---- a generated kernel from this binary ----

// (x - w) * 2 for x, w of [4, 8], with the interpreter's arithmetic (float math in double,
// rounded to float after every instruction); in[] follows the candidate's ascending inputs.
static int gen_x_first; // whether in[0] is x
static int gen_calls;

static void gen_sub_mul(const void *const *in, void *out) {
    const float *x = in[gen_x_first ? 0 : 1], *w = in[gen_x_first ? 1 : 0];
    float *y = out;
    for (int i = 0; i < 32; i++) {
        float d = (float)((double)x[i] - (double)w[i]);
        y[i] = (float)((double)d * 2.0);
    }
    gen_calls++;
}

static void *resolve_test(void *ctx, const char *symbol) {
    (void)ctx;
    void *f = NULL;
    CKernelFn fn = gen_sub_mul;
    if (strcmp(symbol, "gen_sub_mul") == 0)
        memcpy(&f, &fn, sizeof f);
    return f;
}

// ---- a generated kernel that reads its constant reordered (target.h: NAME_prepack) ----

// As gen_sub_mul, but w arrives reversed: gen_rev_prepack reverses it, once, at session creation.
static int gen_rev_w; // the position of w in in[]
static int gen_rev_prepacks;
// The copy is larger than w (a transform, as Winograd's weights): 64 floats, w reversed twice
// over, and the kernel reads the second half, past the constant's own bytes.
static bool gen_rev_big;

static void gen_rev(const void *const *in, void *out) {
    const float *x = in[1 - gen_rev_w], *w = (const float *)in[gen_rev_w] + (gen_rev_big ? 32 : 0);
    float *y = out;
    for (int i = 0; i < 32; i++) {
        float d = (float)((double)x[i] - (double)w[31 - i]);
        y[i] = (float)((double)d * 2.0);
    }
}

static int gen_rev_prepack(int input, const void *src, void *dst) {
    if (input != gen_rev_w)
        return 0;
    if (!src) {
        if (dst && gen_rev_big)
            *(int64_t *)dst = 64 * sizeof(float);
        return 1;
    }
    if (dst) {
        for (int i = 0; i < (gen_rev_big ? 64 : 32); i++)
            ((float *)dst)[i] = ((const float *)src)[31 - i % 32];
        gen_rev_prepacks++;
    }
    return 1;
}

static void *resolve_rev(void *ctx, const char *symbol) {
    (void)ctx;
    void *f = NULL;
    CKernelFn fn = gen_rev;
    CPrepackFn pf = gen_rev_prepack;
    char pname[64];
    ckernel_prepack_name("gen_rev", pname, sizeof pname);
    if (strcmp(symbol, "gen_rev") == 0)
        memcpy(&f, &fn, sizeof f);
    else if (strcmp(symbol, pname) == 0)
        memcpy(&f, &pf, sizeof f);
    return f;
}

// y = (x - w) * 2 by gen_rev; w also read by an interpreted add (z = y + w) when `shared`, else
// by nobody else. Alone, w is reordered in place in the constant blob; shared, gen_rev gets a
// private reordered copy and the add the row-major original. Either way the outputs are the
// interpreter's bit for bit; a session that skipped the reorder (or reordered w for the add as
// well) would not be.
static void reordered_constant(bool shared, bool big) {
    gen_rev_big = big;
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    int w = tg_const(&g, 2, d48);
    int y = pb_ew2i(&g.b, EW_MUL, pb_ew2(&g.b, EW_SUB, x, w), 2.0);
    tg_output(&g, y);
    if (shared)
        tg_output(&g, pb_ew2(&g.b, EW_ADD, y, w));
    Err e = {0};
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    CHECK(cand_enumerate(g.pg, &rules, 0, &cs, &e) == ST_OK);
    int fused = -1;
    for (int i = 0; cs && i < cs->n; i++) {
        Candidate *c = &cs->c[i];
        bool want = c->n_prims == 2 && c->output == y;
        c->cost = want ? 1e-9 : c->n_prims == 1 ? 1e-3 : 1.0;
        if (want)
            fused = i;
    }
    CHECK(fused >= 0);
    Selection sel;
    memset(&sel, 0, sizeof sel);
    if (fused >= 0 && orchestrate(cs, NULL, &sel, &e) == ST_OK) {
        CHECK(sel.n == (shared ? 2 : 1) && sel.kernels[0] == fused);
        const Candidate *c = &cs->c[fused];
        gen_rev_w = c->inputs[0] == w ? 0 : 1;
        PlanKernelSpec spec[2] = {{PLAN_GENERATED, "gen_rev"}, {PLAN_INTERP, NULL}};
        Plan *p = NULL;
        CHECK_MSG(plan_build(g.pg, cs, &sel, spec, &p, &e) == ST_OK, "%s", e.msg);
        if (p) {
            gen_rev_prepacks = 0;
            check_session(g.pg, p, (const void *const *)g.in, resolve_rev, NULL);
            CHECK_MSG(gen_rev_prepacks == 1, "%d reorders at session creation", gen_rev_prepacks);
        }
        plan_free(p);
    } else {
        CHECK_MSG(false, "%s", e.msg);
    }
    selection_free(&sel);
    cand_set_free(cs);
    tg_free(&g);
    gen_rev_big = false;
}

static void reordered_constant_in_place(void) {
    reordered_constant(false, false);
}

static void reordered_constant_shared(void) {
    reordered_constant(true, false);
}

// A copy larger than the constant (the size query of target.h): a private copy of that size even
// for the only reader, transformed once; read as the raw constant, the outputs would differ.
static void reordered_constant_larger(void) {
    reordered_constant(false, true);
    reordered_constant(true, true);
}

static void generated_kernel(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    int w = tg_const(&g, 2, d48);
    g.b.origin = "sub_node";
    int d = pb_ew2(&g.b, EW_SUB, x, w);
    g.b.origin = "mul_node";
    int y = pb_ew2i(&g.b, EW_MUL, d, 2.0);
    g.b.origin = "exp_node";
    int z = pb_ew1(&g.b, EW_EXP, y);
    tg_output(&g, z);
    tg_output(&g, y);
    Err e = {0};
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    CHECK(cand_enumerate(g.pg, &rules, 0, &cs, &e) == ST_OK);
    // Make the fused {sub, mul} kernel cheap and everything else dear.
    int fused = -1;
    for (int i = 0; cs && i < cs->n; i++) {
        Candidate *c = &cs->c[i];
        bool want = c->n_prims == 2 && c->output == y;
        c->cost = want ? 1e-9 : c->n_prims == 1 ? 1e-3 : 1.0;
        if (want)
            fused = i;
    }
    CHECK(fused >= 0);
    Selection sel;
    memset(&sel, 0, sizeof sel);
    if (fused >= 0 && orchestrate(cs, NULL, &sel, &e) == ST_OK) {
        CHECK(sel.n == 2 && sel.kernels[0] == fused);
        const Candidate *c = &cs->c[fused];
        CHECK(c->n_inputs == 2);
        gen_x_first = c->inputs[0] == x;
        PlanKernelSpec spec[2] = {{PLAN_GENERATED, "gen_sub_mul"}, {PLAN_INTERP, NULL}};
        Plan *p = NULL;
        CHECK_MSG(plan_build(g.pg, cs, &sel, spec, &p, &e) == ST_OK, "%s", e.msg);
        if (p) {
            const PlanLaunch *L = &p->launches[0];
            CHECK(L->kind == PLAN_GENERATED && strcmp(L->symbol, "gen_sub_mul") == 0);
            CHECK(L->n_nodes == 2 && strcmp(L->nodes[0], "sub_node") == 0 &&
                  strcmp(L->nodes[1], "mul_node") == 0);
            CHECK(L->n_in == 2 && L->in[0] == c->inputs[0] && L->in[1] == c->inputs[1]);
            check_arena(g.pg, p);
            gen_calls = 0;
            check_session(g.pg, p, (const void *const *)g.in, resolve_test, NULL);
            CHECK(gen_calls == 3);
            check_serialisation(g.pg, p, 100);
            Session *s = NULL;
            e = (Err){0};
            CHECK(session_create_from_plan(g.pg, p, NULL, NULL, NULL, &s, &e) == ST_INVALID);
            CHECK_MSG(strstr(e.msg, "no kernel 'gen_sub_mul'") && strstr(e.msg, "sub_node"), "%s",
                      e.msg);
            CHECK(s == NULL);
            // The session's names and provenance, for orch bench's per-kernel table.
            e = (Err){0};
            CHECK_MSG(session_create_from_plan(g.pg, p, resolve_test, NULL, NULL, &s, &e) == ST_OK,
                      "%s", e.msg);
            if (s) {
                CHECK(session_num_launches(s) == 2 && session_num_kernels(s) == 2);
                CHECK(strcmp(session_launch_name(s, 0), "gen_sub_mul") == 0);
                CHECK(strcmp(session_launch_nodes(s, 0), "sub_node, mul_node") == 0);
                char want[64];
                snprintf(want, sizeof want, "interp:%s#%d", prim_kind_name(PRIM_ELEMWISE),
                         g.pg->prims[p->launches[1].sink]->id);
                CHECK_MSG(strcmp(session_launch_name(s, 1), want) == 0, "%s",
                          session_launch_name(s, 1));
                CHECK(strcmp(session_launch_nodes(s, 1), "exp_node") == 0);
                CHECK(session_kernel_times(s) == NULL); // no profiled run yet
            }
            session_free(s);
        }
        plan_free(p);
    } else {
        CHECK_MSG(false, "%s", e.msg);
    }
    selection_free(&sel);
    cand_set_free(cs);
    tg_free(&g);
}

// A plan of generated kernels and copies only: session_run allocates nothing (after a first
// run, which lets OpenMP set itself up), with aligned and with unaligned caller buffers.
static void run_allocates_nothing(void) {
#ifdef COUNT_ALLOCATIONS
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    int w = tg_const(&g, 2, d48);
    int y = pb_ew2i(&g.b, EW_MUL, pb_ew2(&g.b, EW_SUB, x, w), 2.0);
    tg_output(&g, y);
    tg_output(&g, y);
    tg_output(&g, x);
    tg_output(&g, w);
    Err e = {0};
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    CHECK(cand_enumerate(g.pg, &rules, 0, &cs, &e) == ST_OK);
    int fused = -1;
    for (int i = 0; cs && i < cs->n; i++)
        if (cs->c[i].n_prims == 2)
            fused = i;
    CHECK(fused >= 0);
    if (fused >= 0) {
        int order[1] = {fused};
        Selection sel = {.n = 1, .kernels = order};
        PlanKernelSpec spec = {PLAN_GENERATED, "gen_sub_mul"};
        gen_x_first = cs->c[fused].inputs[0] == x;
        Plan *p = NULL;
        CHECK_MSG(plan_build(g.pg, cs, &sel, &spec, &p, &e) == ST_OK, "%s", e.msg);
        Session *s = NULL;
        SessionOptions opt = {.threads = 2};
        if (p && session_create_from_plan(g.pg, p, resolve_test, NULL, &opt, &s, &e) == ST_OK) {
            CHECK(p->n_launches == 4);
            void *bufs[4], *outs[4];
            const void *ins[1];
            void *inbuf = aligned_poisoned(128);
            for (int shift = 0; shift <= 4; shift += 4) {
                memcpy((char *)inbuf + shift, g.in[0], 128);
                ins[0] = (char *)inbuf + shift;
                for (int i = 0; i < 4; i++) {
                    bufs[i] = aligned_poisoned(128);
                    outs[i] = (char *)bufs[i] + shift;
                }
                CHECK(session_run(s, ins, outs, &e) == ST_OK);
                session_set_profiling(s, shift != 0);
                alloc_count = 0;
                alloc_counting = 1;
                int rc = session_run(s, ins, outs, &e);
                alloc_counting = 0;
                CHECK_MSG(rc == ST_OK, "%s", e.msg);
                CHECK_MSG(alloc_count == 0, "%d allocations in session_run (buffers shifted by %d)",
                          alloc_count, shift);
                CHECK(memcmp(outs[1], outs[0], 128) == 0 && memcmp(outs[2], g.in[0], 128) == 0);
                CHECK(memcmp(outs[3], g.pg->tensors[w]->data, 128) == 0);
                for (int i = 0; i < 4; i++)
                    free(bufs[i]);
            }
            free(inbuf);
            // The counter itself works: the primitive interpreter allocates.
            void *ref[4] = {NULL};
            alloc_count = 0;
            alloc_counting = 1;
            CHECK(prim_interp_run(g.pg, (const void *const *)g.in, ref, &e) == ST_OK);
            alloc_counting = 0;
            CHECK(alloc_count > 0);
            for (int i = 0; i < 4; i++)
                free(ref[i]);
        } else {
            CHECK_MSG(false, "%s", e.msg);
        }
        session_free(s);
        plan_free(p);
    }
    cand_set_free(cs);
    tg_free(&g);
#else
    printf("  skipped: allocations are not counted under AddressSanitizer\n");
#endif
}

// Specs and selections that cannot be planned are refused with the kernel named.
static void plan_errors(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    g.b.origin = "first";
    int a = pb_ew1(&g.b, EW_EXP, x);
    g.b.origin = "second";
    int b = pb_ew2(&g.b, EW_MUL, a, x);
    tg_output(&g, b);
    Err e = {0};
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    CHECK(cand_enumerate(g.pg, &rules, 0, &cs, &e) == ST_OK);
    int ca = -1, cb = -1, cab = -1;
    for (int i = 0; cs && i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        if (c->n_prims == 1 && c->output == a)
            ca = i;
        if (c->n_prims == 1 && c->output == b)
            cb = i;
        if (c->n_prims == 2)
            cab = i;
    }
    CHECK(ca >= 0 && cb >= 0 && cab >= 0);
    if (ca >= 0 && cb >= 0 && cab >= 0) {
        Plan *p = NULL;
        int order[2] = {cb, ca};
        Selection sel = {.n = 2, .kernels = order};
        PlanKernelSpec spec[2] = {{PLAN_INTERP, NULL}, {PLAN_INTERP, NULL}};
        CHECK(plan_build(g.pg, cs, &sel, spec, &p, &e) == ST_INVALID && !p);
        CHECK_MSG(strstr(e.msg, "before any kernel writes it"), "%s", e.msg);
        e = (Err){0};
        sel.n = 1; // b never written... a only
        order[0] = ca;
        CHECK(plan_build(g.pg, cs, &sel, spec, &p, &e) == ST_INVALID && !p);
        CHECK_MSG(strstr(e.msg, "is not written by any kernel"), "%s", e.msg);
        e = (Err){0};
        order[0] = cab; // two primitives on the interpreter
        CHECK(plan_build(g.pg, cs, &sel, spec, &p, &e) == ST_INVALID && !p);
        CHECK_MSG(strstr(e.msg, "runs on the interpreter") && strstr(e.msg, "second"), "%s", e.msg);
        e = (Err){0};
        PlanKernelSpec bad_sym = {PLAN_GENERATED, "not an identifier"};
        CHECK(plan_build(g.pg, cs, &sel, &bad_sym, &p, &e) == ST_INVALID && !p);
        CHECK_MSG(strstr(e.msg, "not a C identifier"), "%s", e.msg);
        e = (Err){0};
        PlanKernelSpec opq = {PLAN_OPAQUE, NULL};
        CHECK(plan_build(g.pg, cs, &sel, &opq, &p, &e) == ST_INVALID && !p);
        CHECK_MSG(strstr(e.msg, "opaque"), "%s", e.msg);
        e = (Err){0};
        PlanKernelSpec gen = {PLAN_GENERATED, "k"};
        CHECK_MSG(plan_build(g.pg, cs, &sel, &gen, &p, &e) == ST_OK, "%s", e.msg);
        // Read against another graph: refused, with the reason.
        if (p) {
            uint8_t *buf = NULL;
            size_t len = 0;
            CHECK(plan_write(p, &buf, &len, &e) == ST_OK);
            TG h;
            tg_init(&h);
            int hx = tg_input(&h, 2, d48);
            tg_output(&h, pb_ew1(&h.b, EW_EXP, pb_ew1(&h.b, EW_TANH, hx)));
            Plan *q = NULL;
            e = (Err){0};
            CHECK(plan_read(buf, len, h.pg, "other.orch", NULL, 0, &q, &e) == ST_INVALID && !q);
            CHECK_MSG(strstr(e.msg, "other.orch") && strstr(e.msg, "different orch build"), "%s",
                      e.msg);
            tg_free(&h);
            // Same tensor count, other structure: a graph of tanh instead of exp.
            tg_init(&h);
            hx = tg_input(&h, 2, d48);
            tg_output(&h, pb_ew2(&h.b, EW_MUL, pb_ew1(&h.b, EW_TANH, hx), hx));
            e = (Err){0};
            CHECK(plan_read(buf, len, h.pg, "other.orch", NULL, 0, &q, &e) == ST_INVALID && !q);
            CHECK_MSG(strstr(e.msg, "signature"), "%s", e.msg);
            tg_free(&h);
            free(buf);
        }
        plan_free(p);
    }
    cand_set_free(cs);
    tg_free(&g);
}

// ---- ONNX models through fission (opaque nodes included) ----

static void add_weight(MB *b, const char *name, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *w = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)((rnd() - 0.5) * 0.5);
    mb_init(b, mb_raw(b, name, 1, rank, dims, w, sizeof(float) * (size_t)n));
    free(w);
}

static void model_check(MB *b) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    Err e = {0};
    FissionOptions fo = {0};
    int rc = onnx_load_memory(buf, len, "plan.onnx", NULL, NULL, &g, &e);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(g, NULL, &e);
    if (rc == ST_OK)
        rc = fission_run(g, &fo, &pg, NULL, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(pg, NULL, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK) {
        void **in = calloc((size_t)pg->n_inputs + 1, sizeof(void *));
        for (int i = 0; i < pg->n_inputs; i++) {
            const Tensor *t = pg->tensors[pg->inputs[i]];
            in[i] = malloc(tensor_nbytes(t) + 1);
            fill(t, in[i]);
        }
        Planned P;
        for (int r = 0; r < 3; r++) {
            if (plan_interp(pg, r ? rng_state | 1 : 0, &P) == ST_OK) {
                check_arena(pg, P.plan);
                check_session(pg, P.plan, (const void *const *)in, NULL, NULL);
                check_serialisation(pg, P.plan, 30);
                PlanStats st;
                plan_stats(P.plan, &st);
                if (r == 0)
                    printf("  %d launches (%d opaque), arena %lld bytes of %lld, constants %lld\n",
                           st.launches, st.opaque, (long long)st.arena_bytes,
                           (long long)st.intermediate_bytes, (long long)st.const_bytes);
                CHECK(st.opaque >= 1);
            }
            planned_free(&P);
        }
        for (int i = 0; i < pg->n_inputs; i++)
            free(in[i]);
        free(in);
    }
    prim_graph_free(pg);
    graph_free(g);
    free(buf);
}

// Conv, ReLU, MaxPool (gathered windows and a max), TopK (opaque, two outputs), Gemm.
static void cnn_model(void) {
    const int64_t xd[] = {2, 3, 10, 10}, w1d[] = {6, 3, 3, 3}, b1d[] = {6}, k2[] = {2, 2},
                  pads1[] = {1, 1, 1, 1}, fcd[] = {6, 5}, fbd[] = {5}, kd[] = {1};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 4, xd);
    add_weight(b, "w1", 4, w1d);
    add_weight(b, "b1", 1, b1d);
    add_weight(b, "fc", 2, fcd);
    add_weight(b, "fb", 1, fbd);
    const int64_t kval[] = {3};
    mb_init(b, mb_raw(b, "k", 7, 1, kd, kval, sizeof kval));
    mb_node(b, "Conv", "conv1", "x,w1,b1", "c1", mb_attr_ints(b, "pads", 4, pads1), NULL);
    mb_node(b, "Relu", "relu1", "c1", "r1", NULL);
    mb_node(b, "MaxPool", "pool", "r1", "p1", mb_attr_ints(b, "kernel_shape", 2, k2),
            mb_attr_ints(b, "strides", 2, k2), NULL);
    mb_node(b, "TopK", "topk", "p1,k", "tv,ti", mb_attr_i(b, "axis", 1), NULL);
    mb_node(b, "Cast", "cast", "ti", "tf", mb_attr_i(b, "to", 1), NULL);
    mb_node(b, "Mul", "mix", "tv,tf", "m", NULL);
    mb_node(b, "GlobalAveragePool", "gap", "p1", "gp", NULL);
    mb_node(b, "Flatten", "flat", "gp", "fl", NULL);
    mb_node(b, "Gemm", "head", "fl,fc,fb", "logits", NULL);
    mb_output(b, "logits");
    mb_output(b, "m");
    mb_output(b, "p1");
    model_check(b);
    mb_free(b);
}

// ---- the generated test models (MODELS_DIR mode) ----

// The artefact path without a compiler: the plan (all on the interpreter) and the model's bytes
// in a file, read back, a session made from it, run on `in`, compared with ref.
static void artefact_run(const char *dir, const Graph *g, const Plan *plan, const void *const *in,
                         void *const *ref) {
    Err e = {0};
    uint8_t *onnx = NULL, *pbuf = NULL;
    size_t onnx_size = 0, plen = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if (file_read_all(path, (int64_t)1 << 32, &onnx, &onnx_size, &e) != ST_OK ||
        plan_write(plan, &pbuf, &plen, &e) != ST_OK) {
        CHECK_MSG(false, "%s", e.msg);
        return;
    }
    ArtifactHeader h;
    memset(&h, 0, sizeof h);
    snprintf(h.target, sizeof h.target, "cpu");
    snprintf(h.fingerprint, sizeof h.fingerprint, "test machine");
    snprintf(h.orch_version, sizeof h.orch_version, "test");
    h.model_hash = artifact_hash(onnx, onnx_size);
    h.kernels = plan->n_kernels;
    // Every input's shape, as the compile driver records them.
    size_t at = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        char dims[256];
        at +=
            (size_t)snprintf(h.input_shapes + at, sizeof h.input_shapes - at, "%s%s:%s",
                             i ? "," : "", t->name, shape_str(t->dims, t->rank, dims, sizeof dims));
    }
    const char *tmp = getenv("TMPDIR");
    char apath[4096];
    snprintf(apath, sizeof apath, "%s/unit_plan_%d.orch", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    int rc = artifact_write(apath, &h, onnx, onnx_size, pbuf, plen, NULL, 0, &e);
    ArtifactContents a;
    memset(&a, 0, sizeof a);
    if (rc == ST_OK)
        rc = artifact_read(apath, &a, &e);
    unlink(apath);
    HwInfo hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.target, sizeof hw.target, "cpu");
    snprintf(hw.fingerprint, sizeof hw.fingerprint, "test machine");
    Session *s = NULL;
    if (rc == ST_OK)
        rc = session_create(&a, &hw, NULL, &s, &e);
    if (rc && strstr(e.msg, "external data")) {
        printf("  artefact: skipped (the model keeps its weights in external data)\n");
    } else {
        CHECK_MSG(rc == ST_OK, "artefact: %s", e.msg);
        const PrimGraph *pg = s ? session_graph(s) : NULL;
        void **outs = calloc(pg ? (size_t)pg->n_outputs + 1 : 1, sizeof(void *));
        for (int i = 0; pg && i < pg->n_outputs; i++) {
            size_t bytes = tensor_nbytes(pg->tensors[pg->outputs[i]]);
            outs[i] = malloc(bytes + 1);
            memset(outs[i], 0xff, bytes + 1);
        }
        if (s && (rc = session_run(s, in, outs, &e)) != ST_OK)
            CHECK_MSG(false, "artefact run: %s", e.msg);
        for (int i = 0; pg && rc == ST_OK && i < pg->n_outputs; i++)
            CHECK_MSG(memcmp(outs[i], ref[i], tensor_nbytes(pg->tensors[pg->outputs[i]])) == 0,
                      "artefact: output '%s' differs", pg->tensors[pg->outputs[i]]->name);
        for (int i = 0; pg && i < pg->n_outputs; i++)
            free(outs[i]);
        free(outs);
    }
    session_free(s);
    artifact_contents_free(&a);
    free(onnx);
    free(pbuf);
}

static void model_dir(const char *dir) {
    Err e = {0};
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    FissionOptions fo = {0};
    int rc = model_dir_load(dir, &g, &e);
    if (rc == ST_OK) {
        rc = fission_run(g, &fo, &pg, NULL, &e);
        if (rc == ST_OK)
            rc = fission_cleanup(pg, NULL, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
    }
    HostTensor files[32];
    int nf = 0;
    void **in = rc == ST_OK ? model_dir_inputs(dir, g, files, &nf) : NULL;
    Planned P;
    memset(&P, 0, sizeof P);
    if (rc == ST_OK && !check_failed_case && plan_interp(pg, 0, &P) == ST_OK) {
        PlanStats st;
        plan_stats(P.plan, &st);
        printf("  %d launches (%d opaque, %d copies), arena %lld bytes (live peak %lld) for %d "
               "intermediates of %lld bytes, constants %lld bytes\n",
               st.launches, st.opaque, st.copies, (long long)st.arena_bytes,
               (long long)st.live_peak_bytes, st.intermediates, (long long)st.intermediate_bytes,
               (long long)st.const_bytes);
        check_arena(pg, P.plan);
        check_session(pg, P.plan, (const void *const *)in, NULL, NULL);
        check_serialisation(pg, P.plan, 20);
        void **ref = calloc((size_t)pg->n_outputs + 1, sizeof(void *));
        if (prim_interp_run(pg, (const void *const *)in, ref, &e) == ST_OK)
            artefact_run(dir, g, P.plan, (const void *const *)in, ref);
        for (int i = 0; i < pg->n_outputs; i++)
            free(ref[i]);
        free(ref);
    }
    planned_free(&P);
    for (int i = 0; i < nf; i++)
        host_tensor_free(&files[i]);
    free(in);
    prim_graph_free(pg);
    graph_free(g);
}

int main(int argc, char **argv) {
    plan_cases_seed(argc, argv);
    if (argc > 1 && argv[1][0])
        return run_model_dirs(argv[1], model_dir);
    RUN(outputs_alias);
    RUN(chain_reuses_memory);
    RUN(random_dags);
    RUN(packing_brute_force);
    RUN(generated_kernel);
    RUN(reordered_constant_in_place);
    RUN(reordered_constant_larger);
    RUN(reordered_constant_shared);
    RUN(run_allocates_nothing);
    RUN(plan_errors);
    RUN(cnn_model);
    return CHECK_DONE();
}
