// The CUDA foundation without and with a GPU: the no-driver and no-device messages (the
// machine's own dlopen of libcuda.so.1 is the oracle for which one applies), the fingerprint
// format, NVRTC compiles of representative kernels (float4 elementwise, warp-shuffle block
// reduction, shared-memory tiled SGEMM, mma.sync m16n8k8 tf32) for sm_80 and sm_90a in parallel
// threads, the compile error path; and where a device exists, the kernels run and are compared
// with the CPU (elementwise also timed with events and replayed from a captured CUDA graph).
// Skips print a line saying why. Usage: unit_cuda_api [seed]
#define _GNU_SOURCE
#include "../gpu_check.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/nvrtc.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static float frand(void) { // uniform in [-1, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

// ---- the kernels ----------------------------------------------------------------------------

// y = a * b + exp(-|a|): 128-bit loads and stores for the n/4 vectors, a scalar tail, grid-stride.
static const char K_ELEMWISE[] =
    "ORCH_KERNEL void ew_mul_exp(const float *__restrict__ a, const float *__restrict__ b,\n"
    "                            float *__restrict__ y, int64_t n) {\n"
    "    const int64_t n4 = n >> 2, stride = (int64_t)gridDim.x * blockDim.x;\n"
    "    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    const float4 *a4 = (const float4 *)a, *b4 = (const float4 *)b;\n"
    "    float4 *y4 = (float4 *)y;\n"
    "    for (int64_t i = t; i < n4; i += stride) {\n"
    "        float4 x = a4[i], z = b4[i], r;\n"
    "        r.x = x.x * z.x + expf(-fabsf(x.x));\n"
    "        r.y = x.y * z.y + expf(-fabsf(x.y));\n"
    "        r.z = x.z * z.z + expf(-fabsf(x.z));\n"
    "        r.w = x.w * z.w + expf(-fabsf(x.w));\n"
    "        y4[i] = r;\n"
    "    }\n"
    "    for (int64_t i = 4 * n4 + t; i < n; i += stride)\n"
    "        y[i] = a[i] * b[i] + expf(-fabsf(a[i]));\n"
    "}\n";

// y[r] = sum_c x[r, c]: one block of 256 threads per row, warp shuffles then shared memory.
static const char K_REDUCE[] =
    "ORCH_KERNEL void __launch_bounds__(256) row_sum(const float *__restrict__ x,\n"
    "                                                float *__restrict__ y, int C) {\n"
    "    __shared__ float scratch[32];\n"
    "    const float *row = x + (int64_t)blockIdx.x * C;\n"
    "    float s = 0.0f;\n"
    "    for (int c = threadIdx.x; c < C; c += blockDim.x) s += row[c];\n"
    "    s = orch_block_sum(s, scratch);\n"
    "    if (threadIdx.x == 0) y[blockIdx.x] = s;\n"
    "}\n";

// C = A B (row-major M x K, K x N): 64 x 64 block tiles staged through shared memory in steps of
// 16 along K, 4 x 4 outputs per thread in registers, any M, N, K.
static const char K_SGEMM[] =
    "#define BM 64\n#define BN 64\n#define BK 16\n"
    "ORCH_KERNEL void __launch_bounds__(256) sgemm_64x64(const float *__restrict__ A,\n"
    "        const float *__restrict__ B, float *__restrict__ C, int M, int N, int K) {\n"
    "    __shared__ float As[BK][BM + 4];\n"
    "    __shared__ __align__(16) float Bs[BK][BN];\n"
    "    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n"
    "    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;\n"
    "    float acc[4][4] = {};\n"
    "    for (int k0 = 0; k0 < K; k0 += BK) {\n"
    "        for (int l = threadIdx.x; l < BM * BK; l += 256) {\n"
    "            int r = l / BK, c = l % BK, gm = m0 + r, gk = k0 + c;\n"
    "            As[c][r] = (gm < M && gk < K) ? A[(int64_t)gm * K + gk] : 0.0f;\n"
    "        }\n"
    "        for (int l = threadIdx.x; l < BK * BN; l += 256) {\n"
    "            int r = l / BN, c = l % BN, gk = k0 + r, gn = n0 + c;\n"
    "            Bs[r][c] = (gk < K && gn < N) ? B[(int64_t)gk * N + gn] : 0.0f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < BK; k++) {\n"
    "            float a[4];\n"
    "            float4 b = *(const float4 *)&Bs[k][tx * 4];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++) a[i] = As[k][ty * 4 + i];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++) {\n"
    "                acc[i][0] += a[i] * b.x; acc[i][1] += a[i] * b.y;\n"
    "                acc[i][2] += a[i] * b.z; acc[i][3] += a[i] * b.w;\n"
    "            }\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    for (int i = 0; i < 4; i++)\n"
    "        for (int j = 0; j < 4; j++) {\n"
    "            int gm = m0 + ty * 4 + i, gn = n0 + tx * 4 + j;\n"
    "            if (gm < M && gn < N) C[(int64_t)gm * N + gn] = acc[i][j];\n"
    "        }\n"
    "}\n";

// C = A B on tensor cores in tf32: one warp per 16 x 8 tile of C, mma.sync m16n8k8 over K
// (M % 16 == 0, N % 8 == 0, K % 8 == 0). Fragment layout from the PTX ISA: g = lane / 4,
// t = lane % 4; A (row) a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4); B (col) b0 (t, g)
// b1 (t+4, g); C c0 (g, 2t) c1 (g, 2t+1) c2 (g+8, 2t) c3 (g+8, 2t+1).
static const char K_MMA[] =
    "__device__ __forceinline__ uint32_t to_tf32(float x) {\n"
    "    uint32_t r;\n"
    "    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
    "    return r;\n"
    "}\n"
    "ORCH_KERNEL void __launch_bounds__(32) mma_tf32_16x8(const float *__restrict__ A,\n"
    "        const float *__restrict__ B, float *__restrict__ C, int M, int N, int K) {\n"
    "    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;\n"
    "    const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;\n"
    "    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;\n"
    "    for (int k0 = 0; k0 < K; k0 += 8) {\n"
    "        uint32_t a0 = to_tf32(A[(int64_t)(m0 + g) * K + k0 + t]);\n"
    "        uint32_t a1 = to_tf32(A[(int64_t)(m0 + g + 8) * K + k0 + t]);\n"
    "        uint32_t a2 = to_tf32(A[(int64_t)(m0 + g) * K + k0 + t + 4]);\n"
    "        uint32_t a3 = to_tf32(A[(int64_t)(m0 + g + 8) * K + k0 + t + 4]);\n"
    "        uint32_t b0 = to_tf32(B[(int64_t)(k0 + t) * N + n0 + g]);\n"
    "        uint32_t b1 = to_tf32(B[(int64_t)(k0 + t + 4) * N + n0 + g]);\n"
    "        asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \"\n"
    "                     \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                     : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n"
    "                     : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
    "    }\n"
    "    C[(int64_t)(m0 + g) * N + n0 + 2 * t] = d0;\n"
    "    C[(int64_t)(m0 + g) * N + n0 + 2 * t + 1] = d1;\n"
    "    C[(int64_t)(m0 + g + 8) * N + n0 + 2 * t] = d2;\n"
    "    C[(int64_t)(m0 + g + 8) * N + n0 + 2 * t + 1] = d3;\n"
    "}\n";

typedef struct {
    const char *name; // kernel (function) name, also the program name
    const char *body;
} KernelSrc;

static const KernelSrc KERNELS[] = {
    {"ew_mul_exp", K_ELEMWISE},
    {"row_sum", K_REDUCE},
    {"sgemm_64x64", K_SGEMM},
    {"mma_tf32_16x8", K_MMA},
};
enum { N_KERNELS = (int)ORCH_COUNT(KERNELS) };
static const char *const ARCHS[] = {"sm_80", "sm_90a"};
static const int ARCH_CC[] = {80, 90};
enum { N_ARCHS = (int)ORCH_COUNT(ARCHS) };

static char *with_prelude(const char *body) {
    const char *pre = orch_cuda_prelude();
    size_t a = strlen(pre), b = strlen(body);
    char *s = malloc(a + b + 1);
    memcpy(s, pre, a);
    memcpy(s + a, body, b + 1);
    return s;
}

// ---- (a) no driver, no device ---------------------------------------------------------------

static bool g_driver_present; // this machine's own dlopen of libcuda.so.1 succeeds
static const CudaApi *g_api;  // cuda_api_load's table, NULL without a device
static Err g_load_err;        // why not

static void test_no_driver_message(void) {
    Err e1 = {0}, e2 = {0};
    const CudaApi *a1 = cuda_api_load(&e1);
    const CudaApi *a2 = cuda_api_load(&e2);
    CHECK(a1 == a2);
    if (a1) {
        printf("  skip: a CUDA device is present (%d device(s), driver %d): the no-driver path "
               "cannot be observed here\n",
               a1->device_count, a1->driver_version);
        CHECK(g_driver_present && e1.code == ST_OK && a1->device_count > 0);
        return;
    }
    CHECK(e1.code == ST_UNSUPPORTED && e2.code == ST_UNSUPPORTED);
    CHECK_MSG(strcmp(e1.msg, e2.msg) == 0, "'%s' vs '%s'", e1.msg, e2.msg);
    if (!g_driver_present) {
        CHECK_MSG(strcmp(e1.msg, "no CUDA driver found (libcuda.so.1): this machine has no NVIDIA "
                                 "GPU or driver; use -t cpu") == 0,
                  "got '%s'", e1.msg);
    } else {
        printf("  (libcuda.so.1 loads but no device: '%s')\n", e1.msg);
        CHECK_MSG(strncmp(e1.msg, "no CUDA device found (", 22) == 0, "got '%s'", e1.msg);
    }
}

// The toolkit's stub libcuda (lib64/stubs) exports every entry point but fails cuInit: the
// no-device path, reachable on any machine with the toolkit.
static void test_stub_driver_no_device(void) {
    char path[600];
    const char *home = getenv("CUDA_HOME");
    snprintf(path, sizeof path, "%s/lib64/stubs/libcuda.so",
             home && *home ? home : "/usr/local/cuda");
    if (access(path, R_OK) != 0) {
        printf("  skip: no stub driver at %s\n", path);
        return;
    }
    CudaApi api;
    Err e = {0};
    int rc = cuda_api_open(&api, path, &e);
    CHECK(rc == ST_UNSUPPORTED && e.code == ST_UNSUPPORTED);
    CHECK_MSG(strncmp(e.msg, "no CUDA device found (cuInit: CUDA_ERROR_STUB_LIBRARY", 51) == 0,
              "got '%s'", e.msg);
    CHECK(api.lib == NULL && api.cuInit == NULL); // closed again
    printf("  stub: %s\n", e.msg);
    Err e2 = {0};
    CHECK(cuda_api_open(&api, "/nonexistent/libcuda.so.1", &e2) == ST_UNSUPPORTED);
    CHECK_MSG(strstr(e2.msg, "no CUDA driver found (/nonexistent/libcuda.so.1)") != NULL,
              "got '%s'", e2.msg);
    cuda_api_close(&api);
}

static void test_check_message(void) {
    Err e = {0};
    CHECK(cuda_check(NULL, CUDA_SUCCESS, "cuMemAlloc", &e) == ST_OK && e.code == ST_OK);
    CHECK(cuda_check(g_api, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", &e) == ST_RUNTIME);
    if (g_api)
        CHECK_MSG(
            strcmp(e.msg, "CUDA cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory") == 0,
            "got '%s'", e.msg);
    else
        CHECK_MSG(strcmp(e.msg, "CUDA cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY") == 0,
                  "got '%s'", e.msg);
    Err e2 = {0};
    CHECK(cuda_check(NULL, 12345, "cuLaunchKernel", &e2) == ST_RUNTIME);
    CHECK_MSG(strcmp(e2.msg, "CUDA cuLaunchKernel failed: CUresult 12345") == 0, "got '%s'",
              e2.msg);
}

static void test_arch_and_fingerprint(void) {
    char a[16];
    cuda_arch_name(8, 0, a, sizeof a);
    CHECK(strcmp(a, "sm_80") == 0);
    cuda_arch_name(8, 6, a, sizeof a);
    CHECK(strcmp(a, "sm_86") == 0);
    cuda_arch_name(9, 0, a, sizeof a);
    CHECK(strcmp(a, "sm_90a") == 0);
    cuda_arch_name(10, 0, a, sizeof a);
    CHECK(strcmp(a, "sm_100a") == 0);
    // An H100 SXM as its driver reports it.
    CudaHw hw = {0};
    snprintf(hw.name, sizeof hw.name, "NVIDIA H100 80GB HBM3");
    hw.cc_major = 9;
    hw.sm_count = 132;
    hw.l2_bytes = 50 * 1024 * 1024;
    hw.smem_per_sm = 233472;
    hw.driver_version = 13000;
    hw.nvrtc_major = 13;
    HwInfo info;
    cuda_hw_info(&hw, &info);
    CHECK_MSG(strcmp(info.fingerprint, "cuda|NVIDIA H100 80GB HBM3|sm_90|SMs=132|L2=50M|smem=228K|"
                                       "driver=13000|nvrtc=13.0") == 0,
              "got '%s'", info.fingerprint);
    CHECK(strcmp(info.target, "cuda") == 0 && info.cores == 132 && info.l2 == hw.l2_bytes);
    CHECK(strcmp(info.compiler, "nvrtc 13.0") == 0 && strcmp(info.model, hw.name) == 0);
    hw.l2_bytes = 40 * 1024 * 1024 + 512 * 1024; // not whole MiB
    cuda_hw_info(&hw, &info);
    CHECK_MSG(strstr(info.fingerprint, "|L2=41472K|") != NULL, "got '%s'", info.fingerprint);
}

// ---- (b) NVRTC compile-only -----------------------------------------------------------------

static bool g_have_nvrtc;

typedef struct {
    int kernel;
    void *cubin[N_ARCHS];
    size_t size[N_ARCHS];
    Err err[N_ARCHS];
    double seconds;
} CompileJob;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *compile_thread(void *arg) {
    CompileJob *j = arg;
    char *src = with_prelude(KERNELS[j->kernel].body);
    double t0 = now_s();
    for (int a = 0; a < N_ARCHS; a++) {
        if (!nvrtc_supports_cc(ARCH_CC[a]))
            continue; // an NVRTC older than the architecture (sm_90a needs CUDA 12)
        NvrtcOptions o = {.arch = ARCHS[a]};
        nvrtc_compile(src, KERNELS[j->kernel].name, &o, &j->cubin[a], &j->size[a], &j->err[a]);
    }
    j->seconds = now_s() - t0;
    free(src);
    return NULL;
}

static bool bytes_contain(const void *hay, size_t n, const char *needle) {
    return memmem(hay, n, needle, strlen(needle)) != NULL;
}

// A cubin: a 64-bit little-endian ELF for EM_CUDA (190) whose string table names the kernel,
// built for SM `cc` where its CUDA ELF ABI version tells where e_flags keeps it (read off nvcc's
// cubins: ABI 7 (CUDA <= 12) in bits 0-7, ABI 8 (CUDA 13) in bits 8-15).
static bool is_cubin_for(const void *bin, size_t n, const char *kernel, int cc) {
    const unsigned char *p = bin;
    if (n < 64 ||
        memcmp(p,
               "\x7f"
               "ELF",
               4) != 0 ||
        p[4] != 2 || p[5] != 1)
        return false;
    if ((p[18] | p[19] << 8) != 190)
        return false;
    uint32_t flags =
        (uint32_t)p[48] | (uint32_t)p[49] << 8 | (uint32_t)p[50] << 16 | (uint32_t)p[51] << 24;
    if (p[8] == 7 && (int)(flags & 0xff) != cc)
        return false;
    if (p[8] == 8 && (int)(flags >> 8 & 0xff) != cc)
        return false;
    return bytes_contain(bin, n, kernel);
}

static void test_nvrtc_kernels_parallel(void) {
    if (!g_have_nvrtc) {
        printf("  skip: no NVRTC on this machine\n");
        return;
    }
    CompileJob jobs[N_KERNELS];
    pthread_t th[N_KERNELS];
    memset(jobs, 0, sizeof jobs);
    double t0 = now_s();
    for (int k = 0; k < N_KERNELS; k++) {
        jobs[k].kernel = k;
        CHECK(pthread_create(&th[k], NULL, compile_thread, &jobs[k]) == 0);
    }
    for (int k = 0; k < N_KERNELS; k++)
        pthread_join(th[k], NULL);
    printf("  %d kernels x %d archs compiled in %.2f s (4 threads)\n", N_KERNELS, N_ARCHS,
           now_s() - t0);
    for (int k = 0; k < N_KERNELS; k++) {
        for (int a = 0; a < N_ARCHS; a++) {
            if (!nvrtc_supports_cc(ARCH_CC[a])) {
                printf("  skip: this NVRTC cannot compile for %s\n", ARCHS[a]);
                continue;
            }
            CHECK_MSG(jobs[k].err[a].code == ST_OK, "%s %s: %s", KERNELS[k].name, ARCHS[a],
                      jobs[k].err[a].msg);
            CHECK_MSG(jobs[k].cubin[a] && is_cubin_for(jobs[k].cubin[a], jobs[k].size[a],
                                                       KERNELS[k].name, ARCH_CC[a]),
                      "%s for %s is no cubin naming the kernel (%zu bytes)", KERNELS[k].name,
                      ARCHS[a], jobs[k].size[a]);
            printf("  %-14s %-7s %6zu bytes\n", KERNELS[k].name, ARCHS[a], jobs[k].size[a]);
        }
        // The architectures give different machine code.
        if (jobs[k].cubin[0] && jobs[k].cubin[1])
            CHECK(jobs[k].size[0] != jobs[k].size[1] ||
                  memcmp(jobs[k].cubin[0], jobs[k].cubin[1], jobs[k].size[0]) != 0);
        for (int a = 0; a < N_ARCHS; a++)
            free(jobs[k].cubin[a]);
    }
}

static void test_nvrtc_errors(void) {
    if (!g_have_nvrtc) {
        printf("  skip: no NVRTC on this machine\n");
        return;
    }
    int major = 0, minor = 0;
    nvrtc_version(&major, &minor);
    printf("  NVRTC %d.%d from %s\n", major, minor, nvrtc_path());
    CHECK(major >= 11 && nvrtc_supports_cc(80));

    // A syntax error on line 3: the Err names the program and carries NVRTC's log line.
    const char *bad = "ORCH_KERNEL void broken(float *y) {\n"
                      "    int i = threadIdx.x;\n"
                      "    y[i] = i +;\n"
                      "}\n";
    char *src = with_prelude(bad);
    int pre_lines = 0;
    for (const char *p = orch_cuda_prelude(); *p; p++)
        pre_lines += *p == '\n';
    char where[64];
    snprintf(where, sizeof where, "bad_kernel.cu(%d): error", pre_lines + 3);
    NvrtcOptions o = {.arch = "sm_80"};
    void *bin = (void *)1;
    size_t n = 1;
    Err e = {0};
    CHECK(nvrtc_compile(src, "bad_kernel.cu", &o, &bin, &n, &e) == ST_RUNTIME);
    CHECK(bin == NULL && n == 0);
    CHECK_MSG(strstr(e.msg, "NVRTC compile of bad_kernel.cu for sm_80 failed: "
                            "NVRTC_ERROR_COMPILATION") != NULL,
              "got '%s'", e.msg);
    CHECK_MSG(strstr(e.msg, where) != NULL, "no '%s' in '%s'", where, e.msg);
    free(src);

    // An architecture NVRTC does not know.
    Err e2 = {0};
    NvrtcOptions o2 = {.arch = "sm_12"};
    src = with_prelude(K_REDUCE);
    CHECK(nvrtc_compile(src, "row_sum.cu", &o2, &bin, &n, &e2) == ST_UNSUPPORTED);
    CHECK_MSG(strstr(e2.msg, "--gpu-architecture=sm_12") != NULL, "got '%s'", e2.msg);
    free(src);
}

// ---- (c) on a GPU ---------------------------------------------------------------------------

static CudaHw g_hw;
static CudaDevice g_dev;
static bool g_gpu_ready;

static bool close_enough(float got, double ref, double atol, double rtol) {
    return fabs((double)got - ref) <= atol + rtol * fabs(ref);
}

static CUmodule load_kernel(int k, CUfunction *fn, Err *e) {
    char *src = with_prelude(KERNELS[k].body);
    NvrtcOptions o = {.arch = g_hw.arch, .lineinfo = true};
    void *bin = NULL;
    size_t n = 0;
    int rc = nvrtc_compile(src, KERNELS[k].name, &o, &bin, &n, e);
    free(src);
    if (rc)
        return NULL;
    CUmodule mod = NULL;
    if (CUDA_TRY(g_api, e, cuModuleLoadData, &mod, bin) ||
        CUDA_TRY(g_api, e, cuModuleGetFunction, fn, mod, KERNELS[k].name)) {
        if (mod)
            g_api->cuModuleUnload(mod);
        mod = NULL;
    }
    free(bin);
    return mod;
}

static CUdeviceptr upload(const float *h, size_t n, Err *e) {
    CUdeviceptr d = 0;
    if (CUDA_TRY(g_api, e, cuMemAlloc, &d, n * sizeof(float)))
        return 0;
    if (h && CUDA_TRY(g_api, e, cuMemcpyHtoD, d, h, n * sizeof(float))) {
        g_api->cuMemFree(d);
        return 0;
    }
    if (!h && CUDA_TRY(g_api, e, cuMemsetD8, d, 0xff, n * sizeof(float))) { // poison (NaN)
        g_api->cuMemFree(d);
        return 0;
    }
    return d;
}

static void test_gpu_detect(void) {
    if (!g_api) {
        // tests/gpu/run_gpu_tests.sh sets ORCH_REQUIRE_GPU where nvidia-smi lists a GPU, so a
        // driver or loader problem there fails instead of skipping.
        gpu_check_skip("no CUDA device on this machine (%s)", g_load_err.msg);
        return;
    }
    Err e = {0};
    HwInfo info;
    CHECK_MSG(cuda_hw_detect(&g_hw, &info, &e) == ST_OK, "%s", e.msg);
    if (e.code)
        return;
    printf("  %s\n  arch %s, %d SMs, warp %d, %d threads/block, regs %d/block %d/SM, smem "
           "%lld/block (%lld opt-in) %lld/SM, L2 %lld, %.1f GB, %.0f GB/s\n",
           info.fingerprint, g_hw.arch, g_hw.sm_count, g_hw.warp_size, g_hw.max_threads_per_block,
           g_hw.regs_per_block, g_hw.regs_per_sm, (long long)g_hw.smem_per_block,
           (long long)g_hw.smem_per_block_optin, (long long)g_hw.smem_per_sm,
           (long long)g_hw.l2_bytes, g_hw.global_mem_bytes / 1e9, g_hw.dram_bw / 1e9);
    CHECK(g_hw.sm_count > 0 && g_hw.warp_size == 32 && g_hw.cc_major >= 5);
    CHECK(g_hw.smem_per_block_optin >= g_hw.smem_per_block && g_hw.smem_per_block > 0);
    CHECK(strcmp(info.target, "cuda") == 0 && info.cores == g_hw.sm_count);
    CHECK(strncmp(info.fingerprint, "cuda|", 5) == 0 && strstr(info.fingerprint, g_hw.name));
    CHECK_MSG(cuda_device_open(g_api, 0, &g_dev, &e) == ST_OK, "%s", e.msg);
    g_gpu_ready = e.code == ST_OK;
}

static void test_gpu_elementwise(void) {
    if (!g_gpu_ready) {
        printf("  skip: no CUDA device on this machine\n");
        return;
    }
    const int64_t n = 1000003;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    float *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        a[i] = 3.0f * frand();
        b[i] = frand();
    }
    Err e = {0};
    CUfunction fn = NULL;
    CUmodule mod = load_kernel(0, &fn, &e);
    CUdeviceptr da = mod ? upload(a, (size_t)n, &e) : 0, db = da ? upload(b, (size_t)n, &e) : 0;
    CUdeviceptr dy = db ? upload(NULL, (size_t)n, &e) : 0;
    CUstream st = NULL;
    CUevent ev0 = NULL, ev1 = NULL;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    int64_t bad = -1;
    if (!dy || CUDA_TRY(g_api, &e, cuStreamCreate, &st, CU_STREAM_NON_BLOCKING) ||
        CUDA_TRY(g_api, &e, cuEventCreate, &ev0, CU_EVENT_DEFAULT) ||
        CUDA_TRY(g_api, &e, cuEventCreate, &ev1, CU_EVENT_DEFAULT))
        goto done;
    unsigned grid = (unsigned)g_hw.sm_count * 4, block = 256;
    void *params[] = {&da, &db, &dy, (void *)&n};
    if (CUDA_TRY(g_api, &e, cuLaunchKernel, fn, grid, 1, 1, block, 1, 1, 0, st, params, NULL) ||
        CUDA_TRY(g_api, &e, cuStreamSynchronize, st) ||
        CUDA_TRY(g_api, &e, cuMemcpyDtoH, y, dy, (size_t)n * sizeof(float)))
        goto done;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!close_enough(y[i], (double)a[i] * b[i] + exp(-fabs((double)a[i])), 1e-6, 1e-5))
            bad = i;
    CHECK_MSG(bad < 0, "y[%lld] = %g, expected %g", (long long)bad, y[bad < 0 ? 0 : bad],
              (double)a[bad < 0 ? 0 : bad] * b[bad < 0 ? 0 : bad] +
                  exp(-fabs((double)a[bad < 0 ? 0 : bad])));

    // Timed with events: the mean of 50 back-to-back launches after the checked one.
    const int reps = 50;
    if (CUDA_TRY(g_api, &e, cuEventRecord, ev0, st))
        goto done;
    for (int r = 0; r < reps; r++)
        if (CUDA_TRY(g_api, &e, cuLaunchKernel, fn, grid, 1, 1, block, 1, 1, 0, st, params, NULL))
            goto done;
    float ms = 0;
    if (CUDA_TRY(g_api, &e, cuEventRecord, ev1, st) ||
        CUDA_TRY(g_api, &e, cuEventSynchronize, ev1) ||
        CUDA_TRY(g_api, &e, cuEventElapsedTime, &ms, ev0, ev1))
        goto done;
    double us = 1e3 * ms / reps;
    printf("  %lld floats: %.2f us per launch, %.0f GB/s (%.0f%% of %.0f GB/s)\n", (long long)n, us,
           12.0 * (double)n / (us * 1e-6) / 1e9,
           100.0 * 12.0 * (double)n / (us * 1e-6) / g_hw.dram_bw, g_hw.dram_bw / 1e9);
    CHECK(ms > 0);

    // Captured into a CUDA graph and replayed: same result into a poisoned output.
    if (CUDA_TRY(g_api, &e, cuMemsetD8Async, dy, 0xff, (size_t)n * sizeof(float), st) ||
        CUDA_TRY(g_api, &e, cuStreamSynchronize, st) ||
        CUDA_TRY(g_api, &e, cuStreamBeginCapture, st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) ||
        CUDA_TRY(g_api, &e, cuLaunchKernel, fn, grid, 1, 1, block, 1, 1, 0, st, params, NULL) ||
        CUDA_TRY(g_api, &e, cuStreamEndCapture, st, &graph) ||
        CUDA_TRY(g_api, &e, cuGraphInstantiate, &exec, graph, 0) ||
        CUDA_TRY(g_api, &e, cuGraphLaunch, exec, st) ||
        CUDA_TRY(g_api, &e, cuMemcpyDtoHAsync, y, dy, (size_t)n * sizeof(float), st) ||
        CUDA_TRY(g_api, &e, cuStreamSynchronize, st))
        goto done;
    bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!close_enough(y[i], (double)a[i] * b[i] + exp(-fabs((double)a[i])), 1e-6, 1e-5))
            bad = i;
    CHECK_MSG(bad < 0, "graph replay: y[%lld] = %g", (long long)bad, y[bad < 0 ? 0 : bad]);
done:
    CHECK_MSG(e.code == ST_OK, "%s", e.msg);
    if (exec)
        g_api->cuGraphExecDestroy(exec);
    if (graph)
        g_api->cuGraphDestroy(graph);
    if (ev0)
        g_api->cuEventDestroy(ev0);
    if (ev1)
        g_api->cuEventDestroy(ev1);
    if (st)
        g_api->cuStreamDestroy(st);
    if (da)
        g_api->cuMemFree(da);
    if (db)
        g_api->cuMemFree(db);
    if (dy)
        g_api->cuMemFree(dy);
    if (mod)
        g_api->cuModuleUnload(mod);
    free(a);
    free(b);
    free(y);
}

static void test_gpu_row_sum(void) {
    if (!g_gpu_ready) {
        printf("  skip: no CUDA device on this machine\n");
        return;
    }
    int R = 37, C = 1000;
    float *x = malloc((size_t)R * C * sizeof *x), *y = malloc((size_t)R * sizeof *y);
    for (int i = 0; i < R * C; i++)
        x[i] = frand();
    Err e = {0};
    CUfunction fn = NULL;
    CUmodule mod = load_kernel(1, &fn, &e);
    CUdeviceptr dx = mod ? upload(x, (size_t)R * C, &e) : 0;
    CUdeviceptr dy = dx ? upload(NULL, (size_t)R, &e) : 0;
    void *params[] = {&dx, &dy, &C};
    if (dy &&
        !CUDA_TRY(g_api, &e, cuLaunchKernel, fn, (unsigned)R, 1, 1, 256, 1, 1, 0, NULL, params,
                  NULL) &&
        !CUDA_TRY(g_api, &e, cuCtxSynchronize) &&
        !CUDA_TRY(g_api, &e, cuMemcpyDtoH, y, dy, (size_t)R * sizeof(float))) {
        for (int r = 0; r < R; r++) {
            double ref = 0, mag = 0;
            for (int c = 0; c < C; c++) {
                ref += x[r * C + c];
                mag += fabs(x[r * C + c]);
            }
            CHECK_MSG(fabs(y[r] - ref) <= 1e-6 * mag + 1e-6, "row %d: %g vs %g", r, y[r], ref);
        }
    }
    CHECK_MSG(e.code == ST_OK, "%s", e.msg);
    if (dx)
        g_api->cuMemFree(dx);
    if (dy)
        g_api->cuMemFree(dy);
    if (mod)
        g_api->cuModuleUnload(mod);
    free(x);
    free(y);
}

// cvt.rna.tf32.f32 on the CPU: round to nearest, ties away from zero, keep 10 mantissa bits.
static double tf32(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    u = (u + 0x1000u) & 0xffffe000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

// k 2: fp32 SIMT on odd sizes; k 3: tf32 mma on multiples of its tile.
static void run_gemm(int k, int M, int N, int K) {
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C = malloc((size_t)M * N * sizeof *C);
    for (int i = 0; i < M * K; i++)
        A[i] = frand();
    for (int i = 0; i < K * N; i++)
        B[i] = frand();
    Err e = {0};
    CUfunction fn = NULL;
    CUmodule mod = load_kernel(k, &fn, &e);
    CUdeviceptr dA = mod ? upload(A, (size_t)M * K, &e) : 0;
    CUdeviceptr dB = dA ? upload(B, (size_t)K * N, &e) : 0;
    CUdeviceptr dC = dB ? upload(NULL, (size_t)M * N, &e) : 0;
    void *params[] = {&dA, &dB, &dC, &M, &N, &K};
    unsigned gx = k == 2 ? (unsigned)(N + 63) / 64 : (unsigned)N / 8;
    unsigned gy = k == 2 ? (unsigned)(M + 63) / 64 : (unsigned)M / 16;
    unsigned block = k == 2 ? 256 : 32;
    int bad = 0;
    if (dC &&
        !CUDA_TRY(g_api, &e, cuLaunchKernel, fn, gx, gy, 1, block, 1, 1, 0, NULL, params, NULL) &&
        !CUDA_TRY(g_api, &e, cuCtxSynchronize) &&
        !CUDA_TRY(g_api, &e, cuMemcpyDtoH, C, dC, (size_t)M * N * sizeof(float))) {
        for (int m = 0; m < M && !bad; m++)
            for (int n = 0; n < N && !bad; n++) {
                double ref = 0, mag = 0;
                for (int q = 0; q < K; q++) {
                    double p = k == 2 ? (double)A[m * K + q] * B[q * N + n]
                                      : tf32(A[m * K + q]) * tf32(B[q * N + n]);
                    ref += p;
                    mag += fabs(p);
                }
                double tol = (k == 2 ? 1e-6 : 1e-4) * mag + 1e-6;
                if (!(fabs(C[m * N + n] - ref) <= tol)) {
                    CHECK_MSG(0, "%s %dx%dx%d: C[%d,%d] = %g, expected %g", KERNELS[k].name, M, N,
                              K, m, n, C[m * N + n], ref);
                    bad = 1;
                }
            }
    }
    CHECK_MSG(e.code == ST_OK, "%s", e.msg);
    if (dA)
        g_api->cuMemFree(dA);
    if (dB)
        g_api->cuMemFree(dB);
    if (dC)
        g_api->cuMemFree(dC);
    if (mod)
        g_api->cuModuleUnload(mod);
    free(A);
    free(B);
    free(C);
}

static void test_gpu_sgemm(void) {
    if (!g_gpu_ready) {
        printf("  skip: no CUDA device on this machine\n");
        return;
    }
    run_gemm(2, 131, 77, 259);
    run_gemm(2, 64, 64, 16);
}

static void test_gpu_mma_tf32(void) {
    if (!g_gpu_ready) {
        printf("  skip: no CUDA device on this machine\n");
        return;
    }
    if (g_hw.cc_major < 8) {
        printf("  skip: mma.sync tf32 needs compute capability 8.0 (this GPU: %d.%d)\n",
               g_hw.cc_major, g_hw.cc_minor);
        return;
    }
    run_gemm(3, 48, 40, 136);
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    g_driver_present = h != NULL;
    if (h)
        dlclose(h);
    g_api = cuda_api_load(&g_load_err);
    printf("driver: %s\n", g_api ? "present, with a device" : g_load_err.msg);
    Err en = {0};
    g_have_nvrtc = nvrtc_load(&en) == ST_OK;
    if (!g_have_nvrtc)
        printf("nvrtc: %s\n", en.msg);

    RUN(test_no_driver_message);
    RUN(test_stub_driver_no_device);
    RUN(test_check_message);
    RUN(test_arch_and_fingerprint);
    RUN(test_nvrtc_kernels_parallel);
    RUN(test_nvrtc_errors);
    RUN(test_gpu_detect);
    RUN(test_gpu_elementwise);
    RUN(test_gpu_row_sum);
    RUN(test_gpu_sgemm);
    RUN(test_gpu_mma_tf32);
    if (g_gpu_ready)
        cuda_device_close(&g_dev);
    return CHECK_DONE();
}
