// The targets this build has, by name (target.h).
#include "target.h"

#include <string.h>

const Target *target_find(const char *name) {
    if (name && (strcmp(name, "cpu") == 0 || strcmp(name, "c") == 0))
        return &target_cpu;
    if (name && strcmp(name, "cuda") == 0)
        return &target_cuda;
    return NULL;
}
