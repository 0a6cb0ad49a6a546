// Shared basics for every orch source file: error reporting (first error wins; messages escaped
// for terminals by text.h), always-on assertions for bugs, overflow-checked size arithmetic and
// small helpers.
// Nothing here allocates except err_set's fixed buffer, which lives in the caller's Err.
#ifndef ORCH_COMMON_H
#define ORCH_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Status codes; they are also the CLI's exit codes.
enum {
    ST_OK = 0,
    ST_USAGE = 1,       // bad command line or API misuse
    ST_INVALID = 2,     // malformed model or input
    ST_UNSUPPORTED = 3, // valid ONNX that orch does not handle
    ST_MISMATCH = 4,    // outputs differ from the expected ones
    ST_RUNTIME = 5,     // I/O, memory, internal failure
};

// An error slot. The first error set wins: later calls keep the original message, so the root
// cause is what the user sees.
typedef struct Err {
    int code;
    char msg[2048];
} Err;

// Sets the error (if none is set yet) and returns its code, so `return err_set(e, ...)` works.
int err_set(Err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Prefixes context to an already set message, e.g. the file name.
void err_prefix(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Bugs, never user errors: stays on in release builds.
#define ORCH_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            orch_assert_fail(#cond, __FILE__, __LINE__);                                           \
    } while (0)
_Noreturn void orch_assert_fail(const char *cond, const char *file, int line);

// Allocation that treats failure as fatal only where the amount is small and bounded;
// tensor-sized allocations use malloc and report ST_RUNTIME.
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

// Overflow-checked products for sizes computed from untrusted dims. Return false on overflow.
bool mul_overflows_i64(int64_t a, int64_t b, int64_t *out);

#define ORCH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ORCH_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ORCH_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#endif
