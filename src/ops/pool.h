// Window geometry of the pooling ops (MaxPool, AveragePool, LpPool), shared by their reference
// implementation (pool.c) and their fission rule (fission/rules_reduce.c), so both read the
// attributes, pads and ceil_mode rules the same way.
#ifndef ORCH_OPS_POOL_H
#define ORCH_OPS_POOL_H

#include "../ir/graph.h"

// Per spatial axis: kernel k, stride s, dilation d, begin/end pads, input and output sizes. S is
// the number of spatial axes. Also the per-op attributes the window needs.
typedef struct PoolGeom {
    int S;
    int64_t k[ORCH_MAX_RANK], s[ORCH_MAX_RANK], d[ORCH_MAX_RANK];
    int64_t pb[ORCH_MAX_RANK], pe[ORCH_MAX_RANK], in[ORCH_MAX_RANK], out[ORCH_MAX_RANK];
    bool include_pad; // AveragePool's count_include_pad
    bool col_major;   // MaxPool's storage_order 1
    double p;         // LpPool's exponent
} PoolGeom;

// Output sizes and effective pads of pooling node n over input x as the ONNX spec defines them,
// including its rule that with ceil_mode a window may not start in the end padding.
int pool_geom(const Node *n, const Tensor *x, PoolGeom *p, Err *e);

#endif
