// The analysis of a candidate built around one LINEAR primitive that the linear emitters of both
// targets start from. Every product is seen as a batch of GEMMs C[b] (M x N) = A[b] (M x K) *
// B[b] (K x N) written at out + (b*M + i)*N + j:
//   matmul  A, B the operands (batch dims broadcast), b runs over the output's batch dims (folded
//           into M when B is shared by every batch and A is a dense kernel input);
//   conv    b = n*G + g, A = the weights of group g (OC/G x C/G*kernel pixels), B = the virtual
//           im2col patch matrix of image n, group g (K x output pixels), never materialised;
//   conv transpose  the same with B gathering X where the stride divides.
// Primitives after the LINEAR (the epilogue) are elementwise at its output shape, so each output
// element is finished from its own accumulator.
// Needs: a verified primitive graph and a candidate of it. Guarantees: where lin_spec_analyse
// returns true, L describes the candidate exactly (sizes, strides, operand positions).
#ifndef ORCH_CODEGEN_LINEAR_SPEC_H
#define ORCH_CODEGEN_LINEAR_SPEC_H

#include "../candidates/candidates.h"

// The candidate seen as a batch of GEMMs.
typedef struct Lin {
    const PrimGraph *pg;
    const Candidate *c;
    const Prim *p;  // the LINEAR
    int ta, tb, tl; // its operands (X and W for conv) and output
    int sink;       // c->output
    bool epi;       // primitives after the LINEAR
    int pa, pb;     // positions of ta/tb in c->inputs; -1: computed by a prologue
    bool conv;
    bool a_trans; // A read as the transpose of a row-major K x M matrix (col2im view)
    bool convt;   // transposed conv: B gathers X where the stride divides (see lin_emit_b_value)
    int64_t batch, M, N, K;
    int64_t m0; // matmul batch folded into M (rows per output matrix), 0 when not folded
    // matmul: output batch dims, operand batch strides (in matrices) per output batch dim
    int nbd;
    int64_t bd[ORCH_MAX_RANK], sa[ORCH_MAX_RANK], sb[ORCH_MAX_RANK];
    // conv: image count, channels, groups, spatial geometry
    int S;
    int64_t NI, C, OC, G, Cg, OCg, kpix, ipix;
    int64_t in[3], out[3], k[3], st[3], dil[3], pad[3];
    bool b_direct_ok;  // B readable in place (matmul operand, or a 1x1 stride-1 unpadded conv)
    bool b_prepack_ok; // matmul whose B is a constant kernel input read by the LINEAR only:
                       // it may be repacked once, at load, into a kernel's panel order
    bool w_prepack_ok; // conv whose W (the GEMM's A) is such a constant: reorderable at load
    bool dw_ok;        // depthwise 2-D conv (C/G == 1): direct kernel
} Lin;

// What an emitter generates; lin_spec_analyse refuses the rest. All false / 0: float32
// operands, products and sink; convolutions of 1 to 3 spatial dims, transposed ones too.
typedef struct LinRules {
    // Operands and the LINEAR's output may also be all float16 or all bfloat16 (half storage),
    // the sink that type or float32.
    bool half;
    // The LINEAR's result may also pass through LAYOUTs that move no element
    // (prim_layout_is_view) and the elementwise primitives after them, at the same element
    // count: for a library call that writes D's bytes, whose caller checks the shapes itself.
    bool views;
    bool conv_2d_only; // convolutions of two spatial dims only, none transposed
    int max_inputs;    // kernel inputs at most (0: any)
    int64_t max_batch; // GEMMs in the batch at most (0: any)
} LinRules;

// Fills L; false when the candidate is not one LINEAR (matmul, convolution or transposed
// convolution of two operands) with an elementwise epilogue, or is outside rules.
bool lin_spec_analyse(const PrimGraph *pg, const Candidate *c, const LinRules *rules, Lin *L);

static inline const Tensor *lin_t(const Lin *L, int t) {
    return L->pg->tensors[t];
}

#endif
