// The CUDA kernel lab: the GPU counterpart of lab_run (src/backend/kernel_lab.h), with the same
// jobs, options and results. Jobs are emitted (through the emitter given, so the lab does not
// depend on the CUDA emitters' code) into NVRTC programs of many kernels, compiled in parallel
// threads (a program that fails is split into single kernels to find the culprit), loaded with
// cuModuleLoadData, and each kernel is run on the tensor values the primitive interpreter
// computed: inputs uploaded into a device pool reused by every job (each buffer aligned to
// PLAN_ALIGN and never to twice that: the runtime arena's worst case), the output poisoned (0xff),
// one launch with the geometry its emitter fixed, checked, downloaded, compared with
// lab_outputs_agree. An operator kernel (cugen.h's operator ABI) gets every output of its
// primitive, each poisoned and compared, and a cleared status word: set after the run, the
// kernel is wrong (the interpreter's operands are valid). A kernel that agrees is timed with CUDA
// events: warm-up, then samples of back-to-back launches (enough to fill about 100 µs each, queued
// behind a short spin kernel so host launch overhead does not count), median, minimum and spread of
// the per-launch times. For a kernel whose inputs exceed half the L2 (they would not be
// cache-resident in the real run), every sample is one launch after the L2 was flushed by writing a
// buffer twice its size. A job whose emit returns a library call (CudaLaunch.lib: cuBLASLt,
// cublaslt.h; cuDNN, cudnn.h) is not compiled: the same call the session makes runs on the lab's
// stream, with one workspace for all, and is checked and timed the same way; a call that cannot be
// captured in a CUDA graph (as the session replays it) fails. A kernel that faults (illegal
// address, trap) poisons the CUDA context for the whole process (the driver refuses every later
// call): it is marked LAB_WRONG ("crashed") and reported through on_result, the lab stops (the
// remaining jobs stay LAB_SKIPPED) and returns ST_RUNTIME saying so. The caller's before_run marked
// it pending, so the next process skips it. Needs: a GPU (cuda_api_load), NVRTC (nvrtc_load), a
// verified primitive graph, its candidates and every tensor's value (prim_interp_values).
// Guarantees: every job ends with a status and, when LAB_OK, a time; device memory is freed before
// returning.
#ifndef ORCH_CUDA_LAB_H
#define ORCH_CUDA_LAB_H

#include "../kernel_lab.h"
#include "cugen.h"
#include "session_cuda.h"

// Appends one kernel named fn (cugen.h ABI) to src and fixes its launch geometry; opt: the
// compile's options, which decide with the config what is emitted.
typedef int (*CudaEmitFn)(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg,
                          const CudaHw *hw, const TargetOptions *opt, const char *fn, StrBuf *src,
                          CudaLaunch *launch, Err *e);

typedef struct CudaEmitter {
    CudaEmitFn emit;
    const char *prelude; // the text every program starts with (cugen_prelude())
    TargetOptions opt;   // passed to every emit (zeroed: fp32, float32 storage)
} CudaEmitter;

// Runs the jobs on the GPU hw describes (hw->ordinal, hw->arch; cuda_hw_detect). From opt it uses
// jobs (parallel NVRTC threads; 0: cores), per_unit (kernels per program; 0: lab_unit_size, up
// to 32), min_time
// (seconds of timed launches per kernel, spread over the samples; 0: 100 µs per sample),
// max_reps (timing samples; 0: 20), before_run, on_result and ctx; target, hw, workdir and
// keep are the CPU lab's and ignored. Errors are the lab's own (no driver or NVRTC:
// ST_UNSUPPORTED with their messages, and every job LAB_SKIPPED; a kernel that crashed the
// context: ST_RUNTIME); otherwise a kernel's failure is its job's status.
int cuda_lab_run(const PrimGraph *pg, const CandidateSet *cs, void **values, LabJob *jobs, int n,
                 const LabOptions *opt, const CudaHw *hw, const CudaEmitter *em, Err *e);

// The same, measured on hw's GPU and the n_others GPUs others describe (each of hw's kind: the
// caller checked their fingerprints, kernel_lab.h's lab_devices_select). The programs are
// compiled once, for hw->arch; then one worker per GPU (hw's on the calling thread, the others on
// threads of their own, each with its primary context, stream, buffer pool and its own copies of
// a job's inputs) takes the next job from one queue (lab_queue_take), loads the job's program on
// its GPU, checks and times it as above and sets the job's device to its ordinal; a library
// call runs with its GPU's own cuBLASLt or cuDNN handle (blaslt_init, dnn_init). The caller's
// before_run, on_result and on_note are called one at a time (under one mutex), from whichever
// worker's thread finished the job. A GPU whose setup fails is left out with an on_note line; hw's
// failing fails the lab as cuda_lab_run does. A crash stops every worker after its current job.
// n_others 0: exactly cuda_lab_run, job for job in the same order.
int cuda_lab_run_devices(const PrimGraph *pg, const CandidateSet *cs, void **values, LabJob *jobs,
                         int n, const LabOptions *opt, const CudaHw *hw, const CudaHw *others,
                         int n_others, const CudaEmitter *em, Err *e);

// The source of the module cuda_lab_build_module builds for the same arguments (*src malloc'd,
// NUL-terminated; NULL for n = 0): hw's prelude, each kernel once, the CUDA_SPIN_SYMBOL helper;
// each one's geometry in *table (zeroed first; freed on failure). What the artefact keeps for
// orch export. Needs nothing (emitting only).
int cuda_lab_module_source(const PrimGraph *pg, const CandidateSet *cs, const int *cands,
                           const KernelConfig *cfgs, int n, const CudaHw *hw, const CudaEmitter *em,
                           char **src, CudaLaunchTable *table, Err *e);

// Builds the given kernels (cands[i] with cfgs[i], named lab_kernel_name; a kernel listed twice
// is emitted once) into one cubin for hw->arch, with the CUDA_SPIN_SYMBOL helper, and records
// each one's geometry in *table (zeroed first): what the compile driver stores in the artefact
// (cuda_module_pack). Needs NVRTC only. *cubin is malloc'd; none (NULL, 0) when n is 0.
int cuda_lab_build_module(const PrimGraph *pg, const CandidateSet *cs, const int *cands,
                          const KernelConfig *cfgs, int n, const CudaHw *hw, const CudaEmitter *em,
                          void **cubin, size_t *cubin_size, CudaLaunchTable *table, Err *e);

#endif
