// The fission driver (see fission.h): walks the operator graph in order, applies the rule of each
// node's op (rules_*.c) or wraps it as an OPAQUE primitive, checks that every rule reproduced the
// node's output dtypes and shapes, and names graph outputs as the model does.
#include "fission.h"

#include "../ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const FissionRuleDef *const rule_tables[] = {
    fission_rules_elementwise, fission_rules_linear, fission_rules_reduce, fission_rules_layout,
    fission_rules_rnn};

static FissionRule find_rule(const Node *n) {
    if (*n->domain && strcmp(n->domain, "ai.onnx") != 0)
        return NULL;
    for (size_t t = 0; t < ORCH_COUNT(rule_tables); t++)
        for (const FissionRuleDef *d = rule_tables[t]; d->op; d++)
            if (strcmp(d->op, n->op) == 0)
                return d->rule;
    return NULL;
}

int fc_in(const FissionCtx *fc, int i) {
    return i < fc->n->n_in && fc->n->in[i] >= 0 ? fc->map[fc->n->in[i]] : -1;
}

const Tensor *fc_in_t(const FissionCtx *fc, int i) { return node_input(fc->g, fc->n, i); }
const Tensor *fc_out_t(const FissionCtx *fc, int i) { return node_output(fc->g, fc->n, i); }
int fc_out_rank(const FissionCtx *fc, int i) { return fc_out_t(fc, i)->rank; }

void fc_set_out(FissionCtx *fc, int i, int t) {
    ORCH_ASSERT(i < fc->n->n_out && fc->n->out[i] >= 0 && t >= 0);
    fc->map[fc->n->out[i]] = t;
}

static void make_opaque(FissionCtx *fc) {
    const Node *n = fc->n;
    Prim *p = pg_add_prim(fc->pg, PRIM_OPAQUE, n->n_in, n->n_out, n->name);
    p->node = n;
    for (int j = 0; j < n->n_in; j++)
        p->in[j] = fc_in(fc, j);
    for (int j = 0; j < n->n_out; j++) {
        const Tensor *t = node_output(fc->g, n, j);
        if (!t)
            continue;
        Tensor *o = pg_add_tensor(fc->pg, t->name, t->dtype, t->rank, t->dims);
        o->producer = fc->pg->n_prims - 1;
        p->out[j] = o->id;
        fc->map[t->id] = o->id;
    }
}

// The attention rewrite: y = e / s (s = sum of e over the last axis, keepdims) feeding only the
// left operand of a MatMul z = y @ V becomes z = (e @ V) / s. Row scaling commutes with a right
// product, so the values agree up to rounding; exp(x - max) can then join the MatMul's prologue
// and the division its epilogue. The division primitive moves after the MatMul and takes over
// its output tensor, so consumers are unchanged.
static int attention_rewrite(PrimGraph *pg) {
    int n = pg->n_tensors, done = 0;
    int *uses = xcalloc((size_t)n + 1, sizeof(int));
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_in; j++)
            if (pg->prims[k]->in[j] >= 0)
                uses[pg->prims[k]->in[j]]++;
    for (int i = 0; i < pg->n_outputs; i++)
        uses[pg->outputs[i]] += 2; // never rewrite away a graph output
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *mm = pg->prims[k];
        if (mm->dead || mm->kind != PRIM_LINEAR || mm->lin.op != LIN_MATMUL)
            continue;
        int y = mm->in[0];
        int di = pg->tensors[y]->producer;
        if (uses[y] != 1 || di < 0)
            continue;
        Prim *div = pg->prims[di];
        if (div->kind != PRIM_ELEMWISE || div->ew.n != 1 || div->ew.code[0].op != EW_DIV ||
            div->n_in != 2 || div->ew.code[0].arg[0].src != EWS_INPUT ||
            div->ew.code[0].arg[0].index != 0 || div->ew.code[0].arg[1].src != EWS_INPUT ||
            div->ew.code[0].arg[1].index != 1)
            continue;
        int e = div->in[0], s = div->in[1];
        int si = pg->tensors[s]->producer;
        const Tensor *E = pg->tensors[e];
        if (si < 0 || E->rank < 2)
            continue;
        const Prim *sum = pg->prims[si];
        if (sum->kind != PRIM_REDUCE || sum->red.op != RED_SUM || !sum->red.keepdims ||
            sum->red.axes != (1u << (E->rank - 1)) || sum->in[0] != e ||
            pg->tensors[mm->out[0]]->rank != E->rank)
            continue;
        // z = e @ V into a new tensor; the division reads it and writes the MatMul's old output.
        Tensor *z = pg->tensors[mm->out[0]];
        Tensor *prod = pg_add_tensor(pg, "attention/unnormalised", z->dtype, z->rank, z->dims);
        mm->in[0] = e;
        mm->out[0] = prod->id;
        div->in[0] = prod->id;
        div->out[0] = z->id;
        // Move the division to just after the MatMul.
        for (int j = di; j < k; j++)
            pg->prims[j] = pg->prims[j + 1];
        pg->prims[k] = div;
        for (int j = di; j <= k; j++)
            for (int o = 0; o < pg->prims[j]->n_out; o++)
                if (pg->prims[j]->out[o] >= 0)
                    pg->tensors[pg->prims[j]->out[o]]->producer = j;
        uses[y] = 0;
        done++;
    }
    free(uses);
    return done;
}

// Rules build per-axis tables (pad, tile, resize) and constants sized by output axes. An empty
// output, or an axis longer than this, is left to the reference op, which needs neither.
#define FISSION_MAX_AXIS ((int64_t)1 << 24)

static bool ruled_shapes(const Graph *g, const Node *n) {
    for (int j = 0; j < n->n_out; j++) {
        const Tensor *t = node_output(g, n, j);
        if (!t)
            continue;
        if (tensor_numel(t) == 0)
            return false;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] > FISSION_MAX_AXIS)
                return false;
    }
    return true;
}

static bool same_shape(const Tensor *a, const Tensor *b) {
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

int fission_run(const Graph *g, const FissionOptions *opt, PrimGraph **out, FissionStats *stats,
                Err *e) {
    static const FissionOptions defaults = {0};
    PrimGraph *pg = prim_graph_create(g);
    FissionStats st = {.nodes = g->n_nodes};
    int *map = xmalloc(sizeof(int) * (size_t)(g->n_tensors + 1));
    for (int i = 0; i < g->n_tensors; i++) {
        const Tensor *t = g->tensors[i];
        map[i] = -1;
        if (t->kind == TK_CONST)
            map[i] = pg_add_const(pg, t->name, t->dtype, t->rank, t->dims, t->data, false)->id;
    }
    pg->inputs = xmalloc(sizeof(int) * (size_t)(g->n_inputs + 1));
    for (int i = 0; i < g->n_inputs; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        Tensor *pt = pg_add_tensor(pg, t->name, t->dtype, t->rank, t->dims);
        pt->kind = TK_INPUT;
        map[t->id] = pt->id;
        pg->inputs[pg->n_inputs++] = pt->id;
    }
    int rc = ST_OK;
    for (int k = 0; k < g->n_nodes && rc == ST_OK; k++) {
        const Node *n = g->nodes[k];
        FissionCtx fc = {pg, g, n, opt ? opt : &defaults, map, {pg, n->name}};
        FissionRule rule = ruled_shapes(g, n) ? find_rule(n) : NULL;
        int first_prim = pg->n_prims;
        int r = rule ? rule(&fc) : ST_UNSUPPORTED;
        if (r == ST_OK) {
            st.ruled++;
        } else {
            ORCH_ASSERT(r == ST_UNSUPPORTED);
            for (int j = first_prim; j < pg->n_prims; j++)
                pg->prims[j]->dead = true;
            make_opaque(&fc);
            st.opaque++;
        }
        for (int j = 0; j < n->n_out; j++) {
            const Tensor *t = node_output(g, n, j);
            if (!t)
                continue;
            int pt = map[t->id];
            if (pt < 0 || !same_shape(pg->tensors[pt], t)) {
                char a[128], b[128];
                rc = err_set(e, ST_RUNTIME,
                             "fission of node '%s' (%s) gave output %d %s %s, expected %s %s",
                             n->name, n->op, j,
                             pt < 0 ? "nothing" : dtype_name(pg->tensors[pt]->dtype),
                             pt < 0 ? "" : tensor_shape_str(pg->tensors[pt], a, sizeof a),
                             dtype_name(t->dtype), tensor_shape_str(t, b, sizeof b));
                break;
            }
            // A tensor made for this node takes the ONNX name (provenance in dumps).
            Tensor *o = pg->tensors[pt];
            if (o->kind == TK_VALUE && o->producer >= first_prim)
                o->name = arena_strdup(pg->arena, t->name);
        }
    }
    // Graph outputs: each its own computed tensor with the model's name.
    pg->outputs = xmalloc(sizeof(int) * (size_t)(g->n_outputs + 1));
    for (int i = 0; i < g->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = g->tensors[g->outputs[i]];
        int pt = map[t->id];
        bool reused = false;
        for (int j = 0; j < i; j++)
            reused |= pg->outputs[j] == pt;
        if (pg->tensors[pt]->kind != TK_VALUE || reused || strcmp(pg->tensors[pt]->name, t->name)) {
            PB b = {pg, t->name};
            pt = pb_ew1(&b, EW_COPY, pt);
        }
        pg->tensors[pt]->name = arena_strdup(pg->arena, t->name);
        pg->outputs[pg->n_outputs++] = pt;
    }
    free(map);
    if (rc == ST_OK && opt && opt->attention_rewrite)
        st.attention_rewrites = attention_rewrite(pg);
    if (rc == ST_OK) {
        prim_graph_compact(pg);
        rc = prim_graph_verify(pg, e);
    }
    if (rc) {
        err_prefix(e, "%s: ", g->path);
        prim_graph_free(pg);
        return rc;
    }
    if (stats)
        *stats = st;
    *out = pg;
    return ST_OK;
}

const char *fission_opaque_reason(const Graph *g, const Node *n) {
    if (!find_rule(n))
        return "no fission rule";
    if (!ruled_shapes(g, n))
        return "an empty output or an axis longer than 2^24";
    return "its fission rule does not cover these attributes or types";
}
