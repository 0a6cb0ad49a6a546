// Fission rules for linear ONNX ops: MatMul, Gemm, Conv, ConvTranspose, Einsum (matmul forms)
// become LINEAR primitives with LAYOUT (transposes, unit axes) and ELEMWISE (bias, alpha/beta)
// primitives around them.
#include "fission.h"

#include <string.h>

// MatMul with numpy's 1-D promotion: a 1-D A gains a leading unit axis, a 1-D B a trailing one,
// and the product loses them again.
static int rule_matmul(FissionCtx *fc) {
    const Tensor *A = fc_in_t(fc, 0), *B = fc_in_t(fc, 1);
    if (!dtype_is_float(A->dtype) || A->dtype == DT_FLOAT16 || A->dtype == DT_BFLOAT16)
        return ST_UNSUPPORTED;
    int a = fc_in(fc, 0), b = fc_in(fc, 1);
    if (A->rank == 1) {
        int64_t d[2] = {1, A->dims[0]};
        a = pb_reshape(&fc->b, a, 2, d);
    }
    if (B->rank == 1) {
        int64_t d[2] = {B->dims[0], 1};
        b = pb_reshape(&fc->b, b, 2, d);
    }
    int y = pb_matmul(&fc->b, a, b);
    const Tensor *Y = fc_out_t(fc, 0);
    if (A->rank == 1 || B->rank == 1)
        y = pb_reshape(&fc->b, y, Y->rank, Y->dims);
    fc_set_out(fc, 0, y);
    return ST_OK;
}

const FissionRuleDef fission_rules_linear[] = {
    {"MatMul", rule_matmul},
    {NULL, NULL},
};
