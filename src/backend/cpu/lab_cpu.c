// The CPU kernel lab (the C target's lab_run slot, kernel_lab.h): jobs emitted into translation
// units, compiled in parallel compiler processes (cbuild.h), loaded, run on the primitive
// interpreter's tensors, checked against its output and, when they agree, timed; an unstable
// timing (kernel_lab.h's rule) is taken again, and one that stays unstable is marked so.
#include "../kernel_lab.h"
#include "cbuild.h"
#include "cpu_backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *aligned_buffer(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, n ? n : 64);
}

static CPrepackFn prepack_of(CModule *m, const char *kernel) {
    char name[96];
    ckernel_prepack_name(kernel, name, sizeof name);
    return (CPrepackFn)cmodule_sym(m, name);
}

// Runs a kernel once: the plain ABI (out[0]) or, for an operator kernel, the operator ABI
// (target.h), whose status it returns.
typedef struct Kernel {
    CKernelFn fn;
    COpKernelFn op;
} Kernel;

static int call(Kernel k, void **in, void **out) {
    if (k.op)
        return k.op((const void *const *)in, (void *const *)out);
    k.fn((const void *const *)in, out[0]);
    return CKERNEL_OK;
}

// How many copies of a kernel's operands its timed runs rotate through, so that each run finds
// them in the shared cache and not in the cores' own, as in an artefact: there a kernel's inputs
// were just written by other kernels (on other cores too) and its weights last read a whole run
// ago. Enough copies of the activations (inputs that are no constant) and outputs to overflow the
// private caches (L2) of the target's threads twice, at most COLD_SETS_MAX and COLD_BYTES_MAX in
// all; operands that overflow them alone need one. Constants (weights) stay one copy, which the
// rotating activations mostly evict too: a recurrent model's step kernels re-read the same
// weights every step, and copies of those made its plan look 2x slower than it runs. Timed warm,
// a pointwise kernel over 1.2 M floats measured 28 us in the lab and 315 us in the plan.
#define COLD_SETS_MAX 16
#define COLD_BYTES_MAX (64.0 * 1024 * 1024)

static int cold_set_count(const TargetMachine *m, double footprint) {
    if (footprint <= 0)
        return 1;
    double priv = (double)(m->hw.l2 > 0 ? m->hw.l2 : 1 << 20) * ORCH_MAX(1, m->hw.cores);
    int n = (int)ORCH_MIN((double)COLD_SETS_MAX, ceil(2.0 * priv / footprint));
    while (n > 1 && (double)n * footprint > COLD_BYTES_MAX)
        n--;
    return ORCH_MAX(1, n);
}

// Checks and times one loaded kernel (sym: its entry point); prepack: its NAME_prepack or NULL
// (target.h), applied to the inputs it reorders, as the runtime session does once at load. An
// operator kernel's every output is checked.
// Unstable timings in a row after which the lab stops timing again (busy_streak): the pause
// between attempts lets a neighbour's burst pass, but a machine busy for this many kernels in a
// row is busy for good, and each futile retry costs its timing and 50-100 ms of pause.
#define LAB_BUSY_STREAK 4

// *busy_streak: the kernels before this one whose timings all stayed unstable, in a row; from
// LAB_BUSY_STREAK on a kernel is timed once (a stable timing ends the streak).
static void measure(const TargetMachine *m, const PrimGraph *pg, const Candidate *c, void **values,
                    void *sym, CPrepackFn prepack, LabJob *j, const LabOptions *opt,
                    int *busy_streak) {
    const Prim *sink = pg->prims[c->prims[c->n_prims - 1]];
    Kernel k = {0};
    if (ckernel_op_abi(sink))
        memcpy(&k.op, &sym, sizeof sym); // POSIX: object and function pointers convert
    else
        memcpy(&k.fn, &sym, sizeof sym);
    int n_out = k.op ? sink->n_out : 1;
    const int *out_t = k.op ? sink->out : &c->output;
    void **in = xcalloc((size_t)c->n_inputs + 1, sizeof(void *));
    void **out = xcalloc((size_t)n_out + 1, sizeof(void *));
    double *times = NULL;
    int n_sets = 0;
    void ***in_sets = NULL, ***out_sets = NULL;
    bool ok = true;
    for (int o = 0; o < n_out && ok; o++)
        if (out_t[o] >= 0) {
            out[o] = aligned_buffer(tensor_nbytes(pg->tensors[out_t[o]]));
            ok = out[o] != NULL && values[out_t[o]] != NULL;
        }
    for (int i = 0; i < c->n_inputs && ok; i++) {
        const Tensor *t = pg->tensors[c->inputs[i]];
        size_t b = tensor_nbytes(t);
        bool reorders = prepack && prepack(i, NULL, NULL);
        in[i] = aligned_buffer(
            reorders ? (size_t)ckernel_prepack_bytes(prepack, i, (int64_t)b) : b);
        ok = in[i] != NULL && values[c->inputs[i]] != NULL;
        if (ok && b && !(prepack && prepack(i, values[c->inputs[i]], in[i])))
            memcpy(in[i], values[c->inputs[i]], b);
    }
    if (!ok) {
        j->status = LAB_SKIPPED;
        snprintf(j->note, sizeof j->note, "no memory or no value for an input or output");
        goto done;
    }
    if (opt->before_run && opt->before_run(opt->ctx, j)) {
        j->status = LAB_SKIPPED;
        snprintf(j->note, sizeof j->note, "skipped: it crashed an earlier run");
        goto done;
    }
    for (int o = 0; o < n_out; o++) // poison: NaN for floats, -1 for integers
        if (out[o])
            memset(out[o], 0xff, tensor_nbytes(pg->tensors[out_t[o]]));
    int st = call(k, in, out);
    if (st != CKERNEL_OK) {
        j->status = LAB_WRONG;
        snprintf(j->note, sizeof j->note,
                 "returned status %d (%s) on operands the reference op accepts", st,
                 st == CKERNEL_ERR_NOMEM ? "out of memory" : "an index out of range");
        goto done;
    }
    for (int o = 0; o < n_out; o++) {
        if (!out[o])
            continue;
        const Tensor *T = pg->tensors[out_t[o]];
        double err = 0;
        char why[256];
        if (!lab_outputs_agree_tol(T->dtype, tensor_numel(T), out[o], values[out_t[o]], j->tol,
                                   &err, why, sizeof why)) {
            j->status = LAB_WRONG;
            j->max_err = err;
            if (n_out > 1)
                snprintf(j->note, sizeof j->note, "output %d: %.230s", o, why);
            else
                snprintf(j->note, sizeof j->note, "%s", why);
            goto done;
        }
        j->max_err = ORCH_MAX(j->max_err, err);
    }
    int max_reps = opt->max_reps > 0 ? opt->max_reps : 200;
    double budget = opt->min_time > 0 ? opt->min_time : 0.02;
    times = xmalloc(sizeof(double) * (size_t)max_reps);
    // Operand sets for cold timing (cold_set_count): set 0 is the checked one, the others
    // copies of its inputs (already reordered where the kernel prepacks) and fresh outputs.
    double footprint = 0;
    for (int i = 0; i < c->n_inputs; i++)
        if (!pg_is_const(pg, c->inputs[i]))
            footprint += (double)tensor_nbytes(pg->tensors[c->inputs[i]]);
    for (int o = 0; o < n_out; o++)
        if (out[o])
            footprint += (double)tensor_nbytes(pg->tensors[out_t[o]]);
    n_sets = cold_set_count(m, footprint);
    in_sets = xcalloc((size_t)n_sets, sizeof(void **));
    out_sets = xcalloc((size_t)n_sets, sizeof(void **));
    in_sets[0] = in;
    out_sets[0] = out;
    for (int r = 1; r < n_sets; r++) {
        in_sets[r] = xcalloc((size_t)c->n_inputs + 1, sizeof(void *));
        out_sets[r] = xcalloc((size_t)n_out + 1, sizeof(void *));
        for (int i = 0; i < c->n_inputs; i++) {
            if (pg_is_const(pg, c->inputs[i])) { // shared: see cold_set_count
                in_sets[r][i] = in[i];
                continue;
            }
            size_t b = tensor_nbytes(pg->tensors[c->inputs[i]]);
            in_sets[r][i] = aligned_buffer(b);
            memcpy(in_sets[r][i], in[i], b);
        }
        for (int o = 0; o < n_out; o++)
            if (out[o])
                out_sets[r][o] = aligned_buffer(tensor_nbytes(pg->tensors[out_t[o]]));
    }
    for (int r = 0; r < n_sets; r++) // warm-up after the check run; every set's pages touched
        call(k, in_sets[r], out_sets[r]);
    // An unstable timing (kernel_lab.h) is taken again after a pause, so a neighbour's burst
    // can pass; the least disturbed attempt (lowest median) is kept, with the lowest minimum
    // of all.
    LabTiming best = {0};
    double min_all = INFINITY;
    int attempts = *busy_streak >= LAB_BUSY_STREAK ? 1 : LAB_ATTEMPTS;
    for (int attempt = 1; attempt <= attempts; attempt++) {
        if (attempt > 1) {
            struct timespec ts = {0, (long)(LAB_BACKOFF_S * (attempt - 1) * 1e9)};
            nanosleep(&ts, NULL);
            call(k, in_sets[0], out_sets[0]); // warm again after the pause
        }
        double load = lab_machine_load();
        double total = 0;
        int reps = 0;
        while (reps < max_reps && (reps < 3 || total < budget)) {
            int r = (reps + 1) % n_sets; // the set used longest ago
            double t0 = now_s();
            call(k, in_sets[r], out_sets[r]);
            times[reps] = now_s() - t0;
            total += times[reps++];
        }
        // The load is read before and after: a neighbour present at both ends was there
        // throughout; the lower reading ignores a process that only started or ended.
        double after = lab_machine_load();
        if (after >= 0 && (load < 0 || after < load))
            load = after;
        LabTiming t;
        lab_summarise(times, reps, load, m->hw.cores, &t);
        if (opt->trust_timings) { // compile --trust-timings: every timing taken as it is
            t.unstable = false;
            t.why[0] = 0;
        }
        min_all = ORCH_MIN(min_all, t.min_s);
        j->attempts = attempt;
        if (attempt == 1 || t.median_s < best.median_s)
            best = t;
        if (!t.unstable) {
            best = t;
            break;
        }
    }
    j->reps = best.n;
    j->min_s = ORCH_MIN(min_all, best.min_s);
    j->median_s = best.median_s;
    j->spread = best.spread;
    j->load = best.load;
    j->unstable = best.unstable;
    *busy_streak = best.unstable ? *busy_streak + 1 : 0;
    if (best.unstable && attempts == 1)
        snprintf(j->note, sizeof j->note,
                 "unstable, timed once (the machine stayed busy for %d kernels before): %s",
                 LAB_BUSY_STREAK, best.why);
    else if (best.unstable)
        snprintf(j->note, sizeof j->note, "unstable after %d timings: %s", j->attempts, best.why);
    j->status = LAB_OK;
done:
    for (int r = 1; r < n_sets; r++) {
        for (int i = 0; i < c->n_inputs; i++)
            if (in_sets[r][i] != in[i])
                free(in_sets[r][i]);
        for (int o = 0; o < n_out; o++)
            free(out_sets[r][o]);
        free(in_sets[r]);
        free(out_sets[r]);
    }
    free(in_sets);
    free(out_sets);
    for (int i = 0; i < c->n_inputs; i++)
        free(in[i]);
    free(in);
    for (int o = 0; o < n_out; o++)
        free(out[o]);
    free(out);
    free(times);
}

typedef struct Unit {
    int first, count; // jobs [first, first + count) that were emitted into this unit
    int *jobs;
    char *source;
} Unit;

// Emits the given jobs into one unit; jobs whose emit fails are marked and left out.
static void emit_unit(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                      LabJob *jobs, const int *idx, int n, Unit *u) {
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, m->target->prelude(m));
    u->jobs = xmalloc(sizeof(int) * (size_t)(n + 1));
    u->count = 0;
    for (int i = 0; i < n; i++) {
        LabJob *j = &jobs[idx[i]];
        const Candidate *c = &cs->c[j->cand];
        char name[64];
        lab_kernel_name(pg, c, &j->cfg, name, sizeof name);
        Err e = {0};
        size_t mark = b.len;
        if (m->target->emit(m, pg, c, &j->cfg, name, &b, &e)) {
            b.len = mark;
            b.s[mark] = '\0';
            j->status = LAB_BUILD_FAILED;
            snprintf(j->note, sizeof j->note, "emit: %.240s", e.msg);
            continue;
        }
        u->jobs[u->count++] = idx[i];
    }
    u->source = sb_take(&b);
}

static void free_unit(Unit *u) {
    free(u->jobs);
    free(u->source);
}

// Builds units in parallel; returns the modules (NULL where the unit failed, its message in msgs).
static int build_units(Unit *units, int nu, const LabOptions *opt, CModule **mods, char **msgs,
                       Err *e) {
    const char **src = xcalloc((size_t)nu + 1, sizeof(char *));
    int *st = xcalloc((size_t)nu + 1, sizeof(int));
    for (int i = 0; i < nu; i++)
        src[i] = units[i].source;
    int rc = cbuild_modules(src, nu, opt->workdir, opt->jobs, mods, st, msgs, e);
    free(src);
    free(st);
    return rc;
}

// measure(), its seconds added to *measuring (the rest of a lab call is emitting and building).
static void measure_timed(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                          void **values, void *fn, CPrepackFn prepack, LabJob *j,
                          const LabOptions *opt, double *measuring, int *busy_streak) {
    double t0 = now_s();
    measure(m, pg, c, values, fn, prepack, j, opt, busy_streak);
    *measuring += now_s() - t0;
}

int cpu_lab_run(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs, void **values,
                LabJob *jobs, int n, const LabOptions *opt, Err *e) {
    double t_start = now_s(), measuring = 0;
    int busy_streak = 0; // see measure
    int per = opt->per_unit > 0 ? opt->per_unit : lab_unit_size(n, opt->jobs, 16);
#ifdef _OPENMP
    // Kernels are timed with the target's threads, as a session runs them (session_cpu.c sets
    // them per run). OpenMP's default, every core the process may use, timed a --threads 2
    // target on a 16-core host with 16 threads: bandwidth-bound kernels 8x faster than in the
    // artefact, and plans chosen on those times.
    int omp_threads_before = omp_get_max_threads();
    omp_set_num_threads(m->hw.cores > 0 ? m->hw.cores : 1);
#endif
    for (int i = 0; i < n; i++) {
        jobs[i].status = LAB_SKIPPED;
        jobs[i].note[0] = '\0';
        jobs[i].median_s = jobs[i].min_s = jobs[i].spread = jobs[i].max_err = 0;
        jobs[i].reps = jobs[i].attempts = 0;
        jobs[i].load = -1;
        jobs[i].unstable = false;
    }
    int nu = (n + per - 1) / per;
    Unit *units = xcalloc((size_t)nu + 1, sizeof(Unit));
    int *idx = xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int u = 0; u < nu; u++) {
        int first = u * per, cnt = ORCH_MIN(per, n - first);
        emit_unit(m, pg, cs, jobs, idx + first, cnt, &units[u]);
    }
    CModule **mods = xcalloc((size_t)nu + 1, sizeof(CModule *));
    char **msgs = xcalloc((size_t)nu + 1, sizeof(char *));
    int rc = build_units(units, nu, opt, mods, msgs, e);
    int done = 0;
    for (int u = 0; u < nu && rc == ST_OK; u++) {
        if (!mods[u] && units[u].count > 1) {
            // A unit that fails to build is split into single kernels to find the culprit.
            int ns = units[u].count;
            Unit *single = xcalloc((size_t)ns, sizeof(Unit));
            for (int i = 0; i < ns; i++)
                emit_unit(m, pg, cs, jobs, &units[u].jobs[i], 1, &single[i]);
            CModule **smods = xcalloc((size_t)ns, sizeof(CModule *));
            char **smsgs = xcalloc((size_t)ns, sizeof(char *));
            rc = build_units(single, ns, opt, smods, smsgs, e);
            for (int i = 0; i < ns && rc == ST_OK; i++) {
                LabJob *j = &jobs[units[u].jobs[i]];
                if (!smods[i]) {
                    j->status = LAB_BUILD_FAILED;
                    snprintf(j->note, sizeof j->note, "%s", smsgs[i] ? smsgs[i] : "build failed");
                } else {
                    char name[64];
                    const Candidate *c = &cs->c[j->cand];
                    lab_kernel_name(pg, c, &j->cfg, name, sizeof name);
                    void *fn = cmodule_sym(smods[i], name);
                    if (fn)
                        measure_timed(m, pg, c, values, fn, prepack_of(smods[i], name), j, opt,
                                      &measuring, &busy_streak);
                    else
                        j->status = LAB_BUILD_FAILED;
                }
                if (opt->on_result)
                    opt->on_result(opt->ctx, j, ++done, n);
            }
            for (int i = 0; i < ns; i++) {
                cmodule_free(smods[i]);
                free(smsgs[i]);
                free_unit(&single[i]);
            }
            free(single);
            free(smods);
            free(smsgs);
            continue;
        }
        for (int i = 0; i < units[u].count; i++) {
            LabJob *j = &jobs[units[u].jobs[i]];
            const Candidate *c = &cs->c[j->cand];
            if (!mods[u]) {
                j->status = LAB_BUILD_FAILED;
                snprintf(j->note, sizeof j->note, "%s", msgs[u] ? msgs[u] : "build failed");
            } else {
                char name[64];
                lab_kernel_name(pg, c, &j->cfg, name, sizeof name);
                void *fn = cmodule_sym(mods[u], name);
                if (fn)
                    measure_timed(m, pg, c, values, fn, prepack_of(mods[u], name), j, opt,
                                  &measuring, &busy_streak);
                else {
                    j->status = LAB_BUILD_FAILED;
                    snprintf(j->note, sizeof j->note, "symbol %s missing from its unit", name);
                }
            }
            if (opt->on_result)
                opt->on_result(opt->ctx, j, ++done, n);
        }
    }
    // Jobs whose emit failed were never in a unit: report them too.
    for (int i = 0; i < n && rc == ST_OK; i++)
        if (jobs[i].status == LAB_BUILD_FAILED && strncmp(jobs[i].note, "emit:", 5) == 0 &&
            opt->on_result)
            opt->on_result(opt->ctx, &jobs[i], ++done, n);
    for (int u = 0; u < nu; u++) {
        if (opt->keep && mods[u]) {
            *opt->keep = xrealloc(*opt->keep, sizeof(CModule *) * (size_t)(*opt->n_keep + 1));
            (*opt->keep)[(*opt->n_keep)++] = mods[u];
        } else {
            cmodule_free(mods[u]);
        }
        free(msgs[u]);
        free_unit(&units[u]);
    }
    free(mods);
    free(msgs);
    free(units);
    free(idx);
#ifdef _OPENMP
    omp_set_num_threads(omp_threads_before);
#endif
    if (opt->build_s)
        *opt->build_s += now_s() - t_start - measuring;
    if (opt->measure_s)
        *opt->measure_s += measuring;
    return rc;
}
