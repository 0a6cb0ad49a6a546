// LSTM, GRU and RNN (ONNX opsets 7-22): shape rules and the reference ops. Needs the inputs'
// shapes; guarantees full ONNX semantics in double precision: three directions, optional B,
// sequence_lens (steps past a sequence's length give zeros in Y and leave the state as it was),
// initial states, peepholes, clip, both layouts, GRU's linear_before_reset, every activation of
// the operators' list, and any subset of the outputs Y, Y_h, Y_c.
#include "rnn.h"

#include "ops.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    RnnActKind kind;
    bool alpha, beta;     // which of activation_alpha / activation_beta the function consumes
    double dalpha, dbeta; // defaults where the lists run out (ONNX Runtime's)
} act_table[] = {
    {"sigmoid", RNN_ACT_SIGMOID, false, false, 0, 0},
    {"tanh", RNN_ACT_TANH, false, false, 0, 0},
    {"relu", RNN_ACT_RELU, false, false, 0, 0},
    {"affine", RNN_ACT_AFFINE, true, true, 0, 0},
    {"leakyrelu", RNN_ACT_LEAKYRELU, true, false, 0.01, 0},
    {"thresholdedrelu", RNN_ACT_THRESHOLDEDRELU, true, false, 0, 0},
    {"scaledtanh", RNN_ACT_SCALEDTANH, true, true, 0, 0},
    {"hardsigmoid", RNN_ACT_HARDSIGMOID, true, true, 0.2, 0.5},
    {"elu", RNN_ACT_ELU, true, false, 1.0, 0},
    {"softsign", RNN_ACT_SOFTSIGN, false, false, 0, 0},
    {"softplus", RNN_ACT_SOFTPLUS, false, false, 0, 0},
};

static bool same_name(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return !*a && !*b;
}

double rnn_act_eval(const RnnAct *a, double x) {
    switch (a->kind) {
    case RNN_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case RNN_ACT_TANH: return tanh(x);
    case RNN_ACT_RELU: return x > 0 ? x : 0.0;
    case RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case RNN_ACT_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
    case RNN_ACT_THRESHOLDEDRELU: return x > a->alpha ? x : 0.0;
    case RNN_ACT_SCALEDTANH: return a->alpha * tanh(a->beta * x);
    case RNN_ACT_HARDSIGMOID: return fmin(fmax(a->alpha * x + a->beta, 0.0), 1.0);
    case RNN_ACT_ELU: return x >= 0 ? x : a->alpha * expm1(x);
    case RNN_ACT_SOFTSIGN: return x / (1.0 + fabs(x));
    case RNN_ACT_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    }
    return x;
}

static bool float_type(DType t) {
    return t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16;
}

// Input i must be present (or absent when optional) with X's dtype and exactly these dims.
static int need_shape(const Graph *g, const Node *n, int i, const char *what, DType dt, int rank,
                      const int64_t *dims, Err *e) {
    const Tensor *t = node_input(g, n, i);
    if (!t)
        return ST_OK;
    char got[160], want[160];
    if (t->dtype != dt)
        return op_err(e, ST_INVALID, n, "input %s must have X's dtype %s, got %s", what,
                      dtype_name(dt), dtype_name(t->dtype));
    bool ok = t->rank == rank;
    for (int d = 0; ok && d < rank; d++)
        ok = t->dims[d] == dims[d];
    if (!ok)
        return op_err(e, ST_INVALID, n, "input %s must have shape %s, got %s", what,
                      shape_str(dims, rank, want, sizeof want),
                      tensor_shape_str(t, got, sizeof got));
    return ST_OK;
}

static int read_activations(const Node *n, RnnSpec *s, Err *e) {
    static const RnnActKind defaults[3][3] = {
        {RNN_ACT_TANH},
        {RNN_ACT_SIGMOID, RNN_ACT_TANH},
        {RNN_ACT_SIGMOID, RNN_ACT_TANH, RNN_ACT_TANH},
    };
    const Attr *a = node_attr(n, "activations");
    const float *alphas = NULL, *betas = NULL;
    int n_alpha = node_attr_floats(n, "activation_alpha", &alphas);
    int n_beta = node_attr_floats(n, "activation_beta", &betas);
    int ia = 0, ib = 0;
    if (!a) {
        for (int d = 0; d < s->dirs; d++)
            for (int k = 0; k < s->n_act; k++)
                s->act[d][k] = (RnnAct){defaults[s->cell][k], 0, 0};
        return ST_OK;
    }
    if (a->type != AT_STRINGS)
        return op_err(e, ST_INVALID, n, "attribute 'activations' must be a list of strings, got %s",
                      attr_type_name(a->type));
    if (a->n != s->n_act * s->dirs)
        return op_err(e, ST_INVALID, n,
                      "attribute 'activations' has %d names; %s with %d direction%s needs %d", a->n,
                      n->op, s->dirs, s->dirs > 1 ? "s" : "", s->n_act * s->dirs);
    for (int k = 0; k < a->n; k++) {
        size_t j = 0;
        while (j < ORCH_COUNT(act_table) && !same_name(act_table[j].name, a->strings[k]))
            j++;
        if (j == ORCH_COUNT(act_table))
            return op_err(e, ST_UNSUPPORTED, n,
                          "attribute 'activations': '%s' is not one of Sigmoid, Tanh, Relu, "
                          "Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                          "Softsign, Softplus",
                          a->strings[k]);
        RnnAct act = {act_table[j].kind, act_table[j].dalpha, act_table[j].dbeta};
        // The alpha and beta lists are consumed in order by the functions that take them.
        if (act_table[j].alpha && ia < n_alpha)
            act.alpha = alphas[ia++];
        if (act_table[j].beta && ib < n_beta)
            act.beta = betas[ib++];
        s->act[k / s->n_act][k % s->n_act] = act;
    }
    return ST_OK;
}

int rnn_spec(const Graph *g, const Node *n, RnnSpec *s, Err *e) {
    memset(s, 0, sizeof *s);
    if (strcmp(n->op, "LSTM") == 0)
        *s = (RnnSpec){.cell = RNN_CELL_LSTM, .gates = 4, .n_act = 3};
    else if (strcmp(n->op, "GRU") == 0)
        *s = (RnnSpec){.cell = RNN_CELL_GRU, .gates = 3, .n_act = 2};
    else
        *s = (RnnSpec){.cell = RNN_CELL_RNN, .gates = 1, .n_act = 1};
    if (n->opset < 7)
        return op_err(e, ST_UNSUPPORTED, n,
                      "opset %d (before 7, with 'output_sequence') is not supported", n->opset);
    const char *dir = node_attr_s(n, "direction", "forward");
    if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
        s->dirs = 1;
        s->reverse = dir[0] == 'r';
    } else if (strcmp(dir, "bidirectional") == 0) {
        s->dirs = 2;
    } else {
        return op_err(e, ST_INVALID, n,
                      "attribute 'direction' is '%s'; it must be forward, reverse or bidirectional",
                      dir);
    }
    s->layout = (int)node_attr_i(n, "layout", 0);
    if (s->layout != 0 && s->layout != 1)
        return op_err(e, ST_INVALID, n, "attribute 'layout' must be 0 or 1, got %d", s->layout);
    const Attr *clip = node_attr(n, "clip");
    if (clip) {
        s->has_clip = true;
        s->clip = node_attr_f(n, "clip", 0);
        if (!(s->clip >= 0))
            return op_err(e, ST_INVALID, n, "attribute 'clip' must be a non-negative number");
    }
    if (s->cell == RNN_CELL_LSTM && node_attr_i(n, "input_forget", 0) != 0)
        return op_err(e, ST_UNSUPPORTED, n,
                      "attribute 'input_forget' = 1 (coupled input and forget gates) is not "
                      "supported");
    if (s->cell == RNN_CELL_GRU) {
        int64_t lbr = node_attr_i(n, "linear_before_reset", 0);
        if (lbr != 0 && lbr != 1)
            return op_err(e, ST_INVALID, n, "attribute 'linear_before_reset' must be 0 or 1");
        s->linear_before_reset = lbr == 1;
    }
    if (node_attr(n, "output_sequence"))
        return op_err(e, ST_UNSUPPORTED, n,
                      "attribute 'output_sequence' (opset 1) is not supported");

    const Tensor *X = node_input(g, n, RNN_IN_X), *W = node_input(g, n, RNN_IN_W),
                 *R = node_input(g, n, RNN_IN_R);
    char sx[160], sw[160], sr[160];
    if (!float_type(X->dtype))
        return op_err(e, ST_INVALID, n, "X must be float16, float32 or double, got %s",
                      dtype_name(X->dtype));
    if (X->rank != 3 || W->rank != 3 || R->rank != 3)
        return op_err(e, ST_INVALID, n, "X, W and R must be 3-D, got %s, %s and %s",
                      tensor_shape_str(X, sx, sizeof sx), tensor_shape_str(W, sw, sizeof sw),
                      tensor_shape_str(R, sr, sizeof sr));
    s->T = X->dims[s->layout ? 1 : 0];
    s->B = X->dims[s->layout ? 0 : 1];
    s->I = X->dims[2];
    s->H = R->dims[2];
    int64_t hs = node_attr_i(n, "hidden_size", s->H);
    if (hs != s->H || s->H <= 0)
        return op_err(e, ST_INVALID, n,
                      "attribute 'hidden_size' is %lld but R %s gives a hidden size of %lld",
                      (long long)hs, tensor_shape_str(R, sr, sizeof sr), (long long)s->H);
    int64_t D = s->dirs, GH = s->gates * s->H;
    int64_t wd[3] = {D, GH, s->I}, rd[3] = {D, GH, s->H}, bd[2] = {D, 2 * GH},
            pd[2] = {D, 3 * s->H};
    int64_t hd[3] = {D, s->B, s->H};
    if (s->layout)
        hd[0] = s->B, hd[1] = D;
    int rc;
    if ((rc = need_shape(g, n, RNN_IN_W, "W", X->dtype, 3, wd, e)) ||
        (rc = need_shape(g, n, RNN_IN_R, "R", X->dtype, 3, rd, e)) ||
        (rc = need_shape(g, n, RNN_IN_B, "B", X->dtype, 2, bd, e)) ||
        (rc = need_shape(g, n, RNN_IN_H0, "initial_h", X->dtype, 3, hd, e)))
        return rc;
    if (s->cell == RNN_CELL_LSTM &&
        ((rc = need_shape(g, n, RNN_IN_C0, "initial_c", X->dtype, 3, hd, e)) ||
         (rc = need_shape(g, n, RNN_IN_P, "P", X->dtype, 2, pd, e))))
        return rc;
    const Tensor *L = node_input(g, n, RNN_IN_SEQ);
    if (L) {
        if (L->dtype != DT_INT32 || L->rank != 1 || L->dims[0] != s->B)
            return op_err(e, ST_INVALID, n,
                          "sequence_lens must be int32 of shape [%lld], got %s %s", (long long)s->B,
                          dtype_name(L->dtype), tensor_shape_str(L, sx, sizeof sx));
        if (L->kind == TK_CONST)
            for (int64_t b = 0; b < s->B; b++) {
                int64_t v = elem_get_i64(L->dtype, L->data, b);
                if (v < 0 || v > s->T)
                    return op_err(e, ST_INVALID, n,
                                  "sequence_lens[%lld] = %lld is outside [0, %lld] (the sequence "
                                  "length)",
                                  (long long)b, (long long)v, (long long)s->T);
            }
    }
    return read_activations(n, s, e);
}

static int infer_rnn(Graph *g, Node *n, Err *e) {
    RnnSpec s;
    int rc = rnn_spec(g, n, &s, e);
    if (rc)
        return rc;
    if (s.cell != RNN_CELL_LSTM && n->n_out > 2)
        return op_err(e, ST_INVALID, n, "%s has at most 2 outputs (Y, Y_h), got %d", n->op,
                      n->n_out);
    DType dt = node_input(g, n, RNN_IN_X)->dtype;
    int64_t D = s.dirs;
    int64_t y[4] = {s.T, D, s.B, s.H}, yb[4] = {s.B, s.T, D, s.H};
    int64_t h[3] = {D, s.B, s.H}, hb[3] = {s.B, D, s.H};
    for (int j = 0; j < n->n_out; j++) {
        Tensor *o = node_output(g, n, j);
        if (!o)
            continue;
        if (j == 0)
            tensor_set_shape(o, dt, 4, s.layout ? yb : y);
        else
            tensor_set_shape(o, dt, 3, s.layout ? hb : h);
    }
    return ST_OK;
}

// Input i as doubles (NULL when absent).
static double *to_f64(const OpRun *r, int i) {
    if (i >= r->n->n_in || !r->in[i])
        return NULL;
    int64_t k = tensor_numel(r->in[i]);
    double *v = xmalloc(sizeof(double) * (size_t)(k + 1));
    for (int64_t j = 0; j < k; j++)
        v[j] = elem_get_f64(r->in[i]->dtype, r->x[i], j);
    return v;
}

static double clipped(const RnnSpec *s, double x) {
    return s->has_clip ? fmin(fmax(x, -s->clip), s->clip) : x;
}

static int run_rnn(const OpRun *r, Err *e) {
    RnnSpec s;
    int rc = rnn_spec(r->g, r->n, &s, e);
    if (rc)
        return rc;
    int64_t T = s.T, B = s.B, I = s.I, H = s.H, D = s.dirs, G = s.gates, GH = G * H;
    bool lstm = s.cell == RNN_CELL_LSTM;
    double *X = to_f64(r, RNN_IN_X), *W = to_f64(r, RNN_IN_W), *R = to_f64(r, RNN_IN_R);
    double *Bv = to_f64(r, RNN_IN_B), *H0 = to_f64(r, RNN_IN_H0);
    double *C0 = lstm ? to_f64(r, RNN_IN_C0) : NULL, *P = lstm ? to_f64(r, RNN_IN_P) : NULL;
    int64_t *len = xmalloc(sizeof(int64_t) * (size_t)(B + 1));
    for (int64_t b = 0; b < B; b++) {
        len[b] = T;
        if (r->n->n_in > RNN_IN_SEQ && r->in[RNN_IN_SEQ])
            len[b] = elem_get_i64(DT_INT32, r->x[RNN_IN_SEQ], b);
        if (len[b] < 0 || len[b] > T) {
            rc = op_err(e, ST_INVALID, r->n,
                        "sequence_lens[%lld] = %lld is outside [0, %lld] (the sequence length)",
                        (long long)b, (long long)len[b], (long long)T);
            break;
        }
    }
    const Tensor *to[3] = {NULL, NULL, NULL};
    for (int j = 0; j < r->n->n_out && j < 3; j++)
        to[j] = r->out[j];
    double *h = xmalloc(sizeof(double) * (size_t)(B * H + 1));
    double *c = xmalloc(sizeof(double) * (size_t)(B * H + 1));
    double *hn = xmalloc(sizeof(double) * (size_t)(H + 1));
    double *pre = xmalloc(sizeof(double) * (size_t)(GH + 1));
    double *rh = xmalloc(sizeof(double) * (size_t)(H + 1));
    for (int64_t d = 0; d < D && rc == ST_OK; d++) {
        const double *Wd = W + d * GH * I, *Rd = R + d * GH * H;
        const double *Wb = Bv ? Bv + d * 2 * GH : NULL, *Rb = Bv ? Bv + d * 2 * GH + GH : NULL;
        const double *Pd = P ? P + d * 3 * H : NULL;
        const RnnAct *act = s.act[d];
        bool rev = D == 2 ? d == 1 : s.reverse;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < H; j++) {
                int64_t k = s.layout ? (b * D + d) * H + j : (d * B + b) * H + j;
                h[b * H + j] = H0 ? H0[k] : 0.0;
                c[b * H + j] = C0 ? C0[k] : 0.0;
            }
        for (int64_t step = 0; step < T; step++) {
            int64_t t = rev ? T - 1 - step : step;
            for (int64_t b = 0; b < B; b++) {
                double *hb = h + b * H, *cb = c + b * H;
                bool live = t < len[b];
                if (live) {
                    const double *x = X + (s.layout ? b * T + t : t * B + b) * I;
                    // pre = x W^T + Wb (+ h R^T + Rb, except GRU's h gate, which needs r first)
                    for (int64_t q = 0; q < GH; q++) {
                        double acc = Wb ? Wb[q] : 0.0;
                        for (int64_t i = 0; i < I; i++)
                            acc += x[i] * Wd[q * I + i];
                        bool gru_h = s.cell == RNN_CELL_GRU && q >= 2 * H;
                        if (!gru_h) {
                            if (Rb)
                                acc += Rb[q];
                            for (int64_t k = 0; k < H; k++)
                                acc += hb[k] * Rd[q * H + k];
                        }
                        pre[q] = acc;
                    }
                    if (s.cell == RNN_CELL_RNN) {
                        for (int64_t j = 0; j < H; j++)
                            hn[j] = rnn_act_eval(&act[0], clipped(&s, pre[j]));
                    } else if (s.cell == RNN_CELL_GRU) {
                        // z in pre[0..H), r in rh: the reset form needs every r before the product.
                        for (int64_t j = 0; j < H; j++) {
                            pre[j] = rnn_act_eval(&act[0], clipped(&s, pre[j]));
                            rh[j] = rnn_act_eval(&act[0], clipped(&s, pre[H + j]));
                        }
                        for (int64_t j = 0; j < H; j++) {
                            const double *Rh = Rd + (2 * H + j) * H;
                            double acc = 0.0;
                            if (s.linear_before_reset) {
                                for (int64_t k = 0; k < H; k++)
                                    acc += hb[k] * Rh[k];
                                acc = rh[j] * (acc + (Rb ? Rb[2 * H + j] : 0.0));
                            } else {
                                for (int64_t k = 0; k < H; k++)
                                    acc += rh[k] * hb[k] * Rh[k];
                                acc += Rb ? Rb[2 * H + j] : 0.0;
                            }
                            double hh = rnn_act_eval(&act[1], clipped(&s, pre[2 * H + j] + acc));
                            hn[j] = (1.0 - pre[j]) * hh + pre[j] * hb[j];
                        }
                    } else {
                        for (int64_t j = 0; j < H; j++) {
                            double cp = cb[j];
                            double gi = pre[j] + (Pd ? Pd[j] * cp : 0.0);
                            double gf = pre[2 * H + j] + (Pd ? Pd[2 * H + j] * cp : 0.0);
                            double iv = rnn_act_eval(&act[0], clipped(&s, gi));
                            double fv = rnn_act_eval(&act[0], clipped(&s, gf));
                            double gv = rnn_act_eval(&act[1], clipped(&s, pre[3 * H + j]));
                            double cn = fv * cp + iv * gv;
                            double go = pre[H + j] + (Pd ? Pd[H + j] * cn : 0.0);
                            double ov = rnn_act_eval(&act[0], clipped(&s, go));
                            rh[j] = cn;
                            hn[j] = ov * rnn_act_eval(&act[2], cn);
                        }
                        memcpy(cb, rh, sizeof(double) * (size_t)H);
                    }
                    memcpy(hb, hn, sizeof(double) * (size_t)H);
                }
                if (to[0])
                    for (int64_t j = 0; j < H; j++) {
                        int64_t k = s.layout ? ((b * T + t) * D + d) * H + j
                                             : ((t * D + d) * B + b) * H + j;
                        elem_set_f64(to[0]->dtype, r->y[0], k, live ? hb[j] : 0.0);
                    }
            }
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < H; j++) {
                int64_t k = s.layout ? (b * D + d) * H + j : (d * B + b) * H + j;
                if (to[1])
                    elem_set_f64(to[1]->dtype, r->y[1], k, h[b * H + j]);
                if (to[2])
                    elem_set_f64(to[2]->dtype, r->y[2], k, c[b * H + j]);
            }
    }
    free(X), free(W), free(R), free(Bv), free(H0), free(C0), free(P);
    free(len), free(h), free(c), free(hn), free(pre), free(rh);
    return rc;
}

const OpDef ops_rnn[] = {
    {"LSTM", infer_rnn, run_rnn, 3, 8, 0, 3, 0},
    {"GRU", infer_rnn, run_rnn, 3, 6, 0, 2, 0},
    {"RNN", infer_rnn, run_rnn, 3, 6, 0, 2, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0},
};
