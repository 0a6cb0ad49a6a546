// The CUDA target's fused attention kernel (cugen_attn.h; issue 8), flash-style in float32.
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
// Needs: cugen_prelude() in the translation unit. Guarantees: the candidate's output as
// prim_interp.c computes it, up to float32 reassociation (no TF32 or half precision).
#include "cugen_attn.h"

#include "../../candidates/attention.h"
#include "../../fission/index_map.h"
#include "../c/cgen.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- how Q, Kt and V are read ----

// A tensor whose value at index i is kernel input `pos` at base + sum_d stride[d] * i[d]
// (stride 0 on unit dims); copy: the bytes a cp.async moves when its tiles go that way (configs
// with cp=1): 16 where the tile's rows are 16-byte aligned runs, else 4; 0: not affine.
typedef struct Load {
    bool affine;
    int copy;
    int pos;
    int64_t base, stride[ORCH_MAX_RANK];
} Load;

typedef struct Ana {
    AttnSpec a;
    Load q, k, v; // Q, Kt, V
} Ana;

static int64_t dense_offset(const Tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++)
        off = off * t->dims[d] + idx[d];
    return off;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Offset of the source element of t's element idx under the LAYOUT p (-1: padding).
static int64_t layout_offset(const Prim *p, const Tensor *T, const Tensor *src, const int64_t *idx) {
    int64_t in[ORCH_MAX_RANK];
    return layout_map_index(&p->lay, T->rank, T->dims, idx, in) ? dense_offset(src, in) : -1;
}

// Fills L when tensor t is a float kernel input, or the output of a member LAYOUT of transposes
// and reshapes over one, whose map is affine: checked at every point of small boxes, else on
// every axis line through the origin and the far corner (at most 512 points each) and at 512
// pseudo-random points (a reshape's split coordinate (f / S) % n deviates from any affine form on
// a large part of the box).
static void load_of(const PrimGraph *pg, const Candidate *c, int t, Load *L) {
    memset(L, 0, sizeof *L);
    const Tensor *T = pg->tensors[t];
    int r = T->rank;
    if (T->dtype != DT_FLOAT)
        return;
    int pos = cgen_input_pos(c, t);
    if (pos >= 0) {
        int64_t s = 1;
        for (int d = r - 1; d >= 0; d--) {
            L->stride[d] = T->dims[d] == 1 ? 0 : s;
            s *= T->dims[d];
        }
        L->pos = pos;
        L->affine = true;
        return;
    }
    const Prim *p = NULL;
    for (int i = 0; i < c->n_prims && !p; i++) {
        const Prim *q = pg->prims[c->prims[i]];
        if (q->n_out == 1 && q->out[0] == t)
            p = q;
    }
    if (!p || p->kind != PRIM_LAYOUT || p->lay.concat || p->n_in != 1 ||
        cgen_input_pos(c, p->in[0]) < 0 || pg->tensors[p->in[0]]->dtype != DT_FLOAT)
        return;
    for (int st = 0; st < p->lay.n_stages; st++)
        if (p->lay.stages[st].kind != LS_TRANSPOSE && p->lay.stages[st].kind != LS_RESHAPE)
            return;
    const Tensor *src = pg->tensors[p->in[0]];
    int64_t idx[ORCH_MAX_RANK] = {0};
    L->base = layout_offset(p, T, src, idx);
    if (L->base < 0)
        return;
    for (int d = 0; d < r; d++) {
        if (T->dims[d] == 1)
            continue;
        idx[d] = 1;
        L->stride[d] = layout_offset(p, T, src, idx) - L->base;
        idx[d] = 0;
    }
#define AFFINE_AT(ix)                                                                              \
    do {                                                                                           \
        int64_t want = L->base;                                                                    \
        for (int q = 0; q < r; q++)                                                                \
            want += L->stride[q] * (ix)[q];                                                        \
        if (layout_offset(p, T, src, (ix)) != want)                                                \
            return;                                                                                \
    } while (0)
    int64_t n = tensor_numel(T);
    if (n <= 4096) {
        for (int64_t i = 0; i < n; i++) {
            int64_t f = i;
            for (int q = r - 1; q >= 0; q--) {
                idx[q] = f % T->dims[q];
                f /= T->dims[q];
            }
            AFFINE_AT(idx);
        }
    } else {
        for (int corner = 0; corner < 2; corner++)
            for (int d = 0; d < r; d++) {
                for (int q = 0; q < r; q++)
                    idx[q] = corner ? T->dims[q] - 1 : 0;
                int64_t step = (T->dims[d] + 511) / 512;
                for (int64_t v = 0; v < T->dims[d]; v += step) {
                    idx[d] = v;
                    AFFINE_AT(idx);
                }
            }
        uint64_t seed = 0x5eedull;
        for (int i = 0; i < 512; i++) {
            for (int q = 0; q < r; q++)
                idx[q] = (int64_t)(splitmix(&seed) % (uint64_t)T->dims[q]);
            AFFINE_AT(idx);
        }
    }
#undef AFFINE_AT
    L->pos = cgen_input_pos(c, p->in[0]);
    L->affine = true;
}

// The cp.async width for an affine load of a tile with columns along `col`, rows along `row`
// and `cols` columns: 16 bytes where the columns are unit-stride and every row start 16-byte
// aligned, else 4 bytes an element.
static int copy_width(const Load *L, int rank, int row, int col, int64_t cols) {
    if (!L->affine)
        return 0;
    if (L->stride[col] != 1 || cols % 4 || L->base % 4 || L->stride[row] % 4)
        return 4;
    for (int d = 0; d + 2 < rank; d++)
        if (L->stride[d] % 4)
            return 4;
    return 16;
}

static bool analyse(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, Ana *x) {
    memset(x, 0, sizeof *x);
    if (!attn_analyse(pg, c, &x->a))
        return false;
    const AttnSpec *a = &x->a;
    int r = a->rank;
    load_of(pg, c, a->q, &x->q);
    load_of(pg, c, a->kt, &x->k);
    load_of(pg, c, a->v, &x->v);
    bool cp = !hw || hw->cc_major >= 8; // cp.async: sm_80 and newer
    x->q.copy = cp ? copy_width(&x->q, r, r - 2, r - 1, a->D) : 0;
    x->k.copy = cp ? copy_width(&x->k, r, r - 1, r - 2, a->D) : 0;
    x->v.copy = cp ? copy_width(&x->v, r, r - 2, r - 1, a->Dv) : 0;
    return true;
}

// ---- geometry ----

// The largest split workspace, in floats (16 MiB).
#define ATTN_SPLIT_MAX_WS (4.0 * 1024 * 1024)

typedef struct Geo {
    int64_t BQ, BK, TM, TN; // the config
    int64_t CG, RG, T;      // threads per row group, row groups, threads
    int64_t U;              // value column quads per thread
    int64_t D4, DVq;        // D rounded up to 4; the staged V columns (U * CG * 4)
    int64_t Dp, DVp, BKp;   // row strides (floats) of Qs/Ks, Vs, Ps
    int64_t QT;             // query tiles
    int64_t S, TPS;         // key splits; key tiles per split
    int64_t off_k, off_v, off_p, floats; // offsets of Ks, Vs, Ps in the shared array; its size
    int64_t regs;           // registers per thread, estimated
    bool qa, ka, va, any;   // Q, Kt, V tiles by cp.async (config cp=1 where affine); any
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
static bool geometry(const Ana *x, const int64_t *p, Geo *g) {
    const AttnSpec *a = &x->a;
    memset(g, 0, sizeof *g);
    g->BQ = p[CUA_BQ];
    g->BK = p[CUA_BK];
    g->TM = p[CUA_TM];
    g->TN = p[CUA_TN];
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
    g->S = p[CUA_SPLIT] > 1 ? p[CUA_SPLIT] : 1;
    g->TPS = (tiles + g->S - 1) / g->S;
    // Every split non-empty; the workspace (O, max and sum per split and row) bounded.
    if (g->S > 1 && ((g->S - 1) * g->TPS >= tiles ||
                     (double)g->S * (double)a->B * (double)a->M * (double)(a->Dv + 2) >
                         ATTN_SPLIT_MAX_WS))
        return false;
    bool cp = p[CUA_CP] != 0;
    g->qa = cp && x->q.copy > 0;
    g->ka = cp && x->k.copy > 0;
    g->va = cp && x->v.copy > 0;
    g->any = g->qa || g->ka || g->va;
    if (cp && !g->any)
        return false; // the same kernel as cp=0
    g->off_k = g->BQ * g->Dp;
    g->off_v = g->off_k + (g->ka ? 2 : 1) * g->BK * g->Dp;
    g->off_p = g->off_v + (g->va ? 2 : 1) * g->BK * g->DVp;
    g->floats = g->off_p + g->BQ * g->BKp;
    // Scores, accumulators, the float4 operands of both products, running max and sum, and
    // about 40 for addresses, indices and the softmax's temporaries.
    g->regs = g->TM * g->TN + 4 * g->TM * g->U + 4 * g->TM + 4 * g->TN + 4 * g->U + 2 * g->TM + 40;
    return (double)a->B * (double)g->QT * (double)g->S < 2147483647.0;
}

static int64_t smem_bytes(const Geo *g) {
    return g->floats * 4;
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
// `rows_fast` consecutive threads take consecutive rows, in 8 x 4 groups.
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
    sb_line(s, 2, "%s[r * %lld + cc] = val;\n", dst, (long long)P);
    sb_line(s, 1, "}\n");
    return ST_OK;
}

// The block's start in an affine load's input: `const float *NAME = in<pos> + offset of the
// block's lead coordinates`.
static void emit_load_base(StrBuf *s, const AttnSpec *a, const Load *L, const char *name) {
    sb_line(s, 1, "const float *%s = in%d + %lld", name, L->pos, (long long)L->base);
    for (int d = 0; d + 2 < a->rank; d++)
        if (L->stride[d])
            sb_printf(s, " + a_l%d * %lld", d, (long long)L->stride[d]);
    sb_puts(s, ";\n");
}

// cp.async copies of a tile of the affine load L: rows r < R (global row `base` + r along axis
// `row`, valid below rlim), columns cc < C (axis `col`, valid below clim) from src (the block's
// start in the input) into dst[r * P + cc]; invalid elements are zero-filled. 16-byte copies
// take a column quad a thread; 4-byte ones walk the unit-stride axis with consecutive threads
// (in 8 x 4 groups when that is the row axis, so the shared-memory stores stay conflict-free).
static void emit_copy(StrBuf *s, int ind, const Geo *g, const Load *L, int row, int col,
                      const char *dst, int64_t P, const char *src, int64_t R, int64_t C,
                      const char *base, int64_t rlim, int64_t clim) {
    long long rs = L->stride[row], cs = L->stride[col];
    if (L->copy == 16) {
        int64_t C4 = C / 4;
        sb_line(s, ind, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n",
                (long long)(R * C4), (long long)g->T);
        sb_line(s, ind + 1, "const int r = q / %lld, c4 = q - r * %lld;\n", (long long)C4,
                (long long)C4);
        sb_line(s, ind + 1, "const int64_t g_r = %s + r;\n", base);
        if (clim < C)
            sb_line(s, ind + 1, "const bool ok = g_r < %lld && c4 * 4 < %lld;\n",
                    (long long)rlim, (long long)clim);
        else
            sb_line(s, ind + 1, "const bool ok = g_r < %lld;\n", (long long)rlim);
        sb_line(s, ind + 1, "orch_attn_cp16(%s + r * %lld + c4 * 4, %s + (ok ? g_r * %lld + c4 * "
                "4 : 0), ok);\n", dst, (long long)P, src, rs);
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
    sb_line(s, ind + 1, "orch_attn_cp4(%s + r * %lld + cc, %s + (ok ? g_r * %lld + (int64_t)cc * "
            "%lld : 0), ok);\n", dst, (long long)P, src, rs, cs);
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

static const char XYZW[] = "xyzw";

// cp.async copies of the async tiles of Kt and V for the key tile from global key `n0` into
// buffer `buf` (C expressions).
static void emit_issue(StrBuf *s, int ind, const Ana *x, const Geo *g, const char *n0,
                       const char *buf) {
    const AttnSpec *a = &x->a;
    int r = a->rank;
    char dst[96];
    if (g->ka) {
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
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "__shared__ int last_;\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "if (tid == 0) last_ = atomicAdd(&%s_cnt[tile_], 1u) == %lldu;\n", fn, S - 1);
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "if (!last_) return;\n");
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

static int emit_kernel(const Ana *x, const Geo *g, const char *desc, const char *fn,
                       StrBuf *src, CudaLaunch *launch, Err *e) {
    const AttnSpec *a = &x->a;
    const PrimGraph *pg = a->pg;
    const Candidate *c = a->c;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    AEm E = {a, fn, cexpr_create(pg, c, fn, &decls), false};
    cexpr_set_cuda(E.x, true);
    cexpr_set_reader(E.x, reader, &E);
    StrBuf *s = &body;
    const long long BQ = g->BQ, BK = g->BK, TM = g->TM, TN = g->TN, CG = g->CG, RG = g->RG,
                    U = g->U, Dp = g->Dp, DVp = g->DVp, BKp = g->BKp, M = a->M, N = a->N,
                    Dv = a->Dv;
    int r = a->rank;
    bool kv_async = g->ka || g->va;
    if (g->any)
        sb_puts(&decls, CP_HELPERS);
    sb_printf(s, "// %s: %s (cp.async: Q %d, Kt %d, V %d bytes)\n", fn, desc,
              g->qa ? x->q.copy : 0, g->ka ? x->k.copy : 0, g->va ? x->v.copy : 0);
    sb_printf(s, "ORCH_KERNEL void __launch_bounds__(%lld) %s(OrchArgs a) {\n", (long long)g->T,
              fn);
    for (int j = 0; j < c->n_inputs; j++) {
        const char *ct = cgen_ctype(pg->tensors[c->inputs[j]]->dtype);
        sb_line(s, 1, "const %s *__restrict__ in%d = (const %s *)a.in[%d];\n", ct, j, ct, j);
        sb_line(s, 1, "(void)in%d;\n", j);
    }
    sb_line(s, 1, "float *__restrict__ o = (float *)a.out;\n");
    sb_line(s, 1, "extern __shared__ __align__(16) float orch_attn_sm[];\n");
    sb_line(s, 1, "float *Qs = orch_attn_sm, *Ks = orch_attn_sm + %lld;\n",
            (long long)g->off_k);
    sb_line(s, 1, "float *Vs = orch_attn_sm + %lld, *Ps = orch_attn_sm + %lld;\n",
            (long long)g->off_v, (long long)g->off_p);
    sb_line(s, 1, "const int tid = threadIdx.x, c = tid %% %lld, rg = tid / %lld;\n", CG, CG);
    // Block: (batch index, query tile[, key split]), the split fastest.
    if (g->S > 1) {
        sb_line(s, 1, "const int64_t tile_ = blockIdx.x / %lld;\n", (long long)g->S);
        sb_line(s, 1, "const int ks = (int)(blockIdx.x - tile_ * %lld);\n", (long long)g->S);
    } else {
        sb_line(s, 1, "const int64_t tile_ = blockIdx.x;\n");
        sb_line(s, 1, "const int ks = 0;\n");
    }
    sb_line(s, 1, "const int64_t bidx = tile_ / %lld;\n", (long long)g->QT);
    sb_line(s, 1, "const int64_t q0 = (tile_ - bidx * %lld) * %lld;\n", (long long)g->QT, BQ);
    // The block's keys.
    sb_line(s, 1, "const int64_t kbeg = (int64_t)ks * %lld;\n", (long long)(g->TPS * g->BK));
    sb_line(s, 1, "const int64_t kend = ORCH_MIN_I64(kbeg + %lld, (int64_t)%lld);\n",
            (long long)(g->TPS * g->BK), (long long)a->N);
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
    int rc = ST_OK;
    // The query tile, and the first key tile's async copies.
    if (g->qa) {
        emit_load_base(s, a, &x->q, "g_q");
        emit_copy(s, 1, g, &x->q, r - 2, r - 1, "Qs", g->Dp, "g_q", g->BQ, g->D4, "q0", a->M,
                  a->D);
    } else {
        bool rows_fast = x->q.affine && x->q.stride[r - 1] != 1 && x->q.stride[r - 2] == 1;
        rc = emit_stage(&E, s, g, a->q, false, "Qs", g->Dp, g->BQ, g->D4, "q0", a->M, a->D,
                        rows_fast, e);
    }
    if (kv_async)
        emit_issue(s, 1, x, g, "kbeg", "0");
    if (g->any)
        sb_line(s, 1, "orch_attn_cp_commit();\n");
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
    sb_line(s, 2, "const int buf = (int)(((n0 - kbeg) / %lld) & 1);\n", BK);
    sb_line(s, 2, "(void)buf;\n");
    // This tile's copies have landed, and every thread is done with the previous tile's Ks, Vs
    // and Ps: the next tile's copies may go into the other buffer.
    if (g->any)
        sb_line(s, 2, "orch_attn_cp_wait();\n");
    sb_line(s, 2, "__syncthreads();\n");
    if (kv_async) {
        char next[48];
        snprintf(next, sizeof next, "n0 + %lld", BK);
        sb_line(s, 2, "if (n0 + %lld < kend) {\n", BK);
        emit_issue(s, 3, x, g, next, "buf ^ 1");
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "orch_attn_cp_commit();\n");
    }
    // Keys as rows of Ks: Kt's column axis (r - 1) is the tile's row axis.
    if (!g->ka && !rc) {
        bool rows_fast = x->k.affine && x->k.stride[r - 2] != 1 && x->k.stride[r - 1] == 1;
        rc = emit_stage(&E, s, g, a->kt, true, "Ks", g->Dp, g->BK, g->D4, "n0", a->N, a->D,
                        rows_fast, e);
    }
    if (!g->va && !rc) {
        bool rows_fast = x->v.affine && x->v.stride[r - 1] != 1 && x->v.stride[r - 2] == 1;
        rc = emit_stage(&E, s, g, a->v, false, "Vs", g->DVp, g->BK, g->DVq, "n0", a->N, a->Dv,
                        rows_fast, e);
    }
    if (!g->ka || !g->va)
        sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "const float *Kb = Ks + buf * %lld, *Vb = Vs + buf * %lld;\n",
            g->ka ? BK * Dp : 0LL, g->va ? BK * DVp : 0LL);
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
                    E.in_score = true;
                    rc = cexpr_value(E.x, a->sp, ix, s, 3, v, sizeof v, e);
                    E.in_score = false;
                    cexpr_forget(E.x);
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
    // The row sums across the row group.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int w = %lld; w > 0; w >>= 1) l_[i] += __shfl_xor_sync(ORCH_FULL_MASK, "
            "l_[i], w);\n", CG / 2);
    sb_line(s, 1, "}\n");
    if (g->S > 1)
        emit_merge(s, &decls, x, g, fn);
    // O / l, rows below M, columns below Dv.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %lld; i++) {\n", TM);
    sb_line(s, 2, "const int64_t row = q0 + rg + i * %lld;\n", RG);
    sb_line(s, 2, "if (row >= %lld) continue;\n", M);
    sb_line(s, 2, "float *orow = o + (bidx * %lld + row) * %lld;\n", M, Dv);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int u = 0; u < %lld; u++) {\n", U);
    sb_line(s, 3, "const int col = (c + u * %lld) * 4;\n", CG);
    sb_line(s, 3, "float4 r4;\n");
    for (int w = 0; w < 4; w++) {
        sb_line(s, 3, "r4.%c = acc[i][u].%c / l_[i];\n", XYZW[w], XYZW[w]);
        if (a->nan_to_zero) // a row of -inf scores: P (and so O) is 0, as the export says
            sb_line(s, 3, "if (isnan(r4.%c)) r4.%c = 0.0f;\n", XYZW[w], XYZW[w]);
    }
    if (a->Dv % 4 == 0) {
        sb_line(s, 3, "if (col < %lld) *(float4 *)(orow + col) = r4;\n", Dv);
    } else {
        for (int w = 0; w < 4; w++)
            sb_line(s, 3, "if (col + %d < %lld) orow[col + %d] = r4.%c;\n", w, Dv, w, XYZW[w]);
    }
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    cexpr_free(E.x);
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

static void cfg_fill(KernelConfig *k, int64_t bq, int64_t bk, int64_t tm, int64_t tn,
                     int64_t cp, int64_t split) {
    memset(k, 0, sizeof *k);
    k->cls = CUCLS_ATTN;
    k->p[CUA_BQ] = bq;
    k->p[CUA_BK] = bk;
    k->p[CUA_TM] = tm;
    k->p[CUA_TN] = tn;
    k->p[CUA_CP] = cp;
    k->p[CUA_SPLIT] = split;
    snprintf(k->desc, sizeof k->desc, "cls=attn bq=%lld bk=%lld tm=%lld tn=%lld cp=%lld s=%lld",
             (long long)bq, (long long)bk, (long long)tm, (long long)tn, (long long)cp,
             (long long)(split > 1 ? split : 1));
}

// The config every attention fits: 4 queries, 32 keys, 64 threads, single buffers.
static void smallest(KernelConfig *k) {
    cfg_fill(k, 4, 32, 1, 2, 0, 1);
}

// The opt-in shared memory every GPU orch targets has (99 KiB on sm_86/sm_89; more on sm_80
// and sm_90).
#define ATTN_SMEM_ANY (99 * 1024)

bool cugen_attn_supports(const PrimGraph *pg, const Candidate *c) {
    Ana x;
    if (!analyse(pg, c, NULL, &x) || c->n_inputs > ORCH_CUDA_MAX_IN || x.a.rank - 2 > 8)
        return false;
    KernelConfig k;
    smallest(&k);
    Geo g;
    if (!geometry(&x, k.p, &g) || smem_bytes(&g) > ATTN_SMEM_ANY)
        return false;
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&x, &g, k.desc, "orch_dry", &s, NULL, &e);
    sb_free(&s);
    return rc == ST_OK;
}

// The device model, per block: warp instructions (the products' FMAs, the softmax per score and
// per row, the staging, barriers) issued by 4 schedulers per SM, at full rate once the resident
// warps times the register tile's independent FMAs (TM x TN) reach 64, in proportion below;
// plus 2 SM cycles per warp-wide float4 shared-memory read of the products (Q, K, P and V rows:
// fitted on an H100, where the configs with the fewest such reads per FMA won, e.g. TM x TN =
// 4 x 8 at 198 us against 2 x 8 at 262 us on 8 x 12 heads of 512 x 512 x 64; the model came
// within 3% on those). Blocks spread over the SMs (the busiest SM decides); each key tile's
// global loads stall a block staging them synchronously unless other resident blocks cover
// them (cp.async copies run under the previous tile's products); K and V read once per query
// tile through L2, Q and O once from DRAM; key splits pay for their partials.
static double score(const Ana *x, const Geo *g, const CudaHw *hw) {
    const AttnSpec *a = &x->a;
    double TM = (double)g->TM, TN = (double)g->TN, U = (double)g->U, T = (double)g->T;
    double BK = (double)g->BK, D4 = (double)g->D4, CG = (double)g->CG;
    double tiles = (double)g->TPS, S = (double)g->S;
    double stage_k = BK * D4 / T * (!g->ka ? 12 : x->k.copy == 16 ? 2 : 8);
    double stage_v = BK * (double)g->DVq / T * (!g->va ? 12 : x->v.copy == 16 ? 2 : 8);
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
    double smem_sm = hw->smem_per_sm > 0 ? (double)hw->smem_per_sm : 233472.0;
    double thr_sm = hw->max_threads_per_sm > 0 ? hw->max_threads_per_sm : 2048;
    double regs_sm = hw->regs_per_sm > 0 ? hw->regs_per_sm : 65536;
    double regs = ceil(fmin((double)g->regs, 255) / 8) * 8;
    double bps = floor(smem_sm / ((double)smem_bytes(g) + 1024));
    bps = fmin(bps, floor(thr_sm / T));
    bps = fmin(bps, floor(regs_sm / (T * regs)));
    bps = fmin(bps, 32);
    if (bps < 1)
        return INFINITY;
    double clock = hw->clock_khz > 0 ? hw->clock_khz * 1e3 : 1.5e9;
    double sms = hw->sm_count > 0 ? hw->sm_count : 100;
    double blocks = (double)a->B * (double)g->QT * S;
    double per_sm = ceil(blocks / sms);
    double resident = fmin(bps, per_sm);
    double rounds = ceil(per_sm / resident);
    double eff = fmin(1.0, resident * warps * TM * TN / 64.0);
    double stalls = (g->ka && g->va ? 1 : tiles) * 700.0 / resident;
    double cycles = rounds * (resident * (block_instr / (4.0 * eff) + 2.0 * block_lds) + stalls);
    double t_comp = cycles / clock;
    double bw = hw->dram_bw > 0 ? hw->dram_bw : 2e12;
    double dram = 4.0 * (double)a->B *
                  ((double)a->M * (double)(a->D + a->Dv) + (double)a->N * (double)(a->D + a->Dv));
    double l2 = 4.0 * blocks / S * (double)a->N * (double)(a->D + a->Dv); // K, V per query tile
    // A split's partials cross L2 twice, after a fence and an atomic: about 2 us more.
    double t_split = S > 1 ? 2e-6 + 8.0 * blocks / S * (double)g->BQ * (double)a->Dv * S / bw : 0;
    return fmax(t_comp, fmax(dram / (0.8 * bw), l2 / (2.0 * bw))) + t_split + 3e-6;
}

int cugen_attn_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                       KernelConfig *out, int k) {
    Ana x;
    if (k < 1 || !analyse(pg, c, hw, &x))
        return 0;
    const AttnSpec *a = &x.a;
    int64_t optin = hw->smem_per_block_optin > 0 ? hw->smem_per_block_optin : 49152;
    int64_t sms = hw->sm_count > 0 ? hw->sm_count : 100;
    static const int64_t bqs[] = {4, 8, 16, 32, 64, 128}, bks[] = {32, 64, 128},
                         tms[] = {1, 2, 4, 8}, tns[] = {1, 2, 4, 8};
    KernelConfig all[2 * ORCH_COUNT(bqs) * ORCH_COUNT(bks) * ORCH_COUNT(tms) * ORCH_COUNT(tns) + 1];
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
                        cfg_fill(&kc, bq, bk, tms[q], tns[w], cp, 1);
                        Geo g;
                        if (!geometry(&x, kc.p, &g) || g.T < 64 || g.T > 256 || g.CG < 4 ||
                            g.regs > 200 || smem_bytes(&g) > optin)
                            continue;
                        kc.score = score(&x, &g, hw);
                        if (!isfinite(kc.score))
                            continue;
                        all[n++] = kc;
                        // Where the query tiles leave SMs idle, also the best key split.
                        KernelConfig best = kc;
                        for (int64_t sp = 2; sp <= 32 && a->B * g.QT < 2 * sms; sp *= 2) {
                            KernelConfig ks;
                            cfg_fill(&ks, bq, bk, tms[q], tns[w], cp, sp);
                            Geo gs;
                            if (!geometry(&x, ks.p, &gs))
                                continue;
                            ks.score = score(&x, &gs, hw);
                            if (ks.score < best.score)
                                best = ks;
                        }
                        if (best.p[CUA_SPLIT] > 1)
                            all[n++] = best;
                        break;
                    }
                }
    if (n == 0) { // the smallest config always fits (cugen_attn_supports)
        smallest(&all[0]);
        Geo g;
        if (!geometry(&x, all[0].p, &g))
            return 0;
        all[0].score = score(&x, &g, hw);
        n = 1;
    }
    return cgen_sort_configs(all, n, out, k);
}

int cugen_attn_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                    const CudaHw *hw, const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    Ana x;
    if (!analyse(pg, c, hw, &x))
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA attention kernel %s: candidate %d is not a fused attention", fn,
                       c->id);
    Geo g;
    if (cfg->cls != CUCLS_ATTN || !geometry(&x, cfg->p, &g))
        return err_set(e, ST_USAGE, "CUDA attention kernel %s: bad config '%s'", fn, cfg->desc);
    if (hw && hw->smem_per_block_optin > 0 && smem_bytes(&g) > hw->smem_per_block_optin)
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA attention kernel %s: config '%s' needs %lld bytes of shared memory, "
                       "more than %s has",
                       fn, cfg->desc, (long long)smem_bytes(&g), hw->name);
    return emit_kernel(&x, &g, cfg->desc, fn, src, launch, e);
}
