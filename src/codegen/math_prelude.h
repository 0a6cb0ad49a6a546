// The float and integer helpers the C prelude (backend/cpu/prelude_c.c) and the CUDA prelude
// (backend/cuda/prelude_cuda.c) define alike, written once as string-literal macros that each
// prelude splices into its text: Q is the function qualifier ("static inline " in C, "ORCH_DEV "
// in CUDA), and the pieces of the float32 sine and cosine are the statements of their common
// paths, for each prelude to wrap with its own sign handling and range check.
// Needs: uint16_t, int64_t, uint64_t, UINT64_MAX, fmaf and the libm double functions in the
// prelude that splices them; orch_f32_round_odd, orch_f16_to_f32, orch_bf16_to_f32 and
// orch_f32_to_f16 defined before ORCH_MP_ROUND_HALF. Guarantees: prim_interp.c's semantics,
// the same text (constants and operation order) in both preludes, so both compute the same
// values.
#ifndef ORCH_CODEGEN_MATH_PRELUDE_H
#define ORCH_CODEGEN_MATH_PRELUDE_H

// One function head or statement a line, as the preludes print them.
// clang-format off

// float32 -> bfloat16 bits of x (a uint32_t local holding f's bits), rounded to nearest even; a
// NaN stays a (quiet) NaN.
#define ORCH_MP_BF16_OF_BITS                                                                       \
    "    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);\n"              \
    "    x += 0x7fff + ((x >> 16) & 1);\n"                                                         \
    "    return (uint16_t)(x >> 16);\n"

// A double rounded to float16 / bfloat16 and back: round to odd on the way to float, so that the
// second rounding (to half) is correct.
#define ORCH_MP_ROUND_HALF(Q)                                                                      \
    Q "double orch_round_f16(double v) {\n"                                                        \
      "    return (double)orch_f16_to_f32(orch_f32_to_f16(orch_f32_round_odd(v)));\n"              \
      "}\n"                                                                                        \
    Q "double orch_round_bf16(double v) {\n"                                                       \
      "    return (double)orch_bf16_to_f32(orch_f32_to_bf16(orch_f32_round_odd(v)));\n"            \
      "}\n"

// The float32 sine's reduction of X (x or |x|): X = j pi + r, |r| <= pi / 2, j = X / pi rounded
// by adding 1.5 * 2^23 (t; j's parity is t's lowest bit), pi in three parts with fused
// multiply-adds: exact enough for |X| <= 65536.
#define ORCH_MP_SIN_REDUCE(X)                                                                      \
    "    const float t = fmaf(" X ", 0.318309886183790672f, 12582912.0f);\n"                       \
    "    const float j = t - 12582912.0f;\n"                                                       \
    "    float r = fmaf(j, -3.14159274101257324f, " X ");\n"                                       \
    "    r = fmaf(j, 8.74227766e-08f, r);\n"                                                       \
    "    r = fmaf(j, 3.43322316e-15f, r);\n"

// The float32 cosine's: x = (j + 1/2) pi + r (k = j + 1/2), so cos x = -(-1)^j sin r and r stays
// exact near cos's zeros. Its third part of pi is pi_hi - pi_mid - pi to float precision,
// 3.43024899e-15: the sine's 3.43322316e-15 is 0.09% off, harmless there (1.995 ulp over every
// float up to 65536 with either) but 28 ulp here, at x = 52516.43, 1.6e-8 from a zero.
#define ORCH_MP_COS_REDUCE                                                                         \
    "    const float t = fmaf(x, 0.318309886183790672f, -0.5f) + 12582912.0f;\n"                   \
    "    const float k = (t - 12582912.0f) + 0.5f;\n"                                              \
    "    float r = fmaf(k, -3.14159274101257324f, x);\n"                                           \
    "    r = fmaf(k, 8.74227766e-08f, r);\n"                                                       \
    "    r = fmaf(k, 3.43024899e-15f, r);\n"

// sin r = r + r^3 P(r^2) on |r| <= pi / 2 (a minimax fit): s = r^2 and p = P(s), for the
// caller's fmaf(r * s, p, r).
#define ORCH_MP_SIN_POLY                                                                           \
    "    const float s = r * r;\n"                                                                 \
    "    float p = fmaf(-2.388889797e-08f, s, 2.752538421e-06f);\n"                                \
    "    p = fmaf(p, s, -1.984086848e-04f);\n"                                                     \
    "    p = fmaf(p, s, 8.333330974e-03f);\n"                                                      \
    "    p = fmaf(p, s, -1.666666716e-01f);\n"

// The double sigmoid (each branch's exp cannot overflow) and softplus, float and double.
#define ORCH_MP_SIGMOID_SOFTPLUS(Q)                                                                \
    Q "double orch_sigmoid(double a) {\n"                                                          \
      "    return a >= 0 ? 1.0 / (1.0 + exp(-a)) : exp(a) / (1.0 + exp(a));\n"                     \
      "}\n"                                                                                        \
    Q "float orch_softplusf(float a) {\n"                                                          \
      "    return (a > 0 ? a : 0.0f) + log1pf(expf(-fabsf(a)));\n"                                 \
      "}\n"                                                                                        \
    Q "double orch_softplus(double a) {\n"                                                         \
      "    return a > 0 ? a + log1p(exp(-a)) : log1p(exp(a));\n"                                   \
      "}\n"

// min and max: NaN propagates; between equal zeros min takes -0 and max +0 (prim_interp's rule).
// SIGNF / SIGN: the prelude's sign-bit test of a float / double.
#define ORCH_MP_MINMAX(Q, SIGNF, SIGN)                                                             \
    Q "float orch_fminf(float a, float b) {\n"                                                     \
      "    return (a != a || b != b) ? a + b : (a < b || (a == b && " SIGNF "(a))) ? a : b;\n"     \
      "}\n"                                                                                        \
    Q "float orch_fmaxf(float a, float b) {\n"                                                     \
      "    return (a != a || b != b) ? a + b : (a > b || (a == b && !" SIGNF "(a))) ? a : b;\n"    \
      "}\n"                                                                                        \
    Q "double orch_fmin(double a, double b) {\n"                                                   \
      "    return (a != a || b != b) ? a + b : (a < b || (a == b && " SIGN "(a))) ? a : b;\n"      \
      "}\n"                                                                                        \
    Q "double orch_fmax(double a, double b) {\n"                                                   \
      "    return (a != a || b != b) ? a + b : (a > b || (a == b && !" SIGN "(a))) ? a : b;\n"     \
      "}\n"

// Integer arithmetic: division by zero gives 0 and INT64_MIN / -1 wraps, shifts of 64 and more
// give 0 (prim_interp's rules); float to integer: NaN gives 0, out of range saturates
// (elem_set_f64's rule).
#define ORCH_MP_INT(Q)                                                                             \
    Q "int64_t orch_idiv(int64_t a, int64_t b) {\n"                                                \
      "    return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;\n"                    \
      "}\n"                                                                                        \
    Q "int64_t orch_imod(int64_t a, int64_t b) {\n"                                                \
      "    if (b == 0 || b == -1) return 0;\n"                                                     \
      "    int64_t r = a % b;\n"                                                                   \
      "    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"                                 \
      "}\n"                                                                                        \
    Q "int64_t orch_ifmod(int64_t a, int64_t b) {\n"                                               \
      "    return (b == 0 || b == -1) ? 0 : a % b;\n"                                              \
      "}\n"                                                                                        \
    Q "int64_t orch_ipow(int64_t base, int64_t ex) {\n"                                            \
      "    if (ex < 0) return base == 1 ? 1 : base == -1 ? (ex % 2 ? -1 : 1) : 0;\n"               \
      "    uint64_t r = 1, b = (uint64_t)base;\n"                                                  \
      "    while (ex) {\n"                                                                         \
      "        if (ex & 1) r *= b;\n"                                                              \
      "        b *= b;\n"                                                                          \
      "        ex >>= 1;\n"                                                                        \
      "    }\n"                                                                                    \
      "    return (int64_t)r;\n"                                                                   \
      "}\n"                                                                                        \
    Q "int64_t orch_shl(int64_t a, int64_t b) {\n"                                                 \
      "    return (uint64_t)b >= 64 ? 0 : (int64_t)((uint64_t)a << (uint64_t)b);\n"                \
      "}\n"                                                                                        \
    Q "int64_t orch_shr(int64_t a, int64_t b) {\n"                                                 \
      "    return (uint64_t)b >= 64 ? 0 : (int64_t)((uint64_t)a >> (uint64_t)b);\n"                \
      "}\n"                                                                                        \
    Q "int64_t orch_sat(double v, double lo, double hi) {\n"                                       \
      "    return v != v ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (int64_t)hi : (int64_t)v;\n"      \
      "}\n"                                                                                        \
    Q "uint64_t orch_sat_u64(double v) {\n"                                                        \
      "    return (v != v || v <= 0) ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : "            \
      "(uint64_t)v;\n"                                                                            \
      "}\n"

// clang-format on

#endif
