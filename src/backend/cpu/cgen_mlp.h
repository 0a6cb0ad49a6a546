// The fused MLP chain kernels of the C target (emit_mlp.c): a candidate of 2 to 8 dense layers
// (codegen's MlpChain, mlp_spec.h; float32 chains only) computed per tile of rows, layer after
// layer, with the tile's activations kept in two small cache-resident ping-pong buffers; weights
// are read in place (zero-padded copies for widths that are not a multiple of 16); each layer's
// epilogue (bias, activation, or any elementwise function of the product and the layer's input:
// a gate, a residual) is applied through cexpr as the layer's tile is finished.
// Needs: a verified primitive graph and a candidate of it. Guarantees: the kernel follows
// target.h's ABI and computes the candidate's output as prim_interp.c does, up to float32
// rounding (sums are reassociated).
#ifndef ORCH_CGEN_MLP_H
#define ORCH_CGEN_MLP_H

#include "../../candidates/candidates.h"
#include "../../codegen/mlp_spec.h"
#include "../target.h"

// Kernel class of the fused MLP (KernelConfig.cls; 1..5 are cgen.h's and cgen_linear.h's).
enum { CCLS_MLP = 6 };

// An MLP chain kernel's config (CCLS_MLP). Canonical desc "cls=mlp rt=.. mr=.. nv=..";
// KernelConfig.p[] = rt, mr, nv.
typedef struct CMlpConfig {
    int64_t rt; // rows per tile (one OpenMP task computes every layer for them)
    int mr;     // register tile rows
    int nv;     // register tile columns, in vectors of ORCH_LV floats
} CMlpConfig;
// Writes t into k: cls, p[] (unused slots zero), desc; score 0.
void cgen_mlp_config_pack(const CMlpConfig *t, KernelConfig *k);
void cgen_mlp_config_unpack(const KernelConfig *k, CMlpConfig *t);

bool cgen_mlp_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs (rows per tile, register tile), best estimate first; returns how many.
int cgen_mlp_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
// Appends `void fn(const void *const *in, void *out)` and its static helpers (fn_*) to src.
// Needs cgen_prelude() and cgen_lin_prelude() (orch_lv_*) earlier in the translation unit.
int cgen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);

#endif
