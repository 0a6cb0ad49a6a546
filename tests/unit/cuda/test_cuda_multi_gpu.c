// Tuning spread over the GPUs of one host (orch compile --gpus): a small transformer-like model
// compiled for CUDA with --gpus 1 and --gpus 2, each into a fresh profile database. Both compiles
// pass their end-to-end check against the primitive interpreter; the two-GPU compile's report
// names two GPUs and each measured configs; each database holds one row per config measured (no
// result lost between the workers' threads); every config both measured has the same verdict on
// both (a kernel GPU 1 checked agrees with GPU 0's check) and times close to each other; the plans
// predict about the same time; the tune stage's wall time of both is printed with its ratio, and
// the measuring time per config falls by more than 1.2x.
// Also, on any GPU machine: --gpus naming a GPU the machine lacks, or leaving out GPU 0, is a
// usage error, and by default the lab measures on GPU 0 first and on every GPU of its kind.
// Skips (a line saying why) without a GPU, and the two-GPU case without two GPUs of GPU 0's
// kind; without any GPU it fails under ORCH_REQUIRE_GPU=1, as every GPU test does.
#include "../gpu_check.h"
#include "../model_builder.h"

#include "backend/cuda/cuda_api.h"
#include "backend/kernel_lab.h"
#include "backend/target.h"
#include "compile/compile.h"
#include "db/profile_db.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[] = "/tmp/orch_multi_gpu_XXXXXX";
static char g_model[1200];

// y = sigmoid(softmax(LayerNorm(x + relu(x W1 + b1) W2)) W3): products of three shapes, a
// residual, a normalisation and a softmax, so the tuning has dozens of kernels and configs.
static void write_block(const char *path) {
    enum { M = 384, D = 256, H = 768, O = 192 };
    const int64_t xd[] = {M, D}, w1d[] = {D, H}, b1d[] = {H}, w2d[] = {H, D}, w3d[] = {D, O},
                  gd[] = {D};
    static float w1[D * H], b1[H], w2[H * D], w3[D * O], gamma[D], beta[D];
    for (int i = 0; i < D * H; i++) {
        w1[i] = (float)((i * 37) % 101 - 50) / 800.0f;
        w2[i] = (float)((i * 53) % 97 - 48) / 800.0f;
    }
    for (int i = 0; i < D * O; i++)
        w3[i] = (float)((i * 29) % 61 - 30) / 20.0f;
    for (int i = 0; i < H; i++)
        b1[i] = (float)(i % 7) / 20.0f;
    for (int i = 0; i < D; i++) {
        gamma[i] = 1.0f + (float)(i % 5) / 10.0f;
        beta[i] = (float)(i % 3) / 10.0f;
    }
    MB *b = mb_new(17);
    mb_init(b, mb_raw(b, "w1", 1, 2, w1d, w1, sizeof w1));
    mb_init(b, mb_raw(b, "b1", 1, 1, b1d, b1, sizeof b1));
    mb_init(b, mb_raw(b, "w2", 1, 2, w2d, w2, sizeof w2));
    mb_init(b, mb_raw(b, "w3", 1, 2, w3d, w3, sizeof w3));
    mb_init(b, mb_raw(b, "gamma", 1, 1, gd, gamma, sizeof gamma));
    mb_init(b, mb_raw(b, "beta", 1, 1, gd, beta, sizeof beta));
    mb_input(b, "x", 1, 2, xd);
    mb_node(b, "MatMul", "mm1", "x,w1", "h", NULL);
    mb_node(b, "Add", "bias1", "h,b1", "hb", NULL);
    mb_node(b, "Relu", "relu", "hb", "r", NULL);
    mb_node(b, "MatMul", "mm2", "r,w2", "f", NULL);
    mb_node(b, "Add", "residual", "x,f", "s", NULL);
    mb_node(b, "LayerNormalization", "ln", "s,gamma,beta", "n", mb_attr_i(b, "axis", -1), NULL);
    mb_node(b, "Softmax", "sm", "n", "p", mb_attr_i(b, "axis", -1), NULL);
    mb_node(b, "MatMul", "mm3", "p,w3", "z", NULL);
    mb_node(b, "Sigmoid", "sig", "z", "y", NULL);
    mb_output(b, "y");
    CHECK(mb_write(b, path));
}

// How many GPUs of GPU 0's kind the CUDA target measures on by default (its lab_devices slot),
// checked against the driver's count and each GPU's fingerprint.
static int identical_gpus(char *note, size_t n) {
    TargetMachine m;
    Err e = {0};
    if (target_open(&target_cuda, NULL, &m, &e) != ST_OK) {
        snprintf(note, n, "%s", e.msg);
        return 0;
    }
    int ordinals[LAB_MAX_DEVICES];
    int k = target_cuda.lab_devices(&m, ordinals, LAB_MAX_DEVICES, note, n);
    target_close(&m);
    const CudaApi *api = cuda_api_load(&e);
    int same = 0;
    CudaHw h0, h;
    HwInfo i0, i;
    if (cuda_hw_detect_device(0, &h0, NULL, &e) == ST_OK) {
        cuda_hw_info(&h0, &i0);
        for (int o = 0; api && o < api->device_count && same < LAB_MAX_DEVICES; o++) {
            Err de = {0};
            if (cuda_hw_detect_device(o, &h, NULL, &de) != ST_OK)
                continue;
            cuda_hw_info(&h, &i);
            same += strcmp(i.fingerprint, i0.fingerprint) == 0;
        }
    }
    CHECK_MSG(k >= 1 && ordinals[0] == 0, "%d GPUs, the first %d", k, k ? ordinals[0] : -1);
    CHECK_MSG(k == same, "the lab measures on %d GPUs, %d have GPU 0's fingerprint", k, same);
    return k;
}

// Compiles the model with --gpus gpus into TAG.orch and the fresh database TAG.db; the progress
// lines are printed and, where log is given, kept in it (malloc'd).
static int compile_gpus(const char *gpus, const char *tag, CompileReport *rep, char **log, Err *e) {
    char art[1300], db[1300];
    snprintf(art, sizeof art, "%s/%s.orch", g_dir, tag);
    snprintf(db, sizeof db, "%s/%s.db", g_dir, tag);
    FILE *f = tmpfile();
    CompileOptions co = {.target = "cuda",
                         .gpus = gpus,
                         .db_path = db,
                         .top_k = 4,
                         .seed = 11,
                         .progress = f ? f : stdout};
    memset(rep, 0, sizeof *rep);
    int rc = compile_model(g_model, &co, art, rep, e);
    char *text = NULL;
    if (f) {
        long n = ftell(f);
        text = xcalloc((size_t)(n > 0 ? n : 0) + 1, 1);
        rewind(f);
        if (n > 0 && fread(text, 1, (size_t)n, f) != (size_t)n)
            text[0] = '\0';
        fclose(f);
        printf("  --gpus %s:\n%s", gpus ? gpus : "(default)", text);
    }
    if (log)
        *log = text;
    else
        free(text);
    return rc;
}

// Every finished row of a database (config text with its signature as the key).
typedef struct Rows {
    int n, cap;
    PdbRow *r;
} Rows;

static int add_row(void *ctx, const PdbRow *r) {
    Rows *rs = ctx;
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 64;
        rs->r = realloc(rs->r, sizeof *rs->r * (size_t)rs->cap);
    }
    PdbRow *c = &rs->r[rs->n++];
    *c = *r;
    c->target = xstrdup(r->target);
    c->fingerprint = xstrdup(r->fingerprint);
    c->config = xstrdup(r->config);
    return 0;
}

static int read_rows(const char *tag, Rows *rs, Err *e) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s.db", g_dir, tag);
    ProfileDb *db = NULL;
    int rc = pdb_open(path, true, &db, e);
    if (rc == ST_OK)
        rc = pdb_each_row(db, add_row, NULL, rs, e);
    pdb_close(db);
    return rc;
}

static void rows_free(Rows *rs) {
    for (int i = 0; i < rs->n; i++)
        pdb_row_free(&rs->r[i]);
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

static const PdbRow *find_row(const Rows *rs, const PdbRow *k) {
    for (int i = 0; i < rs->n; i++)
        if (rs->r[i].signature == k->signature && strcmp(rs->r[i].config, k->config) == 0 &&
            strcmp(rs->r[i].target, k->target) == 0)
            return &rs->r[i];
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage_errors_on_any_gpu(void) {
    if (!gpu_check_have_device())
        return;
    Err e = {0};
    const CudaApi *api = cuda_api_load(&e);
    char list[32];
    snprintf(list, sizeof list, "0,%d", api->device_count);
    CompileReport rep;
    Err ce = {0};
    int rc = compile_gpus(list, "missing_gpu", &rep, NULL, &ce);
    CHECK_MSG(rc == ST_USAGE, "--gpus %s: rc %d: %s", list, rc, ce.msg);
    char want[64];
    snprintf(want, sizeof want, "names GPU %d", api->device_count);
    CHECK_MSG(strstr(ce.msg, want), "%s", ce.msg);
    char art[1300];
    snprintf(art, sizeof art, "%s/missing_gpu.orch", g_dir);
    CHECK_MSG(access(art, F_OK) != 0, "a refused compile left %s", art);
    Err ce2 = {0};
    CHECK(compile_gpus("1,2", "no_home", &rep, NULL, &ce2) == ST_USAGE);
    CHECK_MSG(strstr(ce2.msg, "leaves out GPU 0"), "%s", ce2.msg);
    char note[768] = "";
    int n = identical_gpus(note, sizeof note);
    printf("  the lab measures on %d GPU%s by default%s%s\n", n, n == 1 ? "" : "s",
           note[0] ? "; " : "", note);
}

static void two_gpus_tune_alike(void) {
    if (!gpu_check_have_device())
        return;
    char note[768] = "";
    int n = identical_gpus(note, sizeof note);
    if (n < 2) {
        printf("  skip: %d GPU of GPU 0's kind (two needed)%s%s\n", n, note[0] ? "; " : "", note);
        return;
    }
    printf("  %d GPUs of GPU 0's kind%s%s\n", n, note[0] ? "; " : "", note);
    CompileReport r1, r2;
    Err e1 = {0}, e2 = {0};
    char *log1 = NULL, *log2 = NULL;
    int rc1 = compile_gpus("1", "one", &r1, &log1, &e1);
    CHECK_MSG(rc1 == ST_OK, "--gpus 1: %s", e1.msg);
    int rc2 = compile_gpus("2", "two", &r2, &log2, &e2);
    CHECK_MSG(rc2 == ST_OK, "--gpus 2: %s", e2.msg);
    // The log says who measures, and the progress lines count each GPU's share.
    char want[96];
    snprintf(want, sizeof want, "tune: measuring on 2 GPUs (0, %d)", r2.lab_device[1]);
    CHECK_MSG(log1 && strstr(log1, "tune: measuring on 1 GPU (0)"), "--gpus 1's log");
    CHECK_MSG(log2 && strstr(log2, want) && strstr(log2, "(GPU 0: "), "--gpus 2's log: %s", want);
    free(log1);
    free(log2);
    if (rc1 || rc2)
        return;
    // Who measured: one GPU, then two, each a share.
    CHECK_MSG(r1.lab_devices == 1 && r1.lab_device[0] == 0, "--gpus 1: %d GPUs", r1.lab_devices);
    CHECK_MSG(r1.lab_device_measured[0] > 0 && r1.lab_device_measured[0] <= r1.measured,
              "--gpus 1: GPU 0 measured %d of %d", r1.lab_device_measured[0], r1.measured);
    CHECK_MSG(r2.lab_devices == 2 && r2.lab_device[0] == 0 && r2.lab_device[1] > 0,
              "--gpus 2: %d GPUs", r2.lab_devices);
    int share0 = r2.lab_device_measured[0], share1 = r2.lab_device_measured[1];
    CHECK_MSG(share0 > 0 && share1 > 0 && share0 + share1 <= r2.measured,
              "--gpus 2: GPU 0 measured %d, GPU %d %d, of %d", share0, r2.lab_device[1], share1,
              r2.measured);
    // Each database has a row for every config its compile measured (built or not).
    Rows a = {0}, b = {0};
    Err de = {0};
    CHECK_MSG(read_rows("one", &a, &de) == ST_OK && read_rows("two", &b, &de) == ST_OK, "%s",
              de.msg);
    CHECK_MSG(a.n == r1.measured, "--gpus 1: %d rows for %d configs measured", a.n, r1.measured);
    CHECK_MSG(b.n == r2.measured, "--gpus 2: %d rows for %d configs measured", b.n, r2.measured);
    // Every config both measured: one verdict, and times near each other (same kind of GPU).
    int both = 0, ok_both = 0;
    double *ratio = xcalloc((size_t)a.n + 1, sizeof(double));
    for (int i = 0; i < a.n; i++) {
        const PdbRow *x = &a.r[i], *y = find_row(&b, x);
        if (!y)
            continue;
        both++;
        CHECK_MSG(strcmp(x->fingerprint, y->fingerprint) == 0, "fingerprints '%s' vs '%s'",
                  x->fingerprint, y->fingerprint);
        CHECK_MSG(x->rec.status == y->rec.status, "%016llx %s: %s with one GPU, %s with two (%s)",
                  (unsigned long long)x->signature, x->config, pdb_status_name(x->rec.status),
                  pdb_status_name(y->rec.status), y->rec.note);
        if (x->rec.status == PDB_OK && y->rec.status == PDB_OK && x->rec.median_s > 0)
            ratio[ok_both++] = y->rec.median_s / x->rec.median_s;
    }
    CHECK_MSG(both >= r1.measured / 2, "only %d configs measured by both compiles of %d", both,
              r1.measured);
    if (ok_both > 0) {
        qsort(ratio, (size_t)ok_both, sizeof(double), cmp_double);
        double med = ratio[ok_both / 2];
        printf("  %d configs timed by both: two-GPU / one-GPU time, median %.3f, range %.3f .. "
               "%.3f\n",
               ok_both, med, ratio[0], ratio[ok_both - 1]);
        CHECK_MSG(med > 0.8 && med < 1.25, "median time ratio %.3f", med);
    }
    free(ratio);
    rows_free(&a);
    rows_free(&b);
    // The plans: both checked end to end by the compile; about the same predicted time.
    double pr = r2.predicted_s / r1.predicted_s;
    printf("  predicted %.1f us (one GPU) vs %.1f us (two), selections %016llx %s %016llx\n",
           1e6 * r1.predicted_s, 1e6 * r2.predicted_s, (unsigned long long)r1.selection_digest,
           r1.selection_digest == r2.selection_digest ? "==" : "!=",
           (unsigned long long)r2.selection_digest);
    CHECK_MSG(pr > 0.8 && pr < 1.25, "predicted times %.3g s vs %.3g s", r1.predicted_s,
              r2.predicted_s);
    CHECK(r1.t_tune > 0 && r2.t_tune > 0 && r1.t_lab_measure > 0 && r2.t_lab_measure > 0);
    printf("  tune stage: %.2f s on one GPU (%d configs), %.2f s on two (%d configs: %d + %d), "
           "%.2fx\n",
           r1.t_tune, r1.measured, r2.t_tune, r2.measured, share0, share1, r1.t_tune / r2.t_tune);
    printf("  of it building kernels %.2f s and %.2f s, measuring %.2f s and %.2f s\n",
           r1.t_lab_build, r2.t_lab_build, r1.t_lab_measure, r2.t_lab_measure);
    // Two GPUs measure side by side: the measuring time per config falls well below one GPU's.
    double per1 = r1.t_lab_measure / ORCH_MAX(r1.measured, 1);
    double per2 = r2.t_lab_measure / ORCH_MAX(r2.measured, 1);
    printf("  measuring per config: %.2f ms on one GPU, %.2f ms on two (%.2fx)\n", 1e3 * per1,
           1e3 * per2, per1 / per2);
    CHECK_MSG(per1 / per2 > 1.2, "two GPUs measure a config in %.2f ms, one in %.2f ms", 1e3 * per2,
              1e3 * per1);
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_model, sizeof g_model, "%s/block.onnx", g_dir);
    write_block(g_model);
    RUN(usage_errors_on_any_gpu);
    RUN(two_gpus_tune_alike);
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", g_dir);
    return CHECK_DONE();
}
