// The CUDA target's fused MLP chain kernels (cugen_mlp.h). Three designs, one launch
// each, no activation between layers in global memory:
// - block (the configs without v=): block b owns rows b*BM .. b*BM+BM-1: it stages its input rows
//   in shared memory (zeros past the last row), then per layer every thread computes TM x TN
//   output tiles of exact float32 fmaf over K, reading the activations from shared memory and
//   the weights through the read-only cache (__ldg, float4 where TN = 4) or from a per-layer copy
//   in shared memory, and a block-wide pass applies the epilogue into the other buffer (or the
//   output), 4 elements per thread in flight. The activations are k-major: row k of a buffer
//   starts at k * BMP + (k / 4) * 4 floats (BMP: BM rounded up to 4), so a thread reads its TM
//   rows of one k as TM / 4 float4 loads (float2 / float for TM = 2 / odd) beside one float4 of
//   weights, and the skew keeps the float4 product stores of 8 neighbouring threads (columns 4
//   apart) in distinct banks; the last layer's products are row-major [BM][N rounded up to 4]
//   (the output leaves coalesced). Shared memory: two such buffers, plus the largest weight.
// - warp (v=warp): persistent blocks (a grid of G blocks, each W warps, loop over 32-row tiles)
//   stage every layer's weights in shared memory once ([K][32 or 64], zero-padded columns); each
//   warp then owns its tile through all layers with no block barrier: the tile's activations
//   k-major in a warp-private buffer ([k][36]: float4 reads of a thread's rows, conflict-free
//   stores), every lane an 8 x 8 register tile (rows rg*4+i and 16+rg*4+i, columns cg*4+j and
//   32+cg*4+j; lane = cg*4 + rg) of exact float32 FMAs with two float4 activation and two float4
//   weight loads per k; the products go back into the buffer and one rolled loop (lane = row)
//   applies the epilogue in place, so its code appears once per layer. The last layer's
//   products are stored row-major and its epilogue loop (lane = column) writes the output rows
//   coalesced. Widths up to 64 (one 8 x 8 tile per lane).
// - tensor cores (v=tf32 / 3xtf32 / f16 / bf16): the same persistence; each warp owns MT
//   m16 row tiles. Layer weights live in shared memory in fragment order (a lane's B fragment
//   registers of one (k step, n tile) are one 8-byte load, conflict-free), staged in batches
//   whose loads are all in flight at once; activations never leave registers: the layer's m16n8
//   accumulators (row g / g+8, columns 2t, 2t+1 of each n tile) are exactly the next layer's A
//   fragments for m16n8k16 (columns 2t, 2t+1, 2t+8, 2t+9 of each k step = two n tiles), and for
//   m16n8k8 TF32 once the k order of each k step is permuted (fragment column t holds physical
//   column 2t, t+4 holds 2t+1; the weights' rows are staged in the same order, and a dot
//   product does not depend on the order of its terms). The epilogue runs on the accumulators
//   in registers (epi=reg, unrolled: one copy of its code per fragment element, offered for
//   cheap epilogues only) or through a warp-private [16 MT][SP] float buffer (epi=smem, SP = 8
//   mod 32: conflict-free float2 fragment accesses; a rolled loop, lane = column, applies it
//   and writes the last layer's rows coalesced), or deferred (epi=ilv: the products wait in the
//   buffer and the next layer's rolled k loop computes the epilogue one k step's columns at a
//   time beside the previous step's mmas, one n tile's mmas before each element of the chunk
//   (so that no warp waits on a run of them with its float work behind them), loading each
//   step's A fragments from the buffer: one
//   copy of the epilogue's and the mmas' code per layer, and a float32 sine's range check left
//   to one warp vote per chunk, with an exact redo where it fires; epi=ilvx stages a float32
//   input in the buffer too, so the first layer's loop is rolled the same way and no layer holds
//   a whole A in registers). 3xtf32 keeps weights and activations in float32 and splits each
//   operand x where it is used into hi = tf32(x) and lo = tf32(x - hi), accumulating lo*hi +
//   hi*lo + hi*hi (float32-level accuracy: the dropped lo*lo and the roundings of lo are ~2^-21
//   relative). Widths are padded to the k step (8 or 16) with zero weights; the padded columns'
//   epilogue is not computed (they stay 0). A layer's bias (a constant row the epilogue adds to
//   the product first) starts its accumulators instead of zero (bias_fold).
// - f64 (v=f64, sm_90, offered under float32): the half kernels' k steps of 16 and k order with
//   float32 operands (weights staged as float32 bits, four a lane an entry, A registers too),
//   each step one m16n8k16 DMMA on the operands widened to double, accumulators in double:
//   every product exact, the sums double's, one rounding to float32 per output before its
//   epilogue, so the float32 contract holds with less error than FMAs in float32. The FP64
//   tensor cores run 62-65 TFLOP/s on an H200 (float32 FMAs: 67). The DMMA shape matters in the
//   lab (bench/gpu/lab/dmma_cvt.cu): float work issued beside m16n8k4 DMMAs adds its whole issue
//   time to theirs, beside m16n8k16 ones 2-7% of it. In the MLP kernel the k16 DMMAs measured as
//   fast as the k4 pairs at the best config and up to 14% faster at others (F64_OVERLAP).
// Epilogues that read the layer's input (MlpChain.xin: a gate f(W x + b) * g(x), a residual
// x + f(W x + b)) run in the block design, which still holds that input k-major in its other
// buffer when the epilogue pass runs, and in the tensor-core designs with epi=smem, whose warps
// then alternate two buffers by layer (TcLayout.xbuf) so that the previous layer's float32 result
// is still in the other one (pinned in cexpr: never recomputed; layer 0 loads the chain's input).
// The warp design overwrites it and epi=reg / ilv / ilvx hold it only as operand fragments, so
// cugen_mlp_configs does not offer them for such chains.
// Row reductions in an epilogue (MlpChain.red: a LayerNorm's mean and variance) run in the block
// design and in the tensor-core designs with epi=smem, through one function (emit_row_stats):
// after a layer's products are in shared memory (the block's buffer, or the warp's [16 MT][SP]
// P), one warp per row sums each statistic's input over the row (lanes over the columns, a
// shuffle tree; float32, or double for a float64 statistic), one pass per statistic in
// dependence order, into an array (shared by the block, or warp-private after the warps'
// buffers: TcLayout.nred) that the epilogue pass reads as the row's value. The warp design and
// epi=reg / ilv / ilvx spread a row's columns over lanes' registers and are not offered for them.
// Rows past the last: loads read the last row instead (zeros in the block kernel), epilogues
// see its index, nothing is stored for them (every row of a product depends only on its own
// input row).
// Half storage (--precision fp16 / bf16: the chain's input, weights, biases and activations
// float16 or bfloat16, its output that type or float32 after a CAST): the input and weights are
// read as stored (half the bytes; 16- or 8-byte loads where the widths allow). The SIMT kernels
// convert them on load (weights as staged); the tensor-core kernel of the tensors' type (the only
// one offered, whatever the precision) stages the weights' bits as they are and loads the input's
// straight into its A fragments, the first layer's k order permuted so that a lane's fragment
// columns are 4 or 8 adjacent values (TcLayout.xperm). Accumulation, the epilogues and the
// activations between layers stay float32 (the epilogues through a float32 view of the graph:
// epi_graph), and the output is rounded once to its dtype.
// Needs: cugen_prelude() in the translation unit. Guarantees: the candidate's output as
// prim_interp.c computes it, up to float32 reassociation (block, warp), float32-level operand
// splitting (3xtf32), or the rounding of the operands to TF32 / half / bfloat16 with float32
// accumulation (tf32, f16, bf16); for half storage, up to the interpreter's rounding of every
// intermediate tensor to half, which the kernel does not do (it is the more accurate).
#include "cost_models.h"
#include "cugen_linear.h"
#include "cugen_mlp.h"
#include "device_model.h"

#include "../../codegen/cexpr.h"
#include "../../codegen/mlp_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// KernelConfig.p[] slots of CuMlpConfig's fields (cugen_mlp.h).
enum { Q_BM, Q_T, Q_TM, Q_TN, Q_STAGE, Q_VAR, Q_W, Q_MT, Q_EPI, Q_G, Q_BPS };
_Static_assert((int)Q_VAR == (int)CUMLP_VAR, "the variant's slot is public");

// ---- shared by the variants: the epilogue through cexpr ----

typedef struct CEm {
    const MlpChain *m;
    const char *fn;
    StrBuf *s;
    Cexpr *x;
    int cur;         // the layer whose product the reader answers for (-1: none)
    const char *acc; // the variable holding that product at the current index
    // The variable holding the layer's input at the current index, for epilogues that read it
    // (MlpChain.xin); NULL where the design does not hold it (block and epi=smem hold it).
    const char *xin;
    // Row statistics (MlpChain.red) of the current layer computed so far (n_rs of them), in
    // shared arrays rs_<k> indexed by the tile's row `rrow` (a C expression); NULL where the
    // design computes none (the block design and the tensor cores' epi=smem do:
    // emit_row_stats).
    const char *rrow;
    int n_rs;
} CEm;

static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    (void)code;
    (void)indent;
    const CEm *E = ctx;
    for (int k = 0; E->cur >= 0 && E->rrow && k < E->n_rs; k++)
        if (rq->tensor == E->m->pg->prims[E->m->red[E->cur][k]]->out[0]) {
            snprintf(out, cap, "rs_%d[%s]", k, E->rrow);
            return ST_OK;
        }
    if (E->cur < 0 || rq->tensor != E->m->tl[E->cur])
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: tensor %d is not the current layer's product", E->fn,
                       rq->tensor);
    snprintf(out, cap, "%s", E->acc);
    return ST_OK;
}

// Emits `{ ...; DEST = value; }`: tensor t of layer l's epilogue (its result, or a row
// reduction's input) at column `col` and row `row` (C expressions; the row a valid one), the
// product in variable `acc`.
static int emit_value(CEm *E, int l, int t, const char *acc, const char *col, const char *row,
                      const char *dest, int ind, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    if (t == m->tl[l]) {
        sb_line(s, ind, "%s = %s;\n", dest, acc);
        return ST_OK;
    }
    // Layer 0's input is the chain's input (or its CAST), which cexpr can load where the design
    // holds no copy of it; a later layer's would be recomputed from an earlier layer: refused.
    if (m->xin[l] && !E->xin && l > 0)
        return err_set(e, ST_UNSUPPORTED, "CUDA mlp kernel %s: layer %d's epilogue reads %s", E->fn,
                       l, "the layer's input, which only the block design holds");
    if (m->n_red[l] > 0 && !E->rrow)
        return err_set(e, ST_UNSUPPORTED, "CUDA mlp kernel %s: layer %d's epilogue reduces %s",
                       E->fn, l, "over the row, which this design does not");
    sb_line(s, ind, "{\n");
    sb_line(s, ind + 1, "const int64_t e_c = %s;\n", col);
    sb_line(s, ind + 1, "int64_t q_r = %s;\n", row);
    char names[ORCH_MAX_RANK][24];
    const char *ix[ORCH_MAX_RANK];
    for (int d = m->rank - 2; d >= 0; d--) {
        snprintf(names[d], sizeof names[d], "e_i%d", d);
        sb_line(s, ind + 1, "const int64_t e_i%d = q_r %% %lld; q_r /= %lld; (void)e_i%d;\n", d,
                (long long)m->lead[d], (long long)m->lead[d], d);
        ix[d] = names[d];
    }
    sb_line(s, ind + 1, "(void)q_r;\n");
    ix[m->rank - 1] = "e_c";
    E->cur = l;
    E->acc = acc;
    // The layer's input, where the epilogue reads it, is the design's local (never recomputed).
    cexpr_pin(E->x, m->xin[l] && E->xin ? m->in[l] : -1, E->xin);
    char v[64];
    int rc = cexpr_value(E->x, t, ix, s, ind + 1, v, sizeof v, e);
    cexpr_pin(E->x, -1, NULL);
    E->cur = -1;
    cexpr_forget(E->x);
    if (rc)
        return rc;
    sb_line(s, ind + 1, "%s = %s;\n", dest, v);
    sb_line(s, ind, "}\n");
    return ST_OK;
}

// Layer l's epilogue (emit_value of its result).
static int emit_epi(CEm *E, int l, const char *acc, const char *col, const char *row,
                    const char *dest, int ind, Err *e) {
    return emit_value(E, l, E->m->act[l], acc, col, row, dest, ind, e);
}

// ---- half storage (float16 / bfloat16 chains) ----

static bool half_chain(const MlpChain *m) {
    return m->dtype != DT_FLOAT;
}

static DType out_dtype(const MlpChain *m) {
    return m->pg->tensors[m->c->output]->dtype;
}

static bool is_half(DType t) {
    return t == DT_FLOAT16 || t == DT_BFLOAT16;
}

// The conversions of half storage: hardware cvt for float16 (the prelude's portable version
// loops over subnormals), a shift and the prelude's integer rounding for bfloat16 (sm_80's
// cvt.rn.bf16 would exclude older GPUs from the SIMT kernels).
static const char *h2f_fn(DType t) {
    return t == DT_BFLOAT16 ? "orch_mlp_b2f" : "orch_mlp_h2f";
}

static const char *f2h_fn(DType t) {
    return t == DT_BFLOAT16 ? "orch_mlp_f2b" : "orch_mlp_f2h";
}

// A float32 input value `v` as the chain reads it: as it is, or rounded to the chain's half type
// where the chain starts with a CAST of it (MlpChain.x_cast). Returns a thread-local buffer
// (compiles may emit in several threads).
static const char *xval(const MlpChain *m, const char *v) {
    static _Thread_local char buf[160];
    if (!m->x_cast)
        return v;
    snprintf(buf, sizeof buf, "%s(%s(%s))", h2f_fn(m->dtype), f2h_fn(m->dtype), v);
    return buf;
}

// Device helpers of half chains, once per translation unit: the conversions, and a half kernel
// input seen as float values (OrchMlpF16In / OrchMlpBF16In), through which the epilogues read
// their half constants: cexpr reads input j as in<j>[offset] (epi_graph).
static void emit_half_helpers(StrBuf *s) {
    sb_puts(s, "#ifndef ORCH_MLP_HALF_HELPERS\n"
               "#define ORCH_MLP_HALF_HELPERS\n"
               "ORCH_DEV float orch_mlp_h2f(uint16_t h) {\n"
               "    float f;\n"
               "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
               "    return f;\n"
               "}\n"
               "ORCH_DEV uint16_t orch_mlp_f2h(float x) {\n"
               "    uint16_t h;\n"
               "    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x));\n"
               "    return h;\n"
               "}\n"
               "ORCH_DEV float orch_mlp_b2f(uint16_t h) {\n"
               "    return __uint_as_float((uint32_t)h << 16);\n"
               "}\n"
               "ORCH_DEV uint16_t orch_mlp_f2b(float x) { return orch_f32_to_bf16(x); }\n"
               "struct OrchMlpF16In {\n"
               "    const uint16_t *p;\n"
               "    __device__ __forceinline__ float operator[](int64_t i) const {\n"
               "        return orch_mlp_h2f(__ldg(p + i));\n"
               "    }\n"
               "};\n"
               "struct OrchMlpBF16In {\n"
               "    const uint16_t *p;\n"
               "    __device__ __forceinline__ float operator[](int64_t i) const {\n"
               "        return orch_mlp_b2f(__ldg(p + i));\n"
               "    }\n"
               "};\n"
               "#endif\n");
}

// A layer's bias folded into its accumulators (the tensor-core kernels): where the first thing
// the layer's epilogue does with the product is add a constant row to it (a kernel input every
// dim of which is 1 but the last, N or 1: a Linear's bias broadcast over the rows), and nothing
// else reads the product, the accumulators start at the bias instead of zero and the ADD
// becomes a copy in the epilogues' view of the graph (epi_graph). Each element then saves the
// add and the bias's load, and the f64 kernel rounds product plus bias once (the sum in double)
// where the graph rounds twice. The staged bias sits in shared memory in the accumulators'
// type (TcLayout.bofs), zero in the padded columns (their products stay 0).
typedef struct BiasFold {
    int prim;    // the ELEMWISE primitive (index in pg->prims) adding the bias; -1: no fold
    int instr;   // its instruction
    int keep;    // the argument of that instruction that reads the product (0 or 1)
    int pos;     // the bias's position in c->inputs
    bool scalar; // one value for every column
} BiasFold;

static void bias_fold(const MlpChain *m, int l, BiasFold *f) {
    memset(f, 0, sizeof *f);
    f->prim = -1;
    if (!m->epi[l])
        return;
    const PrimGraph *pg = m->pg;
    const Candidate *c = m->c;
    int t = m->tl[l], rd = -1;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] == t) {
                if (rd >= 0 && rd != c->prims[i])
                    return; // two readers
                rd = c->prims[i];
            }
    }
    if (rd < 0)
        return;
    const Prim *p = pg->prims[rd];
    const Tensor *tt = pg->tensors[t];
    if (p->kind != PRIM_ELEMWISE || p->n_out != 1 || p->out[0] < 0)
        return;
    const Tensor *out = pg->tensors[p->out[0]];
    if (out->rank != tt->rank ||
        memcmp(out->dims, tt->dims, sizeof(int64_t) * (size_t)tt->rank) != 0)
        return; // the product broadcast to a larger shape
    int hit = -1, keep = -1;
    for (int k = 0; k < p->ew.n; k++) {
        const EwInstr *I = &p->ew.code[k];
        for (int a = 0; a < ew_op_arity(I->op); a++)
            if (I->arg[a].src == EWS_INPUT && p->in[I->arg[a].index] == t) {
                if (hit >= 0)
                    return; // read twice
                hit = k;
                keep = a;
            }
    }
    if (hit < 0)
        return;
    const EwInstr *I = &p->ew.code[hit];
    const EwArg *o = &I->arg[1 - keep];
    if (I->op != EW_ADD || I->dtype != m->dtype || o->src != EWS_INPUT)
        return;
    int b = p->in[o->index], pos = b >= 0 ? cgen_input_pos(c, b) : -1;
    if (pos < 0 || b == t)
        return;
    const Tensor *B = pg->tensors[b];
    if (B->dtype != m->dtype || B->rank > tt->rank)
        return;
    for (int d = 0; d + 1 < B->rank; d++)
        if (B->dims[d] != 1)
            return;
    int64_t last = B->rank > 0 ? B->dims[B->rank - 1] : 1;
    if (last != 1 && last != m->N[l])
        return;
    *f = (BiasFold){rd, hit, keep, pos, last == 1};
}

// The graph the epilogues are emitted from: the graph itself, or a view of it (copies of the
// tensors and ELEMWISE programs it changes; the graph untouched) where
// - a half chain's epilogues compute in float32 (the layers' accumulators stay float between
//   layers, as the activations of a float32 chain do): every float16 / bfloat16 tensor of the
//   candidate is float32, so cexpr emits float math (the fast transcendentals under reduced
//   precision) with no rounding between instructions, reading half inputs through the float
//   views emit_head declares. The interpreter rounds every intermediate to half: the kernel is
//   the more accurate of the two.
// - a folded bias's ADD (folds: per layer, NULL for none) is a COPY of the product, which the
//   accumulators then hold with the bias added.
typedef struct EpiGraph {
    PrimGraph pg;
    Tensor **tensors, *tcopy;
    Prim **prims, *pcopy;
    EwInstr *code;
} EpiGraph;

static const BiasFold *fold_of(const MlpChain *m, const BiasFold *folds, int prim) {
    for (int l = 0; folds && l < m->n; l++)
        if (folds[l].prim == prim)
            return &folds[l];
    return NULL;
}

static const PrimGraph *epi_graph(const MlpChain *m, const BiasFold *folds, EpiGraph *V) {
    memset(V, 0, sizeof *V);
    const PrimGraph *pg = m->pg;
    const Candidate *c = m->c;
    bool half = half_chain(m), any = false;
    for (int l = 0; folds && l < m->n; l++)
        any |= folds[l].prim >= 0;
    if (!half && !any)
        return pg;
    int nt = 0, ni = 0;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        nt += p->n_in + p->n_out;
        ni += p->kind == PRIM_ELEMWISE ? p->ew.n : 0;
    }
    V->pg = *pg;
    V->tensors = xmalloc(sizeof(Tensor *) * ((size_t)pg->n_tensors + 1));
    memcpy(V->tensors, pg->tensors, sizeof(Tensor *) * (size_t)pg->n_tensors);
    V->prims = xmalloc(sizeof(Prim *) * ((size_t)pg->n_prims + 1));
    memcpy(V->prims, pg->prims, sizeof(Prim *) * (size_t)pg->n_prims);
    V->tcopy = xmalloc(sizeof(Tensor) * ((size_t)nt + 1));
    V->pcopy = xmalloc(sizeof(Prim) * ((size_t)c->n_prims + 1));
    V->code = xmalloc(sizeof(EwInstr) * ((size_t)ni + 1));
    int ntc = 0, nic = 0;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        for (int j = 0; half && j < p->n_in + p->n_out; j++) {
            int t = j < p->n_in ? p->in[j] : p->out[j - p->n_in];
            if (t < 0 || V->tensors[t] != pg->tensors[t] || !is_half(pg->tensors[t]->dtype))
                continue; // absent, already copied, or not half
            V->tcopy[ntc] = *pg->tensors[t];
            V->tcopy[ntc].dtype = DT_FLOAT;
            V->tensors[t] = &V->tcopy[ntc++];
        }
        const BiasFold *f = fold_of(m, folds, c->prims[i]);
        if (p->kind != PRIM_ELEMWISE || (!half && !f))
            continue;
        Prim *q = &V->pcopy[i];
        *q = *p;
        q->ew.code = V->code + nic;
        for (int k = 0; k < p->ew.n; k++) {
            q->ew.code[k] = p->ew.code[k];
            if (half && is_half(q->ew.code[k].dtype))
                q->ew.code[k].dtype = DT_FLOAT;
        }
        if (f) {
            EwInstr *I = &q->ew.code[f->instr];
            I->op = EW_COPY;
            I->arg[0] = p->ew.code[f->instr].arg[f->keep];
        }
        nic += p->ew.n;
        V->prims[c->prims[i]] = q;
    }
    V->pg.tensors = V->tensors;
    V->pg.prims = V->prims;
    return &V->pg;
}

static void epi_graph_free(EpiGraph *V) {
    free(V->tensors);
    free(V->tcopy);
    free(V->prims);
    free(V->pcopy);
    free(V->code);
}

// The name the kernel's own loads of input pos use: the pointer as stored (in<j>, or inh<j> for a
// half input, whose in<j> is the epilogues' float view).
static void raw_name(const MlpChain *m, int pos, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%d", is_half(m->pg->tensors[m->c->inputs[pos]]->dtype) ? "inh" : "in",
             pos);
}

// `o[idx] = v;` with the float value v converted to the output's dtype (rounded once).
static void emit_out_store(const MlpChain *m, StrBuf *s, int ind, const char *idx, const char *v) {
    DType ot = out_dtype(m);
    if (is_half(ot))
        sb_line(s, ind, "o[%s] = %s(%s);\n", idx, f2h_fn(ot), v);
    else
        sb_line(s, ind, "o[%s] = %s;\n", idx, v);
}

// Layer l's epilogue (emit_epi) stored into the output at flat index idx, in its dtype.
static int emit_epi_out(CEm *E, int l, const char *acc, const char *col, const char *row,
                        const char *idx, int ind, Err *e) {
    char dest[128];
    if (!is_half(out_dtype(E->m))) {
        snprintf(dest, sizeof dest, "o[%s]", idx);
        return emit_epi(E, l, acc, col, row, dest, ind, e);
    }
    StrBuf *s = E->s;
    sb_line(s, ind, "{\n");
    sb_line(s, ind + 1, "float y_;\n");
    int rc = emit_epi(E, l, acc, col, row, "y_", ind + 1, e);
    if (rc)
        return rc;
    emit_out_store(E->m, s, ind + 1, idx, "y_");
    sb_line(s, ind, "}\n");
    return ST_OK;
}

// The kernel's signature and its input pointers in<j>, the output o. Half inputs also get their
// stored pointer inh<j>, and in<j> is the float view the epilogues read through.
static void emit_head(const MlpChain *m, const char *fn, int64_t T, int64_t min_blocks, StrBuf *s) {
    const Candidate *c = m->c;
    if (min_blocks > 0)
        sb_printf(s, "ORCH_KERNEL void __launch_bounds__(%lld, %lld) %s(OrchArgs a) {\n",
                  (long long)T, (long long)min_blocks, fn);
    else
        sb_printf(s, "ORCH_KERNEL void __launch_bounds__(%lld) %s(OrchArgs a) {\n", (long long)T,
                  fn);
    sb_line(s, 1, "const void *in[%d];\n", c->n_inputs > 0 ? c->n_inputs : 1);
    for (int j = 0; j < c->n_inputs; j++) {
        DType dt = m->pg->tensors[c->inputs[j]]->dtype;
        const char *ct = cgen_ctype(dt);
        sb_line(s, 1, "in[%d] = a.in[%d];\n", j, j);
        if (half_chain(m) && is_half(dt)) {
            sb_line(s, 1, "const uint16_t *__restrict__ inh%d = (const uint16_t *)a.in[%d];\n", j,
                    j);
            sb_line(s, 1, "const %s in%d = {inh%d};\n",
                    dt == DT_BFLOAT16 ? "OrchMlpBF16In" : "OrchMlpF16In", j, j);
            sb_line(s, 1, "(void)inh%d;\n", j);
        } else {
            sb_line(s, 1, "const %s *__restrict__ in%d = (const %s *)a.in[%d];\n", ct, j, ct, j);
        }
        sb_line(s, 1, "(void)in%d;\n", j);
    }
    sb_line(s, 1, "(void)in;\n");
    const char *ot = cgen_ctype(out_dtype(m));
    sb_line(s, 1, "%s *__restrict__ o = (%s *)a.out;\n", ot, ot);
}

// Bytes of the chain's input and output (each crosses DRAM once).
static double io_bytes(const MlpChain *m) {
    double xb = (double)dtype_size(m->dtype), ob = (double)dtype_size(out_dtype(m));
    if (xb == ob)
        return xb * (double)m->R * (double)(m->K[0] + m->N[m->n - 1]);
    return (double)m->R * (xb * (double)m->K[0] + ob * (double)m->N[m->n - 1]);
}

// ---- block kernel ----

// The activation buffers' layout. k-major: row k (a column of the previous layer's products)
// starts at k * bmp + (k >> 2) * 4 floats: bmp is BM rounded up to 4 (float4 reads of a
// thread's TM rows stay 16-byte aligned) and a multiple of 32 for the offered BM, so the skew of
// 4 floats per 4 rows puts the product stores of 8 neighbouring threads (columns 4 apart) in 8
// different 16-byte bank groups. The last layer's products are row-major with stride so (the
// output leaves coalesced). Each buffer holds abuf floats (a multiple of 4: b1 and the staged
// weights stay 16-byte aligned).
typedef struct BlockLayout {
    int64_t bmp, so, abuf;
} BlockLayout;

static int64_t kofs(const BlockLayout *L, int64_t k) {
    return k * L->bmp + (k >> 2) * 4;
}

static void block_layout(const MlpChain *m, int64_t BM, BlockLayout *L) {
    int64_t w = 0; // the widest layer input: every product read k-major
    for (int l = 0; l < m->n; l++)
        w = ORCH_MAX(w, m->K[l]);
    L->bmp = (BM + 3) / 4 * 4;
    L->so = (m->N[m->n - 1] + 3) / 4 * 4;
    L->abuf = ORCH_MAX(kofs(L, w - 1) + L->bmp, BM * L->so);
    L->abuf = (L->abuf + 3) / 4 * 4;
}

static int64_t max_kn(const MlpChain *m) {
    int64_t w = 0;
    for (int l = 0; l < m->n; l++)
        w = ORCH_MAX(w, m->K[l] * m->N[l]);
    return w;
}

// Row statistics (MlpChain.red): the most a layer has; each takes BM doubles (2 BM floats) of
// shared memory after the buffers and the staged weights, from an even float offset (8-byte
// aligned).
static int max_red(const MlpChain *m) {
    int r = 0;
    for (int l = 0; l < m->n; l++)
        r = ORCH_MAX(r, m->n_red[l]);
    return r;
}

static int64_t red_ofs(const MlpChain *m, int64_t BM, bool stage) {
    BlockLayout L;
    block_layout(m, BM, &L);
    return (2 * L.abuf + (stage ? max_kn(m) : 0) + 1) / 2 * 2;
}

static int64_t smem_bytes(const MlpChain *m, int64_t BM, bool stage) {
    BlockLayout L;
    block_layout(m, BM, &L);
    if (m->any_red)
        return (red_ofs(m, BM, stage) + 2 * BM * max_red(m)) * 4;
    return (2 * L.abuf + (stage ? max_kn(m) : 0)) * 4;
}

// Where a design holds a layer's products while it computes their row statistics
// (emit_row_stats): the row loop (rr = first, first + step, ... < rows: the rows one warp
// reduces), C expressions of rr and the column cc, and where the statistics go.
typedef struct RowStats {
    int ind;                  // the emitted code's indentation
    const char *first, *step; // the warp's rows
    int64_t rows;             // the tile's rows
    const char *unroll;       // a pragma line for the row loop, or NULL
    char gr[96];              // the global row of rr (clamped to a valid one)
    char acc[96];             // the product at (rr, cc)
    char xin[96];             // the layer's input at (rr, cc); "" where cexpr loads it
    const char *base;         // statistic k at (vt *)(base + ofs + k * stride): 4-byte words
    int64_t ofs, stride;      // words, even (a double statistic takes 2 a row)
    const char *sync;         // the barrier after each statistic
} RowStats;

// Layer l's row statistics, after its products are where R says: one warp a row (lanes over
// the columns, a shuffle tree at the end), each statistic the sum of its reduction's input over
// the row's N columns (emit_value: from the product, the layer's input and the statistics
// before it), divided for a mean, into rs_<k>[rr]. Accumulated in float32, or in double where
// the statistic is float64 (the LayerNorm rule's mean), whatever the chain's storage. One
// function for the block design (statistics in shared arrays of the block's rows) and the
// tensor cores' epi=smem (warp-private arrays of the warp's rows); rows past the last reduce
// what the design holds for them (zeros, or the last row's products).
static int emit_row_stats(CEm *E, int l, const RowStats *R, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    int64_t N = m->N[l];
    int ind = R->ind;
    for (int k = 0; k < m->n_red[l]; k++) {
        DType dt = m->pg->tensors[m->pg->prims[m->red[l][k]]->out[0]]->dtype;
        const char *vt = dt == DT_DOUBLE ? "double" : "float";
        sb_line(s, ind, "%s *rs_%d = (%s *)(%s + %lld);\n", vt, k, vt, R->base,
                (long long)(R->ofs + R->stride * k));
    }
    for (int k = 0; k < m->n_red[l]; k++) {
        const Prim *p = m->pg->prims[m->red[l][k]];
        DType dt = m->pg->tensors[p->out[0]]->dtype;
        const char *vt = dt == DT_DOUBLE ? "double" : "float";
        if (R->unroll)
            sb_line(s, ind, "%s\n", R->unroll);
        sb_line(s, ind, "for (int rr = %s; rr < %lld; rr += %s) { // statistic %d\n", R->first,
                (long long)R->rows, R->step, k);
        sb_line(s, ind + 1, "const int64_t gr = %s;\n", R->gr);
        sb_line(s, ind + 1, "%s s_ = 0;\n", vt);
        sb_line(s, ind + 1, "for (int cc = threadIdx.x & 31; cc < %lld; cc += 32) {\n",
                (long long)N);
        sb_line(s, ind + 2, "const float acc = %s;\n", R->acc);
        if (R->xin[0])
            sb_line(s, ind + 2, "const float xin_ = %s;\n", R->xin);
        sb_line(s, ind + 2, "%s v_;\n", vt);
        E->xin = R->xin[0] ? "xin_" : NULL;
        E->rrow = "rr";
        E->n_rs = k;
        int rc = emit_value(E, l, p->in[0], "acc", "cc", "gr", "v_", ind + 2, e);
        E->xin = NULL;
        if (rc)
            return rc;
        sb_line(s, ind + 2, "s_ += v_;\n");
        sb_line(s, ind + 1, "}\n");
        sb_line(s, ind + 1, "#pragma unroll\n");
        sb_line(
            s, ind + 1,
            "for (int o_ = 16; o_ > 0; o_ >>= 1) s_ += __shfl_xor_sync(0xffffffffu, s_, o_);\n");
        if (p->red.op == RED_MEAN)
            sb_line(s, ind + 1, "if ((threadIdx.x & 31) == 0) rs_%d[rr] = s_ / (%s)%lld;\n", k, vt,
                    (long long)N);
        else
            sb_line(s, ind + 1, "if ((threadIdx.x & 31) == 0) rs_%d[rr] = s_;\n", k);
        sb_line(s, ind, "}\n");
        sb_line(s, ind, "%s\n", R->sync);
    }
    E->n_rs = m->n_red[l];
    return ST_OK;
}

// The block design's: a warp a row of the block's BM (T / 32 warps), the products in dst
// (k-major, or row-major [BM][SO] in the last layer), the layer's input k-major in src, the
// statistics in shared memory after the buffers and the staged weights.
static int emit_block_row_stats(CEm *E, int l, const CuMlpConfig *cfg, const BlockLayout *L,
                                const char *src, const char *dst, Err *e) {
    const MlpChain *m = E->m;
    int64_t BM = cfg->bm;
    char step[24];
    snprintf(step, sizeof step, "%lld", (long long)(cfg->t / 32));
    RowStats R = {.ind = 2,
                  .first = "threadIdx.x >> 5",
                  .step = step,
                  .rows = BM,
                  .base = "orch_mlp_sm",
                  .ofs = red_ofs(m, BM, cfg->stage != 0),
                  .stride = 2 * BM,
                  .sync = "__syncthreads();"};
    snprintf(R.gr, sizeof R.gr, "i0 + rr < %lld ? i0 + rr : %lld", (long long)m->R,
             (long long)(m->R - 1));
    if (l == m->n - 1)
        snprintf(R.acc, sizeof R.acc, "%s[rr * %lld + cc]", dst, (long long)L->so);
    else
        snprintf(R.acc, sizeof R.acc, "%s[cc * %lld + (cc >> 2) * 4 + rr]", dst, (long long)L->bmp);
    if (m->xin[l])
        snprintf(R.xin, sizeof R.xin, "%s[cc * %lld + (cc >> 2) * 4 + rr]", src, (long long)L->bmp);
    return emit_row_stats(E, l, &R, e);
}

static int layer_tn(const MlpChain *m, int l, int tn) {
    while (tn > 1 && m->N[l] % tn)
        tn /= 2;
    return tn;
}

// The widest vector (4, 2, 1 floats) a thread reads its TM rows of one k with.
static int row_vec(int TM) {
    return TM % 4 == 0 ? 4 : TM % 2 == 0 ? 2 : 1;
}

// `n` k steps (n <= 4, the first at a multiple of 4): the activations of the thread's rows of
// k step kk at a4 + kk * bmp, its weights at w4 + kk * N (wh: half weights read in place, of
// type wt, converted as loaded; four of them one 8-byte load).
static void emit_ksteps(StrBuf *s, int ind, const BlockLayout *L, int64_t N, int TM, int TN,
                        bool stage, int64_t n, bool wh, DType wt) {
    int VW = row_vec(TM);
    static const char *const comp[] = {"x", "y", "z", "w"};
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int kk = 0; kk < %lld; kk++) {\n", (long long)n);
    sb_line(s, ind + 1, "const float *ak = a4 + kk * %lld;\n", (long long)L->bmp);
    sb_line(s, ind + 1, "float av[%d];\n", TM);
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int g = 0; g < %d; g++) {\n", TM / VW);
    if (VW == 1) {
        sb_line(s, ind + 2, "av[g] = ak[g];\n");
    } else {
        sb_line(s, ind + 2, "const float%d v = *(const float%d *)(ak + g * %d);\n", VW, VW, VW);
        for (int u = 0; u < VW; u++)
            sb_line(s, ind + 2, "av[g * %d + %d] = v.%s;\n", VW, u, comp[u]);
    }
    sb_line(s, ind + 1, "}\n");
    if (wh) {
        const char *cv = h2f_fn(wt);
        if (TN == 4) {
            sb_line(s, ind + 1, "const uint2 w4h = __ldg((const uint2 *)(w4 + kk * %lld));\n",
                    (long long)N);
            sb_line(s, ind + 1,
                    "const float wv[4] = {%s((uint16_t)(w4h.x & 0xffffu)), %s((uint16_t)(w4h.x >> "
                    "16)), %s((uint16_t)(w4h.y & 0xffffu)), %s((uint16_t)(w4h.y >> 16))};\n",
                    cv, cv, cv, cv);
        } else {
            sb_line(s, ind + 1, "float wv[%d];\n", TN);
            sb_line(s, ind + 1, "#pragma unroll\n");
            sb_line(s, ind + 1,
                    "for (int j = 0; j < %d; j++) wv[j] = %s(__ldg(w4 + kk * %lld + j));\n", TN, cv,
                    (long long)N);
        }
    } else if (TN == 4) {
        if (stage)
            sb_line(s, ind + 1, "const float4 w4v = *(const float4 *)(w4 + kk * %lld);\n",
                    (long long)N);
        else
            sb_line(s, ind + 1, "const float4 w4v = __ldg((const float4 *)(w4 + kk * %lld));\n",
                    (long long)N);
        sb_line(s, ind + 1, "const float wv[4] = {w4v.x, w4v.y, w4v.z, w4v.w};\n");
    } else {
        sb_line(s, ind + 1, "float wv[%d];\n", TN);
        sb_line(s, ind + 1, "#pragma unroll\n");
        sb_line(s, ind + 1, "for (int j = 0; j < %d; j++) wv[j] = %s(w4 + kk * %lld + j);\n", TN,
                stage ? "*" : "__ldg", (long long)N);
    }
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int i = 0; i < %d; i++)\n", TM);
    sb_line(s, ind + 2, "#pragma unroll\n");
    sb_line(s, ind + 2,
            "for (int j = 0; j < %d; j++) acc_[i][j] = fmaf(av[i], wv[j], acc_[i][j]);\n", TN);
    sb_line(s, ind, "}\n");
}

// Layer l: products, epilogue, store (into dst, or the output for the last layer).
static int emit_layer(CEm *E, int l, const CuMlpConfig *cfg, const BlockLayout *L, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    int64_t BM = cfg->bm, T = cfg->t, BMP = L->bmp, SO = L->so;
    int TM = (int)cfg->tm, TN = layer_tn(m, l, (int)cfg->tn), VW = row_vec(TM);
    bool stage = cfg->stage != 0, last = l == m->n - 1;
    int64_t K = m->K[l], N = m->N[l], NCB = N / TN, items = BM / TM * NCB;
    const char *src = l % 2 ? "b1" : "b0", *dst = l % 2 ? "b0" : "b1";
    bool wh = half_chain(m) && !stage; // half weights read in place
    char wn[16];
    raw_name(m, m->w_pos[l], wn, sizeof wn);
    sb_line(s, 1, "{ // layer %d: %lld -> %lld\n", l, (long long)K, (long long)N);
    if (stage) {
        if (half_chain(m)) // converted once, as staged
            sb_line(s, 2, "for (int q = threadIdx.x; q < %lld; q += %lld) ws[q] = %s(%s[q]);\n",
                    (long long)(K * N), (long long)T, h2f_fn(m->dtype), wn);
        else
            sb_line(s, 2, "for (int q = threadIdx.x; q < %lld; q += %lld) ws[q] = in%d[q];\n",
                    (long long)(K * N), (long long)T, m->w_pos[l]);
        sb_line(s, 2, "__syncthreads();\n");
        sb_line(s, 2, "const float *__restrict__ w = ws;\n");
    } else if (wh) {
        sb_line(s, 2, "const uint16_t *__restrict__ w = %s;\n", wn);
    } else {
        sb_line(s, 2, "const float *__restrict__ w = in%d;\n", m->w_pos[l]);
    }
    sb_line(s, 2, "for (int it = threadIdx.x; it < %lld; it += %lld) {\n", (long long)items,
            (long long)T);
    sb_line(s, 3, "const int rb = it / %lld, cb = it - rb * %lld;\n", (long long)NCB,
            (long long)NCB);
    sb_line(s, 3, "const int r0 = rb * %d, c0 = cb * %d;\n", TM, TN);
    sb_line(s, 3, "float acc_[%d][%d];\n", TM, TN);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i = 0; i < %d; i++)\n", TM);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int j = 0; j < %d; j++) acc_[i][j] = 0.0f;\n", TN);
    sb_line(s, 3, "const float *ap = %s + r0;\n", src);
    sb_line(s, 3, "const %s *wp = w + c0;\n", wh ? "uint16_t" : "float");
    // k in groups of 4 (rows 4 k4 .. 4 k4 + 3 lie at constant offsets from the group's start),
    // then the rest.
    if (K >= 4) {
        sb_line(s, 3, "#pragma unroll 2\n");
        sb_line(s, 3, "for (int k4 = 0; k4 < %lld; k4++) {\n", (long long)(K / 4));
        sb_line(s, 4, "const float *a4 = ap + k4 * %lld;\n", (long long)kofs(L, 4));
        sb_line(s, 4, "const %s *w4 = wp + k4 * %lld;\n", wh ? "uint16_t" : "float",
                (long long)(4 * N));
        emit_ksteps(s, 4, L, N, TM, TN, stage, 4, wh, m->dtype);
        sb_line(s, 3, "}\n");
    }
    if (K % 4) {
        sb_line(s, 3, "{\n");
        sb_line(s, 4, "const float *a4 = ap + %lld;\n", (long long)kofs(L, K / 4 * 4));
        sb_line(s, 4, "const %s *w4 = wp + %lld;\n", wh ? "uint16_t" : "float",
                (long long)(K / 4 * 4 * N));
        emit_ksteps(s, 4, L, N, TM, TN, stage, K % 4, wh, m->dtype);
        sb_line(s, 3, "}\n");
    }
    // The raw products into dst (k-major for the next layer, row-major for the output); the
    // epilogue follows in a pass of its own.
    if (!last) {
        static const char *const mk[] = {"", "", "make_float2", "", "make_float4"};
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int j = 0; j < %d; j++) {\n", TN);
        sb_line(s, 4, "float *dq = %s + (c0 + j) * %lld + ((c0 + j) >> 2) * 4 + r0;\n", dst,
                (long long)BMP);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int g = 0; g < %d; g++)\n", TM / VW);
        if (VW == 1)
            sb_line(s, 5, "dq[g] = acc_[g][j];\n");
        else if (VW == 2)
            sb_line(s, 5, "*(float2 *)(dq + g * 2) = %s(acc_[g * 2][j], acc_[g * 2 + 1][j]);\n",
                    mk[2]);
        else
            sb_line(s, 5,
                    "*(float4 *)(dq + g * 4) = %s(acc_[g * 4][j], acc_[g * 4 + 1][j], "
                    "acc_[g * 4 + 2][j], acc_[g * 4 + 3][j]);\n",
                    mk[4]);
        sb_line(s, 3, "}\n");
    } else {
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int i = 0; i < %d; i++) {\n", TM);
        sb_line(s, 4, "float *dq = %s + (r0 + i) * %lld + c0;\n", dst, (long long)SO);
        if (TN == 4) {
            sb_line(s, 4,
                    "*(float4 *)dq = make_float4(acc_[i][0], acc_[i][1], acc_[i][2], "
                    "acc_[i][3]);\n");
        } else {
            sb_line(s, 4, "#pragma unroll\n");
            sb_line(s, 4, "for (int j = 0; j < %d; j++) dq[j] = acc_[i][j];\n", TN);
        }
        sb_line(s, 3, "}\n");
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    if (!m->epi[l] && !last) {
        sb_line(s, 1, "}\n");
        return ST_OK;
    }
    int rc = emit_block_row_stats(E, l, cfg, L, src, dst, e);
    if (rc)
        return rc;
    // The epilogue over the tile: one copy of its code, U elements per thread and step (each a
    // long dependent chain: U of them in flight), loaded before and stored after all U are
    // computed so that the compiler need not prove the in-place accesses distinct. Thread q
    // takes column q / BM, row q % BM of the k-major products (conflict-free, the column's
    // constants one broadcast), or, in the last layer, row q / N, column q % N of the row-major
    // ones (the output's stores coalesced). Rows past the last see the last row's index (an
    // epilogue constant may be as large as the output); nothing is stored for them, and the
    // next layer reads them as zeros.
    int64_t tot = BM * N, per = (tot + T - 1) / T, R = m->R;
    int U = per >= 4 ? 4 : per >= 2 ? 2 : 1;
    bool full = tot % (U * T) == 0;
    char at[96], guard[64] = "";
    if (last)
        snprintf(at, sizeof at, "%s[r_[u] * %lld + c_[u]]", dst, (long long)SO);
    else
        snprintf(at, sizeof at, "%s[c_[u] * %lld + (c_[u] >> 2) * 4 + r_[u]]", dst, (long long)BMP);
    if (!full)
        snprintf(guard, sizeof guard, "q0 + u * %lld < %lld", (long long)T, (long long)tot);
    sb_line(s, 2, "for (int q0 = threadIdx.x; q0 < %lld; q0 += %lld) {\n", (long long)tot,
            (long long)(U * T));
    sb_line(s, 3, "int r_[%d], c_[%d];\n", U, U);
    sb_line(s, 3, "float xv[%d];\n", U);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int u = 0; u < %d; u++) {\n", U);
    // Past the end: a valid index, and no read (another thread may be writing that element).
    if (full)
        sb_line(s, 4, "const int q = q0 + u * %lld;\n", (long long)T);
    else
        sb_line(s, 4, "const int q = min(q0 + u * %lld, %lld);\n", (long long)T,
                (long long)(tot - 1));
    if (last) {
        sb_line(s, 4, "r_[u] = q / %lld;\n", (long long)N);
        sb_line(s, 4, "c_[u] = q - r_[u] * %lld;\n", (long long)N);
    } else {
        sb_line(s, 4, "c_[u] = q / %lld;\n", (long long)BM);
        sb_line(s, 4, "r_[u] = q - c_[u] * %lld;\n", (long long)BM);
    }
    if (full)
        sb_line(s, 4, "xv[u] = %s;\n", at);
    else
        sb_line(s, 4, "xv[u] = %s ? %s : 0.0f;\n", guard, at);
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int u = 0; u < %d; u++) {\n", U);
    sb_line(s, 4, "const int64_t gr = i0 + r_[u] < %lld ? i0 + r_[u] : %lld;\n", (long long)R,
            (long long)(R - 1));
    sb_line(s, 4, "const float acc = xv[u];\n");
    if (m->xin[l]) // the layer's input: k-major in src (zeros past the last row)
        sb_line(s, 4, "const float xin_ = %s[c_[u] * %lld + (c_[u] >> 2) * 4 + r_[u]];\n", src,
                (long long)BMP);
    E->xin = "xin_";
    E->rrow = "r_[u]";
    rc = emit_epi(E, l, "acc", "c_[u]", "gr", "xv[u]", 4, e);
    E->xin = NULL;
    E->rrow = NULL;
    E->n_rs = 0;
    if (rc)
        return rc;
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int u = 0; u < %d; u++)\n", U);
    if (!full)
        sb_line(s, 4, "if (%s)\n", guard);
    int ind = full ? 4 : 5;
    if (last && is_half(out_dtype(m))) {
        sb_line(s, ind, "if (i0 + r_[u] < %lld)\n", (long long)R);
        char idx[64];
        snprintf(idx, sizeof idx, "(i0 + r_[u]) * %lld + c_[u]", (long long)N);
        emit_out_store(m, s, ind + 1, idx, "xv[u]");
    } else if (last) {
        sb_line(s, ind, "if (i0 + r_[u] < %lld) o[(i0 + r_[u]) * %lld + c_[u]] = xv[u];\n",
                (long long)R, (long long)N);
    } else {
        sb_line(s, ind, "%s = i0 + r_[u] < %lld ? xv[u] : 0.0f;\n", at, (long long)R);
    }
    sb_line(s, 2, "}\n");
    if (!last) // the next layer reads dst
        sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 1, "}\n");
    return ST_OK;
}

static int emit_block(const MlpChain *m, const KernelConfig *cfg, const TargetOptions *opt,
                      const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    CuMlpConfig q;
    cumlp_config_unpack(cfg, &q);
    int64_t BM = q.bm, T = q.t, TM = q.tm, TN = q.tn;
    if (BM < 1 || T < 32 || T > 1024 || T % 32 || TM < 1 || TM > 16 || BM % TM || TN < 1 || TN > 4)
        return err_set(e, ST_USAGE, "CUDA mlp kernel %s: bad config '%s'", fn, cfg->desc);
    const Candidate *c = m->c;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    EpiGraph V;
    CEm E = {m,    fn,   &body, cexpr_create(epi_graph(m, NULL, &V), c, fn, &decls), -1, "acc",
             NULL, NULL, 0};
    cugen_cexpr_dialect(E.x, cugen_fast_math(opt));
    cexpr_set_reader(E.x, reader, &E);
    StrBuf *s = &body;
    BlockLayout L;
    block_layout(m, BM, &L);
    int64_t K0 = m->K[0], BMP = L.bmp;
    emit_head(m, fn, T, 0, s);
    sb_line(s, 1, "extern __shared__ __align__(16) float orch_mlp_sm[];\n");
    sb_line(s, 1, "float *b0 = orch_mlp_sm, *b1 = orch_mlp_sm + %lld;\n", (long long)L.abuf);
    if (q.stage)
        sb_line(s, 1, "float *ws = orch_mlp_sm + %lld;\n", (long long)(2 * L.abuf));
    sb_line(s, 1, "(void)b1;\n");
    sb_line(s, 1, "const int64_t i0 = (int64_t)blockIdx.x * %lld;\n", (long long)BM);
    // The block's input rows, coalesced, k-major into b0.
    if (half_chain(m) && !m->x_cast) {
        // Half rows: 8 (4) values a 16-byte (8-byte) load where the width allows, converted.
        int VW = K0 % 8 == 0 ? 8 : K0 % 4 == 0 ? 4 : 1;
        int64_t KQ = K0 / VW;
        char xn[16];
        raw_name(m, m->x_pos, xn, sizeof xn);
        const char *cv = h2f_fn(m->dtype);
        sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(BM * KQ),
                (long long)T);
        sb_line(s, 2, "const int r = q / %lld, kq = q - r * %lld;\n", (long long)KQ, (long long)KQ);
        if (VW == 1) {
            sb_line(s, 2,
                    "b0[kq * %lld + (kq >> 2) * 4 + r] = i0 + r < %lld ? %s(%s[(i0 + r) * %lld + "
                    "kq]) : 0.0f;\n",
                    (long long)BMP, (long long)m->R, cv, xn, (long long)K0);
        } else {
            const char *vt = VW == 8 ? "uint4" : "uint2";
            sb_line(s, 2,
                    "const %s v = i0 + r < %lld ? __ldg((const %s *)(%s + (i0 + r) * %lld) + kq) "
                    ": make_%s(%s);\n",
                    vt, (long long)m->R, vt, xn, (long long)K0, vt,
                    VW == 8 ? "0u, 0u, 0u, 0u" : "0u, 0u");
            sb_line(s, 2, "float *bp = b0 + kq * %lld + r;\n", (long long)kofs(&L, VW));
            static const char *const comp[] = {"x", "y", "z", "w"};
            for (int u = 0; u < VW; u++)
                sb_line(s, 2, "bp[%lld] = %s((uint16_t)(v.%s %s));\n",
                        (long long)(u * BMP + (u >> 2) * 4), cv, comp[u >> 1],
                        u & 1 ? ">> 16" : "& 0xffffu");
        }
        sb_line(s, 1, "}\n");
    } else if (K0 % 4 == 0) {
        int64_t KQ = K0 / 4;
        sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(BM * KQ),
                (long long)T);
        sb_line(s, 2, "const int r = q / %lld, kq = q - r * %lld;\n", (long long)KQ, (long long)KQ);
        sb_line(s, 2,
                "const float4 v = i0 + r < %lld ? __ldg((const float4 *)(in%d + (i0 + r) * %lld) "
                "+ kq) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n",
                (long long)m->R, m->x_pos, (long long)K0);
        sb_line(s, 2, "float *bp = b0 + kq * %lld + r;\n", (long long)kofs(&L, 4));
        sb_line(s, 2, "bp[0] = %s;\n", xval(m, "v.x"));
        sb_line(s, 2, "bp[%lld] = %s;\n", (long long)BMP, xval(m, "v.y"));
        sb_line(s, 2, "bp[%lld] = %s;\n", (long long)(2 * BMP), xval(m, "v.z"));
        sb_line(s, 2, "bp[%lld] = %s;\n", (long long)(3 * BMP), xval(m, "v.w"));
        sb_line(s, 1, "}\n");
    } else {
        sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(BM * K0),
                (long long)T);
        sb_line(s, 2, "const int r = q / %lld, k = q - r * %lld;\n", (long long)K0, (long long)K0);
        char xv[64];
        snprintf(xv, sizeof xv, "in%d[(i0 + r) * %lld + k]", m->x_pos, (long long)K0);
        sb_line(s, 2, "b0[k * %lld + (k >> 2) * 4 + r] = i0 + r < %lld ? %s : 0.0f;\n",
                (long long)BMP, (long long)m->R, xval(m, xv));
        sb_line(s, 1, "}\n");
    }
    sb_line(s, 1, "__syncthreads();\n");
    int rc = ST_OK;
    for (int l = 0; l < m->n && !rc; l++)
        rc = emit_layer(&E, l, &q, &L, e);
    sb_puts(s, "}\n\n");
    cexpr_free(E.x);
    epi_graph_free(&V);
    if (!rc) {
        if (half_chain(m))
            emit_half_helpers(src);
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s);
        if (launch) {
            memset(launch, 0, sizeof *launch);
            launch->grid[0] = (unsigned)((m->R + BM - 1) / BM);
            launch->grid[1] = launch->grid[2] = 1;
            launch->block[0] = (unsigned)T;
            launch->block[1] = launch->block[2] = 1;
            launch->smem = (unsigned)smem_bytes(m, BM, q.stage != 0);
        }
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

// The device model: a block's warp instructions per layer (FMAs, shared-memory activation reads
// (TM / row_vec(TM) vector loads per k), weight loads, the epilogue), issued by 4 schedulers per SM
// at an efficiency that grows with the resident warps; blocks per SM from shared memory, threads
// and registers; waves over the SMs; the chain's input and output cross DRAM once.
static double red_row_instr(const MlpChain *m, int l, bool fast);

static double score(const MlpChain *m, const CuDevice *d, const CuMlpConfig *P) {
    const CudaMlpModel *cm = &CUDA_MLP_MODEL;
    double BM = (double)P->bm, T = (double)P->t, TM = (double)P->tm;
    bool stage = P->stage != 0;
    double regs = TM * (double)P->tn + (double)P->tn + 32;
    int bps = cudev_blocks_per_sm(d, P->t, (int64_t)regs, smem_bytes(m, P->bm, stage));
    if (bps < 1)
        return INFINITY;
    double instr = BM * (double)m->K[0] / T * cm->blk_stage_instr; // the input tile
    for (int l = 0; l < m->n; l++) {
        double TN = layer_tn(m, l, (int)P->tn);
        double items = BM / TM * ((double)m->N[l] / TN);
        double per = ceil(items / T);
        double wl = TN == 4 ? 1 : TN, al = TM / row_vec((int)P->tm);
        instr += per * (double)m->K[l] *
                 (TM * TN + al + wl * (stage ? cm->blk_wload_smem : cm->blk_wload_cache));
        instr += per * TM * TN * cm->blk_epi_instr; // epilogue
        // Row statistics: a warp a row, the block's rows over its warps.
        if (m->n_red[l] > 0)
            instr += ceil(BM / (T / 32)) * red_row_instr(m, l, false) +
                     (double)m->n_red[l] * cm->blk_barrier_instr;
        if (stage)
            instr += (double)(m->K[l] * m->N[l]) / T * cm->blk_stage_instr + cm->blk_wstage_fixed;
        instr += cm->blk_barrier_instr; // barrier
    }
    double warps = T / 32;
    double block_instr = instr * warps;
    double blocks = ceil((double)m->R / BM);
    double waves = cudev_waves(d, blocks, bps);
    // blocks sharing an SM's schedulers
    double resident = ORCH_MIN((double)bps, cudev_per_sm(d, blocks));
    double occ = ORCH_MIN(1.0, resident * warps / cm->blk_full_warps);
    double per_wave = resident * block_instr / (CUDA_ARCH.schedulers * occ);
    double t_comp = waves * per_wave / d->clock;
    double bytes = io_bytes(m);
    return ORCH_MAX(t_comp, bytes / (cm->dram_eff * d->dram_bw)) + CUDA_ARCH.launch_s;
}

// ---- persistent kernels: shared pieces ----

// The persistent loop over row tiles of `rows` rows: warp w of block b takes tile b*W + w, then
// every G*W-th after it.
static void emit_tile_loop(StrBuf *s, int64_t W, int64_t G, int64_t rows, int64_t R) {
    int64_t tiles = (R + rows - 1) / rows;
    sb_line(s, 1,
            "for (int64_t tile = (int64_t)blockIdx.x * %lld + warp; tile < %lld; tile += %lld) {\n",
            (long long)W, (long long)tiles, (long long)(G * W));
    sb_line(s, 2, "const int64_t row0 = tile * %lld;\n", (long long)rows);
}

static void set_launch(CudaLaunch *ln, int64_t G, int64_t T, int64_t smem) {
    if (!ln)
        return;
    memset(ln, 0, sizeof *ln);
    ln->grid[0] = (unsigned)G;
    ln->grid[1] = ln->grid[2] = 1;
    ln->block[0] = (unsigned)T;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = (unsigned)smem;
}

// ---- warp kernel (v=warp) ----

#define WARP_SA 36 // row stride of the k-major activation buffer (floats): SA/4 odd

typedef struct WarpLayout {
    int64_t ws[MLP_LAYERS_MAX];   // a layer's weight row stride in shared memory: 32 or 64
    int64_t wofs[MLP_LAYERS_MAX]; // its offset (floats)
    int64_t wfloats;              // all weights
    int64_t so;                   // row stride of the last layer's row-major products
    int64_t abuf;                 // a warp's buffer (floats)
} WarpLayout;

// False when a layer is wider than one 8 x 8 tile per lane covers (64 columns).
static bool warp_layout(const MlpChain *m, WarpLayout *L) {
    memset(L, 0, sizeof *L);
    int64_t maxk = m->K[0];
    for (int l = 0; l < m->n; l++) {
        if (m->N[l] > 64)
            return false;
        L->ws[l] = m->N[l] > 32 ? 64 : 32;
        L->wofs[l] = L->wfloats;
        L->wfloats += m->K[l] * L->ws[l];
        maxk = ORCH_MAX(maxk, m->K[l]);
    }
    L->so = (m->N[m->n - 1] + 3) / 4 * 4 + 4;
    L->abuf = ORCH_MAX(maxk * WARP_SA, 32 * L->so);
    return true;
}

static int64_t warp_smem(const WarpLayout *L, int64_t W) {
    return (L->wfloats + W * L->abuf) * 4;
}

// Layer l of the warp kernel: the k loop over the activations in `act`, the products back into
// act (k-major for the next layer, row-major for the output) and the epilogue.
static int emit_warp_layer(CEm *E, const WarpLayout *L, int l, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    bool last = l == m->n - 1;
    int64_t K = m->K[l], N = m->N[l], WS = L->ws[l];
    int TN = WS == 64 ? 8 : 4;
    sb_line(s, 2, "{ // layer %d: %lld -> %lld\n", l, (long long)K, (long long)N);
    sb_line(s, 3, "float acc[8][%d];\n", TN);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i = 0; i < 8; i++)\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n", TN);
    sb_line(s, 3, "const float *ap = act + rg * 4;\n");
    sb_line(s, 3, "const float *wp = orch_mlp_sm + %lld + cg * 4;\n", (long long)L->wofs[l]);
    sb_line(s, 3, "#pragma unroll 4\n");
    sb_line(s, 3, "for (int k = 0; k < %lld; k++) {\n", (long long)K);
    sb_line(s, 4, "const float4 a0 = *(const float4 *)(ap + k * %d);\n", WARP_SA);
    sb_line(s, 4, "const float4 a1 = *(const float4 *)(ap + k * %d + 16);\n", WARP_SA);
    sb_line(s, 4, "const float4 b0 = *(const float4 *)(wp + k * %lld);\n", (long long)WS);
    if (TN == 8) {
        sb_line(s, 4, "const float4 b1 = *(const float4 *)(wp + k * %lld + 32);\n", (long long)WS);
        sb_line(s, 4, "const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};\n");
    } else {
        sb_line(s, 4, "const float bv[4] = {b0.x, b0.y, b0.z, b0.w};\n");
    }
    sb_line(s, 4, "const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int i = 0; i < 8; i++)\n");
    sb_line(s, 5, "#pragma unroll\n");
    sb_line(s, 5, "for (int j = 0; j < %d; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);\n", TN);
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "__syncwarp();\n"); // every lane has read this layer's input
    if (!last) {
        // Column c of the products is row c of the next layer's k-major input.
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int j = 0; j < %d; j++) {\n", TN);
        sb_line(s, 4, "const int c = (j >> 2) * 32 + cg * 4 + (j & 3);\n");
        if (N % 32)
            sb_line(s, 4, "if (c < %lld) {\n", (long long)N);
        else
            sb_line(s, 4, "{\n");
        sb_line(s, 5,
                "*(float4 *)(act + c * %d + rg * 4) = "
                "make_float4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);\n",
                WARP_SA);
        sb_line(s, 5,
                "*(float4 *)(act + c * %d + 16 + rg * 4) = "
                "make_float4(acc[4][j], acc[5][j], acc[6][j], acc[7][j]);\n",
                WARP_SA);
        sb_line(s, 4, "}\n");
        sb_line(s, 3, "}\n");
        sb_line(s, 3, "__syncwarp();\n");
        if (m->epi[l]) {
            // Lane = row: conflict-free, and a column's constants are one broadcast load.
            sb_line(s, 3, "{\n");
            sb_line(s, 4, "const int64_t gr = row0 + lane < %lld ? row0 + lane : %lld;\n",
                    (long long)m->R, (long long)(m->R - 1));
            sb_line(s, 4, "#pragma unroll 4\n");
            sb_line(s, 4, "for (int c_ = 0; c_ < %lld; c_++) {\n", (long long)N);
            sb_line(s, 5, "float *pp = act + c_ * %d + lane;\n", WARP_SA);
            sb_line(s, 5, "const float accv = *pp;\n");
            int rc = emit_epi(E, l, "accv", "c_", "gr", "*pp", 5, e);
            if (rc)
                return rc;
            sb_line(s, 4, "}\n");
            sb_line(s, 3, "}\n");
            sb_line(s, 3, "__syncwarp();\n");
        }
    } else {
        // Row-major products (columns past N land in the row's padding), so the output rows
        // leave coalesced: lane = column, rows in order.
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int i = 0; i < 8; i++) {\n");
        sb_line(s, 4, "float *rp = act + ((i >> 2) * 16 + rg * 4 + (i & 3)) * %lld + cg * 4;\n",
                (long long)L->so);
        if (N < 32)
            sb_line(s, 4, "if (cg * 4 < %lld)\n", (long long)N);
        sb_line(s, N < 32 ? 5 : 4,
                "*(float4 *)rp = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);\n");
        if (TN == 8) {
            if (N < 64)
                sb_line(s, 4, "if (32 + cg * 4 < %lld)\n", (long long)N);
            sb_line(s, N < 64 ? 5 : 4,
                    "*(float4 *)(rp + 32) = make_float4(acc[i][4], acc[i][5], acc[i][6], "
                    "acc[i][7]);\n");
        }
        sb_line(s, 3, "}\n");
        sb_line(s, 3, "__syncwarp();\n");
        sb_line(s, 3, "const int nr = %lld - row0 < 32 ? (int)(%lld - row0) : 32;\n",
                (long long)m->R, (long long)m->R);
        sb_line(s, 3, "for (int c_ = lane; c_ < %lld; c_ += 32) {\n", (long long)N);
        sb_line(s, 4, "#pragma unroll 4\n");
        sb_line(s, 4, "for (int r = 0; r < nr; r++) {\n");
        sb_line(s, 5, "const int64_t gr = row0 + r;\n");
        sb_line(s, 5, "const float accv = act[r * %lld + c_];\n", (long long)L->so);
        char idx[64];
        snprintf(idx, sizeof idx, "gr * %lld + c_", (long long)N);
        int rc = emit_epi_out(E, l, "accv", "c_", "gr", idx, 5, e);
        if (rc)
            return rc;
        sb_line(s, 4, "}\n");
        sb_line(s, 3, "}\n");
        sb_line(s, 3, "__syncwarp();\n"); // before the next tile's input overwrites act
    }
    sb_line(s, 2, "}\n");
    return ST_OK;
}

static int emit_warp(const MlpChain *m, const KernelConfig *cfg, const TargetOptions *opt,
                     const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    WarpLayout L;
    CuMlpConfig q;
    cumlp_config_unpack(cfg, &q);
    int64_t W = q.w, G = q.g, BPS = q.bps, T = 32 * W;
    if (!warp_layout(m, &L) || W < 1 || W > 32 || G < 1 || BPS < 1)
        return err_set(e, ST_USAGE, "CUDA mlp kernel %s: bad config '%s'", fn, cfg->desc);
    const Candidate *c = m->c;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    EpiGraph V;
    CEm E = {m,    fn,   &body, cexpr_create(epi_graph(m, NULL, &V), c, fn, &decls), -1, "acc",
             NULL, NULL, 0};
    cugen_cexpr_dialect(E.x, cugen_fast_math(opt));
    cexpr_set_reader(E.x, reader, &E);
    StrBuf *s = &body;
    int64_t K0 = m->K[0], R = m->R;
    bool hx = half_chain(m);
    const char *cv = h2f_fn(m->dtype);
    emit_head(m, fn, T, BPS, s);
    sb_line(s, 1, "extern __shared__ __align__(16) float orch_mlp_sm[];\n");
    // The weights, [K][WS] per layer (half ones converted); unrolled so that a thread has 16
    // loads in flight.
    for (int l = 0; l < m->n; l++) {
        int64_t K = m->K[l], N = m->N[l], WS = L.ws[l], X = K * WS;
        char wn[16], ld[96];
        raw_name(m, m->w_pos[l], wn, sizeof wn);
        if (hx)
            snprintf(ld, sizeof ld, "%s(%s[k * %lld + n])", cv, wn, (long long)N);
        else
            snprintf(ld, sizeof ld, "in%d[k * %lld + n]", m->w_pos[l], (long long)N);
        sb_line(s, 1, "#pragma unroll 16\n");
        sb_line(s, 1, "for (int it = 0; it < %lld; it++) {\n", (long long)((X + T - 1) / T));
        sb_line(s, 2, "const int q = threadIdx.x + it * %lld;\n", (long long)T);
        sb_line(s, 2, "const int k = q / %lld, n = q - k * %lld;\n", (long long)WS, (long long)WS);
        sb_line(s, 2, "if (q < %lld) orch_mlp_sm[%lld + q] = n < %lld ? %s : 0.0f;\n", (long long)X,
                (long long)L.wofs[l], (long long)N, ld);
        sb_line(s, 1, "}\n");
    }
    sb_line(s, 1, "__syncthreads();\n");
    sb_line(s, 1, "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
    sb_line(s, 1, "const int rg = lane & 3, cg = lane >> 2;\n");
    sb_line(s, 1, "float *act = orch_mlp_sm + %lld + warp * %lld;\n", (long long)L.wfloats,
            (long long)L.abuf);
    emit_tile_loop(s, W, G, 32, R);
    // The tile's input, k-major: lane = row (each lane reads its row in order; L1 merges).
    sb_line(s, 2, "{\n");
    sb_line(s, 3, "const int64_t gr = row0 + lane < %lld ? row0 + lane : %lld;\n", (long long)R,
            (long long)(R - 1));
    bool hxin = hx && !m->x_cast; // x itself half
    if (hxin) {
        char xn[16];
        raw_name(m, m->x_pos, xn, sizeof xn);
        sb_line(s, 3, "const uint16_t *xr = %s + gr * %lld;\n", xn, (long long)K0);
    } else {
        sb_line(s, 3, "const float *xr = in%d + gr * %lld;\n", m->x_pos, (long long)K0);
    }
    sb_line(s, 3, "#pragma unroll 4\n");
    if (hxin && K0 % 4 == 0) {
        // Half rows: 8 (4) values a 16-byte (8-byte) load, converted.
        int VW = K0 % 8 == 0 ? 8 : 4;
        const char *vt = VW == 8 ? "uint4" : "uint2";
        static const char *const comp[] = {"x", "y", "z", "w"};
        sb_line(s, 3, "for (int k = 0; k < %lld; k += %d) {\n", (long long)K0, VW);
        sb_line(s, 4, "const %s v = __ldg((const %s *)(xr + k));\n", vt, vt);
        for (int u = 0; u < VW; u++)
            sb_line(s, 4, "act[(k + %d) * %d + lane] = %s((uint16_t)(v.%s %s));\n", u, WARP_SA, cv,
                    comp[u >> 1], u & 1 ? ">> 16" : "& 0xffffu");
        sb_line(s, 3, "}\n");
    } else if (hxin) {
        sb_line(s, 3, "for (int k = 0; k < %lld; k++) act[k * %d + lane] = %s(__ldg(xr + k));\n",
                (long long)K0, WARP_SA, cv);
    } else if (K0 % 4 == 0) {
        sb_line(s, 3, "for (int k = 0; k < %lld; k += 4) {\n", (long long)K0);
        sb_line(s, 4, "const float4 v = __ldg((const float4 *)(xr + k));\n");
        sb_line(s, 4, "act[k * %d + lane] = %s;\n", WARP_SA, xval(m, "v.x"));
        sb_line(s, 4, "act[(k + 1) * %d + lane] = %s;\n", WARP_SA, xval(m, "v.y"));
        sb_line(s, 4, "act[(k + 2) * %d + lane] = %s;\n", WARP_SA, xval(m, "v.z"));
        sb_line(s, 4, "act[(k + 3) * %d + lane] = %s;\n", WARP_SA, xval(m, "v.w"));
        sb_line(s, 3, "}\n");
    } else {
        sb_line(s, 3, "for (int k = 0; k < %lld; k++) act[k * %d + lane] = %s;\n", (long long)K0,
                WARP_SA, xval(m, "__ldg(xr + k)"));
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncwarp();\n");
    int rc = ST_OK;
    for (int l = 0; l < m->n && !rc; l++)
        rc = emit_warp_layer(&E, &L, l, e);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    cexpr_free(E.x);
    epi_graph_free(&V);
    if (!rc) {
        if (hx)
            emit_half_helpers(src);
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s);
        set_launch(launch, G, T, warp_smem(&L, W));
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

// ---- tensor-core kernels (v=tf32 / 3xtf32 / f16 / bf16) ----

typedef struct TcLayout {
    int var;
    int kstep; // K of one mma: 8 (TF32) or 16
    int bw;    // 32-bit words of a lane's B fragment in shared memory (3xtf32: the float32
               // values, split where they are read; f64: four float32 values)
    int aw;    // 32-bit registers of one k step's A fragment of a row tile (f64: 8 float32 bits)
    int64_t kp[MLP_LAYERS_MAX], np[MLP_LAYERS_MAX]; // padded widths
    int64_t wofs[MLP_LAYERS_MAX];                   // fragment offsets (words)
    int64_t wwords;                                 // all weights
    BiasFold bias[MLP_LAYERS_MAX]; // each layer's bias folded into its accumulators, or not
    // Epilogues that read their layer's input (MlpChain.xin; epi=smem only): every warp has two
    // buffers, P and PX, and layer l's products go to PX for odd l, so the layer's input (the
    // previous layer's result, left in the other one) is still there for its epilogue.
    bool xbuf;
    int64_t bofs[MLP_LAYERS_MAX];  // where a folded bias is staged (words; np[l] values of the
                                   // accumulators' type)
    int64_t pofs;                  // the warps' buffers P (words): after the weights and biases
    int64_t sp;                                     // epi=smem row stride (floats, 8 mod 32)
    int64_t maxnp;
    // Row statistics (MlpChain.red; epi=smem only): the most a layer has. Every warp keeps its
    // rows' statistics in a warp-private array after the buffers, 2 words (a double or a float)
    // a row and statistic (tc_stats).
    int nred;
    // Half storage of the mma's type: the input and the weights are loaded as stored. The first
    // layer's k order is then permuted within each k step (xperm 1: a lane's fragment columns
    // 2t, 2t+1, 2t+8, 2t+9 hold physical columns 4t .. 4t+3, one 8-byte load per row) or, for
    // the k steps in pairs below ks2, within 32 columns (xperm 2: columns 8t .. 8t+7, one 16-byte
    // load for both steps: 4t + 0..3 of the even step, 4t + 4..7 of the odd); its weights'
    // rows are staged in the same order.
    bool hraw;
    bool xraw; // hraw, and x is half too (not MlpChain.x_cast's float32): A0 loaded as stored
    int xperm;
    int64_t ks2;
} TcLayout;

static bool tc_var(int64_t v) {
    return v == CUMLP_TF32 || v == CUMLP_3XTF32 || v == CUMLP_F16 || v == CUMLP_BF16 ||
           v == CUMLP_F64;
}

// Whether variant v can run chain m: a half chain only on the tensor cores of its type (the
// operands as stored; products of halves are exact in float32).
static bool tc_fits(const MlpChain *m, int64_t v) {
    return !half_chain(m) || (v == CUMLP_F16 && m->dtype == DT_FLOAT16) ||
           (v == CUMLP_BF16 && m->dtype == DT_BFLOAT16);
}

// epi=ilvx stages a float32 input in P (tf32, 3xtf32, f64).
static bool xstage_ok(const MlpChain *m, const TcLayout *L) {
    return !half_chain(m) && !L->xraw;
}

// xstage (epi=ilvx): P's rows hold the chain's input as well, so its stride covers kp[0] too.
static void tc_layout(const MlpChain *m, int var, bool xstage, TcLayout *L) {
    memset(L, 0, sizeof *L);
    L->var = var;
    L->kstep = var == CUMLP_F16 || var == CUMLP_BF16 || var == CUMLP_F64 ? 16 : 8;
    L->bw = var == CUMLP_F64 ? 4 : 2;
    L->aw = var == CUMLP_F64 ? 8 : 4;
    for (int l = 0; l < m->n; l++) {
        L->kp[l] = (m->K[l] + L->kstep - 1) / L->kstep * L->kstep;
        L->np[l] =
            l + 1 < m->n ? (m->N[l] + L->kstep - 1) / L->kstep * L->kstep : (m->N[l] + 7) / 8 * 8;
        L->wofs[l] = L->wwords;
        L->wwords += L->kp[l] / L->kstep * (L->np[l] / 8) * 32 * L->bw;
        L->maxnp = ORCH_MAX(L->maxnp, L->np[l]);
    }
    L->pofs = (L->wwords + 3) / 4 * 4;
    for (int l = 0; l < m->n; l++) {
        bias_fold(m, l, &L->bias[l]);
        if (L->bias[l].prim < 0)
            continue;
        L->bofs[l] = L->pofs; // 16-byte aligned: a lane's two columns are one load
        L->pofs += (L->np[l] * (var == CUMLP_F64 ? 2 : 1) + 3) / 4 * 4;
    }
    int64_t pw = xstage ? ORCH_MAX(L->maxnp, L->kp[0]) : L->maxnp;
    L->sp = (pw + 23) / 32 * 32 + 8; // the least >= pw that is 8 mod 32
    if (L->sp - 32 >= pw)
        L->sp -= 32;
    L->hraw = half_chain(m) && tc_fits(m, var);
    L->xbuf = m->any_xin;
    L->nred = max_red(m);
    // A float32 x (x_cast) is loaded as floats and packed (rounded) like a float32 chain's, in the
    // plain k order.
    L->xraw = L->hraw && !m->x_cast;
    if (L->xraw) {
        int64_t KS = L->kp[0] / 16;
        L->xperm = m->K[0] % 8 == 0 && KS >= 2 ? 2 : 1;
        L->ks2 = L->xperm == 2 ? KS / 2 * 2 : 0;
    }
}

// Words of a warp's row statistics, and where the warps' arrays start (after the buffers P and
// PX; even: the doubles 8-byte aligned, sp is).
static int64_t tc_stats(const TcLayout *L, int64_t MT) {
    return 2 * 16 * MT * L->nred;
}

static int64_t tc_stats_ofs(const TcLayout *L, int64_t W, int64_t MT) {
    return L->pofs + W * 16 * MT * L->sp * (L->xbuf ? 2 : 1);
}

static int64_t tc_smem(const TcLayout *L, int64_t W, int64_t MT, bool epi_smem) {
    return epi_smem ? (tc_stats_ofs(L, W, MT) + W * tc_stats(L, MT)) * 4 : L->pofs * 4;
}

// 32-bit registers a thread needs at the widest layer (operand fragments, accumulators, the
// next layer's fragments while they are packed) plus addressing and the epilogue.
// epi=ilv (`ilv`): a layer whose epilogue is deferred packs no next fragments, and the layer
// after it holds one k step's fragments and chunk (4 + 4 a row tile) instead of its whole A;
// so does the first layer with its input staged in P (epi=ilvx, `xstage`).
static int64_t tc_regs(const MlpChain *m, const TcLayout *L, int64_t MT, bool ilv, bool xstage) {
    int64_t per_k = L->var == CUMLP_F16 || L->var == CUMLP_BF16 ? 4 : 2;
    int64_t worst = 0;
    for (int l = 0; l < m->n; l++) {
        // (ilv: the last layer packs no fragments either; the older modes keep their margin.)
        bool defer = ilv && (l + 1 == m->n || m->epi[l]);
        bool pend = ilv && (l > 0 ? m->epi[l - 1] : xstage);
        int64_t a = pend ? L->aw + 4 * (L->kstep / 8) : L->kp[l] / per_k,
                acc = L->np[l] / (L->var == CUMLP_F64 ? 1 : 2), next = defer ? 0 : L->np[l] / per_k;
        worst = ORCH_MAX(worst, acc + ORCH_MAX(a, next));
    }
    // 3xtf32: one k step's A fragments split into hi and lo.
    return MT * worst + 40 + (L->var == CUMLP_3XTF32 ? 8 * MT : 0);
}

// Device helpers of the tensor-core kernels, once per translation unit: conversions (cvt.rna
// for TF32 as the GEMM does, cvt.rn.x2 for halves: the first source goes to the upper half) and
// the mma wrappers (A fragment as 4 registers, accumulators in place).
static void emit_tc_helpers(StrBuf *s) {
    sb_puts(s, "#ifndef ORCH_MLP_MMA_HELPERS\n"
               "#define ORCH_MLP_MMA_HELPERS\n"
               "ORCH_DEV uint32_t orch_mlp_tf32(float x) {\n"
               "    uint32_t r;\n"
               "    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
               "    return r;\n"
               "}\n"
               "ORCH_DEV uint32_t orch_mlp_f16x2(float lo, float hi) {\n"
               "    uint32_t r;\n"
               "    asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
               "    return r;\n"
               "}\n"
               "ORCH_DEV uint32_t orch_mlp_bf16x2(float lo, float hi) {\n"
               "    uint32_t r;\n"
               "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
               "    return r;\n"
               "}\n");
    static const char *const mma[][2] = {
        {"tf32", "m16n8k8.row.col.f32.tf32.tf32.f32"},
        {"f16", "m16n8k16.row.col.f32.f16.f16.f32"},
        {"bf16", "m16n8k16.row.col.f32.bf16.bf16.f32"},
    };
    // f64 (sm_90): one m16n8k16 DMMA on A registers and B words holding float32 bits, widened
    // to double, so every product is exact and the sums are double's. Fragment element i of A
    // is row g + 8 (i & 1), slot i >> 1; b[j] slot j; slot j is column 2t + (j & 1) + 8 (j >> 1)
    // of the k step (the order emit_pack and the staging use).
    sb_puts(s, "#if __CUDA_ARCH__ >= 900\n"
               "ORCH_DEV void orch_mlp_mma_f64(double *c, const uint32_t *a, uint4 b) {\n"
               "    double x[8];\n"
               "#pragma unroll\n"
               "    for (int i = 0; i < 8; i++) x[i] = __uint_as_float(a[i]);\n"
               "    const double b0 = __uint_as_float(b.x), b1 = __uint_as_float(b.y);\n"
               "    const double b2 = __uint_as_float(b.z), b3 = __uint_as_float(b.w);\n"
               "    asm(\"mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\"\n"
               "        : \"+d\"(c[0]), \"+d\"(c[1]), \"+d\"(c[2]), \"+d\"(c[3])\n"
               "        : \"d\"(x[0]), \"d\"(x[1]), \"d\"(x[2]), \"d\"(x[3]), \"d\"(x[4]), "
               "\"d\"(x[5]), \"d\"(x[6]), \"d\"(x[7]),\n"
               "          \"d\"(b0), \"d\"(b1), \"d\"(b2), \"d\"(b3));\n"
               "}\n"
               "#endif\n");
    for (size_t i = 0; i < ORCH_COUNT(mma); i++)
        sb_printf(s,
                  "ORCH_DEV void orch_mlp_mma_%s(float *c, const uint32_t *a, uint32_t b0, "
                  "uint32_t b1) {\n"
                  "    asm(\"mma.sync.aligned.%s {%%0, %%1, %%2, %%3}, {%%4, %%5, %%6, %%7}, "
                  "{%%8, %%9}, {%%0, %%1, %%2, %%3};\"\n"
                  "        : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
                  "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), "
                  "\"r\"(b1));\n"
                  "}\n",
                  mma[i][0], mma[i][1]);
    sb_puts(s, "#endif\n");
}

typedef struct TcEm {
    CEm E;
    const TcLayout *L;
    int64_t W, MT;
    bool epi_smem;
    // epi=ilv: a layer's epilogue is deferred into the next layer's k loop (ilv_compute,
    // ilv_finish); pending: the previous layer's products wait in P for it.
    bool ilv, pending;
    // epi=ilvx: the chain's input rows are staged in P too, and the first layer's rolled k
    // loop loads each step's A fragments from there (no A registers for the whole input: the
    // f64 kernel then fits 128 registers, 16 warps a block); xstaged: the first layer pends so.
    bool xstage, xstaged;
    int guards; // the sines ilv_compute guarded (ilv_finish redoes them where the vote says)
    int layer;  // the layer emit_mma_step emits
} TcEm;

// Statements setting the A fragment registers of `a` at [ix] from two floats of one row half h
// (an expression: 0 for row g, 1 for g+8) at columns 2t, 2t+1 of fragment column half `half`
// (k steps of 16: 0 for columns 2t.., 1 for 2t+8..; of 8: 0). Halves: a[h + 2 half] = (x, y) as
// a pair; float32 operands (k permuted): a[h + 4 half] = x, a[h + 4 half + 2] = y, as TF32 or
// (3xtf32, f64) as float32 bits, split into hi and lo (3xtf32) or widened (f64) where a k step
// uses them (half the registers of holding both).
static void emit_pack(StrBuf *s, int ind, const TcLayout *L, const char *a, const char *ix,
                      const char *h, int half, const char *x, const char *y) {
    if (L->var == CUMLP_F16 || L->var == CUMLP_BF16) {
        sb_line(s, ind, "%s%s[(%s) + %d] = orch_mlp_%s(%s, %s);\n", a, ix, h, 2 * half,
                L->var == CUMLP_F16 ? "f16x2" : "bf16x2", x, y);
    } else if (L->var == CUMLP_TF32) {
        sb_line(s, ind, "%s%s[%s] = orch_mlp_tf32(%s);\n", a, ix, h, x);
        sb_line(s, ind, "%s%s[(%s) + 2] = orch_mlp_tf32(%s);\n", a, ix, h, y);
    } else {
        sb_line(s, ind, "%s%s[(%s) + %d] = __float_as_uint(%s);\n", a, ix, h, 4 * half, x);
        sb_line(s, ind, "%s%s[(%s) + %d] = __float_as_uint(%s);\n", a, ix, h, 4 * half + 2, y);
    }
}

static void declare_a(StrBuf *s, int ind, const TcLayout *L, int l, int64_t MT) {
    int64_t KS = L->kp[l] / L->kstep;
    sb_line(s, ind, "uint32_t A%d[%lld][%lld][%d];\n", l, (long long)MT, (long long)KS, L->aw);
}

// A float2 of the input row `xr` at column expression c (even), zeros past K0.
static void x_pair(const MlpChain *m, const TcLayout *L, const char *c, char *out, size_t cap) {
    int64_t K0 = m->K[0];
    if (K0 % L->kstep == 0)
        snprintf(out, cap, "__ldg((const float2 *)(xr + %s))", c);
    else if (K0 % 2 == 0)
        snprintf(out, cap,
                 "(%s < %lld ? __ldg((const float2 *)(xr + %s)) : make_float2(0.0f, 0.0f))", c,
                 (long long)K0, c);
    else
        snprintf(out, cap,
                 "make_float2(%s < %lld ? __ldg(xr + %s) : 0.0f, "
                 "%s + 1 < %lld ? __ldg(xr + %s + 1) : 0.0f)",
                 c, (long long)K0, c, c, (long long)K0, c);
}

// Loads the first layer's input of the tile at row `row` (an expression) as float2 pairs
// xv[mt][h][ks][v] (rows mt*16 + h*8 + g, columns ks*KSTEP + 8v + 2t, +1); the last row stands
// in for rows past it.
static void emit_tc_xload(TcEm *T, const char *row, int ind) {
    const MlpChain *m = T->E.m;
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int mt = 0; mt < %lld; mt++) {\n", (long long)T->MT);
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, ind + 2, "const int64_t r_ = %s + mt * 16 + h * 8 + g;\n", row);
    sb_line(s, ind + 2, "const float *xr = in%d + (r_ < %lld ? r_ : %lld) * %lld;\n", m->x_pos,
            (long long)m->R, (long long)(m->R - 1), (long long)m->K[0]);
    sb_line(s, ind + 2, "#pragma unroll\n");
    sb_line(s, ind + 2, "for (int ks = 0; ks < %lld; ks++) {\n", (long long)(L->kp[0] / L->kstep));
    char ld[256];
    x_pair(m, L, L->kstep == 16 ? "(ks * 16 + 2 * t)" : "(ks * 8 + 2 * t)", ld, sizeof ld);
    sb_line(s, ind + 3, "xv[mt][h][ks][0] = %s;\n", ld);
    if (L->kstep == 16) {
        x_pair(m, L, "(ks * 16 + 8 + 2 * t)", ld, sizeof ld);
        sb_line(s, ind + 3, "xv[mt][h][ks][1] = %s;\n", ld);
    }
    sb_line(s, ind + 2, "}\n");
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind, "}\n");
}

static void declare_xv(TcEm *T, int ind) {
    sb_line(T->E.s, ind, "float2 xv[%lld][2][%lld][%d];\n", (long long)T->MT,
            (long long)(T->L->kp[0] / T->L->kstep), T->L->kstep == 16 ? 2 : 1);
}

// The first layer's A fragments A0 from xv.
static void emit_tc_xpack(TcEm *T, int ind) {
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    declare_a(s, ind, L, 0, T->MT);
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int mt = 0; mt < %lld; mt++)\n", (long long)T->MT);
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int h = 0; h < 2; h++)\n");
    sb_line(s, ind + 2, "#pragma unroll\n");
    sb_line(s, ind + 2, "for (int ks = 0; ks < %lld; ks++) {\n", (long long)(L->kp[0] / L->kstep));
    emit_pack(s, ind + 3, L, "A0", "[mt][ks]", "h", 0, "xv[mt][h][ks][0].x", "xv[mt][h][ks][0].y");
    if (L->kstep == 16)
        emit_pack(s, ind + 3, L, "A0", "[mt][ks]", "h", 1, "xv[mt][h][ks][1].x",
                  "xv[mt][h][ks][1].y");
    sb_line(s, ind + 2, "}\n");
}

// Half storage of the mma's type (hraw): the first layer's A fragments A0 loaded as stored, in
// the permuted k order (TcLayout.xperm), for the tile at row `row`; zeros past K0, the last row
// standing in for rows past it.
static void emit_tc_xload_raw(TcEm *T, const char *row, int ind) {
    const MlpChain *m = T->E.m;
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    int64_t K0 = m->K[0], KS = L->kp[0] / 16;
    bool guard = K0 % 16 != 0; // some chunk lies past K0 (chunks are whole: K0 % 4 == 0)
    char xn[16];
    raw_name(m, m->x_pos, xn, sizeof xn);
    declare_a(s, ind, L, 0, T->MT);
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int mt = 0; mt < %lld; mt++) {\n", (long long)T->MT);
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, ind + 2, "const int64_t r_ = %s + mt * 16 + h * 8 + g;\n", row);
    sb_line(s, ind + 2, "const uint16_t *xr = %s + (r_ < %lld ? r_ : %lld) * %lld;\n", xn,
            (long long)m->R, (long long)(m->R - 1), (long long)K0);
    if (L->ks2 > 0) { // pairs of k steps: 16 bytes a lane
        sb_line(s, ind + 2, "#pragma unroll\n");
        sb_line(s, ind + 2, "for (int kp = 0; kp < %lld; kp++) {\n", (long long)(L->ks2 / 2));
        sb_line(s, ind + 3, "const int c_ = kp * 32 + 8 * t;\n");
        if (guard)
            sb_line(s, ind + 3,
                    "const uint4 v = c_ < %lld ? __ldg((const uint4 *)(xr + c_)) : make_uint4(0u, "
                    "0u, 0u, 0u);\n",
                    (long long)K0);
        else
            sb_line(s, ind + 3, "const uint4 v = __ldg((const uint4 *)(xr + c_));\n");
        sb_line(s, ind + 3, "A0[mt][2 * kp][h] = v.x;\n");
        sb_line(s, ind + 3, "A0[mt][2 * kp][h + 2] = v.y;\n");
        sb_line(s, ind + 3, "A0[mt][2 * kp + 1][h] = v.z;\n");
        sb_line(s, ind + 3, "A0[mt][2 * kp + 1][h + 2] = v.w;\n");
        sb_line(s, ind + 2, "}\n");
    }
    if (L->ks2 < KS) { // single k steps: 8 bytes a lane, or four values where K0 % 4 != 0
        sb_line(s, ind + 2, "#pragma unroll\n");
        sb_line(s, ind + 2, "for (int ks = %lld; ks < %lld; ks++) {\n", (long long)L->ks2,
                (long long)KS);
        sb_line(s, ind + 3, "const int c_ = ks * 16 + 4 * t;\n");
        if (K0 % 4 == 0) {
            if (guard)
                sb_line(s, ind + 3,
                        "const uint2 v = c_ < %lld ? __ldg((const uint2 *)(xr + c_)) : "
                        "make_uint2(0u, 0u);\n",
                        (long long)K0);
            else
                sb_line(s, ind + 3, "const uint2 v = __ldg((const uint2 *)(xr + c_));\n");
            sb_line(s, ind + 3, "A0[mt][ks][h] = v.x;\n");
            sb_line(s, ind + 3, "A0[mt][ks][h + 2] = v.y;\n");
        } else {
            sb_line(s, ind + 3, "uint32_t e_[4];\n");
            sb_line(s, ind + 3, "#pragma unroll\n");
            sb_line(s, ind + 3,
                    "for (int u = 0; u < 4; u++) e_[u] = c_ + u < %lld ? (uint32_t)__ldg(xr + c_ + "
                    "u) : 0u;\n",
                    (long long)K0);
            sb_line(s, ind + 3, "A0[mt][ks][h] = e_[0] | e_[1] << 16;\n");
            sb_line(s, ind + 3, "A0[mt][ks][h + 2] = e_[2] | e_[3] << 16;\n");
        }
        sb_line(s, ind + 2, "}\n");
    }
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind, "}\n");
}

// Every layer's weights into shared memory in fragment order: entry q = (ks * NT + nt) * 32 +
// lane of a layer holds that lane's B registers of k step ks, n tile nt (zeros outside K x N):
// TF32 values or half pairs, or (3xtf32) the float32 values, split where they are read. Layers
// go in batches whose loads (at most 64 values a thread) are all issued before the first store:
// one L2 round trip per batch instead of one per entry. Half weights of the mma's type (hraw) are
// packed as stored, the first layer's rows in its permuted k order.
static void emit_tc_stage(const MlpChain *m, const TcLayout *L, int64_t T, StrBuf *s) {
    int nu = L->kstep == 16 ? 4 : 2;
    const char *wt = L->hraw ? "uint16_t" : "float", *zero = L->hraw ? "(uint16_t)0" : "0.0f";
    int64_t X[MLP_LAYERS_MAX], nit[MLP_LAYERS_MAX];
    for (int l = 0; l < m->n; l++) {
        X[l] = L->kp[l] / L->kstep * (L->np[l] / 8) * 32;
        nit[l] = (X[l] + T - 1) / T;
    }
    for (int l0 = 0, l1; l0 < m->n; l0 = l1) {
        int64_t regs = nit[l0] * nu;
        for (l1 = l0 + 1; l1 < m->n && regs + nit[l1] * nu <= 64; l1++)
            regs += nit[l1] * nu;
        bool batched = regs <= 64;
        sb_line(s, 1, "{ // the weights of layers %d..%d\n", l0, l1 - 1);
        for (int l = l0; l < l1; l++) {
            int64_t K = m->K[l], N = m->N[l], NT = L->np[l] / 8;
            if (batched) {
                sb_line(s, 2, "%s w%d_[%lld][%d];\n", wt, l, (long long)nit[l], nu);
                sb_line(s, 2, "#pragma unroll\n");
                sb_line(s, 2, "for (int it = 0; it < %lld; it++) {\n", (long long)nit[l]);
                sb_line(s, 3, "const int q = threadIdx.x + it * %lld;\n", (long long)T);
            } else { // one layer too large for the registers: a loop over its entries
                sb_line(s, 2, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)X[l],
                        (long long)T);
                sb_line(s, 3, "%s w%d_[1][%d];\n", wt, l, nu);
                sb_line(s, 3, "const int it = 0;\n");
            }
            sb_line(s, 3, "const int ln = q & 31, f = q >> 5, nt = f %% %lld, ks = f / %lld;\n",
                    (long long)NT, (long long)NT);
            char wn[16];
            raw_name(m, m->w_pos[l], wn, sizeof wn);
            if (l == 0 && L->xperm == 2) {
                sb_line(s, 3,
                        "const int n = nt * 8 + (ln >> 2), k0 = ks < %lld ? (ks >> 1) * 32 + 8 * "
                        "(ln & 3) + 4 * (ks & 1) : ks * 16 + 4 * (ln & 3);\n",
                        (long long)L->ks2);
            } else if (l == 0 && L->xperm == 1) {
                sb_line(s, 3, "const int n = nt * 8 + (ln >> 2), k0 = ks * 16 + 4 * (ln & 3);\n");
            } else {
                sb_line(s, 3, "const int n = nt * 8 + (ln >> 2), k0 = ks * %d + 2 * (ln & 3);\n",
                        L->kstep);
            }
            sb_line(s, 3, "#pragma unroll\n");
            sb_line(s, 3, "for (int u = 0; u < %d; u++) {\n", nu);
            if (l == 0 && L->xperm)
                sb_line(s, 4, "const int k = k0 + u;\n");
            else
                sb_line(s, 4, "const int k = k0 + (u & 1) + (u >> 1) * 8;\n");
            sb_line(s, 4,
                    "w%d_[it][u] = q < %lld && k < %lld && n < %lld ? __ldg(%s + k * %lld + n) "
                    ": %s;\n",
                    l, (long long)X[l], (long long)K, (long long)N, wn, (long long)N, zero);
            sb_line(s, 3, "}\n");
            if (batched)
                sb_line(s, 2, "}\n");
            else
                break; // the stores follow in the same loop
        }
        for (int l = l0; l < l1; l++) {
            if (batched) {
                sb_line(s, 2, "#pragma unroll\n");
                sb_line(s, 2, "for (int it = 0; it < %lld; it++) {\n", (long long)nit[l]);
                sb_line(s, 3, "const int q = threadIdx.x + it * %lld;\n", (long long)T);
            }
            char w[4][32], v[256];
            for (int u = 0; u < nu; u++)
                snprintf(w[u], sizeof w[u], "w%d_[it][%d]", l, u);
            if (L->hraw) {
                snprintf(
                    v, sizeof v,
                    "make_uint2((uint32_t)%s | (uint32_t)%s << 16, (uint32_t)%s | (uint32_t)%s "
                    "<< 16)",
                    w[0], w[1], w[2], w[3]);
            } else if (L->var == CUMLP_F16 || L->var == CUMLP_BF16) {
                const char *cv = L->var == CUMLP_F16 ? "orch_mlp_f16x2" : "orch_mlp_bf16x2";
                snprintf(v, sizeof v, "make_uint2(%s(%s, %s), %s(%s, %s))", cv, w[0], w[1], cv,
                         w[2], w[3]);
            } else if (L->var == CUMLP_TF32) {
                snprintf(v, sizeof v, "make_uint2(orch_mlp_tf32(%s), orch_mlp_tf32(%s))", w[0],
                         w[1]);
            } else if (L->var == CUMLP_F64) {
                snprintf(v, sizeof v,
                         "make_uint4(__float_as_uint(%s), __float_as_uint(%s), "
                         "__float_as_uint(%s), __float_as_uint(%s))",
                         w[0], w[1], w[2], w[3]);
            } else {
                snprintf(v, sizeof v, "make_uint2(__float_as_uint(%s), __float_as_uint(%s))", w[0],
                         w[1]);
            }
            char guard[48] = "";
            if (batched && X[l] % T)
                snprintf(guard, sizeof guard, "if (q < %lld) ", (long long)X[l]);
            sb_line(s, 3, "%s((uint%d *)(orch_mlp_smw + %lld))[q] = %s;\n", guard, L->bw,
                    (long long)L->wofs[l], v);
            sb_line(s, 2, "}\n");
            if (!batched)
                break;
        }
        sb_line(s, 1, "}\n");
    }
    // The folded biases, in the accumulators' type (in<j> reads a half input as float).
    const char *bt = L->var == CUMLP_F64 ? "double" : "float";
    for (int l = 0; l < m->n; l++) {
        const BiasFold *f = &L->bias[l];
        if (f->prim < 0)
            continue;
        sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) // layer %d's bias\n",
                (long long)L->np[l], (long long)T, l);
        sb_line(s, 2, "((%s *)(orch_mlp_smw + %lld))[q] = q < %lld ? (%s)in%d[%s] : (%s)0;\n", bt,
                (long long)L->bofs[l], (long long)m->N[l], bt, f->pos, f->scalar ? "0" : "q", bt);
    }
}

// Layer l: products into C[MT][NT][4] from A<l>, the epilogue, and the next layer's fragments
// A<l+1> (declared before this block) or the output.
// epi=ilv, inside layer l+1's k loop: layer l's epilogue over the columns of k step kn (a
// variable), from its products in P. A lane computes column kn*KSTEP + (lane & 7) (+ 8 for the
// second half of a 16-wide step) of rows (lane >> 3) + 4i: with the row stride 8 mod 32 the 32
// lanes hit 32 banks. Chunk kn is computed beside step kn - 1's mmas (emit_tc_layer), so that
// one warp keeps the tensor cores and the ALUs busy at once instead of alternating layer by
// layer (H200, 6 x 64 sin*sigmoid chain: the f64 kernel's epilogue through P added almost its
// whole time to the DMMAs').
static void ilv_elem_head(const TcEm *T, int l, int ind) {
    const MlpChain *m = T->E.m;
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    int64_t N = m->N[l], MT = T->MT;
    sb_line(s, ind, "const int r = (lane >> 3) + 4 * (i %% %lld);\n", (long long)(4 * MT));
    sb_line(s, ind, "const int c_ = kn * %d + (lane & 7) + 8 * (i / %lld);\n", L->kstep,
            (long long)(4 * MT));
    sb_line(s, ind, N % L->kstep ? "if (c_ < %lld) {\n" : "{\n", (long long)N);
}

static void emit_mma_prep(TcEm *T, const char *aref, int ind);
static void emit_mma_nt(TcEm *T, const char *aref, int ind);

// The chunk's elements into ev_[i]: with the sine's range check left to one vote of the warp
// (cexpr_set_sin_guard; `guard`), or exact (the rare redo where some |x| > 65536).
static int ilv_elems(TcEm *T, int l, int ind, bool guard, const char *mma, int *guards,
                     Err *e) {
    CEm *E = &T->E;
    StrBuf *s = E->s;
    int64_t R = E->m->R, SP = T->L->sp, NE = 4 * T->MT * (T->L->kstep / 8);
    int64_t NT = T->L->np[T->layer] / 8;
    if (mma)
        emit_mma_prep(T, mma, ind);
    // The exact redo is rare: rolled, straight into P (NVVM ignores `unroll 1` in these
    // kernels and unrolled it anyway; `nounroll` holds).
    sb_line(s, ind, guard ? "#pragma unroll\n" : "#pragma nounroll\n");
    sb_line(s, ind, "for (int i = 0; i < %lld; i++) {\n", (long long)NE);
    if (mma) { // the step's n tiles spread over the elements, each before its element
        sb_line(s, ind + 1, "#pragma unroll\n");
        sb_line(s, ind + 1,
                "for (int nt = i * %lld / %lld; nt < (i + 1) * %lld / %lld; nt++) {\n",
                (long long)NT, (long long)NE, (long long)NT, (long long)NE);
        emit_mma_nt(T, mma, ind + 2);
        sb_line(s, ind + 1, "}\n");
    }
    ilv_elem_head(T, l, ind + 1);
    sb_line(s, ind + 2, "const int64_t gr = row0 + r < %lld ? row0 + r : %lld;\n", (long long)R,
            (long long)(R - 1));
    sb_line(s, ind + 2, "const float accv = P[r * %lld + c_];\n", (long long)SP);
    cexpr_set_sin_guard(E->x, guard ? "big_" : NULL);
    int before = cexpr_sin_guards(E->x);
    char dest[64];
    snprintf(dest, sizeof dest, guard ? "ev_[i]" : "P[r * %lld + c_]", (long long)SP);
    int rc = emit_epi(E, l, "accv", "c_", "gr", dest, ind + 2, e);
    *guards = cexpr_sin_guards(E->x) - before;
    cexpr_set_sin_guard(E->x, NULL);
    if (rc)
        return rc;
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind, "}\n");
    return ST_OK;
}

// Layer l's epilogue over the columns of k step kn into ev_[] (declared by the caller with
// big_), the sine's range check left to the vote in ilv_finish.
static int ilv_compute(TcEm *T, int l, int ind, const char *mma, Err *e) {
    int guards = 0;
    int rc = ilv_elems(T, l, ind, true, mma, &guards, e);
    T->guards = guards;
    return rc;
}

static void ilv_load_a(TcEm *T, int ind);

// The vote (any |x| > 65536 in the warp: the chunk again, exactly), ev_[] stored into P, and
// step kn's A fragments a_[mt] loaded from it.
static int ilv_finish(TcEm *T, int l, int ind, Err *e) {
    CEm *E = &T->E;
    const TcLayout *L = T->L;
    StrBuf *s = E->s;
    int64_t SP = L->sp, MT = T->MT, NE = 4 * MT * (L->kstep / 8);
    int unused;
    if (T->guards) { // the redo reads the products, so it stores instead of ev_[]
        sb_line(s, ind, "if (__any_sync(0xffffffffu, big_)) {\n");
        int rc = ilv_elems(T, l, ind + 1, false, NULL, &unused, e);
        if (rc)
            return rc;
        sb_line(s, ind, "} else {\n");
    } else {
        sb_line(s, ind, "(void)big_;\n");
        sb_line(s, ind, "{\n");
    }
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int i = 0; i < %lld; i++) {\n", (long long)NE);
    ilv_elem_head(T, l, ind + 2);
    sb_line(s, ind + 3, "P[r * %lld + c_] = ev_[i];\n", (long long)SP);
    sb_line(s, ind + 2, "}\n");
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind, "}\n");
    sb_line(s, ind, "__syncwarp();\n");
    ilv_load_a(T, ind);
    return ST_OK;
}

// Step kn's A fragments a_[mt] from P.
static void ilv_load_a(TcEm *T, int ind) {
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    int64_t SP = L->sp, MT = T->MT;
    int halves = L->kstep / 8;
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, ind + 2, "const float *pr = P + (mt * 16 + h * 8 + g) * %lld + 2 * t + kn * %d;\n",
            (long long)SP, L->kstep);
    sb_line(s, ind + 2, "const float2 v0 = *(const float2 *)pr;\n");
    emit_pack(s, ind + 2, L, "a_", "[mt]", "h", 0, "v0.x", "v0.y");
    if (halves == 2) {
        sb_line(s, ind + 2, "const float2 v1 = *(const float2 *)(pr + 8);\n");
        emit_pack(s, ind + 2, L, "a_", "[mt]", "h", 1, "v1.x", "v1.y");
    }
    sb_line(s, ind + 1, "}\n");
}

// One k step (variable ks) of layer l's mmas on the A fragments `aref` (indexed by mt): what
// the step needs once (3xtf32: its A fragments split), then the mmas of n tile nt (a variable)
// for every row tile.
static void emit_mma_prep(TcEm *T, const char *aref, int ind) {
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    int64_t MT = T->MT;
    if (L->var == CUMLP_3XTF32) {
        // This k step's A fragments split: hi = tf32(a), lo = tf32(a - hi).
        sb_line(s, ind, "uint32_t ah[%lld][4], al[%lld][4];\n", (long long)MT, (long long)MT);
        sb_line(s, ind, "#pragma unroll\n");
        sb_line(s, ind, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
        sb_line(s, ind + 1, "#pragma unroll\n");
        sb_line(s, ind + 1, "for (int i = 0; i < 4; i++) {\n");
        sb_line(s, ind + 2, "const float v = __uint_as_float(%s[i]);\n", aref);
        sb_line(s, ind + 2, "ah[mt][i] = orch_mlp_tf32(v);\n");
        sb_line(s, ind + 2, "al[mt][i] = orch_mlp_tf32(v - __uint_as_float(ah[mt][i]));\n");
        sb_line(s, ind + 1, "}\n");
    }
}

static void emit_mma_nt(TcEm *T, const char *aref, int ind) {
    const TcLayout *L = T->L;
    StrBuf *s = T->E.s;
    int64_t MT = T->MT, NT = L->np[T->layer] / 8;
    const char *op = L->var == CUMLP_F16    ? "f16"
                     : L->var == CUMLP_BF16 ? "bf16"
                     : L->var == CUMLP_F64  ? "f64"
                                            : "tf32";
    sb_line(s, ind, "const uint%d b = wl[(ks * %lld + nt) * 32];\n", L->bw, (long long)NT);
    if (L->var == CUMLP_3XTF32) {
        // The float32 weights split here: hi = tf32(w), lo = tf32(w - hi).
        sb_line(s, ind, "const float b0 = __uint_as_float(b.x), b1 = __uint_as_float(b.y);\n");
        sb_line(s, ind, "const uint32_t bh0 = orch_mlp_tf32(b0), bh1 = orch_mlp_tf32(b1);\n");
        sb_line(s, ind, "const uint32_t bl0 = orch_mlp_tf32(b0 - __uint_as_float(bh0));\n");
        sb_line(s, ind, "const uint32_t bl1 = orch_mlp_tf32(b1 - __uint_as_float(bh1));\n");
    }
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int mt = 0; mt < %lld; mt++) {\n", (long long)MT);
    if (L->var == CUMLP_3XTF32) {
        // The small terms first: lo*hi, hi*lo, then hi*hi.
        sb_line(s, ind + 1, "orch_mlp_mma_tf32(C[mt][nt], al[mt], bh0, bh1);\n");
        sb_line(s, ind + 1, "orch_mlp_mma_tf32(C[mt][nt], ah[mt], bl0, bl1);\n");
        sb_line(s, ind + 1, "orch_mlp_mma_tf32(C[mt][nt], ah[mt], bh0, bh1);\n");
    } else if (L->var == CUMLP_F64) {
        sb_line(s, ind + 1, "orch_mlp_mma_f64(C[mt][nt], %s, b);\n", aref);
    } else {
        sb_line(s, ind + 1, "orch_mlp_mma_%s(C[mt][nt], %s, b.x, b.y);\n", op, aref);
    }
    sb_line(s, ind, "}\n");
}

static void emit_mma_step(TcEm *T, const char *aref, int ind) {
    StrBuf *s = T->E.s;
    emit_mma_prep(T, aref, ind);
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int nt = 0; nt < %lld; nt++) {\n", (long long)(T->L->np[T->layer] / 8));
    emit_mma_nt(T, aref, ind + 1);
    sb_line(s, ind, "}\n");
}

static int emit_tc_layer(TcEm *T, int l, Err *e) {
    CEm *E = &T->E;
    const MlpChain *m = E->m;
    const TcLayout *L = T->L;
    StrBuf *s = E->s;
    bool last = l == m->n - 1;
    int64_t KS = L->kp[l] / L->kstep, NT = L->np[l] / 8, MT = T->MT, N = m->N[l], R = m->R;
    int64_t SP = L->sp, WR = 16 * MT;
    const char *ct = L->var == CUMLP_F64 ? "double" : "float"; // the accumulators
    // epi=ilv defers this layer's epilogue into the next layer's k loop (no A registers).
    bool defer = T->ilv && !last && m->epi[l];
    if (!last && !defer)
        declare_a(s, 2, L, l + 1, MT);
    sb_line(s, 2, "{ // layer %d: %lld -> %lld\n", l, (long long)m->K[l], (long long)N);
    sb_line(s, 3, "%s C[%lld][%lld][4];\n", ct, (long long)MT, (long long)NT);
    if (L->bias[l].prim >= 0) { // from the bias: columns 2t, 2t+1 of each n tile, both rows
        sb_line(s, 3, "const %s *bs_ = (const %s *)(orch_mlp_smw + %lld) + 2 * t;\n", ct, ct,
                (long long)L->bofs[l]);
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int nt = 0; nt < %lld; nt++) {\n", (long long)NT);
        sb_line(s, 4, "const %s b0_ = bs_[nt * 8], b1_ = bs_[nt * 8 + 1];\n", ct);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int mt = 0; mt < %lld; mt++) {\n", (long long)MT);
        sb_line(s, 5, "C[mt][nt][0] = C[mt][nt][2] = b0_;\n");
        sb_line(s, 5, "C[mt][nt][1] = C[mt][nt][3] = b1_;\n");
        sb_line(s, 4, "}\n");
        sb_line(s, 3, "}\n");
    } else {
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int nt = 0; nt < %lld; nt++)\n", (long long)NT);
        sb_line(s, 5, "C[mt][nt][0] = C[mt][nt][1] = C[mt][nt][2] = C[mt][nt][3] = 0.0f;\n");
    }
    sb_line(s, 3, "const uint%d *wl = (const uint%d *)(orch_mlp_smw + %lld) + lane;\n", L->bw,
            L->bw, (long long)L->wofs[l]);
    T->layer = l;
    bool pend = T->pending;
    T->pending = false;
    if (!pend) { // A from this layer's registers
        char aref[32];
        snprintf(aref, sizeof aref, "A%d[mt][ks]", l);
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int ks = 0; ks < %lld; ks++) {\n", (long long)KS);
        emit_mma_step(T, aref, 4);
        sb_line(s, 3, "}\n");
    } else {
        // The previous layer's epilogue is pending in P: software-pipelined over the k steps,
        // chunk kn of it computed (into registers) before step kn - 1's mmas, which it does
        // not depend on, so that its latencies overlap the tensor cores' work; then stored,
        // and step kn's A fragments loaded. The loop is rolled (nounroll: NVVM ignored
        // `unroll 1` here and a 6 x 64 f64 chain's code grew to 252 KB): one copy of the
        // epilogue's code serves every chunk.
        int64_t NE = 4 * MT * (L->kstep / 8);
        sb_line(s, 3, "uint32_t a_[%lld][%d];\n", (long long)MT, L->aw);
        if (T->xstaged) { // the first layer: the input in P, no epilogue to compute
            T->xstaged = false;
            sb_line(s, 3, "#pragma nounroll\n");
            sb_line(s, 3, "for (int kn = 0; kn < %lld; kn++) {\n", (long long)KS);
            sb_line(s, 4, "if (kn > 0) {\n");
            sb_line(s, 5, "const int ks = kn - 1;\n");
            emit_mma_step(T, "a_[mt]", 5);
            sb_line(s, 4, "}\n");
            ilv_load_a(T, 4);
            sb_line(s, 3, "}\n");
        } else {
            // Chunk kn beside step kn - 1's mmas, spread through its elements (an n tile's
            // mmas before each element): a warp then never issues a run of mmas back to back,
            // blocked while the tensor pipe serves the other warps' with its own elements
            // waiting behind them (H200, f64 6 x 64 chain: 99.3 -> 85.0 us; ptxas also spilled
            // 40 bytes instead of 212). Chunk 0, which has no mmas beside it, is peeled off.
            sb_line(s, 3, "{\n");
            sb_line(s, 4, "const int kn = 0;\n");
            sb_line(s, 4, "float ev_[%lld];\n", (long long)NE);
            sb_line(s, 4, "bool big_ = false;\n");
            int rc = ilv_compute(T, l - 1, 4, NULL, e);
            if (!rc)
                rc = ilv_finish(T, l - 1, 4, e);
            if (rc)
                return rc;
            sb_line(s, 3, "}\n");
            sb_line(s, 3, "#pragma nounroll\n");
            sb_line(s, 3, "for (int kn = 1; kn < %lld; kn++) {\n", (long long)KS);
            sb_line(s, 4, "float ev_[%lld];\n", (long long)NE);
            sb_line(s, 4, "bool big_ = false;\n");
            sb_line(s, 4, "{\n");
            sb_line(s, 5, "const int ks = kn - 1;\n");
            rc = ilv_compute(T, l - 1, 5, "a_[mt]", e);
            sb_line(s, 4, "}\n");
            if (!rc)
                rc = ilv_finish(T, l - 1, 4, e);
            if (rc)
                return rc;
            sb_line(s, 3, "}\n");
        }
        sb_line(s, 3, "{\n");
        sb_line(s, 4, "const int ks = %lld;\n", (long long)(KS - 1));
        emit_mma_step(T, "a_[mt]", 4);
        sb_line(s, 3, "}\n");
    }
    char dest[96], anext[16];
    snprintf(anext, sizeof anext, "A%d", l + 1);
    int rc = ST_OK;
    // The buffer of this layer's products (PX for odd layers where the layers' inputs are kept:
    // the previous layer's result stays in the other one).
    const char *pb = L->xbuf && l % 2 ? "PX" : "P", *px = L->xbuf && l % 2 ? "P" : "PX";
    // A layer without an epilogue re-packs in registers in either mode, unless the next layer's
    // epilogue reads its result from the buffer.
    bool keep = L->xbuf && !last && m->xin[l + 1];
    if (!T->epi_smem || (!m->epi[l] && !last && !keep)) {
        if (!last) {
            // In registers: every fragment element, padded columns kept at their zero product.
            if (m->epi[l]) {
                sb_line(s, 3, "#pragma unroll\n");
                sb_line(s, 3, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
                sb_line(s, 4, "#pragma unroll\n");
                sb_line(s, 4, "for (int nt = 0; nt < %lld; nt++)\n", (long long)NT);
                sb_line(s, 5, "#pragma unroll\n");
                sb_line(s, 5, "for (int z = 0; z < 4; z++) {\n");
                sb_line(s, 6, "const int64_t r_ = row0 + mt * 16 + (z >> 1) * 8 + g;\n");
                sb_line(s, 6, "const int64_t gr = r_ < %lld ? r_ : %lld;\n", (long long)R,
                        (long long)(R - 1));
                sb_line(s, 6, "const int c_ = nt * 8 + 2 * t + (z & 1);\n");
                bool pad = L->np[l] != N;
                if (pad)
                    sb_line(s, 6, "const int cc_ = c_ < %lld ? c_ : %lld;\n", (long long)N,
                            (long long)(N - 1));
                sb_line(s, 6, "const float accv = C[mt][nt][z];\n");
                sb_line(s, 6, "float v_;\n");
                rc = emit_epi(E, l, "accv", pad ? "cc_" : "c_", "gr", "v_", 6, e);
                if (rc)
                    return rc;
                if (pad)
                    sb_line(s, 6, "C[mt][nt][z] = c_ < %lld ? v_ : 0.0f;\n", (long long)N);
                else
                    sb_line(s, 6, "C[mt][nt][z] = v_;\n");
                sb_line(s, 5, "}\n");
            }
            int64_t KQ = L->np[l] / L->kstep;
            sb_line(s, 3, "#pragma unroll\n");
            sb_line(s, 3, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
            sb_line(s, 4, "#pragma unroll\n");
            sb_line(s, 4, "for (int kq = 0; kq < %lld; kq++) {\n", (long long)KQ);
            if (L->kstep == 16) {
                emit_pack(s, 5, L, anext, "[mt][kq]", "0", 0, "C[mt][2 * kq][0]",
                          "C[mt][2 * kq][1]");
                emit_pack(s, 5, L, anext, "[mt][kq]", "1", 0, "C[mt][2 * kq][2]",
                          "C[mt][2 * kq][3]");
                emit_pack(s, 5, L, anext, "[mt][kq]", "0", 1, "C[mt][2 * kq + 1][0]",
                          "C[mt][2 * kq + 1][1]");
                emit_pack(s, 5, L, anext, "[mt][kq]", "1", 1, "C[mt][2 * kq + 1][2]",
                          "C[mt][2 * kq + 1][3]");
            } else {
                emit_pack(s, 5, L, anext, "[mt][kq]", "0", 0, "C[mt][kq][0]", "C[mt][kq][1]");
                emit_pack(s, 5, L, anext, "[mt][kq]", "1", 0, "C[mt][kq][2]", "C[mt][kq][3]");
            }
            sb_line(s, 4, "}\n");
        } else {
            // The output from the fragments: a float2 (row g or g+8, columns 2t, 2t+1) each.
            sb_line(s, 3, "#pragma unroll\n");
            sb_line(s, 3, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
            sb_line(s, 4, "#pragma unroll\n");
            sb_line(s, 4, "for (int h = 0; h < 2; h++) {\n");
            sb_line(s, 5, "const int64_t gr = row0 + mt * 16 + h * 8 + g;\n");
            sb_line(s, 5, "if (gr < %lld) {\n", (long long)R);
            sb_line(s, 6, "#pragma unroll\n");
            sb_line(s, 6, "for (int nt = 0; nt < %lld; nt++) {\n", (long long)NT);
            sb_line(s, 7, "const int c_ = nt * 8 + 2 * t;\n");
            sb_line(s, 7, "const float a0_ = C[mt][nt][2 * h], a1_ = C[mt][nt][2 * h + 1];\n");
            if (N % 8)
                sb_line(s, 7, "if (c_ < %lld) {\n", (long long)N);
            else
                sb_line(s, 7, "{\n");
            DType ot = out_dtype(m);
            if (N % 2 == 0) {
                sb_line(s, 8, "float v0_, v1_;\n");
                rc = emit_epi(E, l, "a0_", "c_", "gr", "v0_", 8, e);
                if (!rc)
                    rc = emit_epi(E, l, "a1_", "c_ + 1", "gr", "v1_", 8, e);
                if (rc)
                    return rc;
                if (is_half(ot)) // both rounded once by one cvt, the lower half first
                    sb_line(s, 8, "*(uint32_t *)(o + gr * %lld + c_) = %s(v0_, v1_);\n",
                            (long long)N, ot == DT_FLOAT16 ? "orch_mlp_f16x2" : "orch_mlp_bf16x2");
                else
                    sb_line(s, 8, "*(float2 *)(o + gr * %lld + c_) = make_float2(v0_, v1_);\n",
                            (long long)N);
            } else {
                snprintf(dest, sizeof dest, "gr * %lld + c_", (long long)N);
                rc = emit_epi_out(E, l, "a0_", "c_", "gr", dest, 8, e);
                if (rc)
                    return rc;
                sb_line(s, 8, "if (c_ + 1 < %lld) {\n", (long long)N);
                snprintf(dest, sizeof dest, "gr * %lld + c_ + 1", (long long)N);
                rc = emit_epi_out(E, l, "a1_", "c_ + 1", "gr", dest, 9, e);
                if (rc)
                    return rc;
                sb_line(s, 8, "}\n");
            }
            sb_line(s, 7, "}\n");
            sb_line(s, 6, "}\n");
            sb_line(s, 5, "}\n");
            sb_line(s, 4, "}\n");
        }
        sb_line(s, 2, "}\n");
        return ST_OK;
    }
    // Through the warp's buffer P: the products (after every lane has read the previous
    // contents), then a rolled epilogue loop, lane = column (or, deferred, the next layer's
    // k loop).
    sb_line(s, 3, "__syncwarp();\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int nt = 0; nt < %lld; nt++)\n", (long long)NT);
    sb_line(s, 5, "#pragma unroll\n");
    sb_line(s, 5, "for (int h = 0; h < 2; h++)\n");
    sb_line(s, 6,
            "*(float2 *)(%s + (mt * 16 + h * 8 + g) * %lld + nt * 8 + 2 * t) = "
            "make_float2(C[mt][nt][2 * h], C[mt][nt][2 * h + 1]);\n",
            pb, (long long)SP);
    sb_line(s, 3, "__syncwarp();\n");
    if (defer) {
        T->pending = true;
        sb_line(s, 2, "}\n");
        return ST_OK;
    }
    int64_t NCC = (N + 31) / 32;
    if (m->n_red[l] > 0) {
        // The row statistics of the warp's rows from the products in the buffer (and the
        // layer's input in the other one), into the warp-private RS, before the epilogue reads
        // them. Rows past the last hold the last row's products.
        RowStats RR = {.ind = 3,
                       .first = "0",
                       .step = "1",
                       .rows = WR,
                       .unroll = "#pragma unroll 4",
                       .base = "RS",
                       .stride = 2 * WR,
                       .sync = "__syncwarp();"};
        snprintf(RR.gr, sizeof RR.gr, "row0 + rr < %lld ? row0 + rr : %lld", (long long)R,
                 (long long)(R - 1));
        snprintf(RR.acc, sizeof RR.acc, "%s[rr * %lld + cc]", pb, (long long)SP);
        if (m->xin[l] && l > 0)
            snprintf(RR.xin, sizeof RR.xin, "%s[rr * %lld + cc]", px, (long long)SP);
        rc = emit_row_stats(E, l, &RR, e);
        if (rc)
            return rc;
    }
    if (m->epi[l] || last) {
        if (last) {
            sb_line(s, 3, "const int nr = %lld - row0 < %lld ? (int)(%lld - row0) : %lld;\n",
                    (long long)R, (long long)WR, (long long)R, (long long)WR);
            sb_line(s, 3, "#pragma unroll 2\n");
            sb_line(s, 3, "for (int r = 0; r < nr; r++) {\n");
            sb_line(s, 4, "const int64_t gr = row0 + r;\n");
        } else {
            sb_line(s, 3, "#pragma unroll 2\n");
            sb_line(s, 3, "for (int r = 0; r < %lld; r++) {\n", (long long)WR);
            sb_line(s, 4, "const int64_t gr = row0 + r < %lld ? row0 + r : %lld;\n", (long long)R,
                    (long long)(R - 1));
        }
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int cc = 0; cc < %lld; cc++) {\n", (long long)NCC);
        sb_line(s, 5, "const int c_ = lane + cc * 32;\n");
        if (N % 32)
            sb_line(s, 5, "if (c_ < %lld) {\n", (long long)N);
        else
            sb_line(s, 5, "{\n");
        sb_line(s, 6, "float *pp = %s + r * %lld + c_;\n", pb, (long long)SP);
        sb_line(s, 6, "const float accv = *pp;\n");
        // The layer's input: the previous layer's result in the other buffer (layer 0 reads the
        // chain's input rows from memory: no pin, cexpr loads them).
        if (m->xin[l] && l > 0) {
            sb_line(s, 6, "const float xin_ = %s[r * %lld + c_];\n", px, (long long)SP);
            E->xin = "xin_";
        }
        E->rrow = "r"; // the row statistics (emit_row_stats left n_rs at the layer's count)
        if (last) {
            snprintf(dest, sizeof dest, "gr * %lld + c_", (long long)N);
            rc = emit_epi_out(E, l, "accv", "c_", "gr", dest, 6, e);
        } else {
            rc = emit_epi(E, l, "accv", "c_", "gr", "*pp", 6, e);
        }
        E->xin = NULL;
        E->rrow = NULL;
        E->n_rs = 0;
        if (rc)
            return rc;
        sb_line(s, 5, "}\n");
        sb_line(s, 4, "}\n");
        sb_line(s, 3, "}\n");
        if (!last)
            sb_line(s, 3, "__syncwarp();\n");
    }
    if (!last) {
        int64_t KQ = L->np[l] / L->kstep;
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int h = 0; h < 2; h++) {\n");
        sb_line(s, 5, "const float *pr = %s + (mt * 16 + h * 8 + g) * %lld + 2 * t;\n", pb,
                (long long)SP);
        sb_line(s, 5, "#pragma unroll\n");
        sb_line(s, 5, "for (int kq = 0; kq < %lld; kq++) {\n", (long long)KQ);
        if (L->kstep == 16) {
            sb_line(s, 6, "const float2 v0 = *(const float2 *)(pr + kq * 16);\n");
            sb_line(s, 6, "const float2 v1 = *(const float2 *)(pr + kq * 16 + 8);\n");
            emit_pack(s, 6, L, anext, "[mt][kq]", "h", 0, "v0.x", "v0.y");
            emit_pack(s, 6, L, anext, "[mt][kq]", "h", 1, "v1.x", "v1.y");
        } else {
            sb_line(s, 6, "const float2 v0 = *(const float2 *)(pr + kq * 8);\n");
            emit_pack(s, 6, L, anext, "[mt][kq]", "h", 0, "v0.x", "v0.y");
        }
        sb_line(s, 5, "}\n");
        sb_line(s, 4, "}\n");
    }
    sb_line(s, 2, "}\n");
    return ST_OK;
}

static int emit_tc(const MlpChain *m, const KernelConfig *cfg, const TargetOptions *opt,
                   const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    CuMlpConfig q;
    cumlp_config_unpack(cfg, &q);
    int64_t W = q.w, MT = q.mt, G = q.g, BPS = q.bps;
    bool epi_smem = q.epi != CUMLP_EPI_REG;
    if (W < 1 || W > 32 || MT < 1 || MT > 4 || G < 1 || BPS < 1 || q.epi < CUMLP_EPI_REG ||
        q.epi > CUMLP_EPI_ILVX)
        return err_set(e, ST_USAGE, "CUDA mlp kernel %s: bad config '%s'", fn, cfg->desc);
    if (!tc_fits(m, q.var))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: config '%s' does not fit the chain's %s tensors", fn,
                       cfg->desc, dtype_name(m->dtype));
    TcLayout L;
    tc_layout(m, (int)q.var, q.epi == CUMLP_EPI_ILVX, &L);
    if (q.epi == CUMLP_EPI_ILVX && !xstage_ok(m, &L))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: config '%s' stages float32 inputs only", fn, cfg->desc);
    const Candidate *c = m->c;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    EpiGraph V;
    Cexpr *cx = cexpr_create(epi_graph(m, L.bias, &V), c, fn, &decls);
    TcEm T = {{m, fn, &body, cx, -1, "acc", NULL, NULL, 0},
              &L,
              W,
              MT,
              epi_smem,
              q.epi >= CUMLP_EPI_ILV,
              false,
              q.epi == CUMLP_EPI_ILVX,
              false,
              0,
              0};
    cugen_cexpr_dialect(T.E.x, cugen_fast_math(opt));
    cexpr_set_reader(T.E.x, reader, &T.E);
    StrBuf *s = &body;
    emit_head(m, fn, T.W * 32, BPS, s);
    sb_line(s, 1, "extern __shared__ __align__(16) uint32_t orch_mlp_smw[];\n");
    emit_tc_stage(m, &L, 32 * W, s);
    sb_line(s, 1, "__syncthreads();\n");
    sb_line(s, 1, "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
    sb_line(s, 1, "const int g = lane >> 2, t = lane & 3;\n");
    if (epi_smem)
        sb_line(s, 1, "float *P = (float *)(orch_mlp_smw + %lld) + warp * %lld;\n",
                (long long)L.pofs, (long long)(16 * MT * L.sp));
    if (epi_smem && L.xbuf)
        sb_line(s, 1, "float *PX = P + %lld;\n", (long long)(W * 16 * MT * L.sp));
    if (epi_smem && L.nred > 0)
        sb_line(s, 1, "uint32_t *RS = orch_mlp_smw + %lld + warp * %lld;\n",
                (long long)tc_stats_ofs(&L, W, MT), (long long)tc_stats(&L, MT));
    emit_tile_loop(s, W, G, 16 * MT, m->R);
    // (Loading the next tile's input into registers during this one measured no gain on an
    // H100: 96.8 against 99.1 us at best, and it costs the registers of more warps.)
    if (T.xstage) {
        // The input rows into P (the layout ilv_finish loads fragments from), for the first
        // layer's rolled k loop, once every lane is done with the last tile's output in P.
        declare_xv(&T, 2);
        emit_tc_xload(&T, "row0", 2);
        sb_line(s, 2, "__syncwarp();\n");
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int mt = 0; mt < %lld; mt++)\n", (long long)MT);
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int h = 0; h < 2; h++)\n");
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int ks = 0; ks < %lld; ks++) {\n", (long long)(L.kp[0] / L.kstep));
        sb_line(s, 5, "float *pr = P + (mt * 16 + h * 8 + g) * %lld + ks * %d + 2 * t;\n",
                (long long)L.sp, L.kstep);
        sb_line(s, 5, "*(float2 *)pr = xv[mt][h][ks][0];\n");
        if (L.kstep == 16)
            sb_line(s, 5, "*(float2 *)(pr + 8) = xv[mt][h][ks][1];\n");
        sb_line(s, 4, "}\n");
        sb_line(s, 2, "__syncwarp();\n");
        T.pending = T.xstaged = true;
    } else if (L.xraw) {
        emit_tc_xload_raw(&T, "row0", 2);
    } else {
        declare_xv(&T, 2);
        emit_tc_xload(&T, "row0", 2);
        emit_tc_xpack(&T, 2);
    }
    int rc = ST_OK;
    for (int l = 0; l < m->n && !rc; l++)
        rc = emit_tc_layer(&T, l, e);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    cexpr_free(T.E.x);
    epi_graph_free(&V);
    if (!rc) {
        emit_tc_helpers(src);
        if (half_chain(m))
            emit_half_helpers(src);
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s);
        set_launch(launch, G, T.W * 32, tc_smem(&L, W, MT, epi_smem));
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

// ---- configs and the device model ----

// ALU instructions of one element of an ELEMWISE program's op (CUDA's accurate math, or the
// prelude's fast versions).
static double ew_cost(EwOp op, bool fast) {
    const CudaMlpModel *cm = &CUDA_MLP_MODEL;
    // Under fast math (cexpr_set_fast_math: reduced precisions) these are the prelude's
    // special-function-unit versions.
    if (fast && (op == EW_EXP || op == EW_SIN || op == EW_COS || op == EW_SIGMOID))
        return op == EW_EXP       ? cm->ew_fast_exp
               : op == EW_SIGMOID ? cm->ew_fast_sigmoid
                                  : cm->ew_fast_trig;
    switch (op) {
    case EW_EXP:
    case EW_LOG:
    case EW_SQRT:
    case EW_RSQRT:
    case EW_RECIP:
    case EW_DIV: return cm->ew_div;
    case EW_ERF:
    case EW_TANH:
    case EW_SIGMOID:
    case EW_SIN:
    case EW_COS: return cm->ew_transc;
    case EW_TAN:
    case EW_ASIN:
    case EW_ACOS:
    case EW_ATAN:
    case EW_SINH:
    case EW_COSH:
    case EW_ASINH:
    case EW_ACOSH:
    case EW_ATANH:
    case EW_SOFTPLUS:
    case EW_POW: return cm->ew_costly;
    default: return cm->ew_plain;
    }
}

// The epilogues' ALU instructions per element of a layer's output, averaged over the chain;
// fast: they take the fast transcendentals (cugen_fast_math, cugen_cexpr_dialect).
static double epi_per_elem(const MlpChain *m, bool fast) {
    double sum = 0, elems = 0;
    for (int i = 0; i < m->c->n_prims; i++) {
        const Prim *p = m->pg->prims[m->c->prims[i]];
        if (p->kind != PRIM_ELEMWISE)
            continue;
        double cost = 0;
        for (int k = 0; k < p->ew.n; k++)
            cost += ew_cost(p->ew.code[k].op, fast);
        sum += cost * (double)tensor_numel(m->pg->tensors[p->out[0]]) / (double)m->R;
    }
    for (int l = 0; l < m->n; l++)
        elems += (double)m->N[l];
    return sum / elems;
}

// ALU instructions of one element of tensor t in layer l's epilogue: the candidate's ELEMWISE
// primitives on the way to it from the product, the layer's input, the row statistics and the
// constants, counted along every path (as cexpr computes it where nothing is pinned).
static double value_cost(const MlpChain *m, int t, bool fast, int depth) {
    const PrimGraph *pg = m->pg;
    int pid = pg->tensors[t]->producer;
    if (depth > 16 || pid < 0 || pg->prims[pid]->kind != PRIM_ELEMWISE)
        return 0;
    bool mine = false;
    for (int i = 0; i < m->c->n_prims && !mine; i++)
        mine = m->c->prims[i] == pid;
    if (!mine)
        return 0;
    const Prim *p = pg->prims[pid];
    double cost = 0;
    for (int k = 0; k < p->ew.n; k++)
        cost += ew_cost(p->ew.code[k].op, fast);
    for (int j = 0; j < p->n_in; j++)
        if (p->in[j] >= 0)
            cost += value_cost(m, p->in[j], fast, depth + 1);
    return cost;
}

// A warp's instructions for one row's statistics of layer l (emit_row_stats): per column a
// load, the statistic's input, the sum and the loop (a double sum: a conversion more), then the
// shuffle tree (a double: two shuffles a step), the store and the barrier.
static double red_row_instr(const MlpChain *m, int l, bool fast) {
    double r = 0, cols = ceil((double)m->N[l] / 32);
    for (int k = 0; k < m->n_red[l]; k++) {
        const Prim *p = m->pg->prims[m->red[l][k]];
        bool dbl = m->pg->tensors[p->out[0]]->dtype == DT_DOUBLE;
        r += cols * (value_cost(m, p->in[0], fast, 0) + 4 + (dbl ? 1 : 0)) + (dbl ? 15 : 10) + 4;
    }
    return r;
}

typedef struct Dev {
    CuDevice dev; // device_model.h
    bool fast;    // the code's epilogues take the fast transcendentals (cugen_fast_math)
} Dev;

static Dev dev_of(const CudaHw *hw, const TargetOptions *opt) {
    Dev d = {cudev_of(hw), cugen_fast_math(opt)};
    return d;
}

// Blocks per SM of a persistent kernel (shared memory, threads, registers); 0: none fits.
static int64_t blocks_per_sm(const Dev *d, int64_t smem, int64_t T, int64_t regs) {
    if (smem > d->dev.smem_optin || regs > CUDA_ARCH.max_regs)
        return 0;
    return ORCH_MIN(cudev_blocks_per_sm(&d->dev, T, cudev_regs_alloc(regs), smem),
                    CUDA_MLP_MODEL.persist_max_bps);
}

// A persistent kernel's time, a sum fitted to H100 measurements (6 layers 64 wide at 65536 rows:
// the parts barely overlap): the launch; the weights' staging, `wbytes` read from L2 by every
// block an SM holds; the chain's input and output crossing DRAM; the tensor cores' issue cycles
// (`tc` per row, of one SM sub-partition); and the ALU instructions per row, `fma` of them in
// long independent streams and `epi` in the epilogues' dependent chains (the latter issue at the
// rate the resident warps per scheduler hide their latency: about 4 warps saturate a scheduler).
// Tiles are dealt round-robin, so the busiest warp's share counts, and the warps left alone in
// a last partial round run at a fraction of the occupancy (hence the square).
static double persist_time(const MlpChain *m, const Dev *d, double fma, double epi, double tc,
                           int64_t rows, int64_t W, int64_t G, int64_t bps, double ilp,
                           double wbytes, double overlap) {
    const CudaMlpModel *cm = &CUDA_MLP_MODEL;
    double tiles = ceil((double)m->R / (double)rows), warps = (double)(G * W);
    double imbalance = ceil(tiles / warps) / (tiles / warps);
    double resident = ORCH_MIN((double)bps, cudev_per_sm(&d->dev, (double)G));
    double wps = resident * (double)W / CUDA_ARCH.schedulers * ilp;
    double eff_fma = ORCH_MIN(1.0, cm->fma_eff0 + cm->fma_eff_wps * wps),
           eff_epi = ORCH_MIN(1.0, cm->epi_eff_wps * wps);
    double rows_all = tiles * (double)rows, lanes = cudev_issue_rate(&d->dev);
    // `overlap`: the share of the shorter of the epilogues and the tensor cores hidden under the
    // longer (epi=ilv interleaves them in every warp).
    double te = epi / eff_epi, hidden = overlap * ORCH_MIN(te, tc);
    double t = rows_all * (fma / eff_fma + te + tc - hidden) / lanes * imbalance * imbalance;
    double bytes = io_bytes(m);
    return t + bytes / (cm->dram_eff * d->dev.dram_bw) +
           resident * wbytes / (CUDA_ARCH.l2_bytes_clock * d->dev.clock) + CUDA_ARCH.launch_s;
}

static double warp_score(const MlpChain *m, const Dev *d, int64_t W, int64_t G, int64_t bps) {
    // per 32-row tile
    double e = epi_per_elem(m, d->fast), fma = (double)m->K[0] * CUDA_MLP_MODEL.warp_in_instr,
           epi = 0;
    for (int l = 0; l < m->n; l++) {
        double TN = m->N[l] > 32 ? 8 : 4, N = (double)m->N[l];
        fma += (double)m->K[l] * (8 * TN + 6) + 2 * TN + 8;
        if (l + 1 < m->n)
            epi += m->epi[l] ? N * (e + 5) : 0;
        else
            epi += ceil(N / 32) * 32 * (e + 6);
    }
    WarpLayout L;
    warp_layout(m, &L);
    return persist_time(m, d, fma / 32, epi / 32, 0, 32, W, G, bps, 1.0,
                        (double)L.wfloats * (double)dtype_size(m->dtype), 0.0);
}

// epi=ilv hides a share of the epilogues' time under the tensor cores' (or theirs under the
// epilogues'): CUDA_MLP_MODEL's ilv_overlap (DMMAs throttled at issue keep a warp from its
// epilogue work while they drain, so most of the overlap comes from other warps either way), and
// f64_overlap for f64's m16n8k16 DMMAs (the m16n8k4 kernels measured 102.7, 112.0, 127.6,
// 127.6 us where the table's k16 ones measured 102.4, 108.3, 110.4, 130.2).
static double tc_score(const MlpChain *m, const Dev *d, const TcLayout *L, int64_t W, int64_t MT,
                       int es, int64_t G, int64_t bps) {
    const CudaMlpModel *cm = &CUDA_MLP_MODEL;
    bool epi_smem = es != 0;
    double e = epi_per_elem(m, d->fast), fma = 0, epi = 0, tc = 0, rows = 16.0 * (double)MT;
    bool x3 = L->var == CUMLP_3XTF32;
    double f = x3 ? 3 : 1;
    // Conversion instructions per pair of values packed into A registers.
    double pack = L->var == CUMLP_F16 || L->var == CUMLP_BF16   ? 1
                  : L->var == CUMLP_TF32 || L->var == CUMLP_F64 ? 2
                                                                : 8;
    // Issue cycles of one mma.sync on a sub-partition.
    double cyc = d->dev.cc_major >= 9 ? cm->mma_cycles_sm90 : cm->mma_cycles_sm80;
    // f64: one m16n8k16 DMMA and the widening of the B words (4) and of a k step's A registers
    // (8).
    bool f64 = L->var == CUMLP_F64;
    if (f64)
        cyc = cm->dmma_cycles;
    if (L->xraw) // one load per k step and row half, no conversion
        fma += (double)MT * 2 * (double)(L->kp[0] / L->kstep);
    else
        fma += (double)MT * 2 * (double)(L->kp[0] / L->kstep) * (L->kstep / 8) * (2 + pack);
    for (int l = 0; l < m->n; l++) {
        double KS = (double)(L->kp[l] / L->kstep), NT = (double)(L->np[l] / 8);
        double frag = (double)MT * NT * 4; // accumulator elements per lane
        bool last = l + 1 == m->n;
        fma += KS * NT * (1 + f * (double)MT + (x3 ? 6 : 0) + (f64 ? 4 : 0)) +
               (f64 ? KS * 8 * (double)MT : 0);
        tc += KS * NT * f * (double)MT * cyc;
        if (!epi_smem) {
            epi += m->epi[l] || last ? frag * (e + 3) : 0;
            fma += frag / 2 * pack;
        } else {
            fma += frag / 2 * (2 + pack);
            epi += rows * ceil((double)m->N[l] / 32) * (e + 5);
            // Row statistics: one dependent chain a row, each a shuffle tree at its end.
            epi += rows * red_row_instr(m, l, d->fast);
        }
    }
    // A register epilogue is one long unrolled stream: independent chains for the scheduler.
    double ilp = epi_smem ? cm->ilp_smem0 + cm->ilp_smem_mt * (double)(MT - 1)
                          : cm->ilp_reg0 + cm->ilp_reg_mt * (double)(MT - 1);
    // The weights as the staging reads them (as stored).
    double wbytes = 0, wb = (double)dtype_size(m->dtype);
    for (int l = 0; l < m->n; l++)
        wbytes += wb * (double)(m->K[l] * m->N[l]);
    return persist_time(m, d, fma / rows, epi / rows, tc / rows, (int64_t)rows, W, G, bps, ilp,
                        wbytes, es >= 2 ? (f64 ? cm->f64_overlap : cm->ilv_overlap) : 0.0);
}

// The tensor-core variants the precision (opt) allows on the device: tf32 / f16 / bf16 under
// the matching precision; 3xtf32 (float32-level accuracy) under float32. A half chain: the
// variant of its type whatever the precision (its operands are half already; the activations
// between layers are rounded to it as the interpreter rounds them).
static int tc_variants(const MlpChain *m, const Dev *d, const TargetOptions *opt, int *out) {
    if (d->dev.cc_major < 8)
        return 0;
    if (half_chain(m)) {
        out[0] = m->dtype == DT_FLOAT16 ? CUMLP_F16 : CUMLP_BF16;
        return 1;
    }
    // fp32 promises exact float32 FMAs (orch compile --precision), so 3xTF32 (float32-level
    // accuracy from split TF32 products, 7.3e-7 of max|ref| against 2.9e-7 on an H100) is only
    // offered beside TF32, where it is the more accurate choice the BLP may weigh.
    switch (cugen_prec_of(opt, DT_FLOAT)) {
    case PREC_FP32:
        // The FP64 tensor cores keep the promise and more: float32 operands multiplied exactly
        // and summed in double, rounded once (sm_90: m16n8k16 DMMA).
        if (d->dev.cc_major < 9)
            return 0;
        out[0] = CUMLP_F64;
        return 1;
    case PREC_TF32:
        out[0] = CUMLP_TF32;
        out[1] = CUMLP_3XTF32;
        return 2;
    case PREC_FP16: out[0] = CUMLP_F16; return 1;
    case PREC_BF16: out[0] = CUMLP_BF16; return 1;
    default: return 0;
    }
}

static const char *var_name(int64_t v) {
    switch (v) {
    case CUMLP_WARP: return "warp";
    case CUMLP_TF32: return "tf32";
    case CUMLP_3XTF32: return "3xtf32";
    case CUMLP_F16: return "f16";
    case CUMLP_BF16: return "bf16";
    case CUMLP_F64: return "f64";
    default: return "block";
    }
}

void cumlp_config_pack(const CuMlpConfig *q, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_MLP);
    int64_t *p = k->p;
    p[Q_BM] = q->bm;
    p[Q_T] = q->t;
    p[Q_TM] = q->tm;
    p[Q_TN] = q->tn;
    p[Q_STAGE] = q->stage;
    p[Q_VAR] = q->var;
    p[Q_W] = q->w;
    p[Q_MT] = q->mt;
    p[Q_EPI] = q->epi;
    p[Q_G] = q->g;
    p[Q_BPS] = q->bps;
    if (q->var == CUMLP_BLOCK)
        snprintf(k->desc, sizeof k->desc, "cls=mlp bm=%lld t=%lld tm=%lld tn=%lld stage=%lld",
                 (long long)q->bm, (long long)q->t, (long long)q->tm, (long long)q->tn,
                 (long long)q->stage);
    else if (q->var == CUMLP_WARP)
        snprintf(k->desc, sizeof k->desc, "cls=mlp v=warp w=%lld g=%lld bps=%lld", (long long)q->w,
                 (long long)q->g, (long long)q->bps);
    else
        snprintf(k->desc, sizeof k->desc, "cls=mlp v=%s w=%lld mt=%lld epi=%s g=%lld bps=%lld",
                 var_name(q->var), (long long)q->w, (long long)q->mt,
                 q->epi == CUMLP_EPI_ILVX  ? "ilvx"
                 : q->epi == CUMLP_EPI_ILV ? "ilv"
                 : q->epi                  ? "smem"
                                           : "reg",
                 (long long)q->g, (long long)q->bps);
}

bool cumlp_config_unpack(const KernelConfig *k, CuMlpConfig *q) {
    const int64_t *p = k->p;
    *q = (CuMlpConfig){.var = p[Q_VAR],
                       .bm = p[Q_BM],
                       .t = p[Q_T],
                       .tm = p[Q_TM],
                       .tn = p[Q_TN],
                       .stage = p[Q_STAGE],
                       .w = p[Q_W],
                       .mt = p[Q_MT],
                       .epi = p[Q_EPI],
                       .g = p[Q_G],
                       .bps = p[Q_BPS]};
    return k->cls == CUCLS_MLP;
}

bool cugen_mlp_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || c->n_inputs > ORCH_CUDA_MAX_IN || m.R > ((int64_t)1 << 31) * 32)
        return false;
    KernelConfig k;
    cumlp_config_pack(&(CuMlpConfig){.var = CUMLP_BLOCK, .bm = 32, .t = 128, .tm = 2, .tn = 4}, &k);
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_block(&m, &k, opt, "orch_dry", &s, NULL, &e);
    sb_free(&s);
    // Without staging the smallest tile must fit the opt-in shared memory of every GPU orch
    // targets.
    return rc == ST_OK && smem_bytes(&m, 32, false) <= CUDA_ARCH.smem_optin_any;
}

int cugen_mlp_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k) {
    const CudaMlpModel *cm = &CUDA_MLP_MODEL;
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || k < 1)
        return 0;
    Dev d = dev_of(hw, opt);
    int64_t optin = d.dev.smem_optin;
    static const int64_t bms[] = {32, 64, 128}, ts[] = {64, 128, 256}, tms[] = {2, 4, 8};
    KernelConfig all[200];
    int n = 0;
    for (size_t a = 0; a < ORCH_COUNT(bms); a++)
        for (size_t b = 0; b < ORCH_COUNT(ts); b++)
            for (size_t q = 0; q < ORCH_COUNT(tms); q++)
                for (int st = 0; st < 2; st++) {
                    if (bms[a] % tms[q] || smem_bytes(&m, bms[a], st) > optin ||
                        (bms[a] > 32 && (bms[a] / 2) >= m.R))
                        continue;
                    // Threads beyond a layer's tiles idle: at least half of them need work.
                    if (bms[a] / tms[q] * ((m.N[0] + 3) / 4) < ts[b] / 2)
                        continue;
                    CuMlpConfig qc = {.var = CUMLP_BLOCK,
                                      .bm = bms[a],
                                      .t = ts[b],
                                      .tm = tms[q],
                                      .tn = 4,
                                      .stage = st};
                    KernelConfig *kc = &all[n++];
                    cumlp_config_pack(&qc, kc);
                    kc->score = score(&m, &d.dev, &qc) * cm->blk_scale;
                }
    if (n == 0) { // tiny chains: the smallest block always fits (cugen_mlp_supports)
        CuMlpConfig qc = {.var = CUMLP_BLOCK, .bm = 32, .t = 64, .tm = 2, .tn = 4};
        KernelConfig *kc = &all[n++];
        cumlp_config_pack(&qc, kc);
        kc->score = score(&m, &d.dev, &qc) * cm->blk_scale;
    }
    // An epilogue that reads its layer's input (a gate, a residual) needs the previous
    // activations beside the products: the block design keeps them in its other buffer; the
    // persistent designs overwrite them (warp) or hold them as mma fragments (tensor cores).
    // Persistent kernels: at most as many blocks as the tiles keep busy.
    WarpLayout WL;
    static const int64_t warp_ws[] = {4, 8, 12, 16};
    // A row reduction (a LayerNorm) needs the whole row of a layer's products before its
    // epilogue: the block design has it in shared memory, the tensor cores' epi=smem in the
    // warp's buffer; the warp design and the other epilogue modes hold a row's columns in
    // different lanes' registers and are not offered.
    for (size_t i = 0; !m.any_xin && !m.any_red && warp_layout(&m, &WL) && i < ORCH_COUNT(warp_ws);
         i++) {
        int64_t W = warp_ws[i], bps = blocks_per_sm(&d, warp_smem(&WL, W), 32 * W, cm->warp_regs);
        if (bps < 1)
            continue;
        int64_t tiles = (m.R + 31) / 32,
                G = ORCH_MIN((int64_t)d.dev.sms * bps, (tiles + W - 1) / W);
        KernelConfig *kc = &all[n++];
        cumlp_config_pack(&(CuMlpConfig){.var = CUMLP_WARP, .w = W, .g = G, .bps = bps}, kc);
        kc->score = warp_score(&m, &d, W, G, bps);
    }
    int vars[4];
    int nv = tc_variants(&m, &d, opt, vars);
    // A register epilogue unrolls one copy of the epilogue per accumulator element: for costly
    // epilogues (a sin, a sigmoid) that code no longer fits the instruction cache (the
    // measurements are CUDA_MLP_MODEL.reg_epi_max's), and NVRTC takes seconds over it. Under
    // fast math the same chain's epilogue is about 16 instructions and fits, which also saves
    // the buffer's loads, stores and addressing (35 -> 21 instructions an element).
    bool reg_ok = epi_per_elem(&m, d.fast) <= (d.fast ? cm->reg_epi_max_fast : cm->reg_epi_max);
    // epi=ilv needs a layer before the last with an epilogue to defer.
    bool ilv_ok = false;
    for (int l = 0; l + 1 < m.n; l++)
        ilv_ok = ilv_ok || m.epi[l];
    static const int64_t tc_ws[] = {4, 8, 12, 16}, tc_mts[] = {1, 2};
    for (int v = 0; v < nv; v++) {
        TcLayout L, LX; // LX: P's stride for epi=ilvx
        tc_layout(&m, vars[v], false, &L);
        tc_layout(&m, vars[v], true, &LX);
        for (size_t i = 0; i < ORCH_COUNT(tc_ws); i++)
            for (size_t j = 0; j < ORCH_COUNT(tc_mts); j++)
                for (int es = reg_ok ? 0 : 1; es < (!ilv_ok             ? 2
                                                    : xstage_ok(&m, &L) ? 4
                                                                        : 3);
                     es++) {
                    if ((m.any_xin || m.any_red) && es != CUMLP_EPI_SMEM)
                        continue;
                    int64_t W = tc_ws[i], MT = tc_mts[j];
                    int64_t regs = tc_regs(&m, &L, MT, es >= 2, es == 3);
                    if (regs > cm->tc_max_regs || n == (int)ORCH_COUNT(all))
                        continue;
                    int64_t bps = blocks_per_sm(&d, tc_smem(es == 3 ? &LX : &L, W, MT, es != 0),
                                                32 * W, regs);
                    if (bps < 1)
                        continue;
                    int64_t tiles = (m.R + 16 * MT - 1) / (16 * MT);
                    int64_t G = ORCH_MIN((int64_t)d.dev.sms * bps, (tiles + W - 1) / W);
                    CuMlpConfig qc = {
                        .var = vars[v], .w = W, .mt = MT, .epi = es, .g = G, .bps = bps};
                    KernelConfig *kc = &all[n++];
                    cumlp_config_pack(&qc, kc);
                    kc->score = tc_score(&m, &d, es == 3 ? &LX : &L, W, MT, es, G, bps) *
                                (vars[v] == CUMLP_F64 ? cm->f64_scale : 1.0);
                }
    }
    return cgen_sort_configs(all, n, out, k);
}

int cugen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m))
        return err_set(e, ST_UNSUPPORTED, "CUDA mlp kernel %s: candidate %d is not an MLP chain",
                       fn, c->id);
    CuMlpConfig q;
    cumlp_config_unpack(cfg, &q);
    int64_t v = q.var, smem;
    if (m.any_xin && v != CUMLP_BLOCK && (!tc_var(v) || q.epi != CUMLP_EPI_SMEM))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: config '%s': an epilogue reads its layer's input, "
                       "which only the block design and the tensor cores' epi=smem keep",
                       fn, cfg->desc);
    if (m.any_red && v != CUMLP_BLOCK && (!tc_var(v) || q.epi != CUMLP_EPI_SMEM))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: config '%s': an epilogue reduces over the row (a "
                       "LayerNorm), which only the block design and the tensor cores' epi=smem "
                       "compute",
                       fn, cfg->desc);
    if (v == CUMLP_BLOCK) {
        smem = smem_bytes(&m, q.bm, q.stage != 0);
    } else if (v == CUMLP_WARP) {
        WarpLayout L;
        if (!warp_layout(&m, &L))
            return err_set(e, ST_UNSUPPORTED,
                           "CUDA mlp kernel %s: config '%s' needs layers of "
                           "at most 64 columns",
                           fn, cfg->desc);
        smem = warp_smem(&L, q.w);
    } else if (tc_var(v)) {
        if (hw && hw->cc_major > 0 && hw->cc_major < 8)
            return err_set(e, ST_UNSUPPORTED,
                           "CUDA mlp kernel %s: config '%s' needs tensor "
                           "cores of sm_80 or later (%s is %s)",
                           fn, cfg->desc, hw->name, hw->arch);
        TcLayout L;
        tc_layout(&m, (int)v, q.epi == CUMLP_EPI_ILVX, &L);
        smem = tc_smem(&L, q.w, q.mt, q.epi != CUMLP_EPI_REG);
    } else {
        return err_set(e, ST_USAGE, "CUDA mlp kernel %s: bad config '%s'", fn, cfg->desc);
    }
    if (hw && hw->smem_per_block_optin > 0 && smem > hw->smem_per_block_optin)
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: config '%s' needs more shared "
                       "memory than %s has",
                       fn, cfg->desc, hw->name);
    if (v == CUMLP_BLOCK)
        return emit_block(&m, cfg, opt, fn, src, launch, e);
    return v == CUMLP_WARP ? emit_warp(&m, cfg, opt, fn, src, launch, e)
                           : emit_tc(&m, cfg, opt, fn, src, launch, e);
}
