// The one-operator ONNX models the operator kernels of both targets are checked on
// (test_cgen_opaque.c for the C target, test_cuda_opaque.c for CUDA): TopK, CumSum, Hardmax,
// Trilu, Gather by computed indices, GatherElements, ScatterElements, GatherND, ScatterND, OneHot,
// ReverseSequence, LpPool, GridSample and RoiAlign on random shapes (1, primes), every dtype the
// kernels take, every attribute, with ties, NaN, -0 and infinities in the data, k = 1 and k = n,
// negative and repeated indices. Each case names the graph input that holds indices (`hostile`),
// which the tests replace with values the reference op refuses. Needs: the ONNX model builder
// (model_builder.h) and check.h. Guarantees: cases drawn from the seed in rng_state; opq_case_load
// prepares one (graph, candidate, inputs, interpreter values).
#ifndef ORCH_TEST_OPAQUE_CASES_H
#define ORCH_TEST_OPAQUE_CASES_H

#include "check.h"
#include "model_builder.h"
#include "test_rng.h"

#include "backend/target.h"
#include "candidates/candidates.h"
#include "codegen/opaque_spec.h"
#include "fission/fission.h"
#include "interp/prim_interp.h"
#include "onnx/load.h"
#include "ops/fold.h"
#include "passes/passes.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- random numbers ----

static inline int64_t rint_in(int64_t lo, int64_t hi) { // [lo, hi)
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo));
}

// 1, a prime or a small odd size.
static inline int64_t odd_dim(void) {
    static const int64_t dims[] = {1, 2, 3, 5, 7, 11, 13, 17, 31};
    return dims[rnd() % ORCH_COUNT(dims)];
}

// ---- cases ----

// How a graph input is filled.
typedef enum Fill {
    F_DATA,  // values with ties, and for floats NaN, -0, +-inf (when `specials`)
    F_INDEX, // integers in [lo, hi)
    F_COORD, // floats in [lo, hi) thousandths (grid points, ROI corners)
} Fill;

#define MAX_IN 3
#define MAX_CFG 8

typedef struct Case {
    char name[128];
    MB *mb;
    int n_in;
    DType in_dt[MAX_IN];
    Fill fill[MAX_IN];
    int64_t lo[MAX_IN], hi[MAX_IN];
    bool specials;
    int hostile; // the graph input whose values are indices, -1: none
    // prepared
    Graph *g;
    PrimGraph *pg;
    CandidateSet *cs;
    int cand;
    void *in[MAX_IN];
    void **values;
    int n_cfg;
    KernelConfig cfg[MAX_CFG];
    char fn[MAX_CFG][64];
    bool ok;
} Case;

#define MAX_CASES 256
static Case cases[MAX_CASES];
static int n_cases;

static inline Case *new_case(int opset, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline Case *new_case(int opset, const char *fmt, ...) {
    ORCH_ASSERT(n_cases < MAX_CASES);
    Case *c = &cases[n_cases++];
    memset(c, 0, sizeof *c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->name, sizeof c->name, fmt, ap);
    va_end(ap);
    c->mb = mb_new(opset);
    c->hostile = -1;
    return c;
}

static inline void add_input(Case *c, const char *name, DType dt, int rank, const int64_t *dims,
                             Fill f, int64_t lo, int64_t hi) {
    ORCH_ASSERT(c->n_in < MAX_IN);
    mb_input(c->mb, name, (int)dt, rank, dims);
    c->in_dt[c->n_in] = dt;
    c->fill[c->n_in] = f;
    c->lo[c->n_in] = lo;
    c->hi[c->n_in] = hi;
    c->n_in++;
}

static inline void add_const_i64(Case *c, const char *name, int rank, const int64_t *dims,
                                 const int64_t *v, int64_t n) {
    mb_init(c->mb, mb_raw(c->mb, name, DT_INT64, rank, dims, v, sizeof(int64_t) * (size_t)n));
}

static inline void fill_data(DType dt, void *p, int64_t n, bool specials) {
    for (int64_t i = 0; i < n; i++) {
        if (dtype_is_float(dt)) {
            double v;
            uint64_t r = rnd() % 100;
            if (specials && r < 4)
                v = NAN;
            else if (specials && r < 6)
                v = (r & 1) ? INFINITY : -INFINITY;
            else if (specials && r < 12)
                v = (r & 1) ? 0.0 : -0.0;
            else if (specials && r < 50)
                v = (double)rint_in(-4, 5) * 0.5; // ties
            else
                v = (double)(int64_t)(rnd() % 2000001 - 1000000) / 250000.0;
            elem_set_f64(dt, p, i, v);
        } else if (dt == DT_BOOL) {
            elem_set_i64(dt, p, i, (int64_t)(rnd() & 1));
        } else {
            bool is_unsigned =
                dt == DT_UINT8 || dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
            int64_t v = specials ? rint_in(is_unsigned ? 0 : -5, 6) : (int64_t)rnd();
            if (!specials && dtype_size(dt) < 8)
                v = (int64_t)(rnd() % 200) - (is_unsigned ? 0 : 100);
            if (specials && (dt == DT_INT64 || dt == DT_UINT64) && rnd() % 8 == 0)
                v = (int64_t)rnd(); // the 64-bit keys' high bytes
            elem_set_i64(dt, p, i, v);
        }
    }
}

static inline void fill_input(Case *c, int i, const Tensor *t) {
    int64_t n = tensor_numel(t);
    if (c->fill[i] == F_DATA) {
        fill_data(c->in_dt[i], c->in[i], n, c->specials);
    } else if (c->fill[i] == F_COORD) {
        for (int64_t k = 0; k < n; k++)
            elem_set_f64(c->in_dt[i], c->in[i], k, (double)rint_in(c->lo[i], c->hi[i]) / 1000.0);
    } else {
        for (int64_t k = 0; k < n; k++)
            elem_set_i64(c->in_dt[i], c->in[i], k, rint_in(c->lo[i], c->hi[i]));
    }
}

// Loads, folds and splits the model, finds the operator's candidate (its spec must analyse),
// fills the inputs and asks the interpreter for every value; false (with a failed check) when a
// step fails. The caller asks its target for configs.
static inline bool opq_case_load(Case *c) {
    size_t len;
    uint8_t *buf = mb_pack(c->mb, &len);
    Err e = {0};
    int rc = onnx_load_memory(buf, len, c->name, NULL, NULL, &c->g, &e);
    free(buf);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(c->g, NULL, &e);
    FissionStats st = {0};
    if (rc == ST_OK)
        rc = fission_run(c->g, NULL, &c->pg, &st, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(c->pg, NULL, &e);
    if (rc == ST_OK)
        rc = cand_enumerate(c->pg, NULL, 0, &c->cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", c->name, e.msg);
    if (rc)
        return false;
    c->cand = -1;
    for (int i = 0; i < c->cs->n; i++)
        if (c->cs->c[i].n_prims == 1 && c->pg->prims[c->cs->c[i].prims[0]]->kind == PRIM_OPAQUE)
            c->cand = i;
    CHECK_MSG(c->cand >= 0, "%s: no operator candidate", c->name);
    if (c->cand < 0)
        return false;
    char why[160];
    OpqSpec s;
    bool ok = opq_analyse(c->pg, &c->cs->c[c->cand], &s, why, sizeof why);
    CHECK_MSG(ok, "%s: refused: %s", c->name, why);
    if (!ok)
        return false;
    for (int i = 0; i < c->n_in; i++) {
        const Tensor *t = c->pg->tensors[c->pg->inputs[i]];
        c->in[i] = xmalloc(tensor_nbytes(t) + 1);
        fill_input(c, i, t);
    }
    rc = prim_interp_values(c->pg, (const void *const *)c->in, &c->values, &e);
    CHECK_MSG(rc == ST_OK, "%s: interpreter: %s", c->name, e.msg);
    return rc == ST_OK;
}

static inline void free_case(Case *c) {
    for (int i = 0; i < c->n_in; i++)
        free(c->in[i]);
    if (c->pg && c->values)
        prim_values_free(c->pg, c->values);
    cand_set_free(c->cs);
    prim_graph_free(c->pg);
    graph_free(c->g);
    mb_free(c->mb);
}

// The reference op's verdict on the case's operands with graph inputs ins.
static inline int reference_status(Case *c, void *const *ins, Err *e) {
    const Prim *p = c->pg->prims[c->cs->c[c->cand].prims[0]];
    const void *x[MAX_IN + 1] = {0};
    void *y[2] = {0};
    for (int j = 0; j < p->n_in; j++) {
        if (p->in[j] < 0)
            continue;
        x[j] = c->values[p->in[j]];
        for (int k = 0; k < c->n_in; k++)
            if (c->pg->inputs[k] == p->in[j])
                x[j] = ins[k];
    }
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] >= 0)
            y[j] = xmalloc(tensor_nbytes(c->pg->tensors[p->out[j]]) + 1);
    int rc = prim_eval_opaque(c->pg, p, x, y, e);
    for (int j = 0; j < p->n_out; j++)
        free(y[j]);
    return rc;
}

// The status a target's kernel for config k of case c returns on graph inputs ins
// (CKERNEL_ERR_INDEX: an index it refused), or -1 where it did not run.
typedef int (*OpqKernelStatus)(Case *c, int k, void *const *ins, void *ctx);

// Operands the reference op refuses: each hostile value in turn at the first, a middle and the
// last index (the end of the buffers), every config: the kernel's status must be
// CKERNEL_ERR_INDEX exactly where the reference op fails. Returns the runs compared.
static inline int opq_hostile_runs(Case *c, OpqKernelStatus status, void *ctx) {
    if (c->hostile < 0)
        return 0;
    int h = c->hostile, runs = 0;
    const Tensor *t = c->pg->tensors[c->pg->inputs[h]];
    int64_t n = tensor_numel(t);
    bool i32 = c->in_dt[h] == DT_INT32;
    int64_t span = c->hi[h] - c->lo[h];
    int64_t bad[] = {c->hi[h], c->lo[h] - 1, c->hi[h] + span, i32 ? INT32_MAX : INT64_MAX,
                     i32 ? INT32_MIN : INT64_MIN};
    void *ins[MAX_IN];
    for (int k = 0; k < c->n_in; k++)
        ins[k] = c->in[k];
    void *copy = xmalloc(tensor_nbytes(t) + 1);
    ins[h] = copy;
    int64_t at[] = {0, n / 2, n - 1};
    for (size_t b = 0; b < ORCH_COUNT(bad); b++)
        for (size_t a = 0; a < ORCH_COUNT(at); a++) {
            memcpy(copy, c->in[h], tensor_nbytes(t));
            elem_set_i64(c->in_dt[h], copy, at[a], bad[b]);
            Err e = {0};
            int ref = reference_status(c, ins, &e);
            for (int k = 0; k < c->n_cfg; k++) {
                int st = status(c, k, ins, ctx);
                if (st < 0)
                    continue;
                CHECK_MSG((st == CKERNEL_ERR_INDEX) == (ref != ST_OK),
                          "%s [%s]: value %lld at %lld: the kernel's status is %d, the reference "
                          "op %s",
                          c->name, c->cfg[k].desc, (long long)bad[b], (long long)at[a], st,
                          ref ? e.msg : "accepts it");
                runs++;
            }
        }
    free(copy);
    return runs;
}

// ---- the operators ----

static inline void dims_random(int rank, int64_t *d) {
    for (int i = 0; i < rank; i++)
        d[i] = odd_dim();
}

static inline void topk_case(DType dt, int rank, int axis, int64_t k_mode, bool largest,
                             bool sorted, bool specials, bool both_out) {
    int64_t d[4];
    dims_random(rank, d);
    int a = axis < 0 ? axis + rank : axis;
    if (d[a] < 3 && rnd() % 2)
        d[a] = 37 + (int64_t)(rnd() % 500); // long lines too: the selection's bar and rounds
    int64_t k = k_mode == 0 ? 1 : k_mode == 1 ? d[a] : 1 + (int64_t)(rnd() % (uint64_t)d[a]);
    Case *c = new_case(17, "topk %s %dD axis %d k %lld/%lld %s%s%s", dtype_name(dt), rank, axis,
                       (long long)k, (long long)d[a], largest ? "largest" : "smallest",
                       specials ? " ties+nan" : "", both_out ? "" : " values only");
    add_input(c, "x", dt, rank, d, F_DATA, 0, 0);
    const int64_t one = 1;
    add_const_i64(c, "k", 1, &one, &k, 1);
    c->specials = specials;
    mb_node(c->mb, "TopK", "topk", "x,k", both_out ? "v,i" : "v", mb_attr_i(c->mb, "axis", axis),
            mb_attr_i(c->mb, "largest", largest), mb_attr_i(c->mb, "sorted", sorted), NULL);
    mb_output(c->mb, "v");
    if (both_out)
        mb_output(c->mb, "i");
}

static inline void topk_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16,
                                  DT_INT8,  DT_INT16,  DT_INT32,   DT_INT64,
                                  DT_UINT8, DT_UINT16, DT_UINT32,  DT_UINT64};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int mode = 0; mode < 3; mode++)
            topk_case(types[t], 1 + (int)(rnd() % 3), -1, mode, rnd() % 2, true, true, true);
    topk_case(DT_FLOAT, 3, 1, 2, true, false, true, true);
    topk_case(DT_FLOAT, 3, 0, 2, false, true, false, true);
    topk_case(DT_FLOAT, 2, -2, 1, true, true, true, false);
    topk_case(DT_INT64, 4, 2, 2, false, true, true, true);
    // A long line with many ties and NaN: the bar compares keys only.
    Case *c = new_case(17, "topk float32 [3, 4099] k 50 largest ties+nan");
    const int64_t d[] = {3, 4099}, one = 1, k = 50;
    add_input(c, "x", DT_FLOAT, 2, d, F_DATA, 0, 0);
    add_const_i64(c, "k", 1, &one, &k, 1);
    c->specials = true;
    mb_node(c->mb, "TopK", "topk", "x,k", "v,i", NULL);
    mb_output(c->mb, "v");
    mb_output(c->mb, "i");
}

static inline void cumsum_case(DType dt, int rank, bool axis_input, DType axis_dt, bool excl,
                               bool rev) {
    int64_t d[4];
    dims_random(rank, d);
    int64_t axis = (int64_t)(rnd() % (uint64_t)(2 * rank)) - rank;
    Case *c =
        new_case(17, "cumsum %s %dD axis %lld%s%s%s", dtype_name(dt), rank, (long long)axis,
                 axis_input ? " (an input)" : "", excl ? " exclusive" : "", rev ? " reverse" : "");
    add_input(c, "x", dt, rank, d, F_DATA, 0, 0);
    if (axis_input) {
        add_input(c, "a", axis_dt, 0, d, F_INDEX, -rank, rank);
        c->hostile = 1;
    } else {
        add_const_i64(c, "a", 0, d, &axis, 1);
    }
    mb_node(c->mb, "CumSum", "cumsum", "x,a", "y", mb_attr_i(c->mb, "exclusive", excl),
            mb_attr_i(c->mb, "reverse", rev), NULL);
    mb_output(c->mb, "y");
}

static inline void cumsum_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16,
                                  DT_INT32, DT_INT64,  DT_UINT32,  DT_UINT64};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int m = 0; m < 4; m++)
            cumsum_case(types[t], 1 + (int)(rnd() % 4), t % 3 == 0, rnd() % 2 ? DT_INT32 : DT_INT64,
                        m & 1, m & 2);
}

static inline void hardmax_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int opset = 11; opset <= 13; opset += 2) {
            int rank = 1 + (int)(rnd() % 3);
            int64_t d[4];
            dims_random(rank, d);
            int axis = (int)(rnd() % (uint64_t)rank);
            Case *c = new_case(opset, "hardmax %s %dD axis %d opset %d", dtype_name(types[t]), rank,
                               axis, opset);
            add_input(c, "x", types[t], rank, d, F_DATA, 0, 0);
            c->specials = true;
            mb_node(c->mb, "Hardmax", "hardmax", "x", "y", mb_attr_i(c->mb, "axis", axis), NULL);
            mb_output(c->mb, "y");
        }
}

static inline void trilu_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_BOOL, DT_INT64, DT_FLOAT16};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int m = 0; m < 3; m++) { // k absent, constant, an input
            int rank = 2 + (int)(rnd() % 2);
            int64_t d[4];
            dims_random(rank, d);
            int64_t k = rint_in(-8, 9), span = d[rank - 1] + d[rank - 2] + 3;
            if (rnd() % 4 == 0)
                k = rnd() % 2 ? INT64_MAX : INT64_MIN;
            bool upper = rnd() % 2;
            Case *c = new_case(17, "trilu %s %dD %s k %s %lld", dtype_name(types[t]), rank,
                               upper ? "upper" : "lower",
                               m == 0   ? "absent"
                               : m == 1 ? "constant"
                                        : "input",
                               (long long)k);
            add_input(c, "x", types[t], rank, d, F_DATA, 0, 0);
            const char *ins = "x";
            if (m == 1) {
                add_const_i64(c, "k", 0, d, &k, 1);
                ins = "x,k";
            } else if (m == 2) {
                add_input(c, "k", DT_INT64, 0, d, F_INDEX, -span, span);
                ins = "x,k";
            }
            mb_node(c->mb, "Trilu", "trilu", ins, "y", mb_attr_i(c->mb, "upper", upper), NULL);
            mb_output(c->mb, "y");
        }
}

static const char *red_names[] = {"none", "add", "mul", "max", "min"};

static inline void elements_case(bool scatter, DType dt, DType it, int rank, int red,
                                 bool same_shape) {
    int64_t xd[4], id[4];
    dims_random(rank, xd);
    int axis = (int)(rnd() % (uint64_t)rank);
    for (int d = 0; d < rank; d++)
        id[d] = same_shape || d == axis ? xd[d] : 1 + (int64_t)(rnd() % (uint64_t)xd[d]);
    if (!same_shape)
        id[axis] = 1 + (int64_t)(rnd() % 9);
    Case *c =
        new_case(18, "%s %s %s %dD axis %d%s%s%s", scatter ? "scatter_elements" : "gather_elements",
                 dtype_name(dt), dtype_name(it), rank, axis, same_shape ? "" : " smaller indices",
                 scatter ? " reduction " : "", scatter ? red_names[red] : "");
    add_input(c, "x", dt, rank, xd, F_DATA, 0, 0);
    add_input(c, "i", it, rank, id, F_INDEX, -xd[axis], xd[axis]);
    c->hostile = 1;
    c->specials = rnd() % 2;
    if (scatter) {
        add_input(c, "u", dt, rank, id, F_DATA, 0, 0);
        mb_node(c->mb, "ScatterElements", "scatter", "x,i,u", "y", mb_attr_i(c->mb, "axis", axis),
                mb_attr_s(c->mb, "reduction", red_names[red]), NULL);
    } else {
        mb_node(c->mb, "GatherElements", "gather", "x,i", "y", mb_attr_i(c->mb, "axis", axis),
                NULL);
    }
    mb_output(c->mb, "y");
}

// Gather with indices computed at run time (constant ones are fission's).
static inline void gather_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_INT64, DT_FLOAT16, DT_BOOL};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int r = 0; r < 3; r++) {
            int rank = 1 + (int)(rnd() % 3), irank = (int)(rnd() % 3);
            int64_t xd[4], id[4];
            dims_random(rank, xd);
            dims_random(irank, id);
            int axis = (int)(rnd() % (uint64_t)rank) - (rnd() % 2 ? rank : 0);
            int a = axis < 0 ? axis + rank : axis;
            DType it = r == 1 ? DT_INT32 : DT_INT64;
            Case *c = new_case(17, "gather %s %s data %dD indices %dD axis %d",
                               dtype_name(types[t]), dtype_name(it), rank, irank, axis);
            add_input(c, "x", types[t], rank, xd, F_DATA, 0, 0);
            add_input(c, "i", it, irank, id, F_INDEX, -xd[a], xd[a]);
            c->hostile = 1;
            mb_node(c->mb, "Gather", "gather", "x,i", "y", mb_attr_i(c->mb, "axis", axis), NULL);
            mb_output(c->mb, "y");
        }
}

static inline void elements_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_INT64, DT_FLOAT16, DT_INT32, DT_DOUBLE, DT_UINT8};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int same = 0; same < 2; same++) {
            DType it = rnd() % 2 ? DT_INT32 : DT_INT64;
            elements_case(false, types[t], it, 1 + (int)(rnd() % 4), 0, same);
            elements_case(true, types[t], it, 1 + (int)(rnd() % 3), 0, same);
            elements_case(true, types[t], it, 1 + (int)(rnd() % 3), 1 + (int)(rnd() % 4), same);
        }
    elements_case(false, DT_BOOL, DT_INT64, 2, 0, true);
    elements_case(true, DT_BOOL, DT_INT64, 2, 0, false);
}

static inline void nd_case(bool scatter, DType dt, DType it, int red) {
    int rank = 1 + (int)(rnd() % 4);
    int64_t xd[4];
    dims_random(rank, xd);
    int64_t b = scatter || rank < 2 ? 0 : (int64_t)(rnd() % (uint64_t)rank);
    int64_t q = 1 + (int64_t)(rnd() % (uint64_t)(rank - b));
    // indices: data's batch dims, then up to two dims of tuples, then q.
    int64_t id[6];
    int ir = 0;
    for (int d = 0; d < b; d++)
        id[ir++] = xd[d];
    int extra = (int)(rnd() % 3);
    for (int d = 0; d < extra; d++)
        id[ir++] = odd_dim();
    id[ir++] = q;
    if (ir > 4) // the test keeps ranks small
        return;
    Case *c = new_case(18, "%s %s %s data %dD batch %lld depth %lld%s%s",
                       scatter ? "scatter_nd" : "gather_nd", dtype_name(dt), dtype_name(it), rank,
                       (long long)b, (long long)q, scatter ? " reduction " : "",
                       scatter ? red_names[red] : "");
    add_input(c, "x", dt, rank, xd, F_DATA, 0, 0);
    // One range for every component: the smallest dim they index keeps them all valid.
    int64_t lim = xd[b];
    for (int64_t j = 0; j < q; j++)
        lim = ORCH_MIN(lim, xd[b + j]);
    add_input(c, "i", it, ir, id, F_INDEX, -lim, lim);
    c->hostile = 1;
    if (scatter) {
        int64_t ud[8];
        int ur = 0;
        for (int d = 0; d < ir - 1; d++)
            ud[ur++] = id[d];
        for (int d = (int)q; d < rank; d++)
            ud[ur++] = xd[d];
        if (ur > 4) {
            n_cases--;
            mb_free(c->mb);
            return;
        }
        add_input(c, "u", dt, ur, ud, F_DATA, 0, 0);
        mb_node(c->mb, "ScatterND", "scatter", "x,i,u", "y",
                mb_attr_s(c->mb, "reduction", red_names[red]), NULL);
    } else {
        mb_node(c->mb, "GatherND", "gather", "x,i", "y", mb_attr_i(c->mb, "batch_dims", b), NULL);
    }
    mb_output(c->mb, "y");
}

static inline void nd_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_INT64, DT_FLOAT16, DT_INT8};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int r = 0; r < 3; r++) {
            DType it = rnd() % 2 ? DT_INT32 : DT_INT64;
            nd_case(false, types[t], it, 0);
            nd_case(true, types[t], it, r == 0 ? 0 : 1 + (int)(rnd() % 4));
        }
}

static inline void one_hot_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_INT64, DT_BOOL, DT_FLOAT16};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int r = 0; r < 2; r++) {
            int rank = 1 + (int)(rnd() % 3);
            int64_t d[4];
            dims_random(rank, d);
            int64_t depth = 1 + (int64_t)(rnd() % 12);
            int64_t axis = (int64_t)(rnd() % (uint64_t)(rank + 1)) - (rnd() % 2 ? rank + 1 : 0);
            DType it = r ? DT_INT32 : DT_INT64;
            Case *c = new_case(17, "one_hot %s into %s %dD depth %lld axis %lld", dtype_name(it),
                               dtype_name(types[t]), rank, (long long)depth, (long long)axis);
            // Out-of-range indices select nothing: they are data, not errors.
            add_input(c, "i", it, rank, d, F_INDEX, -depth - 3, depth + 3);
            const int64_t one = 1, two = 2;
            int64_t dv = depth;
            add_const_i64(c, "depth", 1, &one, &dv, 1);
            add_input(c, "vals", types[t], 1, &two, F_DATA, 0, 0);
            mb_node(c->mb, "OneHot", "one_hot", "i,depth,vals", "y", mb_attr_i(c->mb, "axis", axis),
                    NULL);
            mb_output(c->mb, "y");
        }
}

static inline void reverse_sequence_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_INT64, DT_FLOAT16};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int batch_axis = 0; batch_axis < 2; batch_axis++) {
            int rank = 2 + (int)(rnd() % 2);
            int64_t d[4];
            dims_random(rank, d);
            int time_axis = 1 - batch_axis;
            DType lt = rnd() % 2 ? DT_INT32 : DT_INT64;
            Case *c = new_case(17, "reverse_sequence %s %dD batch_axis %d lens %s",
                               dtype_name(types[t]), rank, batch_axis, dtype_name(lt));
            add_input(c, "x", types[t], rank, d, F_DATA, 0, 0);
            add_input(c, "lens", lt, 1, &d[batch_axis], F_INDEX, 0, d[time_axis] + 1);
            c->hostile = 1;
            mb_node(c->mb, "ReverseSequence", "rev", "x,lens", "y",
                    mb_attr_i(c->mb, "batch_axis", batch_axis),
                    mb_attr_i(c->mb, "time_axis", time_axis), NULL);
            mb_output(c->mb, "y");
        }
}

// LpPool over 1-3 spatial axes: kernels, strides, dilations, pads, ceil_mode, auto_pad, p.
static inline void lp_pool_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16};
    static const char *auto_pads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    for (size_t t = 0; t < ORCH_COUNT(types); t++)
        for (int r = 0; r < 4; r++) {
            int S = 1 + (int)(rnd() % 3);
            int64_t d[5] = {1 + (int64_t)(rnd() % 2), odd_dim()}, k[3], st[3], dil[3], pads[6];
            for (int i = 0; i < S; i++) {
                d[2 + i] = 5 + (int64_t)(rnd() % 9); // past the widest window (5)
                k[i] = 1 + (int64_t)(rnd() % 3);
                st[i] = 1 + (int64_t)(rnd() % 2);
                dil[i] = 1 + (int64_t)(rnd() % 2);
                pads[i] = (int64_t)(rnd() % 2);
                pads[S + i] = (int64_t)(rnd() % 2);
            }
            int64_t p = r == 0 ? 1 : r == 1 ? 2 : 3;
            const char *ap = auto_pads[rnd() % 4];
            bool ceil = rnd() % 2;
            Case *c = new_case(18, "lp_pool %s %dD p %lld auto_pad %s%s", dtype_name(types[t]), S,
                               (long long)p, ap, ceil ? " ceil" : "");
            add_input(c, "x", types[t], 2 + S, d, F_DATA, 0, 0);
            bool notset = strcmp(ap, "NOTSET") == 0;
            mb_node(c->mb, "LpPool", "lp", "x", "y", mb_attr_ints(c->mb, "kernel_shape", S, k),
                    mb_attr_ints(c->mb, "strides", S, st), mb_attr_ints(c->mb, "dilations", S, dil),
                    mb_attr_i(c->mb, "p", p), mb_attr_i(c->mb, "ceil_mode", ceil),
                    mb_attr_s(c->mb, "auto_pad", ap),
                    notset ? mb_attr_ints(c->mb, "pads", 2 * S, pads) : NULL, NULL);
            mb_output(c->mb, "y");
        }
}

// GridSample: every mode, padding and align_corners, at opset 16 and 20, every float type, a
// grid reaching past [-1, 1]; the data with NaN, infinities and -0; 4-D and 5-D.
static inline void grid_sample_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16};
    static const char *modes[2][3] = {{"bilinear", "nearest", "bicubic"},
                                      {"linear", "nearest", "cubic"}};
    static const char *pads[] = {"zeros", "border", "reflection"};
    static const int64_t small[] = {1, 2, 3, 5, 7};
    int i = 0;
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++)
            for (int a = 0; a < 2; a++, i++) {
                DType t = types[i % 4];
                int v20 = i % 3 == 0;
                int64_t x[4] = {rint_in(1, 3), i % 5 == 1 ? 11 : rint_in(1, 4), odd_dim(),
                                odd_dim()};
                int64_t gd[4] = {x[0], small[rnd() % 5], small[rnd() % 5], 2};
                Case *c = new_case(v20 ? 20 : 16, "grid_sample %s %s %s align %d", dtype_name(t),
                                   modes[v20][m], pads[p], a);
                add_input(c, "x", t, 4, x, F_DATA, 0, 0);
                add_input(c, "grid", t, 4, gd, F_COORD, -1300, 1300);
                c->specials = true;
                mb_node(c->mb, "GridSample", "gs", "x,grid", "y",
                        mb_attr_s(c->mb, "mode", modes[v20][m]),
                        mb_attr_s(c->mb, "padding_mode", pads[p]),
                        mb_attr_i(c->mb, "align_corners", a), NULL);
                mb_output(c->mb, "y");
            }
    // Volumetric (5-D, opset 20): linear and nearest, every padding and align_corners, each
    // spatial size 1 or odd so that every axis's stride and clamp differ.
    static const char *modes5[] = {"linear", "nearest"};
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 3; p++)
            for (int a = 0; a < 2; a++, i++) {
                DType t = types[i % 4];
                int64_t x[5] = {rint_in(1, 3), i % 5 == 1 ? 11 : rint_in(1, 4), odd_dim(),
                                odd_dim(), odd_dim()};
                int64_t gd[5] = {x[0], small[rnd() % 5], small[rnd() % 5], small[rnd() % 5], 3};
                Case *c = new_case(20, "grid_sample 5-D %s %s %s align %d", dtype_name(t),
                                   modes5[m], pads[p], a);
                add_input(c, "x", t, 5, x, F_DATA, 0, 0);
                add_input(c, "grid", t, 5, gd, F_COORD, -1300, 1300);
                c->specials = true;
                mb_node(c->mb, "GridSample", "gs", "x,grid", "y",
                        mb_attr_s(c->mb, "mode", modes5[m]),
                        mb_attr_s(c->mb, "padding_mode", pads[p]),
                        mb_attr_i(c->mb, "align_corners", a), NULL);
                mb_output(c->mb, "y");
            }
}

// RoiAlign: avg and max, both coordinate modes, adaptive and fixed sampling, scales, ROIs past
// the map and inverted; the batch indices are the hostile input.
static inline void roi_align_cases(void) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16};
    static const float scales[] = {1.0f, 0.5f, 0.25f};
    int i = 0;
    for (int m = 0; m < 2; m++)
        for (int hp = 0; hp < 2; hp++)
            for (int sr = 0; sr < 3; sr += 2, i++) {
                DType t = types[i % 4];
                // One case past the C kernel's block of 64 channels (67 = 64 + 3).
                int64_t x[4] = {rint_in(1, 4), i == 5 ? 67 : rint_in(1, 4), odd_dim(), odd_dim()};
                int64_t R = rint_in(1, 6), rd[2] = {R, 4};
                float scale = scales[rnd() % 3];
                int64_t reach = (int64_t)((double)(x[2] > x[3] ? x[2] : x[3]) / scale * 1000);
                Case *c =
                    new_case(16, "roi_align %s %s %s sampling %d scale %g", dtype_name(t),
                             m ? "max" : "avg", hp ? "half_pixel" : "output_half_pixel", sr, scale);
                add_input(c, "x", t, 4, x, F_DATA, 0, 0);
                add_input(c, "rois", t, 2, rd, F_COORD, -2000, reach + 2000);
                add_input(c, "bi", DT_INT64, 1, &R, F_INDEX, 0, x[0]);
                c->hostile = 2;
                c->specials = true;
                mb_node(c->mb, "RoiAlign", "roi", "x,rois,bi", "y",
                        mb_attr_s(c->mb, "mode", m ? "max" : "avg"),
                        mb_attr_s(c->mb, "coordinate_transformation_mode",
                                  hp ? "half_pixel" : "output_half_pixel"),
                        mb_attr_i(c->mb, "sampling_ratio", sr),
                        mb_attr_i(c->mb, "output_height", rint_in(1, 4)),
                        mb_attr_i(c->mb, "output_width", rint_in(1, 4)),
                        mb_attr_f(c->mb, "spatial_scale", scale), NULL);
                mb_output(c->mb, "y");
            }
}

// Every operator's cases (LpPool's too when lp_pool).
static inline void opq_all_cases(bool lp_pool) {
    topk_cases();
    cumsum_cases();
    hardmax_cases();
    trilu_cases();
    gather_cases();
    elements_cases();
    nd_cases();
    one_hot_cases();
    reverse_sequence_cases();
    if (lp_pool)
        lp_pool_cases();
    grid_sample_cases();
    roi_align_cases();
}

#endif
