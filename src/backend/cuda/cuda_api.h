// The CUDA driver API, loaded at run time: libcuda.so.1 is dlopened into a table of function
// pointers, so one orch binary runs (and says plainly why CUDA is unavailable) on machines without
// an NVIDIA GPU, and builds where cuda.h is absent. Needs nothing at build time. Guarantees: every
// pointer in a loaded CudaApi is non-NULL; every call goes through CUDA_TRY/cuda_check, which turns
// a failing CUresult into an Err naming the call and the driver's error name and text.
// Also a device's properties (CudaHw) for the hardware model, and target.h's HwInfo, for any GPU.
//
// The types and constants below are declared here, with the numeric values of CUDA 13.0's cuda.h
// (/usr/local/cuda-13.0/include/cuda.h; the values are ABI and have not changed since they were
// introduced). Never include cuda.h in the same translation unit: the enum names would clash.
#ifndef ORCH_CUDA_API_H
#define ORCH_CUDA_API_H

#include "../target.h"

// Opaque handles, with cuda.h's struct tags (cuda.h: `typedef struct CUctx_st *CUcontext;` ...).
typedef int CUresult;                   // cuda.h: enum cudaError_enum
typedef int CUdevice;                   // cuda.h: typedef int CUdevice_v1
typedef unsigned long long CUdeviceptr; // cuda.h: CUdeviceptr_v2 on 64-bit hosts
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

// CUresult values (cuda.h, enum cudaError_enum).
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
    CUDA_ERROR_UNKNOWN = 999,
};

// CUdevice_attribute values (cuda.h, enum CUdevice_attribute_enum).
typedef int CUdevice_attribute;
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13, // kHz
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,       // kHz
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37, // bits
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,           // bytes
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

// CUfunction_attribute values (cuda.h, enum CUfunction_attribute_enum).
typedef int CUfunction_attribute;
enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    // Set it above 48 KiB (up to the optin limit) before launching with that much dynamic smem.
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

// Flags (cuda.h: CUstream_flags, CUevent_flags, CUstreamCaptureMode, CUgraphInstantiate_flags).
enum {
    CU_STREAM_DEFAULT = 0x0,
    CU_STREAM_NON_BLOCKING = 0x1,
    CU_EVENT_DEFAULT = 0x0,
    CU_EVENT_DISABLE_TIMING = 0x2,
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2,
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
    // cuda.h: CUpointer_attribute, CUmemorytype
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMORYTYPE_UNIFIED = 4,
};
typedef int CUstreamCaptureMode;

// The driver entry points orch uses. Members carry cuda.h's public names; each holds the symbol
// that cuda.h's #define maps that name to (legacy default stream, no _ptds/_ptsz variants), shown
// on the right. All are present in every driver since CUDA 11.4; cuEventElapsedTime_v2 (12.8+)
// falls back to cuEventElapsedTime, which has the same signature.
typedef struct CudaApi {
    void *lib;          // the dlopen handle
    int driver_version; // cuDriverGetVersion: 1000 * major + 10 * minor (13000 = 13.0)
    int device_count;   // > 0 once loaded

    CUresult (*cuGetErrorName)(CUresult error, const char **str);
    CUresult (*cuGetErrorString)(CUresult error, const char **str);
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev); // cuDeviceTotalMem_v2
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev); // ..._v2
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (*cuCtxGetDevice)(CUdevice *dev);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*cuModuleUnload)(CUmodule mod);
    CUresult (*cuFuncGetAttribute)(int *value, CUfunction_attribute attr, CUfunction fn);
    CUresult (*cuFuncSetAttribute)(CUfunction fn, CUfunction_attribute attr, int value);
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction fn,
                                                            int block_size, size_t dyn_smem);
    CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);        // cuMemGetInfo_v2
    CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);                   // cuMemAlloc_v2
    CUresult (*cuMemFree)(CUdeviceptr ptr);                                   // cuMemFree_v2
    CUresult (*cuMemAllocHost)(void **ptr, size_t bytes);                     // ..._v2
    CUresult (*cuMemFreeHost)(void *ptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes); // ..._v2
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);       // ..._v2
    CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes); // ..._v2
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes,
                                  CUstream stream); // ..._v2
    CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes,
                                  CUstream stream); // ..._v2
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                  CUstream stream);                         // ..._v2
    CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t n); // ..._v2
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream);
    CUresult (*cuLaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                               unsigned block_x, unsigned block_y, unsigned block_z,
                               unsigned shared_bytes, CUstream stream, void **params, void **extra);
    CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
    CUresult (*cuStreamDestroy)(CUstream stream); // cuStreamDestroy_v2
    CUresult (*cuStreamSynchronize)(CUstream stream);
    CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
    CUresult (*cuEventRecord)(CUevent event, CUstream stream);
    CUresult (*cuEventSynchronize)(CUevent event);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end); // ..._v2 when present
    CUresult (*cuEventDestroy)(CUevent event);                             // cuEventDestroy_v2
    CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
    CUresult (*cuPointerGetAttribute)(void *data, int attribute, CUdeviceptr ptr);
    CUresult (*cuStreamBeginCapture)(CUstream stream, CUstreamCaptureMode mode); // ..._v2
    CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph *graph);
    CUresult (*cuGraphInstantiate)(CUgraphExec *exec, CUgraph graph,
                                   unsigned long long flags); // cuGraphInstantiateWithFlags
    CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
    CUresult (*cuGraphDestroy)(CUgraph graph);
} CudaApi;

// The message cuda_api_load gives when libcuda.so.1 cannot be opened (tests compare it).
#define CUDA_NO_DRIVER_MSG                                                                         \
    "no CUDA driver found (libcuda.so.1): this machine has no NVIDIA GPU or driver; use -t cpu"
// The start of the message when the driver loads but cuInit fails or counts no device; the
// driver's reason follows in parentheses.
#define CUDA_NO_DEVICE_MSG "no CUDA device found"

// The process's driver API: loaded, initialised (cuInit) and checked to have a device on the
// first call, from any thread (pthread_once); later calls return the same table or the same
// error. NULL with ST_UNSUPPORTED in e when there is no driver (CUDA_NO_DRIVER_MSG) or no device
// (CUDA_NO_DEVICE_MSG...); ST_RUNTIME when the driver lacks an entry point. Never unloaded.
const CudaApi *cuda_api_load(Err *e);

// Opens the driver at `path` (a soname or file) into *api, uncached: cuda_api_load's worker, and
// how tests reach the no-device path with the toolkit's stub libcuda. Same errors as
// cuda_api_load; on failure *api is closed again. cuda_api_close accepts a zeroed/closed table.
int cuda_api_open(CudaApi *api, const char *path, Err *e);
void cuda_api_close(CudaApi *api);

// Turns a driver result into ST_OK, or ST_RUNTIME with "CUDA <call> failed: <NAME>: <text>".
// CUDA_TRY names the member it calls: `if (CUDA_TRY(cu, e, cuMemAlloc, &p, n)) return e->code;`
int cuda_check(const CudaApi *api, CUresult r, const char *call, Err *e);
#define CUDA_TRY(api, e, fn, ...) cuda_check((api), (api)->fn(__VA_ARGS__), #fn, (e))

// A device made current on the calling thread through its primary context (shared with the CUDA
// runtime and cuBLAS/cuDNN in the same process). Each further thread that uses the device calls
// cuda_device_bind before its first driver call.
typedef struct CudaDevice {
    const CudaApi *api;
    CUdevice dev;
    int ordinal;
    CUcontext ctx;
} CudaDevice;

int cuda_device_open(const CudaApi *api, int ordinal, CudaDevice *d, Err *e);
int cuda_device_bind(const CudaDevice *d, Err *e);
void cuda_device_close(CudaDevice *d); // releases the primary context; accepts a zeroed struct
// The ordinal of the GPU whose context is current on the calling thread; 0 where none is (or the
// driver cannot tell): the GPU a library handle serves when its caller bound none.
int cuda_current_ordinal(const CudaApi *api);

// The device properties the hardware model needs (the configs' hardware model). Sizes in
// bytes; 0 where the driver does not report the value.
typedef struct CudaHw {
    int ordinal;
    char name[128];
    int cc_major, cc_minor;
    char arch[16]; // NVRTC --gpu-architecture for exactly this device: "sm_90a", "sm_80"
    int sm_count;
    int warp_size;
    int max_threads_per_block, max_threads_per_sm;
    int regs_per_block, regs_per_sm; // 32-bit registers
    int64_t smem_per_block;          // without opting in
    int64_t smem_per_block_optin;    // after cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
    int64_t smem_per_sm;
    int64_t l2_bytes;
    int64_t global_mem_bytes;
    int clock_khz, mem_clock_khz, bus_width_bits;
    double dram_bw; // bytes/s: measured (the target's calibrate slot) or else theoretical, 2
                    // (double data rate) * memory clock * bus width
    int driver_version;           // 13000 = 13.0
    int nvrtc_major, nvrtc_minor; // the NVRTC that will compile the kernels
} CudaHw;

// NVRTC --gpu-architecture for compute capability major.minor: the arch-specific "a" variant from
// Hopper on (sm_90a: wgmma, setmaxnreg; the cubin then runs on exactly that CC), else sm_XY.
void cuda_arch_name(int cc_major, int cc_minor, char *buf, size_t n);

// Reads device 0 into *hw and fills target.h's HwInfo (target "cuda", model = GPU name, cores =
// SM count, l2, line = 128, compiler = "nvrtc X.Y", fingerprint
// "cuda|NAME|sm_90|SMs=132|L2=50M|smem=228K|driver=13000|nvrtc=13.0", then "|cublaslt=V" where
// cuBLASLt loads and "|cudnn=V" where cuDNN does: their calls are chosen for one version). Needs
// the driver and NVRTC (ST_UNSUPPORTED with their messages otherwise); ST_UNSUPPORTED too when
// NVRTC is newer than the driver (its cubins would not load) or cannot compile for the device's
// architecture. info may be NULL.
int cuda_hw_detect(CudaHw *hw, HwInfo *info, Err *e);
// The same for the device of that ordinal (hw->ordinal set); ST_USAGE when there is none.
int cuda_hw_detect_device(int ordinal, CudaHw *hw, HwInfo *info, Err *e);

// The device's memory bandwidth measured (bytes/s): timed device-to-device copies of a buffer 8x
// the L2 (at least 256 MiB, less when memory is short). About a second; the compile driver
// measures once per device and keeps the value in the profile database.
int cuda_measure_dram_bw(const CudaHw *hw, double *bytes_per_s, Err *e);

// The HwInfo (and its fingerprint) cuda_hw_detect derives from a filled CudaHw.
void cuda_hw_info(const CudaHw *hw, HwInfo *info);

#endif
