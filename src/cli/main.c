// The `orch` command line: `info` describes a model, `run` executes it on the reference
// interpreter (per operator, per primitive after fission, or kernel by kernel along an
// orchestrated plan) with inputs from files (or random ones) and checks outputs against expected
// files, `inspect` dumps any stage (operators, primitives, candidate kernels, the plan) as text
// and Graphviz dot/SVG.
// Exit codes: 0 ok, 1 usage, 2 invalid model or input, 3 unsupported, 4 mismatch, 5 runtime.
#include "../backend/target.h"
#include "../base/file.h"
#include "../base/text.h"
#include "../candidates/candidates.h"
#include "../compile/fallbacks.h"
#include "../fission/fission.h"
#include "../inspect/dump.h"
#include "../interp/interp.h"
#include "../interp/prim_interp.h"
#include "../ir/stats.h"
#include "../onnx/load.h"
#include "../ops/fold.h"
#include "../ops/ops.h"
#include "../orchestrate/cost_model.h"
#include "../orchestrate/orchestrate.h"
#include "../orchestrate/selection_run.h"
#include "../passes/passes.h"
#include "../plan/artifact_model.h"
#include "../runtime/npy.h"
#include "../runtime/session.h"
#include "cmd_bench.h"
#include "cmd_compile.h"
#include "cmd_db.h"
#include "cmd_export.h"
#include "orch.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 64

static void usage(FILE *f) {
    fprintf(
        f,
        "orch %s — a tensor program optimizer for ONNX models\n"
        "\n"
        "usage:\n"
        "  orch info MODEL.onnx [--input-shapes NAME:DIMS[,...]]\n"
        "      inputs, outputs, op histogram, parameters, FLOPs; lists every unsupported node;\n"
        "      per operator, whether each target (cpu, cuda) generates its kernels or an\n"
        "      interpreter runs them\n"
        "  orch run MODEL.onnx [-i NAME=FILE]... [-o OUTDIR] [--expected NAME=FILE]...\n"
        "           [--atol A] [--rtol R] [--seed S] [--repeat N] [--input-shapes ...]\n"
        "           [--engine ops|prims|plan] [--no-cleanup] [--attention-rewrite]\n"
        "           [--target cpu|cuda] [--device NAME] [--time-limit S]\n"
        "      runs the model on the reference interpreter (ops: per ONNX operator; prims:\n"
        "      after fission and its clean-up passes, per primitive; plan: kernel by kernel\n"
        "      along the orchestrated plan, see inspect); FILE is .npy or TensorProto .pb;\n"
        "      inputs not given are random (uniform in [-1, 1) from the printed seed)\n"
        "  orch inspect MODEL.onnx [--stage ops|prims|candidates|plan] [--dot FILE.dot]\n"
        "           [--svg FILE.svg] [--input-shapes ...] [--no-cleanup] [--attention-rewrite]\n"
        "           [--target cpu|cuda] [--device NAME] [--time-limit S]\n"
        "      prints the folded operator graph (ops), the primitive graph (prims, the\n"
        "      default: counts per kind after fission and after clean-up, then one line per\n"
        "      primitive), the candidate kernels (candidates: counts, segments) or the plan\n"
        "      (plan: the binary linear program's result and the chosen kernels with the ONNX\n"
        "      nodes they cover and their estimated cost); costs are roofline estimates for\n"
        "      --device (h100, h200, a100, cpu; default: cpu for --target cpu, the default,\n"
        "      h100 for --target cuda); --time-limit bounds the solver (default 60 s); --dot\n"
        "      writes Graphviz text (candidates: segments as clusters; plan: kernels as\n"
        "      coloured clusters), --svg renders it with Graphviz's dot\n"
        "  orch inspect MODEL.orch [--dot FILE.dot] [--svg FILE.svg] [--seed S] [--shapes N]\n"
        "      the plan the artefact was compiled into: each launch's kernel (or interpreter),\n"
        "      ONNX nodes, predicted time and the time measured over 3 profiled runs on random\n"
        "      inputs; --dot/--svg draw it, each launch a cluster of its primitives\n"
        "  orch compile MODEL.onnx -t cpu -o MODEL.orch [--db FILE] [--threads N] [--top-k K]\n"
        "           [--jobs J] [--input-shapes ...]... [--attention-rewrite] [--time-limit S]\n"
        "           [--seed S] [--precision fp32|tf32|fp16|bf16] [--half-storage]\n"
        "           [--layout auto|nchw|nhwc] [--no-mlp-chains] [--no-attention]\n"
        "           [--explain|--explain-all] [--strict] [--gpus all|N|LIST] [--quiet]\n"
        "      generates C kernels for the candidate kernels, measures the top-K configs of\n"
        "      each (profile database: default ~/.cache/orch/profile.db), solves the\n"
        "      orchestration on measured costs, builds the chosen kernels into one shared\n"
        "      object, plans memory, checks the result against the interpreter, writes "
        "MODEL.orch;\n"
        "      --half-storage (fp16/bf16, cuda) stores tensors in that type, --layout the\n"
        "      convolutions' channels-last layouts under it (auto: where cuDNN loads);\n"
        "      --no-mlp-chains / --no-attention offer no MLP chain / fused attention kernels;\n"
        "      --gpus measures on several GPUs of GPU 0's kind at once (default: all);\n"
        "      --explain prints why each matmul/conv runs where it does (--explain-all: with\n"
        "      every candidate and config); the options that shape the plan are recorded;\n"
        "      the summary names every kernel not generated (op, nodes, interpreter, why,\n"
        "      share of the predicted time); --strict makes any such kernel an error (exit\n"
        "      status 3, no artefact); --input-shapes given several times compiles one plan\n"
        "      per shape set into the one artefact (the weights once); orch compile --help\n"
        "      describes every option\n"
        "  orch info MODEL.orch\n"
        "      what a compiled artefact holds: target, precision, machine, compile options,\n"
        "      its shape sets (kernels, arena, predicted time of each one's plan), the\n"
        "      kernels of its plans an interpreter runs\n"
        "  orch run MODEL.orch [-i NAME=FILE]... [-o OUTDIR] [--expected NAME=FILE]...\n"
        "           [--atol A] [--rtol R] [--seed S] [--repeat N] [--threads N] [--shapes N]\n"
        "           [--fixed-threads]\n"
        "      runs a compiled artefact (same inputs, outputs and checks as for ONNX); one of\n"
        "      several shape sets: the one the -i files' shapes match (another shape exits\n"
        "      with status 2), --shapes N's (orch info numbers them), else the first; on the\n"
        "      CPU a run uses fewer threads while other processes keep cores busy, unless\n"
        "      --fixed-threads\n"
        "  orch bench MODEL.orch|MODEL.onnx [--iters N] [--warmup N] [--threads N] [--json FILE]\n"
        "           [--shapes N] [--fixed-threads] [compile options when given an ONNX model]\n"
        "      latency min/median/p90/p99, throughput, per-kernel table with the ONNX nodes\n"
        "  orch export MODEL.orch DIR [--shapes N]\n"
        "      writes the artefact's plan (the first shape set, or --shapes N's) as a source\n"
        "      tree that builds with make and runs without orch: kernels.c, model.c (cpu; cc) or\n"
        "      kernels.cu, model.cu, nvrtc_build.c (cuda; nvcc, NVRTC), and model.h,\n"
        "      weights.bin, main.c, Makefile\n"
        "  orch db stats|clear [--db FILE] ...\n"
        "      the profile database: what it holds, or delete rows (see orch db)\n"
        "  orch version\n"
        "\n"
        "exit codes: 0 ok, 1 usage, 2 invalid model or input, 3 unsupported (compile\n"
        "            --strict: a kernel not generated), 4 mismatch, 5 runtime error\n",
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
    bool prims;         // --engine prims or plan: run the primitive graph instead of the operators
    bool plan;          // --engine plan: kernel by kernel along the orchestrated selection
    bool no_cleanup;    // --no-cleanup: the primitive graph exactly as fission made it
    bool attention;     // --attention-rewrite: softmax division after the attention MatMul
    int stage;          // inspect --stage (STAGE_*)
    bool stage_given;   // --stage was on the command line
    const char *target; // --target cpu|cuda (picks the default device)
    const char *device; // --device NAME (cost model)
    double time_limit;  // --time-limit S for the solver (0: its default)
    const char *dot;    // inspect --dot FILE
    const char *svg;    // inspect --svg FILE
    int threads;        // run --threads N (compiled artefacts)
    bool fixed_threads; // run --fixed-threads: never fewer threads under contention
    int shape_set;      // run --shapes N: the artefact's shape set N (1-based; 0: by the inputs)
} Args;

enum { CMD_INFO = 1, CMD_RUN = 2, CMD_INSPECT = 4 };
enum { STAGE_PRIMS, STAGE_OPS, STAGE_CANDIDATES, STAGE_PLAN };
static const char *const stage_names[] = {[STAGE_PRIMS] = "prims",
                                          [STAGE_OPS] = "ops",
                                          [STAGE_CANDIDATES] = "candidates",
                                          [STAGE_PLAN] = "plan"};
static const char *const cmd_names[] = {
    [CMD_INFO] = "info", [CMD_RUN] = "run", [CMD_INSPECT] = "inspect"};

// Every option: whether it takes a value and which commands accept it.
typedef struct Flag {
    const char *name;
    bool value;
    unsigned cmds;
} Flag;

static const Flag flags[] = {
    {"--input-shapes", true, CMD_INFO | CMD_RUN | CMD_INSPECT},
    {"-i", true, CMD_RUN},
    {"--input", true, CMD_RUN},
    {"-o", true, CMD_RUN},
    {"--output-dir", true, CMD_RUN},
    {"--expected", true, CMD_RUN},
    {"--atol", true, CMD_RUN},
    {"--rtol", true, CMD_RUN},
    {"--seed", true, CMD_RUN},
    {"--repeat", true, CMD_RUN},
    {"--engine", true, CMD_RUN},
    {"--no-cleanup", false, CMD_RUN | CMD_INSPECT},
    {"--attention-rewrite", false, CMD_RUN | CMD_INSPECT},
    {"--stage", true, CMD_INSPECT},
    {"--target", true, CMD_RUN | CMD_INSPECT},
    {"--device", true, CMD_RUN | CMD_INSPECT},
    {"--time-limit", true, CMD_RUN | CMD_INSPECT},
    {"--dot", true, CMD_INSPECT},
    {"--svg", true, CMD_INSPECT},
    {"--threads", true, CMD_RUN},
    {"--fixed-threads", false, CMD_RUN},
    {"--shapes", true, CMD_RUN | CMD_INSPECT},
};

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

static int parse_args(int argc, char **argv, unsigned cmd, Args *a) {
    memset(a, 0, sizeof *a);
    a->atol = 1e-4;
    a->rtol = 1e-4;
    a->repeat = 1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] != '-' || !s[1]) {
            if (a->model)
                return usage_error("unexpected argument '%s'", s);
            a->model = s;
            continue;
        }
        const Flag *fl = NULL;
        for (size_t k = 0; k < ORCH_COUNT(flags) && !fl; k++)
            if (strcmp(s, flags[k].name) == 0)
                fl = &flags[k];
        if (!fl)
            return usage_error("unknown option '%s'", s);
        if (!(fl->cmds & cmd)) {
            char what[160];
            snprintf(what, sizeof what, "'%.60s' is not an option of 'orch %s'", s, cmd_names[cmd]);
            return usage_error("%s", what);
        }
        if (fl->value && i + 1 == argc)
            return usage_error("%s needs a value", s);
        const char *v = fl->value ? argv[++i] : NULL;
        int rc = ST_OK;
        if (strcmp(s, "-i") == 0 || strcmp(s, "--input") == 0) {
            if (a->n_inputs == MAX_ARGS)
                return usage_error("too many %s", s);
            rc = split_named(argv[i], s, &a->inputs[a->n_inputs++]);
        } else if (strcmp(s, "--expected") == 0) {
            if (a->n_expected == MAX_ARGS)
                return usage_error("too many %s", s);
            rc = split_named(argv[i], s, &a->expected[a->n_expected++]);
        } else if (strcmp(s, "-o") == 0 || strcmp(s, "--output-dir") == 0) {
            a->outdir = v;
        } else if (strcmp(s, "--atol") == 0) {
            rc = parse_double(v, s, &a->atol);
        } else if (strcmp(s, "--rtol") == 0) {
            rc = parse_double(v, s, &a->rtol);
        } else if (strcmp(s, "--seed") == 0) {
            char *end;
            errno = 0;
            a->seed = strtoull(v, &end, 10);
            // (strtoull takes "-1" for 2^64 - 1: only digits make an unsigned integer.)
            if (*end || errno || end == v || v[0] < '0' || v[0] > '9')
                return usage_error("--seed expects an unsigned integer, got '%s'", v);
            a->seed_given = true;
        } else if (strcmp(s, "--repeat") == 0) {
            char *end;
            long r = strtol(v, &end, 10);
            if (*end || r < 1 || r > 100000)
                return usage_error("--repeat expects 1 to 100000, got '%s'", v);
            a->repeat = (int)r;
        } else if (strcmp(s, "--engine") == 0) {
            if (strcmp(v, "prims") != 0 && strcmp(v, "ops") != 0 && strcmp(v, "plan") != 0)
                return usage_error("--engine expects 'ops', 'prims' or 'plan', got '%s'", v);
            a->plan = strcmp(v, "plan") == 0;
            a->prims = a->plan || strcmp(v, "prims") == 0;
        } else if (strcmp(s, "--stage") == 0) {
            a->stage = -1;
            a->stage_given = true;
            for (int k = 0; k < (int)ORCH_COUNT(stage_names); k++)
                if (strcmp(v, stage_names[k]) == 0)
                    a->stage = k;
            if (a->stage < 0)
                return usage_error(
                    "--stage expects 'ops', 'prims', 'candidates' or 'plan', got '%s'", v);
        } else if (strcmp(s, "--target") == 0) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                return usage_error("--target expects 'cpu' or 'cuda', got '%s'", v);
            a->target = v;
        } else if (strcmp(s, "--device") == 0) {
            if (!cost_model_find(v)) {
                char what[200];
                snprintf(what, sizeof what, "--device: no cost model for '%.60s' (known: %s)", v,
                         cost_model_names());
                return usage_error("%s", what);
            }
            a->device = v;
        } else if (strcmp(s, "--time-limit") == 0) {
            rc = parse_double(v, s, &a->time_limit);
        } else if (strcmp(s, "--no-cleanup") == 0) {
            a->no_cleanup = true;
        } else if (strcmp(s, "--attention-rewrite") == 0) {
            a->attention = true;
        } else if (strcmp(s, "--dot") == 0) {
            a->dot = v;
        } else if (strcmp(s, "--svg") == 0) {
            a->svg = v;
        } else if (strcmp(s, "--input-shapes") == 0) {
            a->input_shapes = argv[i];
        } else if (strcmp(s, "--fixed-threads") == 0) {
            a->fixed_threads = true;
        } else if (strcmp(s, "--shapes") == 0) {
            char *end;
            long k = strtol(v, &end, 10);
            if (*end || end == v || k < 1 || k > ARTIFACT_MAX_PLANS)
                return usage_error("--shapes expects a shape set's number (1 to 16, as orch info "
                                   "lists them), got '%s'",
                                   v);
            a->shape_set = (int)k;
        } else if (strcmp(s, "--threads") == 0) {
            char *end;
            long t = strtol(v, &end, 10);
            if (*end || end == v || t < 1 || t > 4096)
                return usage_error("--threads expects 1 to 4096, got '%s'", v);
            a->threads = (int)t;
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
// symbols non-NULL: unbound symbolic dimensions are taken as 1 and listed there (orch info).
static int load_model(const Args *a, const HostTensor *files, LoadSymbols *symbols, Graph **g,
                      Err *e) {
    InputShape shapes[2 * MAX_ARGS];
    char sources[MAX_ARGS][512];
    LoadOptions lo = {.shapes = shapes};
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
        rc = onnx_load_file_symbols(a->model, &lo, symbols, g, e);
    free(spec);
    return rc;
}

// ---- info ----

static void print_tensors(const Graph *g, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        const Tensor *t = g->tensors[ids[i]];
        char s[256];
        printf("  %-24s %-8s %s\n", t->name, dtype_name(t->dtype),
               t->rank >= 0 ? tensor_shape_str(t, s, sizeof s)
                            : "(unknown until shapes are inferred)");
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

static bool is_artifact(const char *path);
static int check_artifact_flags(const Args *a);

// orch info MODEL.orch: the artefact's header, the compile options that shaped it included.
static int info_artifact(const char *path) {
    ArtifactContents ac;
    Err e = {0};
    if (artifact_read(path, &ac, &e))
        return fail(&e);
    const ArtifactHeader *h = &ac.h;
    uint32_t lf = h->load_flags;
    const char *storage = lf & ARTIFACT_STORE_F16    ? "float16"
                          : lf & ARTIFACT_STORE_BF16 ? "bfloat16"
                                                     : "float32";
    printf("compiled artefact: %s (format %u, written by orch %s)\n", path, h->format_version,
           h->orch_version);
    printf("target: %s, precision %s, storage %s%s\n", h->target, h->precision, storage,
           lf & ARTIFACT_LAYOUT_NHWC ? ", channels-last convolution layouts" : "");
    printf("compiled for: %s (%d thread%s)\n", h->fingerprint, h->threads,
           h->threads == 1 ? "" : "s");
    if (ac.n_plans == 1) {
        printf("input shapes: %s\n", h->input_shapes[0] ? h->input_shapes : "(none)");
        printf("kernels: %d, predicted %.3f ms\n", h->kernels, h->predicted_seconds * 1e3);
    } else {
        printf("shape sets: %d (a run uses the plan whose shapes its inputs have; orch bench "
               "--shapes N, orch run --shapes N pick one)\n",
               ac.n_plans);
    }
    // The options the load flags record, then the compile flags' (format 4 on).
    char rest[160];
    artifact_compile_flags_text(h->compile_flags, rest, sizeof rest);
    const char *rewrite = lf & ARTIFACT_ATTENTION_REWRITE ? " --attention-rewrite" : "";
    const char *half = lf & (ARTIFACT_STORE_F16 | ARTIFACT_STORE_BF16) ? " --half-storage" : "";
    bool none = !rewrite[0] && !half[0] && !rest[0];
    printf("compile options:%s%s%s%s%s\n", rewrite, half, rest[0] ? " " : "", rest,
           none ? " defaults" : "");
    if (h->format_version < 4)
        printf("  (format %u records no other options: --no-mlp-chains, --no-attention and "
               "--layout came with format 4)\n",
               h->format_version);
    // The plan's kernels an interpreter runs, from the model imported again as a session would
    // (no device needed); per shape set where there are several.
    int rc = ST_OK;
    for (int k = 0; k < ac.n_plans && rc == ST_OK; k++) {
        ArtifactContents view;
        artifact_plan_view(&ac, k, &view);
        Graph *g = NULL;
        PrimGraph *pg = NULL;
        Plan *plan = NULL;
        rc = artifact_import_model(&view, path, &g, &pg, &plan, &e);
        const char *indent = ac.n_plans > 1 ? "  " : "";
        if (rc == ST_OK && ac.n_plans > 1)
            printf("shape set %d: %s: %d kernels, arena %.2f MiB, predicted %.3f ms\n", k + 1,
                   view.h.input_shapes, view.h.kernels, (double)plan->arena_bytes / 1048576.0,
                   view.h.predicted_seconds * 1e3);
        if (rc == ST_OK) {
            Fallbacks fb;
            fallbacks_of_plan(pg, plan, h->target, &fb);
            if (fb.kernels == 0) {
                printf("%snot generated: none (every kernel of the plan is generated for %s)\n",
                       indent, h->target);
            } else {
                StrBuf b;
                sb_init(&b);
                fallbacks_format(&fb, false, ac.n_plans > 1 ? "    " : "  ", &b);
                printf("%snot generated: %d kernel%s, %.1f%% of the predicted time\n%s", indent,
                       fb.kernels, fb.kernels == 1 ? "" : "s",
                       fb.total > 0 ? 100 * fb.seconds / fb.total : 0.0, b.s);
                sb_free(&b);
            }
            // Whether orch export can write this plan as a source tree, else why not.
            const Target *t = target_find(h->target);
            bool generated = false;
            for (int i = 0; i < plan->n_launches; i++)
                generated = generated || plan->launches[i].kind == PLAN_GENERATED;
            if (!t || !t->export_tree)
                printf("%sexport: not supported for %s artefacts\n", indent, h->target);
            else if (fb.kernels)
                printf("%sexport: no (an interpreter runs kernels of the plan)\n", indent);
            else if (generated && view.src_size == 0 && h->format_version < 6)
                printf("%sexport: no (format %u keeps no kernel source: compile again)\n", indent,
                       h->format_version);
            else if (generated && view.src_size == 0)
                printf("%sexport: no (compiled by an orch that kept no %s kernel source: compile "
                       "again)\n",
                       indent, h->target);
            else
                printf("%sexport: yes (orch export%s; kernel source %.1f KiB)\n", indent,
                       ac.n_plans > 1 ? " --shapes N" : "", (double)view.src_size / 1024.0);
            fallbacks_free(&fb);
        }
        plan_free(plan);
        prim_graph_free(pg);
        graph_free(g);
    }
    artifact_contents_free(&ac);
    return rc ? fail(&e) : ST_OK;
}

static int cmd_info(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, CMD_INFO, &a);
    if (rc)
        return rc;
    if (is_artifact(a.model))
        return (rc = check_artifact_flags(&a)) ? rc : info_artifact(a.model);
    Err e = {0};
    Graph *g = NULL;
    // A model with symbolic dimensions is described without binding them: they are shown, and
    // the shapes, parameters and FLOPs below are those of every symbol at 1.
    LoadSymbols *sym = xcalloc(1, sizeof *sym);
    if ((rc = load_model(&a, NULL, sym, &g, &e))) {
        free(sym);
        return fail(&e);
    }
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
    if (sym->n == 0)
        print_tensors(g, g->inputs, g->n_inputs);
    for (int i = 0; i < g->n_inputs && sym->n > 0; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        StrBuf sh;
        sb_init(&sh);
        for (int d = 0; d < t->rank; d++) {
            const char *name = NULL;
            for (int k = 0; k < sym->n && !name; k++)
                if (sym->s[k].axis == d && strcmp(sym->s[k].input, t->name) == 0)
                    name = sym->s[k].name;
            if (name)
                sb_printf(&sh, "%s%s", d ? "x" : "", name);
            else
                sb_printf(&sh, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
        }
        printf("  %-24s %-8s %s\n", t->name, dtype_name(t->dtype), t->rank ? sh.s : "scalar");
        sb_free(&sh);
    }
    if (sym->n > 0) {
        StrBuf names;
        sb_init(&names);
        for (int k = 0; k < sym->n; k++)
            sb_printf(&names, "%s%s (%s axis %d)", k ? ", " : "", sym->s[k].name, sym->s[k].input,
                      sym->s[k].axis);
        printf("symbolic dimensions: %s; the shapes, parameters and FLOPs below take each as 1 "
               "(bind them with --input-shapes; orch compile takes --input-shapes several "
               "times for several shape sets)\n",
               names.s);
        sb_free(&names);
    }
    free(sym);
    printf("nodes in the file: %d\n", g->n_nodes);
    op_histogram_print(stdout, g);
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
    op_histogram_print(stdout, g);
    printf("FLOPs: %s\n", human((double)graph_flops(g), b1, sizeof b1));
    // Each target's kernels per operator, on the primitives a compile starts from (fission and
    // its clean-up, as compile_import), so a model that would fall back is known before tuning.
    PrimGraph *pg = NULL;
    if ((rc = fission_run(g, NULL, &pg, NULL, &e)) == ST_OK &&
        (rc = fission_cleanup(pg, NULL, &e)) == ST_OK)
        fallbacks_print_op_table(pg, stdout);
    prim_graph_free(pg);
    graph_free(g);
    return rc ? fail(&e) : ST_OK;
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

// The longest file name an output gets under -o, ".npy" included (NAME_MAX on Linux file
// systems), and the tail that marks a cut or repeated name: '-' and 8 hex digits of its hash.
#define OUT_NAME_MAX 255
#define OUT_TAG_LEN 9

static uint32_t name_hash(const char *s) { // FNV-1a
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static bool name_taken(char names[][OUT_NAME_MAX + 1], int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcasecmp(names[i], name) == 0) // for file systems that ignore case
            return true;
    return false;
}

// The file name (".npy" included) of output i of the run under -o, into names[i]: the output's
// name as text_escape shows it, with '/', '\\' and ':' (and a leading '.') made '_', so it stays
// one file in the folder; unique among names[0..i) and at most OUT_NAME_MAX bytes: a name cut to
// fit, or equal to an earlier output's, ends with '-' and its full name's hash (then a count).
static void output_file_name(const char *name, char names[][OUT_NAME_MAX + 1], int i) {
    char base[OUT_NAME_MAX * 4 + 8];
    text_escape(base, sizeof base, name[0] ? name : "_", false);
    for (char *p = base; *p; p++)
        if (*p == '/' || *p == '\\' || *p == ':' || (*p == '.' && p == base))
            *p = '_';
    size_t len = strlen(base), fit = OUT_NAME_MAX - 4;
    char *out = names[i];
    if (len <= fit) {
        memcpy(out, base, len);
        memcpy(out + len, ".npy", 5);
        if (!name_taken(names, i, out))
            return;
    }
    // Cut between characters (the escaped name is valid UTF-8), leaving room for the tags.
    size_t keep = ORCH_MIN(len, fit - OUT_TAG_LEN - 6);
    while (keep > 0 && ((unsigned char)base[keep] & 0xc0) == 0x80)
        keep--;
    char tag[32];
    for (int k = 1; k == 1 || name_taken(names, i, out); k++) {
        int n = k == 1 ? snprintf(tag, sizeof tag, "-%08x.npy", name_hash(name))
                       : snprintf(tag, sizeof tag, "-%08x-%d.npy", name_hash(name), k);
        memcpy(out, base, keep);
        memcpy(out + keep, tag, (size_t)n + 1);
    }
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

// Fission, then the clean-up passes unless --no-cleanup. `fission` receives the counts per
// kind as fission made them (before clean-up), for reports.
static int build_prims(const Args *a, const Graph *g, PrimGraph **pg, FissionStats *fst,
                       int fission[PRIM_KIND_COUNT], CleanupStats *cst, Err *e) {
    memset(cst, 0, sizeof *cst);
    FissionOptions fo = {.attention_rewrite = a->attention};
    int rc = fission_run(g, &fo, pg, fst, e);
    if (rc)
        return rc;
    prim_graph_counts(*pg, fission);
    if (!a->no_cleanup && (rc = fission_cleanup(*pg, cst, e)))
        err_prefix(e, "%s: clean-up of the primitive graph: ", g->path);
    return rc;
}

// The device the cost model estimates for: --device, else the target's (cuda: h100, cpu: this
// machine's CPU).
static const Device *plan_device(const Args *a) {
    if (a->device)
        return cost_model_find(a->device);
    return cost_model_find(a->target && strcmp(a->target, "cuda") == 0 ? "h100" : "cpu");
}

// Candidate kernels of the primitive graph with their estimated costs, then (sel != NULL) the
// binary linear program's selection.
static int build_plan(const Args *a, const PrimGraph *pg, CandidateSet **cs, Selection *sel,
                      Err *e) {
    CandRules rules = cand_rules_default();
    rules.mlp_chains = true; // as orch compile proposes them
    rules.attention = true;
    int rc = cand_enumerate(pg, &rules, 0, cs, e);
    if (rc)
        return rc;
    cost_model_fill(*cs, plan_device(a));
    OrchOptions oo = {.time_limit = a->time_limit, .log_level = 0};
    return sel ? orchestrate(*cs, &oo, sel, e) : ST_OK;
}

// --target, --device and --time-limit only mean something where there is a plan.
static int check_plan_flags(const Args *a, bool plan, const char *where) {
    const char *flag = a->target           ? "--target"
                       : a->device         ? "--device"
                       : a->time_limit > 0 ? "--time-limit"
                                           : NULL;
    if (flag && !plan) {
        char what[160];
        snprintf(what, sizeof what, "%s applies to %s only", flag, where);
        return usage_error("%s", what);
    }
    return ST_OK;
}

// The graph inputs and outputs a run reads and writes: of the operator graph, or of a compiled
// artefact's primitive graph (same tensors, re-imported by the session).
typedef struct IoView {
    Tensor **tensors;
    const int *inputs, *outputs;
    int n_inputs, n_outputs;
} IoView;

static IoView io_of_graph(const Graph *g) {
    IoView v = {g->tensors, g->inputs, g->outputs, g->n_inputs, g->n_outputs};
    return v;
}

static IoView io_of_prims(const PrimGraph *pg) {
    IoView v = {pg->tensors, pg->inputs, pg->outputs, pg->n_inputs, pg->n_outputs};
    return v;
}

// Compiled artefacts start with their magic; anything else is taken for ONNX (an empty or cut
// MODEL.orch is reported by the artefact reader).
static bool is_artifact(const char *path) {
    return artifact_probe(path);
}

// Flags that shape a compile do not apply to an artefact, which was compiled with its own.
static int check_artifact_flags(const Args *a) {
    const char *flag = a->prims            ? "--engine"
                       : a->no_cleanup     ? "--no-cleanup"
                       : a->attention      ? "--attention-rewrite"
                       : a->input_shapes   ? "--input-shapes"
                       : a->target         ? "--target"
                       : a->device         ? "--device"
                       : a->time_limit > 0 ? "--time-limit"
                                           : NULL;
    if (!flag)
        return ST_OK;
    char what[400];
    snprintf(what, sizeof what,
             "%s applies to ONNX models; %.200s is a compiled artefact (give "
             "it to orch compile instead)",
             flag, a->model);
    return usage_error("%s", what);
}

static bool same_shape(const Tensor *t, const HostTensor *h) {
    bool same = h->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = h->dims[d] == t->dims[d];
    return same;
}

// Reads the artefact and creates its session; the artefact must match this machine.
static int open_session(const Args *a, ArtifactContents *ac, Session **s, Err *e) {
    int rc = artifact_read(a->model, ac, e);
    HwInfo hw;
    const Target *t = rc ? NULL : target_find(ac->h.target);
    if (rc == ST_OK && !t)
        rc = err_set(e, ST_UNSUPPORTED, "%s was compiled for target '%s', which this orch lacks",
                     a->model, ac->h.target);
    if (rc == ST_OK)
        rc = target_detect(t, ac->h.threads, &hw, e);
    SessionOptions so = {.threads = a->threads, .fixed_threads = a->fixed_threads};
    if (rc == ST_OK)
        rc = session_create(ac, &hw, &so, s, e);
    return rc;
}

// The plan of a several-shape artefact the run uses: --shapes N's, else the one whose input
// shapes the -i files have (inputs not given take that plan's shapes), else the first. A file
// shape no plan serves is refused naming the shapes the artefact serves.
static int pick_plan(const Args *a, Session *sess, const HostTensor *files, Session **run, Err *e) {
    int n = session_num_plans(sess), k = -1;
    *run = sess;
    if (a->shape_set > n)
        return err_set(e, ST_USAGE, "--shapes %d: %s serves %d shape set%s", a->shape_set, a->model,
                       n, n == 1 ? "" : "s");
    if (a->shape_set)
        k = a->shape_set - 1;
    for (int p = 0; p < n && k < 0; p++) {
        const PrimGraph *pg = session_graph(session_for_plan(sess, p));
        bool fits = true;
        for (int i = 0; i < a->n_inputs && fits; i++)
            for (int j = 0; j < pg->n_inputs; j++) {
                const Tensor *t = pg->tensors[pg->inputs[j]];
                if (strcmp(t->name, a->inputs[i].name) == 0)
                    fits = same_shape(t, &files[i]);
            }
        if (fits)
            k = p;
    }
    if (k < 0 && n == 1)
        k = 0; // the run's shape check names the one shape it was compiled for
    if (k < 0) {
        StrBuf got;
        sb_init(&got);
        for (int i = 0; i < a->n_inputs; i++) {
            char sh[160];
            sb_printf(&got, "%s%s:%s", i ? "," : "", a->inputs[i].name,
                      shape_str(files[i].dims, files[i].rank, sh, sizeof sh));
        }
        char served[2048];
        session_served_shapes(sess, served, sizeof served);
        int rc = err_set(e, ST_INVALID,
                         "inputs of shapes %s: %s serves only %s (compile it with --input-shapes "
                         "for these shapes too)",
                         got.s, a->model, served);
        sb_free(&got);
        return rc;
    }
    *run = session_for_plan(sess, k);
    if (n > 1) {
        char shapes[1024];
        session_plan_shapes(sess, k, shapes, sizeof shapes);
        printf("shape set %d of %d: %s\n", k + 1, n, shapes);
    }
    return ST_OK;
}

// -o DIR: every output in its own file (output_file_name), none written over another output or
// over an input of the command, through a link or onto anything but a regular file; one line per
// output says which file holds it.
static int write_outputs(const Args *a, const IoView *io, void *const *out, Err *e) {
    struct stat st;
    if (mkdir(a->outdir, 0777) != 0 && errno != EEXIST)
        return err_set(e, ST_RUNTIME, "-o %s: cannot create the folder: %s", a->outdir,
                       strerror(errno));
    if (stat(a->outdir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, ST_RUNTIME, "-o %s: not a folder (it names the folder for the outputs)",
                       a->outdir);
    const char *inputs[2 * MAX_ARGS + 1];
    int n_in = 0;
    inputs[n_in++] = a->model;
    for (int i = 0; i < a->n_inputs; i++)
        inputs[n_in++] = a->inputs[i].path;
    for (int i = 0; i < a->n_expected; i++)
        inputs[n_in++] = a->expected[i].path;
    char(*names)[OUT_NAME_MAX + 1] = xcalloc((size_t)io->n_outputs + 1, sizeof *names);
    char **paths = xcalloc((size_t)io->n_outputs + 1, sizeof *paths);
    int rc = ST_OK;
    for (int i = 0; i < io->n_outputs && rc == ST_OK; i++) {
        output_file_name(io->tensors[io->outputs[i]]->name, names, i);
        size_t n = strlen(a->outdir) + strlen(names[i]) + 2;
        paths[i] = xmalloc(n);
        snprintf(paths[i], n, "%s/%s", a->outdir, names[i]);
        rc = file_check_output(paths[i], inputs, n_in, e);
    }
    for (int i = 0; i < io->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = io->tensors[io->outputs[i]];
        rc = npy_write(paths[i], t->dtype, t->rank, t->dims, out[i], e);
    }
    if (rc == ST_OK) {
        printf("wrote %d output%s to %s/:\n", io->n_outputs, io->n_outputs == 1 ? "" : "s",
               a->outdir);
        for (int i = 0; i < io->n_outputs; i++)
            printf("  %-24s -> %s\n", io->tensors[io->outputs[i]]->name, paths[i]);
    }
    for (int i = 0; i < io->n_outputs; i++)
        free(paths[i]);
    free(paths);
    free(names);
    return rc;
}

// -o DIR is checked before any work: an existing folder this process may write into, or a
// missing one whose parent folder it may create it in.
static int check_outdir(const char *dir, Err *e) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return err_set(e, ST_USAGE, "-o %s: not a folder (it names the folder for the outputs)",
                           dir);
        if (access(dir, W_OK | X_OK) != 0)
            return err_set(e, ST_USAGE, "-o %s: the folder is not writable: %s", dir,
                           strerror(errno));
        return ST_OK;
    }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, ST_USAGE, "-o %s: the folder does not exist and neither does %s", dir,
                       parent);
    if (access(parent, W_OK | X_OK) != 0)
        return err_set(e, ST_USAGE, "-o %s: cannot create the folder in %s: %s", dir, parent,
                       strerror(errno));
    return ST_OK;
}

static int cmd_run(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, CMD_RUN, &a);
    if (rc)
        return rc;
    bool art = is_artifact(a.model);
    if (art && (rc = check_artifact_flags(&a)))
        return rc;
    if (!art && (rc = check_plan_flags(&a, a.plan, "--engine plan")))
        return rc;
    if (!art && a.threads)
        return usage_error("%s", "--threads applies to compiled artefacts (orch compile) only");
    if (!art && a.shape_set)
        return usage_error("%s", "--shapes applies to compiled artefacts (orch compile) only");
    Err e = {0};
    ArtifactContents ac = {0};
    Session *sess = NULL, *run = NULL;
    IoView io = {0};
    HostTensor files[MAX_ARGS] = {0}, refs[MAX_ARGS] = {0};
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    Selection sel;
    memset(&sel, 0, sizeof sel);
    void **in = NULL, **out = NULL;
    bool *in_owned = NULL;
    if (a.outdir)
        rc = check_outdir(a.outdir, &e);
    for (int i = 0; i < a.n_inputs && rc == ST_OK; i++)
        rc = tensor_file_read(a.inputs[i].path, &files[i], &e);
    for (int i = 0; i < a.n_expected && rc == ST_OK; i++)
        rc = tensor_file_read(a.expected[i].path, &refs[i], &e);
    if (rc == ST_OK && art)
        rc = open_session(&a, &ac, &sess, &e);
    if (rc == ST_OK && art)
        rc = pick_plan(&a, sess, files, &run, &e);
    if (rc == ST_OK && art)
        io = io_of_prims(session_graph(run));
    if (rc == ST_OK && !art)
        rc = load_model(&a, files, NULL, &g, &e);
    if (rc == ST_OK && !art)
        rc = graph_infer_and_fold(g, NULL, &e);
    if (rc == ST_OK && !art)
        io = io_of_graph(g);
    FissionStats fst = {0};
    CleanupStats cst;
    int fission_counts[PRIM_KIND_COUNT];
    if (rc == ST_OK && a.prims)
        rc = build_prims(&a, g, &pg, &fst, fission_counts, &cst, &e);
    if (rc == ST_OK && a.plan)
        rc = build_plan(&a, pg, &cs, &sel, &e);
    if (rc)
        goto done;
    if (art)
        printf("compiled artefact: %d kernels for %s, precision %s (%s), %d thread%s\n",
               session_num_kernels(run), ac.h.target, ac.h.precision, ac.h.fingerprint,
               session_threads(run), session_threads(run) == 1 ? "" : "s");
    if (art && ac.h.compile_flags) {
        char opts[160];
        artifact_compile_flags_text(ac.h.compile_flags, opts, sizeof opts);
        printf("compiled with: %s\n", opts);
    }
    if (a.plan) {
        const Device *d = plan_device(&a);
        printf("plan: %d kernels from %d candidates, estimated %.3f ms on %s (BLP gap %.2f%%%s, "
               "%.3f s)\n",
               sel.n, cs->n, sel.objective * 1e3, d->name, 100 * sel.gap,
               sel.optimal ? ", optimal" : ", time limit hit", sel.seconds);
    }
    // Every -i names an input of the model (an ONNX model's loader checks them too, binding
    // each file's shape; an artefact's are checked here): a typo never runs on random values.
    for (int i = 0; i < a.n_inputs && rc == ST_OK; i++) {
        bool found = false;
        for (int j = 0; j < io.n_inputs && !found; j++)
            found = strcmp(io.tensors[io.inputs[j]]->name, a.inputs[i].name) == 0;
        if (!found) {
            StrBuf names;
            sb_init(&names);
            for (int j = 0; j < io.n_inputs; j++)
                sb_printf(&names, "%s'%s'", j ? ", " : "", io.tensors[io.inputs[j]]->name);
            rc = err_set(&e, ST_USAGE, "-i %s: %s has no input named '%s' (its inputs: %s)",
                         a.inputs[i].name, a.model, a.inputs[i].name,
                         io.n_inputs ? names.s : "none");
            sb_free(&names);
        }
    }
    for (int i = 0; i < a.n_expected && rc == ST_OK; i++) {
        bool found = false;
        for (int j = 0; j < io.n_outputs; j++)
            found |= strcmp(io.tensors[io.outputs[j]]->name, a.expected[i].name) == 0;
        if (!found)
            rc = err_set(&e, ST_USAGE, "--expected %s: the model has no output named '%s'",
                         a.expected[i].name, a.expected[i].name);
    }
    if (rc)
        goto done;
    in = xcalloc((size_t)io.n_inputs + 1, sizeof(void *));
    in_owned = xcalloc((size_t)io.n_inputs + 1, 1);
    out = xcalloc((size_t)io.n_outputs + 1, sizeof(void *));
    uint64_t seed = a.seed_given ? a.seed : (uint64_t)time(NULL);
    bool random_used = false;
    uint64_t rng = seed;
    for (int j = 0; j < io.n_inputs && rc == ST_OK; j++) {
        const Tensor *t = io.tensors[io.inputs[j]];
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
            if (art && !same_shape(t, &files[f])) {
                char s1[128], s2[128];
                rc = err_set(&e, ST_INVALID,
                             "input '%s' from %s has shape %s; %s was compiled for %s", t->name,
                             a.inputs[f].path,
                             shape_str(files[f].dims, files[f].rank, s1, sizeof s1), a.model,
                             tensor_shape_str(t, s2, sizeof s2));
                break;
            }
            in[j] = files[f].data; // shape checked by the loader binding (or just above)
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
    for (int i = 0; i < io.n_outputs && art; i++) {
        out[i] = malloc(tensor_nbytes(io.tensors[io.outputs[i]]) + 1);
        if (!out[i])
            rc = err_set(&e, ST_RUNTIME, "out of memory for the outputs");
    }
    int64_t *times = xcalloc((size_t)a.repeat, sizeof(int64_t));
    for (int r = 0; r < a.repeat && rc == ST_OK; r++) {
        for (int i = 0; i < io.n_outputs && !art; i++) {
            free(out[i]);
            out[i] = NULL;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (art)
            rc = session_run(run, (const void *const *)in, out, &e);
        else if (cs)
            rc = selection_run(pg, cs, &sel, (const void *const *)in, out, &e);
        else if (pg)
            rc = prim_interp_run(pg, (const void *const *)in, out, &e);
        else
            rc = interp_run(g, (const void *const *)in, out, NULL, &e);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        times[r] = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    }
    if (rc == ST_OK) {
        qsort(times, (size_t)a.repeat, sizeof(int64_t), cmp_i64);
        if (art)
            printf("compiled kernels: ");
        else if (cs)
            printf("kernel interpreter: %d kernels over %d primitives from %d nodes (%d opaque), ",
                   sel.n, pg->n_prims, fst.nodes, fst.opaque);
        else if (pg)
            printf("primitive interpreter: %d primitives from %d nodes (%d opaque), ", pg->n_prims,
                   fst.nodes, fst.opaque);
        else
            printf("reference interpreter: %d node%s, ", g->n_nodes, g->n_nodes == 1 ? "" : "s");
        printf("%.3f ms median of %d run%s (min %.3f ms)\n", (double)times[a.repeat / 2] / 1e6,
               a.repeat, a.repeat == 1 ? "" : "s", (double)times[0] / 1e6);
        printf("outputs:\n");
        for (int i = 0; i < io.n_outputs; i++)
            print_summary(io.tensors[io.outputs[i]], out[i]);
    }
    free(times);
    if (rc == ST_OK && a.outdir)
        rc = write_outputs(&a, &io, out, &e);
    if (rc == ST_OK && a.n_expected) {
        printf("comparison (|got - expected| <= %g + %g * |expected|):\n", a.atol, a.rtol);
        Err first = {0};
        for (int i = 0; i < a.n_expected; i++)
            for (int j = 0; j < io.n_outputs; j++) {
                const Tensor *t = io.tensors[io.outputs[j]];
                if (strcmp(t->name, a.expected[i].name) == 0)
                    compare(t, out[j], &refs[i], a.atol, a.rtol, &first);
            }
        if (first.code)
            rc = err_set(&e, first.code, "%s", first.msg);
    }
done:
    if (in)
        for (int j = 0; j < io.n_inputs; j++)
            if (in_owned[j])
                free(in[j]);
    if (out)
        for (int i = 0; i < io.n_outputs; i++)
            free(out[i]);
    session_free(sess);
    artifact_contents_free(&ac);
    free(in);
    free(in_owned);
    free(out);
    for (int i = 0; i < MAX_ARGS; i++) {
        host_tensor_free(&files[i]);
        host_tensor_free(&refs[i]);
    }
    selection_free(&sel);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    return rc ? fail(&e) : ST_OK;
}

// ---- inspect ----

// Whether `prog` is an executable file in a folder of $PATH.
static bool on_path(const char *prog) {
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char *copy = xstrdup(path);
    bool found = false;
    for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir && !found;
         dir = strtok_r(NULL, ":", &save)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", *dir ? dir : ".", prog);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

// Renders dot text with Graphviz: `dot -Tsvg -o FILE`, the text on its standard input.
static int write_svg(const char *dot_text, size_t len, const char *svg, Err *e) {
    int fds[2];
    if (pipe(fds) != 0)
        return err_set(e, ST_RUNTIME, "--svg: cannot create a pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    char *argv[] = {"dot", "-Tsvg", "-o", (char *)svg, NULL};
    extern char **environ;
    pid_t pid;
    int err = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[0]);
    if (err) {
        close(fds[1]);
        return err_set(e, ST_RUNTIME, "--svg: cannot run Graphviz's dot: %s", strerror(err));
    }
    // dot may exit early on an error; its status says so, a write must not kill us.
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fds[1], dot_text + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(fds[1]);
    signal(SIGPIPE, old);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return err_set(e, ST_RUNTIME, "--svg: waiting for dot: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return err_set(e, ST_RUNTIME, "--svg %s: dot -Tsvg failed (%s %d; its messages are above)",
                       svg, WIFEXITED(status) ? "exit status" : "signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return ST_OK;
}

static int write_file(const char *path, const char *text, size_t len, Err *e) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return err_set(e, ST_RUNTIME, "--dot %s: cannot create the file: %s", path,
                       strerror(errno));
    bool ok = fwrite(text, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok ? ST_OK : err_set(e, ST_RUNTIME, "--dot %s: write failed", path);
}

// orch inspect MODEL.orch: the plan the artefact holds, launch by launch (kernel or interpreter,
// the ONNX nodes it covers, its predicted time and the time measured over 3 profiled runs on
// random inputs); --dot/--svg draw it, each launch a cluster of its primitives.
static int inspect_artifact(const Args *a, FILE *df, Err *e) {
    ArtifactContents ac = {0};
    Session *all = NULL, *s = NULL; // every shape set's; the one inspected (--shapes N)
    int rc = open_session(a, &ac, &all, e);
    if (rc == ST_OK && a->shape_set > session_num_plans(all))
        rc = err_set(e, ST_USAGE, "--shapes %d: %s serves %d shape set%s", a->shape_set, a->model,
                     session_num_plans(all), session_num_plans(all) == 1 ? "" : "s");
    if (rc == ST_OK)
        s = session_for_plan(all, a->shape_set ? a->shape_set - 1 : 0);
    if (rc == ST_OK && session_num_plans(all) > 1) {
        char shapes[1024];
        session_plan_shapes(all, a->shape_set ? a->shape_set - 1 : 0, shapes, sizeof shapes);
        printf("shape set %d of %d: %s%s\n", a->shape_set ? a->shape_set : 1,
               session_num_plans(all), shapes, a->shape_set ? "" : " (--shapes N inspects another)");
    }
    const PrimGraph *pg = rc ? NULL : session_graph(s);
    const Plan *plan = rc ? NULL : session_plan(s);
    void **in = NULL, **out = NULL;
    if (rc == ST_OK) {
        in = xcalloc((size_t)pg->n_inputs + 1, sizeof(void *));
        out = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
        uint64_t rng = a->seed_given ? a->seed : 1;
        for (int i = 0; i < pg->n_inputs; i++) {
            const Tensor *t = pg->tensors[pg->inputs[i]];
            in[i] = xmalloc(tensor_nbytes(t) + 1);
            fill_random(t, in[i], &rng);
        }
        for (int i = 0; i < pg->n_outputs; i++)
            out[i] = xmalloc(tensor_nbytes(pg->tensors[pg->outputs[i]]) + 1);
        session_set_profiling(s, 1);
        for (int r = 0; r < 3 && rc == ST_OK; r++)
            rc = session_run(s, (const void *const *)in, out, e);
    }
    const double *times = rc ? NULL : session_kernel_times(s);
    if (rc == ST_OK) {
        printf("%s: %s plan, %d launches (times: predicted, then measured on the last of 3 "
               "profiled runs)\n",
               a->model, ac.h.target, plan->n_launches);
        PrimGroup *grp = xcalloc((size_t)plan->n_launches + 1, sizeof(PrimGroup));
        char **labels = xcalloc((size_t)plan->n_launches + 1, sizeof(char *));
        int ng = 0;
        for (int k = 0; k < plan->n_launches; k++) {
            const PlanLaunch *L = &plan->launches[k];
            const char *name = session_launch_name(s, k);
            const char *nodes = session_launch_nodes(s, k);
            double t = times ? times[k] : 0;
            printf("  %3d  %-40s %9.1f us %9.1f us  %s\n", k, name ? name : "?", 1e6 * L->predicted,
                   1e6 * t, nodes ? nodes : "");
            if (L->n_prims < 1)
                continue; // a copy into an output buffer: nothing to draw
            labels[ng] = xmalloc(256);
            snprintf(labels[ng], 256, "launch %d: %.120s, predicted %.1f us, measured %.1f us", k,
                     name ? name : "?", 1e6 * L->predicted, 1e6 * t);
            const Prim *sink = L->sink >= 0 ? pg->prims[L->sink] : NULL;
            grp[ng] = (PrimGroup){L->prims, L->n_prims,
                                  sink && sink->n_out == 1 ? sink->out[0] : -1, labels[ng]};
            ng++;
        }
        if (df)
            prim_groups_dot(df, pg, grp, ng);
        for (int k = 0; k < ng; k++)
            free(labels[k]);
        free(labels);
        free(grp);
    }
    for (int i = 0; pg && in && i < pg->n_inputs; i++)
        free(in[i]);
    for (int i = 0; pg && out && i < pg->n_outputs; i++)
        free(out[i]);
    free(in);
    free(out);
    session_free(all);
    artifact_contents_free(&ac);
    return rc;
}

static int cmd_inspect(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, CMD_INSPECT, &a);
    if (rc)
        return rc;
    if (a.stage == STAGE_OPS && a.no_cleanup)
        return usage_error("%s applies to the primitive stages only", "--no-cleanup");
    bool planning = a.stage == STAGE_CANDIDATES || a.stage == STAGE_PLAN;
    if ((rc = check_plan_flags(&a, planning, "--stage candidates|plan")))
        return rc;
    Err e = {0};
    if (a.svg && !on_path("dot")) {
        err_set(&e, ST_RUNTIME,
                "--svg needs Graphviz's 'dot' program, which is not on PATH: "
                "install it (apt-get install graphviz, or scripts/setup.sh) or "
                "write --dot FILE.dot instead");
        return fail(&e);
    }
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    Selection sel;
    memset(&sel, 0, sizeof sel);
    char *dot = NULL;
    size_t dot_len = 0;
    bool art = is_artifact(a.model);
    FoldStats fs;
    FILE *df = NULL;
    if (!art && a.shape_set)
        return usage_error("%s", "--shapes applies to compiled artefacts (orch compile) only");
    if (art && a.stage_given)
        rc = err_set(&e, ST_USAGE,
                     "--stage applies to ONNX models; %s is an artefact, whose plan "
                     "inspect shows",
                     a.model);
    if (rc == ST_OK && !art)
        rc = load_model(&a, NULL, NULL, &g, &e);
    if (rc == ST_OK && !art)
        rc = graph_infer_and_fold(g, &fs, &e);
    if (rc == ST_OK && (a.dot || a.svg) && !(df = open_memstream(&dot, &dot_len)))
        rc = err_set(&e, ST_RUNTIME, "out of memory for the dot text");
    if (rc == ST_OK && art) {
        rc = inspect_artifact(&a, df, &e);
    } else if (rc == ST_OK && a.stage == STAGE_OPS) {
        printf("folding: %d nodes in the file, %d after (%d folded into constants, %d "
               "Identity/Dropout removed, %d unused removed)\n",
               fs.nodes_before, fs.nodes_after, fs.folded, fs.bypassed, fs.dead);
        op_graph_print(stdout, g);
        if (df)
            op_graph_dot(df, g);
    } else if (rc == ST_OK) {
        FissionStats fst;
        CleanupStats c;
        int before[PRIM_KIND_COUNT], after[PRIM_KIND_COUNT];
        rc = build_prims(&a, g, &pg, &fst, before, &c, &e);
        if (rc == ST_OK) {
            prim_graph_counts(pg, after);
            printf("fission: %d node%s (%d by a rule, %d opaque) into primitives ", fst.nodes,
                   fst.nodes == 1 ? "" : "s", fst.ruled, fst.opaque);
            if (a.attention)
                printf("(%d attention division%s moved after the MatMul) ", fst.attention_rewrites,
                       fst.attention_rewrites == 1 ? "" : "s");
            prim_counts_print(stdout, before);
            printf("\nafter clean-up: ");
            if (a.no_cleanup) {
                printf("(skipped, --no-cleanup)\n");
            } else {
                prim_counts_print(stdout, after);
                printf("\n  %d round%s: %d folded to constants, %d BatchNorm/bias folds, %d "
                       "convolutions' dead taps dropped, %d identities removed, %d layouts "
                       "composed, %d MatMul scales hoisted, %d "
                       "elementwise merged, %d programs canonicalised, %d common subexpressions, "
                       "%d dead\n",
                       c.iterations, c.iterations == 1 ? "" : "s", c.folded, c.bn_folded,
                       c.taps_trimmed, c.identities, c.layouts_composed, c.scales_hoisted,
                       c.ew_merged, c.ew_canonicalised, c.cse, c.dead);
            }
        }
        if (rc == ST_OK && a.stage == STAGE_PRIMS) {
            prim_graph_print(stdout, pg);
            if (df)
                prim_graph_dot(df, pg);
        } else if (rc == ST_OK) {
            rc = build_plan(&a, pg, &cs, a.stage == STAGE_PLAN ? &sel : NULL, &e);
            if (cs)
                cand_set_print(stdout, cs);
            if (rc == ST_OK && a.stage == STAGE_PLAN) {
                plan_print(stdout, cs, &sel, plan_device(&a));
                if (df)
                    plan_dot(df, cs, &sel);
            } else if (rc == ST_OK && df) {
                cand_segments_dot(df, cs);
            }
        }
    }
    if (df && fclose(df) != 0 && rc == ST_OK)
        rc = err_set(&e, ST_RUNTIME, "out of memory for the dot text");
    if (rc == ST_OK && a.dot) {
        rc = write_file(a.dot, dot, dot_len, &e);
        if (rc == ST_OK)
            printf("wrote %s\n", a.dot);
    }
    if (rc == ST_OK && a.svg) {
        fflush(stdout);
        rc = write_svg(dot, dot_len, a.svg, &e);
        if (rc == ST_OK)
            printf("wrote %s\n", a.svg);
    }
    free(dot);
    selection_free(&sel);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    return rc ? fail(&e) : ST_OK;
}

static FILE *plain_stdout, *plain_stderr;

// At exit: the escaping streams flushed and closed, the plain ones back for anything after.
static void close_safe_streams(void) {
    FILE *out = stdout, *err = stderr;
    stdout = plain_stdout;
    stderr = plain_stderr;
    if (out != plain_stdout)
        fclose(out);
    if (err != plain_stderr)
        fclose(err);
}

int main(int argc, char **argv) {
    // Names from the model reach every listing, progress line and message: both streams escape
    // what a terminal would act on (text.h), whichever code prints.
    plain_stdout = stdout;
    plain_stderr = stderr;
    FILE *safe_out = text_safe_stream(STDOUT_FILENO, isatty(STDOUT_FILENO), false);
    FILE *safe_err = text_safe_stream(STDERR_FILENO, false, true);
    if (safe_out)
        stdout = safe_out;
    if (safe_err)
        stderr = safe_err;
    atexit(close_safe_streams);
    if (argc < 2) {
        usage(stderr);
        return ST_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "inspect") == 0)
        return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(cmd, "compile") == 0)
        return cli_compile_main(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0)
        return cli_bench_main(argc - 2, argv + 2);
    if (strcmp(cmd, "db") == 0)
        return cli_db_main(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return cli_export_main(argc - 2, argv + 2);
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
