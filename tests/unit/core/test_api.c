// Unit tests of the public API (include/orch.h): load from memory, input/output info, running
// with caller buffers, first-error-wins messages, dtype/shape checks, NULL-tolerant frees, and
// orch_compile's options (bad ones refused by name, the plan-shaping ones recorded in the
// artefact, strict mode's refusal of kernels not generated).
#include "../check.h"
#include "../model_builder.h"
#include "orch.h"
#include "plan/artifact.h"
#include "plan/artifact_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint8_t *relu_add_model(size_t *len, const char *shape_spec_dim) {
    (void)shape_spec_dim;
    const int64_t xd[] = {-1, 4}, bd[] = {4};
    MB *b = mb_new(17);
    float bias[4] = {0.5f, -1, 2, -3};
    mb_init(b, mb_raw(b, "bias", 1, 1, bd, bias, sizeof bias));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "Add", "add", "x,bias", "t", NULL);
    mb_node(b, "Relu", "relu", "t", "y", NULL);
    mb_output(b, "y");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

static void load_and_run(void) {
    size_t len;
    uint8_t *buf = relu_add_model(&len, NULL);
    orch_ctx *ctx = orch_ctx_create();
    orch_model *m = NULL;
    orch_load_options opt = {.input_shapes = "x:3x4"};
    CHECK_MSG(orch_model_load_memory(ctx, buf, len, &opt, &m) == ORCH_OK, "%s", orch_last_error(ctx));
    if (m) {
        CHECK(orch_model_num_inputs(m) == 1 && orch_model_num_outputs(m) == 1);
        orch_tensor in, out;
        CHECK(orch_model_input_info(m, 0, &in) == ORCH_OK);
        CHECK(strcmp(in.name, "x") == 0 && in.rank == 2 && in.dims[0] == 3 && in.nbytes == 48);
        CHECK(orch_model_output_info(m, 0, &out) == ORCH_OK && out.dtype == ORCH_FLOAT32);
        CHECK(orch_model_input_info(m, 1, &in) == ORCH_ERR_USAGE);
        float x[12], y[12];
        for (int i = 0; i < 12; i++)
            x[i] = (float)i * 0.25f - 1.0f;
        in.data = x;
        out.data = y;
        CHECK_MSG(orch_model_run_reference(ctx, m, &in, 1, &out, 1) == ORCH_OK, "%s",
                  orch_last_error(ctx));
        const float bias[4] = {0.5f, -1, 2, -3};
        for (int i = 0; i < 12; i++) {
            float want = x[i] + bias[i % 4];
            CHECK(y[i] == (want > 0 ? want : 0));
        }
        // Wrong dtype and shape are reported with the input's name.
        orch_tensor bad = in;
        bad.dtype = ORCH_FLOAT64;
        CHECK(orch_model_run_reference(ctx, m, &bad, 1, &out, 1) == ORCH_ERR_INVALID);
        CHECK(strstr(orch_last_error(ctx), "'x'") && strstr(orch_last_error(ctx), "float64"));
        // The first error wins until cleared.
        bad = in;
        bad.dims[0] = 5;
        orch_model_run_reference(ctx, m, &bad, 1, &out, 1);
        CHECK(strstr(orch_last_error(ctx), "float64") != NULL);
        orch_clear_error(ctx);
        CHECK(orch_model_run_reference(ctx, m, &bad, 1, &out, 1) == ORCH_ERR_INVALID);
        CHECK(strstr(orch_last_error(ctx), "shape 5x4") && strstr(orch_last_error(ctx), "3x4"));
    }
    orch_model_free(m);
    orch_ctx_free(ctx);
    free(buf);
}

static void errors_and_nulls(void) {
    orch_ctx *ctx = orch_ctx_create();
    orch_model *m = (orch_model *)1;
    CHECK(orch_model_load(ctx, "/nonexistent/model.onnx", NULL, &m) == ORCH_ERR_INVALID);
    CHECK(m == NULL && strstr(orch_last_error(ctx), "/nonexistent/model.onnx"));
    CHECK(orch_last_status(ctx) == ORCH_ERR_INVALID);
    orch_clear_error(ctx);
    size_t len;
    uint8_t *buf = relu_add_model(&len, NULL);
    CHECK(orch_model_load_memory(ctx, buf, len, NULL, &m) == ORCH_ERR_INVALID); // symbolic dim
    CHECK(strstr(orch_last_error(ctx), "--input-shapes") != NULL);
    free(buf);
    orch_model_free(NULL);
    orch_ctx_free(NULL);
    CHECK(orch_model_num_inputs(NULL) == 0);
    CHECK(strcmp(orch_last_error(NULL), "") == 0);
    orch_ctx_free(ctx);
}

// The primitive engine (fission + clean-up + primitive interpreter) gives the operators' results.
static void primitive_engine(void) {
    size_t len;
    uint8_t *buf = relu_add_model(&len, NULL);
    orch_ctx *ctx = orch_ctx_create();
    orch_model *ops = NULL, *prims = NULL, *bad = NULL;
    orch_load_options o1 = {.input_shapes = "x:2x4"};
    orch_load_options o2 = {.input_shapes = "x:2x4", .engine = ORCH_ENGINE_PRIMS};
    CHECK(orch_model_load_memory(ctx, buf, len, &o1, &ops) == ORCH_OK);
    CHECK_MSG(orch_model_load_memory(ctx, buf, len, &o2, &prims) == ORCH_OK, "%s",
              orch_last_error(ctx));
    if (ops && prims) {
        float x[8] = {-3, -0.25f, 0.75f, 1e4f, 2.5f, -1e-3f, 0.125f, 7}, y1[8], y2[8];
        orch_tensor in, out1, out2;
        orch_model_input_info(ops, 0, &in);
        orch_model_output_info(ops, 0, &out1);
        orch_model_output_info(prims, 0, &out2);
        in.data = x;
        out1.data = y1;
        out2.data = y2;
        CHECK(orch_model_run_reference(ctx, ops, &in, 1, &out1, 1) == ORCH_OK);
        CHECK(orch_model_run_reference(ctx, prims, &in, 1, &out2, 1) == ORCH_OK);
        CHECK(memcmp(y1, y2, sizeof y1) == 0);
    }
    orch_load_options o3 = {.input_shapes = "x:2x4", .engine = (orch_engine)7};
    CHECK(orch_model_load_memory(ctx, buf, len, &o3, &bad) == ORCH_ERR_USAGE && !bad);
    orch_model_free(ops);
    orch_model_free(prims);
    orch_ctx_free(ctx);
    free(buf);
}

// orch_compile's options: a layout it does not know, a layout without half storage, half storage
// on the CPU target and an explain level out of range are usage errors naming the option, with no
// artefact written; --no-mlp-chains / --no-attention are recorded in the artefact's compile flags
// and the artefact runs.
static void compile_options(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/orch-api-XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        CHECK_MSG(false, "cannot create %s", dir);
        return;
    }
    char model[300], out[300], db[300];
    snprintf(model, sizeof model, "%s/m.onnx", dir);
    snprintf(out, sizeof out, "%s/m.orch", dir);
    snprintf(db, sizeof db, "%s/p.db", dir);
    size_t len;
    uint8_t *buf = relu_add_model(&len, NULL);
    FILE *f = fopen(model, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f)
        fclose(f);
    free(buf);
    orch_ctx *ctx = orch_ctx_create();
    static const struct {
        orch_compile_options o;
        const char *want;
    } bad[] = {
        {{.layout = "bogus"}, "layout 'bogus' (known: auto, nchw, nhwc)"},
        {{.layout = "nhwc"}, "a layout other than auto needs half storage"},
        {{.layout = "nchw"}, "a layout other than auto needs half storage"},
        {{.half_storage = 1}, "half storage needs the cuda target"},
        {{.explain = 3}, "explain 3 (0, 1 or 2)"},
        {{.explain = -1}, "explain -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        orch_compile_options o = bad[i].o;
        o.input_shapes = "x:3x4";
        o.db_path = db;
        orch_clear_error(ctx);
        orch_status st = orch_compile(ctx, model, &o, out);
        CHECK_MSG(st == ORCH_ERR_USAGE && strstr(orch_last_error(ctx), bad[i].want), "%zu: %d %s",
                  i, st, orch_last_error(ctx));
        CHECK_MSG(access(out, F_OK) != 0, "%zu: an artefact was written", i);
    }
    orch_clear_error(ctx);
    orch_compile_options o = {.input_shapes = "x:3x4", .db_path = db, .top_k = 1, .jobs = 1,
                              .no_mlp_chains = 1, .no_attention = 1, .layout = "auto"};
    orch_status st = orch_compile(ctx, model, &o, out);
    CHECK_MSG(st == ORCH_OK, "%s", orch_last_error(ctx));
    ArtifactContents a;
    Err e = {0};
    if (st == ORCH_OK && artifact_read(out, &a, &e) == ST_OK) {
        CHECK(a.h.compile_flags == (ARTIFACT_COMPILE_NO_MLP_CHAINS | ARTIFACT_COMPILE_NO_ATTENTION));
        CHECK(a.h.load_flags == 0);
        artifact_contents_free(&a);
        orch_session *s = NULL;
        CHECK_MSG(orch_session_create(ctx, out, NULL, &s) == ORCH_OK, "%s", orch_last_error(ctx));
        orch_session_free(s);
    } else if (st == ORCH_OK) {
        CHECK_MSG(false, "%s", e.msg);
    }
    orch_ctx_free(ctx);
    unlink(model);
    unlink(out);
    unlink(db);
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", db);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", db);
    unlink(wal);
    if (rmdir(dir) != 0)
        printf("  (%s left behind)\n", dir);
}

// relu_add_model's Add, then TopK (k = 2 over the last axis) of its result: an op a target may
// leave to an interpreter.
static uint8_t *topk_model(size_t *len) {
    const int64_t xd[] = {-1, 4}, bd[] = {4}, kd[] = {1};
    MB *b = mb_new(17);
    float bias[4] = {0.5f, -1, 2, -3};
    int64_t k[1] = {2};
    mb_init(b, mb_raw(b, "bias", 1, 1, bd, bias, sizeof bias));
    mb_init(b, mb_raw(b, "k", 7, 1, kd, k, sizeof k));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "Add", "add", "x,bias", "t", NULL);
    mb_node(b, "TopK", "top2", "t,k", "y,i", NULL);
    mb_output(b, "y");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

// Launches of the artefact at path an interpreter runs; -1 when it cannot be read.
static int interpreted_launches(const char *path) {
    ArtifactContents a;
    Err e = {0};
    if (artifact_read(path, &a, &e) != ST_OK)
        return -1;
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    Plan *plan = NULL;
    int n = -1;
    if (artifact_import_model(&a, path, &g, &pg, &plan, &e) == ST_OK) {
        n = 0;
        for (int i = 0; i < plan->n_launches; i++)
            n += plan->launches[i].kind == PLAN_INTERP || plan->launches[i].kind == PLAN_OPAQUE;
    }
    plan_free(plan);
    prim_graph_free(pg);
    graph_free(g);
    artifact_contents_free(&a);
    return n;
}

static void write_model(const char *path, const uint8_t *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len);
    if (f)
        fclose(f);
}

// orch_compile_options.strict: a model whose kernels are all generated (Add, Relu) compiles and
// records it in the compile flags; the TopK model, compiled without it, tells whether its plan
// has kernels an interpreter runs, and with it fails exactly then (ORCH_ERR_UNSUPPORTED naming
// the node, no artefact written), else compiles: which ops are generated is the targets' matter.
static void strict_option(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/orch-api-XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        CHECK_MSG(false, "cannot create %s", dir);
        return;
    }
    char model[300], topk[300], out[300], db[300];
    snprintf(model, sizeof model, "%s/m.onnx", dir);
    snprintf(topk, sizeof topk, "%s/topk.onnx", dir);
    snprintf(out, sizeof out, "%s/m.orch", dir);
    snprintf(db, sizeof db, "%s/p.db", dir);
    size_t len;
    uint8_t *buf = relu_add_model(&len, NULL);
    write_model(model, buf, len);
    free(buf);
    buf = topk_model(&len);
    write_model(topk, buf, len);
    free(buf);
    orch_ctx *ctx = orch_ctx_create();
    orch_compile_options o = {
        .input_shapes = "x:3x4", .db_path = db, .top_k = 1, .jobs = 1, .strict = 1};
    orch_status st = orch_compile(ctx, model, &o, out);
    CHECK_MSG(st == ORCH_OK, "%s", orch_last_error(ctx));
    ArtifactContents a;
    Err e = {0};
    if (st == ORCH_OK && artifact_read(out, &a, &e) == ST_OK) {
        CHECK_MSG(a.h.compile_flags == ARTIFACT_COMPILE_STRICT, "%#x", a.h.compile_flags);
        artifact_contents_free(&a);
        CHECK(interpreted_launches(out) == 0);
    }
    unlink(out);
    o.strict = 0;
    st = orch_compile(ctx, topk, &o, out);
    CHECK_MSG(st == ORCH_OK, "%s", orch_last_error(ctx));
    int n = st == ORCH_OK ? interpreted_launches(out) : -1;
    CHECK(n >= 0);
    unlink(out);
    o.strict = 1;
    orch_clear_error(ctx);
    st = orch_compile(ctx, topk, &o, out);
    printf("  TopK model: %d kernel%s not generated\n", n, n == 1 ? "" : "s");
    if (n > 0) {
        const char *msg = orch_last_error(ctx);
        CHECK_MSG(st == ORCH_ERR_UNSUPPORTED && strstr(msg, "strict mode") && strstr(msg, "top2") &&
                      strstr(msg, "TopK"),
                  "%d: %s", st, msg);
        CHECK_MSG(access(out, F_OK) != 0, "strict mode refused but wrote the artefact");
    } else if (n == 0) {
        CHECK_MSG(st == ORCH_OK, "%s", orch_last_error(ctx));
    }
    orch_ctx_free(ctx);
    unlink(model);
    unlink(topk);
    unlink(out);
    unlink(db);
    char wal[320];
    snprintf(wal, sizeof wal, "%s-wal", db);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", db);
    unlink(wal);
    if (rmdir(dir) != 0)
        printf("  (%s left behind)\n", dir);
}

int main(void) {
    RUN(primitive_engine);
    RUN(load_and_run);
    RUN(errors_and_nulls);
    RUN(compile_options);
    RUN(strict_option);
    return CHECK_DONE();
}
