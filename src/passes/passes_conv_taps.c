// Dead convolution taps (see passes.h): per spatial axis, the leading and trailing kernel taps that
// read only padding for every output position are dropped from a convolution; the kernel shrinks,
// pad_begin moves by the dropped taps' span and pad_end is recomputed, so the output is the same.
// Needs: a verified graph. Guarantees: the same values up to the summation order of the remaining
// products (a dropped tap only ever multiplied a weight by a padding zero).
//
// Why: DeepLabV3's ASPP runs 3x3 convolutions of dilation 12, 24 and 36 (padding equal to the
// dilation) on a 14x14 or 28x28 map. Where the dilation reaches past the map, every tap but the
// centre reads padding at every output position: the 3x3 convolution is a 1x1 one, and without
// this pass every target computed all nine taps, eight of them over zeros.
#include "passes.h"

#include "../prim/prim_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Floor division for a positive divisor.
static int64_t floor_div(int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Whether tap k reads the input row y*stride - pad_begin + k*dilation inside [0, in) for some
// output y in [0, out): the rows with y >= ceil((pad_begin - k*dil) / stride) and
// y <= floor((in - 1 + pad_begin - k*dil) / stride).
static bool tap_live(int64_t in, int64_t out, int64_t stride, int64_t dil, int64_t pad_begin,
                     int64_t k) {
    int64_t c = pad_begin - k * dil; // row read at y = 0 is -c
    int64_t lo = -floor_div(-c, stride), hi = floor_div(in - 1 + c, stride);
    if (lo < 0)
        lo = 0;
    if (hi > out - 1)
        hi = out - 1;
    return lo <= hi;
}

bool pass_conv_live_taps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                         int64_t pad_begin, int64_t *first, int64_t *last) {
    *first = 0;
    *last = k - 1;
    if (in < 1 || out < 1 || k < 1 || stride < 1 || dil < 1)
        return k >= 1; // nothing to decide on: the kernel as it is
    while (*first < k && !tap_live(in, out, stride, dil, pad_begin, *first))
        ++*first;
    if (*first == k) {
        *first = 0;
        return false;
    }
    while (!tap_live(in, out, stride, dil, pad_begin, *last))
        --*last;
    return true;
}

bool pass_conv_trim_axis(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                         int64_t pad_begin, ConvAxisTrim *t) {
    int64_t first, last;
    t->first = 0;
    t->k = k;
    t->pad_begin = pad_begin;
    t->pad_end = 0; // unknown here: the caller keeps its own where nothing is trimmed
    if (!pass_conv_live_taps(in, out, k, stride, dil, pad_begin, &first, &last))
        return false;
    // Dropping leading taps moves the window's start right: a negative pad_begin (a crop of the
    // input) would follow when the first live tap starts past the padding, which ONNX-shaped
    // consumers (cuDNN's descriptors) cannot take; then the leading taps stay.
    if (pad_begin - first * dil < 0)
        first = 0;
    // The end padding that gives `out` with the kept taps: the last window must end inside it.
    // Where none >= 0 can (the last rows of the input are read by no output), the trailing taps
    // stay for the same reason.
    int64_t pb = pad_begin - first * dil, span = (last - first) * dil + 1;
    int64_t need = (out - 1) * stride + span - in - pb; // smallest pad_end giving out
    if (need + stride - 1 < 0) {
        last = k - 1;
        span = (last - first) * dil + 1;
        need = (out - 1) * stride + span - in - pb;
    }
    t->first = first;
    t->k = last - first + 1;
    t->pad_begin = pb;
    t->pad_end = need > 0 ? need : 0;
    return true;
}

// A copy of constant w [M, C/g, k...] keeping taps [first[d], first[d] + kd[d]) of each spatial
// axis.
static int sliced_const(PrimGraph *pg, const Tensor *w, const int64_t *first, const int64_t *kd,
                        int ns) {
    int64_t dims[ORCH_MAX_RANK];
    memcpy(dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
    for (int d = 0; d < ns; d++)
        dims[2 + d] = kd[d];
    int64_t n = dims[0] * dims[1];
    for (int d = 0; d < ns; d++)
        n *= kd[d];
    size_t es = dtype_size(w->dtype);
    int64_t n0 = 1;
    for (int d = 0; d < w->rank; d++)
        n0 *= w->dims[d];
    char *data = xmalloc((size_t)n * es + 1);
    int64_t idx[ORCH_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t src = 0; // offset of idx (with the spatial taps shifted) in w, row-major
        for (int d = 0; d < w->rank; d++)
            src = src * w->dims[d] + idx[d] + (d >= 2 ? first[d - 2] : 0);
        memcpy(data + (size_t)i * es, (const char *)w->data + (size_t)src * es, es);
        for (int d = w->rank - 1; d >= 0 && ++idx[d] == dims[d]; d--)
            idx[d] = 0;
    }
    // The whole weight was read for its slice: where it is an artefact's mapped weight, its pages
    // go back (a reader of the whole weight, if any is left, reads them from the file again).
    if (!pg->owns_data[w->id])
        graph_release_borrowed(pg->src, w->data, (size_t)(n0 * (int64_t)es));
    char name[256];
    snprintf(name, sizeof name, "%.200s/live_taps", w->name);
    return pg_add_const(pg, name, w->dtype, w->rank, dims, data, true)->id;
}

int pass_trim_conv_taps(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    int n0 = pg->n_prims, trimmed = 0;
    for (int k = 0; k < n0; k++) {
        Prim *p = pg->prims[k];
        if (p->dead || p->kind != PRIM_LINEAR || p->lin.op != LIN_CONV || p->n_in < 2)
            continue;
        const Tensor *X = pg->tensors[p->in[0]], *W = pg->tensors[p->in[1]],
                     *Y = pg->tensors[p->out[0]];
        LinearParams *lp = &p->lin;
        int ns = lp->n_spatial;
        if (ns < 1 || ns > PRIM_MAX_SPATIAL || X->rank != 2 + ns || W->rank != 2 + ns ||
            Y->rank != 2 + ns)
            continue;
        ConvAxisTrim t[PRIM_MAX_SPATIAL];
        int64_t first[PRIM_MAX_SPATIAL], kd[PRIM_MAX_SPATIAL];
        bool any = false, dead_axis = false;
        for (int d = 0; d < ns; d++) {
            int64_t K = W->dims[2 + d];
            dead_axis |= !pass_conv_trim_axis(X->dims[2 + d], Y->dims[2 + d], K, lp->stride[d],
                                              lp->dilation[d], lp->pad_begin[d], &t[d]);
            first[d] = t[d].first;
            kd[d] = t[d].k;
            any |= t[d].k != K;
        }
        // An axis with no live tap: the product is zero everywhere. It is left as it is; such a
        // layer does not occur in trained models, and its cost is the model's.
        if (!any || dead_axis)
            continue;
        int w;
        if (pg_is_const(pg, p->in[1]) && W->data) {
            w = sliced_const(pg, W, first, kd, ns);
        } else {
            // A computed weight: a slice primitive, which fusion reads in place.
            int64_t start[ORCH_MAX_RANK] = {0}, step[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
            for (int d = 0; d < W->rank; d++) {
                step[d] = 1;
                dims[d] = d >= 2 ? kd[d - 2] : W->dims[d];
                start[d] = d >= 2 ? first[d - 2] : 0;
            }
            PB b = {pg, p->origin};
            w = pb_slice(&b, p->in[1], start, step, dims);
        }
        p->in[1] = w;
        for (int d = 0; d < ns; d++) {
            // One tap: the dilation says nothing, and 1 lets the 1x1 paths (a plain product,
            // cuDNN's, the CUDA direct kernel's dilation-1 variants) take the axis.
            if (kd[d] == 1)
                lp->dilation[d] = 1;
            if (t[d].k == W->dims[2 + d])
                continue; // pad_end as the model gave it
            lp->pad_begin[d] = t[d].pad_begin;
            lp->pad_end[d] = t[d].pad_end;
        }
        trimmed++;
    }
    st->taps_trimmed += trimmed;
    if (pg->n_prims != n0) {
        pass_sort_topologically(pg);
        // Compacting recomputes every tensor's producer index after the reordering.
        prim_graph_compact(pg);
    }
    return ST_OK;
}
