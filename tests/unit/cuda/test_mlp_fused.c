// Unit tests of the fused MLP chain kernels: candidates/mlp_chains.c proposes every run
// of 2..8 dense layers as one candidate; the C target (backend/cpu/emit_mlp.c) and the CUDA target
// (backend/cuda/emit_mlp_cuda.c: block, warp and tensor-core variants) generate them. Random MLPs
// (2-8 layers, widths 1-256 with odd ones, batches 1, primes and larger, every activation: relu,
// sigmoid, tanh, erf gelu, sin*sigmoid, silu, none) are built as primitive graphs (and one
// through the ONNX importer, PyTorch's Gemm form), cleaned up, enumerated; so are float16 and
// bfloat16 MLPs as half storage leaves them (input CAST from float32, output half or CAST back:
// half_cases). The test checks that exactly the expected chain candidates exist, then:
//   CPU: every chain candidate in its top configs is emitted, built, run on random inputs and
//   compared with the primitive interpreter at |got - ref| <= 1e-4 |ref| + 1e-4 max|ref|.
//   CUDA compile: the same candidates for a described A100 (sm_80) and H100 (sm_90a), compiled
//   with NVRTC (skips when NVRTC cannot be loaded): the longest chain of a case in its best
//   float32 configs and in the best config of every variant and epilogue mode under every
//   precision (register epilogues only on a GPU: seconds of NVRTC each), the shorter chains in
//   their best SIMT config.
//   CUDA run: on a GPU, the kernels for the detected device run and are compared at their
//   precision's tolerance (the compile driver's, lab_candidate_tolerance: 1e-4 for float32 and
//   3xtf32); half chains against the interpreter at 4 times half storage's own effect on the
//   chain (the interpreter against the widened graph) or the lab's tolerance, whichever is
//   larger (ORCH_MLP_HALF_ERR=1 prints each kernel's error beside those); without a GPU the
//   case prints a skip line (ORCH_REQUIRE_GPU=1 makes it fail). The C target refuses half chains.
//   sin_guard: sines of |x| up to 1e9 in an epilogue (the deferred epilogue's exact redo).
//   layernorm_cases: MLPs with a LayerNorm between layers through the importer (widths 32, 64,
//   96, 128; depths 2 to 4; odd row counts; LayerNorm before or after the activation, and the
//   post-norm residual LN(x + act(fc(x)))): the chains and their row reductions (MlpChain.red),
//   the configs offered (block and the tensor cores' epi=smem reduce rows), checked as above
//   (CUDA: the longest chain in the best config of every variant and MT), two in half storage.
//   layernorm_boundaries: the
//   reductions that stop a chain (over the rows, a row max, a statistic that is an output or
//   without keepdims) and an RMSNorm inside one.
//   gpu_timing (GPU only): the benchmark's 6 x 64 sin*sigmoid chain at 65536 rows in every
//   config of every variant, checked and timed; prints the times and where the device model's
//   first choice ranks.
// Also: `unit_mlp_fused --write-model FILE [BATCH [relu|gated|layernorm [LAYERS [WIDTH]]]]` writes
// the benchmark's 6-layer 64-wide sin*sigmoid MLP (PyTorch's export form; Relu instead with
// `relu`; the gated form sin(fc(x)) * sigmoid(x) with `gated`; Linear-LayerNorm-ReLU layers,
// 6 x 64 unless given, with `layernorm`) as ONNX, for `orch compile`.
// Environment: ORCH_TEST_SEED; ORCH_TEST_ONLY=CASE runs one case (fixed_cases, random_cases, ...);
// ORCH_MLP_DUMP=1 prints the CUDA sources (sm_90a; =TEXT: the configs whose description has TEXT); ORCH_CUGEN_EMIT_ONLY=1 (no GPU) skips NVRTC;
// ORCH_MLP_NO_CPU=1 skips the CPU kernels (a GPU machine without a C compiler);
// ORCH_MLP_GPU_ONLY=1 compiles for the detected GPU alone; ORCH_MLP_BENCH_BATCH=N,
// ORCH_MLP_BENCH_ACT=relu|layernorm (with ORCH_MLP_BENCH_LAYERS, ORCH_MLP_BENCH_WIDTH) and
// ORCH_MLP_BENCH_DTYPE=f16|bf16 (half storage) change gpu_timing's chain,
// ORCH_MLP_BENCH_ONLY=TEXT keeps its configs whose description contains TEXT;
// ORCH_MLP_ALL_CONFIGS=1 makes cuda_configs print every config with its estimate.
#include "candidates/candidates.h"
#include "backend/kernel_lab.h"
#include "../cuda_hw.h"
#include "../gpu_check.h"
#include "prim/prim_build.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "orchestrate/cost_model.h"
#include "orchestrate/orchestrate.h"
#include "orchestrate/selection_run.h"
#include "interp/prim_interp.h"
#include "backend/cpu/cbuild.h"
#include "backend/cpu/cgen.h"
#include "backend/cpu/cgen_linear.h"
#include "backend/cpu/cgen_mlp.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/cugen_mlp.h"
#include "backend/cuda/nvrtc.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static HwInfo g_hw;
static TargetMachine g_m; // the CPU target on this machine (g_hw is its hw)
static CudaHw g_cu[2]; // described A100 (sm_80), H100 (sm_90a)
static bool g_nvrtc;
static const CudaApi *g_api;
static CudaDevice g_dev;
static CudaHw g_dhw; // the detected device
static Err g_gpu_err;
static int g_cases, g_chains, g_cpu_kernels, g_cu_kernels, g_gpu_ran, g_half_cases;
static bool g_no_cpu; // ORCH_MLP_NO_CPU=1: no C compiler here (a GPU machine), CUDA halves only
static bool g_gpu_only; // ORCH_MLP_GPU_ONLY=1: with a GPU, compile for it alone
static bool g_sm90_only; // ORCH_CUGEN_SM90_ONLY=1 (make test): no GPU, the described H100 alone
// ORCH_CUGEN_SAMPLE=N (make test, no GPU): every kernel is emitted, but NVRTC compiles only the
// first of each module and every N-th after it; make test-nvrtc and GPU runs compile them all.
static int g_sample = 1;
static int g_sampled_out;
static bool g_fp32_only; // sin_guard: chain_configs offers float32's configs alone
// layernorm_cases: a family (chain_configs' `families`) is a variant, epilogue mode and MT, so
// that the row statistics run in 16- and 32-row warp tiles.
static bool g_family_mt;

// A_SIN (the gated chain's sin(t + b) * sigmoid(x)) is not drawn by the random cases.
enum { A_NONE, A_RELU, A_SIGMOID, A_TANH, A_GELU, A_SINSIG, A_SILU, A_COUNT, A_SIN = A_COUNT };
static const char *act_name[] = {"none", "relu",   "sigmoid", "tanh",
                                 "gelu", "sinsig", "silu",    "sin"};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static float *rand_buf(int64_t n, float scale) {
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64 + 64));
    for (int64_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

static int add_input(PrimGraph *pg, const char *name, int rank, const int64_t *dims) {
    Tensor *t = pg_add_tensor(pg, name, DT_FLOAT, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

static void add_output(PrimGraph *pg, int t) {
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = t;
}

// A constant of uniform values in [-scale, scale).
static int add_const(PB *b, int rank, const int64_t *dims, float scale) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = rand_buf(n, scale);
    int t = pb_const(b, DT_FLOAT, rank, dims, v);
    free(v);
    return t;
}

static int activation(PB *b, int y, int act) {
    switch (act) {
    case A_RELU: return pb_ew1(b, EW_RELU, y);
    case A_SIGMOID: return pb_ew1(b, EW_SIGMOID, y);
    case A_TANH: return pb_ew1(b, EW_TANH, y);
    case A_GELU:
        return pb_ew2(b, EW_MUL, pb_ew2i(b, EW_MUL, y, 0.5),
                      pb_ew2i(b, EW_ADD, pb_ew1(b, EW_ERF, pb_ew2i(b, EW_MUL, y, M_SQRT1_2)), 1.0));
    case A_SINSIG: return pb_ew2(b, EW_MUL, pb_ew1(b, EW_SIN, y), pb_ew1(b, EW_SIGMOID, y));
    case A_SILU: return pb_ew2(b, EW_MUL, y, pb_ew1(b, EW_SIGMOID, y));
    case A_SIN: return pb_ew1(b, EW_SIN, y);
    default: return y;
    }
}

typedef struct Case {
    char name[96];
    int layers;
    int64_t width[MLP_LAYERS_MAX + 1]; // width[0]: input, width[l + 1]: layer l's output
    int act[MLP_LAYERS_MAX];
    int64_t batch;
    int64_t lead0; // > 0: rows as [lead0, batch / lead0] (a rank-3 activation)
    bool bias;
    // The bias's shape: 0 [N] added to the product, 1 [1, N], 2 a scalar [1], 3 [N] with the
    // operands swapped (bias + product). The tensor-core kernels fold all four into their
    // accumulators (emit_mlp_cuda.c, bias_fold).
    int bias_shape;
    // Epilogues that read the layer's input x as well (layers with K == N only): G_GATED
    // act(t + b) * sigmoid(x), G_RESIDUAL x + act(t + b), G_MIXED (t + b) * tanh(x) + 0.5 x.
    int gate;
} Case;

enum { G_NONE, G_GATED, G_RESIDUAL, G_MIXED };

static PrimGraph *mlp_graph(const Case *k) {
    PrimGraph *pg = prim_graph_create(NULL);
    int64_t xd[3];
    int rank = 2;
    if (k->lead0 > 0) {
        xd[0] = k->lead0;
        xd[1] = k->batch / k->lead0;
        xd[2] = k->width[0];
        rank = 3;
    } else {
        xd[0] = k->batch;
        xd[1] = k->width[0];
    }
    int y = add_input(pg, "x", rank, xd);
    PB b = {pg, "mlp"};
    for (int l = 0; l < k->layers; l++) {
        const int64_t wd[] = {k->width[l], k->width[l + 1]}, bd[] = {k->width[l + 1]};
        int xl = y; // the layer's input
        // Weights scaled by 1/sqrt(K) keep the activations of every layer of order 1.
        y = pb_matmul(&b, y, add_const(&b, 2, wd, (float)(1.7 / sqrt((double)k->width[l]))));
        if (k->bias) {
            const int64_t b2[] = {1, k->width[l + 1]}, b0[] = {1};
            int bt = k->bias_shape == 1   ? add_const(&b, 2, b2, 0.5f)
                     : k->bias_shape == 2 ? add_const(&b, 1, b0, 0.5f)
                                          : add_const(&b, 1, bd, 0.5f);
            y = k->bias_shape == 3 ? pb_ew2(&b, EW_ADD, bt, y) : pb_ew2(&b, EW_ADD, y, bt);
        }
        y = activation(&b, y, k->act[l]);
        if (k->width[l] == k->width[l + 1] && k->gate == G_GATED)
            y = pb_ew2(&b, EW_MUL, y, pb_ew1(&b, EW_SIGMOID, xl));
        else if (k->width[l] == k->width[l + 1] && k->gate == G_RESIDUAL)
            y = pb_ew2(&b, EW_ADD, xl, y);
        else if (k->width[l] == k->width[l + 1] && k->gate == G_MIXED)
            y = pb_ew2(&b, EW_ADD, pb_ew2(&b, EW_MUL, y, pb_ew1(&b, EW_TANH, xl)),
                       pb_ew2i(&b, EW_MUL, xl, 0.5));
    }
    add_output(pg, y);
    return pg;
}

static bool is_half(DType t) {
    return t == DT_FLOAT16 || t == DT_BFLOAT16;
}

// A constant of dtype dt (float32, or float16 / bfloat16 rounded to nearest) of uniform values.
static int add_const_dt(PB *b, DType dt, int rank, const int64_t *dims, float scale) {
    if (dt == DT_FLOAT)
        return add_const(b, rank, dims, scale);
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *v = rand_buf(n, scale);
    uint16_t *h = xmalloc(sizeof(uint16_t) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        h[i] = dt == DT_FLOAT16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
    int t = pb_const(b, dt, rank, dims, h);
    free(h);
    free(v);
    return t;
}

// The MLP under half storage as the storage pass leaves it (fission/passes_storage.c): the
// float32 input CAST to dt, weights, biases and every activation dt, and the output dt or, with
// cast_out, CAST back to float32 (the model output's boundary; it joins the last epilogue).
static PrimGraph *mlp_graph_half(const Case *k, DType dt, bool cast_out) {
    PrimGraph *pg = prim_graph_create(NULL);
    int64_t xd[3];
    int rank = 2;
    if (k->lead0 > 0) {
        xd[0] = k->lead0;
        xd[1] = k->batch / k->lead0;
        xd[2] = k->width[0];
        rank = 3;
    } else {
        xd[0] = k->batch;
        xd[1] = k->width[0];
    }
    int x = add_input(pg, "x", rank, xd);
    PB b = {pg, "mlp"};
    int y = pb_cast(&b, x, dt);
    for (int l = 0; l < k->layers; l++) {
        const int64_t wd[] = {k->width[l], k->width[l + 1]}, bd[] = {k->width[l + 1]};
        int xl = y; // the layer's input
        y = pb_matmul(&b, y, add_const_dt(&b, dt, 2, wd, (float)(1.7 / sqrt((double)k->width[l]))));
        if (k->bias)
            y = pb_ew2(&b, EW_ADD, y, add_const_dt(&b, dt, 1, bd, 0.5f));
        y = activation(&b, y, k->act[l]);
        if (k->width[l] == k->width[l + 1] && k->gate == G_GATED)
            y = pb_ew2(&b, EW_MUL, y, pb_ew1(&b, EW_SIGMOID, xl));
        else if (k->width[l] == k->width[l + 1] && k->gate == G_RESIDUAL)
            y = pb_ew2(&b, EW_ADD, xl, y);
    }
    if (cast_out)
        y = pb_cast(&b, y, DT_FLOAT);
    add_output(pg, y);
    return pg;
}

// pg with every float16 / bfloat16 tensor float32 (constants converted exactly, the same tensor
// ids and primitives): the interpreter on it gives the values the half graph approximates with
// no rounding between its instructions, the yardstick of how far half storage moves a chain.
static PrimGraph *widen(const PrimGraph *pg) {
    PrimGraph *w = prim_graph_create(NULL);
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        DType dt = is_half(T->dtype) ? DT_FLOAT : T->dtype;
        Tensor *n;
        if (T->kind == TK_CONST) { // (the clean-up frees the data of constants nothing reads)
            int64_t ne = T->data ? tensor_numel(T) : 0;
            void *d = T->data ? xmalloc(dtype_size(dt) * (size_t)ne + 1) : NULL;
            for (int64_t i = 0; i < ne; i++)
                elem_set_f64(dt, d, i, elem_get_f64(T->dtype, T->data, i));
            n = pg_add_const(w, T->name, dt, T->rank, T->dims, d, d != NULL);
        } else {
            n = pg_add_tensor(w, T->name, dt, T->rank, T->dims);
            n->kind = T->kind;
        }
        n->producer = T->producer;
        ORCH_ASSERT(n->id == t);
    }
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        Prim *q = pg_add_prim(w, p->kind, p->n_in, p->n_out, p->origin);
        memcpy(q->in, p->in, sizeof(int) * (size_t)p->n_in);
        memcpy(q->out, p->out, sizeof(int) * (size_t)p->n_out);
        q->dead = p->dead;
        q->red = p->red;
        q->lay = p->lay;
        q->lin = p->lin;
        q->node = p->node;
        q->ew.n = p->ew.n;
        if (p->kind == PRIM_ELEMWISE) {
            q->ew.code = arena_memdup(w->arena, p->ew.code, sizeof(EwInstr) * (size_t)p->ew.n);
            for (int k = 0; k < p->ew.n; k++)
                if (is_half(q->ew.code[k].dtype))
                    q->ew.code[k].dtype = DT_FLOAT;
        }
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        w->inputs = xrealloc(w->inputs, sizeof(int) * (size_t)(w->n_inputs + 1));
        w->inputs[w->n_inputs++] = pg->inputs[i];
    }
    for (int i = 0; i < pg->n_outputs; i++)
        add_output(w, pg->outputs[i]);
    return w;
}

// Every primitive of pg computed by the interpreter into buf (per tensor; constants and graph
// inputs set).
static void eval_prims(const PrimGraph *pg, void **buf) {
    for (int i = 0; i < pg->n_prims; i++) {
        const Prim *p = pg->prims[i];
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        for (int j = 0; j < p->n_in; j++)
            x[j] = buf[p->in[j]];
        size_t nb = tensor_nbytes(pg->tensors[p->out[0]]);
        buf[p->out[0]] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
        Err e = {0};
        int rc = prim_eval(pg, p, x, buf[p->out[0]], &e);
        ORCH_ASSERT(rc == ST_OK);
        free(x);
    }
}

// Every tensor of the graph computed by the interpreter (graph inputs random).
static void **eval_all(const PrimGraph *pg) {
    void **buf = xcalloc((size_t)pg->n_tensors, sizeof(void *));
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        if (T->data) {
            size_t nb = tensor_nbytes(T);
            buf[t] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
            memcpy(buf[t], T->data, nb);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++)
        buf[pg->inputs[i]] = rand_buf(tensor_numel(pg->tensors[pg->inputs[i]]), 1.0f);
    eval_prims(pg, buf);
    return buf;
}

// Like eval_all, with the graph inputs of `like` (a graph of the same tensor ids: widen).
static void **eval_like(const PrimGraph *pg, void **like) {
    void **buf = xcalloc((size_t)pg->n_tensors, sizeof(void *));
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        if (T->data) {
            size_t nb = tensor_nbytes(T);
            buf[t] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
            memcpy(buf[t], T->data, nb);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        size_t nb = tensor_nbytes(pg->tensors[pg->inputs[i]]);
        buf[pg->inputs[i]] = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
        memcpy(buf[pg->inputs[i]], like[pg->inputs[i]], nb);
    }
    eval_prims(pg, buf);
    return buf;
}

static void free_all(const PrimGraph *pg, void **buf) {
    for (int t = 0; t < pg->n_tensors; t++)
        free(buf[t]);
    free(buf);
}

// The worst excess over |got - ref| <= tol |ref| + tol max|ref| (<= 0: pass); the compile
// driver's check (lab_outputs_agree_tol) has the same form.
static double compare(const float *got, const float *ref, int64_t n, double tol, int64_t *bad) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    double worst = -1;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), bound = tol * fabs(ref[i]) + tol * mx;
        if (!(d <= bound) && (*bad < 0 || d - bound > worst)) {
            worst = isnan(d) ? INFINITY : d - bound;
            *bad = i;
        }
    }
    return worst;
}

// max |got - ref| / max |ref| (the GPU benchmark's error measure).
// v rounded to `bits` mantissa bits, to nearest, ties to even.
static float round_bits(float v, int bits) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) == 0x7f800000u || bits >= 23)
        return v;
    int drop = 23 - bits;
    u = (u + (1u << (drop - 1)) - 1 + ((u >> drop) & 1u)) & ~((1u << drop) - 1);
    memcpy(&v, &u, 4);
    return v;
}

// The chain candidate's output as a tensor-core variant computes it: the interpreter over its
// primitives (in graph order, inputs from buf) with every LINEAR operand rounded to `bits`
// mantissa bits (10: TF32 and FP16, 7: BF16), as the kernel rounds the weights and the
// activations between layers. Its tolerance then bounds the kernel's own error (summation
// order, float32 accumulation, the epilogues' fast transcendentals), not the rounding's effect
// on a chain whose output cancels (a deep odd-width chain's TF32 error reached 4% of max|out|).
static float *rounded_chain_output(const PrimGraph *pg, const Candidate *c, void **buf, int bits) {
    void **loc = xcalloc((size_t)pg->n_tensors + 1, sizeof(void *));
    int *order = xmalloc(sizeof(int) * (size_t)(c->n_prims + 1));
    memcpy(order, c->prims, sizeof(int) * (size_t)c->n_prims);
    for (int i = 1; i < c->n_prims; i++)
        for (int j = i; j > 0 && order[j] < order[j - 1]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    bool ok = true;
    for (int i = 0; i < c->n_prims && ok; i++) {
        const Prim *p = pg->prims[order[i]];
        const void *x[8] = {0};
        float *tmp[8] = {0};
        ORCH_ASSERT(p->n_in <= 8);
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t < 0)
                continue;
            x[j] = loc[t] ? loc[t] : buf[t];
            if (p->kind == PRIM_LINEAR && pg->tensors[t]->dtype == DT_FLOAT) {
                int64_t n = tensor_numel(pg->tensors[t]);
                tmp[j] = xmalloc(sizeof(float) * (size_t)(n + 1));
                for (int64_t k = 0; k < n; k++)
                    tmp[j][k] = round_bits(((const float *)x[j])[k], bits);
                x[j] = tmp[j];
            }
        }
        void *y = xmalloc(tensor_nbytes(pg->tensors[p->out[0]]) + 4);
        Err e = {0};
        ok = prim_eval(pg, p, x, y, &e) == ST_OK;
        CHECK_MSG(ok, "rounded reference: %s", e.msg);
        loc[p->out[0]] = y;
        for (int j = 0; j < 8; j++)
            free(tmp[j]);
    }
    float *out = ok ? loc[c->output] : NULL;
    for (int t = 0; t < pg->n_tensors; t++)
        if (t != c->output || !ok)
            free(loc[t]);
    free(loc);
    free(order);
    return out;
}

static double rel_error(const float *got, const float *ref, int64_t n) {
    double mx = 0, err = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(ref[i]));
        double d = fabs((double)got[i] - ref[i]);
        err = isnan(d) ? INFINITY : fmax(err, d);
    }
    return mx > 0 ? err / mx : err;
}

// ---- CPU ----

typedef struct Job {
    const Candidate *c;
    KernelConfig cfg;
    CudaLaunch ln;
    char fn[48];
    double tol;   // relative tolerance of the check (float32: 1e-4)
    double time;  // gpu_run with timing: the kernel's time (s)
    double err;   // ... and its max |got - ref| / max |ref|
    int regs, local; // ... registers per thread, local memory bytes per thread (spills)
} Job;

// Emits, builds, runs and checks the chain candidates `chains`: the last (the longest chain) in
// at most k configs, the others in their best.
static void cpu_check(const char *name, const PrimGraph *pg, void **buf, const Candidate **chains,
                      int nc, int k) {
    StrBuf src;
    sb_init(&src);
    sb_puts(&src, target_cpu.prelude(&g_m));
    Job *jobs = xmalloc(sizeof(Job) * (size_t)(nc * 32 + 1));
    int nj = 0;
    for (int i = 0; i < nc; i++) {
        const Candidate *c = chains[i];
        KernelConfig cf[32];
        int n = target_cpu.configs(&g_m, pg, c, cf, i == nc - 1 ? k : 1);
        CHECK_MSG(n >= 1, "%s: chain candidate %d: no CPU config", name, c->id);
        for (int q = 0; q < n; q++) {
            Job *j = &jobs[nj++];
            j->c = c;
            j->cfg = cf[q];
            snprintf(j->fn, sizeof j->fn, "k_%d_%d", c->id, q);
            Err e = {0};
            CHECK_MSG(target_cpu.emit(&g_m, pg, c, &cf[q], j->fn, &src, &e) == ST_OK, "%s: emit %s: %s",
                      name, cf[q].desc, e.msg);
        }
    }
    CModule *mod = NULL;
    Err e = {0};
    int rc = cbuild_module(src.s, NULL, "mlp", &mod, &e);
    CHECK_MSG(rc == ST_OK, "%s: build: %.600s", name, e.msg);
    for (int i = 0; rc == ST_OK && i < nj; i++) {
        const Candidate *c = jobs[i].c;
        CKernelFn f = (CKernelFn)cmodule_sym(mod, jobs[i].fn);
        CHECK_MSG(f != NULL, "%s: no symbol %s", name, jobs[i].fn);
        if (!f)
            continue;
        const void *in[64];
        for (int j = 0; j < c->n_inputs; j++)
            in[j] = buf[c->inputs[j]];
        int64_t n = tensor_numel(pg->tensors[c->output]);
        float *out = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
        for (int64_t x = 0; x < n; x++)
            out[x] = NAN;
        f(in, out);
        int64_t bad;
        double w = compare(out, buf[c->output], n, 1e-4, &bad);
        CHECK_MSG(w <= 0, "%s: chain %d (%d prims) '%s': out[%lld] = %g, want %g", name, c->id,
                  c->n_prims, jobs[i].cfg.desc, (long long)bad, bad >= 0 ? out[bad] : 0.0,
                  bad >= 0 ? ((float *)buf[c->output])[bad] : 0.0);
        free(out);
        g_cpu_kernels++;
    }
    cmodule_free(mod);
    free(jobs);
    sb_free(&src);
}

// ---- CUDA ----

typedef struct Compile {
    const char *src, *arch;
    int rc;
    Err e;
    void *cubin;
    size_t size;
} Compile;

static void *compile_thread(void *arg) {
    Compile *c = arg;
    NvrtcOptions o = {.arch = c->arch};
    if (getenv("ORCH_CUGEN_EMIT_ONLY") && !g_api) { // the sanitizer pass: emitters only
        c->rc = ST_OK;
        return NULL;
    }
    c->rc = nvrtc_compile(c->src, "mlp", &o, &c->cubin, &c->size, &c->e);
    return NULL;
}

// The dtype of a chain's layers.
static DType chain_dtype(const PrimGraph *pg, const Candidate *c) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_LINEAR)
            return pg->tensors[pg->prims[c->prims[i]]->out[0]]->dtype;
    return DT_FLOAT;
}

// The named fields of MLP config k (cugen_mlp.h).
static CuMlpConfig mcfg(const KernelConfig *k) {
    CuMlpConfig q;
    cumlp_config_unpack(k, &q);
    return q;
}

// The relative tolerance of a config's check: the compile driver's (lab_candidate_tolerance)
// for the precision its arithmetic rounds to; 1e-4 for float32 (3xtf32 included). A half
// chain: its type's, at least the kernel lab's floor for a half output (lab_outputs_agree_tol).
static double config_tol(const PrimGraph *pg, const Candidate *c, const KernelConfig *cf) {
    DType dt = chain_dtype(pg, c);
    if (is_half(dt))
        return fmax(lab_candidate_tolerance(pg, c, dt == DT_FLOAT16 ? PREC_FP16 : PREC_BF16),
                    dt == DT_FLOAT16 ? 2e-3 : 1.6e-2);
    switch (mcfg(cf).var) {
    case CUMLP_TF32: return lab_candidate_tolerance(pg, c, PREC_TF32);
    case CUMLP_F16: return lab_candidate_tolerance(pg, c, PREC_FP16);
    case CUMLP_BF16: return lab_candidate_tolerance(pg, c, PREC_BF16);
    default: return 1e-4;
    }
}

// The precision a config is emitted under, as the compile driver would: its variant's (the
// emitted epilogues follow it: cugen_cexpr_dialect), float32 for the SIMT variants.
static Precision emit_precision(const KernelConfig *cf) {
    switch (mcfg(cf).var) {
    case CUMLP_TF32:
    case CUMLP_3XTF32: return PREC_TF32;
    case CUMLP_F16: return PREC_FP16;
    case CUMLP_BF16: return PREC_BF16;
    default: return PREC_FP32;
    }
}

// cugen_emit under emit_precision(cfg).
static int emit_at_precision(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                             const CudaHw *hw, const char *fn, StrBuf *src, CudaLaunch *ln,
                             Err *e) {
    TargetOptions o = {.precision = emit_precision(cfg)};
    return cugen_emit(pg, c, cfg, hw, &o, fn, src, ln, e);
}

// A config's family: its variant and, for the tensor-core variants, its epilogue mode.
static int family(const KernelConfig *cf) {
    CuMlpConfig q = mcfg(cf);
    return (int)((q.var * 4 + q.epi) * 8 + (g_family_mt ? q.mt : 0));
}

// The configs chain c is checked in: the best k under float32 (k = 0: the best SIMT one, whose
// kernel NVRTC compiles in a fraction of a tensor-core kernel's time); with `families` the best
// of every variant and epilogue mode under each precision too (the tensor-core variants are
// offered only under theirs); with all = true every config of every precision.
static int chain_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, int k,
                         bool families, bool all, KernelConfig *out, int cap) {
    static const Precision precs[] = {PREC_FP32, PREC_TF32, PREC_FP16, PREC_BF16};
    int n = 0;
    for (size_t p = 0; p < (g_fp32_only ? 1 : ORCH_COUNT(precs)); p++) {
        TargetOptions o = {.precision = precs[p]};
        KernelConfig cf[64];
        int nc = cugen_mlp_configs(pg, c, hw, &o, cf, 64);
        for (int i = 0; i < nc && n < cap; i++) {
            bool simt = mcfg(&cf[i]).var == CUMLP_BLOCK || mcfg(&cf[i]).var == CUMLP_WARP;
            bool take = all || (p == 0 && (i < k || (k == 0 && simt && n == 0)));
            bool dup = false, seen = false;
            for (int j = 0; j < n; j++) {
                dup = dup || strcmp(out[j].desc, cf[i].desc) == 0;
                seen = seen || family(&out[j]) == family(&cf[i]);
            }
            // Register epilogues unroll one copy of the epilogue per fragment element: seconds
            // of NVRTC each, so the compile-only pass leaves their families to the GPU run.
            if (!g_api && strstr(cf[i].desc, "epi=reg"))
                seen = true;
            if (!dup && (take || (families && !seen)))
                out[n++] = cf[i];
        }
    }
    return n;
}

// Emits the chains for hw (the last, the longest, in its chain_configs; the others in their
// best float32 config) into src; returns the jobs.
// The last n_full chains get the k best configs (and every family's best with `families`), the
// others their best SIMT config.
static Job *cu_emit(const char *name, const PrimGraph *pg, const Candidate **chains, int nc,
                    int n_full, const CudaHw *hw, int k, bool families, StrBuf *src, int *nj) {
    Job *jobs = xmalloc(sizeof(Job) * (size_t)(nc * 64 + 1));
    *nj = 0;
    sb_puts(src, cugen_prelude());
    for (int i = 0; i < nc; i++) {
        const Candidate *c = chains[i];
        CHECK_MSG(cugen_mlp_supports(pg, c, &(TargetOptions){.precision = PREC_FP32}),
                  "%s: chain candidate %d refused by CUDA", name, c->id);
        KernelConfig cf[64];
        bool full = i >= nc - n_full;
        int n = chain_configs(pg, c, hw, full ? k : 0, full && families, false, cf, 64);
        CHECK_MSG(n >= 1, "%s: chain candidate %d: no CUDA config for %s", name, c->id, hw->arch);
        for (int q = 0; q < n; q++) {
            Job *j = &jobs[(*nj)++];
            memset(j, 0, sizeof *j);
            j->c = c;
            j->cfg = cf[q];
            j->tol = config_tol(pg, c, &cf[q]);
            snprintf(j->fn, sizeof j->fn, "k_%d_%d", c->id, q);
            bool out = !g_api && g_sample > 1 && (*nj - 1) % g_sample != 0;
            StrBuf scratch;
            sb_init(&scratch);
            StrBuf *dst = out ? &scratch : src;
            g_sampled_out += out;
            sb_printf(dst, "// %s: %s\n", j->fn, cf[q].desc);
            Err e = {0};
            CHECK_MSG(emit_at_precision(pg, c, &cf[q], hw, j->fn, dst, &j->ln, &e) == ST_OK,
                      "%s: CUDA emit %s: %s", name, cf[q].desc, e.msg);
            sb_free(&scratch);
        }
    }
    return jobs;
}

// n values of dtype dt as float32 (a fresh buffer).
static float *to_float(DType dt, const void *p, int64_t n) {
    float *f = xmalloc(sizeof(float) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)elem_get_f64(dt, p, i);
    return f;
}

// Runs the jobs of one compiled module on the GPU and checks each against the interpreter; with
// `timing` also times each (the least mean of 3 rounds of 10 back-to-back launches, after 2).
// wbuf: for a half graph, the values of its widened twin (widen), by which the check's tolerance
// is the half storage's own effect on the chain; NULL for a float32 graph.
static void gpu_run(const char *name, const PrimGraph *pg, void **buf, void **wbuf, Job *jobs,
                    int nj, const void *cubin, bool timing) {
    const CudaApi *cu = g_api;
    Err e = {0};
    CUmodule mod = NULL;
    if (CUDA_TRY(cu, &e, cuModuleLoadData, &mod, cubin)) {
        CHECK_MSG(false, "%s: %s", name, e.msg);
        return;
    }
    CUevent ev[2] = {NULL, NULL};
    if (timing && (CUDA_TRY(cu, &e, cuEventCreate, &ev[0], 0) ||
                   CUDA_TRY(cu, &e, cuEventCreate, &ev[1], 0))) {
        CHECK_MSG(false, "%s: %s", name, e.msg);
        timing = false;
    }
    for (int i = 0; i < nj; i++) {
        Job *j = &jobs[i];
        const Candidate *c = j->c;
        CUfunction f;
        struct {
            CUdeviceptr in[ORCH_CUDA_MAX_IN];
            CUdeviceptr out;
        } args;
        memset(&args, 0, sizeof args);
        bool ok = !CUDA_TRY(cu, &e, cuModuleGetFunction, &f, mod, j->fn);
        // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES is 3 in cuda.h.
        if (ok && timing && (CUDA_TRY(cu, &e, cuFuncGetAttribute, &j->regs,
                                      CU_FUNC_ATTRIBUTE_NUM_REGS, f) ||
                             CUDA_TRY(cu, &e, cuFuncGetAttribute, &j->local,
                                      (CUfunction_attribute)3, f)))
            ok = false;
        if (ok && j->ln.smem > 48 * 1024)
            ok = !CUDA_TRY(cu, &e, cuFuncSetAttribute, f,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)j->ln.smem);
        for (int q = 0; ok && q < c->n_inputs; q++) {
            size_t nb = tensor_nbytes(pg->tensors[c->inputs[q]]);
            ok = !CUDA_TRY(cu, &e, cuMemAlloc, &args.in[q], nb + 16) &&
                 !CUDA_TRY(cu, &e, cuMemcpyHtoD, args.in[q], buf[c->inputs[q]], nb);
        }
        int64_t n = tensor_numel(pg->tensors[c->output]);
        DType ot = pg->tensors[c->output]->dtype;
        size_t ob = (size_t)n * dtype_size(ot);
        void *gotr = malloc(ob + 1);
        ok = ok && !CUDA_TRY(cu, &e, cuMemAlloc, &args.out, ob) &&
             !CUDA_TRY(cu, &e, cuMemsetD8, args.out, 0xff, ob); // NaN poison (any float type)
        void *params[] = {&args};
#define LAUNCH()                                                                                   \
    CUDA_TRY(cu, &e, cuLaunchKernel, f, j->ln.grid[0], j->ln.grid[1], j->ln.grid[2],               \
             j->ln.block[0], j->ln.block[1], j->ln.block[2], j->ln.smem, NULL, params, NULL)
        ok = ok && !LAUNCH() && !CUDA_TRY(cu, &e, cuCtxSynchronize) &&
             !CUDA_TRY(cu, &e, cuMemcpyDtoH, gotr, args.out, ob);
        CHECK_MSG(ok, "%s: %s '%s': %s", name, j->fn, j->cfg.desc, e.msg);
        float *got = to_float(ot, gotr, n);
        if (ok && wbuf) {
            // Half storage: the interpreter rounds every intermediate tensor to half, the kernel
            // keeps float32 between layers and rounds the output once (the tensor-core kernels
            // also the activations they multiply, to the half they were). Both approximate the
            // widened graph: allow 4 times the interpreter's own distance from it (as the
            // rounded reference below), never less than the lab's tolerance.
            float *ref = to_float(ot, buf[c->output], n);
            const float *wide = wbuf[c->output];
            double mx = 0, dev = 0, tol = j->tol;
            for (int64_t q = 0; q < n; q++) {
                mx = fmax(mx, fabs(wide[q]));
                dev = fmax(dev, fabs((double)ref[q] - wide[q]));
            }
            if (mx > 0)
                tol = fmax(tol, 4 * dev / mx);
            int64_t bad;
            double w = compare(got, ref, n, tol, &bad);
            j->err = rel_error(got, ref, n);
            CHECK_MSG(w <= 0,
                      "%s: GPU %s chain %d '%s' (tolerance %.2g, half storage's own %.2g): "
                      "out[%lld] = %g, want %g",
                      name, dtype_name(chain_dtype(pg, c)), c->id, j->cfg.desc, tol,
                      mx > 0 ? dev / mx : 0.0, (long long)bad, bad >= 0 ? got[bad] : 0.0,
                      bad >= 0 ? ref[bad] : 0.0);
            if (getenv("ORCH_MLP_HALF_ERR")) // the errors against the lab's tolerance, for reading
                printf("    %s chain %d %-52s err %.2e (lab %.2e, half's own %.2e, vs wide %.2e)\n",
                       dtype_name(chain_dtype(pg, c)), c->id, j->cfg.desc, j->err, j->tol,
                       mx > 0 ? dev / mx : 0.0, rel_error(got, wide, n));
            free(ref);
            g_gpu_ran++;
        } else if (ok) {
            // Tensor cores with rounded operands: against the same rounding (3xtf32 and the
            // SIMT variants: the exact values).
            int64_t v = mcfg(&j->cfg).var, bad;
            int bits = v == CUMLP_TF32 || v == CUMLP_F16 ? 10 : v == CUMLP_BF16 ? 7 : 0;
            float *rref = bits ? rounded_chain_output(pg, c, buf, bits) : NULL;
            const float *ref = rref ? rref : (const float *)buf[c->output];
            // The rounded reference models the operands' rounding, not where a rounding lands
            // after another accumulation order: one operand rounded the other way changes every
            // later layer. Allow 4 times the rounding's own effect on this chain (as the compile
            // driver's end-to-end check does), never less than the tolerance.
            double tol = j->tol;
            if (rref) {
                double mx = 0, dev = 0;
                for (int64_t q = 0; q < n; q++) {
                    const double ex = ((const float *)buf[c->output])[q];
                    mx = fmax(mx, fabs(ex));
                    dev = fmax(dev, fabs(rref[q] - ex));
                }
                if (mx > 0)
                    tol = fmax(tol, 4 * dev / mx);
            }
            double w = compare(got, ref, n, tol, &bad);
            j->err = rel_error(got, buf[c->output], n);
            CHECK_MSG(w <= 0, "%s: GPU chain %d '%s' (tolerance %.2g%s): out[%lld] = %g, want %g",
                      name, c->id, j->cfg.desc, tol, rref ? ", operands rounded" : "",
                      (long long)bad, bad >= 0 ? got[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0);
            free(rref);
            g_gpu_ran++;
        }
        j->time = INFINITY;
        for (int round = 0; ok && timing && round < 4; round++) {
            int reps = round == 0 ? 2 : 10; // round 0 warms up
            ok = !CUDA_TRY(cu, &e, cuEventRecord, ev[0], NULL);
            for (int r = 0; ok && r < reps; r++)
                ok = !LAUNCH();
            float ms = 0;
            ok = ok && !CUDA_TRY(cu, &e, cuEventRecord, ev[1], NULL) &&
                 !CUDA_TRY(cu, &e, cuEventSynchronize, ev[1]) &&
                 !CUDA_TRY(cu, &e, cuEventElapsedTime, &ms, ev[0], ev[1]);
            if (ok && round > 0)
                j->time = fmin(j->time, ms * 1e-3 / reps);
            CHECK_MSG(ok, "%s: timing %s: %s", name, j->cfg.desc, e.msg);
        }
#undef LAUNCH
        free(got);
        free(gotr);
        for (int q = 0; q < c->n_inputs; q++)
            if (args.in[q])
                cu->cuMemFree(args.in[q]);
        if (args.out)
            cu->cuMemFree(args.out);
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cu->cuEventDestroy(ev[i]);
    cu->cuModuleUnload(mod);
}

// Compiles the chains for the described A100 and H100 (and the detected GPU, whose kernels then
// run). families: the longest chain in the best config of every variant too (chain_configs).
static void cu_check(const char *name, const PrimGraph *pg, void **buf, void **wbuf,
                     const Candidate **chains, int nc, int n_full, int k, bool families) {
    if (!g_nvrtc)
        return;
    int nu = 2 + (g_api ? 1 : 0), u0 = g_api && g_gpu_only ? 2 : !g_api && g_sm90_only ? 1 : 0;
    StrBuf src[3];
    Job *jobs[3];
    int nj[3];
    Compile comp[3];
    pthread_t th[3];
    for (int u = u0; u < nu; u++) {
        sb_init(&src[u]);
        const CudaHw *hw = u < 2 ? &g_cu[u] : &g_dhw;
        jobs[u] = cu_emit(name, pg, chains, nc, n_full, hw, k, families || u == 2, &src[u], &nj[u]);
        memset(&comp[u], 0, sizeof comp[u]);
        comp[u].src = src[u].s;
        comp[u].arch = hw->arch;
        if (u == 1 && getenv("ORCH_MLP_DUMP")) // the sm_90a source, for reading
            printf("%s\n", src[u].s);
        pthread_create(&th[u], NULL, compile_thread, &comp[u]);
    }
    for (int u = u0; u < nu; u++) {
        pthread_join(th[u], NULL);
        CHECK_MSG(comp[u].rc == ST_OK, "%s (%s): %.1500s", name, comp[u].arch, comp[u].e.msg);
        if (comp[u].rc == ST_OK && u < 2)
            g_cu_kernels += nj[u];
    }
    if (g_api && comp[2].rc == ST_OK)
        gpu_run(name, pg, buf, wbuf, jobs[2], nj[2], comp[2].cubin, false);
    for (int u = u0; u < nu; u++) {
        free(comp[u].cubin);
        free(jobs[u]);
        sb_free(&src[u]);
    }
}

// ---- the cases ----

// Cleans up pg (merging each layer's epilogue), enumerates with chains, checks the chain
// candidates against `layers` (a single chain: L(L-1)/2 runs of 2..min(L, 8) layers), and runs
// the CPU and CUDA checks on them. Takes ownership of pg. Half chains (half storage): the C
// target must refuse them; the CUDA check's reference is the interpreter's, its tolerance from
// the widened graph (widen).
static void check_mlp(const char *name, PrimGraph *pg, int layers, int cpu_k, int cu_k,
                      bool families, bool cleanup) {
    Err e = {0};
    int rc = cleanup ? fission_cleanup(pg, NULL, &e) : ST_OK;
    if (rc == ST_OK)
        rc = prim_graph_verify(pg, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &r, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
    if (rc != ST_OK) {
        prim_graph_free(pg);
        return;
    }
    // The chain candidates, and each run's length: exactly one per (first, last) layer pair, and
    // under half storage one more for each run from the first layer, with the input's CAST in it
    // (x_cast); the longest plain chain goes last, the longest x_cast one before it.
    const Candidate **chains = xmalloc(sizeof(Candidate *) * (size_t)(cs->n + 1));
    int nc = 0, per_len[MLP_LAYERS_MAX + 2] = {0}, n_cast = 0;
    for (int i = 0; i < cs->n; i++) {
        int nl = cand_count_linear(pg, &cs->c[i]);
        if (nl < 2)
            continue;
        CHECK_MSG(nl <= MLP_LAYERS_MAX, "%s: a chain of %d layers", name, nl);
        MlpChain m;
        bool cast = mlp_analyse(pg, &cs->c[i], &m) && m.x_cast;
        if (cast)
            n_cast++;
        else
            per_len[ORCH_MIN(nl, MLP_LAYERS_MAX + 1)]++;
        chains[nc++] = &cs->c[i];
        if (is_half(chain_dtype(pg, &cs->c[i])))
            CHECK_MSG(!target_cpu.supports(&g_m, pg, &cs->c[i]),
                      "%s: half chain %d (%d layers) accepted by the CPU", name, cs->c[i].id, nl);
        else
            CHECK_MSG(target_cpu.supports(&g_m, pg, &cs->c[i]),
                      "%s: chain %d (%d layers) refused by the CPU", name, cs->c[i].id, nl);
    }
    bool half = nc > 0 && is_half(chain_dtype(pg, chains[0]));
    // Order: plain chains by size, then x_cast ones, so that the two longest come last.
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0; j--) {
            MlpChain a, b;
            mlp_analyse(pg, chains[j - 1], &a);
            mlp_analyse(pg, chains[j], &b);
            int ka = (a.x_cast ? 0 : 1000) + chains[j - 1]->n_prims,
                kb = (b.x_cast ? 0 : 1000) + chains[j]->n_prims;
            if (ka <= kb)
                break;
            const Candidate *t = chains[j];
            chains[j] = chains[j - 1];
            chains[j - 1] = t;
        }
    // x_cast chains sort first: the longest of them moves to just before the longest plain one
    // (the others shift down one place).
    if (n_cast > 0 && n_cast < nc) {
        const Candidate *t = chains[n_cast - 1];
        memmove(chains + n_cast - 1, chains + n_cast,
                sizeof(Candidate *) * (size_t)(nc - 1 - n_cast));
        chains[nc - 2] = t;
    }
    int want_cast = half && layers >= 2 ? ORCH_MIN(layers, MLP_LAYERS_MAX) - 1 : 0;
    CHECK_MSG(n_cast == want_cast, "%s: %d chains with the input's CAST, expected %d", name, n_cast,
              want_cast);
    int expect = 0;
    for (int len = 2; len <= MLP_LAYERS_MAX; len++) {
        int want = layers >= len ? layers - len + 1 : 0;
        expect += want;
        CHECK_MSG(per_len[len] == want, "%s: %d chains of %d layers, expected %d", name,
                  per_len[len], len, want);
    }
    CHECK_MSG(cs->stats.mlp_chains == expect + want_cast, "%s: stats say %d chains, expected %d",
              name, cs->stats.mlp_chains, expect + want_cast);
    double t0 = now();
    void **buf = eval_all(pg), **wbuf = NULL;
    PrimGraph *wide = NULL;
    if (half) { // the reference's yardstick (the GPU run's)
        wide = widen(pg);
        wbuf = eval_like(wide, buf);
    }
    double t1 = now();
    if (!g_no_cpu && !half)
        cpu_check(name, pg, buf, chains, nc, cpu_k);
    double t2 = now();
    cu_check(name, pg, buf, wbuf, chains, nc, n_cast > 0 ? 2 : 1, cu_k, families);
    printf("  %s: %d prims, %d chain candidates (interp %.1f s, cpu %.1f s, cuda %.1f s)\n", name,
           pg->n_prims, nc, t1 - t0, t2 - t1, now() - t2);
    g_cases++;
    g_chains += nc;
    g_half_cases += half;
    free_all(pg, buf);
    if (wide) {
        free_all(wide, wbuf);
        prim_graph_free(wide);
    }
    free(chains);
    cand_set_free(cs);
    prim_graph_free(pg);
}

static void case_name(Case *k) {
    int n = snprintf(k->name, sizeof k->name, "b%lld_", (long long)k->batch);
    for (int l = 0; l <= k->layers && n < (int)sizeof k->name - 12; l++)
        n += snprintf(k->name + n, sizeof k->name - (size_t)n, "%s%lld", l ? "-" : "",
                      (long long)k->width[l]);
    for (int l = 0; l < k->layers && n < (int)sizeof k->name - 8; l++)
        n += snprintf(k->name + n, sizeof k->name - (size_t)n, "%s%.3s", l ? "," : "_",
                      act_name[k->act[l]]);
    static const char *const gate_name[] = {"", "_gated", "_residual", "_mixed"};
    if (n < (int)sizeof k->name - 10)
        snprintf(k->name + n, sizeof k->name - (size_t)n, "%s", gate_name[k->gate]);
}

// Hand-picked shapes: every activation, odd widths, the extreme batches, a rank-3 activation.
static void fixed_cases(void) {
    static const struct {
        int layers;
        int64_t batch, lead0;
        int64_t w[9];
        int act[8];
        int bias_shape; // Case.bias_shape
    } cs[] = {
        {2, 1, 0, {16, 16, 16}, {A_RELU, A_NONE}, 0},
        {3, 7, 0, {17, 33, 100, 5}, {A_SIGMOID, A_TANH, A_GELU}, 0},
        {6, 127, 0, {64, 64, 64, 64, 64, 64, 64}, {A_SINSIG, A_SINSIG, A_SINSIG, A_SINSIG, A_SINSIG, A_NONE}, 0},
        {4, 1031, 0, {32, 256, 256, 48, 10}, {A_SILU, A_GELU, A_RELU, A_NONE}, 0},
        {2, 64, 4, {24, 40, 8}, {A_TANH, A_SIGMOID}, 0},
        {8, 33, 0, {16, 31, 47, 63, 80, 96, 112, 128, 1}, {A_RELU, A_SIGMOID, A_TANH, A_GELU, A_SINSIG, A_SILU, A_RELU, A_NONE}, 0},
        {2, 4096, 0, {64, 128, 64}, {A_GELU, A_SILU}, 0},
        // Widths the persistent kernels pad or guard: odd and under 64 (warp: one or two column
        // chunks; tensor cores: padded k steps), an input wider than 64, a last width of 3.
        {4, 131, 0, {61, 64, 37, 50, 3}, {A_GELU, A_SINSIG, A_RELU, A_NONE}, 0},
        {3, 2, 0, {5, 64, 32, 9}, {A_TANH, A_SILU, A_SIGMOID}, 0},
        {2, 97, 0, {200, 64, 10}, {A_SINSIG, A_NONE}, 0},
        // The other bias shapes the tensor-core kernels fold into their accumulators.
        {3, 61, 0, {40, 64, 24, 7}, {A_SINSIG, A_RELU, A_NONE}, 1},
        {2, 35, 5, {16, 48, 16}, {A_SILU, A_NONE}, 2},
        {2, 19, 0, {32, 32, 8}, {A_TANH, A_NONE}, 3},
    };
    for (size_t i = 0; i < ORCH_COUNT(cs); i++) {
        Case k = {0};
        k.layers = cs[i].layers;
        k.batch = cs[i].batch;
        k.lead0 = cs[i].lead0;
        k.bias = true;
        k.bias_shape = cs[i].bias_shape;
        for (int l = 0; l <= k.layers; l++)
            k.width[l] = cs[i].w[l];
        for (int l = 0; l < k.layers; l++)
            k.act[l] = cs[i].act[l];
        case_name(&k);
        check_mlp(k.name, mlp_graph(&k), k.layers, i == 2 ? 32 : 2, i == 2 ? 4 : 2, true, true);
    }
}

// Sines of large arguments in an epilogue: layer 0 is one input column times weights of +-2^30
// and +-8 (exact products), so a warp's sin*sigmoid epilogue sees |x| up to 1e9 beside small
// ones: the deferred epilogue's vote (cexpr_set_sin_guard) must redo such elements exactly
// (orch_sinf's common path alone is wrong past 2^22 pi). Every float32 config (the reduced
// precisions round the operands: their sines of 1e9 are noise).
static void sin_guard(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {131, 1}, w0d[] = {1, 24}, w1d[] = {24, 16}, bd[] = {16};
    int y = add_input(pg, "x", 2, xd);
    PB b = {pg, "mlp"};
    float w0[24];
    for (int j = 0; j < 24; j++)
        w0[j] = (j % 3 == 0 ? 8.0f : 1073741824.0f) * (j % 2 ? -1.0f : 1.0f);
    y = pb_matmul(&b, y, pb_const(&b, DT_FLOAT, 2, w0d, w0));
    y = activation(&b, y, A_SINSIG);
    y = pb_matmul(&b, y, add_const(&b, 2, w1d, 0.3f));
    y = pb_ew2(&b, EW_ADD, y, add_const(&b, 1, bd, 0.5f));
    add_output(pg, y);
    g_fp32_only = true;
    check_mlp("sin_guard_131x1-24-16", pg, 2, 2, 64, true, true);
    g_fp32_only = false;
}

// The spec (mlp_spec.h) of the longest chain of k's graph: every layer in it, and exactly the
// layers with K == N of a gated, residual or mixed case read their input (MlpChain.xin); every
// ELEMWISE primitive belongs to one layer's epilogue. The CUDA target offers such chains the
// designs that keep the layer's input beside its products: block, and the tensor cores with
// epi=smem.
static void spec_check(const Case *k) {
    PrimGraph *pg = mlp_graph(k);
    Err e = {0};
    int rc = fission_cleanup(pg, NULL, &e);
    if (rc == ST_OK)
        rc = prim_graph_verify(pg, &e);
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &r, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", k->name, e.msg);
    const Candidate *best = NULL;
    for (int i = 0; rc == ST_OK && i < cs->n; i++)
        if (!best || cand_count_linear(pg, &cs->c[i]) > cand_count_linear(pg, best))
            best = &cs->c[i];
    MlpChain m;
    bool ok = best && mlp_analyse(pg, best, &m);
    CHECK_MSG(ok, "%s: the longest chain is not analysed", k->name);
    if (ok) {
        CHECK_MSG(m.n == ORCH_MIN(k->layers, MLP_LAYERS_MAX), "%s: %d layers, want %d", k->name,
                  m.n, k->layers);
        bool any = false;
        for (int l = 0; l < m.n; l++) {
            bool want = k->gate != G_NONE && k->width[l] == k->width[l + 1];
            any = any || want;
            CHECK_MSG(m.xin[l] == want, "%s: layer %d reads its input: %d, want %d", k->name, l,
                      m.xin[l], want);
            CHECK_MSG(m.epi[l] == (want || k->bias || k->act[l] != A_NONE),
                      "%s: layer %d's epilogue: %d", k->name, l, m.epi[l]);
            CHECK_MSG(m.in[l] == pg->prims[m.lin[l]]->in[0], "%s: layer %d's input", k->name, l);
        }
        CHECK_MSG(m.any_xin == any, "%s: any_xin %d, want %d", k->name, m.any_xin, any);
        for (int i = 0; i < best->n_prims; i++) {
            const Prim *p = pg->prims[best->prims[i]];
            CHECK_MSG((p->kind == PRIM_ELEMWISE) == (m.owner[i] >= 0),
                      "%s: primitive %d's layer %d", k->name, best->prims[i], m.owner[i]);
        }
        // Over the precisions (the tensor-core designs are offered under theirs).
        static const Precision precs[] = {PREC_FP32, PREC_TF32, PREC_FP16};
        bool other = false;
        for (size_t p = 0; p < ORCH_COUNT(precs); p++) {
            KernelConfig cf[64];
            int n = cugen_mlp_configs(pg, best, &g_cu[1], &(TargetOptions){.precision = precs[p]},
                                      cf, 64);
            CHECK_MSG(n >= 1, "%s: no CUDA config", k->name);
            for (int i = 0; i < n; i++) {
                other = other || mcfg(&cf[i]).var != CUMLP_BLOCK;
                CuMlpConfig q = mcfg(&cf[i]);
                bool keeps = q.var == CUMLP_BLOCK ||
                             (q.var != CUMLP_WARP && q.epi == CUMLP_EPI_SMEM);
                CHECK_MSG(!any || keeps, "%s: CUDA config '%s' offered", k->name, cf[i].desc);
            }
        }
        // A plain chain keeps the persistent designs (widths up to 64: the warp design's limit;
        // the tensor-core designs' registers limit wider deep chains).
        CHECK_MSG(any || other || k->width[1] > 64, "%s: only block configs for a plain chain",
                  k->name);
    }
    if (cs)
        cand_set_free(cs);
    prim_graph_free(pg);
}

// Epilogues that read the layer's input, found by structure: gated act(t + b) * sigmoid(x),
// residual x + act(t + b), mixed (t + b) * tanh(x) + 0.5 x, and plain chains beside them, at
// widths 32, 64 and 128, depths 2, 4 and 6, several row counts; one chain whose first layer
// changes the width (a plain epilogue) before gated ones. The spec (spec_check), the C kernels
// against the interpreter, the CUDA block kernels through NVRTC (and on a GPU, run).
static void gated_cases(void) {
    static const struct {
        int layers;
        int64_t batch, w0, w;
        int act;
    } shapes[] = {
        {2, 1031, 32, 32, A_SIN}, {4, 127, 64, 64, A_RELU}, {6, 300, 128, 128, A_GELU},
        {6, 4096, 64, 64, A_SIN}, {3, 33, 16, 64, A_TANH},
    };
    static const int gates[] = {G_GATED, G_RESIDUAL, G_MIXED, G_NONE};
    for (size_t s = 0; s < ORCH_COUNT(shapes); s++)
        for (size_t g = 0; g < ORCH_COUNT(gates); g++) {
            Case k = {0};
            k.layers = shapes[s].layers;
            k.batch = shapes[s].batch;
            k.bias = true;
            k.gate = gates[g];
            k.width[0] = shapes[s].w0;
            for (int l = 1; l <= k.layers; l++)
                k.width[l] = shapes[s].w;
            for (int l = 0; l < k.layers; l++)
                k.act[l] = shapes[s].act;
            case_name(&k);
            spec_check(&k);
            check_mlp(k.name, mlp_graph(&k), k.layers, 2, 2, s < 2, true);
        }
}

// Random MLPs: 2-8 layers, widths 1-256 (half of them odd), random activations and batches.
static void random_cases(void) {
    static const int64_t batches[] = {1, 2, 7, 127, 300, 1031};
    for (int it = 0; it < 8; it++) {
        Case k = {0};
        k.layers = 2 + rand() % 7;
        k.batch = batches[rand() % (int)ORCH_COUNT(batches)];
        k.bias = rand() % 4 != 0;
        for (int l = 0; l <= k.layers; l++)
            k.width[l] = rand() % 2 ? 16 * (1 + rand() % 16) : 1 + rand() % 256;
        for (int l = 0; l < k.layers; l++)
            k.act[l] = rand() % A_COUNT;
        case_name(&k);
        check_mlp(k.name, mlp_graph(&k), k.layers, 1, 1, true, true);
    }
}

// Half storage (--precision fp16 / bf16): the chains of float16 and bfloat16 MLPs whose input is
// CAST from float32 and whose output is half or CAST back to float32, 2-8 layers, odd widths,
// batch 1 and primes, the input widths of every load path of the kernels (a multiple of 8: 16-byte
// loads, of 4: 8-byte loads, odd: single values; 16-byte loads with a partial last chunk), every
// activation; then random ones. (The benchmark's 6 x 64 chain in half storage: gpu_timing with
// ORCH_MLP_BENCH_DTYPE.)
static void half_cases(void) {
    static const struct {
        DType dt;
        bool cast_out;
        int layers;
        int64_t batch, lead0;
        int64_t w[9];
        int act[8];
        int gate; // Case.gate
    } cs[] = {
        // clang-format off
        {DT_FLOAT16, true, 2, 1, 0, {16, 16, 16}, {A_RELU, A_NONE}, G_NONE},
        {DT_BFLOAT16, false, 3, 131, 0, {17, 33, 100, 5}, {A_SIGMOID, A_TANH, A_GELU}, G_NONE},
        {DT_FLOAT16, true, 3, 257, 0, {64, 64, 64, 64}, {A_SINSIG, A_SINSIG, A_NONE}, G_NONE},
        {DT_BFLOAT16, true, 4, 131, 0, {61, 64, 37, 50, 3}, {A_GELU, A_SINSIG, A_RELU, A_NONE}, G_NONE},
        {DT_FLOAT16, false, 8, 1, 0, {16, 31, 47, 63, 80, 96, 112, 128, 1},
         {A_RELU, A_SIGMOID, A_TANH, A_GELU, A_SINSIG, A_SILU, A_RELU, A_NONE}, G_NONE},
        {DT_BFLOAT16, false, 2, 64, 4, {24, 40, 8}, {A_TANH, A_SIGMOID}, G_NONE},
        {DT_FLOAT16, true, 3, 2, 0, {5, 64, 32, 9}, {A_TANH, A_SILU, A_SIGMOID}, G_NONE},
        {DT_FLOAT16, false, 2, 97, 0, {200, 64, 10}, {A_SINSIG, A_NONE}, G_NONE},
        {DT_BFLOAT16, true, 3, 7, 0, {36, 48, 20, 7}, {A_SILU, A_RELU, A_TANH}, G_NONE},
        {DT_FLOAT16, true, 4, 1031, 0, {32, 256, 256, 48, 10}, {A_SILU, A_GELU, A_RELU, A_NONE}, G_NONE},
        // Epilogues that read the layer's input (the block design, which holds it as float).
        {DT_FLOAT16, true, 3, 131, 0, {64, 64, 64, 64}, {A_SIN, A_SIN, A_SIN}, G_GATED},
        {DT_BFLOAT16, false, 2, 33, 0, {32, 32, 32}, {A_RELU, A_TANH}, G_RESIDUAL},
        // clang-format on
    };
    for (size_t i = 0; i < ORCH_COUNT(cs); i++) {
        Case k = {0};
        k.layers = cs[i].layers;
        k.batch = cs[i].batch;
        k.lead0 = cs[i].lead0;
        k.bias = true;
        k.gate = cs[i].gate;
        for (int l = 0; l <= k.layers; l++)
            k.width[l] = cs[i].w[l];
        for (int l = 0; l < k.layers; l++)
            k.act[l] = cs[i].act[l];
        case_name(&k);
        char name[128];
        snprintf(name, sizeof name, "%s_%s%s", dtype_name(cs[i].dt), k.name,
                 cs[i].cast_out ? "_f32out" : "");
        check_mlp(name, mlp_graph_half(&k, cs[i].dt, cs[i].cast_out), k.layers, 1, 1, true, true);
    }
    // (Two, of at most 5 layers: the GPU run compiles every chain of a case.)
    static const int64_t batches[] = {1, 7, 131, 1031};
    for (int it = 0; it < 2; it++) {
        Case k = {0};
        k.layers = 2 + rand() % 4;
        k.batch = batches[rand() % (int)ORCH_COUNT(batches)];
        k.bias = rand() % 4 != 0;
        for (int l = 0; l <= k.layers; l++)
            k.width[l] = rand() % 2 ? 16 * (1 + rand() % 16) : 1 + rand() % 256;
        for (int l = 0; l < k.layers; l++)
            k.act[l] = rand() % A_COUNT;
        case_name(&k);
        DType dt = rand() % 2 ? DT_FLOAT16 : DT_BFLOAT16;
        bool cast_out = rand() % 2;
        char name[128];
        snprintf(name, sizeof name, "%s_%s%s", dtype_name(dt), k.name, cast_out ? "_f32out" : "");
        check_mlp(name, mlp_graph_half(&k, dt, cast_out), k.layers, 1, 1, true, true);
    }
}

// Where a chain must stop: an intermediate that is also a graph output, a second reader of an
// activation, a non-constant weight, a width over 256. Each splits or prevents chains.
static void chain_boundaries(void) {
    {
        // x -> L1 -> relu -> L2 -> relu -> L3; relu1 is also an output: chains only {L2, L3}.
        Case k = {.layers = 3, .batch = 9, .bias = true, .width = {8, 16, 16, 4}};
        PrimGraph *pg = mlp_graph(&k);
        // The first layer's result (its matmul's reader chain ends at the second matmul's input).
        int t = -1;
        for (int i = 0, seen = 0; i < pg->n_prims; i++)
            if (pg->prims[i]->kind == PRIM_LINEAR && ++seen == 2)
                t = pg->prims[i]->in[0];
        add_output(pg, t);
        check_mlp("intermediate_output", pg, 2, 1, 1, false, true);
    }
    {
        // Width 300 in the middle: no chain crosses it (layers 8->300->16: none; then 16->16->4).
        Case k = {.layers = 4, .batch = 5, .bias = true, .width = {8, 300, 16, 16, 4},
                  .act = {A_RELU, A_RELU, A_TANH, A_NONE}};
        check_mlp("wide_layer", mlp_graph(&k), 2, 1, 1, false, true);
    }
    {
        // A weight that is a graph input (not a constant): not a layer.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd), w = add_input(pg, "w", 2, wd);
        PB b = {pg, "mm"};
        int y = pb_ew1(&b, EW_RELU, pb_matmul(&b, x, w));
        y = pb_matmul(&b, y, add_const(&b, 2, wd, 0.3f));
        add_output(pg, y);
        check_mlp("input_weight", pg, 1, 1, 1, false, true);
    }
    {
        // Residual: the activation read by the next layer and by an add: the chain stops there.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "res"};
        int h = pb_ew1(&b, EW_RELU, pb_matmul(&b, x, add_const(&b, 2, wd, 0.3f)));
        int y = pb_ew2(&b, EW_ADD, pb_matmul(&b, h, add_const(&b, 2, wd, 0.3f)), h);
        y = pb_matmul(&b, pb_ew1(&b, EW_TANH, y), add_const(&b, 2, wd, 0.3f));
        add_output(pg, y);
        // h is read by L2 and by L2's epilogue (add(h), tanh), which reads the layer's input:
        // one chain of three layers, L1 -> relu -> L2 -> add(h) -> tanh -> L3.
        check_mlp("residual", pg, 3, 1, 1, false, true);
    }
    {
        // The activation h also read by the epilogue of the layer after next, where it is not
        // that layer's input.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "res2"};
        int h = pb_ew1(&b, EW_RELU, pb_matmul(&b, x, add_const(&b, 2, wd, 0.3f)));
        int y = pb_ew2(&b, EW_ADD, pb_matmul(&b, h, add_const(&b, 2, wd, 0.3f)), h);
        y = pb_ew2(&b, EW_MUL, pb_matmul(&b, pb_ew1(&b, EW_TANH, y), add_const(&b, 2, wd, 0.3f)),
                   h);
        add_output(pg, y);
        // h has three readers (L2, L2's add, L3's mul): L1 leads nowhere. L2 -> L3 is a chain
        // ending at L3's product: the mul reads h, neither L3's product nor its input, so it is
        // not L3's epilogue.
        check_mlp("residual_two_back", pg, 2, 1, 1, false, true);
    }
}

// PyTorch's export of nn.Linear + sin*sigmoid: Gemm(transB=1) with a bias, Sin, Sigmoid, Mul.
// gated: each layer's Sigmoid reads the layer's input instead (x' = sin(fc(x)) * sigmoid(x)).
static uint8_t *sinsig_onnx(int64_t batch, int layers, int64_t width, bool relu, bool gated,
                            size_t *len) {
    MB *b = mb_new(17);
    const int64_t xd[] = {batch, width}, wd[] = {width, width}, bd[] = {width};
    mb_input(b, "x", 1, 2, xd);
    char prev[32] = "x";
    for (int l = 0; l < layers; l++) {
        char w[32], c[32], g[32], s[32], q[32], m[32], node[32];
        snprintf(w, sizeof w, "fc%d.weight", l);
        snprintf(c, sizeof c, "fc%d.bias", l);
        float *v = rand_buf(width * width, (float)(1.0 / sqrt((double)width)));
        mb_init(b, mb_raw(b, w, 1, 2, wd, v, (size_t)(width * width) * 4));
        free(v);
        v = rand_buf(width, (float)(1.0 / sqrt((double)width)));
        mb_init(b, mb_raw(b, c, 1, 1, bd, v, (size_t)width * 4));
        free(v);
        snprintf(g, sizeof g, "g%d", l);
        snprintf(node, sizeof node, "/fc.%d/Gemm", l);
        char ins[100];
        snprintf(ins, sizeof ins, "%s,%s,%s", prev, w, c);
        mb_node(b, "Gemm", node, ins, g, mb_attr_i(b, "transB", 1), NULL);
        if (l + 1 == layers) {
            snprintf(prev, sizeof prev, "%s", g);
            break;
        }
        snprintf(s, sizeof s, "s%d", l);
        snprintf(q, sizeof q, "q%d", l);
        snprintf(m, sizeof m, "h%d", l);
        if (relu) { // the plain form, for comparison: Relu alone
            snprintf(node, sizeof node, "/Relu_%d", l);
            mb_node(b, "Relu", node, g, m, NULL);
            snprintf(prev, sizeof prev, "%s", m);
            continue;
        }
        snprintf(node, sizeof node, "/Sin_%d", l);
        mb_node(b, "Sin", node, g, s, NULL);
        snprintf(node, sizeof node, "/Sigmoid_%d", l);
        char gin[32];
        snprintf(gin, sizeof gin, "%s", gated ? prev : g);
        mb_node(b, "Sigmoid", node, gin, q, NULL);
        snprintf(ins, sizeof ins, "%s,%s", s, q);
        snprintf(node, sizeof node, "/Mul_%d", l);
        mb_node(b, "Mul", node, ins, m, NULL);
        snprintf(prev, sizeof prev, "%s", m);
    }
    // The graph output keeps the last Gemm's name.
    b->g.node[b->g.n_node - 1]->output[0] = "y";
    mb_output(b, "y");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

// The primitive graph of an ONNX model; *g receives the operator graph, which owns the constants'
// data: free it after the primitive graph.
static PrimGraph *import_prims(const uint8_t *bytes, size_t len, const char *name, Graph **g) {
    Err e = {0};
    *g = NULL;
    PrimGraph *pg = NULL;
    LoadOptions lo = {0};
    FissionOptions fo = {0};
    int rc = onnx_load_memory(bytes, len, name, NULL, &lo, g, &e);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(*g, NULL, &e);
    if (rc == ST_OK)
        rc = fission_run(*g, &fo, &pg, NULL, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(pg, NULL, &e);
    CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
    if (rc != ST_OK) {
        prim_graph_free(pg);
        return NULL;
    }
    return pg;
}

static void onnx_sinsig(void) {
    size_t len;
    uint8_t *bytes = sinsig_onnx(257, 6, 64, false, false, &len);
    Graph *g = NULL;
    PrimGraph *pg = import_prims(bytes, len, "mlp.onnx", &g);
    free(bytes);
    if (pg)
        check_mlp("onnx_sinsig_6x64", pg, 6, 2, 2, true, false);
    graph_free(g);
}

// The gated MLP x' = sin(fc(x)) * sigmoid(x) as PyTorch exports it (the last layer a plain Gemm),
// 6 layers 64 wide, through the importer: one chain of six layers whose epilogues read their
// input, checked as the other cases; and with the CPU cost model the BLP computes the whole MLP
// as that one kernel.
static void onnx_gated(void) {
    size_t len;
    uint8_t *bytes = sinsig_onnx(4096, 6, 64, false, true, &len);
    Err e = {0};
    Graph *g = NULL;
    PrimGraph *pg = import_prims(bytes, len, "gated.onnx", &g);
    free(bytes);
    int rc = pg ? ST_OK : ST_RUNTIME;
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &r, 0, &cs, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK) {
        cost_model_fill(cs, cost_model_find("cpu"));
        Selection sel;
        memset(&sel, 0, sizeof sel);
        OrchOptions oo = {.time_limit = 10};
        rc = orchestrate(cs, &oo, &sel, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        if (rc == ST_OK) {
            const Candidate *c = &cs->c[sel.kernels[0]];
            MlpChain m;
            bool ok = sel.n == 1 && mlp_analyse(pg, c, &m);
            CHECK_MSG(ok, "the gated MLP: %d kernels, the first of %d prims", sel.n, c->n_prims);
            CHECK_MSG(ok && m.n == 6 && m.any_xin && !m.xin[5] && m.xin[0],
                      "the gated MLP's chain: %d layers", ok ? m.n : 0);
            printf("  the gated MLP: %d kernel(s), objective %.3g s\n", sel.n, sel.objective);
            selection_free(&sel);
        }
    }
    if (cs)
        cand_set_free(cs);
    if (rc == ST_OK)
        check_mlp("onnx_gated_6x64", pg, 6, 2, 2, true, false);
    else
        prim_graph_free(pg);
    graph_free(g);
}

// MLPs with a LayerNorm between layers, as PyTorch exports them (Gemm with transB, then
// LayerNormalization over the last axis with scale and bias, opset 17; the LayerNorm rule
// makes its mean (in float64), centred values, mean of squares and rsqrt): LN_ACT is
// nn.Sequential(Linear, LayerNorm, act) x N, ACT_LN puts the LayerNorm after the activation, and
// LN_RES is the post-norm residual block LN(x + act(fc(x))).
enum { LN_ACT, ACT_LN, LN_RES };

static uint8_t *layernorm_onnx(int64_t batch, int layers, int64_t width, int form, bool sigmoid,
                               size_t *len) {
    MB *b = mb_new(17);
    const int64_t xd[] = {batch, width}, wd[] = {width, width}, bd[] = {width};
    mb_input(b, "x", 1, 2, xd);
    char prev[32] = "x";
    const char *act = sigmoid ? "Sigmoid" : "Relu";
    for (int l = 0; l < layers; l++) {
        char w[32], c[32], gm[32], bt[32], g[32], a[32], n[32], r[32], node[48], ins[128];
        snprintf(w, sizeof w, "fc%d.weight", l);
        snprintf(c, sizeof c, "fc%d.bias", l);
        snprintf(gm, sizeof gm, "ln%d.weight", l);
        snprintf(bt, sizeof bt, "ln%d.bias", l);
        float *v = rand_buf(width * width, (float)(1.7 / sqrt((double)width)));
        mb_init(b, mb_raw(b, w, 1, 2, wd, v, (size_t)(width * width) * 4));
        free(v);
        v = rand_buf(width, 0.5f);
        mb_init(b, mb_raw(b, c, 1, 1, bd, v, (size_t)width * 4));
        free(v);
        v = rand_buf(width, 0.5f); // gamma around 1: 1 + U[-0.5, 0.5)
        for (int64_t i = 0; i < width; i++)
            v[i] += 1.0f;
        mb_init(b, mb_raw(b, gm, 1, 1, bd, v, (size_t)width * 4));
        free(v);
        v = rand_buf(width, 0.3f);
        mb_init(b, mb_raw(b, bt, 1, 1, bd, v, (size_t)width * 4));
        free(v);
        snprintf(g, sizeof g, "g%d", l);
        snprintf(a, sizeof a, "a%d", l);
        snprintf(n, sizeof n, "n%d", l);
        snprintf(r, sizeof r, "r%d", l);
        snprintf(node, sizeof node, "/fc.%d/Gemm", l);
        snprintf(ins, sizeof ins, "%s,%s,%s", prev, w, c);
        mb_node(b, "Gemm", node, ins, g, mb_attr_i(b, "transB", 1), NULL);
        const char *ln_in = form == LN_ACT ? g : form == ACT_LN ? a : r;
        const char *act_in = form == LN_ACT ? n : g, *act_out = form == LN_ACT ? prev : a;
        char out[32];
        if (form != LN_ACT) {
            snprintf(node, sizeof node, "/act.%d/%s", l, act);
            mb_node(b, act, node, act_in, act_out, NULL);
        }
        if (form == LN_RES) {
            snprintf(node, sizeof node, "/res.%d/Add", l);
            snprintf(ins, sizeof ins, "%s,%s", prev, a);
            mb_node(b, "Add", node, ins, r, NULL);
        }
        snprintf(node, sizeof node, "/ln.%d/LayerNormalization", l);
        snprintf(ins, sizeof ins, "%s,%s,%s", ln_in, gm, bt);
        snprintf(out, sizeof out, "%s", form == LN_ACT ? n : "");
        if (form != LN_ACT)
            snprintf(out, sizeof out, "h%d", l);
        mb_node(b, "LayerNormalization", node, ins, out, mb_attr_i(b, "axis", -1),
                mb_attr_f(b, "epsilon", l % 2 ? 1e-5f : 1e-3f), NULL);
        if (form == LN_ACT) {
            snprintf(node, sizeof node, "/act.%d/%s", l, act);
            snprintf(out, sizeof out, "h%d", l);
            mb_node(b, act, node, n, out, NULL);
        }
        snprintf(prev, sizeof prev, "%s", out);
    }
    b->g.node[b->g.n_node - 1]->output[0] = "y";
    mb_output(b, "y");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

// The whole chain of pg (its longest chain candidate) seen by mlp_analyse: every layer has the
// LayerNorm's two row reductions (a mean of the values, a mean of the centred squares).
static void check_ln_spec(const char *name, const PrimGraph *pg, int layers) {
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    Err e = {0};
    if (cand_enumerate(pg, &r, 0, &cs, &e) != ST_OK) {
        CHECK_MSG(false, "%s: %s", name, e.msg);
        return;
    }
    bool found = false;
    for (int i = 0; i < cs->n && !found; i++) {
        MlpChain m;
        if (cand_count_linear(pg, &cs->c[i]) != layers || !mlp_analyse(pg, &cs->c[i], &m))
            continue;
        found = true;
        CHECK_MSG(m.any_red, "%s: the chain has no row reductions", name);
        for (int l = 0; l < m.n; l++)
            CHECK_MSG(m.n_red[l] == 2 && pg->prims[m.red[l][0]]->red.op == RED_MEAN &&
                          pg->prims[m.red[l][1]]->red.op == RED_MEAN,
                      "%s: layer %d has %d row reductions", name, l, m.n_red[l]);
        // The designs that hold a whole row of a layer's products reduce rows: block, and the
        // tensor cores with epi=smem; the latter are offered under every precision on the
        // described H100 (f64 under float32: up to 96 columns, where its registers allow) where
        // the weights fit its shared memory.
        static const Precision precs[] = {PREC_FP32, PREC_TF32, PREC_FP16, PREC_BF16};
        bool half = is_half(m.dtype);
        for (size_t p = 0; p < ORCH_COUNT(precs); p++) {
            KernelConfig cf[64];
            int n = cugen_mlp_configs(pg, &cs->c[i], &g_cu[1],
                                      &(TargetOptions){.precision = precs[p]}, cf, 64);
            int tc = 0;
            for (int q = 0; q < n; q++) {
                CuMlpConfig c = mcfg(&cf[q]);
                CHECK_MSG(c.var == CUMLP_BLOCK || (c.var != CUMLP_WARP && c.epi == CUMLP_EPI_SMEM),
                          "%s: CUDA config '%s' offered", name, cf[q].desc);
                tc += c.var != CUMLP_BLOCK;
            }
            // (Every layer's weights are staged at once: at most 128 KB of them here.)
            int64_t w = m.N[0], wbytes = (int64_t)m.n * w * w * (int64_t)dtype_size(m.dtype);
            bool want = wbytes <= 128 * 1024 && (half || precs[p] != PREC_FP32 || w <= 96);
            CHECK_MSG(!want || tc > 0, "%s: no tensor-core config under %s", name,
                      precision_name(precs[p]));
        }
    }
    CHECK_MSG(found, "%s: no chain of %d layers that mlp_analyse reads", name, layers);
    cand_set_free(cs);
}

// Widths 32, 64, 96 and 128, depths 2 to 4, odd row counts (1, primes: never a multiple of the
// tensor cores' 16- or 32-row warp tiles), the three forms: the chains found (every run of 2..N
// layers, LayerNorms inside), the configs offered, then checked as the other cases on the CPU
// and compiled with NVRTC (on a GPU, run): the block design and the tensor cores' epi=smem,
// the longest chain in the best config of every variant and MT (g_family_mt).
static void layernorm_cases(void) {
    static const struct {
        int64_t batch, width;
        int layers, form;
        bool sigmoid;
    } cases[] = {
        {257, 32, 2, LN_ACT, false},  {1, 32, 4, LN_ACT, false},    {1031, 64, 2, LN_ACT, false},
        {37, 64, 4, LN_ACT, false},   {131, 128, 2, LN_ACT, false}, {4099, 128, 4, LN_ACT, false},
        {61, 64, 3, ACT_LN, true},    {509, 32, 2, ACT_LN, false},  {97, 64, 4, LN_RES, false},
        {1023, 128, 2, LN_RES, true}, {211, 96, 3, LN_ACT, false},  {333, 96, 2, LN_RES, false},
        {45, 128, 3, ACT_LN, false},  {17, 32, 3, LN_RES, true},
    };
    static const char *const form_name[] = {"ln_act", "act_ln", "ln_res"};
    for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
        char name[96];
        snprintf(name, sizeof name, "%s_b%lld_w%lld_x%d%s", form_name[cases[i].form],
                 (long long)cases[i].batch, (long long)cases[i].width, cases[i].layers,
                 cases[i].sigmoid ? "_sigmoid" : "");
        size_t len;
        uint8_t *bytes = layernorm_onnx(cases[i].batch, cases[i].layers, cases[i].width,
                                        cases[i].form, cases[i].sigmoid, &len);
        Graph *g = NULL;
        PrimGraph *pg = import_prims(bytes, len, name, &g);
        free(bytes);
        if (pg) {
            check_ln_spec(name, pg, cases[i].layers);
            g_family_mt = true;
            check_mlp(name, pg, cases[i].layers, 2, 2, true, false);
            g_family_mt = false;
        }
        graph_free(g);
    }
    // Half storage (float16, bfloat16): every activation, weight and statistic half, the
    // LayerNorm's reductions of half values; the chains (and their x_cast twins) compiled for
    // CUDA, whose block kernel keeps the statistics in float32.
    static const DType halves[] = {DT_FLOAT16, DT_BFLOAT16};
    for (size_t h = 0; h < ORCH_COUNT(halves); h++) {
        char name[96];
        snprintf(name, sizeof name, "%s_b301_w64_x3_%s", h ? "ln_res" : "ln_act",
                 dtype_name(halves[h]));
        size_t len;
        uint8_t *bytes = layernorm_onnx(301, 3, 64, h ? LN_RES : LN_ACT, false, &len);
        Graph *g = NULL;
        PrimGraph *pg = import_prims(bytes, len, name, &g);
        free(bytes);
        Err e = {0};
        int rc = pg ? pass_store_reduced(pg, halves[h], NULL, NULL, &e) : ST_OK;
        if (rc == ST_OK && pg)
            rc = prim_graph_verify(pg, &e);
        CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
        if (pg && rc == ST_OK) {
            check_ln_spec(name, pg, 3);
            g_family_mt = true;
            check_mlp(name, pg, 3, 1, 1, true, false);
            g_family_mt = false;
        } else {
            prim_graph_free(pg);
        }
        graph_free(g);
    }
}

// Reductions the chain cannot compute inside a tile of rows stop it: a sum over the rows (axis
// 0) between two layers, and a row sum whose result is a graph output.
static void layernorm_boundaries(void) {
    {
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "colsum"};
        int h = pb_matmul(&b, x, add_const(&b, 2, wd, 0.3f));
        int s = pb_reduce(&b, RED_SUM, h, 1u << 0, true, false);
        int y = pb_matmul(&b, pb_ew2(&b, EW_SUB, h, s), add_const(&b, 2, wd, 0.3f));
        add_output(pg, y);
        check_mlp("column_reduction", pg, 1, 1, 1, false, true);
    }
    {
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "rowout"};
        int h = pb_matmul(&b, x, add_const(&b, 2, wd, 0.3f));
        int s = pb_reduce(&b, RED_MEAN, h, 1u << 1, true, false);
        int y = pb_matmul(&b, pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_SUB, h, s)),
                          add_const(&b, 2, wd, 0.3f));
        add_output(pg, y);
        add_output(pg, s);
        // The row mean is an output: the first layer's epilogue cannot hold it (its tail would
        // make a tensor read outside), so it ends at the product, read by the reduction and
        // the subtraction: no layer follows it.
        check_mlp("row_stat_output", pg, 1, 1, 1, false, true);
    }
    {
        // A row max (a softmax's): not one of the reductions a chain computes.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "rowmax"};
        int h = pb_matmul(&b, x, add_const(&b, 2, wd, 0.3f));
        int s = pb_reduce(&b, RED_MAX, h, 1u << 1, true, false);
        int y = pb_matmul(&b, pb_ew2(&b, EW_SUB, h, s), add_const(&b, 2, wd, 0.3f));
        add_output(pg, y);
        check_mlp("row_max", pg, 1, 1, 1, false, true);
    }
    {
        // A row mean without keepdims, broadcast back through a reshape: not a row statistic.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {6, 8}, wd[] = {8, 8};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "rownokeep"};
        int h = pb_matmul(&b, x, add_const(&b, 2, wd, 0.3f));
        int s = pb_reduce(&b, RED_MEAN, h, 1u << 1, false, false);
        int y = pb_matmul(&b, pb_ew2(&b, EW_SUB, h, pb_reshape(&b, s, 2, (const int64_t[]){6, 1})),
                          add_const(&b, 2, wd, 0.3f));
        add_output(pg, y);
        check_mlp("row_mean_no_keepdims", pg, 1, 1, 1, false, true);
    }
    {
        // A row-normalised layer between two plain ones, built directly (an RMSNorm: the mean
        // of squares alone, then x * rsqrt(ms + eps) * gamma): one chain of three layers.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {37, 16}, wd[] = {16, 16}, gd[] = {16};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "rms"};
        int h = pb_ew1(&b, EW_TANH, pb_matmul(&b, x, add_const(&b, 2, wd, 0.4f)));
        h = pb_matmul(&b, h, add_const(&b, 2, wd, 0.4f));
        int ms = pb_reduce(&b, RED_MEAN, pb_ew2(&b, EW_MUL, h, h), 1u << 1, true, false);
        int rs = pb_ew1(&b, EW_RSQRT, pb_ew2i(&b, EW_ADD, ms, 1e-6));
        h = pb_ew2(&b, EW_MUL, pb_ew2(&b, EW_MUL, h, rs), add_const(&b, 1, gd, 1.0f));
        int y = pb_matmul(&b, h, add_const(&b, 2, wd, 0.4f));
        add_output(pg, y);
        // Every variant and MT (a float32 statistic, 16 columns: half a warp's lanes).
        g_family_mt = true;
        check_mlp("rmsnorm_middle", pg, 3, 2, 2, true, true);
        g_family_mt = false;
    }
}

// The BLP, kernel-by-kernel execution and the covering accept chains: with the CPU cost model,
// random costs, cheap chains (which must then be chosen) and dear ones (which must not), the
// selection is optimal (brute force on a 3-layer MLP) and runs bit for bit as the primitive
// interpreter.
static void blp_selection(void) {
    for (int layers = 3; layers <= 7; layers += 4) {
        Case k = {.layers = layers, .batch = 37, .bias = true,
                  .width = {12, 20, 16, 24, 8, 16, 8, 4},
                  .act = {A_SILU, A_TANH, A_RELU, A_SINSIG, A_GELU, A_SIGMOID, A_NONE}};
        PrimGraph *pg = mlp_graph(&k);
        Err e = {0};
        CHECK_MSG(fission_cleanup(pg, NULL, &e) == ST_OK, "%s", e.msg);
        CandRules r = cand_rules_default();
        r.mlp_chains = true;
        CandidateSet *cs = NULL;
        CHECK_MSG(cand_enumerate(pg, &r, 0, &cs, &e) == ST_OK, "%s", e.msg);
        float *x = rand_buf(tensor_numel(pg->tensors[pg->inputs[0]]), 1.0f);
        const void *in[1] = {x};
        for (int scenario = 0; cs && scenario < 4; scenario++) {
            if (scenario == 0)
                cost_model_fill(cs, cost_model_find("cpu"));
            for (int i = 0; i < cs->n; i++) {
                int nl = cand_count_linear(pg, &cs->c[i]);
                if (scenario == 1)
                    cs->c[i].cost = 1e-6 * (1 + rand() % 100);
                if (scenario == 2) // chains far cheaper per layer than anything else
                    cs->c[i].cost = nl >= 2 ? 1e-7 * (9 - nl) : 1e-3;
                if (scenario == 3 && nl >= 2) // chains dearer than the layers they replace
                    cs->c[i].cost = 1.0;
            }
            Selection sel;
            memset(&sel, 0, sizeof sel);
            OrchOptions oo = {.time_limit = 10};
            int rc = orchestrate(cs, &oo, &sel, &e);
            CHECK_MSG(rc == ST_OK, "layers %d scenario %d: %s", layers, scenario, e.msg);
            if (rc)
                continue;
            int chains = 0;
            for (int q = 0; q < sel.n; q++)
                chains += cand_count_linear(pg, &cs->c[sel.kernels[q]]) >= 2;
            if (scenario == 2)
                CHECK_MSG(chains >= 1 && sel.n <= 2, "layers %d: %d kernels, %d chains chosen",
                          layers, sel.n, chains);
            if (scenario == 3)
                CHECK_MSG(chains == 0 && sel.n >= layers, "layers %d: %d kernels, %d chains",
                          layers, sel.n, chains);
            if (cs->n <= 24) {
                double best;
                CHECK(orchestrate_brute_force(cs, &best, &e) == ST_OK);
                CHECK_MSG(fabs(best - sel.objective) <= 1e-9 * fmax(best, 1e-9),
                          "layers %d scenario %d: BLP %g, brute force %g", layers, scenario,
                          sel.objective, best);
            }
            void *ref[1] = {NULL}, *got[1] = {NULL};
            rc = prim_interp_run(pg, in, ref, &e);
            CHECK_MSG(rc == ST_OK, "%s", e.msg);
            if (rc == ST_OK) {
                rc = selection_run(pg, cs, &sel, in, got, &e);
                CHECK_MSG(rc == ST_OK, "selection_run: %s", e.msg);
            }
            if (rc == ST_OK)
                CHECK_MSG(memcmp(ref[0], got[0], tensor_nbytes(pg->tensors[pg->outputs[0]])) == 0,
                          "layers %d scenario %d: the selection's output differs", layers,
                          scenario);
            printf("  %d layers, cost scenario %d: %d candidates, %d kernels (%d chains), "
                   "objective %.3g s\n",
                   layers, scenario, cs->n, sel.n, chains, sel.objective);
            free(ref[0]);
            free(got[0]);
            selection_free(&sel);
        }
        free(x);
        cand_set_free(cs);
        prim_graph_free(pg);
    }
}

// rounded_chain_output (the GPU check's reference for tensor-core variants) walks the chain as
// the interpreter does: with 23 bits it gives the interpreter's values, with 10 it differs from
// them, by about TF32's rounding.
static void rounded_reference(void) {
    Case k = {.layers = 4,
              .batch = 37,
              .bias = true,
              .width = {16, 31, 47, 9, 5},
              .act = {A_SINSIG, A_RELU, A_SINSIG, A_NONE}};
    PrimGraph *pg = mlp_graph(&k);
    Err e = {0};
    CHECK(fission_cleanup(pg, NULL, &e) == ST_OK);
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, &r, 0, &cs, &e) == ST_OK);
    const Candidate *full = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if (cand_count_linear(pg, &cs->c[i]) == 4)
            full = &cs->c[i];
    CHECK(full != NULL);
    void **buf = eval_all(pg);
    for (int u = 0; full && u < 2; u++) {
        float *got = rounded_chain_output(pg, full, buf, u ? 10 : 23);
        CHECK(got != NULL);
        if (!got)
            break;
        const float *ref = buf[full->output];
        int64_t n = tensor_numel(pg->tensors[full->output]);
        double mx = 0, d = 0;
        for (int64_t i = 0; i < n; i++) {
            mx = fmax(mx, fabs(ref[i]));
            d = fmax(d, fabs((double)got[i] - ref[i]));
        }
        if (u == 0)
            CHECK_MSG(d <= 1e-6 * mx, "23 bits: %g of %g", d, mx);
        else
            CHECK_MSG(d > 0 && d <= 1e-2 * mx, "10 bits: %g of %g", d, mx);
        free(got);
    }
    free_all(pg, buf);
    cand_set_free(cs);
    prim_graph_free(pg);
}

// The CUDA configs' hardware model: rows per block and weight staging fit the described devices.
static void cuda_configs(void) {
    Case k = {.layers = 6, .batch = 65536, .bias = true, .width = {64, 64, 64, 64, 64, 64, 64},
              .act = {A_SINSIG, A_SINSIG, A_SINSIG, A_SINSIG, A_SINSIG, A_NONE}};
    PrimGraph *pg = mlp_graph(&k);
    Err e = {0};
    CHECK(fission_cleanup(pg, NULL, &e) == ST_OK);
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, &r, 0, &cs, &e) == ST_OK);
    const Candidate *full = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if (cand_count_linear(pg, &cs->c[i]) == 6)
            full = &cs->c[i];
    CHECK(full != NULL);
    for (int u = 0; full && u < 4; u++) {
        // A100 and H100 under float32, then the H100 under FP16 and TF32.
        TargetOptions o = {.precision = u < 2 ? PREC_FP32 : u == 2 ? PREC_FP16 : PREC_TF32};
        KernelConfig cf[32];
        const CudaHw *hw = &g_cu[u < 2 ? u : 1];
        int n = cugen_mlp_configs(pg, full, hw, &o, cf, 32);
        CHECK_MSG(n >= 2, "%s: %d configs", hw->arch, n);
        for (int i = 0; i < n; i++) {
            CudaLaunch ln;
            StrBuf s;
            sb_init(&s);
            CHECK_MSG(emit_at_precision(pg, full, &cf[i], hw, "k", &s, &ln, &e) == ST_OK, "%s",
                      e.msg);
            // The tensor-core kernels start every layer's accumulators at its staged bias.
            if (strstr(cf[i].desc, "v=") && !strstr(cf[i].desc, "v=warp"))
                CHECK_MSG(s.s && strstr(s.s, "layer 0's bias") && strstr(s.s, "layer 5's bias"),
                          "%s '%s': the biases are not folded", hw->arch, cf[i].desc);
            // The H100's first choices for reading, or (ORCH_MLP_DUMP=TEXT) its configs whose
            // description contains TEXT.
            const char *dump = getenv("ORCH_MLP_DUMP");
            if (u > 0 && dump &&
                (strcmp(dump, "1") == 0 ? i == 0 : strstr(cf[i].desc, dump) != NULL))
                printf("// %s\n%s%s\n", cf[i].desc, cugen_prelude(), s.s);
            sb_free(&s);
            CHECK_MSG(ln.smem <= (unsigned)hw->smem_per_block_optin &&
                          ln.block[0] * ln.block[1] * ln.block[2] <= 1024,
                      "%s '%s': smem %u, block %u", hw->arch, cf[i].desc, ln.smem, ln.block[0]);
            if (i < (getenv("ORCH_MLP_ALL_CONFIGS") ? n : 4))
                printf("    %s %s %-52s %.3f ms (grid %u, block %u, smem %u)\n", hw->arch,
                       u < 2 ? "fp32" : u == 2 ? "fp16" : "tf32", cf[i].desc, cf[i].score * 1e3,
                       ln.grid[0], ln.block[0], ln.smem);
        }
    }
    cand_set_free(cs);
    prim_graph_free(pg);
}

// On a GPU, the benchmark's chain (6 layers 64 wide, sin*sigmoid, bias; ORCH_MLP_BENCH_BATCH
// rows, 65536 by default; ORCH_MLP_BENCH_ACT=layernorm: a LayerNorm between layers): every config
// of every variant and precision checked against the interpreter at its tolerance and timed; prints
// each config's kernel time and error, the best of each variant, and where the device model's first
// choice under each precision ranks.
static void gpu_timing(void) {
    if (!g_api) {
        printf("  skip: no CUDA device on this machine\n");
        return;
    }
    const char *bs = getenv("ORCH_MLP_BENCH_BATCH");
    const char *ba = getenv("ORCH_MLP_BENCH_ACT"), *bd = getenv("ORCH_MLP_BENCH_DTYPE");
    int act = ba && strcmp(ba, "relu") == 0 ? A_RELU : A_SINSIG;
    DType dt = bd && strcmp(bd, "f16") == 0    ? DT_FLOAT16
               : bd && strcmp(bd, "bf16") == 0 ? DT_BFLOAT16
                                               : DT_FLOAT;
    Case k = {.layers = 6, .batch = bs && atoll(bs) > 0 ? atoll(bs) : 65536, .bias = true,
              .width = {64, 64, 64, 64, 64, 64, 64}, .act = {act, act, act, act, act, A_NONE}};
    // ORCH_MLP_BENCH_ACT=layernorm: Linear-LayerNorm-ReLU x ORCH_MLP_BENCH_LAYERS (6), each
    // ORCH_MLP_BENCH_WIDTH (64) wide, as PyTorch exports it (float32).
    bool ln = ba && strcmp(ba, "layernorm") == 0;
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    Err e = {0};
    if (ln) {
        const char *bl = getenv("ORCH_MLP_BENCH_LAYERS"), *bw = getenv("ORCH_MLP_BENCH_WIDTH");
        k.layers = bl && atoi(bl) >= 2 && atoi(bl) <= MLP_LAYERS_MAX ? atoi(bl) : 6;
        int64_t w = bw && atoll(bw) >= 1 && atoll(bw) <= 256 ? atoll(bw) : 64;
        size_t len;
        uint8_t *bytes = layernorm_onnx(k.batch, k.layers, w, LN_ACT, false, &len);
        pg = import_prims(bytes, len, "bench_layernorm.onnx", &g);
        free(bytes);
        dt = DT_FLOAT;
        if (!pg) {
            graph_free(g);
            return;
        }
    } else {
        pg = is_half(dt) ? mlp_graph_half(&k, dt, true) : mlp_graph(&k);
        CHECK(fission_cleanup(pg, NULL, &e) == ST_OK);
    }
    CandRules r = cand_rules_default();
    r.mlp_chains = true;
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, &r, 0, &cs, &e) == ST_OK);
    const Candidate *full = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if (cand_count_linear(pg, &cs->c[i]) == k.layers)
            full = &cs->c[i];
    CHECK(full != NULL);
    if (!full) {
        cand_set_free(cs);
        prim_graph_free(pg);
        graph_free(g);
        return;
    }
    double t0 = now();
    void **buf = eval_all(pg), **wbuf = NULL;
    PrimGraph *wide = NULL;
    if (is_half(dt)) {
        wide = widen(pg);
        wbuf = eval_like(wide, buf);
    }
    KernelConfig cf[256];
    int n = chain_configs(pg, full, &g_dhw, 0, false, true, cf, 256);
    // ORCH_MLP_BENCH_ONLY=TEXT keeps the configs whose description contains TEXT (one kernel
    // family under a profiler).
    const char *only = getenv("ORCH_MLP_BENCH_ONLY");
    if (only && *only) {
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (strstr(cf[i].desc, only))
                cf[kept++] = cf[i];
        n = kept;
    }
    printf("  batch %lld, %d layers, %s, %s: %d configs (interpreter %.1f s)\n", (long long)k.batch,
           k.layers, ln ? "linear-layernorm-relu" : act_name[act], dtype_name(dt), n, now() - t0);
    // Several modules compiled in parallel threads.
    enum { GROUPS = 8 };
    StrBuf src[GROUPS];
    Job *jobs = xcalloc((size_t)n + 1, sizeof(Job));
    int first[GROUPS + 1];
    Compile comp[GROUPS];
    pthread_t th[GROUPS];
    t0 = now();
    for (int gi = 0; gi < GROUPS; gi++) {
        first[gi] = n * gi / GROUPS;
        first[gi + 1] = n * (gi + 1) / GROUPS;
        sb_init(&src[gi]);
        sb_puts(&src[gi], cugen_prelude());
        for (int q = first[gi]; q < first[gi + 1]; q++) {
            Job *j = &jobs[q];
            j->c = full;
            j->cfg = cf[q];
            j->tol = config_tol(pg, full, &cf[q]);
            snprintf(j->fn, sizeof j->fn, "k_bench_%d", q);
            CHECK_MSG(emit_at_precision(pg, full, &cf[q], &g_dhw, j->fn, &src[gi], &j->ln, &e) ==
                          ST_OK,
                      "emit %s: %s", cf[q].desc, e.msg);
        }
        memset(&comp[gi], 0, sizeof comp[gi]);
        comp[gi].src = src[gi].s;
        comp[gi].arch = g_dhw.arch;
        pthread_create(&th[gi], NULL, compile_thread, &comp[gi]);
    }
    for (int gi = 0; gi < GROUPS; gi++) {
        pthread_join(th[gi], NULL);
        CHECK_MSG(comp[gi].rc == ST_OK, "compile: %.1500s", comp[gi].e.msg);
    }
    printf("  compiled in %.1f s\n", now() - t0);
    for (int gi = 0; gi < GROUPS; gi++)
        if (comp[gi].rc == ST_OK && first[gi + 1] > first[gi])
            gpu_run("bench", pg, buf, wbuf, jobs + first[gi], first[gi + 1] - first[gi],
                    comp[gi].cubin, true);
    // Sorted by time.
    int *order = xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && jobs[order[j]].time < jobs[order[j - 1]].time; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        const Job *j = &jobs[order[i]];
        printf("    %8.1f us  model %7.1f us  err %.1e  regs %3d local %4d  %s\n",
               j->time * 1e6, j->cfg.score * 1e6, j->err, j->regs, j->local, j->cfg.desc);
    }
    static const int vars[] = {CUMLP_BLOCK, CUMLP_WARP, CUMLP_F64, CUMLP_3XTF32,
                               CUMLP_TF32,  CUMLP_F16,  CUMLP_BF16};
    static const char *const vnames[] = {"block", "warp", "f64", "3xtf32", "tf32", "f16", "bf16"};
    for (size_t v = 0; v < ORCH_COUNT(vars); v++)
        for (int i = 0; i < n; i++)
            if (mcfg(&jobs[order[i]].cfg).var == vars[v]) {
                printf("  best %-6s %8.1f us  %s\n", vnames[v], jobs[order[i]].time * 1e6,
                       jobs[order[i]].cfg.desc);
                break;
            }
    // The device model's first config under each precision, and its rank among the measured.
    static const Precision precs[] = {PREC_FP32, PREC_TF32, PREC_FP16, PREC_BF16};
    static const char *const pnames[] = {"fp32", "tf32", "fp16", "bf16"};
    for (size_t p = 0; p < ORCH_COUNT(precs); p++) {
        TargetOptions o = {.precision = precs[p]};
        KernelConfig top[64];
        int nt = cugen_mlp_configs(pg, full, &g_dhw, &o, top, 64);
        int rank = 0;
        double t_first = INFINITY, t_best = INFINITY;
        for (int i = 0; i < n; i++) {
            bool offered = false;
            for (int q = 0; q < nt && !offered; q++)
                offered = strcmp(top[q].desc, jobs[i].cfg.desc) == 0;
            if (offered)
                t_best = fmin(t_best, jobs[i].time);
            if (nt > 0 && strcmp(top[0].desc, jobs[i].cfg.desc) == 0)
                t_first = jobs[i].time;
        }
        for (int i = 0; i < n; i++)
            for (int q = 0; q < nt; q++)
                if (strcmp(top[q].desc, jobs[i].cfg.desc) == 0 && jobs[i].time < t_first)
                    rank++;
        printf("  %s: first config %s %.1f us (%d offered configs faster), best offered %.1f us\n",
               pnames[p], nt > 0 ? top[0].desc : "-", t_first * 1e6, rank, t_best * 1e6);
    }
    free(order);
    for (int gi = 0; gi < GROUPS; gi++) {
        free(comp[gi].cubin);
        sb_free(&src[gi]);
    }
    free(jobs);
    free_all(pg, buf);
    if (wide) {
        free_all(wide, wbuf);
        prim_graph_free(wide);
    }
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
}

static void gpu_present(void) {
    if (g_api) {
        printf("  GPU: %d kernels run and compared\n", g_gpu_ran);
        CHECK(g_gpu_ran > 0);
        return;
    }
    gpu_check_skip("no CUDA device on this machine (%s)", g_gpu_err.msg);
}

static void counts(void) {
    printf("  %d cases (%d half), %d chain candidates, %d CPU kernels checked, %d CUDA kernels "
           "compiled per arch\n",
           g_cases, g_half_cases, g_chains, g_cpu_kernels,
           g_cu_kernels / (!g_api && g_sm90_only ? 1 : 2));
    if (g_sampled_out)
        printf("  NVRTC compiled one kernel in %d of each module (ORCH_CUGEN_SAMPLE): %d kernels "
               "emitted only\n",
               g_sample, g_sampled_out);
    CHECK(g_half_cases >= 12);
    CHECK(g_no_cpu || g_cpu_kernels > 50);
    CHECK(!g_nvrtc || (g_gpu_only && g_api) || g_cu_kernels > 50);
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--write-model") == 0) {
        size_t len;
        srand(1);
        int64_t batch = argc >= 4 && atoll(argv[3]) > 0 ? atoll(argv[3]) : 65536;
        uint8_t *bytes;
        if (argc >= 5 && strcmp(argv[4], "layernorm") == 0) {
            int layers = argc >= 6 ? atoi(argv[5]) : 6;
            int64_t width = argc >= 7 ? atoll(argv[6]) : 64;
            if (layers < 1 || layers > 64 || width < 1 || width > 4096) {
                printf("--write-model: layernorm LAYERS (1-64) WIDTH (1-4096)\n");
                return 1;
            }
            bytes = layernorm_onnx(batch, layers, width, LN_ACT, false, &len);
        } else {
            bytes = sinsig_onnx(batch, 6, 64, argc >= 5 && strcmp(argv[4], "relu") == 0,
                                argc >= 5 && strcmp(argv[4], "gated") == 0, &len);
        }
        FILE *f = fopen(argv[2], "wb");
        bool ok = f && fwrite(bytes, 1, len, f) == len;
        ok = f && fclose(f) == 0 && ok;
        free(bytes);
        printf("%s %s (%zu bytes)\n", ok ? "wrote" : "could not write", argv[2], len);
        return ok ? 0 : 1;
    }
    unsigned seed =
        getenv("ORCH_TEST_SEED") ? (unsigned)atoi(getenv("ORCH_TEST_SEED")) : (unsigned)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("seed %u\n", seed);
    srand(seed);
    Err e = {0};
    if (target_open(&target_cpu, NULL, &g_m, &e) != ST_OK) {
        printf("hw_detect: %s\n", e.msg);
        return 1;
    }
    g_hw = g_m.hw;
    printf("hw: %s\n", g_hw.fingerprint);
    Err en = {0};
    g_nvrtc = nvrtc_load(&en) == ST_OK;
    if (!g_nvrtc)
        printf("skip: CUDA compile half: NVRTC unavailable (%s)\n", en.msg);
    cuda_hw_described(&g_cu[0], "A100-SXM4-80GB", 80, 108, 167936, 40 << 20, 1410000, 2.039e12,
                      2048);
    cuda_hw_described(&g_cu[1], "H100 SXM", 90, 132, 233472, 50 << 20, 1980000, 3.35e12, 2048);
    g_api = g_nvrtc ? cuda_api_load(&g_gpu_err) : NULL;
    if (!g_nvrtc)
        snprintf(g_gpu_err.msg, sizeof g_gpu_err.msg, "no NVRTC");
    if (g_api && (cuda_device_open(g_api, 0, &g_dev, &g_gpu_err) != ST_OK ||
                  cuda_hw_detect(&g_dhw, NULL, &g_gpu_err) != ST_OK))
        g_api = NULL;
    if (g_api)
        printf("GPU: %s (%s, %d SMs)\n", g_dhw.name, g_dhw.arch, g_dhw.sm_count);
    g_no_cpu = getenv("ORCH_MLP_NO_CPU") && strcmp(getenv("ORCH_MLP_NO_CPU"), "0") != 0;
    if (g_no_cpu)
        printf("skip: the CPU kernels (ORCH_MLP_NO_CPU)\n");
    g_gpu_only = getenv("ORCH_MLP_GPU_ONLY") && strcmp(getenv("ORCH_MLP_GPU_ONLY"), "0") != 0;
    g_sm90_only =
        getenv("ORCH_CUGEN_SM90_ONLY") && strcmp(getenv("ORCH_CUGEN_SM90_ONLY"), "0") != 0;
    g_sample = getenv("ORCH_CUGEN_SAMPLE") ? ORCH_MAX(1, atoi(getenv("ORCH_CUGEN_SAMPLE"))) : 1;
    if (g_gpu_only && g_api)
        printf("skip: compiling for the described A100 and H100 (ORCH_MLP_GPU_ONLY)\n");
    const char *only = getenv("ORCH_TEST_ONLY"); // one case, by name
#define RUN_CASE(fn)                                                                               \
    do {                                                                                           \
        if (!only || strcmp(only, #fn) == 0)                                                       \
            RUN(fn);                                                                               \
    } while (0)
    RUN_CASE(fixed_cases);
    RUN_CASE(random_cases);
    RUN_CASE(gated_cases);
    RUN_CASE(sin_guard);
    RUN_CASE(half_cases);
    RUN_CASE(chain_boundaries);
    RUN_CASE(onnx_sinsig);
    RUN_CASE(onnx_gated);
    RUN_CASE(layernorm_cases);
    RUN_CASE(layernorm_boundaries);
    RUN_CASE(blp_selection);
    RUN_CASE(rounded_reference);
    RUN_CASE(cuda_configs);
    RUN_CASE(gpu_timing);
    RUN_CASE(gpu_present);
    if (!only)
        RUN(counts);
    if (g_api)
        cuda_device_close(&g_dev);
    return CHECK_DONE();
}
