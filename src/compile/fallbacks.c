// The kernels a plan does not generate, grouped by op, and each target's coverage of a model
// (fallbacks.h).
#include "fallbacks.h"

#include "../fission/fission.h"

#include <stdlib.h>
#include <string.h>

// Node lists longer than this are cut ("and N more"): the summary stays one line per group.
#define NODES_SHOWN 6

const char *fallback_where(PlanKind k) {
    return k == PLAN_OPAQUE ? "op interpreter" : "primitive interpreter";
}

// ---- source nodes by name ----

typedef struct NamedNode {
    const char *name;
    int pos; // in g->nodes (a node's id is not its position once folding removed nodes)
} NamedNode;

typedef struct NodeIndex {
    const Graph *g;
    NamedNode *v; // the live nodes, sorted by name
    int n;
} NodeIndex;

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const NamedNode *)a)->name, ((const NamedNode *)b)->name);
}

static void index_nodes(const Graph *g, NodeIndex *ix) {
    ix->g = g;
    ix->n = 0;
    ix->v = xmalloc(sizeof(NamedNode) * (size_t)(g->n_nodes + 1));
    for (int k = 0; k < g->n_nodes; k++)
        if (!g->nodes[k]->dead)
            ix->v[ix->n++] = (NamedNode){g->nodes[k]->name, k};
    qsort(ix->v, (size_t)ix->n, sizeof(NamedNode), cmp_named);
}

// The position in g->nodes of the live node named by the len bytes at name, or -1.
static int find_node(const NodeIndex *ix, const char *name, size_t len) {
    int lo = 0, hi = ix->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const char *s = ix->v[mid].name;
        int c = strncmp(s, name, len);
        if (c == 0 && s[len])
            c = 1; // s extends name: it sorts after it
        if (c == 0)
            return ix->v[mid].pos;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

// The next node name of a primitive's origin (comma-separated names) at *o, its length in *len,
// and *o moved past it; NULL at the end.
static const char *next_origin(const char **o, size_t *len) {
    while (*o && **o == ',')
        (*o)++;
    if (!*o || !**o)
        return NULL;
    const char *s = *o, *e = strchr(s, ',');
    *len = e ? (size_t)(e - s) : strlen(s);
    *o = s + *len;
    return s;
}

// ---- collecting and grouping ----

static void group_free(FallbackGroup *g) {
    free(g->ops);
    free(g->why);
    for (int i = 0; i < g->n_nodes; i++)
        free(g->nodes[i]);
    free(g->nodes);
}

static void add_node(FallbackGroup *g, const char *name, size_t len) {
    for (int i = 0; i < g->n_nodes; i++)
        if (strlen(g->nodes[i]) == len && memcmp(g->nodes[i], name, len) == 0)
            return;
    g->nodes = xrealloc(g->nodes, sizeof(char *) * (size_t)(g->n_nodes + 1));
    char *s = xmalloc(len + 1);
    memcpy(s, name, len);
    s[len] = 0;
    g->nodes[g->n_nodes++] = s;
}

// The group of one kernel: its ops, nodes and why.
static void describe(const PrimGraph *pg, const NodeIndex *ix, const char *target,
                     const FallbackKernel *k, FallbackGroup *out) {
    memset(out, 0, sizeof *out);
    const Prim *p = pg->prims[k->prim];
    out->kind = k->kind;
    out->kernels = 1;
    out->seconds = k->seconds;
    StrBuf ops;
    sb_init(&ops);
    if (p->kind == PRIM_OPAQUE && p->node) {
        sb_puts(&ops, p->node->op);
        add_node(out, p->node->name, strlen(p->node->name));
    } else {
        const char *o = p->origin, *name;
        size_t len;
        while ((name = next_origin(&o, &len))) {
            int at = find_node(ix, name, len);
            // Not a node's name (a graph output's copy is named after its tensor): the kind.
            const char *op = at >= 0 ? ix->g->nodes[at]->op : prim_kind_name(p->kind);
            // Each op once ("Mul+Add"), in the order the origin names them.
            bool seen = false;
            for (const char *q = ops.s; *q && !seen;) {
                const char *e = strchr(q, '+');
                size_t l = e ? (size_t)(e - q) : strlen(q);
                seen = l == strlen(op) && memcmp(q, op, l) == 0;
                q = e ? e + 1 : q + l;
            }
            if (!seen)
                sb_printf(&ops, "%s%s", ops.len ? "+" : "", op);
            add_node(out, name, len);
        }
    }
    if (!ops.len)
        sb_puts(&ops, "?");
    StrBuf why;
    sb_init(&why);
    if (p->kind == PRIM_OPAQUE && p->node)
        sb_printf(&why, "no generated kernel for %s on %s (%s)", ops.s, target,
                  fission_opaque_reason(pg->src, p->node));
    else
        sb_printf(&why, "no generated kernel for %s (its %s primitive) on %s", ops.s,
                  prim_kind_name(p->kind), target);
    out->ops = sb_take(&ops);
    out->why = sb_take(&why);
}

static int cmp_group(const void *a, const void *b) {
    const FallbackGroup *x = a, *y = b;
    if (x->seconds != y->seconds)
        return x->seconds < y->seconds ? 1 : -1;
    return strcmp(x->ops, y->ops);
}

void fallbacks_collect(const PrimGraph *pg, const char *target, const FallbackKernel *k, int n,
                       double total, Fallbacks *out) {
    memset(out, 0, sizeof *out);
    out->total = total;
    out->kernels = n;
    if (n == 0)
        return;
    NodeIndex ix;
    index_nodes(pg->src, &ix);
    out->each = xcalloc((size_t)n, sizeof(FallbackGroup));
    out->groups = xcalloc((size_t)n, sizeof(FallbackGroup));
    for (int i = 0; i < n; i++) {
        FallbackGroup *e = &out->each[out->n_each++];
        describe(pg, &ix, target, &k[i], e);
        out->seconds += k[i].seconds;
        FallbackGroup *g = NULL;
        for (int j = 0; j < out->n_groups && !g; j++)
            if (out->groups[j].kind == e->kind && strcmp(out->groups[j].ops, e->ops) == 0 &&
                strcmp(out->groups[j].why, e->why) == 0)
                g = &out->groups[j];
        if (!g) {
            g = &out->groups[out->n_groups++];
            g->ops = xstrdup(e->ops);
            g->why = xstrdup(e->why);
            g->kind = e->kind;
        }
        g->kernels++;
        g->seconds += e->seconds;
        for (int j = 0; j < e->n_nodes; j++)
            add_node(g, e->nodes[j], strlen(e->nodes[j]));
    }
    qsort(out->groups, (size_t)out->n_groups, sizeof(FallbackGroup), cmp_group);
    free(ix.v);
}

void fallbacks_of_plan(const PrimGraph *pg, const Plan *plan, const char *target, Fallbacks *out) {
    FallbackKernel *k = xcalloc((size_t)plan->n_launches + 1, sizeof *k);
    int n = 0;
    double total = 0;
    for (int i = 0; i < plan->n_launches; i++) {
        const PlanLaunch *L = &plan->launches[i];
        total += L->predicted;
        if (L->kind == PLAN_INTERP || L->kind == PLAN_OPAQUE)
            k[n++] = (FallbackKernel){L->kind, L->sink, L->predicted};
    }
    fallbacks_collect(pg, target, k, n, total, out);
    free(k);
}

void fallbacks_free(Fallbacks *f) {
    for (int i = 0; i < f->n_groups; i++)
        group_free(&f->groups[i]);
    for (int i = 0; i < f->n_each; i++)
        group_free(&f->each[i]);
    free(f->groups);
    free(f->each);
    memset(f, 0, sizeof *f);
}

// ---- reports ----

static void fmt_seconds(double s, char *buf, size_t n) {
    if (s >= 1)
        snprintf(buf, n, "%.2f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else
        snprintf(buf, n, "%.1f us", s * 1e6);
}

static void format_group(const Fallbacks *f, const FallbackGroup *g, bool time, const char *indent,
                         StrBuf *b) {
    sb_printf(b, "%s%s", indent, g->ops);
    if (g->kernels > 1)
        sb_printf(b, " \u00d7%d", g->kernels);
    sb_printf(b, " (node%s ", g->n_nodes == 1 ? "" : "s");
    for (int i = 0; i < g->n_nodes && i < NODES_SHOWN; i++)
        sb_printf(b, "%s%s", i ? ", " : "", g->nodes[i]);
    if (g->n_nodes > NODES_SHOWN)
        sb_printf(b, " and %d more", g->n_nodes - NODES_SHOWN);
    sb_printf(b, "): %s, ", fallback_where(g->kind));
    if (time) {
        char t[32];
        fmt_seconds(g->seconds, t, sizeof t);
        sb_printf(b, "%s, ", t);
    }
    sb_printf(b, "%.1f%% of the predicted time; %s\n",
              f->total > 0 ? 100.0 * g->seconds / f->total : 0.0, g->why);
}

void fallbacks_format(const Fallbacks *f, bool each, const char *indent, StrBuf *b) {
    const FallbackGroup *v = each ? f->each : f->groups;
    int n = each ? f->n_each : f->n_groups;
    for (int i = 0; i < n; i++)
        format_group(f, &v[i], each, indent, b);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void fallbacks_json(const Fallbacks *f, FILE *out) {
    fprintf(out, "[");
    for (int i = 0; i < f->n_groups; i++) {
        const FallbackGroup *g = &f->groups[i];
        fprintf(out, "%s\n    {\"ops\": ", i ? "," : "");
        json_str(out, g->ops);
        fprintf(out, ", \"where\": ");
        json_str(out, fallback_where(g->kind));
        fprintf(out, ", \"kernels\": %d, \"predicted_share\": %.4f, \"why\": ", g->kernels,
                f->total > 0 ? g->seconds / f->total : 0.0);
        json_str(out, g->why);
        fprintf(out, ", \"nodes\": [");
        for (int j = 0; j < g->n_nodes; j++) {
            fprintf(out, "%s", j ? ", " : "");
            json_str(out, g->nodes[j]);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "%s]", f->n_groups ? "\n  " : "");
}

// ---- each target's coverage, before compiling ----

void fallbacks_generated_alone(const Target *t, const PrimGraph *pg, bool *gen) {
    // supports reads the options only (target.h), so no device is needed: a model can be
    // examined for the CUDA target on a machine without a GPU.
    TargetMachine m = {.target = t};
    int *ins = NULL;
    int cap = 0;
    for (int p = 0; p < pg->n_prims; p++) {
        const Prim *x = pg->prims[p];
        if (x->n_in + 1 > cap) {
            cap = x->n_in + 1;
            ins = xrealloc(ins, sizeof(int) * (size_t)cap);
        }
        Candidate c = {.n_prims = 1, .prims = &p, .output = -1, .inputs = ins};
        for (int j = 0; j < x->n_out && c.output < 0; j++)
            c.output = x->out[j];
        c.signature = cand_signature(pg, &p, 1);
        c.n_inputs = cand_canonical_inputs(pg, &p, 1, ins);
        gen[p] = t->supports(&m, pg, &c);
    }
    free(ins);
}

enum { ST_GEN, ST_PRIM_INTERP, ST_OP_INTERP };
static const char *const status_word[] = {"generated", "interpreter", "op interpreter"};

typedef struct OpRow {
    const char *op;
    int nodes;
    int worst[TARGET_COUNT],
        falling[TARGET_COUNT]; // per target: the worst status of its nodes, nodes not generated
} OpRow;

static int cmp_row(const void *a, const void *b) {
    const OpRow *x = a, *y = b;
    return x->nodes != y->nodes ? y->nodes - x->nodes : strcmp(x->op, y->op);
}

void fallbacks_print_op_table(const PrimGraph *pg, FILE *f) {
    const Graph *g = pg->src;
    const Target *const *targets = target_all;
    NodeIndex ix;
    index_nodes(g, &ix);
    // status[t][k]: the worst status of the primitives node g->nodes[k] gave.
    int *status[TARGET_COUNT];
    bool *gen = xmalloc(sizeof(bool) * (size_t)(pg->n_prims + 1));
    for (int t = 0; t < TARGET_COUNT; t++) {
        status[t] = xcalloc((size_t)g->n_nodes + 1, sizeof(int));
        fallbacks_generated_alone(targets[t], pg, gen);
        for (int p = 0; p < pg->n_prims; p++) {
            const Prim *x = pg->prims[p];
            if (gen[p])
                continue;
            int s = x->kind == PRIM_OPAQUE ? ST_OP_INTERP : ST_PRIM_INTERP;
            if (x->kind == PRIM_OPAQUE && x->node) {
                int at = find_node(&ix, x->node->name, strlen(x->node->name));
                if (at >= 0)
                    status[t][at] = s;
                continue;
            }
            const char *o = x->origin, *name;
            size_t len;
            while ((name = next_origin(&o, &len))) {
                int at = find_node(&ix, name, len);
                if (at >= 0 && status[t][at] < s)
                    status[t][at] = s;
            }
        }
    }
    OpRow *rows = xcalloc((size_t)g->n_nodes + 1, sizeof *rows);
    int n_rows = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const Node *n = g->nodes[k];
        if (n->dead)
            continue;
        OpRow *r = NULL;
        for (int i = 0; i < n_rows && !r; i++)
            if (strcmp(rows[i].op, n->op) == 0)
                r = &rows[i];
        if (!r) {
            r = &rows[n_rows++];
            r->op = n->op;
        }
        r->nodes++;
        for (int t = 0; t < TARGET_COUNT; t++) {
            int s = status[t][k];
            r->falling[t] += s != ST_GEN;
            if (s > r->worst[t])
                r->worst[t] = s;
        }
    }
    qsort(rows, (size_t)n_rows, sizeof *rows, cmp_row);
    fprintf(f, "kernels per operator (each primitive alone, default options): generated, or the "
               "interpreter that runs it\n");
    fprintf(f, "  %-24s %5s", "op", "nodes");
    for (int t = 0; t < TARGET_COUNT; t++)
        fprintf(f, t + 1 < TARGET_COUNT ? "  %-22s" : "  %s\n", targets[t]->name);
    for (int i = 0; i < n_rows; i++) {
        const OpRow *r = &rows[i];
        char cell[TARGET_COUNT][64];
        for (int t = 0; t < TARGET_COUNT; t++) {
            if (r->falling[t] == 0 || r->falling[t] == r->nodes)
                snprintf(cell[t], sizeof cell[t], "%s", status_word[r->worst[t]]);
            else
                snprintf(cell[t], sizeof cell[t], "%s (%d of %d)", status_word[r->worst[t]],
                         r->falling[t], r->nodes);
        }
        fprintf(f, "  %-24s %5d", r->op, r->nodes);
        for (int t = 0; t < TARGET_COUNT; t++)
            fprintf(f, t + 1 < TARGET_COUNT ? "  %-22s" : "  %s\n", cell[t]);
    }
    free(rows);
    free(gen);
    for (int t = 0; t < TARGET_COUNT; t++)
        free(status[t]);
    free(ix.v);
}
