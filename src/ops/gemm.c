// Blocked float32 GEMM (see gemm.h), laid out as in BLIS/GotoBLAS: C is cut into MC x NC tiles
// that OpenMP threads take independently; for each KC slice of the sum, a tile's A and B blocks
// are packed into MR-row / NR-column micro-panels and an MR x NR micro-kernel keeps its block of
// C in registers while it streams the panels. Edges are packed with zeros, so the kernel always
// runs full tiles and only the store is clipped.
#include "gemm.h"

#include "../base/common.h"

#include <stdlib.h>

// MR x NR accumulators fit the 16 vector registers of AVX2 (6 rows x 2 vectors of 8) with room
// for one B row and the A broadcast; KC x NR floats of B (16 KiB) stay in L1 and the MC x KC
// block of A (120 KiB) in L2 while the micro-kernel sweeps across them.
enum { MR = 6, NR = 16, MC = 120, KC = 256, NC = 256 };

// Clones of the block kernel for AVX2+FMA and for the baseline ISA, picked at load time, so a
// generic build still uses the wide registers of the machine it runs on.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GEMM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GEMM_CLONES
#endif

// op(A)[i0.., p0..] (mc x kc) into panels of MR rows: panel s holds, for each p, MR values of
// column p. Rows past mc are zero.
static void pack_a(bool trans, const float *A, int64_t lda, int64_t i0, int64_t mc, int64_t p0,
                   int64_t kc, float *Ap) {
    for (int64_t s = 0; s < mc; s += MR) {
        float *dst = Ap + s * kc;
        for (int i = 0; i < MR; i++) {
            int64_t row = i0 + s + i;
            if (s + i >= mc) {
                for (int64_t p = 0; p < kc; p++)
                    dst[p * MR + i] = 0.0f;
            } else if (trans) {
                for (int64_t p = 0; p < kc; p++)
                    dst[p * MR + i] = A[(p0 + p) * lda + row];
            } else {
                const float *src = A + row * lda + p0;
                for (int64_t p = 0; p < kc; p++)
                    dst[p * MR + i] = src[p];
            }
        }
    }
}

// op(B)[p0.., j0..] (kc x nc) into panels of NR columns: panel s holds, for each p, NR values of
// row p. Columns past nc are zero.
static void pack_b(bool trans, const float *B, int64_t ldb, int64_t p0, int64_t kc, int64_t j0,
                   int64_t nc, float *Bp) {
    for (int64_t s = 0; s < nc; s += NR) {
        float *dst = Bp + s * kc;
        int64_t w = ORCH_MIN(NR, nc - s);
        for (int64_t p = 0; p < kc; p++, dst += NR) {
            int64_t j = 0;
            if (trans)
                for (; j < w; j++)
                    dst[j] = B[(j0 + s + j) * ldb + p0 + p];
            else
                for (; j < w; j++)
                    dst[j] = B[(p0 + p) * ldb + j0 + s + j];
            for (; j < NR; j++)
                dst[j] = 0.0f;
        }
    }
}

// Always inlined, so each clone of block_kernel compiles the micro-kernel for its own ISA.
#define KERNEL_INLINE static inline __attribute__((always_inline))

// One MR x NR block of C from an A panel and a B panel: acc = sum_p a[p] (x) b[p], then
// C = alpha * acc + beta * C on the m x n corner that exists.
KERNEL_INLINE void micro_kernel(int64_t kc, const float *restrict a, const float *restrict b,
                                float alpha, float beta, float *restrict C, int64_t ldc, int64_t m,
                                int64_t n) {
    float acc[MR][NR] = {{0}};
    // Unrolled rows and a SIMD loop over the columns: acc stays in 12 (AVX2) vector registers.
    for (int64_t p = 0; p < kc; p++, a += MR, b += NR) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            float ai = a[i];
#pragma omp simd
            for (int j = 0; j < NR; j++)
                acc[i][j] += ai * b[j];
        }
    }
    for (int64_t i = 0; i < m; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f)
            for (int64_t j = 0; j < n; j++)
                c[j] = alpha * acc[i][j];
        else
            for (int64_t j = 0; j < n; j++)
                c[j] = alpha * acc[i][j] + beta * c[j];
    }
}

// The mc x nc tile of C at C from packed blocks, one micro-kernel per MR x NR block.
GEMM_CLONES
static void block_kernel(int64_t mc, int64_t nc, int64_t kc, float alpha, const float *Ap,
                         const float *Bp, float beta, float *C, int64_t ldc) {
    for (int64_t j = 0; j < nc; j += NR)
        for (int64_t i = 0; i < mc; i += MR)
            micro_kernel(kc, Ap + i * kc, Bp + j * kc, alpha, beta, C + i * ldc + j, ldc,
                         ORCH_MIN(MR, mc - i), ORCH_MIN(NR, nc - j));
}

static int64_t round_up(int64_t v, int64_t m) {
    return (v + m - 1) / m * m;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc) {
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    int64_t m_tiles = (M + MC - 1) / MC, n_tiles = (N + NC - 1) / NC;
    int64_t tiles = m_tiles * n_tiles;
    // Packing buffers sized to the problem, so small products do not pay for large ones.
    size_t a_size = (size_t)(round_up(ORCH_MIN(M, MC), MR) * ORCH_MIN(K, KC));
    size_t b_size = (size_t)(round_up(ORCH_MIN(N, NC), NR) * ORCH_MIN(K, KC));
    bool parallel = tiles > 1 && (double)M * (double)N * (double)K >= GEMM_PARALLEL_MIN;
#pragma omp parallel if (parallel)
    {
        float *Ap = xmalloc(a_size * sizeof(float));
        float *Bp = xmalloc(b_size * sizeof(float));
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < tiles; t++) {
            int64_t i0 = t / n_tiles * MC, j0 = t % n_tiles * NC;
            int64_t mc = ORCH_MIN(MC, M - i0), nc = ORCH_MIN(NC, N - j0);
            for (int64_t p0 = 0; p0 < K; p0 += KC) {
                int64_t kc = ORCH_MIN(KC, K - p0);
                pack_a(trans_a, A, lda, i0, mc, p0, kc, Ap);
                pack_b(trans_b, B, ldb, p0, kc, j0, nc, Bp);
                block_kernel(mc, nc, kc, alpha, Ap, Bp, p0 == 0 ? beta : 1.0f, C + i0 * ldc + j0,
                             ldc);
            }
        }
        free(Ap);
        free(Bp);
    }
}
