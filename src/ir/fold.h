// Static shape inference and constant folding over the operator graph.
// Needs: a loaded graph in topological order with every graph input's shape bound.
// Guarantees: every live tensor has a dtype and static shape; nodes whose data inputs are all
// constant (and shape-only nodes like Shape) are evaluated and become constants; Identity and
// inference-mode Dropout are bypassed; nodes no graph output depends on are removed.
#ifndef ORCH_FOLD_H
#define ORCH_FOLD_H

#include "graph.h"

typedef struct FoldStats {
    int nodes_before, nodes_after;
    int folded;     // nodes evaluated into constants
    int bypassed;   // Identity / Dropout removed
    int dead;       // nodes removed as unused
} FoldStats;

// Largest tensor (bytes) constant folding will materialise; bigger ones stay computed at run time.
#define FOLD_MAX_BYTES ((size_t)256 << 20)
// Largest tensor (bytes) orch accepts at all; beyond this a shape is taken as absurd.
#define TENSOR_MAX_BYTES ((int64_t)64 << 30)

int graph_infer_and_fold(Graph *g, FoldStats *stats, Err *e);

// Checks that every node's op is supported; lists all unsupported ones in one message.
int graph_check_supported(const Graph *g, Err *e);

#endif
