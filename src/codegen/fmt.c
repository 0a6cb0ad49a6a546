// cg_fmt (fmt.h): snprintf into a fixed buffer that records truncation in the caller's flag.
#include "fmt.h"

#include <stdarg.h>
#include <stdio.h>

void cg_fmt(bool *truncated, char *buf, size_t cap, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, cap, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap)
        *truncated = true;
}
