// Runs the ONNX backend node tests (prepared by prepare_node_tests.py) through orch's public C
// API: load model.onnx, feed test_data_set_*/input_*.pb, compare with output_*.pb.
// Tolerance: floats |got-ref| <= 1e-5 + 1e-3*|ref| (the ONNX backend's rtol), NaN == NaN;
// integers and bools exactly. Cases listed in the expected-failures file (name, then the reason)
// must fail; one that passes is reported so the list stays true.
// --engine prims runs each case through fission and the clean-up passes (the primitive
// interpreter), compares with the stored outputs as above, and also with the operator-level
// interpreter's outputs on the same inputs: floats within 1e-6 + 1e-5*|ops|, integers exactly.
//
// --engine compiled compiles each case for the CPU target (orch_compile: generated C kernels,
// one config each, the profile database --db) and runs the artefact through an orch_session;
// --target cuda compiles for the CUDA target instead (NVRTC kernels checked and timed on the GPU;
// tests/gpu/run_gpu_tests.sh). --shard K/N runs every N-th case from the K-th, so shards can run
// in parallel. --xfail may be given more than once (the lists add up).
//
// usage: node_tests DIR [--engine ops|prims|compiled] [--target cpu|cuda] [--xfail FILE]...
//                   [--filter SUBSTRING] [--shard K/N] [--db FILE] [-v]
#include "onnx/load.h"
#include "orch.h"
#include "runtime/npy.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct XFail {
    char name[256];
    char reason[512];
    bool seen;
} XFail;

static XFail *xfails;
static int n_xfails;

static void load_xfails(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "node_tests: cannot open %s\n", path);
        exit(2);
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        xfails = realloc(xfails, sizeof(XFail) * (size_t)(n_xfails + 1));
        XFail *x = &xfails[n_xfails++];
        memset(x, 0, sizeof *x);
        sscanf(line, "%255s %511[^\n]", x->name, x->reason);
    }
    fclose(f);
}

static XFail *find_xfail(const char *name) {
    for (int i = 0; i < n_xfails; i++)
        if (strcmp(xfails[i].name, name) == 0)
            return &xfails[i];
    return NULL;
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

// Tolerances against the stored outputs, and of the primitive engine against the op engine.
#define STORED_ATOL 1e-5
#define STORED_RTOL 1e-3
#define OPS_ATOL 1e-6
#define OPS_RTOL 1e-5

static orch_engine engine = ORCH_ENGINE_OPS;
static bool compiled;              // --engine compiled
static char workdir[4096];         // compiled: artefacts go here
static const char *db_path;        // compiled: the profile database
static const char *target = "cpu"; // compiled: --target

// Compares one output with a reference of dtype t and shape rank/dims (floats within
// atol + rtol*|ref|, NaN equal to NaN; integers exactly); writes a reason naming `against`.
static bool compare(const orch_tensor *got, DType t, int rank, const int64_t *dims, const void *ref,
                    double atol, double rtol, const char *against, char *why, size_t n) {
    if ((int)got->dtype != (int)t) {
        snprintf(why, n, "output '%s' dtype %s, %s has %s", got->name,
                 dtype_name((DType)got->dtype), against, dtype_name(t));
        return false;
    }
    bool same = got->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = got->dims[d] == dims[d];
    if (!same) {
        char a[128], b[128];
        snprintf(why, n, "output '%s' shape %s, %s has %s", got->name,
                 shape_str(got->dims, got->rank, a, sizeof a), against,
                 shape_str(dims, rank, b, sizeof b));
        return false;
    }
    int64_t numel = 1;
    for (int d = 0; d < rank; d++)
        numel *= dims[d];
    for (int64_t i = 0; i < numel; i++) {
        bool ok;
        double g = elem_get_f64(t, got->data, i), r = elem_get_f64(t, ref, i);
        if (dtype_is_float(t)) {
            ok = (isnan(g) && isnan(r)) || g == r || fabs(g - r) <= atol + rtol * fabs(r);
        } else {
            ok = elem_get_i64(t, got->data, i) == elem_get_i64(t, ref, i);
        }
        if (!ok) {
            snprintf(why, n, "output '%s' element %lld: got %.9g, %s has %.9g", got->name,
                     (long long)i, g, against, r);
            return false;
        }
    }
    return true;
}

// Allocates output buffers as the model describes them (caller frees .data).
static void alloc_outputs(orch_model *m, orch_tensor *out, int no) {
    for (int i = 0; i < no; i++) {
        orch_model_output_info(m, i, &out[i]);
        out[i].data = malloc(out[i].nbytes + 1);
    }
}

// Runs one case; returns true on pass, else fills why.
static bool run_case(const char *dir, char *why, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    orch_ctx *ctx = orch_ctx_create();
    orch_model *m = NULL, *m_ops = NULL; // m_ops: the op-level oracle for the primitive engine
    bool pass = true;
    orch_load_options opt = {.engine = engine};
    orch_session *sess = NULL;
    if (compiled) {
        char art[4096];
        snprintf(art, sizeof art, "%s/case.orch", workdir);
        orch_compile_options co = {.target = target, .db_path = db_path, .top_k = 1, .jobs = 1};
        if (orch_compile(ctx, path, &co, art) != ORCH_OK ||
            orch_session_create(ctx, art, NULL, &sess) != ORCH_OK) {
            snprintf(why, n, "compile: %s", orch_last_error(ctx));
            orch_ctx_free(ctx);
            return false;
        }
        remove(art);
    }
    if (orch_model_load(ctx, path, &opt, &m) != ORCH_OK ||
        (engine == ORCH_ENGINE_PRIMS && orch_model_load(ctx, path, NULL, &m_ops) != ORCH_OK)) {
        snprintf(why, n, "load: %s", orch_last_error(ctx));
        orch_model_free(m);
        orch_session_free(sess);
        orch_ctx_free(ctx);
        return false;
    }
    int ni = orch_model_num_inputs(m), no = orch_model_num_outputs(m);
    orch_tensor *in = calloc((size_t)ni + 1, sizeof *in),
                *out = calloc((size_t)no + 1, sizeof *out);
    orch_tensor *out_ops = calloc((size_t)no + 1, sizeof *out_ops);
    HostTensor *hin = calloc((size_t)ni + 1, sizeof *hin),
               *href = calloc((size_t)no + 1, sizeof *href);
    for (int set = 0; pass; set++) {
        char sdir[4096];
        snprintf(sdir, sizeof sdir, "%s/test_data_set_%d", dir, set);
        if (!file_exists(sdir))
            break;
        for (int i = 0; i < ni && pass; i++) {
            Err e = {0};
            snprintf(path, sizeof path, "%s/input_%d.pb", sdir, i);
            if (tensor_file_read(path, &hin[i], &e)) {
                snprintf(why, n, "input %d: %s", i, e.msg);
                pass = false;
                break;
            }
            orch_model_input_info(m, i, &in[i]);
            in[i].name = NULL; // by position
            in[i].dtype = (orch_dtype)hin[i].dtype;
            in[i].rank = hin[i].rank;
            memcpy(in[i].dims, hin[i].dims, sizeof(int64_t) * (size_t)hin[i].rank);
            in[i].data = hin[i].data;
        }
        if (pass) {
            alloc_outputs(m, out, no);
            if (m_ops)
                alloc_outputs(m_ops, out_ops, no);
        }
        if (pass && sess && orch_session_run(ctx, sess, in, ni, out, no) != ORCH_OK) {
            snprintf(why, n, "run: %s", orch_last_error(ctx));
            pass = false;
        }
        if (pass && !sess && orch_model_run_reference(ctx, m, in, ni, out, no) != ORCH_OK) {
            snprintf(why, n, "run: %s", orch_last_error(ctx));
            pass = false;
        }
        if (pass && m_ops && orch_model_run_reference(ctx, m_ops, in, ni, out_ops, no) != ORCH_OK) {
            snprintf(why, n, "run on the op-level engine: %s", orch_last_error(ctx));
            pass = false;
        }
        for (int i = 0; i < no && pass; i++) {
            Err e = {0};
            snprintf(path, sizeof path, "%s/output_%d.pb", sdir, i);
            if (tensor_file_read(path, &href[i], &e)) {
                snprintf(why, n, "expected output %d: %s", i, e.msg);
                pass = false;
            } else {
                pass = compare(&out[i], href[i].dtype, href[i].rank, href[i].dims, href[i].data,
                               STORED_ATOL, STORED_RTOL, "the stored output", why, n);
            }
            if (pass && m_ops)
                pass = compare(&out[i], (DType)out_ops[i].dtype, out_ops[i].rank, out_ops[i].dims,
                               out_ops[i].data, OPS_ATOL, OPS_RTOL, "the op-level engine", why, n);
        }
        for (int i = 0; i < ni; i++)
            host_tensor_free(&hin[i]);
        for (int i = 0; i < no; i++) {
            host_tensor_free(&href[i]);
            free(out[i].data);
            out[i].data = NULL;
            free(out_ops[i].data);
            out_ops[i].data = NULL;
        }
    }
    free(in);
    free(out);
    free(out_ops);
    free(hin);
    free(href);
    orch_model_free(m);
    orch_model_free(m_ops);
    orch_session_free(sess);
    orch_ctx_free(ctx);
    return pass;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *filter = "";
    bool verbose = false, bad_args = false;
    int shard = 0, shards = 1;
    setvbuf(stdout, NULL, _IOLBF, 0); // a shard killed by a time limit keeps the lines it printed
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--xfail") == 0 && v) {
            load_xfails(argv[++i]);
        } else if (strcmp(argv[i], "--filter") == 0 && v) {
            filter = argv[++i];
        } else if (strcmp(argv[i], "--engine") == 0 && v &&
                   (strcmp(v, "ops") == 0 || strcmp(v, "prims") == 0 ||
                    strcmp(v, "compiled") == 0)) {
            compiled = strcmp(v, "compiled") == 0;
            engine = strcmp(argv[++i], "prims") == 0 ? ORCH_ENGINE_PRIMS : ORCH_ENGINE_OPS;
        } else if (strcmp(argv[i], "--shard") == 0 && v &&
                   sscanf(v, "%d/%d", &shard, &shards) == 2 && shards > 0 && shard >= 0 &&
                   shard < shards) {
            i++;
        } else if (strcmp(argv[i], "--target") == 0 && v &&
                   (strcmp(v, "cpu") == 0 || strcmp(v, "cuda") == 0)) {
            target = argv[++i];
        } else if (strcmp(argv[i], "--db") == 0 && v) {
            db_path = argv[++i];
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = true;
        } else if (argv[i][0] != '-' && !dir) {
            dir = argv[i];
        } else {
            bad_args = true;
        }
    }
    if (!dir || bad_args) {
        fprintf(stderr, "usage: node_tests DIR [--engine ops|prims|compiled] [--target cpu|cuda] "
                        "[--xfail FILE]... [--filter SUBSTRING] [--shard K/N] [--db FILE] [-v]\n");
        return 2;
    }
    char dbbuf[4200];
    if (compiled) {
        const char *tmp = getenv("TMPDIR");
        snprintf(workdir, sizeof workdir, "%s/orch-node-tests-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(workdir)) {
            fprintf(stderr, "node_tests: cannot create %s\n", workdir);
            return 2;
        }
        if (!db_path) {
            snprintf(dbbuf, sizeof dbbuf, "%s/profile.db", workdir);
            db_path = dbbuf;
        }
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "node_tests: cannot open %s (run prepare_node_tests.py first)\n", dir);
        return 2;
    }
    char **names = NULL;
    int count = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strncmp(de->d_name, "test_", 5) == 0 && strstr(de->d_name, filter)) {
            names = realloc(names, sizeof(char *) * (size_t)(count + 1));
            names[count++] = strdup(de->d_name);
        }
    closedir(d);
    if (count)
        qsort(names, (size_t)count, sizeof(char *), cmp_str);
    int passed = 0, failed = 0, skipped = 0, xfailed = 0;
    for (int k = 0; k < count; k++) {
        char cdir[4096], skip[4096], why[4096] = "";
        if (k % shards != shard) {
            free(names[k]);
            continue;
        }
        snprintf(cdir, sizeof cdir, "%s/%s", dir, names[k]);
        snprintf(skip, sizeof skip, "%s/SKIP", cdir);
        XFail *x = find_xfail(names[k]);
        if (x)
            x->seen = true;
        if (file_exists(skip)) {
            skipped++;
            if (verbose)
                printf("skip  %s (opset outside 11-21)\n", names[k]);
            free(names[k]);
            continue;
        }
        bool ok = run_case(cdir, why, sizeof why);
        if (ok && !x) {
            passed++;
            if (verbose)
                printf("ok    %s\n", names[k]);
        } else if (ok && x) {
            failed++;
            printf("XPASS %s: passes but is listed as an expected failure (%s)\n", names[k],
                   x->reason);
        } else if (x) {
            xfailed++;
            if (verbose)
                printf("xfail %s: %s [listed: %s]\n", names[k], why, x->reason);
        } else {
            failed++;
            printf("FAIL  %s: %s\n", names[k], why);
        }
        free(names[k]);
    }
    free(names);
    if (compiled && db_path == dbbuf) {
        char p[4300];
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s%s", dbbuf, suffix[i]);
            remove(p);
        }
    }
    if (compiled)
        rmdir(workdir);
    printf("node tests (%s engine%s%s): %d passed, %d expected failures (listed with reasons), %d "
           "skipped (opset)\n",
           compiled                      ? "compiled"
           : engine == ORCH_ENGINE_PRIMS ? "primitive"
                                         : "op-level",
           compiled ? ", target " : "", compiled ? target : "", passed, xfailed, skipped);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
