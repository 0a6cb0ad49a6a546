// The CUDA target's fused MLP chain kernel (cugen_mlp.h; issue 8). Block b owns rows
// b*BM .. b*BM+BM-1 of the chain: it stages its input rows in shared memory (zeros past the last
// row), then per layer every thread computes TM x TN output tiles (rows x columns) of exact
// float32 fmaf over K, reading the activations from shared memory and the weights through the
// read-only cache (__ldg, float4 where TN = 4) or from a per-layer copy in shared memory, applies
// the layer's epilogue (cexpr, CUDA dialect) in registers and writes the result into the other
// shared buffer, or, for the last layer, to the output. No activation between layers touches
// global memory: one launch instead of one per layer and epilogue.
// Shared memory: two BM x S activation buffers (S: the widest layer, made odd so the TM rows a
// thread reads fall in different banks), plus the largest K x N weight when staged.
// Needs: cugen_prelude() in the translation unit. Guarantees: the candidate's output as
// prim_interp.c computes it, up to float32 reassociation (no TF32 or half precision).
#include "cugen_mlp.h"

#include "../c/cgen.h"
#include "../c/cgen_mlp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// KernelConfig.p[] slots: rows per block, threads, rows per thread tile, columns per thread tile
// (at most; a layer uses the largest of 4, 2, 1 dividing its width), weights staged in shared
// memory.
enum { Q_BM, Q_T, Q_TM, Q_TN, Q_STAGE };

static int64_t smem_stride(const MlpChain *m) {
    int64_t w = m->K[0];
    for (int l = 0; l < m->n; l++)
        w = ORCH_MAX(w, m->N[l]);
    return w | 1;
}

static int64_t max_kn(const MlpChain *m) {
    int64_t w = 0;
    for (int l = 0; l < m->n; l++)
        w = ORCH_MAX(w, m->K[l] * m->N[l]);
    return w;
}

static int64_t smem_bytes(const MlpChain *m, int64_t BM, bool stage) {
    int64_t b = 2 * BM * smem_stride(m) * 4;
    b = (b + 15) / 16 * 16;
    return b + (stage ? max_kn(m) * 4 : 0);
}

static int layer_tn(const MlpChain *m, int l, int tn) {
    while (tn > 1 && m->N[l] % tn)
        tn /= 2;
    return tn;
}

typedef struct CEm {
    const MlpChain *m;
    const char *fn;
    StrBuf *s;
    Cexpr *x;
    int cur;
} CEm;

static int reader(void *ctx, const CexprRead *rq, StrBuf *code, int indent, char *out, size_t cap,
                  Err *e) {
    (void)code;
    (void)indent;
    const CEm *E = ctx;
    if (E->cur < 0 || rq->tensor != E->m->tl[E->cur])
        return err_set(e, ST_UNSUPPORTED,
                       "CUDA mlp kernel %s: tensor %d is not the current layer's product", E->fn,
                       rq->tensor);
    snprintf(out, cap, "acc");
    return ST_OK;
}

// Layer l: products, epilogue, store (into dst, or the output for the last layer).
static int emit_layer(CEm *E, int l, const KernelConfig *cfg, Err *e) {
    const MlpChain *m = E->m;
    StrBuf *s = E->s;
    int64_t BM = cfg->p[Q_BM], T = cfg->p[Q_T], S = smem_stride(m);
    int TM = (int)cfg->p[Q_TM], TN = layer_tn(m, l, (int)cfg->p[Q_TN]);
    bool stage = cfg->p[Q_STAGE] != 0, last = l == m->n - 1;
    int64_t K = m->K[l], N = m->N[l], NCB = N / TN, items = BM / TM * NCB;
    const char *src = l % 2 ? "b1" : "b0", *dst = l % 2 ? "b0" : "b1";
    sb_line(s, 1, "{ // layer %d: %lld -> %lld\n", l, (long long)K, (long long)N);
    if (stage) {
        sb_line(s, 2, "for (int q = threadIdx.x; q < %lld; q += %lld) ws[q] = in%d[q];\n",
                (long long)(K * N), (long long)T, m->w_pos[l]);
        sb_line(s, 2, "__syncthreads();\n");
        sb_line(s, 2, "const float *__restrict__ w = ws;\n");
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
    sb_line(s, 3, "const float *ap = %s + r0 * %lld;\n", src, (long long)S);
    sb_line(s, 3, "const float *wp = w + c0;\n");
    sb_line(s, 3, "#pragma unroll 4\n");
    sb_line(s, 3, "for (int k = 0; k < %lld; k++) {\n", (long long)K);
    if (TN == 4) {
        if (stage)
            sb_line(s, 4, "const float4 w4 = *(const float4 *)(wp + k * %lld);\n", (long long)N);
        else
            sb_line(s, 4, "const float4 w4 = __ldg((const float4 *)(wp + k * %lld));\n",
                    (long long)N);
        sb_line(s, 4, "const float wv[4] = {w4.x, w4.y, w4.z, w4.w};\n");
    } else {
        sb_line(s, 4, "float wv[%d];\n", TN);
        sb_line(s, 4, "#pragma unroll\n");
        sb_line(s, 4, "for (int j = 0; j < %d; j++) wv[j] = %s(wp + k * %lld + j);\n", TN,
                stage ? "*" : "__ldg", (long long)N);
    }
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int i = 0; i < %d; i++) {\n", TM);
    sb_line(s, 5, "const float av = ap[i * %lld + k];\n", (long long)S);
    sb_line(s, 5, "#pragma unroll\n");
    sb_line(s, 5, "for (int j = 0; j < %d; j++) acc_[i][j] = fmaf(av, wv[j], acc_[i][j]);\n", TN);
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    // The raw products into dst; the epilogue follows in a pass of its own.
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i = 0; i < %d; i++)\n", TM);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int j = 0; j < %d; j++) %s[(r0 + i) * %lld + c0 + j] = acc_[i][j];\n", TN,
            dst, (long long)S);
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    // The epilogue over the tile, one element per thread and step (one copy of its code, and
    // the last layer's stores coalesced). Rows past the last are not computed (an epilogue
    // constant may be as large as the output) and read as zeros by the next layer.
    if (!m->epi[l] && !last) {
        sb_line(s, 1, "}\n");
        return ST_OK;
    }
    sb_line(s, 2, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(BM * N),
            (long long)T);
    sb_line(s, 3, "const int r = q / %lld;\n", (long long)N);
    sb_line(s, 3, "const int64_t e_c = q - r * %lld, gr = i0 + r;\n", (long long)N);
    sb_line(s, 3, "float *dp = %s + r * %lld + e_c;\n", dst, (long long)S);
    sb_line(s, 3, "if (gr < %lld) {\n", (long long)m->R);
    sb_line(s, 4, "const float acc = *dp;\n");
    char names[ORCH_MAX_RANK][24];
    const char *ix[ORCH_MAX_RANK];
    sb_line(s, 4, "int64_t q_r = gr;\n");
    for (int d = m->rank - 2; d >= 0; d--) {
        snprintf(names[d], sizeof names[d], "e_i%d", d);
        sb_line(s, 4, "const int64_t e_i%d = q_r %% %lld; q_r /= %lld; (void)e_i%d;\n", d,
                (long long)m->lead[d], (long long)m->lead[d], d);
        ix[d] = names[d];
    }
    ix[m->rank - 1] = "e_c";
    E->cur = l;
    char v[64];
    int rc = cexpr_value(E->x, m->act[l], ix, s, 4, v, sizeof v, e);
    E->cur = -1;
    cexpr_forget(E->x);
    if (rc)
        return rc;
    if (last)
        sb_line(s, 4, "o[gr * %lld + e_c] = %s;\n", (long long)N, v);
    else
        sb_line(s, 4, "*dp = %s;\n", v);
    if (!last) {
        sb_line(s, 3, "} else {\n");
        sb_line(s, 4, "*dp = 0.0f;\n");
    }
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 1, "}\n");
    return ST_OK;
}

static int emit_kernel(const MlpChain *m, const KernelConfig *cfg, const char *fn, StrBuf *src,
                       CudaLaunch *launch, Err *e) {
    int64_t BM = cfg->p[Q_BM], T = cfg->p[Q_T], TM = cfg->p[Q_TM], TN = cfg->p[Q_TN];
    if (BM < 1 || T < 32 || T > 1024 || T % 32 || TM < 1 || TM > 16 || BM % TM || TN < 1 ||
        TN > 4)
        return err_set(e, ST_USAGE, "CUDA mlp kernel %s: bad config '%s'", fn, cfg->desc);
    const Candidate *c = m->c;
    StrBuf decls, body;
    sb_init(&decls);
    sb_init(&body);
    CEm E = {m, fn, &body, cexpr_create(m->pg, c, fn, &decls), -1};
    cexpr_set_cuda(E.x, true);
    cexpr_set_reader(E.x, reader, &E);
    StrBuf *s = &body;
    int64_t S = smem_stride(m), K0 = m->K[0];
    sb_printf(s, "ORCH_KERNEL void __launch_bounds__(%lld) %s(OrchArgs a) {\n", (long long)T, fn);
    sb_line(s, 1, "const void *in[%d];\n", c->n_inputs > 0 ? c->n_inputs : 1);
    for (int j = 0; j < c->n_inputs; j++) {
        const char *ct = cgen_ctype(m->pg->tensors[c->inputs[j]]->dtype);
        sb_line(s, 1, "in[%d] = a.in[%d];\n", j, j);
        sb_line(s, 1, "const %s *__restrict__ in%d = (const %s *)a.in[%d];\n", ct, j, ct, j);
        sb_line(s, 1, "(void)in%d;\n", j);
    }
    sb_line(s, 1, "(void)in;\n");
    sb_line(s, 1, "float *__restrict__ o = (float *)a.out;\n");
    sb_line(s, 1, "extern __shared__ __align__(16) float orch_mlp_sm[];\n");
    sb_line(s, 1, "float *b0 = orch_mlp_sm, *b1 = orch_mlp_sm + %lld;\n", (long long)(BM * S));
    if (cfg->p[Q_STAGE])
        sb_line(s, 1, "float *ws = orch_mlp_sm + %lld;\n",
                (long long)((2 * BM * S * 4 + 15) / 16 * 4));
    sb_line(s, 1, "(void)b1;\n");
    sb_line(s, 1, "const int64_t i0 = (int64_t)blockIdx.x * %lld;\n", (long long)BM);
    // The block's input rows, coalesced.
    sb_line(s, 1, "for (int q = threadIdx.x; q < %lld; q += %lld) {\n", (long long)(BM * K0),
            (long long)T);
    sb_line(s, 2, "const int r = q / %lld, k = q - r * %lld;\n", (long long)K0, (long long)K0);
    sb_line(s, 2, "b0[r * %lld + k] = i0 + r < %lld ? in%d[(i0 + r) * %lld + k] : 0.0f;\n",
            (long long)S, (long long)m->R, m->x_pos, (long long)K0);
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "__syncthreads();\n");
    int rc = ST_OK;
    for (int l = 0; l < m->n && !rc; l++)
        rc = emit_layer(&E, l, cfg, e);
    sb_puts(s, "}\n\n");
    cexpr_free(E.x);
    if (!rc) {
        sb_puts(src, decls.s ? decls.s : "");
        sb_puts(src, body.s);
        if (launch) {
            memset(launch, 0, sizeof *launch);
            launch->grid[0] = (unsigned)((m->R + BM - 1) / BM);
            launch->grid[1] = launch->grid[2] = 1;
            launch->block[0] = (unsigned)T;
            launch->block[1] = launch->block[2] = 1;
            launch->smem = (unsigned)smem_bytes(m, BM, cfg->p[Q_STAGE] != 0);
        }
    }
    sb_free(&decls);
    sb_free(&body);
    return rc;
}

static void cfg_desc(KernelConfig *k) {
    snprintf(k->desc, sizeof k->desc, "cls=mlp bm=%lld t=%lld tm=%lld tn=%lld stage=%lld",
             (long long)k->p[Q_BM], (long long)k->p[Q_T], (long long)k->p[Q_TM],
             (long long)k->p[Q_TN], (long long)k->p[Q_STAGE]);
}

bool cugen_mlp_supports(const PrimGraph *pg, const Candidate *c) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || c->n_inputs > ORCH_CUDA_MAX_IN ||
        m.R > ((int64_t)1 << 31) * 32)
        return false;
    KernelConfig k = {.cls = CUCLS_MLP};
    k.p[Q_BM] = 32;
    k.p[Q_T] = 128;
    k.p[Q_TM] = 2;
    k.p[Q_TN] = 4;
    cfg_desc(&k);
    StrBuf s;
    sb_init(&s);
    Err e = {0};
    int rc = emit_kernel(&m, &k, "orch_dry", &s, NULL, &e);
    sb_free(&s);
    // Without staging the smallest tile must fit the opt-in shared memory of every GPU orch
    // targets (99 KiB on sm_86/sm_89; 163 KiB and more on sm_80/sm_90).
    return rc == ST_OK && smem_bytes(&m, 32, false) <= 99 * 1024;
}

// The device model: a block's warp instructions per layer (FMAs, shared-memory activation reads,
// weight loads, the epilogue), issued by 4 schedulers per SM at an efficiency that grows with
// the resident warps; blocks per SM from shared memory, threads and registers; waves over the
// SMs; the chain's input and output cross DRAM once.
static double score(const MlpChain *m, const CudaHw *hw, const int64_t *P) {
    double BM = (double)P[Q_BM], T = (double)P[Q_T], TM = (double)P[Q_TM];
    bool stage = P[Q_STAGE] != 0;
    double smem = (double)smem_bytes(m, P[Q_BM], stage);
    double smem_sm = hw->smem_per_sm > 0 ? (double)hw->smem_per_sm : 233472.0;
    double thr_sm = hw->max_threads_per_sm > 0 ? hw->max_threads_per_sm : 2048;
    double regs_sm = hw->regs_per_sm > 0 ? hw->regs_per_sm : 65536;
    double regs = TM * (double)P[Q_TN] + (double)P[Q_TN] + 32;
    double bps = floor(smem_sm / (smem + 1024));
    bps = ORCH_MIN(bps, floor(thr_sm / T));
    bps = ORCH_MIN(bps, floor(regs_sm / (T * regs)));
    bps = ORCH_MIN(bps, 32);
    if (bps < 1)
        return INFINITY;
    double instr = BM * (double)m->K[0] / T * 2; // the input tile
    for (int l = 0; l < m->n; l++) {
        double TN = layer_tn(m, l, (int)P[Q_TN]);
        double items = BM / TM * ((double)m->N[l] / TN);
        double per = ceil(items / T);
        double wl = TN == 4 ? 1 : TN;
        instr += per * (double)m->K[l] * (TM * TN + TM + wl * (stage ? 1.0 : 1.5));
        instr += per * TM * TN * 12; // epilogue
        if (stage)
            instr += (double)(m->K[l] * m->N[l]) / T * 2 + 40;
        instr += 20; // barrier
    }
    double warps = T / 32;
    double block_instr = instr * warps;
    double clock = hw->clock_khz > 0 ? hw->clock_khz * 1e3 : 1.5e9;
    double sms = hw->sm_count > 0 ? hw->sm_count : 100;
    double blocks = ceil((double)m->R / BM);
    double waves = ceil(blocks / (bps * sms));
    double resident = ORCH_MIN(bps, ceil(blocks / sms)); // blocks sharing an SM's schedulers
    double occ = ORCH_MIN(1.0, resident * warps / 16.0);
    double per_wave = resident * block_instr / (4.0 * occ);
    double t_comp = waves * per_wave / clock;
    double bytes = 4.0 * (double)m->R * (double)(m->K[0] + m->N[m->n - 1]);
    double bw = hw->dram_bw > 0 ? hw->dram_bw : 2e12;
    return ORCH_MAX(t_comp, bytes / (0.8 * bw)) + 3e-6;
}

int cugen_mlp_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw, KernelConfig *out,
                      int k) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m) || k < 1)
        return 0;
    int64_t optin = hw->smem_per_block_optin > 0 ? hw->smem_per_block_optin : 49152;
    static const int64_t bms[] = {32, 64, 128}, ts[] = {64, 128, 256}, tms[] = {2, 4, 8};
    KernelConfig all[64];
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
                    KernelConfig *kc = &all[n++];
                    memset(kc, 0, sizeof *kc);
                    kc->cls = CUCLS_MLP;
                    kc->p[Q_BM] = bms[a];
                    kc->p[Q_T] = ts[b];
                    kc->p[Q_TM] = tms[q];
                    kc->p[Q_TN] = 4;
                    kc->p[Q_STAGE] = st;
                    kc->score = score(&m, hw, kc->p);
                    cfg_desc(kc);
                }
    if (n == 0) { // tiny chains: the smallest block always fits (cugen_mlp_supports)
        KernelConfig *kc = &all[n++];
        memset(kc, 0, sizeof *kc);
        kc->cls = CUCLS_MLP;
        kc->p[Q_BM] = 32;
        kc->p[Q_T] = 64;
        kc->p[Q_TM] = 2;
        kc->p[Q_TN] = 4;
        kc->score = score(&m, hw, kc->p);
        cfg_desc(kc);
    }
    return cgen_sort_configs(all, n, out, k);
}

int cugen_mlp_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    MlpChain m;
    if (!mlp_analyse(pg, c, &m))
        return err_set(e, ST_UNSUPPORTED, "CUDA mlp kernel %s: candidate %d is not an MLP chain",
                       fn, c->id);
    if (hw && hw->smem_per_block_optin > 0 &&
        smem_bytes(&m, cfg->p[Q_BM], cfg->p[Q_STAGE] != 0) > hw->smem_per_block_optin)
        return err_set(e, ST_UNSUPPORTED, "CUDA mlp kernel %s: config '%s' needs more shared "
                       "memory than %s has", fn, cfg->desc, hw->name);
    return emit_kernel(&m, cfg, fn, src, launch, e);
}
