// What every target's kernel lab shares (kernel_lab.h): kernel names, precisions, the
// tolerances of the checks, the timings' summary and stability rule with the machine's load, and
// which devices of a machine measure (--gpus) with the queue their workers share.
// The labs themselves are the targets' (cpu/lab_cpu.c, cuda/cuda_lab.c).
#include "kernel_lab.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t fnv32(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

void lab_kernel_name(const PrimGraph *pg, const Candidate *c, const KernelConfig *cfg, char *buf,
                     size_t n) {
    (void)pg;
    snprintf(buf, n, "orch_k%016llx_%08x", (unsigned long long)c->signature, fnv32(cfg->desc));
}

const char *precision_name(Precision p) {
    switch (p) {
    case PREC_TF32: return "tf32";
    case PREC_FP16: return "fp16";
    case PREC_BF16: return "bf16";
    default: return "fp32";
    }
}

bool precision_parse(const char *s, Precision *p) {
    for (int i = PREC_FP32; s && i <= PREC_BF16; i++)
        if (strcmp(s, precision_name((Precision)i)) == 0) {
            *p = (Precision)i;
            return true;
        }
    return false;
}

double precision_tolerance(Precision p, int64_t K) {
    if (p == PREC_FP32)
        return 1e-4;
    double u = p == PREC_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -11);
    return 1e-4 + 2.0 * u * (1.0 + sqrt((double)(K > 1 ? K : 1)) / 64.0);
}

int64_t lab_linear_k(const PrimGraph *pg, const Prim *q) {
    if (q->kind != PRIM_LINEAR || q->n_in < 2 || q->in[0] < 0 || q->in[1] < 0)
        return 0;
    const Tensor *a = pg->tensors[q->in[0]], *w = pg->tensors[q->in[1]];
    if (q->lin.op == LIN_MATMUL)
        return a->rank > 0 ? a->dims[a->rank - 1] : 1;
    // W [OC, C/G, k...]; transposed W [C, OC/G, k...]: per output at most C/G x k... terms.
    int64_t k = q->lin.op == LIN_CONV ? w->dims[1] : a->dims[1] / ORCH_MAX(q->lin.group, 1);
    for (int d = 2; d < w->rank; d++)
        k *= w->dims[d];
    return k;
}

double lab_candidate_tolerance(const PrimGraph *pg, const Candidate *c, Precision p) {
    if (p == PREC_FP32)
        return 1e-4;
    int64_t K = 0;
    int n = 0;
    for (int i = 0; i < c->n_prims; i++) {
        int64_t k = lab_linear_k(pg, pg->prims[c->prims[i]]);
        K = ORCH_MAX(K, k);
        n += k > 0;
    }
    // Chained products (an MLP chain kernel) add their roundings.
    return K > 0 ? precision_tolerance(p, K) * sqrt((double)n) : 1e-4;
}

bool lab_outputs_agree(DType dt, int64_t n, const void *got, const void *ref, double *max_err,
                       char *why, size_t why_n) {
    return lab_outputs_agree_tol(dt, n, got, ref, 1e-4, max_err, why, why_n);
}

// lab_outputs_agree_tol's rule for float32, read directly rather than element by element
// through elem_get_f64: a tuning checks every config's output, and a 16 MiB attention score
// tensor took about 40 ms a check that way.
static bool agree_f32(int64_t n, const float *got, const float *ref, double tol, double *max_err,
                      char *why, size_t why_n) {
    float scale = 0;
    for (int64_t i = 0; i < n; i++) {
        float r = fabsf(ref[i]);
        if (r <= FLT_MAX && r > scale) // finite (NaN compares false)
            scale = r;
    }
    if (!(tol > 0))
        tol = 1e-4;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        if (g == r) // exact, infinities included
            continue;
        if (isnan(r) && isnan(g))
            continue;
        double bound = tol * fabs(r) + tol * (double)scale + 1e-30;
        double err = fabs(g - r) / bound;
        if (!(err <= 1.0)) {
            snprintf(why, why_n, "element %lld is %.9g, the interpreter says %.9g (bound %.3g)",
                     (long long)i, g, r, bound);
            *max_err = isnan(err) ? INFINITY : err;
            return false;
        }
        if (err > worst)
            worst = err;
    }
    *max_err = worst;
    return true;
}

bool lab_outputs_agree_tol(DType dt, int64_t n, const void *got, const void *ref, double tol,
                           double *max_err, char *why, size_t why_n) {
    *max_err = 0;
    if (!dtype_is_float(dt)) {
        for (int64_t i = 0; i < n; i++) {
            int64_t g = elem_get_i64(dt, got, i), r = elem_get_i64(dt, ref, i);
            if (g != r) {
                snprintf(why, why_n, "element %lld is %lld, the interpreter says %lld",
                         (long long)i, (long long)g, (long long)r);
                *max_err = INFINITY;
                return false;
            }
        }
        return true;
    }
    if (dt == DT_FLOAT)
        return agree_f32(n, got, ref, tol, max_err, why, why_n);
    double scale = 0;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs(elem_get_f64(dt, ref, i));
        if (isfinite(r) && r > scale)
            scale = r;
    }
    // Half types carry 8 or 11 significant bits: their own rounding dominates.
    if (!(tol > 0))
        tol = 1e-4;
    tol = ORCH_MAX(tol, dt == DT_FLOAT16 ? 2e-3 : dt == DT_BFLOAT16 ? 1.6e-2 : 0.0);
    for (int64_t i = 0; i < n; i++) {
        double g = elem_get_f64(dt, got, i), r = elem_get_f64(dt, ref, i);
        if (isnan(r) && isnan(g))
            continue;
        if (isinf(r) && g == r)
            continue;
        double bound = tol * fabs(r) + tol * scale + 1e-30;
        double err = fabs(g - r) / bound;
        if (!(err <= 1.0)) {
            snprintf(why, why_n, "element %lld is %.9g, the interpreter says %.9g (bound %.3g)",
                     (long long)i, g, r, bound);
            *max_err = isnan(err) ? INFINITY : err;
            return false;
        }
        if (err > *max_err)
            *max_err = err;
    }
    return true;
}

int lab_run(const TargetMachine *m, const PrimGraph *pg, const CandidateSet *cs, void **values,
            LabJob *jobs, int n, const LabOptions *opt, Err *e) {
    return m->target->lab_run(m, pg, cs, values, jobs, n, opt, e);
}

static int cmp_sample(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// The sample at quantile q of n sorted samples (nearest rank, never past the last).
static double quantile(const double *s, int n, double q) {
    int i = (int)ceil(q * n) - 1;
    return s[ORCH_MIN(ORCH_MAX(i, 0), n - 1)];
}

void lab_summarise(double *samples, int n, double load, int threads, LabTiming *t) {
    memset(t, 0, sizeof *t);
    t->n = n;
    t->load = load;
    if (n <= 0)
        return;
    qsort(samples, (size_t)n, sizeof(double), cmp_sample);
    t->min_s = samples[0];
    t->median_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    t->p90_s = quantile(samples, n, 0.9);
    t->p95_s = quantile(samples, n, 0.95);
    t->spread = t->min_s > 0 ? (t->p90_s - t->min_s) / t->min_s : 0;
    if (t->spread > LAB_MAX_SPREAD && t->p90_s - t->min_s > LAB_NOISE_FLOOR_S)
        snprintf(t->why, sizeof t->why, "p90 %.2fx its minimum", 1 + t->spread);
    else if (t->min_s > 0 && t->median_s > LAB_MAX_MEDIAN_RATIO * t->min_s &&
             t->median_s - t->min_s > LAB_NOISE_FLOOR_S)
        snprintf(t->why, sizeof t->why, "median %.2fx its minimum", t->median_s / t->min_s);
    else if (threads > 0 && load > threads)
        snprintf(t->why, sizeof t->why, "%.0f runnable threads for %d of its own", load, threads);
    t->unstable = t->why[0] != 0;
}

static double load_override = -1;

void lab_set_load_override(double load) {
    load_override = load;
}

int lab_unit_size(int n, int compilers, int cap) {
    if (compilers <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        compilers = c > 0 ? (int)c : 1;
    }
    int per = (n + compilers - 1) / compilers;
    return ORCH_MAX(1, ORCH_MIN(cap, per));
}

double lab_machine_load(void) {
    if (load_override >= 0)
        return load_override;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        double a, b, c;
        long running, total;
        int got = fscanf(f, "%lf %lf %lf %ld/%ld", &a, &b, &c, &running, &total);
        fclose(f);
        if (got == 5 && running >= 0)
            return (double)running;
    }
    double avg[1];
    return getloadavg(avg, 1) == 1 ? avg[0] : -1;
}

// ---- several devices ----

#define DEVICES_FORMS "expects all, a count of GPUs (1 or more) or a list of ordinals (0,1,3)"

int lab_devices_parse(const char *s, LabDeviceSpec *spec, Err *e) {
    memset(spec, 0, sizeof *spec);
    if (!s || strcmp(s, "all") == 0)
        return ST_OK;
    if (!*s)
        return err_set(e, ST_USAGE, "--gpus " DEVICES_FORMS ", got an empty value");
    bool list = strchr(s, ',') != NULL;
    const char *p = s;
    int n = 0;
    for (;;) {
        if (*p < '0' || *p > '9')
            return err_set(e, ST_USAGE, "--gpus " DEVICES_FORMS ", got '%s'", s);
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v > 1 << 20)
            return err_set(e, ST_USAGE, "--gpus: '%s' is out of range", s);
        if (!list) {
            if (*end)
                return err_set(e, ST_USAGE, "--gpus " DEVICES_FORMS ", got '%s'", s);
            if (v < 1)
                return err_set(
                    e, ST_USAGE,
                    "--gpus 0: at least one GPU measures (--gpus 1: the target's alone)");
            spec->count = (int)ORCH_MIN(v, (long)LAB_MAX_DEVICES);
            return ST_OK;
        }
        for (int i = 0; i < n; i++)
            if (spec->list[i] == (int)v)
                return err_set(e, ST_USAGE, "--gpus '%s' names GPU %ld twice", s, v);
        if (n == LAB_MAX_DEVICES)
            return err_set(e, ST_USAGE, "--gpus '%s' names more than %d GPUs", s, LAB_MAX_DEVICES);
        spec->list[n++] = (int)v;
        if (*end == '\0')
            break;
        if (*end != ',')
            return err_set(e, ST_USAGE, "--gpus " DEVICES_FORMS ", got '%s'", s);
        p = end + 1;
    }
    spec->n_list = n;
    return ST_OK;
}

// Appends ", GPU i (why)" or "GPU i (why)" to note.
static void note_left_out(char *note, size_t n, int ordinal, const char *why) {
    size_t len = strlen(note);
    if (len + 1 < n)
        snprintf(note + len, n - len, "%sGPU %d (%s)", len ? ", " : "", ordinal, why);
}

int lab_devices_select(const LabDeviceSpec *spec, int n_dev, const char *const *fp, int home,
                       int *chosen, int *n_chosen, char *note, size_t note_n, Err *e) {
    ORCH_ASSERT(home >= 0 && home < n_dev && fp[home]);
    char left[768] = "", fewer[96] = "";
    int n = 0;
    chosen[n++] = home;
    if (spec->n_list > 0) {
        bool has_home = false;
        for (int i = 0; i < spec->n_list; i++)
            has_home = has_home || spec->list[i] == home;
        for (int i = 0; i < spec->n_list && has_home; i++)
            if (spec->list[i] >= n_dev)
                return err_set(e, ST_USAGE,
                               "--gpus names GPU %d, but this machine has %d (ordinals 0 to %d)",
                               spec->list[i], n_dev, n_dev - 1);
        if (!has_home)
            return err_set(e, ST_USAGE,
                           "--gpus leaves out GPU %d, the device orch compiles for and checks the "
                           "artefact on; list it too (CUDA_VISIBLE_DEVICES chooses which GPU is "
                           "device %d)",
                           home, home);
        for (int i = 0; i < spec->n_list; i++) {
            int o = spec->list[i];
            if (o == home)
                continue;
            if (!fp[o] || strcmp(fp[o], fp[home]) != 0)
                note_left_out(left, sizeof left, o,
                              fp[o] ? "another kind of device" : "unreadable");
            else
                chosen[n++] = o;
        }
    } else {
        int want = spec->count > 0 ? spec->count : LAB_MAX_DEVICES;
        int same = 1;
        for (int o = 0; o < n_dev; o++) {
            if (o == home)
                continue;
            if (!fp[o] || strcmp(fp[o], fp[home]) != 0) {
                note_left_out(left, sizeof left, o,
                              fp[o] ? "another kind of device" : "unreadable");
                continue;
            }
            same++;
            if (n < want)
                chosen[n++] = o;
            else if (spec->count == 0)
                note_left_out(left, sizeof left, o, "past the most a lab uses");
        }
        if (spec->count > same)
            snprintf(fewer, sizeof fewer, "%d GPUs asked, %d identical to GPU %d", spec->count,
                     same, home);
    }
    *n_chosen = n;
    if (note_n)
        snprintf(note, note_n, "%s%s%s%s", left[0] ? "left out: " : "", left,
                 left[0] && fewer[0] ? "; " : "", fewer);
    return ST_OK;
}

void lab_queue_init(LabQueue *q, int n) {
    q->n = n;
    q->next = 0;
}

int lab_queue_take(LabQueue *q) {
    return q->next < q->n ? q->next++ : -1;
}
