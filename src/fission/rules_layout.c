// Fission rules for layout ONNX ops: each becomes a LAYOUT primitive (an index map), so that a
// consumer can later read through it without materialising the tensor.
#include "fission.h"

#include <string.h>

static int rule_transpose(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    int perm[ORCH_MAX_RANK];
    const int64_t *p;
    int n = node_attr_ints(fc->n, "perm", &p);
    for (int d = 0; d < X->rank; d++)
        perm[d] = n == X->rank ? (int)p[d] : X->rank - 1 - d;
    fc_set_out(fc, 0, pb_transpose(&fc->b, fc_in(fc, 0), perm));
    return ST_OK;
}

// Every op that only changes dims over the same element order: one reshape to the output shape.
static int rule_reshape(FissionCtx *fc) {
    const Tensor *Y = fc_out_t(fc, 0);
    fc_set_out(fc, 0, pb_reshape(&fc->b, fc_in(fc, 0), Y->rank, Y->dims));
    return ST_OK;
}

const FissionRuleDef fission_rules_layout[] = {
    {"Transpose", rule_transpose}, {"Reshape", rule_reshape}, {"Flatten", rule_reshape},
    {"Squeeze", rule_reshape},     {"Unsqueeze", rule_reshape}, {NULL, NULL},
};
