// The primitive interpreter: runs a primitive graph directly, one primitive at a time, with the
// semantics of prim.h spelled out as plainly as possible. It is the oracle for generated kernels.
// Needs: a verified primitive graph. Guarantees: outputs computed, or an error naming the primitive.
#ifndef ORCH_PRIM_INTERP_H
#define ORCH_PRIM_INTERP_H

#include "../prim/prim.h"

// inputs[i] holds graph input pg->inputs[i]; outputs[i] receives a malloc'd buffer for
// pg->outputs[i] (the caller frees).
int prim_interp_run(const PrimGraph *pg, const void *const *inputs, void **outputs, Err *e);
// The same with every float32 operand of every LINEAR primitive first rounded to mantissa_bits
// (to nearest even; 10 emulates TF32 and FP16 operands, 7 BF16), the products still exact
// float32: what a reduced --precision's tensor-core kernels compute, up to their summation
// order. The compile driver measures with it how far a model's outputs move under that rounding.
int prim_interp_run_rounded(const PrimGraph *pg, const void *const *inputs, void **outputs,
                            int mantissa_bits, Err *e);

// Runs the graph and keeps every tensor's value: values[t] for t < pg->n_tensors (constants point
// at their data, every other value is malloc'd and freed by prim_values_free).
int prim_interp_values(const PrimGraph *pg, const void *const *inputs, void ***values, Err *e);
void prim_values_free(const PrimGraph *pg, void **values);

// Evaluates one single-output, non-opaque primitive into y (used by constant folding too).
int prim_eval(const PrimGraph *pg, const Prim *p, const void *const *x, void *y, Err *e);
// Runs an OPAQUE primitive: its ONNX node's reference op, writing every present output.
int prim_eval_opaque(const PrimGraph *pg, const Prim *p, const void *const *x, void *const *y,
                     Err *e);

#endif
