// Model statistics for reports: FLOPs per node (multiply-add counted as 2), parameter counts.
// Needs shapes (after graph_infer_and_fold for computed tensors).
#ifndef ORCH_STATS_H
#define ORCH_STATS_H

#include "graph.h"

int64_t node_flops(const Graph *g, const Node *n);
int64_t graph_flops(const Graph *g);

#endif
