// cugen_prelude (cugen.h): the text every generated CUDA translation unit starts with. It is
// orch_cuda_prelude() (integer typedefs, ORCH_KERNEL, warp reductions), the kernel argument
// struct, the C macros value expressions use (INT64_C, NAN, INFINITY, ...) and __device__
// versions of every orch_* helper cexpr.c emits calls to, with the semantics of the C target's
// prelude (cgen_prelude) and so of prim_interp.c: float32 math in float, float16/bfloat16 values
// in double rounded after every instruction, NaN propagating through min/max, -0 < +0 there,
// integer division by zero giving 0, float-to-integer conversions saturating with NaN -> 0.
// Transcendentals use CUDA's own accurate functions (expf, tanhf, erff: at most 2 ulp; no
// --use_fast_math), where the C prelude has vectorisable polynomials of the same accuracy.
#include "../../codegen/cexpr.h"
#include "../../codegen/math_prelude.h"
#include "cugen.h"
#include "nvrtc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The qualifier of the helpers math_prelude.h writes. The text below keeps one line of the
// prelude a line, math_prelude.h's pieces included.
#define QUAL "ORCH_DEV "

// clang-format off
static const char HELPERS[] =
    "// ---- cugen_prelude (src/backend/cuda/prelude_cuda.c) ----\n"
    "#define ORCH_CUDA_MAX_IN 32\n"
    "struct OrchArgs { const void *in[ORCH_CUDA_MAX_IN]; void *out; };\n"
    "#define INT64_C(c) c##LL\n"
    "#define UINT64_C(c) c##ULL\n"
    "#define INT64_MAX 9223372036854775807LL\n"
    "#define INT64_MIN (-INT64_MAX - 1)\n"
    "#define UINT64_MAX 18446744073709551615ULL\n"
    "#define INFINITY ORCH_INF\n"
    "#define NAN ORCH_NAN\n"
    "#define ORCH_MIN_I64(a, b) ((a) < (b) ? (a) : (b))\n"
    "#define ORCH_DEV static __device__ __forceinline__\n"
    // Half <-> float by the hardware's conversions (exact one way, round to nearest even the
    // other; a NaN becomes the canonical half NaN). A bit-level version with a branch per
    // exponent class made them the largest cost of half-storage elementwise kernels: a
    // Segformer kernel summing three resized maps spent ~170 of its ~300 instructions per
    // element converting its eleven loads.
    "ORCH_DEV float orch_f16_to_f32(uint16_t h) {\n"
    "    float r;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(h));\n"
    "    return r;\n"
    "}\n"
    "ORCH_DEV uint16_t orch_f32_to_f16(float f) {\n"
    "    unsigned short h;\n"
    "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "    return h;\n"
    "}\n"
    "ORCH_DEV float orch_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }\n"
    "ORCH_DEV uint16_t orch_f32_to_bf16(float f) {\n"
    "    uint32_t x = __float_as_uint(f);\n"
    ORCH_MP_BF16_OF_BITS
    "}\n"
    // Round to odd on the way to float, so the second rounding (to half) is correct.
    "ORCH_DEV float orch_f32_round_odd(double v) {\n"
    "    float f = __double2float_rn(v);\n"
    "    uint32_t bits = __float_as_uint(f);\n"
    "    if ((bits & 0x7f800000u) != 0x7f800000u && (double)f != v) {\n"
    "        if (fabs((double)f) > fabs(v)) bits--;\n"
    "        bits |= 1;\n"
    "        f = __uint_as_float(bits);\n"
    "    }\n"
    "    return f;\n"
    "}\n"
    ORCH_MP_ROUND_HALF(QUAL)
    // Half values computed in float (cexpr under fast math: a float result rounded once to half
    // is the correctly rounded half result for + - * / sqrt, and within a half ulp for the rest).
    "ORCH_DEV float orch_round_f16f(float v) {\n"
    "    unsigned short h;\n"
    "    float r;\n"
    "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v));\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(h));\n"
    "    return r;\n"
    "}\n"
    "ORCH_DEV float orch_round_bf16f(float v) { return orch_bf16_to_f32(orch_f32_to_bf16(v)); }\n"
    "ORCH_DEV float orch_expf(float x) { return expf(x); }\n"
    "ORCH_DEV float orch_tanhf(float x) { return tanhf(x); }\n"
    "ORCH_DEV float orch_erff(float x) { return erff(x); }\n"
    // 1 / y for y in [1, 2]: rcp.approx and one Newton step, within an ulp. The division it
    // replaces in the sigmoid calls a subroutine with a branch for the cases this range never
    // has, which cost the fp32 MLP's sin * sigmoid epilogue a third of its time (lab, H100).
    // (A quadratic and two Newton steps on the FMA pipe instead, 0.68 ulp, measured 1% slower in
    // the f64 MLP kernel, H200: that kernel waits on latencies, not on the special-function unit.)
    "ORCH_DEV float orch_rcp_1_2f(float y) {\n"
    "    float r;\n"
    "    asm(\"rcp.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(y));\n"
    "    return fmaf(r, fmaf(-y, r, 1.0f), r);\n"
    "}\n"
    "ORCH_DEV float orch_sigmoidf(float a) {\n"
    "    float e = expf(-fabsf(a)), r = orch_rcp_1_2f(1.0f + e);\n"
    "    return a >= 0.0f ? r : e * r;\n"
    "}\n"
    // sin in float, 2 ulp at most: sin x = sign(x) sin |x|, |x| = j pi + r and sin r by
    // math_prelude.h's reduction and polynomial (the C prelude's, which reduces x), negated for
    // odd j (the low bit of t). One integer add puts parity ^ sign(x) in bit 31 ((t << 31) + x: nothing carries
    // into it), one LOP3 applies it. Working on |x| keeps -0's sign without a test: r = +0 for
    // x = +-0 and tiny x are their own sine (r * s * P underflows), and sin -0 = -0 is the
    // sign's flip (r + r^3 P for r = -0 would be +0: the terms are zeros of opposite signs).
    // 1.995 ulp over every float up to 65536, checked exhaustively on the host (the same bound
    // as the test on tiny |x| it replaces: two instructions an element fewer). Larger |x|,
    // infinities and NaN go to CUDA's sinf (its Payne-Hanek reduction). sinf itself has a
    // branch on every call, which keeps the unrolled elements of an epilogue loop from
    // overlapping; orch_sinf still has one (the range check), which orch_sinf_guarded leaves
    // to its caller.
    "ORCH_DEV float orch_sinf_common(float x) {\n"
    "    const float ax = fabsf(x);\n"
    ORCH_MP_SIN_REDUCE("ax")
    ORCH_MP_SIN_POLY
    "    const float v = fmaf(r * s, p, r);\n"
    "    const unsigned sg = (__float_as_uint(t) << 31) + __float_as_uint(x);\n"
    "    return __uint_as_float(__float_as_uint(v) ^ (sg & 0x80000000u));\n"
    "}\n"
    // CUDA's sinf out of line: inlined at every call site its Payne-Hanek path made the fp32
    // MLP kernel's code outgrow the instruction cache (H200, v=f64: "no instruction" was the
    // largest stall, 3.8 of 11.2 cycles per issued instruction).
    "static __device__ __noinline__ float orch_sinf_slow(float x) { return sinf(x); }\n"
    "ORCH_DEV float orch_sinf(float x) {\n"
    "    return fabsf(x) <= 65536.0f ? orch_sinf_common(x) : orch_sinf_slow(x);\n"
    "}\n"
    // cos the same way, 2 ulp at most for |x| <= 65536 (math_prelude.h's reduction, as the C
    // prelude's orch_cosf_common: x = (j + 1/2) pi + r, cos x = -(-1)^j sin r), CUDA's cosf out
    // of line past 65536.
    "ORCH_DEV float orch_cosf_common(float x) {\n"
    ORCH_MP_COS_REDUCE
    ORCH_MP_SIN_POLY
    "    const float v = fmaf(r * s, p, r);\n"
    "    return __int_as_float(__float_as_int(v) ^ (__float_as_int(t) << 31) ^ 0x80000000);\n"
    "}\n"
    "static __device__ __noinline__ float orch_cosf_slow(float x) { return cosf(x); }\n"
    "ORCH_DEV float orch_cosf(float x) {\n"
    "    return fabsf(x) <= 65536.0f ? orch_cosf_common(x) : orch_cosf_slow(x);\n"
    "}\n"
    "ORCH_DEV float orch_cosf_guarded(float x, bool &big) {\n"
    "    big |= fabsf(x) > 65536.0f;\n"
    "    return orch_cosf_common(x);\n"
    "}\n"
    // The common path with the range check left to the caller (cexpr_set_sin_guard): NaN comes
    // out NaN and raises nothing; |x| > 65536 raises the flag, infinities too (one comparison a
    // sine instead of two; the redo gives sinf's NaN for them).
    "ORCH_DEV float orch_sinf_guarded(float x, bool &big) {\n"
    "    big |= fabsf(x) > 65536.0f;\n"
    "    return orch_sinf_common(x);\n"
    "}\n"
    "// Special-function-unit versions for reduced precisions (cexpr_set_fast_math): exp a few\n"
    "// ulp (ex2.approx, results under 2^-126 flushed to 0); sin/cos one Cody-Waite step to\n"
    "// [-pi, pi] (2pi as float + its error), then sin.approx: ~6e-7 absolute for |x| < 1e5;\n"
    "// sigmoid through ex2.approx and rcp.approx (a NaN propagates through both). These are as\n"
    "// few instructions as the accuracy allows (ex2.approx.ftz is one, the non-ftz form four;\n"
    "// the sigmoid seven), and x / 2pi is rounded by adding and taking away 1.5 * 2^23 (exact\n"
    "// below 2^22) on the FMA pipe: rintf's FRND shares the special-function unit with the\n"
    "// MUFUs, which bound the f16 MLP kernel (H200: 36.6 -> 32.7 us without it).\n"
    "ORCH_DEV float orch_fast_expf(float x) {\n"
    "    float r;\n"
    "    asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x * 1.44269504088896341f));\n"
    "    return r;\n"
    "}\n"
    "ORCH_DEV float orch_fast_reduce2pi(float x) {\n"
    "    const float k = fmaf(x, 0.159154943091895336f, 12582912.0f) - 12582912.0f;\n"
    "    return fmaf(k, 1.74845553146951715e-7f, fmaf(k, -6.28318548202514648f, x));\n"
    "}\n"
    "ORCH_DEV float orch_fast_sinf(float x) {\n"
    "    float r;\n"
    "    asm(\"sin.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(orch_fast_reduce2pi(x)));\n"
    "    return r;\n"
    "}\n"
    "ORCH_DEV float orch_fast_cosf(float x) {\n"
    "    float r;\n"
    "    asm(\"cos.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(orch_fast_reduce2pi(x)));\n"
    "    return r;\n"
    "}\n"
    "ORCH_DEV float orch_fast_sigmoidf(float a) {\n"
    "    float e = orch_fast_expf(-fabsf(a)), r;\n"
    "    asm(\"rcp.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(1.0f + e));\n"
    "    return a >= 0.0f ? r : e * r;\n"
    "}\n"
    ORCH_MP_SIGMOID_SOFTPLUS(QUAL)
    // NaN propagates; between equal zeros min takes -0 and max +0 (prim_interp's rule).
    "ORCH_DEV bool orch_signf(float a) { return (__float_as_uint(a) >> 31) != 0; }\n"
    "ORCH_DEV bool orch_sign(double a) { return __double_as_longlong(a) < 0; }\n"
    ORCH_MP_MINMAX(QUAL, "orch_signf", "orch_sign")
    ORCH_MP_INT(QUAL)
    "// ---- end of cugen_prelude ----\n";
// clang-format on

static char *g_prelude;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build_once(void) {
    const char *base = orch_cuda_prelude();
    size_t a = strlen(base), b = strlen(HELPERS);
    g_prelude = xmalloc(a + b + 1);
    memcpy(g_prelude, base, a);
    memcpy(g_prelude + a, HELPERS, b + 1);
}

const char *cugen_prelude(void) {
    pthread_once(&g_once, build_once);
    return g_prelude;
}

void cugen_cexpr_dialect(Cexpr *x, bool fast) {
    cexpr_set_cuda(x, true);
    cexpr_set_fast_math(x, fast);
}
