// Scale hoisting (see passes.h): MatMul(c1 * A, c2 * B) = (c1 * c2) * MatMul(A, B) for scalars
// c1, c2. PyTorch exports scaled_dot_product_attention with the scale split between the
// operands: Q * sqrt(s) and K^T * sqrt(s), each an elementwise primitive between the head-split
// transposes and the score MatMul. There they keep the fused attention kernel from reading Q and
// K^T in place (it absorbs LAYOUT producers only) and cost a copy kernel each where the plan
// computes attention unfused. After the pass the MatMul reads the transposed projections
// directly and one multiplication of the scores by c1 * c2 follows it, which the attention's
// pre-softmax chain (or a GEMM epilogue: cuBLASLt's alpha) takes in.
// The result differs from the model's by float rounding only: each operand element was rounded
// once after its scaling, now each score is rounded once after its product.
// A factor applied to an elementwise primitive's value stays: the chain merging folds it into
// that program at no cost, and moving it would change the function the program computes (the
// 0.5 ending PyTorch's exported GELU, x * (1 + erf(x / sqrt 2)) * 0.5, keeps the program a GELU,
// which cuBLASLt's epilogue computes).
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The scalar factor p applies to its single non-constant input x when p is one MUL by (or DIV
// of x by) an immediate or a one-element float constant, finite and not zero, in float32, with
// p's output of x's dims: *x and the factor (a DIV's reciprocal) are set; false otherwise.
static bool scalar_scale(const PrimGraph *pg, const Prim *p, int *x, double *factor) {
    if (p->dead || p->kind != PRIM_ELEMWISE || p->n_out != 1 || p->ew.n != 1)
        return false;
    const EwInstr *ins = &p->ew.code[0];
    const Tensor *o = pg->tensors[p->out[0]];
    if ((ins->op != EW_MUL && ins->op != EW_DIV) || ins->dtype != DT_FLOAT || o->dtype != DT_FLOAT)
        return false;
    int at = -1;
    double c = 0;
    bool have_c = false;
    for (int k = 0; k < 2; k++) {
        const EwArg *a = &ins->arg[k];
        if (a->src == EWS_IMM && !have_c) {
            c = a->imm;
            have_c = true;
        } else if (a->src == EWS_INPUT && pg_is_const(pg, p->in[a->index]) && !have_c) {
            const Tensor *t = pg->tensors[p->in[a->index]];
            if (tensor_numel(t) != 1 || !t->data || t->dtype != DT_FLOAT)
                return false;
            c = elem_get_f64(t->dtype, t->data, 0);
            have_c = true;
        } else if (a->src == EWS_INPUT && at < 0) {
            at = k;
        } else {
            return false;
        }
    }
    if (at < 0 || !have_c || !isfinite(c) || c == 0 || (ins->op == EW_DIV && at != 0))
        return false;
    int xt = p->in[ins->arg[at].index];
    if (pg_is_const(pg, xt) || pg->tensors[xt]->dtype != DT_FLOAT ||
        !pass_same_dims(pg->tensors[xt], o))
        return false;
    *x = xt;
    *factor = ins->op == EW_MUL ? c : 1.0 / c;
    return isfinite(*factor) && *factor != 0;
}

int pass_hoist_scales(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    pass_uses_build(pg, &u);
    int killed = 0, hoisted = 0, n0 = pg->n_prims;
    for (int k = 0; k < n0; k++) {
        Prim *mm = pg->prims[k];
        if (mm->dead || mm->kind != PRIM_LINEAR || mm->lin.op != LIN_MATMUL || mm->n_in != 2 ||
            mm->n_out != 1 || mm->in[0] == mm->in[1] || pg->tensors[mm->out[0]]->dtype != DT_FLOAT)
            continue;
        double s = 1;
        int n_scaled = 0;
        for (int j = 0; j < 2; j++) {
            int t = mm->in[j], x, q = t >= 0 ? u.producer[t] : -1;
            double f;
            if (q < 0 || u.count[t] != 1 || u.is_output[t] ||
                !scalar_scale(pg, pg->prims[q], &x, &f))
                continue;
            if (u.producer[x] >= 0 && pg->prims[u.producer[x]]->kind == PRIM_ELEMWISE)
                continue;
            mm->in[j] = x;
            pg->prims[q]->dead = true;
            killed++;
            s *= f;
            n_scaled++;
        }
        if (n_scaled == 0)
            continue;
        hoisted += n_scaled;
        if (s == 1)
            continue; // the factors cancel: the product is the model's
        // The product gets a new tensor; a MUL by s writes the old one (its readers, and a graph
        // output's name, stay as they were).
        const Tensor *y = pg->tensors[mm->out[0]];
        char name[256];
        snprintf(name, sizeof name, "%.200s/unscaled", y->name);
        int raw = pg_add_tensor(pg, name, y->dtype, y->rank, y->dims)->id;
        Prim *mul = pg_add_prim(pg, PRIM_ELEMWISE, 1, 1, mm->origin);
        mul->in[0] = raw;
        mul->out[0] = mm->out[0];
        mm->out[0] = raw;
        EwInstr ins = {.op = EW_MUL, .dtype = DT_FLOAT};
        ins.arg[0] = (EwArg){EWS_INPUT, 0, 0};
        ins.arg[1] = (EwArg){EWS_IMM, 0, s};
        mul->ew.n = 1;
        mul->ew.code = arena_memdup(pg->arena, &ins, sizeof ins);
    }
    pass_uses_free(&u);
    if (pg->n_prims != n0)
        pass_sort_topologically(pg);
    st->scales_hoisted += hoisted;
    // Compacting also recomputes every tensor's producer index after the reordering.
    if (killed || pg->n_prims != n0)
        prim_graph_compact(pg);
    return ST_OK;
}
