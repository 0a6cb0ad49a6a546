// The ONNX operator table: for each supported op, a shape rule (infer) and a plain reference
// implementation (run). The reference interpreter (interp/interp.c) and constant folding
// (ir/fold.c) call them; later stages use the shape rules and the reference as their oracle.
//
// Contract for an op:
//  - infer(g, n, e): all inputs have dtype and shape (constants also data). Checks arity-dependent
//    attributes, input dtypes and shapes, and sets dtype/shape of every present output with
//    tensor_set_shape(). It may read constant inputs (e.g. Reshape's shape); when such an input is
//    not constant it fails with ST_UNSUPPORTED naming the input. User-caused problems return
//    ST_INVALID (malformed) or ST_UNSUPPORTED (valid ONNX orch does not do) with op_err().
//  - run(r, e): computes every present output into r->y[i], buffers allocated by the caller with
//    the inferred sizes. No allocation of outputs, no shape checks beyond infer's.
#ifndef ORCH_OPS_H
#define ORCH_OPS_H

#include "../ir/graph.h"

typedef struct OpRun {
    const Graph *g;
    const Node *n;
    const Tensor *const *in; // n->n_in entries; NULL for an absent optional input
    const void *const *x;    // input data, same indexing
    const Tensor *const *out; // n->n_out entries; NULL for an absent optional output
    void *const *y;          // output buffers
} OpRun;

typedef int (*OpInferFn)(Graph *g, Node *n, Err *e);
typedef int (*OpRunFn)(const OpRun *r, Err *e);

enum {
    OPF_SHAPE_ONLY = 1, // outputs depend only on input shapes (Shape, Size): always folded
    OPF_NO_FOLD = 2,    // never folded even with constant inputs (none yet; for random ops)
};

typedef struct OpDef {
    const char *name;   // op_type in the default ONNX domain; NULL ends a table
    OpInferFn infer;
    OpRunFn run;
    int min_in, max_in;   // max_in -1: variadic
    int min_out, max_out;
    unsigned flags;
} OpDef;

// The tables, one per family (ops_*.c), each ended by an entry with name NULL.
extern const OpDef ops_elementwise[];
extern const OpDef ops_linear[];
extern const OpDef ops_reduce[];
extern const OpDef ops_layout[];
extern const OpDef ops_rnn[]; // LSTM, GRU, RNN (rnn.c)
extern const OpDef ops_control[]; // If, Loop: inlined while folding (control_flow.c)
extern const OpDef ops_sample[];  // GridSample, RoiAlign (sample.c)
// The sequence ops, resolved while folding into tensor ops (sequence.c).
extern const OpDef ops_sequence[];

// Finds the op for (domain, op_type); "" and "ai.onnx" are the default domain. NULL if unknown.
const OpDef *ops_find(const char *domain, const char *op);
// Calls the visitor for every supported op name (for `orch info --ops` and docs).
void ops_each(void (*visit)(const OpDef *def, void *ctx), void *ctx);

// ---- helpers for op implementations ----

// Sets an error prefixed with "node 'NAME' (OP): ".
int op_err(Err *e, int code, const Node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Reads a constant integer input (int64 or int32, any rank) into vals (at most max). Returns
// ST_OK and sets *count; fails with ST_UNSUPPORTED if the input is not constant after folding,
// ST_INVALID if it holds more than max values or has another dtype. An absent input gives count -1.
int op_const_ints(const Graph *g, const Node *n, int i, int64_t *vals, int max, int *count,
                  Err *e);
// Reads a constant scalar float input (any float or int dtype); absent: *out = dflt.
int op_const_float(const Graph *g, const Node *n, int i, double dflt, double *out, Err *e);

// Normalises an axis in [-rank, rank) to [0, rank); fails naming the attribute otherwise.
int op_axis(const Node *n, int64_t axis, int rank, const char *what, int *out, Err *e);

// Multidirectional (numpy) broadcasting of inputs [first, first+count): sets out rank/dims.
int op_broadcast_shape(const Graph *g, const Node *n, int first, int count, int *rank,
                       int64_t *dims, Err *e);
// Element strides of `in` viewed at the output's shape (0 on broadcast axes), for iterating.
void op_broadcast_strides(const Tensor *in, int out_rank, const int64_t *out_dims,
                          int64_t *strides);

// Requires input i present with one of the listed dtypes (DT_UNDEFINED ends the list).
int op_need_dtype(const Graph *g, const Node *n, int i, const DType *allowed, Err *e);

#endif
