// The fused MLP chain kernels of the C target (emit_mlp.c) and the analysis of an MLP chain
// candidate the CUDA target shares (emit_mlp_cuda.c): a candidate of 2 to 8 dense layers
// (candidates.h, cand_count_linear >= 2) computed per tile of rows, layer after layer, with the
// tile's activations kept in two small cache-resident ping-pong buffers; weights are read in
// place (zero-padded copies for widths that are not a multiple of 16); each layer's epilogue
// (bias, activation) is applied through cexpr as the layer's tile is finished.
// Needs: a verified primitive graph and a candidate of it. Guarantees: the kernel follows
// target.h's ABI and computes the candidate's output as prim_interp.c does, up to float32
// rounding (sums are reassociated).
#ifndef ORCH_CGEN_MLP_H
#define ORCH_CGEN_MLP_H

#include "../../candidates/candidates.h"
#include "../target.h"

// Kernel class of the fused MLP (KernelConfig.cls; 1..5 are cgen.h's and cgen_linear.h's).
enum { CCLS_MLP = 6 };

#define MLP_LAYERS_MAX 8

// A chain candidate seen as layers: layer l multiplies its input [R, K_l] by the constant W_l
// [K_l, N_l] into the LINEAR's output tl_l, and its epilogue maps tl_l to act_l (the next layer's
// input; the last act is the candidate's output). R: rows (product of the leading dims).
typedef struct MlpChain {
    const PrimGraph *pg;
    const Candidate *c;
    int n;                         // layers
    int x_pos;                     // position of the first layer's input in c->inputs
    // The first layer's input is the CAST of a float32 kernel input (x_pos's) to the chain's half
    // type, a primitive of the candidate (half storage's cast of a float32 model input; the
    // kernel rounds x as it loads it): x_cast_prim, else -1.
    bool x_cast;
    int x_cast_prim;
    DType dtype;                   // every layer's input, weight and product (cand_mlp_layer_ok)
    int rank;                      // rank of every layer's output
    int64_t lead[ORCH_MAX_RANK];   // the leading dims (rank - 1 of them), equal in every layer
    int64_t R;                     // rows: their product
    int lin[MLP_LAYERS_MAX];       // the LINEAR primitives, in order
    int tl[MLP_LAYERS_MAX];        // their outputs
    int act[MLP_LAYERS_MAX];       // each layer's result (after its epilogue)
    int w_pos[MLP_LAYERS_MAX];     // position of W_l in c->inputs
    int64_t K[MLP_LAYERS_MAX], N[MLP_LAYERS_MAX];
    bool epi[MLP_LAYERS_MAX];      // act_l != tl_l
} MlpChain;

// Whether c is an MLP chain this analysis understands (only LINEAR layers and ELEMWISE
// primitives, the first input and every weight kernel inputs, equal leading dims, the layers all
// of one dtype: float32, float16 or bfloat16; an epilogue's tensors that dtype, or float32 after
// half layers; the first layer's input may be the CAST to the half type of a float32 kernel input,
// MlpChain.x_cast). The C target's kernels take float32 chains only.
bool mlp_analyse(const PrimGraph *pg, const Candidate *c, MlpChain *m);

bool cgen_mlp_supports(const PrimGraph *pg, const Candidate *c);
// Up to k configs (rows per tile, register tile), best estimate first; returns how many.
int cgen_mlp_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k);
// Appends `void fn(const void *const *in, void *out)` and its static helpers (fn_*) to src.
// Needs cgen_prelude() and cgen_lin_prelude() (orch_lv_*) earlier in the translation unit.
int cgen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e);

#endif
