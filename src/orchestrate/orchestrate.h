// Optimal orchestration: choose the candidate kernels that compute the graph's outputs at least
// total cost, as a binary linear program (after Korch):
//   minimise   sum_k c_k u_k,  u_k in {0,1}
//   subject to sum_{k writes t} u_k >= 1              for every graph output t
//              sum_{j writes t} u_j >= u_k            for every candidate k and every input t of
//                                                     k, neither a constant nor a graph input
// Single-output candidates make every feasible selection executable in the order of their sinks.
// Solved with CBC through its C interface, as independent components and in an equivalent but
// stronger form (orchestrate.c, orchestrate_cbc.c).
#ifndef ORCH_ORCHESTRATE_H
#define ORCH_ORCHESTRATE_H

#include "../candidates/candidates.h"

typedef struct Selection {
    int n;
    int *kernels; // candidate indices in execution (topological) order
    int n_materialised;
    int *materialised;          // tensor ids written by the selected kernels
    double objective;           // total cost of the selection (seconds)
    double bound;               // best lower bound the solver proved
    double gap;                 // (objective - bound) / objective, 0 when proven optimal
    double seconds;             // time spent (checks, reductions and CBC)
    bool optimal;               // proven optimal (else the time limit was hit)
    int variables, constraints; // summed over the components given to CBC
} Selection;

typedef struct OrchOptions {
    double time_limit; // seconds, shared by the components (0: default 60); the best
                       // solution found is kept (CBC checks the limit between its phases)
    int log_level;     // CBC's log level (0 quiet)
} OrchOptions;

int orchestrate(const CandidateSet *cs, const OrchOptions *opt, Selection *sel, Err *e);
void selection_free(Selection *sel);

// Exhaustive search for tests: the optimum over all subsets (n <= 24 candidates).
int orchestrate_brute_force(const CandidateSet *cs, double *best, Err *e);

#endif
