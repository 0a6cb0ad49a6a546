// Functions shared between the files of src/candidates (not part of the stage's API).
#ifndef ORCH_CANDIDATES_INTERNAL_H
#define ORCH_CANDIDATES_INTERNAL_H

#include "candidates.h"

// signature.c: the hash of one primitive on its own (kind, parameters, output dtypes and
// shapes), and the set's signature from precomputed primitive hashes (NULL: computed here).
uint64_t cand_prim_hash(const PrimGraph *pg, const Prim *p);
uint64_t cand_signature_hashed(const PrimGraph *pg, const int *prims, int n,
                               const uint64_t *prim_hash, int *ext_order, int *n_ext);

// segments.c: assigns every primitive a segment, segments being runs of consecutive primitives
// of at most max_segment; producer[t] is the primitive writing tensor t (-1: none). Returns the
// number of segments.
int cand_split(const PrimGraph *pg, const int *producer, int max_segment, int *segment_of_prim);

// mlp_chains.c: appends the MLP chain candidates of the graph (segments assigned) to cs; returns
// how many.
int cand_add_mlp_chains(CandidateSet *cs, const PrimGraph *pg, const int *producer,
                        const uint64_t *prim_hash);

// Appends the candidate of the n primitives `members` (sorted ascending, the sink last) lying in
// `segment`: signature, canonical inputs, output (mlp_chains.c).
void cand_append(CandidateSet *cs, const PrimGraph *pg, const uint64_t *prim_hash,
                 const int *members, int n, int segment);
int cand_cmp_int(const void *a, const void *b);

// attention.c: appends the fused attention candidates (attention.h) to cs; returns how many.
int cand_add_attention(CandidateSet *cs, const PrimGraph *pg, const int *producer,
                       const uint64_t *prim_hash);

#endif
