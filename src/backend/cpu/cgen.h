// Internal interface of the C target's pointwise and reduction emitters (emit_pointwise.c,
// emit_reduce.c) and of its translation-unit prelude (prelude_c.c); target_c.c dispatches to
// these. Values come from codegen's cexpr, kernel classes from codegen/classify.h.
// Needs: a verified primitive graph and a candidate of it. Guarantees: emitted code follows the
// kernel ABI of target.h and computes exactly what prim_interp.c computes (float32 math may run in
// float; float16/bfloat16 values are computed in double and rounded after every instruction).
#ifndef ORCH_CGEN_H
#define ORCH_CGEN_H

#include "../../base/strbuf.h"
#include "../../candidates/candidates.h"
#include "../../codegen/cexpr.h"
#include "../../codegen/classify.h"
#include "../target.h"

// ---- pointwise and reduction kernels (emit_pointwise.c, emit_reduce.c) ----

// A pointwise kernel's config (CCLS_POINTWISE). Canonical desc "cls=pw flat=F chunk=C par=P";
// KernelConfig.p[0] = chunk, p[1] = par, p[2] = flat.
typedef struct CPwConfig {
    int flat;      // the first axis of the flat inner loop (rank - 1: the last axis alone)
    int64_t chunk; // elements of the innermost loop per parallel task (0: the loop is not split)
    bool par;      // the nest forks (OpenMP)
} CPwConfig;
// Writes t into k: cls, p[] (unused slots zero), desc; score 0.
void cgen_pw_config_pack(const CPwConfig *t, KernelConfig *k);
// Reads k's p[] as the emitter does (k->cls is not checked).
void cgen_pw_config_unpack(const KernelConfig *k, CPwConfig *t);

// A reduction kernel's config (CCLS_REDUCE). Canonical desc "cls=red mode=fused|mat par=P";
// KernelConfig.p[0] = fused, p[1] = par.
typedef struct CRedConfig {
    bool fused; // one row loop computing every reduction (else each into its own buffer)
    bool par;   // the row loops fork (OpenMP)
} CRedConfig;
void cgen_red_config_pack(const CRedConfig *t, KernelConfig *k);
void cgen_red_config_unpack(const KernelConfig *k, CRedConfig *t);

// Candidates with no LINEAR and no OPAQUE primitive whose structure the emitters handle
// (ELEMWISE/LAYOUT only: CCLS_POINTWISE; with REDUCE primitives: CCLS_REDUCE).
bool cgen_pw_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs, best estimate first, each with its canonical desc and score; returns how many.
int cgen_pw_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                    int k);
// Appends the definition of `void fn(const void *const *in, void *out)` (and static tables named
// after fn) to src.
int cgen_pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                 StrBuf *src, Err *e);
// The text every translation unit starts with: includes, static inline helpers (names orch_*:
// those cexpr's C dialect calls).
const char *cgen_prelude(void);

// The reduction class's entry points (emit_reduce.c) and the CPU model both classes price
// configs with (emit_pointwise.c).
bool cgen_red_supports(const PrimGraph *pg, const Candidate *c);
int cgen_red_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
int cgen_red_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);
// Estimated seconds of a kernel moving `bytes`, computing `elems` elements of `ops` vector
// operations each, with par_units iterations of its parallel loop and inner loops of inner_len.
double cgen_estimate(const HwInfo *hw, double bytes, double elems, double ops, int64_t par_units,
                     int64_t inner_len, bool parallel);

#endif
