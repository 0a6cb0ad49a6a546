// The compiled artefact and the session made from it. A small model (Sub, ReduceMax, LpPool:
// a generated kernel, an interpreted primitive and an opaque node) is compiled here the way
// `orch compile` does: fission, candidates, selection, plan, and a hand-written C kernel for the
// Sub built by cbuild into a real shared object. Then: the round trip runs bit-identical to the
// primitive interpreter (two sessions at once, from file and from memory), and every damaged
// or foreign file is refused with its message: truncated at many offsets, each header byte
// flipped, each section corrupted, wrong magic, newer version, trailing bytes, empty file, a
// directory, a missing file, a foreign fingerprint, a plan that does not fit the model, a
// missing symbol, a shared object that is not one, forged plans with valid checksums. Older
// formats (1, 3, 4, 5: no kernel source) made from the current one still run; several plans (one
// per shape set) read back with the model once. A large file is mapped (the model section given
// back after import and read again from the file), and a session made from one with large
// weights never holds a weight it does not read.
#include "base/file.h"
#include "candidates/candidates.h"
#include "../check.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "orch.h"
#include "orchestrate/cost_model.h"
#include "orchestrate/orchestrate.h"
#include "plan/artifact.h"
#include "plan/plan.h"
#include "interp/prim_interp.h"
#include "runtime/session.h"
#include "backend/cpu/cbuild.h"
#include "backend/cpu/session_cpu.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;

static double rnd(void) { // uniform in [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0;
}

static int rnd_int(int n) {
    return (int)(rnd() * n);
}

static char dir[256];
static const char *FP =
    "cpu | Imaginary CPU 9000 | 2 cores | avx2 fma | L1d 48K L2 2M | gcc 12.2.0";
static const char *SHAPES = "x:1x2x4x8";

static char *path_in(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (n)
        fwrite(d, 1, n, f);
    fclose(f);
}

// ---- compiling the model ----

// x - w (the generated kernel), max over the last axis, 2x2 max pooling (opaque); d is an
// output and read by the other two.
static uint8_t *make_model(size_t *len, double weight_scale) {
    const int64_t xd[] = {1, 2, 4, 8}, k2[] = {2, 2}, axes[] = {3};
    MB *b = mb_new(13);
    mb_input(b, "x", 1, 4, xd);
    float w[64];
    for (int i = 0; i < 64; i++)
        w[i] = (float)((0.1 + rnd()) * weight_scale);
    mb_init(b, mb_raw(b, "w", 1, 4, xd, w, sizeof w));
    mb_node(b, "Sub", "sub", "x,w", "d", NULL);
    mb_node(b, "ReduceMax", "rmax", "d", "s", mb_attr_ints(b, "axes", 1, axes), NULL);
    mb_node(b, "LpPool", "pool", "d", "p", mb_attr_ints(b, "kernel_shape", 2, k2),
            mb_attr_ints(b, "strides", 2, k2), NULL);
    mb_output(b, "d");
    mb_output(b, "s");
    mb_output(b, "p");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

typedef struct Compiled {
    uint8_t *onnx, *plan, *so;
    size_t onnx_size, plan_size, so_size;
    // The model as orch compile stores it (format 7): split holds it with the weight 'w' in the
    // weights section (weights); write_compiled writes those unless weights is NULL (then the
    // whole model, and an empty weights section).
    uint8_t *split, *weights;
    size_t split_size, weights_size;
    char *src; // the kernel's source, kept in the artefact's source section (format 6)
    ArtifactHeader h;
    Graph *g;
    PrimGraph *pg;
    void *in;   // the random input x
    void **ref; // prim_interp_run's outputs
} Compiled;

static void compiled_free(Compiled *c) {
    free(c->onnx);
    free(c->split);
    free(c->weights);
    free(c->plan);
    free(c->so);
    free(c->src);
    for (int i = 0; c->pg && c->ref && i < c->pg->n_outputs; i++)
        free(c->ref[i]);
    free(c->ref);
    free(c->in);
    prim_graph_free(c->pg);
    graph_free(c->g);
    memset(c, 0, sizeof *c);
}

// Whether compile's kernel reads the weight in its own order (reversed), with a prepack entry
// point that reorders it once at load (target.h), as the GEMMs' packed weights.
static bool reversed_weight;

// What the compile driver does, with the Sub as the generated kernel `symbol` (whose object
// defines `defined`).
static int compile(Compiled *C, double weight_scale, const char *symbol, const char *defined) {
    memset(C, 0, sizeof *C);
    Err e = {0};
    C->onnx = make_model(&C->onnx_size, weight_scale);
    char spec[64];
    snprintf(spec, sizeof spec, "%s", SHAPES);
    InputShape shapes[4];
    LoadOptions lo = {.shapes = shapes};
    int rc = parse_input_shapes(spec, shapes, 4, &lo.n_shapes, &e);
    if (rc == ST_OK)
        rc = onnx_load_memory(C->onnx, C->onnx_size, "model.onnx", NULL, &lo, &C->g, &e);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(C->g, NULL, &e);
    FissionOptions fo = {0};
    if (rc == ST_OK)
        rc = fission_run(C->g, &fo, &C->pg, NULL, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(C->pg, NULL, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc)
        return rc;
    const PrimGraph *pg = C->pg;
    C->in = malloc(256);
    for (int i = 0; i < 64; i++)
        ((float *)C->in)[i] = (float)((0.1 + 0.9 * rnd()) * (rnd() < 0.5 ? -1 : 1));
    C->ref = calloc((size_t)pg->n_outputs + 1, sizeof(void *));
    const void *ins[1] = {C->in};
    CHECK((rc = prim_interp_run(pg, ins, C->ref, &e)) == ST_OK);
    CandidateSet *cs = NULL;
    CandRules rules = cand_rules_default();
    rules.max_prims = 1;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &rules, 0, &cs, &e);
    Selection sel;
    memset(&sel, 0, sizeof sel);
    if (rc == ST_OK) {
        cost_model_fill(cs, cost_model_find("cpu"));
        rc = orchestrate(cs, NULL, &sel, &e);
    }
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    PlanKernelSpec *spec_k = calloc((size_t)sel.n + 1, sizeof(PlanKernelSpec));
    char source[2048] = "";
    int n_gen = 0;
    for (int k = 0; rc == ST_OK && k < sel.n; k++) {
        const Candidate *c = &cs->c[sel.kernels[k]];
        const Prim *p = pg->prims[c->prims[0]];
        spec_k[k].kind = p->kind == PRIM_OPAQUE ? PLAN_OPAQUE : PLAN_INTERP;
        if (p->kind == PRIM_ELEMWISE && p->ew.n == 1 && p->ew.code[0].op == EW_SUB &&
            c->n_inputs == 2) {
            // in[] follows the candidate's ascending inputs: find which one is the minuend.
            int a = p->in[p->ew.code[0].arg[0].index] == c->inputs[0] ? 0 : 1;
            if (reversed_weight)
                snprintf(source, sizeof source,
                         "void %s(const void *const *in, void *out) {\n"
                         "    const float *a = in[%d], *b = in[%d];\n"
                         "    float *y = out;\n"
                         "    for (int i = 0; i < 64; i++)\n"
                         "        y[i] = (float)((double)a[i] - (double)b[63 - i]);\n"
                         "}\n"
                         "int %s_prepack(int i, const void *src, void *dst) {\n"
                         "    if (i != %d)\n"
                         "        return 0;\n"
                         "    if (src && dst)\n"
                         "        for (int k = 0; k < 64; k++)\n"
                         "            ((float *)dst)[k] = ((const float *)src)[63 - k];\n"
                         "    return 1;\n"
                         "}\n",
                         defined, a, 1 - a, defined, 1 - a);
            else
                snprintf(source, sizeof source,
                         "void %s(const void *const *in, void *out) {\n"
                         "    const float *a = in[%d], *b = in[%d];\n"
                         "    float *y = out;\n"
                         "    for (int i = 0; i < 64; i++)\n"
                         "        y[i] = (float)((double)a[i] - (double)b[i]);\n"
                         "}\n",
                         defined, a, 1 - a);
            spec_k[k] = (PlanKernelSpec){PLAN_GENERATED, symbol};
            n_gen++;
        }
    }
    CHECK_MSG(n_gen == 1, "%d generated kernels", n_gen);
    Plan *plan = NULL;
    if (rc == ST_OK)
        rc = plan_build(pg, cs, &sel, spec_k, &plan, &e);
    if (rc == ST_OK)
        rc = plan_write(plan, &C->plan, &C->plan_size, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    C->src = strdup(source);
    CModule *m = NULL;
    if (rc == ST_OK && (rc = cbuild_module(source, NULL, "artifact_test", &m, &e)) == ST_OK) {
        rc = file_read_all(cmodule_path(m), (int64_t)1 << 30, &C->so, &C->so_size, &e);
        cmodule_free(m);
    }
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    ArtifactHeader *h = &C->h;
    snprintf(h->orch_version, sizeof h->orch_version, "%s", ORCH_VERSION);
    snprintf(h->target, sizeof h->target, "cpu");
    snprintf(h->fingerprint, sizeof h->fingerprint, "%s", FP);
    snprintf(h->input_shapes, sizeof h->input_shapes, "%s", SHAPES);
    h->model_hash = artifact_hash(C->onnx, C->onnx_size);
    h->threads = 1;
    // The weights section, every initializer moved (the model's one weight is 256 bytes).
    uint8_t *payload = NULL;
    size_t payload_size = 0;
    OnnxWeightRef *refs = NULL;
    int n_refs = 0;
    if (rc == ST_OK)
        rc = onnx_split_weights(C->onnx, C->onnx_size, "model.onnx", 1, &C->split,
                                &C->split_size, &payload, &payload_size, &refs, &n_refs, &e);
    CHECK_MSG(rc == ST_OK && n_refs == 1 && strcmp(refs[0].name, "w") == 0 &&
                  refs[0].offset == 0 && refs[0].length == 256 && payload_size == 256,
              "%s", e.msg);
    if (rc == ST_OK)
        CHECK(artifact_weights_section(payload, payload_size, refs, n_refs, &C->weights,
                                       &C->weights_size) == ST_OK);
    free(payload);
    onnx_weight_refs_free(refs, n_refs);
    h->kernels = plan ? plan->n_kernels : 0;
    h->predicted_seconds = sel.objective;
    plan_free(plan);
    free(spec_k);
    selection_free(&sel);
    cand_set_free(cs);
    return rc;
}

// C as orch compile writes it: one plan with its shared object and source.
static int write_compiled(const Compiled *C, const char *path) {
    Err e = {0};
    ArtifactPlan *p = calloc(1, sizeof *p);
    snprintf(p->input_shapes, sizeof p->input_shapes, "%s", C->h.input_shapes);
    snprintf(p->wide_tensors, sizeof p->wide_tensors, "%s", C->h.wide_tensors);
    p->load_flags = C->h.load_flags;
    p->kernels = C->h.kernels;
    p->predicted_seconds = C->h.predicted_seconds;
    p->plan = C->plan;
    p->plan_size = C->plan_size;
    p->so = C->so;
    p->so_size = C->so_size;
    p->src = (const uint8_t *)C->src;
    p->src_size = C->src ? strlen(C->src) : 0;
    ArtifactHeader h = C->h;
    const uint8_t *onnx = C->weights ? C->split : C->onnx;
    size_t onnx_size = C->weights ? C->split_size : C->onnx_size;
    size_t weights_size = C->weights ? C->weights_size : 0;
    h.model_hash = artifact_model_hash(onnx, onnx_size, C->weights, weights_size);
    int rc = artifact_write_plans(path, &h, onnx, onnx_size, C->weights, weights_size, p, 1, &e);
    free(p);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    return rc;
}

static HwInfo this_machine(const char *fp) {
    HwInfo hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.target, sizeof hw.target, "cpu");
    snprintf(hw.fingerprint, sizeof hw.fingerprint, "%s", fp);
    return hw;
}

// Runs s on C's input and compares with prim_interp_run bit for bit.
static void run_compare(Session *s, const Compiled *C) {
    const PrimGraph *pg = session_graph(s);
    CHECK(pg->n_inputs == 1 && pg->n_outputs == C->pg->n_outputs);
    void *outs[8];
    for (int i = 0; i < pg->n_outputs; i++) {
        outs[i] = aligned_alloc(64, 256);
        memset(outs[i], 0xff, 256);
    }
    const void *ins[1] = {C->in};
    Err e = {0};
    int rc = session_run(s, ins, outs, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    for (int i = 0; rc == ST_OK && i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        CHECK_MSG(memcmp(outs[i], C->ref[i], tensor_nbytes(t)) == 0, "output '%s' differs",
                  t->name);
    }
    for (int i = 0; i < pg->n_outputs; i++)
        free(outs[i]);
}

// Reads path and makes a session; returns the status and leaves the message in e.
static int open_session(const char *path, const HwInfo *hw, const SessionOptions *opt, Session **s,
                        Err *e) {
    ArtifactContents a;
    *s = NULL;
    int rc = artifact_read(path, &a, e);
    if (rc == ST_OK)
        rc = session_create(&a, hw, opt, s, e);
    artifact_contents_free(&a);
    return rc;
}

static Compiled C; // the model every case uses
static uint8_t *file;
static size_t file_size;
static uint32_t header_bytes;

// ---- cases ----

static void round_trip(void) {
    const char *path = path_in("model.orch");
    if (write_compiled(&C, path))
        return;
    // Atomic write: nothing but the file is left in the folder.
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        entries += de->d_name[0] != '.';
    closedir(d);
    CHECK(entries == 1);
    Err e = {0};
    CHECK(file_read_all(path, 1 << 30, &file, &file_size, &e) == ST_OK);
    header_bytes = file_size >= 16 ? (uint32_t)file[12] | (uint32_t)file[13] << 8 |
                                         (uint32_t)file[14] << 16 | (uint32_t)file[15] << 24
                                   : 0;
    ArtifactContents a;
    int rc = artifact_read(path, &a, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc)
        return;
    CHECK(a.h.format_version == ARTIFACT_FORMAT_VERSION);
    CHECK(strcmp(a.h.orch_version, ORCH_VERSION) == 0 && strcmp(a.h.target, "cpu") == 0);
    CHECK(strcmp(a.h.precision, "fp32") == 0); // the header left it empty: fp32
    CHECK(strcmp(a.h.fingerprint, FP) == 0 && strcmp(a.h.input_shapes, SHAPES) == 0);
    CHECK(a.h.model_hash == artifact_model_hash(C.split, C.split_size, C.weights, C.weights_size));
    CHECK(a.h.threads == 1 && a.h.kernels == C.h.kernels);
    CHECK(a.h.predicted_seconds == C.h.predicted_seconds && a.h.load_flags == 0);
    CHECK(a.onnx_size == C.split_size && memcmp(a.onnx, C.split, C.split_size) == 0);
    // The weights section: as written, page-aligned in the file, its payload (the weight's
    // bytes) page-aligned too.
    CHECK(a.weights_section_size == C.weights_size &&
          memcmp(a.weights_section, C.weights, C.weights_size) == 0);
    CHECK((uintptr_t)(a.weights_section - a.data) % 4096 == 0 &&
          (uintptr_t)(a.weights - a.data) % 4096 == 0 && a.weights_size == 256);
    CHECK(a.plan_size == C.plan_size && memcmp(a.plan, C.plan, C.plan_size) == 0);
    CHECK(a.so_size == C.so_size && memcmp(a.so, C.so, C.so_size) == 0);
    CHECK(a.src_size == strlen(C.src) && memcmp(a.src, C.src, a.src_size) == 0);
    CHECK(a.plans[0].src == a.src && a.plans[0].src_size == a.src_size);
    CHECK((uintptr_t)(a.onnx - a.data) % 64 == 0 && (uintptr_t)(a.so - a.data) % 64 == 0 &&
          (uintptr_t)(a.src - a.data) % 64 == 0);
    HwInfo hw = this_machine(FP);
    Session *s1 = NULL, *s2 = NULL, *s3 = NULL;
    SessionOptions opt = {.threads = 2};
    rc = session_create(&a, &hw, &opt, &s1, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    artifact_contents_free(&a);
    artifact_contents_free(&a); // twice: zeroed, harmless
    if (rc)
        return;
    CHECK(session_threads(s1) == 2);
    run_compare(s1, &C);
    // Per-kernel table: names and nodes.
    bool gen = false, opq = false;
    for (int k = 0; k < session_num_launches(s1); k++) {
        gen = gen || strcmp(session_launch_name(s1, k), "orch_k0") == 0;
        opq = opq || strcmp(session_launch_name(s1, k), "opaque:LpPool") == 0;
        if (strcmp(session_launch_name(s1, k), "orch_k0") == 0)
            CHECK(strcmp(session_launch_nodes(s1, k), "sub") == 0);
    }
    CHECK(gen && opq);
    session_set_profiling(s1, 1);
    run_compare(s1, &C);
    CHECK(session_kernel_times(s1) != NULL);
    // Two sessions of the same artefact at once (from memory too), one freed, another made.
    e = (Err){0};
    CHECK(artifact_read_memory(file, file_size, "mem.orch", &a, &e) == ST_OK);
    CHECK_MSG(session_create(&a, &hw, NULL, &s2, &e) == ST_OK, "%s", e.msg);
    session_free(s1);
    CHECK_MSG(session_create(&a, &hw, NULL, &s3, &e) == ST_OK, "%s", e.msg);
    artifact_contents_free(&a);
    if (s2 && s3) {
        run_compare(s2, &C);
        run_compare(s3, &C);
        CHECK(session_threads(s2) == 1); // the artefact's
    }
    session_free(s2);
    session_free(s3);
    session_free(NULL);
    // Overwriting an existing artefact is atomic too.
    CHECK(write_compiled(&C, path) == ST_OK);
}

// A large artefact is mapped, not read: a session made from the mapping runs as one made from
// memory, and once the model section's pages are given back (artifact_release_model, as every
// session does after its import) they read the file's bytes again, so a second session (the next
// plan of a several-shape artefact imports the model again) is made and runs too.
static void mapped_file(void) {
    const char *path = path_in("mapped.orch");
    if (write_compiled(&C, path))
        return;
    artifact_set_map_threshold(1);
    ArtifactContents a;
    Err e = {0};
    int rc = artifact_read(path, &a, &e);
    artifact_set_map_threshold(0);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc)
        return;
    CHECK(a.mapped);
    HwInfo hw = this_machine(FP);
    Session *s1 = NULL, *s2 = NULL;
    CHECK_MSG(session_create(&a, &hw, NULL, &s1, &e) == ST_OK, "%s", e.msg);
    artifact_release_model(&a);
    CHECK(a.onnx_size == C.split_size && memcmp(a.onnx, C.split, C.split_size) == 0);
    CHECK_MSG(session_create(&a, &hw, NULL, &s2, &e) == ST_OK, "%s", e.msg);
    // The weight is read in place from the mapping; the blob holds no copy of it.
    CpuSession *cs = NULL;
    CHECK_MSG(cpu_session_create(&a, &hw, NULL, &cs, &e) == ST_OK, "%s", e.msg);
    if (cs)
        CHECK_MSG(cpu_session_in_place_bytes(cs) == 256 && cpu_session_blob_bytes(cs) < 256,
                  "in place %lld, blob %lld", (long long)cpu_session_in_place_bytes(cs),
                  (long long)cpu_session_blob_bytes(cs));
    // The sessions keep the mapping: they run after the contents are freed.
    artifact_contents_free(&a);
    if (s1 && s2) {
        run_compare(s1, &C);
        run_compare(s2, &C);
    }
    session_free(s1);
    session_free(s2);
    cpu_session_free(cs);
    // The default threshold reads this small file into memory, as before.
    CHECK(artifact_read(path, &a, &e) == ST_OK && !a.mapped);
    artifact_contents_free(&a);
    // A model section of many pages (random bytes: reading does not parse it) given back and
    // read again: the same bytes, from the file.
    size_t big = ((size_t)3 << 20) + 12345;
    uint8_t *onnx = xmalloc(big);
    for (size_t i = 0; i < big; i++)
        onnx[i] = (uint8_t)rnd_int(256);
    ArtifactHeader h = C.h;
    h.model_hash = artifact_hash(onnx, big);
    rc = artifact_write(path, &h, onnx, big, C.plan, C.plan_size, C.so, C.so_size, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK && (rc = artifact_read(path, &a, &e)) == ST_OK) {
        CHECK(a.mapped && a.onnx_size == big && memcmp(a.onnx, onnx, big) == 0);
        artifact_release_model(&a);
        CHECK(memcmp(a.onnx, onnx, big) == 0);
        artifact_contents_free(&a);
    }
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    free(onnx);
    unlink(path);
}

static void expect_read_error(const char *path, const char *want, const char *what) {
    ArtifactContents a;
    Err e = {0};
    int rc = artifact_read(path, &a, &e);
    CHECK_MSG(rc == ST_INVALID, "%s: accepted", what);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, want), "%s: '%s' not in: %s", what, want, e.msg);
    CHECK(a.data == NULL && a.path == NULL);
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

// The float32 tensors field (format 3): written and read back under fp16 storage; beside no
// storage flag it cannot be right, and the file is refused as corrupted.
static void wide_field(void) {
    Compiled D = C;
    const char *path = path_in("wide.orch");
    snprintf(D.h.wide_tensors, sizeof D.h.wide_tensors, "3,5-7");
    D.h.load_flags = ARTIFACT_STORE_F16;
    if (write_compiled(&D, path))
        return;
    ArtifactContents a;
    Err e = {0};
    int rc = artifact_read(path, &a, &e);
    CHECK_MSG(rc == ST_OK && strcmp(a.h.wide_tensors, "3,5-7") == 0 &&
                  a.h.load_flags == ARTIFACT_STORE_F16,
              "%s", e.msg);
    artifact_contents_free(&a);
    D.h.load_flags = 0;
    if (write_compiled(&D, path))
        return;
    expect_read_error(path, "corrupted", "float32 tensors without half storage");
}

// A file of an older format made from f (this format's): the header's byte ranges cut[i] (offset,
// length; ascending) taken out, the version set, the sections moved to the shorter header's next
// 64-byte boundary, the header's size, table and checksum updated. Malloc'd; *n_out its size.
static uint8_t *older_format(const uint8_t *f, size_t n, uint32_t version, const size_t (*cut)[2],
                             int n_cut, size_t *n_out) {
    uint32_t hb = le32(f + 12), removed = 0;
    for (int i = 0; i < n_cut; i++)
        removed += (uint32_t)cut[i][1];
    uint32_t hb1 = hb - removed;
    // Sections start 64-byte aligned after the header; table entries: kind, offset, size, sum.
    const uint8_t *tab = f + hb - 8 - 84;
    uint64_t off0 = (uint64_t)le32(tab + 4) | (uint64_t)le32(tab + 8) << 32;
    uint64_t off1 = (uint64_t)(hb1 + 63) / 64 * 64, delta = off0 - off1;
    size_t n1 = n - (size_t)delta;
    uint8_t *f1 = calloc(1, n1);
    size_t from = 0, to = 0;
    for (int i = 0; i <= n_cut; i++) {
        size_t until = i < n_cut ? cut[i][0] : hb - 8;
        memcpy(f1 + to, f + from, until - from);
        to += until - from;
        from = i < n_cut ? cut[i][0] + cut[i][1] : until;
    }
    put_le32(f1 + 8, version);
    put_le32(f1 + 12, hb1);
    uint8_t *tab1 = f1 + hb1 - 8 - 84;
    for (int sct = 0; sct < 3; sct++) {
        uint8_t *ent = tab1 + sct * 28;
        uint64_t o = (uint64_t)le32(ent + 4) | (uint64_t)le32(ent + 8) << 32;
        put_le64(ent + 4, o - delta);
    }
    put_le64(f1 + hb1 - 8, artifact_hash(f1, hb1 - 8));
    memcpy(f1 + off1, f + off0, n - (size_t)off0);
    *n_out = n1;
    return f1;
}

static uint64_t le64(const uint8_t *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

// The format 6 file of a one-plan file of this format (7) whose weights section is empty: that
// section's entry (the second) left out of the table, the sections moved to the shorter header's
// next 64-byte boundary. Malloc'd; *n_out its size.
static uint8_t *format6_of(const uint8_t *f, size_t n, size_t *n_out) {
    uint32_t hb = le32(f + 12), hb6 = hb - 28;
    size_t table = hb - 8 - 5 * 28;
    CHECK(le32(f + 8) == 7 && le32(f + table - 4) == 5 && le32(f + table + 28) == 5 &&
          le64(f + table + 28 + 12) == 0);
    uint64_t off0 = le64(f + table + 4), off6 = (hb6 + 63) / 64 * 64, delta = off0 - off6;
    size_t n6 = n - (size_t)delta;
    uint8_t *f6 = calloc(1, n6);
    memcpy(f6, f, table + 28);                          // through the ONNX entry
    memcpy(f6 + table + 28, f + table + 56, 3 * 28); // the plan's entries
    put_le32(f6 + 8, 6);
    put_le32(f6 + 12, hb6);
    put_le32(f6 + table - 4, 4);
    for (int sct = 0; sct < 4; sct++)
        put_le64(f6 + table + sct * 28 + 4, le64(f6 + table + sct * 28 + 4) - delta);
    put_le64(f6 + hb6 - 8, artifact_hash(f6, hb6 - 8));
    memcpy(f6 + off6, f + off0, n - (size_t)off0);
    *n_out = n6;
    return f6;
}

// The format 5 file of a one-plan file of format 6: the source section, the last, left
// out of the table and the file, the other sections moved to the shorter header's next 64-byte
// boundary. Malloc'd; *n_out its size.
static uint8_t *format5_of(const uint8_t *f, size_t n, size_t *n_out) {
    uint32_t hb = le32(f + 12), hb5 = hb - 28;
    size_t table = hb - 8 - 4 * 28;
    CHECK(le32(f + 8) == 6 && le32(f + table - 4) == 4 && le32(f + table + 3 * 28) == 4);
    uint64_t off0 = le64(f + table + 4), off5 = (hb5 + 63) / 64 * 64, delta = off0 - off5;
    uint64_t so_end = le64(f + table + 2 * 28 + 4) + le64(f + table + 2 * 28 + 12);
    size_t n5 = (size_t)(so_end - delta);
    uint8_t *f5 = calloc(1, n5);
    memcpy(f5, f, table + 3 * 28);
    put_le32(f5 + 8, 5);
    put_le32(f5 + 12, hb5);
    put_le32(f5 + table - 4, 3);
    for (int sct = 0; sct < 3; sct++)
        put_le64(f5 + table + sct * 28 + 4, le64(f + table + sct * 28 + 4) - delta);
    put_le64(f5 + hb5 - 8, artifact_hash(f5, hb5 - 8));
    memcpy(f5 + off5, f + off0, (size_t)(so_end - off0));
    CHECK(n <= n5 + delta + 64 + strlen(C.src)); // only the source and its padding left out
    *n_out = n5;
    return f5;
}

// The format 4 file of a one-plan file of format 5: the same fields and sections, in format
// 4's order (input shapes and float32 tensors after the fingerprint; load flags, compile flags,
// threads, kernels, predicted time after the model hash; no plan count). Malloc'd.
static uint8_t *format4_of(const uint8_t *f, size_t n, size_t *n_out) {
    uint32_t hb = le32(f + 12);
    size_t at = 16, str[6][2]; // orch version, target, precision, fingerprint, shapes, wide
    for (int i = 0; i < 4; i++) {
        str[i][0] = at;
        str[i][1] = 4 + le32(f + at);
        at += str[i][1];
    }
    size_t hash = at, cflags = at + 8, threads = at + 12, plans = at + 16;
    CHECK(le32(f + plans) == 1);
    at = plans + 4;
    for (int i = 4; i < 6; i++) {
        str[i][0] = at;
        str[i][1] = 4 + le32(f + at);
        at += str[i][1];
    }
    size_t lflags = at, kernels = at + 4, pred = at + 8, nsec = at + 16, table = at + 20;
    uint8_t *h = calloc(1, hb + 64);
    size_t o = 0;
    memcpy(h, f, 16);
    o = 16;
    for (int i = 0; i < 6; i++) {
        memcpy(h + o, f + str[i][0], str[i][1]);
        o += str[i][1];
    }
    const size_t fixed[][2] = {{hash, 8},    {lflags, 4}, {cflags, 4}, {threads, 4},
                               {kernels, 4}, {pred, 8},   {nsec, 4},   {table, 84}};
    for (size_t i = 0; i < ORCH_COUNT(fixed); i++) {
        memcpy(h + o, f + fixed[i][0], fixed[i][1]);
        o += fixed[i][1];
    }
    uint32_t hb4 = (uint32_t)o + 8;
    uint8_t *tab = h + o - 84;
    uint64_t off0 = (uint64_t)le32(f + table + 4) | (uint64_t)le32(f + table + 8) << 32;
    uint64_t off1 = (uint64_t)(hb4 + 63) / 64 * 64, delta = off0 - off1;
    for (int sct = 0; sct < 3; sct++) {
        uint8_t *ent = tab + sct * 28;
        uint64_t off = (uint64_t)le32(ent + 4) | (uint64_t)le32(ent + 8) << 32;
        put_le64(ent + 4, off - delta);
    }
    put_le32(h + 8, 4);
    put_le32(h + 12, hb4);
    put_le64(h + o, artifact_hash(h, o));
    size_t n4 = n - (size_t)delta;
    uint8_t *f4 = calloc(1, n4);
    memcpy(f4, h, hb4);
    memcpy(f4 + off1, f + off0, n - (size_t)off0);
    free(h);
    *n_out = n4;
    return f4;
}

// Where the header's fields start in a format 4 file (fp32, no float32 tensors).
typedef struct Fields {
    size_t precision, wide, load_flags, compile_flags;
} Fields;

static Fields fields_of(const uint8_t *f) {
    Fields x;
    size_t at = 16;
    at += 4 + le32(f + at); // orch version
    at += 4 + le32(f + at); // target
    x.precision = at;
    at += 4 + le32(f + at);
    at += 4 + le32(f + at); // fingerprint
    at += 4 + le32(f + at); // input shapes
    x.wide = at;
    at += 4 + le32(f + at);
    x.load_flags = at + 8; // after the model hash
    x.compile_flags = x.load_flags + 4;
    return x;
}

// An older file runs as it did: the session from it computes what the compiled model does.
static void older_file_runs(const char *path, uint32_t version) {
    ArtifactContents a;
    Err e = {0};
    int rc = artifact_read(path, &a, &e);
    CHECK_MSG(rc == ST_OK, "format %u: %s", version, e.msg);
    if (rc != ST_OK)
        return;
    CHECK(a.h.format_version == version && strcmp(a.h.precision, "fp32") == 0);
    CHECK(a.h.compile_flags == 0 && a.h.load_flags == 0);
    CHECK(strcmp(a.h.target, "cpu") == 0 && strcmp(a.h.fingerprint, FP) == 0);
    CHECK(a.plan_size == C.plan_size && memcmp(a.plan, C.plan, C.plan_size) == 0);
    CHECK(a.n_plans == 1 && a.plans[0].src_size == a.src_size);
    CHECK(version >= 6 ? a.src_size == strlen(C.src) : a.src_size == 0); // source from format 6
    CHECK(a.weights_section_size == 0 && a.weights == NULL); // weights section: format 7
    HwInfo hw = this_machine(FP);
    Session *s = NULL;
    SessionOptions opt = {.threads = 1};
    rc = session_create(&a, &hw, &opt, &s, &e);
    CHECK_MSG(rc == ST_OK, "format %u session: %s", version, e.msg);
    if (rc == ST_OK)
        run_compare(s, &C);
    session_free(s);
    artifact_contents_free(&a);
}

// The precision header field (format 2): written and read back; a format 1 file (no field, as
// orch wrote before precisions existed) still reads, as fp32; an unknown precision is refused.
static void precision_field(void) {
    Compiled D = C;
    const char *path = path_in("prec.orch");
    static const char *const precs[] = {"fp32", "tf32", "fp16", "bf16"};
    for (size_t i = 0; i < ORCH_COUNT(precs); i++) {
        snprintf(D.h.precision, sizeof D.h.precision, "%s", precs[i]);
        if (write_compiled(&D, path))
            return;
        ArtifactContents a;
        Err e = {0};
        int rc = artifact_read(path, &a, &e);
        CHECK_MSG(rc == ST_OK && strcmp(a.h.precision, precs[i]) == 0, "%s: %s / '%s'", precs[i],
                  e.msg, rc ? "" : a.h.precision);
        artifact_contents_free(&a);
    }
    // A format 1 file made from the current one of fp32: the precision string (after the
    // target), the empty float32 tensors string (after the input shapes, format 3) and the
    // compile flags (after the load flags, format 4) taken out.
    snprintf(D.h.precision, sizeof D.h.precision, "fp32");
    D.weights = NULL; // the whole model: older formats have no weights section
    if (write_compiled(&D, path))
        return;
    uint8_t *f5 = NULL, *f2 = NULL;
    size_t n5 = 0, n2 = 0;
    Err e = {0};
    if (file_read_all(path, 1 << 30, &f5, &n5, &e) != ST_OK) {
        CHECK_MSG(false, "%s", e.msg);
        return;
    }
    uint8_t *f7 = f5, *f6 = format6_of(f7, n5, &n5);
    free(f7);
    // Format 6 (no weights section) still runs.
    write_bytes(path_in("format6.orch"), f6, n5);
    older_file_runs(path_in("format6.orch"), 6);
    f5 = format5_of(f6, n5, &n5);
    free(f6);
    // Format 5 (no source section) still runs.
    write_bytes(path_in("format5.orch"), f5, n5);
    older_file_runs(path_in("format5.orch"), 5);
    f2 = format4_of(f5, n5, &n2);
    free(f5);
    write_bytes(path_in("format4.orch"), f2, n2);
    older_file_runs(path_in("format4.orch"), 4);
    uint32_t hb = le32(f2 + 12);
    Fields x = fields_of(f2);
    CHECK(le32(f2 + x.precision) == 4 && memcmp(f2 + x.precision + 4, "fp32", 4) == 0);
    CHECK(le32(f2 + x.wide) == 0); // no float32 tensors
    const size_t cut[][2] = {{x.precision, 8}, {x.wide, 4}, {x.compile_flags, 4}};
    size_t n1;
    uint8_t *f1 = older_format(f2, n2, 1, cut, 3, &n1);
    const char *old = path_in("format1.orch");
    write_bytes(old, f1, n1);
    older_file_runs(old, 1);
    // An unknown precision (same length as fp32, checksum recomputed): refused by name.
    memcpy(f2 + x.precision + 4, "fp64", 4);
    put_le64(f2 + hb - 8, artifact_hash(f2, hb - 8));
    write_bytes(path, f2, n2);
    expect_read_error(path, "precision 'fp64'", "an unknown precision");
    free(f1);
    free(f2);
}

// The compile flags (format 4): written and read back, named by artifact_compile_flags_text;
// a format 3 file (no field) still reads, with none; flags orch compile cannot write (an unknown
// bit, two layouts, a layout without half storage, nchw beside channels-last layouts) are refused
// as corrupted.
static void compile_flags_field(void) {
    Compiled D = C;
    const char *path = path_in("cflags.orch");
    static const struct {
        uint32_t load, compile;
        const char *text;
    } ok[] = {
        {0, 0, ""},
        {0, ARTIFACT_COMPILE_NO_MLP_CHAINS, "--no-mlp-chains"},
        {0, ARTIFACT_COMPILE_NO_ATTENTION, "--no-attention"},
        {ARTIFACT_ATTENTION_REWRITE, ARTIFACT_COMPILE_NO_MLP_CHAINS | ARTIFACT_COMPILE_NO_ATTENTION,
         "--no-mlp-chains --no-attention"},
        {ARTIFACT_STORE_F16, ARTIFACT_COMPILE_LAYOUT_NCHW, "--layout nchw"},
        {ARTIFACT_STORE_BF16 | ARTIFACT_LAYOUT_NHWC,
         ARTIFACT_COMPILE_LAYOUT_NHWC | ARTIFACT_COMPILE_NO_ATTENTION,
         "--no-attention --layout nhwc"},
        {ARTIFACT_STORE_F16, ARTIFACT_COMPILE_LAYOUT_NHWC, "--layout nhwc"},
        {0, ARTIFACT_COMPILE_STRICT | ARTIFACT_COMPILE_NO_ATTENTION, "--no-attention --strict"},
    };
    for (size_t i = 0; i < ORCH_COUNT(ok); i++) {
        char text[160];
        artifact_compile_flags_text(ok[i].compile, text, sizeof text);
        CHECK_MSG(strcmp(text, ok[i].text) == 0, "%u: '%s', want '%s'", ok[i].compile, text,
                  ok[i].text);
        D.h.load_flags = ok[i].load;
        D.h.compile_flags = ok[i].compile;
        if (write_compiled(&D, path))
            return;
        ArtifactContents a;
        Err e = {0};
        int rc = artifact_read(path, &a, &e);
        CHECK_MSG(rc == ST_OK && a.h.format_version == ARTIFACT_FORMAT_VERSION &&
                      a.h.compile_flags == ok[i].compile && a.h.load_flags == ok[i].load,
                  "%u/%u: %s", ok[i].load, ok[i].compile, e.msg);
        artifact_contents_free(&a);
    }
    char small[8];
    artifact_compile_flags_text(ARTIFACT_COMPILE_NO_MLP_CHAINS | ARTIFACT_COMPILE_NO_ATTENTION,
                                small, sizeof small);
    CHECK(strlen(small) == sizeof small - 1); // cut, terminated
    static const struct {
        uint32_t load, compile;
    } bad[] = {
        {0, 1u << 5},
        {0, 1u << 31},
        {ARTIFACT_STORE_F16, ARTIFACT_COMPILE_LAYOUT_NCHW | ARTIFACT_COMPILE_LAYOUT_NHWC},
        {0, ARTIFACT_COMPILE_LAYOUT_NCHW},
        {0, ARTIFACT_COMPILE_LAYOUT_NHWC},
        {ARTIFACT_STORE_F16 | ARTIFACT_LAYOUT_NHWC, ARTIFACT_COMPILE_LAYOUT_NCHW},
    };
    for (size_t i = 0; i < ORCH_COUNT(bad); i++) {
        D.h.load_flags = bad[i].load;
        D.h.compile_flags = bad[i].compile;
        if (write_compiled(&D, path))
            return;
        char what[64];
        snprintf(what, sizeof what, "compile flags %#x beside load flags %#x", bad[i].compile,
                 bad[i].load);
        expect_read_error(path, "corrupted: the header's fields do not parse", what);
    }
    // A format 3 file made from a current one with compile flags: they go with the field.
    D.h.load_flags = 0;
    D.h.compile_flags = ARTIFACT_COMPILE_NO_MLP_CHAINS;
    D.weights = NULL;
    if (write_compiled(&D, path))
        return;
    uint8_t *f5 = NULL, *f4 = NULL;
    size_t n5 = 0, n4 = 0;
    Err e = {0};
    if (file_read_all(path, 1 << 30, &f5, &n5, &e) != ST_OK) {
        CHECK_MSG(false, "%s", e.msg);
        return;
    }
    uint8_t *f7 = f5, *f6 = format6_of(f7, n5, &n5);
    free(f7);
    f5 = format5_of(f6, n5, &n5);
    free(f6);
    f4 = format4_of(f5, n5, &n4);
    free(f5);
    Fields x = fields_of(f4);
    CHECK(le32(f4 + x.compile_flags) == ARTIFACT_COMPILE_NO_MLP_CHAINS);
    const size_t cut[][2] = {{x.compile_flags, 4}};
    size_t n3;
    uint8_t *f3 = older_format(f4, n4, 3, cut, 1, &n3);
    const char *old = path_in("format3.orch");
    write_bytes(old, f3, n3);
    older_file_runs(old, 3);
    free(f3);
    free(f4);
}

static void truncated(void) {
    if (!file)
        return;
    const char *path = path_in("cut.orch");
    int n = 0;
    for (size_t cut = 0; cut < file_size; n++) {
        write_bytes(path, file, cut);
        char what[64];
        snprintf(what, sizeof what, "cut at %zu", cut);
        expect_read_error(path, cut == 0 ? "empty file" : "truncated", what);
        if (cut > 0) {
            char want[64];
            snprintf(want, sizeof want, "%zu bytes of", cut);
            expect_read_error(path, want, what);
        }
        cut += cut < header_bytes + 16 ? 1 : (size_t)(1 + rnd_int((int)(file_size / 60) + 1));
        if (check_failed_case)
            break;
    }
    write_bytes(path, file, file_size - 1);
    expect_read_error(path, "truncated", "one byte short");
    printf("  %d truncations refused\n", n);
}

static void header_flips(void) {
    if (!file)
        return;
    const char *path = path_in("flip.orch");
    for (uint32_t at = 0; at < header_bytes && !check_failed_case; at++) {
        uint8_t saved = file[at];
        file[at] ^= (uint8_t)(1u << rnd_int(8));
        write_bytes(path, file, file_size);
        // A flipped version that is another one this orch reads fails on the checksum instead.
        uint32_t v = le32(file + 8);
        bool other_known = v >= ARTIFACT_OLDEST_VERSION && v <= ARTIFACT_FORMAT_VERSION;
        const char *want = at < 8                   ? "not an orch artefact"
                           : at < 12 && other_known ? "checksum"
                           : at < 12                ? "format version"
                                                    : "";
        char what[64];
        snprintf(what, sizeof what, "header byte %u flipped", at);
        expect_read_error(path, want, what);
        if (at >= 16) {
            ArtifactContents a;
            Err e = {0};
            artifact_read(path, &a, &e);
            CHECK_MSG(strstr(e.msg, "checksum"), "%s: %s", what, e.msg);
        }
        file[at] = saved;
    }
    printf("  %u header bytes flipped, each refused\n", header_bytes);
}

static void section_corruption(void) {
    if (!file)
        return;
    const char *path = path_in("bad.orch");
    ArtifactContents a;
    Err e = {0};
    if (artifact_read_memory(file, file_size, "x", &a, &e) != ST_OK)
        return;
    size_t off[4] = {(size_t)(a.onnx - a.data), (size_t)(a.plan - a.data), (size_t)(a.so - a.data),
                     (size_t)(a.src - a.data)};
    size_t len[4] = {a.onnx_size, a.plan_size, a.so_size, a.src_size};
    artifact_contents_free(&a);
    const char *names[4] = {"ONNX model section", "plan section", "shared object section",
                            "source section"};
    for (int s = 0; s < 4; s++)
        for (int r = 0; r < 5; r++) {
            size_t at = off[s] + (size_t)rnd_int((int)len[s]);
            file[at] ^= 0x10;
            write_bytes(path, file, file_size);
            expect_read_error(path, names[s], "a section byte flipped");
            expect_read_error(path, "checksum does not match", "a section byte flipped");
            file[at] ^= 0x10;
        }
    // Bytes after the last section.
    uint8_t *longer = malloc(file_size + 3);
    memcpy(longer, file, file_size);
    memcpy(longer + file_size, "abc", 3);
    write_bytes(path, longer, file_size + 3);
    expect_read_error(path, "3 unexpected bytes after the last section", "trailing bytes");
    free(longer);
}

static void not_artefacts(void) {
    const char *path = path_in("other.orch");
    write_bytes(path, "hello, world\n", 13);
    expect_read_error(path, "not an orch artefact", "text file");
    write_bytes(path, C.onnx, C.onnx_size);
    expect_read_error(path, "it may be an ONNX model", "an ONNX file");
    write_bytes(path, "", 0);
    expect_read_error(path, "empty file, not an orch artefact", "empty file");
    expect_read_error(dir, "is a directory", "a directory");
    expect_read_error(path_in("missing.orch"), "cannot open", "a missing file");
    if (!file)
        return;
    // A newer format: the version is checked before anything else it would change.
    uint8_t saved = file[8];
    file[8] = ARTIFACT_FORMAT_VERSION + 1;
    write_bytes(path, file, file_size);
    char newer[64];
    snprintf(newer, sizeof newer, "format version %d, this orch reads 1",
             ARTIFACT_FORMAT_VERSION + 1);
    expect_read_error(path, newer, "a newer version");
    expect_read_error(path, "a newer orch", "a newer version");
    file[8] = saved;
    // Writing where no folder exists fails cleanly.
    Err e = {0};
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.orch", dir);
    CHECK(artifact_write(bad, &C.h, C.onnx, C.onnx_size, C.plan, C.plan_size, C.so, C.so_size,
                         &e) == ST_RUNTIME);
    CHECK_MSG(strstr(e.msg, bad) != NULL, "%s", e.msg);
}

static void foreign_device(void) {
    const char *path = path_in("model.orch");
    HwInfo other = this_machine("cpu | Other CPU 7 | 64 cores | avx512 | gcc 13.1.0");
    Session *s = NULL;
    Err e = {0};
    CHECK(open_session(path, &other, NULL, &s, &e) == ST_INVALID && !s);
    char want[1024];
    snprintf(want, sizeof want,
             "%s was built by orch %s for a different CPU: '%s'; this machine is '%s'; recompile "
             "with orch compile",
             path, ORCH_VERSION, FP, other.fingerprint);
    CHECK_MSG(strstr(e.msg, want) != NULL, "%s", e.msg);
    e = (Err){0};
    CHECK(open_session(path, NULL, NULL, &s, &e) == ST_USAGE && !s);
    SessionOptions allow = {.allow_foreign_device = true};
    e = (Err){0};
    CHECK_MSG(open_session(path, &other, &allow, &s, &e) == ST_OK, "%s", e.msg);
    if (s)
        run_compare(s, &C);
    session_free(s);
    HwInfo gpu = this_machine(FP);
    snprintf(gpu.target, sizeof gpu.target, "cuda");
    e = (Err){0};
    CHECK(open_session(path, &gpu, NULL, &s, &e) == ST_INVALID);
    CHECK_MSG(strstr(e.msg, "for the 'cpu' target"), "%s", e.msg);
}

// Files whose checksums are right but whose contents do not fit together.
static void inconsistent(void) {
    HwInfo hw = this_machine(FP);
    const char *path = path_in("mixed.orch");
    Session *s = NULL;
    Err e = {0};
    // Other weights (same structure): the constants the plan was built with differ.
    Compiled D;
    if (compile(&D, 3.0, "orch_k0", "orch_k0") == ST_OK) {
        ArtifactHeader h = C.h;
        h.model_hash = artifact_hash(D.onnx, D.onnx_size);
        CHECK(artifact_write(path, &h, D.onnx, D.onnx_size, C.plan, C.plan_size, C.so, C.so_size,
                             &e) == ST_OK);
        CHECK(open_session(path, &hw, NULL, &s, &e) == ST_INVALID && !s);
        CHECK_MSG(strstr(e.msg, "constants") && strstr(e.msg, path), "%s", e.msg);
    }
    compiled_free(&D);
    // The plan names a symbol the shared object lacks.
    e = (Err){0};
    if (compile(&D, 1.0, "orch_missing", "orch_k0") == ST_OK) {
        write_compiled(&D, path);
        CHECK(open_session(path, &hw, NULL, &s, &e) == ST_INVALID && !s);
        CHECK_MSG(strstr(e.msg, "no kernel 'orch_missing'") && strstr(e.msg, "sub"), "%s", e.msg);
        // No shared object at all, or one that is not a shared object.
        e = (Err){0};
        CHECK(artifact_write(path, &D.h, D.onnx, D.onnx_size, D.plan, D.plan_size, NULL, 0, &e) ==
              ST_OK);
        CHECK(open_session(path, &hw, NULL, &s, &e) == ST_INVALID && !s);
        CHECK_MSG(strstr(e.msg, "holds no shared object"), "%s", e.msg);
        e = (Err){0};
        CHECK(artifact_write(path, &D.h, D.onnx, D.onnx_size, D.plan, D.plan_size, "junk", 4, &e) ==
              ST_OK);
        CHECK(open_session(path, &hw, NULL, &s, &e) == ST_INVALID && !s);
        CHECK_MSG(strstr(e.msg, "cannot load the kernels' shared object"), "%s", e.msg);
        // The header's kernel count disagrees with the plan.
        ArtifactHeader h = D.h;
        h.kernels++;
        e = (Err){0};
        CHECK(artifact_write(path, &h, D.onnx, D.onnx_size, D.plan, D.plan_size, D.so, D.so_size,
                             &e) == ST_OK);
        CHECK(open_session(path, &hw, NULL, &s, &e) == ST_INVALID && !s);
        CHECK_MSG(strstr(e.msg, "kernels"), "%s", e.msg);
        // Other input shapes than the plan was made for.
        h = D.h;
        snprintf(h.input_shapes, sizeof h.input_shapes, "x:1x2x4x9");
        e = (Err){0};
        CHECK(artifact_write(path, &h, D.onnx, D.onnx_size, D.plan, D.plan_size, D.so, D.so_size,
                             &e) == ST_OK);
        CHECK(open_session(path, &hw, NULL, &s, &e) != ST_OK && !s);
        CHECK(strstr(e.msg, path) != NULL);
        snprintf(h.input_shapes, sizeof h.input_shapes, "x:");
        e = (Err){0};
        CHECK(artifact_write(path, &h, D.onnx, D.onnx_size, D.plan, D.plan_size, D.so, D.so_size,
                             &e) == ST_OK);
        CHECK(open_session(path, &hw, NULL, &s, &e) != ST_OK && !s);
        CHECK_MSG(strstr(e.msg, "the artefact's header") && strstr(e.msg, path), "%s", e.msg);
    }
    compiled_free(&D);
}

// Random damage to the plan section with the checksums recomputed (as a forger would): the
// session is refused with a message or, where only a predicted time changed, runs correctly.
static void forged_plans(void) {
    HwInfo hw = this_machine(FP);
    const char *path = path_in("forged.orch");
    uint8_t *plan = malloc(C.plan_size);
    int refused = 0, accepted = 0;
    for (int it = 0; it < 150 && !check_failed_case; it++) {
        memcpy(plan, C.plan, C.plan_size);
        for (int f = 0, n = 1 + rnd_int(3); f < n; f++)
            plan[rnd_int((int)C.plan_size)] ^= (uint8_t)(1u << rnd_int(8));
        size_t len = it % 10 == 9 ? (size_t)rnd_int((int)C.plan_size) : C.plan_size;
        Err e = {0};
        if (artifact_write(path, &C.h, C.onnx, C.onnx_size, plan, len, C.so, C.so_size, &e))
            continue;
        Session *s = NULL;
        if (open_session(path, &hw, NULL, &s, &e) == ST_OK) {
            accepted++;
            run_compare(s, &C);
        } else {
            refused++;
            CHECK_MSG(e.msg[0] && strstr(e.msg, path), "%s", e.msg);
        }
        session_free(s);
    }
    free(plan);
    printf("  150 forged plans: %d refused, %d accepted and correct\n", refused, accepted);
}

// Several plans (format 5): the model once, each plan's fields and sections read back in order;
// two plans for one shape set, and a damaged section of the second plan, refused by name; a
// session whose second plan does not fit its shapes names that shape set.
static void several_plans(void) {
    const char *path = path_in("plans.orch");
    ArtifactPlan *p = calloc(3, sizeof *p);
    const char *shapes[3] = {SHAPES, "x:2x2x4x8", "x:5x2x4x8"};
    for (int k = 0; k < 3; k++) {
        snprintf(p[k].input_shapes, sizeof p[k].input_shapes, "%s", shapes[k]);
        p[k].kernels = C.h.kernels;
        p[k].predicted_seconds = 1e-3 * (k + 1);
        p[k].plan = C.plan;
        p[k].plan_size = C.plan_size;
        p[k].so = C.so;
        p[k].so_size = C.so_size;
        p[k].src = k == 1 ? NULL : (const uint8_t *)C.src; // the second: a target keeping none
        p[k].src_size = k == 1 ? 0 : strlen(C.src);
    }
    Err e = {0};
    CHECK_MSG(artifact_write_plans(path, &C.h, C.onnx, C.onnx_size, NULL, 0, p, 3, &e) == ST_OK,
              "%s", e.msg);
    ArtifactContents a;
    int rc = artifact_read(path, &a, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    if (rc == ST_OK) {
        CHECK(a.n_plans == 3 && strcmp(a.h.input_shapes, SHAPES) == 0);
        // The model once: the file holds one ONNX section and three plans and shared objects.
        CHECK(a.size < C.onnx_size + 3 * (C.plan_size + C.so_size) + 4096);
        for (int k = 0; k < 3; k++)
            CHECK(strcmp(a.plans[k].input_shapes, shapes[k]) == 0 &&
                  a.plans[k].predicted_seconds == 1e-3 * (k + 1) &&
                  a.plans[k].plan_size == C.plan_size &&
                  memcmp(a.plans[k].plan, C.plan, C.plan_size) == 0 &&
                  a.plans[k].so_size == C.so_size &&
                  a.plans[k].src_size == (k == 1 ? 0 : strlen(C.src)));
        ArtifactContents v;
        artifact_plan_view(&a, 2, &v);
        CHECK(strcmp(v.h.input_shapes, shapes[2]) == 0 && v.plan == a.plans[2].plan &&
              v.src == a.plans[2].src && v.src_size == a.plans[2].src_size && v.n_plans == 1 &&
              !v.plans);
        HwInfo hw = this_machine(FP);
        Session *s = NULL;
        e = (Err){0};
        CHECK(session_create(&a, &hw, NULL, &s, &e) != ST_OK && !s);
        CHECK_MSG(strstr(e.msg, "shape set 2 (x:2x2x4x8)"), "%s", e.msg);
        // Plan 2's plan section damaged.
        size_t at = (size_t)(a.plans[1].plan - a.data) + C.plan_size / 2;
        uint8_t *bytes = malloc(a.size);
        memcpy(bytes, a.data, a.size);
        bytes[at] ^= 0x20;
        write_bytes(path, bytes, a.size);
        expect_read_error(path, "plan 2's plan section's checksum does not match",
                          "a byte of the second plan flipped");
        // Plan 3's source section damaged.
        bytes[at] ^= 0x20;
        at = (size_t)(a.plans[2].src - a.data) + strlen(C.src) / 2;
        bytes[at] ^= 0x20;
        write_bytes(path, bytes, a.size);
        expect_read_error(path, "plan 3's source section's checksum does not match",
                          "a byte of the third plan's source flipped");
        free(bytes);
        artifact_contents_free(&a);
    }
    snprintf(p[2].input_shapes, sizeof p[2].input_shapes, "%s", shapes[0]);
    CHECK(artifact_write_plans(path, &C.h, C.onnx, C.onnx_size, NULL, 0, p, 3, &e) == ST_OK);
    expect_read_error(path, "plans 1 and 3 are for the same shapes", "two plans for one shape");
    free(p);
}

// Opens path mapped (every size) as a CPU session; the status, e the message.
static int open_mapped_cpu(const char *path, CpuSession **cs, Err *e) {
    HwInfo hw = this_machine(FP);
    artifact_set_map_threshold(1);
    ArtifactContents a;
    *cs = NULL;
    int rc = artifact_read(path, &a, e);
    artifact_set_map_threshold(0);
    if (rc == ST_OK)
        rc = cpu_session_create(&a, &hw, NULL, cs, e);
    artifact_contents_free(&a);
    return rc;
}

// The weights section (format 7): a weight reordered by its kernel's prepack is reordered from the
// mapping into the session's blob (nothing read in place) and computes what the interpreter does;
// a file cut in the weights, or a weight's byte flipped, is refused naming the tensor; a damaged
// index is refused; a reference into the section that does not fit (offset, length) is refused at
// import naming the tensor, with the checksums right; a model referring to a weights section it
// does not come with is refused naming the tensor.
static void weights_section(void) {
    const char *path = path_in("weights.orch");
    Err e = {0};
    // Packed from the mapping.
    Compiled D;
    reversed_weight = true;
    int rc = compile(&D, 1.0, "orch_k0", "orch_k0");
    reversed_weight = false;
    if (rc == ST_OK && write_compiled(&D, path) == ST_OK) {
        CpuSession *cs = NULL;
        CHECK_MSG(open_mapped_cpu(path, &cs, &e) == ST_OK, "%s", e.msg);
        if (cs) {
            CHECK_MSG(cpu_session_in_place_bytes(cs) == 0 && cpu_session_blob_bytes(cs) >= 256,
                      "in place %lld, blob %lld", (long long)cpu_session_in_place_bytes(cs),
                      (long long)cpu_session_blob_bytes(cs));
            void *outs[3];
            for (int i = 0; i < 3; i++) {
                outs[i] = aligned_alloc(64, 256);
                memset(outs[i], 0xff, 256);
            }
            const void *ins[1] = {D.in};
            CHECK_MSG(cpu_session_run(cs, ins, outs, &e) == ST_OK, "%s", e.msg);
            for (int i = 0; i < D.pg->n_outputs; i++)
                CHECK_MSG(memcmp(outs[i], D.ref[i],
                                 tensor_nbytes(D.pg->tensors[D.pg->outputs[i]])) == 0,
                          "output %d differs", i);
            for (int i = 0; i < 3; i++)
                free(outs[i]);
            cpu_session_free(cs);
        }
    }
    compiled_free(&D);
    // Cut in the weight's bytes, and one of them flipped.
    uint8_t *f = NULL;
    size_t n = 0;
    if (write_compiled(&C, path) || file_read_all(path, 1 << 30, &f, &n, &e))
        return;
    ArtifactContents a;
    if (artifact_read_memory(f, n, "x", &a, &e) != ST_OK) {
        free(f);
        return;
    }
    size_t w_at = (size_t)(a.weights - a.data), idx_at = (size_t)(a.weights_section - a.data);
    artifact_contents_free(&a);
    write_bytes(path, f, w_at + 100);
    expect_read_error(path, "cut in tensor 'w'", "cut in the weight");
    f[w_at + 17] ^= 4;
    write_bytes(path, f, n);
    expect_read_error(path, "bytes of tensor 'w' are damaged", "a weight's byte flipped");
    f[w_at + 17] ^= 4;
    f[idx_at + 2] ^= 1; // the tensor count
    write_bytes(path, f, n);
    expect_read_error(path, "weights section's checksum does not match (its index is damaged)",
                      "the index's count flipped");
    f[idx_at + 2] ^= 1;
    free(f);
    // Forged references (checksums right): the ONNX section's length or offset of 'w' changed in
    // place (same digits' count), or no weights section at all.
    static const struct {
        const char *from, *to, *want;
    } forged[] = {
        {"\x06length\x12\x03" "256", "\x06length\x12\x03" "252", "holds 252 bytes for it"},
        {"\x06offset\x12\x01" "0", "\x06offset\x12\x01" "8", "do not lie aligned"},
        {"\x06offset\x12\x01" "0", "\x06offset\x12\x01" "x", "no valid offset"},
    };
    for (size_t i = 0; i <= ORCH_COUNT(forged); i++) {
        Compiled F = C;
        uint8_t *onnx = malloc(C.split_size);
        memcpy(onnx, C.split, C.split_size);
        F.split = onnx;
        const char *want = "which only an artefact carries";
        if (i < ORCH_COUNT(forged)) {
            size_t ln = strlen(forged[i].from);
            uint8_t *hit = NULL;
            for (size_t k = 0; !hit && k + ln <= C.split_size; k++)
                if (memcmp(onnx + k, forged[i].from, ln) == 0)
                    hit = onnx + k;
            CHECK_MSG(hit, "forged reference %zu not found", i);
            if (hit)
                memcpy(hit, forged[i].to, ln);
            want = forged[i].want;
        } else {
            // The split model beside no weights section.
            F.onnx = onnx;
            F.onnx_size = C.split_size;
            F.weights = NULL;
        }
        CpuSession *cs = NULL;
        e = (Err){0};
        if (write_compiled(&F, path) == ST_OK) {
            CHECK_MSG(open_mapped_cpu(path, &cs, &e) == ST_INVALID && !cs, "forged %zu accepted", i);
            CHECK_MSG(strstr(e.msg, "tensor 'w'") && strstr(e.msg, want) && strstr(e.msg, path),
                      "forged %zu: %s", i, e.msg);
        }
        cpu_session_free(cs);
        free(onnx);
    }
    unlink(path);
}

// This process's VmRSS or VmHWM (kB) from /proc/self/status; -1 where unreadable.
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

// Weights read once: a model y = x - w with a 16 MB weight w and a 16 MB initializer nothing
// reads, both in the weights section, every primitive interpreted. Reading the mapped artefact
// and making a CPU session (checksums, model hash, import, plan check with its constant hash)
// may not hold the weights: its peak resident set grows by far less than one weight (before,
// the checksum held the whole section and the constant hash every constant). After a run, w
// (read in place) is resident and the unread initializer is not; the output is x - w.
static void weights_read_once(void) {
    enum { N = 4 << 20 }; // 16 MB of float32 per weight
    const int64_t dims[] = {1, N};
    const char *path = path_in("big.orch");
    float *w = malloc(sizeof(float) * N), *x = aligned_alloc(64, sizeof(float) * N),
          *y = aligned_alloc(64, sizeof(float) * N);
    for (int i = 0; i < N; i++) {
        w[i] = (float)(i % 1000) * 0.5f;
        x[i] = (float)(i % 77);
        y[i] = -1.0f;
    }
    MB *b = mb_new(13);
    mb_input(b, "x", 1, 2, dims);
    mb_init(b, mb_raw(b, "w", 1, 2, dims, w, sizeof(float) * N));
    mb_init(b, mb_raw(b, "unread", 1, 2, dims, w, sizeof(float) * N));
    mb_node(b, "Sub", "sub", "x,w", "y", NULL);
    mb_output(b, "y");
    size_t onnx_size = 0;
    uint8_t *onnx = mb_pack(b, &onnx_size);
    mb_free(b);
    Err e = {0};
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    CandidateSet *cs = NULL;
    Selection sel;
    memset(&sel, 0, sizeof sel);
    Plan *plan = NULL;
    uint8_t *plan_bytes = NULL, *split = NULL, *payload = NULL, *weights = NULL;
    size_t plan_size = 0, split_size = 0, payload_size = 0, weights_size = 0;
    OnnxWeightRef *refs = NULL;
    int n_refs = 0;
    InputShape shapes[1];
    char spec[64], parsed[64]; // parse_input_shapes cuts its string
    snprintf(spec, sizeof spec, "x:1x%d", (int)N);
    snprintf(parsed, sizeof parsed, "%s", spec);
    LoadOptions lo = {.shapes = shapes};
    int rc = parse_input_shapes(parsed, shapes, 1, &lo.n_shapes, &e);
    if (rc == ST_OK)
        rc = onnx_load_memory(onnx, onnx_size, "big.onnx", NULL, &lo, &g, &e);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(g, NULL, &e);
    FissionOptions fo = {0};
    if (rc == ST_OK)
        rc = fission_run(g, &fo, &pg, NULL, &e);
    if (rc == ST_OK)
        rc = fission_cleanup(pg, NULL, &e);
    CandRules rules = cand_rules_default();
    rules.max_prims = 1;
    if (rc == ST_OK)
        rc = cand_enumerate(pg, &rules, 0, &cs, &e);
    if (rc == ST_OK) {
        cost_model_fill(cs, cost_model_find("cpu"));
        rc = orchestrate(cs, NULL, &sel, &e);
    }
    PlanKernelSpec *spec_k = calloc((size_t)sel.n + 1, sizeof(PlanKernelSpec));
    for (int k = 0; k < sel.n; k++)
        spec_k[k].kind = PLAN_INTERP;
    if (rc == ST_OK)
        rc = plan_build(pg, cs, &sel, spec_k, &plan, &e);
    if (rc == ST_OK)
        rc = plan_write(plan, &plan_bytes, &plan_size, &e);
    if (rc == ST_OK)
        rc = onnx_split_weights(onnx, onnx_size, "big.onnx", 1, &split, &split_size, &payload,
                                &payload_size, &refs, &n_refs, &e);
    CHECK_MSG(rc == ST_OK && n_refs == 2, "%s (%d weights split)", e.msg, n_refs);
    if (rc == ST_OK)
        rc = artifact_weights_section(payload, payload_size, refs, n_refs, &weights, &weights_size);
    if (rc == ST_OK) {
        ArtifactHeader h = C.h;
        snprintf(h.input_shapes, sizeof h.input_shapes, "%s", spec);
        h.kernels = plan->n_kernels;
        h.predicted_seconds = sel.objective;
        h.model_hash = artifact_model_hash(split, split_size, weights, weights_size);
        ArtifactPlan ap;
        memset(&ap, 0, sizeof ap);
        snprintf(ap.input_shapes, sizeof ap.input_shapes, "%s", spec);
        ap.kernels = h.kernels;
        ap.predicted_seconds = h.predicted_seconds;
        ap.plan = plan_bytes;
        ap.plan_size = plan_size;
        rc = artifact_write_plans(path, &h, split, split_size, weights, weights_size, &ap, 1, &e);
    }
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    free(spec_k);
    plan_free(plan);
    selection_free(&sel);
    cand_set_free(cs);
    prim_graph_free(pg);
    graph_free(g);
    free(onnx);
    free(plan_bytes);
    free(split);
    free(payload);
    free(weights);
    onnx_weight_refs_free(refs, n_refs);
    if (rc) {
        free(w), free(x), free(y);
        return;
    }
    // The peak from here on: clear_refs "5" resets VmHWM to the current resident set.
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    bool reset = cr && fputs("5", cr) >= 0;
    if (cr)
        reset = fclose(cr) == 0 && reset;
    long rss0 = status_kb("VmRSS");
    CHECK_MSG(reset && rss0 > 0, "cannot reset this process's peak resident set");
    HwInfo hw = this_machine(FP);
    ArtifactContents a;
    CpuSession *s = NULL;
    rc = artifact_read(path, &a, &e);
    CHECK_MSG(rc == ST_OK && a.mapped, "%s", e.msg);
    if (rc == ST_OK)
        rc = cpu_session_create(&a, &hw, NULL, &s, &e);
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    long grown = status_kb("VmHWM") - rss0, weight_kb = (long)(sizeof(float) * N / 1024);
    CHECK_MSG(grown < weight_kb / 2,
              "reading the artefact and making the session grew the peak by %ld kB (one weight "
              "is %ld kB): it read weights it does not need",
              grown, weight_kb);
    CHECK_MSG(s && cpu_session_in_place_bytes(s) == (int64_t)sizeof(float) * N,
              "%lld bytes read in place", s ? (long long)cpu_session_in_place_bytes(s) : -1LL);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    if (s && (rc = cpu_session_run(s, ins, outs, &e)) == ST_OK) {
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += y[i] != x[i] - w[i];
        CHECK_MSG(bad == 0, "%d outputs differ from x - w", bad);
        long now = status_kb("VmRSS") - rss0;
        CHECK_MSG(now > weight_kb / 2 && now < weight_kb + weight_kb / 2,
                  "after a run %ld kB more are resident: w (%ld kB) read in place, and not the "
                  "unread initializer",
                  now, weight_kb);
    }
    CHECK_MSG(rc == ST_OK, "%s", e.msg);
    cpu_session_free(s);
    artifact_contents_free(&a);
    free(w), free(x), free(y);
    unlink(path);
}

static void rm_tree(const char *d) {
    DIR *dd = opendir(d);
    for (struct dirent *de; dd && (de = readdir(dd));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", d, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    if (dd)
        closedir(dd);
    rmdir(d);
}

int main(int argc, char **argv) {
    rng_state = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL) * 2654435761u + 1;
    if (!rng_state)
        rng_state = 1;
    printf("seed %llu\n", (unsigned long long)rng_state);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/orch_artifact_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("cannot make a temporary folder\n");
        return 1;
    }
    int rc = compile(&C, 1.0, "orch_k0", "orch_k0");
    printf("%s the test model (%zu bytes of ONNX, %zu of plan, %zu of shared object)\n",
           rc ? "could not compile" : "compiled", C.onnx_size, C.plan_size, C.so_size);
    if (rc == ST_OK) {
        RUN(round_trip);
        RUN(mapped_file);
        RUN(precision_field);
        RUN(wide_field);
        RUN(compile_flags_field);
        RUN(truncated);
        RUN(header_flips);
        RUN(section_corruption);
        RUN(not_artefacts);
        RUN(foreign_device);
        RUN(inconsistent);
        RUN(forged_plans);
        RUN(several_plans);
        RUN(weights_section);
        RUN(weights_read_once);
    } else {
        check_n_fail++;
    }
    free(file);
    compiled_free(&C);
    rm_tree(dir);
    return CHECK_DONE();
}
