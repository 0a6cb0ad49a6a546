// The CUDA target (target.h's interface): CUDA C kernels compiled by NVRTC for the device's exact
// architecture, loaded through the driver API, both loaded at run time (cuda_api.h, nvrtc.h), so
// one orch binary works with or without a GPU. Candidates go to the pointwise/reduction emitters
// or, with one LINEAR primitive, to the matmul/convolution emitters (cugen.h) and, where cuBLASLt
// or cuDNN is present and computes the candidate exactly, to cuBLASLt calls (cublaslt.h) or cuDNN
// calls (cudnn.h) as further configs, measured by the lab like any kernel; OPAQUE primitives are
// never generated. The device
// model (CudaHw) is read once per process.
#include "../target.h"
#include "../../candidates/attention.h"
#include "cugen.h"
#include "cugen_attn.h"
#include "cugen_mlp.h"
#include "nvrtc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static CudaHw cuda_hw;
static HwInfo cuda_info;
static Err cuda_err;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void detect_once(void) {
    cuda_hw_detect(&cuda_hw, &cuda_info, &cuda_err);
}

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

// A fused attention candidate (candidates/attention.h); the other candidates of several LINEAR
// primitives are MLP chains.
static bool is_attention(const PrimGraph *pg, const Candidate *c) {
    AttnSpec a;
    return attn_analyse(pg, c, &a);
}

static bool cuda_supports(const PrimGraph *pg, const Candidate *c) {
    if (has_kind(pg, c, PRIM_OPAQUE) || c->n_inputs > ORCH_CUDA_MAX_IN)
        return false;
    if (cand_count_linear(pg, c) >= 2) // fused attention or an MLP chain (issue 8)
        return is_attention(pg, c) ? cugen_attn_supports(pg, c) : cugen_mlp_supports(pg, c);
    // A LINEAR cuBLASLt computes is one our emitter generates too (blaslt_analyse starts from
    // its analysis), so the library only adds configs; except where the product passes through
    // views (reshapes that move no element, which our emitter's epilogue does not take): those
    // are cuBLASLt's alone, supported only where calls can be made (a GPU and the library).
    if (!has_kind(pg, c, PRIM_LINEAR))
        return cugen_pw_supports(pg, c);
    if (cugen_lin_supports(pg, c))
        return true;
    BlasLtCall call;
    if (blaslt_analyse(pg, c, &call) && blaslt_ready())
        return true;
    // Likewise convolutions reading and writing channels-last tensors through the transposes of
    // pass_channels_last: cuDNN's alone.
    DnnCall dc;
    return dnn_available() && dnn_analyse(pg, c, &dc);
}

// Multiply-adds from which a cuBLASLt call's first config leads (see linear_configs).
#define BLASLT_FIRST_MACS (1 << 22)

// A LINEAR's configs: cuBLASLt's heuristic algorithms and the emitter's configs, alternately, up
// to k. The compile driver measures the first config of every kernel (the BLP's first costs), the
// second where the first failed, and all of the chosen kernels'. The two sources' estimates are
// not comparable, so the order decides which one gives the first cost: the library from
// BLASLT_FIRST_MACS multiply-adds on (on an H100 its first algorithm beats our best SIMT GEMM by
// 1.3-4x at 128x768x768 and up), our emitter below, where the heuristics' first algorithm is often
// a split-K pair of kernels slower than our first config (a tiny BERT layer compiled 8% slower
// with the library first there) and the library's better algorithms are still measured in phase 2.
// A convolution's library configs are cuDNN's (cuBLASLt computes none), always after ours: with
// float32 FMA math they win on small dense 3x3 convolutions and lose on depthwise, grouped and 1x1
// ones (H100), so the first costs stay ours and cuDNN's are measured in phase 2 for the chosen
// kernels (where the BLP took them for 7 of ResNet-18's 32 kernels).
static int linear_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *ch,
                          KernelConfig *out, int k) {
    KernelConfig *own = xcalloc((size_t)k + 1, sizeof *own);
    KernelConfig *lib = xcalloc((size_t)k + 1, sizeof *lib);
    int no = cugen_lin_configs(pg, c, ch, own, k);
    int nl = blaslt_configs(pg, c, ch, lib, k);
    if (nl == 0)
        nl = dnn_configs(pg, c, ch, lib, k);
    BlasLtCall call;
    bool lib_first = nl > 0 && blaslt_analyse(pg, c, &call) &&
                     (double)call.batch * call.m * call.n * call.k >= BLASLT_FIRST_MACS;
    int n = 0;
    for (int i = 0; n < k && (i < no || i < nl); i++) {
        if (lib_first && i < nl && n < k)
            out[n++] = lib[i];
        if (i < no && n < k)
            out[n++] = own[i];
        if (!lib_first && i < nl && n < k)
            out[n++] = lib[i];
    }
    free(own);
    free(lib);
    return n;
}

static int cuda_configs(const PrimGraph *pg, const Candidate *c, const HwInfo *hw,
                        KernelConfig *out, int k) {
    (void)hw;
    const CudaHw *ch = device_model(NULL);
    if (!ch)
        return 0;
    if (k <= 0)
        return 0;
    if (cand_count_linear(pg, c) >= 2)
        return is_attention(pg, c) ? cugen_attn_configs(pg, c, ch, out, k)
                                   : cugen_mlp_configs(pg, c, ch, out, k);
    return has_kind(pg, c, PRIM_LINEAR) ? linear_configs(pg, c, ch, out, k)
                                        : cugen_pw_configs(pg, c, ch, out, k);
}

int cugen_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const CudaHw *hw,
               const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    if (cfg->cls == CUCLS_MLP)
        return cugen_mlp_emit(pg, c, cfg, hw, fn, src, launch, e);
    if (cfg->cls == CUCLS_ATTN)
        return cugen_attn_emit(pg, c, cfg, hw, fn, src, launch, e);
    if (cfg->cls == CUCLS_BLASLT) {
        CudaLaunch l;
        memset(&l, 0, sizeof l);
        l.lib = true;
        int rc = blaslt_call(pg, c, cfg, &l.blas, e);
        if (rc)
            return rc;
        char d[512];
        blaslt_call_str(&l.blas, d, sizeof d);
        sb_printf(src, "// %s: %s\n", fn, d); // no code: the runtime calls the library
        if (launch)
            *launch = l;
        return ST_OK;
    }
    if (cfg->cls == CUCLS_CUDNN) {
        CudaLaunch l;
        memset(&l, 0, sizeof l);
        l.lib = CUDA_LIB_CUDNN;
        int rc = dnn_call(pg, c, cfg, &l.dnn, e);
        if (rc)
            return rc;
        char d[512];
        dnn_call_str(&l.dnn, d, sizeof d);
        sb_printf(src, "// %s: %s\n", fn, d); // no code: the runtime calls the library
        if (launch)
            *launch = l;
        return ST_OK;
    }
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
