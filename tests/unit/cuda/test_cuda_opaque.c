// The CUDA target's operator kernels (src/backend/cuda/cugen_opq.h) on the one-operator models of
// opaque_cases.h (TopK, CumSum, Hardmax, Trilu, Gather by computed indices, GatherElements,
// ScatterElements, GatherND, ScatterND, OneHot, ReverseSequence, LpPool with p = 1 or 2 over
// float32 and the half types; other LpPools must be refused) and a
// few longer lines (TopK past its shared-memory buffer, with k small and k too large for the
// sort, long CumSums, an embedding lookup): every config of every case is emitted into a few
// NVRTC programs and compiled for sm_80 and sm_90a in parallel threads; the launch geometry must
// be one a device can run. Without NVRTC that part prints a skip line; ORCH_CUGEN_EMIT_ONLY=1
// emits without compiling and ORCH_CUGEN_SM90_ONLY=1 compiles for sm_90a alone (as make test
// sets them), but for a device's own arch.
// On a CUDA device the kernels also run on the interpreter's operands and must match its outputs
// bit for bit (every output; a NaN matches any NaN), leave a guard band after each output alone
// and leave the status word clear; with hostile indices (one past the end, below -dim,
// INT64_MAX/MIN at the first, a middle and the last position; CumSum's axis out of range, a
// sequence longer than the time axis) the status word must be set exactly where the reference
// op reports an error, with no fault. The lab must check every output of a TopK kernel, and a
// CUDA session must run a generated GatherElements from a plan and report a bad index with the
// reference op's own message. Without a device those parts print a skip line
// (ORCH_REQUIRE_GPU=1 makes them fail instead).
#include "../check.h"
#include "../opaque_cases.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_lab.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_opq.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/session_cuda.h"
#include "backend/kernel_lab.h"
#include "orchestrate/orchestrate.h"
#include "plan/plan.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static int n_kernels, n_runs, n_hostile, n_progs_failed, n_skipped;
static bool have_nvrtc, have_gpu;
static const CudaApi *api;
static CudaDevice dev;
static CudaHw g_hw;
static CudaLaunch launches[MAX_CASES][MAX_CFG];

// An H100 as cuda_hw_detect reads it (what the configs depend on), where there is no device.
static void hw_h100(CudaHw *h) {
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "H100 (model)");
    h->cc_major = 9;
    cuda_arch_name(9, 0, h->arch, sizeof h->arch);
    h->sm_count = 132;
    h->warp_size = 32;
    h->max_threads_per_block = 1024;
    h->max_threads_per_sm = 2048;
    h->regs_per_block = h->regs_per_sm = 65536;
    h->smem_per_block = 48 * 1024;
    h->smem_per_block_optin = 227 * 1024;
    h->smem_per_sm = 228 * 1024;
    h->l2_bytes = 50 << 20;
    h->clock_khz = 1755000;
    h->dram_bw = 3.35e12;
}

// Longer lines than the shared cases draw: TopK past the sort's buffer (k small: rounds above
// the bar; k too large for the sort: the rank kernel alone), long CumSums (an integer one
// through the block scan's carries), a GPT-2 sized embedding row.
static void long_cases(void) {
    const int64_t one = 1;
    struct {
        int64_t rows, len, k;
    } topk[] = {{3, 20011, 50}, {2, 5003, 4000}, {5, 4096, 4096}};
    for (size_t t = 0; t < ORCH_COUNT(topk); t++) {
        Case *c = new_case(17, "topk float32 [%lld, %lld] k %lld ties+nan", (long long)topk[t].rows,
                           (long long)topk[t].len, (long long)topk[t].k);
        const int64_t d[] = {topk[t].rows, topk[t].len};
        add_input(c, "x", DT_FLOAT, 2, d, F_DATA, 0, 0);
        add_const_i64(c, "k", 1, &one, &topk[t].k, 1);
        c->specials = true;
        mb_node(c->mb, "TopK", "topk", "x,k", "v,i", NULL);
        mb_output(c->mb, "v");
        mb_output(c->mb, "i");
    }
    Case *c = new_case(17, "topk int64 [2, 9001] k 17 smallest");
    const int64_t d2[] = {2, 9001}, k17 = 17;
    add_input(c, "x", DT_INT64, 2, d2, F_DATA, 0, 0);
    add_const_i64(c, "k", 1, &one, &k17, 1);
    c->specials = true;
    mb_node(c->mb, "TopK", "topk", "x,k", "v,i", mb_attr_i(c->mb, "largest", 0), NULL);
    mb_output(c->mb, "v");
    mb_output(c->mb, "i");

    c = new_case(17, "cumsum float32 [3, 7001] axis an input");
    const int64_t d3[] = {3, 7001};
    add_input(c, "x", DT_FLOAT, 2, d3, F_DATA, 0, 0);
    add_input(c, "a", DT_INT64, 0, d3, F_INDEX, -2, 2);
    c->hostile = 1;
    mb_node(c->mb, "CumSum", "cumsum", "x,a", "y", NULL);
    mb_output(c->mb, "y");

    c = new_case(17, "cumsum int64 [2, 3001] exclusive reverse axis an input");
    const int64_t d4[] = {2, 3001};
    add_input(c, "x", DT_INT64, 2, d4, F_DATA, 0, 0);
    add_input(c, "a", DT_INT32, 0, d4, F_INDEX, -2, 2);
    c->hostile = 1;
    mb_node(c->mb, "CumSum", "cumsum", "x,a", "y", mb_attr_i(c->mb, "exclusive", 1),
            mb_attr_i(c->mb, "reverse", 1), NULL);
    mb_output(c->mb, "y");

    c = new_case(17, "gather embedding [5003, 768] by [2, 9]");
    const int64_t xd[] = {5003, 768}, id[] = {2, 9};
    add_input(c, "x", DT_FLOAT, 2, xd, F_DATA, 0, 0);
    add_input(c, "i", DT_INT64, 2, id, F_INDEX, -5003, 5003);
    c->hostile = 1;
    mb_node(c->mb, "Gather", "gather", "x,i", "y", NULL);
    mb_output(c->mb, "y");
}

// An LpPool the CUDA target leaves to the reference op: p other than 1 and 2, or over double.
static bool lp_pool_refused(const Case *c) {
    OpqSpec s;
    return opq_analyse(c->pg, &c->cs->c[c->cand], &s, NULL, 0) && s.op == OPQ_LP_POOL &&
           (s.dt == DT_DOUBLE || (s.pool.p != 1 && s.pool.p != 2));
}

// The case prepared and the configs the CUDA target proposes (every one).
static void prepare(Case *c) {
    if (!opq_case_load(c))
        return;
    const Candidate *cd = &c->cs->c[c->cand];
    if (lp_pool_refused(c))
        return; // configs_and_refusals checks the refusal
    CHECK_MSG(cugen_opq_supports(c->pg, cd, &(TargetOptions){0}), "%s: refused by the CUDA target",
              c->name);
    TargetMachine m = {.target = &target_cuda};
    CHECK_MSG(target_cuda.supports(&m, c->pg, cd), "%s: target_cuda.supports refuses it", c->name);
    c->n_cfg = cugen_opq_configs(c->pg, cd, &g_hw, &(TargetOptions){0}, c->cfg, MAX_CFG);
    CHECK_MSG(c->n_cfg >= 1, "%s: %d configs", c->name, c->n_cfg);
    c->ok = c->n_cfg >= 1;
}

// ---- emission and compilation ----

#define CASES_PER_PROG 24
#define MAX_PROGS (MAX_CASES / CASES_PER_PROG + 1)
#define N_ARCH 3

typedef struct Job {
    int prog, arch;
    void *cubin;
    size_t size;
    int status;
    char msg[512];
} Job;

static char *progs[MAX_PROGS];
static int n_progs;
static const char *archs[N_ARCH];
static int n_archs, gpu_arch = -1;
static Job jobs[MAX_PROGS * N_ARCH];
static int n_jobs, next_job;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;

static void emit_all(void) {
    n_progs = (n_cases + CASES_PER_PROG - 1) / CASES_PER_PROG;
    for (int p = 0; p < n_progs; p++) {
        StrBuf src;
        sb_init(&src);
        sb_puts(&src, cugen_prelude());
        for (int i = p * CASES_PER_PROG; i < n_cases && i < (p + 1) * CASES_PER_PROG; i++) {
            Case *c = &cases[i];
            for (int k = 0; c->ok && k < c->n_cfg; k++) {
                snprintf(c->fn[k], sizeof c->fn[k], "opq_case%d_cfg%d", i, k);
                Err e = {0};
                CudaLaunch *l = &launches[i][k];
                int rc = cugen_opq_emit(c->pg, &c->cs->c[c->cand], &c->cfg[k], &g_hw,
                                        &(TargetOptions){0}, c->fn[k], &src, l, &e);
                CHECK_MSG(rc == ST_OK, "%s [%s]: emit: %s", c->name, c->cfg[k].desc, e.msg);
                unsigned threads = l->block[0] * l->block[1] * l->block[2];
                CHECK_MSG(rc || (l->grid[0] && l->grid[1] && l->grid[2] && threads >= 32 &&
                                 threads <= 1024 && l->smem <= 48 * 1024 && !l->lib),
                          "%s [%s]: an impossible launch: grid %ux%ux%u block %u", c->name,
                          c->cfg[k].desc, l->grid[0], l->grid[1], l->grid[2], threads);
                n_kernels++;
            }
        }
        progs[p] = sb_take(&src);
    }
}

static void *compile_worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&job_lock);
        int j = next_job < n_jobs ? next_job++ : -1;
        pthread_mutex_unlock(&job_lock);
        if (j < 0)
            return NULL;
        Job *jb = &jobs[j];
        char name[32];
        snprintf(name, sizeof name, "opq_test_%d.cu", jb->prog);
        NvrtcOptions opt = {.arch = archs[jb->arch]};
        Err e = {0};
        // make test: the sanitizer pass emits only (ORCH_CUGEN_EMIT_ONLY=1), the Release pass
        // compiles for the described H100 alone (ORCH_CUGEN_SM90_ONLY=1); a GPU's arch always.
        const char *emit_only = getenv("ORCH_CUGEN_EMIT_ONLY");
        const char *sm90 = getenv("ORCH_CUGEN_SM90_ONLY");
        bool skip = (emit_only && strcmp(emit_only, "0") != 0) ||
                    (sm90 && strcmp(sm90, "0") != 0 && strcmp(archs[jb->arch], "sm_90a") != 0);
        if (skip && jb->arch != gpu_arch) {
            jb->status = ST_OK;
            n_skipped++;
            continue;
        }
        jb->status = nvrtc_compile(progs[jb->prog], name, &opt, &jb->cubin, &jb->size, &e);
        snprintf(jb->msg, sizeof jb->msg, "%s", e.msg);
    }
}

static void compile_all(void) {
    n_jobs = n_progs * n_archs;
    for (int a = 0; a < n_archs; a++)
        for (int p = 0; p < n_progs; p++)
            jobs[a * n_progs + p] = (Job){.prog = p, .arch = a};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)ORCH_MIN(ORCH_MAX(cpus, 2), 16);
    pthread_t th[16];
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, compile_worker, NULL);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    for (int j = 0; j < n_jobs; j++) {
        CHECK_MSG(jobs[j].status == ST_OK, "program %d for %s: %.400s", jobs[j].prog,
                  archs[jobs[j].arch], jobs[j].msg);
        n_progs_failed += jobs[j].status != ST_OK;
    }
}

// ---- running on the device ----

#define GUARD 256

// The kernel's outputs as read back (malloc'd, NULL where absent) and its status word.
typedef struct Run {
    void *got[2];
    int status;
    bool guard_ok;
} Run;

// Launches kernel fn of case c on its operands (ins: the graph inputs; the rest the interpreter's
// values), outputs poisoned and followed by a guard band, the status word cleared.
static bool run_kernel(Case *c, CUfunction fn, const CudaLaunch *l, void *const *ins, Run *r) {
    const Candidate *cd = &c->cs->c[c->cand];
    const Prim *p = c->pg->prims[cd->prims[0]];
    memset(r, 0, sizeof *r);
    r->guard_ok = true;
    CUdeviceptr in[MAX_IN + 1] = {0}, out[2] = {0}, flag = 0;
    struct {
        CUdeviceptr in[ORCH_CUDA_MAX_IN];
        CUdeviceptr out;
    } args;
    memset(&args, 0, sizeof args);
    Err e = {0};
    bool ok = true;
    for (int i = 0; i < cd->n_inputs && ok; i++) {
        int t = cd->inputs[i];
        size_t b = tensor_nbytes(c->pg->tensors[t]);
        const void *src = c->values[t];
        for (int k = 0; k < c->n_in; k++)
            if (c->pg->inputs[k] == t)
                src = ins[k];
        ok = !CUDA_TRY(api, &e, cuMemAlloc, &in[i], b) &&
             !CUDA_TRY(api, &e, cuMemcpyHtoD, in[i], src, b);
        args.in[i] = in[i];
    }
    for (int j = 0; j < p->n_out && ok; j++)
        if (p->out[j] >= 0) {
            size_t b = tensor_nbytes(c->pg->tensors[p->out[j]]);
            ok = !CUDA_TRY(api, &e, cuMemAlloc, &out[j], b + GUARD) &&
                 !CUDA_TRY(api, &e, cuMemsetD8, out[j], 0xff, b) &&
                 !CUDA_TRY(api, &e, cuMemsetD8, out[j] + b, 0xa5, GUARD);
        }
    ok = ok && !CUDA_TRY(api, &e, cuMemAlloc, &flag, sizeof(int)) &&
         !CUDA_TRY(api, &e, cuMemsetD8, flag, 0, sizeof(int));
    args.out = out[0];
    args.in[cd->n_inputs] = out[1];
    args.in[cd->n_inputs + 1] = flag;
    void *params[] = {&args};
    ok = ok &&
         !CUDA_TRY(api, &e, cuLaunchKernel, fn, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                   l->block[1], l->block[2], l->smem, NULL, params, NULL) &&
         !CUDA_TRY(api, &e, cuCtxSynchronize) &&
         !CUDA_TRY(api, &e, cuMemcpyDtoH, &r->status, flag, sizeof(int));
    for (int j = 0; j < p->n_out && ok; j++)
        if (out[j]) {
            size_t b = tensor_nbytes(c->pg->tensors[p->out[j]]);
            unsigned char *g = xmalloc(b + GUARD);
            ok = !CUDA_TRY(api, &e, cuMemcpyDtoH, g, out[j], b + GUARD);
            for (size_t q = b; ok && q < b + GUARD; q++)
                r->guard_ok = r->guard_ok && g[q] == 0xa5;
            r->got[j] = g;
        }
    CHECK_MSG(ok, "%s: %s", c->name, e.msg);
    for (int i = 0; i < cd->n_inputs; i++)
        if (in[i])
            api->cuMemFree(in[i]);
    for (int j = 0; j < 2; j++)
        if (out[j])
            api->cuMemFree(out[j]);
    if (flag)
        api->cuMemFree(flag);
    return ok;
}

static void run_free(Run *r) {
    free(r->got[0]);
    free(r->got[1]);
}

// Bit for bit, but any NaN matches any NaN (the GPU's conversions give the canonical half NaN).
static bool same_output(Case *c, const char *cfg, int j, const void *got) {
    const Prim *p = c->pg->prims[c->cs->c[c->cand].prims[0]];
    const Tensor *T = c->pg->tensors[p->out[j]];
    const void *ref = c->values[p->out[j]];
    size_t es = dtype_size(T->dtype);
    for (int64_t i = 0; i < tensor_numel(T); i++) {
        if (!memcmp((const char *)got + i * (int64_t)es, (const char *)ref + i * (int64_t)es, es))
            continue;
        bool fl = dtype_is_float(T->dtype);
        double g = fl ? elem_get_f64(T->dtype, got, i) : (double)elem_get_i64(T->dtype, got, i);
        double r = fl ? elem_get_f64(T->dtype, ref, i) : (double)elem_get_i64(T->dtype, ref, i);
        if (fl && isnan(g) && isnan(r))
            continue;
        CHECK_MSG(false, "%s [%s]: output %d element %lld: got %.9g, the interpreter %.9g", c->name,
                  cfg, j, (long long)i, g, r);
        return false;
    }
    return true;
}

// The CUDA kernel of config k (ctx: the case's functions) on ins: its status word, or -1 where
// it did not run.
static int cuda_kernel_status(Case *c, int k, void *const *ins, void *ctx) {
    CUfunction *fns = ctx;
    Run r;
    if (!fns[k] || !run_kernel(c, fns[k], &launches[c - cases][k], ins, &r))
        return -1;
    run_free(&r);
    return r.status;
}

static void run_all(void) {
    Err e = {0};
    CUmodule mods[MAX_PROGS] = {0};
    // The lab and session cases before this one bind contexts of their own: this thread's
    // current context is the test's device again before its first driver call.
    if (cuda_device_bind(&dev, &e)) {
        CHECK_MSG(false, "%s", e.msg);
        return;
    }
    for (int p = 0; p < n_progs; p++) {
        const Job *jb = &jobs[gpu_arch * n_progs + p];
        if (jb->status == ST_OK && CUDA_TRY(api, &e, cuModuleLoadData, &mods[p], jb->cubin)) {
            CHECK_MSG(false, "program %d: %s", p, e.msg);
            mods[p] = NULL;
        }
    }
    for (int i = 0; i < n_cases; i++) {
        Case *c = &cases[i];
        CUmodule mod = mods[i / CASES_PER_PROG];
        if (!c->ok || !mod)
            continue;
        const Prim *p = c->pg->prims[c->cs->c[c->cand].prims[0]];
        CUfunction fns[MAX_CFG] = {0};
        for (int k = 0; k < c->n_cfg; k++) {
            bool found = !CUDA_TRY(api, &e, cuModuleGetFunction, &fns[k], mod, c->fn[k]);
            CHECK_MSG(found, "%s: kernel %s: %s", c->name, c->fn[k], e.msg);
            Run r;
            if (!found || !run_kernel(c, fns[k], &launches[i][k], c->in, &r)) {
                fns[k] = NULL;
                continue;
            }
            CHECK_MSG(r.status == 0, "%s [%s]: status %d", c->name, c->cfg[k].desc, r.status);
            CHECK_MSG(r.guard_ok, "%s [%s]: wrote past an output", c->name, c->cfg[k].desc);
            for (int j = 0; j < p->n_out; j++)
                if (r.got[j])
                    same_output(c, c->cfg[k].desc, j, r.got[j]);
            run_free(&r);
            n_runs++;
        }
        n_hostile += opq_hostile_runs(c, cuda_kernel_status, fns);
    }
    for (int p = 0; p < n_progs; p++)
        if (mods[p])
            api->cuModuleUnload(mods[p]);
}

// ---- the tests ----

static void kernels_against_interpreter(void) {
    opq_all_cases(true);
    long_cases();
    int prepared = 0, refused = 0;
    for (int i = 0; i < n_cases; i++) {
        prepare(&cases[i]);
        prepared += cases[i].ok;
        refused += cases[i].cs && cases[i].cand >= 0 && lp_pool_refused(&cases[i]);
    }
    CHECK(prepared + refused == n_cases);
    if (!have_nvrtc) {
        printf("  skip: NVRTC cannot be loaded: %d cases prepared, no kernel compiled\n", prepared);
        return;
    }
    emit_all();
    compile_all();
    printf("  %d cases, %d kernels in %d programs, %d compiles for %d archs (%d failed, %d left "
           "out by ORCH_CUGEN_EMIT_ONLY / ORCH_CUGEN_SM90_ONLY)\n",
           n_cases, n_kernels, n_progs, n_jobs - n_skipped, n_archs, n_progs_failed, n_skipped);
    if (!have_gpu) {
        printf("  skip: no CUDA device: nothing run\n");
        return;
    }
    run_all();
    printf("  %d runs compared bit for bit, %d hostile runs\n", n_runs, n_hostile);
}

// The configs' canonical layout, the algorithms each operator is offered, and what is refused.
static void configs_and_refusals(void) {
    KernelConfig k;
    cuopq_config_pack(&(CuOpqConfig){.alg = CUOPQ_SORT, .block = 512}, &k);
    CHECK(k.cls == CUCLS_OPAQUE && k.p[0] == CUOPQ_SORT && k.p[1] == 512 && k.p[2] == 0);
    CHECK_MSG(strcmp(k.desc, "cls=cuop alg=sort bs=512") == 0, "%s", k.desc);
    CuOpqConfig t;
    CHECK(cuopq_config_unpack(&k, &t) && t.alg == CUOPQ_SORT && t.block == 512);
    KernelConfig back;
    cuopq_config_pack(&t, &back);
    CHECK(!memcmp(back.p, k.p, sizeof k.p) && !strcmp(back.desc, k.desc));
    k.cls = CUCLS_POINTWISE;
    CHECK(!cuopq_config_unpack(&k, &t));

    // TopK: the sort where the k kept and a block of newcomers fit the buffer, the rank kernel
    // always; LpPool stays with the reference op.
    n_cases = 0;
    long_cases();
    opq_all_cases(true);
    for (int i = 0; i < n_cases; i++) {
        Case *c = &cases[i];
        if (!opq_case_load(c))
            continue;
        const Candidate *cd = &c->cs->c[c->cand];
        OpqSpec s;
        opq_analyse(c->pg, cd, &s, NULL, 0);
        bool sup = cugen_opq_supports(c->pg, cd, &(TargetOptions){0});
        if (s.op == OPQ_LP_POOL) {
            CHECK_MSG(sup == !lp_pool_refused(c), "%s: LpPool %s", c->name,
                      sup ? "accepted" : "refused");
            if (!sup)
                continue;
        }
        c->n_cfg = cugen_opq_configs(c->pg, cd, &g_hw, &(TargetOptions){0}, c->cfg, MAX_CFG);
        bool sort = false, rank = false;
        for (int q = 0; q < c->n_cfg; q++) {
            sort = sort || c->cfg[q].p[0] == CUOPQ_SORT;
            rank = rank || c->cfg[q].p[0] == CUOPQ_RANK;
        }
        if (s.op == OPQ_TOPK) {
            // The buffer: 32 KiB of 8- or 16-byte entries, the line's length rounded up to a
            // power of two at most; the block: half of it, 32 to 512 threads.
            int64_t cap = dtype_size(s.dt) == 8 ? 2048 : 4096, buf = 2;
            while (buf < s.x.len && buf < cap)
                buf *= 2;
            int64_t bs = ORCH_MIN(512, ORCH_MAX(32, buf / 2));
            bool fits = s.x.len <= buf || s.y.len + bs <= buf;
            CHECK_MSG(rank && sort == fits, "%s: sort %d rank %d", c->name, sort, rank);
        } else {
            CHECK_MSG(c->n_cfg >= 1 && !sort && !rank, "%s: %d configs", c->name, c->n_cfg);
        }
        // Integer CumSums get the block scan too (wrapping sums: any order is exact).
        bool scan = false;
        for (int q = 0; q < c->n_cfg; q++)
            scan = scan || c->cfg[q].p[0] == CUOPQ_SCAN;
        CHECK_MSG(scan == (s.op == OPQ_CUMSUM && !dtype_is_float(s.dt)), "%s: scan %d", c->name,
                  scan);
    }
    for (int i = 0; i < n_cases; i++)
        free_case(&cases[i]);
    n_cases = 0;
}

// The lab checks every output of an operator kernel: right values pass, a wrong index output is
// LAB_WRONG naming output 1 (a GPU only).
static void lab_checks_every_output(void) {
    if (!have_gpu) {
        printf("  skip: no CUDA device\n");
        return;
    }
    n_cases = 0;
    Case *c = new_case(17, "lab topk");
    const int64_t d[] = {4, 33}, one = 1, k = 5;
    add_input(c, "x", DT_FLOAT, 2, d, F_DATA, 0, 0);
    add_const_i64(c, "k", 1, &one, &k, 1);
    mb_node(c->mb, "TopK", "topk", "x,k", "v,i", NULL);
    mb_output(c->mb, "v");
    mb_output(c->mb, "i");
    prepare(c);
    TargetMachine m = {0};
    Err e = {0};
    if (c->ok)
        CHECK_MSG(target_open(&target_cuda, NULL, &m, &e) == ST_OK, "%s", e.msg);
    if (c->ok && m.model) {
        LabJob jobs2[2] = {{.cand = c->cand, .cfg = c->cfg[0]},
                           {.cand = c->cand, .cfg = c->cfg[c->n_cfg > 1]}};
        LabOptions lo = {.min_time = 1e-4, .max_reps = 2};
        CHECK_MSG(lab_run(&m, c->pg, c->cs, c->values, jobs2, 2, &lo, &e) == ST_OK, "%s", e.msg);
        for (int j = 0; j < 2; j++)
            CHECK_MSG(jobs2[j].status == LAB_OK, "[%s] %d: %s", jobs2[j].cfg.desc, jobs2[j].status,
                      jobs2[j].note);
        const Prim *p = c->pg->prims[c->cs->c[c->cand].prims[0]];
        int64_t *idx = c->values[p->out[1]];
        idx[3] ^= 1; // one wrong index in the reference
        LabJob bad = {.cand = c->cand, .cfg = c->cfg[0]};
        CHECK(lab_run(&m, c->pg, c->cs, c->values, &bad, 1, &lo, &e) == ST_OK);
        CHECK_MSG(bad.status == LAB_WRONG && strstr(bad.note, "output 1"), "%d: %s", bad.status,
                  bad.note);
        idx[3] ^= 1;
    }
    target_close(&m);
    free_case(c);
    n_cases = 0;
}

// A CUDA session runs a plan whose GatherElements is a generated operator kernel: right outputs
// (replayed from its CUDA graph), and an index out of range reported with the reference op's
// message, naming the launch (a GPU only).
static void session_reports_bad_index(void) {
    if (!have_gpu) {
        printf("  skip: no CUDA device\n");
        return;
    }
    n_cases = 0;
    Case *c = new_case(17, "session gather_elements");
    const int64_t xd[] = {6, 9}, id[] = {6, 4};
    add_input(c, "x", DT_FLOAT, 2, xd, F_DATA, 0, 0);
    add_input(c, "i", DT_INT64, 2, id, F_INDEX, -9, 9);
    mb_node(c->mb, "GatherElements", "gather", "x,i", "y", mb_attr_i(c->mb, "axis", 1), NULL);
    mb_output(c->mb, "y");
    prepare(c);
    if (!c->ok) {
        free_case(c);
        return;
    }
    Err e = {0};
    CudaEmitter em = {cugen_emit, cugen_prelude(), {0}};
    void *cubin = NULL;
    size_t cubin_size = 0;
    CudaLaunchTable table = {0};
    int rc = cuda_lab_build_module(c->pg, c->cs, &c->cand, &c->cfg[0], 1, &g_hw, &em, &cubin,
                                   &cubin_size, &table, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    char name[64];
    lab_kernel_name(c->pg, &c->cs->c[c->cand], &c->cfg[0], name, sizeof name);
    Selection sel = {0};
    OrchOptions oo = {0};
    if (rc == ST_OK)
        rc = orchestrate(c->cs, &oo, &sel, &e);
    PlanKernelSpec spec[8];
    for (int k = 0; rc == ST_OK && k < sel.n && k < 8; k++) {
        bool mine = sel.kernels[k] == c->cand;
        bool opaque = c->pg->prims[c->cs->c[sel.kernels[k]].prims[0]]->kind == PRIM_OPAQUE;
        spec[k] = (PlanKernelSpec){mine     ? PLAN_GENERATED
                                   : opaque ? PLAN_OPAQUE
                                            : PLAN_INTERP,
                                   mine ? name : NULL};
    }
    Plan *plan = NULL;
    if (rc == ST_OK)
        rc = plan_build(c->pg, c->cs, &sel, spec, &plan, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    CudaSession *s = NULL;
    if (rc == ST_OK)
        rc = cuda_session_create(c->pg, plan, cubin, cubin_size, &table, NULL, &s, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK) {
        CHECK(cuda_session_num_graphs(s) >= 1);
        float y[24];
        void *outs[1] = {y};
        for (int run = 0; run < 2 && rc == ST_OK; run++) {
            rc = cuda_session_run(s, (const void *const *)c->in, outs, &e);
            CHECK_MSG(rc == ST_OK, "%s", e.msg);
            CHECK(rc == ST_OK && memcmp(y, c->values[c->pg->outputs[0]], sizeof y) == 0);
        }
        ((int64_t *)c->in[1])[17] = 9;
        Err e2 = {0};
        rc = cuda_session_run(s, (const void *const *)c->in, outs, &e2);
        CHECK_MSG(rc == ST_INVALID && strstr(e2.msg, "index 9") && strstr(e2.msg, "out of range") &&
                      strstr(e2.msg, name),
                  "%d: %s", rc, e2.msg);
        // The status word is cleared by the next run: valid operands run again.
        ((int64_t *)c->in[1])[17] = 8;
        rc = cuda_session_run(s, (const void *const *)c->in, outs, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
    }
    cuda_session_free(s);
    plan_free(plan);
    selection_free(&sel);
    cuda_launch_table_free(&table);
    free(cubin);
    free_case(c);
    n_cases = 0;
}

int main(void) {
    const char *env = getenv("ORCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    Err e = {0};
    have_nvrtc = nvrtc_load(&e) == ST_OK;
    Err ge = {0};
    hw_h100(&g_hw);
    api = cuda_api_load(&ge);
    if (api && cuda_hw_detect(&g_hw, NULL, &ge) == ST_OK &&
        cuda_device_open(api, 0, &dev, &ge) == ST_OK)
        have_gpu = true;
    else
        hw_h100(&g_hw);
    const char *req = getenv("ORCH_REQUIRE_GPU");
    if (!have_gpu && req && strcmp(req, "0") != 0) {
        printf("  no CUDA device, and ORCH_REQUIRE_GPU is set: %s\n", ge.msg);
        return 1;
    }
    archs[n_archs++] = "sm_80";
    archs[n_archs++] = "sm_90a";
    if (have_gpu) {
        for (int a = 0; a < n_archs; a++)
            if (!strcmp(archs[a], g_hw.arch))
                gpu_arch = a;
        if (gpu_arch < 0) {
            gpu_arch = n_archs;
            archs[n_archs++] = g_hw.arch;
        }
    }
    RUN(configs_and_refusals);
    RUN(lab_checks_every_output);
    RUN(session_reports_bad_index);
    RUN(kernels_against_interpreter);
    for (int i = 0; i < n_cases; i++)
        free_case(&cases[i]);
    for (int p = 0; p < n_progs; p++)
        free(progs[p]);
    for (int j = 0; j < n_jobs; j++)
        free(jobs[j].cubin);
    if (have_gpu)
        cuda_device_close(&dev);
    return CHECK_DONE();
}
