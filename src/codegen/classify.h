// What the pointwise and reduction emitters of both targets read off a candidate before they
// choose configs: its kernel class, and the per-element arithmetic and the traffic their
// hardware models price.
// Needs: a verified primitive graph and a candidate of it. Guarantees: nothing is emitted;
// the numbers are estimates for ranking configs, not measurements.
#ifndef ORCH_CODEGEN_CLASSIFY_H
#define ORCH_CODEGEN_CLASSIFY_H

#include "../candidates/candidates.h"

// The classes cgen_classify returns (0: neither). The C target numbers its pointwise and
// reduction kernel classes (KernelConfig.cls) by them too.
enum { CCLS_POINTWISE = 1, CCLS_REDUCE = 2 };

// CCLS_POINTWISE for a candidate of ELEMWISE/LAYOUT primitives, CCLS_REDUCE when REDUCE
// primitives are among them, 0 with a LINEAR or OPAQUE primitive, a primitive of several
// outputs, or a tensor of a dtype without a C type (cgen_dtype_ok).
int cgen_classify(const PrimGraph *pg, const Candidate *c);
bool cgen_dtype_ok(DType t);
// Arithmetic cost of one output element (vector-op units): transcendental calls count more.
double cgen_ops_per_elem(const PrimGraph *pg, const Candidate *c);
// Bytes a kernel moves: each input once (gathers and broadcasts re-read from cache) plus the
// output.
double cgen_traffic_bytes(const PrimGraph *pg, const Candidate *c);

#endif
