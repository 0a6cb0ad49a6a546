// The machine's measured float32 FMA peak: every thread runs independent chains of fused
// multiply-adds on the widest vector registers the compiler targets (-march=native: AVX-512,
// AVX2+FMA, NEON, else GCC's generic vectors), enough chains to cover the FMA latency on every port.
// Needs a C compiler with OpenMP (cc -O3 -march=native -fopenmp). Prints one line per thread count
// asked: "threads N gflops X wall_gflops Y" (best of the reps; FLOPs = 2 per lane per FMA; X per
// thread CPU time, the hardware's peak on a shared machine, Y per wall time), exit 1 on bad usage.
// usage: fma_peak [THREADS...]   (default: 1 and omp_get_num_procs())
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float VSUM(vec v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#elif defined(__ARM_NEON)
#include <arm_neon.h>
typedef float32x4_t vec;
#define LANES 4
#define VSET(x) vdupq_n_f32(x)
#define VFMA(a, b, c) vfmaq_f32(c, a, b)
#define VSUM(v) vaddvq_f32(v)
#else
typedef float vec __attribute__((vector_size(16)));
#define LANES 4
#define VSET(x) ((vec){x, x, x, x})
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VSUM(v) ((v)[0] + (v)[1] + (v)[2] + (v)[3])
#endif

// 16 chains: FMA latency (4-5 cycles) x 2 ports needs 8-10 in flight; 16 leaves room and still
// fits the 32 (AVX-512, NEON) or 16 (AVX2) registers with the two operands kept in registers.
#define CHAINS 16
#define ITERS 10000000L

static float run_chains(float seed) {
    vec acc[CHAINS];
    for (int c = 0; c < CHAINS; c++)
        acc[c] = VSET(seed + (float)c * 1e-3f);
    const vec m = VSET(0.999999f), k = VSET(1e-7f);
    for (long i = 0; i < ITERS; i++) {
        // no barrier here: one would spill the chains to memory every step; without -ffast-math
        // the compiler can neither fold nor reassociate the FMAs, and the sum below is printed
        for (int c = 0; c < CHAINS; c++)
            acc[c] = VFMA(acc[c], m, k);
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++)
        s += VSUM(acc[c]);
    return s;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The best of reps at `threads`: *cpu, the sum of each thread's FLOPs over its own CPU time (the
// cores' peak even while other processes take turns on them: time-sliced away does not count;
// hyperthreads sharing FMA units halve each other's rate alike); *wall, all FLOPs over wall time.
static void peak(int threads, int reps, double *cpu, double *wall) {
    volatile float sink = 0;
    const double per_thread = 2.0 * LANES * CHAINS * (double)ITERS;
    *cpu = *wall = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime(), rate = 0;
        float s = 0;
#pragma omp parallel num_threads(threads) reduction(+ : s, rate)
        {
            double c0 = thread_cpu_s();
            s += run_chains((float)omp_get_thread_num());
            rate += per_thread / (thread_cpu_s() - c0);
        }
        double dt = omp_get_wtime() - t0;
        sink += s;
        // more threads than processors: the sum counts each core once per thread on it
        if (threads > omp_get_num_procs())
            rate *= (double)omp_get_num_procs() / threads;
        if (rate > *cpu)
            *cpu = rate;
        if (per_thread * threads / dt > *wall)
            *wall = per_thread * threads / dt;
    }
    (void)sink;
    *cpu /= 1e9;
    *wall /= 1e9;
}

int main(int argc, char **argv) {
    int counts[64], n = 0;
    for (int i = 1; i < argc && n < 64; i++) {
        char *end;
        long t = strtol(argv[i], &end, 10);
        if (*end || t < 1 || t > 4096) {
            fprintf(stderr, "fma_peak: '%s' is not a thread count\n", argv[i]);
            return 1;
        }
        counts[n++] = (int)t;
    }
    if (n == 0) {
        counts[n++] = 1;
        if (omp_get_num_procs() > 1)
            counts[n++] = omp_get_num_procs();
    }
    printf("lanes %d\n", LANES);
    for (int i = 0; i < n; i++) {
        double cpu, wall;
        peak(counts[i], 5, &cpu, &wall);
        printf("threads %d gflops %.2f wall_gflops %.2f\n", counts[i], cpu, wall);
    }
    return 0;
}
