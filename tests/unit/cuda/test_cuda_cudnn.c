// cuDNN library candidates of the CUDA target (src/backend/cuda/cudnn.h) and their way through the
// lab, the CUDA module blob, the session and a compiled model.
// Everywhere: the loader (the version it reports is the one an independent dlopen of the same
// file reports); the analysis of convolutions built here (plain, stride 2 with padding, dilation,
// groups, depthwise, 1x1, 7x7 stem, odd shapes, an asymmetric padding cuDNN's symmetric one
// computes, the bias as [1,C,1,1], [C,1,1] or a reshaped [C] constant, bias + ReLU, alpha,
// max(.,0), a residual z, one fused elementwise program) against call fields worked out by hand,
// and its refusals (W not a constant, X computed in the kernel, a bias that is an input or lies
// along W, ReLU or z without a bias, ReLU before the bias, tanh, a padding cuDNN cannot express);
// the math type per precision; descriptors where the library loads; the version refusal; the
// module blob (cuDNN entries round trip next to a kernel and a cuBLASLt call, every truncation and
// single-byte corruption refused, impossible calls refused with a right checksum).
// On a GPU: every heuristic algorithm of every accepted case and of 8 random convolutions (from
// the seed) runs through cuda_lab_run against the primitive interpreter (1e-4; all fp32 configs
// must say math=fma, none be Winograd's, which missed 1e-4 there); TF32 once at its tolerance; a
// plan of one cuDNN kernel runs through the blob and cuda_session (graph replay, profiled) against
// prim_interp_run, and a call chosen with another library version is refused. Then
// `orch compile -t cuda` of a small convolutional model (argv[2], default models/a_convnet of the
// build folder: tests/models/gen_models.py's) runs against its expected outputs (1e-4 relative +
// 1e-5 absolute, as run_models.py), naming the kernels that chose cuDNN.
// Half storage (convolutions whose tensors are float16 / bfloat16, built as the storage pass leaves
// them: float32 arithmetic ending in a CAST to half, or half arithmetic): the analysis everywhere
// (1x1, 3x3 stride 2 padded, grouped, depthwise, bias + ReLU, residual, a reshaped bias, one
// fused program; the type packed in math, tensor-op math under any precision; refused: a float32
// output, a float32 z), half descriptors where the library loads, half calls through the blob;
// on a GPU every heuristic algorithm against the interpreter at the lab's fp16 / bf16
// tolerance, and a half plan through the session.
// Usage: unit_cuda_cudnn [seed [MODEL_DIR]]; ORCH_REQUIRE_GPU=1 turns the GPU skips into failures.
#define _GNU_SOURCE
#include "../gpu_check.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_lab.h"
#include "backend/cuda/cudnn.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/session_cuda.h"
#include "backend/kernel_lab.h"
#include "candidates/candidates.h"
#include "compile/compile.h"
#include "interp/prim_interp.h"
#include "passes/passes.h"
#include "plan/artifact.h"
#include "plan/plan.h"
#include "prim/prim_build.h"
#include "runtime/npy.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static const CudaApi *g_api; // NULL without a GPU
static Err g_load_err;
static CudaHw g_hw;
// The emitters' options under float32 (the default).
static const TargetOptions g_fp32 = {.precision = PREC_FP32};
static const char *g_model_dir = "models/a_convnet";

static double rnd(void) { // uniform in [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0;
}

static int64_t rnd_int(int64_t lo, int64_t hi) { // in [lo, hi]
    return lo + (int64_t)(rnd() * (double)(hi - lo + 1));
}

// Values in ±[0.1, 1): never zero; about half negative, so a ReLU matters. In type dt.
static void fill_values(DType dt, void *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        elem_set_f64(dt, p, i, (0.1 + 0.9 * rnd()) * (rnd() < 0.5 ? -1 : 1));
}

// ---- graphs: one convolution and its epilogue ----

enum {
    E_NONE,
    E_BIAS,
    E_BIAS_RELU,
    E_ALPHA_BIAS_RELU, // relu(0.5 * conv + bias)
    E_BIAS_MAX0,
    E_BIAS_Z,      // conv + bias + z
    E_BIAS_Z_RELU, // relu(conv + bias + z)
    // refused
    E_RELU,
    E_BIAS_TANH,
    E_RELU_BIAS,
    E_BIAS_ALONG_W,
    E_Z,
};

enum {
    B_1C11,     // bias [1, K, 1, 1] constant (BatchNorm folding's)
    B_C11,      // bias [K, 1, 1] constant
    B_RESHAPE,  // bias [K] constant reshaped to [K, 1, 1] in the kernel (ONNX Conv's own bias)
    B_INPUT,    // bias [1, K, 1, 1] a graph input: refused
    W_INPUT,    // W a graph input: refused
    X_PROLOGUE, // X = relu(input) inside the kernel: refused
    FUSED,      // the epilogue as one ELEMWISE program (as the clean-up passes merge it)
};

// Half storage (ConvCase.store flags, with ConvCase.dt a half type).
enum {
    S_F32_OUT = 1, // the graph output is float32 (the epilogue's float32 value stored)
    S_HALF = 2,    // the epilogue computes in half, not in float32 ending in a CAST
    S_Z_F32 = 4,   // z is a float32 graph input read by the half epilogue
    // Channels-last (pass_channels_last's pairs): X and z graph inputs stored NHWC and read
    // through transposes, W a KRSC constant read through a transpose (where C/G and R x S are
    // not 1), Y transposed to an NHWC graph output.
    S_NHWC = 8,
    S_NHWC_IN_ONLY = 16, // as S_NHWC, but Y stays NCHW: refused (one layout per call)
    S_NHWC_W_KCRS = 32,  // as S_NHWC, but W KCRS in place: refused (NHWC data, KRSC filter)
};

// H = 0: a 1-D convolution over W (X [N, C, W], W [K, C/G, S]; R 1, the height's stride,
// dilation 1 and pads 0), which cuDNN is called for as a 2-D one of height 1.
typedef struct ConvCase {
    const char *name;
    int64_t N, C, H, W, K, R, S, G;
    int64_t stride[2], dil[2], pb[2], pe[2];
    int epi, variant;
} ConvCase;

// A case under half storage.
typedef struct HalfCase {
    ConvCase k;
    DType dt;  // every tensor's type: DT_FLOAT16 or DT_BFLOAT16
    int store; // S_* flags
} HalfCase;

typedef struct CG {
    PrimGraph *pg;
    DType dt; // every tensor's type (but S_F32_OUT's and S_Z_F32's)
    PB b;
    void *in[4];
    int n_in;
    int x, w, bias, z; // the tensors the call reads (bias: its data, the constant); -1 none
    int conv, out;
    bool nhwc; // S_NHWC
    CandidateSet *cs;
    int cand; // the candidate of every primitive
} CG;

static int add_input(CG *g, DType dt, int rank, const int64_t *dims) {
    PrimGraph *pg = g->pg;
    char name[32];
    snprintf(name, sizeof name, "x%d", pg->n_inputs);
    Tensor *t = pg_add_tensor(pg, name, dt, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    g->in[pg->n_inputs] = xmalloc(tensor_nbytes(t) + 1);
    fill_values(dt, g->in[pg->n_inputs], tensor_numel(t));
    pg->inputs[pg->n_inputs++] = t->id;
    g->n_in = pg->n_inputs;
    return t->id;
}

static int add_const(CG *g, DType dt, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = xmalloc(sizeof(float) * (size_t)(n + 1));
    fill_values(dt, v, n);
    int t = pb_const(&g->b, dt, rank, dims, v);
    free(v);
    return t;
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

static int64_t out_size(const ConvCase *k, int d) {
    if (d == 0 && k->H == 0)
        return 1; // a 1-D convolution's height
    int64_t in = d ? k->W : k->H, kk = d ? k->S : k->R;
    return (in + k->pb[d] + k->pe[d] - (k->dil[d] * (kk - 1) + 1)) / k->stride[d] + 1;
}

static bool cg_build_as(CG *g, const ConvCase *k, DType dt, int store) {
    memset(g, 0, sizeof *g);
    g->pg = prim_graph_create(graph_create("test"));
    g->b = (PB){g->pg, "conv_node"};
    g->bias = g->z = -1;
    g->dt = dt;
    g->nhwc = store & S_NHWC;
    // 1-D: the rank-3 shapes (the height axis dropped).
    int r = k->H ? 4 : 3, h0 = 4 - r;
    int64_t xd[4] = {k->N, k->C, k->H, k->W}, wd[4] = {k->K, k->C / k->G, k->R, k->S};
    int64_t P = out_size(k, 0), Q = out_size(k, 1), yd[4] = {k->N, k->K, P, Q};
    if (!k->H) {
        xd[2] = k->W;
        wd[2] = k->S;
        yd[2] = Q;
    }
    static const int to_nchw[4] = {0, 3, 1, 2}, to_nhwc[4] = {0, 2, 3, 1};
    bool nhwc = store & (S_NHWC | S_NHWC_IN_ONLY | S_NHWC_W_KCRS);
    int x;
    if (nhwc) {
        int64_t xl[4] = {k->N, k->H, k->W, k->C};
        g->x = add_input(g, dt, 4, xl);
        x = pb_transpose(&g->b, g->x, to_nchw);
    } else {
        x = g->x = add_input(g, dt, r, xd);
    }
    if (k->variant == X_PROLOGUE)
        x = pb_ew1(&g->b, EW_RELU, x);
    int w;
    if (nhwc && !(store & S_NHWC_W_KCRS) && wd[1] > 1 && k->R * k->S > 1) {
        int64_t wl[4] = {wd[0], wd[2], wd[3], wd[1]};
        g->w = add_const(g, dt, 4, wl);
        w = pb_transpose(&g->b, g->w, to_nchw);
    } else {
        w = g->w = k->variant == W_INPUT ? add_input(g, dt, r, wd) : add_const(g, dt, r, wd);
    }
    LinearParams lp;
    memset(&lp, 0, sizeof lp);
    lp.op = LIN_CONV;
    lp.n_spatial = r - 2;
    lp.group = (int)k->G;
    for (int d = h0; d < 2; d++) {
        lp.stride[d - h0] = k->stride[d];
        lp.dilation[d - h0] = k->dil[d];
        lp.pad_begin[d - h0] = k->pb[d];
        lp.pad_end[d - h0] = k->pe[d];
    }
    int y = g->conv = pb_conv(&g->b, &lp, x, w, yd);
    g->b.origin = "epilogue_node";
    int bias = -1;
    bool wants_bias = k->epi == E_BIAS || k->epi == E_BIAS_RELU || k->epi == E_ALPHA_BIAS_RELU ||
                      k->epi == E_BIAS_MAX0 || k->epi == E_BIAS_Z || k->epi == E_BIAS_Z_RELU ||
                      k->epi == E_BIAS_TANH || k->epi == E_RELU_BIAS;
    if (wants_bias) {
        int64_t b4[4] = {1, k->K, 1, 1}, b3[3] = {k->K, 1, 1}, b1[1] = {k->K};
        if (k->variant == B_INPUT) {
            bias = g->bias = add_input(g, dt, r, b4);
        } else if (k->variant == B_C11) {
            bias = g->bias = add_const(g, dt, r - 1, b3);
        } else if (k->variant == B_RESHAPE) {
            g->bias = add_const(g, dt, 1, b1);
            bias = pb_reshape(&g->b, g->bias, r - 1, b3);
        } else {
            bias = g->bias = add_const(g, dt, r, b4);
        }
    }
    int z = -1; // the value the epilogue adds: g->z, or its transpose
    if ((k->epi == E_BIAS_Z || k->epi == E_BIAS_Z_RELU || k->epi == E_Z) && nhwc) {
        int64_t zl[4] = {k->N, P, Q, k->K};
        g->z = add_input(g, dt, 4, zl);
        z = pb_transpose(&g->b, g->z, to_nchw);
    } else if (k->epi == E_BIAS_Z || k->epi == E_BIAS_Z_RELU || k->epi == E_Z) {
        z = g->z = add_input(g, store & S_Z_F32 ? DT_FLOAT : dt, r, yd);
    }
    if (k->variant == FUSED) {
        // %0 = ADD(in0, in1); %1 = ADD(in2, %0); [%2 = RELU(%1)], as a ResNet block's merged add.
        EwInstr code[3];
        memset(code, 0, sizeof code);
        code[0] = (EwInstr){.op = EW_ADD, .dtype = dt};
        code[0].arg[0] = (EwArg){EWS_INPUT, 0, 0};
        code[0].arg[1] = (EwArg){EWS_INPUT, 1, 0};
        code[1] = (EwInstr){.op = EW_ADD, .dtype = dt};
        code[1].arg[0] = (EwArg){EWS_INPUT, 2, 0};
        code[1].arg[1] = (EwArg){EWS_INSTR, 0, 0};
        code[2] = (EwInstr){.op = EW_RELU, .dtype = dt};
        code[2].arg[0] = (EwArg){EWS_INSTR, 1, 0};
        EwProgram prog = {k->epi == E_BIAS_Z_RELU ? 3 : 2, code};
        int ins[3] = {y, bias, z};
        y = pb_ew_program(&g->b, 3, ins, &prog);
    } else {
        switch (k->epi) {
        case E_BIAS: y = pb_ew2(&g->b, EW_ADD, y, bias); break;
        case E_BIAS_RELU: y = pb_ew1(&g->b, EW_RELU, pb_ew2(&g->b, EW_ADD, bias, y)); break;
        case E_ALPHA_BIAS_RELU:
            y = pb_ew1(&g->b, EW_RELU, pb_ew2(&g->b, EW_ADD, pb_ew2i(&g->b, EW_MUL, y, 0.5), bias));
            break;
        case E_BIAS_MAX0: y = pb_ew2i(&g->b, EW_MAX, pb_ew2(&g->b, EW_ADD, y, bias), 0.0); break;
        case E_BIAS_Z: y = pb_ew2(&g->b, EW_ADD, z, pb_ew2(&g->b, EW_ADD, y, bias)); break;
        case E_BIAS_Z_RELU:
            y = pb_ew1(&g->b, EW_RELU, pb_ew2(&g->b, EW_ADD, pb_ew2(&g->b, EW_ADD, y, bias), z));
            break;
        case E_RELU: y = pb_ew1(&g->b, EW_RELU, y); break;
        case E_BIAS_TANH: y = pb_ew1(&g->b, EW_TANH, pb_ew2(&g->b, EW_ADD, y, bias)); break;
        case E_RELU_BIAS: y = pb_ew2(&g->b, EW_ADD, pb_ew1(&g->b, EW_RELU, y), bias); break;
        case E_BIAS_ALONG_W: {
            int64_t bw[1] = {Q};
            y = pb_ew2(&g->b, EW_ADD, y, add_const(g, dt, 1, bw));
            break;
        }
        case E_Z: y = pb_ew2(&g->b, EW_ADD, y, z); break;
        default: break;
        }
    }
    if (dt != DT_FLOAT && !(store & S_HALF))
        float_arith(g->pg, store & S_F32_OUT ? y : -1);
    if (nhwc && !(store & S_NHWC_IN_ONLY))
        y = pb_transpose(&g->b, y, to_nhwc);
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

static bool cg_build(CG *g, const ConvCase *k) {
    return cg_build_as(g, k, DT_FLOAT, 0);
}

static void cg_free(CG *g) {
    for (int i = 0; i < g->n_in; i++)
        free(g->in[i]);
    cand_set_free(g->cs);
    if (g->pg) {
        const Graph *src = g->pg->src;
        prim_graph_free(g->pg);
        graph_free((Graph *)src);
    }
}

// Position of tensor t among the candidate's inputs (-1 for t = -1).
static int pos_of(const CG *g, int t) {
    if (t < 0)
        return -1;
    const Candidate *c = &g->cs->c[g->cand];
    for (int j = 0; j < c->n_inputs; j++)
        if (c->inputs[j] == t)
            return j;
    return -2;
}

#define S1                                                                                         \
    { 1, 1 }
#define P0                                                                                         \
    { 0, 0 }
#define P1                                                                                         \
    { 1, 1 }

// The accepted cases (the GPU cases run all of them).
static const ConvCase ok_cases[] = {
    {"plain", 2, 8, 13, 11, 16, 3, 3, 1, S1, S1, P1, P1, E_NONE, B_1C11},
    {"bias", 2, 8, 13, 11, 16, 3, 3, 1, S1, S1, P1, P1, E_BIAS, B_1C11},
    {"bias_relu", 2, 8, 13, 11, 16, 3, 3, 1, S1, S1, P1, P1, E_BIAS_RELU, B_1C11},
    {"stride2_pad", 1, 6, 17, 15, 12, 3, 3, 1, {2, 2}, S1, P1, P1, E_BIAS_RELU, B_1C11},
    {"dilation", 1, 5, 19, 18, 7, 3, 3, 1, S1, {2, 2}, {2, 2}, {2, 2}, E_BIAS, B_C11},
    {"groups", 2, 12, 10, 9, 18, 3, 3, 3, S1, S1, P1, P1, E_BIAS_RELU, B_1C11},
    {"depthwise", 1, 16, 14, 14, 16, 3, 3, 16, S1, S1, P1, P1, E_BIAS_RELU, B_1C11},
    {"depthwise_5x5_s2", 1, 24, 15, 13, 24, 5, 5, 24, {2, 2}, S1, {2, 2}, {2, 2}, E_BIAS, B_1C11},
    {"1x1", 2, 32, 7, 9, 24, 1, 1, 1, S1, S1, P0, P0, E_BIAS, B_1C11},
    {"1x1_s2", 1, 16, 14, 14, 32, 1, 1, 1, {2, 2}, S1, P0, P0, E_NONE, B_1C11},
    {"stem_7x7_s2", 1, 3, 33, 31, 16, 7, 7, 1, {2, 2}, S1, {3, 3}, {3, 3}, E_BIAS_RELU, B_1C11},
    {"odd", 3, 7, 9, 23, 5, 3, 5, 1, {2, 1}, {1, 2}, {1, 2}, {1, 2}, E_BIAS_RELU, B_1C11},
    {"asym_same_upper", 1, 4, 16, 16, 8, 3, 3, 1, {2, 2}, S1, {1, 1}, {0, 0}, E_BIAS, B_1C11},
    {"alpha_bias_relu", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_ALPHA_BIAS_RELU, B_1C11},
    {"bias_max0", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_MAX0, B_1C11},
    {"residual", 2, 8, 12, 10, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, B_1C11},
    {"residual_norelu", 1, 8, 12, 10, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z, B_1C11},
    {"fused_residual", 1, 16, 8, 8, 16, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, FUSED},
    {"bias_reshaped", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_RELU, B_RESHAPE},
    // 1-D (Whisper's and wav2vec2's front ends), as height-1 2-D calls.
    {"conv1d_bias_relu", 2, 80, 0, 30, 24, 1, 3, 1, S1, S1, {0, 1}, {0, 1}, E_BIAS_RELU, B_1C11},
    {"conv1d_s2_reshaped",
     1,
     16,
     0,
     33,
     16,
     1,
     3,
     1,
     {1, 2},
     S1,
     {0, 1},
     {0, 1},
     E_BIAS,
     B_RESHAPE},
    {"conv1d_d2_g2_res", 2, 8, 0, 21, 6, 1, 5, 2, S1, {1, 2}, {0, 4}, {0, 4}, E_BIAS_Z_RELU, B_C11},
    {"conv1d_k10_s5", 1, 1, 0, 400, 16, 1, 10, 1, {1, 5}, S1, P0, P0, E_NONE, B_1C11},
};

static const ConvCase bad_cases[] = {
    {"w_input", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS, W_INPUT},
    {"x_prologue", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS, X_PROLOGUE},
    {"bias_input", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS, B_INPUT},
    {"bias_along_w", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_ALONG_W, B_1C11},
    {"relu_only", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_RELU, B_1C11},
    {"z_only", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_Z, B_1C11},
    {"relu_then_bias", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_RELU_BIAS, B_1C11},
    {"tanh", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_TANH, B_1C11},
    {"pad_end_only", 1, 4, 12, 12, 8, 3, 3, 1, S1, S1, {0, 0}, {2, 2}, E_NONE, B_1C11},
};

#define F16 DT_FLOAT16
#define BF16 DT_BFLOAT16

// Half storage: float16 and bfloat16 over the shape classes and epilogues above.
static const HalfCase half_cases[] = {
    {{"h_plain", 2, 8, 13, 11, 16, 3, 3, 1, S1, S1, P1, P1, E_NONE, B_1C11}, F16, 0},
    {{"h_1x1_bias", 2, 32, 7, 9, 24, 1, 1, 1, S1, S1, P0, P0, E_BIAS, B_1C11}, F16, 0},
    {{"h_1x1_bf16", 2, 64, 14, 14, 32, 1, 1, 1, S1, S1, P0, P0, E_BIAS_RELU, B_1C11}, BF16, 0},
    {{"h_3x3_s2", 1, 16, 17, 15, 32, 3, 3, 1, {2, 2}, S1, P1, P1, E_BIAS_RELU, B_1C11}, F16, 0},
    {{"h_s2_bf16", 2, 16, 17, 15, 32, 3, 3, 1, {2, 2}, S1, P1, P1, E_BIAS_RELU, B_1C11}, BF16, 0},
    {{"h_groups", 2, 12, 10, 9, 18, 3, 3, 3, S1, S1, P1, P1, E_BIAS_RELU, B_1C11}, F16, 0},
    {{"h_depthwise", 1, 32, 14, 14, 32, 3, 3, 32, S1, S1, P1, P1, E_BIAS_RELU, B_1C11}, F16, 0},
    {{"h_dw5", 1, 24, 15, 13, 24, 5, 5, 24, {2, 2}, S1, {2, 2}, {2, 2}, E_BIAS, B_1C11}, BF16, 0},
    {{"h_residual", 2, 16, 12, 10, 16, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, B_1C11}, F16, 0},
    {{"h_residual_bf16", 1, 8, 12, 10, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z, B_1C11}, BF16, 0},
    {{"h_fused_res", 1, 16, 8, 8, 16, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, FUSED}, F16, 0},
    {{"h_reshaped", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_RELU, B_RESHAPE}, BF16, 0},
    {{"h_alpha", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_ALPHA_BIAS_RELU, B_1C11}, F16, S_HALF},
    {{"h_odd", 3, 7, 9, 23, 5, 3, 5, 1, {2, 1}, S1, {1, 2}, {1, 2}, E_BIAS_RELU, B_1C11}, F16, 0},
    // Channels-last.
    {{"nhwc_residual", 2, 16, 12, 10, 16, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, B_1C11},
     F16,
     S_NHWC},
    {{"nhwc_fused_res", 1, 32, 8, 8, 32, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, FUSED},
     F16,
     S_NHWC},
    {{"nhwc_s2", 1, 16, 17, 15, 32, 3, 3, 1, {2, 2}, S1, P1, P1, E_BIAS_RELU, B_1C11}, F16, S_NHWC},
    {{"nhwc_1x1_bf16", 2, 64, 14, 14, 32, 1, 1, 1, S1, S1, P0, P0, E_BIAS_RELU, B_1C11},
     BF16,
     S_NHWC},
    {{"nhwc_depthwise", 1, 32, 14, 14, 32, 3, 3, 32, S1, S1, P1, P1, E_BIAS_RELU, B_1C11},
     F16,
     S_NHWC},
    {{"nhwc_stem", 1, 3, 33, 31, 16, 7, 7, 1, {2, 2}, S1, {3, 3}, {3, 3}, E_BIAS_RELU, B_1C11},
     F16,
     S_NHWC},
    {{"nhwc_plain", 2, 8, 13, 11, 16, 3, 3, 1, S1, S1, P1, P1, E_NONE, B_1C11}, BF16, S_NHWC},
};

// Refused under half storage: Y or z float32 next to half X and W (cuDNN's configurations have
// one type); tanh.
static const HalfCase half_bad_cases[] = {
    {{"h_out_f32", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_RELU, B_1C11}, F16, S_F32_OUT},
    {{"h_z_f32", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_Z_RELU, B_1C11}, F16, S_Z_F32},
    {{"h_tanh", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_TANH, B_1C11}, BF16, 0},
    {{"nhwc_in_only", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_RELU, B_1C11},
     F16,
     S_NHWC_IN_ONLY},
};

// NHWC data with a KCRS filter (and NCHW data with KRSC) is a call cuDNN is asked about.
static const HalfCase half_mixed_cases[] = {
    {{"nhwc_w_kcrs", 1, 8, 12, 12, 8, 3, 3, 1, S1, S1, P1, P1, E_BIAS_RELU, B_1C11},
     F16,
     S_NHWC_W_KCRS},
};

// cudnnDataType_t of a tensor type.
static int dnn_type_of(DType t) {
    return t == DT_FLOAT16 ? DNN_DATA_HALF : t == DT_BFLOAT16 ? DNN_DATA_BFLOAT16 : DNN_DATA_FLOAT;
}

// The call worked out from the case.
static DnnCall expected_call(const CG *g, const ConvCase *k) {
    DnnCall c;
    memset(&c, 0, sizeof c);
    c.n = (int32_t)k->N;
    c.c = (int32_t)k->C;
    c.h = (int32_t)(k->H ? k->H : 1);
    c.w = (int32_t)k->W;
    c.k = (int32_t)k->K;
    c.r = (int32_t)k->R;
    c.s = (int32_t)k->S;
    c.groups = (int32_t)k->G;
    for (int d = 0; d < 2; d++) {
        c.pad[d] = (int32_t)k->pb[d];
        c.stride[d] = (int32_t)k->stride[d];
        c.dil[d] = (int32_t)k->dil[d];
    }
    c.p = (int32_t)out_size(k, 0);
    c.q = (int32_t)out_size(k, 1);
    c.epilogue = k->epi == E_NONE          ? 0
                 : k->epi == E_BIAS        ? DNN_EPI_BIAS
                 : k->epi == E_BIAS_Z      ? DNN_EPI_BIAS | DNN_EPI_Z
                 : k->epi == E_BIAS_Z_RELU ? DNN_EPI_BIAS | DNN_EPI_Z | DNN_EPI_RELU
                                           : DNN_EPI_BIAS | DNN_EPI_RELU;
    if (g->nhwc)
        c.epilogue |= DNN_LAYOUT_NHWC | DNN_FILTER_KRSC;
    c.alpha = k->epi == E_ALPHA_BIAS_RELU ? 0.5f : 1.0f;
    c.math = g->dt != DT_FLOAT ? DNN_MATH(DNN_MATH_TENSOR_OP, dnn_type_of(g->dt)) : DNN_MATH_FMA;
    c.algo = -1;
    c.in_x = pos_of(g, g->x);
    c.in_w = pos_of(g, g->w);
    c.in_bias = pos_of(g, g->bias);
    c.in_z = pos_of(g, g->z);
    c.version = dnn_version();
    return c;
}

static bool same_call(const DnnCall *x, const DnnCall *y, char *why, size_t n) {
    char a[512], b[512];
    dnn_call_str(x, a, sizeof a);
    dnn_call_str(y, b, sizeof b);
    bool same = x->n == y->n && x->c == y->c && x->h == y->h && x->w == y->w && x->k == y->k &&
                x->r == y->r && x->s == y->s && x->groups == y->groups && x->p == y->p &&
                x->q == y->q && x->epilogue == y->epilogue && x->alpha == y->alpha &&
                x->math == y->math && x->algo == y->algo && x->in_x == y->in_x &&
                x->in_w == y->in_w && x->in_bias == y->in_bias && x->in_z == y->in_z &&
                x->version == y->version;
    for (int d = 0; d < 2; d++)
        same = same && x->pad[d] == y->pad[d] && x->stride[d] == y->stride[d] &&
               x->dil[d] == y->dil[d];
    if (!same)
        snprintf(why, n, "got      %s in=%d/%d/%d/%d\n  expected %s in=%d/%d/%d/%d", a, x->in_x,
                 x->in_w, x->in_bias, x->in_z, b, y->in_x, y->in_w, y->in_bias, y->in_z);
    return same;
}

// ---- cases that run everywhere ----

static void test_loader(void) {
    if (!dnn_available()) {
        printf("  skip: no cuDNN (%s): no cuDNN candidates\n", dnn_describe_load());
        CHECK(dnn_version() == 0);
        return;
    }
    const char *where = dnn_describe_load();
    printf("  cuDNN %llu from %s\n", (unsigned long long)dnn_version(), where);
    void *h = dlopen(where, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(h, "%s does not open again: %s", where, dlerror());
    if (h) {
        size_t (*ver)(void) = (size_t(*)(void))dlsym(h, "cudnnGetVersion");
        CHECK(ver && (uint64_t)ver() == dnn_version() && dnn_version() >= 80000);
        dlclose(h);
    }
}

// An accepted case's analysis against the call worked out by hand.
static void analyse_ok(const ConvCase *k, DType dt, int store) {
    CG g;
    if (cg_build_as(&g, k, dt, store)) {
        DnnCall got, want = expected_call(&g, k);
        bool ok = dnn_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got);
        CHECK_MSG(ok, "%s refused", k->name);
        char why[1200];
        dnn_call_str(&got, why, sizeof why);
        printf("  %-18s %s\n", k->name, ok ? why : "refused");
        if (ok)
            CHECK_MSG(same_call(&got, &want, why, sizeof why), "%s:\n  %s", k->name, why);
        // The convolution alone is a call without an epilogue.
        for (int c = 0; c < g.cs->n; c++) {
            const Candidate *cc = &g.cs->c[c];
            DnnCall alone;
            if (cc->output == g.conv && cc->n_prims == 1 && !g.nhwc)
                CHECK_MSG(dnn_analyse(g.pg, cc, &g_fp32, &alone) && alone.epilogue == 0 &&
                              alone.in_bias == -1 && alone.in_z == -1 && alone.alpha == 1.0f &&
                              alone.math == want.math,
                          "%s: the convolution alone", k->name);
        }
        // Half tensors ask for tensor-op math whatever the precision.
        for (int p = 0; ok && dt != DT_FLOAT && p < 3; p++) {
            const TargetOptions o = {.precision = p == 0   ? PREC_FP16
                                                  : p == 1 ? PREC_BF16
                                                           : PREC_FP32};
            DnnCall again;
            CHECK_MSG(dnn_analyse(g.pg, &g.cs->c[g.cand], &o, &again) && again.math == got.math,
                      "%s: precision %d", k->name, p);
        }
        // A config's bare math type keeps the call's data type.
        KernelConfig kc;
        dnn_config_pack(&(CuDnnConfig){.algo = 1, .math = DNN_MATH_DEFAULT}, &kc);
        Err e = {0};
        DnnCall cfg_call;
        CHECK(!ok || (dnn_call(g.pg, &g.cs->c[g.cand], &kc, &g_fp32, &cfg_call, &e) == ST_OK &&
                      cfg_call.math == DNN_MATH(DNN_MATH_DEFAULT, dnn_type_of(dt)) &&
                      dnn_call_valid(&cfg_call, why, sizeof why)));
    }
    cg_free(&g);
}

// pass_channels_last on a half ResNet block (conv + bias + ReLU, conv + bias + the block's
// input + ReLU): for each convolution the candidate enumeration proposes the cuDNN call that
// reads and writes NHWC in place (the transposes of its X, W and z and the one of Y absorbed),
// next to the NCHW ones.
static void test_nhwc_pass_candidates(void) {
    PrimGraph *pg = prim_graph_create(graph_create("test"));
    PB b = {pg, "block"};
    int64_t xd[4] = {1, 16, 10, 12}, wd[4] = {16, 16, 3, 3}, bd[4] = {1, 16, 1, 1};
    Tensor *xt = pg_add_tensor(pg, "x", DT_FLOAT16, 4, xd);
    xt->kind = TK_INPUT;
    pg->inputs = xmalloc(sizeof(int));
    pg->inputs[pg->n_inputs++] = xt->id;
    int x = pb_ew1(&b, EW_RELU, xt->id); // a computed activation, as inside a network
    float *v = xmalloc(sizeof(float) * 16 * 16 * 9);
    fill_values(DT_FLOAT16, v, 16 * 16 * 9);
    LinearParams lp;
    memset(&lp, 0, sizeof lp);
    lp.op = LIN_CONV;
    lp.n_spatial = 2;
    lp.group = 1;
    for (int d = 0; d < 2; d++)
        lp.stride[d] = lp.dilation[d] = lp.pad_begin[d] = lp.pad_end[d] = 1;
    int c1 = pb_conv(&b, &lp, x, pb_const(&b, DT_FLOAT16, 4, wd, v), xd);
    int a1 = pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, c1, pb_const(&b, DT_FLOAT16, 4, bd, v)));
    int c2 = pb_conv(&b, &lp, a1, pb_const(&b, DT_FLOAT16, 4, wd, v + 9), xd);
    int a2 =
        pb_ew1(&b, EW_RELU,
               pb_ew2(&b, EW_ADD, pb_ew2(&b, EW_ADD, c2, pb_const(&b, DT_FLOAT16, 4, bd, v)), x));
    free(v);
    pg->outputs = xmalloc(sizeof(int));
    pg->outputs[pg->n_outputs++] = pb_reduce(&b, RED_MAX, a2, 12, true, false); // a2 has a reader
    Err e = {0};
    NhwcStats st = {0};
    CHECK(prim_graph_verify(pg, &e) == ST_OK);
    CHECK(fission_cleanup(pg, NULL, &e) == ST_OK);
    CHECK(pass_channels_last(pg, &st, &e) == ST_OK && st.convs == 2);
    CHECK(prim_graph_verify(pg, &e) == ST_OK);
    CandRules rules = cand_rules_default();
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, &rules, 0, &cs, &e) == ST_OK);
    int nhwc = 0, nhwc_z = 0, nchw = 0;
    for (int i = 0; cs && i < cs->n; i++) {
        DnnCall call;
        if (!dnn_analyse(pg, &cs->c[i], &g_fp32, &call))
            continue;
        if (call.epilogue & DNN_LAYOUT_NHWC) {
            CHECK(call.epilogue & DNN_FILTER_KRSC);
            nhwc++;
            if ((call.epilogue & (DNN_EPI_Z | DNN_EPI_RELU | DNN_EPI_BIAS)) ==
                (DNN_EPI_Z | DNN_EPI_RELU | DNN_EPI_BIAS))
                nhwc_z++;
            // X, z and Y are channels-last tensors.
            CHECK(pg->tensors[cs->c[i].inputs[call.in_x]]->dims[3] == 16);
            CHECK(pg->tensors[cs->c[i].output]->dims[3] == 16);
        } else {
            nchw++;
        }
    }
    printf("  %d candidates; cuDNN: %d NHWC (%d with the residual), %d NCHW\n", cs ? cs->n : 0,
           nhwc, nhwc_z, nchw);
    CHECK(nhwc >= 2 && nhwc_z >= 1 && nchw >= 2);
    cand_set_free(cs);
    const Graph *src = pg->src;
    prim_graph_free(pg);
    graph_free((Graph *)src);
}

static void test_analysis(void) {
    for (size_t i = 0; i < ORCH_COUNT(ok_cases); i++)
        analyse_ok(&ok_cases[i], DT_FLOAT, 0);
    for (size_t i = 0; i < ORCH_COUNT(half_cases); i++)
        analyse_ok(&half_cases[i].k, half_cases[i].dt, half_cases[i].store);
    for (size_t i = 0; i < ORCH_COUNT(half_bad_cases); i++) {
        const HalfCase *h = &half_bad_cases[i];
        CG g;
        if (cg_build_as(&g, &h->k, h->dt, h->store)) {
            DnnCall got;
            bool ok = dnn_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got);
            CHECK_MSG(!ok, "%s accepted", h->k.name);
            printf("  %-18s %s\n", h->k.name, ok ? "accepted" : "refused");
        }
        cg_free(&g);
    }
    for (size_t i = 0; i < ORCH_COUNT(half_mixed_cases); i++) {
        const HalfCase *h = &half_mixed_cases[i];
        CG g;
        if (cg_build_as(&g, &h->k, h->dt, h->store)) {
            DnnCall got;
            bool ok = dnn_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got);
            CHECK_MSG(ok && (got.epilogue & DNN_LAYOUT_NHWC) && !(got.epilogue & DNN_FILTER_KRSC),
                      "%s: not an NHWC call with a KCRS filter", h->k.name);
            printf("  %-18s %s\n", h->k.name, ok ? "nhwc, w=kcrs" : "refused");
        }
        cg_free(&g);
    }
    for (size_t i = 0; i < ORCH_COUNT(bad_cases); i++) {
        CG g;
        if (cg_build(&g, &bad_cases[i])) {
            DnnCall got;
            bool ok = dnn_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &got);
            CHECK_MSG(!ok, "%s accepted", bad_cases[i].name);
            printf("  %-18s %s\n", bad_cases[i].name, ok ? "accepted" : "refused");
        }
        cg_free(&g);
    }
    // The precision picks the math type the heuristics are asked with.
    CG g;
    if (cg_build(&g, &ok_cases[2])) {
        static const struct {
            Precision p;
            int math;
        } pm[] = {{PREC_TF32, DNN_MATH_TENSOR_OP},
                  {PREC_FP16, DNN_MATH_TENSOR_OP},
                  {PREC_BF16, DNN_MATH_TENSOR_OP},
                  {PREC_FP32, DNN_MATH_FMA}};
        for (size_t i = 0; i < ORCH_COUNT(pm); i++) {
            const TargetOptions o = {.precision = pm[i].p};
            DnnCall got;
            CHECK(dnn_analyse(g.pg, &g.cs->c[g.cand], &o, &got) && got.math == pm[i].math);
        }
        // A config's algorithm, math and workspace reach the call; other classes are refused.
        CuDnnConfig dc = {.algo = 6, .math = DNN_MATH_FMA, .workspace = 12345};
        KernelConfig kc;
        dnn_config_pack(&dc, &kc);
        CHECK(strcmp(kc.desc, "cls=cudnn algo=winograd math=fma") == 0);
        DnnCall got;
        Err e = {0};
        CHECK(dnn_call(g.pg, &g.cs->c[g.cand], &kc, &g_fp32, &got, &e) == ST_OK && got.algo == 6 &&
              got.math == DNN_MATH_FMA && got.workspace == 12345);
        kc.cls = CUCLS_BLASLT;
        CHECK(dnn_call(g.pg, &g.cs->c[g.cand], &kc, &g_fp32, &got, &e) == ST_UNSUPPORTED);
        dc.algo = DNN_ALGO_COUNT;
        dnn_config_pack(&dc, &kc);
        CHECK(dnn_call(g.pg, &g.cs->c[g.cand], &kc, &g_fp32, &got, &e) == ST_UNSUPPORTED);
    }
    cg_free(&g);
}

static DnnCall sample_call(void) {
    DnnCall c;
    memset(&c, 0, sizeof c);
    c.n = 2;
    c.c = 12;
    c.h = 17;
    c.w = 15;
    c.k = 18;
    c.r = 3;
    c.s = 5;
    c.groups = 3;
    c.pad[0] = 1;
    c.pad[1] = 2;
    c.stride[0] = 2;
    c.stride[1] = 1;
    c.dil[0] = 1;
    c.dil[1] = 2;
    c.p = 9;  // (17 + 2 - 3) / 2 + 1
    c.q = 11; // (15 + 4 - 9) / 1 + 1
    c.epilogue = DNN_EPI_BIAS | DNN_EPI_Z | DNN_EPI_RELU;
    c.alpha = 0.25f;
    c.math = DNN_MATH_FMA;
    c.algo = 1;
    c.in_x = 0;
    c.in_w = 1;
    c.in_bias = 2;
    c.in_z = 3;
    c.workspace = 4096;
    c.version = 91400;
    return c;
}

static void test_descriptors(void) {
    DnnCall c = sample_call();
    char why[128];
    CHECK_MSG(dnn_call_valid(&c, why, sizeof why), "%s", why);
    // Packed math: the data types of dnn_analyse's, nothing else.
    static const int32_t bad_math[] = {DNN_MATH(DNN_MATH_FMA, 1), DNN_MATH(DNN_MATH_FMA, 3),
                                       DNN_MATH(4, DNN_DATA_HALF), 1 << 16 | DNN_MATH_FMA, -1};
    for (size_t i = 0; i < ORCH_COUNT(bad_math); i++) {
        DnnCall b = c;
        b.math = bad_math[i];
        CHECK_MSG(!dnn_call_valid(&b, why, sizeof why), "math 0x%x accepted", bad_math[i]);
    }
    // The version refusal says what to do, with or without a library.
    c.version = dnn_version() + 1;
    Err e = {0};
    int rc = dnn_check_version(&c, &e);
    CHECK(rc == (dnn_available() ? ST_INVALID : ST_UNSUPPORTED));
    CHECK_MSG(strstr(e.msg, "compiled with cuDNN") && strstr(e.msg, "recompile"), "%s", e.msg);
    if (!dnn_available()) {
        printf("  skip: no cuDNN (%s)\n", dnn_describe_load());
        return;
    }
    c.version = dnn_version();
    e = (Err){0};
    CHECK(dnn_check_version(&c, &e) == ST_OK);
    DnnOp op;
    e = (Err){0};
    rc = dnn_op_create(&c, &op, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK)
        CHECK(op.x && op.y && op.w && op.conv && op.bias && op.act && op.call.k == 18);
    dnn_op_destroy(&op);
    CHECK(!op.x && !op.conv);
    dnn_op_destroy(&op); // twice is harmless
    // Half tensors: PSEUDO_HALF / PSEUDO_BFLOAT16 descriptors; an unknown type is refused.
    for (int t = 0; t < 2; t++) {
        DnnCall h = c;
        h.math = DNN_MATH(DNN_MATH_TENSOR_OP, t ? DNN_DATA_BFLOAT16 : DNN_DATA_HALF);
        CHECK_MSG(dnn_call_valid(&h, why, sizeof why), "%s", why);
        e = (Err){0};
        rc = dnn_op_create(&h, &op, &e);
        CHECK_MSG(rc == ST_OK, "half descriptors: %s", e.msg);
        dnn_op_destroy(&op);
    }
    // cuDNN's own output size must be the call's.
    c.p = 8;
    e = (Err){0};
    CHECK(dnn_op_create(&c, &op, &e) != ST_OK && !op.conv);
    CHECK_MSG(strstr(e.msg, "output"), "%s", e.msg);
}

static void test_blob(void) {
    CudaLaunchTable t = {0};
    CudaLaunch k, d, b;
    memset(&k, 0, sizeof k);
    memset(&d, 0, sizeof d);
    memset(&b, 0, sizeof b);
    k.grid[0] = 7;
    k.grid[1] = k.grid[2] = 1;
    k.block[0] = 256;
    k.block[1] = k.block[2] = 1;
    d.lib = CUDA_LIB_CUDNN;
    d.dnn = sample_call();
    CudaLaunch dh = d; // a half call: its type rides in math
    dh.dnn.math = DNN_MATH(DNN_MATH_TENSOR_OP, DNN_DATA_BFLOAT16);
    b.lib = CUDA_LIB_BLASLT;
    b.blas.m = b.blas.n = b.blas.k = 8;
    b.blas.lda = b.blas.ldb = b.blas.ldc = 8;
    b.blas.batch = 1;
    b.blas.epilogue = BLASLT_EPI_NONE;
    b.blas.compute = BLASLT_COMPUTE_32F;
    b.blas.alpha = 1;
    b.blas.in_a = 1;
    b.blas.in_bias = -1;
    b.blas.in_res = -1;
    b.blas.align_a = b.blas.align_b = b.blas.align_c = 32;
    b.blas.version = 130100;
    cuda_launch_table_set(&t, "orch_kernel_1", &k);
    cuda_launch_table_set(&t, "orch_cudnn_2", &d);
    cuda_launch_table_set(&t, "orch_blaslt_3", &b);
    cuda_launch_table_set(&t, "orch_cudnn_half", &dh);
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
    const CudaLaunch *fh = cuda_launch_table_find(&u, "orch_cudnn_half");
    CHECK(fh && fh->lib == CUDA_LIB_CUDNN && memcmp(fh, &dh, sizeof dh) == 0);
    const CudaLaunch *fk = cuda_launch_table_find(&u, "orch_kernel_1");
    const CudaLaunch *fd = cuda_launch_table_find(&u, "orch_cudnn_2");
    const CudaLaunch *fb = cuda_launch_table_find(&u, "orch_blaslt_3");
    CHECK(fk && fk->lib == CUDA_LIB_NONE && memcmp(fk, &k, sizeof k) == 0);
    CHECK(fd && fd->lib == CUDA_LIB_CUDNN && memcmp(fd, &d, sizeof d) == 0);
    CHECK(fb && fb->lib == CUDA_LIB_BLASLT && memcmp(fb, &b, sizeof b) == 0);
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
    CHECK_MSG(accepted == 0, "%d damaged blobs of %zu bytes accepted", accepted, len);
    free(buf);
    // Impossible calls are refused even with a right checksum.
    for (int v = 0; v < 9; v++) {
        CudaLaunch bad = d;
        switch (v) {
        case 0: bad.dnn.n = 0; break;
        case 1: bad.dnn.epilogue = DNN_EPI_RELU; break; // a ReLU without a bias
        case 2: bad.dnn.p = 10; break;                  // not what the geometry gives
        case 3: bad.dnn.in_z = -1; break;               // a z epilogue without a z
        case 4: bad.dnn.algo = DNN_ALGO_COUNT; break;
        case 5: bad.dnn.groups = 5; break; // 12 channels in 5 groups
        case 6: bad.dnn.workspace = DNN_MAX_WORKSPACE + 1; break;
        case 7: bad.dnn.math = 7; break;
        default: bad.dnn.math = DNN_MATH(DNN_MATH_TENSOR_OP, 5); break; // an unknown data type
        }
        CudaLaunchTable bt = {0};
        cuda_launch_table_set(&bt, "orch_bad", &bad);
        CHECK(cuda_module_pack(cubin, sizeof cubin, &bt, &buf, &len, &e) == ST_OK);
        Err e3 = {0};
        CHECK(cuda_module_unpack(buf, len, "blob", &img, &img_size, &u, &e3) == ST_INVALID);
        CHECK_MSG(strstr(e3.msg, "impossible cuDNN call"), "case %d: %s", v, e3.msg);
        CHECK(u.n == 0);
        free(buf);
        cuda_launch_table_free(&bt);
    }
    cuda_launch_table_free(&t);
}

// ---- cases on a GPU ----

static bool need_gpu(void) {
    if (g_api && dnn_available())
        return true;
    gpu_check_skip("%s", g_api ? dnn_describe_load() : g_load_err.msg);
    return false;
}

static const char *status_name(LabStatus s) {
    return s == LAB_OK ? "ok" : s == LAB_WRONG ? "wrong" : s == LAB_SKIPPED ? "skipped" : "failed";
}

// Runs every cuDNN config and the emitter's first config of a case's candidate through the
// lab, all proposed and emitted under opt; checks every result and prints the best of each.
static void lab_case(CG *g, const char *name, const TargetOptions *opt, double tol, bool verbose) {
    const Candidate *c = &g->cs->c[g->cand];
    KernelConfig cfg[24];
    int n = dnn_configs(g->pg, c, &g_hw, opt, cfg, 16);
    CHECK_MSG(n >= 1, "%s: no cuDNN algorithm", name);
    int nlib = n;
    for (int i = 0; i < nlib; i++)
        CHECK_MSG(opt->precision != PREC_FP32 ||
                      (strstr(cfg[i].desc, "math=fma") && !strstr(cfg[i].desc, "winograd")),
                  "%s: an fp32 config without FMA math, or Winograd's: %s", name, cfg[i].desc);
    if (cugen_lin_supports(g->pg, c, opt))
        n += cugen_lin_configs(g->pg, c, &g_hw, opt, cfg + n, 1);
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
    double best_lib = INFINITY, best_own = INFINITY;
    int lib_ok = 0;
    const char *best_desc = "";
    for (int i = 0; i < n && rc == ST_OK; i++) {
        const LabJob *j = &jobs[i];
        bool lib = i < nlib;
        if (verbose || j->status != LAB_OK)
            printf("  %-18s %-52.52s %-7s %9.2f us  err %.2g  %s\n", name, j->cfg.desc,
                   status_name(j->status), 1e6 * j->median_s, j->max_err, j->note);
        // An algorithm may be refused for these operands, never wrong.
        CHECK_MSG(j->status != LAB_WRONG, "%s: %s wrong: %s", name, j->cfg.desc, j->note);
        if (j->status != LAB_OK)
            continue;
        CHECK(j->median_s > 0 && j->median_s < 1 && j->reps >= 10);
        if (lib && j->median_s < best_lib) {
            best_lib = j->median_s;
            best_desc = j->cfg.desc;
        }
        if (!lib)
            best_own = ORCH_MIN(best_own, j->median_s);
        lib_ok += lib;
    }
    CHECK_MSG(rc != ST_OK || lib_ok >= 1, "%s: no cuDNN algorithm ran", name);
    printf("  %-18s %d cuDNN configs, %d ok; best %8.2f us (%s); generated %8.2f us\n", name, nlib,
           lib_ok, 1e6 * best_lib, best_desc, 1e6 * best_own);
    if (values)
        prim_values_free(g->pg, values);
    free(jobs);
}

// A random accepted convolution: any of the shapes and epilogues cuDNN takes.
static ConvCase random_case(int i, char *name, size_t n) {
    static const int epis[] = {E_NONE, E_BIAS, E_BIAS_RELU, E_BIAS_Z, E_BIAS_Z_RELU};
    ConvCase k;
    memset(&k, 0, sizeof k);
    snprintf(name, n, "random%d", i);
    k.name = name;
    k.N = rnd_int(1, 3);
    k.G = rnd() < 0.3 ? 1 : rnd_int(1, 4);
    bool dw = rnd() < 0.25;
    k.C = dw ? rnd_int(1, 24) : k.G * rnd_int(1, 8);
    k.G = dw ? k.C : k.G;
    k.K = k.G * rnd_int(1, dw ? 2 : 8);
    for (int d = 0; d < 2; d++) {
        int64_t ks = rnd_int(1, 5);
        k.stride[d] = rnd_int(1, 2);
        k.dil[d] = ks > 1 && rnd() < 0.3 ? 2 : 1;
        k.pb[d] = k.pe[d] = rnd_int(0, ks / 2 + (k.dil[d] - 1));
        *(d ? &k.S : &k.R) = ks;
        int64_t span = k.dil[d] * (ks - 1) + 1;
        *(d ? &k.W : &k.H) = rnd_int(ORCH_MAX(span - 2 * k.pb[d], 1), 29);
    }
    k.epi = epis[rnd_int(0, (int64_t)ORCH_COUNT(epis) - 1)];
    k.variant = B_1C11;
    return k;
}

static void test_gpu_lab(void) {
    if (!need_gpu())
        return;
    for (size_t i = 0; i < ORCH_COUNT(ok_cases); i++) {
        CG g;
        if (cg_build(&g, &ok_cases[i]))
            lab_case(&g, ok_cases[i].name, &g_fp32, 1e-4, false);
        cg_free(&g);
    }
    for (int i = 0; i < 8; i++) {
        char name[32];
        ConvCase k = random_case(i, name, sizeof name);
        printf(
            "  %-18s x %lldx%lldx%lldx%lld, w %lldx%lldx%lldx%lld, groups %lld, stride %lld,%lld, "
            "dilation %lld,%lld, pad %lld,%lld, epilogue %d\n",
            name, (long long)k.N, (long long)k.C, (long long)k.H, (long long)k.W, (long long)k.K,
            (long long)(k.C / k.G), (long long)k.R, (long long)k.S, (long long)k.G,
            (long long)k.stride[0], (long long)k.stride[1], (long long)k.dil[0],
            (long long)k.dil[1], (long long)k.pb[0], (long long)k.pb[1], k.epi);
        CG g;
        if (cg_build(&g, &k)) {
            DnnCall call;
            CHECK_MSG(dnn_analyse(g.pg, &g.cs->c[g.cand], &g_fp32, &call), "%s refused", name);
            lab_case(&g, name, &g_fp32, 1e-4, false);
        }
        cg_free(&g);
    }
    // TF32: tensor-op math, checked at TF32's tolerance.
    const TargetOptions tf32 = {.precision = PREC_TF32};
    ConvCase big = {"bias_relu_tf32", 4,     64, 28, 28, 64, 3, 3, 1, S1, S1, P1, P1,
                    E_BIAS_RELU,      B_1C11};
    CG g;
    if (cg_build(&g, &big)) {
        double tol = lab_candidate_tolerance(g.pg, &g.cs->c[g.cand], PREC_TF32);
        lab_case(&g, big.name, &tf32, tol, true);
    }
    cg_free(&g);
}

// Half storage: every cuDNN config (and the emitter's first) of every half case against the
// interpreter, at the tolerance the compile driver gives the candidate under the precision of
// its type (the lab raises it to the half output's own rounding: 2e-3 fp16, 1.6e-2 bf16).
static void test_gpu_half_lab(void) {
    if (!need_gpu())
        return;
    for (size_t i = 0; i < ORCH_COUNT(half_cases); i++) {
        const ConvCase *k = &half_cases[i].k;
        bool bf = half_cases[i].dt == DT_BFLOAT16;
        const TargetOptions o = {.precision = bf ? PREC_BF16 : PREC_FP16};
        CG g;
        if (cg_build_as(&g, k, half_cases[i].dt, half_cases[i].store)) {
            KernelConfig cf[1];
            int n = dnn_configs(g.pg, &g.cs->c[g.cand], &g_hw, &o, cf, 1);
            CHECK_MSG(n == 1 && strstr(cf[0].desc, bf ? "data=bf16" : "data=half"), "%s: %d: %s",
                      k->name, n, n ? cf[0].desc : "");
            lab_case(&g, k->name, &o,
                     lab_candidate_tolerance(g.pg, &g.cs->c[g.cand], bf ? PREC_BF16 : PREC_FP16),
                     false);
        }
        cg_free(&g);
    }
}

// The benchmark models' convolution shapes (fp16 half storage, as bench/gpu/run.py compiles
// them), every cuDNN config printed with its time: the fast style transfer's residual 3x3 (128
// channels at 56x56 after the reflect pad) with and without the fused bias, NHWC and NCHW, its
// stride-2 conv, and a 1x1 of CSPDarknet53's stage 0. Checked like the half cases.
static const HalfCase bench_cases[] = {
    {{"st_res_nhwc_bias", 1, 128, 58, 58, 128, 3, 3, 1, S1, S1, P0, P0, E_BIAS, B_1C11},
     F16,
     S_NHWC},
    {{"st_res_nhwc", 1, 128, 58, 58, 128, 3, 3, 1, S1, S1, P0, P0, E_NONE, B_1C11}, F16, S_NHWC},
    {{"st_res_nchw_bias", 1, 128, 58, 58, 128, 3, 3, 1, S1, S1, P0, P0, E_BIAS, B_1C11}, F16, 0},
    {{"st_down_nhwc_bias", 1, 64, 114, 114, 128, 3, 3, 1, {2, 2}, S1, P0, P0, E_BIAS, B_1C11},
     F16,
     S_NHWC},
    {{"csp_1x1_nhwc", 1, 64, 208, 208, 64, 1, 1, 1, S1, S1, P0, P0, E_NONE, B_1C11}, F16, S_NHWC},
    {{"csp_1x1_nchw", 1, 64, 208, 208, 64, 1, 1, 1, S1, S1, P0, P0, E_NONE, B_1C11}, F16, 0},
};

static void test_gpu_bench_shapes(void) {
    if (!need_gpu())
        return;
    for (size_t i = 0; i < ORCH_COUNT(bench_cases); i++) {
        const ConvCase *k = &bench_cases[i].k;
        const TargetOptions o = {.precision = PREC_FP16};
        CG g;
        if (cg_build_as(&g, k, bench_cases[i].dt, bench_cases[i].store))
            lab_case(&g, k->name, &o, lab_candidate_tolerance(g.pg, &g.cs->c[g.cand], PREC_FP16),
                     true);
        cg_free(&g);
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

// A plan of one cuDNN kernel through the module blob and the session (proposed and built under
// opt).
static void session_case_as(const ConvCase *k, DType dt, int store, const TargetOptions *opt) {
    CG g;
    if (!cg_build_as(&g, k, dt, store)) {
        cg_free(&g);
        return;
    }
    const Candidate *c = &g.cs->c[g.cand];
    KernelConfig cfg[1];
    int n = dnn_configs(g.pg, c, &g_hw, opt, cfg, 1);
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
    CHECK(rc != ST_OK || (l && l->lib == CUDA_LIB_CUDNN && l->dnn.version == dnn_version()));
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
        CHECK_MSG(cuda_session_num_launches(s) == 1 && ln && strncmp(ln, "cudnn:", 6) == 0,
                  "%d launches, the first '%s'", cuda_session_num_launches(s), ln ? ln : "");
    }
    const Tensor *ot = g.pg->tensors[g.out];
    double tol = dt == DT_FLOAT
                     ? 1e-4
                     : lab_candidate_tolerance(g.pg, c, dt == DT_BFLOAT16 ? PREC_BF16 : PREC_FP16);
    for (int run = 0; run < 3 && rc == ST_OK; run++) {
        for (int i = 0; i < g.n_in; i++) {
            const Tensor *it = g.pg->tensors[g.pg->inputs[i]];
            fill_values(it->dtype, g.in[i], tensor_numel(it));
        }
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
            printf("  %-18s session, profiled: %.2f us (%s)\n", k->name, times ? 1e6 * times[0] : 0,
                   cfg[0].desc);
        }
        free(ref[0]);
        free(got);
    }
    cuda_session_free(s);
    s = NULL;
    // A call chosen with another library version.
    if (rc == ST_OK && u.n == 1 && u.launches[0].lib == CUDA_LIB_CUDNN) {
        u.launches[0].dnn.version += 1;
        Err e2 = {0};
        CHECK(cuda_session_create(g.pg, plan, img, img_size, &u, NULL, &s, &e2) != ST_OK && !s);
        CHECK_MSG(strstr(e2.msg, "compiled with cuDNN") && strstr(e2.msg, "recompile"), "%s",
                  e2.msg);
        cuda_session_free(s);
    }
    free(blob);
    free(cubin);
    cuda_launch_table_free(&t);
    cuda_launch_table_free(&u);
    plan_free(plan);
    cg_free(&g);
}

static void session_case(const ConvCase *k) {
    session_case_as(k, DT_FLOAT, 0, &g_fp32);
}

static void session_half(const HalfCase *h) {
    const TargetOptions o = {.precision = h->dt == DT_BFLOAT16 ? PREC_BF16 : PREC_FP16};
    session_case_as(&h->k, h->dt, h->store, &o);
}

static void test_gpu_session(void) {
    if (!need_gpu())
        return;
    session_case(&ok_cases[2]);   // bias + relu
    session_case(&ok_cases[6]);   // depthwise
    session_case(&ok_cases[15]);  // residual
    session_case(&ok_cases[11]);  // odd shapes, no fused identity
    session_half(&half_cases[8]); // float16 residual
    session_half(&half_cases[7]); // bfloat16 depthwise 5x5 stride 2, bias only
}

// ---- a compiled model ----

// io.txt's file for tensor `name` of kind `kind` ("input" / "output"), or NULL.
static char *io_file(const char *dir, const char *kind, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/io.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[1024], k[64], n[512], p[512];
    char *found = NULL;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %511s %511s", k, n, p) == 3 && strcmp(k, kind) == 0 &&
            strcmp(n, name) == 0) {
            found = xmalloc(strlen(dir) + strlen(p) + 2);
            sprintf(found, "%s/%s", dir, p);
        }
    fclose(f);
    return found;
}

// args.txt's --input-shapes value ("" when none).
static void input_shapes(const char *dir, char *out, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/args.txt", dir);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char word[512];
    bool next = false;
    while (fscanf(f, "%511s", word) == 1) {
        if (next) {
            snprintf(out, n, "%s", word);
            break;
        }
        next = strcmp(word, "--input-shapes") == 0;
    }
    fclose(f);
}

static void test_gpu_compiled_model(void) {
    if (!need_gpu())
        return;
    char onnx[1024];
    snprintf(onnx, sizeof onnx, "%s/model.onnx", g_model_dir);
    if (access(onnx, R_OK) != 0) {
        printf("  skip: no model at %s (tests/models/gen_models.py makes it)\n", onnx);
        return;
    }
    char dir[] = "/tmp/orch_cudnn_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char art[1100], db[1100], shapes[512];
    snprintf(art, sizeof art, "%s/model.orch", dir);
    snprintf(db, sizeof db, "%s/profile.db", dir);
    input_shapes(g_model_dir, shapes, sizeof shapes);
    CompileOptions co = {.target = "cuda", .db_path = db, .input_shapes = shapes, .seed = 1};
    CompileReport rep;
    Err e = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = compile_model(onnx, &co, art, &rep, &e);
    CHECK_MSG(rc == ST_OK, "orch compile -t cuda %s: %s", onnx, e.msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc == ST_OK)
        printf("  compiled %s: %d kernels, %d configs measured, predicted %.1f us, in %.1f s\n",
               onnx, rep.kernels, rep.measured, 1e6 * rep.predicted_s,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    ArtifactContents a;
    memset(&a, 0, sizeof a);
    HwInfo hw;
    CudaSession *s = NULL;
    if (rc == ST_OK && (rc = artifact_read(art, &a, &e)) == ST_OK &&
        (rc = cuda_hw_detect(&(CudaHw){0}, &hw, &e)) == ST_OK)
        rc = cuda_session_create_artifact(&a, &hw, NULL, &s, &e);
    CHECK_MSG(rc == ST_OK, "loading %s: %s", art, e.msg);
    if (rc == ST_OK)
        CHECK_MSG(strstr(a.h.fingerprint, "|cudnn="), "fingerprint '%s'", a.h.fingerprint);
    const PrimGraph *pg = rc == ST_OK ? cuda_session_graph(s) : NULL;
    int ni = pg ? pg->n_inputs : 0, no = pg ? pg->n_outputs : 0;
    HostTensor *in = xcalloc((size_t)ni + 1, sizeof *in),
               *want = xcalloc((size_t)no + 1, sizeof *want);
    void **ins = xcalloc((size_t)ni + 1, sizeof(void *)),
         **outs = xcalloc((size_t)no + 1, sizeof(void *));
    for (int i = 0; i < ni && rc == ST_OK; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        char *f = io_file(g_model_dir, "input", t->name);
        rc = f ? tensor_file_read(f, &in[i], &e) : err_set(&e, ST_INVALID, "no file");
        CHECK_MSG(rc == ST_OK && tensor_numel(t) * 4 == (int64_t)tensor_nbytes(t), "input %s: %s",
                  t->name, e.msg);
        ins[i] = in[i].data;
        free(f);
    }
    for (int i = 0; i < no && rc == ST_OK; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        char *f = io_file(g_model_dir, "output", t->name);
        rc = f ? tensor_file_read(f, &want[i], &e) : err_set(&e, ST_INVALID, "no file");
        CHECK_MSG(rc == ST_OK, "expected %s: %s", t->name, e.msg);
        outs[i] = xmalloc(tensor_nbytes(t) + 1);
        memset(outs[i], 0xff, tensor_nbytes(t));
        free(f);
    }
    if (rc == ST_OK) {
        rc = cuda_session_run(s, (const void *const *)ins, outs, &e);
        CHECK_MSG(rc == ST_OK, "run: %s", e.msg);
    }
    for (int i = 0; i < no && rc == ST_OK; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        const float *got = outs[i], *ref = want[i].data;
        double worst = 0;
        int64_t bad = 0;
        for (int64_t j = 0; j < tensor_numel(t); j++) {
            double err = fabs((double)got[j] - ref[j]);
            worst = fmax(worst, err);
            bad += !(err <= 1e-5 + 1e-4 * fabs(ref[j]));
        }
        printf("  output %-10s max abs err %.3g (%lld of %lld elements off)\n", t->name, worst,
               (long long)bad, (long long)tensor_numel(t));
        CHECK_MSG(bad == 0, "output %s: %lld elements off", t->name, (long long)bad);
    }
    int dnn = 0, lt = 0, nl = s ? cuda_session_num_launches(s) : 0;
    for (int i = 0; i < nl; i++) {
        const char *name = cuda_session_launch_name(s, i);
        if (strncmp(name, "cudnn:", 6) == 0) {
            dnn++;
            printf("  chose cuDNN: %s (nodes %s)\n", name, cuda_session_launch_nodes(s, i));
        }
        lt += strncmp(name, "cublaslt:", 9) == 0;
    }
    if (s)
        printf("  %d launches: %d cuDNN calls, %d cuBLASLt calls, the rest generated kernels\n", nl,
               dnn, lt);
    for (int i = 0; i < ni; i++)
        free(in[i].data);
    for (int i = 0; i < no; i++) {
        free(want[i].data);
        free(outs[i]);
    }
    free(in);
    free(want);
    free(ins);
    free(outs);
    cuda_session_free(s);
    artifact_contents_free(&a);
    unlink(art);
    unlink(db);
    rmdir(dir);
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    if (argc > 2)
        g_model_dir = argv[2];
    printf("seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    g_api = cuda_api_load(&g_load_err);
    printf("driver: %s; cuDNN: %s\n", g_api ? "present, with a device" : g_load_err.msg,
           dnn_describe_load());
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
    RUN(test_nhwc_pass_candidates);
    RUN(test_descriptors);
    RUN(test_blob);
    RUN(test_gpu_lab);
    RUN(test_gpu_half_lab);
    RUN(test_gpu_bench_shapes);
    RUN(test_gpu_session);
    RUN(test_gpu_compiled_model);
    return CHECK_DONE();
}
