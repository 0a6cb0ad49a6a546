// Value expressions for the C and CUDA emitters (see cexpr.h): the value of a tensor at an index,
// emitted as statements by recursion through the candidate's ELEMWISE and LAYOUT primitives. Each
// coordinate travels either as an affine form over the root coordinates (kept through broadcast,
// transpose, slice and the reshapes that stay affine) or as a C expression held in a local
// (after tables, gathers and reshapes that split a coordinate); loads of kernel inputs combine
// both, so a loop over the root's last coordinate reads its inputs unit-stride where it can.
// Arithmetic follows prim_interp.c instruction by instruction: the float domain when any tensor
// operand is a float (float32 math in float, float16/bfloat16/float64 in double with the
// interpreter's rounding), the integer domain in int64 with wrap-around, results converted to the
// instruction's dtype as the interpreter's normalise() does.
#include "cexpr.h"

#include "../prim/index_map.h"
#include "fmt.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 64
#define EXPR_CAP 1024
#define R ORCH_MAX_RANK
#define IB_MAX 16 // padded coordinates interior splitting tracks per loop

// One coordinate: affine in the root coordinates, or a C expression (a local or a literal).
typedef struct Coord {
    bool affine;
    int64_t coef[R];
    int64_t cst;
    char expr[NAME_CAP];
} Coord;

typedef struct Ix {
    int rank;
    Coord c[R];
} Ix;

typedef struct Memo {
    int t;
    char *key;
    char var[NAME_CAP];
} Memo;

typedef struct TableName {
    const int64_t *data;
    char name[NAME_CAP];
} TableName;

struct Cexpr {
    const PrimGraph *pg;
    const Candidate *c;
    char fn[NAME_CAP];
    StrBuf *decls;
    CexprReader read;
    void *rctx;
    int next;
    int *
        prim_of; // per tensor: index into pg->prims when computed by a candidate primitive, else -1
    Memo *memo;
    int n_memo, cap_memo;
    TableName *tables;
    int n_tables, cap_tables;
    // The root of the current cexpr_value call.
    int root_rank;
    int64_t root_dims[R];
    char root_idx[R][EXPR_CAP];
    // Flat view (cexpr_set_flat): root coordinates first.. are digits of one variable.
    int flat_first;
    char flat_var[NAME_CAP];
    bool flat_broken;
    // CUDA dialect (cexpr_set_cuda), its fast transcendentals (cexpr_set_fast_math) and the
    // vector-load hook (cexpr_set_load_hook).
    bool cuda, fast_math;
    // cexpr_set_sin_guard: the flag variable (empty: off) and how many sines used it.
    char sin_guard[NAME_CAP];
    int sin_guards;
    // cexpr_set_index32: index locals and tables in 32 bits.
    bool index32;
    CexprLoadHook load_hook;
    void *hctx;
    // Interior splitting (cexpr_interior_begin): the loop's variable (empty: off), whether
    // emission takes recordable padded coordinates as in range, and those recorded.
    char ivar[NAME_CAP];
    bool interior;
    int n_ib;
    struct InteriorBound {
        char rest[EXPR_CAP]; // the padded coordinate is rest + s * ivar
        int64_t s;
        int64_t lo, hi; // in range where lo <= coordinate < hi
    } ib[IB_MAX];
    // The pinned tensor (cexpr_pin; -1 none), its local and the requests it answered.
    int pin_t;
    char pin_var[NAME_CAP];
    int pin_hits;
};

// Truncation of this file's fixed buffers (fmt.h), checked over each cexpr_value call.
static _Thread_local bool fmt_truncated;
#define fmt(buf, cap, ...) cg_fmt(&fmt_truncated, buf, cap, __VA_ARGS__)

// ---- types and literals ----

const char *cgen_ctype(DType t) {
    switch (t) {
    case DT_FLOAT: return "float";
    case DT_DOUBLE: return "double";
    case DT_FLOAT16:
    case DT_BFLOAT16: return "uint16_t";
    case DT_BOOL:
    case DT_UINT8: return "uint8_t";
    case DT_INT8: return "int8_t";
    case DT_INT16: return "int16_t";
    case DT_UINT16: return "uint16_t";
    case DT_INT32: return "int32_t";
    case DT_UINT32: return "uint32_t";
    case DT_INT64: return "int64_t";
    case DT_UINT64: return "uint64_t";
    default: ORCH_ASSERT(!"cgen_ctype: dtype without a C type");
    }
    return NULL;
}

static const char *vtype(const Cexpr *x, DType t);

const char *cgen_vtype(DType t) {
    if (t == DT_FLOAT16 || t == DT_BFLOAT16)
        return "double";
    return cgen_ctype(t);
}

void cgen_load_expr(DType t, const char *x, char *buf, size_t cap) {
    if (t == DT_FLOAT16)
        fmt(buf, cap, "(double)orch_f16_to_f32(%s)", x);
    else if (t == DT_BFLOAT16)
        fmt(buf, cap, "(double)orch_bf16_to_f32(%s)", x);
    else if (t == DT_BOOL)
        fmt(buf, cap, "(uint8_t)(%s != 0)", x);
    else
        fmt(buf, cap, "%s", x);
}

void cgen_store_expr(DType t, const char *v, char *buf, size_t cap) {
    // float16/bfloat16 values are already rounded: the conversion through float is exact.
    if (t == DT_FLOAT16)
        fmt(buf, cap, "orch_f32_to_f16((float)(%s))", v);
    else if (t == DT_BFLOAT16)
        fmt(buf, cap, "orch_f32_to_bf16((float)(%s))", v);
    else
        fmt(buf, cap, "%s", v);
}

static void float_literal(double v, bool single, char *buf, size_t cap) {
    const char *ty = single ? "float" : "double";
    if (isnan(v))
        fmt(buf, cap, "(%s)NAN", ty);
    else if (isinf(v))
        fmt(buf, cap, "(%s)(%sINFINITY)", ty, v < 0 ? "-" : "");
    else if (single)
        fmt(buf, cap, "%.9ef", v);
    else
        fmt(buf, cap, "%.17e", v);
}

static void int_literal(int64_t v, char *buf, size_t cap) {
    if (v == INT64_MIN)
        fmt(buf, cap, "(-INT64_C(9223372036854775807) - 1)");
    else
        fmt(buf, cap, "INT64_C(%lld)", (long long)v);
}

void cgen_literal(DType t, double v, char *buf, size_t cap) {
    uint64_t store = 0;
    elem_set_f64(t, &store, 0, v);
    if (dtype_is_float(t)) {
        float_literal(elem_get_f64(t, &store, 0), t == DT_FLOAT, buf, cap);
        return;
    }
    if (t == DT_UINT64) {
        fmt(buf, cap, "UINT64_C(%llu)", (unsigned long long)store);
        return;
    }
    char lit[64];
    int_literal(elem_get_i64(t, &store, 0), lit, sizeof lit);
    fmt(buf, cap, "(%s)%s", cgen_ctype(t), lit);
}

int cgen_input_pos(const Candidate *c, int t) {
    for (int j = 0; j < c->n_inputs; j++)
        if (c->inputs[j] == t)
            return j;
    return -1;
}

// ---- the emitter's state ----

Cexpr *cexpr_create(const PrimGraph *pg, const Candidate *c, const char *fn, StrBuf *decls) {
    Cexpr *x = xcalloc(1, sizeof *x);
    x->pg = pg;
    x->c = c;
    fmt(x->fn, sizeof x->fn, "%s", fn);
    x->decls = decls;
    x->flat_first = -1;
    x->pin_t = -1;
    x->prim_of = xmalloc(sizeof(int) * (size_t)(pg->n_tensors + 1));
    for (int i = 0; i < pg->n_tensors; i++)
        x->prim_of[i] = -1;
    for (int k = 0; k < c->n_prims; k++) {
        const Prim *p = pg->prims[c->prims[k]];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                x->prim_of[p->out[j]] = c->prims[k];
    }
    return x;
}

void cexpr_forget(Cexpr *x) {
    for (int i = 0; i < x->n_memo; i++)
        free(x->memo[i].key);
    x->n_memo = 0;
}

void cexpr_free(Cexpr *x) {
    if (!x)
        return;
    cexpr_forget(x);
    free(x->memo);
    free(x->tables);
    free(x->prim_of);
    free(x);
}

void cexpr_set_reader(Cexpr *x, CexprReader fn, void *ctx) {
    x->read = fn;
    x->rctx = ctx;
}

bool cexpr_is_pointwise(const Cexpr *x, int t) {
    if (cgen_input_pos(x->c, t) >= 0 || x->prim_of[t] < 0)
        return false;
    PrimKind k = x->pg->prims[x->prim_of[t]]->kind;
    return k == PRIM_ELEMWISE || k == PRIM_LAYOUT;
}

static void coord_text(const Cexpr *x, const Coord *c, char *buf, size_t cap);

void cexpr_set_flat(Cexpr *x, int first, const char *var) {
    x->flat_first = first;
    fmt(x->flat_var, sizeof x->flat_var, "%s", var ? var : "");
    x->flat_broken = false;
}

bool cexpr_flat_broken(const Cexpr *x) {
    return x->flat_broken;
}

void cexpr_set_cuda(Cexpr *x, bool cuda) {
    x->cuda = cuda;
}

void cexpr_set_index32(Cexpr *x, bool on) {
    x->index32 = on;
}

void cexpr_set_fast_math(Cexpr *x, bool fast) {
    x->fast_math = fast;
}

void cexpr_set_sin_guard(Cexpr *x, const char *flag) {
    fmt(x->sin_guard, sizeof x->sin_guard, "%s", flag ? flag : "");
}

int cexpr_sin_guards(const Cexpr *x) {
    return x->sin_guards;
}

void cexpr_set_load_hook(Cexpr *x, CexprLoadHook fn, void *ctx) {
    x->load_hook = fn;
    x->hctx = ctx;
}

void cexpr_pin(Cexpr *x, int t, const char *var) {
    x->pin_t = t < 0 ? -1 : t;
    fmt(x->pin_var, sizeof x->pin_var, "%s", t < 0 || !var ? "" : var);
}

int cexpr_pin_hits(const Cexpr *x) {
    return x->pin_hits;
}

// Whether the affine offset is `cst + flat index of the root` (every root coordinate from 0 with
// its dense stride): the load walks the input exactly as the flat variable walks the output.
static bool offset_flat_unit(const Cexpr *x, const Coord *off) {
    if (x->flat_first != 0)
        return false;
    int64_t S = 1;
    for (int q = x->root_rank - 1; q >= 0; q--) {
        if (x->root_dims[q] != 1 && off->coef[q] != S)
            return false;
        S *= x->root_dims[q];
    }
    return true;
}

// The affine offset `off` as text, using the flat variable for the flat coordinates when their
// coefficients are those of a contiguous block (coef_q = coef_last * stride_q).
static void offset_text(Cexpr *x, const Coord *off, char *buf, size_t cap) {
    int n = x->root_rank, first = x->flat_first;
    if (first < 0 || first >= n) {
        coord_text(x, off, buf, cap);
        return;
    }
    int64_t c_last = off->coef[n - 1], S = 1;
    bool contiguous = true;
    for (int q = n - 1; q >= first; q--) {
        if (x->root_dims[q] != 1 && off->coef[q] != c_last * S)
            contiguous = false;
        S *= x->root_dims[q];
    }
    if (x->root_dims[n - 1] == 1)
        contiguous = false; // no inner coefficient to scale by: keep the digits
    if (!contiguous) {
        x->flat_broken = true;
        coord_text(x, off, buf, cap);
        return;
    }
    Coord head = *off;
    for (int q = first; q < n; q++)
        head.coef[q] = 0;
    char h[EXPR_CAP];
    coord_text(x, &head, h, sizeof h);
    if (c_last == 1)
        fmt(buf, cap, "%s + %s", h, x->flat_var);
    else
        fmt(buf, cap, "%s + %s * %lld", h, x->flat_var, (long long)c_last);
}

void cexpr_fresh(Cexpr *x, const char *prefix, char *out, size_t cap) {
    fmt(out, cap, "%s%d", prefix, x->next++);
}

// Keeps the memo entries [0, mark) (values computed in an enclosing block).
static void memo_cut(Cexpr *x, int mark) {
    for (int i = mark; i < x->n_memo; i++)
        free(x->memo[i].key);
    x->n_memo = mark;
}

// The C text of coordinate d (for memo keys, offsets, readers).
static void coord_text(const Cexpr *x, const Coord *c, char *buf, size_t cap) {
    if (!c->affine) {
        fmt(buf, cap, "%s", c->expr);
        return;
    }
    StrBuf b;
    sb_init(&b);
    sb_printf(&b, "%lld", (long long)c->cst);
    for (int r = 0; r < x->root_rank; r++) {
        if (c->coef[r] == 0)
            continue;
        if (c->coef[r] == 1)
            sb_printf(&b, " + %s", x->root_idx[r]);
        else
            sb_printf(&b, " + %s * %lld", x->root_idx[r], (long long)c->coef[r]);
    }
    fmt(buf, cap, "(%s)", b.s);
    sb_free(&b);
}

static char *ix_key(const Cexpr *x, int t, const Ix *ix) {
    StrBuf b;
    sb_init(&b);
    sb_printf(&b, "%d:", t);
    char tmp[EXPR_CAP];
    for (int d = 0; d < ix->rank; d++) {
        coord_text(x, &ix->c[d], tmp, sizeof tmp);
        sb_printf(&b, "%s,", tmp);
    }
    return sb_take(&b);
}

static void coord_const(Coord *c, int64_t v) {
    memset(c, 0, sizeof *c);
    c->affine = true;
    c->cst = v;
}

// A general coordinate: the expression is assigned to a fresh local.
static void coord_general(Cexpr *x, Coord *c, const char *expr, StrBuf *code, int indent) {
    char name[NAME_CAP];
    cexpr_fresh(x, "k", name, sizeof name);
    sb_line(code, indent, "const %s %s = %s;\n", x->index32 ? "int" : "int64_t", name, expr);
    memset(c, 0, sizeof *c);
    c->affine = false;
    fmt(c->expr, sizeof c->expr, "%s", name);
}

static const char *table_name(Cexpr *x, const int64_t *data, int64_t n) {
    for (int i = 0; i < x->n_tables; i++)
        if (x->tables[i].data == data)
            return x->tables[i].name;
    if (x->n_tables == x->cap_tables) {
        x->cap_tables = x->cap_tables ? 2 * x->cap_tables : 4;
        x->tables = xrealloc(x->tables, sizeof(TableName) * (size_t)x->cap_tables);
    }
    TableName *tn = &x->tables[x->n_tables];
    tn->data = data;
    fmt(tn->name, sizeof tn->name, "%s_tab%d", x->fn, x->n_tables);
    x->n_tables++;
    sb_printf(x->decls, "%sstatic const %s %s[%lld] = {", x->cuda ? "__device__ " : "",
              x->index32 ? "int" : "int64_t", tn->name, (long long)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        sb_printf(x->decls, "%s%lld",
                  i == 0   ? "\n    "
                  : i % 16 ? ", "
                           : ",\n    ",
                  (long long)data[i]);
    sb_printf(x->decls, "%s};\n", n ? "\n" : "0");
    return tn->name;
}

// ---- index maps ----

static int64_t prod_dims(int rank, const int64_t *dims) {
    int64_t p = 1;
    for (int d = 0; d < rank; d++)
        p *= dims[d];
    return p;
}

// Value of an affine coordinate at a concrete root point.
static int64_t coord_at(const Cexpr *x, const Coord *c, const int64_t *r) {
    int64_t v = c->cst;
    for (int k = 0; k < x->root_rank; k++)
        v += c->coef[k] * r[k];
    return v;
}

// The reshape of a group of affine coordinates cur[a..b) (dims odims) into in dims idims[c..e):
// in_k = (flat / S_k) % idims[k] with flat = sum cur_d * ostride_d. Evaluated at root point r.
static int64_t group_in_at(const Cexpr *x, const Coord *cur, int a, int b, const int64_t *odims,
                           const int64_t *idims, int k, int e, const int64_t *r) {
    int64_t flat = 0;
    for (int d = a; d < b; d++)
        flat = flat * odims[d] + coord_at(x, &cur[d], r);
    int64_t S = 1;
    for (int j = k + 1; j < e; j++)
        S *= idims[j];
    return (flat / S) % idims[k];
}

// Small deterministic generator for the affinity check's sample points.
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Whether in coordinate k of a reshape group is affine over the root box; fills *out if so. The
// candidate form is read off the origin and the unit points; it is checked on every point of
// small boxes, else on every axis line through the origin and the far corner and on 4096 sample
// points (a split coordinate (f / S) % n deviates from any affine form on a large part of the box).
static bool group_affine(const Cexpr *x, const Coord *cur, int a, int b, const int64_t *odims,
                         const int64_t *idims, int k, int e, Coord *out) {
    int rr = x->root_rank;
    int64_t r[R] = {0};
    coord_const(out, group_in_at(x, cur, a, b, odims, idims, k, e, r));
    for (int q = 0; q < rr; q++) {
        if (x->root_dims[q] <= 1)
            continue;
        r[q] = 1;
        out->coef[q] = group_in_at(x, cur, a, b, odims, idims, k, e, r) - out->cst;
        r[q] = 0;
    }
    int64_t total = prod_dims(rr, x->root_dims);
    if (total <= 0)
        return true;
    if (total <= 4096) {
        for (int64_t i = 0; i < total; i++) {
            int64_t f = i;
            for (int q = rr - 1; q >= 0; q--) {
                r[q] = f % x->root_dims[q];
                f /= x->root_dims[q];
            }
            if (group_in_at(x, cur, a, b, odims, idims, k, e, r) != coord_at(x, out, r))
                return false;
        }
        return true;
    }
    for (int corner = 0; corner < 2; corner++)
        for (int q = 0; q < rr; q++) {
            for (int p = 0; p < rr; p++)
                r[p] = corner ? x->root_dims[p] - 1 : 0;
            int64_t n = ORCH_MIN(x->root_dims[q], 100000);
            for (int64_t v = 0; v < n; v++) {
                r[q] = v;
                if (group_in_at(x, cur, a, b, odims, idims, k, e, r) != coord_at(x, out, r))
                    return false;
            }
        }
    uint64_t seed = 0x1234567ull;
    for (int i = 0; i < 4096; i++) {
        for (int q = 0; q < rr; q++)
            r[q] = (int64_t)(splitmix(&seed) % (uint64_t)x->root_dims[q]);
        if (group_in_at(x, cur, a, b, odims, idims, k, e, r) != coord_at(x, out, r))
            return false;
    }
    return true;
}

// Reshape: groups of output dims and input dims with equal products map independently.
static void apply_reshape(Cexpr *x, const LayoutStage *st, Ix *ix, const int64_t *odims,
                          StrBuf *code, int indent) {
    Ix next;
    next.rank = st->in_rank;
    int a = 0, c = 0, orank = ix->rank;
    while (a < orank || c < st->in_rank) {
        // Extend [a, b) and [c, e) until the products match (unit dims join the current group).
        int b = a, e = c;
        int64_t po = 1, pi = 1;
        do {
            if (po <= pi && b < orank)
                po *= odims[b++];
            else if (e < st->in_rank)
                pi *= st->in_dims[e++];
            else
                po *= odims[b++];
        } while (po != pi || (b < orank && odims[b] == 1 && e == st->in_rank) ||
                 (e < st->in_rank && st->in_dims[e] == 1 && b == orank));
        bool all_affine = true;
        for (int d = a; d < b; d++)
            all_affine = all_affine && ix->c[d].affine;
        for (int k = c; k < e; k++) {
            Coord *o = &next.c[k];
            if (st->in_dims[k] == 1) {
                coord_const(o, 0);
                continue;
            }
            if (e - c == 1 && all_affine) { // a merge: flat of the group, exactly affine
                coord_const(o, 0);
                for (int d = a; d < b; d++) {
                    o->cst = o->cst * odims[d] + ix->c[d].cst;
                    for (int q = 0; q < R; q++)
                        o->coef[q] = o->coef[q] * odims[d] + ix->c[d].coef[q];
                }
                continue;
            }
            if (all_affine && group_affine(x, ix->c, a, b, odims, st->in_dims, k, e, o))
                continue;
            // General: flat of the group, then div/mod.
            char flat[EXPR_CAP] = "0", tmp[EXPR_CAP], t2[2 * EXPR_CAP + 64];
            for (int d = a; d < b; d++) {
                coord_text(x, &ix->c[d], tmp, sizeof tmp);
                fmt(t2, sizeof t2, "(%s) * %lld + %s", flat, (long long)odims[d], tmp);
                fmt(flat, sizeof flat, "%s", t2);
            }
            int64_t S = 1;
            for (int j = k + 1; j < e; j++)
                S *= st->in_dims[j];
            fmt(t2, sizeof t2, "((%s) / %lld) %% %lld", flat, (long long)S,
                (long long)st->in_dims[k]);
            coord_general(x, o, t2, code, indent);
        }
        a = b;
        c = e;
    }
    *ix = next;
}

// ---- loads and readers ----

static int load_input(Cexpr *x, int t, int j, const Ix *ix, StrBuf *code, int indent, char *out,
                      size_t cap) {
    const Tensor *T = x->pg->tensors[t];
    int64_t stride[R], s = 1;
    for (int d = T->rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= T->dims[d];
    }
    // Affine part folded into one form over the root; general coordinates added as terms.
    Coord off;
    coord_const(&off, 0);
    StrBuf b;
    sb_init(&b);
    for (int d = 0; d < T->rank; d++) {
        const Coord *c = &ix->c[d];
        if (T->dims[d] == 1)
            continue;
        if (c->affine) {
            off.cst += c->cst * stride[d];
            for (int q = 0; q < R; q++)
                off.coef[q] += c->coef[q] * stride[d];
        } else {
            sb_printf(&b, " + %s * %lld", c->expr, (long long)stride[d]);
        }
    }
    char aff[EXPR_CAP], elem[2 * EXPR_CAP], val[2 * EXPR_CAP + 64];
    bool hooked = x->load_hook && !b.s[0] && offset_flat_unit(x, &off) &&
                  x->load_hook(x->hctx, j, T->dtype, off.cst, elem, sizeof elem);
    if (!hooked) {
        offset_text(x, &off, aff, sizeof aff);
        if (x->cuda)
            fmt(elem, sizeof elem, "in%d[%s%s]", j, aff, b.s);
        else
            fmt(elem, sizeof elem, "((const %s *)in[%d])[%s%s]", cgen_ctype(T->dtype), j, aff, b.s);
    }
    sb_free(&b);
    cgen_load_expr(T->dtype, elem, val, sizeof val);
    cexpr_fresh(x, "v", out, cap);
    sb_line(code, indent, "const %s %s = %s;\n", vtype(x, T->dtype), out, val);
    return ST_OK;
}

static int call_reader(Cexpr *x, int t, const Ix *ix, StrBuf *code, int indent, char *out,
                       size_t cap, Err *e) {
    if (!x->read)
        return err_set(e, ST_UNSUPPORTED,
                       "kernel %s: tensor '%s' is computed by a %s primitive "
                       "and no reader was given",
                       x->fn, x->pg->tensors[t]->name,
                       prim_kind_name(x->pg->prims[x->prim_of[t]]->kind));
    char bufs[R][EXPR_CAP];
    const char *idx[R];
    int64_t coef[R][R], cst[R];
    bool affine = true;
    for (int d = 0; d < ix->rank; d++) {
        coord_text(x, &ix->c[d], bufs[d], sizeof bufs[d]);
        idx[d] = bufs[d];
        affine = affine && ix->c[d].affine;
        memcpy(coef[d], ix->c[d].coef, sizeof coef[d]);
        cst[d] = ix->c[d].cst;
    }
    CexprRead rq = {t, ix->rank, idx, affine, (const int64_t(*)[R])coef, cst};
    return x->read(x->rctx, &rq, code, indent, out, cap, e);
}

// ---- elementwise programs ----

typedef struct Operand {
    char text[EXPR_CAP];
    DType dtype; // DT_UNDEFINED for an immediate
    double imm;
} Operand;

// Half values are computed in double and rounded after every instruction (exactly the
// interpreter's values), except in CUDA code under fast math (a reduced-precision compile: half
// storage), where float carries them: the same roundings but for the rare double rounding of a
// transcendental, at float speed on the GPU (double is a fraction of it).
static bool half_in_float(const Cexpr *x) {
    return x->cuda && x->fast_math;
}

static bool is_wide(const Cexpr *x, DType t) {
    return t == DT_DOUBLE || ((t == DT_FLOAT16 || t == DT_BFLOAT16) && !half_in_float(x));
}

// The C type of locals holding dtype t's values (cgen_vtype, but float for half in float).
static const char *vtype(const Cexpr *x, DType t) {
    return (t == DT_FLOAT16 || t == DT_BFLOAT16) && half_in_float(x) ? "float" : cgen_vtype(t);
}

const char *cexpr_vtype(const Cexpr *x, DType t) {
    return vtype(x, t);
}

// Under cexpr_set_fast_math (CUDA, float domain): the prelude's versions built on the special
// function unit's approximations (orch_fast_*f, prelude_cuda.c), for the transcendentals whose
// libm versions dominate cheap epilogues; false for every other op (float_op answers).
static bool fast_float_op(EwOp op, const char *a, char *buf, size_t cap) {
    switch (op) {
    case EW_EXP: fmt(buf, cap, "orch_fast_expf(%s)", a); return true;
    case EW_SIN: fmt(buf, cap, "orch_fast_sinf(%s)", a); return true;
    case EW_COS: fmt(buf, cap, "orch_fast_cosf(%s)", a); return true;
    case EW_SIGMOID: fmt(buf, cap, "orch_fast_sigmoidf(%s)", a); return true;
    default: return false;
    }
}

// Whether b is a numeric literal (as cexpr writes constants: "3.000000000e+00f") equal to 2, 3
// or 4: a power by such an exponent is emitted as products. powf is a library call that keeps
// the loop around it scalar (GPT-2's tanh GELU computes x^3 so, 64 x 3072 calls a layer), while
// the products vectorise; they differ from powf by float rounding only.
static int small_int_exponent(const char *b) {
    char *end = NULL;
    double v = strtod(b, &end);
    if (end == b)
        return 0;
    if (*end == 'f')
        end++;
    if (*end || !(v == 2.0 || v == 3.0 || v == 4.0))
        return 0;
    return (int)v;
}

// A numeric literal operand's value (e.g. "6.000000000e+00f"); false for anything else.
static bool literal_value(const char *b, double *v) {
    char *end = NULL;
    *v = strtod(b, &end);
    if (end == b)
        return false;
    if (*end == 'f')
        end++;
    return !*end && *v == *v;
}

// min / max with a literal (ReLU6's clamps, a Clip's bounds) as one compare and select, which
// vectorises, instead of the general rule's NaN and signed-zero tests. NaN in a still comes out
// (the compare is false), and equal zeros keep the general rule: min takes -0, max +0, which
// needs the NaN test back only when the literal is the zero a tie must not return.
static bool minmax_literal(bool is_max, const char *a, const char *b, char *buf, size_t cap) {
    double v;
    if (!literal_value(b, &v)) {
        if (!literal_value(a, &v))
            return false;
        const char *t = a;
        a = b;
        b = t;
    }
    bool tie_to_literal = v == 0 && (is_max ? !signbit(v) : signbit(v));
    if (tie_to_literal)
        fmt(buf, cap, "(%s %s %s ? %s : (%s != %s ? %s : %s))", a, is_max ? ">" : "<", b, a, a,
            a, a, b);
    else
        fmt(buf, cap, "(%s %s %s ? %s : %s)", a, is_max ? "<" : ">", b, b, a);
    return true;
}

// The float-domain expression of op over operands already in the domain type.
static bool float_op(EwOp op, bool s, const char *a, const char *b, const char *c, char *buf,
                     size_t cap) {
    const char *f = s ? "f" : "";
    const char *one = s ? "1.0f" : "1.0", *zero = s ? "0.0f" : "0.0";
    const char *ty = s ? "float" : "double";
    switch (op) {
    case EW_COPY:
    case EW_CAST: fmt(buf, cap, "%s", a); break;
    case EW_NEG: fmt(buf, cap, "(-%s)", a); break;
    case EW_ABS: fmt(buf, cap, "fabs%s(%s)", f, a); break;
    case EW_EXP: fmt(buf, cap, s ? "orch_expf(%s)" : "exp(%s)", a); break;
    case EW_LOG: fmt(buf, cap, "log%s(%s)", f, a); break;
    case EW_SQRT: fmt(buf, cap, "sqrt%s(%s)", f, a); break;
    case EW_RSQRT: fmt(buf, cap, "(%s / sqrt%s(%s))", one, f, a); break;
    case EW_RECIP: fmt(buf, cap, "(%s / %s)", one, a); break;
    case EW_ERF: fmt(buf, cap, s ? "orch_erff(%s)" : "erf(%s)", a); break;
    case EW_TANH: fmt(buf, cap, s ? "orch_tanhf(%s)" : "tanh(%s)", a); break;
    case EW_SIGMOID: fmt(buf, cap, "orch_sigmoid%s(%s)", f, a); break;
    case EW_RELU:
        fmt(buf, cap, "(%s > %s ? %s : (%s != %s ? %s : %s))", a, zero, a, a, a, a, zero);
        break;
    case EW_FLOOR: fmt(buf, cap, "floor%s(%s)", f, a); break;
    case EW_CEIL: fmt(buf, cap, "ceil%s(%s)", f, a); break;
    case EW_ROUND: fmt(buf, cap, "rint%s(%s)", f, a); break;
    case EW_SIGN:
        fmt(buf, cap, "(%s > %s ? %s : %s < %s ? -%s : %s)", a, zero, one, a, zero, one, a);
        break;
    case EW_SIN: fmt(buf, cap, "sin%s(%s)", f, a); break;
    case EW_COS: fmt(buf, cap, "cos%s(%s)", f, a); break;
    case EW_TAN: fmt(buf, cap, "tan%s(%s)", f, a); break;
    case EW_ASIN: fmt(buf, cap, "asin%s(%s)", f, a); break;
    case EW_ACOS: fmt(buf, cap, "acos%s(%s)", f, a); break;
    case EW_ATAN: fmt(buf, cap, "atan%s(%s)", f, a); break;
    case EW_SINH: fmt(buf, cap, "sinh%s(%s)", f, a); break;
    case EW_COSH: fmt(buf, cap, "cosh%s(%s)", f, a); break;
    case EW_ASINH: fmt(buf, cap, "asinh%s(%s)", f, a); break;
    case EW_ACOSH: fmt(buf, cap, "acosh%s(%s)", f, a); break;
    case EW_ATANH: fmt(buf, cap, "atanh%s(%s)", f, a); break;
    case EW_SOFTPLUS: fmt(buf, cap, "orch_softplus%s(%s)", f, a); break;
    case EW_NOT: fmt(buf, cap, "(%s)(%s == %s)", ty, a, zero); break;
    case EW_ISNAN: fmt(buf, cap, "(%s)(%s != %s)", ty, a, a); break;
    case EW_ISINF: fmt(buf, cap, "(%s)(fabs%s(%s) == (%s)INFINITY)", ty, f, a, ty); break;
    case EW_ISPOSINF: fmt(buf, cap, "(%s)(%s == (%s)INFINITY)", ty, a, ty); break;
    case EW_ISNEGINF: fmt(buf, cap, "(%s)(%s == -(%s)INFINITY)", ty, a, ty); break;
    case EW_ADD: fmt(buf, cap, "(%s + %s)", a, b); break;
    case EW_SUB: fmt(buf, cap, "(%s - %s)", a, b); break;
    case EW_MUL: fmt(buf, cap, "(%s * %s)", a, b); break;
    case EW_DIV: fmt(buf, cap, "(%s / %s)", a, b); break;
    case EW_POW:
        switch (small_int_exponent(b)) {
        case 2: fmt(buf, cap, "((%s) * (%s))", a, a); break;
        case 3: fmt(buf, cap, "((%s) * (%s) * (%s))", a, a, a); break;
        case 4: fmt(buf, cap, "(((%s) * (%s)) * ((%s) * (%s)))", a, a, a, a); break;
        default: fmt(buf, cap, "pow%s(%s, %s)", f, a, b); break;
        }
        break;
    case EW_MIN:
        if (!minmax_literal(false, a, b, buf, cap))
            fmt(buf, cap, "orch_fmin%s(%s, %s)", f, a, b);
        break;
    case EW_MAX:
        if (!minmax_literal(true, a, b, buf, cap))
            fmt(buf, cap, "orch_fmax%s(%s, %s)", f, a, b);
        break;
    case EW_MOD:
    case EW_FMOD: fmt(buf, cap, "fmod%s(%s, %s)", f, a, b); break;
    case EW_EQ: fmt(buf, cap, "(%s)(%s == %s)", ty, a, b); break;
    case EW_LT: fmt(buf, cap, "(%s)(%s < %s)", ty, a, b); break;
    case EW_LE: fmt(buf, cap, "(%s)(%s <= %s)", ty, a, b); break;
    case EW_GT: fmt(buf, cap, "(%s)(%s > %s)", ty, a, b); break;
    case EW_GE: fmt(buf, cap, "(%s)(%s >= %s)", ty, a, b); break;
    case EW_AND: fmt(buf, cap, "(%s)((%s != %s) & (%s != %s))", ty, a, zero, b, zero); break;
    case EW_OR: fmt(buf, cap, "(%s)((%s != %s) | (%s != %s))", ty, a, zero, b, zero); break;
    case EW_XOR: fmt(buf, cap, "(%s)((%s != %s) ^ (%s != %s))", ty, a, zero, b, zero); break;
    case EW_WHERE: fmt(buf, cap, "(%s != %s ? %s : %s)", a, zero, b, c); break;
    default: return false;
    }
    return true;
}

static bool int_op(EwOp op, const char *a, const char *b, const char *c, char *buf, size_t cap) {
    switch (op) {
    case EW_COPY:
    case EW_CAST: fmt(buf, cap, "%s", a); break;
    case EW_NEG: fmt(buf, cap, "(int64_t)(0 - (uint64_t)%s)", a); break;
    case EW_ABS: fmt(buf, cap, "(%s < 0 ? (int64_t)(0 - (uint64_t)%s) : %s)", a, a, a); break;
    case EW_RELU: fmt(buf, cap, "(%s > 0 ? %s : 0)", a, a); break;
    case EW_SIGN: fmt(buf, cap, "(int64_t)((%s > 0) - (%s < 0))", a, a); break;
    case EW_NOT: fmt(buf, cap, "(int64_t)(%s == 0)", a); break;
    case EW_ADD: fmt(buf, cap, "(int64_t)((uint64_t)%s + (uint64_t)%s)", a, b); break;
    case EW_SUB: fmt(buf, cap, "(int64_t)((uint64_t)%s - (uint64_t)%s)", a, b); break;
    case EW_MUL: fmt(buf, cap, "(int64_t)((uint64_t)%s * (uint64_t)%s)", a, b); break;
    case EW_DIV: fmt(buf, cap, "orch_idiv(%s, %s)", a, b); break;
    case EW_MOD: fmt(buf, cap, "orch_imod(%s, %s)", a, b); break;
    case EW_FMOD: fmt(buf, cap, "orch_ifmod(%s, %s)", a, b); break;
    case EW_POW: fmt(buf, cap, "orch_ipow(%s, %s)", a, b); break;
    case EW_MIN: fmt(buf, cap, "(%s < %s ? %s : %s)", a, b, a, b); break;
    case EW_MAX: fmt(buf, cap, "(%s > %s ? %s : %s)", a, b, a, b); break;
    case EW_EQ: fmt(buf, cap, "(int64_t)(%s == %s)", a, b); break;
    case EW_LT: fmt(buf, cap, "(int64_t)(%s < %s)", a, b); break;
    case EW_LE: fmt(buf, cap, "(int64_t)(%s <= %s)", a, b); break;
    case EW_GT: fmt(buf, cap, "(int64_t)(%s > %s)", a, b); break;
    case EW_GE: fmt(buf, cap, "(int64_t)(%s >= %s)", a, b); break;
    case EW_AND: fmt(buf, cap, "(int64_t)((%s != 0) & (%s != 0))", a, b); break;
    case EW_OR: fmt(buf, cap, "(int64_t)((%s != 0) | (%s != 0))", a, b); break;
    case EW_XOR: fmt(buf, cap, "(int64_t)((%s != 0) ^ (%s != 0))", a, b); break;
    case EW_BITSHL: fmt(buf, cap, "orch_shl(%s, %s)", a, b); break;
    case EW_BITSHR: fmt(buf, cap, "orch_shr(%s, %s)", a, b); break;
    case EW_WHERE: fmt(buf, cap, "(%s ? %s : %s)", a, b, c); break;
    default: return false;
    }
    return true;
}

// A float-domain result of type ft ("float"/"double") converted to dtype t, as normalise() with
// from_float: rounding for floats, saturation for integers.
static void from_float(DType t, bool cast, const char *ft, const char *r, char *buf, size_t cap) {
    switch (t) {
    case DT_FLOAT: fmt(buf, cap, "(float)(%s)", r); return;
    case DT_DOUBLE: fmt(buf, cap, "(double)(%s)", r); return;
    case DT_FLOAT16: fmt(buf, cap, "orch_round_f16((double)(%s))", r); return;
    case DT_BFLOAT16: fmt(buf, cap, "orch_round_bf16((double)(%s))", r); return;
    default: break;
    }
    if (!cast) { // comparisons and logic: 0/1 (r.i = (int64_t)r.f, then wrapped to t)
        fmt(buf, cap, "(%s)(%s != (%s)0)", cgen_ctype(t), r, ft);
        return;
    }
    switch (t) {
    case DT_BOOL: fmt(buf, cap, "(uint8_t)(%s != (%s)0)", r, ft); return;
    case DT_INT8: fmt(buf, cap, "(int8_t)orch_sat((double)(%s), -128.0, 127.0)", r); return;
    case DT_UINT8: fmt(buf, cap, "(uint8_t)orch_sat((double)(%s), 0.0, 255.0)", r); return;
    case DT_INT16: fmt(buf, cap, "(int16_t)orch_sat((double)(%s), -32768.0, 32767.0)", r); return;
    case DT_UINT16: fmt(buf, cap, "(uint16_t)orch_sat((double)(%s), 0.0, 65535.0)", r); return;
    case DT_INT32:
        fmt(buf, cap, "(int32_t)orch_sat((double)(%s), -2147483648.0, 2147483647.0)", r);
        return;
    case DT_UINT32: fmt(buf, cap, "(uint32_t)orch_sat((double)(%s), 0.0, 4294967295.0)", r); return;
    case DT_INT64:
        fmt(buf, cap, "orch_sat((double)(%s), -9.2233720368547758e18, 9.2233720368547748e18)", r);
        return;
    case DT_UINT64: fmt(buf, cap, "orch_sat_u64((double)(%s))", r); return;
    default: ORCH_ASSERT(!"from_float: dtype");
    }
}

// An int64-domain result converted to dtype t (normalise() with from_int).
static void from_int(DType t, const char *r, char *buf, size_t cap) {
    switch (t) {
    case DT_FLOAT: fmt(buf, cap, "(float)(%s)", r); return;
    case DT_DOUBLE: fmt(buf, cap, "(double)(%s)", r); return;
    case DT_FLOAT16: fmt(buf, cap, "orch_round_f16((double)(%s))", r); return;
    case DT_BFLOAT16: fmt(buf, cap, "orch_round_bf16((double)(%s))", r); return;
    case DT_BOOL: fmt(buf, cap, "(uint8_t)(%s != 0)", r); return;
    default: fmt(buf, cap, "(%s)(%s)", cgen_ctype(t), r); return;
    }
}

static int emit_elemwise(Cexpr *x, const Prim *p, const Ix *ix, StrBuf *code, int indent, char *out,
                         size_t cap, Err *e);
static int value(Cexpr *x, int t, const Ix *ix, StrBuf *code, int indent, char *out, size_t cap,
                 Err *e);

static int emit_elemwise(Cexpr *x, const Prim *p, const Ix *ix, StrBuf *code, int indent, char *out,
                         size_t cap, Err *e) {
    const PrimGraph *pg = x->pg;
    const Tensor *T = pg->tensors[p->out[0]];
    int n_in = p->n_in;
    char(*inv)[NAME_CAP] = xcalloc((size_t)n_in + 1, NAME_CAP);
    char(*ins)[NAME_CAP] = xcalloc((size_t)p->ew.n + 1, NAME_CAP);
    int rc = ST_OK;
    // Operands are broadcast numpy-style: trailing coordinates, unit dims read index 0.
    for (int j = 0; j < n_in && rc == ST_OK; j++) {
        const Tensor *A = pg->tensors[p->in[j]];
        Ix sub;
        sub.rank = A->rank;
        for (int d = 0; d < A->rank; d++) {
            int od = T->rank - A->rank + d;
            if (A->dims[d] == 1)
                coord_const(&sub.c[d], 0);
            else
                sub.c[d] = ix->c[od];
        }
        rc = value(x, p->in[j], &sub, code, indent, inv[j], NAME_CAP, e);
    }
    for (int i = 0; i < p->ew.n && rc == ST_OK; i++) {
        const EwInstr *in = &p->ew.code[i];
        int n = ew_op_arity(in->op), first = in->op == EW_WHERE ? 1 : 0;
        Operand op[3];
        bool any_tensor = false, fdom = false, wide = is_wide(x, in->dtype);
        for (int a = 0; a < n; a++) {
            const EwArg *g = &in->arg[a];
            memset(&op[a], 0, sizeof op[a]);
            if (g->src == EWS_INPUT) {
                op[a].dtype = pg->tensors[p->in[g->index]]->dtype;
                fmt(op[a].text, sizeof op[a].text, "%s", inv[g->index]);
            } else if (g->src == EWS_INSTR) {
                op[a].dtype = p->ew.code[g->index].dtype;
                fmt(op[a].text, sizeof op[a].text, "%s", ins[g->index]);
            } else {
                op[a].imm = g->imm;
            }
            if (a >= first && g->src != EWS_IMM) {
                any_tensor = true;
                fdom = fdom || dtype_is_float(op[a].dtype);
            }
            if (op[a].dtype != DT_UNDEFINED)
                wide = wide || is_wide(x, op[a].dtype);
        }
        if (!any_tensor)
            fdom = dtype_is_float(in->dtype);
        const char *ft = wide ? "double" : "float";
        char conv[3][EXPR_CAP], expr[4 * EXPR_CAP], res[4 * EXPR_CAP + 128];
        for (int a = 0; a < n; a++) {
            if (op[a].dtype == DT_UNDEFINED) { // an immediate in the operation's domain
                double v = op[a].imm;
                if (fdom)
                    float_literal(v, !wide, conv[a], sizeof conv[a]);
                else
                    int_literal(isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0, conv[a],
                                sizeof conv[a]);
            } else if (a == 0 && in->op == EW_WHERE && !dtype_is_float(op[a].dtype)) {
                // The condition keeps its own type: only its truth is used.
                fmt(conv[a], sizeof conv[a], "(%s != 0)", op[a].text);
            } else if (fdom) {
                fmt(conv[a], sizeof conv[a], "(%s)%s", ft, op[a].text);
            } else {
                fmt(conv[a], sizeof conv[a], "(int64_t)%s", op[a].text);
            }
        }
        if (in->op == EW_WHERE && op[0].dtype != DT_UNDEFINED && !dtype_is_float(op[0].dtype))
            fmt(expr, sizeof expr, "(%s ? %s : %s)", conv[0], conv[1], conv[2]);
        else if (fdom && !wide && x->cuda && x->fast_math &&
                 fast_float_op(in->op, conv[0], expr, sizeof expr))
            ; // the CUDA prelude's hardware-approximation version (cexpr_set_fast_math)
        else if (fdom && !wide && in->op == EW_SIN && x->sin_guard[0]) {
            // Its common path alone, raising the caller's flag where |x| needs the slow one
            // (CUDA: a bool by reference; C: an int by pointer).
            fmt(expr, sizeof expr,
                x->cuda ? "orch_sinf_guarded(%s, %s)" : "orch_sinf_guarded(%s, &%s)", conv[0],
                x->sin_guard);
            x->sin_guards++;
        } else if (fdom && !wide && in->op == EW_COS && x->sin_guard[0]) {
            // The same for cos.
            fmt(expr, sizeof expr,
                x->cuda ? "orch_cosf_guarded(%s, %s)" : "orch_cosf_guarded(%s, &%s)", conv[0],
                x->sin_guard);
            x->sin_guards++;
        } else if (fdom && !wide && x->cuda && (in->op == EW_SIN || in->op == EW_COS))
            // The CUDA prelude's float sin / cos (libm accuracy, the common path without a
            // branch).
            fmt(expr, sizeof expr, in->op == EW_SIN ? "orch_sinf(%s)" : "orch_cosf(%s)",
                conv[0]);
        else if (fdom ? !float_op(in->op, !wide, conv[0], conv[1], conv[2], expr, sizeof expr)
                      : !int_op(in->op, conv[0], conv[1], conv[2], expr, sizeof expr))
            rc = err_set(e, ST_UNSUPPORTED, "kernel %s: %s has no %s definition (primitive %d)",
                         x->fn, ew_op_name(in->op), fdom ? "float" : "integer", p->id);
        if (rc)
            break;
        if (fdom && half_in_float(x) && (in->dtype == DT_FLOAT16 || in->dtype == DT_BFLOAT16))
            fmt(res, sizeof res, "orch_round_%sf((float)(%s))",
                in->dtype == DT_FLOAT16 ? "f16" : "bf16", expr);
        else if (fdom)
            from_float(in->dtype, in->op == EW_CAST, ft, expr, res, sizeof res);
        else
            from_int(in->dtype, expr, res, sizeof res);
        cexpr_fresh(x, "v", ins[i], NAME_CAP);
        sb_line(code, indent, "const %s %s = %s;\n", vtype(x, in->dtype), ins[i], res);
    }
    if (rc == ST_OK) {
        // The output dtype is the last instruction's (pb_ew_program); a program of zero
        // instructions does not exist.
        ORCH_ASSERT(p->ew.n > 0 && p->ew.code[p->ew.n - 1].dtype == T->dtype);
        fmt(out, cap, "%s", ins[p->ew.n - 1]);
    }
    free(inv);
    free(ins);
    return rc;
}

// ---- layout ----

// A table i -> a * i + b on one contiguous run [lo, hi) and -1 elsewhere (a pad, a strided or
// shifted copy): recognised so the stage stays index arithmetic (affine coordinates keep their
// loads vectorisable) rather than a lookup per element.
typedef struct AffineTable {
    int64_t a, b, lo, hi;
} AffineTable;

static bool affine_table(const int64_t *t, int64_t n, AffineTable *f) {
    int64_t lo = 0;
    while (lo < n && t[lo] < 0)
        lo++;
    int64_t hi = lo;
    while (hi < n && t[hi] >= 0)
        hi++;
    for (int64_t i = hi; i < n; i++)
        if (t[i] >= 0)
            return false;
    if (lo == hi)
        return false;
    int64_t a = hi - lo > 1 ? t[lo + 1] - t[lo] : 1, b = t[lo] - a * lo;
    for (int64_t i = lo; i < hi; i++)
        if (t[i] != a * i + b)
            return false;
    *f = (AffineTable){a, b, lo, hi};
    return true;
}

// Gather indices idx over the index dims: c0 + sum_d a[d] * j_d for every multi-index j.
static bool affine_gather(const int64_t *idx, int q, const int64_t *dims, int64_t *a, int64_t *c0) {
    int64_t n = 1, st[R];
    for (int d = q - 1; d >= 0; d--) {
        st[d] = n;
        n *= dims[d];
    }
    if (n == 0)
        return false;
    *c0 = idx[0];
    for (int d = 0; d < q; d++)
        a[d] = dims[d] > 1 ? idx[st[d]] - idx[0] : 0;
    for (int64_t f = 0; f < n; f++) {
        int64_t v = *c0, r = f;
        for (int d = 0; d < q; d++) {
            v += a[d] * (r / st[d]);
            r %= st[d];
        }
        if (idx[f] != v)
            return false;
    }
    return true;
}

// next = a * c + b, affine when c is.
static void coord_scale_shift(Cexpr *x, const Coord *c, int64_t a, int64_t b, Coord *next,
                              StrBuf *code, int indent) {
    if (c->affine) {
        *next = *c;
        next->cst = a * c->cst + b;
        for (int r = 0; r < R; r++)
            next->coef[r] = a * c->coef[r];
        return;
    }
    char t[EXPR_CAP];
    fmt(t, sizeof t, "%s * %lld + %lld", c->expr, (long long)a, (long long)b);
    coord_general(x, next, t, code, indent);
}

// ---- interior splitting (cexpr.h) ----

void cexpr_interior_begin(Cexpr *x, const char *var) {
    fmt(x->ivar, sizeof x->ivar, "%s", var);
    x->interior = false;
    x->n_ib = 0;
}

void cexpr_interior_mode(Cexpr *x, bool on) {
    x->interior = on;
}

void cexpr_interior_end(Cexpr *x) {
    x->ivar[0] = '\0';
    x->interior = false;
    x->n_ib = 0;
}

// Whether identifier `id` occurs in C expression `s`.
static bool mentions(const char *s, const char *id) {
    size_t n = strlen(id);
    for (const char *p = strstr(s, id); p; p = strstr(p + 1, id)) {
        bool left = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool right = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (left && right)
            return true;
    }
    return false;
}

// Records padded coordinate c (in range where lo <= c < hi), affine in the current root, as
// rest + s * ivar: s from the root coordinate that is exactly the loop variable, rest from the
// others, which must not depend on it. Past IB_MAX distinct ones, or with a coordinate that
// cannot be written so, the list is marked unusable (n_ib = IB_MAX + 1).
static void interior_record(Cexpr *x, const Coord *c, int64_t lo, int64_t hi) {
    if (x->n_ib > IB_MAX)
        return;
    Coord rest = *c;
    int64_t s = 0;
    for (int r = 0; r < x->root_rank; r++) {
        if (c->coef[r] == 0)
            continue;
        if (strcmp(x->root_idx[r], x->ivar) == 0) {
            s += c->coef[r];
            rest.coef[r] = 0;
        } else if (mentions(x->root_idx[r], x->ivar)) {
            x->n_ib = IB_MAX + 1;
            return;
        }
    }
    char rt[EXPR_CAP];
    coord_text(x, &rest, rt, sizeof rt);
    for (int i = 0; i < x->n_ib; i++) {
        const struct InteriorBound *b = &x->ib[i];
        if (b->lo == lo && b->hi == hi && b->s == s && strcmp(b->rest, rt) == 0)
            return;
    }
    if (x->n_ib == IB_MAX) {
        x->n_ib = IB_MAX + 1;
        return;
    }
    struct InteriorBound *b = &x->ib[x->n_ib++];
    fmt(b->rest, sizeof b->rest, "%s", rt);
    b->s = s;
    b->lo = lo;
    b->hi = hi;
}

bool cexpr_interior_bounds(Cexpr *x, int64_t n, StrBuf *code, int indent, const char *lo,
                           const char *hi) {
    if (!x->ivar[0] || x->n_ib == 0 || x->n_ib > IB_MAX)
        return false;
    // For c = rest + s * v: lo <= c < hi. With s > 0: v >= ceil((lo - rest) / s) and
    // v < ceil((hi - rest) / s); with s < 0 the same for -v; with s = 0 all or nothing.
    sb_line(code, indent, "int64_t %s = 0, %s = %lld;\n", lo, hi, (long long)n);
    for (int i = 0; i < x->n_ib; i++) {
        const struct InteriorBound *b = &x->ib[i];
        const char *rt = b->rest;
        int64_t s = b->s;
        if (s == 0) {
            sb_line(code, indent, "if (!(%s >= %lld && %s < %lld)) %s = %s;\n", rt,
                    (long long)b->lo, rt, (long long)b->hi, hi, lo);
            continue;
        }
        long long as = (long long)(s > 0 ? s : -s);
        if (s > 0) {
            sb_line(code, indent, "{ const int64_t a_ = %lld - %s, b_ = %lld - %s;\n",
                    (long long)b->lo, rt, (long long)b->hi, rt);
        } else { // v * as <= rest - lo and v * as > rest - hi
            sb_line(code, indent, "{ const int64_t a_ = %s - %lld + 1, b_ = %s - %lld + 1;\n", rt,
                    (long long)b->hi, rt, (long long)b->lo);
        }
        // ceil(a_ / as) for any sign of a_.
        sb_line(code, indent + 1,
                "const int64_t l_ = a_ >= 0 ? (a_ + %lld) / %lld : -(-a_ / %lld), h_ = b_ >= 0 ? "
                "(b_ + %lld) / %lld : -(-b_ / %lld);\n",
                as - 1, as, as, as - 1, as, as);
        sb_line(code, indent + 1, "if (l_ > %s) %s = l_;\n", lo, lo);
        sb_line(code, indent + 1, "if (h_ < %s) %s = h_; }\n", hi, hi);
    }
    sb_line(code, indent, "if (%s > %lld) %s = %lld;\n", lo, (long long)n, lo, (long long)n);
    sb_line(code, indent, "if (%s < %s) %s = %s;\n", hi, lo, hi, lo);
    return true;
}

// Applies stages s.. of the chain to ix and reads the input; `res` (declared by the caller) gets
// the value. Pad tables open an if-block so later stages never index with -1.
static int emit_chain(Cexpr *x, const Prim *p, int s, Ix ix, const int64_t *dims_in, int rank_in,
                      const char *res, const char *pad, StrBuf *code, int indent, Err *e) {
    const LayoutParams *L = &p->lay;
    int rank = rank_in;
    int64_t dims[R];
    memcpy(dims, dims_in, sizeof(int64_t) * (size_t)rank);
    for (; s < L->n_stages; s++) {
        const LayoutStage *st = &L->stages[s];
        Ix next;
        next.rank = st->in_rank;
        switch (st->kind) {
        case LS_TRANSPOSE:
            for (int d = 0; d < rank; d++)
                next.c[st->perm[d]] = ix.c[d];
            break;
        case LS_RESHAPE:
            next = ix;
            apply_reshape(x, st, &next, dims, code, indent);
            break;
        case LS_SLICE:
            for (int d = 0; d < rank; d++) {
                Coord *c = &next.c[d];
                *c = ix.c[d];
                if (c->affine) {
                    c->cst = st->start[d] + c->cst * st->step[d];
                    for (int q = 0; q < R; q++)
                        c->coef[q] *= st->step[d];
                } else if (st->start[d] != 0 || st->step[d] != 1) {
                    char t[EXPR_CAP];
                    fmt(t, sizeof t, "%lld + %s * %lld", (long long)st->start[d], c->expr,
                        (long long)st->step[d]);
                    coord_general(x, c, t, code, indent);
                }
            }
            break;
        case LS_BROADCAST:
            for (int d = 0; d < st->in_rank; d++) {
                if (st->in_dims[d] == 1)
                    coord_const(&next.c[d], 0);
                else
                    next.c[d] = ix.c[rank - st->in_rank + d];
            }
            break;
        case LS_TABLE: {
            char cond[2 * EXPR_CAP] = "";
            // Branch-free padding (C dialect): where every padded axis's table is affine and the
            // chain ends in a load of a kernel input, the coordinates are clamped into the valid
            // run, the load is unconditional (a gather the compiler vectorises) and the pad is
            // selected afterwards; an if-block per element would keep the loop scalar (ResNet's
            // 3x3 max pool). A computed source could divide by zero off its range, so it keeps
            // the if-block.
            bool branch_free = !x->cuda && cgen_input_pos(x->c, p->in[0]) >= 0;
            for (int d = 0; d < rank && branch_free; d++) {
                AffineTable f;
                bool pd = false;
                for (int64_t i = 0; st->table[d] && i < dims[d]; i++)
                    pd = pd || st->table[d][i] < 0;
                branch_free = !pd || affine_table(st->table[d], dims[d], &f);
            }
            for (int d = 0; d < rank; d++) {
                if (!st->table[d]) {
                    next.c[d] = ix.c[d];
                    continue;
                }
                bool padded = false;
                for (int64_t i = 0; i < dims[d]; i++)
                    padded = padded || st->table[d][i] < 0;
                char t[2 * EXPR_CAP], ce[EXPR_CAP];
                coord_text(x, &ix.c[d], ce, sizeof ce);
                AffineTable f;
                if (affine_table(st->table[d], dims[d], &f)) {
                    // Interior splitting: a coordinate of this kind is recorded (and, in
                    // interior mode, taken as in range: the loop runs only where it is).
                    bool tracked =
                        padded && branch_free && x->ivar[0] && x->flat_first < 0 && ix.c[d].affine;
                    if (tracked && !x->interior)
                        interior_record(x, &ix.c[d], f.lo, f.hi);
                    if (tracked && x->interior) {
                        coord_scale_shift(x, &ix.c[d], f.a, f.b, &next.c[d], code, indent);
                        continue;
                    }
                    // In range where lo <= c < hi (bounds the table's length already implies
                    // are left out); the coordinate stays arithmetic.
                    if (padded) {
                        size_t len = strlen(cond);
                        if (f.lo > 0 && f.hi < dims[d])
                            fmt(cond + len, sizeof cond - len, "%s%s >= %lld && %s < %lld",
                                len ? " && " : "", ce, (long long)f.lo, ce, (long long)f.hi);
                        else if (f.lo > 0)
                            fmt(cond + len, sizeof cond - len, "%s%s >= %lld", len ? " && " : "",
                                ce, (long long)f.lo);
                        else
                            fmt(cond + len, sizeof cond - len, "%s%s < %lld", len ? " && " : "", ce,
                                (long long)f.hi);
                    }
                    if (padded && branch_free) {
                        char cl[2 * EXPR_CAP];
                        fmt(cl, sizeof cl,
                            "(%s < %lld ? %lld : %s > %lld ? %lld : %s) * %lld + %lld", ce,
                            (long long)f.lo, (long long)f.lo, ce, (long long)(f.hi - 1),
                            (long long)(f.hi - 1), ce, (long long)f.a, (long long)f.b);
                        coord_general(x, &next.c[d], cl, code, indent);
                    } else {
                        coord_scale_shift(x, &ix.c[d], f.a, f.b, &next.c[d], code, indent);
                    }
                    continue;
                }
                fmt(t, sizeof t, "%s[%s]", table_name(x, st->table[d], dims[d]), ce);
                coord_general(x, &next.c[d], t, code, indent);
                if (padded) {
                    size_t len = strlen(cond);
                    fmt(cond + len, sizeof cond - len, "%s%s >= 0", len ? " && " : "",
                        next.c[d].expr);
                }
            }
            if (cond[0] && branch_free) {
                int rc = emit_chain(x, p, s + 1, next, st->in_dims, st->in_rank, res, pad, code,
                                    indent, e);
                sb_line(code, indent, "%s = (%s) ? %s : %s;\n", res, cond, res, pad);
                return rc;
            }
            if (cond[0]) {
                sb_line(code, indent, "if (%s) {\n", cond);
                int mark = x->n_memo;
                int rc = emit_chain(x, p, s + 1, next, st->in_dims, st->in_rank, res, pad, code,
                                    indent + 1, e);
                memo_cut(x, mark);
                sb_line(code, indent, "} else {\n");
                sb_line(code, indent + 1, "%s = %s;\n", res, pad);
                sb_line(code, indent, "}\n");
                return rc;
            }
            break;
        }
        case LS_GATHER: {
            int q = st->idx_rank, a = st->axis;
            for (int d = 0; d < a; d++)
                next.c[d] = ix.c[d];
            for (int d = a + 1; d < st->in_rank; d++)
                next.c[d] = ix.c[d - 1 + q];
            int64_t ga[R], g0;
            if (affine_gather(st->idx, q, st->idx_dims, ga, &g0)) {
                // Indices that are an affine function of their position (a window's offsets,
                // an arange): arithmetic instead of a lookup.
                Coord acc;
                coord_const(&acc, g0);
                bool all_affine = true;
                for (int d = 0; d < q; d++)
                    all_affine = all_affine && ix.c[a + d].affine;
                if (all_affine) {
                    for (int d = 0; d < q; d++) {
                        acc.cst += ga[d] * ix.c[a + d].cst;
                        for (int r = 0; r < R; r++)
                            acc.coef[r] += ga[d] * ix.c[a + d].coef[r];
                    }
                    next.c[a] = acc;
                } else {
                    StrBuf gb;
                    sb_init(&gb);
                    sb_printf(&gb, "%lld", (long long)g0);
                    char tmp[EXPR_CAP];
                    for (int d = 0; d < q; d++) {
                        if (ga[d] == 0)
                            continue;
                        coord_text(x, &ix.c[a + d], tmp, sizeof tmp);
                        sb_printf(&gb, " + (%s) * %lld", tmp, (long long)ga[d]);
                    }
                    coord_general(x, &next.c[a], gb.s, code, indent);
                    sb_free(&gb);
                }
                break;
            }
            char flat[4 * EXPR_CAP] = "0", tmp[EXPR_CAP], t2[6 * EXPR_CAP];
            for (int d = 0; d < q; d++) {
                coord_text(x, &ix.c[a + d], tmp, sizeof tmp);
                fmt(t2, sizeof t2, "(%s) * %lld + %s", flat, (long long)st->idx_dims[d], tmp);
                fmt(flat, sizeof flat, "%s", t2);
            }
            fmt(t2, sizeof t2, "%s[%s]", table_name(x, st->idx, prod_dims(q, st->idx_dims)), flat);
            coord_general(x, &next.c[a], t2, code, indent);
            break;
        }
        }
        ix = next;
        rank = st->in_rank;
        memcpy(dims, st->in_dims, sizeof(int64_t) * (size_t)rank);
    }
    char v[NAME_CAP];
    int rc = value(x, p->in[0], &ix, code, indent, v, sizeof v, e);
    if (rc == ST_OK)
        sb_line(code, indent, "%s = %s;\n", res, v);
    return rc;
}

static int emit_layout(Cexpr *x, const Prim *p, const Ix *ix, StrBuf *code, int indent, char *out,
                       size_t cap, Err *e) {
    const PrimGraph *pg = x->pg;
    const Tensor *T = pg->tensors[p->out[0]];
    const char *vt = vtype(x, T->dtype);
    cexpr_fresh(x, "v", out, cap);
    sb_line(code, indent, "%s %s;\n", vt, out);
    int rc = ST_OK;
    if (p->lay.concat) {
        int a = p->lay.axis;
        char ca[EXPR_CAP];
        coord_text(x, &ix->c[a], ca, sizeof ca);
        int64_t off = 0;
        for (int j = 0; j < p->n_in && rc == ST_OK; j++) {
            int64_t len = pg->tensors[p->in[j]]->dims[a];
            if (len == 0)
                continue;
            if (j == p->n_in - 1)
                sb_line(code, indent, "%s{\n", off ? "else " : "");
            else
                sb_line(code, indent, "%sif (%s < %lld) {\n", off ? "else " : "", ca,
                        (long long)(off + len));
            Ix sub = *ix;
            Coord *c = &sub.c[a];
            if (c->affine) {
                c->cst -= off;
            } else {
                char t[EXPR_CAP + 32];
                fmt(t, sizeof t, "%s - %lld", c->expr, (long long)off);
                coord_general(x, c, t, code, indent + 1);
            }
            int mark = x->n_memo;
            char v[NAME_CAP];
            rc = value(x, p->in[j], &sub, code, indent + 1, v, sizeof v, e);
            memo_cut(x, mark);
            sb_line(code, indent + 1, "%s = %s;\n", out, v);
            sb_line(code, indent, "}\n");
            off += len;
        }
        return rc;
    }
    char pad[128];
    cgen_literal(T->dtype, p->lay.pad_value, pad, sizeof pad);
    if (T->dtype == DT_FLOAT16 || T->dtype == DT_BFLOAT16) {
        // The pad value as stored, read back as the value type.
        uint64_t st = 0;
        elem_set_f64(T->dtype, &st, 0, p->lay.pad_value);
        float_literal(elem_get_f64(T->dtype, &st, 0), false, pad, sizeof pad);
    }
    return emit_chain(x, p, 0, *ix, T->dims, T->rank, out, pad, code, indent, e);
}

// ---- the recursion ----

// Whether ix addresses tensor t at exactly the root index: t has the root's shape and every
// coordinate is its root coordinate (0 on unit axes).
static bool at_root(const Cexpr *x, int t, const Ix *ix) {
    const Tensor *T = x->pg->tensors[t];
    if (T->rank != x->root_rank || ix->rank != T->rank)
        return false;
    for (int d = 0; d < T->rank; d++) {
        const Coord *c = &ix->c[d];
        if (T->dims[d] != x->root_dims[d] || !c->affine || c->cst != 0)
            return false;
        for (int q = 0; q < x->root_rank; q++)
            if (x->root_dims[q] != 1 && c->coef[q] != (q == d && T->dims[d] != 1 ? 1 : 0))
                return false;
    }
    return true;
}

static int value(Cexpr *x, int t, const Ix *ix, StrBuf *code, int indent, char *out, size_t cap,
                 Err *e) {
    if (t == x->pin_t && at_root(x, t, ix)) {
        fmt(out, cap, "%s", x->pin_var);
        x->pin_hits++;
        return ST_OK;
    }
    char *key = ix_key(x, t, ix);
    for (int i = 0; i < x->n_memo; i++)
        if (x->memo[i].t == t && !strcmp(x->memo[i].key, key)) {
            fmt(out, cap, "%s", x->memo[i].var);
            free(key);
            return ST_OK;
        }
    int rc, j = cgen_input_pos(x->c, t);
    if (j >= 0) {
        rc = load_input(x, t, j, ix, code, indent, out, cap);
    } else if (x->prim_of[t] < 0) {
        rc = err_set(e, ST_INVALID,
                     "kernel %s: tensor '%s' is neither an input nor computed in "
                     "the candidate",
                     x->fn, x->pg->tensors[t]->name);
    } else {
        const Prim *p = x->pg->prims[x->prim_of[t]];
        if (p->kind == PRIM_ELEMWISE)
            rc = emit_elemwise(x, p, ix, code, indent, out, cap, e);
        else if (p->kind == PRIM_LAYOUT)
            rc = emit_layout(x, p, ix, code, indent, out, cap, e);
        else
            rc = call_reader(x, t, ix, code, indent, out, cap, e);
    }
    if (rc != ST_OK) {
        free(key);
        return rc;
    }
    if (x->n_memo == x->cap_memo) {
        x->cap_memo = x->cap_memo ? 2 * x->cap_memo : 16;
        x->memo = xrealloc(x->memo, sizeof(Memo) * (size_t)x->cap_memo);
    }
    Memo *m = &x->memo[x->n_memo++];
    m->t = t;
    m->key = key;
    fmt(m->var, sizeof m->var, "%s", out);
    return ST_OK;
}

int cexpr_value(Cexpr *x, int t, const char *const *idx, StrBuf *code, int indent, char *out,
                size_t cap, Err *e) {
    const Tensor *T = x->pg->tensors[t];
    // The root is this call's index; a nested call (from a reader) keeps the outer root intact.
    int saved_rank = x->root_rank;
    int64_t saved_dims[R];
    char(*saved_idx)[EXPR_CAP] = xmalloc(sizeof x->root_idx);
    memcpy(saved_dims, x->root_dims, sizeof saved_dims);
    memcpy(saved_idx, x->root_idx, sizeof x->root_idx);
    x->root_rank = T->rank;
    Ix ix;
    ix.rank = T->rank;
    for (int d = 0; d < T->rank; d++) {
        x->root_dims[d] = T->dims[d];
        fmt(x->root_idx[d], EXPR_CAP, "%s", idx[d]);
        coord_const(&ix.c[d], 0);
        if (T->dims[d] != 1)
            ix.c[d].coef[d] = 1;
    }
    bool outer_trunc = fmt_truncated;
    fmt_truncated = false;
    int rc = value(x, t, &ix, code, indent, out, cap, e);
    if (rc == ST_OK && fmt_truncated)
        rc = err_set(e, ST_UNSUPPORTED, "kernel %s: an index expression is too long", x->fn);
    fmt_truncated = fmt_truncated || outer_trunc;
    x->root_rank = saved_rank;
    memcpy(x->root_dims, saved_dims, sizeof saved_dims);
    memcpy(x->root_idx, saved_idx, sizeof x->root_idx);
    free(saved_idx);
    return rc;
}
