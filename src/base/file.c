// Whole-file reading with the checks every reader of user files needs (see file.h).
#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int file_read_all(const char *path, int64_t max, uint8_t **data, size_t *size, Err *e) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ST_INVALID, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return err_set(e, ST_INVALID, "%s: not a regular file", path);
    }
    if (st.st_size > max) {
        fclose(f);
        return err_set(e, ST_INVALID,
                       "%s: file is %lld bytes, over the %lld-byte limit for this kind of file "
                       "(ONNX models: store large weights as external data)",
                       path, (long long)st.st_size, (long long)max);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return err_set(e, ST_RUNTIME, "%s: out of memory reading %zu bytes", path, n);
    }
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return err_set(e, ST_INVALID, "%s: read error", path);
    }
    fclose(f);
    *data = buf;
    *size = n;
    return ST_OK;
}
