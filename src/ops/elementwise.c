// Elementwise ONNX ops: unary math and activations, broadcasting binary arithmetic, comparisons
// and logic, Where, Clip, Cast/CastLike, variadic Sum/Min/Max/Mean. Needs inferred shapes; every
// op accepts the dtypes ONNX allows (float32 fast, the other floats through double, integers
// through int64/uint64 with the wrap-around of their width).
#include "ops.h"

#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

// ---- dtype classes ----

// The class of a dtype decides how elements are computed; the masks list what an op accepts.
enum {
    TM_FLOAT = 1, // float16, bfloat16, float32, double: computed in double (float32 also direct)
    TM_SINT = 2,  // int8..int64: computed in int64
    TM_UINT = 4,  // uint8..uint64: computed in uint64
    TM_BOOL = 8,  // computed as uint64 0/1
    TM_INT = TM_SINT | TM_UINT,
    TM_NUM = TM_FLOAT | TM_INT,
    TM_ALL = TM_NUM | TM_BOOL,
};

static unsigned tmask(DType t) {
    switch (t) {
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_FLOAT16:
    case DT_BFLOAT16: return TM_FLOAT;
    case DT_INT8:
    case DT_INT16:
    case DT_INT32:
    case DT_INT64: return TM_SINT;
    case DT_UINT8:
    case DT_UINT16:
    case DT_UINT32:
    case DT_UINT64: return TM_UINT;
    case DT_BOOL: return TM_BOOL;
    default: return 0;
    }
}

// Requires input i to have a dtype in `allowed`. Dtypes orch cannot store (string, float8,
// int4...) are unsupported; storable ones the op does not take are invalid ONNX.
static int need_types(const Graph *g, const Node *n, int i, unsigned allowed, Err *e) {
    const Tensor *t = node_input(g, n, i);
    unsigned m = tmask(t->dtype);
    if (m & allowed)
        return ST_OK;
    if (!m)
        return op_err(e, ST_UNSUPPORTED, n, "input %d ('%s') has dtype %s, which orch does not run",
                      i, t->name, dtype_name(t->dtype));
    return op_err(e, ST_INVALID, n, "input %d ('%s') has dtype %s, which %s does not accept", i,
                  t->name, dtype_name(t->dtype), n->op);
}

static int need_same_dtype(const Graph *g, const Node *n, int i, int j, Err *e) {
    const Tensor *a = node_input(g, n, i), *b = node_input(g, n, j);
    if (a->dtype == b->dtype)
        return ST_OK;
    return op_err(e, ST_INVALID, n, "inputs %d and %d have different dtypes (%s and %s)", i, j,
                  dtype_name(a->dtype), dtype_name(b->dtype));
}

// Rounds to float keeping a sticky last bit (round to odd), so that rounding the result again to
// float16/bfloat16 equals one correct rounding of v (float has more than twice their precision).
// Element access for the float class: exact reads, one correct rounding on writes.
static double get_d(DType t, const void *p, int64_t i) {
    return elem_get_f64(t, p, i);
}

static void set_d(DType t, void *p, int64_t i, double v) {
    elem_set_f64(t, p, i, v);
}

static uint64_t get_u(DType t, const void *p, int64_t i) {
    return (uint64_t)elem_get_i64(t, p, i);
}

// Stores keep the low bits of the dtype's width (two's complement wrap, as numpy and ORT).
static void set_u(DType t, void *p, int64_t i, uint64_t v) {
    elem_set_i64(t, p, i, (int64_t)v);
}

// ---- broadcast iteration ----

// Up to three inputs viewed at the output's shape, walked as rows of the innermost dimension.
// Output dims of size 1 are dropped and neighbours merged where every operand is contiguous across
// them, so operands of the output's shape become one row, and [N,C] + [C] rows of length C.
typedef struct Bcast {
    int n, outer;                       // operands; dims before the row dimension
    int64_t dims[ORCH_MAX_RANK];        // merged dims, the row dimension last
    int64_t st[3][ORCH_MAX_RANK];       // operand strides (0 along broadcast dims)
    int64_t len, rows, inc[3];          // row length, row count, operand strides in a row
    int64_t idx[ORCH_MAX_RANK], off[3]; // the current row: outer index, operand offsets
} Bcast;

static void bc_init(Bcast *b, const Tensor *out, int n, const Tensor *const *in) {
    int64_t st[3][ORCH_MAX_RANK];
    memset(b, 0, sizeof *b);
    b->n = n;
    for (int k = 0; k < n; k++)
        op_broadcast_strides(in[k], out->rank, out->dims, st[k]);
    int r = 0;
    for (int d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1)
            continue;
        bool merge = r > 0;
        for (int k = 0; k < n && merge; k++)
            merge = b->st[k][r - 1] == st[k][d] * out->dims[d];
        if (merge) {
            b->dims[r - 1] *= out->dims[d];
        } else {
            b->dims[r] = out->dims[d];
            r++;
        }
        for (int k = 0; k < n; k++)
            b->st[k][r - 1] = st[k][d];
    }
    if (r == 0)
        b->dims[r++] = 1;
    b->outer = r - 1;
    b->len = b->dims[r - 1];
    b->rows = 1;
    for (int d = 0; d < b->outer; d++)
        b->rows *= b->dims[d];
    for (int k = 0; k < n; k++)
        b->inc[k] = b->st[k][r - 1];
}

static void bc_next(Bcast *b) {
    for (int d = b->outer - 1; d >= 0; d--) {
        for (int k = 0; k < b->n; k++)
            b->off[k] += b->st[k][d];
        if (++b->idx[d] < b->dims[d])
            return;
        for (int k = 0; k < b->n; k++)
            b->off[k] -= b->st[k][d] * b->dims[d];
        b->idx[d] = 0;
    }
}

// Loops over the rows; O is the output offset of the row, B.off[k] the operands'.
#define BC_ROWS(B, O)                                                                              \
    for (int64_t row_ = 0, O = 0; row_ < (B).rows; row_++, O += (B).len, bc_next(&(B)))

// ---- binary ops ----

// One binary op for every class it accepts (NULL where it does not). Integer functions wrap like
// the hardware (computed in uint64 where signed overflow would be undefined in C).
typedef struct BinaryDef {
    const char *op;
    unsigned types;
    double (*f)(double a, double b);
    int64_t (*si)(int64_t a, int64_t b);
    uint64_t (*ui)(uint64_t a, uint64_t b); // unsigned ints and bool
} BinaryDef;

static double add_f(double a, double b) {
    return a + b;
}
static double sub_f(double a, double b) {
    return a - b;
}
static double mul_f(double a, double b) {
    return a * b;
}
static double div_f(double a, double b) {
    return a / b;
}
static int64_t add_s(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t sub_s(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a - (uint64_t)b);
}
static int64_t mul_s(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}
static uint64_t add_u(uint64_t a, uint64_t b) {
    return a + b;
}
static uint64_t sub_u(uint64_t a, uint64_t b) {
    return a - b;
}
static uint64_t mul_u(uint64_t a, uint64_t b) {
    return a * b;
}

// Integer Div truncates toward zero (ONNX reference, C). x/0 is defined as 0, numpy's result;
// INT64_MIN / -1 wraps to INT64_MIN.
static int64_t div_s(int64_t a, int64_t b) {
    if (b == 0)
        return 0;
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
static uint64_t div_u(uint64_t a, uint64_t b) {
    return b ? a / b : 0;
}

// Mod with fmod=0 takes the sign of the divisor (numpy mod), fmod=1 the sign of the dividend (C
// fmod); float Mod is fmod either way, as the ONNX reference. x mod 0 is defined as 0 (numpy).
static int64_t fmod_s(int64_t a, int64_t b) {
    return b == 0 || b == -1 ? 0 : a % b;
}
static int64_t mod_s(int64_t a, int64_t b) {
    int64_t r = fmod_s(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
static uint64_t mod_u(uint64_t a, uint64_t b) {
    return b ? a % b : 0;
}

// Min/Max propagate NaN like numpy's minimum/maximum, and order -0 below +0 (IEEE 754-2019's
// minimum and maximum), so the operand order never matters (docs/numerics.md).
static double min_f(double a, double b) {
    if (isnan(a) || isnan(b))
        return isnan(a) ? a : b;
    return a < b || (a == b && signbit(a)) ? a : b;
}
static double max_f(double a, double b) {
    if (isnan(a) || isnan(b))
        return isnan(a) ? a : b;
    return a > b || (a == b && !signbit(a)) ? a : b;
}
static int64_t min_s(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static int64_t max_s(int64_t a, int64_t b) {
    return a > b ? a : b;
}
static uint64_t min_u(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}
static uint64_t max_u(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

static double prelu_f(double x, double s) {
    return x < 0 ? x * s : x;
}
static int64_t prelu_s(int64_t x, int64_t s) {
    return x < 0 ? mul_s(x, s) : x;
}
static uint64_t prelu_u(uint64_t x, uint64_t s) {
    (void)s; // an unsigned x is never negative
    return x;
}

static uint64_t and_u(uint64_t a, uint64_t b) {
    return a & b;
}
static uint64_t or_u(uint64_t a, uint64_t b) {
    return a | b;
}
static uint64_t xor_u(uint64_t a, uint64_t b) {
    return a ^ b;
}

// Shifts by the width or more give 0 (C leaves them undefined); the store keeps the low bits.
static uint64_t shl_u(uint64_t a, uint64_t b) {
    return b >= 64 ? 0 : a << b;
}
static uint64_t shr_u(uint64_t a, uint64_t b) {
    return b >= 64 ? 0 : a >> b;
}

static const BinaryDef bin_add = {"Add", TM_NUM, add_f, add_s, add_u};
static const BinaryDef bin_sub = {"Sub", TM_NUM, sub_f, sub_s, sub_u};
static const BinaryDef bin_mul = {"Mul", TM_NUM, mul_f, mul_s, mul_u};
static const BinaryDef bin_div = {"Div", TM_NUM, div_f, div_s, div_u};
static const BinaryDef bin_mod = {"Mod", TM_NUM, fmod, mod_s, mod_u};
static const BinaryDef bin_fmod = {"Mod", TM_NUM, fmod, fmod_s, mod_u};
static const BinaryDef bin_min = {"Min", TM_NUM, min_f, min_s, min_u};
static const BinaryDef bin_max = {"Max", TM_NUM, max_f, max_s, max_u};
static const BinaryDef bin_sum = {"Sum", TM_FLOAT, add_f, NULL, NULL};
static const BinaryDef bin_mean = {"Mean", TM_FLOAT, add_f, NULL, NULL};
static const BinaryDef bin_prelu = {"PRelu", TM_NUM, prelu_f, prelu_s, prelu_u};
static const BinaryDef bin_and = {"And", TM_BOOL, NULL, NULL, and_u};
static const BinaryDef bin_or = {"Or", TM_BOOL, NULL, NULL, or_u};
static const BinaryDef bin_xor = {"Xor", TM_BOOL, NULL, NULL, xor_u};
static const BinaryDef bin_shl = {"BitShift", TM_UINT, NULL, NULL, shl_u};
static const BinaryDef bin_shr = {"BitShift", TM_UINT, NULL, NULL, shr_u};

// For infer's lookup by op name; the variants chosen by an attribute (fmod, direction) accept the
// same dtypes as the first of their name.
static const BinaryDef *const binary_defs[] = {
    &bin_add, &bin_sub,  &bin_mul,   &bin_div, &bin_mod, &bin_min, &bin_max,
    &bin_sum, &bin_mean, &bin_prelu, &bin_and, &bin_or,  &bin_xor, &bin_shl,
};

static const BinaryDef *find_binary(const char *op) {
    for (size_t k = 0; k < ORCH_COUNT(binary_defs); k++)
        if (strcmp(binary_defs[k]->op, op) == 0)
            return binary_defs[k];
    ORCH_ASSERT(!"find_binary: op missing from binary_defs");
    return NULL;
}

// Every class but float32: element accessors and the op's function per element.
static void map2_generic(Bcast *b, const BinaryDef *d, DType t, void *z, const void *x,
                         const void *y) {
    const unsigned c = tmask(t);
    BC_ROWS(*b, o) {
        int64_t px = b->off[0], py = b->off[1];
        for (int64_t j = 0; j < b->len; j++, px += b->inc[0], py += b->inc[1]) {
            if (c == TM_FLOAT)
                set_d(t, z, o + j, d->f(get_d(t, x, px), get_d(t, y, py)));
            else if (c == TM_SINT)
                elem_set_i64(t, z, o + j, d->si(elem_get_i64(t, x, px), elem_get_i64(t, y, py)));
            else
                set_u(t, z, o + j, d->ui(get_u(t, x, px), get_u(t, y, py)));
        }
    }
}

// float32: the double function rounded once, which for + - * / equals float arithmetic. The
// row's inner strides select plain loops for the contiguous and scalar cases, which the compiler
// vectorises (-O3) once the caller's constant function is inlined here.
INLINE void map2_f32(Bcast *b, double (*f)(double, double), float *z, const float *x,
                     const float *y) {
    const int64_t n = b->len, sx = b->inc[0], sy = b->inc[1];
    BC_ROWS(*b, o) {
        float *zr = z + o;
        const float *xr = x + b->off[0], *yr = y + b->off[1];
        if (sx == 1 && sy == 1) {
            for (int64_t j = 0; j < n; j++)
                zr[j] = (float)f(xr[j], yr[j]);
        } else if (sx == 1 && sy == 0) {
            const double s = *yr;
            for (int64_t j = 0; j < n; j++)
                zr[j] = (float)f(xr[j], s);
        } else if (sx == 0 && sy == 1) {
            const double s = *xr;
            for (int64_t j = 0; j < n; j++)
                zr[j] = (float)f(s, yr[j]);
        } else {
            for (int64_t j = 0; j < n; j++)
                zr[j] = (float)f(xr[j * sx], yr[j * sy]);
        }
    }
}

// z = d(x, y) with x, y broadcast to out; z may be x's buffer when x has out's shape.
INLINE void map2(const BinaryDef *d, const Tensor *out, void *z, const Tensor *a, const void *x,
                 const Tensor *bt, const void *y) {
    const Tensor *in[2] = {a, bt};
    Bcast b;
    bc_init(&b, out, 2, in);
    if (out->dtype == DT_FLOAT)
        map2_f32(&b, d->f, z, x, y);
    else
        map2_generic(&b, d, out->dtype, z, x, y);
}

static int infer_binary(Graph *g, Node *n, Err *e) {
    const BinaryDef *d = find_binary(n->op);
    int rank, rc;
    int64_t dims[ORCH_MAX_RANK];
    if ((rc = need_types(g, n, 0, d->types, e)) || (rc = need_same_dtype(g, n, 0, 1, e)) ||
        (rc = op_broadcast_shape(g, n, 0, 2, &rank, dims, e)))
        return rc;
    if (strcmp(n->op, "Mod") == 0) {
        int64_t fm = node_attr_i(n, "fmod", 0);
        if (fm != 0 && fm != 1)
            return op_err(e, ST_INVALID, n, "attribute fmod must be 0 or 1, got %lld",
                          (long long)fm);
    }
    if (strcmp(n->op, "BitShift") == 0) {
        const char *dir = node_attr_s(n, "direction", "");
        if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
            return op_err(e, ST_INVALID, n, "attribute direction must be LEFT or RIGHT, got '%s'",
                          dir);
    }
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, rank, dims);
    return ST_OK;
}

INLINE int binary_run(const OpRun *r, const BinaryDef *d) {
    map2(d, r->out[0], r->y[0], r->in[0], r->x[0], r->in[1], r->x[1]);
    return ST_OK;
}

// One run function per op so that each gets its own inlined float32 loops.
#define RUN_BINARY(NAME, DEF)                                                                      \
    static int run_##NAME(const OpRun *r, Err *e) {                                                \
        (void)e;                                                                                   \
        return binary_run(r, &(DEF));                                                              \
    }
RUN_BINARY(add, bin_add)
RUN_BINARY(sub, bin_sub)
RUN_BINARY(mul, bin_mul)
RUN_BINARY(div, bin_div)
RUN_BINARY(prelu, bin_prelu)
RUN_BINARY(and, bin_and)
RUN_BINARY(or, bin_or)
RUN_BINARY(xor, bin_xor)

static int run_mod(const OpRun *r, Err *e) {
    (void)e;
    return binary_run(r, node_attr_i(r->n, "fmod", 0) ? &bin_fmod : &bin_mod);
}

static int run_bitshift(const OpRun *r, Err *e) {
    (void)e;
    return binary_run(r, strcmp(node_attr_s(r->n, "direction", ""), "LEFT") == 0 ? &bin_shl
                                                                                 : &bin_shr);
}

// PRelu broadcasts the slope to X's shape only (unidirectional).
static int infer_prelu(Graph *g, Node *n, Err *e) {
    int rc = infer_binary(g, n, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0), *y = node_output(g, n, 0);
    if (y->rank != x->rank || memcmp(y->dims, x->dims, sizeof(int64_t) * (size_t)x->rank)) {
        char a[128], b[128];
        return op_err(e, ST_INVALID, n, "slope of shape %s does not broadcast to X's shape %s",
                      tensor_shape_str(node_input(g, n, 1), a, sizeof a),
                      tensor_shape_str(x, b, sizeof b));
    }
    return ST_OK;
}

// ---- Pow: base and exponent may have different dtypes; the result has the base's ----

static double pow_f(double a, double b) {
    return pow(a, b);
}

// Integer power with wrap-around. Negative exponents give the truncated 1/a^|b| (0 unless
// |a| == 1; numpy refuses them, 0^-1 is defined as 0).
static int64_t ipow(int64_t a, int64_t b) {
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, p = (uint64_t)a;
    for (uint64_t k = (uint64_t)b; k; k >>= 1, p *= p)
        if (k & 1)
            r *= p;
    return (int64_t)r;
}

static int infer_pow(Graph *g, Node *n, Err *e) {
    int rank, rc;
    int64_t dims[ORCH_MAX_RANK];
    if ((rc = need_types(g, n, 0, TM_NUM, e)) || (rc = need_types(g, n, 1, TM_NUM, e)) ||
        (rc = op_broadcast_shape(g, n, 0, 2, &rank, dims, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, rank, dims);
    return ST_OK;
}

static int run_pow(const OpRun *r, Err *e) {
    (void)e;
    static const BinaryDef fpow = {"Pow", TM_FLOAT, pow_f, NULL, NULL};
    const DType ta = r->in[0]->dtype, tb = r->in[1]->dtype;
    if (ta == DT_FLOAT && tb == DT_FLOAT)
        return binary_run(r, &fpow);
    Bcast b;
    bc_init(&b, r->out[0], 2, r->in);
    const void *x = r->x[0], *y = r->x[1];
    void *z = r->y[0];
    const bool int_base = tmask(ta) != TM_FLOAT, int_exp = tmask(tb) != TM_FLOAT;
    BC_ROWS(b, o) {
        int64_t px = b.off[0], py = b.off[1];
        for (int64_t j = 0; j < b.len; j++, px += b.inc[0], py += b.inc[1]) {
            if (int_base && int_exp)
                elem_set_i64(ta, z, o + j, ipow(elem_get_i64(ta, x, px), elem_get_i64(tb, y, py)));
            else if (int_base) // numpy computes int ** float in double, then truncates
                elem_set_f64(ta, z, o + j, pow(get_d(ta, x, px), get_d(tb, y, py)));
            else
                set_d(ta, z, o + j, pow(get_d(ta, x, px), get_d(tb, y, py)));
        }
    }
    return ST_OK;
}

// ---- variadic Sum Mean Min Max ----

static int infer_variadic(Graph *g, Node *n, Err *e) {
    const BinaryDef *d = find_binary(n->op);
    int rank, rc;
    int64_t dims[ORCH_MAX_RANK];
    for (int i = 0; i < n->n_in; i++) {
        if (!node_input(g, n, i))
            return op_err(e, ST_INVALID, n, "input %d is missing", i);
        if ((rc = need_types(g, n, i, d->types, e)) || (rc = need_same_dtype(g, n, 0, i, e)))
            return rc;
    }
    if ((rc = op_broadcast_shape(g, n, 0, n->n_in, &rank, dims, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 0)->dtype, rank, dims);
    return ST_OK;
}

// Folds the inputs left to right into the output: z = d(in0, in1), then z = d(z, in_k).
INLINE int variadic_run(const OpRun *r, const BinaryDef *d) {
    const Tensor *out = r->out[0];
    const int count = r->n->n_in;
    if (count == 1)
        memcpy(r->y[0], r->x[0], tensor_nbytes(out)); // one input has the output's shape
    else
        map2(d, out, r->y[0], r->in[0], r->x[0], r->in[1], r->x[1]);
    for (int k = 2; k < count; k++)
        map2(d, out, r->y[0], out, r->y[0], r->in[k], r->x[k]);
    if (d == &bin_mean) {
        const int64_t numel = tensor_numel(out);
        for (int64_t i = 0; i < numel; i++)
            set_d(out->dtype, r->y[0], i, get_d(out->dtype, r->y[0], i) / count);
    }
    return ST_OK;
}

#define RUN_VARIADIC(NAME, DEF)                                                                    \
    static int run_##NAME(const OpRun *r, Err *e) {                                                \
        (void)e;                                                                                   \
        return variadic_run(r, &(DEF));                                                            \
    }
RUN_VARIADIC(sum, bin_sum)
RUN_VARIADIC(mean, bin_mean)
RUN_VARIADIC(min, bin_min)
RUN_VARIADIC(max, bin_max)

// ---- comparisons ----

enum { CMP_LT = 1, CMP_EQ = 2, CMP_GT = 4 };

// The outcomes for which each comparison op is true; unordered (NaN) is never true.
static unsigned cmp_mask(const char *op) {
    if (strcmp(op, "Equal") == 0)
        return CMP_EQ;
    if (strcmp(op, "Less") == 0)
        return CMP_LT;
    if (strcmp(op, "LessOrEqual") == 0)
        return CMP_LT | CMP_EQ;
    if (strcmp(op, "Greater") == 0)
        return CMP_GT;
    ORCH_ASSERT(strcmp(op, "GreaterOrEqual") == 0);
    return CMP_GT | CMP_EQ;
}

static int infer_compare(Graph *g, Node *n, Err *e) {
    int rank, rc;
    int64_t dims[ORCH_MAX_RANK];
    unsigned types = strcmp(n->op, "Equal") == 0 ? TM_ALL : TM_NUM;
    if ((rc = need_types(g, n, 0, types, e)) || (rc = need_same_dtype(g, n, 0, 1, e)) ||
        (rc = op_broadcast_shape(g, n, 0, 2, &rank, dims, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), DT_BOOL, rank, dims);
    return ST_OK;
}

static unsigned cmp3(unsigned c, DType t, const void *x, int64_t i, const void *y, int64_t j) {
    if (c == TM_FLOAT) {
        double a = get_d(t, x, i), b = get_d(t, y, j);
        return a < b ? CMP_LT : a > b ? CMP_GT : a == b ? CMP_EQ : 0;
    }
    if (c == TM_SINT) {
        int64_t a = elem_get_i64(t, x, i), b = elem_get_i64(t, y, j);
        return a < b ? CMP_LT : a > b ? CMP_GT : CMP_EQ;
    }
    uint64_t a = get_u(t, x, i), b = get_u(t, y, j);
    return a < b ? CMP_LT : a > b ? CMP_GT : CMP_EQ;
}

static int run_compare(const OpRun *r, Err *e) {
    (void)e;
    const unsigned mask = cmp_mask(r->n->op);
    const DType t = r->in[0]->dtype;
    const unsigned c = tmask(t);
    uint8_t *z = r->y[0];
    Bcast b;
    bc_init(&b, r->out[0], 2, r->in);
    BC_ROWS(b, o) {
        int64_t px = b.off[0], py = b.off[1];
        for (int64_t j = 0; j < b.len; j++, px += b.inc[0], py += b.inc[1])
            z[o + j] = (cmp3(c, t, r->x[0], px, r->x[1], py) & mask) != 0;
    }
    return ST_OK;
}

// ---- Where ----

static int infer_where(Graph *g, Node *n, Err *e) {
    int rank, rc;
    int64_t dims[ORCH_MAX_RANK];
    if ((rc = need_types(g, n, 0, TM_BOOL, e)) || (rc = need_types(g, n, 1, TM_ALL, e)) ||
        (rc = need_same_dtype(g, n, 1, 2, e)) ||
        (rc = op_broadcast_shape(g, n, 0, 3, &rank, dims, e)))
        return rc;
    tensor_set_shape(node_output(g, n, 0), node_input(g, n, 1)->dtype, rank, dims);
    return ST_OK;
}

static int run_where(const OpRun *r, Err *e) {
    (void)e;
    const size_t es = dtype_size(r->out[0]->dtype);
    const uint8_t *c = r->x[0];
    const char *x = r->x[1], *y = r->x[2];
    char *z = r->y[0];
    Bcast b;
    bc_init(&b, r->out[0], 3, r->in);
    BC_ROWS(b, o) {
        int64_t pc = b.off[0], px = b.off[1], py = b.off[2];
        for (int64_t j = 0; j < b.len; j++, pc += b.inc[0], px += b.inc[1], py += b.inc[2])
            memcpy(z + (size_t)(o + j) * es, c[pc] ? x + (size_t)px * es : y + (size_t)py * es, es);
    }
    return ST_OK;
}

// ---- unary ops ----

// Attribute values of the parametrised activations.
typedef struct UArgs {
    double p[2]; // the attributes named in UnaryDef.attr
    bool tanh;   // Gelu approximate="tanh"
} UArgs;

// A unary op: f (or fa when it has attributes) for the float class, computed in double and
// rounded once; si/ui for integer classes the op accepts (when NULL, integers go through f in
// double and are truncated back, as numpy's astype).
typedef struct UnaryDef {
    const char *op;
    unsigned types;
    double (*f)(double x);
    double (*fa)(double x, const UArgs *a);
    int64_t (*si)(int64_t x);
    uint64_t (*ui)(uint64_t x); // unsigned ints and bool
    const char *attr[2];
    float dflt[2];
} UnaryDef;

static double recip_f(double x) {
    return 1.0 / x;
}
static double neg_f(double x) {
    return -x;
}
static double relu_f(double x) {
    return max_f(x, 0.0);
}
static double sign_f(double x) {
    return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
} // 0 and NaN stay
static double sigmoid_f(double x) {
    return 1.0 / (1.0 + exp(-x));
}
static double softsign_f(double x) {
    return x / (1.0 + fabs(x));
}
static double softplus_f(double x) {
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static double mish_f(double x) {
    return x * tanh(softplus_f(x));
}

static double hardswish_f(double x) {
    return x * min_f(max_f(x / 6.0 + 0.5, 0.0), 1.0);
}

static double leakyrelu_f(double x, const UArgs *a) {
    return x < 0 ? a->p[0] * x : x;
}
static double elu_f(double x, const UArgs *a) {
    return x < 0 ? a->p[0] * expm1(x) : x;
}
static double thresholdedrelu_f(double x, const UArgs *a) {
    return x > a->p[0] ? x : 0.0;
}

static double hardsigmoid_f(double x, const UArgs *a) {
    return min_f(max_f(a->p[0] * x + a->p[1], 0.0), 1.0);
}

static double selu_f(double x, const UArgs *a) {
    return a->p[1] * (x > 0 ? x : a->p[0] * exp(x) - a->p[0]);
}

static double celu_f(double x, const UArgs *a) {
    return max_f(x, 0.0) + min_f(0.0, a->p[0] * expm1(x / a->p[0]));
}

static double shrink_f(double x, const UArgs *a) {
    double lambd = a->p[0], bias = a->p[1];
    return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0;
}

static double gelu_f(double x, const UArgs *a) {
    if (a->tanh)
        return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}

// Signed negation and abs of INT64_MIN wrap to INT64_MIN, like the narrower types' stores.
static int64_t neg_s(int64_t x) {
    return (int64_t)(0 - (uint64_t)x);
}
static int64_t abs_s(int64_t x) {
    return x < 0 ? neg_s(x) : x;
}
static int64_t sign_s(int64_t x) {
    return (x > 0) - (x < 0);
}
static int64_t relu_s(int64_t x) {
    return x < 0 ? 0 : x;
}
static uint64_t ident_u(uint64_t x) {
    return x;
}
static uint64_t sign_u(uint64_t x) {
    return x != 0;
}
static uint64_t not_u(uint64_t x) {
    return !x;
}

#define UF(OP, F)                                                                                  \
    {                                                                                              \
        OP, TM_FLOAT, F, NULL, NULL, NULL, {NULL, NULL}, {                                         \
            0, 0                                                                                   \
        }                                                                                          \
    }
#define UA(OP, TYPES, F, A0, D0, A1, D1)                                                           \
    {                                                                                              \
        OP, TYPES, NULL, F, NULL, NULL, {A0, A1}, {                                                \
            D0, D1                                                                                 \
        }                                                                                          \
    }

static const UnaryDef unary_defs[] = {
    UF("Sqrt", sqrt),
    UF("Reciprocal", recip_f),
    UF("Exp", exp),
    UF("Log", log),
    UF("Erf", erf),
    UF("Tanh", tanh),
    UF("Sigmoid", sigmoid_f),
    UF("Sin", sin),
    UF("Cos", cos),
    UF("Tan", tan),
    UF("Asin", asin),
    UF("Acos", acos),
    UF("Atan", atan),
    UF("Sinh", sinh),
    UF("Cosh", cosh),
    UF("Asinh", asinh),
    UF("Acosh", acosh),
    UF("Atanh", atanh),
    UF("Floor", floor),
    UF("Ceil", ceil),
    UF("Round", nearbyint), // the default rounding mode: half to even
    UF("Softplus", softplus_f),
    UF("Softsign", softsign_f),
    UF("HardSwish", hardswish_f),
    UF("Mish", mish_f),
    UA("LeakyRelu", TM_FLOAT, leakyrelu_f, "alpha", 0.01f, NULL, 0),
    UA("Elu", TM_FLOAT, elu_f, "alpha", 1.0f, NULL, 0),
    UA("ThresholdedRelu", TM_FLOAT, thresholdedrelu_f, "alpha", 1.0f, NULL, 0),
    UA("HardSigmoid", TM_FLOAT, hardsigmoid_f, "alpha", 0.2f, "beta", 0.5f),
    UA("Selu", TM_FLOAT, selu_f, "alpha", 1.67326319217681884765625f, "gamma",
       1.05070102214813232421875f),
    UA("Celu", TM_FLOAT, celu_f, "alpha", 1.0f, NULL, 0),
    UA("Shrink", TM_NUM, shrink_f, "lambd", 0.5f, "bias", 0.0f),
    UA("Gelu", TM_FLOAT, gelu_f, NULL, 0, NULL, 0),
    {"Neg", TM_FLOAT | TM_SINT, neg_f, NULL, neg_s, NULL, {NULL, NULL}, {0, 0}},
    {"Abs", TM_NUM, fabs, NULL, abs_s, ident_u, {NULL, NULL}, {0, 0}},
    {"Sign", TM_NUM, sign_f, NULL, sign_s, sign_u, {NULL, NULL}, {0, 0}},
    {"Relu", TM_FLOAT | TM_SINT, relu_f, NULL, relu_s, NULL, {NULL, NULL}, {0, 0}},
    {"Not", TM_BOOL, NULL, NULL, NULL, not_u, {NULL, NULL}, {0, 0}},
};

static const UnaryDef *find_unary(const char *op) {
    for (size_t k = 0; k < ORCH_COUNT(unary_defs); k++)
        if (strcmp(unary_defs[k].op, op) == 0)
            return &unary_defs[k];
    ORCH_ASSERT(!"find_unary: op missing from unary_defs");
    return NULL;
}

static void unary_args(const Node *n, const UnaryDef *d, UArgs *a) {
    for (int k = 0; k < 2; k++)
        a->p[k] = d->attr[k] ? node_attr_f(n, d->attr[k], d->dflt[k]) : 0.0;
    a->tanh = strcmp(node_attr_s(n, "approximate", "none"), "tanh") == 0;
}

static int infer_unary(Graph *g, Node *n, Err *e) {
    const UnaryDef *d = find_unary(n->op);
    int rc = need_types(g, n, 0, d->types, e);
    if (rc)
        return rc;
    if (strcmp(n->op, "Gelu") == 0) {
        const char *ap = node_attr_s(n, "approximate", "none");
        if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
            return op_err(e, ST_INVALID, n, "attribute approximate must be none or tanh, got '%s'",
                          ap);
    }
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

static double unary_f(const UnaryDef *d, const UArgs *a, double v) {
    return d->f ? d->f(v) : d->fa(v, a);
}

static int run_unary(const OpRun *r, Err *e) {
    (void)e;
    const UnaryDef *d = find_unary(r->n->op);
    UArgs a;
    unary_args(r->n, d, &a);
    const DType t = r->in[0]->dtype;
    const unsigned c = tmask(t);
    const int64_t numel = tensor_numel(r->out[0]);
    const void *x = r->x[0];
    void *y = r->y[0];
    if (t == DT_FLOAT) {
        const float *xf = x;
        float *yf = y;
        for (int64_t i = 0; i < numel; i++)
            yf[i] = (float)unary_f(d, &a, xf[i]);
    } else if (c == TM_FLOAT) {
        for (int64_t i = 0; i < numel; i++)
            set_d(t, y, i, unary_f(d, &a, get_d(t, x, i)));
    } else if (c == TM_SINT && d->si) {
        for (int64_t i = 0; i < numel; i++)
            elem_set_i64(t, y, i, d->si(elem_get_i64(t, x, i)));
    } else if (c != TM_SINT && d->ui) {
        for (int64_t i = 0; i < numel; i++)
            set_u(t, y, i, d->ui(get_u(t, x, i)));
    } else {
        for (int64_t i = 0; i < numel; i++)
            elem_set_f64(t, y, i, unary_f(d, &a, get_d(t, x, i)));
    }
    return ST_OK;
}

// IsNaN and IsInf: float in, bool out.
static int infer_isclass(Graph *g, Node *n, Err *e) {
    int rc = need_types(g, n, 0, TM_FLOAT, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), DT_BOOL, x->rank, x->dims);
    return ST_OK;
}

static int run_isnan(const OpRun *r, Err *e) {
    (void)e;
    const int64_t numel = tensor_numel(r->out[0]);
    uint8_t *y = r->y[0];
    for (int64_t i = 0; i < numel; i++)
        y[i] = isnan(get_d(r->in[0]->dtype, r->x[0], i)) != 0;
    return ST_OK;
}

static int run_isinf(const OpRun *r, Err *e) {
    (void)e;
    const bool pos = node_attr_i(r->n, "detect_positive", 1) != 0;
    const bool neg = node_attr_i(r->n, "detect_negative", 1) != 0;
    const int64_t numel = tensor_numel(r->out[0]);
    uint8_t *y = r->y[0];
    for (int64_t i = 0; i < numel; i++) {
        double v = get_d(r->in[0]->dtype, r->x[0], i);
        y[i] = isinf(v) && (v > 0 ? pos : neg);
    }
    return ST_OK;
}

// ---- Clip ----

// Clip-11+: optional scalar inputs min and max (run-time values allowed): min(max(x, lo), hi) with
// Min/Max's rules, so max wins when min > max and a NaN x passes through; a NaN bound is no bound,
// as in ONNX Runtime (docs/numerics.md).
static int infer_clip(Graph *g, Node *n, Err *e) {
    if (n->opset < 11)
        return op_err(e, ST_UNSUPPORTED, n,
                      "Clip before opset 11 (min/max attributes) is not "
                      "supported; re-export with opset 11 or later");
    int rc = need_types(g, n, 0, TM_NUM, e);
    if (rc)
        return rc;
    for (int i = 1; i < 3; i++) {
        const Tensor *t = node_input(g, n, i);
        if (!t)
            continue;
        if ((rc = need_same_dtype(g, n, 0, i, e)))
            return rc;
        if (tensor_numel(t) != 1) {
            char s[128];
            return op_err(e, ST_INVALID, n, "input %d ('%s') must be a scalar, has shape %s", i,
                          t->name, tensor_shape_str(t, s, sizeof s));
        }
    }
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), x->dtype, x->rank, x->dims);
    return ST_OK;
}

static int run_clip(const OpRun *r, Err *e) {
    (void)e;
    const DType t = r->in[0]->dtype;
    const unsigned c = tmask(t);
    const int64_t numel = tensor_numel(r->out[0]);
    const bool has_lo = r->n->n_in > 1 && r->in[1], has_hi = r->n->n_in > 2 && r->in[2];
    const void *x = r->x[0];
    void *y = r->y[0];
    if (c == TM_FLOAT) {
        double lo = has_lo ? get_d(t, r->x[1], 0) : -INFINITY;
        double hi = has_hi ? get_d(t, r->x[2], 0) : INFINITY;
        lo = isnan(lo) ? -INFINITY : lo;
        hi = isnan(hi) ? INFINITY : hi;
        for (int64_t i = 0; i < numel; i++)
            set_d(t, y, i, min_f(max_f(get_d(t, x, i), lo), hi));
    } else if (c == TM_SINT) {
        const int64_t lo = has_lo ? elem_get_i64(t, r->x[1], 0) : INT64_MIN;
        const int64_t hi = has_hi ? elem_get_i64(t, r->x[2], 0) : INT64_MAX;
        for (int64_t i = 0; i < numel; i++) {
            int64_t v = elem_get_i64(t, x, i);
            v = v < lo ? lo : v;
            elem_set_i64(t, y, i, v > hi ? hi : v);
        }
    } else {
        const uint64_t lo = has_lo ? get_u(t, r->x[1], 0) : 0;
        const uint64_t hi = has_hi ? get_u(t, r->x[2], 0) : UINT64_MAX;
        for (int64_t i = 0; i < numel; i++) {
            uint64_t v = get_u(t, x, i);
            v = v < lo ? lo : v;
            set_u(t, y, i, v > hi ? hi : v);
        }
    }
    return ST_OK;
}

// ---- Cast, CastLike ----

// Float to integer truncates toward zero and saturates (elem_set_f64), integer to integer wraps,
// anything to bool is "!= 0" (NaN is true). The saturate attribute only concerns float8 types,
// which orch does not store.
static int cast_check(const Graph *g, const Node *n, DType to, Err *e) {
    int rc = need_types(g, n, 0, TM_ALL, e);
    if (rc)
        return rc;
    if (!tmask(to))
        return op_err(e, ST_UNSUPPORTED, n, "casting to %s is not supported", dtype_name(to));
    return ST_OK;
}

static int infer_cast(Graph *g, Node *n, Err *e) {
    const Attr *to = node_attr(n, "to");
    if (!to || to->type != AT_INT)
        return op_err(e, ST_INVALID, n, "attribute 'to' (an int) is required");
    int rc = cast_check(g, n, (DType)to->i, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), (DType)to->i, x->rank, x->dims);
    return ST_OK;
}

static int infer_castlike(Graph *g, Node *n, Err *e) {
    DType to = node_input(g, n, 1)->dtype;
    int rc = cast_check(g, n, to, e);
    if (rc)
        return rc;
    const Tensor *x = node_input(g, n, 0);
    tensor_set_shape(node_output(g, n, 0), to, x->rank, x->dims);
    return ST_OK;
}

static int run_cast(const OpRun *r, Err *e) {
    (void)e;
    const DType from = r->in[0]->dtype, to = r->out[0]->dtype;
    const int64_t numel = tensor_numel(r->out[0]);
    const void *x = r->x[0];
    void *y = r->y[0];
    if (from == to) {
        memcpy(y, x, tensor_nbytes(r->out[0]));
        return ST_OK;
    }
    const bool ffrom = tmask(from) == TM_FLOAT, fto = tmask(to) == TM_FLOAT;
    const bool ufrom = tmask(from) != TM_SINT; // unsigned or bool, when an integer
    for (int64_t i = 0; i < numel; i++) {
        if (ffrom && fto) {
            set_d(to, y, i, get_d(from, x, i));
        } else if (ffrom) {
            elem_set_f64(to, y, i, get_d(from, x, i));
        } else if (fto && to == DT_FLOAT) { // one rounding from the integer
            uint64_t u = get_u(from, x, i);
            ((float *)y)[i] = ufrom ? (float)u : (float)(int64_t)u;
        } else if (fto) {
            uint64_t u = get_u(from, x, i);
            set_d(to, y, i, ufrom ? (double)u : (double)(int64_t)u);
        } else {
            elem_set_i64(to, y, i, elem_get_i64(from, x, i));
        }
    }
    return ST_OK;
}

// ---- the table ----

#define UNARY(OP)                                                                                  \
    { OP, infer_unary, run_unary, 1, 1, 1, 1, 0 }
#define BINARY(OP, RUN)                                                                            \
    { OP, infer_binary, RUN, 2, 2, 1, 1, 0 }
#define COMPARE(OP)                                                                                \
    { OP, infer_compare, run_compare, 2, 2, 1, 1, 0 }
#define VARIADIC(OP, RUN)                                                                          \
    { OP, infer_variadic, RUN, 1, -1, 1, 1, 0 }

const OpDef ops_elementwise[] = {
    BINARY("Add", run_add),
    BINARY("Sub", run_sub),
    BINARY("Mul", run_mul),
    BINARY("Div", run_div),
    BINARY("Mod", run_mod),
    BINARY("And", run_and),
    BINARY("Or", run_or),
    BINARY("Xor", run_xor),
    BINARY("BitShift", run_bitshift),
    {"PRelu", infer_prelu, run_prelu, 2, 2, 1, 1, 0},
    {"Pow", infer_pow, run_pow, 2, 2, 1, 1, 0},
    VARIADIC("Sum", run_sum),
    VARIADIC("Mean", run_mean),
    VARIADIC("Min", run_min),
    VARIADIC("Max", run_max),
    COMPARE("Equal"),
    COMPARE("Less"),
    COMPARE("LessOrEqual"),
    COMPARE("Greater"),
    COMPARE("GreaterOrEqual"),
    {"Where", infer_where, run_where, 3, 3, 1, 1, 0},
    {"Clip", infer_clip, run_clip, 1, 3, 1, 1, 0},
    {"Cast", infer_cast, run_cast, 1, 1, 1, 1, 0},
    {"CastLike", infer_castlike, run_cast, 2, 2, 1, 1, 0},
    {"IsNaN", infer_isclass, run_isnan, 1, 1, 1, 1, 0},
    {"IsInf", infer_isclass, run_isinf, 1, 1, 1, 1, 0},
    UNARY("Sqrt"),
    UNARY("Reciprocal"),
    UNARY("Exp"),
    UNARY("Log"),
    UNARY("Erf"),
    UNARY("Tanh"),
    UNARY("Sigmoid"),
    UNARY("Sin"),
    UNARY("Cos"),
    UNARY("Tan"),
    UNARY("Asin"),
    UNARY("Acos"),
    UNARY("Atan"),
    UNARY("Sinh"),
    UNARY("Cosh"),
    UNARY("Asinh"),
    UNARY("Acosh"),
    UNARY("Atanh"),
    UNARY("Floor"),
    UNARY("Ceil"),
    UNARY("Round"),
    UNARY("Softplus"),
    UNARY("Softsign"),
    UNARY("HardSwish"),
    UNARY("Mish"),
    UNARY("LeakyRelu"),
    UNARY("Elu"),
    UNARY("ThresholdedRelu"),
    UNARY("HardSigmoid"),
    UNARY("Selu"),
    UNARY("Celu"),
    UNARY("Shrink"),
    UNARY("Gelu"),
    UNARY("Neg"),
    UNARY("Abs"),
    UNARY("Sign"),
    UNARY("Relu"),
    UNARY("Not"),
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
