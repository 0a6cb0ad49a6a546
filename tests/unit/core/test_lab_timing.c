// The kernel lab's timing summary and stability rule (kernel_lab.h: lab_summarise) on synthetic
// series of samples: steady ones, rare outliers, a slow first run, too many slow runs, a median
// shifted off the minimum, microsecond kernels under the noise floor, a busy machine by its load;
// then the rule inside a compile, with the machine's load forced (lab_set_load_override): a compile on a "busy" machine stores every ok
// timing suspect and re-times each before giving up; the next compile on a quiet one re-measures
// every suspect row instead of reusing it, and reuses the rest.
#include "../check.h"
#include "../model_builder.h"

#include "backend/kernel_lab.h"
#include "compile/compile.h"
#include "db/profile_db.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double jitter(double rel) { // uniform in [1, 1 + rel)
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return 1.0 + rel * (double)(rng >> 11) / 9007199254740992.0;
}

// n samples of base with 3% jitter upwards.
static double *steady(int n, double base) {
    double *s = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++)
        s[i] = base * jitter(0.03);
    return s;
}

static LabTiming summarise(double *s, int n, double load, int threads) {
    LabTiming t;
    lab_summarise(s, n, load, threads, &t);
    free(s);
    return t;
}

static void quantiles_exact(void) {
    double s[100];
    for (int i = 0; i < 100; i++)
        s[i] = (double)(100 - i); // 100 .. 1, sorted by the summary
    LabTiming t;
    lab_summarise(s, 100, -1, 0, &t);
    CHECK(t.n == 100 && t.min_s == 1 && t.median_s == 50.5);
    CHECK(t.p90_s == 90 && t.p95_s == 95);
    CHECK(fabs(t.spread - 89) < 1e-12);
    CHECK(t.unstable); // p90 90x its minimum
    double one = 2e-6;
    lab_summarise(&one, 1, -1, 0, &t);
    CHECK(t.min_s == one && t.median_s == one && t.p95_s == one && t.spread == 0 && !t.unstable);
}

static void steady_is_stable(void) {
    for (int n = 3; n <= 200; n += 17) {
        LabTiming t = summarise(steady(n, 1e-5), n, -1, 2);
        CHECK_MSG(!t.unstable && t.spread < 0.04, "n=%d spread %g: %s", n, t.spread, t.why);
    }
}

// A slow first run (a cold cache, a page fault) and a few outliers (interrupts) leave p90 and the
// median alone: stable.
static void rare_outliers_are_stable(void) {
    double *s = steady(100, 1e-5);
    s[0] = 5e-4; // a first run 50x slower
    LabTiming t = summarise(s, 100, -1, 2);
    CHECK_MSG(!t.unstable, "%s", t.why);
    CHECK(t.min_s < 1.04e-5);
    s = steady(100, 1e-5);
    for (int i = 0; i < 8; i++)
        s[10 * i + 3] = 1e-5 * (10 + i); // 8% of the runs 10-17x slower
    t = summarise(s, 100, -1, 2);
    CHECK_MSG(!t.unstable, "%s", t.why);
}

// Outliers past a tenth of the runs move p90: a descheduled thread, again and again.
static void frequent_outliers_are_unstable(void) {
    double *s = steady(100, 1e-5);
    for (int i = 0; i < 15; i++)
        s[7 * i] = 1e-5 * 3;
    LabTiming t = summarise(s, 100, -1, 2);
    CHECK(t.unstable && strstr(t.why, "p90"));
    CHECK(t.spread > LAB_MAX_SPREAD);
    CHECK(t.min_s < 1.04e-5 && t.median_s < 1.04e-5); // the median alone would not tell
}

// Most runs 1.3x above the few fastest: p90 within its bound, the median not.
static void shifted_median_is_unstable(void) {
    double *s = steady(60, 1e-4);
    for (int i = 0; i < 40; i++)
        s[i] = 1.3e-4 * jitter(0.02);
    LabTiming t = summarise(s, 60, -1, 2);
    CHECK_MSG(t.unstable && strstr(t.why, "median"), "%s", t.why);
    CHECK(t.spread <= LAB_MAX_SPREAD);
    // 1.1x is within the bound.
    s = steady(60, 1e-4);
    for (int i = 0; i < 40; i++)
        s[i] = 1.1e-4;
    t = summarise(s, 60, -1, 2);
    CHECK_MSG(!t.unstable, "%s", t.why);
}

// A kernel of a few microseconds: the same ratios within LAB_NOISE_FLOOR_S of its minimum are
// noise (an interrupt), not a busy machine; past it they count.
static void microsecond_kernels_under_the_noise_floor(void) {
    double *s = steady(100, 2e-6);
    for (int i = 0; i < 15; i++)
        s[7 * i] = 2e-6 * 3; // p90 3x its minimum, 4 us above it
    LabTiming t = summarise(s, 100, -1, 2);
    CHECK_MSG(!t.unstable && t.spread > LAB_MAX_SPREAD, "%s", t.why);
    s = steady(60, 2e-6);
    for (int i = 0; i < 40; i++)
        s[i] = 3e-6; // the median 1.5x, 1 us above
    t = summarise(s, 60, -1, 2);
    CHECK_MSG(!t.unstable, "%s", t.why);
    s = steady(100, 4e-6);
    for (int i = 0; i < 15; i++)
        s[7 * i] = 4e-6 * 3; // 8 us above: counts
    t = summarise(s, 100, -1, 2);
    CHECK(t.unstable && strstr(t.why, "p90"));
    t = summarise(steady(50, 2e-6), 50, 3, 2); // the load rule has no floor
    CHECK(t.unstable && strstr(t.why, "runnable"));
}

// Steady samples on a machine with more runnable threads than the lab's own: a neighbour may have
// taken every sample's core alike, so the load alone makes it unstable.
static void busy_machine_is_unstable(void) {
    LabTiming t = summarise(steady(50, 1e-5), 50, 3, 2);
    CHECK(t.unstable && strstr(t.why, "runnable") && t.load == 3);
    t = summarise(steady(50, 1e-5), 50, 2, 2);
    CHECK_MSG(!t.unstable, "%s", t.why);
    t = summarise(steady(50, 1e-5), 50, 40, 0); // no threads given: no load rule
    CHECK(!t.unstable);
    t = summarise(steady(50, 1e-5), 50, -1, 2); // load unknown
    CHECK(!t.unstable);
}

static void load_override(void) {
    lab_set_load_override(7);
    CHECK(lab_machine_load() == 7);
    lab_set_load_override(-1);
    double l = lab_machine_load();
    CHECK(l >= 0 || l == -1);
}

// ---- the rule inside compiles ----

static char g_dir[] = "/tmp/orch_lab_timing_XXXXXX";

// y = relu(x W + b) W: a few kernels.
static void write_model(const char *path) {
    const int64_t xd[] = {32, 48}, wd[] = {48, 48}, bd[] = {48};
    static float w[48 * 48], b1[48];
    for (int i = 0; i < 48 * 48; i++)
        w[i] = (float)((i * 37) % 101 - 50) / 400.0f;
    for (int i = 0; i < 48; i++)
        b1[i] = (float)(i % 7) / 10.0f;
    MB *b = mb_new(17);
    mb_init(b, mb_raw(b, "w", 1, 2, wd, w, sizeof w));
    mb_init(b, mb_raw(b, "b1", 1, 1, bd, b1, sizeof b1));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "MatMul", "mm1", "x,w", "h", NULL);
    mb_node(b, "Add", "add", "h,b1", "hb", NULL);
    mb_node(b, "Relu", "relu", "hb", "r", NULL);
    mb_node(b, "MatMul", "mm2", "r,w", "y", NULL);
    mb_output(b, "y");
    CHECK(mb_write(b, path));
}

static int compile_once(const char *model, const char *db, const char *out, CompileReport *rep) {
    // One config per kernel: both compiles measure the same configs (each kernel's first).
    CompileOptions o = {.target = "cpu", .db_path = db, .top_k = 1, .seed = 5};
    Err e = {0};
    int rc = compile_model(model, &o, out, rep, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    return rc;
}

static void suspect_rows_remeasured(void) {
    char model[1200], db[1200], out[1200];
    snprintf(model, sizeof model, "%s/m.onnx", g_dir);
    snprintf(db, sizeof db, "%s/p.db", g_dir);
    snprintf(out, sizeof out, "%s/m.orch", g_dir);
    write_model(model);
    // A machine that always reads busy: every ok timing stays unstable and is stored suspect;
    // the first ones of each lab call are timed LAB_ATTEMPTS times, and once the machine has
    // stayed busy for a few kernels in a row the rest are timed once.
    lab_set_load_override(1000);
    CompileReport r1;
    int rc = compile_once(model, db, out, &r1);
    lab_set_load_override(-1);
    if (rc)
        return;
    CHECK(r1.measured > 0 && r1.looked_up == 0);
    int ok1 = r1.measured - r1.wrong - r1.failed;
    CHECK_MSG(r1.unstable == ok1, "%d unstable of %d ok", r1.unstable, ok1);
    ProfileDb *pdb;
    Err e = {0};
    CHECK(pdb_open(db, true, &pdb, &e) == ST_OK);
    PdbCheck c;
    CHECK(pdb_check(pdb, 1000, &c, &e) == ST_OK);
    CHECK(c.count[PDB_ANOM_SUSPECT] == r1.unstable);
    CHECK(!pdb_check_damaged(&c));
    int thrice = 0, once = 0;
    for (int i = 0; i < c.n_rows; i++)
        if (c.list[i].kind == PDB_ANOM_SUSPECT) {
            const PdbRecord *x = &c.list[i].rec;
            CHECK(x->load == 1000 && x->status == PDB_OK && x->min_s <= x->median_s);
            thrice += strstr(x->note, "unstable after 3 timings") != NULL;
            once += strstr(x->note, "unstable, timed once (the machine stayed busy") != NULL;
        }
    CHECK_MSG(thrice + once == r1.unstable && once == r1.timed_once, "%d + %d of %d, %d once",
              thrice, once, r1.unstable, r1.timed_once);
    CHECK_MSG(thrice >= 4 && once > 0, "%d timed thrice, %d once", thrice, once);
    pdb_check_free(&c);
    pdb_close(pdb);
    // A quiet machine (no load rule; the samples' own spread still applies): nothing suspect is
    // reused, so every suspect row is measured again and the rest comes from the database.
    lab_set_load_override(0);
    CompileReport r2;
    rc = compile_once(model, db, out, &r2);
    lab_set_load_override(-1);
    if (rc)
        return;
    CHECK_MSG(r2.resuspect == r1.unstable, "%d re-measured of %d suspect", r2.resuspect,
              r1.unstable);
    CHECK_MSG(r2.measured == r2.resuspect, "%d measured, %d re-measured", r2.measured,
              r2.resuspect);
    CHECK(r2.looked_up == r1.measured - r1.unstable); // the failed ones, if any
    CHECK(pdb_open(db, true, &pdb, &e) == ST_OK);
    CHECK(pdb_check(pdb, 0, &c, &e) == ST_OK);
    // What stays suspect is what the second compile itself found unstable.
    CHECK_MSG(c.count[PDB_ANOM_SUSPECT] == r2.unstable, "%lld suspect, %d unstable now",
              (long long)c.count[PDB_ANOM_SUSPECT], r2.unstable);
    pdb_check_free(&c);
    pdb_close(pdb);
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(quantiles_exact);
    RUN(steady_is_stable);
    RUN(rare_outliers_are_stable);
    RUN(frequent_outliers_are_unstable);
    RUN(shifted_median_is_unstable);
    RUN(microsecond_kernels_under_the_noise_floor);
    RUN(busy_machine_is_unstable);
    RUN(load_override);
    RUN(suspect_rows_remeasured);
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return CHECK_DONE();
}
