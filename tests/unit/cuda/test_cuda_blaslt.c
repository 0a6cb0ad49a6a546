// cuBLASLt library candidates of the CUDA target (src/backend/cuda/cublaslt.h) and their way through
// the lab, the CUDA module blob and the session.
// Everywhere: the loader (the version it reports is the one an independent dlopen of the same file
// reports), the analysis of primitive graphs built here (plain, transposed A/B through a LAYOUT,
// batched, broadcast batch, folded batch, bias, bias+ReLU, ReLU, alpha, bias+GELU (the tanh form
// under fp32; the erf form under tf32/fp16/bf16 and half storage), and refusals: a bias along
// M, tanh, ReLU before the bias, a partly broadcast batch, the erf GELU under fp32, twice a GELU)
// against call fields worked out by hand,
// descriptor creation, and the blob (library entries round trip, every truncation and single-byte
// corruption refused, an impossible call refused with a right checksum, a format-1 blob still
// read, an unknown format refused).
// On a GPU: for every accepted shape class (and M = 1, 127x129x65) every heuristic algorithm and
// the emitter's best configs run through cuda_lab_run against the primitive interpreter (1e-4;
// TF32 once at 5e-3); a plan of one library kernel runs through cuda_session (graph replay,
// profiled, after a blob round trip) against prim_interp_run, and a call chosen with another
// library version is refused. Then our best generated kernel and cuBLASLt's best, in µs, for
// 128x768x768, 128x3072x768, 128x768x3072, 512x768x768 and 4096^3 (MxNxK), fp32 and tf32, and
// the first four with float16 storage.
// Half storage (graphs whose tensors are float16 / bfloat16, built as the storage pass leaves
// them: float32 arithmetic ending in a CAST to half, or half arithmetic; a float32 model output
// after the CAST): the analysis everywhere (A/B and C/D types packed in compute, 2-byte
// alignment of odd half rows, a float32 D; refused: a half bias with a float32 D, a residual),
// half descriptors where the library loads, a half call through the blob; on a GPU every
// heuristic algorithm against the interpreter at the lab's fp16 / bf16 tolerance, and a half
// plan and a float32-output plan through the session.
// Usage: unit_cuda_blaslt [seed]; ORCH_REQUIRE_GPU=1 turns the GPU skips into failures.
#define _GNU_SOURCE
#include "candidates/candidates.h"
#include "../gpu_check.h"
#include "backend/kernel_lab.h"
#include "prim/prim_build.h"
#include "orchestrate/orchestrate.h"
#include "plan/plan.h"
#include "interp/prim_interp.h"
#include "backend/cuda/session_cuda.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_lab.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/nvrtc.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state;
static const CudaApi *g_api; // NULL without a GPU
static Err g_load_err;
static CudaHw g_hw;
// The emitters' options under float32 (the default).
static const TargetOptions g_fp32 = {.precision = PREC_FP32};

static double rnd(void) { // uniform in [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0;
}

// Values in ±[0.1, 1): never zero; about half negative, so a ReLU matters. In t's type.
static void fill(const Tensor *t, void *p) {
    for (int64_t i = 0; i < tensor_numel(t); i++)
        elem_set_f64(t->dtype, p, i, (0.1 + 0.9 * rnd()) * (rnd() < 0.5 ? -1 : 1));
}

// ---- graphs: one matmul and its epilogue ----

enum {
    E_NONE,
    E_BIAS,
    E_BIAS_RELU,
    E_RELU,
    E_ALPHA_BIAS,
    E_MAX0,
    E_BIAS_M,
    E_TANH,
    E_RELU_BIAS,
    E_RESIDUAL,      // + an input of the output's shape (cuBLASLt's C, beta = 1)
    E_BIAS_RES_RELU, // relu((y + bias) + residual)
    E_RES_BIAS,      // (residual + y) + bias
    E_RELU_RES,      // relu(y) + residual: refused (the ReLU comes after C)
    E_RES_ALPHA,     // (y + residual) * 0.5: refused (alpha would scale C too)
    E_VIEWS, // A a reshape of a flat input, y reshaped to [1, M, N] + a residual of that shape
    E_VIEW_BIAS_BAD, // y reshaped to [M*N / 8, 8] + a bias of 8: refused (no bias along N)
    E_VIEW_FOLD,     // A a [1, M, K] input viewed as [M, 1, K] (M batches of one row; PyTorch's
                 // batch_first transpose before nn.MultiheadAttention), + a bias: folded to M rows
    E_BIAS_GELU_TANH, // gelu_tanh(y + bias), one merged program (x^3 as x * x * x)
    E_BIAS_GELU,  // gelu_erf(y + bias) as PyTorch exports it: (x * (1 + erf(x / sqrt 2))) * 0.5;
                  // float32 operands: only under a reduced precision
    E_BIAS_GELU2, // x * (1 + erf(x / sqrt 2)): twice GELU, refused
};

// Half storage (Case.store flags, with Case.dt a half type).
enum {
    S_F32_OUT = 1, // the graph output is float32: a CAST after the LINEAR, or the epilogue's
                   // float32 arithmetic stored as float32 (as the storage pass leaves them)
    S_HALF = 2,    // the epilogue computes in half (a half model's own fission), not in
                   // float32 ending in a CAST to half (the storage pass's form)
};

typedef struct Case {
    const char *name;
    int nba, nbb; // batch dims of A and B
    int64_t ba[2], bb[2];
    int64_t M, N, K;
    bool ta, tb; // the operand is a graph input stored transposed, swapped by a LAYOUT
    int epi;
} Case;

// A case under half storage.
typedef struct HalfCase {
    Case k;
    DType dt;  // every tensor's type: DT_FLOAT16 or DT_BFLOAT16
    int store; // S_* flags
} HalfCase;

typedef struct MG {
    PrimGraph *pg;
    DType dt;  // every tensor's type but a float32 output's
    int store; // S_* flags
    PB b;
    void *in[4];
    int n_in;
    int lin, out;
    CandidateSet *cs;
    int cand; // the candidate of every primitive
} MG;

static int add_input(MG *g, DType dt, int rank, const int64_t *dims) {
    PrimGraph *pg = g->pg;
    char name[32];
    snprintf(name, sizeof name, "x%d", pg->n_inputs);
    Tensor *t = pg_add_tensor(pg, name, dt, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    g->in[pg->n_inputs] = xmalloc(tensor_nbytes(t) + 1);
    fill(t, g->in[pg->n_inputs]);
    pg->inputs[pg->n_inputs++] = t->id;
    g->n_in = pg->n_inputs;
    return t->id;
}

static int operand(MG *g, DType dt, int nb, const int64_t *bd, int64_t r, int64_t c, bool trans) {
    int64_t d[4];
    for (int i = 0; i < nb; i++)
        d[i] = bd[i];
    d[nb] = trans ? c : r;
    d[nb + 1] = trans ? r : c;
    int t = add_input(g, dt, nb + 2, d);
    if (!trans)
        return t;
    int perm[4];
    for (int i = 0; i < nb + 2; i++)
        perm[i] = i;
    perm[nb] = nb + 1;
    perm[nb + 1] = nb;
    return pb_transpose(&g->b, t, perm);
}

// The storage pass's form of a half graph's elementwise primitives: float32 arithmetic, then a
// CAST to the half output, or the float32 value stored as the float32 graph output `f32_out`.
static void float_arith(PrimGraph *pg, int f32_out) {
    for (int i = 0; i < pg->n_prims; i++) {
        Prim *p = pg->prims[i];
        Tensor *o = pg->tensors[p->out[0]];
        if (p->kind != PRIM_ELEMWISE || (o->dtype != DT_FLOAT16 && o->dtype != DT_BFLOAT16))
            continue;
        EwInstr *code = arena_alloc(pg->arena, sizeof(EwInstr) * (size_t)(p->ew.n + 1));
        memcpy(code, p->ew.code, sizeof(EwInstr) * (size_t)p->ew.n);
        for (int j = 0; j < p->ew.n; j++)
            if (code[j].dtype == o->dtype)
                code[j].dtype = DT_FLOAT;
        if (p->out[0] == f32_out) {
            o->dtype = DT_FLOAT;
        } else {
            code[p->ew.n] = (EwInstr){.op = EW_CAST, .dtype = o->dtype};
            code[p->ew.n].arg[0] = (EwArg){EWS_INSTR, p->ew.n - 1, 0};
            p->ew.n++;
        }
        p->ew.code = code;
    }
}

// One ELEMWISE primitive as the clean-up merges a bias and a GELU: x = y + bias, then GELU of x
// (form E_BIAS_GELU_TANH, E_BIAS_GELU or E_BIAS_GELU2), every instruction in type dt.
static int bias_gelu(MG *g, int y, int bias, int form, DType dt) {
    EwInstr c[12];
    memset(c, 0, sizeof c);
    int n = 0;
#define I(o, a0, a1) (c[n].op = (o), c[n].dtype = dt, c[n].arg[0] = a0, c[n].arg[1] = a1, n++)
#define IN(i) ((EwArg){EWS_INPUT, (i), 0})
#define R(i) ((EwArg){EWS_INSTR, (i), 0})
#define K(v) ((EwArg){EWS_IMM, 0, (v)})
    I(EW_ADD, IN(0), IN(1)); // %0 = x
    if (form == E_BIAS_GELU_TANH) {
        I(EW_MUL, R(0), R(0));            // %1 = x^2
        I(EW_MUL, R(1), R(0));            // %2 = x^3
        I(EW_MUL, R(2), K(0.044715));     // %3
        I(EW_ADD, R(0), R(3));            // %4
        I(EW_MUL, R(4), K(0.7978845608)); // %5
        I(EW_TANH, R(5), K(0));           // %6
        I(EW_ADD, R(6), K(1));            // %7
        I(EW_MUL, R(0), R(7));            // %8
        I(EW_MUL, R(8), K(0.5));          // %9
    } else {
        I(EW_DIV, R(0), K(1.41421356)); // %1
        I(EW_ERF, R(1), K(0));          // %2
        I(EW_ADD, R(2), K(1));          // %3
        I(EW_MUL, R(0), R(3));          // %4
        if (form == E_BIAS_GELU)
            I(EW_MUL, R(4), K(0.5)); // %5
    }
#undef I
#undef IN
#undef R
#undef K
    EwProgram prog = {n, c};
    const int ins[2] = {y, bias};
    return pb_ew_program(&g->b, 2, ins, &prog);
}

static bool mg_build_as(MG *g, const Case *k, DType dt, int store) {
    memset(g, 0, sizeof *g);
    g->pg = prim_graph_create(graph_create("test"));
    g->b = (PB){g->pg, "node"};
    g->b.origin = "matmul_node";
    g->dt = dt;
    g->store = store;
    int a;
    if (k->epi == E_VIEWS) { // PyTorch's views: no element moves
        int64_t flat[1] = {k->M * k->K}, mk[2] = {k->M, k->K};
        a = pb_reshape(&g->b, add_input(g, dt, 1, flat), 2, mk);
    } else if (k->epi == E_VIEW_FOLD) {
        int64_t in[3] = {1, k->M, k->K}, v[3] = {k->M, 1, k->K};
        a = pb_reshape(&g->b, add_input(g, dt, 3, in), 3, v);
    } else {
        a = operand(g, dt, k->nba, k->ba, k->M, k->K, k->ta);
    }
    int b = operand(g, dt, k->nbb, k->bb, k->K, k->N, k->tb);
    int y = g->lin = pb_matmul(&g->b, a, b);
    g->b.origin = "epilogue_node";
    int64_t nd[1] = {k->N}, md[2] = {k->M, 1};
    // A residual has the product's whole shape, batch dims included.
    const Tensor *P = g->pg->tensors[y];
    int orank = P->rank;
    int64_t od[ORCH_MAX_RANK];
    memcpy(od, P->dims, sizeof(int64_t) * (size_t)orank);
    switch (k->epi) {
    case E_BIAS:
    case E_VIEW_FOLD: y = pb_ew2(&g->b, EW_ADD, y, add_input(g, dt, 1, nd)); break;
    case E_BIAS_RELU:
        y = pb_ew1(&g->b, EW_RELU, pb_ew2(&g->b, EW_ADD, add_input(g, dt, 1, nd), y));
        break;
    case E_RELU: y = pb_ew1(&g->b, EW_RELU, y); break;
    case E_ALPHA_BIAS:
        y = pb_ew2(&g->b, EW_ADD, pb_ew2i(&g->b, EW_MUL, y, 0.5), add_input(g, dt, 1, nd));
        break;
    case E_MAX0: y = pb_ew2i(&g->b, EW_MAX, y, 0.0); break;
    case E_BIAS_M: y = pb_ew2(&g->b, EW_ADD, y, add_input(g, dt, 2, md)); break;
    case E_TANH: y = pb_ew1(&g->b, EW_TANH, y); break;
    case E_RELU_BIAS:
        y = pb_ew2(&g->b, EW_ADD, pb_ew1(&g->b, EW_RELU, y), add_input(g, dt, 1, nd));
        break;
    case E_RESIDUAL: y = pb_ew2(&g->b, EW_ADD, y, add_input(g, dt, orank, od)); break;
    case E_BIAS_RES_RELU: {
        int bias = add_input(g, dt, 1, nd), res = add_input(g, dt, orank, od);
        y = pb_ew1(&g->b, EW_RELU, pb_ew2(&g->b, EW_ADD, pb_ew2(&g->b, EW_ADD, y, bias), res));
        break;
    }
    case E_RES_BIAS: {
        int res = add_input(g, dt, orank, od), bias = add_input(g, dt, 1, nd);
        y = pb_ew2(&g->b, EW_ADD, pb_ew2(&g->b, EW_ADD, res, y), bias);
        break;
    }
    case E_RELU_RES:
        y = pb_ew2(&g->b, EW_ADD, pb_ew1(&g->b, EW_RELU, y), add_input(g, dt, orank, od));
        break;
    case E_VIEWS: {
        int64_t v[3] = {1, k->M, k->N};
        int r = pb_reshape(&g->b, y, 3, v);
        y = pb_ew2(&g->b, EW_ADD, r, add_input(g, dt, 3, v));
        break;
    }
    case E_VIEW_BIAS_BAD: {
        int64_t v[2] = {k->M * k->N / 8, 8}, b8[1] = {8};
        int r = pb_reshape(&g->b, y, 2, v);
        y = pb_ew2(&g->b, EW_ADD, r, add_input(g, dt, 1, b8));
        break;
    }
    case E_RES_ALPHA:
        y = pb_ew2i(&g->b, EW_MUL, pb_ew2(&g->b, EW_ADD, y, add_input(g, dt, orank, od)), 0.5);
        break;
    case E_BIAS_GELU_TANH:
    case E_BIAS_GELU:
    case E_BIAS_GELU2: y = bias_gelu(g, y, add_input(g, dt, 1, nd), k->epi, dt); break;
    default: break;
    }
    if ((store & S_F32_OUT) && y == g->lin)
        y = pb_cast(&g->b, y, DT_FLOAT);
    if (dt != DT_FLOAT && !(store & S_HALF))
        float_arith(g->pg, store & S_F32_OUT ? y : -1);
    g->out = y;
    g->pg->outputs = xmalloc(sizeof(int));
    g->pg->outputs[g->pg->n_outputs++] = y;
    Err e = {0};
    int rc = prim_graph_verify(g->pg, &e);
    CHECK_MSG(rc == ST_OK, "%s: prim_graph_verify: %s", k->name, e.msg);
    CandRules rules = cand_rules_default();
    if (rc == ST_OK)
        rc = cand_enumerate(g->pg, &rules, 0, &g->cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: cand_enumerate: %s", k->name, e.msg);
    g->cand = -1;
    for (int i = 0; rc == ST_OK && i < g->cs->n; i++)
        if (g->cs->c[i].output == y && g->cs->c[i].n_prims == g->pg->n_prims)
            g->cand = i;
    CHECK_MSG(rc != ST_OK || g->cand >= 0, "%s: no candidate of all %d primitives", k->name,
              g->pg->n_prims);
    return rc == ST_OK && g->cand >= 0;
}

static bool mg_build(MG *g, const Case *k) {
    return mg_build_as(g, k, DT_FLOAT, 0);
}

static void mg_free(MG *g) {
    for (int i = 0; i < g->n_in; i++)
        free(g->in[i]);
    cand_set_free(g->cs);
    if (g->pg) {
        const Graph *src = g->pg->src;
        prim_graph_free(g->pg);
        graph_free((Graph *)src);
    }
}

// Position of graph input i among the candidate's inputs.
static int pos_of(const MG *g, int i) {
    const Candidate *c = &g->cs->c[g->cand];
    for (int j = 0; j < c->n_inputs; j++)
        if (c->inputs[j] == g->pg->inputs[i])
            return j;
    return -2;
}

// The accepted shape classes (the GPU cases run all of them).
static const Case ok_cases[] = {
    {"plain", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_NONE},
    {"trans_b", 0, 0, {0}, {0}, 64, 96, 80, false, true, E_NONE},
    {"trans_a", 0, 0, {0}, {0}, 64, 96, 80, true, false, E_NONE},
    {"trans_ab_bias", 0, 0, {0}, {0}, 48, 40, 72, true, true, E_BIAS},
    {"batched", 2, 2, {2, 3}, {2, 3}, 32, 48, 40, false, false, E_NONE},
    {"batched_trans_b", 1, 1, {4}, {4}, 32, 48, 40, false, true, E_RELU},
    {"bcast_a", 0, 1, {0}, {5}, 24, 40, 56, false, false, E_NONE},
    {"folded", 1, 0, {4}, {0}, 24, 40, 56, false, false, E_BIAS},
    {"bias", 0, 0, {0}, {0}, 128, 256, 64, false, false, E_BIAS},
    {"bias_relu", 0, 0, {0}, {0}, 128, 256, 64, false, false, E_BIAS_RELU},
    {"relu", 0, 0, {0}, {0}, 100, 60, 70, false, false, E_RELU},
    {"max0", 0, 0, {0}, {0}, 100, 60, 70, false, false, E_MAX0},
    {"alpha_bias", 0, 0, {0}, {0}, 96, 64, 32, false, false, E_ALPHA_BIAS},
    {"m1_bias", 0, 0, {0}, {0}, 1, 512, 256, false, false, E_BIAS},
    {"odd", 0, 0, {0}, {0}, 127, 129, 65, false, false, E_BIAS_RELU},
    {"odd_trans", 0, 0, {0}, {0}, 127, 129, 65, true, true, E_NONE},
    {"residual", 0, 0, {0}, {0}, 197, 768, 96, false, false, E_RESIDUAL},
    {"bias_res_relu", 0, 0, {0}, {0}, 127, 129, 65, false, true, E_BIAS_RES_RELU},
    {"batched_res_bias", 1, 1, {3}, {3}, 33, 40, 24, false, false, E_RES_BIAS},
    {"views_res", 0, 0, {0}, {0}, 197, 96, 64, false, false, E_VIEWS},
    {"view_folded", 0, 0, {0}, {0}, 197, 96, 64, false, false, E_VIEW_FOLD},
    {"bias_gelu_tanh", 0, 0, {0}, {0}, 96, 128, 64, false, false, E_BIAS_GELU_TANH},
};

static const Case bad_cases[] = {
    {"bias_along_m", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_BIAS_M},
    {"tanh", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_TANH},
    {"relu_then_bias", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_RELU_BIAS},
    {"partial_bcast", 2, 2, {1, 3}, {2, 3}, 16, 24, 8, false, false, E_NONE},
    {"relu_then_residual", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_RELU_RES},
    {"residual_then_alpha", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_RES_ALPHA},
    {"view_bias_not_n", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_VIEW_BIAS_BAD},
    {"gelu_erf_fp32", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_BIAS_GELU},
    {"twice_gelu", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_BIAS_GELU2},
};

#define F16 DT_FLOAT16
#define BF16 DT_BFLOAT16

// Half storage: float16 and bfloat16, the shape classes above, a float32 output.
static const HalfCase half_cases[] = {
    {{"h_plain", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_NONE}, F16, 0},
    {{"h_trans_b", 0, 0, {0}, {0}, 64, 96, 80, false, true, E_NONE}, BF16, 0},
    {{"h_trans_ab_bias", 0, 0, {0}, {0}, 48, 40, 72, true, true, E_BIAS}, F16, 0},
    {{"h_batched_relu", 2, 2, {2, 3}, {2, 3}, 32, 48, 40, false, false, E_RELU}, BF16, 0},
    {{"h_bcast_a", 0, 1, {0}, {5}, 24, 40, 56, false, false, E_NONE}, F16, 0},
    {{"h_folded_bias", 1, 0, {4}, {0}, 24, 40, 56, false, false, E_BIAS}, BF16, 0},
    {{"h_bias_relu", 0, 0, {0}, {0}, 128, 256, 64, false, false, E_BIAS_RELU}, F16, 0},
    {{"h_bias_relu_bf16", 0, 0, {0}, {0}, 128, 256, 64, false, false, E_BIAS_RELU}, BF16, 0},
    {{"h_alpha_bias", 0, 0, {0}, {0}, 96, 64, 32, false, false, E_ALPHA_BIAS}, F16, S_HALF},
    {{"h_max0_half", 0, 0, {0}, {0}, 100, 60, 70, false, false, E_MAX0}, BF16, S_HALF},
    {{"h_m1_bias", 0, 0, {0}, {0}, 1, 512, 256, false, false, E_BIAS}, BF16, 0},
    {{"h_odd_bias_relu", 0, 0, {0}, {0}, 127, 129, 65, false, false, E_BIAS_RELU}, F16, 0},
    {{"h_odd_trans", 0, 0, {0}, {0}, 127, 129, 65, true, true, E_NONE}, BF16, 0},
    {{"h_out_f32", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_NONE}, F16, S_F32_OUT},
    {{"h_relu_out_f32", 2, 2, {2, 3}, {2, 3}, 32, 48, 40, false, true, E_RELU}, BF16, S_F32_OUT},
    {{"h_residual", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_RESIDUAL}, F16, 0},
    {{"h_bias_res_relu", 0, 0, {0}, {0}, 127, 129, 65, false, false, E_BIAS_RES_RELU}, BF16, 0},
    {{"h_bias_gelu", 0, 0, {0}, {0}, 128, 256, 64, false, false, E_BIAS_GELU}, F16, 0},
    {{"h_bias_gelu_half", 0, 0, {0}, {0}, 96, 128, 64, false, false, E_BIAS_GELU}, BF16, S_HALF},
};

// Refused under half storage: a half bias next to a float32 D (cuBLASLt's bias has D's type),
// a half residual next to one (C has D's type); tanh.
static const HalfCase half_bad_cases[] = {
    {{"h_bias_out_f32", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_BIAS}, F16, S_F32_OUT},
    {{"h_residual_out_f32", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_RESIDUAL}, F16, S_F32_OUT},
    {{"h_tanh", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_TANH}, BF16, 0},
    {{"h_twice_gelu", 0, 0, {0}, {0}, 64, 96, 80, false, false, E_BIAS_GELU2}, F16, 0},
};

// cudaDataType_t of a tensor type.
static int lt_type_of(DType t) {
    return t == DT_FLOAT16 ? BLASLT_R_16F : t == DT_BFLOAT16 ? BLASLT_R_16BF : BLASLT_R_32F;
}

// The call worked out from the case: C^T = B^T A^T in column-major terms.
static BlasLtCall expected_call(const MG *g, const Case *k) {
    BlasLtCall c;
    memset(&c, 0, sizeof c);
    int64_t batch = 1;
    for (int i = 0; i < ORCH_MAX(k->nba, k->nbb); i++)
        batch *= ORCH_MAX(i < k->nba ? k->ba[i] : 1, i < k->nbb ? k->bb[i] : 1);
    bool folded = k->nba > 0 && k->nbb == 0 && !k->ta;
    int64_t M = folded ? k->M * batch : k->M;
    c.m = (int32_t)k->N;
    c.n = (int32_t)M;
    c.k = (int32_t)k->K;
    c.trans_a = k->tb;
    c.trans_b = k->ta;
    c.lda = k->tb ? k->K : k->N;
    c.ldb = k->ta ? M : k->K;
    c.ldc = k->N;
    c.batch = folded ? 1 : (int32_t)batch;
    if (c.batch > 1) {
        c.stride_a = k->nbb ? k->K * k->N : 0;
        c.stride_b = k->nba ? k->M * k->K : 0;
        c.stride_c = k->M * k->N;
    }
    c.epilogue =
        k->epi == E_BIAS || k->epi == E_ALPHA_BIAS || k->epi == E_RES_BIAS || k->epi == E_VIEW_FOLD
            ? BLASLT_EPI_BIAS
        : k->epi == E_BIAS_RELU || k->epi == E_BIAS_RES_RELU  ? BLASLT_EPI_RELU_BIAS
        : k->epi == E_RELU || k->epi == E_MAX0                ? BLASLT_EPI_RELU
        : k->epi == E_BIAS_GELU_TANH || k->epi == E_BIAS_GELU ? BLASLT_EPI_GELU_BIAS
                                                              : BLASLT_EPI_NONE;
    c.alpha = k->epi == E_ALPHA_BIAS ? 0.5f : 1.0f;
    c.in_b = pos_of(g, 0);
    c.in_a = pos_of(g, 1);
    // Graph inputs 2 and 3: the bias and the residual in the order the epilogue adds them.
    c.in_bias = g->n_in > 2 && k->epi != E_RESIDUAL && k->epi != E_VIEWS
                    ? pos_of(g, k->epi == E_RES_BIAS ? 3 : 2)
                    : -1;
    c.in_res = k->epi == E_RESIDUAL || k->epi == E_VIEWS ? pos_of(g, 2)
               : k->epi == E_RES_BIAS                    ? pos_of(g, 2)
               : k->epi == E_BIAS_RES_RELU               ? pos_of(g, 3)
                                                         : -1;
    c.compute = BLASLT_COMPUTE_32F;
    if (g->dt != DT_FLOAT)
        c.compute = BLASLT_COMPUTE(BLASLT_COMPUTE_32F, lt_type_of(g->dt),
                                   g->store & S_F32_OUT ? BLASLT_R_32F : lt_type_of(g->dt));
    return c;
}

static bool same_call(const BlasLtCall *x, const BlasLtCall *y, char *why, size_t n) {
    char a[512], b[512];
    blaslt_call_str(x, a, sizeof a);
    blaslt_call_str(y, b, sizeof b);
    bool same = x->m == y->m && x->n == y->n && x->k == y->k && x->trans_a == y->trans_a &&
                x->trans_b == y->trans_b && x->lda == y->lda && x->ldb == y->ldb &&
                x->ldc == y->ldc && x->batch == y->batch && x->stride_a == y->stride_a &&
                x->stride_b == y->stride_b && x->stride_c == y->stride_c &&
                x->epilogue == y->epilogue && x->alpha == y->alpha && x->in_a == y->in_a &&
                x->in_b == y->in_b && x->in_bias == y->in_bias && x->in_res == y->in_res &&
                x->compute == y->compute;
    if (!same)
        snprintf(why, n, "got      %s in=%d/%d/%d/%d\n  expected %s in=%d/%d/%d/%d", a, x->in_a,
                 x->in_b, x->in_bias, x->in_res, b, y->in_a, y->in_b, y->in_bias, y->in_res);
    return same;
}

// ---- cases that run everywhere ----

static void test_loader(void) {
    static const char *toolkit = "/usr/local/cuda-13.0/lib64/libcublasLt.so.13";
    if (!blaslt_available()) {
        void *h = dlopen(toolkit, RTLD_NOW | RTLD_LOCAL);
        CHECK_MSG(!h, "%s opens, but the loader found nothing: %s", toolkit,
                  blaslt_describe_load());
        if (h)
            dlclose(h);
        printf("  skip: no cuBLASLt (%s)\n", blaslt_describe_load());
        return;
    }
    const char *where = blaslt_describe_load();
    printf("  cuBLASLt %llu from %s\n", (unsigned long long)blaslt_version(), where);
    void *h = dlopen(where, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h, "%s does not open again: %s", where, dlerror());
    if (h) {
        size_t (*ver)(void) = (size_t(*)(void))dlsym(h, "cublasLtGetVersion");
        CHECK(ver && (uint64_t)ver() == blaslt_version() && blaslt_version() >= 110000);
        dlclose(h);
    }
}

// An accepted case's analysis against the call worked out by hand.
static void analyse_ok(const Case *k, DType dt, int store) {
    MG g;
    if (mg_build_as(&g, k, dt, store)) {
        BlasLtCall got, want = expected_call(&g, k);
        bool ok = blaslt_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got);
        CHECK_MSG(ok, "%s refused", k->name);
        char why[1200];
        blaslt_call_str(&got, why, sizeof why);
        printf("  %-16s %s\n", k->name, ok ? why : "refused");
        if (ok)
            CHECK_MSG(same_call(&got, &want, why, sizeof why), "%s:\n  %s", k->name, why);
        CHECK_MSG(got.version == blaslt_version(), "%s: version %llu", k->name,
                  (unsigned long long)got.version);
        // Alignment: what the 64-byte arena guarantees, less where ld or strides break it
        // (an element at least: 2 bytes for half rows of an odd length).
        uint32_t ab = BLASLT_TYPE_AB(got.compute) ? 2 : 4, cd = BLASLT_TYPE_CD(got.compute) ? 2 : 4;
        CHECK_MSG(got.align_a >= ab && got.align_a <= PLAN_ALIGN &&
                      (ab * got.lda) % got.align_a == 0 && got.align_b >= ab &&
                      (ab * got.ldb) % got.align_b == 0 && got.align_c >= cd &&
                      (cd * got.ldc) % got.align_c == 0,
                  "%s: alignment %u/%u/%u", k->name, got.align_a, got.align_b, got.align_c);
        if (ok && dt != DT_FLOAT && (k->N % 2 || k->K % 2))
            CHECK_MSG(got.align_a == 2 || got.align_b == 2, "%s: odd half rows %u-aligned", k->name,
                      ORCH_MIN(got.align_a, got.align_b));
        // The LINEAR alone reads a materialised transpose in place: no op T, no epilogue.
        for (int c = 0; c < g.cs->n; c++) {
            const Candidate *cc = &g.cs->c[c];
            BlasLtCall alone;
            if (cc->output == g.lin && cc->n_prims == 1)
                CHECK_MSG(blaslt_analyse(g.pg, cc, &g_fp32, &alone) && !alone.trans_a &&
                              !alone.trans_b && alone.epilogue == BLASLT_EPI_NONE &&
                              BLASLT_TYPE_CD(alone.compute) == BLASLT_TYPE_AB(alone.compute),
                          "%s: the LINEAR alone", k->name);
        }
        // Half operands take CUBLAS_COMPUTE_32F whatever the precision.
        for (int p = 0; ok && dt != DT_FLOAT && p < 3; p++) {
            const TargetOptions o = {.precision = p == 0   ? PREC_FP16
                                                  : p == 1 ? PREC_BF16
                                                           : PREC_FP32};
            BlasLtCall again;
            CHECK_MSG(blaslt_analyse(g.pg, &g.cs->c[g.cand], &o, &again) &&
                          again.compute == got.compute,
                      "%s: precision %d", k->name, p);
        }
    }
    mg_free(&g);
}

static void test_analysis(void) {
    for (size_t i = 0; i < ORCH_COUNT(ok_cases); i++)
        analyse_ok(&ok_cases[i], DT_FLOAT, 0);
    for (size_t i = 0; i < ORCH_COUNT(half_cases); i++)
        analyse_ok(&half_cases[i].k, half_cases[i].dt, half_cases[i].store);
    for (size_t i = 0; i < ORCH_COUNT(half_bad_cases); i++) {
        const HalfCase *h = &half_bad_cases[i];
        MG g;
        if (mg_build_as(&g, &h->k, h->dt, h->store)) {
            BlasLtCall got;
            CHECK_MSG(!blaslt_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got), "%s accepted",
                      h->k.name);
        }
        mg_free(&g);
    }
    for (size_t i = 0; i < ORCH_COUNT(bad_cases); i++) {
        MG g;
        if (mg_build(&g, &bad_cases[i])) {
            BlasLtCall got;
            CHECK_MSG(!blaslt_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got), "%s accepted",
                      bad_cases[i].name);
        }
        mg_free(&g);
    }
    // The erf GELU on float32 operands: cuBLASLt's tanh approximation (within 5e-4) only where
    // the precision is reduced anyway.
    static const Case erf_gelu = {"gelu_erf", 0,  0,     {0},   {0},        64,
                                  96,         80, false, false, E_BIAS_GELU};
    MG g;
    if (mg_build(&g, &erf_gelu)) {
        static const Precision reduced[] = {PREC_TF32, PREC_FP16, PREC_BF16};
        for (size_t i = 0; i < ORCH_COUNT(reduced); i++) {
            const TargetOptions o = {.precision = reduced[i]};
            BlasLtCall got, want = expected_call(&g, &erf_gelu);
            char why[1200];
            CHECK_MSG(blaslt_analyse(g.pg, &g.cs->c[g.cand], &o, &got) &&
                          (want.compute = got.compute, same_call(&got, &want, why, sizeof why)),
                      "erf GELU under precision %d", (int)reduced[i]);
        }
    }
    mg_free(&g);
    // The precision picks the compute type.
    if (mg_build(&g, &ok_cases[0])) {
        static const struct {
            Precision p;
            int ct;
        } pc[] = {{PREC_TF32, BLASLT_COMPUTE_32F_FAST_TF32},
                  {PREC_FP16, BLASLT_COMPUTE_32F_FAST_16F},
                  {PREC_BF16, BLASLT_COMPUTE_32F_FAST_16BF},
                  {PREC_FP32, BLASLT_COMPUTE_32F}};
        for (size_t i = 0; i < ORCH_COUNT(pc); i++) {
            const TargetOptions o = {.precision = pc[i].p};
            BlasLtCall got;
            CHECK(blaslt_analyse(g.pg, &g.cs->c[g.cand], &o, &got) && got.compute == pc[i].ct);
        }
    }
    mg_free(&g);
}

static BlasLtCall sample_call(void) {
    BlasLtCall c;
    memset(&c, 0, sizeof c);
    c.m = 96;
    c.n = 64;
    c.k = 80;
    c.trans_a = 1;
    c.lda = 80;
    c.ldb = 80;
    c.ldc = 96;
    c.batch = 3;
    c.stride_a = 96 * 80;
    c.stride_b = 0;
    c.stride_c = 96 * 64;
    c.epilogue = BLASLT_EPI_RELU_BIAS;
    c.compute = BLASLT_COMPUTE_32F;
    c.alpha = 0.25f;
    c.in_a = 1;
    c.in_b = 0;
    c.in_bias = 2;
    c.in_res = -1;
    c.align_a = c.align_b = c.align_c = 64;
    for (int i = 0; i < 8; i++)
        c.algo[i] = 0x0123456789abcdefull * (uint64_t)(i + 1);
    c.workspace = 4096;
    c.version = 130100;
    return c;
}

// The type combinations blaslt_call_valid takes: cuBLASLt's CUBLAS_COMPUTE_32F rows of half A/B.
static void test_half_types(void) {
    BlasLtCall c = sample_call();
    static const struct {
        int ct, ab, cd;
        bool ok;
    } v[] = {
        {BLASLT_COMPUTE_32F, BLASLT_R_16F, BLASLT_R_16F, true},
        {BLASLT_COMPUTE_32F, BLASLT_R_16F, BLASLT_R_32F, true},
        {BLASLT_COMPUTE_32F, BLASLT_R_16BF, BLASLT_R_16BF, true},
        {BLASLT_COMPUTE_32F, BLASLT_R_16BF, BLASLT_R_32F, true},
        {BLASLT_COMPUTE_32F, BLASLT_R_16F, BLASLT_R_16BF, false},
        {BLASLT_COMPUTE_32F, BLASLT_R_32F, BLASLT_R_16F, false},
        {BLASLT_COMPUTE_32F_FAST_16F, BLASLT_R_16F, BLASLT_R_16F, false},
        {BLASLT_COMPUTE_32F, 7, 7, false},
    };
    for (size_t i = 0; i < ORCH_COUNT(v); i++) {
        c.compute = BLASLT_COMPUTE(v[i].ct, v[i].ab, v[i].cd);
        char why[128] = "";
        bool ok = blaslt_call_valid(&c, why, sizeof why);
        CHECK_MSG(ok == v[i].ok, "compute %d, types %d/%d: %s", v[i].ct, v[i].ab, v[i].cd,
                  ok ? "accepted" : why);
        if (!ok || !blaslt_available())
            continue;
        BlasLtOp op;
        Err e = {0};
        CHECK_MSG(blaslt_op_create(&c, &op, &e) == ST_OK, "types %d/%d: %s", v[i].ab, v[i].cd,
                  e.msg);
        blaslt_op_destroy(&op);
    }
    c.compute = 1 << 24 | BLASLT_COMPUTE_32F; // stray bits
    CHECK(!blaslt_call_valid(&c, NULL, 0));
}

static void test_descriptors(void) {
    test_half_types();
    if (!blaslt_available()) {
        printf("  skip: no cuBLASLt (%s)\n", blaslt_describe_load());
        return;
    }
    BlasLtCall c = sample_call();
    char why[128];
    CHECK_MSG(blaslt_call_valid(&c, why, sizeof why), "%s", why);
    BlasLtOp op;
    Err e = {0};
    CHECK_MSG(blaslt_op_create(&c, &op, &e) == ST_OK, "%s", e.msg);
    CHECK(op.desc && op.la && op.lb && op.lc && op.call.m == 96);
    blaslt_op_destroy(&op);
    CHECK(!op.desc && !op.la);
    blaslt_op_destroy(&op); // twice is harmless
    // Another version is refused with the message the user sees.
    c.version = blaslt_version() + 1;
    e = (Err){0};
    CHECK(blaslt_check_version(&c, &e) == ST_INVALID);
    CHECK_MSG(strstr(e.msg, "compiled with cuBLASLt") && strstr(e.msg, "recompile"), "%s", e.msg);
    c.version = blaslt_version();
    e = (Err){0};
    CHECK(blaslt_check_version(&c, &e) == ST_OK);
}

// Format-1 bytes of one kernel entry, with a right checksum.
static uint8_t *format1_blob(size_t *len) {
    uint8_t *b = xcalloc(1, 512);
    size_t n = 0;
    memcpy(b, "ORCHCUMD", 8);
    n = 8;
    uint32_t v[] = {1, 1, 5};
    memcpy(b + n, v, 12);
    n += 12;
    memcpy(b + n, "orchk", 5);
    n += 5;
    uint32_t geo[7] = {4, 1, 1, 128, 1, 1, 0};
    memcpy(b + n, geo, sizeof geo);
    n += sizeof geo;
    n = (n + 63) / 64 * 64;
    uint64_t cs = 16;
    memcpy(b + n, &cs, 8);
    n += 8;
    n = (n + 63) / 64 * 64;
    for (int i = 0; i < 16; i++)
        b[n++] = (uint8_t)(i * 7 + 1);
    uint64_t h = plan_hash64(b, n, 0);
    memcpy(b + n, &h, 8);
    *len = n + 8;
    return b;
}

static void test_blob(void) {
    CudaLaunchTable t = {0};
    CudaLaunch k, l;
    memset(&k, 0, sizeof k);
    memset(&l, 0, sizeof l);
    k.grid[0] = 7;
    k.grid[1] = k.grid[2] = 1;
    k.block[0] = 256;
    k.block[1] = k.block[2] = 1;
    l.lib = true;
    l.blas = sample_call();
    CudaLaunch hl = l; // a half call: its types ride in compute
    hl.blas.compute = BLASLT_COMPUTE(BLASLT_COMPUTE_32F, BLASLT_R_16BF, BLASLT_R_32F);
    hl.blas.align_a = 2;
    CudaLaunch rl = l; // a residual call: an entry of kind 3
    rl.blas.in_res = 3;
    cuda_launch_table_set(&t, "orch_kernel_1", &k);
    cuda_launch_table_set(&t, "orch_blaslt_2", &l);
    cuda_launch_table_set(&t, "orch_blaslt_half", &hl);
    cuda_launch_table_set(&t, "orch_blaslt_res", &rl);
    uint8_t cubin[160];
    for (size_t i = 0; i < sizeof cubin; i++)
        cubin[i] = (uint8_t)(rnd() * 256);
    uint8_t *buf = NULL;
    size_t len = 0;
    Err e = {0};
    CHECK(cuda_module_pack(cubin, sizeof cubin, &t, &buf, &len, &e) == ST_OK);
    const uint8_t *img = NULL;
    size_t img_size = 0;
    CudaLaunchTable u = {0};
    CHECK_MSG(cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e) == ST_OK, "%s", e.msg);
    CHECK(u.n == 4 && img_size == sizeof cubin && img && memcmp(img, cubin, sizeof cubin) == 0);
    const CudaLaunch *fk = cuda_launch_table_find(&u, "orch_kernel_1");
    const CudaLaunch *fl = cuda_launch_table_find(&u, "orch_blaslt_2");
    const CudaLaunch *fh = cuda_launch_table_find(&u, "orch_blaslt_half");
    CHECK(fk && !fk->lib && memcmp(fk, &k, sizeof k) == 0);
    CHECK(fl && fl->lib && memcmp(fl, &l, sizeof l) == 0);
    CHECK(fh && fh->lib && memcmp(fh, &hl, sizeof hl) == 0);
    const CudaLaunch *fr = cuda_launch_table_find(&u, "orch_blaslt_res");
    CHECK(fr && fr->lib && memcmp(fr, &rl, sizeof rl) == 0 && fr->blas.in_res == 3);
    cuda_launch_table_free(&u);
    int accepted = 0;
    for (size_t n = 0; n < len; n++) {
        Err e2 = {0};
        if (cuda_module_unpack(buf, n, "blob", &img, &img_size, &u, &e2) != ST_INVALID ||
            !strstr(e2.msg, "blob"))
            accepted++;
        cuda_launch_table_free(&u);
    }
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x5a;
        Err e2 = {0};
        if (cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e2) != ST_INVALID)
            accepted++;
        cuda_launch_table_free(&u);
        buf[i] ^= 0x5a;
    }
    CHECK_MSG(accepted == 0, "%d damaged blobs accepted", accepted);
    free(buf);
    // Impossible calls are refused even with a right checksum.
    for (int v = 0; v < 6; v++) {
        CudaLaunch bad = l;
        if (v == 0)
            bad.blas.m = 0;
        else if (v == 1)
            bad.blas.epilogue = 3;
        else if (v == 2)
            bad.blas.lda = 10; // below its rows (k = 80, transposed)
        else if (v == 3)
            bad.blas.in_bias = -1; // a bias epilogue without a bias
        else if (v == 4)
            bad.blas.in_res = 40; // past the 32 inputs a kernel takes
        else                      // half A/B with a bfloat16 D
            bad.blas.compute = BLASLT_COMPUTE(BLASLT_COMPUTE_32F, BLASLT_R_16F, BLASLT_R_16BF);
        CudaLaunchTable b = {0};
        cuda_launch_table_set(&b, "orch_bad", &bad);
        CHECK(cuda_module_pack(cubin, sizeof cubin, &b, &buf, &len, &e) == ST_OK);
        Err e3 = {0};
        CHECK(cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e3) == ST_INVALID);
        CHECK_MSG(strstr(e3.msg, "impossible cuBLASLt call"), "%s", e3.msg);
        CHECK(u.n == 0);
        free(buf);
        cuda_launch_table_free(&b);
    }
    cuda_launch_table_free(&t);
    // Format 1 is still read; an unknown format is refused saying what to do.
    uint8_t *old = format1_blob(&len);
    e = (Err){0};
    CHECK_MSG(cuda_module_unpack(old, len, "old", &img, &img_size, &u, &e) == ST_OK, "%s", e.msg);
    const CudaLaunch *f = cuda_launch_table_find(&u, "orchk");
    CHECK(u.n == 1 && f && !f->lib && f->grid[0] == 4 && f->block[0] == 128 && img_size == 16);
    cuda_launch_table_free(&u);
    old[8] = 9;
    uint64_t h = plan_hash64(old, len - 8, 0);
    memcpy(old + len - 8, &h, 8);
    e = (Err){0};
    CHECK(cuda_module_unpack(old, len, "old", &img, &img_size, &u, &e) == ST_INVALID);
    CHECK_MSG(strstr(e.msg, "format 9") && strstr(e.msg, "recompile"), "%s", e.msg);
    free(old);
}

// ---- cases on a GPU ----

static bool need_gpu(void) {
    if (g_api && blaslt_available())
        return true;
    gpu_check_skip("%s", g_api ? blaslt_describe_load() : g_load_err.msg);
    return false;
}

static const char *status_name(LabStatus s) {
    return s == LAB_OK ? "ok" : s == LAB_WRONG ? "wrong" : s == LAB_SKIPPED ? "skipped" : "failed";
}

// Runs up to nl library configs and no own configs of a case's candidate through the lab, all
// proposed and emitted under opt; returns the best median of each (INFINITY when none ran),
// checks every result.
static void lab_case(MG *g, const char *name, const TargetOptions *opt, int nl, int no, double tol,
                     bool verbose, double *best_lib, double *best_own) {
    const Candidate *c = &g->cs->c[g->cand];
    KernelConfig cfg[24];
    int n = blaslt_configs(g->pg, c, &g_hw, opt, cfg, nl);
    CHECK_MSG(n >= 1, "%s: no cuBLASLt algorithm", name);
    int nlib = n;
    if (no > 0 && cugen_lin_supports(g->pg, c, opt))
        n += cugen_lin_configs(g->pg, c, &g_hw, opt, cfg + n, no);
    LabJob *jobs = xcalloc((size_t)n + 1, sizeof *jobs);
    for (int i = 0; i < n; i++) {
        jobs[i].cand = g->cand;
        jobs[i].cfg = cfg[i];
        jobs[i].tol = tol;
    }
    void **values = NULL;
    Err e = {0};
    int rc = prim_interp_values(g->pg, (const void *const *)g->in, &values, &e);
    CHECK_MSG(rc == ST_OK, "prim_interp_values: %s", e.msg);
    CudaEmitter em = {cugen_emit, cugen_prelude(), *opt};
    LabOptions lo = {.max_reps = 10};
    if (rc == ST_OK)
        rc = cuda_lab_run(g->pg, g->cs, values, jobs, n, &lo, &g_hw, &em, &e);
    CHECK_MSG(rc == ST_OK, "%s: cuda_lab_run: %s", name, e.msg);
    *best_lib = *best_own = INFINITY;
    int lib_ok = 0;
    for (int i = 0; i < n && rc == ST_OK; i++) {
        const LabJob *j = &jobs[i];
        bool lib = i < nlib;
        if (verbose || j->status != LAB_OK)
            printf("  %-16s %-70.70s %-7s %9.2f us  err %.2g  %s\n", name, j->cfg.desc,
                   status_name(j->status), 1e6 * j->median_s, j->max_err, j->note);
        // A library algorithm may be refused for these operands, never wrong.
        CHECK_MSG(j->status != LAB_WRONG, "%s: %s wrong: %s", name, j->cfg.desc, j->note);
        if (j->status != LAB_OK)
            continue;
        CHECK(j->median_s > 0 && j->median_s < 1 && j->reps >= 10);
        double *best = lib ? best_lib : best_own;
        *best = ORCH_MIN(*best, j->median_s);
        lib_ok += lib;
    }
    CHECK_MSG(rc != ST_OK || (nlib > 0 && jobs[0].status == LAB_OK && lib_ok >= 1),
              "%s: the heuristics' first algorithm did not run: %s", name,
              nlib ? jobs[0].note : "none");
    if (values)
        prim_values_free(g->pg, values);
    free(jobs);
}

static void test_gpu_lab(void) {
    if (!need_gpu())
        return;
    for (size_t i = 0; i < ORCH_COUNT(ok_cases); i++) {
        MG g;
        if (mg_build(&g, &ok_cases[i])) {
            double bl, bo;
            lab_case(&g, ok_cases[i].name, &g_fp32, 8, 1, 0, false, &bl, &bo);
            printf("  %-16s cuBLASLt %8.2f us, generated %8.2f us\n", ok_cases[i].name, 1e6 * bl,
                   1e6 * bo);
        }
        mg_free(&g);
    }
    // TF32: the fast compute type, checked at TF32's tolerance.
    const TargetOptions tf32 = {.precision = PREC_TF32};
    MG g;
    if (mg_build(&g, &ok_cases[9])) {
        KernelConfig cf[4];
        int n = blaslt_configs(g.pg, &g.cs->c[g.cand], &g_hw, &tf32, cf, 4);
        CHECK_MSG(n >= 1 && strstr(cf[0].desc, "ct=tf32"), "%d: %s", n, n ? cf[0].desc : "");
        double bl, bo;
        lab_case(&g, "bias_relu_tf32", &tf32, 4, 0, 5e-3, true, &bl, &bo);
    }
    mg_free(&g);
}

// Half storage: every heuristic algorithm of every half case against the interpreter, at the
// tolerance the compile driver gives the candidate under the precision of its type (the lab
// raises it to the half output's own rounding: 2e-3 fp16, 1.6e-2 bf16).
static void test_gpu_half_lab(void) {
    if (!need_gpu())
        return;
    for (size_t i = 0; i < ORCH_COUNT(half_cases); i++) {
        const Case *k = &half_cases[i].k;
        bool bf = half_cases[i].dt == DT_BFLOAT16;
        const TargetOptions o = {.precision = bf ? PREC_BF16 : PREC_FP16};
        MG g;
        if (mg_build_as(&g, k, half_cases[i].dt, half_cases[i].store)) {
            KernelConfig cf[1];
            int n = blaslt_configs(g.pg, &g.cs->c[g.cand], &g_hw, &o, cf, 1);
            CHECK_MSG(n == 1 && strstr(cf[0].desc, "ct=32f ab=16"), "%s: %d: %s", k->name, n,
                      n ? cf[0].desc : "");
            double tol =
                lab_candidate_tolerance(g.pg, &g.cs->c[g.cand], bf ? PREC_BF16 : PREC_FP16);
            double bl, bo;
            lab_case(&g, k->name, &o, 8, 0, tol, false, &bl, &bo);
            printf("  %-16s cuBLASLt %8.2f us (tolerance %.2g)\n", k->name, 1e6 * bl, tol);
        }
        mg_free(&g);
    }
}

// The session's output against the interpreter's: fp32 1e-4 as the lab, half types as the lab's
// check at tolerance tol.
static bool close_enough(const Tensor *t, const void *got, const void *ref, double tol) {
    double err = 0;
    char why[256] = "";
    bool ok =
        lab_outputs_agree_tol(t->dtype, tensor_numel(t), got, ref, tol, &err, why, sizeof why);
    if (!ok)
        printf("  %s\n", why);
    return ok;
}

// A plan of one library kernel through the module blob and the session (proposed and built
// under opt).
static void session_case_as(const Case *k, DType dt, int store, const TargetOptions *opt) {
    MG g;
    if (!mg_build_as(&g, k, dt, store)) {
        mg_free(&g);
        return;
    }
    const Candidate *c = &g.cs->c[g.cand];
    KernelConfig cfg[1];
    int n = blaslt_configs(g.pg, c, &g_hw, opt, cfg, 1);
    CHECK_MSG(n == 1, "%s: no algorithm", k->name);
    char sym[64];
    Plan *plan = NULL;
    Err e = {0};
    int rc = n == 1 ? ST_OK : ST_RUNTIME;
    if (rc == ST_OK) {
        lab_kernel_name(g.pg, c, &cfg[0], sym, sizeof sym);
        int order[1] = {g.cand};
        Selection sel = {.n = 1, .kernels = order};
        PlanKernelSpec spec[1] = {{PLAN_GENERATED, sym}};
        rc = plan_build(g.pg, g.cs, &sel, spec, &plan, &e);
        CHECK_MSG(rc == ST_OK, "plan_build: %s", e.msg);
    }
    void *cubin = NULL;
    size_t size = 0;
    CudaLaunchTable t = {0}, u = {0};
    CudaEmitter em = {cugen_emit, cugen_prelude(), *opt};
    if (rc == ST_OK) {
        int cand = g.cand;
        rc = cuda_lab_build_module(g.pg, g.cs, &cand, cfg, 1, &g_hw, &em, &cubin, &size, &t, &e);
        CHECK_MSG(rc == ST_OK, "cuda_lab_build_module: %s", e.msg);
    }
    const CudaLaunch *l = rc == ST_OK ? cuda_launch_table_find(&t, sym) : NULL;
    CHECK(rc != ST_OK || (l && l->lib && l->blas.version == blaslt_version()));
    uint8_t *blob = NULL;
    size_t blen = 0;
    const uint8_t *img = NULL;
    size_t img_size = 0;
    if (rc == ST_OK && (rc = cuda_module_pack(cubin, size, &t, &blob, &blen, &e)) == ST_OK)
        rc = cuda_module_unpack(blob, blen, "blob", &img, &img_size, &u, &e);
    CHECK_MSG(rc == ST_OK, "blob: %s", e.msg);
    CudaSession *s = NULL;
    if (rc == ST_OK) {
        rc = cuda_session_create(g.pg, plan, img, img_size, &u, NULL, &s, &e);
        CHECK_MSG(rc == ST_OK, "%s: cuda_session_create: %s", k->name, e.msg);
    }
    if (rc == ST_OK) {
        const char *ln = cuda_session_launch_name(s, 0);
        CHECK_MSG(cuda_session_num_launches(s) == 1 && ln && strncmp(ln, "cublaslt:", 9) == 0,
                  "%d launches, the first '%s'", cuda_session_num_launches(s), ln ? ln : "");
    }
    const Tensor *ot = g.pg->tensors[g.out];
    double tol = dt == DT_FLOAT
                     ? 1e-4
                     : lab_candidate_tolerance(g.pg, c, dt == DT_BFLOAT16 ? PREC_BF16 : PREC_FP16);
    for (int run = 0; run < 3 && rc == ST_OK; run++) {
        for (int i = 0; i < g.n_in; i++)
            fill(g.pg->tensors[g.pg->inputs[i]], g.in[i]);
        void *ref[1] = {NULL};
        void *got = xmalloc(tensor_nbytes(ot));
        memset(got, 0xff, tensor_nbytes(ot));
        void *outs[1] = {got};
        rc = prim_interp_run(g.pg, (const void *const *)g.in, ref, &e);
        CHECK_MSG(rc == ST_OK, "prim_interp_run: %s", e.msg);
        cuda_session_set_profiling(s, run == 2);
        if (rc == ST_OK) {
            rc = cuda_session_run(s, (const void *const *)g.in, outs, &e);
            CHECK_MSG(rc == ST_OK, "%s: run %d: %s", k->name, run, e.msg);
        }
        if (rc == ST_OK)
            CHECK_MSG(close_enough(ot, got, ref[0], tol), "%s: run %d", k->name, run);
        if (rc == ST_OK && run == 2) {
            const double *times = cuda_session_kernel_times(s);
            CHECK(times && times[0] > 0 && times[0] < 1);
            printf("  %-16s session, profiled: %.2f us (%s)\n", k->name, times ? 1e6 * times[0] : 0,
                   cfg[0].desc);
        }
        free(ref[0]);
        free(got);
    }
    cuda_session_free(s);
    s = NULL;
    // A call chosen with another library version.
    if (rc == ST_OK && u.n == 1 && u.launches[0].lib) {
        u.launches[0].blas.version += 1;
        Err e2 = {0};
        CHECK(cuda_session_create(g.pg, plan, img, img_size, &u, NULL, &s, &e2) != ST_OK && !s);
        CHECK_MSG(strstr(e2.msg, "compiled with cuBLASLt") && strstr(e2.msg, "recompile"), "%s",
                  e2.msg);
        cuda_session_free(s);
    }
    free(blob);
    free(cubin);
    cuda_launch_table_free(&t);
    cuda_launch_table_free(&u);
    plan_free(plan);
    mg_free(&g);
}

static void session_case(const Case *k) {
    session_case_as(k, DT_FLOAT, 0, &g_fp32);
}

static void session_half(const HalfCase *h) {
    const TargetOptions o = {.precision = h->dt == DT_BFLOAT16 ? PREC_BF16 : PREC_FP16};
    session_case_as(&h->k, h->dt, h->store, &o);
}

static void test_gpu_session(void) {
    if (!need_gpu())
        return;
    session_case(&ok_cases[9]);  // bias + relu
    session_case(&ok_cases[5]);  // batched, transposed B, relu
    session_case(&ok_cases[14]); // odd sizes
    session_case(&ok_cases[16]); // residual C (a module entry of kind 3)
    session_case(&ok_cases[18]); // batched, residual then bias
    session_half(&half_cases[6]);  // float16, bias + relu
    session_half(&half_cases[11]); // float16, odd sizes: 2-byte rows
    session_half(&half_cases[14]); // bfloat16 batched, transposed B, relu, float32 output
    session_half(&half_cases[16]); // bfloat16, bias, residual, relu
}

// Our best generated kernel against cuBLASLt's best on the transformer's shapes.
static void test_gpu_compare(void) {
    if (!need_gpu())
        return;
    static const int64_t shapes[][3] = {
        {128, 768, 768}, {128, 3072, 768}, {128, 768, 3072}, {512, 768, 768}, {4096, 4096, 4096}};
    // FP32 (exact: SIMT on both sides), then TF32 (tensor cores on both sides, each checked at
    // the tolerance the compile driver gives TF32 kernels), then float16 storage (half operands
    // and output on both sides; 4096^3 left out: the interpreter's reference would take minutes).
    for (int v = 0; v < 3; v++) {
        static const char *const head[] = {"MxNxK (fp32)", "MxNxK (tf32)", "MxNxK (f16 st.)"};
        static const Precision prec[] = {PREC_FP32, PREC_TF32, PREC_FP16};
        const TargetOptions o = {.precision = prec[v]};
        printf("  %-16s %14s %14s\n", head[v], "generated us", "cuBLASLt us");
        for (size_t i = 0; i < ORCH_COUNT(shapes) - (v == 2); i++) {
            Case k = {"compare",    0,     0,     {0},   {0}, shapes[i][0], shapes[i][1],
                      shapes[i][2], false, false, E_NONE};
            char name[48];
            snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)k.M, (long long)k.N,
                     (long long)k.K);
            MG g;
            if (mg_build_as(&g, &k, v == 2 ? DT_FLOAT16 : DT_FLOAT, 0)) {
                double bl, bo;
                double tol = lab_candidate_tolerance(g.pg, &g.cs->c[g.cand], prec[v]);
                lab_case(&g, name, &o, 8, 8, tol, false, &bl, &bo);
                printf("  %-16s %14.2f %14.2f\n", name, 1e6 * bo, 1e6 * bl);
            }
            mg_free(&g);
        }
    }
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    g_api = cuda_api_load(&g_load_err);
    printf("driver: %s; cuBLASLt: %s\n", g_api ? "present, with a device" : g_load_err.msg,
           blaslt_describe_load());
    if (g_api) {
        Err eh = {0};
        Err en = {0};
        if (nvrtc_load(&en) != ST_OK || cuda_hw_detect(&g_hw, NULL, &eh) != ST_OK) {
            printf("no GPU cases: %s%s\n", en.msg, eh.msg);
            snprintf(g_load_err.msg, sizeof g_load_err.msg, "%s%s", en.msg, eh.msg);
            g_api = NULL;
        } else {
            printf("device: %s (%s, %d SMs)\n", g_hw.name, g_hw.arch, g_hw.sm_count);
        }
    }
    RUN(test_loader);
    RUN(test_analysis);
    RUN(test_descriptors);
    RUN(test_blob);
    RUN(test_gpu_lab);
    RUN(test_gpu_half_lab);
    RUN(test_gpu_session);
    RUN(test_gpu_compare);
    return CHECK_DONE();
}
