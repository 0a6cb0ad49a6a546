// The CUDA target (target.h's interface): CUDA C kernels compiled by NVRTC for the device's exact
// architecture, loaded through the driver API, both loaded at run time (cuda_api.h, nvrtc.h), so
// one orch binary works with or without a GPU. Candidates go to the pointwise/reduction emitters
// or, with one LINEAR primitive, to the matmul/convolution emitters (cugen.h) and, where cuBLASLt
// or cuDNN is present and computes the candidate exactly, to cuBLASLt calls (cublaslt.h) or cuDNN
// calls (cudnn.h) as further configs, measured by the lab like any kernel; a candidate that is
// one OPAQUE primitive (an ONNX operator) to the operator kernels (cugen_opq.h). The device
// model (CudaHw) is read for every machine opened (one compile), with its measured bandwidth; the
// machine's options (the precision, half storage) go to every emitter as an argument.
// Its lab is cuda_lab.h, its artefact module a packed cubin, its sessions session_cuda.h.
#include "../../candidates/attention.h"
#include "../../db/profile_db.h"
#include "../kernel_lab.h"
#include "../target.h"
#include "cost_models.h"
#include "cuda_lab.h"
#include "cugen.h"
#include "cugen_attn.h"
#include "cugen_linear.h"
#include "cugen_mlp.h"
#include "cugen_opq.h"
#include "export_cuda.h"
#include "nvrtc.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// The machine's model: the target device (device 0) and the other GPUs of its kind the lab
// measures on (--gpus). hw comes first, so the slots that read the device model alone (supports,
// configs, emit) take a bare CudaHw as a model too, as tests describing a device without one do.
typedef struct CudaMachine {
    CudaHw hw; // device 0: the hardware model every config and emitter reads
    int n_others;
    CudaHw others[LAB_MAX_DEVICES - 1];
    char note[768]; // the devices left out, for the compile's log
    // The other GPUs' primary contexts, held from the first lab run to close: each lab run (a
    // compile makes several) makes them current in its workers, and without a holder every run
    // would create and destroy them again.
    bool held;
    int n_held;
    CUdevice held_dev[LAB_MAX_DEVICES - 1];
} CudaMachine;

_Static_assert(offsetof(CudaMachine, hw) == 0, "a CudaHw is a CudaMachine's model");

static void hold_contexts(CudaMachine *cm) {
    if (cm->held)
        return;
    cm->held = true;
    Err e = {0};
    const CudaApi *api = cuda_api_load(&e);
    for (int k = 0; api && k < cm->n_others; k++) {
        CUdevice d;
        CUcontext c;
        if (api->cuDeviceGet(&d, cm->others[k].ordinal) == CUDA_SUCCESS &&
            api->cuDevicePrimaryCtxRetain(&c, d) == CUDA_SUCCESS)
            cm->held_dev[cm->n_held++] = d;
    }
}

static const CudaHw *model_of(const TargetMachine *m) {
    return &((const CudaMachine *)m->model)->hw;
}

static int cuda_check_options(const TargetOptions *opt, Err *e) {
    LabDeviceSpec spec;
    if (lab_devices_parse(opt->gpus, &spec, e))
        return e->code;
    if (opt->half_storage && opt->precision != PREC_FP16 && opt->precision != PREC_BF16)
        return err_set(e, ST_USAGE,
                       "half storage needs the cuda target and precision fp16 or bf16");
    if (opt->threads < 0)
        return err_set(e, ST_USAGE, "--threads must be at least 1 (got %d)", opt->threads);
    return ST_OK;
}

// The GPUs besides device 0 the lab measures on: those --gpus names (all by default) whose
// fingerprint is device 0's (cuda_hw_info's: name, architecture, SMs, caches, driver, NVRTC), so
// a time is the same whichever measured it. --gpus 1 reads no other device.
static int select_others(TargetMachine *m, CudaMachine *cm, Err *e) {
    LabDeviceSpec spec;
    int rc = lab_devices_parse(m->opt.gpus, &spec, e);
    if (rc || spec.count == 1)
        return rc;
    const CudaApi *api = cuda_api_load(e);
    if (!api)
        return e->code;
    int n_dev = api->device_count;
    CudaHw *hws = xcalloc((size_t)n_dev, sizeof *hws);
    char(*fps)[512] = xcalloc((size_t)n_dev, sizeof *fps);
    const char **fp = xcalloc((size_t)n_dev, sizeof *fp);
    for (int o = 0; o < n_dev; o++) {
        HwInfo info;
        Err de = {0};
        if (o == cm->hw.ordinal)
            hws[o] = cm->hw;
        else if (cuda_hw_detect_device(o, &hws[o], NULL, &de) != ST_OK)
            continue; // unreadable: left out, the note says so
        cuda_hw_info(&hws[o], &info);
        snprintf(fps[o], sizeof fps[o], "%s", info.fingerprint);
        fp[o] = fps[o];
    }
    int chosen[LAB_MAX_DEVICES], n = 0;
    rc = lab_devices_select(&spec, n_dev, fp, cm->hw.ordinal, chosen, &n, cm->note, sizeof cm->note,
                            e);
    for (int k = 1; rc == ST_OK && k < n; k++)
        cm->others[cm->n_others++] = hws[chosen[k]];
    free(hws);
    free(fps);
    free(fp);
    return rc;
}

// The device model of this machine's GPU (device 0), read fresh for every machine opened: a
// compile's calibration then changes only its own model. Also the GPUs of its kind that measure.
static int cuda_open(TargetMachine *m, Err *e) {
    CudaMachine *cm = xcalloc(1, sizeof *cm);
    m->model = cm;
    int rc = cuda_hw_detect(&cm->hw, &m->hw, e);
    return rc ? rc : select_others(m, cm, e);
}

static void cuda_close(TargetMachine *m) {
    CudaMachine *cm = m->model;
    Err e = {0};
    const CudaApi *api = cm && cm->n_held ? cuda_api_load(&e) : NULL;
    for (int k = 0; api && k < cm->n_held; k++)
        api->cuDevicePrimaryCtxRelease(cm->held_dev[k]);
    free(m->model);
    m->model = NULL;
}

// The GPU's memory bandwidth for the device models: measured once per device fingerprint and
// kept in the profile database (device_value "dram_bw"); without a database measured every time.
// A failed measurement leaves the theoretical value (a warning, never an error).
static void cuda_calibrate(TargetMachine *m, ProfileDb *db, FILE *pr) {
    CudaMachine *cm = m->model;
    CudaHw *hw = &cm->hw;
    double bw = 0;
    bool found = false;
    Err e = {0};
    if (db && pdb_get_value(db, m->hw.fingerprint, "dram_bw", &bw, &found, &e))
        found = false;
    if (!found || !(bw > 0)) {
        Err me = {0};
        if (cuda_measure_dram_bw(hw, &bw, &me)) {
            if (pr)
                fprintf(pr,
                        "warning: memory bandwidth not measured (%s); using %.0f GB/s from "
                        "the clocks\n",
                        me.msg, hw->dram_bw / 1e9);
            return;
        }
        if (db && pdb_set_value(db, m->hw.fingerprint, "dram_bw", bw, &e) && pr)
            fprintf(pr, "warning: profile database: %s\n", e.msg);
        if (pr)
            fprintf(pr, "device: memory bandwidth %.0f GB/s measured (%.0f GB/s from the clocks)\n",
                    bw / 1e9, hw->dram_bw / 1e9);
    }
    hw->dram_bw = bw;
    for (int k = 0; k < cm->n_others; k++) // the same kind of device: the same model
        cm->others[k].dram_bw = bw;
}

// Channels-last twins pay where cuDNN is there to read them.
static bool cuda_prefers_channels_last(const TargetMachine *m) {
    (void)m;
    return dnn_available();
}

// Under a reduced precision the emitters take the fast transcendentals (cugen_cexpr_dialect):
// other code for the same config, so its records are kept apart.
static const char *cuda_db_name(const TargetMachine *m) {
    return m->opt.precision != PREC_FP32 ? "cuda/fast-math" : "cuda";
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

static bool cuda_supports(const TargetMachine *m, const PrimGraph *pg, const Candidate *c) {
    const TargetOptions *opt = &m->opt;
    if (has_kind(pg, c, PRIM_OPAQUE))
        return cugen_opq_supports(pg, c, opt);
    if (c->n_inputs > ORCH_CUDA_MAX_IN)
        return false;
    if (cand_count_linear(pg, c) >= 2) // fused attention or an MLP chain
        return is_attention(pg, c) ? cugen_attn_supports(pg, c, opt)
                                   : cugen_mlp_supports(pg, c, opt);
    // A LINEAR cuBLASLt computes is one our emitter generates too (blaslt_analyse starts from
    // its analysis), so the library only adds configs; except where the product passes through
    // views (reshapes that move no element, which our emitter's epilogue does not take): those
    // are cuBLASLt's alone, supported only where calls can be made (a GPU and the library).
    if (!has_kind(pg, c, PRIM_LINEAR))
        return cugen_pw_supports(pg, c, opt);
    if (cugen_lin_supports(pg, c, opt))
        return true;
    BlasLtCall call;
    if (blaslt_analyse(pg, c, opt, &call) && blaslt_ready())
        return true;
    // Likewise convolutions reading and writing channels-last tensors through the transposes of
    // pass_channels_last: cuDNN's alone.
    DnnCall dc;
    return dnn_available() && dnn_analyse(pg, c, opt, &dc);
}

// A LINEAR's configs: cuBLASLt's heuristic algorithms and the emitter's configs, alternately, up
// to k. The compile driver measures the first config of every kernel (the BLP's first costs), the
// second where the first failed, and all of the chosen kernels'. The two sources' estimates are
// not comparable, so the order decides which one gives the first cost: the library from
// CUDA_MATMUL_MODEL.blaslt_first_macs multiply-adds on (on an H100 its first algorithm beats our
// best SIMT GEMM by 1.3-4x at 128x768x768 and up), our emitter below, where the heuristics' first
// algorithm is often a split-K pair of kernels slower than our first config (a tiny BERT layer
// compiled 8% slower with the library first there) and the library's better algorithms are still
// measured in phase 2.
// A convolution's library configs are cuDNN's (cuBLASLt computes none), always after ours: with
// float32 FMA math they win on small dense 3x3 convolutions and lose on depthwise, grouped and 1x1
// ones (H100), so the first costs stay ours and cuDNN's are measured in phase 2 for the chosen
// kernels (where the BLP took them for 7 of ResNet-18's 32 kernels).
static int linear_configs(const PrimGraph *pg, const Candidate *c, const CudaHw *ch,
                          const TargetOptions *opt, KernelConfig *out, int k) {
    KernelConfig *own = xcalloc((size_t)k + 1, sizeof *own);
    KernelConfig *lib = xcalloc((size_t)k + 1, sizeof *lib);
    int no = cugen_lin_configs(pg, c, ch, opt, own, k);
    int nl = blaslt_configs(pg, c, ch, opt, lib, k);
    if (nl == 0)
        nl = dnn_configs(pg, c, ch, opt, lib, k);
    BlasLtCall call;
    bool lib_first =
        nl > 0 && blaslt_analyse(pg, c, opt, &call) &&
        (double)call.batch * call.m * call.n * call.k >= CUDA_MATMUL_MODEL.blaslt_first_macs;
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

static int cuda_configs(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                        KernelConfig *out, int k) {
    const CudaHw *ch = model_of(m);
    const TargetOptions *opt = &m->opt;
    if (k <= 0)
        return 0;
    if (has_kind(pg, c, PRIM_OPAQUE))
        return cugen_opq_configs(pg, c, ch, opt, out, k);
    if (cand_count_linear(pg, c) >= 2)
        return is_attention(pg, c) ? cugen_attn_configs(pg, c, ch, opt, out, k)
                                   : cugen_mlp_configs(pg, c, ch, opt, out, k);
    return has_kind(pg, c, PRIM_LINEAR) ? linear_configs(pg, c, ch, opt, out, k)
                                        : cugen_pw_configs(pg, c, ch, opt, out, k);
}

int cugen_emit(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const CudaHw *hw,
               const TargetOptions *opt, const char *fn, StrBuf *src, CudaLaunch *launch, Err *e) {
    if (cfg->cls == CUCLS_MLP)
        return cugen_mlp_emit(pg, c, cfg, hw, opt, fn, src, launch, e);
    if (cfg->cls == CUCLS_ATTN)
        return cugen_attn_emit(pg, c, cfg, hw, opt, fn, src, launch, e);
    if (cfg->cls == CUCLS_OPAQUE)
        return cugen_opq_emit(pg, c, cfg, hw, opt, fn, src, launch, e);
    if (cfg->cls == CUCLS_BLASLT || cfg->cls == CUCLS_CUDNN) {
        // No code: the runtime calls the library; the source only names the call.
        CudaLaunch l;
        memset(&l, 0, sizeof l);
        char d[512];
        int rc;
        if (cfg->cls == CUCLS_BLASLT) {
            l.lib = true;
            if ((rc = blaslt_call(pg, c, cfg, opt, &l.blas, e)))
                return rc;
            blaslt_call_str(&l.blas, d, sizeof d);
        } else {
            l.lib = CUDA_LIB_CUDNN;
            if ((rc = dnn_call(pg, c, cfg, opt, &l.dnn, e)))
                return rc;
            dnn_call_str(&l.dnn, d, sizeof d);
        }
        sb_printf(src, "// %s: %s\n", fn, d);
        if (launch)
            *launch = l;
        return ST_OK;
    }
    return cfg->cls == CUCLS_MATMUL || cfg->cls == CUCLS_CONV
               ? cugen_lin_emit(pg, c, cfg, hw, opt, fn, src, launch, e)
               : cugen_pw_emit(pg, c, cfg, hw, opt, fn, src, launch, e);
}

static int cuda_emit(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                     const KernelConfig *cfg, const char *fn, StrBuf *src, Err *e) {
    CudaLaunch launch;
    return cugen_emit(pg, c, cfg, model_of(m), &m->opt, fn, src, &launch, e);
}

static const char *cuda_prelude(const TargetMachine *m) {
    (void)m;
    return cugen_prelude();
}

static int cuda_target_lab_run(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                               void **values, LabJob *jobs, int n, const LabOptions *lo, Err *e) {
    CudaMachine *cm = m->model;
    if (cm->n_others > 0)
        hold_contexts(cm);
    CudaEmitter em = {cugen_emit, cugen_prelude(), m->opt};
    return cuda_lab_run_devices(pg, cs, values, jobs, n, lo, &cm->hw, cm->others, cm->n_others, &em,
                                e);
}

static int cuda_lab_devices(const TargetMachine *m, int *ordinals, int max, char *note,
                            size_t note_n) {
    const CudaMachine *cm = m->model;
    int n = 0;
    if (max > 0)
        ordinals[n++] = cm->hw.ordinal;
    for (int k = 0; k < cm->n_others && n < max; k++)
        ordinals[n++] = cm->others[k].ordinal;
    if (note_n)
        snprintf(note, note_n, "%s", cm->note);
    return n;
}

// The artefact's module: the chosen kernels in one cubin with their launch table, packed into
// one blob (cuda_module_pack).
static int cuda_build(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                      const int *cands, const KernelConfig *cfgs, const char *const *names, int n,
                      void *const *lab_modules, int n_lab_modules, uint8_t **blob, size_t *size,
                      Err *e) {
    (void)names; // cuda_lab_build_module names them as lab_kernel_name does
    (void)lab_modules;
    (void)n_lab_modules;
    *blob = NULL;
    *size = 0;
    if (n == 0)
        return ST_OK;
    CudaEmitter em = {cugen_emit, cugen_prelude(), m->opt};
    void *cubin = NULL;
    size_t cubin_size = 0;
    CudaLaunchTable t;
    int rc =
        cuda_lab_build_module(pg, cs, cands, cfgs, n, model_of(m), &em, &cubin, &cubin_size, &t, e);
    if (rc == ST_OK) {
        rc = cuda_module_pack(cubin, cubin_size, &t, blob, size, e);
        cuda_launch_table_free(&t);
    }
    free(cubin);
    return rc;
}

// The module's source as cuda_build compiles it (the prelude, each chosen kernel once, the spin
// helper; a library call is a comment naming it), which the artefact keeps for orch export.
static int cuda_module_source(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                              const int *cands, const KernelConfig *cfgs, const char *const *names,
                              int n, char **src, Err *e) {
    (void)names; // named as lab_kernel_name names them, as cuda_build's
    CudaEmitter em = {cugen_emit, cugen_prelude(), m->opt};
    CudaLaunchTable t;
    int rc = cuda_lab_module_source(pg, cs, cands, cfgs, n, model_of(m), &em, src, &t, e);
    if (rc == ST_OK)
        cuda_launch_table_free(&t);
    return rc;
}

static void cuda_lab_modules_free(void *const *mods, int n) {
    (void)mods; // the CUDA lab keeps no modules
    (void)n;
}

const Target target_cuda = {
    .name = "cuda",
    .check_options = cuda_check_options,
    .open = cuda_open,
    .close = cuda_close,
    .calibrate = cuda_calibrate,
    .prefers_channels_last = cuda_prefers_channels_last,
    .db_name = cuda_db_name,
    .supports = cuda_supports,
    .configs = cuda_configs,
    .emit = cuda_emit,
    .prelude = cuda_prelude,
    .lab_run = cuda_target_lab_run,
    .lab_devices = cuda_lab_devices,
    .build = cuda_build,
    .lab_modules_free = cuda_lab_modules_free,
    .module_source = cuda_module_source,
    // Not reused from the database: the module packs a launch table (grids, blocks, library
    // calls) beside the cubin that the source's text does not spell out in full.
    .module_identity = NULL,
    .export_tree = cuda_export_tree,
    .runtime = &target_runtime_cuda,
};
