// Fission rules for LSTM, GRU and RNN: the recurrence unrolled over the static sequence length.
// Needs the node validated by src/ops/rnn.c (rnn_spec). Guarantees, per direction, one LINEAR
// for X W^T over every step at once (with both biases folded in, as cuDNN does), then per step
// the recurrent product with H, the gate math as ELEMWISE primitives on slices of the gate block
// and, with sequence_lens, a select that keeps the state and zeroes Y past each sequence's end;
// Y is the concat of the steps (a tree of concats of at most 32). The graph grows linearly with
// the sequence length.
#include "fission.h"

#include "../ops/rnn.h"

#include <stdlib.h>
#include <string.h>

// x[.., start : start + len, ..] along one axis.
static int slice_axis(PB *b, int x, int axis, int64_t start, int64_t len) {
    const Tensor *t = pb_t(b, x);
    int64_t st[ORCH_MAX_RANK] = {0}, step[ORCH_MAX_RANK], dims[ORCH_MAX_RANK];
    for (int d = 0; d < t->rank; d++) {
        step[d] = 1;
        dims[d] = t->dims[d];
    }
    st[axis] = start;
    dims[axis] = len;
    return pb_slice(b, x, st, step, dims);
}

static int reshape2(PB *b, int x, int64_t d0, int64_t d1) {
    int64_t d[2] = {d0, d1};
    return pb_reshape(b, x, 2, d);
}

// a + c where either may be absent (-1: a zero).
static int add_opt(PB *b, int a, int c) {
    return a < 0 ? c : c < 0 ? a : pb_ew2(b, EW_ADD, a, c);
}

// expm1(x) = tanh(x/2) * (exp(x) + 1): accurate near 0, where exp(x) - 1 cancels.
static int expm1_of(PB *b, int x) {
    int t = pb_ew1(b, EW_TANH, pb_ew2i(b, EW_MUL, x, 0.5));
    return pb_ew2(b, EW_MUL, t, pb_ew2i(b, EW_ADD, pb_ew1(b, EW_EXP, x), 1.0));
}

typedef struct Rnn {
    FissionCtx *fc;
    PB *b;
    const RnnSpec *s;
    DType dt;
    int zero; // a scalar 0 of the dtype
} Rnn;

static int act_noclip(Rnn *r, const RnnAct *a, int x) {
    PB *b = r->b;
    switch (a->kind) {
    case RNN_ACT_SIGMOID: return pb_ew1(b, EW_SIGMOID, x);
    case RNN_ACT_TANH: return pb_ew1(b, EW_TANH, x);
    case RNN_ACT_RELU: return pb_ew1(b, EW_RELU, x);
    case RNN_ACT_AFFINE: return pb_ew2i(b, EW_ADD, pb_ew2i(b, EW_MUL, x, a->alpha), a->beta);
    case RNN_ACT_LEAKYRELU:
        return pb_where(b, pb_ew2i(b, EW_LT, x, 0), pb_ew2i(b, EW_MUL, x, a->alpha), x);
    case RNN_ACT_THRESHOLDEDRELU: return pb_where(b, pb_ew2i(b, EW_GT, x, a->alpha), x, r->zero);
    case RNN_ACT_SCALEDTANH:
        return pb_ew2i(b, EW_MUL, pb_ew1(b, EW_TANH, pb_ew2i(b, EW_MUL, x, a->beta)), a->alpha);
    case RNN_ACT_HARDSIGMOID: {
        int v = pb_ew2i(b, EW_ADD, pb_ew2i(b, EW_MUL, x, a->alpha), a->beta);
        return pb_ew2i(b, EW_MIN, pb_ew2i(b, EW_MAX, v, 0), 1);
    }
    case RNN_ACT_ELU:
        return pb_where(b, pb_ew2i(b, EW_LT, x, 0), pb_ew2i(b, EW_MUL, expm1_of(b, x), a->alpha),
                        x);
    case RNN_ACT_SOFTSIGN: return pb_ew2(b, EW_DIV, x, pb_ew2i(b, EW_ADD, pb_ew1(b, EW_ABS, x), 1));
    case RNN_ACT_SOFTPLUS: return pb_ew1(b, EW_SOFTPLUS, x);
    }
    return x;
}

// The activation of a gate's pre-activation x, clipped first where the node has clip (the cell
// state's activation in LSTM is not: clip bounds the gates' inputs only, as in ONNX Runtime).
static int act(Rnn *r, const RnnAct *a, int x) {
    if (r->s->has_clip)
        x = pb_ew2i(r->b, EW_MIN, pb_ew2i(r->b, EW_MAX, x, -r->s->clip), r->s->clip);
    return act_noclip(r, a, x);
}

// Input i's slice for direction d, reshaped to its per-direction dims (absent: -1).
static int per_dir(Rnn *r, int i, int d, int axis, int rank, const int64_t *dims) {
    int x = fc_in(r->fc, i);
    if (x < 0)
        return -1;
    if (r->s->dirs > 1)
        x = slice_axis(r->b, x, axis, d, 1);
    return pb_reshape(r->b, x, rank, dims);
}

// The transposed weight block of direction d: W [D, GH, K] -> [K, rows) of gates.
static int weight_t(Rnn *r, int i, int d, int64_t rows0, int64_t rows, int64_t K) {
    static const int swap[2] = {1, 0};
    int64_t GH = r->s->gates * r->s->H, dims[2] = {GH, K};
    int w = per_dir(r, i, d, 0, 2, dims);
    if (rows0 != 0 || rows != GH)
        w = slice_axis(r->b, w, 0, rows0, rows);
    return pb_transpose(r->b, w, swap);
}

// Steps picked by a mask come from blocks of this many steps: a block is sliced out of xw once
// (its kernels differ per block), and each step's select reads its block only. Longer blocks
// mean fewer kernels to tune, shorter ones less to read per step.
#define RNN_SELECT_BLOCK 16

// Step tl of a block of xw ([K, B, GH]; layout 1: [B, K, GH]) as [B, GH]. A slice at offset t
// would make every step's kernels differ (the offset is part of their code), so a long sequence
// would tune a few dozen kernels per step. Instead the step is picked by a constant mask, which
// is a value and not part of the kernel: the sum over the block's time axis of
// where(mask_tl, block, 0). Every step then runs the same kernels, tuned once. The select is
// exact (no 0 * inf); it reads the block once per step, which select_steps bounds by the
// recurrent product's own read of R.
static int step_by_select(Rnn *r, int block, int64_t tl) {
    int axis = r->s->layout ? 1 : 0;
    int64_t K = pb_t(r->b, block)->dims[axis], dims[3] = {1, 1, 1};
    dims[axis] = K;
    bool *m = xcalloc((size_t)K, sizeof(bool));
    m[tl] = true;
    int mask = pb_const(r->b, DT_BOOL, 3, dims, m);
    free(m);
    int v = pb_where(r->b, mask, block, r->zero);
    return pb_reduce(r->b, RED_SUM, v, 1u << axis, false, false);
}

// Whether steps are picked by a mask rather than sliced: when the extra read per step (a block's
// rows of GH values) is at most the recurrent weights' H rows.
static bool select_steps(const RnnSpec *s) {
    return s->T > 1 && ORCH_MIN(s->T, RNN_SELECT_BLOCK) * s->B <= s->H;
}

typedef struct DirOut {
    int *y;   // per time index: the step's Y value [B, H]
    int h, c; // final states [B, H]
} DirOut;

static void run_direction(Rnn *r, int d, int seq, DirOut *out) {
    const RnnSpec *s = r->s;
    PB *b = r->b;
    int64_t T = s->T, B = s->B, I = s->I, H = s->H, GH = s->gates * H;
    bool rev = s->dirs == 2 ? d == 1 : s->reverse;
    bool lstm = s->cell == RNN_CELL_LSTM, gru = s->cell == RNN_CELL_GRU;
    bool lbr = gru && s->linear_before_reset;
    const RnnAct *a = s->act[d];

    // X W^T + biases for every step: [T*B, GH] (layout 1: [B*T, GH]), viewed [T, B, GH].
    int x = reshape2(b, fc_in(r->fc, RNN_IN_X), T * B, I);
    int xw = pb_matmul(b, x, weight_t(r, RNN_IN_W, d, 0, GH, I));
    int64_t bd[1] = {2 * GH};
    int bias = per_dir(r, RNN_IN_B, d, 0, 1, bd), rbh = -1;
    if (bias >= 0) {
        int wb = slice_axis(b, bias, 0, 0, GH), rb = slice_axis(b, bias, 0, GH, GH);
        if (lbr) {
            // The h gate's recurrent bias sits inside r * (H R_h^T + Rb_h): kept apart.
            int zr =
                pb_ew2(b, EW_ADD, slice_axis(b, wb, 0, 0, 2 * H), slice_axis(b, rb, 0, 0, 2 * H));
            int parts[2] = {zr, slice_axis(b, wb, 0, 2 * H, H)};
            rbh = slice_axis(b, rb, 0, 2 * H, H);
            xw = pb_ew2(b, EW_ADD, xw, pb_concat(b, 2, parts, 0));
        } else {
            xw = pb_ew2(b, EW_ADD, xw, pb_ew2(b, EW_ADD, wb, rb));
        }
    }
    int64_t xd[3] = {s->layout ? B : T, s->layout ? T : B, GH};
    xw = pb_reshape(b, xw, 3, xd);

    // Recurrent weights: [H, GH]; GRU without linear_before_reset multiplies r * H by R_h alone.
    int rt, rt_h = -1;
    if (gru && !lbr) {
        rt = weight_t(r, RNN_IN_R, d, 0, 2 * H, H);
        rt_h = weight_t(r, RNN_IN_R, d, 2 * H, H, H);
    } else {
        rt = weight_t(r, RNN_IN_R, d, 0, GH, H);
    }
    int64_t hd[2] = {B, H}, pd[1] = {3 * H};
    int h = per_dir(r, RNN_IN_H0, d, s->layout ? 1 : 0, 2, hd);
    int c = lstm ? per_dir(r, RNN_IN_C0, d, s->layout ? 1 : 0, 2, hd) : -1;
    int p = lstm ? per_dir(r, RNN_IN_P, d, 0, 1, pd) : -1;
    int pi = -1, po = -1, pf = -1;
    if (p >= 0) {
        pi = slice_axis(b, p, 0, 0, H);
        po = slice_axis(b, p, 0, H, H);
        pf = slice_axis(b, p, 0, 2 * H, H);
    }
    int lens = seq >= 0 ? reshape2(b, seq, B, 1) : -1;
    bool select = select_steps(s);
    int taxis = s->layout ? 1 : 0;
    int64_t n_blocks = (T + RNN_SELECT_BLOCK - 1) / RNN_SELECT_BLOCK;
    int *blocks = xmalloc(sizeof(int) * (size_t)n_blocks);
    for (int64_t k = 0; k < n_blocks; k++)
        blocks[k] = -1;

    for (int64_t step = 0; step < T; step++) {
        int64_t t = rev ? T - 1 - step : step;
        int xt;
        if (select) {
            int64_t blk = t / RNN_SELECT_BLOCK;
            if (blocks[blk] < 0)
                blocks[blk] =
                    T <= RNN_SELECT_BLOCK
                        ? xw
                        : slice_axis(b, xw, taxis, blk * RNN_SELECT_BLOCK,
                                     ORCH_MIN(RNN_SELECT_BLOCK, T - blk * RNN_SELECT_BLOCK));
            xt = step_by_select(r, blocks[blk], t % RNN_SELECT_BLOCK);
        } else {
            xt = reshape2(b, slice_axis(b, xw, taxis, t, 1), B, GH);
        }
        int hn, cn = -1;
        if (s->cell == RNN_CELL_RNN) {
            hn = act(r, &a[0], add_opt(b, xt, h >= 0 ? pb_matmul(b, h, rt) : -1));
        } else if (gru) {
            int hr = h >= 0 ? pb_matmul(b, h, rt) : -1; // [B, 2H], or [B, 3H] with lbr
            int zr = add_opt(b, slice_axis(b, xt, 1, 0, 2 * H),
                             hr >= 0 && !lbr ? hr
                             : hr >= 0       ? slice_axis(b, hr, 1, 0, 2 * H)
                                             : -1);
            int z = act(r, &a[0], slice_axis(b, zr, 1, 0, H));
            int rg = act(r, &a[0], slice_axis(b, zr, 1, H, H));
            int hx = slice_axis(b, xt, 1, 2 * H, H), rec;
            if (lbr)
                rec = add_opt(b, hr >= 0 ? slice_axis(b, hr, 1, 2 * H, H) : -1, rbh);
            else
                rec = h >= 0 ? pb_matmul(b, pb_ew2(b, EW_MUL, rg, h), rt_h) : -1;
            if (lbr && rec >= 0)
                rec = pb_ew2(b, EW_MUL, rg, rec);
            int hh = act(r, &a[1], add_opt(b, hx, rec));
            // (1 - z) * hh + z * h
            hn = pb_ew2(b, EW_MUL, pb_ewi2(b, EW_SUB, 1.0, z), hh);
            if (h >= 0)
                hn = pb_ew2(b, EW_ADD, hn, pb_ew2(b, EW_MUL, z, h));
        } else {
            int g4 = add_opt(b, xt, h >= 0 ? pb_matmul(b, h, rt) : -1);
            int gi = slice_axis(b, g4, 1, 0, H), go = slice_axis(b, g4, 1, H, H);
            int gf = slice_axis(b, g4, 1, 2 * H, H), gc = slice_axis(b, g4, 1, 3 * H, H);
            if (p >= 0 && c >= 0) {
                gi = pb_ew2(b, EW_ADD, gi, pb_ew2(b, EW_MUL, pi, c));
                gf = pb_ew2(b, EW_ADD, gf, pb_ew2(b, EW_MUL, pf, c));
            }
            int iv = act(r, &a[0], gi), gv = act(r, &a[1], gc);
            cn = pb_ew2(b, EW_MUL, iv, gv);
            if (c >= 0)
                cn = pb_ew2(b, EW_ADD, pb_ew2(b, EW_MUL, act(r, &a[0], gf), c), cn);
            if (p >= 0)
                go = pb_ew2(b, EW_ADD, go, pb_ew2(b, EW_MUL, po, cn));
            hn = pb_ew2(b, EW_MUL, act(r, &a[0], go), act_noclip(r, &a[2], cn));
        }
        if (lens >= 0) {
            // Past a sequence's end: Y is zero and the state stays (for the reverse direction,
            // the steps past the end come first, so its recurrence starts at the last valid step).
            int live = pb_ew2i(b, EW_GT, lens, (double)t);
            out->y[t] = pb_where(b, live, hn, r->zero);
            hn = pb_where(b, live, hn, h >= 0 ? h : r->zero);
            if (lstm)
                cn = pb_where(b, live, cn, c >= 0 ? c : r->zero);
        } else {
            out->y[t] = hn;
        }
        h = hn;
        c = cn;
    }
    free(blocks);
    out->h = h;
    out->c = c;
}

// A concat takes at most this many tensors: a kernel's inputs are bounded (the CUDA target's
// ABI passes 32 pointers), and a sequence of 128 steps would otherwise be one concat of 128 that
// no GPU kernel could compute.
#define RNN_CONCAT_MAX 32

// Concatenates v[0..n) along axis as a tree of concats of at most RNN_CONCAT_MAX (v is reused).
static int concat_tree(PB *b, int n, int *v, int axis) {
    while (n > RNN_CONCAT_MAX) {
        int m = 0;
        for (int i = 0; i < n; i += RNN_CONCAT_MAX) {
            int k = n - i < RNN_CONCAT_MAX ? n - i : RNN_CONCAT_MAX;
            v[m++] = k == 1 ? v[i] : pb_concat(b, k, v + i, axis);
        }
        n = m;
    }
    return n == 1 ? v[0] : pb_concat(b, n, v, axis);
}

// Stacks n tensors of [B, H] at axis `axis` of the result shape `dims` (one axis of size n).
static int stack(PB *b, int n, const int *parts, int rank, const int64_t *unit, int axis) {
    int *v = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = pb_reshape(b, parts[i], rank, unit);
    int y = concat_tree(b, n, v, axis);
    free(v);
    return y;
}

static int rule_rnn(FissionCtx *fc) {
    RnnSpec s;
    Err e = {0};
    if (rnn_spec(fc->g, fc->n, &s, &e) != ST_OK)
        return ST_UNSUPPORTED;
    DType dt = fc_in_t(fc, RNN_IN_X)->dtype;
    // float16 stays with the reference op; without steps the states pass through, which the
    // reference does as well.
    if ((dt != DT_FLOAT && dt != DT_DOUBLE) || s.T < 1)
        return ST_UNSUPPORTED;
    Rnn r = {fc, &fc->b, &s, dt, pb_const_scalar(&fc->b, dt, 0.0)};
    PB *b = &fc->b;
    // sequence_lens: none, or constant and all full length, needs no masking.
    int seq = fc_in(fc, RNN_IN_SEQ);
    const Tensor *L = fc_in_t(fc, RNN_IN_SEQ);
    if (L && L->kind == TK_CONST) {
        bool full = true;
        for (int64_t i = 0; i < s.B; i++)
            full &= elem_get_i64(L->dtype, L->data, i) == s.T;
        if (full)
            seq = -1;
    }
    int64_t D = s.dirs, B = s.B, H = s.H, T = s.T;
    DirOut dir[2];
    int ys[2], hs[2], cs[2];
    for (int d = 0; d < D; d++) {
        dir[d].y = xmalloc(sizeof(int) * (size_t)T);
        run_direction(&r, d, seq, &dir[d]);
        // Y of one direction: [T, 1, B, H] (layout 1: [B, T, 1, H]).
        int64_t unit0[4] = {1, 1, B, H}, unit1[4] = {B, 1, 1, H};
        ys[d] = stack(b, (int)T, dir[d].y, 4, s.layout ? unit1 : unit0, s.layout ? 1 : 0);
        hs[d] = dir[d].h;
        cs[d] = dir[d].c;
        free(dir[d].y);
    }
    int64_t u0[3] = {1, B, H}, u1[3] = {B, 1, H};
    for (int j = 0; j < fc->n->n_out; j++) {
        if (!fc_out_t(fc, j))
            continue;
        int y;
        if (j == 0)
            y = D == 1 ? ys[0] : pb_concat(b, 2, ys, s.layout ? 2 : 1);
        else
            y = stack(b, (int)D, j == 1 ? hs : cs, 3, s.layout ? u1 : u0, s.layout ? 1 : 0);
        fc_set_out(fc, j, y);
    }
    return ST_OK;
}

const FissionRuleDef fission_rules_rnn[] = {
    {"LSTM", rule_rnn},
    {"GRU", rule_rnn},
    {"RNN", rule_rnn},
    {NULL, NULL},
};
