// The candidate's kernel class and cost pieces (classify.h).
#include "classify.h"

bool cgen_dtype_ok(DType t) {
    return dtype_size(t) > 0 && t != DT_STRING;
}

int cgen_classify(const PrimGraph *pg, const Candidate *c) {
    bool reduce = false;
    for (int k = 0; k < c->n_prims; k++) {
        const Prim *p = pg->prims[c->prims[k]];
        if (p->kind == PRIM_LINEAR || p->kind == PRIM_OPAQUE || p->n_out != 1)
            return 0;
        reduce = reduce || p->kind == PRIM_REDUCE;
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] < 0 || !cgen_dtype_ok(pg->tensors[p->in[j]]->dtype))
                return 0;
        if (!cgen_dtype_ok(pg->tensors[p->out[0]]->dtype))
            return 0;
    }
    return reduce ? CCLS_REDUCE : CCLS_POINTWISE;
}

double cgen_ops_per_elem(const PrimGraph *pg, const Candidate *c) {
    double ops = 0;
    for (int k = 0; k < c->n_prims; k++) {
        const Prim *p = pg->prims[c->prims[k]];
        if (p->kind == PRIM_LAYOUT) {
            ops += p->lay.concat ? 2 : p->lay.n_stages;
            continue;
        }
        if (p->kind != PRIM_ELEMWISE)
            continue;
        for (int i = 0; i < p->ew.n; i++) {
            // One cost class a line.
            // clang-format off
            switch (p->ew.code[i].op) {
            case EW_EXP: case EW_LOG: case EW_ERF: case EW_TANH: case EW_SIGMOID: case EW_POW:
            case EW_SOFTPLUS: case EW_SIN: case EW_COS: case EW_TAN: case EW_ASIN: case EW_ACOS:
            case EW_ATAN: case EW_SINH: case EW_COSH: case EW_ASINH: case EW_ACOSH:
            case EW_ATANH: ops += 20; break;
            case EW_DIV: case EW_SQRT: case EW_RSQRT: case EW_RECIP: ops += 4; break;
            default: ops += 1;
            }
            // clang-format on
        }
    }
    return ops;
}

double cgen_traffic_bytes(const PrimGraph *pg, const Candidate *c) {
    double b = (double)tensor_nbytes(pg->tensors[c->output]);
    for (int j = 0; j < c->n_inputs; j++)
        b += (double)tensor_nbytes(pg->tensors[c->inputs[j]]);
    return b;
}
