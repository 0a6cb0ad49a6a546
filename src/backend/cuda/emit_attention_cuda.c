// The CUDA target's fused attention kernels (cugen_attn.h), flash-style: SIMT float32
// and tensor cores. The SIMT kernel:
// Block b owns batch index b / QT (over the lead dims of O) and the query tile (b % QT) * BQ ..
// + BQ - 1. Its T threads form BQ / TM row groups of CG threads; thread (rg, c) owns the query
// rows rg + i * RG (i < TM, RG = BQ / TM), the key columns c + j * CG of a tile (j < TN) and the
// value column quads c + u * CG (u < U). Strided rows and columns keep the float4 shared-memory
// reads of a warp on distinct banks.
//   once:        Q tile -> Qs [BQ][Dp] (zeros past M and past D)
//   per key tile: Kt tile -> Ks [BK][Dp] (keys as rows), V tile -> Vs [BK][DVp] (zeros past N)
//                S = Q·K^T: TM x TN register tile, exact float32 fmaf over D
//                the pre-softmax chain per score (cexpr on a->sp, the reader returning the
//                score; mask loads through cexpr), keys past N -> -inf
//                online softmax: the row max across the row group's lanes (xor shuffles),
//                rescale by exp(m_old - m_new), P -> Ps [BQ][BKp], per-thread partial row sums
//                O += P·V: TM x 4U register tile from Ps and Vs (float4 reads)
//   end:         row sums across the row group, O / l stored (float4 where Dv % 4 == 0;
//                consecutive lanes store consecutive quads of a row).
// Staging. Where Q, Kt or V is a kernel input, or a transpose/reshape of one, read at an affine
// offset (the head-split projections, plain [.., S, D] inputs, a materialised K^T), its tiles
// are copied by cp.async (no registers, zero-filled past M, N, D and Dv; 16 bytes a thread where
// the tile's rows are aligned unit-stride runs, else 4) into a double buffer: the copies of key
// tile t + 1 run under the products of tile t (sm_80 and newer; configs with cp=1). Elsewhere
// the values are read through cexpr (CUDA dialect), which composes the candidate's LAYOUT index
// maps into the loads. Either way consecutive threads walk the axis along which the load is
// unit-stride (8 x 4 element groups when that is the tile's row axis, so the shared-memory
// stores stay conflict-free as well).
// Row strides of the shared arrays are 4 (mod 8) floats: 16-byte aligned rows, adjacent rows
// on different banks.
// Fully masked rows come out as the primitive interpreter computes them: a WHERE to -FLT_MAX
// over a whole row gives the mean of V (exp(0) everywhere), as softmax over equal scores does.
// Tensor cores (configs with MMA > 0; FlashAttention-2's structure). Each warp owns 16 query
// rows of the block's BQ; Q, K and V tiles are staged in float32 exactly as above (row strides
// 8 (mod 16) floats for Qs and Ks, 4 (mod 8) for Vs: the fragment loads below are then
// conflict-free) and rounded to the mma type where the fragments are built:
//   once (QREG=1):  the warp's Q rows -> A fragments in registers (else re-read per key tile)
//   per key tile:   S = Q·K^T: mma.sync into float32 accumulators, B fragments from Ks rows
//                   the pre-softmax chain per accumulator element (row g or g + 8, key 2t or
//                   2t + 1 of each n8 tile: the C fragment), the SIMT kernel's reader and loads
//                   online softmax per row: max and sum over the 4 lanes of a quad (shuffles)
//                   P: the accumulators rounded in registers into the A fragments of O += P·V
//                   (m16n8k16: C fragments of n tiles 2q and 2q + 1 are the A fragment of k
//                   step q; m16n8k8: k permuted so that fragment column t holds key 2t and
//                   t + 4 key 2t + 1; V's B fragments are read in the same key order)
//   end:            row sums across the quad, O / l stored from the accumulators.
// The TF32 products of S use the same k permutation (d = 2t in column t, 2t + 1 in t + 4 of
// both Q and K), so both operands are read as float2 pairs.
// Causal tile skipping (both designs). Where the pre-softmax chain ends in a WHERE on a
// constant condition with a fill <= -FLT_MAX, or an ADD of a constant holding -inf, the
// constant is read at emit time: if every key past row i + off is masked in every row i >= r0,
// and each of those rows keeps at least one key, a block of query rows q0..q1 (q0 >= r0) stops
// at key q1 + off: the keys it skips would have added exp(fill - max) = 0 to every row. (The
// tensor-core kernel also skips, per warp, the tiles past its own 16 rows' bound.)
// Half storage (AttnSpec.dt float16 or bfloat16: Q, Kt, V, masks and O stored in half). The
// tensor-core kernel runs only the mma of the storage type (FP16 for float16, BF16 for bfloat16)
// and stages the tiles as they lie, 2-byte elements (cp.async 16 bytes = 8 halves where the rows
// allow, else plain element copies, else cexpr), so its fragments are 32-bit shared-memory reads
// with no rounding; row strides 8 (mod 16) halves keep them conflict-free. The SIMT kernel
// converts to float32 as it stages (cexpr). Scores, the pre-softmax chain (computed in float32:
// cexpr sees a view of the graph with the chain's half tensors and instructions retyped to
// float32, its half immediates rounded as the interpreter rounds them), the softmax state and
// the accumulators stay float32; O is rounded once to the output's half type, or, where the
// candidate ends with the CAST to float32, rounded to half and stored widened.
// Needs: cugen_prelude() in the translation unit. Guarantees: the candidate's output as
// prim_interp.c computes it, up to float32 reassociation (SIMT), or with Q, K, V and P rounded
// to TF32 / FP16 / BF16 and float32 accumulation (tensor cores); skipped tiles change nothing
// where the largest kept score of a row exceeds -FLT_MAX + 104 (exp of the difference is 0).
#include "affine_load.h"
#include "cost_models.h"
#include "cugen_attn.h"
#include "cugen_linear.h"
#include "device_model.h"

#include "../../candidates/attention.h"
#include "../../prim/index_map.h"
#include "../../codegen/cexpr.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- where O's rows go ----

// `orow`: the output row of query `row` in the block's batch index (lead coordinates a_l<d>): O
// itself, or its heads merged back by the candidate's output LAYOUT (AttnSpec.ostride).
static void emit_orow(StrBuf *s, const AttnSpec *a, bool half) {
    char off[512] = "0";
    for (int d = 0; d + 2 < a->rank; d++) {
        size_t used = strlen(off);
        if (a->ostride[d])
            snprintf(off + used, sizeof off - used, " + a_l%d * %lld", d, (long long)a->ostride[d]);
    }
    sb_line(s, 2, "%s *orow = o + %s + row * %lld;\n", half ? "uint16_t" : "float", off,
            (long long)a->ostride[a->rank - 2]);
}

// ---- how Q, Kt and V are read ----

// How Q, Kt and V are read: cu_affine_of (affine_load.h); copy: the bytes a cp.async moves
// when their tiles go that way (configs with cp=1): 16 where the tile's rows are 16-byte aligned
// runs, else 4; 0: not affine.
typedef CuAffine Load;

// A causal bound proven from a constant mask: for every query row i >= r0, every key j > i + off
// is masked (its score is <= -FLT_MAX), and row i keeps at least one key. on: the bound cuts
// some key tile for some query tile.
typedef struct Causal {
    bool on;
    int64_t off, r0;
} Causal;

typedef struct Ana {
    AttnSpec a;
    bool half;    // Q, Kt, V, ... O are float16 / bfloat16 (a.dt)
    int isz;      // bytes of their elements (4, 2)
    Load q, k, v; // Q, Kt, V
    Causal cz;
    // Kt is dim-major (a materialised K^T: unit stride along the keys) and its tiles can go by
    // 16-byte cp.async along the keys (aligned runs, N a multiple of 4 floats or 8 halves): the
    // tensor-core kernel stages them as they lie, [D][keys] (Geo.kT).
    bool kt16;
} Ana;

// The cp.async width for an affine load of a tile with columns along `col`, rows along `row`
// and `cols` columns of isz-byte elements: 16 bytes where the columns are unit-stride and every
// row start 16-byte aligned, else one element (4 bytes by cp.async; 2 bytes, half elements: a
// plain copy, cp.async having no 2-byte form).
static int copy_width(const Load *L, int rank, int row, int col, int64_t cols, int isz) {
    const int64_t v = 16 / isz; // elements in 16 bytes
    if (!L->affine)
        return 0;
    if (L->stride[col] != 1 || cols % v || L->base % v || L->stride[row] % v)
        return isz;
    for (int d = 0; d + 2 < rank; d++)
        if (L->stride[d] % v)
            return isz;
    return 16;
}

// ---- causal masks ----

// A constant read as a mask of the scores: its element at (row, key) is data[i * rs + j * cs]
// (stride 0 along a broadcast axis); bytes (bool, uint8: nonzero is true) or floats of dtype dt
// (float32 or half).
typedef struct MaskConst {
    const void *data;
    bool bytes;
    DType dt;
    int64_t rs, cs;
} MaskConst;

// A constant operand t of the chain's last primitive whose batch dims are all 1 (the same mask
// for every head), broadcast to the scores [M, N].
static bool mask_const(const AttnSpec *a, int t, MaskConst *mc) {
    const Tensor *T = a->pg->tensors[t];
    int r = T->rank;
    if (!pg_is_const(a->pg, t) || !T->data || r > a->rank ||
        (T->dtype != DT_BOOL && T->dtype != DT_UINT8 && T->dtype != DT_FLOAT &&
         T->dtype != DT_FLOAT16 && T->dtype != DT_BFLOAT16))
        return false;
    for (int d = 0; d + 2 < r; d++)
        if (T->dims[d] != 1)
            return false;
    int64_t rows = r >= 2 ? T->dims[r - 2] : 1, cols = r >= 1 ? T->dims[r - 1] : 1;
    if ((rows != 1 && rows != a->M) || (cols != 1 && cols != a->N))
        return false;
    mc->data = T->data;
    mc->bytes = T->dtype == DT_BOOL || T->dtype == DT_UINT8;
    mc->dt = T->dtype;
    mc->cs = cols == 1 ? 0 : 1;
    mc->rs = rows == 1 ? 0 : cols;
    return true;
}

// An operand that is a fill <= -FLT_MAX wherever it is read: an immediate, or a constant input
// of one element (float32, or half: -FLT_MAX stored in half is -inf).
static bool masking_fill(const AttnSpec *a, const Prim *p, const EwArg *arg) {
    if (arg->src == EWS_IMM)
        return (float)arg->imm <= -FLT_MAX;
    if (arg->src != EWS_INPUT)
        return false;
    int t = p->in[arg->index];
    const Tensor *T = a->pg->tensors[t];
    return pg_is_const(a->pg, t) && T->data &&
           (T->dtype == DT_FLOAT || T->dtype == DT_FLOAT16 || T->dtype == DT_BFLOAT16) &&
           tensor_numel(T) == 1 && elem_get_f64(T->dtype, T->data, 0) <= -FLT_MAX;
}

// The masking of the scores' last primitive, when its value is known <= -FLT_MAX at the
// positions a constant says: WHERE(cond, x, fill) / WHERE(cond, fill, x) with cond a constant
// (or NOT of one), or ADD(x, mask) with a float constant holding -inf (x finite). masked(i, j)
// is then `byte(i, j) != 0` == when_true (bytes), or `value(i, j) == -inf` (float).
typedef struct MaskRule {
    MaskConst mc;
    bool when_true;
} MaskRule;

static bool mask_rule(const AttnSpec *a, MaskRule *mr) {
    if (a->n_pre < 1)
        return false;
    const Prim *p = a->pg->prims[a->pre[a->n_pre - 1]];
    if (p->kind != PRIM_ELEMWISE || p->ew.n < 1)
        return false;
    const EwInstr *in = &p->ew.code[p->ew.n - 1];
    if (in->dtype != DT_FLOAT && in->dtype != a->dt)
        return false;
    if (in->op == EW_WHERE) {
        bool fill1 = masking_fill(a, p, &in->arg[1]), fill2 = masking_fill(a, p, &in->arg[2]);
        if (fill1 == fill2)
            return false;
        const EwArg *cond = &in->arg[0];
        bool invert = false;
        if (cond->src == EWS_INSTR) { // NOT of a constant
            const EwInstr *c = &p->ew.code[cond->index];
            if (c->op != EW_NOT || c->arg[0].src != EWS_INPUT)
                return false;
            cond = &c->arg[0];
            invert = true;
        }
        if (cond->src != EWS_INPUT || !mask_const(a, p->in[cond->index], &mr->mc) ||
            !mr->mc.bytes)
            return false;
        mr->when_true = fill1 != invert; // the fill is taken where cond (after NOT) is true
        return true;
    }
    if (in->op == EW_ADD) {
        for (int k = 0; k < 2; k++)
            if (in->arg[k].src == EWS_INPUT && mask_const(a, p->in[in->arg[k].index], &mr->mc) &&
                !mr->mc.bytes) {
                mr->when_true = true;
                return true;
            }
    }
    return false;
}

static bool masked_at(const MaskRule *mr, int64_t i, int64_t j) {
    int64_t off = i * mr->mc.rs + j * mr->mc.cs;
    if (mr->mc.bytes)
        return (((const uint8_t *)mr->mc.data)[off] != 0) == mr->when_true;
    if (mr->mc.dt == DT_FLOAT)
        return isinf(((const float *)mr->mc.data)[off]) && ((const float *)mr->mc.data)[off] < 0;
    double v = elem_get_f64(mr->mc.dt, mr->mc.data, off);
    return isinf(v) && v < 0;
}

// The causal bound of a's mask (cz->on false where there is none): per row i the last kept key
// hi_i - 1 (scanning masked keys back from the end: about half the mask for a causal one), off
// the largest hi_i - 1 - i, r0 past the last row with no key kept.
static void causal_of(const AttnSpec *a, Causal *cz) {
    memset(cz, 0, sizeof *cz);
    MaskRule mr;
    if (!mask_rule(a, &mr))
        return;
    int64_t off = -a->N - a->M, r0 = 0, hi_row0 = -1;
    for (int64_t i = 0; i < a->M; i++) {
        int64_t hi;
        if (mr.mc.rs == 0 && hi_row0 >= 0) {
            hi = hi_row0; // every row reads the same mask row
        } else {
            int64_t j = a->N - 1;
            while (j >= 0 && masked_at(&mr, i, j))
                j--;
            hi = hi_row0 = j + 1;
        }
        if (hi == 0)
            r0 = i + 1;
        else if (hi - 1 - i > off)
            off = hi - 1 - i;
    }
    cz->off = off;
    cz->r0 = r0;
    cz->on = r0 < a->M && r0 + off + 1 < a->N;
}

// The key end of the query rows q0 .. q0 + rows - 1 (clamped to M) under the causal bound.
static int64_t causal_end(const AttnSpec *a, const Causal *cz, int64_t q0, int64_t rows) {
    if (!cz->on || q0 < cz->r0)
        return a->N;
    int64_t q1 = ORCH_MIN(q0 + rows, a->M) - 1;
    return ORCH_MIN(a->N, q1 + cz->off + 1);
}

// The key tiles of BK a block of BQ queries processes, averaged over the query tiles.
static double kept_tiles(const Ana *x, int64_t BQ, int64_t BK) {
    const AttnSpec *a = &x->a;
    int64_t QT = (a->M + BQ - 1) / BQ, sum = 0;
    for (int64_t qt = 0; qt < QT; qt++)
        sum += (causal_end(a, &x->cz, qt * BQ, BQ) + BK - 1) / BK;
    return (double)sum / (double)QT;
}

static bool analyse(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, Ana *x) {
    memset(x, 0, sizeof *x);
    if (!attn_analyse(pg, c, &x->a))
        return false;
    const AttnSpec *a = &x->a;
    int r = a->rank;
    x->half = a->dt != DT_FLOAT;
    x->isz = x->half ? 2 : 4;
    const int isz = x->isz, vec = 16 / isz;
    cu_affine_of(pg, c, a->q, &x->q);
    cu_affine_of(pg, c, a->kt, &x->k);
    cu_affine_of(pg, c, a->v, &x->v);
    // Grouped-query attention: K and V read through repeat_kv's broadcast are affine in the
    // head divided by the group, so their tiles still go by cp.async from the K/V heads.
    if (a->kv_group > 1 && !x->k.affine)
        cu_affine_of_grouped(pg, c, a->kt, a->kv_axis, a->kv_group, &x->k);
    if (a->kv_group > 1 && !x->v.affine)
        cu_affine_of_grouped(pg, c, a->v, a->kv_axis, a->kv_group, &x->v);
    bool cp = !hw || hw->cc_major >= 8; // cp.async: sm_80 and newer
    x->q.copy = cp ? copy_width(&x->q, r, r - 2, r - 1, a->D, isz) : 0;
    x->k.copy = cp ? copy_width(&x->k, r, r - 1, r - 2, a->D, isz) : 0;
    x->v.copy = cp ? copy_width(&x->v, r, r - 2, r - 1, a->Dv, isz) : 0;
    x->kt16 = cp && x->k.affine && x->k.stride[r - 2] != 1 && a->N % vec == 0 &&
              copy_width(&x->k, r, r - 2, r - 1, vec, isz) == 16;
    causal_of(a, &x->cz);
    return true;
}

// ---- geometry ----

// The largest split workspace, in floats (16 MiB).
#define ATTN_SPLIT_MAX_WS (4.0 * 1024 * 1024)

// Both designs' geometry; the tensor-core kernel (mma > 0) leaves TM, TN, CG, RG, U, BKp and
// off_p at 0 and reads its own fields below them.
typedef struct Geo {
    int64_t BQ, BK, TM, TN; // the config
    int64_t CG, RG, T;      // threads per row group, row groups, threads
    int64_t U;              // value column quads per thread
    int64_t D4, DVq;        // the staged columns of Q and K rows (D rounded up to 4, or to the
                            // mma's k step), of V rows (U * CG * 4, or Dv rounded up to 8)
    int64_t Dp, DVp, BKp;   // row strides (elements) of Qs/Ks, Vs, Ps
    int64_t QT;             // query tiles
    int64_t S, TPS;         // key splits; key tiles per split
    int64_t off_k, off_v, off_p, elems; // offsets of Ks, Vs, Ps in the shared array; its size
    int64_t esz;            // bytes of a staged element: 4 (float32), 2 (half tensor-core tiles)
    int64_t regs;           // registers per thread, estimated
    bool qa, ka, va, any;   // Q, Kt, V tiles by cp.async (config cp=1 where affine); any
    DType hconv;            // (SIMT, half tensors: their dtype; else 0) those tiles go by
                            // converting element loads
    // Tensor cores: CUA_MMA_*, warps, k step of an mma (8 or 16), k steps over D, n8 tiles of a
    // key tile and of Dv, Q fragments held in registers.
    int64_t mma, W, kstep, KS, NT, NV;
    bool qreg;
    // Tensor cores, key warps: KW warps share each 16 query rows, warp kh taking keys
    // [kh * BK / KW, (kh + 1) * BK / KW) of every key tile (NTW n8 tiles, KQW k steps of P·V)
    // with a running max, sum and O of its own, merged through shared memory at the end.
    int64_t KW, NTW, KQW;
    // Tensor cores, Kt dim-major (Ana.kt16, with cp=1): Ks holds each key tile as it lies in
    // memory, [D4][BKT] (d rows, keys along them; BKT = BK + 4 floats or BK + 8 halves: the
    // fragment reads of rows 2t, 2t + 1 and keys g of a warp fall on 32 distinct banks), copied
    // 16 bytes along the keys.
    bool kT;
    int64_t BKT;
} Geo;

// A row stride of at least n floats, a multiple of 4 (float4 rows) and 4 (mod 8): the 16-byte
// slots of 8 consecutive rows fall in 8 different bank groups.
static int64_t row_stride(int64_t n) {
    int64_t r = (n + 3) / 4 * 4;
    return r % 8 == 0 ? r + 4 : r;
}

static bool pow2(int64_t x) {
    return x > 0 && (x & (x - 1)) == 0;
}

// Fills g from the config; false when the config is malformed for this attention. Tiles that
// go by cp.async have two buffers.
static bool geometry(const Ana *x, const CuAttnConfig *p, Geo *g) {
    const AttnSpec *a = &x->a;
    memset(g, 0, sizeof *g);
    g->BQ = p->bq;
    g->BK = p->bk;
    g->TM = p->tm;
    g->TN = p->tn;
    if (g->BQ < 1 || g->BK < 4 || g->BK % 4 || g->TM < 1 || g->TM > 16 || g->TN < 1 ||
        g->TN > 16 || g->BQ % g->TM || g->BK % g->TN)
        return false;
    g->CG = g->BK / g->TN;
    g->RG = g->BQ / g->TM;
    g->T = g->CG * g->RG;
    if (!pow2(g->CG) || g->CG < 2 || g->CG > 32 || g->T % 32 || g->T > 1024)
        return false;
    int64_t quads = (a->Dv + 3) / 4;
    g->U = (quads + g->CG - 1) / g->CG;
    if (g->U > 16)
        return false;
    g->D4 = (a->D + 3) / 4 * 4;
    g->DVq = g->U * g->CG * 4;
    g->Dp = row_stride(g->D4);
    g->DVp = row_stride(g->DVq);
    g->BKp = row_stride(g->BK);
    g->QT = (a->M + g->BQ - 1) / g->BQ;
    int64_t tiles = (a->N + g->BK - 1) / g->BK;
    g->S = p->split > 1 ? p->split : 1;
    g->TPS = (tiles + g->S - 1) / g->S;
    // Every split non-empty; the workspace (O, max and sum per split and row) bounded.
    if (g->S > 1 && ((g->S - 1) * g->TPS >= tiles ||
                     (double)g->S * (double)a->B * (double)a->M * (double)(a->Dv + 2) >
                         ATTN_SPLIT_MAX_WS))
        return false;
    bool cp = p->cp != 0;
    // Half tiles are converted to float32 as they are staged: affine ones by element loads
    // (configs with cp=1; hconv), the others through cexpr.
    g->hconv = x->half ? a->dt : DT_UNDEFINED;
    g->qa = cp && x->q.copy > 0;
    g->ka = cp && x->k.copy > 0;
    g->va = cp && x->v.copy > 0;
    g->any = g->qa || g->ka || g->va;
    if (cp && !g->any)
        return false; // the same kernel as cp=0
    g->esz = 4;
    g->off_k = g->BQ * g->Dp;
    g->off_v = g->off_k + (g->ka ? 2 : 1) * g->BK * g->Dp;
    g->off_p = g->off_v + (g->va ? 2 : 1) * g->BK * g->DVp;
    g->elems = g->off_p + g->BQ * g->BKp;
    // Scores, accumulators, the float4 operands of both products, running max and sum, and
    // about 40 for addresses, indices and the softmax's temporaries.
    g->regs = g->TM * g->TN + 4 * g->TM * g->U + 4 * g->TM + 4 * g->TN + 4 * g->U + 2 * g->TM + 40;
    return (double)a->B * (double)g->QT * (double)g->S < 2147483647.0;
}

// A row stride of at least n floats that is 8 (mod 16): the float2 fragment reads of a
// half-warp (rows g = 0..3, columns 2t) fall on 16 distinct bank pairs.
static int64_t frag_stride(int64_t n) {
    int64_t r = (n + 7) / 8 * 8;
    return r % 16 == 0 ? r + 8 : r;
}

// Fills g for a tensor-core config; false when it is malformed for this attention. Tiles that go
// by cp.async have two buffers, as in the SIMT kernel.
static bool geometry_tc(const Ana *x, const CuAttnConfig *p, Geo *g) {
    const AttnSpec *a = &x->a;
    memset(g, 0, sizeof *g);
    g->mma = p->mma;
    g->BQ = p->bq;
    g->BK = p->bk;
    if (g->mma < CUA_MMA_TF32 || g->mma > CUA_MMA_BF16 || g->BQ < 16 || g->BQ % 16 || g->BQ > 128 ||
        g->BK < 16 || g->BK % 16 || g->BK > 128 || p->tm || p->tn)
        return false;
    // Half tiles feed only the mma of their own type.
    if (x->half && g->mma != (a->dt == DT_FLOAT16 ? CUA_MMA_F16 : CUA_MMA_BF16))
        return false;
    g->W = g->BQ / 16;
    g->KW = p->kw > 1 ? p->kw : 1;
    if ((g->KW != 1 && g->KW != 2 && g->KW != 4) || (g->BK / g->KW) % 16)
        return false;
    g->T = 32 * g->W * g->KW;
    g->qreg = p->qreg != 0;
    g->kstep = g->mma == CUA_MMA_TF32 ? 8 : 16;
    g->D4 = (a->D + g->kstep - 1) / g->kstep * g->kstep;
    g->DVq = (a->Dv + 7) / 8 * 8;
    g->KS = g->D4 / g->kstep;
    g->NT = g->BK / 8;
    g->NTW = g->NT / g->KW;
    g->KQW = g->BK / g->KW / g->kstep;
    g->NV = g->DVq / 8;
    g->Dp = frag_stride(g->D4);
    // Half V rows: 8 (mod 16) halves, so the 16-bit reads of rows 2t, 2t + 1 are conflict-free.
    g->DVp = x->half ? frag_stride(g->DVq) : row_stride(g->DVq);
    g->QT = (a->M + g->BQ - 1) / g->BQ;
    int64_t tiles = (a->N + g->BK - 1) / g->BK;
    g->S = p->split > 1 ? p->split : 1;
    g->TPS = (tiles + g->S - 1) / g->S;
    // Key splits as in the SIMT kernel: every split non-empty, the workspace bounded.
    if (g->S > 1 &&
        ((g->S - 1) * g->TPS >= tiles ||
         (double)g->S * (double)a->B * (double)a->M * (double)(a->Dv + 2) > ATTN_SPLIT_MAX_WS))
        return false;
    bool cp = p->cp != 0;
    g->qa = cp && x->q.copy > 0;
    g->ka = cp && x->k.copy > 0;
    g->va = cp && x->v.copy > 0;
    g->any = g->qa || g->ka || g->va;
    if (cp && !g->any)
        return false;
    g->kT = g->ka && x->kt16;
    g->BKT = g->kT ? g->BK + (x->half ? 8 : 4) : 0;
    g->esz = x->isz;
    g->off_k = g->BQ * g->Dp;
    g->off_v = g->off_k + (g->kT ? 2 * g->D4 * g->BKT : (g->ka ? 2 : 1) * g->BK * g->Dp);
    g->elems = g->off_v + (g->va ? 2 : 1) * g->BK * g->DVp;
    // The key warps' merge reuses the array: O rows (DVq floats and 8 of padding) and (max,
    // sum) pairs of the warps kh > 0.
    int64_t merge_bytes = (g->KW - 1) * g->BQ * (g->DVq + 8 + 2) * 4;
    if (g->elems * g->esz < merge_bytes)
        g->elems = (merge_bytes + g->esz - 1) / g->esz;
    // Q fragments (4 registers a k step) when held, the score and O accumulators, one k step's
    // fragments, running max and sum, and about 40 for addresses, indices and the softmax.
    g->regs = (g->qreg ? 4 * g->KS : 0) + 4 * g->NTW + 4 * g->NV + 8 + 4 + 40;
    return (double)a->B * (double)g->QT * (double)g->S < 2147483647.0;
}

static int64_t smem_bytes(const Geo *g) {
    return g->elems * g->esz;
}

// ---- emission ----

typedef struct AEm {
    const AttnSpec *a;
    const char *fn;
    Cexpr *x;
    bool in_score; // the reader may hand out the current score
} AEm;

static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    (void)code;
    (void)indent;
    const AEm *E = ctx;
    const AttnSpec *a = E->a;
    bool root = rq->affine && rq->tensor == a->s && E->in_score;
    const Tensor *S = a->pg->tensors[a->s];
    for (int d = 0; root && d < rq->rank; d++) {
        if (S->dims[d] == 1)
            continue;
        root = rq->cst[d] == 0;
        for (int r = 0; root && r < rq->rank; r++)
            root = rq->coef[d][r] == (r == d ? 1 : 0) || S->dims[r] == 1;
    }
    if (!root)
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA attention kernel %s: the pre-softmax chain reads tensor %d other "
                       "than the score at its own index",
                       E->fn, rq->tensor);
    snprintf(out, cap, "a_sc");
    return ST_OK;
}

// The index of tensor t (rank a->rank) for cexpr: the block's lead coordinates (0 where t
// broadcasts), then the two given matrix coordinates.
static void tensor_index(const AttnSpec *a, int t, const char *row, const char *col,
                         const char **ix) {
    static const char *lead[] = {"a_l0", "a_l1", "a_l2", "a_l3", "a_l4", "a_l5", "a_l6", "a_l7"};
    const Tensor *T = a->pg->tensors[t];
    for (int d = 0; d + 2 < a->rank; d++)
        ix[d] = T->dims[d] == 1 ? "0" : lead[d];
    ix[a->rank - 2] = row;
    ix[a->rank - 1] = col;
}

// A staging loop: tile element (r, cc), r < R rows from global row `base` + r (valid below
// rlim), cc < C columns (valid below clim), into dst[r * P + cc], zero where invalid. The value
// is tensor t at matrix coordinates (row, col) = (g_r, g_c), or (g_c, g_r) when `swap`. With
// `rows_fast` consecutive threads take consecutive rows, in 8 x 4 groups. Half tiles (g->esz 2)
// store the value's half bits (exact: the value is a half's).
static int emit_stage(AEm *E, StrBuf *s, const Geo *g, int t, bool swap, const char *dst,
                      int64_t P, int64_t R, int64_t C, const char *base, int64_t rlim,
                      int64_t clim, bool rows_fast, Err *e) {
    const AttnSpec *a = E->a;
    if (rows_fast) {
        int64_t R8 = (R + 7) / 8, C4 = (C + 3) / 4;
        sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n",
                (long long)(R8 * C4 * 32), (long long)g->T);
        sb_line(s, 2, "const int rest = q >> 5;\n");
        sb_line(s, 2, "const int r = (rest %% %lld) * 8 + (q & 7);\n", (long long)R8);
        sb_line(s, 2, "const int cc = (rest / %lld) * 4 + ((q >> 3) & 3);\n", (long long)R8);
        sb_line(s, 2, "if (r >= %lld || cc >= %lld) continue;\n", (long long)R, (long long)C);
    } else {
        sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(R * C),
                (long long)g->T);
        sb_line(s, 2, "const int r = q / %lld, cc = q - r * %lld;\n", (long long)C,
                (long long)C);
    }
    sb_line(s, 2, "const int64_t g_r = %s + r, g_c = cc;\n", base);
    sb_line(s, 2, "float val = 0.0f;\n");
    sb_line(s, 2, "if (g_r < %lld && g_c < %lld) {\n", (long long)rlim, (long long)clim);
    const char *ix[ORCH_MAX_RANK];
    tensor_index(a, t, swap ? "g_c" : "g_r", swap ? "g_r" : "g_c", ix);
    char v[64];
    int rc = cexpr_value(E->x, t, ix, s, 3, v, sizeof v, e);
    cexpr_forget(E->x);
    if (rc)
        return rc;
    sb_line(s, 3, "val = %s;\n", v);
    sb_line(s, 2, "}\n");
    if (g->esz == 2)
        sb_line(s, 2, "%s[r * %lld + cc] = %s(val);\n", dst, (long long)P,
                E->a->dt == DT_FLOAT16 ? "orch_f32_to_f16" : "orch_f32_to_bf16");
    else
        sb_line(s, 2, "%s[r * %lld + cc] = val;\n", dst, (long long)P);
    sb_line(s, 1, "}\n");
    return ST_OK;
}

// The block's start in an affine load's input: `const T *NAME = in<pos> + offset of the
// block's lead coordinates` (T: float, or uint16_t for half).
static void emit_load_base(StrBuf *s, const AttnSpec *a, const Load *L, const char *name) {
    sb_line(s, 1, "const %s *%s = in%d + %lld", cgen_ctype(a->dt), name, L->pos,
            (long long)L->base);
    for (int d = 0; d + 2 < a->rank; d++)
        if (L->stride[d] && d == L->gaxis)
            sb_printf(s, " + a_l%d / %lld * %lld", d, (long long)L->group, (long long)L->stride[d]);
        else if (L->stride[d])
            sb_printf(s, " + a_l%d * %lld", d, (long long)L->stride[d]);
    sb_puts(s, ";\n");
}

// cp.async copies of a tile of the affine load L: rows r < R (global row `base` + r along axis
// `row`, valid below rlim), columns cc < C (axis `col`, valid below clim) from src (the block's
// start in the input) into dst[r * P + cc]; invalid elements are zero-filled. 16-byte copies
// take a column quad (float) or octet (half) a thread; element ones walk the unit-stride axis
// with consecutive threads (in 8 x 4 groups when that is the row axis, so the shared-memory
// stores stay conflict-free): 4-byte cp.async, or plain loads and stores of half elements.
static void emit_copy(StrBuf *s, int ind, const Geo *g, const Load *L, int row, int col,
                      const char *dst, int64_t P, const char *src, int64_t R, int64_t C,
                      const char *base, int64_t rlim, int64_t clim) {
    long long rs = L->stride[row], cs = L->stride[col];
    const int vec = (int)(16 / g->esz);
    if (L->copy == 16 && !g->hconv) {
        int64_t C4 = C / vec;
        sb_line(s, ind, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n",
                (long long)(R * C4), (long long)g->T);
        sb_line(s, ind + 1, "const int r = q / %lld, c4 = q - r * %lld;\n", (long long)C4,
                (long long)C4);
        sb_line(s, ind + 1, "const int64_t g_r = %s + r;\n", base);
        if (clim < C)
            sb_line(s, ind + 1, "const bool ok = g_r < %lld && c4 * %d < %lld;\n", (long long)rlim,
                    vec, (long long)clim);
        else
            sb_line(s, ind + 1, "const bool ok = g_r < %lld;\n", (long long)rlim);
        sb_line(s, ind + 1,
                "orch_attn_cp%s(%s + r * %lld + c4 * %d, %s + (ok ? g_r * %lld + c4 * "
                "%d : 0), ok);\n",
                g->esz == 2 ? "h16" : "16", dst, (long long)P, vec, src, rs, vec);
        sb_line(s, ind, "}\n");
        return;
    }
    if (cs != 1 && rs == 1) {
        int64_t R8 = (R + 7) / 8, C4 = (C + 3) / 4;
        sb_line(s, ind, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n",
                (long long)(R8 * C4 * 32), (long long)g->T);
        sb_line(s, ind + 1, "const int rest = q >> 5;\n");
        sb_line(s, ind + 1, "const int r = (rest %% %lld) * 8 + (q & 7);\n", (long long)R8);
        sb_line(s, ind + 1, "const int cc = (rest / %lld) * 4 + ((q >> 3) & 3);\n",
                (long long)R8);
        sb_line(s, ind + 1, "if (r >= %lld || cc >= %lld) continue;\n", (long long)R,
                (long long)C);
    } else {
        sb_line(s, ind, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(R * C),
                (long long)g->T);
        sb_line(s, ind + 1, "const int r = q / %lld, cc = q - r * %lld;\n", (long long)C,
                (long long)C);
    }
    sb_line(s, ind + 1, "const int64_t g_r = %s + r;\n", base);
    sb_line(s, ind + 1, "const bool ok = g_r < %lld && cc < %lld;\n", (long long)rlim,
            (long long)clim);
    if (g->hconv)
        sb_line(s, ind + 1,
                "%s[r * %lld + cc] = ok ? orch_attn_h2f_%s(%s[g_r * %lld + (int64_t)cc * %lld]) "
                ": 0.0f;\n",
                dst, (long long)P, g->hconv == DT_FLOAT16 ? "f16" : "bf16", src, rs, cs);
    else if (L->copy == 2)
        sb_line(s, ind + 1,
                "%s[r * %lld + cc] = ok ? %s[g_r * %lld + (int64_t)cc * %lld] : "
                "(uint16_t)0;\n",
                dst, (long long)P, src, rs, cs);
    else
        sb_line(s, ind + 1,
                "orch_attn_cp4(%s + r * %lld + cc, %s + (ok ? g_r * %lld + "
                "(int64_t)cc * %lld : 0), ok);\n",
                dst, (long long)P, src, rs, cs);
    sb_line(s, ind, "}\n");
}

// File-scope helpers, once per translation unit.
static const char CP_HELPERS[] =
    "#ifndef ORCH_ATTN_CP_ASYNC\n"
    "#define ORCH_ATTN_CP_ASYNC\n"
    "// 16 or 4 bytes global -> shared, no registers (sm_80+); zeros where !ok (nothing read).\n"
    "static __device__ __forceinline__ void orch_attn_cp16(float *dst, const float *src, "
    "bool ok) {\n"
    "    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"(d), "
    "\"l\"(src), \"r\"(ok ? 16 : 0));\n"
    "}\n"
    "static __device__ __forceinline__ void orch_attn_cp4(float *dst, const float *src, "
    "bool ok) {\n"
    "    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);\n"
    "    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" :: \"r\"(d), "
    "\"l\"(src), \"r\"(ok ? 4 : 0));\n"
    "}\n"
    "static __device__ __forceinline__ void orch_attn_cp_commit(void) {\n"
    "    asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "}\n"
    "static __device__ __forceinline__ void orch_attn_cp_wait(void) {\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::: \"memory\");\n"
    "}\n"
    "#endif\n";

// A half's float32 value (SIMT kernels staging half tiles): cvt for float16, a shift for
// bfloat16.
static const char H2F_F16[] = "#ifndef ORCH_ATTN_H2F_F16\n"
                              "#define ORCH_ATTN_H2F_F16\n"
                              "ORCH_DEV float orch_attn_h2f_f16(uint16_t h) {\n"
                              "    float r;\n"
                              "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(h));\n"
                              "    return r;\n"
                              "}\n"
                              "#endif\n";
static const char H2F_BF16[] = "#ifndef ORCH_ATTN_H2F_BF16\n"
                               "#define ORCH_ATTN_H2F_BF16\n"
                               "ORCH_DEV float orch_attn_h2f_bf16(uint16_t h) {\n"
                               "    return __uint_as_float((uint32_t)h << 16);\n"
                               "}\n"
                               "#endif\n";

// The 16-byte copy of 8 halves (tensor-core kernels over half tiles).
static const char CP_HALF_HELPERS[] =
    "#ifndef ORCH_ATTN_CP_ASYNC_H16\n"
    "#define ORCH_ATTN_CP_ASYNC_H16\n"
    "static __device__ __forceinline__ void orch_attn_cph16(uint16_t *dst, const uint16_t *src, "
    "bool ok) {\n"
    "    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"(d), "
    "\"l\"(src), \"r\"(ok ? 16 : 0));\n"
    "}\n"
    "#endif\n";

static const char XYZW[] = "xyzw";

// cp.async copies of the async tiles of Kt and V for the key tile from global key `n0` into
// buffer `buf` (C expressions).
static void emit_issue(StrBuf *s, int ind, const Ana *x, const Geo *g, const char *n0,
                       const char *buf) {
    const AttnSpec *a = &x->a;
    int r = a->rank;
    char dst[96];
    if (g->kT) {
        // [D4][BKT]: row d, key quad (float) or octet (half) c4 of the tile; one is all valid or
        // all past N (N a multiple of it), rows past D zero-filled.
        const int vec = (int)(16 / g->esz);
        const long long C4 = g->BK / vec, ds = x->k.stride[r - 2];
        sb_line(s, ind, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n",
                (long long)(g->D4 * C4), (long long)g->T);
        sb_line(s, ind + 1, "const int r = q / %lld, c4 = q - r * %lld;\n", C4, C4);
        sb_line(s, ind + 1, "const int64_t key = (%s) + c4 * %d;\n", n0, vec);
        sb_line(s, ind + 1, "const bool ok = r < %lld && key < %lld;\n", (long long)a->D,
                (long long)a->N);
        sb_line(s, ind + 1,
                "orch_attn_cp%s(Ks + (%s) * %lld + r * %lld + c4 * %d, g_k + (ok ? "
                "(int64_t)r * %lld + key : 0), ok);\n",
                g->esz == 2 ? "h16" : "16", buf, (long long)(g->D4 * g->BKT), (long long)g->BKT,
                vec, ds);
        sb_line(s, ind, "}\n");
    } else if (g->ka) {
        snprintf(dst, sizeof dst, "(Ks + (%s) * %lld)", buf, (long long)(g->BK * g->Dp));
        emit_copy(s, ind, g, &x->k, r - 1, r - 2, dst, g->Dp, "g_k", g->BK, g->D4, n0, a->N,
                  a->D);
    }
    if (g->va) {
        snprintf(dst, sizeof dst, "(Vs + (%s) * %lld)", buf, (long long)(g->BK * g->DVp));
        emit_copy(s, ind, g, &x->v, r - 2, r - 1, dst, g->DVp, "g_v", g->BK, g->DVq, n0, a->N,
                  a->Dv);
    }
}

// Key splits (S > 1): every block publishes its rows' running max, row sum and unnormalised
// O (relative to that max; 0 when the max is -inf) to the workspace; the last block of the query
// tile to arrive merges the S partials in split order: M = max_s m_s, weights exp(m_s - M) (0
// for a split whose scores were all -inf), l = sum_s w_s l_s, O = sum_s w_s O_s, and leaves
// them in m_, l_ and acc for the store. The others return.
static void emit_merge(StrBuf *s, StrBuf *decls, const Ana *x, const Geo *g, const char *fn) {
    const AttnSpec *a = &x->a;
    const long long S = g->S, B = a->B, M = a->M, Dv = a->Dv, TM = g->TM, U = g->U, CG = g->CG,
                    RG = g->RG;
    // The partials and the per-tile arrival counters (zero at module load; the last block of a
    // tile resets its counter, so every launch finds them zero).
    sb_line(decls, 0, "__device__ float %s_wo[%lld];\n", fn, S * B * M * Dv);
    sb_line(decls, 0, "__device__ float2 %s_wml[%lld];\n", fn, S * B * M);
    sb_line(decls, 0, "__device__ unsigned int %s_cnt[%lld];\n", fn, B * (long long)g->QT);
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 3, "const int64_t row = q0 + rg + i * %lld;\n", RG);
    sb_line(s, 3, "if (row >= %lld) continue;\n", M);
    sb_line(s, 3, "const int64_t wr = ((int64_t)ks * %lld + bidx) * %lld + row;\n", B, M);
    sb_line(s, 3, "if (c == 0) {\n");
    sb_line(s, 4, "float2 ml;\n");
    sb_line(s, 4, "ml.x = m_[i];\n");
    sb_line(s, 4, "ml.y = l_[i];\n");
    sb_line(s, 4, "__stcg(%s_wml + wr, ml);\n", fn);
    sb_line(s, 3, "}\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int u = 0; u < %lld; u++) {\n", U);
    sb_line(s, 4, "const int col = (c + u * %lld) * 4;\n", CG);
    for (int w = 0; w < 4; w++)
        sb_line(s, 4, "if (col + %d < %lld) __stcg(%s_wo + wr * %lld + col + %d, acc[i][u].%c);\n",
                w, Dv, fn, Dv, w, XYZW[w]);
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    // (The flag goes through __syncthreads_or, not static shared memory: dynamic shared memory
    // of exactly 48 KiB plus any static bytes would fail to launch without the opt-in.)
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "int last_ = 0;\n");
    sb_line(s, 2, "if (tid == 0) last_ = atomicAdd(&%s_cnt[tile_], 1u) == %lldu;\n", fn, S - 1);
    sb_line(s, 2, "if (!__syncthreads_or(last_)) return;\n");
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "if (tid == 0) %s_cnt[tile_] = 0u;\n", fn);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 3, "const int64_t row = q0 + rg + i * %lld;\n", RG);
    sb_line(s, 3, "if (row >= %lld) continue;\n", M);
    sb_line(s, 3, "float mx = -ORCH_INF;\n");
    sb_line(s, 3, "for (int q = 0; q < %lld; q++) mx = fmaxf(mx, __ldcg(%s_wml + ((int64_t)q * "
            "%lld + bidx) * %lld + row).x);\n", S, fn, B, M);
    sb_line(s, 3, "const float mb = mx == -ORCH_INF ? 0.0f : mx;\n");
    sb_line(s, 3, "l_[i] = 0.0f;\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int u = 0; u < %lld; u++) acc[i][u].x = acc[i][u].y = acc[i][u].z = "
            "acc[i][u].w = 0.0f;\n", U);
    sb_line(s, 3, "for (int q = 0; q < %lld; q++) {\n", S);
    sb_line(s, 4, "const int64_t wr = ((int64_t)q * %lld + bidx) * %lld + row;\n", B, M);
    sb_line(s, 4, "const float2 ml = __ldcg(%s_wml + wr);\n", fn);
    sb_line(s, 4, "const float w_ = ml.x == -ORCH_INF ? 0.0f : expf(ml.x - mb);\n");
    sb_line(s, 4, "l_[i] = fmaf(ml.y, w_, l_[i]);\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int u = 0; u < %lld; u++) {\n", U);
    sb_line(s, 5, "const int col = (c + u * %lld) * 4;\n", CG);
    for (int w = 0; w < 4; w++)
        sb_line(s, 5, "if (col + %d < %lld) acc[i][u].%c = fmaf(__ldcg(%s_wo + wr * %lld + col + "
                "%d), w_, acc[i][u].%c);\n", w, Dv, XYZW[w], fn, Dv, w, XYZW[w]);
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
}

// The tensor-core kernel's key splits: emit_merge's protocol on its fragment layout (lane (gq, tq)
// of a warp holds rows gq and gq + 8 at columns nv * 8 + 2 tq, + 1; the quad's lanes agree on a
// row's max and sum, so its first lane publishes them).
static void emit_merge_tc(StrBuf *s, StrBuf *decls, const Ana *x, const Geo *g, const char *fn) {
    const AttnSpec *a = &x->a;
    const long long S = g->S, B = a->B, M = a->M, Dv = a->Dv, NV = g->NV;
    sb_line(decls, 0, "__device__ float %s_wo[%lld];\n", fn, S * B * M * Dv);
    sb_line(decls, 0, "__device__ float2 %s_wml[%lld];\n", fn, S * B * M);
    sb_line(decls, 0, "__device__ unsigned int %s_cnt[%lld];\n", fn, B * (long long)g->QT);
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 3, "const int64_t row = q0 + wrow + gq + 8 * h;\n");
    sb_line(s, 3, "if (row >= %lld || kh) continue;\n", M);
    sb_line(s, 3, "const int64_t wr = ((int64_t)ks * %lld + bidx) * %lld + row;\n", B, M);
    sb_line(s, 3, "if (tq == 0) __stcg(%s_wml + wr, make_float2(m_[h], l_[h]));\n", fn);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
    sb_line(s, 4, "const int col = nv * 8 + 2 * tq;\n");
    sb_line(s, 4, "if (col < %lld) __stcg(%s_wo + wr * %lld + col, o_[nv][2 * h]);\n", Dv, fn, Dv);
    sb_line(s, 4, "if (col + 1 < %lld) __stcg(%s_wo + wr * %lld + col + 1, o_[nv][2 * h + 1]);\n",
            Dv, fn, Dv);
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    // (The flag goes through __syncthreads_or, not static shared memory: dynamic shared memory
    // of exactly 48 KiB plus any static bytes would fail to launch without the opt-in.)
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "int last_ = 0;\n");
    sb_line(s, 2, "if (tid == 0) last_ = atomicAdd(&%s_cnt[tile_], 1u) == %lldu;\n", fn, S - 1);
    sb_line(s, 2, "if (!__syncthreads_or(last_)) return;\n");
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "if (tid == 0) %s_cnt[tile_] = 0u;\n", fn);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 3, "const int64_t row = q0 + wrow + gq + 8 * h;\n");
    sb_line(s, 3, "if (row >= %lld || kh) continue;\n", M);
    sb_line(s, 3, "float mx = -ORCH_INF;\n");
    sb_line(s, 3,
            "for (int q = 0; q < %lld; q++) mx = fmaxf(mx, __ldcg(%s_wml + ((int64_t)q * "
            "%lld + bidx) * %lld + row).x);\n",
            S, fn, B, M);
    sb_line(s, 3, "const float mb = mx == -ORCH_INF ? 0.0f : mx;\n");
    sb_line(s, 3, "l_[h] = 0.0f;\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int nv = 0; nv < %lld; nv++) o_[nv][2 * h] = o_[nv][2 * h + 1] = 0.0f;\n",
            NV);
    sb_line(s, 3, "for (int q = 0; q < %lld; q++) {\n", S);
    sb_line(s, 4, "const int64_t wr = ((int64_t)q * %lld + bidx) * %lld + row;\n", B, M);
    sb_line(s, 4, "const float2 ml = __ldcg(%s_wml + wr);\n", fn);
    sb_line(s, 4, "const float w_ = ml.x == -ORCH_INF ? 0.0f : expf(ml.x - mb);\n");
    sb_line(s, 4, "l_[h] = fmaf(ml.y, w_, l_[h]);\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
    sb_line(s, 5, "const int col = nv * 8 + 2 * tq;\n");
    sb_line(s, 5,
            "if (col < %lld) o_[nv][2 * h] = fmaf(__ldcg(%s_wo + wr * %lld + col), w_, "
            "o_[nv][2 * h]);\n",
            Dv, fn, Dv);
    sb_line(s, 5,
            "if (col + 1 < %lld) o_[nv][2 * h + 1] = fmaf(__ldcg(%s_wo + wr * %lld + col + "
            "1), w_, o_[nv][2 * h + 1]);\n",
            Dv, fn, Dv);
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
}

// The key warps' merge (KW > 1), once every warp has left the key loop: the warps kh > 0 leave
// their rows' max, sum and O in the (now free) shared array, and each warp kh = 0 folds those of
// its rows into its own (weights exp(m - M), 0 for a max of -inf) as emit_merge does.
static void emit_merge_kw(StrBuf *s, const Geo *g) {
    const long long KW = g->KW, BQ = g->BQ, NV = g->NV, SO = g->DVq + 8; // O row stride
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "float *mo_ = (float *)orch_attn_sm;\n");
    sb_line(s, 2, "float2 *mml_ = (float2 *)(mo_ + %lld);\n", (KW - 1) * BQ * SO);
    sb_line(s, 2, "if (kh > 0) {\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 4, "const int r = (kh - 1) * %lld + wrow + gq + 8 * h;\n", BQ);
    sb_line(s, 4, "if (tq == 0) mml_[r] = make_float2(m_[h], l_[h]);\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4,
            "for (int nv = 0; nv < %lld; nv++) *(float2 *)(mo_ + r * %lld + nv * 8 + 2 * tq) "
            "= make_float2(o_[nv][2 * h], o_[nv][2 * h + 1]);\n",
            NV, SO);
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "if (kh == 0) {\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 4, "float mx = m_[h];\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4,
            "for (int q = 1; q < %lld; q++) mx = fmaxf(mx, mml_[(q - 1) * %lld + wrow + gq + "
            "8 * h].x);\n",
            KW, BQ);
    sb_line(s, 4, "const float mb = mx == -ORCH_INF ? 0.0f : mx;\n");
    sb_line(s, 4, "const float w0 = m_[h] == -ORCH_INF ? 0.0f : __expf(m_[h] - mb);\n");
    sb_line(s, 4, "m_[h] = mx;\n");
    sb_line(s, 4, "l_[h] *= w0;\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
    sb_line(s, 5, "o_[nv][2 * h] *= w0;\n");
    sb_line(s, 5, "o_[nv][2 * h + 1] *= w0;\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int q = 1; q < %lld; q++) {\n", KW);
    sb_line(s, 5, "const int r = (q - 1) * %lld + wrow + gq + 8 * h;\n", BQ);
    sb_line(s, 5, "const float2 ml = mml_[r];\n");
    sb_line(s, 5, "const float w_ = ml.x == -ORCH_INF ? 0.0f : __expf(ml.x - mb);\n");
    sb_line(s, 5, "l_[h] = fmaf(ml.y, w_, l_[h]);\n");
    sb_line(s, 5, "#pragma unroll\n");
    sb_line(s, 5, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
    sb_line(s, 6, "const float2 ov = *(const float2 *)(mo_ + r * %lld + nv * 8 + 2 * tq);\n", SO);
    sb_line(s, 6, "o_[nv][2 * h] = fmaf(ov.x, w_, o_[nv][2 * h]);\n");
    sb_line(s, 6, "o_[nv][2 * h + 1] = fmaf(ov.y, w_, o_[nv][2 * h + 1]);\n");
    sb_line(s, 5, "}\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
}

// The start both kernels share: the signature, inputs and output, the shared arrays Qs, Ks and
// Vs, the block's batch index `bidx`, first query `q0` and keys [kbeg, kend) (its split's
// share, cut by the causal bound), the lead coordinates a_l<d> of bidx, the bases of the async
// loads.
static void emit_head(StrBuf *s, const Ana *x, const Geo *g, const char *desc, const char *fn) {
    const AttnSpec *a = &x->a;
    const PrimGraph *pg = a->pg;
    const Candidate *c = a->c;
    int r = a->rank;
    sb_printf(s, "// %s: %s (cp.async: Q %d, Kt %d, V %d bytes)\n", fn, desc,
              g->qa ? x->q.copy : 0, g->ka ? x->k.copy : 0, g->va ? x->v.copy : 0);
    sb_printf(s, "ORCH_KERNEL void __launch_bounds__(%lld) %s(OrchArgs a) {\n", (long long)g->T,
              fn);
    for (int j = 0; j < c->n_inputs; j++) {
        const char *ct = cgen_ctype(pg->tensors[c->inputs[j]]->dtype);
        sb_line(s, 1, "const %s *__restrict__ in%d = (const %s *)a.in[%d];\n", ct, j, ct, j);
        sb_line(s, 1, "(void)in%d;\n", j);
    }
    const char *yt = cgen_ctype(pg->tensors[a->y]->dtype);
    sb_line(s, 1, "%s *__restrict__ o = (%s *)a.out;\n", yt, yt);
    sb_line(s, 1, "extern __shared__ __align__(16) float orch_attn_sm[];\n");
    if (g->esz == 2) { // half tiles
        sb_line(s, 1, "uint16_t *Qs = (uint16_t *)orch_attn_sm, *Ks = Qs + %lld;\n",
                (long long)g->off_k);
        sb_line(s, 1, "uint16_t *Vs = Qs + %lld;\n", (long long)g->off_v);
    } else {
        sb_line(s, 1, "float *Qs = orch_attn_sm, *Ks = orch_attn_sm + %lld;\n",
                (long long)g->off_k);
        sb_line(s, 1, "float *Vs = orch_attn_sm + %lld;\n", (long long)g->off_v);
    }
    // Block: (batch index, query tile[, key split]), the split fastest.
    if (g->S > 1) {
        sb_line(s, 1, "const int64_t tile_ = blockIdx.x / %lld;\n", (long long)g->S);
        sb_line(s, 1, "const int ks = (int)(blockIdx.x - tile_ * %lld);\n", (long long)g->S);
    } else {
        sb_line(s, 1, "const int64_t tile_ = blockIdx.x;\n");
        sb_line(s, 1, "const int ks = 0;\n");
    }
    sb_line(s, 1, "const int64_t bidx = tile_ / %lld;\n", (long long)g->QT);
    sb_line(s, 1, "const int64_t q0 = (tile_ - bidx * %lld) * %lld;\n", (long long)g->QT,
            (long long)g->BQ);
    // The block's keys: its split's, up to the causal bound of its rows (none before r0).
    sb_line(s, 1, "const int64_t kbeg = (int64_t)ks * %lld;\n", (long long)(g->TPS * g->BK));
    if (x->cz.on) {
        sb_line(s, 1, "const int64_t kcut = q0 >= %lld ? ORCH_MIN_I64(q0 + %lld, (int64_t)%lld) "
                "+ %lld : (int64_t)%lld;\n", (long long)x->cz.r0, (long long)g->BQ,
                (long long)a->M, (long long)x->cz.off, (long long)a->N);
        sb_line(s, 1, "const int64_t kend = ORCH_MIN_I64(ORCH_MIN_I64(kbeg + %lld, (int64_t)%lld)"
                ", kcut);\n", (long long)(g->TPS * g->BK), (long long)a->N);
    } else {
        sb_line(s, 1, "const int64_t kend = ORCH_MIN_I64(kbeg + %lld, (int64_t)%lld);\n",
                (long long)(g->TPS * g->BK), (long long)a->N);
    }
    // The lead coordinates of the block's batch index.
    sb_line(s, 1, "int64_t a_rest = bidx;\n");
    for (int d = r - 3; d >= 0; d--)
        sb_line(s, 1, "const int64_t a_l%d = a_rest %% %lld; a_rest /= %lld; (void)a_l%d;\n", d,
                (long long)a->lead[d], (long long)a->lead[d], d);
    sb_line(s, 1, "(void)a_rest;\n");
    if (g->ka)
        emit_load_base(s, a, &x->k, "g_k");
    if (g->va)
        emit_load_base(s, a, &x->v, "g_v");
}

// The query tile into Qs, and the first key tile's async copies (none where the block has no
// keys: a key split past its rows' causal bound), committed as one group.
static int emit_first(AEm *E, StrBuf *s, const Ana *x, const Geo *g, Err *e) {
    const AttnSpec *a = &x->a;
    int r = a->rank, rc = ST_OK;
    if (g->qa) {
        emit_load_base(s, a, &x->q, "g_q");
        emit_copy(s, 1, g, &x->q, r - 2, r - 1, "Qs", g->Dp, "g_q", g->BQ, g->D4, "q0", a->M,
                  a->D);
    } else {
        bool rows_fast = x->q.affine && x->q.stride[r - 1] != 1 && x->q.stride[r - 2] == 1;
        rc = emit_stage(E, s, g, a->q, false, "Qs", g->Dp, g->BQ, g->D4, "q0", a->M, a->D,
                        rows_fast, e);
    }
    if (g->ka || g->va) {
        sb_line(s, 1, "if (kbeg < kend) {\n");
        emit_issue(s, 2, x, g, "kbeg", "0");
        sb_line(s, 1, "}\n");
    }
    if (g->any)
        sb_line(s, 1, "orch_attn_cp_commit();\n");
    return rc;
}

// The start of a key tile n0 (inside the key loop): its copies landed, every thread done with
// the previous tile, the next tile's copies issued into the other buffer; the tiles that do not
// go by cp.async staged through registers; Kb and Vb point at this tile.
static int emit_tile_start(AEm *E, StrBuf *s, const Ana *x, const Geo *g, Err *e) {
    const AttnSpec *a = &x->a;
    int r = a->rank, rc = ST_OK;
    const long long BK = g->BK;
    sb_line(s, 2, "const int buf = (int)(((n0 - kbeg) / %lld) & 1);\n", BK);
    sb_line(s, 2, "(void)buf;\n");
    if (g->any)
        sb_line(s, 2, "orch_attn_cp_wait();\n");
    sb_line(s, 2, "__syncthreads();\n");
    if (g->ka || g->va) {
        char next[48];
        snprintf(next, sizeof next, "n0 + %lld", BK);
        sb_line(s, 2, "if (n0 + %lld < kend) {\n", BK);
        emit_issue(s, 3, x, g, next, "buf ^ 1");
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "orch_attn_cp_commit();\n");
    }
    // Keys as rows of Ks: Kt's column axis (r - 1) is the tile's row axis.
    if (!g->ka) {
        bool rows_fast = x->k.affine && x->k.stride[r - 2] != 1 && x->k.stride[r - 1] == 1;
        rc = emit_stage(E, s, g, a->kt, true, "Ks", g->Dp, g->BK, g->D4, "n0", a->N, a->D,
                        rows_fast, e);
    }
    if (!g->va && !rc) {
        bool rows_fast = x->v.affine && x->v.stride[r - 1] != 1 && x->v.stride[r - 2] == 1;
        rc = emit_stage(E, s, g, a->v, false, "Vs", g->DVp, g->BK, g->DVq, "n0", a->N, a->Dv,
                        rows_fast, e);
    }
    if (!g->ka || !g->va)
        sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "const %s *Kb = Ks + buf * %lld, *Vb = Vs + buf * %lld;\n",
            g->esz == 2 ? "uint16_t" : "float",
            g->kT   ? g->D4 * g->BKT
            : g->ka ? BK * g->Dp
                    : 0LL,
            g->va ? BK * g->DVp : 0LL);
    return rc;
}

// The stored form of an output value v (a float32 expression): v itself (float32 attention); its
// half bits, rounded once (a half output); or rounded to half and widened back (the candidate's
// CAST of a half O to float32).
static void out_value(const AttnSpec *a, const char *v, char *buf, size_t cap) {
    const char *to = a->dt == DT_FLOAT16 ? "orch_f32_to_f16" : "orch_f32_to_bf16";
    const char *from = a->dt == DT_FLOAT16 ? "orch_f16_to_f32" : "orch_bf16_to_f32";
    if (a->dt == DT_FLOAT)
        snprintf(buf, cap, "%s", v);
    else if (a->pg->tensors[a->y]->dtype == DT_FLOAT)
        snprintf(buf, cap, "%s(%s(%s))", from, to, v);
    else
        snprintf(buf, cap, "%s(%s)", to, v);
}

// The SIMT kernel's body (after emit_head).
static int emit_simt(AEm *E, StrBuf *s, StrBuf *decls, const Ana *x, const Geo *g,
                     const char *fn, Err *e) {
    const AttnSpec *a = &x->a;
    const long long BK = g->BK, TM = g->TM, TN = g->TN, CG = g->CG, RG = g->RG, U = g->U,
                    Dp = g->Dp, DVp = g->DVp, BKp = g->BKp, M = a->M, N = a->N, Dv = a->Dv;
    sb_line(s, 1, "float *Ps = orch_attn_sm + %lld;\n", (long long)g->off_p);
    sb_line(s, 1, "const int tid = threadIdx.x, c = tid %% %lld, rg = tid / %lld;\n", CG, CG);
    int rc = emit_first(E, s, x, g, e);
    // The clamped rows of the pre-softmax chain's index (rows past M are computed, not stored).
    for (int i = 0; i < g->TM; i++)
        sb_line(s, 1, "const int64_t a_r%d = ORCH_MIN_I64(q0 + rg + %lld, (int64_t)%lld);\n", i,
                (long long)i * RG, M - 1);
    sb_line(s, 1, "float m_[%lld], l_[%lld];\n", TM, TM);
    sb_line(s, 1, "float4 acc[%lld][%lld];\n", TM, U);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 2, "m_[i] = -ORCH_INF;\n");
    sb_line(s, 2, "l_[i] = 0.0f;\n");
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int u = 0; u < %lld; u++) acc[i][u].x = acc[i][u].y = acc[i][u].z = "
            "acc[i][u].w = 0.0f;\n", U);
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "for (int64_t n0 = kbeg; n0 < kend; n0 += %lld) {\n", BK);
    if (!rc)
        rc = emit_tile_start(E, s, x, g, e);
    // S = Q·K^T on the thread's rows and key columns.
    sb_line(s, 1, "float sc[%lld][%lld];\n", TM, TN);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++)\n", TM);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int j = 0; j < %lld; j++) sc[i][j] = 0.0f;\n", TN);
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "const float *qb = Qs + rg * %lld, *kb = Kb + c * %lld;\n", Dp, Dp);
    sb_line(s, 2, "#pragma unroll 4\n");
    sb_line(s, 2, "for (int k = 0; k < %lld; k += 4) {\n", (long long)g->D4);
    sb_line(s, 3, "float4 qv[%lld], kv[%lld];\n", TM, TN);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i = 0; i < %lld; i++) qv[i] = *(const float4 *)(qb + i * %lld + k);"
            "\n", TM, RG * Dp);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int j = 0; j < %lld; j++) kv[j] = *(const float4 *)(kb + j * %lld + k);"
            "\n", TN, CG * Dp);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i = 0; i < %lld; i++)\n", TM);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int j = 0; j < %lld; j++) {\n", TN);
    for (int q = 0; q < 4; q++)
        sb_line(s, 5, "sc[i][j] = fmaf(qv[i].%c, kv[j].%c, sc[i][j]);\n", XYZW[q], XYZW[q]);
    sb_line(s, 4, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    // The pre-softmax chain per score; keys past N drop out as -inf.
    bool tail = a->N % g->BK != 0;
    if (a->n_pre > 0 || tail) {
        for (int j = 0; j < g->TN && !rc; j++) {
            sb_line(s, 1, "{\n");
            sb_line(s, 2, "const int64_t a_cg = n0 + c + %lld;\n", (long long)j * CG);
            sb_line(s, 2, "const int64_t a_cn = ORCH_MIN_I64(a_cg, (int64_t)%lld);\n", N - 1);
            sb_line(s, 2, "(void)a_cn;\n");
            for (int i = 0; i < g->TM && !rc; i++) {
                char v[64] = "a_sc", row[16];
                sb_line(s, 2, "{\n");
                sb_line(s, 3, "const float a_sc = sc[%d][%d];\n", i, j);
                if (a->n_pre > 0) {
                    snprintf(row, sizeof row, "a_r%d", i);
                    const char *ix[ORCH_MAX_RANK];
                    tensor_index(a, a->sp, row, "a_cn", ix);
                    E->in_score = true;
                    rc = cexpr_value(E->x, a->sp, ix, s, 3, v, sizeof v, e);
                    E->in_score = false;
                    cexpr_forget(E->x);
                }
                if (tail)
                    sb_line(s, 3, "sc[%d][%d] = a_cg < %lld ? %s : -ORCH_INF;\n", i, j, N, v);
                else
                    sb_line(s, 3, "sc[%d][%d] = %s;\n", i, j, v);
                sb_line(s, 2, "}\n");
            }
            sb_line(s, 1, "}\n");
        }
    }
    // Online softmax. A row whose scores are all -inf so far keeps exponent base 0, so its
    // terms stay 0 (not NaN) until a finite score arrives.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 2, "float mt = sc[i][0];\n");
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int j = 1; j < %lld; j++) mt = fmaxf(mt, sc[i][j]);\n", TN);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int w = %lld; w > 0; w >>= 1) mt = fmaxf(mt, __shfl_xor_sync("
            "ORCH_FULL_MASK, mt, w));\n", CG / 2);
    sb_line(s, 2, "const float mn = fmaxf(m_[i], mt), mb = mn == -ORCH_INF ? 0.0f : mn;\n");
    sb_line(s, 2, "const float alpha = expf(m_[i] - mb);\n");
    sb_line(s, 2, "m_[i] = mn;\n");
    sb_line(s, 2, "float ls = 0.0f;\n");
    sb_line(s, 2, "float *pr = Ps + (rg + i * %lld) * %lld + c;\n", RG, BKp);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int j = 0; j < %lld; j++) {\n", TN);
    sb_line(s, 3, "const float p = expf(sc[i][j] - mb);\n");
    sb_line(s, 3, "ls += p;\n");
    sb_line(s, 3, "pr[j * %lld] = p;\n", CG);
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "l_[i] = l_[i] * alpha + ls;\n");
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int u = 0; u < %lld; u++) {\n", U);
    for (int q = 0; q < 4; q++)
        sb_line(s, 3, "acc[i][u].%c *= alpha;\n", XYZW[q]);
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "__syncthreads();\n");
    // O += P·V.
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "const float *pb = Ps + rg * %lld, *vb = Vb + c * 4;\n", BKp);
    sb_line(s, 2, "#pragma unroll 2\n");
    sb_line(s, 2, "for (int k = 0; k < %lld; k += 4) {\n", BK);
    sb_line(s, 3, "float4 pv[%lld];\n", TM);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i = 0; i < %lld; i++) pv[i] = *(const float4 *)(pb + i * %lld + k);"
            "\n", TM, RG * BKp);
    for (int q = 0; q < 4; q++) {
        sb_line(s, 3, "{\n");
        sb_line(s, 4, "float4 vv[%lld];\n", U);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int u = 0; u < %lld; u++) vv[u] = *(const float4 *)(vb + (k + %d) * "
                "%lld + u * %lld);\n", U, q, DVp, CG * 4);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int i = 0; i < %lld; i++)\n", TM);
        sb_line(s, 5, "#pragma unroll\n");
        sb_line(s, 5, "for (int u = 0; u < %lld; u++) {\n", U);
        for (int w = 0; w < 4; w++)
            sb_line(s, 6, "acc[i][u].%c = fmaf(pv[i].%c, vv[u].%c, acc[i][u].%c);\n", XYZW[w],
                    XYZW[q], XYZW[w], XYZW[w]);
        sb_line(s, 5, "}\n");
        sb_line(s, 3, "}\n");
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "}\n"); // key tiles
    // A block without keys (a key split past the causal bound) leaves no copy in flight.
    if (g->any)
        sb_line(s, 1, "orch_attn_cp_wait();\n");
    // The row sums across the row group.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int w = %lld; w > 0; w >>= 1) l_[i] += __shfl_xor_sync(ORCH_FULL_MASK, "
            "l_[i], w);\n", CG / 2);
    sb_line(s, 1, "}\n");
    if (g->S > 1)
        emit_merge(s, decls, x, g, fn);
    // O / l, rows below M, columns below Dv.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 2, "const int64_t row = q0 + rg + i * %lld;\n", RG);
    sb_line(s, 2, "if (row >= %lld) continue;\n", M);
    const bool hy = a->pg->tensors[a->y]->dtype != DT_FLOAT; // half stores
    emit_orow(s, a, hy);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int u = 0; u < %lld; u++) {\n", U);
    sb_line(s, 3, "const int col = (c + u * %lld) * 4;\n", CG);
    sb_line(s, 3, "float4 r4;\n");
    char ov[4][96];
    for (int w = 0; w < 4; w++) {
        sb_line(s, 3, "r4.%c = acc[i][u].%c / l_[i];\n", XYZW[w], XYZW[w]);
        if (a->nan_to_zero) // a row of -inf scores: P (and so O) is 0, as the export says
            sb_line(s, 3, "if (isnan(r4.%c)) r4.%c = 0.0f;\n", XYZW[w], XYZW[w]);
        char v[8];
        snprintf(v, sizeof v, "r4.%c", XYZW[w]);
        out_value(a, v, ov[w], sizeof ov[w]);
    }
    if (a->Dv % 4 == 0 && hy) { // 4 halves: 8 bytes, aligned (Dv and col multiples of 4)
        sb_line(s, 3, "if (col < %lld) {\n", Dv);
        sb_line(s, 4, "uint2 h4;\n");
        sb_line(s, 4, "h4.x = (uint32_t)%s | (uint32_t)%s << 16;\n", ov[0], ov[1]);
        sb_line(s, 4, "h4.y = (uint32_t)%s | (uint32_t)%s << 16;\n", ov[2], ov[3]);
        sb_line(s, 4, "*(uint2 *)(orow + col) = h4;\n");
        sb_line(s, 3, "}\n");
    } else if (a->Dv % 4 == 0) {
        if (a->dt != DT_FLOAT) // rounded through half first
            for (int w = 0; w < 4; w++)
                sb_line(s, 3, "r4.%c = %s;\n", XYZW[w], ov[w]);
        sb_line(s, 3, "if (col < %lld) *(float4 *)(orow + col) = r4;\n", Dv);
    } else {
        for (int w = 0; w < 4; w++)
            sb_line(s, 3, "if (col + %d < %lld) orow[col + %d] = %s;\n", w, Dv, w, ov[w]);
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    return rc;
}

// Device helpers of the tensor-core kernel, once per translation unit: roundings (cvt.rna to
// TF32 as the GEMM does; cvt.rn to half pairs, the first argument in the low half), the mma
// wrappers (accumulators in place) and the fragments read from the float32 tiles: A of Q (p at
// row g, column 2t of the k step; st: 8 rows on), B of K (p at key row g, column 2t), B of V (p
// at key row 2t, column g; st: the row stride). TF32 takes columns 2t and 2t + 1 as fragment
// columns t and t + 4 (the k permutation of the header), so every read is a float2 but V's.
static void emit_tc_helpers(StrBuf *s, bool half) {
    sb_puts(s, "#ifndef ORCH_ATTN_MMA_HELPERS\n"
               "#define ORCH_ATTN_MMA_HELPERS\n"
               "ORCH_DEV uint32_t orch_attn_tf32(float x) {\n"
               "    uint32_t r;\n"
               "    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
               "    return r;\n"
               "}\n"
               "ORCH_DEV uint32_t orch_attn_f16(float lo, float hi) {\n"
               "    uint32_t r;\n"
               "    asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
               "    return r;\n"
               "}\n"
               "ORCH_DEV uint32_t orch_attn_bf16(float lo, float hi) {\n"
               "    uint32_t r;\n"
               "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
               "    return r;\n"
               "}\n"
               "ORCH_DEV void orch_attn_afrag_tf32(uint32_t *a, const float *p, int st) {\n"
               "    const float2 x = *(const float2 *)p, y = *(const float2 *)(p + st);\n"
               "    a[0] = orch_attn_tf32(x.x);\n"
               "    a[1] = orch_attn_tf32(y.x);\n"
               "    a[2] = orch_attn_tf32(x.y);\n"
               "    a[3] = orch_attn_tf32(y.y);\n"
               "}\n"
               "ORCH_DEV void orch_attn_kfrag_tf32(uint32_t *b, const float *p) {\n"
               "    const float2 x = *(const float2 *)p;\n"
               "    b[0] = orch_attn_tf32(x.x);\n"
               "    b[1] = orch_attn_tf32(x.y);\n"
               "}\n"
               "ORCH_DEV void orch_attn_vfrag_tf32(uint32_t *b, const float *p, int st) {\n"
               "    b[0] = orch_attn_tf32(p[0]);\n"
               "    b[1] = orch_attn_tf32(p[st]);\n"
               "}\n"
               "ORCH_DEV void orch_attn_mma_tf32(float *c, const uint32_t *a, const uint32_t *b) "
               "{\n"
               "    asm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
               "        : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
               "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), "
               "\"r\"(b[1]));\n"
               "}\n");
    static const char *const halves[] = {"f16", "bf16"};
    for (int i = 0; i < 2; i++) {
        const char *h = halves[i];
        sb_printf(s,
                  "ORCH_DEV void orch_attn_afrag_%s(uint32_t *a, const float *p, int st) {\n"
                  "    const float2 x0 = *(const float2 *)p, x1 = *(const float2 *)(p + st);\n"
                  "    const float2 x2 = *(const float2 *)(p + 8), x3 = *(const float2 *)(p + st "
                  "+ 8);\n"
                  "    a[0] = orch_attn_%s(x0.x, x0.y);\n"
                  "    a[1] = orch_attn_%s(x1.x, x1.y);\n"
                  "    a[2] = orch_attn_%s(x2.x, x2.y);\n"
                  "    a[3] = orch_attn_%s(x3.x, x3.y);\n"
                  "}\n"
                  "ORCH_DEV void orch_attn_kfrag_%s(uint32_t *b, const float *p) {\n"
                  "    const float2 x0 = *(const float2 *)p, x1 = *(const float2 *)(p + 8);\n"
                  "    b[0] = orch_attn_%s(x0.x, x0.y);\n"
                  "    b[1] = orch_attn_%s(x1.x, x1.y);\n"
                  "}\n"
                  "ORCH_DEV void orch_attn_vfrag_%s(uint32_t *b, const float *p, int st) {\n"
                  "    b[0] = orch_attn_%s(p[0], p[st]);\n"
                  "    b[1] = orch_attn_%s(p[8 * st], p[9 * st]);\n"
                  "}\n"
                  "ORCH_DEV void orch_attn_mma_%s(float *c, const uint32_t *a, const uint32_t *b) "
                  "{\n"
                  "    asm(\"mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%%0, %%1, %%2, %%3}, "
                  "{%%4, %%5, %%6, %%7}, {%%8, %%9}, {%%0, %%1, %%2, %%3};\"\n"
                  "        : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
                  "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), "
                  "\"r\"(b[1]));\n"
                  "}\n",
                  h, h, h, h, h, h, h, h, h, h, h, h, h, h);
    }
    sb_puts(s, "#endif\n");
    // Fragments of half tiles (f16 or bf16 bits as they lie): A of Q and B of K are 32-bit
    // reads of column pairs; B of V (and of a dim-major K) pairs two rows' halves.
    if (half)
        sb_puts(s, "#ifndef ORCH_ATTN_MMA_H16\n"
                   "#define ORCH_ATTN_MMA_H16\n"
                   "ORCH_DEV void orch_attn_afrag_h16(uint32_t *a, const uint16_t *p, int st) {\n"
                   "    a[0] = *(const uint32_t *)p;\n"
                   "    a[1] = *(const uint32_t *)(p + st);\n"
                   "    a[2] = *(const uint32_t *)(p + 8);\n"
                   "    a[3] = *(const uint32_t *)(p + st + 8);\n"
                   "}\n"
                   "ORCH_DEV void orch_attn_kfrag_h16(uint32_t *b, const uint16_t *p) {\n"
                   "    b[0] = *(const uint32_t *)p;\n"
                   "    b[1] = *(const uint32_t *)(p + 8);\n"
                   "}\n"
                   "ORCH_DEV void orch_attn_vfrag_h16(uint32_t *b, const uint16_t *p, int st) {\n"
                   "    b[0] = (uint32_t)p[0] | (uint32_t)p[st] << 16;\n"
                   "    b[1] = (uint32_t)p[8 * st] | (uint32_t)p[9 * st] << 16;\n"
                   "}\n"
                   // ldmatrix: four (two) 8 x 8 matrices of halves, the rows' addresses from
                   // lanes 8m .. 8m + 7 for matrix m; plain: lane l gets row l / 4, columns
                   // 2 (l % 4) and + 1 (an A fragment's or a key-major B's register); .trans:
                   // rows 2 (l % 4) and + 1 of column l / 4 (V's and a dim-major K's).
                   "ORCH_DEV void orch_attn_ldsm4(uint32_t *r, const uint16_t *p) {\n"
                   "    const unsigned a = (unsigned)__cvta_generic_to_shared(p);\n"
                   "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
                   "[%4];\"\n"
                   "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : "
                   "\"r\"(a));\n"
                   "}\n"
                   "ORCH_DEV void orch_attn_ldsm4t(uint32_t *r, const uint16_t *p) {\n"
                   "    const unsigned a = (unsigned)__cvta_generic_to_shared(p);\n"
                   "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, "
                   "%3}, [%4];\"\n"
                   "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : "
                   "\"r\"(a));\n"
                   "}\n"
                   "ORCH_DEV void orch_attn_ldsm2t(uint32_t *r, const uint16_t *p) {\n"
                   "    const unsigned a = (unsigned)__cvta_generic_to_shared(p);\n"
                   "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, "
                   "[%2];\"\n"
                   "                 : \"=r\"(r[0]), \"=r\"(r[1]) : \"r\"(a));\n"
                   "}\n"
                   "#endif\n");
}

// The tensor-core kernel's body (after emit_head). Lane (gq, tq) = (lane / 4, lane % 4) of the
// warp owning rows wrow .. wrow + 15 of the tile holds, per n8 tile, the accumulators of rows
// gq and gq + 8 (elements 0, 1 and 2, 3) at columns 2 tq and 2 tq + 1.
static int emit_tc(AEm *E, StrBuf *s, StrBuf *decls, const Ana *x, const Geo *g, const char *fn,
                   Err *e) {
    const AttnSpec *a = &x->a;
    // NT and KQ: the n8 tiles and k steps of the warp's share of a key tile.
    const long long BK = g->BK, Dp = g->Dp, DVp = g->DVp, KS = g->KS, NT = g->NTW, NV = g->NV,
                    KQ = g->KQW, kstep = g->kstep, M = a->M, N = a->N, Dv = a->Dv, KW = g->KW,
                    W = g->W;
    const char *ty = g->mma == CUA_MMA_F16 ? "f16" : g->mma == CUA_MMA_BF16 ? "bf16" : "tf32";
    // The fragment readers: of float32 tiles (rounding to ty), or of half tiles (as they lie).
    const char *fr = g->esz == 2 ? "h16" : ty;
    sb_line(s, 1, "const int tid = threadIdx.x, lane = tid & 31, gq = lane >> 2, tq = lane & 3;\n");
    // Warp (tid >> 5) owns rows wrow .. wrow + 15 and, of every key tile, the keys from kofs on.
    sb_line(s, 1, "const int wrow = (tid >> 5) %% %lld * 16, kh = (tid >> 5) / %lld;\n", W, W);
    sb_line(s, 1, "const int kofs = kh * %lld;\n", BK / KW);
    sb_line(s, 1, "(void)kofs;\n");
    // Half tiles go to the fragments by ldmatrix (one instruction per four 8 x 8 matrices):
    // lane l addresses row l % 8 of matrix l / 8. The lane's offsets: ql_ into Qs (matrices: rows
    // 0-7 and 8-15 of the warp's, columns 0-7, then the same at columns 8-15), kl_ into a key
    // tile (keys 0-7 at dims 0-7 and 8-15, then keys 8-15; dim-major: the same matrices
    // transposed), vl_ into a value tile (keys 0-7 and 8-15 at columns 0-7, then at 8-15).
    const bool lm = g->esz == 2;
    if (lm) {
        sb_line(s, 1, "const int lm_r = lane & 7, lm_i = lane >> 3;\n");
        sb_line(s, 1, "const int ql_ = (wrow + (lm_i & 1) * 8 + lm_r) * %lld + (lm_i >> 1) * 8;\n",
                Dp);
        if (g->kT)
            sb_line(s, 1,
                    "const int kl_ = ((lm_i & 1) * 8 + lm_r) * %lld + kofs + (lm_i >> 1) * 8;\n",
                    (long long)g->BKT);
        else
            sb_line(s, 1,
                    "const int kl_ = (kofs + (lm_i >> 1) * 8 + lm_r) * %lld + (lm_i & 1) * 8;\n",
                    Dp);
        sb_line(s, 1, "const int vl_ = (kofs + (lm_i & 1) * 8 + lm_r) * %lld + (lm_i >> 1) * 8;\n",
                DVp);
    }
    int rc = emit_first(E, s, x, g, e);
    // The clamped rows of the pre-softmax chain's index (rows past M are computed, not stored).
    sb_line(s, 1, "const int64_t a_r0 = ORCH_MIN_I64(q0 + wrow + gq, (int64_t)%lld);\n", M - 1);
    sb_line(s, 1, "const int64_t a_r1 = ORCH_MIN_I64(q0 + wrow + gq + 8, (int64_t)%lld);\n",
            M - 1);
    // The warp's key end: none for a warp past M, else the causal bound of its own 16 rows.
    if (x->cz.on)
        sb_line(s, 1, "const int64_t kwarp = q0 + wrow >= %lld ? 0 : q0 + wrow >= %lld ? "
                "ORCH_MIN_I64(kend, ORCH_MIN_I64(q0 + wrow + 16, (int64_t)%lld) + %lld) : kend;\n",
                M, (long long)x->cz.r0, M, (long long)x->cz.off);
    else
        sb_line(s, 1, "const int64_t kwarp = q0 + wrow < %lld ? kend : 0;\n", M);
    sb_line(s, 1, "float m_[2] = {-ORCH_INF, -ORCH_INF}, l_[2] = {0.0f, 0.0f};\n");
    sb_line(s, 1, "float o_[%lld][4];\n", NV);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int nv = 0; nv < %lld; nv++) o_[nv][0] = o_[nv][1] = o_[nv][2] = "
            "o_[nv][3] = 0.0f;\n", NV);
    if (g->qreg) {
        // The warp's Q fragments, once the tile has landed.
        if (g->any)
            sb_line(s, 1, "orch_attn_cp_wait();\n");
        sb_line(s, 1, "__syncthreads();\n");
        sb_line(s, 1, "uint32_t qf[%lld][4];\n", KS);
        sb_line(s, 1, "#pragma unroll\n");
        if (lm)
            sb_line(s, 1,
                    "for (int ks = 0; ks < %lld; ks++) orch_attn_ldsm4(qf[ks], Qs + ql_ + ks * "
                    "16);\n",
                    KS);
        else
            sb_line(s, 1,
                    "for (int ks = 0; ks < %lld; ks++) orch_attn_afrag_%s(qf[ks], Qs + (wrow + "
                    "gq) * %lld + ks * %lld + 2 * tq, %lld);\n",
                    KS, fr, Dp, kstep, 8 * Dp);
    }
    sb_line(s, 1, "for (int64_t n0 = kbeg; n0 < kend; n0 += %lld) {\n", BK);
    if (!rc)
        rc = emit_tile_start(E, s, x, g, e);
    sb_line(s, 2, "if (n0 + kofs < kwarp) {\n");
    // S = Q·K^T: the warp's 16 rows by the tile's keys.
    sb_line(s, 3, "float sc[%lld][4];\n", NT);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int nt = 0; nt < %lld; nt++) sc[nt][0] = sc[nt][1] = sc[nt][2] = "
            "sc[nt][3] = 0.0f;\n", NT);
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int ks = 0; ks < %lld; ks++) {\n", KS);
    if (g->qreg) {
        sb_line(s, 4, "const uint32_t *af = qf[ks];\n");
    } else {
        sb_line(s, 4, "uint32_t af[4];\n");
        if (lm)
            sb_line(s, 4, "orch_attn_ldsm4(af, Qs + ql_ + ks * 16);\n");
        else
            sb_line(s, 4,
                    "orch_attn_afrag_%s(af, Qs + (wrow + gq) * %lld + ks * %lld + 2 * tq, "
                    "%lld);\n",
                    fr, Dp, kstep, 8 * Dp);
    }
    sb_line(s, 4, "#pragma unroll\n");
    if (lm) { // two n8 tiles a load (NT is even: BK / KW is a multiple of 16)
        sb_line(s, 4, "for (int nt = 0; nt < %lld; nt += 2) {\n", NT);
        sb_line(s, 5, "uint32_t b4[4];\n");
        if (g->kT)
            sb_line(s, 5, "orch_attn_ldsm4t(b4, Kb + kl_ + ks * %lld + nt * 8);\n",
                    16 * (long long)g->BKT);
        else
            sb_line(s, 5, "orch_attn_ldsm4(b4, Kb + kl_ + nt * %lld + ks * 16);\n", 8 * Dp);
        sb_line(s, 5, "orch_attn_mma_%s(sc[nt], af, b4);\n", ty);
        sb_line(s, 5, "orch_attn_mma_%s(sc[nt + 1], af, b4 + 2);\n", ty);
        sb_line(s, 4, "}\n");
    } else {
        sb_line(s, 4, "for (int nt = 0; nt < %lld; nt++) {\n", NT);
        sb_line(s, 5, "uint32_t bf[2];\n");
        if (g->kT) // d pairs (2t, 2t + 1) and (+ 8, + 9) of key gq: V's fragment pattern
            sb_line(s, 5,
                    "orch_attn_vfrag_%s(bf, Kb + (ks * %lld + 2 * tq) * %lld + kofs + nt * 8 + "
                    "gq, %lld);\n",
                    fr, kstep, (long long)g->BKT, (long long)g->BKT);
        else
            sb_line(s, 5,
                    "orch_attn_kfrag_%s(bf, Kb + (kofs + nt * 8 + gq) * %lld + ks * %lld + 2 * "
                    "tq);\n",
                    fr, Dp, kstep);
        sb_line(s, 5, "orch_attn_mma_%s(sc[nt], af, bf);\n", ty);
        sb_line(s, 4, "}\n");
    }
    sb_line(s, 3, "}\n");
    // The pre-softmax chain per accumulator element; keys past N drop out as -inf.
    bool tail = a->N % g->BK != 0;
    if ((a->n_pre > 0 || tail) && !rc) {
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int nt = 0; nt < %lld; nt++) {\n", NT);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int z = 0; z < 4; z++) {\n");
        sb_line(s, 5, "const int64_t a_cg = n0 + kofs + nt * 8 + 2 * tq + (z & 1);\n");
        sb_line(s, 5, "const int64_t a_cn = ORCH_MIN_I64(a_cg, (int64_t)%lld);\n", N - 1);
        sb_line(s, 5, "const int64_t a_rr = z < 2 ? a_r0 : a_r1;\n");
        sb_line(s, 5, "(void)a_cn;\n");
        sb_line(s, 5, "(void)a_rr;\n");
        sb_line(s, 5, "const float a_sc = sc[nt][z];\n");
        char v[64] = "a_sc";
        if (a->n_pre > 0) {
            const char *ix[ORCH_MAX_RANK];
            tensor_index(a, a->sp, "a_rr", "a_cn", ix);
            E->in_score = true;
            rc = cexpr_value(E->x, a->sp, ix, s, 5, v, sizeof v, e);
            E->in_score = false;
            cexpr_forget(E->x);
        }
        if (tail)
            sb_line(s, 5, "sc[nt][z] = a_cg < %lld ? %s : -ORCH_INF;\n", N, v);
        else
            sb_line(s, 5, "sc[nt][z] = %s;\n", v);
        sb_line(s, 4, "}\n");
        sb_line(s, 3, "}\n");
    }
    // Online softmax per row (h: rows gq, gq + 8), the max over the quad's lanes; a row whose
    // scores are all -inf so far keeps exponent base 0, as in the SIMT kernel. (Not
    // 2^(v log2 e - mb log2 e) in one FFMA: a row masked with a finite minimum, -3.4e38, has
    // mb log2 e = -inf and would give NaN where exp(v - mb) gives 1.)
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 4, "float mt = fmaxf(sc[0][2 * h], sc[0][2 * h + 1]);\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int nt = 1; nt < %lld; nt++) mt = fmaxf(mt, fmaxf(sc[nt][2 * h], "
            "sc[nt][2 * h + 1]));\n", NT);
    sb_line(s, 4, "mt = fmaxf(mt, __shfl_xor_sync(ORCH_FULL_MASK, mt, 1));\n");
    sb_line(s, 4, "mt = fmaxf(mt, __shfl_xor_sync(ORCH_FULL_MASK, mt, 2));\n");
    sb_line(s, 4, "const float mn = fmaxf(m_[h], mt), mb = mn == -ORCH_INF ? 0.0f : mn;\n");
    sb_line(s, 4, "const float alpha = __expf(m_[h] - mb);\n");
    sb_line(s, 4, "m_[h] = mn;\n");
    sb_line(s, 4, "float ls = 0.0f;\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int nt = 0; nt < %lld; nt++) {\n", NT);
    sb_line(s, 5, "sc[nt][2 * h] = __expf(sc[nt][2 * h] - mb);\n");
    sb_line(s, 5, "sc[nt][2 * h + 1] = __expf(sc[nt][2 * h + 1] - mb);\n");
    sb_line(s, 5, "ls += sc[nt][2 * h] + sc[nt][2 * h + 1];\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "l_[h] = l_[h] * alpha + ls;\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
    sb_line(s, 5, "o_[nv][2 * h] *= alpha;\n");
    sb_line(s, 5, "o_[nv][2 * h + 1] *= alpha;\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    // O += P·V: P's A fragments straight from the accumulators.
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int kq = 0; kq < %lld; kq++) {\n", KQ);
    sb_line(s, 4, "uint32_t pf[4];\n");
    if (g->mma == CUA_MMA_TF32) {
        sb_line(s, 4, "pf[0] = orch_attn_tf32(sc[kq][0]);\n");
        sb_line(s, 4, "pf[1] = orch_attn_tf32(sc[kq][2]);\n");
        sb_line(s, 4, "pf[2] = orch_attn_tf32(sc[kq][1]);\n");
        sb_line(s, 4, "pf[3] = orch_attn_tf32(sc[kq][3]);\n");
    } else {
        sb_line(s, 4, "pf[0] = orch_attn_%s(sc[2 * kq][0], sc[2 * kq][1]);\n", ty);
        sb_line(s, 4, "pf[1] = orch_attn_%s(sc[2 * kq][2], sc[2 * kq][3]);\n", ty);
        sb_line(s, 4, "pf[2] = orch_attn_%s(sc[2 * kq + 1][0], sc[2 * kq + 1][1]);\n", ty);
        sb_line(s, 4, "pf[3] = orch_attn_%s(sc[2 * kq + 1][2], sc[2 * kq + 1][3]);\n", ty);
    }
    if (lm) { // two n8 tiles of V a load, the last alone where NV is odd
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int nv = 0; nv + 1 < %lld; nv += 2) {\n", NV);
        sb_line(s, 5, "uint32_t b4[4];\n");
        sb_line(s, 5, "orch_attn_ldsm4t(b4, Vb + vl_ + kq * %lld + nv * 8);\n", 16 * DVp);
        sb_line(s, 5, "orch_attn_mma_%s(o_[nv], pf, b4);\n", ty);
        sb_line(s, 5, "orch_attn_mma_%s(o_[nv + 1], pf, b4 + 2);\n", ty);
        sb_line(s, 4, "}\n");
        if (NV % 2) {
            sb_line(s, 4, "{\n");
            sb_line(s, 5, "uint32_t b2[2];\n");
            sb_line(s, 5, "orch_attn_ldsm2t(b2, Vb + vl_ + kq * %lld + %lld);\n", 16 * DVp,
                    (NV - 1) * 8);
            sb_line(s, 5, "orch_attn_mma_%s(o_[%lld], pf, b2);\n", ty, NV - 1);
            sb_line(s, 4, "}\n");
        }
    } else {
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
        sb_line(s, 5, "uint32_t bf[2];\n");
        sb_line(s, 5,
                "orch_attn_vfrag_%s(bf, Vb + (kofs + kq * %lld + 2 * tq) * %lld + nv * 8 + gq, "
                "%lld);\n",
                fr, kstep, DVp, DVp);
        sb_line(s, 5, "orch_attn_mma_%s(o_[nv], pf, bf);\n", ty);
        sb_line(s, 4, "}\n");
    }
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n"); // n0 < kwarp
    sb_line(s, 1, "}\n"); // key tiles
    // A block without keys (a key split past the causal bound) leaves no copy in flight.
    if (g->any)
        sb_line(s, 1, "orch_attn_cp_wait();\n");
    // The row sums across the quad; O / l, rows below M, columns below Dv.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 2, "l_[h] += __shfl_xor_sync(ORCH_FULL_MASK, l_[h], 1);\n");
    sb_line(s, 2, "l_[h] += __shfl_xor_sync(ORCH_FULL_MASK, l_[h], 2);\n");
    sb_line(s, 1, "}\n");
    if (KW > 1)
        emit_merge_kw(s, g);
    if (g->S > 1)
        emit_merge_tc(s, decls, x, g, fn);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int h = 0; h < 2; h++) {\n");
    sb_line(s, 2, "const int64_t row = q0 + wrow + gq + 8 * h;\n");
    sb_line(s, 2, "if (row >= %lld || kh) continue;\n", M);
    const bool hy = a->pg->tensors[a->y]->dtype != DT_FLOAT; // half stores
    char ox[96], oy[96];
    out_value(a, "r2.x", ox, sizeof ox);
    out_value(a, "r2.y", oy, sizeof oy);
    emit_orow(s, a, hy);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int nv = 0; nv < %lld; nv++) {\n", NV);
    sb_line(s, 3, "const int col = nv * 8 + 2 * tq;\n");
    sb_line(s, 3, "float2 r2;\n");
    sb_line(s, 3, "r2.x = o_[nv][2 * h] / l_[h];\n");
    sb_line(s, 3, "r2.y = o_[nv][2 * h + 1] / l_[h];\n");
    if (a->nan_to_zero) { // a row of -inf scores: P (and so O) is 0, as the export says
        sb_line(s, 3, "if (isnan(r2.x)) r2.x = 0.0f;\n");
        sb_line(s, 3, "if (isnan(r2.y)) r2.y = 0.0f;\n");
    }
    if (a->Dv % 2 == 0 && hy) { // a half pair: 4 bytes, aligned (Dv and col even)
        sb_line(s, 3,
                "if (col < %lld) *(uint32_t *)(orow + col) = (uint32_t)%s | (uint32_t)%s "
                "<< 16;\n",
                Dv, ox, oy);
    } else if (a->Dv % 2 == 0) {
        if (a->dt != DT_FLOAT) { // rounded through half first
            sb_line(s, 3, "r2.x = %s;\n", ox);
            sb_line(s, 3, "r2.y = %s;\n", oy);
        }
        sb_line(s, 3, "if (col < %lld) *(float2 *)(orow + col) = r2;\n", Dv);
    } else {
        sb_line(s, 3, "if (col < %lld) orow[col] = %s;\n", Dv, ox);
        sb_line(s, 3, "if (col + 1 < %lld) orow[col + 1] = %s;\n", Dv, oy);
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    return rc;
}

// The graph cexpr emits from. For a half attention, a view of a->pg in which the scores and the
// pre-softmax chain's tensors, and its instructions computing in the half type, are float32
// (their immediates rounded to the half type first, as the interpreter reads them): the chain
// then runs on the float32 scores in float32, reading half masks converted, instead of in double
// rounded to half after every instruction. Everything else (Q, Kt, V, masks) keeps its dtype.
typedef struct View {
    PrimGraph pg;
    Tensor t[9];
    Prim p[8];
} View;

static const PrimGraph *view_open(const AttnSpec *a, View *v) {
    const PrimGraph *pg = a->pg;
    if (a->dt == DT_FLOAT)
        return pg;
    v->pg = *pg;
    v->pg.tensors = xmalloc(sizeof(Tensor *) * ((size_t)pg->n_tensors + 1));
    memcpy(v->pg.tensors, pg->tensors, sizeof(Tensor *) * (size_t)pg->n_tensors);
    v->pg.prims = xmalloc(sizeof(Prim *) * ((size_t)pg->n_prims + 1));
    memcpy(v->pg.prims, pg->prims, sizeof(Prim *) * (size_t)pg->n_prims);
    for (int i = 0; i <= a->n_pre; i++) {
        int t = i == 0 ? a->s : pg->prims[a->pre[i - 1]]->out[0];
        if (pg->tensors[t]->dtype != a->dt)
            continue;
        v->t[i] = *pg->tensors[t];
        v->t[i].dtype = DT_FLOAT;
        v->pg.tensors[t] = &v->t[i];
    }
    for (int i = 0; i < a->n_pre; i++) {
        const Prim *p = pg->prims[a->pre[i]];
        v->p[i] = *p;
        EwInstr *code = xmalloc(sizeof(EwInstr) * ((size_t)p->ew.n + 1));
        memcpy(code, p->ew.code, sizeof(EwInstr) * (size_t)p->ew.n);
        for (int j = 0; j < p->ew.n; j++) {
            if (code[j].dtype != a->dt)
                continue;
            code[j].dtype = DT_FLOAT;
            for (int k = 0; k < 3; k++)
                if (code[j].arg[k].src == EWS_IMM) {
                    uint16_t h = 0;
                    elem_set_f64(a->dt, &h, 0, code[j].arg[k].imm);
                    code[j].arg[k].imm = elem_get_f64(a->dt, &h, 0);
                }
        }
        v->p[i].ew.code = code;
        v->pg.prims[a->pre[i]] = &v->p[i];
    }
    return &v->pg;
}

static void view_close(const AttnSpec *a, View *v) {
    if (a->dt == DT_FLOAT)
        return;
    for (int i = 0; i < a->n_pre; i++)
        free(v->p[i].ew.code);
    free(v->pg.tensors);
    free(v->pg.prims);
}

static int emit_kernel(const Ana *x, const Geo *g, const TargetOptions *opt, const char *desc,
                       const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    const AttnSpec *a = &x->a;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    View view;
    AEm E = {a, fn, cexpr_create(view_open(a, &view), a->c, fn, &decls), false};
    cugen_cexpr_dialect(E.x, cugen_fast_math(opt));
    cexpr_set_reader(E.x, reader, &E);
    if (g->any)
        sb_puts(&decls, CP_HELPERS);
    if (g->any && g->hconv)
        sb_puts(&decls, a->dt == DT_FLOAT16 ? H2F_F16 : H2F_BF16);
    if (g->esz == 2 && ((g->qa && x->q.copy == 16) || (g->ka && (x->k.copy == 16 || g->kT)) ||
                        (g->va && x->v.copy == 16)))
        sb_puts(&decls, CP_HALF_HELPERS);
    if (g->mma)
        emit_tc_helpers(&decls, g->esz == 2);
    emit_head(&body, x, g, desc, fn);
    int rc = g->mma ? emit_tc(&E, &body, &decls, x, g, fn, e)
                    : emit_simt(&E, &body, &decls, x, g, fn, e);
    sb_puts(&body, "}\n\n");
    cexpr_free(E.x);
    view_close(a, &view);
    if (!rc) {
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s);
        if (launch) {
            memset(launch, 0, sizeof *launch);
            launch->grid[0] = (unsigned)(a->B * g->QT * g->S);
            launch->grid[1] = launch->grid[2] = 1;
            launch->block[0] = (unsigned)g->T;
            launch->block[1] = launch->block[2] = 1;
            launch->smem = (unsigned)smem_bytes(g);
        }
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

static const char *mma_name(int64_t mma) {
    return mma == CUA_MMA_TF32 ? "tf32" : mma == CUA_MMA_F16 ? "f16" : "bf16";
}

// (The desc of an unsplit tensor-core config names no split, nor one key warp: the profile
// databases' keys from before key splits stay valid.)
void cuattn_config_pack(const CuAttnConfig *ac, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_ATTN);
    k->p[CUA_BQ] = ac->bq;
    k->p[CUA_BK] = ac->bk;
    k->p[CUA_TM] = ac->tm;
    k->p[CUA_TN] = ac->tn;
    k->p[CUA_CP] = ac->cp;
    k->p[CUA_SPLIT] = ac->split;
    k->p[CUA_MMA] = ac->mma;
    k->p[CUA_QREG] = ac->qreg;
    k->p[CUA_KW] = ac->kw;
    if (ac->mma == CUA_MMA_SIMT) {
        snprintf(k->desc, sizeof k->desc, "cls=attn bq=%lld bk=%lld tm=%lld tn=%lld cp=%lld s=%lld",
                 (long long)ac->bq, (long long)ac->bk, (long long)ac->tm, (long long)ac->tn,
                 (long long)ac->cp, (long long)(ac->split > 1 ? ac->split : 1));
        return;
    }
    int w = snprintf(k->desc, sizeof k->desc, "cls=attn v=%s bq=%lld bk=%lld q=%s cp=%lld",
                     mma_name(ac->mma), (long long)ac->bq, (long long)ac->bk,
                     ac->qreg ? "reg" : "smem", (long long)ac->cp);
    if (ac->kw > 1 && w > 0 && (size_t)w < sizeof k->desc)
        w += snprintf(k->desc + w, sizeof k->desc - (size_t)w, " kw=%lld", (long long)ac->kw);
    if (ac->split > 1 && w > 0 && (size_t)w < sizeof k->desc)
        snprintf(k->desc + w, sizeof k->desc - (size_t)w, " s=%lld", (long long)ac->split);
}

bool cuattn_config_unpack(const KernelConfig *k, CuAttnConfig *ac) {
    const int64_t *p = k->p;
    *ac = (CuAttnConfig){.mma = p[CUA_MMA],
                         .bq = p[CUA_BQ],
                         .bk = p[CUA_BK],
                         .tm = p[CUA_TM],
                         .tn = p[CUA_TN],
                         .cp = p[CUA_CP],
                         .split = p[CUA_SPLIT],
                         .qreg = p[CUA_QREG],
                         .kw = p[CUA_KW]};
    return k->cls == CUCLS_ATTN;
}

// A SIMT config (split 1: none), packed into k.
static CuAttnConfig cfg_fill(KernelConfig *k, int64_t bq, int64_t bk, int64_t tm, int64_t tn,
                             int64_t cp, int64_t split) {
    CuAttnConfig ac = {
        .mma = CUA_MMA_SIMT, .bq = bq, .bk = bk, .tm = tm, .tn = tn, .cp = cp, .split = split};
    cuattn_config_pack(&ac, k);
    return ac;
}

// A tensor-core config (no split and one key warp written as 0), packed into k.
static CuAttnConfig cfg_fill_tc(KernelConfig *k, int64_t mma, int64_t bq, int64_t bk, int64_t qreg,
                                int64_t cp, int64_t kw, int64_t split) {
    CuAttnConfig ac = {.mma = mma,
                       .bq = bq,
                       .bk = bk,
                       .cp = cp,
                       .split = split > 1 ? split : 0,
                       .qreg = qreg,
                       .kw = kw > 1 ? kw : 0};
    cuattn_config_pack(&ac, k);
    return ac;
}

// The config every attention fits: 4 queries, 32 keys, 64 threads, single buffers.
static CuAttnConfig smallest(KernelConfig *k) {
    return cfg_fill(k, 4, 32, 1, 2, 0, 1);
}

bool cugen_attn_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    Ana x;
    if (!analyse(pg, c, NULL, &x) || c->n_inputs > ORCH_CUDA_MAX_IN || x.a.rank - 2 > 8)
        return false;
    // O's rows written into a merged tensor keep the vector stores aligned (float4, or two or
    // four halves: every row and head offset a multiple of 4 elements).
    for (int d = 0; x.a.out_layout >= 0 && d + 1 < x.a.rank; d++)
        if (x.a.ostride[d] % 4)
            return false;
    KernelConfig k;
    CuAttnConfig ac = smallest(&k);
    Geo g;
    // The smallest config fits the opt-in shared memory every GPU orch targets has.
    if (!geometry(&x, &ac, &g) || smem_bytes(&g) > CUDA_ARCH.smem_optin_any)
        return false;
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&x, &g, opt, k.desc, "orch_dry", &s, NULL, &e);
    sb_free(&s);
    return rc == ST_OK;
}

// Blocks of config g an SM holds at once: its shared memory (and 1 KiB the runtime reserves a
// block), threads, registers (allocated in units of 8 a thread) and the 32-block limit; < 1 where
// none fits.
static double blocks_per_sm(const Geo *g, const CuDevice *d) {
    return cudev_blocks_per_sm(d, g->T, cudev_regs_alloc(ORCH_MIN(g->regs, CUDA_ARCH.max_regs)),
                               smem_bytes(g));
}

// The device model, per block: warp instructions (the products' FMAs, the softmax per score and
// per row, the staging, barriers) issued by the SM's schedulers, at full rate once the resident
// warps times the register tile's independent FMAs (TM x TN) reach CUDA_ATTN_MODEL.fma_chains,
// in proportion below; plus lds_cycles SM cycles per warp-wide float4 shared-memory read of the
// products (Q, K, P and V rows; fitted on an H100, see cost_models.h). Blocks spread over the SMs
// (the busiest SM decides); each key tile's global loads stall a block staging them
// synchronously unless other resident blocks cover them (cp.async copies run under the previous
// tile's products); K and V read once per query tile through L2, Q and O once from DRAM; key
// splits pay for their partials.
static double score(const Ana *x, const Geo *g, const CuDevice *d) {
    const CudaAttnModel *cm = &CUDA_ATTN_MODEL;
    const AttnSpec *a = &x->a;
    double TM = (double)g->TM, TN = (double)g->TN, U = (double)g->U, T = (double)g->T;
    double BK = (double)g->BK, D4 = (double)g->D4, CG = (double)g->CG, S = (double)g->S;
    // Key tiles per block: its split's share of those the causal bound keeps.
    double tiles = (double)g->TPS * kept_tiles(x, g->BQ, g->BK) /
                   (double)((a->N + g->BK - 1) / g->BK);
    // (Half tiles: converted element loads, or cexpr with a conversion in software.)
    double stage_k = BK * D4 / T *
                     (!g->ka ? (g->hconv ? cm->stage_cexpr_half : cm->stage_cexpr)
                      : x->k.copy == 16 && !g->hconv ? cm->stage_cp16
                                                     : cm->stage_copy);
    double stage_v = BK * (double)g->DVq / T *
                     (!g->va ? (g->hconv ? cm->stage_cexpr_half : cm->stage_cexpr)
                      : x->v.copy == 16 && !g->hconv ? cm->stage_cp16
                                                     : cm->stage_copy);
    // Per thread and key tile: FMAs and other instructions, and the float4 shared-memory reads
    // of the two products (Q and K rows, P and V rows).
    double lds = D4 / 4 * (TM + TN) + BK / 4 * (TM + 4 * U);
    double per_tile = D4 * TM * TN + BK * 4 * TM * U + TM * TN * (16 + 6.0 * a->n_pre) +
                      TM * (2 * log2(CG) + 14 + 4 * U) + stage_k + stage_v + 3 * 10;
    double per_block = tiles * per_tile + (double)g->BQ * D4 / T * 12 + TM * U * 10 + 60;
    if (S > 1) // publishing the partials; the merge in the last block
        per_block += TM * (U * 8 + 10) + TM * S * (U * 12 + 12);
    double warps = T / 32;
    double block_instr = per_block * warps;
    double block_lds = tiles * lds * warps;
    double bps = blocks_per_sm(g, d);
    if (bps < 1)
        return INFINITY;
    double blocks = (double)a->B * (double)g->QT * S;
    double per_sm = cudev_per_sm(d, blocks);
    double resident = fmin(bps, per_sm);
    double rounds = ceil(per_sm / resident);
    double eff = fmin(1.0, resident * warps * TM * TN / cm->fma_chains);
    double stalls = (g->ka && g->va && !g->hconv ? 1 : tiles) * cm->tile_stall_cycles / resident;
    double cycles =
        rounds *
        (resident * (block_instr / (CUDA_ARCH.schedulers * eff) + cm->lds_cycles * block_lds) +
         stalls);
    double t_comp = cycles / d->clock;
    double bw = d->dram_bw;
    const double isz = (double)x->isz; // bytes of Q, K, V and O elements
    double dram = isz * (double)a->B *
                  ((double)a->M * (double)(a->D + a->Dv) + (double)a->N * (double)(a->D + a->Dv));
    double l2 = isz * blocks / S * (double)a->N * (double)(a->D + a->Dv); // K, V per query tile
    // A split's partials cross L2 twice, after a fence and an atomic.
    double t_split =
        S > 1 ? cm->split_sync_s + 8.0 * blocks / S * (double)g->BQ * (double)a->Dv * S / bw : 0;
    return fmax(t_comp, fmax(dram / (cm->dram_eff * bw), l2 / (cm->l2_over_dram * bw))) + t_split +
           CUDA_ARCH.launch_s;
}

// The tensor-core kernel's model, per warp and key tile: the mma issue cycles of one SM
// sub-partition (CUDA_ATTN_MODEL.mma_cycles_*) beside the other instructions (fragment loads and
// roundings, the chain and the softmax per score, the rescale of O, the tile's staging), the two
// overlapping across the resident warps of a scheduler but not within one warp; blocks spread over
// the SMs as in score(); DRAM and L2 traffic as there.
static double score_tc(const Ana *x, const Geo *g, const CuDevice *d) {
    const CudaAttnModel *cm = &CUDA_ATTN_MODEL;
    const AttnSpec *a = &x->a;
    bool half = g->mma != CUA_MMA_TF32;
    // NT and KQ: a warp's share of a key tile (all of it unless key warps split it).
    double W = (double)g->W, T = (double)g->T, BK = (double)g->BK, KS = (double)g->KS,
           NT = (double)g->NTW, NV = (double)g->NV, KQ = (double)g->KQW, KW = (double)g->KW;
    double S = (double)g->S;
    // Key tiles per block: its split's share of those the causal bound keeps.
    double tiles =
        (double)g->TPS * kept_tiles(x, g->BQ, g->BK) / (double)((a->N + g->BK - 1) / g->BK);
    double mmas = KS * NT + KQ * NV;
    double cyc = d->cc_major >= 9 ? cm->mma_cycles_sm90 : cm->mma_cycles_sm80;
    double stage_k = BK * (double)g->D4 / T *
                     (!g->ka                     ? cm->stage_cexpr
                      : x->k.copy == 16 || g->kT ? cm->stage_cp16
                                                 : cm->stage_copy);
    double stage_v = BK * (double)g->DVq / T *
                     (!g->va            ? cm->stage_cexpr
                      : x->v.copy == 16 ? cm->stage_cp16
                                        : cm->stage_copy);
    // Fragments of half tiles are plain 32-bit reads (V's: two 16-bit reads paired).
    bool ht = g->esz == 2;
    double alu = (g->qreg ? 0
                          : KS * (ht     ? 4
                                  : half ? 8
                                         : 6)) +
                 KS * NT *
                     (ht     ? 2
                      : half ? 4
                             : 3) +
                 KQ * NV * (half ? 6 : 4) + KQ * 4 + NT * 4 * (10 + 6.0 * a->n_pre) +
                 2 * (2 * NT + 16) + NV * 4 + stage_k + stage_v + 40 + mmas;
    double tc = mmas * cyc;
    double bps = blocks_per_sm(g, d);
    if (bps < 1)
        return INFINITY;
    double blocks = (double)a->B * (double)g->QT * S;
    double per_sm = cudev_per_sm(d, blocks);
    double resident = fmin(bps, per_sm);
    double rounds = ceil(per_sm / resident);
    double wps = resident * W * KW / CUDA_ARCH.schedulers; // warps per scheduler
    // One tile of every resident warp of a scheduler; a lone warp waits on its own latencies
    // (shuffles, exponentials, the mma results).
    double per_tile = fmax(wps * fmax(tc, alu), tc + alu + cm->tile_latency_cycles);
    double per_block = (double)g->BQ * (double)g->D4 / T * 12 + NV * 12 + 80;
    if (KW > 1) // the key warps' merge through shared memory
        per_block += (KW - 1) * (NV * 10 + 20) + 100;
    if (S > 1) // publishing the partials; the merge in the last block
        per_block += NV * 8 + 10 + S * (NV * 12 + 12);
    double stalls = (g->ka && g->va ? 1 : tiles) * cm->tile_stall_cycles / resident;
    double cycles = rounds * (tiles * per_tile + resident * per_block + stalls);
    double t_comp = cycles / d->clock;
    double bw = d->dram_bw;
    const double isz = (double)x->isz;
    double dram = isz * (double)a->B *
                  ((double)a->M * (double)(a->D + a->Dv) + (double)a->N * (double)(a->D + a->Dv));
    double l2 = isz * blocks * tiles * BK * (double)(a->D + a->Dv);
    // A split's partials cross L2 twice, after a fence and an atomic; the last block's merge
    // waits on them.
    double t_split =
        S > 1 ? cm->tc_split_sync_s + 8.0 * blocks * (double)g->BQ * (double)a->Dv / bw : 0;
    return fmax(t_comp, fmax(dram / (cm->dram_eff * bw), l2 / (cm->l2_over_dram * bw))) + t_split +
           CUDA_ARCH.launch_s;
}

// The tensor-core arithmetic the precision (opt) allows on hw (sm_80 and newer): 0 for none.
static int64_t tc_mma(const CudaHw *hw, const TargetOptions *opt, DType dt) {
    if (!hw || hw->cc_major < 8)
        return CUA_MMA_SIMT;
    switch (cugen_prec_of(opt, dt)) {
    case PREC_TF32: return CUA_MMA_TF32;
    case PREC_FP16: return CUA_MMA_F16;
    case PREC_BF16: return CUA_MMA_BF16;
    default: return CUA_MMA_SIMT;
    }
}

int cugen_attn_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                       const TargetOptions *opt, KernelConfig *out, int k) {
    Ana x;
    if (k < 1 || !analyse(pg, c, hw, &x))
        return 0;
    const AttnSpec *a = &x.a;
    const CudaAttnModel *cm = &CUDA_ATTN_MODEL;
    const CuDevice dev = cudev_of(hw), *d = &dev;
    int64_t optin = d->smem_optin, sms = d->sms;
    static const int64_t bqs[] = {4, 8, 16, 32, 64, 128}, bks[] = {32, 64, 128},
                         tms[] = {1, 2, 4, 8}, tns[] = {1, 2, 4, 8};
    // Query tiles of 48, 80 and 96 rows too: with 12 heads of 512 tokens, 48 makes 132 blocks,
    // one per H100 SM, where 64 leaves 36 SMs idle.
    static const int64_t tc_bqs[] = {16, 32, 48, 64, 80, 96, 128}, tc_bks[] = {32, 64, 128};
    KernelConfig all[2 * ORCH_COUNT(bqs) * ORCH_COUNT(bks) * ORCH_COUNT(tms) * ORCH_COUNT(tns) +
                     2 * ORCH_COUNT(tc_bqs) * ORCH_COUNT(tc_bks) * 15 + 1];
    int n = 0;
    for (size_t i = 0; i < ORCH_COUNT(bqs); i++)
        for (size_t j = 0; j < ORCH_COUNT(bks); j++)
            for (size_t q = 0; q < ORCH_COUNT(tms); q++)
                for (size_t w = 0; w < ORCH_COUNT(tns); w++) {
                    int64_t bq = bqs[i], bk = bks[j];
                    // Tiles much larger than the attention only add idle rows and keys.
                    if ((bq > 4 && bq / 2 >= a->M) || (bk > 32 && bk / 2 >= a->N))
                        continue;
                    // cp.async double buffers where they fit, else single buffers.
                    for (int cp = 1; cp >= 0; cp--) {
                        KernelConfig kc;
                        CuAttnConfig ac = cfg_fill(&kc, bq, bk, tms[q], tns[w], cp, 1);
                        Geo g;
                        if (!geometry(&x, &ac, &g) || g.T < cm->simt_min_threads ||
                            g.T > cm->simt_max_threads || g.CG < cm->simt_min_cg ||
                            g.regs > cm->simt_max_regs || smem_bytes(&g) > optin)
                            continue;
                        kc.score = score(&x, &g, d);
                        if (!isfinite(kc.score))
                            continue;
                        all[n++] = kc;
                        // Where the query tiles leave SMs idle, also the best key split.
                        KernelConfig best = kc;
                        int64_t best_split = 1;
                        for (int64_t sp = 2; sp <= 32 && a->B * g.QT < 2 * sms; sp *= 2) {
                            KernelConfig ks;
                            CuAttnConfig as = cfg_fill(&ks, bq, bk, tms[q], tns[w], cp, sp);
                            Geo gs;
                            if (!geometry(&x, &as, &gs))
                                continue;
                            ks.score = score(&x, &gs, d);
                            if (ks.score < best.score) {
                                best = ks;
                                best_split = sp;
                            }
                        }
                        if (best_split > 1)
                            all[n++] = best;
                        break;
                    }
                }
    // Tensor cores where the precision allows them, beside the SIMT configs: the Q fragments in
    // registers where they fit (else re-read from the staged tile), cp.async double buffers
    // where they fit.
    int64_t mma = tc_mma(hw, opt, a->dt);
    for (size_t i = 0; mma && i < ORCH_COUNT(tc_bqs); i++)
        for (size_t j = 0; j < ORCH_COUNT(tc_bks); j++) {
            int64_t bq = tc_bqs[i], bk = tc_bks[j];
            if ((bq > 16 && bq / 2 >= a->M) || (bk > 32 && bk / 2 >= a->N))
                continue;
            for (int qreg = 1; qreg >= 0; qreg--) {
                bool placed = false;
                for (int cp = 1; cp >= 0 && !placed; cp--) {
                    KernelConfig kc;
                    CuAttnConfig ac = cfg_fill_tc(&kc, mma, bq, bk, qreg, cp, 1, 1);
                    Geo g;
                    if (!geometry_tc(&x, &ac, &g) || g.regs > cm->tc_max_regs ||
                        smem_bytes(&g) > optin)
                        continue;
                    kc.score = score_tc(&x, &g, d);
                    if (!isfinite(kc.score))
                        continue;
                    all[n++] = kc;
                    placed = true;
                    // Where the query tiles leave SMs idle, also 2 and 4 key warps per 16 rows
                    // and every key split (2 .. 16) of each: the few tensor-core tiles leave
                    // room to measure them all.
                    for (int64_t kw = 1; kw <= 4 && a->B * g.QT < 2 * sms; kw *= 2)
                        for (int64_t sp = kw > 1 ? 1 : 2; sp <= 16; sp *= 2) {
                            KernelConfig ks;
                            CuAttnConfig as = cfg_fill_tc(&ks, mma, bq, bk, qreg, cp, kw, sp);
                            Geo gs;
                            if (!geometry_tc(&x, &as, &gs) || smem_bytes(&gs) > optin)
                                continue;
                            ks.score = score_tc(&x, &gs, d);
                            if (isfinite(ks.score) && n < (int)ORCH_COUNT(all))
                                all[n++] = ks;
                        }
                }
                // Q in registers where they fit; from shared memory only where they do not.
                if (placed && qreg)
                    break;
            }
        }
    if (n == 0) { // the smallest config always fits (cugen_attn_supports)
        CuAttnConfig ac = smallest(&all[0]);
        Geo g;
        if (!geometry(&x, &ac, &g))
            return 0;
        all[0].score = score(&x, &g, d);
        n = 1;
    }
    return cgen_sort_configs(all, n, out, k);
}

int cugen_attn_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                    const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                    CudaLaunch *launch, Err *e) {
    Ana x;
    if (!analyse(pg, c, hw, &x))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA attention kernel %s: candidate %d is not a fused attention", fn,
                       c->id);
    Geo g;
    CuAttnConfig ac;
    bool ours = cuattn_config_unpack(cfg, &ac);
    bool tc = ac.mma != CUA_MMA_SIMT;
    if (!ours || !(tc ? geometry_tc(&x, &ac, &g) : geometry(&x, &ac, &g)))
        return err_set(e, ST_USAGE, "CUDA attention kernel %s: bad config '%s'", fn, cfg->desc);
    if (tc && hw && hw->cc_major > 0 && hw->cc_major < 8)
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA attention kernel %s: config '%s' needs tensor cores of sm_80 or "
                       "later (%s is %s)",
                       fn, cfg->desc, hw->name, hw->arch);
    if (hw && hw->smem_per_block_optin > 0 && smem_bytes(&g) > hw->smem_per_block_optin)
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA attention kernel %s: config '%s' needs %lld bytes of shared memory, "
                       "more than %s has",
                       fn, cfg->desc, (long long)smem_bytes(&g), hw->name);
    return emit_kernel(&x, &g, opt, cfg->desc, fn, src, launch, e);
}
