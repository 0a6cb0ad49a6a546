// Graph construction, lookup, topological sort, compaction and the verifier (see graph.h).
#define _DEFAULT_SOURCE // madvise
#include "graph.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Graph *graph_create(const char *path) {
    Graph *g = xcalloc(1, sizeof(Graph));
    g->arena = arena_create();
    g->path = arena_strdup(g->arena, path ? path : "<memory>");
    g->name = "";
    g->producer = "";
    return g;
}

void graph_borrow(Graph *g, const void *data, size_t size) {
    g->borrowed = data;
    g->borrowed_size = size;
}

bool graph_owns_data(const Graph *g, const void *p) {
    const uint8_t *q = p;
    return !g || !g->borrowed || q < g->borrowed || q > g->borrowed + g->borrowed_size;
}

void graph_release_borrowed(const Graph *g, const void *p, size_t n) {
    const uint8_t *q = p;
    if (!g || !g->borrowed_mapped || !q || q < g->borrowed ||
        n > (size_t)(g->borrowed + g->borrowed_size - q))
        return;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t mask = (uintptr_t)(page > 0 ? page : 4096) - 1;
    uintptr_t lo = ((uintptr_t)q + mask) & ~mask, hi = ((uintptr_t)q + n) & ~mask;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void tensor_data_free(const Graph *g, Tensor *t) {
    if (graph_owns_data(g, t->data))
        free(t->data);
    t->data = NULL;
}

void graph_free(Graph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->n_tensors; i++)
        tensor_data_free(g, g->tensors[i]);
    for (int i = 0; i < g->n_owned; i++)
        tensor_data_free(g, g->owned_attr_tensors[i]);
    free(g->tensors);
    free(g->nodes);
    free(g->owned_attr_tensors);
    free(g->name_slots);
    free(g->inputs);
    free(g->outputs);
    arena_free(g->arena);
    free(g);
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void name_insert(Graph *g, int id) {
    int mask = g->name_cap - 1;
    for (uint64_t h = hash_str(g->tensors[id]->name);; h++) {
        int *slot = &g->name_slots[h & (uint64_t)mask];
        if (*slot < 0) {
            *slot = id;
            return;
        }
    }
}

static void name_rehash(Graph *g) {
    free(g->name_slots);
    g->name_cap = g->name_cap ? g->name_cap * 2 : 256;
    g->name_slots = xmalloc(sizeof(int) * (size_t)g->name_cap);
    memset(g->name_slots, 0xff, sizeof(int) * (size_t)g->name_cap);
    for (int i = 0; i < g->n_tensors; i++)
        name_insert(g, i);
}

static Tensor *tensor_new(Graph *g, const char *name) {
    Tensor *t = arena_alloc(g->arena, sizeof(Tensor));
    t->name = arena_strdup(g->arena, name);
    t->rank = -1;
    t->producer = -1;
    t->id = -1;
    return t;
}

Tensor *graph_add_tensor(Graph *g, const char *name) {
    if (g->n_tensors == g->cap_tensors) {
        g->cap_tensors = g->cap_tensors ? g->cap_tensors * 2 : 64;
        g->tensors = xrealloc(g->tensors, sizeof(Tensor *) * (size_t)g->cap_tensors);
    }
    Tensor *t = tensor_new(g, name);
    t->id = g->n_tensors;
    g->tensors[g->n_tensors++] = t;
    if (2 * g->n_tensors > g->name_cap)
        name_rehash(g);
    else
        name_insert(g, t->id);
    return t;
}

Tensor *graph_find_tensor(const Graph *g, const char *name) {
    if (!g->name_cap)
        return NULL;
    int mask = g->name_cap - 1;
    for (uint64_t h = hash_str(name);; h++) {
        int id = g->name_slots[h & (uint64_t)mask];
        if (id < 0)
            return NULL;
        if (strcmp(g->tensors[id]->name, name) == 0)
            return g->tensors[id];
    }
}

Tensor *graph_detached_tensor(Graph *g, const char *name) {
    if (g->n_owned == g->cap_owned) {
        g->cap_owned = g->cap_owned ? g->cap_owned * 2 : 8;
        g->owned_attr_tensors =
            xrealloc(g->owned_attr_tensors, sizeof(Tensor *) * (size_t)g->cap_owned);
    }
    Tensor *t = tensor_new(g, name);
    t->kind = TK_CONST;
    g->owned_attr_tensors[g->n_owned++] = t;
    return t;
}

Node *graph_add_node(Graph *g, const char *op, const char *domain, const char *name, int n_in,
                     int n_out, int n_attr) {
    if (g->n_nodes == g->cap_nodes) {
        g->cap_nodes = g->cap_nodes ? g->cap_nodes * 2 : 64;
        g->nodes = xrealloc(g->nodes, sizeof(Node *) * (size_t)g->cap_nodes);
    }
    Node *n = arena_alloc(g->arena, sizeof(Node));
    n->id = g->n_nodes;
    n->op = arena_strdup(g->arena, op);
    n->domain = arena_strdup(g->arena, domain ? domain : "");
    if (name && *name) {
        n->name = arena_strdup(g->arena, name);
    } else {
        char buf[128];
        snprintf(buf, sizeof buf, "%.100s_%d", op, n->id);
        n->name = arena_strdup(g->arena, buf);
    }
    n->opset = g->opset;
    n->n_in = n_in;
    n->n_out = n_out;
    n->n_attr = n_attr;
    n->in = arena_alloc(g->arena, sizeof(int) * (size_t)(n_in ? n_in : 1));
    n->out = arena_alloc(g->arena, sizeof(int) * (size_t)(n_out ? n_out : 1));
    for (int i = 0; i < n_in; i++)
        n->in[i] = -1;
    for (int i = 0; i < n_out; i++)
        n->out[i] = -1;
    n->attr = arena_alloc(g->arena, sizeof(Attr) * (size_t)(n_attr ? n_attr : 1));
    g->nodes[g->n_nodes++] = n;
    return n;
}

void graph_move_appended(Graph *g, int k, int first) {
    int count = g->n_nodes - first, tail = first - (k + 1);
    if (!count || !tail)
        return;
    Node **moved = xmalloc(sizeof(Node *) * (size_t)count);
    memcpy(moved, &g->nodes[first], sizeof(Node *) * (size_t)count);
    memmove(&g->nodes[k + 1 + count], &g->nodes[k + 1], sizeof(Node *) * (size_t)tail);
    memcpy(&g->nodes[k + 1], moved, sizeof(Node *) * (size_t)count);
    free(moved);
}

int64_t tensor_numel(const Tensor *t) {
    ORCH_ASSERT(t->rank >= 0);
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i]; // shapes are validated against overflow when set by inference
    return n;
}

size_t tensor_nbytes(const Tensor *t) { return (size_t)tensor_numel(t) * dtype_size(t->dtype); }

const char *shape_str(const int64_t *dims, int rank, char *buf, size_t n) {
    if (rank < 0) {
        snprintf(buf, n, "?");
        return buf;
    }
    if (rank == 0) {
        snprintf(buf, n, "scalar");
        return buf;
    }
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < rank && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? "x%lld" : "%lld", (long long)dims[i]);
    return buf;
}

const char *tensor_shape_str(const Tensor *t, char *buf, size_t n) {
    return shape_str(t->dims, t->rank, buf, n);
}

void tensor_set_shape(Tensor *t, DType dtype, int rank, const int64_t *dims) {
    ORCH_ASSERT(rank >= 0 && rank <= ORCH_MAX_RANK);
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
}

const Attr *node_attr(const Node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (n->attr[i].name && strcmp(n->attr[i].name, name) == 0)
            return &n->attr[i];
    return NULL;
}

const char *attr_type_name(AttrType t) {
    static const char *const names[] = {"UNDEFINED", "FLOAT",   "INT",     "STRING",
                                        "TENSOR",    "GRAPH",   "FLOATS",  "INTS",
                                        "STRINGS",   "TENSORS", "GRAPHS",  "SPARSE_TENSOR",
                                        "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
    return (unsigned)t < ORCH_COUNT(names) ? names[t] : "unknown";
}

// The node is logically const for readers; the mismatch note is bookkeeping for error reporting.
static const Attr *typed_attr(const Node *n, const char *name, AttrType want, AttrType also) {
    const Attr *a = node_attr(n, name);
    if (!a || a->type == want || a->type == also)
        return a;
    Node *m = (Node *)n;
    if (!m->attr_mismatch) {
        m->attr_mismatch = a;
        m->attr_wanted = want;
    }
    return NULL;
}

int64_t node_attr_i(const Node *n, const char *name, int64_t dflt) {
    const Attr *a = typed_attr(n, name, AT_INT, AT_INT);
    return a ? a->i : dflt;
}

float node_attr_f(const Node *n, const char *name, float dflt) {
    const Attr *a = typed_attr(n, name, AT_FLOAT, AT_INT); // an integer literal is accepted
    if (!a)
        return dflt;
    return a->type == AT_FLOAT ? a->f : (float)a->i;
}

const char *node_attr_s(const Node *n, const char *name, const char *dflt) {
    const Attr *a = typed_attr(n, name, AT_STRING, AT_STRING);
    return a ? a->s : dflt;
}

int node_attr_ints(const Node *n, const char *name, const int64_t **v) {
    const Attr *a = typed_attr(n, name, AT_INTS, AT_INTS);
    *v = a ? a->ints : NULL;
    return a ? a->n : -1;
}

int node_attr_floats(const Node *n, const char *name, const float **v) {
    const Attr *a = typed_attr(n, name, AT_FLOATS, AT_FLOATS);
    *v = a ? a->floats : NULL;
    return a ? a->n : -1;
}

Tensor *node_input(const Graph *g, const Node *n, int i) {
    if (i < 0 || i >= n->n_in || n->in[i] < 0)
        return NULL;
    return g->tensors[n->in[i]];
}

Tensor *node_output(const Graph *g, const Node *n, int i) {
    if (i < 0 || i >= n->n_out || n->out[i] < 0)
        return NULL;
    return g->tensors[n->out[i]];
}

int graph_toposort(Graph *g, Err *e) {
    // Producer of each tensor; duplicates are an invalid model.
    int nt = g->n_tensors, nn = g->n_nodes;
    for (int i = 0; i < nt; i++)
        g->tensors[i]->producer = -1;
    for (int k = 0; k < nn; k++) {
        Node *n = g->nodes[k];
        for (int j = 0; j < n->n_out; j++) {
            if (n->out[j] < 0)
                continue;
            Tensor *t = g->tensors[n->out[j]];
            if (t->kind != TK_VALUE)
                return err_set(e, ST_INVALID,
                               "node '%s' (%s) writes '%s', which is already a graph input or "
                               "initializer",
                               n->name, n->op, t->name);
            if (t->producer >= 0)
                return err_set(e, ST_INVALID,
                               "tensor '%s' is produced twice (nodes '%s' and '%s')", t->name,
                               g->nodes[t->producer]->name, n->name);
            t->producer = k;
        }
    }
    // Kahn's algorithm over node indices.
    int *indeg = xcalloc((size_t)nn, sizeof(int));
    int *order = xmalloc(sizeof(int) * (size_t)(nn ? nn : 1));
    int **users = xcalloc((size_t)nn, sizeof(int *));
    int *n_users = xcalloc((size_t)nn, sizeof(int));
    int rc = ST_OK;
    for (int k = 0; k < nn && rc == ST_OK; k++) {
        Node *n = g->nodes[k];
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] < 0)
                continue;
            Tensor *t = g->tensors[n->in[j]];
            if (t->kind == TK_VALUE && t->producer < 0) {
                rc = err_set(e, ST_INVALID,
                             "node '%s' (%s) reads '%s', which no node, initializer or graph "
                             "input defines",
                             n->name, n->op, t->name);
                break;
            }
            if (t->kind == TK_VALUE) {
                int p = t->producer;
                users[p] = xrealloc(users[p], sizeof(int) * (size_t)(n_users[p] + 1));
                users[p][n_users[p]++] = k;
                indeg[k]++;
            }
        }
    }
    int head = 0, tail = 0;
    if (rc == ST_OK) {
        for (int k = 0; k < nn; k++)
            if (indeg[k] == 0)
                order[tail++] = k;
        while (head < tail) {
            int k = order[head++];
            for (int u = 0; u < n_users[k]; u++)
                if (--indeg[users[k][u]] == 0)
                    order[tail++] = users[k][u];
        }
        if (tail < nn) {
            int k = 0;
            while (indeg[k] == 0)
                k++;
            rc = err_set(e, ST_INVALID, "the graph has a cycle through node '%s' (%s)",
                         g->nodes[k]->name, g->nodes[k]->op);
        }
    }
    if (rc == ST_OK) {
        Node **sorted = xmalloc(sizeof(Node *) * (size_t)(nn ? nn : 1));
        for (int i = 0; i < nn; i++)
            sorted[i] = g->nodes[order[i]];
        if (nn)
            memcpy(g->nodes, sorted, sizeof(Node *) * (size_t)nn);
        free(sorted);
        for (int i = 0; i < nn; i++)
            for (int j = 0; j < g->nodes[i]->n_out; j++)
                if (g->nodes[i]->out[j] >= 0)
                    g->tensors[g->nodes[i]->out[j]]->producer = i;
    }
    for (int k = 0; k < nn; k++)
        free(users[k]);
    free(users);
    free(n_users);
    free(indeg);
    free(order);
    return rc;
}

void graph_compact(Graph *g) {
    int w = 0;
    for (int k = 0; k < g->n_nodes; k++)
        if (!g->nodes[k]->dead)
            g->nodes[w++] = g->nodes[k];
    g->n_nodes = w;
    for (int i = 0; i < g->n_tensors; i++)
        g->tensors[i]->producer = -1;
    for (int k = 0; k < g->n_nodes; k++)
        for (int j = 0; j < g->nodes[k]->n_out; j++)
            if (g->nodes[k]->out[j] >= 0)
                g->tensors[g->nodes[k]->out[j]]->producer = k;
    // Constants nothing reads any more give their memory back.
    bool *used = xcalloc((size_t)g->n_tensors + 1, 1);
    for (int k = 0; k < g->n_nodes; k++)
        for (int j = 0; j < g->nodes[k]->n_in; j++)
            if (g->nodes[k]->in[j] >= 0)
                used[g->nodes[k]->in[j]] = true;
    for (int i = 0; i < g->n_outputs; i++)
        used[g->outputs[i]] = true;
    for (int i = 0; i < g->n_tensors; i++) {
        Tensor *t = g->tensors[i];
        if (t->kind == TK_CONST && !used[i])
            tensor_data_free(g, t);
    }
    free(used);
}

int graph_verify(const Graph *g, Err *e) {
    bool *defined = xcalloc((size_t)g->n_tensors + 1, 1);
    int rc = ST_OK;
    for (int i = 0; i < g->n_tensors; i++) {
        const Tensor *t = g->tensors[i];
        if (t->id != i)
            rc = err_set(e, ST_RUNTIME, "verifier: tensor '%s' has id %d at index %d", t->name,
                         t->id, i);
        if (t->kind != TK_VALUE)
            defined[i] = true;
    }
    for (int k = 0; k < g->n_nodes && rc == ST_OK; k++) {
        const Node *n = g->nodes[k];
        if (n->dead) {
            rc = err_set(e, ST_RUNTIME, "verifier: dead node '%s' left in the list", n->name);
            break;
        }
        for (int j = 0; j < n->n_in; j++) {
            int id = n->in[j];
            if (id < 0)
                continue;
            if (id >= g->n_tensors || !defined[id]) {
                rc = err_set(e, ST_RUNTIME, "verifier: node '%s' (%s) input %d used before defined",
                             n->name, n->op, j);
                break;
            }
            const Tensor *t = g->tensors[id];
            if (t->rank < 0 || (t->kind == TK_CONST && !t->data && tensor_numel(t) > 0)) {
                rc = err_set(e, ST_RUNTIME, "verifier: node '%s' input '%s' has no shape or data",
                             n->name, t->name);
                break;
            }
        }
        for (int j = 0; j < n->n_out && rc == ST_OK; j++) {
            int id = n->out[j];
            if (id < 0)
                continue;
            if (defined[id])
                rc = err_set(e, ST_RUNTIME, "verifier: tensor '%s' defined twice",
                             g->tensors[id]->name);
            else if (g->tensors[id]->rank < 0)
                rc = err_set(e, ST_RUNTIME, "verifier: output '%s' of node '%s' has no shape",
                             g->tensors[id]->name, n->name);
            defined[id] = true;
        }
    }
    for (int i = 0; i < g->n_outputs && rc == ST_OK; i++)
        if (!defined[g->outputs[i]])
            rc = err_set(e, ST_RUNTIME, "verifier: graph output '%s' is never computed",
                         g->tensors[g->outputs[i]]->name);
    free(defined);
    return rc;
}
