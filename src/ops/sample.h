// Geometry of the sampling ops (GridSample, RoiAlign), shared by their reference implementation
// (sample.c) and the operator kernels' analysis (codegen/opaque_spec.c), so both read the
// attributes and shapes the same way. The arithmetic both follow is ONNX Runtime's, in double.
#ifndef ORCH_OPS_SAMPLE_H
#define ORCH_OPS_SAMPLE_H

#include "../ir/graph.h"

typedef enum SampleMode { SAMPLE_LINEAR, SAMPLE_NEAREST, SAMPLE_CUBIC } SampleMode;
typedef enum SamplePad { SAMPLE_PAD_ZEROS, SAMPLE_PAD_BORDER, SAMPLE_PAD_REFLECTION } SamplePad;

// GridSample over X (N, C, D_1.., D_r) and grid (N, O_1.., O_r, r) for a spatial rank r of 2
// (X 4-D: H, W) or 3 (X 5-D: D, H, W; opset 20, linear and nearest only): Y (N, C, O_1.., O_r).
// The grid's last axis lists the coordinates innermost first (x for W, y for H, z for D).
typedef struct GridSampleGeom {
    SampleMode mode;
    SamplePad pad;
    bool align_corners;
    int sr; // spatial rank r: 2 or 3
    int64_t N, C;
    int64_t in[3], out[3]; // X's and Y's spatial sizes, outermost first; sr of each are used
    int64_t plane, points; // the products of in[] and of out[]: an image's pixels, its grid points
} GridSampleGeom;

// The taps one grid point reads along each spatial axis (nearest 1, linear 2, cubic 4), and in all.
int gridsample_axis_taps(const GridSampleGeom *g);
int gridsample_taps(const GridSampleGeom *g);

// Samples along each axis of a RoiAlign bin: an explicit sampling_ratio above it is refused, an
// adaptive grid is kept within it (every engine the same way).
#define ROI_GRID_MAX 256

// RoiAlign over X (N, C, H, W), rois (R, 4) and batch_indices (R): Y (R, C, OH, OW).
typedef struct RoiAlignGeom {
    bool max;               // mode "max" (else "avg")
    bool half_pixel;        // coordinate_transformation_mode half_pixel (opset 16's default)
    int64_t sampling_ratio; // 0: adaptive, ceil(roi size / output size) samples a bin
    double spatial_scale;
    int64_t N, C, H, W, R, OH, OW;
} RoiAlignGeom;

// Reads node n's attributes against its operands' shapes; errors name the node.
int gridsample_geom(const Node *n, const Tensor *x, const Tensor *grid, GridSampleGeom *g, Err *e);
int roialign_geom(const Node *n, const Tensor *x, const Tensor *rois, const Tensor *idx,
                  RoiAlignGeom *g, Err *e);

#endif
