/* strmap.h - a string-keyed hash map (open addressing) in an arena, for
 * symbol tables. Keys are not copied: they must outlive the map (they are
 * arena strings or string literals). */
#ifndef TILE_STRMAP_H
#define TILE_STRMAP_H

#include <stddef.h>

#include "arena.h"

typedef struct StrMapEntry {
  const char *key;
  size_t hash;
  void *value;
} StrMapEntry;

typedef struct StrMap {
  Arena *arena;
  StrMapEntry *slots;
  size_t cap, count;
} StrMap;

void strmap_init(StrMap *m, Arena *arena);
void *strmap_get(const StrMap *m, const char *key);
/* Inserts or replaces; returns the previous value (NULL if none). */
void *strmap_put(StrMap *m, const char *key, void *value);

#endif
