// Unit tests of untrusted text made safe to print (src/base/text.h): terminal controls, C1
// controls, bidirectional overrides and invalid UTF-8 escaped, valid text kept, escaping that is
// idempotent and cut between whole pieces, err_set's messages, and the escaping stream fed the
// same bytes split at random points. Random byte strings are checked against a strict UTF-8
// decoder written here (no control, no invalid sequence may come out).
#include "../check.h"
#include "base/common.h"
#include "base/text.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state;

static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static const char *esc(const char *s, bool keep_lines) {
    static char buf[4096];
    text_escape(buf, sizeof buf, s, keep_lines);
    return buf;
}

// Whether s is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF) holding
// no C0 control (but '\n' and '\t' when allowed), DEL, C1 control or bidirectional override.
static bool printable_utf8(const char *s, bool lines_allowed) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp;
        int n;
        if (p[0] < 0x80) {
            cp = p[0];
            n = 1;
        } else if ((p[0] & 0xe0) == 0xc0) {
            cp = p[0] & 0x1f;
            n = 2;
        } else if ((p[0] & 0xf0) == 0xe0) {
            cp = p[0] & 0x0f;
            n = 3;
        } else if ((p[0] & 0xf8) == 0xf0) {
            cp = p[0] & 0x07;
            n = 4;
        } else {
            return false;
        }
        for (int i = 1; i < n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_of[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        bool line = cp == '\n' || cp == '\t';
        if ((cp < 0x20 && !(line && lines_allowed)) || (cp >= 0x7f && cp <= 0x9f) ||
            (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
            return false;
        p += n;
    }
    return true;
}

static void fixed_cases(void) {
    struct {
        const char *in, *out;
        bool keep_lines;
    } cases[] = {
        {"relu_node/0:1", "relu_node/0:1", true},
        {"\x1b[2J", "\\x1b[2J", true},
        {"a\x1b]0;title\x07z", "a\\x1b]0;title\\x07z", true},
        {"line\nnext\tcol", "line\nnext\tcol", true},
        {"line\nnext\tcol", "line\\x0anext\\x09col", false},
        {"back\rover", "back\\x0dover", true},
        {"del\x7f", "del\\x7f", true},
        {"c1 \xc2\x9b"
         "31m \xc2\x85",
         "c1 \\xc2\\x9b31m \\xc2\\x85", true},
        {"nbsp \xc2\xa0 e \xc3\xa9 zh \xe4\xbd\xa0 emoji \xf0\x9f\x98\x80",
         "nbsp \xc2\xa0 e \xc3\xa9 zh \xe4\xbd\xa0 emoji \xf0\x9f\x98\x80", true},
        {"rtl \xe2\x80\xae"
         "evil \xe2\x81\xa6x",
         "rtl \\xe2\\x80\\xaeevil \\xe2\\x81\\xa6x", true},
        {"lone \x80 cont", "lone \\x80 cont", true},
        {"overlong \xc0\xaf", "overlong \\xc0\\xaf", true},
        {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80", true},
        {"too big \xf4\x90\x80\x80", "too big \\xf4\\x90\\x80\\x80", true},
        {"f5 \xf5\x80", "f5 \\xf5\\x80", true},
        {"cut \xe4\xbd", "cut \\xe4\\xbd", true},
        {"bad lead then ok \xe4"
         "A",
         "bad lead then ok \\xe4A", true},
        {"\xff\xfe", "\\xff\\xfe", true},
        {"", "", true},
    };
    for (size_t k = 0; k < ORCH_COUNT(cases); k++) {
        const char *got = esc(cases[k].in, cases[k].keep_lines);
        CHECK_MSG(strcmp(got, cases[k].out) == 0, "case %zu: got '%s', want '%s'", k, got,
                  cases[k].out);
        CHECK_MSG(printable_utf8(got, cases[k].keep_lines), "case %zu", k);
    }
}

// A result that does not fit is cut after a whole piece (never inside an escape or a
// character) and says so.
static void cut_to_fit(void) {
    char buf[12];
    CHECK(text_escape(buf, sizeof buf, "abcdefghijklmnop", true) == 11 &&
          strcmp(buf, "abcdefgh...") == 0);
    text_escape(buf, sizeof buf, "ab\x1b\x1b\x1b", true); // "ab\x1b\x1b\x1b" needs 14
    CHECK_MSG(strcmp(buf, "ab\\x1b...") == 0, "%s", buf);
    text_escape(buf, sizeof buf, "\xe4\xbd\xa0\xe4\xbd\xa0\xe4\xbd\xa0\xe4\xbd\xa0", true);
    CHECK_MSG(strcmp(buf, "\xe4\xbd\xa0\xe4\xbd\xa0...") == 0, "%s", buf);
    CHECK(text_escape(buf, 1, "abc", true) == 0 && buf[0] == 0);
    CHECK(text_escape(buf, 3, "abcdef", true) == 2 && strcmp(buf, "..") == 0);
}

static void random_strings(void) {
    static char in[600], once[4096], twice[4096];
    for (int it = 0; it < 20000; it++) {
        size_t n = rnd() % 300;
        for (size_t i = 0; i < n; i++) {
            // Bias towards the interesting bytes: controls, lead and continuation bytes.
            uint64_t r = rnd();
            static const unsigned char hot[] = {0x1b, 0x07, 0x0a, 0x09, 0x0d, 0x7f, 0x80, 0x9b,
                                                0xbf, 0xc2, 0xc0, 0xe2, 0xed, 0xef, 0xf0, 0xf4,
                                                0xf5, 0xff, 0x80, 0xa0, 0xae, 0x81, 0xa6, 'a'};
            unsigned char c = r % 3 ? hot[(r >> 8) % sizeof hot] : (unsigned char)(r >> 16);
            in[i] = (char)(c ? c : 'z');
        }
        in[n] = 0;
        bool keep = rnd() % 2;
        text_escape(once, sizeof once, in, keep);
        text_escape(twice, sizeof twice, once, keep);
        CHECK_MSG(printable_utf8(once, keep), "iteration %d", it);
        CHECK_MSG(strcmp(once, twice) == 0, "iteration %d: not idempotent", it);
        if (printable_utf8(in, keep))
            CHECK_MSG(strcmp(once, in) == 0, "iteration %d: safe text changed", it);
    }
}

// Messages are escaped where they are made, for every reader (orch_last_error too).
static void messages(void) {
    Err e = {0};
    CHECK(err_set(&e, ST_INVALID, "node '%s' (%s)", "x\x1b[2J", "op\xc2\x9b") == ST_INVALID);
    CHECK_MSG(strcmp(e.msg, "node 'x\\x1b[2J' (op\\xc2\\x9b)") == 0, "%s", e.msg);
    err_prefix(&e, "%s: ", "m\x1b.onnx");
    CHECK_MSG(strcmp(e.msg, "m\\x1b.onnx: node 'x\\x1b[2J' (op\\xc2\\x9b)") == 0, "%s", e.msg);
    Err lines = {0};
    err_set(&lines, ST_RUNTIME, "the C compiler failed:\n%s", "k.c:1: error\n");
    CHECK(strcmp(lines.msg, "the C compiler failed:\nk.c:1: error\n") == 0);
}

// The stream gives what text_escape gives for the whole text, however the writes split it
// (a character cut between two writes included).
static void stream_splits(void) {
    static char in[800], want[4096], got[8192]; // inputs of at most 700 + 3 bytes
    for (int it = 0; it < 300; it++) {
        size_t target = 1 + rnd() % 700, n = 0;
        while (n < target) {
            static const char *pieces[] = {
                "\xe4\xbd\xa0", "\xf0\x9f\x98\x80", "\xc2\x9b", "\x1b", "\xe2\x80\xae", "a", "\n",
                "\xff",         "\xe4\xbd"};
            const char *p = pieces[rnd() % ORCH_COUNT(pieces)];
            memcpy(in + n, p, strlen(p));
            n += strlen(p);
        }
        in[n] = 0;
        text_escape(want, sizeof want, in, true);
        char path[] = "/tmp/orch_text_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd < 0)
            return;
        unlink(path);
        FILE *f = text_safe_stream(fd, rnd() % 2, rnd() % 2);
        CHECK(f != NULL);
        if (!f) {
            close(fd);
            return;
        }
        for (size_t at = 0; at < n;) {
            size_t k = 1 + rnd() % 7; // (not inside ORCH_MIN, which evaluates it twice)
            k = ORCH_MIN(k, n - at);
            CHECK(fwrite(in + at, 1, k, f) == k);
            if (rnd() % 3 == 0)
                fflush(f);
            at += k;
        }
        CHECK(fclose(f) == 0);
        ssize_t len = pread(fd, got, sizeof got - 1, 0);
        close(fd);
        CHECK(len >= 0);
        got[len < 0 ? 0 : len] = 0;
        CHECK_MSG(strcmp(got, want) == 0, "iteration %d: stream '%s', text_escape '%s'", it, got,
                  want);
    }
}

int main(void) {
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    const char *env = getenv("ORCH_TEST_SEED");
    if (env)
        seed = strtoull(env, NULL, 0);
    printf("seed %" PRIu64 " (ORCH_TEST_SEED to repeat)\n", seed);
    rng_state = seed | 1;
    RUN(fixed_cases);
    RUN(cut_to_fit);
    RUN(random_strings);
    RUN(messages);
    RUN(stream_splits);
    return CHECK_DONE();
}
