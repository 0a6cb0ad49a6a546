// Shape inference and folding in one topological sweep (see fold.h): constant values feed the
// shape rules of their consumers (Reshape's shape, Slice's starts...), which is what lets a
// PyTorch export's Shape→Gather→Concat→Reshape chains disappear.
#include "fold.h"
#include "../ir/stats.h"

#include "control_flow.h"
#include "ops.h"
#include "sequence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int graph_check_supported(const Graph *g, Err *e) {
    char list[1800];
    size_t off = 0;
    int count = 0, listed = 0;
    list[0] = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const Node *n = g->nodes[k];
        if (n->dead || ops_find(n->domain, n->op))
            continue;
        count++;
        if (off < sizeof list - 200) {
            off += (size_t)snprintf(list + off, sizeof list - off,
                                    "\n  %s (domain '%s', opset %d) at node '%.80s'", n->op,
                                    *n->domain ? n->domain : "ai.onnx", n->opset, n->name);
            listed++;
        }
    }
    if (count > listed)
        snprintf(list + off, sizeof list - off, "\n  ... and %d more", count - listed);
    if (count)
        return err_set(e, ST_UNSUPPORTED, "%s: %d node%s use%s operators orch does not support:%s",
                       g->path, count, count == 1 ? "" : "s", count == 1 ? "s" : "", list);
    return ST_OK;
}

// Validates inferred output shapes: non-negative dims and a sane total size.
static int check_outputs(const Graph *g, const Node *n, Err *e) {
    for (int j = 0; j < n->n_out; j++) {
        const Tensor *t = node_output(g, n, j);
        if (!t)
            continue;
        ORCH_ASSERT(t->rank >= 0 && t->rank <= ORCH_MAX_RANK);
        int64_t numel = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 0 || mul_overflows_i64(numel, t->dims[d], &numel))
                return op_err(e, ST_INVALID, n, "output '%s' gets an invalid dimension %lld",
                              t->name, (long long)t->dims[d]);
        }
        int64_t bytes;
        if (mul_overflows_i64(numel, (int64_t)(dtype_size(t->dtype) ? dtype_size(t->dtype) : 1),
                              &bytes) ||
            bytes > TENSOR_MAX_BYTES) {
            char s[160];
            return op_err(e, ST_INVALID, n, "output '%s' would have shape %s (over %lld GiB)",
                          t->name, tensor_shape_str(t, s, sizeof s),
                          (long long)(TENSOR_MAX_BYTES >> 30));
        }
    }
    return ST_OK;
}

// A node at most this big folds even past the totals of FoldLimits (see foldable).
#define FOLD_SMALL_BYTES ((size_t)64 << 10)
#define FOLD_SMALL_FLOPS 1048576.0

static FoldLimits g_limits = FOLD_LIMITS_DEFAULT;

FoldLimits fold_limits(void) {
    return g_limits;
}

void fold_set_limits(const FoldLimits *l) {
    g_limits = l ? *l : FOLD_LIMITS_DEFAULT;
}

// What folding has spent on one graph so far, against the totals of FoldLimits.
typedef struct FoldBudget {
    size_t bytes;
    double flops;
} FoldBudget;

static bool foldable(const Graph *g, const Node *n, const OpDef *def, FoldBudget *spent) {
    if (def->flags & OPF_NO_FOLD)
        return false;
    if (!(def->flags & OPF_SHAPE_ONLY)) {
        for (int j = 0; j < n->n_in; j++) {
            const Tensor *t = node_input(g, n, j);
            if (t && t->kind != TK_CONST)
                return false;
        }
    }
    size_t bytes = 0;
    for (int j = 0; j < n->n_out; j++) {
        const Tensor *t = node_output(g, n, j);
        if (t)
            bytes += tensor_nbytes(t);
    }
    // Shape-only nodes (Shape, Size) read no data: whatever their input's size, no work.
    double flops = def->flags & OPF_SHAPE_ONLY ? 0.0 : (double)node_flops(g, n);
    // Small nodes always fold, whatever was spent before: shape arithmetic (Shape -> Gather ->
    // Concat -> Reshape) must become constant for the graph to have static shapes at all.
    bool small = bytes <= FOLD_SMALL_BYTES && flops <= FOLD_SMALL_FLOPS;
    if (!small && (bytes > g_limits.node_bytes || bytes > g_limits.total_bytes - spent->bytes ||
                   flops > g_limits.node_flops || spent->flops + flops > g_limits.total_flops))
        return false;
    spent->bytes += bytes;
    spent->flops += flops;
    return true;
}

static int fold_node(Graph *g, Node *n, const OpDef *def, Err *e) {
    const Tensor **in = xcalloc((size_t)n->n_in + 1, sizeof(Tensor *));
    const void **x = xcalloc((size_t)n->n_in + 1, sizeof(void *));
    const Tensor **out = xcalloc((size_t)n->n_out + 1, sizeof(Tensor *));
    void **y = xcalloc((size_t)n->n_out + 1, sizeof(void *));
    int rc = ST_OK;
    for (int j = 0; j < n->n_in; j++) {
        in[j] = node_input(g, n, j);
        x[j] = in[j] ? in[j]->data : NULL;
    }
    for (int j = 0; j < n->n_out && rc == ST_OK; j++) {
        out[j] = node_output(g, n, j);
        if (!out[j])
            continue;
        y[j] = calloc(1, tensor_nbytes(out[j]) + 1);
        if (!y[j])
            rc = op_err(e, ST_RUNTIME, n, "out of memory folding '%s'", out[j]->name);
    }
    bool empty = true; // all outputs empty: nothing to compute (and their axes may be huge)
    for (int j = 0; j < n->n_out; j++)
        empty = empty && (!out[j] || tensor_numel(out[j]) == 0);
    if (rc == ST_OK && !empty) {
        OpRun r = {g, n, in, x, out, y};
        rc = def->run(&r, e);
    }
    for (int j = 0; j < n->n_out; j++) {
        Tensor *t = node_output(g, n, j);
        if (rc == ST_OK && t) {
            t->kind = TK_CONST;
            t->data = y[j];
        } else {
            free(y[j]);
        }
    }
    free(in);
    free(x);
    free(out);
    free(y);
    return rc;
}

// Identity / Dropout (inference): consumers read the input directly. Kept when the output is a
// graph output, so output names stay what the model declares.
static bool bypass(Graph *g, Node *n, int *remap) {
    bool identity = strcmp(n->op, "Identity") == 0;
    bool dropout = strcmp(n->op, "Dropout") == 0 && (n->n_out < 2 || n->out[1] < 0);
    if (!(identity || dropout) || n->n_in < 1 || n->in[0] < 0 || n->out[0] < 0)
        return false;
    if (dropout && n->n_in >= 3 && n->in[2] >= 0) {
        const Tensor *training = g->tensors[n->in[2]];
        if (training->kind != TK_CONST || elem_get_i64(training->dtype, training->data, 0) != 0)
            return false; // training mode: the op itself reports it
    }
    Tensor *out = g->tensors[n->out[0]];
    if (out->is_output)
        return false;
    remap[out->id] = remap[n->in[0]];
    return true;
}

int graph_infer_and_fold(Graph *g, FoldStats *stats, Err *e) {
    FoldStats st = {.nodes_before = g->n_nodes};
    FoldBudget spent = {0, 0};
    SeqMap seqs = {0}; // the sequence values met so far: lists of tensors (sequence.h)
    int rc = graph_check_supported(g, e);
    if (rc)
        return rc;
    int n_remap = g->n_tensors;
    int *remap = xmalloc(sizeof(int) * (size_t)(g->n_tensors + 1));
    for (int i = 0; i < g->n_tensors; i++)
        remap[i] = i;
    for (int k = 0; k < g->n_nodes && rc == ST_OK; k++) {
        Node *n = g->nodes[k];
        if (n_remap < g->n_tensors) { // tensors of inlined bodies map to themselves
            remap = xrealloc(remap, sizeof(int) * (size_t)(g->n_tensors + 1));
            for (; n_remap < g->n_tensors; n_remap++)
                remap[n_remap] = n_remap;
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0)
                n->in[j] = remap[n->in[j]];
        if (ctrl_is_control(n)) {
            rc = ctrl_expand(g, k, e);
            continue;
        }
        if (seq_is_sequence_op(n) || seq_reads_sequence(&seqs, n)) {
            rc = seq_expand(g, k, &seqs, e);
            continue;
        }
        const OpDef *def = ops_find(n->domain, n->op);
        ORCH_ASSERT(def);
        int present_in = n->n_in, present_out = n->n_out;
        while (present_in > 0 && n->in[present_in - 1] < 0)
            present_in--;
        while (present_out > 0 && n->out[present_out - 1] < 0)
            present_out--;
        if (present_in < def->min_in || (def->max_in >= 0 && present_in > def->max_in)) {
            rc = op_err(e, ST_INVALID, n, "has %d inputs, expected %d to %d", present_in,
                        def->min_in, def->max_in);
            break;
        }
        for (int j = 0; j < def->min_in && rc == ST_OK; j++)
            if (n->in[j] < 0)
                rc = op_err(e, ST_INVALID, n, "required input %d is missing", j);
        if (rc)
            break;
        if (present_out < def->min_out || present_out > def->max_out) {
            rc = op_err(e, ST_INVALID, n, "has %d outputs, expected %d to %d", present_out,
                        def->min_out, def->max_out);
            break;
        }
        // An output named "" is absent; a required one cannot be (the shape rules write it).
        for (int j = 0; j < def->min_out && rc == ST_OK; j++)
            if (n->out[j] < 0)
                rc = op_err(e, ST_INVALID, n, "required output %d has no name", j);
        if (rc)
            break;
        rc = def->infer(g, n, e);
        if (rc == ST_OK && n->attr_mismatch)
            rc = op_err(e, ST_INVALID, n, "attribute '%s' has type %s, expected %s",
                        n->attr_mismatch->name, attr_type_name(n->attr_mismatch->type),
                        attr_type_name(n->attr_wanted));
        if (rc == ST_OK)
            rc = check_outputs(g, n, e);
        if (rc)
            break;
        if (bypass(g, n, remap)) {
            n->dead = true;
            st.bypassed++;
        } else if (foldable(g, n, def, &spent)) {
            rc = fold_node(g, n, def, e);
            n->dead = true;
            st.folded++;
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        g->outputs[i] = remap[g->outputs[i]];
    free(remap);
    seq_map_free(&seqs);
    if (rc) {
        err_prefix(e, "%s: ", g->path);
        return rc;
    }

    // Dead node elimination: keep what graph outputs depend on.
    bool *live = xcalloc((size_t)g->n_tensors + 1, 1);
    for (int i = 0; i < g->n_outputs; i++)
        live[g->outputs[i]] = true;
    for (int k = g->n_nodes - 1; k >= 0; k--) {
        Node *n = g->nodes[k];
        if (n->dead)
            continue;
        bool needed = false;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && live[n->out[j]])
                needed = true;
        if (!needed) {
            n->dead = true;
            st.dead++;
            continue;
        }
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0)
                live[n->in[j]] = true;
    }
    free(live);
    graph_compact(g);
    st.nodes_after = g->n_nodes;
    if (stats)
        *stats = st;
    return graph_verify(g, e);
}
