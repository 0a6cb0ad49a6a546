// Human-readable dumps of what `orch inspect` shows: the operator and primitive graphs as text
// (counts, then one line per node or primitive with its parameters, tensors and provenance) and
// Graphviz dot text; the candidate kernels (counts, segments); and an orchestrated plan (the BLP's
// result and the chosen kernels, drawn as coloured clusters of the primitive graph).
// Needs: a folded operator graph or a primitive graph (shapes known), and for the later stages its
// candidate set and selection. Writes only to the FILE.
#ifndef ORCH_INSPECT_DUMP_H
#define ORCH_INSPECT_DUMP_H

#include "../orchestrate/cost_model.h"
#include "../orchestrate/orchestrate.h"
#include "../prim/prim.h"

#include <stdio.h>

// "12 (elementwise 5, reduce 2, layout 3, linear 2, opaque 0)"
void prim_counts_print(FILE *f, const int counts[PRIM_KIND_COUNT]);

// Counts per kind, the graph's inputs and outputs, then one line per primitive:
//   #3 elementwise {%0 = SUB(in0, in1); %1 = EXP(%0)}  (x: float32 2x3, m: float32 2x1)
//      -> e: float32 2x3  [from sm]
// (on one line), inputs by name with dtype and shape, constants marked, small ones with values.
void prim_graph_print(FILE *f, const PrimGraph *pg);

// Graphviz dot: one box per primitive coloured by kind (with a legend), labelled with its kind,
// short parameters and provenance; tensors are edges labelled with their shapes; graph inputs,
// outputs and constants are nodes of their own.
void prim_graph_dot(FILE *f, const PrimGraph *pg);

// "  MatMul 4, Add 2, Softmax 1" (most frequent first), or "  (none)".
void op_histogram_print(FILE *f, const Graph *g);

// The operator graph: the op histogram, then one line per node with its attributes, input and
// output tensors; and the same graph as dot (nodes labelled with op and name).
void op_graph_print(FILE *f, const Graph *g);
void op_graph_dot(FILE *f, const Graph *g);

// Candidate counts (primitives, candidates, distinct signatures, segments, enumeration time),
// candidates per size, and one line per segment.
void cand_set_print(FILE *f, const CandidateSet *cs);
// The primitive graph with each segment as a cluster.
void cand_segments_dot(FILE *f, const CandidateSet *cs);

// The BLP's result (objective, bound, gap, time, size), a comparison with one kernel per
// primitive, then the chosen kernels in execution order, each with its estimated cost on d, the
// ONNX nodes it covers, its output and its primitives.
void plan_print(FILE *f, const CandidateSet *cs, const Selection *sel, const Device *d);
// The primitive graph with every chosen kernel as a coloured cluster. A primitive recomputed by
// several kernels is drawn once in each; an edge into a kernel comes from the kernel that
// materialises the tensor (or from a graph input or constant).
void plan_dot(FILE *f, const CandidateSet *cs, const Selection *sel);
// Any grouping of primitives into kernels as Graphviz dot, each group a labelled cluster (an
// artefact's plan, whose launches the CLI turns into groups).
typedef struct PrimGroup {
    const int *prims; // ascending indices into pg->prims
    int n;
    int output;        // the tensor it materialises (-1: every primitive's outputs)
    const char *label; // the cluster's title
} PrimGroup;
void prim_groups_dot(FILE *f, const PrimGraph *pg, const PrimGroup *groups, int n);

#endif
