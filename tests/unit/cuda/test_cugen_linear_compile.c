// Unit tests of the CUDA target's linear emitter (src/backend/cuda/emit_linear_cuda.c,
// emit_matmul_cuda.c, emit_conv_cuda.c). Compile half (any machine with NVRTC): primitive graphs
// with one matmul or convolution (1-D to 3-D, transposed too) and pointwise primitives around it
// (built directly, and every model of a models folder given as argv[1]: DIR/*/model.onnx with
// DIR/*/args.txt's
// --input-shapes) are cut into candidates; every config of every candidate cugen_lin_supports
// accepts is emitted (many kernels per NVRTC program) and compiled for sm_80 and sm_90a with the
// configs of an A100 and an H100; the tensor-core configs (TF32, FP16, BF16: all of them, on odd
// sizes, batched and broadcast products, transposed operands, epilogues, implicit-GEMM convs) once
// under each precision, and which configs each precision offers; 1-D, 3-D and transposed
// convolutions likewise. Prints a skip line and passes when NVRTC cannot be loaded.
// GPU half (only where cuda_api_load succeeds): the same kernels, configured for the detected
// device, run on random inputs and compared with the primitive interpreter at
// |got - ref| <= tol |ref| + tol max|ref|, tol the compile driver's for the config's precision
// (1e-4 for float32; lab_candidate_tolerance); the TF32, FP16 and BF16 tensor-core configs of
// each precision on odd, batched, transposed and conv shapes likewise; then the best configs of
// a 1024^3 matmul and a 3x3 64->64 conv on 56x56 under each precision, and on float16 and
// bfloat16 tensors, timed with CUDA events (median of 50), GFLOP/s printed.
// Half storage (half_storage): the same kinds of graphs with float16 and with bfloat16 tensors
// (inputs, weights, activations; some ending with the CAST to a float32 output), as the storage
// pass leaves them under --precision fp16 / bf16: every variant's best config of each supported
// candidate (every tensor-core tile config on a GPU) emitted and compiled for sm_90a, and on a
// GPU run and checked as the kernel lab checks them (lab_outputs_agree_tol at the compile's
// tolerance) against the interpreter on the half graph, or where the interpreter has no half
// kernel for a primitive (convolution), on a float32 twin of the graph holding the same
// half-rounded values.
// Split-K (splitk: SIMT; tc_splitk: the tensor cores, over float32 and half tensors): the H100
// model offers split configs first where the tiles leave SMs idle (ResNet-18's deep 3x3 convs);
// split kernels of odd, batched and conv products compiled, on a GPU run twice (the arrival
// counters reset) and compared with the interpreter like the unsplit ones.
// Options (options_independent, no GPU or NVRTC needed beyond the skip above): the precision
// reaches the emitters as an argument only: one candidate's configs and sources under FP16 and
// FP32, interleaved in one process or proposed by two threads at once, are each what they are
// computed alone (and differ from each other).
// Environment: ORCH_TEST_SEED; ORCH_CUGEN_PARTS=splitk,tensor_cores,... runs only those parts;
// ORCH_REQUIRE_GPU=1 fails where the GPU half cannot run;
// ORCH_CUGEN_EMIT_ONLY=1 (without a GPU) emits every kernel but skips NVRTC (the sanitizer pass);
// ORCH_CUGEN_ALL=1 emits every config of every candidate (by default two graphs get every config,
// the others their best one or three: NVRTC takes ~0.5 s a kernel).
#include "../cuda_hw.h"
#include "../gpu_check.h"
#include "../model_dirs.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/nvrtc.h"
#include "backend/kernel_lab.h"
#include "candidates/candidates.h"
#include "fission/fission.h"
#include "interp/prim_interp.h"
#include "onnx/load.h"
#include "ops/fold.h"
#include "passes/passes.h"
#include "prim/prim_build.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static CudaHw g_hw[2]; // A100 (sm_80), H100 (sm_90a): synthetic, for the compile half
static int g_nhw;
static bool g_sm90_only; // ORCH_CUGEN_SM90_ONLY=1 (make test): no GPU, the described H100 alone
static bool g_nvrtc;
static const CudaApi *g_api;
static CudaDevice g_dev;
static CudaHw g_dhw;  // the detected device (GPU half)
static Err g_gpu_err; // why there is no GPU half
static int g_kernels, g_programs, g_candidates, g_ran;
static int g_max_cands = 3; // candidates per graph in the quick mode (see ORCH_CUGEN_ALL)
static bool g_in_models;
static DType g_dt = DT_FLOAT;    // the dtype of the graph builders' inputs and constants
static DType g_round = DT_FLOAT; // a float32 twin: values rounded to this half type
static bool g_half;              // half storage: every variant's best config (emit_all)
static bool g_half_tiles;        // ... and every tensor-core tile config
static PrimGraph *g_twin;        // the float32 twin of the graph check_graph runs (or NULL)
static const char *g_only;       // when set: only configs whose desc holds it are emitted
static int g_only_kernels;       // ... and how many were
static int g_only_max;           // ... at most this many per candidate (0: all)
// Split-K of the tensor cores (tc_splitk): only split tensor-core configs are emitted, the
// unsplit ones offered as copies with split = g_split_force (when > 1).
static bool g_split_only;
static int g_split_force;
static int g_split_tc; // split tensor-core kernels NVRTC compiled (all archs)
// ORCH_CUGEN_SAMPLE=N (make test, no GPU): every kernel is emitted, but NVRTC compiles only the
// first of each graph and every N-th after it; make test-nvrtc and GPU runs compile them all.
static int g_sample = 1;
static int g_sampled_out; // kernels emitted but not compiled
static StrBuf g_scratch;  // where the sampled-out kernels' sources go
// The emitters' options under float32 (the default).
static const TargetOptions g_fp32 = {.precision = PREC_FP32};

// The precision a config computes in (its variant), for its check's tolerance.
static Precision desc_precision(const char *desc) {
    return strstr(desc, "v=tf32")   ? PREC_TF32
           : strstr(desc, "v=f16")  ? PREC_FP16
           : strstr(desc, "v=bf16") ? PREC_BF16
                                    : PREC_FP32;
}

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

// n random values stored as dtype dt (rounded to g_round first: the twin's values).
static void *rand_vals(DType dt, int64_t n) {
    void *p = xcalloc((size_t)(n > 0 ? n : 1), dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        double v = frand();
        if (g_round != DT_FLOAT) {
            uint16_t h = 0;
            elem_set_f64(g_round, &h, 0, v);
            v = elem_get_f64(g_round, &h, 0);
        }
        elem_set_f64(dt, p, i, v);
    }
    return p;
}

static float *rand_buf(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

// The translation unit's start.
static const char *prelude(void) {
    return cugen_prelude();
}

static int add_input(PrimGraph *pg, const char *name, int rank, const int64_t *dims) {
    Tensor *t = pg_add_tensor(pg, name, g_dt, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

static bool g_cast_out; // graph outputs go through a CAST to float32 (a model output)

static void add_output(PrimGraph *pg, int t) {
    if (g_cast_out) {
        PB b = {pg, "cast"};
        t = pb_cast(&b, t, DT_FLOAT);
    }
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = t;
}

static int add_const(PB *b, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    void *v = g_dt == DT_FLOAT && g_round == DT_FLOAT ? (void *)rand_buf(n) : rand_vals(g_dt, n);
    int t = pb_const(b, g_dt, rank, dims, v);
    free(v);
    return t;
}

// Every tensor of the graph computed by the interpreter (graph inputs random).
// inputs_only: constants and random inputs, nothing computed.
static void **eval_graph(const PrimGraph *pg, bool inputs_only) {
    void **buf = xcalloc((size_t)pg->n_tensors, sizeof(void *));
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        if (T->data) {
            size_t nb = tensor_nbytes(T);
            buf[t] = malloc(nb + 64);
            memcpy(buf[t], T->data, nb);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *T = pg->tensors[pg->inputs[i]];
        if (T->dtype == DT_FLOAT && g_round == DT_FLOAT) {
            buf[pg->inputs[i]] = rand_buf(tensor_numel(T));
        } else if (dtype_is_float(T->dtype)) { // half storage, or its twin
            buf[pg->inputs[i]] = rand_vals(T->dtype, tensor_numel(T));
        } else { // integer inputs (token ids, indices): zeros, valid everywhere
            buf[pg->inputs[i]] = xcalloc(tensor_nbytes(T) + 64, 1);
        }
    }
    for (int i = 0; i < pg->n_prims && !inputs_only; i++) {
        const Prim *p = pg->prims[i];
        if (p->dead)
            continue;
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        void **y = xcalloc((size_t)p->n_out + 1, sizeof(void *));
        for (int j = 0; j < p->n_in; j++)
            x[j] = p->in[j] >= 0 ? buf[p->in[j]] : NULL;
        for (int o = 0; o < p->n_out; o++) {
            if (p->out[o] >= 0 && !buf[p->out[o]])
                buf[p->out[o]] = xcalloc(tensor_nbytes(pg->tensors[p->out[o]]) + 64, 1);
            y[o] = p->out[o] >= 0 ? buf[p->out[o]] : NULL;
        }
        Err e = {0};
        int rc = p->kind == PRIM_OPAQUE ? prim_eval_opaque(pg, p, x, y, &e)
                 : p->n_out == 1        ? prim_eval(pg, p, x, y[0], &e)
                                        : ST_UNSUPPORTED;
        free(x);
        free(y);
        // Later values stay unknown (NULL): run_jobs skips the kernels that need them.
        if (rc != ST_OK) {
            printf("  (interpreter stopped at primitive %d: %s)\n", i, e.msg);
            for (int o = 0; o < p->n_out; o++)
                if (p->out[o] >= 0) {
                    free(buf[p->out[o]]);
                    buf[p->out[o]] = NULL;
                }
            break;
        }
    }
    return buf;
}

static void **eval_all(const PrimGraph *pg) {
    return eval_graph(pg, false);
}

// tol: 1e-4 for float32 kernels; TF32 ones (10-bit mantissas) get 5e-3.
static double compare(const float *got, const float *ref, int64_t n, int64_t *bad, double rt) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    double worst = -1;
    *bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), tol = rt * fabs(ref[i]) + rt * mx;
        if (!(d <= tol) && (*bad < 0 || d - tol > worst)) {
            worst = isnan(d) ? INFINITY : d - tol;
            *bad = i;
        }
    }
    return worst;
}

typedef struct Job {
    const Candidate *c;
    KernelConfig cfg;
    CudaLaunch ln;
    char fn[48];
    int prog;         // the program (of emit_all's srcs) holding its kernel
    bool tc_split;    // a split-K tensor-core config
    bool sampled_out; // emitted, but left out of NVRTC's programs (ORCH_CUGEN_SAMPLE)
} Job;

// The named fields of a matmul or convolution config (cugen_linear.h).
static CuLinearConfig lincfg(const KernelConfig *k) {
    CuLinearConfig q;
    culin_config_unpack(k, &q);
    return q;
}

static bool tc_variant(const KernelConfig *cf) {
    int64_t v = lincfg(cf).var;
    return v == CUV_TF32 || v == CUV_F16 || v == CUV_BF16;
}

// The variant of a config's desc ("v=simt", with " sk" when split).
static void variant_of(const char *desc, char *out, size_t cap) {
    const char *v = strstr(desc, "v=");
    size_t n = v ? strcspn(v, " ") : 0;
    snprintf(out, cap, "%.*s%s", (int)n, v ? v : "", strstr(desc, " sk=") ? " sk" : "");
}

// Half storage: the best config of each variant, and every tensor-core tile on a GPU (or where
// g_half_tiles asks).
static bool half_keep(const KernelConfig *cf, int i) {
    char vi[32], vj[32];
    variant_of(cf[i].desc, vi, sizeof vi);
    if ((g_api || g_half_tiles) &&
        (!strcmp(vi, "v=f16") || !strcmp(vi, "v=bf16") || strstr(vi, "dc")))
        return true;
    for (int j = 0; j < i; j++) {
        variant_of(cf[j].desc, vj, sizeof vj);
        if (!strcmp(vi, vj))
            return false;
    }
    return true;
}

// Emits every supported candidate's configs (at most k each) for hw into src; returns the jobs.
// Job i goes to program i % nsrc (programs compile in parallel threads on a GPU machine).
static Job *emit_all(const char *name, const PrimGraph *pg, const CandidateSet *cs,
                     const CudaHw *hw, const TargetOptions *opt, int k, StrBuf *srcs, int nsrc,
                     int *nj, int *ncand) {
    Job *jobs = NULL;
    *nj = 0;
    *ncand = 0;
    for (int u = 0; u < nsrc; u++)
        sb_puts(&srcs[u], prelude());
    // The largest supported candidate (the LINEAR with its whole epilogue) is always emitted;
    // in the quick mode at most g_max_cands in all.
    int largest = -1;
    for (int ci = 0; ci < cs->n; ci++)
        if ((largest < 0 || cs->c[ci].n_prims > cs->c[largest].n_prims) &&
            cugen_lin_supports(pg, &cs->c[ci], opt))
            largest = ci;
    for (int ci = 0; ci < cs->n; ci++) {
        const Candidate *c = &cs->c[ci];
        if (!cugen_lin_supports(pg, c, opt))
            continue;
        if (*ncand >= g_max_cands - (largest > ci) && ci != largest)
            continue;
        (*ncand)++;
        KernelConfig cf[64];
        int n = cugen_lin_configs(pg, c, hw, opt, cf, k);
        CHECK_MSG(n >= 1, "%s: candidate %d supported but no config", name, c->id);
        int matched = 0;
        for (int i = 0; i < n; i++) {
            KernelConfig kc = cf[i];
            if (g_only && !strstr(kc.desc, g_only))
                continue;
            if (g_split_only) {
                if (!tc_variant(&kc))
                    continue;
                CuLinearConfig lc = lincfg(&kc);
                if (lc.split <= 1) { // a split copy, unless that one is offered too
                    if (g_split_force <= 1)
                        continue;
                    lc.split = g_split_force;
                    culin_config_pack(&lc, &kc); // (the score stays)
                    bool offered = false;
                    for (int q = 0; q < n && !offered; q++)
                        offered = !strcmp(cf[q].desc, kc.desc);
                    if (offered)
                        continue;
                }
            } else if (g_half && !half_keep(cf, i)) {
                continue;
            }
            if (g_only && g_only_max && matched >= g_only_max)
                continue;
            matched++;
            if (g_only)
                g_only_kernels++;
            jobs = xrealloc(jobs, sizeof(Job) * (size_t)(*nj + 1));
            Job *j = &jobs[(*nj)++];
            j->c = c;
            j->cfg = kc;
            j->prog = (*nj - 1) % nsrc;
            j->tc_split = tc_variant(&kc) && lincfg(&kc).split > 1;
            j->sampled_out = !g_api && g_sample > 1 && (*nj - 1) % g_sample != 0;
            g_sampled_out += j->sampled_out;
            snprintf(j->fn, sizeof j->fn, "k_%d_%d", c->id, i);
            Err e = {0};
            StrBuf *dst = j->sampled_out ? &g_scratch : &srcs[j->prog];
            int rc = cugen_lin_emit(pg, c, &kc, hw, opt, j->fn, dst, &j->ln, &e);
            if (j->sampled_out)
                sb_clear(&g_scratch);
            CHECK_MSG(rc == ST_OK, "%s: emit %s: %s", name, kc.desc, e.msg);
        }
    }
    return jobs;
}

typedef struct Compile {
    const char *src, *name, *arch;
    int rc;
    Err e;
    void *cubin;
    size_t size;
    double secs;
} Compile;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *compile_thread(void *arg) {
    Compile *c = arg;
    NvrtcOptions o = {.arch = c->arch};
    double t0 = now();
    if (getenv("ORCH_CUGEN_EMIT_ONLY") && !g_api) { // the sanitizer pass: emitters only
        c->rc = ST_OK;
        return NULL;
    }
    c->rc = nvrtc_compile(c->src, c->name, &o, &c->cubin, &c->size, &c->e);
    c->secs = now() - t0;
    return NULL;
}

// Runs every job of a compiled module on the device and compares with the interpreter.
// Half storage: got (the output's dtype) against ref (that dtype, or float32 from the twin:
// rounded to it first) as the kernel lab checks, at the compile's tolerance for the graph's type.
static bool half_agrees(const PrimGraph *pg, const Candidate *c, const void *got, const void *ref,
                        DType ref_dt, char *why, size_t why_n) {
    const Tensor *O = pg->tensors[c->output];
    int64_t n = tensor_numel(O);
    void *r = xcalloc((size_t)(n > 0 ? n : 1), dtype_size(O->dtype));
    for (int64_t i = 0; i < n; i++)
        elem_set_f64(O->dtype, r, i, elem_get_f64(ref_dt, ref, i));
    const Tensor *A = NULL;
    for (int i = 0; i < c->n_prims && !A; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_LINEAR)
            A = pg->tensors[pg->prims[c->prims[i]]->in[0]];
    Precision p = A && A->dtype == DT_BFLOAT16 ? PREC_BF16 : PREC_FP16;
    double err;
    bool ok = lab_outputs_agree_tol(O->dtype, n, got, r, lab_candidate_tolerance(pg, c, p), &err,
                                    why, why_n);
    free(r);
    return ok;
}

static void run_jobs(const char *name, const PrimGraph *pg, void **buf, void **twin,
                     const Job *jobs, int nj, const void *cubin) {
    const CudaApi *cu = g_api;
    Err e = {0};
    CUmodule mod = NULL;
    if (CUDA_TRY(cu, &e, cuModuleLoadData, &mod, cubin)) {
        CHECK_MSG(false, "%s: %s", name, e.msg);
        return;
    }
    for (int i = 0; i < nj; i++) {
        const Job *j = &jobs[i];
        const Candidate *c = j->c;
        bool known = buf[c->output] != NULL || (twin && twin[c->output]);
        for (int q = 0; q < c->n_inputs; q++)
            known &= buf[c->inputs[q]] != NULL;
        if (!known)
            continue;
        CUfunction f;
        struct {
            CUdeviceptr in[ORCH_CUDA_MAX_IN];
            CUdeviceptr out;
        } args;
        memset(&args, 0, sizeof args);
        bool ok = !CUDA_TRY(cu, &e, cuModuleGetFunction, &f, mod, j->fn);
        // Over 48 KiB of dynamic shared memory (v=f16dc) needs the opt-in, as the runtime sets.
        if (ok && j->ln.smem > 48 * 1024)
            ok = !CUDA_TRY(cu, &e, cuFuncSetAttribute, f,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)j->ln.smem);
        for (int q = 0; ok && q < c->n_inputs; q++) {
            size_t nb = tensor_nbytes(pg->tensors[c->inputs[q]]);
            ok = !CUDA_TRY(cu, &e, cuMemAlloc, &args.in[q], nb + 16) &&
                 !CUDA_TRY(cu, &e, cuMemcpyHtoD, args.in[q], buf[c->inputs[q]], nb);
        }
        int64_t n = tensor_numel(pg->tensors[c->output]);
        size_t ob = tensor_nbytes(pg->tensors[c->output]);
        float *got = malloc(ob + 4);
        ok = ok && !CUDA_TRY(cu, &e, cuMemAlloc, &args.out, ob) &&
             !CUDA_TRY(cu, &e, cuMemsetD8, args.out, 0xff, ob); // NaN poison
        void *params[] = {&args};
        // Split-K kernels run twice, poisoned again between: the second launch needs the
        // arrival counters the first one's summing blocks reset.
        for (int r = 0; r < (strstr(j->cfg.desc, " sk=") ? 2 : 1); r++)
            ok = ok && (r == 0 || !CUDA_TRY(cu, &e, cuMemsetD8, args.out, 0xff, ob)) &&
                 !CUDA_TRY(cu, &e, cuLaunchKernel, f, j->ln.grid[0], j->ln.grid[1], j->ln.grid[2],
                           j->ln.block[0], j->ln.block[1], j->ln.block[2], j->ln.smem, NULL, params,
                           NULL) &&
                 !CUDA_TRY(cu, &e, cuCtxSynchronize);
        ok = ok && !CUDA_TRY(cu, &e, cuMemcpyDtoH, got, args.out, ob);
        CHECK_MSG(ok, "%s: %s '%s': %s", name, j->fn, j->cfg.desc, e.msg);
        if (ok && twin) {
            char why[256] = "";
            bool own = buf[c->output] != NULL; // the interpreter ran the half graph this far
            bool agree =
                half_agrees(pg, c, got, own ? buf[c->output] : twin[c->output],
                            own ? pg->tensors[c->output]->dtype : DT_FLOAT, why, sizeof why);
            CHECK_MSG(agree, "%s: candidate %d (%d prims) '%s' (reference: %s): %s", name, c->id,
                      c->n_prims, j->cfg.desc, own ? "interpreter" : "float32 twin", why);
            g_ran++;
        } else if (ok) {
            int64_t bad;
            // The compile driver's tolerance for the config's precision and the product's K.
            double tol = lab_candidate_tolerance(pg, c, desc_precision(j->cfg.desc));
            double w = compare(got, buf[c->output], n, &bad, tol);
            CHECK_MSG(w <= 0, "%s: candidate %d (%d prims) '%s': out[%lld] = %g, want %g", name,
                      c->id, c->n_prims, j->cfg.desc, (long long)bad, bad >= 0 ? got[bad] : 0.0,
                      bad >= 0 ? ((float *)buf[c->output])[bad] : 0.0);
            g_ran++;
        }
        free(got);
        for (int q = 0; q < c->n_inputs; q++)
            if (args.in[q])
                cu->cuMemFree(args.in[q]);
        if (args.out)
            cu->cuMemFree(args.out);
    }
    cu->cuModuleUnload(mod);
}

// Compiles (and on a GPU runs) every supported candidate of pg; takes ownership of pg.
// pg's candidates proposed and emitted under opt.
static void check_graph(const char *name, PrimGraph *pg, const TargetOptions *opt, int k,
                        int min_cands) {
    Err e = {0};
    // On a GPU every config of every candidate of the built graphs runs; the models' candidates
    // all run in their best config.
    g_max_cands = g_in_models || g_api || getenv("ORCH_CUGEN_ALL") ? 1 << 30 : 3;
    if (getenv("ORCH_CUGEN_ALL") || (g_api && !g_in_models))
        k = 64;
    if (g_half) { // every config listed, emit_all keeps each variant's best; 2 candidates (3)
        g_max_cands = g_api ? 3 : 2;
        k = 64;
    }
    CHECK_MSG(prim_graph_verify(pg, &e) == ST_OK, "%s: %s", name, e.msg);
    CandidateSet *cs = NULL;
    CHECK_MSG(cand_enumerate(pg, NULL, 0, &cs, &e) == ST_OK, "%s: %s", name, e.msg);
    if (!cs) {
        prim_graph_free(pg);
        return;
    }
    // Without a GPU: one program per described arch (A100, H100). On a GPU only the device's
    // arch, its kernels spread over one program per core (NVRTC is single-threaded: a
    // 192-config split-K graph took 120 s in one program).
    enum { MAX_PROGS = 16 };
    int first = g_api ? g_nhw : g_half || g_sm90_only ? g_nhw - 1 : 0, nu = g_nhw + (g_api ? 1 : 0);
    int nprog = g_api ? (int)ORCH_MAX(1, ORCH_MIN(MAX_PROGS, sysconf(_SC_NPROCESSORS_ONLN))) : 1;
    StrBuf src[3][MAX_PROGS];
    Job *jobs[3] = {NULL, NULL, NULL};
    int nj[3] = {0, 0, 0}, ncand = 0;
    Compile comp[3][MAX_PROGS];
    pthread_t th[3][MAX_PROGS];
    memset(comp, 0, sizeof comp);
    for (int u = first; u < nu; u++) {
        const CudaHw *hw = u < g_nhw ? &g_hw[u] : &g_dhw;
        int np = u < g_nhw ? 1 : nprog;
        for (int q = 0; q < np; q++)
            sb_init(&src[u][q]);
        jobs[u] = emit_all(name, pg, cs, hw, opt, k, src[u], np, &nj[u], &ncand);
        for (int q = 0; q < np; q++) {
            comp[u][q].src = src[u][q].s;
            comp[u][q].name = name;
            comp[u][q].arch = hw->arch;
        }
    }
    CHECK_MSG(ncand >= ORCH_MIN(min_cands, g_max_cands),
              "%s: %d candidates supported, expected >= %d", name, ncand, min_cands);
    // Programs with no kernel (fewer jobs than programs) are not compiled.
    for (int u = first; u < nu; u++)
        for (int q = 0; q < (u < g_nhw ? 1 : nprog) && q < nj[u]; q++)
            pthread_create(&th[u][q], NULL, compile_thread, &comp[u][q]);
    double secs = 0;
    for (int u = first; u < nu; u++) {
        for (int q = 0; q < (u < g_nhw ? 1 : nprog) && q < nj[u]; q++) {
            pthread_join(th[u][q], NULL);
            CHECK_MSG(comp[u][q].rc == ST_OK, "%s (%s): %.1500s", name, comp[u][q].arch,
                      comp[u][q].e.msg);
            secs = ORCH_MAX(secs, comp[u][q].secs);
        }
        if (comp[u][0].rc == ST_OK && nj[u] > 0) {
            g_kernels += nj[u];
            g_programs++;
            for (int i = 0; i < nj[u]; i++)
                g_split_tc += jobs[u][i].tc_split &&
                              (jobs[u][i].sampled_out || comp[u][jobs[u][i].prog].rc == ST_OK);
        }
    }
    if (g_api && nj[nu - 1] > 0) {
        // The twin draws the same input values (rounded as the half graph stores them).
        unsigned vs = g_twin ? (unsigned)rand() : 0;
        if (g_twin)
            srand(vs);
        void **buf = eval_all(pg);
        void **twin = NULL;
        if (g_twin) {
            DType r = g_round;
            g_round = g_dt;
            srand(vs);
            twin = eval_all(g_twin);
            g_round = r;
        }
        Job *sub = xmalloc(sizeof(Job) * (size_t)nj[nu - 1]);
        for (int q = 0; q < nprog && q < nj[nu - 1]; q++) {
            if (comp[nu - 1][q].rc != ST_OK)
                continue;
            int ns = 0;
            for (int i = 0; i < nj[nu - 1]; i++)
                if (jobs[nu - 1][i].prog == q)
                    sub[ns++] = jobs[nu - 1][i];
            run_jobs(name, pg, buf, twin, sub, ns, comp[nu - 1][q].cubin);
        }
        free(sub);
        for (int t = 0; t < pg->n_tensors; t++)
            free(buf[t]);
        free(buf);
        for (int t = 0; twin && t < g_twin->n_tensors; t++)
            free(twin[t]);
        free(twin);
    }
    printf("  %s: %d candidates, %d kernels per arch (%.1f s)\n", name, ncand, nj[first], secs);
    if (g_half)
        g_only_kernels += nj[first];
    g_candidates += ncand;
    for (int u = first; u < nu; u++) {
        for (int q = 0; q < (u < g_nhw ? 1 : nprog); q++) {
            free(comp[u][q].cubin);
            sb_free(&src[u][q]);
        }
        free(jobs[u]);
    }
    cand_set_free(cs);
    prim_graph_free(pg);
}

// ---- graphs ----

static PrimGraph *mm_graph(int64_t M, int64_t N, int64_t K, int epi) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t ad[] = {M, K}, bd[] = {K, N}, cd[] = {N};
    int a = add_input(pg, "a", 2, ad);
    PB b = {pg, "mm"};
    int w = add_const(&b, 2, bd);
    int y = pb_matmul(&b, a, w);
    if (epi)
        y = pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, y, add_const(&b, 1, cd)));
    add_output(pg, y);
    return pg;
}

static void matmuls(void) {
    static const int64_t sz[][3] = {{1, 1, 1},      {2, 3, 5},      {7, 17, 16},  {16, 31, 64},
                                    {100, 64, 129}, {129, 100, 31}, {64, 1, 100}, {1, 100, 64},
                                    {4, 16, 3},     {130, 260, 36}};
    for (size_t i = 0; i < ORCH_COUNT(sz); i++) {
        char name[64];
        snprintf(name, sizeof name, "mm_%lldx%lldx%lld", (long long)sz[i][0], (long long)sz[i][1],
                 (long long)sz[i][2]);
        check_graph(name, mm_graph(sz[i][0], sz[i][1], sz[i][2], 0), &g_fp32,
                    i == 9 || i == 7 ? 64 : 1, 1);
    }
    check_graph("mm_bias_relu_96x80x48", mm_graph(96, 80, 48, 1), &g_fp32, 1, 3);
    {
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t ad[] = {2, 3, 5, 7}, bd[] = {3, 7, 9};
        int a = add_input(pg, "a", 4, ad), w = add_input(pg, "b", 3, bd);
        PB b = {pg, "bmm"};
        add_output(pg, pb_matmul(&b, a, w));
        check_graph("bmm_bcast_a", pg, &g_fp32, 3, 1);
    }
    {
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t ad[] = {4, 1, 17, 16}, bd[] = {1, 3, 16, 33};
        int a = add_input(pg, "a", 4, ad), w = add_input(pg, "b", 4, bd);
        PB b = {pg, "bmm"};
        add_output(pg, pb_matmul(&b, a, w));
        check_graph("bmm_bcast_both", pg, &g_fp32, 3, 1);
    }
    {
        // Transposed operands (prologues through cexpr), bias + relu epilogue.
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t xd[] = {37, 19}, wd[] = {23, 37}, bd[] = {23};
        int x = add_input(pg, "x", 2, xd);
        PB b = {pg, "gemm"};
        int w = add_const(&b, 2, wd);
        int bias = add_const(&b, 1, bd);
        const int perm[] = {1, 0};
        int mm = pb_matmul(&b, pb_transpose(&b, x, perm), pb_transpose(&b, w, perm));
        add_output(pg, pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, mm, bias)));
        check_graph("gemm_tt_bias_relu", pg, &g_fp32, 1, 4);
    }
    {
        // Scaled input, gelu, sigmoid, residual; folded batch (shared weight).
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t ad[] = {3, 33, 20}, rd[] = {3, 33, 45}, wd[] = {20, 45};
        int a = add_input(pg, "a", 3, ad);
        int res = add_input(pg, "res", 3, rd);
        PB b = {pg, "mlp"};
        int w2 = add_const(&b, 2, wd);
        int m2 = pb_matmul(&b, pb_ew2i(&b, EW_MUL, a, 0.5), w2);
        int g = pb_ew2(
            &b, EW_MUL, pb_ew2i(&b, EW_MUL, m2, 0.5),
            pb_ew2i(&b, EW_ADD, pb_ew1(&b, EW_ERF, pb_ew2i(&b, EW_MUL, m2, M_SQRT1_2)), 1.0));
        add_output(pg, pb_ew2(&b, EW_ADD, pb_ew1(&b, EW_SIGMOID, g), res));
        check_graph("mlp_scale_gelu_sigmoid_res", pg, &g_fp32, 1, 4);
    }
    {
        PrimGraph *pg = prim_graph_create(NULL);
        const int64_t ad[] = {2, 23, 600}, wd[] = {600, 70}, bd[] = {70};
        int a = add_input(pg, "a", 3, ad);
        PB b = {pg, "deep"};
        int w = add_const(&b, 2, wd);
        int bias = add_const(&b, 1, bd);
        add_output(pg, pb_ew1(&b, EW_TANH, pb_ew2(&b, EW_ADD, pb_matmul(&b, a, w), bias)));
        check_graph("deep_k600_bias_tanh", pg, &g_fp32, 1, 3);
    }
    // TF32 tensor-core configs (only offered under that precision).
    const TargetOptions tf32 = {.precision = PREC_TF32};
    check_graph("tf32_mm_100x72x40", mm_graph(100, 72, 40, 1), &tf32, 3, 3);
}

typedef struct ConvCase {
    const char *name;
    int S;
    int64_t N, C, OC, in[3], k[3], st[3], dil[3], pb[3], pe[3];
    int group, epi;
    bool pro, tr;
} ConvCase;

static PrimGraph *conv_graph(const ConvCase *cc) {
    PrimGraph *pg = prim_graph_create(NULL);
    int64_t xd[5] = {cc->N, cc->C}, od[5] = {cc->N, cc->OC};
    int64_t wd[5] = {cc->tr ? cc->C : cc->OC, cc->tr ? cc->OC / cc->group : cc->C / cc->group};
    LinearParams lp = {
        .op = cc->tr ? LIN_CONV_TRANSPOSE : LIN_CONV, .n_spatial = cc->S, .group = cc->group};
    for (int d = 0; d < cc->S; d++) {
        xd[2 + d] = cc->in[d];
        wd[2 + d] = cc->k[d];
        lp.stride[d] = cc->st[d];
        lp.dilation[d] = cc->dil[d];
        lp.pad_begin[d] = cc->pb[d];
        lp.pad_end[d] = cc->pe[d];
        if (cc->tr)
            od[2 + d] = (cc->in[d] - 1) * cc->st[d] - cc->pb[d] - cc->pe[d] +
                        cc->dil[d] * (cc->k[d] - 1) + 1;
        else
            od[2 + d] =
                (cc->in[d] + cc->pb[d] + cc->pe[d] - cc->dil[d] * (cc->k[d] - 1) - 1) / cc->st[d] +
                1;
    }
    int x = add_input(pg, "x", 2 + cc->S, xd);
    PB b = {pg, "conv"};
    int w = add_const(&b, 2 + cc->S, wd);
    int xin = cc->pro ? pb_ew2i(&b, EW_MUL, x, 1.5) : x;
    int y = pb_conv(&b, &lp, xin, w, od);
    if (cc->epi) {
        int64_t bd[5] = {1, cc->OC, 1, 1, 1};
        y = pb_ew2(&b, EW_ADD, y, add_const(&b, 2 + cc->S, bd));
        if (cc->epi == 1) {
            y = pb_ew1(&b, EW_RELU, y);
        } else {
            int res = add_input(pg, "res", 2 + cc->S, od);
            y = pb_ew2(&b, EW_ADD, pb_ew1(&b, EW_SIGMOID, y), res);
        }
    }
    add_output(pg, y);
    return pg;
}

static void convs(void) {
    // clang-format off
    static const ConvCase cases[] = {
        {"conv3x3_p1", 2, 2, 3, 5, {9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 0, false, false},
        {"conv1x1", 2, 2, 8, 17, {7, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 0, false, false},
        {"conv1x1_vec", 2, 1, 16, 24, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 1, false, false},
        {"conv5x5_s2_asym", 2, 1, 4, 6, {12, 13}, {5, 5}, {2, 2}, {1, 1}, {1, 0}, {2, 2}, 1, 0, false, false},
        {"conv7x7_s2_p3_relu", 2, 1, 3, 8, {13, 13}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, 1, 1, false, false},
        {"conv9x9_d2", 2, 1, 2, 3, {21, 19}, {9, 9}, {1, 1}, {2, 2}, {4, 3}, {4, 5}, 1, 0, false, false},
        {"conv3x3_g2_relu", 2, 2, 4, 6, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, 1, false, false},
        {"dw3x3", 2, 2, 6, 6, {9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 6, 0, false, false},
        {"dw5x5_s2_d2_sig_res", 2, 1, 5, 5, {17, 14}, {5, 5}, {2, 2}, {2, 2}, {3, 1}, {2, 4}, 5, 2, false, false},
        {"dw_mult2", 2, 1, 4, 8, {8, 9}, {3, 3}, {1, 2}, {1, 1}, {1, 0}, {1, 1}, 4, 0, false, false},
        {"conv3x3_pro_sig_res", 2, 1, 5, 7, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 2, true, false},
        {"conv3x3_c40_relu", 2, 1, 40, 20, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false},
        {"dw3x3_pro", 2, 1, 3, 3, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3, 1, true, false},
    };
    // 1-D (Whisper's front end: k3 s1 and s2), 3-D and transposed convolutions through the
    // implicit GEMM: strided, dilated, grouped, an output padding (pad end < pad begin), with
    // prologues and epilogues.
    static const ConvCase nd[] = {
        {"conv1d_k3_s2", 1, 2, 3, 4, {17}, {3}, {2}, {1}, {1}, {0}, 1, 0, false, false},
        {"conv1d_k3_p1_80to24_relu", 1, 1, 80, 24, {30}, {3}, {1}, {1}, {1}, {1}, 1, 1, false, false},
        {"conv1d_k5_d2_g2_sig_res", 1, 2, 6, 4, {23}, {5}, {1}, {2}, {4}, {4}, 2, 2, true, false},
        {"conv3d_k3", 3, 1, 2, 3, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 0, false, false},
        {"conv3d_k3_s2_relu", 3, 2, 3, 5, {7, 6, 9}, {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1}, {1, 1, 0}, 1, 1, false, false},
        {"convT3x3_s2", 2, 1, 4, 3, {5, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, 0, false, true},
        {"convT4x4_s2_outpad_relu", 2, 2, 6, 4, {5, 7}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 1, 1, false, true},
        {"convT3x3_g2_d2_pro", 2, 1, 4, 6, {6, 5}, {3, 3}, {1, 2}, {2, 1}, {1, 0}, {1, 0}, 2, 0, true, true},
        {"convT1d_k4_s2_sig_res", 1, 2, 5, 3, {9}, {4}, {2}, {1}, {1}, {1}, 1, 2, false, true},
        {"convT3d_k2_s2", 3, 1, 3, 2, {3, 4, 2}, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 1, 1, false, true},
    };
    // clang-format on
    for (size_t i = 0; i < ORCH_COUNT(cases); i++)
        check_graph(cases[i].name, conv_graph(&cases[i]), &g_fp32, i == 0 || i == 7 ? 64 : 1, 1);
    for (size_t i = 0; i < ORCH_COUNT(nd); i++)
        check_graph(nd[i].name, conv_graph(&nd[i]), &g_fp32, i == 1 || i == 6 ? 64 : 2, 1);
}

// ---- tensor cores (TF32, FP16, BF16) ----

static const struct {
    Precision p;
    const char *v;
} g_tc[] = {{PREC_TF32, "v=tf32"}, {PREC_FP16, "v=f16"}, {PREC_BF16, "v=bf16"}};

// Which configs each precision offers: the SIMT float32 ones always, the tensor-core ones of
// that precision only (their descs name it, so database keys never mix precisions), none on a
// device without them (sm_75).
static void precision_configs(void) {
    Err e = {0};
    PrimGraph *pg = mm_graph(512, 384, 256, 1);
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, NULL, 0, &cs, &e) == ST_OK);
    const Candidate *c = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if ((!c || cs->c[i].n_prims > c->n_prims) && cugen_lin_supports(pg, &cs->c[i], &g_fp32))
            c = &cs->c[i];
    CHECK(c != NULL);
    CudaHw turing = g_hw[1];
    turing.cc_major = 7;
    turing.cc_minor = 5;
    static const char *const vs[] = {"v=tf32", "v=f16", "v=bf16"};
    for (int p = -1; p < (int)ORCH_COUNT(g_tc) && c; p++) {
        const TargetOptions o = {.precision = p < 0 ? PREC_FP32 : g_tc[p].p};
        for (int h = 0; h < 2; h++) {
            KernelConfig cf[64];
            int n = cugen_lin_configs(pg, c, h ? &turing : &g_hw[1], &o, cf, 64);
            int simt = 0, mine = 0, other = 0;
            for (int i = 0; i < n; i++) {
                simt += strstr(cf[i].desc, "v=simt") != NULL;
                for (int v = 0; v < 3; v++)
                    if (strstr(cf[i].desc, vs[v])) {
                        if (p == v)
                            mine++;
                        else
                            other++;
                    }
                for (int j = 0; j < i; j++)
                    CHECK_MSG(strcmp(cf[i].desc, cf[j].desc) != 0, "duplicate '%s'", cf[i].desc);
            }
            bool want_tc = p >= 0 && !h;
            CHECK_MSG(simt >= 8 && other == 0 && (want_tc ? mine >= 4 : mine == 0),
                      "precision %s on %s: %d simt, %d own tensor-core, %d other configs",
                      p < 0 ? "fp32" : g_tc[p].v, h ? "sm_75" : "sm_90a", simt, mine, other);
            if (want_tc) // the tensor cores' peak ranks them first on a big product
                CHECK_MSG(strstr(cf[0].desc, g_tc[p].v), "best '%s'", cf[0].desc);
        }
    }
    // The checks' tolerances: fp32's fixed, the others growing slowly with K.
    CHECK(precision_tolerance(PREC_FP32, 1 << 20) == 1e-4);
    CHECK(precision_tolerance(PREC_FP16, 64) < precision_tolerance(PREC_FP16, 4096));
    CHECK(precision_tolerance(PREC_TF32, 256) == precision_tolerance(PREC_FP16, 256));
    CHECK(precision_tolerance(PREC_BF16, 256) > 7 * precision_tolerance(PREC_FP16, 256));
    CHECK(c && fabs(lab_candidate_tolerance(pg, c, PREC_BF16) -
                    precision_tolerance(PREC_BF16, 256)) < 1e-12);
    cand_set_free(cs);
    prim_graph_free(pg);
}

// ---- the options are arguments (no process-wide state) ----

// Appends config i of cf (its desc and score) and the source the target emits for it under m.
static void append_config(StrBuf *s, const TargetMachine *m, const PrimGraph *pg,
                          const Candidate *c, const KernelConfig *cf, int i) {
    sb_printf(s, "// config %d: %s (%.9g)\n", i, cf[i].desc, cf[i].score);
    char fn[32];
    snprintf(fn, sizeof fn, "opts_k%d", i);
    Err e = {0};
    if (m->target->emit(m, pg, c, &cf[i], fn, s, &e))
        sb_printf(s, "// emit failed: %s\n", e.msg);
}

// Everything the target proposes for c on the described H100 under opt, each config with its
// emitted source, as one text (malloc'd); its config count in *n when n is given.
static char *proposed_text(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt,
                           int *n) {
    TargetMachine m = {.target = &target_cuda, .opt = *opt, .model = &g_hw[1]};
    KernelConfig cf[64];
    int nc = m.target->configs(&m, pg, c, cf, 64);
    StrBuf s;
    sb_init(&s);
    sb_printf(&s, "// supported %d, %d configs\n", m.target->supports(&m, pg, c), nc);
    for (int i = 0; i < nc; i++)
        append_config(&s, &m, pg, c, cf, i);
    if (n)
        *n = nc;
    return sb_take(&s);
}

typedef struct OptThread {
    const PrimGraph *pg;
    const Candidate *c;
    TargetOptions opt;
    const char *want; // proposed_text alone
    pthread_barrier_t *go;
    int reps, wrong;
} OptThread;

static void *opt_thread(void *arg) {
    OptThread *t = arg;
    for (int r = 0; r < t->reps; r++) {
        pthread_barrier_wait(t->go); // both threads start each round together
        char *got = proposed_text(t->pg, t->c, &t->opt, NULL);
        t->wrong += strcmp(got, t->want) != 0;
        free(got);
    }
    return NULL;
}

// The precision reaches the emitters as an argument (TargetOptions), never through state kept
// between calls: for a matmul + bias + sigmoid candidate, the configs the target offers under
// FP16 and under FP32 and the source it emits for each (target_cuda's configs and emit slots),
// computed interleaved in one process (configs under one, then the other; then each config's
// emit alternating between the two), are each identical to what they are computed alone, and
// differ from each other (FP16's tensor-core configs and fast sigmoid; FP32's exact one, also
// in the source of a config both offer). Then two threads propose and emit under the two
// precisions at once, several rounds, each getting its precision's text.
static void options_independent(void) {
    Err e = {0};
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {96, 64}, wd[] = {64, 80}, bd[] = {80};
    int x = add_input(pg, "x", 2, xd);
    PB b = {pg, "opts"};
    int w = add_const(&b, 2, wd), bias = add_const(&b, 1, bd);
    add_output(pg, pb_ew1(&b, EW_SIGMOID, pb_ew2(&b, EW_ADD, pb_matmul(&b, x, w), bias)));
    CandidateSet *cs = NULL;
    CHECK(prim_graph_verify(pg, &e) == ST_OK && cand_enumerate(pg, NULL, 0, &cs, &e) == ST_OK);
    const Candidate *c = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if ((!c || cs->c[i].n_prims > c->n_prims) && cugen_lin_supports(pg, &cs->c[i], &g_fp32))
            c = &cs->c[i];
    CHECK_MSG(c && c->n_prims == 3, "no matmul + bias + sigmoid candidate");
    if (!c) {
        cand_set_free(cs);
        prim_graph_free(pg);
        return;
    }
    const TargetOptions fp16 = {.precision = PREC_FP16};
    // Alone: each precision's text on its own.
    int n16 = 0, n32 = 0;
    char *alone16 = proposed_text(pg, c, &fp16, &n16);
    char *alone32 = proposed_text(pg, c, &g_fp32, &n32);
    CHECK_MSG(n16 >= 8 && n32 >= 8, "%d fp16 and %d fp32 configs", n16, n32);
    CHECK_MSG(strstr(alone16, "v=f16") && strstr(alone16, "orch_fast_sigmoidf("),
              "fp16: no tensor-core config or no fast sigmoid");
    CHECK_MSG(!strstr(alone32, "v=f16") && !strstr(alone32, "orch_fast_"),
              "fp32: a tensor-core config or a fast transcendental");
    CHECK(strcmp(alone16, alone32) != 0);
    // Interleaved: the configs under FP16, under FP32, then each config emitted in turn.
    TargetMachine m16 = {.target = &target_cuda, .opt = fp16, .model = &g_hw[1]};
    TargetMachine m32 = {.target = &target_cuda, .opt = g_fp32, .model = &g_hw[1]};
    KernelConfig cf16[64], cf32[64];
    int k16 = target_cuda.configs(&m16, pg, c, cf16, 64);
    int k32 = target_cuda.configs(&m32, pg, c, cf32, 64);
    StrBuf s16, s32;
    sb_init(&s16);
    sb_init(&s32);
    sb_printf(&s16, "// supported %d, %d configs\n", target_cuda.supports(&m16, pg, c), k16);
    sb_printf(&s32, "// supported %d, %d configs\n", target_cuda.supports(&m32, pg, c), k32);
    for (int i = 0; i < ORCH_MAX(k16, k32); i++) {
        if (i < k16)
            append_config(&s16, &m16, pg, c, cf16, i);
        if (i < k32)
            append_config(&s32, &m32, pg, c, cf32, i);
    }
    CHECK_MSG(strcmp(s16.s, alone16) == 0, "fp16 interleaved with fp32 differs from fp16 alone");
    CHECK_MSG(strcmp(s32.s, alone32) == 0, "fp32 interleaved with fp16 differs from fp32 alone");
    // One config both offer (the best SIMT one of fp32) emits other code under each: the
    // precision's transcendentals.
    StrBuf e16, e32;
    sb_init(&e16);
    sb_init(&e32);
    bool both = false;
    for (int i = 0; i < k16 && !both; i++)
        if (!strcmp(cf16[i].desc, cf32[0].desc)) {
            both = true;
            CHECK(target_cuda.emit(&m16, pg, c, &cf32[0], "k", &e16, &e) == ST_OK);
            CHECK(target_cuda.emit(&m32, pg, c, &cf32[0], "k", &e32, &e) == ST_OK);
        }
    CHECK_MSG(both && strcmp(e16.s, e32.s) != 0 && strstr(e16.s, "orch_fast_sigmoidf(") &&
                  !strstr(e32.s, "orch_fast_sigmoidf("),
              "config '%s': %s", cf32[0].desc,
              both ? "the same source under fp16 and fp32" : "not offered under fp16");
    printf("  %d fp16 and %d fp32 configs; alone and interleaved: fp16 %s, fp32 %s\n", k16, k32,
           strcmp(s16.s, alone16) ? "differ" : "identical",
           strcmp(s32.s, alone32) ? "differ" : "identical");
    // Two threads at once, one a precision.
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    OptThread t[2] = {{pg, c, fp16, alone16, &go, 8, 0}, {pg, c, g_fp32, alone32, &go, 8, 0}};
    pthread_t th;
    bool started = pthread_create(&th, NULL, opt_thread, &t[0]) == 0;
    CHECK(started);
    if (started) {
        opt_thread(&t[1]);
        pthread_join(th, NULL);
        CHECK_MSG(t[0].wrong == 0 && t[1].wrong == 0,
                  "concurrent threads: %d of %d fp16 rounds and %d of %d fp32 rounds differ",
                  t[0].wrong, t[0].reps, t[1].wrong, t[1].reps);
        printf("  two threads (fp16, fp32) at once, %d rounds: %d and %d differ\n", t[0].reps,
               t[0].wrong, t[1].wrong);
    }
    pthread_barrier_destroy(&go);
    sb_free(&e16);
    sb_free(&e32);
    sb_free(&s16);
    sb_free(&s32);
    free(alone16);
    free(alone32);
    cand_set_free(cs);
    prim_graph_free(pg);
}

// Every tensor-core config of each precision (and only those) on odd sizes, batched and
// broadcast products, transposed operands (prologues), epilogues and implicit-GEMM
// convolutions (direct 1x1, strided, grouped, with a prologue): compiled for sm_80 and sm_90a,
// and on a GPU run against the interpreter at the precision's tolerance.
static void tensor_cores(void) {
    // clang-format off
    static const ConvCase cv[] = {
        {"conv3x3_p1", 2, 2, 3, 5, {9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false},
        {"conv1x1_vec", 2, 1, 16, 24, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 1, false, false},
        {"conv5x5_s2_asym", 2, 1, 4, 6, {12, 13}, {5, 5}, {2, 2}, {1, 1}, {1, 0}, {2, 2}, 1, 0, false, false},
        {"conv3x3_g2_relu", 2, 2, 4, 6, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, 1, false, false},
        {"conv3x3_pro_sig_res", 2, 1, 5, 7, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 2, true, false},
        {"conv3x3_c40_relu", 2, 1, 40, 20, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false},
        {"conv1d_k3_p1_80to24_relu", 1, 1, 80, 24, {30}, {3}, {1}, {1}, {1}, {1}, 1, 1, false, false},
        {"conv3d_k3_s2_relu", 3, 2, 3, 5, {7, 6, 9}, {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1}, {1, 1, 0}, 1, 1, false, false},
        {"convT4x4_s2_outpad_relu", 2, 2, 6, 4, {5, 7}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 1, 1, false, true},
    };
    // clang-format on
    static const int64_t sz[][4] = {
        // M, N, K, epilogue
        {100, 72, 40, 1}, {129, 100, 31, 0}, {16, 31, 64, 0},   {130, 260, 36, 1},
        {7, 17, 16, 0},   {1, 100, 64, 0},   {200, 64, 600, 1},
    };
    for (size_t p = 0; p < ORCH_COUNT(g_tc); p++) {
        const TargetOptions o = {.precision = g_tc[p].p};
        g_only = g_tc[p].v;
        // Without a GPU the 2 best tile configs of each candidate are compiled (NVRTC's time);
        // a GPU runs all of them.
        g_only_max = g_api ? 0 : 2;
        g_only_kernels = 0;
        char name[96];
        for (size_t i = 0; i < ORCH_COUNT(sz); i++) {
            snprintf(name, sizeof name, "%s_mm_%lldx%lldx%lld%s", g_tc[p].v + 2,
                     (long long)sz[i][0], (long long)sz[i][1], (long long)sz[i][2],
                     sz[i][3] ? "_bias_relu" : "");
            check_graph(name, mm_graph(sz[i][0], sz[i][1], sz[i][2], (int)sz[i][3]), &o, 64, 1);
        }
        {
            PrimGraph *pg = prim_graph_create(NULL);
            const int64_t ad[] = {4, 1, 17, 16}, bd[] = {1, 3, 16, 33};
            int a = add_input(pg, "a", 4, ad), w = add_input(pg, "b", 4, bd);
            PB b = {pg, "bmm"};
            add_output(pg, pb_matmul(&b, a, w));
            snprintf(name, sizeof name, "%s_bmm_bcast_both", g_tc[p].v + 2);
            check_graph(name, pg, &o, 64, 1);
        }
        {
            PrimGraph *pg = prim_graph_create(NULL);
            const int64_t xd[] = {37, 19}, wd[] = {23, 37}, bd[] = {23};
            int x = add_input(pg, "x", 2, xd);
            PB b = {pg, "gemm"};
            int w = add_const(&b, 2, wd);
            int bias = add_const(&b, 1, bd);
            const int perm[] = {1, 0};
            int mm = pb_matmul(&b, pb_transpose(&b, x, perm), pb_transpose(&b, w, perm));
            add_output(pg, pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, mm, bias)));
            snprintf(name, sizeof name, "%s_gemm_tt_bias_relu", g_tc[p].v + 2);
            check_graph(name, pg, &o, 64, 1);
        }
        {
            PrimGraph *pg = prim_graph_create(NULL);
            const int64_t ad[] = {3, 33, 20}, rd[] = {3, 33, 45}, wd[] = {20, 45};
            int a = add_input(pg, "a", 3, ad);
            int res = add_input(pg, "res", 3, rd);
            PB b = {pg, "mlp"};
            int w2 = add_const(&b, 2, wd);
            int m2 = pb_matmul(&b, pb_ew2i(&b, EW_MUL, a, 0.5), w2);
            add_output(pg, pb_ew2(&b, EW_ADD, pb_ew1(&b, EW_SIGMOID, m2), res));
            snprintf(name, sizeof name, "%s_mlp_folded_sigmoid_res", g_tc[p].v + 2);
            check_graph(name, pg, &o, 64, 1);
        }
        for (size_t i = 0; i < ORCH_COUNT(cv); i++) {
            snprintf(name, sizeof name, "%s_%s", g_tc[p].v + 2, cv[i].name);
            check_graph(name, conv_graph(&cv[i]), &o, 64, 1);
        }
        int per_arch = g_only_kernels / (g_api || g_sm90_only ? 1 : g_nhw); // one arch: a GPU's
        printf("  %s: %d tensor-core kernels emitted per arch\n", g_tc[p].v, per_arch);
        // Every graph has at least one candidate with the four tile configs (two compiled
        // without a GPU).
        CHECK_MSG(per_arch >= (g_api ? 4 : 2) * (int)(ORCH_COUNT(sz) + 3 + ORCH_COUNT(cv)),
                  "%s: %d kernels", g_tc[p].v, per_arch);
    }
    g_only = NULL;
    g_only_max = 0;
}

// ---- half storage (float16 / bfloat16 tensors) ----

// Half-storage case i built with the current g_dt (NULL past the last); its name to name.
static PrimGraph *half_case(int i, char *name, size_t cap) {
    // clang-format off
    static const ConvCase cv[] = {
        {"conv3x3_p1_c3_relu", 2, 2, 3, 5, {9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false},
        {"conv1x1_16to24_bias_relu", 2, 1, 16, 24, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 1, false, false},
        {"conv3x3_s2_16to32_sig_res", 2, 2, 16, 32, {14, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, 2, false, false},
        {"conv3x3_g2_relu", 2, 2, 4, 6, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, 1, false, false},
        {"conv3x3_g4_32to32_relu", 2, 1, 32, 32, {10, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4, 1, false, false},
        {"dw3x3", 2, 2, 6, 6, {9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 6, 0, false, false},
        {"dw3x3_s2_relu", 2, 1, 24, 24, {15, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 24, 1, false, false},
        {"dw5x5_s2_d2_sig_res", 2, 1, 5, 5, {17, 14}, {5, 5}, {2, 2}, {2, 2}, {3, 1}, {2, 4}, 5, 2, false, false},
        {"direct_9x9_8to3_pro_relu", 2, 1, 8, 3, {20, 18}, {9, 9}, {1, 1}, {1, 1}, {4, 4}, {4, 4}, 1, 1, true, false},
        {"conv3x3_pro_sig_res", 2, 1, 5, 7, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 2, true, false},
        {"conv3x3_c40_relu", 2, 1, 40, 20, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false},
        {"conv1d_k3_p1_80to24_relu", 1, 1, 80, 24, {30}, {3}, {1}, {1}, {1}, {1}, 1, 1, false, false},
        {"conv3d_k3_s2_relu", 3, 2, 3, 5, {7, 6, 9}, {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1}, {1, 1, 0}, 1, 1, false, false},
        {"convT4x4_s2_outpad_relu", 2, 2, 6, 4, {5, 7}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 1, 1, false, true},
        {"convT1d_k4_s2_pro", 1, 1, 8, 4, {9}, {4}, {2}, {1}, {1}, {1}, 1, 0, true, true},
    };
    // clang-format on
    static const int64_t mm[][4] = {
        // M, N, K, epilogue
        {100, 72, 40, 1}, {129, 100, 31, 0}, {7, 17, 16, 0},
        {1, 100, 64, 1},  {64, 64, 4608, 1}, {130, 260, 36, 1},
    };
    const char *dt = g_dt == DT_BFLOAT16 ? "bf16" : "f16";
    g_cast_out = false;
    int nmm = (int)ORCH_COUNT(mm), ncv = (int)ORCH_COUNT(cv);
    if (i < nmm) {
        snprintf(name, cap, "%s_mm_%lldx%lldx%lld%s", dt, (long long)mm[i][0], (long long)mm[i][1],
                 (long long)mm[i][2], mm[i][3] ? "_bias_relu" : "");
        return mm_graph(mm[i][0], mm[i][1], mm[i][2], (int)mm[i][3]);
    }
    i -= nmm;
    if (i < ncv) {
        snprintf(name, cap, "%s_%s", dt, cv[i].name);
        return conv_graph(&cv[i]);
    }
    i -= ncv;
    PrimGraph *pg = prim_graph_create(NULL);
    PB b = {pg, "half"};
    switch (i) {
    case 0: { // batched, both operands broadcast
        const int64_t ad[] = {4, 1, 17, 16}, bd[] = {1, 3, 16, 33};
        int a = add_input(pg, "a", 4, ad), w = add_input(pg, "b", 4, bd);
        add_output(pg, pb_matmul(&b, a, w));
        snprintf(name, cap, "%s_bmm_bcast_both", dt);
        return pg;
    }
    case 1: { // transposed operands (prologues), bias + relu
        const int64_t xd[] = {37, 19}, wd[] = {23, 37}, bd[] = {23};
        int x = add_input(pg, "x", 2, xd);
        int w = add_const(&b, 2, wd);
        int bias = add_const(&b, 1, bd);
        const int perm[] = {1, 0};
        int mmv = pb_matmul(&b, pb_transpose(&b, x, perm), pb_transpose(&b, w, perm));
        add_output(pg, pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, mmv, bias)));
        snprintf(name, cap, "%s_gemm_tt_bias_relu", dt);
        return pg;
    }
    case 2: { // folded batch, scaled input, sigmoid, half residual
        const int64_t ad[] = {3, 33, 24}, rd[] = {3, 33, 48}, wd[] = {24, 48};
        int a = add_input(pg, "a", 3, ad);
        int res = add_input(pg, "res", 3, rd);
        int w2 = add_const(&b, 2, wd);
        int m2 = pb_matmul(&b, pb_ew2i(&b, EW_MUL, a, 0.5), w2);
        add_output(pg, pb_ew2(&b, EW_ADD, pb_ew1(&b, EW_SIGMOID, m2), res));
        snprintf(name, cap, "%s_mlp_folded_sigmoid_res", dt);
        return pg;
    }
    default: break;
    }
    prim_graph_free(pg);
    i -= 3;
    // Ending with the CAST to a float32 model output.
    g_cast_out = true;
    if (i == 0) {
        snprintf(name, cap, "%s_mm_96x80x48_bias_relu_to_f32", dt);
        return mm_graph(96, 80, 48, 1);
    }
    if (i == 1) {
        snprintf(name, cap, "%s_conv1x1_16to24_bias_relu_to_f32", dt);
        return conv_graph(&cv[1]);
    }
    if (i == 2) {
        snprintf(name, cap, "%s_mm_33x40x64_to_f32", dt);
        return mm_graph(33, 40, 64, 0);
    }
    g_cast_out = false;
    return NULL;
}

// Every half-storage case in float16 and in bfloat16 (the precision of each: its tensor cores
// offered), with its float32 twin for the reference.
static void half_storage(void) {
    static const struct {
        DType dt;
        Precision p;
    } ty[] = {{DT_FLOAT16, PREC_FP16}, {DT_BFLOAT16, PREC_BF16}};
    g_half = true;
    for (size_t t = 0; t < ORCH_COUNT(ty); t++) {
        const TargetOptions o = {.precision = ty[t].p};
        g_only_kernels = 0;
        int graphs = 0;
        for (int i = 0;; i++) {
            char name[96];
            unsigned seed = (unsigned)rand();
            srand(seed);
            g_dt = ty[t].dt;
            PrimGraph *pg = half_case(i, name, sizeof name);
            if (!pg)
                break;
            srand(seed);
            g_dt = DT_FLOAT;
            g_round = ty[t].dt;
            char twin_name[96];
            g_twin = half_case(i, twin_name, sizeof twin_name);
            g_round = DT_FLOAT;
            CHECK_MSG(g_twin && g_twin->n_tensors == pg->n_tensors, "%s: twin differs", name);
            g_dt = ty[t].dt; // the twin's eval rounds its inputs to this type
            // Every tile of the tensor-core kernel here too on cp.async / gathered operands:
            // both (mm 100x72x40, conv 1x1), A gathered (odd K), B gathered (conv patch).
            g_half_tiles = i == 0 || i == 1 || i == 7 || i == 8;
            check_graph(name, pg, &o, 64, 1);
            g_half_tiles = false;
            g_dt = DT_FLOAT;
            prim_graph_free(g_twin);
            g_twin = NULL;
            graphs++;
        }
        printf("  %s storage: %d graphs, %d kernels emitted (sm_90a%s)\n",
               ty[t].dt == DT_FLOAT16 ? "float16" : "bfloat16", graphs, g_only_kernels,
               g_api ? " and the device's" : "");
        CHECK_MSG(graphs >= 20 && g_only_kernels >= 3 * graphs, "%d graphs, %d kernels", graphs,
                  g_only_kernels);
    }
    g_half = false;
    g_cast_out = false;
    g_dt = DT_FLOAT;
}

// ---- the models folder (argv[1]) ----

static void models(const char *root) {
    DIR *d = opendir(root);
    if (!d) {
        printf("  models: cannot open %s\n", root);
        return;
    }
    char *names[256];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 256)
        if (de->d_name[0] != '.')
            names[nn++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < nn; i++) {
        char dir[4096], path[4200];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        FILE *f = fopen(path, "rb");
        if (!f) {
            free(names[i]);
            continue;
        }
        fclose(f);
        Err e = {0};
        InputShape shapes[32];
        LoadOptions lo = {.shapes = shapes};
        char *spec = input_shapes_arg(dir);
        int rc = spec ? parse_input_shapes(spec, shapes, 32, &lo.n_shapes, &e) : ST_OK;
        Graph *g = NULL;
        PrimGraph *pg = NULL;
        FissionOptions fo = {0};
        if (rc == ST_OK)
            rc = onnx_load_file(path, &lo, &g, &e);
        if (rc == ST_OK)
            rc = graph_infer_and_fold(g, NULL, &e);
        if (rc == ST_OK)
            rc = fission_run(g, &fo, &pg, NULL, &e);
        if (rc == ST_OK)
            rc = fission_cleanup(pg, NULL, &e);
        CHECK_MSG(rc == ST_OK, "%s: %s", names[i], e.msg);
        if (rc == ST_OK)
            check_graph(names[i], pg, &g_fp32, 1, 0);
        else
            prim_graph_free(pg);
        graph_free(g);
        free(spec);
        free(names[i]);
    }
}

// ---- speed (GPU only; printed, not checked) ----

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void speed(const char *name, PrimGraph *pg, const TargetOptions *opt, double flops) {
    Err e = {0};
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, NULL, 0, &cs, &e) == ST_OK);
    const Candidate *c = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if ((!c || cs->c[i].n_prims > c->n_prims) && cugen_lin_supports(pg, &cs->c[i], opt))
            c = &cs->c[i];
    CHECK_MSG(c != NULL, "%s: no linear candidate", name);
    if (!c) {
        cand_set_free(cs);
        prim_graph_free(pg);
        return;
    }
    // Half storage: timed only (the interpreter's half products are slow at this size; the
    // half_storage part checks these kernels).
    bool half = pg->tensors[c->output]->dtype != DT_FLOAT;
    void **buf = eval_graph(pg, half);
    KernelConfig cf[8];
    int n = cugen_lin_configs(pg, c, &g_dhw, opt, cf, 6);
    const CudaApi *cu = g_api;
    for (int i = 0; i < n; i++) {
        StrBuf src;
        sb_init(&src);
        sb_puts(&src, prelude());
        CudaLaunch ln;
        CHECK(cugen_lin_emit(pg, c, &cf[i], &g_dhw, opt, "speed_k", &src, &ln, &e) == ST_OK);
        NvrtcOptions o = {.arch = g_dhw.arch};
        void *cubin = NULL;
        size_t size = 0;
        int rc = nvrtc_compile(src.s, name, &o, &cubin, &size, &e);
        sb_free(&src);
        CHECK_MSG(rc == ST_OK, "%s: %s", name, e.msg);
        if (rc)
            continue;
        CUmodule mod = NULL;
        CUfunction f = NULL;
        CUevent ev[51];
        struct {
            CUdeviceptr in[ORCH_CUDA_MAX_IN];
            CUdeviceptr out;
        } args;
        memset(&args, 0, sizeof args);
        bool ok = !CUDA_TRY(cu, &e, cuModuleLoadData, &mod, cubin) &&
                  !CUDA_TRY(cu, &e, cuModuleGetFunction, &f, mod, "speed_k");
        if (ok && ln.smem > 48 * 1024)
            ok = !CUDA_TRY(cu, &e, cuFuncSetAttribute, f,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)ln.smem);
        for (int q = 0; ok && q < c->n_inputs; q++) {
            size_t nb = tensor_nbytes(pg->tensors[c->inputs[q]]);
            ok = !CUDA_TRY(cu, &e, cuMemAlloc, &args.in[q], nb) &&
                 !CUDA_TRY(cu, &e, cuMemcpyHtoD, args.in[q], buf[c->inputs[q]], nb);
        }
        size_t ob = tensor_nbytes(pg->tensors[c->output]);
        ok = ok && !CUDA_TRY(cu, &e, cuMemAlloc, &args.out, ob);
        for (int q = 0; q < 51 && ok; q++)
            ok = !CUDA_TRY(cu, &e, cuEventCreate, &ev[q], CU_EVENT_DEFAULT);
        void *params[] = {&args};
        for (int r = 0; ok && r < 3; r++) // warm-up
            ok = !CUDA_TRY(cu, &e, cuLaunchKernel, f, ln.grid[0], ln.grid[1], ln.grid[2],
                           ln.block[0], ln.block[1], ln.block[2], ln.smem, NULL, params, NULL);
        for (int r = 0; ok && r < 50; r++) {
            ok = !CUDA_TRY(cu, &e, cuEventRecord, ev[r], NULL) &&
                 !CUDA_TRY(cu, &e, cuLaunchKernel, f, ln.grid[0], ln.grid[1], ln.grid[2],
                           ln.block[0], ln.block[1], ln.block[2], ln.smem, NULL, params, NULL);
        }
        ok = ok && !CUDA_TRY(cu, &e, cuEventRecord, ev[50], NULL) &&
             !CUDA_TRY(cu, &e, cuEventSynchronize, ev[50]);
        float ms[50];
        for (int r = 0; ok && r < 50; r++)
            ok = !CUDA_TRY(cu, &e, cuEventElapsedTime, &ms[r], ev[r], ev[r + 1]);
        CHECK_MSG(ok, "%s: %s", name, e.msg);
        if (ok && !half) {
            float *got = malloc(ob);
            CHECK(!CUDA_TRY(cu, &e, cuMemcpyDtoH, got, args.out, ob));
            int64_t bad;
            double tol = lab_candidate_tolerance(pg, c, desc_precision(cf[i].desc));
            CHECK_MSG(compare(got, buf[c->output], (int64_t)(ob / 4), &bad, tol) <= 0,
                      "%s: %s wrong", name, cf[i].desc);
            free(got);
        }
        if (ok) {
            qsort(ms, 50, sizeof *ms, cmp_float);
            printf("  %s %-56s %8.1f GFLOP/s (median %.4f ms, model %.4f ms)\n", name, cf[i].desc,
                   flops / (ms[25] * 1e-3) * 1e-9, ms[25], cf[i].score * 1e3);
        }
        for (int q = 0; q < 51; q++)
            if (ok || q < 51)
                (void)0;
        for (int q = 0; q < c->n_inputs; q++)
            if (args.in[q])
                cu->cuMemFree(args.in[q]);
        if (args.out)
            cu->cuMemFree(args.out);
        if (mod)
            cu->cuModuleUnload(mod);
        free(cubin);
    }
    for (int t = 0; t < pg->n_tensors; t++)
        free(buf[t]);
    free(buf);
    cand_set_free(cs);
    prim_graph_free(pg);
}

static const char *g_models;

static void models_folder(void) {
    g_in_models = true;
    models(g_models);
    g_in_models = false;
}

// The model ranks configs sensibly on a big square GEMM.
static void config_model(void) {
    Err e = {0};
    printf("  configs for a 1024^3 matmul (H100 model):\n");
    PrimGraph *pg = mm_graph(1024, 1024, 1024, 0);
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, NULL, 0, &cs, &e) == ST_OK);
    KernelConfig cf[8];
    int n = cs && cs->n ? cugen_lin_configs(pg, &cs->c[0], &g_hw[1], &g_fp32, cf, 8) : 0;
    CHECK(n >= 3);
    for (int i = 0; i < n; i++)
        printf("    %-60s %.4f ms\n", cf[i].desc, cf[i].score * 1e3);
    // A big GEMM wants a large register tile (measured on an H100: 8x4 and 8x8 beat 4x4).
    CHECK_MSG(n > 0 && strstr(cf[0].desc, "tm=8"), "best '%s'", n ? cf[0].desc : "");
    cand_set_free(cs);
    prim_graph_free(pg);
}

// Split-K: products whose tiles cannot fill the SMs and whose K is long get configs with sk=S
// (the H100 model offers them); every config of these graphs is compiled (and, on a GPU, run:
// the partial tiles, the arrival counters and the epilogue after the sum).
static void splitk(void) {
    Err e = {0};
    PrimGraph *probe = mm_graph(64, 64, 4608, 1);
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(probe, NULL, 0, &cs, &e) == ST_OK);
    KernelConfig cf[64];
    int n = 0, nsplit = 0;
    for (int i = 0; cs && i < cs->n; i++) {
        if (!cugen_lin_supports(probe, &cs->c[i], &g_fp32))
            continue;
        n = cugen_lin_configs(probe, &cs->c[i], &g_hw[1], &g_fp32, cf, 64);
        for (int k = 0; k < n; k++)
            nsplit += strstr(cf[k].desc, " sk=") != NULL;
        if (n)
            printf("    64x64x4608 best: %s (%.4f ms), %d split-K configs\n", cf[0].desc,
                   cf[0].score * 1e3, nsplit);
        break;
    }
    CHECK_MSG(nsplit > 0, "no split-K config for a 64x64x4608 product");
    CHECK_MSG(n > 0 && strstr(cf[0].desc, " sk="), "best '%s' is not split", n ? cf[0].desc : "");
    cand_set_free(cs);
    prim_graph_free(probe);
    // The 6 best configs here (a split one among them), every config on a GPU.
    check_graph("splitk_mm_64x64x4608_bias_relu", mm_graph(64, 64, 4608, 1), &g_fp32, 6, 1);
    check_graph("splitk_mm_100x72x2401", mm_graph(100, 72, 2401, 0), &g_fp32, 6, 1);
    ConvCase c = {"conv3x3_256_7x7",
                  2,
                  1,
                  256,
                  128,
                  {7, 7},
                  {3, 3},
                  {1, 1},
                  {1, 1},
                  {1, 1},
                  {1, 1},
                  1,
                  1,
                  false,
                  false};
    check_graph("splitk_conv3x3_256to128_7x7_relu", conv_graph(&c), &g_fp32, 6, 1);
}

// ---- split-K on the tensor cores ----

typedef struct SplitCase {
    const char *name;
    int kind;             // 0: matmul M x N x K, 1: batched matmul (A bat x M x K, B bat x K x N)
                          // with A's batch broadcast over B's, 2: conv cv
    int64_t M, N, K, bat; // kinds 0 and 1; epi: bias + ReLU
    int epi;
    ConvCase cv;
    int force; // S of the split copies of unsplit tensor-core configs (0: only the offered ones)
    bool half; // also on float16 / bfloat16 tensors (the cp.async kernel)
} SplitCase;

static PrimGraph *split_graph(const SplitCase *sc) {
    if (sc->kind == 0)
        return mm_graph(sc->M, sc->N, sc->K, sc->epi);
    if (sc->kind == 2)
        return conv_graph(&sc->cv);
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t ad[] = {2, sc->bat, sc->M, sc->K}, bd[] = {sc->bat, sc->K, sc->N}, cd[] = {sc->N};
    int a = add_input(pg, "a", 4, ad), w = add_input(pg, "b", 3, bd);
    PB b = {pg, "bmm"};
    int y = pb_matmul(&b, a, w);
    if (sc->epi)
        y = pb_ew1(&b, EW_RELU, pb_ew2(&b, EW_ADD, y, add_const(&b, 1, cd)));
    add_output(pg, y);
    return pg;
}

// The configs the H100 model offers (top k) for the largest supported candidate of pg, printed
// with the best unsplit and split ones of variant v; whether a split one of v is among the top
// k and first. *t_un / *t_sp: the model's times of the best unsplit / split config of v.
static bool split_offered(const char *name, const PrimGraph *pg, const TargetOptions *opt,
                          const char *v, int k, bool *first, double *t_un, double *t_sp) {
    Err e = {0};
    CandidateSet *cs = NULL;
    CHECK(cand_enumerate(pg, NULL, 0, &cs, &e) == ST_OK);
    const Candidate *c = NULL;
    for (int i = 0; cs && i < cs->n; i++)
        if ((!c || cs->c[i].n_prims > c->n_prims) && cugen_lin_supports(pg, &cs->c[i], opt))
            c = &cs->c[i];
    bool in_top = false;
    *first = false;
    *t_un = *t_sp = INFINITY;
    if (c) {
        KernelConfig cf[64];
        int n = cugen_lin_configs(pg, c, &g_hw[1], opt, cf, 64);
        const char *bu = "", *bs = "";
        for (int i = 0; i < n; i++) {
            if (!strstr(cf[i].desc, v))
                continue;
            bool sp = strstr(cf[i].desc, " sk=") != NULL;
            double *t = sp ? t_sp : t_un;
            if (cf[i].score < *t) {
                *t = cf[i].score;
                if (sp)
                    bs = cf[i].desc;
                else
                    bu = cf[i].desc;
            }
        }
        printf("    %s: best unsplit %s %.1f us, best split %s %.1f us\n", name, bu, *t_un * 1e6,
               bs, *t_sp * 1e6);
        KernelConfig top[16];
        int m = cugen_lin_configs(pg, c, &g_hw[1], opt, top, k);
        for (int i = 0; i < m; i++) {
            bool mine = strstr(top[i].desc, v) && strstr(top[i].desc, " sk=");
            in_top |= mine;
            *first |= i == 0 && mine;
            printf("      %d %-58s %.1f us\n", i, top[i].desc, top[i].score * 1e6);
        }
    }
    cand_set_free(cs);
    return in_top;
}

// Split-K on the tensor cores (TF32 / FP16 / BF16 over float32 tensors, FP16 / BF16 over half
// tensors): the H100 model offers split configs first for ResNet-18's deep 3x3 convolutions
// (7x7 and 14x14 pixels: 8 to 32 output tiles for 132 SMs) among the top 8 the compile driver
// measures; split kernels emitted and compiled (on a GPU run twice and compared with the
// interpreter at the precision's tolerance) for odd sizes (K not a multiple of S x the K step,
// K shorter than S slices: empty splits), batched products, convolutions (3x3 at 7x7 and
// 14x14, 1x1 over two images, strided, grouped) with and without a fused epilogue.
static void tc_splitk(void) {
    // clang-format off
    static const SplitCase deep[] = {
        {"conv3x3_512_7x7", 2, 0, 0, 0, 0, 0, {"", 2, 1, 512, 512, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, 0, true},
        {"conv3x3_256_14x14", 2, 0, 0, 0, 0, 0, {"", 2, 1, 256, 256, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, 0, true},
        {"conv3x3_s2_256to512_14x14", 2, 0, 0, 0, 0, 0, {"", 2, 1, 256, 512, {14, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, 0, false},
        {"conv3x3_128_28x28", 2, 0, 0, 0, 0, 0, {"", 2, 1, 128, 128, {28, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, 0, false},
    };
    static const SplitCase cases[] = {
        {"mm_100x72x600_bias_relu", 0, 100, 72, 600, 0, 1, {0}, 3, true},
        {"mm_129x100x37", 0, 129, 100, 37, 0, 0, {0}, 4, true},
        {"mm_33x17x201_bias_relu", 0, 33, 17, 201, 0, 1, {0}, 5, false},
        {"bmm_2x3_17x40x96", 1, 17, 40, 96, 3, 0, {0}, 2, true},
        {"bmm_2x5_31x33x250_bias_relu", 1, 31, 33, 250, 5, 1, {0}, 3, false},
        {"conv3x3_512_7x7_relu", 2, 0, 0, 0, 0, 0, {"", 2, 1, 512, 512, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, 0, true},
        {"conv3x3_256_14x14_relu", 2, 0, 0, 0, 0, 0, {"", 2, 1, 256, 256, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, 0, false},
        {"conv1x1_256to64_7x7_n2_relu", 2, 0, 0, 0, 0, 0, {"", 2, 2, 256, 64, {7, 7}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 1, false, false}, 4, true},
        {"conv3x3_s2_128to96_15x13", 2, 0, 0, 0, 0, 0, {"", 2, 1, 128, 96, {15, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 1}, 1, 0, false, false}, 3, true},
        {"conv3x3_g2_64to64_7x7_sig_res", 2, 0, 0, 0, 0, 0, {"", 2, 1, 64, 64, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, 2, false, false}, 3, false},
    };
    // clang-format on
    static const struct {
        DType dt;
        Precision p;
        const char *v;
    } ty[] = {{DT_FLOAT, PREC_TF32, "v=tf32"},
              {DT_FLOAT, PREC_FP16, "v=f16"},
              {DT_FLOAT, PREC_BF16, "v=bf16"},
              {DT_FLOAT16, PREC_FP16, "v=f16"},
              {DT_BFLOAT16, PREC_BF16, "v=bf16"}};
    // The model: the compile driver's default top 8 (k) on the described H100.
    printf("  H100 model, top 8 configs:\n");
    for (size_t t = 0; t < ORCH_COUNT(ty); t++) {
        if (ty[t].dt == DT_BFLOAT16 || (ty[t].dt == DT_FLOAT && ty[t].p == PREC_BF16))
            continue; // as f16's
        const TargetOptions o = {.precision = ty[t].p};
        g_dt = ty[t].dt;
        for (size_t i = 0; i < ORCH_COUNT(deep); i++) {
            char name[96];
            snprintf(name, sizeof name, "%s%s_%s", ty[t].dt == DT_FLOAT16 ? "h" : "", ty[t].v + 2,
                     deep[i].name);
            PrimGraph *pg = split_graph(&deep[i]);
            bool first;
            double tu, tsp;
            bool in_top = split_offered(name, pg, &o, ty[t].v, 8, &first, &tu, &tsp);
            // The deep layers ResNet-18 runs (7x7 and 14x14 pixels): split first and faster.
            if (deep[i].half)
                CHECK_MSG(in_top && first && tsp < tu, "%s: no split %s config first", name,
                          ty[t].v);
            prim_graph_free(pg);
        }
    }
    g_dt = DT_FLOAT;
    // Emitted and compiled: the top 2 split configs of each candidate without a GPU, all on one.
    g_split_only = true;
    for (size_t t = 0; t < ORCH_COUNT(ty); t++) {
        const TargetOptions o = {.precision = ty[t].p};
        g_only = ty[t].v;
        g_only_max = g_api ? 0 : 2;
        int before = g_split_tc;
        bool half = ty[t].dt != DT_FLOAT;
        for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
            if (half && !cases[i].half)
                continue;
            char name[96];
            snprintf(name, sizeof name, "%s%s_sk_%s", half ? "h" : "", ty[t].v + 2, cases[i].name);
            g_split_force = cases[i].force;
            if (!half) {
                check_graph(name, split_graph(&cases[i]), &o, 64, 1);
                continue;
            }
            // Half tensors: the reference from a float32 twin holding the same half values.
            g_half = true;
            unsigned seed = (unsigned)rand();
            srand(seed);
            g_dt = ty[t].dt;
            PrimGraph *pg = split_graph(&cases[i]);
            srand(seed);
            g_dt = DT_FLOAT;
            g_round = ty[t].dt;
            g_twin = split_graph(&cases[i]);
            g_round = DT_FLOAT;
            g_dt = ty[t].dt;
            check_graph(name, pg, &o, 64, 1);
            g_dt = DT_FLOAT;
            prim_graph_free(g_twin);
            g_twin = NULL;
            g_half = false;
        }
        printf("  %s%s: %d split-K tensor-core kernels compiled (%s)\n",
               half ? "half storage " : "", ty[t].v, g_split_tc - before,
               g_api  ? "the device's arch"
               : half ? "sm_90a"
                      : "sm_80 and sm_90a");
        CHECK_MSG(g_split_tc - before >= 12, "%s: %d split kernels", ty[t].v, g_split_tc - before);
    }
    g_split_only = false;
    g_split_force = 0;
    g_only = NULL;
    g_only_max = 0;
}

// The direct convolution to a few output channels (v=direct): offered, and compiled (run on a
// GPU), for a 9x9 conv 8 -> 3 with a prologue and a ReLU epilogue, a grouped one and a strided
// one to a single channel.
static void direct(void) {
    ConvCase cs[] = {
        {"direct_9x9_8to3_relu",
         2,
         1,
         8,
         3,
         {20, 18},
         {9, 9},
         {1, 1},
         {1, 1},
         {4, 4},
         {4, 4},
         1,
         1,
         true,
         false},
        {"direct_3x3_g2_4to4",
         2,
         2,
         4,
         4,
         {12, 11},
         {3, 3},
         {1, 1},
         {1, 1},
         {1, 1},
         {1, 1},
         2,
         1,
         false,
         false},
        {"direct_5x5_s2_3to1",
         2,
         1,
         3,
         1,
         {13, 9},
         {5, 5},
         {2, 2},
         {1, 1},
         {2, 2},
         {2, 2},
         1,
         0,
         false,
         false},
    };
    for (size_t i = 0; i < ORCH_COUNT(cs); i++) {
        PrimGraph *pg = conv_graph(&cs[i]);
        Err e = {0};
        CandidateSet *cands = NULL;
        CHECK(cand_enumerate(pg, NULL, 0, &cands, &e) == ST_OK);
        int offered = 0;
        for (int c = 0; cands && c < cands->n; c++) {
            KernelConfig cf[8];
            int n = cugen_lin_supports(pg, &cands->c[c], &g_fp32)
                        ? cugen_lin_configs(pg, &cands->c[c], &g_hw[1], &g_fp32, cf, 8)
                        : 0;
            for (int k = 0; k < n; k++)
                offered += strstr(cf[k].desc, "v=direct") != NULL;
        }
        CHECK_MSG(offered > 0, "%s: no v=direct config among the top 8", cs[i].name);
        cand_set_free(cands);
        prim_graph_free(pg);
        g_only = "v=direct";
        check_graph(cs[i].name, conv_graph(&cs[i]), &g_fp32, 8, 1);
        g_only = NULL;
    }
}

// The tensor-core direct convolution (v=f16dc / v=bf16dc) on half tensors: X read as NCHW
// (element copies along x), as an NHWC input under a transpose (16-byte cp.async), or through a
// prologue (cexpr); W as KCRS or as a KRSC constant under a transpose (cp.async); 3 and 8
// channels packed (k steps over 4 or 2 taps), 16 to 64 in steps of 16 channels (40: zero-padded),
// output channels 3 to 40 (partial n8 tiles), stride 2, asymmetric padding, epilogues. Offered
// first for the style transfer's RGB layer (9x9, 32 -> 3, NHWC in and KRSC weights) on the H100
// model; compiled (every tile config on a GPU, three per candidate without one) and run against the
// interpreter on a GPU. Never offered for groups, stride 3, dilation 2, 65 output channels, a
// 12-tap window, or float32 tensors.
static PrimGraph *dc_graph(const ConvCase *cc, bool nhwc, bool krsc) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int to_nchw[] = {0, 3, 1, 2};
    int64_t xd[4] = {cc->N, cc->C, cc->in[0], cc->in[1]}, od[4] = {cc->N, cc->OC};
    int64_t wd[4] = {cc->OC, cc->C / cc->group, cc->k[0], cc->k[1]};
    if (nhwc) {
        xd[1] = cc->in[0];
        xd[2] = cc->in[1];
        xd[3] = cc->C;
    }
    if (krsc) {
        wd[1] = cc->k[0];
        wd[2] = cc->k[1];
        wd[3] = cc->C / cc->group;
    }
    LinearParams lp = {.op = LIN_CONV, .n_spatial = 2, .group = cc->group};
    for (int d = 0; d < 2; d++) {
        lp.stride[d] = cc->st[d];
        lp.dilation[d] = cc->dil[d];
        lp.pad_begin[d] = cc->pb[d];
        lp.pad_end[d] = cc->pe[d];
        od[2 + d] =
            (cc->in[d] + cc->pb[d] + cc->pe[d] - cc->dil[d] * (cc->k[d] - 1) - 1) / cc->st[d] + 1;
    }
    int x = add_input(pg, "x", 4, xd);
    PB b = {pg, "dc"};
    int w = add_const(&b, 4, wd);
    if (nhwc)
        x = pb_transpose(&b, x, to_nchw);
    if (krsc)
        w = pb_transpose(&b, w, to_nchw);
    if (cc->pro)
        x = pb_ew2i(&b, EW_MUL, x, 1.5);
    int y = pb_conv(&b, &lp, x, w, od);
    if (cc->epi) {
        int64_t bd[4] = {1, cc->OC, 1, 1};
        y = pb_ew2(&b, EW_ADD, y, add_const(&b, 4, bd));
        if (cc->epi == 1) {
            y = pb_ew1(&b, EW_RELU, y);
        } else {
            int res = add_input(pg, "res", 4, od);
            y = pb_ew2(&b, EW_ADD, pb_ew1(&b, EW_SIGMOID, y), res);
        }
    }
    add_output(pg, y);
    return pg;
}

static void tcconv(void) {
    // clang-format off
    static const struct {
        ConvCase cc;
        bool nhwc, krsc;
    } cases[] = {
        {{"dc_9x9_32to3_nhwc_krsc", 2, 1, 32, 3, {37, 40}, {9, 9}, {1, 1}, {1, 1}, {4, 4}, {4, 4}, 1, 0, false, false}, true, true},
        {{"dc_9x9_3to32_relu", 2, 1, 3, 32, {21, 19}, {9, 9}, {1, 1}, {1, 1}, {4, 4}, {4, 4}, 1, 1, false, false}, false, false},
        {{"dc_3x3_16to24_nhwc_bias", 2, 2, 16, 24, {13, 18}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, true, false},
        {{"dc_3x3_s2_40to8_nhwc_krsc_sig_res", 2, 1, 40, 8, {17, 15}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 1}, 1, 2, false, false}, true, true},
        {{"dc_5x5_8to5_pro", 2, 1, 8, 5, {11, 35}, {5, 5}, {1, 1}, {1, 1}, {2, 1}, {2, 3}, 1, 0, true, false}, false, false},
        {{"dc_7x7_s2_p3_3to16_relu", 2, 1, 3, 16, {23, 30}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, 1, 1, false, false}, true, false},
        {{"dc_3x3_5to3_relu", 2, 2, 5, 3, {10, 21}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, false}, false, false},
        {{"dc_1x1_64to40", 2, 1, 64, 40, {9, 16}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 0, false, false}, true, false},
    };
    // clang-format on
    static const struct {
        DType dt;
        Precision p;
        const char *v;
    } ty[] = {{DT_FLOAT16, PREC_FP16, "f16dc"}, {DT_BFLOAT16, PREC_BF16, "bf16dc"}};
    for (size_t t = 0; t < ORCH_COUNT(ty); t++) {
        const TargetOptions o = {.precision = ty[t].p};
        int before = g_only_kernels;
        for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
            char name[96];
            snprintf(name, sizeof name, "%s_%s", ty[t].v, cases[i].cc.name);
            unsigned seed = (unsigned)rand();
            srand(seed);
            g_dt = ty[t].dt;
            PrimGraph *pg = dc_graph(&cases[i].cc, cases[i].nhwc, cases[i].krsc);
            // Offered for the largest candidate; first for the RGB layer (t == 0, i == 0).
            Err e = {0};
            CandidateSet *cands = NULL;
            CHECK(cand_enumerate(pg, NULL, 0, &cands, &e) == ST_OK);
            int offered = 0, first = 0;
            for (int c = 0; cands && c < cands->n; c++) {
                KernelConfig cf[8];
                int n = cugen_lin_supports(pg, &cands->c[c], &o)
                            ? cugen_lin_configs(pg, &cands->c[c], &g_hw[1], &o, cf, 8)
                            : 0;
                for (int k = 0; k < n; k++)
                    offered += strstr(cf[k].desc, ty[t].v) != NULL;
                first += n > 0 && strstr(cf[0].desc, ty[t].v) != NULL;
            }
            cand_set_free(cands);
            CHECK_MSG(offered > 0, "%s: no v=%s config among the top 8", name, ty[t].v);
            CHECK_MSG(i != 0 || first > 0, "%s: v=%s never ranked first", name, ty[t].v);
            srand(seed);
            g_dt = DT_FLOAT;
            g_round = ty[t].dt;
            g_twin = dc_graph(&cases[i].cc, cases[i].nhwc, cases[i].krsc);
            g_round = DT_FLOAT;
            g_dt = ty[t].dt;
            g_half = true;
            g_half_tiles = true;
            g_only = ty[t].v;
            g_only_max = g_api ? 0 : 3;
            check_graph(name, pg, &o, 64, 1);
            g_only = NULL;
            g_only_max = 0;
            g_half = false;
            g_half_tiles = false;
            g_dt = DT_FLOAT;
            prim_graph_free(g_twin);
            g_twin = NULL;
        }
        printf("  %s: %d kernels emitted\n", ty[t].v, g_only_kernels - before);
        CHECK_MSG(g_only_kernels - before >= (int)ORCH_COUNT(cases), "%s: %d kernels", ty[t].v,
                  g_only_kernels - before);
    }
    // Refused (no f16dc config for any candidate): groups, stride 3, dilation 2, 65 output
    // channels, a 12-wide window; and float32 tensors (half storage only).
    // clang-format off
    static const ConvCase refused[] = {
        {"dc_no_g2", 2, 1, 16, 16, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, 0, false, false},
        {"dc_no_s3", 2, 1, 16, 8, {13, 13}, {3, 3}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 0, false, false},
        {"dc_no_d2", 2, 1, 16, 8, {13, 13}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 1, 0, false, false},
        {"dc_no_oc65", 2, 1, 16, 65, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, 0, false, false},
        {"dc_no_k12", 2, 1, 8, 8, {20, 20}, {12, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, 0, false, false},
    };
    // clang-format on
    const TargetOptions fp16 = {.precision = PREC_FP16};
    for (size_t i = 0; i < ORCH_COUNT(refused) + 1; i++) {
        bool f32 = i == ORCH_COUNT(refused); // the first case again on float32 tensors
        const ConvCase *cc = f32 ? &cases[0].cc : &refused[i];
        g_dt = f32 ? DT_FLOAT : DT_FLOAT16;
        PrimGraph *pg = f32 ? dc_graph(cc, true, true) : dc_graph(cc, false, false);
        g_dt = DT_FLOAT;
        Err e = {0};
        CandidateSet *cands = NULL;
        CHECK(cand_enumerate(pg, NULL, 0, &cands, &e) == ST_OK);
        int offered = 0, supported = 0;
        for (int c = 0; cands && c < cands->n; c++) {
            KernelConfig cf[64];
            int n = cugen_lin_supports(pg, &cands->c[c], &fp16)
                        ? cugen_lin_configs(pg, &cands->c[c], &g_hw[1], &fp16, cf, 64)
                        : 0;
            supported += n > 0;
            for (int k = 0; k < n; k++)
                offered += strstr(cf[k].desc, "dc ") != NULL;
        }
        CHECK_MSG(supported > 0 && offered == 0, "%s%s: %d dc configs offered (%d candidates)",
                  cc->name, f32 ? " (float32)" : "", offered, supported);
        cand_set_free(cands);
        prim_graph_free(pg);
    }
}

// Depthwise convolutions on half tensors read channels-last (an NHWC input under a transpose,
// as the channels-last pass leaves MobileNetV2's): only the direct kernel is offered (v=dw, its
// threads channels-fastest), compiled, and run against the interpreter on a GPU.
static void dw_nhwc(void) {
    // clang-format off
    static const ConvCase cases[] = {
        {"dw_3x3_s2_24_nhwc_relu", 2, 1, 24, 24, {15, 17}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 24, 1, false, false},
        {"dw_5x5_13_nhwc", 2, 2, 13, 13, {9, 8}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 13, 0, false, false},
    };
    // clang-format on
    const TargetOptions fp16 = {.precision = PREC_FP16};
    for (size_t i = 0; i < ORCH_COUNT(cases); i++) {
        unsigned seed = (unsigned)rand();
        srand(seed);
        g_dt = DT_FLOAT16;
        PrimGraph *pg = dc_graph(&cases[i], true, false);
        Err e = {0};
        CandidateSet *cands = NULL;
        CHECK(cand_enumerate(pg, NULL, 0, &cands, &e) == ST_OK);
        int dw = 0, other = 0;
        for (int c = 0; cands && c < cands->n; c++) {
            KernelConfig cf[8];
            int n = cugen_lin_supports(pg, &cands->c[c], &fp16)
                        ? cugen_lin_configs(pg, &cands->c[c], &g_hw[1], &fp16, cf, 8)
                        : 0;
            for (int k = 0; k < n; k++) {
                dw += strstr(cf[k].desc, "v=dw") != NULL;
                other += strstr(cf[k].desc, "v=dw") == NULL;
            }
        }
        cand_set_free(cands);
        CHECK_MSG(dw > 0 && other == 0, "%s: %d v=dw configs, %d others", cases[i].name, dw, other);
        srand(seed);
        g_dt = DT_FLOAT;
        g_round = DT_FLOAT16;
        g_twin = dc_graph(&cases[i], true, false);
        g_round = DT_FLOAT;
        g_dt = DT_FLOAT16;
        g_half = true;
        check_graph(cases[i].name, pg, &fp16, 8, 1);
        g_half = false;
        g_dt = DT_FLOAT;
        prim_graph_free(g_twin);
        g_twin = NULL;
    }
}

static void counts(void) {
    printf("  compiled %d kernels in %d programs for %d archs (%d candidates)\n", g_kernels,
           g_programs / (g_api || g_sm90_only ? 1 : g_nhw), g_api || g_sm90_only ? 1 : g_nhw,
           g_candidates);
    printf("  of which %d split-K tensor-core kernels\n", g_split_tc);
    if (g_sampled_out)
        printf("  NVRTC compiled one kernel in %d of each graph (ORCH_CUGEN_SAMPLE): %d kernels "
               "emitted only\n",
               g_sample, g_sampled_out);
    CHECK(g_kernels > 100);
    if (g_api)
        printf("  GPU: %d kernels run and compared\n", g_ran);
}

static void gpu_speed(void) {
    ConvCase c3 = {"conv3x3_64", 2,      1,      64, 64, {56, 56}, {3, 3}, {1, 1},
                   {1, 1},       {1, 1}, {1, 1}, 1,  0,  false,    false};
    // ResNet-18's layer4 3x3 convolution: 49 output pixels, few tiles (split-K's case).
    ConvCase c4 = {"conv3x3_512", 2,      1,      512, 512, {7, 7}, {3, 3}, {1, 1},
                   {1, 1},        {1, 1}, {1, 1}, 1,   0,   false,  false};
    // fp32 first, then each tensor-core precision (its best configs and the SIMT ones).
    for (int p = -1; p < (int)ORCH_COUNT(g_tc); p++) {
        const TargetOptions o = {.precision = p < 0 ? PREC_FP32 : g_tc[p].p};
        speed("mm1024", mm_graph(1024, 1024, 1024, 0), &o, 2.0 * 1024 * 1024 * 1024);
        speed("conv3x3_64x56", conv_graph(&c3), &o, 2.0 * 64 * 64 * 9 * 56 * 56);
        speed("conv3x3_512x7", conv_graph(&c4), &o, 2.0 * 512 * 512 * 9 * 7 * 7);
    }
    // Half storage: the same products on float16 / bfloat16 tensors.
    static const struct {
        DType dt;
        Precision p;
        const char *mm, *cv;
    } hs[] = {{DT_FLOAT16, PREC_FP16, "h16_mm1024", "h16_conv3x3_64x56"},
              {DT_BFLOAT16, PREC_BF16, "hb16_mm1024", "hb16_conv3x3_64x56"}};
    for (size_t t = 0; t < ORCH_COUNT(hs); t++) {
        const TargetOptions o = {.precision = hs[t].p};
        g_dt = hs[t].dt;
        speed(hs[t].mm, mm_graph(1024, 1024, 1024, 0), &o, 2.0 * 1024 * 1024 * 1024);
        speed(hs[t].cv, conv_graph(&c3), &o, 2.0 * 64 * 64 * 9 * 56 * 56);
    }
    g_dt = DT_FLOAT;
}

// Without a GPU its half is skipped: a line saying why, or a failure under ORCH_REQUIRE_GPU.
static void gpu_half(void) {
    gpu_check_skip("GPU half (%s)", g_gpu_err.msg);
}

int main(int argc, char **argv) {
    unsigned seed =
        getenv("ORCH_TEST_SEED") ? (unsigned)atoi(getenv("ORCH_TEST_SEED")) : (unsigned)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0); // lines survive a killed run
    printf("seed %u\n", seed);
    srand(seed);
    Err e = {0};
    if (nvrtc_load(&e) != ST_OK) {
        printf("skip: NVRTC unavailable (%s)\n", e.msg);
        return CHECK_DONE();
    }
    g_nvrtc = true;
    g_sm90_only =
        getenv("ORCH_CUGEN_SM90_ONLY") && strcmp(getenv("ORCH_CUGEN_SM90_ONLY"), "0") != 0;
    g_sample = getenv("ORCH_CUGEN_SAMPLE") ? ORCH_MAX(1, atoi(getenv("ORCH_CUGEN_SAMPLE"))) : 1;
    sb_init(&g_scratch);
    cuda_hw_described(&g_hw[g_nhw++], "A100-SXM4-80GB", 80, 108, 167936, 40 << 20, 1410000,
                      2.039e12, 2048);
    cuda_hw_described(&g_hw[g_nhw++], "H100 SXM", 90, 132, 233472, 50 << 20, 1980000, 3.35e12,
                      2048);
    g_api = cuda_api_load(&g_gpu_err);
    if (g_api && (cuda_device_open(g_api, 0, &g_dev, &g_gpu_err) != ST_OK ||
                  cuda_hw_detect(&g_dhw, NULL, &g_gpu_err) != ST_OK))
        g_api = NULL;
    if (!g_api)
        RUN(gpu_half);
    else
        printf("GPU: %s (%s, %d SMs)\n", g_dhw.name, g_dhw.arch, g_dhw.sm_count);
    // ORCH_CUGEN_PARTS=a,b runs only those parts (the GPU half of every part takes minutes).
    const char *parts = getenv("ORCH_CUGEN_PARTS");
#define PART(fn)                                                                                   \
    do {                                                                                           \
        if (!parts || strstr(parts, #fn))                                                          \
            RUN(fn);                                                                               \
    } while (0)
    PART(config_model);
    PART(matmuls);
    PART(convs);
    PART(splitk);
    PART(tc_splitk);
    PART(direct);
    PART(tcconv);
    PART(dw_nhwc);
    PART(precision_configs);
    PART(options_independent);
    PART(tensor_cores);
    PART(half_storage);
    if (argc > 1) {
        g_models = argv[1];
        PART(models_folder);
    }
    if (!parts)
        RUN(counts);
    if (g_api) {
        PART(gpu_speed);
        cuda_device_close(&g_dev);
    }
    return CHECK_DONE();
}
