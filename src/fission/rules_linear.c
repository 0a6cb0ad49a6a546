// Fission rules for linear ONNX ops: MatMul, Gemm, Conv, ConvTranspose, Einsum (matmul forms)
// become LINEAR primitives with LAYOUT (transposes, unit axes) and ELEMWISE (bias, alpha/beta)
// primitives around them. Shapes and attributes were validated by src/ops/linear.c; the
// convolution parameters come from its conv_geom (src/ops/linear.h).
#include "fission.h"

#include "../ops/linear.h"
#include "../ops/resize.h"

#include <stdlib.h>
#include <string.h>

// The LINEAR primitive's dtypes: its matmul runs float32 on the GEMM and double in a plain loop
// (both as the reference ops); its convolution is float32 only.
static bool matmul_dtype(DType t) {
    return t == DT_FLOAT || t == DT_DOUBLE;
}

// MatMul with numpy's 1-D promotion: a 1-D A gains a leading unit axis, a 1-D B a trailing one,
// and the product loses them again.
static int rule_matmul(FissionCtx *fc) {
    const Tensor *A = fc_in_t(fc, 0), *B = fc_in_t(fc, 1);
    if (!matmul_dtype(A->dtype))
        return ST_UNSUPPORTED;
    int a = fc_in(fc, 0), b = fc_in(fc, 1);
    if (A->rank == 1) {
        int64_t d[2] = {1, A->dims[0]};
        a = pb_reshape(&fc->b, a, 2, d);
    }
    if (B->rank == 1) {
        int64_t d[2] = {B->dims[0], 1};
        b = pb_reshape(&fc->b, b, 2, d);
    }
    int y = pb_matmul(&fc->b, a, b);
    const Tensor *Y = fc_out_t(fc, 0);
    if (A->rank == 1 || B->rank == 1)
        y = pb_reshape(&fc->b, y, Y->rank, Y->dims);
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// Gemm: Y = alpha * op(A) op(B) + beta * C. The transposes are layout primitives, alpha and
// beta multiplications by immediates (left out when 1), and C broadcasts in the add. As in the
// reference, a beta of 0 ignores C.
static int rule_gemm(FissionCtx *fc) {
    const Node *n = fc->n;
    if (!matmul_dtype(fc_in_t(fc, 0)->dtype))
        return ST_UNSUPPORTED;
    static const int swap[2] = {1, 0};
    int a = fc_in(fc, 0), b = fc_in(fc, 1), c = fc_in(fc, 2);
    if (node_attr_i(n, "transA", 0))
        a = pb_transpose(&fc->b, a, swap);
    if (node_attr_i(n, "transB", 0))
        b = pb_transpose(&fc->b, b, swap);
    double alpha = node_attr_f(n, "alpha", 1.0f), beta = node_attr_f(n, "beta", 1.0f);
    int y = pb_matmul(&fc->b, a, b);
    if (alpha != 1)
        y = pb_ew2i(&fc->b, EW_MUL, y, alpha);
    if (c >= 0 && beta != 0) {
        if (beta != 1)
            c = pb_ew2i(&fc->b, EW_MUL, c, beta);
        y = pb_ew2(&fc->b, EW_ADD, y, c);
    }
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// ---- Conv, ConvTranspose ----

// The convolution parameters from linear.c's geometry: explicit pads, or auto_pad SAME_UPPER /
// SAME_LOWER / VALID; for the transposed form also output_padding and output_shape, whose padding
// trims the full result to that size. pad_end is informative (the output dims decide). A node
// the geometry rejects (its shape rule accepted it) would stay opaque.
static bool conv_params(const FissionCtx *fc, bool transposed, LinearParams *lp) {
    ConvGeom c;
    Err e = {0};
    if (conv_geom(fc->g, fc->n, transposed, true, &c, &e) != ST_OK)
        return false;
    memset(lp, 0, sizeof *lp);
    lp->op = transposed ? LIN_CONV_TRANSPOSE : LIN_CONV;
    lp->n_spatial = c.S;
    lp->group = (int)c.group;
    for (int d = 0; d < c.S; d++) {
        lp->stride[d] = c.stride[d];
        lp->dilation[d] = c.dil[d];
        lp->pad_begin[d] = c.pad[d];
        lp->pad_end[d] = c.pad_end[d];
        lp->out_pad[d] = c.out_pad[d];
    }
    return true;
}

// ---- A 1x1 convolution over a concat of upsampled maps ----
//
// y = W * concat(x_1 .. x_n) with a 1x1 kernel is sum_i W_i * x_i, W_i the columns of W that
// read part i. Where part i is an upsampling Resize of r_i that only the concat reads,
// W_i * resize(r_i) = resize(W_i * r_i): the resize mixes positions within a channel with
// weights, the convolution mixes channels at a position, and both are linear. The product then
// runs at r_i's resolution and the concat is never written. Segformer's decode head is the case:
// four maps of 256 channels at 128x128, three upsampled from 64x64, 32x32 and 16x16, went through
// a 32 MB concat and an 8.6 GFLOP convolution; split, the convolutions take 2.8 GFLOP and the
// resized parts are summed. Values agree up to rounding. tf_crop_and_resize is left alone: its
// extrapolation value is a constant, which the product would not scale.

// The live node producing tensor t, or NULL (an input or a constant).
static const Node *producer_of(const Graph *g, int t) {
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_out; j++)
            if (n->out[j] == t)
                return n;
    }
    return NULL;
}

// Whether tensor t is read once, by a node, and is not a graph output.
static bool read_once(const Graph *g, int t) {
    if (g->tensors[t]->is_output)
        return false;
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++)
            uses += n->in[j] == t;
    }
    return uses == 1;
}

static bool is_default_op(const Node *n, const char *op) {
    return n && strcmp(n->op, op) == 0 && (!*n->domain || strcmp(n->domain, "ai.onnx") == 0);
}

// Whether part X of the concat is an upsampling Resize whose product can move before it; fills
// its plan with the channel axis left for the caller.
static bool movable_resize(const FissionCtx *fc, const Tensor *X, ResizePlan *p) {
    const Node *r = producer_of(fc->g, X->id);
    Err e = {0};
    if (!is_default_op(r, "Resize") || !read_once(fc->g, X->id) || r->n_in < 1 || r->in[0] < 0 ||
        fc->map[r->in[0]] < 0 || resize_plan(fc->g, r, p, &e) != ST_OK ||
        p->coord == RESIZE_TF_CROP_AND_RESIZE || p->rank != X->rank ||
        !resize_axis_is_identity(p, 0) || !resize_axis_is_identity(p, 1))
        return false;
    int64_t in = 1, out = 1;
    for (int d = 2; d < p->rank; d++) {
        in *= p->in[d];
        out *= p->out[d];
    }
    return out > in;
}

// The columns of the 1x1 weight W [M, C, 1..1] that read the concat's parts selected by sel, in
// order, as a constant [M, c, 1..1].
static int weight_columns(FissionCtx *fc, const Tensor *W, const Node *cat, const bool *sel) {
    size_t es = dtype_size(W->dtype);
    int64_t M = W->dims[0], C = W->dims[1], c = 0, dims[ORCH_MAX_RANK];
    for (int i = 0; i < cat->n_in; i++)
        c += sel[i] ? node_input(fc->g, cat, i)->dims[1] : 0;
    char *cols = xmalloc((size_t)(M * c) * es + 1);
    for (int64_t m = 0; m < M; m++) {
        int64_t from = 0, to = 0;
        for (int i = 0; i < cat->n_in; i++) {
            int64_t ci = node_input(fc->g, cat, i)->dims[1];
            if (sel[i]) {
                memcpy(cols + (size_t)(m * c + to) * es,
                       (const char *)W->data + (size_t)(m * C + from) * es, (size_t)ci * es);
                to += ci;
            }
            from += ci;
        }
    }
    memcpy(dims, W->dims, sizeof(int64_t) * (size_t)W->rank);
    dims[1] = c;
    int w = pb_const(&fc->b, W->dtype, W->rank, dims, cols);
    free(cols);
    return w;
}

enum { SPLIT_MAX_PARTS = 64 };

// The split form of the convolution (without its bias), or -1 where it does not apply.
static int conv_over_upsampled_concat(FissionCtx *fc, const LinearParams *lp) {
    const Tensor *X = fc_in_t(fc, 0), *W = fc_in_t(fc, 1), *Y = fc_out_t(fc, 0);
    if (lp->op != LIN_CONV || lp->group != 1 || X->rank < 3 || !W || W->kind != TK_CONST ||
        !W->data || W->rank != X->rank)
        return -1;
    for (int d = 0; d < lp->n_spatial; d++)
        if (lp->stride[d] != 1 || lp->dilation[d] != 1 || lp->pad_begin[d] != 0 ||
            lp->pad_end[d] != 0 || W->dims[2 + d] != 1)
            return -1;
    const Node *cat = producer_of(fc->g, X->id);
    if (!is_default_op(cat, "Concat") || !read_once(fc->g, X->id) || cat->n_in > SPLIT_MAX_PARTS ||
        (node_attr_i(cat, "axis", 0) + X->rank) % X->rank != 1)
        return -1;
    ResizePlan plans[SPLIT_MAX_PARTS];
    bool moved[SPLIT_MAX_PARTS], kept[SPLIT_MAX_PARTS];
    int n = cat->n_in, n_moved = 0, n_kept = 0, kept_in[SPLIT_MAX_PARTS];
    for (int i = 0; i < n; i++) {
        const Tensor *P = node_input(fc->g, cat, i);
        if (!P || fc->map[P->id] < 0)
            return -1;
        moved[i] = movable_resize(fc, P, &plans[i]);
        kept[i] = !moved[i];
        if (kept[i])
            kept_in[n_kept++] = fc->map[P->id];
        n_moved += moved[i];
    }
    if (n_moved == 0)
        return -1;
    int y = -1;
    // The parts read as they are: one convolution over their own concat (or the part alone).
    if (n_kept > 0) {
        int x = n_kept == 1 ? kept_in[0] : pb_concat(&fc->b, n_kept, kept_in, 1);
        y = pb_conv(&fc->b, lp, x, weight_columns(fc, W, cat, kept), Y->dims);
    }
    // The upsampled parts: the product at the source's resolution, then the resize.
    for (int i = 0; i < n; i++) {
        if (!moved[i])
            continue;
        const Tensor *R = fc->g->tensors[producer_of(fc->g, node_input(fc->g, cat, i)->id)->in[0]];
        bool only[SPLIT_MAX_PARTS] = {false};
        only[i] = true;
        int64_t zdims[ORCH_MAX_RANK];
        memcpy(zdims, R->dims, sizeof(int64_t) * (size_t)R->rank);
        zdims[1] = W->dims[0];
        int z = pb_conv(&fc->b, lp, fc->map[R->id], weight_columns(fc, W, cat, only), zdims);
        ResizePlan p = plans[i];
        p.in[1] = p.out[1] = W->dims[0];
        int t = fission_resize(fc, &p, z);
        if (t < 0)
            return -1; // what was built is dead code, discarded
        y = y < 0 ? t : pb_ew2(&fc->b, EW_ADD, y, t);
    }
    return y;
}

// Conv and ConvTranspose: the LINEAR primitive, then the bias (input 2, [M]) added as [M, 1..1]
// so it broadcasts over the spatial axes.
static int conv_rule(FissionCtx *fc, bool transposed) {
    if (fc_in_t(fc, 0)->dtype != DT_FLOAT)
        return ST_UNSUPPORTED;
    const Tensor *Y = fc_out_t(fc, 0);
    LinearParams lp;
    if (!conv_params(fc, transposed, &lp))
        return ST_UNSUPPORTED;
    int y = transposed ? -1 : conv_over_upsampled_concat(fc, &lp);
    if (y < 0)
        y = pb_conv(&fc->b, &lp, fc_in(fc, 0), fc_in(fc, 1), Y->dims);
    int bias = fc_in(fc, 2);
    if (bias >= 0) {
        int64_t dims[ORCH_MAX_RANK];
        dims[0] = Y->dims[1];
        for (int d = 1; d < Y->rank - 1; d++)
            dims[d] = 1;
        bias = pb_reshape(&fc->b, bias, Y->rank - 1, dims);
        y = pb_ew2(&fc->b, EW_ADD, y, bias);
    }
    fc_set_out(fc, 0, y);
    return ST_OK;
}

static int rule_conv(FissionCtx *fc) {
    return conv_rule(fc, false);
}
static int rule_conv_transpose(FissionCtx *fc) {
    return conv_rule(fc, true);
}

// ---- Einsum ----

// Einsum equations of one or two inputs whose labels each appear once per term: a label only in
// one input and not in the output is summed first (a REDUCE); then for two inputs the labels
// are batch (both inputs and the output), M (first input and output), N (second input and
// output) or K (both inputs, summed), and the product is one batched matmul between transposes
// and reshapes: A as [batch..., M, K], B as [batch..., K, N]. Repeated labels (diagonals), labels
// broadcast from size 1 and more inputs stay opaque. An ellipsis stands for labels of its own,
// right-aligned across the inputs as numpy does.
enum { EIN_LETTERS = 52, EIN_CODES = EIN_LETTERS + ORCH_MAX_RANK };

typedef struct EinTerm {
    int rank;
    int code[ORCH_MAX_RANK]; // per axis: letter (0..51, A-Z then a-z) or ellipsis dim (52 + i)
} EinTerm;

typedef struct EinPlan {
    int n_in;
    EinTerm in[2], out;
    int64_t size[EIN_CODES];
} EinPlan;

// One term; the ellipsis covers `ell_dims` axes (the input's rank less its letters; for the
// output, the widest ellipsis), numbered so that they right-align at ell_rank.
static bool ein_term(const char *s, size_t len, int ell_dims, int ell_rank, EinTerm *t) {
    t->rank = 0;
    bool seen_ell = false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '.') {
            if (seen_ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return false;
            seen_ell = true;
            i += 2;
            for (int k = 0; k < ell_dims; k++)
                t->code[t->rank++] = EIN_LETTERS + ell_rank - ell_dims + k;
            continue;
        }
        if (t->rank >= ORCH_MAX_RANK)
            return false;
        if (ch >= 'A' && ch <= 'Z')
            t->code[t->rank++] = ch - 'A';
        else if (ch >= 'a' && ch <= 'z')
            t->code[t->rank++] = ch - 'a' + 26;
        else
            return false;
    }
    return true;
}

static int letters_in(const char *s, size_t len) {
    int k = 0;
    for (size_t i = 0; i < len; i++)
        k += (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z');
    return k;
}

static bool ein_parse(const FissionCtx *fc, EinPlan *p) {
    const char *eq_attr = node_attr_s(fc->n, "equation", "");
    char eq[256];
    size_t len = 0;
    for (const char *c = eq_attr; *c; c++)
        if (*c != ' ' && len + 1 < sizeof eq)
            eq[len++] = *c;
    eq[len] = 0;
    p->n_in = fc->n->n_in;
    if (p->n_in < 1 || p->n_in > 2)
        return false;
    const char *arrow = strstr(eq, "->");
    size_t lhs = arrow ? (size_t)(arrow - eq) : len;
    const char *comma = memchr(eq, ',', lhs);
    const char *term[2] = {eq, comma ? comma + 1 : NULL};
    size_t tlen[2] = {comma ? (size_t)(comma - eq) : lhs,
                      comma ? lhs - (size_t)(comma + 1 - eq) : 0};
    if ((p->n_in == 2) != (comma != NULL))
        return false;
    int ell_rank = 0;
    for (int i = 0; i < p->n_in; i++)
        ell_rank = ORCH_MAX(ell_rank, fc_in_t(fc, i)->rank - letters_in(term[i], tlen[i]));
    for (int c = 0; c < EIN_CODES; c++)
        p->size[c] = -1;
    int uses[EIN_CODES] = {0};
    for (int i = 0; i < p->n_in; i++) {
        const Tensor *t = fc_in_t(fc, i);
        int ell_dims = t->rank - letters_in(term[i], tlen[i]);
        if (!ein_term(term[i], tlen[i], ell_dims, ell_rank, &p->in[i]) || p->in[i].rank != t->rank)
            return false;
        bool here[EIN_CODES] = {false};
        for (int a = 0; a < t->rank; a++) {
            int c = p->in[i].code[a];
            if (here[c] || (p->size[c] >= 0 && p->size[c] != t->dims[a]))
                return false; // a diagonal, or a size-1 label broadcast against another size
            here[c] = true;
            p->size[c] = t->dims[a];
            uses[c]++;
        }
    }
    if (arrow) {
        const char *o = arrow + 2;
        if (!ein_term(o, strlen(o), ell_rank, ell_rank, &p->out))
            return false;
    } else {
        // Implicit output: the ellipsis dims, then the letters used once in ASCII order.
        p->out.rank = 0;
        for (int c = EIN_LETTERS; c < EIN_LETTERS + ell_rank; c++)
            p->out.code[p->out.rank++] = c;
        for (int c = 0; c < EIN_LETTERS; c++)
            if (uses[c] == 1)
                p->out.code[p->out.rank++] = c;
    }
    return true;
}

// Whether code c is an axis of term t.
static bool ein_has(const EinTerm *t, int c) {
    for (int a = 0; a < t->rank; a++)
        if (t->code[a] == c)
            return true;
    return false;
}

// Sums the axes of an input whose labels no other term has (REDUCE, dropping them).
static int ein_reduce_private(FissionCtx *fc, int x, EinTerm *t, const EinTerm *other,
                              const EinTerm *out) {
    uint32_t axes = 0;
    EinTerm kept = {0};
    for (int a = 0; a < t->rank; a++) {
        int c = t->code[a];
        if (!ein_has(out, c) && (!other || !ein_has(other, c)))
            axes |= 1u << a;
        else
            kept.code[kept.rank++] = c;
    }
    if (!axes)
        return x;
    *t = kept;
    return pb_reduce(&fc->b, RED_SUM, x, axes, false, false);
}

// Transposes x (labelled by t) so that its labels come in the order `codes`, then reshapes it to
// `rank` dims; either step is left out when it changes nothing.
static int ein_arrange(FissionCtx *fc, int x, const EinTerm *t, const int *codes, int rank,
                       const int64_t *dims) {
    int perm[ORCH_MAX_RANK];
    bool moved = false;
    for (int d = 0; d < t->rank; d++) {
        for (int a = 0; a < t->rank; a++)
            if (t->code[a] == codes[d])
                perm[d] = a;
        moved |= perm[d] != d;
    }
    if (moved)
        x = pb_transpose(&fc->b, x, perm);
    const Tensor *cur = pb_t(&fc->b, x);
    bool same = cur->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = cur->dims[d] == dims[d];
    return same ? x : pb_reshape(&fc->b, x, rank, dims);
}

static void append(int *codes, int *n, const int *more, int count) {
    memcpy(codes + *n, more, sizeof(int) * (size_t)count);
    *n += count;
}

static int rule_einsum(FissionCtx *fc) {
    EinPlan p;
    if (!matmul_dtype(fc_in_t(fc, 0)->dtype) || !ein_parse(fc, &p))
        return ST_UNSUPPORTED;
    const Tensor *Y = fc_out_t(fc, 0);
    int x[2];
    for (int i = 0; i < p.n_in; i++)
        x[i] = ein_reduce_private(fc, fc_in(fc, i), &p.in[i], p.n_in == 2 ? &p.in[1 - i] : NULL,
                                  &p.out);
    if (p.n_in == 1) {
        fc_set_out(fc, 0, ein_arrange(fc, x[0], &p.in[0], p.out.code, Y->rank, Y->dims));
        return ST_OK;
    }
    // Classify: batch labels in output order, then M, N (output order) and K (A's order).
    int bat[ORCH_MAX_RANK], m[ORCH_MAX_RANK], nn[ORCH_MAX_RANK], k[ORCH_MAX_RANK];
    int nb = 0, nm = 0, nnn = 0, nk = 0;
    int64_t M = 1, N = 1, K = 1;
    for (int d = 0; d < p.out.rank; d++) {
        int c = p.out.code[d];
        bool in_a = ein_has(&p.in[0], c), in_b = ein_has(&p.in[1], c);
        if (in_a && in_b) {
            bat[nb++] = c;
        } else if (in_a) {
            m[nm++] = c;
            M *= p.size[c];
        } else {
            nn[nnn++] = c;
            N *= p.size[c];
        }
    }
    for (int a = 0; a < p.in[0].rank; a++) {
        int c = p.in[0].code[a];
        if (!ein_has(&p.out, c)) {
            k[nk++] = c;
            K *= p.size[c];
        }
    }
    if (nb + 2 > ORCH_MAX_RANK)
        return ST_UNSUPPORTED;
    // A: [batch..., M..., K...] -> [batch..., M, K]; B: [batch..., K..., N...] -> [batch..., K, N].
    int codes[ORCH_MAX_RANK], nc = nb;
    int64_t dims[ORCH_MAX_RANK];
    memcpy(codes, bat, sizeof(int) * (size_t)nb);
    for (int i = 0; i < nb; i++)
        dims[i] = p.size[bat[i]];
    append(codes, &nc, m, nm);
    append(codes, &nc, k, nk);
    dims[nb] = M;
    dims[nb + 1] = K;
    int a = ein_arrange(fc, x[0], &p.in[0], codes, nb + 2, dims);
    nc = nb;
    append(codes, &nc, k, nk);
    append(codes, &nc, nn, nnn);
    dims[nb] = K;
    dims[nb + 1] = N;
    int b = ein_arrange(fc, x[1], &p.in[1], codes, nb + 2, dims);
    int y = pb_matmul(&fc->b, a, b);
    // The product [batch..., M, N] back to [batch..., M..., N...], then to the output's order.
    EinTerm prod = {0};
    int64_t pdims[ORCH_MAX_RANK];
    for (int i = 0; i < nb; i++)
        prod.code[prod.rank++] = bat[i];
    for (int i = 0; i < nm; i++)
        prod.code[prod.rank++] = m[i];
    for (int i = 0; i < nnn; i++)
        prod.code[prod.rank++] = nn[i];
    for (int d = 0; d < prod.rank; d++)
        pdims[d] = p.size[prod.code[d]];
    const Tensor *cur = pb_t(&fc->b, y);
    bool same = cur->rank == prod.rank;
    for (int d = 0; same && d < prod.rank; d++)
        same = cur->dims[d] == pdims[d];
    if (!same)
        y = pb_reshape(&fc->b, y, prod.rank, pdims);
    fc_set_out(fc, 0, ein_arrange(fc, y, &prod, p.out.code, Y->rank, Y->dims));
    return ST_OK;
}

const FissionRuleDef fission_rules_linear[] = {
    {"MatMul", rule_matmul}, {"Gemm", rule_gemm},
    {"Conv", rule_conv},     {"ConvTranspose", rule_conv_transpose},
    {"Einsum", rule_einsum}, {NULL, NULL},
};
