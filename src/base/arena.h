// Arena allocator for IR metadata (names, nodes, attributes): objects are freed all at once.
// Tensor data never lives here. Under ASan (ORCH_ARENA_MALLOC) every object is its own malloc so
// overflows are caught.
#ifndef ORCH_ARENA_H
#define ORCH_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

Arena *arena_create(void);
void arena_free(Arena *a); // accepts NULL
void *arena_alloc(Arena *a, size_t n);  // zeroed, 16-byte aligned
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
void *arena_memdup(Arena *a, const void *p, size_t n);

#endif
