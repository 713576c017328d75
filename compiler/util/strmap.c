/* strmap.c - string hash map (see strmap.h). FNV-1a hashing, linear
 * probing, growth at 50% load so probes stay short. */
#include "strmap.h"

#include <string.h>

static size_t hash_str(const char *s) {
  size_t h = (size_t)14695981039346656037ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * (size_t)1099511628211ULL;
  return h;
}

void strmap_init(StrMap *m, Arena *arena) {
  memset(m, 0, sizeof *m);
  m->arena = arena;
}

static StrMapEntry *find_slot(StrMapEntry *slots, size_t cap, const char *key, size_t h) {
  for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
    if (!slots[i].key || (slots[i].hash == h && strcmp(slots[i].key, key) == 0)) return &slots[i];
}

void *strmap_get(const StrMap *m, const char *key) {
  if (!m->cap) return NULL;
  StrMapEntry *e = find_slot(m->slots, m->cap, key, hash_str(key));
  return e->key ? e->value : NULL;
}

static void grow(StrMap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  StrMapEntry *slots = ARENA_ARRAY(m->arena, StrMapEntry, cap);
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key) *find_slot(slots, cap, m->slots[i].key, m->slots[i].hash) = m->slots[i];
  m->slots = slots;
  m->cap = cap;
}

void *strmap_put(StrMap *m, const char *key, void *value) {
  if ((m->count + 1) * 2 > m->cap) grow(m);
  size_t h = hash_str(key);
  StrMapEntry *e = find_slot(m->slots, m->cap, key, h);
  void *old = e->key ? e->value : NULL;
  if (!e->key) {
    e->key = key;
    e->hash = h;
    m->count++;
  }
  e->value = value;
  return old;
}
