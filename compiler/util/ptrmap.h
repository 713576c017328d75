/* ptrmap.h - a pointer-keyed hash map (open addressing) in an arena, for
 * side tables that attach facts to IR values and ops without touching
 * their scratch fields. */
#ifndef TILE_PTRMAP_H
#define TILE_PTRMAP_H

#include <stddef.h>

#include "arena.h"

typedef struct PtrMapEntry {
  const void *key;
  void *value;
} PtrMapEntry;

typedef struct PtrMap {
  Arena *arena;
  PtrMapEntry *slots;
  size_t cap, count;
} PtrMap;

void ptrmap_init(PtrMap *m, Arena *arena);
void *ptrmap_get(const PtrMap *m, const void *key);
/* Inserts or replaces; returns the previous value (NULL if none). */
void *ptrmap_put(PtrMap *m, const void *key, void *value);

#endif
