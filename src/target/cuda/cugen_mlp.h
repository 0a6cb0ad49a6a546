// The CUDA target's fused MLP chain kernels (emit_mlp_cuda.c; issue 8): a candidate of 2 to 8
// dense layers (cand_count_linear >= 2, analysed by the C target's mlp_analyse, cgen_mlp.h) as
// one kernel, one thread block per tile of BM rows, the tile's activations in shared memory
// (ping-pong) between layers, weights read through the read-only cache or staged in shared
// memory per layer, exact float32 FMAs on per-thread register tiles, the epilogues (bias,
// activation) through cexpr's CUDA dialect. Same ABI as cugen.h.
#ifndef ORCH_CUGEN_MLP_H
#define ORCH_CUGEN_MLP_H

#include "cugen.h"

// Kernel class (KernelConfig.cls; 11..15 are cugen.h's).
enum { CUCLS_MLP = 20 };

bool cugen_mlp_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs (rows per block, threads, rows per thread, weight staging) from the device
// model, best estimate first; returns how many.
int cugen_mlp_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, KernelConfig *out,
                      int k);
int cugen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const char *fn, StrBuf *src, CudaLaunch *launch, Err *e);

#endif
