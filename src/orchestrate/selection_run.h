// Runs an orchestrated selection kernel by kernel on the primitive interpreter's arithmetic: each
// selected candidate's primitives are evaluated in isolation, from the tensors earlier kernels
// materialised (and graph inputs and constants) only, keeping its internal values local and
// writing only its output tensor (every output of an opaque primitive, which runs alone). The
// oracle for generated kernels and for the selection itself: the outputs must equal
// prim_interp_run's bit for bit, since every primitive does the same arithmetic in both.
// Needs: a verified primitive graph, its candidate set and a selection of it. Guarantees: outputs
// computed, or an error naming the kernel and the tensor it could not read.
#ifndef ORCH_SELECTION_RUN_H
#define ORCH_SELECTION_RUN_H

#include "orchestrate.h"

// inputs[i] holds graph input pg->inputs[i]; outputs[i] receives a malloc'd buffer for
// pg->outputs[i] (the caller frees). The kernels run in sel->kernels order, which must be
// topological: a kernel reading a tensor no earlier kernel wrote is an error, as is a kernel
// reading a tensor outside its candidate's input list.
int selection_run(const PrimGraph *pg, const CandidateSet *cs, const Selection *sel,
                  const void *const *inputs, void **outputs, Err *e);

#endif
