// Human-readable dumps of the two graphs `orch inspect` shows: text (counts, then one line per
// node or primitive with its parameters, tensors and provenance) and Graphviz dot text.
// Needs: a folded operator graph or a primitive graph (shapes known). Writes only to the FILE.
#ifndef ORCH_FISSION_DUMP_H
#define ORCH_FISSION_DUMP_H

#include "prim.h"

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

#endif
