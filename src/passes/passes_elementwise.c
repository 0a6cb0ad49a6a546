// Elementwise chain merging and canonical programs (see passes.h). The interpreter rounds every
// instruction to its dtype exactly as a tensor of that dtype would be stored, so inlining a
// producer's program in place of reading its output gives bit-identical results.
// Canonical form: one-element constants as immediates, commutative operands ordered (tensor ids,
// then instructions, then immediates), repeated instructions computed once, copies of
// instructions and unused ones dropped, inputs numbered by first use.
#include "passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool commutative(EwOp op) {
    switch (op) {
    case EW_ADD:
    case EW_MUL:
    case EW_MIN:
    case EW_MAX:
    case EW_EQ:
    case EW_AND:
    case EW_OR:
    case EW_XOR: return true;
    default: return false;
    }
}

// Operand order for commutative ops; in the working form EWS_INPUT indices are tensor ids.
static int arg_cmp(const EwArg *a, const EwArg *b) {
    if (a->src != b->src)
        return a->src == EWS_INPUT ? -1 : b->src == EWS_INPUT ? 1 : a->src == EWS_INSTR ? -1 : 1;
    if (a->src != EWS_IMM)
        return (a->index > b->index) - (a->index < b->index);
    uint64_t x, y;
    memcpy(&x, &a->imm, sizeof x);
    memcpy(&y, &b->imm, sizeof y);
    return (x > y) - (x < y);
}

static bool same_instr(const EwInstr *a, const EwInstr *b) {
    if (a->op != b->op || a->dtype != b->dtype)
        return false;
    for (int k = 0; k < ew_op_arity(a->op); k++)
        if (arg_cmp(&a->arg[k], &b->arg[k]) != 0)
            return false;
    return true;
}

// Whether instruction r computes in the float domain, as the interpreter decides it: from its
// tensor operands (WHERE: but the condition), else from its result type.
static bool float_domain(const PrimGraph *pg, const EwInstr *r, const EwInstr *vn) {
    bool any = false, f = false;
    for (int k = r->op == EW_WHERE ? 1 : 0; k < ew_op_arity(r->op); k++) {
        const EwArg *a = &r->arg[k];
        if (a->src == EWS_IMM)
            continue;
        any = true;
        f |=
            dtype_is_float(a->src == EWS_INPUT ? pg->tensors[a->index]->dtype : vn[a->index].dtype);
    }
    return any ? f : dtype_is_float(r->dtype);
}

// A one-element constant operand becomes an immediate when the interpreter reads the same value
// from it (finite, exact in a double and an int64), the instruction's domain stays the same and
// another operand is not an immediate.
static void scalar_consts_to_imm(const PrimGraph *pg, EwInstr *r, const EwInstr *vn) {
    for (int k = 0; k < ew_op_arity(r->op); k++) {
        EwArg *a = &r->arg[k];
        if (a->src != EWS_INPUT || !pg_is_const(pg, a->index))
            continue;
        const Tensor *t = pg->tensors[a->index];
        // (A float condition of WHERE would read as 0 in the integer domain, an immediate not.)
        if (!t->data || tensor_numel(t) != 1 || dtype_size(t->dtype) == 0 ||
            t->dtype == DT_UINT64 || (r->op == EW_WHERE && k == 0 && dtype_is_float(t->dtype)))
            continue;
        double v = dtype_is_float(t->dtype) ? elem_get_f64(t->dtype, t->data, 0)
                                            : (double)elem_get_i64(t->dtype, t->data, 0);
        if (!(fabs(v) <= 9007199254740992.0)) // 2^53; also rejects NaN and infinities
            continue;
        EwInstr c = *r;
        c.arg[k] = (EwArg){EWS_IMM, 0, v};
        // Every instruction keeps a tensor operand, so programs keep at least one input.
        bool operand = false;
        for (int j = 0; j < ew_op_arity(c.op); j++)
            operand |= c.arg[j].src != EWS_IMM;
        if (operand && float_domain(pg, &c, vn) == float_domain(pg, r, vn))
            *r = c;
    }
}

// Zeroes the fields an operand does not use, so that equal instructions compare equal.
static EwInstr clean_instr(const PrimGraph *pg, const EwInstr *in, const int *map,
                           const EwInstr *vn) {
    EwInstr r = {.op = in->op, .dtype = in->dtype};
    for (int k = 0; k < ew_op_arity(in->op); k++) {
        r.arg[k].src = in->arg[k].src;
        if (in->arg[k].src == EWS_IMM)
            r.arg[k].imm = in->arg[k].imm;
        else
            r.arg[k].index = in->arg[k].src == EWS_INSTR ? map[in->arg[k].index] : in->arg[k].index;
    }
    scalar_consts_to_imm(pg, &r, vn);
    if (commutative(r.op) && arg_cmp(&r.arg[1], &r.arg[0]) < 0) {
        EwArg t = r.arg[0];
        r.arg[0] = r.arg[1];
        r.arg[1] = t;
    }
    return r;
}

static bool same_program(const EwInstr *a, int na, const EwProgram *b) {
    if (na != b->n)
        return false;
    for (int i = 0; i < na; i++)
        if (!same_instr(&a[i], &b->code[i]))
            return false;
    return true;
}

// Puts a program in working form (operands naming tensor ids) into canonical form and stores it
// in p with its inputs. Returns whether p changed.
static bool store_canonical(PrimGraph *pg, Prim *p, const EwInstr *code, int n) {
    EwInstr *vn = xmalloc(sizeof(EwInstr) * (size_t)n);
    int *map = xmalloc(sizeof(int) * (size_t)n), cnt = 0;
    for (int i = 0; i < n; i++) {
        EwInstr ins = clean_instr(pg, &code[i], map, vn);
        // A copy of an instruction's value to its own dtype is that value.
        const EwArg *a0 = &ins.arg[0];
        if ((ins.op == EW_COPY || ins.op == EW_CAST) && a0->src == EWS_INSTR &&
            vn[a0->index].dtype == ins.dtype) {
            map[i] = a0->index;
            continue;
        }
        int j = 0;
        while (j < cnt && !same_instr(&vn[j], &ins))
            j++;
        if (j == cnt)
            vn[cnt++] = ins;
        map[i] = j;
    }
    // Only what the result needs; every operand precedes its user, so the result stays last.
    int res = map[n - 1];
    bool *live = xcalloc((size_t)cnt, 1);
    live[res] = true;
    for (int i = res; i >= 0; i--)
        for (int k = 0; live[i] && k < ew_op_arity(vn[i].op); k++)
            if (vn[i].arg[k].src == EWS_INSTR)
                live[vn[i].arg[k].index] = true;
    int *renum = xmalloc(sizeof(int) * (size_t)cnt), m = 0;
    int *ins = xmalloc(sizeof(int) * (size_t)(3 * n + 1)), n_in = 0;
    EwInstr *out = xmalloc(sizeof(EwInstr) * (size_t)cnt);
    for (int i = 0; i <= res; i++) {
        if (!live[i])
            continue;
        EwInstr r = vn[i];
        for (int k = 0; k < ew_op_arity(r.op); k++) {
            EwArg *a = &r.arg[k];
            if (a->src == EWS_INSTR) {
                a->index = renum[a->index];
            } else if (a->src == EWS_INPUT) {
                int j = 0;
                while (j < n_in && ins[j] != a->index)
                    j++;
                if (j == n_in)
                    ins[n_in++] = a->index;
                a->index = j;
            }
        }
        renum[i] = m;
        out[m++] = r;
    }
    bool changed = n_in != p->n_in || !same_program(out, m, &p->ew);
    for (int j = 0; !changed && j < n_in; j++)
        changed = ins[j] != p->in[j];
    if (changed) {
        p->n_in = n_in;
        p->in = arena_memdup(pg->arena, ins, sizeof(int) * (size_t)n_in);
        p->ew.n = m;
        p->ew.code = arena_memdup(pg->arena, out, sizeof(EwInstr) * (size_t)m);
    }
    free(vn);
    free(map);
    free(live);
    free(renum);
    free(ins);
    free(out);
    return changed;
}

// p's program in working form, appended at code[*n]; operands reading tensor `inlined` read
// instruction `inlined_at` instead.
static void append_working(const Prim *p, EwInstr *code, int *n, int inlined, int inlined_at) {
    int base = *n;
    for (int i = 0; i < p->ew.n; i++) {
        EwInstr r = p->ew.code[i];
        for (int k = 0; k < ew_op_arity(r.op); k++) {
            EwArg *a = &r.arg[k];
            if (a->src == EWS_INSTR) {
                a->index += base;
            } else if (a->src == EWS_INPUT) {
                a->index = p->in[a->index];
                if (a->index == inlined) {
                    a->src = EWS_INSTR;
                    a->index = inlined_at;
                }
            }
        }
        code[(*n)++] = r;
    }
}

// Inlines producer p (output t) into consumer c.
static void inline_producer(PrimGraph *pg, Prim *c, const Prim *p) {
    int n = 0;
    EwInstr *code = xmalloc(sizeof(EwInstr) * (size_t)(p->ew.n + c->ew.n));
    append_working(p, code, &n, -1, -1);
    append_working(c, code, &n, p->out[0], p->ew.n - 1);
    store_canonical(pg, c, code, n);
    free(code);
}

static bool canonicalise(PrimGraph *pg, Prim *p) {
    int n = 0;
    EwInstr *code = xmalloc(sizeof(EwInstr) * (size_t)p->ew.n);
    append_working(p, code, &n, -1, -1);
    bool changed = store_canonical(pg, p, code, n);
    free(code);
    return changed;
}

int pass_merge_elementwise(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    pass_uses_build(pg, &u);
    int killed = 0, canon = 0;
    for (int k = 0; k < pg->n_prims; k++) {
        Prim *c = pg->prims[k];
        if (c->kind != PRIM_ELEMWISE)
            continue;
        int64_t numel = tensor_numel(pg->tensors[c->out[0]]);
        bool again = true;
        while (again) {
            again = false;
            for (int j = 0; j < c->n_in && !again; j++) {
                int t = c->in[j];
                Prim *p = u.producer[t] >= 0 ? pg->prims[u.producer[t]] : NULL;
                // Counts may be stale upwards only (a merge hands a consumer's inputs to its
                // consumer), so 1 means c is the only reader. A broadcast intermediate is not
                // inlined: its program would run once per output element instead of once.
                if (!p || p->dead || p->kind != PRIM_ELEMWISE || u.count[t] != 1 ||
                    u.is_output[t] || tensor_numel(pg->tensors[t]) != numel)
                    continue;
                inline_producer(pg, c, p);
                p->dead = true;
                killed++;
                again = true;
            }
        }
        canon += canonicalise(pg, c);
    }
    st->ew_merged += killed;
    st->ew_canonicalised += canon;
    pass_uses_free(&u);
    pass_finish(pg, killed);
    return ST_OK;
}
