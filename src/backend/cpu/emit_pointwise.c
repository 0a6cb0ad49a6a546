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

// ---- the hardware model ----

// The fitted constants of the CPU model of pointwise and reduction kernels (cgen_estimate) and of
// the pointwise config ranker. "Not recorded": no measurement behind the number was written
// down, and none of these is recorded as checked on three or more shapes; "not fitted": a
// default or a definition rather than a tuned number. The model forks where the emitted loops do
// (loopnest.h's LN_PARALLEL_MIN_WORK); the reductions' own constants are CpuReduceModel's
// (emit_reduce.c).
typedef struct CpuPointwiseModel {
    // Bytes/s of memory traffic one core gets: 12e9. Not recorded.
    double bw_core;
    // Bytes/s all cores get together at most: 40e9 (an L3-resident working set is faster,
    // which the relative order of configs does not depend on). Not recorded.
    double bw_max;
    // Vector operations a core issues per second: 2.5e9. Not recorded.
    double vec_ops_s;
    // Seconds per iteration of the loops outside the innermost one: 2e-9. Not recorded.
    double loop_iter_s;
    // Seconds a parallel kernel's fork and join cost: 3e-6. Not recorded.
    double fork_s;
    // Seconds a serial kernel's call costs: 2e-7. Not recorded.
    double call_s;
    // float32 lanes assumed where HwInfo has no SIMD width: 4. Not fitted.
    double lanes_unknown;
    // Chunks of the innermost loop offered to the parallel loop, in bytes (0: none): 16, 64 and
    // 256 KiB (at least 16 KB per thread, roller.md c.9). Not recorded.
    int64_t chunk_bytes[4];
    // Vector width in elements that chunks are rounded to where HwInfo has none: 8. Not fitted.
    int64_t chunk_lanes_unknown;
} CpuPointwiseModel;

static const CpuPointwiseModel cpu_pw_model = {
    .bw_core = 12e9,
    .bw_max = 40e9,
    .vec_ops_s = 2.5e9,
    .loop_iter_s = 2e-9,
    .fork_s = 3e-6,
    .call_s = 2e-7,
    .lanes_unknown = 4.0,
    .chunk_bytes = {0, 16384, 65536, 262144},
    .chunk_lanes_unknown = 8,
};

double cgen_estimate(const HwInfo *hw, double bytes, double elems, double ops, int64_t par_units,
                     int64_t inner_len, bool parallel) {
    const CpuPointwiseModel *P = &cpu_pw_model;
    int cores = hw->cores > 0 ? hw->cores : 1;
    int used = parallel && elems * (ops + 1) >= LN_PARALLEL_MIN_WORK
                   ? (int)ORCH_MIN((int64_t)cores, ORCH_MAX(par_units, 1))
                   : 1;
    double lanes = hw->simd_bytes > 0 ? hw->simd_bytes / 4.0 : P->lanes_unknown;
    if (inner_len < lanes)
        lanes = ORCH_MAX((double)inner_len, 1.0);
    // Bandwidth: per core up to a shared limit.
    double bw = ORCH_MIN(P->bw_core * used, P->bw_max);
    double units = (double)ORCH_MAX(par_units, 1);
    double imbalance = used > 1 ? ceil(units / used) * used / units : 1.0;
    double t_mem = bytes / bw;
    double t_ops = elems * ops / (used * lanes * P->vec_ops_s);
    double t_loop = elems / (double)ORCH_MAX(inner_len, 1) * P->loop_iter_s / used;
    return (ORCH_MAX(t_mem, t_ops) + t_loop) * imbalance + (used > 1 ? P->fork_s : P->call_s);
}

// ---- pointwise ----

void cgen_pw_config_pack(const CPwConfig *t, KernelConfig *k) {
    memset(k, 0, sizeof *k);
    k->cls = CCLS_POINTWISE;
    k->p[0] = t->chunk;
    k->p[1] = t->par;
    k->p[2] = t->flat;
    snprintf(k->desc, sizeof k->desc, "cls=pw flat=%d chunk=%lld par=%d", t->flat,
             (long long)t->chunk, (int)t->par);
}

void cgen_pw_config_unpack(const KernelConfig *k, CPwConfig *t) {
    t->flat = (int)k->p[2];
    t->chunk = k->p[0];
    t->par = k->p[1] != 0;
}

static int pw_flat_first(const PrimGraph *pg, const Candidate *c);

static bool pw_supports(const PrimGraph *pg, const Candidate *c) {
    KernelConfig cfg;
    cgen_pw_config_pack(&(CPwConfig){0}, &cfg);
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
    int first = pw_flat_first(pg, c);
    int64_t inner = 1, numel = tensor_numel(T);
    for (int d = first; d < T->rank; d++)
        inner *= T->dims[d];
    int64_t outer = inner ? numel / inner : 0;
    double bytes = cgen_traffic_bytes(pg, c), ops = cgen_ops_per_elem(pg, c);
    const CpuPointwiseModel *P = &cpu_pw_model;
    KernelConfig cand[2 * ORCH_COUNT(cpu_pw_model.chunk_bytes)];
    int n = 0;
    size_t es = dtype_size(T->dtype);
    for (int par = 0; par < 2; par++)
        for (size_t i = 0; i < ORCH_COUNT(P->chunk_bytes); i++) {
            int64_t F = P->chunk_bytes[i] / (int64_t)es;
            if (P->chunk_bytes[i] && (T->rank == 0 || F >= inner))
                continue;
            // Chunks that are a multiple of the vector width.
            int64_t lanes =
                hw->simd_bytes > 0 ? hw->simd_bytes / (int64_t)es : P->chunk_lanes_unknown;
            if (F)
                F = ORCH_MAX(lanes, F / lanes * lanes);
            int64_t units = F ? outer * ((inner + F - 1) / F) : outer;
            KernelConfig *kc = &cand[n++];
            cgen_pw_config_pack(&(CPwConfig){.flat = first, .chunk = F, .par = par}, kc);
            kc->score = cgen_estimate(hw, bytes, (double)numel, ops, units, F ? F : inner, par);
        }
    return cgen_sort_configs(cand, n, out, k);
}

// The loop nest over the output: axes before `first` as loops, the rest as one flat loop `f`
// (first = rank - 1: no flattening), chunk F of the innermost loop joining the parallel loop,
// printed into `nest` at `indent`; cexpr's tables (named after `prefix`) go to decls. With
// `guard` (a flag variable the caller declares) a float32 sine takes the prelude's common path
// and leaves its range check to the flag (cexpr_set_sin_guard), which the nest's parallel and
// SIMD loops reduce with |; *guards counts the sines so guarded. Sets *broken when some load is
// not contiguous over the flat axes.
static int pw_nest(const PrimGraph *pg, const Candidate *c, int first, int64_t F, bool par,
                   const char *prefix, const char *guard, StrBuf *decls, StrBuf *nest, int indent,
                   bool *broken, int *guards, Err *e) {
    const Tensor *T = pg->tensors[c->output];
    int r = T->rank;
    StrBuf body;
    sb_init(&body);
    Cexpr *x = cexpr_create(pg, c, prefix, decls);
    if (guard)
        cexpr_set_sin_guard(x, guard);
    LoopNest *ln = ln_create("l");
    char names[ORCH_MAX_RANK][96];
    const char *idx[ORCH_MAX_RANK];
    int loops[ORCH_MAX_RANK + 1], nl = 0;
    if (r > 0 && (first < 0 || first > r - 1))
        first = r - 1;
    int64_t S = 1;
    for (int d = r - 1; d >= 0; d--) {
        if (d >= first && first < r - 1) {
            // A digit of the flat variable f.
            if (d == first)
                snprintf(names[d], sizeof names[d], "(f / %lld)", (long long)S);
            else if (d == r - 1)
                snprintf(names[d], sizeof names[d], "(f %% %lld)", (long long)T->dims[d]);
            else
                snprintf(names[d], sizeof names[d], "((f / %lld) %% %lld)", (long long)S,
                         (long long)T->dims[d]);
        } else {
            snprintf(names[d], sizeof names[d], "i%d", d);
        }
        idx[d] = names[d];
        S *= T->dims[d];
    }
    bool flat = r > 0 && first < r - 1;
    int64_t flat_n = 1;
    for (int d = 0; d < r; d++) {
        if (flat && d >= first) {
            flat_n *= T->dims[d];
            continue;
        }
        loops[nl++] = ln_axis(ln, names[d], T->dims[d]);
    }
    if (flat) {
        loops[nl++] = ln_axis(ln, "f", flat_n);
        cexpr_set_flat(x, first, "f");
    }
    char v[64], st[160];
    int rc = cexpr_value(x, c->output, idx, &body, 0, v, sizeof v, e);
    *broken = flat && cexpr_flat_broken(x);
    int ng = cexpr_sin_guards(x);
    if (guards)
        *guards = ng;
    if (rc == ST_OK) {
        char red[96] = "";
        if (ng > 0)
            snprintf(red, sizeof red, "reduction(|:%s)", guard);
        StrBuf off;
        sb_init(&off);
        sb_puts(&off, "0");
        int64_t s = 1;
        for (int d = r - 1; d >= 0; d--) {
            if (flat && d >= first) {
                if (d == first)
                    sb_puts(&off, " + f");
            } else if (T->dims[d] != 1) {
                sb_printf(&off, " + %s * %lld", names[d], (long long)s);
            }
            s *= T->dims[d];
        }
        cgen_store_expr(T->dtype, v, st, sizeof st);
        sb_line(&body, 0, "y[%s] = %s;\n", off.s, st);
        sb_free(&off);
        ln_body(ln, body.s);
        int64_t numel = tensor_numel(T);
        double work = (double)numel * (cgen_ops_per_elem(pg, c) + 1);
        if (nl > 0) {
            int inner = loops[nl - 1], pl = -1;
            if (F > 0 && F < ln_extent(ln, inner)) {
                int o, in;
                ln_split(ln, inner, F, &o, &in);
                inner = in;
                pl = o;
            }
            // Fuse every loop outside the inner one into one parallel loop.
            int f = nl >= 2 ? loops[0] : pl;
            if (nl >= 2) {
                for (int d = 1; d <= nl - 2; d++)
                    f = ln_fuse(ln, f, loops[d]);
                if (pl >= 0)
                    f = ln_fuse(ln, f, pl);
            }
            if (par && f >= 0) {
                ln_parallel_clause(ln, f, (int64_t)ORCH_MIN(work, 1e18), red);
                ln_vector(ln, inner, red);
            } else if (par) {
                ln_parallel_clause(ln, inner, (int64_t)ORCH_MIN(work, 1e18), red);
            } else {
                ln_vector(ln, inner, red);
            }
        }
        ln_print(ln, nest, indent);
    }
    ln_free(ln);
    cexpr_free(x);
    sb_free(&body);
    return rc;
}

// The kernel `fn`: the nest with float32 sines on the prelude's vectorisable common path, and,
// where one of them was guarded, the nest again with libm's sinf, run only where some |x| >
// 65536 raised the flag (rare: the exact pass recomputes the whole output; no kernel writes in
// place, so the inputs are intact). Before, libm's scalar sinf kept such loops from vectorising.
static int pw_emit_nest(const PrimGraph *pg, const Candidate *c, int first, int64_t F, bool par,
                        const char *fn, StrBuf *src, bool *broken, Err *e) {
    const Tensor *T = pg->tensors[c->output];
    StrBuf decls, fast, exact;
    sb_init(&decls);
    sb_init(&fast);
    sb_init(&exact);
    int guards = 0;
    int rc = pw_nest(pg, c, first, F, par, fn, "big_", &decls, &fast, 1, broken, &guards, e);
    if (rc == ST_OK && guards > 0) {
        char xfn[160];
        bool xbroken;
        snprintf(xfn, sizeof xfn, "%s_x", fn);
        rc = pw_nest(pg, c, first, F, par, xfn, NULL, &decls, &exact, 2, &xbroken, NULL, e);
    }
    if (rc == ST_OK) {
        sb_puts(src, decls.s);
        sb_printf(src, "void %s(const void *const *in, void *out) {\n", fn);
        sb_line(src, 1, "%s *restrict y = (%s *)out;\n", cgen_ctype(T->dtype),
                cgen_ctype(T->dtype));
        sb_line(src, 1, "(void)in;\n");
        if (guards > 0)
            sb_line(src, 1, "int big_ = 0;\n");
        sb_puts(src, fast.s);
        if (guards > 0) {
            sb_line(src, 1, "if (big_) {\n");
            sb_puts(src, exact.s);
            sb_line(src, 1, "}\n");
        }
        sb_puts(src, "}\n");
    }
    sb_free(&decls);
    sb_free(&fast);
    sb_free(&exact);
    return rc;
}

// The outermost axis from which the output can be walked as one flat, unit-stride loop (every
// load contiguous over the axes from there on); rank - 1 when none.
static int pw_flat_first(const PrimGraph *pg, const Candidate *c) {
    const Tensor *T = pg->tensors[c->output];
    for (int first = 0; first < T->rank - 1; first++) {
        StrBuf src;
        sb_init(&src);
        Err e = {0};
        bool broken = true;
        int rc = pw_emit_nest(pg, c, first, 0, false, "orch_probe", &src, &broken, &e);
        sb_free(&src);
        if (rc == ST_OK && !broken)
            return first;
    }
    return T->rank > 0 ? T->rank - 1 : 0;
}

static int pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const char *fn, StrBuf *src, Err *e) {
    bool broken;
    CPwConfig t;
    cgen_pw_config_unpack(cfg, &t);
    return pw_emit_nest(pg, c, t.flat, t.chunk, t.par, fn, src, &broken, e);
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
