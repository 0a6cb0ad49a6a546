// What the unit tests need to build a primitive graph by hand, written once: graph inputs and
// outputs (the rest is src/prim/prim_build.h's builders). canonical_graphs.h and the emitters'
// tests build on it.
#ifndef ORCH_TEST_GRAPH_BUILDER_H
#define ORCH_TEST_GRAPH_BUILDER_H

#include "prim/prim.h"

// A graph input of the given dtype and shape; returns its tensor id.
static inline int gb_input_of(PrimGraph *pg, const char *name, DType dt, int rank,
                              const int64_t *dims) {
    Tensor *t = pg_add_tensor(pg, name, dt, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

// A float32 graph input of the given shape; returns its tensor id.
static inline int gb_input(PrimGraph *pg, const char *name, int rank, const int64_t *dims) {
    return gb_input_of(pg, name, DT_FLOAT, rank, dims);
}

// Makes tensor t a graph output.
static inline void gb_output(PrimGraph *pg, int t) {
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = t;
}

#endif
