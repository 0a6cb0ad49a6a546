// Profile database sharing (profile_share.h): the JSON-lines export, its import (a strict reader
// of flat JSON objects: strings, numbers, true, false, null) and the merge of another file.
// Needs: open databases. Guarantees: an import checks every line before writing any; a line that
// is not the format is refused with its number and what is wrong with it.
#include "profile_share.h"

#include "../base/file.h"
#include "../base/strbuf.h"
#include "orch.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// Rows merged per write transaction: other compiles on the database wait at most that long.
#define MERGE_BATCH 256

// --- writing ---------------------------------------------------------------------------------

static void put_string(FILE *f, const char *s) {
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

// %.17g round-trips a double; NaN and infinities (never a valid time) are null.
static void put_number(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

typedef struct ExportCtx {
    FILE *f;
    PdbShareStats *st;
} ExportCtx;

static int export_row(void *ctx, const PdbRow *r) {
    ExportCtx *x = ctx;
    FILE *f = x->f;
    fprintf(f, "{\"kind\": \"measurement\", \"signature\": \"%016" PRIx64 "\", \"target\": ",
            r->signature);
    put_string(f, r->target);
    fputs(", \"fingerprint\": ", f);
    put_string(f, r->fingerprint);
    fputs(", \"config\": ", f);
    put_string(f, r->config);
    fprintf(f, ", \"status\": \"%s\", \"median_s\": ", pdb_status_name(r->rec.status));
    put_number(f, r->rec.median_s);
    fputs(", \"min_s\": ", f);
    put_number(f, r->rec.min_s);
    fputs(", \"spread\": ", f);
    put_number(f, r->rec.spread);
    fprintf(f, ", \"reps\": %d, \"load\": ", r->rec.reps);
    put_number(f, r->rec.load);
    fprintf(f, ", \"suspect\": %s, \"note\": ", r->rec.suspect ? "true" : "false");
    put_string(f, r->rec.note);
    fprintf(f, ", \"created\": %" PRId64 "}\n", r->rec.created);
    x->st->rows++;
    return ST_OK;
}

static int export_value(void *ctx, const char *fp, const char *key, double v, int64_t created) {
    ExportCtx *x = ctx;
    fputs("{\"kind\": \"device_value\", \"fingerprint\": ", x->f);
    put_string(x->f, fp);
    fputs(", \"key\": ", x->f);
    put_string(x->f, key);
    fputs(", \"value\": ", x->f);
    put_number(x->f, v);
    fprintf(x->f, ", \"created\": %" PRId64 "}\n", created);
    x->st->values++;
    return ST_OK;
}

int pdb_export(ProfileDb *db, FILE *f, PdbShareStats *st, Err *e) {
    memset(st, 0, sizeof *st);
    fprintf(f,
            "{\"format\": \"orch-profile\", \"version\": %d, \"orch\": \"%s\", \"schema\": %d}\n",
            PDB_EXPORT_VERSION, ORCH_VERSION, PDB_SCHEMA_VERSION);
    ExportCtx x = {f, st};
    int rc = pdb_each_row(db, export_row, export_value, &x, e);
    if (rc == ST_OK && (fflush(f) != 0 || ferror(f)))
        rc = err_set(e, ST_RUNTIME, "writing the export failed (disk full?)");
    return rc;
}

// --- reading ---------------------------------------------------------------------------------

typedef enum JType { J_STRING, J_NUMBER, J_BOOL, J_NULL } JType;
typedef struct JField {
    char *key;
    JType type;
    char *s;  // J_STRING
    double n; // J_NUMBER, J_BOOL (0/1)
} JField;
#define MAX_FIELDS 32
typedef struct JObject {
    int n;
    JField f[MAX_FIELDS];
} JObject;

static void jobject_free(JObject *o) {
    for (int i = 0; i < o->n; i++) {
        free(o->f[i].key);
        free(o->f[i].s);
    }
    o->n = 0;
}

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static void put_utf8(StrBuf *b, unsigned cp) {
    char u[4];
    int n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    sb_putn(b, u, (size_t)n);
}

// A JSON string at p (after its opening quote): the text (malloc'd) and where it ends, or NULL.
static char *parse_string(const char **pp, const char **why) {
    const char *p = *pp;
    StrBuf b;
    sb_init(&b);
    sb_puts(&b, "");
    for (;;) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            break;
        if (c == 0 || c < 0x20) {
            *why = c ? "a control character inside a string" : "an unterminated string";
            sb_free(&b);
            return NULL;
        }
        if (c != '\\') {
            sb_putn(&b, p++, 1);
            continue;
        }
        p++;
        char esc = *p++;
        const char *simple = strchr("\"\\/bfnrt", esc);
        if (esc && simple) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            sb_putn(&b, &out[simple - "\"\\/bfnrt"], 1);
        } else if (esc == 'u') {
            int cp = hex4(p);
            p += cp >= 0 ? 4 : 0;
            if (cp >= 0xd800 && cp < 0xdc00 && p[0] == '\\' && p[1] == 'u') {
                int lo = hex4(p + 2);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                } else {
                    cp = -1;
                }
            } else if (cp >= 0xd800 && cp < 0xe000) {
                cp = -1;
            }
            if (cp <= 0) { // a NUL would cut the text short: refused like a bad escape
                *why = "a bad \\u escape in a string";
                sb_free(&b);
                return NULL;
            }
            put_utf8(&b, (unsigned)cp);
        } else {
            *why = "a bad escape in a string";
            sb_free(&b);
            return NULL;
        }
    }
    *pp = p + 1;
    return sb_take(&b);
}

// One line holding one flat JSON object; false with why set for anything else.
static bool parse_object(const char *line, JObject *o, const char **why) {
    memset(o, 0, sizeof *o);
    const char *p = skip_ws(line);
    if (*p++ != '{') {
        *why = "not a JSON object";
        return false;
    }
    p = skip_ws(p);
    if (*p == '}') {
        p++;
    } else {
        for (;;) {
            p = skip_ws(p);
            if (*p++ != '"') {
                *why = "a field name is not a string";
                return false;
            }
            char *key = parse_string(&p, why);
            if (!key)
                return false;
            for (int i = 0; i < o->n; i++)
                if (strcmp(o->f[i].key, key) == 0) {
                    free(key);
                    *why = "a field given twice";
                    return false;
                }
            if (o->n == MAX_FIELDS) {
                free(key);
                *why = "too many fields";
                return false;
            }
            JField *f = &o->f[o->n++];
            f->key = key;
            p = skip_ws(p);
            if (*p++ != ':') {
                *why = "no ':' after a field name";
                return false;
            }
            p = skip_ws(p);
            if (*p == '"') {
                p++;
                f->type = J_STRING;
                if (!(f->s = parse_string(&p, why)))
                    return false;
            } else if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
                f->type = J_BOOL;
                f->n = *p == 't';
                p += *p == 't' ? 4 : 5;
            } else if (strncmp(p, "null", 4) == 0) {
                f->type = J_NULL;
                p += 4;
            } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
                char *end;
                f->type = J_NUMBER;
                f->n = strtod(p, &end);
                if (end == p || !isfinite(f->n)) {
                    *why = "a number out of range";
                    return false;
                }
                p = end;
            } else {
                *why = *p == '{' || *p == '[' ? "a nested value (the format has none)"
                                              : "a value that is not JSON";
                return false;
            }
            p = skip_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p++ != '}') {
                *why = "no ',' or '}' after a value";
                return false;
            }
            break;
        }
    }
    p = skip_ws(p);
    if (*p && *p != '\n') {
        *why = "text after the object";
        return false;
    }
    return true;
}

static const JField *field(const JObject *o, const char *key) {
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->f[i].key, key) == 0)
            return &o->f[i];
    return NULL;
}

static const char *get_string(const JObject *o, const char *key, bool nonempty, char *why,
                              size_t n) {
    const JField *f = field(o, key);
    if (!f || f->type != J_STRING || (nonempty && !f->s[0])) {
        snprintf(why, n, "'%s' is %s", key,
                 !f                    ? "missing"
                 : f->type != J_STRING ? "not a string"
                                       : "empty");
        return NULL;
    }
    return f->s;
}

// A number field (null: NaN when nullable); false with why set.
static bool get_number(const JObject *o, const char *key, bool nullable, double *v, char *why,
                       size_t n) {
    const JField *f = field(o, key);
    if (f && f->type == J_NUMBER) {
        *v = f->n;
        return true;
    }
    if (f && f->type == J_NULL && nullable) {
        *v = NAN;
        return true;
    }
    snprintf(why, n, "'%s' is %s", key, !f ? "missing" : "not a number");
    return false;
}

// What one line is, once read.
typedef struct Line {
    bool value; // a device constant (else a measurement)
    PdbRow row;
    char *fp, *key; // device constant
    double v;
    int64_t created;
} Line;

static bool whole(double v, double lo, double hi) {
    return v >= lo && v <= hi && v == floor(v);
}

static bool parse_measurement(const JObject *o, Line *l, char *why, size_t n) {
    const char *sig = get_string(o, "signature", true, why, n);
    const char *target = sig ? get_string(o, "target", true, why, n) : NULL;
    const char *fp = target ? get_string(o, "fingerprint", true, why, n) : NULL;
    const char *cfg = fp ? get_string(o, "config", true, why, n) : NULL;
    const char *status = cfg ? get_string(o, "status", true, why, n) : NULL;
    const char *note = status ? get_string(o, "note", false, why, n) : NULL;
    if (!note)
        return false;
    char *end;
    uint64_t s = strtoull(sig, &end, 16);
    if (strlen(sig) != 16 || *end || sig[0] == '-' || sig[0] == '+') {
        snprintf(why, n, "'signature' is not 16 hexadecimal digits");
        return false;
    }
    int st = -1;
    for (int i = 0; i < PDB_N_STATUS; i++)
        if (strcmp(status, pdb_status_name((PdbStatus)i)) == 0)
            st = i;
    if (st < 0 || st == PDB_PENDING) {
        snprintf(why, n, "'status' %.40s is none of ok, wrong, build-failed, crashed", status);
        return false;
    }
    PdbRecord *r = &l->row.rec;
    double reps, created;
    const JField *sus = field(o, "suspect");
    if (!get_number(o, "median_s", true, &r->median_s, why, n) ||
        !get_number(o, "min_s", true, &r->min_s, why, n) ||
        !get_number(o, "spread", true, &r->spread, why, n) ||
        !get_number(o, "reps", false, &reps, why, n) ||
        !get_number(o, "load", true, &r->load, why, n) ||
        !get_number(o, "created", false, &created, why, n))
        return false;
    if (!sus || sus->type != J_BOOL) {
        snprintf(why, n, "'suspect' is %s", sus ? "not true or false" : "missing");
        return false;
    }
    if (!whole(reps, 0, INT32_MAX) || !whole(created, 0, 1e15)) {
        snprintf(why, n, "'reps' or 'created' is not a non-negative whole number");
        return false;
    }
    // The rule the database reads by (profile_db.h): an ok row holds real timings.
    if (st == PDB_OK && !(r->median_s >= 0 && r->min_s >= 0 && r->min_s <= r->median_s &&
                          (isnan(r->spread) || r->spread >= 0))) {
        snprintf(why, n, "an ok row needs 0 <= min_s <= median_s and a spread of at least 0");
        return false;
    }
    if (!(isnan(r->load) || r->load >= 0)) {
        snprintf(why, n, "'load' is negative");
        return false;
    }
    if (strlen(note) >= sizeof r->note || strlen(cfg) > 1000) {
        snprintf(why, n, "'%s' is too long", strlen(cfg) > 1000 ? "config" : "note");
        return false;
    }
    r->status = (PdbStatus)st;
    r->reps = (int)reps;
    r->suspect = sus->n != 0;
    r->created = (int64_t)created;
    snprintf(r->note, sizeof r->note, "%s", note);
    l->row.signature = s;
    l->row.target = xstrdup(target);
    l->row.fingerprint = xstrdup(fp);
    l->row.config = xstrdup(cfg);
    return true;
}

static bool parse_value(const JObject *o, Line *l, char *why, size_t n) {
    const char *fp = get_string(o, "fingerprint", true, why, n);
    const char *key = fp ? get_string(o, "key", true, why, n) : NULL;
    double created;
    if (!key || !get_number(o, "value", false, &l->v, why, n) ||
        !get_number(o, "created", false, &created, why, n))
        return false;
    if (!whole(created, 0, 1e15)) {
        snprintf(why, n, "'created' is not a non-negative whole number");
        return false;
    }
    l->value = true;
    l->fp = xstrdup(fp);
    l->key = xstrdup(key);
    l->created = (int64_t)created;
    return true;
}

static void lines_free(Line *ls, int n) {
    for (int i = 0; i < n; i++) {
        pdb_row_free(&ls[i].row);
        free(ls[i].fp);
        free(ls[i].key);
    }
    free(ls);
}

static int merge_lines(ProfileDb *db, const Line *ls, int n, PdbShareStats *st, Err *e) {
    int rc = ST_OK;
    for (int i = 0; i < n && rc == ST_OK; i++) {
        if (i % MERGE_BATCH == 0 && (rc = pdb_begin(db, true, e)) != ST_OK)
            break;
        PdbMergeAction a;
        if (ls[i].value) {
            st->values++;
            rc = pdb_merge_value(db, ls[i].fp, ls[i].key, ls[i].v, ls[i].created, &a, e);
            st->values_added += a == PDB_MERGE_ADDED;
        } else {
            st->rows++;
            rc = pdb_merge_row(db, &ls[i].row, &a, e);
            st->added += a == PDB_MERGE_ADDED;
            st->replaced += a == PDB_MERGE_REPLACED;
            st->kept += a == PDB_MERGE_KEPT;
        }
        if (rc == ST_OK && (i % MERGE_BATCH == MERGE_BATCH - 1 || i == n - 1))
            rc = pdb_commit(db, e);
    }
    if (rc != ST_OK)
        pdb_rollback(db);
    return rc;
}

int pdb_import(ProfileDb *db, const char *path, PdbShareStats *st, Err *e) {
    memset(st, 0, sizeof *st);
    uint8_t *data;
    size_t size;
    if (file_read_all(path, (int64_t)1 << 32, &data, &size, e) != ST_OK)
        return e->code;
    char *text = xmalloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    free(data);
    if (strlen(text) != size) {
        free(text);
        return err_set(e, ST_INVALID, "%s: a NUL byte: not an orch profile export", path);
    }
    Line *ls = NULL;
    int n = 0, cap = 0, rc = ST_OK;
    int lineno = 0;
    for (char *p = text, *next; p && *p && rc == ST_OK; p = next) {
        lineno++;
        next = strchr(p, '\n');
        if (next)
            *next++ = 0;
        JObject o;
        const char *jwhy = NULL;
        char why[200] = "";
        bool ok = parse_object(p, &o, &jwhy);
        if (!ok)
            snprintf(why, sizeof why, "%s", jwhy);
        if (ok && lineno == 1) {
            // The header: which format, and which version of it.
            const JField *fmt = field(&o, "format"), *ver = field(&o, "version");
            if (!fmt || fmt->type != J_STRING || strcmp(fmt->s, "orch-profile") != 0 || !ver ||
                ver->type != J_NUMBER || !whole(ver->n, 1, 1e9))
                rc = err_set(e, ST_INVALID,
                             "%s line 1: not an orch profile export (its first line must be "
                             "{\"format\": \"orch-profile\", \"version\": N, ...})",
                             path);
            else if (ver->n > PDB_EXPORT_VERSION)
                rc = err_set(e, ST_UNSUPPORTED,
                             "%s line 1: export format version %.0f is newer than this orch "
                             "reads (%d): import it with the newer orch that wrote it",
                             path, ver->n, PDB_EXPORT_VERSION);
            jobject_free(&o);
            continue;
        }
        if (ok) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                ls = xrealloc(ls, (size_t)cap * sizeof *ls);
            }
            Line *l = &ls[n];
            memset(l, 0, sizeof *l);
            const JField *kind = field(&o, "kind");
            if (!kind || kind->type != J_STRING)
                snprintf(why, sizeof why, "'kind' is missing or not a string");
            else if (strcmp(kind->s, "measurement") == 0)
                ok = parse_measurement(&o, l, why, sizeof why);
            else if (strcmp(kind->s, "device_value") == 0)
                ok = parse_value(&o, l, why, sizeof why);
            else
                snprintf(why, sizeof why, "'kind' %.40s is neither measurement nor device_value",
                         kind->s);
            ok = ok && !why[0];
            if (ok) {
                n++;
            } else {
                pdb_row_free(&l->row);
                free(l->fp);
                free(l->key);
            }
        }
        jobject_free(&o);
        if (!ok && rc == ST_OK)
            rc = err_set(e, ST_INVALID, "%s line %d: %s; nothing imported", path, lineno, why);
    }
    if (rc == ST_OK && lineno == 0)
        rc = err_set(e, ST_INVALID, "%s is empty: not an orch profile export", path);
    free(text);
    if (rc == ST_OK)
        rc = merge_lines(db, ls, n, st, e);
    lines_free(ls, n);
    return rc;
}

// --- merging a database ----------------------------------------------------------------------

typedef struct MergeCtx {
    ProfileDb *db;
    PdbShareStats *st;
    int64_t in_batch;
    Err *e;
} MergeCtx;

// Keeps a write transaction open on db over MERGE_BATCH rows.
static int batch_step(MergeCtx *x) {
    if (x->in_batch == 0 && pdb_begin(x->db, true, x->e) != ST_OK)
        return x->e->code;
    if (++x->in_batch == MERGE_BATCH) {
        x->in_batch = 0;
        return pdb_commit(x->db, x->e);
    }
    return ST_OK;
}

static int merge_one(void *ctx, const PdbRow *r) {
    MergeCtx *x = ctx;
    PdbMergeAction a;
    int rc = batch_step(x);
    if (rc == ST_OK)
        rc = pdb_merge_row(x->db, r, &a, x->e);
    if (rc != ST_OK)
        return rc;
    x->st->rows++;
    x->st->added += a == PDB_MERGE_ADDED;
    x->st->replaced += a == PDB_MERGE_REPLACED;
    x->st->kept += a == PDB_MERGE_KEPT;
    return ST_OK;
}

static int merge_value(void *ctx, const char *fp, const char *key, double v, int64_t created) {
    MergeCtx *x = ctx;
    PdbMergeAction a;
    int rc = batch_step(x);
    if (rc == ST_OK)
        rc = pdb_merge_value(x->db, fp, key, v, created, &a, x->e);
    if (rc != ST_OK)
        return rc;
    x->st->values++;
    x->st->values_added += a == PDB_MERGE_ADDED;
    return ST_OK;
}

int pdb_merge(ProfileDb *db, ProfileDb *other, PdbShareStats *st, Err *e) {
    memset(st, 0, sizeof *st);
    MergeCtx x = {db, st, 0, e};
    int rc = pdb_each_row(other, merge_one, merge_value, &x, e);
    if (rc == ST_OK && x.in_batch)
        rc = pdb_commit(db, e);
    if (rc != ST_OK)
        pdb_rollback(db);
    return rc;
}
