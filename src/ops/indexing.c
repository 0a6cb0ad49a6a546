// Indexing ops of the layout family (see layout_internal.h): Gather, GatherElements, GatherND,
// ScatterElements (and the older Scatter), ScatterND, OneHot, Compress, TopK and CumSum.
// Index values are checked when the kernel runs, since they may be computed: an index out of
// range is an ST_INVALID error naming the node, never an out-of-bounds access.
#include "layout_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const DType index_types[] = {DT_INT64, DT_INT32, DT_UNDEFINED};

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t v = 1;
    for (int d = from; d < to; d++)
        v *= dims[d];
    return v;
}

// Reads index i of an int32/int64 tensor and wraps a negative one; fails unless in [0, size).
static int read_index(const OpRun *r, int input, int64_t i, int64_t size, int64_t *out, Err *e) {
    int64_t v = elem_get_i64(r->in[input]->dtype, r->x[input], i);
    if (v < -size || v >= size)
        return op_err(
            e, ST_INVALID, r->n,
            "index %lld (element %lld of '%s') is out of range for a dimension of size %lld",
            (long long)v, (long long)i, r->in[input]->name, (long long)size);
    *out = v < 0 ? v + size : v;
    return ST_OK;
}

static void next_index(int64_t *idx, int rank, const int64_t *dims) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d])
            return;
        idx[d] = 0;
    }
}

// ---- Gather ----

int layout_infer_gather(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0), *ind = node_input(g, n, 1);
    int axis, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = op_need_dtype(g, n, 1, index_types, e)))
        return rc;
    if (x->rank == 0)
        return op_err(e, ST_INVALID, n, "data '%s' must have rank 1 or more", x->name);
    if ((rc = op_axis(n, node_attr_i(n, "axis", 0), x->rank, "axis", &axis, e)))
        return rc;
    int rank = x->rank - 1 + ind->rank;
    if (rank > ORCH_MAX_RANK)
        return op_err(e, ST_UNSUPPORTED, n, "the output would have rank %d; orch allows %d", rank,
                      ORCH_MAX_RANK);
    int64_t dims[ORCH_MAX_RANK];
    int k = 0;
    for (int d = 0; d < axis; d++)
        dims[k++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++)
        dims[k++] = ind->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        dims[k++] = x->dims[d];
    tensor_set_shape(node_output(g, n, 0), x->dtype, rank, dims);
    return ST_OK;
}

int layout_run_gather(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    int axis = (int)node_attr_i(r->n, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    int64_t outer = prod(x->dims, 0, axis), size = x->dims[axis];
    int64_t inner = prod(x->dims, axis + 1, x->rank), count = tensor_numel(r->in[1]);
    size_t esize = dtype_size(x->dtype), block = (size_t)inner * esize;
    int64_t *at = xmalloc(sizeof(int64_t) * (size_t)(count + 1));
    int rc = ST_OK;
    for (int64_t j = 0; j < count && rc == ST_OK; j++)
        rc = read_index(r, 1, j, size, &at[j], e);
    const char *src = r->x[0];
    char *y = r->y[0];
    for (int64_t o = 0; o < outer && rc == ST_OK; o++)
        for (int64_t j = 0; j < count; j++)
            memcpy(y + (size_t)(o * count + j) * block, src + (size_t)(o * size + at[j]) * block,
                   block);
    free(at);
    return rc;
}

// ---- GatherElements, ScatterElements ----

// Shared shape rule: data and indices of one rank, indices no larger than data off the axis;
// for scattering, updates shaped as indices and typed as data.
static int elements_check(const Graph *g, const Node *n, bool scatter, int *axis, Err *e) {
    const Tensor *x = node_input(g, n, 0), *ind = node_input(g, n, 1);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = op_need_dtype(g, n, 1, index_types, e)))
        return rc;
    if (x->rank == 0 || ind->rank != x->rank)
        return op_err(e, ST_INVALID, n,
                      "data and indices must have the same rank (>= 1), got %d and %d", x->rank,
                      ind->rank);
    if ((rc = op_axis(n, node_attr_i(n, "axis", 0), x->rank, "axis", axis, e)))
        return rc;
    for (int d = 0; d < x->rank; d++)
        if (d != *axis && ind->dims[d] > x->dims[d])
            return op_err(e, ST_INVALID, n, "indices dimension %d (%lld) exceeds data's (%lld)", d,
                          (long long)ind->dims[d], (long long)x->dims[d]);
    if (scatter) {
        const Tensor *u = node_input(g, n, 2);
        bool same = u->rank == ind->rank && u->dtype == x->dtype;
        for (int d = 0; same && d < u->rank; d++)
            same = u->dims[d] == ind->dims[d];
        if (!same)
            return op_err(e, ST_INVALID, n,
                          "updates '%s' must have the shape of indices and the dtype of data",
                          u->name);
    }
    return ST_OK;
}

int layout_infer_gather_elements(Graph *g, Node *n, Err *e) {
    int axis, rc = elements_check(g, n, false, &axis, e);
    if (rc)
        return rc;
    const Tensor *ind = node_input(g, n, 1);
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, ind->rank, ind->dims);
    return ST_OK;
}

// Calls back with (position in indices, element offset in data) for every index element.
typedef void (*ElementFn)(const OpRun *r, int64_t k, int64_t off, int red);

static int each_element(const OpRun *r, int red, ElementFn fn, Err *e) {
    const Tensor *x = r->in[0], *ind = r->in[1];
    int axis = (int)node_attr_i(r->n, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    int64_t strides[ORCH_MAX_RANK], idx[ORCH_MAX_RANK] = {0}, numel = tensor_numel(ind);
    layout_strides(x->rank, x->dims, strides);
    for (int64_t k = 0; k < numel; k++) {
        int64_t v = 0, off = 0;
        int rc = read_index(r, 1, k, x->dims[axis], &v, e);
        if (rc)
            return rc;
        for (int d = 0; d < x->rank; d++)
            off += (d == axis ? v : idx[d]) * strides[d];
        fn(r, k, off, red);
        next_index(idx, ind->rank, ind->dims);
    }
    return ST_OK;
}

static void gather_element(const OpRun *r, int64_t k, int64_t off, int red) {
    (void)red;
    size_t esize = dtype_size(r->in[0]->dtype);
    memcpy((char *)r->y[0] + (size_t)k * esize, (const char *)r->x[0] + (size_t)off * esize, esize);
}

int layout_run_gather_elements(const OpRun *r, Err *e) {
    return each_element(r, 0, gather_element, e);
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

// The reduction attribute of the scatter ops: add/mul from opset 16, max/min from 18.
static int read_reduction(const Node *n, int *red, Err *e) {
    const char *s = node_attr_s(n, "reduction", "none");
    if (strcmp(s, "none") == 0)
        *red = RED_NONE;
    else if (strcmp(s, "add") == 0 && n->opset >= 16)
        *red = RED_ADD;
    else if (strcmp(s, "mul") == 0 && n->opset >= 16)
        *red = RED_MUL;
    else if (strcmp(s, "max") == 0 && n->opset >= 18)
        *red = RED_MAX;
    else if (strcmp(s, "min") == 0 && n->opset >= 18)
        *red = RED_MIN;
    else
        return op_err(e, ST_INVALID, n, "reduction '%s' is not valid in opset %d", s, n->opset);
    return ST_OK;
}

// y[i] = reduce(y[i], u[j]) in the element type: floats through double (exact for one operation
// on float32), integers in wrapping 64-bit arithmetic, bool as or/and.
static void combine(DType t, void *y, int64_t i, const void *u, int64_t j, int red) {
    size_t esize = dtype_size(t);
    if (red == RED_NONE) {
        memcpy((char *)y + (size_t)i * esize, (const char *)u + (size_t)j * esize, esize);
    } else if (dtype_is_float(t)) {
        double a = elem_get_f64(t, y, i), b = elem_get_f64(t, u, j), v;
        switch (red) {
        case RED_ADD: v = a + b; break;
        case RED_MUL: v = a * b; break;
        case RED_MAX: v = isnan(a) || a >= b ? a : b; break;
        default: v = isnan(a) || a <= b ? a : b; break;
        }
        elem_set_f64(t, y, i, v);
    } else {
        int64_t a = elem_get_i64(t, y, i), b = elem_get_i64(t, u, j);
        bool a_less = t == DT_UINT64 ? (uint64_t)a < (uint64_t)b : a < b;
        uint64_t v;
        switch (red) {
        case RED_ADD: v = (uint64_t)a + (uint64_t)b; break;
        case RED_MUL: v = (uint64_t)a * (uint64_t)b; break;
        case RED_MAX: v = (uint64_t)(a_less ? b : a); break;
        default: v = (uint64_t)(a_less ? a : b); break;
        }
        elem_set_i64(t, y, i, (int64_t)v);
    }
}

int layout_infer_scatter_elements(Graph *g, Node *n, Err *e) {
    int axis, red, rc = elements_check(g, n, true, &axis, e);
    if (rc || (rc = read_reduction(n, &red, e)))
        return rc;
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

static void scatter_element(const OpRun *r, int64_t k, int64_t off, int red) {
    combine(r->in[0]->dtype, r->y[0], off, r->x[2], k, red);
}

int layout_run_scatter_elements(const OpRun *r, Err *e) {
    int red, rc = read_reduction(r->n, &red, e);
    if (rc)
        return rc;
    memcpy(r->y[0], r->x[0], tensor_nbytes(r->out[0]));
    return each_element(r, red, scatter_element, e);
}

// ---- GatherND, ScatterND ----

int layout_infer_gather_nd(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0), *ind = node_input(g, n, 1);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = op_need_dtype(g, n, 1, index_types, e)))
        return rc;
    int64_t b = node_attr_i(n, "batch_dims", 0);
    if (x->rank == 0 || ind->rank == 0)
        return op_err(e, ST_INVALID, n, "data and indices must have rank 1 or more");
    if (b < 0 || b >= ORCH_MIN(x->rank, ind->rank))
        return op_err(e, ST_INVALID, n, "batch_dims %lld must be below both ranks", (long long)b);
    int64_t k = ind->dims[ind->rank - 1];
    if (k < 1 || k > x->rank - b)
        return op_err(e, ST_INVALID, n, "the last indices dimension (%lld) must be in [1, %lld]",
                      (long long)k, (long long)(x->rank - b));
    for (int d = 0; d < b; d++)
        if (x->dims[d] != ind->dims[d])
            return op_err(e, ST_INVALID, n, "batch dimension %d differs: %lld vs %lld", d,
                          (long long)x->dims[d], (long long)ind->dims[d]);
    int64_t dims[2 * ORCH_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < ind->rank - 1; d++)
        dims[rank++] = ind->dims[d];
    for (int d = (int)(b + k); d < x->rank; d++)
        dims[rank++] = x->dims[d];
    if (rank > ORCH_MAX_RANK)
        return op_err(e, ST_UNSUPPORTED, n, "the output would have rank %d; orch allows %d", rank,
                      ORCH_MAX_RANK);
    tensor_set_shape(node_output(g, n, 0), x->dtype, rank, dims);
    return ST_OK;
}

// For every index tuple of a GatherND/ScatterND: the element offset of the slice it selects.
// Tuples are numbered as in indices (batch-major); slices hold prod(data.dims[b+k:]) elements.
static int nd_offsets(const OpRun *r, int64_t b, int64_t *offsets, int64_t *slice, Err *e) {
    const Tensor *x = r->in[0], *ind = r->in[1];
    int64_t k = ind->dims[ind->rank - 1], batches = prod(x->dims, 0, (int)b);
    int64_t tuples = tensor_numel(ind) / k, per_batch = batches ? tuples / batches : 0;
    int64_t block = prod(x->dims, (int)b, x->rank);
    *slice = prod(x->dims, (int)(b + k), x->rank);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t v = 0;
            int rc = read_index(r, 1, t * k + j, x->dims[b + j], &v, e);
            if (rc)
                return rc;
            off = off * x->dims[b + j] + v;
        }
        offsets[t] = (per_batch ? t / per_batch : 0) * block + off * *slice;
    }
    return ST_OK;
}

int layout_run_gather_nd(const OpRun *r, Err *e) {
    const Tensor *ind = r->in[1];
    int64_t b = node_attr_i(r->n, "batch_dims", 0), slice;
    int64_t tuples = tensor_numel(ind) / ind->dims[ind->rank - 1];
    int64_t *offsets = xmalloc(sizeof(int64_t) * (size_t)(tuples + 1));
    int rc = nd_offsets(r, b, offsets, &slice, e);
    size_t esize = dtype_size(r->in[0]->dtype), bytes = (size_t)slice * esize;
    for (int64_t t = 0; t < tuples && rc == ST_OK; t++)
        memcpy((char *)r->y[0] + (size_t)t * bytes,
               (const char *)r->x[0] + (size_t)offsets[t] * esize, bytes);
    free(offsets);
    return rc;
}

int layout_infer_scatter_nd(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0), *ind = node_input(g, n, 1), *u = node_input(g, n, 2);
    int red, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = op_need_dtype(g, n, 1, index_types, e)) || (rc = read_reduction(n, &red, e)))
        return rc;
    if (x->rank == 0 || ind->rank == 0)
        return op_err(e, ST_INVALID, n, "data and indices must have rank 1 or more");
    int64_t k = ind->dims[ind->rank - 1];
    if (k < 1 || k > x->rank)
        return op_err(e, ST_INVALID, n, "the last indices dimension (%lld) must be in [1, %d]",
                      (long long)k, x->rank);
    // updates: indices.shape[:-1] + data.shape[k:]
    bool same = u->dtype == x->dtype && u->rank == ind->rank - 1 + x->rank - (int)k;
    for (int d = 0; same && d < u->rank; d++)
        same = u->dims[d] == (d < ind->rank - 1 ? ind->dims[d] : x->dims[d - ind->rank + 1 + k]);
    if (!same)
        return op_err(e, ST_INVALID, n, "updates '%s' must be %s shaped indices[:-1] + data[%lld:]",
                      u->name, dtype_name(x->dtype), (long long)k);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

int layout_run_scatter_nd(const OpRun *r, Err *e) {
    const Tensor *ind = r->in[1];
    int red, rc = read_reduction(r->n, &red, e);
    if (rc)
        return rc;
    int64_t slice, tuples = tensor_numel(ind) / ind->dims[ind->rank - 1];
    int64_t *offsets = xmalloc(sizeof(int64_t) * (size_t)(tuples + 1));
    rc = nd_offsets(r, 0, offsets, &slice, e);
    memcpy(r->y[0], r->x[0], tensor_nbytes(r->out[0]));
    for (int64_t t = 0; t < tuples && rc == ST_OK; t++)
        for (int64_t s = 0; s < slice; s++)
            combine(r->in[0]->dtype, r->y[0], offsets[t] + s, r->x[2], t * slice + s, red);
    free(offsets);
    return rc;
}

// ---- OneHot ----

// depth (input 1) sets the output shape, so it must be constant; values (input 2) may not be.
static int one_hot_depth(const Graph *g, const Node *n, int64_t *depth, Err *e) {
    double d;
    int rc = op_const_float(g, n, 1, 0, &d, e);
    if (rc)
        return rc;
    if (!(d >= 1 && d <= 1e12))
        return op_err(e, ST_INVALID, n, "depth %g must be a positive count", d);
    *depth = (int64_t)d;
    return ST_OK;
}

int layout_infer_one_hot(Graph *g, Node *n, Err *e) {
    const Tensor *ind = node_input(g, n, 0), *values = node_input(g, n, 2);
    int64_t depth = 0;
    int rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_need_storable(g, n, 2, e)) || (rc = one_hot_depth(g, n, &depth, e)))
        return rc;
    if (tensor_numel(values) != 2 || values->rank != 1)
        return op_err(e, ST_INVALID, n, "values '%s' must be 1-D [off, on]", values->name);
    int rank = ind->rank + 1, axis;
    if (rank > ORCH_MAX_RANK)
        return op_err(e, ST_UNSUPPORTED, n, "the output would have rank %d; orch allows %d", rank,
                      ORCH_MAX_RANK);
    if ((rc = op_axis(n, node_attr_i(n, "axis", -1), rank, "axis", &axis, e)))
        return rc;
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0, k = 0; d < rank; d++)
        dims[d] = d == axis ? depth : ind->dims[k++];
    tensor_set_shape(node_output(g, n, 0), values->dtype, rank, dims);
    return ST_OK;
}

// out[o, d, i] = on if indices[o, i] (negative ones wrapped once) == d, else off.
int layout_run_one_hot(const OpRun *r, Err *e) {
    const Tensor *ind = r->in[0], *out = r->out[0];
    int64_t depth = 0;
    int rc = one_hot_depth(r->g, r->n, &depth, e);
    if (rc)
        return rc;
    int axis = (int)node_attr_i(r->n, "axis", -1);
    if (axis < 0)
        axis += out->rank;
    int64_t outer = prod(ind->dims, 0, axis), inner = prod(ind->dims, axis, ind->rank);
    size_t esize = dtype_size(out->dtype);
    const char *off = r->x[2], *on = off + esize;
    char *y = r->y[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t v = elem_get_i64(ind->dtype, r->x[0], o * inner + i);
            if (v < 0)
                v += depth;
            for (int64_t d = 0; d < depth; d++)
                memcpy(y + (size_t)((o * depth + d) * inner + i) * esize, v == d ? on : off, esize);
        }
    return ST_OK;
}

// ---- Compress ----

// The selected positions along the axis (or of the flattened input): condition (constant, since
// it sets the output shape) is true there. Entries past the axis must be false.
static int compress_select(const Graph *g, const Node *n, int64_t *axis_len, int *axis,
                           int64_t *count, Err *e) {
    const Tensor *x = node_input(g, n, 0), *c = node_input(g, n, 1);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    if (c->dtype != DT_BOOL || c->rank != 1)
        return op_err(e, ST_INVALID, n, "condition '%s' must be 1-D bool", c->name);
    if (c->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "the output shape depends on condition '%s', which is computed at run "
                      "time; orch needs static shapes",
                      c->name);
    *axis = -1;
    *axis_len = tensor_numel(x);
    if (node_attr(n, "axis")) {
        if ((rc = op_axis(n, node_attr_i(n, "axis", 0), x->rank, "axis", axis, e)))
            return rc;
        *axis_len = x->dims[*axis];
    }
    *count = 0;
    const uint8_t *cond = c->data;
    for (int64_t i = 0; i < c->dims[0]; i++) {
        if (cond[i] && i >= *axis_len)
            return op_err(e, ST_INVALID, n,
                          "condition selects entry %lld beyond the %lld there are", (long long)i,
                          (long long)*axis_len);
        *count += cond[i] != 0;
    }
    return ST_OK;
}

int layout_infer_compress(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t len, count;
    int axis, rc = compress_select(g, n, &len, &axis, &count, e);
    if (rc)
        return rc;
    if (axis < 0) {
        tensor_set_shape(node_output(g, n, 0), x->dtype, 1, &count);
    } else {
        int64_t dims[ORCH_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = count;
        tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, dims);
    }
    return ST_OK;
}

int layout_run_compress(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0], *c = r->in[1];
    int64_t len, count;
    int axis, rc = compress_select(r->g, r->n, &len, &axis, &count, e);
    if (rc)
        return rc;
    // The flattened case is axis 0 of a 1-D view.
    int64_t outer = axis < 0 ? 1 : prod(x->dims, 0, axis);
    int64_t inner = axis < 0 ? 1 : prod(x->dims, axis + 1, x->rank);
    size_t esize = dtype_size(x->dtype), block = (size_t)inner * esize;
    const uint8_t *cond = r->x[1];
    const char *src = r->x[0];
    char *y = r->y[0];
    int64_t limit = ORCH_MIN(c->dims[0], len);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < limit; i++)
            if (cond[i]) {
                memcpy(y, src + (size_t)(o * len + i) * block, block);
                y += block;
            }
    return ST_OK;
}

// ---- TopK ----

enum { KEY_FLOAT, KEY_SIGNED, KEY_UNSIGNED };

typedef struct TopKey {
    int kind;
    double f;
    int64_t i; // signed value, or unsigned bits for KEY_UNSIGNED
    int64_t pos;
} TopKey;

// Orders values with NaN above everything (as numpy sorts); equal values keep index order.
static int key_compare(const TopKey *a, const TopKey *b) {
    switch (a->kind) {
    case KEY_FLOAT:
        if (isnan(a->f) || isnan(b->f))
            return isnan(a->f) - isnan(b->f);
        return (a->f > b->f) - (a->f < b->f);
    case KEY_UNSIGNED: return ((uint64_t)a->i > (uint64_t)b->i) - ((uint64_t)a->i < (uint64_t)b->i);
    default: return (a->i > b->i) - (a->i < b->i);
    }
}

static int key_ascending(const void *pa, const void *pb) {
    const TopKey *a = pa, *b = pb;
    int c = key_compare(a, b);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static int key_descending(const void *pa, const void *pb) {
    const TopKey *a = pa, *b = pb;
    int c = key_compare(b, a);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static int top_k_plan(const Graph *g, const Node *n, int *axis, int64_t *k, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t kv[1];
    int count, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = op_const_ints(g, n, 1, kv, 1, &count, e)))
        return rc;
    if (count != 1)
        return op_err(e, ST_INVALID, n, "K must hold one value");
    if (x->rank == 0)
        return op_err(e, ST_INVALID, n, "input must have rank 1 or more");
    if ((rc = op_axis(n, node_attr_i(n, "axis", -1), x->rank, "axis", axis, e)))
        return rc;
    if (kv[0] < 0 || kv[0] > x->dims[*axis])
        return op_err(e, ST_INVALID, n, "K = %lld is outside [0, %lld]", (long long)kv[0],
                      (long long)x->dims[*axis]);
    *k = kv[0];
    return ST_OK;
}

int layout_infer_top_k(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int axis;
    int64_t k = 0, dims[ORCH_MAX_RANK];
    int rc = top_k_plan(g, n, &axis, &k, e);
    if (rc)
        return rc;
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = k;
    Tensor *values = node_output(g, n, 0), *indices = node_output(g, n, 1);
    if (values)
        tensor_set_shape(values, x->dtype, x->rank, dims);
    if (indices)
        tensor_set_shape(indices, DT_INT64, x->rank, dims);
    return ST_OK;
}

// Sorts each line along the axis (the output is always sorted, which sorted=0 allows).
int layout_run_top_k(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    int axis;
    int64_t k = 0;
    int rc = top_k_plan(r->g, r->n, &axis, &k, e);
    if (rc)
        return rc;
    bool largest = node_attr_i(r->n, "largest", 1) != 0;
    int64_t outer = prod(x->dims, 0, axis), len = x->dims[axis];
    int64_t inner = prod(x->dims, axis + 1, x->rank);
    DType t = x->dtype;
    int kind = dtype_is_float(t) ? KEY_FLOAT : t == DT_UINT64 ? KEY_UNSIGNED : KEY_SIGNED;
    size_t esize = dtype_size(t);
    TopKey *keys = xmalloc(sizeof(TopKey) * (size_t)(len + 1));
    char *values = r->out[0] ? r->y[0] : NULL;
    int64_t *indices = r->n->n_out > 1 && r->out[1] ? r->y[1] : NULL;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < len; j++) {
                int64_t at = (o * len + j) * inner + i;
                keys[j].kind = kind;
                keys[j].f = kind == KEY_FLOAT ? elem_get_f64(t, r->x[0], at) : 0;
                keys[j].i = kind == KEY_FLOAT ? 0 : elem_get_i64(t, r->x[0], at);
                keys[j].pos = j;
            }
            qsort(keys, (size_t)len, sizeof(TopKey), largest ? key_descending : key_ascending);
            for (int64_t j = 0; j < k; j++) {
                int64_t to = (o * k + j) * inner + i, from = (o * len + keys[j].pos) * inner + i;
                if (values)
                    memcpy(values + (size_t)to * esize,
                           (const char *)r->x[0] + (size_t)from * esize, esize);
                if (indices)
                    indices[to] = keys[j].pos;
            }
        }
    free(keys);
    return ST_OK;
}

// ---- CumSum ----

// axis (input 1) only changes values, so it may be computed at run time; then it is checked
// when the kernel runs.
int layout_infer_cumsum(Graph *g, Node *n, Err *e) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16, DT_INT32,
                                  DT_INT64, DT_UINT32, DT_UINT64,  DT_UNDEFINED};
    const Tensor *x = node_input(g, n, 0), *a = node_input(g, n, 1);
    int rc = op_need_dtype(g, n, 0, types, e);
    if (rc || (rc = op_need_dtype(g, n, 1, index_types, e)))
        return rc;
    if (tensor_numel(a) != 1 || a->rank > 1)
        return op_err(e, ST_INVALID, n, "axis '%s' must be a scalar", a->name);
    if (x->rank == 0)
        return op_err(e, ST_INVALID, n, "input must have rank 1 or more");
    int axis;
    if (a->kind == TK_CONST &&
        (rc = op_axis(n, elem_get_i64(a->dtype, a->data, 0), x->rank, "axis", &axis, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

// Rounds v to the element type, so sums accumulate in it as numpy's cumsum does.
static double round_to(DType t, double v) {
    unsigned char buf[8];
    elem_set_f64(t, buf, 0, v);
    return elem_get_f64(t, buf, 0);
}

int layout_run_cumsum(const OpRun *r, Err *e) {
    const Tensor *x = r->in[0];
    int axis;
    int rc = op_axis(r->n, elem_get_i64(r->in[1]->dtype, r->x[1], 0), x->rank, "axis", &axis, e);
    if (rc)
        return rc;
    bool exclusive = node_attr_i(r->n, "exclusive", 0) != 0;
    bool reverse = node_attr_i(r->n, "reverse", 0) != 0;
    int64_t outer = prod(x->dims, 0, axis), len = x->dims[axis];
    int64_t inner = prod(x->dims, axis + 1, x->rank);
    DType t = x->dtype;
    bool is_float = dtype_is_float(t);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double facc = 0;
            uint64_t iacc = 0;
            for (int64_t s = 0; s < len; s++) {
                int64_t j = reverse ? len - 1 - s : s, at = (o * len + j) * inner + i;
                if (exclusive) {
                    if (is_float)
                        elem_set_f64(t, r->y[0], at, facc);
                    else
                        elem_set_i64(t, r->y[0], at, (int64_t)iacc);
                }
                if (is_float)
                    facc = round_to(t, facc + elem_get_f64(t, r->x[0], at));
                else
                    iacc += (uint64_t)elem_get_i64(t, r->x[0], at);
                if (!exclusive) {
                    if (is_float)
                        elem_set_f64(t, r->y[0], at, facc);
                    else
                        elem_set_i64(t, r->y[0], at, (int64_t)iacc);
                }
            }
        }
    return ST_OK;
}
