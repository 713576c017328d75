/* ptrmap.c - pointer hash map (see ptrmap.h): multiplicative hashing of
 * the address, linear probing, growth at 50% load. */
#include "ptrmap.h"

#include <stdint.h>
#include <string.h>

static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

void ptrmap_init(PtrMap *m, Arena *arena) {
  memset(m, 0, sizeof *m);
  m->arena = arena;
}

static PtrMapEntry *find_slot(PtrMapEntry *slots, size_t cap, const void *key) {
  for (size_t i = hash_ptr(key) & (cap - 1);; i = (i + 1) & (cap - 1))
    if (!slots[i].key || slots[i].key == key) return &slots[i];
}

void *ptrmap_get(const PtrMap *m, const void *key) {
  if (!m->cap) return NULL;
  PtrMapEntry *e = find_slot(m->slots, m->cap, key);
  return e->key ? e->value : NULL;
}

static void grow(PtrMap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  PtrMapEntry *slots = ARENA_ARRAY(m->arena, PtrMapEntry, cap);
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key) *find_slot(slots, cap, m->slots[i].key) = m->slots[i];
  m->slots = slots;
  m->cap = cap;
}

void *ptrmap_put(PtrMap *m, const void *key, void *value) {
  if ((m->count + 1) * 2 > m->cap) grow(m);
  PtrMapEntry *e = find_slot(m->slots, m->cap, key);
  void *old = e->key ? e->value : NULL;
  if (!e->key) {
    e->key = key;
    m->count++;
  }
  e->value = value;
  return old;
}
