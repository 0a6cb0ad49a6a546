// The CUDA target's fused MLP chain kernels (emit_mlp_cuda.c): a candidate of 2 to 8
// dense layers (cand_count_linear >= 2, analysed by codegen's mlp_analyse, mlp_spec.h) as
// one kernel; no activation between layers touches global memory. Variants (the config's v=):
//   (none)  one thread block per tile of BM rows, the tile's activations in shared memory
//           (ping-pong), weights through the read-only cache or staged per layer, exact float32;
//   warp    persistent blocks with every layer's weights in shared memory, each warp owning 32
//           rows through all layers (8 x 8 register tiles, exact float32 FMAs, no block barrier);
//   tf32 / f16 / bf16   the same persistence on mma.sync tensor cores (m16n8k8 / m16n8k16,
//           float32 accumulation), each warp 16 x MT rows whose accumulator fragments re-pack
//           into the next layer's operand fragments; offered under the matching
//           precision (TargetOptions, cugen_linear.h);
//   3xtf32  the tensor-core kernel with every operand split into two TF32 terms (hi + lo, three
//           products per term pair: float32-level accuracy, 1e-4 checked like any float32
//           kernel), offered under float32 next to the SIMT variants: the measured times decide.
// The epilogues (bias, activation) go through cexpr's CUDA dialect, in registers (epi=reg) or in
// a warp-private shared-memory pass (epi=smem). A chain whose epilogues read their layer's input
// (a gate, a residual: MlpChain.xin) gets the block variant (none) and the tensor-core ones with
// epi=smem only; so does a chain whose epilogues reduce over the row (a LayerNorm: MlpChain.red).
// Same ABI as cugen.h.
// Chains of float32, or of float16 / bfloat16 (half storage: input, weights and activations half,
// the output half or float32): every variant reads half tensors as stored and computes in float32;
// a half chain gets the tensor-core variant of its type only (f16 / bf16), whatever the precision.
#ifndef ORCH_CUGEN_MLP_H
#define ORCH_CUGEN_MLP_H

#include "cugen.h"

// Kernel class (KernelConfig.cls; 11..15 are cugen.h's).
enum { CUCLS_MLP = 20 };

// Variants (KernelConfig.p[CUMLP_VAR]; 0 for the block kernel's configs, whose descs predate
// the variants).
enum {
    CUMLP_BLOCK = 0,
    CUMLP_WARP = 1,
    CUMLP_TF32 = 2,
    CUMLP_3XTF32 = 3,
    CUMLP_F16 = 4,
    CUMLP_BF16 = 5,
    CUMLP_F64 = 6 // float32 operands on the FP64 tensor cores (sm_90): exact products, double sums
};
// The slot of the variant in KernelConfig.p.
enum { CUMLP_VAR = 5 };
// Epilogue modes of the tensor-core kernels (CuMlpConfig.epi): in registers, through a
// warp-private shared-memory buffer, deferred into the next layer's k loop (ilv), and that with a
// float32 input staged in the buffer too (ilvx).
enum { CUMLP_EPI_REG = 0, CUMLP_EPI_SMEM = 1, CUMLP_EPI_ILV = 2, CUMLP_EPI_ILVX = 3 };

// The typed config of CUCLS_MLP (cugen.h's typed configs): p[0..4] bm, t, tm, tn, stage (block
// kernel), p[5] var, p[6..10] w, mt, epi, g, bps (persistent kernels); a design's other fields
// are 0. desc "cls=mlp bm=.. t=.. tm=.. tn=.. stage=.." (block: no v=, as before the variants),
// "cls=mlp v=warp w=.. g=.. bps=..", "cls=mlp v=tf32|3xtf32|f16|bf16|f64 w=.. mt=..
// epi=reg|smem|ilv|ilvx g=.. bps=..".
typedef struct CuMlpConfig {
    int64_t var;   // CUMLP_*
    int64_t bm;    // block: rows a block
    int64_t t;     // block: threads a block
    int64_t tm;    // block: rows a thread tile
    int64_t tn;    // block: columns a thread tile at most (a layer takes the largest of 4, 2, 1
                   // dividing its width)
    int64_t stage; // block: 1: each layer's weights staged in shared memory
    int64_t w;     // persistent: warps a block
    int64_t mt;    // tensor cores: m16 row tiles a warp
    int64_t epi;   // tensor cores: CUMLP_EPI_*
    int64_t g;     // persistent: blocks in the grid
    int64_t bps;   // persistent: blocks an SM the launch bounds promise
} CuMlpConfig;
void cumlp_config_pack(const CuMlpConfig *q, KernelConfig *k);
bool cumlp_config_unpack(const KernelConfig *k, CuMlpConfig *q);

bool cugen_mlp_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt);
// Up to k configs of every variant the device and opt->precision allow, from the device model,
// best estimate first; returns how many.
int cugen_mlp_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k);
int cugen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e);

#endif
