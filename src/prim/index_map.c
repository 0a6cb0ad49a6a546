// Index map evaluation (see index_map.h): stages applied from the output towards the input.
#include "index_map.h"

#include <string.h>

static void unflatten(int64_t flat, int rank, const int64_t *dims, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = dims[d] ? flat % dims[d] : 0;
        flat = dims[d] ? flat / dims[d] : 0;
    }
}

static int64_t flatten(int rank, const int64_t *dims, const int64_t *idx) {
    int64_t flat = 0;
    for (int d = 0; d < rank; d++)
        flat = flat * dims[d] + idx[d];
    return flat;
}

bool layout_map_index(const LayoutParams *L, int out_rank, const int64_t *out_dims,
                      const int64_t *out_idx, int64_t *in_idx) {
    int64_t cur[ORCH_MAX_RANK], next[ORCH_MAX_RANK];
    int rank = out_rank;
    const int64_t *dims = out_dims;
    memcpy(cur, out_idx, sizeof(int64_t) * (size_t)out_rank);
    for (int s = 0; s < L->n_stages; s++) {
        const LayoutStage *st = &L->stages[s];
        switch (st->kind) {
        case LS_TRANSPOSE:
            for (int d = 0; d < rank; d++)
                next[st->perm[d]] = cur[d];
            break;
        case LS_RESHAPE:
            unflatten(flatten(rank, dims, cur), st->in_rank, st->in_dims, next);
            break;
        case LS_SLICE:
            for (int d = 0; d < rank; d++)
                next[d] = st->start[d] + cur[d] * st->step[d];
            break;
        case LS_BROADCAST:
            for (int d = 0; d < st->in_rank; d++) {
                int od = rank - st->in_rank + d;
                next[d] = st->in_dims[d] == 1 ? 0 : cur[od];
            }
            break;
        case LS_TABLE:
            for (int d = 0; d < rank; d++) {
                next[d] = st->table[d] ? st->table[d][cur[d]] : cur[d];
                if (next[d] < 0)
                    return false;
            }
            break;
        case LS_GATHER: {
            int q = st->idx_rank, a = st->axis;
            int64_t pos = flatten(q, st->idx_dims, cur + a);
            for (int d = 0; d < a; d++)
                next[d] = cur[d];
            next[a] = st->idx[pos];
            for (int d = a + 1; d < st->in_rank; d++)
                next[d] = cur[d - 1 + q];
            break;
        }
        }
        rank = st->in_rank;
        dims = st->in_dims;
        memcpy(cur, next, sizeof(int64_t) * (size_t)rank);
    }
    memcpy(in_idx, cur, sizeof(int64_t) * (size_t)rank);
    return true;
}

int layout_concat_source(const PrimGraph *pg, const Prim *p, int64_t *idx) {
    int a = p->lay.axis;
    for (int j = 0; j < p->n_in; j++) {
        int64_t len = pg->tensors[p->in[j]]->dims[a];
        if (idx[a] < len)
            return j;
        idx[a] -= len;
    }
    ORCH_ASSERT(!"concat index past the last input");
    return -1;
}
