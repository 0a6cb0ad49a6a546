// Whole-file reading with the checks every reader of user files needs (see file.h).
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *file_open_regular(const char *path, Err *e) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        err_set(e, ST_INVALID, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        err_set(e, ST_INVALID, "%s: not a regular file", path);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        err_set(e, ST_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int file_check_output(const char *path, const char *const *inputs, int n, Err *e) {
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return err_set(e, ST_USAGE,
                           "%s: not a regular file (%s); orch writes its outputs as regular files "
                           "only and never replaces anything else",
                           path,
                           S_ISLNK(st.st_mode)    ? "a symbolic link"
                           : S_ISDIR(st.st_mode)  ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                        : "a special file");
        for (int i = 0; i < n; i++) {
            struct stat in;
            if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev &&
                in.st_ino == st.st_ino)
                return err_set(e, ST_USAGE,
                               "%s is also this command's input %s: orch never writes over an "
                               "input; choose another output path",
                               path, inputs[i]);
        }
    } else if (errno != ENOENT) {
        return err_set(e, ST_USAGE, "%s: %s", path, strerror(errno));
    }
    char *copy = xstrdup(path);
    const char *dir = dirname(copy);
    int rc = ST_OK;
    struct stat ds;
    if (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode))
        rc = err_set(e, ST_USAGE, "%s: its folder %s does not exist", path, dir);
    else if (access(dir, W_OK) != 0)
        rc = err_set(e, ST_USAGE, "%s: cannot write into its folder %s: %s", path, dir,
                     strerror(errno));
    free(copy);
    return rc;
}

int file_read_all(const char *path, int64_t max, uint8_t **data, size_t *size, Err *e) {
    FILE *f = file_open_regular(path, e);
    if (!f)
        return e->code;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
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
