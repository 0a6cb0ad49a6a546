// Channels-last layout pairs for 2-D convolutions (see passes.h, pass_channels_last). Tensor
// cores convolve NHWC data: cuDNN's NCHW half convolutions transpose internally and run at about
// half the speed of its NHWC ones (H100, ResNet-18's 3x3 convolutions: 14.3 against 8.4 us at
// 64 channels, 30.4 against 15.0 us at 512), and PyTorch's compiler stores convolution regions
// channels-last for that reason. Primitives keep NCHW semantics here; the pass only offers the
// other layout, and the orchestration decides where it pays:
//   - every activation T a 2-D convolution reads, and the value its epilogue chain (the single-
//     reader elementwise primitives of the output's shape and type after it) ends in (and its raw
//     output too where that epilogue is more than cuDNN's scale, bias, residual and ReLU; and
//     where it is a residual sum's cheaper branch, read as the other call's z), is written
//     a second time as Z = transpose(T) [N, H, W, C] (one LAYOUT, "L_out"), and each primitive
//     that read T reads its own private transpose back of Z (a LAYOUT "L_in" per reader: a
//     candidate absorbing one reader's L_in then stays convex);
//   - each such convolution's constant weights W [K, C/G, R, S] become a constant W' [K, R, S,
//     C/G] (the filter layout cuDNN's NHWC kernels read) and a private LAYOUT back to W's dims.
// A cuDNN candidate made of L_in, the weights' LAYOUT, the convolution, its epilogue and L_out
// reads and writes channels-last tensors in place (cudnn.c); a kernel that keeps NCHW absorbs the
// pair (its index maps compose to the identity), or reads through the transpose. The graph
// computes exactly what it did: the new primitives only move elements.
// The clean-up passes would undo this (the pairs compose to identities, CSE merges the private
// transposes), so the compile driver runs it after them, under half storage on the CUDA target
// where the library is there; loading an artefact runs it again (ARTIFACT_LAYOUT_NHWC).
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A one-stage transpose LAYOUT in -> a new tensor named `name`; returns the output tensor.
static int add_transpose(PrimGraph *pg, int in, const int perm[4], const char *name,
                         const char *origin) {
    const Tensor *T = pg->tensors[in];
    int64_t dims[4];
    for (int d = 0; d < 4; d++)
        dims[d] = T->dims[perm[d]];
    DType dt = T->dtype;
    int out = pg_add_tensor(pg, name, dt, 4, dims)->id;
    Prim *p = pg_add_prim(pg, PRIM_LAYOUT, 1, 1, origin);
    p->in[0] = in;
    p->out[0] = out;
    p->lay.n_stages = 1;
    p->lay.stages = arena_alloc(pg->arena, sizeof(LayoutStage));
    LayoutStage *s = &p->lay.stages[0];
    memset(s, 0, sizeof *s);
    s->kind = LS_TRANSPOSE;
    s->in_rank = 4;
    memcpy(s->in_dims, pg->tensors[in]->dims, sizeof(int64_t) * 4);
    memcpy(s->perm, perm, sizeof(int) * 4);
    return out;
}

static const int TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};

// Whether p is a convolution the pass serves: 2-D, X a computed rank-4 activation, W a rank-4
// constant with data of X's type.
static bool served_conv(const PrimGraph *pg, const Prim *p) {
    if (p->dead || p->kind != PRIM_LINEAR || p->lin.op != LIN_CONV || p->lin.n_spatial != 2 ||
        p->n_in != 2 || p->n_out != 1)
        return false;
    const Tensor *X = pg->tensors[p->in[0]], *W = pg->tensors[p->in[1]];
    return X->rank == 4 && !pg_is_const(pg, p->in[0]) && W->rank == 4 &&
           pg_is_const(pg, p->in[1]) && W->data && W->dtype == X->dtype &&
           (X->dtype == DT_FLOAT || X->dtype == DT_FLOAT16 || X->dtype == DT_BFLOAT16);
}

// Whether NHWC and NCHW put t's elements in different orders (C > 1 and H * W > 1).
static bool layouts_differ(const Tensor *t) {
    return t->dims[1] > 1 && t->dims[2] * t->dims[3] > 1;
}

// Whether constant t holds one value per channel of a rank-4 output with C channels ([C],
// [C, 1, 1] or [1, C, 1, 1]).
static bool per_channel(const PrimGraph *pg, int t, int64_t C) {
    const Tensor *T = pg->tensors[t];
    if (!pg_is_const(pg, t) || !T->data || T->rank < 1 || T->rank > 4 || tensor_numel(T) != C)
        return false;
    for (int d = 0; d < T->rank; d++)
        if (T->dims[d] != (d + 4 - T->rank == 1 ? C : 1))
            return false;
    return true;
}

// One bias for a residual sum. After BatchNorm folding and the chain merging, a ResNet block
// with a downsampling branch ends in one program [cast]([relu](conv2 + b2 + (ds + b_ds))): two
// per-channel constants, which cuDNN's fused call (one bias) cannot add. The program becomes
// [cast]([relu]((conv2 + (b2 + b_ds)) + ds)), the constants summed once here: the same value up
// to the rounding of the reassociated sum (as BatchNorm folding's). Only programs made of ADDs
// (one use each) of activations of the output's shape and exactly two such constants, then
// perhaps a ReLU (or max with 0) and a CAST, are rewritten. True when p was.
static bool combine_biases(PrimGraph *pg, Prim *p) {
    if (p->kind != PRIM_ELEMWISE || p->n_out != 1 || p->ew.n < 2 || p->ew.n > 32)
        return false;
    const Tensor *O = pg->tensors[p->out[0]];
    if (O->rank != 4)
        return false;
    const EwProgram *pr = &p->ew;
    int uses[32] = {0};
    for (int i = 0; i < pr->n; i++)
        for (int a = 0; a < ew_op_arity(pr->code[i].op); a++)
            if (pr->code[i].arg[a].src == EWS_INSTR)
                uses[pr->code[i].arg[a].index]++;
    int top = pr->n - 1, cast = -1, act = -1;
    if (pr->code[top].op == EW_CAST && pr->code[top].arg[0].src == EWS_INSTR) {
        cast = top;
        top = pr->code[top].arg[0].index;
    }
    const EwInstr *t = &pr->code[top];
    bool relu = t->op == EW_RELU && t->arg[0].src == EWS_INSTR;
    bool max0 = t->op == EW_MAX &&
                ((t->arg[0].src == EWS_INSTR && t->arg[1].src == EWS_IMM && t->arg[1].imm == 0) ||
                 (t->arg[1].src == EWS_INSTR && t->arg[0].src == EWS_IMM && t->arg[0].imm == 0));
    if (relu || max0) {
        act = top;
        top = t->arg[t->arg[0].src == EWS_INSTR ? 0 : 1].index;
    }
    if (top < 0 || top >= pr->n || pr->code[top].op != EW_ADD)
        return false;
    DType adt = pr->code[top].dtype;
    // The ADD tree's leaves.
    int stack[32], sp = 0, acts[32], n_acts = 0, consts[2], n_consts = 0, n_adds = 0;
    stack[sp++] = top;
    while (sp > 0) {
        int i = stack[--sp];
        const EwInstr *in = &pr->code[i];
        if (in->op != EW_ADD || in->dtype != adt || (i != top && uses[i] != 1))
            return false;
        n_adds++;
        for (int a = 0; a < 2; a++) {
            const EwArg *g = &in->arg[a];
            if (g->src == EWS_INSTR) {
                if (g->index < 0 || g->index >= i || sp >= 32)
                    return false;
                stack[sp++] = g->index;
            } else if (g->src == EWS_INPUT && g->index >= 0 && g->index < p->n_in) {
                int tt = p->in[g->index];
                if (per_channel(pg, tt, O->dims[1])) {
                    if (n_consts == 2)
                        return false;
                    consts[n_consts++] = tt;
                } else if (!pg_is_const(pg, tt) && pass_same_dims(pg->tensors[tt], O)) {
                    acts[n_acts++] = tt;
                } else {
                    return false;
                }
            } else {
                return false;
            }
        }
    }
    // Every instruction is the tree, the activation or the cast.
    if (n_consts != 2 || n_acts < 1 || n_adds + (act >= 0) + (cast >= 0) != pr->n)
        return false;
    const Tensor *c1 = pg->tensors[consts[0]], *c2 = pg->tensors[consts[1]];
    if (c1->dtype != c2->dtype || c1->rank != c2->rank || !pass_same_dims(c1, c2))
        return false;
    int64_t C = O->dims[1];
    void *sum = xmalloc(dtype_size(c1->dtype) * (size_t)C);
    for (int64_t k = 0; k < C; k++)
        elem_set_f64(c1->dtype, sum, k,
                     elem_get_f64(c1->dtype, c1->data, k) + elem_get_f64(c2->dtype, c2->data, k));
    char name[256];
    snprintf(name, sizeof name, "%.120s+%.120s", c1->name, c2->name);
    int bias = pg_add_const(pg, name, c1->dtype, c1->rank, c1->dims, sum, true)->id;
    int n_in = n_acts + 1, n = n_acts + (act >= 0) + (cast >= 0);
    int *ins = arena_alloc(pg->arena, sizeof(int) * (size_t)n_in);
    EwInstr *code = arena_alloc(pg->arena, sizeof(EwInstr) * (size_t)n);
    memset(code, 0, sizeof(EwInstr) * (size_t)n);
    for (int k = 0; k < n_acts; k++)
        ins[k] = acts[k];
    ins[n_acts] = bias;
    // %0 = in0 + bias; %k = %(k-1) + in_k
    code[0] = (EwInstr){.op = EW_ADD, .dtype = adt};
    code[0].arg[0] = (EwArg){EWS_INPUT, 0, 0};
    code[0].arg[1] = (EwArg){EWS_INPUT, n_acts, 0};
    for (int k = 1; k < n_acts; k++) {
        code[k] = (EwInstr){.op = EW_ADD, .dtype = adt};
        code[k].arg[0] = (EwArg){EWS_INSTR, k - 1, 0};
        code[k].arg[1] = (EwArg){EWS_INPUT, k, 0};
    }
    int w = n_acts;
    if (act >= 0) {
        code[w] = (EwInstr){.op = EW_RELU, .dtype = pr->code[act].dtype};
        code[w].arg[0] = (EwArg){EWS_INSTR, w - 1, 0};
        w++;
    }
    if (cast >= 0) {
        code[w] = pr->code[cast];
        code[w].arg[0] = (EwArg){EWS_INSTR, w - 1, 0};
        w++;
    }
    p->in = ins;
    p->n_in = n_in;
    p->ew.code = code;
    p->ew.n = w;
    return true;
}

// Whether elementwise primitive q's program uses only the operations a cuDNN fused epilogue may
// be made of (scale, bias and residual adds, ReLU, casts); a cheap test, cudnn.c decides.
static bool cudnn_like(const Prim *q) {
    if (q->kind != PRIM_ELEMWISE)
        return false;
    for (int i = 0; i < q->ew.n; i++) {
        EwOp op = q->ew.code[i].op;
        if (op != EW_ADD && op != EW_MUL && op != EW_RELU && op != EW_MAX && op != EW_CAST &&
            op != EW_COPY)
            return false;
    }
    return true;
}

int pass_channels_last(PrimGraph *pg, NhwcStats *st, Err *e) {
    (void)e;
    NhwcStats local = {0};
    if (!st)
        st = &local;
    for (int k = 0; k < pg->n_prims; k++)
        st->biases_combined += combine_biases(pg, pg->prims[k]);
    const int n_t = pg->n_tensors, n_p = pg->n_prims;
    int *readers = xcalloc((size_t)n_t + 1, sizeof(int)),
        *reader = xmalloc(sizeof(int) * (size_t)(n_t + 1));
    bool *is_output = xcalloc((size_t)n_t + 1, 1), *pick = xcalloc((size_t)n_t + 1, 1);
    for (int i = 0; i < pg->n_outputs; i++)
        is_output[pg->outputs[i]] = true;
    for (int k = 0; k < n_p; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            bool first = true; // a primitive reading t twice counts once
            for (int i = 0; i < j; i++)
                first &= p->in[i] != t;
            if (t >= 0 && first) {
                readers[t]++;
                reader[t] = k;
            }
        }
    }
    // The activations to pair: convolution inputs and the ends of their epilogue chains. Where
    // one elementwise primitive sums the outputs of several convolutions (a residual block's
    // downsampling branch), the costliest one's chain goes through it (its call's epilogue) and
    // the others' raw outputs are paired (read as that call's z).
    double *flops_in = xcalloc((size_t)n_t + 1, sizeof(double));
    for (int k = 0; k < n_p; k++)
        if (served_conv(pg, pg->prims[k]))
            flops_in[pg->prims[k]->out[0]] = prim_flops(pg, pg->prims[k]);
    int n_conv = 0;
    for (int k = 0; k < n_p; k++) {
        const Prim *p = pg->prims[k];
        if (!served_conv(pg, p))
            continue;
        n_conv++;
        pick[p->in[0]] = true;
        int y = p->out[0];
        if (readers[y] == 1 && !is_output[y]) {
            const Prim *q = pg->prims[reader[y]];
            bool main = true;
            for (int j = 0; j < q->n_in && q->kind == PRIM_ELEMWISE; j++) {
                int o = q->in[j];
                if (o != y && o >= 0 && readers[o] == 1 &&
                    (flops_in[o] > flops_in[y] || (flops_in[o] == flops_in[y] && o < y)))
                    main = false;
            }
            if (!main) {
                pick[y] = true;
                continue;
            }
        }
        // An epilogue cuDNN's fused call cannot compute (a leaky ReLU, a SiLU, a clip): the raw
        // output is paired as well, so that an NHWC call (conv alone) can write it and the
        // epilogue run as its own kernel on channels-last data.
        if (readers[y] == 1 && !is_output[y] && !cudnn_like(pg->prims[reader[y]]))
            pick[y] = true;
        while (readers[y] == 1 && !is_output[y]) {
            const Prim *q = pg->prims[reader[y]];
            if (q->kind != PRIM_ELEMWISE || q->n_out != 1 ||
                !pass_same_dims(pg->tensors[q->out[0]], pg->tensors[y]) ||
                pg->tensors[q->out[0]]->dtype != pg->tensors[y]->dtype)
                break;
            y = q->out[0];
        }
        pick[y] = true;
    }
    // Weights first (the readers' scan above stays valid: new tensors are past n_t).
    for (int k = 0; k < n_p; k++) {
        Prim *p = pg->prims[k];
        if (!served_conv(pg, p))
            continue;
        const Tensor *W = pg->tensors[p->in[1]];
        int64_t K = W->dims[0], Cg = W->dims[1], R = W->dims[2], S = W->dims[3];
        if (Cg == 1 || R * S == 1) // KCRS and KRSC are the same bytes
            continue;
        size_t es = dtype_size(W->dtype);
        int64_t dims[4] = {K, R, S, Cg};
        uint8_t *data = xmalloc(es * (size_t)(K * R * S * Cg));
        const uint8_t *src = W->data;
        for (int64_t o = 0; o < K; o++)
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t r = 0; r < R; r++)
                    for (int64_t s = 0; s < S; s++)
                        memcpy(data + es * (size_t)(((o * R + r) * S + s) * Cg + c),
                               src + es * (size_t)(((o * Cg + c) * R + r) * S + s), es);
        char name[256];
        snprintf(name, sizeof name, "%.200s.krsc", W->name);
        int wt = pg_add_const(pg, name, W->dtype, 4, dims, data, true)->id;
        snprintf(name, sizeof name, "%.200s.kcrs.%d", W->name, p->id);
        p->in[1] = add_transpose(pg, wt, TO_NCHW, name, p->origin);
        st->weights++;
    }
    for (int t = 0; t < n_t; t++) {
        if (!pick[t] || !layouts_differ(pg->tensors[t]) || readers[t] == 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.200s.nhwc", pg->tensors[t]->name);
        const int producer_origin_prim = pg->tensors[t]->producer;
        const char *origin = producer_origin_prim >= 0 && producer_origin_prim < n_p
                                 ? pg->prims[producer_origin_prim]->origin
                                 : "";
        int z = add_transpose(pg, t, TO_NHWC, name, origin);
        st->tensors++;
        for (int k = 0; k < n_p; k++) {
            Prim *p = pg->prims[k];
            int back = -1;
            for (int j = 0; j < p->n_in; j++) {
                if (p->in[j] != t)
                    continue;
                if (back < 0) {
                    snprintf(name, sizeof name, "%.200s.nchw.%d", pg->tensors[t]->name, p->id);
                    back = add_transpose(pg, z, TO_NCHW, name, p->origin);
                    st->readers++;
                }
                p->in[j] = back;
            }
        }
    }
    free(readers);
    free(reader);
    free(is_output);
    free(pick);
    free(flops_in);
    st->convs = n_conv;
    if (pg->n_prims != n_p) {
        pass_sort_topologically(pg);
        prim_graph_compact(pg);
    }
    return ST_OK;
}
