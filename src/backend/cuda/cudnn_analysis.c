// The cuDNN side of candidate analysis (cudnn.h): whether a candidate is one convolution with an
// epilogue cudnnConvolutionBiasActivationForward computes exactly (on top of the linear
// emitter's culin_analyse), and the candidate-level configs and calls. Compile time only: a
// session runs the calls an artefact recorded (cudnn.c).
#include "cudnn.h"

#include "cugen_lin_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- the analysis ----

// Whether a tensor of t's shape, broadcast against the output of rank R (4; 3 for a 1-D
// convolution), holds one value per channel (axis 1) and C values in all: [C, 1, 1] or
// [1, C, 1, 1] numpy-aligned with a rank-4 output ([C, 1] or [1, C, 1] with a rank-3 one); any
// shape of one element when C is 1.
static bool channel_shaped(const Tensor *t, int64_t C, int R) {
    if (t->rank > R || tensor_numel(t) != C)
        return C == 1 && tensor_numel(t) == 1 && t->rank <= R;
    for (int d = 0; d < t->rank; d++) {
        int axis = d + R - t->rank;
        if (t->dims[d] != (axis == 1 ? C : 1))
            return false;
    }
    return t->rank >= R - 1 || C == 1;
}

// Where the bias data of tensor t comes from: a constant candidate input of channel shape, or a
// LAYOUT of the candidate reshaping a constant candidate input of C elements into channel shape
// (a reshape keeps the element order; its primitive index in c goes to *via); of type dt, the
// convolution's. The input's tensor id, or -1.
static int bias_source(const PrimGraph *pg, const Candidate *c, int t, int64_t C, int R, DType dt,
                       int *via) {
    *via = -1;
    const Tensor *T = pg->tensors[t];
    if (T->dtype != dt || !channel_shaped(T, C, R))
        return -1;
    if (cgen_input_pos(c, t) >= 0)
        return pg_is_const(pg, t) ? t : -1;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        if (p->kind != PRIM_LAYOUT || p->n_out != 1 || p->out[0] != t)
            continue;
        const LayoutParams *lp = &p->lay;
        if (lp->concat || lp->n_stages != 1 || p->n_in != 1 || lp->stages[0].kind != LS_RESHAPE)
            return -1;
        int src = p->in[0];
        const Tensor *S = pg->tensors[src];
        if (cgen_input_pos(c, src) < 0 || !pg_is_const(pg, src) || S->dtype != dt ||
            tensor_numel(S) != C)
            return -1;
        *via = i;
        return src;
    }
    return -1;
}

// The epilogue's value so far: [relu](alpha * conv [+ z] [+ bias]).
typedef struct EpiState {
    float alpha;
    int bias, bias_via; // the bias data's tensor (-1: none) and the LAYOUT it went through
    int z;              // the residual's tensor, -1 none
    bool relu;
    DType dt;    // the type of every tensor the call reads or writes: X's (one per configuration)
    bool *used;  // per candidate primitive: a LAYOUT some operand is read through
    bool z_nhwc; // z read through the transpose of an NHWC input
} EpiState;

// NCHW's axes in an NHWC tensor (a read of NHWC data as NCHW), and NHWC's in an NCHW one.
static const int NCHW_OF_NHWC[4] = {0, 3, 1, 2}, NHWC_OF_NCHW[4] = {0, 2, 3, 1};

static bool perm_is(const int p[4], const int q[4]) {
    return memcmp(p, q, sizeof(int) * 4) == 0;
}

static bool perm_identity(const int p[4]) {
    static const int id[4] = {0, 1, 2, 3};
    return perm_is(p, id);
}

// Rank-4 tensor t seen up through the candidate's LAYOUT primitives made of transposes alone
// (single input and output each): the tensor where that walk stops (a candidate input, or one
// another kind of primitive of c computes) and the composite permutation, t's axis d being the
// stop's axis perm[d]. The LAYOUTs walked are marked in used[] (indices into c->prims).
static int through_transposes(const PrimGraph *pg, const Candidate *c, int t, int perm[4],
                              bool *used) {
    for (int d = 0; d < 4; d++)
        perm[d] = d;
    if (pg->tensors[t]->rank != 4)
        return t;
    for (int guard = 0; guard < c->n_prims; guard++) {
        int at = -1;
        for (int i = 0; i < c->n_prims && at < 0; i++) {
            const Prim *p = pg->prims[c->prims[i]];
            if (p->n_out == 1 && p->out[0] == t)
                at = i;
        }
        if (at < 0)
            return t;
        const Prim *p = pg->prims[c->prims[at]];
        if (p->kind != PRIM_LAYOUT || p->lay.concat || p->n_in != 1 || p->lay.n_stages < 1)
            return t;
        for (int s = 0; s < p->lay.n_stages; s++)
            if (p->lay.stages[s].kind != LS_TRANSPOSE || p->lay.stages[s].in_rank != 4)
                return t;
        for (int s = 0; s < p->lay.n_stages; s++) {
            int next[4];
            for (int d = 0; d < 4; d++)
                next[d] = p->lay.stages[s].perm[perm[d]];
            memcpy(perm, next, sizeof next);
        }
        used[at] = true;
        t = p->in[0];
    }
    return t;
}

// Whether the running value may be computed in type t: the tensors' or, with half tensors,
// float32 (the storage pass keeps elementwise arithmetic in float32, ending with a CAST to half).
// cuDNN computes the epilogue in float32 and rounds once to Y's type; the interpreter's half
// roundings in between are within the half check's tolerance.
static bool value_type_ok(const EpiState *st, DType t) {
    return t == st->dt || (t == DT_FLOAT && st->dt != DT_FLOAT);
}

// An immediate as an instruction of type t sees it (prim.h: converted to the operand type).
static double imm_as(DType t, double v) {
    float buf = 0;
    elem_set_f64(t, &buf, 0, v);
    return elem_get_f64(t, &buf, 0);
}

enum { V_BAD, V_VAL, V_BIAS, V_Z, V_IMM };

// One ELEMWISE primitive applied to the running value `cur` (its output value is `cur` after
// the call): true when its program is a sequence of the steps cuDNN's fused call does, in an
// order that computes the same value: alpha first, then the bias and z in either order, ReLU
// last.
static bool epi_prim(const PrimGraph *pg, const Candidate *c, const Prim *q, int cur,
                     const Tensor *Y, EpiState *st) {
    int kind[64], tens[64], via[64];
    double imm[64];
    int last = -1; // the instruction holding the running value; -1: still the input `cur`
    const EwProgram *pr = &q->ew;
    if (pr->n <= 0 || pr->n > 64)
        return false;
    int64_t C = Y->dims[1];
    for (int i = 0; i < pr->n; i++) {
        const EwInstr *in = &pr->code[i];
        int ar = ew_op_arity(in->op);
        int k[3] = {V_BAD, V_BAD, V_BAD}, tt[3] = {-1, -1, -1}, vv[3] = {-1, -1, -1};
        double v[3] = {0, 0, 0};
        if (!value_type_ok(st, in->dtype) || ar < 1 || ar > 3)
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
                tt[a] = tens[g->index];
                vv[a] = via[g->index];
            } else {
                if (g->index < 0 || g->index >= q->n_in)
                    return false;
                int t = q->in[g->index];
                const Tensor *T = pg->tensors[t];
                int bv, src;
                if (t == cur) {
                    if (last != -1)
                        return false;
                    k[a] = V_VAL;
                } else if ((src = bias_source(pg, c, t, C, Y->rank, st->dt, &bv)) >= 0) {
                    k[a] = V_BIAS;
                    tt[a] = src;
                    vv[a] = bv;
                } else if (cgen_input_pos(c, t) >= 0 && T->dtype == st->dt &&
                           tensor_same_shape(T, Y)) {
                    k[a] = V_Z;
                    tt[a] = t;
                } else if (T->dtype == st->dt && tensor_same_shape(T, Y)) {
                    // z read through the transpose of an NHWC candidate input.
                    int zp[4], zs = through_transposes(pg, c, t, zp, st->used);
                    if (zs == t || cgen_input_pos(c, zs) < 0 || !perm_is(zp, NCHW_OF_NHWC))
                        return false;
                    k[a] = V_Z;
                    tt[a] = zs;
                    st->z_nhwc = true;
                } else {
                    return false;
                }
            }
        }
        int out = V_BAD, ot = -1, ov = -1;
        bool val_imm = (k[0] == V_VAL && k[1] == V_IMM) || (k[0] == V_IMM && k[1] == V_VAL);
        double the_imm = k[0] == V_IMM ? v[0] : v[1];
        int other = k[0] == V_VAL ? 1 : 0; // ADD's operand other than the running value
        switch (in->op) {
        case EW_COPY:
            out = k[0];
            ot = tt[0];
            ov = vv[0];
            break;
        case EW_MUL:
            // alpha * conv before everything else.
            if (val_imm && st->bias < 0 && st->z < 0 && !st->relu) {
                st->alpha *= (float)imm_as(in->dtype, the_imm);
                out = V_VAL;
            }
            break;
        case EW_ADD:
            if ((k[0] == V_VAL) == (k[1] == V_VAL) || st->relu)
                break;
            if (k[other] == V_BIAS && st->bias < 0) {
                st->bias = tt[other];
                st->bias_via = vv[other];
                out = V_VAL;
            } else if (k[other] == V_Z && st->z < 0) {
                st->z = tt[other];
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
            // Between the half type and float32 only (checked above): the value stays cuDNN's
            // float32 one until Y.
            if (k[0] == V_VAL && st->dt != DT_FLOAT)
                out = V_VAL;
            break;
        case EW_MAX:
            if (val_imm && the_imm == 0 && !st->relu) {
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
        tens[i] = ot;
        via[i] = ov;
        if (out == V_VAL)
            last = i;
    }
    // Each step used the value once, in order; the program's value is the state's.
    return kind[pr->n - 1] == V_VAL && last == pr->n - 1;
}

// The cudnnDataType_t of a tensor type cuDNN takes here, -1 for any other.
static int dnn_type(DType t) {
    switch (t) {
    case DT_FLOAT: return DNN_DATA_FLOAT;
    case DT_FLOAT16: return DNN_DATA_HALF;
    case DT_BFLOAT16: return DNN_DATA_BFLOAT16;
    default: return -1;
    }
}

// The math type the heuristics are asked with (each result may name its own): half tensors are
// tensor-core work whatever the precision says.
static int query_math(const TargetOptions *opt, int dtype) {
    return cugen_prec_of(opt, DT_FLOAT) == PREC_FP32 && dtype == DNN_DATA_FLOAT
               ? DNN_MATH_FMA
               : DNN_MATH_TENSOR_OP;
}

static bool fits_int(int64_t v) {
    return v > 0 && v <= INT32_MAX;
}

bool dnn_analyse(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt, DnnCall *call) {
    memset(call, 0, sizeof *call);
    if (c->n_prims < 1 || c->n_prims > 64)
        return false;
    bool used[64] = {false};
    // Y written channels-last: the candidate ends in transposes of the epilogue's value to NHWC.
    // The rest (the core) is then analysed as a candidate ending at that value.
    int operm[4], ysrc = through_transposes(pg, c, c->output, operm, used);
    bool y_nhwc = ysrc != c->output;
    if (y_nhwc && !perm_is(operm, NHWC_OF_NCHW))
        return false;
    int core_prims[64], n_core = 0;
    for (int i = 0; i < c->n_prims; i++)
        if (!used[i])
            core_prims[n_core++] = c->prims[i];
    Candidate core = *c;
    core.prims = core_prims;
    core.n_prims = n_core;
    core.output = ysrc;
    Lin L;
    // 2-D convolutions; and 1-D ones (NCL) as 2-D ones of height 1, which cuDNN's descriptors
    // take as they are: the same bytes.
    if (!culin_analyse(pg, &core, &L) || !L.conv || L.p->lin.op != LIN_CONV ||
        (L.S != 2 && (L.S != 1 || y_nhwc)))
        return false;
    // The geometry as 2-D: (height, width), a 1-D convolution's on the width.
    const LinearParams *lp = &L.p->lin;
    int64_t in2[2], k2[2], st2[2], dil2[2], pad2[2], pe2[2], out2[2];
    for (int d = 0; d < 2; d++) {
        int a = d - (2 - L.S); // L's axis, -1 for a 1-D convolution's height
        in2[d] = a < 0 ? 1 : L.in[a];
        k2[d] = a < 0 ? 1 : L.k[a];
        st2[d] = a < 0 ? 1 : L.st[a];
        dil2[d] = a < 0 ? 1 : L.dil[a];
        pad2[d] = a < 0 ? 0 : L.pad[a];
        pe2[d] = a < 0 ? 0 : lp->pad_end[a];
        out2[d] = a < 0 ? 1 : L.out[a];
    }
    // X read in place (NCHW), or through the transpose of an NHWC candidate input; W a constant
    // read in place (KCRS), or through the transpose of a KRSC constant (the library reads both
    // as they are stored).
    int xperm[4], wperm[4];
    int xsrc = through_transposes(pg, c, L.ta, xperm, used);
    int wsrc = through_transposes(pg, c, L.tb, wperm, used);
    bool x_nhwc = !perm_identity(xperm);
    if (cgen_input_pos(c, xsrc) < 0 || (x_nhwc && !perm_is(xperm, NCHW_OF_NHWC)) ||
        x_nhwc != y_nhwc)
        return false;
    if (cgen_input_pos(c, wsrc) < 0 || !pg_is_const(pg, wsrc) ||
        (!perm_identity(wperm) && !perm_is(wperm, NCHW_OF_NHWC)))
        return false;
    const Tensor *X = pg->tensors[L.ta], *W = pg->tensors[L.tb], *Y = pg->tensors[L.tl];
    if (!fits_int(tensor_numel(X)) || !fits_int(tensor_numel(W)) || !fits_int(tensor_numel(Y)))
        return false;
    // The filter's bytes: KRSC where read through the transpose; where C/groups or R x S is 1
    // KCRS is the same order, described as the data's layout. (Mixed layouts, NCHW data with a
    // KRSC filter after pass_channels_last, are offered too: the heuristics and the lab decide.)
    bool same_bytes = W->dims[1] == 1 || k2[0] * k2[1] == 1;
    bool w_krsc = same_bytes ? x_nhwc : !perm_identity(wperm);
    // One type for every tensor of the call (cuDNN's FLOAT, PSEUDO_HALF and PSEUDO_BFLOAT16
    // configurations): no float32 Y from half operands (such a candidate, the CAST to a model
    // output, is the generated kernels').
    DType dt = X->dtype;
    if (dnn_type(dt) < 0 || W->dtype != dt || Y->dtype != dt || pg->tensors[c->output]->dtype != dt)
        return false;
    // cuDNN pads both sides by pad_begin: the same windows whenever it gives the same output
    // size (windows start at the same places; whatever lies past the input is zero either way).
    for (int d = 0; d < 2; d++) {
        int64_t span = dil2[d] * (k2[d] - 1) + 1, padded = in2[d] + 2 * pad2[d];
        if (pad2[d] < 0 || pe2[d] < 0 || st2[d] < 1 || dil2[d] < 1 || padded < span ||
            (padded - span) / st2[d] + 1 != out2[d] || !fits_int(pad2[d] + 1) ||
            !fits_int(st2[d]) || !fits_int(dil2[d]))
            return false;
    }
    // The other primitives: perhaps LAYOUTs reshaping the bias, then the epilogue, a chain of
    // ELEMWISE primitives each reading the previous value (and perhaps the bias or z).
    EpiState st = {1.0f, -1, -1, -1, false, dt, used, false};
    int cur = L.tl;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *q = pg->prims[c->prims[i]];
        if (used[i])
            continue; // a transpose an operand or Y goes through
        if (q == L.p || q->kind == PRIM_LAYOUT)
            continue; // a LAYOUT counts only as the bias's reshape (checked below)
        if (q->kind != PRIM_ELEMWISE || q->n_out != 1 ||
            !tensor_same_shape(pg->tensors[q->out[0]], Y) ||
            !value_type_ok(&st, pg->tensors[q->out[0]]->dtype))
            return false;
        bool reads = false;
        for (int j = 0; j < q->n_in; j++)
            reads |= q->in[j] == cur;
        if (!reads || !epi_prim(pg, c, q, cur, Y, &st))
            return false;
        cur = q->out[0];
    }
    if (cur != ysrc || (st.z >= 0 && st.z_nhwc != x_nhwc))
        return false;
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_LAYOUT && i != st.bias_via && !used[i])
            return false;
    // cudnnConvolutionBiasActivationForward needs a bias for a z or a ReLU.
    if ((st.relu || st.z >= 0) && st.bias < 0)
        return false;
    call->n = (int32_t)L.NI;
    call->c = (int32_t)L.C;
    call->h = (int32_t)in2[0];
    call->w = (int32_t)in2[1];
    call->k = (int32_t)L.OC;
    call->r = (int32_t)k2[0];
    call->s = (int32_t)k2[1];
    call->groups = (int32_t)L.G;
    for (int d = 0; d < 2; d++) {
        call->pad[d] = (int32_t)pad2[d];
        call->stride[d] = (int32_t)st2[d];
        call->dil[d] = (int32_t)dil2[d];
    }
    call->p = (int32_t)out2[0];
    call->q = (int32_t)out2[1];
    call->epilogue = (st.bias >= 0 ? DNN_EPI_BIAS : 0) | (st.relu ? DNN_EPI_RELU : 0) |
                     (st.z >= 0 ? DNN_EPI_Z : 0) | (x_nhwc ? DNN_LAYOUT_NHWC : 0) |
                     (w_krsc ? DNN_FILTER_KRSC : 0);
    call->alpha = st.alpha;
    call->math = DNN_MATH(query_math(opt, dnn_type(dt)), dnn_type(dt));
    call->algo = -1;
    call->in_x = cgen_input_pos(c, xsrc);
    call->in_w = cgen_input_pos(c, wsrc);
    call->in_bias = st.bias >= 0 ? cgen_input_pos(c, st.bias) : -1;
    call->in_z = st.z >= 0 ? cgen_input_pos(c, st.z) : -1;
    call->version = dnn_version();
    return true;
}

int dnn_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, const TargetOptions *opt,
                KernelConfig *out, int k) {
    DnnCall call;
    if (k <= 0 || !dnn_available() || !dnn_analyse(pg, c, opt, &call))
        return 0;
    return dnn_configs_of_call(call, hw ? hw->ordinal : 0, opt, out, k);
}

int dnn_call(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
             const TargetOptions *opt, DnnCall *call, Err *e) {
    CuDnnConfig dc;
    if (!dnn_config_unpack(cfg, &dc) || !dnn_analyse(pg, c, opt, call) || dc.algo < 0 ||
        dc.algo >= DNN_ALGO_COUNT || dc.math < DNN_MATH_DEFAULT || dc.math > DNN_MATH_FMA ||
        dc.workspace < 0)
        return err_set(e, ST_UNSUPPORTED,
                       "cuDNN: candidate %d is not a convolution cuDNN computes (config '%s')",
                       c->id, cfg->desc);
    call->algo = (int32_t)dc.algo;
    call->math = DNN_MATH((int32_t)dc.math, DNN_DATA_TYPE(call->math));
    call->workspace = (uint64_t)dc.workspace;
    return ST_OK;
}
