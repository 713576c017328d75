/* sha256.h - SHA-256, for the JIT cache's keys (jit.c). */
#ifndef TILE_JIT_SHA256_H
#define TILE_JIT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32
#define SHA256_BLOCK_BYTES 64

typedef struct Sha256 {
  uint32_t h[8];
  uint64_t total; /* bytes hashed */
  uint8_t block[SHA256_BLOCK_BYTES];
  size_t used;    /* bytes of block filled */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t len);
void sha256_final(Sha256 *s, uint8_t out[SHA256_BYTES]);

#endif
