// The pieces every orch export tree shares (export_tree.h): opening a plan for export, the
// weights file's checksum and reader, C spellings of ONNX names, model.h, the tensor tables, the
// runner, writing files. Needs: a one-plan view of an artefact. Guarantees: what export_tree.h
// says; the generated code is C that also compiles as C++ (the CUDA tree's model.cu).
#define _GNU_SOURCE
#include "export_tree.h"

#include "../base/file.h"
#include "../plan/artifact_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

uint64_t export_fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// Printable ASCII as is, everything else (and ", \, ?) escaped, so an ONNX name cannot end the
// literal or form a trigraph.
void export_c_string(StrBuf *b, const char *s) {
    sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?' || *p < 0x20 || *p >= 0x7f)
            sb_printf(b, "\\%03o", *p);
        else
            sb_printf(b, "%c", *p);
    }
    sb_puts(b, "\"");
}

// No backslash or '?' (a comment ending in a backslash, or in the trigraph of one, would take the
// next line in).
void export_c_comment(StrBuf *b, const char *s) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n < 160; p++, n++)
        sb_printf(b, "%c", *p >= 0x20 && *p < 0x7f && *p != '\\' && *p != '?' ? *p : '_');
    if (strlen(s) > 160)
        sb_puts(b, "...");
}

char *export_nodes_text(const PlanLaunch *L) {
    StrBuf b;
    sb_init(&b);
    for (int i = 0; i < L->n_nodes; i++)
        sb_printf(&b, "%s%s", i ? ", " : "", L->nodes[i]);
    return sb_take(&b);
}

bool export_launch_empty(const PrimGraph *pg, const PlanLaunch *L) {
    bool empty = true;
    for (int j = 0; j < L->n_out; j++)
        empty = empty && (L->out[j] < 0 || tensor_numel(pg->tensors[L->out[j]]) == 0);
    return empty;
}

int export_open(const ArtifactContents *a, ExportPlan *x, Err *e) {
    memset(x, 0, sizeof *x);
    const char *path = x->path = a->path ? a->path : "<artefact>";
    int rc = artifact_import_model(a, path, &x->g, &x->pg, &x->P, e);
    const Plan *P = x->P;
    // What only orch can run: the interpreters have no place in the tree.
    for (int i = 0; rc == ST_OK && i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        x->generated = x->generated || L->kind == PLAN_GENERATED;
        if (L->kind != PLAN_INTERP && L->kind != PLAN_OPAQUE)
            continue;
        const Prim *p = x->pg->prims[L->sink];
        char *nodes = export_nodes_text(L);
        rc = err_set(e, ST_UNSUPPORTED,
                     "%s: launch %d (%s, ONNX nodes '%s') runs on orch's %s interpreter, which an "
                     "exported tree does not have: only a plan whose kernels are all generated "
                     "exports (orch info lists those that are not; orch compile --strict makes "
                     "sure)",
                     path, i,
                     L->kind == PLAN_OPAQUE && p->node ? p->node->op : prim_kind_name(p->kind),
                     nodes, L->kind == PLAN_OPAQUE ? "operator" : "primitive");
        free(nodes);
    }
    if (rc == ST_OK && x->generated && a->src_size == 0)
        rc = err_set(e, ST_UNSUPPORTED,
                     "%s: the artefact carries no kernel source (format %u, made by orch %s; orch "
                     "keeps it from format 6 on, for cuda artefacts from this orch on): compile "
                     "the model again with this orch to export it",
                     path, a->h.format_version, a->h.orch_version);
    if (rc == ST_OK) {
        x->blob = aligned_alloc(PLAN_ALIGN, (size_t)(P->const_bytes / PLAN_ALIGN + 1) * PLAN_ALIGN);
        if (!x->blob)
            rc = err_set(e, ST_RUNTIME, "%s: out of memory for the constants (%lld bytes)", path,
                         (long long)P->const_bytes);
        else
            plan_pack_constants(P, x->pg, x->blob);
    }
    return rc;
}

void export_close(ExportPlan *x) {
    free(x->blob);
    plan_free(x->P);
    prim_graph_free(x->pg);
    graph_free(x->g);
    memset(x, 0, sizeof *x);
}

int export_make_dir(const char *dir, Err *e) {
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return err_set(e, ST_RUNTIME, "%s: cannot create the folder: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, ST_USAGE, "%s: not a folder (orch export writes the source tree into it)",
                       dir);
    return ST_OK;
}

void export_model_h(StrBuf *b, const char *extra) {
    sb_puts(
        b,
        "// model.h (orch export): model_init loads the weights file, model_run runs the model,\n"
        "// model_free frees it. Buffers are dense, row-major, in model_inputs' / model_outputs' "
        "order.\n"
        "#ifndef ORCH_EXPORTED_MODEL_H\n"
        "#define ORCH_EXPORTED_MODEL_H\n"
        "#include <stddef.h>\n"
        "#ifdef __cplusplus\n"
        "extern \"C\" {\n"
        "#endif\n"
        "// name: the ONNX name; dtype: \"float32\", \"int64\", ...; bytes: the buffer's size.\n"
        "typedef struct ModelTensor { const char *name, *dtype; int rank; long long dims[8]; "
        "size_t bytes; } ModelTensor;\n"
        "extern const int model_num_inputs, model_num_outputs;\n"
        "extern const ModelTensor model_inputs[], model_outputs[];\n"
        "typedef struct Model Model;\n"
        "Model *model_init(const char *weights_path); // NULL on failure (the reason on stderr)\n"
        "// 0, or nonzero with the reason on stderr. One run at a time per Model.\n"
        "int model_run(Model *m, const void *const *inputs, void *const *outputs);\n");
    if (extra)
        sb_puts(b, extra);
    sb_puts(b, "void model_free(Model *m); // accepts NULL\n"
               "#ifdef __cplusplus\n"
               "}\n"
               "#endif\n"
               "#endif\n");
}

void export_model_intro(StrBuf *b, const ArtifactContents *a, const char *what) {
    sb_puts(b, "// The plan of ");
    export_c_comment(b, a->path ? a->path : "an artefact");
    sb_puts(b, " (input shapes ");
    export_c_comment(b, a->h.input_shapes);
    sb_puts(b, ")\n// ");
    for (const char *p = what; *p; p++) {
        sb_printf(b, "%c", *p);
        if (*p == '\n' && p[1])
            sb_puts(b, "// ");
    }
}

static void tensor_table(StrBuf *b, const char *name, const PrimGraph *pg, const int *ids, int n) {
    sb_printf(b, "const ModelTensor %s[] = {\n", name);
    for (int i = 0; i < n; i++) {
        const Tensor *t = pg->tensors[ids[i]];
        sb_puts(b, "    {");
        export_c_string(b, t->name);
        sb_printf(b, ", \"%s\", %d, {", dtype_name(t->dtype), t->rank);
        for (int d = 0; d < t->rank; d++)
            sb_printf(b, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
        sb_printf(b, "%s}, %zu},\n", t->rank ? "" : "0", tensor_nbytes(t));
    }
    if (n == 0)
        sb_puts(b, "    {0},\n");
    sb_puts(b, "};\n\n");
}

void export_tensor_tables(StrBuf *b, const PrimGraph *pg) {
    sb_printf(b, "\nconst int model_num_inputs = %d, model_num_outputs = %d;\n", pg->n_inputs,
              pg->n_outputs);
    tensor_table(b, "model_inputs", pg, pg->inputs, pg->n_inputs);
    tensor_table(b, "model_outputs", pg, pg->outputs, pg->n_outputs);
}

void export_read_weights(StrBuf *b, const ExportPlan *x) {
    sb_printf(b, "#define WEIGHTS_BYTES %lldull\n#define WEIGHTS_FNV1A 0x%016llxull\n\n",
              (long long)x->P->const_bytes,
              (unsigned long long)export_fnv1a64(x->blob, (size_t)x->P->const_bytes));
    sb_puts(b, "// Reads the weights file into buf (WEIGHTS_BYTES): NULL, or why it cannot.\n"
               "static const char *read_weights(const char *path, uint8_t *buf) {\n"
               "    FILE *f = fopen(path, \"rb\");\n"
               "    if (!f)\n"
               "        return \"cannot open the weights file\";\n"
               "    size_t got = fread(buf, 1, WEIGHTS_BYTES, f);\n"
               "    int extra = fgetc(f) != EOF;\n"
               "    fclose(f);\n"
               "    if (got != WEIGHTS_BYTES || extra)\n"
               "        return \"not this model's weights file (its size differs)\";\n"
               "    uint64_t h = 0xcbf29ce484222325ull;\n"
               "    for (size_t i = 0; i < got; i++)\n"
               "        h = (h ^ buf[i]) * 0x100000001b3ull;\n"
               "    return h == WEIGHTS_FNV1A ? NULL : \"damaged, or another model's (its checksum "
               "differs)\";\n"
               "}\n\n");
}

const char export_main_c[] =
    "// Runs the exported model: ./model [-r N] WEIGHTS IN... OUT... Each IN file holds one "
    "input's\n"
    "// raw bytes (dense, row-major, little-endian; numpy: x.tofile(path)), each OUT receives an\n"
    "// output's (numpy: np.fromfile(path, dtype).reshape(shape)), in model.h's order. -r N: N "
    "more\n"
    "// runs after the first, timed (min and median).\n"
    "#define _POSIX_C_SOURCE 200809L // clock_gettime under -std=c11\n"
    "#include \"model.h\"\n"
    "\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "#include <time.h>\n"
    "\n"
    "static void list(const char *what, const ModelTensor *t, int n) {\n"
    "    for (int i = 0; i < n; i++) {\n"
    "        fprintf(stderr, \"  %s %d: %s, %s [\", what, i + 1, t[i].name, t[i].dtype);\n"
    "        for (int d = 0; d < t[i].rank; d++)\n"
    "            fprintf(stderr, \"%s%lld\", d ? \", \" : \"\", t[i].dims[d]);\n"
    "        fprintf(stderr, \"], %zu bytes\\n\", t[i].bytes);\n"
    "    }\n"
    "}\n"
    "\n"
    "static double now_ms(void) {\n"
    "    struct timespec t;\n"
    "    clock_gettime(CLOCK_MONOTONIC, &t);\n"
    "    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;\n"
    "}\n"
    "\n"
    "static int cmp(const void *a, const void *b) {\n"
    "    double x = *(const double *)a, y = *(const double *)b;\n"
    "    return (x > y) - (x < y);\n"
    "}\n"
    "\n"
    "int main(int argc, char **argv) {\n"
    "    const char *prog = argv[0];\n"
    "    int ni = model_num_inputs, no = model_num_outputs, repeat = 0;\n"
    "    if (argc > 2 && strcmp(argv[1], \"-r\") == 0) {\n"
    "        repeat = atoi(argv[2]);\n"
    "        argc -= 2;\n"
    "        argv += 2;\n"
    "    }\n"
    "    if (argc != 2 + ni + no || repeat < 0) {\n"
    "        fprintf(stderr, \"usage: %s [-r N] WEIGHTS IN... OUT... (%d inputs, then %d "
    "outputs)\\n\",\n"
    "                prog, ni, no);\n"
    "        list(\"input\", model_inputs, ni);\n"
    "        list(\"output\", model_outputs, no);\n"
    "        return 2;\n"
    "    }\n"
    "    Model *m = model_init(argv[1]);\n"
    "    if (!m)\n"
    "        return 1;\n"
    "    void **in = calloc((size_t)ni + 1, sizeof(void *)), **out = calloc((size_t)no + 1, "
    "sizeof(void *));\n"
    "    int rc = 0;\n"
    "    for (int i = 0; i < ni && !rc; i++) {\n"
    "        size_t n = model_inputs[i].bytes;\n"
    "        FILE *f = fopen(argv[2 + i], \"rb\");\n"
    "        in[i] = malloc(n + 1);\n"
    "        if (!f || !in[i] || fread(in[i], 1, n, f) != n || fgetc(f) != EOF) {\n"
    "            fprintf(stderr, \"%s: cannot read input '%s' from it: %zu bytes expected\\n\",\n"
    "                    argv[2 + i], model_inputs[i].name, n);\n"
    "            rc = 1;\n"
    "        }\n"
    "        if (f)\n"
    "            fclose(f);\n"
    "    }\n"
    "    for (int i = 0; i < no && !rc; i++)\n"
    "        if (!(out[i] = malloc(model_outputs[i].bytes + 1)))\n"
    "            rc = 1;\n"
    "    if (!rc)\n"
    "        rc = model_run(m, (const void *const *)in, out);\n"
    "    if (!rc && repeat > 0) {\n"
    "        double *t = malloc(sizeof(double) * (size_t)repeat);\n"
    "        for (int r = 0; r < repeat && !rc; r++) {\n"
    "            double t0 = now_ms();\n"
    "            rc = model_run(m, (const void *const *)in, out);\n"
    "            t[r] = now_ms() - t0;\n"
    "        }\n"
    "        if (!rc) {\n"
    "            qsort(t, (size_t)repeat, sizeof *t, cmp);\n"
    "            printf(\"%d runs: min %.3f ms, median %.3f ms\\n\", repeat, t[0], t[repeat / "
    "2]);\n"
    "        }\n"
    "        free(t);\n"
    "    }\n"
    "    for (int i = 0; i < no && !rc; i++) {\n"
    "        FILE *f = fopen(argv[2 + ni + i], \"wb\");\n"
    "        size_t n = model_outputs[i].bytes;\n"
    "        if (!f || fwrite(out[i], 1, n, f) != n || fclose(f) != 0) {\n"
    "            fprintf(stderr, \"%s: cannot write output '%s'\\n\", argv[2 + ni + i],\n"
    "                    model_outputs[i].name);\n"
    "            rc = 1;\n"
    "        }\n"
    "    }\n"
    "    for (int i = 0; i < ni; i++)\n"
    "        free(in[i]);\n"
    "    for (int i = 0; i < no; i++)\n"
    "        free(out[i]);\n"
    "    free(in);\n"
    "    free(out);\n"
    "    model_free(m);\n"
    "    return rc;\n"
    "}\n";

static int write_file(const char *dir, const char *name, const void *data, size_t n, Err *e) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = xmalloc(len);
    snprintf(path, len, "%s/%s", dir, name);
    int rc = file_check_output(path, NULL, 0, e);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (rc == ST_OK && !f)
        rc = err_set(e, ST_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    if (f) {
        bool ok = (n == 0 || fwrite(data, 1, n, f) == n);
        ok = fclose(f) == 0 && ok;
        if (!ok)
            rc = err_set(e, ST_RUNTIME, "%s: write error: %s", path, strerror(errno));
    }
    free(path);
    return rc;
}

int export_write_files(const char *dir, const ExportFile *files, int n, Err *e) {
    int rc = ST_OK;
    for (int i = 0; i < n && rc == ST_OK; i++)
        rc = write_file(dir, files[i].name, files[i].data, files[i].size, e);
    return rc;
}
