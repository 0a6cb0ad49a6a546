// Bump allocator over a list of chunks (see arena.h).
#include "arena.h"

#include "common.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define ORCH_ARENA_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORCH_ARENA_MALLOC 1
#endif
#endif

typedef struct Chunk {
    struct Chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} Chunk;

struct Arena {
    Chunk *head;
};

enum { CHUNK_SIZE = 64 * 1024 };

Arena *arena_create(void) { return xcalloc(1, sizeof(Arena)); }

void arena_free(Arena *a) {
    if (!a)
        return;
    for (Chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

static Chunk *chunk_new(size_t cap) {
    Chunk *c = xmalloc(sizeof(Chunk) + cap);
    c->next = NULL;
    c->used = 0;
    c->cap = cap;
    return c;
}

void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
#ifdef ORCH_ARENA_MALLOC
    Chunk *c = chunk_new(n);
    c->next = a->head;
    a->head = c;
    c->used = n;
    memset(c->data, 0, n);
    return c->data;
#else
    if (!a->head || a->head->cap - a->head->used < n) {
        Chunk *c = chunk_new(n > CHUNK_SIZE / 4 ? n : CHUNK_SIZE);
        if (a->head && n > CHUNK_SIZE / 4) {
            // Large object: keep the current chunk for small ones.
            c->next = a->head->next;
            a->head->next = c;
            c->used = n;
            memset(c->data, 0, n);
            return c->data;
        }
        c->next = a->head;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    memset(p, 0, n);
    return p;
#endif
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

void *arena_memdup(Arena *a, const void *p, size_t n) {
    void *q = arena_alloc(a, n);
    if (n)
        memcpy(q, p, n);
    return q;
}
