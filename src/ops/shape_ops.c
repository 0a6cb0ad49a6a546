// Shape ops of the layout family (see layout_internal.h): ops that give data a new shape without
// moving it (Reshape, Flatten, Squeeze, Unsqueeze), that describe a shape (Size), and that make
// tensors from shapes or attributes (ConstantOfShape, Range, EyeLike, Trilu's mask, NonZero).
#include "layout_internal.h"

#include <math.h>
#include <string.h>

// Largest element count Range or NonZero may produce; bigger ones are certainly a mistake.
#define COUNT_MAX ((int64_t)1 << 40)

// ---- Size ----

int layout_infer_size(Graph *g, Node *n, Err *e) {
    (void)e;
    tensor_set_shape(node_output(g, n, 0), DT_INT64, 0, NULL);
    return ST_OK;
}

int layout_run_size(const OpRun *r, Err *e) {
    (void)e;
    *(int64_t *)r->y[0] = tensor_numel(r->in[0]);
    return ST_OK;
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze: run is a copy ----

// Reshape: 0 copies the input's dimension at that index (unless allowzero, opset 14), one -1
// takes what is left.
int layout_infer_reshape(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t dims[ORCH_MAX_RANK];
    int count, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_const_shape(g, n, 1, dims, &count, e)))
        return rc;
    bool allowzero = n->opset >= 14 && node_attr_i(n, "allowzero", 0) != 0;
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < count; i++) {
        int64_t v = dims[i];
        if (v == -1) {
            if (infer_at >= 0)
                return op_err(e, ST_INVALID, n, "shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (v == 0 && !allowzero) {
            if (i >= x->rank)
                return op_err(e, ST_INVALID, n, "shape entry %d is 0 but the input has rank %d", i,
                              x->rank);
            v = dims[i] = x->dims[i];
        }
        if (v < 0 || mul_overflows_i64(known, v, &known))
            return op_err(e, ST_INVALID, n, "shape entry %d (%lld) is invalid", i, (long long)v);
    }
    int64_t numel = tensor_numel(x);
    char a[128], b[128];
    if (infer_at >= 0) {
        if (allowzero && known == 0)
            return op_err(e, ST_INVALID, n, "shape has both 0 and -1 with allowzero set");
        if (known == 0 || numel % known)
            return op_err(e, ST_INVALID, n, "cannot reshape %s to %s",
                          tensor_shape_str(x, a, sizeof a), shape_str(dims, count, b, sizeof b));
        dims[infer_at] = numel / known;
    } else if (known != numel) {
        return op_err(e, ST_INVALID, n, "cannot reshape %s (%lld elements) to %s",
                      tensor_shape_str(x, a, sizeof a), (long long)numel,
                      shape_str(dims, count, b, sizeof b));
    }
    tensor_set_shape(node_output(g, n, 0), x->dtype, count, dims);
    return ST_OK;
}

int layout_infer_flatten(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    int64_t axis = node_attr_i(n, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return op_err(e, ST_INVALID, n, "axis %lld is out of range for rank %d", (long long)axis,
                      x->rank);
    if (axis < 0)
        axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++)
        dims[d >= axis] *= x->dims[d];
    tensor_set_shape(node_output(g, n, 0), x->dtype, 2, dims);
    return ST_OK;
}

// Squeeze: the listed axes (attribute before opset 13, input after) must be 1; none listed
// removes every axis of size 1.
int layout_infer_squeeze(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t axes[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
    int count, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_read_axes(g, n, 13, 1, axes, &count, e)))
        return rc;
    bool drop[ORCH_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        int d;
        if ((rc = op_axis(n, axes[i], x->rank, "axis", &d, e)))
            return rc;
        if (x->dims[d] != 1)
            return op_err(e, ST_INVALID, n, "axis %d has size %lld, not 1", d,
                          (long long)x->dims[d]);
        drop[d] = true;
    }
    int rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!(count > 0 ? drop[d] : x->dims[d] == 1))
            dims[rank++] = x->dims[d];
    tensor_set_shape(node_output(g, n, 0), x->dtype, rank, dims);
    return ST_OK;
}

int layout_infer_unsqueeze(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int64_t axes[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
    int count, rc = layout_need_storable(g, n, 0, e);
    if (rc || (rc = layout_read_axes(g, n, 13, 1, axes, &count, e)))
        return rc;
    if (count < 0)
        return op_err(e, ST_INVALID, n, "axes are required");
    int rank = x->rank + count;
    if (rank > ORCH_MAX_RANK)
        return op_err(e, ST_UNSUPPORTED, n, "the output would have rank %d; orch allows %d", rank,
                      ORCH_MAX_RANK);
    bool ins[ORCH_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        int d;
        if ((rc = op_axis(n, axes[i], rank, "axis", &d, e)))
            return rc;
        if (ins[d])
            return op_err(e, ST_INVALID, n, "axis %lld is given twice", (long long)axes[i]);
        ins[d] = true;
    }
    for (int d = 0, k = 0; d < rank; d++)
        dims[d] = ins[d] ? 1 : x->dims[k++];
    tensor_set_shape(node_output(g, n, 0), x->dtype, rank, dims);
    return ST_OK;
}

// ---- ConstantOfShape ----

int layout_infer_constant_of_shape(Graph *g, Node *n, Err *e) {
    int64_t dims[ORCH_MAX_RANK];
    int count, rc = layout_const_shape(g, n, 0, dims, &count, e);
    if (rc)
        return rc;
    for (int i = 0; i < count; i++)
        if (dims[i] < 0)
            return op_err(e, ST_INVALID, n, "shape entry %d is negative (%lld)", i,
                          (long long)dims[i]);
    DType t = DT_FLOAT;
    const Attr *a = node_attr(n, "value");
    if (a) {
        if (a->type != AT_TENSOR || tensor_numel(a->t) != 1)
            return op_err(e, ST_INVALID, n, "the value attribute must be a one-element tensor");
        t = a->t->dtype;
        if (dtype_size(t) == 0 || t == DT_STRING)
            return op_err(e, ST_UNSUPPORTED, n, "value has dtype %s, which orch does not run",
                          dtype_name(t));
    }
    tensor_set_shape(node_output(g, n, 0), t, count, dims);
    return ST_OK;
}

int layout_run_constant_of_shape(const OpRun *r, Err *e) {
    (void)e;
    const Attr *a = node_attr(r->n, "value");
    const Tensor *out = r->out[0];
    size_t esize = dtype_size(out->dtype);
    int64_t numel = tensor_numel(out);
    char *y = r->y[0];
    if (!a) {
        memset(y, 0, (size_t)numel * esize);
        return ST_OK;
    }
    for (int64_t i = 0; i < numel; i++)
        memcpy(y + (size_t)i * esize, a->t->data, esize);
    return ST_OK;
}

// ---- Range ----

// Number of elements: max(ceil((limit - start) / delta), 0); integers exactly.
static int range_count(const Graph *g, const Node *n, int64_t *count, Err *e) {
    static const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16,
                                  DT_INT16, DT_INT32,  DT_INT64,   DT_UNDEFINED};
    const Tensor *in[3];
    for (int i = 0; i < 3; i++) {
        int rc = op_need_dtype(g, n, i, types, e);
        if (rc)
            return rc;
        in[i] = node_input(g, n, i);
        if (in[i]->dtype != in[0]->dtype || tensor_numel(in[i]) != 1)
            return op_err(e, ST_INVALID, n, "input %d ('%s') must be one %s value", i, in[i]->name,
                          dtype_name(in[0]->dtype));
        if (in[i]->kind != TK_CONST)
            return op_err(e, ST_UNSUPPORTED, n,
                          "input %d ('%s') must be a constant (orch needs static shapes), but it "
                          "is computed at run time",
                          i, in[i]->name);
    }
    DType t = in[0]->dtype;
    if (!dtype_is_float(t)) {
        int64_t start = elem_get_i64(t, in[0]->data, 0), limit = elem_get_i64(t, in[1]->data, 0);
        int64_t delta = elem_get_i64(t, in[2]->data, 0), diff;
        if (delta == 0)
            return op_err(e, ST_INVALID, n, "delta is 0");
        if (__builtin_sub_overflow(limit, start, &diff))
            return op_err(e, ST_INVALID, n, "limit - start overflows");
        if (diff == 0 || (diff > 0) != (delta > 0)) {
            *count = 0;
        } else {
            uint64_t ad = diff > 0 ? (uint64_t)diff : 0 - (uint64_t)diff;
            uint64_t as = delta > 0 ? (uint64_t)delta : 0 - (uint64_t)delta;
            *count = (int64_t)((ad - 1) / as + 1);
        }
    } else {
        double start = elem_get_f64(t, in[0]->data, 0), limit = elem_get_f64(t, in[1]->data, 0);
        double delta = elem_get_f64(t, in[2]->data, 0);
        if (delta == 0 || !isfinite(start) || !isfinite(limit) || !isfinite(delta))
            return op_err(e, ST_INVALID, n, "start, limit and delta must be finite, delta not 0");
        double c = ceil((limit - start) / delta);
        if (c > (double)COUNT_MAX)
            return op_err(e, ST_INVALID, n, "the range has %g elements", c);
        *count = c > 0 ? (int64_t)c : 0;
    }
    if (*count > COUNT_MAX)
        return op_err(e, ST_INVALID, n, "the range has %lld elements", (long long)*count);
    return ST_OK;
}

int layout_infer_range(Graph *g, Node *n, Err *e) {
    int64_t count;
    int rc = range_count(g, n, &count, e);
    if (rc)
        return rc;
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, 1, &count);
    return ST_OK;
}

// start + i * delta: integers in wrapping arithmetic (no overflow inside the range), floats in
// double rounded once, as numpy's arange does.
int layout_run_range(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *out = r->out[0];
    DType t = out->dtype;
    int64_t count = out->dims[0];
    if (dtype_is_float(t)) {
        double start = elem_get_f64(t, r->x[0], 0), delta = elem_get_f64(t, r->x[2], 0);
        for (int64_t i = 0; i < count; i++)
            elem_set_f64(t, r->y[0], i, start + (double)i * delta);
    } else {
        uint64_t start = (uint64_t)elem_get_i64(t, r->x[0], 0);
        uint64_t delta = (uint64_t)elem_get_i64(t, r->x[2], 0);
        for (int64_t i = 0; i < count; i++)
            elem_set_i64(t, r->y[0], i, (int64_t)(start + (uint64_t)i * delta));
    }
    return ST_OK;
}

// ---- EyeLike, Trilu ----

int layout_infer_eye_like(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    if (x->rank != 2)
        return op_err(e, ST_INVALID, n, "input must be 2-D, got rank %d", x->rank);
    DType t = (DType)node_attr_i(n, "dtype", x->dtype);
    if (dtype_size(t) == 0 || t == DT_STRING)
        return op_err(e, ST_UNSUPPORTED, n, "dtype %s is not one orch runs", dtype_name(t));
    tensor_set_shape(node_output(g, n, 0), t, 2, x->dims);
    return ST_OK;
}

int layout_run_eye_like(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *out = r->out[0];
    int64_t k = node_attr_i(r->n, "k", 0), rows = out->dims[0], cols = out->dims[1];
    memset(r->y[0], 0, tensor_nbytes(out));
    for (int64_t i = 0; i < rows; i++)
        if (k >= -cols && k < cols && i + k >= 0 && i + k < cols)
            elem_set_f64(out->dtype, r->y[0], i * cols + i + k, 1.0);
    return ST_OK;
}

// Trilu's k (input 1) only changes values, so it may be computed at run time.
int layout_infer_trilu(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0), *k = node_input(g, n, 1);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    if (x->rank < 2)
        return op_err(e, ST_INVALID, n, "input must have rank 2 or more, got %d", x->rank);
    if (k && (k->dtype != DT_INT64 || tensor_numel(k) != 1))
        return op_err(e, ST_INVALID, n, "k input '%s' must be one int64", k->name);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

int layout_run_trilu(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    bool upper = node_attr_i(r->n, "upper", 1) != 0;
    int64_t k = r->n->n_in > 1 && r->in[1] ? *(const int64_t *)r->x[1] : 0;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    int64_t mats = tensor_numel(x) / ORCH_MAX(rows * cols, 1);
    size_t esize = dtype_size(x->dtype);
    const char *src = r->x[0];
    char *y = r->y[0];
    for (int64_t m = 0; m < mats && rows * cols > 0; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                size_t off = (size_t)((m * rows + i) * cols + j) * esize;
                bool keep = upper ? j - i >= k : j - i <= k;
                if (keep)
                    memcpy(y + off, src + off, esize);
                else
                    memset(y + off, 0, esize);
            }
    return ST_OK;
}

// ---- NonZero ----

static bool elem_nonzero(DType t, const void *p, int64_t i) {
    return dtype_is_float(t) ? elem_get_f64(t, p, i) != 0 : elem_get_i64(t, p, i) != 0;
}

// The output's length depends on the values, so NonZero runs only on a constant input (and is
// then folded). A scalar counts as a 1-D tensor of one element, as in numpy.
int layout_infer_nonzero(Graph *g, Node *n, Err *e) {
    const Tensor *x = node_input(g, n, 0);
    int rc = layout_need_storable(g, n, 0, e);
    if (rc)
        return rc;
    if (x->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "the output shape depends on the values of input '%s', which is computed "
                      "at run time; orch needs static shapes",
                      x->name);
    int64_t numel = tensor_numel(x), dims[2] = {ORCH_MAX(x->rank, 1), 0};
    for (int64_t i = 0; i < numel; i++)
        dims[1] += elem_nonzero(x->dtype, x->data, i);
    tensor_set_shape(node_output(g, n, 0), DT_INT64, 2, dims);
    return ST_OK;
}

int layout_run_nonzero(const OpRun *r, Err *e) {
    (void)e;
    const Tensor *x = r->in[0];
    int64_t numel = tensor_numel(x), count = r->out[0]->dims[1], idx[ORCH_MAX_RANK] = {0}, c = 0;
    int64_t *y = r->y[0];
    for (int64_t i = 0; i < numel; i++) {
        if (elem_nonzero(x->dtype, r->x[0], i)) {
            for (int d = 0; d < x->rank; d++)
                y[d * count + c] = idx[d];
            if (x->rank == 0)
                y[c] = 0;
            c++;
        }
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return ST_OK;
}
