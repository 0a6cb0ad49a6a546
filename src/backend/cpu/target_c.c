// The CPU target: C kernels built with the system compiler (target.h's interface). It reads the
// machine (model, cores, SIMD width, caches, compiler) and hands each candidate to the emitter of
// its class: pointwise and reduction kernels (cgen.h), matmul and convolution kernels
// (cgen_linear.h), MLP chains and attention, operator kernels (cgen_opaque.h: a candidate that
// is one OPAQUE primitive of an operator opaque_spec.h describes; the others run their reference
// op). Its lab (lab_cpu.c) builds units with the system compiler in parallel processes, its
// artefact module is one shared object, and its sessions run plans on the host (session_cpu.h).
#define _GNU_SOURCE
#include "../../base/file.h"
#include "../../candidates/attention.h"
#include "../kernel_lab.h"
#include "../target.h"
#include "cbuild.h"
#include "cgen.h"
#include "cgen_attn.h"
#include "cgen_linear.h"
#include "cgen_mlp.h"
#include "cgen_opaque.h"
#include "cpu_backend.h"
#include "hw_cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_linear(const PrimGraph *pg, const Candidate *c) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_LINEAR)
            return true;
    return false;
}

static bool has_opaque(const PrimGraph *pg, const Candidate *c) {
    for (int i = 0; i < c->n_prims; i++)
        if (pg->prims[c->prims[i]]->kind == PRIM_OPAQUE)
            return true;
    return false;
}

static bool is_attention(const PrimGraph *pg, const Candidate *c) {
    AttnSpec a;
    return attn_analyse(pg, c, &a);
}

static char *prelude_text;

static void build_prelude(void) {
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, cgen_prelude());
    sb_puts(&b, "\n");
    sb_puts(&b, cgen_lin_prelude());
    sb_puts(&b, "\n");
    prelude_text = sb_take(&b);
}

static int cpu_check_options(const TargetOptions *opt, Err *e) {
    if (opt->precision != PREC_FP32)
        return err_set(e, ST_USAGE,
                       "precision %s needs the cuda target; the cpu target computes in float32",
                       precision_name(opt->precision));
    if (opt->half_storage)
        return err_set(e, ST_USAGE,
                       "half storage needs the cuda target and precision fp16 or bf16");
    if (opt->threads < 0)
        return err_set(e, ST_USAGE, "--threads must be at least 1 (got %d)", opt->threads);
    if (opt->gpus)
        return err_set(e, ST_USAGE,
                       "--gpus %s needs the cuda target; the cpu target measures on the host",
                       opt->gpus);
    return ST_OK;
}

static int cpu_open(TargetMachine *m, Err *e) {
    m->model = NULL;
    cbuild_remove_stale_workdirs(); // a compile starts here: what killed ones left goes first
    return cpu_hw_detect(&m->hw, m->opt.threads, true, e);
}

static void cpu_close(TargetMachine *m) {
    (void)m;
}

static bool cpu_prefers_channels_last(const TargetMachine *m) {
    (void)m; // the C kernels are generated for the model's own layouts
    return false;
}

static const char *cpu_db_name(const TargetMachine *m) {
    (void)m;
    return "cpu";
}

static bool cpu_supports(const TargetMachine *m, const PrimGraph *pg, const Candidate *c) {
    (void)m;
    if (has_opaque(pg, c)) // an operator kernel (OPAQUE primitives come alone)
        return cgen_opq_supports(pg, c);
    if (cand_count_linear(pg, c) >= 2) // fused attention or an MLP chain
        return is_attention(pg, c) ? cgen_attn_supports(pg, c) : cgen_mlp_supports(pg, c);
    return has_linear(pg, c) ? cgen_lin_supports(pg, c) : cgen_pw_supports(pg, c);
}

static int cpu_configs(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                       KernelConfig *out, int k) {
    const HwInfo *hw = &m->hw;
    if (has_opaque(pg, c))
        return cgen_opq_configs(pg, c, hw, out, k);
    if (cand_count_linear(pg, c) >= 2)
        return is_attention(pg, c) ? cgen_attn_configs(pg, c, hw, out, k)
                                   : cgen_mlp_configs(pg, c, hw, out, k);
    return has_linear(pg, c) ? cgen_lin_configs(pg, c, hw, out, k)
                             : cgen_pw_configs(pg, c, hw, out, k);
}

static int cpu_emit(const TargetMachine *m, const PrimGraph *pg, const Candidate *c,
                    const KernelConfig *cfg, const char *fn, StrBuf *src, Err *e) {
    (void)m;
    if (cfg->cls == CCLS_MLP)
        return cgen_mlp_emit(pg, c, cfg, fn, src, e);
    if (cfg->cls == CCLS_ATTN)
        return cgen_attn_emit(pg, c, cfg, fn, src, e);
    if (cfg->cls == CCLS_OPAQUE)
        return cgen_opq_emit(pg, c, cfg, fn, src, e);
    return has_linear(pg, c) ? cgen_lin_emit(pg, c, cfg, fn, src, e)
                             : cgen_pw_emit(pg, c, cfg, fn, src, e);
}

static const char *cpu_prelude(const TargetMachine *m) {
    (void)m;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_prelude);
    return prelude_text;
}

// The chosen kernels as one translation unit: the prelude, then each kernel once (a kernel
// chosen twice, two layers with one signature, is emitted once). What the artefact's module is
// built from (or, reusing a lab unit, what it equals kernel for kernel), kept for orch export.
static int cpu_module_source(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                             const int *cands, const KernelConfig *cfgs, const char *const *names,
                             int n, char **out, Err *e) {
    *out = NULL;
    if (n == 0)
        return ST_OK;
    StrBuf src;
    sb_init(&src);
    sb_puts(&src, cpu_prelude(m));
    int rc = ST_OK;
    for (int i = 0; i < n && rc == ST_OK; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(names[j], names[i]) == 0;
        if (!seen)
            rc = cpu_emit(m, pg, &cs->c[cands[i]], &cfgs[i], names[i], &src, e);
    }
    if (rc == ST_OK)
        *out = sb_take(&src);
    else
        sb_free(&src);
    return rc;
}

// The artefact's module: one shared object. A unit the lab built that holds every chosen kernel
// serves as it (extra kernels in it are harmless), which saves a build; otherwise the chosen
// kernels are emitted into one unit and built.
static int cpu_build(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs,
                     const int *cands, const KernelConfig *cfgs, const char *const *names, int n,
                     void *const *lab_modules, int n_lab_modules, uint8_t **blob, size_t *size,
                     Err *e) {
    *blob = NULL;
    *size = 0;
    if (n == 0)
        return ST_OK;
    CModule *reuse = NULL;
    for (int u = 0; u < n_lab_modules && !reuse; u++) {
        bool all = true;
        for (int i = 0; i < n && all; i++)
            all = cmodule_sym(lab_modules[u], names[i]) != NULL;
        if (all)
            reuse = lab_modules[u];
    }
    CModule *mod = NULL;
    int rc = ST_OK;
    if (!reuse) {
        char *src = NULL;
        rc = cpu_module_source(m, pg, cs, cands, cfgs, names, n, &src, e);
        if (rc == ST_OK)
            rc = cbuild_module(src, NULL, "the chosen kernels", &mod, e);
        free(src);
    }
    if (rc == ST_OK)
        rc = file_read_all(cmodule_path(reuse ? reuse : mod), (int64_t)1 << 34, blob, size, e);
    cmodule_free(mod);
    return rc;
}

static const char *cpu_module_identity(const TargetMachine *m) {
    (void)m;
    return cbuild_identity();
}

static void cpu_lab_modules_free(void *const *mods, int n) {
    for (int i = 0; mods && i < n; i++)
        cmodule_free(mods[i]);
}

const Target target_cpu = {
    .name = "cpu",
    .check_options = cpu_check_options,
    .open = cpu_open,
    .close = cpu_close,
    .calibrate = NULL,
    .prefers_channels_last = cpu_prefers_channels_last,
    .db_name = cpu_db_name,
    .supports = cpu_supports,
    .configs = cpu_configs,
    .emit = cpu_emit,
    .prelude = cpu_prelude,
    .lab_run = cpu_lab_run,
    .build = cpu_build,
    .lab_modules_free = cpu_lab_modules_free,
    .module_source = cpu_module_source,
    .module_identity = cpu_module_identity,
    .export_tree = cpu_export_tree,
    .runtime = &target_runtime_cpu,
};
