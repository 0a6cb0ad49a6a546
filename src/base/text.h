// Untrusted text made safe to print: names from a model (nodes, tensors, graphs, ops, domains),
// paths and file contents reach messages and listings, and a terminal would act on their control
// bytes (an ESC sequence clears the screen or retitles the window). Every message path escapes
// through here: err_set and err_prefix (so orch_last_error is safe too) and the command line's
// stdout and stderr (text_safe_stream). Needs nothing; allocates only the stream's small state.
#ifndef ORCH_TEXT_H
#define ORCH_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

// Copies src (NUL-terminated) to dst (cap > 0 bytes, always NUL-terminated) with every byte that
// could act on a terminal or garble it written as the four characters \xHH: C0 controls ('\n' and
// '\t' kept when keep_lines), DEL, C1 controls (U+0080..U+009F), the bidirectional embeddings,
// overrides and isolates (U+202A..U+202E, U+2066..U+2069: they reorder what is shown) and every
// byte that is not part of valid UTF-8. Valid UTF-8 text is copied as it is, and escaping escaped
// text changes nothing. A result that does not fit is cut after a whole character or escape and
// ends with "...". Returns the length written.
size_t text_escape(char *dst, size_t cap, const char *src, bool keep_lines);

// A stream that writes to file descriptor fd what text_escape (keep_lines) makes of the bytes it
// is given, however they are split across writes; line_buffered: flush at each '\n' (else fully
// buffered, or unbuffered when unbuffered). The descriptor is not closed with the stream. NULL
// when the stream cannot be made (the caller keeps its own).
FILE *text_safe_stream(int fd, bool line_buffered, bool unbuffered);

#endif
