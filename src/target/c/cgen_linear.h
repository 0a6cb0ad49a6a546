// The C target's emitter for candidates built around one LINEAR primitive (emit_linear.c):
// matmul (batched, broadcast batch dims) as a BLIS-style packed GEMM with an AVX-512/AVX2/portable
// register-tile micro-kernel, GEMV and dot paths for skinny products; 1-, 2- and 3-D convolution
// as an implicit GEMM (patch panels packed per tile, never a materialised im2col); depthwise 2-D
// convolution as a direct kernel. Pointwise primitives feeding the LINEAR's operands (prologues)
// are evaluated while packing; pointwise primitives after it up to the sink (epilogues) are
// applied as each output tile is finished. Values come from cexpr (cgen.h).
// Needs: a verified primitive graph and a candidate of it. Guarantees: emitted kernels follow the
// kernel ABI of target.h and compute the candidate's output as prim_interp.c does, up to float
// rounding (sums are reassociated).
#ifndef ORCH_CGEN_LINEAR_H
#define ORCH_CGEN_LINEAR_H

#include "../../base/strbuf.h"
#include "../../candidates/candidates.h"
#include "../target.h"

// Kernel classes of the linear emitter (KernelConfig.cls; 1 and 2 are cgen.h's).
enum { CCLS_MATMUL = 3, CCLS_CONV = 4, CCLS_DWCONV = 5 };

// Exactly one LINEAR (matmul or convolution, float32), no OPAQUE or REDUCE primitive, epilogue
// primitives elementwise at the LINEAR's output shape, and every value expressible by cexpr.
bool cgen_lin_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs, best estimate first (score: the hardware model's seconds); returns how many.
int cgen_lin_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
// Appends the definition of `void fn(const void *const *in, void *out)` and its static helpers
// (named fn_*) to src.
int cgen_lin_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);
// Vector helpers (orch_lv_*) the micro-kernels use; appended after cgen_prelude().
const char *cgen_lin_prelude(void);

#endif
