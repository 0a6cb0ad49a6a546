// Element types: sizes, names, float16/bfloat16 conversion and generic element access used by
// paths that are not specialised for float32 (Cast, integer arithmetic, comparisons of outputs).
#include "graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

size_t dtype_size(DType t) {
    switch (t) {
    case DT_FLOAT: case DT_INT32: case DT_UINT32: return 4;
    case DT_UINT8: case DT_INT8: case DT_BOOL: return 1;
    case DT_UINT16: case DT_INT16: case DT_FLOAT16: case DT_BFLOAT16: return 2;
    case DT_INT64: case DT_DOUBLE: case DT_UINT64: return 8;
    default: return 0;
    }
}

const char *dtype_name(DType t) {
    switch (t) {
    case DT_FLOAT: return "float32";
    case DT_UINT8: return "uint8";
    case DT_INT8: return "int8";
    case DT_UINT16: return "uint16";
    case DT_INT16: return "int16";
    case DT_INT32: return "int32";
    case DT_INT64: return "int64";
    case DT_STRING: return "string";
    case DT_BOOL: return "bool";
    case DT_FLOAT16: return "float16";
    case DT_DOUBLE: return "float64";
    case DT_UINT32: return "uint32";
    case DT_UINT64: return "uint64";
    case DT_BFLOAT16: return "bfloat16";
    case DT_UNDEFINED: return "undefined";
    }
    // Types orch does not store, named for messages.
    static const char *const later[] = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                        "float8e5m2fnuz", "uint4", "int4", "float4e2m1",
                                        "float8e8m0", "uint2", "int2"};
    if ((int)t == 14 || (int)t == 15)
        return (int)t == 14 ? "complex64" : "complex128";
    if ((int)t >= 17 && (int)t < 17 + (int)ORCH_COUNT(later))
        return later[(int)t - 17];
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "type %d", (int)t);
    return buf;
}

bool dtype_is_float(DType t) {
    return t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16 || t == DT_BFLOAT16;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { // subnormal: normalise
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00; // NaN
    if (a >= 0x477ff000u)
        return sign | 0x7c00; // >= 65520 rounds to infinity
    if (a < 0x38800000u) {
        // Half subnormal: count units of 2^-24; the scaling is exact, nearbyintf rounds to even.
        float af;
        memcpy(&af, &a, 4);
        return (uint16_t)(sign | (uint16_t)nearbyintf(af * 16777216.0f));
    }
    uint32_t r = a - 0x38000000u; // rebias the exponent from 127 to 15
    r += 0xfff + ((r >> 13) & 1); // round to nearest even on the 13 dropped bits
    return (uint16_t)(sign | (r >> 13));
}

float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double elem_get_f64(DType t, const void *p, int64_t i) {
    switch (t) {
    case DT_FLOAT: return ((const float *)p)[i];
    case DT_DOUBLE: return ((const double *)p)[i];
    case DT_FLOAT16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_BFLOAT16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_INT8: return ((const int8_t *)p)[i];
    case DT_UINT8: return ((const uint8_t *)p)[i];
    case DT_INT16: return ((const int16_t *)p)[i];
    case DT_UINT16: return ((const uint16_t *)p)[i];
    case DT_INT32: return ((const int32_t *)p)[i];
    case DT_UINT32: return ((const uint32_t *)p)[i];
    case DT_INT64: return (double)((const int64_t *)p)[i];
    case DT_UINT64: return (double)((const uint64_t *)p)[i];
    case DT_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: ORCH_ASSERT(!"elem_get_f64: unsupported dtype");
    }
    return 0;
}

int64_t elem_get_i64(DType t, const void *p, int64_t i) {
    switch (t) {
    case DT_INT64: return ((const int64_t *)p)[i];
    case DT_INT32: return ((const int32_t *)p)[i];
    case DT_INT8: return ((const int8_t *)p)[i];
    case DT_UINT8: return ((const uint8_t *)p)[i];
    case DT_INT16: return ((const int16_t *)p)[i];
    case DT_UINT16: return ((const uint16_t *)p)[i];
    case DT_UINT32: return ((const uint32_t *)p)[i];
    case DT_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case DT_BOOL: return ((const uint8_t *)p)[i] ? 1 : 0;
    default: {
        // Float to int truncates toward zero, saturating, as C casts would be undefined otherwise.
        double v = elem_get_f64(t, p, i);
        if (isnan(v))
            return 0;
        if (v >= 9.2233720368547758e18)
            return INT64_MAX;
        if (v <= -9.2233720368547758e18)
            return INT64_MIN;
        return (int64_t)v;
    }
    }
}

// double -> float rounding to odd: rounding that float again to a narrower format (half,
// bfloat16) then gives the correctly rounded result, which double -> float -> half does not.
static float f32_round_odd(double v) {
    float f = (float)v;
    if (isfinite(f) && (double)f != v) {
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (fabs((double)f) > fabs(v))
            bits--; // step toward zero: the truncated value
        bits |= 1;
        memcpy(&f, &bits, 4);
    }
    return f;
}

static int64_t sat_i64(double v, double lo, double hi) {
    if (isnan(v))
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return (int64_t)hi;
    return (int64_t)v;
}

void elem_set_f64(DType t, void *p, int64_t i, double v) {
    switch (t) {
    case DT_FLOAT: ((float *)p)[i] = (float)v; return;
    case DT_DOUBLE: ((double *)p)[i] = v; return;
    case DT_FLOAT16: ((uint16_t *)p)[i] = f32_to_f16(f32_round_odd(v)); return;
    case DT_BFLOAT16: ((uint16_t *)p)[i] = f32_to_bf16(f32_round_odd(v)); return;
    case DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case DT_INT8: ((int8_t *)p)[i] = (int8_t)sat_i64(v, -128, 127); return;
    case DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)sat_i64(v, 0, 255); return;
    case DT_INT16: ((int16_t *)p)[i] = (int16_t)sat_i64(v, -32768, 32767); return;
    case DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)sat_i64(v, 0, 65535); return;
    case DT_INT32: ((int32_t *)p)[i] = (int32_t)sat_i64(v, -2147483648.0, 2147483647.0); return;
    case DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)sat_i64(v, 0, 4294967295.0); return;
    case DT_INT64: ((int64_t *)p)[i] = sat_i64(v, -9.2233720368547758e18, 9.2233720368547748e18); return;
    case DT_UINT64:
        ((uint64_t *)p)[i] = (isnan(v) || v <= 0) ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)v;
        return;
    default: ORCH_ASSERT(!"elem_set_f64: unsupported dtype");
    }
}

void elem_set_i64(DType t, void *p, int64_t i, int64_t v) {
    switch (t) {
    case DT_INT64: ((int64_t *)p)[i] = v; return;
    case DT_FLOAT: ((float *)p)[i] = (float)v; return; // one rounding, not via double
    case DT_INT32: ((int32_t *)p)[i] = (int32_t)v; return;
    case DT_INT8: ((int8_t *)p)[i] = (int8_t)v; return;
    case DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; return;
    case DT_INT16: ((int16_t *)p)[i] = (int16_t)v; return;
    case DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; return;
    case DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; return;
    case DT_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; return;
    case DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    default: elem_set_f64(t, p, i, (double)v); return;
    }
}
