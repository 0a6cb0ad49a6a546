// Affine reads of kernel inputs (affine_load.h): layout maps evaluated at sample points.
#include "affine_load.h"

#include "../../prim/index_map.h"
#include "../../codegen/cexpr.h"

#include <string.h>

static int64_t dense_offset(const Tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++)
        off = off * t->dims[d] + idx[d];
    return off;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Offset of the source element of t's element idx under the LAYOUT p (-1: padding).
static int64_t layout_offset(const Prim *p, const Tensor *T, const Tensor *src,
                             const int64_t *idx) {
    int64_t in[ORCH_MAX_RANK];
    return layout_map_index(&p->lay, T->rank, T->dims, idx, in) ? dense_offset(src, in) : -1;
}

// Stages that can make up an affine map: transposes, reshapes, slices and gathers of an
// arithmetic progression of indices (a scalar one: a packed QKV's Q, K or V); under a grouped
// axis also broadcasts.
static bool affine_stage(const LayoutStage *st, bool grouped) {
    switch (st->kind) {
    case LS_TRANSPOSE:
    case LS_RESHAPE:
    case LS_SLICE: return true;
    case LS_BROADCAST: return grouped;
    case LS_GATHER: {
        int64_t n = 1;
        for (int d = 0; d < st->idx_rank; d++)
            n *= st->idx_dims[d];
        for (int64_t i = 2; i < n; i++)
            if (st->idx[i] - st->idx[i - 1] != st->idx[1] - st->idx[0])
                return false;
        return true;
    }
    default: return false;
    }
}

void cu_affine_of(const PrimGraph *pg, const Candidate *c, int t, CuAffine *L) {
    cu_affine_of_grouped(pg, c, t, -1, 1, L);
}

void cu_affine_of_grouped(const PrimGraph *pg, const Candidate *c, int t, int ga, int64_t group,
                          CuAffine *L) {
    memset(L, 0, sizeof *L);
    L->gaxis = -1;
    L->group = 1;
    const Tensor *T = pg->tensors[t];
    int r = T->rank;
    const bool grouped = ga >= 0 && ga < r && group > 1 && T->dims[ga] % group == 0;
    if (ga >= 0 && !grouped)
        return;
    if (T->dtype != DT_FLOAT && T->dtype != DT_FLOAT16 && T->dtype != DT_BFLOAT16)
        return;
    int pos = cgen_input_pos(c, t);
    if (pos >= 0 && !grouped) {
        int64_t s = 1;
        for (int d = r - 1; d >= 0; d--) {
            L->stride[d] = T->dims[d] == 1 ? 0 : s;
            s *= T->dims[d];
        }
        L->pos = pos;
        L->affine = true;
        return;
    }
    const Prim *p = NULL;
    for (int i = 0; i < c->n_prims && !p; i++) {
        const Prim *q = pg->prims[c->prims[i]];
        if (q->n_out == 1 && q->out[0] == t)
            p = q;
    }
    if (!p || p->kind != PRIM_LAYOUT || p->lay.concat || p->n_in != 1 ||
        cgen_input_pos(c, p->in[0]) < 0 || pg->tensors[p->in[0]]->dtype != T->dtype)
        return;
    for (int st = 0; st < p->lay.n_stages; st++)
        if (!affine_stage(&p->lay.stages[st], grouped))
            return;
    const Tensor *src = pg->tensors[p->in[0]];
    int64_t idx[ORCH_MAX_RANK] = {0};
    L->base = layout_offset(p, T, src, idx);
    if (L->base < 0)
        return;
    for (int d = 0; d < r; d++) {
        // A grouped axis steps by whole groups (its coordinate enters divided by the group).
        int64_t step = grouped && d == ga ? group : 1;
        if (T->dims[d] <= step)
            continue;
        idx[d] = step;
        L->stride[d] = layout_offset(p, T, src, idx) - L->base;
        idx[d] = 0;
    }
    const int gq = grouped ? ga : -1;
#define AFFINE_AT(ix)                                                                              \
    do {                                                                                           \
        int64_t want = L->base;                                                                    \
        for (int q = 0; q < r; q++)                                                                \
            want += L->stride[q] * (q == gq ? (ix)[q] / group : (ix)[q]);                          \
        if (layout_offset(p, T, src, (ix)) != want)                                                \
            return;                                                                                \
    } while (0)
    int64_t n = tensor_numel(T);
    if (n <= 4096) {
        for (int64_t i = 0; i < n; i++) {
            int64_t f = i;
            for (int q = r - 1; q >= 0; q--) {
                idx[q] = f % T->dims[q];
                f /= T->dims[q];
            }
            AFFINE_AT(idx);
        }
    } else {
        for (int corner = 0; corner < 2; corner++)
            for (int d = 0; d < r; d++) {
                for (int q = 0; q < r; q++)
                    idx[q] = corner ? T->dims[q] - 1 : 0;
                int64_t step = (T->dims[d] + 511) / 512;
                for (int64_t v = 0; v < T->dims[d]; v += step) {
                    idx[d] = v;
                    AFFINE_AT(idx);
                }
            }
        uint64_t seed = 0x5eedull;
        for (int i = 0; i < 512; i++) {
            for (int q = 0; q < r; q++)
                idx[q] = (int64_t)(splitmix(&seed) % (uint64_t)T->dims[q]);
            AFFINE_AT(idx);
        }
    }
#undef AFFINE_AT
    L->pos = cgen_input_pos(c, p->in[0]);
    L->affine = true;
    if (grouped) {
        L->gaxis = ga;
        L->group = group;
    }
}
