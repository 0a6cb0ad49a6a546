// The driver API through dlopen (cuda_api.h): a symbol table binds each CudaApi member to the
// versioned entry point cuda.h maps its name to; one process-wide table is loaded under
// pthread_once and its outcome (table or message) kept for every later caller. Also the primary
// context helpers and the device properties (CudaHw, HwInfo) of device 0 or any other.
#define _GNU_SOURCE
#include "cuda_api.h"
#include "cublaslt.h"
#include "cudnn.h"
#include "nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

// Member, exported symbol (cuda.h 13.0's #define target, legacy default stream), and a symbol
// with the same signature for drivers older than the first one (NULL: none).
#define SYM(member, sym, fallback)                                                                 \
    { sym, fallback, offsetof(CudaApi, member) }
static const struct {
    const char *sym, *fallback;
    size_t offset;
} SYMBOLS[] = {
    SYM(cuGetErrorName, "cuGetErrorName", NULL),
    SYM(cuGetErrorString, "cuGetErrorString", NULL),
    SYM(cuInit, "cuInit", NULL),
    SYM(cuDriverGetVersion, "cuDriverGetVersion", NULL),
    SYM(cuDeviceGet, "cuDeviceGet", NULL),
    SYM(cuDeviceGetCount, "cuDeviceGetCount", NULL),
    SYM(cuDeviceGetName, "cuDeviceGetName", NULL),
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL),
    SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", NULL),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent", NULL),
    SYM(cuCtxGetCurrent, "cuCtxGetCurrent", NULL),
    SYM(cuCtxGetDevice, "cuCtxGetDevice", NULL),
    SYM(cuCtxSynchronize, "cuCtxSynchronize", NULL),
    SYM(cuModuleLoadData, "cuModuleLoadData", NULL),
    SYM(cuModuleGetFunction, "cuModuleGetFunction", NULL),
    SYM(cuModuleUnload, "cuModuleUnload", NULL),
    SYM(cuFuncGetAttribute, "cuFuncGetAttribute", NULL),
    SYM(cuFuncSetAttribute, "cuFuncSetAttribute", NULL),
    SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        NULL),
    SYM(cuMemGetInfo, "cuMemGetInfo_v2", NULL),
    SYM(cuMemAlloc, "cuMemAlloc_v2", NULL),
    SYM(cuMemFree, "cuMemFree_v2", NULL),
    SYM(cuMemAllocHost, "cuMemAllocHost_v2", NULL),
    SYM(cuMemFreeHost, "cuMemFreeHost", NULL),
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL),
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL),
    SYM(cuMemcpyDtoD, "cuMemcpyDtoD_v2", NULL),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL),
    SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL),
    SYM(cuMemsetD8, "cuMemsetD8_v2", NULL),
    SYM(cuMemsetD8Async, "cuMemsetD8Async", NULL),
    SYM(cuLaunchKernel, "cuLaunchKernel", NULL),
    SYM(cuStreamCreate, "cuStreamCreate", NULL),
    SYM(cuStreamDestroy, "cuStreamDestroy_v2", NULL),
    SYM(cuStreamSynchronize, "cuStreamSynchronize", NULL),
    SYM(cuEventCreate, "cuEventCreate", NULL),
    SYM(cuEventRecord, "cuEventRecord", NULL),
    SYM(cuEventSynchronize, "cuEventSynchronize", NULL),
    SYM(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    SYM(cuEventDestroy, "cuEventDestroy_v2", NULL),
    SYM(cuStreamWaitEvent, "cuStreamWaitEvent", NULL),
    SYM(cuPointerGetAttribute, "cuPointerGetAttribute", NULL),
    SYM(cuStreamBeginCapture, "cuStreamBeginCapture_v2", NULL),
    SYM(cuStreamEndCapture, "cuStreamEndCapture", NULL),
    SYM(cuGraphInstantiate, "cuGraphInstantiateWithFlags", NULL),
    SYM(cuGraphLaunch, "cuGraphLaunch", NULL),
    SYM(cuGraphExecDestroy, "cuGraphExecDestroy", NULL),
    SYM(cuGraphDestroy, "cuGraphDestroy", NULL),
};

// Names for the results cuda_api.h declares, used when the driver cannot name one itself: the
// toolkit's stub libcuda (found by a loader path meant for linking) fails even cuGetErrorName.
static const char *known_name(CUresult r) {
    switch (r) {
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
        return "CUDA_ERROR_STUB_LIBRARY: the loaded libcuda is the CUDA toolkit's link stub, not "
               "an NVIDIA driver";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: return NULL;
    }
}

// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"; known_name, then the number, when
// the driver cannot name it.
static void describe(const CudaApi *api, CUresult r, char *buf, size_t n) {
    const char *name = NULL, *text = NULL;
    if (api && api->cuGetErrorName && api->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (api && api->cuGetErrorString && api->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (!name) {
        name = known_name(r);
        text = NULL;
    }
    if (name && text)
        snprintf(buf, n, "%s: %s", name, text);
    else if (name)
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "CUresult %d", (int)r);
}

int cuda_check(const CudaApi *api, CUresult r, const char *call, Err *e) {
    if (r == CUDA_SUCCESS)
        return ST_OK;
    char what[512];
    describe(api, r, what, sizeof what);
    return err_set(e, ST_RUNTIME, "CUDA %s failed: %s", call, what);
}

void cuda_api_close(CudaApi *api) {
    if (api->lib)
        dlclose(api->lib);
    memset(api, 0, sizeof *api);
}

int cuda_api_open(CudaApi *api, const char *path, Err *e) {
    memset(api, 0, sizeof *api);
    api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
        if (strcmp(path, "libcuda.so.1") == 0)
            return err_set(e, ST_UNSUPPORTED, "%s", CUDA_NO_DRIVER_MSG);
        return err_set(e, ST_UNSUPPORTED,
                       "no CUDA driver found (%s): this machine has no NVIDIA GPU or driver; use "
                       "-t cpu",
                       path);
    }
    for (size_t i = 0; i < ORCH_COUNT(SYMBOLS); i++) {
        void *p = dlsym(api->lib, SYMBOLS[i].sym);
        if (!p && SYMBOLS[i].fallback)
            p = dlsym(api->lib, SYMBOLS[i].fallback);
        if (!p) {
            int rc = err_set(e, ST_UNSUPPORTED,
                             "the CUDA driver %s lacks %s: it is too old for orch; install an "
                             "NVIDIA driver for CUDA 12 or newer",
                             path, SYMBOLS[i].sym);
            cuda_api_close(api);
            return rc;
        }
        // Copying the bytes of dlsym's object pointer into the function pointer member is the
        // POSIX way that needs no object-to-function pointer cast.
        memcpy((char *)api + SYMBOLS[i].offset, &p, sizeof p);
    }
    char what[512];
    CUresult r = api->cuInit(0);
    if (r != CUDA_SUCCESS) {
        describe(api, r, what, sizeof what);
        int rc = err_set(e, ST_UNSUPPORTED, "%s (cuInit: %s)", CUDA_NO_DEVICE_MSG, what);
        cuda_api_close(api);
        return rc;
    }
    r = api->cuDriverGetVersion(&api->driver_version);
    if (r == CUDA_SUCCESS)
        r = api->cuDeviceGetCount(&api->device_count);
    if (r != CUDA_SUCCESS || api->device_count <= 0) {
        if (r != CUDA_SUCCESS)
            describe(api, r, what, sizeof what);
        else
            snprintf(what, sizeof what, "the driver reports 0 devices");
        int rc = err_set(e, ST_UNSUPPORTED, "%s (%s)", CUDA_NO_DEVICE_MSG, what);
        cuda_api_close(api);
        return rc;
    }
    return ST_OK;
}

static CudaApi g_api;
static Err g_api_err;
static pthread_once_t g_api_once = PTHREAD_ONCE_INIT;

static void load_once(void) {
    cuda_api_open(&g_api, "libcuda.so.1", &g_api_err);
}

const CudaApi *cuda_api_load(Err *e) {
    pthread_once(&g_api_once, load_once);
    if (g_api_err.code != ST_OK) {
        err_set(e, g_api_err.code, "%s", g_api_err.msg);
        return NULL;
    }
    return &g_api;
}

int cuda_device_open(const CudaApi *api, int ordinal, CudaDevice *d, Err *e) {
    memset(d, 0, sizeof *d);
    if (ordinal < 0 || ordinal >= api->device_count)
        return err_set(e, ST_USAGE, "CUDA device %d does not exist (this machine has %d)", ordinal,
                       api->device_count);
    CUdevice dev;
    if (CUDA_TRY(api, e, cuDeviceGet, &dev, ordinal))
        return e->code;
    CUcontext ctx = NULL;
    if (CUDA_TRY(api, e, cuDevicePrimaryCtxRetain, &ctx, dev))
        return e->code;
    if (CUDA_TRY(api, e, cuCtxSetCurrent, ctx)) {
        api->cuDevicePrimaryCtxRelease(dev);
        return e->code;
    }
    d->api = api;
    d->dev = dev;
    d->ordinal = ordinal;
    d->ctx = ctx;
    return ST_OK;
}

int cuda_device_bind(const CudaDevice *d, Err *e) {
    ORCH_ASSERT(d->api && d->ctx);
    return CUDA_TRY(d->api, e, cuCtxSetCurrent, d->ctx);
}

int cuda_current_ordinal(const CudaApi *api) {
    CUdevice cur, d;
    if (!api || api->cuCtxGetDevice(&cur) != CUDA_SUCCESS)
        return 0;
    for (int o = 0; o < api->device_count; o++)
        if (api->cuDeviceGet(&d, o) == CUDA_SUCCESS && d == cur)
            return o;
    return 0;
}

void cuda_device_close(CudaDevice *d) {
    if (d->api && d->ctx) {
        // Unbind first: the primary context may be destroyed by the release when this was the
        // last reference, and a thread must not keep a dangling current context.
        CUcontext cur = NULL;
        if (d->api->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->ctx)
            d->api->cuCtxSetCurrent(NULL);
        d->api->cuDevicePrimaryCtxRelease(d->dev);
    }
    memset(d, 0, sizeof *d);
}

void cuda_arch_name(int cc_major, int cc_minor, char *buf, size_t n) {
    snprintf(buf, n, "sm_%d%d%s", cc_major, cc_minor, cc_major >= 9 ? "a" : "");
}

// "50M" for whole MiB, else "228K" (rounded down to KiB).
static void fmt_size(char *buf, size_t n, int64_t bytes) {
    if (bytes > 0 && bytes % (1024 * 1024) == 0)
        snprintf(buf, n, "%lldM", (long long)(bytes / (1024 * 1024)));
    else
        snprintf(buf, n, "%lldK", (long long)(bytes / 1024));
}

static int attr(const CudaApi *api, CUdevice dev, CUdevice_attribute a, const char *what, int *v,
                Err *e) {
    *v = 0;
    if (cuda_check(api, api->cuDeviceGetAttribute(v, a, dev), "cuDeviceGetAttribute", e)) {
        err_prefix(e, "reading the GPU's %s: ", what);
        return e->code;
    }
    return ST_OK;
}

void cuda_hw_info(const CudaHw *hw, HwInfo *info) {
    memset(info, 0, sizeof *info);
    snprintf(info->target, sizeof info->target, "cuda");
    snprintf(info->model, sizeof info->model, "%s", hw->name);
    info->cores = hw->sm_count;
    info->simd_bytes = 16; // the widest per-thread load/store (float4, LDG.128)
    info->fma = true;
    info->l2 = hw->l2_bytes;
    info->line = 128; // L1/L2 line on every NVIDIA GPU since Fermi (four 32-byte sectors)
    snprintf(info->compiler, sizeof info->compiler, "nvrtc %d.%d", hw->nvrtc_major,
             hw->nvrtc_minor);
    char l2s[32], smems[32];
    fmt_size(l2s, sizeof l2s, hw->l2_bytes);
    fmt_size(smems, sizeof smems, hw->smem_per_sm);
    snprintf(info->fingerprint, sizeof info->fingerprint,
             "cuda|%s|sm_%d%d|SMs=%d|L2=%s|smem=%s|driver=%d|nvrtc=%d.%d", hw->name, hw->cc_major,
             hw->cc_minor, hw->sm_count, l2s, smems, hw->driver_version, hw->nvrtc_major,
             hw->nvrtc_minor);
}

// Device-to-device copies of a buffer well past the L2 (the copy engine and the SMs' loads reach
// about the same rate on recent GPUs): read + write bytes over the median of 9 timed copies.
int cuda_measure_dram_bw(const CudaHw *hw, double *bytes_per_s, Err *e) {
    const CudaApi *api = cuda_api_load(e);
    if (!api)
        return e->code;
    CudaDevice dev;
    int rc = cuda_device_open(api, hw->ordinal, &dev, e);
    if (rc)
        return rc;
    size_t free_b = 0, total_b = 0, size = (size_t)256 << 20;
    if (hw->l2_bytes > 0 && (size_t)hw->l2_bytes * 8 > size)
        size = (size_t)hw->l2_bytes * 8;
    CUdeviceptr a = 0, b = 0;
    CUstream st = NULL;
    CUevent ev[2] = {NULL, NULL};
    float ms[9];
    rc = CUDA_TRY(api, e, cuMemGetInfo, &free_b, &total_b);
    while (!rc && size > ((size_t)16 << 20) && 2 * size > free_b / 2)
        size /= 2; // leave most of the memory to whoever else uses the GPU
    rc = rc || CUDA_TRY(api, e, cuMemAlloc, &a, size) || CUDA_TRY(api, e, cuMemAlloc, &b, size) ||
         CUDA_TRY(api, e, cuMemsetD8, a, 1, size) || CUDA_TRY(api, e, cuStreamCreate, &st, 0) ||
         CUDA_TRY(api, e, cuEventCreate, &ev[0], 0) || CUDA_TRY(api, e, cuEventCreate, &ev[1], 0);
    for (int i = -2; !rc && i < 9; i++) {
        rc = CUDA_TRY(api, e, cuEventRecord, ev[0], st) ||
             CUDA_TRY(api, e, cuMemcpyDtoDAsync, b, a, size, st) ||
             CUDA_TRY(api, e, cuEventRecord, ev[1], st) ||
             CUDA_TRY(api, e, cuEventSynchronize, ev[1]);
        if (!rc && i >= 0)
            rc = CUDA_TRY(api, e, cuEventElapsedTime, &ms[i], ev[0], ev[1]);
    }
    if (!rc) {
        for (int i = 1; i < 9; i++) // insertion sort for the median
            for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
                float t = ms[j];
                ms[j] = ms[j - 1];
                ms[j - 1] = t;
            }
        if (!(ms[4] > 0))
            rc = err_set(e, ST_RUNTIME, "measuring the memory bandwidth of %s: no time", hw->name);
        else
            *bytes_per_s = 2.0 * (double)size / (ms[4] * 1e-3);
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            api->cuEventDestroy(ev[i]);
    if (st)
        api->cuStreamDestroy(st);
    if (a)
        api->cuMemFree(a);
    if (b)
        api->cuMemFree(b);
    cuda_device_close(&dev);
    return rc;
}

int cuda_hw_detect(CudaHw *hw, HwInfo *info, Err *e) {
    return cuda_hw_detect_device(0, hw, info, e);
}

int cuda_hw_detect_device(int ordinal, CudaHw *hw, HwInfo *info, Err *e) {
    memset(hw, 0, sizeof *hw);
    const CudaApi *api = cuda_api_load(e);
    if (!api)
        return e->code;
    int rc = nvrtc_load(e);
    if (rc)
        return rc;
    nvrtc_version(&hw->nvrtc_major, &hw->nvrtc_minor);
    hw->driver_version = api->driver_version;

    if (ordinal < 0 || ordinal >= api->device_count)
        return err_set(e, ST_USAGE, "CUDA device %d does not exist (this machine has %d)", ordinal,
                       api->device_count);
    hw->ordinal = ordinal;
    CUdevice dev;
    if (CUDA_TRY(api, e, cuDeviceGet, &dev, ordinal))
        return e->code;
    if (CUDA_TRY(api, e, cuDeviceGetName, hw->name, (int)sizeof hw->name, dev))
        return e->code;
    hw->name[sizeof hw->name - 1] = '\0';
    size_t total = 0;
    if (CUDA_TRY(api, e, cuDeviceTotalMem, &total, dev))
        return e->code;
    hw->global_mem_bytes = (int64_t)total;

    int smem_block = 0, smem_optin = 0, smem_sm = 0, l2 = 0;
    if (attr(api, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability",
             &hw->cc_major, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability",
             &hw->cc_minor, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count", &hw->sm_count, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size", &hw->warp_size, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "threads per block",
             &hw->max_threads_per_block, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per SM",
             &hw->max_threads_per_sm, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "registers per block",
             &hw->regs_per_block, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "registers per SM",
             &hw->regs_per_sm, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block",
             &smem_block, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
             "opt-in shared memory per block", &smem_optin, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
             "shared memory per SM", &smem_sm, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size", &l2, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate", &hw->clock_khz, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock rate",
             &hw->mem_clock_khz, e) ||
        attr(api, dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "memory bus width",
             &hw->bus_width_bits, e))
        return e->code;
    hw->smem_per_block = smem_block;
    hw->smem_per_block_optin = smem_optin > smem_block ? smem_optin : smem_block;
    hw->smem_per_sm = smem_sm;
    hw->l2_bytes = l2;
    hw->dram_bw = 2.0 * hw->mem_clock_khz * 1e3 * (hw->bus_width_bits / 8.0);
    cuda_arch_name(hw->cc_major, hw->cc_minor, hw->arch, sizeof hw->arch);

    if (hw->driver_version / 1000 < hw->nvrtc_major)
        return err_set(e, ST_UNSUPPORTED,
                       "NVRTC %d.%d (%s) is newer than the CUDA driver (%d.%d) of %s: the driver "
                       "cannot load its cubins; update the NVIDIA driver or set CUDA_HOME to a "
                       "CUDA %d toolkit",
                       hw->nvrtc_major, hw->nvrtc_minor, nvrtc_path(), hw->driver_version / 1000,
                       hw->driver_version % 1000 / 10, hw->name, hw->driver_version / 1000);
    if (!nvrtc_supports_cc(hw->cc_major * 10 + hw->cc_minor))
        return err_set(e, ST_UNSUPPORTED,
                       "NVRTC %d.%d (%s) cannot generate code for %s (compute capability %d.%d): "
                       "use a newer CUDA toolkit (CUDA_HOME)",
                       hw->nvrtc_major, hw->nvrtc_minor, nvrtc_path(), hw->name, hw->cc_major,
                       hw->cc_minor);

    if (info) {
        cuda_hw_info(hw, info);
        // cuBLASLt calls are chosen for one library version (cublaslt.h): part of the device.
        uint64_t lt = blaslt_version();
        size_t n = strlen(info->fingerprint);
        if (lt)
            snprintf(info->fingerprint + n, sizeof info->fingerprint - n, "|cublaslt=%llu",
                     (unsigned long long)lt);
        // cuDNN calls likewise (cudnn.h).
        uint64_t dnn = dnn_version();
        n = strlen(info->fingerprint);
        if (dnn)
            snprintf(info->fingerprint + n, sizeof info->fingerprint - n, "|cudnn=%llu",
                     (unsigned long long)dnn);
    }
    return ST_OK;
}
