// NVRTC through dlopen (nvrtc.h): one process-wide table of entry points loaded under
// pthread_once, then compiles that share nothing but that read-only table, so they may run in
// parallel threads (NVRTC's API is thread-safe for distinct programs). nvrtc.h's types and result
// codes are declared here with the values of CUDA 13.0's /usr/local/cuda-13.0/include/nvrtc.h.
#define _GNU_SOURCE
#include "nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int nvrtcResult; // nvrtc.h: enum nvrtcResult
typedef struct _nvrtcProgram *nvrtcProgram;
enum {
    NVRTC_SUCCESS = 0,
    NVRTC_ERROR_INVALID_OPTION = 5,
    NVRTC_ERROR_COMPILATION = 6,
};

static struct {
    void *lib;
    char path[512];
    int major, minor;
    int status; // ST_OK once loaded
    char msg[1024];
    int *archs; // nvrtcGetSupportedArchs, NULL when this NVRTC cannot list them
    int n_archs;

    const char *(*GetErrorString)(nvrtcResult r);
    nvrtcResult (*Version)(int *major, int *minor);
    nvrtcResult (*GetNumSupportedArchs)(int *n);
    nvrtcResult (*GetSupportedArchs)(int *archs);
    nvrtcResult (*CreateProgram)(nvrtcProgram *prog, const char *src, const char *name,
                                 int n_headers, const char *const *headers,
                                 const char *const *include_names);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *prog);
    nvrtcResult (*CompileProgram)(nvrtcProgram prog, int n_options, const char *const *options);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*GetCUBIN)(nvrtcProgram prog, char *cubin);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*GetProgramLog)(nvrtcProgram prog, char *log);
} g_nv;

static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;

// dlsym returns an object pointer; copying its bytes into the function pointer is the POSIX way
// that needs no cast between object and function pointer types.
static bool bind_sym(void *lib, const char *name, void *slot, size_t slot_size) {
    void *p = dlsym(lib, name);
    if (!p)
        return false;
    memcpy(slot, &p, slot_size);
    return true;
}
#define BIND(fn) bind_sym(g_nv.lib, "nvrtc" #fn, &g_nv.fn, sizeof g_nv.fn)

static void *open_candidates(char *path, size_t n) {
    // An explicit toolkit ($CUDA_HOME) wins; then whatever the loader finds (the newest
    // development link first, then the runtime sonames of CUDA 13 and 12); then the usual prefix.
    char home[512] = "";
    const char *env = getenv("CUDA_HOME");
    if (env && *env)
        snprintf(home, sizeof home, "%s/lib64/libnvrtc.so", env);
    const char *names[] = {home, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                           "/usr/local/cuda/lib64/libnvrtc.so"};
    for (size_t i = 0; i < ORCH_COUNT(names); i++) {
        if (!names[i][0])
            continue;
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(path, n, "%s", names[i]);
            return lib;
        }
    }
    return NULL;
}

static void load_once(void) {
    g_nv.lib = open_candidates(g_nv.path, sizeof g_nv.path);
    if (!g_nv.lib) {
        g_nv.status = ST_UNSUPPORTED;
        snprintf(g_nv.msg, sizeof g_nv.msg,
                 "no NVRTC found (libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12, "
                 "$CUDA_HOME/lib64, /usr/local/cuda/lib64): the CUDA target compiles kernels with "
                 "the CUDA toolkit's NVRTC; install the toolkit or set CUDA_HOME");
        return;
    }
    const char *missing = NULL;
    if (!BIND(GetErrorString))
        missing = "nvrtcGetErrorString";
    else if (!BIND(Version))
        missing = "nvrtcVersion";
    else if (!BIND(CreateProgram))
        missing = "nvrtcCreateProgram";
    else if (!BIND(DestroyProgram))
        missing = "nvrtcDestroyProgram";
    else if (!BIND(CompileProgram))
        missing = "nvrtcCompileProgram";
    else if (!BIND(GetCUBINSize))
        missing = "nvrtcGetCUBINSize";
    else if (!BIND(GetCUBIN))
        missing = "nvrtcGetCUBIN";
    else if (!BIND(GetProgramLogSize))
        missing = "nvrtcGetProgramLogSize";
    else if (!BIND(GetProgramLog))
        missing = "nvrtcGetProgramLog";
    if (missing || g_nv.Version(&g_nv.major, &g_nv.minor) != NVRTC_SUCCESS) {
        g_nv.status = ST_UNSUPPORTED;
        snprintf(g_nv.msg, sizeof g_nv.msg,
                 "NVRTC in %s is unusable (%s): orch needs NVRTC from CUDA 11.1 or newer, which "
                 "produces cubins",
                 g_nv.path, missing ? missing : "nvrtcVersion failed");
        dlclose(g_nv.lib);
        g_nv.lib = NULL;
        return;
    }
    // Optional (CUDA 11.2+): lets hw detection say early that a device is too new for this NVRTC.
    int n = 0;
    if (BIND(GetNumSupportedArchs) && BIND(GetSupportedArchs) &&
        g_nv.GetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
        g_nv.archs = xcalloc((size_t)n, sizeof *g_nv.archs);
        if (g_nv.GetSupportedArchs(g_nv.archs) == NVRTC_SUCCESS) {
            g_nv.n_archs = n;
        } else {
            free(g_nv.archs);
            g_nv.archs = NULL;
        }
    }
    g_nv.status = ST_OK;
}

int nvrtc_load(Err *e) {
    pthread_once(&g_nv_once, load_once);
    if (g_nv.status != ST_OK)
        return err_set(e, g_nv.status, "%s", g_nv.msg);
    return ST_OK;
}

void nvrtc_version(int *major, int *minor) {
    ORCH_ASSERT(g_nv.status == ST_OK && g_nv.lib);
    *major = g_nv.major;
    *minor = g_nv.minor;
}

const char *nvrtc_path(void) {
    ORCH_ASSERT(g_nv.status == ST_OK && g_nv.lib);
    return g_nv.path;
}

bool nvrtc_supports_cc(int cc) {
    ORCH_ASSERT(g_nv.status == ST_OK && g_nv.lib);
    if (!g_nv.archs)
        return true;
    for (int i = 0; i < g_nv.n_archs; i++)
        if (g_nv.archs[i] == cc)
            return true;
    return false;
}

// Appends up to max_lines lines of the program log to msg (the Err has room for about 2 KB).
static void append_log(nvrtcProgram prog, char *msg, size_t n, int max_lines) {
    size_t log_size = 0;
    if (g_nv.GetProgramLogSize(prog, &log_size) != NVRTC_SUCCESS || log_size <= 1)
        return;
    char *log = malloc(log_size);
    if (!log || g_nv.GetProgramLog(prog, log) != NVRTC_SUCCESS) {
        free(log);
        return;
    }
    log[log_size - 1] = '\0';
    size_t used = strlen(msg);
    const char *p = log;
    for (int line = 0; line < max_lines && *p && used + 1 < n; line++) {
        size_t len = strcspn(p, "\n");
        int w = snprintf(msg + used, n - used, "\n  %.*s", (int)len, p);
        if (w < 0)
            break;
        used += (size_t)w < n - used ? (size_t)w : n - used - 1;
        p += len;
        if (*p == '\n')
            p++;
    }
    if (*p && used + 8 < n)
        snprintf(msg + used, n - used, "\n  ...");
    free(log);
}

// ORCH_KEEP_SOURCES=DIR writes every program handed to NVRTC to DIR/NAME.ARCH.cu (DIR created if
// missing), to read or profile a generated kernel by hand (ncu -lineinfo, or nvcc on the file);
// the C target keeps its sources in DIR under the same variable (cbuild.c says why it is one
// variable and not a compile option). A file that cannot be written is skipped silently: the dump
// is a debugging aid, never a reason to fail.
static void dump_source(const char *src, const char *name, const char *arch) {
    const char *dir = getenv("ORCH_KEEP_SOURCES");
    if (!dir || !dir[0])
        return;
    mkdir(dir, 0777); // an existing one is fine
    char path[1024];
    int n = snprintf(path, sizeof path, "%s/%s.%s.cu", dir, name ? name : "program", arch);
    if (n <= 0 || (size_t)n >= sizeof path)
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fputs(src, f);
    fclose(f);
}

int nvrtc_compile(const char *src, const char *name, const NvrtcOptions *opt, void **cubin,
                  size_t *size, Err *e) {
    *cubin = NULL;
    *size = 0;
    int rc = nvrtc_load(e);
    if (rc)
        return rc;
    ORCH_ASSERT(opt && opt->arch && opt->n_extra >= 0);
    dump_source(src, name, opt->arch);

    char arch_opt[64], regs_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", opt->arch);
    const char **opts = xcalloc((size_t)opt->n_extra + 8, sizeof *opts);
    int n_opts = 0;
    opts[n_opts++] = arch_opt;
    opts[n_opts++] = "-default-device";
    opts[n_opts++] = "--std=c++17";
    if (opt->lineinfo)
        opts[n_opts++] = "-lineinfo";
    if (opt->fast_math)
        opts[n_opts++] = "--use_fast_math";
    if (opt->max_regs > 0) {
        snprintf(regs_opt, sizeof regs_opt, "--maxrregcount=%d", opt->max_regs);
        opts[n_opts++] = regs_opt;
    }
    for (int i = 0; i < opt->n_extra; i++)
        opts[n_opts++] = opt->extra[i];

    nvrtcProgram prog = NULL;
    nvrtcResult r = g_nv.CreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        free(opts);
        return err_set(e, ST_RUNTIME, "NVRTC cannot create the program %s: %s", name,
                       g_nv.GetErrorString(r));
    }
    r = g_nv.CompileProgram(prog, n_opts, opts);
    if (r != NVRTC_SUCCESS) {
        char msg[1800];
        snprintf(msg, sizeof msg, "NVRTC compile of %s for %s failed: %s", name, opt->arch,
                 g_nv.GetErrorString(r));
        if (r == NVRTC_ERROR_INVALID_OPTION) {
            size_t used = strlen(msg);
            for (int i = 0; i < n_opts && used + 2 < sizeof msg; i++) {
                snprintf(msg + used, sizeof msg - used, "%s%s", i ? " " : " (options: ", opts[i]);
                used = strlen(msg);
            }
            if (used + 2 < sizeof msg)
                snprintf(msg + used, sizeof msg - used, ")");
        }
        append_log(prog, msg, sizeof msg, 12);
        g_nv.DestroyProgram(&prog);
        free(opts);
        return err_set(e, r == NVRTC_ERROR_INVALID_OPTION ? ST_UNSUPPORTED : ST_RUNTIME, "%s", msg);
    }
    free(opts);
    size_t n = 0;
    r = g_nv.GetCUBINSize(prog, &n);
    if (r != NVRTC_SUCCESS || n == 0) {
        g_nv.DestroyProgram(&prog);
        return err_set(e, ST_RUNTIME,
                       "NVRTC produced no cubin for %s (%s): --gpu-architecture=%s must name a "
                       "real architecture (sm_XY), not a virtual one",
                       name, r != NVRTC_SUCCESS ? g_nv.GetErrorString(r) : "size 0", opt->arch);
    }
    void *bin = malloc(n);
    if (!bin) {
        g_nv.DestroyProgram(&prog);
        return err_set(e, ST_RUNTIME, "out of memory for the %zu-byte cubin of %s", n, name);
    }
    r = g_nv.GetCUBIN(prog, bin);
    g_nv.DestroyProgram(&prog);
    if (r != NVRTC_SUCCESS) {
        free(bin);
        return err_set(e, ST_RUNTIME, "NVRTC cannot return the cubin of %s: %s", name,
                       g_nv.GetErrorString(r));
    }
    *cubin = bin;
    *size = n;
    return ST_OK;
}

// The prelude's shuffles use the full-warp mask: callers run them with every lane of the warp
// active, i.e. blockDim.x a multiple of 32 and no divergent early return before them.
static const char PRELUDE[] =
    "// orch CUDA prelude (src/backend/cuda/nvrtc.c): generated kernels include no toolkit "
    "header.\n"
    "typedef signed char int8_t;\n"
    "typedef unsigned char uint8_t;\n"
    "typedef short int16_t;\n"
    "typedef unsigned short uint16_t;\n"
    "typedef int int32_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef long long int64_t;\n"
    "typedef unsigned long long uint64_t;\n"
    "#define ORCH_KERNEL extern \"C\" __global__\n"
    "#define ORCH_INF __int_as_float(0x7f800000)\n"
    "#define ORCH_NAN __int_as_float(0x7fffffff)\n"
    "#define ORCH_FULL_MASK 0xffffffffu\n"
    "// Butterfly reductions: every lane ends with the result of all 32. Max and min propagate\n"
    "// NaN (docs/numerics.md), which fmaxf / fminf would drop.\n"
    "__device__ __forceinline__ float orch_warp_sum(float v) {\n"
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(ORCH_FULL_MASK, v, o);\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float orch_warp_max(float v) {\n"
    "    for (int o = 16; o > 0; o >>= 1) {\n"
    "        const float w = __shfl_xor_sync(ORCH_FULL_MASK, v, o);\n"
    "        v = (w > v || w != w) ? w : v;\n"
    "    }\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float orch_warp_min(float v) {\n"
    "    for (int o = 16; o > 0; o >>= 1) {\n"
    "        const float w = __shfl_xor_sync(ORCH_FULL_MASK, v, o);\n"
    "        v = (w < v || w != w) ? w : v;\n"
    "    }\n"
    "    return v;\n"
    "}\n"
    "// Sum over a 1-D block (blockDim.x a multiple of 32); scratch: __shared__ float[32]. Every\n"
    "// thread gets the sum; the leading barrier lets consecutive calls reuse scratch.\n"
    "__device__ __forceinline__ float orch_block_sum(float v, float *scratch) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    v = orch_warp_sum(v);\n"
    "    __syncthreads();\n"
    "    if (lane == 0) scratch[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : 0.0f;\n"
    "    return orch_warp_sum(v);\n"
    "}\n"
    "__device__ __forceinline__ float orch_block_max(float v, float *scratch) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    v = orch_warp_max(v);\n"
    "    __syncthreads();\n"
    "    if (lane == 0) scratch[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : -ORCH_INF;\n"
    "    return orch_warp_max(v);\n"
    "}\n"
    "// Grid barrier of a kernel whose blocks are all resident (the reduction emitter's grid\n"
    "// split: at most one block per SM). `bar` is the kernel's own module-scope counter, zero at\n"
    "// load; it only grows: each barrier ends at the next multiple of the grid size, so it needs\n"
    "// no reset between launches (launches of one module run one at a time on its stream).\n"
    "// The fences publish each block's partials before it arrives and order the reads after.\n"
    "__device__ __forceinline__ void orch_grid_sync(unsigned long long *bar, unsigned nb) {\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) {\n"
    "        __threadfence();\n"
    "        const unsigned long long old = atomicAdd(bar, 1ull);\n"
    "        const unsigned long long target = (old / nb + 1) * nb;\n"
    "        while (*(volatile unsigned long long *)bar < target) {\n"
    "        }\n"
    "        __threadfence();\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n";

const char *orch_cuda_prelude(void) {
    return PRELUDE;
}
