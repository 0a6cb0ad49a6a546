// orch_session_run_device (include/orch.h): a compiled model run from buffers in device memory
// on a caller's stream. Everywhere: a CPU artefact runs from host buffers exactly as
// orch_session_run does, and refuses a stream. On a GPU (skipped without one unless
// ORCH_REQUIRE_GPU is set): a CUDA artefact run from device buffers gives, bit for bit, what the
// host entry gives; the run waits for the caller's stream (its input is still being written
// there, behind a train of large memsets, when the call is made); a host pointer is refused
// naming the input; and a run with a NULL stream works.
#include "../check.h"
#include "../model_builder.h"
#include "backend/cuda/cuda_api.h"
#include "orch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ROWS = 64, WIDTH = 256, N = ROWS * WIDTH };

// y = relu(x W): one product and its epilogue.
static uint8_t *model(size_t *len) {
    static float w[WIDTH * WIDTH];
    for (int i = 0; i < WIDTH * WIDTH; i++)
        w[i] = (float)sin(0.37 * i) * 0.1f;
    const int64_t wd[2] = {WIDTH, WIDTH}, xd[2] = {ROWS, WIDTH};
    MB *m = mb_new(17);
    mb_init(m, mb_raw(m, "w", 1, 2, wd, w, sizeof w));
    mb_input(m, "x", 1, 2, xd);
    mb_node(m, "MatMul", "mm", "x,w", "h", NULL);
    mb_node(m, "Relu", "act", "h", "y", NULL);
    mb_output(m, "y");
    uint8_t *buf = mb_pack(m, len);
    mb_free(m);
    return buf;
}

static MbTemp g_tmp; // the model, the database; each test's artefact beside them

static orch_session *compiled(orch_ctx *ctx, const char *target, const char *art) {
    orch_compile_options o = {.target = target, .db_path = g_tmp.db, .top_k = 1, .jobs = 1};
    if (orch_compile(ctx, g_tmp.model, &o, art) != ORCH_OK)
        return NULL;
    orch_session *s = NULL;
    if (orch_session_create(ctx, art, NULL, &s) != ORCH_OK)
        return NULL;
    return s;
}

static void tensors(orch_session *s, orch_tensor *in, orch_tensor *out, void *x, void *y) {
    orch_session_input_info(s, 0, in);
    orch_session_output_info(s, 0, out);
    in->data = x;
    out->data = y;
}

static float g_x[N];

static void cpu_artifact_takes_host_buffers(void) {
    char art[300];
    snprintf(art, sizeof art, "%s/cpu.orch", g_tmp.dir);
    orch_ctx *ctx = orch_ctx_create();
    orch_session *s = compiled(ctx, "cpu", art);
    CHECK_MSG(s, "%s", orch_last_error(ctx));
    static float want[N], got[N];
    orch_tensor in, out;
    if (s) {
        tensors(s, &in, &out, g_x, want);
        CHECK(orch_session_run(ctx, s, &in, 1, &out, 1) == ORCH_OK);
        tensors(s, &in, &out, g_x, got);
        CHECK_MSG(orch_session_run_device(ctx, s, &in, 1, &out, 1, NULL) == ORCH_OK, "%s",
                  orch_last_error(ctx));
        CHECK(memcmp(want, got, sizeof got) == 0);
        int dummy;
        orch_clear_error(ctx);
        CHECK(orch_session_run_device(ctx, s, &in, 1, &out, 1, &dummy) == ORCH_ERR_USAGE);
        CHECK_MSG(strstr(orch_last_error(ctx), "takes no stream"), "%s", orch_last_error(ctx));
    }
    orch_session_free(s);
    orch_ctx_free(ctx);
    unlink(art);
}

static void cuda_artifact_takes_device_buffers(void) {
    Err le = {0};
    const CudaApi *api = cuda_api_load(&le);
    CudaDevice dev;
    if (!api || cuda_device_open(api, 0, &dev, &le) != ST_OK) {
        const char *req = getenv("ORCH_REQUIRE_GPU");
        CHECK_MSG(!(req && *req && strcmp(req, "0") != 0), "ORCH_REQUIRE_GPU is set, but: %s",
                  le.msg);
        printf("  skip: no CUDA device on this machine (%s)\n", le.msg);
        return;
    }
    char art[300];
    snprintf(art, sizeof art, "%s/cuda.orch", g_tmp.dir);
    orch_ctx *ctx = orch_ctx_create();
    orch_session *s = compiled(ctx, "cuda", art);
    CHECK_MSG(s, "%s", orch_last_error(ctx));
    static float want[N], got[N], garbage[N];
    for (int i = 0; i < N; i++)
        garbage[i] = -1e30f;
    orch_tensor in, out;
    CUdeviceptr dx = 0, dy = 0, big = 0;
    CUstream st = NULL;
    const size_t big_bytes = (size_t)1 << 30;
    Err e = {0};
    bool ok = s && cuda_device_bind(&dev, &e) == ST_OK &&
              CUDA_TRY(api, &e, cuMemAlloc, &dx, sizeof g_x) == ST_OK &&
              CUDA_TRY(api, &e, cuMemAlloc, &dy, sizeof got) == ST_OK &&
              CUDA_TRY(api, &e, cuMemAlloc, &big, big_bytes) == ST_OK &&
              CUDA_TRY(api, &e, cuStreamCreate, &st, CU_STREAM_NON_BLOCKING) == ST_OK;
    CHECK_MSG(ok, "%s", e.msg);
    if (ok) {
        tensors(s, &in, &out, g_x, want);
        CHECK(orch_session_run(ctx, s, &in, 1, &out, 1) == ORCH_OK);
        // The input is still being written on the caller's stream when the run is asked for:
        // 16 memsets of 1 GiB (milliseconds of work) queued before the copy of x, over a
        // device buffer that holds garbage until then.
        CHECK(CUDA_TRY(api, &e, cuMemcpyHtoD, dx, garbage, sizeof garbage) == ST_OK);
        for (int k = 0; k < 16; k++)
            CHECK(CUDA_TRY(api, &e, cuMemsetD8Async, big, (unsigned char)k, big_bytes, st) ==
                  ST_OK);
        CHECK(CUDA_TRY(api, &e, cuMemcpyHtoDAsync, dx, g_x, sizeof g_x, st) == ST_OK);
        tensors(s, &in, &out, (void *)(uintptr_t)dx, (void *)(uintptr_t)dy);
        CHECK_MSG(orch_session_run_device(ctx, s, &in, 1, &out, 1, st) == ORCH_OK, "%s",
                  orch_last_error(ctx));
        CHECK(CUDA_TRY(api, &e, cuMemcpyDtoH, got, dy, sizeof got) == ST_OK);
        CHECK_MSG(memcmp(want, got, sizeof got) == 0, "device run differs from the host run");
        // The default stream, and the output overwritten first: the same values again.
        CHECK(CUDA_TRY(api, &e, cuMemcpyHtoD, dy, garbage, sizeof garbage) == ST_OK);
        CHECK(orch_session_run_device(ctx, s, &in, 1, &out, 1, NULL) == ORCH_OK);
        CHECK(CUDA_TRY(api, &e, cuMemcpyDtoH, got, dy, sizeof got) == ST_OK);
        CHECK(memcmp(want, got, sizeof got) == 0);
        // A host pointer: refused, naming the input.
        orch_clear_error(ctx);
        tensors(s, &in, &out, g_x, (void *)(uintptr_t)dy);
        CHECK(orch_session_run_device(ctx, s, &in, 1, &out, 1, st) == ORCH_ERR_USAGE);
        CHECK_MSG(strstr(orch_last_error(ctx), "input 'x'") &&
                      strstr(orch_last_error(ctx), "not device memory"),
                  "%s", orch_last_error(ctx));
    }
    if (st)
        api->cuStreamDestroy(st);
    if (dx)
        api->cuMemFree(dx);
    if (dy)
        api->cuMemFree(dy);
    if (big)
        api->cuMemFree(big);
    orch_session_free(s);
    orch_ctx_free(ctx);
    cuda_device_close(&dev);
    unlink(art);
}

int main(void) {
    for (int i = 0; i < N; i++)
        g_x[i] = (float)cos(0.013 * i) * 2.0f;
    size_t len;
    uint8_t *buf = model(&len);
    if (!mb_temp("device", buf, len, &g_tmp))
        abort();
    RUN(cpu_artifact_takes_host_buffers);
    RUN(cuda_artifact_takes_device_buffers);
    mb_temp_remove(&g_tmp);
    return CHECK_DONE();
}
