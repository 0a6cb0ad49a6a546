// Sequence-typed values resolved at compile time: a sequence is a list of the graph's tensors,
// known while folding (Loops are unrolled, Ifs inlined), so every sequence op becomes plain
// tensor ops (Identity, Concat, Unsqueeze, Split, Squeeze, SequenceMap's body) or a constant.
// Needs the node's inputs inferred and folded (graph_infer_and_fold calls it in its sweep).
// Guarantees the node dead and its replacement right after it, or one error naming the node.
#ifndef ORCH_SEQUENCE_H
#define ORCH_SEQUENCE_H

#include "../ir/graph.h"

// One sequence value: its elements (tensor ids, in order) and their element type.
typedef struct SeqValue {
    bool is_seq;
    DType dtype; // DT_UNDEFINED while empty and untyped
    int n;
    int *elems;
} SeqValue;

// The sequence values of one sweep, indexed by tensor id (grown on demand).
typedef struct SeqMap {
    SeqValue *v;
    int cap;
} SeqMap;

void seq_map_free(SeqMap *m);

// Whether n is one of the sequence ops of the default domain.
bool seq_is_sequence_op(const Node *n);
// Whether one of n's inputs is a sequence value of m.
bool seq_reads_sequence(const SeqMap *m, const Node *n);

// Resolves g->nodes[k] (a sequence op, or any node reading a sequence, inputs remapped): records
// the sequences it makes in m and inserts the tensor ops it stands for right after it. A node
// reading a sequence where a tensor is expected, a position or split computed at run time, and a
// sequence that is a graph output fail with ST_UNSUPPORTED naming the node.
int seq_expand(Graph *g, int k, SeqMap *m, Err *e);

#endif
