// Unit test of the blocked float32 GEMM (ops/gemm.c) against a naive triple loop in double:
// sizes of 1, primes and non-multiples of the register and cache tiles, both transposes, row
// strides wider than the matrices, alpha/beta, and beta = 0 over a NaN-poisoned C.
// Tolerance per element: |got-ref| <= 1e-6 + 2*K*FLT_EPSILON * sum_k |a_ik * b_kj| (float sums).
#include "../check.h"
#include "ops/gemm.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rng_state;

static float rnd(void) { // uniform in [-1, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 2685821657736338717ull >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

typedef struct Case {
    int64_t M, N, K;
    bool ta, tb;
    float alpha, beta;
    int64_t pad; // extra elements per row of A, B and C
} Case;

static void run_case(const Case *c) {
    int64_t M = c->M, N = c->N, K = c->K;
    // Stored shapes: A is M x K (K x M when transposed), B is K x N (N x K when transposed).
    int64_t a_rows = c->ta ? K : M, a_cols = c->ta ? M : K;
    int64_t b_rows = c->tb ? N : K, b_cols = c->tb ? K : N;
    int64_t lda = a_cols + c->pad, ldb = b_cols + c->pad, ldc = N + c->pad;
    float *A = malloc(sizeof(float) * (size_t)(a_rows * lda + 1));
    float *B = malloc(sizeof(float) * (size_t)(b_rows * ldb + 1));
    float *C = malloc(sizeof(float) * (size_t)(M * ldc + 1));
    float *C0 = malloc(sizeof(float) * (size_t)(M * ldc + 1));
    for (int64_t i = 0; i < a_rows * lda; i++)
        A[i] = rnd();
    for (int64_t i = 0; i < b_rows * ldb; i++)
        B[i] = rnd();
    for (int64_t i = 0; i < M * ldc; i++)
        C0[i] = C[i] = c->beta == 0.0f ? NAN : rnd();

    gemm_f32(c->ta, c->tb, M, N, K, c->alpha, A, lda, B, ldb, c->beta, C, ldc);

    int64_t bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = c->ta ? A[k * lda + i] : A[i * lda + k];
                double b = c->tb ? B[j * ldb + k] : B[k * ldb + j];
                sum += a * b;
                mag += fabs(a * b);
            }
            double ref = c->alpha * sum;
            if (c->beta != 0.0f)
                ref += (double)c->beta * C0[i * ldc + j];
            double tol = 1e-6 + 2.0 * (double)(K + 2) * FLT_EPSILON *
                                    (fabs(c->alpha) * mag + fabs(c->beta) + fabs(ref));
            double err = fabs(C[i * ldc + j] - ref);
            if (!(err <= tol))
                bad++;
            if (err > worst || err != err)
                worst = err;
        }
        // The padding past column N must be untouched.
        for (int64_t j = N; j < ldc; j++)
            if (!(C[i * ldc + j] == C0[i * ldc + j] ||
                  (C[i * ldc + j] != C[i * ldc + j] && C0[i * ldc + j] != C0[i * ldc + j])))
                bad++;
    }
    CHECK_MSG(bad == 0, "%lld bad elements, worst error %g", (long long)bad, worst);
    printf("  M=%lld N=%lld K=%lld ta=%d tb=%d alpha=%g beta=%g pad=%lld: worst error %.3g\n",
           (long long)M, (long long)N, (long long)K, c->ta, c->tb, c->alpha, c->beta,
           (long long)c->pad, worst);
    free(A);
    free(B);
    free(C);
    free(C0);
}

static const Case cases[] = {
    {1, 1, 1, false, false, 1, 0, 0},
    {1, 1, 7, false, false, 1, 0, 0},
    {1, 17, 1, false, false, 1, 0, 0},
    {7, 1, 13, false, false, 1, 0, 0},
    {6, 16, 32, false, false, 1, 0, 0}, // exactly one register tile
    {5, 15, 31, false, false, 1, 0, 0}, // just under
    {7, 17, 33, false, false, 1, 0, 0}, // just over
    {13, 29, 37, true, false, 1, 0, 0},
    {13, 29, 37, false, true, 1, 0, 0},
    {13, 29, 37, true, true, 1, 0, 0},
    {31, 23, 19, false, false, 0.5f, 2, 3}, // alpha, beta, strided rows
    {31, 23, 19, true, true, -1.5f, 0.25f, 5},
    {121, 257, 257, false, false, 1, 0, 0}, // one past each cache block (MC, NC, KC)
    {127, 263, 521, true, false, 1, 1, 2},  // primes over several blocks, parallel path
    {64, 3136, 576, false, false, 1, 0, 0}, // a ResNet 3x3 conv at 56x56
    {1, 1000, 512, false, true, 1, 1, 0},   // a classifier layer
    {241, 3, 700, false, true, 1, 0, 1},
    {9, 11, 0, false, false, 1, 0.5f, 0}, // empty sum: C = beta * C
    {9, 11, 0, false, false, 1, 0, 0},
};

static void report(const char *what, size_t i) {
    printf("%s %s %zu\n", check_failed_case ? "FAIL" : "ok  ", what, i);
    if (check_failed_case)
        check_n_fail++;
    else
        check_n_pass++;
    check_failed_case = 0;
}

// usage: unit_gemm [SEED]
int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i]);
        report("fixed case", i);
    }
    // Random shapes and options, sizes 1..200.
    for (size_t i = 0; i < 12; i++) {
        // One draw per statement: the order of initializer side effects is unspecified.
        Case c;
        c.M = 1 + (int64_t)((rnd() + 1) * 100);
        c.N = 1 + (int64_t)((rnd() + 1) * 100);
        c.K = 1 + (int64_t)((rnd() + 1) * 100);
        c.ta = rnd() > 0;
        c.tb = rnd() > 0;
        c.alpha = rnd() > 0 ? 1.0f : rnd();
        c.beta = rnd() > 0 ? 0.0f : rnd();
        c.pad = rnd() > 0 ? 3 : 0;
        run_case(&c);
        report("random case", i);
    }
    return CHECK_DONE();
}
