/* main.c - tilec, the command-line driver: a thin layer over the compiler
 * library (tilec.h). It parses options, reads the file, compiles, prints
 * diagnostics and writes what --emit asked for. `tilec run` (run.c) runs a
 * kernel in the interpreter; `tilec tune` (tune.c) times a kernel's
 * configurations on the GPU.
 *
 * Exit status: 0 success, 1 errors in the source, 2 bad usage (3: tilec
 * tune found no GPU).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/suggest.h"
#include "cli.h"

static const char usage_text[] =
    "usage: tilec FILE.tile [options]        check and compile kernels\n"
    "       tilec run FILE.tile [options]    run a kernel in the interpreter (tilec run --help)\n"
    "       tilec tune FILE.tile [options]   time a kernel's configurations on the GPU, keep the\n"
    "                                        fastest (tilec tune --help)\n"
    "\n"
    "options:\n"
    "  -k, --kernel NAME      only this kernel (default: every kernel in the file)\n"
    "  -D NAME=VALUE          value of a const parameter (repeatable; also -DNAME=VALUE; -DNAME is NAME=true)\n"
    "  --emit=STAGE           output the program after a stage: tokens, ast, ir (tile IR),\n"
    "                         lowered (tile IR with GPU layouts), llvm, ptx, cubin, header\n"
    "  -o FILE                write the --emit output to FILE instead of stdout (also -oFILE;\n"
    "                         - is stdout); without --emit the stage comes from the name:\n"
    "                         .cubin, .ptx, .ll (llvm), .h (header), .tir (ir)\n"
    "  --embed                with --emit=header: embed the cubin in the header\n"
    "  -I DIR                 look for imported files in DIR too (after the importing file's\n"
    "                         directory; repeatable; then the standard library's directory)\n"
    "  -MD                    also write a dependency file for make and ninja: OUT.d\n"
    "  -MF FILE               the dependency file's name (implies -MD)\n"
    "  -MP                    also a rule with no prerequisites for each imported file, so that\n"
    "                         make does not stop when one is deleted (implies -MD)\n"
    "  --color=WHEN           colours in diagnostics: auto (default: on a terminal, unless\n"
    "                         NO_COLOR is set or TERM is dumb), always, never\n"
    "  -v                     print registers, spills and shared memory per kernel\n"
    "  -Werror                every warning is an error\n"
    "  -w                     no warnings\n"
    "  -Werror=spills         register spills are errors, not warnings (compiles to a cubin\n"
    "                         to find them)\n"
    "  -g, --debug-barriers   mbarrier waits give up after 2 s and trap, printing the kernel,\n"
    "                         barrier, phase and program; TMA copies check their row alignment\n"
    "  --separate-products    two wgmma products over one A tile (a gated MLP's gate and up)\n"
    "                         as two instructions, not one twice as wide (docs/backend.md)\n"
    "  --linker=NAME          PTX to cubin with: auto (default), nvjitlink, ptxas\n"
    "  --arch=SM              target GPU (default sm_90a)\n"
    "  -O0                    skip the IR optimization passes (-O1, -O2, -O3: the default)\n"
    "  --verify-each          verify the IR after every optimization pass\n"
    "  -h, --help             show this help\n"
    "  --version              show the version\n"
    "\n"
    "FILE - reads the source from stdin. Without --emit or -o, tilec checks the file and\n"
    "prints only diagnostics.\n"
    "Exit status: 0 success, 1 errors in the source, 2 bad usage.\n";

/* The name diagnostics give a source read from stdin (FILE -). */
#define STDIN_NAME "<stdin>"
/* First buffer for a file whose size is not known (a pipe, a device). */
#define CLI_READ_CHUNK ((size_t)1 << 16)

/* Reports why path was not read (over the limit of `what`, or `why`, or a
 * read error) and frees what there is. */
static char *read_failed(FILE *f, char *buf, const char *path, const char *why, const char *what, size_t max) {
  char q[DIAG_QUOTE_BUF];
  if (what)
    fprintf(stderr, "tilec: '%s' is larger than %zu MiB (the limit of %s)\n", diag_quote(q, path), max >> 20, what);
  else if (why)
    fprintf(stderr, "tilec: cannot read '%s': %s\n", diag_quote(q, path), why);
  else
    fprintf(stderr, "tilec: cannot read '%s'\n", diag_quote(q, path));
  fclose(f);
  free(buf);
  return NULL;
}

char *cli_read_file_max(const char *path, size_t max_bytes, const char *what, size_t *len) {
  char q[DIAG_QUOTE_BUF];
  /* "-" is stdin (read to its end; closed after, as a file would be) */
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : fdopen(dup(fileno(stdin)), "rb");
  if (!f) {
    fprintf(stderr, "tilec: cannot open '%s': %s\n", diag_quote(q, path), strerror(errno));
    return NULL;
  }
  /* A regular file's size is known: too large is found without reading,
   * and the buffer is allocated once. One more byte shows the end. */
  struct stat st;
  size_t cap = CLI_READ_CHUNK, n = 0;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    if ((uint64_t)st.st_size > max_bytes) return read_failed(f, NULL, path, NULL, what, max_bytes);
    cap = (size_t)st.st_size + 1;
  }
  char *buf = malloc(cap);
  if (!buf) return read_failed(f, NULL, path, "out of memory", NULL, max_bytes);
  for (;;) {
    if (n == cap) {
      if (n > max_bytes) return read_failed(f, buf, path, NULL, what, max_bytes);
      size_t grown = cap > max_bytes / 2 ? max_bytes + 1 : cap * 2;
      char *p = realloc(buf, grown);
      if (!p) return read_failed(f, buf, path, "out of memory", NULL, max_bytes);
      buf = p;
      cap = grown;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (n > max_bytes) return read_failed(f, buf, path, NULL, what, max_bytes);
  if (ferror(f)) return read_failed(f, buf, path, NULL, NULL, max_bytes);
  fclose(f);
  *len = n;
  return buf;
}

char *cli_read_source(const char *path, size_t *len) {
  return cli_read_file_max(path, TC_MAX_SOURCE_BYTES, "a source file", len);
}

char *cli_read_file(const char *path, size_t *len) {
  return cli_read_file_max(path, CLI_MAX_DATA_FILE_BYTES, "a file: buffer", len);
}

/* Whether path is a directory. */
static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int cli_include_dirs(const char *const *user, int nuser, const char **dirs, char *exe_dir) {
  int n = 0;
  for (int i = 0; i < nuser && i < CLI_MAX_INCLUDE_DIRS; i++) dirs[n++] = user[i];
  /* <the executable's directory>/TILEC_IMPORT_DIR_FROM_BIN */
  ssize_t len = TILEC_IMPORT_DIR_FROM_BIN[0] ? readlink("/proc/self/exe", exe_dir, CLI_EXE_DIR_BYTES - 1) : -1;
  char *slash = len > 0 ? (exe_dir[len] = '\0', strrchr(exe_dir, '/')) : NULL;
  if (slash && (size_t)(slash - exe_dir) + sizeof TILEC_IMPORT_DIR_FROM_BIN + 1 < CLI_EXE_DIR_BYTES) {
    memcpy(slash + 1, TILEC_IMPORT_DIR_FROM_BIN, sizeof TILEC_IMPORT_DIR_FROM_BIN);
    if (is_dir(exe_dir) && strcmp(exe_dir, TILEC_IMPORT_DIR_INSTALLED)) dirs[n++] = exe_dir;
  }
  static const char *const fixed[] = {TILEC_IMPORT_DIR_INSTALLED, TILEC_IMPORT_DIR_SOURCE};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) dirs[n++] = fixed[i];
  return n;
}

bool cli_parse_define(const char *text, tc_define *d) {
  const char *eq = strchr(text, '=');
  bool bare = !eq; /* -DNAME: NAME=true, as a C compiler's -DNAME is 1 */
  if (bare) eq = text + strlen(text);
  if (eq == text || (!bare && !eq[1])) return false;
  for (const char *p = text; p < eq; p++)
    if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (p > text && *p >= '0' && *p <= '9')))
      return false;
  char *name = malloc((size_t)(eq - text) + 1);
  if (!name) return false;
  memcpy(name, text, (size_t)(eq - text));
  name[eq - text] = 0;
  d->name = name;
  d->value = bare ? "true" : eq + 1;
  return true;
}

/* --emit stages past the tile IR, after TC_EMIT_PTX in tc_emit_kind. */
enum { EMIT_CUBIN = TC_EMIT_PTX + 1, EMIT_HEADER, EMIT_COUNT };

typedef struct Options {
  const char *file, *out, *kernel, *arch;
  int emit; /* -1: none */
  bool verbose, embed, debug_barriers, werror_spills, separate_products;
  CliColor color;
  bool depfile;        /* -MD, -MF or -MP */
  bool phony_deps;     /* -MP */
  const char *dep_out; /* -MF FILE; NULL: the output's name with .d appended */
  tc_linker linker;
  tc_define defines[CLI_MAX_DEFINES];
  int ndefines;
  bool no_opt, verify_each;
  bool werror, no_warnings;
  bool stdout_dash; /* -o -: stdout */
  const char *include_dirs[CLI_MAX_INCLUDE_DIRS]; /* -I */
  int ninclude_dirs;
} Options;

/* Prints "tilec: " and fmt with the argument (quoted: cut when long). */
static int usage_error(const char *fmt, const char *arg) {
  char q[DIAG_QUOTE_BUF];
  fprintf(stderr, "tilec: ");
  fprintf(stderr, fmt, diag_quote(q, arg));
  fprintf(stderr, "\n(run 'tilec --help' for usage)\n");
  return EXIT_USAGE;
}

const char *cli_suggest_option(const char *a, const char *const *known, int n, char *buf, size_t size) {
  /* "--emitt=ptx": the name before '=' against the names */
  size_t len = strcspn(a, "=");
  if (len >= size) return NULL;
  memcpy(buf, a, len);
  buf[len] = '\0';
  return suggest_closest(buf, known, n);
}

/* tilec's options, as cli_suggest_option compares them. */
static const char *const tilec_options[] = {
    "-k", "--kernel", "-D", "--emit", "-o", "--embed", "-I", "-MD", "-MF", "-MP", "--color", "-v", "-Werror", "-w",
    "-g", "--debug-barriers", "--separate-products", "--linker", "--arch", "-O0", "-O1", "-O2", "-O3", "--verify-each", "--help",
    "--version"};

/* "unknown option 'A'", and the closest known one when one is close. */
static int unknown_option(const char *a) {
  char buf[SUGGEST_MAX_LEN + 1], q[DIAG_QUOTE_BUF];
  const char *best = cli_suggest_option(a, tilec_options, (int)(sizeof tilec_options / sizeof tilec_options[0]),
                                        buf, sizeof buf);
  fprintf(stderr, "tilec: unknown option '%s'", diag_quote(q, a));
  if (best) fprintf(stderr, "; did you mean '%s'?", best);
  fprintf(stderr, "\n(run 'tilec --help' for usage)\n");
  return EXIT_USAGE;
}

/* Whether writing `out` would replace the file `in`: the same path, or
 * two names (links, ./x and x) of one existing file. */
static bool same_file(const char *out, const char *in) {
  struct stat a, b;
  if (strcmp(out, in) == 0) return true;
  return stat(out, &a) == 0 && stat(in, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The --emit stage that an output file's name asks for; -1 for none. */
static int emit_of_name(const char *path) {
  static const struct {
    const char *ext;
    int emit;
  } exts[] = {{".cubin", EMIT_CUBIN}, {".ptx", TC_EMIT_PTX}, {".ll", TC_EMIT_LLVM}, {".h", EMIT_HEADER},
              {".tir", TC_EMIT_IR}};
  size_t n = strlen(path);
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
    size_t e = strlen(exts[i].ext);
    if (n > e && !strcmp(path + n - e, exts[i].ext)) return exts[i].emit;
  }
  return -1;
}

/* Returns -1 when parsing succeeded, otherwise an exit code. */
static int parse_options(int argc, char **argv, Options *o) {
  static const char *const emits[EMIT_COUNT] = {"tokens", "ast", "ir", "lowered", "llvm", "ptx", "cubin", "header"};
  o->emit = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return EXIT_OK;
    } else if (!strcmp(a, "--version")) {
#ifdef TILE_HAVE_LLVM
      char llvm[32];
      printf("tilec %s (LLVM %s)\n", TILEC_VERSION, tc_llvm_version(llvm, sizeof llvm));
#else
      printf("tilec %s (built without LLVM)\n", TILEC_VERSION);
#endif
      return EXIT_OK;
    } else if (!strncmp(a, "--kernel=", 9)) {
      o->kernel = a + 9;
    } else if (!strncmp(a, "-o", 2) && a[2]) {
      o->out = a + 2;
    } else if (!strcmp(a, "-O1") || !strcmp(a, "-O2") || !strcmp(a, "-O3")) {
      o->no_opt = false;
    } else if (!strcmp(a, "-k") || !strcmp(a, "--kernel") || !strcmp(a, "-o") || !strcmp(a, "-D")) {
      if (i + 1 >= argc) return usage_error("option '%s' needs an argument", a);
      const char *v = argv[++i];
      if (a[1] == 'o') o->out = v;
      else if (a[1] == 'D') {
        if (o->ndefines == CLI_MAX_DEFINES) return usage_error("too many -D options%s", "");
        if (!cli_parse_define(v, &o->defines[o->ndefines++])) return usage_error("-D needs NAME=VALUE, got '%s'", v);
      } else o->kernel = v;
    } else if (!strncmp(a, "-D", 2)) {
      if (o->ndefines == CLI_MAX_DEFINES) return usage_error("too many -D options%s", "");
      if (!cli_parse_define(a + 2, &o->defines[o->ndefines++])) return usage_error("-D needs NAME=VALUE, got '%s'", a + 2);
    } else if (!strncmp(a, "--emit=", 7)) {
      o->emit = -2;
      for (int k = 0; k < EMIT_COUNT; k++)
        if (!strcmp(a + 7, emits[k])) o->emit = k;
      if (o->emit == -2) {
        const char *best = suggest_closest(a + 7, emits, EMIT_COUNT);
        char q[DIAG_QUOTE_BUF];
        fprintf(stderr, "tilec: unknown --emit stage '%s' (expected tokens, ast, ir, lowered, llvm, ptx, cubin or header)",
                diag_quote(q, a + 7));
        if (best) fprintf(stderr, "; did you mean '%s'?", best);
        fprintf(stderr, "\n(run 'tilec --help' for usage)\n");
        return EXIT_USAGE;
      }
    } else if (!strcmp(a, "-I") || (!strncmp(a, "-I", 2) && a[2])) {
      if (!a[2] && i + 1 >= argc) return usage_error("option '%s' needs an argument", a);
      if (o->ninclude_dirs == CLI_MAX_INCLUDE_DIRS) return usage_error("more than 64 -I options%s", "");
      o->include_dirs[o->ninclude_dirs++] = a[2] ? a + 2 : argv[++i];
    } else if (!strcmp(a, "-MD")) {
      o->depfile = true;
    } else if (!strcmp(a, "-MP")) {
      o->depfile = o->phony_deps = true;
    } else if (!strcmp(a, "-MF")) {
      if (i + 1 >= argc) return usage_error("option '%s' needs an argument", a);
      o->depfile = true, o->dep_out = argv[++i];
    } else if (!strncmp(a, "--color=", 8)) {
      if (!cli_parse_color(a + 8, &o->color))
        return usage_error("unknown --color '%s' (expected auto, always or never)", a + 8);
    } else if (!strcmp(a, "-v")) {
      o->verbose = true;
    } else if (!strcmp(a, "-Werror=spills")) {
      o->werror_spills = true;
    } else if (!strcmp(a, "-Werror")) {
      o->werror = true;
    } else if (!strcmp(a, "-w")) {
      o->no_warnings = true;
    } else if (!strcmp(a, "-g") || !strcmp(a, "--debug-barriers")) {
      o->debug_barriers = true;
    } else if (!strcmp(a, "--separate-products")) {
      o->separate_products = true;
    } else if (!strcmp(a, "--embed")) {
      o->embed = true;
    } else if (!strncmp(a, "--arch=", 7)) {
      o->arch = a + 7;
    } else if (!strncmp(a, "--linker=", 9)) {
      const char *l = a + 9;
      if (!strcmp(l, "auto")) o->linker = TC_LINKER_AUTO;
      else if (!strcmp(l, "nvjitlink")) o->linker = TC_LINKER_NVJITLINK;
      else if (!strcmp(l, "ptxas")) o->linker = TC_LINKER_PTXAS;
      else return usage_error("unknown --linker '%s' (expected auto, nvjitlink or ptxas)", l);
    } else if (!strcmp(a, "-O0")) {
      o->no_opt = true;
    } else if (!strcmp(a, "--verify-each")) {
      o->verify_each = true;
    } else if (a[0] == '-' && a[1]) {
      return unknown_option(a);
    } else if (o->file) {
      return usage_error("more than one input file ('%s')", a);
    } else {
      o->file = a;
    }
  }
  if (!o->file) return usage_error("no input file%s", "");
  if (o->out && !strcmp(o->out, "-")) o->stdout_dash = true, o->out = NULL;
  if (o->out && strcmp(o->file, "-") && same_file(o->out, o->file))
    return usage_error("-o '%s' would overwrite the input", o->out);
  if (o->emit == -1 && o->out) {
    o->emit = emit_of_name(o->out);
    if (o->emit < 0)
      return usage_error("-o '%s' needs --emit=STAGE (or a name ending in .cubin, .ptx, .ll, .h or .tir)", o->out);
  }
  if (o->emit == EMIT_CUBIN && !o->out && !o->stdout_dash) return usage_error("--emit=cubin needs -o FILE%s", "");
  if (o->embed && o->emit != EMIT_HEADER) return usage_error("--embed goes with --emit=header%s", "");
  if (o->depfile && !o->out) return usage_error("-MD, -MF and -MP need -o FILE (the target the dependency file names)%s", "");
  if (o->depfile && !strcmp(o->file, "-")) return usage_error("-MD, -MF and -MP need an input file, not stdin%s", "");
  return -1;
}

/* A path as make and ninja read it in a rule: blanks and '#' escaped with
 * a backslash, '$' doubled. */
static void put_make_path(FILE *f, const char *p) {
  for (; *p; p++) {
    if (*p == ' ' || *p == '\t' || *p == '#') fputc('\\', f);
    if (*p == '$') fputc('$', f);
    fputc(*p, f);
  }
}

/* The imported files, each once, in order of import. */
static bool import_seen_before(const tc_compilation *c, int i) {
  for (int j = 0; j < i; j++)
    if (!strcmp(tc_import_path(c, j), tc_import_path(c, i))) return true;
  return false;
}

/* -MD / -MF: "OUT: INPUT IMPORTED..." (the files the output was made
 * from: the source file and every file it imports); with -MP also
 * "IMPORTED:" for each imported file, as gcc -MP writes for headers. */
static int write_depfile(const Options *o, const tc_compilation *c) {
  char q[DIAG_QUOTE_BUF];
  size_t n = strlen(o->out);
  char *path = o->dep_out ? NULL : malloc(n + 3);
  if (!o->dep_out && !path) {
    fputs("tilec: out of memory\n", stderr);
    return EXIT_SOURCE_ERROR;
  }
  if (path) memcpy(path, o->out, n), memcpy(path + n, ".d", 3);
  const char *dp = o->dep_out ? o->dep_out : path;
  FILE *f = fopen(dp, "w");
  int rc = EXIT_OK;
  if (!f) {
    fprintf(stderr, "tilec: cannot write '%s': %s\n", diag_quote(q, dp), strerror(errno));
    rc = EXIT_USAGE;
  } else {
    put_make_path(f, o->out);
    fputs(": ", f);
    put_make_path(f, o->file);
    for (int i = 0; i < tc_import_count(c); i++) {
      if (import_seen_before(c, i)) continue; /* a file imported twice is named once */
      fputc(' ', f);
      put_make_path(f, tc_import_path(c, i));
    }
    fputc('\n', f);
    for (int i = 0; i < tc_import_count(c) && o->phony_deps; i++) {
      if (import_seen_before(c, i)) continue;
      fputc('\n', f);
      put_make_path(f, tc_import_path(c, i));
      fputs(":\n", f);
    }
    if (fclose(f) != 0) {
      fprintf(stderr, "tilec: cannot write '%s'\n", diag_quote(q, dp));
      rc = EXIT_USAGE;
    }
  }
  free(path);
  return rc;
}

static int write_bytes(const char *path, const void *data, size_t size) {
  char q[DIAG_QUOTE_BUF];
  FILE *f = path ? fopen(path, "wb") : stdout;
  if (!f) {
    fprintf(stderr, "tilec: cannot write '%s': %s\n", diag_quote(q, path), strerror(errno));
    return EXIT_USAGE;
  }
  fwrite(data, 1, size, f);
  if (path && fclose(f) != 0) {
    fprintf(stderr, "tilec: cannot write '%s'\n", diag_quote(q, path));
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

static int write_output(const char *path, const char *text) { return write_bytes(path, text, strlen(text)); }

/* Header guard name from the output file: "build/softmax.h" -> "softmax". */
static char *guard_from_path(const char *path, const char *fallback) {
  const char *base = path ? strrchr(path, '/') : NULL;
  base = base ? base + 1 : path ? path : fallback;
  size_t n = strcspn(base, ".");
  return strndup(base, n ? n : strlen(base)); /* NULL (out of memory): tc_emit_header's default name */
}

static void print_stats(tc_compilation *c) {
  for (int k = 0; k < tc_kernel_count(c); k++) {
    tc_kernel_stats s;
    if (!tc_kernel_get_stats(c, k, &s)) continue;
    fprintf(stderr, "%s: %d warps, %u bytes shared memory, %d registers, %d bytes spill stores, %d bytes spill loads,"
                    " %d bytes stack\n",
            tc_kernel_name(c, k), s.warps, s.shared_bytes, s.registers, s.spill_store_bytes, s.spill_load_bytes,
            s.stack_frame_bytes);
    if (s.wgmma_notes)
      fprintf(stderr, "%s: warning: ptxas reported %d wgmma note%s (C75xx: serialized or fenced tensor-core code); "
                      "see ptxas -v\n",
              tc_kernel_name(c, k), s.wgmma_notes, s.wgmma_notes == 1 ? "" : "s");
  }
}

/* Prints the diagnostics added since the last call (warnings of a stage
 * that succeeded; all of them after an error). */
static void print_new_diagnostics(const Options *o, tc_compilation *c, size_t *printed) {
  const char *d = tc_diagnostics(c);
  size_t n = strlen(d);
  if (n > *printed) cli_print_diagnostics(stderr, d + *printed, cli_color_wanted(o->color, stderr));
  *printed = n;
}

/* The GPU stages: generate, then write what --emit asked for. */
static int emit_gpu(const Options *o, tc_compilation *c, size_t *printed) {
  bool need_cubin = o->emit == EMIT_CUBIN || o->emit == EMIT_HEADER || o->verbose || o->werror_spills;
  tc_codegen_options go = {.arch = o->arch, .linker = need_cubin ? o->linker : TC_LINKER_NONE,
                           .debug_barriers = o->debug_barriers, .spills_are_errors = o->werror_spills,
                           .separate_products = o->separate_products};
  bool ok = tc_generate(c, &go);
  print_new_diagnostics(o, c, printed);
  if (!ok) return EXIT_SOURCE_ERROR;
  if (o->verbose) print_stats(c);
  if (o->emit == EMIT_CUBIN) {
    size_t size;
    const void *cubin = tc_cubin(c, &size);
    return write_bytes(o->out, cubin, size);
  }
  if (o->emit == EMIT_HEADER) {
    char *guard = guard_from_path(o->out, strcmp(o->file, "-") ? o->file : "stdin");
    char *text = tc_emit_header(c, guard, o->embed);
    int rc = write_output(o->out, text ? text : "");
    free(text);
    free(guard);
    return rc;
  }
  if (o->emit < 0) return EXIT_OK;
  char *text = tc_emit(c, (tc_emit_kind)o->emit);
  int rc = write_output(o->out, text ? text : "");
  free(text);
  return rc;
}

static int compile_file(const Options *o) {
  size_t len;
  char *src = cli_read_source(o->file, &len);
  if (!src) return EXIT_USAGE;
  const char *dirs[CLI_MAX_INCLUDE_DIRS + CLI_DEFAULT_INCLUDE_DIRS];
  char exe_dir[CLI_EXE_DIR_BYTES];
  tc_options opt = {.kernel = o->kernel, .defines = o->defines, .ndefines = o->ndefines, .no_opt = o->no_opt,
                    .verify_each_pass = o->verify_each, .warnings_are_errors = o->werror,
                    .no_warnings = o->no_warnings, .include_dirs = dirs,
                    .ninclude_dirs = cli_include_dirs(o->include_dirs, o->ninclude_dirs, dirs, exe_dir)};
  tc_compilation *c = tc_compile(strcmp(o->file, "-") ? o->file : STDIN_NAME, src, len, &opt);
  free(src);
  if (!c) {
    fputs("tilec: out of memory\n", stderr);
    return EXIT_SOURCE_ERROR;
  }
  int rc = EXIT_OK;
  /* Tokens and the AST can be shown even when later stages failed. */
  if (o->emit == TC_EMIT_TOKENS || o->emit == TC_EMIT_AST) {
    char *text = tc_emit(c, (tc_emit_kind)o->emit);
    if (text) rc = write_output(o->out, text);
    free(text);
  }
  size_t printed = 0;
  print_new_diagnostics(o, c, &printed); /* the errors, or the front end's warnings */
  if (tc_error_count(c)) {
    rc = EXIT_SOURCE_ERROR;
  } else if (o->emit == TC_EMIT_IR) {
    char *text = tc_emit(c, TC_EMIT_IR);
    rc = write_output(o->out, text ? text : "");
    free(text);
  } else if ((o->emit > TC_EMIT_IR || o->verbose || o->werror_spills) && tc_kernel_count(c) == 0) {
    char q[DIAG_QUOTE_BUF];
    fprintf(stderr, "tilec: '%s' has no kernel to compile (a file of functions and constants is for importing)\n",
            diag_quote(q, o->file));
    rc = EXIT_SOURCE_ERROR;
  } else if (o->emit > TC_EMIT_IR || o->verbose || o->werror_spills) {
    rc = emit_gpu(o, c, &printed);
  }
  if (rc == EXIT_OK && o->depfile && o->out) rc = write_depfile(o, c);
  tc_free(c);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "run")) return cli_run(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "tune")) return cli_tune(argc - 1, argv + 1);
  Options o = {0};
  int rc = parse_options(argc, argv, &o);
  if (rc < 0) rc = compile_file(&o);
  for (int i = 0; i < o.ndefines; i++) free((char *)o.defines[i].name);
  return rc;
}
