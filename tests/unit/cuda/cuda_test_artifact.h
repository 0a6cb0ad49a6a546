// The header of a CUDA artefact a test writes by hand (artifact_write / artifact_write_plans):
// target "cuda", hw's fingerprint (so a session on that GPU accepts it), the ONNX bytes' hash.
// Needs: nothing. Guarantees: no other field is set.
#ifndef ORCH_TEST_CUDA_ARTIFACT_H
#define ORCH_TEST_CUDA_ARTIFACT_H

#include "backend/cuda/cuda_api.h"
#include "plan/artifact.h"

#include <stdio.h>

static inline ArtifactHeader cuda_test_header(const CudaHw *hw, const void *onnx, size_t n) {
    HwInfo info;
    cuda_hw_info(hw, &info);
    ArtifactHeader h = {0};
    snprintf(h.orch_version, sizeof h.orch_version, "test");
    snprintf(h.target, sizeof h.target, "cuda");
    snprintf(h.fingerprint, sizeof h.fingerprint, "%s", info.fingerprint);
    h.model_hash = artifact_hash(onnx, n);
    return h;
}

#endif
