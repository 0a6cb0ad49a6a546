// The analysis of an MLP chain candidate that the fused MLP kernels of both targets start from
// (backend/cpu/emit_mlp.c, backend/cuda/emit_mlp_cuda.c): a candidate of 2 to 8 dense layers
// (candidates.h, cand_count_linear >= 2), each a LINEAR by a constant weight and its elementwise
// epilogue, seen as layers over R rows. An epilogue is any elementwise function of the layer's
// product and of the layer's input (the previous layer's result, which a fused kernel still
// holds on chip): bias and activation, a gate f(W x + b) * g(x), a residual x + f(W x + b).
// An epilogue may also reduce over the row (sums and means over the last axis, kept as [..., 1]
// row statistics that later epilogue steps broadcast back over the row): a LayerNorm between
// layers, LN(f(W x + b)) * gamma + beta, f(LN(W x + b)), LN(x + f(W x + b)), as the LayerNorm
// rule builds it (mean, centred values, mean of their squares, rsqrt).
// Needs: a verified primitive graph and a candidate of it. Guarantees: where mlp_analyse returns
// true, the MlpChain describes the candidate exactly (each emitter then refuses the dtypes it
// does not generate).
#ifndef ORCH_CODEGEN_MLP_SPEC_H
#define ORCH_CODEGEN_MLP_SPEC_H

#include "../candidates/candidates.h"

#define MLP_LAYERS_MAX 8
// Primitives of a chain candidate analysed (layers, their epilogues, the input's CAST).
#define MLP_CAND_PRIMS_MAX 160
// Row reductions in one layer's epilogue (a LayerNorm has two).
#define MLP_RED_MAX 8

// A chain candidate seen as layers: layer l multiplies its input [R, K_l] by the constant W_l
// [K_l, N_l] into the LINEAR's output tl_l, and its epilogue maps tl_l to act_l (the next layer's
// input; the last act is the candidate's output). R: rows (product of the leading dims).
typedef struct MlpChain {
    const PrimGraph *pg;
    const Candidate *c;
    int n;     // layers
    int x_pos; // position of the first layer's input in c->inputs
    // The first layer's input is the CAST of a float32 kernel input (x_pos's) to the chain's half
    // type, a primitive of the candidate (half storage's cast of a float32 model input; the
    // kernel rounds x as it loads it): x_cast_prim, else -1.
    bool x_cast;
    int x_cast_prim;
    DType dtype;                 // every layer's input, weight and product (cand_mlp_layer_ok)
    int rank;                    // rank of every layer's output
    int64_t lead[ORCH_MAX_RANK]; // the leading dims (rank - 1 of them), equal in every layer
    int64_t R;                   // rows: their product
    int lin[MLP_LAYERS_MAX];     // the LINEAR primitives, in order
    int tl[MLP_LAYERS_MAX];      // their outputs
    int act[MLP_LAYERS_MAX];     // each layer's result (after its epilogue)
    int w_pos[MLP_LAYERS_MAX];   // position of W_l in c->inputs
    int64_t K[MLP_LAYERS_MAX], N[MLP_LAYERS_MAX];
    bool epi[MLP_LAYERS_MAX]; // act_l != tl_l
    // Layer l's input tensor (the LINEAR's left operand: act_{l-1}, or the chain's input or its
    // CAST for l = 0), and whether the epilogue reads it (then K_l == N_l: the input is read at
    // the epilogue's own index). The emitters supply it from where the layer read it
    // (cexpr_pin), so an epilogue never recomputes an earlier layer.
    int in[MLP_LAYERS_MAX];
    bool xin[MLP_LAYERS_MAX];
    bool any_xin;
    // Layer l's row reductions (REDUCE primitives, indices in pg->prims, in the candidate's
    // order: each one's input may read the earlier ones' results): RED_SUM or RED_MEAN over the
    // last axis of a tensor of the layer's output shape, keepdims, into a float tensor of shape
    // [lead..., 1]. Every other epilogue tensor has the layer's output shape or that row shape.
    // An emitter computes them row by row before the epilogue's elementwise pass (a whole row of
    // the layer's products is on chip) and answers reads of their outputs from its statistics.
    int n_red[MLP_LAYERS_MAX];
    int red[MLP_LAYERS_MAX][MLP_RED_MAX];
    bool any_red;
    // Which layer's epilogue each primitive of the candidate belongs to (indexed as c->prims;
    // -1: a LINEAR or the input's CAST).
    int owner[MLP_CAND_PRIMS_MAX];
} MlpChain;

// Whether c is an MLP chain this analysis understands (only LINEAR layers, ELEMWISE primitives
// and row reductions (MlpChain.red), each non-LINEAR one in exactly one layer's epilogue: on the
// way from the layer's product to its result, reading only the product, the layer's input,
// constants and its own epilogue's tensors; the result depends on the product; the first input and
// every weight kernel inputs, equal leading dims, the layers all of one dtype: float32, float16 or
// bfloat16; an epilogue's result that dtype, or float32 after half layers (its intermediates any
// float type: the LayerNorm rule's mean is float64); the first layer's input
// may be the CAST to the half type of a float32 kernel input, MlpChain.x_cast). The C target's
// kernels take float32 chains only.
bool mlp_analyse(const PrimGraph *pg, const Candidate *c, MlpChain *m);

#endif
