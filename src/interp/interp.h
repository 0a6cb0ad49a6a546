// The reference interpreter: runs a folded operator graph node by node with the reference op
// implementations. Simple and obviously correct; it is the oracle later stages are checked against.
// Needs: graph_infer_and_fold() done. Guarantees: every graph output computed or an error naming
// the node; intermediates freed after their last use.
#ifndef ORCH_INTERP_H
#define ORCH_INTERP_H

#include "../ir/graph.h"

// inputs[i] holds the data of graph input g->inputs[i] (shape and dtype as in the graph).
// outputs[i] receives a malloc'd buffer for g->outputs[i]; the caller frees it.
// Node timing is collected into node_ns (g->n_nodes entries) when not NULL.
int interp_run(const Graph *g, const void *const *inputs, void **outputs, int64_t *node_ns,
               Err *e);

#endif
