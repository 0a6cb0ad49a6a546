// Candidate kernels: the sets of primitives one kernel launch could compute. A candidate is a
// convex set of primitives of the primitive graph (no path leaves the set and re-enters it) with
// a single sink whose output is the only tensor it materialises; its inputs are the tensors it
// reads from outside the set. Redundant computation is allowed: a primitive may sit in several
// candidates. Which sets a target can compile is the target's say (CandRules).
// Needs: a verified, cleaned-up primitive graph. Guarantees: every primitive (OPAQUE included) is
// the sink of at least its singleton candidate, so some selection always covers the graph.
#ifndef ORCH_CANDIDATES_H
#define ORCH_CANDIDATES_H

#include "../prim/prim.h"

typedef struct Candidate {
    int id;
    int n_prims;
    int *prims;      // indices into pg->prims, ascending (topological order); the last is the sink
    int output;      // tensor id the kernel writes (the sink's output; an OPAQUE singleton
                     // writes all its primitive's outputs, and this is the first present one)
    int n_inputs;
    int *inputs;     // tensor ids read from outside the set (constants included), in canonical
                     // order: first use in the signature's walk, so equal signatures mean
                     // corresponding inputs at equal positions (the kernel ABI's order)
    uint64_t signature; // canonical hash: structure, parameters, shapes, dtypes (not names)
    int segment;     // the segment it was enumerated in
    double cost;     // seconds: estimated (cost model) or measured (a target)
} Candidate;

// What a target can put in one kernel. The enumerator asks `accepts` for every grown set; the
// defaults (cand_rules_default) follow Korch: at most one LINEAR primitive, OPAQUE primitives
// only alone, reductions in one set must reduce the same axes of same-shaped inputs, at most
// max_prims primitives. `accepts` must be monotone (a superset of a rejected set is rejected):
// the enumerator does not grow a rejected set. Singletons are candidates whatever it says.
typedef struct CandRules {
    int max_prims;       // size cap (default 8; 0: the default)
    int max_inputs;      // external non-constant inputs (default 6; 0: the default)
    bool (*accepts)(const struct CandRules *r, const PrimGraph *pg, const int *prims, int n);
    void *ctx;           // target data for accepts
    bool mlp_chains;     // also propose multi-LINEAR MLP chains (mlp_chains.c; default off, so
                         // the single-LINEAR enumeration stays exactly Korch's)
    bool attention;      // also propose fused attention (attention.h; default off, as above)
} CandRules;

CandRules cand_rules_default(void);
bool cand_rules_default_accepts(const CandRules *r, const PrimGraph *pg, const int *prims, int n);

typedef struct CandStats {
    int prims, candidates, signatures, segments;
    int max_segment_prims;
    int truncated_sinks; // sinks whose search hit the per-sink budget (wide fan-in)
    double seconds;
    int mlp_chains;      // multi-LINEAR MLP chain candidates among `candidates` (mlp_chains.c)
    int attention;       // fused attention candidates among `candidates` (attention.c)
} CandStats;

typedef struct CandidateSet {
    Arena *arena;
    const PrimGraph *pg;
    Candidate *c;
    int n, cap;
    int n_segments;
    int *segment_of_prim; // pg->n_prims entries
    CandStats stats;
} CandidateSet;

// Splits the graph into segments (see segments.c for the rule) and enumerates candidates in
// each. max_segment bounds a segment's primitives (0: default 64; at most 16384); rules NULL:
// the defaults.
int cand_enumerate(const PrimGraph *pg, const CandRules *rules, int max_segment, CandidateSet **out,
                   Err *e);
void cand_set_free(CandidateSet *cs); // accepts NULL

// The canonical signature of a set of primitives (exposed for tests).
uint64_t cand_signature(const PrimGraph *pg, const int *prims, int n);
// The set's external inputs in canonical order (Candidate.inputs' order) into out, which has room
// for every operand of the set; returns how many.
int cand_canonical_inputs(const PrimGraph *pg, const int *prims, int n, int *out);

// MLP chains (mlp_chains.c): cand_enumerate also proposes every contiguous run of 2 to 8
// dense layers (a matmul by a constant 2-D weight with K, N <= 256, then its elementwise
// epilogue of constant operands; each intermediate read only by the next layer) as one candidate
// with several LINEAR primitives. Targets recognise them by cand_count_linear(...) >= 2 and may
// refuse them in supports(). cand_mlp_layer_ok: whether p can be a layer of such a chain.
int cand_count_linear(const PrimGraph *pg, const Candidate *c);
bool cand_mlp_layer_ok(const PrimGraph *pg, const Prim *p);

#endif
