// `orch export MODEL.orch DIR [--shapes N]`: one plan of a compiled artefact (the first, or
// --shapes N's) written into DIR as a source tree that builds and runs without orch
// (docs/export.md): a C tree for a cpu artefact, a CUDA tree (nvcc, NVRTC) for a cuda one.
// Needs: an artefact of a target with an export (cpu, cuda). Guarantees: a
// usage error before any work for bad arguments; a target without an export, an artefact
// without the kernel source or a plan an interpreter runs part of refused with one message.
#include "cmd_export.h"

#include "../backend/target.h"
#include "../plan/artifact.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int export_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "orch export: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: orch export MODEL.orch DIR [--shapes N]\n"
                    "  writes a source tree that builds (make -C DIR: cc for a cpu artefact, "
                    "nvcc and NVRTC\n  for a cuda one) and runs the model without orch "
                    "(docs/export.md)\n");
    return ST_USAGE;
}

int cli_export_main(int argc, char **argv) {
    const char *model = NULL, *dir = NULL;
    int shape_set = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--shapes") == 0) {
            if (i + 1 == argc)
                return export_usage("%s needs a value", s);
            const char *v = argv[++i];
            char *end;
            errno = 0;
            long n = strtol(v, &end, 10);
            if (end == v || *end || errno || n < 1 || n > ARTIFACT_MAX_PLANS)
                return export_usage("--shapes expects a shape set's number (1 to 16, as orch info "
                                    "lists them), got '%s'",
                                    v);
            shape_set = (int)n;
        } else if (s[0] == '-' && s[1]) {
            return export_usage("unknown option '%s'", s);
        } else if (!model) {
            model = s;
        } else if (!dir) {
            dir = s;
        } else {
            return export_usage("one artefact and one folder, got a third argument '%s'", s);
        }
    }
    if (!model || !dir)
        return export_usage("%s", "needs an artefact (orch compile's MODEL.orch) and a folder");
    Err e = {0};
    ArtifactContents ac = {0};
    int rc = artifact_read(model, &ac, &e);
    const Target *t = rc ? NULL : target_find(ac.h.target);
    if (rc == ST_OK && !t)
        rc = err_set(&e, ST_UNSUPPORTED, "%s was compiled for target '%s', which this orch lacks",
                     model, ac.h.target);
    if (rc == ST_OK && !t->export_tree)
        rc = err_set(&e, ST_UNSUPPORTED,
                     "%s: export of %s artefacts is not supported (cpu and cuda artefacts are)",
                     model, ac.h.target);
    if (rc == ST_OK && shape_set > ac.n_plans)
        rc = err_set(&e, ST_USAGE, "--shapes %d: %s serves %d shape set%s", shape_set, model,
                     ac.n_plans, ac.n_plans == 1 ? "" : "s");
    if (rc == ST_OK) {
        ArtifactContents view;
        artifact_plan_view(&ac, shape_set ? shape_set - 1 : 0, &view);
        if (ac.n_plans > 1)
            printf("shape set %d of %d: %s%s\n", shape_set ? shape_set : 1, ac.n_plans,
                   view.h.input_shapes, shape_set ? "" : " (--shapes N exports another)");
        rc = t->export_tree(&view, dir, stdout, &e);
    }
    artifact_contents_free(&ac);
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "orch: error: %s\n", e.msg);
    }
    return rc;
}
