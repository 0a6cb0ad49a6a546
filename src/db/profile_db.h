// The profile database: every kernel measurement (candidate signature, target, device
// fingerprint, config → status, times) and per-device constants, kept in one SQLite file
// (default ~/.cache/orch/profile.db) so a rerun resumes and a second compile is look-ups only.
// Needs: a path that can be created (or an existing file for read-only use).
// Guarantees: every write is one transaction, committed (WAL) before the call returns, so killing
// the process loses nothing already stored; a file that is not an orch profile database, is
// corrupt or has a newer schema is refused with a message naming the file, never a crash.
// A ProfileDb belongs to one process: after fork() the child opens its own (the parent's handle
// must not be used or closed in the child).
#ifndef ORCH_PROFILE_DB_H
#define ORCH_PROFILE_DB_H

#include "../base/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// The schema this orch reads and writes; a file with a newer one is refused (ST_UNSUPPORTED).
// Version 2 added the reference table, version 3 each timing's load and suspect flag, version 4
// the built modules; an older file is upgraded, its rows kept, when opened read-write (a read-only
// open reads it as it is: no references before 2, load unknown and nothing suspect before 3, no
// modules before 4).
#define PDB_SCHEMA_VERSION 4

typedef struct ProfileDb ProfileDb;

// $XDG_CACHE_HOME/orch/profile.db, else $HOME/.cache/orch/profile.db (else ./orch-profile.db
// when neither variable is set). Writes into buf (n bytes, truncated if short) and returns buf.
const char *pdb_default_path(char *buf, size_t n);
// Opens (creating the file, its schema and, for the default path, the directories with mode 0700,
// unless readonly) the database at path (NULL: the default). A read-only open of a missing file
// fails (ST_RUNTIME) with a message saying nothing has been measured there yet.
int pdb_open(const char *path, bool readonly, ProfileDb **out, Err *e);
void pdb_close(ProfileDb *db); // accepts NULL
const char *pdb_path(const ProfileDb *db);

typedef enum PdbStatus {
    PDB_OK = 0,
    PDB_WRONG = 1,        // the kernel's output disagreed with the interpreter
    PDB_BUILD_FAILED = 2, // the kernel did not compile
    PDB_CRASHED = 3,      // it was pending when its process died (or was stored as such)
    PDB_PENDING = 4,      // being measured by a process that is still alive
} PdbStatus;
#define PDB_N_STATUS 5
const char *pdb_status_name(PdbStatus s); // "ok", "wrong", "build-failed", "crashed", "pending"

typedef struct PdbKey {
    uint64_t signature;      // candidate signature (stored as 16 lower-case hex digits)
    const char *target;      // "cpu", "cuda"
    const char *fingerprint; // device fingerprint line (HwInfo.fingerprint)
    const char *config;      // KernelConfig.desc
} PdbKey;

typedef struct PdbRecord {
    PdbStatus status;
    double median_s, min_s, spread; // spread: (p90 - min) / min (kernel_lab.h); NaN when not
                                    // measured (pending rows, or NaN stored)
    int reps;
    double load;     // runnable threads on the machine while it was timed; NaN when unknown
    bool suspect;    // an ok timing that stayed unstable (kernel_lab.h): kept, never reused
    char note[256];  // why it failed, etc. (truncated to fit)
    int64_t created; // unix seconds (set by pdb_store / pdb_mark_pending; ignored on input)
    // Read only: of a pending or crashed row, how many processes started measuring it (a stored
    // PDB_CRASHED row counts as PDB_MAX_ATTEMPTS); 0 for other rows.
    int attempts;
} PdbRecord;

// A config whose measuring process died (kill -9, a crash in the kernel) is measured once more
// before it is refused for good: the kill may have had nothing to do with it.
#define PDB_MAX_ATTEMPTS 2
// Whether a looked-up record should be measured again: crashed, and tried fewer than
// PDB_MAX_ATTEMPTS times.
bool pdb_retry(const PdbRecord *rec);

// found is false (and rec untouched) when there is no row. A pending row reads as PDB_PENDING
// while the process that marked it runs, and as PDB_CRASHED (with a note naming the pid and host)
// once it is gone; the row itself is left as it is. The database is a cache: a row with values no
// measurement gives (an unknown status; an ok row whose times or repeats are missing, not
// numbers, negative or infinite, or whose minimum exceeds its median) reads as absent, so its
// config is measured again and the new row replaces it; such rows are counted (pdb_invalid_rows).
int pdb_lookup(ProfileDb *db, const PdbKey *k, PdbRecord *rec, bool *found, Err *e);
// How many rows the look-ups of this handle ignored as invalid, and (when example is not NULL)
// what was wrong with the first one ("" when none).
int64_t pdb_invalid_rows(const ProfileDb *db, const char **example);

// Every record of (signature, target, fingerprint), any config, ordered by config, pending rows
// resolved as in pdb_lookup. The arrays (and configs[i]) are malloc'd; pdb_records_free frees them.
typedef struct PdbRecords {
    int n;
    char **configs;
    PdbRecord *recs;
} PdbRecords;
int pdb_lookup_all(ProfileDb *db, uint64_t signature, const char *target, const char *fingerprint,
                   PdbRecords *out, Err *e);
void pdb_records_free(PdbRecords *r); // leaves an empty PdbRecords; accepts NULL

// Before running a kernel: stores a pending row with this process's pid, host and start time, so
// that if the process dies a later look-up sees PDB_CRASHED. Replaces any row of the key, and
// counts the attempt: one more than the crashed row it replaces had, else 1.
int pdb_mark_pending(ProfileDb *db, const PdbKey *k, Err *e);
// Inserts or replaces the row of the key (rec->status may be any status; created is set now).
int pdb_store(ProfileDb *db, const PdbKey *k, const PdbRecord *rec, Err *e);

// Optional batching: between pdb_begin and pdb_commit the calls above share one transaction
// (write: taken with the write lock at once, for many stores; else a read snapshot for many
// look-ups). Nothing is durable before pdb_commit; pdb_rollback discards. Not nested.
int pdb_begin(ProfileDb *db, bool write, Err *e);
int pdb_commit(ProfileDb *db, Err *e);
void pdb_rollback(ProfileDb *db);

// Device constants measured once (e.g. a GPU's memory bandwidth): a value per (fingerprint, key).
int pdb_get_value(ProfileDb *db, const char *fingerprint, const char *key, double *v, bool *found,
                  Err *e);
int pdb_set_value(ProfileDb *db, const char *fingerprint, const char *key, double v, Err *e);

// End-to-end check references (the graph outputs' interpreter values for one model, shapes,
// flags and random inputs): an opaque blob per key, which the caller's key names completely.
// The stored blob carries a checksum: a row whose blob is shorter than it or disagrees with it
// reads as absent (*found false, *damaged true), never as data. *bytes is malloc'd.
int pdb_get_reference(ProfileDb *db, const char *key, void **bytes, size_t *size, bool *found,
                      bool *damaged, Err *e);
// Inserts or replaces the reference of key (one transaction, like pdb_store).
int pdb_set_reference(ProfileDb *db, const char *key, const void *bytes, size_t size, Err *e);

// Built modules (the compiled kernels an artefact carries), so that a compile choosing the same
// kernels as an earlier one on this machine reuses its build: a blob per key, which the caller
// derives from everything the module depends on (the source, the compiler and its flags, the
// device); target and fingerprint file the row for `orch db clear` and stats. Checksummed like
// the references: a damaged row reads as absent (*damaged). A hit marks the row used now.
// Modules are this machine's: db export, import and merge leave them out (code is not shared).
int pdb_get_module(ProfileDb *db, const char *key, void **bytes, size_t *size, bool *found,
                   bool *damaged, Err *e);
// Inserts or replaces key's module, then evicts the least recently used others until all
// modules fit keep_bytes (negative: no limit); one transaction.
int pdb_set_module(ProfileDb *db, const char *key, const char *target, const char *fingerprint,
                   const void *bytes, size_t size, int64_t keep_bytes, Err *e);

// What `orch db stats` prints.
typedef struct PdbGroupStats {
    char *target, *fingerprint;
    int64_t rows;
    int64_t by_status[PDB_N_STATUS];
    int64_t suspect;    // ok rows marked suspect (counted in by_status[PDB_OK] too)
    int64_t signatures; // distinct candidate signatures
} PdbGroupStats;
typedef struct PdbStats {
    char path[4096];
    int64_t file_bytes; // the database file plus its write-ahead log
    int schema_version;
    int64_t rows;                    // measurements
    int64_t by_status[PDB_N_STATUS]; // pending rows of dead processes count as crashed
    int64_t suspect;                 // ok rows marked suspect (in by_status[PDB_OK] too)
    int64_t signatures;              // distinct candidate signatures (kernels)
    int64_t values;                  // device constants
    int64_t references;              // end-to-end check references (pdb_set_reference)
    int64_t reference_bytes;         // their blobs' bytes in all
    int64_t modules;                 // built modules kept for reuse (pdb_set_module)
    int64_t module_bytes;            // their blobs' bytes in all
    int64_t oldest, newest;          // unix seconds of the measurements (0 when there are none)
    int n_groups;                    // per (target, fingerprint), ordered by both
    PdbGroupStats *groups;
    char integrity[256]; // "ok" or SQLite's first quick_check complaint
} PdbStats;
int pdb_stats(ProfileDb *db, PdbStats *st, Err *e);
void pdb_stats_free(PdbStats *st); // accepts NULL
// Human-readable lines, or one JSON object (fields as in PdbStats; dates as unix seconds and ISO).
void pdb_stats_print(const PdbStats *st, FILE *f, bool json);

// What `orch db check` reports: every measurement read as a compile reads it, by kind.
typedef enum PdbAnomaly {
    PDB_ANOM_SUSPECT = 0, // an ok timing that stayed unstable: the next compile measures it again
    PDB_ANOM_CRASHED,     // its process died measuring it (stored, or pending of a dead process)
    PDB_ANOM_PENDING,     // being measured now by a live process
    PDB_ANOM_WRONG,       // the kernel disagreed with the interpreter (a generator bug)
    PDB_ANOM_BUILD,       // the kernel did not compile (a generator bug)
    PDB_ANOM_INVALID,     // values no measurement writes (read as absent, measured again)
} PdbAnomaly;
#define PDB_N_ANOMALY 6
const char *pdb_anomaly_name(PdbAnomaly a); // "suspect", "crashed", ... "invalid"
typedef struct PdbCheckRow {
    PdbAnomaly kind;
    char signature[17], target[16];
    char *config;
    PdbRecord rec; // as read (an invalid row: note says what is wrong)
} PdbCheckRow;
typedef struct PdbCheck {
    int64_t rows;                 // measurements read
    int64_t count[PDB_N_ANOMALY]; // rows of each kind
    int n_rows;                   // the first max_rows of them, in key order
    PdbCheckRow *list;
    char integrity[256]; // "ok" or SQLite's first quick_check complaint
} PdbCheck;
// Reads every measurement (one read transaction) and counts and lists the anomalies.
int pdb_check(ProfileDb *db, int max_rows, PdbCheck *out, Err *e);
void pdb_check_free(PdbCheck *c); // accepts NULL
// Damage, as opposed to what a busy machine or a generator bug leaves: invalid rows, crashed
// rows, or an integrity complaint.
bool pdb_check_damaged(const PdbCheck *c);

// One row of the measurement table with its key (strings owned by the row), for sharing.
typedef struct PdbRow {
    uint64_t signature;
    char *target, *fingerprint, *config;
    PdbRecord rec; // created: the date it was measured
} PdbRow;
void pdb_row_free(PdbRow *r); // frees the strings; accepts NULL
// Calls fn on every finished measurement (pending rows of live processes are a measurement in
// flight and are left out; those of dead processes come as crashed; invalid rows are left out
// and counted by pdb_invalid_rows) and every device constant (fn_value), in key order, in one
// read transaction. A non-zero return of a callback stops and is returned.
int pdb_each_row(ProfileDb *db, int (*fn)(void *ctx, const PdbRow *r),
                 int (*fn_value)(void *ctx, const char *fingerprint, const char *key, double v,
                                 int64_t created),
                 void *ctx, Err *e);
// What pdb_merge_row did with a row.
typedef enum PdbMergeAction {
    PDB_MERGE_KEPT = 0,
    PDB_MERGE_ADDED,
    PDB_MERGE_REPLACED
} PdbMergeAction;
// Adds r where this database has no valid row of its key, and replaces ours where ours ranks
// lower: crashed < suspect < a final row (ok, wrong, build-failed); a row being measured by a
// live process is never replaced, and of two equal ranks ours is kept. Keeps r's date.
int pdb_merge_row(ProfileDb *db, const PdbRow *r, PdbMergeAction *done, Err *e);
// The same for a device constant: added where this database has none of (fingerprint, key).
int pdb_merge_value(ProfileDb *db, const char *fingerprint, const char *key, double v,
                    int64_t created, PdbMergeAction *done, Err *e);

// Deletes the measurements and built modules whose target equals target and whose fingerprint
// contains fingerprint_sub (NULL: any), the device constants whose fingerprint contains fingerprint_sub
// when no target is given (they belong to a device, not a target), and the end-to-end check
// references when neither is given (they belong to no device). *deleted: rows removed in all.
int pdb_clear(ProfileDb *db, const char *target, const char *fingerprint_sub, int64_t *deleted,
              Err *e);
// How many rows pdb_clear would delete with the same filters.
int pdb_count_matching(ProfileDb *db, const char *target, const char *fingerprint_sub, int64_t *n,
                       Err *e);

// For `orch db clear` of a file that pdb_open refused: *damaged says whether path starts with
// SQLite's header and SQLite reports it damaged (corrupt, truncated); with remove, such a file is
// deleted with its -wal/-shm. A healthy database (of any schema) is neither damaged nor touched;
// a file that is not SQLite at all is an error (ST_INVALID), never removed.
int pdb_damaged(const char *path, bool remove, bool *damaged, Err *e);

#endif
