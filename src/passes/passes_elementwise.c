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

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

// Equal for instructions same_instr calls equal (clean_instr zeroed the fields they do not use).
static uint64_t instr_hash(const EwInstr *r) {
    uint64_t h = mix((uint64_t)r->op, (uint64_t)r->dtype);
    for (int k = 0; k < ew_op_arity(r->op); k++) {
        const EwArg *a = &r->arg[k];
        uint64_t v = (uint64_t)(uint32_t)a->index;
        if (a->src == EWS_IMM)
            memcpy(&v, &a->imm, sizeof v);
        h = mix(mix(h, (uint64_t)a->src), v);
    }
    return h;
}

// An open-addressing table of small integers (instruction or input numbers) found by hash, so
// that a program is canonicalised in time linear in its length: a merged chain of 10,000
// elementwise operators is one program.
typedef struct Slots {
    int *slot; // -1: empty
    size_t mask;
} Slots;

static void slots_init(Slots *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    t->slot = xmalloc(sizeof(int) * cap);
    memset(t->slot, 0xff, sizeof(int) * cap);
    t->mask = cap - 1;
}

// Puts a program in working form (operands naming tensor ids) into canonical form and stores it
// in p with its inputs. Returns whether p changed.
static bool store_canonical(PrimGraph *pg, Prim *p, const EwInstr *code, int n) {
    EwInstr *vn = xmalloc(sizeof(EwInstr) * (size_t)n);
    int *map = xmalloc(sizeof(int) * (size_t)n), cnt = 0;
    Slots seen;
    slots_init(&seen, (size_t)n);
    for (int i = 0; i < n; i++) {
        EwInstr ins = clean_instr(pg, &code[i], map, vn);
        // A copy of an instruction's value to its own dtype is that value.
        const EwArg *a0 = &ins.arg[0];
        if ((ins.op == EW_COPY || ins.op == EW_CAST) && a0->src == EWS_INSTR &&
            vn[a0->index].dtype == ins.dtype) {
            map[i] = a0->index;
            continue;
        }
        size_t s = instr_hash(&ins) & seen.mask;
        while (seen.slot[s] >= 0 && !same_instr(&vn[seen.slot[s]], &ins))
            s = (s + 1) & seen.mask;
        if (seen.slot[s] < 0) {
            seen.slot[s] = cnt;
            vn[cnt++] = ins;
        }
        map[i] = seen.slot[s];
    }
    free(seen.slot);
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
    Slots inputs; // tensor id -> its input number
    slots_init(&inputs, (size_t)(3 * n + 1));
    for (int i = 0; i <= res; i++) {
        if (!live[i])
            continue;
        EwInstr r = vn[i];
        for (int k = 0; k < ew_op_arity(r.op); k++) {
            EwArg *a = &r.arg[k];
            if (a->src == EWS_INSTR) {
                a->index = renum[a->index];
            } else if (a->src == EWS_INPUT) {
                size_t s = mix(0, (uint64_t)(uint32_t)a->index) & inputs.mask;
                while (inputs.slot[s] >= 0 && ins[inputs.slot[s]] != a->index)
                    s = (s + 1) & inputs.mask;
                if (inputs.slot[s] < 0) {
                    inputs.slot[s] = n_in;
                    ins[n_in++] = a->index;
                }
                a->index = inputs.slot[s];
            }
        }
        renum[i] = m;
        out[m++] = r;
    }
    free(inputs.slot);
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

// p's program in working form, appended at code[*n]; an operand reading a tensor t with
// value_at[t] >= 0 (an inlined producer's output) reads that instruction instead. NULL: none.
static void append_working(const Prim *p, EwInstr *code, int *n, const int *value_at) {
    int base = *n;
    for (int i = 0; i < p->ew.n; i++) {
        EwInstr r = p->ew.code[i];
        for (int k = 0; k < ew_op_arity(r.op); k++) {
            EwArg *a = &r.arg[k];
            if (a->src == EWS_INSTR) {
                a->index += base;
            } else if (a->src == EWS_INPUT) {
                a->index = p->in[a->index];
                if (value_at && value_at[a->index] >= 0) {
                    a->src = EWS_INSTR;
                    a->index = value_at[a->index];
                }
            }
        }
        code[(*n)++] = r;
    }
}

static bool canonicalise(PrimGraph *pg, Prim *p) {
    int n = 0;
    EwInstr *code = xmalloc(sizeof(EwInstr) * (size_t)p->ew.n);
    append_working(p, code, &n, NULL);
    bool changed = store_canonical(pg, p, code, n);
    free(code);
    return changed;
}

// The elementwise primitive producing t, when a consumer of numel elements, t's only reader,
// may inline it: a broadcast intermediate is not inlined, its program would run once per
// output element instead of once. Counts may be stale upwards only (canonical programs read
// fewer tensors), so 1 means the consumer is the only reader.
static Prim *inlinable(const PrimGraph *pg, const PassUses *u, int t, int64_t numel) {
    Prim *p = u->producer[t] >= 0 ? pg->prims[u->producer[t]] : NULL;
    if (!p || p->dead || p->kind != PRIM_ELEMWISE || u->count[t] != 1 || u->is_output[t] ||
        tensor_numel(pg->tensors[t]) != numel)
        return NULL;
    return p;
}

// Each elementwise primitive that is not itself inlined absorbs, at once, the tree of producers
// it may inline, their producers, and so on: one program built and canonicalised per tree, so
// a chain of n operators costs O(n), not the O(n^2) instructions of absorbing one producer at a
// time (and as many intermediate programs kept in the arena).
//
// The program is the one absorbing producers one at a time, in topological order, gives: a
// consumer first absorbs the first inlinable input in its stored order, then the others in
// the order its canonical program first reads them, each one's program placed before what it
// has absorbed so far. So a consumer's program is [tree of its last absorbed producer, ...,
// tree of its first, its own code], and canonical form is unchanged by canonicalising a part
// first (CSE keeps first occurrences; a canonical program has no dead code).
int pass_merge_elementwise(PrimGraph *pg, CleanupStats *st, Err *e) {
    (void)e;
    PassUses u;
    pass_uses_build(pg, &u);
    int n_prims = pg->n_prims, killed = 0, canon = 0;
    int *first = xmalloc(sizeof(int) * (size_t)(n_prims + 1)); // tensor absorbed first; -1: none
    for (int k = 0; k < n_prims; k++) {
        Prim *c = pg->prims[k];
        first[k] = -1;
        if (c->kind != PRIM_ELEMWISE)
            continue;
        int64_t numel = tensor_numel(pg->tensors[c->out[0]]);
        for (int j = 0; j < c->n_in && first[k] < 0; j++)
            if (inlinable(pg, &u, c->in[j], numel))
                first[k] = c->in[j];
        // Counted where no producer is absorbed: a merged program is new, not rewritten.
        canon += canonicalise(pg, c) && first[k] < 0;
    }
    int *value_at = xmalloc(sizeof(int) * (size_t)(pg->n_tensors + 1));
    memset(value_at, 0xff, sizeof(int) * (size_t)(pg->n_tensors + 1));
    int *stack = xmalloc(sizeof(int) * (size_t)(n_prims + 1));
    int *order = xmalloc(sizeof(int) * (size_t)(n_prims + 1));
    EwInstr *code = NULL;
    size_t code_cap = 0;
    for (int k = n_prims - 1; k >= 0; k--) {
        Prim *c = pg->prims[k];
        if (c->kind != PRIM_ELEMWISE || c->dead)
            continue;
        int64_t numel = tensor_numel(pg->tensors[c->out[0]]);
        // The tree in preorder, children in the order absorbed; reversed, it is the program's.
        int top = 0, n_order = 0;
        size_t len = 0;
        stack[top++] = k;
        while (top > 0) {
            int x = stack[--top];
            const Prim *px = pg->prims[x];
            order[n_order++] = x;
            len += (size_t)px->ew.n;
            int mark = top;
            if (first[x] >= 0)
                stack[top++] = u.producer[first[x]];
            for (int j = 0; j < px->n_in; j++)
                if (px->in[j] != first[x] && inlinable(pg, &u, px->in[j], numel))
                    stack[top++] = u.producer[px->in[j]];
            for (int a = mark, b = top - 1; a < b; a++, b--) { // the first absorbed pops first
                int t = stack[a];
                stack[a] = stack[b];
                stack[b] = t;
            }
        }
        if (n_order == 1)
            continue;
        if (len > code_cap) {
            free(code);
            code_cap = len;
            code = xmalloc(sizeof(EwInstr) * code_cap);
        }
        int n = 0;
        for (int i = n_order - 1; i >= 0; i--) {
            Prim *x = pg->prims[order[i]];
            append_working(x, code, &n, value_at);
            if (x != c) {
                value_at[x->out[0]] = n - 1;
                x->dead = true;
                killed++;
            }
        }
        store_canonical(pg, c, code, n);
    }
    free(code);
    free(order);
    free(stack);
    free(value_at);
    free(first);
    st->ew_merged += killed;
    st->ew_canonicalised += canon;
    pass_uses_free(&u);
    pass_finish(pg, killed);
    return ST_OK;
}
