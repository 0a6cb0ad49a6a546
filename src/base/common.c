// Error slot, assertion failure and checked allocation helpers (see common.h).
#include "common.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int err_set(Err *e, int code, const char *fmt, ...) {
    if (!e)
        return code;
    if (e->code != ST_OK)
        return e->code;
    e->code = code;
    // Messages name what the model and the user supplied: escaped once here, for every reader.
    char raw[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    text_escape(e->msg, sizeof e->msg, raw, true);
    return code;
}

void err_prefix(Err *e, const char *fmt, ...) {
    if (!e || e->code == ST_OK)
        return;
    char pre[512], old[sizeof e->msg - sizeof pre];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    size_t len = strnlen(e->msg, sizeof old - 1); // keep the prefix, cut the tail if needed
    memcpy(old, e->msg, len);
    old[len] = 0;
    char raw[sizeof e->msg];
    snprintf(raw, sizeof raw, "%s%s", pre, old);
    text_escape(e->msg, sizeof e->msg, raw, true);
}

_Noreturn void orch_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "orch: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "orch: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "orch: out of memory (%zu x %zu bytes)\n", count, size);
        abort();
    }
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "orch: out of memory (%zu bytes)\n", n);
        abort();
    }
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

bool mul_overflows_i64(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
