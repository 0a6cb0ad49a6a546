// Compiles with different options in one process must not influence each other: every option
// reaches the backend through its TargetMachine, never through process state (target.h). On the
// CPU (every machine): a compile the CPU target refuses (fp16, half storage) leaves the next one
// untouched, and compiles with different thread counts, interleaved, each give the artefact of
// their own options. On a GPU: a model compiled under fp16, another under fp32, then the first
// again: the fp32 compile passes its float32 check with no reduced-precision kernel, and the two
// fp16 compiles agree.
#include "../check.h"
#include "../model_builder.h"

#include "backend/cuda/cuda_api.h"
#include "compile/compile.h"
#include "plan/artifact.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[] = "/tmp/orch_compile_options_XXXXXX";
static char g_mlp[1200], g_conv[1200];

// Serialises the model b builds to path and frees b.
static void write_model(MB *b, const char *path) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f)
        fclose(f);
    free(buf);
    mb_free(b);
}

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
    write_model(b, path);
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
    write_model(b, path);
}

static int compile(const char *model, const char *target, const char *precision, bool half,
                   int threads, const char *tag, CompileReport *rep, ArtifactHeader *h, Err *e) {
    char art[1300], db[1300];
    snprintf(art, sizeof art, "%s/%s.orch", g_dir, tag);
    snprintf(db, sizeof db, "%s/%s.db", g_dir, tag);
    CompileOptions co = {.target = target,
                         .precision = precision,
                         .half_storage = half,
                         .threads = threads,
                         .db_path = db,
                         .top_k = 2,
                         .seed = 7};
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

static bool have_gpu(void) {
    Err e = {0};
    if (cuda_api_load(&e))
        return true;
    const char *req = getenv("ORCH_REQUIRE_GPU");
    CHECK_MSG(!(req && *req && strcmp(req, "0") != 0), "ORCH_REQUIRE_GPU is set, but: %s", e.msg);
    printf("  skip: no CUDA device on this machine (%s)\n", e.msg);
    return false;
}

static void cuda_fp16_then_fp32_then_fp16(void) {
    if (!have_gpu())
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

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_mlp, sizeof g_mlp, "%s/mlp.onnx", g_dir);
    snprintf(g_conv, sizeof g_conv, "%s/conv.onnx", g_dir);
    write_mlp(g_mlp);
    write_conv(g_conv);
    RUN(cpu_refusals_leave_no_trace);
    RUN(cpu_interleaved_thread_counts);
    RUN(cuda_fp16_then_fp32_then_fp16);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", g_dir);
    return CHECK_DONE();
}
