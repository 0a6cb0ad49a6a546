// The CUDA kernel lab (cuda_lab.h): emit → NVRTC in parallel threads → load, check and time on
// one GPU or several of one kind (a worker per GPU taking jobs from one queue).
#define _GNU_SOURCE
#include "cuda_lab.h"

#include "nvrtc.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// Where the next buffer of `bytes` starts in the pool: aligned to PLAN_ALIGN, the most the
// runtime's arena guarantees, and deliberately never to twice that, so a kernel that assumes
// more alignment than the session gives fails here, not in a compiled model.
static size_t carve(size_t *off, size_t bytes) {
    size_t at = round_up(*off, 2 * PLAN_ALIGN) + PLAN_ALIGN;
    *off = at + (bytes ? bytes : 1);
    return at;
}

// ---- programs: emission and parallel compilation ----

typedef struct Unit {
    int *jobs; // indices into the job array, those whose emit succeeded
    int count;
    char *source;
    void *cubin;
    size_t size;
    Err err;    // the compile's error
    bool built; // compiled (or failed to): cubin and err are final; under the Compiler's mu
    double build_s; // NVRTC's wall seconds on this unit
} Unit;

// Emits jobs idx[0..n) into one program; jobs whose emit fails are marked and left out.
static void emit_unit(const PrimGraph *pg, const CandidateSet *cs, LabJob *jobs, CudaLaunch *geo,
                      const int *idx, int n, const CudaHw *hw, const CudaEmitter *em, Unit *u) {
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, em->prelude);
    u->jobs = xmalloc(sizeof(int) * (size_t)(n + 1));
    u->count = 0;
    for (int i = 0; i < n; i++) {
        LabJob *j = &jobs[idx[i]];
        const Candidate *c = &cs->c[j->cand];
        char name[64];
        lab_kernel_name(pg, c, &j->cfg, name, sizeof name);
        Err e = {0};
        size_t mark = b.len;
        memset(&geo[idx[i]], 0, sizeof geo[idx[i]]);
        if (em->emit(pg, c, &j->cfg, hw, &em->opt, name, &b, &geo[idx[i]], &e)) {
            b.len = mark;
            b.s[mark] = '\0';
            j->status = LAB_BUILD_FAILED;
            snprintf(j->note, sizeof j->note, "emit: %.240s", e.msg);
            continue;
        }
        if (geo[idx[i]].lib) { // a library call: nothing to compile, run_library measures it
            b.len = mark;
            b.s[mark] = '\0';
            continue;
        }
        u->jobs[u->count++] = idx[i];
    }
    u->source = sb_take(&b);
}

static void free_unit(Unit *u) {
    free(u->jobs);
    free(u->source);
    free(u->cubin);
    memset(u, 0, sizeof *u);
}

// Compiles units on threads of its own while the GPU measures the units already built: the
// measuring (cuda_lab_run_devices' workers) takes a unit's kernels as soon as its program is
// built, so a compile lasts about the longer of the two phases, not their sum (Segformer-B0's
// 2259 configs: 106 s of building, 92 s of measuring, done one after the other before).
typedef struct Compiler {
    Unit *units;
    int n;
    const char *arch;
    int next; // the next unit to take, under mu
    double t_start, t_end; // when the first compile started and the last ended (under mu)
    pthread_mutex_t mu;
    pthread_cond_t built; // a unit was built
    pthread_t *th;
    int n_threads;
} Compiler;

static void compile_one(Unit *u, int i, const char *arch) {
    if (u->count == 0)
        return;
    char name[64];
    snprintf(name, sizeof name, "orch_lab_%d.cu", i);
    NvrtcOptions no = {.arch = arch};
    nvrtc_compile(u->source, name, &no, &u->cubin, &u->size, &u->err);
}

static void *compile_worker(void *arg) {
    Compiler *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int i = c->next++;
        pthread_mutex_unlock(&c->mu);
        if (i >= c->n)
            return NULL;
        double t = now_s();
        compile_one(&c->units[i], i, c->arch);
        c->units[i].build_s = now_s() - t;
        pthread_mutex_lock(&c->mu);
        c->units[i].built = true;
        c->t_end = now_s();
        pthread_cond_broadcast(&c->built);
        pthread_mutex_unlock(&c->mu);
    }
}

// Starts compiling every unit in up to `threads` threads (NVRTC is thread-safe); a unit's
// failure is in its err. Where no thread can be started, the units are compiled here and now.
static void compiler_start(Compiler *c, Unit *units, int n, const char *arch, int threads) {
    memset(c, 0, sizeof *c);
    c->units = units;
    c->n = n;
    c->arch = arch;
    c->t_start = c->t_end = now_s();
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->built, NULL);
    int nt = ORCH_MAX(1, ORCH_MIN(threads, n));
    c->th = xcalloc((size_t)nt, sizeof(pthread_t));
    for (int i = 0; i < nt; i++) {
        if (pthread_create(&c->th[c->n_threads], NULL, compile_worker, c) != 0)
            break;
        c->n_threads++;
    }
    if (c->n_threads == 0)
        compile_worker(c);
}

// Waits until unit u is built (its cubin or its error final).
static void compiler_wait(Compiler *c, const Unit *u) {
    pthread_mutex_lock(&c->mu);
    while (!u->built)
        pthread_cond_wait(&c->built, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

// Waits for every unit and the threads; the wall seconds from the first compile to the last.
static double compiler_finish(Compiler *c) {
    for (int i = 0; i < c->n_threads; i++)
        pthread_join(c->th[i], NULL);
    double s = c->t_end - c->t_start;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->built);
    free(c->th);
    c->th = NULL;
    return s;
}

// Leaves the units no compiler has taken unbuilt (their kernels are not measured).
static void compiler_cancel(Compiler *c) {
    pthread_mutex_lock(&c->mu);
    c->next = c->n;
    pthread_mutex_unlock(&c->mu);
}

// Compiles every unit before returning.
static double compile_units(Unit *units, int n, const char *arch, int threads) {
    Compiler c;
    compiler_start(&c, units, n, arch, threads);
    return compiler_finish(&c);
}

// ---- the device side ----

// Waits on the device so that launches queued behind it start back to back.
static const char SPIN_SRC[] =
    "extern \"C\" __global__ void " CUDA_SPIN_SYMBOL "(long long cycles) {\n"
    "    long long t0 = clock64();\n"
    "    while (clock64() - t0 < cycles) {}\n"
    "}\n";

typedef struct Lab {
    const CudaApi *api;
    const CudaHw *hw;
    CudaDevice dev;
    bool open;
    CUstream stream;
    CUevent ev[2];
    CUdeviceptr pool, scratch, ws;
    size_t pool_bytes, scratch_bytes, ws_bytes; // ws: the library calls' workspace
    void *host_out;                             // download buffer, pool_bytes
    bool host_pinned;                           // host_out is page-locked (cuMemAllocHost)
    // The inputs the last job left in the pool: the configs of one candidate, measured one after
    // another, read the same tensors at the same offsets, so each is uploaded once, not once a
    // config (a job's outputs are carved after its inputs and never overlap them).
    struct {
        int tensor;
        size_t off, bytes;
    } resident[ORCH_CUDA_MAX_IN];
    int n_resident;
    void *spin_cubin;
    size_t spin_size;
    CUmodule spin_mod;
    CUfunction spin;
    bool lost; // a kernel faulted: the context (and CUDA in this process) is unusable
    double t_check, t_time; // seconds checking kernels and timing them (measure)
    LabSplit split;    // where t_check went
    double slowest_capture_s; // the longest capture of a library call, and its config
    char slowest_capture[160];
} Lab;

static void gpu_close(Lab *L) {
    const CudaApi *api = L->api;
    if (L->open && !L->lost) {
        if (L->stream)
            api->cuStreamSynchronize(L->stream);
        for (int i = 0; i < 2; i++)
            if (L->ev[i])
                api->cuEventDestroy(L->ev[i]);
        if (L->pool)
            api->cuMemFree(L->pool);
        if (L->scratch)
            api->cuMemFree(L->scratch);
        if (L->ws)
            api->cuMemFree(L->ws);
        if (L->stream)
            api->cuStreamDestroy(L->stream);
        if (L->spin_mod)
            api->cuModuleUnload(L->spin_mod);
        if (L->host_pinned)
            api->cuMemFreeHost(L->host_out);
    }
    // Page-locked memory of a lost context went with it.
    if (!L->host_pinned)
        free(L->host_out);
    L->host_out = NULL;
    L->host_pinned = false;
    L->n_resident = 0;
    // A lost context's objects are gone with it: nothing to free but the reference.
    if (L->open)
        cuda_device_close(&L->dev);
    L->open = L->lost = false;
    L->stream = NULL;
    L->ev[0] = L->ev[1] = NULL;
    L->pool = L->scratch = L->ws = 0;
    L->spin_mod = NULL;
    L->spin = NULL;
}

static int gpu_open(Lab *L, Err *e) {
    const CudaApi *api = L->api;
    int rc = cuda_device_open(api, L->hw->ordinal, &L->dev, e);
    if (rc)
        return rc;
    L->open = true;
    if (CUDA_TRY(api, e, cuStreamCreate, &L->stream, CU_STREAM_NON_BLOCKING) ||
        CUDA_TRY(api, e, cuEventCreate, &L->ev[0], CU_EVENT_DEFAULT) ||
        CUDA_TRY(api, e, cuEventCreate, &L->ev[1], CU_EVENT_DEFAULT) ||
        CUDA_TRY(api, e, cuMemAlloc, &L->pool, L->pool_bytes) ||
        (L->scratch_bytes && CUDA_TRY(api, e, cuMemAlloc, &L->scratch, L->scratch_bytes)) ||
        (L->ws_bytes && CUDA_TRY(api, e, cuMemAlloc, &L->ws, L->ws_bytes)) ||
        CUDA_TRY(api, e, cuModuleLoadData, &L->spin_mod, L->spin_cubin) ||
        CUDA_TRY(api, e, cuModuleGetFunction, &L->spin, L->spin_mod, CUDA_SPIN_SYMBOL)) {
        err_prefix(e, "CUDA lab: setting up the GPU (a %zu-byte buffer pool): ", L->pool_bytes);
        return e->code;
    }
    // Outputs come down into page-locked memory (about twice as fast as into pageable memory,
    // which the driver stages); where the system will not lock that much, into malloc'd memory.
    void *h = NULL;
    if (api->cuMemAllocHost(&h, L->pool_bytes) == CUDA_SUCCESS) {
        L->host_out = h;
        L->host_pinned = true;
    } else if (!(L->host_out = malloc(L->pool_bytes))) {
        return err_set(e, ST_RUNTIME, "CUDA lab: out of host memory (%zu bytes per GPU)",
                       L->pool_bytes);
    }
    return ST_OK;
}

// Queues the spin kernel for about `seconds` of GPU time.
static int spin(Lab *L, double seconds, Err *e) {
    long long cycles =
        (long long)(seconds * (L->hw->clock_khz > 0 ? L->hw->clock_khz : 1500000) * 1e3);
    void *params[1] = {&cycles};
    return CUDA_TRY(L->api, e, cuLaunchKernel, L->spin, 1, 1, 1, 1, 1, 1, 0, L->stream, params,
                    NULL);
}

// A driver failure while running a job's kernel: the job's status, and the context marked lost
// when the failure happened on the device (it is sticky then).
static void job_crashed(Lab *L, LabJob *j, const char *what, const Err *ce) {
    j->status = LAB_WRONG;
    j->max_err = INFINITY;
    snprintf(j->note, sizeof j->note, "crashed %s: %.200s", what, ce->msg);
    L->lost = true;
}

// What measure runs: a generated kernel (fn with geometry g) or a library call (op: cuBLASLt,
// dnn: cuDNN).
typedef struct Runner {
    CUfunction fn;
    const CudaLaunch *g;
    const BlasLtOp *op;
    const DnnOp *dnn;
} Runner;

// The device view of a job's buffers (cugen.h: struct OrchArgs).
typedef struct LabArgs {
    CUdeviceptr in[ORCH_CUDA_MAX_IN];
    CUdeviceptr out;
} LabArgs;

static int launch(Lab *L, const Runner *r, LabArgs *args, Err *e) {
    if (r->dnn) {
        const DnnCall *c = &r->dnn->call;
        return dnn_op_run(r->dnn, args->in[c->in_x], args->in[c->in_w],
                          c->in_bias >= 0 ? args->in[c->in_bias] : 0,
                          c->in_z >= 0 ? args->in[c->in_z] : 0, args->out, L->ws, L->ws_bytes,
                          L->stream, e);
    }
    if (r->op) {
        const BlasLtCall *c = &r->op->call;
        return blaslt_op_run(
            r->op, args->in[c->in_a], args->in[c->in_b], c->in_bias >= 0 ? args->in[c->in_bias] : 0,
            c->in_res >= 0 ? args->in[c->in_res] : 0, args->out, L->ws, L->ws_bytes, L->stream, e);
    }
    const CudaLaunch *g = r->g;
    void *params[1] = {args};
    return CUDA_TRY(L->api, e, cuLaunchKernel, r->fn, g->grid[0], g->grid[1], g->grid[2],
                    g->block[0], g->block[1], g->block[2], g->smem, L->stream, params, NULL);
}

// `batch` launches of fn captured as one CUDA graph; NULL when capture fails (the caller then
// launches from the host, which only makes the per-launch overhead larger).
static CUgraphExec capture_batch(Lab *L, const Runner *r, LabArgs *args, int batch) {
    const CudaApi *api = L->api;
    Err ce = {0};
    if (CUDA_TRY(api, &ce, cuStreamBeginCapture, L->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
        return NULL;
    bool ok = true;
    for (int b = 0; b < batch && ok; b++)
        ok = launch(L, r, args, &ce) == ST_OK;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    ok = api->cuStreamEndCapture(L->stream, &graph) == CUDA_SUCCESS && ok;
    if (ok && api->cuGraphInstantiate(&exec, graph, 0) != CUDA_SUCCESS)
        exec = NULL;
    if (graph)
        api->cuGraphDestroy(graph);
    return exec;
}

// Checks and times one kernel (the job's status says how it went).
static void measure(Lab *L, const PrimGraph *pg, const Candidate *c, void **values, const Runner *r,
                    LabJob *j, const LabOptions *opt) {
    const CudaApi *api = L->api;
    const CudaHw *hw = L->hw;
    const Tensor *out_t = pg->tensors[c->output];
    double t_enter = now_s();
    // An operator kernel writes every output of its primitive and a status word (cugen.h).
    const Prim *sink = pg->prims[c->prims[c->n_prims - 1]];
    bool op = ckernel_op_abi(sink);
    int n_out = op ? sink->n_out : 1;
    const int *outs = op ? sink->out : &c->output;
    static const CudaLaunch none = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    bool library = r->op || r->dnn;
    const CudaLaunch *g = library ? &none : r->g; // a library call has no geometry to check
    uint64_t threads = (uint64_t)g->block[0] * g->block[1] * g->block[2];
    int max_threads = hw->max_threads_per_block > 0 ? hw->max_threads_per_block : 1024;
    int64_t max_smem = hw->smem_per_block_optin > 0 ? hw->smem_per_block_optin : 48 * 1024;
    if (!g->grid[0] || !g->grid[1] || !g->grid[2] || !threads || threads > (uint64_t)max_threads ||
        (int64_t)g->smem > max_smem) {
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note,
                 "emitter bug: impossible launch grid %ux%ux%u block %ux%ux%u smem %u (this GPU: "
                 "%d threads, %lld bytes of shared memory per block)",
                 g->grid[0], g->grid[1], g->grid[2], g->block[0], g->block[1], g->block[2], g->smem,
                 max_threads, (long long)max_smem);
        return;
    }
    if (c->n_inputs + (op ? ORCH_CUDA_OP_SLOTS : 0) > ORCH_CUDA_MAX_IN || n_out > 2) {
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note, "%d inputs; CUDA kernels take at most %d", c->n_inputs,
                 ORCH_CUDA_MAX_IN);
        return;
    }
    LabArgs args;
    memset(&args, 0, sizeof args);
    size_t off = 0, in_bytes = 0;
    for (int i = 0; i < c->n_inputs; i++) {
        if (!values[c->inputs[i]]) {
            j->status = LAB_SKIPPED;
            snprintf(j->note, sizeof j->note, "no value for input '%s'",
                     pg->tensors[c->inputs[i]]->name);
            return;
        }
        size_t b = tensor_nbytes(pg->tensors[c->inputs[i]]);
        args.in[i] = L->pool + carve(&off, b);
        in_bytes += b;
    }
    CUdeviceptr out_at[2] = {0, 0}, flag = 0;
    for (int o = 0; o < n_out; o++)
        if (outs[o] >= 0)
            out_at[o] = L->pool + carve(&off, tensor_nbytes(pg->tensors[outs[o]]));
    args.out = out_at[0];
    if (op) {
        flag = L->pool + carve(&off, sizeof(int));
        args.in[c->n_inputs] = out_at[1];
        args.in[c->n_inputs + 1] = flag;
    }
    double t_pending = now_s();
    int skip = opt->before_run ? opt->before_run(opt->ctx, j) : 0;
    L->split.pending_s += now_s() - t_pending;
    if (skip) {
        j->status = LAB_SKIPPED;
        snprintf(j->note, sizeof j->note, "skipped: it crashed an earlier run");
        return;
    }
    if (tensor_numel(out_t) == 0) { // nothing to compute, nothing to launch
        j->status = LAB_OK;
        snprintf(j->note, sizeof j->note, "empty output: not launched");
        return;
    }
    Err ce = {0};
    bool reused = false, checked_again = false;
check:;
    double t_up = now_s();
    int n_res = 0;
    for (int i = 0; i < c->n_inputs; i++) {
        size_t b = tensor_nbytes(pg->tensors[c->inputs[i]]), at = (size_t)(args.in[i] - L->pool);
        bool resident = false;
        for (int k = 0; k < L->n_resident && !resident; k++)
            resident = L->resident[k].tensor == c->inputs[i] && L->resident[k].off == at &&
                       L->resident[k].bytes == b;
        // On the lab's stream: the kernel runs there, and that stream does not wait for the
        // legacy default stream (non-blocking), where cuMemcpyHtoD and cuMemsetD8 would run.
        if (b && !resident &&
            CUDA_TRY(api, &ce, cuMemcpyHtoDAsync, args.in[i], values[c->inputs[i]], b, L->stream)) {
            L->n_resident = 0;
            job_crashed(L, j, "uploading its inputs", &ce);
            return;
        }
        reused = reused || (resident && b);
        L->split.reused += resident && b;
        L->split.uploads += !resident && b;
        L->resident[n_res].tensor = c->inputs[i];
        L->resident[n_res].off = at;
        L->resident[n_res].bytes = b;
        n_res++;
    }
    L->n_resident = n_res; // this job's inputs, and nothing the outputs below overwrite
    double t_first = now_s();
    L->split.upload_s += t_first - t_up;
    for (int o = 0; o < n_out; o++) // poison: NaN / -1
        if (out_at[o] && CUDA_TRY(api, &ce, cuMemsetD8Async, out_at[o], 0xff,
                                  tensor_nbytes(pg->tensors[outs[o]]), L->stream)) {
            job_crashed(L, j, "poisoning its output", &ce);
            return;
        }
    if (flag && CUDA_TRY(api, &ce, cuMemsetD8Async, flag, 0, sizeof(int), L->stream)) {
        job_crashed(L, j, "clearing its status word", &ce);
        return;
    }
    if (!library && g->smem > 48 * 1024 &&
        CUDA_TRY(api, &ce, cuFuncSetAttribute, r->fn,
                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)g->smem)) {
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note, "%u bytes of shared memory refused: %.200s", g->smem,
                 ce.msg);
        return;
    }
    // A launch the driver refuses (too many registers or threads), or a call the library
    // refuses (an algorithm it does not support for these operands), leaves the context usable.
    if (launch(L, r, &args, &ce)) {
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note, "launch refused: %.220s", ce.msg);
        return;
    }
    if (CUDA_TRY(api, &ce, cuStreamSynchronize, L->stream)) {
        job_crashed(L, j, "on its first run", &ce);
        return;
    }
    double t_verify = now_s();
    L->split.first_s += t_verify - t_first;
    int status = 0;
    if (flag && CUDA_TRY(api, &ce, cuMemcpyDtoH, &status, flag, sizeof status)) {
        job_crashed(L, j, "downloading its status", &ce);
        return;
    }
    bool wrong = status != 0;
    if (wrong)
        snprintf(j->note, sizeof j->note,
                 "set its error status (%d) on operands the reference op accepts", status);
    j->max_err = 0;
    for (int o = 0; o < n_out && !wrong; o++) {
        if (!out_at[o])
            continue;
        const Tensor *T = pg->tensors[outs[o]];
        double err = 0;
        char why[256];
        if (CUDA_TRY(api, &ce, cuMemcpyDtoH, L->host_out, out_at[o], tensor_nbytes(T))) {
            job_crashed(L, j, "downloading its output", &ce);
            return;
        }
        wrong = !lab_outputs_agree_tol(T->dtype, tensor_numel(T), L->host_out, values[outs[o]],
                                       j->tol, &err, why, sizeof why);
        j->max_err = ORCH_MAX(j->max_err, err);
        if (wrong && n_out > 1)
            snprintf(j->note, sizeof j->note, "output %d: %.230s", o, why);
        else if (wrong)
            snprintf(j->note, sizeof j->note, "%s", why);
    }
    L->split.verify_s += now_s() - t_verify;
    if (wrong) {
        // A wrong kernel may have written outside its output: nothing left in the pool is
        // trusted after it. And an earlier one may have changed the inputs this one found there:
        // a kernel found wrong on reused inputs is checked again on fresh ones.
        L->n_resident = 0;
        if (reused && !checked_again) {
            checked_again = true;
            goto check;
        }
        j->status = LAB_WRONG;
        return;
    }

    // The session replays a library call inside a CUDA graph: one that cannot be captured (it
    // allocates or synchronises) is no config for it. It is timed as the session runs it, from
    // that graph: called from the host, a cuDNN call spends tens of µs of host time between its
    // kernels (more while NVRTC keeps the CPUs busy), which a spin ahead of it does not cover,
    // and which made the same convolution measure 9 µs in one compile and 81-162 µs in another.
    CUgraphExec one_call = NULL;
    if (library) {
        double t_capture = now_s();
        one_call = capture_batch(L, r, &args, 1);
        t_capture = now_s() - t_capture;
        L->split.capture_s += t_capture;
        if (t_capture > L->slowest_capture_s) {
            L->slowest_capture_s = t_capture;
            snprintf(L->slowest_capture, sizeof L->slowest_capture, "%s", j->cfg.desc);
        }
        if (!one_call) {
            j->status = LAB_BUILD_FAILED;
            snprintf(j->note, sizeof j->note,
                     "the library call cannot be captured in a CUDA graph");
            return;
        }
    }

    double t_timing = now_s();
    L->t_check += t_timing - t_enter;
    // Timing. Warm-up, then the shortest of three single launches estimates one (each queued
    // behind a spin, so the host's submission latency is not part of it).
    float ms = 0;
    bool ok = (one_call ? CUDA_TRY(api, &ce, cuGraphLaunch, one_call, L->stream)
                        : launch(L, r, &args, &ce)) == ST_OK;
    double one = INFINITY;
    for (int t = 0; t < 3 && ok; t++) {
        ok = spin(L, 20e-6, &ce) == ST_OK &&
             CUDA_TRY(api, &ce, cuEventRecord, L->ev[0], L->stream) == ST_OK &&
             (one_call ? CUDA_TRY(api, &ce, cuGraphLaunch, one_call, L->stream)
                       : launch(L, r, &args, &ce)) == ST_OK &&
             CUDA_TRY(api, &ce, cuEventRecord, L->ev[1], L->stream) == ST_OK &&
             CUDA_TRY(api, &ce, cuEventSynchronize, L->ev[1]) == ST_OK &&
             CUDA_TRY(api, &ce, cuEventElapsedTime, &ms, L->ev[0], L->ev[1]) == ST_OK;
        one = ORCH_MIN(one, ORCH_MAX(1e-3 * ms, 1e-7));
    }
    int samples = opt->max_reps > 0 ? ORCH_MIN(opt->max_reps, 1000) : 20;
    double per_sample = ORCH_MAX(100e-6, opt->min_time > 0 ? opt->min_time / samples : 0);
    bool flush = L->scratch && hw->l2_bytes > 0 && (int64_t)in_bytes > hw->l2_bytes / 2;
    int batch = flush ? 1 : (int)ORCH_MIN(10000.0, ORCH_MAX(1.0, ceil(per_sample / one)));
    // A batch replays as a CUDA graph, as the runtime session runs the plan: the per-kernel
    // overhead measured is the graph's, not that of launches from the host.
    CUgraphExec exec = ok && batch > 1 ? capture_batch(L, r, &args, batch) : NULL;
    if (exec)
        ok = CUDA_TRY(api, &ce, cuGraphLaunch, exec, L->stream) == ST_OK; // uploads the graph
    if (!exec && one_call && ok) { // a library call runs from its graph in every case
        exec = one_call;
        one_call = NULL;
        batch = 1; // where the batch could not be captured, one call a sample
    }
    double *times = xmalloc(sizeof(double) * (size_t)samples);
    for (int s = 0; s < samples && ok; s++) {
        // About 4 µs of host time per queued launch; the spin covers it so the device sees the
        // batch back to back.
        ok = spin(L, ORCH_MIN(5e-3, 20e-6 + (exec ? 0 : 4e-6 * batch)), &ce) == ST_OK;
        if (ok && flush)
            ok = CUDA_TRY(api, &ce, cuMemsetD8Async, L->scratch, (unsigned char)s, L->scratch_bytes,
                          L->stream) == ST_OK;
        ok = ok && CUDA_TRY(api, &ce, cuEventRecord, L->ev[0], L->stream) == ST_OK;
        if (exec)
            ok = ok && CUDA_TRY(api, &ce, cuGraphLaunch, exec, L->stream) == ST_OK;
        for (int b = 0; b < batch && ok && !exec; b++)
            ok = launch(L, r, &args, &ce) == ST_OK;
        ok = ok && CUDA_TRY(api, &ce, cuEventRecord, L->ev[1], L->stream) == ST_OK &&
             CUDA_TRY(api, &ce, cuEventSynchronize, L->ev[1]) == ST_OK &&
             CUDA_TRY(api, &ce, cuEventElapsedTime, &ms, L->ev[0], L->ev[1]) == ST_OK;
        times[s] = 1e-3 * ms / batch;
    }
    if (exec && ok)
        api->cuGraphExecDestroy(exec);
    if (one_call && ok)
        api->cuGraphExecDestroy(one_call);
    if (!ok) {
        free(times);
        job_crashed(L, j, "while being timed", &ce);
        return;
    }
    // The shared summary, so a spread means the same in every target's rows. The stability rule
    // is the CPU lab's: device timings behind a spin are not re-taken here.
    L->t_time += now_s() - t_timing;
    LabTiming tm;
    lab_summarise(times, samples, -1, 0, &tm);
    j->reps = samples * batch;
    j->min_s = tm.min_s;
    j->median_s = tm.median_s;
    j->spread = tm.spread;
    j->attempts = 1;
    j->status = LAB_OK;
    free(times);
}

// The pool every job's buffers are carved from: the largest job's inputs and output.
static size_t job_bytes(const PrimGraph *pg, const Candidate *c, size_t *in_bytes) {
    size_t off = 0;
    *in_bytes = 0;
    for (int i = 0; i < c->n_inputs; i++) {
        size_t t = tensor_nbytes(pg->tensors[c->inputs[i]]);
        *in_bytes += t;
        carve(&off, t);
    }
    const Prim *sink = pg->prims[c->prims[c->n_prims - 1]];
    if (ckernel_op_abi(sink)) { // every output and the status word (cugen.h)
        for (int o = 0; o < sink->n_out; o++)
            if (sink->out[o] >= 0)
                carve(&off, tensor_nbytes(pg->tensors[sink->out[o]]));
        carve(&off, sizeof(int));
    } else {
        carve(&off, tensor_nbytes(pg->tensors[c->output]));
    }
    return off;
}

// ---- the queue of jobs and the workers that measure them, one per device ----

// One entry of the queue, in the order the jobs are measured: the library calls first, then
// every unit's kernels, a unit that failed to build reported in its place (one kernel) or left to
// the pass over its kernels built one by one (several).
typedef enum { ITEM_LIBRARY, ITEM_KERNEL } ItemKind;
typedef struct Item {
    ItemKind kind;
    int job;
    const Unit *unit; // ITEM_KERNEL
} Item;

// What the workers share. qmu guards the queue, the stop flag and the error; mu the count of
// finished jobs and every call of the caller's callbacks (which write the profile database and
// the progress lines), so those see one job at a time, as with one device, and a worker taking
// its next job does not wait for another's database write.
typedef struct Shared {
    const PrimGraph *pg;
    const CandidateSet *cs;
    void **values;
    LabJob *jobs;
    const CudaLaunch *geo;
    const Item *items;
    Compiler *comp; // the units still being built (NULL: all are)
    LabQueue q;
    const LabOptions *opt; // the caller's
    LabOptions run_opt;    // the same, its before_run called under mu (measure's)
    pthread_mutex_t mu, qmu;
    int done, total;
    bool stop; // a kernel crashed its device's context: nobody takes another job
    Err err;   // the first crash's error
} Shared;

typedef struct Worker {
    Shared *sh;
    Lab L;
    const Unit *unit; // the unit whose module is loaded (mod), NULL for none
    CUmodule mod;
    pthread_t th;
    bool started;
} Worker;

static int locked_before_run(void *ctx, const LabJob *j) {
    Shared *sh = ctx;
    pthread_mutex_lock(&sh->mu);
    int r = sh->opt->before_run(sh->opt->ctx, j);
    pthread_mutex_unlock(&sh->mu);
    return r;
}

static void note_line(Shared *sh, const char *line) {
    pthread_mutex_lock(&sh->mu);
    if (sh->opt->on_note)
        sh->opt->on_note(sh->opt->ctx, line);
    pthread_mutex_unlock(&sh->mu);
}

// Reports a finished job; once a job crashed its device's context, stops every worker.
static void job_done(Worker *w, LabJob *j) {
    Shared *sh = w->sh;
    pthread_mutex_lock(&sh->mu);
    ++sh->done;
    if (sh->opt->on_result)
        sh->opt->on_result(sh->opt->ctx, j, sh->done, sh->total);
    pthread_mutex_unlock(&sh->mu);
    // A fault is sticky: the driver refuses every later call on that context in this process (a
    // released or reset primary context does not come back; seen on an H100, driver 580). The
    // caller's before_run marked the kernel pending and on_result recorded it, so a new process
    // skips it.
    pthread_mutex_lock(&sh->qmu);
    if (w->L.lost && !sh->stop) {
        sh->stop = true;
        err_set(&sh->err, ST_RUNTIME,
                "CUDA lab: the kernel of candidate %d (%s) crashed the context of GPU %d (%s); "
                "a CUDA context does not recover within a process, so the remaining "
                "kernels were not measured; run the command again (the crashed kernel "
                "is remembered and skipped)",
                j->cand, j->cfg.desc, w->L.hw->ordinal, j->note);
    }
    pthread_mutex_unlock(&sh->qmu);
}

// Measures one library call (a job whose emit gave a call descriptor).
static void run_library(Worker *w, LabJob *j, const CudaLaunch *g) {
    Shared *sh = w->sh;
    Lab *L = &w->L;
    BlasLtOp op;
    DnnOp dnn;
    memset(&op, 0, sizeof op);
    memset(&dnn, 0, sizeof dnn);
    Err ce = {0};
    // The handle before any capture (creating one is not capturable).
    bool ready = g->lib == CUDA_LIB_CUDNN
                     ? !(dnn_check_version(&g->dnn, &ce) || dnn_init(L->hw->ordinal, &ce) ||
                         cuda_device_bind(&L->dev, &ce) || dnn_op_create(&g->dnn, &dnn, &ce))
                     : !(blaslt_check_version(&g->blas, &ce) || blaslt_init(L->hw->ordinal, &ce) ||
                         cuda_device_bind(&L->dev, &ce) || blaslt_op_create(&g->blas, &op, &ce));
    if (!ready) {
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note, "%.250s", ce.msg);
    } else {
        Runner rn = {NULL, NULL, g->lib == CUDA_LIB_CUDNN ? NULL : &op,
                     g->lib == CUDA_LIB_CUDNN ? &dnn : NULL};
        measure(L, sh->pg, &sh->cs->c[j->cand], sh->values, &rn, j, &sh->run_opt);
    }
    blaslt_op_destroy(&op);
    dnn_op_destroy(&dnn);
}

// Measures one kernel of unit u, loading u's cubin on this worker's device first.
static void run_kernel(Worker *w, LabJob *j, const CudaLaunch *g, const Unit *u) {
    Shared *sh = w->sh;
    Lab *L = &w->L;
    const CudaApi *api = L->api;
    const Candidate *c = &sh->cs->c[j->cand];
    Err ce = {0};
    if (w->unit != u) { // the units come in order: the previous one is done on this worker
        if (w->mod)
            api->cuModuleUnload(w->mod);
        w->mod = NULL;
        w->unit = u;
    }
    double t_load = now_s();
    bool loaded = w->mod || CUDA_TRY(api, &ce, cuModuleLoadData, &w->mod, u->cubin) == ST_OK;
    L->split.load_s += now_s() - t_load;
    if (!loaded) {
        w->mod = NULL;
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note, "the cubin does not load: %.220s", ce.msg);
        return;
    }
    char name[64];
    lab_kernel_name(sh->pg, c, &j->cfg, name, sizeof name);
    CUfunction fn = NULL;
    if (CUDA_TRY(api, &ce, cuModuleGetFunction, &fn, w->mod, name)) {
        j->status = LAB_BUILD_FAILED;
        snprintf(j->note, sizeof j->note, "kernel %.40s missing from its program: %.150s", name,
                 ce.msg);
        return;
    }
    Runner rn = {fn, g, NULL, NULL};
    measure(L, sh->pg, c, sh->values, &rn, j, &sh->run_opt);
}

// Takes jobs from the queue until none is left for this worker or a crash stopped the lab.
static void work(Worker *w) {
    Shared *sh = w->sh;
    for (;;) {
        pthread_mutex_lock(&sh->qmu);
        int i = sh->stop ? -1 : lab_queue_take(&sh->q);
        pthread_mutex_unlock(&sh->qmu);
        if (i < 0)
            break;
        const Item *it = &sh->items[i];
        LabJob *j = &sh->jobs[it->job];
        if (it->kind == ITEM_KERNEL && sh->comp) {
            double t = now_s();
            compiler_wait(sh->comp, it->unit);
            w->L.split.build_wait_s += now_s() - t;
        }
        if (it->kind == ITEM_KERNEL && !it->unit->cubin && it->unit->count > 1)
            continue; // built again kernel by kernel to find the culprit, measured then
        if (it->kind == ITEM_KERNEL && !it->unit->cubin) {
            j->status = LAB_BUILD_FAILED;
            snprintf(j->note, sizeof j->note, "%.250s", it->unit->err.msg);
        } else {
            j->device = w->L.hw->ordinal;
            if (it->kind == ITEM_LIBRARY)
                run_library(w, j, &sh->geo[it->job]);
            else
                run_kernel(w, j, &sh->geo[it->job], it->unit);
        }
        job_done(w, j);
        if (w->L.lost)
            break;
    }
    // A lost context's module went with it.
    if (w->mod && !w->L.lost)
        w->L.api->cuModuleUnload(w->mod);
    w->mod = NULL;
    w->unit = NULL;
}

// Another device's worker: opens its device on its own thread (the primary context is current
// per thread), measures, closes. A device that cannot be set up (memory taken by another
// process) is left out with a note: the others take its share.
static void *worker_main(void *arg) {
    Worker *w = arg;
    Err e = {0};
    if (gpu_open(&w->L, &e) == ST_OK) {
        work(w);
    } else {
        char line[600];
        snprintf(line, sizeof line, "GPU %d left out of the measuring: %.500s", w->L.hw->ordinal,
                 e.msg);
        note_line(w->sh, line);
    }
    gpu_close(&w->L);
    return NULL;
}

// One line naming the programs that took NVRTC longest and the kernel classes in them (cfg
// "cls=NAME" counts): where a compile's building goes.
static void note_slowest_units(const Unit *units, int nu, const LabJob *jobs, const LabOptions *opt) {
    if (!opt->on_note || nu <= 0)
        return;
    double total = 0;
    for (int u = 0; u < nu; u++)
        total += units[u].build_s;
    char line[600];
    int len = snprintf(line, sizeof line, "NVRTC: %d programs, %.1f s of compiler time; longest:",
                       nu, total);
    bool *taken = xcalloc((size_t)nu, sizeof(bool));
    for (int k = 0; k < 3 && k < nu; k++) {
        int best = -1;
        for (int u = 0; u < nu; u++)
            if (!taken[u] && (best < 0 || units[u].build_s > units[best].build_s))
                best = u;
        taken[best] = true;
        const Unit *U = &units[best];
        len += snprintf(line + len, sizeof line - (size_t)ORCH_MIN(len, (int)sizeof line),
                        "%s %.1f s (%d kernels:", k ? ";" : "", U->build_s, U->count);
        // Classes in order of first appearance, with their counts.
        char cls[8][24];
        int cnt[8] = {0}, ncls = 0;
        for (int i = 0; i < U->count; i++) {
            const char *d = strstr(jobs[U->jobs[i]].cfg.desc, "cls=");
            char name[24] = "?";
            if (d)
                sscanf(d + 4, "%23[^ ]", name);
            int c = 0;
            while (c < ncls && strcmp(cls[c], name) != 0)
                c++;
            if (c == ncls && ncls < 8)
                snprintf(cls[ncls++], sizeof cls[0], "%s", name);
            if (c < ncls)
                cnt[c]++;
        }
        for (int c = 0; c < ncls && len < (int)sizeof line; c++)
            len += snprintf(line + len, sizeof line - (size_t)len, " %s x%d", cls[c], cnt[c]);
        if (len < (int)sizeof line)
            len += snprintf(line + len, sizeof line - (size_t)len, ")");
    }
    free(taken);
    opt->on_note(opt->ctx, line);
}

static void reset_jobs(LabJob *jobs, int n) {
    for (int i = 0; i < n; i++) {
        jobs[i].status = LAB_SKIPPED;
        jobs[i].note[0] = '\0';
        jobs[i].median_s = jobs[i].min_s = jobs[i].spread = jobs[i].max_err = 0;
        jobs[i].reps = jobs[i].attempts = 0;
        jobs[i].load = -1;
        jobs[i].unstable = false;
        jobs[i].device = -1;
    }
}

int cuda_lab_run(const PrimGraph *pg, const CandidateSet *cs, void **values, LabJob *jobs, int n,
                 const LabOptions *opt, const CudaHw *hw, const CudaEmitter *em, Err *e) {
    return cuda_lab_run_devices(pg, cs, values, jobs, n, opt, hw, NULL, 0, em, e);
}

int cuda_lab_run_devices(const PrimGraph *pg, const CandidateSet *cs, void **values, LabJob *jobs,
                         int n, const LabOptions *opt, const CudaHw *hw, const CudaHw *others,
                         int n_others, const CudaEmitter *em, Err *e) {
    reset_jobs(jobs, n);
    const CudaApi *api = cuda_api_load(e);
    if (!api)
        return e->code;
    int rc = nvrtc_load(e);
    if (rc)
        return rc;
    if (n == 0)
        return ST_OK;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = opt->jobs > 0 ? opt->jobs : (int)(cores > 0 ? cores : 1);
    int per = opt->per_unit > 0 ? opt->per_unit : lab_unit_size(n, threads, 32);

    size_t pool_bytes = 0, scratch_bytes = 0, ws_bytes = 0;
    bool any_flush = false;
    for (int i = 0; i < n; i++) {
        size_t in_bytes;
        pool_bytes = ORCH_MAX(pool_bytes, job_bytes(pg, &cs->c[jobs[i].cand], &in_bytes));
        any_flush = any_flush || (hw->l2_bytes > 0 && (int64_t)in_bytes > hw->l2_bytes / 2);
    }
    scratch_bytes = any_flush ? 2 * (size_t)hw->l2_bytes : 0;

    // Emit on this thread (emitters need not be thread-safe), compile on threads of their own.
    CudaLaunch *geo = xcalloc((size_t)n + 1, sizeof(CudaLaunch));
    int nu = (n + per - 1) / per;
    Unit *units = xcalloc((size_t)nu + 1, sizeof(Unit));
    int *idx = xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int u = 0; u < nu; u++)
        emit_unit(pg, cs, jobs, geo, idx + u * per, ORCH_MIN(per, n - u * per), hw, em, &units[u]);
    // Library calls (emitted, not compiled) and the workspace the largest needs.
    int *lib = xmalloc(sizeof(int) * (size_t)(n + 1)), nlib = 0;
    for (int i = 0; i < n; i++)
        if (geo[i].lib && jobs[i].status == LAB_SKIPPED) {
            lib[nlib++] = i;
            ws_bytes =
                ORCH_MAX(ws_bytes, (size_t)(geo[i].lib == CUDA_LIB_CUDNN ? geo[i].dnn.workspace
                                                                         : geo[i].blas.workspace));
        }
    Unit spin_unit = {.count = 1, .source = xstrdup(SPIN_SRC)};
    compile_one(&spin_unit, -1, hw->arch);
    // The programs build while the devices measure those already built; the measuring thread
    // keeps a core of its own, so a launch is not queued late behind the compilers.
    Compiler comp;
    compiler_start(&comp, units, nu, hw->arch, threads > 2 ? threads - 1 : threads);
    double t_measure = now_s();

    // The queue, in the order one device has always measured them.
    Item *items = xcalloc((size_t)n + 1, sizeof(Item));
    int ni = 0;
    for (int i = 0; i < nlib; i++)
        items[ni++] = (Item){ITEM_LIBRARY, lib[i], NULL};
    for (int u = 0; u < nu; u++)
        for (int i = 0; i < units[u].count; i++)
            items[ni++] = (Item){ITEM_KERNEL, units[u].jobs[i], &units[u]};
    Shared sh = {.pg = pg,
                 .cs = cs,
                 .values = values,
                 .jobs = jobs,
                 .geo = geo,
                 .items = items,
                 .comp = &comp,
                 .opt = opt,
                 .run_opt = *opt,
                 .total = n};
    sh.run_opt.before_run = opt->before_run ? locked_before_run : NULL;
    sh.run_opt.ctx = &sh;
    pthread_mutex_init(&sh.mu, NULL);
    pthread_mutex_init(&sh.qmu, NULL);
    lab_queue_init(&sh.q, ni);

    int nw = 1 + ORCH_MIN(ORCH_MAX(n_others, 0), ORCH_MAX(ni - 1, 0)); // no idle GPU set up
    Worker *w = xcalloc((size_t)nw, sizeof(Worker));
    for (int k = 0; k < nw; k++) {
        w[k].sh = &sh;
        w[k].L = (Lab){.api = api,
                       .hw = k == 0 ? hw : &others[k - 1],
                       .pool_bytes = pool_bytes,
                       .scratch_bytes = scratch_bytes,
                       .ws_bytes = ws_bytes};
    }
    if (!spin_unit.cubin) {
        rc = err_set(e, spin_unit.err.code ? spin_unit.err.code : ST_RUNTIME,
                     "CUDA lab: the timing helper does not compile: %s", spin_unit.err.msg);
    } else {
        for (int k = 0; k < nw; k++) {
            w[k].L.spin_cubin = spin_unit.cubin;
            w[k].L.spin_size = spin_unit.size;
        }
        // The target device's worker runs on this thread, set up before the others start: where
        // it cannot be, the lab fails as with one device.
        rc = gpu_open(&w[0].L, e);
    }
    if (rc == ST_OK) {
        for (int k = 1; k < nw; k++)
            w[k].started = pthread_create(&w[k].th, NULL, worker_main, &w[k]) == 0;
        for (int k = 1; k < nw; k++)
            if (!w[k].started) {
                char line[200];
                snprintf(line, sizeof line,
                         "GPU %d left out of the measuring: no thread could be started for it",
                         w[k].L.hw->ordinal);
                note_line(&sh, line);
            }
        work(&w[0]);
        for (int k = 1; k < nw; k++)
            if (w[k].started)
                pthread_join(w[k].th, NULL);
    }
    compiler_cancel(&comp); // where the measuring stopped early, nothing more to build
    double build_s = compiler_finish(&comp);
    note_slowest_units(units, nu, jobs, opt);
    if (opt->on_note && w[0].L.slowest_capture_s > 0.05) {
        char line[300];
        snprintf(line, sizeof line, "the longest capture of a library call: %.2f s (%s)",
                 w[0].L.slowest_capture_s, w[0].L.slowest_capture);
        opt->on_note(opt->ctx, line);
    }
    sh.comp = NULL;
    // A program that failed to build is split into single kernels to find the culprit; they are
    // measured on the target device alone (a generator bug, not the common case).
    // (A unit the cancel left unbuilt is not one of them.)
    int n_single = 0;
    for (int u = 0; u < nu; u++)
        if (units[u].built && !units[u].cubin && units[u].count > 1)
            n_single += units[u].count;
    Unit *single = xcalloc((size_t)n_single + 1, sizeof(Unit));
    int s = 0;
    for (int u = 0; u < nu; u++) {
        if (!units[u].built || units[u].cubin || units[u].count <= 1)
            continue;
        for (int i = 0; i < units[u].count; i++)
            emit_unit(pg, cs, jobs, geo, &units[u].jobs[i], 1, hw, em, &single[s++]);
        units[u].count = 0; // its jobs now belong to the single units
    }
    if (n_single > 0)
        build_s += compile_units(single, n_single, hw->arch, threads);
    if (rc == ST_OK && n_single > 0 && !sh.stop) {
        ni = 0;
        for (int u = 0; u < n_single; u++)
            for (int i = 0; i < single[u].count; i++)
                items[ni++] = (Item){ITEM_KERNEL, single[u].jobs[i], &single[u]};
        lab_queue_init(&sh.q, ni);
        work(&w[0]);
    }
    if (opt->build_s)
        *opt->build_s += build_s;
    if (rc == ST_OK) {
        if (sh.stop)
            rc = err_set(e, sh.err.code, "%s", sh.err.msg);
    }
    if (opt->measure_s)
        *opt->measure_s += now_s() - t_measure;
    for (int k = 0; k < nw; k++) {
        if (opt->check_s)
            *opt->check_s += w[k].L.t_check;
        if (opt->time_s)
            *opt->time_s += w[k].L.t_time;
        LabSplit *split = opt->split;
        if (split) {
            split->build_wait_s += w[k].L.split.build_wait_s;
            split->load_s += w[k].L.split.load_s;
            split->capture_s += w[k].L.split.capture_s;
            split->pending_s += w[k].L.split.pending_s;
            split->upload_s += w[k].L.split.upload_s;
            split->first_s += w[k].L.split.first_s;
            split->verify_s += w[k].L.split.verify_s;
            split->uploads += w[k].L.split.uploads;
            split->reused += w[k].L.split.reused;
        }
    }
    int done = sh.done;
    for (int i = 0; i < n && rc != ST_OK; i++)
        if (jobs[i].status == LAB_SKIPPED && !jobs[i].note[0])
            snprintf(jobs[i].note, sizeof jobs[i].note, "not run: the CUDA lab stopped early");
    // Jobs whose emit failed were never in a program: report them too.
    for (int i = 0; i < n && rc == ST_OK; i++)
        if (jobs[i].status == LAB_BUILD_FAILED && strncmp(jobs[i].note, "emit:", 5) == 0 &&
            opt->on_result)
            opt->on_result(opt->ctx, &jobs[i], ++done, n);
    gpu_close(&w[0].L);
    free(w);
    pthread_mutex_destroy(&sh.mu);
    pthread_mutex_destroy(&sh.qmu);
    for (int u = 0; u < nu; u++)
        free_unit(&units[u]);
    for (int u = 0; u < n_single; u++)
        free_unit(&single[u]);
    free_unit(&spin_unit);
    free(units);
    free(single);
    free(items);
    free(idx);
    free(lib);
    free(geo);
    return rc;
}

int cuda_lab_module_source(const PrimGraph *pg, const CandidateSet *cs, const int *cands,
                           const KernelConfig *cfgs, int n, const CudaHw *hw, const CudaEmitter *em,
                           char **src, CudaLaunchTable *table, Err *e) {
    *src = NULL;
    memset(table, 0, sizeof *table);
    if (n == 0)
        return ST_OK;
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, em->prelude);
    int rc = ST_OK;
    for (int i = 0; i < n && rc == ST_OK; i++) {
        const Candidate *c = &cs->c[cands[i]];
        char name[64];
        lab_kernel_name(pg, c, &cfgs[i], name, sizeof name);
        if (cuda_launch_table_find(table, name))
            continue; // two layers with one signature and config: one kernel
        CudaLaunch l;
        memset(&l, 0, sizeof l);
        rc = em->emit(pg, c, &cfgs[i], hw, &em->opt, name, &b, &l, e);
        if (rc)
            err_prefix(e, "emitting kernel %s (%s): ", name, cfgs[i].desc);
        else
            cuda_launch_table_set(table, name, &l);
    }
    if (rc == ST_OK)
        sb_puts(&b, SPIN_SRC); // for the session's profiled runs
    if (rc) {
        cuda_launch_table_free(table);
        sb_free(&b);
    } else {
        *src = sb_take(&b);
    }
    return rc;
}

int cuda_lab_build_module(const PrimGraph *pg, const CandidateSet *cs, const int *cands,
                          const KernelConfig *cfgs, int n, const CudaHw *hw, const CudaEmitter *em,
                          void **cubin, size_t *cubin_size, CudaLaunchTable *table, Err *e) {
    *cubin = NULL;
    *cubin_size = 0;
    char *src = NULL;
    int rc = cuda_lab_module_source(pg, cs, cands, cfgs, n, hw, em, &src, table, e);
    if (rc == ST_OK && src) {
        // The artefact's one program holds every chosen kernel (~200 for a CNN, 6 s in one
        // thread): NVRTC optimises its functions in parallel threads with --split-compile
        // (0: as many as cores); an NVRTC without the option compiles it serially.
        static const char *const split[] = {"--split-compile=0"};
        NvrtcOptions no = {.arch = hw->arch, .extra = split, .n_extra = 1};
        Err se = {0};
        rc = nvrtc_compile(src, "orch_kernels.cu", &no, cubin, cubin_size, &se);
        if (rc && strstr(se.msg, "split-compile")) {
            no.extra = NULL;
            no.n_extra = 0;
            rc = nvrtc_compile(src, "orch_kernels.cu", &no, cubin, cubin_size, e);
        } else if (rc) {
            *e = se;
        }
    }
    if (rc)
        cuda_launch_table_free(table);
    free(src);
    return rc;
}
