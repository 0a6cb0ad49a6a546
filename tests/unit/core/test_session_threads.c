// One orch_session shared by several threads (include/orch.h: orch_session_run is safe to call
// from several threads on one session, each with its own orch_ctx). A two-layer MLP, compiled
// for the CPU target with single-threaded kernels, runs 4 threads x 300 times, each thread on its
// own inputs; every output must equal, bit for bit, what one thread alone computed for those
// inputs. Then the throughput of 1 and 2 threads sharing the session is printed (a measurement,
// not a check: the machine may be busy).
#include "../check.h"
#include "../model_builder.h"
#include "orch.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ROWS = 32, WIDTH = 128, THREADS = 4, RUNS = 300, INPUT_SETS = 8 };

// y = tanh(x W1 + b) W2: three kernels or fewer, an intermediate in the session's arena.
static uint8_t *mlp_model(size_t *len) {
    static float w1[WIDTH * WIDTH], w2[WIDTH * WIDTH], b[WIDTH];
    for (int i = 0; i < WIDTH * WIDTH; i++) {
        w1[i] = (float)sin(0.37 * i) * 0.2f;
        w2[i] = (float)cos(0.11 * i) * 0.2f;
    }
    for (int i = 0; i < WIDTH; i++)
        b[i] = 0.01f * (float)(i % 7);
    const int64_t wd[2] = {WIDTH, WIDTH}, bd[1] = {WIDTH}, xd[2] = {ROWS, WIDTH};
    MB *m = mb_new(17);
    mb_init(m, mb_raw(m, "w1", 1, 2, wd, w1, sizeof w1));
    mb_init(m, mb_raw(m, "w2", 1, 2, wd, w2, sizeof w2));
    mb_init(m, mb_raw(m, "b", 1, 1, bd, b, sizeof b));
    mb_input(m, "x", 1, 2, xd);
    mb_node(m, "MatMul", "mm1", "x,w1", "h", NULL);
    mb_node(m, "Add", "add", "h,b", "hb", NULL);
    mb_node(m, "Tanh", "act", "hb", "t", NULL);
    mb_node(m, "MatMul", "mm2", "t,w2", "y", NULL);
    mb_output(m, "y");
    uint8_t *buf = mb_pack(m, len);
    mb_free(m);
    return buf;
}

typedef struct Shared {
    orch_session *s;
    float in[INPUT_SETS][ROWS * WIDTH];
    float want[INPUT_SETS][ROWS * WIDTH];
    int runs;
    int mismatches, errors;
    pthread_mutex_t mu;
} Shared;

typedef struct Worker {
    Shared *sh;
    int id;
} Worker;

static int run_once(orch_ctx *ctx, orch_session *s, const float *in, float *out) {
    orch_tensor x = {.name = "x", .dtype = ORCH_FLOAT32, .rank = 2, .dims = {ROWS, WIDTH}};
    orch_tensor y = {.name = "y", .dtype = ORCH_FLOAT32, .rank = 2, .dims = {ROWS, WIDTH}};
    x.data = (void *)in;
    x.nbytes = sizeof(float) * ROWS * WIDTH;
    y.data = out;
    y.nbytes = sizeof(float) * ROWS * WIDTH;
    return orch_session_run(ctx, s, &x, 1, &y, 1);
}

static void *worker(void *arg) {
    Worker *w = arg;
    Shared *sh = w->sh;
    orch_ctx *ctx = orch_ctx_create(); // contexts are per thread: they hold the last error
    float out[ROWS * WIDTH];
    int bad = 0, err = 0;
    for (int r = 0; r < sh->runs; r++) {
        int set = (w->id + r) % INPUT_SETS;
        if (run_once(ctx, sh->s, sh->in[set], out) != ORCH_OK)
            err++;
        else if (memcmp(out, sh->want[set], sizeof out) != 0)
            bad++;
    }
    pthread_mutex_lock(&sh->mu);
    sh->mismatches += bad;
    sh->errors += err;
    pthread_mutex_unlock(&sh->mu);
    orch_ctx_free(ctx);
    return NULL;
}

static double run_threads(Shared *sh, int n) {
    pthread_t th[THREADS];
    Worker w[THREADS];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        w[i] = (Worker){sh, i};
        CHECK(pthread_create(&th[i], NULL, worker, &w[i]) == 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

static void shared_session(void) {
    size_t len;
    uint8_t *buf = mlp_model(&len);
    MbTemp tmp;
    if (!mb_temp("threads", buf, len, &tmp)) {
        CHECK_MSG(false, "cannot write the model into %s", tmp.dir);
        return;
    }
    orch_ctx *ctx = orch_ctx_create();
    // No MLP chain: the layers are separate kernels with the hidden values in the arena.
    orch_compile_options o = {
        .db_path = tmp.db, .top_k = 1, .jobs = 1, .threads = 1, .no_mlp_chains = 1};
    orch_status st = orch_compile(ctx, tmp.model, &o, tmp.art);
    CHECK_MSG(st == ORCH_OK, "compile: %s", orch_last_error(ctx));
    Shared *sh = calloc(1, sizeof *sh);
    pthread_mutex_init(&sh->mu, NULL);
    if (st == ORCH_OK)
        st = orch_session_create(ctx, tmp.art, NULL, &sh->s);
    CHECK_MSG(st == ORCH_OK, "session: %s", orch_last_error(ctx));
    if (st == ORCH_OK) {
        for (int k = 0; k < INPUT_SETS; k++) {
            for (int i = 0; i < ROWS * WIDTH; i++)
                sh->in[k][i] = (float)sin(0.01 * i + k) * (float)(k + 1);
            CHECK(run_once(ctx, sh->s, sh->in[k], sh->want[k]) == ORCH_OK);
        }
        sh->runs = RUNS;
        run_threads(sh, THREADS);
        printf("  %d threads x %d runs on one session: %d mismatches, %d errors\n", THREADS, RUNS,
               sh->mismatches, sh->errors);
        CHECK_MSG(sh->mismatches == 0 && sh->errors == 0, "%d mismatches, %d errors",
                  sh->mismatches, sh->errors);
        // Throughput: the same number of runs by one thread and split over two.
        sh->runs = 2 * RUNS;
        double t1 = run_threads(sh, 1);
        sh->runs = RUNS;
        double t2 = run_threads(sh, 2);
        printf("  throughput, 2 threads / 1 thread on one session: %.2fx (%.1f vs %.1f us a run)\n",
               t1 / t2, 1e6 * t1 / (2 * RUNS), 1e6 * t2 / (2 * RUNS));
        CHECK(sh->mismatches == 0 && sh->errors == 0);
    }
    orch_session_free(sh->s);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
    orch_ctx_free(ctx);
    mb_temp_remove(&tmp);
}

int main(void) {
    RUN(shared_session);
    return CHECK_DONE();
}
