// Shared between the orchestration files: the problem as orchestrate.c prepares it (which
// candidates can run, who writes what, which tensors every selection must write) and the CBC
// solve of one independent component of it (orchestrate_cbc.c).
#ifndef ORCH_ORCHESTRATE_INTERNAL_H
#define ORCH_ORCHESTRATE_INTERNAL_H

#include "orchestrate.h"

typedef struct Prob {
    const CandidateSet *cs;
    const PrimGraph *pg;
    int n;            // candidates
    int *sink;        // per candidate: index of its sink in pg->prims
    int *order;       // candidate indices by ascending sink, then index
    bool *is_free;    // per tensor: a graph input or a constant, always available
    bool *producible; // per tensor: free, or written by a candidate that can run
    bool *usable;     // per candidate: a variable of the program (finite cost, inputs producible,
                      // not dominated)
    int *wstart, *wlist; // per tensor t: usable writers wlist[wstart[t] .. wstart[t+1])
    int *outs, n_outs;   // graph outputs that need a kernel (not free), each once
    bool *forced;        // per tensor: written by every feasible selection (see orchestrate.c)
    bool *live;          // per primitive: an output depends on it (some kernel computes it)
    int *covering;       // per primitive: usable candidates containing it
} Prob;

// The tensors a candidate writes: its output, or every output of an opaque sink. Entries may be
// -1 (absent optional outputs of an opaque primitive).
int orch_writes(const PrimGraph *pg, const Candidate *c, const int **w);

typedef struct OrchPart {
    bool have;    // CBC returned a solution (in the selection passed)
    bool optimal; // proven optimal
    double bound; // CBC's lower bound on the part's cost, seconds
    int variables, constraints;
} OrchPart;

// Solves the program restricted to the candidates `cands` (an independent component: every
// tensor they read is free, forced, or written by one of them), which must write the forced
// tensors `targets`. `start` (per candidate) is a feasible selection of the component, which
// sets the objective's scale; `col` is scratch of P->n entries, all -1, left so. Sets sel[k]
// for k in cands when CBC has a solution (part->have).
int orch_cbc_solve(const Prob *P, const int *cands, int n, const int *targets, int n_targets,
                   const bool *start, double time_limit, int log_level, int *col, bool *sel,
                   OrchPart *part, Err *e);

#endif
