// Resize's coordinate and window arithmetic, shared by the reference op (resize.c) and its fission
// rule (src/fission/rules_layout.c), so that both pick the same taps and weights and ties fall the
// same way. A plan is built from a node whose shape rule has run; the roi is read separately.
#ifndef ORCH_OPS_RESIZE_H
#define ORCH_OPS_RESIZE_H

#include "ops.h"

enum { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC };
enum {
    RESIZE_HALF_PIXEL,
    RESIZE_HALF_PIXEL_SYMMETRIC,
    RESIZE_PYTORCH_HALF_PIXEL,
    RESIZE_ALIGN_CORNERS,
    RESIZE_ASYMMETRIC,
    RESIZE_TF_CROP_AND_RESIZE,
    RESIZE_TF_HALF_PIXEL_FOR_NN,
};
enum { RESIZE_PREFER_FLOOR, RESIZE_PREFER_CEIL, RESIZE_FLOOR, RESIZE_CEIL };

typedef struct ResizePlan {
    int mode, coord, nearest; // the enums above
    double cubic_a, extrapolation;
    bool exclude_outside, antialias;
    int rank, n_axes;
    int axes[ORCH_MAX_RANK]; // the resized axes in the order scales/sizes/roi list them
    int64_t in[ORCH_MAX_RANK], out[ORCH_MAX_RANK];
    double scale[ORCH_MAX_RANK];  // per axis; 1 for axes not listed
    double roi[ORCH_MAX_RANK][2]; // per axis [start, end]; [0, 1] unless tf_crop_and_resize
    bool roi_f32;                 // roi arithmetic rounds to float32 (resize.c says why)
} ResizePlan;

// Reads and checks the attributes and the scales or sizes (constant inputs 2 and 3) of Resize
// node n: the output shape and the per-axis scales. The roi is [0, 1] on every axis.
int resize_plan(const Graph *g, const Node *n, ResizePlan *p, Err *e);
// Sets the roi from the values of input 1 (dtype t) for tf_crop_and_resize; other modes keep
// [0, 1], and so do axes not listed.
void resize_set_roi(ResizePlan *p, DType t, const void *roi);
// Whether axis d is left alone: scale 1, size unchanged and the whole axis as its roi.
bool resize_axis_is_identity(const ResizePlan *p, int d);
// The axes to interpolate (identity axes left out) in the order that keeps every intermediate
// at most as big as the larger of input and output: those that shrink most first, growing ones
// last (axis order would make a [1,126,4,4] -> [65535,1,3,1] resize hold a [65535,126,4,4]
// intermediate). Separable interpolation does not depend on the order but for roundings.
// Returns how many axes it wrote to order.
int resize_axis_order(const ResizePlan *p, int order[ORCH_MAX_RANK]);
// Taps per output position along axis d: 2 for nearest and linear, 4 for cubic, more when
// antialiasing a downscale.
int resize_taps_per_output(const ResizePlan *p, int d);
// The taps of output position o along axis d: the input positions src (clamped to the axis) and
// their weights w, resize_taps_per_output of each; out = sum_k w[k] * x[src[k]]. False when o
// lies outside the roi (tf_crop_and_resize): it reads the extrapolation value, src and w unset.
bool resize_taps(const ResizePlan *p, int d, int64_t o, int64_t *src, double *w);
// Nearest: the one input position output position o reads along axis d; -1: the extrapolation
// value.
int64_t resize_nearest_source(const ResizePlan *p, int d, int64_t o);

#endif
