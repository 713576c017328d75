/* test_jit.c - libtile_jit: the memory and disk caches, their keys,
 * damaged entries, concurrent processes, trimming, errors. Needs the CUDA
 * toolkit's ptxas or nvJitLink (the cubins are real), no GPU. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sha256.h"
#include "tile_jit.h"

static bool have_toolkit(void) { return access("/usr/local/cuda/bin/ptxas", X_OK) == 0; }

static const char *const SRC = "kernel scale(x: *f32, n: i32, const BLOCK: i32 = 256, const K: i32 = 2) {\n"
                               "  let i = program_id(0) * BLOCK + arange(0, BLOCK);\n"
                               "  store(x + i, load(x + i, i < n, 0.0) * (K as f32), i < n);\n"
                               "}\n"
                               "kernel other(x: *f32) { store(x + arange(0, 32), full([32], 1.0, f32)); }\n";

/* A fresh cache directory under /tmp. */
static void temp_dir(char *out, size_t size) {
  snprintf(out, size, "/tmp/tile-jit-test-XXXXXX");
  cr_assert(mkdtemp(out), "mkdtemp");
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* Entry files (*.cubin) in dir, and their total size; stray temporaries
 * counted apart. */
static int count_entries(const char *dir, long *bytes, int *temps) {
  DIR *d = opendir(dir);
  int n = 0;
  if (bytes) *bytes = 0;
  if (temps) *temps = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (!strncmp(e->d_name, ".tmp-", 5) && temps) (*temps)++;
    if (len < 6 || strcmp(e->d_name + len - 6, ".cubin")) continue;
    n++;
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (bytes && stat(p, &st) == 0) *bytes += st.st_size;
  }
  closedir(d);
  return n;
}

/* The one entry file of dir. */
static void only_entry(const char *dir, char *out, size_t size) {
  DIR *d = opendir(dir);
  cr_assert(d);
  out[0] = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, ".cubin")) snprintf(out, size, "%s/%s", dir, e->d_name);
  closedir(d);
  cr_assert(out[0], "no entry in %s", dir);
}

static tile_jit *make_jit(const char *dir) {
  tile_jit_options o = {.cache_dir = dir, .linker = TC_LINKER_PTXAS};
  tile_jit *j = NULL;
  cr_assert_eq(tile_jit_create(&o, &j), TILE_OK, "%s", tile_last_error());
  return j;
}

static tile_jit_source scale_src(const char *block) {
  static tc_define d[2];
  d[0] = (tc_define){"BLOCK", block};
  d[1] = (tc_define){"K", "3"};
  return (tile_jit_source){.filename = "scale.tile", .source = SRC, .len = strlen(SRC), .kernel = "scale",
                           .defines = d, .ndefines = 2};
}

Test(jit, hits_give_the_compiled_bytes_from_memory_and_from_disk) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit *j = make_jit(dir);
  tile_jit_source s = scale_src("256");
  const void *a, *b, *c;
  size_t na, nb, nc;
  tile_jit_origin o;
  cr_assert_eq(tile_jit_cubin(j, &s, &a, &na, &o), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(o, TILE_JIT_COMPILED);
  cr_assert_eq(tile_jit_cubin(j, &s, &b, &nb, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_MEMORY);
  cr_expect(a == b && na == nb);
  cr_expect_eq(count_entries(dir, NULL, NULL), 1);
  void *copy = malloc(na);
  memcpy(copy, a, na);
  tile_jit_destroy(j);
  j = make_jit(dir); /* another process, as far as the cache can tell */
  cr_assert_eq(tile_jit_cubin(j, &s, &c, &nc, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_DISK);
  cr_expect(nc == na && !memcmp(c, copy, na), "the disk entry holds the compiled cubin");
  free(copy);
  tile_jit_destroy(j);
  remove_dir(dir);
}

/* tile_jit_clear removes the entries (only them); the jit keeps its
 * memory copies, a new one compiles again. */
Test(jit, clear_removes_the_disk_entries) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64], other[96];
  temp_dir(dir, sizeof dir);
  snprintf(other, sizeof other, "%s/notes.txt", dir);
  FILE *f = fopen(other, "w");
  cr_assert(f);
  fputs("not an entry\n", f);
  fclose(f);
  char tune[160], lookalike[160];
  snprintf(tune, sizeof tune, "%s/%064d.tune", dir, 7); /* a stored tuning choice */
  snprintf(lookalike, sizeof lookalike, "%s/%064d.tunes", dir, 7);
  cr_assert((f = fopen(tune, "w")));
  fputs("tile-tune 1\nBLOCK=256\n", f);
  fclose(f);
  cr_assert((f = fopen(lookalike, "w")));
  fclose(f);
  tile_jit *j = make_jit(dir);
  tile_jit_source s1 = scale_src("512"); /* scale_src's defines are static: one source at a time */
  const void *a;
  size_t na;
  tile_jit_origin o;
  cr_assert_eq(tile_jit_cubin(j, &s1, &a, &na, &o), TILE_OK, "%s", tile_last_error());
  s1 = scale_src("256");
  cr_assert_eq(tile_jit_cubin(j, &s1, &a, &na, &o), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(count_entries(dir, NULL, NULL), 2);
  int removed = -1;
  cr_expect_eq(tile_jit_clear(j, &removed), TILE_OK);
  cr_expect_eq(removed, 3, "two cubins and a tuning choice");
  cr_expect_eq(count_entries(dir, NULL, NULL), 0);
  cr_expect_neq(access(tune, F_OK), 0, "the tuning choice is removed");
  cr_expect_eq(access(other, F_OK), 0, "a file that is not an entry stays");
  cr_expect_eq(access(lookalike, F_OK), 0, "a name that only resembles an entry stays");
  cr_assert_eq(tile_jit_cubin(j, &s1, &a, &na, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_MEMORY);
  tile_jit_destroy(j);
  j = make_jit(dir);
  cr_assert_eq(tile_jit_cubin(j, &s1, &a, &na, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_COMPILED);
  cr_expect_eq(tile_jit_clear(NULL, NULL), TILE_ERROR_INVALID_ARGUMENT);
  tile_jit_destroy(j);
  remove_dir(dir);
}

Test(jit, the_key_covers_consts_kernel_source_and_options) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit *j = make_jit(dir);
  const void *p;
  size_t n;
  tile_jit_origin o;
  tile_jit_source s = scale_src("256");
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK, "%s", tile_last_error());
  /* the same consts in another order: the same entry */
  tc_define swapped[2] = {{"K", "3"}, {"BLOCK", "256"}};
  tile_jit_source t = s;
  t.defines = swapped;
  cr_assert_eq(tile_jit_cubin(j, &t, &p, &n, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_MEMORY, "const order does not matter");
  s = scale_src("512");
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_COMPILED, "another const value");
  s.kernel = "other", s.ndefines = 0;
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_COMPILED, "another kernel");
  char edited[1024];
  snprintf(edited, sizeof edited, "%s// edited\n", SRC);
  s.source = edited, s.len = strlen(edited);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_COMPILED, "other source text");
  tile_jit_destroy(j);
  tile_jit_options dbg = {.cache_dir = dir, .linker = TC_LINKER_PTXAS, .debug_barriers = true};
  cr_assert_eq(tile_jit_create(&dbg, &j), TILE_OK);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
  cr_expect_eq(o, TILE_JIT_COMPILED, "another option");
  tile_jit_destroy(j);
  cr_expect_eq(count_entries(dir, NULL, NULL), 5);
  remove_dir(dir);
}

/* A damaged entry (one byte of the cubin flipped, the file cut short, a
 * header of another key) is found, removed and rebuilt. */
Test(jit, damaged_entries_are_rebuilt) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  for (int damage = 0; damage < 3; damage++) {
    char dir[64], path[4096];
    temp_dir(dir, sizeof dir);
    tile_jit *j = make_jit(dir);
    tile_jit_source s = scale_src("256");
    const void *p;
    size_t n, n0;
    tile_jit_origin o;
    cr_assert_eq(tile_jit_cubin(j, &s, &p, &n0, &o), TILE_OK, "%s", tile_last_error());
    void *good = malloc(n0);
    memcpy(good, p, n0);
    tile_jit_destroy(j);
    only_entry(dir, path, sizeof path);
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    if (damage == 0) { /* a byte in the middle of the cubin */
      fseek(f, st.st_size / 2, SEEK_SET);
      int c = fgetc(f);
      fseek(f, st.st_size / 2, SEEK_SET);
      fputc(c ^ 0x40, f);
      fclose(f);
    } else if (damage == 1) {
      fclose(f);
      cr_assert_eq(truncate(path, st.st_size - 100), 0);
    } else { /* the key in the header */
      fseek(f, 8, SEEK_SET);
      fputc(0xAB, f), fputc(0xCD, f);
      fclose(f);
    }
    j = make_jit(dir);
    cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
    cr_expect_eq(o, TILE_JIT_COMPILED, "damage %d: rebuilt, not read", damage);
    cr_expect(n == n0 && !memcmp(p, good, n0), "damage %d: the rebuilt cubin is the original", damage);
    tile_jit_destroy(j);
    j = make_jit(dir);
    cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
    cr_expect_eq(o, TILE_JIT_DISK, "damage %d: the rebuilt entry is good", damage);
    tile_jit_destroy(j);
    free(good);
    remove_dir(dir);
  }
}

/* 16 processes into one empty cache at once, each compiling the same
 * kernel and one of its own: all succeed, every entry is complete, no
 * temporary file is left. */
Test(jit, concurrent_processes_share_a_cache) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  enum { PROCS = 16 };
  char dir[64];
  temp_dir(dir, sizeof dir);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    cr_assert(pids[i] >= 0, "fork");
    if (pids[i] == 0) {
      tile_jit_options o = {.cache_dir = dir, .linker = TC_LINKER_PTXAS};
      tile_jit *j;
      if (tile_jit_create(&o, &j) != TILE_OK) _exit(2);
      static const char *const own[4] = {"32", "64", "128", "512"}; /* 4 kernels, 4 processes each */
      const void *p;
      size_t n;
      tile_jit_source s = scale_src("256");
      int rc = tile_jit_cubin(j, &s, &p, &n, NULL) == TILE_OK ? 0 : 3;
      s = scale_src(own[i % 4]);
      if (!rc && tile_jit_cubin(j, &s, &p, &n, NULL) != TILE_OK) rc = 3;
      tile_jit_destroy(j);
      _exit(rc);
    }
  }
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: status %d", i, status);
  }
  int temps = 0;
  cr_expect_eq(count_entries(dir, NULL, &temps), 5, "the shared kernel and 4 others");
  cr_expect_eq(temps, 0, "no temporary file left");
  tile_jit *j = make_jit(dir);
  static const char *const all[5] = {"32", "64", "128", "512", "256"};
  for (int i = 0; i < 5; i++) {
    const char *block = all[i];
    tile_jit_source s = scale_src(block);
    const void *p;
    size_t n;
    tile_jit_origin o;
    cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &o), TILE_OK);
    cr_expect_eq(o, TILE_JIT_DISK, "BLOCK %s: a complete entry", block);
  }
  tile_jit_destroy(j);
  remove_dir(dir);
}

/* One tile_jit shared by threads: each asks for the shared kernel and one
 * of four others; every thread gets the same bytes for the same key (one
 * memory entry, whoever compiled it), and the disk holds 5 entries. */
enum { JIT_THREADS = 8 };

typedef struct JitThread {
  tile_jit *j;
  int index;
  const void *shared, *own;
  size_t shared_size, own_size;
  tile_status st;
} JitThread;

static void *jit_thread(void *arg) {
  JitThread *t = arg;
  static const char *const own[4] = {"32", "64", "128", "512"};
  tile_jit_source s = {.filename = "scale.tile", .source = SRC, .len = strlen(SRC), .kernel = "scale"};
  tc_define d[2] = {{"BLOCK", "256"}, {"K", "3"}}; /* scale_src's statics are not shared across threads */
  s.defines = d, s.ndefines = 2;
  t->st = tile_jit_cubin(t->j, &s, &t->shared, &t->shared_size, NULL);
  d[0].value = own[t->index % 4];
  if (t->st == TILE_OK) t->st = tile_jit_cubin(t->j, &s, &t->own, &t->own_size, NULL);
  return NULL;
}

Test(jit, threads_share_one_jit) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit *j = make_jit(dir);
  JitThread t[JIT_THREADS];
  pthread_t th[JIT_THREADS];
  for (int i = 0; i < JIT_THREADS; i++) {
    t[i] = (JitThread){.j = j, .index = i};
    cr_assert_eq(pthread_create(&th[i], NULL, jit_thread, &t[i]), 0);
  }
  for (int i = 0; i < JIT_THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < JIT_THREADS; i++) {
    cr_assert_eq(t[i].st, TILE_OK, "thread %d: %s", i, tile_status_name(t[i].st));
    /* the same pointer: the memory cache holds one entry per key */
    cr_expect(t[i].shared == t[0].shared && t[i].shared_size == t[0].shared_size, "thread %d: shared kernel", i);
    cr_expect(t[i].own == t[i % 4].own && t[i].own_size == t[i % 4].own_size, "thread %d: its own kernel", i);
    cr_expect(t[i].own != t[i].shared);
  }
  int temps = 0;
  cr_expect_eq(count_entries(dir, NULL, &temps), 5, "the shared kernel and 4 others");
  cr_expect_eq(temps, 0, "no temporary file left");
  tile_jit_destroy(j);
  remove_dir(dir);
}

Test(jit, the_disk_cache_is_trimmed_to_its_limit_oldest_first) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit *j = make_jit(dir);
  const void *p;
  size_t one;
  tile_jit_source s = scale_src("32");
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &one, NULL), TILE_OK, "%s", tile_last_error());
  tile_jit_destroy(j);
  long bytes;
  count_entries(dir, &bytes, NULL);
  /* room for about three entries */
  tile_jit_options o = {.cache_dir = dir, .linker = TC_LINKER_PTXAS, .max_disk_bytes = (uint64_t)bytes * 3 + bytes / 2};
  cr_assert_eq(tile_jit_create(&o, &j), TILE_OK);
  static const char *const blocks[] = {"64", "128", "256", "512", "1024"};
  for (int i = 0; i < 5; i++) {
    tile_jit_source t = scale_src(blocks[i]);
    cr_assert_eq(tile_jit_cubin(j, &t, &p, &one, NULL), TILE_OK);
    usleep(20000); /* distinct modification times */
  }
  tile_jit_destroy(j);
  long total;
  int n = count_entries(dir, &total, NULL);
  cr_expect(total <= (long)o.max_disk_bytes, "%ld bytes in %d entries, limit %llu", total, n,
            (unsigned long long)o.max_disk_bytes);
  cr_expect(n >= 2 && n <= 3, "%d entries", n);
  cr_assert_eq(tile_jit_create(&o, &j), TILE_OK);
  tile_jit_origin from;
  tile_jit_source newest = scale_src("1024"); /* (scale_src's defines are shared: one at a time) */
  cr_assert_eq(tile_jit_cubin(j, &newest, &p, &one, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_DISK, "the newest entry stays");
  tile_jit_source oldest = scale_src("32");
  cr_assert_eq(tile_jit_cubin(j, &oldest, &p, &one, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_COMPILED, "the oldest went first");
  tile_jit_destroy(j);
  remove_dir(dir);
}

Test(jit, memory_only_and_errors) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit_options o = {.cache_dir = dir, .no_disk_cache = true, .linker = TC_LINKER_PTXAS};
  tile_jit *j;
  cr_assert_eq(tile_jit_create(&o, &j), TILE_OK);
  cr_expect_null(tile_jit_cache_dir(j));
  tile_jit_source s = scale_src("256");
  const void *p;
  size_t n;
  tile_jit_origin from;
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_MEMORY);
  cr_expect_eq(count_entries(dir, NULL, NULL), 0, "nothing on disk");
  const char *bad = "kernel k(x: *f32) {\n  store(x, y);\n}\n";
  tile_jit_source b = {.filename = "bad.tile", .source = bad, .len = strlen(bad), .kernel = "k"};
  cr_expect_eq(tile_jit_cubin(j, &b, &p, &n, &from), TILE_ERROR_COMPILE);
  cr_expect(strstr(tile_last_error(), "bad.tile:2:"), "diagnostics with a location: %s", tile_last_error());
  tile_jit_source missing = {.filename = "/nonexistent/k.tile", .kernel = "k"};
  cr_expect_eq(tile_jit_cubin(j, &missing, &p, &n, &from), TILE_ERROR_IO);
  cr_expect(strstr(tile_last_error(), "/nonexistent/k.tile"), "%s", tile_last_error());
  tc_define nul[1] = {{"BLOCK", NULL}};
  tile_jit_source nd = s;
  nd.defines = nul, nd.ndefines = 1;
  cr_expect_eq(tile_jit_cubin(j, &nd, &p, &n, &from), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(tile_jit_cubin(j, NULL, &p, &n, &from), TILE_ERROR_INVALID_ARGUMENT);
  tile_jit_destroy(j);
  /* a cache directory that cannot be created */
  tile_jit_options ro = {.cache_dir = "/proc/tile-cache", .linker = TC_LINKER_PTXAS};
  cr_expect_eq(tile_jit_create(&ro, &j), TILE_ERROR_IO);
  cr_expect(strstr(tile_last_error(), "/proc/tile-cache"), "%s", tile_last_error());
  remove_dir(dir);
}

/* A file read from disk (source NULL) is keyed by its text: an edit gives
 * a new entry. */
Test(jit, files_are_read_and_keyed_by_their_text) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64], file[128];
  temp_dir(dir, sizeof dir);
  snprintf(file, sizeof file, "%s/k.tile.src", dir);
  FILE *f = fopen(file, "w");
  fputs(SRC, f);
  fclose(f);
  tile_jit *j = make_jit(dir);
  tile_jit_source s = {.filename = file, .kernel = "other"};
  const void *p;
  size_t n;
  tile_jit_origin from;
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(from, TILE_JIT_COMPILED);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_MEMORY);
  f = fopen(file, "a");
  fputs("// a comment\n", f);
  fclose(f);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_COMPILED, "the edited file is compiled again");
  tile_jit_destroy(j);
  unlink(file);
  remove_dir(dir);
}

/* A source that imports a file: a changed imported file is compiled
 * again (its contents are in the key), an unchanged one is a hit; the
 * import is found through include_dirs. */
Test(jit, imported_files_are_in_the_key) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[64], lib[128];
  temp_dir(dir, sizeof dir);
  snprintf(lib, sizeof lib, "%s/scale.tile", dir);
  FILE *f = fopen(lib, "w");
  fputs("fn scale(x) { return x * 2.0; }\n", f);
  fclose(f);
  static const char src[] = "import \"scale.tile\";\n"
                            "kernel k(p: *f32) { store(p + arange(0, 128), scale.scale(load(p + arange(0, 128)))); }\n";
  tile_jit *j = make_jit(dir);
  const char *dirs[] = {dir};
  tile_jit_source s = {.filename = "main.tile", .source = src, .len = sizeof src - 1, .include_dirs = dirs,
                       .ninclude_dirs = 1};
  const void *p;
  size_t n;
  tile_jit_origin from;
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(from, TILE_JIT_COMPILED);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_MEMORY);
  f = fopen(lib, "w");
  fputs("fn scale(x) { return x * 3.0; }\n", f);
  fclose(f);
  cr_assert_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_OK);
  cr_expect_eq(from, TILE_JIT_COMPILED, "the edited imported file is compiled again");
  s.ninclude_dirs = 0; /* not found any more: the front end's error */
  cr_expect_eq(tile_jit_cubin(j, &s, &p, &n, &from), TILE_ERROR_COMPILE);
  cr_expect(strstr(tile_last_error(), "cannot find 'scale.tile'"), "%s", tile_last_error());
  tile_jit_destroy(j);
  unlink(lib);
  remove_dir(dir);
}

/* The keys' hash against FIPS 180-4's examples. */
Test(jit, sha256_matches_the_standard_vectors) {
  static const struct {
    const char *text;
    size_t repeat;
    const char *hex;
  } v[] = {{"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
           {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
           {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
           {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"}};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    Sha256 s;
    sha256_init(&s);
    for (size_t r = 0; r < v[i].repeat; r++) sha256_update(&s, v[i].text, strlen(v[i].text));
    uint8_t out[SHA256_BYTES];
    sha256_final(&s, out);
    char hex[2 * SHA256_BYTES + 1];
    for (int k = 0; k < SHA256_BYTES; k++) snprintf(hex + 2 * k, 3, "%02x", out[k]);
    cr_expect_str_eq(hex, v[i].hex, "vector %zu", i);
  }
}

/* ---- autotuning: what is checked before anything runs on a GPU ---- */

static tile_status no_launch(void *user, tile_kernel *k, const tc_define *config, int n, tile_stream *s) {
  (void)user, (void)k, (void)config, (void)n, (void)s;
  return TILE_OK;
}

/* Runs tile_jit_autotune without a runtime: every error it finds before
 * it needs the GPU. */
static tile_status tune_no_gpu(tile_jit *j, const tile_jit_source *src, const char *const *configs, int n) {
  tile_jit_tune t = {.configs = configs, .nconfigs = n, .launch = no_launch};
  tile_jit_tune_result r;
  return tile_jit_autotune(j, NULL, src, &t, &r);
}

Test(jit, autotune_checks_its_configurations) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit");
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit *j = make_jit(dir);
  tile_jit_source src = scale_src("256");
  /* the kernel has no @config and none are given */
  cr_expect_eq(tune_no_gpu(j, &src, NULL, 0), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "declares no @config"), "%s", tile_last_error());
  const char *bad[] = {"BLOCK", "BLOCK=", "=4", "", "BLOCK=128,,K=2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_eq(tune_no_gpu(j, &src, &bad[i], 1), TILE_ERROR_INVALID_ARGUMENT, "'%s'", bad[i]);
    cr_expect(strstr(tile_last_error(), "configuration"), "'%s': %s", bad[i], tile_last_error());
  }
  const char *good[] = {"BLOCK=128", " BLOCK = 512 , K = 4 "};
  /* well-formed: then the missing runtime is the error */
  cr_expect_eq(tune_no_gpu(j, &src, good, 2), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "rt is required"), "%s", tile_last_error());
  cr_expect_eq(tune_no_gpu(j, &src, good, -1), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(tune_no_gpu(j, &src, good, TILE_JIT_TUNE_MAX_CONFIGS + 1), TILE_ERROR_INVALID_ARGUMENT);
  tile_jit_tune t = {.configs = good, .nconfigs = 2}; /* no launch function */
  tile_jit_tune_result r;
  cr_expect_eq(tile_jit_autotune(j, NULL, &src, &t, &r), TILE_ERROR_INVALID_ARGUMENT);
  tile_jit_destroy(j);
  remove_dir(dir);
}

Test(jit, autotune_reads_the_kernels_config_list) {
  if (!have_toolkit()) cr_skip_test("no CUDA toolkit");
  static const char *const TUNED = "@config(BLOCK = 128)\n@config(BLOCK = 512, K = 4)\n"
                                   "kernel scale(x: *f32, n: i32, const BLOCK: i32 = 256, const K: i32 = 2) {\n"
                                   "  let i = program_id(0) * BLOCK + arange(0, BLOCK);\n"
                                   "  store(x + i, load(x + i, i < n, 0.0) * (K as f32), i < n);\n"
                                   "}\n";
  char dir[64];
  temp_dir(dir, sizeof dir);
  tile_jit *j = make_jit(dir);
  tile_jit_source src = {.filename = "tuned.tile", .source = TUNED, .len = strlen(TUNED), .kernel = "scale"};
  /* the list is read (and is well-formed): the runtime is what is missing */
  cr_expect_eq(tune_no_gpu(j, &src, NULL, 0), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "rt is required"), "%s", tile_last_error());
  tile_jit_source missing = src;
  missing.kernel = "nope";
  cr_expect_neq(tune_no_gpu(j, &missing, NULL, 0), TILE_OK);
  tile_jit_destroy(j);
  remove_dir(dir);
}
