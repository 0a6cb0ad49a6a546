// FLOP counts (see stats.h): exact for linear ops and the recurrent ones' products, one per output
// element for the rest, and the window size per output element for pooling and reductions.
#include "stats.h"

#include <string.h>

static int64_t numel_or0(const Tensor *t) { return t && t->rank >= 0 ? tensor_numel(t) : 0; }

// Counted in double and saturated: absurd (but accepted) shapes must not overflow int64.
static int64_t saturate(double f) {
    return f >= 9.0e18 ? (int64_t)9000000000000000000 : (int64_t)f;
}

int64_t node_flops(const Graph *g, const Node *n) {
    const Tensor *x = node_input(g, n, 0), *w = node_input(g, n, 1), *y = node_output(g, n, 0);
    if (!y || y->rank < 0)
        return 0;
    double out = (double)tensor_numel(y);
    if (strcmp(n->op, "MatMul") == 0 && x && x->rank >= 1)
        return saturate(2 * out * (double)x->dims[x->rank - 1]);
    if (strcmp(n->op, "Gemm") == 0 && x && x->rank == 2)
        return saturate(2 * out * (double)x->dims[node_attr_i(n, "transA", 0) ? 0 : 1]);
    if (strcmp(n->op, "Conv") == 0 && w && w->rank >= 3) {
        double k = 1;
        for (int d = 1; d < w->rank; d++)
            k *= (double)w->dims[d]; // Cin/groups * kernel
        return saturate(2 * out * k);
    }
    if (strcmp(n->op, "ConvTranspose") == 0 && w && w->rank >= 3 && x) {
        double k = 1;
        for (int d = 1; d < w->rank; d++)
            k *= (double)w->dims[d]; // Cout/groups * kernel, per input element
        return saturate(2 * (double)numel_or0(x) * k);
    }
    if ((strcmp(n->op, "LSTM") == 0 || strcmp(n->op, "GRU") == 0 || strcmp(n->op, "RNN") == 0) &&
        x && x->rank == 3 && x->dims[2] > 0 && w) {
        // Every step multiplies each (sequence, batch) row by W (gates x hidden x input, per
        // direction) and the hidden state by R (gates x hidden x hidden): the gates' own
        // elementwise work is small beside that.
        const Tensor *r = node_input(g, n, 2);
        double rows = (double)numel_or0(x) / (double)x->dims[2];
        return saturate(2 * rows * ((double)numel_or0(w) + (double)numel_or0(r)));
    }
    if (x && x->rank >= 0 && (double)numel_or0(x) > out)
        return numel_or0(x); // reductions and pools read every input element at least once
    return (int64_t)out;
}

int64_t graph_flops(const Graph *g) {
    double total = 0;
    for (int k = 0; k < g->n_nodes; k++)
        total += (double)node_flops(g, g->nodes[k]);
    return saturate(total);
}
