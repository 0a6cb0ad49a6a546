// The float32 matrix product the linear ops (MatMul, Gemm, Conv, ConvTranspose) run on:
// C = alpha * op(A) * op(B) + beta * C on row-major matrices, op(X) = X or X^T. Cache-blocked,
// register-tiled and spread over OpenMP threads; sums in float, as ONNX Runtime does.
#ifndef ORCH_GEMM_H
#define ORCH_GEMM_H

#include <stdbool.h>
#include <stdint.h>

// Products of fewer multiply-adds than this run on the calling thread: forking threads costs more
// than it saves, and far more when other processes hold the cores. Callers use it too, to take
// many small products in parallel instead.
#define GEMM_PARALLEL_MIN (1 << 22)

// op(A) is M x K, op(B) is K x N, C is M x N; lda/ldb/ldc are the row strides of A, B, C as
// stored (so A stored K x M when trans_a). beta == 0 overwrites C without reading it; K == 0
// gives beta * C. A and B must not overlap C.
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc);

#endif
