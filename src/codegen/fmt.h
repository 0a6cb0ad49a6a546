// Fixed-buffer formatting for the code emitters: snprintf that records truncation, so that an
// emission whose text did not fit fails as a whole rather than producing wrong code.
// Needs nothing. Guarantees: buf holds the text, cut to cap - 1 bytes and NUL-terminated;
// *truncated is set where it was cut and never cleared here: each emitter owns its flag and
// decides over which stretch of emission it checks it (cexpr_value, a whole reduction kernel).
#ifndef ORCH_CODEGEN_FMT_H
#define ORCH_CODEGEN_FMT_H

#include <stdbool.h>
#include <stddef.h>

__attribute__((format(printf, 4, 5))) void cg_fmt(bool *truncated, char *buf, size_t cap,
                                                  const char *f, ...);

#endif
