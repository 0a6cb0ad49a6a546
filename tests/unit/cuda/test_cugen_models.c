// Compile-only test of the CUDA target on the generated test models (tests/models/gen_models.py's
// folder, argv[1]): every model is imported as the compile driver does (compile_import with
// args.txt's --input-shapes / --attention-rewrite, cand_enumerate with the default rules, one
// candidate per signature), and for every candidate the CUDA target supports (target_cuda's
// supports) configs from the hardware model of an A100 (sm_80: 108 SMs, 40 MiB L2, 164 KiB
// shared memory per SM, 163 KiB opt-in per block) and of an H100 (sm_90a: 132 SMs, 50 MiB L2,
// 228 / 227 KiB) are emitted into NVRTC programs of 32 kernels (cugen_prelude first, kernels
// named as the lab names them) and compiled for that architecture in parallel threads.
// Configs (pick_configs): pointwise/reduction candidates their best one; LINEAR candidates their
// best, the best of each other variant among their best 3, and (for the H100) their best TF32
// tensor-core one; operator kernels every config: every code path of the emitters, in about 2700
// kernels (~2 minutes on 2 cores).
// A kernel whose signature and config an earlier model already compiled is not compiled again.
// A program that fails is compiled again kernel by kernel; each failing kernel is reported with
// its model, candidate (id, primitives, ONNX nodes), architecture, config desc and the head of
// NVRTC's log. A launch geometry the device could not run (no blocks, more than 1024 threads,
// more shared memory than the opt-in limit) counts as a failure too.
// One line per model, "N passed, N failed" at the end. Without NVRTC, or without a models folder
// argument, it prints a skip line and passes; a folder that does not exist fails.
// Usage: unit_cugen_models [MODELS_DIR]. Environment: ORCH_CUGEN_MODELS_K=K: the best K configs
// of every candidate (and K TF32 ones) instead; ORCH_CUGEN_MODELS_FILTER: only models whose name
// contains it; ORCH_CUGEN_MODELS_VERBOSE: each program's kernels and NVRTC time.
#include "base/file.h"
#include "candidates/candidates.h"
#include "compile/compile.h"
#include "backend/kernel_lab.h"
#include "backend/cuda/cugen.h"
#include "backend/cuda/cugen_linear.h"
#include "backend/cuda/cugen_opq.h"
#include "backend/cuda/nvrtc.h"
#include "../check.h"
#include "../cuda_hw.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PER_PROG 32 // kernels per NVRTC program (as the lab)
#define MAX_CFG 16  // configs asked of the hardware model per candidate
#define N_HW 2

static CudaHw g_hw[N_HW];
// ORCH_CUGEN_SAMPLE=N (make test): NVRTC compiles every N-th kernel of each model (the first
// always); every kernel is still emitted and its launch geometry checked.
static int g_sample = 1;
static int g_sampled_out;
static bool g_sm90_only;            // ORCH_CUGEN_SM90_ONLY=1 (make test): the described H100 alone
static int g_k_lin = 3, g_k_pw = 1; // configs compiled per candidate (see pick_configs)
static bool g_all_k;                // ORCH_CUGEN_MODELS_K given: the best K of every kind
static int g_threads = 2;
static int g_total_kernels, g_total_failed;
static int g_row_cached; // row-cached reduction kernels compiled (emit_reduce_cuda.c)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- kernels and programs ----

typedef struct Kern {
    int cand;
    KernelConfig cfg;
    Precision prec;
    char fn[64];
    int line0, line1; // its lines in its program (1-based, inclusive)
} Kern;

typedef struct Prog {
    StrBuf src;
    int hw;     // index into g_hw
    int k0, nk; // kernels [k0, k0 + nk) of the model's list for this hw
    int lines;  // lines so far
    int rc;
    Err err;
    double secs;
} Prog;

typedef struct Pool {
    Prog *progs;
    int n, next;
    pthread_mutex_t mu;
} Pool;

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void *compile_worker(void *arg) {
    Pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            return NULL;
        Prog *pr = &p->progs[i];
        if (pr->nk == 0)
            continue;
        char name[48];
        snprintf(name, sizeof name, "orch_models_%d.cu", i);
        NvrtcOptions o = {.arch = g_hw[pr->hw].arch};
        void *cubin = NULL;
        size_t size = 0;
        double t0 = now();
        pr->rc = nvrtc_compile(pr->src.s, name, &o, &cubin, &size, &pr->err);
        pr->secs = now() - t0;
        if (pr->rc == ST_OK && (!cubin || size == 0))
            pr->rc = err_set(&pr->err, ST_RUNTIME, "NVRTC returned an empty cubin");
        free(cubin);
    }
}

static void compile_progs(Prog *progs, int n) {
    Pool p = {progs, n, 0, PTHREAD_MUTEX_INITIALIZER};
    int nt = ORCH_MAX(1, ORCH_MIN(g_threads, n));
    pthread_t th[64];
    bool started[64] = {0};
    for (int i = 1; i < nt && i < 64; i++)
        started[i] = pthread_create(&th[i], NULL, compile_worker, &p) == 0;
    compile_worker(&p);
    for (int i = 1; i < nt && i < 64; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.mu);
}

// ---- one model ----

// args.txt's compile flags: --input-shapes SPEC (malloc'd into *shapes) and --attention-rewrite.
static void read_args(const char *dir, char **shapes, bool *rewrite) {
    *shapes = NULL;
    *rewrite = false;
    char path[4200], text[8192];
    snprintf(path, sizeof path, "%s/args.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *hash = strchr(text, '#'); // comments say why tolerances are loosened
    if (hash)
        *hash = 0;
    *rewrite = strstr(text, "--attention-rewrite") != NULL;
    char *p = strstr(text, "--input-shapes");
    if (!p)
        return;
    p += strlen("--input-shapes");
    while (*p == ' ' || *p == '\t' || *p == '=')
        p++;
    size_t len = strcspn(p, " \t\r\n");
    *shapes = xmalloc(len + 1);
    memcpy(*shapes, p, len);
    (*shapes)[len] = 0;
}

static bool has_kind(const PrimGraph *pg, const Candidate *c, PrimKind k) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == k)
            return true;
    return false;
}

// A candidate named for a reader: its id, primitive count, kinds and ONNX origins (shortened).
static void cand_name(const PrimGraph *pg, const Candidate *c, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "candidate %d (%d prims:", c->id, c->n_prims);
    for (int i = 0; i < c->n_prims && at + 1 < n; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        at += (size_t)snprintf(buf + at, n - at, " %s[%.40s]", prim_kind_name(p->kind),
                               p->origin ? p->origin : "");
    }
    if (at + 2 < n)
        snprintf(buf + at, n - at, ")");
}

// Variant of a linear config: the "v=..." word of its desc (its emitter's code path).
static void variant(const char *desc, char *v, size_t n) {
    const char *p = strstr(desc, "v=");
    snprintf(v, n, "%.*s", p ? (int)strcspn(p, " ") : 0, p ? p : "");
}

// Configs of candidate c under precision prec for hw, best first. Pointwise and reduction
// candidates: the best g_k_pw. LINEAR candidates (about 0.3 s of NVRTC each, against 0.05 s):
// the best, and among the best g_k_lin the best of each other variant (simt / gemv / gemvk /
// dw: the emitters' code paths); TF32: the best tensor-core one, none when it offers none.
// Operator kernels (one OPAQUE primitive): every config (an algorithm each, at most two).
// ORCH_CUGEN_MODELS_K=K takes the best K of every kind instead. Returns how many.
static int pick_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, Precision prec,
                        KernelConfig *out) {
    KernelConfig all[MAX_CFG];
    const TargetOptions o = {.precision = prec};
    bool lin = has_kind(pg, c, PRIM_LINEAR), opq = has_kind(pg, c, PRIM_OPAQUE);
    int n = opq   ? cugen_opq_configs(pg, c, hw, &o, all, MAX_CFG)
            : lin ? cugen_lin_configs(pg, c, hw, &o, all, MAX_CFG)
                  : cugen_pw_configs(pg, c, hw, &o, all, MAX_CFG);
    int m = 0;
    if (prec == PREC_TF32) {
        for (int i = 0; i < n && m < (g_all_k ? g_k_lin : 1); i++)
            if (strstr(all[i].desc, "v=tf32"))
                out[m++] = all[i];
        return m;
    }
    for (int i = 0; i < n && i < (opq ? n : lin ? g_k_lin : g_k_pw); i++) {
        bool fresh = true;
        char vi[32], vj[32];
        variant(all[i].desc, vi, sizeof vi);
        for (int j = 0; j < m && fresh && lin && !g_all_k; j++) {
            variant(out[j].desc, vj, sizeof vj);
            fresh = strcmp(vi, vj) != 0;
        }
        if (fresh)
            out[m++] = all[i];
    }
    return m;
}

// Kernels already compiled for an arch (by lab name: signature and config), across models:
// models share layers, and an equal signature is an equal kernel.
typedef struct Seen {
    char (*names)[64];
    int n;
} Seen;
static Seen g_seen[N_HW];

static bool seen_add(int h, const char *fn) {
    Seen *s = &g_seen[h];
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], fn) == 0)
            return false;
    if (s->n % 256 == 0)
        s->names = xrealloc(s->names, sizeof *s->names * (size_t)(s->n + 256));
    snprintf(s->names[s->n++], 64, "%s", fn);
    return true;
}

typedef struct ModelResult {
    int distinct, supported, kernels[N_HW], failed[N_HW], tf32[N_HW], shared[N_HW];
    char first_failure[2048];
} ModelResult;

static void note_failure(ModelResult *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_failure(ModelResult *r, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("    %s\n", line);
    if (!r->first_failure[0])
        snprintf(r->first_failure, sizeof r->first_failure, "%s", line);
}

// The first lines of an NVRTC error, on one line each indented (at most `lines`).
static void log_head(const char *msg, char *buf, size_t n, int lines) {
    size_t at = 0;
    int l = 0;
    for (const char *s = msg; *s && at + 8 < n && l < lines; s++) {
        if (*s == '\n') {
            l++;
            if (l < lines && s[1]) {
                memcpy(buf + at, " | ", 3);
                at += 3;
            }
            continue;
        }
        buf[at++] = *s;
    }
    buf[at] = 0;
}

// Emits, checks and compiles every kernel of one model for every hw; fills r.
static int model_kernels(const char *name, const PrimGraph *pg, const CandidateSet *cs,
                         ModelResult *r) {
    // One candidate per signature, as the compile driver tunes them.
    int *rep = xmalloc(sizeof(int) * (size_t)(cs->n + 1));
    int nrep = 0;
    for (int i = 0; i < cs->n; i++) {
        bool seen = false;
        for (int j = 0; j < nrep && !seen; j++)
            seen = cs->c[rep[j]].signature == cs->c[i].signature;
        if (!seen)
            rep[nrep++] = i;
    }
    r->distinct = nrep;
    for (int i = 0; i < nrep; i++)
        r->supported += target_cuda.supports(&(TargetMachine){.target = &target_cuda}, pg, &cs->c[rep[i]]);

    Prog *progs = NULL;
    int np = 0;
    Kern *ks[N_HW] = {NULL};
    int nks[N_HW] = {0};
    for (int h = g_sm90_only ? N_HW - 1 : 0; h < N_HW; h++) {
        const CudaHw *hw = &g_hw[h];
        int seq = 0; // kernels of this model and arch (ORCH_CUGEN_SAMPLE)
        for (int i = 0; i < nrep; i++) {
            const Candidate *c = &cs->c[rep[i]];
            if (!target_cuda.supports(&(TargetMachine){.target = &target_cuda}, pg, c))
                continue;
            bool lin = has_kind(pg, c, PRIM_LINEAR);
            // The TF32 pass for the H100 only: the tensor-core code is the same for both archs
            // (unit_cugen_linear_compile compiles every tensor-core variant for both).
            for (int pass = 0; pass < (lin && h == N_HW - 1 ? 2 : 1); pass++) {
                Precision prec = pass ? PREC_TF32 : PREC_FP32;
                const TargetOptions o = {.precision = prec};
                KernelConfig cf[MAX_CFG];
                int n = pick_configs(pg, c, hw, prec, cf);
                char cn[512];
                if (n == 0 && pass == 0) {
                    cand_name(pg, c, cn, sizeof cn);
                    note_failure(r, "%s %s: %s: supported but the hardware model gives no config",
                                 name, hw->arch, cn);
                    r->failed[h]++;
                }
                for (int k = 0; k < n; k++) {
                    char fn[64];
                    lab_kernel_name(pg, c, &cf[k], fn, sizeof fn);
                    if (!seen_add(h, fn)) {
                        r->shared[h]++;
                        continue;
                    }
                    // ORCH_CUGEN_SAMPLE=N: the model's first kernel and every N-th after it go
                    // to NVRTC; the others are emitted and their geometry checked only.
                    if (g_sample > 1 && (seq++ % g_sample) != 0) {
                        StrBuf scratch;
                        sb_init(&scratch);
                        CudaLaunch ln;
                        memset(&ln, 0, sizeof ln);
                        Err e = {0};
                        int rc = cugen_emit(pg, c, &cf[k], hw, &o, fn, &scratch, &ln, &e);
                        sb_free(&scratch);
                        uint64_t threads = (uint64_t)ln.block[0] * ln.block[1] * ln.block[2];
                        if (rc || !ln.grid[0] || !ln.grid[1] || !ln.grid[2] || !threads ||
                            threads > (uint64_t)hw->max_threads_per_block ||
                            (int64_t)ln.smem > hw->smem_per_block_optin) {
                            cand_name(pg, c, cn, sizeof cn);
                            note_failure(r, "%s %s: %s config '%s': %s", name, hw->arch, cn,
                                         cf[k].desc, rc ? e.msg : "impossible launch geometry");
                            r->failed[h]++;
                        }
                        r->kernels[h]++;
                        r->tf32[h] += pass;
                        g_sampled_out++;
                        continue;
                    }
                    if (np == 0 || progs[np - 1].hw != h || progs[np - 1].nk >= PER_PROG) {
                        progs = xrealloc(progs, sizeof(Prog) * (size_t)(np + 1));
                        Prog *p = &progs[np++];
                        memset(p, 0, sizeof *p);
                        sb_init(&p->src);
                        sb_puts(&p->src, cugen_prelude());
                        p->hw = h;
                        p->k0 = nks[h];
                        p->lines = count_lines(p->src.s);
                    }
                    Prog *p = &progs[np - 1];
                    ks[h] = xrealloc(ks[h], sizeof(Kern) * (size_t)(nks[h] + 1));
                    Kern *kn = &ks[h][nks[h]];
                    memset(kn, 0, sizeof *kn);
                    kn->cand = rep[i];
                    kn->cfg = cf[k];
                    kn->prec = prec;
                    snprintf(kn->fn, sizeof kn->fn, "%s", fn);
                    kn->line0 = p->lines + 1;
                    size_t mark = p->src.len;
                    CudaLaunch ln;
                    memset(&ln, 0, sizeof ln);
                    Err e = {0};
                    int rc = cugen_emit(pg, c, &cf[k], hw, &o, kn->fn, &p->src, &ln, &e);
                    r->kernels[h]++;
                    r->tf32[h] += pass;
                    CuReduceConfig rq;
                    g_row_cached += !rc && cured_config_unpack(&cf[k], &rq) && rq.cache > 0;
                    if (rc) {
                        p->src.len = mark;
                        p->src.s[mark] = 0;
                        cand_name(pg, c, cn, sizeof cn);
                        note_failure(r, "%s %s: %s config '%s': emit failed: %s", name, hw->arch,
                                     cn, cf[k].desc, e.msg);
                        r->failed[h]++;
                        continue;
                    }
                    uint64_t threads = (uint64_t)ln.block[0] * ln.block[1] * ln.block[2];
                    if (!ln.grid[0] || !ln.grid[1] || !ln.grid[2] || !threads ||
                        threads > (uint64_t)hw->max_threads_per_block ||
                        (int64_t)ln.smem > hw->smem_per_block_optin) {
                        cand_name(pg, c, cn, sizeof cn);
                        note_failure(r,
                                     "%s %s: %s config '%s': impossible launch grid %ux%ux%u "
                                     "block %ux%ux%u smem %u",
                                     name, hw->arch, cn, cf[k].desc, ln.grid[0], ln.grid[1],
                                     ln.grid[2], ln.block[0], ln.block[1], ln.block[2], ln.smem);
                        r->failed[h]++;
                    }
                    p->lines = count_lines(p->src.s);
                    kn->line1 = p->lines;
                    nks[h]++;
                    p->nk++;
                }
            }
        }
    }
    compile_progs(progs, np);
    if (getenv("ORCH_CUGEN_MODELS_VERBOSE"))
        for (int i = 0; i < np; i++) {
            int lin = 0, tf = 0;
            for (int k = 0; k < progs[i].nk; k++) {
                const Kern *kn = &ks[progs[i].hw][progs[i].k0 + k];
                lin += kn->cfg.cls == CUCLS_MATMUL || kn->cfg.cls == CUCLS_CONV;
                tf += kn->prec == PREC_TF32;
            }
            printf("    program %d (%s): %d kernels (%d linear, %d tf32), %.2f s\n", i,
                   g_hw[progs[i].hw].arch, progs[i].nk, lin, tf, progs[i].secs);
        }

    // Failed programs: every kernel again on its own, to name each culprit.
    for (int i = 0; i < np; i++) {
        Prog *p = &progs[i];
        if (p->nk == 0 || p->rc == ST_OK)
            continue;
        int h = p->hw;
        Prog *single = xcalloc((size_t)p->nk, sizeof(Prog));
        for (int k = 0; k < p->nk; k++) {
            const Kern *kn = &ks[h][p->k0 + k];
            Prog *s = &single[k];
            sb_init(&s->src);
            sb_puts(&s->src, cugen_prelude());
            s->hw = h;
            s->nk = 1;
            CudaLaunch ln;
            Err e = {0};
            const TargetOptions o = {.precision = kn->prec};
            if (cugen_emit(pg, &cs->c[kn->cand], &kn->cfg, &g_hw[h], &o, kn->fn, &s->src, &ln, &e))
                s->nk = 0; // cannot happen: it emitted the first time
        }
        compile_progs(single, p->nk);
        int culprits = 0;
        for (int k = 0; k < p->nk; k++) {
            if (single[k].rc == ST_OK)
                continue;
            culprits++;
            const Kern *kn = &ks[h][p->k0 + k];
            char cn[512], head[1200];
            cand_name(pg, &cs->c[kn->cand], cn, sizeof cn);
            log_head(single[k].err.msg, head, sizeof head, 6);
            note_failure(r, "%s %s: %s config '%s' (kernel %s): %s", name, g_hw[h].arch, cn,
                         kn->cfg.desc, kn->fn, head);
            r->failed[h]++;
        }
        if (culprits == 0) { // only together: report the program's own log
            char head[1200];
            log_head(p->err.msg, head, sizeof head, 6);
            note_failure(r, "%s %s: program %d (%d kernels) fails, each kernel alone compiles: %s",
                         name, g_hw[h].arch, i, p->nk, head);
            r->failed[h] += p->nk;
        }
        for (int k = 0; k < p->nk; k++)
            sb_free(&single[k].src);
        free(single);
    }
    for (int i = 0; i < np; i++)
        sb_free(&progs[i].src);
    free(progs);
    for (int h = 0; h < N_HW; h++)
        free(ks[h]);
    free(rep);
    return ST_OK;
}

static void check_model(const char *root, const char *name) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    double t0 = now();
    ModelResult r;
    memset(&r, 0, sizeof r);
    Err e = {0};
    char *shapes;
    bool rewrite;
    read_args(dir, &shapes, &rewrite);
    uint8_t *bytes = NULL;
    size_t size = 0;
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    int rc = file_read_all(path, (int64_t)1 << 34, &bytes, &size, &e);
    if (rc == ST_OK) // external data next to the model (g_external)
        rc = compile_import(bytes, size, path, dir, shapes, rewrite, &g, &pg, &e);
    CandRules rules = cand_rules_default();
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &rules, 0, &cs, &e);
    if (rc == ST_OK)
        rc = model_kernels(name, pg, cs, &r);
    int kernels = 0, failed = 0;
    for (int h = 0; h < N_HW; h++) {
        kernels += r.kernels[h];
        failed += r.failed[h];
    }
    g_total_kernels += kernels;
    g_total_failed += failed;
    check_failed_case = rc != ST_OK || failed || kernels == 0;
    if (rc != ST_OK) {
        printf("FAIL %s: import or candidates: %s\n", name, e.msg);
        check_n_fail++;
    } else if (failed || kernels == 0) {
        printf("FAIL %s: %d of %d kernels failed (%d of %d distinct candidates supported)%s%s\n",
               name, failed, kernels, r.supported, r.distinct, failed ? "; first: " : "",
               failed ? r.first_failure : "; no kernel at all");
        check_n_fail++;
    } else {
        printf("ok   %s: %d of %d distinct candidates supported; kernels compiled / failed "
               "(tf32; already compiled for an earlier model): %s %d / %d (%d; %d), %s %d / %d "
               "(%d; %d) (%.1f s)\n",
               name, r.supported, r.distinct, g_hw[0].arch, r.kernels[0], r.failed[0], r.tf32[0],
               r.shared[0], g_hw[1].arch, r.kernels[1], r.failed[1], r.tf32[1], r.shared[1],
               now() - t0);
        check_n_pass++;
    }
    fflush(stdout);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    free(bytes);
    free(shapes);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    Err e = {0};
    if (argc < 2) {
        printf("skip: no models folder given (usage: unit_cugen_models MODELS_DIR, the output of "
               "tests/models/gen_models.py)\n");
        return CHECK_DONE();
    }
    if (nvrtc_load(&e) != ST_OK) {
        printf("skip: NVRTC unavailable (%s)\n", e.msg);
        return CHECK_DONE();
    }
    int maj, min;
    nvrtc_version(&maj, &min);
    g_sm90_only =
        getenv("ORCH_CUGEN_SM90_ONLY") && strcmp(getenv("ORCH_CUGEN_SM90_ONLY"), "0") != 0;
    g_sample = getenv("ORCH_CUGEN_SAMPLE") ? ORCH_MAX(1, atoi(getenv("ORCH_CUGEN_SAMPLE"))) : 1;
    const char *kenv = getenv("ORCH_CUGEN_MODELS_K");
    if (kenv && atoi(kenv) > 0)
        g_k_lin = g_k_pw = ORCH_MIN(atoi(kenv), MAX_CFG), g_all_k = true;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    g_threads = (int)ORCH_MIN(ORCH_MAX(cores, 1), 64);
    // An A100 / H100 as cuda_hw_detect would read it (the numbers configs depend on).
    cuda_hw_described(&g_hw[0], "A100-SXM4-80GB (model)", 80, 108, 164 << 10, 40 << 20, 1410000,
                      2.039e12, 2048);
    cuda_hw_described(&g_hw[1], "H100 SXM5 (model)", 90, 132, 228 << 10, 50 << 20, 1980000, 3.35e12,
                      2048);
    for (int h = 0; h < N_HW; h++)
        if (!nvrtc_supports_cc(g_hw[h].cc_major * 10 + g_hw[h].cc_minor)) {
            printf("skip: NVRTC %d.%d cannot generate code for %s\n", maj, min, g_hw[h].arch);
            return CHECK_DONE();
        }
    if (g_all_k)
        printf("NVRTC %d.%d (%s); %s and %s; configs per candidate: the best %d (and as many tf32 "
               "for LINEAR ones); %d kernels per program, %d threads\n",
               maj, min, nvrtc_path(), g_hw[0].arch, g_hw[1].arch, g_k_pw, PER_PROG, g_threads);
    else
        printf("NVRTC %d.%d (%s); %s and %s; configs per candidate: LINEAR ones the best, the best "
               "of each other variant among the best %d, and the best tf32; the others the best "
               "%d; %d kernels per program, %d threads\n",
               maj, min, nvrtc_path(), g_hw[0].arch, g_hw[1].arch, g_k_lin, g_k_pw, PER_PROG,
               g_threads);
    const char *root = argv[1];
    DIR *d = opendir(root);
    if (!d) {
        printf("FAIL models: cannot open %s (run tests/models/gen_models.py first)\n", root);
        check_n_fail++;
        return CHECK_DONE();
    }
    const char *filter = getenv("ORCH_CUGEN_MODELS_FILTER");
    char **names = NULL;
    int nn = 0;
    for (struct dirent *de; (de = readdir(d));) {
        char p[4400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s/model.onnx", root, de->d_name);
        if (de->d_name[0] == '.' || stat(p, &st) != 0 || (filter && !strstr(de->d_name, filter)))
            continue;
        names = xrealloc(names, sizeof(char *) * (size_t)(nn + 1));
        names[nn++] = xstrdup(de->d_name);
    }
    closedir(d);
    if (nn == 0) {
        printf("FAIL models: no DIR/*/model.onnx in %s\n", root);
        check_n_fail++;
    }
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    double t0 = now();
    for (int i = 0; i < nn; i++) {
        check_model(root, names[i]);
        free(names[i]);
    }
    free(names);
    printf("models: %d kernels compiled for %s and %s (%d row-cached reductions), %d failed, in "
           "%.1f s\n",
           g_total_kernels, g_hw[0].arch, g_hw[1].arch, g_row_cached, g_total_failed, now() - t0);
    if (g_sampled_out)
        printf("  of which %d emitted only: NVRTC compiled one kernel in %d of each model "
               "(ORCH_CUGEN_SAMPLE)\n",
               g_sampled_out, g_sample);
    return CHECK_DONE();
}
