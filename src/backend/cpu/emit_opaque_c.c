// The C target's operator kernels (cgen_opaque.h): one function per operator over the geometry
// codegen/opaque_spec.h describes. Every index is read, wrapped and checked as the reference op
// does before it addresses anything; a bad one sets the kernel's status (CKERNEL_ERR_INDEX) and
// is skipped, so hostile operands never reach memory outside the buffers. Arithmetic follows the
// reference ops exactly: sums accumulate in the element type one element at a time in the
// reference's order (float32 sums in float: one rounding of the exact sum, as the reference's
// double sum rounded to float32 gives; float16/bfloat16 rounded after every step), integer sums
// wrap, and orderings use keys that rank NaN above every number and -0 with +0.
#include "../../codegen/cexpr.h"
#include "../../codegen/opaque_values.h"
#include "cgen.h"
#include "cgen_opaque.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- configs ----

static const char *alg_name(int alg) {
    return alg == COPQ_ALG_SELECT ? "select" : alg == COPQ_ALG_RADIX ? "radix" : "plain";
}

void cgen_opq_config_pack(const COpqConfig *t, KernelConfig *k) {
    memset(k, 0, sizeof *k);
    k->cls = CCLS_OPAQUE;
    k->p[0] = t->alg;
    k->p[1] = t->par;
    snprintf(k->desc, sizeof k->desc, "cls=op alg=%s par=%d", alg_name(t->alg), (int)t->par);
}

void cgen_opq_config_unpack(const KernelConfig *k, COpqConfig *t) {
    t->alg = (int)k->p[0];
    t->par = k->p[1] != 0;
}

bool cgen_opq_supports(const PrimGraph *pg, const Candidate *c) {
    OpqSpec s;
    return opq_analyse(pg, c, &s, NULL, 0);
}

int cgen_opq_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                     int k) {
    OpqSpec s;
    if (!opq_analyse(pg, c, &s, NULL, 0))
        return 0;
    OpqWork w;
    opq_work(pg, &s, &w);
    KernelConfig cand[4];
    int n = 0;
    int algs[2] = {COPQ_ALG_PLAIN}, n_alg = 1;
    if (s.op == OPQ_TOPK) {
        algs[0] = COPQ_ALG_SELECT;
        algs[1] = COPQ_ALG_RADIX;
        n_alg = 2;
    }
    for (int a = 0; a < n_alg; a++)
        for (int par = 1; par >= 0; par--) {
            KernelConfig *kc = &cand[n++];
            cgen_opq_config_pack(&(COpqConfig){.alg = algs[a], .par = par}, kc);
            double ops = w.ops;
            if (algs[a] == COPQ_ALG_RADIX) // a pass per key byte: count, then move
                ops = 2 + 4.0 * (double)dtype_size(
                                    s.dt == DT_FLOAT16 || s.dt == DT_BFLOAT16 ? DT_FLOAT : s.dt);
            kc->score = cgen_estimate(hw, w.bytes, w.elems, ops, w.units, w.inner, par);
        }
    return cgen_sort_configs(cand, n, out, k);
}

// ---- emission helpers ----

typedef struct Em {
    const PrimGraph *pg;
    const OpqSpec *s;
    const char *fn;
    bool par;
    int alg;
    StrBuf *b;
} Em;

// "in[i]" of operand j.
static const char *arg_in(const Em *m, int j, char *buf, size_t n) {
    snprintf(buf, n, "in[%d]", m->s->in[j]);
    return buf;
}

static void pragma_for(const Em *m, int indent, const char *clauses) {
    if (m->par)
        sb_line(m->b, indent, "#pragma omp parallel for schedule(static)%s%s\n",
                *clauses ? " " : "", clauses);
}

// The kernel's signature (cgen_opaque.h): operand pointers in, output pointers out, a status
// returned.
static void head(const Em *m) {
    sb_printf(m->b, "int %s(const void *const *in, void *const *out) {\n", m->fn);
}

// Closes the kernel's outer loop and the kernel, which returns 0.
static int tail(const Em *m) {
    sb_line(m->b, 1, "}\n");
    sb_line(m->b, 1, "return 0;\n");
    sb_puts(m->b, "}\n");
    return ST_OK;
}

// Ends the kernel, its loops closed: CKERNEL_ERR_INDEX where an index it read was bad, else 0.
static int tail_checked(const Em *m) {
    sb_line(m->b, 1, "return bad ? %d : 0;\n", CKERNEL_ERR_INDEX);
    sb_puts(m->b, "}\n");
    return ST_OK;
}

// Reads index value v from `src`, wraps and checks it (opq_emit_index): a bad one sets the
// kernel's `bad` flag, which its return turns into CKERNEL_ERR_INDEX, and runs `on_bad`.
static void emit_index(const Em *m, int indent, const char *v, const char *src, const char *size,
                       const char *on_bad) {
    opq_emit_index(m->b, indent, v, src, size, "bad = 1;", on_bad);
}

// ---- TopK ----

// Entries (key, position) totally ordered: a higher key first, then a lower position. With 32-bit
// keys an entry is one uint64_t (key << 32 | ~position); with 64-bit keys a pair.
static void emit_topk_helpers(const Em *m) {
    StrBuf *b = m->b;
    const char *fn = m->fn;
    bool wide = opq_wide_key(m->s->dt);
    const char *kt = wide ? "uint64_t" : "uint32_t";
    if (wide) {
        sb_printf(b, "typedef struct { uint64_t k; uint32_t q; } %s_ent;\n", fn);
        sb_printf(b, "static inline int %s_gt(%s_ent a, %s_ent b) {\n", fn, fn, fn);
        sb_line(b, 1, "return a.k > b.k || (a.k == b.k && a.q > b.q);\n}\n");
        sb_printf(b, "static inline %s_ent %s_mk(uint64_t k, int64_t pos) {\n", fn, fn);
        sb_line(b, 1, "%s_ent e = {k, ~(uint32_t)pos};\n", fn);
        sb_line(b, 1, "return e;\n}\n");
        sb_printf(b, "static inline uint64_t %s_k(%s_ent e) { return e.k; }\n", fn, fn);
        sb_printf(b, "static inline int64_t %s_pos(%s_ent e) { return (int64_t)(uint32_t)~e.q; }\n",
                  fn, fn);
    } else {
        sb_printf(b, "typedef uint64_t %s_ent;\n", fn);
        sb_printf(b, "static inline int %s_gt(%s_ent a, %s_ent b) { return a > b; }\n", fn, fn, fn);
        sb_printf(b, "static inline %s_ent %s_mk(uint32_t k, int64_t pos) {\n", fn, fn);
        sb_line(b, 1, "return (uint64_t)k << 32 | (uint32_t)~(uint32_t)pos;\n}\n");
        sb_printf(b, "static inline uint32_t %s_k(%s_ent e) { return (uint32_t)(e >> 32); }\n", fn,
                  fn);
        sb_printf(
            b,
            "static inline int64_t %s_pos(%s_ent e) { return (int64_t)(uint32_t)~(uint32_t)e; "
            "}\n",
            fn, fn);
    }
    (void)kt;
    // A min-heap in the entries' order (the root is the worst entry kept): the final sort of the
    // k best and the selection's fallback.
    sb_printf(b, "static void %s_sift(%s_ent *h, int64_t n, int64_t i) {\n", fn, fn);
    sb_line(b, 1, "%s_ent v = h[i];\n", fn);
    sb_line(b, 1, "for (;;) {\n");
    sb_line(b, 2, "int64_t c = 2 * i + 1;\n");
    sb_line(b, 2, "if (c >= n)\n");
    sb_line(b, 3, "break;\n");
    sb_line(b, 2, "if (c + 1 < n && %s_gt(h[c], h[c + 1]))\n", fn);
    sb_line(b, 3, "c++;\n");
    sb_line(b, 2, "if (!%s_gt(v, h[c]))\n", fn);
    sb_line(b, 3, "break;\n");
    sb_line(b, 2, "h[i] = h[c];\n");
    sb_line(b, 2, "i = c;\n");
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "h[i] = v;\n");
    sb_puts(b, "}\n");
    // Sorts a[0..n) best first (heap sort: the worst goes last).
    sb_printf(b, "static void %s_sort(%s_ent *a, int64_t n) {\n", fn, fn);
    sb_line(b, 1, "for (int64_t j = n / 2 - 1; j >= 0; j--)\n");
    sb_line(b, 2, "%s_sift(a, n, j);\n", fn);
    sb_line(b, 1, "for (int64_t m = n; m > 1; m--) {\n");
    sb_line(b, 2, "%s_ent t = a[0];\n", fn);
    sb_line(b, 2, "a[0] = a[m - 1];\n");
    sb_line(b, 2, "a[m - 1] = t;\n");
    sb_line(b, 2, "%s_sift(a, m - 1, 0);\n", fn);
    sb_line(b, 1, "}\n");
    sb_puts(b, "}\n");
    if (m->alg != COPQ_ALG_SELECT)
        return;
    // Moves the k best of a[0..n) (distinct entries) to a[0..k), in any order (quickselect on a
    // median-of-three pivot). Each round splits the undecided range [lo, hi) without branches,
    // the better entries into hb and the others into lb (tmp holds both; a split with branches
    // mispredicted about half its compares on random keys), and keeps the side holding the k-th.
    // Past 64 rounds (an adversarial order) a heap of the k best finishes in n log k.
    sb_printf(b, "static void %s_select(%s_ent *a, %s_ent *tmp, int64_t n, int64_t k) {\n", fn, fn,
              fn);
    sb_line(b, 1, "%s_ent *hb = tmp, *lb = tmp + n;\n", fn);
    sb_line(b, 1, "int64_t lo = 0, hi = n;\n");
    sb_line(b, 1, "for (int round = 0; lo < k && hi - lo > 1; round++) {\n");
    sb_line(b, 2, "if (round == 64) {\n");
    sb_line(b, 3, "for (int64_t j = k / 2 - 1; j >= 0; j--)\n");
    sb_line(b, 4, "%s_sift(a, k, j);\n", fn);
    sb_line(b, 3, "for (int64_t j = k; j < n; j++)\n");
    sb_line(b, 4, "if (%s_gt(a[j], a[0])) {\n", fn);
    sb_line(b, 5, "%s_ent t = a[0];\n", fn);
    sb_line(b, 5, "a[0] = a[j];\n");
    sb_line(b, 5, "a[j] = t;\n");
    sb_line(b, 5, "%s_sift(a, k, 0);\n", fn);
    sb_line(b, 4, "}\n");
    sb_line(b, 3, "return;\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "%s_ent p0 = a[lo], p1 = a[lo + (hi - lo) / 2], p2 = a[hi - 1], p;\n", fn);
    sb_line(b, 2, "if (%s_gt(p0, p1))\n", fn);
    sb_line(b, 3, "p = %s_gt(p1, p2) ? p1 : %s_gt(p0, p2) ? p2 : p0;\n", fn, fn);
    sb_line(b, 2, "else\n");
    sb_line(b, 3, "p = %s_gt(p0, p2) ? p0 : %s_gt(p1, p2) ? p2 : p1;\n", fn, fn);
    sb_line(b, 2, "int64_t nb = 0, nl = 0;\n");
    sb_line(b, 2, "for (int64_t i = lo; i < hi; i++) {\n");
    sb_line(b, 3, "%s_ent e = a[i];\n", fn);
    sb_line(b, 3, "int g = %s_gt(e, p);\n", fn);
    sb_line(b, 3, "hb[nb] = e;\n");
    sb_line(b, 3, "lb[nl] = e;\n");
    sb_line(b, 3, "nb += g;\n");
    sb_line(b, 3, "nl += 1 - g;\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "memcpy(a + lo, hb, sizeof(%s_ent) * (size_t)nb);\n", fn);
    sb_line(b, 2, "memcpy(a + lo + nb, lb, sizeof(%s_ent) * (size_t)nl);\n", fn);
    // The pivot is the best of the others: when none is better, it alone is decided.
    sb_line(b, 2, "if (nb == 0) {\n");
    sb_line(b, 3, "for (int64_t i = lo; i < hi; i++)\n");
    sb_line(b, 4, "if (!%s_gt(p, a[i]) && !%s_gt(a[i], p)) {\n", fn, fn);
    sb_line(b, 5, "a[i] = a[lo];\n");
    sb_line(b, 5, "a[lo] = p;\n");
    sb_line(b, 5, "break;\n");
    sb_line(b, 4, "}\n");
    sb_line(b, 3, "lo++;\n");
    sb_line(b, 2, "} else if (lo + nb > k) {\n");
    sb_line(b, 3, "hi = lo + nb;\n");
    sb_line(b, 2, "} else {\n");
    sb_line(b, 3, "lo += nb;\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 1, "}\n");
    sb_puts(b, "}\n");
}

static int emit_topk(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt);
    opq_emit_key(b, OPQ_DIALECT_C, fn, s->dt, s->largest);
    emit_topk_helpers(m);
    bool wide = opq_wide_key(s->dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "yv");
    sb_line(b, 1, "int64_t *restrict yi = (int64_t *)out[1];\n");
    sb_line(b, 1, "const int64_t OUTER = %lld, LEN = %lld, INNER = %lld, K = %lld;\n",
            (long long)s->x.outer, (long long)s->x.len, (long long)s->x.inner, (long long)s->y.len);
    sb_line(b, 1, "int nomem = 0;\n");
    if (m->par)
        sb_line(b, 1, "#pragma omp parallel reduction(| : nomem)\n");
    sb_line(b, 1, "{\n");
    bool sel = m->alg == COPQ_ALG_SELECT;
    // Per thread: a buffer of candidate entries and the selection's two (select), or two of a
    // whole line's (radix); on the thread's stack up to 64 KiB, so a run allocates nothing but
    // for very long lines.
    int64_t K = s->y.len, LEN = s->x.len;
    int64_t room = K + (K > 64 ? K : 64), cap = room < LEN ? room : LEN;
    int64_t ents = sel ? 3 * cap : 2 * LEN, ent_bytes = wide ? 16 : 8;
    bool on_stack = ents * ent_bytes <= 65536;
    if (sel)
        // Room for the k kept and max(k, 64) more: a smaller buffer raises the bar sooner (fewer
        // blocks hold candidates), a larger one selects less often.
        sb_line(b, 2, "const int64_t CAP = %lld;\n", (long long)cap);
    if (on_stack) {
        sb_line(b, 2, "%s_ent h[%lld];\n", fn, (long long)ents);
    } else {
        sb_line(b, 2, "%s_ent *h = (%s_ent *)malloc(sizeof(%s_ent) * (size_t)%lld);\n", fn, fn, fn,
                (long long)ents);
        sb_line(b, 2, "if (!h)\n");
        sb_line(b, 3, "nomem = 1;\n");
    }
    if (m->par)
        sb_line(b, 2, "#pragma omp for schedule(static)\n");
    sb_line(b, 2, "for (int64_t line = 0; line < OUTER * INNER; line++) {\n");
    if (!on_stack) {
        sb_line(b, 3, "if (!h)\n");
        sb_line(b, 4, "continue;\n");
    }
    sb_line(b, 3, "int64_t o = line / INNER, i = line %% INNER;\n");
    sb_line(b, 3, "const %s *xl = x + o * LEN * INNER + i;\n", ct);
    if (sel) {
        // Candidates collect in h until it is full; then the k best stay and the worst key among
        // them becomes the bar. A later element that ties with the bar comes at a higher
        // position, so ranks lower: it is a candidate exactly when its key is above the bar.
        // Keys go in blocks of 64 (a vectorised loop); a block with none above the bar, the
        // common case once the bar is high, is passed over whole.
        const char *kt = wide ? "uint64_t" : "uint32_t";
        sb_line(b, 3, "int64_t n = 0;\n");
        sb_line(b, 3, "int barred = 0;\n");
        sb_line(b, 3, "%s bar = 0;\n", kt);
        sb_line(b, 3, "for (int64_t j0 = 0; j0 < LEN; j0 += 64) {\n");
        sb_line(b, 4, "int64_t nb = LEN - j0 < 64 ? LEN - j0 : 64;\n");
        sb_line(b, 4, "%s kb[64];\n", kt);
        sb_line(b, 4, "int any = 0;\n");
        sb_line(b, 4, "for (int64_t t = 0; t < nb; t++) {\n");
        sb_line(b, 5, "kb[t] = %s_key(xl[(j0 + t) * INNER]);\n", fn);
        sb_line(b, 5, "any |= kb[t] > bar;\n");
        sb_line(b, 4, "}\n");
        sb_line(b, 4, "if (barred && !any)\n");
        sb_line(b, 5, "continue;\n");
        // The block's candidates, listed without branches from its quarters that hold any (a
        // block mostly holds one or two); one the bar rises above while they are added is
        // harmless (the selection drops it).
        sb_line(b, 4, "int cand[64], nc = 0;\n");
        sb_line(b, 4, "for (int q0 = 0; q0 < nb; q0 += 16) {\n");
        sb_line(b, 5, "int q1 = q0 + 16 < nb ? q0 + 16 : (int)nb, some = !barred;\n");
        sb_line(b, 5, "for (int t = q0; t < q1; t++)\n");
        sb_line(b, 6, "some |= kb[t] > bar;\n");
        sb_line(b, 5, "if (!some)\n");
        sb_line(b, 6, "continue;\n");
        sb_line(b, 5, "for (int t = q0; t < q1; t++) {\n");
        sb_line(b, 6, "cand[nc] = t;\n");
        sb_line(b, 6, "nc += !barred | (kb[t] > bar);\n");
        sb_line(b, 5, "}\n");
        sb_line(b, 4, "}\n");
        sb_line(b, 4, "for (int q = 0; q < nc; q++) {\n");
        sb_line(b, 5, "int t = cand[q];\n");
        sb_line(b, 5, "h[n++] = %s_mk(kb[t], j0 + t);\n", fn);
        sb_line(b, 5, "if (n == CAP && n > K) {\n");
        sb_line(b, 6, "%s_select(h, h + CAP, n, K);\n", fn);
        sb_line(b, 6, "n = K;\n");
        sb_line(b, 6, "%s_ent w = h[0];\n", fn);
        sb_line(b, 6, "for (int64_t q = 1; q < K; q++)\n");
        sb_line(b, 7, "w = %s_gt(w, h[q]) ? h[q] : w;\n", fn);
        sb_line(b, 6, "bar = %s_k(w);\n", fn);
        sb_line(b, 6, "barred = 1;\n");
        sb_line(b, 5, "}\n");
        sb_line(b, 4, "}\n");
        sb_line(b, 3, "}\n");
        sb_line(b, 3, "if (n > K)\n");
        sb_line(b, 4, "%s_select(h, h + CAP, n, K);\n", fn);
        sb_line(b, 3, "%s_sort(h, K);\n", fn);
        sb_line(b, 3, "const %s_ent *best = h;\n", fn);
    } else {
        // A stable LSD radix sort on the inverted keys (best first), positions ascending within
        // equal keys since the line is read in order; a byte all entries share is skipped.
        sb_line(b, 3, "%s_ent *a = h, *t = h + LEN;\n", fn);
        sb_line(b, 3, "for (int64_t j = 0; j < LEN; j++)\n");
        sb_line(b, 4, "a[j] = %s_mk(%s_key(xl[j * INNER]), j);\n", fn, fn);
        sb_line(b, 3, "for (int sh = 0; sh < %d; sh += 8) {\n", wide ? 64 : 32);
        sb_line(b, 4, "int64_t cnt[256] = {0};\n");
        sb_line(b, 4, "for (int64_t j = 0; j < LEN; j++)\n");
        sb_line(b, 5, "cnt[(~%s_k(a[j]) >> sh) & 255]++;\n", fn);
        sb_line(b, 4, "if (cnt[(~%s_k(a[0]) >> sh) & 255] == LEN)\n", fn);
        sb_line(b, 5, "continue;\n");
        sb_line(b, 4, "int64_t at = 0;\n");
        sb_line(b, 4, "for (int d = 0; d < 256; d++) {\n");
        sb_line(b, 5, "int64_t c = cnt[d];\n");
        sb_line(b, 5, "cnt[d] = at;\n");
        sb_line(b, 5, "at += c;\n");
        sb_line(b, 4, "}\n");
        sb_line(b, 4, "for (int64_t j = 0; j < LEN; j++)\n");
        sb_line(b, 5, "t[cnt[(~%s_k(a[j]) >> sh) & 255]++] = a[j];\n", fn);
        sb_line(b, 4, "%s_ent *sw = a;\n", fn);
        sb_line(b, 4, "a = t;\n");
        sb_line(b, 4, "t = sw;\n");
        sb_line(b, 3, "}\n");
        sb_line(b, 3, "const %s_ent *best = a;\n", fn);
    }
    sb_line(b, 3, "for (int64_t j = 0; j < K; j++) {\n");
    sb_line(b, 4, "int64_t pos = %s_pos(best[j]), to = (o * K + j) * INNER + i;\n", fn);
    opq_emit_topk_store(b, 4, "pos");
    sb_line(b, 3, "}\n");
    sb_line(b, 2, "}\n");
    if (!on_stack)
        sb_line(b, 2, "free(h);\n");
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "return nomem ? %d : 0;\n", CKERNEL_ERR_NOMEM);
    sb_puts(b, "}\n");
    return ST_OK;
}

// ---- CumSum ----

static int emit_cumsum(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt);
    DType t = s->dt;
    char a1[32], step[320];
    sb_printf(b, "static const int64_t %s_geo[%d][3] = {", fn, s->rank);
    for (int a = 0; a < s->rank; a++) {
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < a; d++)
            outer *= s->dims[d];
        for (int d = a + 1; d < s->rank; d++)
            inner *= s->dims[d];
        sb_printf(b, "%s{%lld, %lld, %lld}", a ? ", " : "", (long long)outer, (long long)s->dims[a],
                  (long long)inner);
    }
    sb_puts(b, "};\n");
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "y");
    // The axis is read here: one kernel serves every CumSum of this signature (opaque_spec.h).
    sb_line(b, 1, "int64_t a = (int64_t)*(const %s *)%s;\n", cgen_ctype(s->idx_dt),
            arg_in(m, 1, a1, sizeof a1));
    sb_line(b, 1, "if (a < -%d || a >= %d)\n", s->rank, s->rank);
    sb_line(b, 2, "return %d;\n", CKERNEL_ERR_INDEX);
    sb_line(b, 1, "if (a < 0)\n");
    sb_line(b, 2, "a += %d;\n", s->rank);
    sb_line(b, 1, "const int64_t OUTER = %s_geo[a][0], LEN = %s_geo[a][1], INNER = %s_geo[a][2];\n",
            fn, fn, fn);
    sb_line(b, 1, "const %s zero = 0;\n", ct);
    // Along the last axis: one line per task, its sum in a register (the stored value: exact).
    sb_line(b, 1, "if (INNER == 1) {\n");
    pragma_for(m, 2, "");
    sb_line(b, 2, "for (int64_t o = 0; o < OUTER; o++) {\n");
    sb_line(b, 3, "const %s *xl = x + o * LEN;\n", ct);
    sb_line(b, 3, "%s *yl = y + o * LEN;\n", ct);
    sb_line(b, 3, "%s acc = zero;\n", ct);
    sb_line(b, 3, "for (int64_t st = 0; st < LEN; st++) {\n");
    sb_line(b, 4, "int64_t j = %s;\n", s->reverse ? "LEN - 1 - st" : "st");
    opq_emit_cumsum_acc(b, 4, t, s->exclusive, "acc", "xl[j]", "yl[j]");
    sb_line(b, 3, "}\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "return 0;\n");
    sb_line(b, 1, "}\n");
    // Across rows: row j's sums from row j-1's (stored, so exact) and a row of x, in chunks of
    // contiguous columns (vectorised, streamed).
    sb_line(b, 1, "const int64_t C = INNER < 512 ? INNER : 512, NC = (INNER + C - 1) / C;\n");
    if (m->par)
        sb_line(b, 1, "#pragma omp parallel for collapse(2) schedule(static)\n");
    sb_line(b, 1, "for (int64_t o = 0; o < OUTER; o++)\n");
    sb_line(b, 2, "for (int64_t ch = 0; ch < NC; ch++) {\n");
    sb_line(b, 3, "int64_t i0 = ch * C, i1 = i0 + C < INNER ? i0 + C : INNER;\n");
    sb_line(b, 3, "const %s *xo = x + o * LEN * INNER;\n", ct);
    sb_line(b, 3, "%s *yo = y + o * LEN * INNER;\n", ct);
    sb_line(b, 3, "int64_t j = %s;\n", s->reverse ? "LEN - 1" : "0");
    sb_line(b, 3, "for (int64_t i = i0; i < i1; i++)\n");
    if (s->exclusive) {
        sb_line(b, 4, "yo[j * INNER + i] = zero;\n");
    } else {
        opq_cumsum_step(t, "zero", "xo[j * INNER + i]", step, sizeof step);
        sb_line(b, 4, "yo[j * INNER + i] = %s;\n", step); // 0 + x: -0 becomes +0 as in the op
    }
    sb_line(b, 3, "for (int64_t st = 1; st < LEN; st++) {\n");
    sb_line(b, 4, "int64_t jp = j;\n");
    sb_line(b, 4, "j = %s;\n", s->reverse ? "LEN - 1 - st" : "st");
    sb_line(b, 4, "const %s *yp = yo + jp * INNER, *xr = xo + %s * INNER;\n", ct,
            s->exclusive ? "jp" : "j");
    sb_line(b, 4, "%s *yr = yo + j * INNER;\n", ct);
    opq_cumsum_step(t, "yp[i]", "xr[i]", step, sizeof step);
    sb_line(b, 4, "for (int64_t i = i0; i < i1; i++)\n");
    sb_line(b, 5, "yr[i] = %s;\n", step);
    sb_line(b, 3, "}\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 1, "return 0;\n");
    sb_puts(b, "}\n");
    return ST_OK;
}

// ---- Hardmax ----

static int emit_hardmax(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt);
    opq_emit_key(b, OPQ_DIALECT_C, fn, s->dt, true);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "y");
    sb_line(b, 1, "const int64_t OUTER = %lld, LEN = %lld, INNER = %lld;\n", (long long)s->x.outer,
            (long long)s->x.len, (long long)s->x.inner);
    opq_emit_hardmax_consts(b, 1, s->dt);
    pragma_for(m, 1, "");
    sb_line(b, 1, "for (int64_t line = 0; line < OUTER * INNER; line++) {\n");
    sb_line(b, 2,
            "int64_t o = line / INNER, i = line %% INNER, base = o * LEN * INNER + i, bj = 0;\n");
    opq_emit_hardmax_scan(b, OPQ_DIALECT_C, fn, s->dt);
    return tail(m);
}

// ---- Trilu ----

static int emit_trilu(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    size_t es = dtype_size(s->dt);
    char a1[32];
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, "char", "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, "char", "y");
    sb_line(b, 1, "const int64_t MATS = %lld, ROWS = %lld, COLS = %lld;\n", (long long)s->x.outer,
            (long long)s->x.len, (long long)s->x.inner);
    opq_emit_trilu_k(b, s, arg_in(m, 1, a1, sizeof a1));
    pragma_for(m, 1, "");
    sb_line(b, 1, "for (int64_t row = 0; row < MATS * ROWS; row++) {\n");
    sb_line(b, 2, "int64_t r = row %% ROWS;\n");
    // upper: keep columns c >= r + k; lower: keep c <= r + k, i.e. c < r + k + 1.
    sb_line(b, 2, "int64_t cut = r + k%s;\n", s->upper ? "" : " + 1");
    sb_line(b, 2, "cut = cut < 0 ? 0 : cut > COLS ? COLS : cut;\n");
    sb_line(b, 2, "const char *xr = x + (size_t)(row * COLS) * %zu;\n", es);
    sb_line(b, 2, "char *yr = y + (size_t)(row * COLS) * %zu;\n", es);
    if (s->upper) {
        sb_line(b, 2, "memset(yr, 0, (size_t)cut * %zu);\n", es);
        sb_line(b, 2,
                "memcpy(yr + (size_t)cut * %zu, xr + (size_t)cut * %zu, (size_t)(COLS - cut) * "
                "%zu);\n",
                es, es, es);
    } else {
        sb_line(b, 2, "memcpy(yr, xr, (size_t)cut * %zu);\n", es);
        sb_line(b, 2, "memset(yr + (size_t)cut * %zu, 0, (size_t)(COLS - cut) * %zu);\n", es, es);
    }
    return tail(m);
}

// ---- Gather ----

static int emit_gather(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *it = cgen_ctype(s->idx_dt);
    size_t es = dtype_size(s->dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, "char", "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, it, "idx", m->s->in[1]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, "char", "y");
    sb_line(b, 1, "const int64_t OUTER = %lld, SIZE = %lld, INNER = %lld, COUNT = %lld;\n",
            (long long)s->x.outer, (long long)s->x.len, (long long)s->x.inner,
            (long long)s->tuples);
    sb_line(b, 1, "int bad = 0;\n");
    // Each output block (o, j) is the data's block (o, idx[j]).
    pragma_for(m, 1, "reduction(| : bad)");
    sb_line(b, 1, "for (int64_t r = 0; r < OUTER * COUNT; r++) {\n");
    sb_line(b, 2, "int64_t o = r / COUNT, j = r %% COUNT;\n");
    emit_index(m, 2, "v", "idx[j]", "SIZE", "continue;");
    sb_line(b, 2,
            "memcpy(y + (size_t)(r * INNER) * %zu, x + (size_t)((o * SIZE + v) * INNER) * %zu, "
            "(size_t)INNER * %zu);\n",
            es, es, es);
    sb_line(b, 1, "}\n");
    return tail_checked(m);
}

// ---- GatherElements, ScatterElements ----

// y = combine(y, u) for the scatter ops' reduction (opq_emit_combine).
static void emit_combine(const Em *m, int indent, const char *yv, const char *uv) {
    opq_emit_combine(m->b, OPQ_DIALECT_C, indent, m->s->dt, m->s->red, yv, uv);
}

// Emits static const tables fn_id (the index dims) and fn_xs (the data strides) and the C
// expressions of the data offset of an index line's outer part (o) and inner position (i).
static void elements_offsets(const Em *m, char *off_o, size_t no, char *off_i, size_t ni) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    if (s->same_off_axis) {
        snprintf(off_o, no, "o * %lld", (long long)(s->x.len * s->x.inner));
        snprintf(off_i, ni, "i");
        return;
    }
    sb_printf(b, "static const int64_t %s_id[%d] = {", m->fn, s->rank);
    for (int d = 0; d < s->rank; d++)
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)s->idx_dims[d]);
    sb_printf(b, "};\nstatic const int64_t %s_xs[%d] = {", m->fn, s->rank);
    for (int d = 0; d < s->rank; d++)
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)s->strides[d]);
    sb_puts(b, "};\n");
    // Sum over the axes [from, to) of the coordinates of q (in the index dims) times the data's
    // strides.
    sb_printf(b, "static inline int64_t %s_off(int64_t q, int from, int to) {\n", m->fn);
    sb_line(b, 1, "int64_t off = 0;\n");
    sb_line(b, 1, "for (int d = to - 1; d >= from; d--) {\n");
    sb_line(b, 2, "off += q %% %s_id[d] * %s_xs[d];\n", m->fn, m->fn);
    sb_line(b, 2, "q /= %s_id[d];\n", m->fn);
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "return off;\n");
    sb_puts(b, "}\n");
    snprintf(off_o, no, "%s_off(o, 0, %d)", m->fn, s->axis);
    snprintf(off_i, ni, "%s_off(i, %d, %d)", m->fn, s->axis + 1, s->rank);
}

static int emit_elements(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    bool scatter = s->op == OPQ_SCATTER_ELEMENTS;
    char off_o[96], off_i[96];
    elements_offsets(m, off_o, sizeof off_o, off_i, sizeof off_i);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, it, "idx", m->s->in[1]);
    if (scatter)
        opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "u", m->s->in[2]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "y");
    // Index lines [OUTER, LEN, INNER] around the axis; the data's axis is XLEN long, its
    // positions XSTRIDE apart.
    sb_line(b, 1,
            "const int64_t OUTER = %lld, LEN = %lld, INNER = %lld, XLEN = %lld, XSTRIDE = "
            "%lld;\n",
            (long long)s->y.outer, (long long)s->y.len, (long long)s->y.inner, (long long)s->x.len,
            (long long)s->x.inner);
    sb_line(b, 1, "int bad = 0;\n");
    if (scatter) {
        sb_line(b, 1, "const int64_t N = %lld;\n", (long long)(s->x.outer * s->x.len * s->x.inner));
        pragma_for(m, 1, "");
        sb_line(b, 1, "for (int64_t c = 0; c < N; c += 4096)\n");
        sb_line(b, 2, "memcpy(y + c, x + c, sizeof(%s) * (size_t)(N - c < 4096 ? N - c : 4096));\n",
                ct);
    }
    // Blocks of an index line's inner positions: every update of one data element comes from
    // one (o, i), in increasing j as the reference visits them, so (o, block) pairs are
    // independent.
    sb_line(b, 1, "const int64_t B = INNER < 64 ? INNER : 64, NB = (INNER + B - 1) / B;\n");
    if (m->par)
        sb_line(b, 1, "#pragma omp parallel for collapse(2) schedule(static) reduction(| : bad)\n");
    sb_line(b, 1, "for (int64_t o = 0; o < OUTER; o++)\n");
    sb_line(b, 2, "for (int64_t blk = 0; blk < NB; blk++) {\n");
    sb_line(b, 3, "int64_t i0 = blk * B, i1 = i0 + B < INNER ? i0 + B : INNER, xo = %s;\n", off_o);
    sb_line(b, 3, "for (int64_t j = 0; j < LEN; j++)\n");
    sb_line(b, 4, "for (int64_t i = i0; i < i1; i++) {\n");
    sb_line(b, 5, "int64_t k = (o * LEN + j) * INNER + i;\n");
    emit_index(m, 5, "v", "idx[k]", "XLEN", "continue;");
    sb_line(b, 5, "int64_t at = xo + v * XSTRIDE + %s;\n", off_i);
    if (scatter)
        emit_combine(m, 5, "y[at]", "u[k]");
    else
        sb_line(b, 5, "y[k] = x[at];\n");
    sb_line(b, 4, "}\n");
    sb_line(b, 2, "}\n");
    return tail_checked(m);
}

// ---- GatherND, ScatterND ----

// The data offset of index tuple t's slice into `off` (validating each index), as nd_offsets
// (src/ops/indexing.c) computes it.
static void emit_nd_offset(const Em *m, int indent, const char *on_bad) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    sb_line(b, indent, "int64_t off = 0;\n");
    sb_line(b, indent, "int ok = 1;\n");
    sb_line(b, indent, "for (int64_t q = 0; q < DEPTH; q++) {\n");
    sb_line(b, indent + 1, "int64_t dim = %s_xd[%lld + q];\n", m->fn, (long long)s->batch);
    emit_index(m, indent + 1, "v", "idx[t * DEPTH + q]", "dim", "ok = 0;\nbreak;");
    sb_line(b, indent + 1, "off = off * dim + v;\n");
    sb_line(b, indent, "}\n");
    sb_line(b, indent, "if (!ok)\n");
    sb_line(b, indent + 1, "%s\n", on_bad);
}

static int emit_nd(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    bool scatter = s->op == OPQ_SCATTER_ND;
    sb_printf(b, "static const int64_t %s_xd[%d] = {", fn, s->rank);
    for (int d = 0; d < s->rank; d++)
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
    sb_puts(b, "};\n");
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, it, "idx", m->s->in[1]);
    if (scatter)
        opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "u", m->s->in[2]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "y");
    sb_line(b, 1, "const int64_t TUPLES = %lld, DEPTH = %lld, SLICE = %lld;\n",
            (long long)s->tuples, (long long)s->depth, (long long)s->slice);
    sb_line(b, 1, "int bad = 0;\n");
    if (!scatter) {
        sb_line(b, 1, "const int64_t PER_BATCH = %lld, BLOCK = %lld;\n", (long long)s->per_batch,
                (long long)s->block);
        pragma_for(m, 1, "reduction(| : bad)");
        sb_line(b, 1, "for (int64_t t = 0; t < TUPLES; t++) {\n");
        emit_nd_offset(m, 2, "continue;");
        sb_line(b, 2,
                "const %s *src = x + (PER_BATCH ? t / PER_BATCH : 0) * BLOCK + off * SLICE;\n", ct);
        sb_line(b, 2, "memcpy(y + t * SLICE, src, sizeof(%s) * (size_t)SLICE);\n", ct);
        sb_line(b, 1, "}\n");
    } else {
        sb_line(b, 1, "const int64_t N = %lld;\n",
                (long long)(s->block)); // batch_dims is 0: the whole data
        pragma_for(m, 1, "");
        sb_line(b, 1, "for (int64_t c = 0; c < N; c += 4096)\n");
        sb_line(b, 2, "memcpy(y + c, x + c, sizeof(%s) * (size_t)(N - c < 4096 ? N - c : 4096));\n",
                ct);
        // Tuples may repeat, so they apply in order; slice positions are independent (a tuple's
        // element s only meets other tuples' element s), so chunks of the slice go in parallel.
        sb_line(b, 1, "const int64_t C = SLICE < 1024 ? SLICE : 1024, NC = (SLICE + C - 1) / C;\n");
        pragma_for(m, 1, "reduction(| : bad)");
        sb_line(b, 1, "for (int64_t ch = 0; ch < NC; ch++) {\n");
        sb_line(b, 2, "int64_t s0 = ch * C, s1 = s0 + C < SLICE ? s0 + C : SLICE;\n");
        sb_line(b, 2, "for (int64_t t = 0; t < TUPLES; t++) {\n");
        emit_nd_offset(m, 3, "continue;");
        sb_line(b, 3, "%s *yt = y + off * SLICE;\n", ct);
        sb_line(b, 3, "const %s *ut = u + t * SLICE;\n", ct);
        sb_line(b, 3, "for (int64_t e = s0; e < s1; e++)\n");
        emit_combine(m, 4, "yt[e]", "ut[e]");
        sb_line(b, 2, "}\n");
        sb_line(b, 1, "}\n");
    }
    return tail_checked(m);
}

// ---- OneHot ----

static int emit_one_hot(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, it, "ind", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "vals", m->s->in[2]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "y");
    sb_line(b, 1, "const int64_t OUTER = %lld, DEPTH = %lld, INNER = %lld;\n",
            (long long)s->y.outer, (long long)s->y.len, (long long)s->y.inner);
    sb_line(b, 1, "const %s off = vals[0], on = vals[1];\n", ct);
    pragma_for(m, 1, "");
    sb_line(b, 1, "for (int64_t o = 0; o < OUTER; o++) {\n");
    sb_line(b, 2, "%s *yo = y + o * DEPTH * INNER;\n", ct);
    sb_line(b, 2, "for (int64_t e = 0; e < DEPTH * INNER; e++)\n");
    sb_line(b, 3, "yo[e] = off;\n");
    // An index outside [-depth, depth) selects nothing (no error), as the reference op.
    sb_line(b, 2, "for (int64_t i = 0; i < INNER; i++) {\n");
    opq_emit_one_hot_index(b, 3);
    sb_line(b, 3, "if (v >= 0 && v < DEPTH)\n");
    sb_line(b, 4, "yo[v * INNER + i] = on;\n");
    sb_line(b, 2, "}\n");
    return tail(m);
}

// ---- ReverseSequence ----

static int emit_reverse_sequence(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *it = cgen_ctype(s->idx_dt);
    size_t es = dtype_size(s->dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, "char", "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, it, "lens", m->s->in[1]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, "char", "y");
    sb_line(b, 1, "const int64_t D0 = %lld, D1 = %lld, REST = %lld, T = %lld, NB = %lld;\n",
            (long long)s->dims[0], (long long)s->dims[1], (long long)s->rest,
            (long long)s->dims[s->time_axis], (long long)s->dims[s->batch_axis]);
    // Every length is checked before anything is written, as the reference op does.
    sb_line(b, 1, "for (int64_t bi = 0; bi < NB; bi++)\n");
    sb_line(b, 2, "if ((int64_t)lens[bi] < 0 || (int64_t)lens[bi] > T)\n");
    sb_line(b, 3, "return %d;\n", CKERNEL_ERR_INDEX);
    pragma_for(m, 1, "");
    sb_line(b, 1, "for (int64_t r = 0; r < D0 * D1; r++) {\n");
    sb_line(b, 2, "int64_t d0 = r / D1, d1 = r %% D1;\n");
    sb_line(b, 2, "int64_t bi = %s, t = %s, len = (int64_t)lens[bi];\n",
            s->batch_axis == 0 ? "d0" : "d1", s->batch_axis == 0 ? "d1" : "d0");
    sb_line(b, 2, "int64_t ts = t < len ? len - 1 - t : t;\n");
    sb_line(b, 2, "int64_t from = %s;\n", s->batch_axis == 0 ? "d0 * D1 + ts" : "ts * D1 + d1");
    sb_line(b, 2,
            "memcpy(y + (size_t)(r * REST) * %zu, x + (size_t)(from * REST) * %zu, "
            "(size_t)REST * %zu);\n",
            es, es, es);
    return tail(m);
}

// ---- LpPool ----

// Each output element sums |x|^p over its window's taps inside the input in the reference's
// order, in double with pow as pool.c does, then takes the 1/p power.
static int emit_lp_pool(const Em *m) {
    const OpqSpec *s = m->s;
    const PoolGeom *g = &s->pool;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt);
    char y[96];
    const char *names[] = {"k", "s", "d", "pb", "in", "out"};
    const int64_t *vals[] = {g->k, g->s, g->d, g->pb, g->in, g->out};
    for (int a = 0; a < 6; a++) {
        sb_printf(b, "static const int64_t %s_%s[%d] = {", fn, names[a], g->S);
        for (int i = 0; i < g->S; i++)
            sb_printf(b, "%s%lld", i ? ", " : "", (long long)vals[a][i]);
        sb_puts(b, "};\n");
    }
    int64_t plane, outs, taps;
    opq_pool_sizes(g, &plane, &outs, &taps);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, ct, "y");
    sb_line(b, 1, "const int64_t PLANES = %lld, PLANE = %lld, OUTS = %lld, TAPS = %lld;\n",
            (long long)(s->dims[0] * s->dims[1]), (long long)plane, (long long)outs,
            (long long)taps);
    // P through a volatile read: the compiler must call pow as the reference does, not fold
    // pow(v, 2.0) into v * v and fuse that into the sum (an FMA rounds differently).
    sb_line(b, 1, "volatile double p_in = %.17g;\n", g->p);
    sb_line(b, 1, "const double P = p_in;\n");
    pragma_for(m, 1, "");
    sb_line(b, 1, "for (int64_t r = 0; r < PLANES * OUTS; r++) {\n");
    sb_line(b, 2, "int64_t q = r %% OUTS, o[%d];\n", g->S);
    sb_line(b, 2, "for (int i = %d; i >= 0; i--) {\n", g->S - 1);
    sb_line(b, 3, "o[i] = q %% %s_out[i];\n", fn);
    sb_line(b, 3, "q /= %s_out[i];\n", fn);
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "const %s *xp = x + (r / OUTS) * PLANE;\n", ct);
    sb_line(b, 2, "double acc = 0;\n");
    sb_line(b, 2, "for (int64_t tap = 0; tap < TAPS; tap++) {\n");
    sb_line(b, 3, "int64_t t = tap, row = 0, kk[%d];\n", g->S);
    sb_line(b, 3, "int inside = 1;\n");
    sb_line(b, 3, "for (int i = %d; i >= 0; i--) {\n", g->S - 1);
    sb_line(b, 4, "kk[i] = t %% %s_k[i];\n", fn);
    sb_line(b, 4, "t /= %s_k[i];\n", fn);
    sb_line(b, 3, "}\n");
    sb_line(b, 3, "for (int i = 0; i < %d; i++) {\n", g->S);
    sb_line(b, 4, "int64_t pos = o[i] * %s_s[i] - %s_pb[i] + kk[i] * %s_d[i];\n", fn, fn, fn);
    sb_line(b, 4, "inside = inside && pos >= 0 && pos < %s_in[i];\n", fn);
    sb_line(b, 4, "row = row * %s_in[i] + pos;\n", fn);
    sb_line(b, 3, "}\n");
    opq_emit_lp_tap(b, OPQ_DIALECT_C, s->dt);
    if (g->p == 1)
        sb_line(b, 3, "acc += v;\n");
    else if (g->p == 2 && s->dt != DT_DOUBLE) // a float's square is exact in double, as pow's
        sb_line(b, 3, "acc += v * v;\n");
    else
        sb_line(b, 3, "acc += pow(v, P);\n");
    sb_line(b, 2, "}\n");
    // A double result goes to a half type through float rounded to odd, as elem_set_f64 does.
    opq_store_f(s->dt,
                s->dt == DT_DOUBLE  ? "pow(acc, 1.0 / P)"
                : s->dt == DT_FLOAT ? "(float)pow(acc, 1.0 / P)"
                                    : "orch_f32_round_odd(pow(acc, 1.0 / P))",
                y, sizeof y);
    sb_line(b, 2, "y[r] = %s;\n", y);
    return tail(m);
}

// ---- GridSample, RoiAlign ----

// The shared helpers (opaque_values.c) compute each value in double as src/ops/sample.c does.
// GridSample: a grid point per iteration, its taps and weights found once for every channel;
// RoiAlign: a bin of a ROI per iteration, its samples found once for each block of 64 channels,
// every batch index checked before anything is written.
static int emit_sample(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *xt = cgen_ctype(s->dt), *ct = cgen_ctype(s->dt2);
    char y[448], v[320];
    opq_emit_sample_helpers(b, OPQ_DIALECT_C, fn, s);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, xt, "x", s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, ct, "c2", s->in[1]);
    opq_emit_out_ptr(b, OPQ_DIALECT_C, 1, xt, "y");
    if (s->op == OPQ_GRID_SAMPLE) {
        // A grid point per iteration: its plan once, then every channel's value.
        const GridSampleGeom *g = &s->gs;
        sb_line(b, 1, "const int64_t PTS = %lld, C = %lld, PLANE = %lld;\n", (long long)g->points,
                (long long)g->C, (long long)g->plane);
        pragma_for(m, 1, "");
        sb_line(b, 1, "for (int64_t pt = 0; pt < %lld; pt++) {\n", (long long)(g->N * g->points));
        sb_line(b, 2, "const int64_t n = pt / PTS, p = pt %% PTS;\n");
        sb_line(b, 2, "%s_plan P;\n", fn);
        sb_line(b, 2, "%s_plan_of(c2 + pt * %d, &P);\n", fn, g->sr);
        sb_line(b, 2, "for (int64_t c = 0; c < C; c++) {\n");
        sb_line(b, 3, "const int64_t k = (n * C + c) * PTS + p;\n");
        snprintf(v, sizeof v, "%s_out(%s_apply(x + (n * C + c) * PLANE, &P))", fn, fn);
        opq_sample_store(s->dt, v, y, sizeof y);
        sb_line(b, 3, "y[k] = %s;\n", y);
    } else {
        // A bin of a ROI per iteration: its samples found once for a block of channels.
        const RoiAlignGeom *g = &s->ra;
        const int64_t CB = 64;
        opq_emit_in_ptr(b, OPQ_DIALECT_C, 1, cgen_ctype(s->idx_dt), "bi", s->in[2]);
        sb_line(b, 1, "const int64_t BINS = %lld, OW = %lld, C = %lld, PLANE = %lld, CB = %lld;\n",
                (long long)(g->OH * g->OW), (long long)g->OW, (long long)g->C,
                (long long)(g->H * g->W), (long long)CB);
        sb_line(b, 1, "for (int64_t q = 0; q < %lld; q++)\n", (long long)g->R);
        sb_line(b, 2, "if ((int64_t)bi[q] < 0 || (int64_t)bi[q] >= %lld)\n", (long long)g->N);
        sb_line(b, 3, "return %d;\n", CKERNEL_ERR_INDEX);
        pragma_for(m, 1, "");
        sb_line(b, 1, "for (int64_t pt = 0; pt < %lld; pt++) {\n",
                (long long)(g->R * g->OH * g->OW));
        sb_line(b, 2,
                "const int64_t q = pt / BINS, bin = pt %% BINS, ph = bin / OW, pw = bin %% OW;\n");
        sb_line(b, 2, "%s_bins B;\n", fn);
        sb_line(b, 2, "%s_bins_of(c2 + q * 4, &B);\n", fn);
        sb_line(b, 2, "const %s *xn = x + (int64_t)bi[q] * C * PLANE;\n", xt);
        sb_line(b, 2, "for (int64_t c0 = 0; c0 < C; c0 += CB) {\n");
        sb_line(b, 3, "const int64_t cn = C - c0 < CB ? C - c0 : CB;\n");
        sb_line(b, 3, "double acc[%lld];\n", (long long)CB);
        sb_line(b, 3, "for (int64_t c = 0; c < cn; c++)\n");
        sb_line(b, 4, "acc[c] = 0;\n");
        sb_line(b, 3, "int first = 1;\n");
        sb_line(b, 3, "for (int64_t iy = 0; iy < B.gh; iy++)\n");
        sb_line(b, 4, "for (int64_t ix = 0; ix < B.gw; ix++) {\n");
        sb_line(b, 5, "int64_t p[4];\n");
        sb_line(b, 5, "double w[4];\n");
        sb_line(b, 5, "%s_tap(&B, ph, pw, iy, ix, p, w);\n", fn);
        sb_line(b, 5, "for (int64_t c = 0; c < cn; c++)\n");
        sb_line(b, 6, "acc[c] = %s_fold(acc[c], first, xn + (c0 + c) * PLANE, p, w);\n", fn);
        sb_line(b, 5, "first = 0;\n");
        sb_line(b, 4, "}\n");
        sb_line(b, 3, "for (int64_t c = 0; c < cn; c++)\n");
        snprintf(v, sizeof v, "%s_out(%s_end(acc[c], &B))", fn, fn);
        opq_sample_store(s->dt, v, y, sizeof y);
        sb_line(b, 4, "y[(q * C + c0 + c) * BINS + bin] = %s;\n", y);
    }
    sb_line(b, 2, "}\n");
    tail(m);
    opq_emit_sample_close(b, OPQ_DIALECT_C);
    return ST_OK;
}

int cgen_opq_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                  StrBuf *src, Err *e) {
    OpqSpec s;
    char why[160];
    if (cfg->cls != CCLS_OPAQUE || !opq_analyse(pg, c, &s, why, sizeof why))
        return err_set(e, ST_UNSUPPORTED, "kernel %s: not an operator kernel (%s)", fn,
                       cfg->cls != CCLS_OPAQUE ? "another class's config" : why);
    COpqConfig t;
    cgen_opq_config_unpack(cfg, &t);
    bool topk = s.op == OPQ_TOPK;
    if (topk ? (t.alg != COPQ_ALG_SELECT && t.alg != COPQ_ALG_RADIX) : t.alg != COPQ_ALG_PLAIN)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: algorithm %d is not one of %s's", fn, t.alg,
                       opq_op_name(s.op));
    Em m = {pg, &s, fn, t.par, t.alg, src};
    switch (s.op) {
    case OPQ_TOPK: return emit_topk(&m);
    case OPQ_CUMSUM: return emit_cumsum(&m);
    case OPQ_HARDMAX: return emit_hardmax(&m);
    case OPQ_TRILU: return emit_trilu(&m);
    case OPQ_GATHER: return emit_gather(&m);
    case OPQ_GATHER_ELEMENTS:
    case OPQ_SCATTER_ELEMENTS: return emit_elements(&m);
    case OPQ_GATHER_ND:
    case OPQ_SCATTER_ND: return emit_nd(&m);
    case OPQ_ONE_HOT: return emit_one_hot(&m);
    case OPQ_REVERSE_SEQUENCE: return emit_reverse_sequence(&m);
    case OPQ_LP_POOL: return emit_lp_pool(&m);
    case OPQ_GRID_SAMPLE:
    case OPQ_ROI_ALIGN: return emit_sample(&m);
    default: break;
    }
    return err_set(e, ST_UNSUPPORTED, "kernel %s: no emitter for %s", fn, opq_op_name(s.op));
}
