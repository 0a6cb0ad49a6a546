// The C target's operator kernels (src/backend/cpu/cgen_opaque.h) against the primitive
// interpreter (the reference ops): one-operator ONNX models (TopK, CumSum, Hardmax, Trilu, Gather
// by computed indices, GatherElements, ScatterElements, GatherND, ScatterND, OneHot,
// ReverseSequence, LpPool) on random
// shapes (1, primes), every dtype the kernels take, every attribute, with ties, NaN, -0 and
// infinities in the data, k = 1 and k = n, negative and repeated indices; every config of
// every case compiled into one unit and run on buffers that end at a guard page, and compared
// bit for bit with the interpreter's outputs (every output: TopK's values and indices).
// Hostile operands (an index one past the end, below -dim, INT64_MAX/MIN; CumSum's axis out of
// range; a sequence longer than the time axis) must give CKERNEL_ERR_INDEX where the reference
// op reports an error, with no access outside the buffers. Also: the lab checks each output of
// a multi-output kernel (a wrong index output is LAB_WRONG), and a CPU session runs an operator
// kernel from a plan (which reads back from its bytes) and reports a bad index with the reference
// op's own message.
#include "../check.h"
#include "../model_builder.h"
#include "../opaque_cases.h"
#include "backend/cpu/cbuild.h"
#include "backend/cpu/cgen.h"
#include "backend/cpu/cgen_opaque.h"
#include "backend/cpu/session_cpu.h"
#include "backend/kernel_lab.h"
#include "candidates/candidates.h"
#include "fission/fission.h"
#include "interp/prim_interp.h"
#include "onnx/load.h"
#include "ops/fold.h"
#include "orchestrate/orchestrate.h"
#include "passes/passes.h"
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

// ---- guarded buffers: each ends exactly at a page the process may not touch ----

typedef struct Guarded {
    void *base;
    size_t len;
} Guarded;

static void *guarded(Guarded *g, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), data = (bytes + page - 1) / page * page;
    g->len = data + 2 * page;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ORCH_ASSERT(g->base != MAP_FAILED);
    mprotect(g->base, page, PROT_NONE);
    mprotect((char *)g->base + page + data, page, PROT_NONE);
    return (char *)g->base + page + data - bytes;
}

static void unguard(Guarded *g) {
    if (g->base)
        munmap(g->base, g->len);
    g->base = NULL;
}

// The case prepared (opq_case_load) and the configs the C target proposes (every one).
static void prepare(Case *c) {
    if (!opq_case_load(c))
        return;
    const Candidate *cd = &c->cs->c[c->cand];
    CHECK_MSG(cgen_opq_supports(c->pg, cd), "%s: refused by the C target", c->name);
    HwInfo hw = {.cores = 2, .simd_bytes = 32, .fma = true, .l1d = 32768, .l2 = 1 << 20};
    c->n_cfg = cgen_opq_configs(c->pg, cd, &hw, c->cfg, MAX_CFG);
    CHECK_MSG(c->n_cfg >= 2, "%s: %d configs", c->name, c->n_cfg);
    c->ok = true;
}

static int n_kernels, n_runs, n_hostile;

// ---- running kernels ----

// Runs fn on the case's inputs (ins: graph input buffers; others from the values) in guarded
// buffers; outputs are copied into got[] (malloc'd, NULL where absent). Returns the status.
static int run_kernel(Case *c, COpKernelFn fn, void *const *ins, void **got) {
    const Candidate *cd = &c->cs->c[c->cand];
    const Prim *p = c->pg->prims[cd->prims[0]];
    Guarded gi[8] = {{0}}, go[2] = {{0}};
    const void *in[8] = {0};
    void *out[2] = {0};
    for (int i = 0; i < cd->n_inputs; i++) {
        int t = cd->inputs[i];
        size_t b = tensor_nbytes(c->pg->tensors[t]);
        const void *src = c->values[t];
        for (int k = 0; k < c->n_in; k++)
            if (c->pg->inputs[k] == t)
                src = ins[k];
        void *d = guarded(&gi[i], b);
        memcpy(d, src, b);
        in[i] = d;
    }
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] >= 0) {
            size_t b = tensor_nbytes(c->pg->tensors[p->out[j]]);
            out[j] = guarded(&go[j], b);
            memset(out[j], 0xff, b); // poison: NaN for floats, -1 for integers
        }
    int st = fn(in, out);
    for (int j = 0; j < p->n_out; j++) {
        got[j] = NULL;
        if (out[j]) {
            size_t b = tensor_nbytes(c->pg->tensors[p->out[j]]);
            got[j] = xmalloc(b + 1);
            memcpy(got[j], out[j], b);
        }
        unguard(&go[j]);
    }
    for (int i = 0; i < cd->n_inputs; i++)
        unguard(&gi[i]);
    return st;
}

// Bit-for-bit comparison of output j with the interpreter's, but for NaNs: any NaN matches any
// NaN (which operand's NaN a product propagates, and so its sign, depends on the order of the
// operands, which neither the ONNX operators nor IEEE 754 fix); a message names the first
// element that differs.
static bool same_output(Case *c, const char *cfg, int j, const void *got) {
    const Prim *p = c->pg->prims[c->cs->c[c->cand].prims[0]];
    const Tensor *T = c->pg->tensors[p->out[j]];
    const void *ref = c->values[p->out[j]];
    size_t es = dtype_size(T->dtype);
    for (int64_t i = 0; i < tensor_numel(T); i++)
        if (memcmp((const char *)got + i * (int64_t)es, (const char *)ref + i * (int64_t)es, es) !=
            0) {
            double g = dtype_is_float(T->dtype) ? elem_get_f64(T->dtype, got, i)
                                                : (double)elem_get_i64(T->dtype, got, i);
            double r = dtype_is_float(T->dtype) ? elem_get_f64(T->dtype, ref, i)
                                                : (double)elem_get_i64(T->dtype, ref, i);
            if (dtype_is_float(T->dtype) && isnan(g) && isnan(r))
                continue;
            CHECK_MSG(false, "%s [%s]: output %d element %lld: got %.9g, the interpreter %.9g",
                      c->name, cfg, j, (long long)i, g, r);
            return false;
        }
    return true;
}

// The C kernel of config k in module ctx on ins: its return value.
static int c_kernel_status(Case *c, int k, void *const *ins, void *ctx) {
    COpKernelFn fn;
    void *sym = cmodule_sym((CModule *)ctx, c->fn[k]);
    memcpy(&fn, &sym, sizeof sym);
    void *got[2] = {0};
    int st = run_kernel(c, fn, ins, got);
    free(got[0]);
    free(got[1]);
    return st;
}

// Emits every config of every prepared case into units of a few cases each, builds them in
// parallel, runs and compares.
#define CASES_PER_UNIT 16
static void run_cases(void) {
    int nu = (n_cases + CASES_PER_UNIT - 1) / CASES_PER_UNIT;
    char **srcs = xcalloc((size_t)nu + 1, sizeof(char *));
    for (int u = 0; u < nu; u++) {
        StrBuf src;
        sb_init(&src);
        sb_puts(&src, cgen_prelude());
        for (int i = u * CASES_PER_UNIT; i < n_cases && i < (u + 1) * CASES_PER_UNIT; i++) {
            Case *c = &cases[i];
            for (int k = 0; c->ok && k < c->n_cfg; k++) {
                snprintf(c->fn[k], sizeof c->fn[k], "opq_case%d_cfg%d", i, k);
                Err e = {0};
                int rc = cgen_opq_emit(c->pg, &c->cs->c[c->cand], &c->cfg[k], c->fn[k], &src, &e);
                CHECK_MSG(rc == ST_OK, "%s [%s]: emit: %s", c->name, c->cfg[k].desc, e.msg);
                n_kernels++;
            }
        }
        srcs[u] = sb_take(&src);
    }
    CModule **mods = xcalloc((size_t)nu + 1, sizeof(CModule *));
    int *st = xcalloc((size_t)nu + 1, sizeof(int));
    char **msgs = xcalloc((size_t)nu + 1, sizeof(char *));
    Err e = {0};
    int rc = cbuild_modules((const char *const *)srcs, nu, NULL, 0, mods, st, msgs, &e);
    CHECK_MSG(rc == ST_OK, "build: %s", e.msg);
    for (int u = 0; u < nu; u++)
        CHECK_MSG(mods[u], "unit %d: %s", u, msgs[u] ? msgs[u] : "?");
    for (int i = 0; rc == ST_OK && i < n_cases; i++) {
        Case *c = &cases[i];
        CModule *mod = mods[i / CASES_PER_UNIT];
        const Prim *p = c->ok ? c->pg->prims[c->cs->c[c->cand].prims[0]] : NULL;
        for (int k = 0; mod && c->ok && k < c->n_cfg; k++) {
            void *sym = cmodule_sym(mod, c->fn[k]);
            CHECK_MSG(sym, "%s: symbol %s missing", c->name, c->fn[k]);
            if (!sym)
                continue;
            COpKernelFn fn;
            memcpy(&fn, &sym, sizeof sym);
            void *got[2] = {0};
            int status = run_kernel(c, fn, c->in, got);
            CHECK_MSG(status == CKERNEL_OK, "%s [%s]: status %d", c->name, c->cfg[k].desc, status);
            for (int j = 0; status == CKERNEL_OK && j < p->n_out; j++)
                if (got[j])
                    same_output(c, c->cfg[k].desc, j, got[j]);
            free(got[0]);
            free(got[1]);
            n_runs++;
        }
        if (mod && c->ok)
            n_hostile += opq_hostile_runs(c, c_kernel_status, mod);
    }
    for (int u = 0; u < nu; u++) {
        cmodule_free(mods[u]);
        free(msgs[u]);
        free(srcs[u]);
    }
    free(mods);
    free(st);
    free(msgs);
    free(srcs);
}

// ---- the tests ----

static void kernels_against_interpreter(void) {
    opq_all_cases(true);
    int prepared = 0;
    for (int i = 0; i < n_cases; i++) {
        prepare(&cases[i]);
        prepared += cases[i].ok;
    }
    run_cases();
    printf("  %d cases (%d prepared), %d kernels, %d runs compared bit for bit, %d hostile runs\n",
           n_cases, prepared, n_kernels, n_runs, n_hostile);
    CHECK(prepared == n_cases);
}

// The configs every operator kernel offers and their canonical layout.
static void config_layout(void) {
    KernelConfig k;
    cgen_opq_config_pack(&(COpqConfig){.alg = COPQ_ALG_SELECT, .par = true}, &k);
    CHECK(k.cls == CCLS_OPAQUE && k.p[0] == 1 && k.p[1] == 1);
    CHECK_MSG(strcmp(k.desc, "cls=op alg=select par=1") == 0, "%s", k.desc);
    cgen_opq_config_pack(&(COpqConfig){.alg = COPQ_ALG_PLAIN, .par = false}, &k);
    CHECK_MSG(strcmp(k.desc, "cls=op alg=plain par=0") == 0, "%s", k.desc);
    COpqConfig t;
    cgen_opq_config_unpack(&k, &t);
    CHECK(t.alg == COPQ_ALG_PLAIN && !t.par);
}

// Operators or operands the kernels leave to the reference op: refused by supports, cleanly.
static void refusals(void) {
    struct {
        const char *op;
        DType dt;
    } refused[] = {{"TopK", DT_BOOL}, {"OneHot", DT_FLOAT}};
    for (size_t r = 0; r < ORCH_COUNT(refused); r++) {
        Case *c = &cases[0];
        memset(c, 0, sizeof *c);
        c->mb = mb_new(17);
        const int64_t d[] = {3, 5}, one = 1, k = 2;
        mb_input(c->mb, "x", (int)refused[r].dt, 2, d);
        if (strcmp(refused[r].op, "TopK") == 0) {
            add_const_i64(c, "k", 1, &one, &k, 1);
            mb_node(c->mb, "TopK", "n", "x,k", "v,i", NULL);
            mb_output(c->mb, "v");
        } else { // float indices
            const int64_t two = 2;
            const float vals[2] = {0, 1};
            add_const_i64(c, "depth", 1, &one, &k, 1);
            mb_init(c->mb, mb_raw(c->mb, "vals", DT_FLOAT, 1, &two, vals, sizeof vals));
            mb_node(c->mb, "OneHot", "n", "x,depth,vals", "v", NULL);
            mb_output(c->mb, "v");
        }
        size_t len;
        uint8_t *buf = mb_pack(c->mb, &len);
        Err e = {0};
        int rc = onnx_load_memory(buf, len, "refusal", NULL, NULL, &c->g, &e);
        free(buf);
        if (rc == ST_OK)
            rc = graph_infer_and_fold(c->g, NULL, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        if (rc == ST_OK) {
            FissionStats st = {0};
            CHECK(fission_run(c->g, NULL, &c->pg, &st, &e) == ST_OK);
            CHECK(cand_enumerate(c->pg, NULL, 0, &c->cs, &e) == ST_OK);
            for (int i = 0; c->cs && i < c->cs->n; i++) {
                const Candidate *cd = &c->cs->c[i];
                char why[160];
                OpqSpec s;
                bool ok = opq_analyse(c->pg, cd, &s, why, sizeof why);
                CHECK_MSG(!ok && !cgen_opq_supports(c->pg, cd), "%s over %s accepted",
                          refused[r].op, dtype_name(refused[r].dt));
                CHECK(why[0] != '\0');
            }
        }
        free_case(c);
    }
}

// The lab checks every output of an operator kernel: right values pass, a wrong index output is
// LAB_WRONG naming output 1.
static void lab_checks_every_output(void) {
    n_cases = 0;
    Case *c = new_case(17, "lab topk");
    const int64_t d[] = {4, 33}, one = 1, k = 5;
    add_input(c, "x", DT_FLOAT, 2, d, F_DATA, 0, 0);
    add_const_i64(c, "k", 1, &one, &k, 1);
    mb_node(c->mb, "TopK", "topk", "x,k", "v,i", NULL);
    mb_output(c->mb, "v");
    mb_output(c->mb, "i");
    prepare(c);
    if (!c->ok) {
        free_case(c);
        return;
    }
    TargetMachine m = {0};
    Err e = {0};
    CHECK_MSG(target_open(&target_cpu, NULL, &m, &e) == ST_OK, "%s", e.msg);
    LabJob jobs[2] = {{.cand = c->cand, .cfg = c->cfg[0]}, {.cand = c->cand, .cfg = c->cfg[1]}};
    LabOptions lo = {.min_time = 0.001, .max_reps = 3};
    CHECK_MSG(lab_run(&m, c->pg, c->cs, c->values, jobs, 2, &lo, &e) == ST_OK, "%s", e.msg);
    for (int j = 0; j < 2; j++)
        CHECK_MSG(jobs[j].status == LAB_OK, "[%s] %d: %s", jobs[j].cfg.desc, jobs[j].status,
                  jobs[j].note);
    const Prim *p = c->pg->prims[c->cs->c[c->cand].prims[0]];
    int64_t *idx = c->values[p->out[1]];
    idx[3] ^= 1; // one wrong index in the reference
    LabJob bad = {.cand = c->cand, .cfg = c->cfg[0]};
    CHECK(lab_run(&m, c->pg, c->cs, c->values, &bad, 1, &lo, &e) == ST_OK);
    CHECK_MSG(bad.status == LAB_WRONG && strstr(bad.note, "output 1"), "%d: %s", bad.status,
              bad.note);
    idx[3] ^= 1;
    target_close(&m);
    free_case(c);
    n_cases = 0;
}

static void *resolve_mod(void *ctx, const char *symbol) {
    return cmodule_sym(ctx, symbol);
}

// A CPU session runs a plan whose GatherElements is a generated operator kernel: right outputs,
// and an index out of range reported with the reference op's message, naming the launch.
static void session_reports_bad_index(void) {
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
    StrBuf src;
    sb_init(&src);
    sb_puts(&src, cgen_prelude());
    Err e = {0};
    CHECK(cgen_opq_emit(c->pg, &c->cs->c[c->cand], &c->cfg[0], "gather_kernel", &src, &e) == ST_OK);
    CModule *mod = NULL;
    int rc = cbuild_module(src.s, NULL, "session", &mod, &e);
    sb_free(&src);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
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
                                   mine ? "gather_kernel" : NULL};
    }
    Plan *plan = NULL;
    if (rc == ST_OK)
        rc = plan_build(c->pg, c->cs, &sel, spec, &plan, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    // The stored plan reads back: the operator launch is checked like any generated one.
    uint8_t *bytes = NULL;
    size_t n_bytes = 0;
    Plan *back = NULL;
    if (rc == ST_OK && plan_write(plan, &bytes, &n_bytes, &e) == ST_OK)
        CHECK_MSG(plan_read(bytes, n_bytes, c->pg, "round trip", NULL, 0, &back, &e) == ST_OK, "%s",
                  e.msg);
    CHECK(back && back->n_kernels == plan->n_kernels &&
          back->launches[0].kind == plan->launches[0].kind &&
          back->launches[0].n_out == plan->launches[0].n_out);
    plan_free(back);
    free(bytes);
    CpuSession *s = NULL;
    if (rc == ST_OK)
        rc = cpu_session_create_from_plan(c->pg, plan, resolve_mod, mod, NULL, &s, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK) {
        PlanStats ps;
        plan_stats(plan, &ps);
        CHECK(ps.generated >= 1 && ps.opaque == 0);
        float y[24];
        void *outs[1] = {y};
        rc = cpu_session_run(s, (const void *const *)c->in, outs, &e);
        CHECK_MSG(rc == ST_OK, "%s", e.msg);
        int yt = c->pg->outputs[0];
        CHECK(rc == ST_OK && memcmp(y, c->values[yt], sizeof y) == 0);
        ((int64_t *)c->in[1])[17] = 9;
        Err e2 = {0};
        rc = cpu_session_run(s, (const void *const *)c->in, outs, &e2);
        CHECK_MSG(rc == ST_INVALID && strstr(e2.msg, "index 9") && strstr(e2.msg, "out of range") &&
                      strstr(e2.msg, "gather_kernel"),
                  "%d: %s", rc, e2.msg);
    }
    cpu_session_free(s);
    plan_free(plan);
    selection_free(&sel);
    cmodule_free(mod);
    free_case(c);
    n_cases = 0;
}

int main(void) {
    const char *env = getenv("ORCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    RUN(config_layout);
    RUN(refusals);
    RUN(lab_checks_every_output);
    RUN(session_reports_bad_index);
    RUN(kernels_against_interpreter);
    for (int i = 0; i < n_cases; i++)
        free_case(&cases[i]);
    return CHECK_DONE();
}
