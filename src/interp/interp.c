// Reference interpreter (see interp.h). Buffers are allocated per tensor and freed after the last
// node that reads them; outputs are poisoned with NaN bytes first so an op that skips elements
// shows up in tests.
#include "interp.h"

#include "../ops/ops.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool all_outputs_empty(const Tensor *const *out, int n) {
    for (int j = 0; j < n; j++)
        if (out[j] && tensor_numel(out[j]) > 0)
            return false;
    return true;
}

int interp_run(const Graph *g, const void *const *inputs, void **outputs, int64_t *node_ns,
               Err *e) {
    int nt = g->n_tensors;
    void **val = xcalloc((size_t)nt + 1, sizeof(void *));
    bool *owned = xcalloc((size_t)nt + 1, 1);
    int *last_use = xmalloc(sizeof(int) * (size_t)(nt + 1));
    for (int i = 0; i < nt; i++) {
        last_use[i] = -1;
        if (g->tensors[i]->kind == TK_CONST)
            val[i] = g->tensors[i]->data;
    }
    for (int i = 0; i < g->n_inputs; i++)
        val[g->inputs[i]] = (void *)inputs[i];
    for (int k = 0; k < g->n_nodes; k++)
        for (int j = 0; j < g->nodes[k]->n_in; j++)
            if (g->nodes[k]->in[j] >= 0)
                last_use[g->nodes[k]->in[j]] = k;
    for (int i = 0; i < g->n_outputs; i++)
        last_use[g->outputs[i]] = g->n_nodes; // never freed here

    int rc = ST_OK;
    const Tensor **in = NULL, **out = NULL;
    const void **x = NULL;
    void **y = NULL;
    int cap_in = 0, cap_out = 0;
    for (int k = 0; k < g->n_nodes && rc == ST_OK; k++) {
        const Node *n = g->nodes[k];
        const OpDef *def = ops_find(n->domain, n->op);
        ORCH_ASSERT(def);
        if (n->n_in > cap_in) {
            cap_in = n->n_in;
            in = xrealloc(in, sizeof(*in) * (size_t)cap_in);
            x = xrealloc(x, sizeof(*x) * (size_t)cap_in);
        }
        if (n->n_out > cap_out) {
            cap_out = n->n_out;
            out = xrealloc(out, sizeof(*out) * (size_t)cap_out);
            y = xrealloc(y, sizeof(*y) * (size_t)cap_out);
        }
        for (int j = 0; j < n->n_in; j++) {
            in[j] = node_input(g, n, j);
            x[j] = in[j] ? val[in[j]->id] : NULL;
            ORCH_ASSERT(!in[j] || x[j] || tensor_numel(in[j]) == 0);
        }
        for (int j = 0; j < n->n_out && rc == ST_OK; j++) {
            out[j] = node_output(g, n, j);
            y[j] = NULL;
            if (!out[j])
                continue;
            size_t bytes = tensor_nbytes(out[j]);
            y[j] = malloc(bytes ? bytes : 1);
            if (!y[j]) {
                rc = op_err(e, ST_RUNTIME, n, "out of memory for '%s' (%zu bytes)", out[j]->name,
                            bytes);
                break;
            }
            memset(y[j], 0xff, bytes); // NaN for floats: unwritten elements show
            val[out[j]->id] = y[j];
            owned[out[j]->id] = true;
        }
        if (rc)
            break;
        OpRun r = {g, n, in, x, out, y};
        int64_t t0 = node_ns ? now_ns() : 0;
        if (!all_outputs_empty(out, n->n_out)) // nothing to compute (and axes may be huge)
            rc = def->run(&r, e);
        if (node_ns)
            node_ns[k] = now_ns() - t0;
        for (int j = 0; j < n->n_in; j++) {
            int id = n->in[j];
            if (id >= 0 && owned[id] && last_use[id] == k) {
                free(val[id]);
                val[id] = NULL;
                owned[id] = false;
            }
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int id = g->outputs[i];
        outputs[i] = NULL;
        if (rc)
            continue;
        const Tensor *t = g->tensors[id];
        size_t bytes = tensor_nbytes(t);
        // Each output gets its own buffer, also when two outputs name one tensor or an output is
        // a constant or an input.
        outputs[i] = malloc(bytes ? bytes : 1);
        if (!outputs[i]) {
            rc = err_set(e, ST_RUNTIME, "out of memory for output '%s'", t->name);
            continue;
        }
        if (bytes)
            memcpy(outputs[i], val[id], bytes);
    }
    if (rc)
        for (int i = 0; i < g->n_outputs; i++) {
            free(outputs[i]);
            outputs[i] = NULL;
        }
    for (int i = 0; i < nt; i++)
        if (owned[i])
            free(val[i]);
    free(in);
    free(out);
    free(x);
    free(y);
    free(val);
    free(owned);
    free(last_use);
    if (rc)
        err_prefix(e, "%s: ", g->path);
    return rc;
}
