// Linear ONNX ops: MatMul, Gemm, Conv, ConvTranspose, Einsum (matmul forms), on a blocked GEMM.
#include "ops.h"

const OpDef ops_linear[] = {
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
