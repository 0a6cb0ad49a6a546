// Private to the layout family (layout.c, shape_ops.c, indexing.c, resize.c): the shape rules and
// reference kernels that layout.c lists in ops_layout, and the byte-moving helpers they share.
// Every kernel here moves whole elements of dtype_size() bytes, so it works for any stored dtype.
#ifndef ORCH_OPS_LAYOUT_INTERNAL_H
#define ORCH_OPS_LAYOUT_INTERNAL_H

#include "ops.h"

// ---- shared helpers (layout.c) ----

// Fails with ST_UNSUPPORTED when input i has a dtype orch cannot store (string, complex...).
int layout_need_storable(const Graph *g, const Node *n, int i, Err *e);
// Row-major element strides of dims.
void layout_strides(int rank, const int64_t *dims, int64_t *strides);
// Copies a strided view of src into dense dst: element k of dst (row-major over dims) is the
// element of src at offset + sum(index[d] * strides[d]). Element offsets, esize bytes each.
void layout_gather_view(void *dst, const void *src, size_t esize, int rank, const int64_t *dims,
                        const int64_t *strides, int64_t offset);
// Copies into dense dst (dims out_dims) the elements of src (dims in_dims) that per-axis maps
// pick: dst[i0, i1, ...] = src[maps[0][i0], maps[1][i1], ...], or the esize bytes at value where
// any map gives -1 (Pad's constant, Resize's extrapolation).
void layout_gather_maps(void *dst, const void *src, size_t esize, int rank, const int64_t *in_dims,
                        const int64_t *out_dims, int64_t *const *maps, const void *value);
// Reads a constant 1-D shape input (Reshape, Expand, ConstantOfShape) of at most ORCH_MAX_RANK
// entries; more is ST_UNSUPPORTED.
int layout_const_shape(const Graph *g, const Node *n, int i, int64_t *dims, int *count, Err *e);
// Reads the axes of Squeeze/Unsqueeze/ReduceX style ops: the attribute before `input_since`,
// input `input` from then on. *count is -1 when absent.
int layout_read_axes(const Graph *g, const Node *n, int input_since, int input, int64_t *axes,
                     int *count, Err *e);

// ---- shape_ops.c: ops that compute or reinterpret shapes ----
int layout_infer_size(Graph *g, Node *n, Err *e);
int layout_run_size(const OpRun *r, Err *e);
int layout_infer_reshape(Graph *g, Node *n, Err *e);
int layout_infer_flatten(Graph *g, Node *n, Err *e);
int layout_infer_squeeze(Graph *g, Node *n, Err *e);
int layout_infer_unsqueeze(Graph *g, Node *n, Err *e);
int layout_run_copy(const OpRun *r, Err *e); // output bytes = input 0 bytes (Reshape & co.)
int layout_infer_constant_of_shape(Graph *g, Node *n, Err *e);
int layout_run_constant_of_shape(const OpRun *r, Err *e);
int layout_infer_range(Graph *g, Node *n, Err *e);
int layout_run_range(const OpRun *r, Err *e);
int layout_infer_eye_like(Graph *g, Node *n, Err *e);
int layout_run_eye_like(const OpRun *r, Err *e);
int layout_infer_trilu(Graph *g, Node *n, Err *e);
int layout_run_trilu(const OpRun *r, Err *e);
int layout_infer_nonzero(Graph *g, Node *n, Err *e);
int layout_run_nonzero(const OpRun *r, Err *e);

// ---- indexing.c: ops that pick, place or sort elements by index values ----
int layout_infer_gather(Graph *g, Node *n, Err *e);
int layout_run_gather(const OpRun *r, Err *e);
int layout_infer_gather_elements(Graph *g, Node *n, Err *e);
int layout_run_gather_elements(const OpRun *r, Err *e);
int layout_infer_gather_nd(Graph *g, Node *n, Err *e);
int layout_run_gather_nd(const OpRun *r, Err *e);
int layout_infer_scatter_nd(Graph *g, Node *n, Err *e);
int layout_run_scatter_nd(const OpRun *r, Err *e);
int layout_infer_scatter_elements(Graph *g, Node *n, Err *e);
int layout_run_scatter_elements(const OpRun *r, Err *e);
int layout_infer_one_hot(Graph *g, Node *n, Err *e);
int layout_run_one_hot(const OpRun *r, Err *e);
int layout_infer_compress(Graph *g, Node *n, Err *e);
int layout_run_compress(const OpRun *r, Err *e);
int layout_infer_top_k(Graph *g, Node *n, Err *e);
int layout_run_top_k(const OpRun *r, Err *e);
int layout_infer_cumsum(Graph *g, Node *n, Err *e);
int layout_run_cumsum(const OpRun *r, Err *e);

// ---- resize.c ----
int layout_infer_resize(Graph *g, Node *n, Err *e);
int layout_run_resize(const OpRun *r, Err *e);

#endif
