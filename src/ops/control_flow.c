// If and Loop, resolved while folding (see control_flow.h): the taken branch of an If, or every
// iteration of a Loop, is copied into the graph with its tensors renamed, reading the enclosing
// scope through the node's implicit inputs. Needs bodies loaded as SubGraphs (onnx/load.c).
// Guarantees a graph without If or Loop, or one error naming the node and the reason.
#include "control_flow.h"

#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ctrl_is_control(const Node *n) {
    return !*n->domain && (strcmp(n->op, "If") == 0 || strcmp(n->op, "Loop") == 0);
}

// The names of one instantiation of a body: formals, constants and node outputs, each bound to
// a tensor of the graph. Later definitions shadow earlier ones (searched from the end).
typedef struct Scope {
    const char **names;
    int *ids;
    int n, cap;
} Scope;

static void scope_bind(Scope *s, const char *name, int id) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->names = xrealloc(s->names, sizeof(char *) * (size_t)s->cap);
        s->ids = xrealloc(s->ids, sizeof(int) * (size_t)s->cap);
    }
    s->names[s->n] = name;
    s->ids[s->n++] = id;
}

static void scope_free(Scope *s) {
    free(s->names);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

// What one body instantiation resolves names against.
typedef struct Body {
    const SubGraph *sg;
    const int *outer; // tensor ids of sg->outer, in order
    Scope scope;
} Body;

// The tensor a body name denotes: -1 for "", -2 when nothing defines it (yet).
static int body_resolve(const Body *b, const char *name) {
    if (!*name)
        return -1;
    for (int i = b->scope.n - 1; i >= 0; i--)
        if (strcmp(b->scope.names[i], name) == 0)
            return b->scope.ids[i];
    for (int i = 0; i < b->sg->n_outer; i++)
        if (strcmp(b->sg->outer[i], name) == 0)
            return b->outer[i];
    return -2;
}

// A graph tensor named prefix/name, made unique with a counter where the name is taken.
static Tensor *new_tensor(Graph *g, const char *prefix, const char *name) {
    char buf[512];
    snprintf(buf, sizeof buf, "%.300s/%.180s", prefix, name);
    for (int c = 1; graph_find_tensor(g, buf); c++)
        snprintf(buf, sizeof buf, "%.300s/%.180s~%d", prefix, name, c);
    return graph_add_tensor(g, buf);
}

// A constant tensor of the graph holding a copy of t's value.
static int copy_const(Graph *g, const char *prefix, const Tensor *t) {
    Tensor *c = new_tensor(g, prefix, t->name);
    size_t bytes = tensor_nbytes(t);
    c->data = xmalloc(bytes + 1);
    if (bytes)
        memcpy(c->data, t->data, bytes);
    c->kind = TK_CONST;
    tensor_set_shape(c, t->dtype, t->rank, t->dims);
    return c->id;
}

static int scalar_const(Graph *g, const char *prefix, const char *name, DType dt, int64_t v) {
    Tensor *c = new_tensor(g, prefix, name);
    c->data = xmalloc(8);
    c->kind = TK_CONST;
    tensor_set_shape(c, dt, 0, NULL);
    elem_set_i64(dt, c->data, 0, v);
    return c->id;
}

// Binds the body's constants (copied into the graph once for all instantiations).
static void bind_consts(const SubGraph *sg, const int *ids, Scope *s) {
    for (int i = 0; i < sg->n_consts; i++)
        scope_bind(s, sg->consts[i]->name, ids[i]);
}

// The body's constants copied into the graph under prefix and bound in s (a body instantiated
// once: an If's branch, an inlined attribute body).
static void copy_bind_consts(Graph *g, const SubGraph *sg, const char *prefix, Scope *s) {
    int *consts = xmalloc(sizeof(int) * (size_t)(sg->n_consts + 1));
    for (int i = 0; i < sg->n_consts; i++)
        consts[i] = copy_const(g, prefix, sg->consts[i]);
    bind_consts(sg, consts, s);
    free(consts);
}

// Copies the body's nodes into the graph (appended), inputs resolved in b, outputs new tensors
// named under prefix and bound in b's scope.
static int instantiate(Graph *g, const Node *owner, const char *attr, const char *prefix, Body *b,
                       Err *e) {
    const SubGraph *sg = b->sg;
    for (int k = 0; k < sg->n_nodes; k++) {
        const SubNode *sn = &sg->nodes[k];
        if (!ops_find(sn->domain, sn->op))
            return op_err(e, ST_UNSUPPORTED, owner,
                          "node '%s' of its %s uses operator %s (domain '%s'), which orch does "
                          "not support",
                          sn->name, attr, sn->op, *sn->domain ? sn->domain : "ai.onnx");
        if (g->n_nodes >= CTRL_MAX_GRAPH_NODES)
            return op_err(e, ST_UNSUPPORTED, owner,
                          "inlining its %s would grow the graph past %d nodes, orch's bound", attr,
                          CTRL_MAX_GRAPH_NODES);
        char nname[512];
        snprintf(nname, sizeof nname, "%s/%s", prefix, sn->name);
        Node *m = graph_add_node(g, sn->op, sn->domain, nname, sn->n_in, sn->n_out, 0);
        m->opset = sn->opset;
        m->n_attr = sn->n_attr;
        m->attr = sn->attr; // read-only, in the graph's arena: shared by every copy
        m->n_implicit = sn->n_implicit;
        for (int j = 0; j < sn->n_in; j++) {
            int id = body_resolve(b, sn->in[j]);
            if (id == -2)
                return op_err(e, ST_INVALID, owner,
                              "node '%s' of its %s reads '%s' before anything defines it", sn->name,
                              attr, sn->in[j]);
            m->in[j] = id;
        }
        for (int j = 0; j < sn->n_out; j++) {
            if (!*sn->out[j])
                continue;
            Tensor *t = new_tensor(g, prefix, sn->out[j]);
            m->out[j] = t->id;
            scope_bind(&b->scope, sn->out[j], t->id);
        }
    }
    return ST_OK;
}

// An Identity node src -> dst (dst an output of the control node); fold bypasses it unless dst
// is a graph output, whose name must stay.
static void add_identity(Graph *g, const char *prefix, int src, int dst) {
    char nname[512];
    snprintf(nname, sizeof nname, "%s/out_%s", prefix, g->tensors[dst]->name);
    Node *m = graph_add_node(g, "Identity", "", nname, 1, 1, 0);
    m->in[0] = src;
    m->out[0] = dst;
}

// The graph attribute `name` of n and the offset of its outer names among n's implicit inputs.
static const SubGraph *graph_attr(const Node *n, const char *name, int *outer_at) {
    int at = n->n_in - n->n_implicit;
    for (int j = 0; j < n->n_attr; j++) {
        if (n->attr[j].type != AT_GRAPH || !n->attr[j].g)
            continue;
        if (strcmp(n->attr[j].name, name) == 0) {
            *outer_at = at;
            return n->attr[j].g;
        }
        at += n->attr[j].g->n_outer;
    }
    return NULL;
}

// The single boolean value of a constant tensor: 1 / 0, or -1 when it is not a one-element
// constant.
static int const_bool(const Tensor *t) {
    if (!t || t->kind != TK_CONST || t->rank < 0 || tensor_numel(t) != 1 ||
        dtype_size(t->dtype) == 0 || t->dtype == DT_STRING)
        return -1;
    return dtype_is_float(t->dtype) ? elem_get_f64(t->dtype, t->data, 0) != 0
                                    : elem_get_i64(t->dtype, t->data, 0) != 0;
}

static int expand_if(Graph *g, Node *n, Err *e) {
    int then_at = 0, else_at = 0;
    const SubGraph *then_g = graph_attr(n, "then_branch", &then_at);
    const SubGraph *else_g = graph_attr(n, "else_branch", &else_at);
    if (!then_g || !else_g)
        return op_err(e, ST_INVALID, n, "needs graph attributes then_branch and else_branch");
    if (n->n_in - n->n_implicit != 1 || n->in[0] < 0)
        return op_err(e, ST_INVALID, n, "takes exactly one input, the condition");
    const Tensor *c = g->tensors[n->in[0]];
    int cond = const_bool(c);
    if (c->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "its condition '%s' is computed at run time from the data; orch compiles "
                      "one static graph, so it inlines an If only when its condition folds to a "
                      "constant (from constants and shapes)",
                      c->name);
    if (cond < 0)
        return op_err(e, ST_INVALID, n, "the condition '%s' must hold one boolean value", c->name);
    const SubGraph *sg = cond ? then_g : else_g;
    const char *attr = cond ? "then_branch" : "else_branch";
    if (sg->n_in != 0)
        return op_err(e, ST_INVALID, n, "its %s declares %d inputs; a branch takes none", attr,
                      sg->n_in);
    if (n->n_out != sg->n_out)
        return op_err(e, ST_INVALID, n, "has %d outputs but its %s returns %d", n->n_out, attr,
                      sg->n_out);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%.200s/%s", n->name, cond ? "then" : "else");
    Body b = {sg, n->in + (cond ? then_at : else_at), {0}};
    copy_bind_consts(g, sg, prefix, &b.scope);
    int rc = instantiate(g, n, attr, prefix, &b, e);
    for (int j = 0; j < n->n_out && rc == ST_OK; j++) {
        if (n->out[j] < 0)
            continue;
        int src = body_resolve(&b, sg->out[j]);
        if (src < 0)
            rc = op_err(e, ST_INVALID, n, "its %s returns '%s', which nothing defines", attr,
                        sg->out[j]);
        else
            add_identity(g, prefix, src, n->out[j]);
    }
    scope_free(&b.scope);
    return rc;
}

// What a Loop body's condition output is, followed through Identity nodes: 1 / 0 constant,
// 2 the condition input carried unchanged, -1 computed from the data.
static int body_condition(const Graph *g, const SubGraph *sg, const int *outer, const char *name,
                          int depth) {
    if (depth > 64)
        return -1;
    if (sg->n_in >= 2 && strcmp(name, sg->in[1]) == 0)
        return 2;
    for (int i = 0; i < sg->n_consts; i++)
        if (strcmp(sg->consts[i]->name, name) == 0)
            return const_bool(sg->consts[i]);
    for (int k = sg->n_nodes - 1; k >= 0; k--) {
        const SubNode *sn = &sg->nodes[k];
        for (int j = 0; j < sn->n_out; j++)
            if (strcmp(sn->out[j], name) == 0)
                return strcmp(sn->op, "Identity") == 0 && !*sn->domain && sn->n_in >= 1
                           ? body_condition(g, sg, outer, sn->in[0], depth + 1)
                           : -1;
    }
    for (int i = 0; i < sg->n_outer; i++)
        if (strcmp(sg->outer[i], name) == 0)
            return outer[i] >= 0 ? const_bool(g->tensors[outer[i]]) : -1;
    return -1;
}

static int expand_loop(Graph *g, Node *n, Err *e) {
    int outer_at = 0;
    const SubGraph *sg = graph_attr(n, "body", &outer_at);
    if (!sg)
        return op_err(e, ST_INVALID, n, "needs the graph attribute body");
    int n_decl = n->n_in - n->n_implicit, N = n_decl - 2;
    if (N < 0)
        return op_err(e, ST_INVALID, n, "needs the inputs M and cond (either may be empty)");
    if (sg->n_in != 2 + N || sg->n_out < 1 + N)
        return op_err(e, ST_INVALID, n,
                      "carries %d values, so its body must take %d inputs and return at least %d; "
                      "it takes %d and returns %d",
                      N, N + 2, N + 1, sg->n_in, sg->n_out);
    int K = sg->n_out - 1 - N;
    if (n->n_out > N + K)
        return op_err(e, ST_INVALID, n, "has %d outputs; its body gives %d", n->n_out, N + K);
    const int *outer = n->in + outer_at;

    // The trip count: M, limited by the condition where the condition is static.
    const Tensor *m = n->in[0] >= 0 ? g->tensors[n->in[0]] : NULL;
    if (m && m->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "its trip count M ('%s') is computed at run time from the data; orch "
                      "unrolls a Loop only when its trip count folds to a constant",
                      m->name);
    if (m && (tensor_numel(m) != 1 || (m->dtype != DT_INT64 && m->dtype != DT_INT32)))
        return op_err(e, ST_INVALID, n, "its trip count M ('%s') must be one int64 value", m->name);
    int64_t trips = m ? elem_get_i64(m->dtype, m->data, 0) : -1;
    if (m && trips < 0)
        trips = 0;
    const Tensor *c = n->in[1] >= 0 ? g->tensors[n->in[1]] : NULL;
    if (c && c->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "its condition input '%s' is computed at run time, so whether it runs at "
                      "all depends on the data; orch unrolls only loops of a static trip count",
                      c->name);
    int first = c ? const_bool(c) : 1;
    if (first < 0)
        return op_err(e, ST_INVALID, n, "its condition input '%s' must hold one boolean value",
                      c->name);
    int later = body_condition(g, sg, outer, sg->out[0], 0);
    if (!first) {
        trips = 0;
    } else if (later < 0) {
        return op_err(e, ST_UNSUPPORTED, n,
                      "its body computes the condition '%s' from the data, so when the loop "
                      "stops is known only at run time; orch unrolls only loops whose condition "
                      "stays a constant",
                      sg->out[0]);
    } else if (later == 0) {
        trips = m ? ORCH_MIN(trips, 1) : 1;
    } else if (!m) {
        return op_err(e, ST_INVALID, n,
                      "has no trip count M and its condition stays true: it never ends");
    }
    int body_nodes = ORCH_MAX(sg->n_nodes, 1);
    if (trips > CTRL_MAX_UNROLLED_NODES / body_nodes)
        return op_err(e, ST_UNSUPPORTED, n,
                      "unrolling its %lld iterations of a %d-node body would exceed orch's bound "
                      "of %d unrolled nodes per Loop",
                      (long long)trips, sg->n_nodes, CTRL_MAX_UNROLLED_NODES);
    bool scans_used = false;
    for (int k = 0; k < K && N + k < n->n_out; k++)
        scans_used = scans_used || n->out[N + k] >= 0;
    if (trips == 0 && scans_used)
        return op_err(e, ST_UNSUPPORTED, n,
                      "runs no iteration, so its scan outputs would be empty of a shape only "
                      "the body knows; orch needs a loop that runs at least once");

    char prefix[300];
    int rc = ST_OK;
    int *consts = xmalloc(sizeof(int) * (size_t)(sg->n_consts + 1));
    int *carried = xmalloc(sizeof(int) * (size_t)(N + 1));
    int *scans = xmalloc(sizeof(int) * (size_t)((int64_t)K * trips + 1));
    snprintf(prefix, sizeof prefix, "%.200s/body", n->name);
    for (int i = 0; i < sg->n_consts; i++)
        consts[i] = copy_const(g, prefix, sg->consts[i]);
    int cond_in = trips ? scalar_const(g, prefix, "cond", DT_BOOL, 1) : -1;
    for (int j = 0; j < N; j++)
        carried[j] = n->in[2 + j];
    for (int64_t it = 0; it < trips && rc == ST_OK; it++) {
        snprintf(prefix, sizeof prefix, "%.200s/%lld", n->name, (long long)it);
        Body b = {sg, outer, {0}};
        scope_bind(&b.scope, sg->in[0], scalar_const(g, prefix, "iter", DT_INT64, it));
        scope_bind(&b.scope, sg->in[1], cond_in);
        for (int j = 0; j < N; j++)
            scope_bind(&b.scope, sg->in[2 + j], carried[j]);
        bind_consts(sg, consts, &b.scope);
        rc = instantiate(g, n, "body", prefix, &b, e);
        for (int j = 0; j < N + K && rc == ST_OK; j++) {
            int id = body_resolve(&b, sg->out[1 + j]);
            if (id < 0)
                rc = op_err(e, ST_INVALID, n, "its body returns '%s', which nothing defines",
                            sg->out[1 + j]);
            else if (j < N)
                carried[j] = id;
            else
                scans[(int64_t)(j - N) * trips + it] = id;
        }
        scope_free(&b.scope);
    }
    snprintf(prefix, sizeof prefix, "%.200s", n->name);
    for (int j = 0; j < N && j < n->n_out && rc == ST_OK; j++)
        if (n->out[j] >= 0) {
            if (carried[j] < 0)
                rc = op_err(e, ST_INVALID, n, "its initial value %d is empty", j);
            else
                add_identity(g, prefix, carried[j], n->out[j]);
        }
    // Scan outputs: each iteration's value gets a leading axis, then all are concatenated.
    int axes = -1;
    for (int k = 0; k < K && N + k < n->n_out && rc == ST_OK; k++) {
        if (n->out[N + k] < 0)
            continue;
        if (axes < 0) {
            Tensor *a = new_tensor(g, prefix, "scan_axes");
            a->data = xcalloc(1, 8);
            a->kind = TK_CONST;
            tensor_set_shape(a, DT_INT64, 1, (int64_t[]){1});
            axes = a->id;
        }
        Node *cat = NULL;
        if (trips > 1) {
            char nname[512];
            snprintf(nname, sizeof nname, "%s/scan_%d", prefix, k);
            cat = graph_add_node(g, "Concat", "", nname, (int)trips, 1, 1);
            cat->attr[0].name = "axis";
            cat->attr[0].type = AT_INT;
            cat->attr[0].i = 0;
            cat->out[0] = n->out[N + k];
        }
        for (int64_t it = 0; it < trips; it++) {
            char nname[512];
            snprintf(nname, sizeof nname, "%s/scan_%d_%lld", prefix, k, (long long)it);
            Node *u = graph_add_node(g, "Unsqueeze", "", nname, 2, 1, 0);
            u->opset = 13; // axes as an input
            u->in[0] = scans[(int64_t)k * trips + it];
            u->in[1] = axes;
            u->out[0] = cat ? new_tensor(g, nname, "unsqueezed")->id : n->out[N + k];
            if (cat)
                cat->in[it] = u->out[0];
        }
        if (cat) { // after its inputs' producers: move it to the end
            int at = -1;
            for (int i = g->n_nodes - 1; i >= 0 && at < 0; i--)
                if (g->nodes[i] == cat)
                    at = i;
            memmove(&g->nodes[at], &g->nodes[at + 1],
                    sizeof(Node *) * (size_t)(g->n_nodes - at - 1));
            g->nodes[g->n_nodes - 1] = cat;
        }
    }
    free(consts);
    free(carried);
    free(scans);
    return rc;
}

int ctrl_inline_attr(Graph *g, const Node *n, const char *attr, const int *formals, int n_formals,
                     const char *prefix, int *outs, int n_outs, Err *e) {
    int outer_at = 0;
    const SubGraph *sg = graph_attr(n, attr, &outer_at);
    if (!sg)
        return op_err(e, ST_INVALID, n, "needs the graph attribute %s", attr);
    if (sg->n_in != n_formals || sg->n_out != n_outs)
        return op_err(e, ST_INVALID, n,
                      "its %s must take %d inputs and return %d; it takes %d and returns %d", attr,
                      n_formals, n_outs, sg->n_in, sg->n_out);
    Body b = {sg, n->in + outer_at, {0}};
    for (int i = 0; i < n_formals; i++)
        scope_bind(&b.scope, sg->in[i], formals[i]);
    copy_bind_consts(g, sg, prefix, &b.scope);
    int rc = instantiate(g, n, attr, prefix, &b, e);
    for (int j = 0; j < n_outs && rc == ST_OK; j++) {
        outs[j] = body_resolve(&b, sg->out[j]);
        if (outs[j] < 0)
            rc = op_err(e, ST_INVALID, n, "its %s returns '%s', which nothing defines", attr,
                        sg->out[j]);
    }
    scope_free(&b.scope);
    return rc;
}

int ctrl_expand(Graph *g, int k, Err *e) {
    Node *n = g->nodes[k];
    int first = g->n_nodes;
    int rc = strcmp(n->op, "If") == 0 ? expand_if(g, n, e) : expand_loop(g, n, e);
    if (rc)
        return rc;
    n->dead = true;
    graph_move_appended(g, k, first);
    return ST_OK;
}

// Reached only for an If or Loop that was not inlined, which ctrl_expand reports first.
static int infer_control(Graph *g, Node *n, Err *e) {
    (void)g;
    return op_err(e, ST_UNSUPPORTED, n, "control flow is resolved while folding, not run");
}

static int run_control(const OpRun *r, Err *e) {
    return op_err(e, ST_UNSUPPORTED, r->n, "control flow is resolved while folding, not run");
}

const OpDef ops_control[] = {
    {"If", infer_control, run_control, 1, -1, 1, 4096, 0},
    {"Loop", infer_control, run_control, 2, -1, 1, 4096, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
