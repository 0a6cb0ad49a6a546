// `orch compile`: an ONNX model → a compiled artefact for a target (src/compile/compile.h), with
// progress lines on stderr and a summary on stdout.
#include "cmd_compile.h"

#include "../backend/kernel_lab.h"
#include "../compile/compile.h"
#include "orch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void compile_usage(FILE *f, bool options) {
    fprintf(f, "usage: orch compile MODEL.onnx -t cpu|cuda -o MODEL.orch [--db FILE] [--threads N]"
               "\n           [--top-k K] [--jobs J] [--input-shapes NAME:DIMS[,...]]..."
               " [--attention-rewrite]\n           [--time-limit S] [--seed S]"
               " [--precision fp32|tf32|fp16|bf16] [--half-storage]\n           [--layout "
               "auto|nchw|nhwc] [--no-mlp-chains] [--no-attention] [--explain|--explain-all]"
               "\n           [--strict] [--budget S] [--trust-timings] [--gpus all|N|LIST]"
               " [--check-tol T]\n           [--quiet]\n");
    if (!options)
        return;
    fprintf(f,
            "  -t, --target        cpu (generated C, the default) or cuda (NVRTC, libraries)\n"
            "  -o, --output        the artefact to write\n"
            "  --db FILE           profile database (default ~/.cache/orch/profile.db)\n"
            "  --threads N         kernel threads (default: every core this process may use)\n"
            "  --top-k K           configs measured per chosen kernel (default 8)\n"
            "  --jobs J            parallel compiler processes (default: cores)\n"
            "  --input-shapes      shapes of inputs the model leaves symbolic; given several\n"
            "                      times (at most 16), one plan per shape set in one\n"
            "                      artefact (the weights once): a run picks the plan whose\n"
            "                      shapes match its inputs and refuses any other shape\n"
            "  --attention-rewrite the softmax's division after the attention MatMul\n"
            "  --time-limit S      the solver's limit in seconds\n"
            "  --seed S            the random inputs of the checks and timings\n"
            "  --precision P       linear kernels' arithmetic (tf32, fp16, bf16: cuda only)\n"
            "  --half-storage      tensors stored in fp16/bf16 (with that --precision)\n"
            "  --layout L          channels-last convolution layouts under half storage\n"
            "  --no-mlp-chains     no fused MLP chain kernels; --no-attention: no fused "
            "attention\n"
            "  --explain           why each matmul/conv runs where it does, and each kernel\n"
            "                      not generated with its time (--explain-all: every candidate)\n"
            "  --strict            fail (exit status 3, no artefact) when a kernel is not\n"
            "                      generated: the summary lists them, one line per op\n"
            "  --budget S          tune for about S seconds, then keep the best plan found\n"
            "                      (each single-primitive kernel is still measured once;\n"
            "                      the summary says what was skipped)\n"
            "  --trust-timings     take every timing as measured, however busy the machine\n"
            "                      (default: an unstable one is re-timed, else kept suspect)\n"
            "  --gpus all|N|LIST   GPUs that measure (cuda): every one of GPU 0's kind (the\n"
            "                      default), the first N of them, or ordinals with 0 (0,2);\n"
            "                      the plan is the same, tuning about N times faster\n"
            "  --check-tol T       the end-to-end check's relative bound (default: 1e-4\n"
            "                      under fp32, wider with depth under reduced precisions)\n"
            "  --quiet             no progress lines\n"
            "The summary names every kernel not generated (op, ONNX nodes, the interpreter\n"
            "that runs it, why, its share of the predicted time); `orch info MODEL.onnx` tells\n"
            "per operator whether each target generates it before compiling.\n"
            "exit codes: 0 ok, 1 usage, 2 invalid model, 3 unsupported (--strict: a kernel not\n"
            "            generated), 4 mismatch, 5 runtime error\n");
}

static int bad(const char *fmt, const char *arg) {
    fprintf(stderr, "orch compile: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    compile_usage(stderr, false);
    return ST_USAGE;
}

static int parse_int(const char *v, const char *flag, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        char what[128];
        snprintf(what, sizeof what, "%s expects an integer from %d to %d, got '%%s'", flag, lo, hi);
        return bad(what, v);
    }
    *out = (int)x;
    return ST_OK;
}

int cli_compile_args(int argc, char **argv, CompileOptions *o, const char **model, const char **out,
                     bool *quiet, bool out_required) {
    memset(o, 0, sizeof *o);
    *model = NULL;
    *out = NULL;
    *quiet = false;
    o->seed = 1;
    const char *layout = NULL; // --layout's value, for messages
    // Several --input-shapes: the shape sets (the strings are argv's; one compile per process).
    static const char *sets[ARTIFACT_MAX_PLANS];
    int n_sets = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = strcmp(s, "-t") == 0 || strcmp(s, "--target") == 0 || strcmp(s, "-o") == 0 ||
                     strcmp(s, "--output") == 0 || strcmp(s, "--db") == 0 ||
                     strcmp(s, "--threads") == 0 || strcmp(s, "--top-k") == 0 ||
                     strcmp(s, "--jobs") == 0 || strcmp(s, "--input-shapes") == 0 ||
                     strcmp(s, "--time-limit") == 0 || strcmp(s, "--seed") == 0 ||
                     strcmp(s, "--precision") == 0 || strcmp(s, "--layout") == 0 ||
                     strcmp(s, "--budget") == 0 || strcmp(s, "--gpus") == 0 ||
                     strcmp(s, "--check-tol") == 0;
        if (takes && !v)
            return bad("%s needs a value", s);
        int rc = ST_OK;
        if (s[0] != '-') {
            if (*model)
                return bad("unexpected argument '%s'", s);
            *model = s;
            continue;
        } else if (strcmp(s, "-t") == 0 || strcmp(s, "--target") == 0) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                return bad("unknown target '%s' (known: cpu, cuda)", v);
            o->target = v;
        } else if (strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0) {
            *out = v;
        } else if (strcmp(s, "--db") == 0) {
            o->db_path = v;
        } else if (strcmp(s, "--threads") == 0) {
            rc = parse_int(v, s, 1, 4096, &o->threads);
        } else if (strcmp(s, "--top-k") == 0) {
            rc = parse_int(v, s, 1, 16, &o->top_k);
        } else if (strcmp(s, "--jobs") == 0) {
            rc = parse_int(v, s, 1, 256, &o->jobs);
        } else if (strcmp(s, "--input-shapes") == 0) {
            if (n_sets == ARTIFACT_MAX_PLANS)
                return bad("--input-shapes given more than %s times (an artefact holds at most "
                           "16 shape sets)",
                           "16");
            sets[n_sets++] = v;
        } else if (strcmp(s, "--time-limit") == 0) {
            char *end;
            o->time_limit = strtod(v, &end);
            if (end == v || *end || !(o->time_limit > 0))
                return bad("--time-limit expects a positive number of seconds, got '%s'", v);
        } else if (strcmp(s, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            // (strtoull takes "-1" for 2^64 - 1: only digits make an unsigned integer.)
            if (end == v || *end || errno || v[0] < '0' || v[0] > '9')
                return bad("--seed expects an unsigned integer, got '%s'", v);
        } else if (strcmp(s, "--precision") == 0) {
            Precision p;
            if (!precision_parse(v, &p))
                return bad("--precision expects fp32, tf32, fp16 or bf16, got '%s'", v);
            o->precision = v;
        } else if (strcmp(s, "--layout") == 0) {
            if (!compile_layout_parse(v, &o->layout))
                return bad("--layout expects auto, nchw or nhwc, got '%s'", v);
            layout = v;
        } else if (strcmp(s, "--no-mlp-chains") == 0) {
            o->no_mlp_chains = true;
        } else if (strcmp(s, "--no-attention") == 0) {
            o->no_attention = true;
        } else if (strcmp(s, "--budget") == 0) {
            char *end;
            errno = 0;
            o->budget_s = strtod(v, &end);
            if (end == v || *end || errno || !(o->budget_s > 0) || o->budget_s > 1e7)
                return bad("--budget expects seconds (a positive number), got '%s'", v);
        } else if (strcmp(s, "--check-tol") == 0) {
            char *end;
            errno = 0;
            o->check_tol = strtod(v, &end);
            if (end == v || *end || errno || !(o->check_tol > 0) || o->check_tol >= 1)
                return bad("--check-tol expects a relative bound in (0, 1), got '%s'", v);
        } else if (strcmp(s, "--gpus") == 0) {
            LabDeviceSpec spec;
            Err ge = {0};
            if (lab_devices_parse(v, &spec, &ge)) {
                fprintf(stderr, "orch compile: %s\n", ge.msg);
                compile_usage(stderr, false);
                return ST_USAGE;
            }
            o->gpus = v;
        } else if (strcmp(s, "--trust-timings") == 0) {
            o->trust_timings = true;
        } else if (strcmp(s, "--explain") == 0) {
            o->explain = o->explain ? o->explain : 1; // --explain-all wins
        } else if (strcmp(s, "--explain-all") == 0) {
            o->explain = 2;
        } else if (strcmp(s, "--attention-rewrite") == 0) {
            o->attention_rewrite = true;
        } else if (strcmp(s, "--strict") == 0) {
            o->strict = true;
        } else if (strcmp(s, "--half-storage") == 0) {
            o->half_storage = true;
        } else if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0) {
            *quiet = true;
        } else {
            return bad("unknown option '%s'", s);
        }
        if (rc)
            return rc;
        if (takes)
            i++;
    }
    if (!*model)
        return bad("%s", "no model given");
    if (n_sets == 1)
        o->input_shapes = sets[0];
    else if (n_sets > 1) {
        o->shape_sets = sets;
        o->n_shape_sets = n_sets;
    }
    // Tensor cores are the CUDA target's; the C kernels compute in float32 only.
    if (o->precision && strcmp(o->precision, "fp32") != 0 &&
        (!o->target || strcmp(o->target, "cpu") == 0)) {
        char what[160];
        snprintf(what, sizeof what,
                 "--precision %s needs -t cuda; the CPU target computes in float32%%s",
                 o->precision);
        return bad(what, "");
    }
    if (o->gpus && (!o->target || strcmp(o->target, "cpu") == 0))
        return bad("--gpus %s needs -t cuda; the CPU target measures on the host", o->gpus);
    if (o->half_storage &&
        (!o->precision || (strcmp(o->precision, "fp16") != 0 && strcmp(o->precision, "bf16") != 0)))
        return bad("%s", "--half-storage needs --precision fp16 or bf16 (and -t cuda)");
    // Channels-last layouts are made under half storage only: a choice without it would be
    // recorded in the artefact but change nothing.
    if (o->layout != COMPILE_LAYOUT_AUTO && !o->half_storage)
        return bad("--layout %s needs --half-storage (channels-last layouts are made for "
                   "half-storage convolutions only)",
                   layout);
    if (o->explain && *quiet)
        return bad("%s", "--explain prints with the progress lines, which --quiet turns off");
    if (out_required && !*out)
        return bad("%s", "no output file given (-o MODEL.orch)");
    return ST_OK;
}

int cli_compile_main(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            compile_usage(stdout, true);
            return ST_OK;
        }
    CompileOptions o;
    const char *model, *out;
    bool quiet;
    int rc = cli_compile_args(argc, argv, &o, &model, &out, &quiet, true);
    if (rc)
        return rc;
    o.progress = quiet ? NULL : stderr;
    CompileReport rep;
    Err e = {0};
    rc = compile_model(model, &o, out, &rep, &e);
    // Strict mode's refusal comes after the summary, which names every kernel not generated.
    if (rc == ST_OK)
        printf("wrote %s\n", out);
    if (rc == ST_OK || rep.refused)
        compile_report_print(&rep, stdout);
    fflush(stdout);
    if (rc)
        fprintf(stderr, "orch: error: %s\n", e.msg);
    return rc;
}
