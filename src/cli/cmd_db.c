// `orch db stats|check|clear|merge|export|import`: what the profile database holds, its
// anomalies (suspect timings, crashed and invalid rows), deleting all of it or the rows of one
// target / device, and sharing it with other machines (db/profile_share.h). Clear asks on a
// terminal and needs --yes otherwise. Errors: one line on stderr and the ST_* exit status; usage
// errors exit 1 with the usage.
#include "cmd_db.h"

#include "../base/common.h"
#include "../db/profile_db.h"
#include "../db/profile_share.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void db_usage(FILE *f) {
    fprintf(f,
            "usage:\n"
            "  orch db stats [--db FILE] [--json]\n"
            "      the profile database's file, size, measurements by status and by target and\n"
            "      device, distinct kernels, date range, end-to-end check references\n"
            "  orch db check [--db FILE] [--json] [--limit N]\n"
            "      counts and lists (the first N, default 20) suspect timings (unstable: measured\n"
            "      on a busy machine, measured again by the next compile), crashed, pending,\n"
            "      wrong, build-failed and invalid rows; exits 2 when the file is damaged\n"
            "      (invalid or crashed rows, an integrity complaint)\n"
            "  orch db merge OTHER.db [--db FILE]\n"
            "      adds OTHER's rows where FILE has no row of their key, or a crashed or\n"
            "      suspect one\n"
            "  orch db export OUT.jsonl [--db FILE]    (- : standard output)\n"
            "  orch db import IN.jsonl [--db FILE]\n"
            "      every finished measurement as JSON lines (docs/profile-db.md), and merged back\n"
            "      as merge does; a newer format or a malformed line is refused, naming the line\n"
            "  orch db clear [--db FILE] [--target T] [--device-fingerprint-contains S] [--yes]\n"
            "      deletes every measurement, device value and check reference (or the\n"
            "      measurements of target T and/or of devices whose fingerprint contains S;\n"
            "      references belong to no device and go only without filters) and says how\n"
            "      many rows; asks first unless --yes\n"
            "  FILE defaults to $XDG_CACHE_HOME/orch/profile.db or ~/.cache/orch/profile.db\n");
}

static int db_usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "orch db: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    db_usage(stderr);
    return ST_USAGE;
}

static int db_fail(const Err *e) {
    fprintf(stderr, "orch: error: %s\n", e->msg);
    return e->code ? e->code : ST_RUNTIME;
}

typedef struct DbArgs {
    const char *db, *target, *fp;
    const char *file; // merge, export, import: the other file
    int limit;        // check: rows listed
    bool json, yes;
} DbArgs;

// Accepts "--flag VALUE" and "--flag=VALUE".
static bool flag_value(char **argv, int argc, int *i, const char *name, const char **out) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return false;
    if (argv[*i][n] == '=') {
        *out = argv[*i] + n + 1;
        return true;
    }
    if (argv[*i][n] != 0)
        return false;
    if (*i + 1 >= argc) {
        *out = NULL;
        return true;
    }
    *out = argv[++*i];
    return true;
}

// sub: the subcommand; clear takes the filters, stats and check --json, the sharing commands
// one file name.
static int parse(int argc, char **argv, const char *sub, DbArgs *a) {
    bool clear = strcmp(sub, "clear") == 0, check = strcmp(sub, "check") == 0;
    bool json_ok = check || strcmp(sub, "stats") == 0, takes_file = !clear && !json_ok;
    a->limit = 20;
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        if (check && flag_value(argv, argc, &i, "--limit", &v)) {
            char *end;
            long n = v ? strtol(v, &end, 10) : -1;
            if (!v || !*v || *end || n < 0 || n > 1000000)
                return db_usage_error("%s needs a count from 0 to 1000000", "--limit");
            a->limit = (int)n;
        } else if (takes_file && !a->file && (argv[i][0] != '-' || !strcmp(argv[i], "-"))) {
            a->file = argv[i];
        } else if (flag_value(argv, argc, &i, "--db", &v)) {
            if (!v || !*v)
                return db_usage_error("%s needs a file name", "--db");
            a->db = v;
        } else if (clear && flag_value(argv, argc, &i, "--target", &v)) {
            if (!v || !*v)
                return db_usage_error("%s needs a value (cpu, cuda)", "--target");
            a->target = v;
        } else if (clear && flag_value(argv, argc, &i, "--device-fingerprint-contains", &v)) {
            if (!v || !*v)
                return db_usage_error("%s needs a non-empty string",
                                      "--device-fingerprint-contains");
            a->fp = v;
        } else if (clear && strcmp(argv[i], "--yes") == 0) {
            a->yes = true;
        } else if (json_ok && strcmp(argv[i], "--json") == 0) {
            a->json = true;
        } else {
            return db_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (takes_file && !a->file)
        return db_usage_error("'%s' needs a file name", sub);
    return ST_OK;
}

static int cmd_stats(const DbArgs *a, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (a->json) {
            printf("{\"path\": \"");
            for (const char *p = path; *p; p++)
                printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
            printf("\", \"exists\": false, \"rows\": 0}\n");
        } else {
            printf("profile database: %s does not exist yet (nothing measured)\n", path);
        }
        return ST_OK;
    }
    Err e = {0};
    ProfileDb *db;
    if (pdb_open(path, true, &db, &e) != ST_OK)
        return db_fail(&e);
    PdbStats st;
    int rc = pdb_stats(db, &st, &e);
    pdb_close(db);
    if (rc != ST_OK)
        return db_fail(&e);
    pdb_stats_print(&st, stdout, a->json);
    pdb_stats_free(&st);
    return ST_OK;
}

// Asks on a terminal; elsewhere the caller must have passed --yes.
static int confirm(const DbArgs *a, const char *question, bool *go) {
    *go = a->yes;
    if (a->yes)
        return ST_OK;
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr, "orch db: %s: pass --yes to confirm (stdin is not a terminal)\n", question);
        return ST_USAGE;
    }
    fprintf(stderr, "%s? [y/N] ", question);
    char line[64];
    *go = fgets(line, sizeof line, stdin) && (line[0] == 'y' || line[0] == 'Y');
    if (!*go)
        printf("nothing deleted\n");
    return ST_OK;
}

static int cmd_clear(const DbArgs *a, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        printf("profile database %s does not exist: nothing to clear\n", path);
        return ST_OK;
    }
    Err e = {0};
    ProfileDb *db;
    char question[4400];
    bool go;
    if (pdb_open(path, false, &db, &e) != ST_OK) {
        // A damaged file can only be cleared as a whole: it is removed and made anew later.
        bool damaged = false;
        Err e2 = {0};
        if (e.code != ST_INVALID || a->target || a->fp ||
            pdb_damaged(path, false, &damaged, &e2) != ST_OK || !damaged)
            return db_fail(&e);
        if (!a->yes)
            fprintf(stderr, "orch: %s\n", e.msg);
        snprintf(question, sizeof question, "remove the damaged file %s", path);
        int rc = confirm(a, question, &go);
        if (rc != ST_OK || !go)
            return rc;
        if (pdb_damaged(path, true, &damaged, &e2) != ST_OK)
            return db_fail(&e2);
        printf("removed the damaged profile database %s\n", path);
        return ST_OK;
    }
    int64_t n = 0;
    int rc = pdb_count_matching(db, a->target, a->fp, &n, &e);
    if (rc == ST_OK && n == 0) {
        printf("no matching rows in %s: nothing deleted\n", path);
    } else if (rc == ST_OK) {
        snprintf(question, sizeof question, "delete %lld rows from %s", (long long)n, path);
        rc = confirm(a, question, &go);
        int64_t deleted = 0;
        if (rc == ST_OK && go && (rc = pdb_clear(db, a->target, a->fp, &deleted, &e)) == ST_OK)
            printf("deleted %lld rows from %s\n", (long long)deleted, path);
    }
    pdb_close(db);
    if (rc != ST_OK && e.code)
        return db_fail(&e);
    return rc;
}

static void json_text(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static int cmd_check(const DbArgs *a, const char *path) {
    Err e = {0};
    ProfileDb *db;
    if (pdb_open(path, true, &db, &e) != ST_OK)
        return db_fail(&e);
    PdbCheck c;
    int rc = pdb_check(db, a->limit, &c, &e);
    pdb_close(db);
    if (rc != ST_OK)
        return db_fail(&e);
    bool damaged = pdb_check_damaged(&c);
    if (a->json) {
        printf("{\"path\": ");
        json_text(stdout, path);
        printf(", \"rows\": %" PRId64 ", \"damaged\": %s, \"integrity\": ", c.rows,
               damaged ? "true" : "false");
        json_text(stdout, c.integrity);
        printf(", \"counts\": {");
        for (int k = 0; k < PDB_N_ANOMALY; k++)
            printf("%s\"%s\": %" PRId64, k ? ", " : "", pdb_anomaly_name((PdbAnomaly)k),
                   c.count[k]);
        printf("}, \"listed\": [");
        for (int i = 0; i < c.n_rows; i++) {
            const PdbCheckRow *r = &c.list[i];
            printf("%s{\"kind\": \"%s\", \"signature\": \"%s\", \"target\": ", i ? ", " : "",
                   pdb_anomaly_name(r->kind), r->signature);
            json_text(stdout, r->target);
            printf(", \"config\": ");
            json_text(stdout, r->config);
            printf(", \"note\": ");
            json_text(stdout, r->rec.note);
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("profile database: %s: %" PRId64 " measurements, integrity %s\n", path, c.rows,
               c.integrity);
        int64_t any = 0;
        for (int k = 0; k < PDB_N_ANOMALY; k++)
            any += c.count[k];
        if (!any)
            printf("  no suspect, crashed, pending, wrong, build-failed or invalid rows\n");
        for (int k = 0; k < PDB_N_ANOMALY; k++)
            if (c.count[k])
                printf("  %-13s %" PRId64 "\n", pdb_anomaly_name((PdbAnomaly)k), c.count[k]);
        for (int i = 0; i < c.n_rows; i++) {
            const PdbCheckRow *r = &c.list[i];
            char t[64] = "";
            if (r->kind == PDB_ANOM_SUSPECT)
                snprintf(t, sizeof t, " median %.4g ms, min %.4g ms, load %.0f",
                         r->rec.median_s * 1e3, r->rec.min_s * 1e3, r->rec.load);
            printf("  %-13s %s %s %s%s%s%s\n", pdb_anomaly_name(r->kind), r->target, r->signature,
                   r->config, t, r->rec.note[0] ? ": " : "", r->rec.note);
        }
        if (c.n_rows < any)
            printf("  (%" PRId64 " more; --limit N lists more)\n", any - c.n_rows);
    }
    pdb_check_free(&c);
    return damaged ? ST_INVALID : ST_OK;
}

static void share_summary(const char *verb, const char *from, const PdbShareStats *st) {
    printf("%s %s: %" PRId64 " measurements: %" PRId64 " added, %" PRId64 " replaced (ours "
           "crashed or suspect), %" PRId64 " kept; %" PRId64 " device values, %" PRId64 " added\n",
           verb, from, st->rows, st->added, st->replaced, st->kept, st->values, st->values_added);
}

static int cmd_share(const char *sub, const DbArgs *a, const char *path) {
    Err e = {0};
    ProfileDb *db = NULL, *other = NULL;
    PdbShareStats st;
    int rc;
    if (strcmp(sub, "export") == 0) {
        if ((rc = pdb_open(path, true, &db, &e)) != ST_OK)
            return db_fail(&e);
        bool to_stdout = strcmp(a->file, "-") == 0;
        FILE *f = to_stdout ? stdout : fopen(a->file, "w");
        if (!f) {
            pdb_close(db);
            fprintf(stderr, "orch: error: cannot write %s: %s\n", a->file, strerror(errno));
            return ST_RUNTIME;
        }
        rc = pdb_export(db, f, &st, &e);
        if (!to_stdout && fclose(f) != 0 && rc == ST_OK)
            rc = err_set(&e, ST_RUNTIME, "writing %s failed: %s", a->file, strerror(errno));
        pdb_close(db);
        if (rc != ST_OK)
            return db_fail(&e);
        fprintf(to_stdout ? stderr : stdout,
                "exported %" PRId64 " measurements and %" PRId64 " device values to %s\n", st.rows,
                st.values, to_stdout ? "standard output" : a->file);
        return ST_OK;
    }
    if (strcmp(sub, "merge") == 0) {
        struct stat s1, s2;
        if (stat(a->file, &s1) == 0 && stat(path, &s2) == 0 && s1.st_dev == s2.st_dev &&
            s1.st_ino == s2.st_ino) {
            fprintf(stderr, "orch: error: %s is the database itself: nothing to merge\n", a->file);
            return ST_USAGE;
        }
        if ((rc = pdb_open(a->file, true, &other, &e)) != ST_OK)
            return db_fail(&e);
    }
    if ((rc = pdb_open(path, false, &db, &e)) == ST_OK)
        rc = other ? pdb_merge(db, other, &st, &e) : pdb_import(db, a->file, &st, &e);
    pdb_close(other);
    pdb_close(db);
    if (rc != ST_OK)
        return db_fail(&e);
    share_summary(other ? "merged" : "imported", a->file, &st);
    return ST_OK;
}

int cli_db_main(int argc, char **argv) {
    if (argc < 2) {
        db_usage(stderr);
        return ST_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        db_usage(stdout);
        return ST_OK;
    }
    static const char *const subs[] = {"stats", "check", "clear", "merge", "export", "import"};
    bool known = false;
    for (size_t i = 0; i < ORCH_COUNT(subs); i++)
        known |= strcmp(sub, subs[i]) == 0;
    if (!known)
        return db_usage_error(
            "unknown subcommand '%s' (stats, check, clear, merge, export, import)", sub);
    DbArgs a = {0};
    int rc = parse(argc, argv, sub, &a);
    if (rc != ST_OK)
        return rc;
    char def[4096];
    const char *path = a.db ? a.db : pdb_default_path(def, sizeof def);
    if (strcmp(sub, "clear") == 0)
        return cmd_clear(&a, path);
    if (strcmp(sub, "stats") == 0)
        return cmd_stats(&a, path);
    if (strcmp(sub, "check") == 0)
        return cmd_check(&a, path);
    return cmd_share(sub, &a, path);
}
