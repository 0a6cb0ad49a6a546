// Convolution geometry and kernels of the reference ops, shared with the fission rules (which
// take a LINEAR primitive's parameters from the geometry) and the primitive interpreter (whose
// LINEAR primitives are convolutions without bias). Geometry: N images of C channels, M output
// channels, S spatial axes; `pad` holds the padding at the start of each axis.
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
    // Not read by the kernels (out decides): the padding at the end that, with pad, gives out;
    // ConvTranspose's output_padding (0 for Conv).
    int64_t pad_end[MAX_SPATIAL], out_pad[MAX_SPATIAL];
} ConvGeom;

// Checks the shapes and attributes of Conv, ConvInteger (transposed false) or ConvTranspose node
// n and computes the geometry, output sizes included. Input 2 is a bias when has_bias.
int conv_geom(const Graph *g, const Node *n, bool transposed, bool has_bias, ConvGeom *c, Err *e);

// Forward convolution / transposed convolution in float32; bias may be NULL. The caller fills
// every field of the geometry the kernels read (in_pix, out_pix, k_pix: products of in, out, k).
// Returns 0, or ST_RUNTIME when the column buffer cannot be allocated.
int conv_forward_f32(const ConvGeom *c, const float *x, const float *w, const float *bias,
                     float *y);
int conv_transpose_forward_f32(const ConvGeom *c, const float *x, const float *w,
                               const float *bias, float *y);

#endif
