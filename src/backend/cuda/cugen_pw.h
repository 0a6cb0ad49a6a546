// Shared by the CUDA pointwise and reduction emitters (emit_pointwise_cuda.c,
// emit_reduce_cuda.c), which implement cugen.h's cugen_pw_*: the reduction class's entry points,
// the kernel head both classes start with, and their shared device-model helpers.
// Needs: what cugen.h needs. Guarantees: nothing beyond the declarations' comments.
#ifndef ORCH_CUGEN_PW_H
#define ORCH_CUGEN_PW_H

#include "cugen.h"
#include "device_model.h"

// CUCLS_REDUCE (emit_reduce_cuda.c): candidates with REDUCE primitives whose reductions all
// reduce the same axes of same-shaped inputs and are read on their own row.
bool cugen_red_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt);
int cugen_red_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k);
int cugen_red_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e);

// Appends `ORCH_KERNEL void __launch_bounds__(block) fn(OrchArgs a) {` and the typed locals
// in<j> (`const T *__restrict__`, read by cexpr in its CUDA dialect) and y (the output).
void cupw_kernel_head(const PrimGraph *pg, const Candidate *c, const char *fn, int block,
                      StrBuf *src);
// Appends, at indent, `const int64_t <prefix><d> = digit d of var;` for every d in [0, rank)
// whose bit is set in mask: the mixed-radix digits of var over the axes in mask (in order, the
// last one fastest). Unit axes and axes not in mask get no line; names of unit axes in mask are
// defined as 0. narrow: CUPW_WIDE, CUPW_NARROW (var < 2^31: digits computed in 32 bits) or
// CUPW_INDEX32 (also declared int, for a kernel whose offsets all fit: cexpr_set_index32).
enum { CUPW_WIDE = 0, CUPW_NARROW = 1, CUPW_INDEX32 = 2 };
void cupw_digits(StrBuf *code, int indent, const char *prefix, const char *var, int rank,
                 const int64_t *dims, uint32_t mask, int narrow);

// The DRAM bytes/s a streaming kernel reaches on device d (device_model.h), and the blocks of
// `block` threads resident per SM (its thread limit and the block limit; at least 1).
double cupw_bandwidth(const CuDevice *d);
int cupw_blocks_per_sm(const CuDevice *d, int block);

#endif
