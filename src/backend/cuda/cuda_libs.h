// Finding and opening the CUDA libraries orch calls besides the driver and NVRTC (cuBLASLt,
// cuDNN: cublaslt.h, cudnn.h) by their standard sonames, in one place. Each library is looked for
// in these folders, in order, each for every soname given (newest first, e.g. libcublasLt.so.13,
// .so.12, .so):
//   1. the folders of ORCH_CUDA_LIB_DIR (colon-separated, as PATH; docs/environment.md), for a
//      library outside the usual places, e.g. a Python environment's nvidia/*/lib folders;
//   2. the dynamic loader's own search (LD_LIBRARY_PATH, the executable's RUNPATH,
//      /etc/ld.so.cache, the system's library folders);
//   3. the CUDA toolkit's: $CUDA_HOME/lib64 and lib, /usr/local/cuda/lib64 and lib, then every
//      /usr/local/cuda-X.Y/lib64 and lib, the newest version first.
// The first file that opens and has every symbol asked for (and that the caller's check accepts)
// is the one used. Needs: nothing (no library found is an answer, not an error). Guarantees: the
// symbols are bound from one file, and where says which, or why none was taken.
#ifndef ORCH_CUDA_LIBS_H
#define ORCH_CUDA_LIBS_H

#include "../../base/common.h"

// One entry point: dlsym(name) is stored in *slot (a function pointer's storage).
typedef struct CudaLibSym {
    void **slot;
    const char *name;
} CudaLibSym;

// Called once a file's symbols are bound (slots filled): false refuses the file (e.g. a version
// orch does not declare) with the reason in why, and the search goes on.
typedef bool (*CudaLibAccept)(void *ctx, const char *path, char *why, size_t why_size);

// Opens the library: sonames in order of preference, syms bound from the file taken, accept
// optional (NULL: any file with the symbols). Returns the dlopen handle (RTLD_NOW | RTLD_LOCAL;
// never closed), where = its path; or NULL, where = why not (the last file refused, or what was
// searched).
void *cuda_lib_open(const char *const *sonames, int n_sonames, const CudaLibSym *syms, int n_syms,
                    CudaLibAccept accept, void *ctx, char *where, size_t where_size);

#endif
