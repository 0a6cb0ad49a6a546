// An artefact's model, imported again exactly as the compiler imported it: the ONNX bytes it
// carries with the header's input shapes and fission options, the clean-up passes, the storage
// and layout passes its flags record, then the stored plan checked against that graph
// (plan_read). Shared by every target's sessions.
// Needs: an artefact read by artifact_read. Guarantees: on success a graph, primitive graph and
// plan the caller owns (graph_free, prim_graph_free, plan_free), whose constants from the weights
// section point into the artefact's bytes (the caller keeps them alive: the contents, or
// artifact_file_retain); on failure none, and an error naming the file.
#ifndef ORCH_ARTIFACT_MODEL_H
#define ORCH_ARTIFACT_MODEL_H

#include "../prim/prim.h"
#include "artifact.h"
#include "plan.h"

// The ONNX bytes an artefact carries split in two (artifact.h, format 7): *onnx_out the model
// whose initializers of ARTIFACT_WEIGHTS_MIN_BYTES or more refer to *weights, the weights
// section (both malloc'd); both NULL where no initializer is that large (the bytes go as they
// are). The model's constants are unchanged: only where their bytes lie.
int artifact_split_model(const void *onnx, size_t size, const char *name, uint8_t **onnx_out,
                         size_t *onnx_out_size, uint8_t **weights, size_t *weights_size, Err *e);

int artifact_import_model(const ArtifactContents *a, const char *path, Graph **g, PrimGraph **pg,
                          Plan **plan, Err *e);

#endif
