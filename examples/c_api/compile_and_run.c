// A small program using orch's C API: compiles an ONNX model for the CPU (or loads an artefact
// compiled earlier), runs it on a constant input and prints the first outputs.
//
// usage: orch_example MODEL.onnx|MODEL.orch [OUT.orch [INPUT_SHAPES]...]
//   MODEL.onnx is compiled into OUT.orch (default: MODEL.onnx's name with .orch), then run;
//   INPUT_SHAPES binds symbolic dimensions as `orch compile --input-shapes` does
//   (examples/tiny_cnn/model.onnx has a symbolic batch: image:1x3x32x32); several compile one
//   plan per shape set into the one artefact (image:1x3x32x32 image:4x3x32x32), and every set
//   is run.
#include "orch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(orch_ctx *ctx, const char *what) {
    fprintf(stderr, "%s: %s\n", what, orch_last_error(ctx));
    return (int)orch_last_status(ctx);
}

// Runs shape set `set` of s on a constant input (every float 0.5, other types 0) and prints the
// first values of each output.
static int run_set(orch_ctx *ctx, orch_session *s, int set) {
    int ni = orch_session_num_inputs(s), no = orch_session_num_outputs(s);
    orch_tensor *in = calloc((size_t)ni + 1, sizeof *in),
                *outs = calloc((size_t)no + 1, sizeof *outs);
    for (int i = 0; i < ni; i++) {
        orch_session_shape_set_input_info(s, set, i, &in[i]);
        in[i].data = calloc(1, in[i].nbytes + 1); // zeros: ints are valid indices too
        if (in[i].dtype == ORCH_FLOAT32)
            for (size_t k = 0; k < in[i].nbytes / 4; k++)
                ((float *)in[i].data)[k] = 0.5f;
    }
    for (int i = 0; i < no; i++) {
        orch_session_shape_set_output_info(s, set, i, &outs[i]);
        outs[i].data = malloc(outs[i].nbytes + 1);
    }
    int rc = 0;
    if (orch_session_run(ctx, s, in, ni, outs, no) != ORCH_OK)
        rc = die(ctx, "run");
    for (int i = 0; i < no && rc == 0; i++) {
        printf("%s:", outs[i].name);
        for (size_t k = 0; k < 4 && k < outs[i].nbytes / 4 && outs[i].dtype == ORCH_FLOAT32; k++)
            printf(" %.6g", ((float *)outs[i].data)[k]);
        printf("%s\n", outs[i].nbytes > 16 ? " ..." : "");
    }
    for (int i = 0; i < ni; i++)
        free(in[i].data);
    for (int i = 0; i < no; i++)
        free(outs[i].data);
    free(in);
    free(outs);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.onnx|MODEL.orch [OUT.orch [INPUT_SHAPES]...]\n", argv[0]);
        return 1;
    }
    orch_ctx *ctx = orch_ctx_create();
    const char *artefact = argv[1];
    char out[4096];
    size_t n = strlen(argv[1]);
    if (n > 5 && strcmp(argv[1] + n - 5, ".onnx") == 0) {
        if (argc > 2)
            snprintf(out, sizeof out, "%s", argv[2]);
        else
            snprintf(out, sizeof out, "%.*s.orch", (int)(n - 5), argv[1]);
        orch_compile_options co = {.target = "cpu", .top_k = 2, .verbose = 1};
        if (argc > 4) { // several shape sets: one plan each
            co.shape_sets = (const char *const *)argv + 3;
            co.n_shape_sets = argc - 3;
        } else if (argc > 3) {
            co.input_shapes = argv[3];
        }
        if (orch_compile(ctx, argv[1], &co, out) != ORCH_OK)
            return die(ctx, "compile");
        artefact = out;
    }
    orch_session *s = NULL;
    if (orch_session_create(ctx, artefact, NULL, &s) != ORCH_OK)
        return die(ctx, "load");
    int rc = 0, sets = orch_session_num_shape_sets(s);
    for (int k = 0; k < sets && rc == 0; k++) {
        if (sets > 1)
            printf("shape set %d of %d\n", k + 1, sets);
        rc = run_set(ctx, s, k);
    }
    orch_session_free(s);
    orch_ctx_free(ctx);
    return rc;
}
