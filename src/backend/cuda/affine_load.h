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
    // A grouped axis (cu_affine_of_grouped; -1 and 1: none): coordinate i[gaxis] enters the
    // offset as i[gaxis] / group, so the element is at base + stride[gaxis] * (i[gaxis] / group)
    // + sum over the other axes of stride[d] * i[d] (K and V of grouped-query attention).
    int gaxis;
    int64_t group;
} CuAffine;

// Fills A for tensor t of candidate c: a float (or half) kernel input (its dense strides), or
// the output of a member LAYOUT of transposes, reshapes, slices and affine gathers over one,
// whose map is affine: checked at every point of small boxes, else on every axis line through
// the origin and the far corner (at most 512 points each) and at 512 pseudo-random points (a
// reshape's split coordinate (f / S) % n deviates from any affine form on a large part of the
// box). A->affine false otherwise.
void cu_affine_of(const PrimGraph *pg, const Candidate *c, int t, CuAffine *A);
// The same with coordinate `axis` read as i[axis] / group (group > 1 dividing that dim), checked
// the same way; the layout may also broadcast (repeat_kv's Expand of a unit axis), since the
// division folds the repeated indices onto one. A->affine false where the map is not of that form.
void cu_affine_of_grouped(const PrimGraph *pg, const Candidate *c, int t, int axis, int64_t group,
                          CuAffine *A);

#endif
