// Primitive interpreter (see prim_interp.h). Elementwise programs are evaluated per element with
// every intermediate rounded to its instruction's dtype, so a fused program gives exactly what
// the unfused operators give. Float math runs in double, integer math in int64 with wrap-around.
#include "prim_interp.h"

#include "../prim/index_map.h"
#include "../ops/gemm.h"
#include "../ops/linear.h"
#include "../ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- elementwise ----

typedef struct Val {
    double f;
    int64_t i;
} Val;

// Rounds/wraps a value to what a tensor of dtype t can hold, keeping both views consistent.
static Val normalise(DType t, Val v, bool from_float) {
    uint64_t buf = 0;
    if (from_float)
        elem_set_f64(t, &buf, 0, v.f);
    else
        elem_set_i64(t, &buf, 0, v.i);
    Val r;
    if (dtype_is_float(t)) {
        r.f = elem_get_f64(t, &buf, 0);
        r.i = 0;
    } else {
        r.i = elem_get_i64(t, &buf, 0);
        r.f = (double)r.i;
    }
    return r;
}

static int64_t ipow(int64_t base, int64_t exp) {
    if (exp < 0)
        return base == 1 ? 1 : base == -1 ? (exp % 2 ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base;
    while (exp) {
        if (exp & 1)
            r *= b;
        b *= b;
        exp >>= 1;
    }
    return (int64_t)r;
}

static double fl_op(EwOp op, double a, double b, double c) {
    switch (op) {
    case EW_COPY:
    case EW_CAST: return a;
    case EW_NEG: return -a;
    case EW_ABS: return fabs(a);
    case EW_EXP: return exp(a);
    case EW_LOG: return log(a);
    case EW_SQRT: return sqrt(a);
    case EW_RSQRT: return 1.0 / sqrt(a);
    case EW_RECIP: return 1.0 / a;
    case EW_ERF: return erf(a);
    case EW_TANH: return tanh(a);
    case EW_SIGMOID: return a >= 0 ? 1.0 / (1.0 + exp(-a)) : exp(a) / (1.0 + exp(a));
    case EW_RELU: return a > 0 ? a : (a == a ? 0.0 : a);
    case EW_FLOOR: return floor(a);
    case EW_CEIL: return ceil(a);
    case EW_ROUND: return nearbyint(a);
    case EW_SIGN: return a > 0 ? 1.0 : a < 0 ? -1.0 : a;
    case EW_SIN: return sin(a);
    case EW_COS: return cos(a);
    case EW_TAN: return tan(a);
    case EW_ASIN: return asin(a);
    case EW_ACOS: return acos(a);
    case EW_ATAN: return atan(a);
    case EW_SINH: return sinh(a);
    case EW_COSH: return cosh(a);
    case EW_ASINH: return asinh(a);
    case EW_ACOSH: return acosh(a);
    case EW_ATANH: return atanh(a);
    case EW_SOFTPLUS: return a > 0 ? a + log1p(exp(-a)) : log1p(exp(a));
    case EW_NOT: return a == 0;
    case EW_ISNAN: return isnan(a);
    case EW_ISINF: return isinf(a);
    case EW_ISPOSINF: return isinf(a) && a > 0;
    case EW_ISNEGINF: return isinf(a) && a < 0;
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_POW: return pow(a, b);
    // NaN propagates; between equal zeros MIN takes -0 and MAX +0, so operand order never matters.
    case EW_MIN: return isnan(a) || isnan(b) ? NAN : (a < b || (a == b && signbit(a))) ? a : b;
    case EW_MAX: return isnan(a) || isnan(b) ? NAN : (a > b || (a == b && !signbit(a))) ? a : b;
    case EW_MOD:
    case EW_FMOD: return fmod(a, b);
    case EW_EQ: return a == b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_AND: return a != 0 && b != 0;
    case EW_OR: return a != 0 || b != 0;
    case EW_XOR: return (a != 0) != (b != 0);
    case EW_WHERE: return a != 0 ? b : c;
    default: ORCH_ASSERT(!"float elementwise op without a definition");
    }
    return 0;
}

static int64_t int_op(EwOp op, int64_t a, int64_t b, int64_t c) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case EW_COPY:
    case EW_CAST: return a;
    case EW_NEG: return (int64_t)(0 - ua);
    case EW_ABS: return a < 0 ? (int64_t)(0 - ua) : a;
    case EW_RELU: return a > 0 ? a : 0;
    case EW_SIGN: return (a > 0) - (a < 0);
    case EW_NOT: return a == 0;
    case EW_ADD: return (int64_t)(ua + ub);
    case EW_SUB: return (int64_t)(ua - ub);
    case EW_MUL: return (int64_t)(ua * ub);
    // Integer division by zero gives 0 (as the reference ops); INT64_MIN / -1 wraps.
    case EW_DIV: return b == 0 ? 0 : (b == -1 ? (int64_t)(0 - ua) : a / b);
    case EW_MOD: {
        if (b == 0 || b == -1)
            return 0;
        int64_t r = a % b;
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
    case EW_FMOD: return (b == 0 || b == -1) ? 0 : a % b;
    case EW_POW: return ipow(a, b);
    case EW_MIN: return a < b ? a : b;
    case EW_MAX: return a > b ? a : b;
    case EW_EQ: return a == b;
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
    case EW_GT: return a > b;
    case EW_GE: return a >= b;
    case EW_AND: return a && b;
    case EW_OR: return a || b;
    case EW_XOR: return !a != !b;
    case EW_BITSHL: return ub >= 64 ? 0 : (int64_t)(ua << ub);
    case EW_BITSHR: return ub >= 64 ? 0 : (int64_t)(ua >> ub);
    case EW_WHERE: return a ? b : c;
    default: ORCH_ASSERT(!"integer elementwise op without a definition");
    }
    return 0;
}

typedef struct EwPlan {
    const EwProgram *prog;
    const Tensor **in;
    const void *const *x;
    bool *in_float; // per input: its dtype is a float type
    bool *op_float; // per instruction: computes in the float domain
} EwPlan;

static bool arg_is_float(const EwPlan *pl, const EwArg *a) {
    if (a->src == EWS_INPUT)
        return pl->in_float[a->index];
    if (a->src == EWS_INSTR)
        return dtype_is_float(pl->prog->code[a->index].dtype);
    return false;
}

static void ew_plan(EwPlan *pl) {
    const EwProgram *pr = pl->prog;
    for (int i = 0; i < pr->n; i++) {
        const EwInstr *ins = &pr->code[i];
        int n = ew_op_arity(ins->op), first = ins->op == EW_WHERE ? 1 : 0;
        bool any_tensor = false, f = false;
        for (int a = first; a < n; a++) {
            if (ins->arg[a].src != EWS_IMM) {
                any_tensor = true;
                f |= arg_is_float(pl, &ins->arg[a]);
            }
        }
        // Immediates alone (impossible from the builders) would take the result's domain.
        pl->op_float[i] = any_tensor ? f : dtype_is_float(ins->dtype);
    }
}

static Val ew_eval_one(const EwPlan *pl, const int64_t *offs, Val *vals) {
    const EwProgram *pr = pl->prog;
    for (int i = 0; i < pr->n; i++) {
        const EwInstr *ins = &pr->code[i];
        Val a[3] = {{0, 0}, {0, 0}, {0, 0}};
        for (int k = 0; k < ew_op_arity(ins->op); k++) {
            const EwArg *arg = &ins->arg[k];
            if (arg->src == EWS_INPUT) {
                DType t = pl->in[arg->index]->dtype;
                const void *p = pl->x[arg->index];
                int64_t o = offs[arg->index];
                if (dtype_is_float(t)) {
                    a[k].f = elem_get_f64(t, p, o);
                    a[k].i = (int64_t)0;
                } else {
                    a[k].i = elem_get_i64(t, p, o);
                    a[k].f = (double)a[k].i;
                }
            } else if (arg->src == EWS_INSTR) {
                a[k] = vals[arg->index];
            } else {
                a[k].f = arg->imm;
                // Immediates may be NaN or infinite (masks); only in-range values convert.
                a[k].i = isfinite(arg->imm) && fabs(arg->imm) < 9.2e18 ? (int64_t)arg->imm : 0;
            }
        }
        Val r;
        bool rf;
        if (pl->op_float[i]) {
            r.f = fl_op(ins->op, a[0].f, a[1].f, a[2].f);
            rf = true;
        } else {
            r.i = int_op(ins->op, a[0].i, a[1].i, a[2].i);
            rf = false;
        }
        // Results land in the instruction's dtype: bool for comparisons, the target for CAST.
        if (rf && !dtype_is_float(ins->dtype) && ins->op != EW_CAST) {
            r.i = (int64_t)r.f; // comparisons and logic give 0/1
            rf = false;
        }
        vals[i] = normalise(ins->dtype, r, rf);
    }
    return vals[pr->n - 1];
}

// Elements [e0, e1) of an elementwise primitive's output (the row-major walk starts at e0).
static void ew_range(const EwPlan *pl, const Tensor *out, int n_in,
                     const int64_t (*strides)[ORCH_MAX_RANK], void *y, int64_t e0, int64_t e1) {
    int64_t *offs = xcalloc((size_t)n_in + 1, sizeof(int64_t));
    Val *vals = xcalloc((size_t)pl->prog->n, sizeof(Val));
    int64_t idx[ORCH_MAX_RANK] = {0}, rest = e0;
    for (int d = out->rank - 1; d >= 0; d--) {
        idx[d] = out->dims[d] > 0 ? rest % out->dims[d] : 0;
        rest = out->dims[d] > 0 ? rest / out->dims[d] : 0;
        for (int j = 0; j < n_in; j++)
            offs[j] += strides[j][d] * idx[d];
    }
    DType ot = out->dtype;
    for (int64_t e = e0; e < e1; e++) {
        Val v = ew_eval_one(pl, offs, vals);
        if (dtype_is_float(ot))
            elem_set_f64(ot, y, e, v.f);
        else
            elem_set_i64(ot, y, e, v.i);
        for (int d = out->rank - 1; d >= 0; d--) {
            for (int j = 0; j < n_in; j++)
                offs[j] += strides[j][d];
            if (++idx[d] < out->dims[d])
                break;
            for (int j = 0; j < n_in; j++)
                offs[j] -= strides[j][d] * out->dims[d];
            idx[d] = 0;
        }
    }
    free(offs);
    free(vals);
}

// Large outputs are split over threads (each element is computed on its own, so the result does
// not depend on the split): the compile driver interprets whole models at full resolution.
#define EW_PARALLEL_MIN 65536

static int eval_elemwise(const PrimGraph *pg, const Prim *p, const void *const *x, void *y) {
    const Tensor *out = pg->tensors[p->out[0]];
    int n_in = p->n_in;
    const Tensor **in = xcalloc((size_t)n_in + 1, sizeof(Tensor *));
    bool *in_float = xcalloc((size_t)n_in + 1, 1);
    bool *op_float = xcalloc((size_t)p->ew.n, 1);
    int64_t(*strides)[ORCH_MAX_RANK] = xcalloc((size_t)n_in + 1, sizeof *strides);
    for (int j = 0; j < n_in; j++) {
        in[j] = pg->tensors[p->in[j]];
        in_float[j] = dtype_is_float(in[j]->dtype);
        op_broadcast_strides(in[j], out->rank, out->dims, strides[j]);
    }
    EwPlan pl = {&p->ew, in, x, in_float, op_float};
    ew_plan(&pl);
    int64_t numel = tensor_numel(out);
    const int64_t chunk = 16384, n_chunks = (numel + chunk - 1) / chunk;
    if (numel < EW_PARALLEL_MIN) {
        ew_range(&pl, out, n_in, (const int64_t(*)[ORCH_MAX_RANK])strides, y, 0, numel);
    } else {
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < n_chunks; c++)
            ew_range(&pl, out, n_in, (const int64_t(*)[ORCH_MAX_RANK])strides, y, c * chunk,
                     ORCH_MIN(numel, (c + 1) * chunk));
    }
    free(in);
    free(in_float);
    free(op_float);
    free(strides);
    return ST_OK;
}

// ---- reduce ----

static int eval_reduce(const PrimGraph *pg, const Prim *p, const void *x, void *y) {
    const Tensor *in = pg->tensors[p->in[0]], *out = pg->tensors[p->out[0]];
    const ReduceParams *R = &p->red;
    int64_t n_out = tensor_numel(out), n_in = tensor_numel(in);
    double *acc = xcalloc((size_t)n_out + 1, sizeof(double));
    int64_t *iacc = xcalloc((size_t)n_out + 1, sizeof(int64_t));
    int64_t *arg = xcalloc((size_t)n_out + 1, sizeof(int64_t));
    bool *seen = xcalloc((size_t)n_out + 1, 1);
    bool fl = dtype_is_float(in->dtype);
    int64_t count = 1; // elements per output
    int arg_axis = -1;
    for (int d = 0; d < in->rank; d++)
        if (R->axes & (1u << d)) {
            count *= in->dims[d];
            arg_axis = d;
        }
    // Output offset of each input element: strides of the kept axes.
    int64_t ostride[ORCH_MAX_RANK], s = 1;
    for (int d = in->rank - 1; d >= 0; d--) {
        if (R->axes & (1u << d)) {
            ostride[d] = 0;
        } else {
            ostride[d] = s;
            s *= in->dims[d];
        }
    }
    int64_t idx[ORCH_MAX_RANK] = {0}, o = 0;
    for (int64_t e = 0; e < n_in; e++) {
        double v = fl ? elem_get_f64(in->dtype, x, e) : (double)elem_get_i64(in->dtype, x, e);
        int64_t iv = fl ? 0 : elem_get_i64(in->dtype, x, e);
        switch (R->op) {
        case RED_SUM:
        case RED_MEAN:
            acc[o] += v;
            iacc[o] = (int64_t)((uint64_t)iacc[o] + (uint64_t)iv);
            break;
        case RED_PROD:
            acc[o] = seen[o] ? acc[o] * v : v;
            iacc[o] = seen[o] ? (int64_t)((uint64_t)iacc[o] * (uint64_t)iv) : iv;
            break;
        case RED_MAX:
        case RED_MIN: {
            bool better = !seen[o] || isnan(v) ||
                          (R->op == RED_MAX ? (fl ? v > acc[o] : iv > iacc[o])
                                            : (fl ? v < acc[o] : iv < iacc[o]));
            if (seen[o] && isnan(acc[o]))
                better = false;
            if (better) {
                acc[o] = v;
                iacc[o] = iv;
            }
            break;
        }
        case RED_ARGMAX:
        case RED_ARGMIN: {
            // numpy's rule: NaN beats every number, two NaNs tie, a NaN is never replaced.
            bool more, same;
            if (fl && (isnan(v) || isnan(acc[o]))) {
                more = isnan(v) && !isnan(acc[o]);
                same = isnan(v) && isnan(acc[o]);
            } else {
                more = R->op == RED_ARGMAX ? (fl ? v > acc[o] : iv > iacc[o])
                                           : (fl ? v < acc[o] : iv < iacc[o]);
                same = fl ? v == acc[o] : iv == iacc[o];
            }
            if (!seen[o] || more || (R->select_last && same)) {
                acc[o] = v;
                iacc[o] = iv;
                arg[o] = arg_axis >= 0 ? idx[arg_axis] : 0;
            }
            break;
        }
        }
        seen[o] = true;
        for (int d = in->rank - 1; d >= 0; d--) {
            o += ostride[d];
            if (++idx[d] < in->dims[d])
                break;
            o -= ostride[d] * in->dims[d];
            idx[d] = 0;
        }
    }
    DType ot = out->dtype;
    for (int64_t i = 0; i < n_out; i++) {
        switch (R->op) {
        case RED_ARGMAX:
        case RED_ARGMIN: ((int64_t *)y)[i] = arg[i]; break;
        case RED_MEAN:
            if (fl)
                elem_set_f64(ot, y, i, acc[i] / (double)count);
            else
                elem_set_i64(ot, y, i, count ? iacc[i] / count : 0);
            break;
        case RED_MAX:
        case RED_MIN:
            if (!seen[i]) { // empty: the identity of the reduction
                if (fl)
                    elem_set_f64(ot, y, i, R->op == RED_MAX ? -INFINITY : INFINITY);
                else
                    elem_set_i64(ot, y, i, R->op == RED_MAX ? INT64_MIN : INT64_MAX);
                break;
            }
            if (fl)
                elem_set_f64(ot, y, i, acc[i]);
            else
                elem_set_i64(ot, y, i, iacc[i]);
            break;
        default:
            if (fl)
                elem_set_f64(ot, y, i, !seen[i] && R->op == RED_PROD ? 1.0 : acc[i]);
            else
                elem_set_i64(ot, y, i, !seen[i] && R->op == RED_PROD ? 1 : iacc[i]);
        }
    }
    free(acc);
    free(iacc);
    free(arg);
    free(seen);
    return ST_OK;
}

// ---- layout ----

static int eval_layout(const PrimGraph *pg, const Prim *p, const void *const *x, void *y) {
    const Tensor *out = pg->tensors[p->out[0]];
    size_t es = dtype_size(out->dtype);
    int64_t numel = tensor_numel(out), idx[ORCH_MAX_RANK] = {0}, src[ORCH_MAX_RANK];
    uint64_t pad = 0;
    elem_set_f64(out->dtype, &pad, 0, p->lay.pad_value);
    for (int64_t e = 0; e < numel; e++) {
        int which = 0;
        const Tensor *in;
        bool inside = true;
        if (p->lay.concat) {
            memcpy(src, idx, sizeof(int64_t) * (size_t)out->rank);
            which = layout_concat_source(pg, p, src);
        } else {
            inside = layout_map_index(&p->lay, out->rank, out->dims, idx, src);
        }
        in = pg->tensors[p->in[which]];
        unsigned char *dst = (unsigned char *)y + (size_t)e * es;
        if (!inside) {
            memcpy(dst, &pad, es);
        } else {
            int64_t off = 0;
            for (int d = 0; d < in->rank; d++)
                off = off * in->dims[d] + src[d];
            memcpy(dst, (const unsigned char *)x[which] + (size_t)off * es, es);
        }
        for (int d = out->rank - 1; d >= 0; d--) {
            if (++idx[d] < out->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return ST_OK;
}

// ---- linear ----

// n values of dtype t (float16 / bfloat16) as a new float32 array (exact).
static float *to_float(DType t, const void *x, int64_t n) {
    float *f = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++)
        f[i] = t == DT_FLOAT16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
    return f;
}

static int eval_matmul(const PrimGraph *pg, const Prim *p, const void *const *x, void *y) {
    const Tensor *A = pg->tensors[p->in[0]], *B = pg->tensors[p->in[1]];
    const Tensor *out = pg->tensors[p->out[0]];
    int r = out->rank;
    int64_t M = out->dims[r - 2], N = out->dims[r - 1], K = A->dims[A->rank - 1];
    if (M == 0 || N == 0)
        return ST_OK;
    int64_t batches = tensor_numel(out) / (M * N);
    // Batch strides (in matrices) of A and B at the output's batch shape.
    int64_t sa[ORCH_MAX_RANK] = {0}, sb[ORCH_MAX_RANK] = {0}, st_a = 1, st_b = 1;
    for (int d = r - 3; d >= 0; d--) {
        int da = d - (r - A->rank), db = d - (r - B->rank);
        int64_t xa = da >= 0 ? A->dims[da] : 1, xb = db >= 0 ? B->dims[db] : 1;
        sa[d] = xa == 1 ? 0 : st_a;
        sb[d] = xb == 1 ? 0 : st_b;
        st_a *= xa;
        st_b *= xb;
    }
    int64_t idx[ORCH_MAX_RANK] = {0}, oa = 0, ob = 0;
    DType t = out->dtype;
    // Half operands (reduced-precision storage): their products are exact in float32; the GEMM
    // sums them in float32 and each result is rounded once to the output's type.
    bool half = (t == DT_FLOAT16 || t == DT_BFLOAT16) && A->dtype == t && B->dtype == t;
    float *fa = half ? to_float(t, x[0], tensor_numel(A)) : NULL;
    float *fb = half ? to_float(t, x[1], tensor_numel(B)) : NULL;
    float *fy = half ? xmalloc(sizeof(float) * (size_t)(M * N)) : NULL;
    for (int64_t bi = 0; bi < batches; bi++) {
        if (t == DT_FLOAT) {
            gemm_f32(false, false, M, N, K, 1.0f, (const float *)x[0] + oa * M * K, K,
                     (const float *)x[1] + ob * K * N, N, 0.0f, (float *)y + bi * M * N, N);
        } else if (half) {
            gemm_f32(false, false, M, N, K, 1.0f, fa + oa * M * K, K, fb + ob * K * N, N, 0.0f, fy,
                     N);
            for (int64_t i = 0; i < M * N; i++)
                elem_set_f64(t, y, bi * M * N + i, fy[i]);
        } else {
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += elem_get_f64(t, x[0], oa * M * K + i * K + k) *
                             elem_get_f64(t, x[1], ob * K * N + k * N + j);
                    elem_set_f64(t, y, bi * M * N + i * N + j, s);
                }
        }
        for (int d = r - 3; d >= 0; d--) {
            oa += sa[d];
            ob += sb[d];
            if (++idx[d] < out->dims[d])
                break;
            oa -= sa[d] * out->dims[d];
            ob -= sb[d] * out->dims[d];
            idx[d] = 0;
        }
    }
    free(fa);
    free(fb);
    free(fy);
    return ST_OK;
}

static int eval_conv(const PrimGraph *pg, const Prim *p, const void *const *x, void *y, Err *e) {
    const Tensor *X = pg->tensors[p->in[0]], *W = pg->tensors[p->in[1]];
    const Tensor *out = pg->tensors[p->out[0]];
    const LinearParams *L = &p->lin;
    bool tr = L->op == LIN_CONV_TRANSPOSE;
    ConvGeom c = {.S = L->n_spatial,
                  .N = X->dims[0],
                  .C = X->dims[1],
                  .M = out->dims[1],
                  .group = L->group,
                  .in_pix = 1,
                  .out_pix = 1,
                  .k_pix = 1};
    for (int d = 0; d < c.S; d++) {
        c.in[d] = X->dims[2 + d];
        c.out[d] = out->dims[2 + d];
        c.k[d] = W->dims[2 + d];
        c.stride[d] = L->stride[d];
        c.dil[d] = L->dilation[d];
        c.pad[d] = L->pad_begin[d];
        c.in_pix *= c.in[d];
        c.out_pix *= c.out[d];
        c.k_pix *= c.k[d];
    }
    DType t = X->dtype;
    bool half = (t == DT_FLOAT16 || t == DT_BFLOAT16) && W->dtype == t && out->dtype == t;
    if (t != DT_FLOAT && !half)
        return err_set(e, ST_UNSUPPORTED, "convolution '%s': dtype %s", p->origin,
                       dtype_name(X->dtype));
    // Half tensors: the float32 convolution of their exact values, each result rounded once.
    float *fx = half ? to_float(t, x[0], tensor_numel(X)) : NULL;
    float *fw = half ? to_float(t, x[1], tensor_numel(W)) : NULL;
    float *fy = half ? xmalloc(sizeof(float) * (size_t)(tensor_numel(out) + 1)) : NULL;
    const void *xa = half ? fx : x[0], *wa = half ? fw : x[1];
    void *ya = half ? (void *)fy : y;
    int rc = tr ? conv_transpose_forward_f32(&c, xa, wa, NULL, ya)
                : conv_forward_f32(&c, xa, wa, NULL, ya);
    if (half && !rc)
        for (int64_t i = 0; i < tensor_numel(out); i++)
            elem_set_f64(t, y, i, fy[i]);
    free(fx);
    free(fw);
    free(fy);
    return rc ? err_set(e, rc, "convolution '%s': out of memory", p->origin) : ST_OK;
}

int prim_eval(const PrimGraph *pg, const Prim *p, const void *const *x, void *y, Err *e) {
    switch (p->kind) {
    case PRIM_ELEMWISE: return eval_elemwise(pg, p, x, y);
    case PRIM_REDUCE: return eval_reduce(pg, p, x[0], y);
    case PRIM_LAYOUT: return eval_layout(pg, p, x, y);
    case PRIM_LINEAR:
        return p->lin.op == LIN_MATMUL ? eval_matmul(pg, p, x, y) : eval_conv(pg, p, x, y, e);
    default: ORCH_ASSERT(!"prim_eval on an opaque primitive");
    }
    return ST_RUNTIME;
}

// OPAQUE: the ONNX node's reference op, over the source graph (same shapes as ours).
int prim_eval_opaque(const PrimGraph *pg, const Prim *p, const void *const *x, void *const *y,
                     Err *e) {
    const Node *n = p->node;
    const OpDef *def = ops_find(n->domain, n->op);
    ORCH_ASSERT(def && n->n_in == p->n_in && n->n_out == p->n_out);
    const Tensor **in = xcalloc((size_t)n->n_in + 1, sizeof(Tensor *));
    const Tensor **out = xcalloc((size_t)n->n_out + 1, sizeof(Tensor *));
    for (int j = 0; j < n->n_in; j++)
        in[j] = p->in[j] >= 0 ? pg->tensors[p->in[j]] : NULL;
    for (int j = 0; j < n->n_out; j++)
        out[j] = p->out[j] >= 0 ? pg->tensors[p->out[j]] : NULL;
    OpRun r = {pg->src, n, in, x, out, y};
    int rc = def->run(&r, e);
    free(in);
    free(out);
    return rc;
}

// Runs every primitive; frees values after their last use unless `all` receives every tensor.
// v rounded to `bits` mantissa bits, to nearest, ties to even (infinities and NaN kept; the
// exponent range stays float32's).
static float round_mantissa(float v, int bits) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u || bits >= 23)
        return v;
    int drop = 23 - bits;
    uint32_t half = 1u << (drop - 1), lsb = (u >> drop) & 1u;
    u = (u + half - 1 + lsb) & ~((1u << drop) - 1);
    memcpy(&v, &u, sizeof v);
    return v;
}

// round_bits > 0: every float32 operand of a LINEAR primitive is first rounded to that many
// mantissa bits (prim_interp_run_rounded).
static int run_graph(const PrimGraph *pg, const void *const *inputs, void **outputs, void ***all,
                     int round_bits, Err *e) {
    int nt = pg->n_tensors;
    void **val = xcalloc((size_t)nt + 1, sizeof(void *));
    bool *owned = xcalloc((size_t)nt + 1, 1);
    int *last_use = xmalloc(sizeof(int) * (size_t)(nt + 1));
    for (int i = 0; i < nt; i++) {
        last_use[i] = -1;
        if (pg->tensors[i]->kind == TK_CONST)
            val[i] = pg->tensors[i]->data;
    }
    for (int i = 0; i < pg->n_inputs; i++)
        val[pg->inputs[i]] = (void *)inputs[i];
    for (int k = 0; k < pg->n_prims; k++)
        for (int j = 0; j < pg->prims[k]->n_in; j++)
            if (pg->prims[k]->in[j] >= 0)
                last_use[pg->prims[k]->in[j]] = k;
    for (int i = 0; i < pg->n_outputs; i++)
        last_use[pg->outputs[i]] = pg->n_prims;
    int rc = ST_OK;
    for (int k = 0; k < pg->n_prims && rc == ST_OK; k++) {
        const Prim *p = pg->prims[k];
        const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
        void **y = xcalloc((size_t)p->n_out + 1, sizeof(void *));
        for (int j = 0; j < p->n_in; j++)
            x[j] = p->in[j] >= 0 ? val[p->in[j]] : NULL;
        float **rounded = NULL; // the LINEAR operands' rounded copies (round_bits)
        if (round_bits > 0 && p->kind == PRIM_LINEAR) {
            rounded = xcalloc((size_t)p->n_in + 1, sizeof(float *));
            for (int j = 0; j < p->n_in && rc == ST_OK; j++) {
                const Tensor *t = p->in[j] >= 0 ? pg->tensors[p->in[j]] : NULL;
                if (!t || t->dtype != DT_FLOAT || !x[j])
                    continue;
                int64_t n = tensor_numel(t);
                rounded[j] = malloc(sizeof(float) * (size_t)(n ? n : 1));
                if (!rounded[j]) {
                    rc = err_set(e, ST_RUNTIME, "out of memory for '%s'", t->name);
                    break;
                }
                for (int64_t i = 0; i < n; i++)
                    rounded[j][i] = round_mantissa(((const float *)x[j])[i], round_bits);
                x[j] = rounded[j];
            }
        }
        for (int j = 0; j < p->n_out && rc == ST_OK; j++) {
            if (p->out[j] < 0)
                continue;
            size_t bytes = tensor_nbytes(pg->tensors[p->out[j]]);
            y[j] = malloc(bytes ? bytes : 1);
            if (!y[j]) {
                rc = err_set(e, ST_RUNTIME, "out of memory for '%s'", pg->tensors[p->out[j]]->name);
                break;
            }
            memset(y[j], 0xff, bytes);
            val[p->out[j]] = y[j];
            owned[p->out[j]] = true;
        }
        bool empty = true; // all outputs empty: nothing to compute (and axes may be huge)
        for (int j = 0; j < p->n_out; j++)
            empty = empty && (p->out[j] < 0 || tensor_numel(pg->tensors[p->out[j]]) == 0);
        if (rc == ST_OK && !empty)
            rc = p->kind == PRIM_OPAQUE ? prim_eval_opaque(pg, p, x, y, e)
                                        : prim_eval(pg, p, x, y[0], e);
        for (int j = 0; j < p->n_in; j++) {
            int id = p->in[j];
            if (id >= 0 && owned[id] && last_use[id] == k && !all) {
                free(val[id]);
                val[id] = NULL;
                owned[id] = false;
            }
        }
        for (int j = 0; rounded && j < p->n_in; j++)
            free(rounded[j]);
        free(rounded);
        free(x);
        free(y);
    }
    if (all && rc == ST_OK) {
        // Graph inputs are copied so the caller owns every non-constant value.
        for (int i = 0; i < pg->n_inputs && rc == ST_OK; i++) {
            int id = pg->inputs[i];
            if (owned[id])
                continue;
            size_t bytes = tensor_nbytes(pg->tensors[id]);
            void *copy = malloc(bytes ? bytes : 1);
            if (!copy) {
                rc = err_set(e, ST_RUNTIME, "out of memory for '%s'", pg->tensors[id]->name);
                break;
            }
            if (bytes)
                memcpy(copy, val[id], bytes);
            val[id] = copy;
            owned[id] = true;
        }
        if (rc == ST_OK) {
            *all = val;
            free(owned);
            free(last_use);
            return ST_OK;
        }
    }
    for (int i = 0; i < pg->n_outputs && outputs; i++) {
        outputs[i] = NULL;
        if (rc)
            continue;
        const Tensor *t = pg->tensors[pg->outputs[i]];
        size_t bytes = tensor_nbytes(t);
        outputs[i] = malloc(bytes ? bytes : 1);
        if (!outputs[i]) {
            rc = err_set(e, ST_RUNTIME, "out of memory for output '%s'", t->name);
            continue;
        }
        if (bytes)
            memcpy(outputs[i], val[pg->outputs[i]], bytes);
    }
    if (rc && outputs)
        for (int i = 0; i < pg->n_outputs; i++) {
            free(outputs[i]);
            outputs[i] = NULL;
        }
    for (int i = 0; i < nt; i++)
        if (owned[i])
            free(val[i]);
    free(val);
    free(owned);
    free(last_use);
    if (rc)
        err_prefix(e, "%s: ", pg->src->path);
    return rc;
}

int prim_interp_run(const PrimGraph *pg, const void *const *inputs, void **outputs, Err *e) {
    return run_graph(pg, inputs, outputs, NULL, 0, e);
}

int prim_interp_run_rounded(const PrimGraph *pg, const void *const *inputs, void **outputs,
                            int mantissa_bits, Err *e) {
    return run_graph(pg, inputs, outputs, NULL, mantissa_bits, e);
}

int prim_interp_values(const PrimGraph *pg, const void *const *inputs, void ***values, Err *e) {
    *values = NULL;
    return run_graph(pg, inputs, NULL, values, 0, e);
}

void prim_values_free(const PrimGraph *pg, void **values) {
    if (!values)
        return;
    for (int i = 0; i < pg->n_tensors; i++)
        if (pg->tensors[i]->kind != TK_CONST)
            free(values[i]);
    free(values);
}
