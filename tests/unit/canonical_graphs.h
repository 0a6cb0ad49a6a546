// The canonical primitive graphs every backend is checked on (test_backend_ops.c): one small graph
// per kernel family and shape regime a model meets — elementwise chains with broadcasts,
// reductions over inner, outer and several axes, layouts, products (square, skinny, odd sizes,
// batched, with fused epilogues), convolutions (1-D, 2-D, 3-D, strided, padded, dilated, grouped,
// depthwise, transposed), softmax and layer norm, an MLP chain, an attention block, and two
// operators without a fission rule (TopK, CumSum: OPAQUE primitives with their node). Sizes are
// small and odd on purpose (primes, 1, non-multiples of vector widths and tiles), so tails and
// remainders are exercised. Weights and inputs are deterministic.
// Needs: nothing beyond the primitive IR. Guarantees: each builder returns a verified graph with
// float32 inputs and outputs; canonical_graphs[] lists them all by name.
#ifndef ORCH_TEST_CANONICAL_GRAPHS_H
#define ORCH_TEST_CANONICAL_GRAPHS_H

#include "graph_builder.h"
#include "prim/prim.h"
#include "prim/prim_build.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t cg_seed = 0x243f6a8885a308d3ull;

static inline float cg_rand(void) { // uniform in [-1, 1), deterministic
    cg_seed ^= cg_seed >> 12;
    cg_seed ^= cg_seed << 25;
    cg_seed ^= cg_seed >> 27;
    return (float)((double)((cg_seed * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0);
}

// A constant of random values scaled by s (weights of fan-in n: s = 1/sqrt(n) keeps outputs O(1)).
static inline int cg_const(PB *b, int rank, const int64_t *dims, double s) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = xmalloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(cg_rand() * s);
    int t = pb_const(b, DT_FLOAT, rank, dims, v);
    free(v);
    return t;
}

static inline int cg_gelu(PB *b, int y) {
    return pb_ew2(b, EW_MUL, pb_ew2i(b, EW_MUL, y, 0.5),
                  pb_ew2i(b, EW_ADD, pb_ew1(b, EW_ERF, pb_ew2i(b, EW_MUL, y, M_SQRT1_2)), 1.0));
}

// ---- elementwise and layout ----

static inline void cg_ew_chain(PrimGraph *pg) { // sigmoid(x * y + bias[col]) - tanh(x)
    const int64_t d[] = {37, 61}, bd[] = {61};
    PB b = {pg, "ew_chain"};
    int x = gb_input(pg, "x", 2, d), y = gb_input(pg, "y", 2, d);
    int bias = cg_const(&b, 1, bd, 1.0);
    int s = pb_ew1(&b, EW_SIGMOID, pb_ew2(&b, EW_ADD, pb_ew2(&b, EW_MUL, x, y), bias));
    gb_output(pg, pb_ew2(&b, EW_SUB, s, pb_ew1(&b, EW_TANH, x)));
}

static inline void cg_ew_broadcast(PrimGraph *pg) { // [5,1,7] op [1,9,1] -> [5,9,7]
    const int64_t ad[] = {5, 1, 7}, cd[] = {1, 9, 1};
    PB b = {pg, "ew_broadcast"};
    int a = gb_input(pg, "a", 3, ad), c = gb_input(pg, "c", 3, cd);
    gb_output(pg, pb_ew2(&b, EW_MAX, pb_ew2(&b, EW_ADD, a, c), pb_ew2i(&b, EW_MUL, a, 0.25)));
}

static inline void cg_transpose(PrimGraph *pg) { // [3,17,29] -> [29,3,17], then exp
    const int64_t d[] = {3, 17, 29};
    const int perm[] = {2, 0, 1};
    PB b = {pg, "transpose"};
    int x = gb_input(pg, "x", 3, d);
    gb_output(pg, pb_ew1(&b, EW_EXP, pb_transpose(&b, x, perm)));
}

// ---- reductions ----

static inline void cg_reduce_inner(PrimGraph *pg) { // sum over the last axis of [33, 257]
    const int64_t d[] = {33, 257};
    PB b = {pg, "reduce_inner"};
    int x = gb_input(pg, "x", 2, d);
    gb_output(pg, pb_reduce(&b, RED_SUM, x, 1u << 1, true, false));
}

static inline void cg_reduce_outer(PrimGraph *pg) { // max over the first axis of [129, 45]
    const int64_t d[] = {129, 45};
    PB b = {pg, "reduce_outer"};
    int x = gb_input(pg, "x", 2, d);
    gb_output(pg, pb_reduce(&b, RED_MAX, x, 1u << 0, false, false));
}

static inline void cg_reduce_spatial(PrimGraph *pg) { // mean over H, W of [2, 13, 9, 11]
    const int64_t d[] = {2, 13, 9, 11};
    PB b = {pg, "reduce_spatial"};
    int x = gb_input(pg, "x", 4, d);
    gb_output(pg, pb_reduce(&b, RED_MEAN, x, (1u << 2) | (1u << 3), true, false));
}

static inline void cg_softmax(PrimGraph *pg) { // softmax over the last axis of [7, 3, 100]
    const int64_t d[] = {7, 3, 100};
    PB b = {pg, "softmax"};
    int x = gb_input(pg, "x", 3, d);
    int m = pb_reduce(&b, RED_MAX, x, 1u << 2, true, false);
    int ex = pb_ew1(&b, EW_EXP, pb_ew2(&b, EW_SUB, x, m));
    int s = pb_reduce(&b, RED_SUM, ex, 1u << 2, true, false);
    gb_output(pg, pb_ew2(&b, EW_DIV, ex, s));
}

static inline void cg_layernorm(PrimGraph *pg) { // layer norm over 96 with scale and shift
    const int64_t d[] = {19, 96}, gd[] = {96};
    PB b = {pg, "layernorm"};
    int x = gb_input(pg, "x", 2, d);
    int mean = pb_reduce(&b, RED_MEAN, x, 1u << 1, true, false);
    int xc = pb_ew2(&b, EW_SUB, x, mean);
    int var = pb_reduce(&b, RED_MEAN, pb_ew2(&b, EW_MUL, xc, xc), 1u << 1, true, false);
    int inv = pb_ew1(&b, EW_RSQRT, pb_ew2i(&b, EW_ADD, var, 1e-5));
    int y = pb_ew2(&b, EW_MUL, xc, inv);
    y = pb_ew2(&b, EW_ADD, pb_ew2(&b, EW_MUL, y, cg_const(&b, 1, gd, 1.0)),
               cg_const(&b, 1, gd, 1.0));
    gb_output(pg, y);
}

// ---- products ----

static inline void cg_matmul(PrimGraph *pg, const char *name, int64_t M, int64_t K, int64_t N,
                             int epilogue) {
    const int64_t ad[] = {M, K}, wd[] = {K, N}, bd[] = {N};
    PB b = {pg, name};
    int a = gb_input(pg, "a", 2, ad);
    int y = pb_matmul(&b, a, cg_const(&b, 2, wd, 1.0 / sqrt((double)K)));
    if (epilogue == 1)
        y = pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, y, cg_const(&b, 1, bd, 1.0)));
    else if (epilogue == 2)
        y = cg_gelu(&b, pb_ew2(&b, EW_ADD, y, cg_const(&b, 1, bd, 1.0)));
    gb_output(pg, y);
}
static inline void cg_matmul_square(PrimGraph *pg) {
    cg_matmul(pg, "matmul_square", 64, 64, 64, 0);
}
static inline void cg_matmul_odd(PrimGraph *pg) {
    cg_matmul(pg, "matmul_odd", 37, 53, 29, 1);
}
static inline void cg_matmul_skinny(PrimGraph *pg) {
    cg_matmul(pg, "matmul_skinny", 1, 96, 131, 2);
}
static inline void cg_matmul_tall(PrimGraph *pg) {
    cg_matmul(pg, "matmul_tall", 515, 17, 9, 1);
}

static inline void cg_matmul_batched(PrimGraph *pg) { // [3, 21, 19] x [3, 19, 23], both inputs
    const int64_t ad[] = {3, 21, 19}, cd[] = {3, 19, 23};
    PB b = {pg, "matmul_batched"};
    int a = gb_input(pg, "a", 3, ad), c = gb_input(pg, "c", 3, cd);
    gb_output(pg, pb_matmul(&b, a, c));
}

// ---- convolutions ----

typedef struct CgConv {
    const char *name;
    int S;                   // spatial rank
    int64_t N, C, OC, group; // batch, channels, output channels, groups
    int64_t in[3], k[3], st[3], pad[3], dil[3];
    bool transpose, bias_relu;
} CgConv;

static inline void cg_conv(PrimGraph *pg, const CgConv *cc) {
    int64_t xd[5] = {cc->N, cc->C}, wd[5], od[5] = {cc->N, cc->OC}, bd[5] = {1, cc->OC, 1, 1, 1};
    if (cc->transpose) {
        wd[0] = cc->C;
        wd[1] = cc->OC / cc->group;
    } else {
        wd[0] = cc->OC;
        wd[1] = cc->C / cc->group;
    }
    LinearParams lp = {.op = cc->transpose ? LIN_CONV_TRANSPOSE : LIN_CONV,
                       .n_spatial = cc->S,
                       .group = (int)cc->group};
    int64_t fan = wd[1];
    for (int d = 0; d < cc->S; d++) {
        int64_t dil = cc->dil[d] ? cc->dil[d] : 1, st = cc->st[d] ? cc->st[d] : 1;
        xd[2 + d] = cc->in[d];
        wd[2 + d] = cc->k[d];
        fan *= cc->k[d];
        lp.stride[d] = st;
        lp.dilation[d] = dil;
        lp.pad_begin[d] = lp.pad_end[d] = cc->pad[d];
        od[2 + d] = cc->transpose
                        ? (cc->in[d] - 1) * st - 2 * cc->pad[d] + dil * (cc->k[d] - 1) + 1
                        : (cc->in[d] + 2 * cc->pad[d] - dil * (cc->k[d] - 1) - 1) / st + 1;
    }
    PB b = {pg, cc->name};
    int x = gb_input(pg, "x", 2 + cc->S, xd);
    int y = pb_conv(&b, &lp, x, cg_const(&b, 2 + cc->S, wd, 1.0 / sqrt((double)fan)), od);
    if (cc->bias_relu)
        y = pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, y, cg_const(&b, 2 + cc->S, bd, 1.0)));
    gb_output(pg, y);
}

static const CgConv cg_convs[] = {
    {"conv2d_3x3", 2, 1, 8, 16, 1, {13, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true},
    {"conv2d_1x1", 2, 2, 24, 12, 1, {7, 9}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false, false},
    {"conv2d_stride2", 2, 1, 6, 10, 1, {15, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true},
    {"conv2d_dilated", 2, 1, 4, 6, 1, {12, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, false, false},
    {"conv2d_grouped", 2, 1, 12, 18, 3, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true},
    {"conv2d_depthwise", 2, 1, 16, 16, 16, {17, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true},
    {"conv1d", 1, 2, 10, 14, 1, {50}, {5}, {1}, {2}, {1}, false, true},
    {"conv1d_stride2", 1, 1, 8, 8, 1, {31}, {3}, {2}, {1}, {1}, false, false},
    {"conv3d", 3, 1, 3, 5, 1, {6, 7, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, false, true},
    {"conv2d_transpose", 2, 1, 6, 4, 1, {7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false},
};

// ---- multi-layer kernels ----

static inline void cg_mlp_chain(PrimGraph *pg) { // two 48-wide layers: relu, then gelu
    const int64_t xd[] = {77, 48}, wd[] = {48, 48}, bd[] = {48};
    PB b = {pg, "mlp_chain"};
    int x = gb_input(pg, "x", 2, xd);
    int h = pb_ew1(
        &b, EW_RELU,
        pb_ew2(&b, EW_ADD, pb_matmul(&b, x, cg_const(&b, 2, wd, 0.15)), cg_const(&b, 1, bd, 1.0)));
    int y = cg_gelu(&b, pb_ew2(&b, EW_ADD, pb_matmul(&b, h, cg_const(&b, 2, wd, 0.15)),
                               cg_const(&b, 1, bd, 1.0)));
    gb_output(pg, y);
}

static inline void cg_attention(PrimGraph *pg) { // softmax(q k^T / sqrt(d)) v, 2 heads, 40 tokens
    const int64_t qd[] = {2, 40, 16}, kd[] = {2, 16, 40};
    PB b = {pg, "attention"};
    int q = gb_input(pg, "q", 3, qd), kt = gb_input(pg, "kt", 3, kd), v = gb_input(pg, "v", 3, qd);
    int s = pb_ew2i(&b, EW_MUL, pb_matmul(&b, q, kt), 0.25);
    int m = pb_reduce(&b, RED_MAX, s, 1u << 2, true, false);
    int ex = pb_ew1(&b, EW_EXP, pb_ew2(&b, EW_SUB, s, m));
    int p = pb_ew2(&b, EW_DIV, ex, pb_reduce(&b, RED_SUM, ex, 1u << 2, true, false));
    gb_output(pg, pb_matmul(&b, p, v));
}

// ---- operators without a fission rule: one OPAQUE primitive and its ONNX node ----

static inline int cg_graph_tensor(Graph *g, const char *name, DType dt, int rank,
                                  const int64_t *dims, const void *data) {
    Tensor *t = graph_add_tensor(g, name);
    tensor_set_shape(t, dt, rank, dims);
    t->kind = data ? TK_CONST : TK_VALUE;
    if (data) {
        size_t bytes = tensor_nbytes(t);
        t->data = xmalloc(bytes);
        memcpy(t->data, data, bytes);
    }
    return t->id;
}

// TopK, k = 7 of each row of [13, 61], values and indices (largest, sorted).
static inline void cg_topk_node(Graph *g, Node *n) {
    const int64_t xd[] = {13, 61}, kd[] = {1}, od[] = {13, 7}, k = 7;
    n->in[0] = cg_graph_tensor(g, "x", DT_FLOAT, 2, xd, NULL);
    n->in[1] = cg_graph_tensor(g, "k", DT_INT64, 1, kd, &k);
    n->out[0] = cg_graph_tensor(g, "values", DT_FLOAT, 2, od, NULL);
    n->out[1] = cg_graph_tensor(g, "indices", DT_INT64, 2, od, NULL);
    n->n_attr = 2;
    n->attr[0] = (Attr){.name = "axis", .type = AT_INT, .i = -1};
    n->attr[1] = (Attr){.name = "largest", .type = AT_INT, .i = 1};
}

// CumSum down the columns of [29, 37] (axis 0, a constant), reversed.
static inline void cg_cumsum_node(Graph *g, Node *n) {
    const int64_t xd[] = {29, 37}, axis = 0;
    n->in[0] = cg_graph_tensor(g, "x", DT_FLOAT, 2, xd, NULL);
    n->in[1] = cg_graph_tensor(g, "axis", DT_INT64, 0, xd, &axis);
    n->out[0] = cg_graph_tensor(g, "y", DT_FLOAT, 2, xd, NULL);
    n->n_attr = 1;
    n->attr[0] = (Attr){.name = "reverse", .type = AT_INT, .i = 1};
}

// The OPAQUE primitive of an operator node over pg, which the node's graph becomes the source of:
// a graph input for its data, its constant operand, its outputs (output 0 the graph's). The
// nodes live in one source graph for the process, made once (the reference op reads the constant
// through it; still reachable at exit, so no leak is reported).
static inline void cg_opaque(PrimGraph *pg, const char *op, int n_out,
                             void (*make)(Graph *g, Node *n)) {
    static Graph *src;
    static Node *nodes[4];
    static const char *ops[4];
    if (!src) {
        src = graph_create("canonical operators");
        src->opset = 17;
    }
    int w = 0;
    while (ops[w] && strcmp(ops[w], op) != 0)
        w++;
    if (!ops[w]) {
        ops[w] = op;
        nodes[w] = graph_add_node(src, op, "", op, 2, n_out, 3);
        make(src, nodes[w]);
    }
    const Node *n = nodes[w];
    pg->src = src;
    const Tensor *x = src->tensors[n->in[0]], *c = src->tensors[n->in[1]];
    Prim *p = pg_add_prim(pg, PRIM_OPAQUE, n->n_in, n->n_out, n->name);
    p->node = n;
    p->in[0] = gb_input(pg, "x", x->rank, x->dims);
    p->in[1] = pg_add_const(pg, c->name, c->dtype, c->rank, c->dims, c->data, false)->id;
    for (int j = 0; j < n->n_out; j++) {
        const Tensor *o = src->tensors[n->out[j]];
        Tensor *t = pg_add_tensor(pg, o->name, o->dtype, o->rank, o->dims);
        t->producer = pg->n_prims - 1;
        p->out[j] = t->id;
    }
    gb_output(pg, p->out[0]);
}

static inline void cg_topk(PrimGraph *pg) {
    cg_opaque(pg, "TopK", 2, cg_topk_node);
}

static inline void cg_cumsum(PrimGraph *pg) {
    cg_opaque(pg, "CumSum", 1, cg_cumsum_node);
}

typedef struct CanonicalGraph {
    const char *name;
    void (*build)(PrimGraph *pg);
    const CgConv *conv; // convolutions: built by cg_conv from this instead
} CanonicalGraph;

static const CanonicalGraph canonical_graphs[] = {
    {"ew_chain", cg_ew_chain, NULL},
    {"ew_broadcast", cg_ew_broadcast, NULL},
    {"transpose", cg_transpose, NULL},
    {"reduce_inner", cg_reduce_inner, NULL},
    {"reduce_outer", cg_reduce_outer, NULL},
    {"reduce_spatial", cg_reduce_spatial, NULL},
    {"softmax", cg_softmax, NULL},
    {"layernorm", cg_layernorm, NULL},
    {"matmul_square", cg_matmul_square, NULL},
    {"matmul_odd", cg_matmul_odd, NULL},
    {"matmul_skinny", cg_matmul_skinny, NULL},
    {"matmul_tall", cg_matmul_tall, NULL},
    {"matmul_batched", cg_matmul_batched, NULL},
    {"conv2d_3x3", NULL, &cg_convs[0]},
    {"conv2d_1x1", NULL, &cg_convs[1]},
    {"conv2d_stride2", NULL, &cg_convs[2]},
    {"conv2d_dilated", NULL, &cg_convs[3]},
    {"conv2d_grouped", NULL, &cg_convs[4]},
    {"conv2d_depthwise", NULL, &cg_convs[5]},
    {"conv1d", NULL, &cg_convs[6]},
    {"conv1d_stride2", NULL, &cg_convs[7]},
    {"conv3d", NULL, &cg_convs[8]},
    {"conv2d_transpose", NULL, &cg_convs[9]},
    {"mlp_chain", cg_mlp_chain, NULL},
    {"attention", cg_attention, NULL},
    {"topk", cg_topk, NULL},
    {"cumsum", cg_cumsum, NULL},
};

// Builds canonical graph g; NULL (and e set) when it does not verify (a bug in the builder).
static inline PrimGraph *canonical_graph_build(const CanonicalGraph *g, Err *e) {
    PrimGraph *pg = prim_graph_create(NULL);
    if (g->conv)
        cg_conv(pg, g->conv);
    else
        g->build(pg);
    if (prim_graph_verify(pg, e) != ST_OK) {
        prim_graph_free(pg);
        return NULL;
    }
    return pg;
}

#endif
