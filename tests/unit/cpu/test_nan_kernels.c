// NaN, infinities and signed zeros through every max/min-like operator (docs/numerics.md) on
// three engines at once: ONNX models of MaxPool, GlobalMaxPool, ReduceMax/Min, ArgMax/ArgMin,
// Max/Min, Clip, Relu and a fused pooling chain, fed inputs with NaN, +-inf, -0 and +0 planted
// among random values (the compile's own inputs never hold them), run by the operator
// interpreter and, after fission and the clean-up, by the primitive interpreter (the two agree:
// NaN where NaN, the sign of every zero, values within 1e-6); then the CPU target's kernel lab
// builds every candidate kernel the target generates, every config, runs each on those values
// and checks it against the primitive interpreter. Each case also checks that the outputs hold
// NaN beside numbers and that the lab's check tells them from what a kernel dropping NaN (as
// _mm256_max_ps or fmaxf would) computes, so a kernel that drops NaN fails here.
// Environment: ORCH_TEST_SEED replays a seed (printed).
#include "../check.h"
#include "../model_builder.h"

#include "backend/kernel_lab.h"
#include "candidates/candidates.h"
#include "fission/fission.h"
#include "interp/interp.h"
#include "interp/prim_interp.h"
#include "onnx/load.h"
#include "ops/fold.h"
#include "passes/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static uint64_t rng;

static double unif(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

// A value a hostile input holds: NaN (with probability nan), +inf, -inf, -0, +0 (5%, 5%, 3%,
// 3%), else uniform in [-3, 3).
static float planted(double nan) {
    double u = unif();
    if (u < nan)
        return NAN;
    u -= nan;
    if (u < 0.05)
        return INFINITY;
    if (u < 0.10)
        return -INFINITY;
    if (u < 0.13)
        return -0.0f;
    if (u < 0.16)
        return 0.0f;
    return (float)(6 * unif() - 3);
}

// ---- the models ----

static const int64_t *dims_of(int rank, const int64_t *d) {
    return rank ? d : NULL;
}

static MB *one_input(int rank, const int64_t *dims) {
    MB *b = mb_new(18);
    mb_input(b, "x", FLOAT, rank, dims_of(rank, dims));
    mb_output(b, "y");
    return b;
}

static MB *maxpool_2d(void) { // wide rows: the reduction kernel's vectorised interior
    const int64_t d[] = {2, 3, 11, 37}, k[] = {3, 3}, p[] = {1, 1, 1, 1};
    MB *b = one_input(4, d);
    mb_node(b, "MaxPool", "pool", "x", "y", mb_attr_ints(b, "kernel_shape", 2, k),
            mb_attr_ints(b, "pads", 4, p), NULL);
    return b;
}

static MB *maxpool_strided(void) {
    const int64_t d[] = {1, 4, 13, 29}, k[] = {2, 3}, s[] = {2, 1}, dl[] = {1, 2},
                  p[] = {1, 0, 0, 2};
    MB *b = one_input(4, d);
    mb_node(b, "MaxPool", "pool", "x", "y", mb_attr_ints(b, "kernel_shape", 2, k),
            mb_attr_ints(b, "strides", 2, s), mb_attr_ints(b, "dilations", 2, dl),
            mb_attr_ints(b, "pads", 4, p), NULL);
    return b;
}

static MB *maxpool_1d(void) {
    const int64_t d[] = {2, 5, 40}, k[] = {4}, s[] = {2}, p[] = {1, 2};
    MB *b = one_input(3, d);
    mb_node(b, "MaxPool", "pool", "x", "y", mb_attr_ints(b, "kernel_shape", 1, k),
            mb_attr_ints(b, "strides", 1, s), mb_attr_ints(b, "pads", 2, p), NULL);
    return b;
}

static MB *global_maxpool(void) {
    const int64_t d[] = {2, 6, 7, 9};
    MB *b = one_input(4, d);
    mb_node(b, "GlobalMaxPool", "gpool", "x", "y", NULL);
    return b;
}

static MB *reduce(const char *op, int rank, const int64_t *d, int n_axes, const int64_t *axes,
                  int keepdims) {
    MB *b = one_input(rank, d);
    if (n_axes) {
        const int64_t ad[] = {n_axes};
        mb_init(b, mb_raw(b, "axes", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, ad, axes,
                          sizeof(int64_t) * (size_t)n_axes));
    }
    mb_node(b, op, "reduce", n_axes ? "x,axes" : "x", "y", mb_attr_i(b, "keepdims", keepdims),
            NULL);
    return b;
}

static MB *reducemax_inner(void) {
    const int64_t d[] = {5, 7, 33}, ax[] = {2};
    return reduce("ReduceMax", 3, d, 1, ax, 1);
}

static MB *reducemin_outer(void) {
    const int64_t d[] = {33, 5, 7}, ax[] = {0};
    return reduce("ReduceMin", 3, d, 1, ax, 0);
}

static MB *reducemax_all(void) {
    const int64_t d[] = {6, 13};
    return reduce("ReduceMax", 2, d, 0, NULL, 0);
}

static MB *reducemin_mid(void) {
    const int64_t d[] = {4, 19, 6}, ax[] = {1};
    return reduce("ReduceMin", 3, d, 1, ax, 1);
}

static MB *arg(const char *op, int axis, int last) {
    const int64_t d[] = {7, 29};
    MB *b = one_input(2, d);
    mb_node(b, op, "arg", "x", "y", mb_attr_i(b, "axis", axis),
            mb_attr_i(b, "select_last_index", last), NULL);
    return b;
}

static MB *argmax_first(void) {
    return arg("ArgMax", 1, 0);
}

static MB *argmin_last(void) {
    return arg("ArgMin", 0, 1);
}

static MB *max3(void) {
    const int64_t da[] = {3, 1, 17}, db[] = {5, 17}, dc[] = {17};
    MB *b = mb_new(18);
    mb_input(b, "a", FLOAT, 3, da);
    mb_input(b, "b", FLOAT, 2, db);
    mb_input(b, "c", FLOAT, 1, dc);
    mb_node(b, "Max", "max", "a,b,c", "y", NULL);
    mb_output(b, "y");
    return b;
}

static MB *min2(void) {
    const int64_t da[] = {6, 19}, db[] = {19};
    MB *b = mb_new(18);
    mb_input(b, "a", FLOAT, 2, da);
    mb_input(b, "b", FLOAT, 1, db);
    mb_node(b, "Min", "min", "a,b", "y", NULL);
    mb_output(b, "y");
    return b;
}

static MB *clip_const(void) {
    const int64_t d[] = {9, 23}, one[] = {1};
    const float lo = -0.5f, hi = 1.0f;
    MB *b = one_input(2, d);
    mb_init(b, mb_raw(b, "lo", FLOAT, 0, one, &lo, sizeof lo));
    mb_init(b, mb_raw(b, "hi", FLOAT, 0, one, &hi, sizeof hi));
    mb_node(b, "Clip", "clip", "x,lo,hi", "y", NULL);
    return b;
}

static MB *clip_inputs(void) { // run-time bounds, themselves planted: NaN bounds are no bounds
    const int64_t d[] = {9, 23};
    MB *b = mb_new(18);
    mb_input(b, "x", FLOAT, 2, d);
    mb_input(b, "lo", FLOAT, 0, NULL);
    mb_input(b, "hi", FLOAT, 0, NULL);
    mb_node(b, "Clip", "clip", "x,lo,hi", "y", NULL);
    mb_output(b, "y");
    return b;
}

static MB *relu(void) {
    const int64_t d[] = {7, 41};
    MB *b = one_input(2, d);
    mb_node(b, "Relu", "relu", "x", "y", NULL);
    return b;
}

// MaxPool -> Relu -> ReduceMax over the width: candidates fuse the pooling's reduction with the
// activation and the second reduction.
static MB *pool_relu_reduce(void) {
    const int64_t d[] = {1, 4, 8, 21}, k[] = {3, 3}, p[] = {1, 1, 1, 1}, ad[] = {1}, ax[] = {3};
    MB *b = one_input(4, d);
    mb_init(b, mb_raw(b, "axes", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, ad, ax, sizeof ax));
    mb_node(b, "MaxPool", "pool", "x", "p", mb_attr_ints(b, "kernel_shape", 2, k),
            mb_attr_ints(b, "pads", 4, p), NULL);
    mb_node(b, "Relu", "relu", "p", "r", NULL);
    mb_node(b, "ReduceMax", "reduce", "r,axes", "y", mb_attr_i(b, "keepdims", 0), NULL);
    return b;
}

typedef struct NanCase {
    const char *name;
    MB *(*build)(void);
    // What a kernel that drops NaN computes: the result with every NaN input replaced by this
    // (-inf for a max, +inf for a min: what _mm256_max_ps / fmaxf leave).
    float dropped;
    bool reduces; // the lab must check kernels holding a REDUCE
    double nan;   // the share of NaN among the inputs: lower where windows are long
} NanCase;

static const NanCase cases[] = {
    {"maxpool_2d", maxpool_2d, -INFINITY, true, 0.10},
    {"maxpool_strided_dilated", maxpool_strided, -INFINITY, true, 0.10},
    {"maxpool_1d", maxpool_1d, -INFINITY, true, 0.10},
    {"global_maxpool", global_maxpool, -INFINITY, true, 0.02},
    {"reducemax_inner", reducemax_inner, -INFINITY, true, 0.10},
    {"reducemin_outer", reducemin_outer, INFINITY, true, 0.03},
    {"reducemax_all", reducemax_all, -INFINITY, true, 0.10},
    {"reducemin_mid", reducemin_mid, INFINITY, true, 0.10},
    {"argmax_first", argmax_first, -INFINITY, true, 0.10},
    {"argmin_last", argmin_last, INFINITY, true, 0.10},
    {"max3", max3, -INFINITY, false, 0.10},
    {"min2", min2, INFINITY, false, 0.10},
    {"clip_const", clip_const, -INFINITY, false, 0.10},
    {"clip_inputs", clip_inputs, -INFINITY, false, 0.10},
    {"relu", relu, -INFINITY, false, 0.10},
    {"pool_relu_reduce", pool_relu_reduce, -INFINITY, true, 0.02}, // 63 inputs per output
};

// ---- the engines ----

static Graph *load(MB *b, const char *name) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    Err e = {0};
    if (onnx_load_memory(buf, len, name, NULL, NULL, &g, &e) == ST_OK &&
        graph_infer_and_fold(g, NULL, &e) != ST_OK) {
        graph_free(g);
        g = NULL;
    }
    CHECK_MSG(g != NULL, "%s: load: %s", name, e.msg);
    free(buf);
    return g;
}

// Whether a and b (n elements of dtype t) agree as the engines must: the same NaNs, the same
// sign on every zero, values within 1e-6 relative (integers exactly).
static bool engines_agree(DType t, int64_t n, const void *a, const void *b, char *why, size_t wn) {
    for (int64_t i = 0; i < n; i++) {
        if (!dtype_is_float(t)) {
            if (elem_get_i64(t, a, i) != elem_get_i64(t, b, i)) {
                snprintf(why, wn, "element %lld: %lld vs %lld", (long long)i,
                         (long long)elem_get_i64(t, a, i), (long long)elem_get_i64(t, b, i));
                return false;
            }
            continue;
        }
        double x = elem_get_f64(t, a, i), y = elem_get_f64(t, b, i);
        bool ok = isnan(x) ? isnan(y)
                  : x == 0 ? y == 0 && signbit(x) == signbit(y)
                           : x == y || fabs(x - y) <= 1e-6 * fabs(x);
        if (!ok) {
            snprintf(why, wn, "element %lld: %.9g vs %.9g", (long long)i, x, y);
            return false;
        }
    }
    return true;
}

static void run_case(const NanCase *nc, const TargetMachine *m) {
    MB *b = nc->build();
    Graph *g = load(b, nc->name);
    mb_free(b);
    if (!g)
        return;
    int ni = g->n_inputs, no = g->n_outputs;
    void **in = xcalloc((size_t)ni + 1, sizeof(void *)),
         **dropped_in = xcalloc((size_t)ni + 1, sizeof(void *));
    for (int i = 0; i < ni; i++) {
        int64_t n = tensor_numel(g->tensors[g->inputs[i]]);
        in[i] = xmalloc(sizeof(float) * (size_t)(n + 1));
        dropped_in[i] = xmalloc(sizeof(float) * (size_t)(n + 1));
    }
    Err e = {0};
    PrimGraph *pg = NULL;
    int rc = fission_run(g, NULL, &pg, NULL, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(pg, NULL, &e);
    CHECK_MSG(rc == ST_OK, "%s: fission: %s", nc->name, e.msg);
    // Inputs drawn until every float output of more than one element holds NaN beside numbers
    // (each draw from the seed's sequence, so a seed replays the same inputs).
    void **values = NULL, **dropped = NULL;
    for (int draw = 0; rc == ST_OK; draw++) {
        for (int i = 0; i < ni; i++) {
            float *x = in[i], *xd = dropped_in[i];
            for (int64_t k = 0; k < tensor_numel(g->tensors[g->inputs[i]]); k++) {
                x[k] = planted(nc->nan);
                xd[k] = isnan(x[k]) ? nc->dropped : x[k];
            }
        }
        if (values)
            prim_values_free(pg, values);
        values = NULL;
        rc = prim_interp_values(pg, (const void *const *)in, &values, &e);
        CHECK_MSG(rc == ST_OK, "%s: primitive interpreter: %s", nc->name, e.msg);
        bool strong = true;
        for (int o = 0; rc == ST_OK && o < no; o++) {
            const Tensor *t = pg->tensors[pg->outputs[o]];
            int64_t n = tensor_numel(t), nan = 0;
            for (int64_t k = 0; dtype_is_float(t->dtype) && k < n; k++)
                nan += isnan(elem_get_f64(t->dtype, values[t->id], k));
            strong &= !dtype_is_float(t->dtype) || (nan > 0 && (nan < n || n == 1));
        }
        if (strong || rc != ST_OK)
            break;
        CHECK_MSG(draw < 32, "%s: 32 draws of inputs and no output holds NaN beside numbers",
                  nc->name);
        if (draw >= 32)
            rc = ST_INVALID;
    }
    void **ops_out = xcalloc((size_t)no + 1, sizeof(void *));
    if (rc == ST_OK) {
        rc = prim_interp_values(pg, (const void *const *)dropped_in, &dropped, &e);
        CHECK_MSG(rc == ST_OK, "%s: primitive interpreter: %s", nc->name, e.msg);
    }
    if (rc == ST_OK) {
        rc = interp_run(g, (const void *const *)in, ops_out, NULL, &e);
        CHECK_MSG(rc == ST_OK, "%s: operator interpreter: %s", nc->name, e.msg);
    }
    // The two interpreters agree, and the lab's check tells the outputs from what a NaN-dropping
    // kernel computes.
    for (int o = 0; rc == ST_OK && o < no; o++) {
        const Tensor *t = pg->tensors[pg->outputs[o]];
        int64_t n = tensor_numel(t);
        char why[256];
        CHECK_MSG(engines_agree(t->dtype, n, ops_out[o], values[t->id], why, sizeof why),
                  "%s: operator vs primitive interpreter, output %s: %s", nc->name, t->name, why);
        double err;
        CHECK_MSG(
            !lab_outputs_agree(t->dtype, n, dropped[t->id], values[t->id], &err, why, sizeof why),
            "%s: the lab's check cannot tell output %s from its NaN-dropping twin", nc->name,
            t->name);
    }
    // Every candidate kernel the CPU target generates, every config, through its lab.
    CandidateSet *cs = NULL;
    if (rc == ST_OK) {
        rc = cand_enumerate(pg, NULL, 0, &cs, &e);
        CHECK_MSG(rc == ST_OK, "%s: candidates: %s", nc->name, e.msg);
    }
    LabJob *jobs = xcalloc((size_t)(cs ? cs->n : 0) * 8 + 1, sizeof(LabJob));
    uint64_t *seen = xcalloc((size_t)(cs ? cs->n : 0) + 1, sizeof(uint64_t));
    int nj = 0, n_seen = 0, reducing = 0;
    for (int i = 0; rc == ST_OK && i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        bool dup = false;
        for (int j = 0; j < n_seen && !dup; j++)
            dup = seen[j] == c->signature;
        if (dup || !m->target->supports(m, pg, c))
            continue;
        seen[n_seen++] = c->signature;
        bool has_reduce = false;
        for (int k = 0; k < c->n_prims; k++)
            has_reduce |= pg->prims[c->prims[k]]->kind == PRIM_REDUCE;
        KernelConfig cfg[8];
        int k = m->target->configs(m, pg, c, cfg, 8);
        for (int q = 0; q < k; q++) {
            jobs[nj] = (LabJob){.cand = i, .cfg = cfg[q], .tol = 1e-4};
            nj++;
            reducing += has_reduce;
        }
    }
    CHECK_MSG(rc != ST_OK || nj > 0, "%s: the cpu target generates none of its candidates",
              nc->name);
    CHECK_MSG(rc != ST_OK || !nc->reduces || reducing > 0,
              "%s: no generated kernel holds the reduction", nc->name);
    if (rc == ST_OK && nj) {
        LabOptions lo = {.min_time = 1e-4, .max_reps = 2};
        rc = lab_run(m, pg, cs, values, jobs, nj, &lo, &e);
        CHECK_MSG(rc == ST_OK, "%s: lab: %s", nc->name, e.msg);
    }
    int ok = 0;
    for (int j = 0; rc == ST_OK && j < nj; j++) {
        ok += jobs[j].status == LAB_OK;
        CHECK_MSG(jobs[j].status == LAB_OK, "%s: candidate %d [%s]: %s %s", nc->name, jobs[j].cand,
                  jobs[j].cfg.desc,
                  jobs[j].status == LAB_WRONG ? "wrong output" : "build failed or not run",
                  jobs[j].note);
    }
    printf("  %-24s %3d kernel configs (%d with a reduction), %3d agree\n", nc->name, nj, reducing,
           ok);
    free(jobs);
    free(seen);
    cand_set_free(cs);
    if (values)
        prim_values_free(pg, values);
    if (dropped)
        prim_values_free(pg, dropped);
    prim_graph_free(pg);
    for (int o = 0; o < no; o++)
        free(ops_out[o]);
    free(ops_out);
    for (int i = 0; i < ni; i++) {
        free(in[i]);
        free(dropped_in[i]);
    }
    free(in);
    free(dropped_in);
    graph_free(g);
}

static TargetMachine machine;
static const NanCase *current;

static void nan_case(void) {
    run_case(current, &machine);
}

int main(void) {
    const char *s = getenv("ORCH_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    rng = seed;
    printf("seed %llu (ORCH_TEST_SEED replays it)\n", (unsigned long long)seed);
    Err e = {0};
    TargetOptions opt = {.precision = PREC_FP32};
    if (target_open(&target_cpu, &opt, &machine, &e) != ST_OK) {
        printf("FAIL the cpu target does not open: %s\n", e.msg);
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        current = &cases[i];
        check_failed_case = 0;
        double t0 = check_now();
        nan_case();
        printf("%s %s (%.1f s)\n", check_failed_case ? "FAIL" : "ok  ", current->name,
               check_now() - t0);
        check_failed_case ? check_n_fail++ : check_n_pass++;
    }
    target_close(&machine);
    return CHECK_DONE();
}
