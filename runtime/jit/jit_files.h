/* jit_files.h - the names of the files libtile_jit keeps in its cache
 * directory, shared by the cache (jit.c) and the tuner (tune.c): both
 * kinds are trimmed and cleared together. */
#ifndef TILE_JIT_FILES_H
#define TILE_JIT_FILES_H

/* A cached cubin: <64 hex digits of its key>.cubin */
#define JIT_ENTRY_SUFFIX ".cubin"
/* A stored tuning choice: <64 hex digits of its key>.tune */
#define JIT_TUNE_SUFFIX ".tune"

#endif
