// Unit tests of the profile database (src/db/profile_db.h) in a temporary directory: schema,
// store/look-up round trips, pending rows of live and dead processes (forked children), a crashed
// config retried once, rows with impossible values read as absent, device values, stats, filtered
// clearing, end-to-end check references (round trip, damaged blobs read as absent, stats,
// clearing, the upgrade of a version 1 file), built modules (round trip, damaged blobs, eviction
// of the least recently used, clearing, left out of merges, the upgrade of a version 3 file),
// refused files (missing, not SQLite, truncated,
// newer schema, foreign), concurrent writers and a writer SIGKILLed mid-loop; each timing's load
// and suspect flag (round trip, impossible values, the upgrade of a version 2 file), the anomaly
// check's counts, the merge rule case by case, and the JSON-lines export and import (round trip
// of every field, refused files naming their line).
#define _GNU_SOURCE
#include "../check.h"
#include "db/profile_db.h"
#include "db/profile_share.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];
static uint64_t rng_state;

static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static double rnd_time(void) {
    return 1e-6 * (double)(1 + rnd() % 1000000);
}

static void path_in(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static PdbRecord random_record(PdbStatus s) {
    PdbRecord r;
    memset(&r, 0, sizeof r);
    r.status = s;
    r.median_s = rnd_time();
    r.min_s = r.median_s * 0.9;
    r.spread = 0.01 * (double)(1 + rnd() % 50);
    r.reps = 1 + (int)(rnd() % 100);
    snprintf(r.note, sizeof r.note, "note %" PRIx64, rnd());
    return r;
}

static bool same_record(const PdbRecord *a, const PdbRecord *b) {
    return a->status == b->status && a->median_s == b->median_s && a->min_s == b->min_s &&
           a->spread == b->spread && a->reps == b->reps && strcmp(a->note, b->note) == 0;
}

static ProfileDb *open_ok(const char *path) {
    Err e = {0};
    ProfileDb *db = NULL;
    int rc = pdb_open(path, false, &db, &e);
    CHECK_MSG(rc == ST_OK && db, "%s", e.msg);
    return db;
}

// Runs SQL on the file directly, as another program would.
static void raw_sql(const char *path, const char *sql) {
    sqlite3 *raw;
    CHECK(sqlite3_open(path, &raw) == SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(raw, sql, NULL, NULL, &msg);
    CHECK_MSG(rc == SQLITE_OK, "%s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(raw);
}

static void schema_creation(void) {
    char dir[512], path[600], buf[600];
    path_in(dir, sizeof dir, "xdg");
    snprintf(path, sizeof path, "%s/orch/profile.db", dir);
    char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    CHECK(strcmp(pdb_default_path(buf, sizeof buf), path) == 0);
    ProfileDb *db = open_ok(NULL); // the default: directories made on the way
    if (old_xdg) {
        setenv("XDG_CACHE_HOME", old_xdg, 1);
        free(old_xdg);
    } else {
        unsetenv("XDG_CACHE_HOME");
    }
    if (!db)
        return;
    CHECK(strcmp(pdb_path(db), path) == 0);
    pdb_close(db);
    struct stat sb;
    snprintf(buf, sizeof buf, "%s/orch", dir);
    CHECK(stat(buf, &sb) == 0 && (sb.st_mode & 0777) == 0700);
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    // The file is SQLite with our schema, in WAL mode.
    sqlite3 *raw;
    CHECK(sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *s;
    CHECK(sqlite3_prepare_v2(raw, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &s,
                             NULL) == SQLITE_OK);
    CHECK(sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) == PDB_SCHEMA_VERSION);
    sqlite3_finalize(s);
    CHECK(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &s, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(s) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(s, 0), "wal") == 0);
    sqlite3_finalize(s);
    CHECK(sqlite3_prepare_v2(raw, "SELECT count(*) FROM measurement", -1, &s, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) == 0);
    sqlite3_finalize(s);
    sqlite3_close(raw);
    // Reopening (read-write and read-only) finds the schema and keeps it.
    db = open_ok(path);
    pdb_close(db);
    Err e = {0};
    CHECK(pdb_open(path, true, &db, &e) == ST_OK);
    pdb_close(db);
    pdb_close(NULL);
}

static void round_trip(void) {
    char path[512];
    path_in(path, sizeof path, "rt.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    enum { N_SIGS = 20, N_CFGS = 5 };
    const char *targets[] = {"cpu", "cuda"};
    const char *fps[] = {"cpu x86_64 Xeon 16 cores avx2 gcc 12.2", "cuda H100 sm_90 nvrtc 12.4"};
    const char *cfgs[N_CFGS] = {"tile 8x8", "tile 16x4 unroll 2", "tile 32x32", "naive", "omp 4"};
    uint64_t sigs[N_SIGS];
    static PdbRecord recs[N_SIGS][2][2][N_CFGS];
    int64_t t0 = (int64_t)time(NULL);
    Err e = {0};
    for (int i = 0; i < N_SIGS; i++) {
        sigs[i] = rnd() | (i % 2 ? 0x8000000000000000ull : 0); // above INT64_MAX too
        for (int t = 0; t < 2; t++)
            for (int f = 0; f < 2; f++)
                for (int c = 0; c < N_CFGS; c++) {
                    if ((i + t + f + c) % 3 == 0)
                        continue; // leave holes: look-ups must not find them
                    recs[i][t][f][c] = random_record((PdbStatus)(rnd() % 4));
                    PdbKey k = {sigs[i], targets[t], fps[f], cfgs[c]};
                    CHECK_MSG(pdb_store(db, &k, &recs[i][t][f][c], &e) == ST_OK, "%s", e.msg);
                }
    }
    int64_t t1 = (int64_t)time(NULL);
    pdb_close(db);
    db = open_ok(path); // from the file, not a cache
    if (!db)
        return;
    int found_n = 0;
    for (int i = 0; i < N_SIGS; i++)
        for (int t = 0; t < 2; t++)
            for (int f = 0; f < 2; f++) {
                int expect_n = 0;
                for (int c = 0; c < N_CFGS; c++) {
                    PdbKey k = {sigs[i], targets[t], fps[f], cfgs[c]};
                    PdbRecord r;
                    memset(&r, 0x5a, sizeof r);
                    bool found;
                    CHECK_MSG(pdb_lookup(db, &k, &r, &found, &e) == ST_OK, "%s", e.msg);
                    bool hole = (i + t + f + c) % 3 == 0;
                    CHECK(found == !hole);
                    if (found) {
                        found_n++;
                        expect_n++;
                        CHECK(same_record(&r, &recs[i][t][f][c]));
                        CHECK(r.created >= t0 && r.created <= t1);
                    }
                }
                PdbRecords all;
                CHECK(pdb_lookup_all(db, sigs[i], targets[t], fps[f], &all, &e) == ST_OK);
                CHECK(all.n == expect_n);
                for (int j = 0; j < all.n; j++) {
                    int c = 0;
                    while (c < N_CFGS && strcmp(cfgs[c], all.configs[j]) != 0)
                        c++;
                    CHECK(c < N_CFGS && (i + t + f + c) % 3 != 0);
                    if (c < N_CFGS)
                        CHECK(same_record(&all.recs[j], &recs[i][t][f][c]));
                    if (j)
                        CHECK(strcmp(all.configs[j - 1], all.configs[j]) < 0);
                }
                pdb_records_free(&all);
                CHECK(all.n == 0 && !all.configs);
            }
    CHECK(found_n > N_SIGS * 2 * 2 * N_CFGS / 2);
    // A signature never stored, and one differing in its top bit only.
    PdbKey k = {sigs[1] ^ 0x8000000000000000ull, "cpu", fps[0], cfgs[1]};
    PdbRecord r;
    bool found = true;
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && !found);
    PdbRecords none;
    CHECK(pdb_lookup_all(db, sigs[0], "opencl", fps[0], &none, &e) == ST_OK && none.n == 0);
    pdb_records_free(&none);
    pdb_records_free(NULL);
    pdb_close(db);
}

static void replace_and_batches(void) {
    char path[512];
    path_in(path, sizeof path, "replace.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbKey k = {rnd(), "cpu", "fp", "cfg a"};
    PdbRecord a = random_record(PDB_OK), b = random_record(PDB_WRONG), r;
    snprintf(b.note, sizeof b.note, "output differs at index 17 by 3.5e-2");
    bool found;
    CHECK(pdb_store(db, &k, &a, &e) == ST_OK);
    CHECK(pdb_store(db, &k, &b, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && same_record(&r, &b));
    PdbRecords all;
    CHECK(pdb_lookup_all(db, k.signature, "cpu", "fp", &all, &e) == ST_OK && all.n == 1);
    pdb_records_free(&all);
    // A note longer than the field is truncated, not overflowed.
    memset(b.note, 'x', sizeof b.note);
    CHECK(pdb_store(db, &k, &b, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && strlen(r.note) == sizeof r.note - 1);
    // A rolled-back batch leaves nothing; a committed one everything.
    CHECK(pdb_begin(db, true, &e) == ST_OK);
    for (int i = 0; i < 50; i++) {
        PdbKey ki = {1000 + (uint64_t)i, "cpu", "fp", "batch"};
        CHECK(pdb_store(db, &ki, &a, &e) == ST_OK);
    }
    pdb_rollback(db);
    PdbKey k0 = {1000, "cpu", "fp", "batch"};
    CHECK(pdb_lookup(db, &k0, &r, &found, &e) == ST_OK && !found);
    CHECK(pdb_begin(db, true, &e) == ST_OK);
    for (int i = 0; i < 50; i++) {
        PdbKey ki = {1000 + (uint64_t)i, "cpu", "fp", "batch"};
        CHECK(pdb_store(db, &ki, &a, &e) == ST_OK);
    }
    CHECK(pdb_commit(db, &e) == ST_OK);
    CHECK(pdb_begin(db, false, &e) == ST_OK);
    int n = 0;
    for (int i = 0; i < 50; i++) {
        PdbKey ki = {1000 + (uint64_t)i, "cpu", "fp", "batch"};
        CHECK(pdb_lookup(db, &ki, &r, &found, &e) == ST_OK);
        n += found && same_record(&r, &a);
    }
    CHECK(pdb_commit(db, &e) == ST_OK);
    CHECK_MSG(n == 50, "%d", n);
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

// A child that opens the file, marks k pending and then waits for a byte on `go` (or exits at
// once when go < 0). Reports "marked" by writing one byte to `ready`.
static pid_t pending_child(const char *path, const PdbKey *k, int ready, int go) {
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    Err e = {0};
    ProfileDb *db;
    int st = pdb_open(path, false, &db, &e) == ST_OK && pdb_mark_pending(db, k, &e) == ST_OK;
    pdb_close(db);
    char c = st ? 'y' : 'n';
    if (write(ready, &c, 1) != 1)
        _exit(3);
    if (go >= 0 && read(go, &c, 1) != 1)
        _exit(4);
    _exit(st ? 0 : 2);
}

static void pending_crashed(void) {
    char path[512];
    path_in(path, sizeof path, "pending.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbKey k = {rnd(), "cpu", "fp crash", "cfg"};
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = pending_child(path, &k, ready[1], -1);
    char c = 0;
    CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    PdbRecord r;
    bool found;
    CHECK_MSG(pdb_lookup(db, &k, &r, &found, &e) == ST_OK, "%s", e.msg);
    CHECK(found && r.status == PDB_CRASHED);
    char pidtxt[32];
    snprintf(pidtxt, sizeof pidtxt, "process %d ", (int)pid);
    CHECK_MSG(strstr(r.note, pidtxt) != NULL, "%s", r.note);
    PdbRecords all;
    CHECK(pdb_lookup_all(db, k.signature, k.target, k.fingerprint, &all, &e) == ST_OK);
    CHECK(all.n == 1 && all.recs[0].status == PDB_CRASHED);
    pdb_records_free(&all);

    // A child SIGKILLed while pending reads the same once it is reaped.
    PdbKey k2 = {rnd(), "cpu", "fp crash", "cfg 2"};
    int go[2];
    CHECK(pipe(go) == 0);
    pid = pending_child(path, &k2, ready[1], go[0]);
    CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
    CHECK(pdb_lookup(db, &k2, &r, &found, &e) == ST_OK && found && r.status == PDB_PENDING);
    kill(pid, SIGKILL);
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    CHECK(pdb_lookup(db, &k2, &r, &found, &e) == ST_OK && found && r.status == PDB_CRASHED);
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK);
    CHECK(st.by_status[PDB_CRASHED] == 2 && st.by_status[PDB_PENDING] == 0);
    pdb_stats_free(&st);
    // Storing the result replaces the pending row.
    PdbRecord ok = random_record(PDB_OK);
    CHECK(pdb_store(db, &k2, &ok, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k2, &r, &found, &e) == ST_OK && found && same_record(&r, &ok));
    close(go[0]);
    close(go[1]);
    close(ready[0]);
    close(ready[1]);
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

// A config whose measuring process died is measured once more, then refused: each pending mark
// counts one attempt more than the crashed row it replaces.
static void crash_retried_once(void) {
    char path[512];
    path_in(path, sizeof path, "retry.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbKey k = {rnd(), "cpu", "fp retry", "cfg"};
    PdbRecord r;
    bool found;
    int ready[2];
    CHECK(pipe(ready) == 0);
    for (int attempt = 1; attempt <= PDB_MAX_ATTEMPTS; attempt++) {
        pid_t pid = pending_child(path, &k, ready[1], -1);
        char c = 0;
        int status;
        CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(pdb_lookup(db, &k, &r, &found, &e) == ST_OK, "%s", e.msg);
        CHECK(found && r.status == PDB_CRASHED);
        CHECK_MSG(r.attempts == attempt, "attempt %d read as %d", attempt, r.attempts);
        CHECK(pdb_retry(&r) == (attempt < PDB_MAX_ATTEMPTS));
        PdbRecords all;
        CHECK(pdb_lookup_all(db, k.signature, k.target, k.fingerprint, &all, &e) == ST_OK);
        CHECK(all.n == 1 && all.recs[0].attempts == attempt);
        pdb_records_free(&all);
    }
    // This process's own mark of the crashed row is the next attempt, pending while it lives.
    CHECK(pdb_mark_pending(db, &k, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && r.status == PDB_PENDING &&
          r.attempts == PDB_MAX_ATTEMPTS + 1 && !pdb_retry(&r));
    // A result ends the count; a later pending mark starts it again.
    PdbRecord ok = random_record(PDB_OK);
    CHECK(pdb_store(db, &k, &ok, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && same_record(&r, &ok) &&
          r.attempts == 0 && !pdb_retry(&r));
    CHECK(pdb_mark_pending(db, &k, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && r.attempts == 1);
    // A row stored as crashed is refused for good.
    PdbRecord crashed = random_record(PDB_CRASHED);
    CHECK(pdb_store(db, &k, &crashed, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && r.status == PDB_CRASHED &&
          !pdb_retry(&r));
    close(ready[0]);
    close(ready[1]);
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

// Rows no measurement writes (edited, or written by a broken program) read as absent, are counted,
// and a store replaces them: the database is a cache, never a reason to fail.
static void invalid_rows_ignored(void) {
    char path[512];
    path_in(path, sizeof path, "invalid.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    static const char *const edits[] = {
        "median_s = -1",     "median_s = NULL", "median_s = 'fast'",
        "median_s = 1e999", // SQLite's infinity
        "median_s = -1e999", "min_s = NULL",    "min_s = -0.5",      "min_s = median_s * 2",
        "spread = -1",       "spread = 'x'",    "reps = -3",         "reps = NULL",
        "status = 7",        "status = -1",     "status = 'ok'",     "median_s = x'00ff'",
    };
    enum { N = sizeof edits / sizeof edits[0] };
    Err e = {0};
    uint64_t sig = rnd();
    char cfgs[N + 1][32];
    PdbRecord good[N + 1];
    for (int i = 0; i <= N; i++) { // config N stays valid
        snprintf(cfgs[i], sizeof cfgs[i], "cfg %02d", i);
        PdbKey k = {sig, "cpu", "fp invalid", cfgs[i]};
        good[i] = random_record(PDB_OK);
        CHECK(pdb_store(db, &k, &good[i], &e) == ST_OK);
    }
    pdb_close(db);
    for (int i = 0; i < N; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE measurement SET %s WHERE config = '%s'", edits[i],
                 cfgs[i]);
        raw_sql(path, sql);
    }
    db = open_ok(path);
    if (!db)
        return;
    CHECK(pdb_invalid_rows(db, NULL) == 0);
    PdbRecord r;
    bool found;
    for (int i = 0; i < N; i++) {
        PdbKey k = {sig, "cpu", "fp invalid", cfgs[i]};
        CHECK_MSG(pdb_lookup(db, &k, &r, &found, &e) == ST_OK, "%s", e.msg);
        CHECK_MSG(!found, "the row with %s was read as data", edits[i]);
    }
    const char *why = NULL;
    CHECK_MSG(pdb_invalid_rows(db, &why) == N, "%lld", (long long)pdb_invalid_rows(db, &why));
    CHECK_MSG(why && strstr(why, "median -1"), "%s", why ? why : "(null)");
    PdbRecords all;
    CHECK(pdb_lookup_all(db, sig, "cpu", "fp invalid", &all, &e) == ST_OK);
    CHECK_MSG(all.n == 1 && strcmp(all.configs[0], cfgs[N]) == 0 &&
                  same_record(&all.recs[0], &good[N]),
              "%d rows", all.n);
    pdb_records_free(&all);
    CHECK(pdb_invalid_rows(db, NULL) == 2 * N);
    // Measured again: the new row replaces the bad one.
    for (int i = 0; i < N; i++) {
        PdbKey k = {sig, "cpu", "fp invalid", cfgs[i]};
        CHECK(pdb_store(db, &k, &good[i], &e) == ST_OK);
        CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && same_record(&r, &good[i]));
    }
    // Rows that are not ok keep no times: a failed build's row is valid without them.
    PdbKey kf = {sig, "cpu", "fp invalid", "failed"};
    PdbRecord failed = random_record(PDB_BUILD_FAILED);
    CHECK(pdb_store(db, &kf, &failed, &e) == ST_OK);
    pdb_close(db);
    raw_sql(path, "UPDATE measurement SET median_s = NULL, min_s = -1, reps = NULL "
                  "WHERE config = 'failed'");
    db = open_ok(path);
    if (!db)
        return;
    CHECK(pdb_lookup(db, &kf, &r, &found, &e) == ST_OK && found && r.status == PDB_BUILD_FAILED);
    CHECK(pdb_invalid_rows(db, NULL) == 0);
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

static void pending_live(void) {
    char path[512];
    path_in(path, sizeof path, "live.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbRecord r;
    bool found;
    // This process's own pending row.
    PdbKey k = {rnd(), "cpu", "fp live", "cfg self"};
    int64_t t0 = (int64_t)time(NULL);
    CHECK(pdb_mark_pending(db, &k, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK && found && r.status == PDB_PENDING);
    CHECK(r.created >= t0 && r.created <= (int64_t)time(NULL));
    CHECK(isnan(r.median_s) && isnan(r.min_s)); // no time yet, and not a time of 0
    // A failed build stored with unknown (NaN) times reads them back as NaN.
    PdbRecord bf = random_record(PDB_BUILD_FAILED);
    bf.median_s = bf.min_s = bf.spread = NAN;
    PdbKey kb = {rnd(), "cpu", "fp live", "cfg build failed"};
    CHECK(pdb_store(db, &kb, &bf, &e) == ST_OK);
    CHECK(pdb_lookup(db, &kb, &r, &found, &e) == ST_OK && found && r.status == PDB_BUILD_FAILED);
    CHECK(isnan(r.median_s) && isnan(r.spread) && strcmp(r.note, bf.note) == 0);
    // A live child's: pending while it runs, crashed once it has exited (even before it is
    // reaped: a zombie measures nothing).
    PdbKey k2 = {rnd(), "cpu", "fp live", "cfg child"};
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t pid = pending_child(path, &k2, ready[1], go[0]);
    char c = 0;
    CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
    CHECK(pdb_lookup(db, &k2, &r, &found, &e) == ST_OK && found && r.status == PDB_PENDING);
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.by_status[PDB_PENDING] == 2);
    pdb_stats_free(&st);
    CHECK(write(go[1], "g", 1) == 1);
    bool crashed = false;
    for (int i = 0; i < 400 && !crashed; i++) { // up to 4 s for the child to exit
        CHECK(pdb_lookup(db, &k2, &r, &found, &e) == ST_OK && found);
        crashed = r.status == PDB_CRASHED;
        if (!crashed)
            usleep(10000);
    }
    CHECK(crashed);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    pdb_close(db);
    // Rows written by others: this pid with another start time (pid reused) is crashed; another
    // host's recent row is pending (cannot be checked), its day-old row crashed.
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT INTO measurement (signature, target, fingerprint, config, status, created, "
             "pid, host, proc_start) VALUES "
             "('0000000000000001', 'cpu', 'fp live', 'reused', 4, %lld, %d, '%s', 'bogus/1'),"
             "('0000000000000001', 'cpu', 'fp live', 'remote new', 4, %lld, 1, "
             "'no-such-host.invalid', ''),"
             "('0000000000000001', 'cpu', 'fp live', 'remote old', 4, %lld, 1, "
             "'no-such-host.invalid', '')",
             (long long)time(NULL), (int)getpid(), "HOST", (long long)time(NULL),
             (long long)time(NULL) - 2 * 86400);
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    char *h = strstr(sql, "'HOST'");
    char fixed[1400];
    snprintf(fixed, sizeof fixed, "%.*s'%s'%s", (int)(h - sql), sql, host, h + 6);
    raw_sql(path, fixed);
    db = open_ok(path);
    if (!db)
        return;
    const char *cfgs[] = {"reused", "remote new", "remote old"};
    const PdbStatus want[] = {PDB_CRASHED, PDB_PENDING, PDB_CRASHED};
    for (int i = 0; i < 3; i++) {
        PdbKey ki = {1, "cpu", "fp live", cfgs[i]};
        CHECK(pdb_lookup(db, &ki, &r, &found, &e) == ST_OK && found);
        CHECK_MSG(r.status == want[i], "%s: %s", cfgs[i], pdb_status_name(r.status));
    }
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

static void values(void) {
    char path[512];
    path_in(path, sizeof path, "values.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    double v = 0, bw = 1e9 * (double)(1 + rnd() % 4000), fl = 1e12 * (double)(1 + rnd() % 60);
    bool found = true;
    CHECK(pdb_get_value(db, "gpu A", "bandwidth", &v, &found, &e) == ST_OK && !found);
    CHECK(pdb_set_value(db, "gpu A", "bandwidth", bw, &e) == ST_OK);
    CHECK(pdb_set_value(db, "gpu A", "flops", fl, &e) == ST_OK);
    CHECK(pdb_set_value(db, "gpu B", "bandwidth", bw / 2, &e) == ST_OK);
    pdb_close(db);
    db = open_ok(path);
    if (!db)
        return;
    CHECK(pdb_get_value(db, "gpu A", "bandwidth", &v, &found, &e) == ST_OK && found && v == bw);
    CHECK(pdb_get_value(db, "gpu A", "flops", &v, &found, &e) == ST_OK && found && v == fl);
    CHECK(pdb_get_value(db, "gpu B", "bandwidth", &v, &found, &e) == ST_OK && found && v == bw / 2);
    CHECK(pdb_get_value(db, "gpu B", "flops", &v, &found, &e) == ST_OK && !found);
    CHECK(pdb_set_value(db, "gpu A", "bandwidth", bw * 3, &e) == ST_OK);
    CHECK(pdb_get_value(db, "gpu A", "bandwidth", &v, &found, &e) == ST_OK && v == bw * 3);
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

// Fills a database with known rows: per target "cpu"/"cuda" and fingerprint "dev one"/"dev two".
// Returns the number of measurement rows.
static int populate(ProfileDb *db, int per_group) {
    const char *targets[] = {"cpu", "cuda"}, *fps[] = {"dev one", "dev two"};
    Err e = {0};
    int n = 0;
    for (int t = 0; t < 2; t++)
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < per_group; i++) {
                PdbKey k = {(uint64_t)(i / 2 + 1), targets[t], fps[f], i % 2 ? "b" : "a"};
                PdbRecord r = random_record((PdbStatus)(i % 3));
                CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
                n++;
            }
    CHECK(pdb_set_value(db, "dev one", "bw", 1.5, &e) == ST_OK);
    CHECK(pdb_set_value(db, "dev two", "bw", 2.5, &e) == ST_OK);
    return n;
}

static void stats(void) {
    char path[512];
    path_in(path, sizeof path, "stats.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    int64_t t0 = (int64_t)time(NULL);
    int per = 9;
    int n = populate(db, per);
    PdbKey kp = {999, "cpu", "dev one", "p"};
    CHECK(pdb_mark_pending(db, &kp, &e) == ST_OK);
    int64_t t1 = (int64_t)time(NULL);
    PdbStats st;
    CHECK_MSG(pdb_stats(db, &st, &e) == ST_OK, "%s", e.msg);
    CHECK(strcmp(st.path, path) == 0);
    CHECK(st.rows == n + 1 && st.signatures == (per + 1) / 2 + 1 && st.values == 2);
    CHECK(st.by_status[PDB_OK] == 4 * 3 && st.by_status[PDB_WRONG] == 4 * 3 &&
          st.by_status[PDB_BUILD_FAILED] == 4 * 3 && st.by_status[PDB_PENDING] == 1 &&
          st.by_status[PDB_CRASHED] == 0);
    CHECK(st.oldest >= t0 && st.newest <= t1 && st.oldest <= st.newest);
    CHECK(st.file_bytes > 0 && st.schema_version == PDB_SCHEMA_VERSION);
    CHECK(strcmp(st.integrity, "ok") == 0);
    CHECK(st.n_groups == 4);
    if (st.n_groups == 4) {
        CHECK(strcmp(st.groups[0].target, "cpu") == 0 &&
              strcmp(st.groups[0].fingerprint, "dev one") == 0);
        CHECK(st.groups[0].rows == per + 1 && st.groups[0].by_status[PDB_PENDING] == 1);
        CHECK(strcmp(st.groups[3].target, "cuda") == 0 &&
              strcmp(st.groups[3].fingerprint, "dev two") == 0);
        CHECK(st.groups[3].rows == per && st.groups[3].signatures == (per + 1) / 2);
    }
    char out[600];
    path_in(out, sizeof out, "stats.txt");
    FILE *f = fopen(out, "w+");
    pdb_stats_print(&st, f, false);
    pdb_stats_print(&st, f, true);
    rewind(f);
    static char text[16384];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = 0;
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "\"rows\": %d,", n + 1);
    CHECK_MSG(strstr(text, want) != NULL, "%s", text);
    CHECK(strstr(text, "\"pending\": 1") && strstr(text, "\"fingerprint\": \"dev two\""));
    CHECK(strstr(text, "measurements:") && strstr(text, path));
    pdb_stats_free(&st);
    pdb_stats_free(NULL);
    pdb_close(db);
    // Read-only stats work too.
    CHECK(pdb_open(path, true, &db, &e) == ST_OK);
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.rows == n + 1);
    pdb_stats_free(&st);
    pdb_close(db);
}

static void clear_filters(void) {
    char path[512];
    path_in(path, sizeof path, "clear.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    int per = 7;
    int n = populate(db, per);
    int64_t cnt = -1, del = -1;
    CHECK(pdb_count_matching(db, "cuda", NULL, &cnt, &e) == ST_OK && cnt == 2 * per);
    CHECK(pdb_clear(db, "cuda", NULL, &del, &e) == ST_OK && del == 2 * per);
    PdbRecords all;
    CHECK(pdb_lookup_all(db, 1, "cuda", "dev one", &all, &e) == ST_OK && all.n == 0);
    pdb_records_free(&all);
    CHECK(pdb_lookup_all(db, 1, "cpu", "dev one", &all, &e) == ST_OK && all.n == 2);
    pdb_records_free(&all);
    double v;
    bool found;
    CHECK(pdb_get_value(db, "dev two", "bw", &v, &found, &e) == ST_OK && found); // kept
    // A fingerprint substring: the rows of "dev two" and its device value.
    CHECK(pdb_count_matching(db, NULL, "two", &cnt, &e) == ST_OK && cnt == per + 1);
    CHECK(pdb_clear(db, NULL, "two", &del, &e) == ST_OK && del == per + 1);
    CHECK(pdb_get_value(db, "dev two", "bw", &v, &found, &e) == ST_OK && !found);
    CHECK(pdb_get_value(db, "dev one", "bw", &v, &found, &e) == ST_OK && found && v == 1.5);
    CHECK(pdb_clear(db, "cpu", "no such device", &del, &e) == ST_OK && del == 0);
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.rows == n - 3 * per && st.n_groups == 1);
    pdb_stats_free(&st);
    CHECK(pdb_clear(db, NULL, NULL, &del, &e) == ST_OK && del == per + 1);
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.rows == 0 && st.values == 0 && st.n_groups == 0 &&
          st.oldest == 0);
    pdb_stats_free(&st);
    CHECK(e.code == ST_OK);
    pdb_close(db);
}

// Replaces the stored blob of key with edit(blob) as another program would (SQLite directly).
static void raw_edit_blob(const char *path, const char *table, const char *key, int flip_at,
                          int keep) {
    sqlite3 *raw;
    CHECK(sqlite3_open(path, &raw) == SQLITE_OK);
    sqlite3_stmt *s;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT bytes FROM %s WHERE key = ?1", table);
    CHECK(sqlite3_prepare_v2(raw, sql, -1, &s, NULL) == SQLITE_OK);
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    CHECK(sqlite3_step(s) == SQLITE_ROW);
    int n = sqlite3_column_bytes(s, 0);
    uint8_t *b = malloc((size_t)n + 1);
    if (n)
        memcpy(b, sqlite3_column_blob(s, 0), (size_t)n);
    sqlite3_finalize(s);
    if (flip_at >= 0 && flip_at < n)
        b[flip_at] ^= 0x10;
    if (keep >= 0 && keep < n)
        n = keep;
    snprintf(sql, sizeof sql, "UPDATE %s SET bytes = ?2 WHERE key = ?1", table);
    CHECK(sqlite3_prepare_v2(raw, sql, -1, &s, NULL) == SQLITE_OK);
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 2, b, n, SQLITE_STATIC);
    CHECK(sqlite3_step(s) == SQLITE_DONE);
    sqlite3_finalize(s);
    sqlite3_close(raw);
    free(b);
}

// Expects the reference of key to read back as exactly want (n bytes), or as absent.
static void expect_reference(ProfileDb *db, const char *key, const uint8_t *want, size_t n,
                             bool present, bool damaged_expected) {
    Err e = {0};
    void *got = NULL;
    size_t size = 7;
    bool found = true, damaged = !damaged_expected;
    CHECK_MSG(pdb_get_reference(db, key, &got, &size, &found, &damaged, &e) == ST_OK, "%s", e.msg);
    CHECK_MSG(found == present && damaged == damaged_expected, "%s: found %d damaged %d", key,
              found, damaged);
    if (present)
        CHECK_MSG(size == n && (n == 0 || memcmp(got, want, n) == 0), "%s: %zu bytes, want %zu",
                  key, size, n);
    else
        CHECK(got == NULL && size == 0);
    free(got);
}

static void references(void) {
    char path[512];
    path_in(path, sizeof path, "ref.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    // Round trips of random blobs of several sizes (0 bytes included), and a replacement.
    static const size_t sizes[] = {0, 1, 7, 8, 9, 1000, 3 << 20};
    uint8_t *blobs[7];
    char keys[7][64];
    int64_t total = 0;
    for (int i = 0; i < 7; i++) {
        blobs[i] = malloc(sizes[i] + 1);
        for (size_t j = 0; j < sizes[i]; j++)
            blobs[i][j] = (uint8_t)rnd();
        snprintf(keys[i], sizeof keys[i], "orch test|model %016" PRIx64 "|%d", rnd(), i);
        CHECK_MSG(pdb_set_reference(db, keys[i], blobs[i], sizes[i], &e) == ST_OK, "%s", e.msg);
        total += (int64_t)sizes[i] + 8;
    }
    for (int i = 0; i < 7; i++)
        expect_reference(db, keys[i], blobs[i], sizes[i], true, false);
    expect_reference(db, "no such key", NULL, 0, false, false);
    blobs[5][0] ^= 0xff;
    CHECK(pdb_set_reference(db, keys[5], blobs[5], sizes[5], &e) == ST_OK);
    expect_reference(db, keys[5], blobs[5], sizes[5], true, false);
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.references == 7 && st.reference_bytes == total);
    pdb_stats_free(&st);
    // Damaged rows read as absent, never as data: a flipped byte in the payload or in the
    // checksum, a blob cut short by one byte, one shorter than its checksum, an empty one.
    raw_edit_blob(path, "reference", keys[5], 500, -1);
    expect_reference(db, keys[5], NULL, 0, false, true);
    raw_edit_blob(path, "reference", keys[4], (int)sizes[4] + 3, -1);
    expect_reference(db, keys[4], NULL, 0, false, true);
    raw_edit_blob(path, "reference", keys[3], -1, (int)sizes[3] + 7);
    expect_reference(db, keys[3], NULL, 0, false, true);
    raw_edit_blob(path, "reference", keys[2], -1, 5);
    expect_reference(db, keys[2], NULL, 0, false, true);
    raw_edit_blob(path, "reference", keys[1], -1, 0);
    expect_reference(db, keys[1], NULL, 0, false, true);
    expect_reference(db, keys[6], blobs[6], sizes[6], true, false); // the others are intact
    // Storing again repairs a damaged row.
    CHECK(pdb_set_reference(db, keys[5], blobs[5], sizes[5], &e) == ST_OK);
    expect_reference(db, keys[5], blobs[5], sizes[5], true, false);
    // Clearing: filters (a target, a device) keep the references; no filter removes them.
    PdbKey k = {9, "cpu", "dev", "c"};
    PdbRecord r = random_record(PDB_OK);
    CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
    int64_t cnt = -1, del = -1;
    CHECK(pdb_count_matching(db, "cpu", NULL, &cnt, &e) == ST_OK && cnt == 1);
    CHECK(pdb_clear(db, "cpu", NULL, &del, &e) == ST_OK && del == 1);
    CHECK(pdb_clear(db, NULL, "dev", &del, &e) == ST_OK && del == 0);
    CHECK(pdb_count_matching(db, NULL, NULL, &cnt, &e) == ST_OK && cnt == 7);
    CHECK(pdb_clear(db, NULL, NULL, &del, &e) == ST_OK && del == 7);
    for (int i = 0; i < 7; i++)
        expect_reference(db, keys[i], NULL, 0, false, false);
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.references == 0 && st.reference_bytes == 0);
    pdb_stats_free(&st);
    CHECK(e.code == ST_OK);
    pdb_close(db);
    for (int i = 0; i < 7; i++)
        free(blobs[i]);
}

// Expects the module of key to read back as exactly want (n bytes), or as absent.
static void expect_module(ProfileDb *db, const char *key, const uint8_t *want, size_t n,
                          bool present, bool damaged_expected) {
    Err e = {0};
    void *got = NULL;
    size_t size = 7;
    bool found = !present, damaged = !damaged_expected;
    CHECK_MSG(pdb_get_module(db, key, &got, &size, &found, &damaged, &e) == ST_OK, "%s", e.msg);
    CHECK_MSG(found == present && damaged == damaged_expected, "%s: found %d damaged %d", key,
              found, damaged);
    if (present)
        CHECK_MSG(size == n && memcmp(got, want, n) == 0, "%s: %zu bytes, want %zu", key, size, n);
    else
        CHECK(got == NULL && size == 0);
    free(got);
}

static int64_t module_count(ProfileDb *db, int64_t *bytes) {
    PdbStats st;
    Err e = {0};
    CHECK_MSG(pdb_stats(db, &st, &e) == ST_OK, "%s", e.msg);
    int64_t n = st.modules;
    if (bytes)
        *bytes = st.module_bytes;
    pdb_stats_free(&st);
    return n;
}

// Built modules: round trips, damaged blobs read as absent, eviction of the least recently used
// past the byte limit (a reuse refreshes a row), clearing by target and device, merges leaving
// them out, and a version 3 file (no module table): read-only it has none; read-write upgraded.
static void modules(void) {
    char path[512], other_path[512];
    path_in(path, sizeof path, "mod.db");
    path_in(other_path, sizeof other_path, "mod-other.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    enum { N = 5, SIZE = 1000 };
    uint8_t blob[N][SIZE];
    char keys[N][64];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < SIZE; j++)
            blob[i][j] = (uint8_t)rnd();
        snprintf(keys[i], sizeof keys[i], "%016" PRIx64 "-%d", rnd(), i);
        CHECK_MSG(pdb_set_module(db, keys[i], i < 3 ? "cpu" : "cuda", i % 2 ? "dev a" : "dev b",
                                 blob[i], SIZE, -1, &e) == ST_OK,
                  "%s", e.msg);
    }
    for (int i = 0; i < N; i++)
        expect_module(db, keys[i], blob[i], SIZE, true, false);
    expect_module(db, "no such key", NULL, 0, false, false);
    int64_t bytes = 0;
    CHECK(module_count(db, &bytes) == N && bytes == N * (SIZE + 8));
    // Damaged: a flipped payload byte, a blob cut short; storing again repairs it.
    raw_edit_blob(path, "module", keys[0], 10, -1);
    expect_module(db, keys[0], NULL, 0, false, true);
    raw_edit_blob(path, "module", keys[1], -1, SIZE);
    expect_module(db, keys[1], NULL, 0, false, true);
    CHECK(pdb_set_module(db, keys[0], "cpu", "dev b", blob[0], SIZE, -1, &e) == ST_OK);
    expect_module(db, keys[0], blob[0], SIZE, true, false);
    // Eviction: the rows' last use set apart by hand (a second's resolution otherwise), key 2
    // the oldest; a reuse of key 2 makes key 3 the oldest; room for three leaves the new one and
    // the two most recent others.
    raw_sql(path, "UPDATE module SET used = 1000 + rowid");
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE module SET used = 10 WHERE key = '%s'", keys[2]);
    raw_sql(path, sql);
    snprintf(sql, sizeof sql, "UPDATE module SET used = 20 WHERE key = '%s'", keys[3]);
    raw_sql(path, sql);
    expect_module(db, keys[2], blob[2], SIZE, true, false); // used now
    uint8_t extra[SIZE];
    for (int j = 0; j < SIZE; j++)
        extra[j] = (uint8_t)rnd();
    CHECK(pdb_set_module(db, "extra", "cpu", "dev b", extra, SIZE, 3 * (SIZE + 8), &e) == ST_OK);
    CHECK(module_count(db, NULL) == 3);
    expect_module(db, "extra", extra, SIZE, true, false);
    expect_module(db, keys[2], blob[2], SIZE, true, false);
    expect_module(db, keys[3], NULL, 0, false, false);
    // A limit below the new module alone keeps it (and only it).
    CHECK(pdb_set_module(db, "alone", "cpu", "dev a", extra, SIZE, 10, &e) == ST_OK);
    CHECK(module_count(db, NULL) == 1);
    expect_module(db, "alone", extra, SIZE, true, false);
    // Clearing: by target, by device, and a merge into another file copies none.
    for (int i = 0; i < N; i++)
        CHECK(pdb_set_module(db, keys[i], i < 3 ? "cpu" : "cuda", i % 2 ? "dev a" : "dev b",
                             blob[i], SIZE, -1, &e) == ST_OK);
    ProfileDb *other = open_ok(other_path);
    if (other) {
        PdbShareStats ss;
        CHECK_MSG(pdb_merge(other, db, &ss, &e) == ST_OK, "%s", e.msg);
        CHECK(module_count(other, NULL) == 0);
        pdb_close(other);
    }
    int64_t cnt = -1, del = -1;
    CHECK(pdb_count_matching(db, "cuda", NULL, &cnt, &e) == ST_OK && cnt == 2);
    CHECK(pdb_clear(db, "cuda", NULL, &del, &e) == ST_OK && del == 2);
    CHECK(pdb_clear(db, NULL, "dev a", &del, &e) == ST_OK && del == 2); // keys 1 and "alone"
    expect_module(db, keys[0], blob[0], SIZE, true, false);
    expect_module(db, keys[1], NULL, 0, false, false);
    CHECK(pdb_clear(db, NULL, NULL, &del, &e) == ST_OK && del == 2);
    CHECK(module_count(db, NULL) == 0);
    CHECK(pdb_set_module(db, keys[4], "cpu", "dev", blob[4], SIZE, -1, &e) == ST_OK);
    pdb_close(db);
    // What version 3 wrote: no module table.
    raw_sql(path, "DROP TABLE module; UPDATE meta SET value = '3' WHERE key = 'schema_version'");
    CHECK_MSG(pdb_open(path, true, &db, &e) == ST_OK, "%s", e.msg);
    expect_module(db, keys[4], NULL, 0, false, false);
    CHECK(module_count(db, NULL) == 0);
    CHECK(pdb_set_module(db, keys[4], "cpu", "dev", blob[4], SIZE, -1, &e) == ST_USAGE);
    e = (Err){0};
    pdb_close(db);
    db = open_ok(path);
    if (!db)
        return;
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.schema_version == PDB_SCHEMA_VERSION);
    pdb_stats_free(&st);
    CHECK(pdb_set_module(db, keys[4], "cpu", "dev", blob[4], SIZE, -1, &e) == ST_OK);
    expect_module(db, keys[4], blob[4], SIZE, true, false);
    pdb_close(db);
}

// A version 1 file (no reference table): read-only, it has no references and refuses to store
// one; opened read-write, it is upgraded to version 2 in place, its measurements kept.
static void schema_upgrade(void) {
    char path[512];
    path_in(path, sizeof path, "v1.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbKey k = {5, "cpu", "dev", "c"};
    PdbRecord r = random_record(PDB_OK), got;
    CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
    pdb_close(db);
    raw_sql(path, "DROP TABLE reference; UPDATE meta SET value = '1' WHERE key = "
                  "'schema_version'");
    CHECK_MSG(pdb_open(path, true, &db, &e) == ST_OK, "%s", e.msg);
    expect_reference(db, "k", NULL, 0, false, false);
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.schema_version == 1 && st.references == 0 &&
          st.rows == 1);
    pdb_stats_free(&st);
    int64_t cnt = -1;
    CHECK(pdb_count_matching(db, NULL, NULL, &cnt, &e) == ST_OK && cnt == 1);
    Err e2 = {0};
    CHECK(pdb_set_reference(db, "k", "x", 1, &e2) == ST_USAGE && strstr(e2.msg, "read-only"));
    pdb_close(db);
    db = open_ok(path);
    if (!db)
        return;
    CHECK(pdb_set_reference(db, "k", "xyz", 3, &e) == ST_OK);
    expect_reference(db, "k", (const uint8_t *)"xyz", 3, true, false);
    bool found = false;
    CHECK(pdb_lookup(db, &k, &got, &found, &e) == ST_OK && found && same_record(&r, &got));
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.schema_version == PDB_SCHEMA_VERSION &&
          st.references == 1);
    pdb_stats_free(&st);
    pdb_close(db);
}

// ---- load, suspect timings, check, and sharing (schema version 3) ----

static int64_t count_rows(const char *path) {
    ProfileDb *db;
    Err e = {0};
    PdbStats st;
    if (pdb_open(path, true, &db, &e) != ST_OK)
        return -1;
    int64_t n = pdb_stats(db, &st, &e) == ST_OK ? st.rows : -1;
    pdb_stats_free(&st);
    pdb_close(db);
    return n;
}

static void suspect_round_trip(void) {
    char path[512];
    path_in(path, sizeof path, "suspect.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbKey k = {rnd(), "cpu", "dev", "c suspect"}, k2 = {rnd(), "cpu", "dev", "c plain"};
    PdbRecord r = random_record(PDB_OK), got;
    r.suspect = true;
    r.load = 3.5;
    CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
    PdbRecord w = random_record(PDB_WRONG);
    w.suspect = true; // only an ok timing can be suspect
    w.load = NAN;
    CHECK(pdb_store(db, &k2, &w, &e) == ST_OK);
    bool found;
    CHECK(pdb_lookup(db, &k, &got, &found, &e) == ST_OK && found && same_record(&r, &got));
    CHECK(got.suspect && got.load == 3.5);
    CHECK(pdb_lookup(db, &k2, &got, &found, &e) == ST_OK && found && !got.suspect &&
          isnan(got.load));
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.suspect == 1 && st.n_groups == 1 &&
          st.groups[0].suspect == 1);
    pdb_stats_free(&st);
    // Values no store writes: a suspect flag other than 0/1, a negative or text load.
    const char *bad[] = {"UPDATE measurement SET suspect = 7 WHERE config = 'c suspect'",
                         "UPDATE measurement SET load = -1 WHERE config = 'c suspect'",
                         "UPDATE measurement SET load = 'busy' WHERE config = 'c suspect'"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
        raw_sql(path, bad[i]);
        int64_t before = pdb_invalid_rows(db, NULL);
        CHECK_MSG(pdb_lookup(db, &k, &got, &found, &e) == ST_OK && !found, "%s", bad[i]);
        CHECK(pdb_invalid_rows(db, NULL) == before + 1);
    }
    pdb_close(db);
}

static void schema_v2_upgrade(void) {
    char path[512];
    path_in(path, sizeof path, "v2.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    PdbKey k = {rnd(), "cpu", "dev", "c"};
    PdbRecord r = random_record(PDB_OK), got;
    CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
    pdb_close(db);
    // What version 2 wrote: no load, no suspect column.
    raw_sql(path, "ALTER TABLE measurement DROP COLUMN suspect; ALTER TABLE measurement DROP "
                  "COLUMN load; UPDATE meta SET value = '2' WHERE key = 'schema_version'");
    // Read-only: read as it is (load unknown, nothing suspect), and checked.
    CHECK_MSG(pdb_open(path, true, &db, &e) == ST_OK, "%s", e.msg);
    bool found = false;
    CHECK(pdb_lookup(db, &k, &got, &found, &e) == ST_OK && found && same_record(&r, &got) &&
          !got.suspect && isnan(got.load));
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.schema_version == 2 && st.suspect == 0);
    pdb_stats_free(&st);
    PdbCheck c;
    CHECK(pdb_check(db, 10, &c, &e) == ST_OK && c.rows == 1 && !pdb_check_damaged(&c));
    pdb_check_free(&c);
    pdb_close(db);
    // Read-write: upgraded in place, the row kept.
    db = open_ok(path);
    if (!db)
        return;
    CHECK(pdb_lookup(db, &k, &got, &found, &e) == ST_OK && found && same_record(&r, &got));
    r.suspect = true;
    r.load = 4;
    CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
    CHECK(pdb_lookup(db, &k, &got, &found, &e) == ST_OK && found && got.suspect);
    CHECK(pdb_stats(db, &st, &e) == ST_OK && st.schema_version == PDB_SCHEMA_VERSION &&
          st.rows == 1 && st.suspect == 1);
    pdb_stats_free(&st);
    pdb_close(db);
}

static void check_counts(void) {
    char path[512];
    path_in(path, sizeof path, "check.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    // 3 ok, 2 suspect, 1 wrong, 1 build-failed, 1 stored crashed, 1 pending of this process.
    int per[] = {3, 2, 1, 1, 1};
    PdbStatus sts[] = {PDB_OK, PDB_OK, PDB_WRONG, PDB_BUILD_FAILED, PDB_CRASHED};
    int n = 0;
    for (int g = 0; g < 5; g++)
        for (int i = 0; i < per[g]; i++) {
            char cfg[32];
            snprintf(cfg, sizeof cfg, "cfg %d", n++);
            PdbKey k = {rnd(), "cpu", "dev", cfg};
            PdbRecord r = random_record(sts[g]);
            r.suspect = g == 1;
            CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
        }
    PdbKey kp = {rnd(), "cpu", "dev", "pending"};
    CHECK(pdb_mark_pending(db, &kp, &e) == ST_OK);
    PdbCheck c;
    CHECK(pdb_check(db, 100, &c, &e) == ST_OK);
    CHECK(c.rows == 9 && c.count[PDB_ANOM_SUSPECT] == 2 && c.count[PDB_ANOM_WRONG] == 1 &&
          c.count[PDB_ANOM_BUILD] == 1 && c.count[PDB_ANOM_CRASHED] == 1 &&
          c.count[PDB_ANOM_PENDING] == 1 && c.count[PDB_ANOM_INVALID] == 0);
    CHECK(c.n_rows == 6 && strcmp(c.integrity, "ok") == 0 && pdb_check_damaged(&c));
    pdb_check_free(&c);
    // The listing stops at max_rows; the counts do not.
    CHECK(pdb_check(db, 2, &c, &e) == ST_OK && c.n_rows == 2 && c.count[PDB_ANOM_SUSPECT] == 2);
    pdb_check_free(&c);
    raw_sql(path, "DELETE FROM measurement WHERE status = 3; UPDATE measurement SET median_s = "
                  "-1 WHERE config = 'cfg 0'");
    CHECK(pdb_check(db, 100, &c, &e) == ST_OK && c.count[PDB_ANOM_CRASHED] == 0 &&
          c.count[PDB_ANOM_INVALID] == 1 && pdb_check_damaged(&c));
    pdb_check_free(&c);
    raw_sql(path, "DELETE FROM measurement WHERE config = 'cfg 0'");
    CHECK(pdb_check(db, 100, &c, &e) == ST_OK && !pdb_check_damaged(&c));
    pdb_check_free(&c);
    pdb_close(db);
}

// Stores rec under key in db, or marks it pending when status is PDB_PENDING.
static void put(ProfileDb *db, const PdbKey *k, PdbStatus s, bool suspect, PdbRecord *out) {
    Err e = {0};
    PdbRecord r = random_record(s);
    r.suspect = suspect;
    r.load = 1;
    if (s == PDB_PENDING)
        CHECK(pdb_mark_pending(db, k, &e) == ST_OK);
    else
        CHECK(pdb_store(db, k, &r, &e) == ST_OK);
    if (out)
        *out = r;
}

static void merge_rules(void) {
    char pa[512], pb[512];
    path_in(pa, sizeof pa, "merge_a.db");
    path_in(pb, sizeof pb, "merge_b.db");
    ProfileDb *a = open_ok(pa), *b = open_ok(pb);
    if (!a || !b)
        return;
    // Per case: ours (a; -1 none), theirs (b), whether theirs wins.
    struct {
        int ours, theirs;
        bool ours_suspect, theirs_suspect, wins;
    } cases[] = {
        {-1, PDB_OK, false, false, true},           // missing here
        {-1, PDB_OK, false, true, true},            // missing: even suspect is added
        {PDB_OK, PDB_OK, true, false, true},        // ours suspect, theirs not
        {PDB_CRASHED, PDB_OK, false, false, true},  // ours crashed
        {PDB_CRASHED, PDB_OK, false, true, true},   // crashed < suspect
        {PDB_OK, PDB_OK, false, true, false},       // theirs suspect: ours kept
        {PDB_OK, PDB_OK, false, false, false},      // a tie: ours kept
        {PDB_OK, PDB_OK, true, true, false},        // a tie of suspects: ours kept
        {PDB_WRONG, PDB_OK, false, false, false},   // final rows: ours kept
        {PDB_OK, PDB_CRASHED, false, false, false}, // theirs crashed
        {PDB_PENDING, PDB_OK, false, false, false}, // ours being measured now
        {-1, PDB_BUILD_FAILED, false, false, true}, // failures travel too
    };
    int n = (int)(sizeof cases / sizeof *cases);
    PdbKey keys[16];
    char cfgs[16][32];
    PdbRecord want[16];
    int64_t stamp = 1000000 + (int64_t)(rnd() % 1000);
    for (int i = 0; i < n; i++) {
        snprintf(cfgs[i], sizeof cfgs[i], "case %d", i);
        keys[i] = (PdbKey){rnd(), "cpu", "dev m", cfgs[i]};
        PdbRecord ours = {0}, theirs;
        if (cases[i].ours >= 0)
            put(a, &keys[i], (PdbStatus)cases[i].ours, cases[i].ours_suspect, &ours);
        put(b, &keys[i], (PdbStatus)cases[i].theirs, cases[i].theirs_suspect, &theirs);
        want[i] = cases[i].wins ? theirs : ours;
    }
    // A row of another device never meets ours: added beside it.
    PdbKey other_dev = keys[6];
    other_dev.fingerprint = "dev other";
    put(b, &other_dev, PDB_OK, false, NULL);
    raw_sql(pb, "UPDATE measurement SET created = 1000000"); // dates travel with the rows
    Err e = {0};
    CHECK(pdb_set_value(b, "dev m", "bw", 3e12, &e) == ST_OK);
    CHECK(pdb_set_value(a, "dev m", "peak", 5.0, &e) == ST_OK);
    CHECK(pdb_set_value(b, "dev m", "peak", 6.0, &e) == ST_OK); // ours kept
    pdb_close(b);
    CHECK(pdb_open(pb, true, &b, &e) == ST_OK);
    PdbShareStats st;
    CHECK_MSG(pdb_merge(a, b, &st, &e) == ST_OK, "%s", e.msg);
    int wins = 0, adds = 0;
    for (int i = 0; i < n; i++) {
        wins += cases[i].wins;
        adds += cases[i].wins && cases[i].ours < 0;
    }
    CHECK_MSG(st.rows == n + 1 && st.added == adds + 1 && st.replaced == wins - adds &&
                  st.kept == n - wins,
              "%lld rows, %lld added, %lld replaced, %lld kept", (long long)st.rows,
              (long long)st.added, (long long)st.replaced, (long long)st.kept);
    CHECK(st.values == 2 && st.values_added == 1);
    for (int i = 0; i < n; i++) {
        PdbRecord got;
        bool found;
        CHECK(pdb_lookup(a, &keys[i], &got, &found, &e) == ST_OK && found);
        if (cases[i].ours == PDB_PENDING) {
            CHECK_MSG(got.status == PDB_PENDING, "case %d", i);
            continue;
        }
        CHECK_MSG(same_record(&want[i], &got) && got.suspect == want[i].suspect, "case %d", i);
        if (cases[i].wins)
            CHECK_MSG(got.created == 1000000, "case %d: created %lld", i, (long long)got.created);
    }
    PdbRecord got;
    bool found;
    CHECK(pdb_lookup(a, &other_dev, &got, &found, &e) == ST_OK && found);
    double v = 0;
    CHECK(pdb_get_value(a, "dev m", "bw", &v, &found, &e) == ST_OK && found && v == 3e12);
    CHECK(pdb_get_value(a, "dev m", "peak", &v, &found, &e) == ST_OK && found && v == 5.0);
    (void)stamp;
    // Merging again changes nothing.
    CHECK(pdb_merge(a, b, &st, &e) == ST_OK && st.added == 0 && st.replaced == 0);
    pdb_close(a);
    pdb_close(b);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void export_import(void) {
    char pa[512], pb[512], pj[512], pbad[512];
    path_in(pa, sizeof pa, "exp_a.db");
    path_in(pb, sizeof pb, "exp_b.db");
    path_in(pj, sizeof pj, "exp.jsonl");
    path_in(pbad, sizeof pbad, "bad.jsonl");
    ProfileDb *a = open_ok(pa);
    if (!a)
        return;
    Err e = {0};
    enum { N = 40 };
    PdbKey keys[N];
    PdbRecord recs[N];
    char cfgs[N][64];
    for (int i = 0; i < N; i++) {
        // Config and note texts with quotes, backslashes, control and non-ASCII characters.
        snprintf(cfgs[i], sizeof cfgs[i], "cls=x \"q\" \\ \t\x01 é %d src=%016" PRIx64, i, rnd());
        keys[i] = (PdbKey){rnd(), i % 3 ? "cpu" : "cuda", i % 2 ? "dev \"1\"" : "dev 2", cfgs[i]};
        PdbStatus s = (PdbStatus)(i % 4); // ok, wrong, build-failed, crashed
        recs[i] = random_record(s);
        recs[i].suspect = s == PDB_OK && i % 8 == 0;
        recs[i].load = i % 5 ? (double)(i % 7) : NAN;
        snprintf(recs[i].note, sizeof recs[i].note, "line\nbreak \"%d\" \\ ü", i);
        CHECK(pdb_store(a, &keys[i], &recs[i], &e) == ST_OK);
    }
    PdbKey kp = {rnd(), "cpu", "dev 2", "in flight"};
    CHECK(pdb_mark_pending(a, &kp, &e) == ST_OK); // a measurement in flight: not exported
    CHECK(pdb_set_value(a, "dev 2", "bw", 1.25e12, &e) == ST_OK);
    FILE *f = fopen(pj, "w");
    PdbShareStats st;
    CHECK(f && pdb_export(a, f, &st, &e) == ST_OK && st.rows == N && st.values == 1);
    if (f)
        fclose(f);
    pdb_close(a);
    ProfileDb *b = open_ok(pb);
    if (!b)
        return;
    CHECK_MSG(pdb_import(b, pj, &st, &e) == ST_OK, "%s", e.msg);
    CHECK(st.rows == N && st.added == N && st.values_added == 1);
    for (int i = 0; i < N; i++) {
        PdbRecord got;
        bool found;
        CHECK(pdb_lookup(b, &keys[i], &got, &found, &e) == ST_OK && found);
        CHECK_MSG(found && same_record(&recs[i], &got) && got.suspect == recs[i].suspect &&
                      (got.load == recs[i].load || (isnan(got.load) && isnan(recs[i].load))),
                  "row %d", i);
    }
    bool found;
    PdbRecord got;
    CHECK(pdb_lookup(b, &kp, &got, &found, &e) == ST_OK && !found);
    pdb_close(b);
    int64_t rows = count_rows(pb);
    // Refused files: nothing of them is imported, and the message names the line.
    const char *head = "{\"format\": \"orch-profile\", \"version\": 1}\n";
    const char *good = "{\"kind\": \"measurement\", \"signature\": \"00000000000000aa\", "
                       "\"target\": \"cpu\", \"fingerprint\": \"d\", \"config\": \"c\", "
                       "\"status\": \"ok\", \"median_s\": 2e-5, \"min_s\": 1e-5, \"spread\": "
                       "0.1, \"reps\": 10, \"load\": null, \"suspect\": false, \"note\": \"\", "
                       "\"created\": 5}\n";
    struct {
        const char *first, *third, *want;
    } bad[] = {
        {"{\"format\": \"orch-profile\", \"version\": 2}\n", "", "line 1: export format version 2"},
        {"{\"format\": \"other\", \"version\": 1}\n", "", "line 1: not an orch profile export"},
        {head, "{\"kind\": \"measurement\"", "line 3:"},
        {head, "[1, 2]", "line 3: not a JSON object"},
        {head, "{\"kind\": \"measurement\", \"signature\": \"xyz\"}",
         "line 3: 'target' is missing"},
        {head, "{\"kind\": \"device_value\", \"fingerprint\": \"d\", \"key\": \"k\"}",
         "line 3: 'value' is missing"},
        {head, "{\"kind\": \"table\"}", "line 3: 'kind' table"},
        {head, "{\"kind\": \"device_value\", \"kind\": \"x\"}", "line 3: a field given twice"},
        {head, "{\"a\": {\"b\": 1}}", "line 3: a nested value"},
        {head, "{\"a\": \"\\ud800\"}", "line 3: a bad \\u escape"},
        {head, "{\"a\": 1} x", "line 3: text after the object"},
        {head, "{\"a\": 1e999}", "line 3: a number out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[2048];
        snprintf(text, sizeof text, "%s%s%s\n", bad[i].first, good, bad[i].third);
        write_text(pbad, text);
        b = open_ok(pb);
        Err e2 = {0};
        CHECK_MSG(pdb_import(b, pbad, &st, &e2) != ST_OK && strstr(e2.msg, bad[i].want) &&
                      strstr(e2.msg, pbad),
                  "case %zu: %s", i, e2.msg);
        pdb_close(b);
        CHECK(count_rows(pb) == rows);
    }
    // Ok rows whose values no measurement gives, and a signature that is not 16 hex digits.
    const char *fields[][2] = {{"\"min_s\": 1e-5", "\"min_s\": 3e-5"},
                               {"\"reps\": 10", "\"reps\": -1"},
                               {"\"status\": \"ok\"", "\"status\": \"pending\""},
                               {"\"signature\": \"00000000000000aa\"", "\"signature\": \"aa\""},
                               {"\"suspect\": false", "\"suspect\": 0"},
                               {"\"load\": null", "\"load\": -2"}};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        char line[1024], text[2048];
        snprintf(line, sizeof line, "%s", good);
        char *at = strstr(line, fields[i][0]);
        CHECK(at != NULL);
        if (!at)
            continue;
        char rest[1024];
        snprintf(rest, sizeof rest, "%s", at + strlen(fields[i][0]));
        snprintf(at, sizeof line - (size_t)(at - line), "%s%s", fields[i][1], rest);
        snprintf(text, sizeof text, "%s%s%s", head, good, line);
        write_text(pbad, text);
        b = open_ok(pb);
        Err e2 = {0};
        CHECK_MSG(pdb_import(b, pbad, &st, &e2) == ST_INVALID && strstr(e2.msg, "line 3"), "%s: %s",
                  fields[i][1], e2.msg);
        pdb_close(b);
        CHECK(count_rows(pb) == rows);
    }
}

static void readonly_missing(void) {
    char path[512];
    path_in(path, sizeof path, "missing/none.db");
    Err e = {0};
    ProfileDb *db = (ProfileDb *)&e;
    CHECK(pdb_open(path, true, &db, &e) == ST_RUNTIME && db == NULL);
    CHECK(strstr(e.msg, path) && strstr(e.msg, "does not exist"));
    struct stat sb;
    char dir[512];
    path_in(dir, sizeof dir, "missing");
    CHECK(stat(dir, &sb) != 0); // nothing created
    // A read-only handle refuses writes with a message.
    path_in(path, sizeof path, "ro.db");
    db = open_ok(path);
    pdb_close(db);
    Err e2 = {0};
    CHECK(pdb_open(path, true, &db, &e2) == ST_OK);
    PdbKey k = {1, "cpu", "fp", "c"};
    PdbRecord r = random_record(PDB_OK);
    CHECK(pdb_store(db, &k, &r, &e2) != ST_OK && strstr(e2.msg, "read-only"));
    pdb_close(db);
    Err e4 = {0};
    CHECK(pdb_open("", false, &db, &e4) == ST_USAGE);
    // A directory is not a database.
    Err e3 = {0};
    CHECK(pdb_open(tmpdir, false, &db, &e3) != ST_OK && strstr(e3.msg, tmpdir));
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f)
        fclose(f);
}

static void not_a_database(void) {
    char path[512];
    path_in(path, sizeof path, "model.onnx");
    const char text[] = "this is not a database, it is somebody's file\n";
    write_file(path, text, sizeof text - 1);
    Err e = {0};
    ProfileDb *db;
    CHECK(pdb_open(path, false, &db, &e) == ST_INVALID && db == NULL);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, "not an SQLite database"), "%s", e.msg);
    CHECK(pdb_open(path, true, &db, &e) == ST_INVALID);
    bool removed = true;
    Err e2 = {0};
    CHECK(pdb_damaged(path, true, &removed, &e2) == ST_INVALID && !removed);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == (off_t)(sizeof text - 1)); // untouched
    // Shorter than SQLite's header.
    write_file(path, "SQL", 3);
    Err e3 = {0};
    CHECK(pdb_open(path, false, &db, &e3) == ST_INVALID && strstr(e3.msg, path));
    // A healthy SQLite database of somebody else's.
    path_in(path, sizeof path, "foreign.db");
    raw_sql(path, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)");
    Err e4 = {0};
    CHECK(pdb_open(path, false, &db, &e4) == ST_INVALID);
    CHECK_MSG(strstr(e4.msg, "not an orch profile database") && strstr(e4.msg, path), "%s", e4.msg);
    Err e5 = {0};
    CHECK(pdb_damaged(path, true, &removed, &e5) == ST_OK && !removed);
    CHECK(stat(path, &sb) == 0);
}

static void truncated(void) {
    char path[512];
    path_in(path, sizeof path, "trunc.db");
    ProfileDb *db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    CHECK(pdb_begin(db, true, &e) == ST_OK);
    for (int i = 0; i < 3000; i++) {
        char cfg[64];
        snprintf(cfg, sizeof cfg, "config %d with a longer description", i);
        PdbKey k = {rnd(), "cpu", "a long device fingerprint line for the truncation test", cfg};
        PdbRecord r = random_record(PDB_OK);
        CHECK(pdb_store(db, &k, &r, &e) == ST_OK);
    }
    CHECK(pdb_commit(db, &e) == ST_OK);
    pdb_close(db); // the last connection checkpoints: everything is in the main file
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size > 100000);
    const off_t sizes[] = {sb.st_size / 2, 8192, 4096, 200};
    for (size_t i = 0; i < ORCH_COUNT(sizes); i++) {
        CHECK(truncate(path, sizes[i]) == 0);
        // Whatever call meets the damage reports it, naming the file and the way out.
        Err e2 = {0};
        int rc = pdb_open(path, false, &db, &e2);
        if (rc == ST_OK) {
            PdbRecords all;
            PdbStats st;
            rc = pdb_lookup_all(db, 1, "cpu", "x", &all, &e2);
            if (rc == ST_OK)
                rc = pdb_stats(db, &st, &e2);
            pdb_close(db);
        }
        CHECK_MSG(rc == ST_INVALID, "size %lld: rc %d", (long long)sizes[i], rc);
        CHECK_MSG(strstr(e2.msg, path) && strstr(e2.msg, "orch db clear --db"), "%s", e2.msg);
    }
    bool damaged = false;
    CHECK(pdb_damaged(path, false, &damaged, &e) == ST_OK && damaged);
    CHECK(stat(path, &sb) == 0); // only asked
    CHECK(pdb_damaged(path, true, &damaged, &e) == ST_OK && damaged);
    CHECK(stat(path, &sb) != 0);
    db = open_ok(path); // made anew
    pdb_close(db);
}

static void newer_schema(void) {
    char path[512];
    path_in(path, sizeof path, "newer.db");
    ProfileDb *db = open_ok(path);
    pdb_close(db);
    raw_sql(path, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
    Err e = {0};
    CHECK(pdb_open(path, false, &db, &e) == ST_UNSUPPORTED && db == NULL);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, "schema version 99"), "%s", e.msg);
    Err e2 = {0};
    CHECK(pdb_open(path, true, &db, &e2) == ST_UNSUPPORTED);
    bool removed = true;
    Err e3 = {0};
    CHECK(pdb_damaged(path, true, &removed, &e3) == ST_OK && !removed); // healthy: kept
    raw_sql(path, "UPDATE meta SET value = '1' WHERE key = 'schema_version'");
    db = open_ok(path);
    pdb_close(db);
}

// Each writer stores n rows of its own and reads each back; returns the number of failures.
static int writer_loop(const char *path, uint64_t base, int n) {
    Err e = {0};
    ProfileDb *db;
    if (pdb_open(path, false, &db, &e) != ST_OK) {
        fprintf(stderr, "writer %" PRIu64 ": %s\n", base, e.msg);
        return n;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        PdbKey k = {base + (uint64_t)i, "cpu", "fp concurrent", "cfg"};
        PdbRecord r = {.status = PDB_OK, .median_s = (double)(base + (uint64_t)i), .reps = i};
        PdbRecord got;
        bool found;
        Err ei = {0};
        if (i % 4 == 0 && pdb_mark_pending(db, &k, &ei) != ST_OK)
            bad++;
        if (pdb_store(db, &k, &r, &ei) != ST_OK || pdb_lookup(db, &k, &got, &found, &ei) != ST_OK ||
            !found || got.reps != i)
            bad++;
        if (i % 50 == 0) {
            PdbStats st;
            if (pdb_stats(db, &st, &ei) != ST_OK)
                bad++;
            pdb_stats_free(&st);
        }
        if (ei.code && bad < 3)
            fprintf(stderr, "writer %" PRIu64 ": %s\n", base, ei.msg);
    }
    pdb_close(db);
    return bad;
}

// Four processes create the same file at the same moment and write to it; five rounds, since
// the races of creation are the rarer ones.
static void concurrent_writers(void) {
    enum { NW = 3, N = 150, ROUNDS = 5 };
    for (int round = 0; round < ROUNDS; round++) {
        char path[512], name[64];
        snprintf(name, sizeof name, "concurrent%d.db", round);
        path_in(path, sizeof path, name);
        int go[2];
        CHECK(pipe(go) == 0);
        pid_t pids[NW];
        for (int w = 0; w < NW; w++) {
            pids[w] = fork();
            if (pids[w] == 0) {
                char c;
                if (read(go[0], &c, 1) != 1)
                    _exit(100);
                int bad = writer_loop(path, (uint64_t)(w + 1) << 32, N);
                _exit(bad > 99 ? 99 : bad);
            }
        }
        CHECK(write(go[1], "ggg", NW) == NW);
        int bad_parent = writer_loop(path, 0, N);
        CHECK_MSG(bad_parent == 0, "parent: %d failures", bad_parent);
        for (int w = 0; w < NW; w++) {
            int status;
            CHECK(waitpid(pids[w], &status, 0) == pids[w]);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d: status %d", w,
                      status);
        }
        close(go[0]);
        close(go[1]);
        ProfileDb *db = open_ok(path);
        if (!db)
            return;
        Err e = {0};
        PdbStats st;
        CHECK(pdb_stats(db, &st, &e) == ST_OK && st.rows == (NW + 1) * N &&
              st.by_status[PDB_OK] == (NW + 1) * N);
        pdb_stats_free(&st);
        pdb_close(db);
    }
}

static void sigkill_mid_loop(void) {
    char path[512];
    path_in(path, sizeof path, "killed.db");
    ProfileDb *db = open_ok(path); // exists before the child starts
    pdb_close(db);
    int progress[2];
    CHECK(pipe(progress) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(progress[0]);
        Err e = {0};
        ProfileDb *cdb;
        if (pdb_open(path, false, &cdb, &e) != ST_OK)
            _exit(2);
        for (int i = 0; i < 1000000; i++) {
            PdbKey k = {(uint64_t)i, "cpu", "fp killed", "cfg"};
            PdbRecord r = {.status = PDB_OK, .median_s = 1e-3 * i, .reps = i};
            if (pdb_mark_pending(cdb, &k, &e) != ST_OK || pdb_store(cdb, &k, &r, &e) != ST_OK)
                _exit(3);
            if (write(progress[1], &i, sizeof i) != sizeof i) // i is stored
                _exit(4);
        }
        _exit(5);
    }
    close(progress[1]);
    int last = -1, v;
    while (last < 300 && read(progress[0], &v, sizeof v) == sizeof v)
        last = v;
    kill(pid, SIGKILL);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    while (read(progress[0], &v, sizeof v) == sizeof v) // reported before the kill
        last = v;
    close(progress[0]);
    CHECK(last >= 300);
    db = open_ok(path);
    if (!db)
        return;
    Err e = {0};
    int missing = 0;
    for (int i = 0; i <= last; i++) {
        PdbKey k = {(uint64_t)i, "cpu", "fp killed", "cfg"};
        PdbRecord r;
        bool found;
        CHECK(pdb_lookup(db, &k, &r, &found, &e) == ST_OK);
        if (!found || r.status != PDB_OK || r.reps != i || r.median_s != 1e-3 * i)
            missing++;
    }
    CHECK_MSG(missing == 0, "%d of %d stored rows lost", missing, last + 1);
    // The row being worked on when the kill came is at most one more: pending (now crashed),
    // or stored before its progress report went out.
    PdbStats st;
    CHECK(pdb_stats(db, &st, &e) == ST_OK);
    CHECK(st.rows >= last + 1 && st.rows <= last + 2 && st.by_status[PDB_PENDING] == 0);
    CHECK(st.by_status[PDB_CRASHED] + st.by_status[PDB_OK] == st.rows);
    CHECK(st.by_status[PDB_CRASHED] <= 1);
    CHECK(strcmp(st.integrity, "ok") == 0);
    printf("  killed after %d stores, %" PRId64 " rows, %" PRId64 " crashed\n", last + 1, st.rows,
           st.by_status[PDB_CRASHED]);
    pdb_stats_free(&st);
    pdb_close(db);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int main(void) {
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    const char *env = getenv("ORCH_TEST_SEED");
    if (env)
        seed = strtoull(env, NULL, 0);
    printf("seed %" PRIu64 " (ORCH_TEST_SEED to repeat)\n", seed);
    rng_state = seed | 1;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/orch_pdb_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(schema_creation);
    RUN(round_trip);
    RUN(replace_and_batches);
    RUN(pending_crashed);
    RUN(crash_retried_once);
    RUN(invalid_rows_ignored);
    RUN(pending_live);
    RUN(values);
    RUN(stats);
    RUN(clear_filters);
    RUN(references);
    RUN(schema_upgrade);
    RUN(modules);
    RUN(suspect_round_trip);
    RUN(schema_v2_upgrade);
    RUN(check_counts);
    RUN(merge_rules);
    RUN(export_import);
    RUN(readonly_missing);
    RUN(not_a_database);
    RUN(truncated);
    RUN(newer_schema);
    RUN(concurrent_writers);
    RUN(sigkill_mid_loop);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return CHECK_DONE();
}
