// CUCLS_REDUCE: CUDA kernels with REDUCE primitives (softmax, LayerNorm, InstanceNorm, reduce-all,
// argmax, channel sums, ...). As the C target's fused strategy, every reduction of the candidate
// reduces the same axes of a same-shaped input (the "space"); the kept axes of the space are the
// kernel's positions, the reduced axes its row. `tpr` threads own a position (config):
//   tpr = 1     one thread loops over the row (inner-axis positions: the kept axes after the last
//               reduced one make adjacent threads read adjacent elements, so outer-axis
//               reductions such as NCHW channel sums stay coalesced);
//   tpr = 32    a warp per position, lanes striding the row, butterfly shuffles combining;
//   tpr = block one block per position (long rows): shuffles, then the warps' partials through
//               shared memory, combined in the same order by every thread.
// Each reduction is computed in dependency order into a register every thread of the position
// holds (later primitives read it through cexpr's reader, on the position's own row only), then
// the elementwise tail runs over the row again (rows are re-read, from L1/L2) or at the position.
// Row cache (a config variant, for a warp or a block per position where each thread owns at
// most MAX_CACHE elements): the tensor the passes share (the first reduction's input, or the
// operand of it that later passes read, e.g. the residual sum of a LayerNorm) is computed once
// per element into a register array, and every later pass and the tail read the register where
// they read that tensor at their element (cexpr_pin): the same values to the bit, the same
// order per thread, one pass over global memory instead of one per reduction plus the tail.
// Accumulation follows prim_interp.c, except float32 sums, which accumulate in float (per-lane
// sums, then a tree): max/min propagate NaN, integer sums wrap in uint64, argmax/argmin follow
// numpy's NaN rule and select_last, combining partial results by (value, index) so the order of
// the lanes does not matter. Candidates outside this shape are refused (the C target's
// materialised fallback would need scratch buffers the CUDA kernel ABI does not have).
#include "cost_models.h"
#include "cugen_pw.h"

#include "../../codegen/cexpr.h"
#include "../../codegen/classify.h"
#include "../../codegen/fmt.h"
#include "../../codegen/reduce_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R ORCH_MAX_RANK
#define MAX_RED 16
#define MAX_CACHE 16 // row cache slots per thread

// Truncation of this file's fixed buffers (fmt.h), checked over each kernel's emission.
static _Thread_local bool fmt_truncated;
#define fmt(buf, cap, ...) cg_fmt(&fmt_truncated, buf, cap, __VA_ARGS__)

typedef struct Space {
    int rank;
    int64_t dims[R];
    uint32_t red;  // reduced axes
    uint32_t keep; // kept axes (the positions)
    int64_t count, npos,
        inner; // row length, positions, product of kept axes after the last reduced
} Space;

typedef struct Red {
    const Prim *p;
    int out;
    char res[32]; // the register holding the position's result (output value type)
} Red;

typedef struct Ctx {
    const PrimGraph *pg;
    const Candidate *c;
    const char *fn;
    Cexpr *x;
    Red red[MAX_RED];
    int n_red;
    Space sp;
    bool root_is_space; // reads: the current root is the space (else the sink's output)
    bool split;         // 32 positions per block, tpr threads each at a stride of 32
    // Row cache (config cache): slots per thread (0: none), the cached tensor, its array and
    // slot, whether the slots are filled, and the pinned reads after the first reduction.
    int cache;
    int xt;
    char xc[32], slot[48];
    bool cache_ready;
    int hits_first;
    // Grid split (config grid > 1): G blocks share each position (group), block g_ of them
    // taking the row's elements g_ * tpr + lane + m * G * tpr; the blocks' partials meet in
    // module-scope arrays (`globals`) across a grid barrier.
    int G;
    StrBuf *globals;
} Ctx;

static void space_of(const PrimGraph *pg, const Prim *p, Space *s) {
    const Tensor *A = pg->tensors[p->in[0]];
    memset(s, 0, sizeof *s);
    s->rank = A->rank;
    memcpy(s->dims, A->dims, sizeof(int64_t) * (size_t)A->rank);
    uint32_t all = A->rank ? (uint32_t)((1ull << A->rank) - 1) : 0;
    s->red = p->red.axes & all;
    s->keep = all & ~s->red;
    s->count = s->npos = s->inner = 1;
    int last = -1;
    for (int d = 0; d < s->rank; d++) {
        if ((s->red >> d) & 1) {
            s->count *= s->dims[d];
            last = d;
        } else {
            s->npos *= s->dims[d];
        }
    }
    for (int d = last + 1; d < s->rank; d++)
        if (last >= 0)
            s->inner *= s->dims[d];
}

static bool same_space(const Space *a, const Space *b) {
    return a->rank == b->rank && a->red == b->red &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}

// ---- the reader ----

static int find_red(const Ctx *k, int t) {
    for (int i = 0; i < k->n_red; i++)
        if (k->red[i].out == t)
            return i;
    return -1;
}

static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    (void)code;
    (void)indent;
    Ctx *k = ctx;
    int i = find_red(k, rq->tensor);
    if (i < 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: tensor '%s' has no reader", k->fn,
                       k->pg->tensors[rq->tensor]->name);
    if (!red_read_on_row(k->pg, k->red[i].p, k->sp.rank, k->sp.red, k->root_is_space, rq))
        return err_set(e, ST_UNSUPPORTED, "kernel %s: '%s' is read off its row", k->fn,
                       k->pg->tensors[rq->tensor]->name);
    fmt(out, cap, "%s", k->red[i].res);
    return ST_OK;
}

// ---- the row loop ----

// Opens the loop of a thread over its elements of the row (r: the element's index in the row,
// from lane in steps of tpr; valid: only while the position is valid). With a row cache the
// loop is unrolled over the thread's slots, slot c_ holding element lane + c_ * tpr (the same
// elements in the same order), and once the slots are filled a read of the cached tensor at the
// element is its slot. Returns the indent of the body; row_close closes it.
static int row_open(Ctx *k, int tpr, bool valid, StrBuf *code, int indent) {
    long long count = (long long)k->sp.count;
    const char *vc = valid ? " && valid" : "";
    const char *first;
    long long step = (long long)tpr * k->G;
    char f[64];
    fmt(f, sizeof f, k->G > 1 ? "(int64_t)g_ * %d + lane" : "lane", tpr);
    first = f;
    if (!k->cache) {
        if (tpr == 1)
            sb_line(code, indent, "for (int64_t r = 0; r < %lld%s; r++) {\n", count, vc);
        else
            sb_line(code, indent, "for (int64_t r = %s; r < %lld%s; r += %lld) {\n", first, count,
                    vc, step);
        return indent + 1;
    }
    sb_line(code, indent, "#pragma unroll\n");
    sb_line(code, indent, "for (int c_ = 0; c_ < %d; c_++) {\n", k->cache);
    sb_line(code, indent + 1, "const int64_t r = %s + (int64_t)c_ * %lld;\n", first, step);
    if ((int64_t)k->cache * step == k->sp.count) // every slot of every thread holds an element
        sb_line(code, indent + 1, "%s\n", valid ? "if (valid) {" : "{");
    else
        sb_line(code, indent + 1, "if (r < %lld%s) {\n", count, vc);
    if (k->cache_ready)
        cexpr_pin(k->x, k->xt, k->slot);
    return indent + 2;
}

static void row_close(Ctx *k, StrBuf *code, int indent) {
    if (k->cache) {
        sb_line(code, indent + 1, "}\n");
        cexpr_pin(k->x, -1, NULL);
    }
    sb_line(code, indent, "}\n");
}

// Fills the row cache: each thread's elements of the cached tensor, once, in registers.
static int emit_cache_fill(Ctx *k, int tpr, bool narrow, StrBuf *code, int indent, Err *e) {
    const Space *s = &k->sp;
    cexpr_fresh(k->x, "xc", k->xc, sizeof k->xc);
    fmt(k->slot, sizeof k->slot, "%s[c_]", k->xc);
    sb_line(code, indent, "%s %s[%d];\n", cexpr_vtype(k->x, k->pg->tensors[k->xt]->dtype), k->xc,
            k->cache);
    int in = row_open(k, tpr, false, code, indent);
    cupw_digits(code, in, "i", "r", s->rank, s->dims, s->red, narrow);
    char names[R][16], v[64];
    const char *idx[R];
    for (int d = 0; d < s->rank; d++) {
        fmt(names[d], sizeof names[d], "i%d", d);
        idx[d] = names[d];
    }
    int rc = cexpr_value(k->x, k->xt, idx, code, in, v, sizeof v, e);
    cexpr_forget(k->x);
    if (rc)
        return rc;
    sb_line(code, in, "%s = %s;\n", k->slot, v);
    row_close(k, code, indent);
    k->cache_ready = true;
    return ST_OK;
}

// ---- one reduction ----

// Accumulator type of reduction p (the interpreter's, except float32 sums in float).
static const char *acc_type(const Prim *p, DType in) {
    RedOp op = p->red.op;
    bool sel = op == RED_MAX || op == RED_MIN || op == RED_ARGMAX || op == RED_ARGMIN;
    if (dtype_is_float(in)) {
        if (sel)
            return cgen_vtype(in);
        return (in == DT_FLOAT && op != RED_PROD) ? "float" : "double";
    }
    return sel ? "int64_t" : "uint64_t";
}

// Emits the combination of state (a, n, ai) with (b, bn, bi) of the same reduction.
static void emit_combine(StrBuf *code, int indent, const Prim *p, bool fl, const char *a,
                         const char *n, const char *ai, const char *b, const char *bn,
                         const char *bi) {
    RedOp op = p->red.op;
    switch (op) {
    case RED_SUM:
    case RED_MEAN: sb_line(code, indent, "%s = %s + %s;\n", a, a, b); break;
    case RED_PROD: sb_line(code, indent, "%s = %s * %s;\n", a, a, b); break;
    case RED_MAX:
    case RED_MIN: {
        const char *cmp = op == RED_MAX ? ">" : "<";
        sb_line(code, indent, "%s = %s %s %s ? %s : %s;\n", a, b, cmp, a, b, a);
        if (fl)
            sb_line(code, indent, "%s |= %s;\n", n, bn);
        break;
    }
    case RED_ARGMAX:
    case RED_ARGMIN: {
        const char *cmp = op == RED_ARGMAX ? ">" : "<";
        sb_line(code, indent, "if (%s) {\n", bn);
        if (fl) {
            sb_line(code, indent + 1, "const int vn = %s != %s, an = %s != %s;\n", b, b, a, a);
            sb_line(code, indent + 1, "const int more = (vn | an) ? (vn & !an) : (%s %s %s);\n", b,
                    cmp, a);
            sb_line(code, indent + 1, "const int same = (vn | an) ? (vn & an) : (%s == %s);\n", b,
                    a);
        } else {
            sb_line(code, indent + 1, "const int more = %s %s %s;\n", b, cmp, a);
            sb_line(code, indent + 1, "const int same = %s == %s;\n", b, a);
        }
        sb_line(code, indent + 1, "if (!%s || more || (same && %s %s %s)) {\n", n, bi,
                p->red.select_last ? ">" : "<", ai);
        sb_line(code, indent + 2, "%s = %s;\n", a, b);
        sb_line(code, indent + 2, "%s = %s;\n", ai, bi);
        sb_line(code, indent + 2, "%s = 1;\n", n);
        sb_line(code, indent + 1, "}\n");
        sb_line(code, indent, "}\n");
        break;
    }
    }
}

// Emits the combination of the position's threads' states (a, n, ai) within the block: every
// thread of the position ends with the same result, folded in the same order. `tag` keeps the
// shared arrays of a second call apart.
static void emit_block_combine(const Ctx *k, const Prim *p, bool fl, const char *at, const char *a,
                               const char *n, const char *ai, bool has_n, bool has_i, int tpr,
                               int bs, const char *tag, StrBuf *code, int indent) {
    // Lanes of a warp: butterfly shuffles leave every lane with the same combination.
    if (tpr > 1 && !k->split) {
        sb_line(code, indent, "#pragma unroll\n");
        sb_line(code, indent, "for (int o = 16; o > 0; o >>= 1) {\n");
        sb_line(code, indent + 1, "const %s b_ = __shfl_xor_sync(ORCH_FULL_MASK, %s, o);\n", at, a);
        if (has_n)
            sb_line(code, indent + 1, "const int bn_ = __shfl_xor_sync(ORCH_FULL_MASK, %s, o);\n",
                    n);
        if (has_i)
            sb_line(code, indent + 1,
                    "const int64_t bi_ = __shfl_xor_sync(ORCH_FULL_MASK, (long long)%s, o);\n", ai);
        emit_combine(code, indent + 1, p, fl, a, n, ai, "b_", "bn_", "bi_");
        sb_line(code, indent, "}\n");
    }
    // Warps of a block: partials through shared memory, folded in warp order by every thread.
    if (k->split || tpr > 32) {
        // Split: the tpr threads of a position sit 32 apart, partials through shared memory,
        // folded in lane order by each of them; else a partial per warp, folded in warp order.
        int slots = k->split ? bs : bs / 32, parts = k->split ? tpr : bs / 32;
        const char *wr = k->split ? "threadIdx.x" : "lane / 32";
        const char *rd0 = k->split ? "threadIdx.x % 32" : "0";
        const char *rdw = k->split ? "w * 32 + threadIdx.x % 32" : "w";
        sb_line(code, indent, "__shared__ %s sa%s_%s[%d];\n", at, tag, a, slots);
        if (has_n)
            sb_line(code, indent, "__shared__ int sn%s_%s[%d];\n", tag, a, slots);
        if (has_i)
            sb_line(code, indent, "__shared__ int64_t si%s_%s[%d];\n", tag, a, slots);
        int in = indent;
        if (!k->split) {
            sb_line(code, indent, "if (lane %% 32 == 0) {\n");
            in = indent + 1;
        }
        sb_line(code, in, "sa%s_%s[%s] = %s;\n", tag, a, wr, a);
        if (has_n)
            sb_line(code, in, "sn%s_%s[%s] = %s;\n", tag, a, wr, n);
        if (has_i)
            sb_line(code, in, "si%s_%s[%s] = %s;\n", tag, a, wr, ai);
        if (!k->split)
            sb_line(code, indent, "}\n");
        sb_line(code, indent, "__syncthreads();\n");
        sb_line(code, indent, "%s = sa%s_%s[%s];\n", a, tag, a, rd0);
        if (has_n)
            sb_line(code, indent, "%s = sn%s_%s[%s];\n", n, tag, a, rd0);
        if (has_i)
            sb_line(code, indent, "%s = si%s_%s[%s];\n", ai, tag, a, rd0);
        sb_line(code, indent, "for (int w = 1; w < %d; w++) {\n", parts);
        sb_line(code, indent + 1, "const %s b_ = sa%s_%s[%s];\n", at, tag, a, rdw);
        if (has_n)
            sb_line(code, indent + 1, "const int bn_ = sn%s_%s[%s];\n", tag, a, rdw);
        if (has_i)
            sb_line(code, indent + 1, "const int64_t bi_ = si%s_%s[%s];\n", tag, a, rdw);
        emit_combine(code, indent + 1, p, fl, a, n, ai, "b_", "bn_", "bi_");
        sb_line(code, indent, "}\n");
    }
}

// Emits, where the position's digits are defined, reduction r computed by the tpr threads of
// the position into the register r->res (every thread of the position holds it).
static int emit_reduction(Ctx *k, Red *r, int tpr, int bs, bool narrow, StrBuf *code, int indent,
                          Err *e) {
    const PrimGraph *pg = k->pg;
    const Prim *p = r->p;
    const Space *s = &k->sp;
    const Tensor *A = pg->tensors[p->in[0]], *O = pg->tensors[r->out];
    bool fl = dtype_is_float(A->dtype);
    RedOp op = p->red.op;
    bool arg = op == RED_ARGMAX || op == RED_ARGMIN;
    const char *at = acc_type(p, A->dtype);
    char a[32], n[32], ai[32];
    cexpr_fresh(k->x, "acc", a, sizeof a);
    cexpr_fresh(k->x, "nan", n, sizeof n);
    cexpr_fresh(k->x, "arg", ai, sizeof ai);
    const char *init = red_init(op, fl);
    // The state: the accumulator, the NaN flag where a float max/min or an arg reduction reads
    // it, the index where an arg reduction does (sums shuffle and share one value).
    bool has_n = arg || (fl && (op == RED_MAX || op == RED_MIN)), has_i = arg;
    sb_line(code, indent, "%s %s = (%s)%s;\n", at, a, at, init);
    if (has_n)
        sb_line(code, indent, "int %s = 0;\n", n);
    if (has_i)
        sb_line(code, indent, "int64_t %s = 0;\n", ai);
    int in1 = row_open(k, tpr, false, code, indent);
    cupw_digits(code, in1, "i", "r", s->rank, s->dims, s->red, narrow);
    char names[R][16], v[64];
    const char *idx[R];
    for (int d = 0; d < s->rank; d++) {
        fmt(names[d], sizeof names[d], "i%d", d);
        idx[d] = names[d];
    }
    int rc = cexpr_value(k->x, p->in[0], idx, code, in1, v, sizeof v, e);
    cexpr_forget(k->x);
    if (rc)
        return rc;
    switch (op) {
    case RED_SUM:
    case RED_MEAN:
        if (fl)
            sb_line(code, in1, "%s += (%s)%s;\n", a, at, v);
        else
            sb_line(code, in1, "%s += (uint64_t)(int64_t)%s;\n", a, v);
        break;
    case RED_PROD:
        if (fl)
            sb_line(code, in1, "%s *= (double)%s;\n", a, v);
        else
            sb_line(code, in1, "%s *= (uint64_t)(int64_t)%s;\n", a, v);
        break;
    case RED_MAX:
    case RED_MIN: {
        const char *cmp = op == RED_MAX ? ">" : "<";
        if (fl) {
            sb_line(code, in1, "%s = %s %s %s ? %s : %s;\n", a, v, cmp, a, v, a);
            sb_line(code, in1, "%s |= %s != %s;\n", n, v, v);
        } else {
            sb_line(code, in1, "%s = (int64_t)%s %s %s ? (int64_t)%s : %s;\n", a, v, cmp, a, v, a);
        }
        break;
    }
    case RED_ARGMAX:
    case RED_ARGMIN: {
        // A thread visits its elements in increasing r: emit_reduce.c's sequential rule.
        const char *cmp = op == RED_ARGMAX ? ">" : "<";
        sb_line(code, in1, "{\n");
        if (fl) {
            sb_line(code, in1 + 1, "const int vn = %s != %s, an = %s != %s;\n", v, v, a, a);
            sb_line(code, in1 + 1, "const int more = (vn | an) ? (vn & !an) : (%s %s %s);\n", v,
                    cmp, a);
            sb_line(code, in1 + 1, "const int same = (vn | an) ? (vn & an) : (%s == %s);\n", v, a);
            sb_line(code, in1 + 1, "if (!%s || more || (%d && same)) {\n", n,
                    p->red.select_last ? 1 : 0);
            sb_line(code, in1 + 2, "%s = %s;\n", a, v);
        } else {
            sb_line(code, in1 + 1, "const int more = (int64_t)%s %s %s;\n", v, cmp, a);
            sb_line(code, in1 + 1, "const int same = (int64_t)%s == %s;\n", v, a);
            sb_line(code, in1 + 1, "if (!%s || more || (%d && same)) {\n", n,
                    p->red.select_last ? 1 : 0);
            sb_line(code, in1 + 2, "%s = (int64_t)%s;\n", a, v);
        }
        sb_line(code, in1 + 2, "%s = r;\n", ai);
        sb_line(code, in1 + 1, "}\n");
        sb_line(code, in1 + 1, "%s = 1;\n", n);
        sb_line(code, in1, "}\n");
        break;
    }
    }
    row_close(k, code, indent);
    emit_block_combine(k, p, fl, at, a, n, ai, has_n, has_i, tpr, bs, "", code, indent);
    // Blocks of a grid split: each block's partial to its slot of a module-scope array, a grid
    // barrier, then every thread folds the G partials of its position in block order (every
    // block the same values in the same order).
    if (k->G > 1) {
        long long G = k->G, slots = (long long)s->npos * G;
        sb_printf(k->globals, "static __device__ %s gp_%s_%s[%lld];\n", at, k->fn, a, slots);
        if (has_n)
            sb_printf(k->globals, "static __device__ int gpn_%s_%s[%lld];\n", k->fn, a, slots);
        if (has_i)
            sb_printf(k->globals, "static __device__ int64_t gpi_%s_%s[%lld];\n", k->fn, a, slots);
        sb_line(code, indent, "if (lane == 0 && valid) {\n");
        sb_line(code, indent + 1, "gp_%s_%s[pos * %lld + g_] = %s;\n", k->fn, a, G, a);
        if (has_n)
            sb_line(code, indent + 1, "gpn_%s_%s[pos * %lld + g_] = %s;\n", k->fn, a, G, n);
        if (has_i)
            sb_line(code, indent + 1, "gpi_%s_%s[pos * %lld + g_] = %s;\n", k->fn, a, G, ai);
        sb_line(code, indent, "}\n");
        sb_line(code, indent, "orch_grid_sync(&gb_%s, gridDim.x);\n", k->fn);
        // The G partials: thread `lane` of the position folds those w = lane mod tpr (loads
        // from L2, independent of each other), then the block combination as above.
        sb_line(code, indent, "%s = (%s)%s;\n", a, at, init);
        if (has_n)
            sb_line(code, indent, "%s = 0;\n", n);
        if (has_i)
            sb_line(code, indent, "%s = 0;\n", ai);
        sb_line(code, indent, "for (int w = lane; w < %lld; w += %d) {\n", G, tpr);
        sb_line(code, indent + 1, "const %s b_ = __ldcg(&gp_%s_%s[pos * %lld + w]);\n", at, k->fn,
                a, G);
        if (has_n)
            sb_line(code, indent + 1, "const int bn_ = __ldcg(&gpn_%s_%s[pos * %lld + w]);\n",
                    k->fn, a, G);
        else
            sb_line(code, indent + 1, "const int bn_ = 1;\n");
        if (has_i)
            sb_line(code, indent + 1, "const int64_t bi_ = __ldcg(&gpi_%s_%s[pos * %lld + w]);\n",
                    k->fn, a, G);
        else
            sb_line(code, indent + 1, "const int64_t bi_ = 0;\n");
        sb_line(code, indent + 1, "(void)bn_;\n");
        sb_line(code, indent + 1, "(void)bi_;\n");
        emit_combine(code, indent + 1, p, fl, a, n, ai, "b_", "bn_", "bi_");
        sb_line(code, indent, "}\n");
        emit_block_combine(k, p, fl, at, a, n, ai, has_n, has_i, tpr, bs, "g", code, indent);
    }
    // The result in the output's value type.
    DType ot = O->dtype;
    char val[256], conv[320];
    switch (op) {
    case RED_MEAN:
        if (fl)
            fmt(val, sizeof val, "(double)%s / (double)%lld", a, (long long)s->count);
        else
            fmt(val, sizeof val, "(int64_t)%s / (int64_t)%lld", a, (long long)s->count);
        break;
    case RED_MAX:
    case RED_MIN:
        if (fl)
            fmt(val, sizeof val, "(%s ? (double)NAN : (double)%s)", n, a);
        else
            fmt(val, sizeof val, "%s", a);
        break;
    case RED_ARGMAX:
    case RED_ARGMIN: {
        // The coordinate along the last reduced axis of the winner's flat row index.
        int last = -1;
        for (int d = 0; d < s->rank; d++)
            if ((s->red >> d) & 1)
                last = d;
        fmt(val, sizeof val, "(%s %% %lld)", ai, (long long)(last >= 0 ? s->dims[last] : 1));
        break;
    }
    default: fmt(val, sizeof val, fl ? "%s" : "(int64_t)%s", a);
    }
    red_result_conv(ot, arg, val, conv, sizeof conv, &fmt_truncated);
    sb_line(code, indent, "const %s %s = %s;\n", cgen_vtype(ot), r->res, conv);
    return ST_OK;
}

// ---- the kernel ----

static int collect(Ctx *k, Err *e) {
    for (int i = 0; i < k->c->n_prims; i++) {
        const Prim *p = k->pg->prims[k->c->prims[i]];
        if (p->kind != PRIM_REDUCE)
            continue;
        if (k->n_red == MAX_RED)
            return err_set(e, ST_UNSUPPORTED, "kernel %s: more than %d reductions", k->fn, MAX_RED);
        Red *r = &k->red[k->n_red++];
        r->p = p;
        r->out = p->out[0];
        fmt(r->res, sizeof r->res, "red%d", k->n_red - 1);
        Space s;
        space_of(k->pg, p, &s);
        if (k->n_red == 1)
            k->sp = s;
        else if (!same_space(&k->sp, &s))
            return err_set(e, ST_UNSUPPORTED, "kernel %s: reductions over different spaces", k->fn);
    }
    if (k->n_red == 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: no reduction", k->fn);
    if (k->sp.count <= 0 || k->sp.npos <= 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: empty reduction", k->fn);
    return ST_OK;
}

// Config block: block size; tpr: threads per position (1, 32 or the block).
static int emit_body(Ctx *k, int bs, int tpr, StrBuf *code, Err *e) {
    const PrimGraph *pg = k->pg;
    const Candidate *c = k->c;
    const Tensor *T = pg->tensors[c->output];
    const Prim *sink = pg->prims[c->prims[c->n_prims - 1]];
    const Space *s = &k->sp;
    bool narrow = s->count < ((int64_t)1 << 31) && s->npos < ((int64_t)1 << 31);
    int ppb = bs / tpr;
    // valid: the guard of the stores. Split blocks run every thread through the barriers, the
    // ones past the last position on a copy of it; elsewhere whole warps (tpr 32) or whole
    // blocks (tpr = block) share pos, so the shuffles and barriers run with all their threads.
    if (k->G > 1) {
        sb_line(code, 1, "const int g_ = (int)(blockIdx.x %% %du);\n", k->G);
        sb_line(code, 1, "const int64_t blk_ = (int64_t)(blockIdx.x / %du);\n", k->G);
    } else {
        sb_line(code, 1, "const int64_t blk_ = (int64_t)blockIdx.x;\n");
    }
    if (k->split) {
        sb_line(code, 1, "const int lane = (int)threadIdx.x / 32;\n");
        sb_line(code, 1, "const int64_t pos_ = blk_ * 32 + (int)threadIdx.x %% 32;\n");
        sb_line(code, 1, "const bool valid = pos_ < %lld;\n", (long long)s->npos);
        sb_line(code, 1, "const int64_t pos = valid ? pos_ : %lld;\n", (long long)s->npos - 1);
        sb_line(code, 1, "{\n");
    } else {
        if (tpr == 1)
            sb_line(code, 1, "const int lane = 0;\n");
        else
            sb_line(code, 1, "const int lane = (int)threadIdx.x %% %d;\n", tpr);
        sb_line(code, 1, "const int64_t pos = blk_ * %d + (int)threadIdx.x / %d;\n", ppb, tpr);
        sb_line(code, 1, "const bool valid = true;\n");
        sb_line(code, 1, "if (pos < %lld) {\n", (long long)s->npos);
    }
    sb_line(code, 2, "(void)lane;\n");
    cupw_digits(code, 2, "i", "pos", s->rank, s->dims, s->keep, narrow);
    k->root_is_space = true;
    int rc = k->cache ? emit_cache_fill(k, tpr, narrow, code, 2, e) : ST_OK;
    for (int i = 0; i < k->n_red && rc == ST_OK; i++) {
        rc = emit_reduction(k, &k->red[i], tpr, bs, narrow, code, 2, e);
        if (i == 0)
            k->hits_first = cexpr_pin_hits(k->x);
    }
    if (rc)
        return rc;
    char names[R][16], off[512], v[64], st[320];
    const char *idx[R];
    if (sink->kind == PRIM_REDUCE) {
        const Red *r = &k->red[k->n_red - 1];
        ORCH_ASSERT(r->p == sink);
        red_out_idx(k->sp.rank, k->sp.red, r->p->red.keepdims, names, idx);
        red_dense_offset(T, idx, off, sizeof off, &fmt_truncated);
        cgen_store_expr(T->dtype, r->res, st, sizeof st);
        sb_line(code, 2, "if (valid && lane == 0%s)\n", k->G > 1 ? " && g_ == 0" : "");
        sb_line(code, 3, "y[%s] = %s;\n", off, st);
        sb_line(code, 1, "}\n");
        return ST_OK;
    }
    const Tensor *A = pg->tensors[k->red[0].p->in[0]], *O = pg->tensors[k->red[0].out];
    bool full = T->rank == A->rank && !memcmp(T->dims, A->dims, sizeof(int64_t) * (size_t)T->rank);
    bool small = T->rank == O->rank && !memcmp(T->dims, O->dims, sizeof(int64_t) * (size_t)T->rank);
    if (full) {
        // The tail over the row again (or over the row cache).
        int in = row_open(k, tpr, true, code, 2);
        cupw_digits(code, in, "i", "r", s->rank, s->dims, s->red, narrow);
        for (int d = 0; d < s->rank; d++) {
            fmt(names[d], sizeof names[d], "i%d", d);
            idx[d] = names[d];
        }
        rc = cexpr_value(k->x, c->output, idx, code, in, v, sizeof v, e);
        cexpr_forget(k->x);
        if (rc)
            return rc;
        red_dense_offset(T, idx, off, sizeof off, &fmt_truncated);
        cgen_store_expr(T->dtype, v, st, sizeof st);
        sb_line(code, in, "y[%s] = %s;\n", off, st);
        row_close(k, code, 2);
    } else if (small) {
        red_out_idx(k->sp.rank, k->sp.red, k->red[0].p->red.keepdims, names, idx);
        k->root_is_space = false;
        sb_line(code, 2, "if (valid && lane == 0%s) {\n", k->G > 1 ? " && g_ == 0" : "");
        rc = cexpr_value(k->x, c->output, idx, code, 3, v, sizeof v, e);
        cexpr_forget(k->x);
        if (rc)
            return rc;
        red_dense_offset(T, idx, off, sizeof off, &fmt_truncated);
        cgen_store_expr(T->dtype, v, st, sizeof st);
        sb_line(code, 3, "y[%s] = %s;\n", off, st);
        sb_line(code, 2, "}\n");
    } else {
        return err_set(e, ST_UNSUPPORTED, "kernel %s: output shape fits no row", k->fn);
    }
    sb_line(code, 1, "}\n");
    return ST_OK;
}

// Configs: CuReduceConfig (cugen.h). Row cache slots a thread: 0, or ceil(count / (tpr * G)),
// at most MAX_CACHE.

void cured_config_pack(const CuReduceConfig *rc, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_REDUCE);
    k->p[0] = rc->block;
    k->p[1] = rc->tpr;
    k->p[2] = rc->split;
    k->p[3] = rc->cache;
    k->p[5] = rc->grid;
    char cache[32] = "", grid[32] = "";
    if (rc->cache > 0)
        snprintf(cache, sizeof cache, " cache=%lld", (long long)rc->cache);
    if (rc->grid > 1)
        snprintf(grid, sizeof grid, " grid=%lld", (long long)rc->grid);
    snprintf(k->desc, sizeof k->desc, "cls=cured bs=%lld tpr=%lld%s%s%s", (long long)rc->block,
             (long long)rc->tpr, rc->split == 1 ? " split" : "", cache, grid);
}

bool cured_config_unpack(const KernelConfig *k, CuReduceConfig *rc) {
    *rc = (CuReduceConfig){k->p[0], k->p[1], k->p[2], k->p[3], k->p[5]};
    return k->cls == CUCLS_REDUCE;
}

static bool cfg_valid(const Space *s, int bs, int tpr, bool split, int cache, int G) {
    if (bs < 32 || bs > 1024 || bs % 32 || G < 1)
        return false;
    int64_t step = (int64_t)tpr * G;
    if (cache < 0 || cache > MAX_CACHE ||
        (cache && (s->count > (int64_t)cache * step || s->count <= (int64_t)(cache - 1) * step)))
        return false;
    // A grid split needs several threads per position, and blocks of at most 512 threads (its
    // grid must stay resident, see cugen_red_emit).
    if (G > 1 && (tpr == 1 || (!split && tpr != bs) || bs > 512 || s->count < step))
        return false;
    if (split)
        return tpr >= 2 && bs == 32 * tpr && s->inner > 1;
    if (tpr != 1 && tpr != 32 && tpr != bs)
        return false;
    // Threads sharing a position must stride a row: only where no kept axis follows the
    // reduced ones (else one thread per position keeps the loads coalesced).
    return tpr == 1 || s->inner == 1;
}

// The tensors a row cache may hold, best first: the first reduction's input, then the operands
// of the candidate's elementwise primitives computing it that have the space's shape (the
// residual add's operands, x of x*x), breadth first. Returns how many (at most max).
static int cache_choices(const Ctx *k, int *out, int max) {
    int n = 0;
    out[n++] = k->red[0].p->in[0];
    for (int q = 0; q < n && n < max; q++)
        for (int i = 0; i < k->c->n_prims; i++) {
            const Prim *p = k->pg->prims[k->c->prims[i]];
            if (p->kind != PRIM_ELEMWISE || p->out[0] != out[q])
                continue;
            for (int j = 0; j < p->n_in && n < max; j++) {
                const Tensor *T = k->pg->tensors[p->in[j]];
                bool seen = false;
                for (int m = 0; m < n; m++)
                    seen = seen || out[m] == p->in[j];
                if (!seen && T->rank == k->sp.rank &&
                    !memcmp(T->dims, k->sp.dims, sizeof(int64_t) * (size_t)T->rank))
                    out[n++] = p->in[j];
            }
        }
    return n;
}

int cugen_red_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e) {
    (void)hw;
    Ctx k = {.pg = pg, .c = c, .fn = fn, .xt = -1};
    int rc = collect(&k, e);
    if (rc)
        return rc;
    CuReduceConfig rcf;
    cured_config_unpack(cfg, &rcf);
    int bs = (int)rcf.block, tpr = (int)rcf.tpr;
    k.split = rcf.split == 1;
    k.cache = (int)rcf.cache;
    k.G = rcf.grid > 1 ? (int)ORCH_MIN(rcf.grid, 4096) : 1;
    if (!cfg_valid(&k.sp, bs, tpr, k.split, k.cache, k.G))
        return err_set(e, ST_INVALID, "kernel %s: bad reduction config '%s'", fn, cfg->desc);
    int ppb = k.split ? 32 : bs / tpr;
    int64_t grid = (k.sp.npos + ppb - 1) / ppb * k.G;
    if (grid > 0x7fffffff)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: %lld blocks", fn, (long long)grid);
    // The blocks of a grid split wait for each other at the barrier, so all of them must be
    // resident at once: at most one per SM (blocks of at most 512 threads, so other kernels
    // resident beside them cannot starve them either), and partial arrays of bounded size.
    if (k.G > 1 && (grid > cudev_of(hw).sms || k.sp.npos * k.G > ((int64_t)1 << 20)))
        return err_set(e, ST_INVALID, "kernel %s: a grid split of %lld blocks does not fit", fn,
                       (long long)grid);
    // A row cache holds the first of its choices that a pass after the first reduction reads
    // at its element; where none is, the config does not apply.
    int choices[4], n_choices = k.cache ? cache_choices(&k, choices, 4) : 1;
    Err te = {0};
    rc = ST_UNSUPPORTED;
    for (int ch = 0; ch < n_choices && rc != ST_OK; ch++) {
        StrBuf decls, body, globals;
        sb_init(&decls);
        sb_init(&body);
        sb_init(&globals);
        k.globals = &globals;
        if (k.G > 1)
            sb_printf(&globals, "static __device__ unsigned long long gb_%s;\n", fn);
        k.xt = k.cache ? choices[ch] : -1;
        k.cache_ready = false;
        k.hits_first = 0;
        k.x = cexpr_create(pg, c, fn, &decls);
        cugen_cexpr_dialect(k.x, cugen_fast_math(opt));
        cexpr_set_reader(k.x, reader, &k);
        fmt_truncated = false;
        memset(&te, 0, sizeof te);
        rc = emit_body(&k, bs, tpr, &body, &te);
        if (rc == ST_OK && fmt_truncated)
            rc = err_set(&te, ST_UNSUPPORTED, "kernel %s: an expression is too long", fn);
        if (rc == ST_OK && k.cache && cexpr_pin_hits(k.x) == k.hits_first)
            rc = err_set(&te, ST_UNSUPPORTED,
                         "kernel %s: no pass after the first reads a row cache", fn);
        if (rc == ST_OK) {
            sb_puts(src, decls.s);
            sb_puts(src, globals.s);
            cupw_kernel_head(pg, c, fn, bs, src);
            sb_puts(src, body.s);
            sb_puts(src, "}\n");
            memset(launch, 0, sizeof *launch);
            launch->grid[0] = (unsigned)grid;
            launch->grid[1] = launch->grid[2] = 1;
            launch->block[0] = (unsigned)bs;
            launch->block[1] = launch->block[2] = 1;
        }
        cexpr_free(k.x);
        k.x = NULL;
        sb_free(&decls);
        sb_free(&body);
        sb_free(&globals);
        k.globals = NULL;
    }
    if (rc)
        return err_set(e, rc, "%s", te.msg);
    return ST_OK;
}

bool cugen_red_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    KernelConfig cfg;
    cured_config_pack(&(CuReduceConfig){.block = 256, .tpr = 1}, &cfg);
    StrBuf src;
    sb_init(&src);
    Err e = {0};
    CudaLaunch l;
    int rc = cugen_red_emit(pg, c, &cfg, NULL, opt, "orch_probe", &src, &l, &e);
    sb_free(&src);
    return rc == ST_OK;
}

// Whether the row-cached variant of config (bs, tpr) emits (some pass after the first reads
// the cache).
static bool cache_applies(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                          const TargetOptions *opt, const KernelConfig *base, int cache) {
    CuReduceConfig rcf;
    cured_config_unpack(base, &rcf);
    rcf.cache = cache;
    KernelConfig cfg;
    cured_config_pack(&rcf, &cfg);
    StrBuf src;
    sb_init(&src);
    Err e = {0};
    CudaLaunch l;
    int rc = cugen_red_emit(pg, c, &cfg, hw, opt, "orch_probe", &src, &l, &e);
    sb_free(&src);
    return rc == ST_OK;
}

int cugen_red_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k) {
    Ctx ctx = {.pg = pg, .c = c, .fn = "orch_probe"};
    Err e = {0};
    if (collect(&ctx, &e))
        return 0;
    const Tensor *T = pg->tensors[c->output], *A = pg->tensors[ctx.red[0].p->in[0]];
    bool full = T->rank == A->rank && !memcmp(T->dims, A->dims, sizeof(int64_t) * (size_t)T->rank);
    int passes = ctx.n_red + (full ? 1 : 0);
    const CudaPointwiseModel *cm = &CUDA_POINTWISE_MODEL;
    double bytes = cgen_traffic_bytes(pg, c),
           ops = cgen_ops_per_elem(pg, c) + cm->digit_instr * ctx.sp.rank;
    double in_bytes = bytes - (double)tensor_nbytes(T);
    CuDevice d = cudev_of(hw);
    int sms = d.sms;
    double clock = d.clock, bw = cupw_bandwidth(&d);
    // Row cache slots per thread: 16 of 4 bytes, 8 of 8-byte values (half types in double).
    bool wide = dtype_size(A->dtype) > 4 || A->dtype == DT_FLOAT16 || A->dtype == DT_BFLOAT16;
    int max_cache = wide ? MAX_CACHE / 2 : MAX_CACHE;
    int cache_ok = -1; // whether a row cache applies (probed once)
    static const int shapes[][3] = {{128, 1, 0},   {256, 1, 0},   {128, 32, 0},  {256, 32, 0},
                                    {128, 128, 0}, {256, 256, 0}, {512, 512, 0}, {1024, 1024, 0},
                                    {256, 8, 1},   {1024, 32, 1}};
    const Space *s = &ctx.sp;
    // Each shape with one block per position group and, where the groups leave most SMs idle,
    // with a grid split. The grid splits compete among themselves for at most two of the k
    // configs measured; where there are none (most reductions) the measured set is unchanged.
    KernelConfig cand[2 * 2 * ORCH_COUNT(shapes)], grid[2 * ORCH_COUNT(shapes)];
    int n = 0, n_grid = 0;
    for (size_t i = 0; i < ORCH_COUNT(shapes); i++) {
        int bs = shapes[i][0], tpr = shapes[i][1];
        bool split = shapes[i][2] != 0;
        if (!cfg_valid(s, bs, tpr, split, 0, 1))
            continue;
        // Split rows only where they are long.
        if (split && s->count < 4 * tpr)
            continue;
        // No block per position for rows that would leave most of it idle.
        if (tpr > 32 && s->count < 2 * tpr && tpr != 128)
            continue;
        if (tpr > 32 && s->count < 128)
            continue;
        int64_t ppb = split ? 32 : bs / tpr, groups = (s->npos + ppb - 1) / ppb;
        // Grid split: as many blocks per group as fill the SMs once, each thread still with
        // a few elements or more.
        int gs[2] = {1, 0}, n_g = 1;
        if (tpr > 1 && (split || tpr == bs) && bs <= 512 && groups * cm->red_grid_idle <= sms) {
            int64_t G =
                ORCH_MIN((int64_t)sms / groups, s->count / (cm->red_grid_min_elems * (int64_t)tpr));
            if (G >= 2)
                gs[n_g++] = (int)ORCH_MIN(G, (int64_t)cm->red_grid_max);
        }
        for (int gi = 0; gi < n_g; gi++) {
            int G = gs[gi];
            int64_t blocks = groups * G;
            int bpsm = G > 1 ? 1 : cupw_blocks_per_sm(&d, bs);
            double slots = cudev_slots(&d, bpsm);
            // Full bandwidth needs the SMs full of threads (loads in flight); fewer
            // resident threads reach a proportional share (H100: a warp per row of 4096
            // rows, half the threads, ran at half the bandwidth of a block per row).
            double resident = ORCH_MIN((double)blocks, slots) * bs;
            double util = ORCH_MIN(1.0, resident / ((double)sms * d.threads_sm));
            double waves = cudev_waves(&d, (double)blocks, bpsm);
            double wave_eff = blocks > slots ? cudev_wave_eff(&d, (double)blocks, bpsm) : 1.0;
            // Later passes re-read the row: from L1 while the rows resident on an SM fit in
            // it, else from L2. A thread per position reading rows of its own (no kept
            // inner axis) uses a fraction of each memory transaction.
            double row_bytes = in_bytes / (double)s->npos / G;
            double pos_per_sm = ORCH_MIN((double)cupw_blocks_per_sm(&d, bs) * ppb,
                                         cudev_per_sm(&d, (double)s->npos * G));
            bool l1_fit = pos_per_sm * row_bytes <= cm->red_l1_bytes;
            double t_read = bytes / bw / util;
            double t_mem =
                t_read + (passes - 1) * in_bytes / (l1_fit ? cm->red_l1_bw : cm->red_l2_bw);
            if (tpr == 1 && s->inner == 1 && s->count > 1)
                t_mem *= ORCH_MIN(cm->red_own_row_max, (double)s->count);
            double elems = (double)s->npos * (double)s->count * passes;
            double t_issue = elems * ops / cudev_lane_rate(&d);
            // The dependent chain of one thread per wave, added: its share of the row, then
            // the combine steps (shuffles; barrier and the fold of the warps' partials; the
            // grid barrier and the fold of the blocks' partials).
            double iters = ceil((double)s->count / ((double)tpr * G)) * passes;
            double combine =
                tpr > 1 && !split ? cm->red_shuffle_steps * cm->red_shuffle_cycles * ctx.n_red : 0;
            if (split)
                combine += (cm->red_barrier_cycles + cm->red_fold_cycles * tpr) * ctx.n_red;
            else if (tpr > 32)
                combine += (cm->red_barrier_cycles + cm->red_fold_cycles * (bs / 32)) * ctx.n_red;
            if (G > 1)
                combine += (cm->red_grid_barrier_cycles + cm->red_grid_fold_cycles * G) * ctx.n_red;
            double t_chain = waves * (iters * cm->red_elem_cycles + combine) / clock;
            double score = ORCH_MAX(t_mem, t_issue) / wave_eff + t_chain + CUDA_ARCH.launch_s;
            KernelConfig *kc = G > 1 ? &grid[n_grid++] : &cand[n++];
            CuReduceConfig rcf = {.block = bs, .tpr = tpr, .split = split, .grid = G};
            cured_config_pack(&rcf, kc);
            kc->score = score;
            // The row-cached variant (a warp or a block per position, several passes): the
            // row is read once, later passes read registers (no re-reads, a register's
            // latency).
            int64_t step = (int64_t)tpr * G;
            int64_t slots_per_thread = (s->count + step - 1) / step;
            if ((split && G == 1) || tpr == 1 || passes < 2 || slots_per_thread > max_cache)
                continue;
            // Whether some pass after the first reads the cached tensor does not depend on
            // the shape: probed once, on the first config that could hold it.
            if (cache_ok < 0)
                cache_ok = cache_applies(pg, c, hw, opt, kc, (int)slots_per_thread);
            if (!cache_ok)
                continue;
            double per = (double)slots_per_thread;
            double t_chain_c =
                waves *
                (per * (cm->red_elem_cycles + cm->red_cache_pass_cycles * passes) + combine) /
                clock;
            kc = G > 1 ? &grid[n_grid++] : &cand[n++];
            rcf.cache = slots_per_thread;
            cured_config_pack(&rcf, kc);
            kc->score = ORCH_MAX(t_read, t_issue) / wave_eff + t_chain_c + CUDA_ARCH.launch_s;
        }
    }
    int m_grid = cgen_sort_configs(grid, n_grid, grid, ORCH_MIN(cm->red_grid_configs, k - 1));
    int m = cgen_sort_configs(cand, n, out, k - m_grid);
    for (int i = 0; i < m_grid; i++)
        out[m++] = grid[i];
    return m;
}
