// The CUDA target's fused attention kernels (emit_attention_cuda.c): a candidate that
// attn_analyse accepts (candidates/attention.h: S = Q·Kt, the pre-softmax ELEMWISE chain, the
// fissioned softmax, O = P·V, optionally the LAYOUT primitives producing Q, Kt, V) as one
// flash-style kernel: one thread block per (batch index, tile of BQ queries), key tiles of BK
// staged in shared memory, an online (running max and sum) softmax, the score matrix never
// leaving the chip. Two designs: SIMT, exact float32 FMAs (the default precision); and, where
// the compile's precision allows it on sm_80 and newer, tensor cores (mma.sync
// with TF32, FP16 or BF16 operands, float32 accumulation; FlashAttention-2's layout: a warp per
// 16 query rows). Both skip the key tiles a constant causal mask hides from a whole query tile.
// Half storage (float16 / bfloat16 tensors): tensor cores of the storage type's mma only, on half
// tiles staged as they lie; SIMT converting as it stages; float32 scores, softmax and
// accumulators; O rounded once to the output's dtype. Same ABI as cugen.h.
#ifndef ORCH_CUGEN_ATTN_H
#define ORCH_CUGEN_ATTN_H

#include "cugen.h"

// Kernel class (KernelConfig.cls; 11..15 are cugen.h's, 20 cugen_mlp.h's).
enum { CUCLS_ATTN = 21 };

// KernelConfig.p[] slots: queries per block (BQ), keys per tile (BK), query rows per thread
// (TM), key columns per thread (TN); CP: 1 stages the tiles of Q, Kt and V that allow it by
// cp.async into double buffers (sm_80+), 0 through registers; SPLIT (0 or 1: none): the keys
// split over S blocks per query tile (flash-decoding, for grids that would not fill the GPU:
// few queries, long key ranges), each publishing its running max, sum and unnormalised O to a
// workspace in the module's global memory, the last to finish (a per-tile counter, reset by
// that block) merging them in split order. The threads of a block: (BQ / TM) row groups of
// CG = BK / TN threads each (a power of two up to 32, so a row group lies in one warp).
// MMA: the arithmetic (CUA_MMA_*); 0 is the SIMT kernel above. The tensor-core kernel reads
// BQ (a multiple of 16: BQ / 16 warps of 16 query rows each), BK (a multiple of 16), CP and
// QREG (1: each warp holds its Q fragments in registers for the whole key loop; 0: it reads
// them from the staged Q tile at every key tile, for head dims whose fragments would not fit);
// TM and TN are 0; SPLIT as above (0 or 1: none); KW (0 or 1: one) 2 or 4 key warps per 16 query
// rows, each taking its share of every key tile with an online softmax of its own, merged
// through shared memory (more warps per SM where the query tiles are few).
enum { CUA_BQ = 0, CUA_BK, CUA_TM, CUA_TN, CUA_CP, CUA_SPLIT, CUA_MMA, CUA_QREG, CUA_KW };
// The typed config of CUCLS_ATTN (cugen.h's typed configs): the slots above as named fields. desc
// "cls=attn bq=.. bk=.. tm=.. tn=.. cp=.. s=.." (SIMT; s=1 unsplit), or "cls=attn
// v=tf32|f16|bf16 bq=.. bk=.. q=reg|smem cp=..[ kw=K][ s=S]" (tensor cores).
typedef struct CuAttnConfig {
    int64_t mma;   // CUA_MMA: CUA_MMA_* (SIMT 0)
    int64_t bq;    // CUA_BQ: queries a block
    int64_t bk;    // CUA_BK: keys a tile
    int64_t tm;    // CUA_TM: SIMT: query rows a thread (tensor cores 0)
    int64_t tn;    // CUA_TN: SIMT: key columns a thread (tensor cores 0)
    int64_t cp;    // CUA_CP: 1: tiles by cp.async into double buffers where they allow it
    int64_t split; // CUA_SPLIT: key splits a query tile (0 or 1: none; SIMT configs hold 1,
                   // tensor-core ones 0 where unsplit)
    int64_t qreg;  // CUA_QREG: tensor cores: 1: Q fragments in registers, 0: re-read per tile
    int64_t kw;    // CUA_KW: tensor cores: key warps per 16 query rows (0 or 1: one)
} CuAttnConfig;
void cuattn_config_pack(const CuAttnConfig *ac, KernelConfig *k);
bool cuattn_config_unpack(const KernelConfig *k, CuAttnConfig *ac);

// CUA_MMA values: SIMT float32; TF32 operands (cvt.rna) on mma.m16n8k8; FP16 or BF16 operands
// (cvt.rn) on mma.m16n8k16. The configs offered follow opt->precision: tensor-core ones
// only under the matching precision (never under fp32, which promises exact float32 FMAs).
enum { CUA_MMA_SIMT = 0, CUA_MMA_TF32 = 1, CUA_MMA_F16 = 2, CUA_MMA_BF16 = 3 };

// Whether c is an attention candidate this emitter generates (its smallest config fits the
// shared memory of every GPU orch targets).
bool cugen_attn_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt);
// Up to k configs from the device model (shared memory, registers, occupancy, waves), best
// estimate first; returns how many.
int cugen_attn_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                       const TargetOptions *opt, KernelConfig *out, int k);
int cugen_attn_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                    const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                    CudaLaunch *launch, Err *e);

#endif
