// Sequence ops resolved while folding (see sequence.h): each sequence value is the list of tensor
// ids it holds, so SequenceAt becomes an Identity, ConcatFromSequence a Concat (after Unsqueezes
// with new_axis), SplitToSequence a Split (then Squeezes), SequenceLength a constant, SequenceMap
// its body once per element (control_flow.c copies it), and the list-building ops
// (SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase) vanish.
// Needs positions and splits constant after folding. Guarantees no node reads a sequence after the
// sweep, or one error naming the node and the reason.
#include "sequence.h"

#include "control_flow.h"
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const seq_op_names[] = {
    "SequenceEmpty",  "SequenceConstruct",  "SequenceInsert",  "SequenceAt", "SequenceErase",
    "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap"};

bool seq_is_sequence_op(const Node *n) {
    if (*n->domain)
        return false;
    for (size_t i = 0; i < ORCH_COUNT(seq_op_names); i++)
        if (strcmp(n->op, seq_op_names[i]) == 0)
            return true;
    return false;
}

static const SeqValue *seq_get(const SeqMap *m, int id) {
    return id >= 0 && id < m->cap && m->v[id].is_seq ? &m->v[id] : NULL;
}

bool seq_reads_sequence(const SeqMap *m, const Node *n) {
    for (int j = 0; j < n->n_in; j++)
        if (seq_get(m, n->in[j]))
            return true;
    return false;
}

void seq_map_free(SeqMap *m) {
    for (int i = 0; i < m->cap; i++)
        free(m->v[i].elems);
    free(m->v);
    memset(m, 0, sizeof *m);
}

// Records output j of n as the sequence (dt, elems[0..count)); a sequence cannot leave the graph.
static int put(Graph *g, const Node *n, SeqMap *m, int j, DType dt, int count, const int *elems,
               Err *e) {
    int id = j < n->n_out ? n->out[j] : -1;
    if (id < 0)
        return ST_OK;
    if (g->tensors[id]->is_output)
        return op_err(e, ST_UNSUPPORTED, n,
                      "its output '%s' is a sequence and a graph output; orch compiles a graph "
                      "of tensors, so a sequence must be consumed inside the model (by "
                      "ConcatFromSequence or SequenceAt, say)",
                      g->tensors[id]->name);
    int *copy = xmalloc(sizeof(int) * (size_t)(count + 1)); // elems may live in m->v
    if (count)
        memcpy(copy, elems, sizeof(int) * (size_t)count);
    if (id >= m->cap) {
        int cap = ORCH_MAX(2 * m->cap, g->n_tensors + 16);
        m->v = xrealloc(m->v, sizeof(SeqValue) * (size_t)cap);
        memset(&m->v[m->cap], 0, sizeof(SeqValue) * (size_t)(cap - m->cap));
        m->cap = cap;
    }
    SeqValue *v = &m->v[id];
    free(v->elems);
    v->is_seq = true;
    v->dtype = dt;
    v->n = count;
    v->elems = copy;
    return ST_OK;
}

// Input i of n as a sequence.
static int need_seq(const Graph *g, const Node *n, const SeqMap *m, int i, const SeqValue **out,
                    Err *e) {
    *out = i < n->n_in ? seq_get(m, n->in[i]) : NULL;
    if (!*out)
        return op_err(e, ST_INVALID, n, "input %d ('%s') must be a sequence", i,
                      i < n->n_in && n->in[i] >= 0 ? g->tensors[n->in[i]]->name : "");
    return ST_OK;
}

// Input i of n as a tensor (present, not a sequence).
static int need_tensor(const Graph *g, const Node *n, const SeqMap *m, int i, const Tensor **out,
                       Err *e) {
    *out = node_input(g, n, i);
    if (!*out)
        return op_err(e, ST_INVALID, n, "required input %d is missing", i);
    if (seq_get(m, n->in[i]))
        return op_err(e, ST_INVALID, n, "input %d ('%s') is a sequence; a tensor is expected", i,
                      (*out)->name);
    return ST_OK;
}

// The position input i of n in a sequence of len tensors, normalised to [0, len] (with end, as
// SequenceInsert takes) or [0, len); absent: dflt.
static int position(const Graph *g, const Node *n, int i, int len, bool end, int dflt, int *pos,
                    Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (!t) {
        *pos = dflt;
        return ST_OK;
    }
    if (t->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "its position '%s' is computed at run time from the data; orch resolves "
                      "sequences at compile time, so a position must fold to a constant (from "
                      "constants, shapes and loop counters)",
                      t->name);
    if ((t->dtype != DT_INT64 && t->dtype != DT_INT32) || tensor_numel(t) != 1)
        return op_err(e, ST_INVALID, n, "its position '%s' must be one int32 or int64 value",
                      t->name);
    int64_t p = elem_get_i64(t->dtype, t->data, 0);
    int64_t hi = end ? len : len - 1;
    if (p < -(int64_t)len || p > hi)
        return op_err(e, ST_INVALID, n,
                      "position %lld is outside [%d, %lld] for a sequence of %d tensors",
                      (long long)p, -len, (long long)hi, len);
    *pos = (int)(p < 0 ? p + len : p);
    return ST_OK;
}

// A new tensor of the graph named NODE/what (a counter where the name is taken).
static Tensor *new_tensor(Graph *g, const Node *n, const char *what) {
    char buf[512];
    snprintf(buf, sizeof buf, "%.300s/%.100s", n->name, what);
    for (int c = 1; graph_find_tensor(g, buf); c++)
        snprintf(buf, sizeof buf, "%.300s/%.100s~%d", n->name, what, c);
    return graph_add_tensor(g, buf);
}

// A constant 1-D int64 tensor holding vals[0..count).
static int ints_const(Graph *g, const Node *n, const char *what, const int64_t *vals, int count) {
    Tensor *t = new_tensor(g, n, what);
    t->data = xmalloc(sizeof(int64_t) * (size_t)(count + 1));
    memcpy(t->data, vals, sizeof(int64_t) * (size_t)count);
    t->kind = TK_CONST;
    tensor_set_shape(t, DT_INT64, 1, (int64_t[]){count});
    return t->id;
}

// A node named NODE/what (NODE itself with what NULL), opset 13: axes and split as inputs.
static Node *add_node(Graph *g, const Node *n, const char *op, const char *what, int n_in,
                      int n_out, int n_attr) {
    char nname[512];
    snprintf(nname, sizeof nname, "%.300s%s%.100s", n->name, what ? "/" : "", what ? what : "");
    Node *m = graph_add_node(g, op, "", nname, n_in, n_out, n_attr);
    m->opset = 13;
    return m;
}

static void set_axis(Node *m, int axis) {
    m->attr[0].name = "axis";
    m->attr[0].type = AT_INT;
    m->attr[0].i = axis;
}

static int sequence_construct(Graph *g, const Node *n, SeqMap *m, Err *e) {
    int *elems = xmalloc(sizeof(int) * (size_t)(n->n_in + 1));
    DType dt = DT_UNDEFINED;
    int rc = ST_OK;
    for (int j = 0; j < n->n_in && rc == ST_OK; j++) {
        const Tensor *t;
        rc = need_tensor(g, n, m, j, &t, e);
        if (rc == ST_OK && j && t->dtype != dt)
            rc = op_err(e, ST_INVALID, n,
                        "input %d ('%s') is %s but input 0 is %s: a sequence "
                        "holds one element type",
                        j, t->name, dtype_name(t->dtype), dtype_name(dt));
        if (rc == ST_OK) {
            dt = t->dtype;
            elems[j] = t->id;
        }
    }
    if (rc == ST_OK)
        rc = put(g, n, m, 0, dt, n->n_in, elems, e);
    free(elems);
    return rc;
}

static int sequence_insert(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const SeqValue *s;
    const Tensor *t;
    int pos, rc = need_seq(g, n, m, 0, &s, e);
    if (rc || (rc = need_tensor(g, n, m, 1, &t, e)))
        return rc;
    // SequenceMap's outputs leave the type open; their elements are inferred by now.
    DType dt = s->dtype != DT_UNDEFINED ? s->dtype
               : s->n                   ? g->tensors[s->elems[0]]->dtype
                                        : DT_UNDEFINED;
    if (dt != DT_UNDEFINED && t->dtype != dt)
        return op_err(e, ST_INVALID, n, "inserts a %s tensor ('%s') into a sequence of %s",
                      dtype_name(t->dtype), t->name, dtype_name(dt));
    if ((rc = position(g, n, 2, s->n, true, s->n, &pos, e)))
        return rc;
    int *elems = xmalloc(sizeof(int) * (size_t)(s->n + 2));
    memcpy(elems, s->elems, sizeof(int) * (size_t)pos);
    elems[pos] = t->id;
    memcpy(elems + pos + 1, s->elems + pos, sizeof(int) * (size_t)(s->n - pos));
    rc = put(g, n, m, 0, t->dtype, s->n + 1, elems, e);
    free(elems);
    return rc;
}

static int sequence_erase(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const SeqValue *s;
    int pos, rc = need_seq(g, n, m, 0, &s, e);
    if (rc)
        return rc;
    if (s->n == 0)
        return op_err(e, ST_INVALID, n, "erases from an empty sequence");
    if ((rc = position(g, n, 1, s->n, false, s->n - 1, &pos, e)))
        return rc;
    int *elems = xmalloc(sizeof(int) * (size_t)s->n);
    memcpy(elems, s->elems, sizeof(int) * (size_t)pos);
    memcpy(elems + pos, s->elems + pos + 1, sizeof(int) * (size_t)(s->n - pos - 1));
    rc = put(g, n, m, 0, s->dtype, s->n - 1, elems, e);
    free(elems);
    return rc;
}

static int sequence_at(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const SeqValue *s;
    int pos, rc = need_seq(g, n, m, 0, &s, e);
    if (rc)
        return rc;
    if (s->n == 0)
        return op_err(e, ST_INVALID, n, "reads from an empty sequence");
    if (!node_input(g, n, 1))
        return op_err(e, ST_INVALID, n, "required input 1 (position) is missing");
    if ((rc = position(g, n, 1, s->n, false, 0, &pos, e)))
        return rc;
    if (n->out[0] >= 0) {
        Node *id = add_node(g, n, "Identity", NULL, 1, 1, 0);
        id->in[0] = s->elems[pos];
        id->out[0] = n->out[0];
    }
    return ST_OK;
}

static int sequence_length(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const SeqValue *s;
    int rc = need_seq(g, n, m, 0, &s, e);
    if (rc || n->out[0] < 0)
        return rc;
    Tensor *t = g->tensors[n->out[0]];
    t->data = xmalloc(sizeof(int64_t));
    *(int64_t *)t->data = s->n;
    t->kind = TK_CONST;
    tensor_set_shape(t, DT_INT64, 0, NULL);
    return ST_OK;
}

static int concat_from_sequence(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const SeqValue *s;
    int rc = need_seq(g, n, m, 0, &s, e);
    if (rc)
        return rc;
    const Attr *a = node_attr(n, "axis");
    if (!a || a->type != AT_INT)
        return op_err(e, ST_INVALID, n, "needs the integer attribute 'axis'");
    int64_t new_axis = node_attr_i(n, "new_axis", 0);
    if (new_axis != 0 && new_axis != 1)
        return op_err(e, ST_INVALID, n, "new_axis must be 0 or 1, not %lld", (long long)new_axis);
    if (s->n == 0)
        return op_err(e, ST_INVALID, n, "concatenates an empty sequence, whose shape is unknown");
    int rank = g->tensors[s->elems[0]]->rank, axis;
    if ((rc = op_axis(n, a->i, rank + (int)new_axis, "axis", &axis, e)))
        return rc;
    if (n->out[0] < 0)
        return ST_OK;
    Node *cat = NULL;
    if (s->n > 1) {
        cat = add_node(g, n, "Concat", NULL, s->n, 1, 1);
        set_axis(cat, axis);
        cat->out[0] = n->out[0];
    }
    int axes = new_axis ? ints_const(g, n, "axes", (int64_t[]){axis}, 1) : -1;
    for (int i = 0; i < s->n; i++) {
        int src = s->elems[i];
        if (new_axis) {
            char what[64];
            snprintf(what, sizeof what, "unsqueeze_%d", i);
            Node *u = add_node(g, n, "Unsqueeze", what, 2, 1, 0);
            u->in[0] = src;
            u->in[1] = axes;
            u->out[0] = cat ? new_tensor(g, n, what)->id : n->out[0];
            src = u->out[0];
        } else if (!cat) {
            Node *id = add_node(g, n, "Identity", NULL, 1, 1, 0);
            id->in[0] = src;
            id->out[0] = n->out[0];
        }
        if (cat)
            cat->in[i] = src;
    }
    if (cat) { // after the Unsqueezes that feed it
        int at = g->n_nodes - 1;
        while (g->nodes[at] != cat)
            at--;
        memmove(&g->nodes[at], &g->nodes[at + 1], sizeof(Node *) * (size_t)(g->n_nodes - at - 1));
        g->nodes[g->n_nodes - 1] = cat;
    }
    return ST_OK;
}

static int split_to_sequence(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const Tensor *x;
    int axis, rc = need_tensor(g, n, m, 0, &x, e);
    if (rc)
        return rc;
    if (x->rank == 0)
        return op_err(e, ST_INVALID, n, "cannot split a scalar");
    if ((rc = op_axis(n, node_attr_i(n, "axis", 0), x->rank, "axis", &axis, e)))
        return rc;
    int64_t keepdims = node_attr_i(n, "keepdims", 1), dim = x->dims[axis];
    const Tensor *sp = node_input(g, n, 1);
    if (sp && seq_get(m, sp->id))
        return op_err(e, ST_INVALID, n, "its split '%s' is a sequence; a tensor is expected",
                      sp->name);
    if (sp && sp->kind != TK_CONST)
        return op_err(e, ST_UNSUPPORTED, n,
                      "its split '%s' is computed at run time from the data; orch resolves "
                      "sequences at compile time, so the split must fold to a constant",
                      sp->name);
    if (sp && ((sp->dtype != DT_INT64 && sp->dtype != DT_INT32) || sp->rank > 1))
        return op_err(e, ST_INVALID, n, "its split '%s' must be an int32 or int64 scalar or 1-D",
                      sp->name);
    // The pieces' sizes: 1 each (no split), chunks of a scalar split (the last one smaller), or
    // the listed sizes.
    int64_t count, chunk = 1;
    if (sp && sp->rank == 0) {
        chunk = elem_get_i64(sp->dtype, sp->data, 0);
        if (chunk <= 0)
            return op_err(e, ST_INVALID, n, "its split %lld must be positive", (long long)chunk);
        count = (dim + chunk - 1) / chunk;
    } else {
        count = sp ? tensor_numel(sp) : dim;
    }
    if (count > CTRL_MAX_UNROLLED_NODES)
        return op_err(e, ST_UNSUPPORTED, n,
                      "splits into %lld tensors, past orch's bound of %d sequence elements",
                      (long long)count, CTRL_MAX_UNROLLED_NODES);
    int64_t *sizes = xmalloc(sizeof(int64_t) * (size_t)(count + 1));
    int64_t sum = 0;
    for (int64_t i = 0; i < count; i++) {
        sizes[i] = sp && sp->rank == 1 ? elem_get_i64(sp->dtype, sp->data, i)
                                       : ORCH_MIN(chunk, dim - chunk * i);
        if (sizes[i] < 0)
            rc = op_err(e, ST_INVALID, n, "its split holds a negative size %lld",
                        (long long)sizes[i]);
        sum += sizes[i];
    }
    if (rc == ST_OK && sum != dim)
        rc = op_err(e, ST_INVALID, n, "its split sizes add up to %lld, but axis %d has size %lld",
                    (long long)sum, axis, (long long)dim);
    int *elems = xmalloc(sizeof(int) * (size_t)(count + 1));
    if (rc == ST_OK && count > 0) {
        Node *split = add_node(g, n, "Split", NULL, 2, (int)count, 1);
        set_axis(split, axis);
        split->in[0] = x->id;
        split->in[1] = ints_const(g, n, "split", sizes, (int)count);
        // keepdims 0 squeezes pieces of 1: with no split (the spec), and with a scalar split of
        // 1, which the spec says ignores keepdims but ONNX Runtime squeezes, and which is how
        // the TorchScript exporter writes torch.unbind.
        bool squeeze = !keepdims && (!sp || (sp->rank == 0 && chunk == 1));
        int axes = squeeze ? ints_const(g, n, "axes", (int64_t[]){axis}, 1) : -1;
        for (int i = 0; i < count; i++) {
            char what[64];
            snprintf(what, sizeof what, "%d", i);
            split->out[i] = elems[i] = new_tensor(g, n, what)->id;
        }
        for (int i = 0; squeeze && i < count; i++) {
            char what[64];
            snprintf(what, sizeof what, "squeeze_%d", i);
            Node *q = add_node(g, n, "Squeeze", what, 2, 1, 0);
            q->in[0] = elems[i];
            q->in[1] = axes;
            q->out[0] = elems[i] = new_tensor(g, n, what)->id;
        }
    }
    if (rc == ST_OK)
        rc = put(g, n, m, 0, x->dtype, (int)count, elems, e);
    free(sizes);
    free(elems);
    return rc;
}

// SequenceMap: its body copied once per element, taking element i of each sequence input (all of
// one length) and each tensor input as it is; output j is the sequence of the copies' j-th
// outputs.
static int sequence_map(Graph *g, const Node *n, SeqMap *m, Err *e) {
    const SeqValue *s0;
    int rc = need_seq(g, n, m, 0, &s0, e);
    if (rc)
        return rc;
    int n_decl = n->n_in - n->n_implicit, len = s0->n;
    for (int j = 0; j < n_decl; j++) {
        const SeqValue *s = seq_get(m, n->in[j]);
        if (n->in[j] < 0)
            return op_err(e, ST_INVALID, n, "input %d is empty", j);
        if (s && s->n != len)
            return op_err(e, ST_INVALID, n,
                          "its sequence inputs differ in length: '%s' holds %d tensors, '%s' %d",
                          g->tensors[n->in[0]]->name, len, g->tensors[n->in[j]]->name, s->n);
    }
    int *formals = xmalloc(sizeof(int) * (size_t)(n_decl + 1));
    int *outs = xmalloc(sizeof(int) * (size_t)(n->n_out + 1));
    int *lists = xmalloc(sizeof(int) * ((size_t)n->n_out * (size_t)len + 1));
    for (int i = 0; i < len && rc == ST_OK; i++) {
        for (int j = 0; j < n_decl; j++) {
            const SeqValue *s = seq_get(m, n->in[j]);
            formals[j] = s ? s->elems[i] : n->in[j];
        }
        char prefix[400];
        snprintf(prefix, sizeof prefix, "%.300s/%d", n->name, i);
        rc = ctrl_inline_attr(g, n, "body", formals, n_decl, prefix, outs, n->n_out, e);
        for (int j = 0; j < n->n_out && rc == ST_OK; j++)
            lists[(size_t)j * (size_t)len + (size_t)i] = outs[j];
    }
    // The element types are inferred only when the sweep reaches the copies: left open here.
    for (int j = 0; j < n->n_out && rc == ST_OK; j++)
        rc = put(g, n, m, j, DT_UNDEFINED, len, lists + (size_t)j * (size_t)len, e);
    free(formals);
    free(outs);
    free(lists);
    return rc;
}

// Any other node reading a sequence: an Identity passes it on (If outputs and Loop-carried
// values arrive through one); every other op needs tensors.
static int other(Graph *g, const Node *n, SeqMap *m, Err *e) {
    for (int j = 0; j < n->n_in; j++) {
        const SeqValue *s = seq_get(m, n->in[j]);
        if (!s)
            continue;
        if (j == 0 && !*n->domain && strcmp(n->op, "Identity") == 0)
            return put(g, n, m, 0, s->dtype, s->n, s->elems, e);
        return op_err(e, ST_UNSUPPORTED, n,
                      "reads the sequence '%s' where it needs a tensor; orch resolves sequences "
                      "at compile time and passes them only to the sequence ops",
                      g->tensors[n->in[j]]->name);
    }
    return ST_OK;
}

static int expand(Graph *g, Node *n, SeqMap *m, Err *e) {
    if (!seq_is_sequence_op(n))
        return other(g, n, m, e);
    const OpDef *def = ops_find(n->domain, n->op);
    ORCH_ASSERT(def);
    int present = n->n_in - n->n_implicit;
    while (present > 0 && n->in[present - 1] < 0)
        present--;
    if (present < def->min_in || (def->max_in >= 0 && present > def->max_in) ||
        n->n_out < def->min_out || n->n_out > def->max_out)
        return op_err(e, ST_INVALID, n,
                      "has %d inputs and %d outputs, expected %d to %d and %d to %d", present,
                      n->n_out, def->min_in, def->max_in, def->min_out, def->max_out);
    if (strcmp(n->op, "SequenceEmpty") == 0) {
        DType dt = (DType)node_attr_i(n, "dtype", DT_FLOAT);
        if (dtype_size(dt) == 0 || dt == DT_STRING)
            return op_err(e, ST_UNSUPPORTED, n, "makes a sequence of %s, which orch does not store",
                          dtype_name(dt));
        return put(g, n, m, 0, dt, 0, NULL, e);
    }
    if (strcmp(n->op, "SequenceConstruct") == 0)
        return sequence_construct(g, n, m, e);
    if (strcmp(n->op, "SequenceInsert") == 0)
        return sequence_insert(g, n, m, e);
    if (strcmp(n->op, "SequenceErase") == 0)
        return sequence_erase(g, n, m, e);
    if (strcmp(n->op, "SequenceAt") == 0)
        return sequence_at(g, n, m, e);
    if (strcmp(n->op, "SequenceLength") == 0)
        return sequence_length(g, n, m, e);
    if (strcmp(n->op, "ConcatFromSequence") == 0)
        return concat_from_sequence(g, n, m, e);
    if (strcmp(n->op, "SequenceMap") == 0)
        return sequence_map(g, n, m, e);
    return split_to_sequence(g, n, m, e);
}

int seq_expand(Graph *g, int k, SeqMap *m, Err *e) {
    Node *n = g->nodes[k];
    int first = g->n_nodes;
    int rc = expand(g, n, m, e);
    if (rc)
        return rc;
    if (n->attr_mismatch)
        return op_err(e, ST_INVALID, n, "attribute '%s' has type %s, expected %s",
                      n->attr_mismatch->name, attr_type_name(n->attr_mismatch->type),
                      attr_type_name(n->attr_wanted));
    n->dead = true;
    graph_move_appended(g, k, first);
    return ST_OK;
}

// Reached only for a sequence op that was not resolved, which seq_expand reports first.
static int infer_sequence(Graph *g, Node *n, Err *e) {
    (void)g;
    return op_err(e, ST_UNSUPPORTED, n, "sequences are resolved while folding, not run");
}

static int run_sequence(const OpRun *r, Err *e) {
    return op_err(e, ST_UNSUPPORTED, r->n, "sequences are resolved while folding, not run");
}

const OpDef ops_sequence[] = {
    {"SequenceEmpty", infer_sequence, run_sequence, 0, 0, 1, 1, 0},
    {"SequenceConstruct", infer_sequence, run_sequence, 1, -1, 1, 1, 0},
    {"SequenceInsert", infer_sequence, run_sequence, 2, 3, 1, 1, 0},
    {"SequenceAt", infer_sequence, run_sequence, 2, 2, 1, 1, 0},
    {"SequenceErase", infer_sequence, run_sequence, 1, 2, 1, 1, 0},
    {"SequenceLength", infer_sequence, run_sequence, 1, 1, 1, 1, 0},
    {"ConcatFromSequence", infer_sequence, run_sequence, 1, 1, 1, 1, 0},
    {"SplitToSequence", infer_sequence, run_sequence, 1, 2, 1, 1, 0},
    {"SequenceMap", infer_sequence, run_sequence, 1, -1, 1, 4096, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
