// Layout ONNX ops: the ops_layout table (this file, shape_ops.c, indexing.c, resize.c) and the
// ops that rearrange elements without looking at them: Identity, Dropout, Shape, Transpose,
// Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, ReverseSequence.
// Kernels copy elements of dtype_size() bytes, so every stored dtype works; the plans of Slice,
// Split and Pad (layout.h) are shared with their fission rules.
#include "layout.h"

#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

// ---- shared helpers ----

int layout_need_storable(const Graph *g, const Node *n, int i, Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (t && (dtype_size(t->dtype) == 0 || t->dtype == DT_STRING))
        return op_err(e, ST_UNSUPPORTED, n, "input %d ('%s') has dtype %s, which orch does not run",
                      i, t->name, dtype_name(t->dtype));
    return ST_OK;
}

void layout_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

void layout_gather_view(void *dst, const void *src, size_t esize, int rank, const int64_t *dims,
                        const int64_t *strides, int64_t offset) {
    int64_t numel = 1;
    for (int d = 0; d < rank; d++)
        numel *= dims[d];
    if (numel == 0)
        return;
    // A contiguous innermost axis is copied as one run.
    int64_t run = 1;
    int outer = rank;
    if (rank > 0 && strides[rank - 1] == 1) {
        run = dims[rank - 1];
        outer = rank - 1;
    }
    int64_t idx[ORCH_MAX_RANK] = {0}, off = offset;
    char *y = dst;
    const char *x = src;
    for (int64_t k = 0; k < numel; k += run) {
        memcpy(y, x + (size_t)off * esize, (size_t)run * esize);
        y += (size_t)run * esize;
        for (int d = outer - 1; d >= 0; d--) {
            off += strides[d];
            if (++idx[d] < dims[d])
                break;
            off -= strides[d] * dims[d];
            idx[d] = 0;
        }
    }
}

void layout_gather_maps(void *dst, const void *src, size_t esize, int rank, const int64_t *in_dims,
                        const int64_t *out_dims, int64_t *const *maps, const void *value) {
    int64_t strides[ORCH_MAX_RANK], idx[ORCH_MAX_RANK] = {0}, numel = 1;
    layout_strides(rank, in_dims, strides);
    for (int d = 0; d < rank; d++)
        numel *= out_dims[d];
    char *y = dst;
    const char *x = src;
    for (int64_t k = 0; k < numel; k++) {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < rank; d++) {
            int64_t s = maps[d][idx[d]];
            inside = inside && s >= 0;
            off += s * strides[d];
        }
        memcpy(y + (size_t)k * esize, inside ? x + (size_t)off * esize : (const char *)value,
               esize);
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < out_dims[d])
                break;
            idx[d] = 0;
        }
    }
}

int layout_read_axes(const Graph *g, const Node *n, int input_since, int input, int64_t *axes,
                     int *count, Err *e) {
    if (n->opset < input_since) {
        if (node_input(g, n, input))
            return op_err(e, ST_INVALID, n, "takes axes as an attribute before opset %d",
                          input_since);
        const int64_t *v;
        int c = node_attr_ints(n, "axes", &v);
        if (c > ORCH_MAX_RANK)
            return op_err(e, ST_INVALID, n, "has %d axes, at most %d allowed", c, ORCH_MAX_RANK);
        for (int i = 0; i < c; i++)
            axes[i] = v[i];
        *count = c;
        return ST_OK;
    }
    if (node_attr(n, "axes"))
        return op_err(e, ST_INVALID, n, "takes axes as input %d from opset %d, not an attribute",
                      input, input_since);
    return op_const_ints(g, n, input, axes, ORCH_MAX_RANK, count, e);
}

int layout_const_shape(const Graph *g, const Node *n, int i, int64_t *dims, int *count, Err *e) {
    int64_t v[ORCH_MAX_RANK + 1];
    const Tensor *t = node_input(g, n, i);
    int rc = op_const_ints(g, n, i, v, ORCH_MAX_RANK + 1, count, e);
    if (rc)
        return rc;
    if (t->rank != 1)
        return op_err(e, ST_INVALID, n, "shape input '%s' must be 1-D", t->name);
    if (*count > ORCH_MAX_RANK)
        return op_err(e, ST_UNSUPPORTED, n, "shape input '%s' has %d entries; orch allows rank %d",
                      t->name, *count, ORCH_MAX_RANK);
    memcpy(dims, v, sizeof(int64_t) * (size_t)*count);
    return ST_OK;
}

// Normalises `count` axes for `rank` into out; rejects repeats.
static int normalize_axes(const Node *n, const int64_t *axes, int count, int rank, int *out,
                          Err *e) {
    bool seen[ORCH_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        int rc = op_axis(n, axes[i], rank, "axis", &out[i], e);
        if (rc)
            return rc;
        if (seen[out[i]])
            return op_err(e, ST_INVALID, n, "axis %lld is given twice", (long long)axes[i]);
        seen[out[i]] = true;
    }
    return ST_OK;
}

static int64_t numel_of(int rank, const int64_t *dims) {
    int64_t v = 1;
    for (int d = 0; d < rank; d++)
        v *= dims[d];
    return v;
}

// ---- Identity, Dropout ----

static int infer_identity(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

int layout_run_copy(const OpRun *r, Err *e) {
    (void)e;
    memcpy(r->y[0], r->x[0], tensor_nbytes(r->out[0]));
    return ST_OK;
}

// Inference only: the output is the input and the optional mask is all true. Opset 12 made
// ratio and training_mode inputs; a training_mode that is (or may be) true is not run, unless
// the ratio is a constant 0.
static int infer_dropout(Graph *g, Node *n, Err *e) {
    int rc = infer_identity(g, n, e);
    if (rc)
        return rc;
    if (n->opset < 12 && (node_input(g, n, 1) || node_input(g, n, 2)))
        return op_err(e, ST_INVALID, n, "ratio/training_mode inputs exist from opset 12, not %d",
                      n->opset);
    const Tensor *ratio = node_input(g, n, 1), *training = node_input(g, n, 2);
    if (ratio && (tensor_numel(ratio) != 1 || !dtype_is_float(ratio->dtype)))
        return op_err(e, ST_INVALID, n, "ratio input '%s' must be one float value", ratio->name);
    if (training) {
        if (training->dtype != DT_BOOL || tensor_numel(training) != 1)
            return op_err(e, ST_INVALID, n, "training_mode input '%s' must be one bool",
                          training->name);
        if (training->kind != TK_CONST)
            return op_err(e, ST_UNSUPPORTED, n,
                          "training_mode input '%s' is computed at run time; orch runs Dropout "
                          "in inference mode only",
                          training->name);
        // Training with ratio 0 drops nothing, so it is still deterministic.
        bool drops =
            !ratio || ratio->kind != TK_CONST || elem_get_f64(ratio->dtype, ratio->data, 0);
        if (elem_get_i64(DT_BOOL, training->data, 0) && drops)
            return op_err(e, ST_UNSUPPORTED, n,
                          "training_mode is true and ratio is not a constant 0; orch runs Dropout "
                          "in inference mode only");
    }
    const Tensor *x = node_input(g, n, 0);
    Tensor *mask = node_output(g, n, 1);
    if (mask)
        tensor_set_shape(mask, DT_BOOL, x->rank, x->dims);
    return ST_OK;
}

static int run_dropout(const OpRun *r, Err *e) {
    (void)e;
    if (r->out[0])
        memcpy(r->y[0], r->x[0], tensor_nbytes(r->out[0]));
    if (r->n->n_out > 1 && r->out[1])
        memset(r->y[1], 1, tensor_nbytes(r->out[1]));
    return ST_OK;
}

// ---- Shape ----

// Shape-15: optional start/end attributes select a range of axes, clamped to the rank.
static void shape_range(const Node *n, int rank, int64_t *start, int64_t *len) {
    int64_t s = node_attr_i(n, "start", 0), end = node_attr_i(n, "end", rank);
    if (s < 0)
        s += rank;
    if (end < 0)
        end += rank;
    s = ORCH_MAX(0, ORCH_MIN(s, rank));
    end = ORCH_MAX(s, ORCH_MIN(end, rank));
    *start = s;
    *len = end - s;
}

static int infer_shape(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t start, len;
    (void)e;
    shape_range(n, x->rank, &start, &len);
    tensor_set_shape(node_output(g, n, 0), DT_INT64, 1, &len);
    return ST_OK;
}

static int run_shape(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    int64_t start, len;
    shape_range(r->n, x->rank, &start, &len);
    int64_t *y = r->y[0];
    for (int64_t i = 0; i < len; i++)
        y[i] = x->dims[start + i];
    return ST_OK;
}

// ---- Transpose ----

static int transpose_perm(const Node *n, int rank, int *perm, Err *e) {
    const int64_t *p;
    int count = node_attr_ints(n, "perm", &p);
    if (count < 0) {
        for (int d = 0; d < rank; d++)
            perm[d] = rank - 1 - d;
        return ST_OK;
    }
    if (count != rank)
        return op_err(e, ST_INVALID, n, "perm has %d entries for an input of rank %d", count, rank);
    bool seen[ORCH_MAX_RANK] = {false};
    for (int d = 0; d < rank; d++) {
        if (p[d] < 0 || p[d] >= rank || seen[p[d]])
            return op_err(e, ST_INVALID, n, "perm is not a permutation of 0..%d", rank - 1);
        seen[p[d]] = true;
        perm[d] = (int)p[d];
    }
    return ST_OK;
}

static int infer_transpose(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int perm[ORCH_MAX_RANK];
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = transpose_perm(n, x->rank, perm, e)))
        return rc;
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = x->dims[perm[d]];
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, dims);
    return ST_OK;
}

static int run_transpose(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    int perm[ORCH_MAX_RANK];
    int rc = transpose_perm(r->n, x->rank, perm, e);
    if (rc)
        return rc;
    int64_t in_strides[ORCH_MAX_RANK], strides[ORCH_MAX_RANK];
    layout_strides(x->rank, x->dims, in_strides);
    for (int d = 0; d < x->rank; d++)
        strides[d] = in_strides[perm[d]];
    layout_gather_view(r->y[0], r->x[0], dtype_size(x->dtype), x->rank, r->out[0]->dims, strides,
                       0);
    return ST_OK;
}

// ---- Concat, Split ----

static int infer_concat(Graph *g, Node *n, Err *e) {
    const Tensor *first = node_input(g, n, 0);
    int axis, rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    if (!node_attr(n, "axis"))
        return op_err(e, ST_INVALID, n, "the axis attribute is required");
    if (first->rank == 0)
        return op_err(e, ST_INVALID, n, "cannot concatenate scalars ('%s')", first->name);
    if ((rc = op_axis(n, node_attr_i(n, "axis", 0), first->rank, "axis", &axis, e)))
        return rc;
    int64_t dims[ORCH_MAX_RANK];
    memcpy(dims, first->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < n->n_in; i++) {
        const Tensor *t = node_input(g, n, i);
        if (!t)
            return op_err(e, ST_INVALID, n, "input %d is missing", i);
        bool same = t->dtype == first->dtype && t->rank == first->rank;
        for (int d = 0; same && d < t->rank; d++)
            same = d == axis || t->dims[d] == first->dims[d];
        if (!same) {
            char a[128], b[128];
            return op_err(e, ST_INVALID, n,
                          "input %d ('%s', %s %s) does not match input 0 (%s %s) outside axis %d",
                          i, t->name, dtype_name(t->dtype), tensor_shape_str(t, a, sizeof a),
                          dtype_name(first->dtype), tensor_shape_str(first, b, sizeof b), axis);
        }
        dims[axis] += t->dims[axis];
    }
    tensor_set_shape(node_output(g, n, 0), first->dtype, first->rank, dims);
    return ST_OK;
}

// Copies between a tensor and the pieces it is split into (or concatenated from) along `axis`.
// pieces[i] holds sizes[i] entries of that axis; `join` copies pieces into whole.
static void move_pieces(char *whole, char *const *pieces, const int64_t *sizes, int count,
                        const Tensor *t, int axis, bool join) {
    size_t esize = dtype_size(t->dtype);
    int64_t outer = numel_of(axis, t->dims),
            inner = numel_of(t->rank - axis - 1, t->dims + axis + 1);
    size_t row = (size_t)(t->dims[axis] * inner) * esize;
    int64_t pos = 0;
    for (int i = 0; i < count; i++) {
        size_t chunk = (size_t)(sizes[i] * inner) * esize;
        for (int64_t o = 0; pieces[i] && o < outer; o++) {
            char *w = whole + (size_t)o * row + (size_t)(pos * inner) * esize;
            char *p = pieces[i] + (size_t)o * chunk;
            if (join)
                memcpy(w, p, chunk);
            else
                memcpy(p, w, chunk);
        }
        pos += sizes[i];
    }
}

static int run_concat(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *out = r->out[0];
    int axis = (int)node_attr_i(r->n, "axis", 0);
    if (axis < 0)
        axis += out->rank;
    int count = r->n->n_in;
    int64_t *sizes = xmalloc(sizeof(int64_t) * (size_t)count);
    char **pieces = xmalloc(sizeof(char *) * (size_t)count);
    for (int i = 0; i < count; i++) {
        sizes[i] = r->in[i]->dims[axis];
        pieces[i] = (char *)r->x[i];
    }
    move_pieces(r->y[0], pieces, sizes, count, out, axis, true);
    free(sizes);
    free(pieces);
    return ST_OK;
}

int layout_split_sizes(const Graph *g, const Node *n, const Tensor *x, int axis, int64_t *sizes,
                       Err *e) {
    int count = n->n_out, given = -1;
    int64_t dim = x->dims[axis];
    if (n->opset < 13) {
        const int64_t *v;
        if (node_input(g, n, 1))
            return op_err(e, ST_INVALID, n, "takes split as an attribute before opset 13");
        given = node_attr_ints(n, "split", &v);
        for (int i = 0; i < given && i < count; i++)
            sizes[i] = v[i];
    } else {
        if (node_attr(n, "split"))
            return op_err(e, ST_INVALID, n, "takes split as input 1 from opset 13");
        int rc = op_const_ints(g, n, 1, sizes, count + 1, &given, e);
        if (rc)
            return rc;
    }
    if (node_attr(n, "num_outputs")) {
        if (n->opset < 18)
            return op_err(e, ST_INVALID, n, "num_outputs exists from opset 18");
        if (given >= 0)
            return op_err(e, ST_INVALID, n, "has both split and num_outputs");
        if (node_attr_i(n, "num_outputs", 0) != count)
            return op_err(e, ST_INVALID, n, "num_outputs is %lld but the node has %d outputs",
                          (long long)node_attr_i(n, "num_outputs", 0), count);
    }
    if (given >= 0) {
        int64_t sum = 0;
        if (given != count)
            return op_err(e, ST_INVALID, n, "split has %d entries for %d outputs", given, count);
        for (int i = 0; i < count; i++) {
            if (sizes[i] < 0 || sizes[i] > dim)
                return op_err(e, ST_INVALID, n, "split entry %lld is out of range",
                              (long long)sizes[i]);
            sum += sizes[i];
        }
        if (sum != dim)
            return op_err(e, ST_INVALID, n, "split sums to %lld, but axis %d has %lld entries",
                          (long long)sum, axis, (long long)dim);
        return ST_OK;
    }
    int64_t part = n->opset >= 18 ? (dim + count - 1) / count : dim / count;
    if ((n->opset < 18 && dim % count) || dim - part * (count - 1) < 0)
        return op_err(e, ST_INVALID, n, "axis %d of size %lld cannot be split into %d parts", axis,
                      (long long)dim, count);
    for (int i = 0; i < count; i++)
        sizes[i] = i < count - 1 ? part : dim - part * (count - 1);
    return ST_OK;
}

static int infer_split(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int axis, rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    if (x->rank == 0)
        return op_err(e, ST_INVALID, n, "cannot split a scalar");
    if ((rc = op_axis(n, node_attr_i(n, "axis", 0), x->rank, "axis", &axis, e)))
        return rc;
    int64_t *sizes = xmalloc(sizeof(int64_t) * (size_t)(n->n_out + 1));
    rc = layout_split_sizes(g, n, x, axis, sizes, e);
    for (int i = 0; i < n->n_out && rc == ST_OK; i++) {
        int64_t dims[ORCH_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        Tensor *out = node_output(g, n, i);
        if (out)
            tensor_set_shape(out, x->dtype, x->rank, dims);
    }
    free(sizes);
    return rc;
}

static int run_split(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    int axis = (int)node_attr_i(r->n, "axis", 0), count = r->n->n_out;
    if (axis < 0)
        axis += x->rank;
    int64_t *sizes = xmalloc(sizeof(int64_t) * (size_t)(count + 1));
    int rc = layout_split_sizes(r->g, r->n, x, axis, sizes, e);
    char **pieces = xmalloc(sizeof(char *) * (size_t)count);
    for (int i = 0; i < count; i++)
        pieces[i] = r->out[i] ? r->y[i] : NULL;
    if (rc == ST_OK)
        move_pieces((char *)r->x[0], pieces, sizes, count, x, axis, false);
    free(sizes);
    free(pieces);
    return rc;
}

// ---- Slice ----

int layout_slice_plan(const Graph *g, const Node *n, const Tensor *x, SlicePlan *p, Err *e) {
    int64_t starts[ORCH_MAX_RANK], ends[ORCH_MAX_RANK], axes[ORCH_MAX_RANK], steps[ORCH_MAX_RANK];
    int ns, ne, na, nst, rc;
    if ((rc = op_const_ints(g, n, 1, starts, ORCH_MAX_RANK, &ns, e)) ||
        (rc = op_const_ints(g, n, 2, ends, ORCH_MAX_RANK, &ne, e)) ||
        (rc = op_const_ints(g, n, 3, axes, ORCH_MAX_RANK, &na, e)) ||
        (rc = op_const_ints(g, n, 4, steps, ORCH_MAX_RANK, &nst, e)))
        return rc;
    if (ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return op_err(e, ST_INVALID, n, "starts, ends, axes and steps differ in length");
    int ax[ORCH_MAX_RANK];
    for (int i = 0; i < ns; i++)
        axes[i] = na >= 0 ? axes[i] : i;
    if ((rc = normalize_axes(n, axes, ns, x->rank, ax, e)))
        return rc;
    for (int d = 0; d < x->rank; d++) {
        p->start[d] = 0;
        p->step[d] = 1;
        p->count[d] = x->dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int d = ax[i];
        int64_t dim = x->dims[d], step = nst >= 0 ? steps[i] : 1, s = starts[i], end = ends[i];
        if (step == 0)
            return op_err(e, ST_INVALID, n, "step for axis %d is 0", d);
        if (s < 0)
            s += dim;
        if (end < 0)
            end += dim;
        int64_t count;
        if (step > 0) {
            s = ORCH_MAX(0, ORCH_MIN(s, dim));
            end = ORCH_MAX(0, ORCH_MIN(end, dim));
            count = end > s ? (int64_t)((uint64_t)(end - s - 1) / (uint64_t)step) + 1 : 0;
        } else if (dim == 0) {
            count = 0; // nothing to walk backwards over (the clamps below would give one element)
        } else {
            s = ORCH_MAX(0, ORCH_MIN(s, dim - 1));
            end = ORCH_MAX(-1, ORCH_MIN(end, dim - 1));
            // 0 - step in unsigned arithmetic: step may be INT64_MIN.
            count = s > end ? (int64_t)((uint64_t)(s - end - 1) / (0 - (uint64_t)step)) + 1 : 0;
        }
        p->start[d] = count > 0 ? s : 0;
        p->step[d] = count > 1 ? step : 1; // |step| < dim when it matters; no overflow later
        p->count[d] = count;
    }
    return ST_OK;
}

static int infer_slice(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    SlicePlan p;
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_slice_plan(g, n, x, &p, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, p.count);
    return ST_OK;
}

static int run_slice(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    SlicePlan p;
    int rc = layout_slice_plan(r->g, r->n, x, &p, e);
    if (rc)
        return rc;
    int64_t strides[ORCH_MAX_RANK], offset = 0;
    layout_strides(x->rank, x->dims, strides);
    for (int d = 0; d < x->rank; d++) {
        offset += p.start[d] * strides[d];
        strides[d] *= p.step[d];
    }
    layout_gather_view(r->y[0], r->x[0], dtype_size(x->dtype), x->rank, p.count, strides, offset);
    return ST_OK;
}

// ---- Expand, Tile ----

static int infer_expand(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t shape[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
    int count, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_const_shape(g, n, 1, shape, &count, e)))
        return rc;
    int rank = ORCH_MAX(count, x->rank);
    for (int d = 0; d < rank; d++) {
        int ds = d - (rank - count), dx = d - (rank - x->rank);
        int64_t a = ds >= 0 ? shape[ds] : 1, b = dx >= 0 ? x->dims[dx] : 1;
        if (a < 0)
            return op_err(e, ST_INVALID, n, "shape has a negative entry %lld", (long long)a);
        if (a != b && a != 1 && b != 1) {
            char s[128], xs[128];
            return op_err(e, ST_INVALID, n, "input shape %s does not broadcast to %s",
                          tensor_shape_str(x, xs, sizeof xs), shape_str(shape, count, s, sizeof s));
        }
        dims[d] = a == 1 ? b : a;
    }
    tensor_set_shape(node_output(g, n, 0), x->dtype, rank, dims);
    return ST_OK;
}

static int run_expand(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *out = r->out[0];
    int64_t strides[ORCH_MAX_RANK];
    op_broadcast_strides(r->in[0], out->rank, out->dims, strides);
    layout_gather_view(r->y[0], r->x[0], dtype_size(out->dtype), out->rank, out->dims, strides, 0);
    return ST_OK;
}

static int infer_tile(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t reps[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
    int count, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = op_const_ints(g, n, 1, reps, ORCH_MAX_RANK, &count, e)))
        return rc;
    if (count != x->rank || node_input(g, n, 1)->rank != 1)
        return op_err(e, ST_INVALID, n, "repeats must be 1-D with %d entries (the input rank)",
                      x->rank);
    for (int d = 0; d < x->rank; d++)
        if (reps[d] < 0 || mul_overflows_i64(x->dims[d], reps[d], &dims[d]))
            return op_err(e, ST_INVALID, n, "repeats entry %lld for axis %d is invalid",
                          (long long)reps[d], d);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, dims);
    return ST_OK;
}

static int run_tile(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0], *out = r->out[0];
    size_t esize = dtype_size(x->dtype);
    int64_t strides[ORCH_MAX_RANK], idx[ORCH_MAX_RANK] = {0}, numel = tensor_numel(out);
    layout_strides(x->rank, x->dims, strides);
    char *y = r->y[0];
    const char *src = r->x[0];
    for (int64_t k = 0; k < numel; k++) {
        int64_t off = 0;
        for (int d = 0; d < x->rank; d++)
            off += (idx[d] % x->dims[d]) * strides[d];
        memcpy(y + (size_t)k * esize, src + (size_t)off * esize, esize);
        for (int d = out->rank - 1; d >= 0; d--) {
            if (++idx[d] < out->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return ST_OK;
}

// ---- Pad ----

#define PAD_MAX ((int64_t)1 << 40) // larger pads cannot give a tensor orch could hold

int layout_pad_plan(const Graph *g, const Node *n, const Tensor *x, PadPlan *p, int64_t *dims,
                    Err *e) {
    const char *mode = node_attr_s(n, "mode", "constant");
    if (strcmp(mode, "constant") == 0)
        p->mode = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0)
        p->mode = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0)
        p->mode = PAD_EDGE;
    else if (strcmp(mode, "wrap") == 0 && n->opset >= 19)
        p->mode = PAD_WRAP;
    else
        return op_err(e, ST_INVALID, n, "mode '%s' is not a Pad mode in opset %d", mode, n->opset);
    int64_t pads[2 * ORCH_MAX_RANK], axes[ORCH_MAX_RANK];
    int np, na, ax[ORCH_MAX_RANK], rc;
    if (n->opset < 18 && node_input(g, n, 3))
        return op_err(e, ST_INVALID, n, "the axes input exists from opset 18");
    if ((rc = op_const_ints(g, n, 1, pads, 2 * ORCH_MAX_RANK, &np, e)) ||
        (rc = op_const_ints(g, n, 3, axes, ORCH_MAX_RANK, &na, e)))
        return rc;
    if (na < 0) {
        na = x->rank;
        for (int i = 0; i < na; i++)
            axes[i] = i;
    }
    if ((rc = normalize_axes(n, axes, na, x->rank, ax, e)))
        return rc;
    if (np != 2 * na)
        return op_err(e, ST_INVALID, n, "pads has %d entries for %d axes (2 per axis)", np, na);
    int64_t end[ORCH_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++)
        p->begin[d] = 0;
    for (int i = 0; i < na; i++) {
        p->begin[ax[i]] = pads[i];
        end[ax[i]] = pads[na + i];
    }
    for (int d = 0; d < x->rank; d++) {
        int64_t b = p->begin[d], dim = x->dims[d];
        if (b > PAD_MAX || end[d] > PAD_MAX || b < -dim || end[d] < -dim || dim + b + end[d] < 0)
            return op_err(e, ST_INVALID, n, "pads %lld, %lld do not fit axis %d of size %lld",
                          (long long)b, (long long)end[d], d, (long long)dim);
        dims[d] = dim + b + end[d];
        if (p->mode != PAD_CONSTANT && dim == 0 && dims[d] > 0)
            return op_err(e, ST_INVALID, n, "mode '%s' cannot pad the empty axis %d", mode, d);
    }
    return ST_OK;
}

static int infer_pad(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0), *value = node_input(g, n, 2);
    PadPlan p;
    int64_t dims[ORCH_MAX_RANK];
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_pad_plan(g, n, x, &p, dims, e)))
        return rc;
    if (value && (value->dtype != x->dtype || tensor_numel(value) > 1))
        return op_err(e, ST_INVALID, n, "constant_value '%s' must be one %s", value->name,
                      dtype_name(x->dtype));
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, dims);
    return ST_OK;
}

int64_t layout_pad_source(int mode, int64_t o, int64_t begin, int64_t dim) {
    int64_t s = o - begin;
    if (s >= 0 && s < dim)
        return s;
    switch (mode) {
    case PAD_EDGE: return s < 0 ? 0 : dim - 1;
    case PAD_WRAP: return (s % dim + dim) % dim;
    case PAD_REFLECT: {
        // numpy's reflect: a triangle wave of period 2 * (dim - 1) over the input.
        if (dim == 1)
            return 0;
        int64_t period = 2 * (dim - 1), m = (s % period + period) % period;
        return m < dim ? m : period - m;
    }
    default: return -1;
    }
}

static int run_pad(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0], *out = r->out[0];
    PadPlan p;
    int64_t dims[ORCH_MAX_RANK];
    int rc = layout_pad_plan(r->g, r->n, x, &p, dims, e);
    if (rc)
        return rc;
    size_t esize = dtype_size(x->dtype);
    unsigned char value[16] = {0};
    const Tensor *vt = r->n->n_in > 2 ? r->in[2] : NULL;
    if (vt && tensor_numel(vt) == 1)
        memcpy(value, r->x[2], esize);
    int64_t *maps[ORCH_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        maps[d] = xmalloc(sizeof(int64_t) * (size_t)(out->dims[d] + 1));
        for (int64_t o = 0; o < out->dims[d]; o++)
            maps[d][o] = layout_pad_source(p.mode, o, p.begin[d], x->dims[d]);
    }
    layout_gather_maps(r->y[0], r->x[0], esize, x->rank, x->dims, out->dims, maps, value);
    for (int d = 0; d < x->rank; d++)
        free(maps[d]);
    return ST_OK;
}

// ---- DepthToSpace, SpaceToDepth ----

// Both are a reshape to 6-D, a transpose and a reshape; this builds the 6-D view of the input
// (dims of the output in 6-D, strides into the input) for gather_view.
static int depth_space_view(const Graph *g, const Node *n, bool to_space, int64_t *dims6,
                            int64_t *strides6, int64_t *out4, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    int64_t b = node_attr_i(n, "blocksize", 0);
    if (!node_attr(n, "blocksize") || b <= 0 || b > (int64_t)1 << 20)
        return op_err(e, ST_INVALID, n, "needs a positive blocksize attribute");
    if (x->rank != 4)
        return op_err(e, ST_INVALID, n, "input must be 4-D (N, C, H, W), got rank %d", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t in6[6], s[6];
    if (to_space) {
        const char *mode = node_attr_s(n, "mode", "DCR");
        bool dcr = strcmp(mode, "DCR") == 0;
        if (!dcr && strcmp(mode, "CRD") != 0)
            return op_err(e, ST_INVALID, n, "mode '%s' is not DCR or CRD", mode);
        if (C % (b * b))
            return op_err(e, ST_INVALID, n, "channels %lld are not a multiple of blocksize^2",
                          (long long)C);
        int64_t Cb = C / (b * b);
        // DCR: [N, b, b, C', H, W] -> [0,3,4,1,5,2]; CRD: [N, C', b, b, H, W] -> [0,1,4,2,5,3].
        static const int dcr_perm[6] = {0, 3, 4, 1, 5, 2}, crd_perm[6] = {0, 1, 4, 2, 5, 3};
        const int *perm = dcr ? dcr_perm : crd_perm;
        int64_t dcr_dims[6] = {N, b, b, Cb, H, W}, crd_dims[6] = {N, Cb, b, b, H, W};
        memcpy(in6, dcr ? dcr_dims : crd_dims, sizeof in6);
        layout_strides(6, in6, s);
        for (int d = 0; d < 6; d++) {
            dims6[d] = in6[perm[d]];
            strides6[d] = s[perm[d]];
        }
        out4[0] = N, out4[1] = Cb, out4[2] = H * b, out4[3] = W * b;
        return ST_OK;
    }
    if (H % b || W % b)
        return op_err(e, ST_INVALID, n, "height %lld and width %lld are not multiples of %lld",
                      (long long)H, (long long)W, (long long)b);
    // [N, C, H/b, b, W/b, b] -> [0,3,5,1,2,4]
    static const int perm[6] = {0, 3, 5, 1, 2, 4};
    int64_t d6[6] = {N, C, H / b, b, W / b, b};
    layout_strides(6, d6, s);
    for (int d = 0; d < 6; d++) {
        dims6[d] = d6[perm[d]];
        strides6[d] = s[perm[d]];
    }
    if (mul_overflows_i64(C, b * b, &out4[1]))
        return op_err(e, ST_INVALID, n, "output channels overflow");
    out4[0] = N, out4[2] = H / b, out4[3] = W / b;
    return ST_OK;
}

static int infer_depth_space(Graph *g, Node *n, bool to_space, Err *e) {
    int64_t dims6[6], strides6[6], out4[4];
    int rc = depth_space_view(g, n, to_space, dims6, strides6, out4, e);
    if (rc)
        return rc;
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, 4, out4);
    return ST_OK;
}

static int run_depth_space(const OpRun *r, bool to_space, Err *e) {
    int64_t dims6[6], strides6[6], out4[4];
    int rc = depth_space_view(r->g, r->n, to_space, dims6, strides6, out4, e);
    if (rc)
        return rc;
    layout_gather_view(r->y[0], r->x[0], dtype_size(r->in[0]->dtype), 6, dims6, strides6, 0);
    return ST_OK;
}

static int infer_depth_to_space(Graph *g, Node *n, Err *e) {
    return infer_depth_space(g, n, true, e);
}
static int run_depth_to_space(const OpRun *r, Err *e) {
    return run_depth_space(r, true, e);
}
static int infer_space_to_depth(Graph *g, Node *n, Err *e) {
    return infer_depth_space(g, n, false, e);
}
static int run_space_to_depth(const OpRun *r, Err *e) {
    return run_depth_space(r, false, e);
}

// ---- ReverseSequence ----

static int infer_reverse_sequence(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0), *lens = node_input(g, n, 1);
    int64_t batch = node_attr_i(n, "batch_axis", 1), time = node_attr_i(n, "time_axis", 0);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    if (x->rank < 2)
        return op_err(e, ST_INVALID, n, "input must have rank 2 or more");
    if (batch < 0 || batch > 1 || time < 0 || time > 1 || batch == time)
        return op_err(e, ST_INVALID, n, "batch_axis and time_axis must be 0 and 1 in some order");
    if ((lens->dtype != DT_INT64 && lens->dtype != DT_INT32) || lens->rank != 1 ||
        lens->dims[0] != x->dims[batch])
        return op_err(e, ST_INVALID, n, "sequence_lens must be int64 [%lld]",
                      (long long)x->dims[batch]);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

static int run_reverse_sequence(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0], *lens = r->in[1];
    int batch = (int)node_attr_i(r->n, "batch_axis", 1), time = 1 - batch;
    int64_t T = x->dims[time];
    for (int64_t b = 0; b < x->dims[batch]; b++) {
        int64_t len = elem_get_i64(lens->dtype, r->x[1], b);
        if (len < 0 || len > T)
            return op_err(e, ST_INVALID, r->n, "sequence_lens[%lld] = %lld is outside [0, %lld]",
                          (long long)b, (long long)len, (long long)T);
    }
    size_t esize = dtype_size(x->dtype);
    int64_t strides[ORCH_MAX_RANK], idx[ORCH_MAX_RANK] = {0}, numel = tensor_numel(x);
    layout_strides(x->rank, x->dims, strides);
    char *y = r->y[0];
    const char *src = r->x[0];
    for (int64_t k = 0; k < numel; k++) {
        int64_t len = elem_get_i64(lens->dtype, r->x[1], idx[batch]), t = idx[time];
        int64_t from = t < len ? k + (len - 1 - 2 * t) * strides[time] : k;
        memcpy(y + (size_t)k * esize, src + (size_t)from * esize, esize);
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return ST_OK;
}

// ---- the table ----

#define OUTS_MAX (1 << 16) // Split: any number of outputs

const OpDef ops_layout[] = {
    {"Identity", infer_identity, layout_run_copy, 1, 1, 1, 1, 0},
    {"Dropout", infer_dropout, run_dropout, 1, 3, 1, 2, 0},
    {"Shape", infer_shape, run_shape, 1, 1, 1, 1, OPF_SHAPE_ONLY},
    {"Size", layout_infer_size, layout_run_size, 1, 1, 1, 1, OPF_SHAPE_ONLY},
    {"Reshape", layout_infer_reshape, layout_run_copy, 2, 2, 1, 1, 0},
    {"Flatten", layout_infer_flatten, layout_run_copy, 1, 1, 1, 1, 0},
    {"Squeeze", layout_infer_squeeze, layout_run_copy, 1, 2, 1, 1, 0},
    {"Unsqueeze", layout_infer_unsqueeze, layout_run_copy, 1, 2, 1, 1, 0},
    {"Transpose", infer_transpose, run_transpose, 1, 1, 1, 1, 0},
    {"Concat", infer_concat, run_concat, 1, -1, 1, 1, 0},
    {"Split", infer_split, run_split, 1, 2, 1, OUTS_MAX, 0},
    {"Slice", infer_slice, run_slice, 3, 5, 1, 1, 0},
    {"Expand", infer_expand, run_expand, 2, 2, 1, 1, 0},
    {"Tile", infer_tile, run_tile, 2, 2, 1, 1, 0},
    {"Pad", infer_pad, run_pad, 2, 4, 1, 1, 0},
    {"DepthToSpace", infer_depth_to_space, run_depth_to_space, 1, 1, 1, 1, 0},
    {"SpaceToDepth", infer_space_to_depth, run_space_to_depth, 1, 1, 1, 1, 0},
    {"ReverseSequence", infer_reverse_sequence, run_reverse_sequence, 2, 2, 1, 1, 0},
    {"ConstantOfShape", layout_infer_constant_of_shape, layout_run_constant_of_shape, 1, 1, 1, 1,
     0},
    {"Range", layout_infer_range, layout_run_range, 3, 3, 1, 1, 0},
    {"EyeLike", layout_infer_eye_like, layout_run_eye_like, 1, 1, 1, 1, 0},
    {"Trilu", layout_infer_trilu, layout_run_trilu, 1, 2, 1, 1, 0},
    {"NonZero", layout_infer_nonzero, layout_run_nonzero, 1, 1, 1, 1, 0},
    {"Gather", layout_infer_gather, layout_run_gather, 2, 2, 1, 1, 0},
    {"GatherElements", layout_infer_gather_elements, layout_run_gather_elements, 2, 2, 1, 1, 0},
    {"GatherND", layout_infer_gather_nd, layout_run_gather_nd, 2, 2, 1, 1, 0},
    {"ScatterND", layout_infer_scatter_nd, layout_run_scatter_nd, 3, 3, 1, 1, 0},
    {"ScatterElements", layout_infer_scatter_elements, layout_run_scatter_elements, 3, 3, 1, 1, 0},
    {"Scatter", layout_infer_scatter_elements, layout_run_scatter_elements, 3, 3, 1, 1, 0},
    {"OneHot", layout_infer_one_hot, layout_run_one_hot, 3, 3, 1, 1, 0},
    {"Compress", layout_infer_compress, layout_run_compress, 2, 2, 1, 1, 0},
    {"TopK", layout_infer_top_k, layout_run_top_k, 2, 2, 1, 2, 0},
    {"CumSum", layout_infer_cumsum, layout_run_cumsum, 2, 2, 1, 1, 0},
    {"Resize", layout_infer_resize, layout_run_resize, 1, 4, 1, 1, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
