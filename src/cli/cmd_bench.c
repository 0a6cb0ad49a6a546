// `orch bench MODEL.orch|MODEL.onnx`: latency statistics of a compiled model and a per-kernel
// table (time, share, the ONNX nodes each kernel covers), as text and optionally JSON. An ONNX
// model is compiled first (compile's flags apply) into a temporary artefact. An artefact of
// several shape sets is benched on one: --shapes N (as orch info numbers them), else the one the
// -i files' shapes match, else the first. Inputs come from -i NAME=FILE (.npy or .pb, as orch
// run's), the others are random; a name the model lacks is a usage error naming its inputs.
// Latency runs are timed without per-kernel clocks; the kernel table comes from separate
// profiled runs, so the clocks do not inflate the latency figures. A warning says when the
// machine was busy (the runs' spread or the machine's runnable threads: kernel_lab.h's rule).
#include "cmd_bench.h"

#include "../backend/kernel_lab.h"
#include "../compile/compile.h"
#include "../compile/fallbacks.h"
#include "../plan/artifact.h"
#include "../runtime/npy.h"
#include "../runtime/session.h"
#include "cmd_compile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

// This process's peak resident set in bytes: VmHWM of /proc/self/status (Linux: its address
// space's high-water mark, which starts afresh at execve) where readable, else getrusage's
// ru_maxrss. (ru_maxrss outlives execve: run by a process holding 800 MB, such as a Python
// benchmark driver with ONNX Runtime loaded, orch bench reported those 800 MB as its own.)
static long long peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long long kb = -1;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "VmHWM:", 6) == 0) {
                kb = strtoll(line + 6, NULL, 10);
                break;
            }
        fclose(f);
        if (kb > 0)
            return kb * 1024;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long long)ru.ru_maxrss * 1024;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p) {
    if (n == 0)
        return 0;
    double pos = p * (n - 1);
    int lo = (int)floor(pos), hi = (int)ceil(pos);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

static int bench_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "orch bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr,
            "\nusage: orch bench MODEL.orch|MODEL.onnx [--iters N] [--warmup N] [--threads N]"
            " [--json FILE]\n           [--fixed-threads] [--shapes N] [-i NAME=FILE]...\n"
            "           [compile options for an ONNX model: --db FILE --top-k K --input-shapes "
            "... --precision P]\n");
    return ST_USAGE;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

typedef struct KernelRow {
    int launch;
    double median;
} KernelRow;

static int cmp_row(const void *a, const void *b) {
    const KernelRow *x = a, *y = b;
    return x->median < y->median ? 1 : x->median > y->median ? -1 : x->launch - y->launch;
}

// One -i NAME=FILE and the tensor read from FILE.
typedef struct BenchInput {
    char *name;
    const char *path;
    HostTensor t;
} BenchInput;

static void inputs_free(BenchInput *in, int n) {
    for (int i = 0; i < n; i++) {
        free(in[i].name);
        host_tensor_free(&in[i].t);
    }
    free(in);
}

static bool same_shape(const Tensor *t, const HostTensor *h) {
    bool same = h->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = h->dims[d] == t->dims[d];
    return same;
}

// Every -i names an input of pg with its dtype and shape (a typo never benches random values).
static int check_inputs(const PrimGraph *pg, const BenchInput *in, int n, const char *model,
                        Err *e) {
    for (int i = 0; i < n; i++) {
        const Tensor *t = NULL;
        for (int j = 0; j < pg->n_inputs && !t; j++)
            if (strcmp(pg->tensors[pg->inputs[j]]->name, in[i].name) == 0)
                t = pg->tensors[pg->inputs[j]];
        if (!t) {
            StrBuf names;
            sb_init(&names);
            for (int j = 0; j < pg->n_inputs; j++)
                sb_printf(&names, "%s'%s'", j ? ", " : "", pg->tensors[pg->inputs[j]]->name);
            int rc = err_set(e, ST_USAGE, "-i %s: %s has no input named '%s' (its inputs: %s)",
                             in[i].name, model, in[i].name, pg->n_inputs ? names.s : "none");
            sb_free(&names);
            return rc;
        }
        if (in[i].t.dtype != t->dtype)
            return err_set(e, ST_INVALID, "input '%s' from %s is %s, the model expects %s", t->name,
                           in[i].path, dtype_name(in[i].t.dtype), dtype_name(t->dtype));
        if (!same_shape(t, &in[i].t)) {
            char s1[128], s2[128];
            return err_set(e, ST_INVALID, "input '%s' from %s has shape %s; %s was compiled for %s",
                           t->name, in[i].path,
                           shape_str(in[i].t.dims, in[i].t.rank, s1, sizeof s1), model,
                           tensor_shape_str(t, s2, sizeof s2));
        }
    }
    return ST_OK;
}

int cli_bench_main(int argc, char **argv) {
    int iters = 100, warmup = 10, threads = 0, shape_set = 0;
    bool fixed_threads = false;
    const char *json = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0, n_files = 0;
    BenchInput *files = calloc((size_t)argc + 1, sizeof *files);
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--fixed-threads") == 0) {
            fixed_threads = true;
            continue;
        }
        if (strcmp(s, "-i") == 0 || strcmp(s, "--input") == 0) {
            const char *v = i + 1 < argc ? argv[++i] : NULL;
            const char *eq = v ? strrchr(v, '=') : NULL;
            if (!eq || eq == v || !eq[1]) {
                free(rest);
                inputs_free(files, n_files);
                return bench_usage("%s expects NAME=FILE", s);
            }
            files[n_files].name = strndup(v, (size_t)(eq - v));
            files[n_files++].path = eq + 1;
            continue;
        }
        bool mine = strcmp(s, "--iters") == 0 || strcmp(s, "--warmup") == 0 ||
                    strcmp(s, "--json") == 0 || strcmp(s, "--shapes") == 0;
        if (!mine) {
            rest[nrest++] = argv[i];
            if (strcmp(s, "--threads") == 0 && i + 1 < argc) {
                threads = atoi(argv[i + 1]);
                rest[nrest++] = argv[++i];
            }
            continue;
        }
        if (i + 1 == argc) {
            free(rest);
            inputs_free(files, n_files);
            return bench_usage("%s needs a value", s);
        }
        const char *v = argv[++i];
        if (strcmp(s, "--json") == 0) {
            json = v;
            continue;
        }
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (strcmp(s, "--shapes") == 0) {
            if (end == v || *end || errno || n < 1 || n > ARTIFACT_MAX_PLANS) {
                free(rest);
                inputs_free(files, n_files);
                return bench_usage("--shapes expects a shape set's number (1 to 16, as orch "
                                   "info lists them), got '%s'",
                                   v);
            }
            shape_set = (int)n;
            continue;
        }
        if (end == v || *end || errno || n < (strcmp(s, "--iters") == 0 ? 1 : 0) || n > 1000000) {
            free(rest);
            inputs_free(files, n_files);
            return bench_usage("bad count '%s' (--iters 1..1000000, --warmup 0..1000000)", v);
        }
        if (strcmp(s, "--iters") == 0)
            iters = (int)n;
        else
            warmup = (int)n;
    }
    CompileOptions co;
    const char *model, *out;
    bool quiet;
    int rc = cli_compile_args(nrest, rest, &co, &model, &out, &quiet, false);
    free(rest);
    if (rc) {
        inputs_free(files, n_files);
        return rc;
    }

    Err e = {0};
    // The files first: a bad one is reported before a compile.
    for (int i = 0; i < n_files && rc == ST_OK; i++)
        rc = tensor_file_read(files[i].path, &files[i].t, &e);
    if (rc) {
        fprintf(stderr, "orch: error: %s\n", e.msg);
        inputs_free(files, n_files);
        return rc;
    }
    char tmp_path[4096] = "";
    const char *art_path = model;
    bool is_art = artifact_probe(model); // else the compile below reads it as ONNX
    double compile_s = 0;
    if (!is_art) {
        // An ONNX model: compile it first, into -o or a temporary file.
        if (out)
            snprintf(tmp_path, sizeof tmp_path, "%s", out);
        else {
            const char *tmp = getenv("TMPDIR");
            snprintf(tmp_path, sizeof tmp_path, "%s/orch-bench-%d.orch", tmp && *tmp ? tmp : "/tmp",
                     (int)getpid());
        }
        co.progress = quiet ? NULL : stderr;
        CompileReport rep;
        rc = compile_model(model, &co, tmp_path, &rep, &e);
        if (rc) {
            if (rep.refused) // --strict: the summary names the kernels not generated
                compile_report_print(&rep, stdout);
            fflush(stdout);
            fprintf(stderr, "orch: error: %s\n", e.msg);
            inputs_free(files, n_files);
            return rc;
        }
        compile_s = rep.t_total;
        printf("compiled %s in %.2f s\n", model, compile_s);
        art_path = tmp_path;
    }

    ArtifactContents ac = {0};
    Session *s = NULL;
    rc = artifact_read(art_path, &ac, &e);
    HwInfo hw;
    const Target *t = rc ? NULL : target_find(ac.h.target);
    if (rc == ST_OK && !t)
        rc = err_set(&e, ST_UNSUPPORTED, "%s was compiled for target '%s', which this orch lacks",
                     art_path, ac.h.target);
    if (rc == ST_OK)
        rc = target_detect(t, ac.h.threads, &hw, &e);
    SessionOptions so = {.threads = threads, .fixed_threads = fixed_threads};
    if (rc == ST_OK)
        rc = session_create(&ac, &hw, &so, &s, &e);
    if (!is_art && !out)
        remove(tmp_path);
    Session *all = s; // every shape set's; s: the one benched
    const char *name = art_path == tmp_path ? model : art_path;
    if (rc == ST_OK && shape_set > session_num_plans(all))
        rc = err_set(&e, ST_USAGE, "--shapes %d: %s serves %d shape set%s", shape_set, name,
                     session_num_plans(all), session_num_plans(all) == 1 ? "" : "s");
    // The plan: --shapes N's, else the first whose input shapes the -i files have, else the first
    // (whose shapes the check below then names).
    int plan_k = shape_set ? shape_set - 1 : -1;
    for (int k = 0; rc == ST_OK && plan_k < 0 && k < session_num_plans(all); k++) {
        Err ignored = {0};
        if (check_inputs(session_graph(session_for_plan(all, k)), files, n_files, name, &ignored) ==
            ST_OK)
            plan_k = k;
    }
    if (plan_k < 0)
        plan_k = 0;
    if (rc == ST_OK)
        rc = check_inputs(session_graph(session_for_plan(all, plan_k)), files, n_files, name, &e);
    if (rc) {
        fprintf(stderr, "orch: error: %s\n", e.msg);
        session_free(all);
        artifact_contents_free(&ac);
        inputs_free(files, n_files);
        return rc;
    }
    s = session_for_plan(all, plan_k);
    char shapes_text[1024] = "";
    session_plan_shapes(all, plan_k, shapes_text, sizeof shapes_text);
    if (session_num_plans(all) > 1)
        printf("shape set %d of %d: %s%s\n", plan_k + 1, session_num_plans(all), shapes_text,
               shape_set || n_files ? "" : " (--shapes N benches another)");

    // Inputs: the -i files, the others random values like orch run's (floats in [-1, 1), small
    // integers).
    const PrimGraph *pg = session_graph(s);
    void **in = calloc((size_t)pg->n_inputs + 1, sizeof(void *));
    void **outs = calloc((size_t)pg->n_outputs + 1, sizeof(void *));
    uint64_t rng = 0x2545f4914f6cdd1dull;
    int n_random = 0;
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *ti = pg->tensors[pg->inputs[i]];
        in[i] = aligned_alloc(64, (tensor_nbytes(ti) + 64) / 64 * 64);
        const HostTensor *f = NULL;
        for (int k = 0; k < n_files; k++)
            if (strcmp(files[k].name, ti->name) == 0)
                f = &files[k].t;
        if (f) {
            memcpy(in[i], f->data, tensor_nbytes(ti));
            continue;
        }
        n_random++;
        for (int64_t k = 0; k < tensor_numel(ti); k++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            double u = (double)(rng >> 11) / 9007199254740992.0;
            if (dtype_is_float(ti->dtype))
                elem_set_f64(ti->dtype, in[i], k, 2 * u - 1);
            else
                elem_set_i64(ti->dtype, in[i], k, (int64_t)(u * 2));
        }
    }
    for (int i = 0; i < pg->n_outputs; i++)
        outs[i] = aligned_alloc(64, (tensor_nbytes(pg->tensors[pg->outputs[i]]) + 64) / 64 * 64);

    double *lat = malloc(sizeof(double) * (size_t)iters);
    for (int r = 0; r < warmup && rc == ST_OK; r++)
        rc = session_run(s, (const void *const *)in, outs, &e);
    // The machine's runnable threads before and after the timed runs (kernel_lab.h): with the
    // latency runs' spread, whether a neighbour shared the cores.
    double load = lab_machine_load();
    double t_all = now_s();
    for (int r = 0; r < iters && rc == ST_OK; r++) {
        double t0 = now_s();
        rc = session_run(s, (const void *const *)in, outs, &e);
        lat[r] = now_s() - t0;
    }
    t_all = now_s() - t_all;
    double load_after = lab_machine_load();
    if (load_after >= 0 && (load < 0 || load_after < load))
        load = load_after;

    // CUDA: the GPU-timeline time of back-to-back runs with the inputs already on the device,
    // comparable with CUDA-event timings of other frameworks (the latency above adds the copies
    // in and out and the host's wait).
    bool on_gpu = strcmp(ac.h.target, "cuda") == 0;
    double *dev = calloc((size_t)iters + 1, sizeof(double));
    if (on_gpu && rc == ST_OK)
        rc = session_time_device(s, iters, dev, &e);

    // Per-kernel times: profiled runs, the median per launch.
    int nl = session_num_launches(s);
    int prof_runs = iters < 50 ? iters : 50;
    double *kt = calloc((size_t)nl * (size_t)prof_runs + 1, sizeof(double));
    session_set_profiling(s, 1);
    for (int r = 0; r < prof_runs && rc == ST_OK; r++) {
        rc = session_run(s, (const void *const *)in, outs, &e);
        const double *k = session_kernel_times(s);
        for (int i = 0; i < nl && k; i++)
            kt[(size_t)i * prof_runs + r] = k[i];
    }
    session_set_profiling(s, 0);
    if (rc) {
        fprintf(stderr, "orch: error: %s\n", e.msg);
    } else {
        qsort(lat, (size_t)iters, sizeof(double), cmp_double);
        double mean = 0, var = 0;
        for (int r = 0; r < iters; r++)
            mean += lat[r] / iters;
        for (int r = 0; r < iters; r++)
            var += (lat[r] - mean) * (lat[r] - mean) / iters;
        double med = pct(lat, iters, 0.5), p90 = pct(lat, iters, 0.9), p95 = pct(lat, iters, 0.95),
               p99 = pct(lat, iters, 0.99);
        LabTiming lt;
        double *copy = malloc(sizeof(double) * (size_t)iters);
        memcpy(copy, lat, sizeof(double) * (size_t)iters);
        lab_summarise(copy, iters, load, session_threads(s), &lt);
        free(copy);
        KernelRow *rows = calloc((size_t)nl + 1, sizeof(KernelRow));
        double ksum = 0;
        for (int i = 0; i < nl; i++) {
            double *v = &kt[(size_t)i * prof_runs];
            qsort(v, (size_t)prof_runs, sizeof(double), cmp_double);
            rows[i].launch = i;
            rows[i].median = pct(v, prof_runs, 0.5);
            ksum += rows[i].median;
        }
        qsort(rows, (size_t)nl, sizeof(KernelRow), cmp_row);
        const long long peak_rss = peak_rss_bytes();
        const Plan *plan = session_plan(s);
        // The compile's prediction: the sum of its kernels' lab timings, each alone with warm
        // caches; the run's median against it says how far the lab's conditions are from a
        // whole plan's (cold weights, the kernels' effect on each other's caches).
        double predicted = 0;
        for (int i = 0; i < plan->n_launches; i++)
            predicted += plan->launches[i].predicted;
        printf("%s: %d kernels, %d thread%s, precision %s, %s\n",
               art_path == tmp_path ? model : art_path, session_num_kernels(s), session_threads(s),
               session_threads(s) == 1 ? "" : "s", ac.h.precision, ac.h.fingerprint);
        if (n_files)
            printf("inputs: %d from -i files, %d random\n", pg->n_inputs - n_random, n_random);
        printf("latency over %d runs (after %d warm-up): min %.3f ms, median %.3f ms (p95 %.3f "
               "ms), p90 %.3f ms, p99 %.3f ms, mean %.3f ms, stddev %.3f ms\n",
               iters, warmup, lat[0] * 1e3, med * 1e3, p95 * 1e3, p90 * 1e3, p99 * 1e3, mean * 1e3,
               sqrt(var) * 1e3);
        if (lt.unstable)
            printf("warning: the machine was busy (%s; %.0f runnable threads for %d of the "
                   "plan's): these times are the machine's as much as the plan's; bench on a "
                   "quiet machine to compare\n",
                   lt.why, load, session_threads(s));
        double dev_med = 0, dev_min = 0;
        if (on_gpu) {
            qsort(dev, (size_t)iters, sizeof(double), cmp_double);
            dev_med = pct(dev, iters, 0.5);
            dev_min = dev[0];
            printf("GPU time over %d back-to-back runs (CUDA events, inputs on the device): "
                   "min %.4f ms, median %.4f ms\n",
                   iters, dev_min * 1e3, dev_med * 1e3);
        }
        if (predicted > 0)
            printf("predicted by the compile: %.3f ms (the median is %.2fx that)\n", predicted * 1e3,
                   (on_gpu ? dev_med : med) / predicted);
        printf("throughput: %.1f runs/s; memory: arena %.2f MiB, constants %.2f MiB, peak RSS "
               "%.1f MiB\n",
               iters / t_all, (double)plan->arena_bytes / 1048576.0,
               (double)plan->const_bytes / 1048576.0, (double)peak_rss / 1048576.0);
        printf("kernels (median of %d profiled runs; sum %.3f ms):\n", prof_runs, ksum * 1e3);
        printf("  %4s %10s %6s  %-36s %s\n", "#", "time", "share", "kernel", "ONNX nodes");
        for (int i = 0; i < nl; i++) {
            int l = rows[i].launch;
            printf("  %4d %8.3f ms %5.1f%%  %-36s %s\n", l, rows[i].median * 1e3,
                   ksum > 0 ? 100 * rows[i].median / ksum : 0, session_launch_name(s, l),
                   session_launch_nodes(s, l));
        }
        // The kernels an interpreter runs, by op, with their share of the predicted time.
        Fallbacks fb;
        fallbacks_of_plan(pg, plan, ac.h.target, &fb);
        if (fb.kernels > 0) {
            StrBuf b;
            sb_init(&b);
            fallbacks_format(&fb, false, "  ", &b);
            printf("not generated: %d kernel%s, %.1f%% of the predicted time\n%s", fb.kernels,
                   fb.kernels == 1 ? "" : "s", fb.total > 0 ? 100 * fb.seconds / fb.total : 0.0,
                   b.s);
            sb_free(&b);
        }
        if (json) {
            FILE *jf = fopen(json, "w");
            if (!jf) {
                rc = err_set(&e, ST_RUNTIME, "--json %s: %s", json, strerror(errno));
                fprintf(stderr, "orch: error: %s\n", e.msg);
            } else {
                fprintf(jf, "{\n  \"model\": ");
                json_str(jf, model);
                fprintf(jf, ",\n  \"target\": ");
                json_str(jf, ac.h.target);
                fprintf(jf, ",\n  \"precision\": ");
                json_str(jf, ac.h.precision);
                fprintf(jf, ",\n  \"device\": ");
                json_str(jf, ac.h.fingerprint);
                fprintf(jf, ",\n  \"input_shapes\": ");
                json_str(jf, shapes_text);
                fprintf(jf, ",\n  \"input_files\": {");
                for (int k = 0; k < n_files; k++) {
                    fprintf(jf, "%s", k ? ", " : "");
                    json_str(jf, files[k].name);
                    fprintf(jf, ": ");
                    json_str(jf, files[k].path);
                }
                fprintf(jf, "}");
                fprintf(jf,
                        ",\n  \"threads\": %d,\n  \"iters\": %d,\n  \"warmup\": %d,\n"
                        "  \"min_ms\": %.6f,\n  \"median_ms\": %.6f,\n  \"p95_ms\": %.6f,\n"
                        "  \"p90_ms\": %.6f,\n  \"load\": %.0f,\n  \"spread\": %.4f,\n"
                        "  \"busy\": %s,\n"
                        "  \"p99_ms\": %.6f,\n  \"mean_ms\": %.6f,\n  \"stddev_ms\": %.6f,\n"
                        "  \"throughput_per_s\": %.3f,\n  \"compile_s\": %.3f,\n"
                        "  \"arena_bytes\": %lld,\n  \"const_bytes\": %lld,\n"
                        "  \"peak_rss_bytes\": %lld,\n  \"predicted_ms\": %.6f,\n",
                        session_threads(s), iters, warmup, lat[0] * 1e3, med * 1e3, p95 * 1e3,
                        p90 * 1e3, load, lt.spread, lt.unstable ? "true" : "false", p99 * 1e3,
                        mean * 1e3, sqrt(var) * 1e3, iters / t_all, compile_s,
                        (long long)plan->arena_bytes, (long long)plan->const_bytes, peak_rss,
                        predicted * 1e3);
                if (on_gpu)
                    fprintf(jf, "  \"device_min_ms\": %.6f,\n  \"device_median_ms\": %.6f,\n",
                            dev_min * 1e3, dev_med * 1e3);
                fprintf(jf, "  \"kernels\": [");
                for (int l = 0; l < nl; l++) {
                    double m = 0;
                    for (int i = 0; i < nl; i++)
                        if (rows[i].launch == l)
                            m = rows[i].median;
                    fprintf(jf, "%s\n    {\"index\": %d, \"name\": ", l ? "," : "", l);
                    json_str(jf, session_launch_name(s, l));
                    fprintf(jf, ", \"median_ms\": %.6f, \"share\": %.4f, \"nodes\": ", m * 1e3,
                            ksum > 0 ? m / ksum : 0);
                    json_str(jf, session_launch_nodes(s, l));
                    fprintf(jf, "}");
                }
                fprintf(jf, "\n  ],\n  \"not_generated\": ");
                fallbacks_json(&fb, jf);
                fprintf(jf, "\n}\n");
                fclose(jf);
            }
        }
        free(rows);
        fallbacks_free(&fb);
    }
    for (int i = 0; i < pg->n_inputs; i++)
        free(in[i]);
    for (int i = 0; i < pg->n_outputs; i++)
        free(outs[i]);
    free(in);
    free(outs);
    free(lat);
    free(dev);
    free(kt);
    session_free(all);
    artifact_contents_free(&ac);
    inputs_free(files, n_files);
    return rc;
}
