// Loop nests for the C emitters (see loopnest.h). A nest is an ordered list of loops, each
// iterating one C variable over [lo, hi); split keeps the axis variable as the inner loop's own
// variable (so an inner loop over the last axis stays unit-stride for the vectoriser), fuse turns
// the fused loops' variables into definitions (div/mod of the fused variable) emitted as soon as
// the fused loop opens.
#include "loopnest.h"

#include "../../base/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN_MAX 32

typedef struct Text {
    int loop;   // -1: outside the nest
    bool after; // after the inner loop
    char *text;
    LoopNest *child;
} Text;

typedef struct Def { // const int64_t name = expr, once every loop in deps is open
    char text[192];
    int deps[2], n_deps;
} Def;

typedef struct Loop {
    char var[48];
    char lo[160], hi[224];
    int64_t extent;         // nominal trip count
    int bound_dep;          // loop whose variable lo/hi use, or -1
    LoopKind kind;
    int64_t work;
    int unroll;
    char clause[96];
    bool plain;             // lo == 0, hi == extent: fusable
} Loop;

struct LoopNest {
    char prefix[24];
    Loop loop[LN_MAX];
    int n_loops;
    int order[LN_MAX];
    Def def[LN_MAX];
    int n_defs;
    Text *text;
    int n_text, cap_text;
    int next_name;
    // ln_split_interior: the loop (-1: none), its bound statements, names and interior body.
    int split_loop;
    char *split_bounds, *split_body;
    char split_lo[48], split_hi[48];
};

// snprintf for the nest's short texts; one that does not fit is a bug in an emitter.
__attribute__((format(printf, 3, 4))) static void lfmt(char *buf, size_t cap, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, cap, f, ap);
    va_end(ap);
    ORCH_ASSERT(n >= 0 && (size_t)n < cap);
}

LoopNest *ln_create(const char *prefix) {
    LoopNest *n = xcalloc(1, sizeof *n);
    lfmt(n->prefix, sizeof n->prefix, "%s", prefix);
    for (int i = 0; i < LN_MAX; i++)
        n->order[i] = -1;
    n->split_loop = -1;
    return n;
}

void ln_free(LoopNest *n) {
    if (!n)
        return;
    for (int i = 0; i < n->n_text; i++) {
        free(n->text[i].text);
        ln_free(n->text[i].child);
    }
    free(n->text);
    free(n->split_bounds);
    free(n->split_body);
    free(n);
}

static int new_loop(LoopNest *n, const char *var, int64_t extent) {
    ORCH_ASSERT(n->n_loops < LN_MAX);
    int id = n->n_loops++;
    Loop *L = &n->loop[id];
    memset(L, 0, sizeof *L);
    lfmt(L->var, sizeof L->var, "%s", var);
    lfmt(L->lo, sizeof L->lo, "0");
    lfmt(L->hi, sizeof L->hi, "%lld", (long long)extent);
    L->extent = extent;
    L->bound_dep = -1;
    L->plain = true;
    return id;
}

static int n_active(const LoopNest *n) {
    int k = 0;
    while (k < LN_MAX && n->order[k] >= 0)
        k++;
    return k;
}

int ln_axis(LoopNest *n, const char *name, int64_t extent) {
    int depth = n_active(n), id = new_loop(n, name, extent);
    n->order[depth] = id;
    return id;
}

int ln_depth(const LoopNest *n, int l) {
    for (int i = 0; i < n->n_loops; i++)
        if (n->order[i] == l)
            return i;
    ORCH_ASSERT(!"loop not in the nest");
    return -1;
}

// Inserts loop id at depth d of the order, shifting deeper loops.
static void order_insert(LoopNest *n, int d, int id) {
    int k = n_active(n);
    for (int i = k; i > d; i--)
        n->order[i] = n->order[i - 1];
    n->order[d] = id;
    for (int i = k + 1; i < LN_MAX; i++)
        n->order[i] = -1;
}

static void order_remove(LoopNest *n, int d) {
    int k = n_active(n);
    for (int i = d; i < k - 1; i++)
        n->order[i] = n->order[i + 1];
    n->order[k - 1] = -1;
}

void ln_split(LoopNest *n, int l, int64_t factor, int *outer, int *inner) {
    ORCH_ASSERT(factor >= 1);
    Loop *L = &n->loop[l];
    char name[48];
    lfmt(name, sizeof name, "%so%d", n->prefix, n->next_name++);
    int o = new_loop(n, name, (L->extent + factor - 1) / factor);
    L = &n->loop[l]; // new_loop does not move the array, but keep the pointer obviously fresh
    char lo[160], hi[224];
    // The inner loop keeps the variable: it runs over [lo + o*F, min(hi, lo + o*F + F)).
    lfmt(lo, sizeof lo, "%s + %s * %lld", L->lo, name, (long long)factor);
    if (factor >= L->extent)
        lfmt(hi, sizeof hi, "%s", L->hi);
    else
        lfmt(hi, sizeof hi, "ORCH_MIN_I64(%s, %s + %s * %lld + %lld)", L->hi, L->lo, name,
                 (long long)factor, (long long)factor);
    if (L->extent % factor == 0 && factor < L->extent && L->plain)
        lfmt(hi, sizeof hi, "%s + %lld", lo, (long long)factor);
    lfmt(L->lo, sizeof L->lo, "%s", lo);
    lfmt(L->hi, sizeof L->hi, "%s", hi);
    L->extent = ORCH_MIN(factor, L->extent);
    L->bound_dep = o;
    L->plain = false;
    order_insert(n, ln_depth(n, l), o);
    *outer = o;
    *inner = l;
}

int ln_fuse(LoopNest *n, int a, int b) {
    int da = ln_depth(n, a), db = ln_depth(n, b);
    ORCH_ASSERT(db == da + 1 && n->loop[a].plain && n->loop[b].plain);
    char name[48];
    lfmt(name, sizeof name, "%sf%d", n->prefix, n->next_name++);
    int64_t ea = n->loop[a].extent, eb = n->loop[b].extent;
    int f = new_loop(n, name, ea * eb);
    ORCH_ASSERT(n->n_defs + 2 <= LN_MAX);
    char va[48], vb[48];
    memcpy(va, n->loop[a].var, sizeof va);
    memcpy(vb, n->loop[b].var, sizeof vb);
    Def *d = &n->def[n->n_defs++];
    lfmt(d->text, sizeof d->text, "const int64_t %s = %s / %lld;", va, name, (long long)eb);
    d->deps[0] = f;
    d->n_deps = 1;
    d = &n->def[n->n_defs++];
    lfmt(d->text, sizeof d->text, "const int64_t %s = %s %% %lld;", vb, name, (long long)eb);
    d->deps[0] = f;
    d->n_deps = 1;
    // Defs, bounds and texts that waited for a or b now wait for f.
    for (int i = 0; i < n->n_loops; i++)
        if (n->loop[i].bound_dep == a || n->loop[i].bound_dep == b)
            n->loop[i].bound_dep = f;
    for (int i = 0; i < n->n_defs - 2; i++)
        for (int k = 0; k < n->def[i].n_deps; k++)
            if (n->def[i].deps[k] == a || n->def[i].deps[k] == b)
                n->def[i].deps[k] = f;
    for (int i = 0; i < n->n_text; i++)
        if (n->text[i].loop == a || n->text[i].loop == b) {
            // A statement attached inside a would now run once per b iteration: only ones
            // attached to b (the inner loop) keep their meaning.
            ORCH_ASSERT(n->text[i].loop == b);
            n->text[i].loop = f;
        }
    order_remove(n, db);
    n->order[da] = f;
    return f;
}

void ln_reorder(LoopNest *n, const int *order, int count) {
    ORCH_ASSERT(count == n_active(n));
    for (int i = 0; i < count; i++)
        n->order[i] = order[i];
}

void ln_parallel(LoopNest *n, int l, int64_t work) {
    ln_parallel_clause(n, l, work, NULL);
}

void ln_parallel_clause(LoopNest *n, int l, int64_t work, const char *clause) {
    n->loop[l].kind = LK_PARALLEL;
    n->loop[l].work = work;
    lfmt(n->loop[l].clause, sizeof n->loop[l].clause, "%s", clause ? clause : "");
}

void ln_vector(LoopNest *n, int l, const char *clause) {
    n->loop[l].kind = LK_VECTOR;
    lfmt(n->loop[l].clause, sizeof n->loop[l].clause, "%s", clause ? clause : "");
}

void ln_unroll(LoopNest *n, int l, int factor) {
    n->loop[l].kind = LK_UNROLL;
    n->loop[l].unroll = factor;
}

int64_t ln_extent(const LoopNest *n, int l) { return n->loop[l].extent; }
const char *ln_var(const LoopNest *n, int l) { return n->loop[l].var; }

static void add_text(LoopNest *n, int l, bool after, const char *text, LoopNest *child) {
    if (n->n_text == n->cap_text) {
        n->cap_text = n->cap_text ? 2 * n->cap_text : 8;
        n->text = xrealloc(n->text, sizeof(Text) * (size_t)n->cap_text);
    }
    n->text[n->n_text++] = (Text){l, after, text ? xstrdup(text) : NULL, child};
}

void ln_split_interior(LoopNest *n, int l, const char *bounds, const char *lo, const char *hi,
                       const char *interior) {
    ORCH_ASSERT(l >= 0 && l < n->n_loops && n->split_loop < 0);
    n->split_loop = l;
    n->split_bounds = xstrdup(bounds);
    n->split_body = xstrdup(interior);
    lfmt(n->split_lo, sizeof n->split_lo, "%s", lo);
    lfmt(n->split_hi, sizeof n->split_hi, "%s", hi);
}

void ln_pre(LoopNest *n, int l, const char *text) { add_text(n, l, false, text, NULL); }
void ln_post(LoopNest *n, int l, const char *text) { add_text(n, l, true, text, NULL); }
void ln_body(LoopNest *n, const char *text) { add_text(n, -2, false, text, NULL); }
void ln_attach(LoopNest *n, int l, bool after, LoopNest *child) {
    add_text(n, l, after, NULL, child);
}

// Multi-line text, each line indented.
static void put_lines(StrBuf *out, int indent, const char *text) {
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) {
            sb_line(out, indent, "%s", "");
            sb_putn(out, p, len);
            sb_puts(out, "\n");
        }
        p += len + (e ? 1 : 0);
    }
}

static void put_texts(const LoopNest *n, int l, bool after, StrBuf *out, int indent) {
    for (int i = 0; i < n->n_text; i++) {
        const Text *t = &n->text[i];
        if (t->loop != l || t->after != after)
            continue;
        if (t->child)
            ln_print(t->child, out, indent);
        else
            put_lines(out, indent, t->text);
    }
}

// Whether a definition depends on loop l (then l's variable is not simply the axis's).
static bool defs_wait_on(const LoopNest *n, int l) {
    for (int i = 0; i < n->n_defs; i++)
        for (int j = 0; j < n->def[i].n_deps; j++)
            if (n->def[i].deps[j] == l)
                return true;
    return false;
}

// The innermost loop L split by ln_split_interior: its edges [0, lo) and [hi, extent) serial
// with the ordinary body, the interior [lo, hi) with the interior body and L's own kind.
static void print_split(const LoopNest *n, const Loop *L, StrBuf *out, int indent) {
    int l = n->split_loop;
    sb_line(out, indent, "{\n");
    put_lines(out, indent + 1, n->split_bounds);
    const char *from[3] = {L->lo, n->split_lo, n->split_hi};
    const char *to[3] = {n->split_lo, n->split_hi, L->hi};
    for (int part = 0; part < 3; part++) {
        if (part == 1 && L->kind == LK_VECTOR)
            sb_line(out, indent + 1, "#pragma omp simd %s\n", L->clause);
        else if (part == 1 && L->kind == LK_UNROLL)
            sb_line(out, indent + 1, "#pragma GCC unroll %d\n", L->unroll);
        sb_line(out, indent + 1, "for (int64_t %s = %s; %s < %s; %s++) {\n", L->var, from[part],
                L->var, to[part], L->var);
        put_texts(n, l, false, out, indent + 2);
        if (part == 1)
            put_lines(out, indent + 2, n->split_body);
        else
            put_texts(n, -2, false, out, indent + 2);
        put_texts(n, l, true, out, indent + 2);
        sb_line(out, indent + 1, "}\n");
    }
    sb_line(out, indent, "}\n");
}

static void print_level(const LoopNest *n, int d, bool *open, bool *done, StrBuf *out,
                        int indent) {
    int k = n_active(n);
    if (d == k) {
        put_texts(n, -2, false, out, indent);
        return;
    }
    const Loop *L = &n->loop[n->order[d]];
    ORCH_ASSERT(L->bound_dep < 0 || open[L->bound_dep]);
    if (n->order[d] == n->split_loop && d == k - 1 && L->plain && !defs_wait_on(n, n->order[d])) {
        print_split(n, L, out, indent);
        return;
    }
    if (L->kind == LK_PARALLEL && L->work >= LN_PARALLEL_MIN_WORK && L->extent > 1)
        sb_line(out, indent, "#pragma omp parallel for schedule(static)%s%s\n",
                L->clause[0] ? " " : "", L->clause);
    else if (L->kind == LK_VECTOR)
        sb_line(out, indent, "#pragma omp simd %s\n", L->clause);
    else if (L->kind == LK_UNROLL)
        sb_line(out, indent, "#pragma GCC unroll %d\n", L->unroll);
    sb_line(out, indent, "for (int64_t %s = %s; %s < %s; %s++) {\n", L->var, L->lo, L->var, L->hi,
            L->var);
    open[n->order[d]] = true;
    // Newest first: a later fuse defines the variables an earlier fuse's definitions divide.
    for (int i = n->n_defs - 1; i >= 0; i--) {
        bool ready = !done[i];
        for (int j = 0; j < n->def[i].n_deps; j++)
            ready = ready && open[n->def[i].deps[j]];
        if (ready) {
            sb_line(out, indent + 1, "%s\n", n->def[i].text);
            done[i] = true;
        }
    }
    put_texts(n, n->order[d], false, out, indent + 1);
    print_level(n, d + 1, open, done, out, indent + 1);
    put_texts(n, n->order[d], true, out, indent + 1);
    sb_line(out, indent, "}\n");
    open[n->order[d]] = false;
}

void ln_print(const LoopNest *n, StrBuf *out, int indent) {
    bool open[LN_MAX] = {false}, done[LN_MAX] = {false};
    sb_line(out, indent, "{\n");
    put_texts(n, -1, false, out, indent + 1);
    print_level(n, 0, open, done, out, indent + 1);
    put_texts(n, -1, true, out, indent + 1);
    sb_line(out, indent, "}\n");
}
