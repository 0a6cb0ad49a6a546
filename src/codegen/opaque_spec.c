// The operator kernels' shared analysis (opaque_spec.h): the operator of a one-OPAQUE candidate,
// its attributes, dtypes, operand positions and line geometry, read the way the reference ops
// (src/ops/indexing.c, layout.c, shape_ops.c, reduce.c) read them.
#include "opaque_spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *opq_op_name(OpqOp op) {
    static const char *names[OPQ_OP_COUNT] = {
        "topk",        "cumsum",    "hardmax",          "trilu",       "gather",
        "gather_elements", "scatter_elements", "gather_nd", "scatter_nd", "one_hot",
        "reverse_sequence", "lp_pool", "grid_sample", "roi_align"};
    return (unsigned)op < OPQ_OP_COUNT ? names[op] : "?";
}

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t v = 1;
    for (int d = from; d < to; d++)
        v *= dims[d];
    return v;
}

static OpqLines lines_of(const Tensor *t, int axis) {
    return (OpqLines){prod(t->dims, 0, axis), t->dims[axis], prod(t->dims, axis + 1, t->rank)};
}

static bool refuse(char *why, size_t n, const char *fmt, const char *a, const char *b) {
    if (why && n)
        snprintf(why, n, fmt, a, b);
    return false;
}

static bool is_index_type(DType t) {
    return t == DT_INT32 || t == DT_INT64;
}

// Every dtype with a C type (the data of copying ops).
static bool storable(DType t) {
    return t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16 || t == DT_BFLOAT16 || t == DT_BOOL ||
           t == DT_UINT8 || t == DT_INT8 || t == DT_UINT16 || t == DT_INT16 || t == DT_INT32 ||
           t == DT_UINT32 || t == DT_INT64 || t == DT_UINT64;
}

// Numbers with an order (TopK's keys): the storable types but bool.
static bool ordered(DType t) {
    return storable(t) && t != DT_BOOL;
}

static bool op_is(const Node *n, const char *op) {
    return strcmp(n->op, op) == 0;
}

// axis attribute a of a tensor of rank r, normalised; false when out of range.
static bool norm_axis(int64_t a, int r, int *axis) {
    if (a < -r || a >= r)
        return false;
    *axis = (int)(a < 0 ? a + r : a);
    return true;
}

// The scatter ops' reduction as read_reduction (src/ops/indexing.c) reads it.
static bool read_red(const Node *n, OpqRed *red) {
    const char *s = node_attr_s(n, "reduction", "none");
    if (strcmp(s, "none") == 0)
        *red = OPQ_RED_NONE;
    else if (strcmp(s, "add") == 0 && n->opset >= 16)
        *red = OPQ_RED_ADD;
    else if (strcmp(s, "mul") == 0 && n->opset >= 16)
        *red = OPQ_RED_MUL;
    else if (strcmp(s, "max") == 0 && n->opset >= 18)
        *red = OPQ_RED_MAX;
    else if (strcmp(s, "min") == 0 && n->opset >= 18)
        *red = OPQ_RED_MIN;
    else
        return false;
    return true;
}

static const Tensor *operand(const PrimGraph *pg, const Prim *p, int j) {
    return j < p->n_in && p->in[j] >= 0 ? pg->tensors[p->in[j]] : NULL;
}

static bool analyse_op(const PrimGraph *pg, const Prim *p, OpqSpec *s, char *why, size_t wn) {
    const Node *n = p->node;
    const Tensor *x = operand(pg, p, 0), *a1 = operand(pg, p, 1), *a2 = operand(pg, p, 2);
    const Tensor *y = p->n_out > 0 && p->out[0] >= 0 ? pg->tensors[p->out[0]] : NULL;
    if (!x)
        return refuse(why, wn, "%s%s: no data operand", n->op, "");
    s->dt = x->dtype;
    s->rank = x->rank;
    memcpy(s->dims, x->dims, sizeof s->dims);
    for (int d = 0; d < x->rank; d++)
        s->strides[d] = prod(x->dims, d + 1, x->rank);
    if (op_is(n, "TopK")) {
        s->op = OPQ_TOPK;
        const Tensor *yi = p->n_out > 1 && p->out[1] >= 0 ? pg->tensors[p->out[1]] : NULL;
        s->has_out[1] = yi != NULL;
        if (!ordered(x->dtype) || x->rank < 1)
            return refuse(why, wn, "TopK over %s%s", dtype_name(x->dtype), "");
        if (!norm_axis(node_attr_i(n, "axis", -1), x->rank, &s->axis))
            return refuse(why, wn, "TopK: axis out of range%s%s", "", "");
        const Tensor *shape = y ? y : yi;
        if (!shape)
            return refuse(why, wn, "TopK without outputs%s%s", "", "");
        s->x = lines_of(x, s->axis);
        s->y = lines_of(shape, s->axis);
        s->largest = node_attr_i(n, "largest", 1) != 0;
        // Positions travel in 32 bits beside the keys.
        if (s->x.len > INT32_MAX || s->y.len > s->x.len)
            return refuse(why, wn, "TopK: a line of %s elements%s", "over 2^31", "");
        return true;
    }
    if (op_is(n, "CumSum")) {
        s->op = OPQ_CUMSUM;
        static const DType ok[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16,
                                   DT_INT32, DT_INT64,  DT_UINT32,  DT_UINT64};
        bool fine = false;
        for (size_t i = 0; i < ORCH_COUNT(ok); i++)
            fine = fine || x->dtype == ok[i];
        if (!fine || x->rank < 1 || !a1 || !is_index_type(a1->dtype) || tensor_numel(a1) != 1)
            return refuse(why, wn, "CumSum over %s%s", dtype_name(x->dtype), "");
        s->idx_dt = a1->dtype;
        s->axis = -1; // read when the kernel runs
        s->exclusive = node_attr_i(n, "exclusive", 0) != 0;
        s->reverse = node_attr_i(n, "reverse", 0) != 0;
        return true;
    }
    if (op_is(n, "Hardmax")) {
        s->op = OPQ_HARDMAX;
        if (!dtype_is_float(x->dtype) || x->rank < 1)
            return refuse(why, wn, "Hardmax over %s%s", dtype_name(x->dtype), "");
        bool coerce = n->opset < 13; // softmax_geom (src/ops/reduce.c)
        if (!norm_axis(node_attr_i(n, "axis", coerce ? 1 : -1), x->rank, &s->axis))
            return refuse(why, wn, "Hardmax: axis out of range%s%s", "", "");
        s->x = lines_of(x, s->axis);
        if (coerce) {
            s->x.len *= s->x.inner;
            s->x.inner = 1;
        }
        s->y = s->x;
        return s->x.len <= INT32_MAX ? true
                                     : refuse(why, wn, "Hardmax: a line over 2^31%s%s", "", "");
    }
    if (op_is(n, "Trilu")) {
        s->op = OPQ_TRILU;
        if (!storable(x->dtype) || x->rank < 2 ||
            (a1 && (a1->dtype != DT_INT64 || tensor_numel(a1) != 1)))
            return refuse(why, wn, "Trilu over %s%s", dtype_name(x->dtype), "");
        s->idx_dt = DT_INT64;
        s->upper = node_attr_i(n, "upper", 1) != 0;
        s->x =
            (OpqLines){prod(x->dims, 0, x->rank - 2), x->dims[x->rank - 2], x->dims[x->rank - 1]};
        s->y = s->x;
        return true;
    }
    if (op_is(n, "Gather")) { // non-constant indices (fission takes constant ones)
        s->op = OPQ_GATHER;
        if (!storable(x->dtype) || !a1 || !is_index_type(a1->dtype) || x->rank < 1)
            return refuse(why, wn, "Gather over %s%s", dtype_name(x->dtype), "");
        if (!norm_axis(node_attr_i(n, "axis", 0), x->rank, &s->axis))
            return refuse(why, wn, "Gather: axis out of range%s%s", "", "");
        s->idx_dt = a1->dtype;
        s->x = lines_of(x, s->axis);
        s->tuples = tensor_numel(a1);
        return true;
    }
    bool gather_el = op_is(n, "GatherElements");
    bool scatter_el = op_is(n, "ScatterElements") || op_is(n, "Scatter");
    if (gather_el || scatter_el) {
        s->op = gather_el ? OPQ_GATHER_ELEMENTS : OPQ_SCATTER_ELEMENTS;
        if (!storable(x->dtype) || !a1 || !is_index_type(a1->dtype) || a1->rank != x->rank ||
            x->rank < 1 || (scatter_el && !a2))
            return refuse(why, wn, "%s over %s", n->op, dtype_name(x->dtype));
        if (!norm_axis(node_attr_i(n, "axis", 0), x->rank, &s->axis))
            return refuse(why, wn, "%s: axis out of range%s", n->op, "");
        if (scatter_el &&
            (!read_red(n, &s->red) || (s->red != OPQ_RED_NONE && x->dtype == DT_BOOL)))
            return refuse(why, wn, "%s: reduction '%s'", n->op,
                          node_attr_s(n, "reduction", "none"));
        s->idx_dt = a1->dtype;
        memcpy(s->idx_dims, a1->dims, sizeof s->idx_dims);
        s->same_off_axis = true;
        for (int d = 0; d < x->rank; d++)
            s->same_off_axis = s->same_off_axis && (d == s->axis || a1->dims[d] == x->dims[d]);
        s->x = lines_of(x, s->axis);
        s->y = lines_of(a1, s->axis); // the index (and updates) lines
        return true;
    }
    bool gather_nd = op_is(n, "GatherND"), scatter_nd = op_is(n, "ScatterND");
    if (gather_nd || scatter_nd) {
        s->op = gather_nd ? OPQ_GATHER_ND : OPQ_SCATTER_ND;
        if (!storable(x->dtype) || !a1 || !is_index_type(a1->dtype) || a1->rank < 1 ||
            x->rank < 1 || (scatter_nd && !a2))
            return refuse(why, wn, "%s over %s", n->op, dtype_name(x->dtype));
        if (scatter_nd &&
            (!read_red(n, &s->red) || (s->red != OPQ_RED_NONE && x->dtype == DT_BOOL)))
            return refuse(why, wn, "%s: reduction '%s'", n->op,
                          node_attr_s(n, "reduction", "none"));
        s->idx_dt = a1->dtype;
        memcpy(s->idx_dims, a1->dims, sizeof s->idx_dims);
        s->batch = gather_nd ? node_attr_i(n, "batch_dims", 0) : 0;
        s->depth = a1->dims[a1->rank - 1];
        if (s->batch < 0 || s->depth < 1 || s->batch + s->depth > x->rank)
            return refuse(why, wn, "%s: batch_dims or index depth%s", n->op, "");
        int64_t batches = prod(x->dims, 0, (int)s->batch);
        s->tuples = tensor_numel(a1) / s->depth;
        s->per_batch = batches ? s->tuples / batches : 0;
        s->block = prod(x->dims, (int)s->batch, x->rank);
        s->slice = prod(x->dims, (int)(s->batch + s->depth), x->rank);
        return true;
    }
    if (op_is(n, "OneHot")) {
        s->op = OPQ_ONE_HOT;
        // x: the indices; a2: the values [off, on], of the output's dtype.
        if (!y || !a2 || !storable(y->dtype) || a2->dtype != y->dtype || tensor_numel(a2) != 2)
            return refuse(why, wn, "OneHot into %s%s", y ? dtype_name(y->dtype) : "nothing", "");
        if (dtype_is_float(x->dtype) || !ordered(x->dtype))
            return refuse(why, wn, "OneHot with %s indices%s", dtype_name(x->dtype), "");
        s->dt = y->dtype;
        s->idx_dt = x->dtype;
        if (!norm_axis(node_attr_i(n, "axis", -1), y->rank, &s->axis))
            return refuse(why, wn, "OneHot: axis out of range%s%s", "", "");
        s->y = lines_of(y, s->axis);
        return true;
    }
    if (op_is(n, "ReverseSequence")) {
        s->op = OPQ_REVERSE_SEQUENCE;
        if (!storable(x->dtype) || x->rank < 2 || !a1 || !is_index_type(a1->dtype))
            return refuse(why, wn, "ReverseSequence over %s%s", dtype_name(x->dtype), "");
        s->idx_dt = a1->dtype;
        s->batch_axis = (int)node_attr_i(n, "batch_axis", 1);
        s->time_axis = 1 - s->batch_axis;
        if (s->batch_axis < 0 || s->batch_axis > 1)
            return refuse(why, wn, "ReverseSequence: batch_axis%s%s", "", "");
        s->rest = prod(x->dims, 2, x->rank);
        return true;
    }
    if (op_is(n, "LpPool")) {
        s->op = OPQ_LP_POOL;
        Err e = {0};
        if (!dtype_is_float(x->dtype) || x->rank < 3 || pool_geom(n, x, &s->pool, &e) != ST_OK ||
            s->pool.p < 1)
            return refuse(why, wn, "LpPool over %s%s", dtype_name(x->dtype), "");
        return true;
    }
    if (op_is(n, "GridSample")) {
        s->op = OPQ_GRID_SAMPLE;
        Err e = {0};
        if (!a1 || gridsample_geom(n, x, a1, &s->gs, &e) != ST_OK)
            return refuse(why, wn, "GridSample over %s%s", dtype_name(x->dtype), "");
        s->dt2 = a1->dtype;
        return true;
    }
    if (op_is(n, "RoiAlign")) {
        s->op = OPQ_ROI_ALIGN;
        Err e = {0};
        if (!a1 || !a2 || roialign_geom(n, x, a1, a2, &s->ra, &e) != ST_OK)
            return refuse(why, wn, "RoiAlign over %s%s", dtype_name(x->dtype), "");
        s->dt2 = a1->dtype;
        s->idx_dt = a2->dtype;
        return true;
    }
    return refuse(why, wn, "no operator kernel for %s%s", n->op, "");
}

bool opq_analyse(const PrimGraph *pg, const Candidate *c, OpqSpec *s, char *why, size_t why_n) {
    memset(s, 0, sizeof *s);
    if (why && why_n)
        why[0] = '\0';
    if (c->n_prims != 1)
        return refuse(why, why_n, "not a single primitive%s%s", "", "");
    const Prim *p = pg->prims[c->prims[0]];
    const Node *n = p->node;
    if (p->kind != PRIM_OPAQUE || !n)
        return refuse(why, why_n, "not an operator%s%s", "", "");
    if (*n->domain && strcmp(n->domain, "ai.onnx") != 0)
        return refuse(why, why_n, "operator %s of domain %s", n->op, n->domain);
    if (p->n_in > OPQ_MAX_OPERANDS || p->n_out > 2)
        return refuse(why, why_n, "%s with that many operands%s", n->op, "");
    s->p = p;
    for (int j = 0; j < OPQ_MAX_OPERANDS; j++) {
        s->in[j] = -1;
        for (int m = 0; j < p->n_in && p->in[j] >= 0 && m < c->n_inputs && s->in[j] < 0; m++)
            if (c->inputs[m] == p->in[j])
                s->in[j] = m;
    }
    for (int j = 0; j < p->n_out; j++)
        s->has_out[j] = p->out[j] >= 0;
    if (!s->has_out[0] && !(p->n_out > 1 && s->has_out[1]))
        return refuse(why, why_n, "%s without outputs%s", n->op, "");
    // Empty tensors: the runtime skips an operator whose outputs are all empty; one whose
    // operands are empty but outputs are not (OneHot of nothing cannot be) stays with the op.
    for (int j = 0; j < p->n_in; j++)
        if (p->in[j] >= 0 && tensor_numel(pg->tensors[p->in[j]]) == 0)
            return refuse(why, why_n, "%s with an empty operand%s", n->op, "");
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] >= 0 && tensor_numel(pg->tensors[p->out[j]]) == 0)
            return refuse(why, why_n, "%s with an empty output%s", n->op, "");
    return analyse_op(pg, p, s, why, why_n);
}

void opq_work(const PrimGraph *pg, const OpqSpec *s, OpqWork *w) {
    const Prim *p = s->p;
    memset(w, 0, sizeof *w);
    for (int j = 0; j < p->n_in; j++)
        if (p->in[j] >= 0)
            w->bytes += (double)tensor_nbytes(pg->tensors[p->in[j]]);
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] >= 0)
            w->bytes += (double)tensor_nbytes(pg->tensors[p->out[j]]);
    const Tensor *x = pg->tensors[p->in[0]];
    w->elems = (double)tensor_numel(x);
    w->ops = 1;
    w->units = 1;
    w->inner = 1;
    switch (s->op) {
    case OPQ_TOPK: {
        // A scan of every element against the k-th best, and about k ln(n / k) insertions into
        // a heap of k (random order).
        double n = (double)s->x.len, k = (double)s->y.len;
        w->ops = 2 + k * log(n / k + 1) * (log2(k + 1) + 1) / n;
        w->units = s->x.outer * s->x.inner;
        w->inner = s->x.len;
        break;
    }
    case OPQ_CUMSUM:
        w->ops = 1;
        w->units = s->dims[0];
        w->inner = s->dims[s->rank - 1];
        break;
    case OPQ_HARDMAX:
        w->ops = 2;
        w->units = s->x.outer * s->x.inner;
        w->inner = s->x.len;
        break;
    case OPQ_TRILU:
        w->units = s->x.outer * s->x.len;
        w->inner = s->x.inner;
        break;
    case OPQ_GATHER:
        w->elems = (double)tensor_numel(pg->tensors[p->out[0]]);
        w->units = s->x.outer * s->tuples;
        w->inner = s->x.inner;
        break;
    case OPQ_GATHER_ELEMENTS:
    case OPQ_SCATTER_ELEMENTS:
        w->elems = (double)tensor_numel(pg->tensors[p->in[1]]);
        w->ops = 3;
        w->units = s->y.outer * s->y.inner;
        w->inner = s->y.inner;
        break;
    case OPQ_GATHER_ND:
    case OPQ_SCATTER_ND:
        w->elems = (double)(s->tuples * s->slice);
        w->ops = 1 + (double)s->depth / (double)ORCH_MAX(s->slice, 1);
        w->units = s->op == OPQ_GATHER_ND ? s->tuples : 1;
        w->inner = s->slice;
        break;
    case OPQ_ONE_HOT:
        w->elems = (double)tensor_numel(pg->tensors[p->out[0]]);
        w->units = s->y.outer;
        w->inner = s->y.inner;
        break;
    case OPQ_LP_POOL: {
        int64_t taps = 1, outs = 1;
        for (int i = 0; i < s->pool.S; i++) {
            taps *= s->pool.k[i];
            outs *= s->pool.out[i];
        }
        w->elems = (double)(s->dims[0] * s->dims[1] * outs * taps);
        w->ops = s->pool.p == 1 || s->pool.p == 2 ? 3 : 20; // pow is a call
        w->units = s->dims[0] * s->dims[1] * outs;
        w->inner = taps;
        break;
    }
    case OPQ_REVERSE_SEQUENCE:
        w->units = s->dims[0] * s->dims[1];
        w->inner = s->rest;
        break;
    case OPQ_GRID_SAMPLE: { // an output element reads 1 to 16 pixels (gridsample_taps)
        w->elems = (double)tensor_numel(pg->tensors[p->out[0]]);
        w->ops = 8.0 * gridsample_taps(&s->gs);
        w->units = s->gs.N * s->gs.C; // a line per output row, the rows of every spatial axis
        for (int a = 0; a < s->gs.sr - 1; a++)
            w->units *= s->gs.out[a];
        w->inner = s->gs.out[s->gs.sr - 1];
        break;
    }
    case OPQ_ROI_ALIGN: { // samples a bin: the fixed ratio's, else about 2 x 2
        double sr = s->ra.sampling_ratio > 0 ? (double)s->ra.sampling_ratio : 2.0;
        w->elems = (double)tensor_numel(pg->tensors[p->out[0]]);
        w->ops = 30.0 * sr * sr;
        w->units = s->ra.R * s->ra.C;
        w->inner = s->ra.OH * s->ra.OW;
        break;
    }
    default: break;
    }
}
