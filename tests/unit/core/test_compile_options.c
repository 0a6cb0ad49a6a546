// Compiles with different options in one process must not influence each other: every option
// reaches the backend through its TargetMachine, never through process state (target.h). On the
// CPU (every machine): a compile the CPU target refuses (fp16, half storage) leaves the next one
// untouched, and compiles with different thread counts, interleaved, each give the artefact of
// their own options. On a GPU: a model compiled under fp16, another under fp32, then the first
// again: the fp32 compile passes its float32 check with no reduced-precision kernel, and the two
// fp16 compiles agree; half storage keeps a chain's tiny tensors float32 and refuses a model whose
// output it loses.
#include "../gpu_check.h"
#include "../model_builder.h"

#include "backend/cuda/cuda_api.h"
#include "compile/compile.h"
#include "plan/artifact.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[] = "/tmp/orch_compile_options_XXXXXX";
static char g_mlp[1200], g_conv[1200], g_tiny[1200], g_cancel[1200];

// y = relu(x W1 + b1) W2: two products, so fp16 has tensor-core configs to offer.
static void write_mlp(const char *path) {
    const int64_t xd[] = {256, 128}, wd[] = {128, 128}, bd[] = {128};
    static float w1[128 * 128], w2[128 * 128], b1[128];
    for (int i = 0; i < 128 * 128; i++) {
        w1[i] = (float)((i * 37) % 101 - 50) / 400.0f;
        w2[i] = (float)((i * 53) % 97 - 48) / 400.0f;
    }
    for (int i = 0; i < 128; i++)
        b1[i] = (float)(i % 7) / 10.0f;
    MB *b = mb_new(17);
    mb_init(b, mb_raw(b, "w1", 1, 2, wd, w1, sizeof w1));
    mb_init(b, mb_raw(b, "w2", 1, 2, wd, w2, sizeof w2));
    mb_init(b, mb_raw(b, "b1", 1, 1, bd, b1, sizeof b1));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "MatMul", "mm1", "x,w1", "h", NULL);
    mb_node(b, "Add", "add", "h,b1", "hb", NULL);
    mb_node(b, "Relu", "relu", "hb", "r", NULL);
    mb_node(b, "MatMul", "mm2", "r,w2", "y", NULL);
    mb_output(b, "y");
    CHECK(mb_write(b, path));
}

// A 3x3 convolution followed by a sigmoid.
static void write_conv(const char *path) {
    const int64_t xd[] = {1, 8, 16, 16}, wd[] = {8, 8, 3, 3};
    static float w[8 * 8 * 9];
    for (int i = 0; i < 8 * 8 * 9; i++)
        w[i] = (float)((i * 29) % 61 - 30) / 200.0f;
    MB *b = mb_new(17);
    mb_init(b, mb_raw(b, "w", 1, 4, wd, w, sizeof w));
    mb_input(b, "x", 1, 4, xd);
    const int64_t pads[] = {1, 1, 1, 1};
    mb_node(b, "Conv", "conv", "x,w", "c", mb_attr_ints(b, "pads", 4, pads), NULL);
    mb_node(b, "Sigmoid", "sig", "c", "y", NULL);
    mb_output(b, "y");
    CHECK(mb_write(b, path));
}

// y = ((relu(x Wa) W1) W2) with W1 and W2 of about 1e-5: the last two products' values (about
// 1e-5 and 5e-10) are float16 subnormals or zeros, as a randomly initialised MobileNetV2's are.
static void write_tiny(const char *path) {
    const int64_t xd[] = {64, 32}, wd[] = {32, 32};
    static float wa[32 * 32], w1[32 * 32], w2[32 * 32];
    for (int i = 0; i < 32 * 32; i++) {
        wa[i] = (float)((i * 37) % 101 - 50) / 100.0f;
        w1[i] = (float)((i * 53) % 97 - 48) / 400.0f * 1e-4f;
        w2[i] = (float)((i * 29) % 61 - 30) / 240.0f * 1e-4f;
    }
    MB *b = mb_new(17);
    mb_init(b, mb_raw(b, "wa", 1, 2, wd, wa, sizeof wa));
    mb_init(b, mb_raw(b, "w1", 1, 2, wd, w1, sizeof w1));
    mb_init(b, mb_raw(b, "w2", 1, 2, wd, w2, sizeof w2));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "MatMul", "mma", "x,wa", "h", NULL);
    mb_node(b, "Relu", "relu", "h", "r", NULL);
    mb_node(b, "MatMul", "mm1", "r,w1", "t", NULL);
    mb_node(b, "MatMul", "mm2", "t,w2", "y", NULL);
    mb_output(b, "y");
    CHECK(mb_write(b, path));
}

// y = transpose(0.1 x + 1000) - 1000: within float16's range everywhere, but float16 holds 1000
// to 0.5, so the transposed half tensor keeps none of 0.1 x and y comes out 0.
static void write_cancel(const char *path) {
    const int64_t xd[] = {8, 16}, perm[] = {1, 0}, scalar[1] = {1}; // rank 0: no dims read
    const float tenth = 0.1f, big = 1000.0f;
    MB *b = mb_new(17);
    mb_init(b, mb_raw(b, "tenth", 1, 0, scalar, &tenth, sizeof tenth));
    mb_init(b, mb_raw(b, "big", 1, 0, scalar, &big, sizeof big));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "Mul", "scale", "x,tenth", "a", NULL);
    mb_node(b, "Add", "shift", "a,big", "s", NULL);
    mb_node(b, "Transpose", "tr", "s", "st", mb_attr_ints(b, "perm", 2, perm), NULL);
    mb_node(b, "Sub", "unshift", "st,big", "y", NULL);
    mb_output(b, "y");
    CHECK(mb_write(b, path));
}

// Compiles model into TAG.orch with the database TAG.db (db: another tag's database, or NULL)
// and, where log is given, the progress lines in it.
static int compile_logged(const char *model, const char *target, const char *precision, bool half,
                          int threads, const char *tag, const char *db_tag, FILE *log,
                          CompileReport *rep, ArtifactHeader *h, Err *e) {
    char art[1300], db[1300];
    snprintf(art, sizeof art, "%s/%s.orch", g_dir, tag);
    snprintf(db, sizeof db, "%s/%s.db", g_dir, db_tag ? db_tag : tag);
    CompileOptions co = {.target = target,
                         .precision = precision,
                         .half_storage = half,
                         .threads = threads,
                         .db_path = db,
                         .top_k = 2,
                         .seed = 7,
                         .progress = log};
    memset(rep, 0, sizeof *rep);
    int rc = compile_model(model, &co, art, rep, e);
    if (rc == ST_OK && h) {
        ArtifactContents a;
        rc = artifact_read(art, &a, e);
        if (rc == ST_OK) {
            *h = a.h;
            artifact_contents_free(&a);
        }
    }
    return rc;
}

static int compile(const char *model, const char *target, const char *precision, bool half,
                   int threads, const char *tag, CompileReport *rep, ArtifactHeader *h, Err *e) {
    return compile_logged(model, target, precision, half, threads, tag, NULL, NULL, rep, h, e);
}

// The progress lines written to f so far, NUL-terminated (malloc'd).
static char *log_text(FILE *f) {
    long n = ftell(f);
    char *s = xcalloc((size_t)(n > 0 ? n : 0) + 1, 1);
    rewind(f);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    rewind(f);
    return s;
}

static void cpu_refusals_leave_no_trace(void) {
    CompileReport rep;
    ArtifactHeader h;
    Err e = {0};
    CHECK(compile(g_mlp, "cpu", "fp16", false, 1, "refused16", &rep, NULL, &e) == ST_USAGE);
    CHECK_MSG(strstr(e.msg, "fp16") && strstr(e.msg, "cpu"), "%s", e.msg);
    Err e2 = {0};
    CHECK(compile(g_mlp, "cpu", "fp32", true, 1, "refusedhalf", &rep, NULL, &e2) == ST_USAGE);
    CHECK_MSG(strstr(e2.msg, "half storage"), "%s", e2.msg);
    Err e3 = {0};
    int rc = compile(g_mlp, "cpu", NULL, false, 1, "after", &rep, &h, &e3);
    CHECK_MSG(rc == ST_OK, "%s", e3.msg);
    if (rc == ST_OK) {
        CHECK(strcmp(h.precision, "fp32") == 0 && strcmp(rep.precision, "fp32") == 0);
        CHECK(rep.reduced == 0);
    }
}

// Thread counts are part of the machine (the fingerprint and the artefact's threads): two
// compiles with different counts, interleaved with a third model, each keep their own.
static void cpu_interleaved_thread_counts(void) {
    CompileReport r1, r2, r3;
    ArtifactHeader h1, h2, h3;
    Err e = {0};
    int rc = compile(g_mlp, "cpu", NULL, false, 1, "mlp_t1", &r1, &h1, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK)
        rc = compile(g_conv, "cpu", NULL, false, 2, "conv_t2", &r2, &h2, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK)
        rc = compile(g_mlp, "cpu", NULL, false, 1, "mlp_t1_again", &r3, &h3, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc)
        return;
    CHECK_MSG(h1.threads == 1 && h2.threads == 2 && h3.threads == 1, "threads %d %d %d", h1.threads,
              h2.threads, h3.threads);
    CHECK(strstr(h1.fingerprint, "threads=1") && strstr(h2.fingerprint, "threads=2"));
    CHECK_MSG(strcmp(h1.fingerprint, h3.fingerprint) == 0, "'%s' vs '%s'", h1.fingerprint,
              h3.fingerprint);
}

static void cuda_fp16_then_fp32_then_fp16(void) {
    if (!gpu_check_have_device())
        return;
    CompileReport a, b, c;
    ArtifactHeader ha, hb, hc;
    Err e = {0};
    int rc = compile(g_mlp, "cuda", "fp16", false, 0, "cuda_a16", &a, &ha, &e);
    CHECK_MSG(rc == ST_OK, "fp16: %s", e.msg);
    if (rc == ST_OK)
        rc = compile(g_conv, "cuda", "fp32", false, 0, "cuda_b32", &b, &hb, &e);
    CHECK_MSG(rc == ST_OK, "fp32 after fp16: %s", e.msg);
    if (rc == ST_OK)
        rc = compile(g_mlp, "cuda", "fp16", false, 0, "cuda_a16_again", &c, &hc, &e);
    CHECK_MSG(rc == ST_OK, "fp16 again: %s", e.msg);
    if (rc)
        return;
    CHECK(strcmp(ha.precision, "fp16") == 0 && strcmp(hb.precision, "fp32") == 0 &&
          strcmp(hc.precision, "fp16") == 0);
    // The fp32 compile checked at float32's tolerance and chose no reduced-precision kernel.
    CHECK_MSG(b.reduced == 0, "%d reduced-precision kernels under fp32", b.reduced);
    CHECK_MSG(b.check_tol <= 1e-4 + 1e-12, "fp32 end-to-end tolerance %g", b.check_tol);
    // The fp16 compiles offered their tensor-core kernels both times and chose alike.
    CHECK_MSG(a.reduced > 0 && c.reduced > 0, "tensor-core kernels chosen: %d, %d", a.reduced,
              c.reduced);
    CHECK_MSG(a.tol == c.tol && a.check_tol == c.check_tol, "tolerances %g/%g vs %g/%g", a.tol,
              a.check_tol, c.tol, c.check_tol);
}

// Half storage on a GPU. The tiny chain under fp16: the range analysis keeps its tiny tensors
// float32 (the artefact records them), the measured deviation from the float32 model stays within
// float16's rounding, and a second compile on the same database takes both from it. The
// cancellation, under fp16 and bf16: refused before tuning (ST_UNSUPPORTED naming y and what to
// do), no artefact left, and refused again from the database's record.
static void cuda_half_storage_range_and_deviation(void) {
    if (!gpu_check_have_device())
        return;
    CompileReport rep;
    ArtifactHeader h;
    Err e = {0};
    FILE *log = tmpfile();
    CHECK(log != NULL);
    if (!log)
        return;
    int rc = compile_logged(g_tiny, "cuda", "fp16", true, 0, "tiny16", NULL, log, &rep, &h, &e);
    char *text = log_text(log);
    CHECK_MSG(rc == ST_OK, "tiny chain under fp16 storage: %s", e.msg);
    double dev = -1;
    const char *at = strstr(text, "float16 storage moves the outputs by ");
    if (at)
        sscanf(at, "float16 storage moves the outputs by %lf", &dev);
    CHECK_MSG(rc != ST_OK || (h.wide_tensors[0] && strstr(text, "whose largest |value| is under")),
              "wide set '%s'; log:\n%s", h.wide_tensors, text);
    CHECK_MSG(dev >= 0 && dev < 1e-2, "deviation %g; log:\n%s", dev, text);
    free(text);
    rc =
        compile_logged(g_tiny, "cuda", "fp16", true, 0, "tiny16_warm", "tiny16", log, &rep, &h, &e);
    text = log_text(log);
    CHECK_MSG(rc == ST_OK && strstr(text, "float16 range from the database") &&
                  strstr(text, "), from the database"),
              "warm compile: %s; log:\n%s", rc ? e.msg : "", text);
    free(text);
    fclose(log);
    static const char *const precs[2] = {"fp16", "bf16"};
    for (int i = 0; i < 2; i++) {
        for (int warm = 0; warm < 2; warm++) {
            char tag[32], art[1300];
            snprintf(tag, sizeof tag, "cancel_%s_%d", precs[i], warm);
            snprintf(art, sizeof art, "%s/%s.orch", g_dir, tag);
            Err ce = {0};
            char db_tag[32];
            snprintf(db_tag, sizeof db_tag, "cancel_%s_0", precs[i]);
            rc = compile_logged(g_cancel, "cuda", precs[i], true, 0, tag, db_tag, NULL, &rep, NULL,
                                &ce);
            CHECK_MSG(rc == ST_UNSUPPORTED && strstr(ce.msg, "output 'y'") &&
                          strstr(ce.msg, "without --half-storage") &&
                          (i == 1) == !strstr(ce.msg, "--precision bf16"),
                      "%s (%s): rc %d: %s", precs[i], warm ? "warm" : "cold", rc, ce.msg);
            CHECK_MSG(access(art, F_OK) != 0, "%s left an artefact", tag);
        }
    }
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_mlp, sizeof g_mlp, "%s/mlp.onnx", g_dir);
    snprintf(g_conv, sizeof g_conv, "%s/conv.onnx", g_dir);
    snprintf(g_tiny, sizeof g_tiny, "%s/tiny.onnx", g_dir);
    snprintf(g_cancel, sizeof g_cancel, "%s/cancel.onnx", g_dir);
    write_mlp(g_mlp);
    write_conv(g_conv);
    write_tiny(g_tiny);
    write_cancel(g_cancel);
    RUN(cpu_refusals_leave_no_trace);
    RUN(cpu_interleaved_thread_counts);
    RUN(cuda_fp16_then_fp32_then_fp16);
    RUN(cuda_half_storage_range_and_deviation);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", g_dir);
    return CHECK_DONE();
}
