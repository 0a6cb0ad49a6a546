// CUCLS_POINTWISE: CUDA kernels of ELEMWISE/LAYOUT primitives (concat, broadcast, pads, gathers
// through cexpr in its CUDA dialect). The output is walked as one flat index f in a grid-stride
// loop: each thread computes `ept` elements per step, either one at a time (coalesced: element u
// of a thread at step base + u * block + thread) or as float4 groups (vec = 4: 128-bit stores,
// and 128-bit loads of every float32 input whose composed index map is `cst + f` with cst a
// multiple of 4; other inputs keep scalar loads). Values come from cexpr at the digits of f.
// Also the cugen_pw_* entry points, which send candidates with REDUCE primitives to
// emit_reduce_cuda.c, and the helpers of cugen_pw.h.
// Configs: block 128/256/512 x (scalar, ept 1/4) or (vec, ept 4/8), scored Roller-style
// (roller.md c.2): bytes over DRAM bandwidth, issue time of the arithmetic, the bandwidth a too
// small grid cannot reach, wave efficiency over the SMs, launch overhead.
#include "cost_models.h"
#include "cugen_pw.h"

#include "../../codegen/cexpr.h"
#include "../../codegen/classify.h"
#include "../../prim/index_map.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VEC_LOADS 32

// ---- shared helpers (cugen_pw.h) ----

double cupw_bandwidth(const CuDevice *d) {
    return d->dram_bw * CUDA_POINTWISE_MODEL.stream_eff;
}

int cupw_blocks_per_sm(const CuDevice *d, int block) {
    return ORCH_MAX(1, cudev_blocks_per_sm(d, ORCH_MAX(block, 1), 0, 0));
}

void cupw_kernel_head(const PrimGraph *pg, const Candidate *c, const char *fn, int block,
                      StrBuf *src) {
    const Tensor *T = pg->tensors[c->output];
    sb_printf(src, "ORCH_KERNEL void __launch_bounds__(%d) %s(OrchArgs a) {\n", block, fn);
    for (int j = 0; j < c->n_inputs; j++) {
        const char *ct = cgen_ctype(pg->tensors[c->inputs[j]]->dtype);
        sb_line(src, 1, "const %s *__restrict__ in%d = (const %s *)a.in[%d];\n", ct, j, ct, j);
    }
    sb_line(src, 1, "%s *__restrict__ y = (%s *)a.out;\n", cgen_ctype(T->dtype),
            cgen_ctype(T->dtype));
}

void cupw_digits(StrBuf *code, int indent, const char *prefix, const char *var, int rank,
                 const int64_t *dims, uint32_t mask, int narrow) {
    const char *it = narrow == CUPW_INDEX32 ? "int" : "int64_t";
    int64_t S = 1;
    int first = -1;
    for (int d = 0; d < rank; d++)
        if ((mask >> d) & 1) {
            first = d;
            break;
        }
    for (int d = rank - 1; d >= 0; d--) {
        if (!((mask >> d) & 1))
            continue;
        if (dims[d] == 1) {
            sb_line(code, indent, "const %s %s%d = 0;\n", it, prefix, d);
            continue;
        }
        if (narrow) {
            if (d == first)
                sb_line(code, indent, "const %s %s%d = (%s)((uint32_t)%s / %lldu);\n", it, prefix,
                        d, it, var, (long long)S);
            else
                sb_line(code, indent, "const %s %s%d = (%s)(((uint32_t)%s / %lldu) %% %lldu);\n",
                        it, prefix, d, it, var, (long long)S, (long long)dims[d]);
        } else {
            if (d == first)
                sb_line(code, indent, "const int64_t %s%d = %s / %lld;\n", prefix, d, var,
                        (long long)S);
            else
                sb_line(code, indent, "const int64_t %s%d = (%s / %lld) %% %lld;\n", prefix, d, var,
                        (long long)S, (long long)dims[d]);
        }
        S *= dims[d];
    }
}

// Whether every offset a pointwise kernel of candidate c forms fits in 32 bits: each tensor it
// reads, computes or writes, and each stage of its layouts, below 2^30 elements. The partial
// sums of a row-major offset stay below the tensor's size, and a concat's shifted coordinates
// or a table's -1 stay within the same bound.
static bool fits_index32(const PrimGraph *pg, const Candidate *c) {
    const int64_t lim = (int64_t)1 << 30;
    for (int i = 0; i < c->n_inputs; i++)
        if (tensor_numel(pg->tensors[c->inputs[i]]) >= lim)
            return false;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0 && tensor_numel(pg->tensors[p->out[j]]) >= lim)
                return false;
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] >= 0 && tensor_numel(pg->tensors[p->in[j]]) >= lim)
                return false;
        if (p->kind != PRIM_LAYOUT)
            continue;
        for (int k = 0; k < p->lay.n_stages; k++) {
            const LayoutStage *st = &p->lay.stages[k];
            int64_t n = 1;
            for (int d = 0; d < st->in_rank && n < lim; d++)
                n *= st->in_dims[d];
            if (n >= lim)
                return false;
        }
    }
    return true;
}

// ---- pointwise ----
// Configs: CuPointwiseConfig (cugen.h). vec 4: float4 for float32, ushort4 for float16 /
// bfloat16 (16- and 8-byte accesses); tr = A + 1: pw_emit_transposed.

void cupw_config_pack(const CuPointwiseConfig *pc, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_POINTWISE);
    k->p[0] = pc->block;
    k->p[1] = pc->ept;
    k->p[2] = pc->vec;
    k->p[3] = pc->tr;
    if (pc->tr > 0)
        snprintf(k->desc, sizeof k->desc, "cls=cupw bs=%lld tr=%lld", (long long)pc->block,
                 (long long)(pc->tr - 1));
    else
        snprintf(k->desc, sizeof k->desc, "cls=cupw bs=%lld vec=%lld ept=%lld",
                 (long long)pc->block, (long long)pc->vec, (long long)pc->ept);
}

bool cupw_config_unpack(const KernelConfig *k, CuPointwiseConfig *pc) {
    *pc = (CuPointwiseConfig){k->p[0], k->p[1], k->p[2], k->p[3]};
    return k->cls == CUCLS_POINTWISE;
}

typedef struct VecLoads {
    int lane; // the lane (0..3) whose code is being emitted
    int n;
    int j[MAX_VEC_LOADS];
    int64_t cst[MAX_VEC_LOADS];
    DType dt[MAX_VEC_LOADS];
} VecLoads;

// The types a group of 4 is loaded and stored as.
static bool vec_type(DType t) {
    return t == DT_FLOAT || t == DT_FLOAT16 || t == DT_BFLOAT16;
}

static const char *vec4_name(DType t) {
    return t == DT_FLOAT ? "float4" : "ushort4";
}

static bool vec_hook(void *ctx, int j, DType t, int64_t cst, char *out, size_t cap) {
    VecLoads *v = ctx;
    if (!vec_type(t) || cst % 4 != 0)
        return false;
    int k = 0;
    while (k < v->n && !(v->j[k] == j && v->cst[k] == cst))
        k++;
    if (k == v->n) {
        if (v->n == MAX_VEC_LOADS)
            return false;
        v->j[v->n] = j;
        v->cst[v->n] = cst;
        v->dt[v->n] = t;
        v->n++;
    }
    int n = snprintf(out, cap, "pv%d.%c", k, "xyzw"[v->lane]);
    return n > 0 && (size_t)n < cap;
}

static bool vec_possible(const PrimGraph *pg, const Candidate *c) {
    const Tensor *T = pg->tensors[c->output];
    return vec_type(T->dtype) && tensor_numel(T) % 4 == 0 && tensor_numel(T) >= 4;
}

// The largest |offset step| in LAYOUT p's input for a unit step along output axis d, at two
// points near the middle (a table's duplicated or reflected entries can step by 0 or -1 at
// one); -1 where a point falls in padding.
static int64_t layout_step(const PrimGraph *pg, const Prim *p, int d) {
    const Tensor *O = pg->tensors[p->out[0]], *I = pg->tensors[p->in[0]];
    int64_t worst = 0;
    for (int k = 0; k < 2; k++) {
        int64_t at[ORCH_MAX_RANK], in0[ORCH_MAX_RANK], in1[ORCH_MAX_RANK];
        for (int q = 0; q < O->rank; q++)
            at[q] = O->dims[q] / 2;
        at[d] = ORCH_MIN(O->dims[d] / 2 + k, O->dims[d] - 2);
        if (at[d] < 0 || !layout_map_index(&p->lay, O->rank, O->dims, at, in0))
            return -1;
        at[d]++;
        if (!layout_map_index(&p->lay, O->rank, O->dims, at, in1))
            return -1;
        int64_t off = 0;
        for (int q = 0; q < I->rank; q++)
            off = off * I->dims[q] + (in1[q] - in0[q]);
        worst = ORCH_MAX(worst, off < 0 ? -off : off);
    }
    return worst;
}

// The output axis a transposing kernel should read along: where a LAYOUT of the candidate whose
// output has the sink's shape reads its input at a large stride along the last axis and at
// unit stride along another axis A (NCHW -> NHWC: W; a resize of tokens [N, C] read as NCHW:
// C is last in memory), A; -1: none.
static int transposed_axis(const PrimGraph *pg, const Candidate *c) {
    const Tensor *T = pg->tensors[c->output];
    int r = T->rank;
    if (r < 2 || T->dims[r - 1] < 8)
        return -1;
    for (int i = 0; i < c->n_prims; i++) {
        const Prim *p = pg->prims[c->prims[i]];
        if (p->kind != PRIM_LAYOUT || p->lay.concat || p->n_in != 1 || p->lay.n_stages < 1)
            continue;
        const Tensor *O = pg->tensors[p->out[0]];
        if (O->rank != r || memcmp(O->dims, T->dims, sizeof(int64_t) * (size_t)r) != 0 ||
            layout_step(pg, p, r - 1) < 8)
            continue;
        int best = -1;
        for (int d = 0; d < r - 1; d++)
            if (T->dims[d] >= 8 && layout_step(pg, p, d) == 1 &&
                (best < 0 || T->dims[d] > T->dims[best]))
                best = d;
        if (best >= 0)
            return best;
    }
    return -1;
}

// Config tr = A + 1: the output walked in 32 x 32 tiles over (axis A, the last axis),
// 256 threads. Each value is computed with the threads along A (so inputs laid out with A
// fastest are read coalesced), kept in shared memory, then stored with the threads along the
// last axis (coalesced stores): a transpose staged through shared memory, for any program.
static int pw_emit_transposed(const PrimGraph *pg, const Candidate *c, int A, const char *fn,
                              const CudaHw *hw, const TargetOptions *opt, StrBuf *src,
                              CudaLaunch *launch, Err *e) {
    const Tensor *T = pg->tensors[c->output];
    int r = T->rank, L = r - 1;
    int64_t N = tensor_numel(T), DA = T->dims[A], DL = T->dims[L];
    int64_t nA = (DA + 31) / 32, nL = (DL + 31) / 32, outer = N / (DA * DL);
    int64_t tiles = outer * nA * nL;
    uint32_t others = 0;
    for (int d = 0; d < r; d++)
        if (d != A && d != L)
            others |= 1u << d;
    int64_t stride[ORCH_MAX_RANK], s = 1;
    for (int d = r - 1; d >= 0; d--) {
        stride[d] = s;
        s *= T->dims[d];
    }
    bool i32 = fits_index32(pg, c);
    int narrow = i32 ? CUPW_INDEX32 : N < ((int64_t)1 << 31) ? CUPW_NARROW : CUPW_WIDE;
    const char *it = i32 ? "int" : "int64_t";
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Cexpr *x = cexpr_create(pg, c, fn, &decls);
    cugen_cexpr_dialect(x, cugen_fast_math(opt));
    cexpr_set_index32(x, i32);
    cexpr_set_flat(x, 0, "f");
    char names[ORCH_MAX_RANK][16];
    const char *idx[ORCH_MAX_RANK];
    for (int d = 0; d < r; d++) {
        snprintf(names[d], sizeof names[d], "i%d", d);
        idx[d] = names[d];
    }
    const char *ct = cgen_ctype(T->dtype);
    char v[64], st[256];
    // Phase 1: lanes along A, the 8 warps along the last axis, 4 rows each.
    sb_line(&body, 2, "#pragma unroll\n");
    sb_line(&body, 2, "for (int k = 0; k < 4; k++) {\n");
    sb_line(&body, 3, "const %s i%d = ta * 32 + (int)(threadIdx.x %% 32);\n", it, A);
    sb_line(&body, 3, "const %s i%d = tl * 32 + (int)(threadIdx.x / 32) + k * 8;\n", it, L);
    sb_line(&body, 3, "if (i%d < %lld && i%d < %lld) {\n", A, (long long)DA, L, (long long)DL);
    sb_line(&body, 4, "const int64_t f = fo + i%d * %lld + i%d;\n", A, (long long)stride[A], L);
    int rc = cexpr_value(x, c->output, idx, &body, 4, v, sizeof v, e);
    cexpr_forget(x);
    cgen_store_expr(T->dtype, v, st, sizeof st);
    sb_line(&body, 4, "tile_[(int)(threadIdx.x / 32) + k * 8][threadIdx.x %% 32] = %s;\n", st);
    sb_line(&body, 3, "}\n");
    sb_line(&body, 2, "}\n");
    sb_line(&body, 2, "__syncthreads();\n");
    // Phase 2: lanes along the last axis.
    sb_line(&body, 2, "#pragma unroll\n");
    sb_line(&body, 2, "for (int k = 0; k < 4; k++) {\n");
    sb_line(&body, 3, "const int64_t a_ = ta * 32 + (int)(threadIdx.x / 32) + k * 8;\n");
    sb_line(&body, 3, "const int64_t l_ = tl * 32 + (int)(threadIdx.x %% 32);\n");
    sb_line(&body, 3, "if (a_ < %lld && l_ < %lld)\n", (long long)DA, (long long)DL);
    sb_line(&body, 4,
            "y[fo + a_ * %lld + l_] = tile_[threadIdx.x %% 32][(int)(threadIdx.x / 32) + k * 8];\n",
            (long long)stride[A]);
    sb_line(&body, 2, "}\n");
    sb_line(&body, 2, "__syncthreads();\n");
    if (rc == ST_OK) {
        CuDevice dev = cudev_of(hw);
        int64_t max_grid =
            (int64_t)dev.sms * cupw_blocks_per_sm(&dev, 256) * CUDA_POINTWISE_MODEL.grid_rounds;
        int64_t grid = ORCH_MIN(tiles, max_grid);
        sb_puts(src, decls.s);
        cupw_kernel_head(pg, c, fn, 256, src);
        sb_line(src, 1, "__shared__ %s tile_[32][33];\n", ct);
        sb_line(src, 1, "for (int64_t t_ = blockIdx.x; t_ < %lld; t_ += gridDim.x) {\n",
                (long long)tiles);
        sb_line(src, 2, "const %s tl = t_ %% %lld, ta = (t_ / %lld) %% %lld, o_ = t_ / %lld;\n", it,
                (long long)nL, (long long)nL, (long long)nA, (long long)(nL * nA));
        // The other axes' digits from o_, and the flat offset they contribute.
        cupw_digits(src, 2, "i", "o_", r, T->dims, others, narrow);
        sb_line(src, 2, "const int64_t fo = 0");
        for (int d = 0; d < r; d++)
            if ((others >> d) & 1)
                sb_printf(src, " + i%d * %lld", d, (long long)stride[d]);
        sb_puts(src, ";\n");
        sb_puts(src, body.s);
        sb_line(src, 1, "}\n");
        sb_puts(src, "}\n");
        memset(launch, 0, sizeof *launch);
        launch->grid[0] = (unsigned)grid;
        launch->grid[1] = launch->grid[2] = 1;
        launch->block[0] = 256;
        launch->block[1] = launch->block[2] = 1;
    }
    cexpr_free(x);
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

static int pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e) {
    const Tensor *T = pg->tensors[c->output];
    CuPointwiseConfig pc;
    cupw_config_unpack(cfg, &pc);
    int bs = (int)pc.block, ept = (int)pc.ept, vec = (int)pc.vec;
    if (pc.tr > 0) {
        int A = (int)pc.tr - 1;
        if (A >= T->rank - 1 || T->rank < 2 || tensor_numel(T) <= 0)
            return err_set(e, ST_INVALID, "kernel %s: bad pointwise config '%s'", fn, cfg->desc);
        return pw_emit_transposed(pg, c, A, fn, hw, opt, src, launch, e);
    }
    int64_t N = tensor_numel(T);
    if (bs < 32 || bs > 1024 || bs % 32 || ept < 1 || ept > 16 || (vec != 1 && vec != 4) ||
        (vec == 4 && (ept % 4 || !vec_possible(pg, c))))
        return err_set(e, ST_INVALID, "kernel %s: bad pointwise config '%s'", fn, cfg->desc);
    if (N <= 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: empty output", fn);
    int r = T->rank;
    uint32_t all = r ? (uint32_t)((1ull << r) - 1) : 0;
    bool i32 = fits_index32(pg, c);
    int narrow = i32 ? CUPW_INDEX32 : N < ((int64_t)1 << 31) ? CUPW_NARROW : CUPW_WIDE;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    Cexpr *x = cexpr_create(pg, c, fn, &decls);
    cugen_cexpr_dialect(x, cugen_fast_math(opt));
    cexpr_set_index32(x, i32);
    cexpr_set_flat(x, 0, "f");
    char names[ORCH_MAX_RANK][16];
    const char *idx[ORCH_MAX_RANK];
    for (int d = 0; d < r; d++) {
        snprintf(names[d], sizeof names[d], "i%d", d);
        idx[d] = names[d];
    }
    int64_t tile = (int64_t)bs * ept;
    char v[64], st[256];
    int rc = ST_OK;
    if (vec == 1) {
        sb_line(&body, 2, "#pragma unroll\n");
        sb_line(&body, 2, "for (int u = 0; u < %d; u++) {\n", ept);
        sb_line(&body, 3, "const int64_t f = b + u * %d + (int)threadIdx.x;\n", bs);
        sb_line(&body, 3, "if (f < %lld) {\n", (long long)N);
        cupw_digits(&body, 4, "i", "f", r, T->dims, all, narrow);
        rc = cexpr_value(x, c->output, idx, &body, 4, v, sizeof v, e);
        cexpr_forget(x);
        cgen_store_expr(T->dtype, v, st, sizeof st);
        sb_line(&body, 4, "y[f] = %s;\n", st);
        sb_line(&body, 3, "}\n");
        sb_line(&body, 2, "}\n");
    } else {
        VecLoads vl = {0};
        cexpr_set_load_hook(x, vec_hook, &vl);
        StrBuf lanes;
        sb_init(&lanes);
        for (int u = 0; u < 4 && rc == ST_OK; u++) {
            vl.lane = u;
            sb_line(&lanes, 4, "{\n");
            sb_line(&lanes, 5, "const int64_t f = f0 + %d;\n", u);
            cupw_digits(&lanes, 5, "i", "f", r, T->dims, all, narrow);
            rc = cexpr_value(x, c->output, idx, &lanes, 5, v, sizeof v, e);
            cexpr_forget(x);
            cgen_store_expr(T->dtype, v, st, sizeof st);
            sb_line(&lanes, 5, "o.%c = %s;\n", "xyzw"[u], st);
            sb_line(&lanes, 4, "}\n");
        }
        sb_line(&body, 2, "#pragma unroll\n");
        sb_line(&body, 2, "for (int u = 0; u < %d; u++) {\n", ept / 4);
        sb_line(&body, 3, "const int64_t f0 = b + (int64_t)(u * %d + (int)threadIdx.x) * 4;\n", bs);
        sb_line(&body, 3, "if (f0 < %lld) {\n", (long long)N);
        // A load may sit under a condition (Concat, Pad, Where on indices): for the lanes that
        // do not select it, f0 + cst can lie outside the input (even negative), and a group can
        // straddle its end. Only a group wholly inside is one float4; otherwise each lane is
        // loaded when it is in bounds (the lanes that use the value always are).
        for (int k = 0; k < vl.n; k++) {
            int64_t nj = tensor_numel(pg->tensors[c->inputs[vl.j[k]]]);
            const char *vt = vec4_name(vl.dt[k]);
            sb_line(&body, 4, "%s pv%d;\n", vt, k);
            sb_line(&body, 4, "{\n");
            sb_line(&body, 5, "const int64_t g_ = f0 + %lld;\n", (long long)vl.cst[k]);
            sb_line(&body, 5, "if (g_ >= 0 && g_ + 3 < %lld) {\n", (long long)nj);
            sb_line(&body, 6, "pv%d = *(const %s *)(in%d + g_);\n", k, vt, vl.j[k]);
            sb_line(&body, 5, "} else {\n");
            for (int u = 0; u < 4; u++)
                sb_line(&body, 6, "pv%d.%c = g_ + %d >= 0 && g_ + %d < %lld ? in%d[g_ + %d] : 0;\n",
                        k, "xyzw"[u], u, u, (long long)nj, vl.j[k], u);
            sb_line(&body, 5, "}\n");
            sb_line(&body, 4, "}\n");
        }
        sb_line(&body, 4, "%s o;\n", vec4_name(T->dtype));
        sb_puts(&body, lanes.s);
        sb_line(&body, 4, "*(%s *)(y + f0) = o;\n", vec4_name(T->dtype));
        sb_line(&body, 3, "}\n");
        sb_line(&body, 2, "}\n");
        sb_free(&lanes);
    }
    if (rc == ST_OK) {
        int64_t tiles = (N + tile - 1) / tile;
        CuDevice dev = cudev_of(hw);
        int64_t max_grid =
            (int64_t)dev.sms * cupw_blocks_per_sm(&dev, bs) * CUDA_POINTWISE_MODEL.grid_rounds;
        int64_t grid = ORCH_MIN(tiles, max_grid);
        sb_puts(src, decls.s);
        cupw_kernel_head(pg, c, fn, bs, src);
        sb_line(src, 1,
                "for (int64_t b = (int64_t)blockIdx.x * %lld; b < %lld; "
                "b += (int64_t)gridDim.x * %lld) {\n",
                (long long)tile, (long long)N, (long long)tile);
        sb_puts(src, body.s);
        sb_line(src, 1, "}\n");
        sb_puts(src, "}\n");
        memset(launch, 0, sizeof *launch);
        launch->grid[0] = (unsigned)grid;
        launch->grid[1] = launch->grid[2] = 1;
        launch->block[0] = (unsigned)bs;
        launch->block[1] = launch->block[2] = 1;
    }
    cexpr_free(x);
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

static bool pw_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    KernelConfig cfg;
    cupw_config_pack(&(CuPointwiseConfig){.block = 256, .ept = 1, .vec = 1}, &cfg);
    StrBuf src;
    sb_init(&src);
    Err e = {0};
    CudaLaunch l;
    int rc = pw_emit(pg, c, &cfg, NULL, opt, "orch_probe", &src, &l, &e);
    sb_free(&src);
    return rc == ST_OK;
}

static int pw_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, KernelConfig *out,
                      int k) {
    const Tensor *T = pg->tensors[c->output];
    int64_t N = tensor_numel(T);
    double bytes = cgen_traffic_bytes(pg, c), ops = cgen_ops_per_elem(pg, c);
    bool vec_ok = vec_possible(pg, c);
    const CudaPointwiseModel *cm = &CUDA_POINTWISE_MODEL;
    CuDevice d = cudev_of(hw);
    int sms = d.sms;
    double bw = cupw_bandwidth(&d);
    KernelConfig cand[16];
    int n = 0;
    static const int blocks[] = {128, 256, 512};
    static const int shapes[][2] = {{1, 1}, {1, 4}, {4, 4}, {4, 8}}; // (vec, ept)
    for (size_t bi = 0; bi < ORCH_COUNT(blocks); bi++)
        for (size_t si = 0; si < ORCH_COUNT(shapes); si++) {
            int bs = blocks[bi], vec = shapes[si][0], ept = shapes[si][1];
            if (vec == 4 && !vec_ok)
                continue;
            int64_t tile = (int64_t)bs * ept, tiles = (N + tile - 1) / tile;
            int bpsm = cupw_blocks_per_sm(&d, bs);
            double slots = cudev_slots(&d, bpsm);
            // Bandwidth needs enough bytes in flight: a share of the SMs' resident threads
            // each with a load outstanding per element; a small grid reaches a fraction.
            double active = ORCH_MIN((double)tiles, slots) * bs * ept;
            double util = ORCH_MIN(1.0, active / (cm->inflight_share * sms * d.threads_sm));
            double wave_eff = tiles > slots ? cudev_wave_eff(&d, (double)tiles, bpsm) : 1.0;
            // Issue: per element the arithmetic, index digits and one load/store instruction
            // per input (a quarter of that for float4 groups).
            double per_elem = ops + cm->digit_instr * T->rank + (1.0 + c->n_inputs) / vec;
            double t_issue = (double)N * per_elem / cudev_lane_rate(&d);
            // Scalar accesses reach a share of what 128-bit ones do; 2-byte ones (half
            // storage) less.
            double scalar = dtype_size(T->dtype) >= 4 ? cm->scalar_eff_4b : cm->scalar_eff_2b;
            double t_mem = bytes / (bw * util * (vec == 4 ? 1.0 : scalar));
            double score = ORCH_MAX(t_mem, t_issue) / wave_eff + CUDA_ARCH.launch_s;
            // A step of several elements hides latency better (independent loads in flight).
            if (ept > 1)
                score *= cm->multi_elem;
            KernelConfig *kc = &cand[n++];
            cupw_config_pack(&(CuPointwiseConfig){.block = bs, .ept = ept, .vec = vec}, kc);
            kc->score = score;
        }
    // A transposing kernel (NCHW -> NHWC and the like): the same work as 32 x 32 tiles staged
    // through shared memory, reads and stores both coalesced. The model above does not see the
    // strided accesses of the flat walk, so the tiled config is ranked first and the lab decides.
    int A = transposed_axis(pg, c);
    if (A >= 0 && n > 0) {
        double best = cand[0].score;
        for (int i = 1; i < n; i++)
            best = fmin(best, cand[i].score);
        KernelConfig *kc = &cand[n++];
        cupw_config_pack(&(CuPointwiseConfig){.block = 256, .ept = 4, .vec = 1, .tr = A + 1}, kc);
        kc->score = best * cm->transposed_rank;
    }
    return cgen_sort_configs(cand, n, out, k);
}

// ---- entry points ----

bool cugen_pw_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    if (c->n_inputs > ORCH_CUDA_MAX_IN)
        return false;
    switch (cgen_classify(pg, c)) {
    case CCLS_POINTWISE: return pw_supports(pg, c, opt);
    case CCLS_REDUCE: return cugen_red_supports(pg, c, opt);
    default: return false;
    }
}

int cugen_pw_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                     const TargetOptions *opt, KernelConfig *out, int k) {
    switch (cgen_classify(pg, c)) {
    case CCLS_POINTWISE: return pw_configs(pg, c, hw, out, k);
    case CCLS_REDUCE: return cugen_red_configs(pg, c, hw, opt, out, k);
    default: return 0;
    }
}

int cugen_pw_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                  const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                  CudaLaunch *launch, Err *e) {
    int cls = cgen_classify(pg, c);
    if (cls == 0)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: candidate %d is not pointwise/reduce", fn,
                       c->id);
    if (c->n_inputs > ORCH_CUDA_MAX_IN)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: %d inputs (OrchArgs holds %d)", fn,
                       c->n_inputs, ORCH_CUDA_MAX_IN);
    int want = cls == CCLS_POINTWISE ? CUCLS_POINTWISE : CUCLS_REDUCE;
    if (cfg->cls != want)
        return err_set(e, ST_INVALID, "kernel %s: config class %d for a class %d candidate", fn,
                       cfg->cls, want);
    return cls == CCLS_POINTWISE ? pw_emit(pg, c, cfg, hw, opt, fn, src, launch, e)
                                 : cugen_red_emit(pg, c, cfg, hw, opt, fn, src, launch, e);
}
