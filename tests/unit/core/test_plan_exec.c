// End-to-end test of orchestration on the primitive interpreter's arithmetic: candidate
// enumeration, the roofline cost model, the BLP, then the selection run kernel by kernel in
// isolation (orchestrate/selection_run.h). Every case checks that the selection's outputs equal
// prim_interp_run's bit for bit, that the kernels come in an executable order, and what the cost
// model computes for kernels whose bytes and FLOPs are known by hand. Besides the cost model's
// estimates, each graph is also planned with random costs (printed seed), which makes the solver
// pick other selections, with recomputation and without.
//
// usage: unit_plan_exec              the cases below
//        unit_plan_exec MODELS_DIR   every MODELS_DIR/*/model.onnx (tests/models/gen_models.py):
//                                    loaded with its args.txt's --input-shapes, run on the inputs
//                                    of its io.txt, planned for the cpu and h100 cost models
#include "candidates/candidates.h"
#include "../check.h"
#include "../plan_cases.h"
#include "prim/prim_build.h"
#include "inspect/dump.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "orchestrate/cost_model.h"
#include "orchestrate/orchestrate.h"
#include "orchestrate/selection_run.h"
#include "runtime/npy.h"
#include "interp/prim_interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- the pipeline under test ----

// Every non-constant, non-input tensor a kernel reads was written by an earlier kernel, and the
// materialised list is the set of the kernels' outputs.
static bool selection_ordered(const PrimGraph *pg, const CandidateSet *cs, const Selection *sel) {
    bool *written = calloc((size_t)pg->n_tensors + 1, 1);
    bool ok = true;
    for (int k = 0; k < sel->n && ok; k++) {
        const Candidate *c = &cs->c[sel->kernels[k]];
        for (int j = 0; j < c->n_inputs; j++)
            if (pg->tensors[c->inputs[j]]->kind == TK_VALUE && !written[c->inputs[j]]) {
                printf("  kernel %d reads '%s' before any kernel writes it\n", k,
                       pg->tensors[c->inputs[j]]->name);
                ok = false;
            }
        written[c->output] = true;
        const Prim *sink = pg->prims[c->prims[c->n_prims - 1]];
        for (int j = 0; sink->kind == PRIM_OPAQUE && j < sink->n_out; j++)
            if (sink->out[j] >= 0)
                written[sink->out[j]] = true; // an opaque kernel writes all its outputs
    }
    for (int i = 0; i < sel->n_materialised && ok; i++)
        ok = written[sel->materialised[i]];
    free(written);
    return ok;
}

// Plans pg (cost model of device d, or random costs from cost_seed when it is non-zero), runs
// the selection and the primitive interpreter on `in`, and compares bit for bit. Returns the
// number of kernels, -1 on a failure (already reported by CHECK).
static int plan_and_compare(const PrimGraph *pg, const void *const *in, const Device *d,
                            uint64_t cost_seed) {
    Err e = {0};
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    int rc = cand_enumerate(pg, &rules, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "cand_enumerate: %s", e.msg);
    if (rc)
        return -1;
    if (cost_seed) {
        uint64_t saved = rng_state;
        rng_state = cost_seed;
        for (int i = 0; i < cs->n; i++)
            cs->c[i].cost = 1e-6 * (1 + 99 * rnd());
        rng_state = saved;
    } else {
        cost_model_fill(cs, d);
    }
    Selection sel;
    memset(&sel, 0, sizeof sel);
    OrchOptions oo = {.time_limit = 5}; // any feasible selection must run exactly
    rc = orchestrate(cs, &oo, &sel, &e);
    CHECK_MSG(rc == ST_OK, "orchestrate: %s", e.msg);
    int kernels = -1;
    if (rc == ST_OK) {
        CHECK(selection_ordered(pg, cs, &sel));
        CHECK_MSG(sel.objective >= sel.bound - 1e-12 && sel.gap >= 0,
                  "objective %g, bound %g, gap %g", sel.objective, sel.bound, sel.gap);
        double sum = 0;
        for (int k = 0; k < sel.n; k++)
            sum += cs->c[sel.kernels[k]].cost;
        CHECK_MSG(fabs(sum - sel.objective) <= 1e-9 * fmax(1, sum),
                  "kernels sum to %g, objective %g", sum, sel.objective);
        void **ref = calloc((size_t)pg->n_outputs + 1, sizeof(void *));
        void **got = calloc((size_t)pg->n_outputs + 1, sizeof(void *));
        rc = prim_interp_run(pg, in, ref, &e);
        CHECK_MSG(rc == ST_OK, "prim_interp_run: %s", e.msg);
        if (rc == ST_OK) {
            rc = selection_run(pg, cs, &sel, in, got, &e);
            CHECK_MSG(rc == ST_OK, "selection_run: %s", e.msg);
        }
        for (int i = 0; rc == ST_OK && i < pg->n_outputs; i++) {
            const Tensor *t = pg->tensors[pg->outputs[i]];
            CHECK_MSG(memcmp(ref[i], got[i], tensor_nbytes(t)) == 0,
                      "output '%s' differs from the primitive interpreter's (%d kernels)", t->name,
                      sel.n);
        }
        for (int i = 0; i < pg->n_outputs; i++) {
            free(ref[i]);
            free(got[i]);
        }
        free(ref);
        free(got);
        if (rc == ST_OK)
            kernels = sel.n;
    }
    selection_free(&sel);
    cand_set_free(cs);
    return kernels;
}

// Plans the graph with the cpu and h100 cost models and two random cost draws; returns the
// kernel count of the cpu plan.
static int tg_check(TG *g) {
    Err e = {0};
    int rc = prim_graph_verify(g->pg, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc)
        return -1;
    const void *const *in = (const void *const *)g->in;
    int k = plan_and_compare(g->pg, in, cost_model_find("cpu"), 0);
    plan_and_compare(g->pg, in, cost_model_find("h100"), 0);
    for (int r = 0; r < 2; r++)
        plan_and_compare(g->pg, in, NULL, rng_state * 7 + (uint64_t)r + 1);
    return k;
}

static const int64_t d48[] = {4, 8};

static void single_prim(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    tg_output(&g, pb_ew1(&g.b, EW_EXP, x));
    CHECK(tg_check(&g) == 1);
    tg_free(&g);
}

// A graph input that is directly an output needs no kernel; the other output needs one.
static void input_is_output(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    tg_output(&g, x);
    tg_output(&g, pb_ew1(&g.b, EW_TANH, x));
    CHECK(tg_check(&g) == 1);
    tg_free(&g);
    tg_init(&g); // nothing to compute at all
    x = tg_input(&g, 2, d48);
    tg_output(&g, x);
    CHECK(tg_check(&g) == 0);
    tg_free(&g);
}

// a = exp(x) is an output and feeds b = a * x: a must be materialised (or recomputed in b's
// kernel, which the cost model may prefer).
static void output_also_intermediate(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    int a = pb_ew1(&g.b, EW_EXP, x);
    int b = pb_ew2(&g.b, EW_MUL, a, x);
    tg_output(&g, b);
    tg_output(&g, a);
    CHECK(tg_check(&g) >= 2);
    tg_free(&g);
}

// x -> exp, tanh -> add -> sum over the last axis -> divide x by it (broadcast).
static void diamond(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    int a = pb_ew1(&g.b, EW_EXP, x), b = pb_ew1(&g.b, EW_TANH, x);
    int c = pb_ew2(&g.b, EW_ADD, a, b);
    int s = pb_reduce(&g.b, RED_SUM, c, 1u << 1, true, false);
    tg_output(&g, pb_ew2(&g.b, EW_DIV, x, s));
    CHECK(tg_check(&g) >= 1);
    tg_free(&g);
}

// x feeds the first and the last primitive of a long chain with a matmul in the middle.
static void long_skip(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    const int64_t wd[] = {8, 8};
    int w = tg_const(&g, 2, wd);
    int t = pb_ew1(&g.b, EW_SIGMOID, x);
    for (int i = 0; i < 3; i++)
        t = pb_ew2i(&g.b, i % 2 ? EW_MUL : EW_ADD, pb_ew1(&g.b, EW_TANH, t), 0.5);
    t = pb_matmul(&g.b, t, w);
    t = pb_ew1(&g.b, EW_RELU, t);
    int p = pb_transpose(&g.b, t, (const int[]){1, 0});
    p = pb_transpose(&g.b, pb_ew1(&g.b, EW_NEG, p), (const int[]){1, 0});
    tg_output(&g, pb_ew2(&g.b, EW_ADD, p, x));
    CHECK(tg_check(&g) >= 1);
    tg_free(&g);
}

// Random DAGs of up to 14 primitives over [4,8] tensors: unary and binary elementwise, row
// reductions broadcast back, matmuls by constants, transposes there and back; outputs drawn from
// every tensor (inputs and intermediates included).
static void random_dags(void) {
    int graphs = 150;
    for (int gi = 0; gi < graphs && !check_failed_case; gi++) {
        TG g;
        tg_init(&g);
        int pool[64], n = 0;
        int n_in = 1 + rnd_int(2);
        for (int i = 0; i < n_in; i++)
            pool[n++] = tg_input(&g, 2, d48);
        int n_prims = 1 + rnd_int(12);
        const int64_t wd[] = {8, 8};
        for (int k = 0; k < n_prims; k++) {
            int a = pool[rnd_int(n)], b = pool[rnd_int(n)];
            switch (rnd_int(6)) {
            case 0:
                pool[n++] =
                    pb_ew1(&g.b, (EwOp[]){EW_EXP, EW_TANH, EW_NEG, EW_SIGMOID}[rnd_int(4)], a);
                break;
            case 1:
                pool[n++] =
                    pb_ew2(&g.b, (EwOp[]){EW_ADD, EW_MUL, EW_SUB, EW_MAX}[rnd_int(4)], a, b);
                break;
            case 2: {
                int s = pb_reduce(&g.b, rnd() < 0.5 ? RED_SUM : RED_MAX, a, 1u << 1, true, false);
                pool[n++] = pb_ew2(&g.b, EW_SUB, b, s);
                break;
            }
            case 3: pool[n++] = pb_matmul(&g.b, a, tg_const(&g, 2, wd)); break;
            case 4: {
                int t = pb_transpose(&g.b, a, (const int[]){1, 0});
                pool[n++] = pb_transpose(&g.b, pb_ew2i(&g.b, EW_MUL, t, 2.0), (const int[]){1, 0});
                break;
            }
            default: pool[n++] = pb_ew2i(&g.b, EW_ADD, a, 0.25); break;
            }
        }
        int n_out = 1 + rnd_int(3);
        tg_output(&g, pool[n - 1]);
        for (int i = 1; i < n_out; i++)
            tg_output(&g, pool[rnd_int(n)]);
        Err e = {0};
        CHECK_MSG(prim_graph_verify(g.pg, &e) == ST_OK, "graph %d: %s", gi, e.msg);
        const void *const *in = (const void *const *)g.in;
        plan_and_compare(g.pg, in, cost_model_find("cpu"), 0);
        plan_and_compare(g.pg, in, NULL, rng_state ^ (uint64_t)gi);
        if (check_failed_case)
            printf("  (random graph %d of %d)\n", gi, graphs);
        tg_free(&g);
    }
}

// Selections that cannot run are reported, not executed on garbage.
static void bad_selections(void) {
    TG g;
    tg_init(&g);
    int x = tg_input(&g, 2, d48);
    const int64_t wd[] = {8, 8};
    int m = pb_matmul(&g.b, x, tg_const(&g, 2, wd));
    int y = pb_matmul(&g.b, pb_ew1(&g.b, EW_RELU, m), tg_const(&g, 2, wd));
    tg_output(&g, y);
    Err e = {0};
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    CHECK(cand_enumerate(g.pg, &rules, 0, &cs, &e) == ST_OK);
    if (!cs) {
        tg_free(&g);
        return;
    }
    // Each matmul is its own kernel (at most one linear primitive per kernel): pick them.
    int mm[2] = {-1, -1};
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        if (c->output == m && c->n_prims == 1)
            mm[0] = i;
        if (c->output == y && (mm[1] < 0 || c->n_prims > cs->c[mm[1]].n_prims))
            mm[1] = i; // the largest: relu fused in
    }
    CHECK(mm[0] >= 0 && mm[1] >= 0);
    if (mm[0] >= 0 && mm[1] >= 0) {
        void *out[1] = {NULL};
        const void *const *in = (const void *const *)g.in;
        int order[2] = {mm[1], mm[0]};
        Selection s = {.n = 2, .kernels = order};
        e = (Err){0};
        CHECK(selection_run(g.pg, cs, &s, in, out, &e) == ST_RUNTIME);
        CHECK_MSG(strstr(e.msg, "not materialised") != NULL, "%s", e.msg);
        CHECK(out[0] == NULL);
        s = (Selection){.n = 1, .kernels = order + 1}; // the output is never written
        e = (Err){0};
        CHECK(selection_run(g.pg, cs, &s, in, out, &e) == ST_RUNTIME);
        CHECK_MSG(strstr(e.msg, "not written") != NULL, "%s", e.msg);
        // A candidate whose input list lost an entry: the kernel must not read around it.
        Candidate *c = &cs->c[mm[1]];
        int saved = c->n_inputs;
        c->n_inputs = 0;
        order[0] = mm[0];
        order[1] = mm[1];
        s = (Selection){.n = 2, .kernels = order};
        e = (Err){0};
        CHECK(selection_run(g.pg, cs, &s, in, out, &e) == ST_RUNTIME);
        CHECK_MSG(strstr(e.msg, "not among the candidate's inputs") != NULL, "%s", e.msg);
        c->n_inputs = saved;
        e = (Err){0};
        CHECK_MSG(selection_run(g.pg, cs, &s, in, out, &e) == ST_OK, "%s", e.msg);
        free(out[0]);
    }
    cand_set_free(cs);
    tg_free(&g);
}

// ---- the dumps of `orch inspect --stage candidates|plan` ----

#define HAS(text, str) CHECK_MSG(strstr(text, str) != NULL, "'%s' not in:\n%s", str, text)

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

// Boxes drawn for primitive k: lines "  p<k>g<kernel> [label=..." (edges start with their source).
static int node_copies(const char *dot, int k) {
    char id[32];
    snprintf(id, sizeof id, "p%dg", k);
    int n = 0;
    for (const char *line = dot; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        const char *p = line + strspn(line, " ");
        if (strncmp(p, id, strlen(id)) != 0)
            continue;
        p += strlen(id) + strspn(p + strlen(id), "0123456789");
        n += strncmp(p, " [label=", 8) == 0;
    }
    return n;
}

// A diamond whose two branches are cheap: with random costs some plans recompute x's exp in both
// branch kernels. The text names the BLP's numbers, every kernel with its nodes, and the dot has
// one cluster per kernel holding a copy of each of its primitives.
static void dumps(void) {
    for (int trial = 0; trial < 20 && !check_failed_case; trial++) {
        TG g;
        tg_init(&g);
        int x = tg_input(&g, 2, d48);
        g.b.origin = "shared_exp";
        int a = pb_ew1(&g.b, EW_EXP, x);
        g.b.origin = "left";
        int l = pb_ew1(&g.b, EW_TANH, a);
        g.b.origin = "right";
        int r = pb_ew1(&g.b, EW_SIGMOID, a);
        g.b.origin = "join";
        tg_output(&g, pb_ew2(&g.b, EW_MUL, l, r));
        tg_output(&g, l);
        Err e = {0};
        CandidateSet *cs = NULL;
        CandRules rules = cand_rules_default();
        CHECK(cand_enumerate(g.pg, &rules, 0, &cs, &e) == ST_OK);
        Selection sel;
        memset(&sel, 0, sizeof sel);
        const Device *d = cost_model_find("h200");
        if (cs) {
            if (trial == 0)
                cost_model_fill(cs, d);
            else
                for (int i = 0; i < cs->n; i++)
                    cs->c[i].cost = 1e-6 * (1 + 9 * rnd());
        }
        if (cs && orchestrate(cs, NULL, &sel, &e) == ST_OK) {
            char *text = NULL, *dot = NULL;
            size_t len = 0, dlen = 0;
            FILE *f = open_memstream(&text, &len);
            cand_set_print(f, cs);
            plan_print(f, cs, &sel, d);
            fclose(f);
            f = open_memstream(&dot, &dlen);
            plan_dot(f, cs, &sel);
            fclose(f);
            char want[128];
            snprintf(want, sizeof want, "4 primitives, %d candidates", cs->n);
            HAS(text, want);
            HAS(text, "plan on h200");
            HAS(text, "BLP: ");
            HAS(text, "optimal");
            HAS(text, "nodes: ");
            HAS(text, "one kernel per primitive: ");
            CHECK(count_of(text, "\nkernel ") == sel.n);
            CHECK_MSG(count_of(dot, "subgraph cluster_") == sel.n + 1, "%d kernels:\n%s", sel.n,
                      dot); // + the legend
            for (int k = 0; k < g.pg->n_prims; k++) {
                int copies = 0;
                for (int i = 0; i < sel.n; i++) {
                    const Candidate *c = &cs->c[sel.kernels[i]];
                    for (int j = 0; j < c->n_prims; j++)
                        copies += c->prims[j] == k;
                }
                CHECK_MSG(node_copies(dot, k) == copies, "primitive %d: %d copies expected:\n%s", k,
                          copies, dot);
            }
            if (trial == 0) {
                HAS(dot, "digraph plan");
                HAS(dot, "kernel 0: ");
            }
            free(text);
            free(dot);
        } else {
            CHECK_MSG(false, "%s", e.msg);
        }
        selection_free(&sel);
        cand_set_free(cs);
        tg_free(&g);
    }
}

// ---- the cost model ----

static Candidate single(int k, int *prims, int *inputs, const PrimGraph *pg) {
    const Prim *p = pg->prims[k];
    prims[0] = k;
    int n = 0;
    for (int j = 0; j < p->n_in; j++)
        inputs[n++] = p->in[j];
    return (Candidate){
        .n_prims = 1, .prims = prims, .output = p->out[0], .n_inputs = n, .inputs = inputs};
}

static void cost_model(void) {
    const Device *h = cost_model_find("H100"), *cpu = cost_model_find("cpu");
    CHECK(h && strcmp(h->name, "h100") == 0 && h->bandwidth == 3.35e12 && h->peak_flops == 67e12);
    CHECK(cost_model_find("h200") && cost_model_find("h200")->bandwidth == 4.8e12);
    CHECK(cost_model_find("tpu") == NULL);
    CHECK(cpu && cpu->peak_flops >= 100e9 && fmod(cpu->peak_flops, 100e9) == 0);
    if (!h || !cpu)
        return;
    TG g;
    tg_init(&g);
    const int64_t ad[] = {8, 16}, bd[] = {16, 32}, xd[] = {1, 3, 8, 8}, wd[] = {4, 3, 3, 3},
                  yd[] = {1, 4, 8, 8}, bigd[] = {256, 1024}, bigw[] = {1024, 1024};
    int a = tg_input(&g, 2, ad), b = tg_const(&g, 2, bd);
    int mm = pb_matmul(&g.b, a, b);
    int x = tg_input(&g, 4, xd), w = tg_const(&g, 4, wd);
    LinearParams lp = {.op = LIN_CONV,
                       .n_spatial = 2,
                       .group = 1,
                       .stride = {1, 1},
                       .dilation = {1, 1},
                       .pad_begin = {1, 1},
                       .pad_end = {1, 1}};
    pb_conv(&g.b, &lp, x, w, yd);
    EwInstr code[2] = {{EW_MUL, DT_FLOAT, {{EWS_INPUT, 0, 0}, {EWS_IMM, 0, 0.5}}},
                       {EW_EXP, DT_FLOAT, {{EWS_INSTR, 0, 0}}}};
    EwProgram prog = {2, code};
    int ew = pb_ew_program(&g.b, 1, &mm, &prog);
    pb_reduce(&g.b, RED_SUM, ew, 1u << 1, false, false);
    pb_transpose(&g.b, mm, (const int[]){1, 0});
    int big = pb_matmul(&g.b, tg_input(&g, 2, bigd), tg_const(&g, 2, bigw));
    (void)big;
    const PrimGraph *pg = g.pg;
    int prims[1], ins[4];
    const double want_flops[] = {
        2.0 * 8 * 32 * 16,      2.0 * 4 * 64 * 3 * 9, 2.0 * 8 * 32, 8.0 * 32, 0,
        2.0 * 256 * 1024 * 1024};
    const double want_bytes[] = {4.0 * (8 * 16 + 16 * 32 + 8 * 32),
                                 4.0 * (3 * 64 + 4 * 27 + 4 * 64),
                                 4.0 * 2 * 8 * 32,
                                 4.0 * (8 * 32 + 8),
                                 4.0 * 2 * 8 * 32,
                                 4.0 * (256 * 1024 + 1024 * 1024 + 256 * 1024)};
    CHECK(pg->n_prims == 6);
    for (int k = 0; k < pg->n_prims && k < 6; k++) {
        Candidate c = single(k, prims, ins, pg);
        CostEstimate est = cost_model_estimate(pg, &c, h);
        CHECK_MSG(est.flops == want_flops[k] && est.bytes == want_bytes[k],
                  "primitive %d: %g FLOPs, %g bytes; expected %g, %g", k, est.flops, est.bytes,
                  want_flops[k], want_bytes[k]);
        double want = fmax(want_bytes[k] / 3.35e12, want_flops[k] / 67e12) + 3e-6;
        CHECK_MSG(fabs(est.seconds - want) <= 1e-15, "primitive %d: %g s, expected %g", k,
                  est.seconds, want);
    }
    // On the H100 (ridge point 20 FLOP/byte) the elementwise program is memory-bound, the big
    // matmul (85 FLOP/byte) compute-bound; the time takes the larger term.
    Candidate c = single(2, prims, ins, pg);
    CostEstimate est_ew = cost_model_estimate(pg, &c, h);
    CHECK(est_ew.seconds == est_ew.bytes / h->bandwidth + h->launch);
    c = single(5, prims, ins, pg);
    CostEstimate est_mm = cost_model_estimate(pg, &c, h);
    CHECK(est_mm.seconds == est_mm.flops / h->peak_flops + h->launch);
    CHECK(cost_model_estimate(pg, &c, cpu).seconds > est_mm.seconds);
    tg_free(&g);
}

// ---- ONNX models through the whole pipeline ----

static Graph *load_folded(MB *b) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    Err e = {0};
    if (onnx_load_memory(buf, len, "plan.onnx", NULL, NULL, &g, &e) == ST_OK &&
        graph_infer_and_fold(g, NULL, &e) != ST_OK) {
        graph_free(g);
        g = NULL;
    }
    CHECK_MSG(g != NULL, "load: %s", e.msg);
    free(buf);
    return g;
}

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

// Fission, clean-up, then plan_and_compare with the cpu and h100 models and a random draw.
static int model_check(Graph *g, void *const *in) {
    PrimGraph *pg = NULL;
    Err e = {0};
    FissionOptions fo = {0};
    FissionStats fst;
    CleanupStats cst;
    int rc = fission_run(g, &fo, &pg, &fst, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(pg, &cst, &e);
    CHECK_MSG(rc == ST_OK, "fission: %s", e.msg);
    int k = -1;
    if (rc == ST_OK) {
        k = plan_and_compare(pg, (const void *const *)in, cost_model_find("cpu"), 0);
        plan_and_compare(pg, (const void *const *)in, cost_model_find("h100"), 0);
        plan_and_compare(pg, (const void *const *)in, NULL, rng_state | 1);
        if (k >= 0)
            printf("  %d primitives, %d kernels (cpu model)\n", pg->n_prims, k);
    }
    prim_graph_free(pg);
    return k;
}

static void **random_inputs(const Graph *g) {
    void **in = calloc((size_t)g->n_inputs + 1, sizeof(void *));
    for (int i = 0; i < g->n_inputs; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        in[i] = malloc(tensor_nbytes(t) + 1);
        fill(t, in[i]);
    }
    return in;
}

static void free_inputs(const Graph *g, void **in) {
    for (int i = 0; g && i < g->n_inputs; i++)
        free(in[i]);
    free(in);
}

// One transformer layer: attention with a mask, residual, LayerNorm, GELU MLP, residual.
static void transformer_layer(void) {
    const int64_t xd[] = {2, 8, 16}, md[] = {2, 1, 8, 8}, wqd[] = {16, 16}, bd[] = {16},
                  w1d[] = {16, 32}, b1d[] = {32}, w2d[] = {32, 16}, shp[] = {4},
                  qshape[] = {2, 8, 2, 8}, perm_h[] = {0, 2, 1, 3}, perm_k[] = {0, 2, 3, 1},
                  flat[] = {3};
    MB *b = mb_new(20); // Gelu
    mb_input(b, "x", 1, 3, xd);
    mb_input(b, "mask", 1, 4, md);
    const char *proj[] = {"q", "k", "v", "o"};
    char wn[16], bn[16], ins[64], out[16];
    for (int i = 0; i < 4; i++) {
        snprintf(wn, sizeof wn, "w%s", proj[i]);
        snprintf(bn, sizeof bn, "b%s", proj[i]);
        add_weight(b, wn, 2, wqd);
        add_weight(b, bn, 1, bd);
    }
    mb_init(b, mb_raw(b, "hshape", 7, 1, shp, qshape, sizeof qshape));
    const int64_t oshape[] = {2, 8, 16};
    mb_init(b, mb_raw(b, "oshape", 7, 1, flat, oshape, sizeof oshape));
    for (int i = 0; i < 3; i++) {
        snprintf(ins, sizeof ins, "x,w%s", proj[i]);
        snprintf(out, sizeof out, "%s_mm", proj[i]);
        mb_node(b, "MatMul", out, ins, out, NULL);
        snprintf(ins, sizeof ins, "%s_mm,b%s", proj[i], proj[i]);
        snprintf(out, sizeof out, "%s_b", proj[i]);
        mb_node(b, "Add", out, ins, out, NULL);
        snprintf(ins, sizeof ins, "%s_b,hshape", proj[i]);
        snprintf(out, sizeof out, "%s_r", proj[i]);
        mb_node(b, "Reshape", out, ins, out, NULL);
        snprintf(ins, sizeof ins, "%s_r", proj[i]);
        snprintf(out, sizeof out, "%s_h", proj[i]);
        mb_node(b, "Transpose", out, ins, out, mb_attr_ints(b, "perm", 4, i == 1 ? perm_k : perm_h),
                NULL);
    }
    float scale = 0.35f;
    const int64_t one[] = {1};
    mb_init(b, mb_raw(b, "scale", 1, 1, one, &scale, 4));
    mb_node(b, "MatMul", "scores", "q_h,k_h", "s", NULL);
    mb_node(b, "Mul", "scaled", "s,scale", "s2", NULL);
    mb_node(b, "Add", "masked", "s2,mask", "s3", NULL);
    mb_node(b, "Softmax", "softmax", "s3", "p", mb_attr_i(b, "axis", -1), NULL);
    mb_node(b, "MatMul", "context", "p,v_h", "c", NULL);
    mb_node(b, "Transpose", "merge_t", "c", "ct", mb_attr_ints(b, "perm", 4, perm_h), NULL);
    mb_node(b, "Reshape", "merge", "ct,oshape", "cm", NULL);
    mb_node(b, "MatMul", "o_mm", "cm,wo", "o", NULL);
    mb_node(b, "Add", "o_b", "o,bo", "ob", NULL);
    mb_node(b, "Add", "residual1", "ob,x", "h", NULL);
    add_weight(b, "ln_g", 1, bd);
    add_weight(b, "ln_b", 1, bd);
    mb_node(b, "LayerNormalization", "ln", "h,ln_g,ln_b", "hn", mb_attr_i(b, "axis", -1), NULL);
    add_weight(b, "w1", 2, w1d);
    add_weight(b, "b1", 1, b1d);
    add_weight(b, "w2", 2, w2d);
    add_weight(b, "b2", 1, bd);
    mb_node(b, "MatMul", "fc1", "hn,w1", "f1", NULL);
    mb_node(b, "Add", "fc1_b", "f1,b1", "f1b", NULL);
    mb_node(b, "Gelu", "gelu", "f1b", "g", NULL);
    mb_node(b, "MatMul", "fc2", "g,w2", "f2", NULL);
    mb_node(b, "Add", "fc2_b", "f2,b2", "f2b", NULL);
    mb_node(b, "Add", "residual2", "f2b,hn", "y", NULL);
    mb_output(b, "y");
    mb_output(b, "p"); // the attention probabilities: an intermediate that is also an output
    Graph *g = load_folded(b);
    if (g) {
        void **in = random_inputs(g);
        CHECK(model_check(g, in) >= 1);
        free_inputs(g, in);
    }
    graph_free(g);
    mb_free(b);
}

// Conv, ReLU, MaxPool (opaque), a strided conv, a residual, TopK (opaque, two outputs, both
// used), GlobalAveragePool and Gemm.
static void cnn(void) {
    const int64_t xd[] = {2, 3, 12, 12}, w1d[] = {8, 3, 3, 3}, b1d[] = {8}, w2d[] = {8, 8, 3, 3},
                  k2[] = {2, 2}, pads1[] = {1, 1, 1, 1}, fcd[] = {8, 5}, fbd[] = {5}, kd[] = {1};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 4, xd);
    add_weight(b, "w1", 4, w1d);
    add_weight(b, "b1", 1, b1d);
    add_weight(b, "w2", 4, w2d);
    add_weight(b, "b2", 1, b1d);
    add_weight(b, "fc", 2, fcd);
    add_weight(b, "fb", 1, fbd);
    const int64_t kval[] = {3};
    mb_init(b, mb_raw(b, "k", 7, 1, kd, kval, sizeof kval));
    mb_node(b, "Conv", "conv1", "x,w1,b1", "c1", mb_attr_ints(b, "pads", 4, pads1), NULL);
    mb_node(b, "Relu", "relu1", "c1", "r1", NULL);
    mb_node(b, "MaxPool", "pool", "r1", "p1", mb_attr_ints(b, "kernel_shape", 2, k2),
            mb_attr_ints(b, "strides", 2, k2), NULL);
    mb_node(b, "Conv", "conv2", "p1,w2,b2", "c2", mb_attr_ints(b, "pads", 4, pads1), NULL);
    mb_node(b, "Relu", "relu2", "c2", "r2", NULL);
    mb_node(b, "Add", "residual", "r2,p1", "s", NULL);
    mb_node(b, "TopK", "topk", "s,k", "tv,ti", mb_attr_i(b, "axis", 1), NULL);
    mb_node(b, "Cast", "cast", "ti", "tf", mb_attr_i(b, "to", 1), NULL);
    mb_node(b, "Mul", "mix", "tv,tf", "m", NULL);
    mb_node(b, "GlobalAveragePool", "gap", "s", "gp", NULL);
    mb_node(b, "Flatten", "flat", "gp", "fl", NULL);
    mb_node(b, "Gemm", "head", "fl,fc,fb", "logits", NULL);
    mb_output(b, "logits");
    mb_output(b, "m");
    Graph *g = load_folded(b);
    if (g) {
        void **in = random_inputs(g);
        CHECK(model_check(g, in) >= 3);
        free_inputs(g, in);
    }
    graph_free(g);
    mb_free(b);
}

// ---- the generated test models (MODELS_DIR mode) ----

static void model_dir(const char *dir) {
    Err e = {0};
    Graph *g = NULL;
    if (model_dir_load(dir, &g, &e) == ST_OK) {
        HostTensor files[32];
        int nf;
        void **in = model_dir_inputs(dir, g, files, &nf);
        if (!check_failed_case)
            model_check(g, in);
        for (int i = 0; i < nf; i++)
            host_tensor_free(&files[i]);
        free(in);
    }
    graph_free(g);
}

int main(int argc, char **argv) {
    plan_cases_seed(argc, argv);
    if (argc > 1 && argv[1][0])
        return run_model_dirs(argv[1], model_dir);
    RUN(cost_model);
    RUN(single_prim);
    RUN(input_is_output);
    RUN(output_also_intermediate);
    RUN(diamond);
    RUN(long_skip);
    RUN(bad_selections);
    RUN(dumps);
    RUN(transformer_layer);
    RUN(cnn);
    RUN(random_dags);
    return CHECK_DONE();
}
