// Text and Graphviz dumps of the operator graph and the primitive graph (see dump.h). Parameters
// are spelled the way prim.h defines them (a layout chain runs from the output towards the
// input), so a dump can be checked against the semantics by reading it.
#include "dump.h"

#include "../candidates/attention.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// ---- a growable string, so labels can be built piecewise and cut to length afterwards ----

typedef struct Str {
    char *s;
    size_t len, cap;
} Str;

static void sp(Str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sp(Str *s, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ORCH_ASSERT(n >= 0);
    if (s->len + (size_t)n + 1 > s->cap) {
        s->cap = ORCH_MAX(2 * s->cap, s->len + (size_t)n + 64);
        s->s = xrealloc(s->s, s->cap);
    }
    vsnprintf(s->s + s->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    s->len += (size_t)n;
}

static const char *str_c(const Str *s) {
    return s->s ? s->s : "";
}

static bool utf8_continuation(char c) {
    return ((unsigned char)c & 0xC0) == 0x80;
}

// Cuts to at most max bytes plus "...", never inside a UTF-8 sequence (dot rejects broken ones).
static void str_cut(Str *s, size_t max) {
    if (s->len <= max)
        return;
    size_t n = max;
    while (n > 0 && utf8_continuation(s->s[n]))
        n--;
    s->len = n;
    s->s[n] = 0;
    sp(s, "...");
}

// The same keeping the end: exporters' names ("/encoder/layer.0/attention/self/Softmax") say the
// most in their last components.
static void str_cut_front(Str *s, size_t max) {
    if (s->len <= max)
        return;
    size_t from = s->len - max;
    while (from < s->len && utf8_continuation(s->s[from]))
        from++;
    Str t = {0};
    sp(&t, "...%s", s->s + from);
    free(s->s);
    *s = t;
}

static void sp_ints(Str *s, int n, const int64_t *v, int max) {
    sp(s, "[");
    for (int i = 0; i < n && i < max; i++)
        sp(s, "%s%lld", i ? "," : "", (long long)v[i]);
    if (n > max)
        sp(s, ",... (%d)", n);
    sp(s, "]");
}

static void sp_dims(Str *s, int rank, const int64_t *dims) {
    char b[256];
    sp(s, "%s", shape_str(dims, rank, b, sizeof b));
}

// "name: float32 2x3"; constants marked, and small ones show their values.
static void sp_tensor(Str *s, const Tensor *t) {
    sp(s, "%s: %s%s ", t->name, t->kind == TK_CONST ? "const " : "", dtype_name(t->dtype));
    sp_dims(s, t->rank, t->dims);
    int64_t n = tensor_numel(t);
    if (t->kind == TK_CONST && t->data && dtype_size(t->dtype) && n <= 4) {
        sp(s, " = ");
        for (int64_t i = 0; i < n; i++)
            sp(s, "%s%.9g", i ? "," : "", elem_get_f64(t->dtype, t->data, i));
    }
}

// ---- primitive parameters ----

static void sp_ew_arg(Str *s, const EwArg *a) {
    switch (a->src) {
    case EWS_INPUT: sp(s, "in%d", a->index); break;
    case EWS_INSTR: sp(s, "%%%d", a->index); break;
    case EWS_IMM: sp(s, "%.9g", a->imm); break;
    }
}

// "%0 = MUL(in0, 0.5); %1 = ERF(%0)"; CAST names its target type. At most max instructions.
static void sp_ew_program(Str *s, const EwProgram *pr, const char *sep, int max) {
    for (int i = 0; i < pr->n && i < max; i++) {
        const EwInstr *in = &pr->code[i];
        sp(s, "%s%%%d = %s", i ? sep : "", i, ew_op_name(in->op));
        if (in->op == EW_CAST)
            sp(s, "<%s>", dtype_name(in->dtype));
        sp(s, "(");
        for (int a = 0; a < ew_op_arity(in->op); a++) {
            sp(s, "%s", a ? ", " : "");
            sp_ew_arg(s, &in->arg[a]);
        }
        sp(s, ")");
    }
    if (pr->n > max)
        sp(s, "%s... (%d instructions)", sep, pr->n);
}

static void sp_reduce(Str *s, const ReduceParams *r) {
    sp(s, "%s axes=[", red_op_name(r->op));
    bool first = true;
    for (int d = 0; d < 32; d++)
        if (r->axes & (1u << d)) {
            sp(s, "%s%d", first ? "" : ",", d);
            first = false;
        }
    sp(s, "] keepdims=%d", r->keepdims);
    if (r->select_last)
        sp(s, " select_last");
}

static void sp_stage(Str *s, const LayoutStage *st, int out_rank, const int64_t *out_dims,
                     double pad_value, int max) {
    switch (st->kind) {
    case LS_TRANSPOSE:
        sp(s, "transpose[");
        for (int d = 0; d < out_rank; d++)
            sp(s, "%s%d", d ? "," : "", st->perm[d]);
        sp(s, "]");
        break;
    case LS_RESHAPE:
        sp(s, "reshape ");
        sp_dims(s, out_rank, out_dims);
        break;
    case LS_SLICE:
        sp(s, "slice start=");
        sp_ints(s, st->in_rank, st->start, ORCH_MAX_RANK);
        sp(s, " step=");
        sp_ints(s, st->in_rank, st->step, ORCH_MAX_RANK);
        sp(s, " to ");
        sp_dims(s, out_rank, out_dims);
        break;
    case LS_BROADCAST:
        sp(s, "broadcast to ");
        sp_dims(s, out_rank, out_dims);
        break;
    case LS_TABLE: {
        sp(s, "table");
        bool pads = false;
        for (int d = 0; d < out_rank; d++) {
            if (!st->table[d])
                continue;
            sp(s, " ax%d=", d);
            sp_ints(s, (int)out_dims[d], st->table[d], max);
            for (int64_t i = 0; i < out_dims[d]; i++)
                pads |= st->table[d][i] < 0;
        }
        if (pads)
            sp(s, " pad=%.9g", pad_value);
        break;
    }
    case LS_GATHER: {
        int64_t n = 1;
        for (int d = 0; d < st->idx_rank; d++)
            n *= st->idx_dims[d];
        sp(s, "gather axis=%d idx ", st->axis);
        sp_dims(s, st->idx_rank, st->idx_dims);
        sp(s, "=");
        sp_ints(s, (int)ORCH_MIN(n, (int64_t)1 << 30), st->idx, max);
        break;
    }
    }
}

static void sp_layout(Str *s, const PrimGraph *pg, const Prim *p, const char *sep, int max) {
    const LayoutParams *L = &p->lay;
    if (L->concat) {
        sp(s, "concat axis=%d", L->axis);
        return;
    }
    const Tensor *out = pg->tensors[p->out[0]];
    int rank = out->rank;
    const int64_t *dims = out->dims;
    for (int k = 0; k < L->n_stages; k++) {
        sp(s, "%s", k ? sep : "");
        sp_stage(s, &L->stages[k], rank, dims, L->pad_value, max);
        rank = L->stages[k].in_rank;
        dims = L->stages[k].in_dims;
    }
}

static void sp_linear(Str *s, const PrimGraph *pg, const Prim *p) {
    const LinearParams *l = &p->lin;
    if (l->op == LIN_MATMUL) {
        const Tensor *a = pg->tensors[p->in[0]], *b = pg->tensors[p->in[1]];
        const Tensor *y = pg->tensors[p->out[0]];
        sp(s, "matmul M=%lld K=%lld N=%lld", (long long)a->dims[a->rank - 2],
           (long long)a->dims[a->rank - 1], (long long)b->dims[b->rank - 1]);
        if (y->rank > 2) {
            sp(s, " batch=");
            sp_dims(s, y->rank - 2, y->dims);
        }
        return;
    }
    int ns = l->n_spatial;
    sp(s, "%s%dd group=%d stride=", l->op == LIN_CONV ? "conv" : "conv_transpose", ns, l->group);
    sp_ints(s, ns, l->stride, PRIM_MAX_SPATIAL);
    sp(s, " dilation=");
    sp_ints(s, ns, l->dilation, PRIM_MAX_SPATIAL);
    int64_t pads[2 * PRIM_MAX_SPATIAL];
    for (int d = 0; d < ns; d++) {
        pads[d] = l->pad_begin[d];
        pads[ns + d] = l->pad_end[d];
    }
    sp(s, " pads=");
    sp_ints(s, 2 * ns, pads, 2 * PRIM_MAX_SPATIAL);
    if (l->op == LIN_CONV_TRANSPOSE) {
        sp(s, " output_padding=");
        sp_ints(s, ns, l->out_pad, PRIM_MAX_SPATIAL);
    }
}

static void sp_attrs(Str *s, const Node *n, int max) {
    for (int i = 0; i < n->n_attr; i++) {
        const Attr *a = &n->attr[i];
        sp(s, "%s%s=", i ? " " : "", a->name);
        switch (a->type) {
        case AT_INT: sp(s, "%lld", (long long)a->i); break;
        case AT_FLOAT: sp(s, "%.7g", a->f); break;
        case AT_STRING: sp(s, "'%s'", a->s); break;
        case AT_INTS: sp_ints(s, a->n, a->ints, max); break;
        case AT_FLOATS:
            sp(s, "[");
            for (int k = 0; k < a->n && k < max; k++)
                sp(s, "%s%.7g", k ? "," : "", a->floats[k]);
            sp(s, a->n > max ? ",... (%d)]" : "]", a->n);
            break;
        case AT_TENSOR:
            sp(s, "<tensor ");
            if (a->t && a->t->rank >= 0)
                sp_dims(s, a->t->rank, a->t->dims);
            sp(s, ">");
            break;
        default: sp(s, "<%s>", attr_type_name(a->type)); break;
        }
    }
}

// The parameters of one primitive, on one line or (for dot labels) one instruction, stage or
// attribute list per line; max bounds long lists.
static void sp_params(Str *s, const PrimGraph *pg, const Prim *p, bool multiline, int max) {
    switch (p->kind) {
    case PRIM_ELEMWISE: sp_ew_program(s, &p->ew, multiline ? "\n" : "; ", max); break;
    case PRIM_REDUCE: sp_reduce(s, &p->red); break;
    case PRIM_LAYOUT: sp_layout(s, pg, p, multiline ? "\n<- " : " <- ", max); break;
    case PRIM_LINEAR: sp_linear(s, pg, p); break;
    case PRIM_OPAQUE:
        sp(s, "%s%s%s", p->node->op, *p->node->domain ? " in " : "", p->node->domain);
        if (p->node->n_attr) {
            sp(s, "%s", multiline ? "\n" : " ");
            sp_attrs(s, p->node, max);
        }
        break;
    default: sp(s, "?"); break;
    }
}

// ---- text ----

void prim_counts_print(FILE *f, const int counts[PRIM_KIND_COUNT]) {
    int total = 0;
    for (int k = 0; k < PRIM_KIND_COUNT; k++)
        total += counts[k];
    fprintf(f, "%d (", total);
    for (int k = 0; k < PRIM_KIND_COUNT; k++)
        fprintf(f, "%s%s %d", k ? ", " : "", prim_kind_name((PrimKind)k), counts[k]);
    fprintf(f, ")");
}

static void print_tensor_list(FILE *f, const char *title, const Tensor *const *ts, const int *ids,
                              int n) {
    fprintf(f, "%s", title);
    for (int i = 0; i < n; i++) {
        Str s = {0};
        sp_tensor(&s, ts[ids[i]]);
        fprintf(f, "%s%s", i ? ", " : "", str_c(&s));
        free(s.s);
    }
    fprintf(f, "%s\n", n ? "" : "(none)");
}

void prim_graph_print(FILE *f, const PrimGraph *pg) {
    // Tensors still referenced (passes leave replaced ones in the table, unreferenced).
    int counts[PRIM_KIND_COUNT], live = 0, consts = 0;
    prim_graph_counts(pg, counts);
    bool *used = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < pg->n_prims; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] >= 0)
                used[p->in[j]] = true;
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                used[p->out[j]] = true;
    }
    for (int i = 0; i < pg->n_inputs; i++)
        used[pg->inputs[i]] = true;
    for (int i = 0; i < pg->n_outputs; i++)
        used[pg->outputs[i]] = true;
    for (int i = 0; i < pg->n_tensors; i++) {
        live += used[i];
        consts += used[i] && pg->tensors[i]->kind == TK_CONST;
    }
    free(used);
    fprintf(f, "primitive graph%s%s: ", pg->src ? " of " : "", pg->src ? pg->src->path : "");
    prim_counts_print(f, counts);
    fprintf(f, ", %d tensors (%d constant)\n", live, consts);
    const Tensor *const *ts = (const Tensor *const *)pg->tensors;
    print_tensor_list(f, "inputs:  ", ts, pg->inputs, pg->n_inputs);
    print_tensor_list(f, "outputs: ", ts, pg->outputs, pg->n_outputs);
    for (int k = 0; k < pg->n_prims; k++) {
        const Prim *p = pg->prims[k];
        Str s = {0};
        sp(&s, "#%d %s ", p->id, prim_kind_name(p->kind));
        sp(&s, "{");
        sp_params(&s, pg, p, false, 8);
        sp(&s, "}  (");
        for (int j = 0; j < p->n_in; j++) {
            sp(&s, "%s", j ? ", " : "");
            if (p->in[j] < 0)
                sp(&s, "absent");
            else
                sp_tensor(&s, pg->tensors[p->in[j]]);
        }
        sp(&s, ") -> ");
        for (int j = 0; j < p->n_out; j++) {
            sp(&s, "%s", j ? ", " : "");
            if (p->out[j] < 0)
                sp(&s, "absent");
            else
                sp_tensor(&s, pg->tensors[p->out[j]]);
        }
        fprintf(f, "%s  [from %s]\n", str_c(&s), p->origin);
        free(s.s);
    }
}

typedef struct OpCount {
    const char *op;
    int count;
} OpCount;

static int cmp_count(const void *a, const void *b) {
    const OpCount *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->op, y->op);
}

void op_histogram_print(FILE *f, const Graph *g) {
    OpCount *c = xcalloc((size_t)g->n_nodes + 1, sizeof(OpCount));
    int n = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        int j = 0;
        while (j < n && strcmp(c[j].op, g->nodes[k]->op) != 0)
            j++;
        if (j == n)
            c[n++].op = g->nodes[k]->op;
        c[j].count++;
    }
    qsort(c, (size_t)n, sizeof *c, cmp_count);
    fprintf(f, "  ");
    for (int j = 0; j < n; j++)
        fprintf(f, "%s %d%s", c[j].op, c[j].count, j + 1 < n ? ", " : "\n");
    if (!n)
        fprintf(f, "(none)\n");
    free(c);
}

void op_graph_print(FILE *f, const Graph *g) {
    fprintf(f, "operator graph of %s: %d node%s\n", g->path, g->n_nodes,
            g->n_nodes == 1 ? "" : "s");
    op_histogram_print(f, g);
    const Tensor *const *ts = (const Tensor *const *)g->tensors;
    print_tensor_list(f, "inputs:  ", ts, g->inputs, g->n_inputs);
    print_tensor_list(f, "outputs: ", ts, g->outputs, g->n_outputs);
    for (int k = 0; k < g->n_nodes; k++) {
        const Node *n = g->nodes[k];
        Str s = {0};
        sp(&s, "#%d %s%s%s '%s'", k, n->op, *n->domain ? " in " : "", n->domain, n->name);
        if (n->n_attr) {
            sp(&s, " {");
            sp_attrs(&s, n, 8);
            sp(&s, "}");
        }
        sp(&s, "  (");
        for (int j = 0; j < n->n_in; j++) {
            const Tensor *t = node_input(g, n, j);
            sp(&s, "%s", j ? ", " : "");
            if (t)
                sp_tensor(&s, t);
            else
                sp(&s, "absent");
        }
        sp(&s, ") -> ");
        for (int j = 0; j < n->n_out; j++) {
            const Tensor *t = node_output(g, n, j);
            sp(&s, "%s", j ? ", " : "");
            if (t)
                sp_tensor(&s, t);
            else
                sp(&s, "absent");
        }
        fprintf(f, "%s\n", str_c(&s));
        free(s.s);
    }
}

// ---- dot ----

// Fill colours per primitive kind (ColorBrewer Paired, light tones: black text stays readable).
static const char *const kind_colors[PRIM_KIND_COUNT] = {"#a6cee3", "#b2df8a", "#fdbf6f", "#fb9a99",
                                                         "#cab2d6"};

// A dot string literal: quotes and backslashes escaped, newlines as centred line breaks.
static void dot_q(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else if ((unsigned char)*s < 0x20)
            fputc(' ', f);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void dot_header(FILE *f, const char *name) {
    fprintf(f, "digraph %s {\n", name);
    fprintf(f,
            "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
            "fontsize=10, fillcolor=white];\n  edge [fontname=\"Helvetica\", fontsize=9];\n");
}

// The edge label of a tensor: its shape, and its dtype when that is not float32.
static void dot_edge(FILE *f, const char *from, int from_id, const char *to, int to_id,
                     const Tensor *t) {
    Str s = {0};
    sp_dims(&s, t->rank, t->dims);
    if (t->dtype != DT_FLOAT)
        sp(&s, " %s", dtype_name(t->dtype));
    fprintf(f, "  %s%d -> %s%d [label=", from, from_id, to, to_id);
    dot_q(f, str_c(&s));
    fprintf(f, "];\n");
    free(s.s);
}

// Graph inputs (ellipses), constants (grey notes): one node per tensor a consumer reads.
static void dot_source(FILE *f, const Tensor *t) {
    Str s = {0};
    sp(&s, "%s", t->name);
    str_cut_front(&s, 40);
    sp(&s, "\n%s%s ", t->kind == TK_CONST ? "const " : "", dtype_name(t->dtype));
    sp_dims(&s, t->rank, t->dims);
    fprintf(f, "  t%d [label=", t->id);
    dot_q(f, str_c(&s));
    fprintf(f, t->kind == TK_CONST ? ", shape=note, style=filled, fillcolor=\"#eeeeee\"];\n"
                                   : ", shape=ellipse, style=\"filled,bold\"];\n");
    free(s.s);
}

static void dot_output(FILE *f, int i, const Tensor *t) {
    Str s = {0};
    sp(&s, "%s", t->name);
    str_cut_front(&s, 40);
    sp(&s, "\n(output) %s ", dtype_name(t->dtype));
    sp_dims(&s, t->rank, t->dims);
    fprintf(f, "  out%d [label=", i);
    dot_q(f, str_c(&s));
    fprintf(f, ", shape=ellipse, style=\"filled,bold\"];\n");
    free(s.s);
}

static void dot_legend(FILE *f) {
    fprintf(f, "  subgraph cluster_legend {\n    label=\"primitive kinds\"; fontname=\"Helvetica\";"
               " fontsize=10; style=dashed;\n");
    for (int k = 0; k < PRIM_KIND_COUNT; k++)
        fprintf(f, "    legend_%s [label=\"%s\", fillcolor=\"%s\"];\n", prim_kind_name((PrimKind)k),
                prim_kind_name((PrimKind)k), kind_colors[k]);
    for (int k = 0; k + 1 < PRIM_KIND_COUNT; k++)
        fprintf(f, "    legend_%s -> legend_%s [style=invis];\n", prim_kind_name((PrimKind)k),
                prim_kind_name((PrimKind)(k + 1)));
    fprintf(f, "  }\n");
}

// One box for primitive k, named `id`, filled with its kind's colour; `style` adds attributes.
static void dot_prim_node(FILE *f, const PrimGraph *pg, int k, const char *id, const char *style) {
    const Prim *p = pg->prims[k];
    Str s = {0}, par = {0}, from = {0};
    sp_params(&par, pg, p, true, 4);
    str_cut(&par, 240);
    sp(&from, "%s", p->origin);
    str_cut_front(&from, 44);
    sp(&s, "#%d %s\n%s\nfrom %s", p->id, prim_kind_name(p->kind), str_c(&par), str_c(&from));
    fprintf(f, "  %s [label=", id);
    dot_q(f, str_c(&s));
    fprintf(f, ", fillcolor=\"%s\"%s];\n", kind_colors[p->kind], style);
    free(s.s);
    free(par.s);
    free(from.s);
}

// Graph inputs and constants a primitive reads, each drawn once.
static void dot_prim_sources(FILE *f, const PrimGraph *pg, const Prim *p, bool *shown) {
    for (int j = 0; j < p->n_in; j++) {
        int t = p->in[j];
        if (t >= 0 && pg->tensors[t]->kind != TK_VALUE && !shown[t]) {
            dot_source(f, pg->tensors[t]);
            shown[t] = true;
        }
    }
}

void prim_graph_dot(FILE *f, const PrimGraph *pg) {
    dot_header(f, "prims");
    dot_legend(f);
    bool *shown = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < pg->n_prims; k++) {
        const Prim *p = pg->prims[k];
        dot_prim_sources(f, pg, p, shown);
        char id[32];
        snprintf(id, sizeof id, "p%d", k);
        dot_prim_node(f, pg, k, id, "");
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t < 0)
                continue;
            const Tensor *tt = pg->tensors[t];
            if (tt->kind == TK_VALUE)
                dot_edge(f, "p", tt->producer, "p", k, tt);
            else
                dot_edge(f, "t", t, "p", k, tt);
        }
    }
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        dot_output(f, i, t);
        if (t->kind == TK_VALUE) {
            dot_edge(f, "p", t->producer, "out", i, t);
        } else {
            if (!shown[t->id])
                dot_source(f, t);
            shown[t->id] = true;
            dot_edge(f, "t", t->id, "out", i, t);
        }
    }
    for (int i = 0; i < pg->n_inputs; i++)
        if (!shown[pg->inputs[i]])
            dot_source(f, pg->tensors[pg->inputs[i]]);
    free(shown);
    fprintf(f, "}\n");
}

void op_graph_dot(FILE *f, const Graph *g) {
    dot_header(f, "ops");
    bool *shown = xcalloc((size_t)g->n_tensors + 1, 1);
    for (int k = 0; k < g->n_nodes; k++) {
        const Node *n = g->nodes[k];
        for (int j = 0; j < n->n_in; j++) {
            const Tensor *t = node_input(g, n, j);
            if (t && t->kind != TK_VALUE && !shown[t->id]) {
                dot_source(f, t);
                shown[t->id] = true;
            }
        }
        Str s = {0}, name = {0}, attrs = {0};
        sp(&name, "%s", n->name);
        str_cut_front(&name, 48);
        sp_attrs(&attrs, n, 4);
        str_cut(&attrs, 80);
        sp(&s, "%s\n%s%s%s", n->op, str_c(&name), n->n_attr ? "\n" : "", str_c(&attrs));
        fprintf(f, "  n%d [label=", k);
        dot_q(f, str_c(&s));
        fprintf(f, ", fillcolor=\"#dde6f0\"];\n");
        free(s.s);
        free(name.s);
        free(attrs.s);
        for (int j = 0; j < n->n_in; j++) {
            const Tensor *t = node_input(g, n, j);
            if (!t)
                continue;
            if (t->kind == TK_VALUE)
                dot_edge(f, "n", t->producer, "n", k, t);
            else
                dot_edge(f, "t", t->id, "n", k, t);
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const Tensor *t = g->tensors[g->outputs[i]];
        dot_output(f, i, t);
        if (t->kind == TK_VALUE) {
            dot_edge(f, "n", t->producer, "out", i, t);
        } else {
            if (!shown[t->id])
                dot_source(f, t);
            shown[t->id] = true;
            dot_edge(f, "t", t->id, "out", i, t);
        }
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!shown[g->inputs[i]])
            dot_source(f, g->tensors[g->inputs[i]]);
    free(shown);
    fprintf(f, "}\n");
}

// ---- candidates and plans ----

// A cluster of the primitive graph: a segment, or a kernel of a plan.
typedef struct DotGroup {
    const int *prims; // ascending indices into pg->prims
    int n;
    int output; // the tensor it materialises; -1: every primitive's outputs (segments)
    char label[200];
} DotGroup;

// Cluster backgrounds (ColorBrewer Pastel1, lightened so the kind colours of the boxes stand
// out) with borders of the same hue (Set1), cycled.
static const char *const group_bg[] = {"#fde6e4", "#e1ebf4", "#ebf7e8", "#f2eaf4",
                                       "#fff0dc", "#ffffe5", "#f4efe4", "#fef0f7"};
static const char *const group_pen[] = {"#e41a1c", "#377eb8", "#4daf4a", "#984ea3",
                                        "#ff7f00", "#a6a600", "#a65628", "#f781bf"};

typedef struct GroupIndex {
    int *start, *list; // CSR: the groups of primitive k are list[start[k] .. start[k+1])
    int *home;         // per tensor: the group that materialises it, -1 none
} GroupIndex;

static void group_index_build(const PrimGraph *pg, const DotGroup *grp, int n, GroupIndex *gi) {
    int np = pg->n_prims;
    gi->start = xcalloc((size_t)np + 2, sizeof(int));
    for (int g = 0; g < n; g++)
        for (int i = 0; i < grp[g].n; i++)
            gi->start[grp[g].prims[i] + 1]++;
    for (int k = 0; k < np; k++)
        gi->start[k + 1] += gi->start[k];
    gi->list = xmalloc(sizeof(int) * ((size_t)gi->start[np] + 1));
    int *fill = xcalloc((size_t)np + 1, sizeof(int));
    for (int g = 0; g < n; g++)
        for (int i = 0; i < grp[g].n; i++) {
            int k = grp[g].prims[i];
            gi->list[gi->start[k] + fill[k]++] = g;
        }
    free(fill);
    gi->home = xmalloc(sizeof(int) * ((size_t)pg->n_tensors + 1));
    for (int t = 0; t < pg->n_tensors; t++)
        gi->home[t] = -1;
    for (int g = 0; g < n; g++) {
        if (grp[g].output >= 0) {
            if (gi->home[grp[g].output] < 0)
                gi->home[grp[g].output] = g;
            continue;
        }
        for (int i = 0; i < grp[g].n; i++) {
            const Prim *p = pg->prims[grp[g].prims[i]];
            for (int j = 0; j < p->n_out; j++)
                if (p->out[j] >= 0 && gi->home[p->out[j]] < 0)
                    gi->home[p->out[j]] = g;
        }
    }
}

static void group_index_free(GroupIndex *gi) {
    free(gi->start);
    free(gi->list);
    free(gi->home);
}

// The dot node of primitive k's copy in group g (-1: drawn outside every group).
static void group_node_id(char *buf, size_t n, int k, int g) {
    if (g >= 0)
        snprintf(buf, n, "p%dg%d", k, g);
    else
        snprintf(buf, n, "p%d", k);
}

// Where tensor t comes from, seen from group g: a graph input or constant; the producer's copy in
// g itself; the copy in the group that materialises t; else any copy (a plan that reads a tensor
// nobody materialises is infeasible; the drawing still shows where it was computed).
static void group_source(char *buf, size_t n, const PrimGraph *pg, const GroupIndex *gi, int t,
                         int g) {
    const Tensor *tt = pg->tensors[t];
    if (tt->kind != TK_VALUE) {
        snprintf(buf, n, "t%d", t);
        return;
    }
    int p = tt->producer;
    for (int i = gi->start[p]; i < gi->start[p + 1]; i++)
        if (gi->list[i] == g) {
            group_node_id(buf, n, p, g);
            return;
        }
    int h = gi->home[t];
    if (h < 0 && gi->start[p] < gi->start[p + 1])
        h = gi->list[gi->start[p]];
    group_node_id(buf, n, p, h);
}

static void dot_edge_named(FILE *f, const char *from, const char *to, const Tensor *t) {
    Str s = {0};
    sp_dims(&s, t->rank, t->dims);
    if (t->dtype != DT_FLOAT)
        sp(&s, " %s", dtype_name(t->dtype));
    fprintf(f, "  %s -> %s [label=", from, to);
    dot_q(f, str_c(&s));
    fprintf(f, "];\n");
    free(s.s);
}

static void dot_group_in_edges(FILE *f, const PrimGraph *pg, const GroupIndex *gi, int k, int g) {
    const Prim *p = pg->prims[k];
    char from[48], to[48];
    group_node_id(to, sizeof to, k, g);
    for (int j = 0; j < p->n_in; j++) {
        if (p->in[j] < 0)
            continue;
        group_source(from, sizeof from, pg, gi, p->in[j], g);
        dot_edge_named(f, from, to, pg->tensors[p->in[j]]);
    }
}

// The primitive graph with groups as clusters; primitives in no group are drawn dashed.
static void dot_groups(FILE *f, const PrimGraph *pg, const DotGroup *grp, int n) {
    GroupIndex gi;
    group_index_build(pg, grp, n, &gi);
    dot_header(f, "plan");
    fprintf(f, "  compound=true;\n");
    dot_legend(f);
    bool *shown = xcalloc((size_t)pg->n_tensors + 1, 1);
    for (int k = 0; k < pg->n_prims; k++)
        dot_prim_sources(f, pg, pg->prims[k], shown);
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        if (t->kind != TK_VALUE && !shown[t->id]) {
            dot_source(f, t);
            shown[t->id] = true;
        }
    }
    for (int i = 0; i < pg->n_inputs; i++)
        if (!shown[pg->inputs[i]])
            dot_source(f, pg->tensors[pg->inputs[i]]);
    char id[48];
    for (int g = 0; g < n; g++) {
        int c = g % (int)ORCH_COUNT(group_bg);
        fprintf(f, "  subgraph cluster_%d {\n    label=", g);
        dot_q(f, grp[g].label);
        fprintf(f,
                "; fontname=\"Helvetica\"; fontsize=11; style=\"filled,rounded\"; "
                "fillcolor=\"%s\"; color=\"%s\"; penwidth=2;\n",
                group_bg[c], group_pen[c]);
        for (int i = 0; i < grp[g].n; i++) {
            group_node_id(id, sizeof id, grp[g].prims[i], g);
            fprintf(f, "  ");
            dot_prim_node(f, pg, grp[g].prims[i], id, "");
        }
        fprintf(f, "  }\n");
    }
    for (int k = 0; k < pg->n_prims; k++)
        if (gi.start[k] == gi.start[k + 1]) {
            group_node_id(id, sizeof id, k, -1);
            dot_prim_node(f, pg, k, id, ", style=\"rounded,filled,dashed\"");
        }
    for (int g = 0; g < n; g++)
        for (int i = 0; i < grp[g].n; i++)
            dot_group_in_edges(f, pg, &gi, grp[g].prims[i], g);
    for (int k = 0; k < pg->n_prims; k++)
        if (gi.start[k] == gi.start[k + 1])
            dot_group_in_edges(f, pg, &gi, k, -1);
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        dot_output(f, i, t);
        char from[48], to[48];
        group_source(from, sizeof from, pg, &gi, t->id, -1);
        snprintf(to, sizeof to, "out%d", i);
        dot_edge_named(f, from, to, t);
    }
    free(shown);
    group_index_free(&gi);
    fprintf(f, "}\n");
}

// "1.23 ms", "45.6 us", "789 ns".
static void sp_time(Str *s, double sec) {
    if (sec >= 1)
        sp(s, "%.3f s", sec);
    else if (sec >= 1e-3)
        sp(s, "%.3f ms", sec * 1e3);
    else if (sec >= 1e-6)
        sp(s, "%.2f us", sec * 1e6);
    else
        sp(s, "%.0f ns", sec * 1e9);
}

// "1.23 MB"-style amounts (decimal prefixes).
static void sp_amount(Str *s, double v, const char *unit) {
    const char *pre[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    while (v >= 1000 && i < 5) {
        v /= 1000;
        i++;
    }
    sp(s, i ? "%.2f %s%s" : "%.0f %s%s", v, pre[i], unit);
}

void cand_set_print(FILE *f, const CandidateSet *cs) {
    const CandStats *st = &cs->stats;
    const PrimGraph *pg = cs->pg;
    Str s = {0};
    sp_time(&s, st->seconds);
    fprintf(f,
            "candidates%s%s: %d primitives, %d candidates, %d distinct signatures, %d segment%s "
            "(largest %d primitives), enumerated in %s\n",
            pg->src && pg->src->path ? " of " : "", pg->src && pg->src->path ? pg->src->path : "",
            st->prims, st->candidates, st->signatures, st->segments, st->segments == 1 ? "" : "s",
            st->max_segment_prims, str_c(&s));
    free(s.s);
    int max_size = 0, linear = 0, opaque = 0, reduce = 0;
    for (int i = 0; i < cs->n; i++)
        max_size = ORCH_MAX(max_size, cs->c[i].n_prims);
    int *by_size = xcalloc((size_t)max_size + 1, sizeof(int));
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        by_size[c->n_prims]++;
        bool lin = false, opq = false, red = false;
        for (int j = 0; j < c->n_prims; j++) {
            PrimKind k = pg->prims[c->prims[j]]->kind;
            lin |= k == PRIM_LINEAR;
            opq |= k == PRIM_OPAQUE;
            red |= k == PRIM_REDUCE;
        }
        linear += lin;
        opaque += opq;
        reduce += red;
    }
    fprintf(f, "  by size:");
    for (int n = 1; n <= max_size; n++)
        if (by_size[n])
            fprintf(f, " %d prim%s %d%s", n, n == 1 ? "" : "s", by_size[n],
                    n < max_size ? "," : "");
    fprintf(f, "\n  with a linear primitive %d, with a reduction %d, opaque %d\n", linear, reduce,
            opaque);
    if (st->mlp_chains || st->attention)
        fprintf(f, "  multi-layer: %d MLP chain%s, %d fused attention%s\n", st->mlp_chains,
                st->mlp_chains == 1 ? "" : "s", st->attention, st->attention == 1 ? "" : "s");
    // Grouped-query attentions: the kernel reads each K/V head once for its group of query heads.
    for (int i = 0; st->attention && i < cs->n; i++) {
        AttnSpec a;
        if (cs->c[i].n_prims >= 6 && attn_analyse(pg, &cs->c[i], &a) && a.kv_group > 1)
            fprintf(f,
                    "  fused attention #%d (%d primitives): K and V shared by %lld consecutive "
                    "heads of lead axis %d (grouped-query)\n",
                    cs->c[i].id, cs->c[i].n_prims, (long long)a.kv_group, a.kv_axis);
    }
    if (st->truncated_sinks)
        fprintf(f,
                "  %d sink%s hit the per-sink search budget (wide fan-in): their largest sets are "
                "missing\n",
                st->truncated_sinks, st->truncated_sinks == 1 ? "" : "s");
    free(by_size);
    int ns = cs->n_segments;
    int *prims = xcalloc((size_t)ns + 1, sizeof(int)),
        *cands = xcalloc((size_t)ns + 1, sizeof(int));
    int *first = xmalloc(sizeof(int) * ((size_t)ns + 1)),
        *last = xmalloc(sizeof(int) * ((size_t)ns + 1));
    for (int g = 0; g < ns; g++)
        first[g] = last[g] = -1;
    for (int k = 0; k < pg->n_prims; k++) {
        int g = cs->segment_of_prim[k];
        if (g < 0 || g >= ns)
            continue;
        prims[g]++;
        if (first[g] < 0)
            first[g] = pg->prims[k]->id;
        last[g] = pg->prims[k]->id;
    }
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].segment >= 0 && cs->c[i].segment < ns)
            cands[cs->c[i].segment]++;
    for (int g = 0; g < ns; g++)
        fprintf(f, "  segment %d: %d primitive%s (#%d..#%d), %d candidates\n", g, prims[g],
                prims[g] == 1 ? "" : "s", first[g], last[g], cands[g]);
    free(prims);
    free(cands);
    free(first);
    free(last);
}

void cand_segments_dot(FILE *f, const CandidateSet *cs) {
    const PrimGraph *pg = cs->pg;
    int ns = cs->n_segments;
    DotGroup *grp = xcalloc((size_t)ns + 1, sizeof(DotGroup));
    int *all = xmalloc(sizeof(int) * ((size_t)pg->n_prims + 1)), n = 0;
    for (int g = 0; g < ns; g++) {
        grp[g].prims = all + n;
        grp[g].output = -1;
        for (int k = 0; k < pg->n_prims; k++)
            if (cs->segment_of_prim[k] == g)
                all[n++] = k;
        grp[g].n = (int)(all + n - grp[g].prims);
        int cands = 0;
        for (int i = 0; i < cs->n; i++)
            cands += cs->c[i].segment == g;
        snprintf(grp[g].label, sizeof grp[g].label, "segment %d: %d primitives, %d candidates", g,
                 grp[g].n, cands);
    }
    dot_groups(f, pg, grp, ns);
    free(all);
    free(grp);
}

// The ONNX node names of a kernel's primitives (their provenance), each once, in order.
static void sp_kernel_nodes(Str *s, const PrimGraph *pg, const Candidate *c) {
    Str seen = {0}; // "\n"-separated names already printed
    sp(&seen, "\n");
    int n = 0;
    for (int i = 0; i < c->n_prims; i++) {
        const char *o = pg->prims[c->prims[i]]->origin;
        while (o && *o) {
            const char *end = strchr(o, ',');
            size_t len = end ? (size_t)(end - o) : strlen(o);
            Str key = {0};
            sp(&key, "\n%.*s\n", (int)len, o);
            if (len && !strstr(str_c(&seen), str_c(&key))) {
                sp(s, "%s%.*s", n++ ? ", " : "", (int)len, o);
                sp(&seen, "%.*s\n", (int)len, o);
            }
            free(key.s);
            o = end ? end + 1 : NULL;
        }
    }
    free(seen.s);
}

// Per primitive: the largest cost of a candidate holding it alone (an opaque primitive with
// several outputs has one singleton per output); -1 where there is none.
static double *singleton_costs(const CandidateSet *cs) {
    double *c1 = xmalloc(sizeof(double) * ((size_t)cs->pg->n_prims + 1));
    for (int k = 0; k < cs->pg->n_prims; k++)
        c1[k] = -1;
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].n_prims == 1)
            c1[cs->c[i].prims[0]] = ORCH_MAX(c1[cs->c[i].prims[0]], cs->c[i].cost);
    return c1;
}

void plan_print(FILE *f, const CandidateSet *cs, const Selection *sel, const Device *d) {
    const PrimGraph *pg = cs->pg;
    Str s = {0};
    if (d)
        fprintf(f, "plan on %s: %s, %.3g us per launch\n", d->name, d->desc, d->launch * 1e6);
    sp(&s, "BLP: %d variables, %d constraints; objective ", sel->variables, sel->constraints);
    sp_time(&s, sel->objective);
    sp(&s, ", bound ");
    sp_time(&s, sel->bound);
    sp(&s, ", gap %.2f%%, %s; solved by CBC in ", 100 * sel->gap,
       sel->optimal ? "optimal" : "time limit hit (best found)");
    sp_time(&s, sel->seconds);
    fprintf(f, "%s\n", str_c(&s));
    s.len = 0;
    // Work done: primitive evaluations (recomputation counts each time) versus distinct ones.
    int evals = 0, distinct = 0;
    bool *covered = xcalloc((size_t)pg->n_prims + 1, 1);
    for (int k = 0; k < sel->n; k++) {
        const Candidate *c = &cs->c[sel->kernels[k]];
        evals += c->n_prims;
        for (int i = 0; i < c->n_prims; i++) {
            distinct += !covered[c->prims[i]];
            covered[c->prims[i]] = true;
        }
    }
    free(covered);
    fprintf(f,
            "selection: %d kernel%s computing %d of %d primitives (%d evaluations, %d recomputed), "
            "%d tensors materialised\n",
            sel->n, sel->n == 1 ? "" : "s", distinct, pg->n_prims, evals, evals - distinct,
            sel->n_materialised);
    double *c1 = singleton_costs(cs), unfused = 0;
    int missing = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        if (c1[k] < 0)
            missing++;
        else
            unfused += c1[k];
    }
    free(c1);
    sp(&s, "one kernel per primitive: ");
    sp_time(&s, unfused);
    if (sel->objective > 0)
        sp(&s, ", %.2fx the plan's", unfused / sel->objective);
    if (missing)
        sp(&s, " (%d primitives have no singleton candidate)", missing);
    fprintf(f, "%s\n", str_c(&s));
    for (int k = 0; k < sel->n; k++) {
        const Candidate *c = &cs->c[sel->kernels[k]];
        s.len = 0;
        sp(&s, "kernel %d (candidate %d): %d primitive%s, ", k, c->id, c->n_prims,
           c->n_prims == 1 ? "" : "s");
        sp_time(&s, c->cost);
        if (d) {
            CostEstimate est = cost_model_estimate(pg, c, d);
            sp(&s, " (");
            sp_amount(&s, est.bytes, "B");
            sp(&s, ", ");
            sp_amount(&s, est.flops, "FLOP");
            sp(&s, ")");
        }
        sp(&s, " -> ");
        sp_tensor(&s, pg->tensors[c->output]);
        sp(&s, "\n    nodes: ");
        sp_kernel_nodes(&s, pg, c);
        fprintf(f, "%s\n", str_c(&s));
        for (int i = 0; i < c->n_prims; i++) {
            const Prim *p = pg->prims[c->prims[i]];
            s.len = 0;
            sp(&s, "    #%d %s {", p->id, prim_kind_name(p->kind));
            sp_params(&s, pg, p, false, 8);
            sp(&s, "}");
            fprintf(f, "%s\n", str_c(&s));
        }
    }
    free(s.s);
}

void prim_groups_dot(FILE *f, const PrimGraph *pg, const PrimGroup *groups, int n) {
    DotGroup *grp = xcalloc((size_t)n + 1, sizeof(DotGroup));
    for (int k = 0; k < n; k++) {
        grp[k].prims = groups[k].prims;
        grp[k].n = groups[k].n;
        grp[k].output = groups[k].output;
        snprintf(grp[k].label, sizeof grp[k].label, "%s", groups[k].label);
    }
    dot_groups(f, pg, grp, n);
    free(grp);
}

void plan_dot(FILE *f, const CandidateSet *cs, const Selection *sel) {
    const PrimGraph *pg = cs->pg;
    DotGroup *grp = xcalloc((size_t)sel->n + 1, sizeof(DotGroup));
    for (int k = 0; k < sel->n; k++) {
        const Candidate *c = &cs->c[sel->kernels[k]];
        grp[k].prims = c->prims;
        grp[k].n = c->n_prims;
        grp[k].output = c->output;
        Str s = {0};
        sp(&s, "kernel %d: ", k);
        sp_time(&s, c->cost);
        snprintf(grp[k].label, sizeof grp[k].label, "%s", str_c(&s));
        free(s.s);
    }
    dot_groups(f, pg, grp, sel->n);
    free(grp);
}
