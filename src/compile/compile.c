// The compile driver (compile.h): every stage in order in compile_model.
#include "compile.h"
#include "fallbacks.h"

#include "../backend/kernel_lab.h"
#include "../base/file.h"
#include "../candidates/attention.h"
#include "../candidates/candidates.h"
#include "../db/profile_db.h"
#include "../fission/fission.h"
#include "../interp/prim_interp.h"
#include "../onnx/load.h"
#include "../ops/fold.h"
#include "../orchestrate/orchestrate.h"
#include "../passes/passes.h"
#include "../plan/artifact.h"
#include "../plan/artifact_model.h"
#include "../plan/plan.h"
#include "../runtime/session.h"
#include "orch.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONFIGS 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int compile_import(const void *bytes, size_t size, const char *name, const char *base_dir,
                   const char *input_shapes, bool attention_rewrite, Graph **g, PrimGraph **pg,
                   Err *e) {
    *g = NULL;
    *pg = NULL;
    InputShape shapes[512];
    int n_shapes = 0;
    char *spec = input_shapes ? xstrdup(input_shapes) : NULL;
    int rc = spec ? parse_input_shapes(spec, shapes, 512, &n_shapes, e) : ST_OK;
    LoadOptions lo = {.shapes = shapes, .n_shapes = n_shapes};
    if (rc == ST_OK)
        rc = onnx_load_memory(bytes, size, name, base_dir, &lo, g, e);
    free(spec); // the loader copies what it keeps
    if (rc == ST_OK)
        rc = graph_infer_and_fold(*g, NULL, e);
    if (rc == ST_OK)
        rc = graph_check_supported(*g, e);
    FissionOptions fo = {.attention_rewrite = attention_rewrite};
    if (rc == ST_OK)
        rc = fission_run(*g, &fo, pg, NULL, e);
    if (rc == ST_OK && (rc = fission_cleanup(*pg, NULL, e)))
        err_prefix(e, "%s: clean-up of the primitive graph: ", name);
    if (rc) {
        prim_graph_free(*pg);
        graph_free(*g);
        *pg = NULL;
        *g = NULL;
    }
    return rc;
}

// ---- random inputs ----

static uint64_t rng_next(uint64_t *s) { // xorshift64*
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

// Inputs like a model sees them: floats in [-1, 1), integers in {0, 1} (safe as indices), bools.
static void **random_inputs(const PrimGraph *pg, uint64_t seed) {
    uint64_t s = seed ? seed : 0x9e3779b97f4a7c15ull;
    void **in = xcalloc((size_t)pg->n_inputs + 1, sizeof(void *));
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        int64_t n = tensor_numel(t);
        in[i] = xmalloc(tensor_nbytes(t) + 1);
        for (int64_t k = 0; k < n; k++) {
            uint64_t r = rng_next(&s);
            if (dtype_is_float(t->dtype))
                elem_set_f64(t->dtype, in[i], k, (double)(r >> 11) / 4503599627370496.0 - 1.0);
            else
                elem_set_i64(t->dtype, in[i], k, (int64_t)((r >> 40) & 1));
        }
    }
    return in;
}

static void free_inputs(const PrimGraph *pg, void **in) {
    for (int i = 0; in && i < pg->n_inputs; i++)
        free(in[i]);
    free(in);
}

// ---- per signature tuning state ----

typedef struct Sig {
    uint64_t sig;
    int rep; // a candidate with this signature; -1 once drop_unrunnable removed all
    bool singleton;
    bool supported; // the target generates it
    int n_cfg;
    KernelConfig cfg[MAX_CONFIGS];
    PdbStatus cfg_status[MAX_CONFIGS];
    double cfg_time[MAX_CONFIGS];
    bool cfg_known[MAX_CONFIGS];   // measured now or found in the database
    uint64_t cfg_src[MAX_CONFIGS]; // hash of the code the config emits (config_source_hash)
    bool cfg_hashed[MAX_CONFIGS];
    int best;           // index of the best OK config, -1 when none
    double interp_time; // singletons the target cannot generate: the interpreter's time
} Sig;

typedef struct Driver {
    const CompileOptions *opt;
    const Target *target;
    TargetMachine m; // the target's view of this machine, with the compile's options
    ProfileDb *db;
    const PrimGraph *pg;
    CandidateSet *cs;
    Sig *sigs;
    int n_sigs;
    int *sig_of;     // candidate → sig index
    void **values;   // every tensor's interpreter value; NULL until need_values computes them
    void **inputs;   // the random inputs they are computed from
    double t_values; // seconds spent computing them (counted as check time)
    CompileReport *rep;
    uint64_t prelude_hash; // of the target's prelude, which every kernel's source starts with
    double t_phase;
    double t_tune0; // when tuning began (--budget counts from there)
    Err db_err; // database trouble is reported once and tuning goes on without it
    bool db_broken;
    void **mods; // the lab's modules, kept for the target's build to reuse (LabOptions.keep)
    int n_mods;
    char *wide_text;  // fp16 storage: the tensors kept float32 for range (storage_wide_format)
    Precision prec;   // linear kernels' arithmetic (CompileOptions.precision)
    double check_tol; // the end-to-end check's relative tolerance (e2e_tolerance)
    // Half storage (pass_store_reduced ran): the model's bytes and import options, to import its
    // float32 graph again when the end-to-end check needs half storage's own effect.
    bool half_storage;
    const uint8_t *model_bytes;
    size_t model_size;
    const char *model_path;
    void **f32_outs; // half storage: the float32 model's outputs on the check's inputs, or NULL
    bool exact_only; // configs of reduced exactness left out (leave_out_reduced)
} Driver;

static int cmp_u64_idx(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

static void index_signatures(Driver *d) {
    CandidateSet *cs = d->cs;
    uint64_t(*pairs)[2] = xmalloc(sizeof *pairs * (size_t)(cs->n + 1));
    for (int i = 0; i < cs->n; i++) {
        pairs[i][0] = cs->c[i].signature;
        pairs[i][1] = (uint64_t)i;
    }
    qsort(pairs, (size_t)cs->n, sizeof *pairs, cmp_u64_idx);
    d->sigs = xcalloc((size_t)cs->n + 1, sizeof(Sig));
    d->sig_of = xmalloc(sizeof(int) * (size_t)(cs->n + 1));
    d->n_sigs = 0;
    for (int i = 0; i < cs->n; i++) {
        if (i == 0 || pairs[i][0] != pairs[i - 1][0]) {
            Sig *s = &d->sigs[d->n_sigs++];
            s->sig = pairs[i][0];
            s->rep = (int)pairs[i][1];
            s->best = -1;
        }
        d->sig_of[pairs[i][1]] = d->n_sigs - 1;
    }
    free(pairs);
}

// The target name profile records are kept under (the target's db_name slot: options that change
// the code emitted for one config keep their records apart).
static const char *db_target(const Driver *d) {
    return d->target->db_name(&d->m);
}

static uint64_t fnv64(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

// What the kernel of config k of s is made of: the target's prelude and the source the config
// emits (under a fixed name), so that a measurement is reused only for the very code it timed: a
// changed generator gives another hash and its configs are measured again. The compiler and the
// driver are in the machine's fingerprint, which keys the record too. Emitted once per config,
// when a record could be reused or one is written.
static uint64_t config_source_hash(Driver *d, Sig *s, int k) {
    if (s->cfg_hashed[k])
        return s->cfg_src[k];
    StrBuf b;
    sb_init(&b);
    Err e = {0};
    if (d->target->emit(&d->m, d->pg, &d->cs->c[s->rep], &s->cfg[k], "orch_kernel", &b, &e)) {
        b.len = 0;
        sb_printf(&b, "emit failed: %s", e.msg); // keyed too: a fixed generator changes it
    }
    s->cfg_src[k] = fnv64(d->prelude_hash, b.s ? b.s : "", b.len);
    s->cfg_hashed[k] = true;
    sb_free(&b);
    return s->cfg_src[k];
}

// The database's config key of config k of s: its desc and its source hash ("DESC src=HEX").
static void db_config(Driver *d, Sig *s, int k, char *buf, size_t n) {
    snprintf(buf, n, "%s src=%016llx", s->cfg[k].desc,
             (unsigned long long)config_source_hash(d, s, k));
}

// buf holds the key's config text.
static PdbKey key_of(Driver *d, Sig *s, int k, char *buf, size_t n) {
    db_config(d, s, k, buf, n);
    PdbKey key = {.signature = s->sig,
                  .target = db_target(d),
                  .fingerprint = d->m.hw.fingerprint,
                  .config = buf};
    return key;
}

static void db_trouble(Driver *d, const Err *e) {
    if (d->db_broken)
        return;
    d->db_broken = true;
    d->db_err = *e;
    if (d->opt->progress)
        fprintf(d->opt->progress, "warning: profile database: %s; going on without it\n", e->msg);
}

// Configs of every supported signature, and what the database already knows of them.
static void collect_configs(Driver *d) {
    int retried = 0;
    for (int i = 0; i < d->n_sigs; i++) {
        Sig *s = &d->sigs[i];
        const Candidate *c = &d->cs->c[s->rep];
        s->singleton = c->n_prims == 1;
        s->supported = d->target->supports(&d->m, d->pg, c);
        if (!s->supported)
            continue;
        int k = d->opt->top_k > 0 ? d->opt->top_k : 8;
        s->n_cfg = d->target->configs(&d->m, d->pg, c, s->cfg, ORCH_MIN(k, MAX_CONFIGS));
        if (s->n_cfg <= 0) {
            s->supported = false;
            continue;
        }
        if (!d->db || d->db_broken)
            continue;
        PdbRecords recs = {0};
        Err e = {0};
        if (pdb_lookup_all(d->db, s->sig, db_target(d), d->m.hw.fingerprint, &recs, &e)) {
            db_trouble(d, &e);
            continue;
        }
        for (int r = 0; r < recs.n; r++)
            for (int j = 0; j < s->n_cfg; j++) {
                // The desc first (no source to emit for configs never measured), then the code.
                size_t dl = strlen(s->cfg[j].desc);
                if (strncmp(recs.configs[r], s->cfg[j].desc, dl) != 0 ||
                    strncmp(recs.configs[r] + dl, " src=", 5) != 0)
                    continue;
                char cfg[160];
                db_config(d, s, j, cfg, sizeof cfg);
                if (strcmp(recs.configs[r], cfg) != 0)
                    continue;
                if (recs.recs[r].status == PDB_PENDING)
                    break; // another compile is measuring it now: measure it here as well
                if (pdb_retry(&recs.recs[r])) {
                    retried++; // its process died measuring it: once more (PDB_MAX_ATTEMPTS)
                    break;
                }
                if (recs.recs[r].status == PDB_OK && recs.recs[r].suspect) {
                    d->rep->resuspect++; // timed on a busy machine: never reused as truth
                    break;
                }
                s->cfg_known[j] = true;
                s->cfg_status[j] = recs.recs[r].status;
                s->cfg_time[j] = recs.recs[r].median_s;
                d->rep->looked_up++;
            }
        pdb_records_free(&recs);
    }
    const char *why;
    int64_t invalid = d->db ? pdb_invalid_rows(d->db, &why) : 0;
    if (invalid && d->opt->progress)
        fprintf(d->opt->progress,
                "warning: profile database %s: %lld row%s with values no measurement gives "
                "ignored (the first: %s); their configs are measured again\n",
                pdb_path(d->db), (long long)invalid, invalid == 1 ? "" : "s", why);
    if (d->rep->resuspect && d->opt->progress)
        fprintf(d->opt->progress,
                "tune: %d config%s whose stored timing was unstable (a busy machine) measured "
                "again\n",
                d->rep->resuspect, d->rep->resuspect == 1 ? "" : "s");
    if (retried && d->opt->progress)
        fprintf(d->opt->progress,
                "tune: %d config%s whose measuring process died (killed, or crashed) measured "
                "once more\n",
                retried, retried == 1 ? "" : "s");
}

static void update_best(Sig *s) {
    s->best = -1;
    for (int j = 0; j < s->n_cfg; j++)
        if (s->cfg_known[j] && s->cfg_status[j] == PDB_OK &&
            (s->best < 0 || s->cfg_time[j] < s->cfg_time[s->best]))
            s->best = j;
}

// The devices the target's lab measures on (several GPUs of one kind: --gpus), into the report
// and the log with any device left out.
static void lab_devices_report(Driver *d) {
    CompileReport *r = d->rep;
    char note[768] = "";
    r->lab_devices = 0;
    if (d->target->lab_devices)
        r->lab_devices = d->target->lab_devices(&d->m, r->lab_device,
                                                (int)ORCH_COUNT(r->lab_device), note, sizeof note);
    if (!d->opt->progress || r->lab_devices == 0)
        return;
    fprintf(d->opt->progress, "tune: measuring on %d GPU%s (", r->lab_devices,
            r->lab_devices == 1 ? "" : "s");
    for (int i = 0; i < r->lab_devices; i++)
        fprintf(d->opt->progress, "%s%d", i ? ", " : "", r->lab_device[i]);
    fprintf(d->opt->progress, ")%s%s\n", note[0] ? "; " : "", note);
}

// ---- the lab's callbacks: database writes and progress ----

typedef struct LabCtx {
    Driver *d;
    int *job_sig, *job_cfg;
    double t0;
    double best_gain; // progress: the largest speed-up of a later config over config 0
    int done0, total; // progress over a batch measured in chunks (--budget): jobs before this
                      // chunk, and the batch's jobs
} LabCtx;

static int before_run(void *ctx, const LabJob *j) {
    LabCtx *lc = ctx;
    Driver *d = lc->d;
    if (!d->db || d->db_broken)
        return 0;
    Sig *s = &d->sigs[d->sig_of[j->cand]];
    for (int k = 0; k < s->n_cfg; k++)
        if (strcmp(s->cfg[k].desc, j->cfg.desc) == 0) {
            char cfg[160];
            PdbKey key = key_of(d, s, k, cfg, sizeof cfg);
            Err e = {0};
            if (pdb_mark_pending(d->db, &key, &e))
                db_trouble(d, &e);
            break;
        }
    return 0;
}

static void on_note(void *ctx, const char *line) {
    LabCtx *lc = ctx;
    if (lc->d->opt->progress)
        fprintf(lc->d->opt->progress, "  %s\n", line);
}

static void fmt_time(double s, char *buf, size_t n) {
    if (s >= 1)
        snprintf(buf, n, "%.2f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else
        snprintf(buf, n, "%.1f us", s * 1e6);
}

static void on_result(void *ctx, const LabJob *j, int done, int total) {
    LabCtx *lc = ctx;
    Driver *d = lc->d;
    Sig *s = &d->sigs[d->sig_of[j->cand]];
    int k = 0;
    while (k < s->n_cfg && strcmp(s->cfg[k].desc, j->cfg.desc) != 0)
        k++;
    if (k == s->n_cfg)
        return;
    PdbStatus st = j->status == LAB_OK      ? PDB_OK
                   : j->status == LAB_WRONG ? PDB_WRONG
                                            : PDB_BUILD_FAILED;
    if (j->status == LAB_SKIPPED)
        st = PDB_CRASHED;
    s->cfg_known[k] = true;
    s->cfg_status[k] = st;
    // A timing that stayed unstable is used at its least disturbed sample in this compile.
    bool unstable = st == PDB_OK && j->unstable;
    s->cfg_time[k] = unstable ? j->min_s : j->median_s;
    d->rep->measured++;
    d->rep->unstable += unstable;
    d->rep->timed_once += unstable && j->attempts == 1;
    for (int i = 0; i < d->rep->lab_devices; i++)
        if (j->device >= 0 && d->rep->lab_device[i] == j->device)
            d->rep->lab_device_measured[i]++;
    if (st == PDB_WRONG)
        d->rep->wrong++;
    else if (st != PDB_OK)
        d->rep->failed++;
    if (st == PDB_WRONG || st == PDB_BUILD_FAILED) {
        // A generator bug: reported, never selected.
        if (d->opt->progress) {
            const Candidate *c = &d->cs->c[j->cand];
            fprintf(d->opt->progress, "  kernel %016llx (%s, from %s) rejected: %s\n",
                    (unsigned long long)s->sig, j->cfg.desc,
                    d->pg->prims[c->prims[c->n_prims - 1]]->origin, j->note);
        }
    }
    if (d->db && !d->db_broken && j->status != LAB_SKIPPED) {
        char cfg[160];
        PdbKey key = key_of(d, s, k, cfg, sizeof cfg);
        PdbRecord r = {.status = st,
                       .median_s = j->median_s,
                       .min_s = j->min_s,
                       .spread = j->spread,
                       .reps = j->reps,
                       .load = j->load,
                       .suspect = unstable};
        snprintf(r.note, sizeof r.note, "%s", j->note);
        Err e = {0};
        if (pdb_store(d->db, &key, &r, &e))
            db_trouble(d, &e);
    }
    if (st == PDB_OK && k > 0 && s->cfg_known[0] && s->cfg_status[0] == PDB_OK && j->median_s > 0) {
        double gain = s->cfg_time[0] / j->median_s;
        if (gain > lc->best_gain)
            lc->best_gain = gain;
    }
    if (lc->total) {
        done += lc->done0;
        total = lc->total;
    }
    if (d->opt->progress && (done == total || done % 16 == 0)) {
        double el = now_s() - lc->t0;
        double eta = done ? el / done * (total - done) : 0;
        char tb[32];
        fmt_time(j->median_s, tb, sizeof tb);
        fprintf(d->opt->progress, "  measured %d/%d kernels, %.1f s, ETA %.0f s", done, total, el,
                eta);
        if (d->rep->lab_devices > 1) { // this compile's configs so far, per GPU
            fprintf(d->opt->progress, " (");
            for (int i = 0; i < d->rep->lab_devices; i++)
                fprintf(d->opt->progress, "%sGPU %d: %d", i ? ", " : "", d->rep->lab_device[i],
                        d->rep->lab_device_measured[i]);
            fprintf(d->opt->progress, ")");
        }
        if (lc->best_gain > 1)
            fprintf(d->opt->progress, "; best config gain so far %.2fx", lc->best_gain);
        fprintf(d->opt->progress, "\n");
        fflush(d->opt->progress);
    }
}

// The interpreter's value of every tensor on the random inputs, computed on first need: the lab
// checks and times configs with them, time_interp runs primitives on them and the end-to-end
// check compares with them unless the database holds its reference. A warm compile with a
// cached reference never computes them.
static int need_values(Driver *d, const char *why, Err *e) {
    if (d->values)
        return ST_OK;
    double t = now_s();
    int rc = prim_interp_values(d->pg, (const void *const *)d->inputs, &d->values, e);
    double dt = now_s() - t;
    d->t_values += dt;
    d->rep->t_check += dt;
    if (rc == ST_OK && d->opt->progress) {
        fprintf(d->opt->progress, "check: every tensor's value by the interpreter in %.2f s (%s)\n",
                dt, why);
        fflush(d->opt->progress);
    }
    // float16 storage's range headroom on these inputs (values in [-1, 1)): a model whose half
    // tensors come near 65504 here may overflow on larger real inputs where the float32 model
    // does not (EfficientViT-B0's linear attention on an image did).
    if (rc == ST_OK && d->half_storage && d->prec == PREC_FP16 && d->opt->progress) {
        int at = -1;
        double peak = storage_f16_peak(d->pg, d->values, &at);
        if (at >= 0) {
            fprintf(d->opt->progress,
                    "storage: largest |value| of a float16 tensor on the check's inputs: %.4g "
                    "('%s'), %.2g%% of float16's range\n",
                    peak, d->pg->tensors[at]->name, 100.0 * peak / 65504.0);
            if (!(peak < 1024))
                fprintf(d->opt->progress,
                        "storage: warning: inputs a few times larger than the check's may "
                        "overflow float16 (65504) where the float32 model does not: prefer "
                        "--precision bf16 or float32 storage for such inputs\n");
        }
    }
    return rc;
}

// Measures config k of every listed signature that is not known yet.
// The single LINEAR primitive of candidate c (its index in the graph), or -1.
static int sole_linear(const PrimGraph *pg, const Candidate *c) {
    int lin = -1;
    for (int q = 0; q < c->n_prims; q++)
        if (pg->prims[c->prims[q]]->kind == PRIM_LINEAR) {
            if (lin >= 0)
                return -1;
            lin = c->prims[q];
        }
    return lin;
}

// Where a kernel with one LINEAR primitive and more is slower at its best measured config than
// a kernel of fewer primitives with the same product is at its best, that config, when this
// kernel has it unmeasured, is worth measuring: writes such kernels to list, the configs' indices
// to k_at, and returns their count.
static int transfer_configs(Driver *d, int *list, int *k_at) {
    int n = 0;
    int *lin = xmalloc(sizeof(int) * (size_t)(d->n_sigs + 1));
    // (A signature whose every candidate drop_unrunnable removed has no representative: rep -1.)
    for (int i = 0; i < d->n_sigs; i++)
        lin[i] = d->sigs[i].supported && d->sigs[i].rep >= 0
                     ? sole_linear(d->pg, &d->cs->c[d->sigs[i].rep])
                     : -1;
    for (int i = 0; i < d->n_sigs; i++) {
        const Sig *a = &d->sigs[i];
        if (lin[i] < 0 || a->best < 0)
            continue;
        const Sig *from = NULL;
        for (int j = 0; j < d->n_sigs; j++) {
            const Sig *b = &d->sigs[j];
            if (j != i && lin[j] == lin[i] && b->best >= 0 &&
                d->cs->c[b->rep].n_prims < d->cs->c[a->rep].n_prims &&
                b->cfg_time[b->best] < a->cfg_time[a->best] &&
                (!from || b->cfg_time[b->best] < from->cfg_time[from->best]))
                from = b;
        }
        for (int k = 0; from && k < a->n_cfg; k++)
            if (!a->cfg_known[k] && strcmp(a->cfg[k].desc, from->cfg[from->best].desc) == 0) {
                list[n] = i;
                k_at[n++] = k;
                break;
            }
    }
    free(lin);
    return n;
}

// Orders the signatures of list for --budget's phase 1: singletons first, then the others by how
// many candidates share the signature (a repeated layer's kernel pays off in every repeat),
// stably. Returns the number of singletons. Without a budget the order is left as it is and
// every signature counts as a singleton (all measured unconditionally).
static int budget_order(const Driver *d, int *list, int n) {
    if (d->opt->budget_s <= 0)
        return n;
    int *uses = xcalloc((size_t)d->n_sigs + 1, sizeof(int));
    for (int i = 0; i < d->cs->n; i++)
        uses[d->sig_of[i]]++;
    int *tmp = xmalloc(sizeof(int) * (size_t)(n + 1));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (d->sigs[list[i]].singleton)
            tmp[k++] = list[i];
    int nsingle = k;
    for (int i = 0; i < n; i++)
        if (!d->sigs[list[i]].singleton)
            tmp[k++] = list[i];
    // Insertion sort of the fused part by uses, descending (stable).
    for (int i = nsingle + 1; i < n; i++) {
        int v = tmp[i], j = i;
        while (j > nsingle && uses[tmp[j - 1]] < uses[v]) {
            tmp[j] = tmp[j - 1];
            j--;
        }
        tmp[j] = v;
    }
    memcpy(list, tmp, sizeof(int) * (size_t)n);
    free(tmp);
    free(uses);
    return nsingle;
}

// Whether --budget's time is spent.
static bool over_budget(const Driver *d) {
    return d->opt->budget_s > 0 && now_s() - d->t_tune0 >= d->opt->budget_s;
}

// Jobs a --budget compile measures between looks at the clock: enough to keep every compiler
// process busy, few enough that a chunk of slow kernels overruns the budget by little.
#define BUDGET_CHUNK 32

// optional: under --budget, the measurement stops once the budget is spent (in chunks of
// BUDGET_CHUNK jobs), and what it skips is counted; otherwise every job is measured.
static int measure_configs_at(Driver *d, const int *sig_list, int n_list, int k_from, int k_to,
                              const int *k_at, bool optional, const char *what, Err *e) {
    LabJob *jobs = xcalloc((size_t)(n_list * (k_at ? 1 : k_to - k_from) + 1), sizeof(LabJob));
    int nj = 0;
    for (int i = 0; i < n_list; i++) {
        Sig *s = &d->sigs[sig_list[i]];
        int lo = k_at ? k_at[i] : k_from, hi = k_at ? k_at[i] + 1 : ORCH_MIN(k_to, s->n_cfg);
        for (int k = lo; k < hi; k++) {
            if (s->cfg_known[k])
                continue;
            jobs[nj].cand = s->rep;
            jobs[nj].cfg = s->cfg[k];
            jobs[nj].tol = lab_candidate_tolerance(d->pg, &d->cs->c[s->rep], d->prec);
            nj++;
        }
    }
    int rc = ST_OK;
    bool chunked = optional && d->opt->budget_s > 0;
    if (nj && chunked && over_budget(d)) {
        d->rep->budget_skipped += nj;
        nj = 0;
    }
    if (nj) {
        if (d->opt->progress) {
            fprintf(d->opt->progress, "tune: %s: %d kernel configs to build and measure\n", what,
                    nj);
            fflush(d->opt->progress);
        }
        rc = need_values(d, "the kernel lab checks and times configs with them", e);
    }
    if (nj && rc == ST_OK) {
        LabCtx lc = {.d = d, .t0 = now_s(), .total = chunked ? nj : 0};
        LabOptions lo = {.jobs = d->opt->jobs,
                         .trust_timings = d->opt->trust_timings,
                         .before_run = before_run,
                         .on_result = on_result,
                         .on_note = on_note,
                         .build_s = &d->rep->t_lab_build,
                         .measure_s = &d->rep->t_lab_measure,
                         .check_s = &d->rep->t_lab_check,
                         .time_s = &d->rep->t_lab_time,
                         .split = &d->rep->lab_split,
                         .ctx = &lc,
                         .keep = &d->mods,
                         .n_keep = &d->n_mods};
        int step = chunked ? BUDGET_CHUNK : nj;
        for (int at = 0; at < nj && rc == ST_OK; at += step) {
            if (chunked && at > 0 && over_budget(d)) {
                d->rep->budget_skipped += nj - at;
                break;
            }
            lc.done0 = at;
            rc = lab_run(&d->m, d->pg, d->cs, d->values, jobs + at, ORCH_MIN(step, nj - at), &lo,
                         e);
        }
    }
    free(jobs);
    for (int i = 0; i < n_list; i++)
        update_best(&d->sigs[sig_list[i]]);
    return rc;
}

static int measure_configs(Driver *d, const int *sig_list, int n_list, int k_from, int k_to,
                           bool optional, const char *what, Err *e) {
    return measure_configs_at(d, sig_list, n_list, k_from, k_to, NULL, optional, what, e);
}

// The interpreter's time for a primitive the target cannot generate (measured on every compile;
// it is quick and never stored).
static double time_interp(const PrimGraph *pg, const Candidate *c, void **values) {
    const Prim *p = pg->prims[c->prims[0]];
    const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
    void **y = xcalloc((size_t)p->n_out + 1, sizeof(void *));
    for (int j = 0; j < p->n_in; j++)
        x[j] = p->in[j] >= 0 ? values[p->in[j]] : NULL;
    bool ok = true;
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] >= 0) {
            size_t b = tensor_nbytes(pg->tensors[p->out[j]]);
            y[j] = malloc(b ? b : 1);
            ok = ok && y[j];
        }
    double best = INFINITY;
    for (int r = 0; r < 3 && ok; r++) {
        Err e = {0};
        double t0 = now_s();
        int rc = p->kind == PRIM_OPAQUE ? prim_eval_opaque(pg, p, x, y, &e)
                                        : prim_eval(pg, p, x, y[0], &e);
        double t = now_s() - t0;
        if (rc)
            break;
        best = t < best ? t : best;
    }
    for (int j = 0; j < p->n_out; j++)
        free(y[j]);
    free(x);
    free(y);
    return isfinite(best) ? best : 1.0;
}

// Candidate costs from the signatures' best times. Candidates that cannot run (not generated,
// or every config failed) are dropped, except singletons, which the interpreter runs.
static int apply_costs(Driver *d, Err *e) {
    CandidateSet *cs = d->cs;
    for (int i = 0; i < cs->n; i++) {
        Sig *s = &d->sigs[d->sig_of[i]];
        if (s->best >= 0)
            cs->c[i].cost = s->cfg_time[s->best];
        else if (s->singleton) {
            if (s->interp_time <= 0) {
                int rc = need_values(d, "to time primitives the target does not generate", e);
                if (rc)
                    return rc;
                s->interp_time = time_interp(d->pg, &cs->c[s->rep], d->values);
            }
            cs->c[i].cost = s->interp_time;
        } else
            cs->c[i].cost = INFINITY;
    }
    return ST_OK;
}

// Removes candidates with an infinite cost (keeping the signature index in step).
static void drop_unrunnable(Driver *d) {
    CandidateSet *cs = d->cs;
    int w = 0;
    for (int i = 0; i < cs->n; i++) {
        if (!isfinite(cs->c[i].cost)) {
            d->rep->rejected++;
            continue;
        }
        cs->c[w] = cs->c[i];
        d->sig_of[w] = d->sig_of[i];
        w++;
    }
    cs->n = w;
    for (int i = 0; i < d->n_sigs; i++)
        d->sigs[i].rep = -1;
    for (int i = 0; i < cs->n; i++)
        if (d->sigs[d->sig_of[i]].rep < 0)
            d->sigs[d->sig_of[i]].rep = i;
}

static int solve(Driver *d, Selection *sel, Err *e) {
    OrchOptions oo = {.time_limit = d->opt->time_limit};
    selection_free(sel);
    memset(sel, 0, sizeof *sel);
    return orchestrate(d->cs, &oo, sel, e);
}

// Tuning and solving from the configs the signatures hold (collect_configs, and whatever an
// earlier call measured): first configs, the transfers, fused attention, a solve, then rounds
// measuring every config of the chosen kernels and solving again. list and k_at have room for
// n_sigs entries. Called again after configs were left out (leave_out_reduced): what was measured
// stays known, so a warm compile that leaves them out from the start reaches the same selection.
static int tune_and_solve(Driver *d, Selection *sel, int *list, int *k_at, Err *e) {
    double t = now_s(), tv = d->t_values;
    int rc = ST_OK, nl = 0;
    for (int i = 0; i < d->n_sigs; i++)
        if (d->sigs[i].supported && d->sigs[i].rep >= 0)
            list[nl++] = i;
    // Phase 1: each kernel's best-scored config, so every candidate has a measured cost. Under
    // --budget the single-primitive kernels come first and always (they make a plan exist);
    // the fused ones follow, those repeated most in the model first, while the budget lasts.
    d->t_tune0 = now_s();
    d->rep->budget_s = d->opt->budget_s;
    int nsingle = budget_order(d, list, nl);
    if ((rc = measure_configs(d, list, nsingle, 0, 1, false, "first config of every kernel", e)) ||
        (rc = measure_configs(
             d, list + nsingle, nl - nsingle, 0, 1, true,
             nsingle ? "first config of every fused kernel" : "first config of every kernel", e)))
        return rc;
    for (int i = nsingle; i < nl; i++)
        d->rep->budget_dropped += !d->sigs[list[i]].cfg_known[0];
    // A kernel whose first config failed gets its second.
    int nfail = 0;
    for (int i = 0; i < nl; i++)
        if (d->sigs[list[i]].best < 0 && d->sigs[list[i]].cfg_known[0])
            list[nfail++] = list[i];
    if ((rc = measure_configs(d, list, nfail, 1, 2, true, "second config where the first failed",
                              e)))
        return rc;
    // A kernel that fuses elementwise work into a product is measured at the config its bare
    // product measured best, where its own first config came out slower (its model may rank
    // another variant first: a 32-channel conv + ReLU measured 4.2 ms at its first config, the
    // conv alone 2.0 ms at its, so the BLP kept the ReLU a kernel of its own).
    int ntransfer = transfer_configs(d, list, k_at);
    rc = measure_configs_at(d, list, ntransfer, 0, 0, k_at, true,
                            "the bare product's best config for its fused kernels", e);
    if (rc)
        return rc;
    // A fused attention replaces several kernels at once, and its device model ranks configs
    // less surely than a single GEMM's (an H100 measured the first-ranked config of a 512-token
    // block's attention at 121 us, its best at 38 us, while the three kernels it replaces took
    // 64 us): a first config alone would let the BLP drop it for good, so every config of it is
    // measured now. There are few (two per distinct layer). (MLP chains are not: their model
    // ranks the measured best first, and their tensor-core kernels take NVRTC seconds each.)
    int nattn = 0;
    for (int i = 0; i < d->n_sigs; i++) {
        AttnSpec as;
        if (d->sigs[i].supported && d->sigs[i].rep >= 0 &&
            attn_analyse(d->pg, &d->cs->c[d->sigs[i].rep], &as))
            list[nattn++] = i;
    }
    if ((rc = measure_configs(d, list, nattn, 1, MAX_CONFIGS, true,
                              "every config of the fused attention kernels", e)))
        return rc;
    if ((rc = apply_costs(d, e)))
        return rc;
    drop_unrunnable(d);
    d->rep->t_tune += now_s() - t - (d->t_values - tv); // the interpreter's time is check time

    t = now_s();
    if ((rc = solve(d, sel, e)))
        return rc;
    d->rep->t_solve += now_s() - t;
    // Phase 2: the other configs of the chosen kernels, then solve again on the better times;
    // repeated while the new selection holds kernels not yet measured in every config (at most
    // 4 rounds), so the final selection is fully measured and a warm compile, which starts from
    // these times, reaches the same selection without measuring anything.
    bool *full = xcalloc((size_t)d->n_sigs + 1, sizeof(bool));
    for (int round = 0; round < 4; round++) {
        t = now_s();
        tv = d->t_values;
        int nsel = 0;
        for (int i = 0; i < sel->n; i++) {
            int si = d->sig_of[sel->kernels[i]];
            if (!full[si] && d->sigs[si].supported) {
                full[si] = true;
                list[nsel++] = si;
            }
        }
        if (nsel == 0)
            break;
        if ((rc = measure_configs(d, list, nsel, 1, MAX_CONFIGS, true,
                                  round ? "all configs of the newly chosen kernels"
                                        : "all configs of the chosen kernels",
                                  e))) {
            free(full);
            return rc;
        }
        // The chosen products' best configs, now known, for the kernels fusing more into them.
        int nt = transfer_configs(d, list, k_at);
        if ((rc = measure_configs_at(d, list, nt, 0, 0, k_at, true,
                                     "the bare product's best config for its fused kernels", e)) ||
            (rc = apply_costs(d, e))) {
            free(full);
            return rc;
        }
        d->rep->t_tune += now_s() - t - (d->t_values - tv);
        t = now_s();
        if ((rc = solve(d, sel, e))) {
            free(full);
            return rc;
        }
        d->rep->t_solve += now_s() - t;
    }
    free(full);
    return ST_OK;
}

// ---- why each linear primitive runs where it does (--explain) ----

// The family of a candidate's best config: a library call or a generated kernel ("cls=cudnn",
// "cls=cublaslt" or another class in the config's description).
static int config_family(const char *desc) {
    if (strncmp(desc, "cls=cudnn", 9) == 0)
        return 1;
    if (strncmp(desc, "cls=cublaslt", 12) == 0 || strstr(desc, "ct=") != NULL)
        return 2;
    return 0;
}

// One candidate of --explain-all's list: its primitives, its inputs' shapes (an NHWC twin shows
// as [n,h,w,c]) and every config of its signature with its measured time or status.
static void explain_candidate(const Driver *d, int i, FILE *pr) {
    const PrimGraph *pg = d->pg;
    const Candidate *c = &d->cs->c[i];
    const Sig *s = &d->sigs[d->sig_of[i]];
    char t[32];
    fmt_time(c->cost, t, sizeof t);
    fprintf(pr, "    candidate %d: %s;", i, t);
    for (int q = 0; q < c->n_prims; q++)
        fprintf(pr, "%s%s", q ? "," : " ", prim_kind_name(pg->prims[c->prims[q]]->kind));
    fprintf(pr, "; in");
    for (int q = 0; q < c->n_inputs; q++) {
        const Tensor *x = pg->tensors[c->inputs[q]];
        fprintf(pr, " [");
        for (int k = 0; k < x->rank; k++)
            fprintf(pr, "%s%lld", k ? "," : "", (long long)x->dims[k]);
        fprintf(pr, "]");
    }
    fputc('\n', pr);
    for (int k = 0; s->supported && k < s->n_cfg; k++) {
        if (s->cfg_known[k] && s->cfg_status[k] == PDB_OK)
            fmt_time(s->cfg_time[k], t, sizeof t);
        else
            snprintf(t, sizeof t, "%s", s->cfg_known[k] ? "not ok" : "not measured");
        fprintf(pr, "      %s%s [%s]\n", k == s->best ? "*" : " ", t, s->cfg[k].desc);
    }
}

// With --explain (CompileOptions.explain 1): one line per LINEAR primitive (matmul, convolution)
// after the final solve, naming its ONNX node, the chosen kernel that computes it (config,
// measured time, primitives it covers), and the fastest measured candidate of each family
// (generated, cuDNN, cuBLASLt) that also computes it, so that a slow choice can be traced to a
// missing or slow alternative; --explain-all (2) adds every candidate computing it. A debugging
// aid for the benchmarks, off by default.
static void report_linear_choices(const Driver *d, const Selection *sel, FILE *pr) {
    if (d->opt->explain <= 0)
        return;
    bool verbose = d->opt->explain >= 2;
    const PrimGraph *pg = d->pg;
    const CandidateSet *cs = d->cs;
    static const char *const fam_name[] = {"generated", "cudnn", "cublaslt"};
    fprintf(pr, "explain: the linear primitives' kernels (chosen; fastest candidate per family)\n");
    for (int p = 0; p < pg->n_prims; p++) {
        const Prim *x = pg->prims[p];
        if (lab_linear_k(pg, x) <= 0)
            continue;
        int chosen = -1;
        for (int i = 0; i < sel->n && chosen < 0; i++) {
            const Candidate *c = &cs->c[sel->kernels[i]];
            for (int q = 0; q < c->n_prims; q++)
                if (c->prims[q] == p)
                    chosen = sel->kernels[i];
        }
        int best[3] = {-1, -1, -1};
        for (int i = 0; i < cs->n; i++) {
            const Candidate *c = &cs->c[i];
            const Sig *s = &d->sigs[d->sig_of[i]];
            if (!s->supported || s->best < 0 || !isfinite(c->cost))
                continue;
            bool has = false;
            for (int q = 0; q < c->n_prims && !has; q++)
                has = c->prims[q] == p;
            if (!has)
                continue;
            int f = config_family(s->cfg[s->best].desc);
            if (best[f] < 0 || c->cost < cs->c[best[f]].cost)
                best[f] = i;
        }
        char t[32];
        fprintf(pr, "  %s %s:", prim_kind_name(x->kind), x->origin ? x->origin : "?");
        if (chosen >= 0) {
            const Sig *s = &d->sigs[d->sig_of[chosen]];
            fmt_time(cs->c[chosen].cost, t, sizeof t);
            fprintf(pr, " chosen %s [%s] (%d prims)", t,
                    s->supported && s->best >= 0 ? s->cfg[s->best].desc : "interpreter",
                    cs->c[chosen].n_prims);
        }
        for (int f = 0; f < 3; f++) {
            if (best[f] < 0)
                continue;
            fmt_time(cs->c[best[f]].cost, t, sizeof t);
            fprintf(pr, "; %s %s (%d prims)", fam_name[f], t, cs->c[best[f]].n_prims);
        }
        fputc('\n', pr);
        if (verbose) // --explain-all: every candidate computing it
            for (int i = 0; i < cs->n; i++) {
                const Candidate *c = &cs->c[i];
                bool has = false;
                for (int q = 0; q < c->n_prims && !has; q++)
                    has = c->prims[q] == p;
                if (has)
                    explain_candidate(d, i, pr);
            }
    }
}

// ---- why the multi-layer kernels were chosen or not ----

// One line per multi-LINEAR candidate (fused attention, MLP chain) after the final
// solve: its best measured time and config, and whether the plan runs it; where it does not,
// what the plan spends instead on the kernels that compute any of its primitives (kernels that
// also compute other primitives are counted whole, so that sum is an upper bound of the
// replaced work). At most `cap` lines, then a count.
static void report_multi_layer(const Driver *d, const Selection *sel, FILE *pr) {
    const PrimGraph *pg = d->pg;
    const CandidateSet *cs = d->cs;
    bool *chosen = xcalloc((size_t)cs->n + 1, sizeof(bool));
    for (int i = 0; i < sel->n; i++)
        chosen[sel->kernels[i]] = true;
    // covered_by[p]: the selected kernels computing primitive p, as a list per primitive.
    int *start = xcalloc((size_t)pg->n_prims + 1, sizeof(int));
    for (int i = 0; i < sel->n; i++) {
        const Candidate *c = &cs->c[sel->kernels[i]];
        for (int q = 0; q < c->n_prims; q++)
            start[c->prims[q] + 1]++;
    }
    for (int p = 0; p < pg->n_prims; p++)
        start[p + 1] += start[p];
    int *fill = xcalloc((size_t)pg->n_prims + 1, sizeof(int));
    int *by = xcalloc((size_t)start[pg->n_prims] + 1, sizeof(int));
    for (int i = 0; i < sel->n; i++) {
        const Candidate *c = &cs->c[sel->kernels[i]];
        for (int q = 0; q < c->n_prims; q++) {
            int p = c->prims[q];
            by[start[p] + fill[p]++] = i;
        }
    }
    int *stamp = xcalloc((size_t)sel->n + 1, sizeof(int));
    const int cap = 24;
    int lines = 0, more = 0;
    for (int i = 0; i < cs->n; i++) {
        const Candidate *c = &cs->c[i];
        int n_lin = 0;
        for (int q = 0; q < c->n_prims; q++)
            n_lin += lab_linear_k(pg, pg->prims[c->prims[q]]) > 0;
        if (n_lin < 2)
            continue;
        if (lines == cap) {
            more++;
            continue;
        }
        lines++;
        AttnSpec a;
        const char *kind = attn_analyse(pg, c, &a) ? "fused attention" : "MLP chain";
        const Sig *s = &d->sigs[d->sig_of[i]];
        const char *desc = s->supported && s->best >= 0 ? s->cfg[s->best].desc : "";
        char t_own[32], t_alt[32];
        fmt_time(c->cost, t_own, sizeof t_own);
        if (chosen[i]) {
            fprintf(pr, "  %s (%d primitives, %d linear): %s [%s], chosen\n", kind, c->n_prims,
                    n_lin, t_own, desc);
            continue;
        }
        double alt = 0;
        int n_alt = 0;
        for (int q = 0; q < c->n_prims; q++) {
            int p = c->prims[q];
            for (int k = start[p]; k < start[p + 1]; k++)
                if (stamp[by[k]] != i + 1) {
                    stamp[by[k]] = i + 1;
                    alt += cs->c[sel->kernels[by[k]]].cost;
                    n_alt++;
                }
        }
        fmt_time(alt, t_alt, sizeof t_alt);
        fprintf(pr,
                "  %s (%d primitives, %d linear): %s [%s], not chosen: the plan computes "
                "them with %d kernel%s of %s in all\n",
                kind, c->n_prims, n_lin, t_own, desc, n_alt, n_alt == 1 ? "" : "s", t_alt);
    }
    if (more)
        fprintf(pr, "  ... and %d more multi-layer candidates\n", more);
    free(chosen);
    free(start);
    free(fill);
    free(by);
    free(stamp);
}

// ---- the kernels not generated ----

// The selection's kernels an interpreter runs (the target generated no config of them) into
// *fb and the report: the count, their share of the predicted time and one line per op for the
// summary; with --explain one progress line per kernel with its measured interpreter time.
static void report_not_generated(Driver *d, const Selection *sel, Fallbacks *fb, FILE *pr) {
    CompileReport *rep = d->rep;
    FallbackKernel *k = xcalloc((size_t)sel->n + 1, sizeof *k);
    int n = 0;
    for (int i = 0; i < sel->n; i++) {
        const Candidate *c = &d->cs->c[sel->kernels[i]];
        if (d->sigs[d->sig_of[sel->kernels[i]]].best >= 0)
            continue;
        const Prim *p = d->pg->prims[c->prims[0]];
        k[n++] = (FallbackKernel){p->kind == PRIM_OPAQUE ? PLAN_OPAQUE : PLAN_INTERP, c->prims[0],
                                  c->cost};
    }
    fallbacks_collect(d->pg, d->target->name, k, n, sel->objective, fb);
    free(k);
    rep->interp = fb->kernels;
    rep->not_generated_share = fb->total > 0 ? fb->seconds / fb->total : 0;
    StrBuf b;
    sb_init(&b);
    fallbacks_format(fb, false, "  ", &b);
    size_t cap = sizeof rep->not_generated_lines;
    if (b.len >= cap) { // cut at a line's end, and say so
        size_t at = cap - 32;
        while (at > 0 && b.s[at - 1] != '\n')
            at--;
        snprintf(b.s + at, cap - at, "  ...\n");
    }
    snprintf(rep->not_generated_lines, cap, "%s", b.s);
    if (pr && d->opt->explain > 0 && fb->kernels > 0) {
        sb_clear(&b);
        fallbacks_format(fb, true, "  ", &b);
        fprintf(pr, "explain: the kernels not generated for %s (the interpreter runs them)\n%s",
                d->target->name, b.s);
    }
    sb_free(&b);
}

// Strict mode's error: how many kernels are not generated and which ops and nodes (the
// summary's groups, briefly).
static int strict_refusal(const Driver *d, const Fallbacks *fb, Err *e) {
    StrBuf b;
    sb_init(&b);
    for (int i = 0; i < fb->n_groups && i < 4; i++) {
        const FallbackGroup *g = &fb->groups[i];
        sb_printf(&b, "%s%s", i ? ", " : "", g->ops);
        if (g->kernels > 1)
            sb_printf(&b, " \u00d7%d", g->kernels);
        sb_printf(&b, " (node%s %s%s)", g->n_nodes == 1 ? "" : "s", g->nodes[0],
                  g->n_nodes > 1 ? ", ..." : "");
    }
    if (fb->n_groups > 4)
        sb_printf(&b, " and %d more ops", fb->n_groups - 4);
    int rc = err_set(e, ST_UNSUPPORTED,
                     "strict mode: %d kernel%s not generated for %s (%.1f%% of the predicted "
                     "time): %s; no artefact written (without strict mode an interpreter runs "
                     "them)",
                     fb->kernels, fb->kernels == 1 ? " is" : "s are", d->target->name,
                     fb->total > 0 ? 100 * fb->seconds / fb->total : 0.0, b.s);
    sb_free(&b);
    return rc;
}

// ---- the shared object of the chosen kernels, the plan and the artefact ----

// *src: the module's source where the target keeps it (for orch export), else NULL.
// Built modules kept in the profile database: the least recently used go past this many bytes
// (a CPU module of a 70-kernel MobileNetV2 plan is about 1 MB).
#define MODULE_CACHE_BYTES ((int64_t)256 << 20)

// The key of a module built from src by this target on this device: 128 bits of the source,
// orch's version, the target's build identity and the device fingerprint, and the length.
static void module_key(const Driver *d, const char *src, char *key, size_t n) {
    StrBuf who;
    sb_init(&who);
    sb_printf(&who, "orch %s|%s|%s|%s", ORCH_VERSION, d->target->name, d->m.hw.fingerprint,
              d->target->module_identity(&d->m));
    size_t len = strlen(src);
    uint64_t w = plan_hash64(who.s, who.len, 0x6f726368ull);
    snprintf(key, n, "%016llx%016llx-%zu", (unsigned long long)plan_hash64(src, len, w),
             (unsigned long long)plan_hash64(src, len, ~w * 0x9e3779b97f4a7c15ull), len);
    sb_free(&who);
}

// The module a compile that chose the same kernels built before (true), from the database.
static bool module_from_db(Driver *d, const char *key, uint8_t **so, size_t *so_size) {
    void *blob = NULL;
    size_t size = 0;
    bool found = false, damaged = false;
    Err e = {0};
    if (pdb_get_module(d->db, key, &blob, &size, &found, &damaged, &e) != ST_OK)
        db_trouble(d, &e);
    if (damaged && d->opt->progress)
        fprintf(d->opt->progress, "build: the stored module of these kernels is damaged: "
                                  "building it again\n");
    if (!found) {
        free(blob);
        return false;
    }
    *so = blob;
    *so_size = size;
    return true;
}

static int build_plan_and_module(Driver *d, const Selection *sel, Plan **plan, uint8_t **so,
                                 size_t *so_size, char **src, Err *e) {
    PlanKernelSpec *spec = xcalloc((size_t)sel->n + 1, sizeof *spec);
    char(*names)[64] = xcalloc((size_t)sel->n + 1, sizeof *names);
    const char **gnames = xcalloc((size_t)sel->n + 1, sizeof *gnames);
    int *gc = xcalloc((size_t)sel->n + 1, sizeof(int));
    KernelConfig *gk = xcalloc((size_t)sel->n + 1, sizeof(KernelConfig));
    int ng = 0;
    int rc = ST_OK;
    for (int i = 0; i < sel->n; i++) {
        const Candidate *c = &d->cs->c[sel->kernels[i]];
        Sig *s = &d->sigs[d->sig_of[sel->kernels[i]]];
        if (s->best >= 0) {
            spec[i].kind = PLAN_GENERATED;
            lab_kernel_name(d->pg, c, &s->cfg[s->best], names[i], sizeof names[i]);
            spec[i].symbol = names[i];
            gc[ng] = sel->kernels[i];
            gk[ng] = s->cfg[s->best];
            gnames[ng++] = names[i];
            d->rep->selection_digest =
                artifact_hash(names[i], strlen(names[i])) ^ (d->rep->selection_digest * 31);
        } else {
            spec[i].kind =
                d->pg->prims[c->prims[0]]->kind == PRIM_OPAQUE ? PLAN_OPAQUE : PLAN_INTERP;
            d->rep->selection_digest = c->signature ^ (d->rep->selection_digest * 31);
        }
    }
    // The target's module of the chosen kernels (no generated kernel: none at all): reused from
    // the database where the target's module is a function of its source, else built (and kept).
    *src = NULL;
    if (d->target->module_source)
        rc = d->target->module_source(&d->m, d->pg, d->cs, gc, gk, gnames, ng, src, e);
    char key[80] = "";
    bool cache = rc == ST_OK && *src && d->target->module_identity && d->db && !d->db_broken;
    if (cache)
        module_key(d, *src, key, sizeof key);
    if (cache && module_from_db(d, key, so, so_size)) {
        d->rep->module_reused = true;
        if (d->opt->progress)
            fprintf(d->opt->progress, "build: the %d kernels' module from the database (built by "
                                      "an earlier compile that chose the same kernels)\n",
                    ng);
    } else if (rc == ST_OK) {
        rc = d->target->build(&d->m, d->pg, d->cs, gc, gk, gnames, ng, d->mods, d->n_mods, so,
                              so_size, e);
        Err de = {0};
        if (rc == ST_OK && cache && !d->db_broken &&
            pdb_set_module(d->db, key, d->target->name, d->m.hw.fingerprint, *so, *so_size,
                           MODULE_CACHE_BYTES, &de) != ST_OK)
            db_trouble(d, &de);
    }
    if (rc == ST_OK)
        rc = plan_build(d->pg, d->cs, sel, spec, plan, e);
    free(spec);
    free(names);
    free(gnames);
    free(gc);
    free(gk);
    return rc;
}

// Every graph input's shape, as --input-shapes spells it, so the runtime's re-import binds the
// same shapes whatever the model leaves symbolic.
static int shapes_string(const Graph *g, char *buf, size_t n, Err *e) {
    StrBuf b;
    sb_init(&b);
    for (int i = 0; i < g->n_inputs; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        if (strpbrk(t->name, ",;")) {
            sb_free(&b);
            return err_set(e, ST_UNSUPPORTED,
                           "input '%s': names with ',' or ';' cannot be bound "
                           "in an artefact",
                           t->name);
        }
        sb_printf(&b, "%s%s:", i ? "," : "", t->name);
        for (int d = 0; d < t->rank; d++)
            sb_printf(&b, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
    }
    int rc = ST_OK;
    if (b.len + 1 > n || strchr(b.s, '\n'))
        rc = err_set(e, ST_UNSUPPORTED,
                     "the input names and shapes take %zu bytes, more than an "
                     "artefact holds (%zu)",
                     b.len + 1, n);
    else
        snprintf(buf, n, "%s", b.s);
    sb_free(&b);
    return rc;
}

// ---- the end-to-end check's reference, cached in the profile database ----

// The blob's layout (host byte order; the database checksums it): "orchref" and a NUL, u32
// REF_FORMAT, u32 number of outputs, per output u32 dtype, u32 0, u64 bytes; then every output's
// bytes in order. A change of layout or of what the values mean bumps REF_FORMAT.
#define REF_FORMAT 1
static const char ref_magic[8] = "orchref";

// Everything that determines the graph outputs' interpreter values: orch's version (the
// interpreter's arithmetic), the blob format, the model's bytes (external data inlined), every
// input's shape, the load flags (attention rewrite changes the primitive graph), the tensors
// half storage keeps float32 and the seed of the random inputs. Malloc'd.
static char *reference_key(uint64_t model_hash, const char *shapes, uint32_t load_flags,
                           const char *wide, uint64_t seed) {
    StrBuf b;
    sb_init(&b);
    sb_printf(&b, "orch %s|ref %d|model %016llx|flags %u|seed %016llx|shapes %s", ORCH_VERSION,
              REF_FORMAT, (unsigned long long)model_hash, load_flags, (unsigned long long)seed,
              shapes);
    if (wide && *wide)
        sb_printf(&b, "|float32 %s", wide);
    return b.s;
}

static void put_u32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}
static void put_u64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

// The graph outputs' values (outs[i] of output i) as a blob.
static uint8_t *reference_pack(const PrimGraph *pg, const void *const *outs, size_t *size) {
    size_t n = 16 + 16 * (size_t)pg->n_outputs;
    for (int i = 0; i < pg->n_outputs; i++)
        n += tensor_nbytes(pg->tensors[pg->outputs[i]]);
    uint8_t *b = xmalloc(n + 1), *p = b + 16;
    memcpy(b, ref_magic, 8);
    put_u32(b + 8, REF_FORMAT);
    put_u32(b + 12, (uint32_t)pg->n_outputs);
    for (int i = 0; i < pg->n_outputs; i++, p += 16) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        put_u32(p, (uint32_t)t->dtype);
        put_u32(p + 4, 0);
        put_u64(p + 8, (uint64_t)tensor_nbytes(t));
    }
    for (int i = 0; i < pg->n_outputs; i++) {
        size_t nb = tensor_nbytes(pg->tensors[pg->outputs[i]]);
        if (nb)
            memcpy(p, outs[i], nb);
        p += nb;
    }
    *size = n;
    return b;
}

// The outputs' values from a blob (each malloc'd), or NULL when the blob does not describe
// exactly this graph's outputs (another format, count, dtype or size): then it is not used.
static void **reference_unpack(const PrimGraph *pg, const uint8_t *b, size_t size) {
    size_t head = 16 + 16 * (size_t)pg->n_outputs, total = head;
    if (size < head || memcmp(b, ref_magic, 8) != 0 || get_u32(b + 8) != REF_FORMAT ||
        get_u32(b + 12) != (uint32_t)pg->n_outputs)
        return NULL;
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        const uint8_t *p = b + 16 + 16 * (size_t)i;
        if (get_u32(p) != (uint32_t)t->dtype || get_u64(p + 8) != (uint64_t)tensor_nbytes(t))
            return NULL;
        total += tensor_nbytes(t);
    }
    if (total != size)
        return NULL;
    void **outs = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
    const uint8_t *p = b + head;
    for (int i = 0; i < pg->n_outputs; i++) {
        size_t nb = tensor_nbytes(pg->tensors[pg->outputs[i]]);
        outs[i] = xmalloc(nb + 1);
        if (nb)
            memcpy(outs[i], p, nb);
        p += nb;
    }
    return outs;
}

static void reference_free(const PrimGraph *pg, void **outs) {
    for (int i = 0; outs && i < pg->n_outputs; i++)
        free(outs[i]);
    free(outs);
}

// Runs the artefact exactly as `orch run` would and compares its outputs with ref (the
// interpreter's values of the graph outputs: computed now or cached).
static int check_artifact(Driver *d, const char *path, void **inputs, void *const *ref,
                          double *max_err, Err *e) {
    ArtifactContents a;
    int rc = artifact_read(path, &a, e);
    if (rc)
        return rc;
    Session *s = NULL;
    SessionOptions so = {.threads = d->opt->threads};
    rc = session_create(&a, &d->m.hw, &so, &s, e);
    void **outs = xcalloc((size_t)d->pg->n_outputs + 1, sizeof(void *));
    for (int i = 0; i < d->pg->n_outputs && rc == ST_OK; i++) {
        size_t b = tensor_nbytes(d->pg->tensors[d->pg->outputs[i]]);
        outs[i] = xmalloc(b + 64);
        memset(outs[i], 0xff, b);
    }
    if (rc == ST_OK)
        rc = session_run(s, (const void *const *)inputs, outs, e);
    *max_err = 0;
    for (int i = 0; i < d->pg->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = d->pg->tensors[d->pg->outputs[i]];
        char why[256];
        double err = 0;
        if (!lab_outputs_agree_tol(t->dtype, tensor_numel(t), outs[i], ref[i], d->check_tol, &err,
                                   why, sizeof why))
            rc = err_set(e, ST_MISMATCH,
                         "the compiled plan's output '%s' disagrees with the primitive "
                         "interpreter: %s (a bug in orch: please report it)",
                         t->name, why);
        *max_err = err > *max_err ? err : *max_err;
    }
    for (int i = 0; i < d->pg->n_outputs; i++)
        free(outs[i]);
    free(outs);
    session_free(s);
    artifact_contents_free(&a);
    return rc;
}

// The float32 model's outputs on the check's inputs under half storage (*outs[n_outputs],
// malloc'd): the model imported again without the storage pass, run by the interpreter.
static int float32_outputs(Driver *d, void ***outs, Err *e) {
    const PrimGraph *pg = d->pg;
    Graph *g32 = NULL;
    PrimGraph *pg32 = NULL;
    void **o = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
    int rc = compile_import(d->model_bytes, d->model_size, d->model_path, NULL,
                            d->opt->input_shapes, d->opt->attention_rewrite, &g32, &pg32, e);
    if (rc == ST_OK && pg32->n_outputs != pg->n_outputs)
        rc = err_set(e, ST_RUNTIME, "the float32 graph has other outputs");
    if (rc == ST_OK)
        rc = prim_interp_run(pg32, (const void *const *)d->inputs, o, e);
    prim_graph_free(pg32);
    graph_free(g32);
    if (rc) {
        reference_free(pg, o);
        o = NULL;
    }
    *outs = o;
    return rc;
}

// Under a reduced precision a deep model's outputs can move past e2e_tolerance from the operand
// rounding alone (CSPDarknet53 under fp16 on an H100: 0.2 of max|ref| against a bound of 0.16;
// PyTorch's own half-precision error there is 0.17). The interpreter with every linear operand
// rounded to the precision (prim_interp_run_rounded) measures that movement: *dev = the largest
// |rounded - exact| over the outputs, relative to each output's max|exact| (storage_deviation). A
// composition bug (a wrong buffer, a missed dependency) does not hide within a few times
// rounding's own effect.
//
// Under half storage the reference already has every tensor rounded (the half model's values):
// the movement measured is then storage's own, against the float32 model's outputs, and relative
// to their largest |value| - not the half reference's, which is 0 where storage lost an output.
static int rounding_deviation(Driver *d, void *const *ref, double *dev, Err *e) {
    const PrimGraph *pg = d->pg;
    int bits = d->prec == PREC_BF16 ? 7 : 10; // tf32 and fp16 keep 10 mantissa bits
    int rc = ST_OK, at;
    double scale;
    *dev = 0;
    if (d->half_storage) {
        if (!d->f32_outs)
            rc = float32_outputs(d, &d->f32_outs, e);
        if (rc == ST_OK)
            *dev = storage_deviation(pg, d->f32_outs, ref, &at, &scale);
        return rc;
    }
    void **emu = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
    rc = prim_interp_run_rounded(pg, (const void *const *)d->inputs, emu, bits, e);
    if (rc == ST_OK)
        *dev = storage_deviation(pg, ref, emu, &at, &scale);
    reference_free(pg, emu);
    return rc;
}

// After check_artifact failed under a reduced precision: rounding's own effect on this model
// may exceed the depth-based bound, so measure it (rounding_deviation) and, where 4 times it is
// wider, check again with that tolerance (kept for the rest of the compile). An infinite
// deviation (an output lost to rounding) widens nothing. Returns the check's result; e keeps the
// first failure's message when the tolerance stays.
static int check_within_rounding(Driver *d, const char *path, void *const *ref, Err *e) {
    double dev = 0;
    Err de = {0};
    if (rounding_deviation(d, ref, &dev, &de) != ST_OK || !isfinite(dev) ||
        !(4 * dev > d->check_tol))
        return ST_MISMATCH;
    if (d->opt->progress)
        fprintf(d->opt->progress,
                "check: under %s %s moves the outputs by %.3g of max|output| (past the tolerance "
                "%.3g): the check allows 4 times that (%s)\n",
                precision_name(d->prec),
                d->half_storage ? "half storage (the float32 model against the half one)"
                                : "the interpreter with rounded linear operands",
                dev, d->check_tol, e->msg);
    d->check_tol = 4 * dev;
    d->rep->check_tol = d->check_tol;
    *e = (Err){0};
    return check_artifact(d, path, d->inputs, ref, &d->rep->max_err, e);
}

// The end-to-end check: the artefact's outputs against the reference the database holds for
// this model and these inputs, else (none, damaged, or one the artefact disagrees with, which
// may be stale) against the interpreter's values, which are then stored as the reference.
static int end_to_end_check(Driver *d, const char *path, uint64_t model_hash, const char *shapes,
                            uint32_t load_flags, Err *e) {
    const PrimGraph *pg = d->pg;
    FILE *pr = d->opt->progress;
    double t0 = now_s();
    bool use_db = d->db && !d->db_broken;
    uint64_t seed = d->opt->seed ? d->opt->seed : 0x9e3779b97f4a7c15ull; // as random_inputs
    char *key = use_db ? reference_key(model_hash, shapes, load_flags, d->wide_text, seed) : NULL;
    const char *from = "computed by the interpreter";
    int rc = ST_OK;
    if (use_db) {
        void *blob = NULL;
        size_t size = 0;
        bool found = false, damaged = false;
        Err le = {0};
        void **cached = NULL;
        if (pdb_get_reference(d->db, key, &blob, &size, &found, &damaged, &le) != ST_OK)
            db_trouble(d, &le);
        else if (found && !(cached = reference_unpack(pg, blob, size)))
            damaged = true;
        free(blob);
        if (damaged && pr)
            fprintf(pr, "check: the stored reference of this model is damaged or of another "
                        "format: recomputing it\n");
        if (cached) {
            rc = check_artifact(d, path, d->inputs, cached, &d->rep->max_err, e);
            if (rc == ST_MISMATCH && d->prec != PREC_FP32)
                rc = check_within_rounding(d, path, cached, e);
            reference_free(pg, cached);
            if (rc == ST_OK) {
                from = "reference cached in the database";
                goto done;
            }
            if (rc != ST_MISMATCH)
                goto done;
            // A stale or wrong reference must not fail a good artefact: the interpreter decides.
            if (pr)
                fprintf(pr,
                        "check: the artefact disagrees with the cached reference (%s): "
                        "recomputing it with the interpreter\n",
                        e->msg);
            *e = (Err){0};
            rc = ST_OK;
        }
    }
    if ((rc = need_values(d, "the end-to-end check's reference", e)))
        goto done;
    void **ref = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
    for (int i = 0; i < pg->n_outputs; i++)
        ref[i] = d->values[pg->outputs[i]];
    if (use_db && !d->db_broken) {
        size_t size;
        uint8_t *blob = reference_pack(pg, (const void *const *)ref, &size);
        Err le = {0};
        if (pdb_set_reference(d->db, key, blob, size, &le) != ST_OK)
            db_trouble(d, &le);
        else
            from = "computed by the interpreter, stored as the reference";
        free(blob);
    }
    rc = check_artifact(d, path, d->inputs, ref, &d->rep->max_err, e);
    if (rc == ST_MISMATCH && d->prec != PREC_FP32)
        rc = check_within_rounding(d, path, ref, e);
    free(ref);
done:
    if (rc == ST_OK && pr)
        fprintf(pr,
                "check: the artefact's outputs agree with the interpreter's (%s), largest "
                "error %.2g, in %.2f s\n",
                from, d->rep->max_err, now_s() - t0);
    free(key);
    return rc;
}

// The end-to-end check's tolerance: FP32 keeps the kernels' 1e-4 (exact float32 arithmetic
// everywhere); under a reduced precision every linear layer on a path from an input adds its
// rounding, so the tolerance of the largest product (precision_tolerance at the graph's largest
// K) grows with the square root of D, the most LINEAR primitives on one path: 2 sqrt(D) times
// it, which also covers errors that add up coherently for D up to about 50. *kmax gets that K.
static double e2e_tolerance(const PrimGraph *pg, Precision p, int64_t *kmax) {
    *kmax = 0;
    int *depth = xcalloc((size_t)pg->n_tensors + 1, sizeof(int));
    int D = 0;
    for (int i = 0; i < pg->n_prims; i++) { // prims are in topological order
        const Prim *q = pg->prims[i];
        if (q->dead)
            continue;
        int dq = 0;
        for (int j = 0; j < q->n_in; j++)
            if (q->in[j] >= 0)
                dq = ORCH_MAX(dq, depth[q->in[j]]);
        int64_t k = lab_linear_k(pg, q);
        if (k > 0) {
            dq++;
            *kmax = ORCH_MAX(*kmax, k);
        }
        for (int o = 0; o < q->n_out; o++)
            if (q->out[o] >= 0)
                depth[q->out[o]] = dq;
        D = ORCH_MAX(D, dq);
    }
    free(depth);
    if (p == PREC_FP32 || *kmax == 0)
        return 1e-4;
    return 2.0 * sqrt((double)D) * precision_tolerance(p, *kmax);
}

// The key of a half-storage record in the profile database's reference table: orch's version
// (the interpreter's arithmetic and the rules), `what` (the record, naming its limits), the
// model's bytes, the input shapes, the attention rewrite and the seed of the check's inputs.
static char *storage_key(const Driver *d, const void *model, size_t size, const char *what) {
    StrBuf b;
    sb_init(&b);
    sb_printf(&b, "orch %s|%s|model %016llx|shapes %s|rewrite %d|seed %016llx", ORCH_VERSION, what,
              (unsigned long long)artifact_hash(model, size),
              d->opt->input_shapes ? d->opt->input_shapes : "", d->opt->attention_rewrite ? 1 : 0,
              (unsigned long long)(d->opt->seed ? d->opt->seed : 0x9e3779b97f4a7c15ull));
    return sb_take(&b);
}

// float16 storage's range (--half-storage under fp16): the float32 graph run by the interpreter on
// the check's random inputs (values in [-1, 1)); a tensor with a |value| past 65504 / 64, or
// whose largest |value| is nonzero and under 2^-11 (STORAGE_F16_HIGH / _LOW: passes_storage.c
// derives them), is kept float32 (storage_range_wide), with the layouts and products that touch
// it. Past 65504 / 64: inputs a few times larger than the check's (images, randn) make products
// of two or three activations grow with the square or cube of the scale; EfficientViT-B0's linear
// attention, (Q (K^T V)) / (Q sum K), reaches 1e5 on an image (timm computes it in float32 under
// autocast). Under 2^-11: float16's subnormals lose more than its rounding, and values under
// 2^-25 flush to zero (torchvision's MobileNetV2 with its default initialisation: outputs near
// 3e-9). *wide (malloc'd, NULL: none) and d->wide_text (the artefact's record) are set; where the
// float32 graph ran, d->f32_outs keeps its outputs for storage_check. The set is kept in the
// profile database's reference table under a key naming everything it depends on, so a warm
// compile skips the interpreter run (Segformer-B0 at 512x512: 7 s).
static const char range_magic[] = "float16 range:"; // the stored blob: magic, counts, then the set

// A stored range record: "float16 range: overflow N underflow M smallest T V;" and the set. False
// when damaged (the counts disagree with the set, an id out of range): it is then recomputed.
static bool range_unpack(const PrimGraph *pg, const void *blob, size_t blen, bool *w,
                         RangeStats *rs) {
    char *text = xmalloc(blen + 1);
    memcpy(text, blob, blen);
    text[blen] = '\0';
    int used = 0, n = 0;
    *rs = (RangeStats){.peak_tensor = -1, .smallest_tensor = -1};
    bool ok =
        sscanf(text, "float16 range: overflow %d underflow %d smallest %d %lf;%n", &rs->overflow,
               &rs->underflow, &rs->smallest_tensor, &rs->smallest, &used) == 4 &&
        used > 0 && rs->overflow >= 0 && rs->underflow >= 0 && rs->smallest_tensor >= -1 &&
        rs->smallest_tensor < pg->n_tensors;
    Err pe = {0};
    ok = ok && storage_wide_parse(text + used, pg->n_tensors, w, &pe) == ST_OK;
    for (int t = 0; ok && t < pg->n_tensors; t++)
        n += w[t];
    free(text);
    return ok && n == rs->overflow + rs->underflow;
}

static int range_wide_tensors(Driver *d, const PrimGraph *pg, const void *model, size_t size,
                              bool **wide, Err *e) {
    FILE *pr = d->opt->progress;
    double t0 = now_s();
    bool *w = xcalloc((size_t)pg->n_tensors + 1, 1);
    // The database, opened for this lookup alone; trouble with it only costs the cache (the
    // tuning phase reports it).
    ProfileDb *db = NULL;
    Err dbe = {0};
    if (pdb_open(d->opt->db_path, false, &db, &dbe) != ST_OK)
        db = NULL;
    char what[96];
    snprintf(what, sizeof what, "float16 range: past %g or under %g", STORAGE_F16_HIGH,
             STORAGE_F16_LOW);
    char *key = storage_key(d, model, size, what);
    void *blob = NULL;
    size_t blen = 0;
    bool found = false, damaged = false, cached = false;
    RangeStats rs = {.peak_tensor = -1, .smallest_tensor = -1};
    if (db && pdb_get_reference(db, key, &blob, &blen, &found, &damaged, &dbe) == ST_OK && found)
        cached = range_unpack(pg, blob, blen, w, &rs);
    free(blob);
    int n = rs.overflow + rs.underflow, rc = ST_OK;
    if (!cached) {
        void **in = random_inputs(pg, d->opt->seed), **vals = NULL;
        rc = prim_interp_values(pg, (const void *const *)in, &vals, e);
        free_inputs(pg, in);
        if (rc == ST_OK) {
            n = storage_range_wide(pg, vals, STORAGE_F16_HIGH, STORAGE_F16_LOW, w, &rs);
            // The float32 model's outputs, for storage_check (same inputs: the same seed).
            d->f32_outs = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
            for (int i = 0; i < pg->n_outputs; i++) {
                const Tensor *T = pg->tensors[pg->outputs[i]];
                size_t nb = tensor_nbytes(T);
                d->f32_outs[i] = xmalloc(nb + 1);
                memcpy(d->f32_outs[i], T->kind == TK_CONST ? T->data : vals[pg->outputs[i]], nb);
            }
            prim_values_free(pg, vals);
        }
    }
    char *text = rc == ST_OK ? xmalloc(ARTIFACT_MAX_WIDE) : NULL;
    bool fits = text && storage_wide_format(w, pg->n_tensors, text, ARTIFACT_MAX_WIDE);
    if (fits && !cached && db) {
        StrBuf b;
        sb_init(&b);
        sb_printf(&b, "%s overflow %d underflow %d smallest %d %.17g;%s", range_magic, rs.overflow,
                  rs.underflow, rs.smallest_tensor, rs.smallest, text);
        pdb_set_reference(db, key, b.s, strlen(b.s), &dbe); // a failure only costs the cache
        sb_free(&b);
    }
    pdb_close(db);
    free(key);
    if (rc) {
        free(w);
        return rc;
    }
    double dt = now_s() - t0;
    d->rep->t_check += dt;
    if (pr) {
        if (cached)
            fprintf(pr, "storage: float16 range from the database (checked on the float32 graph "
                        "before): ");
        else
            fprintf(pr, "storage: float16 range checked on the float32 graph in %.2f s: ", dt);
        if (n)
            fprintf(pr,
                    "%d tensors stay float32, %d with a |value| past %.0f, %d whose largest "
                    "|value| is under %.3g",
                    n, rs.overflow, STORAGE_F16_HIGH, rs.underflow, STORAGE_F16_LOW);
        else
            fprintf(pr, "every tensor within %.0f and none all under %.3g", STORAGE_F16_HIGH,
                    STORAGE_F16_LOW);
        if (rs.smallest_tensor >= 0)
            fprintf(pr, " (the smallest %.3g, '%s')", rs.smallest,
                    pg->tensors[rs.smallest_tensor]->name);
        if (rs.peak_tensor >= 0)
            fprintf(pr, "; largest |value| of the rest %.4g ('%s')", rs.peak,
                    pg->tensors[rs.peak_tensor]->name);
        fprintf(pr, "\n");
    }
    if (n == 0) {
        free(w);
        free(text);
        *wide = NULL;
        return ST_OK;
    }
    d->wide_text = text;
    if (!fits) {
        free(w);
        return err_set(e, ST_UNSUPPORTED,
                       "%d tensors exceed float16's range on the check's inputs (%d past %.0f, %d "
                       "all under %.3g), too many to record; use --precision bf16 (float32's "
                       "range) for this model",
                       n, rs.overflow, STORAGE_F16_HIGH, rs.underflow, STORAGE_F16_LOW);
    }
    *wide = w;
    return ST_OK;
}

// Half storage's own effect on the outputs (storage_deviation): the float32 model's outputs
// against the half model's on the check's inputs, relative to the float32 outputs' largest
// |value|, and the refusal past STORAGE_DEVIATION_LIMIT (storage_deviation_verdict, ST_UNSUPPORTED:
// the model's values, not orch's kernels, are the trouble). The end-to-end check alone cannot see
// a lost output: its reference is the half model, which loses it too (torchvision's MobileNetV2
// under fp16 passed it with a relative error of 1 against ONNX Runtime). The float32 outputs come
// from the range analysis where it ran the float32 graph, else from importing the model again;
// the half ones from the interpreter's values, which tuning uses anyway. Run before tuning, so a
// refusal costs no measurements. The result is cached in the profile database's reference table
// under a key naming the model, shapes, rewrite, seed, storage type and wide set (which names the
// range limits), so a warm compile runs neither graph; a damaged record is measured again.
static const char dev_magic[] = "storage deviation:"; // the stored blob

static int storage_check(Driver *d, Err *e) {
    const PrimGraph *pg = d->pg;
    FILE *pr = d->opt->progress;
    DType to = d->prec == PREC_FP16 ? DT_FLOAT16 : DT_BFLOAT16;
    double t0 = now_s(), tv = d->t_values;
    ProfileDb *db = NULL;
    Err dbe = {0};
    if (pdb_open(d->opt->db_path, false, &db, &dbe) != ST_OK)
        db = NULL;
    StrBuf what;
    sb_init(&what);
    sb_printf(&what, "%s storage deviation|float32 %s", dtype_name(to),
              d->wide_text ? d->wide_text : "");
    char *key = storage_key(d, d->model_bytes, d->model_size, what.s);
    sb_free(&what);
    double dev = 0, scale = 0;
    int out = -1, rc = ST_OK;
    bool cached = false;
    if (!d->f32_outs && db) {
        void *blob = NULL;
        size_t blen = 0;
        bool found = false, damaged = false;
        if (pdb_get_reference(db, key, &blob, &blen, &found, &damaged, &dbe) == ST_OK && found) {
            char *text = xmalloc(blen + 1);
            memcpy(text, blob, blen);
            text[blen] = '\0';
            int used = 0;
            cached = sscanf(text, "storage deviation: %lf output %d scale %lf%n", &dev, &out,
                            &scale, &used) == 3 &&
                     (size_t)used == blen && dev >= 0 && out >= -1 && out < pg->n_outputs;
            free(text);
        }
        free(blob);
    }
    if (!cached) {
        if (!d->f32_outs)
            rc = float32_outputs(d, &d->f32_outs, e);
        if (rc == ST_OK)
            rc = need_values(d, "half storage's deviation from the float32 model", e);
        if (rc == ST_OK) {
            void **half = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
            for (int i = 0; i < pg->n_outputs; i++) {
                const Tensor *T = pg->tensors[pg->outputs[i]];
                half[i] = T->kind == TK_CONST ? T->data : d->values[pg->outputs[i]];
            }
            dev = storage_deviation(pg, d->f32_outs, half, &out, &scale);
            free(half);
            if (db) {
                StrBuf b;
                sb_init(&b);
                sb_printf(&b, "%s %.17g output %d scale %.17g", dev_magic, dev, out, scale);
                pdb_set_reference(db, key, b.s, strlen(b.s), &dbe); // a failure only costs it
                sb_free(&b);
            }
        }
    }
    pdb_close(db);
    free(key);
    if (rc) {
        err_prefix(e, "half storage's deviation from the float32 model: ");
        return rc;
    }
    d->rep->t_check += now_s() - t0 - (d->t_values - tv); // need_values counted its own time
    if (pr && out >= 0)
        fprintf(pr,
                "storage: %s storage moves the outputs by %.3g of max|output| against the "
                "float32 model on the check's inputs (at '%s', max|value| %.3g; refused past "
                "%.2g), %s\n",
                dtype_name(to), dev, pg->tensors[pg->outputs[out]]->name, scale,
                STORAGE_DEVIATION_LIMIT, cached ? "from the database" : "measured now");
    else if (pr)
        fprintf(pr, "storage: no float output of the model is nonzero on the check's inputs: "
                    "half storage's deviation is not measured\n");
    return storage_deviation_verdict(pg, to, dev, out, scale, e);
}

// ---- configs of reduced exactness (KCFG_REDUCED_EXACTNESS) ----
//
// Such a config passes the lab's check alone, but its errors compound over a deep plan: a plan
// holding them that misses the end-to-end check is solved again without any of them, from the
// measurements the compile has (leave_out_reduced, tune_and_solve), and built and checked again.
// The outcome is kept in the profile database's reference table (reduced_key), so a warm compile
// leaves them out from the start and reaches the same plan without failing the check again.

// Leaves every config of reduced exactness out of the signatures (their measurements stay in the
// database); a signature left without configs is no longer generated.
static void leave_out_reduced(Driver *d) {
    for (int i = 0; i < d->n_sigs; i++) {
        Sig *s = &d->sigs[i];
        int w = 0;
        for (int k = 0; k < s->n_cfg; k++) {
            if (s->cfg[k].flags & KCFG_REDUCED_EXACTNESS)
                continue;
            s->cfg[w] = s->cfg[k];
            s->cfg_status[w] = s->cfg_status[k];
            s->cfg_time[w] = s->cfg_time[k];
            s->cfg_known[w] = s->cfg_known[k];
            s->cfg_src[w] = s->cfg_src[k];
            s->cfg_hashed[w] = s->cfg_hashed[k];
            w++;
        }
        for (int k = w; k < s->n_cfg; k++) {
            s->cfg_known[k] = false;
            s->cfg_hashed[k] = false;
        }
        s->n_cfg = w;
        if (w == 0)
            s->supported = false;
        update_best(s);
    }
    d->exact_only = true;
}

// Adds the kind of config desc (its variant's words: the desc's second and third, "v=winograd
// m=4") to the ", "-separated list what (n bytes) unless it is there.
static void add_kind(char *what, size_t n, const char *desc) {
    const char *a = strchr(desc, ' ');
    if (!a)
        return;
    a++;
    const char *b = strchr(a, ' ');
    b = b ? strchr(b + 1, ' ') : NULL;
    int len = b ? (int)(b - a) : (int)strlen(a);
    char kind[64];
    snprintf(kind, sizeof kind, "%.*s", len, a);
    if (strstr(what, kind))
        return;
    size_t at = strlen(what), kl = strlen(kind);
    if (at + 2 + kl >= n)
        return; // the list is full: the first kinds stay
    if (at) {
        memcpy(what + at, ", ", 2);
        at += 2;
    }
    memcpy(what + at, kind, kl + 1);
}

// The chosen kernels whose config is of reduced exactness, their kinds into what.
static int reduced_kernels(const Driver *d, const Selection *sel, char *what, size_t n) {
    int k = 0;
    what[0] = '\0';
    for (int i = 0; i < sel->n; i++) {
        const Sig *s = &d->sigs[d->sig_of[sel->kernels[i]]];
        if (s->supported && s->best >= 0 && (s->cfg[s->best].flags & KCFG_REDUCED_EXACTNESS)) {
            k++;
            add_kind(what, n, s->cfg[s->best].desc);
        }
    }
    return k;
}

// Whether any signature has a config of reduced exactness.
static bool any_reduced(const Driver *d) {
    for (int i = 0; i < d->n_sigs; i++)
        for (int k = 0; k < d->sigs[i].n_cfg; k++)
            if (d->sigs[i].cfg[k].flags & KCFG_REDUCED_EXACTNESS)
                return true;
    return false;
}

// The key of the outcome in the reference table: what storage_key names, and the target, its
// precision and machine (the kernels' code and the plan's measurements), the candidate options
// and --check-tol. Malloc'd.
static char *reduced_key(const Driver *d, const void *model, size_t size) {
    char what[768];
    snprintf(what, sizeof what,
             "reduced exactness|target %s|precision %s|storage %d|chains %d|attention %d|"
             "bound %.6g|machine %s",
             db_target(d), precision_name(d->prec), d->half_storage ? 1 : 0,
             d->opt->no_mlp_chains ? 0 : 1, d->opt->no_attention ? 0 : 1, d->opt->check_tol,
             d->m.hw.fingerprint);
    return storage_key(d, model, size, what);
}

static const char inexact_magic[] = "reduced exactness left out:"; // the stored blob

// The stored outcome into the report (true: found and whole).
static bool reduced_lookup(Driver *d, const void *model, size_t size) {
    if (!d->db || d->db_broken)
        return false;
    char *key = reduced_key(d, model, size);
    void *blob = NULL;
    size_t blen = 0;
    bool found = false, damaged = false, ok = false;
    Err le = {0};
    if (pdb_get_reference(d->db, key, &blob, &blen, &found, &damaged, &le) == ST_OK && found &&
        blen < 256) {
        char text[256], kinds[64] = "";
        memcpy(text, blob, blen);
        text[blen] = '\0';
        int k = 0, used = 0;
        double err = 0;
        ok = sscanf(text, "reduced exactness left out: %d kernels, error %lf; %63[^\n]%n", &k, &err,
                    kinds, &used) == 3 &&
             (size_t)used == blen && k > 0 && err >= 0;
        if (ok) {
            d->rep->inexact_kernels = k;
            d->rep->inexact_err = err;
            snprintf(d->rep->inexact_what, sizeof d->rep->inexact_what, "%s", kinds);
        }
    }
    free(blob);
    free(key);
    return ok;
}

// Records the outcome (a failure only costs the warm compile its first plan).
static void reduced_store(Driver *d, const void *model, size_t size) {
    if (!d->db || d->db_broken)
        return;
    char *key = reduced_key(d, model, size), text[256];
    snprintf(text, sizeof text, "%s %d kernels, error %.6g; %s", inexact_magic,
             d->rep->inexact_kernels, d->rep->inexact_err, d->rep->inexact_what);
    Err le = {0};
    if (pdb_set_reference(d->db, key, text, strlen(text), &le) != ST_OK)
        db_trouble(d, &le);
    free(key);
}

static int compile_shape_sets(const char *onnx_path, const CompileOptions *opt,
                              const char *out_path, CompileReport *rep, Err *e);

int compile_model(const char *onnx_path, const CompileOptions *opt, const char *out_path,
                  CompileReport *rep, Err *e) {
    if (opt->n_shape_sets > 1 || (opt->n_shape_sets == 1 && opt->input_shapes))
        return compile_shape_sets(onnx_path, opt, out_path, rep, e);
    if (opt->n_shape_sets == 1) {
        CompileOptions one = *opt;
        one.input_shapes = opt->shape_sets[0];
        one.n_shape_sets = 0;
        return compile_model(onnx_path, &one, out_path, rep, e);
    }
    memset(rep, 0, sizeof *rep);
    double t_start = now_s(), t = t_start;
    Driver d = {.opt = opt, .rep = rep};
    d.target = target_find(opt->target ? opt->target : "cpu");
    if (!d.target)
        return err_set(e, ST_USAGE, "unknown target '%s' (this build has: %s)", opt->target,
                       target_names());
    if (!precision_parse(opt->precision ? opt->precision : "fp32", &d.prec))
        return err_set(e, ST_USAGE, "unknown precision '%s' (known: fp32, tf32, fp16, bf16)",
                       opt->precision);
    TargetOptions topt = {.precision = d.prec,
                          .half_storage = opt->half_storage,
                          .threads = opt->threads,
                          .gpus = opt->gpus};
    int rc = d.target->check_options(&topt, e);
    if (rc)
        return rc;
    rep->precision = precision_name(d.prec);
    // A bad output path is reported now, not after the whole tuning.
    if (out_path && (rc = file_check_output(out_path, &onnx_path, 1, e)))
        return rc;
    FILE *pr = opt->progress;
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    uint8_t *bytes = NULL, *so = NULL;
    char *src = NULL;
    size_t size = 0, so_size = 0;
    void **inputs = NULL;
    Selection sel = {0};
    Plan *plan = NULL;
    uint8_t *plan_bytes = NULL;
    size_t plan_size = 0;
    int *list = NULL, *k_at = NULL;
    Fallbacks fallbacks = {0};

    rc = target_open(d.target, &topt, &d.m, e);
    if (rc == ST_OK) {
        const char *pre = d.target->prelude(&d.m);
        d.prelude_hash = fnv64(14695981039346656037ull, pre, strlen(pre));
    }
    if (rc == ST_OK)
        rc = file_read_all(onnx_path, (int64_t)1 << 34, &bytes, &size, e);
    if (rc == ST_OK) {
        // The artefact carries the model's bytes: external data goes inline.
        char *dirbuf = xstrdup(onnx_path);
        uint8_t *inl = NULL;
        size_t inl_size = 0;
        rc = onnx_inline_external_data(bytes, size, onnx_path, dirname(dirbuf), &inl, &inl_size, e);
        if (inl) {
            free(bytes);
            bytes = inl;
            size = inl_size;
        }
        free(dirbuf);
    }
    if (rc == ST_OK)
        rc = compile_import(bytes, size, onnx_path, NULL, opt->input_shapes, opt->attention_rewrite,
                            &g, &pg, e);
    if (rc)
        goto out;
    // Half storage (--half-storage): under fp16 / bf16 the CUDA target stores every tensor but
    // the model's inputs and outputs in the reduced type; without it tensors stay float32 and only
    // the linear kernels' operands are rounded.
    uint32_t storage_flag = 0;
    if (opt->layout != COMPILE_LAYOUT_AUTO && !opt->half_storage) {
        rc = err_set(e, ST_USAGE,
                     "a layout other than auto needs half storage (channels-last "
                     "layouts are made for half-storage convolutions only)");
        goto out;
    }
    bool *wide = NULL;
    if (opt->half_storage && d.prec == PREC_FP16 &&
        (rc = range_wide_tensors(&d, pg, bytes, size, &wide, e)) != ST_OK) {
        err_prefix(e, "%s: float16 range: ", onnx_path);
        goto out;
    }
    if (opt->half_storage) {
        StorageStats ss = {0};
        DType to = d.prec == PREC_FP16 ? DT_FLOAT16 : DT_BFLOAT16;
        rc = pass_store_reduced(pg, to, wide, &ss, e);
        free(wide);
        if (rc) {
            err_prefix(e, "%s: %s storage: ", onnx_path, dtype_name(to));
            goto out;
        }
        storage_flag = to == DT_FLOAT16 ? ARTIFACT_STORE_F16 : ARTIFACT_STORE_BF16;
        d.half_storage = true;
        d.model_bytes = bytes;
        d.model_size = size;
        d.model_path = onnx_path;
        rep->storage = dtype_name(to);
        rep->retyped = ss.retyped;
        if (pr)
            fprintf(pr,
                    "storage: %d tensors in %s (weights %.1f -> %.1f MiB), %d casts at the "
                    "float32 inputs and outputs\n",
                    ss.retyped, dtype_name(to), (double)ss.const_bytes / 1048576.0,
                    (double)ss.const_bytes / 2097152.0, ss.casts);
        if (pr && ss.wide_tensors > 0)
            fprintf(pr,
                    "storage: %d tensors kept float32 for their range, and %d layouts, products "
                    "and reductions touching them computed in float32\n",
                    ss.wide_tensors, ss.wide_prims);
        // Channels-last pairs for the convolutions, where the target prefers them (the CUDA
        // target where cuDNN is there to read them; --layout nchw: never; nhwc: always).
        bool want = opt->layout == COMPILE_LAYOUT_AUTO ? d.target->prefers_channels_last(&d.m)
                                                       : opt->layout == COMPILE_LAYOUT_NHWC;
        NhwcStats ns = {0};
        if (want && (rc = pass_channels_last(pg, &ns, e))) {
            err_prefix(e, "%s: channels-last layouts: ", onnx_path);
            goto out;
        }
        if (want && ns.tensors + ns.weights > 0) {
            storage_flag |= ARTIFACT_LAYOUT_NHWC;
            if (pr)
                fprintf(pr,
                        "layouts: %d convolutions: %d activations with an NHWC twin (%d readers), "
                        "%d weights KRSC\n",
                        ns.convs, ns.tensors, ns.readers, ns.weights);
        }
    }
    d.pg = pg;
    rep->prims = pg->n_prims;
    rep->t_import = now_s() - t;
    if (pr)
        fprintf(pr, "import: %d primitives from %d ONNX nodes in %.2f s; target %s (%s): %s\n",
                pg->n_prims, g->n_nodes, rep->t_import, d.target->name, rep->precision,
                d.m.hw.fingerprint);

    t = now_s();
    CandRules rules = cand_rules_default();
    // MLP chain candidates compete with the single-layer kernels; --no-mlp-chains leaves them
    // out (to compare with the unfused selection). Fused attention candidates likewise
    // (--no-attention).
    rules.mlp_chains = !opt->no_mlp_chains;
    rules.attention = !opt->no_attention;
    if ((rc = cand_enumerate(pg, &rules, 0, &d.cs, e)))
        goto out;
    index_signatures(&d);
    rep->candidates = d.cs->n;
    rep->signatures = d.n_sigs;
    rep->t_candidates = now_s() - t;
    if (pr)
        fprintf(pr, "candidates: %d candidate kernels, %d distinct, in %.2f s\n", d.cs->n, d.n_sigs,
                rep->t_candidates);

    {
        int64_t kmax;
        d.check_tol = e2e_tolerance(pg, d.prec, &kmax);
        if (opt->check_tol > 0) // --check-tol
            d.check_tol = opt->check_tol;
        rep->check_tol = d.check_tol;
        rep->tol = kmax > 0 ? precision_tolerance(d.prec, kmax) : 1e-4;
        rep->tol_k = kmax;
    }
    // Random inputs for checks and timing; the interpreter's values of them come on first need.
    inputs = random_inputs(pg, opt->seed);
    d.inputs = inputs;
    if (d.half_storage && (rc = storage_check(&d, e)))
        goto out;

    t = now_s();
    double tv = d.t_values;
    if (pdb_open(opt->db_path, false, &d.db, &d.db_err)) {
        if (pr)
            fprintf(pr, "warning: profile database: %s; measuring without it\n", d.db_err.msg);
        d.db_broken = true;
    }
    if (d.target->calibrate)
        d.target->calibrate(&d.m, d.db_broken ? NULL : d.db, pr);
    lab_devices_report(&d);
    collect_configs(&d);
    list = xmalloc(sizeof(int) * (size_t)(d.n_sigs + 1));
    int nl = 0;
    for (int i = 0; i < d.n_sigs; i++)
        if (d.sigs[i].supported)
            list[nl++] = i;
    for (int i = 0; i < d.n_sigs; i++)
        update_best(&d.sigs[i]);
    rep->generated = nl;
    if (pr)
        fprintf(pr,
                "tune: %d of %d distinct kernels generated for %s, %d configs from the "
                "database %s\n",
                nl, d.n_sigs, d.target->name, rep->looked_up, d.db ? pdb_path(d.db) : "(none)");
    if (any_reduced(&d) && reduced_lookup(&d, bytes, size)) {
        leave_out_reduced(&d);
        rep->inexact_cached = true;
        if (pr)
            fprintf(pr,
                    "tune: configs of reduced exactness (%s) left out: a plan with %d of them "
                    "missed the end-to-end check (%.3gx its bound) in an earlier compile\n",
                    rep->inexact_what, rep->inexact_kernels, rep->inexact_err);
    }
    rep->t_tune += now_s() - t - (d.t_values - tv);
    k_at = xmalloc(sizeof(int) * (size_t)(d.n_sigs + 1));
    if ((rc = tune_and_solve(&d, &sel, list, k_at, e)))
        goto out;
plan_and_check:
    rep->predicted_s = sel.objective;
    rep->linear = rep->reduced = 0;
    for (int i = 0; i < sel.n; i++) {
        const Candidate *c = &d.cs->c[sel.kernels[i]];
        bool lin = false;
        for (int q = 0; q < c->n_prims && !lin; q++)
            lin = lab_linear_k(pg, pg->prims[c->prims[q]]) > 0;
        const Sig *s = &d.sigs[d.sig_of[sel.kernels[i]]];
        if (!lin)
            continue;
        rep->linear++;
        // Configs name their arithmetic: v=tf32 / v=f16 / v=bf16 (generated kernels), ct=tf32 /
        // ct=16f / ct=16bf (cuBLASLt).
        const char *desc = s->supported && s->best >= 0 ? s->cfg[s->best].desc : "";
        static const char *const reduced[] = {"v=tf32",  "v=f16",  "v=bf16",
                                              "ct=tf32", "ct=16f", "ct=16bf"};
        bool red = false;
        for (size_t r = 0; r < ORCH_COUNT(reduced) && !red; r++)
            red = strstr(desc, reduced[r]) != NULL;
        rep->reduced += red;
    }
    if (pr)
        fprintf(pr, "solve: %d kernels, predicted %.3f ms (%s, gap %.2f%%)\n", sel.n,
                sel.objective * 1e3, sel.optimal ? "optimal" : "time limit", sel.gap * 100);
    if (pr)
        report_multi_layer(&d, &sel, pr);
    if (pr)
        report_linear_choices(&d, &sel, pr);
    report_not_generated(&d, &sel, &fallbacks, pr);
    if (opt->strict && fallbacks.kernels > 0) {
        rep->refused = true;
        rep->kernels = sel.n;
        rc = strict_refusal(&d, &fallbacks, e);
        goto out;
    }

    t = now_s();
    tv = d.t_values;
    if ((rc = build_plan_and_module(&d, &sel, &plan, &so, &so_size, &src, e)))
        goto out;
    rep->kernels = sel.n;
    PlanStats ps;
    plan_stats(plan, &ps);
    rep->arena_bytes = ps.arena_bytes;
    rep->intermediate_bytes = ps.intermediate_bytes;
    if ((rc = plan_write(plan, &plan_bytes, &plan_size, e)))
        goto out;
    ArtifactHeader h = {0};
    snprintf(h.orch_version, sizeof h.orch_version, "%s", ORCH_VERSION);
    snprintf(h.target, sizeof h.target, "%s", d.target->name);
    snprintf(h.precision, sizeof h.precision, "%s", precision_name(d.prec));
    snprintf(h.fingerprint, sizeof h.fingerprint, "%s", d.m.hw.fingerprint);
    if ((rc = shapes_string(g, h.input_shapes, sizeof h.input_shapes, e)))
        goto out;
    if (d.wide_text)
        snprintf(h.wide_tensors, sizeof h.wide_tensors, "%s", d.wide_text);
    // Large initializers go into the weights section, which sessions map and use in place.
    uint8_t *split = NULL, *weights = NULL;
    size_t split_size = 0, weights_size = 0;
    if ((rc = artifact_split_model(bytes, size, onnx_path, &split, &split_size, &weights,
                                   &weights_size, e)))
        goto out;
    const uint8_t *model_bytes = split ? split : bytes;
    size_t model_size = split ? split_size : size;
    h.model_hash = artifact_model_hash(model_bytes, model_size, weights, weights_size);
    h.load_flags = (opt->attention_rewrite ? ARTIFACT_ATTENTION_REWRITE : 0) | storage_flag;
    h.compile_flags = (opt->no_mlp_chains ? ARTIFACT_COMPILE_NO_MLP_CHAINS : 0) |
                      (opt->no_attention ? ARTIFACT_COMPILE_NO_ATTENTION : 0) |
                      (opt->layout == COMPILE_LAYOUT_NCHW   ? ARTIFACT_COMPILE_LAYOUT_NCHW
                       : opt->layout == COMPILE_LAYOUT_NHWC ? ARTIFACT_COMPILE_LAYOUT_NHWC
                                                            : 0) |
                      (opt->strict ? ARTIFACT_COMPILE_STRICT : 0);
    h.threads = d.m.hw.cores; // what the kernels were measured with
    h.kernels = sel.n;
    h.predicted_seconds = sel.objective;
    ArtifactPlan *ap = xcalloc(1, sizeof *ap);
    snprintf(ap->input_shapes, sizeof ap->input_shapes, "%s", h.input_shapes);
    snprintf(ap->wide_tensors, sizeof ap->wide_tensors, "%s", h.wide_tensors);
    ap->load_flags = h.load_flags;
    ap->kernels = h.kernels;
    ap->predicted_seconds = h.predicted_seconds;
    ap->plan = plan_bytes;
    ap->plan_size = plan_size;
    ap->so = so;
    ap->so_size = so_size;
    ap->src = (const uint8_t *)src;
    ap->src_size = src ? strlen(src) : 0;
    rc = artifact_write_plans(out_path, &h, model_bytes, model_size, weights, weights_size, ap, 1,
                              e);
    free(ap);
    free(split);
    free(weights);
    if (rc)
        goto out;
    rep->t_build = now_s() - t;

    t = now_s();
    rc = end_to_end_check(&d, out_path, h.model_hash, h.input_shapes, h.load_flags, e);
    rep->t_check += now_s() - t - (d.t_values - tv); // need_values counted its own time
    char kinds[64];
    int n_inexact =
        rc == ST_MISMATCH && !d.exact_only ? reduced_kernels(&d, &sel, kinds, sizeof kinds) : 0;
    if (n_inexact > 0) {
        // Errors of reduced-exactness kernels compounding: the plan without them.
        remove(out_path);
        rep->inexact_kernels = n_inexact;
        rep->inexact_err = rep->max_err;
        snprintf(rep->inexact_what, sizeof rep->inexact_what, "%s", kinds);
        if (pr) { // the check's message without its advice: this is not a bug
            char why[sizeof e->msg];
            snprintf(why, sizeof why, "%s", e->msg);
            char *cut = strstr(why, " (a bug in orch");
            if (cut)
                *cut = '\0';
            fprintf(pr,
                    "check: the plan with %d kernels of reduced exactness (%s) missed the "
                    "end-to-end check (%s); solving again without them\n",
                    n_inexact, kinds, why);
        }
        *e = (Err){0};
        reduced_store(&d, bytes, size);
        leave_out_reduced(&d);
        plan_free(plan);
        plan = NULL;
        free(so);
        so = NULL;
        free(src);
        src = NULL;
        free(plan_bytes);
        plan_bytes = NULL;
        fallbacks_free(&fallbacks);
        rep->selection_digest = 0;
        rep->max_err = 0;
        rep->module_reused = false;
        if ((rc = tune_and_solve(&d, &sel, list, k_at, e)))
            goto out;
        goto plan_and_check;
    }
    if (rc)
        remove(out_path); // never leave an artefact that failed its check
out:
    rep->t_total = now_s() - t_start;
    if (rc)
        err_prefix(e, "orch compile %s: ", onnx_path);
    free(list);
    free(k_at);
    fallbacks_free(&fallbacks);
    d.target->lab_modules_free(d.mods, d.n_mods);
    free(d.mods);
    free(plan_bytes);
    plan_free(plan);
    free(so);
    free(src);
    selection_free(&sel);
    pdb_close(d.db);
    if (pg)
        prim_values_free(pg, d.values);
    free_inputs(pg, inputs);
    free(d.sigs);
    free(d.sig_of);
    free(d.wide_text);
    reference_free(pg, d.f32_outs);
    cand_set_free(d.cs);
    prim_graph_free(pg);
    graph_free(g);
    free(bytes);
    target_close(&d.m);
    return rc;
}

// ---- several shape sets ----

// Adds one set's counts and times to the sum in rep (and its line).
static void report_add(CompileReport *rep, const CompileReport *r, const char *shapes) {
    CompileSetReport *l = &rep->sets[rep->n_sets++];
    snprintf(l->shapes, sizeof l->shapes, "%s", shapes);
    l->kernels = r->kernels;
    l->interp = r->interp;
    l->predicted_s = r->predicted_s;
    l->not_generated_share = r->not_generated_share;
    l->arena_bytes = r->arena_bytes;
    l->selection_digest = r->selection_digest;
    rep->prims += r->prims;
    rep->candidates += r->candidates;
    rep->signatures += r->signatures;
    rep->generated += r->generated;
    rep->rejected += r->rejected;
    rep->measured += r->measured;
    rep->looked_up += r->looked_up;
    rep->wrong += r->wrong;
    rep->failed += r->failed;
    rep->unstable += r->unstable;
    rep->timed_once += r->timed_once;
    rep->resuspect += r->resuspect;
    rep->budget_skipped += r->budget_skipped;
    rep->budget_dropped += r->budget_dropped;
    rep->budget_s = r->budget_s;
    rep->t_import += r->t_import;
    rep->t_candidates += r->t_candidates;
    rep->t_tune += r->t_tune;
    rep->t_lab_build += r->t_lab_build;
    rep->t_lab_measure += r->t_lab_measure;
    rep->t_lab_check += r->t_lab_check;
    rep->t_lab_time += r->t_lab_time;
    rep->lab_split.build_wait_s += r->lab_split.build_wait_s;
    rep->lab_split.load_s += r->lab_split.load_s;
    rep->lab_split.capture_s += r->lab_split.capture_s;
    rep->lab_split.pending_s += r->lab_split.pending_s;
    rep->lab_split.upload_s += r->lab_split.upload_s;
    rep->lab_split.first_s += r->lab_split.first_s;
    rep->lab_split.verify_s += r->lab_split.verify_s;
    rep->lab_split.uploads += r->lab_split.uploads;
    rep->lab_split.reused += r->lab_split.reused;
    rep->lab_devices = r->lab_devices; // one machine, opened alike for every set
    for (int i = 0; i < r->lab_devices; i++) {
        rep->lab_device[i] = r->lab_device[i];
        rep->lab_device_measured[i] += r->lab_device_measured[i];
    }
    rep->t_solve += r->t_solve;
    rep->t_build += r->t_build;
    rep->module_reused = rep->module_reused || r->module_reused;
    rep->t_check += r->t_check;
    rep->max_err = ORCH_MAX(rep->max_err, r->max_err);
    if (r->inexact_kernels > 0) { // a set that left them out: the last one's outcome
        rep->inexact_kernels = r->inexact_kernels;
        rep->inexact_err = r->inexact_err;
        rep->inexact_cached = r->inexact_cached;
        snprintf(rep->inexact_what, sizeof rep->inexact_what, "%s", r->inexact_what);
    }
    rep->linear += r->linear;
    rep->reduced += r->reduced;
    // The plan's own figures: the last set's.
    rep->kernels = r->kernels;
    rep->interp = r->interp;
    rep->predicted_s = r->predicted_s;
    rep->not_generated_share = r->not_generated_share;
    memcpy(rep->not_generated_lines, r->not_generated_lines, sizeof rep->not_generated_lines);
    rep->refused = r->refused;
    rep->arena_bytes = r->arena_bytes;
    rep->intermediate_bytes = r->intermediate_bytes;
    rep->precision = r->precision;
    rep->tol = r->tol;
    rep->check_tol = r->check_tol;
    rep->tol_k = r->tol_k;
    rep->selection_digest = rep->selection_digest * 31 + r->selection_digest;
    rep->storage = r->storage;
    rep->retyped = r->retyped;
}

// Each shape set compiled (and checked end to end) on its own into a temporary artefact next to
// out_path, then the plans gathered into one artefact: the model's bytes once, a plan and shared
// object per set. The temporary artefacts are removed whatever happens.
static int compile_shape_sets(const char *onnx_path, const CompileOptions *opt,
                              const char *out_path, CompileReport *rep, Err *e) {
    memset(rep, 0, sizeof *rep);
    double t_start = now_s();
    int n = opt->n_shape_sets + (opt->input_shapes ? 1 : 0);
    if (n > ARTIFACT_MAX_PLANS)
        return err_set(e, ST_USAGE, "orch compile %s: %d shape sets; an artefact holds at most %d",
                       onnx_path, n, ARTIFACT_MAX_PLANS);
    const char **sets = xcalloc((size_t)n, sizeof *sets);
    int ns = 0;
    if (opt->input_shapes)
        sets[ns++] = opt->input_shapes;
    for (int k = 0; k < opt->n_shape_sets; k++)
        sets[ns++] = opt->shape_sets[k];
    int rc = ST_OK;
    for (int k = 0; k < n && rc == ST_OK; k++) {
        if (!sets[k] || !*sets[k])
            rc = err_set(e, ST_USAGE, "orch compile %s: shape set %d is empty", onnx_path, k + 1);
        for (int j = 0; j < k && rc == ST_OK; j++)
            if (strcmp(sets[j], sets[k]) == 0)
                rc = err_set(e, ST_USAGE,
                             "orch compile %s: shape sets %d and %d bind the same shapes (%s)",
                             onnx_path, j + 1, k + 1, sets[k]);
    }
    if (rc == ST_OK && out_path)
        rc = file_check_output(out_path, &onnx_path, 1, e);
    if (rc == ST_OK && !out_path)
        rc = err_set(e, ST_USAGE, "orch compile %s: no output file", onnx_path);
    if (rc) {
        free(sets);
        return rc;
    }
    char **tmp = xcalloc((size_t)n, sizeof *tmp);
    ArtifactContents *parts = xcalloc((size_t)n, sizeof *parts);
    FILE *pr = opt->progress;
    for (int k = 0; k < n && rc == ST_OK; k++) {
        size_t len = strlen(out_path) + 32;
        tmp[k] = xmalloc(len);
        snprintf(tmp[k], len, "%s.set%d.XXXXXX", out_path, k + 1);
        int fd = mkstemp(tmp[k]);
        if (fd < 0) {
            rc = err_set(e, ST_RUNTIME, "%s: cannot create a temporary file next to it: %s",
                         out_path, strerror(errno));
            free(tmp[k]);
            tmp[k] = NULL;
            break;
        }
        close(fd);
        if (pr)
            fprintf(pr, "shape set %d of %d: %s\n", k + 1, n, sets[k]);
        CompileOptions one = *opt;
        one.input_shapes = sets[k];
        one.shape_sets = NULL;
        one.n_shape_sets = 0;
        CompileReport *r = xcalloc(1, sizeof *r);
        rc = compile_model(onnx_path, &one, tmp[k], r, e);
        if (rc == ST_OK)
            rc = artifact_read(tmp[k], &parts[k], e);
        report_add(rep, r, rc == ST_OK ? parts[k].h.input_shapes : sets[k]);
        free(r);
        if (rc)
            err_prefix(e, "shape set %d of %d (--input-shapes %s): ", k + 1, n, sets[k]);
        for (int j = 0; j < k && rc == ST_OK; j++)
            if (strcmp(parts[j].h.input_shapes, parts[k].h.input_shapes) == 0)
                rc = err_set(e, ST_USAGE,
                             "orch compile %s: shape sets %d and %d bind the same shapes (%s)",
                             onnx_path, j + 1, k + 1, parts[k].h.input_shapes);
    }
    if (rc == ST_OK) {
        // Every part comes from one model, target and set of options: the shared header is the
        // first's (its per-plan fields are ignored by the writer).
        ArtifactPlan *plans = xcalloc((size_t)n, sizeof *plans);
        for (int k = 0; k < n; k++) {
            ORCH_ASSERT(parts[k].h.model_hash == parts[0].h.model_hash);
            plans[k] = parts[k].plans[0];
        }
        double t = now_s();
        rc = artifact_write_plans(out_path, &parts[0].h, parts[0].onnx, parts[0].onnx_size,
                                  parts[0].weights_section, parts[0].weights_section_size, plans,
                                  n, e);
        rep->t_build += now_s() - t;
        free(plans);
        if (rc == ST_OK && pr)
            fprintf(pr, "artefact: %d shape sets, the model's %.2f MiB once\n", n,
                    (double)(parts[0].onnx_size + parts[0].weights_section_size) / 1048576.0);
    }
    for (int k = 0; k < n; k++) {
        artifact_contents_free(&parts[k]);
        if (tmp[k])
            remove(tmp[k]);
        free(tmp[k]);
    }
    free(parts);
    free(tmp);
    free(sets);
    rep->t_total = now_s() - t_start;
    return rc;
}

bool compile_layout_parse(const char *s, CompileLayout *out) {
    static const char *const names[] = {"auto", "nchw", "nhwc"}; // CompileLayout's order
    for (int i = 0; s && i < (int)ORCH_COUNT(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (CompileLayout)i;
            return true;
        }
    return false;
}

void compile_report_print(const CompileReport *r, FILE *f) {
    if (r->n_sets > 0) {
        fprintf(f, "shape sets: %d, one plan each (orch info lists them)\n", r->n_sets);
        for (int k = 0; k < r->n_sets; k++) {
            const CompileSetReport *l = &r->sets[k];
            char tb[32];
            fmt_time(l->predicted_s, tb, sizeof tb);
            fprintf(f, "  %d: %s: %d launches", k + 1, l->shapes, l->kernels);
            if (l->interp)
                fprintf(f, ", %d not generated (%.1f%%)", l->interp, 100 * l->not_generated_share);
            fprintf(f, ", predicted %s, arena %.2f MiB, selection %016llx\n", tb,
                    (double)l->arena_bytes / 1048576.0, (unsigned long long)l->selection_digest);
        }
    }
    char tb[32];
    fmt_time(r->predicted_s, tb, sizeof tb);
    char digest[40] = ""; // a refused selection was never built
    if (!r->refused)
        snprintf(digest, sizeof digest, ", selection %016llx",
                 (unsigned long long)r->selection_digest);
    if (r->n_sets > 0) {
        if (r->interp > 0)
            fprintf(f, "not generated (shape set %d):\n", r->n_sets);
    } else if (r->interp == 0)
        fprintf(f, "kernels: %d launches, all generated, predicted %s%s\n", r->kernels, tb, digest);
    else
        fprintf(f,
                "kernels: %d launches, %d not generated (%.1f%% of the predicted time), "
                "predicted %s%s\n",
                r->kernels, r->interp, 100 * r->not_generated_share, tb, digest);
    // One line per op an interpreter runs: a model off the generated path is plain to see.
    if (r->interp > 0)
        fprintf(f, "not generated:\n%s", r->not_generated_lines);
    fprintf(f,
            "tuning: %d primitives, %d candidates, %d distinct; %d generated; %d configs "
            "measured, %d from the database, %d wrong, %d failed to build or crashed\n",
            r->prims, r->candidates, r->signatures, r->generated, r->measured, r->looked_up,
            r->wrong, r->failed);
    if (r->lab_devices > 0) {
        fprintf(f, "measured on %d GPU%s (", r->lab_devices, r->lab_devices == 1 ? "" : "s");
        for (int i = 0; i < r->lab_devices; i++)
            fprintf(f, "%sGPU %d: %d configs", i ? ", " : "", r->lab_device[i],
                    r->lab_device_measured[i]);
        fprintf(f, "): tune %.2f s; building kernels %.2f s and measuring %.2f s, side by side",
                r->t_tune, r->t_lab_build, r->t_lab_measure);
        if (r->t_lab_check + r->t_lab_time > 0)
            fprintf(f, " (devices checking %.2f s, timing %.2f s)", r->t_lab_check,
                    r->t_lab_time);
        fputc('\n', f);
        const LabSplit *cs = &r->lab_split;
        if (cs->uploads + cs->reused > 0)
            fprintf(f,
                    "devices: waiting for builds %.2f s, loading modules %.2f s; checks: marking "
                    "pending %.2f s, uploading %.2f s (%lld inputs; %lld more found on the "
                    "device), first runs %.2f s, downloading and comparing %.2f s, capturing "
                    "library calls %.2f s\n",
                    cs->build_wait_s, cs->load_s, cs->pending_s, cs->upload_s,
                    (long long)cs->uploads, (long long)cs->reused, cs->first_s, cs->verify_s,
                    cs->capture_s);
    } else if (r->t_lab_build + r->t_lab_measure > 0) {
        fprintf(f, "measured on the CPU: tune %.2f s, of which emitting and building kernels %.2f s, "
                   "checking and timing them %.2f s\n",
                r->t_tune, r->t_lab_build, r->t_lab_measure);
    }
    if (r->unstable) {
        fprintf(f,
                "warning: %d timing%s unstable: measured on a busy machine (kept as suspect, "
                "used at %s minimum, measured again by the next compile)",
                r->unstable, r->unstable == 1 ? "" : "s", r->unstable == 1 ? "its" : "their");
        if (r->timed_once)
            fprintf(f, "; %d of them timed once, not three times: the machine stayed busy",
                    r->timed_once);
        fprintf(f, "\n");
    }
    if (r->precision && strcmp(r->precision, "fp32") != 0)
        fprintf(f,
                "precision: %s (linear kernels: operands rounded to %s, float32 accumulation; "
                "%d of %d on tensor cores; checks at %.2g per kernel for K = %lld, %.2g end to "
                "end)\n",
                r->precision, r->precision, r->reduced, r->linear, r->tol, (long long)r->tol_k,
                r->check_tol);
    if (r->storage)
        fprintf(f, "storage: %s (%d tensors; the model's inputs and outputs stay float32)\n",
                r->storage, r->retyped);
    else
        fprintf(f, "precision: fp32 (exact float32 arithmetic)\n");
    if (r->inexact_kernels > 0 && r->inexact_cached)
        fprintf(f,
                "check: configs of reduced exactness (%s) left out: a plan with %d of them "
                "missed the end-to-end check (%.3gx its bound) in an earlier compile on this "
                "database\n",
                r->inexact_what, r->inexact_kernels, r->inexact_err);
    else if (r->inexact_kernels > 0)
        fprintf(f,
                "check: the plan with %d kernels of reduced exactness (%s) missed the end-to-end "
                "check (%.3gx its bound at the first element past it); solved again without "
                "them%s\n",
                r->inexact_kernels, r->inexact_what, r->inexact_err,
                r->refused || r->kernels == 0 ? "" : ", the plan above passed");
    if (!r->refused && r->n_sets == 0)
        fprintf(f, "memory: arena %.2f MiB for %.2f MiB of intermediates\n",
                (double)r->arena_bytes / 1048576.0, (double)r->intermediate_bytes / 1048576.0);
    if (r->budget_skipped)
        fprintf(f,
                "budget: tuning stopped at --budget %g s: %d kernel configs not measured, %d "
                "fused kernels left out of the plan for want of a first timing (a compile "
                "without --budget on this database reuses what was measured and measures the "
                "rest)\n",
                r->budget_s, r->budget_skipped, r->budget_dropped);
    fprintf(f,
            "time: %.2f s (import %.2f, candidates %.2f, tune %.2f, solve %.2f, build %.2f, "
            "check %.2f)\n",
            r->t_total, r->t_import, r->t_candidates, r->t_tune, r->t_solve, r->t_build,
            r->t_check);
}
