// Private to the reduce family (reduce.c, norm.c, pool.c): the shape rules and kernels that
// reduce.c's ops_reduce table lists, plus small helpers they share: element access through
// double with a float32 fast path, and a strided walk over a tensor's elements.
#ifndef ORCH_OPS_REDUCE_INTERNAL_H
#define ORCH_OPS_REDUCE_INTERNAL_H

#include "ops.h"

// Reads / writes element i as double; float32 skips the dtype switch since it is the common case.
static inline double ld(DType t, const void *p, int64_t i) {
    return t == DT_FLOAT ? (double)((const float *)p)[i] : elem_get_f64(t, p, i);
}
static inline void st(DType t, void *p, int64_t i, double v) {
    if (t == DT_FLOAT)
        ((float *)p)[i] = (float)v;
    else
        elem_set_f64(t, p, i, v);
}

// Walks the elements of a tensor of shape dims in row-major order while keeping, for up to
// WALK_MAX operands, an element offset built from per-axis strides (0 on broadcast or reduced
// axes). Usage: walk_init, walk_add per operand, then read w.off[k] and call walk_next per element.
#define WALK_MAX 2
typedef struct Walk {
    int rank, n;
    int64_t dims[ORCH_MAX_RANK], idx[ORCH_MAX_RANK];
    int64_t str[WALK_MAX][ORCH_MAX_RANK];
    int64_t off[WALK_MAX];
} Walk;

static inline void walk_init(Walk *w, int rank, const int64_t *dims) {
    w->rank = rank;
    w->n = 0;
    for (int d = 0; d < rank; d++) {
        w->dims[d] = dims[d];
        w->idx[d] = 0;
    }
}

static inline void walk_add(Walk *w, const int64_t *strides) {
    ORCH_ASSERT(w->n < WALK_MAX);
    for (int d = 0; d < w->rank; d++)
        w->str[w->n][d] = strides[d];
    w->off[w->n++] = 0;
}

static inline void walk_next(Walk *w) {
    for (int d = w->rank - 1; d >= 0; d--) {
        for (int k = 0; k < w->n; k++)
            w->off[k] += w->str[k][d];
        if (++w->idx[d] < w->dims[d])
            return;
        for (int k = 0; k < w->n; k++)
            w->off[k] -= w->str[k][d] * w->dims[d];
        w->idx[d] = 0;
    }
}

// Product of dims[from, to).
static inline int64_t dims_prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= dims[d];
    return p;
}

// Dtype lists for op_need_dtype.
extern const DType reduce_float_types[]; // float16, bfloat16, float32, double

// norm.c
int norm_infer_batch(Graph *g, Node *n, Err *e);
int norm_run_batch(const OpRun *r, Err *e);
int norm_infer_instance(Graph *g, Node *n, Err *e);
int norm_run_instance(const OpRun *r, Err *e);
int norm_infer_layer(Graph *g, Node *n, Err *e);
int norm_run_layer(const OpRun *r, Err *e);
int norm_infer_group(Graph *g, Node *n, Err *e);
int norm_run_group(const OpRun *r, Err *e);
int norm_infer_lp(Graph *g, Node *n, Err *e);
int norm_run_lp(const OpRun *r, Err *e);
int norm_infer_mvn(Graph *g, Node *n, Err *e);
int norm_run_mvn(const OpRun *r, Err *e);

// pool.c: MaxPool, AveragePool and LpPool share one shape rule and one kernel (by op name).
int pool_infer(Graph *g, Node *n, Err *e);
int pool_run(const OpRun *r, Err *e);
int pool_infer_global(Graph *g, Node *n, Err *e);
int pool_run_global(const OpRun *r, Err *e);

#endif
