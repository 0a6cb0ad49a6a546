// An artefact's model, imported again exactly as the compiler imported it: the ONNX bytes it
// carries with the header's input shapes and fission options, the clean-up passes, the storage
// and layout passes its flags record, then the stored plan checked against that graph
// (plan_read). Shared by every target's sessions.
// Needs: an artefact read by artifact_read. Guarantees: on success a graph, primitive graph and
// plan the caller owns (graph_free, prim_graph_free, plan_free); on failure none, and an error
// naming the file.
#ifndef ORCH_ARTIFACT_MODEL_H
#define ORCH_ARTIFACT_MODEL_H

#include "../prim/prim.h"
#include "artifact.h"
#include "plan.h"

int artifact_import_model(const ArtifactContents *a, const char *path, Graph **g, PrimGraph **pg,
                          Plan **plan, Err *e);

#endif
