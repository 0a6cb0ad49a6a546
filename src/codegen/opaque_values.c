// The operator-kernel text both targets share (opaque_values.h): plain C over int64_t, with the
// dialect choosing CUDA's spelling where it differs.
#include "opaque_values.h"

#include "cexpr.h"

#include <stdio.h>

const char *opq_ftype(DType t) {
    return t == DT_DOUBLE ? "double" : "float";
}

void opq_load_f(DType t, const char *e, char *buf, size_t n) {
    if (t == DT_FLOAT16)
        snprintf(buf, n, "orch_f16_to_f32(%s)", e);
    else if (t == DT_BFLOAT16)
        snprintf(buf, n, "orch_bf16_to_f32(%s)", e);
    else
        snprintf(buf, n, "(%s)", e);
}

void opq_store_f(DType t, const char *e, char *buf, size_t n) {
    if (t == DT_FLOAT16)
        snprintf(buf, n, "orch_f32_to_f16(%s)", e);
    else if (t == DT_BFLOAT16)
        snprintf(buf, n, "orch_f32_to_bf16(%s)", e);
    else
        snprintf(buf, n, "(%s)", e);
}

void opq_cumsum_step(DType t, const char *a, const char *v, char *buf, size_t n) {
    if (dtype_is_float(t)) {
        char la[96], lv[96], sum[224];
        opq_load_f(t, a, la, sizeof la);
        opq_load_f(t, v, lv, sizeof lv);
        snprintf(sum, sizeof sum, "%s + %s", la, lv);
        opq_store_f(t, sum, buf, n);
    } else {
        const char *ut = dtype_size(t) == 8 ? "uint64_t" : "uint32_t";
        snprintf(buf, n, "(%s)((%s)%s + (%s)%s)", cgen_ctype(t), ut, a, ut, v);
    }
}

void opq_emit_cumsum_acc(StrBuf *b, int indent, DType t, bool exclusive, const char *acc,
                         const char *v, const char *dst) {
    char step[320];
    opq_cumsum_step(t, acc, v, step, sizeof step);
    if (exclusive)
        sb_line(b, indent, "%s = %s;\n", dst, acc);
    sb_line(b, indent, "%s = %s;\n", acc, step);
    if (!exclusive)
        sb_line(b, indent, "%s = %s;\n", dst, acc);
}

void opq_emit_index(StrBuf *b, int indent, const char *v, const char *src, const char *size,
                    const char *mark, const char *on_bad) {
    sb_line(b, indent, "int64_t %s = (int64_t)(%s);\n", v, src);
    sb_line(b, indent, "if (%s < 0)\n", v);
    sb_line(b, indent + 1, "%s += %s;\n", v, size);
    sb_line(b, indent, "if ((uint64_t)%s >= (uint64_t)(%s)) {\n", v, size);
    sb_line(b, indent + 1, "%s\n", mark);
    sb_line(b, indent + 1, "%s\n", on_bad);
    sb_line(b, indent, "}\n");
}

bool opq_wide_key(DType t) {
    return dtype_size(t) == 8;
}

const char *opq_key_type(DType t) {
    return opq_wide_key(t) ? "uint64_t" : "uint32_t";
}

void opq_emit_key(StrBuf *b, OpqDialect d, const char *fn, DType t, bool largest) {
    bool cuda = d == OPQ_DIALECT_CUDA;
    const char *kt = opq_key_type(t);
    sb_printf(b, "static %s %s %s_key(%s v) {\n", cuda ? "__device__ __forceinline__" : "inline",
              kt, fn, cgen_ctype(t));
    if (dtype_is_float(t)) {
        // bits: the value's; sign, magnitude mask and the largest non-NaN magnitude (infinity).
        int bits = (int)dtype_size(t) * 8;
        const char *sign = bits == 64   ? "0x8000000000000000ull"
                           : bits == 32 ? "0x80000000u"
                                        : "0x8000u";
        const char *mag = bits == 64   ? "0x7fffffffffffffffull"
                          : bits == 32 ? "0x7fffffffu"
                                       : "0x7fffu";
        const char *inf = bits == 64        ? "0x7ff0000000000000ull"
                          : bits == 32      ? "0x7f800000u"
                          : t == DT_FLOAT16 ? "0x7c00u"
                                            : "0x7f80u";
        const char *all = bits == 64   ? "0xffffffffffffffffull"
                          : bits == 32 ? "0xffffffffu"
                                       : "0xffffu";
        if (cuda) {
            // The bits through the intrinsics (a half type's storage is its bits already).
            const char *raw = bits == 64   ? "(uint64_t)__double_as_longlong(v)"
                              : bits == 32 ? "__float_as_uint(v)"
                                           : "(uint32_t)v";
            sb_line(b, 1, "%s r = %s;\n", kt, raw);
            sb_line(b, 1, "%s x = r == %s ? 0 : r; // -0 ranks with +0\n", kt, sign);
        } else {
            const char *ut = bits == 64 ? "uint64_t" : bits == 32 ? "uint32_t" : "uint16_t";
            sb_line(b, 1, "%s r;\n", ut);
            sb_line(b, 1, "memcpy(&r, &v, sizeof r);\n");
            sb_line(b, 1, "%s x = r == %s ? 0 : r; /* -0 ranks with +0 */\n", kt, sign);
        }
        sb_line(b, 1, "%s neg = (x >> %d) & 1;\n", kt, bits - 1);
        sb_line(b, 1,
                cuda ? "%s k = (x ^ (((%s)0 - neg) | %s)) & %s;\n"
                     : "%s k = (x ^ ((%s)0 - neg | %s)) & %s;\n",
                kt, kt, sign, all);
        sb_line(b, 1,
                cuda ? "%s u = (x & %s) > %s ? %s : k; // NaN above every number\n"
                     : "%s u = (x & %s) > %s ? %s : k; /* NaN above every number */\n",
                kt, mag, inf, all);
    } else if (t == DT_INT64) {
        sb_line(b, 1, "uint64_t u = (uint64_t)v ^ 0x8000000000000000ull;\n");
    } else if (t == DT_UINT64) {
        sb_line(b, 1, "uint64_t u = v;\n");
    } else if (t == DT_INT8 || t == DT_INT16 || t == DT_INT32) {
        sb_line(b, 1, "uint32_t u = (uint32_t)(int32_t)v ^ 0x80000000u;\n");
    } else {
        sb_line(b, 1, cuda ? "uint32_t u = (uint32_t)v;\n" : "uint32_t u = v;\n");
    }
    sb_line(b, 1, "return %s;\n", largest ? "u" : "~u");
    sb_puts(b, "}\n");
}

void opq_emit_combine(StrBuf *b, OpqDialect d, int indent, DType t, OpqRed red, const char *yv,
                      const char *uv) {
    bool cuda = d == OPQ_DIALECT_CUDA;
    const char *ct = cgen_ctype(t);
    if (red == OPQ_RED_NONE) {
        sb_line(b, indent, "%s = %s;\n", yv, uv);
        return;
    }
    if (dtype_is_float(t)) {
        char la[96], lb[96], r[256], e[160];
        opq_load_f(t, yv, la, sizeof la);
        opq_load_f(t, uv, lb, sizeof lb);
        sb_line(b, indent, "{\n");
        sb_line(b, indent + 1, "%s%s ca = %s, cb = %s;\n", cuda ? "const " : "", opq_ftype(t), la,
                lb);
        bool dbl = t == DT_DOUBLE;
        switch (red) {
        // CUDA: rounded products and sums, so nothing fuses them into a neighbouring FMA.
        case OPQ_RED_ADD:
            snprintf(e, sizeof e, cuda ? "%s(ca, cb)" : "ca + cb", dbl ? "__dadd_rn" : "__fadd_rn");
            break;
        case OPQ_RED_MUL:
            snprintf(e, sizeof e, cuda ? "%s(ca, cb)" : "ca * cb", dbl ? "__dmul_rn" : "__fmul_rn");
            break;
        case OPQ_RED_MAX: snprintf(e, sizeof e, "ca != ca || ca >= cb ? ca : cb"); break;
        default: snprintf(e, sizeof e, "ca != ca || ca <= cb ? ca : cb"); break;
        }
        opq_store_f(t, e, r, sizeof r);
        sb_line(b, indent + 1, "%s = %s;\n", yv, r);
        sb_line(b, indent, "}\n");
        return;
    }
    switch (red) {
    case OPQ_RED_ADD:
        sb_line(b, indent, "%s = (%s)((uint64_t)%s + (uint64_t)%s);\n", yv, ct, yv, uv);
        break;
    case OPQ_RED_MUL:
        sb_line(b, indent, "%s = (%s)((uint64_t)%s * (uint64_t)%s);\n", yv, ct, yv, uv);
        break;
    case OPQ_RED_MAX: sb_line(b, indent, "%s = %s < %s ? %s : %s;\n", yv, yv, uv, uv, yv); break;
    default: sb_line(b, indent, "%s = %s < %s ? %s : %s;\n", yv, uv, yv, uv, yv); break;
    }
}

void opq_emit_hardmax_consts(StrBuf *b, int indent, DType t) {
    const char *ct = cgen_ctype(t);
    char one[64], zero[64];
    opq_store_f(t, "1.0f", one, sizeof one);
    opq_store_f(t, "0.0f", zero, sizeof zero);
    sb_line(b, indent, "const %s one = %s, zero = %s;\n", ct, one, zero);
}

void opq_emit_hardmax_scan(StrBuf *b, OpqDialect d, const char *fn, DType t) {
    const char *kt = opq_key_type(t), *cst = d == OPQ_DIALECT_CUDA ? "const " : "";
    sb_line(b, 2, "%s best = %s_key(x[base]);\n", kt, fn);
    sb_line(b, 2, "for (int64_t j = 1; j < LEN; j++) {\n");
    sb_line(b, 3, "%s%s k = %s_key(x[base + j * INNER]);\n", cst, kt, fn);
    sb_line(b, 3, "if (k > best) {\n");
    sb_line(b, 4, "best = k;\n");
    sb_line(b, 4, "bj = j;\n");
    sb_line(b, 3, "}\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "for (int64_t j = 0; j < LEN; j++)\n");
    sb_line(b, 3, "y[base + j * INNER] = j == bj ? one : zero;\n");
}

void opq_emit_topk_store(StrBuf *b, int indent, const char *pos) {
    sb_line(b, indent, "if (yv)\n");
    sb_line(b, indent + 1, "yv[to] = xl[%s * INNER];\n", pos);
    sb_line(b, indent, "if (yi)\n");
    sb_line(b, indent + 1, "yi[to] = %s;\n", pos);
}

void opq_emit_trilu_k(StrBuf *b, const OpqSpec *s, const char *karg) {
    if (s->in[1] >= 0)
        sb_line(b, 1, "int64_t k = *(const int64_t *)%s;\n", karg);
    else
        sb_line(b, 1, "int64_t k = 0;\n");
    // Past ROWS + COLS either way every element is kept or dropped: clamping keeps r + k exact.
    sb_line(b, 1, "k = k < -(ROWS + COLS) ? -(ROWS + COLS) : k > ROWS + COLS ? ROWS + COLS : k;\n");
}

void opq_emit_one_hot_index(StrBuf *b, int indent) {
    sb_line(b, indent, "int64_t v = (int64_t)ind[o * INNER + i];\n");
    sb_line(b, indent, "if (v < 0)\n");
    sb_line(b, indent + 1, "v += DEPTH;\n");
}

void opq_pool_sizes(const PoolGeom *g, int64_t *plane, int64_t *outs, int64_t *taps) {
    *plane = *outs = *taps = 1;
    for (int i = 0; i < g->S; i++) {
        *plane *= g->in[i];
        *outs *= g->out[i];
        *taps *= g->k[i];
    }
}

void opq_emit_lp_tap(StrBuf *b, OpqDialect d, DType t) {
    char v[64];
    sb_line(b, 3, "if (!inside)\n");
    sb_line(b, 4, "continue;\n");
    opq_load_f(t, "xp[row]", v, sizeof v);
    sb_line(b, 3, "%sdouble v = fabs((double)%s);\n", d == OPQ_DIALECT_CUDA ? "const " : "", v);
}

void opq_emit_in_ptr(StrBuf *b, OpqDialect d, int indent, const char *ct, const char *name,
                     int slot) {
    bool cuda = d == OPQ_DIALECT_CUDA;
    sb_line(b, indent, "const %s *%s %s = (const %s *)%sin[%d];\n", ct,
            cuda ? "__restrict__" : "restrict", name, ct, cuda ? "a." : "", slot);
}

void opq_emit_out_ptr(StrBuf *b, OpqDialect d, int indent, const char *ct, const char *name) {
    bool cuda = d == OPQ_DIALECT_CUDA;
    sb_line(b, indent, "%s *%s %s = (%s *)%s;\n", ct, cuda ? "__restrict__" : "restrict", name, ct,
            cuda ? "a.out" : "out[0]");
}

// ---- GridSample, RoiAlign ----

// The helpers' head: `static inline` in C, a forced-inline device function in CUDA.
static const char *helper_qual(OpqDialect d) {
    return d == OPQ_DIALECT_CUDA ? "static __device__ __forceinline__" : "static inline";
}

// fn_ld (a data element as double) and fn_lc (a grid or ROI coordinate as double).
static void emit_loads(StrBuf *b, OpqDialect d, const char *fn, DType xt, DType ct) {
    char v[96];
    opq_load_f(xt, "v", v, sizeof v);
    sb_printf(b, "%s double %s_ld(%s v) { return (double)%s; }\n", helper_qual(d), fn,
              cgen_ctype(xt), v);
    opq_load_f(ct, "v", v, sizeof v);
    sb_printf(b, "%s double %s_lc(%s v) { return (double)%s; }\n", helper_qual(d), fn,
              cgen_ctype(ct), v);
}

// src/ops/sample.c's to_index: a floored coordinate as an index, NaN and huge ones far outside.
static void emit_to_index(StrBuf *b, OpqDialect d, const char *fn) {
    sb_printf(b, "%s int64_t %s_ix(double v) {\n", helper_qual(d), fn);
    sb_line(b, 1, "if (!(v >= -4e15))\n");
    sb_line(b, 2, "return -(int64_t)4e15;\n");
    sb_line(b, 1, "return v > 4e15 ? (int64_t)4e15 : (int64_t)v;\n");
    sb_puts(b, "}\n");
}

// Every product, sum, difference and quotient below goes through ORCH_SM, ORCH_SA, ORCH_SS and
// ORCH_SD, each rounded on its own as in the reference op (compiled without contraction): in C
// the operators under `fp-contract=off`, in CUDA the _rn intrinsics, which nothing fuses.
static void emit_arith_open(StrBuf *b, OpqDialect d) {
    if (d == OPQ_DIALECT_CUDA) {
        sb_puts(b, "#define ORCH_SM(a, b) __dmul_rn(a, b)\n#define ORCH_SA(a, b) __dadd_rn(a, b)\n"
                   "#define ORCH_SS(a, b) __dsub_rn(a, b)\n#define ORCH_SD(a, b) __ddiv_rn(a, b)\n");
        return;
    }
    sb_puts(b, "#if defined(__clang__)\n#pragma STDC FP_CONTRACT OFF\n#else\n"
               "#pragma GCC push_options\n#pragma GCC optimize(\"fp-contract=off\")\n#endif\n"
               "#define ORCH_SM(a, b) ((a) * (b))\n#define ORCH_SA(a, b) ((a) + (b))\n"
               "#define ORCH_SS(a, b) ((a) - (b))\n#define ORCH_SD(a, b) ((a) / (b))\n");
}

void opq_emit_sample_close(StrBuf *b, OpqDialect d) {
    sb_puts(b, "#undef ORCH_SM\n#undef ORCH_SA\n#undef ORCH_SS\n#undef ORCH_SD\n");
    if (d == OPQ_DIALECT_C)
        sb_puts(b, "#if defined(__clang__)\n#pragma STDC FP_CONTRACT DEFAULT\n#else\n"
                   "#pragma GCC pop_options\n#endif\n");
}

static void emit_gridsample_helpers(StrBuf *b, OpqDialect d, const char *fn, const OpqSpec *s) {
    const GridSampleGeom *g = &s->gs;
    const char *q = helper_qual(d), *xt = cgen_ctype(s->dt);
    emit_to_index(b, d, fn);
    if (g->pad == SAMPLE_PAD_REFLECTION) { // gs_reflect
        sb_printf(b, "%s double %s_reflect(double x, double lo, double hi) {\n", q, fn);
        sb_line(b, 1, "const double range = ORCH_SS(hi, lo);\n");
        sb_line(b, 1, "if (!(range > 0))\n");
        sb_line(b, 2, "return lo;\n");
        sb_line(b, 1, "if (x < lo) {\n");
        sb_line(b, 2, "const double dx = ORCH_SS(lo, x), k = floor(ORCH_SD(dx, range));\n");
        sb_line(b, 2, "const double r = ORCH_SS(dx, ORCH_SM(k, range));\n");
        sb_line(b, 2, "return fmod(k, 2.0) == 0 ? ORCH_SA(lo, r) : ORCH_SS(hi, r);\n");
        sb_line(b, 1, "}\n");
        sb_line(b, 1, "if (x > hi) {\n");
        sb_line(b, 2, "const double dx = ORCH_SS(x, hi), k = floor(ORCH_SD(dx, range));\n");
        sb_line(b, 2, "const double r = ORCH_SS(dx, ORCH_SM(k, range));\n");
        sb_line(b, 2, "return fmod(k, 2.0) == 0 ? ORCH_SS(hi, r) : ORCH_SA(lo, r);\n");
        sb_line(b, 1, "}\n");
        sb_line(b, 1, "return x;\n");
        sb_puts(b, "}\n");
    }
    // gs_pad_index: index v along an axis of len pixels after padding, -1 where zero padding
    // reads 0 (hi: reflection's upper bound; the clamp only guards reflection's result).
    sb_printf(b, "%s int64_t %s_at(int64_t v, int64_t len, double hi) {\n", q, fn);
    if (g->pad == SAMPLE_PAD_ZEROS) {
        sb_line(b, 1, "(void)hi;\n");
        sb_line(b, 1, "return v < 0 || v >= len ? -1 : v;\n");
    } else {
        if (g->pad == SAMPLE_PAD_REFLECTION)
            sb_line(b, 1, "v = %s_ix(%s_reflect((double)v, %.17g, hi));\n", fn, fn,
                    g->align_corners ? 0.0 : -0.5);
        else
            sb_line(b, 1, "(void)hi;\n");
        sb_line(b, 1, "return v < 0 ? 0 : v > len - 1 ? len - 1 : v;\n");
    }
    sb_puts(b, "}\n");
    if (g->mode == SAMPLE_CUBIC) {
        // gs_cubic_coeffs with alpha -0.75 (5, 8 and 4 alpha, alpha + 2 and alpha + 3: exact).
        sb_printf(b, "%s void %s_cubic(double x, double *c) {\n", q, fn);
        sb_line(b, 1, "x = fabs(x);\n");
        sb_line(b, 1,
                "const double x1 = ORCH_SA(x, 1.0), u = ORCH_SS(1.0, x), w = ORCH_SS(2.0, x);\n");
        sb_line(b, 1,
                "c[0] = ORCH_SS(ORCH_SM(ORCH_SA(ORCH_SM(ORCH_SS(ORCH_SM(-0.75, x1), -3.75), x1), "
                "-6.0), x1), -3.0);\n");
        sb_line(b, 1,
                "c[1] = ORCH_SA(ORCH_SM(ORCH_SM(ORCH_SS(ORCH_SM(1.25, x), 2.25), x), x), 1.0);\n");
        sb_line(b, 1,
                "c[2] = ORCH_SA(ORCH_SM(ORCH_SM(ORCH_SS(ORCH_SM(1.25, u), 2.25), u), u), 1.0);\n");
        sb_line(b, 1,
                "c[3] = ORCH_SS(ORCH_SM(ORCH_SA(ORCH_SM(ORCH_SS(ORCH_SM(-0.75, w), -3.75), w), "
                "-6.0), w), -3.0);\n");
        sb_puts(b, "}\n");
    }
    // What a grid point reads, the same for every channel (gs_taps): K taps along each of the SR
    // axes, their K^SR offsets (outermost axis slowest, -1 reads 0) and each axis's weights.
    const int sr = g->sr, k = gridsample_axis_taps(g), taps = gridsample_taps(g);
    sb_printf(b, "typedef struct %s_plan {\n", fn);
    sb_line(b, 1, "int64_t off[%d];\n", taps);
    sb_line(b, 1, "double w[%d][%d];\n", sr, k);
    sb_printf(b, "} %s_plan;\n", fn);
    sb_printf(b, "%s void %s_plan_of(const %s *gp, %s_plan *P) {\n", q, fn, cgen_ctype(s->dt2), fn);
    sb_line(b, 1, "int64_t ix[%d][%d];\n", sr, k);
    int64_t stride = 1;
    for (int a = sr - 1; a >= 0; a--) { // the grid lists the coordinates innermost first
        const int64_t len = g->in[a];
        sb_line(b, 1, "{\n");
        sb_line(b, 2, "const double gc = %s_lc(gp[%d]);\n", fn, sr - 1 - a);
        if (g->align_corners)
            sb_line(b, 2, "const double c = ORCH_SM(ORCH_SD(ORCH_SA(gc, 1.0), 2.0), %.17g);\n",
                    (double)(len - 1));
        else
            sb_line(b, 2,
                    "const double c = ORCH_SD(ORCH_SS(ORCH_SM(ORCH_SA(gc, 1.0), %.17g), 1.0), "
                    "2.0);\n",
                    (double)len);
        if (g->mode == SAMPLE_NEAREST) {
            sb_line(b, 2, "const int64_t f = %s_ix(nearbyint(c));\n", fn);
        } else if (g->mode == SAMPLE_LINEAR) {
            sb_line(b, 2, "const int64_t f = %s_ix(floor(c));\n", fn);
            sb_line(b, 2, "P->w[%d][0] = ORCH_SS((double)(f + 1), c);\n", a);
            sb_line(b, 2, "P->w[%d][1] = ORCH_SS(c, (double)f);\n", a);
        } else {
            sb_line(b, 2, "const int64_t f = %s_ix(floor(c)) - 1;\n", fn);
            sb_line(b, 2, "%s_cubic(ORCH_SS(ORCH_SS(c, (double)f), 1.0), P->w[%d]);\n", fn, a);
        }
        // Scaled by the axis's stride now, so a tap's offset is a sum; -1 stays the only negative.
        sb_line(b, 2, "for (int i = 0; i < %d; i++) {\n", k);
        sb_line(b, 3, "const int64_t v = %s_at(f + i, %lld, %.17g);\n", fn, (long long)len,
                g->align_corners ? (double)len - 1.0 : (double)len - 0.5);
        sb_line(b, 3, "ix[%d][i] = v < 0 ? -1 : v * %lld;\n", a, (long long)stride);
        sb_line(b, 2, "}\n");
        sb_line(b, 1, "}\n");
        stride *= len;
    }
    for (int t = 0; t < taps; t++) {
        char out[160] = "", sum[160] = "";
        size_t no = 0, ns = 0;
        for (int a = 0, r = taps / k; a < sr; a++, r /= k) {
            int i = t / r % k;
            no += (size_t)snprintf(out + no, sizeof out - no, "%six[%d][%d] < 0", a ? " || " : "",
                                   a, i);
            ns += (size_t)snprintf(sum + ns, sizeof sum - ns, "%six[%d][%d]", a ? " + " : "", a, i);
        }
        sb_line(b, 1, "P->off[%d] = %s ? -1 : %s;\n", t, out, sum);
    }
    sb_puts(b, "}\n");
    // The value of one output element from its image plane and its point's plan (gs_value: the
    // taps weighted along the innermost axis first, each sum left to right; a zero-padded tap
    // reads 0), written out straight so that no loop is left for the compiler to unroll.
    sb_printf(b, "%s double %s_apply(const %s *xp, const %s_plan *P) {\n", q, fn, xt, fn);
    sb_line(b, 1, "double p[%d];\n", taps);
    sb_line(b, 1, "for (int t = 0; t < %d; t++)\n", taps);
    sb_line(b, 2, "p[t] = P->off[t] < 0 ? 0.0 : %s_ld(xp[P->off[t]]);\n", fn);
    if (g->mode != SAMPLE_NEAREST)
        for (int a = sr - 1, n = taps / k; a >= 0; a--, n /= k)
            for (int t = 0; t < n; t++) {
                sb_line(b, 1, "{\n");
                sb_line(b, 2, "double v = ORCH_SM(P->w[%d][0], p[%d]);\n", a, t * k);
                for (int i = 1; i < k; i++)
                    sb_line(b, 2, "v = ORCH_SA(v, ORCH_SM(P->w[%d][%d], p[%d]));\n", a, i,
                            t * k + i);
                sb_line(b, 2, "p[%d] = v;\n", t);
                sb_line(b, 1, "}\n");
            }
    sb_line(b, 1, "return p[0];\n");
    sb_puts(b, "}\n");
}

static void emit_roialign_helpers(StrBuf *b, OpqDialect d, const char *fn, const OpqSpec *s) {
    const RoiAlignGeom *g = &s->ra;
    const char *q = helper_qual(d), *xt = cgen_ctype(s->dt), *rt = cgen_ctype(s->dt2);
    static const char *corner[] = {"x1", "y1", "x2", "y2"};
    sb_printf(b, "%s double %s_max(double a, double b) { return a < b ? b : a; }\n", q, fn);
    // One ROI's bins: its corner, bin sizes and samples per bin (run_roialign).
    sb_printf(b, "typedef struct %s_bins {\n", fn);
    sb_line(b, 1, "double x1, y1, bh, bw;\n");
    sb_line(b, 1, "int64_t gh, gw;\n");
    sb_printf(b, "} %s_bins;\n", fn);
    sb_printf(b, "%s void %s_bins_of(const %s *roi, %s_bins *B) {\n", q, fn, rt, fn);
    double off = g->half_pixel ? 0.5 : 0.0;
    sb_line(b, 1, "const double scale = %.17g;\n", g->spatial_scale);
    for (int i = 0; i < 4; i++)
        sb_line(b, 1, "const double %s = ORCH_SS(ORCH_SM(%s_lc(roi[%d]), scale), %.17g);\n",
                corner[i], fn, i, off);
    sb_line(b, 1, "double rw = ORCH_SS(x2, x1), rh = ORCH_SS(y2, y1);\n");
    if (!g->half_pixel) {
        sb_line(b, 1, "rw = %s_max(rw, 1.0);\n", fn);
        sb_line(b, 1, "rh = %s_max(rh, 1.0);\n", fn);
    }
    sb_line(b, 1, "B->x1 = x1;\n");
    sb_line(b, 1, "B->y1 = y1;\n");
    sb_line(b, 1, "B->bh = ORCH_SD(rh, %.17g);\n", (double)g->OH);
    sb_line(b, 1, "B->bw = ORCH_SD(rw, %.17g);\n", (double)g->OW);
    if (g->sampling_ratio > 0) {
        sb_line(b, 1, "B->gh = B->gw = %lld;\n", (long long)g->sampling_ratio);
    } else { // roi_grid
        sb_line(b, 1,
                "const double ch = ceil(ORCH_SD(rh, %.17g)), cw = ceil(ORCH_SD(rw, %.17g));\n",
                (double)g->OH, (double)g->OW);
        sb_line(b, 1, "B->gh = !(ch > 0) ? 0 : ch > %d ? %d : (int64_t)ch;\n", ROI_GRID_MAX,
                ROI_GRID_MAX);
        sb_line(b, 1, "B->gw = !(cw > 0) ? 0 : cw > %d ? %d : (int64_t)cw;\n", ROI_GRID_MAX,
                ROI_GRID_MAX);
    }
    sb_puts(b, "}\n");
    // Sample (iy, ix) of bin (ph, pw): its four pixels' offsets and weights, 0 at offset 0 when
    // the sample lies more than a pixel outside the map.
    sb_printf(b,
              "%s void %s_tap(const %s_bins *B, int64_t ph, int64_t pw, int64_t iy, int64_t ix, "
              "int64_t *p, double *w) {\n",
              q, fn, fn);
    sb_line(b, 1, "const double H = %.17g, W = %.17g;\n", (double)g->H, (double)g->W);
    sb_line(b, 1, "const double y = ORCH_SA(ORCH_SA(B->y1, ORCH_SM((double)ph, B->bh)),\n");
    sb_line(b, 1,
            "                         ORCH_SD(ORCH_SM(ORCH_SA((double)iy, 0.5), B->bh), "
            "(double)B->gh));\n");
    sb_line(b, 1, "const double x = ORCH_SA(ORCH_SA(B->x1, ORCH_SM((double)pw, B->bw)),\n");
    sb_line(b, 1,
            "                         ORCH_SD(ORCH_SM(ORCH_SA((double)ix, 0.5), B->bw), "
            "(double)B->gw));\n");
    sb_line(b, 1, "p[0] = p[1] = p[2] = p[3] = 0;\n");
    sb_line(b, 1, "w[0] = w[1] = w[2] = w[3] = 0;\n");
    sb_line(b, 1, "if (!(y >= -1.0 && y <= H && x >= -1.0 && x <= W))\n");
    sb_line(b, 2, "return;\n");
    sb_line(b, 1, "double yy = y <= 0 ? 0 : y, xx = x <= 0 ? 0 : x;\n");
    sb_line(b, 1, "int64_t ylo = (int64_t)yy, xlo = (int64_t)xx, yhi, xhi;\n");
    sb_line(b, 1, "if (ylo >= %lld) {\n", (long long)g->H - 1);
    sb_line(b, 2, "yhi = ylo = %lld;\n", (long long)g->H - 1);
    sb_line(b, 2, "yy = (double)ylo;\n");
    sb_line(b, 1, "} else {\n");
    sb_line(b, 2, "yhi = ylo + 1;\n");
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "if (xlo >= %lld) {\n", (long long)g->W - 1);
    sb_line(b, 2, "xhi = xlo = %lld;\n", (long long)g->W - 1);
    sb_line(b, 2, "xx = (double)xlo;\n");
    sb_line(b, 1, "} else {\n");
    sb_line(b, 2, "xhi = xlo + 1;\n");
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "const double ly = ORCH_SS(yy, (double)ylo), lx = ORCH_SS(xx, (double)xlo);\n");
    sb_line(b, 1, "const double hy = ORCH_SS(1.0, ly), hx = ORCH_SS(1.0, lx);\n");
    sb_line(b, 1, "w[0] = ORCH_SM(hy, hx);\n");
    sb_line(b, 1, "w[1] = ORCH_SM(hy, lx);\n");
    sb_line(b, 1, "w[2] = ORCH_SM(ly, hx);\n");
    sb_line(b, 1, "w[3] = ORCH_SM(ly, lx);\n");
    sb_line(b, 1, "p[0] = ylo * %lld + xlo;\n", (long long)g->W);
    sb_line(b, 1, "p[1] = ylo * %lld + xhi;\n", (long long)g->W);
    sb_line(b, 1, "p[2] = yhi * %lld + xlo;\n", (long long)g->W);
    sb_line(b, 1, "p[3] = yhi * %lld + xhi;\n", (long long)g->W);
    sb_puts(b, "}\n");
    // One sample folded into an output's running value over plane xp (first: its first sample).
    sb_printf(b,
              "%s double %s_fold(double acc, int first, const %s *xp, const int64_t *p, "
              "const double *w) {\n",
              q, fn, xt);
    sb_line(b, 1, "const double v1 = ORCH_SM(w[0], %s_ld(xp[p[0]])), v2 = ORCH_SM(w[1], %s_ld(xp[p[1]]));\n",
            fn, fn);
    sb_line(b, 1, "const double v3 = ORCH_SM(w[2], %s_ld(xp[p[2]])), v4 = ORCH_SM(w[3], %s_ld(xp[p[3]]));\n",
            fn, fn);
    if (!g->max) {
        sb_line(b, 1, "(void)first;\n");
        sb_line(b, 1, "return ORCH_SA(acc, ORCH_SA(ORCH_SA(ORCH_SA(v1, v2), v3), v4));\n");
    } else {
        sb_line(b, 1, "const double v = %s_max(%s_max(%s_max(v1, v2), v3), v4);\n", fn, fn, fn);
        sb_line(b, 1, "return first ? v : %s_max(acc, v);\n", fn);
    }
    sb_puts(b, "}\n");
    // The output from its running value (avg: over max(samples, 1)).
    sb_printf(b, "%s double %s_end(double acc, const %s_bins *B) {\n", q, fn, fn);
    if (g->max) {
        sb_line(b, 1, "(void)B;\n");
        sb_line(b, 1, "return acc;\n");
    } else {
        sb_line(b, 1, "const int64_t n = B->gh * B->gw;\n");
        sb_line(b, 1, "return ORCH_SD(acc, (double)(n > 1 ? n : 1));\n");
    }
    sb_puts(b, "}\n");
    // Output (ph, pw) of one ROI over one plane, whole (the thread-per-element form).
    sb_printf(b, "%s double %s_roi(const %s *xp, const %s *roi, int64_t ph, int64_t pw) {\n", q,
              fn, xt, rt);
    sb_line(b, 1, "%s_bins B;\n", fn);
    sb_line(b, 1, "%s_bins_of(roi, &B);\n", fn);
    sb_line(b, 1, "double acc = 0;\n");
    sb_line(b, 1, "int first = 1;\n");
    sb_line(b, 1, "for (int64_t iy = 0; iy < B.gh; iy++)\n");
    sb_line(b, 2, "for (int64_t ix = 0; ix < B.gw; ix++) {\n");
    sb_line(b, 3, "int64_t p[4];\n");
    sb_line(b, 3, "double w[4];\n");
    sb_line(b, 3, "%s_tap(&B, ph, pw, iy, ix, p, w);\n", fn);
    sb_line(b, 3, "acc = %s_fold(acc, first, xp, p, w);\n", fn);
    sb_line(b, 3, "first = 0;\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 1, "return %s_end(acc, &B);\n", fn);
    sb_puts(b, "}\n");
}

void opq_emit_sample_helpers(StrBuf *b, OpqDialect d, const char *fn, const OpqSpec *s) {
    emit_arith_open(b, d);
    emit_loads(b, d, fn, s->dt, s->dt2);
    // sample.c's canonical_nan: which NaN an operation on two NaNs gives depends on the operand
    // order a compiler picks (it may commute), so a NaN result is stored as the positive quiet NaN.
    sb_printf(b, "%s double %s_out(double v) {\n", helper_qual(d), fn);
    if (d == OPQ_DIALECT_CUDA) {
        sb_line(b, 1, "return v != v ? __longlong_as_double(0x7ff8000000000000LL) : v;\n");
    } else {
        sb_line(b, 1, "if (v != v) {\n");
        sb_line(b, 2, "const uint64_t q = 0x7ff8000000000000ull;\n");
        sb_line(b, 2, "memcpy(&v, &q, sizeof v);\n");
        sb_line(b, 1, "}\n");
        sb_line(b, 1, "return v;\n");
    }
    sb_puts(b, "}\n");
    if (s->op == OPQ_GRID_SAMPLE)
        emit_gridsample_helpers(b, d, fn, s);
    else
        emit_roialign_helpers(b, d, fn, s);
}

void opq_sample_store(DType t, const char *v, char *buf, size_t n) {
    char e[400];
    if (t == DT_DOUBLE)
        snprintf(e, sizeof e, "%s", v);
    else if (t == DT_FLOAT)
        snprintf(e, sizeof e, "(float)(%s)", v);
    else
        snprintf(e, sizeof e, "orch_f32_round_odd(%s)", v);
    opq_store_f(t, e, buf, n);
}
