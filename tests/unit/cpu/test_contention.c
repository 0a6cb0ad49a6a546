// Threads under contention (src/backend/cpu/contention.h): the thread policy on fixed cases; the
// probe sees child processes spinning on every core this process may use; and a CPU session
// whose cores other processes keep busy runs on fewer threads than asked, unless its options
// fix them (the thread count a run used is the calling thread's OpenMP setting afterwards).
#define _GNU_SOURCE
#include "../check.h"
#include "../model_builder.h"
#include "backend/cpu/contention.h"
#include "orch.h"

#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void policy(void) {
    CHECK(cpu_threads_under_contention(4, 4, 0.0) == 4);
    CHECK(cpu_threads_under_contention(4, 4, 0.2) == 4);  // background noise keeps every thread
    CHECK(cpu_threads_under_contention(4, 4, 0.3) == 3);  // a third of a core taken: one fewer
    CHECK(cpu_threads_under_contention(4, 4, 0.95) == 3); // one spinning process
    CHECK(cpu_threads_under_contention(4, 4, 2.0) == 2);
    CHECK(cpu_threads_under_contention(4, 4, 4.0) == 1); // never below one
    CHECK(cpu_threads_under_contention(2, 8, 3.0) == 2); // enough free cores: no change
    CHECK(cpu_threads_under_contention(8, 2, 0.0) ==
          8); // oversubscribed by request, not contention
    CHECK(cpu_threads_under_contention(8, 2, 1.0) == 1);
    CHECK(cpu_threads_under_contention(1, 2, 2.0) == 1);
    CHECK(cpu_threads_under_contention(4, 4, -1) == 4); // unknown: unchanged
    CHECK(cpu_threads_under_contention(0, 4, 4.0) == 1);
}

static int allowed_cores(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

// n child processes spinning until killed.
static void spin_children(pid_t *pids, int n) {
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            volatile unsigned long x = 0;
            for (;;)
                x++;
        }
    }
}

static void stop_children(pid_t *pids, int n) {
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
}

static void probe_sees_other_processes(void) {
    CpuBusySample a = cpu_busy_sample();
    CHECK_MSG(a.ok, "/proc/stat unreadable");
    if (!a.ok)
        return;
    CHECK(a.cores == allowed_cores());
    int n = a.cores;
    pid_t pids[256] = {0};
    if (n > 256)
        n = 256;
    spin_children(pids, n);
    usleep(100000);
    a = cpu_busy_sample();
    usleep(400000);
    CpuBusySample b = cpu_busy_sample();
    stop_children(pids, n);
    double others = cpu_busy_elsewhere(&a, &b);
    printf("  %d spinning children on %d cores: %.2f cores busy elsewhere\n", n, a.cores, others);
    // Every allowed core had a spinning child while this process slept: whatever else runs, the
    // cores were busy and not by us.
    CHECK_MSG(others >= 0.7 * a.cores, "%.2f of %d cores", others, a.cores);
    CHECK(others <= a.cores);
    CHECK(cpu_busy_elsewhere(&a, &a) == -1); // no time between: unknown
}

// y = relu(x): one kernel, run with two threads.
static uint8_t *relu_model(size_t *len) {
    const int64_t xd[2] = {64, 1024};
    MB *m = mb_new(17);
    mb_input(m, "x", 1, 2, xd);
    mb_node(m, "Relu", "act", "x", "y", NULL);
    mb_output(m, "y");
    uint8_t *buf = mb_pack(m, len);
    mb_free(m);
    return buf;
}

static int threads_of_a_run(orch_ctx *ctx, orch_session *s, float *x, float *y) {
    orch_tensor in, out;
    orch_session_input_info(s, 0, &in);
    orch_session_output_info(s, 0, &out);
    in.data = x;
    out.data = y;
    omp_set_num_threads(64); // overwritten by the run
    if (orch_session_run(ctx, s, &in, 1, &out, 1) != ORCH_OK)
        return -1;
    return omp_get_max_threads();
}

static void session_uses_fewer_threads(void) {
    int cores = allowed_cores();
    if (cores < 2) {
        printf("  one core: nothing to take away\n");
        return;
    }
    size_t len;
    uint8_t *buf = relu_model(&len);
    MbTemp tmp;
    CHECK(mb_temp("contention", buf, len, &tmp));
    orch_ctx *ctx = orch_ctx_create();
    orch_compile_options o = {.db_path = tmp.db, .top_k = 1, .jobs = 1, .threads = 2};
    orch_status st = orch_compile(ctx, tmp.model, &o, tmp.art);
    CHECK_MSG(st == ORCH_OK, "compile: %s", orch_last_error(ctx));
    orch_session *adaptive = NULL, *fixed = NULL;
    orch_session_options ao = {.threads = 2}, fo = {.threads = 2, .fixed_threads = 1};
    if (st == ORCH_OK)
        st = orch_session_create(ctx, tmp.art, &ao, &adaptive);
    if (st == ORCH_OK)
        st = orch_session_create(ctx, tmp.art, &fo, &fixed);
    CHECK_MSG(st == ORCH_OK, "session: %s", orch_last_error(ctx));
    static float x[64 * 1024], y[64 * 1024];
    for (int i = 0; i < 64 * 1024; i++)
        x[i] = (float)(i % 13) - 6.0f;
    if (st == ORCH_OK) {
        int n = cores > 256 ? 256 : cores;
        pid_t pids[256] = {0};
        spin_children(pids, n);
        usleep(300000); // past the probe interval, the children spinning all along
        int t_adaptive = threads_of_a_run(ctx, adaptive, x, y);
        int t_fixed = threads_of_a_run(ctx, fixed, x, y);
        stop_children(pids, n);
        printf("  %d cores kept busy: an adaptive run used %d threads, a fixed one %d\n", n,
               t_adaptive, t_fixed);
        CHECK(t_adaptive == 1);
        CHECK(t_fixed == 2);
        bool right = true;
        for (int i = 0; i < 64 * 1024; i++)
            right = right && y[i] == (x[i] > 0 ? x[i] : 0.0f);
        CHECK(right);
    }
    orch_session_free(adaptive);
    orch_session_free(fixed);
    orch_ctx_free(ctx);
    mb_temp_remove(&tmp);
}

int main(void) {
    RUN(policy);
    RUN(probe_sees_other_processes);
    RUN(session_uses_fewer_threads);
    return CHECK_DONE();
}
