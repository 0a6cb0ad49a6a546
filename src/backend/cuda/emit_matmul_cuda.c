// GEMM kernel bodies of the CUDA target's linear emitter (see cugen_lin_internal.h):
//   simt  a BM x BN block tile per thread block, K in BK slices staged through double-buffered
//         shared memory (A stored transposed, k-major, so the compute loop reads both operands as
//         float4 rows), each thread a TM x TN register tile of exact float32 FMAs; the next slice
//         is loaded into registers (float4 where the operand is a kernel input and aligned;
//         prologue values through cexpr otherwise, the conv patch gathered here) while the
//         current one is multiplied; the epilogue runs on the register tile before the store;
//   tf32  the same staging with warp tiles of 32 x 32 on mma.sync.m16n8k8 TF32 tensor cores
//         (operands rounded with cvt.rna.tf32.f32; only offered under PREC_TF32);
//   f16 / bf16  the same staging and warp tiles on mma.sync.m16n8k16 with half / bfloat16
//         operands: the staged float32 registers are rounded (cvt.rn) as they are stored into
//         shared memory, which holds k-pairs (two halves, the lower k in the low 16 bits) as
//         32-bit words, so each fragment register is one conflict-free 32-bit load; float32
//         accumulators and the same epilogue (only offered under PREC_FP16 / _BF16).
// No cp.async pipeline on float32 tensors: the staging goes through registers because prologue
// values, the conv patch gather and the rounding to half happen there. On half tensors (the
// storage pass under fp16 / bf16) the f16 / bf16 kernel keeps tiles as stored: cp.async for
// 16-byte runs of kernel inputs (three buffers deep when both operands are), ldmatrix fragment
// loads (mma16_half); simt and gemv convert on load and round once on store.
// Split-K (CUL_SPLIT, cugen_linear.h) in simt, tf32 and f16 / bf16 alike: gridDim.z runs over
// batch x splits, each block multiplies its run of K slices, and the last block of a tile sums
// the float32 partials from the module's workspace before the epilogue.
//   gemv  M <= 8: lanes on output columns (B rows read coalesced), warps splitting K, a shared
//         memory reduction; gemvk: a warp per column, lanes splitting K, a warp-shuffle sum.
// The thread (ty, tx) of a simt block owns rows (im/4)*4*(BM/TM) + ty*4 + im%4 and likewise
// columns: float4 groups interleaved across threads, so a warp's shared-memory reads and global
// stores are contiguous.
#include "cugen_lin_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct Op {
    bool direct; // read in place from in[input] + base + row * ld + col
    bool vec;    // ... as float4 along the contiguous axis
    bool rolled; // a long prologue: stored straight to shared memory from a loop not unrolled
                 // in full (load_op), not staged in registers
    int input;
    char base[96];
    long long ld;
} Op;

// A (M x K, contiguous along K) and B (K x N, contiguous along N) as the staging loads see them.
static void operands(const Lin *L, int bm, int bk, int bn, Op *A, Op *B) {
    memset(A, 0, sizeof *A);
    memset(B, 0, sizeof *B);
    if (L->conv) {
        A->direct = L->pb >= 0 && !L->convt; // convt: W is C x OC/G x k, read per element
        A->input = L->pb;
        snprintf(A->base, sizeof A->base, "q_g * %lld", (long long)(L->OCg * L->K));
        B->direct = L->b_direct_ok && L->pa >= 0;
        B->input = L->pa;
        snprintf(B->base, sizeof B->base, "(q_n * %lld + q_g * %lld) * %lld", (long long)L->C,
                 (long long)L->Cg, (long long)L->ipix);
    } else {
        A->direct = L->pa >= 0;
        A->input = L->pa;
        snprintf(A->base, sizeof A->base, "aoff");
        B->direct = L->pb >= 0;
        B->input = L->pb;
        snprintf(B->base, sizeof B->base, "boff");
    }
    A->ld = (long long)L->K;
    B->ld = (long long)L->N;
    A->vec = A->direct && L->K % 4 == 0 && bk % 4 == 0;
    B->vec = B->direct && L->N % 4 == 0 && bn % 4 == 0;
    (void)bm;
}

// "e_ < n && " when the last staging round is partial (n elements over nt threads), else "".
static const char *ebound(char *buf, int n, int nt) {
    buf[0] = 0;
    if (n % nt)
        snprintf(buf, 32, "e_ < %d && ", n);
    return buf;
}

// Opens a thread's loop over its share of a tile's elements (closed by the caller at ind): per
// steps q, element e_ = tid + q * nt, unrolled.
static void share_loop(StrBuf *s, int ind, int per, int nt) {
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int q = 0; q < %d; q++) {\n", per);
    sb_line(s, ind + 1, "const int e_ = tid + q * %d;\n", nt);
}

// `v_ = ` one element of input `in` at base + row * ld + col, as a float.
static void load1(Emit *E, int ind, int in, const char *base, const char *row, long long ld,
                  const char *col) {
    char x[200], v[260];
    snprintf(x, sizeof x, "in%d[%s + %s * %lld + %s]", in, base, row, ld, col);
    if (culin_half(E->L))
        culin_h2f(E->L, x, v, sizeof v);
    sb_line(E->s, ind, "v_ = %s;\n", culin_half(E->L) ? v : x);
}

// `v_ = ` four consecutive half elements (one 8-byte load) as a float4.
static void load4_half(Emit *E, int ind, int in, const char *base, const char *row, long long ld,
                       const char *col) {
    StrBuf *s = E->s;
    char c[4][64];
    static const char *const part[4] = {"(uint16_t)u_.x", "(uint16_t)(u_.x >> 16)",
                                        "(uint16_t)u_.y", "(uint16_t)(u_.y >> 16)"};
    for (int q = 0; q < 4; q++)
        culin_h2f(E->L, part[q], c[q], sizeof c[q]);
    sb_line(s, ind, "{\n");
    sb_line(s, ind + 1, "const uint2 u_ = *(const uint2 *)(in%d + %s + %s * %lld + %s);\n", in,
            base, row, ld, col);
    sb_line(s, ind + 1, "v_ = make_float4(%s, %s, %s, %s);\n", c[0], c[1], c[2], c[3]);
    sb_line(s, ind, "}\n");
}

// ---- the conv patch gather through a per-slice table ----
// B's element (k, j) of a 2-D conv is X[c][oh*st - pad + dh][ow*st - pad + dw] with c, dh, dw
// from k (c = k / kpix, the window offset r = k % kpix) and oh, ow from j: four divisions and
// 64-bit index arithmetic per element, which made the staging, not the multiplies, the bound of
// the tensor-core conv kernels (ncu on an H100: ~2400 instructions per thread per K slice against
// 16 mma, two warps per SM issuing every 4.3 cycles; ResNet-18's layer1 3x3 conv 70 us in fp16).
// Where every thread's column stays the same over the K loop (nt a multiple of bn: j = tid % bn)
// its (oh*st - pad, ow*st - pad) are computed once, and the k part (c*ipix + dh*W + dw, dh, dw),
// the same for every column, is read from a table of the slice's bk rows in shared memory, filled
// one slice ahead into the other of two buffers (the loop's end-of-slice barrier orders the fill
// before its readers and after the last readers of that buffer). A row past K holds dh = 0x4000
// and a column past N a row coordinate of -2^30, so both fail the padding's bounds check, which
// then is the only test per element.
static bool patch_tab_ok(const Lin *L, const Op *B, int bn, int nt) {
    if (!L->conv || L->convt || L->S != 2 || B->direct || L->pa < 0 || nt % bn ||
        tensor_numel(lin_t(L, L->ta)) >= ((int64_t)1 << 31) || L->K >= ((int64_t)1 << 30))
        return false;
    int64_t dh = (L->k[0] - 1) * L->dil[0], dw = (L->k[1] - 1) * L->dil[1];
    return dh < 0x4000 && dw < 0x10000 && L->in[0] + L->pad[0] < 0x4000 &&
           L->ipix < ((int64_t)1 << 30);
}

// Table row `t` of the slice starting at k = kb into ctab[buf] (statements at ind).
static void patch_tab_row(const Emit *E, int ind, const char *kb, const char *t, const char *buf) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_line(s, ind, "{\n");
    sb_line(s, ind + 1, "const int gk_ = (int)(%s) + %s;\n", kb, t);
    sb_line(s, ind + 1, "int2 t_ = make_int2(0, 0x4000 << 16);\n");
    sb_line(s, ind + 1, "if (gk_ < %lld) {\n", (long long)L->K);
    sb_line(s, ind + 2, "const int c_ = gk_ / %lld, r_ = gk_ - c_ * %lld;\n", (long long)L->kpix,
            (long long)L->kpix);
    sb_line(s, ind + 2, "const int u_ = r_ / %lld;\n", (long long)L->k[1]);
    sb_line(s, ind + 2, "const int dh_ = u_ * %lld, dw_ = (r_ - u_ * %lld) * %lld;\n",
            (long long)L->dil[0], (long long)L->k[1], (long long)L->dil[1]);
    sb_line(s, ind + 2, "t_ = make_int2(c_ * %lld + dh_ * %lld + dw_, (dh_ << 16) | dw_);\n",
            (long long)L->ipix, (long long)L->in[1]);
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind + 1, "ctab[%s][%s] = t_;\n", buf, t);
    sb_line(s, ind, "}\n");
}

// After split_range (kt0 in scope): the table, the thread's column coordinates and X's image
// base, and the first slice's rows (then a barrier). Sets E->patch_tab; a no-op where
// patch_tab_ok refuses.
static void patch_tab_setup(Emit *E, const Op *B, int bn, int bk, int nt) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    E->patch_tab = patch_tab_ok(L, B, bn, nt);
    if (!E->patch_tab)
        return;
    const char *ty = culin_half(L) ? "uint16_t" : "float";
    sb_line(s, 1, "__shared__ int2 ctab[2][%d];\n", bk);
    sb_line(s, 1,
            "const %s *__restrict__ xb = (const %s *)in%d + (q_n * %lld + q_g * %lld) * %lld;\n",
            ty, ty, L->pa, (long long)L->C, (long long)L->Cg, (long long)L->ipix);
    sb_line(s, 1, "int cvh, cvw, cvo;\n");
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "const int j_ = (int)bn0 + tid %% %d;\n", bn);
    sb_line(s, 2, "cvh = j_ < %lld ? (j_ / %lld) * %lld - %lld : -(1 << 30);\n", (long long)L->N,
            (long long)L->out[1], (long long)L->st[0], (long long)L->pad[0]);
    sb_line(s, 2, "cvw = (j_ %% %lld) * %lld - %lld;\n", (long long)L->out[1], (long long)L->st[1],
            (long long)L->pad[1]);
    sb_line(s, 2, "cvo = cvh * %lld + cvw;\n", (long long)L->in[1]);
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "for (int t = tid; t < %d; t += %d)\n", bk, nt);
    char kb[64];
    snprintf(kb, sizeof kb, "kt0 * %d", bk);
    patch_tab_row(E, 2, kb, "t", "0");
    sb_line(s, 1, "__syncthreads();\n");
}

// Inside the K loop's `if (kt < nkl)`: the next slice's rows into the other buffer.
static void patch_tab_next(const Emit *E, int ind, int bk, int nt) {
    StrBuf *s = E->s;
    sb_line(s, ind, "if (kt + 1 < nkl)\n");
    sb_line(s, ind + 1, "for (int t = tid; t < %d; t += %d)\n", bk, nt);
    char kb[64];
    snprintf(kb, sizeof kb, "(kt0 + kt + 1) * %d", bk);
    patch_tab_row(E, ind + 2, kb, "t", "(kt + 1) & 1");
}

// `if (e_ < els && in bounds) dst = X element` of staging element e_ (row e_ / bn of the slice)
// through the table: raw storage bits when raw, else a float.
static void patch_tab_load(const Emit *E, int ind, int bn, const char *eb, const char *dst,
                           bool raw) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (eb[0]) // a partial last round: rows past the slice have no table entry
        sb_line(s, ind, "if (%.*s) {\n", (int)strlen(eb) - 4, eb);
    else
        sb_line(s, ind, "{\n");
    sb_line(s, ind + 1, "const int2 t_ = ctab[kt & 1][e_ / %d];\n", bn);
    sb_line(s, ind + 1, "const int ih = cvh + (t_.y >> 16), iw = cvw + (t_.y & 0xffff);\n");
    sb_line(s, ind + 1, "if ((unsigned)ih < %lluu && (unsigned)iw < %lluu)\n",
            (unsigned long long)L->in[0], (unsigned long long)L->in[1]);
    char v[160];
    if (culin_half(L) && !raw)
        culin_h2f(L, "xb[t_.x + cvo]", v, sizeof v);
    else
        snprintf(v, sizeof v, "xb[t_.x + cvo]");
    sb_line(s, ind + 2, "%s = %s;\n", dst, v);
    sb_line(s, ind, "}\n");
}

// The conv patch element (gk, gj) of X read in place with 32-bit index arithmetic (the general
// helper's 64-bit divisions cost more than the loads): its channel c_ and input pixel (ih, iw),
// then `if (in bounds)` for the caller's load at ind + 1.
static void patch32_coords(const Lin *L, StrBuf *s, int ind, char *off, size_t cap) {
    sb_line(s, ind, "const int c_ = (int)gk / %lld, r_ = (int)gk %% %lld;\n", (long long)L->kpix,
            (long long)L->kpix);
    if (L->S == 2) {
        sb_line(s, ind, "const int ih = ((int)gj / %lld) * %lld - %lld + (r_ / %lld) * %lld;\n",
                (long long)L->out[1], (long long)L->st[0], (long long)L->pad[0], (long long)L->k[1],
                (long long)L->dil[0]);
        sb_line(s, ind, "const int iw = ((int)gj %% %lld) * %lld - %lld + (r_ %% %lld) * %lld;\n",
                (long long)L->out[1], (long long)L->st[1], (long long)L->pad[1], (long long)L->k[1],
                (long long)L->dil[1]);
        sb_line(s, ind, "if ((unsigned)ih < %lluu && (unsigned)iw < %lluu)\n",
                (unsigned long long)L->in[0], (unsigned long long)L->in[1]);
        snprintf(off, cap, "(q_n * %lld + q_g * %lld) * %lld + (c_ * %lld + ih) * %lld + iw",
                 (long long)L->C, (long long)L->Cg, (long long)L->ipix, (long long)L->in[0],
                 (long long)L->in[1]);
        return;
    }
    // 1-D and 3-D windows: the same split of the window offset and the output pixel, one
    // spatial axis at a time (the last fastest).
    sb_line(s, ind, "int o_ = (int)gj, w_ = r_;\n");
    for (int d = L->S - 1; d >= 0; d--) {
        sb_line(s, ind, "const int i%d_ = (o_ %% %lld) * %lld - %lld + (w_ %% %lld) * %lld;\n", d,
                (long long)L->out[d], (long long)L->st[d], (long long)L->pad[d], (long long)L->k[d],
                (long long)L->dil[d]);
        if (d)
            sb_line(s, ind, "o_ /= %lld; w_ /= %lld;\n", (long long)L->out[d], (long long)L->k[d]);
    }
    sb_line(s, ind, "(void)o_; (void)w_;\n");
    sb_line(s, ind, "if (");
    for (int d = 0; d < L->S; d++)
        sb_printf(s, "%s(unsigned)i%d_ < %lluu", d ? " && " : "", d, (unsigned long long)L->in[d]);
    sb_puts(s, ")\n");
    size_t n =
        (size_t)snprintf(off, cap, "(q_n * %lld + q_g * %lld) * %lld + c_ * %lld", (long long)L->C,
                         (long long)L->Cg, (long long)L->ipix, (long long)L->ipix);
    int64_t stride = L->ipix;
    for (int d = 0; d < L->S && n < cap; d++) {
        stride /= L->in[d];
        n += (size_t)snprintf(off + n, cap - n, " + i%d_ * %lld", d, (long long)stride);
    }
}

// The 32-bit patch gather (patch32_coords) reads X in place: a plain convolution (the transposed
// one's stride test is the general helper's) whose X stays below 2^31 elements.
static bool patch32_ok(const Lin *L) {
    return L->conv && !L->convt && L->pa >= 0 && tensor_numel(lin_t(L, L->ta)) < ((int64_t)1 << 31);
}

// Loads the slice of A (a: rows from bm0, columns from k = kb) or of B (rows from kb, columns
// from bn0), rows x cols, into registers ra[] / ra4[] (rb[] / rb4[]): float4 groups where
// op->vec, else element by element (a kernel input in place, the conv patch, a prologue's value).
#define ROLL_LINES 1024

static int load_op(Emit *E, Op *op, bool a, int ind, int rows, int cols, int nt, bool smem_direct,
                   Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    const char *r0 = a ? "bm0" : "kb", *c0 = a ? "kb" : "bn0";
    long long nr = a ? (long long)L->M : (long long)L->K,
              nc = a ? (long long)L->K : (long long)L->N;
    const char *gr = a ? "gi" : "gk", *gc = a ? "gk" : "gj", *reg = a ? "ra" : "rb";
    char eb[32];
    if (op->vec) {
        int groups = rows * cols / 4, per = (groups + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int64_t %s = %s + e_ / %d, %s = %s + (e_ %% %d) * 4;\n", gr, r0,
                cols / 4, gc, c0, cols / 4);
        sb_line(s, ind + 1, "float4 v_ = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n");
        sb_line(s, ind + 1, "if (%s%s < %lld && %s < %lld)\n", ebound(eb, groups, nt), gr, nr, gc,
                nc);
        if (culin_half(L))
            load4_half(E, ind + 2, op->input, op->base, gr, op->ld, gc);
        else
            sb_line(s, ind + 2, "v_ = *(const float4 *)(in%d + %s + %s * %lld + %s);\n", op->input,
                    op->base, gr, op->ld, gc);
        sb_line(s, ind + 1, "%s4[q] = v_;\n", reg);
        sb_line(s, ind, "}\n");
        return ST_OK;
    }
    int els = rows * cols, per = (els + nt - 1) / nt;
    if (!a && E->patch_tab) {
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "float v_ = 0.0f;\n");
        patch_tab_load(E, ind + 1, cols, ebound(eb, els, nt), "v_", false);
        sb_line(s, ind + 1, "rb[q] = v_;\n");
        sb_line(s, ind, "}\n");
        patch_tab_next(E, ind, rows, nt);
        return ST_OK;
    }
    // A value computed by a prologue (fused pointwise operators, a resize or a concatenation
    // read in place) is emitted once and, where unrolling the staging loop in full would repeat
    // it past ROLL_LINES lines, stored from a partly unrolled loop straight into the shared
    // buffer the next slice is computed from (the SIMT kernels' float buffers: the other one is
    // being read meanwhile), not staged in registers. NVRTC spent 3-4 s on each such kernel of
    // Segformer-B0's decode head (64 copies of a 60-line bilinear prologue), 45 s of its compile.
    if (!op->direct && !(!a && patch32_ok(L)) && smem_direct) {
        StrBuf body;
        sb_init(&body);
        StrBuf *saved = E->s;
        E->s = &body;
        int rc = a ? lin_emit_a_value(E, ind + 2, gr, gc, "v_", e)
                   : lin_emit_b_value(E, ind + 2, gr, gc, "v_", e);
        E->s = saved;
        int lines = 0;
        for (size_t i = 0; i < body.len; i++)
            lines += body.s[i] == '\n';
        if (rc == ST_OK && (int64_t)lines * per > ROLL_LINES) {
            op->rolled = true;
            int unroll = ORCH_MAX(1, ORCH_MIN(per, ROLL_LINES / ORCH_MAX(lines, 1)));
            sb_line(s, ind, "#pragma unroll %d\n", unroll);
            sb_line(s, ind, "for (int q = 0; q < %d; q++) {\n", per);
            sb_line(s, ind + 1, "const int e_ = tid + q * %d;\n", nt);
            sb_line(s, ind + 1, "if (e_ >= %d) break;\n", els);
            sb_line(s, ind + 1, "const int64_t %s = %s + e_ / %d, %s = %s + e_ %% %d;\n", gr, r0,
                    cols, gc, c0, cols);
            sb_line(s, ind + 1, "float v_ = 0.0f;\n");
            sb_line(s, ind + 1, "if (%s < %lld && %s < %lld) {\n", gr, nr, gc, nc);
            sb_puts(s, body.s);
            sb_line(s, ind + 1, "}\n");
            if (a)
                sb_line(s, ind + 1, "As[kt & 1][e_ %% %d][e_ / %d] = v_;\n", cols, cols);
            else
                sb_line(s, ind + 1, "Bs[kt & 1][e_ / %d][e_ %% %d] = v_;\n", cols, cols);
            sb_line(s, ind, "}\n");
            sb_free(&body);
            return ST_OK;
        }
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int64_t %s = %s + e_ / %d, %s = %s + e_ %% %d;\n", gr, r0, cols,
                gc, c0, cols);
        sb_line(s, ind + 1, "float v_ = 0.0f;\n");
        sb_line(s, ind + 1, "if (%s%s < %lld && %s < %lld) {\n", ebound(eb, els, nt), gr, nr, gc,
                nc);
        sb_puts(s, body.s);
        sb_free(&body);
        sb_line(s, ind + 1, "}\n");
        sb_line(s, ind + 1, "%s[q] = v_;\n", reg);
        sb_line(s, ind, "}\n");
        return rc;
    }
    share_loop(s, ind, per, nt);
    sb_line(s, ind + 1, "const int64_t %s = %s + e_ / %d, %s = %s + e_ %% %d;\n", gr, r0, cols, gc,
            c0, cols);
    sb_line(s, ind + 1, "float v_ = 0.0f;\n");
    sb_line(s, ind + 1, "if (%s%s < %lld && %s < %lld) {\n", ebound(eb, els, nt), gr, nr, gc, nc);
    int rc = ST_OK;
    if (op->direct) {
        load1(E, ind + 2, op->input, op->base, gr, op->ld, gc);
    } else if (!a && patch32_ok(L)) {
        char off[200], ld[240], v[300];
        patch32_coords(L, s, ind + 2, off, sizeof off);
        snprintf(ld, sizeof ld, "in%d[%s]", L->pa, off);
        if (culin_half(L))
            culin_h2f(L, ld, v, sizeof v);
        sb_line(s, ind + 3, "v_ = %s;\n", culin_half(L) ? v : ld);
    } else {
        rc = a ? lin_emit_a_value(E, ind + 2, gr, gc, "v_", e)
               : lin_emit_b_value(E, ind + 2, gr, gc, "v_", e);
    }
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind + 1, "%s[q] = v_;\n", reg);
    sb_line(s, ind, "}\n");
    return rc;
}

// Stores the staged registers into buffer `buf` of As (k-major: As[buf][k][i]) and Bs.
static void store_ab(Emit *E, const Op *A, const Op *B, int ind, int bm, int bn, int bk, int nt,
                     const char *buf) {
    StrBuf *s = E->s;
    if (A->rolled) {
        // stored by load_op
    } else if (A->vec) {
        int groups = bm * bk / 4, per = (groups + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int r_ = e_ / %d, c_ = (e_ %% %d) * 4;\n", bk / 4, bk / 4);
        sb_line(s, ind + 1, "if (e_ < %d) {\n", groups);
        sb_line(s, ind + 2, "As[%s][c_][r_] = ra4[q].x; As[%s][c_ + 1][r_] = ra4[q].y;\n", buf,
                buf);
        sb_line(s, ind + 2, "As[%s][c_ + 2][r_] = ra4[q].z; As[%s][c_ + 3][r_] = ra4[q].w;\n", buf,
                buf);
        sb_line(s, ind + 1, "}\n");
        sb_line(s, ind, "}\n");
    } else {
        int els = bm * bk, per = (els + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "if (e_ < %d) As[%s][e_ %% %d][e_ / %d] = ra[q];\n", els, buf, bk, bk);
        sb_line(s, ind, "}\n");
    }
    if (B->rolled) {
        // stored by load_op
    } else if (B->vec) {
        int groups = bn * bk / 4, per = (groups + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "if (e_ < %d) *(float4 *)&Bs[%s][e_ / %d][(e_ %% %d) * 4] = rb4[q];\n",
                groups, buf, bn / 4, bn / 4);
        sb_line(s, ind, "}\n");
    } else {
        int els = bn * bk, per = (els + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "if (e_ < %d) Bs[%s][e_ / %d][e_ %% %d] = rb[q];\n", els, buf, bn, bn);
        sb_line(s, ind, "}\n");
    }
}

// Register declarations for the staged slice.
static void stage_decls(Emit *E, const Op *A, const Op *B, int bm, int bn, int bk, int nt) {
    StrBuf *s = E->s;
    if (A->vec)
        sb_line(s, 1, "float4 ra4[%d];\n", (bm * bk / 4 + nt - 1) / nt);
    else
        sb_line(s, 1, "float ra[%d];\n", (bm * bk + nt - 1) / nt);
    if (B->vec)
        sb_line(s, 1, "float4 rb4[%d];\n", (bn * bk / 4 + nt - 1) / nt);
    else
        sb_line(s, 1, "float rb[%d];\n", (bn * bk + nt - 1) / nt);
}

// The common head of the tiled kernels: block origin, batch coordinates (split-K: gridDim.z
// runs over batch x splits, ks is the block's split).
static void tile_head_split(Emit *E, int bm, int bn, int splits) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_line(s, 1, "const int tid = threadIdx.x;\n");
    if (splits > 1) {
        sb_line(s, 1, "const int64_t b = blockIdx.z / %d;\n", splits);
        sb_line(s, 1, "const int ks = (int)(blockIdx.z %% %d);\n", splits);
    } else {
        sb_line(s, 1, "const int64_t b = blockIdx.z;\n");
    }
    sb_line(s, 1, "const int64_t bm0 = (int64_t)blockIdx.y * %d, bn0 = (int64_t)blockIdx.x * %d;\n",
            bm, bn);
    lin_emit_batch_coords(E, 1, !L->conv);
}

// Split-K (CUL_SPLIT > 1), the same scheme in every tiled kernel: the split count (1: none), or
// 0 with e set where the workspace or grid.z would exceed its bound. The K slices of bk go to
// the splits in runs of ceil(slices / S), so every K range starts at a multiple of bk (the mma
// K step and the cp.async runs stay aligned); the last ranges may be partial or empty (an empty
// one contributes a zero partial tile).
static int split_count(const Emit *E, Err *e) {
    const Lin *L = E->L;
    CuLinearConfig lc;
    culin_config_unpack(E->cfg, &lc);
    int64_t sk = lc.split;
    if (sk <= 1)
        return 1;
    if (sk > 1024 || sk * L->batch > 65535 ||
        (double)sk * L->batch * L->M * L->N > CULIN_SPLIT_MAX_WS) {
        err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                E->cfg->desc);
        return 0;
    }
    return (int)sk;
}

// File scope, before the kernel: the partial tiles and the per-tile arrival counters (zero at
// module load; the last block of a tile resets its counter, so every launch finds them zero).
static void split_decls(const Emit *E, int splits, int64_t tiles) {
    const Lin *L = E->L;
    if (splits <= 1)
        return;
    sb_line(E->s, 0, "__device__ float %s_ws[%lld];\n", E->fn,
            (long long)splits * L->batch * L->M * L->N);
    sb_line(E->s, 0, "__device__ unsigned int %s_cnt[%lld];\n", E->fn, (long long)tiles);
}

// kt0, the block's first K slice, and nkl, how many slices it multiplies (nk in all).
static void split_range(const Emit *E, int splits, int64_t nk) {
    StrBuf *s = E->s;
    int64_t nkp = (nk + splits - 1) / splits; // K slices per split
    if (splits > 1) {
        sb_line(s, 1, "const int64_t kt0 = (int64_t)ks * %lld;\n", (long long)nkp);
        sb_line(s, 1, "const int nkl = (int)(kt0 + %lld <= %lld ? %lld : %lld - kt0);\n",
                (long long)nkp, (long long)nk, (long long)nkp, (long long)nk);
    } else {
        sb_line(s, 1, "const int64_t kt0 = 0;\n");
        sb_line(s, 1, "const int nkl = %lld;\n", (long long)nk);
    }
}

// After a split block has published its partial tile (in the workspace at wsp): it arrives at
// the tile's counter (the atomic after __threadfence publishes the partials); all but the last
// block of the tile return; the last resets the counter (every launch finds it zero), fences
// again and goes on with wsr, the first split's partial tile, to sum them in split order.
static void split_arrive(const Emit *E, int splits, int64_t tiles_m, int64_t tiles_n) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "__shared__ int last_;\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "const int64_t tile_ = (b * %lld + blockIdx.y) * %lld + blockIdx.x;\n",
            (long long)tiles_m, (long long)tiles_n);
    sb_line(s, 2, "if (tid == 0) last_ = atomicAdd(&%s_cnt[tile_], 1u) == %du;\n", E->fn,
            splits - 1);
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 2, "if (!last_) return;\n");
    sb_line(s, 2, "__threadfence();\n");
    sb_line(s, 2, "if (tid == 0) %s_cnt[tile_] = 0u;\n", E->fn);
    sb_line(s, 2, "const float *wsr = %s_ws + b * %lld;\n", E->fn, (long long)(L->M * L->N));
}

// The accumulator loops of the warp-tiled (tensor-core) kernels at indent ind: acc[x][y][z] of
// row i, column j (the mma C fragment layout: c0, c1 in row g, c2, c3 in row g + 8, adjacent
// columns), the body at ind + 3 and closed by the caller with "}" at ind + 2. zstep: 2 visits
// the pairs (z even), 1 every accumulator, 0 too with the loop spelled z++ (the text the
// unpaired kernels have always emitted).
static void warp_tile_loops(StrBuf *s, int ind, int zstep) {
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int x = 0; x < 2; x++)\n");
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int y = 0; y < 4; y++)\n");
    sb_line(s, ind + 2, "#pragma unroll\n");
    if (zstep)
        sb_line(s, ind + 2, "for (int z = 0; z < 4; z += %d) {\n", zstep);
    else
        sb_line(s, ind + 2, "for (int z = 0; z < 4; z++) {\n");
    sb_line(s, ind + 3, "const int64_t i = bm0 + wr + x * 16 + g8 + (z >> 1) * 8;\n");
    sb_line(s, ind + 3, "const int64_t j = bn0 + wc + y * 8 + t4 * 2 + (z & 1);\n");
}

// After the K loop of a split tensor-core kernel (culin_emit_simt's scheme): this block's partial
// tile to the workspace; the last block of the tile to arrive (the counter's atomic, after
// __threadfence publishes the partials) resets the counter, fences again and sums the S partials
// in split order into acc (the same result whichever block is last), then goes on to the
// epilogue; the others return. With N even an accumulator pair (z, z + 1: columns j, j + 1) goes
// as one float2, so a warp's accesses are whole 32-byte sectors.
static void tc_split_reduce(const Emit *E, int splits, int64_t tiles_m, int64_t tiles_n) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    int64_t plane = L->batch * L->M * L->N;
    bool pair = L->N % 2 == 0;
    long long M = (long long)L->M, N = (long long)L->N;
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "float *wsp = %s_ws + (int64_t)ks * %lld + b * %lld;\n", E->fn, (long long)plane,
            M * N);
    warp_tile_loops(s, 2, pair ? 2 : 1);
    if (pair)
        sb_line(s, 5,
                "if (i < %lld && j < %lld) __stcg((float2 *)(wsp + i * %lld + j), "
                "make_float2(acc[x][y][z], acc[x][y][z + 1]));\n",
                M, N, N);
    else
        sb_line(s, 5, "if (i < %lld && j < %lld) __stcg(wsp + i * %lld + j, acc[x][y][z]);\n", M, N,
                N);
    sb_line(s, 4, "}\n");
    split_arrive(E, splits, tiles_m, tiles_n);
    warp_tile_loops(s, 2, pair ? 2 : 1);
    sb_line(s, 5, "if (i >= %lld || j >= %lld) continue;\n", M, N);
    if (pair) {
        sb_line(s, 5, "float2 t_ = make_float2(0.0f, 0.0f);\n");
        sb_line(s, 5, "for (int q = 0; q < %d; q++) {\n", splits);
        sb_line(s, 6,
                "const float2 p_ = __ldcg((const float2 *)(wsr + q * %lld + i * %lld + j));\n",
                (long long)plane, N);
        sb_line(s, 6, "t_.x += p_.x;\n");
        sb_line(s, 6, "t_.y += p_.y;\n");
        sb_line(s, 5, "}\n");
        sb_line(s, 5, "acc[x][y][z] = t_.x;\n");
        sb_line(s, 5, "acc[x][y][z + 1] = t_.y;\n");
    } else {
        sb_line(s, 5, "float t_ = 0.0f;\n");
        sb_line(s, 5, "for (int q = 0; q < %d; q++) t_ += __ldcg(wsr + q * %lld + i * %lld + j);\n",
                splits, (long long)plane, N);
        sb_line(s, 5, "acc[x][y][z] = t_;\n");
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 1, "}\n");
}

// The head of the warp-tiled kernels after tile_head_split: each warp's 32 x 32 tile at (wr,
// wc) of the block tile (wn warps a row), its lane's fragment coordinates g8 and t4, and the
// 2 x 4 mma tiles' accumulators, zeroed.
static void warp_tile_head(StrBuf *s, int wn) {
    sb_line(s, 1, "const int lane = tid & 31, warp = tid >> 5;\n");
    sb_line(s, 1, "const int wr = (warp / %d) * 32, wc = (warp %% %d) * 32;\n", wn, wn);
    sb_line(s, 1, "const int g8 = lane >> 2, t4 = lane & 3;\n");
    sb_line(s, 1, "float acc[2][4][4];\n");
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int x = 0; x < 2; x++)\n");
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int y = 0; y < 4; y++)\n");
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int z = 0; z < 4; z++) acc[x][y][z] = 0.0f;\n");
}

// A warp's 2 x 4 mma.sync products of one k step at indent ind: acc[x][y] += af[x] * b[y] (b:
// the B fragments' array), of PTX shape `shape` on operands of type ty (m16n8k8 tf32; m16n8k16
// f16 or bf16), float32 accumulators.
static void mma_issue(StrBuf *s, int ind, const char *shape, const char *ty, const char *b) {
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int x = 0; x < 2; x++)\n");
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int y = 0; y < 4; y++)\n");
    sb_line(s, ind + 2,
            "asm volatile(\"mma.sync.aligned.%s.row.col.f32.%s.%s.f32 "
            "{%%0, %%1, %%2, %%3}, {%%4, %%5, %%6, %%7}, {%%8, %%9}, "
            "{%%0, %%1, %%2, %%3};\"\n",
            shape, ty, ty);
    sb_line(s, ind + 3,
            ": \"+f\"(acc[x][y][0]), \"+f\"(acc[x][y][1]), \"+f\"(acc[x][y][2]), "
            "\"+f\"(acc[x][y][3])\n");
    sb_line(s, ind + 3,
            ": \"r\"(af[x][0]), \"r\"(af[x][1]), \"r\"(af[x][2]), \"r\"(af[x][3]), "
            "\"r\"(%s[y][0]), \"r\"(%s[y][1]));\n",
            b, b);
}

// The K loop of the register-staged kernels (simt, tf32, f16 / bf16 on float32 tensors), open
// up to the product of the previous slice: iteration kt loads slice kt into registers, then
// (kt > 0) multiplies slice kt - 1 from shared memory buffer cb, the caller's loop at indent 3
// after the `#pragma unroll` emitted here; the caller then stores slice kt into the other buffer
// and closes the loop, one barrier per slice.
static int kloop_open(Emit *E, Op *A, Op *B, int bm, int bn, int bk, int nt, int splits,
                      int64_t nk, bool smem_direct, Err *e) {
    StrBuf *s = E->s;
    split_range(E, splits, nk);
    patch_tab_setup(E, B, bn, bk, nt);
    sb_line(s, 1, "for (int kt = 0; kt <= nkl; kt++) {\n");
    sb_line(s, 2, "const int64_t kb = (kt0 + kt) * %d;\n", bk);
    sb_line(s, 2, "if (kt < nkl) {\n");
    int rc = load_op(E, A, true, 3, bm, bk, nt, smem_direct, e);
    if (!rc)
        rc = load_op(E, B, false, 3, bk, bn, nt, smem_direct, e);
    if (rc)
        return rc;
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "if (kt > 0) {\n");
    sb_line(s, 3, "const int cb = (kt - 1) & 1;\n");
    sb_line(s, 3, "#pragma unroll\n");
    return ST_OK;
}

// The end of a tiled kernel: its closing brace and its launch, a block of nt threads per output
// tile, gridDim.z over the batch and the splits.
static void tile_close(const Emit *E, CudaLaunch *ln, int64_t tiles_m, int64_t tiles_n, int splits,
                       int nt) {
    sb_puts(E->s, "}\n\n");
    ln->grid[0] = (unsigned)tiles_n;
    ln->grid[1] = (unsigned)tiles_m;
    ln->grid[2] = (unsigned)(E->L->batch * splits);
    ln->block[0] = (unsigned)nt;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = 0;
}

// The end of a warp-tiled kernel after its K loop: the split-K sum, then every accumulator
// through the epilogue to its output element (zstep 2: pairs of adjacent columns stored as one
// 32-bit word of halves, for kernels without an epilogue; see warp_tile_loops), and tile_close.
static int warp_tile_finish(Emit *E, CudaLaunch *ln, int splits, int64_t tiles_m, int64_t tiles_n,
                            int nt, int zstep, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    if (splits > 1)
        tc_split_reduce(E, splits, tiles_m, tiles_n);
    warp_tile_loops(s, 1, zstep);
    sb_line(s, 4, "if (i < %lld && j < %lld) {\n", (long long)L->M, (long long)L->N);
    if (zstep == 2) {
        const char *f2h = culin_f2h_fn(L);
        sb_line(s, 5,
                "*(uint32_t *)&o[(b * %lld + i) * %lld + j] = %s(acc[x][y][z]) | "
                "(uint32_t)%s(acc[x][y][z + 1]) << 16;\n",
                (long long)L->M, (long long)L->N, f2h, f2h);
    } else {
        sb_line(s, 5, "const float acc_v = acc[x][y][z];\n");
        char v[64];
        int rc = culin_emit_epi_value(E, 5, "acc_v", "i", "j", v, sizeof v, e);
        if (rc)
            return rc;
        char lhs[96];
        snprintf(lhs, sizeof lhs, "o[(b * %lld + i) * %lld + j]", (long long)L->M, (long long)L->N);
        culin_emit_store(E, 5, lhs, v);
    }
    sb_line(s, 4, "}\n");
    sb_line(s, 3, "}\n");
    tile_close(E, ln, tiles_m, tiles_n, splits, nt);
    return ST_OK;
}

int culin_emit_simt(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CuLinearConfig P;
    culin_config_unpack(E->cfg, &P);
    int bm = (int)P.bm, bn = (int)P.bn, bk = (int)P.bk, tm = (int)P.tm, tn = (int)P.tn;
    if (bm <= 0 || bn <= 0 || bk <= 0 || tm <= 0 || tn <= 0 || tm % 4 || tn % 4 || bm % tm ||
        bn % tn || ((bm / tm) * (bn / tn)) % 32 || (bm / tm) * (bn / tn) > 1024)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int tx_n = bn / tn, nt = (bm / tm) * tx_n;
    int rsm = 4 * (bm / tm), rsn = 4 * (bn / tn); // distance between a thread's float4 groups
    int64_t nk = (L->K + bk - 1) / bk;
    int splits = split_count(E, e);
    int64_t tiles_m = (L->M + bm - 1) / bm, tiles_n = (L->N + bn - 1) / bn;
    if (!splits || splits > nk)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    Op A, B;
    operands(L, bm, bk, bn, &A, &B);
    split_decls(E, splits, L->batch * tiles_m * tiles_n);
    culin_kernel_head(E, nt);
    sb_line(s, 1, "__shared__ __align__(16) float As[2][%d][%d];\n", bk, bm + 4);
    sb_line(s, 1, "__shared__ __align__(16) float Bs[2][%d][%d];\n", bk, bn + 4);
    tile_head_split(E, bm, bn, splits);
    sb_line(s, 1, "const int tx = tid %% %d, ty = tid / %d;\n", tx_n, tx_n);
    sb_line(s, 1, "float acc[%d][%d];\n", tm, tn);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int im = 0; im < %d; im++)\n", tm);
    sb_line(s, 2, "#pragma unroll\n");
    sb_line(s, 2, "for (int jn = 0; jn < %d; jn++) acc[im][jn] = 0.0f;\n", tn);
    stage_decls(E, &A, &B, bm, bn, bk, nt);
    int rc = kloop_open(E, &A, &B, bm, bn, bk, nt, splits, nk, true, e);
    if (rc)
        return rc;
    sb_line(s, 3, "for (int kk = 0; kk < %d; kk++) {\n", bk);
    sb_line(s, 4, "float fa[%d], fb[%d];\n", tm, tn);
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int g = 0; g < %d; g++) {\n", tm / 4);
    sb_line(s, 5, "const float4 v = *(const float4 *)&As[cb][kk][g * %d + ty * 4];\n", rsm);
    sb_line(s, 5,
            "fa[g * 4] = v.x; fa[g * 4 + 1] = v.y; fa[g * 4 + 2] = v.z; fa[g * 4 + 3] = v.w;\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int g = 0; g < %d; g++) {\n", tn / 4);
    sb_line(s, 5, "const float4 v = *(const float4 *)&Bs[cb][kk][g * %d + tx * 4];\n", rsn);
    sb_line(s, 5,
            "fb[g * 4] = v.x; fb[g * 4 + 1] = v.y; fb[g * 4 + 2] = v.z; fb[g * 4 + 3] = v.w;\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int im = 0; im < %d; im++)\n", tm);
    sb_line(s, 5, "#pragma unroll\n");
    sb_line(s, 5,
            "for (int jn = 0; jn < %d; jn++) acc[im][jn] = fmaf(fa[im], fb[jn], acc[im][jn]);\n",
            tn);
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "if (kt < nkl) {\n");
    store_ab(E, &A, &B, 3, bm, bn, bk, nt, "kt & 1");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 1, "}\n");
    if (splits > 1) {
        // Publish this split's partial tile; the last block of the tile to arrive sums them.
        int64_t plane = L->batch * L->M * L->N;
        sb_line(s, 1, "{\n");
        sb_line(s, 2, "float *wsp = %s_ws + (int64_t)ks * %lld + b * %lld;\n", E->fn,
                (long long)plane, (long long)(L->M * L->N));
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int im = 0; im < %d; im++) {\n", tm);
        sb_line(s, 3, "const int64_t i = bm0 + (im / 4) * %d + ty * 4 + (im %% 4);\n", rsm);
        sb_line(s, 3, "if (i >= %lld) continue;\n", (long long)L->M);
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int jn = 0; jn < %d; jn++) {\n", tn);
        sb_line(s, 4, "const int64_t j = bn0 + (jn / 4) * %d + tx * 4 + (jn %% 4);\n", rsn);
        sb_line(s, 4, "if (j < %lld) __stcg(wsp + i * %lld + j, acc[im][jn]);\n", (long long)L->N,
                (long long)L->N);
        sb_line(s, 3, "}\n");
        sb_line(s, 2, "}\n");
        split_arrive(E, splits, tiles_m, tiles_n);
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int im = 0; im < %d; im++) {\n", tm);
        sb_line(s, 3, "const int64_t i = bm0 + (im / 4) * %d + ty * 4 + (im %% 4);\n", rsm);
        sb_line(s, 3, "if (i >= %lld) continue;\n", (long long)L->M);
        sb_line(s, 3, "#pragma unroll\n");
        sb_line(s, 3, "for (int jn = 0; jn < %d; jn++) {\n", tn);
        sb_line(s, 4, "const int64_t j = bn0 + (jn / 4) * %d + tx * 4 + (jn %% 4);\n", rsn);
        sb_line(s, 4, "if (j >= %lld) continue;\n", (long long)L->N);
        sb_line(s, 4, "float t_ = 0.0f;\n");
        sb_line(s, 4, "for (int q = 0; q < %d; q++) t_ += __ldcg(wsr + q * %lld + i * %lld + j);\n",
                splits, (long long)plane, (long long)L->N);
        sb_line(s, 4, "acc[im][jn] = t_;\n");
        sb_line(s, 3, "}\n");
        sb_line(s, 2, "}\n");
        sb_line(s, 1, "}\n");
    }
    // Epilogue on the register tile, then the store.
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int im = 0; im < %d; im++) {\n", tm);
    sb_line(s, 2, "const int64_t i = bm0 + (im / 4) * %d + ty * 4 + (im %% 4);\n", rsm);
    sb_line(s, 2, "if (i >= %lld) continue;\n", (long long)L->M);
    const char *ot = cgen_ctype(lin_t(L, L->sink)->dtype);
    sb_line(s, 2, "%s *orow = o + (b * %lld + i) * %lld;\n", ot, (long long)L->M, (long long)L->N);
    if (!L->epi && L->N % 4 == 0 && culin_half(L)) {
        // Four halves rounded and stored as one 8-byte word.
        const char *f2h = culin_f2h_fn(L);
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int g = 0; g < %d; g++) {\n", tn / 4);
        sb_line(s, 3, "const int64_t j = bn0 + g * %d + tx * 4;\n", rsn);
        sb_line(s, 3, "if (j < %lld) {\n", (long long)L->N);
        sb_line(s, 4,
                "const uint32_t lo_ = %s(acc[im][g * 4]) | (uint32_t)%s(acc[im][g * 4 + 1]) << "
                "16;\n",
                f2h, f2h);
        sb_line(s, 4,
                "const uint32_t hi_ = %s(acc[im][g * 4 + 2]) | (uint32_t)%s(acc[im][g * 4 + 3]) "
                "<< 16;\n",
                f2h, f2h);
        sb_line(s, 4, "*(uint2 *)(orow + j) = make_uint2(lo_, hi_);\n");
        sb_line(s, 3, "}\n");
        sb_line(s, 2, "}\n");
    } else if (!L->epi && L->N % 4 == 0) {
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int g = 0; g < %d; g++) {\n", tn / 4);
        sb_line(s, 3, "const int64_t j = bn0 + g * %d + tx * 4;\n", rsn);
        sb_line(s, 3,
                "if (j < %lld) *(float4 *)(orow + j) = make_float4(acc[im][g * 4], "
                "acc[im][g * 4 + 1], acc[im][g * 4 + 2], acc[im][g * 4 + 3]);\n",
                (long long)L->N);
        sb_line(s, 2, "}\n");
    } else {
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int jn = 0; jn < %d; jn++) {\n", tn);
        sb_line(s, 3, "const int64_t j = bn0 + (jn / 4) * %d + tx * 4 + (jn %% 4);\n", rsn);
        sb_line(s, 3, "if (j < %lld) {\n", (long long)L->N);
        sb_line(s, 4, "const float acc_v = acc[im][jn];\n");
        char v[64];
        rc = culin_emit_epi_value(E, 4, "acc_v", "i", "j", v, sizeof v, e);
        if (rc)
            return rc;
        culin_emit_store(E, 4, "orow[j]", v);
        sb_line(s, 3, "}\n");
        sb_line(s, 2, "}\n");
    }
    sb_line(s, 1, "}\n");
    tile_close(E, ln, tiles_m, tiles_n, splits, nt);
    return ST_OK;
}

// TF32 tensor cores: 4 warps (2 x 2) per 64 x 64 warp grid unit; each warp a 32 x 32 tile of
// 2 x 4 mma.m16n8k8 tiles. Fragment layouts of PTX ISA "mma.m16n8k8 .tf32": A (row) a0:(g, t),
// a1:(g+8, t), a2:(g, t+4), a3:(g+8, t+4); B (col) b0:(t, g), b1:(t+4, g); C c0:(g, 2t),
// c1:(g, 2t+1), c2:(g+8, 2t), c3:(g+8, 2t+1), with g = lane/4, t = lane%4.
int culin_emit_tf32(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CuLinearConfig P;
    culin_config_unpack(E->cfg, &P);
    int bm = (int)P.bm, bn = (int)P.bn, bk = (int)P.bk;
    if (bm % 32 || bn % 32 || bk % 8 || bm <= 0 || bn <= 0 || bk <= 0)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int wm = bm / 32, wn = bn / 32, nt = wm * wn * 32;
    int64_t nk = (L->K + bk - 1) / bk;
    int64_t tiles_m = (L->M + bm - 1) / bm, tiles_n = (L->N + bn - 1) / bn;
    int splits = split_count(E, e);
    if (!splits)
        return ST_INVALID;
    Op A, B;
    operands(L, bm, bk, bn, &A, &B);
    split_decls(E, splits, L->batch * tiles_m * tiles_n);
    culin_kernel_head(E, nt);
    // Row-major A tile [bm][bk+4] (conflict-free fragment reads), B tile [bk][bn+8]; the shared
    // staging routine stores A k-major, so this kernel declares As k-major too and reads it so.
    sb_line(s, 1, "__shared__ __align__(16) float As[2][%d][%d];\n", bk, bm + 4);
    sb_line(s, 1, "__shared__ __align__(16) float Bs[2][%d][%d];\n", bk, bn + 4);
    tile_head_split(E, bm, bn, splits);
    warp_tile_head(s, wn);
    stage_decls(E, &A, &B, bm, bn, bk, nt);
    int rc = kloop_open(E, &A, &B, bm, bn, bk, nt, splits, nk, true, e);
    if (rc)
        return rc;
    sb_line(s, 3, "for (int kk = 0; kk < %d; kk += 8) {\n", bk);
    sb_line(s, 4, "uint32_t af[2][4], bf[4][2];\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int x = 0; x < 2; x++) {\n");
    sb_line(s, 5, "const int r = wr + x * 16 + g8;\n");
    sb_line(s, 5, "const float v0 = As[cb][kk + t4][r], v1 = As[cb][kk + t4][r + 8];\n");
    sb_line(s, 5, "const float v2 = As[cb][kk + t4 + 4][r], v3 = As[cb][kk + t4 + 4][r + 8];\n");
    sb_line(s, 5, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(af[x][0]) : \"f\"(v0));\n");
    sb_line(s, 5, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(af[x][1]) : \"f\"(v1));\n");
    sb_line(s, 5, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(af[x][2]) : \"f\"(v2));\n");
    sb_line(s, 5, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(af[x][3]) : \"f\"(v3));\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int y = 0; y < 4; y++) {\n");
    sb_line(s, 5, "const int c = wc + y * 8 + g8;\n");
    sb_line(s, 5, "const float v0 = Bs[cb][kk + t4][c], v1 = Bs[cb][kk + t4 + 4][c];\n");
    sb_line(s, 5, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(bf[y][0]) : \"f\"(v0));\n");
    sb_line(s, 5, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(bf[y][1]) : \"f\"(v1));\n");
    sb_line(s, 4, "}\n");
    mma_issue(s, 4, "m16n8k8", "tf32", "bf");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "if (kt < nkl) {\n");
    store_ab(E, &A, &B, 3, bm, bn, bk, nt, "kt & 1");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 1, "}\n");
    return warp_tile_finish(E, ln, splits, tiles_m, tiles_n, nt, 0, e);
}

// GEMV (M <= 8). gemv: 256 threads, lanes on 32 columns, 8 warps splitting K, partial sums
// reduced through shared memory by warp 0. gemvk: 8 warps, a column each, lanes splitting K,
// reduced with shuffles.
int culin_emit_gemv(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CuLinearConfig P;
    culin_config_unpack(E->cfg, &P);
    bool lanes_k = P.var == CUV_GEMVK;
    if (L->conv || L->M > 8)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int M = (int)L->M;
    int cols = lanes_k ? 8 : 32;
    culin_kernel_head(E, 256);
    sb_line(s, 1, "const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n");
    sb_line(s, 1, "const int64_t b = blockIdx.z;\n");
    lin_emit_batch_coords(E, 1, true);
    sb_line(s, 1, "const int64_t j = (int64_t)blockIdx.x * %d + %s;\n", cols,
            lanes_k ? "warp" : "lane");
    sb_line(s, 1, "float acc[%d];\n", M);
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i = 0; i < %d; i++) acc[i] = 0.0f;\n", M);
    sb_line(s, 1, "if (j < %lld) {\n", (long long)L->N);
    sb_line(s, 2, "for (int64_t k = %s; k < %lld; k += %d) {\n", lanes_k ? "lane" : "warp",
            (long long)L->K, lanes_k ? 32 : 8);
    sb_line(s, 3, "float bv;\n");
    int rc = lin_emit_b_value(E, 3, "k", "j", "bv", e);
    if (rc)
        return rc;
    sb_line(s, 3, "#pragma unroll\n");
    sb_line(s, 3, "for (int i_ = 0; i_ < %d; i_++) {\n", M);
    sb_line(s, 4, "const int64_t i = i_;\n");
    sb_line(s, 4, "float av;\n");
    rc = lin_emit_a_value(E, 4, "i", "k", "av", e);
    if (rc)
        return rc;
    sb_line(s, 4, "acc[i_] = fmaf(av, bv, acc[i_]);\n");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "}\n");
    if (lanes_k) {
        // Every lane takes part in the shuffles (no early exit above).
        sb_line(s, 1, "#pragma unroll\n");
        sb_line(s, 1, "for (int i = 0; i < %d; i++) acc[i] = orch_warp_sum(acc[i]);\n", M);
        sb_line(s, 1, "if (lane != 0 || j >= %lld) return;\n", (long long)L->N);
    } else {
        sb_line(s, 1, "__shared__ float red[8][%d][33];\n", M);
        sb_line(s, 1, "#pragma unroll\n");
        sb_line(s, 1, "for (int i = 0; i < %d; i++) red[warp][i][lane] = acc[i];\n", M);
        sb_line(s, 1, "__syncthreads();\n");
        sb_line(s, 1, "if (warp != 0 || j >= %lld) return;\n", (long long)L->N);
        sb_line(s, 1, "#pragma unroll\n");
        sb_line(s, 1, "for (int i = 0; i < %d; i++) {\n", M);
        sb_line(s, 2, "float t = red[0][i][lane];\n");
        sb_line(s, 2, "#pragma unroll\n");
        sb_line(s, 2, "for (int w = 1; w < 8; w++) t += red[w][i][lane];\n");
        sb_line(s, 2, "acc[i] = t;\n");
        sb_line(s, 1, "}\n");
    }
    sb_line(s, 1, "#pragma unroll\n");
    sb_line(s, 1, "for (int i_ = 0; i_ < %d; i_++) {\n", M);
    sb_line(s, 2, "const int64_t i = i_;\n");
    sb_line(s, 2, "const float acc_v = acc[i_];\n");
    char v[64];
    rc = culin_emit_epi_value(E, 2, "acc_v", "i", "j", v, sizeof v, e);
    if (rc)
        return rc;
    char lhs[96];
    snprintf(lhs, sizeof lhs, "o[(b * %lld + i) * %lld + j]", (long long)L->M, (long long)L->N);
    culin_emit_store(E, 2, lhs, v);
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    ln->grid[0] = (unsigned)((L->N + cols - 1) / cols);
    ln->grid[1] = 1;
    ln->grid[2] = (unsigned)L->batch;
    ln->block[0] = 256;
    ln->block[1] = ln->block[2] = 1;
    ln->smem = 0;
    return ST_OK;
}

// Stores the staged float32 registers into k-pair words of buffer `buf`: As[buf][k/2][i] holds
// A[i][k & ~1] (low half) and A[i][k | 1] (high half), Bs[buf][k/2][j] likewise for B[k][j].
// A float4 of A spans two whole words; single elements (and B's float4, four columns of one k)
// are written as 16-bit halves. cvt2 packs two floats (lo, hi), cvt1 rounds one.
static void store_ab_h(Emit *E, const Op *A, const Op *B, int ind, int bm, int bn, int bk, int nt,
                       const char *buf, const char *cvt1, const char *cvt2) {
    StrBuf *s = E->s;
    if (A->vec) {
        int groups = bm * bk / 4, per = (groups + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int r_ = e_ / %d, c_ = (e_ %% %d) * 2;\n", bk / 4, bk / 4);
        sb_line(s, ind + 1, "if (e_ < %d) {\n", groups);
        sb_line(s, ind + 2, "As[%s][c_][r_] = %s(ra4[q].x, ra4[q].y);\n", buf, cvt2);
        sb_line(s, ind + 2, "As[%s][c_ + 1][r_] = %s(ra4[q].z, ra4[q].w);\n", buf, cvt2);
        sb_line(s, ind + 1, "}\n");
        sb_line(s, ind, "}\n");
    } else {
        int els = bm * bk, per = (els + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int c_ = e_ %% %d, r_ = e_ / %d;\n", bk, bk);
        sb_line(s, ind + 1,
                "if (e_ < %d) ((uint16_t *)&As[%s][c_ >> 1][r_])[c_ & 1] = %s(ra[q]);\n", els, buf,
                cvt1);
        sb_line(s, ind, "}\n");
    }
    if (B->vec) {
        int groups = bn * bk / 4, per = (groups + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int k_ = e_ / %d, j_ = (e_ %% %d) * 4;\n", bn / 4, bn / 4);
        sb_line(s, ind + 1, "if (e_ < %d) {\n", groups);
        sb_line(s, ind + 2, "uint16_t *w_ = (uint16_t *)&Bs[%s][k_ >> 1][j_] + (k_ & 1);\n", buf);
        sb_line(s, ind + 2, "w_[0] = %s(rb4[q].x); w_[2] = %s(rb4[q].y);\n", cvt1, cvt1);
        sb_line(s, ind + 2, "w_[4] = %s(rb4[q].z); w_[6] = %s(rb4[q].w);\n", cvt1, cvt1);
        sb_line(s, ind + 1, "}\n");
        sb_line(s, ind, "}\n");
    } else {
        int els = bn * bk, per = (els + nt - 1) / nt;
        share_loop(s, ind, per, nt);
        sb_line(s, ind + 1, "const int k_ = e_ / %d, j_ = e_ %% %d;\n", bn, bn);
        sb_line(s, ind + 1,
                "if (e_ < %d) ((uint16_t *)&Bs[%s][k_ >> 1][j_])[k_ & 1] = %s(rb[q]);\n", els, buf,
                cvt1);
        sb_line(s, ind, "}\n");
    }
}

// Half storage: cp.async (16 bytes, zero-filled outside the product), ldmatrix fragment loads.
static const char HALF_MMA_HELPERS[] =
    "#ifndef ORCH_LIN_HALF_MMA\n"
    "#define ORCH_LIN_HALF_MMA\n"
    "ORCH_DEV void orch_lin_cp16(void *dst, const void *src, bool ok) {\n"
    "    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"(d), "
    "\"l\"(src), \"r\"(ok ? 16 : 0));\n"
    "}\n"
    "ORCH_DEV void orch_lin_cp_wait(void) {\n"
    "    asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::: \"memory\");\n"
    "}\n"
    "ORCH_DEV void orch_lin_cp_commit(void) { asm volatile(\"cp.async.commit_group;\\n\" ::); }\n"
    "ORCH_DEV void orch_lin_cp_wait1(void) {\n"
    "    asm volatile(\"cp.async.wait_group 1;\\n\" ::: \"memory\");\n"
    "}\n"
    "ORCH_DEV void orch_lin_ldm4(uint32_t *r, const void *p) {\n"
    "    const unsigned a = (unsigned)__cvta_generic_to_shared(p);\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n\"\n"
    "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a) : "
    "\"memory\");\n"
    "}\n"
    "ORCH_DEV void orch_lin_ldm4t(uint32_t *r, const void *p) {\n"
    "    const unsigned a = (unsigned)__cvta_generic_to_shared(p);\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
    "[%4];\\n\"\n"
    "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(a) : "
    "\"memory\");\n"
    "}\n"
    "#endif\n";

const char *culin_half_mma_helpers(void) {
    return HALF_MMA_HELPERS;
}

// One operand's slice of a half-storage tile (at k = kb) into buffer `buf`: rows x cols of smem
// tile `sm` (row-major, row length cols + 8), row r at global row `r0` + r (of `nr`), column c at
// `c0` + c (of `nc`); 16-byte cp.async when `async`, else gathered into registers `reg` (raw
// storage bits: a kernel input read in place, the value helpers' floats rounded) and stored by
// store_half. a: the operand is A (rows i, columns k) or B (rows k, columns j).
static int stage_half(Emit *E, const Op *op, bool a, bool async, int ind, int rows, int cols,
                      int nt, const char *sm, const char *buf, const char *reg, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    const char *r0 = a ? "bm0" : "kb", *c0 = a ? "kb" : "bn0";
    long long nr = a ? (long long)L->M : (long long)L->K,
              nc = a ? (long long)L->K : (long long)L->N;
    const char *gr = a ? "gi" : "gk", *gc = a ? "gk" : "gj";
    int units = async ? rows * cols / 8 : rows * cols, per = (units + nt - 1) / nt;
    int upr = async ? cols / 8 : cols; // units per row
    share_loop(s, ind, per, nt);
    sb_line(s, ind + 1, "const int r_ = e_ / %d, c_ = (e_ %% %d)%s;\n", upr, upr,
            async ? " * 8" : "");
    sb_line(s, ind + 1, "const int64_t %s = %s + r_, %s = %s + c_;\n", gr, r0, gc, c0);
    char eb[32];
    ebound(eb, units, nt);
    if (async) {
        sb_line(s, ind + 1, "const bool ok_ = %s%s < %lld && %s < %lld;\n", eb, gr, nr, gc, nc);
        if (eb[0])
            sb_line(s, ind + 1, "if (e_ < %d)\n", units);
        sb_line(s, ind + 1 + (eb[0] != 0),
                "orch_lin_cp16(&%s[%s][r_][c_], in%d + (ok_ ? %s + %s * %lld + %s : 0), "
                "ok_);\n",
                sm, buf, op->input, op->base, gr, (long long)op->ld, gc);
        sb_line(s, ind, "}\n");
        return ST_OK;
    }
    sb_line(s, ind + 1, "uint16_t h_ = 0;\n");
    if (!a && E->patch_tab) {
        patch_tab_load(E, ind + 1, cols, eb, "h_", true);
        sb_line(s, ind + 1, "%s[q] = h_;\n", reg);
        sb_line(s, ind, "}\n");
        patch_tab_next(E, ind, rows, nt);
        return ST_OK;
    }
    sb_line(s, ind + 1, "if (%s%s < %lld && %s < %lld) {\n", eb, gr, nr, gc, nc);
    int rc = ST_OK;
    if (op->direct) {
        sb_line(s, ind + 2, "h_ = in%d[%s + %s * %lld + %s];\n", op->input, op->base, gr,
                (long long)op->ld, gc);
    } else if (!a && patch32_ok(L)) {
        char off[200];
        patch32_coords(L, s, ind + 2, off, sizeof off);
        sb_line(s, ind + 3, "h_ = in%d[%s];\n", L->pa, off);
    } else {
        // A prologue's value (of the operand's half type: exact in float, so is the rounding).
        sb_line(s, ind + 2, "float v_;\n");
        rc = a ? lin_emit_a_value(E, ind + 2, "gi", "gk", "v_", e)
               : lin_emit_b_value(E, ind + 2, "gk", "gj", "v_", e);
        sb_line(s, ind + 2, "h_ = %s(v_);\n", culin_f2h_fn(L));
    }
    sb_line(s, ind + 1, "}\n");
    sb_line(s, ind + 1, "%s[q] = h_;\n", reg);
    sb_line(s, ind, "}\n");
    return rc;
}

static void store_half(Emit *E, int ind, int rows, int cols, int nt, const char *sm,
                       const char *reg) {
    StrBuf *s = E->s;
    int els = rows * cols, per = (els + nt - 1) / nt;
    share_loop(s, ind, per, nt);
    sb_line(s, ind + 1, "if (e_ < %d) %s[kt & 1][e_ / %d][e_ %% %d] = %s[q];\n", els, sm, cols,
            cols, reg);
    sb_line(s, ind, "}\n");
}

// The products of shared-memory buffer cb (a slice of bk): per k16 step the A fragments of the
// warp's two 16-row blocks and the B fragments of its four 8-column blocks, then 2 x 4 mma.
static void mma16_half_step(StrBuf *s, int ind, int bk, const char *ty) {
    sb_line(s, ind, "#pragma unroll\n");
    sb_line(s, ind, "for (int kk = 0; kk < %d; kk += 16) {\n", bk);
    sb_line(s, ind + 1, "uint32_t af[2][4], bfr[4][2];\n");
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int x = 0; x < 2; x++)\n");
    sb_line(s, ind + 2,
            "orch_lin_ldm4(af[x], &As[cb][wr + x * 16 + (lane & 15)][kk + (lane >> 4) * 8]);\n");
    sb_line(s, ind + 1, "#pragma unroll\n");
    sb_line(s, ind + 1, "for (int y = 0; y < 4; y += 2) {\n");
    sb_line(s, ind + 2, "uint32_t t_[4];\n");
    sb_line(s, ind + 2,
            "orch_lin_ldm4t(t_, &Bs[cb][kk + (lane & 15)][wc + y * 8 + (lane >> 4) * 8]);\n");
    sb_line(
        s, ind + 2,
        "bfr[y][0] = t_[0]; bfr[y][1] = t_[1]; bfr[y + 1][0] = t_[2]; bfr[y + 1][1] = t_[3];\n");
    sb_line(s, ind + 1, "}\n");
    mma_issue(s, ind + 1, "m16n8k16", ty, "bfr");
    sb_line(s, ind, "}\n");
}

// FP16 / BF16 tensor cores on half tensors: the warp tiles of culin_emit_mma16 over tiles kept as
// stored, As[buf][i][k] and Bs[buf][k][j] (rows padded by 8 halves: 16-byte aligned rows for
// cp.async and ldmatrix, and the 8 rows of an 8x8 matrix fall in distinct bank quads). A
// fragments are ldmatrix.x4 of the row-major A tile (lanes 0-15 rows 0-15 at k, 16-31 at k+8),
// B fragments ldmatrix.x4.trans of two 8-column blocks (lanes 0-15 k rows at column c, 16-31 at
// c+8), which yields the k-pairs the col operand wants. Operands whose rows are 16-byte runs of
// a kernel input go by cp.async, three buffers deep where both do (the 128 x 128 tile: two),
// issued before the previous slice's products; others (prologues, the conv patch) through
// registers, two buffers.
static int mma16_half(Emit *E, CudaLaunch *ln, int bm, int bn, int bk, bool bf, int splits,
                      Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    int wm = bm / 32, wn = bn / 32, nt = wm * wn * 32;
    int64_t nk = (L->K + bk - 1) / bk;
    int64_t tiles_m = (L->M + bm - 1) / bm, tiles_n = (L->N + bn - 1) / bn;
    Op A, B;
    operands(L, bm, bk, bn, &A, &B);
    bool a_async = A.direct && L->K % 8 == 0, b_async = B.direct && L->N % 8 == 0;
    const char *ty = bf ? "bf16" : "f16";
    // Three buffers where both operands go by cp.async and they fit the static 48 KiB.
    int stages = a_async && b_async && 3 * (bm * (bk + 8) + bk * (bn + 8)) * 2 <= 48 * 1024 ? 3 : 2;
    sb_puts(s, HALF_MMA_HELPERS);
    split_decls(E, splits, L->batch * tiles_m * tiles_n);
    culin_kernel_head(E, nt);
    sb_line(s, 1, "__shared__ __align__(16) uint16_t As[%d][%d][%d];\n", stages, bm, bk + 8);
    sb_line(s, 1, "__shared__ __align__(16) uint16_t Bs[%d][%d][%d];\n", stages, bk, bn + 8);
    tile_head_split(E, bm, bn, splits);
    warp_tile_head(s, wn);
    if (!a_async)
        sb_line(s, 1, "uint16_t rah[%d];\n", (bm * bk + nt - 1) / nt);
    if (!b_async)
        sb_line(s, 1, "uint16_t rbh[%d];\n", (bk * bn + nt - 1) / nt);
    split_range(E, splits, nk);
    if (!b_async)
        patch_tab_setup(E, &B, bn, bk, nt);
    int rc;
    if (stages == 3) {
        // Slices kt + 1 and kt + 2 in flight while kt is multiplied: prologue issues 0 and 1;
        // iteration kt waits for its slice (one group may stay pending), passes the barrier
        // (which also frees the buffer of kt - 1) and issues kt + 2 into it.
        sb_line(s, 1, "#pragma unroll\n");
        sb_line(s, 1, "for (int st = 0; st < 2; st++) {\n");
        sb_line(s, 2, "if (st < nkl) {\n");
        sb_line(s, 3, "const int64_t kb = (kt0 + st) * %d;\n", bk);
        rc = stage_half(E, &A, true, true, 3, bm, bk, nt, "As", "st", NULL, e);
        if (!rc)
            rc = stage_half(E, &B, false, true, 3, bk, bn, nt, "Bs", "st", NULL, e);
        if (rc)
            return rc;
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "orch_lin_cp_commit();\n");
        sb_line(s, 1, "}\n");
        sb_line(s, 1, "int cb = 0, wb = 2;\n");
        sb_line(s, 1, "for (int kt = 0; kt < nkl; kt++) {\n");
        sb_line(s, 2, "orch_lin_cp_wait1();\n");
        sb_line(s, 2, "__syncthreads();\n");
        sb_line(s, 2, "if (kt + 2 < nkl) {\n");
        sb_line(s, 3, "const int64_t kb = (kt0 + kt + 2) * %d;\n", bk);
        rc = stage_half(E, &A, true, true, 3, bm, bk, nt, "As", "wb", NULL, e);
        if (!rc)
            rc = stage_half(E, &B, false, true, 3, bk, bn, nt, "Bs", "wb", NULL, e);
        if (rc)
            return rc;
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "orch_lin_cp_commit();\n");
        mma16_half_step(s, 2, bk, ty);
        sb_line(s, 2, "cb = cb == 2 ? 0 : cb + 1;\n");
        sb_line(s, 2, "wb = wb == 2 ? 0 : wb + 1;\n");
        sb_line(s, 1, "}\n");
    } else {
        sb_line(s, 1, "for (int kt = 0; kt <= nkl; kt++) {\n");
        sb_line(s, 2, "const int64_t kb = (kt0 + kt) * %d;\n", bk);
        sb_line(s, 2, "if (kt < nkl) {\n");
        rc = stage_half(E, &A, true, a_async, 3, bm, bk, nt, "As", "kt & 1", "rah", e);
        if (!rc)
            rc = stage_half(E, &B, false, b_async, 3, bk, bn, nt, "Bs", "kt & 1", "rbh", e);
        if (rc)
            return rc;
        sb_line(s, 2, "}\n");
        sb_line(s, 2, "if (kt > 0) {\n");
        sb_line(s, 3, "const int cb = (kt - 1) & 1;\n");
        mma16_half_step(s, 3, bk, ty);
        sb_line(s, 2, "}\n");
        if (!a_async || !b_async) {
            sb_line(s, 2, "if (kt < nkl) {\n");
            if (!a_async)
                store_half(E, 3, bm, bk, nt, "As", "rah");
            if (!b_async)
                store_half(E, 3, bk, bn, nt, "Bs", "rbh");
            sb_line(s, 2, "}\n");
        }
        if (a_async || b_async)
            sb_line(s, 2, "orch_lin_cp_wait();\n");
        sb_line(s, 2, "__syncthreads();\n");
        sb_line(s, 1, "}\n");
    }
    // Accumulator pairs (z, z + 1) are adjacent columns: one 32-bit store of two halves where
    // no epilogue intervenes.
    bool pair = !L->epi && L->N % 2 == 0;
    return warp_tile_finish(E, ln, splits, tiles_m, tiles_n, nt, pair ? 2 : 1, e);
}

// FP16 / BF16 tensor cores: warps as in the TF32 kernel (each a 32 x 32 tile of 2 x 4
// mma.m16n8k16 tiles), per k16 step. Fragment layouts of PTX ISA "mma.m16n8k16 .f16/.bf16"
// (each register two halves, the lower column / row index in the low 16 bits): A (row)
// a0:(g, 2t..2t+1), a1:(g+8, 2t..), a2:(g, 2t+8..), a3:(g+8, 2t+8..); B (col) b0:(2t..2t+1, g),
// b1:(2t+8.., g); C as for m16n8k8; g = lane/4, t = lane%4. With k-pair words in shared memory
// (row stride BM+8 or BN+8 words, 8 mod 32) each register is one load and a warp's 32 loads hit
// 32 banks.
int culin_emit_mma16(Emit *E, CudaLaunch *ln, Err *e) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    CuLinearConfig P;
    culin_config_unpack(E->cfg, &P);
    int bm = (int)P.bm, bn = (int)P.bn, bk = (int)P.bk;
    bool bf = P.var == CUV_BF16;
    if (bm % 32 || bn % 32 || bk % 16 || bm <= 0 || bn <= 0 || bk <= 0 || (P.var != CUV_F16 && !bf))
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int wm = bm / 32, wn = bn / 32, nt = wm * wn * 32;
    if (nt > 1024)
        return err_set(e, ST_INVALID, "CUDA linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    int splits = split_count(E, e);
    if (!splits)
        return ST_INVALID;
    if (culin_half(L)) {
        if (culin_dtype(L) != (bf ? DT_BFLOAT16 : DT_FLOAT16))
            return err_set(e, ST_INVALID,
                           "CUDA linear kernel %s: config '%s' does not fit the "
                           "operands' dtype",
                           E->fn, E->cfg->desc);
        return mma16_half(E, ln, bm, bn, bk, bf, splits, e);
    }
    int64_t nk = (L->K + bk - 1) / bk;
    int64_t tiles_m = (L->M + bm - 1) / bm, tiles_n = (L->N + bn - 1) / bn;
    Op A, B;
    operands(L, bm, bk, bn, &A, &B);
    const char *ty = bf ? "bf16" : "f16";
    char cvt1[32], cvt2[32];
    snprintf(cvt1, sizeof cvt1, "orch_mma_%s", ty);
    snprintf(cvt2, sizeof cvt2, "orch_mma_%sx2", ty);
    // Rounding helpers, once per program (cvt.rn: round to nearest even; the .x2 forms put
    // their first source in the upper half).
    sb_line(s, 0, "#ifndef ORCH_MMA_%s_CVT\n", bf ? "BF16" : "F16");
    sb_line(s, 0, "#define ORCH_MMA_%s_CVT\n", bf ? "BF16" : "F16");
    sb_line(s, 0, "ORCH_DEV uint16_t %s(float x) {\n", cvt1);
    sb_line(s, 1, "uint16_t h;\n");
    sb_line(s, 1, "asm(\"cvt.rn.%s.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(x));\n", ty);
    sb_line(s, 1, "return h;\n");
    sb_line(s, 0, "}\n");
    sb_line(s, 0, "ORCH_DEV uint32_t %s(float lo, float hi) {\n", cvt2);
    sb_line(s, 1, "uint32_t r;\n");
    sb_line(s, 1, "asm(\"cvt.rn.%sx2.f32 %%0, %%1, %%2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n",
            ty);
    sb_line(s, 1, "return r;\n");
    sb_line(s, 0, "}\n");
    sb_line(s, 0, "#endif\n");
    split_decls(E, splits, L->batch * tiles_m * tiles_n);
    culin_kernel_head(E, nt);
    sb_line(s, 1, "__shared__ __align__(16) uint32_t As[2][%d][%d];\n", bk / 2, bm + 8);
    sb_line(s, 1, "__shared__ __align__(16) uint32_t Bs[2][%d][%d];\n", bk / 2, bn + 8);
    tile_head_split(E, bm, bn, splits);
    warp_tile_head(s, wn);
    stage_decls(E, &A, &B, bm, bn, bk, nt);
    int rc = kloop_open(E, &A, &B, bm, bn, bk, nt, splits, nk, false, e);
    if (rc)
        return rc;
    sb_line(s, 3, "for (int kp = 0; kp < %d; kp += 8) {\n", bk / 2);
    sb_line(s, 4, "uint32_t af[2][4], bf[4][2];\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int x = 0; x < 2; x++) {\n");
    sb_line(s, 5, "const int r = wr + x * 16 + g8;\n");
    sb_line(s, 5, "af[x][0] = As[cb][kp + t4][r]; af[x][1] = As[cb][kp + t4][r + 8];\n");
    sb_line(s, 5, "af[x][2] = As[cb][kp + t4 + 4][r]; af[x][3] = As[cb][kp + t4 + 4][r + 8];\n");
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "#pragma unroll\n");
    sb_line(s, 4, "for (int y = 0; y < 4; y++) {\n");
    sb_line(s, 5, "const int c = wc + y * 8 + g8;\n");
    sb_line(s, 5, "bf[y][0] = Bs[cb][kp + t4][c]; bf[y][1] = Bs[cb][kp + t4 + 4][c];\n");
    sb_line(s, 4, "}\n");
    mma_issue(s, 4, "m16n8k16", ty, "bf");
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "if (kt < nkl) {\n");
    store_ab_h(E, &A, &B, 3, bm, bn, bk, nt, "kt & 1", cvt1, cvt2);
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "__syncthreads();\n");
    sb_line(s, 1, "}\n");
    return warp_tile_finish(E, ln, splits, tiles_m, tiles_n, nt, 0, e);
}
