// The index arithmetic of Slice, Split and Pad (layout.c), shared by the reference kernels and
// their fission rules (src/fission/rules_layout.c) so both read the same elements. Each plan
// reads and checks the node's attributes and constant inputs, as the shape rule does.
#ifndef ORCH_OPS_LAYOUT_H
#define ORCH_OPS_LAYOUT_H

#include "ops.h"

typedef struct SlicePlan {
    int64_t start[ORCH_MAX_RANK], step[ORCH_MAX_RANK], count[ORCH_MAX_RANK];
} SlicePlan;

// starts/ends/axes/steps (inputs 1-4, constant) to a start, step and count per axis of x, clamped
// as the spec says: a positive step clamps to [0, dim], a negative one to [-1, dim - 1].
int layout_slice_plan(const Graph *g, const Node *n, const Tensor *x, SlicePlan *p, Err *e);

// Split sizes along axis of x, one per output (sizes holds n_out + 1): the split attribute (< 13)
// or input (>= 13), else equal parts; from opset 18 parts of ceil(dim / outputs) with a smaller
// last one.
int layout_split_sizes(const Graph *g, const Node *n, const Tensor *x, int axis, int64_t *sizes,
                       Err *e);

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

typedef struct PadPlan {
    int mode;
    int64_t begin[ORCH_MAX_RANK]; // negative: crop
} PadPlan;

// pads (input 1), axes (input 3, opset 18) and mode into the output dims and per-axis offsets.
int layout_pad_plan(const Graph *g, const Node *n, const Tensor *x, PadPlan *p, int64_t *dims,
                    Err *e);
// Input index for output position o of an axis of size dim padded by `begin`; -1: the constant.
int64_t layout_pad_source(int mode, int64_t o, int64_t begin, int64_t dim);

#endif
