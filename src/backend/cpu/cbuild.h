// Builds generated C into shared objects with the system compiler and loads them: the C
// target's "build" step. Each call compiles one translation unit (`cc -O3 -march=native -fopenmp
// -shared -fPIC`) into a private work directory and dlopens the result; several units can be
// built in parallel processes. A compiler failure is reported with the head of its diagnostics.
#ifndef ORCH_CBUILD_H
#define ORCH_CBUILD_H

#include "../../base/common.h"

typedef struct CModule CModule;

// The compiler command (ORCH_CC overrides "cc") and its version line ("gcc 12.2.0").
const char *cbuild_compiler(void);
const char *cbuild_compiler_version(void);
// Everything besides the source that decides what a build produces: the compiler's version and
// command, and the flags ("gcc 12.2.0 (cc) -O3 -march=native ..."). Builds are reproducible
// (cbuild_module: the object names no file of its build), so a source and this identity, on
// one machine, give the same shared object.
const char *cbuild_identity(void);

// Removes the work directories in $TMPDIR that processes of this host left behind when they died
// (killed in the middle of a compile): named orch-build-HOST-PID-XXXXXX, owned by this user, real
// directories (not links), whose process no longer exists. Once per process: the C target calls
// it when a compile opens it, and the first build does where nothing did.
void cbuild_remove_stale_workdirs(void);

// Compiles `source` into a shared object and loads it. workdir NULL: a fresh directory under
// $TMPDIR, orch-build-HOST-PID-XXXXXX, removed by cmodule_free (ORCH_KEEP_SOURCES=DIR: in DIR
// instead, and kept). tag names the module in messages.
int cbuild_module(const char *source, const char *workdir, const char *tag, CModule **out, Err *e);

// Compiles n sources in up to `jobs` parallel compiler processes (0: the number of cores). out[i]
// receives the module or NULL; status[i] ST_OK or an error code with msgs[i] (malloc'd, caller
// frees; NULL when ok). Returns ST_OK unless the work directory itself failed.
int cbuild_modules(const char *const *sources, int n, const char *workdir, int jobs,
                   CModule **out, int *status, char **msgs, Err *e);

void *cmodule_sym(CModule *m, const char *name); // NULL when absent
const char *cmodule_path(const CModule *m);       // the .so file
void cmodule_free(CModule *m);                    // accepts NULL

#endif
