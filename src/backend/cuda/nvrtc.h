// NVRTC, loaded at run time: compiles generated CUDA C into a cubin for one exact GPU architecture,
// in process and from several threads at once. Needs libnvrtc (the CUDA toolkit) only when called:
// nvrtc_load finds it with dlopen ($CUDA_HOME/lib64, the sonames of CUDA 13 and 12,
// /usr/local/cuda/lib64) or says plainly that it is missing. Guarantees: a returned cubin is a
// complete ELF image for cuModuleLoadData; a failed compile's Err carries the head of NVRTC's log.
// Kernels include no toolkit header: they start with orch_cuda_prelude().
#ifndef ORCH_NVRTC_H
#define ORCH_NVRTC_H

#include "../../base/common.h"

// Loads NVRTC once per process (pthread_once; any thread, any number of times). ST_OK, or
// ST_UNSUPPORTED with the same message on every call when no libnvrtc can be opened.
int nvrtc_load(Err *e);

// The loaded NVRTC's version (13, 0); its library path. nvrtc_load must have succeeded.
void nvrtc_version(int *major, int *minor);
const char *nvrtc_path(void);

// Whether NVRTC can generate code for compute capability cc (major * 10 + minor: 80, 90, 100).
// True when this NVRTC cannot list its architectures (it will then say so when compiling).
bool nvrtc_supports_cc(int cc);

typedef struct NvrtcOptions {
    const char *arch; // --gpu-architecture, a real architecture: "sm_90a", "sm_80"
    bool lineinfo;    // -lineinfo: source lines for profilers and compute-sanitizer
    // --use_fast_math: approximate division, sqrt and transcendentals, flush-to-zero. Off by
    // default: fp32 kernels must match the primitive interpreter to rounding.
    bool fast_math;
    int max_regs;             // --maxrregcount; 0 leaves it to NVRTC (and __launch_bounds__)
    const char *const *extra; // further options passed as they are (n_extra of them)
    int n_extra;
} NvrtcOptions;

// Compiles one CUDA C++ translation unit (C++17, functions __device__ unless marked otherwise)
// named `name` (it names the source in NVRTC's messages) into a cubin. *cubin is malloc'd (caller
// frees), *size its bytes. On failure ST_RUNTIME (ST_UNSUPPORTED when NVRTC rejects the
// architecture) with "NVRTC compile of NAME for ARCH failed: <NVRTC result>" and the first lines
// of the program log. Thread-safe: independent compiles may run in parallel threads.
int nvrtc_compile(const char *src, const char *name, const NvrtcOptions *opt, void **cubin,
                  size_t *size, Err *e);

// The text every generated translation unit starts with: fixed-width integer typedefs, ORCH_KERNEL
// (extern "C" __global__, so names stay unmangled for cuModuleGetFunction), infinity/NaN constants
// and warp-shuffle reductions. It includes nothing.
const char *orch_cuda_prelude(void);

#endif
