// The operator graph: tensors with dtype and static shape, ONNX nodes with attributes and
// provenance. Produced by onnx/load.c, completed by ir/fold.c (shapes of every tensor, shape-only
// subgraphs folded to constants, dead and Identity nodes removed), read by everything after.
//
// Invariants after graph_infer_and_fold(): every live tensor has dtype and a static shape;
// g->nodes is in topological order; every node input is a graph input, a constant or the output
// of an earlier node.
#ifndef ORCH_GRAPH_H
#define ORCH_GRAPH_H

#include "../base/arena.h"
#include "../base/common.h"

#include <stdbool.h>
#include <stdint.h>

#define ORCH_MAX_RANK 8

// Element types, numbered as ONNX TensorProto.DataType so they pass through unchanged.
typedef enum DType {
    DT_UNDEFINED = 0,
    DT_FLOAT = 1,
    DT_UINT8 = 2,
    DT_INT8 = 3,
    DT_UINT16 = 4,
    DT_INT16 = 5,
    DT_INT32 = 6,
    DT_INT64 = 7,
    DT_STRING = 8,
    DT_BOOL = 9,
    DT_FLOAT16 = 10,
    DT_DOUBLE = 11,
    DT_UINT32 = 12,
    DT_UINT64 = 13,
    DT_BFLOAT16 = 16,
} DType;

size_t dtype_size(DType t);        // 0 for types orch cannot store
const char *dtype_name(DType t);   // "float32", "int64", ...; "type N" for others
bool dtype_is_float(DType t);      // float16/bfloat16/float32/double

// float16 / bfloat16 conversions (round to nearest even).
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

// Reads element i of a buffer of dtype t as double / int64 and writes one back; used by
// generic (non-float32) paths such as Cast and int arithmetic.
double elem_get_f64(DType t, const void *p, int64_t i);
int64_t elem_get_i64(DType t, const void *p, int64_t i);
void elem_set_f64(DType t, void *p, int64_t i, double v);
void elem_set_i64(DType t, void *p, int64_t i, int64_t v);


typedef enum TensorKind {
    TK_VALUE = 0, // computed by a node at run time
    TK_INPUT,     // graph input, bound by the caller
    TK_CONST,     // initializer, Constant node or folded value; data is set
} TensorKind;

typedef struct Tensor {
    int id;           // index in Graph.tensors
    const char *name; // ONNX name
    DType dtype;
    int rank;         // -1 until inferred
    int64_t dims[ORCH_MAX_RANK];
    TensorKind kind;
    void *data;       // TK_CONST: malloc'd, owned by the graph, dense row-major
    int producer;     // index of the producing node, -1 for inputs and constants
    bool is_output;   // a graph output
} Tensor;

// Attribute kinds, numbered as ONNX AttributeProto.AttributeType.
typedef enum AttrType {
    AT_UNDEFINED = 0,
    AT_FLOAT = 1,
    AT_INT = 2,
    AT_STRING = 3,
    AT_TENSOR = 4,
    AT_GRAPH = 5,
    AT_FLOATS = 6,
    AT_INTS = 7,
    AT_STRINGS = 8,
    AT_TENSORS = 9,
    AT_GRAPHS = 10,
    AT_SPARSE_TENSOR = 11,
    AT_SPARSE_TENSORS = 12,
    AT_TYPE_PROTO = 13,
    AT_TYPE_PROTOS = 14,
} AttrType;

typedef struct Attr {
    const char *name;
    AttrType type;
    int64_t i;
    float f;
    const char *s;  // AT_STRING, NUL-terminated (ONNX strings are bytes; embedded NULs cut)
    int n;          // element count for AT_INTS / AT_FLOATS / AT_STRINGS
    int64_t *ints;
    float *floats;
    const char **strings;
    Tensor *t;      // AT_TENSOR: a detached constant tensor (id -1) owned by the graph
    struct SubGraph *g; // AT_GRAPH: the body (If's branches, Loop's body), in the graph's arena
} Attr;

typedef struct Node {
    int id;           // index in Graph.nodes at creation; stable, used in messages
    const char *name; // ONNX node name (provenance); synthesised as "<op>_<n>" when empty
    const char *op;   // op_type
    const char *domain; // "" for the default ONNX domain
    int opset;        // opset version in force for the node's domain
    int n_in, n_out, n_attr;
    int *in;          // tensor ids; -1 for an absent optional input
    int *out;         // tensor ids; -1 for an absent optional output
    Attr *attr;
    bool dead;        // removed by a pass; skipped by every consumer
    // The last n_implicit inputs are outer-scope tensors its subgraph attributes read (each
    // graph attribute's SubGraph.outer in attribute order), so ordering and liveness see them.
    int n_implicit;
    // First attribute a typed getter found with the wrong type (and the type it wanted); the
    // getters return the default then, and graph_infer_and_fold reports it after the shape rule.
    const Attr *attr_mismatch;
    AttrType attr_wanted;
} Node;

// A graph attribute's body (If's branches, Loop's body) as the file names it, kept unresolved
// until ops/control_flow.c inlines it into the graph. Names: formal inputs, constants and node
// outputs are the body's own scope; every other name a node reads is in `outer`, resolved in
// the enclosing scope through the owning node's implicit inputs.
typedef struct SubNode {
    const char *name, *op, *domain;
    int opset;
    int n_in, n_out, n_attr, n_implicit; // inputs: declared, then the nested bodies' outer names
    const char **in, **out;              // "" for an absent optional one
    Attr *attr;
} SubNode;

typedef struct SubGraph {
    const char *name;
    int n_in, n_out, n_consts, n_nodes, n_outer;
    const char **in, **out; // formal inputs and outputs
    Tensor **consts;        // initializers and Constant nodes: detached tensors owned by the graph
    SubNode *nodes;         // in the file's order (ONNX requires it topological)
    const char **outer;     // names read from the enclosing scope, each once
} SubGraph;

typedef struct Graph {
    Arena *arena;
    const char *path;      // model file, for messages
    const char *name;      // graph name
    int64_t ir_version;
    int opset;             // default-domain opset
    const char *producer;  // producer_name + version, informational
    Tensor **tensors;
    int n_tensors, cap_tensors;
    Node **nodes;          // topological order
    int n_nodes, cap_nodes;
    int *inputs;           // non-constant graph inputs, in declaration order
    int n_inputs;
    int *outputs;
    int n_outputs;
    Tensor **owned_attr_tensors; // detached tensors from attributes, freed with the graph
    int n_owned, cap_owned;
    int *name_slots;       // open-addressing hash of tensor names -> id (-1 empty)
    int name_cap;
    // Constant data in [borrowed, borrowed + borrowed_size) is not the graph's: an artefact's
    // weights, used in place (graph_borrow); graph_free leaves it.
    const uint8_t *borrowed;
    size_t borrowed_size;
    bool borrowed_mapped; // a private read-only file mapping: unwritten pages can be given back
} Graph;

Graph *graph_create(const char *path);
void graph_free(Graph *g); // accepts NULL
// Marks [data, data + size) as bytes the graph's constants may point into without owning them.
void graph_borrow(Graph *g, const void *data, size_t size);
// Whether the graph owns (frees) constant data at p: false for borrowed bytes.
bool graph_owns_data(const Graph *g, const void *p);
// Gives the whole pages of borrowed bytes [p, p + n) back to the system where they map a file
// (borrowed_mapped; a no-op otherwise): a pass that has read a weight it no longer needs drops it
// from the resident set, and a later reader has the pages read from the file again.
void graph_release_borrowed(const Graph *g, const void *p, size_t n);

// Adds a tensor with an unknown shape; the name is copied. Returns it.
Tensor *graph_add_tensor(Graph *g, const char *name);
// Looks a tensor up by name (linear scan for small graphs, hashed otherwise); NULL if absent.
Tensor *graph_find_tensor(const Graph *g, const char *name);
Node *graph_add_node(Graph *g, const char *op, const char *domain, const char *name, int n_in,
                     int n_out, int n_attr);
// Moves the nodes appended since g->n_nodes was `first` to right after g->nodes[k], so a sweep
// at k reaches them next (a node replaced by others while folding).
void graph_move_appended(Graph *g, int k, int first);
// A tensor not registered in the graph (attribute payloads); freed with the graph.
Tensor *graph_detached_tensor(Graph *g, const char *name);

// Number of elements (1 for rank 0). Requires a known shape.
int64_t tensor_numel(const Tensor *t);
size_t tensor_nbytes(const Tensor *t);
// Whether a and b have the same rank and dims (dtypes aside).
static inline bool tensor_same_shape(const Tensor *a, const Tensor *b) {
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}
// "1x3x224x224" (or "scalar") into buf.
const char *shape_str(const int64_t *dims, int rank, char *buf, size_t n);
const char *tensor_shape_str(const Tensor *t, char *buf, size_t n);
// Sets dtype/shape. Used by shape inference.
void tensor_set_shape(Tensor *t, DType dtype, int rank, const int64_t *dims);

// Attribute lookup by name. The typed getters return the default when absent, and also when the
// attribute has another type, which they record in the node (see Node.attr_mismatch).
const Attr *node_attr(const Node *n, const char *name);
int64_t node_attr_i(const Node *n, const char *name, int64_t dflt);
float node_attr_f(const Node *n, const char *name, float dflt);
const char *node_attr_s(const Node *n, const char *name, const char *dflt);
// Returns the element count (or -1 when absent) and sets *v to the array.
int node_attr_ints(const Node *n, const char *name, const int64_t **v);
int node_attr_floats(const Node *n, const char *name, const float **v);

const char *attr_type_name(AttrType t);

// Input/output tensor of a node, or NULL when absent (index past the end or an empty name).
Tensor *node_input(const Graph *g, const Node *n, int i);
Tensor *node_output(const Graph *g, const Node *n, int i);

// Orders g->nodes topologically, checking that every input is defined. Errors name the node.
int graph_toposort(Graph *g, Err *e);
// Drops dead nodes from g->nodes and tensors nothing refers to. Keeps the order.
void graph_compact(Graph *g);
// Checks the invariants above; a failure is a bug in a pass (ST_RUNTIME with the detail).
int graph_verify(const Graph *g, Err *e);

#endif
