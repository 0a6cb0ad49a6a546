// The cuBLASLt side of candidate analysis (cublaslt.h): whether a candidate is one matmul with an
// epilogue cublasLtMatmul computes exactly (on top of the linear emitter's culin_analyse), and
// the candidate-level configs and calls. Compile time only: a session runs the calls an artefact
// recorded (cublaslt.c).
#include "cublaslt.h"

#include "../../plan/plan.h"
#include "cugen_lin_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- the analysis ----

// Where operand t comes from: a candidate input read in place (*trans false), directly or
// through a LAYOUT of the candidate that moves no element (prim_layout_is_view; its primitive index
// in c goes to *via), or one LAYOUT that swaps the last two axes of a candidate input of t's type
// (*trans true; *via likewise). The input's position in c->inputs, or -1.
static int operand_source(const PrimGraph *pg, const Candidate *c, int t, bool *trans, int *via) {
    *trans = false;
    *via = -1;
    int pos = cgen_input_pos(c, t);
    if (pos >= 0)
        return pos;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        if (p->kind != PRIM_LAYOUT || p->out[0] != t)
            continue;
        if (prim_layout_is_view(pg, p)) {
            *via = i;
            return cgen_input_pos(c, p->in[0]);
        }
        const LayoutParams *lp = &p->lay;
        if (lp->concat || lp->n_stages != 1 || p->n_in != 1 || lp->stages[0].kind != LS_TRANSPOSE)
            return -1;
        const Tensor *src = pg->tensors[p->in[0]], *out = pg->tensors[t];
        int r = out->rank;
        if (src->rank != r || r < 2 || src->dtype != out->dtype)
            return -1;
        for (int d = 0; d < r; d++) {
            int want = d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d;
            if (lp->stages[0].perm[d] != want)
                return -1;
        }
        *trans = true;
        *via = i;
        return cgen_input_pos(c, p->in[0]);
    }
    return -1;
}

// The epilogue's value so far: alpha * (A B) [+ bias] [+ residual] [then ReLU], and the types it
// may pass through.
typedef struct EpiState {
    float alpha;
    int bias; // tensor id, -1 none
    int res;  // tensor id of the residual (cuBLASLt's C with beta = 1), -1 none
    bool relu;
    bool gelu;         // the rest of the chain is a GELU of the value (cuBLASLt's last step)
    DType lin;         // the LINEAR's type (its operands' and output's)
    DType d;           // D's: the candidate output's type, which the bias must have too
    const Tensor *out; // the running value (the LINEAR's output, or a reshape of it): the
                       // residual's shape, and its last axis the bias's
} EpiState;

// Whether the running value may be computed in type t: the LINEAR's, or float32 on the way to a
// float32 output from half operands. cuBLASLt computes the epilogue in float32 and rounds once to
// D; the half roundings of the value in between, which the interpreter makes, are within the
// half check's tolerance.
static bool value_type_ok(const EpiState *st, DType t) {
    return t == st->lin || (t == DT_FLOAT && st->lin != DT_FLOAT);
}

enum { V_BAD, V_VAL, V_BIAS, V_IMM, V_RES };

// An immediate as an instruction of type t sees it (prim.h: converted to the operand type).
static double imm_as(DType t, double v) {
    float buf = 0;
    elem_set_f64(t, &buf, 0, v);
    return elem_get_f64(t, &buf, 0);
}

// ---- GELU, recognised by value ----
// Exporters spell GELU in many ways (x * 0.5 * (1 + erf(x / sqrt 2)), erf(x * 0.7071) ..., the
// tanh form with x^3 as POW or as x * x * x): the program's tail is compared with both GELUs as
// a function of one value, in double precision, on points across [-9, 9], rather than matched
// by structure.

enum { GELU_NONE, GELU_TANH, GELU_ERF };

static double gelu_erf(double x) {
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// The value of instructions from..n-1 of pr for running value v, where `last` (an instruction
// before `from`, or -1 for the primitive input `in_cur`) holds v; NAN for an instruction that is
// not a real function of v alone.
static double tail_eval(const Prim *q, int from, int last, int in_cur, double v) {
    double val[64];
    const EwProgram *pr = &q->ew;
    for (int i = from; i < pr->n; i++) {
        const EwInstr *in = &pr->code[i];
        double a[3] = {0, 0, 0};
        int ar = ew_op_arity(in->op);
        for (int k = 0; k < ar; k++) {
            const EwArg *g = &in->arg[k];
            if (g->src == EWS_IMM)
                a[k] = g->imm;
            else if (g->src == EWS_INSTR && g->index >= from && g->index < i)
                a[k] = val[g->index];
            else if (g->src == EWS_INSTR && g->index == last && last >= 0)
                a[k] = v;
            else if (g->src == EWS_INPUT && last < 0 && g->index == in_cur)
                a[k] = v;
            else
                return NAN;
        }
        double r;
        switch (in->op) {
        case EW_COPY:
        case EW_CAST: r = a[0]; break;
        case EW_NEG: r = -a[0]; break;
        case EW_ADD: r = a[0] + a[1]; break;
        case EW_SUB: r = a[0] - a[1]; break;
        case EW_MUL: r = a[0] * a[1]; break;
        case EW_DIV: r = a[0] / a[1]; break;
        case EW_POW: r = pow(a[0], a[1]); break;
        case EW_SQRT: r = sqrt(a[0]); break;
        case EW_RECIP: r = 1.0 / a[0]; break;
        case EW_EXP: r = exp(a[0]); break;
        case EW_ERF: r = erf(a[0]); break;
        case EW_TANH: r = tanh(a[0]); break;
        case EW_SIGMOID: r = 1.0 / (1.0 + exp(-a[0])); break;
        default: return NAN;
        }
        val[i] = r;
    }
    return val[pr->n - 1];
}

// Which GELU instructions from..n-1 of q compute of the running value (held by instruction
// `last`, or the primitive input `in_cur` when last is -1): GELU_TANH where they agree with the
// tanh form to 1e-6 (relative, double precision), GELU_ERF with the erf form, else GELU_NONE.
// Every instruction's type must be one the value may take (value_type_ok).
static int gelu_tail(const Prim *q, int from, int last, int in_cur, const EpiState *st) {
    const EwProgram *pr = &q->ew;
    if (from >= pr->n || pr->n > 64)
        return GELU_NONE;
    for (int i = from; i < pr->n; i++)
        if (!value_type_ok(st, pr->code[i].dtype))
            return GELU_NONE;
    double err_t = 0, err_e = 0;
    for (int k = 0; k <= 72; k++) {
        double x = -9.0 + 0.25 * k + (k % 3) * 0.0371; // off the grid's round values too
        double f = tail_eval(q, from, last, in_cur, x);
        if (!isfinite(f))
            return GELU_NONE;
        double gt = gelu_tanh(x), ge = gelu_erf(x);
        err_t = fmax(err_t, fabs(f - gt) / fmax(1.0, fabs(gt)));
        err_e = fmax(err_e, fabs(f - ge) / fmax(1.0, fabs(ge)));
    }
    return err_t <= 1e-6 ? GELU_TANH : err_e <= 1e-6 ? GELU_ERF : GELU_NONE;
}

// One ELEMWISE primitive applied to the state `cur` (its output value is `cur` after the call):
// true when its program is a sequence of the steps cuBLASLt's epilogues do, in their order.
static bool epi_prim(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt,
                     const Prim *q, int cur, int64_t N, EpiState *st) {
    int kind[64];
    double imm[64];
    int bias_t[64];
    int last = -1; // the instruction holding the running value; -1: still the input `cur`
    const EwProgram *pr = &q->ew;
    if (pr->n <= 0 || pr->n > 64 || st->gelu)
        return false;
    int in_cur = -1; // the input number reading the running value
    for (int j = 0; j < q->n_in; j++)
        if (q->in[j] == cur && in_cur < 0)
            in_cur = j;
    for (int i = 0; i < pr->n; i++) {
        const EwInstr *in = &pr->code[i];
        int ar = ew_op_arity(in->op);
        int k[3] = {V_BAD, V_BAD, V_BAD};
        double v[3] = {0, 0, 0};
        int bt[3] = {-1, -1, -1};
        // GELU ends cuBLASLt's epilogue: the rest of the program, a function of the value alone.
        // Its erf form differs from cuBLASLt's tanh approximation by up to 5e-4 (|x| near 2):
        // offered only where the precision is reduced (float32 operands) or half.
        if (!st->relu && (last >= 0 || in_cur >= 0)) {
            int g = gelu_tail(q, i, last, in_cur, st);
            if (g == GELU_TANH || (g == GELU_ERF && (st->lin != DT_FLOAT ||
                                                     cugen_prec_of(opt, DT_FLOAT) != PREC_FP32))) {
                st->gelu = true;
                return true;
            }
        }
        if (!value_type_ok(st, in->dtype))
            return false;
        for (int a = 0; a < ar; a++) {
            const EwArg *g = &in->arg[a];
            if (g->src == EWS_IMM) {
                k[a] = V_IMM;
                v[a] = g->imm;
            } else if (g->src == EWS_INSTR) {
                if (g->index < 0 || g->index >= i)
                    return false;
                // The running value is consumed once, by the next step.
                if (kind[g->index] == V_VAL && g->index != last)
                    return false;
                k[a] = kind[g->index];
                v[a] = imm[g->index];
                bt[a] = bias_t[g->index];
            } else {
                if (g->index < 0 || g->index >= q->n_in)
                    return false;
                int t = q->in[g->index];
                const Tensor *T = pg->tensors[t];
                if (t == cur) {
                    if (last != -1)
                        return false;
                    k[a] = V_VAL;
                } else if (cgen_input_pos(c, t) >= 0 && T->dtype == st->d && T->rank >= 1 &&
                           T->dims[T->rank - 1] == N && tensor_numel(T) == N &&
                           st->out->dims[st->out->rank - 1] == N) {
                    k[a] = V_BIAS;
                    bt[a] = t;
                } else if (cgen_input_pos(c, t) >= 0 && T->dtype == st->d &&
                           tensor_same_shape(T, st->out)) {
                    // A residual: a candidate input of the product's shape, read as C.
                    k[a] = V_RES;
                    bt[a] = t;
                } else {
                    return false;
                }
            }
        }
        int out = V_BAD, ob = -1;
        switch (in->op) {
        case EW_COPY:
            out = k[0];
            ob = bt[0];
            break;
        case EW_MUL:
            // alpha * (A B) before the bias and the ReLU.
            if ((k[0] == V_VAL && k[1] == V_IMM) || (k[0] == V_IMM && k[1] == V_VAL)) {
                if (st->bias >= 0 || st->res >= 0 || st->relu)
                    return false;
                st->alpha *= (float)imm_as(in->dtype, k[0] == V_IMM ? v[0] : v[1]);
                out = V_VAL;
            }
            break;
        case EW_ADD:
            if ((k[0] == V_VAL && k[1] == V_BIAS) || (k[0] == V_BIAS && k[1] == V_VAL)) {
                if (st->bias >= 0 || st->relu)
                    return false;
                st->bias = k[0] == V_BIAS ? bt[0] : bt[1];
                out = V_VAL;
            } else if ((k[0] == V_VAL && k[1] == V_RES) || (k[0] == V_RES && k[1] == V_VAL)) {
                // cuBLASLt adds beta C before its epilogue's bias: the same sum in another
                // order, which float rounding alone tells apart; the ReLU must come after.
                if (st->res >= 0 || st->relu)
                    return false;
                st->res = k[0] == V_RES ? bt[0] : bt[1];
                out = V_VAL;
            }
            break;
        case EW_RELU:
            if (k[0] == V_VAL && !st->relu) {
                st->relu = true;
                out = V_VAL;
            }
            break;
        case EW_CAST:
            // Between the half types and float32 only (checked above): the value stays the
            // float32 accumulator's until D.
            if (k[0] == V_VAL && st->lin != DT_FLOAT)
                out = V_VAL;
            break;
        case EW_MAX:
            if (((k[0] == V_VAL && k[1] == V_IMM && v[1] == 0) ||
                 (k[0] == V_IMM && v[0] == 0 && k[1] == V_VAL)) &&
                !st->relu) {
                st->relu = true;
                out = V_VAL;
            }
            break;
        default: break;
        }
        if (out == V_BAD)
            return false;
        kind[i] = out;
        imm[i] = out == V_IMM ? v[0] : 0;
        bias_t[i] = ob;
        if (out == V_VAL)
            last = i;
    }
    // Each step used the value once, in order; the program's value is the state's.
    return kind[pr->n - 1] == V_VAL && last == pr->n - 1;
}

static int compute_type(const TargetOptions *opt) { // of float32 operands
    switch (cugen_prec_of(opt, DT_FLOAT)) {
    case PREC_TF32: return BLASLT_COMPUTE_32F_FAST_TF32;
    case PREC_FP16: return BLASLT_COMPUTE_32F_FAST_16F;
    case PREC_BF16: return BLASLT_COMPUTE_32F_FAST_16BF;
    default: return BLASLT_COMPUTE_32F;
    }
}

// The cudaDataType_t of a tensor type cuBLASLt takes here, -1 for any other.
static int lt_type(DType t) {
    switch (t) {
    case DT_FLOAT: return BLASLT_R_32F;
    case DT_FLOAT16: return BLASLT_R_16F;
    case DT_BFLOAT16: return BLASLT_R_16BF;
    default: return -1;
    }
}

// Bytes per element of a cudaDataType_t of lt_type's.
static uint64_t lt_size(int type) {
    return type == BLASLT_R_32F ? 4 : 2;
}

// The alignment in bytes (a power of two up to PLAN_ALIGN) every matrix of a batch of elements of
// `size` bytes has, given the base is PLAN_ALIGN-aligned: the lowest set bit of its byte offsets
// (half rows of an odd length are only 2-byte aligned, which leaves cuBLASLt its slow kernels).
static uint32_t alignment(int64_t ld, int64_t stride, int32_t batch, uint64_t size) {
    uint64_t a = PLAN_ALIGN;
    uint64_t ldb = size * (uint64_t)ld, sb = batch > 1 ? size * (uint64_t)stride : 0;
    while (a > size && ((ldb % a) || (sb % a)))
        a /= 2;
    return (uint32_t)a;
}

bool blaslt_analyse(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt,
                    BlasLtCall *call) {
    memset(call, 0, sizeof *call);
    Lin L;
    if (!culin_analyse_views(pg, c, &L) || L.conv || L.p->lin.op != LIN_MATMUL)
        return false;
    bool ta_t, tb_t;
    int via_a, via_b;
    int pa = operand_source(pg, c, L.ta, &ta_t, &via_a);
    int pb = operand_source(pg, c, L.tb, &tb_t, &via_b);
    if (pa < 0 || pb < 0)
        return false;
    // Row blocks of a dense A times one shared B are one product with batch * M rows, as
    // culin_analyse folds them for a kernel input; here also when A is read through a view
    // (PyTorch's [1, S, E] -> [S, 1, E] before nn.MultiheadAttention's projection gives S
    // batches of one row, which cuBLASLt would run as S matrix-vector products).
    if (!L.m0 && L.batch > 1 && via_a >= 0 && !ta_t) {
        const Tensor *A = pg->tensors[L.ta], *P = pg->tensors[L.tl];
        bool dense_a = A->rank == P->rank;
        for (int d = 0; d < L.nbd && dense_a; d++)
            dense_a = A->dims[d] == P->dims[d] && L.sb[d] == 0;
        if (dense_a) {
            L.m0 = L.M;
            L.M *= L.batch;
            L.batch = 1;
        }
    }
    const Tensor *O = pg->tensors[L.tl];
    if (L.M > INT32_MAX || L.N > INT32_MAX || L.K > INT32_MAX || L.batch > INT32_MAX)
        return false;
    // Types: A, B and the product of one type (float32, float16 or bfloat16); D the output's,
    // the product's or float32 (the table has no half D of float32 operands).
    DType lin = O->dtype, dt = pg->tensors[c->output]->dtype;
    if (lt_type(lin) < 0 || pg->tensors[L.ta]->dtype != lin || pg->tensors[L.tb]->dtype != lin ||
        (dt != lin && !(dt == DT_FLOAT && lin != DT_FLOAT)))
        return false;
    // Batch: one strided batch per operand, each either dense over the output's batch dims or
    // broadcast (stride 0); the output dense.
    int64_t stride_a = L.M * L.K, stride_b = L.K * L.N;
    if (!L.m0 && L.batch > 1) {
        bool a_dense = true, a_bcast = true, b_dense = true, b_bcast = true;
        int64_t exp = 1;
        for (int d = L.nbd - 1; d >= 0; d--) {
            if (L.bd[d] != 1) {
                a_dense &= L.sa[d] == exp;
                b_dense &= L.sb[d] == exp;
                a_bcast &= L.sa[d] == 0;
                b_bcast &= L.sb[d] == 0;
            }
            exp *= L.bd[d];
        }
        if (!(a_dense || a_bcast) || !(b_dense || b_bcast))
            return false;
        stride_a = a_dense ? stride_a : 0;
        stride_b = b_dense ? stride_b : 0;
    }
    // The other primitives: the transposes found above, then the epilogue, a chain of
    // ELEMWISE primitives each reading the previous value (and perhaps the bias).
    EpiState st = {1.0f, -1, -1, false, false, lin, dt, O};
    int cur = L.tl;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *q = pg->prims[c->prims[i]];
        if (q == L.p || i == via_a || i == via_b)
            continue;
        // D viewed under other dims (the bytes cuBLASLt writes are the reshaped value's).
        if (prim_layout_is_view(pg, q) && q->in[0] == cur) {
            cur = q->out[0];
            st.out = pg->tensors[cur];
            continue;
        }
        if (q->kind != PRIM_ELEMWISE || q->n_out != 1 ||
            !tensor_same_shape(pg->tensors[q->out[0]], st.out) ||
            !value_type_ok(&st, pg->tensors[q->out[0]]->dtype))
            return false;
        bool reads = false;
        for (int j = 0; j < q->n_in; j++)
            reads |= q->in[j] == cur;
        if (!reads || !epi_prim(pg, c, opt, q, cur, L.N, &st))
            return false;
        cur = q->out[0];
    }
    if (cur != c->output)
        return false;
    // A transposed operand's LAYOUT output must feed only the LINEAR (checked above: every
    // other primitive reads the running value or the bias only).
    call->m = (int32_t)L.N;
    call->n = (int32_t)L.M;
    call->k = (int32_t)L.K;
    // cuBLASLt's A = our B: stored K x N row-major (N x K column-major, ld N), or transposed
    // from N x K row-major (K x N column-major, ld K, op T).
    call->trans_a = tb_t ? 1 : 0;
    call->lda = tb_t ? L.K : L.N;
    // cuBLASLt's B = our A: stored M x K row-major (K x M column-major, ld K), or transposed
    // from K x M row-major (M x K column-major, ld M, op T).
    call->trans_b = ta_t ? 1 : 0;
    call->ldb = ta_t ? L.M : L.K;
    call->ldc = L.N;
    call->batch = L.m0 ? 1 : (int32_t)L.batch;
    call->stride_a = call->batch > 1 ? stride_b : 0;
    call->stride_b = call->batch > 1 ? stride_a : 0;
    call->stride_c = call->batch > 1 ? L.M * L.N : 0;
    call->epilogue = st.bias >= 0 ? (st.gelu   ? BLASLT_EPI_GELU_BIAS
                                     : st.relu ? BLASLT_EPI_RELU_BIAS
                                               : BLASLT_EPI_BIAS)
                                  : (st.gelu   ? BLASLT_EPI_GELU
                                     : st.relu ? BLASLT_EPI_RELU
                                               : BLASLT_EPI_NONE);
    int ab = lt_type(lin), cd = lt_type(dt);
    call->compute =
        lin == DT_FLOAT ? compute_type(opt) : BLASLT_COMPUTE(BLASLT_COMPUTE_32F, ab, cd);
    call->alpha = st.alpha;
    call->in_a = pb;
    call->in_b = pa;
    call->in_bias = st.bias >= 0 ? cgen_input_pos(c, st.bias) : -1;
    call->in_res = st.res >= 0 ? cgen_input_pos(c, st.res) : -1;
    call->align_a = alignment(call->lda, call->stride_a, call->batch, lt_size(ab));
    call->align_b = alignment(call->ldb, call->stride_b, call->batch, lt_size(ab));
    call->align_c = alignment(call->ldc, call->stride_c, call->batch, lt_size(cd));
    call->version = blaslt_version();
    return true;
}

int blaslt_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                   const TargetOptions *opt, KernelConfig *out, int k) {
    BlasLtCall call;
    if (k <= 0 || !blaslt_available() || !blaslt_analyse(pg, c, opt, &call))
        return 0;
    return blaslt_configs_of_call(call, hw ? hw->ordinal : 0, out, k);
}

int blaslt_call(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                const TargetOptions *opt, BlasLtCall *call, Err *e) {
    CuBlasLtConfig bc;
    if (!blaslt_config_unpack(cfg, &bc) || !blaslt_analyse(pg, c, opt, call))
        return err_set(e, ST_UNSUPPORTED,
                       "cuBLASLt: candidate %d is not a matmul cuBLASLt computes (config '%s')",
                       c->id, cfg->desc);
    memcpy(call->algo, bc.algo, sizeof call->algo);
    call->workspace = (uint64_t)bc.workspace;
    return ST_OK;
}
