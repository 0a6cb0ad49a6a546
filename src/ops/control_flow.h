// Control flow resolved at compile time: an If whose condition folds to a constant becomes its
// taken branch, a Loop with a static trip count becomes its unrolled body. Needs the node's
// inputs inferred and folded (graph_infer_and_fold calls it when its sweep reaches the node).
// Guarantees the node dead and the body's nodes right after it, or one error naming the node.
#ifndef ORCH_CONTROL_FLOW_H
#define ORCH_CONTROL_FLOW_H

#include "../ir/graph.h"

// Most nodes one Loop may unroll to (trip count x body nodes), and most nodes inlining may grow
// a graph to: past them a loop is refused by name rather than exhausting memory and time.
#define CTRL_MAX_UNROLLED_NODES 65536
#define CTRL_MAX_GRAPH_NODES (1 << 20)

// Whether n is an If or a Loop of the default domain.
bool ctrl_is_control(const Node *n);

// Replaces g->nodes[k] (an If or a Loop whose inputs are inferred and remapped) by the nodes of
// its taken branch or of every iteration, inserted right after it; their first tensors are
// g->n_tensors at the call. Data-dependent control flow fails with ST_UNSUPPORTED naming the node.
int ctrl_expand(Graph *g, int k, Err *e);

// Copies the graph attribute `attr` of n into the graph once (nodes appended, tensors named
// under prefix), its formal inputs bound to formals[0..n_formals), its outer names to n's
// implicit inputs; writes the tensors its outputs denote to outs[0..n_outs). SequenceMap applies
// its body this way to each element. Fails naming n when the body's arity differs.
int ctrl_inline_attr(Graph *g, const Node *n, const char *attr, const int *formals, int n_formals,
                     const char *prefix, int *outs, int n_outs, Err *e);

#endif
