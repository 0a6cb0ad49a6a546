// CCLS_REDUCE: kernels with REDUCE primitives (softmax, LayerNorm, reduce-all, argmax, ...).
// The reduced input's axes split into reduced axes, "inner" kept axes (after the last reduced
// axis: vectorised over, with an accumulator per element kept in a small local array; or, where
// a few reduced axes come last, as in a pooling window, the kept axis just before them) and
// "outer" kept axes (the parallel row loop). Two strategies (config p[0]):
//   fused (1): all reductions reduce the same axes of same-shaped inputs; per row, each reduction
//     is computed in dependency order (compute-at the row loop) into a local array, read by later
//     primitives through cexpr's reader, then the elementwise tail runs over the row. Offered
//     only where every read of a reduction stays on the current row (a dry run checks this).
//   materialised (0): each reduction runs its own row loop into a heap buffer sized to its
//     output, then the sink is computed from those buffers at any index. Always correct.
// Accumulation follows prim_interp.c: float sums in double, integer sums wrapping in uint64,
// NaN propagating through max/min, numpy's NaN rule and select_last for argmax/argmin.
#include "cgen.h"
#include "loopnest.h"

#include "../../codegen/fmt.h"
#include "../../codegen/reduce_spec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R ORCH_MAX_RANK
#define MAX_RED 16
// Elements of a per-row accumulator array: they live on the (OpenMP worker's) stack, several per
// kernel, so keep them well below the default thread stack.
#define INNER_MAX 2048

// The fitted constants of the reduction kernels: the row layout's choice and the config
// ranker's terms beyond cgen_estimate (CpuPointwiseModel, emit_pointwise.c). "Not recorded": no
// measurement behind the number was written down, and none of these is recorded as checked on
// three or more shapes.
typedef struct CpuReduceModel {
    // A reduction over at most this many trailing elements (a pooling window, a tiny softmax)
    // vectorises along the kept axis before them instead: 32. The layout was measured on one
    // shape (ResNet-18's 3x3 max pool on 112x112: 1.14 -> 0.61 ms); the threshold not recorded.
    int64_t window_max;
    // ... where that kept axis has at least this many elements: 16. Not recorded.
    int64_t window_kept_min;
    // Materialised: extra traffic per further reduction, as a share of the kernel's bytes (later
    // passes re-read their inputs from memory rather than from the cache-resident row): 0.5.
    // Not recorded.
    double mat_reread;
    // Materialised: seconds per reduction for its own loop (a parallel region) and buffer, with
    // the loops parallel: 4e-6. Not recorded.
    double mat_loop_par_s;
    // ... serial: 1e-6. Not recorded.
    double mat_loop_s;
} CpuReduceModel;

static const CpuReduceModel cpu_red_model = {
    .window_max = 32,
    .window_kept_min = 16,
    .mat_reread = 0.5,
    .mat_loop_par_s = 4e-6,
    .mat_loop_s = 1e-6,
};

// Truncation of this file's fixed buffers (fmt.h), checked over each kernel's emission.
static _Thread_local bool fmt_truncated;
#define fmt(buf, cap, ...) cg_fmt(&fmt_truncated, buf, cap, __VA_ARGS__)

// The axes of one reduction's input space.
typedef struct Space {
    int rank;
    int64_t dims[R];
    uint32_t red;   // reduced axes
    uint32_t inner; // kept axes vectorised with accumulator arrays (see space_of)
    int64_t n_inner;
} Space;

typedef struct Red {
    const Prim *p;
    int out;   // tensor id of its output
    Space sp;
    char res[32]; // fused: the local array holding the row's results; materialised: buffer
} Red;

typedef struct Ctx {
    const PrimGraph *pg;
    const Candidate *c;
    const char *fn;
    Cexpr *x;
    Red red[MAX_RED];
    int n_red;
    bool fused;
    bool root_is_space; // fused reads: the current root is the reduction space (else the sink's)
    const Space *sp;    // fused: the shared space
    // Materialised sink nest: reads of a reduction's buffer whose index does not move with the
    // innermost (vector) loop go here, printed before that loop (hoist_rank: the nest's rank).
    StrBuf *hoist;
    int hoist_rank;
} Ctx;

static void space_of(const PrimGraph *pg, const Prim *p, Space *s) {
    const Tensor *A = pg->tensors[p->in[0]];
    s->rank = A->rank;
    memcpy(s->dims, A->dims, sizeof s->dims);
    s->red = p->red.axes & ((1u << A->rank) - 1);
    s->inner = 0;
    s->n_inner = 1;
    if (!s->red)
        return;
    int last = 0;
    for (int d = 0; d < s->rank; d++)
        if (s->red & (1u << d))
            last = d;
    int64_t n = 1;
    for (int d = last + 1; d < s->rank; d++)
        n *= s->dims[d];
    if (last + 1 < s->rank && n <= INNER_MAX) {
        for (int d = last + 1; d < s->rank; d++)
            s->inner |= 1u << d;
        s->n_inner = n;
        return;
    }
    // Reduced axes last and few (a pooling window, a tiny softmax): vectorising along them
    // would run a few lanes with gathers per output. Instead the kept axis just before them
    // becomes the inner axis: the window loops run outside and each step updates a whole
    // vector of outputs (ResNet-18's 3x3 max pool on 112x112: 1.14 -> 0.61 ms; CpuReduceModel).
    int64_t count = 1;
    int first = -1;
    for (int d = 0; d < s->rank; d++)
        if (s->red & (1u << d)) {
            count *= s->dims[d];
            if (first < 0)
                first = d;
        }
    int kept = -1;
    for (int d = first - 1; d >= 0 && kept < 0; d--)
        if (!(s->red & (1u << d)))
            kept = d;
    if (last + 1 == s->rank && count <= cpu_red_model.window_max && kept >= 0 &&
        s->dims[kept] >= cpu_red_model.window_kept_min && s->dims[kept] <= INNER_MAX) {
        s->inner = 1u << kept;
        s->n_inner = s->dims[kept];
    }
}

static bool is_outer(const Space *s, int d) {
    return !(s->red & (1u << d)) && !(s->inner & (1u << d));
}

// Offset of the inner axes' variables in a row's accumulator array.
static void inner_offset(const Space *s, char *buf, size_t cap) {
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, "0");
    int64_t st = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        if (!(s->inner & (1u << d)))
            continue;
        if (s->dims[d] != 1)
            sb_printf(&b, " + i%d * %lld", d, (long long)st);
        st *= s->dims[d];
    }
    fmt(buf, cap, "%s", b.s);
    sb_free(&b);
}

// ---- readers ----

// Whether an index expression is made of literals, arithmetic and the loop variables i0 ..
// i<rank-2> alone: then it is fixed across the innermost loop, and a read at it may be printed
// before that loop. Anything else (a variable of the body, such as a gather's index) keeps the
// read in the body.
static bool index_outside_inner(const char *x, int rank) {
    for (const char *p = x; *p;) {
        if (*p == 'i' && p[1] >= '0' && p[1] <= '9') {
            char *end;
            long d = strtol(p + 1, &end, 10);
            if (d >= rank - 1 || (p > x && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
                return false;
            p = end;
        } else if (isdigit((unsigned char)*p) || strchr(" +-*/%()", *p)) {
            p++;
        } else {
            return false;
        }
    }
    return true;
}

static int find_red(const Ctx *k, int t) {
    for (int i = 0; i < k->n_red; i++)
        if (k->red[i].out == t)
            return i;
    return -1;
}

static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    Ctx *k = ctx;
    int i = find_red(k, rq->tensor);
    if (i < 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: tensor '%s' has no reader", k->fn,
                       k->pg->tensors[rq->tensor]->name);
    const Red *r = &k->red[i];
    if (k->fused) {
        if (!red_read_on_row(k->pg, r->p, r->sp.rank, r->sp.red, k->root_is_space, rq))
            return err_set(e, ST_UNSUPPORTED, "kernel %s: '%s' is read off its row", k->fn,
                           k->pg->tensors[rq->tensor]->name);
        char off[512];
        inner_offset(&r->sp, off, sizeof off);
        cexpr_fresh(k->x, "rv", out, cap);
        sb_line(code, indent, "const %s %s = %s[%s];\n",
                cgen_vtype(k->pg->tensors[r->out]->dtype), out, r->res, off);
        return ST_OK;
    }
    const Tensor *O = k->pg->tensors[r->out];
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, "0");
    int64_t st = 1;
    for (int d = O->rank - 1; d >= 0; d--) {
        if (O->dims[d] != 1)
            sb_printf(&b, " + (%s) * %lld", rq->idx[d], (long long)st);
        st *= O->dims[d];
    }
    // A statistic read at a fixed row (InstanceNorm's mean per channel) is loaded before the
    // vector loop: left in it, GCC's partial redundancy elimination moved the rsqrt of the loaded
    // value into the loop's latch and the loop stayed scalar ("latch block not empty"); the style
    // transfer net's InstanceNorm + ReLU + reflect-pad kernel took 2.2 ms that way.
    // Only a read the body makes on every iteration moves: one inside a pad's if-block (deeper
    // than the body's first level) may have an index that is out of range where its condition
    // is false.
    bool hoist = k->hoist != NULL && indent == 0;
    for (int d = 0; d < O->rank && hoist; d++)
        hoist = O->dims[d] == 1 || index_outside_inner(rq->idx[d], k->hoist_rank);
    cexpr_fresh(k->x, "rv", out, cap);
    sb_line(hoist ? k->hoist : code, hoist ? 0 : indent, "const %s %s = %s[%s];\n",
            cgen_vtype(O->dtype), out, r->res, b.s);
    sb_free(&b);
    return ST_OK;
}

// ---- one reduction ----

// Appends to body the update of reduction p's accumulators (acc, nan_, the argument index aix)
// with the value v.
static void emit_accumulate(const Prim *p, bool fl, bool scalar, const char *acc, const char *nan_,
                            const char *ai, const char *v, const char *arg_var, StrBuf *body) {
    RedOp op = p->red.op;
    StrBuf *const b = body;
    switch (op) {
    case RED_SUM:
    case RED_MEAN:
        if (fl)
            sb_line(b, 0, "%s += (double)%s;\n", acc, v);
        else
            sb_line(b, 0, "%s += (uint64_t)(int64_t)%s;\n", acc, v);
        break;
    case RED_PROD:
        if (fl)
            sb_line(b, 0, "%s *= (double)%s;\n", acc, v);
        else
            sb_line(b, 0, "%s *= (uint64_t)(int64_t)%s;\n", acc, v);
        break;
    case RED_MAX:
    case RED_MIN: {
        const char *cmp = op == RED_MAX ? ">" : "<";
        if (fl) {
            sb_line(b, 0, "%s = %s %s %s ? %s : %s;\n", acc, v, cmp, acc, v, acc);
            sb_line(b, 0, "%s |= %s != %s;\n", nan_, v, v);
        } else {
            sb_line(b, 0, "%s = (int64_t)%s %s %s ? (int64_t)%s : %s;\n", acc, v, cmp, acc, v, acc);
        }
        break;
    }
    case RED_ARGMAX:
    case RED_ARGMIN: {
        const char *cmp = op == RED_ARGMAX ? ">" : "<";
        char aix[64];
        fmt(aix, sizeof aix, scalar ? "s%s" : "%s[pk]", ai);
        if (fl) {
            // numpy's rule: NaN beats every number, two NaNs tie, a NaN is never replaced.
            sb_line(b, 0, "const int vn = %s != %s, an = %s != %s;\n", v, v, acc, acc);
            sb_line(b, 0, "const int more = (vn | an) ? (vn & !an) : (%s %s %s);\n", v, cmp, acc);
            sb_line(b, 0, "const int same = (vn | an) ? (vn & an) : (%s == %s);\n", v, acc);
        } else {
            sb_line(b, 0, "const int more = (int64_t)%s %s %s;\n", v, cmp, acc);
            sb_line(b, 0, "const int same = (int64_t)%s == %s;\n", v, acc);
        }
        sb_line(b, 0, "if (!%s || more || (%d && same)) {\n", nan_, p->red.select_last ? 1 : 0);
        sb_line(b, 1, "%s = %s;\n", acc, v);
        sb_line(b, 1, "%s = %s;\n", aix, arg_var);
        sb_line(b, 0, "}\n");
        sb_line(b, 0, "%s = 1;\n", nan_);
        break;
    }
    }
}

// Emits, where the outer axes' variables i<d> are defined, the computation of reduction r for
// the current row into `VT res[n_inner]` (declared here, named r->res in the fused strategy,
// else `dst`).
static int emit_reduction(Ctx *k, const Red *r, const char *dst, StrBuf *code, int indent,
                          Err *e) {
    const PrimGraph *pg = k->pg;
    const Prim *p = r->p;
    const Space *s = &r->sp;
    const Tensor *A = pg->tensors[p->in[0]], *O = pg->tensors[r->out];
    bool fl = dtype_is_float(A->dtype);
    RedOp op = p->red.op;
    bool arg = op == RED_ARGMAX || op == RED_ARGMIN;
    int64_t P = s->n_inner, count = 1;
    int arg_axis = -1;
    for (int d = 0; d < s->rank; d++)
        if (s->red & (1u << d)) {
            count *= s->dims[d];
            arg_axis = d;
        }
    const char *vt = cgen_vtype(A->dtype);
    // Accumulators: a (value), n (NaN seen / seen), ai (argument index).
    const char *at = fl ? (op == RED_MAX || op == RED_MIN || arg ? vt : "double")
                        : (op == RED_MAX || op == RED_MIN || arg ? "int64_t" : "uint64_t");
    char a[48], n[48], ai[48];
    cexpr_fresh(k->x, "acc", a, sizeof a);
    cexpr_fresh(k->x, "nan", n, sizeof n);
    cexpr_fresh(k->x, "arg", ai, sizeof ai);
    const char *init = red_init(op, fl);
    sb_line(code, indent, "%s %s[%lld];\n", at, a, (long long)ORCH_MAX(P, 1));
    sb_line(code, indent, "uint8_t %s[%lld];\n", n, (long long)ORCH_MAX(P, 1));
    if (arg)
        sb_line(code, indent, "int64_t %s[%lld];\n", ai, (long long)ORCH_MAX(P, 1));
    sb_line(code, indent, "for (int64_t p = 0; p < %lld; p++) {\n", (long long)P);
    sb_line(code, indent + 1, "%s[p] = %s;\n", a, init);
    sb_line(code, indent + 1, "%s[p] = 0;\n", n);
    if (arg)
        sb_line(code, indent + 1, "%s[p] = 0;\n", ai);
    sb_line(code, indent, "}\n");

    // The loops: reduced axes in order, then the inner axes (the innermost one SIMD).
    LoopNest *ln = ln_create("r");
    char names[R][16];
    const char *idx[R];
    int last_loop = -1;
    for (int d = 0; d < s->rank; d++) {
        fmt(names[d], sizeof names[d], "i%d", d);
        idx[d] = names[d];
    }
    for (int d = 0; d < s->rank; d++)
        if (s->red & (1u << d))
            last_loop = ln_axis(ln, names[d], s->dims[d]);
    bool has_inner = false;
    for (int d = 0; d < s->rank; d++)
        if (s->inner & (1u << d)) {
            last_loop = ln_axis(ln, names[d], s->dims[d]);
            has_inner = true;
        }
    StrBuf body;
    sb_init(&body);
    char off[512], v[64];
    inner_offset(s, off, sizeof off);
    // A scalar accumulator (no inner axes) is a private variable for the SIMD reduction clause.
    bool scalar = !has_inner;
    char acc[64], nan_[64];
    fmt(acc, sizeof acc, scalar ? "s%s" : "%s[%s]", a, off);
    fmt(nan_, sizeof nan_, scalar ? "s%s" : "%s[%s]", n, off);
    if (!scalar) {
        fmt(acc, sizeof acc, "%s[pk]", a);
        fmt(nan_, sizeof nan_, "%s[pk]", n);
        sb_line(&body, 0, "const int64_t pk = %s;\n", off);
    }
    // The innermost loop over a padded input (a pooling window): split into edges and an
    // interior where the clamps and pad selects drop out and the loads vectorise.
    bool split = !scalar && last_loop >= 0 && !cexpr_flat_broken(k->x);
    int q = -1;
    for (int d = 0; d < s->rank; d++)
        if (s->inner & (1u << d))
            q = d;
    if (split && q >= 0)
        cexpr_interior_begin(k->x, names[q]);
    const char *arg_var = arg_axis >= 0 ? names[arg_axis] : "0";
    int rc = cexpr_value(k->x, p->in[0], idx, &body, 0, v, sizeof v, e);
    if (rc == ST_OK)
        emit_accumulate(p, fl, scalar, acc, nan_, ai, v, arg_var, &body);
    StrBuf bounds, inner;
    sb_init(&bounds);
    sb_init(&inner);
    char lo[48], hi[48];
    cexpr_fresh(k->x, "ilo", lo, sizeof lo);
    cexpr_fresh(k->x, "ihi", hi, sizeof hi);
    if (rc == ST_OK && split && q >= 0 &&
        cexpr_interior_bounds(k->x, s->dims[q], &bounds, 0, lo, hi)) {
        cexpr_forget(k->x);
        cexpr_interior_mode(k->x, true);
        if (!scalar)
            sb_line(&inner, 0, "const int64_t pk = %s;\n", off);
        rc = cexpr_value(k->x, p->in[0], idx, &inner, 0, v, sizeof v, e);
        if (rc == ST_OK) {
            emit_accumulate(p, fl, scalar, acc, nan_, ai, v, arg_var, &inner);
            ln_split_interior(ln, last_loop, bounds.s, lo, hi, inner.s);
        }
    }
    cexpr_interior_end(k->x);
    sb_free(&bounds);
    sb_free(&inner);
    cexpr_forget(k->x);
    if (rc == ST_OK) {
        ln_body(ln, body.s);
        if (last_loop >= 0 && !arg) {
            char clause[96] = "";
            if (scalar) {
                const char *red = op == RED_SUM || op == RED_MEAN ? "+"
                                  : op == RED_PROD                ? "*"
                                  : op == RED_MAX                 ? "max"
                                                                  : "min";
                fmt(clause, sizeof clause, "reduction(%s:s%s)%s%s%s", red, a,
                         fl && (op == RED_MAX || op == RED_MIN) ? " reduction(|:s" : "",
                         fl && (op == RED_MAX || op == RED_MIN) ? n : "",
                         fl && (op == RED_MAX || op == RED_MIN) ? ")" : "");
            }
            ln_vector(ln, last_loop, clause);
        }
        if (scalar) {
            sb_line(code, indent, "%s s%s = %s[0];\n", at, a, a);
            sb_line(code, indent, "uint8_t s%s = 0;\n", n);
            if (arg)
                sb_line(code, indent, "int64_t s%s = 0;\n", ai);
        }
        ln_print(ln, code, indent);
        if (scalar) {
            sb_line(code, indent, "%s[0] = s%s;\n", a, a);
            sb_line(code, indent, "%s[0] = s%s;\n", n, n);
            if (arg)
                sb_line(code, indent, "%s[0] = s%s;\n", ai, ai);
        }
        // Results in the output's value type.
        DType ot = O->dtype;
        sb_line(code, indent, "%s %s[%lld];\n", cgen_vtype(ot), dst, (long long)ORCH_MAX(P, 1));
        sb_line(code, indent, "for (int64_t p = 0; p < %lld; p++) {\n", (long long)P);
        char val[256], conv[320];
        switch (op) {
        case RED_MEAN:
            if (fl)
                fmt(val, sizeof val, "%s[p] / (double)%lld", a, (long long)count);
            else if (count)
                fmt(val, sizeof val, "(int64_t)%s[p] / (int64_t)%lld", a, (long long)count);
            else
                fmt(val, sizeof val, "0");
            break;
        case RED_MAX:
        case RED_MIN:
            if (fl)
                fmt(val, sizeof val, "(%s[p] ? (double)NAN : (double)%s[p])", n, a);
            else
                fmt(val, sizeof val, "%s[p]", a);
            break;
        case RED_ARGMAX:
        case RED_ARGMIN: fmt(val, sizeof val, "%s[p]", ai); break;
        default:
            fmt(val, sizeof val, fl ? "%s[p]" : "(int64_t)%s[p]", a);
        }
        red_result_conv(ot, arg, val, conv, sizeof conv, &fmt_truncated);
        sb_line(code, indent + 1, "%s[p] = %s;\n", dst, conv);
        sb_line(code, indent, "}\n");
    }
    ln_free(ln);
    sb_free(&body);
    return rc;
}

// ---- the kernel ----

static int collect(Ctx *k, Err *e) {
    for (int i = 0; i < k->c->n_prims; i++) {
        const Prim *p = k->pg->prims[k->c->prims[i]];
        if (p->kind != PRIM_REDUCE)
            continue;
        if (k->n_red == MAX_RED)
            return err_set(e, ST_UNSUPPORTED, "kernel %s: more than %d reductions", k->fn,
                           MAX_RED);
        Red *r = &k->red[k->n_red++];
        r->p = p;
        r->out = p->out[0];
        space_of(k->pg, p, &r->sp);
        fmt(r->res, sizeof r->res, "red%d", k->n_red - 1);
    }
    return ST_OK;
}

// Whether all reductions share one space (the fused strategy's precondition).
static bool same_space(const Ctx *k) {
    for (int i = 1; i < k->n_red; i++) {
        const Space *a = &k->red[0].sp, *b = &k->red[i].sp;
        if (a->rank != b->rank || a->red != b->red ||
            memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank))
            return false;
    }
    return true;
}

// The row loop over the outer axes of s (fused into one loop, parallel when par); the caller
// attaches the body text.
static LoopNest *row_nest(const Space *s, bool par, double work_per_row) {
    LoopNest *ln = ln_create("o");
    int f = -1;
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) {
        if (!is_outer(s, d))
            continue;
        char name[16];
        fmt(name, sizeof name, "i%d", d);
        int l = ln_axis(ln, name, s->dims[d]);
        f = f < 0 ? l : ln_fuse(ln, f, l);
        n *= s->dims[d];
    }
    if (f >= 0 && par)
        ln_parallel(ln, f, (int64_t)ORCH_MIN(work_per_row * (double)n, 1e18));
    return ln;
}

static void store_expr(const Tensor *T, const char *idx_off, const char *v, StrBuf *code,
                       int indent) {
    char st[256];
    cgen_store_expr(T->dtype, v, st, sizeof st);
    sb_line(code, indent, "y[%s] = %s;\n", idx_off, st);
}

// Copies a row's results (array `res` over the inner axes) to a dense tensor at the row.
static void emit_row_store(const Red *r, const Tensor *O, const char *res, const char *dst_ptr,
                           bool is_y, StrBuf *code, int indent) {
    const Space *s = &r->sp;
    LoopNest *ln = ln_create("w");
    int last = -1;
    for (int d = 0; d < s->rank; d++)
        if (s->inner & (1u << d)) {
            char name[16];
            fmt(name, sizeof name, "i%d", d);
            last = ln_axis(ln, name, s->dims[d]);
        }
    if (last >= 0)
        ln_vector(ln, last, NULL);
    char names[R][16], off[512], in_off[512], text[1400], v[600];
    const char *idx[R];
    red_out_idx(r->sp.rank, r->sp.red, r->p->red.keepdims, names, idx);
    red_dense_offset(O, idx, off, sizeof off, &fmt_truncated);
    inner_offset(s, in_off, sizeof in_off);
    fmt(v, sizeof v, "%s[%s]", res, in_off);
    if (is_y) {
        StrBuf b;
        sb_init(&b);
        store_expr(O, off, v, &b, 0);
        ln_body(ln, b.s);
        sb_free(&b);
    } else {
        fmt(text, sizeof text, "%s[%s] = %s;", dst_ptr, off, v);
        ln_body(ln, text);
    }
    ln_print(ln, code, indent);
    ln_free(ln);
}

static int emit_kernel(Ctx *k, bool par, StrBuf *fnbody, Err *e) {
    const PrimGraph *pg = k->pg;
    const Candidate *c = k->c;
    const Tensor *T = pg->tensors[c->output];
    const Prim *sink = pg->prims[c->prims[c->n_prims - 1]];
    double ops = cgen_ops_per_elem(pg, c) + 1;
    int rc = ST_OK;
    if (!k->fused) {
        // Materialised: one row loop per reduction into its buffer (the sink's into y).
        for (int i = 0; i < k->n_red && rc == ST_OK; i++) {
            Red *r = &k->red[i];
            const Tensor *O = pg->tensors[r->out];
            bool is_sink = r->p == sink;
            if (!is_sink) {
                sb_line(fnbody, 1, "%s *%s = (%s *)malloc(sizeof(%s) * %lld);\n",
                        cgen_vtype(O->dtype), r->res, cgen_vtype(O->dtype), cgen_vtype(O->dtype),
                        (long long)ORCH_MAX(tensor_numel(O), 1));
                sb_line(fnbody, 1, "if (!%s)\n", r->res);
                sb_line(fnbody, 2, "abort();\n");
            }
            double per_row = (double)(tensor_numel(pg->tensors[r->p->in[0]]) /
                                      ORCH_MAX(tensor_numel(O), 1)) *
                             (double)r->sp.n_inner * ops;
            LoopNest *ln = row_nest(&r->sp, par, per_row);
            StrBuf b;
            sb_init(&b);
            rc = emit_reduction(k, r, "res", &b, 0, e);
            if (rc == ST_OK)
                emit_row_store(r, O, "res", r->res, is_sink, &b, 0);
            ln_body(ln, b.s);
            sb_free(&b);
            if (rc == ST_OK)
                ln_print(ln, fnbody, 1);
            ln_free(ln);
        }
        if (rc == ST_OK && sink->kind != PRIM_REDUCE) {
            // The sink from the buffers: a pointwise nest over its output.
            LoopNest *ln = ln_create("t");
            char names[R][16];
            const char *idx[R];
            int loops[R];
            for (int d = 0; d < T->rank; d++) {
                fmt(names[d], sizeof names[d], "i%d", d);
                idx[d] = names[d];
                loops[d] = ln_axis(ln, names[d], T->dims[d]);
            }
            StrBuf b, hoisted;
            sb_init(&b);
            sb_init(&hoisted);
            char v[64], off[512];
            k->hoist = T->rank >= 1 ? &hoisted : NULL;
            k->hoist_rank = T->rank;
            rc = cexpr_value(k->x, c->output, idx, &b, 0, v, sizeof v, e);
            k->hoist = NULL;
            cexpr_forget(k->x);
            if (rc == ST_OK) {
                red_dense_offset(T, idx, off, sizeof off, &fmt_truncated);
                store_expr(T, off, v, &b, 0);
                ln_body(ln, b.s);
                if (T->rank >= 1) {
                    int f = T->rank >= 2 ? loops[0] : -1;
                    for (int d = 1; d <= T->rank - 2; d++)
                        f = ln_fuse(ln, f, loops[d]);
                    if (f >= 0 && par)
                        ln_parallel(ln, f, (int64_t)ORCH_MIN(tensor_numel(T) * ops, 1e18));
                    ln_vector(ln, loops[T->rank - 1], NULL);
                    if (hoisted.len)
                        ln_pre(ln, f, hoisted.s); // after the fused loop's variables
                }
                ln_print(ln, fnbody, 1);
            }
            sb_free(&hoisted);
            sb_free(&b);
            ln_free(ln);
        }
        for (int i = 0; i < k->n_red; i++)
            if (k->red[i].p != sink)
                sb_line(fnbody, 1, "free(%s);\n", k->red[i].res);
        return rc;
    }
    // Fused: one row loop; reductions compute-at the row, then the tail.
    const Space *s = &k->red[0].sp;
    k->sp = s;
    double per_row = 1;
    for (int d = 0; d < s->rank; d++)
        if (!is_outer(s, d))
            per_row *= (double)s->dims[d];
    LoopNest *ln = row_nest(s, par, per_row * ops);
    StrBuf b;
    sb_init(&b);
    k->root_is_space = true;
    for (int i = 0; i < k->n_red && rc == ST_OK; i++)
        rc = emit_reduction(k, &k->red[i], k->red[i].res, &b, 0, e);
    if (rc == ST_OK && sink->kind == PRIM_REDUCE) {
        const Red *r = &k->red[k->n_red - 1];
        emit_row_store(r, T, r->res, NULL, true, &b, 0);
    } else if (rc == ST_OK) {
        // The tail over the rest of the row: the whole space (sink shaped like the reduced
        // input) or the inner axes (sink shaped like a reduction's output).
        const Red *r0 = &k->red[0];
        const Tensor *A = pg->tensors[r0->p->in[0]], *O = pg->tensors[r0->out];
        bool full = T->rank == A->rank && !memcmp(T->dims, A->dims, sizeof(int64_t) * (size_t)T->rank);
        bool small = T->rank == O->rank && !memcmp(T->dims, O->dims, sizeof(int64_t) * (size_t)T->rank);
        if (!full && !small) {
            rc = err_set(e, ST_UNSUPPORTED, "kernel %s: output shape fits no row", k->fn);
        } else {
            LoopNest *tl = ln_create("q");
            int last = -1;
            for (int d = 0; d < s->rank; d++) {
                bool want = full ? !is_outer(s, d) : (s->inner & (1u << d)) != 0;
                if (!want)
                    continue;
                char name[16];
                fmt(name, sizeof name, "i%d", d);
                last = ln_axis(tl, name, s->dims[d]);
            }
            char names[R][16], off[512], v[64];
            const char *idx[R];
            if (full) {
                for (int d = 0; d < s->rank; d++) {
                    fmt(names[d], sizeof names[d], "i%d", d);
                    idx[d] = names[d];
                }
            } else {
                red_out_idx(r0->sp.rank, r0->sp.red, r0->p->red.keepdims, names, idx);
                k->root_is_space = false;
            }
            StrBuf tb;
            sb_init(&tb);
            rc = cexpr_value(k->x, c->output, idx, &tb, 0, v, sizeof v, e);
            cexpr_forget(k->x);
            if (rc == ST_OK) {
                red_dense_offset(T, idx, off, sizeof off, &fmt_truncated);
                store_expr(T, off, v, &tb, 0);
                ln_body(tl, tb.s);
                if (last >= 0)
                    ln_vector(tl, last, NULL);
                ln_print(tl, &b, 0);
            }
            sb_free(&tb);
            ln_free(tl);
        }
    }
    ln_body(ln, b.s);
    sb_free(&b);
    if (rc == ST_OK)
        ln_print(ln, fnbody, 1);
    ln_free(ln);
    return rc;
}

void cgen_red_config_pack(const CRedConfig *t, KernelConfig *k) {
    memset(k, 0, sizeof *k);
    k->cls = CCLS_REDUCE;
    k->p[0] = t->fused;
    k->p[1] = t->par;
    snprintf(k->desc, sizeof k->desc, "cls=red mode=%s par=%d", t->fused ? "fused" : "mat",
             (int)t->par);
}

void cgen_red_config_unpack(const KernelConfig *k, CRedConfig *t) {
    t->fused = k->p[0] == 1;
    t->par = k->p[1] != 0;
}

static int red_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                    const char *fn, StrBuf *src, Err *e) {
    CRedConfig t;
    cgen_red_config_unpack(cfg, &t);
    Ctx k = {.pg = pg, .c = c, .fn = fn, .fused = t.fused};
    int rc = collect(&k, e);
    if (rc)
        return rc;
    if (k.fused && !same_space(&k))
        return err_set(e, ST_UNSUPPORTED, "kernel %s: reductions over different spaces", fn);
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    k.x = cexpr_create(pg, c, fn, &decls);
    cexpr_set_reader(k.x, reader, &k);
    fmt_truncated = false;
    rc = emit_kernel(&k, t.par, &body, e);
    if (rc == ST_OK && fmt_truncated)
        rc = err_set(e, ST_UNSUPPORTED, "kernel %s: an expression is too long", fn);
    if (rc == ST_OK) {
        const Tensor *T = pg->tensors[c->output];
        sb_puts(src, decls.s);
        sb_printf(src, "void %s(const void *const *in, void *out) {\n", fn);
        sb_line(src, 1, "%s *restrict y = (%s *)out;\n", cgen_ctype(T->dtype),
                cgen_ctype(T->dtype));
        sb_line(src, 1, "(void)in;\n");
        sb_puts(src, body.s);
        sb_puts(src, "}\n");
    }
    cexpr_free(k.x);
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

int cgen_red_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e) {
    return red_emit(pg, c, cfg, fn, src, e);
}

static bool dry_run(const PrimGraph *pg, const Candidate *c, bool fused) {
    KernelConfig cfg;
    cgen_red_config_pack(&(CRedConfig){.fused = fused, .par = true}, &cfg);
    StrBuf src;
    sb_init(&src);
    Err e = {0};
    int rc = red_emit(pg, c, &cfg, "orch_probe", &src, &e);
    sb_free(&src);
    return rc == ST_OK;
}

bool cgen_red_supports(const PrimGraph *pg, const Candidate *c) { return dry_run(pg, c, false); }

int cgen_red_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k) {
    Ctx ctx = {.pg = pg, .c = c, .fn = "orch_probe"};
    Err e = {0};
    if (collect(&ctx, &e))
        return 0;
    double bytes = cgen_traffic_bytes(pg, c), ops = cgen_ops_per_elem(pg, c);
    // Elements computed: each reduction's input, plus the output.
    double elems = (double)tensor_numel(pg->tensors[c->output]), extra = 0;
    int64_t rows = 1, inner = 1;
    for (int i = 0; i < ctx.n_red; i++) {
        const Tensor *A = pg->tensors[ctx.red[i].p->in[0]], *O = pg->tensors[ctx.red[i].out];
        elems += (double)tensor_numel(A);
        extra += (double)tensor_nbytes(O) * 2;
        rows = ORCH_MAX(tensor_numel(O) / ORCH_MAX(ctx.red[i].sp.n_inner, 1), 1);
        inner = ORCH_MAX(tensor_numel(A) / ORCH_MAX(tensor_numel(O), 1), 1);
    }
    bool fused_ok = same_space(&ctx) && dry_run(pg, c, true);
    KernelConfig cand[4];
    int n = 0;
    for (int fused = 0; fused < 2; fused++) {
        if (fused && !fused_ok)
            continue;
        for (int par = 0; par < 2; par++) {
            KernelConfig *kc = &cand[n++];
            cgen_red_config_pack(&(CRedConfig){.fused = fused, .par = par}, kc);
            // The materialised strategy re-reads the inputs of later passes from memory rather
            // than from the cache-resident row.
            double b =
                fused ? bytes : bytes * (1.0 + cpu_red_model.mat_reread * (ctx.n_red - 1)) + extra;
            kc->score = cgen_estimate(hw, b, elems, ops + 1, rows, inner, par);
            // Each materialised reduction is a loop (a parallel region) and a buffer of its own.
            if (!fused)
                kc->score +=
                    ctx.n_red * (par ? cpu_red_model.mat_loop_par_s : cpu_red_model.mat_loop_s);
        }
    }
    return cgen_sort_configs(cand, n, out, k);
}
