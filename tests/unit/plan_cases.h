// What the planning tests that run on the primitive interpreter share (core/test_plan.c,
// core/test_plan_exec.c): a seeded random stream and never-zero input values, small primitive
// graphs built directly, and the MODELS_DIR mode's walk over tests/models/gen_models.py's folders
// (each model loaded with its args.txt's --input-shapes and fed its io.txt inputs).
// Needs rng_state seeded (non-zero) first; each folder is one case, "ok NAME" or "FAIL NAME".
#ifndef ORCH_TEST_PLAN_CASES_H
#define ORCH_TEST_PLAN_CASES_H

#include "check.h"
#include "graph_builder.h"
#include "model_dirs.h"

#include "ir/graph.h"
#include "onnx/load.h"
#include "ops/fold.h"
#include "prim/prim_build.h"
#include "runtime/npy.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- random values ----

static uint64_t rng_state;

static inline double rnd(void) { // uniform in [0, 1), xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)(rng_state * 2685821657736338717ull >> 11) / 9007199254740992.0;
}

static inline int rnd_int(int n) {
    return (int)(rnd() * n);
}

// Values in ±[0.1, 1): never zero, so a lost or misplaced element shows.
static inline void fill(const Tensor *t, void *p) {
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double v = (0.1 + 0.9 * rnd()) * (rnd() < 0.5 ? -1 : 1);
        if (dtype_is_float(t->dtype))
            elem_set_f64(t->dtype, p, i, v);
        else
            elem_set_i64(t->dtype, p, i, 1 + rnd_int(3));
    }
}

// Seeds rng_state from argv[2] (the clock without it) and prints the command that repeats the
// run: unit_NAME [MODELS_DIR [SEED]].
static inline void plan_cases_seed(int argc, char **argv) {
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed ? seed : 1;
    printf("seed %llu (repeat with: %s '%s' %llu)\n", (unsigned long long)seed, argv[0],
           argc > 1 ? argv[1] : "", (unsigned long long)seed);
}

// ---- small primitive graphs built directly ----

typedef struct TG {
    PrimGraph *pg;
    PB b;
    void *in[8];
} TG;

static inline void tg_init(TG *g) {
    memset(g, 0, sizeof *g);
    g->pg = prim_graph_create(graph_create("test"));
    g->b = (PB){g->pg, "node"};
}

static inline void tg_free(TG *g) {
    for (int i = 0; i < 8; i++)
        free(g->in[i]);
    const Graph *src = g->pg->src;
    prim_graph_free(g->pg);
    graph_free((Graph *)src);
}

static inline int tg_input(TG *g, int rank, const int64_t *dims) {
    char name[32];
    snprintf(name, sizeof name, "x%d", g->pg->n_inputs);
    int id = gb_input(g->pg, name, rank, dims);
    void *p = g->in[g->pg->n_inputs - 1] = xmalloc(tensor_nbytes(g->pg->tensors[id]) + 1);
    fill(g->pg->tensors[id], p);
    return id;
}

static inline int tg_const(TG *g, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= dims[d];
    float *data = xmalloc(sizeof(float) * (size_t)n + 1);
    for (int64_t i = 0; i < n; i++)
        data[i] = (float)(0.1 + 0.9 * rnd());
    int t = pb_const(&g->b, DT_FLOAT, rank, dims, data);
    free(data);
    return t;
}

static inline void tg_output(TG *g, int t) {
    gb_output(g->pg, t);
}

// ---- the generated test models (MODELS_DIR mode) ----

// Model folder dir's model, loaded with its --input-shapes, shapes inferred and constants folded;
// a failure is the case's (*g NULL or partly made: graph_free it either way).
static inline int model_dir_load(const char *dir, Graph **g, Err *e) {
    char path[4096];
    InputShape shapes[32];
    LoadOptions lo = {.shapes = shapes};
    char *spec = input_shapes_arg(dir); // the shapes point into it until the load
    int rc = spec ? parse_input_shapes(spec, shapes, 32, &lo.n_shapes, e) : ST_OK;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    if (rc == ST_OK)
        rc = onnx_load_file(path, &lo, g, e);
    free(spec);
    if (rc == ST_OK)
        rc = graph_infer_and_fold(*g, NULL, e);
    CHECK_MSG(rc == ST_OK, "%s", e->msg);
    return rc;
}

// g's inputs: those io.txt names ("input<TAB>NAME<TAB>FILE" lines; its outputs are not read),
// the others random (fill: safe as indices). Returns in[] (free it); the data are files[0..*nf)'s
// (host_tensor_free each).
static inline void **model_dir_inputs(const char *dir, const Graph *g, HostTensor files[32],
                                      int *nf) {
    char path[4096], line[4096];
    Err e = {0};
    void **in = calloc((size_t)g->n_inputs + 1, sizeof(void *));
    memset(files, 0, sizeof(HostTensor) * 32);
    *nf = 0;
    snprintf(path, sizeof path, "%s/io.txt", dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f) && *nf < 32) {
        char kind[16], name[1024], file[2048];
        if (sscanf(line, "%15[^\t]\t%1023[^\t]\t%2047[^\n]", kind, name, file) != 3 ||
            strcmp(kind, "input") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, file);
        for (int i = 0; i < g->n_inputs; i++)
            if (strcmp(g->tensors[g->inputs[i]]->name, name) == 0 &&
                tensor_file_read(path, &files[*nf], &e) == ST_OK)
                in[i] = files[(*nf)++].data;
        CHECK_MSG(e.code == ST_OK, "%s", e.msg);
    }
    if (f)
        fclose(f);
    for (int i = 0; i < g->n_inputs && *nf < 32; i++)
        if (!in[i]) {
            const Tensor *t = g->tensors[g->inputs[i]];
            in[i] = malloc(tensor_nbytes(t) + 1);
            fill(t, in[i]);
            files[(*nf)++].data = in[i];
        }
    return in;
}

static inline int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Runs each(folder) as one case per model folder under root, in name order.
static inline int run_model_dirs(const char *root, void (*each)(const char *dir)) {
    DIR *d = opendir(root);
    if (!d) {
        printf("cannot open %s (run tests/models/gen_models.py first)\n0 passed, 1 failed\n", root);
        return 1;
    }
    char *names[512];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 512;) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/model.onnx", root, de->d_name);
        if (de->d_name[0] != '.' && access(path, R_OK) == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        check_failed_case = 0;
        each(dir);
        printf("%s %s\n", check_failed_case ? "FAIL" : "ok  ", names[i]);
        if (check_failed_case)
            check_n_fail++;
        else
            check_n_pass++;
        free(names[i]);
        fflush(stdout);
    }
    if (n == 0)
        check_n_fail++, printf("FAIL no models in %s\n", root);
    return CHECK_DONE();
}

#endif
