// Unit tests of .npy reading and writing: round trips for every dtype and rank 0..3, numpy's
// own header layout (a fixture written by numpy is embedded), malformed headers, and shapes whose
// size overflows 64 bits when read or written.
#include "../check.h"
#include "runtime/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void round_trip(void) {
    const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_INT64, DT_INT32, DT_INT8,
                           DT_UINT8, DT_BOOL,   DT_INT16,   DT_UINT16, DT_UINT32, DT_UINT64};
    const int64_t shapes[][3] = {{0, 0, 0}, {5, 0, 0}, {2, 3, 0}, {2, 1, 3}};
    const int ranks[] = {0, 1, 2, 3};
    char path[] = "/tmp/orch_npy_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    for (size_t t = 0; t < ORCH_COUNT(types); t++) {
        for (size_t s = 0; s < ORCH_COUNT(ranks); s++) {
            int64_t n = 1;
            for (int d = 0; d < ranks[s]; d++)
                n *= shapes[s][d];
            size_t bytes = (size_t)n * dtype_size(types[t]);
            unsigned char *data = malloc(bytes + 1);
            for (size_t i = 0; i < bytes; i++)
                data[i] = (unsigned char)(i * 37 + 11);
            if (types[t] == DT_BOOL)
                for (size_t i = 0; i < bytes; i++)
                    data[i] &= 1;
            Err e = {0};
            CHECK(npy_write(path, types[t], ranks[s], shapes[s], data, &e) == ST_OK);
            HostTensor h;
            CHECK_MSG(npy_read(path, &h, &e) == ST_OK, "%s", e.msg);
            CHECK(h.dtype == types[t] && h.rank == ranks[s]);
            for (int d = 0; d < ranks[s]; d++)
                CHECK(h.dims[d] == shapes[s][d]);
            CHECK(h.data && memcmp(h.data, data, bytes) == 0);
            host_tensor_free(&h);
            free(data);
        }
    }
    // The header is 64-byte aligned as numpy requires for version 1.0 files.
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    CHECK(fread(pre, 1, 10, f) == 10);
    fclose(f);
    CHECK((10 + (pre[8] | pre[9] << 8)) % 64 == 0);
    unlink(path);
}

// Bytes numpy 1.26 writes for np.array([[1.5, -2.0, 3.25]], dtype=np.float32).
static void numpy_fixture(void) {
    char buf[128 + 12];
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }";
    memset(buf, ' ', sizeof buf);
    memcpy(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(buf + 10, hdr, strlen(hdr));
    buf[127] = '\n';
    float v[3] = {1.5f, -2.0f, 3.25f};
    memcpy(buf + 128, v, 12);
    HostTensor h;
    Err e = {0};
    CHECK_MSG(npy_read_memory(buf, sizeof buf, "fixture.npy", &h, &e) == ST_OK, "%s", e.msg);
    CHECK(h.dtype == DT_FLOAT && h.rank == 2 && h.dims[0] == 1 && h.dims[1] == 3);
    CHECK(h.data && ((float *)h.data)[2] == 3.25f);
    host_tensor_free(&h);
}

static void malformed(void) {
    struct {
        const char *hdr;
        int code;
        const char *needle;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", ST_UNSUPPORTED, "Fortran"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", ST_UNSUPPORTED, "big-endian"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", ST_UNSUPPORTED, "dtype"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", ST_INVALID, "needs"},
        {"{'descr': '<f4', 'fortran_order': False, }", ST_INVALID, "lacks"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", ST_INVALID, "dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 9999999), }",
         ST_INVALID, "dimension"},
        // Element counts that fit in 64 bits whose bytes do not: said without signed overflow.
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,), }", ST_INVALID,
         "more than 2^63 (2305843009213693952 elements of 4 bytes)"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3037000499, 3037000499), }",
         ST_INVALID, "more than 2^63"},
        {"{'descr': '<i8', 'fortran_order': False, 'shape': (9223372036854775807,), }", ST_INVALID,
         "more than 2^63"},
    };
    for (size_t k = 0; k < ORCH_COUNT(cases); k++) {
        char buf[256];
        size_t hl = strlen(cases[k].hdr);
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = (char)hl;
        buf[9] = 0;
        memcpy(buf + 10, cases[k].hdr, hl);
        float v[3] = {1, 2, 3};
        memcpy(buf + 10 + hl, v, 12);
        HostTensor h;
        Err e = {0};
        int rc = npy_read_memory(buf, 10 + hl + 12, "bad.npy", &h, &e);
        CHECK_MSG(rc == cases[k].code && strstr(e.msg, cases[k].needle) && strstr(e.msg, "bad.npy"),
                  "case %zu: %d %s", k, rc, e.msg);
        host_tensor_free(&h);
    }
    HostTensor h;
    Err e = {0};
    CHECK(npy_read_memory("\x93NUMPY\x01\x00\xff\x00{", 11, "t.npy", &h, &e) == ST_INVALID);
    Err e2 = {0};
    CHECK(npy_read_memory("PK\x03\x04", 4, "t.npz", &h, &e2) == ST_INVALID && strstr(e2.msg, "magic"));
}

// A shape whose size overflows is refused by the writer too, before anything is written.
static void write_overflow(void) {
    const int64_t dims[][2] = {{INT64_C(1) << 62, 4}, {INT64_C(1) << 61, 1}, {3, -1}};
    const DType types[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT};
    char path[] = "/tmp/orch_npy_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    float v = 1;
    for (size_t k = 0; k < ORCH_COUNT(types); k++) {
        Err e = {0};
        CHECK_MSG(npy_write(path, types[k], 2, dims[k], &v, &e) == ST_INVALID &&
                      strstr(e.msg, path),
                  "case %zu: %s", k, e.msg);
        CHECK(access(path, F_OK) != 0);
    }
}

int main(void) {
    RUN(round_trip);
    RUN(numpy_fixture);
    RUN(malformed);
    RUN(write_overflow);
    return CHECK_DONE();
}
