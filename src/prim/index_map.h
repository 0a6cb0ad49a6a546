// Index maps of LAYOUT primitives: which input element an output element reads. This is the
// semantic definition of every layout stage; the interpreter and code generators follow it.
#ifndef ORCH_INDEX_MAP_H
#define ORCH_INDEX_MAP_H

#include "prim.h"

// Maps the output multi-index `out_idx` (of a tensor with out_rank/out_dims) through the chain.
// Returns false when the element is padding (reads pad_value); otherwise fills in_idx with the
// input's multi-index. Concat primitives are handled by the caller (layout_concat_source).
bool layout_map_index(const LayoutParams *L, int out_rank, const int64_t *out_dims,
                      const int64_t *out_idx, int64_t *in_idx);

// Concat: which input an output index reads and the index within it (in place).
int layout_concat_source(const PrimGraph *pg, const Prim *p, int64_t *idx);

#endif
