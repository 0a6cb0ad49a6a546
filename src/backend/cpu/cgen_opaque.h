// The operator kernels of the C target (emit_opaque_c.c): a candidate that is one OPAQUE
// primitive of an operator codegen/opaque_spec.h describes (TopK, CumSum, Hardmax, Trilu, Gather
// with computed indices, GatherElements, ScatterElements, GatherND, ScatterND, OneHot,
// ReverseSequence, LpPool) gets a
// generated kernel with target.h's operator ABI (several outputs, a status for indices out of
// range), its independent lines spread over OpenMP threads.
// Needs: a verified primitive graph and a candidate of it. Guarantees: the kernel computes every
// output exactly (bit for bit) as the reference op does, reads and writes nothing outside its
// buffers whatever the index operands hold, and returns CKERNEL_ERR_INDEX exactly where the
// reference op reports an index (or CumSum's axis, ReverseSequence's length) out of range.
#ifndef ORCH_CGEN_OPAQUE_H
#define ORCH_CGEN_OPAQUE_H

#include "../../candidates/candidates.h"
#include "../../codegen/opaque_spec.h"
#include "../target.h"

// Kernel class of the operator kernels (KernelConfig.cls; 1..7 are the other classes').
enum { CCLS_OPAQUE = 8 };

// The algorithms of an operator kernel: one for every operator but TopK, which either filters
// each line against a bar (the k-th best key seen so far, vectorised) and selects the k best of
// the few candidates (k small against the line), or sorts each whole line with a stable radix
// sort of its keys (k near the line's length).
enum { COPQ_ALG_PLAIN = 0, COPQ_ALG_SELECT = 1, COPQ_ALG_RADIX = 2 };

// An operator kernel's config (CCLS_OPAQUE). Canonical desc "cls=op alg=plain|select|radix par=P";
// KernelConfig.p[0] = alg, p[1] = par.
typedef struct COpqConfig {
    int alg;  // COPQ_ALG_*
    bool par; // the lines (or slices, or chunks) spread over OpenMP threads
} COpqConfig;
// Writes t into k: cls, p[] (unused slots zero), desc; score 0.
void cgen_opq_config_pack(const COpqConfig *t, KernelConfig *k);
void cgen_opq_config_unpack(const KernelConfig *k, COpqConfig *t);

bool cgen_opq_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs, best estimate first; returns how many.
int cgen_opq_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
// Appends `int fn(const void *const *in, void *const *out)` (the operator ABI) and its static
// helpers (fn_*) to src. Needs cgen_prelude() earlier in the translation unit.
int cgen_opq_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);

#endif
