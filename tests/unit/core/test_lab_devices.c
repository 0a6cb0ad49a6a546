// The logic that spreads a kernel lab over several devices, without a device: --gpus's parser
// (lab_devices_parse), the choice of the devices that measure from their fingerprints
// (lab_devices_select: only the target device's kind, the target first, the ones left out
// named), and the queue the devices' workers share (lab_queue: each job taken once and in order,
// one worker taking exactly the sequence, N workers of equal speed each taking about 1/N). The
// CUDA lab calls these very functions.
#include "../check.h"

#include "backend/kernel_lab.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t g_seed;

static uint64_t rnd(void) {
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return g_seed >> 33;
}

static void parse_accepts(void) {
    LabDeviceSpec s;
    Err e = {0};
    CHECK(lab_devices_parse(NULL, &s, &e) == ST_OK && s.count == 0 && s.n_list == 0);
    CHECK(lab_devices_parse("all", &s, &e) == ST_OK && s.count == 0 && s.n_list == 0);
    CHECK(lab_devices_parse("1", &s, &e) == ST_OK && s.count == 1 && s.n_list == 0);
    CHECK(lab_devices_parse("4", &s, &e) == ST_OK && s.count == 4 && s.n_list == 0);
    // A count past the most a lab uses means all of them.
    CHECK(lab_devices_parse("64", &s, &e) == ST_OK && s.count == LAB_MAX_DEVICES);
    CHECK(lab_devices_parse("0,2", &s, &e) == ST_OK && s.count == 0 && s.n_list == 2 &&
          s.list[0] == 0 && s.list[1] == 2);
    CHECK(lab_devices_parse("3,0,1", &s, &e) == ST_OK && s.n_list == 3 && s.list[0] == 3 &&
          s.list[1] == 0 && s.list[2] == 1);
    // One ordinal with a comma is a list, not a count.
    CHECK(lab_devices_parse("5,", &s, &e) == ST_USAGE);
    char sixteen[64] = "";
    for (int i = 0; i < LAB_MAX_DEVICES; i++)
        snprintf(sixteen + strlen(sixteen), sizeof sixteen - strlen(sixteen), "%s%d", i ? "," : "",
                 i);
    CHECK_MSG(lab_devices_parse(sixteen, &s, &e) == ST_OK && s.n_list == LAB_MAX_DEVICES, "%s",
              e.msg);
}

static void parse_refuses(void) {
    static const char *const bad[] = {"",
                                      "0",
                                      "-1",
                                      "x",
                                      "2x",
                                      "1,1",
                                      "0,,1",
                                      ",0",
                                      "0,-1",
                                      "1.5",
                                      " 1",
                                      "1 ",
                                      "all,0",
                                      "0,1,",
                                      "99999999999999999999",
                                      "0,99999999999"};
    for (size_t i = 0; i < ORCH_COUNT(bad); i++) {
        LabDeviceSpec s;
        Err e = {0};
        int rc = lab_devices_parse(bad[i], &s, &e);
        CHECK_MSG(rc == ST_USAGE, "'%s' accepted", bad[i]);
        CHECK_MSG(strstr(e.msg, "--gpus"), "'%s': %s", bad[i], e.msg);
    }
    // Seventeen entries: more than a lab uses.
    char many[96] = "";
    for (int i = 0; i <= LAB_MAX_DEVICES; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d", i ? "," : "", i);
    LabDeviceSpec s;
    Err e = {0};
    CHECK_MSG(lab_devices_parse(many, &s, &e) == ST_USAGE && strstr(e.msg, "more than"), "%s",
              e.msg);
    Err e2 = {0};
    CHECK(lab_devices_parse("0,3,3", &s, &e2) == ST_USAGE && strstr(e2.msg, "GPU 3 twice"));
}

// Selects with spec text s among fingerprints fp (home 0); the chosen list as "0 1 3" into out.
static int sel(const char *s, int n_dev, const char *const *fp, int home, char *out, size_t n,
               char *note, size_t note_n, Err *e) {
    LabDeviceSpec spec;
    int rc = lab_devices_parse(s, &spec, e);
    if (rc)
        return rc;
    int chosen[LAB_MAX_DEVICES], k = -1;
    rc = lab_devices_select(&spec, n_dev, fp, home, chosen, &k, note, note_n, e);
    out[0] = '\0';
    for (int i = 0; rc == ST_OK && i < k; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%d", i ? " " : "", chosen[i]);
    return rc;
}

static void select_by_fingerprint(void) {
    // Four H200s, an A100 at ordinal 2 and an unreadable device at 5.
    const char *H = "cuda|NVIDIA H200|sm_90|SMs=132", *A = "cuda|NVIDIA A100|sm_80|SMs=108";
    const char *fp[] = {H, H, A, H, H, NULL};
    char got[128], note[512];
    Err e = {0};
    CHECK(sel("all", 6, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(strcmp(got, "0 1 3 4") == 0, "%s", got);
    CHECK_MSG(strstr(note, "GPU 2 (another kind of device)") && strstr(note, "GPU 5 (unreadable)"),
              "%s", note);
    CHECK(sel(NULL, 6, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_OK &&
          strcmp(got, "0 1 3 4") == 0);
    CHECK(sel("1", 6, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_OK &&
          strcmp(got, "0") == 0);
    CHECK(sel("3", 6, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(strcmp(got, "0 1 3") == 0, "%s", got);
    // More asked than there are: all of them, and the note says so.
    CHECK(sel("8", 6, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(strcmp(got, "0 1 3 4") == 0 &&
                  strcmp(note, "left out: GPU 2 (another kind of device), GPU 5 (unreadable); 8 "
                               "GPUs asked, 4 identical to GPU 0") == 0,
              "%s / %s", got, note);
    // A list: home first whatever the order, the other kind left out and named.
    CHECK(sel("4,2,0", 6, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(strcmp(got, "0 4") == 0 && strstr(note, "GPU 2 (another kind of device)") &&
                  !strstr(note, "GPU 1") && !strstr(note, "GPU 3"),
              "%s / %s", got, note);
    // One identical machine: nothing is left out, the note is empty.
    const char *same[] = {H, H};
    CHECK(sel("all", 2, same, 0, got, sizeof got, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(strcmp(got, "0 1") == 0 && note[0] == '\0', "%s / '%s'", got, note);
    // Another home: its kind decides.
    CHECK(sel("all", 6, fp, 2, got, sizeof got, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(strcmp(got, "2") == 0 && strstr(note, "GPU 0 (another kind"), "%s / %s", got, note);
}

static void select_refuses(void) {
    const char *H = "cuda|H200";
    const char *fp[] = {H, H, H};
    char got[64], note[256];
    Err e = {0};
    CHECK(sel("1,2", 3, fp, 0, got, sizeof got, note, sizeof note, &e) == ST_USAGE);
    CHECK_MSG(strstr(e.msg, "leaves out GPU 0") && strstr(e.msg, "CUDA_VISIBLE_DEVICES"), "%s",
              e.msg);
    Err e2 = {0};
    CHECK(sel("0,3", 3, fp, 0, got, sizeof got, note, sizeof note, &e2) == ST_USAGE);
    CHECK_MSG(strstr(e2.msg, "GPU 3") && strstr(e2.msg, "has 3"), "%s", e2.msg);
    // Without the target device, that is the message, whether or not the others exist.
    Err e3 = {0};
    CHECK(sel("1,7", 1, fp, 0, got, sizeof got, note, sizeof note, &e3) == ST_USAGE);
    CHECK_MSG(strstr(e3.msg, "leaves out GPU 0"), "%s", e3.msg);
}

// Twenty identical devices: the first LAB_MAX_DEVICES measure, the rest are named.
static void select_caps_at_max(void) {
    const char *fp[20];
    for (int i = 0; i < 20; i++)
        fp[i] = "cuda|same";
    LabDeviceSpec spec;
    Err e = {0};
    CHECK(lab_devices_parse("all", &spec, &e) == ST_OK);
    int chosen[LAB_MAX_DEVICES], k = 0;
    char note[512];
    CHECK(lab_devices_select(&spec, 20, fp, 0, chosen, &k, note, sizeof note, &e) == ST_OK);
    CHECK_MSG(k == LAB_MAX_DEVICES, "%d", k);
    for (int i = 0; i < k; i++)
        CHECK(chosen[i] == i);
    for (int o = LAB_MAX_DEVICES; o < 20; o++) {
        char want[64];
        snprintf(want, sizeof want, "GPU %d (past the most", o);
        CHECK_MSG(strstr(note, want), "%s", note);
    }
}

// One worker takes the items exactly in sequence.
static void queue_one_worker_in_order(void) {
    LabQueue q;
    lab_queue_init(&q, 100);
    for (int i = 0; i < 100; i++) {
        int got = lab_queue_take(&q);
        CHECK_MSG(got == i, "took %d for %d", got, i);
    }
    CHECK(lab_queue_take(&q) == -1 && lab_queue_take(&q) == -1);
    lab_queue_init(&q, 0);
    CHECK(lab_queue_take(&q) == -1);
}

// Workers asking in a random order: every item taken once, each worker's items in increasing
// order, and -1 only once every item is taken.
static void queue_workers_random(void) {
    for (int round = 0; round < 200; round++) {
        int n = (int)(rnd() % 300), nw = 2 + (int)(rnd() % 7);
        int *by = xcalloc((size_t)n + 1, sizeof(int));
        for (int i = 0; i < n; i++)
            by[i] = -1;
        LabQueue q;
        lab_queue_init(&q, n);
        int last[8];
        bool finished[8] = {false};
        for (int w = 0; w < nw; w++)
            last[w] = -1;
        int alive = nw;
        while (alive > 0) {
            int w = (int)(rnd() % (uint64_t)nw);
            if (finished[w])
                continue;
            int i = lab_queue_take(&q);
            if (i < 0) {
                for (int k = 0; k < n; k++)
                    CHECK_MSG(by[k] >= 0, "worker %d stopped with item %d free", w, k);
                finished[w] = true;
                alive--;
                continue;
            }
            CHECK_MSG(i < n && by[i] < 0, "item %d taken twice (round %d)", i, round);
            CHECK_MSG(i > last[w], "worker %d went back from %d to %d", w, last[w], i);
            if (i < n)
                by[i] = w;
            last[w] = i;
        }
        for (int k = 0; k < n; k++)
            CHECK_MSG(by[k] >= 0, "item %d never taken (round %d)", k, round);
        free(by);
    }
}

// Workers of equal speed on jobs of random lengths, simulated in time order (each takes its next
// job when its last one ends): every worker ends within one job of the others, so the whole takes
// at most the work divided by N plus one job. Also when the first tenth of the jobs (the library
// calls, which come first) take five times as long.
static void queue_balances_equal_devices(void) {
    for (int nw = 1; nw <= 8; nw *= 2) {
        for (int variant = 0; variant < 2; variant++) {
            enum { N = 600 };
            double cost[N], total = 0, longest = 0;
            for (int i = 0; i < N; i++) {
                cost[i] = 1e-3 * (1 + (double)(rnd() % 20)); // 1 to 20 ms
                if (variant == 1 && i < N / 10)
                    cost[i] *= 5;
                total += cost[i];
                longest = cost[i] > longest ? cost[i] : longest;
            }
            LabQueue q;
            lab_queue_init(&q, N);
            double busy_until[8] = {0};
            bool done[8] = {false};
            int taken[8] = {0};
            for (;;) {
                int w = -1; // the worker that frees up first
                for (int k = 0; k < nw; k++)
                    if (!done[k] && (w < 0 || busy_until[k] < busy_until[w]))
                        w = k;
                if (w < 0)
                    break;
                int i = lab_queue_take(&q);
                if (i < 0) {
                    done[w] = true;
                    continue;
                }
                busy_until[w] += cost[i];
                taken[w]++;
            }
            double end = 0, first_end = 1e30;
            int all = 0;
            for (int k = 0; k < nw; k++) {
                end = busy_until[k] > end ? busy_until[k] : end;
                first_end = busy_until[k] < first_end ? busy_until[k] : first_end;
                all += taken[k];
                CHECK_MSG(taken[k] > 0, "worker %d of %d took nothing", k, nw);
            }
            CHECK(all == N);
            CHECK_MSG(end <= total / nw + longest + 1e-12,
                      "%d workers: done at %.3f s for %.3f s of work", nw, end, total);
            CHECK_MSG(end - first_end <= longest + 1e-12, "%d workers: ends %.3f .. %.3f s", nw,
                      first_end, end);
            printf("  %d worker%s%s: %.3f s of work done at %.3f s (%.2fx)\n", nw,
                   nw == 1 ? "" : "s", variant ? ", the first tenth 5x longer" : "", total, end,
                   total / end);
        }
    }
}

int main(void) {
    g_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    const char *env = getenv("ORCH_TEST_SEED");
    if (env)
        g_seed = strtoull(env, NULL, 0);
    printf("seed %" PRIu64 " (ORCH_TEST_SEED to repeat)\n", g_seed);
    RUN(parse_accepts);
    RUN(parse_refuses);
    RUN(select_by_fingerprint);
    RUN(select_refuses);
    RUN(select_caps_at_max);
    RUN(queue_one_worker_in_order);
    RUN(queue_workers_random);
    RUN(queue_balances_equal_devices);
    return CHECK_DONE();
}
