// The run-time halves of the targets this build has, by name, and the C kernel ABI's names
// (target.h): all of src/backend that a program running artefacts links besides the sessions.
#include "target.h"

#include <stdio.h>
#include <string.h>

const TargetRuntime *target_runtime_find(const char *name) {
    if (name && (strcmp(name, "cpu") == 0 || strcmp(name, "c") == 0))
        return &target_runtime_cpu;
    if (name && strcmp(name, "cuda") == 0)
        return &target_runtime_cuda;
    return NULL;
}

void ckernel_prepack_name(const char *kernel, char *buf, size_t n) {
    snprintf(buf, n, "%s_prepack", kernel);
}
