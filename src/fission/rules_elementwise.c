// Fission rules for elementwise ONNX ops: each becomes one or a few ELEMWISE primitives of one
// instruction (the clean-up passes merge chains into programs), computing what the reference ops
// of src/ops/elementwise.c compute. A dtype for which that cannot be kept exact is left opaque.
#include "fission.h"

#include <math.h>
#include <string.h>

// ---- dtype classes ----

// What a rule covers, per dtype of its deciding input. The primitive interpreter reads uint64 as
// int64, so only ops that do not order, divide or convert uint64 values accept it.
enum {
    C_FLOAT = 1, // float16, bfloat16, float32, double
    C_SINT = 2,  // int8 .. int64
    C_UINT = 4,  // uint8 .. uint32
    C_U64 = 8,
    C_BOOL = 16,
    C_NUM = C_FLOAT | C_SINT | C_UINT,
    C_ALL = C_NUM | C_U64 | C_BOOL,
};

static unsigned dclass(DType t) {
    switch (t) {
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_FLOAT16:
    case DT_BFLOAT16: return C_FLOAT;
    case DT_INT8:
    case DT_INT16:
    case DT_INT32:
    case DT_INT64: return C_SINT;
    case DT_UINT8:
    case DT_UINT16:
    case DT_UINT32: return C_UINT;
    case DT_UINT64: return C_U64;
    case DT_BOOL: return C_BOOL;
    default: return 0;
    }
}

static bool in_class(const FissionCtx *fc, int i, unsigned classes) {
    return (dclass(fc_in_t(fc, i)->dtype) & classes) != 0;
}

// ---- ops of one instruction ----

// The reference computes these in double (integers in int64) and rounds once, which is what one
// instruction of the interpreter does, so they are exact in every dtype of their classes.
// X-macro: ONNX op, instruction, dtype classes of input 0 (Where: input 1).
#define DIRECT_OPS(X)                                                                              \
    X("Add", EW_ADD, C_NUM | C_U64)                                                                \
    X("Sub", EW_SUB, C_NUM | C_U64)                                                                \
    X("Mul", EW_MUL, C_NUM | C_U64)                                                                \
    X("Div", EW_DIV, C_NUM)                                                                        \
    X("Equal", EW_EQ, C_ALL)                                                                       \
    X("Less", EW_LT, C_NUM)                                                                        \
    X("LessOrEqual", EW_LE, C_NUM)                                                                 \
    X("Greater", EW_GT, C_NUM)                                                                     \
    X("GreaterOrEqual", EW_GE, C_NUM)                                                              \
    X("And", EW_AND, C_BOOL)                                                                       \
    X("Or", EW_OR, C_BOOL)                                                                         \
    X("Xor", EW_XOR, C_BOOL)                                                                       \
    X("Not", EW_NOT, C_BOOL)                                                                       \
    X("Where", EW_WHERE, C_ALL)                                                                    \
    X("Neg", EW_NEG, C_FLOAT | C_SINT)                                                             \
    X("Abs", EW_ABS, C_NUM)                                                                        \
    X("Sign", EW_SIGN, C_NUM)                                                                      \
    X("Relu", EW_RELU, C_FLOAT | C_SINT)                                                           \
    X("Sqrt", EW_SQRT, C_FLOAT)                                                                    \
    X("Reciprocal", EW_RECIP, C_FLOAT)                                                             \
    X("Exp", EW_EXP, C_FLOAT)                                                                      \
    X("Log", EW_LOG, C_FLOAT)                                                                      \
    X("Erf", EW_ERF, C_FLOAT)                                                                      \
    X("Tanh", EW_TANH, C_FLOAT)                                                                    \
    X("Sigmoid", EW_SIGMOID, C_FLOAT)                                                              \
    X("Softplus", EW_SOFTPLUS, C_FLOAT)                                                            \
    X("Sin", EW_SIN, C_FLOAT)                                                                      \
    X("Cos", EW_COS, C_FLOAT)                                                                      \
    X("Tan", EW_TAN, C_FLOAT)                                                                      \
    X("Asin", EW_ASIN, C_FLOAT)                                                                    \
    X("Acos", EW_ACOS, C_FLOAT)                                                                    \
    X("Atan", EW_ATAN, C_FLOAT)                                                                    \
    X("Sinh", EW_SINH, C_FLOAT)                                                                    \
    X("Cosh", EW_COSH, C_FLOAT)                                                                    \
    X("Asinh", EW_ASINH, C_FLOAT)                                                                  \
    X("Acosh", EW_ACOSH, C_FLOAT)                                                                  \
    X("Atanh", EW_ATANH, C_FLOAT)                                                                  \
    X("Floor", EW_FLOOR, C_FLOAT)                                                                  \
    X("Ceil", EW_CEIL, C_FLOAT)                                                                    \
    X("Round", EW_ROUND, C_FLOAT)                                                                  \
    X("IsNaN", EW_ISNAN, C_FLOAT)

typedef struct Direct {
    const char *op;
    EwOp ew;
    unsigned classes;
} Direct;

static const Direct directs[] = {
#define DIRECT_ROW(op, ew, classes) {op, ew, classes},
    DIRECT_OPS(DIRECT_ROW)
#undef DIRECT_ROW
};

static int rule_direct(FissionCtx *fc) {
    const Direct *d = NULL;
    for (size_t i = 0; i < ORCH_COUNT(directs) && !d; i++)
        if (strcmp(fc->n->op, directs[i].op) == 0)
            d = &directs[i];
    ORCH_ASSERT(d);
    if (!in_class(fc, d->ew == EW_WHERE ? 1 : 0, d->classes))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    int y;
    switch (ew_op_arity(d->ew)) {
    case 1: y = pb_ew1(b, d->ew, fc_in(fc, 0)); break;
    case 2: y = pb_ew2(b, d->ew, fc_in(fc, 0), fc_in(fc, 1)); break;
    default: y = pb_where(b, fc_in(fc, 0), fc_in(fc, 1), fc_in(fc, 2)); break;
    }
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// Mod's fmod attribute picks the sign rule for integers; float Mod is fmod either way.
static int rule_mod(FissionCtx *fc) {
    if (!in_class(fc, 0, C_NUM))
        return ST_UNSUPPORTED;
    EwOp op = node_attr_i(fc->n, "fmod", 0) ? EW_FMOD : EW_MOD;
    fc_set_out(fc, 0, pb_ew2(&fc->b, op, fc_in(fc, 0), fc_in(fc, 1)));
    return ST_OK;
}

static int rule_bitshift(FissionCtx *fc) {
    EwOp op = strcmp(node_attr_s(fc->n, "direction", ""), "LEFT") == 0 ? EW_BITSHL : EW_BITSHR;
    fc_set_out(fc, 0, pb_ew2(&fc->b, op, fc_in(fc, 0), fc_in(fc, 1)));
    return ST_OK;
}

static int rule_isinf(FissionCtx *fc) {
    bool pos = node_attr_i(fc->n, "detect_positive", 1) != 0;
    bool neg = node_attr_i(fc->n, "detect_negative", 1) != 0;
    PB *b = &fc->b;
    int x = fc_in(fc, 0), y;
    if (pos && neg)
        y = pb_ew1(b, EW_ISINF, x);
    else if (pos || neg)
        y = pb_ew1(b, pos ? EW_ISPOSINF : EW_ISNEGINF, x);
    else // detects nothing: all false
        y = pb_ew2i(b, EW_AND, pb_ew1(b, EW_ISINF, x), 0);
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// Pow's exponent may have another dtype than the base; the result has the base's.
static int rule_pow(FissionCtx *fc) {
    DType tx = fc_in_t(fc, 0)->dtype, te = fc_in_t(fc, 1)->dtype;
    bool fx = dtype_is_float(tx), fe = dtype_is_float(te);
    PB *b = &fc->b;
    int x = fc_in(fc, 0), e = fc_in(fc, 1);
    // uint64 read as int64 would give the wrong double where the other side is a float.
    if ((tx == DT_UINT64 && fe) || (te == DT_UINT64 && fx))
        return ST_UNSUPPORTED;
    if (!fx && fe) {
        // An integer base to a float power: pow in double, then converted (truncated, saturated)
        // to the base's type, as the reference; a float instruction of integer type would wrap.
        int p = pb_ew2(b, EW_POW, pb_cast(b, x, DT_DOUBLE), e);
        fc_set_out(fc, 0, pb_cast(b, p, tx));
        return ST_OK;
    }
    fc_set_out(fc, 0, pb_ew2(b, EW_POW, x, e));
    return ST_OK;
}

// The interpreter reads uint64 as int64; those casts to floats stay with the reference.
static int rule_cast(FissionCtx *fc) {
    DType from = fc_in_t(fc, 0)->dtype, to = fc_out_t(fc, 0)->dtype;
    if (dtype_is_float(to) && from == DT_UINT64)
        return ST_UNSUPPORTED;
    fc_set_out(fc, 0, from == to ? fc_in(fc, 0) : pb_cast(&fc->b, fc_in(fc, 0), to));
    return ST_OK;
}

// ---- variadic: a left-to-right chain of binary primitives ----

// Sum and Mean round each partial sum to the dtype like the reference, so the chain is exact.
static int rule_variadic(FissionCtx *fc) {
    const char *op = fc->n->op;
    bool sum = strcmp(op, "Sum") == 0, mean = strcmp(op, "Mean") == 0;
    EwOp ew = sum || mean ? EW_ADD : strcmp(op, "Min") == 0 ? EW_MIN : EW_MAX;
    for (int i = 0; i < fc->n->n_in; i++)
        if (!in_class(fc, i, sum || mean ? C_FLOAT : C_NUM))
            return ST_UNSUPPORTED;
    PB *b = &fc->b;
    int y = fc_in(fc, 0);
    for (int i = 1; i < fc->n->n_in; i++)
        y = pb_ew2(b, ew, y, fc_in(fc, i));
    if (mean && fc->n->n_in > 1)
        y = pb_ew2i(b, EW_DIV, y, fc->n->n_in);
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// ---- activations with selections: one rounding per branch, exact in every float dtype ----

static int zero_of(FissionCtx *fc, DType t) {
    return pb_const_scalar(&fc->b, t, 0.0);
}

// x < 0 ? alpha * x : x
static int rule_leakyrelu(FissionCtx *fc) {
    PB *b = &fc->b;
    int x = fc_in(fc, 0);
    int m = pb_ew2i(b, EW_MUL, x, node_attr_f(fc->n, "alpha", 0.01f));
    fc_set_out(fc, 0, pb_where(b, pb_ew2i(b, EW_LT, x, 0), m, x));
    return ST_OK;
}

// x < 0 ? x * slope : x, the slope broadcast to X's shape. Unsigned X is never negative.
static int rule_prelu(FissionCtx *fc) {
    PB *b = &fc->b;
    int x = fc_in(fc, 0);
    if (in_class(fc, 0, C_UINT | C_U64)) {
        fc_set_out(fc, 0, x);
        return ST_OK;
    }
    int m = pb_ew2(b, EW_MUL, x, fc_in(fc, 1));
    fc_set_out(fc, 0, pb_where(b, pb_ew2i(b, EW_LT, x, 0), m, x));
    return ST_OK;
}

// x > alpha ? x : 0 (NaN gives 0)
static int rule_thresholdedrelu(FissionCtx *fc) {
    PB *b = &fc->b;
    int x = fc_in(fc, 0);
    int c = pb_ew2i(b, EW_GT, x, node_attr_f(fc->n, "alpha", 1.0f));
    fc_set_out(fc, 0, pb_where(b, c, x, zero_of(fc, fc_in_t(fc, 0)->dtype)));
    return ST_OK;
}

// x < -lambd ? x + bias : x > lambd ? x - bias : 0. Integers go through double and are converted
// back (truncated, saturated) as the reference does.
static int rule_shrink(FissionCtx *fc) {
    DType t = fc_in_t(fc, 0)->dtype;
    if (!in_class(fc, 0, C_FLOAT | C_SINT | C_UINT))
        return ST_UNSUPPORTED;
    double lambd = node_attr_f(fc->n, "lambd", 0.5f), bias = node_attr_f(fc->n, "bias", 0.0f);
    PB *b = &fc->b;
    DType w = dtype_is_float(t) ? t : DT_DOUBLE;
    int x = w == t ? fc_in(fc, 0) : pb_cast(b, fc_in(fc, 0), w);
    int hi = pb_where(b, pb_ew2i(b, EW_GT, x, lambd), pb_ew2i(b, EW_SUB, x, bias), zero_of(fc, w));
    int y = pb_where(b, pb_ew2i(b, EW_LT, x, -lambd), pb_ew2i(b, EW_ADD, x, bias), hi);
    fc_set_out(fc, 0, w == t ? y : pb_cast(b, y, t));
    return ST_OK;
}

// A Clip bound: absent, a constant (its value in *v; NaN counts as absent since the reference's
// comparisons then never pick it), or a tensor: a run-time one, or an integer a double cannot
// hold. A tensor is read through a rank-0 view so that a [1] bound keeps a scalar X's rank.
typedef enum ClipBound { CLIP_ABSENT, CLIP_CONST, CLIP_TENSOR } ClipBound;

static ClipBound clip_bound(FissionCtx *fc, int i, double *v, int *t) {
    const Tensor *b = fc_in_t(fc, i);
    if (!b)
        return CLIP_ABSENT;
    if (b->kind == TK_CONST && dtype_is_float(b->dtype)) {
        *v = elem_get_f64(b->dtype, b->data, 0);
        return isnan(*v) ? CLIP_ABSENT : CLIP_CONST;
    }
    if (b->kind == TK_CONST) {
        int64_t iv = elem_get_i64(b->dtype, b->data, 0);
        *v = (double)iv;
        if (iv <= (INT64_C(1) << 53) && iv >= -(INT64_C(1) << 53))
            return CLIP_CONST;
    }
    *t = b->rank ? pb_reshape(&fc->b, fc_in(fc, i), 0, NULL) : fc_in(fc, i);
    return CLIP_TENSOR;
}

// min(max(x, lo), hi), the reference's rule (docs/numerics.md): max wins when lo > hi, a NaN x
// passes and a NaN bound is no bound. Constant bounds are max/min with an immediate; a tensor
// bound (integers: exactly) is skipped where it is NaN.
static int rule_clip(FissionCtx *fc) {
    if (!in_class(fc, 0, C_NUM))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    int y = fc_in(fc, 0);
    for (int i = 1; i <= 2; i++) {
        double v = 0;
        int t = -1;
        bool lo = i == 1;
        switch (clip_bound(fc, i, &v, &t)) {
        case CLIP_ABSENT: break;
        case CLIP_CONST: y = pb_ew2i(b, lo ? EW_MAX : EW_MIN, y, v); break;
        case CLIP_TENSOR:
            if (in_class(fc, 0, C_FLOAT))
                y = pb_where(b, pb_ew1(b, EW_ISNAN, t), y, pb_ew2(b, lo ? EW_MAX : EW_MIN, y, t));
            else
                y = pb_where(b, pb_ew2(b, lo ? EW_LT : EW_GT, y, t), t, y);
            break;
        }
    }
    fc_set_out(fc, 0, y);
    return ST_OK;
}

// ---- composite activations ----

// float32 and double compose in their own type: float32 rounds each step, within the tolerance
// the project accepts, with formulas chosen to stay accurate in float32. float16 and bfloat16
// compute the reference's own double formula step by step and round once at the end, which is
// bit-exact; a rule that cannot follow the reference's formula (mirror false: it needs expm1,
// which no instruction computes) leaves them opaque.
static int begin(FissionCtx *fc, bool mirror, int *x) {
    DType t = fc_in_t(fc, 0)->dtype;
    *x = fc_in(fc, 0);
    if (t == DT_FLOAT || t == DT_DOUBLE)
        return ST_OK;
    if (!mirror || !dtype_is_float(t))
        return ST_UNSUPPORTED;
    *x = pb_cast(&fc->b, *x, DT_DOUBLE);
    return ST_OK;
}

static int finish(FissionCtx *fc, int y) {
    DType t = fc_out_t(fc, 0)->dtype;
    fc_set_out(fc, 0, pb_t(&fc->b, y)->dtype == t ? y : pb_cast(&fc->b, y, t));
    return ST_OK;
}

static DType work_dtype(FissionCtx *fc, int x) {
    return pb_t(&fc->b, x)->dtype;
}

// expm1(x) = tanh(x/2) * (exp(x) + 1): a few roundings of relative error for every x, where
// exp(x) - 1 loses its digits near 0.
static int expm1_of(PB *b, int x) {
    int t = pb_ew1(b, EW_TANH, pb_ew2i(b, EW_MUL, x, 0.5));
    return pb_ew2(b, EW_MUL, t, pb_ew2i(b, EW_ADD, pb_ew1(b, EW_EXP, x), 1.0));
}

// x < 0 ? alpha * expm1(x) : x
static int rule_elu(FissionCtx *fc) {
    int x;
    if (begin(fc, false, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    int m = pb_ew2i(b, EW_MUL, expm1_of(b, x), node_attr_f(fc->n, "alpha", 1.0f));
    return finish(fc, pb_where(b, pb_ew2i(b, EW_LT, x, 0), m, x));
}

// gamma * (x > 0 ? x : alpha * exp(x) - alpha); float32 takes alpha * expm1(x) instead, which does
// not cancel near 0.
static int rule_selu(FissionCtx *fc) {
    int x;
    if (begin(fc, true, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    double alpha = node_attr_f(fc->n, "alpha", 1.67326319217681884765625f);
    double gamma = node_attr_f(fc->n, "gamma", 1.05070102214813232421875f);
    int m;
    if (work_dtype(fc, x) == DT_FLOAT)
        m = pb_ew2i(b, EW_MUL, expm1_of(b, x), alpha);
    else
        m = pb_ew2i(b, EW_SUB, pb_ew2i(b, EW_MUL, pb_ew1(b, EW_EXP, x), alpha), alpha);
    int s = pb_where(b, pb_ew2i(b, EW_GT, x, 0), x, m);
    return finish(fc, pb_ew2i(b, EW_MUL, s, gamma));
}

// max(x, 0) + min(0, alpha * expm1(x / alpha)), NaN propagating through both (docs/numerics.md).
static int rule_celu(FissionCtx *fc) {
    int x;
    if (begin(fc, false, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    double alpha = node_attr_f(fc->n, "alpha", 1.0f);
    int m = pb_ew2i(b, EW_MUL, expm1_of(b, pb_ew2i(b, EW_DIV, x, alpha)), alpha);
    return finish(fc, pb_ew2(b, EW_ADD, pb_ew2i(b, EW_MAX, x, 0), pb_ew2i(b, EW_MIN, m, 0)));
}

// approximate="none": 0.5 * x * (1 + erf(x / sqrt(2)));
// approximate="tanh": 0.5 * x * (1 + tanh(u)), u = sqrt(2 / pi) * (x + 0.044715 * x^3), which
// float32 computes as x * sigmoid(2u): 1 + tanh(u) cancels for negative u, the sigmoid does not.
// (1 + erf cancels the same way for x below about -3, an absolute error under |x| * 2^-24.)
static int rule_gelu(FissionCtx *fc) {
    int x;
    if (begin(fc, true, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    int s;
    if (strcmp(node_attr_s(fc->n, "approximate", "none"), "tanh") == 0) {
        int c = pb_ew2i(b, EW_MUL, x, 0.044715);
        c = pb_ew2(b, EW_ADD, x, pb_ew2(b, EW_MUL, pb_ew2(b, EW_MUL, c, x), x));
        if (work_dtype(fc, x) == DT_FLOAT) {
            int u2 = pb_ew2i(b, EW_MUL, c, 2 * 0.79788456080286535588);
            return finish(fc, pb_ew2(b, EW_MUL, x, pb_ew1(b, EW_SIGMOID, u2)));
        }
        s = pb_ew1(b, EW_TANH, pb_ew2i(b, EW_MUL, c, 0.79788456080286535588));
    } else {
        s = pb_ew1(b, EW_ERF, pb_ew2i(b, EW_MUL, x, 0.70710678118654752440));
    }
    int h = pb_ew2i(b, EW_MUL, x, 0.5);
    return finish(fc, pb_ew2(b, EW_MUL, h, pb_ew2i(b, EW_ADD, s, 1.0)));
}

// min(max(alpha * x + beta, 0), 1), NaN passing. float32 computes (x + beta / alpha) * alpha: the
// sum is exact near the zero crossing, where alpha * x + beta would cancel.
static int rule_hardsigmoid(FissionCtx *fc) {
    int x;
    if (begin(fc, true, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    double alpha = node_attr_f(fc->n, "alpha", 0.2f), beta = node_attr_f(fc->n, "beta", 0.5f);
    int v;
    if (work_dtype(fc, x) == DT_FLOAT && alpha != 0)
        v = pb_ew2i(b, EW_MUL, pb_ew2i(b, EW_ADD, x, beta / alpha), alpha);
    else
        v = pb_ew2i(b, EW_ADD, pb_ew2i(b, EW_MUL, x, alpha), beta);
    return finish(fc, pb_ew2i(b, EW_MIN, pb_ew2i(b, EW_MAX, v, 0), 1));
}

// x * min(max(x / 6 + 0.5, 0), 1); float32 takes (x + 3) / 6, exact near -3 where x / 6 + 0.5
// would cancel.
static int rule_hardswish(FissionCtx *fc) {
    int x;
    if (begin(fc, true, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    int v;
    if (work_dtype(fc, x) == DT_FLOAT)
        v = pb_ew2i(b, EW_DIV, pb_ew2i(b, EW_ADD, x, 3), 6);
    else
        v = pb_ew2i(b, EW_ADD, pb_ew2i(b, EW_DIV, x, 6), 0.5);
    v = pb_ew2i(b, EW_MIN, pb_ew2i(b, EW_MAX, v, 0), 1);
    return finish(fc, pb_ew2(b, EW_MUL, x, v));
}

// x / (1 + |x|)
static int rule_softsign(FissionCtx *fc) {
    int x;
    if (begin(fc, true, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    return finish(fc, pb_ew2(b, EW_DIV, x, pb_ew2i(b, EW_ADD, pb_ew1(b, EW_ABS, x), 1)));
}

// x * tanh(softplus(x))
static int rule_mish(FissionCtx *fc) {
    int x;
    if (begin(fc, true, &x))
        return ST_UNSUPPORTED;
    PB *b = &fc->b;
    return finish(fc, pb_ew2(b, EW_MUL, x, pb_ew1(b, EW_TANH, pb_ew1(b, EW_SOFTPLUS, x))));
}

const FissionRuleDef fission_rules_elementwise[] = {
    {"Mod", rule_mod},
    {"BitShift", rule_bitshift},
    {"IsInf", rule_isinf},
    {"Pow", rule_pow},
    {"Cast", rule_cast},
    {"CastLike", rule_cast},
    {"Sum", rule_variadic},
    {"Mean", rule_variadic},
    {"Min", rule_variadic},
    {"Max", rule_variadic},
    {"LeakyRelu", rule_leakyrelu},
    {"PRelu", rule_prelu},
    {"ThresholdedRelu", rule_thresholdedrelu},
    {"Shrink", rule_shrink},
    {"Clip", rule_clip},
    {"Elu", rule_elu},
    {"Selu", rule_selu},
    {"Celu", rule_celu},
    {"Gelu", rule_gelu},
    {"HardSigmoid", rule_hardsigmoid},
    {"HardSwish", rule_hardswish},
    {"Softsign", rule_softsign},
    {"Mish", rule_mish},
// The macro's rows end in commas, which clang-format cannot see.
// clang-format off
#define DIRECT_RULE(op, ew, classes) {op, rule_direct},
    DIRECT_OPS(DIRECT_RULE)
#undef DIRECT_RULE
    {NULL, NULL},
    // clang-format on
};
