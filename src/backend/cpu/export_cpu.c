// orch export for the CPU target: one plan of an artefact written as a C source tree that builds
// with a C compiler, libm and OpenMP alone (docs/export.md). kernels.c is the artefact's kernel
// source verbatim; model.c the plan as straight-line calls over one arena at the plan's offsets,
// the constants read from weights.bin (the packed constant blob the session makes) and reordered
// once by the kernels' NAME_prepack as the session does; model.h its API; main.c a runner; a
// Makefile with the flags the artefact's module was built with. What every target's tree shares
// (the refusals, weights.bin, model.h, main.c) is export_tree.c's.
// Needs: a one-plan view of a CPU artefact of format 6 or later (it carries the kernel source).
// Guarantees: the tree computes what the artefact's session computes, kernel for kernel (same
// source, same compiler flags); a plan with a launch the tree cannot run (an interpreted
// primitive or operator) or an artefact without the source is refused naming why, and nothing
// is written.
#define _GNU_SOURCE
#include "../export_tree.h"
#include "cpu_backend.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// How model_init reorders the constants (the session's prepack_constants, decided here once):
// per launch input, -1 (read as placed), or the private copy it reads; per constant tensor,
// whether it is reordered in place in the blob, and by which launch and input.
typedef struct Prepack {
    CPrepackFn *pf;  // per launch (NULL: none)
    int *in_place_l; // per tensor: the launch that reorders it in place (-1: none)
    int *in_place_j;
    int *priv;  // per launch input slot (launch-major): private copy index, -1: none
    int *slot0; // per launch: its first input slot
    int n_priv;
    int64_t scratch; // the largest tensor reordered in place
} Prepack;

static void prepack_free(Prepack *pp) {
    free(pp->pf);
    free(pp->in_place_l);
    free(pp->in_place_j);
    free(pp->priv);
    free(pp->slot0);
}

static int plan_prepack(const Plan *P, void *dl, const char *path, Prepack *pp, Err *e) {
    memset(pp, 0, sizeof *pp);
    int nt = P->n_tensors, nl = P->n_launches, slots = 0;
    pp->pf = xcalloc((size_t)nl + 1, sizeof *pp->pf);
    pp->slot0 = xcalloc((size_t)nl + 1, sizeof(int));
    for (int i = 0; i < nl; i++) {
        pp->slot0[i] = slots;
        slots += P->launches[i].n_in;
        if (P->launches[i].kind != PLAN_GENERATED || !dl)
            continue;
        char name[160];
        ckernel_prepack_name(P->launches[i].symbol, name, sizeof name);
        void *f = dlsym(dl, name);
        if (f)
            memcpy(&pp->pf[i], &f, sizeof f);
    }
    pp->priv = xmalloc(sizeof(int) * ((size_t)slots + 1));
    for (int k = 0; k < slots; k++)
        pp->priv[k] = -1;
    int *own_l = xmalloc(sizeof(int) * ((size_t)nt + 1));
    int *own_j = xmalloc(sizeof(int) * ((size_t)nt + 1));
    bool *shared = xcalloc((size_t)nt + 1, sizeof(bool));
    pp->in_place_l = xmalloc(sizeof(int) * ((size_t)nt + 1));
    pp->in_place_j = xcalloc((size_t)nt + 1, sizeof(int));
    for (int t = 0; t < nt; t++)
        pp->in_place_l[t] = -1;
    // First pass: every reader of each tensor, as the session's.
    int rc = cpu_prepack_readers(P, pp->pf, path, own_l, own_j, shared, e);
    // Second pass: in place once where every reader wants one order, else a private copy per
    // reordering reader. Empty tensors need no reordering (they read the empty buffer).
    for (int i = 0; i < nl && rc == ST_OK; i++) {
        const PlanLaunch *L = &P->launches[i];
        for (int j = 0; j < L->n_in; j++) {
            int t = L->in[j];
            if (t < 0 || own_l[t] < 0 || P->tensors[t].bytes == 0 ||
                !(pp->pf[i] && pp->pf[i](j, NULL, NULL) == 1))
                continue;
            if (!shared[t]) {
                pp->in_place_l[t] = i;
                pp->in_place_j[t] = j;
                pp->scratch = ORCH_MAX(pp->scratch, P->tensors[t].bytes);
                own_l[t] = -1;
                continue;
            }
            pp->priv[pp->slot0[i] + j] = pp->n_priv++;
        }
    }
    free(own_l);
    free(own_j);
    free(shared);
    return rc;
}

// The C expression of tensor t's buffer as launch i's input j (j < 0: an output).
static void place_expr(StrBuf *b, const Plan *P, const Prepack *pp, int i, int j, int t) {
    if (t < 0) {
        sb_puts(b, "NULL");
        return;
    }
    const PlanTensor *T = &P->tensors[t];
    if (T->place == PLACE_INPUT) {
        sb_printf(b, "x[%d]", T->index);
        return;
    }
    if (T->place == PLACE_OUTPUT) {
        sb_printf(b, "y[%d]", T->index);
        return;
    }
    if (T->bytes == 0) {
        sb_puts(b, "empty");
        return;
    }
    if (T->place == PLACE_CONST) {
        int k = j >= 0 ? pp->priv[pp->slot0[i] + j] : -1;
        if (k >= 0)
            sb_printf(b, "m->priv[%d]", k);
        else
            sb_printf(b, "C + %lld", (long long)T->offset);
        return;
    }
    ORCH_ASSERT(T->place == PLACE_ARENA);
    sb_printf(b, "A + %lld", (long long)T->offset);
}

// The flags the artefact's shared object was built with (cbuild.c), less -shared: the same code
// for every kernel. OpenMP and libm are all the tree links.
static const char MAKEFILE[] =
    "# Builds the model orch export wrote: libmodel.a (model.c, kernels.c) and ./model, a runner.\n"
    "# The kernels' flags are those orch built the artefact's kernels with; another compiler or\n"
    "# -march computes the same values up to float rounding.\n"
    "CC ?= cc\n"
    "KERNEL_FLAGS = -O3 -march=native -fopenmp -fPIC -std=gnu11 -fno-math-errno\n"
    "CFLAGS ?= -O2\n"
    "\n"
    "all: model libmodel.a\n"
    "\n"
    "kernels.o: kernels.c\n"
    "\t$(CC) $(KERNEL_FLAGS) -w -c kernels.c -o $@\n"
    "\n"
    "model.o: model.c model.h\n"
    "\t$(CC) $(CFLAGS) -fPIC -std=gnu11 -c model.c -o $@\n"
    "\n"
    "libmodel.a: model.o kernels.o\n"
    "\t$(AR) rcs $@ model.o kernels.o\n"
    "\n"
    "model: main.c model.h libmodel.a\n"
    "\t$(CC) $(CFLAGS) -std=gnu11 main.c libmodel.a -fopenmp -lm -o $@\n"
    "\n"
    "clean:\n"
    "\trm -f model libmodel.a model.o kernels.o\n"
    "\n"
    ".PHONY: all clean\n";

// model.c: the plan as straight-line calls.
static void model_c(StrBuf *b, const ArtifactContents *a, const ExportPlan *x, const Prepack *pp) {
    const PrimGraph *pg = x->pg;
    const Plan *P = x->P;
    int ni = pg->n_inputs, no = pg->n_outputs;
    export_model_intro(b, a,
                       "as straight-line calls over one arena, written by orch export. The "
                       "kernels are in kernels.c;\nthe constants in weights.bin, reordered at "
                       "load for the kernels that read them in their own order.\n");
    sb_puts(b, "#include \"model.h\"\n\n#include <stdint.h>\n#include <stdio.h>\n#include "
               "<stdlib.h>\n#include <string.h>\n\n");
    // The kernels, each declared once.
    for (int i = 0; i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        if (L->kind != PLAN_GENERATED)
            continue;
        bool seen = false;
        for (int k = 0; k < i && !seen; k++)
            seen = P->launches[k].kind == PLAN_GENERATED &&
                   strcmp(P->launches[k].symbol, L->symbol) == 0;
        if (seen)
            continue;
        if (ckernel_op_abi(pg->prims[L->sink]))
            sb_printf(b, "int %s(const void *const *in, void *const *out);\n", L->symbol);
        else
            sb_printf(b, "void %s(const void *const *in, void *out);\n", L->symbol);
        if (pp->pf[i])
            sb_printf(b, "int %s_prepack(int input, const void *src, void *dst);\n", L->symbol);
    }
    export_tensor_tables(b, pg);
    sb_printf(b, "#define ARENA_BYTES %lldull\n#define SCRATCH_BYTES %lldull\n",
              (long long)P->arena_bytes, (long long)pp->scratch);
    export_read_weights(b, x);
    sb_printf(b,
              "struct Model {\n    uint8_t *arena, *consts;\n    void *priv[%d];\n"
              "    void *stage_in[%d], *stage_out[%d];\n};\n\n",
              pp->n_priv + 1, ni + 1, no + 1);
    sb_puts(b, "static _Alignas(64) uint8_t empty[64]; // what empty tensors point to\n\n"
               "// A zeroed buffer of n bytes (at least 64), 64-byte aligned as the kernels need.\n"
               "static void *buf64(size_t n) {\n"
               "    n = (n + 63) / 64 * 64;\n"
               "    void *p = aligned_alloc(64, n ? n : 64);\n"
               "    if (p)\n"
               "        memset(p, 0, n ? n : 64);\n"
               "    return p;\n"
               "}\n\n"
               "static int aligned64(const void *p) {\n"
               "    return ((uintptr_t)p & 63) == 0;\n"
               "}\n\n"
               "void model_free(Model *m) {\n"
               "    if (!m)\n"
               "        return;\n"
               "    free(m->arena);\n"
               "    free(m->consts);\n"
               "    for (size_t i = 0; i < sizeof m->priv / sizeof m->priv[0]; i++)\n"
               "        free(m->priv[i]);\n"
               "    for (int i = 0; i < model_num_inputs; i++)\n"
               "        free(m->stage_in[i]);\n"
               "    for (int i = 0; i < model_num_outputs; i++)\n"
               "        free(m->stage_out[i]);\n"
               "    free(m);\n"
               "}\n\n"
               "static Model *init_fail(Model *m, const char *path, const char *why) {\n"
               "    fprintf(stderr, \"model_init: %s: %s\\n\", path, why);\n"
               "    model_free(m);\n"
               "    return NULL;\n"
               "}\n\n"
               "Model *model_init(const char *weights_path) {\n"
               "    Model *m = calloc(1, sizeof *m);\n"
               "    if (!m)\n"
               "        return init_fail(m, weights_path, \"out of memory\");\n"
               "    m->arena = buf64(ARENA_BYTES);\n"
               "    m->consts = buf64(WEIGHTS_BYTES);\n"
               "    if (!m->arena || !m->consts)\n"
               "        return init_fail(m, weights_path, \"out of memory for the arena and "
               "constants\");\n"
               "    for (int i = 0; i < model_num_inputs; i++)\n"
               "        if (!(m->stage_in[i] = buf64(model_inputs[i].bytes)))\n"
               "            return init_fail(m, weights_path, \"out of memory\");\n"
               "    for (int i = 0; i < model_num_outputs; i++)\n"
               "        if (!(m->stage_out[i] = buf64(model_outputs[i].bytes)))\n"
               "            return init_fail(m, weights_path, \"out of memory\");\n"
               "    const char *bad = read_weights(weights_path, m->consts);\n"
               "    if (bad)\n"
               "        return init_fail(m, weights_path, bad);\n");
    // Reorders: in place through one scratch buffer, private copies each their own.
    if (pp->scratch)
        sb_puts(b, "    uint8_t *scratch = buf64(SCRATCH_BYTES);\n"
                   "    if (!scratch)\n"
                   "        return init_fail(m, weights_path, \"out of memory reordering the "
                   "weights\");\n");
    for (int t = 0; t < P->n_tensors; t++) {
        int i = pp->in_place_l[t];
        if (i < 0)
            continue;
        const PlanTensor *T = &P->tensors[t];
        sb_printf(b, "    %s_prepack(%d, m->consts + %lld, scratch); // in place, launch %d\n",
                  P->launches[i].symbol, pp->in_place_j[t], (long long)T->offset, i);
        sb_printf(b, "    memcpy(m->consts + %lld, scratch, %lld);\n", (long long)T->offset,
                  (long long)T->bytes);
    }
    if (pp->scratch)
        sb_puts(b, "    free(scratch);\n");
    for (int i = 0; i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        for (int j = 0; j < L->n_in; j++) {
            int k = pp->priv[pp->slot0[i] + j];
            if (k < 0)
                continue;
            const PlanTensor *T = &P->tensors[L->in[j]];
            sb_printf(b,
                      "    if (!(m->priv[%d] = buf64(%lld)))\n        return init_fail(m, "
                      "weights_path, \"out of memory reordering a weight\");\n",
                      k, (long long)ckernel_prepack_bytes(pp->pf[i], j, T->bytes));
            sb_printf(b, "    %s_prepack(%d, m->consts + %lld, m->priv[%d]); // launch %d's copy\n",
                      L->symbol, j, (long long)T->offset, k, i);
        }
    }
    sb_puts(b, "    return m;\n}\n\n");
    bool op_kernels = false;
    for (int i = 0; i < P->n_launches; i++)
        op_kernels = op_kernels || (P->launches[i].kind == PLAN_GENERATED &&
                                    ckernel_op_abi(pg->prims[P->launches[i].sink]));
    if (op_kernels)
        sb_puts(b,
                "static int run_fail(int launch, const char *kernel, const char *nodes, int st) {\n"
                "    fprintf(stderr, \"model_run: launch %d (%s, ONNX nodes %s): %s (status "
                "%d)\\n\", launch, kernel,\n"
                "            nodes, st == 1 ? \"an index operand is out of range\" : st == 2 ? "
                "\"out of memory\" : \"failed\", st);\n"
                "    return st;\n}\n\n");
    sb_printf(b,
              "int model_run(Model *m, const void *const *inputs, void *const *outputs) {\n"
              "    const uint8_t *x[%d];\n    uint8_t *y[%d];\n",
              ni + 1, no + 1);
    sb_puts(b, "    for (int i = 0; i < model_num_inputs; i++) {\n"
               "        size_t n = model_inputs[i].bytes;\n"
               "        if (n && !inputs[i]) {\n"
               "            fprintf(stderr, \"model_run: input '%s' has no buffer\\n\", "
               "model_inputs[i].name);\n"
               "            return 1;\n"
               "        }\n"
               "        x[i] = !n ? empty : aligned64(inputs[i]) ? inputs[i] : "
               "memcpy(m->stage_in[i], inputs[i], n);\n"
               "    }\n"
               "    for (int i = 0; i < model_num_outputs; i++) {\n"
               "        size_t n = model_outputs[i].bytes;\n"
               "        if (n && !outputs[i]) {\n"
               "            fprintf(stderr, \"model_run: output '%s' has no buffer\\n\", "
               "model_outputs[i].name);\n"
               "            return 1;\n"
               "        }\n"
               "        y[i] = !n ? empty : aligned64(outputs[i]) ? outputs[i] : m->stage_out[i];\n"
               "    }\n"
               "    uint8_t *A = m->arena;\n"
               "    const uint8_t *C = m->consts;\n"
               "    (void)A;\n    (void)C;\n");
    for (int i = 0; i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        char *nodes = export_nodes_text(L);
        sb_printf(b, "    // launch %d: ", i);
        if (L->kind == PLAN_COPY) {
            sb_puts(b, "copy into output ");
            export_c_comment(b, pg->tensors[pg->outputs[L->copy_to]]->name);
            sb_puts(b, "\n");
            int64_t bytes = P->tensors[L->in[0]].bytes;
            if (bytes) {
                sb_printf(b, "    if ((const void *)y[%d] != (const void *)(", L->copy_to);
                place_expr(b, P, pp, i, 0, L->in[0]);
                sb_printf(b, "))\n        memmove(y[%d], ", L->copy_to);
                place_expr(b, P, pp, i, 0, L->in[0]);
                sb_printf(b, ", %lld);\n", (long long)bytes);
            }
            free(nodes);
            continue;
        }
        sb_printf(b, "%s, ONNX nodes ", L->symbol);
        export_c_comment(b, nodes);
        sb_puts(b, "\n");
        bool empty = true;
        for (int j = 0; j < L->n_out; j++)
            empty = empty && (L->out[j] < 0 || tensor_numel(pg->tensors[L->out[j]]) == 0);
        if (empty) {
            sb_puts(b, "    // (every output is empty: nothing to compute)\n");
            free(nodes);
            continue;
        }
        sb_printf(b, "    {\n        const void *in[%d] = {", ORCH_MAX(L->n_in, 1));
        for (int j = 0; j < L->n_in; j++) {
            sb_puts(b, j ? ", " : "");
            place_expr(b, P, pp, i, j, L->in[j]);
        }
        sb_puts(b, L->n_in ? "};\n" : "0};\n");
        if (ckernel_op_abi(pg->prims[L->sink])) {
            sb_printf(b, "        void *const out[%d] = {", ORCH_MAX(L->n_out, 1));
            for (int j = 0; j < L->n_out; j++) {
                sb_puts(b, j ? ", " : "");
                place_expr(b, P, pp, i, -1, L->out[j]);
            }
            sb_printf(b,
                      "%s};\n        int st = %s(in, out);\n        if (st)\n"
                      "            return run_fail(%d, \"%s\", ",
                      L->n_out ? "" : "0", L->symbol, i, L->symbol);
            export_c_string(b, nodes);
            sb_puts(b, ", st);\n");
        } else {
            sb_printf(b, "        %s(in, ", L->symbol);
            place_expr(b, P, pp, i, -1, L->out[0]);
            sb_puts(b, ");\n");
        }
        sb_puts(b, "    }\n");
        free(nodes);
    }
    sb_puts(b, "    for (int i = 0; i < model_num_outputs; i++)\n"
               "        if (model_outputs[i].bytes && y[i] != outputs[i])\n"
               "            memcpy(outputs[i], y[i], model_outputs[i].bytes);\n"
               "    return 0;\n}\n");
}

int cpu_export_tree(const ArtifactContents *a, const char *dir, FILE *progress, Err *e) {
    ExportPlan x;
    int rc = export_open(a, &x, e);
    void *dl = NULL;
    int memfd = -1;
    if (rc == ST_OK && x.generated)
        rc = cpu_load_object(a->so, a->so_size, x.path, &dl, &memfd, e);
    Prepack pp = {0};
    if (rc == ST_OK)
        rc = plan_prepack(x.P, dl, x.path, &pp, e);
    if (rc == ST_OK)
        rc = export_make_dir(dir, e);
    StrBuf mc, mh;
    sb_init(&mc);
    sb_init(&mh);
    if (rc == ST_OK) {
        model_c(&mc, a, &x, &pp);
        export_model_h(&mh, NULL);
        const ExportFile files[] = {
            {"kernels.c", x.generated ? (const char *)a->src : "", x.generated ? a->src_size : 0},
            {"weights.bin", x.blob, (size_t)x.P->const_bytes},
            {"model.c", mc.s, strlen(mc.s)},
            {"model.h", mh.s, strlen(mh.s)},
            {"main.c", export_main_c, strlen(export_main_c)},
            {"Makefile", MAKEFILE, strlen(MAKEFILE)},
        };
        rc = export_write_files(dir, files, (int)ORCH_COUNT(files), e);
    }
    if (rc == ST_OK && progress)
        fprintf(progress,
                "exported %s to %s/: %d launches (%d kernels), kernels.c %.1f KiB, weights.bin "
                "%.2f MiB, arena %.2f MiB; build with make -C %s\n",
                x.path, dir, x.P->n_launches, x.P->n_kernels, (double)a->src_size / 1024.0,
                (double)x.P->const_bytes / 1048576.0, (double)x.P->arena_bytes / 1048576.0, dir);
    sb_free(&mc);
    sb_free(&mh);
    prepack_free(&pp);
    if (dl)
        dlclose(dl);
    if (memfd >= 0)
        close(memfd);
    export_close(&x);
    return rc;
}
