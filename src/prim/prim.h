// The primitive graph: every ONNX operator split into a few tensor-algebra primitives (after
// Korch), so that later stages can fuse across operator boundaries.
//   ELEMWISE  out[i] = f(in0[b0(i)], in1[b1(i)], ...): an expression program over inputs that are
//             broadcast numpy-style to the output shape.
//   REDUCE    sum/max/min/mean/prod/argmax/argmin over a set of axes, keepdims or not.
//   LAYOUT    out[i] = in[L(i)] for an index map L (a chain of stages: transpose, reshape, slice,
//             broadcast, per-axis tables for pad/resize/gather/tile), or a concat of inputs.
//   LINEAR    matmul (batched, broadcast batch) and N-D convolution / transposed convolution.
//   OPAQUE    an ONNX node with no rule, run by the reference op (a kernel of its own).
// Every primitive has exactly one output except OPAQUE; each keeps the ONNX node names it came
// from (provenance). Tensors reuse graph.h's Tensor (dtype, static shape, constant data).
#ifndef ORCH_PRIM_H
#define ORCH_PRIM_H

#include "../ir/graph.h"

typedef enum PrimKind {
    PRIM_ELEMWISE,
    PRIM_REDUCE,
    PRIM_LAYOUT,
    PRIM_LINEAR,
    PRIM_OPAQUE,
    PRIM_KIND_COUNT
} PrimKind;

const char *prim_kind_name(PrimKind k);

// ---- ELEMWISE ----
// X-macro: name, arity. Semantics in prim_eval.c; float math in double, integers in int64.
#define EW_OPS(X)                                                                                  \
    X(COPY, 1) X(NEG, 1) X(ABS, 1) X(EXP, 1) X(LOG, 1) X(SQRT, 1) X(RSQRT, 1) X(RECIP, 1)         \
    X(ERF, 1) X(TANH, 1) X(SIGMOID, 1) X(RELU, 1) X(FLOOR, 1) X(CEIL, 1) X(ROUND, 1) X(SIGN, 1)   \
    X(SIN, 1) X(COS, 1) X(TAN, 1) X(ASIN, 1) X(ACOS, 1) X(ATAN, 1) X(SINH, 1) X(COSH, 1)          \
    X(ASINH, 1) X(ACOSH, 1) X(ATANH, 1) X(SOFTPLUS, 1) X(NOT, 1) X(ISNAN, 1) X(ISINF, 1)          \
    X(ISPOSINF, 1) X(ISNEGINF, 1) X(CAST, 1)                                                      \
    X(ADD, 2) X(SUB, 2) X(MUL, 2) X(DIV, 2) X(POW, 2) X(MIN, 2) X(MAX, 2) X(MOD, 2) X(FMOD, 2)    \
    X(EQ, 2) X(LT, 2) X(LE, 2) X(GT, 2) X(GE, 2) X(AND, 2) X(OR, 2) X(XOR, 2)                     \
    X(BITSHL, 2) X(BITSHR, 2)                                                                     \
    X(WHERE, 3)

typedef enum EwOp {
#define EW_ENUM(name, arity) EW_##name,
    EW_OPS(EW_ENUM)
#undef EW_ENUM
    EW_OP_COUNT
} EwOp;

const char *ew_op_name(EwOp op);
int ew_op_arity(EwOp op);

// An operand of an instruction: a primitive input, an earlier instruction, or an immediate.
typedef enum EwSrc { EWS_INPUT, EWS_INSTR, EWS_IMM } EwSrc;

typedef struct EwArg {
    EwSrc src;
    int index;  // input number or instruction number
    double imm; // EWS_IMM value (converted to the instruction's operand type)
} EwArg;

typedef struct EwInstr {
    EwOp op;
    DType dtype;   // result type; comparisons give DT_BOOL, CAST gives its target
    EwArg arg[3];
} EwInstr;

// The program's value is its last instruction.
typedef struct EwProgram {
    int n;
    EwInstr *code;
} EwProgram;

// ---- REDUCE ----
typedef enum RedOp { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_ARGMAX, RED_ARGMIN } RedOp;
const char *red_op_name(RedOp op);

typedef struct ReduceParams {
    RedOp op;
    uint32_t axes;     // bit d set: input axis d is reduced
    bool keepdims;
    bool select_last;  // ArgMax/ArgMin: last index among equal values
} ReduceParams;

// ---- LAYOUT ----
// Stages map an index of their output space to an index of their input space; a chain is applied
// from the primitive's output towards its input. Each stage records its input rank and dims.
typedef enum LayoutStageKind {
    LS_TRANSPOSE, // in[perm[d]] = out[d]
    LS_RESHAPE,   // same element order, other dims
    LS_SLICE,     // in[d] = start[d] + out[d] * step[d]
    LS_BROADCAST, // numpy broadcast of the input to the output shape (Expand)
    LS_TABLE,     // per axis: in[d] = table[d][out[d]] (NULL table: identity); -1 = pad value
    LS_GATHER,    // in[axis] = idx[out[axis .. axis+q)]; other axes shift by q-1 (constant indices)
} LayoutStageKind;

typedef struct LayoutStage {
    LayoutStageKind kind;
    int in_rank;
    int64_t in_dims[ORCH_MAX_RANK];
    int perm[ORCH_MAX_RANK];      // LS_TRANSPOSE
    int64_t start[ORCH_MAX_RANK]; // LS_SLICE
    int64_t step[ORCH_MAX_RANK];  // LS_SLICE
    int64_t *table[ORCH_MAX_RANK]; // LS_TABLE (arena), length = the stage's output dim
    int axis;                     // LS_GATHER
    int idx_rank;                 // LS_GATHER: rank q of the index tensor
    int64_t idx_dims[ORCH_MAX_RANK];
    int64_t *idx;                 // LS_GATHER indices (normalised to >= 0), arena
} LayoutStage;

typedef struct LayoutParams {
    bool concat;       // several inputs joined along `axis` (no stages)
    int axis;
    int n_stages;      // single-input chain, stage 0 nearest the output
    LayoutStage *stages;
    double pad_value;  // value where a table gives -1
} LayoutParams;

// ---- LINEAR ----
typedef enum LinearOp { LIN_MATMUL, LIN_CONV, LIN_CONV_TRANSPOSE } LinearOp;

#define PRIM_MAX_SPATIAL (ORCH_MAX_RANK - 2)
typedef struct LinearParams {
    LinearOp op;
    // LIN_MATMUL: in0 [..., M, K] x in1 [..., K, N], both rank >= 2 (fission adds/removes the
    // unit axes of 1-D operands with LAYOUT reshapes), batch dims broadcast.
    // LIN_CONV / LIN_CONV_TRANSPOSE: in0 X [N, C, spatial...], in1 W; no bias (an ELEMWISE add).
    int n_spatial, group;
    int64_t stride[PRIM_MAX_SPATIAL], dilation[PRIM_MAX_SPATIAL];
    int64_t pad_begin[PRIM_MAX_SPATIAL], pad_end[PRIM_MAX_SPATIAL];
    int64_t out_pad[PRIM_MAX_SPATIAL]; // transposed conv: extra size at the end
} LinearParams;

// ---- the graph ----
typedef struct Prim {
    int id;              // unique within the graph, never reused (names, dumps)
    PrimKind kind;
    int n_in, n_out;
    int *in, *out;       // tensor ids (OPAQUE may have absent optional inputs: -1)
    const char *origin;  // ONNX node name(s) it came from, comma-separated
    bool dead;
    EwProgram ew;
    ReduceParams red;
    LayoutParams lay;
    LinearParams lin;
    const Node *node;    // OPAQUE: the ONNX node (owned by the source graph), run by its op
} Prim;

typedef struct PrimGraph {
    Arena *arena;
    const Graph *src;    // the operator graph it came from; owns the constants it shares
    Tensor **tensors;
    int n_tensors, cap_tensors;
    Prim **prims;        // topological order; Tensor.producer is an index into this list
    int n_prims, cap_prims;
    int next_prim_id;
    bool *owns_data;         // per tensor: data malloc'd by this graph (else borrowed from src)
    int *inputs, n_inputs;   // same order as src->inputs
    int *outputs, n_outputs; // same order as src->outputs
} PrimGraph;

PrimGraph *prim_graph_create(const Graph *src);
void prim_graph_free(PrimGraph *pg); // accepts NULL

// A computed tensor with a known shape; the name is copied.
Tensor *pg_add_tensor(PrimGraph *pg, const char *name, DType dtype, int rank, const int64_t *dims);
// A constant; `owned` data is freed with the graph, borrowed data must outlive it.
Tensor *pg_add_const(PrimGraph *pg, const char *name, DType dtype, int rank, const int64_t *dims,
                     void *data, bool owned);
// A primitive with room for n_in inputs and n_out outputs (set by the caller).
Prim *pg_add_prim(PrimGraph *pg, PrimKind kind, int n_in, int n_out, const char *origin);

// Shape helpers shared by the builders and passes.
bool pg_is_const(const PrimGraph *pg, int t);
// Drops dead primitives, keeping order; frees owned constants nothing reads any more.
void prim_graph_compact(PrimGraph *pg);
// Checks: inputs defined before use, one producer per tensor, shapes consistent with each
// primitive's parameters, outputs computed. A failure names the primitive and is a bug.
int prim_graph_verify(const PrimGraph *pg, Err *e);

// Counts per kind, for reports.
void prim_graph_counts(const PrimGraph *pg, int counts[PRIM_KIND_COUNT]);

// FLOPs of one primitive: a multiply-add is 2, an elementwise program one per instruction and
// element, a reduction one per input element, a layout none. Used by the cost model and to
// bound constant folding.
double prim_flops(const PrimGraph *pg, const Prim *p);

// A LAYOUT that moves no element: one input of its output's type, every stage a reshape or a
// transpose keeping the order of the non-unit axes (PyTorch's views: [1, S, E] <-> [S, 1, E],
// flattening). Its output is its input's bytes under other dims.
bool prim_layout_is_view(const PrimGraph *pg, const Prim *p);

#endif
