// Tensors in files: NumPy .npy (versions 1-3, little-endian, C order) read and written, and ONNX
// TensorProto .pb read (via onnx/load.c). Used by `orch run` and the tests.
#ifndef ORCH_NPY_H
#define ORCH_NPY_H

#include "../ir/graph.h"

typedef struct HostTensor {
    DType dtype;
    int rank;
    int64_t dims[ORCH_MAX_RANK];
    void *data; // malloc'd
} HostTensor;

// Reads .npy, or .pb (TensorProto) when the name ends in ".pb".
int tensor_file_read(const char *path, HostTensor *t, Err *e);
int npy_read(const char *path, HostTensor *t, Err *e);
int npy_read_memory(const void *buf, size_t size, const char *name, HostTensor *t, Err *e);
int npy_write(const char *path, DType dtype, int rank, const int64_t *dims, const void *data,
              Err *e);
void host_tensor_free(HostTensor *t);

#endif
