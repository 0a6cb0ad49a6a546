// The interface every code-generating target implements (STYLE.md: one static instance of a
// struct of function pointers). The compile driver (src/compile) and the runtime see a target only
// through it: what it supports, the top-k configs its hardware model proposes for a candidate,
// the source it emits for a (candidate, config), how it builds sources into a loadable module.
// Needs: a verified primitive graph and its candidate set. Guarantees: emitted kernels follow the
// kernel ABI below and compute the candidate's output exactly as prim.h defines it (up to float
// rounding; the compile driver checks every kernel against the primitive interpreter).
#ifndef ORCH_TARGET_H
#define ORCH_TARGET_H

#include "../base/common.h"
#include "../base/strbuf.h"
#include "../candidates/candidates.h"

// The machine kernels are generated and tuned for. Filled by the target's hw_detect; every field
// that changes a measurement goes into the fingerprint, which keys the profile database.
typedef struct HwInfo {
    char target[16];       // "cpu", "cuda"
    char model[128];       // CPU model name / GPU name
    int cores;             // cores the kernels may use (OpenMP threads) / SM count
    int simd_bytes;        // vector register width: 16 (SSE, NEON), 32 (AVX2), 64 (AVX-512)
    bool fma;              // fused multiply-add instructions
    int64_t l1d, l2, l3;   // data cache bytes: per core (l1d, l2), shared (l3); 0 when unknown
    int64_t line;          // cache line bytes
    char compiler[128];    // "gcc 12.2.0" (the C target's system compiler)
    char fingerprint[512]; // one line: target, model, cores, ISA, caches, compiler
} HwInfo;

// The generators' revision. The profile database keys a measurement by its config's desc and
// this number ("DESC gen=N", compile.c), so that an orch whose generated code changed does not
// reuse an older one's times (stop 31: the C MLP chain's epilogue vectorised, 125 -> 25 ms for the
// same config). Raise it with every change to a generator that can change a config's time.
#define ORCH_CODEGEN_REVISION 40

// One point of a kernel's configuration space. The meaning of p[] belongs to the kernel class that
// proposed it (see the class's emitter); desc is its canonical text ("cls=gemm mr=6 nr=16 kc=256
// mc=96 nc=1024 par=n") and, with ORCH_CODEGEN_REVISION, the profile database's config key, so
// equal configs compare equal.
#define KCFG_MAX_PARAMS 12
typedef struct KernelConfig {
    int cls;                      // kernel class (the target's own numbering)
    int64_t p[KCFG_MAX_PARAMS];   // class-specific knobs
    double score;                 // the hardware model's estimate in seconds; lower is better
    char desc[128];
} KernelConfig;

// Sorts n configs by score into out (at most k, duplicates of desc dropped: the first, best
// scored, stays); returns how many. cand is reordered. Shared by the config functions of both
// targets' emitters.
int cgen_sort_configs(KernelConfig *cand, int n, KernelConfig *out, int k);

// The kernel ABI of the C target (the CUDA target has its own launch ABI):
//     void NAME(const void *const *in, void *out);
// in[i] is the dense row-major buffer of candidate input c->inputs[i] (constants included, in
// the candidate's canonical order, so candidates with equal signatures share one kernel); out is the dense buffer of c->output. Kernels
// allocate nothing they do not free, keep no state between calls, and may use OpenMP (the caller
// sets the thread count). Buffers are 64-byte aligned; out never overlaps an input.
typedef void (*CKernelFn)(const void *const *in, void *out);
// A kernel may also export
//     int NAME_prepack(int i, const void *src, void *dst);
// for inputs it reads in its own order rather than row-major (a constant weight reordered once
// at load instead of packed on every call): it returns 1 for such an input i, and then, when
// src and dst are not NULL, writes into dst (tensor_nbytes of the input, not overlapping src)
// the bytes of src reordered; 0 for any other input. Whoever calls NAME passes in[i] = that
// reordered copy for those inputs (ckernel_prepack below; runtime/session.c, the kernel lab).
typedef int (*CPrepackFn)(int input, const void *src, void *dst);
// Name of NAME's prepack entry point ("NAME_prepack") into buf.
void ckernel_prepack_name(const char *kernel, char *buf, size_t n);

typedef struct Target {
    const char *name; // "cpu"
    // Fills hw for this machine (threads: the kernels' thread count, 0 = all cores).
    int (*hw_detect)(HwInfo *hw, int threads, Err *e);
    // Whether emit can generate this candidate. OPAQUE primitives are never generated; the
    // runtime runs them with their reference op.
    bool (*supports)(const PrimGraph *pg, const Candidate *c);
    // Up to k configs, best estimate first; returns how many (>= 1 when supported).
    int (*configs)(const PrimGraph *pg, const Candidate *c, const HwInfo *hw, KernelConfig *out,
                   int k);
    // Appends one function definition named fn to src (helpers it needs are static and named
    // after fn, so many kernels can share one translation unit).
    int (*emit)(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, const char *fn,
                StrBuf *src, Err *e);
    // The text every translation unit starts with (includes, shared inline helpers).
    const char *(*prelude)(void);
} Target;

extern const Target target_cpu;
extern const Target target_cuda;

// Looks a target up by name ("cpu", "cuda"); NULL when there is none of that name.
const Target *target_find(const char *name);

#endif
