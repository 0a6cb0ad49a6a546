// A growable string for generated source code and reports. Appends never fail (allocation
// failure is fatal, as for xmalloc: sources are small); the text is always NUL-terminated.
#ifndef ORCH_STRBUF_H
#define ORCH_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct StrBuf {
    char *s;    // NUL-terminated text ("" before the first append; never NULL after sb_init)
    size_t len; // bytes before the NUL
    size_t cap;
} StrBuf;

void sb_init(StrBuf *b);
void sb_free(StrBuf *b); // leaves an empty, reusable buffer
void sb_clear(StrBuf *b);
void sb_puts(StrBuf *b, const char *s);
void sb_putn(StrBuf *b, const char *s, size_t n);
void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *b, const char *fmt, va_list ap);
// sb_printf preceded by 4 * indent spaces.
void sb_line(StrBuf *b, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Hands the text to the caller (free it) and leaves the buffer empty.
char *sb_take(StrBuf *b);

#endif
