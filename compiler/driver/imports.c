/* imports.c - `import "file.tile" [as name];`: the files a compilation
 * reads besides its own.
 *
 * After the compiled file is parsed, each of its imports is looked up
 * (next to the importing file, then in the include directories in order),
 * read, lexed and parsed as a source of its own (diagnostics point into
 * it: SrcLoc.file), and its functions and constants join the compiled
 * program under the import's namespace: `name.f` for `f`, with
 * Item.ns = "name." so that the imported file's own unqualified names find
 * its own items. Its kernels are not compiled. Imports nest (an imported
 * file's imports live in `name.inner.`); a file imported twice is read
 * twice and its items exist once per namespace (functions are inlined
 * where they are called, so nothing is duplicated in the output). A file
 * that imports itself, directly or through others, is an error naming the
 * chain of imports from the compiled file.
 */
#define _DEFAULT_SOURCE /* realpath */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../front/parser.h"
#include "compilation.h"

/* Files one compilation may import in all (counting each import of a file
 * reached twice): far more than real kernels use, few enough that a
 * pathological chain of files stops early. */
#define IMPORT_MAX_FILES 256
/* Longest chain of files importing each other. */
#define IMPORT_MAX_DEPTH 32

typedef struct Importer {
  tc_compilation *c;
  const tc_options *o;
  Item **items; /* the merged program: the compiled file's items, then imported ones */
  int nitems, capitems;
  const char *chain[IMPORT_MAX_DEPTH + 1]; /* canonical paths of the files being imported, outermost first */
  const char *shown[IMPORT_MAX_DEPTH + 1]; /* the same as messages name them: the import paths as written */
  int depth;
} Importer;

static void push_item(Importer *im, Item *it) {
  if (im->nitems == im->capitems) {
    int cap = im->capitems ? 2 * im->capitems : 64;
    im->items = arena_grow(&im->c->arena, im->items, sizeof(Item *), (size_t)im->capitems, (size_t)cap);
    im->capitems = cap;
  }
  im->items[im->nitems++] = it;
}

/* The directory part of path ("." when it has none). */
static const char *dir_of(Arena *a, const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return ".";
  if (slash == path) return "/";
  return arena_strndup(a, path, (size_t)(slash - path));
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Where an import's file is: absolute as written, else next to the
 * importing file, then in each include directory; NULL when nowhere. */
static const char *find_file(Importer *im, const char *dir, const char *path) {
  Arena *a = &im->c->arena;
  if (path[0] == '/') return is_file(path) ? path : NULL;
  const char *here = strcmp(dir, ".") ? arena_printf(a, "%s/%s", dir, path) : path;
  if (is_file(here)) return here;
  for (int i = 0; i < im->o->ninclude_dirs; i++) {
    const char *p = arena_printf(a, "%s/%s", im->o->include_dirs[i], path);
    if (is_file(p)) return p;
  }
  return NULL;
}

char *tc_read_file(const char *path, size_t *len, const char **why) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    *why = strerror(errno);
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    if (n == cap) {
      if (cap > SOURCE_MAX_BYTES) break;
      char *bigger = realloc(buf, cap * 2 + 1);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger, cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  bool failed = ferror(f);
  fclose(f);
  if (!buf || failed || n > SOURCE_MAX_BYTES) {
    *why = !buf ? "out of memory" : failed ? "read error" : "larger than the 64 MiB limit";
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

static void import_program(Importer *im, Program *prog, const char *dir, const char *ns);

/* One `import` of a file whose directory is dir, into namespace prefix ns. */
static void import_one(Importer *im, const Item *imp, const char *dir, const char *ns) {
  tc_compilation *c = im->c;
  Diags *d = &c->diags;
  char q[DIAG_QUOTE_BUF];
  if (!imp->import_path || !imp->name) return; /* reported by the parser */
  const char *path = find_file(im, dir, imp->import_path);
  if (!path) {
    diag_error(d, imp->name_loc, "cannot find '%s' (looked next to this file%s)", diag_quote(q, imp->import_path),
               im->o->ninclude_dirs ? " and in the include directories" : "; add a directory with -I");
    return;
  }
  if (c->nimports == IMPORT_MAX_FILES) {
    diag_error(d, imp->loc, "too many imports (more than %d files)", IMPORT_MAX_FILES);
    return;
  }
  if (im->depth == IMPORT_MAX_DEPTH) {
    diag_error(d, imp->loc, "imports nest more than %d files deep", IMPORT_MAX_DEPTH);
    return;
  }
  char real[PATH_MAX];
  const char *canon = realpath(path, real) ? arena_strdup(&c->arena, real) : path;
  for (int i = 0; i <= im->depth; i++)
    if (im->chain[i] && strcmp(im->chain[i], canon) == 0) {
      /* the chain from the compiled file: main.tile -> a.tile -> b.tile -> a.tile */
      const char *chain = "";
      for (int j = 0; j <= im->depth; j++) chain = arena_printf(&c->arena, "%s%s -> ", chain, im->shown[j]);
      diag_error(d, imp->name_loc, "'%s' imports itself: %s%s", diag_quote(q, imp->import_path), chain,
                 imp->import_path);
      return;
    }
  size_t len = 0;
  const char *why = NULL;
  char *read = tc_read_file(path, &len, &why);
  if (!read) {
    diag_error(d, imp->name_loc, "cannot read '%s': %s", diag_quote(q, path), why);
    return;
  }
  char *text = arena_alloc(&c->arena, len + 1);
  memcpy(text, read, len);
  free(read);
  Source *src = ARENA_NEW(&c->arena, Source);
  *src = (Source){arena_strdup(&c->arena, path), text, len, 0};
  diags_add_source(d, src);
  c->imports[c->nimports++] = src->name;
  TokenList toks = lex_terminated(src, &c->arena, d);
  Program *sub = parse(&toks, &c->arena, d);
  if (d->errors) return;
  im->chain[++im->depth] = canon;
  im->shown[im->depth] = imp->import_path;
  import_program(im, sub, dir_of(&c->arena, path), arena_printf(&c->arena, "%s%s.", ns, imp->name));
  im->chain[im->depth--] = NULL;
}

/* The items of prog (a file whose directory is dir) joined to the merged
 * program under namespace prefix ns ("" for the compiled file). */
static void import_program(Importer *im, Program *prog, const char *dir, const char *ns) {
  Diags *d = &im->c->diags;
  for (int i = 0; i < prog->nitems && !diags_full(d); i++) {
    Item *it = prog->items[i];
    if (it->kind != ITEM_IMPORT) continue;
    for (int j = 0; j < i; j++) {
      const Item *prev = prog->items[j];
      if (prev->kind == ITEM_IMPORT && prev->name && it->name && strcmp(prev->name, it->name) == 0) {
        diag_error(d, it->name_loc, "namespace '%s' is already imported", it->name);
        diag_note(d, prev->name_loc, "'%s' was imported here", it->name);
      }
    }
    import_one(im, it, dir, ns);
  }
  for (int i = 0; i < prog->nitems; i++) {
    Item *it = prog->items[i];
    if (it->kind == ITEM_IMPORT || (*ns && it->kind == ITEM_KERNEL)) continue;
    it->ns = ns;
    if (*ns) it->name = arena_printf(&im->c->arena, "%s%s", ns, it->name);
    push_item(im, it);
  }
}

void compile_imports(tc_compilation *c, const tc_options *o) {
  Importer im = {.c = c, .o = o};
  c->imports = ARENA_ARRAY(&c->arena, const char *, IMPORT_MAX_FILES);
  const char *main_name = c->src.name;
  bool real_file = strcmp(main_name, "<input>") && strcmp(main_name, "-") && strcmp(main_name, "<stdin>");
  char real[PATH_MAX];
  im.chain[0] = real_file && realpath(main_name, real) ? arena_strdup(&c->arena, real) : NULL;
  const char *base = strrchr(main_name, '/');
  im.shown[0] = base ? base + 1 : main_name;
  import_program(&im, c->prog, real_file ? dir_of(&c->arena, main_name) : ".", "");
  c->prog->items = im.items;
  c->prog->nitems = im.nitems;
}
