// orch export for the CUDA target (export_cuda.c): the target's export_tree slot.
// Needs: a one-plan view of a CUDA artefact (artifact_plan_view). Guarantees: export_cuda.c's.
#ifndef ORCH_EXPORT_CUDA_H
#define ORCH_EXPORT_CUDA_H

#include "../../plan/artifact.h"

#include <stdio.h>

int cuda_export_tree(const ArtifactContents *a, const char *dir, FILE *progress, Err *e);

#endif
