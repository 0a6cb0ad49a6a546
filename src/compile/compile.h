// The compile driver: the whole pipeline in one place, in order:
//   import → infer/fold → fission → clean-up → candidates → tune (configs from the hardware
//   model, look-ups in the profile database, the kernel lab for what is missing) → solve (BLP on
//   measured costs) → tune the chosen kernels' other configs and solve again → emit the chosen
//   kernels into one shared object → plan → check the plan end to end → artefact.
// Several shape sets (CompileOptions.shape_sets) run the pipeline once per set, on one profile
// database (a kernel shared by two sets is measured once), and write one artefact holding the
// model once and a plan per set.
// Needs: an ONNX model and a target. Guarantees: an artefact whose outputs matched the primitive
// interpreter on the compile's random inputs (every shape set's), or an error naming the stage
// and the cause.
#ifndef ORCH_COMPILE_H
#define ORCH_COMPILE_H

#include "../ir/graph.h"
#include "../plan/artifact.h"
#include "../backend/kernel_lab.h"
#include "../prim/prim.h"

#include <stdio.h>

// Import shared by the compiler and the runtime (which re-imports an artefact's model): ONNX
// bytes → folded graph → primitives → clean-up, deterministic for equal inputs and options.
// base_dir: where external data lives (NULL: none allowed).
int compile_import(const void *bytes, size_t size, const char *name, const char *base_dir,
                   const char *input_shapes, bool attention_rewrite, Graph **g, PrimGraph **pg,
                   Err *e);

// Channels-last layout pairs for the convolutions under half storage (orch compile --layout).
typedef enum CompileLayout {
    COMPILE_LAYOUT_AUTO = 0, // where cuDNN loads, to read them ("auto")
    COMPILE_LAYOUT_NCHW,     // never ("nchw")
    COMPILE_LAYOUT_NHWC,     // even without cuDNN ("nhwc")
} CompileLayout;

// "auto", "nchw", "nhwc" → *out; false for anything else.
bool compile_layout_parse(const char *s, CompileLayout *out);

typedef struct CompileOptions {
    const char *target;       // "cpu" (NULL: cpu)
    const char *precision;    // linear kernels' arithmetic: "fp32" (NULL: fp32), "tf32", "fp16",
                              // "bf16" (those three: the CUDA target only; kernel_lab.h's
                              // Precision)
    const char *db_path;      // profile database (NULL: the default file)
    const char *input_shapes; // as for orch run
    bool attention_rewrite;
    bool half_storage; // under fp16/bf16 (CUDA): tensors stored in that type (pass_store_reduced)
    bool no_mlp_chains;   // no MLP chain candidates: the layers' kernels compete alone
    bool no_attention;    // no fused attention candidates
    CompileLayout layout; // channels-last layouts; anything but auto needs half_storage
    int explain;          // on progress after the solve, why each linear primitive runs where
                          // it does: 0 no, 1 its kernel and each family's best candidate, 2 also
                          // every candidate computing it with every config's time
    bool strict; // a kernel the target does not generate (an interpreter would run it) is an
                 // error (ST_UNSUPPORTED) after the summary, and no artefact is written
    bool trust_timings; // every CPU timing taken as measured: none re-timed or stored suspect
    double check_tol;   // the end-to-end check's relative bound (0: from the precision and the
                        // model's depth, e2e_tolerance; 1e-4 under fp32)
    double budget_s;    // seconds of tuning at most (0: no bound): what is left unmeasured then
                        // is said in the summary; every single-primitive kernel's first config
                        // is measured whatever the budget, so that a plan exists
    int threads;              // kernel threads (0: every core this process may use)
    const char *gpus; // the GPUs that measure (cuda): "all" (NULL too: every GPU of the target
                      // device's kind), a count, or a list of ordinals with 0 ("0,2"); the
                      // plan does not depend on it, only the tuning's wall time
    int top_k;                // configs measured per chosen kernel (0: 8)
    int jobs;                 // parallel compiler processes (0: cores)
    double time_limit;        // BLP solver limit in seconds (0: its default)
    uint64_t seed;            // random inputs for checks and timing
    FILE *progress;           // progress lines (NULL: quiet)
    // Several shape sets, each as input_shapes (which must then be NULL): one plan per set in
    // one artefact (at most ARTIFACT_MAX_PLANS, the runtime picks by the inputs' shapes). 0 or 1
    // set: as input_shapes.
    const char *const *shape_sets;
    int n_shape_sets;
} CompileOptions;

// One shape set's line of a compile of several (CompileReport.sets).
typedef struct CompileSetReport {
    char shapes[512];    // every input's shape, as the artefact records it
    int kernels, interp; // launches; of them run by an interpreter
    double predicted_s, not_generated_share;
    int64_t arena_bytes;
    uint64_t selection_digest;
} CompileSetReport;

typedef struct CompileReport {
    int prims, candidates, signatures;     // the graph and its candidates
    int generated, rejected;               // candidates the target generates / refused
    int interp;                            // kernels of the selection an interpreter runs
    int measured, looked_up, wrong, failed; // kernel configs measured now / found in the database / rejected
    int unstable;  // of those measured, timings that stayed unstable (stored suspect)
    int timed_once; // of those, timed once: the machine had stayed busy for several kernels
    int budget_skipped; // kernel configs --budget left unmeasured (0: the budget held)
    int budget_dropped; // of those, fused kernels that never got a first config (left out)
    double budget_s;    // the --budget the compile ran under (0: none)
    int resuspect; // suspect timings in the database measured again rather than reused
    int kernels;                           // launches of the plan
    double predicted_s;                    // the selection's measured total
    // The kernels not generated (interp: an interpreter runs them): their share of predicted_s
    // and one line per op (fallbacks.h's groups, cut at the buffer's end).
    double not_generated_share;
    char not_generated_lines[2048];
    bool refused; // strict mode refused the selection: no plan, no artefact
    int64_t arena_bytes, intermediate_bytes; // planned arena vs all intermediates summed
    double t_import, t_candidates, t_tune, t_solve, t_build, t_check, t_total; // seconds per stage
    // The devices the lab measured on (GPUs; 0 where the host measures: the CPU target), their
    // ordinals, and the configs each measured in this compile (by position in lab_device).
    int lab_devices;
    int lab_device[16];
    int lab_device_measured[16];
    double t_lab_build, t_lab_measure; // of t_tune: the lab building kernels, and measuring them
    // Of the measuring, the device seconds spent checking kernels (inputs up, outputs down and
    // compared with the reference) and timing them (0: a lab that does not split it).
    double t_lab_check, t_lab_time;
    LabSplit lab_split; // where t_lab_check went
                                       // on its devices (0 where the lab does not say: the CPU)
    double max_err;                        // the end-to-end check's worst error (relative to its bound)
    const char *precision;                 // precision_name of the compile's precision
    double tol, check_tol;                 // tolerances: per kernel at the largest K, end to end
    int64_t tol_k;                         // that largest K (0: no linear primitive)
    int linear, reduced;                   // chosen kernels holding a LINEAR / of them computing
                                           // in the reduced precision (their config says so)
    uint64_t selection_digest;             // hash of the chosen kernels and configs, in order
    // Configs of reduced exactness (KCFG_REDUCED_EXACTNESS) left out: inexact_kernels of them
    // were in a plan that missed the end-to-end check by inexact_err (its first error past its
    // bound, relative to it); inexact_what names their kinds ("v=winograd m=4"); inexact_cached:
    // the profile database recorded that outcome, so they were left out from the start. 0: none.
    int inexact_kernels;
    double inexact_err;
    char inexact_what[64];
    bool inexact_cached;
    bool module_reused; // the kernels' module came from the database (an earlier compile built it)
    const char *storage;                   // reduced storage type ("float16"...), NULL: float32
    int retyped;                           // tensors stored in it
    // Several shape sets: n_sets lines (the counts and times above are the sums over the sets,
    // the plan's figures the last set's); 0 otherwise.
    int n_sets;
    CompileSetReport sets[ARTIFACT_MAX_PLANS];
} CompileReport;

// Compiles the model at onnx_path into the artefact out_path.
int compile_model(const char *onnx_path, const CompileOptions *opt, const char *out_path,
                  CompileReport *rep, Err *e);

// Prints the summary lines `orch compile` ends with.
void compile_report_print(const CompileReport *rep, FILE *f);

#endif
