// The analytical cost model used until targets measure kernels: a roofline estimate per candidate
// for a named device, time = max(bytes / bandwidth, FLOPs / peak) + launch overhead.
// Needs: a candidate set of a primitive graph with known shapes. Guarantees: every candidate gets
// a finite, positive cost, the same for candidates with equal signatures.
#ifndef ORCH_COST_MODEL_H
#define ORCH_COST_MODEL_H

#include "../candidates/candidates.h"

typedef struct Device {
    const char *name;  // "h100", "h200", "cpu", ...
    const char *desc;  // what the numbers describe
    double bandwidth;  // bytes/s, main memory (HBM or DRAM)
    double peak_flops; // FLOP/s, fp32 without tensor cores (the primitives compute in fp32)
    double launch;     // seconds per kernel launch
} Device;

// The device of that name (case-insensitive), or NULL. "cpu" scales its peak with the cores
// this process may use, so the returned struct is filled on each call from static storage.
const Device *cost_model_find(const char *name);
// "h100, h200, a100, cpu": the names cost_model_find knows, for messages.
const char *cost_model_names(void);

typedef struct CostEstimate {
    double bytes;   // external inputs read (each once) + the output written
    double flops;   // summed over the candidate's primitives (redundant work counted)
    double seconds; // roofline time plus launch
} CostEstimate;

CostEstimate cost_model_estimate(const PrimGraph *pg, const Candidate *c, const Device *d);
// Sets Candidate.cost of every candidate in the set.
void cost_model_fill(CandidateSet *cs, const Device *d);

#endif
