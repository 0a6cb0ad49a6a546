// The CUDA target's operator kernels (emit_opaque_cuda.c): a candidate that is one OPAQUE
// primitive of an operator codegen/opaque_spec.h describes (TopK, CumSum, Hardmax, Trilu, Gather
// with computed indices, GatherElements, ScatterElements, GatherND, ScatterND, OneHot,
// ReverseSequence; LpPool with p = 1 or 2 over float32 and the half types) gets a generated GPU
// kernel, so the CPU interpreter is not needed at run time.
//
// The operator ABI on CUDA is cugen.h's (OrchArgs with ORCH_CUDA_OP_SLOTS more slots: output 1
// and the status word after the inputs): a kernel that meets an index out of range (or CumSum's
// axis, a ReverseSequence length) stores CKERNEL_ERR_INDEX in the status word, skips the access
// and goes on; its outputs are then unspecified. Whoever launches it clears the word first and
// reads it after the launch (session_cuda.c, cuda_lab.c).
// Needs: a verified primitive graph and a candidate of it. Guarantees: every output bit for bit
// as the reference op computes it (prim_eval_opaque), and no access outside the buffers whatever
// the index operands hold.
#ifndef ORCH_CUGEN_OPQ_H
#define ORCH_CUGEN_OPQ_H

#include "cugen.h"

// Kernel class (KernelConfig.cls; 11..16 are cugen.h's, 20 and 21 the MLP's and attention's).
enum { CUCLS_OPAQUE = 22 };

// How an operator kernel spreads its work (CuOpqConfig.alg):
//   plain  a thread per output element, or per independent line where a line is sequential
//          (CumSum, Hardmax, the scatters' index lines);
//   warp   Hardmax: a warp per line (lanes stride the line, then a butterfly of the best);
//   sort   TopK: a block per line, keys with their positions bitonic-sorted in shared memory; a
//          line longer than the buffer goes through it in rounds, only the elements above the
//          k-th best so far entering;
//   rank   TopK: a thread per element counts the elements ranked above it (a block per chunk of
//          a line, the line staged through shared memory): O(n^2) a line, but any k;
//   scan   CumSum over integers: a block per line, a block-wide scan a block of elements at a
//          time (wrapping sums are associative, so any order gives the reference's bits).
enum { CUOPQ_PLAIN = 0, CUOPQ_WARP = 1, CUOPQ_SORT = 2, CUOPQ_RANK = 3, CUOPQ_SCAN = 4 };

// CUCLS_OPAQUE: p[0] alg, p[1] block; desc "cls=cuop alg=A bs=B".
typedef struct CuOpqConfig {
    int64_t alg;   // CUOPQ_*
    int64_t block; // threads a block
} CuOpqConfig;
void cuopq_config_pack(const CuOpqConfig *t, KernelConfig *k);
bool cuopq_config_unpack(const KernelConfig *k, CuOpqConfig *t);

// Whether c is one OPAQUE primitive with an operator kernel here (its spec analyses, the ABI's
// slots fit).
bool cugen_opq_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt);
int cugen_opq_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k);
int cugen_opq_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e);

#endif
