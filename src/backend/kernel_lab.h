// The kernel lab's contract, shared by every target (each has its own lab behind its lab_run slot:
// cpu/lab_cpu.c, cuda/cuda_lab.c): jobs (a candidate and a config) are emitted into translation
// units, built in parallel, loaded, run on the tensor values the primitive interpreter computed
// for realistic inputs, compared with the interpreter's output for the candidate's sink, and,
// when they agree, timed (warm-up, then repeats until a time budget, median and spread). A
// kernel that disagrees is never timed. Also the precisions and the checks' tolerances.
// Needs: a verified primitive graph, its candidate set, and every tensor's value
// (prim_interp_values). Guarantees: every job ends with a status and, when LAB_OK, a time.
#ifndef ORCH_KERNEL_LAB_H
#define ORCH_KERNEL_LAB_H

#include "target.h"

// "fp32", "tf32", "fp16", "bf16".
const char *precision_name(Precision p);
// The inverse of precision_name; false for anything else (NULL included).
bool precision_parse(const char *s, Precision *p);

// The relative tolerance of a kernel check (lab_outputs_agree_tol) for a dot product of K terms
// under precision p: 1e-4 for FP32; otherwise 1e-4 + 2u(1 + sqrt(K)/64) with u = 2^-11
// (TF32, FP16) or 2^-8 (BF16) the operands' unit roundoff. Rounding the operands costs at most
// ~0.7u of |ref| + max|ref| whatever K (measured on uniform, one-sided and heavy-tailed random
// operands, K = 16 .. 16384); the sqrt(K) term leaves room for the tensor cores' float32
// accumulation, which truncates and so grows with K.
double precision_tolerance(Precision p, int64_t K);
// The reduction length of LINEAR primitive q: the matmul's inner size, a convolution's
// C/group x kernel size (transposed: an upper bound); 0 for any other primitive.
int64_t lab_linear_k(const PrimGraph *pg, const Prim *q);
// The tolerance of candidate c's check: precision_tolerance(p, K) when it holds a LINEAR (K its
// lab_linear_k; the largest, times sqrt(n) for a chain of n), else 1e-4.
double lab_candidate_tolerance(const PrimGraph *pg, const Candidate *c, Precision p);

typedef enum LabStatus {
    LAB_OK = 0,
    LAB_WRONG,        // ran, but its output disagrees with the interpreter
    LAB_BUILD_FAILED, // emit or compile failed (a code generator bug, reported)
    LAB_SKIPPED, // not run (an earlier failure in its unit, or the caller's before_run said so)
} LabStatus;

typedef struct LabJob {
    int cand; // index into the candidate set
    KernelConfig cfg;
    double tol; // relative tolerance of its check (0: 1e-4, float32's; see
                // lab_candidate_tolerance)
    // results
    LabStatus status;
    double median_s, min_s, spread; // spread = (p90 - min) / min (lab_summarise)
    int reps;
    double load;    // runnable threads on the machine while it was timed (lab_machine_load)
    bool unstable;  // still unstable after LAB_ATTEMPTS timings: a suspect time (lab_summarise)
    int attempts;   // timings taken (1 when the first was stable)
    double max_err; // largest |got - ref| / (|ref| + scale) seen by the check
    int device;     // the device that ran it (a GPU's ordinal); -1 when none did (a build that
                    // failed); the CPU lab leaves it as the caller set it
    char note[256]; // why it failed
} LabJob;

// Where a lab's devices spend their time, summed over devices (seconds): waiting for the program
// of the next kernel to be built, loading modules; and of the checks: marking the kernel pending
// in the profile database before it first runs, uploading inputs, the first run (outputs
// poisoned, launched, waited for), downloading and comparing outputs; and how many inputs were
// uploaded and how many were found already on the device, left there by the job before;
// capturing a library call into the CUDA graph it is timed in.
typedef struct LabSplit {
    double build_wait_s, load_s;
    double pending_s, upload_s, first_s, verify_s, capture_s;
    int64_t uploads, reused;
} LabSplit;

typedef struct LabOptions {
    int jobs;            // parallel compiler processes (0: cores)
    int per_unit;        // kernels per translation unit (0: lab_unit_size; up to 16 C, 32 CUDA)
    double min_time;     // seconds of timed repeats per kernel (0: 0.02)
    int max_reps;        // repeats at most (0: 200)
    bool trust_timings;  // no timing is unstable (none re-taken): CompileOptions.trust_timings
    const char *workdir; // NULL: a temporary directory
    // Called before a kernel first runs (the driver marks it pending in the profile database, so a
    // crash inside the kernel is remembered); a non-zero return skips the kernel.
    int (*before_run)(void *ctx, const LabJob *j);
    // Called when a job has its result (to store it at once) and for progress lines.
    void (*on_result)(void *ctx, const LabJob *j, int done, int total);
    void *ctx;
    // Where set, called with a line for the compile's log (a device left out of the measuring,
    // and why); never for a job's own result.
    void (*on_note)(void *ctx, const char *line);
    // Where set, the wall seconds spent building the jobs' kernels and measuring them (checks and
    // timings on the devices) are added to these (a lab that does not split its time leaves them).
    double *build_s, *measure_s;
    // Where set, the devices' seconds (summed over devices) checking kernels (inputs uploaded,
    // outputs downloaded and compared) and timing them: where the measuring goes.
    double *check_s, *time_s;
    // Where set, where the devices' time went, added to (a lab that does not split it leaves it).
    struct LabSplit *split;
    // When set, the modules the lab built (whole units) are handed over instead of freed:
    // appended to *keep (realloc'd), *n_keep counts them; the caller passes them to the target's
    // build (which may reuse one as the artefact's module, saving a build) and frees them with
    // its lab_modules_free. A target whose lab keeps none leaves them alone.
    void ***keep;
    int *n_keep;
} LabOptions;

// Timing stability. A timing's samples are disturbed upwards only (a descheduled thread, an
// interrupt, a cold cache): the minimum is the least disturbed sample, and a median or p90 far
// above it means the machine, not the kernel, set the time. A timing is unstable when
//   (p90 - min) / min > LAB_MAX_SPREAD, or median / min > LAB_MAX_MEDIAN_RATIO,
//   or the machine's runnable threads exceed the threads the lab itself runs (a busy neighbour).
// The CPU lab times an unstable kernel again (LAB_ATTEMPTS timings in all, LAB_BACKOFF_S times
// the attempt between them) and keeps the least disturbed; one that stays unstable is a suspect
// time: stored, never reused by a later compile, and used at its minimum in this one. The bounds
// sit between what one compile of the d_mlp test model measured on a shared 2-core Xeon VM: 19
// timings undisturbed in their samples (median within 1.09x and p90 within 1.45x of the minimum)
// and 8 that a neighbour disturbed (p90 2.0-3.7x the minimum).
// Both ratios count only past LAB_NOISE_FLOOR_S of absolute excess over the minimum: one timer
// interrupt doubles a 3 us kernel, and a few microseconds either way move no plan, while a
// suspect row is measured again by every later compile (13 of the 39 suspect timings a compile of
// MobileNetV2 left on the 2-core Xeon VM were pointwise kernels under this floor).
#define LAB_MAX_SPREAD 0.5
#define LAB_MAX_MEDIAN_RATIO 1.2
#define LAB_NOISE_FLOOR_S 5e-6
#define LAB_ATTEMPTS 3
#define LAB_BACKOFF_S 0.05

typedef struct LabTiming {
    int n; // samples
    double min_s, median_s, p90_s, p95_s;
    double spread; // (p90 - min) / min (0 when min is 0)
    double load;   // as given
    bool unstable;
    char why[96]; // what made it unstable ("" when stable)
} LabTiming;

// Summarises n samples (seconds; sorted in place) timed while the machine had load runnable
// threads (a negative load: unknown, never unstable for it) with threads of its own (0: no load
// rule), and classifies the timing as above.
void lab_summarise(double *samples, int n, double load, int threads, LabTiming *t);
// The machine's runnable threads now: the running count of /proc/loadavg (the reader and any
// spinning thread of its own included), else getloadavg's 1-minute average; -1 when neither can
// be read. Unlike the averages it has no memory, so a quiet machine reads quiet at once.
double lab_machine_load(void);
// Test hook: a load lab_machine_load returns instead of reading the machine (negative: none).
void lab_set_load_override(double load);

// Kernels per translation unit when the caller sets none: at most `cap`, and few enough that
// each of `compilers` parallel compilers (0: the cores) gets a unit. A unit pays the compiler's
// start and the prelude once, but a lab call waits for its largest unit: at 32 kernels a unit,
// the 100-odd kernels of a tuning round kept 4 of an H200 host's 16 cores busy.
int lab_unit_size(int n, int compilers, int cap);

// ---- measuring on several devices of one machine ----
// A lab may spread its jobs over several identical devices (the GPUs of one host): built once,
// then each device's worker takes the next job from one queue, so a device that finishes early
// takes more and the N devices take about 1/N of the time. Only devices whose fingerprint equals
// the target device's measure: a time is then the same whichever of them took it, and the
// profile database keeps one row per (signature, fingerprint, config) as with one device.
#define LAB_MAX_DEVICES 16

// Which devices measure: orch compile --gpus all|N|LIST.
typedef struct LabDeviceSpec {
    int count;                 // 0: every identical device; else at most this many
    int n_list;                // > 0: exactly these ordinals (count is then 0)
    int list[LAB_MAX_DEVICES]; // in the order given, no repeats
} LabDeviceSpec;

// Parses "all" (NULL too), a count N >= 1, or a comma-separated list of ordinals ("0,2") into
// *spec. ST_USAGE naming the text and the expected forms for anything else (a repeat, a negative
// ordinal, more than LAB_MAX_DEVICES entries, 0 as a count).
int lab_devices_parse(const char *s, LabDeviceSpec *spec, Err *e);

// The devices that measure, from n_dev devices whose fingerprints are fp[0..n_dev) (a NULL entry:
// a device that could not be read), for the target device `home` (its fingerprint fp[home]):
//   all: home, then every other device with home's fingerprint in ordinal order;
//   N:   the first N of those (fewer identical devices than N: all of them, said in the note);
//   a list: the listed devices, home first, which must include home (the device the compile
//        targets and checks its artefact on) and exist; a listed device with another fingerprint
//        is left out.
// At most LAB_MAX_DEVICES. Writes the ordinals to chosen (home first) and their count (>= 1) to
// *n_chosen; note gets one line naming every device left out and why ("" when none was).
// ST_USAGE for a list without home or with an ordinal the machine lacks.
int lab_devices_select(const LabDeviceSpec *spec, int n_dev, const char *const *fp, int home,
                       int *chosen, int *n_chosen, char *note, size_t note_n, Err *e);

// The order jobs are measured in, shared by the workers of several devices: items in one
// sequence, each taken once, in sequence order, by whichever worker asks next, so a device that
// finishes its job early takes the next one and N equal devices each take about 1/N. With one
// worker the items are taken exactly in sequence order, so one device measures as the
// single-device lab always did. The caller serialises calls (the lab holds a mutex).
typedef struct LabQueue {
    int n;
    int next; // every item before it is taken
} LabQueue;

void lab_queue_init(LabQueue *q, int n);
// The next item, marked taken; -1 when none is left.
int lab_queue_take(LabQueue *q);

// The function name a job's kernel gets in its unit: "orch_k<signature hex>_<config hash hex>".
void lab_kernel_name(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, char *buf,
                     size_t n);

// Runs the jobs on machine m's target (its lab_run slot). Errors are only for the lab itself (work
// directory, memory, no device); a kernel's own failure is its job's status.
int lab_run(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs, void **values,
            LabJob *jobs, int n, const LabOptions *opt, Err *e);

// Compares a kernel's output with the reference (same dtype and element count): the tolerance of
// the checks, |got - ref| <= 1e-4 * |ref| + 1e-4 * max|ref| for floats, equality for integers.
// Returns true when they agree; *max_err gets the largest error relative to that bound.
bool lab_outputs_agree(DType dt, int64_t n, const void *got, const void *ref, double *max_err,
                       char *why, size_t why_n);
// The same with |got - ref| <= tol * |ref| + tol * max|ref| for float32 (tol <= 0: 1e-4; float16
// and bfloat16 outputs keep their own wider bounds when those are larger).
bool lab_outputs_agree_tol(DType dt, int64_t n, const void *got, const void *ref, double tol,
                           double *max_err, char *why, size_t why_n);

#endif
