// The generated test models' folders (tests/models/gen_models.py): what a unit test that walks
// them needs beside the ONNX file. Needs nothing; guarantees a malloc'd string or NULL.
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The value of --input-shapes in DIR/args.txt, or NULL (malloc'd).
static inline char *input_shapes_arg(const char *dir) {
    char path[4096], text[8192];
    snprintf(path, sizeof path, "%s/args.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *p = strstr(text, "--input-shapes");
    if (!p)
        return NULL;
    p += strlen("--input-shapes");
    while (*p == ' ' || *p == '\t' || *p == '=')
        p++;
    size_t len = strcspn(p, " \t\r\n#");
    char *r = malloc(len + 1);
    if (!r)
        return NULL;
    memcpy(r, p, len);
    r[len] = 0;
    return r;
}
