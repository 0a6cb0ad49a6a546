// Linear ONNX ops: MatMul, Gemm, Conv, ConvTranspose, Einsum, and the 8-bit MatMulInteger and
// ConvInteger. float32 runs on the blocked GEMM of gemm.c: Conv through im2col (1x1 stride-1
// convolutions read the input directly, depthwise ones use a direct loop), ConvTranspose through
// a GEMM into columns scattered back by col2im. MatMul, Gemm and Einsum also take double and
// 32/64-bit integers through plain loops (sums in double, or in wrapping 64-bit integers); Conv
// and ConvTranspose are float32 only.
#include "gemm.h"
#include "linear.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

static const DType matmul_types[] = {DT_FLOAT,  DT_DOUBLE, DT_INT32,    DT_INT64,
                                     DT_UINT32, DT_UINT64, DT_UNDEFINED};
static const DType conv_types[] = {DT_FLOAT, DT_UNDEFINED};

// Requires the present inputs [0, count) to have an allowed dtype, all the same.
static int need_same_dtype(const Graph *g, const Node *n, int count, const DType *allowed, Err *e) {
    const Tensor *first = node_input(g, n, 0);
    for (int i = 0; i < count; i++) {
        const Tensor *t = node_input(g, n, i);
        if (!t)
            continue;
        int rc = op_need_dtype(g, n, i, allowed, e);
        if (rc)
            return rc;
        if (t->dtype != first->dtype)
            return op_err(e, ST_INVALID, n, "input %d ('%s') is %s but input 0 is %s", i, t->name,
                          dtype_name(t->dtype), dtype_name(first->dtype));
    }
    return ST_OK;
}

// Data of optional input i, NULL when absent (r->in has only n->n_in entries).
static const void *opt_data(const OpRun *r, int i) {
    return i < r->n->n_in && r->in[i] ? r->x[i] : NULL;
}

static int64_t product(const int64_t *dims, int count) {
    int64_t p = 1;
    for (int i = 0; i < count; i++)
        p *= dims[i];
    return p;
}

// Y[y0 + i*N + j] = sum_k A(i,k) * B(k,j) for the dtypes without a GEMM, where A(i,k) is element
// a0 + i*ars + k*acs of A and B(k,j) element b0 + k*brs + j*bcs of B. Float dtypes sum in double;
// integers in wrapping 64-bit arithmetic, which is exact modulo the output's width.
static void matmul_generic(DType t, const void *A, int64_t a0, int64_t ars, int64_t acs,
                           const void *B, int64_t b0, int64_t brs, int64_t bcs, void *Y, int64_t y0,
                           int64_t M, int64_t N, int64_t K) {
    bool fp = dtype_is_float(t);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            int64_t a = a0 + i * ars, b = b0 + j * bcs, y = y0 + i * N + j;
            if (fp) {
                double s = 0;
                for (int64_t k = 0; k < K; k++, a += acs, b += brs)
                    s += elem_get_f64(t, A, a) * elem_get_f64(t, B, b);
                elem_set_f64(t, Y, y, s);
            } else {
                uint64_t s = 0;
                for (int64_t k = 0; k < K; k++, a += acs, b += brs)
                    s += (uint64_t)elem_get_i64(t, A, a) * (uint64_t)elem_get_i64(t, B, b);
                elem_set_i64(t, Y, y, (int64_t)s);
            }
        }
    }
}

// ---- MatMul ----

// numpy matmul of A and B: a 1-D A is a row (its M dim dropped from the output), a 1-D B a
// column (its N dim dropped); the leading batch dims broadcast. Matrix offsets per batch dim are
// 0 where an operand is broadcast.
typedef struct MatMulDims {
    int64_t M, N, K;
    int batch_rank;
    int64_t batch[ORCH_MAX_RANK], a_stride[ORCH_MAX_RANK], b_stride[ORCH_MAX_RANK];
} MatMulDims;

static int matmul_dims(const Node *n, const Tensor *a, const Tensor *b, MatMulDims *d, Err *e) {
    char sa[160], sb[160];
    if (a->rank < 1 || b->rank < 1)
        return op_err(e, ST_INVALID, n, "inputs must have rank >= 1, got shapes %s and %s",
                      tensor_shape_str(a, sa, sizeof sa), tensor_shape_str(b, sb, sizeof sb));
    int a_batch = ORCH_MAX(a->rank - 2, 0), b_batch = ORCH_MAX(b->rank - 2, 0);
    d->M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    d->K = a->dims[a->rank - 1];
    d->N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
    if (kb != d->K)
        return op_err(e, ST_INVALID, n,
                      "inner dimensions differ: A is %s and B is %s (%lld vs %lld)",
                      tensor_shape_str(a, sa, sizeof sa), tensor_shape_str(b, sb, sizeof sb),
                      (long long)d->K, (long long)kb);
    d->batch_rank = ORCH_MAX(a_batch, b_batch);
    int64_t as = d->M * d->K, bs = d->K * d->N;
    for (int i = d->batch_rank - 1; i >= 0; i--) {
        int ia = i - (d->batch_rank - a_batch), ib = i - (d->batch_rank - b_batch);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return op_err(e, ST_INVALID, n, "batch dimensions of %s and %s do not broadcast",
                          tensor_shape_str(a, sa, sizeof sa), tensor_shape_str(b, sb, sizeof sb));
        d->batch[i] = da == 1 ? db : da;
        d->a_stride[i] = da == 1 ? 0 : as;
        d->b_stride[i] = db == 1 ? 0 : bs;
        as *= da;
        bs *= db;
    }
    return ST_OK;
}

// Offsets of batch bi's matrices in A and B.
static void batch_offsets(const MatMulDims *d, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int i = d->batch_rank - 1; i >= 0; i--) {
        *oa += bi % d->batch[i] * d->a_stride[i];
        *ob += bi % d->batch[i] * d->b_stride[i];
        bi /= d->batch[i];
    }
}

static void set_matmul_output(Graph *g, Node *n, const Tensor *a, const Tensor *b,
                              const MatMulDims *d, DType t) {
    int64_t dims[ORCH_MAX_RANK];
    int rank = d->batch_rank;
    memcpy(dims, d->batch, sizeof(int64_t) * (size_t)rank);
    if (a->rank >= 2)
        dims[rank++] = d->M;
    if (b->rank >= 2)
        dims[rank++] = d->N;
    tensor_set_shape(node_output(g, n, 0), t, rank, dims);
}

static int infer_matmul(Graph *g, Node *n, Err *e) {
    const Tensor *a = node_input(g, n, 0), *b = node_input(g, n, 1);
    MatMulDims d;
    int rc = need_same_dtype(g, n, 2, matmul_types, e);
    if (rc || (rc = matmul_dims(n, a, b, &d, e)))
        return rc;
    set_matmul_output(g, n, a, b, &d, a->dtype);
    return ST_OK;
}

static int run_matmul(const OpRun *r, Err *e) {
    MatMulDims d;
    int rc = matmul_dims(r->n, r->in[0], r->in[1], &d, e);
    ORCH_ASSERT(rc == ST_OK);
    int64_t M = d.M, N = d.N, K = d.K, batches = product(d.batch, d.batch_rank);
    DType t = r->out[0]->dtype;
    // A batch of A against one B is one tall product: A's matrices are consecutive rows.
    if (t == DT_FLOAT && tensor_numel(r->in[1]) == K * N &&
        tensor_numel(r->in[0]) == batches * M * K) {
        gemm_f32(false, false, batches * M, N, K, 1.0f, r->x[0], K, r->x[1], N, 0.0f, r->y[0], N);
        return ST_OK;
    }
    // Products too small for the GEMM's own threads are spread over threads whole.
    double macs = (double)M * (double)N * (double)K;
    bool by_batch = macs < GEMM_PARALLEL_MIN && macs * (double)batches >= GEMM_PARALLEL_MIN;
#pragma omp parallel for schedule(dynamic) if (by_batch)
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t oa, ob;
        batch_offsets(&d, bi, &oa, &ob);
        if (t == DT_FLOAT)
            gemm_f32(false, false, M, N, K, 1.0f, (const float *)r->x[0] + oa, K,
                     (const float *)r->x[1] + ob, N, 0.0f, (float *)r->y[0] + bi * M * N, N);
        else
            matmul_generic(t, r->x[0], oa, K, 1, r->x[1], ob, N, 1, r->y[0], bi * M * N, M, N, K);
    }
    return ST_OK;
}

// ---- Gemm ----

// Y = alpha * op(A) * op(B) + beta * C, A and B 2-D, C (optional) broadcast to M x N.
static int infer_gemm(Graph *g, Node *n, Err *e) {
    int rc = need_same_dtype(g, n, 3, matmul_types, e);
    if (rc)
        return rc;
    const Tensor *a = node_input(g, n, 0), *b = node_input(g, n, 1), *c = node_input(g, n, 2);
    char sa[160], sb[160];
    if (a->rank != 2 || b->rank != 2)
        return op_err(e, ST_INVALID, n, "A and B must be 2-D, got %s and %s",
                      tensor_shape_str(a, sa, sizeof sa), tensor_shape_str(b, sb, sizeof sb));
    bool ta = node_attr_i(n, "transA", 0) != 0, tb = node_attr_i(n, "transB", 0) != 0;
    int64_t M = a->dims[ta], K = a->dims[!ta], kb = b->dims[tb], N = b->dims[!tb];
    if (K != kb)
        return op_err(
            e, ST_INVALID, n, "inner dimensions differ: A %s (transA=%d), B %s (transB=%d)",
            tensor_shape_str(a, sa, sizeof sa), ta, tensor_shape_str(b, sb, sizeof sb), tb);
    int64_t dims[2] = {M, N};
    if (c) {
        bool ok = c->rank <= 2;
        for (int i = 0; ok && i < c->rank; i++) {
            int64_t v = c->dims[i], want = dims[2 - c->rank + i];
            ok = v == 1 || v == want;
        }
        if (!ok)
            return op_err(e, ST_INVALID, n, "C of shape %s does not broadcast to %lldx%lld",
                          tensor_shape_str(c, sa, sizeof sa), (long long)M, (long long)N);
    }
    tensor_set_shape(node_output(g, n, 0), a->dtype, 2, dims);
    return ST_OK;
}

static int run_gemm(const OpRun *r, Err *e) {
    const Tensor *a = r->in[0], *b = r->in[1], *c = opt_data(r, 2) ? r->in[2] : NULL;
    bool ta = node_attr_i(r->n, "transA", 0) != 0, tb = node_attr_i(r->n, "transB", 0) != 0;
    float alpha = node_attr_f(r->n, "alpha", 1.0f), beta = node_attr_f(r->n, "beta", 1.0f);
    const Tensor *out = r->out[0];
    int64_t M = out->dims[0], N = out->dims[1], K = a->dims[!ta];
    int64_t lda = a->dims[1], ldb = b->dims[1];
    DType t = out->dtype;
    if (!c)
        beta = 0.0f;
    // Y starts as C broadcast to M x N; the product is then added onto beta * Y.
    size_t esz = dtype_size(t);
    if (c && beta != 0.0f) {
        int64_t cs[2];
        op_broadcast_strides(c, 2, out->dims, cs);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                memcpy((char *)r->y[0] + (size_t)(i * N + j) * esz,
                       (const char *)r->x[2] + (size_t)(i * cs[0] + j * cs[1]) * esz, esz);
    }
    if (t == DT_FLOAT) {
        gemm_f32(ta, tb, M, N, K, alpha, r->x[0], lda, r->x[1], ldb, beta, r->y[0], N);
        return ST_OK;
    }
    // Other dtypes: the plain product into a scratch matrix, then alpha and beta C, kept in
    // integers where alpha and beta are 1 so large int64 values stay exact.
    void *p = malloc(esz * (size_t)(M * N) + 1);
    if (!p)
        return op_err(e, ST_RUNTIME, r->n, "out of memory for a %lldx%lld product", (long long)M,
                      (long long)N);
    matmul_generic(t, r->x[0], 0, ta ? 1 : lda, ta ? lda : 1, r->x[1], 0, tb ? 1 : ldb,
                   tb ? ldb : 1, p, 0, M, N, K);
    bool exact_int = !dtype_is_float(t) && alpha == 1.0f && (beta == 1.0f || beta == 0.0f);
    for (int64_t i = 0; i < M * N; i++) {
        if (exact_int) {
            uint64_t v = (uint64_t)elem_get_i64(t, p, i);
            if (beta != 0.0f)
                v += (uint64_t)elem_get_i64(t, r->y[0], i);
            elem_set_i64(t, r->y[0], i, (int64_t)v);
        } else {
            double v = alpha * elem_get_f64(t, p, i);
            if (beta != 0.0f)
                v += beta * elem_get_f64(t, r->y[0], i);
            elem_set_f64(t, r->y[0], i, v);
        }
    }
    free(p);
    return ST_OK;
}

// ---- Conv and ConvTranspose ----


// Loops over fewer elements than this (copies, scatters, direct convolution steps) stay on one
// thread, for the reason given at GEMM_PARALLEL_MIN.
enum { PARALLEL_MIN_ELEMS = 1 << 20 };

// The geometry of a convolution over S spatial dims: in[] and out[] are the spatial sizes of X
// and Y, pad[] the leading padding. Conv samples X at in_d = out_d*stride - pad + k_d*dil;
// ConvTranspose scatters X to out_d = in_d*stride - pad + k_d*dil.

// Reads an optional ints attribute of `count` values, each >= lo (default dflt).
static int spatial_attr(const Node *n, const char *name, int count, int64_t lo, int64_t dflt,
                        int64_t *v, Err *e) {
    const int64_t *a;
    int len = node_attr_ints(n, name, &a);
    for (int i = 0; i < count; i++)
        v[i] = dflt;
    if (len < 0)
        return ST_OK;
    if (len != count)
        return op_err(e, ST_INVALID, n, "attribute %s has %d values, expected %d", name, len,
                      count);
    for (int i = 0; i < count; i++) {
        // The upper bound keeps every size computed from these far from int64 overflow.
        if (a[i] < lo || a[i] > (1 << 30))
            return op_err(e, ST_INVALID, n, "attribute %s has an invalid value %lld", name,
                          (long long)a[i]);
        v[i] = a[i];
    }
    return ST_OK;
}

static int64_t floor_div(int64_t a, int64_t b) { // b > 0
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int conv_geom(const Graph *g, const Node *n, bool transposed, bool has_bias, ConvGeom *c, Err *e) {
    const Tensor *x = node_input(g, n, 0), *w = node_input(g, n, 1);
    const Tensor *b = has_bias ? node_input(g, n, 2) : NULL;
    int rc;
    char sx[160], sw[160];
    if (x->rank < 3 || w->rank != x->rank)
        return op_err(e, ST_INVALID, n,
                      "X must be N x C x spatial dims and W of the same rank, got %s and %s",
                      tensor_shape_str(x, sx, sizeof sx), tensor_shape_str(w, sw, sizeof sw));
    memset(c, 0, sizeof *c);
    int S = c->S = x->rank - 2;
    c->N = x->dims[0];
    c->C = x->dims[1];
    c->group = node_attr_i(n, "group", 1);
    if (c->group < 1 || c->group > ORCH_MAX(c->C, 1) || c->C % c->group != 0)
        return op_err(e, ST_INVALID, n, "group %lld does not divide the %lld input channels",
                      (long long)c->group, (long long)c->C);
    if (!transposed) {
        c->M = w->dims[0];
        if (w->dims[1] != c->C / c->group || c->M % c->group != 0)
            return op_err(e, ST_INVALID, n,
                          "W %s does not match X %s with group %lld (W must be M x C/group x "
                          "kernel, M divisible by group)",
                          tensor_shape_str(w, sw, sizeof sw), tensor_shape_str(x, sx, sizeof sx),
                          (long long)c->group);
    } else {
        c->M = w->dims[1] * c->group;
        if (w->dims[0] != c->C)
            return op_err(e, ST_INVALID, n,
                          "W %s does not match X %s (W must be C x M/group x kernel)",
                          tensor_shape_str(w, sw, sizeof sw), tensor_shape_str(x, sx, sizeof sx));
    }
    if (b && (b->rank != 1 || b->dims[0] != c->M))
        return op_err(e, ST_INVALID, n, "bias B must be 1-D of length %lld, got %s",
                      (long long)c->M, tensor_shape_str(b, sx, sizeof sx));

    const int64_t *ks;
    int n_ks = node_attr_ints(n, "kernel_shape", &ks);
    if (n_ks >= 0 && (n_ks != S || memcmp(ks, w->dims + 2, sizeof(int64_t) * (size_t)S) != 0))
        return op_err(e, ST_INVALID, n, "kernel_shape does not match W's shape %s",
                      tensor_shape_str(w, sw, sizeof sw));
    for (int d = 0; d < S; d++) {
        c->in[d] = x->dims[2 + d];
        c->k[d] = w->dims[2 + d];
        if (c->k[d] < 1)
            return op_err(e, ST_INVALID, n, "W %s has an empty kernel",
                          tensor_shape_str(w, sw, sizeof sw));
    }
    int64_t pads[2 * MAX_SPATIAL], out_pad[MAX_SPATIAL];
    if ((rc = spatial_attr(n, "strides", S, 1, 1, c->stride, e)) ||
        (rc = spatial_attr(n, "dilations", S, 1, 1, c->dil, e)) ||
        (rc = spatial_attr(n, "pads", 2 * S, 0, 0, pads, e)))
        return rc;
    if (transposed && (rc = spatial_attr(n, "output_padding", S, 0, 0, out_pad, e)))
        return rc;
    for (int d = 0; transposed && d < S; d++)
        if (out_pad[d] >= ORCH_MAX(c->stride[d], c->dil[d]))
            return op_err(e, ST_INVALID, n,
                          "output_padding %lld on spatial axis %d must be smaller than the stride "
                          "or the dilation (%lld, %lld)",
                          (long long)out_pad[d], d, (long long)c->stride[d], (long long)c->dil[d]);
    const char *auto_pad = node_attr_s(n, "auto_pad", "NOTSET");
    bool same_upper = strcmp(auto_pad, "SAME_UPPER") == 0;
    bool same = same_upper || strcmp(auto_pad, "SAME_LOWER") == 0;
    bool valid = strcmp(auto_pad, "VALID") == 0;
    if (!same && !valid && strcmp(auto_pad, "NOTSET") != 0)
        return op_err(e, ST_INVALID, n, "unknown auto_pad '%s'", auto_pad);

    // ConvTranspose's output_shape: spatial sizes (some exporters also put N and C first).
    const int64_t *os = NULL;
    int n_os = transposed ? node_attr_ints(n, "output_shape", &os) : -1;
    if (n_os == S + 2) {
        os += 2;
        n_os = S;
    }
    if (n_os >= 0 && n_os != S)
        return op_err(e, ST_INVALID, n, "output_shape has %d values, expected %d", n_os, S);

    for (int d = 0; d < S; d++) {
        if (c->in[d] > (1 << 30) || c->k[d] > (1 << 30))
            return op_err(e, ST_UNSUPPORTED, n, "spatial sizes over 2^30 are not supported");
        int64_t dk = (c->k[d] - 1) * c->dil[d] + 1; // extent of the dilated kernel
        int64_t pb = valid ? 0 : pads[d], pe = valid ? 0 : pads[S + d];
        if (!transposed) {
            if (same) {
                c->out[d] = (c->in[d] + c->stride[d] - 1) / c->stride[d];
                int64_t total = ORCH_MAX(0, (c->out[d] - 1) * c->stride[d] + dk - c->in[d]);
                pb = same_upper ? total / 2 : total - total / 2;
                pe = total - pb;
            } else {
                if (c->in[d] + pb + pe < dk)
                    return op_err(e, ST_INVALID, n,
                                  "kernel extent %lld is larger than the padded input (%lld) "
                                  "in spatial dim %d",
                                  (long long)dk, (long long)(c->in[d] + pb + pe), d);
                c->out[d] = (c->in[d] + pb + pe - dk) / c->stride[d] + 1;
            }
        } else {
            c->out_pad[d] = out_pad[d];
            int64_t full = c->stride[d] * (c->in[d] - 1) + out_pad[d] + dk;
            if (n_os >= 0 || same) {
                // Padding that trims the full result to the requested size; the odd element
                // goes to the end for SAME_UPPER and to the start otherwise (ONNX's rule).
                c->out[d] = n_os >= 0 ? os[d] : c->in[d] * c->stride[d];
                int64_t total = full - c->out[d];
                pb = same_upper ? floor_div(total, 2) : total - floor_div(total, 2);
                pe = total - pb;
            } else {
                c->out[d] = full - pb - pe;
            }
            if (c->out[d] < 1 || c->out[d] > (1 << 30))
                return op_err(e, ST_INVALID, n, "output size %lld in spatial dim %d is invalid",
                              (long long)c->out[d], d);
        }
        c->pad[d] = pb;
        c->pad_end[d] = pe;
    }
    c->in_pix = product(c->in, S);
    c->k_pix = product(c->k, S);
    c->out_pix = 1;
    for (int d = 0; d < S; d++)
        if (mul_overflows_i64(c->out_pix, c->out[d], &c->out_pix))
            return op_err(e, ST_INVALID, n, "the output would have over 2^63 elements");
    return ST_OK;
}

static void set_conv_output(Graph *g, Node *n, const ConvGeom *c, DType t) {
    int64_t dims[ORCH_MAX_RANK] = {c->N, c->M};
    memcpy(dims + 2, c->out, sizeof(int64_t) * (size_t)c->S);
    tensor_set_shape(node_output(g, n, 0), t, c->S + 2, dims);
}

static int infer_conv_common(Graph *g, Node *n, bool transposed, Err *e) {
    ConvGeom c;
    int rc = need_same_dtype(g, n, 3, conv_types, e);
    if (rc || (rc = conv_geom(g, n, transposed, true, &c, e)))
        return rc;
    set_conv_output(g, n, &c, DT_FLOAT);
    return ST_OK;
}

static int infer_conv(Graph *g, Node *n, Err *e) {
    return infer_conv_common(g, n, false, e);
}

static int infer_conv_transpose(Graph *g, Node *n, Err *e) {
    return infer_conv_common(g, n, true, e);
}

// The columns [lo, hi) of a line of `count` positions j whose target j*stride + c0 lies in
// [0, size).
static void valid_range(int64_t c0, int64_t stride, int64_t size, int64_t count, int64_t *lo,
                        int64_t *hi) {
    *lo = c0 >= 0 ? 0 : (-c0 + stride - 1) / stride;
    *hi = size - 1 - c0 < 0 ? 0 : (size - 1 - c0) / stride + 1;
    *lo = ORCH_MIN(*lo, count);
    *hi = ORCH_MAX(ORCH_MIN(*hi, count), *lo);
}

enum { MAP_GATHER, MAP_SCATTER_ADD, MAP_AXPY };

// One kernel position's sampling pattern between a grid G (what a GEMM row spans) and a target
// grid T: position g of G meets t_d = g_d*stride - pad + kpos_d*dil of T. Walking G line by line
// (its last dim), the modes are
//   MAP_GATHER:      gv[g] = src[t], zero where t falls outside T (im2col)
//   MAP_SCATTER_ADD: dst[t] += gv[g] where t is inside T (col2im)
//   MAP_AXPY:        gv[g] += w * src[t] where t is inside T (a direct convolution)
// src and dst are the target grid's data; only the one the mode uses is read or written.
static void kernel_map(const ConvGeom *c, const int64_t *grid, const int64_t *tgt,
                       const int64_t *kpos, int mode, float w, float *gv, const float *src,
                       float *dst) {
    int S = c->S, L = S - 1;
    int64_t lines = product(grid, L), glen = grid[L], tlen = tgt[L];
    int64_t s = c->stride[L], c0 = kpos[L] * c->dil[L] - c->pad[L], lo, hi;
    valid_range(c0, s, tlen, glen, &lo, &hi);
    for (int64_t line = 0; line < lines; line++) {
        // Offset of the target line, or -1 when a leading coordinate falls outside T.
        int64_t off = 0, rest = line, scale = 1;
        for (int d = L - 1; d >= 0 && off >= 0; d--) {
            int64_t t = rest % grid[d] * c->stride[d] - c->pad[d] + kpos[d] * c->dil[d];
            rest /= grid[d];
            off = t < 0 || t >= tgt[d] ? -1 : off + t * scale;
            scale *= tgt[d];
        }
        float *gl = gv + line * glen;
        if (off < 0) {
            if (mode == MAP_GATHER)
                memset(gl, 0, sizeof(float) * (size_t)glen);
            continue;
        }
        int64_t base = off * tlen + c0; // target of g = 0 on this line
        switch (mode) {
        case MAP_GATHER:
            for (int64_t j = 0; j < lo; j++)
                gl[j] = 0.0f;
            for (int64_t j = lo; j < hi; j++)
                gl[j] = src[base + j * s];
            for (int64_t j = hi; j < glen; j++)
                gl[j] = 0.0f;
            break;
        case MAP_SCATTER_ADD:
            for (int64_t j = lo; j < hi; j++)
                dst[base + j * s] += gl[j];
            break;
        default:
            for (int64_t j = lo; j < hi; j++)
                gl[j] += w * src[base + j * s];
            break;
        }
    }
}

static void kernel_pos(const ConvGeom *c, int64_t ki, int64_t *kpos) {
    for (int d = c->S - 1; d >= 0; d--) {
        kpos[d] = ki % c->k[d];
        ki /= c->k[d];
    }
}

// Adds bias[m] to every plane m of an N x M x pix output.
static void add_bias(const ConvGeom *c, const float *bias, float *y) {
    if (!bias)
        return;
#pragma omp parallel for if (c->N * c->M * c->out_pix >= PARALLEL_MIN_ELEMS)
    for (int64_t p = 0; p < c->N * c->M; p++)
        for (int64_t i = 0; i < c->out_pix; i++)
            y[p * c->out_pix + i] += bias[p % c->M];
}

// Depthwise convolution (one input channel per group): a direct loop per output plane, as a
// GEMM with K = kernel size would spend its time packing.
static void conv_depthwise(const ConvGeom *c, const float *x, const float *w, float *y) {
    int64_t mg = c->M / c->group;
#pragma omp parallel for if (c->N * c->M * c->out_pix * c->k_pix >= PARALLEL_MIN_ELEMS)
    for (int64_t p = 0; p < c->N * c->M; p++) {
        int64_t n = p / c->M, m = p % c->M;
        float *yp = y + p * c->out_pix;
        const float *xp = x + (n * c->C + m / mg) * c->in_pix;
        memset(yp, 0, sizeof(float) * (size_t)c->out_pix);
        for (int64_t ki = 0; ki < c->k_pix; ki++) {
            int64_t kpos[MAX_SPATIAL];
            kernel_pos(c, ki, kpos);
            kernel_map(c, c->out, c->in, kpos, MAP_AXPY, w[m * c->k_pix + ki], yp, xp, NULL);
        }
    }
}

static int run_conv(const OpRun *r, Err *e) {
    ConvGeom c;
    int rc = conv_geom(r->g, r->n, false, true, &c, e);
    ORCH_ASSERT(rc == ST_OK);
    rc = conv_forward_f32(&c, r->x[0], r->x[1], opt_data(r, 2), r->y[0]);
    return rc ? op_err(e, rc, r->n, "out of memory for the convolution's column buffer") : ST_OK;
}

int conv_forward_f32(const ConvGeom *cg_, const float *x, const float *w, const float *bias,
                     float *y) {
    const ConvGeom c = *cg_;
    int64_t cg = c.C / c.group, mg = c.M / c.group, rows = cg * c.k_pix;
    if (cg == 1 && c.group > 1) {
        conv_depthwise(&c, x, w, y);
        add_bias(&c, bias, y);
        return ST_OK;
    }
    // A 1x1 convolution without stride or padding is a plain product with X.
    bool direct = c.k_pix == 1;
    for (int d = 0; d < c.S; d++)
        direct = direct && c.stride[d] == 1 && c.pad[d] == 0 && c.in[d] == c.out[d];
    float *col = NULL;
    int64_t col_size;
    if (!direct) {
        if (mul_overflows_i64(rows, c.out_pix, &col_size) ||
            !(col = malloc(sizeof(float) * (size_t)col_size + 1)))
            return ST_RUNTIME;
    }
    for (int64_t n = 0; n < c.N; n++) {
        for (int64_t gi = 0; gi < c.group; gi++) {
            const float *xg = x + (n * c.C + gi * cg) * c.in_pix;
            if (!direct) {
#pragma omp parallel for if (rows * c.out_pix >= PARALLEL_MIN_ELEMS)
                for (int64_t row = 0; row < rows; row++) {
                    int64_t kpos[MAX_SPATIAL];
                    kernel_pos(&c, row % c.k_pix, kpos);
                    kernel_map(&c, c.out, c.in, kpos, MAP_GATHER, 0.0f, col + row * c.out_pix,
                               xg + row / c.k_pix * c.in_pix, NULL);
                }
            }
            gemm_f32(false, false, mg, c.out_pix, rows, 1.0f, w + gi * mg * rows, rows,
                     direct ? xg : col, c.out_pix, 0.0f, y + (n * c.M + gi * mg) * c.out_pix,
                     c.out_pix);
        }
    }
    free(col);
    add_bias(&c, bias, y);
    return ST_OK;
}

// ConvTranspose per image and group: col = W_g^T X_g ((M/group * kernel) x input pixels), then
// each row of col is scattered onto its output plane at its kernel offset (col2im).
static int run_conv_transpose(const OpRun *r, Err *e) {
    ConvGeom c;
    int rc = conv_geom(r->g, r->n, true, true, &c, e);
    ORCH_ASSERT(rc == ST_OK);
    rc = conv_transpose_forward_f32(&c, r->x[0], r->x[1], opt_data(r, 2), r->y[0]);
    return rc ? op_err(e, rc, r->n, "out of memory for the column buffer") : ST_OK;
}

int conv_transpose_forward_f32(const ConvGeom *cg_, const float *x, const float *w,
                               const float *bias, float *y) {
    const ConvGeom c = *cg_;
    int64_t cg = c.C / c.group, mg = c.M / c.group, rows = mg * c.k_pix, col_size;
    float *col;
    if (mul_overflows_i64(rows, c.in_pix, &col_size) ||
        !(col = malloc(sizeof(float) * (size_t)col_size + 1)))
        return ST_RUNTIME;
    memset(y, 0, sizeof(float) * (size_t)(c.N * c.M * c.out_pix));
    for (int64_t n = 0; n < c.N; n++) {
        for (int64_t gi = 0; gi < c.group; gi++) {
            gemm_f32(true, false, rows, c.in_pix, cg, 1.0f, w + gi * cg * rows, rows,
                     x + (n * c.C + gi * cg) * c.in_pix, c.in_pix, 0.0f, col, c.in_pix);
            float *yg = y + (n * c.M + gi * mg) * c.out_pix;
            // Output planes are disjoint, so threads take whole planes.
#pragma omp parallel for if (rows * c.in_pix >= PARALLEL_MIN_ELEMS)
            for (int64_t m = 0; m < mg; m++) {
                for (int64_t ki = 0; ki < c.k_pix; ki++) {
                    int64_t kpos[MAX_SPATIAL];
                    kernel_pos(&c, ki, kpos);
                    kernel_map(&c, c.in, c.out, kpos, MAP_SCATTER_ADD, 0.0f,
                               col + (m * c.k_pix + ki) * c.in_pix, NULL, yg + m * c.out_pix);
                }
            }
        }
    }
    free(col);
    add_bias(&c, bias, y);
    return ST_OK;
}

// ---- MatMulInteger and ConvInteger: 8-bit inputs less their zero points, int32 sums ----

static const DType q8_types[] = {DT_UINT8, DT_INT8, DT_UNDEFINED};

// Optional zero point input zp for data input `data`: same dtype, and one value (per tensor) or a
// 1-D tensor of `count` values (per row, column or channel, as `what` says).
static int check_zero_point(const Graph *g, const Node *n, int zp, int data, int64_t count,
                            const char *what, Err *e) {
    const Tensor *z = node_input(g, n, zp), *x = node_input(g, n, data);
    if (!z)
        return ST_OK;
    char sz[160];
    if (z->dtype != x->dtype)
        return op_err(e, ST_INVALID, n, "zero point input %d is %s but input %d is %s", zp,
                      dtype_name(z->dtype), data, dtype_name(x->dtype));
    if (tensor_numel(z) != 1 && !(z->rank == 1 && z->dims[0] == count))
        return op_err(e, ST_UNSUPPORTED, n,
                      "zero point input %d has shape %s; orch takes one value or %lld (one per "
                      "%s)",
                      zp, tensor_shape_str(z, sz, sizeof sz), (long long)count, what);
    return ST_OK;
}

// Zero point i at index idx (0 when the input is absent, the only value when per tensor).
static int64_t zero_point(const OpRun *r, int i, int64_t idx) {
    const void *p = opt_data(r, i);
    if (!p)
        return 0;
    return elem_get_i64(r->in[i]->dtype, p, tensor_numel(r->in[i]) == 1 ? 0 : idx);
}

static int infer_matmul_integer(Graph *g, Node *n, Err *e) {
    int rc;
    if ((rc = op_need_dtype(g, n, 0, q8_types, e)) || (rc = op_need_dtype(g, n, 1, q8_types, e)))
        return rc;
    const Tensor *a = node_input(g, n, 0), *b = node_input(g, n, 1);
    MatMulDims d;
    if ((rc = matmul_dims(n, a, b, &d, e)) ||
        (rc = check_zero_point(g, n, 2, 0, a->rank == 2 ? d.M : 1, "row of a 2-D A", e)) ||
        (rc = check_zero_point(g, n, 3, 1, d.N, "column of B", e)))
        return rc;
    set_matmul_output(g, n, a, b, &d, DT_INT32);
    return ST_OK;
}

static int run_matmul_integer(const OpRun *r, Err *e) {
    MatMulDims d;
    int rc = matmul_dims(r->n, r->in[0], r->in[1], &d, e);
    ORCH_ASSERT(rc == ST_OK);
    DType ta = r->in[0]->dtype, tb = r->in[1]->dtype;
    int32_t *y = r->y[0];
    int64_t M = d.M, N = d.N, K = d.K, batches = product(d.batch, d.batch_rank);
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t oa, ob;
        batch_offsets(&d, bi, &oa, &ob);
        for (int64_t i = 0; i < M; i++) {
            int64_t za = zero_point(r, 2, i);
            for (int64_t j = 0; j < N; j++) {
                int64_t s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (elem_get_i64(ta, r->x[0], oa + i * K + k) - za) *
                         (elem_get_i64(tb, r->x[1], ob + k * N + j) - zero_point(r, 3, j));
                y[(bi * M + i) * N + j] = (int32_t)s;
            }
        }
    }
    return ST_OK;
}

static int infer_conv_integer(Graph *g, Node *n, Err *e) {
    ConvGeom c;
    int rc;
    if ((rc = op_need_dtype(g, n, 0, q8_types, e)) || (rc = op_need_dtype(g, n, 1, q8_types, e)) ||
        (rc = conv_geom(g, n, false, false, &c, e)) ||
        (rc = check_zero_point(g, n, 2, 0, 1, "tensor", e)) ||
        (rc = check_zero_point(g, n, 3, 1, c.M, "output channel", e)))
        return rc;
    set_conv_output(g, n, &c, DT_INT32);
    return ST_OK;
}

// A direct loop: each output element sums (x - x_zp) * (w - w_zp) over its window; padding
// stands for x_zp, so it adds nothing.
static int run_conv_integer(const OpRun *r, Err *e) {
    ConvGeom c;
    int rc = conv_geom(r->g, r->n, false, false, &c, e);
    ORCH_ASSERT(rc == ST_OK);
    DType tx = r->in[0]->dtype, tw = r->in[1]->dtype;
    int32_t *y = r->y[0];
    int64_t cg = c.C / c.group, mg = c.M / c.group, xz = zero_point(r, 2, 0);
    for (int64_t p = 0; p < c.N * c.M; p++) {
        int64_t n = p / c.M, m = p % c.M, wz = zero_point(r, 3, m);
        for (int64_t o = 0; o < c.out_pix; o++) {
            int64_t s = 0;
            for (int64_t ki = 0; ki < c.k_pix; ki++) {
                int64_t kpos[MAX_SPATIAL], off = 0, rest = o;
                kernel_pos(&c, ki, kpos);
                for (int64_t d = c.S - 1, scale = 1; d >= 0 && off >= 0; d--) {
                    int64_t t = rest % c.out[d] * c.stride[d] - c.pad[d] + kpos[d] * c.dil[d];
                    rest /= c.out[d];
                    off = t < 0 || t >= c.in[d] ? -1 : off + t * scale;
                    scale *= c.in[d];
                }
                if (off < 0)
                    continue;
                for (int64_t ci = 0; ci < cg; ci++) {
                    int64_t xi = (n * c.C + m / mg * cg + ci) * c.in_pix + off;
                    int64_t wi = (m * cg + ci) * c.k_pix + ki;
                    s +=
                        (elem_get_i64(tx, r->x[0], xi) - xz) * (elem_get_i64(tw, r->x[1], wi) - wz);
                }
            }
            y[p * c.out_pix + o] = (int32_t)s;
        }
    }
    return ST_OK;
}

// ---- Einsum ----

// An einsum equation bound to its inputs' shapes. Labels are numbered with the output's first,
// in output order (n_out of them), then the summed ones. Letters and the dims an ellipsis
// stands for (right-aligned across inputs, numpy style) are both labels.
enum { EIN_MAX_LABELS = 52 + ORCH_MAX_RANK, EIN_MAX_IN = 16 };

typedef struct Einsum {
    int n_in, n_labels, n_out;
    int64_t size[EIN_MAX_LABELS];
    int64_t stride[EIN_MAX_IN][EIN_MAX_LABELS]; // per input; 0 where absent or broadcast
} Einsum;

// Label codes before renumbering: letters 0..51, ellipsis dims 52 + (dim from the left of the
// widest ellipsis).
static int letter_code(char ch) {
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    return -1;
}

// Splits one term into label codes; *ell is the position of "..." among them (-1 if none).
static int einsum_term(const Node *n, const char *s, size_t len, int *codes, int *count, int *ell,
                       Err *e) {
    *count = 0;
    *ell = -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (*ell >= 0 || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return op_err(e, ST_INVALID, n, "malformed ellipsis in equation term '%.*s'",
                              (int)len, s);
            *ell = *count;
            i += 2;
            continue;
        }
        int code = letter_code(s[i]);
        if (code < 0)
            return op_err(e, ST_INVALID, n, "invalid character '%c' in equation", s[i]);
        if (*count >= ORCH_MAX_RANK)
            return op_err(e, ST_INVALID, n, "equation term '%.*s' has too many labels", (int)len,
                          s);
        codes[(*count)++] = code;
    }
    return ST_OK;
}

static int einsum_parse(const Node *n, const Tensor *const *in, int n_in, Einsum *es, int *out_rank,
                        int64_t *out_dims, Err *e) {
    const char *eq_attr = node_attr_s(n, "equation", NULL);
    if (!eq_attr)
        return op_err(e, ST_INVALID, n, "the equation attribute is missing");
    if (n_in > EIN_MAX_IN)
        return op_err(e, ST_UNSUPPORTED, n, "%d inputs; orch handles at most %d", n_in, EIN_MAX_IN);
    char eq[256];
    size_t len = 0;
    for (const char *p = eq_attr; *p; p++) {
        if (*p == ' ')
            continue;
        if (len + 1 >= sizeof eq)
            return op_err(e, ST_UNSUPPORTED, n, "equation is too long");
        eq[len++] = *p;
    }
    eq[len] = 0;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : len;

    // Input terms: label codes per input axis, sizes per code.
    int64_t code_size[EIN_MAX_LABELS];
    int code_count[EIN_MAX_LABELS] = {0};
    int axis_code[EIN_MAX_IN][ORCH_MAX_RANK];
    int ell_rank = 0, rc;
    for (int c = 0; c < EIN_MAX_LABELS; c++)
        code_size[c] = 1;
    memset(es, 0, sizeof *es);
    es->n_in = n_in;
    const char *s = eq;
    for (int i = 0; i < n_in; i++) {
        const char *end = memchr(s, ',', (size_t)(eq + lhs_len - s));
        if (i == n_in - 1 ? end != NULL : end == NULL)
            return op_err(e, ST_INVALID, n, "equation '%s' needs one term per input (%d)", eq_attr,
                          n_in);
        if (!end)
            end = eq + lhs_len;
        int codes[ORCH_MAX_RANK], count, ell;
        if ((rc = einsum_term(n, s, (size_t)(end - s), codes, &count, &ell, e)))
            return rc;
        int rank = in[i]->rank, er = rank - count;
        if (ell < 0 ? er != 0 : er < 0)
            return op_err(e, ST_INVALID, n,
                          "equation term %d has %d labels but input %d has rank %d", i, count, i,
                          rank);
        // Axes: labels before the ellipsis, its dims, labels after it.
        for (int a = 0, k = 0; a < rank; a++) {
            bool in_ell = ell >= 0 && a >= ell && a < ell + er;
            axis_code[i][a] = in_ell ? -1 - (er - (a - ell)) : codes[k++];
        }
        ell_rank = ORCH_MAX(ell_rank, er);
        s = end + 1;
    }
    // Ellipsis dims become codes 52.. counted from the left of the widest ellipsis.
    for (int i = 0; i < n_in; i++)
        for (int a = 0; a < in[i]->rank; a++)
            if (axis_code[i][a] < 0)
                axis_code[i][a] = 52 + ell_rank + axis_code[i][a] + 1;
    char sx[160];
    for (int i = 0; i < n_in; i++) {
        for (int a = 0; a < in[i]->rank; a++) {
            int c = axis_code[i][a];
            int64_t v = in[i]->dims[a];
            // Labels broadcast like numpy: a size of 1 matches any other.
            if (v != code_size[c] && v != 1 && code_size[c] != 1)
                return op_err(e, ST_INVALID, n,
                              "input %d (shape %s) disagrees on the size of a label of '%s'", i,
                              tensor_shape_str(in[i], sx, sizeof sx), eq_attr);
            if (v != 1)
                code_size[c] = v;
            if (c < 52)
                code_count[c]++;
        }
    }

    // Output codes: explicit, or the ellipsis then the letters used once, in ASCII order.
    int out_codes[EIN_MAX_LABELS], n_out = 0;
    bool used[EIN_MAX_LABELS] = {false};
    if (arrow) {
        int codes[ORCH_MAX_RANK], count, ell;
        if ((rc = einsum_term(n, arrow + 2, strlen(arrow + 2), codes, &count, &ell, e)))
            return rc;
        if (ell < 0 && ell_rank > 0)
            return op_err(e, ST_INVALID, n,
                          "the output of '%s' needs '...' for the inputs' "
                          "broadcast dims",
                          eq_attr);
        for (int k = 0; k <= count; k++) {
            if (k == ell)
                for (int d = 0; d < ell_rank; d++)
                    out_codes[n_out++] = 52 + d;
            if (k == count)
                break;
            if (code_count[codes[k]] == 0 || used[codes[k]])
                return op_err(e, ST_INVALID, n,
                              "output label %d of '%s' is repeated or not in any input", k,
                              eq_attr);
            used[codes[k]] = true;
            out_codes[n_out++] = codes[k];
        }
    } else {
        for (int d = 0; d < ell_rank; d++)
            out_codes[n_out++] = 52 + d;
        for (int c = 0; c < 52; c++)
            if (code_count[c] == 1)
                out_codes[n_out++] = c;
    }
    if (n_out > ORCH_MAX_RANK)
        return op_err(e, ST_UNSUPPORTED, n, "output rank %d is over orch's %d", n_out,
                      ORCH_MAX_RANK);

    // Renumber: output codes first, then every other code in use.
    int label_of[EIN_MAX_LABELS];
    for (int c = 0; c < EIN_MAX_LABELS; c++)
        label_of[c] = -1;
    es->n_out = n_out;
    for (int k = 0; k < n_out; k++)
        label_of[out_codes[k]] = es->n_labels++;
    for (int i = 0; i < n_in; i++)
        for (int a = 0; a < in[i]->rank; a++)
            if (label_of[axis_code[i][a]] < 0)
                label_of[axis_code[i][a]] = es->n_labels++;
    for (int c = 0; c < EIN_MAX_LABELS; c++)
        if (label_of[c] >= 0)
            es->size[label_of[c]] = code_size[c];
    for (int i = 0; i < n_in; i++) {
        int64_t st = 1;
        for (int a = in[i]->rank - 1; a >= 0; a--) {
            // A repeated label walks a diagonal: its strides add up.
            if (in[i]->dims[a] != 1)
                es->stride[i][label_of[axis_code[i][a]]] += st;
            st *= in[i]->dims[a];
        }
    }
    *out_rank = n_out;
    for (int k = 0; k < n_out; k++)
        out_dims[k] = es->size[k];
    return ST_OK;
}

static int infer_einsum(Graph *g, Node *n, Err *e) {
    int rc = need_same_dtype(g, n, n->n_in, matmul_types, e);
    if (rc)
        return rc;
    const Tensor *in[EIN_MAX_IN];
    for (int i = 0; i < n->n_in && i < EIN_MAX_IN; i++) {
        in[i] = node_input(g, n, i);
        if (!in[i])
            return op_err(e, ST_INVALID, n, "input %d is missing", i);
    }
    Einsum es;
    int rank;
    int64_t dims[ORCH_MAX_RANK];
    if ((rc = einsum_parse(n, in, n->n_in, &es, &rank, dims, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), in[0]->dtype, rank, dims);
    return ST_OK;
}

// Steps the index over labels [first, last) (last fastest), moving each input's offset along.
static void einsum_next(const Einsum *es, int first, int last, int64_t *idx, int64_t *off) {
    for (int l = last - 1; l >= first; l--) {
        for (int i = 0; i < es->n_in; i++)
            off[i] += es->stride[i][l];
        if (++idx[l] < es->size[l])
            return;
        for (int i = 0; i < es->n_in; i++)
            off[i] -= es->stride[i][l] * es->size[l];
        idx[l] = 0;
    }
}

// Every output element is the sum, over all values of the summed labels, of the product of the
// inputs' elements: one nested loop for every equation. float32 sums in float, as a GEMM would;
// other float dtypes in double, integers in wrapping 64-bit arithmetic.
static int run_einsum(const OpRun *r, Err *e) {
    Einsum es;
    int rank;
    int64_t dims[ORCH_MAX_RANK];
    int rc = einsum_parse(r->n, r->in, r->n->n_in, &es, &rank, dims, e);
    ORCH_ASSERT(rc == ST_OK);
    DType t = r->out[0]->dtype;
    int64_t n_out = product(es.size, es.n_out);
    int64_t n_sum = product(es.size + es.n_out, es.n_labels - es.n_out);
    int64_t idx[EIN_MAX_LABELS] = {0}, off[EIN_MAX_IN] = {0};
    for (int64_t o = 0; o < n_out; o++, einsum_next(&es, 0, es.n_out, idx, off)) {
        int64_t sidx[EIN_MAX_LABELS] = {0}, soff[EIN_MAX_IN];
        memcpy(soff, off, sizeof soff);
        float acc_f = 0;
        double acc_d = 0;
        uint64_t acc_u = 0;
        for (int64_t k = 0; k < n_sum; k++, einsum_next(&es, es.n_out, es.n_labels, sidx, soff)) {
            if (t == DT_FLOAT) {
                float p = 1;
                for (int i = 0; i < es.n_in; i++)
                    p *= ((const float *)r->x[i])[soff[i]];
                acc_f += p;
            } else if (dtype_is_float(t)) {
                double p = 1;
                for (int i = 0; i < es.n_in; i++)
                    p *= elem_get_f64(t, r->x[i], soff[i]);
                acc_d += p;
            } else {
                uint64_t p = 1;
                for (int i = 0; i < es.n_in; i++)
                    p *= (uint64_t)elem_get_i64(t, r->x[i], soff[i]);
                acc_u += p;
            }
        }
        if (t == DT_FLOAT)
            ((float *)r->y[0])[o] = acc_f;
        else if (dtype_is_float(t))
            elem_set_f64(t, r->y[0], o, acc_d);
        else
            elem_set_i64(t, r->y[0], o, (int64_t)acc_u);
    }
    return ST_OK;
}

const OpDef ops_linear[] = {
    {"MatMul", infer_matmul, run_matmul, 2, 2, 1, 1, 0},
    {"Gemm", infer_gemm, run_gemm, 2, 3, 1, 1, 0},
    {"Conv", infer_conv, run_conv, 2, 3, 1, 1, 0},
    {"ConvTranspose", infer_conv_transpose, run_conv_transpose, 2, 3, 1, 1, 0},
    {"Einsum", infer_einsum, run_einsum, 1, -1, 1, 1, 0},
    {"MatMulInteger", infer_matmul_integer, run_matmul_integer, 2, 4, 1, 1, 0},
    {"ConvInteger", infer_conv_integer, run_conv_integer, 2, 4, 1, 1, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
