/* arena.h - bump allocation for one compilation.
 *
 * Every structure of a compilation (tokens, AST, IR) is allocated from the
 * context's arena and freed all at once, so passes never free individual
 * nodes and there is no ownership to track.
 */
#ifndef TILE_ARENA_H
#define TILE_ARENA_H

#include <stddef.h>

/* Size of one arena chunk. Large enough that a 5,000-line source file needs
 * a few dozen chunks; requests bigger than this get a chunk of their own. */
#define ARENA_CHUNK_BYTES (256 * 1024)

typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
  ArenaChunk *head;
  size_t used_total;
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned memory. Aborts only if malloc itself fails (a
 * size too large for any allocation counts as that). */
void *arena_alloc(Arena *a, size_t size);
/* Room for n elements of elem bytes each; a product that overflows size_t
 * is an allocation failure, not a wrapped-around small block. */
void *arena_alloc_array(Arena *a, size_t elem, size_t n);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_strdup(Arena *a, const char *s);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Grows an array allocated in the arena: returns a copy with room for
 * new_cap elements (old contents kept; the old block is simply abandoned). */
void *arena_grow(Arena *a, void *old, size_t elem, size_t old_cap, size_t new_cap);

#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_alloc_array((a), sizeof(T), (size_t)(n)))

#endif
