// Internal interface shared by the CUDA target's linear emitter files only (emit_linear_cuda.c,
// emit_matmul_cuda.c, emit_conv_cuda.c): the analysis (the C target's Lin, cgen_linear.h), the
// kernel preamble and the epilogue, and the kernel bodies per variant.
// Needs: ORCH_CGEN_LINEAR_INTERNAL defined before inclusion. Guarantees: every body appends one
// kernel with the ABI of cugen.h to E->s and fills its launch geometry.
#ifndef ORCH_CUGEN_LIN_INTERNAL_H
#define ORCH_CUGEN_LIN_INTERNAL_H

#include "../c/cgen_linear.h"
#include "cugen_linear.h"

// Lin of the candidate (matmul of any rank, 2-D convolution); false when not generated here.
bool culin_analyse(const PrimGraph *pg, const Candidate *c, Lin *L);
// `ORCH_KERNEL void [__launch_bounds__(nthreads)] fn(OrchArgs a) {`, `in[]` and `o` declared.
void culin_kernel_head(const Emit *E, int nthreads);
// The candidate's output value from the LINEAR's value `acc` at GEMM row i, column j (C
// expressions; batch coordinates in scope); the value's name goes to dst.
int culin_emit_epi_value(Emit *E, int ind, const char *acc, const char *i, const char *j, char *dst,
                         size_t cap, Err *e);
// The largest split-K workspace (floats: splits x batch x M x N) a kernel may declare.
#define CULIN_SPLIT_MAX_WS (4.0 * 1024 * 1024)
// Static shared memory bytes and estimated registers per thread of a tiled config.
int64_t culin_smem_bytes(const int64_t *P);
int culin_simt_regs(const Lin *L, const int64_t *P);

// Kernel bodies (emit_matmul_cuda.c, emit_conv_cuda.c).
int culin_emit_simt(Emit *E, CudaLaunch *ln, Err *e);
int culin_emit_tf32(Emit *E, CudaLaunch *ln, Err *e);
// FP16 / BF16 operands (E->cfg's variant) on mma.sync.m16n8k16, float32 accumulators.
int culin_emit_mma16(Emit *E, CudaLaunch *ln, Err *e);
int culin_emit_gemv(Emit *E, CudaLaunch *ln, Err *e);
int culin_emit_dw(Emit *E, CudaLaunch *ln, Err *e);
// Direct 2-D convolution for at most CULIN_DIRECT_MAX_M output channels per group whose weights
// fit in shared memory (culin_direct_ok).
int culin_emit_direct(Emit *E, CudaLaunch *ln, Err *e);
bool culin_direct_ok(const Lin *L);
#define CULIN_DIRECT_MAX_M 8
#define CULIN_DIRECT_MAX_W 8192 // weight floats staged in shared memory

#endif
