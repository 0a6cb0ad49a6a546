// CCLS_POINTWISE: kernels of ELEMWISE/LAYOUT primitives (concat included). One loop nest over the
// sink's output: the outer axes fused into one OpenMP loop, the last axis innermost and SIMD,
// optionally split into chunks that join the parallel loop (when the outer axes alone give too
// little parallel work). Values come from cexpr. Also the entry points of cgen.h, which send
// candidates with REDUCE primitives to emit_reduce.c.
// Configs: a Roller-style CPU model (roller.md c.9): memory traffic over the bandwidth the used
// cores get, vector arithmetic over the cores' SIMD throughput, load imbalance of the parallel
// loop, fork and loop overheads; chunks of at least 16 KB per thread.
#include "cgen.h"
#include "loopnest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- shared by both emitters ----

bool cgen_dtype_ok(DType t) { return dtype_size(t) > 0 && t != DT_STRING; }

int cgen_classify(const PrimGraph *pg, const Candidate *c) {
    bool reduce = false;
    for (int k = 0; k < c->n_prims; k++) {
        const Prim *p = pg->prims[c->prims[k]];
        if (p->kind == PRIM_LINEAR || p->kind == PRIM_OPAQUE || p->n_out != 1)
            return 0;
        reduce = reduce || p->kind == PRIM_REDUCE;
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] < 0 || !cgen_dtype_ok(pg->tensors[p->in[j]]->dtype))
                return 0;
        if (!cgen_dtype_ok(pg->tensors[p->out[0]]->dtype))
            return 0;
    }
    return reduce ? CCLS_REDUCE : CCLS_POINTWISE;
}

// Arithmetic cost of one output element (vector-op units): transcendental calls count more.
double cgen_ops_per_elem(const PrimGraph *pg, const Candidate *c) {
    double ops = 0;
    for (int k = 0; k < c->n_prims; k++) {
        const Prim *p = pg->prims[c->prims[k]];
        if (p->kind == PRIM_LAYOUT) {
            ops += p->lay.concat ? 2 : p->lay.n_stages;
            continue;
        }
        if (p->kind != PRIM_ELEMWISE)
            continue;
        for (int i = 0; i < p->ew.n; i++) {
            switch (p->ew.code[i].op) {
            case EW_EXP: case EW_LOG: case EW_ERF: case EW_TANH: case EW_SIGMOID: case EW_POW:
            case EW_SOFTPLUS: case EW_SIN: case EW_COS: case EW_TAN: case EW_ASIN: case EW_ACOS:
            case EW_ATAN: case EW_SINH: case EW_COSH: case EW_ASINH: case EW_ACOSH:
            case EW_ATANH: ops += 20; break;
            case EW_DIV: case EW_SQRT: case EW_RSQRT: case EW_RECIP: ops += 4; break;
            default: ops += 1;
            }
        }
    }
    return ops;
}

// Bytes a kernel moves: each input once (gathers and broadcasts re-read from cache) plus the
// output.
double cgen_traffic_bytes(const PrimGraph *pg, const Candidate *c) {
    double b = (double)tensor_nbytes(pg->tensors[c->output]);
    for (int j = 0; j < c->n_inputs; j++)
        b += (double)tensor_nbytes(pg->tensors[c->inputs[j]]);
    return b;
}

double cgen_estimate(const HwInfo *hw, double bytes, double elems, double ops, int64_t par_units,
                     int64_t inner_len, bool parallel) {
    int cores = hw->cores > 0 ? hw->cores : 1;
    int used = parallel && elems * (ops + 1) >= LN_PARALLEL_MIN_WORK
                   ? (int)ORCH_MIN((int64_t)cores, ORCH_MAX(par_units, 1))
                   : 1;
    double lanes = hw->simd_bytes > 0 ? hw->simd_bytes / 4.0 : 4.0;
    if (inner_len < lanes)
        lanes = ORCH_MAX((double)inner_len, 1.0);
    // Bandwidth: about 12 GB/s per core up to a shared limit (an L3-resident working set is
    // faster, which the relative order of configs does not depend on).
    double bw = ORCH_MIN(12e9 * used, 40e9);
    double units = (double)ORCH_MAX(par_units, 1);
    double imbalance = used > 1 ? ceil(units / used) * used / units : 1.0;
    double t_mem = bytes / bw;
    double t_ops = elems * ops / (used * lanes * 2.5e9);
    double t_loop = elems / (double)ORCH_MAX(inner_len, 1) * 2e-9 / used;
    return (ORCH_MAX(t_mem, t_ops) + t_loop) * imbalance + (used > 1 ? 3e-6 : 2e-7);
}

int cgen_sort_configs(KernelConfig *cand, int n, KernelConfig *out, int k) {
    // Insertion sort by score, dropping duplicates of the canonical text.
    for (int i = 1; i < n; i++) {
        KernelConfig t = cand[i];
        int j = i - 1;
        while (j >= 0 && cand[j].score > t.score) {
            cand[j + 1] = cand[j];
            j--;
        }
        cand[j + 1] = t;
    }
    int m = 0;
    for (int i = 0; i < n && m < k; i++) {
        bool dup = false;
        for (int j = 0; j < m && !dup; j++)
            dup = !strcmp(out[j].desc, cand[i].desc);
        if (!dup)
            out[m++] = cand[i];
    }
    return m;
}

// ---- pointwise ----
// Config p[0]: chunk of the last axis joining the parallel loop (0: none); p[1]: 1 = parallel.

static bool pw_supports(const PrimGraph *pg, const Candidate *c) {
    KernelConfig cfg = {.cls = CCLS_POINTWISE};
    StrBuf src;
    sb_init(&src);
    Err e = {0};
    int rc = cgen_pw_emit(pg, c, &cfg, "orch_probe", &src, &e);
    sb_free(&src);
    return rc == ST_OK;
}

static int pw_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw,
                      KernelConfig *out, int k) {
    const Tensor *T = pg->tensors[c->output];
    int64_t inner = T->rank ? T->dims[T->rank - 1] : 1, numel = tensor_numel(T);
    int64_t outer = inner ? numel / inner : 0;
    double bytes = cgen_traffic_bytes(pg, c), ops = cgen_ops_per_elem(pg, c);
    KernelConfig cand[16];
    int n = 0;
    size_t es = dtype_size(T->dtype);
    const int64_t chunk_bytes[] = {0, 16384, 65536, 262144};
    for (int par = 0; par < 2; par++)
        for (size_t i = 0; i < ORCH_COUNT(chunk_bytes); i++) {
            int64_t F = chunk_bytes[i] / (int64_t)es;
            if (chunk_bytes[i] && (T->rank == 0 || F >= inner))
                continue;
            // Chunks that are a multiple of the vector width.
            int64_t lanes = hw->simd_bytes > 0 ? hw->simd_bytes / (int64_t)es : 8;
            if (F)
                F = ORCH_MAX(lanes, F / lanes * lanes);
            int64_t units = F ? outer * ((inner + F - 1) / F) : outer;
            KernelConfig *kc = &cand[n++];
            memset(kc, 0, sizeof *kc);
            kc->cls = CCLS_POINTWISE;
            kc->p[0] = F;
            kc->p[1] = par;
            kc->score = cgen_estimate(hw, bytes, (double)numel, ops, units, F ? F : inner, par);
            snprintf(kc->desc, sizeof kc->desc, "cls=pw chunk=%lld par=%d", (long long)F, par);
        }
    return cgen_sort_configs(cand, n, out, k);
}

static int pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const char *fn, StrBuf *src, Err *e) {
    const Tensor *T = pg->tensors[c->output];
    int r = T->rank;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Cexpr *x = cexpr_create(pg, c, fn, &decls);
    LoopNest *ln = ln_create("l");
    char names[ORCH_MAX_RANK][16];
    const char *idx[ORCH_MAX_RANK];
    int loops[ORCH_MAX_RANK];
    for (int d = 0; d < r; d++) {
        snprintf(names[d], sizeof names[d], "i%d", d);
        idx[d] = names[d];
        loops[d] = ln_axis(ln, names[d], T->dims[d]);
    }
    char v[64], st[160];
    int rc = cexpr_value(x, c->output, idx, &body, 0, v, sizeof v, e);
    if (rc == ST_OK) {
        StrBuf off;
        sb_init(&off);
        sb_puts(&off, "0");
        int64_t s = 1;
        for (int d = r - 1; d >= 0; d--) {
            if (T->dims[d] != 1)
                sb_printf(&off, " + %s * %lld", names[d], (long long)s);
            s *= T->dims[d];
        }
        cgen_store_expr(T->dtype, v, st, sizeof st);
        sb_line(&body, 0, "y[%s] = %s;\n", off.s, st);
        sb_free(&off);
        ln_body(ln, body.s);
        int64_t numel = tensor_numel(T);
        double work = (double)numel * (cgen_ops_per_elem(pg, c) + 1);
        int64_t F = cfg->p[0];
        if (r > 0) {
            int inner = loops[r - 1], par = -1;
            if (F > 0 && F < T->dims[r - 1]) {
                int o, in;
                ln_split(ln, inner, F, &o, &in);
                inner = in;
                par = o;
            }
            // Fuse every axis outside the inner loop into one parallel loop.
            int first = r - 2 >= 0 ? loops[0] : par;
            if (r >= 2) {
                int f = loops[0];
                for (int d = 1; d <= r - 2; d++)
                    f = ln_fuse(ln, f, loops[d]);
                if (par >= 0)
                    f = ln_fuse(ln, f, par);
                first = f;
            }
            if (cfg->p[1] && first >= 0)
                ln_parallel(ln, first, (int64_t)ORCH_MIN(work, 1e18));
            else if (cfg->p[1] && r == 1)
                ln_parallel(ln, inner, (int64_t)ORCH_MIN(work, 1e18));
            if (!(cfg->p[1] && r == 1 && first < 0))
                ln_vector(ln, inner, NULL);
        }
        sb_puts(src, decls.s);
        sb_printf(src, "void %s(const void *const *in, void *out) {\n", fn);
        sb_line(src, 1, "%s *restrict y = (%s *)out;\n", cgen_ctype(T->dtype),
                cgen_ctype(T->dtype));
        sb_line(src, 1, "(void)in;\n");
        ln_print(ln, src, 1);
        sb_puts(src, "}\n");
    }
    ln_free(ln);
    cexpr_free(x);
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

// ---- entry points ----

bool cgen_pw_supports(const PrimGraph *pg, const Candidate *c) {
    switch (cgen_classify(pg, c)) {
    case CCLS_POINTWISE: return pw_supports(pg, c);
    case CCLS_REDUCE: return cgen_red_supports(pg, c);
    default: return false;
    }
}

int cgen_pw_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                    int k) {
    switch (cgen_classify(pg, c)) {
    case CCLS_POINTWISE: return pw_configs(pg, c, hw, out, k);
    case CCLS_REDUCE: return cgen_red_configs(pg, c, hw, out, k);
    default: return 0;
    }
}

int cgen_pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                 StrBuf *src, Err *e) {
    int cls = cgen_classify(pg, c);
    if (cls == 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: candidate %d is not pointwise/reduce", fn,
                       c->id);
    if (cfg->cls != cls)
        return err_set(e, ST_INVALID, "kernel %s: config class %d for a class %d candidate", fn,
                       cfg->cls, cls);
    return cls == CCLS_POINTWISE ? pw_emit(pg, c, cfg, fn, src, e)
                                 : cgen_red_emit(pg, c, cfg, fn, src, e);
}
