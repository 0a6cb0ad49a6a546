// Lab (bench/gpu/lab): what widening float32 operands to double costs the FP64 tensor cores.
// The f64 MLP kernel's inner loop (v=f64, emit_mlp_cuda.c): a warp owns 2 m-tiles of 16 rows and
// 8 n-tiles of 8 columns; each k step of 4 loads the A fragments (2 values a lane an m-tile) and
// the B fragments (1 value a lane an n-tile) from shared memory and issues 16 m16n8k4 DMMAs.
// Variants: operands stored as double (no conversion); B float (converted per use, as the kernel
// does) and A double; both float (the kernel); both float widened by integer bit operations.
// Then float32 FMAs beside the DMMAs (how much of their issue time the DMMAs hide), and with
// LAB_K16=1 the same beside m16n8k16 DMMAs.
// H200: conversions free (62.6-65.0 TFLOP/s either way, integer widening 47-54);
// beside m16n8k4 DMMAs (one m-tile, 16 warps) 0 / 32 / 128 FMAs a k step of 4 ran at 4.30 / 5.23
// / 8.22 SM-cycles a DMMA (their issue time added whole), beside m16n8k16 ones at 4.3 / 4.4 / 4.6
// (62.2 / 61.2 / 58.0 TFLOP/s).
// nvcc -O3 -arch=sm_90a -o dmma_cvt dmma_cvt.cu && ./dmma_cvt
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define LDA 68 // floats a row of a warp's 32 x 64 activations (+4: the 4 k lanes on other banks)
#define LDW 72 // floats a row of the 64 x 64 weights (+8: k rows 0..3 on distinct banks)

// float -> double by bit operations (normal numbers and zero; denormals flushed; inf/nan kept).
__device__ __forceinline__ double f2d_int(float f) {
    unsigned u = __float_as_uint(f), m = u & 0x7fffffffu;
    unsigned hi = (m >> 3) + 0x38000000u, lo = u << 29;
    hi = m < 0x00800000u ? 0u : hi;         // zero and denormals: +0
    hi = m >= 0x7f800000u ? (m >> 3) | 0x7ff00000u : hi; // inf, nan
    return __hiloint2double((int)(hi | (u & 0x80000000u)), (int)lo);
}

// EPI: independent float32 FMAs a lane issues per k step of 4 beside the DMMAs (MUFU: every
// eighth an ex2), standing in for the epilogue that ilv interleaves with them.
template <int AD, int BD, int INT, int EPI = 0, int MUFU = 0, int MT = 2> // MT: m-tiles a warp; AD / BD: A / B stored as double; INT: integer widening
__global__ void __launch_bounds__(MT == 2 ? 384 : 512, 1) k_loop(double *out, int iters) {
    extern __shared__ __align__(16) unsigned char sm[];
    // weights: 64 x LDW, as float or double; then each warp's 32 x LDA activations
    float *wf = (float *)sm;
    double *wd = (double *)sm;
    int wbytes = 64 * LDW * (BD ? 8 : 4);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    unsigned char *pbase = sm + wbytes + warp * 32 * LDA * (AD ? 8 : 4);
    float *pf = (float *)pbase;
    double *pd = (double *)pbase;
    for (int i = threadIdx.x; i < 64 * LDW; i += blockDim.x) {
        if (BD) wd[i] = 1e-3 * (i % 97); else wf[i] = 1e-3f * (i % 97);
    }
    for (int i = lane; i < 32 * LDA; i += 32) {
        if (AD) pd[i] = 1e-3 * (i % 89); else pf[i] = 1e-3f * (i % 89);
    }
    __syncthreads();
    double c[MT][8][4];
    for (int m = 0; m < MT; m++) for (int n = 0; n < 8; n++) for (int i = 0; i < 4; i++) c[m][n][i] = 0;
    float e[4] = {lane * 1e-3f, 0.5f, 0.25f, 0.125f};
    for (int it = 0; it < iters; it++) {
#pragma unroll 2
        for (int k = 0; k < 64; k += 4) {
#pragma unroll
            for (int i = 0; i < EPI / 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    e[j] = (MUFU && i % 8 == 7) ? exp2f(e[j]) : fmaf(e[j], 0.999f, 1e-4f);
            double a[MT][2], b[8];
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    int idx = (m * 16 + g + 8 * h) * LDA + k + q;
                    if (AD) a[m][h] = pd[idx];
                    else a[m][h] = INT ? f2d_int(pf[idx]) : (double)pf[idx];
                }
#pragma unroll
            for (int n = 0; n < 8; n++) {
                int idx = (k + q) * LDW + n * 8 + g;
                if (BD) b[n] = wd[idx];
                else b[n] = INT ? f2d_int(wf[idx]) : (double)wf[idx];
            }
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int n = 0; n < 8; n++)
                    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                                 : "+d"(c[m][n][0]), "+d"(c[m][n][1]), "+d"(c[m][n][2]), "+d"(c[m][n][3])
                                 : "d"(a[m][0]), "d"(a[m][1]), "d"(b[n]));
        }
    }
    double s = e[0] + e[1] + e[2] + e[3];
    for (int m = 0; m < MT; m++) for (int n = 0; n < 8; n++) for (int i = 0; i < 4; i++) s += c[m][n][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int AD, int BD, int INT, int EPI = 0, int MUFU = 0, int MT = 2> void run(const char *name, int warps, double *out) {
    int smem = 64 * LDW * (BD ? 8 : 4) + warps * 32 * LDA * (AD ? 8 : 4);
    cudaFuncSetAttribute(k_loop<AD, BD, INT, EPI, MUFU, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int iters = 400;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    k_loop<AD, BD, INT, EPI, MUFU, MT><<<132, warps * 32, smem>>>(out, 4);
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(e0); k_loop<AD, BD, INT, EPI, MUFU, MT><<<132, warps * 32, smem>>>(out, iters); cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
    }
    double dmma = MT * 8.0 * 16 * (double)iters * 132 * warps; // m16n8k4 per launch
    double flops = dmma * 2 * 16 * 8 * 4;
    printf("%-26s warps/SM %2d: %6.1f TFLOP/s fp64 %.2f SM-cycles/DMMA (%s)\n", name, warps,
           flops / best / 1e9, best * 1e-3 * 1.98e9 / (dmma / 132), cudaGetErrorString(cudaGetLastError()));
}

// The same with m16n8k16 DMMAs (one instruction for four m16n8k4 k steps), one m-tile a warp,
// B as double: does a larger DMMA leave the issue slots free for the float work beside it?
template <int EPI>
__global__ void __launch_bounds__(512, 1) k_loop16(double *out, int iters) {
    extern __shared__ __align__(16) unsigned char sm[];
    double *wd = (double *)sm;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    float *pf = (float *)(sm + 64 * LDW * 8 + warp * 32 * LDA * 4);
    for (int i = threadIdx.x; i < 64 * LDW; i += blockDim.x) wd[i] = 1e-3 * (i % 97);
    for (int i = lane; i < 32 * LDA; i += 32) pf[i] = 1e-3f * (i % 89);
    __syncthreads();
    double c[8][4];
    for (int n = 0; n < 8; n++) for (int i = 0; i < 4; i++) c[n][i] = 0;
    float e[4] = {lane * 1e-3f, 0.5f, 0.25f, 0.125f};
    for (int it = 0; it < iters; it++) {
#pragma unroll 1
        for (int k = 0; k < 64; k += 16) {
#pragma unroll
            for (int i = 0; i < EPI; i++) // EPI a k step of 4: 4 x EPI a k step of 16
#pragma unroll
                for (int j = 0; j < 4; j++)
                    e[j] = fmaf(e[j], 0.999f, 1e-4f);
            double a[8];
#pragma unroll
            for (int h = 0; h < 8; h++)
                a[h] = (double)pf[(g + 8 * (h & 1)) * LDA + k + q + 4 * (h >> 1)];
#pragma unroll
            for (int n = 0; n < 8; n++) {
                double b[4];
#pragma unroll
                for (int h = 0; h < 4; h++) b[h] = wd[(k + q + 4 * h) * LDW + n * 8 + g];
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
                             : "+d"(c[n][0]), "+d"(c[n][1]), "+d"(c[n][2]), "+d"(c[n][3])
                             : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                               "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
            }
        }
    }
    double s = e[0] + e[1] + e[2] + e[3];
    for (int n = 0; n < 8; n++) for (int i = 0; i < 4; i++) s += c[n][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int EPI> void run16(const char *name, int warps, double *out) {
    int smem = 64 * LDW * 8 + warps * 32 * LDA * 4;
    cudaFuncSetAttribute(k_loop16<EPI>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int iters = 400;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    k_loop16<EPI><<<132, warps * 32, smem>>>(out, 4);
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(e0); k_loop16<EPI><<<132, warps * 32, smem>>>(out, iters); cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
    }
    double dmma = 4 * 8.0 * 4 * (double)iters * 132 * warps; // in m16n8k4 units (4 k16 steps)
    printf("%-26s warps/SM %2d: %6.1f TFLOP/s fp64 %.2f SM-cycles/DMMA k4 (%s)\n", name, warps,
           dmma * 2 * 512 / best / 1e9, best * 1e-3 * 1.98e9 / (dmma / 132), cudaGetErrorString(cudaGetLastError()));
}

int main() {
    double *out; cudaMalloc(&out, 132 * 512 * 8);
    if (getenv("LAB_K16")) {
        for (int w = 8; w <= 16; w += 8) {
            run16<0>("k16 B double", w, out);
            run16<8>("k16 B double, 32 FMA/k4", w, out);
            run16<16>("k16 B double, 64 FMA/k4", w, out);
            run16<32>("k16 B double, 128 FMA/k4", w, out);
            run<0, 1, 0, 0, 0, 1>("mt1 B double", w, out);
            run<0, 1, 0, 32, 0, 1>("mt1 B double, 32 FMA/k4", w, out);
            run<0, 1, 0, 128, 0, 1>("mt1 B double, 128 FMA/k4", w, out);
        }
        return 0;
    }
    for (int w = 8; w <= 12; w += 4) {
        if (w == 8) { // 12 warps' double activations do not fit in shared memory
            run<1, 1, 0>("A double, B double", w, out);
            run<1, 0, 0>("A double, B float cvt", w, out);
            run<1, 0, 1>("A double, B float int", w, out);
        }
        run<0, 1, 0>("A float cvt, B double", w, out);
        run<0, 0, 0>("A float cvt, B float cvt", w, out);
        run<0, 0, 1>("A float int, B float int", w, out);
    }
    // Float work beside the DMMAs, one m-tile a warp: a k step of 4 is 8 DMMAs (128 cycles of
    // a scheduler's share of the FP64 tensor pipe) and EPI other instructions a warp; four
    // warps a scheduler (16 a block) overlap them fully if the time stays that of EPI = 0.
    for (int w = 8; w <= 16; w += 4) {
        run<0, 1, 0, 0, 0, 1>("mt1 B double", w, out);
        run<0, 1, 0, 16, 0, 1>("mt1 B double, 16 FMA/k4", w, out);
        run<0, 1, 0, 32, 0, 1>("mt1 B double, 32 FMA/k4", w, out);
        run<0, 1, 0, 64, 0, 1>("mt1 B double, 64 FMA/k4", w, out);
        run<0, 1, 0, 128, 0, 1>("mt1 B double, 128 FMA/k4", w, out);
        run<0, 1, 0, 32, 1, 1>("mt1 B double, 32 FMA+ex2/k4", w, out);
        run<0, 0, 0, 32, 0, 1>("mt1 B float, 32 FMA/k4", w, out);
    }
    return 0;
}
