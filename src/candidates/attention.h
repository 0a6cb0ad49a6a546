// Fused attention candidates: scaled-dot-product attention as it looks after fission,
//     S  = Q · Kt                         LIN_MATMUL  [..., M, D] x [..., D, N] -> [..., M, N]
//     S' = f(S, extra...)                  zero or more ELEMWISE (scale, mask add, where, ...)
//     mx = max(S', last axis, keepdims)    REDUCE max
//     E  = exp(S' - mx)                    ELEMWISE {SUB; EXP}
//     l  = sum(E, last axis, keepdims)     REDUCE sum
//     P  = E / l                           ELEMWISE {DIV}, or {DIV; ISNAN; WHERE(isnan, 0, div)} as
//                                          PyTorch exports scaled_dot_product_attention
//     O  = P · V                           LIN_MATMUL  [..., M, N] x [..., N, Dv] -> [..., M, Dv]
// proposed as one candidate, so a target can compute it per query tile with an online (running
// max and sum) softmax and never write the score matrix to memory. A second variant of each also
// takes in the LAYOUT primitives (head split transposes) that produce Q, Kt and V when they feed
// nothing else, so the kernel reads the projections in place, and a third takes in, beyond those,
// the ELEMWISE and LAYOUT primitives computing Q, Kt or V from the projections that feed nothing
// else (a prologue: rotary embeddings' q*cos + cat(-q2, q1)*sin, computed as Q and K are staged,
// so the rotated Q and K never reach memory). Where O is read by one LAYOUT
// alone (the heads merged back: [B, H, M, Dv] -> [B, M, H * Dv]) of transposes and reshapes that
// keep O's last axis unit-stride, each variant is also proposed ending with it: the kernel writes
// O's rows at their places in the merged tensor (AttnSpec.ostride).
// Tensors are float32, or all float16 or all bfloat16 (half storage: passes_storage.c retypes
// them, instructions computing in float32 or in the half type). A half attention whose O is read
// only by a CAST to float32 (the boundary of a model output or an OPAQUE primitive) also gets
// the variants ending with that CAST, so the kernel stores float32 directly.
// Needs: a verified primitive graph. Guarantees: attn_analyse accepts exactly the candidates
// cand_add_attention proposes (and equal ones); an accepted candidate's output is O, or O cast to
// float32.
#ifndef ORCH_CANDIDATES_ATTENTION_H
#define ORCH_CANDIDATES_ATTENTION_H

#include "candidates.h"

#define ATTN_MAX_HEAD 256 // largest D and Dv (a query row's accumulators stay on chip)
#define ATTN_MAX_PRIMS 48 // largest candidate: the core, its CAST or output LAYOUT, the prologue

// An attention candidate seen by the emitters. Q, Kt and V may be kernel inputs or tensors the
// candidate computes by LAYOUT primitives (read both through cexpr, which composes the layouts'
// index maps into the loads); the same for the extra operands of the pre-softmax primitives
// (masks: kernel inputs or constants, numpy-broadcast to S). Every tensor has rank `rank`; the
// batch dims of Q, Kt and V are those of O or 1 (broadcast: read at index 0).
typedef struct AttnSpec {
    const PrimGraph *pg;
    const Candidate *c;
    int mm1, mm2;                 // the LINEAR primitives (indices into pg->prims)
    int red_max, ew_exp, red_sum, ew_div;
    int n_pre;                    // pre-softmax ELEMWISE primitives, in order
    int pre[8];
    int s;                        // tensor: mm1's output (raw scores)
    int sp;                       // tensor: the scores softmax reads (== s when n_pre == 0)
    int q, kt, v;                 // tensors: mm1's operands, mm2's right operand
    int out;                      // tensor: mm2's output
    int cast;                     // the CAST primitive ending the candidate (-1: none)
    int out_layout;               // the LAYOUT ending the candidate, writing y from O (-1: none)
    int y;                        // tensor: the candidate's output (out, the CAST's float32 one,
                                  // or the LAYOUT's)
    int64_t ostride[ORCH_MAX_RANK]; // element stride in y of each axis of O (0 on unit axes; 1
                                    // on the last: O's rows are written as unit-stride runs)
    DType dt;                     // of Q, Kt, V, the scores, P and O: DT_FLOAT, DT_FLOAT16 or
                                  // DT_BFLOAT16
    int rank;                     // >= 2
    int64_t lead[ORCH_MAX_RANK];  // batch dims of O (rank - 2 of them)
    int64_t B;                    // their product
    int64_t M, N, D, Dv;          // queries, keys, head dims of Q/K and of V
    int n_layouts;                // LAYOUT primitives producing Q, Kt, V (or their prologue)
    int n_prologue;               // ELEMWISE primitives of the prologue computing Q, Kt or V
                                  // (rotary embeddings: q*cos + cat(-q2, q1)*sin), 0 without
    bool nan_to_zero;             // P's NaNs become 0 (PyTorch's SDPA export): a row whose scores
                                  // are all -inf gives O = 0, so emitters write 0 for a NaN of O
    // Grouped-query attention: along lead axis kv_axis, the kv_group consecutive indices
    // h - h % kv_group .. h - h % kv_group + kv_group - 1 read the same elements of K^T and V
    // (HF's repeat_kv, an Expand of a size-1 axis, a broadcast batch dim of K and V), so a
    // kernel may stage K^T and V once for the group. kv_axis -1 and kv_group 1: no such axis.
    int kv_axis;
    int64_t kv_group;
} AttnSpec;

// Whether c is a fused attention candidate (two LINEAR primitives in the shape above, float32 or
// half, optionally the final CAST); fills *a when so, the K/V head group included (checked on
// the member LAYOUTs' index maps: every element where the candidate is small, else axis lines
// through both corners and pseudo-random points).
bool attn_analyse(const PrimGraph *pg, const Candidate *c, AttnSpec *a);

#endif
