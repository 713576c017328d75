/* arena.c - bump allocator (see arena.h). */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ArenaChunk {
  ArenaChunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
};

void arena_init(Arena *a) {
  a->head = NULL;
  a->used_total = 0;
}

void arena_free(Arena *a) {
  ArenaChunk *c = a->head;
  while (c) {
    ArenaChunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->used_total = 0;
}

static void out_of_memory(size_t size) {
  fprintf(stderr, "tile: out of memory (arena chunk of %zu bytes)\n", size);
  abort();
}

void *arena_alloc(Arena *a, size_t size) {
  if (size > SIZE_MAX / 2) out_of_memory(size); /* no malloc could hold it; rounding would wrap */
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  ArenaChunk *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t cap = size > ARENA_CHUNK_BYTES ? size : ARENA_CHUNK_BYTES;
    ArenaChunk *n = malloc(sizeof(ArenaChunk) + cap);
    if (!n) out_of_memory(cap);
    n->size = cap;
    n->used = 0;
    /* Keep a partly used chunk at the head when the new one is a
     * one-off large block, so small allocations continue to fill it. */
    if (c && cap == size && c->size - c->used >= 256) {
      n->next = c->next;
      c->next = n;
    } else {
      n->next = c;
      a->head = n;
    }
    c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  a->used_total += size;
  memset(p, 0, size);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

void *arena_alloc_array(Arena *a, size_t elem, size_t n) {
  if (elem && n > SIZE_MAX / elem) out_of_memory(SIZE_MAX);
  return arena_alloc(a, elem * n);
}

void *arena_grow(Arena *a, void *old, size_t elem, size_t old_cap, size_t new_cap) {
  void *p = arena_alloc_array(a, elem, new_cap);
  if (old && old_cap) memcpy(p, old, elem * old_cap);
  return p;
}
