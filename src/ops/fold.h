// Static shape inference and constant folding over the operator graph.
// Needs: a loaded graph in topological order with every graph input's shape bound.
// Guarantees: every live tensor has a dtype and static shape; nodes whose data inputs are all
// constant (and shape-only nodes like Shape) are evaluated and become constants; Identity and
// inference-mode Dropout are bypassed; nodes no graph output depends on are removed.
#ifndef ORCH_FOLD_H
#define ORCH_FOLD_H

#include "../ir/graph.h"

typedef struct FoldStats {
    int nodes_before, nodes_after;
    int folded;     // nodes evaluated into constants
    int bypassed;   // Identity / Dropout removed
    int dead;       // nodes removed as unused
} FoldStats;

// Bounds on constant folding (here and in the primitive graph's clean-up, passes.c). Folding is
// an optimisation: a node past a bound stays computed at run time, where the target's kernels do
// the work far faster than the interpreter, instead of costing compile time and memory. Without
// the work bounds a few bytes of model (a MatMul of two Expanded constants) could ask for minutes.
typedef struct FoldLimits {
    size_t node_bytes;  // outputs one folded node may materialise
    size_t total_bytes; // outputs of every folded node of one graph together
    double node_flops;  // work of one folded node (node_flops / prim_flops counting)
    double total_flops; // work of every folded node of one graph together
} FoldLimits;
// The defaults: 256 MiB and 1 GiB; 2^30 and 2^32 FLOPs (about a second and four of the
// interpreter).
#define FOLD_LIMITS_DEFAULT                                                                        \
    ((FoldLimits){(size_t)256 << 20, (size_t)1 << 30, 1073741824.0, 4294967296.0})
// Process-wide; the fuzz harness lowers them so that a valid but heavy input cannot time out.
FoldLimits fold_limits(void);
void fold_set_limits(const FoldLimits *l); // NULL restores the defaults
// Largest tensor (bytes) orch accepts at all; beyond this a shape is taken as absurd.
#define TENSOR_MAX_BYTES ((int64_t)64 << 30)

int graph_infer_and_fold(Graph *g, FoldStats *stats, Err *e);

// Checks that every node's op is supported; lists all unsupported ones in one message.
int graph_check_supported(const Graph *g, Err *e);

#endif
