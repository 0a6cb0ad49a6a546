// Lab (bench/gpu/lab): FP64 tensor-core (DMMA) throughput, m8n8k4 and m16n8k4 / m16n8k16 (sm_90),
// and float <-> double conversion rate. nvcc -O3 -arch=sm_90a -o dmma dmma_rate.cu && ./dmma
#include <cstdio>
#include <cuda_runtime.h>
template <int SHAPE>
__global__ void __launch_bounds__(256) k_dmma(double *out, int iters) {
    double a[8], b[4], c[8][4];
    for (int i = 0; i < 8; i++) a[i] = threadIdx.x * 1e-3 + i;
    for (int i = 0; i < 4; i++) b[i] = 1.0 + i * 1e-3;
    for (int t = 0; t < 8; t++) for (int i = 0; i < 4; i++) c[t][i] = 0;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int t = 0; t < 8; t++) {
            if (SHAPE == 0) {
                asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                    : "+d"(c[t][0]), "+d"(c[t][1]) : "d"(a[t]), "d"(b[0]));
            } else if (SHAPE == 1) {
                asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                    : "+d"(c[t][0]), "+d"(c[t][1]), "+d"(c[t][2]), "+d"(c[t][3]) : "d"(a[0]), "d"(a[1]), "d"(b[t & 3]));
            } else {
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
                    : "+d"(c[t][0]), "+d"(c[t][1]), "+d"(c[t][2]), "+d"(c[t][3]) : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
            }
        }
    }
    double s = 0;
    for (int t = 0; t < 8; t++) for (int i = 0; i < 4; i++) s += c[t][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// float -> double conversion throughput
__global__ void __launch_bounds__(256) k_cvt(double *out, int iters) {
    float f[8]; double d[8] = {0};
    for (int i = 0; i < 8; i++) f[i] = threadIdx.x + i;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < 8; i++) { d[i] += (double)f[i]; f[i] = (float)d[i]; }
    }
    double s = 0; for (int i = 0; i < 8; i++) s += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
int main() {
    double *out; cudaMalloc(&out, 132 * 8 * 256 * 8);
    const char *nm[3] = {"m8n8k4", "m16n8k4", "m16n8k16"};
    const double macs[3] = {8 * 8 * 4, 16 * 8 * 4, 16 * 8 * 16};
    void (*ks[3])(double *, int) = {k_dmma<0>, k_dmma<1>, k_dmma<2>};
    for (int s = 0; s < 3; s++) for (int bps = 1; bps <= 4; bps *= 2) {
        int iters = 2000; cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        ks[s]<<<132 * bps, 256>>>(out, 10);
        cudaEventRecord(a); ks[s]<<<132 * bps, 256>>>(out, iters); cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b);
        double flops = 2.0 * macs[s] * 8 * iters * (132.0 * bps * 8);
        printf("%-9s warps/SM %2d: %.1f TFLOP/s fp64 (%s)\n", nm[s], 8 * bps, flops / ms / 1e9, cudaGetErrorString(cudaGetLastError()));
    }
    { int iters = 2000; cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
      k_cvt<<<132 * 4, 256>>>(out, 10);
      cudaEventRecord(a); k_cvt<<<132 * 4, 256>>>(out, iters); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b);
      printf("cvt f32<->f64 + dadd: %.2f conversions/clk/SM at 1.98 GHz\n", 2.0 * 8 * iters * 132.0 * 4 * 256 / (ms * 1e-3) / 132 / 1.98e9); }
    return 0;
}
