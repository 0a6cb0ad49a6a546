// The pieces of a reduction both reduction emitters share (reduce_spec.h).
#include "reduce_spec.h"

#include "fmt.h"

#include <stdio.h>

bool red_read_on_row(const PrimGraph *pg, const Prim *p, int rank, uint32_t red, bool root_is_space,
                     const CexprRead *rq) {
    if (!rq->affine)
        return false;
    const Tensor *O = pg->tensors[p->out[0]];
    int j = 0;
    for (int d = 0; d < rank; d++) {
        bool reduced = (red >> d) & 1;
        if (reduced && !p->red.keepdims)
            continue;
        if (j >= rq->rank)
            return false;
        // Expected: reduced (keepdims) coordinates 0; kept ones the root coordinate of axis d
        // (root = the space) or j (root = the sink, which has the reduction's output shape).
        int want = reduced ? -1 : (root_is_space ? d : j);
        int64_t ext = O->dims[j];
        if (rq->cst[j] != 0)
            return false;
        for (int q = 0; q < ORCH_MAX_RANK; q++) {
            int64_t e = (q == want && ext != 1) ? 1 : 0;
            if (rq->coef[j][q] != e && !(ext == 1 && rq->coef[j][q] == 0))
                return false;
        }
        j++;
    }
    return j == rq->rank;
}

const char *red_init(RedOp op, bool fl) {
    switch (op) {
    case RED_PROD: return fl ? "1.0" : "1";
    case RED_MAX: return fl ? "-INFINITY" : "INT64_MIN";
    case RED_MIN: return fl ? "INFINITY" : "INT64_MAX";
    default: return "0";
    }
}

void red_result_conv(DType ot, bool arg, const char *val, char *buf, size_t cap, bool *truncated) {
    if (arg)
        cg_fmt(truncated, buf, cap, "(int64_t)(%s)", val);
    else if (ot == DT_FLOAT16)
        cg_fmt(truncated, buf, cap, "orch_round_f16((double)(%s))", val);
    else if (ot == DT_BFLOAT16)
        cg_fmt(truncated, buf, cap, "orch_round_bf16((double)(%s))", val);
    else if (ot == DT_BOOL)
        cg_fmt(truncated, buf, cap, "(uint8_t)((%s) != 0)", val);
    else if (dtype_is_float(ot))
        cg_fmt(truncated, buf, cap, "(%s)(%s)", cgen_vtype(ot), val);
    else
        cg_fmt(truncated, buf, cap, "(%s)(int64_t)(%s)", cgen_ctype(ot), val);
}

void red_dense_offset(const Tensor *T, const char *const *idx, char *buf, size_t cap,
                      bool *truncated) {
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, "0");
    int64_t st = 1;
    for (int d = T->rank - 1; d >= 0; d--) {
        if (T->dims[d] != 1)
            sb_printf(&b, " + %s * %lld", idx[d], (long long)st);
        st *= T->dims[d];
    }
    cg_fmt(truncated, buf, cap, "%s", b.s);
    sb_free(&b);
}

int red_out_idx(int rank, uint32_t red, bool keepdims, char names[][16], const char **idx) {
    int j = 0;
    for (int d = 0; d < rank; d++) {
        bool reduced = (red >> d) & 1;
        if (reduced && !keepdims)
            continue;
        snprintf(names[j], 16, reduced ? "0" : "i%d", d); // fits: d < ORCH_MAX_RANK
        idx[j] = names[j];
        j++;
    }
    return j;
}
