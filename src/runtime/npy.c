// .npy reader/writer (see npy.h). The header is a Python dict literal; we parse only the three
// keys numpy writes (descr, fortran_order, shape) and reject anything else we cannot honour.
#include "npy.h"

#include "../base/file.h"
#include "../onnx/load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
    const char *code; // numpy type code without the byte-order character
    DType dtype;
} npy_types[] = {
    {"f4", DT_FLOAT}, {"f8", DT_DOUBLE}, {"f2", DT_FLOAT16}, {"i8", DT_INT64},
    {"i4", DT_INT32}, {"i2", DT_INT16},  {"i1", DT_INT8},    {"u1", DT_UINT8},
    {"u2", DT_UINT16}, {"u4", DT_UINT32}, {"u8", DT_UINT64}, {"b1", DT_BOOL},
};

void host_tensor_free(HostTensor *t) {
    if (t) {
        free(t->data);
        t->data = NULL;
    }
}

// Finds 'key' in the header dict and returns a pointer just past the following ':'.
static const char *dict_value(const char *h, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(h, pat);
    }
    if (!p)
        return NULL;
    p = strchr(p + strlen(pat), ':');
    if (!p)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

int npy_read_memory(const void *buf, size_t size, const char *name, HostTensor *t, Err *e) {
    const unsigned char *b = buf;
    memset(t, 0, sizeof *t);
    if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return err_set(e, ST_INVALID, "%s: not a .npy file (bad magic)", name);
    int major = b[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12)
            return err_set(e, ST_INVALID, "%s: truncated .npy header", name);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hoff = 12;
    } else {
        return err_set(e, ST_INVALID, "%s: unsupported .npy version %d", name, major);
    }
    if (hlen > size - hoff || hlen > (1 << 20))
        return err_set(e, ST_INVALID, "%s: truncated .npy header", name);
    char *h = xmalloc(hlen + 1);
    memcpy(h, b + hoff, hlen);
    h[hlen] = 0;
    int rc = ST_OK;
    const char *descr = dict_value(h, "descr");
    const char *fortran = dict_value(h, "fortran_order");
    const char *shape = dict_value(h, "shape");
    if (!descr || !fortran || !shape) {
        rc = err_set(e, ST_INVALID, "%s: .npy header lacks descr, fortran_order or shape", name);
        goto done;
    }
    if (strncmp(fortran, "False", 5) != 0) {
        rc = err_set(e, ST_UNSUPPORTED, "%s: Fortran-ordered arrays are not supported; save with "
                                        "np.ascontiguousarray", name);
        goto done;
    }
    char q = *descr;
    if ((q != '\'' && q != '"') || !descr[1] || !descr[2] || !descr[3] || descr[4] != q) {
        rc = err_set(e, ST_UNSUPPORTED, "%s: unsupported .npy dtype %.16s", name, descr);
        goto done;
    }
    char order = descr[1];
    if (order == '>' && !(descr[3] == '1')) {
        rc = err_set(e, ST_UNSUPPORTED, "%s: big-endian .npy data is not supported", name);
        goto done;
    }
    t->dtype = DT_UNDEFINED;
    for (size_t i = 0; i < ORCH_COUNT(npy_types); i++)
        if (descr[2] == npy_types[i].code[0] && descr[3] == npy_types[i].code[1])
            t->dtype = npy_types[i].dtype;
    if (t->dtype == DT_UNDEFINED || (order != '<' && order != '|' && order != '=' && order != '>')) {
        rc = err_set(e, ST_UNSUPPORTED, "%s: unsupported .npy dtype %.6s", name, descr);
        goto done;
    }
    if (*shape != '(') {
        rc = err_set(e, ST_INVALID, "%s: bad shape in .npy header", name);
        goto done;
    }
    const char *p = shape + 1;
    int64_t numel = 1;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || t->rank >= ORCH_MAX_RANK ||
            mul_overflows_i64(numel, v, &numel)) {
            rc = err_set(e, ST_INVALID, "%s: bad or too many dimensions in .npy shape", name);
            goto done;
        }
        t->dims[t->rank++] = v;
        p = end;
    }
    size_t es = dtype_size(t->dtype), off = hoff + hlen;
    int64_t nbytes;
    if (mul_overflows_i64(numel, (int64_t)es, &nbytes)) {
        rc = err_set(e, ST_INVALID,
                     "%s: .npy data is %zu bytes, its shape needs more than 2^63 (%lld elements "
                     "of %zu bytes)",
                     name, size - off, (long long)numel, es);
        goto done;
    }
    if ((uint64_t)nbytes != size - off) {
        rc = err_set(e, ST_INVALID, "%s: .npy data is %zu bytes, its shape needs %lld", name,
                     size - off, (long long)nbytes);
        goto done;
    }
    t->data = malloc(nbytes ? (size_t)nbytes : 1);
    if (!t->data) {
        rc = err_set(e, ST_RUNTIME, "%s: out of memory", name);
        goto done;
    }
    if (nbytes)
        memcpy(t->data, b + off, (size_t)nbytes);
done:
    free(h);
    return rc;
}

int npy_read(const char *path, HostTensor *t, Err *e) {
    memset(t, 0, sizeof *t);
    uint8_t *buf;
    size_t n;
    int rc = file_read_all(path, INT64_MAX, &buf, &n, e);
    if (rc)
        return rc;
    rc = npy_read_memory(buf, n, path, t, e);
    free(buf);
    return rc;
}

int tensor_file_read(const char *path, HostTensor *t, Err *e) {
    size_t len = strlen(path);
    if (len > 3 && strcmp(path + len - 3, ".pb") == 0) {
        memset(t, 0, sizeof *t);
        return onnx_read_tensor_file(path, &t->dtype, &t->rank, t->dims, &t->data, e);
    }
    return npy_read(path, t, e);
}

int npy_write(const char *path, DType dtype, int rank, const int64_t *dims, const void *data,
              Err *e) {
    const char *code = NULL;
    for (size_t i = 0; i < ORCH_COUNT(npy_types); i++)
        if (npy_types[i].dtype == dtype)
            code = npy_types[i].code;
    if (!code)
        return err_set(e, ST_UNSUPPORTED, "%s: cannot write dtype %s as .npy", path,
                       dtype_name(dtype));
    char h[512];
    int len = snprintf(h, sizeof h, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                       dtype_size(dtype) == 1 ? '|' : '<', code);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        len += snprintf(h + len, sizeof h - (size_t)len, "%lld,%s", (long long)dims[i],
                        i + 1 < rank ? " " : "");
        if (dims[i] < 0 || mul_overflows_i64(numel, dims[i], &numel))
            return err_set(e, ST_INVALID, "%s: cannot write a tensor of shape with %lld at axis %d",
                           path, (long long)dims[i], i);
    }
    int64_t nbytes_i;
    if (mul_overflows_i64(numel, (int64_t)dtype_size(dtype), &nbytes_i))
        return err_set(e, ST_INVALID, "%s: a tensor of %lld elements is too large to write", path,
                       (long long)numel);
    if (rank > 1)
        len--; // numpy writes "(1, 2)" but "(3,)" for rank 1
    len += snprintf(h + len, sizeof h - (size_t)len, "), }");
    // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return err_set(e, ST_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    unsigned hl = (unsigned)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                             (unsigned char)(hl >> 8)};
    size_t nbytes = (size_t)numel * dtype_size(dtype);
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; i < pad && ok; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return err_set(e, ST_RUNTIME, "%s: write error", path);
    return ST_OK;
}
