// Convolution kernels of the reference ops, shared with the primitive interpreter (whose LINEAR
// primitives are convolutions without bias). Geometry: N images of C channels, M output channels,
// S spatial axes; `pad` holds the padding at the start of each axis.
#ifndef ORCH_OPS_LINEAR_H
#define ORCH_OPS_LINEAR_H

#include <stdint.h>

#include "../ir/graph.h"

enum { MAX_SPATIAL = ORCH_MAX_RANK - 2 };

typedef struct ConvGeom {
    int S;
    int64_t N, C, M, group; // batch, input channels, output channels, groups
    int64_t in[MAX_SPATIAL], out[MAX_SPATIAL], k[MAX_SPATIAL];
    int64_t stride[MAX_SPATIAL], dil[MAX_SPATIAL], pad[MAX_SPATIAL];
    int64_t in_pix, out_pix, k_pix;
} ConvGeom;

// Forward convolution / transposed convolution in float32; bias may be NULL. The caller fills
// every field of the geometry (in_pix, out_pix, k_pix: products of in, out, k).
// Returns 0, or ST_RUNTIME when the column buffer cannot be allocated.
int conv_forward_f32(const ConvGeom *c, const float *x, const float *w, const float *bias,
                     float *y);
int conv_transpose_forward_f32(const ConvGeom *c, const float *x, const float *w,
                               const float *bias, float *y);

#endif
