// The CUDA target's operator kernels (cugen_opq.h): CUDA C for NVRTC from the shared analysis
// codegen/opaque_spec.h, with the same rules as the C target's (emit_opaque_c.c): every index is
// read, wrapped once and checked before it addresses anything (a bad one stores the status word
// and is skipped); sums accumulate in the element type one element at a time in the reference's
// order; orderings use keys that rank NaN above every number and -0 with +0, ties going to the
// lower position. Work whose order matters stays sequential inside one thread: a CumSum line, a
// scatter's index line (every update of a data element comes from one index line, in order), the
// tuples of a ScatterND at one slice position. Everything else is a thread per output element.
#include "../../codegen/cexpr.h"
#include "../../codegen/opaque_spec.h"
#include "../../codegen/opaque_values.h"
#include "cugen_opq.h"
#include "device_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- configs ----

static const char *alg_name(int64_t alg) {
    switch (alg) {
    case CUOPQ_PLAIN: return "plain";
    case CUOPQ_WARP: return "warp";
    case CUOPQ_SORT: return "sort";
    case CUOPQ_RANK: return "rank";
    case CUOPQ_SCAN: return "scan";
    default: return "?";
    }
}

void cuopq_config_pack(const CuOpqConfig *t, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_OPAQUE);
    k->p[0] = t->alg;
    k->p[1] = t->block;
    snprintf(k->desc, sizeof k->desc, "cls=cuop alg=%s bs=%lld", alg_name(t->alg),
             (long long)t->block);
}

bool cuopq_config_unpack(const KernelConfig *k, CuOpqConfig *t) {
    *t = (CuOpqConfig){k->p[0], k->p[1]};
    return k->cls == CUCLS_OPAQUE;
}

// TopK's shared-memory buffer of (key, position) entries: 32 KiB, so no opt-in is needed. Entries
// are 8 bytes (a 32-bit key and the position in one word) or 16 (a 64-bit key beside it).
static int64_t topk_cap(DType t) {
    return opq_wide_key(t) ? 2048 : 4096;
}
// The buffer a line needs: the next power of two of its length, at most topk_cap.
static int64_t topk_buf(const OpqSpec *s) {
    int64_t c = 2;
    while (c < s->x.len && c < topk_cap(s->dt))
        c *= 2;
    return c;
}
static int64_t topk_block(const OpqSpec *s) {
    return ORCH_MIN(512, ORCH_MAX(32, topk_buf(s) / 2));
}
// The sort needs room for the k kept and a block of newcomers once a line overflows the buffer.
static bool topk_sort_fits(const OpqSpec *s) {
    int64_t c = topk_buf(s);
    return s->x.len <= c || s->y.len + topk_block(s) <= c;
}

bool cugen_opq_supports(const PrimGraph *pg, const Candidate *c, const TargetOptions *opt) {
    (void)opt;
    OpqSpec s;
    if (c->n_inputs + ORCH_CUDA_OP_SLOTS > ORCH_CUDA_MAX_IN || !opq_analyse(pg, c, &s, NULL, 0))
        return false;
    // LpPool: the exponents whose arithmetic the GPU does exactly as the reference (p = 1: sums of
    // |x|; p = 2: sums of exact squares of float or half values, then a square root, which is
    // what glibc's pow(acc, 0.5) rounds to). CUDA's pow is not glibc's: other p stay with the op.
    return s.op != OPQ_LP_POOL || (s.dt != DT_DOUBLE && (s.pool.p == 1 || s.pool.p == 2));
}

// A kernel's time: the launch, and the longer of its traffic at the streaming bandwidth and its
// sequential part (`serial` dependent steps a thread of `threads`, about 30 cycles each with the
// loads they wait on, in waves of the device's resident threads).
static double opq_time(const CuDevice *d, double bytes, double threads, double serial) {
    double slots = (double)d->sms * d->threads_sm;
    double waves = ceil(ORCH_MAX(threads, 1.0) / slots);
    double seq = waves * serial * 30.0 / d->clock;
    return CUDA_ARCH.launch_s + ORCH_MAX(bytes / (d->dram_bw * 0.8), seq);
}

int cugen_opq_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *hw,
                      const TargetOptions *opt, KernelConfig *out, int k) {
    OpqSpec s;
    if (!cugen_opq_supports(pg, c, opt) || !opq_analyse(pg, c, &s, NULL, 0))
        return 0;
    OpqWork w;
    opq_work(pg, &s, &w);
    CuDevice d = cudev_of(hw);
    KernelConfig cand[4];
    int n = 0;
    double lines = (double)s.x.outer * (double)s.x.inner;
    switch (s.op) {
    case OPQ_TOPK: {
        double len = (double)s.x.len, kk = (double)s.y.len;
        if (topk_sort_fits(&s)) {
            int64_t buf = topk_buf(&s), bs = topk_block(&s);
            double lg = log2((double)buf);
            // Rounds of the buffer: the first fill, then those the newcomers above the bar need
            // (about k ln(n / k) of them in a random order).
            double rounds =
                1 + (len > (double)buf ? kk * log(len / kk + 1) / (double)(buf - s.y.len) : 0);
            double steps = len / (double)bs + rounds * lg * lg / 2 * (double)buf / 2 / (double)bs;
            cuopq_config_pack(&(CuOpqConfig){CUOPQ_SORT, bs}, &cand[n]);
            cand[n++].score = opq_time(&d, w.bytes, lines * (double)bs, steps * 2);
        }
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_RANK, 256}, &cand[n]);
        cand[n++].score = opq_time(&d, w.bytes, lines * len, len);
        break;
    }
    case OPQ_HARDMAX:
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_PLAIN, 256}, &cand[n]);
        cand[n++].score =
            opq_time(&d, w.bytes * (s.x.inner == 1 ? 8 : 1), lines, 2 * (double)s.x.len);
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_WARP, 256}, &cand[n]);
        cand[n++].score = opq_time(&d, w.bytes * (s.x.inner == 1 ? 1 : 8), lines * 32,
                                   2 * (double)s.x.len / 32 + 10);
        break;
    case OPQ_CUMSUM: {
        // A line per thread; which axis is known only when it runs: the longest line prices it.
        int64_t longest = 1;
        for (int a = 0; a < s.rank; a++)
            longest = ORCH_MAX(longest, s.dims[a]);
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_PLAIN, 128}, &cand[n]);
        cand[n++].score = opq_time(&d, w.bytes, w.elems / (double)longest, (double)longest);
        if (!dtype_is_float(s.dt)) { // about 20 dependent steps a block of elements
            cuopq_config_pack(&(CuOpqConfig){CUOPQ_SCAN, 256}, &cand[n]);
            cand[n++].score = opq_time(&d, w.bytes, w.elems / (double)longest * 256,
                                       ceil((double)longest / 256) * 20);
        }
        break;
    }
    case OPQ_SCATTER_ELEMENTS:
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_PLAIN, 128}, &cand[n]);
        cand[n++].score = opq_time(&d, w.bytes, lines, 2 * (double)ORCH_MAX(s.x.len, s.y.len));
        break;
    case OPQ_SCATTER_ND:
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_PLAIN, 128}, &cand[n]);
        cand[n++].score =
            opq_time(&d, w.bytes, (double)s.slice,
                     (double)(s.block / ORCH_MAX(s.slice, 1)) + (double)(s.tuples * s.depth));
        break;
    default:
        cuopq_config_pack(&(CuOpqConfig){CUOPQ_PLAIN, 256}, &cand[n]);
        cand[n++].score = opq_time(&d, w.bytes, w.elems, 1);
        break;
    }
    return cgen_sort_configs(cand, n, out, k);
}

// ---- emission helpers ----

typedef struct Em {
    const PrimGraph *pg;
    const OpqSpec *s;
    const char *fn;
    int64_t block;
    int64_t alg;
    int ni; // the candidate's inputs: the extra slots follow them
    StrBuf *b;
    CuDevice dev;
    CudaLaunch *launch;
} Em;

// "a.in[i]" of operand j.
static const char *arg_in(const Em *m, int j, char *buf, size_t n) {
    snprintf(buf, n, "a.in[%d]", m->s->in[j]);
    return buf;
}

// The kernel's head: its signature and the status word.
static void head(const Em *m) {
    sb_printf(m->b, "ORCH_KERNEL void __launch_bounds__(%lld) %s(OrchArgs a) {\n",
              (long long)m->block, m->fn);
    sb_line(m->b, 1, "int *bad_ = (int *)a.in[%d];\n", m->ni + 1);
}

// Closes the kernel's grid-stride loop and the kernel.
static int tail(const Em *m) {
    sb_line(m->b, 1, "}\n");
    sb_puts(m->b, "}\n");
    return ST_OK;
}

// A grid-stride loop of variable t over [0, n), and the grid it is launched with: enough blocks
// for one element a thread, at most 8 waves of resident blocks.
static void flat_loop(const Em *m, int indent, const char *t, int64_t n) {
    sb_line(m->b, indent,
            "for (int64_t %s = (int64_t)blockIdx.x * %lld + threadIdx.x; %s < %lld; %s += "
            "(int64_t)gridDim.x * %lld) {\n",
            t, (long long)m->block, t, (long long)n, t, (long long)m->block);
    int64_t blocks = (n + m->block - 1) / m->block;
    int64_t cap = (int64_t)m->dev.sms * ORCH_MAX(1, m->dev.threads_sm / m->block) * 8;
    m->launch->grid[0] = (unsigned)ORCH_MAX(1, ORCH_MIN(blocks, cap));
    m->launch->grid[1] = m->launch->grid[2] = 1;
    m->launch->block[0] = (unsigned)m->block;
    m->launch->block[1] = m->launch->block[2] = 1;
}

// Reads index value v from src, wraps and checks it (opq_emit_index): a bad one stores the
// status word and runs on_bad.
static void emit_index(const Em *m, int indent, const char *v, const char *src, const char *size,
                       const char *on_bad) {
    char mark[32];
    snprintf(mark, sizeof mark, "*bad_ = %d;", CKERNEL_ERR_INDEX);
    opq_emit_index(m->b, indent, v, src, size, mark, on_bad);
}

// ---- TopK ----

// Entries (key, position), totally ordered: a higher key first, then a lower position. 32-bit
// keys: one uint64_t (key << 32 | ~position); 64-bit keys: a pair. The pad entry (zero) ranks
// below every real one, whose inverted position is at least 2^31.
static void emit_topk_entries(const Em *m) {
    StrBuf *b = m->b;
    const char *fn = m->fn;
    if (opq_wide_key(m->s->dt)) {
        sb_printf(b, "struct %s_ent { uint64_t k; uint32_t q; };\n", fn);
        sb_printf(b,
                  "static __device__ __forceinline__ bool %s_gt(%s_ent a, %s_ent b) { return a.k "
                  "> b.k || (a.k == b.k && a.q > b.q); }\n",
                  fn, fn, fn);
        sb_printf(b,
                  "static __device__ __forceinline__ %s_ent %s_mk(uint64_t k, int64_t pos) { "
                  "%s_ent e; e.k = k; e.q = ~(uint32_t)pos; return e; }\n",
                  fn, fn, fn);
        sb_printf(b,
                  "static __device__ __forceinline__ %s_ent %s_pad() { %s_ent e; e.k = 0; e.q = "
                  "0; return e; }\n",
                  fn, fn, fn);
        sb_printf(b,
                  "static __device__ __forceinline__ int64_t %s_pos(%s_ent e) { return "
                  "(int64_t)(uint32_t)~e.q; }\n",
                  fn, fn);
    } else {
        sb_printf(b, "typedef uint64_t %s_ent;\n", fn);
        sb_printf(b,
                  "static __device__ __forceinline__ bool %s_gt(%s_ent a, %s_ent b) { return a > "
                  "b; }\n",
                  fn, fn, fn);
        sb_printf(b,
                  "static __device__ __forceinline__ %s_ent %s_mk(uint32_t k, int64_t pos) { "
                  "return (uint64_t)k << 32 | (uint32_t)~(uint32_t)pos; }\n",
                  fn, fn);
        sb_printf(b, "static __device__ __forceinline__ %s_ent %s_pad() { return 0; }\n", fn, fn);
        sb_printf(b,
                  "static __device__ __forceinline__ int64_t %s_pos(%s_ent e) { return "
                  "(int64_t)(uint32_t)~(uint32_t)e; }\n",
                  fn, fn);
    }
}

// The head shared by both TopK kernels: the line's data and the outputs.
static void topk_locals(const Em *m) {
    const OpqSpec *s = m->s;
    const char *ct = cgen_ctype(s->dt);
    opq_emit_in_ptr(m->b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(m->b, OPQ_DIALECT_CUDA, 1, ct, "yv");
    sb_line(m->b, 1, "int64_t *__restrict__ yi = (int64_t *)a.in[%d];\n", m->ni);
    sb_line(m->b, 1, "(void)bad_;\n");
    sb_line(m->b, 1, "const int64_t LEN = %lld, INNER = %lld, K = %lld;\n", (long long)s->x.len,
            (long long)s->x.inner, (long long)s->y.len);
}

// A block per line. Entries collect in a shared buffer of BUF; once a round of newcomers would
// overflow it, a bitonic sort puts the best first and the k best stay, the k-th of them becoming
// the bar: a later element is a newcomer only when its entry ranks above the bar (an element
// tying with it in key comes later, so ranks lower). The last sort orders the k best for output.
static int emit_topk_sort(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn;
    int64_t buf = topk_buf(s), bs = m->block;
    // Sorts the first n2 entries (a power of two; those from `filled` on padded) best first.
    sb_printf(b, "static __device__ void %s_sort(%s_ent *s, int filled, int n2) {\n", fn, fn);
    sb_line(b, 1, "for (int t = filled + threadIdx.x; t < n2; t += %lld)\n", (long long)bs);
    sb_line(b, 2, "s[t] = %s_pad();\n", fn);
    sb_line(b, 1, "__syncthreads();\n");
    sb_line(b, 1, "for (int size = 2; size <= n2; size <<= 1)\n");
    sb_line(b, 2, "for (int stride = size >> 1; stride > 0; stride >>= 1) {\n");
    sb_line(b, 3, "for (int t = threadIdx.x; t < n2 / 2; t += %lld) {\n", (long long)bs);
    sb_line(b, 4, "int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;\n");
    sb_line(b, 4, "%s_ent p = s[lo], q = s[hi];\n", fn);
    sb_line(b, 4, "if (%s_gt(q, p) == ((lo & size) == 0)) {\n", fn);
    sb_line(b, 5, "s[lo] = q;\n");
    sb_line(b, 5, "s[hi] = p;\n");
    sb_line(b, 4, "}\n");
    sb_line(b, 3, "}\n");
    sb_line(b, 3, "__syncthreads();\n");
    sb_line(b, 2, "}\n");
    sb_puts(b, "}\n");
    sb_printf(b, "static __device__ __forceinline__ int %s_pow2(int n) {\n", fn);
    sb_line(b, 1, "int p = 2;\n");
    sb_line(b, 1, "while (p < n)\n");
    sb_line(b, 2, "p <<= 1;\n");
    sb_line(b, 1, "return p;\n");
    sb_puts(b, "}\n");
    head(m);
    topk_locals(m);
    sb_line(b, 1, "const int BUF = %lld;\n", (long long)buf);
    sb_line(b, 1, "__shared__ %s_ent s[%lld];\n", fn, (long long)buf);
    sb_line(b, 1, "__shared__ int cnt_;\n");
    sb_line(b, 1, "const int64_t line = blockIdx.x, o = line / INNER, i = line %% INNER;\n");
    sb_line(b, 1, "const %s *xl = x + o * LEN * INNER + i;\n", cgen_ctype(s->dt));
    sb_line(b, 1, "int kept = 0;\n");
    sb_line(b, 1, "bool barred = false;\n");
    sb_line(b, 1, "%s_ent bar = %s_pad();\n", fn, fn);
    sb_line(b, 1, "if (threadIdx.x == 0)\n");
    sb_line(b, 2, "cnt_ = 0;\n");
    sb_line(b, 1, "__syncthreads();\n");
    sb_line(b, 1, "for (int64_t base = 0; base < LEN; base += %lld) {\n", (long long)bs);
    sb_line(b, 2, "const int nb = (int)(LEN - base < %lld ? LEN - base : %lld);\n", (long long)bs,
            (long long)bs);
    // Every thread reads the same count (after a barrier, and before the barrier that lets
    // anyone add to it), so the branch is uniform.
    sb_line(b, 2, "const int filled = kept + cnt_;\n");
    sb_line(b, 2, "__syncthreads();\n");
    sb_line(b, 2, "if (filled + nb > BUF) {\n");
    sb_line(b, 3, "%s_sort(s, filled, %s_pow2(filled));\n", fn, fn);
    sb_line(b, 3, "kept = filled < K ? filled : (int)K;\n");
    sb_line(b, 3, "if (kept == K) {\n");
    sb_line(b, 4, "bar = s[K - 1];\n");
    sb_line(b, 4, "barred = true;\n");
    sb_line(b, 3, "}\n");
    sb_line(b, 3, "if (threadIdx.x == 0)\n");
    sb_line(b, 4, "cnt_ = 0;\n");
    sb_line(b, 3, "__syncthreads();\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "if ((int)threadIdx.x < nb) {\n");
    sb_line(b, 3, "const int64_t j = base + threadIdx.x;\n");
    sb_line(b, 3, "%s_ent e = %s_mk(%s_key(xl[j * INNER]), j);\n", fn, fn, fn);
    sb_line(b, 3, "if (!barred || %s_gt(e, bar))\n", fn);
    sb_line(b, 4, "s[kept + atomicAdd(&cnt_, 1)] = e;\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "__syncthreads();\n");
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "const int filled = kept + cnt_;\n");
    sb_line(b, 1, "%s_sort(s, filled, %s_pow2(filled));\n", fn, fn);
    sb_line(b, 1, "for (int j = threadIdx.x; j < K; j += %lld) {\n", (long long)bs);
    sb_line(b, 2, "const int64_t pos = %s_pos(s[j]), to = (o * K + j) * INNER + i;\n", fn);
    opq_emit_topk_store(b, 2, "pos");
    sb_line(b, 1, "}\n");
    sb_puts(b, "}\n");
    int64_t lines = s->x.outer * s->x.inner;
    if (lines > INT32_MAX)
        return ST_UNSUPPORTED;
    m->launch->grid[0] = (unsigned)lines;
    m->launch->grid[1] = m->launch->grid[2] = 1;
    m->launch->block[0] = (unsigned)bs;
    m->launch->block[1] = m->launch->block[2] = 1;
    return ST_OK;
}

// A block per chunk of a line, a thread per element: its rank is the number of entries of the
// line above its own (entries are distinct), staged through shared memory a block at a time;
// an element ranked below k writes its output at its rank, so the output comes sorted.
static int emit_topk_rank(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn;
    int64_t bs = m->block, chunks = (s->x.len + bs - 1) / bs;
    head(m);
    topk_locals(m);
    sb_line(b, 1, "__shared__ %s_ent s[%lld];\n", fn, (long long)bs);
    sb_line(b, 1, "const int64_t line = blockIdx.x / %lld, o = line / INNER, i = line %% INNER;\n",
            (long long)chunks);
    sb_line(b, 1, "const int64_t j = (int64_t)(blockIdx.x %% %lld) * %lld + threadIdx.x;\n",
            (long long)chunks, (long long)bs);
    sb_line(b, 1, "const %s *xl = x + o * LEN * INNER + i;\n", cgen_ctype(s->dt));
    sb_line(b, 1, "const %s_ent mine = j < LEN ? %s_mk(%s_key(xl[j * INNER]), j) : %s_pad();\n", fn,
            fn, fn, fn);
    sb_line(b, 1, "int64_t rank = 0;\n");
    sb_line(b, 1, "for (int64_t base = 0; base < LEN; base += %lld) {\n", (long long)bs);
    sb_line(b, 2, "const int64_t q = base + threadIdx.x;\n");
    sb_line(b, 2, "__syncthreads();\n");
    sb_line(b, 2, "s[threadIdx.x] = q < LEN ? %s_mk(%s_key(xl[q * INNER]), q) : %s_pad();\n", fn,
            fn, fn);
    sb_line(b, 2, "__syncthreads();\n");
    sb_line(b, 2, "for (int t = 0; t < %lld; t++)\n", (long long)bs);
    sb_line(b, 3, "rank += %s_gt(s[t], mine);\n", fn);
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "if (j < LEN && rank < K) {\n");
    sb_line(b, 2, "const int64_t to = (o * K + rank) * INNER + i;\n");
    opq_emit_topk_store(b, 2, "j");
    sb_line(b, 1, "}\n");
    sb_puts(b, "}\n");
    int64_t blocks = s->x.outer * s->x.inner * chunks;
    if (blocks > INT32_MAX)
        return ST_UNSUPPORTED;
    m->launch->grid[0] = (unsigned)blocks;
    m->launch->grid[1] = m->launch->grid[2] = 1;
    m->launch->block[0] = (unsigned)bs;
    m->launch->block[1] = m->launch->block[2] = 1;
    return ST_OK;
}

static int emit_topk(const Em *m) {
    opq_emit_key(m->b, OPQ_DIALECT_CUDA, m->fn, m->s->dt, m->s->largest);
    emit_topk_entries(m);
    return m->alg == CUOPQ_SORT ? emit_topk_sort(m) : emit_topk_rank(m);
}

// ---- CumSum ----

// The head of both CumSum kernels: the run-time axis read and checked, its line geometry.
static void cumsum_head(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt);
    char a1[32];
    int64_t numel = 1;
    for (int d = 0; d < s->rank; d++)
        numel *= s->dims[d];
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    // The axis is read here: one kernel serves every CumSum of this signature (opaque_spec.h).
    sb_line(b, 1, "int64_t ax = (int64_t)*(const %s *)%s;\n", cgen_ctype(s->idx_dt),
            arg_in(m, 1, a1, sizeof a1));
    sb_line(b, 1, "if (ax < -%d || ax >= %d) {\n", s->rank, s->rank);
    sb_line(b, 2, "*bad_ = %d;\n", CKERNEL_ERR_INDEX);
    sb_line(b, 2, "return;\n");
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "if (ax < 0)\n");
    sb_line(b, 2, "ax += %d;\n", s->rank);
    sb_line(b, 1, "int64_t LEN = 1, INNER = 1;\n");
    sb_line(b, 1, "switch (ax) {\n");
    for (int a = 0; a < s->rank; a++) {
        int64_t inner = 1;
        for (int d = a + 1; d < s->rank; d++)
            inner *= s->dims[d];
        sb_line(b, 1, "case %d: LEN = %lld; INNER = %lld; break;\n", a, (long long)s->dims[a],
                (long long)inner);
    }
    sb_line(b, 1, "}\n");
    sb_line(b, 1, "const int64_t LINES = %lld / LEN;\n", (long long)numel);
}

// A block per line of the run-time axis (a block-stride loop over the lines: the grid covers the
// most lines any axis has), a block of elements at a time: each element's sum within the block
// by a warp scan and a scan of the warps' totals, plus the carry of the blocks before.
static int emit_cumsum_scan(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *ut = dtype_size(s->dt) == 8 ? "uint64_t" : "uint32_t";
    int64_t numel = 1, shortest = INT64_MAX, bs = m->block;
    for (int d = 0; d < s->rank; d++) {
        numel *= s->dims[d];
        shortest = ORCH_MIN(shortest, s->dims[d]);
    }
    cumsum_head(m);
    sb_line(b, 1, "__shared__ %s tot_[32];\n", ut);
    sb_line(b, 1, "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
    sb_line(b, 1, "for (int64_t line = blockIdx.x; line < LINES; line += gridDim.x) {\n");
    sb_line(b, 2, "const int64_t o = line / INNER, i = line %% INNER;\n");
    sb_line(b, 2, "const %s *xl = x + o * LEN * INNER + i;\n", ct);
    sb_line(b, 2, "%s *yl = y + o * LEN * INNER + i;\n", ct);
    sb_line(b, 2, "%s carry = 0;\n", ut);
    sb_line(b, 2, "for (int64_t base = 0; base < LEN; base += %lld) {\n", (long long)bs);
    sb_line(b, 3, "const int64_t st = base + threadIdx.x, j = (%s) * INNER;\n",
            s->reverse ? "LEN - 1 - st" : "st");
    sb_line(b, 3, "const %s v = st < LEN ? (%s)xl[j] : 0;\n", ut, ut);
    sb_line(b, 3, "%s inc = v;\n", ut);
    sb_line(b, 3, "for (int d = 1; d < 32; d <<= 1) {\n");
    sb_line(b, 4, "const %s n = __shfl_up_sync(ORCH_FULL_MASK, inc, d);\n", ut);
    sb_line(b, 4, "if (lane >= d)\n");
    sb_line(b, 5, "inc += n;\n");
    sb_line(b, 3, "}\n");
    sb_line(b, 3, "if (lane == 31)\n");
    sb_line(b, 4, "tot_[warp] = inc;\n");
    sb_line(b, 3, "__syncthreads();\n");
    sb_line(b, 3, "if (warp == 0) {\n");
    sb_line(b, 4, "%s w = lane < %lld ? tot_[lane] : 0;\n", ut, (long long)(bs / 32));
    sb_line(b, 4, "for (int d = 1; d < 32; d <<= 1) {\n");
    sb_line(b, 5, "const %s n = __shfl_up_sync(ORCH_FULL_MASK, w, d);\n", ut);
    sb_line(b, 5, "if (lane >= d)\n");
    sb_line(b, 6, "w += n;\n");
    sb_line(b, 4, "}\n");
    sb_line(b, 4, "tot_[lane] = w;\n");
    sb_line(b, 3, "}\n");
    sb_line(b, 3, "__syncthreads();\n");
    sb_line(b, 3, "inc += carry + (warp ? tot_[warp - 1] : 0);\n");
    sb_line(b, 3, "if (st < LEN)\n");
    sb_line(b, 4, "yl[j] = (%s)(%s);\n", ct, s->exclusive ? "inc - v" : "inc");
    sb_line(b, 3, "carry += tot_[%lld];\n", (long long)(bs / 32 - 1));
    sb_line(b, 3, "__syncthreads();\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 1, "}\n");
    sb_puts(b, "}\n");
    int64_t lines = numel / ORCH_MAX(shortest, 1);
    int64_t cap = (int64_t)m->dev.sms * ORCH_MAX(1, m->dev.threads_sm / bs) * 8;
    m->launch->grid[0] = (unsigned)ORCH_MAX(1, ORCH_MIN(lines, cap));
    m->launch->grid[1] = m->launch->grid[2] = 1;
    m->launch->block[0] = (unsigned)bs;
    m->launch->block[1] = m->launch->block[2] = 1;
    return ST_OK;
}

// A thread per line of the run-time axis, its sum in a register (the stored type: exact).
static int emit_cumsum(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt);
    int64_t numel = 1, shortest = INT64_MAX;
    for (int d = 0; d < s->rank; d++) {
        numel *= s->dims[d];
        shortest = ORCH_MIN(shortest, s->dims[d]);
    }
    if (m->alg == CUOPQ_SCAN)
        return emit_cumsum_scan(m);
    cumsum_head(m);
    sb_line(b, 1, "const %s zero = 0;\n", ct);
    // The grid covers the most lines any axis has (the shortest axis').
    flat_loop(m, 1, "line", numel / ORCH_MAX(shortest, 1));
    sb_line(b, 2, "if (line >= LINES)\n");
    sb_line(b, 3, "break;\n");
    sb_line(b, 2, "const int64_t o = line / INNER, i = line %% INNER;\n");
    sb_line(b, 2, "const %s *xl = x + o * LEN * INNER + i;\n", ct);
    sb_line(b, 2, "%s *yl = y + o * LEN * INNER + i;\n", ct);
    sb_line(b, 2, "%s acc = zero;\n", ct);
    sb_line(b, 2, "for (int64_t st = 0; st < LEN; st++) {\n");
    sb_line(b, 3, "const int64_t j = (%s) * INNER;\n", s->reverse ? "LEN - 1 - st" : "st");
    opq_emit_cumsum_acc(b, 3, s->dt, s->exclusive, "acc", "xl[j]", "yl[j]");
    sb_line(b, 2, "}\n");
    return tail(m);
}

// ---- Hardmax ----

static int emit_hardmax(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt);
    const char *kt = opq_wide_key(s->dt) ? "uint64_t" : "uint32_t";
    opq_emit_key(b, OPQ_DIALECT_CUDA, fn, s->dt, true);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "(void)bad_;\n");
    sb_line(b, 1, "const int64_t LEN = %lld, INNER = %lld;\n", (long long)s->x.len,
            (long long)s->x.inner);
    opq_emit_hardmax_consts(b, 1, s->dt);
    int64_t lines = s->x.outer * s->x.inner;
    if (m->alg == CUOPQ_WARP) {
        // A warp per line: each lane the first best of its elements, then the best of the lanes
        // (a higher key, or an equal key at a lower position).
        flat_loop(m, 1, "t", lines * 32);
        sb_line(b, 2, "const int64_t line = t >> 5;\n");
        sb_line(b, 2, "const int lane = threadIdx.x & 31;\n");
        sb_line(b, 2,
                "const int64_t o = line / INNER, i = line %% INNER, base = o * LEN * INNER + "
                "i;\n");
        sb_line(b, 2, "%s best = 0;\n", kt);
        sb_line(b, 2, "int64_t bj = LEN;\n");
        sb_line(b, 2, "for (int64_t j = lane; j < LEN; j += 32) {\n");
        sb_line(b, 3, "const %s k = %s_key(x[base + j * INNER]);\n", kt, fn);
        sb_line(b, 3, "if (bj == LEN || k > best) {\n");
        sb_line(b, 4, "best = k;\n");
        sb_line(b, 4, "bj = j;\n");
        sb_line(b, 3, "}\n");
        sb_line(b, 2, "}\n");
        sb_line(b, 2, "for (int off = 16; off > 0; off >>= 1) {\n");
        sb_line(b, 3, "const %s ok = __shfl_xor_sync(ORCH_FULL_MASK, best, off);\n", kt);
        sb_line(b, 3, "const int64_t oj = __shfl_xor_sync(ORCH_FULL_MASK, bj, off);\n");
        sb_line(b, 3, "if (oj < LEN && (bj == LEN || ok > best || (ok == best && oj < bj))) {\n");
        sb_line(b, 4, "best = ok;\n");
        sb_line(b, 4, "bj = oj;\n");
        sb_line(b, 3, "}\n");
        sb_line(b, 2, "}\n");
        sb_line(b, 2, "for (int64_t j = lane; j < LEN; j += 32)\n");
        sb_line(b, 3, "y[base + j * INNER] = j == bj ? one : zero;\n");
        sb_line(b, 1, "}\n");
    } else {
        // A thread per line: the first best (a later element must rank strictly higher).
        flat_loop(m, 1, "line", lines);
        sb_line(b, 2,
                "const int64_t o = line / INNER, i = line %% INNER, base = o * LEN * INNER + i;\n");
        sb_line(b, 2, "int64_t bj = 0;\n");
        opq_emit_hardmax_scan(b, OPQ_DIALECT_CUDA, fn, s->dt);
        sb_line(b, 1, "}\n");
    }
    sb_puts(b, "}\n");
    return ST_OK;
}

// ---- Trilu ----

static int emit_trilu(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt);
    char a1[32];
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "(void)bad_;\n");
    sb_line(b, 1, "const int64_t ROWS = %lld, COLS = %lld;\n", (long long)s->x.len,
            (long long)s->x.inner);
    opq_emit_trilu_k(b, s, arg_in(m, 1, a1, sizeof a1));
    flat_loop(m, 1, "t", s->x.outer * s->x.len * s->x.inner);
    sb_line(b, 2, "const int64_t c = t %% COLS, r = (t / COLS) %% ROWS;\n");
    // upper: keep columns c >= r + k; lower: keep c <= r + k.
    sb_line(b, 2, "const bool keep = %s;\n", s->upper ? "c >= r + k" : "c <= r + k");
    sb_line(b, 2, "y[t] = keep ? x[t] : (%s)0;\n", ct);
    return tail(m);
}

// ---- Gather ----

// A thread per output element (o, j, i): consecutive threads read consecutive elements of the
// row an index selects (an embedding lookup reads whole rows, coalesced).
static int emit_gather(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, it, "idx", m->s->in[1]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "const int64_t SIZE = %lld, INNER = %lld, COUNT = %lld;\n", (long long)s->x.len,
            (long long)s->x.inner, (long long)s->tuples);
    flat_loop(m, 1, "t", s->x.outer * s->tuples * s->x.inner);
    sb_line(b, 2, "const int64_t i = t %% INNER, r = t / INNER, j = r %% COUNT, o = r / COUNT;\n");
    emit_index(m, 2, "v", "idx[j]", "SIZE", "continue;");
    sb_line(b, 2, "y[t] = x[(o * SIZE + v) * INNER + i];\n");
    return tail(m);
}

// ---- GatherElements, ScatterElements ----

// y = combine(y, u) for the scatter ops' reduction (opq_emit_combine: CUDA's rounded sums and
// products, which nothing fuses into a neighbouring FMA).
static void emit_combine(const Em *m, int indent, const char *yv, const char *uv) {
    opq_emit_combine(m->b, OPQ_DIALECT_CUDA, indent, m->s->dt, m->s->red, yv, uv);
}

// GatherElements: a thread per output (index) element (o, j, i), reading the data at
// (o, idx, i) through the data's strides.
static void emit_gather_elements(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    flat_loop(m, 1, "k", s->y.outer * s->y.len * s->y.inner);
    sb_line(b, 2, "const int64_t i = k %% INNER, o = k / (LEN * INNER);\n");
    // The data offset of o's and i's coordinates (the index dims') at the data's strides.
    if (s->same_off_axis) {
        sb_line(b, 2, "const int64_t xo = o * XLEN * XSTRIDE, xi = i;\n");
    } else {
        sb_line(b, 2, "int64_t xo = 0, xi = 0, q = o;\n");
        for (int d = s->axis - 1; d >= 0; d--)
            sb_line(b, 2, "xo += q %% %lld * %lld, q /= %lld;\n", (long long)s->idx_dims[d],
                    (long long)s->strides[d], (long long)s->idx_dims[d]);
        sb_line(b, 2, "q = i;\n");
        for (int d = s->rank - 1; d > s->axis; d--)
            sb_line(b, 2, "xi += q %% %lld * %lld, q /= %lld;\n", (long long)s->idx_dims[d],
                    (long long)s->strides[d], (long long)s->idx_dims[d]);
    }
    emit_index(m, 2, "v", "idx[k]", "XLEN", "continue;");
    sb_line(b, 2, "y[k] = x[xo + v * XSTRIDE + xi];\n");
    sb_line(b, 1, "}\n");
}

// ScatterElements: a thread per data line (ox, ix) around the axis copies the line, then applies
// the index line with the same coordinates off the axis (the only one that addresses it), in
// order: the reference's order of updates, so repeated indices and reductions come out the same.
static void emit_scatter_elements(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    flat_loop(m, 1, "line", s->x.outer * s->x.inner);
    sb_line(b, 2, "const int64_t ox = line / XSTRIDE, ix = line %% XSTRIDE;\n");
    sb_line(b, 2, "const int64_t xo = ox * XLEN * XSTRIDE + ix;\n");
    sb_line(b, 2, "for (int64_t j = 0; j < XLEN; j++)\n");
    sb_line(b, 3, "y[xo + j * XSTRIDE] = x[xo + j * XSTRIDE];\n");
    if (s->same_off_axis) {
        sb_line(b, 2, "const int64_t o = ox, i = ix;\n");
    } else {
        // The index line of the same coordinates, if the indices reach them.
        sb_line(b, 2, "int64_t o = 0, i = 0, q = ox, io = 1;\n");
        sb_line(b, 2, "bool in_ = true;\n");
        for (int d = s->axis - 1; d >= 0; d--) {
            sb_line(b, 2, "{\n");
            sb_line(b, 3, "const int64_t c = q %% %lld;\n", (long long)s->dims[d]);
            sb_line(b, 3, "q /= %lld;\n", (long long)s->dims[d]);
            sb_line(b, 3, "in_ = in_ && c < %lld;\n", (long long)s->idx_dims[d]);
            sb_line(b, 3, "o += c * io;\n");
            sb_line(b, 3, "io *= %lld;\n", (long long)s->idx_dims[d]);
            sb_line(b, 2, "}\n");
        }
        sb_line(b, 2, "q = ix;\n");
        sb_line(b, 2, "io = 1;\n");
        for (int d = s->rank - 1; d > s->axis; d--) {
            sb_line(b, 2, "{\n");
            sb_line(b, 3, "const int64_t c = q %% %lld;\n", (long long)s->dims[d]);
            sb_line(b, 3, "q /= %lld;\n", (long long)s->dims[d]);
            sb_line(b, 3, "in_ = in_ && c < %lld;\n", (long long)s->idx_dims[d]);
            sb_line(b, 3, "i += c * io;\n");
            sb_line(b, 3, "io *= %lld;\n", (long long)s->idx_dims[d]);
            sb_line(b, 2, "}\n");
        }
        sb_line(b, 2, "if (!in_)\n");
        sb_line(b, 3, "continue;\n");
    }
    sb_line(b, 2, "for (int64_t j = 0; j < LEN; j++) {\n");
    sb_line(b, 3, "const int64_t k = (o * LEN + j) * INNER + i;\n");
    emit_index(m, 3, "v", "idx[k]", "XLEN", "continue;");
    emit_combine(m, 3, "y[xo + v * XSTRIDE]", "u[k]");
    sb_line(b, 2, "}\n");
    sb_line(b, 1, "}\n");
}

static int emit_elements(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    bool scatter = s->op == OPQ_SCATTER_ELEMENTS;
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, it, "idx", m->s->in[1]);
    if (scatter)
        opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "u", m->s->in[2]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    // Index lines [LEN, INNER] around the axis; the data's axis is XLEN long, its positions
    // XSTRIDE apart.
    sb_line(b, 1, "const int64_t LEN = %lld, INNER = %lld, XLEN = %lld, XSTRIDE = %lld;\n",
            (long long)s->y.len, (long long)s->y.inner, (long long)s->x.len, (long long)s->x.inner);
    if (scatter)
        emit_scatter_elements(m);
    else
        emit_gather_elements(m);
    sb_puts(b, "}\n");
    return ST_OK;
}

// ---- GatherND, ScatterND ----

// __device__ int64_t fn_off(idx, t): the slice offset of index tuple t in its batch's block (as
// nd_offsets in src/ops/indexing.c), each index wrapped and checked; -1 (with the status stored)
// for a bad one.
static void emit_nd_offset(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *it = cgen_ctype(s->idx_dt);
    sb_printf(b,
              "static __device__ __forceinline__ int64_t %s_off(const %s *__restrict__ idx, "
              "int64_t t, int *bad_) {\n",
              m->fn, it);
    sb_line(b, 1, "int64_t off = 0;\n");
    for (int64_t q = 0; q < s->depth; q++) {
        char src[64], dim[32];
        snprintf(src, sizeof src, "idx[t * %lld + %lld]", (long long)s->depth, (long long)q);
        snprintf(dim, sizeof dim, "%lld", (long long)s->dims[s->batch + q]);
        sb_line(b, 1, "{\n");
        emit_index(m, 2, "v", src, dim, "return -1;");
        sb_line(b, 2, "off = off * %s + v;\n", dim);
        sb_line(b, 1, "}\n");
    }
    sb_line(b, 1, "return off;\n");
    sb_puts(b, "}\n");
}

static int emit_nd(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    bool scatter = s->op == OPQ_SCATTER_ND;
    emit_nd_offset(m);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, it, "idx", m->s->in[1]);
    if (scatter)
        opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "u", m->s->in[2]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "const int64_t TUPLES = %lld, SLICE = %lld;\n", (long long)s->tuples,
            (long long)s->slice);
    if (!scatter) {
        // A thread per output element (tuple t, slice position e).
        flat_loop(m, 1, "k", s->tuples * s->slice);
        sb_line(b, 2, "const int64_t t = k / SLICE, e = k %% SLICE;\n");
        sb_line(b, 2, "const int64_t off = %s_off(idx, t, bad_);\n", fn);
        sb_line(b, 2, "if (off < 0)\n");
        sb_line(b, 3, "continue;\n");
        if (s->per_batch)
            sb_line(b, 2, "y[k] = x[(t / %lld) * %lld + off * SLICE + e];\n",
                    (long long)s->per_batch, (long long)s->block);
        else
            sb_line(b, 2, "y[k] = x[off * SLICE + e];\n");
        sb_line(b, 1, "}\n");
    } else {
        // A thread per slice position e: it copies the data's column e, then applies every
        // tuple in order (tuples may repeat; a tuple's element e only meets other tuples'
        // element e).
        sb_line(b, 1, "const int64_t ROWS = %lld;\n", (long long)(s->block / s->slice));
        flat_loop(m, 1, "e", s->slice);
        sb_line(b, 2, "for (int64_t r = 0; r < ROWS; r++)\n");
        sb_line(b, 3, "y[r * SLICE + e] = x[r * SLICE + e];\n");
        sb_line(b, 2, "for (int64_t t = 0; t < TUPLES; t++) {\n");
        sb_line(b, 3, "const int64_t off = %s_off(idx, t, bad_);\n", fn);
        sb_line(b, 3, "if (off < 0)\n");
        sb_line(b, 4, "continue;\n");
        emit_combine(m, 3, "y[off * SLICE + e]", "u[t * SLICE + e]");
        sb_line(b, 2, "}\n");
        sb_line(b, 1, "}\n");
    }
    sb_puts(b, "}\n");
    return ST_OK;
}

// ---- OneHot ----

// A thread per output element (o, d, i): on where the index at (o, i) selects d. An index outside
// [-depth, depth) selects nothing (no error), as in the reference op.
static int emit_one_hot(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, it, "ind", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "vals", m->s->in[2]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "(void)bad_;\n");
    sb_line(b, 1, "const int64_t DEPTH = %lld, INNER = %lld;\n", (long long)s->y.len,
            (long long)s->y.inner);
    sb_line(b, 1, "const %s off = vals[0], on = vals[1];\n", ct);
    flat_loop(m, 1, "t", s->y.outer * s->y.len * s->y.inner);
    sb_line(b, 2,
            "const int64_t i = t %% INNER, d = (t / INNER) %% DEPTH, o = t / (DEPTH * "
            "INNER);\n");
    opq_emit_one_hot_index(b, 2);
    sb_line(b, 2, "y[t] = v == d ? on : off;\n");
    return tail(m);
}

// ---- ReverseSequence ----

// A thread per output element; a length outside [0, T] stores the status, and its batch's
// elements are not written.
static int emit_reverse_sequence(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt), *it = cgen_ctype(s->idx_dt);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, it, "lens", m->s->in[1]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "const int64_t D1 = %lld, REST = %lld, T = %lld;\n", (long long)s->dims[1],
            (long long)s->rest, (long long)s->dims[s->time_axis]);
    flat_loop(m, 1, "k", s->dims[0] * s->dims[1] * s->rest);
    sb_line(b, 2, "const int64_t r = k / REST, e = k %% REST, d0 = r / D1, d1 = r %% D1;\n");
    sb_line(b, 2, "const int64_t bi = %s, t = %s, len = (int64_t)lens[bi];\n",
            s->batch_axis == 0 ? "d0" : "d1", s->batch_axis == 0 ? "d1" : "d0");
    sb_line(b, 2, "if (len < 0 || len > T) {\n");
    sb_line(b, 3, "*bad_ = %d;\n", CKERNEL_ERR_INDEX);
    sb_line(b, 3, "continue;\n");
    sb_line(b, 2, "}\n");
    sb_line(b, 2, "const int64_t ts = t < len ? len - 1 - t : t;\n");
    sb_line(b, 2, "const int64_t from = %s;\n",
            s->batch_axis == 0 ? "d0 * D1 + ts" : "ts * D1 + d1");
    sb_line(b, 2, "y[k] = x[from * REST + e];\n");
    return tail(m);
}

// ---- LpPool ----

// A thread per output element: |x|^p summed over its window's taps inside the input in the
// reference's order (pool.c's geometry), in double, then the 1/p power (p = 1: the sum itself;
// p = 2: its square root); a half output through float rounded to odd, as elem_set_f64 does.
static int emit_lp_pool(const Em *m) {
    const OpqSpec *s = m->s;
    const PoolGeom *g = &s->pool;
    StrBuf *b = m->b;
    const char *ct = cgen_ctype(s->dt);
    char y[96];
    int64_t plane, outs, taps;
    opq_pool_sizes(g, &plane, &outs, &taps);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "x", m->s->in[0]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "y");
    sb_line(b, 1, "(void)bad_;\n");
    flat_loop(m, 1, "r", s->dims[0] * s->dims[1] * outs);
    sb_line(b, 2, "int64_t q = r %% %lld;\n", (long long)outs);
    for (int i = g->S - 1; i >= 0; i--) {
        sb_line(b, 2, "const int64_t o%d = q %% %lld;\n", i, (long long)g->out[i]);
        sb_line(b, 2, "q /= %lld;\n", (long long)g->out[i]);
    }
    sb_line(b, 2, "const %s *xp = x + (r / %lld) * %lld;\n", ct, (long long)outs, (long long)plane);
    sb_line(b, 2, "double acc = 0;\n");
    sb_line(b, 2, "for (int64_t tap = 0; tap < %lld; tap++) {\n", (long long)taps);
    sb_line(b, 3, "int64_t t = tap, row = 0;\n");
    for (int i = g->S - 1; i >= 0; i--) {
        sb_line(b, 3, "const int64_t k%d = t %% %lld;\n", i, (long long)g->k[i]);
        sb_line(b, 3, "t /= %lld;\n", (long long)g->k[i]);
    }
    sb_line(b, 3, "bool inside = true;\n");
    for (int i = 0; i < g->S; i++) {
        sb_line(b, 3, "const int64_t p%d = o%d * %lld - %lld + k%d * %lld;\n", i, i,
                (long long)g->s[i], (long long)g->pb[i], i, (long long)g->d[i]);
        sb_line(b, 3, "inside = inside && p%d >= 0 && p%d < %lld;\n", i, i, (long long)g->in[i]);
        sb_line(b, 3, "row = row * %lld + p%d;\n", (long long)g->in[i], i);
    }
    opq_emit_lp_tap(b, OPQ_DIALECT_CUDA, s->dt);
    // Rounded adds (the square of a float is exact in double, so nothing would change if the
    // compiler fused them, but nothing is left to it).
    sb_line(b, 3, "acc = %s;\n",
            g->p == 1 ? "__dadd_rn(acc, v)" : "__dadd_rn(acc, __dmul_rn(v, v))");
    sb_line(b, 2, "}\n");
    const char *res = g->p == 1 ? "acc" : "sqrt(acc)";
    char e[64];
    if (s->dt == DT_FLOAT)
        snprintf(e, sizeof e, "__double2float_rn(%s)", res);
    else
        snprintf(e, sizeof e, "orch_f32_round_odd(%s)", res);
    opq_store_f(s->dt, e, y, sizeof y);
    sb_line(b, 2, "y[r] = %s;\n", y);
    return tail(m);
}

// ---- GridSample, RoiAlign ----

// A thread per output element, computing its value with the helpers both targets share
// (opaque_values.c: src/ops/sample.c's double arithmetic step for step). A RoiAlign batch index
// out of range stores the status word and skips the element.
static int emit_sample(const Em *m) {
    const OpqSpec *s = m->s;
    StrBuf *b = m->b;
    const char *fn = m->fn, *xt = cgen_ctype(s->dt), *ct = cgen_ctype(s->dt2);
    char y[448], v[320];
    opq_emit_sample_helpers(b, OPQ_DIALECT_CUDA, fn, s);
    head(m);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, xt, "x", s->in[0]);
    opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, ct, "c2", s->in[1]);
    opq_emit_out_ptr(b, OPQ_DIALECT_CUDA, 1, xt, "y");
    if (s->op == OPQ_GRID_SAMPLE) {
        const GridSampleGeom *g = &s->gs;
        sb_line(b, 1, "(void)bad_;\n");
        flat_loop(m, 1, "k", g->N * g->C * g->points);
        sb_line(b, 2, "const int64_t p = k %% %lld, nc = k / %lld;\n", (long long)g->points,
                (long long)g->points);
        sb_line(b, 2, "%s_plan P;\n", fn);
        sb_line(b, 2, "%s_plan_of(c2 + ((nc / %lld) * %lld + p) * %d, &P);\n", fn, (long long)g->C,
                (long long)g->points, g->sr);
        snprintf(v, sizeof v, "%s_out(%s_apply(x + nc * %lld, &P))", fn, fn, (long long)g->plane);
    } else {
        const RoiAlignGeom *g = &s->ra;
        opq_emit_in_ptr(b, OPQ_DIALECT_CUDA, 1, cgen_ctype(s->idx_dt), "bi", s->in[2]);
        flat_loop(m, 1, "k", g->R * g->C * g->OH * g->OW);
        sb_line(b, 2, "const int64_t pw = k %% %lld, ph = (k / %lld) %% %lld, qc = k / %lld;\n",
                (long long)g->OW, (long long)g->OW, (long long)g->OH, (long long)(g->OW * g->OH));
        sb_line(b, 2, "const int64_t q = qc / %lld, c = qc %% %lld, n = (int64_t)bi[q];\n",
                (long long)g->C, (long long)g->C);
        sb_line(b, 2, "if (n < 0 || n >= %lld) {\n", (long long)g->N);
        sb_line(b, 3, "*bad_ = %d;\n", CKERNEL_ERR_INDEX);
        sb_line(b, 3, "continue;\n");
        sb_line(b, 2, "}\n");
        snprintf(v, sizeof v, "%s_out(%s_roi(x + (n * %lld + c) * %lld, c2 + q * 4, ph, pw))",
                 fn, fn, (long long)g->C, (long long)(g->H * g->W));
    }
    opq_sample_store(s->dt, v, y, sizeof y);
    sb_line(b, 2, "y[k] = %s;\n", y);
    tail(m);
    opq_emit_sample_close(b, OPQ_DIALECT_CUDA);
    return ST_OK;
}

int cugen_opq_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                   const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                   CudaLaunch *launch, Err *e) {
    OpqSpec s;
    char why[160] = "";
    CuOpqConfig t;
    if (!cuopq_config_unpack(cfg, &t) || !cugen_opq_supports(pg, c, opt) ||
        !opq_analyse(pg, c, &s, why, sizeof why))
        return err_set(e, ST_UNSUPPORTED, "kernel %s: not a CUDA operator kernel (%s)", fn,
                       cfg->cls != CUCLS_OPAQUE ? "another class's config"
                       : why[0]                 ? why
                                                : "its operands do not fit the kernel ABI");
    bool alg_ok = s.op == OPQ_TOPK
                      ? (t.alg == CUOPQ_RANK || (t.alg == CUOPQ_SORT && topk_sort_fits(&s)))
                  : s.op == OPQ_HARDMAX ? (t.alg == CUOPQ_PLAIN || t.alg == CUOPQ_WARP)
                  : s.op == OPQ_CUMSUM
                      ? (t.alg == CUOPQ_PLAIN || (t.alg == CUOPQ_SCAN && !dtype_is_float(s.dt)))
                      : t.alg == CUOPQ_PLAIN;
    if (!alg_ok)
        return err_set(e, ST_UNSUPPORTED, "kernel %s: algorithm %lld is not one of %s's", fn,
                       (long long)t.alg, opq_op_name(s.op));
    bool pow2 = t.block >= 32 && t.block <= 1024 && (t.block & (t.block - 1)) == 0;
    if (!pow2 || (s.op == OPQ_TOPK && t.alg == CUOPQ_SORT && t.block != topk_block(&s)))
        return err_set(e, ST_UNSUPPORTED, "kernel %s: block of %lld threads", fn,
                       (long long)t.block);
    CudaLaunch l;
    memset(&l, 0, sizeof l);
    Em m = {pg, &s, fn, t.block, t.alg, c->n_inputs, src, cudev_of(hw), &l};
    int rc = ST_UNSUPPORTED;
    switch (s.op) {
    case OPQ_TOPK: rc = emit_topk(&m); break;
    case OPQ_CUMSUM: rc = emit_cumsum(&m); break;
    case OPQ_HARDMAX: rc = emit_hardmax(&m); break;
    case OPQ_TRILU: rc = emit_trilu(&m); break;
    case OPQ_GATHER: rc = emit_gather(&m); break;
    case OPQ_GATHER_ELEMENTS:
    case OPQ_SCATTER_ELEMENTS: rc = emit_elements(&m); break;
    case OPQ_GATHER_ND:
    case OPQ_SCATTER_ND: rc = emit_nd(&m); break;
    case OPQ_ONE_HOT: rc = emit_one_hot(&m); break;
    case OPQ_REVERSE_SEQUENCE: rc = emit_reverse_sequence(&m); break;
    case OPQ_LP_POOL: rc = emit_lp_pool(&m); break;
    case OPQ_GRID_SAMPLE:
    case OPQ_ROI_ALIGN: rc = emit_sample(&m); break;
    default: break;
    }
    if (rc)
        return err_set(e, rc, "kernel %s: %s has too many lines for one grid", fn,
                       opq_op_name(s.op));
    if (launch)
        *launch = l;
    return ST_OK;
}
