// Escaping of untrusted text for terminals and messages, and the escaping stdio stream (text.h).
// One decoder serves both: it looks at one UTF-8 character at a time and either copies it or
// writes its bytes as \xHH; the stream keeps an incomplete character until its next write.
#define _GNU_SOURCE // fopencookie
#include "text.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The longest representation of one step: four bytes, each as \xHH.
#define STEP_MAX 16

static size_t hex_bytes(const unsigned char *s, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[4 * i] = '\\';
        out[4 * i + 1] = 'x';
        out[4 * i + 2] = digits[s[i] >> 4];
        out[4 * i + 3] = digits[s[i] & 15];
    }
    return 4 * n;
}

// Length of the UTF-8 sequence that lead byte c starts (0: c cannot start one), and the range
// of its second byte (overlong forms, surrogates and code points past U+10FFFF excluded).
static int utf8_len(unsigned char c, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80;
    *hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        return 2;
    if (c == 0xe0)
        *lo = 0xa0;
    else if (c == 0xed)
        *hi = 0x9f;
    if (c >= 0xe0 && c <= 0xef)
        return 3;
    if (c == 0xf0)
        *lo = 0x90;
    else if (c == 0xf4)
        *hi = 0x8f;
    return c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

// Looks at the character at s (avail > 0 bytes there): writes its safe form to out (at most
// STEP_MAX bytes, *out_n of them) and returns how many bytes of s it used. Returns 0 when s holds
// only the start of a valid character and more may follow (!final).
static size_t escape_step(const unsigned char *s, size_t avail, bool final, bool keep_lines,
                          char *out, size_t *out_n) {
    unsigned char c = s[0];
    if (c < 0x80) {
        bool ctl = c < 0x20 || c == 0x7f;
        if (ctl && !(keep_lines && (c == '\n' || c == '\t'))) {
            *out_n = hex_bytes(s, 1, out);
        } else {
            out[0] = (char)c;
            *out_n = 1;
        }
        return 1;
    }
    unsigned char lo, hi;
    size_t len = (size_t)utf8_len(c, &lo, &hi);
    size_t have = 1;
    bool valid = len > 0;
    while (valid && have < len && have < avail) {
        unsigned char b = s[have];
        valid = have == 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xbf;
        have += valid;
    }
    if (valid && have < len && !final)
        return 0;
    if (!valid || have < len) { // the lead byte alone is escaped; the rest is looked at again
        *out_n = hex_bytes(s, 1, out);
        return 1;
    }
    bool c1 = c == 0xc2 && s[1] <= 0x9f;
    bool bidi = c == 0xe2 && ((s[1] == 0x80 && s[2] >= 0xaa && s[2] <= 0xae) ||
                              (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9));
    if (c1 || bidi) {
        *out_n = hex_bytes(s, len, out);
    } else {
        memcpy(out, s, len);
        *out_n = len;
    }
    return len;
}

size_t text_escape(char *dst, size_t cap, const char *src, bool keep_lines) {
    const unsigned char *s = (const unsigned char *)src;
    size_t n = strlen(src), at = 0, j = 0;
    size_t cut = 0; // the last boundary between pieces that leaves room for "..." and the NUL
    while (at < n) {
        char piece[STEP_MAX];
        size_t pn;
        at += escape_step(s + at, n - at, true, keep_lines, piece, &pn);
        if (j + pn + 1 > cap) {
            j = cut;
            for (const char *m = "..."; *m && j + 1 < cap; m++)
                dst[j++] = *m;
            break;
        }
        memcpy(dst + j, piece, pn);
        j += pn;
        if (j + 4 <= cap)
            cut = j;
    }
    dst[j] = 0;
    return j;
}

// ---- the stream ----

typedef struct SafeStream {
    int fd;
    unsigned char pending[4]; // the start of a character split across writes
    size_t n_pending;
} SafeStream;

static bool write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

// Escapes s (n bytes), keeping an incomplete character at its end in st unless final.
static bool stream_put(SafeStream *st, const unsigned char *s, size_t n, bool final) {
    char out[4096];
    size_t j = 0, at = 0;
    while (at < n) {
        char piece[STEP_MAX];
        size_t pn, used = escape_step(s + at, n - at, final, true, piece, &pn);
        if (used == 0) {
            memcpy(st->pending, s + at, n - at);
            st->n_pending = n - at;
            break;
        }
        if (j + pn > sizeof out) {
            if (!write_all(st->fd, out, j))
                return false;
            j = 0;
        }
        memcpy(out + j, piece, pn);
        j += pn;
        at += used;
    }
    return write_all(st->fd, out, j);
}

static ssize_t stream_write(void *cookie, const char *buf, size_t size) {
    SafeStream *st = cookie;
    size_t at = 0;
    // Complete a pending character with the first bytes of this write.
    while (st->n_pending && at < size) {
        st->pending[st->n_pending++] = (unsigned char)buf[at++];
        unsigned char held[4];
        size_t nh = st->n_pending;
        memcpy(held, st->pending, nh);
        st->n_pending = 0;
        if (!stream_put(st, held, nh, false))
            return -1;
    }
    if (at < size && !stream_put(st, (const unsigned char *)buf + at, size - at, false))
        return -1;
    return (ssize_t)size;
}

static int stream_close(void *cookie) {
    SafeStream *st = cookie;
    bool ok = st->n_pending == 0 || stream_put(st, st->pending, st->n_pending, true);
    free(st);
    return ok ? 0 : EOF;
}

FILE *text_safe_stream(int fd, bool line_buffered, bool unbuffered) {
    SafeStream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->fd = fd;
    cookie_io_functions_t io = {.write = stream_write, .close = stream_close};
    FILE *f = fopencookie(st, "w", io);
    if (!f) {
        free(st);
        return NULL;
    }
    setvbuf(f, NULL, unbuffered ? _IONBF : line_buffered ? _IOLBF : _IOFBF, 0);
    return f;
}
