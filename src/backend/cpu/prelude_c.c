// cgen_prelude (cgen.h): the text every translation unit of the C target starts with. It
// defines, as static inline functions, every orch_* helper cexpr's C dialect calls, with
// prim_interp.c's semantics: float16/bfloat16 conversions rounding to nearest even, float32 exp,
// tanh, erf, sin, cos and sigmoid as polynomials without library calls on their common paths (so
// loops calling them vectorise), NaN propagating through min/max with -0 < +0 there, integer
// division by zero giving 0, float-to-integer conversions saturating with NaN -> 0.
#include "cgen.h"

#include "../../codegen/math_prelude.h"

// The qualifier of the helpers math_prelude.h writes. The text below keeps one line of the
// prelude a line, math_prelude.h's pieces included.
#define QUAL "static inline "

// clang-format off
static const char prelude[] =
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "#define ORCH_MIN_I64(a, b) ((a) < (b) ? (a) : (b))\n"
    "static inline float orch_f16_to_f32(uint16_t h) {\n"
    "    uint32_t sign = (uint32_t)(h & 0x8000) << 16, ex = (h >> 10) & 0x1f, man = h & 0x3ff, "
    "bits;\n"
    "    if (ex == 0) {\n"
    "        if (man == 0) {\n"
    "            bits = sign;\n"
    "        } else {\n"
    "            ex = 127 - 15 + 1;\n"
    "            while (!(man & 0x400)) { man <<= 1; ex--; }\n"
    "            man &= 0x3ff;\n"
    "            bits = sign | (ex << 23) | (man << 13);\n"
    "        }\n"
    "    } else if (ex == 31) {\n"
    "        bits = sign | 0x7f800000u | (man << 13);\n"
    "    } else {\n"
    "        bits = sign | ((ex + 127 - 15) << 23) | (man << 13);\n"
    "    }\n"
    "    float f;\n"
    "    memcpy(&f, &bits, 4);\n"
    "    return f;\n"
    "}\n"
    "static inline uint16_t orch_f32_to_f16(float f) {\n"
    "    uint32_t x;\n"
    "    memcpy(&x, &f, 4);\n"
    "    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);\n"
    "    uint32_t a = x & 0x7fffffffu;\n"
    "    if (a > 0x7f800000u) return sign | 0x7e00;\n"
    "    if (a >= 0x477ff000u) return sign | 0x7c00;\n"
    "    if (a < 0x38800000u) {\n"
    "        float af;\n"
    "        memcpy(&af, &a, 4);\n"
    "        return (uint16_t)(sign | (uint16_t)nearbyintf(af * 16777216.0f));\n"
    "    }\n"
    "    uint32_t r = a - 0x38000000u;\n"
    "    r += 0xfff + ((r >> 13) & 1);\n"
    "    return (uint16_t)(sign | (r >> 13));\n"
    "}\n"
    "static inline float orch_bf16_to_f32(uint16_t h) {\n"
    "    uint32_t bits = (uint32_t)h << 16;\n"
    "    float f;\n"
    "    memcpy(&f, &bits, 4);\n"
    "    return f;\n"
    "}\n"
    "static inline uint16_t orch_f32_to_bf16(float f) {\n"
    "    uint32_t x;\n"
    "    memcpy(&x, &f, 4);\n"
    ORCH_MP_BF16_OF_BITS
    "}\n"
    // Round to odd on the way to float, so the second rounding (to half) is correct.
    "static inline float orch_f32_round_odd(double v) {\n"
    "    float f = (float)v;\n"
    "    if (isfinite(f) && (double)f != v) {\n"
    "        uint32_t bits;\n"
    "        memcpy(&bits, &f, 4);\n"
    "        if (fabs((double)f) > fabs(v)) bits--;\n"
    "        bits |= 1;\n"
    "        memcpy(&f, &bits, 4);\n"
    "    }\n"
    "    return f;\n"
    "}\n"
    ORCH_MP_ROUND_HALF(QUAL)
    // exp in float without a library call, so loops calling it vectorise: exp(x) = 2^k exp(r),
    // r = x - k ln2 (two-part ln2), exp(r) by its Taylor series to r^7 (|r| <= 0.35: below one
    // ulp), 2^k applied in two factors so the range reaches overflow and the subnormals.
    "typedef union { float f; int32_t i; } orch_fbits;\n"
    "static inline float orch_expf(float x) {\n"
    "    float xc = x < -104.0f ? -104.0f : x;\n"
    "    xc = xc > 89.0f ? 89.0f : xc;\n"
    "    float k = rintf(xc * 1.44269504088896341f);\n"
    "    k = k == k ? k : 0.0f;\n"
    "    float r = xc - k * 0.693145751953125f;\n"
    "    r = r - k * 1.428606765330187e-06f;\n"
    "    float p = 1.0f / 5040.0f;\n"
    "    p = p * r + 1.0f / 720.0f;\n"
    "    p = p * r + 1.0f / 120.0f;\n"
    "    p = p * r + 1.0f / 24.0f;\n"
    "    p = p * r + 1.0f / 6.0f;\n"
    "    p = p * r + 0.5f;\n"
    "    p = p * r + 1.0f;\n"
    "    p = p * r + 1.0f;\n"
    "    int32_t ki = (int32_t)k, k1 = ki / 2, k2 = ki - k1;\n"
    "    orch_fbits s1, s2;\n"
    "    s1.i = (k1 + 127) << 23;\n"
    "    s2.i = (k2 + 127) << 23;\n"
    "    return p * s1.f * s2.f;\n"
    "}\n"
    // tanh: an odd Taylor polynomial near 0 (no cancellation), 1 - 2/(e^2|x| + 1) elsewhere.
    "static inline float orch_tanhf(float x) {\n"
    "    float ax = fabsf(x), x2 = x * x;\n"
    "    float p = -929569.0f / 638512875.0f;\n"
    "    p = p * x2 + 21844.0f / 6081075.0f;\n"
    "    p = p * x2 - 1382.0f / 155925.0f;\n"
    "    p = p * x2 + 62.0f / 2835.0f;\n"
    "    p = p * x2 - 17.0f / 315.0f;\n"
    "    p = p * x2 + 2.0f / 15.0f;\n"
    "    p = p * x2 - 1.0f / 3.0f;\n"
    "    p = p * x2 * x + x;\n"
    "    float big = 1.0f - 2.0f / (orch_expf(2.0f * ax) + 1.0f);\n"
    "    big = x < 0 ? -big : big;\n"
    "    return ax < 0.375f ? p : (x != x ? x : big);\n"
    "}\n"
    // erf: its Taylor series near 0 (relative accuracy for small x), elsewhere 1 - erfc with
    // the Chebyshev fit of Numerical Recipes' erfcc (relative error below 1.2e-7).
    "static inline float orch_erff(float x) {\n"
    "    float ax = fabsf(x), x2 = x * x;\n"
    "    float p = -1.0f / 75600.0f;\n"
    "    p = p * x2 + 1.0f / 9360.0f;\n"
    "    p = p * x2 - 1.0f / 1320.0f;\n"
    "    p = p * x2 + 1.0f / 216.0f;\n"
    "    p = p * x2 - 1.0f / 42.0f;\n"
    "    p = p * x2 + 1.0f / 10.0f;\n"
    "    p = p * x2 - 1.0f / 3.0f;\n"
    "    p = (p * x2 * x + x) * 1.1283791670955126f;\n"
    "    float t = 1.0f / (1.0f + 0.5f * ax);\n"
    "    float q = 0.17087277f;\n"
    "    q = q * t - 0.82215223f;\n"
    "    q = q * t + 1.48851587f;\n"
    "    q = q * t - 1.13520398f;\n"
    "    q = q * t + 0.27886807f;\n"
    "    q = q * t - 0.18628806f;\n"
    "    q = q * t + 0.09678418f;\n"
    "    q = q * t + 0.37409196f;\n"
    "    q = q * t + 1.00002368f;\n"
    "    q = q * t - 1.26551223f;\n"
    "    float big = 1.0f - t * orch_expf(q - ax * ax);\n"
    "    big = x < 0 ? -big : big;\n"
    "    return ax < 0.5f ? p : (x != x ? x : big);\n"
    "}\n"
    // sin without a library call on its common path, so an epilogue loop calling it vectorises:
    // x = j pi + r and sin r by math_prelude.h's reduction and polynomial (the CUDA prelude's,
    // which reduces |x|), negated for odd j (the low bit of t); tiny |x| is its own sine (and -0
    // stays -0). 2 ulp for |x| <= 65536. Larger finite |x| raise *big, for the caller to redo
    // with libm's sinf (cexpr_set_sin_guard); infinities and NaN come out NaN.
    "static inline float orch_sinf_common(float x) {\n"
    ORCH_MP_SIN_REDUCE("x")
    ORCH_MP_SIN_POLY
    "    orch_fbits v, tb;\n"
    "    v.f = fmaf(r * s, p, r);\n"
    "    tb.f = t;\n"
    "    v.i ^= (int32_t)((uint32_t)tb.i << 31);\n"
    "    return fabsf(x) < 0x1p-12f ? x : v.f;\n"
    "}\n"
    "static inline float orch_sinf_guarded(float x, int *big) {\n"
    "    *big |= (fabsf(x) > 65536.0f) & (fabsf(x) <= 3.40282347e38f);\n"
    "    return orch_sinf_common(x);\n"
    "}\n"
    // cos in float, 2 ulp at most for |x| <= 65536 (1.995 over every float up to it, checked on
    // the host): x = (j + 1/2) pi + r by math_prelude.h's reduction, cos x = -(-1)^j sin r by the
    // sine's polynomial. Same contract as orch_sinf_guarded.
    "static inline float orch_cosf_common(float x) {\n"
    ORCH_MP_COS_REDUCE
    ORCH_MP_SIN_POLY
    "    orch_fbits v, tb;\n"
    "    v.f = fmaf(r * s, p, r);\n"
    "    tb.f = t;\n"
    "    v.i ^= (int32_t)(((uint32_t)tb.i << 31) ^ 0x80000000u);\n"
    "    return v.f;\n"
    "}\n"
    "static inline float orch_cosf_guarded(float x, int *big) {\n"
    "    *big |= (fabsf(x) > 65536.0f) & (fabsf(x) <= 3.40282347e38f);\n"
    "    return orch_cosf_common(x);\n"
    "}\n"
    "static inline float orch_sigmoidf(float a) {\n"
    "    float e = orch_expf(-fabsf(a)), r = 1.0f / (1.0f + e);\n"
    "    return a != a ? a : a >= 0 ? r : e * r;\n"
    "}\n"
    ORCH_MP_SIGMOID_SOFTPLUS(QUAL)
    ORCH_MP_MINMAX(QUAL, "signbit", "signbit")
    ORCH_MP_INT(QUAL);
// clang-format on

const char *cgen_prelude(void) {
    return prelude;
}
