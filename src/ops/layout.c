// Layout and shape ONNX ops: Shape, Size, Identity, Reshape, Transpose, Concat, Slice, Gather...
#include "ops.h"

#include <string.h>

static int infer_identity(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    (void)e;
    return ST_OK;
}

static int run_identity(const OpRun *r, Err *e) {
    (void)e;
    memcpy(r->y[0], r->x[0], tensor_nbytes(r->out[0]));
    return ST_OK;
}

// Shape-15: optional start/end attributes select a range of axes.
static int infer_shape(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t start = node_attr_i(n, "start", 0), end = node_attr_i(n, "end", x->rank);
    if (start < 0)
        start += x->rank;
    if (end < 0)
        end += x->rank;
    start = ORCH_MAX(0, ORCH_MIN(start, x->rank));
    end = ORCH_MAX(start, ORCH_MIN(end, x->rank));
    int64_t len = end - start;
    (void)e;
    tensor_set_shape(node_output(g, n, 0), DT_INT64, 1, &len);
    return ST_OK;
}

static int run_shape(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    int64_t start = node_attr_i(r->n, "start", 0);
    if (start < 0)
        start += x->rank;
    start = ORCH_MAX(0, ORCH_MIN(start, x->rank));
    int64_t *y = r->y[0];
    for (int64_t i = 0; i < r->out[0]->dims[0]; i++)
        y[i] = x->dims[start + i];
    return ST_OK;
}

const OpDef ops_layout[] = {
    {"Identity", infer_identity, run_identity, 1, 1, 1, 1, 0},
    {"Shape", infer_shape, run_shape, 1, 1, 1, 1, OPF_SHAPE_ONLY},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
