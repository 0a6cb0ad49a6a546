// The targets this build has, by name, and the C kernel ABI's names (target.h).
#include "target.h"

#include <stdio.h>
#include <string.h>

const Target *target_find(const char *name) {
    if (name && (strcmp(name, "cpu") == 0 || strcmp(name, "c") == 0))
        return &target_cpu;
    if (name && strcmp(name, "cuda") == 0)
        return &target_cuda;
    return NULL;
}

void ckernel_prepack_name(const char *kernel, char *buf, size_t n) {
    snprintf(buf, n, "%s_prepack", kernel);
}
