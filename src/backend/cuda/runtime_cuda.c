// The CUDA target's run-time half (target.h's TargetRuntime): the GPU an artefact runs on, read
// through the driver API (cuda_hw_detect), and the sessions of session_cuda.h.
#include "cuda_api.h"
#include "session_cuda.h"

#include <string.h>

static int runtime_detect(int threads, HwInfo *hw, Err *e) {
    (void)threads; // the host threads of the interpreted kernels are the session's option
    CudaHw dev;
    return cuda_hw_detect(&dev, hw, e);
}

// A GPU's fingerprint names its model, architecture and memory: kernels built for one run as
// compiled only there.
static bool same_machine(const char *fingerprint, const HwInfo *now) {
    return strcmp(fingerprint, now->fingerprint) == 0;
}

const TargetRuntime target_runtime_cuda = {
    .name = "cuda",
    .detect = runtime_detect,
    .same_machine = same_machine,
    .session = &cuda_session_ops,
};
