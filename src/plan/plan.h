// The execution plan: what the runtime session does, decided ahead of time from an orchestrated
// selection. A launch list in the selection's (topological) order, plus copies for graph outputs
// no kernel writes in place; where every tensor lives (caller's input or output buffer, a
// constant blob packed at session creation, or an offset in ONE arena assigned by liveness with
// best-fit interval packing); the ONNX nodes every launch covers. Serialised into the artefact.
// Needs: a verified primitive graph, its candidate set and a selection of it. Guarantees: every
// launch reads only tensors that are graph inputs, constants or written by an earlier launch;
// arena tensors live at the same time never overlap; all offsets are 64-byte aligned.
#ifndef ORCH_PLAN_H
#define ORCH_PLAN_H

#include "../orchestrate/orchestrate.h"

#define PLAN_ALIGN 64

// How a launch runs.
typedef enum PlanKind {
    PLAN_GENERATED, // a generated kernel `void SYMBOL(const void *const *in, void *out)` in the
                    // shared object; in = the candidate's inputs (canonical order), out = its
                    // output; an operator kernel (a singleton OPAQUE primitive, target.h's operator
                    // ABI): out = every output of the primitive (-1: absent), as for PLAN_OPAQUE
    PLAN_INTERP,    // a singleton non-opaque primitive the target could not generate: prim_eval,
                    // in = the primitive's inputs in operand order, out = its output
    PLAN_OPAQUE,    // a singleton OPAQUE primitive: prim_eval_opaque, in = its inputs in operand
                    // order (-1: absent), out = every output (-1: absent)
    PLAN_COPY,      // added by the plan, never in a spec: copies tensor in[0] into the buffer of
                    // graph output copy_to (an output that is a graph input, a constant, or
                    // listed more than once); runs after the kernels
    PLAN_KIND_COUNT
} PlanKind;

const char *plan_kind_name(PlanKind k);

// How selected kernel i runs (the compile driver decides: generated if the target emitted and
// verified it, else interp / opaque).
typedef struct PlanKernelSpec {
    PlanKind kind;      // PLAN_GENERATED, PLAN_INTERP or PLAN_OPAQUE
    const char *symbol; // PLAN_GENERATED: the function's name in the shared object (copied)
} PlanKernelSpec;

// Where a tensor lives at run time.
typedef enum PlanPlace {
    PLACE_NONE,   // never touched by the plan
    PLACE_INPUT,  // the caller's buffer of graph input `index`
    PLACE_OUTPUT, // the caller's buffer of graph output `index` (its first listing)
    PLACE_CONST,  // the constant blob at `offset`
    PLACE_ARENA,  // the arena at `offset`, live from launch `first` to launch `last`
} PlanPlace;

typedef struct PlanTensor {
    PlanPlace place;
    int index;       // PLACE_INPUT / PLACE_OUTPUT: position in pg->inputs / pg->outputs
    int64_t offset;  // PLACE_CONST / PLACE_ARENA: bytes, a multiple of PLAN_ALIGN
    int64_t bytes;   // tensor_nbytes
    int first, last; // PLACE_ARENA: first launch writing it .. last launch reading or writing it
} PlanTensor;

typedef struct PlanLaunch {
    PlanKind kind;
    char *symbol;       // PLAN_GENERATED: the function; NULL otherwise
    uint64_t signature; // cand_signature of prims (0 for PLAN_COPY)
    int sink;           // pg->prims index of the sink (-1 for PLAN_COPY)
    int n_prims;
    int *prims; // pg->prims indices, ascending, the sink last (none for PLAN_COPY)
    int n_in, n_out;
    int *in, *out; // tensor ids, in the order the runner passes them (see PlanKind)
    int n_nodes;
    char **nodes;     // ONNX node names covered (the primitives' provenance), each once, in order
    int copy_to;      // PLAN_COPY: the graph output position whose buffer it fills (n_out 0)
    double predicted; // the candidate's cost in seconds (measured or estimated; 0 for copies)
} PlanLaunch;

typedef struct PlanStats {
    int launches, generated, interp, opaque, copies;
    int intermediates;          // tensors placed in the arena
    int64_t arena_bytes;        // the arena's size: peak of the packing
    int64_t intermediate_bytes; // the sum of all intermediates (one buffer each, 64-aligned)
    int64_t live_peak_bytes;    // most bytes live at one launch: no packing can do better
    int consts;
    int64_t const_bytes; // the constant blob
    double predicted;    // sum of the launches' predicted seconds
} PlanStats;

typedef struct Plan {
    Arena *arena;  // owns everything below
    int n_tensors; // pg->n_tensors the plan was built for
    PlanTensor *tensors;
    int n_launches;
    PlanLaunch *launches;
    int n_kernels; // launches[0 .. n_kernels) are the selection's; the rest are PLAN_COPY
    int64_t arena_bytes, const_bytes;
    // Hash of the constants (each one's plan_content_hash with its offset and size): re-import
    // must reproduce it.
    uint64_t const_hash;
} Plan;

// Builds the plan of selection sel; spec[i] says how sel->kernels[i] runs. Errors (ST_INVALID)
// name the kernel: a spec that does not fit its candidate (INTERP of an opaque primitive, a
// GENERATED kernel without a symbol), a kernel reading what no earlier kernel wrote, an output
// nothing writes.
int plan_build(const PrimGraph *pg, const CandidateSet *cs, const Selection *sel,
               const PlanKernelSpec *spec, Plan **out, Err *e);
void plan_free(Plan *p); // accepts NULL

void plan_stats(const Plan *p, PlanStats *st);

// Packs the constants the plan reads into blob (plan->const_bytes, 64-byte aligned by the
// caller), zero padding between them.
void plan_pack_constants(const Plan *p, const PrimGraph *pg, void *blob);

// The 64-bit hash used for constants, checksums and model hashes (fast, not cryptographic).
uint64_t plan_hash64(const void *data, size_t n, uint64_t seed);
// The same hash, telling done (may be NULL) of each chunk of the data once it is hashed (a
// caller hashing a file's mapping gives the pages back as it goes).
uint64_t plan_hash64_chunked(const void *data, size_t n, uint64_t seed,
                             void (*done)(const void *chunk, size_t bytes));
// A constant's content hash (plan_hash64 with the seed artefacts checksum their weights with, so
// a weights index entry's checksum is the content hash of the tensor it holds).
uint64_t plan_content_hash(const void *data, size_t n);
#define PLAN_CONTENT_SEED 0x6f7263682d617274ull

// Content hashes known without reading the bytes (an artefact's weights index, whose checksums
// the section checksum covers): a constant whose data is exactly [data, data + bytes) takes
// hash, so loading a plan does not read its weights. Sorted by data, ascending.
typedef struct PlanKnownHash {
    const void *data;
    uint64_t bytes, hash;
} PlanKnownHash;

// Serialises the plan (little-endian) into a malloc'd buffer.
int plan_write(const Plan *p, uint8_t **buf, size_t *len, Err *e);
// Reads a serialised plan and checks it against pg, the primitive graph recomputed from the
// same model: indices in range, each launch's primitives, kind and signature against pg, then
// every derived field (inputs, outputs, nodes, placements, offsets, sizes) against a plan
// rebuilt from the launches. Untrusted bytes: a mismatch or truncation is an error (ST_INVALID),
// never a crash. `what` names the source in messages. known (n_known entries, may be NULL): the
// constants' content hashes that need not be computed.
int plan_read(const uint8_t *buf, size_t len, const PrimGraph *pg, const char *what,
              const PlanKnownHash *known, int n_known, Plan **out, Err *e);

#endif
