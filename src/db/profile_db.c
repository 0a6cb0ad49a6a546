// The profile database on SQLite (see profile_db.h): schema creation, version check and upgrade,
// cached prepared statements, pending rows that resolve to "crashed" once their process is gone,
// stats, the anomaly check, filtered clearing, rows for sharing with the merge rule, and the
// end-to-end check references (checksummed blobs).
// Needs: libsqlite3. Guarantees: WAL journal with synchronous=NORMAL, so every committed write
// survives the death of the process (SIGKILL included; a power cut may lose the last commits but
// never corrupts the file); a busy timeout, so concurrent processes wait for each other instead of
// failing with "database is locked"; every SQLite error becomes one message naming the file.
#include "profile_db.h"

#include "orch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// Long enough for a compile measuring on another connection to finish its transaction.
#define PDB_BUSY_TIMEOUT_MS 60000
// A pending row of another host cannot be checked; after this long it is taken as crashed.
#define PDB_FOREIGN_PENDING_S (24 * 3600)

// What read_record reads, in its order (a version 2 file opened read-only has no load and
// suspect columns: RECORD_COLUMNS_V2 reads them as unknown and trusted).
#define RECORD_COLUMNS                                                                             \
    "status, median_s, min_s, spread, reps, note, created, pid, host, proc_start, load, suspect"
#define RECORD_COLUMNS_V2                                                                          \
    "status, median_s, min_s, spread, reps, note, created, pid, host, proc_start, NULL, 0"
#define RECORD_CONFIG_COLUMN 12

enum {
    Q_LOOKUP,
    Q_LOOKUP_ALL,
    Q_STORE,
    Q_GET_VALUE,
    Q_SET_VALUE,
    Q_GET_REF,
    Q_SET_REF,
    Q_GET_MODULE,
    Q_SET_MODULE,
    Q_COUNT
};

static const char *const queries[Q_COUNT] = {
    [Q_LOOKUP] = "SELECT " RECORD_COLUMNS " FROM measurement WHERE signature = ?1 AND target = ?2 "
                 "AND fingerprint = ?3 AND config = ?4",
    [Q_LOOKUP_ALL] = "SELECT " RECORD_COLUMNS ", config FROM measurement WHERE signature = ?1 "
                     "AND target = ?2 AND fingerprint = ?3 ORDER BY config",
    [Q_STORE] = "INSERT OR REPLACE INTO measurement (signature, target, fingerprint, config, "
                "status, median_s, min_s, spread, reps, note, created, pid, host, proc_start, "
                "load, suspect) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                "?14, ?15, ?16)",
    [Q_GET_VALUE] = "SELECT value FROM device_value WHERE fingerprint = ?1 AND key = ?2",
    [Q_SET_VALUE] = ("INSERT OR REPLACE INTO device_value (fingerprint, key, value, created) "
                     "VALUES (?1, ?2, ?3, ?4)"),
    [Q_GET_REF] = "SELECT bytes FROM reference WHERE key = ?1",
    [Q_SET_REF] = "INSERT OR REPLACE INTO reference (key, created, bytes) VALUES (?1, ?2, ?3)",
    [Q_GET_MODULE] = "SELECT bytes FROM module WHERE key = ?1",
    [Q_SET_MODULE] = "INSERT OR REPLACE INTO module (key, target, fingerprint, created, used, "
                     "bytes) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
};

// Schema version 2: end-to-end check references (blob: payload, then its 8-byte checksum).
#define REFERENCE_TABLE_SQL                                                                        \
    "CREATE TABLE IF NOT EXISTS reference (key TEXT PRIMARY KEY, created INTEGER NOT NULL, "       \
    "bytes BLOB NOT NULL);"

// Schema version 3: each timing's machine load and whether it stayed unstable (suspect).
#define MEASUREMENT_V3_SQL                                                                         \
    "ALTER TABLE measurement ADD COLUMN load REAL;"                                                \
    "ALTER TABLE measurement ADD COLUMN suspect INTEGER NOT NULL DEFAULT 0;"

// Schema version 4: built kernel modules, reused by compiles that choose the same kernels (blob:
// the module, then its 8-byte checksum; `used`: unix seconds of the last reuse, for eviction).
#define MODULE_TABLE_SQL                                                                           \
    "CREATE TABLE IF NOT EXISTS module (key TEXT PRIMARY KEY, target TEXT NOT NULL, "             \
    "fingerprint TEXT NOT NULL, created INTEGER NOT NULL, used INTEGER NOT NULL, "                \
    "bytes BLOB NOT NULL);"

static const char *const schema_sql =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE measurement ("
    "  signature TEXT NOT NULL," // 16 hex digits
    "  target TEXT NOT NULL,"
    "  fingerprint TEXT NOT NULL,"
    "  config TEXT NOT NULL,"
    "  status INTEGER NOT NULL," // PdbStatus
    "  median_s REAL, min_s REAL, spread REAL,"
    "  reps INTEGER," // timed repeats; of a pending row, which attempt at measuring it this is
    "  note TEXT NOT NULL DEFAULT '',"
    "  created INTEGER NOT NULL,"                // unix seconds
    "  pid INTEGER, host TEXT, proc_start TEXT," // who is measuring a pending row
    "  load REAL,"                               // runnable threads while it was timed
    "  suspect INTEGER NOT NULL DEFAULT 0,"      // 1: stayed unstable (never reused)
    "  PRIMARY KEY (signature, target, fingerprint, config)) WITHOUT ROWID;"
    "CREATE TABLE device_value ("
    "  fingerprint TEXT NOT NULL, key TEXT NOT NULL, value REAL NOT NULL,"
    "  created INTEGER NOT NULL, PRIMARY KEY (fingerprint, key)) WITHOUT "
    "ROWID;" REFERENCE_TABLE_SQL MODULE_TABLE_SQL;

struct ProfileDb {
    sqlite3 *db;
    char *path;
    bool readonly;
    bool in_txn; // inside pdb_begin .. pdb_commit
    bool has_reference; // the reference table exists (false: a version 1 file opened read-only)
    bool has_module;    // the module table exists (false: a file below version 4 opened read-only)
    int version;        // the file's schema version (below 3 only when opened read-only)
    int last_rc; // SQLite's code of the last failure (for the retries while opening)
    sqlite3_stmt *q[Q_COUNT];
    char host[256];       // this machine's host name
    char proc_start[128]; // "BOOT_ID/START_TICKS" of this process ("" when /proc is unreadable)
    int64_t n_invalid;    // rows the look-ups ignored (read_record)
    char invalid_first[192];
};

static const char sqlite_magic[16] = "SQLite format 3";

const char *pdb_status_name(PdbStatus s) {
    static const char *const names[PDB_N_STATUS] = {"ok", "wrong", "build-failed", "crashed",
                                                    "pending"};
    return (unsigned)s < PDB_N_STATUS ? names[s] : "unknown";
}

const char *pdb_default_path(char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(buf, n, "%s/orch/profile.db", xdg);
    else if (home && home[0])
        snprintf(buf, n, "%s/.cache/orch/profile.db", home);
    else
        snprintf(buf, n, "orch-profile.db");
    return buf;
}

const char *pdb_path(const ProfileDb *db) {
    return db->path;
}

// Reads the whole (small) file into buf; false when unreadable.
static bool read_small_file(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = 0;
    return got > 0;
}

// The start time of a process in clock ticks since boot (field 22 of /proc/PID/stat) and its
// state letter; false when the process or /proc is not there. The pid alone can be reused.
static bool proc_info(long pid, unsigned long long *start, char *state) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!read_small_file(path, buf, sizeof buf))
        return false;
    const char *p = strrchr(buf, ')'); // the command name may hold spaces and parentheses
    if (!p)
        return false;
    p++;
    // Fields after the name: 3 state, 4 ppid, ... 22 starttime.
    char st = 0;
    unsigned long long v = 0;
    int field = 2;
    for (const char *t = p; *t;) {
        while (*t == ' ')
            t++;
        if (!*t)
            break;
        field++;
        if (field == 3)
            st = *t;
        if (field == 22) {
            v = strtoull(t, NULL, 10);
            break;
        }
        while (*t && *t != ' ')
            t++;
    }
    if (field != 22)
        return false;
    *start = v;
    *state = st;
    return true;
}

static void boot_id(char *buf, size_t n) {
    if (!read_small_file("/proc/sys/kernel/random/boot_id", buf, n))
        buf[0] = 0;
    buf[strcspn(buf, "\n")] = 0;
}

static void self_identity(ProfileDb *db) {
    if (gethostname(db->host, sizeof db->host) != 0)
        snprintf(db->host, sizeof db->host, "unknown");
    db->host[sizeof db->host - 1] = 0;
    char boot[64];
    boot_id(boot, sizeof boot);
    unsigned long long start;
    char state;
    if (boot[0] && proc_info((long)getpid(), &start, &state))
        snprintf(db->proc_start, sizeof db->proc_start, "%s/%llu", boot, start);
    else
        db->proc_start[0] = 0;
}

// Whether the process that marked a row pending may still be measuring it.
static bool owner_alive(int64_t pid, const char *host, const char *proc_start, int64_t created) {
    char me[256];
    if (gethostname(me, sizeof me) != 0)
        me[0] = 0;
    me[sizeof me - 1] = 0;
    if (!host || strcmp(host, me) != 0)
        return time(NULL) - created < PDB_FOREIGN_PENDING_S;
    if (pid <= 0 || pid > INT32_MAX)
        return false;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return false;
    unsigned long long start;
    char state;
    if (!proc_info((long)pid, &start, &state))
        return true; // exists (kill succeeded) but /proc is hidden: assume alive
    if (state == 'Z' || state == 'X')
        return false; // exited, not yet reaped
    if (proc_start && proc_start[0]) {
        char boot[64], now[128];
        boot_id(boot, sizeof boot);
        snprintf(now, sizeof now, "%s/%llu", boot, start);
        if (strcmp(now, proc_start) != 0)
            return false; // rebooted since, or the pid now belongs to another process
    }
    return true;
}

static int fail_sqlite(const char *path, int rc, const char *errmsg, const char *what, Err *e) {
    int prim = rc & 0xff;
    if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB)
        return err_set(e, ST_INVALID,
                       "profile database %s is damaged (%s, while %s): delete it or run "
                       "'orch db clear --db %s'",
                       path, errmsg, what, path);
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return err_set(e, ST_RUNTIME,
                       "profile database %s stayed locked by another process for %d s (while %s)",
                       path, PDB_BUSY_TIMEOUT_MS / 1000, what);
    if (prim == SQLITE_READONLY)
        return err_set(e, ST_RUNTIME, "profile database %s is read-only here (%s, while %s)", path,
                       errmsg, what);
    if (prim == SQLITE_FULL)
        return err_set(e, ST_RUNTIME, "profile database %s: the disk is full (while %s)", path,
                       what);
    return err_set(e, ST_RUNTIME, "profile database %s: %s (while %s)", path, errmsg, what);
}

static int fail_db(ProfileDb *db, int rc, const char *what, Err *e) {
    db->last_rc = rc;
    return fail_sqlite(db->path, rc, sqlite3_errmsg(db->db), what, e);
}

static int exec_sql(ProfileDb *db, const char *sql, const char *what, Err *e) {
    char *msg = NULL;
    int rc = sqlite3_exec(db->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        db->last_rc = rc;
        fail_sqlite(db->path, rc, msg ? msg : sqlite3_errstr(rc), what, e);
        sqlite3_free(msg);
        return e ? e->code : ST_RUNTIME;
    }
    return ST_OK;
}

static sqlite3_stmt *prepare(ProfileDb *db, const char *sql, const char *what, Err *e) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) {
        fail_db(db, rc, what, e);
        sqlite3_finalize(s);
        return NULL;
    }
    return s;
}

// The cached statement q, reset and with its bindings cleared.
static sqlite3_stmt *query(ProfileDb *db, int q, const char *what, Err *e) {
    if (!db->q[q]) {
        const char *sql = queries[q];
        if (db->version < 3 && q == Q_LOOKUP)
            sql = "SELECT " RECORD_COLUMNS_V2 " FROM measurement WHERE signature = ?1 AND "
                  "target = ?2 AND fingerprint = ?3 AND config = ?4";
        else if (db->version < 3 && q == Q_LOOKUP_ALL)
            sql = "SELECT " RECORD_COLUMNS_V2 ", config FROM measurement WHERE signature = ?1 "
                  "AND target = ?2 AND fingerprint = ?3 ORDER BY config";
        int rc = sqlite3_prepare_v3(db->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &db->q[q], NULL);
        if (rc != SQLITE_OK) {
            fail_db(db, rc, what, e);
            sqlite3_finalize(db->q[q]);
            db->q[q] = NULL;
            return NULL;
        }
    }
    return db->q[q];
}

static void done_with(sqlite3_stmt *s) {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// A short randomised pause, so that racing processes do not retry in step.
static void backoff(void) {
    static unsigned x; // forked processes differ by their pid
    x = x * 1103515245u + 12345u + (unsigned)getpid();
    struct timespec ts = {0, 1000000L + (long)((x >> 8) % 9000000u)};
    nanosleep(&ts, NULL);
}

// SQLite answers SQLITE_BUSY without calling the busy handler in a few races (a journal-mode
// change or WAL recovery in another connection); outside any transaction the statement is simply
// run again until the busy timeout.
static int step(ProfileDb *db, sqlite3_stmt *s) {
    int rc = sqlite3_step(s);
    if ((rc & 0xff) != SQLITE_BUSY || db->in_txn || !sqlite3_get_autocommit(db->db))
        return rc;
    double deadline = now_s() + PDB_BUSY_TIMEOUT_MS / 1000.0;
    while ((rc & 0xff) == SQLITE_BUSY && now_s() < deadline) {
        sqlite3_reset(s);
        backoff();
        rc = sqlite3_step(s);
    }
    return rc;
}

// Runs a statement that returns no rows.
static int step_done(ProfileDb *db, sqlite3_stmt *s, const char *what, Err *e) {
    int rc = step(db, s);
    int st = rc == SQLITE_DONE ? ST_OK : fail_db(db, rc, what, e);
    done_with(s);
    return st;
}

static void bind_key(sqlite3_stmt *s, const PdbKey *k, char hex[17]) {
    snprintf(hex, 17, "%016" PRIx64, k->signature);
    sqlite3_bind_text(s, 1, hex, 16, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, k->target, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, k->fingerprint, -1, SQLITE_STATIC);
    if (k->config)
        sqlite3_bind_text(s, 4, k->config, -1, SQLITE_STATIC);
}

static const char *col_text(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

static double column_time(sqlite3_stmt *s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

static bool column_number(sqlite3_stmt *s, int i) {
    int t = sqlite3_column_type(s, i);
    return t == SQLITE_INTEGER || t == SQLITE_FLOAT;
}

// Fills rec from a Q_LOOKUP/Q_LOOKUP_ALL row, resolving pending rows of dead processes. Returns
// false (why says what is wrong) for a row no measurement writes: the caller ignores it.
static bool read_record(sqlite3_stmt *s, PdbRecord *rec, char *why, size_t why_n) {
    memset(rec, 0, sizeof *rec);
    int64_t status = sqlite3_column_int64(s, 0);
    if (sqlite3_column_type(s, 0) != SQLITE_INTEGER || status < 0 || status >= PDB_N_STATUS) {
        snprintf(why, why_n, "status '%.40s' is none of orch's", col_text(s, 0));
        return false;
    }
    rec->status = (PdbStatus)status;
    // SQLite keeps NaN as NULL; either way the time is unknown, and 0 would read as fastest.
    rec->median_s = column_time(s, 1);
    rec->min_s = column_time(s, 2);
    rec->spread = column_time(s, 3);
    rec->reps = sqlite3_column_int(s, 4);
    snprintf(rec->note, sizeof rec->note, "%s", col_text(s, 5));
    rec->created = sqlite3_column_int64(s, 6);
    rec->load = column_time(s, 10);
    int64_t suspect = sqlite3_column_int64(s, 11);
    if (sqlite3_column_type(s, 11) != SQLITE_INTEGER || (suspect != 0 && suspect != 1) ||
        !(sqlite3_column_type(s, 10) == SQLITE_NULL || column_number(s, 10)) ||
        !(isnan(rec->load) || (rec->load >= 0 && isfinite(rec->load)))) {
        snprintf(why, why_n, "load %.40s and suspect flag %.20s",
                 sqlite3_column_type(s, 10) == SQLITE_NULL ? "NULL" : col_text(s, 10),
                 col_text(s, 11));
        return false;
    }
    rec->suspect = suspect == 1;
    if (rec->status == PDB_OK) {
        // The times an ok row gives are what the solver minimises: they must be real timings.
        bool numbers = column_number(s, 1) && column_number(s, 2) && column_number(s, 4) &&
                       (sqlite3_column_type(s, 3) == SQLITE_NULL || column_number(s, 3));
        if (!numbers || !(rec->median_s >= 0) || !isfinite(rec->median_s) || !(rec->min_s >= 0) ||
            rec->min_s > rec->median_s || rec->reps < 0 ||
            !(isnan(rec->spread) || (rec->spread >= 0 && isfinite(rec->spread)))) {
            snprintf(why, why_n,
                     "an ok row with median %.40s s, min %.40s s, spread %.40s, %.20s repeats",
                     sqlite3_column_type(s, 1) == SQLITE_NULL ? "NULL" : col_text(s, 1),
                     sqlite3_column_type(s, 2) == SQLITE_NULL ? "NULL" : col_text(s, 2),
                     sqlite3_column_type(s, 3) == SQLITE_NULL ? "NULL" : col_text(s, 3),
                     sqlite3_column_type(s, 4) == SQLITE_NULL ? "NULL" : col_text(s, 4));
            return false;
        }
    }
    if (rec->status == PDB_CRASHED)
        rec->attempts = PDB_MAX_ATTEMPTS; // stored as crashed: refused for good
    if (rec->status == PDB_PENDING) {
        rec->attempts =
            sqlite3_column_type(s, 4) == SQLITE_INTEGER && rec->reps > 0 ? rec->reps : 1;
        rec->reps = 0;
        int64_t pid = sqlite3_column_int64(s, 7);
        const char *host = sqlite3_column_type(s, 8) == SQLITE_NULL ? NULL : col_text(s, 8);
        if (!owner_alive(pid, host, col_text(s, 9), rec->created)) {
            rec->status = PDB_CRASHED;
            snprintf(rec->note, sizeof rec->note,
                     "was being measured by process %" PRId64 " on %s, which ended before "
                     "storing a result (crashed or killed; attempt %d of %d)",
                     pid, host ? host : "an unknown host", rec->attempts, PDB_MAX_ATTEMPTS);
        }
    }
    return true;
}

// read_record, counting the rows it refuses.
static bool read_valid(ProfileDb *db, sqlite3_stmt *s, PdbRecord *rec) {
    char why[160];
    PdbRecord r;
    if (read_record(s, &r, why, sizeof why)) {
        *rec = r;
        return true;
    }
    if (db->n_invalid++ == 0)
        snprintf(db->invalid_first, sizeof db->invalid_first, "%s", why);
    return false;
}

bool pdb_retry(const PdbRecord *rec) {
    return rec->status == PDB_CRASHED && rec->attempts < PDB_MAX_ATTEMPTS;
}

int64_t pdb_invalid_rows(const ProfileDb *db, const char **example) {
    if (example)
        *example = db->invalid_first;
    return db->n_invalid;
}

int pdb_lookup(ProfileDb *db, const PdbKey *k, PdbRecord *rec, bool *found, Err *e) {
    *found = false;
    sqlite3_stmt *s = query(db, Q_LOOKUP, "looking up a measurement", e);
    if (!s)
        return e->code;
    char hex[17];
    bind_key(s, k, hex);
    int rc = step(db, s);
    int st = ST_OK;
    if (rc == SQLITE_ROW) {
        *found = read_valid(db, s, rec);
    } else if (rc != SQLITE_DONE) {
        st = fail_db(db, rc, "looking up a measurement", e);
    }
    done_with(s);
    return st;
}

void pdb_records_free(PdbRecords *r) {
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        free(r->configs[i]);
    free(r->configs);
    free(r->recs);
    memset(r, 0, sizeof *r);
}

int pdb_lookup_all(ProfileDb *db, uint64_t signature, const char *target, const char *fingerprint,
                   PdbRecords *out, Err *e) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = query(db, Q_LOOKUP_ALL, "looking up the measurements of a kernel", e);
    if (!s)
        return e->code;
    PdbKey k = {signature, target, fingerprint, NULL};
    char hex[17];
    bind_key(s, &k, hex);
    int cap = 0, rc, st = ST_OK;
    while ((rc = step(db, s)) == SQLITE_ROW) {
        if (out->n == cap) {
            cap = cap ? 2 * cap : 8;
            out->configs = xrealloc(out->configs, (size_t)cap * sizeof *out->configs);
            out->recs = xrealloc(out->recs, (size_t)cap * sizeof *out->recs);
        }
        if (!read_valid(db, s, &out->recs[out->n]))
            continue;
        out->configs[out->n] = xstrdup(col_text(s, RECORD_CONFIG_COLUMN));
        out->n++;
    }
    if (rc != SQLITE_DONE) {
        st = fail_db(db, rc, "looking up the measurements of a kernel", e);
        pdb_records_free(out);
    }
    done_with(s);
    return st;
}

// created: the row's date (0: now).
static int store_row(ProfileDb *db, const PdbKey *k, const PdbRecord *rec, bool pending,
                     int64_t created, Err *e) {
    const char *what = pending ? "marking a measurement pending" : "storing a measurement";
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only (while %s)", db->path,
                       what);
    ORCH_ASSERT(k->target && k->fingerprint && k->config);
    int attempt = 1;
    if (pending) {
        PdbRecord prior;
        bool found;
        if (pdb_lookup(db, k, &prior, &found, e))
            return e->code;
        if (found && prior.status == PDB_CRASHED)
            attempt = prior.attempts + 1;
    }
    sqlite3_stmt *s = query(db, Q_STORE, what, e);
    if (!s)
        return e->code;
    char hex[17];
    bind_key(s, k, hex);
    sqlite3_bind_int(s, 5, pending ? PDB_PENDING : (int)rec->status);
    if (!pending) {
        sqlite3_bind_double(s, 6, rec->median_s);
        sqlite3_bind_double(s, 7, rec->min_s);
        sqlite3_bind_double(s, 8, rec->spread);
        sqlite3_bind_int(s, 9, rec->reps);
        sqlite3_bind_text(s, 10, rec->note, (int)strnlen(rec->note, sizeof rec->note),
                          SQLITE_STATIC);
        if (rec->load >= 0 && isfinite(rec->load))
            sqlite3_bind_double(s, 15, rec->load);
        sqlite3_bind_int(s, 16, rec->status == PDB_OK && rec->suspect);
    } else {
        sqlite3_bind_int(s, 9, attempt);
        sqlite3_bind_text(s, 10, "", 0, SQLITE_STATIC);
        sqlite3_bind_int64(s, 12, (int64_t)getpid());
        sqlite3_bind_text(s, 13, db->host, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 14, db->proc_start, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 16, 0);
    }
    sqlite3_bind_int64(s, 11, created > 0 ? created : (int64_t)time(NULL));
    return step_done(db, s, what, e);
}

int pdb_mark_pending(ProfileDb *db, const PdbKey *k, Err *e) {
    return store_row(db, k, NULL, true, 0, e);
}

int pdb_store(ProfileDb *db, const PdbKey *k, const PdbRecord *rec, Err *e) {
    ORCH_ASSERT((unsigned)rec->status < PDB_N_STATUS);
    return store_row(db, k, rec, false, 0, e);
}

int pdb_begin(ProfileDb *db, bool write, Err *e) {
    ORCH_ASSERT(!db->in_txn);
    if (write && db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    int st = exec_sql(db, write ? "BEGIN IMMEDIATE" : "BEGIN", "starting a transaction", e);
    db->in_txn = st == ST_OK;
    return st;
}

int pdb_commit(ProfileDb *db, Err *e) {
    ORCH_ASSERT(db->in_txn);
    int st = exec_sql(db, "COMMIT", "committing", e);
    if (st != ST_OK)
        sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
    db->in_txn = false;
    return st;
}

void pdb_rollback(ProfileDb *db) {
    if (db && db->in_txn) {
        sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
        db->in_txn = false;
    }
}

int pdb_get_value(ProfileDb *db, const char *fingerprint, const char *key, double *v, bool *found,
                  Err *e) {
    *found = false;
    sqlite3_stmt *s = query(db, Q_GET_VALUE, "reading a device constant", e);
    if (!s)
        return e->code;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    int rc = step(db, s), st = ST_OK;
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_double(s, 0);
        *found = true;
    } else if (rc != SQLITE_DONE) {
        st = fail_db(db, rc, "reading a device constant", e);
    }
    done_with(s);
    return st;
}

int pdb_set_value(ProfileDb *db, const char *fingerprint, const char *key, double v, Err *e) {
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    sqlite3_stmt *s = query(db, Q_SET_VALUE, "storing a device constant", e);
    if (!s)
        return e->code;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 3, v);
    sqlite3_bind_int64(s, 4, (int64_t)time(NULL));
    return step_done(db, s, "storing a device constant", e);
}

// FNV-1a, 64 bits: the references' checksum (a damaged blob must not pass as data).
static uint64_t ref_checksum(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// Reads a checksummed blob (payload, then its FNV-1a checksum in 8 bytes) from column 0 of s's
// row: *bytes malloc'd, or *damaged when the blob is short or disagrees with its checksum.
static void read_checked_blob(sqlite3_stmt *s, void **bytes, size_t *size, bool *found,
                              bool *damaged) {
    const uint8_t *b = sqlite3_column_blob(s, 0);
    int n = sqlite3_column_bytes(s, 0);
    uint64_t sum = 0;
    if (b && n >= 8)
        for (int i = 0; i < 8; i++)
            sum |= (uint64_t)b[n - 8 + i] << (8 * i);
    if (!b || n < 8 || sum != ref_checksum(b, (size_t)n - 8)) {
        *damaged = true;
        return;
    }
    *size = (size_t)n - 8;
    *bytes = xmalloc(*size + 1);
    memcpy(*bytes, b, *size);
    *found = true;
}

// The payload followed by its checksum, as read_checked_blob reads it (malloc'd, size + 8 bytes).
static uint8_t *checked_blob(const void *bytes, size_t size) {
    uint8_t *b = xmalloc(size + 8);
    if (size)
        memcpy(b, bytes, size);
    uint64_t sum = ref_checksum(b, size);
    for (int i = 0; i < 8; i++)
        b[size + (size_t)i] = (uint8_t)(sum >> (8 * i));
    return b;
}

// The checksummed blob of key that query q (one key parameter, one blob column) reads.
static int get_blob(ProfileDb *db, int q, const char *key, const char *what, void **bytes,
                    size_t *size, bool *found, bool *damaged, Err *e) {
    sqlite3_stmt *s = query(db, q, what, e);
    if (!s)
        return e->code;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    int rc = step(db, s), st = ST_OK;
    if (rc == SQLITE_ROW)
        read_checked_blob(s, bytes, size, found, damaged);
    else if (rc != SQLITE_DONE)
        st = fail_db(db, rc, what, e);
    done_with(s);
    return st;
}

int pdb_get_reference(ProfileDb *db, const char *key, void **bytes, size_t *size, bool *found,
                      bool *damaged, Err *e) {
    *bytes = NULL;
    *size = 0;
    *found = *damaged = false;
    if (!db->has_reference)
        return ST_OK;
    return get_blob(db, Q_GET_REF, key, "reading a check reference", bytes, size, found, damaged,
                    e);
}

int pdb_set_reference(ProfileDb *db, const char *key, const void *bytes, size_t size, Err *e) {
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    if (size > (size_t)INT32_MAX - 8)
        return err_set(e, ST_UNSUPPORTED, "a check reference of %zu bytes is too large to store",
                       size);
    sqlite3_stmt *s = query(db, Q_SET_REF, "storing a check reference", e);
    if (!s)
        return e->code;
    uint8_t *b = checked_blob(bytes, size);
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (int64_t)time(NULL));
    sqlite3_bind_blob(s, 3, b, (int)(size + 8), SQLITE_STATIC);
    int st = step_done(db, s, "storing a check reference", e);
    free(b);
    return st;
}

// --- built modules -----------------------------------------------------------------------------

int pdb_get_module(ProfileDb *db, const char *key, void **bytes, size_t *size, bool *found,
                   bool *damaged, Err *e) {
    *bytes = NULL;
    *size = 0;
    *found = *damaged = false;
    if (!db->has_module)
        return ST_OK;
    int st = get_blob(db, Q_GET_MODULE, key, "reading a built module", bytes, size, found, damaged,
                      e);
    // A reuse refreshes the row's place in the eviction order (a read-only file keeps it).
    if (st == ST_OK && *found && !db->readonly) {
        sqlite3_stmt *u =
            prepare(db, "UPDATE module SET used = ?2 WHERE key = ?1", "reading a built module", e);
        if (!u)
            return e->code;
        sqlite3_bind_text(u, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(u, 2, (int64_t)time(NULL));
        int rc = step(db, u);
        if (rc != SQLITE_DONE)
            st = fail_db(db, rc, "reading a built module", e);
        sqlite3_finalize(u);
    }
    return st;
}

int pdb_set_module(ProfileDb *db, const char *key, const char *target, const char *fingerprint,
                   const void *bytes, size_t size, int64_t keep_bytes, Err *e) {
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    if (!db->has_module)
        return ST_OK;
    if (size > (size_t)INT32_MAX - 8)
        return err_set(e, ST_UNSUPPORTED, "a built module of %zu bytes is too large to store",
                       size);
    bool own = !db->in_txn;
    if (own && exec_sql(db, "BEGIN IMMEDIATE", "storing a built module", e) != ST_OK)
        return e->code;
    sqlite3_stmt *s = query(db, Q_SET_MODULE, "storing a built module", e);
    int st = s ? ST_OK : e->code;
    if (s) {
        uint8_t *b = checked_blob(bytes, size);
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, target, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, fingerprint, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, (int64_t)time(NULL));
        sqlite3_bind_blob(s, 5, b, (int)(size + 8), SQLITE_STATIC);
        st = step_done(db, s, "storing a built module", e);
        free(b);
    }
    // The least recently used modules go until the rest fit keep_bytes (the new one stays).
    if (st == ST_OK && keep_bytes >= 0) {
        sqlite3_stmt *d = prepare(
            db,
            "DELETE FROM module WHERE key IN (SELECT key FROM (SELECT key, sum(length(bytes)) "
            "OVER (ORDER BY key = ?1 DESC, used DESC, created DESC, key) AS upto FROM module) "
            "WHERE upto > ?2 AND key != ?1)",
            "evicting built modules", e);
        st = d ? ST_OK : e->code;
        if (d) {
            sqlite3_bind_text(d, 1, key, -1, SQLITE_STATIC);
            sqlite3_bind_int64(d, 2, keep_bytes);
            int rc = step(db, d);
            if (rc != SQLITE_DONE)
                st = fail_db(db, rc, "evicting built modules", e);
            sqlite3_finalize(d);
        }
    }
    if (own) {
        if (st == ST_OK)
            st = exec_sql(db, "COMMIT", "storing a built module", e);
        if (st != ST_OK)
            sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
    }
    return st;
}

// --- opening ---------------------------------------------------------------------------------

// mkdir -p of path's parent directories, new ones with mode 0700 (the cache is the user's).
static int make_parent_dirs(const char *path, Err *e) {
    char *dir = xstrdup(path);
    int st = ST_OK;
    for (char *p = dir + 1; *p && st == ST_OK; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            st = err_set(e, ST_RUNTIME, "cannot create directory %s for the profile database: %s",
                         dir, strerror(errno));
        *p = '/';
    }
    free(dir);
    return st;
}

// Reads the first bytes of the file: a non-empty file that does not start with SQLite's magic
// string is refused before SQLite sees it, with a message that says so.
static int check_magic(const char *path, Err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ST_OK; // missing: created by SQLite, or reported by the caller
    char head[16];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    if (n == 0)
        return ST_OK; // an empty file is an empty database
    if (n < (ssize_t)sizeof head || memcmp(head, sqlite_magic, sizeof head) != 0)
        return err_set(e, ST_INVALID,
                       "%s is not an SQLite database, so not an orch profile database: check "
                       "the --db path; if it is a damaged profile database, delete it",
                       path);
    return ST_OK;
}

// Creates the schema in an empty database, or checks the version of an existing one. Runs in
// one transaction so that two processes creating the same file agree.
static int setup_schema(ProfileDb *db, Err *e) {
    int st = exec_sql(db, db->readonly ? "BEGIN" : "BEGIN IMMEDIATE", "reading the schema", e);
    if (st != ST_OK)
        return st;
    sqlite3_stmt *s = prepare(db,
                              "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                              "name = 'meta'), (SELECT count(*) FROM sqlite_master)",
                              "reading the schema", e);
    int has_meta = 0, n_objects = 0;
    if (s) {
        int rc = step(db, s);
        if (rc == SQLITE_ROW) {
            has_meta = sqlite3_column_int(s, 0);
            n_objects = sqlite3_column_int(s, 1);
        } else {
            st = fail_db(db, rc, "reading the schema", e);
        }
        sqlite3_finalize(s);
    } else {
        st = e->code;
    }
    if (st == ST_OK && !has_meta && n_objects > 0)
        st = err_set(e, ST_INVALID,
                     "%s is an SQLite database but not an orch profile database (it has no "
                     "'meta' table): check the --db path",
                     db->path);
    if (st == ST_OK && !has_meta && db->readonly)
        st =
            err_set(e, ST_RUNTIME, "profile database %s is empty (nothing measured yet)", db->path);
    if (st == ST_OK && !has_meta) {
        char sql[2048];
        snprintf(sql, sizeof sql,
                 "%s INSERT INTO meta VALUES ('schema_version', '%d'), ('created_by', 'orch %s');",
                 schema_sql, PDB_SCHEMA_VERSION, ORCH_VERSION);
        st = exec_sql(db, sql, "creating the schema", e);
        db->has_reference = db->has_module = true;
        db->version = PDB_SCHEMA_VERSION;
    } else if (st == ST_OK) {
        s = prepare(db, "SELECT value FROM meta WHERE key = 'schema_version'",
                    "reading the schema version", e);
        int64_t version = 0;
        if (s) {
            int rc = step(db, s);
            if (rc == SQLITE_ROW)
                version = sqlite3_column_int64(s, 0);
            else if (rc != SQLITE_DONE)
                st = fail_db(db, rc, "reading the schema version", e);
            sqlite3_finalize(s);
        } else {
            st = e->code;
        }
        if (st == ST_OK && version >= 1 && version < PDB_SCHEMA_VERSION && !db->readonly) {
            // Version 1 → 2: the reference table; 2 → 3: the load and suspect columns (old
            // rows: load unknown, not suspect); 3 → 4: the module table. All in this same
            // transaction, rows kept.
            // A file whose version was set back by hand may have the columns already.
            bool has_load = false;
            s = prepare(db,
                        "SELECT count(*) FROM pragma_table_info('measurement') WHERE name = "
                        "'load'",
                        "reading the schema", e);
            if (s && step(db, s) == SQLITE_ROW)
                has_load = sqlite3_column_int(s, 0) > 0;
            sqlite3_finalize(s);
            char sql[2048];
            snprintf(sql, sizeof sql,
                     "%s%s%s UPDATE meta SET value = '%d' WHERE key = "
                     "'schema_version';",
                     version < 2 ? REFERENCE_TABLE_SQL : "", has_load ? "" : MEASUREMENT_V3_SQL,
                     MODULE_TABLE_SQL, PDB_SCHEMA_VERSION);
            st = exec_sql(db, sql, "upgrading the schema to version 4", e);
            version = PDB_SCHEMA_VERSION;
        }
        db->has_reference = version >= 2;
        db->has_module = version >= 4;
        db->version = (int)ORCH_MIN(version, PDB_SCHEMA_VERSION);
        if (st == ST_OK && version > PDB_SCHEMA_VERSION)
            st = err_set(e, ST_UNSUPPORTED,
                         "profile database %s has schema version %" PRId64
                         ", newer than this orch reads (%d): use the newer orch that wrote it, "
                         "or another file with --db",
                         db->path, version, PDB_SCHEMA_VERSION);
        else if (st == ST_OK && version < 1)
            st = err_set(e, ST_INVALID,
                         "profile database %s has no valid schema version in its 'meta' table: "
                         "delete it or run 'orch db clear --db %s'",
                         db->path, db->path);
    }
    if (st == ST_OK)
        return exec_sql(db, "COMMIT", "creating the schema", e);
    sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

// WAL lets look-ups run while another process writes; the mode is stored in the file.
static int setup_wal(ProfileDb *db, Err *e) {
    sqlite3_stmt *s = prepare(db, "PRAGMA journal_mode = WAL", "switching to WAL mode", e);
    if (!s)
        return e->code;
    int rc = step(db, s), st = ST_OK;
    if (rc != SQLITE_ROW)
        st = fail_db(db, rc, "switching to WAL mode", e);
    else if (strcmp(col_text(s, 0), "wal") != 0)
        st = err_set(e, ST_RUNTIME,
                     "profile database %s: cannot use write-ahead logging (journal mode stays "
                     "'%s'); is it on a network file system?",
                     db->path, col_text(s, 0));
    sqlite3_finalize(s);
    return st;
}

int pdb_open(const char *path, bool readonly, ProfileDb **out, Err *e) {
    *out = NULL;
    char def[4096];
    if (!path)
        path = pdb_default_path(def, sizeof def);
    if (!path[0])
        return err_set(e, ST_USAGE, "the profile database file name is empty");
    struct stat sb;
    bool exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        return err_set(e, ST_USAGE, "profile database %s is a directory, not a file", path);
    if (readonly && !exists)
        return err_set(e, ST_RUNTIME,
                       "profile database %s does not exist (nothing measured yet; 'orch compile' "
                       "creates it)",
                       path);
    if (!exists && make_parent_dirs(path, e) != ST_OK)
        return e->code;
    if (check_magic(path, e) != ST_OK)
        return e->code;

    ProfileDb *db = xcalloc(1, sizeof *db);
    db->path = xstrdup(path);
    db->readonly = readonly;
    self_identity(db);
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(path, &db->db, flags, NULL);
    int st = ST_OK;
    if (rc != SQLITE_OK) {
        st = fail_sqlite(path, rc, db->db ? sqlite3_errmsg(db->db) : sqlite3_errstr(rc),
                         readonly ? "opening it" : "opening or creating it", e);
    } else {
        sqlite3_extended_result_codes(db->db, 1);
        sqlite3_busy_timeout(db->db, PDB_BUSY_TIMEOUT_MS);
        // Processes creating the same file at once can meet SQLITE_BUSY outside the busy
        // handler's reach (see step()): the whole set-up is idempotent, so it is run again.
        double deadline = now_s() + PDB_BUSY_TIMEOUT_MS / 1000.0;
        for (;;) {
            Err le = {0};
            db->last_rc = SQLITE_OK;
            // In WAL mode NORMAL syncs at checkpoints only: commits survive a killed process.
            st = exec_sql(db, "PRAGMA synchronous = NORMAL", "opening it", &le);
            if (st == ST_OK && !readonly)
                st = setup_wal(db, &le);
            if (st == ST_OK)
                st = setup_schema(db, &le);
            if (st == ST_OK)
                break;
            if ((db->last_rc & 0xff) != SQLITE_BUSY || now_s() >= deadline) {
                err_set(e, le.code, "%s", le.msg);
                break;
            }
            backoff();
        }
    }
    if (st != ST_OK) {
        pdb_close(db);
        return st;
    }
    *out = db;
    return ST_OK;
}

void pdb_close(ProfileDb *db) {
    if (!db)
        return;
    pdb_rollback(db);
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(db->q[i]);
    sqlite3_close(db->db);
    free(db->path);
    free(db);
}

// --- stats and clear -------------------------------------------------------------------------

static PdbGroupStats *find_group(PdbStats *st, const char *target, const char *fp) {
    for (int i = 0; i < st->n_groups; i++)
        if (strcmp(st->groups[i].target, target) == 0 && strcmp(st->groups[i].fingerprint, fp) == 0)
            return &st->groups[i];
    return NULL;
}

static int64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

// The rows of a blob table and their blobs' bytes in all.
static int count_blobs(ProfileDb *db, const char *table, int64_t *rows, int64_t *bytes, Err *e) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*), coalesce(sum(length(bytes)), 0) FROM %s", table);
    sqlite3_stmt *s = prepare(db, sql, "reading statistics", e);
    if (!s)
        return e->code;
    int rc = step(db, s);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(s);
        return fail_db(db, rc, "reading statistics", e);
    }
    *rows = sqlite3_column_int64(s, 0);
    *bytes = sqlite3_column_int64(s, 1);
    sqlite3_finalize(s);
    return ST_OK;
}

static int stats_queries(ProfileDb *db, PdbStats *st, Err *e) {
    const char *what = "reading statistics";
    sqlite3_stmt *s = prepare(db,
                              "SELECT (SELECT count(*) FROM measurement), "
                              "(SELECT count(DISTINCT signature) FROM measurement), "
                              "(SELECT min(created) FROM measurement), "
                              "(SELECT max(created) FROM measurement), "
                              "(SELECT count(*) FROM device_value), "
                              "(SELECT value FROM meta WHERE key = 'schema_version')",
                              what, e);
    if (!s)
        return e->code;
    int rc = step(db, s);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(s);
        return fail_db(db, rc, what, e);
    }
    st->rows = sqlite3_column_int64(s, 0);
    st->signatures = sqlite3_column_int64(s, 1);
    st->oldest = sqlite3_column_int64(s, 2);
    st->newest = sqlite3_column_int64(s, 3);
    st->values = sqlite3_column_int64(s, 4);
    st->schema_version = sqlite3_column_int(s, 5);
    sqlite3_finalize(s);
    if (db->has_reference &&
        (rc = count_blobs(db, "reference", &st->references, &st->reference_bytes, e)) != ST_OK)
        return rc;
    if (db->has_module &&
        (rc = count_blobs(db, "module", &st->modules, &st->module_bytes, e)) != ST_OK)
        return rc;

    s = prepare(db,
                "SELECT target, fingerprint, count(*), count(DISTINCT signature) FROM "
                "measurement GROUP BY target, fingerprint ORDER BY target, fingerprint",
                what, e);
    if (!s)
        return e->code;
    int cap = 0;
    while ((rc = step(db, s)) == SQLITE_ROW) {
        if (st->n_groups == cap) {
            cap = cap ? 2 * cap : 4;
            st->groups = xrealloc(st->groups, (size_t)cap * sizeof *st->groups);
        }
        PdbGroupStats *g = &st->groups[st->n_groups++];
        memset(g, 0, sizeof *g);
        g->target = xstrdup(col_text(s, 0));
        g->fingerprint = xstrdup(col_text(s, 1));
        g->rows = sqlite3_column_int64(s, 2);
        g->signatures = sqlite3_column_int64(s, 3);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return fail_db(db, rc, what, e);

    // Pending rows are split into pending and crashed one by one (there are few).
    s = prepare(db,
                "SELECT target, fingerprint, status, count(*) FROM measurement WHERE status != "
                "?1 GROUP BY target, fingerprint, status",
                what, e);
    if (!s)
        return e->code;
    sqlite3_bind_int(s, 1, PDB_PENDING);
    while ((rc = step(db, s)) == SQLITE_ROW) {
        PdbGroupStats *g = find_group(st, col_text(s, 0), col_text(s, 1));
        int status = sqlite3_column_int(s, 2);
        int64_t n = sqlite3_column_int64(s, 3);
        if (status < 0 || status >= PDB_N_STATUS)
            status = PDB_CRASHED;
        if (g)
            g->by_status[status] += n;
        st->by_status[status] += n;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return fail_db(db, rc, what, e);
    s = prepare(db,
                "SELECT target, fingerprint, pid, host, proc_start, created FROM measurement "
                "WHERE status = ?1",
                what, e);
    if (!s)
        return e->code;
    sqlite3_bind_int(s, 1, PDB_PENDING);
    while ((rc = step(db, s)) == SQLITE_ROW) {
        PdbGroupStats *g = find_group(st, col_text(s, 0), col_text(s, 1));
        const char *host = sqlite3_column_type(s, 3) == SQLITE_NULL ? NULL : col_text(s, 3);
        bool alive = owner_alive(sqlite3_column_int64(s, 2), host, col_text(s, 4),
                                 sqlite3_column_int64(s, 5));
        int status = alive ? PDB_PENDING : PDB_CRASHED;
        if (g)
            g->by_status[status]++;
        st->by_status[status]++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return fail_db(db, rc, what, e);

    if (db->version >= 3) {
        s = prepare(db,
                    "SELECT target, fingerprint, count(*) FROM measurement WHERE status = ?1 AND "
                    "suspect = 1 GROUP BY target, fingerprint",
                    what, e);
        if (!s)
            return e->code;
        sqlite3_bind_int(s, 1, PDB_OK);
        while ((rc = step(db, s)) == SQLITE_ROW) {
            PdbGroupStats *g = find_group(st, col_text(s, 0), col_text(s, 1));
            int64_t n = sqlite3_column_int64(s, 2);
            if (g)
                g->suspect += n;
            st->suspect += n;
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE)
            return fail_db(db, rc, what, e);
    }

    s = prepare(db, "PRAGMA quick_check(1)", "checking integrity", e);
    if (!s)
        return e->code;
    rc = step(db, s);
    if (rc == SQLITE_ROW)
        snprintf(st->integrity, sizeof st->integrity, "%s", col_text(s, 0));
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return fail_db(db, rc, "checking integrity", e);
    return ST_OK;
}

void pdb_stats_free(PdbStats *st) {
    if (!st)
        return;
    for (int i = 0; i < st->n_groups; i++) {
        free(st->groups[i].target);
        free(st->groups[i].fingerprint);
    }
    free(st->groups);
    st->groups = NULL;
    st->n_groups = 0;
}

int pdb_stats(ProfileDb *db, PdbStats *st, Err *e) {
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", db->path);
    // One read transaction: the numbers agree with each other even while a compile writes.
    bool own = !db->in_txn;
    if (own && exec_sql(db, "BEGIN", "reading statistics", e) != ST_OK)
        return e->code;
    int rc = stats_queries(db, st, e);
    if (own)
        sqlite3_exec(db->db, rc == ST_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    if (rc != ST_OK) {
        pdb_stats_free(st);
        return rc;
    }
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", db->path);
    st->file_bytes = file_size(db->path) + file_size(wal);
    return ST_OK;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void iso_date(int64_t t, char *buf, size_t n, bool utc) {
    time_t tt = (time_t)t;
    struct tm tm;
    if (!t || !(utc ? gmtime_r(&tt, &tm) : localtime_r(&tt, &tm)))
        snprintf(buf, n, "-");
    else
        strftime(buf, n, utc ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm);
}

static void print_by_status(FILE *f, const int64_t *by, bool json) {
    for (int s = 0; s < PDB_N_STATUS; s++) {
        if (json)
            fprintf(f, "%s\"%s\": %" PRId64, s ? ", " : "", pdb_status_name((PdbStatus)s), by[s]);
        else
            fprintf(f, "%s%s %" PRId64, s ? ", " : "", pdb_status_name((PdbStatus)s), by[s]);
    }
}

void pdb_stats_print(const PdbStats *st, FILE *f, bool json) {
    char a[64], b[64];
    if (json) {
        fprintf(f, "{\"path\": ");
        json_string(f, st->path);
        iso_date(st->oldest, a, sizeof a, true);
        iso_date(st->newest, b, sizeof b, true);
        fprintf(f,
                ", \"file_bytes\": %" PRId64 ", \"schema_version\": %d, \"rows\": %" PRId64
                ", \"kernels\": %" PRId64 ", \"device_values\": %" PRId64
                ", \"references\": %" PRId64 ", \"reference_bytes\": %" PRId64
                ", \"modules\": %" PRId64 ", \"module_bytes\": %" PRId64
                ", \"oldest\": %" PRId64 ", \"newest\": %" PRId64
                ", \"oldest_iso\": \"%s\", \"newest_iso\": \"%s\", \"suspect\": %" PRId64
                ", \"integrity\": ",
                st->file_bytes, st->schema_version, st->rows, st->signatures, st->values,
                st->references, st->reference_bytes, st->modules, st->module_bytes, st->oldest, st->newest, a, b, st->suspect);
        json_string(f, st->integrity);
        fprintf(f, ", \"by_status\": {");
        print_by_status(f, st->by_status, true);
        fprintf(f, "}, \"devices\": [");
        for (int i = 0; i < st->n_groups; i++) {
            const PdbGroupStats *g = &st->groups[i];
            fprintf(f, "%s{\"target\": ", i ? ", " : "");
            json_string(f, g->target);
            fprintf(f, ", \"fingerprint\": ");
            json_string(f, g->fingerprint);
            fprintf(f,
                    ", \"rows\": %" PRId64 ", \"kernels\": %" PRId64 ", \"suspect\": %" PRId64
                    ", \"by_status\": {",
                    g->rows, g->signatures, g->suspect);
            print_by_status(f, g->by_status, true);
            fprintf(f, "}}");
        }
        fprintf(f, "]}\n");
        return;
    }
    fprintf(f, "profile database: %s\n", st->path);
    fprintf(f, "  size:          %.1f KiB (schema version %d, integrity %s)\n",
            (double)st->file_bytes / 1024.0, st->schema_version, st->integrity);
    fprintf(f, "  measurements:  %" PRId64 " of %" PRId64 " distinct kernels (", st->rows,
            st->signatures);
    print_by_status(f, st->by_status, false);
    fprintf(f, ")\n");
    if (st->suspect)
        fprintf(f,
                "  suspect:       %" PRId64 " ok timing%s unstable (measured on a busy machine): "
                "not reused, the next compile measures %s again ('orch db check' lists them)\n",
                st->suspect, st->suspect == 1 ? "" : "s", st->suspect == 1 ? "it" : "them");
    iso_date(st->oldest, a, sizeof a, false);
    iso_date(st->newest, b, sizeof b, false);
    fprintf(f, "  measured:      %s .. %s (local time)\n", a, b);
    fprintf(f, "  device values: %" PRId64 "\n", st->values);
    fprintf(f, "  references:    %" PRId64 " (end-to-end check outputs, %.1f KiB)\n",
            st->references, (double)st->reference_bytes / 1024.0);
    fprintf(f, "  modules:       %" PRId64 " (built kernels reused by compiles, %.1f KiB)\n",
            st->modules, (double)st->module_bytes / 1024.0);
    if (st->n_groups)
        fprintf(f, "  by target and device:\n");
    for (int i = 0; i < st->n_groups; i++) {
        const PdbGroupStats *g = &st->groups[i];
        fprintf(f, "    %-5s %" PRId64 " rows, %" PRId64 " kernels (", g->target, g->rows,
                g->signatures);
        print_by_status(f, g->by_status, false);
        if (g->suspect)
            fprintf(f, "; %" PRId64 " suspect", g->suspect);
        fprintf(f, ")\n          %s\n", g->fingerprint);
    }
}

static const char *const clear_where =
    "(?1 IS NULL OR target = ?1) AND (?2 IS NULL OR instr(fingerprint, ?2) > 0)";

static void bind_filters(sqlite3_stmt *s, const char *target, const char *fp) {
    if (target)
        sqlite3_bind_text(s, 1, target, -1, SQLITE_STATIC);
    if (fp)
        sqlite3_bind_text(s, 2, fp, -1, SQLITE_STATIC);
}

int pdb_count_matching(ProfileDb *db, const char *target, const char *fingerprint_sub, int64_t *n,
                       Err *e) {
    *n = 0;
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM measurement WHERE %s), "
             "CASE WHEN ?1 IS NULL THEN (SELECT count(*) FROM device_value WHERE "
             "?2 IS NULL OR instr(fingerprint, ?2) > 0) ELSE 0 END, "
             "CASE WHEN ?1 IS NULL AND ?2 IS NULL AND %d THEN (SELECT count(*) FROM %s) "
             "ELSE 0 END, (SELECT count(*) FROM %s%s)",
             clear_where, db->has_reference ? 1 : 0,
             db->has_reference ? "reference" : "meta WHERE 0",
             db->has_module ? "module WHERE " : "meta WHERE 0", db->has_module ? clear_where : "");
    sqlite3_stmt *s = prepare(db, sql, "counting rows", e);
    if (!s)
        return e->code;
    bind_filters(s, target, fingerprint_sub);
    int rc = step(db, s), st = ST_OK;
    if (rc == SQLITE_ROW)
        *n = sqlite3_column_int64(s, 0) + sqlite3_column_int64(s, 1) + sqlite3_column_int64(s, 2) +
             sqlite3_column_int64(s, 3);
    else
        st = fail_db(db, rc, "counting rows", e);
    sqlite3_finalize(s);
    return st;
}

int pdb_clear(ProfileDb *db, const char *target, const char *fingerprint_sub, int64_t *deleted,
              Err *e) {
    *deleted = 0;
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    bool own = !db->in_txn;
    if (own && exec_sql(db, "BEGIN IMMEDIATE", "clearing", e) != ST_OK)
        return e->code;
    char sql[512];
    snprintf(sql, sizeof sql, "DELETE FROM measurement WHERE %s", clear_where);
    sqlite3_stmt *s = prepare(db, sql, "clearing measurements", e);
    int st = s ? ST_OK : e->code;
    if (s) {
        bind_filters(s, target, fingerprint_sub);
        int rc = step(db, s);
        if (rc == SQLITE_DONE)
            *deleted += sqlite3_changes(db->db);
        else
            st = fail_db(db, rc, "clearing measurements", e);
        sqlite3_finalize(s);
    }
    if (st == ST_OK && !target) {
        s = prepare(db, "DELETE FROM device_value WHERE ?2 IS NULL OR instr(fingerprint, ?2) > 0",
                    "clearing device values", e);
        st = s ? ST_OK : e->code;
        if (s) {
            bind_filters(s, NULL, fingerprint_sub);
            int rc = step(db, s);
            if (rc == SQLITE_DONE)
                *deleted += sqlite3_changes(db->db);
            else
                st = fail_db(db, rc, "clearing device values", e);
            sqlite3_finalize(s);
        }
    }
    if (st == ST_OK && db->has_module) {
        snprintf(sql, sizeof sql, "DELETE FROM module WHERE %s", clear_where);
        s = prepare(db, sql, "clearing built modules", e);
        st = s ? ST_OK : e->code;
        if (s) {
            bind_filters(s, target, fingerprint_sub);
            int rc = step(db, s);
            if (rc == SQLITE_DONE)
                *deleted += sqlite3_changes(db->db);
            else
                st = fail_db(db, rc, "clearing built modules", e);
            sqlite3_finalize(s);
        }
    }
    if (st == ST_OK && !target && !fingerprint_sub && db->has_reference) {
        s = prepare(db, "DELETE FROM reference", "clearing check references", e);
        st = s ? ST_OK : e->code;
        if (s) {
            int rc = step(db, s);
            if (rc == SQLITE_DONE)
                *deleted += sqlite3_changes(db->db);
            else
                st = fail_db(db, rc, "clearing check references", e);
            sqlite3_finalize(s);
        }
    }
    if (own) {
        if (st == ST_OK)
            st = exec_sql(db, "COMMIT", "clearing", e);
        if (st != ST_OK)
            sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (st != ST_OK)
        *deleted = 0;
    return st;
}

int pdb_damaged(const char *path, bool remove, bool *damaged_out, Err *e) {
    *damaged_out = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, ST_RUNTIME, "cannot open %s: %s", path, strerror(errno));
    char head[16];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    if (n != (ssize_t)sizeof head || memcmp(head, sqlite_magic, sizeof head) != 0)
        return err_set(e, ST_INVALID,
                       "%s is not an SQLite database: not removing it (check the --db path, or "
                       "delete it yourself)",
                       path);
    // Damaged means SQLite itself says so; a healthy database of any kind is left alone.
    sqlite3 *raw = NULL;
    bool damaged = false;
    int rc = sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(raw, "PRAGMA quick_check(1)", -1, &s, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(s);
            if (rc == SQLITE_ROW && strcmp(col_text(s, 0), "ok") != 0)
                damaged = true;
        }
        sqlite3_finalize(s);
    }
    int prim = rc & 0xff;
    if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB)
        damaged = true;
    sqlite3_close(raw);
    *damaged_out = damaged;
    if (!damaged || !remove)
        return ST_OK;
    char aux[4200];
    if (unlink(path) != 0)
        return err_set(e, ST_RUNTIME, "cannot remove %s: %s", path, strerror(errno));
    snprintf(aux, sizeof aux, "%s-wal", path);
    unlink(aux);
    snprintf(aux, sizeof aux, "%s-shm", path);
    unlink(aux);
    return ST_OK;
}

// --- check, and rows for sharing -------------------------------------------------------------

const char *pdb_anomaly_name(PdbAnomaly a) {
    static const char *const names[PDB_N_ANOMALY] = {"suspect", "crashed",      "pending",
                                                     "wrong",   "build-failed", "invalid"};
    return (unsigned)a < PDB_N_ANOMALY ? names[a] : "unknown";
}

// Every measurement in key order: RECORD_COLUMNS, then config, signature, target, fingerprint.
static sqlite3_stmt *all_rows(ProfileDb *db, const char *what, Err *e) {
    return prepare(db,
                   db->version >= 3
                       ? "SELECT " RECORD_COLUMNS ", config, signature, target, fingerprint FROM "
                         "measurement ORDER BY target, fingerprint, signature, config"
                       : "SELECT " RECORD_COLUMNS_V2 ", config, signature, target, fingerprint "
                         "FROM measurement ORDER BY target, fingerprint, signature, config",
                   what, e);
}

void pdb_check_free(PdbCheck *c) {
    if (!c)
        return;
    for (int i = 0; i < c->n_rows; i++)
        free(c->list[i].config);
    free(c->list);
    memset(c, 0, sizeof *c);
}

bool pdb_check_damaged(const PdbCheck *c) {
    return c->count[PDB_ANOM_INVALID] > 0 || c->count[PDB_ANOM_CRASHED] > 0 ||
           strcmp(c->integrity, "ok") != 0;
}

static int check_rows(ProfileDb *db, int max_rows, PdbCheck *out, Err *e) {
    const char *what = "checking the measurements";
    sqlite3_stmt *s = all_rows(db, what, e);
    if (!s)
        return e->code;
    int rc, cap = 0;
    while ((rc = step(db, s)) == SQLITE_ROW) {
        out->rows++;
        PdbRecord r;
        char why[160];
        PdbAnomaly kind;
        if (!read_record(s, &r, why, sizeof why)) {
            memset(&r, 0, sizeof r);
            snprintf(r.note, sizeof r.note, "%s", why);
            kind = PDB_ANOM_INVALID;
        } else if (r.status == PDB_OK && r.suspect) {
            kind = PDB_ANOM_SUSPECT;
        } else if (r.status == PDB_CRASHED) {
            kind = PDB_ANOM_CRASHED;
        } else if (r.status == PDB_PENDING) {
            kind = PDB_ANOM_PENDING;
        } else if (r.status == PDB_WRONG) {
            kind = PDB_ANOM_WRONG;
        } else if (r.status == PDB_BUILD_FAILED) {
            kind = PDB_ANOM_BUILD;
        } else {
            continue;
        }
        out->count[kind]++;
        if (out->n_rows >= max_rows)
            continue;
        if (out->n_rows == cap) {
            cap = cap ? 2 * cap : 16;
            out->list = xrealloc(out->list, (size_t)cap * sizeof *out->list);
        }
        PdbCheckRow *row = &out->list[out->n_rows++];
        memset(row, 0, sizeof *row);
        row->kind = kind;
        row->rec = r;
        row->config = xstrdup(col_text(s, RECORD_CONFIG_COLUMN));
        snprintf(row->signature, sizeof row->signature, "%.16s",
                 col_text(s, RECORD_CONFIG_COLUMN + 1));
        snprintf(row->target, sizeof row->target, "%.15s", col_text(s, RECORD_CONFIG_COLUMN + 2));
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return fail_db(db, rc, what, e);
    s = prepare(db, "PRAGMA quick_check(1)", "checking integrity", e);
    if (!s)
        return e->code;
    rc = step(db, s);
    if (rc == SQLITE_ROW)
        snprintf(out->integrity, sizeof out->integrity, "%s", col_text(s, 0));
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? ST_OK : fail_db(db, rc, "checking integrity", e);
}

int pdb_check(ProfileDb *db, int max_rows, PdbCheck *out, Err *e) {
    memset(out, 0, sizeof *out);
    bool own = !db->in_txn;
    if (own && exec_sql(db, "BEGIN", "checking the measurements", e) != ST_OK)
        return e->code;
    int rc = check_rows(db, max_rows, out, e);
    if (own)
        sqlite3_exec(db->db, rc == ST_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    if (rc != ST_OK)
        pdb_check_free(out);
    return rc;
}

void pdb_row_free(PdbRow *r) {
    if (!r)
        return;
    free(r->target);
    free(r->fingerprint);
    free(r->config);
    memset(r, 0, sizeof *r);
}

static int each_row(ProfileDb *db, int (*fn)(void *, const PdbRow *),
                    int (*fn_value)(void *, const char *, const char *, double, int64_t), void *ctx,
                    Err *e) {
    const char *what = "reading the measurements";
    sqlite3_stmt *s = all_rows(db, what, e);
    if (!s)
        return e->code;
    int rc, st = ST_OK;
    while (st == ST_OK && fn && (rc = step(db, s)) == SQLITE_ROW) {
        PdbRow r = {0};
        if (!read_valid(db, s, &r.rec) || r.rec.status == PDB_PENDING)
            continue;
        const char *hex = col_text(s, RECORD_CONFIG_COLUMN + 1);
        char *end;
        r.signature = strtoull(hex, &end, 16);
        if (strlen(hex) != 16 || *end)
            continue; // no compile can look it up
        r.config = (char *)col_text(s, RECORD_CONFIG_COLUMN);
        r.target = (char *)col_text(s, RECORD_CONFIG_COLUMN + 2);
        r.fingerprint = (char *)col_text(s, RECORD_CONFIG_COLUMN + 3);
        st = fn(ctx, &r);
    }
    sqlite3_finalize(s);
    if (st != ST_OK)
        return st;
    if (fn && rc != SQLITE_DONE)
        return fail_db(db, rc, what, e);
    if (!fn_value)
        return ST_OK;
    s = prepare(db,
                "SELECT fingerprint, key, value, created FROM device_value ORDER BY fingerprint, "
                "key",
                what, e);
    if (!s)
        return e->code;
    while (st == ST_OK && (rc = step(db, s)) == SQLITE_ROW)
        st = fn_value(ctx, col_text(s, 0), col_text(s, 1), sqlite3_column_double(s, 2),
                      sqlite3_column_int64(s, 3));
    sqlite3_finalize(s);
    if (st == ST_OK && rc != SQLITE_DONE)
        st = fail_db(db, rc, what, e);
    return st;
}

int pdb_each_row(ProfileDb *db, int (*fn)(void *ctx, const PdbRow *r),
                 int (*fn_value)(void *ctx, const char *fingerprint, const char *key, double v,
                                 int64_t created),
                 void *ctx, Err *e) {
    bool own = !db->in_txn;
    if (own && exec_sql(db, "BEGIN", "reading the measurements", e) != ST_OK)
        return e->code;
    int rc = each_row(db, fn, fn_value, ctx, e);
    if (own)
        sqlite3_exec(db->db, rc == ST_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

// How much a row is worth as truth: a crashed attempt, then a suspect timing, then a final row.
static int merge_rank(const PdbRecord *r) {
    if (r->status == PDB_PENDING)
        return 3; // measured now by a live process: its result will replace it
    if (r->status == PDB_CRASHED)
        return 0;
    return r->status == PDB_OK && r->suspect ? 1 : 2;
}

static int merge_row(ProfileDb *db, const PdbRow *r, PdbMergeAction *done, Err *e) {
    PdbKey k = {r->signature, r->target, r->fingerprint, r->config};
    PdbRecord ours;
    bool found;
    if (pdb_lookup(db, &k, &ours, &found, e))
        return e->code;
    if (found && merge_rank(&ours) >= merge_rank(&r->rec))
        return ST_OK;
    *done = found ? PDB_MERGE_REPLACED : PDB_MERGE_ADDED;
    return store_row(db, &k, &r->rec, false, r->rec.created, e);
}

int pdb_merge_row(ProfileDb *db, const PdbRow *r, PdbMergeAction *done, Err *e) {
    *done = PDB_MERGE_KEPT;
    ORCH_ASSERT((unsigned)r->rec.status < PDB_N_STATUS && r->rec.status != PDB_PENDING);
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    // The look-up and the store in one transaction: another process cannot slip a row between.
    bool own = !db->in_txn;
    if (own && pdb_begin(db, true, e) != ST_OK)
        return e->code;
    int rc = merge_row(db, r, done, e);
    if (own) {
        if (rc == ST_OK)
            rc = pdb_commit(db, e);
        else
            pdb_rollback(db);
    }
    if (rc != ST_OK)
        *done = PDB_MERGE_KEPT;
    return rc;
}

int pdb_merge_value(ProfileDb *db, const char *fingerprint, const char *key, double v,
                    int64_t created, PdbMergeAction *done, Err *e) {
    *done = PDB_MERGE_KEPT;
    if (db->readonly)
        return err_set(e, ST_USAGE, "profile database %s was opened read-only", db->path);
    sqlite3_stmt *s = prepare(db,
                              "INSERT OR IGNORE INTO device_value (fingerprint, key, value, "
                              "created) VALUES (?1, ?2, ?3, ?4)",
                              "adding a device constant", e);
    if (!s)
        return e->code;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 3, v);
    sqlite3_bind_int64(s, 4, created > 0 ? created : (int64_t)time(NULL));
    int rc = step(db, s);
    int st = rc == SQLITE_DONE ? ST_OK : fail_db(db, rc, "adding a device constant", e);
    if (st == ST_OK && sqlite3_changes(db->db) > 0)
        *done = PDB_MERGE_ADDED;
    sqlite3_finalize(s);
    return st;
}
