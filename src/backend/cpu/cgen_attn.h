// The fused attention kernels of the C target (emit_attention.c): one candidate of
// candidates/attention.h (S = Q·Kt, the pre-softmax elementwise chain, softmax over the keys,
// O = P·V) computed per block of query rows with an online softmax (running max and sum per row,
// the output accumulators rescaled when the max grows), key tile by key tile, so the M x N score
// matrix never reaches memory. K (transposed) and V tiles are staged through cexpr into small
// per-thread buffers, so strided, transposed (head split) or broadcast layouts are read once.
// Needs: a verified primitive graph and an attention candidate of it. Guarantees: the kernel
// follows target.h's ABI and computes the candidate's output as prim_interp.c does, up to
// float32 rounding (sums reassociated, the softmax normalised once at the end).
#ifndef ORCH_CGEN_ATTN_H
#define ORCH_CGEN_ATTN_H

#include "../../base/strbuf.h"
#include "../../candidates/candidates.h"
#include "../target.h"

// Kernel class of the fused attention (KernelConfig.cls; 1..6 are cgen.h's, cgen_linear.h's and
// cgen_mlp.h's).
enum { CCLS_ATTN = 7 };

// A fused attention kernel's config (CCLS_ATTN). Canonical desc "cls=attn bm=.. bn=.. mr=.. nv=..
// st=.." (then " gq=1" where set); KernelConfig.p[] = bm, bn, mr, nv, st, gq.
typedef struct CAttnConfig {
    int64_t bm; // query rows per block (one OpenMP task)
    int64_t bn; // keys per tile
    int mr;     // register tile rows
    int nv;     // register tile columns, in vectors of ORCH_LV floats
    int st;     // staging: 0, each block stages each key tile; 1, every key tile of every batch
                // index is staged once, before the blocks, into whole-batch buffers
    int gq;     // grouped-query attention (AttnSpec.kv_group > 1): 1, a task takes the block's
                // rows of every head of a K/V group, staging each key tile once for all of them
                // (st=1: one staged copy per group); 0, one head per task
} CAttnConfig;
// Writes t into k: cls, p[] (unused slots zero), desc; score 0.
void cgen_attn_config_pack(const CAttnConfig *t, KernelConfig *k);
void cgen_attn_config_unpack(const KernelConfig *k, CAttnConfig *t);

// Whether c is an attention candidate (attn_analyse) whose every value cexpr can emit (the
// pre-softmax chain reads only the scores and kernel inputs or constants).
bool cgen_attn_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs (query rows per block, key tile, register tile), best estimate first; returns
// how many.
int cgen_attn_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                      int k);
// Appends `void fn(const void *const *in, void *out)` and its static helpers (fn_*) to src.
// Needs cgen_prelude() and cgen_lin_prelude() (orch_lv_*) earlier in the unit.
int cgen_attn_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                   StrBuf *src, Err *e);

#endif
