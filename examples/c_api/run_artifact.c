// A program that only runs artefacts: it links liborch-runtime (pkg-config orch-runtime), which
// has no compiler, solver or database. It loads MODEL.orch (compiled earlier by `orch compile`
// or orch_compile), runs it on a constant input (every float 0.5, other types 0) and prints the
// first outputs, as compile_and_run.c does for the same artefact: for each of its shape sets
// where it was compiled for several.
//
// usage: orch_run_artifact MODEL.orch
#include "orch.h"

#include <stdio.h>
#include <stdlib.h>

// Runs shape set `set` of s and prints the first values of each output; 0 or the status.
static int run_set(orch_ctx *ctx, orch_session *s, int set) {
    int ni = orch_session_num_inputs(s), no = orch_session_num_outputs(s);
    orch_tensor *in = calloc((size_t)ni + 1, sizeof *in),
                *out = calloc((size_t)no + 1, sizeof *out);
    for (int i = 0; i < ni; i++) {
        orch_session_shape_set_input_info(s, set, i, &in[i]);
        in[i].data = calloc(1, in[i].nbytes + 1);
        for (size_t k = 0; in[i].dtype == ORCH_FLOAT32 && k < in[i].nbytes / 4; k++)
            ((float *)in[i].data)[k] = 0.5f;
    }
    for (int i = 0; i < no; i++) {
        orch_session_shape_set_output_info(s, set, i, &out[i]);
        out[i].data = malloc(out[i].nbytes + 1);
    }
    int rc = 0;
    if (orch_session_run(ctx, s, in, ni, out, no) != ORCH_OK) {
        fprintf(stderr, "run: %s\n", orch_last_error(ctx));
        rc = (int)orch_last_status(ctx);
    }
    for (int i = 0; i < no && rc == 0; i++) {
        printf("%s:", out[i].name);
        for (size_t k = 0; k < 4 && k < out[i].nbytes / 4 && out[i].dtype == ORCH_FLOAT32; k++)
            printf(" %.6g", ((float *)out[i].data)[k]);
        printf("%s\n", out[i].nbytes > 16 ? " ..." : "");
    }
    for (int i = 0; i < ni; i++)
        free(in[i].data);
    for (int i = 0; i < no; i++)
        free(out[i].data);
    free(in);
    free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.orch\n", argv[0]);
        return 1;
    }
    orch_ctx *ctx = orch_ctx_create();
    orch_session *s = NULL;
    if (orch_session_create(ctx, argv[1], NULL, &s) != ORCH_OK) {
        fprintf(stderr, "load: %s\n", orch_last_error(ctx));
        int st = (int)orch_last_status(ctx);
        orch_ctx_free(ctx);
        return st;
    }
    fprintf(stderr, "liborch-runtime %s (built against %s)\n", orch_version(), ORCH_VERSION);
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
