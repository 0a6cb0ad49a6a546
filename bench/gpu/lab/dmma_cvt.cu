// Lab (bench/gpu/lab): what widening float32 operands to double costs the FP64 tensor cores.
// The f64 MLP kernel's inner loop (v=f64, emit_mlp_cuda.c): a warp owns 2 m-tiles of 16 rows and
// 8 n-tiles of 8 columns; each k step of 4 loads the A fragments (2 values a lane an m-tile) and
// the B fragments (1 value a lane an n-tile) from shared memory and issues 16 m16n8k4 DMMAs.
// Variants: operands stored as double (no conversion); B float (converted per use, as the kernel
// does) and A double; both float (the kernel); both float widened by integer bit operations.
// nvcc -O3 -arch=sm_90a -o dmma_cvt dmma_cvt.cu && ./dmma_cvt
#include <cstdio>
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

template <int AD, int BD, int INT> // AD / BD: A / B stored as double; INT: integer widening
__global__ void __launch_bounds__(384, 1) k_loop(double *out, int iters) {
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
    double c[2][8][4];
    for (int m = 0; m < 2; m++) for (int n = 0; n < 8; n++) for (int i = 0; i < 4; i++) c[m][n][i] = 0;
    for (int it = 0; it < iters; it++) {
#pragma unroll 2
        for (int k = 0; k < 64; k += 4) {
            double a[2][2], b[8];
#pragma unroll
            for (int m = 0; m < 2; m++)
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
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int n = 0; n < 8; n++)
                    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                                 : "+d"(c[m][n][0]), "+d"(c[m][n][1]), "+d"(c[m][n][2]), "+d"(c[m][n][3])
                                 : "d"(a[m][0]), "d"(a[m][1]), "d"(b[n]));
        }
    }
    double s = 0;
    for (int m = 0; m < 2; m++) for (int n = 0; n < 8; n++) for (int i = 0; i < 4; i++) s += c[m][n][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int AD, int BD, int INT> void run(const char *name, int warps, double *out) {
    int smem = 64 * LDW * (BD ? 8 : 4) + warps * 32 * LDA * (AD ? 8 : 4);
    cudaFuncSetAttribute(k_loop<AD, BD, INT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int iters = 400;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    k_loop<AD, BD, INT><<<132, warps * 32, smem>>>(out, 4);
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(e0); k_loop<AD, BD, INT><<<132, warps * 32, smem>>>(out, iters); cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
    }
    double dmma = 2.0 * 8 * 16 * (double)iters * 132 * warps; // m16n8k4 per launch
    double flops = dmma * 2 * 16 * 8 * 4;
    printf("%-26s warps/SM %2d: %6.1f TFLOP/s fp64 %.2f SM-cycles/DMMA (%s)\n", name, warps,
           flops / best / 1e9, best * 1e-3 * 1.98e9 / (dmma / 132), cudaGetErrorString(cudaGetLastError()));
}

int main() {
    double *out; cudaMalloc(&out, 132 * 384 * 8);
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
    return 0;
}
