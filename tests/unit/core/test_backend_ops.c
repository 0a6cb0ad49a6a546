// Every backend against the primitive interpreter on the canonical graphs (canonical_graphs.h):
// for each target this machine can open, each graph, each distinct candidate kernel the target
// supports and each of its configs (a sample by default: the first two, which the compile
// measures first; `--full` takes every config and, on CUDA, every precision), the target's own
// lab builds the kernel, runs it on the interpreter's tensors and compares it with the
// interpreter's output. A kernel that is wrong, fails to build or crashes fails the case. The
// whole backend is reached through target.h's slots only, so a new target is covered by adding
// it to the list below.
// Usage: unit_backend_ops [--full] [GRAPH_SUBSTRING]
#include "../canonical_graphs.h"
#include "../check.h"

#include "backend/kernel_lab.h"
#include "candidates/candidates.h"
#include "interp/prim_interp.h"

#include <stdio.h>
#include <string.h>

static bool g_full;
static const char *g_filter;

typedef struct TargetCase {
    const Target *target;
    TargetOptions opt;
    bool sampled; // run by default; the others only under --full
} TargetCase;

static int target_cases(TargetCase *out) {
    int n = 0;
    out[n++] = (TargetCase){&target_cpu, {.precision = PREC_FP32}, true};
    out[n++] = (TargetCase){&target_cuda, {.precision = PREC_FP32}, true};
    out[n++] = (TargetCase){&target_cuda, {.precision = PREC_FP16}, false};
    out[n++] = (TargetCase){&target_cuda, {.precision = PREC_BF16}, false};
    return n;
}

// Graphs a target does not generate yet (run by the reference interpreter instead). A gap listed
// here that the target closes fails the case too, so the list stays true.
static const struct {
    const char *target, *graph;
} known_gaps[] = {
    {NULL, NULL},
};

static bool known_gap(const Target *t, const char *graph) {
    for (size_t i = 0; known_gaps[i].target; i++)
        if (strcmp(known_gaps[i].target, t->name) == 0 && strcmp(known_gaps[i].graph, graph) == 0)
            return true;
    return false;
}

static void *alloc_random(const Tensor *t) {
    int64_t n = tensor_numel(t);
    float *p = xmalloc(sizeof(float) * (size_t)(n + 16));
    for (int64_t i = 0; i < n; i++)
        p[i] = cg_rand();
    return p;
}

// One graph on one machine: the lab's verdict on every (distinct candidate, config) job.
static void run_graph(const TargetMachine *m, const CanonicalGraph *g, int *jobs_ok,
                      int *jobs_all) {
    Err e = {0};
    PrimGraph *pg = canonical_graph_build(g, &e);
    CHECK_MSG(pg != NULL, "%s: the graph does not verify: %s", g->name, e.msg);
    if (!pg)
        return;
    CandidateSet *cs = NULL;
    int rc = cand_enumerate(pg, NULL, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: candidates: %s", g->name, e.msg);
    void **inputs = xcalloc((size_t)pg->n_inputs + 1, sizeof(void *));
    for (int i = 0; i < pg->n_inputs; i++)
        inputs[i] = alloc_random(pg->tensors[pg->inputs[i]]);
    void **values = NULL;
    if (rc == ST_OK) {
        rc = prim_interp_values(pg, (const void *const *)inputs, &values, &e);
        CHECK_MSG(rc == ST_OK, "%s: interpreter: %s", g->name, e.msg);
    }
    int cap = rc == ST_OK ? cs->n * 16 + 1 : 1, nj = 0, supported = 0;
    LabJob *jobs = xcalloc((size_t)cap, sizeof(LabJob));
    uint64_t *seen = xcalloc((size_t)(rc == ST_OK ? cs->n : 0) + 1, sizeof(uint64_t));
    int n_seen = 0;
    for (int i = 0; rc == ST_OK && i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        bool dup = false;
        for (int j = 0; j < n_seen && !dup; j++)
            dup = seen[j] == c->signature;
        if (dup || !m->target->supports(m, pg, c))
            continue;
        seen[n_seen++] = c->signature;
        supported++;
        KernelConfig cfg[16];
        int k = m->target->configs(m, pg, c, cfg, 16);
        CHECK_MSG(k >= 1, "%s: candidate %d supported but no config", g->name, i);
        if (!g_full && k > 2)
            k = 2;
        for (int q = 0; q < k; q++) {
            jobs[nj].cand = i;
            jobs[nj].cfg = cfg[q];
            jobs[nj].tol = lab_candidate_tolerance(pg, c, m->opt.precision);
            nj++;
        }
    }
    // Every graph has kernels each target generates, but for the known gaps, which must stay
    // gaps until the list is updated.
    bool gap = known_gap(m->target, g->name);
    CHECK_MSG(rc != ST_OK || gap || supported > 0,
              "%s: the %s target generates none of its %d candidates", g->name, m->target->name,
              cs ? cs->n : 0);
    CHECK_MSG(rc != ST_OK || !gap || supported == 0,
              "%s: listed as a gap of the %s target, which now generates %d kernels: update "
              "known_gaps",
              g->name, m->target->name, supported);
    if (rc == ST_OK && nj) {
        LabOptions lo = {.min_time = 1e-4, .max_reps = 2};
        rc = lab_run(m, pg, cs, values, jobs, nj, &lo, &e);
        CHECK_MSG(rc == ST_OK, "%s: lab: %s", g->name, e.msg);
    }
    int ok = 0;
    for (int j = 0; rc == ST_OK && j < nj; j++) {
        ok += jobs[j].status == LAB_OK;
        CHECK_MSG(jobs[j].status == LAB_OK, "%s on %s (%s): candidate %d [%s]: %s%s", g->name,
                  m->target->name, precision_name(m->opt.precision), jobs[j].cand, jobs[j].cfg.desc,
                  jobs[j].status == LAB_WRONG          ? "wrong output"
                  : jobs[j].status == LAB_BUILD_FAILED ? "build failed"
                                                       : "not run",
                  jobs[j].note[0] ? jobs[j].note : "");
    }
    printf("  %-18s %3d kernels, %3d configs, %3d ok%s\n", g->name, supported, nj, ok,
           gap ? " (a known gap)" : "");
    *jobs_ok += ok;
    *jobs_all += nj;
    free(seen);
    free(jobs);
    if (values)
        prim_values_free(pg, values);
    for (int i = 0; i < pg->n_inputs; i++)
        free(inputs[i]);
    free(inputs);
    cand_set_free(cs);
    prim_graph_free(pg);
}

static void every_target(void) {
    TargetCase tc[8];
    int n = target_cases(tc);
    int opened = 0;
    for (int t = 0; t < n; t++) {
        if (!tc[t].sampled && !g_full)
            continue;
        TargetMachine m;
        Err e = {0};
        if (target_open(tc[t].target, &tc[t].opt, &m, &e) != ST_OK) {
            // The CPU target is always there; others are where their device is.
            CHECK_MSG(tc[t].target != &target_cpu, "the cpu target does not open: %s", e.msg);
            printf("  skip %s (%s): %s\n", tc[t].target->name, precision_name(tc[t].opt.precision),
                   e.msg);
            continue;
        }
        opened++;
        printf(" %s (%s) on %s\n", tc[t].target->name, precision_name(tc[t].opt.precision),
               m.hw.fingerprint);
        int ok = 0, all = 0;
        for (size_t g = 0; g < sizeof canonical_graphs / sizeof *canonical_graphs; g++)
            if (!g_filter || strstr(canonical_graphs[g].name, g_filter))
                run_graph(&m, &canonical_graphs[g], &ok, &all);
        printf(" %s (%s): %d of %d kernel configs agree with the interpreter\n", tc[t].target->name,
               precision_name(tc[t].opt.precision), ok, all);
        target_close(&m);
    }
    CHECK(opened > 0);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0)
            g_full = true;
        else
            g_filter = argv[i];
    }
    RUN(every_target);
    return CHECK_DONE();
}
