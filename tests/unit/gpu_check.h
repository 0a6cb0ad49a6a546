// The GPU test cases' rule for machines without what they need: the case prints a skip line
// saying why, or fails where ORCH_REQUIRE_GPU is set and not "0" (as tests/gpu/run_gpu_tests.sh
// sets it on a GPU machine). Call it inside a RUN case (RUN resets a failure recorded outside).
#ifndef ORCH_TEST_GPU_CHECK_H
#define ORCH_TEST_GPU_CHECK_H

#include "check.h"

#include "backend/cuda/cuda_api.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>

// The current case lacks its GPU, for the reason printf(fmt, ...) gives: "  skip: REASON", or a
// failure of the case with the reason under ORCH_REQUIRE_GPU.
__attribute__((format(printf, 1, 2))) static inline void gpu_check_skip(const char *fmt, ...) {
    char why[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *req = getenv("ORCH_REQUIRE_GPU");
    CHECK_MSG(!(req && *req && strcmp(req, "0") != 0), "ORCH_REQUIRE_GPU is set, but: %s", why);
    printf("  skip: %s\n", why);
}

// Whether the CUDA driver loads and counts a device; without one, gpu_check_skip's line.
static inline bool gpu_check_have_device(void) {
    Err e = {0};
    if (cuda_api_load(&e))
        return true;
    gpu_check_skip("no CUDA device on this machine (%s)", e.msg);
    return false;
}

#endif
