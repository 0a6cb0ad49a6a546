// Operator kernels: what the emitters of both targets read off a candidate that is one OPAQUE
// primitive (an ONNX operator without a fission rule) before generating a kernel for it: which
// operator it is (op name and opset of p->node), the attributes that shape its code, the dtypes
// and shapes it handles, where each operand sits among the candidate's inputs, and its geometry
// as independent lines ([outer, len, inner] around an axis: element (o, j, i) at
// (o * len + j) * inner + i) or elements with their strides, so a kernel parallelises over lines.
// The rule every operator kernel keeps: its code depends only on what the candidate's signature
// hashes (op, opset, attributes, operand and output shapes and dtypes, which operands are
// constant), never on an operand's values, since one kernel serves every candidate of a
// signature. So TopK's k comes from its output's shape, and CumSum's axis, Trilu's k and every
// index are read when the kernel runs (an index out of range: CKERNEL_ERR_INDEX, target.h).
// Needs: a verified primitive graph and a candidate of it. Guarantees: a spec only for operators
// whose reference op (src/ops) it describes exactly; nothing is emitted.
#ifndef ORCH_CODEGEN_OPAQUE_SPEC_H
#define ORCH_CODEGEN_OPAQUE_SPEC_H

#include "../candidates/candidates.h"
#include "../ops/pool.h"
#include "../ops/sample.h"

typedef enum OpqOp {
    OPQ_TOPK,
    OPQ_CUMSUM,
    OPQ_HARDMAX,
    OPQ_TRILU,
    OPQ_GATHER,
    OPQ_GATHER_ELEMENTS,
    OPQ_SCATTER_ELEMENTS, // also the older Scatter
    OPQ_GATHER_ND,
    OPQ_SCATTER_ND,
    OPQ_ONE_HOT,
    OPQ_REVERSE_SEQUENCE,
    OPQ_LP_POOL,
    OPQ_GRID_SAMPLE,
    OPQ_ROI_ALIGN,
    OPQ_OP_COUNT
} OpqOp;

// The reductions of the scatter ops (the `reduction` attribute).
typedef enum OpqRed { OPQ_RED_NONE, OPQ_RED_ADD, OPQ_RED_MUL, OPQ_RED_MAX, OPQ_RED_MIN } OpqRed;

// A tensor seen around one axis: element (o, j, i) at (o * len + j) * inner + i.
typedef struct OpqLines {
    int64_t outer, len, inner;
} OpqLines;

#define OPQ_MAX_OPERANDS 3

typedef struct OpqSpec {
    OpqOp op;
    const Prim *p;
    int in[OPQ_MAX_OPERANDS];    // operand j's position among the candidate's inputs (-1: absent)
    bool has_out[2];             // output j is present (TopK's values, indices; others output 0)
    DType dt;                    // the data's dtype (OneHot: the output's, i.e. the values')
    DType idx_dt;                // the index operand's (int32 or int64; CumSum: the axis')
    int rank;                    // of the data (OneHot: of the indices)
    int64_t dims[ORCH_MAX_RANK]; // the data's dims (OneHot: the indices')
    int64_t strides[ORCH_MAX_RANK]; // the data's dense strides
    int axis;                       // normalised (CumSum: read at run time, -1 here)
    OpqLines x;              // the data around axis (TopK, Hardmax, Trilu: [mats, rows, cols])
    OpqLines y;              // output 0 around axis (TopK: len = k; OneHot: len = depth)
    bool largest;            // TopK
    bool exclusive, reverse; // CumSum
    bool upper;              // Trilu
    OpqRed red;              // ScatterElements, ScatterND
    // GatherElements / ScatterElements: the indices' dims (rank of the data) and whether they
    // equal the data's off the axis (then an index line is a data line).
    int64_t idx_dims[ORCH_MAX_RANK];
    bool same_off_axis;
    // Gather: x holds the data's lines around the axis, tuples the number of indices.
    // GatherND / ScatterND: batch dims b, index depth q (the indices' last dim), tuples (all
    // index tuples), tuples per batch, the data block of one batch and the slice one tuple
    // selects (elements).
    int64_t batch, depth, tuples, per_batch, block, slice;
    // ReverseSequence: the batch and time axes (0 and 1 in some order), the elements per
    // (axis 0, axis 1) position.
    int batch_axis, time_axis;
    int64_t rest;
    // LpPool: the window geometry (pool_geom, as the reference op reads it).
    PoolGeom pool;
    // GridSample, RoiAlign: their geometry (src/ops/sample.h) and the grid's or the ROIs' dtype
    // (dt2); RoiAlign's batch indices are idx_dt.
    GridSampleGeom gs;
    RoiAlignGeom ra;
    DType dt2;
} OpqSpec;

const char *opq_op_name(OpqOp op);

// The spec of candidate c when it is one OPAQUE primitive of an operator and dtypes this module
// describes; false otherwise, with the reason in why (may be NULL).
bool opq_analyse(const PrimGraph *pg, const Candidate *c, OpqSpec *s, char *why, size_t why_n);

// What the kernel moves and computes, for the targets' hardware models: bytes read and written,
// elements processed and operations per element, independent units of work (lines) and the
// length of the innermost loop.
typedef struct OpqWork {
    double bytes, elems, ops;
    int64_t units, inner;
} OpqWork;
void opq_work(const PrimGraph *pg, const OpqSpec *s, OpqWork *w);

#endif
