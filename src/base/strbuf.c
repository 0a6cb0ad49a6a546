// A growable string (strbuf.h).
#include "strbuf.h"

#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void grow(StrBuf *b, size_t extra) {
    if (!b->s)
        sb_init(b);
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void sb_init(StrBuf *b) {
    b->cap = 256;
    b->s = xmalloc(b->cap);
    b->s[0] = '\0';
    b->len = 0;
}

void sb_free(StrBuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

void sb_clear(StrBuf *b) {
    if (!b->s)
        sb_init(b);
    b->len = 0;
    b->s[0] = '\0';
}

void sb_putn(StrBuf *b, const char *s, size_t n) {
    grow(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_puts(StrBuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_vprintf(StrBuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    ORCH_ASSERT(n >= 0);
    grow(b, (size_t)n);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_line(StrBuf *b, int indent, const char *fmt, ...) {
    for (int i = 0; i < indent; i++)
        sb_puts(b, "    ");
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

char *sb_take(StrBuf *b) {
    if (!b->s)
        sb_init(b);
    char *s = b->s;
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}
