// Automatic splitting of a primitive graph into segments, so that candidate enumeration and the
// orchestration program stay bounded without hand-written cut points (which Korch needs).
//
// The rule. Segments are runs of consecutive primitives in the graph's topological order, each at
// most max_segment long; a graph that fits is not cut. A cut between positions b-1 and b costs
// its *width*: the number of tensors that cross it (written before b, read at or after b) and
// that a kernel could otherwise have kept internal, i.e. neither written by an OPAQUE primitive
// nor read only by OPAQUE primitives (constants and graph inputs are always available and never
// count). A dynamic program over the cut positions picks the cuts of least total width, and among
// those the fewest cuts. Narrow waists win: the residual stream between two transformer layers or
// two ResNet blocks is a cut of width 1 (an articulation tensor: every path from the inputs to the
// outputs passes through it), while a cut inside attention crosses several tensors.
//
// Effect on optimality: candidates never span a cut, so every tensor crossing a cut is
// materialised by a kernel of the earlier segment and no kernel recomputes across it; a kernel
// that would fuse across a cut is not considered. Within segments the search is unchanged, so the
// program's optimum is exact over the candidates that do not span cuts, and cutting at narrow
// points keeps the fusions lost to the few primitives next to each cut.
#include "candidates_internal.h"

#include <stdlib.h>

int cand_split(const PrimGraph *pg, const int *producer, int max_segment, int *segment_of_prim) {
    int n = pg->n_prims;
    if (n == 0)
        return 0;
    int S = max_segment;
    // last[t]: the last primitive reading t; fusable[t]: some non-opaque primitive reads it.
    int *last = xmalloc(sizeof(int) * (size_t)(pg->n_tensors + 1));
    bool *fusable = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int t = 0; t < pg->n_tensors; t++)
        last[t] = -1;
    for (int k = 0; k < n; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t < 0)
                continue;
            last[t] = k;
            fusable[t] |= p->kind != PRIM_OPAQUE;
        }
    }
    // width[b] for the boundary before position b, by a difference array over crossing ranges.
    int64_t *width = xcalloc((size_t)n + 1, sizeof(int64_t));
    for (int t = 0; t < pg->n_tensors; t++) {
        int p = producer[t];
        if (p < 0 || last[t] <= p || !fusable[t] || pg->prims[p]->kind == PRIM_OPAQUE)
            continue;
        width[p + 1]++;
        width[last[t] + 1]--;
    }
    for (int b = 1; b <= n; b++)
        width[b] += width[b - 1];

    // cost[j]: least cost of splitting positions [0, j) with a segment ending at j; from[j]: where
    // that segment starts. A cut's cost is width * (n + 1) + 1, so width decides first and the
    // number of cuts (at most n) breaks ties.
    int64_t *cost = xmalloc(sizeof(int64_t) * ((size_t)n + 1));
    int *from = xmalloc(sizeof(int) * ((size_t)n + 1));
    cost[0] = 0;
    for (int j = 1; j <= n; j++) {
        cost[j] = INT64_MAX;
        for (int i = j - 1; i >= 0 && i >= j - S; i--) {
            int64_t c = cost[i] + (i > 0 ? width[i] * (n + 1) + 1 : 0);
            if (c < cost[j]) {
                cost[j] = c;
                from[j] = i;
            }
        }
    }
    int n_seg = 0;
    for (int j = n; j > 0; j = from[j])
        n_seg++;
    int s = n_seg;
    for (int j = n; j > 0; j = from[j]) {
        s--;
        for (int k = from[j]; k < j; k++)
            segment_of_prim[k] = s;
    }
    free(last);
    free(fusable);
    free(width);
    free(cost);
    free(from);
    return n_seg;
}
