/* jit.c - run-time compilation with a memory and an on-disk cache (see
 * tile_jit.h for the contract, the key and the entry format). */
#include "tile_jit.h"

#include <cuda.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "jit_build_id.h"
#include "jit_files.h"
#include "sha256.h"

/* An entry file: this magic, the key, the cubin's size and checksum
 * (little-endian u64s), then the cubin. */
#define ENTRY_MAGIC "TILEJIT1"
#define ENTRY_MAGIC_BYTES 8
#define ENTRY_HEADER_BYTES (ENTRY_MAGIC_BYTES + SHA256_BYTES + 8 + 8)
/* A cubin above this is not cached on disk (nor read back): far beyond any
 * kernel the compiler makes, it bounds what a damaged file can allocate. */
#define ENTRY_MAX_CUBIN_BYTES ((uint64_t)256 << 20)
/* Trimming stops at this share of the size limit, so that a cache at its
 * limit is not trimmed again at every store. */
#define TRIM_TARGET_PERCENT 90
/* Paths: the cache directory and an entry's name (64 hex digits and the
 * suffix) inside it. */
#define JIT_PATH_MAX 4096
#define STORE_ERROR_MAX (JIT_PATH_MAX + 256)

typedef struct Entry {
  uint8_t key[SHA256_BYTES];
  uint64_t quick;   /* checksum64 of the key text: the memory look-up */
  char *key_text;   /* what the key covers (key_text below) */
  size_t key_len;
  void *cubin;
  size_t size;
  struct Entry *next;
} Entry;

struct tile_jit {
  tile_jit_options opt;
  char arch[32];
  char dir[JIT_PATH_MAX]; /* "" without a disk cache */
  uint64_t max_disk_bytes;
  pthread_mutex_t lock; /* entries and store_error */
  Entry *entries;
  char store_error[STORE_ERROR_MAX];
};

/* ---- keys ---- */

/* A growing byte string. */
typedef struct KeyText {
  char *p;
  size_t n, cap;
  bool failed;
} KeyText;

static void put_bytes(KeyText *k, const void *data, size_t len) {
  if (k->failed) return;
  if (k->n + len > k->cap) {
    size_t cap = k->cap ? k->cap : 256;
    while (cap < k->n + len) cap *= 2;
    char *g = realloc(k->p, cap);
    if (!g) {
      k->failed = true;
      return;
    }
    k->p = g, k->cap = cap;
  }
  memcpy(k->p + k->n, data, len);
  k->n += len;
}

static void put_str(KeyText *k, const char *text) {
  const char *t = text ? text : "";
  put_bytes(k, t, strlen(t) + 1);
}

static int cmp_define(const void *a, const void *b) {
  const tc_define *x = a, *y = b;
  return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

/* Everything that changes the cubin, as one byte string (malloc'd, NULL
 * when out of memory): the key is its SHA-256 (the disk entry's name), and
 * the memory cache compares it whole, so that a hit hashes nothing but a
 * fast checksum. */
static tile_status read_source(const char *path, char **text, size_t *len);

static char *key_text(const tile_jit *j, const tile_jit_source *src, const char *text, size_t len,
                      const tc_compilation *front, size_t *out_len) {
  KeyText k = {0};
  char llvm[64], num[64];
  put_str(&k, "tile-jit key 2");
  put_str(&k, TILE_JIT_COMPILER_ID);
  put_str(&k, TILEC_VERSION);
  put_str(&k, tc_llvm_version(llvm, sizeof llvm));
  snprintf(num, sizeof num, "cuda %d linker %d debug %d no_opt %d", CUDA_VERSION, (int)j->opt.linker,
           (int)j->opt.debug_barriers, (int)j->opt.no_opt);
  put_str(&k, num);
  put_str(&k, j->arch);
  put_str(&k, src->filename);
  put_str(&k, src->kernel ? src->kernel : "(every kernel)");
  /* sorted by name (stable for repeated names: the later one wins in the
   * compiler, and keeps its place here) */
  int n = src->ndefines > 0 ? src->ndefines : 0;
  tc_define *d = n ? malloc(sizeof *d * (size_t)n) : NULL;
  if (n && !d) {
    free(k.p);
    return NULL;
  }
  for (int i = 0; i < n; i++) d[i] = src->defines[i];
  for (int i = 1; i < n; i++) /* insertion sort: stable, and n is small */
    for (int m = i; m > 0 && cmp_define(&d[m - 1], &d[m]) > 0; m--) {
      tc_define t = d[m];
      d[m] = d[m - 1], d[m - 1] = t;
    }
  snprintf(num, sizeof num, "defines %d", n);
  put_str(&k, num);
  for (int i = 0; i < n; i++) put_str(&k, d[i].name), put_str(&k, d[i].value);
  free(d);
  snprintf(num, sizeof num, "source %zu", len);
  put_str(&k, num);
  put_bytes(&k, text, len);
  /* the imported files, each by its path and contents */
  int nimports = front ? tc_import_count(front) : 0;
  snprintf(num, sizeof num, "imports %d", nimports);
  put_str(&k, num);
  for (int i = 0; i < nimports && !k.failed; i++) {
    char *body = NULL;
    size_t blen = 0;
    if (read_source(tc_import_path(front, i), &body, &blen) != TILE_OK) {
      k.failed = true;
      break;
    }
    put_str(&k, tc_import_path(front, i));
    snprintf(num, sizeof num, "import %zu", blen);
    put_str(&k, num);
    put_bytes(&k, body, blen);
    free(body);
  }
  if (k.failed) {
    free(k.p);
    return NULL;
  }
  *out_len = k.n;
  return k.p;
}

/* A fast checksum of an entry's cubin (corruption and truncation, not
 * tampering: the file is the user's own). */
static uint64_t checksum64(const void *data, size_t len) {
  const uint8_t *p = data;
  uint64_t h = 0x243F6A8885A308D3ull ^ (uint64_t)len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  for (; i < len; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 33);
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* ---- the directory ---- */

static bool entry_path(const tile_jit *j, const uint8_t key[SHA256_BYTES], char *out, size_t size) {
  char hex[2 * SHA256_BYTES + 1];
  for (int i = 0; i < SHA256_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
  int n = snprintf(out, size, "%s/%s%s", j->dir, hex, JIT_ENTRY_SUFFIX);
  return n > 0 && (size_t)n < size;
}

/* mkdir -p, mode 0700 for what it creates. */
static bool make_dirs(const char *path) {
  char p[JIT_PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof p) return false;
  memcpy(p, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char c = p[i];
    p[i] = 0;
    if (mkdir(p, 0700) != 0 && errno != EEXIST) return false;
    p[i] = c;
  }
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool default_dir(char *out, size_t size) {
  const char *v = getenv("TILE_CACHE_DIR");
  int n;
  if (v && *v) n = snprintf(out, size, "%s", v);
  else if ((v = getenv("XDG_CACHE_HOME")) && *v) n = snprintf(out, size, "%s/tile", v);
  else if ((v = getenv("HOME")) && *v) n = snprintf(out, size, "%s/.cache/tile", v);
  else return false;
  return n > 0 && (size_t)n < size;
}

/* The cubin of an entry file, or NULL (missing, or damaged: then the file
 * is removed so that the next store replaces it). */
static void *read_entry(const tile_jit *j, const uint8_t key[SHA256_BYTES], size_t *size) {
  char path[JIT_PATH_MAX];
  if (!entry_path(j, key, path, sizeof path)) return NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  uint8_t head[ENTRY_HEADER_BYTES];
  void *cubin = NULL;
  bool damaged = true;
  if (fstat(fd, &st) == 0 && st.st_size >= ENTRY_HEADER_BYTES &&
      read(fd, head, ENTRY_HEADER_BYTES) == ENTRY_HEADER_BYTES && !memcmp(head, ENTRY_MAGIC, ENTRY_MAGIC_BYTES) &&
      !memcmp(head + ENTRY_MAGIC_BYTES, key, SHA256_BYTES)) {
    uint64_t n = get_u64(head + ENTRY_MAGIC_BYTES + SHA256_BYTES);
    uint64_t sum = get_u64(head + ENTRY_MAGIC_BYTES + SHA256_BYTES + 8);
    if (n > 0 && n <= ENTRY_MAX_CUBIN_BYTES && (uint64_t)st.st_size == ENTRY_HEADER_BYTES + n &&
        (cubin = malloc((size_t)n))) {
      size_t got = 0;
      while (got < n) {
        ssize_t r = read(fd, (char *)cubin + got, (size_t)n - got);
        if (r <= 0) break;
        got += (size_t)r;
      }
      if (got == n && checksum64(cubin, (size_t)n) == sum) {
        damaged = false;
        *size = (size_t)n;
      }
    }
  }
  close(fd);
  if (damaged) {
    free(cubin);
    unlink(path);
    return NULL;
  }
  utimensat(AT_FDCWD, path, NULL, 0); /* most recently used */
  return cubin;
}

typedef struct DirEntry {
  char name[2 * SHA256_BYTES + sizeof JIT_ENTRY_SUFFIX];
  uint64_t bytes;
  struct timespec mtime;
} DirEntry;

static int older_first(const void *a, const void *b) {
  const DirEntry *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Whether a directory entry's name is one of the cache's files: a key in
 * hex and a suffix of jit_files.h. */
static bool is_cache_file(const char *name, size_t len) {
  static const char *const suffixes[] = {JIT_ENTRY_SUFFIX, JIT_TUNE_SUFFIX};
  for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
    size_t slen = strlen(suffixes[i]);
    if (len == 2 * SHA256_BYTES + slen && strcmp(name + len - slen, suffixes[i]) == 0 &&
        strspn(name, "0123456789abcdef") == 2 * SHA256_BYTES)
      return true;
  }
  return false;
}

/* The cache's files, cubins and tuning choices (malloc'd, *n of them; NULL when there are none or
 * the directory cannot be read), with their sizes and times. */
static DirEntry *list_entries(const tile_jit *j, size_t *n) {
  *n = 0;
  DIR *d = opendir(j->dir);
  if (!d) return NULL;
  DirEntry *list = NULL;
  size_t cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (!is_cache_file(e->d_name, len)) continue;
    char path[JIT_PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", j->dir, e->d_name) >= (int)sizeof path || stat(path, &st) != 0) continue;
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      DirEntry *g = realloc(list, sizeof *g * nc);
      if (!g) break;
      list = g, cap = nc;
    }
    memcpy(list[*n].name, e->d_name, len + 1);
    list[*n].bytes = (uint64_t)st.st_size;
    list[*n].mtime = st.st_mtim;
    ++*n;
  }
  closedir(d);
  return list;
}

static bool remove_entry(const tile_jit *j, const DirEntry *e) {
  char path[JIT_PATH_MAX];
  int w = snprintf(path, sizeof path, "%s/%s", j->dir, e->name);
  return w > 0 && (size_t)w < sizeof path && unlink(path) == 0;
}

/* Removes the least recently used entries while the cache is above its
 * limit (down to TRIM_TARGET_PERCENT of it). Entries other processes are
 * reading stay readable to them (POSIX unlink). */
static void trim(const tile_jit *j) {
  size_t n;
  DirEntry *list = list_entries(j, &n);
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += list[i].bytes;
  if (total > j->max_disk_bytes) {
    qsort(list, n, sizeof *list, older_first);
    uint64_t target = j->max_disk_bytes / 100 * TRIM_TARGET_PERCENT;
    for (size_t i = 0; i < n && total > target; i++)
      if (remove_entry(j, &list[i])) total -= list[i].bytes;
  }
  free(list);
}

tile_status tile_jit_clear(tile_jit *jit, int *removed) {
  if (removed) *removed = 0;
  if (!jit) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_clear: jit is NULL");
  if (!jit->dir[0]) return TILE_OK;
  size_t n;
  DirEntry *list = list_entries(jit, &n);
  int gone = 0;
  for (size_t i = 0; i < n; i++) gone += remove_entry(jit, &list[i]);
  free(list);
  if (removed) *removed = gone;
  return TILE_OK;
}

static void set_store_error(tile_jit *j, const char *what, const char *path) {
  pthread_mutex_lock(&j->lock);
  snprintf(j->store_error, sizeof j->store_error, "%s %s: %s", what, path, strerror(errno));
  pthread_mutex_unlock(&j->lock);
}

/* Writes an entry under a temporary name and renames it into place. */
static void store_entry(tile_jit *j, const uint8_t key[SHA256_BYTES], const void *cubin, size_t size) {
  if (size > ENTRY_MAX_CUBIN_BYTES) return;
  char path[JIT_PATH_MAX], tmp[JIT_PATH_MAX];
  if (!entry_path(j, key, path, sizeof path) || snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", j->dir) >= (int)sizeof tmp)
    return;
  int fd = mkstemp(tmp);
  if (fd < 0) {
    set_store_error(j, "cannot create a file in", j->dir);
    return;
  }
  uint8_t head[ENTRY_HEADER_BYTES];
  memcpy(head, ENTRY_MAGIC, ENTRY_MAGIC_BYTES);
  memcpy(head + ENTRY_MAGIC_BYTES, key, SHA256_BYTES);
  put_u64(head + ENTRY_MAGIC_BYTES + SHA256_BYTES, size);
  put_u64(head + ENTRY_MAGIC_BYTES + SHA256_BYTES + 8, checksum64(cubin, size));
  bool ok = write(fd, head, sizeof head) == (ssize_t)sizeof head;
  for (size_t done = 0; ok && done < size;) {
    ssize_t w = write(fd, (const char *)cubin + done, size - done);
    if (w <= 0) ok = false;
    else done += (size_t)w;
  }
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    set_store_error(j, ok ? "cannot rename into" : "cannot write", ok ? path : tmp);
    unlink(tmp);
    return;
  }
  trim(j);
}

/* ---- the public functions ---- */

tile_status tile_jit_create(const tile_jit_options *options, tile_jit **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_create: out is NULL");
  *out = NULL;
  tile_jit *j = calloc(1, sizeof *j);
  if (!j) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit_create: out of memory");
  if (options) j->opt = *options;
  snprintf(j->arch, sizeof j->arch, "%s", j->opt.arch ? j->opt.arch : "sm_90a");
  j->opt.arch = j->arch;
  j->max_disk_bytes = j->opt.max_disk_bytes ? j->opt.max_disk_bytes : TILE_JIT_DEFAULT_DISK_BYTES;
  const char *off = getenv("TILE_CACHE_DISABLE");
  bool disk = !j->opt.no_disk_cache && !(off && *off && strcmp(off, "0"));
  if (disk) {
    int n = j->opt.cache_dir ? snprintf(j->dir, sizeof j->dir, "%s", j->opt.cache_dir) : 0;
    bool named = j->opt.cache_dir ? n > 0 && (size_t)n < sizeof j->dir : default_dir(j->dir, sizeof j->dir);
    if (!named) {
      free(j);
      return tilert_fail(TILE_ERROR_IO,
                         "tile_jit_create: no cache directory (set TILE_CACHE_DIR, XDG_CACHE_HOME or HOME, or "
                         "turn the disk cache off)");
    }
    if (!make_dirs(j->dir)) {
      tile_status st = tilert_fail(TILE_ERROR_IO, "tile_jit_create: cannot create the cache directory %s: %s",
                                   j->dir, strerror(errno));
      free(j);
      return st;
    }
  }
  j->opt.cache_dir = NULL; /* the caller's string is not kept */
  pthread_mutex_init(&j->lock, NULL);
  *out = j;
  return TILE_OK;
}

void tile_jit_destroy(tile_jit *j) {
  if (!j) return;
  for (Entry *e = j->entries, *next; e; e = next) {
    next = e->next;
    free(e->cubin);
    free(e->key_text);
    free(e);
  }
  pthread_mutex_destroy(&j->lock);
  free(j);
}

const char *tile_jit_cache_dir(const tile_jit *j) { return j && j->dir[0] ? j->dir : NULL; }

const char *tile_jit_last_store_error(tile_jit *j, char *buf, size_t size) {
  if (!buf || !size) return buf;
  buf[0] = 0;
  if (!j) return buf;
  pthread_mutex_lock(&j->lock);
  snprintf(buf, size, "%s", j->store_error);
  pthread_mutex_unlock(&j->lock);
  return buf;
}

/* The entry made from the same key text, if any (under j->lock). */
static Entry *find(tile_jit *j, uint64_t quick, const char *text, size_t len) {
  for (Entry *e = j->entries; e; e = e->next)
    if (e->quick == quick && e->key_len == len && !memcmp(e->key_text, text, len)) return e;
  return NULL;
}

/* Keeps cubin and the key text (taking ownership of both) unless another
 * thread got there first; returns the entry that holds the key. */
static Entry *remember(tile_jit *j, const uint8_t key[SHA256_BYTES], uint64_t quick, char *text, size_t len,
                       void *cubin, size_t size) {
  pthread_mutex_lock(&j->lock);
  Entry *e = find(j, quick, text, len);
  if (e) {
    free(cubin), free(text);
  } else if ((e = malloc(sizeof *e))) {
    memcpy(e->key, key, SHA256_BYTES);
    e->quick = quick, e->key_text = text, e->key_len = len;
    e->cubin = cubin, e->size = size, e->next = j->entries;
    j->entries = e;
  } else {
    free(cubin), free(text);
  }
  pthread_mutex_unlock(&j->lock);
  return e;
}

static tile_status read_source(const char *path, char **text, size_t *len) {
  const char *why = NULL;
  *text = tc_read_file(path, len, &why);
  if (!*text) return tilert_fail(TILE_ERROR_IO, "tile_jit: cannot read %s: %s", path, why);
  return TILE_OK;
}

/* The front end on the source (tc_compile); NULL when out of memory. */
static tc_compilation *front_end(const tile_jit *j, const tile_jit_source *src, const char *text, size_t len) {
  tc_options o = {.kernel = src->kernel, .defines = src->defines, .ndefines = src->ndefines, .no_opt = j->opt.no_opt,
                  .include_dirs = src->include_dirs, .ninclude_dirs = src->ninclude_dirs};
  return tc_compile(src->filename, text, len, &o);
}

/* Compiles to a cubin (malloc'd) or fails with the diagnostics; front: the
 * front end's result if it ran already (taken over), else NULL. */
static tile_status compile(const tile_jit *j, const tile_jit_source *src, const char *text, size_t len,
                           tc_compilation *front, void **cubin, size_t *size) {
  tc_compilation *c = front ? front : front_end(j, src, text, len);
  if (!c) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit: out of memory compiling %s", src->filename);
  tc_codegen_options g = {.arch = j->arch, .linker = j->opt.linker, .debug_barriers = j->opt.debug_barriers};
  tile_status st = TILE_OK;
  if (tc_error_count(c) || !tc_generate(c, &g)) {
    st = tilert_fail(TILE_ERROR_COMPILE, "%s", tc_diagnostics(c));
  } else {
    size_t n = 0;
    const void *bytes = tc_cubin(c, &n);
    if (!bytes || !n) st = tilert_fail(TILE_ERROR_COMPILE, "tile_jit: %s: no cubin was made", src->filename);
    else if (!(*cubin = malloc(n))) st = tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit: out of memory");
    else memcpy(*cubin, bytes, n), *size = n;
  }
  tc_free(c);
  return st;
}

tile_status tile_jit_cubin(tile_jit *j, const tile_jit_source *src, const void **cubin, size_t *size,
                           tile_jit_origin *origin) {
  if (!j || !src || !cubin || !size || !src->filename)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_cubin: jit, src, src->filename, cubin and size are required");
  if (src->ndefines < 0 || (src->ndefines > 0 && !src->defines))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_cubin: %d defines at %p", src->ndefines,
                       (const void *)src->defines);
  for (int i = 0; i < src->ndefines; i++)
    if (!src->defines[i].name || !src->defines[i].value)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_cubin: define %d has no name or value", i);
  char *owned = NULL;
  const char *text = src->source;
  size_t len = src->len;
  if (!text) {
    tile_status st = read_source(src->filename, &owned, &len);
    if (st != TILE_OK) return st;
    text = owned;
  }
  /* a source that may import files: the front end finds them first */
  tc_compilation *front = NULL;
  if (memmem(text, len, "import", 6)) {
    front = front_end(j, src, text, len);
    if (!front || tc_error_count(front)) {
      tile_status st = front ? tilert_fail(TILE_ERROR_COMPILE, "%s", tc_diagnostics(front))
                             : tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit: out of memory compiling %s", src->filename);
      tc_free(front), free(owned);
      return st;
    }
  }
  size_t klen = 0;
  char *ktext = key_text(j, src, text, len, front, &klen);
  if (!ktext) {
    tc_free(front), free(owned);
    return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit: out of memory (or an imported file could not be read)");
  }
  uint64_t quick = checksum64(ktext, klen);
  pthread_mutex_lock(&j->lock);
  Entry *e = find(j, quick, ktext, klen);
  pthread_mutex_unlock(&j->lock);
  tile_jit_origin from = TILE_JIT_MEMORY;
  uint8_t key[SHA256_BYTES];
  if (!e) {
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, ktext, klen);
    sha256_final(&h, key);
  }
  if (!e && j->dir[0]) {
    size_t n = 0;
    void *bytes = read_entry(j, key, &n);
    if (bytes) {
      e = remember(j, key, quick, ktext, klen, bytes, n);
      ktext = NULL;
      from = TILE_JIT_DISK;
    }
  }
  if (!e) {
    void *bytes = NULL;
    size_t n = 0;
    tile_status st = compile(j, src, text, len, front, &bytes, &n);
    front = NULL; /* compile took it */
    if (st != TILE_OK) {
      free(owned), free(ktext);
      return st;
    }
    if (j->dir[0]) store_entry(j, key, bytes, n);
    e = remember(j, key, quick, ktext, klen, bytes, n);
    ktext = NULL;
    from = TILE_JIT_COMPILED;
  }
  free(ktext);
  free(owned);
  tc_free(front);
  if (!e) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit: out of memory");
  *cubin = e->cubin, *size = e->size;
  if (origin) *origin = from;
  return TILE_OK;
}

tile_status tile_jit_load(tile_jit *j, tile_runtime *rt, const tile_jit_source *src, tile_module **module,
                          tile_kernel **kernel) {
  if (!module || !kernel || !src || !src->kernel)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_load: src, src->kernel, module and kernel are required");
  *module = NULL, *kernel = NULL;
  const void *cubin;
  size_t size;
  tile_status st = tile_jit_cubin(j, src, &cubin, &size, NULL);
  if (st != TILE_OK) return st;
  tile_module *m;
  if ((st = tile_module_load(rt, cubin, size, &m)) != TILE_OK) return st;
  if ((st = tile_kernel_get(m, src->kernel, kernel)) != TILE_OK) {
    tile_module_unload(m);
    return st;
  }
  *module = m;
  return TILE_OK;
}
