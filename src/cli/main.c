// The `orch` command line: `info` describes a model, `run` executes it on the reference
// interpreter with inputs from files (or random ones) and checks outputs against expected files.
// Exit codes: 0 ok, 1 usage, 2 invalid model or input, 3 unsupported, 4 mismatch, 5 runtime.
#include "../fission/fission.h"
#include "../ir/fold.h"
#include "../ir/stats.h"
#include "../onnx/load.h"
#include "../ops/ops.h"
#include "../runtime/interp.h"
#include "../runtime/npy.h"
#include "../runtime/prim_interp.h"
#include "orch.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_ARGS 64

static void usage(FILE *f) {
    fprintf(f,
            "orch %s — a tensor program optimizer for ONNX models\n"
            "\n"
            "usage:\n"
            "  orch info MODEL.onnx [--input-shapes NAME:DIMS[,...]]\n"
            "      inputs, outputs, op histogram, parameters, FLOPs; lists every unsupported node\n"
            "  orch run MODEL.onnx [-i NAME=FILE]... [-o OUTDIR] [--expected NAME=FILE]...\n"
            "           [--atol A] [--rtol R] [--seed S] [--repeat N] [--input-shapes ...]\n"
            "           [--engine ops|prims]\n"
            "      runs the model on the reference interpreter (ops: per ONNX operator; prims:\n"
            "      after fission, per primitive); FILE is .npy or TensorProto .pb;\n"
            "      inputs not given are random (uniform in [-1, 1) from the printed seed)\n"
            "  orch version\n"
            "\n"
            "exit codes: 0 ok, 1 usage, 2 invalid model or input, 3 unsupported, 4 mismatch,\n"
            "            5 runtime error\n",
            ORCH_VERSION);
}

static int fail(const Err *e) {
    fprintf(stderr, "orch: error: %s\n", e->msg);
    return e->code ? e->code : ST_RUNTIME;
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "orch: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see 'orch help')\n");
    return ST_USAGE;
}

typedef struct NamedFile {
    char *name;
    const char *path;
} NamedFile;

typedef struct Args {
    const char *model;
    char *input_shapes;
    NamedFile inputs[MAX_ARGS], expected[MAX_ARGS];
    int n_inputs, n_expected;
    const char *outdir;
    double atol, rtol;
    uint64_t seed;
    bool seed_given;
    int repeat;
    bool prims; // --engine prims: run the primitive graph instead of the operators
} Args;

static int split_named(char *arg, const char *flag, NamedFile *nf) {
    char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return usage_error("%s expects NAME=FILE", flag);
    *eq = 0;
    nf->name = arg;
    nf->path = eq + 1;
    return ST_OK;
}

static int parse_double(const char *s, const char *flag, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    if (end == s || *end || errno || !(*out >= 0))
        return usage_error("%s expects a non-negative number", flag);
    return ST_OK;
}

static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->atol = 1e-4;
    a->rtol = 1e-4;
    a->repeat = 1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(s, "-i") == 0 || strcmp(s, "--input") == 0 || strcmp(s, "-o") == 0 ||
                     strcmp(s, "--output-dir") == 0 || strcmp(s, "--expected") == 0 ||
                     strcmp(s, "--atol") == 0 || strcmp(s, "--rtol") == 0 ||
                     strcmp(s, "--seed") == 0 || strcmp(s, "--repeat") == 0 ||
                     strcmp(s, "--input-shapes") == 0 || strcmp(s, "--engine") == 0;
        if (takes && !v)
            return usage_error("%s needs a value", s);
        int rc = ST_OK;
        if (strcmp(s, "-i") == 0 || strcmp(s, "--input") == 0) {
            if (a->n_inputs == MAX_ARGS)
                return usage_error("too many %s", s);
            rc = split_named(argv[++i], s, &a->inputs[a->n_inputs++]);
        } else if (strcmp(s, "--expected") == 0) {
            if (a->n_expected == MAX_ARGS)
                return usage_error("too many %s", s);
            rc = split_named(argv[++i], s, &a->expected[a->n_expected++]);
        } else if (strcmp(s, "-o") == 0 || strcmp(s, "--output-dir") == 0) {
            a->outdir = argv[++i];
        } else if (strcmp(s, "--atol") == 0) {
            rc = parse_double(argv[++i], s, &a->atol);
        } else if (strcmp(s, "--rtol") == 0) {
            rc = parse_double(argv[++i], s, &a->rtol);
        } else if (strcmp(s, "--seed") == 0) {
            char *end;
            errno = 0;
            a->seed = strtoull(argv[++i], &end, 10);
            if (*end || errno || end == argv[i])
                return usage_error("--seed expects an unsigned integer, got '%s'", argv[i]);
            a->seed_given = true;
        } else if (strcmp(s, "--repeat") == 0) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end || r < 1 || r > 100000)
                return usage_error("--repeat expects 1 to 100000, got '%s'", argv[i]);
            a->repeat = (int)r;
        } else if (strcmp(s, "--engine") == 0) {
            const char *v2 = argv[++i];
            if (strcmp(v2, "prims") != 0 && strcmp(v2, "ops") != 0)
                return usage_error("--engine expects 'ops' or 'prims', got '%s'", v2);
            a->prims = strcmp(v2, "prims") == 0;
        } else if (strcmp(s, "--input-shapes") == 0) {
            a->input_shapes = argv[++i];
        } else if (s[0] == '-' && s[1]) {
            return usage_error("unknown option '%s'", s);
        } else if (!a->model) {
            a->model = s;
        } else {
            return usage_error("unexpected argument '%s'", s);
        }
        if (rc)
            return rc;
    }
    if (!a->model)
        return usage_error("%s", "no model given");
    return ST_OK;
}

// Loads the model with shapes from --input-shapes and, for inputs given as files, the files'
// shapes (so a symbolic batch dimension needs no flag when the input is supplied).
static int load_model(const Args *a, const HostTensor *files, Graph **g, Err *e) {
    InputShape shapes[2 * MAX_ARGS];
    char sources[MAX_ARGS][512];
    LoadOptions lo = {shapes, 0};
    char *spec = a->input_shapes ? xstrdup(a->input_shapes) : NULL;
    int rc = spec ? parse_input_shapes(spec, shapes, MAX_ARGS, &lo.n_shapes, e) : ST_OK;
    if (rc == ST_OK && files) {
        for (int i = 0; i < a->n_inputs; i++) {
            bool listed = false;
            for (int j = 0; j < lo.n_shapes; j++)
                listed |= strcmp(shapes[j].name, a->inputs[i].name) == 0;
            if (listed)
                continue;
            InputShape *s = &shapes[lo.n_shapes++];
            snprintf(sources[i], sizeof sources[i], "-i %s=%s", a->inputs[i].name,
                     a->inputs[i].path);
            s->source = sources[i];
            s->name = a->inputs[i].name;
            s->rank = files[i].rank;
            memcpy(s->dims, files[i].dims, sizeof(int64_t) * (size_t)files[i].rank);
        }
    }
    if (rc == ST_OK)
        rc = onnx_load_file(a->model, &lo, g, e);
    free(spec);
    return rc;
}

// ---- info ----

typedef struct OpCount {
    const char *op;
    int count;
} OpCount;

static int cmp_count(const void *a, const void *b) {
    const OpCount *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : strcmp(x->op, y->op);
}

static void print_histogram(const Graph *g) {
    OpCount *c = xcalloc((size_t)g->n_nodes + 1, sizeof(OpCount));
    int n = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        int j = 0;
        while (j < n && strcmp(c[j].op, g->nodes[k]->op) != 0)
            j++;
        if (j == n)
            c[n++].op = g->nodes[k]->op;
        c[j].count++;
    }
    qsort(c, (size_t)n, sizeof *c, cmp_count);
    printf("  ");
    for (int j = 0; j < n; j++)
        printf("%s %d%s", c[j].op, c[j].count, j + 1 < n ? ", " : "\n");
    if (!n)
        printf("(none)\n");
    free(c);
}

static void print_tensors(const Graph *g, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        const Tensor *t = g->tensors[ids[i]];
        char s[256];
        printf("  %-24s %-8s %s\n", t->name, dtype_name(t->dtype),
               t->rank >= 0 ? tensor_shape_str(t, s, sizeof s) : "(unknown until shapes are inferred)");
    }
}

static const char *human(double v, char *buf, size_t n) {
    const char *unit[] = {"", " K", " M", " G", " T"};
    int u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    snprintf(buf, n, u ? "%.2f%s" : "%.0f%s", v, unit[u]);
    return buf;
}

static int cmd_info(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    Err e = {0};
    Graph *g = NULL;
    if ((rc = load_model(&a, NULL, &g, &e)))
        return fail(&e);
    char b1[64], b2[64];
    printf("model: %s\n  producer %s, IR version %lld, opset %d\n", a.model, g->producer,
           (long long)g->ir_version, g->opset);
    int64_t params = 0, pbytes = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const Tensor *t = g->tensors[i];
        if (t->kind == TK_CONST) {
            params += tensor_numel(t);
            pbytes += (int64_t)tensor_nbytes(t);
        }
    }
    printf("inputs:\n");
    print_tensors(g, g->inputs, g->n_inputs);
    printf("nodes in the file: %d\n", g->n_nodes);
    print_histogram(g);
    printf("parameters: %s (%s bytes)\n", human((double)params, b1, sizeof b1),
           human((double)pbytes, b2, sizeof b2));
    rc = graph_check_supported(g, &e);
    if (rc) {
        printf("outputs:\n");
        print_tensors(g, g->outputs, g->n_outputs);
        graph_free(g);
        return fail(&e);
    }
    FoldStats st;
    if ((rc = graph_infer_and_fold(g, &st, &e))) {
        graph_free(g);
        return fail(&e);
    }
    printf("outputs:\n");
    print_tensors(g, g->outputs, g->n_outputs);
    printf("nodes after folding: %d (%d folded into constants, %d Identity/Dropout removed, %d "
           "unused removed)\n",
           st.nodes_after, st.folded, st.bypassed, st.dead);
    print_histogram(g);
    printf("FLOPs: %s\n", human((double)graph_flops(g), b1, sizeof b1));
    graph_free(g);
    return ST_OK;
}

// ---- run ----

static uint64_t rng_next(uint64_t *s) { // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(const Tensor *t, void *data, uint64_t *rng) {
    int64_t n = tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(rng_next(rng) >> 11) / 9007199254740992.0; // [0, 1)
        if (dtype_is_float(t->dtype))
            elem_set_f64(t->dtype, data, i, 2 * u - 1);
        else if (t->dtype == DT_BOOL)
            elem_set_i64(t->dtype, data, i, u < 0.5);
        else
            elem_set_i64(t->dtype, data, i, (int64_t)(u * 4)); // small: safe as indices
    }
}

static void safe_name(const char *name, char *out, size_t n) {
    size_t j = 0;
    for (const char *p = name; *p && j + 1 < n; p++)
        out[j++] = (*p == '/' || *p == '\\' || *p == ':' || (*p == '.' && p == name)) ? '_' : *p;
    out[j] = 0;
}

static void print_summary(const Tensor *t, const void *data) {
    char s[256];
    int64_t n = tensor_numel(t);
    printf("  %-24s %-8s %-16s", t->name, dtype_name(t->dtype), tensor_shape_str(t, s, sizeof s));
    if (dtype_size(t->dtype) && n > 0) {
        double mn = INFINITY, mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = elem_get_f64(t->dtype, data, i);
            mn = fmin(mn, v);
            mx = fmax(mx, v);
            sum += v;
        }
        printf(" min %.6g max %.6g mean %.6g  [", mn, mx, sum / (double)n);
        for (int64_t i = 0; i < n && i < 4; i++)
            printf("%s%.6g", i ? ", " : "", elem_get_f64(t->dtype, data, i));
        printf("%s]", n > 4 ? ", ..." : "");
    }
    printf("\n");
}

// Compares got with ref: |got-ref| <= atol + rtol*|ref|, NaN equal to NaN, same infinities.
static bool compare(const Tensor *t, const void *got, const HostTensor *ref, double atol,
                    double rtol, Err *e) {
    char s1[128], s2[128];
    bool same = ref->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = ref->dims[d] == t->dims[d];
    if (!same) {
        err_set(e, ST_MISMATCH, "output '%s' has shape %s, expected file has %s", t->name,
                tensor_shape_str(t, s1, sizeof s1), shape_str(ref->dims, ref->rank, s2, sizeof s2));
        return false;
    }
    int64_t n = tensor_numel(t), bad = 0, worst = -1;
    double max_abs = 0, max_rel = 0, worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = elem_get_f64(t->dtype, got, i), r = elem_get_f64(ref->dtype, ref->data, i);
        if ((isnan(g) && isnan(r)) || g == r) // also equal infinities, where rtol*|ref| is NaN
            continue;
        double d = fabs(g - r);
        if (!(d == d)) // NaN on one side only
            d = INFINITY;
        max_abs = fmax(max_abs, d);
        if (r != 0)
            max_rel = fmax(max_rel, d / fabs(r));
        double excess = d - (atol + rtol * fabs(r));
        if (excess > 0 || isnan(excess)) {
            bad++;
            if (worst < 0 || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
    }
    printf("  %-24s max abs err %.3g, max rel err %.3g: %s\n", t->name, max_abs, max_rel,
           bad ? "MISMATCH" : "ok");
    if (bad) {
        err_set(e, ST_MISMATCH,
                "output '%s': %lld of %lld elements differ beyond atol %g + rtol %g (worst at "
                "flat index %lld: got %.9g, expected %.9g)",
                t->name, (long long)bad, (long long)n, atol, rtol, (long long)worst,
                elem_get_f64(t->dtype, got, worst), elem_get_f64(ref->dtype, ref->data, worst));
        return false;
    }
    return true;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmd_run(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    Err e = {0};
    HostTensor files[MAX_ARGS] = {0}, refs[MAX_ARGS] = {0};
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    void **in = NULL, **out = NULL;
    bool *in_owned = NULL;
    for (int i = 0; i < a.n_inputs && rc == ST_OK; i++)
        rc = tensor_file_read(a.inputs[i].path, &files[i], &e);
    for (int i = 0; i < a.n_expected && rc == ST_OK; i++)
        rc = tensor_file_read(a.expected[i].path, &refs[i], &e);
    if (rc == ST_OK)
        rc = load_model(&a, files, &g, &e);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(g, NULL, &e);
    FissionStats fst = {0};
    if (rc == ST_OK && a.prims)
        rc = fission_run(g, NULL, &pg, &fst, &e);
    if (rc)
        goto done;
    // (-i names were checked by the loader, which binds each input file's shape.)
    for (int i = 0; i < a.n_expected && rc == ST_OK; i++) {
        bool found = false;
        for (int j = 0; j < g->n_outputs; j++)
            found |= strcmp(g->tensors[g->outputs[j]]->name, a.expected[i].name) == 0;
        if (!found)
            rc = err_set(&e, ST_USAGE, "--expected %s: the model has no output named '%s'",
                         a.expected[i].name, a.expected[i].name);
    }
    if (rc)
        goto done;
    in = xcalloc((size_t)g->n_inputs + 1, sizeof(void *));
    in_owned = xcalloc((size_t)g->n_inputs + 1, 1);
    out = xcalloc((size_t)g->n_outputs + 1, sizeof(void *));
    uint64_t seed = a.seed_given ? a.seed : (uint64_t)time(NULL);
    bool random_used = false;
    uint64_t rng = seed;
    for (int j = 0; j < g->n_inputs && rc == ST_OK; j++) {
        const Tensor *t = g->tensors[g->inputs[j]];
        int f = -1;
        for (int i = 0; i < a.n_inputs; i++)
            if (strcmp(a.inputs[i].name, t->name) == 0)
                f = i;
        if (f >= 0) {
            if (files[f].dtype != t->dtype) {
                rc = err_set(&e, ST_INVALID, "input '%s' from %s is %s, the model expects %s",
                             t->name, a.inputs[f].path, dtype_name(files[f].dtype),
                             dtype_name(t->dtype));
                break;
            }
            in[j] = files[f].data; // shape checked by the loader binding
            continue;
        }
        in[j] = malloc(tensor_nbytes(t) + 1);
        if (!in[j]) {
            rc = err_set(&e, ST_RUNTIME, "out of memory for input '%s'", t->name);
            break;
        }
        in_owned[j] = true;
        fill_random(t, in[j], &rng);
        random_used = true;
    }
    if (rc)
        goto done;
    if (random_used)
        printf("random inputs from seed %llu (repeat with --seed %llu)\n", (unsigned long long)seed,
               (unsigned long long)seed);
    int64_t *times = xcalloc((size_t)a.repeat, sizeof(int64_t));
    for (int r = 0; r < a.repeat && rc == ST_OK; r++) {
        for (int i = 0; i < g->n_outputs; i++) {
            free(out[i]);
            out[i] = NULL;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = pg ? prim_interp_run(pg, (const void *const *)in, out, &e)
                : interp_run(g, (const void *const *)in, out, NULL, &e);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        times[r] = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    }
    if (rc == ST_OK) {
        qsort(times, (size_t)a.repeat, sizeof(int64_t), cmp_i64);
        if (pg)
            printf("primitive interpreter: %d primitives from %d nodes (%d opaque), ", pg->n_prims,
                   fst.nodes, fst.opaque);
        else
            printf("reference interpreter: %d node%s, ", g->n_nodes, g->n_nodes == 1 ? "" : "s");
        printf("%.3f ms median of %d run%s (min %.3f ms)\n", (double)times[a.repeat / 2] / 1e6,
               a.repeat, a.repeat == 1 ? "" : "s", (double)times[0] / 1e6);
        printf("outputs:\n");
        for (int i = 0; i < g->n_outputs; i++)
            print_summary(g->tensors[g->outputs[i]], out[i]);
    }
    free(times);
    if (rc == ST_OK && a.outdir) {
        if (mkdir(a.outdir, 0777) != 0 && errno != EEXIST)
            rc = err_set(&e, ST_RUNTIME, "-o %s: cannot create the folder: %s", a.outdir,
                         strerror(errno));
        for (int i = 0; i < g->n_outputs && rc == ST_OK; i++) {
            const Tensor *t = g->tensors[g->outputs[i]];
            char name[256], path[4096];
            safe_name(t->name, name, sizeof name);
            snprintf(path, sizeof path, "%s/%s.npy", a.outdir, name);
            rc = npy_write(path, t->dtype, t->rank, t->dims, out[i], &e);
        }
        if (rc == ST_OK)
            printf("wrote %d output%s to %s/\n", g->n_outputs, g->n_outputs == 1 ? "" : "s",
                   a.outdir);
    }
    if (rc == ST_OK && a.n_expected) {
        printf("comparison (|got - expected| <= %g + %g * |expected|):\n", a.atol, a.rtol);
        Err first = {0};
        for (int i = 0; i < a.n_expected; i++)
            for (int j = 0; j < g->n_outputs; j++) {
                const Tensor *t = g->tensors[g->outputs[j]];
                if (strcmp(t->name, a.expected[i].name) == 0)
                    compare(t, out[j], &refs[i], a.atol, a.rtol, &first);
            }
        if (first.code)
            rc = err_set(&e, first.code, "%s", first.msg);
    }
done:
    if (g && in)
        for (int j = 0; j < g->n_inputs; j++)
            if (in_owned[j])
                free(in[j]);
    if (g && out)
        for (int i = 0; i < g->n_outputs; i++)
            free(out[i]);
    free(in);
    free(in_owned);
    free(out);
    for (int i = 0; i < MAX_ARGS; i++) {
        host_tensor_free(&files[i]);
        host_tensor_free(&refs[i]);
    }
    prim_graph_free(pg);
    graph_free(g);
    return rc ? fail(&e) : ST_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return ST_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("orch %s\n", ORCH_VERSION);
        return ST_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return ST_OK;
    }
    return usage_error("unknown command '%s'", cmd);
}
