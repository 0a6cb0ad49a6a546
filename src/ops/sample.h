// Geometry of the sampling ops (GridSample, RoiAlign), shared by their reference implementation
// (sample.c) and the operator kernels' analysis (codegen/opaque_spec.c), so both read the
// attributes and shapes the same way. The arithmetic both follow is ONNX Runtime's, in double.
#ifndef ORCH_OPS_SAMPLE_H
#define ORCH_OPS_SAMPLE_H

#include "../ir/graph.h"

typedef enum SampleMode { SAMPLE_LINEAR, SAMPLE_NEAREST, SAMPLE_CUBIC } SampleMode;
typedef enum SamplePad { SAMPLE_PAD_ZEROS, SAMPLE_PAD_BORDER, SAMPLE_PAD_REFLECTION } SamplePad;

// GridSample over a 4-D input X (N, C, H, W) and grid (N, HO, WO, 2): Y (N, C, HO, WO).
typedef struct GridSampleGeom {
    SampleMode mode;
    SamplePad pad;
    bool align_corners;
    int64_t N, C, H, W, HO, WO;
} GridSampleGeom;

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
