// Whether a kernel's operand is read at an affine offset of one kernel input, for the CUDA
// emitters that stage tiles by cp.async or plain strided copies instead of through cexpr: the
// fused attention (Q, K^T, V) and the tensor-core direct convolution (its input and weights).
// Needs: a verified primitive graph and a candidate of it. Guarantees: where `affine` is set,
// the tensor's element at index i is kernel input `pos` at base + sum_d stride[d] * i[d].
#ifndef ORCH_CUDA_AFFINE_LOAD_H
#define ORCH_CUDA_AFFINE_LOAD_H

#include "../../candidates/candidates.h"

typedef struct CuAffine {
    bool affine;
    int copy; // free for the caller (the attention's cp.async width); cu_affine_of sets 0
    int pos;  // the kernel input (position in c->inputs)
    int64_t base, stride[ORCH_MAX_RANK]; // in elements; stride 0 on unit dims
} CuAffine;

// Fills A for tensor t of candidate c: a float (or half) kernel input (its dense strides), or
// the output of a member LAYOUT of transposes, reshapes, slices and affine gathers over one,
// whose map is affine: checked at every point of small boxes, else on every axis line through
// the origin and the far corner (at most 512 points each) and at 512 pseudo-random points (a
// reshape's split coordinate (f / S) % n deviates from any affine form on a large part of the
// box). A->affine false otherwise.
void cu_affine_of(const PrimGraph *pg, const Candidate *c, int t, CuAffine *A);

#endif
