// The binary linear program of one independent component, built and solved with CBC's C
// interface. Needs the component from orchestrate.c (its candidates, in sink order, and the
// forced tensors it must write); gives CBC's best selection, its bound and its status.
//
// The rows, with W(t) = sum of u_k over the candidates k writing t:
//   W(t) = 1   for every forced tensor t of the component (graph outputs among them);
//   W(t) <= 1  for every other tensor with several writers;
//   W(t) >= sum_{k in G, t in inputs(k)} u_k   for every group G of candidates with the same
//              output and every input t that is neither free nor forced;
//   sum_{k contains q} u_k >= 1   for every live primitive q (cover rows).
// orchestrate.h states the program as W(o) >= 1 and W(t) >= u_k, which has the same optimum:
// some optimal selection writes each tensor once (orchestrate.c reduces any selection to one),
// so W(t) <= 1 may be added, and then candidates with the same output exclude each other and
// their demands on an input add up; every feasible selection computes every live primitive.
// The strengthening is what makes the program solvable: the header's rows leave the LP free to
// split each output's demand over alternatives at every fork, so that it shrinks going
// upstream; their LP bound on a 12-layer BERT is 8% of the optimum and CBC ends at its time
// limit with a 92% gap. With these rows the same program is solved in 0.2 s.
#include "orchestrate_internal.h"

#include <Cbc_C_Interface.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The constraint matrix as (row, column, value) entries and row bounds, grown as rows come.
typedef struct Rows {
    int *row, *col;
    double *val;
    int n, cap;
    double *lb, *ub;
    int nrows, rcap;
} Rows;

static void rows_entry(Rows *m, int col, double val) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->row = xrealloc(m->row, sizeof(int) * (size_t)m->cap);
        m->col = xrealloc(m->col, sizeof(int) * (size_t)m->cap);
        m->val = xrealloc(m->val, sizeof(double) * (size_t)m->cap);
    }
    m->row[m->n] = m->nrows;
    m->col[m->n] = col;
    m->val[m->n++] = val;
}

// Closes the row whose entries were just added.
static void rows_end(Rows *m, double lb, double ub) {
    if (m->nrows == m->rcap) {
        m->rcap = m->rcap ? 2 * m->rcap : 256;
        m->lb = xrealloc(m->lb, sizeof(double) * (size_t)m->rcap);
        m->ub = xrealloc(m->ub, sizeof(double) * (size_t)m->rcap);
    }
    m->lb[m->nrows] = lb;
    m->ub[m->nrows++] = ub;
}

static void rows_free(Rows *m) {
    free(m->row);
    free(m->col);
    free(m->val);
    free(m->lb);
    free(m->ub);
}

// W(t) over the component's columns.
static void add_writers(const Prob *P, const int *col, int t, Rows *m) {
    for (int j = P->wstart[t]; j < P->wstart[t + 1]; j++) {
        ORCH_ASSERT(col[P->wlist[j]] >= 0); // the component holds every writer of what it writes
        rows_entry(m, col[P->wlist[j]], 1.0);
    }
}

static bool reads(const Candidate *c, int t) {
    for (int i = 0; i < c->n_inputs; i++)
        if (c->inputs[i] == t)
            return true;
    return false;
}

// Cover rows: every live primitive is computed by some selected kernel (orchestrate.c), so
// sum_{k contains q} u_k >= 1 where all candidates containing q are in the component.
static void add_cover_rows(const Prob *P, const int *cands, int n, Rows *m) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    int np = pg->n_prims;
    int *start = xcalloc((size_t)np + 2, sizeof(int)); // per primitive: its columns, CSR
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cs->c[cands[i]].n_prims; j++)
            start[cs->c[cands[i]].prims[j] + 1]++;
    for (int q = 0; q < np; q++)
        start[q + 1] += start[q];
    int *list = xmalloc(sizeof(int) * (size_t)(start[np] + 1));
    int *fill = xmalloc(sizeof(int) * (size_t)(np + 1));
    memcpy(fill, start, sizeof(int) * (size_t)np);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cs->c[cands[i]].n_prims; j++)
            list[fill[cs->c[cands[i]].prims[j]]++] = i; // column i is cands[i]
    for (int q = 0; q < np; q++) {
        int c = start[q + 1] - start[q];
        if (c == 0 || c != P->covering[q] || !P->live[q])
            continue;
        for (int j = start[q]; j < start[q + 1]; j++)
            rows_entry(m, list[j], 1.0);
        rows_end(m, 1.0, DBL_MAX);
    }
    free(start);
    free(list);
    free(fill);
}

static void build_rows(const Prob *P, const int *cands, int n, const int *targets, int n_targets,
                       const int *col, Rows *m) {
    const PrimGraph *pg = P->pg;
    const CandidateSet *cs = P->cs;
    int nt = pg->n_tensors;
    // stamp[t] == s: tensor t already handled for the pass or group s.
    int *stamp = xcalloc((size_t)nt + 1, sizeof(int)), s = 0;

    s++;
    for (int i = 0; i < n_targets; i++) {
        stamp[targets[i]] = s;
        add_writers(P, col, targets[i], m);
        rows_end(m, 1.0, 1.0);
    }
    for (int i = 0; i < n; i++) {
        const int *w;
        int nw = orch_writes(pg, &cs->c[cands[i]], &w);
        for (int j = 0; j < nw; j++) {
            int t = w[j];
            if (t < 0 || stamp[t] == s || P->wstart[t + 1] - P->wstart[t] < 2)
                continue;
            stamp[t] = s;
            add_writers(P, col, t, m);
            rows_end(m, -DBL_MAX, 1.0);
        }
    }

    // Dependency rows per group of equal outputs (equal outputs share a sink: one run of cands).
    int *ins = xmalloc(sizeof(int) * 64), icap = 64;
    for (int i = 0; i < n;) {
        int end = i;
        while (end < n && P->sink[cands[end]] == P->sink[cands[i]])
            end++;
        for (int g = i; g < end; g++) {
            int out = cs->c[cands[g]].output;
            bool first = true;
            for (int h = i; h < g && first; h++)
                first = cs->c[cands[h]].output != out;
            if (!first)
                continue;
            s++;
            int nins = 0;
            for (int h = g; h < end; h++) {
                const Candidate *c = &cs->c[cands[h]];
                if (c->output != out)
                    continue;
                for (int q = 0; q < c->n_inputs; q++) {
                    int t = c->inputs[q];
                    if (t < 0 || P->is_free[t] || P->forced[t] || stamp[t] == s)
                        continue;
                    stamp[t] = s;
                    if (nins == icap) {
                        icap *= 2;
                        ins = xrealloc(ins, sizeof(int) * (size_t)icap);
                    }
                    ins[nins++] = t;
                }
            }
            for (int q = 0; q < nins; q++) {
                int t = ins[q];
                add_writers(P, col, t, m);
                for (int h = g; h < end; h++) {
                    const Candidate *c = &cs->c[cands[h]];
                    if (c->output == out && reads(c, t))
                        rows_entry(m, col[cands[h]], -1.0); // a writer of t never reads t
                }
                rows_end(m, 0.0, DBL_MAX);
            }
        }
        i = end;
    }
    free(ins);

    free(stamp);
    add_cover_rows(P, cands, n, m);
}

int orch_cbc_solve(const Prob *P, const int *cands, int n, const int *targets, int n_targets,
                   const bool *start, double time_limit, int log_level, int *col, bool *sel,
                   OrchPart *part, Err *e) {
    const CandidateSet *cs = P->cs;
    memset(part, 0, sizeof *part);
    for (int i = 0; i < n; i++)
        col[cands[i]] = i;
    Rows m = {0};
    build_rows(P, cands, n, targets, n_targets, col, &m);

    // Costs in seconds are ~1e-6: CBC's absolute tolerances (dual 1e-7, cutoff increment 1e-5)
    // would blur them, so the objective is scaled to make the start's mean kernel cost 1.
    double start_cost = 0;
    int start_n = 0;
    for (int i = 0; i < n; i++)
        if (start[cands[i]]) {
            start_cost += cs->c[cands[i]].cost;
            start_n++;
        }
    double scale = start_cost > 0 ? start_n / start_cost : 1.0;

    // Column-major copy for Cbc_loadProblem: Cbc_addRow rebuilds the solver's matrix on every
    // call (measured: 4 s for 20k rows, 40 s for 80k), far too slow for a large program.
    CoinBigIndex *cstart = xcalloc((size_t)n + 2, sizeof(CoinBigIndex));
    CoinBigIndex *fill = xmalloc(sizeof(CoinBigIndex) * (size_t)(n + 2));
    int *ridx = xmalloc(sizeof(int) * (size_t)(m.n + 1));
    double *rval = xmalloc(sizeof(double) * (size_t)(m.n + 1));
    for (int i = 0; i < m.n; i++)
        cstart[m.col[i] + 1]++;
    for (int c = 0; c < n; c++)
        cstart[c + 1] += cstart[c];
    memcpy(fill, cstart, sizeof(CoinBigIndex) * (size_t)(n + 1));
    for (int i = 0; i < m.n; i++) {
        ridx[fill[m.col[i]]] = m.row[i];
        rval[fill[m.col[i]]++] = m.val[i];
    }
    double *clb = xcalloc((size_t)n + 1, sizeof(double));
    double *cub = xmalloc(sizeof(double) * (size_t)(n + 1));
    double *obj = xmalloc(sizeof(double) * (size_t)(n + 1));
    for (int c = 0; c < n; c++) {
        cub[c] = 1.0;
        obj[c] = cs->c[cands[c]].cost * scale;
    }

    Cbc_Model *model = Cbc_newModel();
    Cbc_loadProblem(model, n, m.nrows, cstart, ridx, rval, clb, cub, obj, m.lb, m.ub);
    for (int c = 0; c < n; c++)
        Cbc_setInteger(model, c);
    Cbc_setLogLevel(model, log_level);
    Cbc_setMaximumSeconds(model, time_limit);
    // Exact optimum: no allowed gap; a tiny cutoff increment (CBC only looks for solutions this
    // much better than the incumbent: its default 1e-5 missed optima in the unit test) and a
    // tight dual tolerance; the time limit is wall-clock.
    Cbc_setParameter(model, "allowableGap", "0");
    Cbc_setParameter(model, "ratioGap", "0");
    Cbc_setParameter(model, "increment", "1e-9");
    Cbc_setParameter(model, "dualTolerance", "1e-9");
    Cbc_setParameter(model, "timeMode", "elapsed");
    // No MIP start: CBC 2.10.8 throws "Illegal index in ClpModel::getColumnName" on the MIP start
    // of some large programs (and leaks), Cbc_setInitialSolution prints through Clp whatever the
    // log level, and a cutoff at the start's cost makes CglPreProcess leak its probing cuts. The
    // start is the fallback when the time limit leaves CBC without a solution.
    double t0 = now_s();
    Cbc_solve(model);

    part->variables = n;
    part->constraints = m.nrows;
    int status = Cbc_status(model), secondary = Cbc_secondaryStatus(model);
    const double *x = Cbc_bestSolution(model);
    int rc = ST_OK;
    // When the time runs out before the LP is solved, CBC reports status 0/1 (finished,
    // relaxation infeasible) for a program it did not get to solve: past the limit, anything
    // short of a proof counts as the limit.
    bool stopped = status == 1 || Cbc_isSecondsLimitReached(model);
    bool proven = x && !stopped && Cbc_isProvenOptimal(model);
    bool limit = !proven && (stopped || now_s() - t0 >= time_limit);
    if (Cbc_isAbandoned(model)) {
        rc = err_set(e, ST_RUNTIME,
                     "orchestrate: CBC abandoned the program (%d variables, %d constraints) for "
                     "numerical difficulties (status %d/%d)",
                     n, m.nrows, status, secondary);
    } else if (!proven && !limit && !x) {
        // orchestrate.c checked that the outputs can be produced: the start is feasible.
        rc = err_set(e, ST_RUNTIME,
                     "orchestrate: CBC ends without a solution of the program (%d variables, %d "
                     "constraints, status %d/%d) although a feasible selection exists: a solver "
                     "failure",
                     n, m.nrows, status, secondary);
    } else {
        // A solution without a proof (a limit, or CBC's own reasons) is kept with its bound.
        part->have = x != NULL;
        part->optimal = proven;
        for (int c = 0; c < n; c++)
            sel[cands[c]] = x && x[c] > 0.5;
        double b = Cbc_getBestPossibleObjValue(model) / scale;
        bool valid = isfinite(b) && b > 0 && b < 1e40 && !Cbc_isProvenInfeasible(model);
        part->bound = valid ? b : 0.0; // costs are >= 0
    }
    Cbc_deleteModel(model);
    for (int i = 0; i < n; i++)
        col[cands[i]] = -1;
    rows_free(&m);
    free(cstart);
    free(fill);
    free(ridx);
    free(rval);
    free(clb);
    free(cub);
    free(obj);
    return rc;
}
