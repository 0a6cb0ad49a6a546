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
