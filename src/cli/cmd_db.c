// `orch db stats [--db FILE] [--json]` and `orch db clear [--db FILE] [--target T]
// [--device-fingerprint-contains S] [--yes]`: what the profile database holds, and deleting all of
// it or the rows of one target / device. Clear asks on a terminal and needs --yes otherwise.
// Errors: one line on stderr and the ST_* exit status; usage errors exit 1 with the usage.
#include "cmd_db.h"

#include "../base/common.h"
#include "../db/profile_db.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void db_usage(FILE *f) {
    fprintf(f,
            "usage:\n"
            "  orch db stats [--db FILE] [--json]\n"
            "      the profile database's file, size, measurements by status and by target and\n"
            "      device, distinct kernels, date range, end-to-end check references\n"
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

static int parse(int argc, char **argv, bool clear, DbArgs *a) {
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        if (flag_value(argv, argc, &i, "--db", &v)) {
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
        } else if (!clear && strcmp(argv[i], "--json") == 0) {
            a->json = true;
        } else {
            return db_usage_error("unknown argument '%s'", argv[i]);
        }
    }
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
    bool clear = strcmp(sub, "clear") == 0;
    if (!clear && strcmp(sub, "stats") != 0)
        return db_usage_error("unknown subcommand '%s' (stats, clear)", sub);
    DbArgs a = {0};
    int rc = parse(argc, argv, clear, &a);
    if (rc != ST_OK)
        return rc;
    char def[4096];
    const char *path = a.db ? a.db : pdb_default_path(def, sizeof def);
    return clear ? cmd_clear(&a, path) : cmd_stats(&a, path);
}
