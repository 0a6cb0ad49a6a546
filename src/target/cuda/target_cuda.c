// The CUDA target (target.h's interface): CUDA C kernels compiled by NVRTC for the device's exact
// architecture, loaded through the driver API, both loaded at run time (cuda_api.h, nvrtc.h), so
// one orch binary works with or without a GPU. Candidates go to the pointwise/reduction emitters
// or, with one LINEAR primitive, to the matmul/convolution emitters (cugen.h); OPAQUE primitives
// are never generated. The device model (CudaHw) is read once per process.
#include "../target.h"
#include "cugen.h"
#include "nvrtc.h"

#include <pthread.h>
#include <string.h>

static CudaHw cuda_hw;
static HwInfo cuda_info;
static Err cuda_err;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void detect_once(void) { cuda_hw_detect(&cuda_hw, &cuda_info, &cuda_err); }

// The device model of this process's GPU; NULL (and e set) when there is none.
static const CudaHw *device_model(Err *e) {
    pthread_once(&cuda_once, detect_once);
    if (cuda_err.code) {
        if (e)
            err_set(e, cuda_err.code, "%s", cuda_err.msg);
        return NULL;
    }
    return &cuda_hw;
}

static int cuda_target_hw_detect(HwInfo *hw, int threads, Err *e) {
    (void)threads; // a GPU's kernels do not use host threads
    if (!device_model(e))
        return e->code;
    *hw = cuda_info;
    return ST_OK;
}

static bool has_kind(const PrimGraph *pg, const Candidate *c, PrimKind k) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == k)
            return true;
    return false;
}

static bool cuda_supports(const PrimGraph *pg, const Candidate *c) {
    if (has_kind(pg, c, PRIM_OPAQUE) || c->n_inputs > ORCH_CUDA_MAX_IN)
        return false;
    return has_kind(pg, c, PRIM_LINEAR) ? cugen_lin_supports(pg, c) : cugen_pw_supports(pg, c);
}

static int cuda_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw,
                        KernelConfig *out, int k) {
    (void)hw;
    const CudaHw *ch = device_model(NULL);
    if (!ch)
        return 0;
    return has_kind(pg, c, PRIM_LINEAR) ? cugen_lin_configs(pg, c, ch, out, k)
                                        : cugen_pw_configs(pg, c, ch, out, k);
}

int cugen_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const CudaHw *hw,
               const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    return cfg->cls == CUCLS_MATMUL || cfg->cls == CUCLS_CONV
               ? cugen_lin_emit(pg, c, cfg, hw, fn, src, launch, e)
               : cugen_pw_emit(pg, c, cfg, hw, fn, src, launch, e);
}

static int cuda_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                     const char *fn, StrBuf *src, Err *e) {
    const CudaHw *ch = device_model(e);
    if (!ch)
        return e->code;
    CudaLaunch launch;
    return cugen_emit(pg, c, cfg, ch, fn, src, &launch, e);
}

const Target target_cuda = {
    .name = "cuda",
    .hw_detect = cuda_target_hw_detect,
    .supports = cuda_supports,
    .configs = cuda_configs,
    .emit = cuda_emit,
    .prelude = cugen_prelude,
};
