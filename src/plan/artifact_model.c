// An artefact's model imported again (artifact_model.h).
#include "artifact_model.h"

#include "../fission/fission.h"
#include "../onnx/load.h"
#include "../ops/fold.h"
#include "../passes/passes.h"

#include <stdlib.h>

int artifact_import_model(const ArtifactContents *a, const char *path, Graph **g, PrimGraph **pg,
                          Plan **plan, Err *e) {
    *g = NULL;
    *pg = NULL;
    *plan = NULL;
    const ArtifactHeader *h = &a->h;
    char *spec = xstrdup(h->input_shapes);
    int max_shapes = 1;
    for (const char *q = spec; *q; q++)
        max_shapes += *q == ',';
    InputShape *shapes = xcalloc((size_t)max_shapes, sizeof(InputShape));
    // The weights section's tensors are imported in place: the graph borrows a's bytes.
    LoadOptions lo = {shapes, 0, a->weights, a->weights_size, a->mapped};
    int rc = *spec ? parse_input_shapes(spec, shapes, max_shapes, &lo.n_shapes, e) : ST_OK;
    if (rc)
        err_prefix(e, "%s: the header's input shapes: ", path);
    for (int i = 0; i < lo.n_shapes; i++)
        shapes[i].source = "the artefact's header";
    if (rc == ST_OK &&
        (rc = onnx_load_memory(a->onnx, a->onnx_size, path, NULL, &lo, g, e)) == ST_OK)
        rc = graph_infer_and_fold(*g, NULL, e);
    free(shapes);
    free(spec);
    FissionOptions fo = {.attention_rewrite = (h->load_flags & ARTIFACT_ATTENTION_REWRITE) != 0};
    if (rc == ST_OK)
        rc = fission_run(*g, &fo, pg, NULL, e);
    if (rc == ST_OK && !(h->load_flags & ARTIFACT_NO_CLEANUP))
        rc = fission_cleanup(*pg, NULL, e);
    if (rc == ST_OK && (h->load_flags & (ARTIFACT_STORE_F16 | ARTIFACT_STORE_BF16)))
        rc = pass_store_reduced_listed(
            *pg, h->load_flags & ARTIFACT_STORE_F16 ? DT_FLOAT16 : DT_BFLOAT16, h->wide_tensors,
            path, e);
    if (rc == ST_OK && (h->load_flags & ARTIFACT_LAYOUT_NHWC))
        rc = pass_channels_last(*pg, NULL, e);
    if (rc == ST_OK) {
        // The constants imported in place are hashed by the weights index's checksums: reading
        // the plan does not touch the weights' pages.
        PlanKnownHash *known = NULL;
        int n_known = artifact_weights_hashes(a, &known);
        rc = plan_read(a->plan, a->plan_size, *pg, path, known, n_known, plan, e);
        free(known);
    }
    if (rc == ST_OK && h->kernels != (*plan)->n_kernels)
        rc = err_set(e, ST_INVALID, "%s: corrupted: the header says %d kernels, the plan has %d",
                     path, h->kernels, (*plan)->n_kernels);
    if (rc) {
        plan_free(*plan);
        prim_graph_free(*pg);
        graph_free(*g);
        *plan = NULL;
        *pg = NULL;
        *g = NULL;
    }
    return rc;
}

int artifact_split_model(const void *onnx, size_t size, const char *name, uint8_t **onnx_out,
                         size_t *onnx_out_size, uint8_t **weights, size_t *weights_size, Err *e) {
    *weights = NULL;
    *weights_size = 0;
    uint8_t *payload = NULL;
    size_t payload_size = 0;
    OnnxWeightRef *refs = NULL;
    int n = 0;
    int rc = onnx_split_weights(onnx, size, name, ARTIFACT_WEIGHTS_MIN_BYTES, onnx_out,
                                onnx_out_size, &payload, &payload_size, &refs, &n, e);
    if (rc == ST_OK && n &&
        artifact_weights_section(payload, payload_size, refs, n, weights, weights_size))
        rc = err_set(e, ST_RUNTIME, "%s: out of memory for the weights section (%zu bytes)", name,
                     payload_size);
    if (rc) {
        free(*onnx_out);
        *onnx_out = NULL;
        *onnx_out_size = 0;
    }
    free(payload);
    onnx_weight_refs_free(refs, n);
    return rc;
}
