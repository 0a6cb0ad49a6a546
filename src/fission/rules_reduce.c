// Fission rules for reductions and normalisations: Softmax, LayerNorm, InstanceNorm, BatchNorm,
// Reduce*, ArgMax/ArgMin, global pools become REDUCE + ELEMWISE primitives.
#include "fission.h"

#include <string.h>

// Softmax / LogSoftmax along one axis (opset >= 13) with the max subtracted first, so large
// logits do not overflow: m = max(x), e = exp(x - m), s = sum(e), y = e / s (log: x - m - log s).
static int rule_softmax(FissionCtx *fc) {
    const Tensor *X = fc_in_t(fc, 0);
    if (!dtype_is_float(X->dtype) || fc->n->opset < 13)
        return ST_UNSUPPORTED;
    int64_t axis = node_attr_i(fc->n, "axis", -1);
    if (axis < 0)
        axis += X->rank;
    uint32_t axes = 1u << axis;
    bool log_form = strcmp(fc->n->op, "LogSoftmax") == 0;
    int x = fc_in(fc, 0);
    int m = pb_reduce(&fc->b, RED_MAX, x, axes, true, false);
    int c = pb_ew2(&fc->b, EW_SUB, x, m);
    int ex = pb_ew1(&fc->b, EW_EXP, c);
    int s = pb_reduce(&fc->b, RED_SUM, ex, axes, true, false);
    int y = log_form ? pb_ew2(&fc->b, EW_SUB, c, pb_ew1(&fc->b, EW_LOG, s))
                     : pb_ew2(&fc->b, EW_DIV, ex, s);
    fc_set_out(fc, 0, y);
    return ST_OK;
}

const FissionRuleDef fission_rules_reduce[] = {
    {"Softmax", rule_softmax},
    {"LogSoftmax", rule_softmax},
    {NULL, NULL},
};
