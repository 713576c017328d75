/* cubin.c - PTX text to a cubin, in process through nvJitLink or through a
 * ptxas subprocess, plus a parser of ptxas's verbose resource report.
 *
 * Why two ways: nvJitLink needs no temporary files or process creation
 * (fast, and what the runtime wants), while ptxas is the tool a person
 * reruns by hand, so its failures come with a command line that reproduces
 * them. Why dlopen: tilec must build and run where the CUDA toolkit is
 * absent, and the nvJitLink.h "functions" are static inline wrappers over
 * versioned exports (__nvJitLinkCreate_13_0, ...), which is what we look up.
 * The few types and constants we need are declared here, so the CUDA
 * headers are not needed either.
 *
 * No mutable static state: every call builds what it needs. The library is
 * dlopen'ed RTLD_NODELETE, so closing it never unloads it (unloading a
 * library that may own threads is a hazard) and reopening it is cheap. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, mkdtemp, GNU strerror_r, sigabbrev_np */
#endif

#include "cubin.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- constants ----------------------------------------------------------- */

#define ELF_MAGIC "\177ELF"
#define ELF_MAGIC_LEN 4

#define DEFAULT_CUDA_HOME "/usr/local/cuda"
#define NVJITLINK_SONAME "libnvJitLink.so.13"
#define PTXAS_NAME "ptxas"
#define PTXAS_OPT_LEVEL "-O3"
#define PTXAS_VERBOSE "-v"
#define NVJITLINK_OPT_LEVEL "-O3"
#define NVJITLINK_VERBOSE "-verbose"
/* The name nvJitLink gives the PTX in its messages. */
#define NVJITLINK_INPUT_NAME "kernel.ptx"

/* Temporary files of the ptxas path: a private directory (mode 0700, so
 * the fixed names inside cannot be raced) holding the two files. */
#define TMPDIR_DEFAULT "/tmp"
#define TMPDIR_TEMPLATE "tilec-ptxas-XXXXXX"
#define TMP_PTX_NAME "kernel.ptx"
#define TMP_CUBIN_NAME "kernel.cubin"

/* ptxas output beyond this is drained but not kept. */
#define MAX_CAPTURE_BYTES ((size_t)16 << 20)
#define READ_CHUNK_BYTES ((size_t)64 << 10)
/* One read() of ptxas's output. */
#define PIPE_CHUNK_BYTES 4096
/* Room for "__nvJitLinkGetLinkedCubinSize_13_0" and the like. */
#define SYMBOL_NAME_MAX 96
/* "sm_" plus digits plus an optional feature letter ("sm_90a"). */
#define ARCH_PREFIX "sm_"
#define ARCH_MAX_LEN 16

/* nvJitLink's ABI, from nvJitLink.h of CUDA 13.0 (enums are int sized). */
typedef struct NvjOpaque *NvjHandle;
typedef int NvjResult;
#define NVJ_SUCCESS 0
#define NVJ_INPUT_PTX 2
#define NVJ_SYMBOL_SUFFIX "_13_0"

typedef NvjResult (*NvjCreateFn)(NvjHandle *handle, uint32_t nopts, const char *const *opts);
typedef NvjResult (*NvjDestroyFn)(NvjHandle *handle);
typedef NvjResult (*NvjAddDataFn)(NvjHandle handle, int input_type, const void *data,
                                  size_t size, const char *name);
typedef NvjResult (*NvjCompleteFn)(NvjHandle handle);
typedef NvjResult (*NvjSizeFn)(NvjHandle handle, size_t *size);
typedef NvjResult (*NvjGetFn)(NvjHandle handle, void *dst);
typedef NvjResult (*NvjGetLogFn)(NvjHandle handle, char *dst);
typedef NvjResult (*NvjVersionFn)(unsigned *major, unsigned *minor);

_Static_assert(sizeof(void *) == sizeof(NvjCreateFn), "dlsym results must fit function pointers");

/* ---- small utilities ----------------------------------------------------- */

/* A growable byte buffer that remembers running out of memory, so callers
 * check once at the end. Always NUL-terminated when data is not NULL. */
typedef struct Buf {
  char *data;
  size_t len, cap;
  bool oom;
} Buf;

static bool buf_reserve(Buf *b, size_t extra) {
  if (b->oom) return false;
  if (extra > SIZE_MAX - b->len - 1) {
    b->oom = true;
    return false;
  }
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

static void buf_putn(Buf *b, const char *s, size_t n) {
  if (!buf_reserve(b, n)) return;
  if (n) memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void buf_puts(Buf *b, const char *s) { buf_putn(b, s, strlen(s)); }

static void buf_vprintf(Buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) {
    b->oom = true;
    return;
  }
  if (!buf_reserve(b, (size_t)n)) return;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

__attribute__((format(printf, 2, 3))) static void buf_printf(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(b, fmt, ap);
  va_end(ap);
}

/* Hands the text over (NULL if memory ran out); b is reset. */
static char *buf_take(Buf *b) {
  char *s = NULL;
  if (!b->oom) {
    if (!b->data) buf_reserve(b, 0);
    if (!b->oom) {
      b->data[b->len] = '\0';
      s = b->data;
      b->data = NULL;
    }
  }
  free(b->data);
  *b = (Buf){0};
  return s;
}

static void buf_free(Buf *b) {
  free(b->data);
  *b = (Buf){0};
}

/* Drops trailing newlines and spaces (logs end with them, messages add
 * their own). */
static void buf_rtrim(Buf *b) {
  while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r' ||
                    b->data[b->len - 1] == ' '))
    b->data[--b->len] = '\0';
}

static char *xstrndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* Sets *error (if error is not NULL) to a formatted message. */
__attribute__((format(printf, 2, 3))) static void set_error(char **error, const char *fmt, ...) {
  if (!error) return;
  Buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  buf_vprintf(&b, fmt, ap);
  va_end(ap);
  *error = buf_take(&b);
}

/* Hands a finished message to *error (or frees it). */
static void give_error(char **error, Buf *b) {
  char *s = buf_take(b);
  if (error)
    *error = s;
  else
    free(s);
}

/* strerror that is safe on any thread (GNU strerror_r). */
static const char *errstr(int err, char *tmp, size_t size) { return strerror_r(err, tmp, size); }
#define ERRSTR_BUF 128

static char *path_join(const char *dir, const char *name) {
  Buf b = {0};
  buf_puts(&b, dir);
  if (b.len && b.data[b.len - 1] != '/') buf_puts(&b, "/");
  buf_puts(&b, name);
  return buf_take(&b);
}

static bool is_executable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Appends s quoted for a POSIX shell (as is when that is safe). */
static void buf_shell_quote(Buf *b, const char *s) {
  static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789_-+=/.,:@%";
  if (*s && strspn(s, safe) == strlen(s)) {
    buf_puts(b, s);
    return;
  }
  buf_puts(b, "'");
  for (const char *p = s; *p; p++) {
    if (*p == '\'')
      buf_puts(b, "'\\''");
    else
      buf_putn(b, p, 1);
  }
  buf_puts(b, "'");
}

static const char *getenv_nonempty(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* ---- public small functions --------------------------------------------- */

const char *cubin_linker_name(CubinLinker linker) {
  switch (linker) {
  case CUBIN_AUTO: return "auto";
  case CUBIN_NVJITLINK: return "nvJitLink";
  case CUBIN_PTXAS: return "ptxas";
  }
  return "unknown";
}

void cubin_kernels_free(CubinKernel *kernels, int nkernels) {
  if (!kernels) return;
  for (int i = 0; i < nkernels; i++) free(kernels[i].name);
  free(kernels);
}

void cubin_result_free(CubinResult *r) {
  if (!r) return;
  free(r->data);
  free(r->info_log);
  free(r->redo_error);
  cubin_kernels_free(r->kernels, r->nkernels);
  *r = (CubinResult){0};
}

const CubinStats *cubin_result_kernel(const CubinResult *r, const char *name) {
  if (!r || !name) return NULL;
  for (int i = 0; i < r->nkernels; i++)
    if (r->kernels[i].name && strcmp(r->kernels[i].name, name) == 0) return &r->kernels[i].stats;
  return NULL;
}

/* ---- the info log parser -------------------------------------------------
 *
 * ptxas 13.0 `-v` prints (on stderr), per entry function:
 *   ptxas info    : Compiling entry function 'vadd' for 'sm_90a'
 *   ptxas info    : Function properties for vadd
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 12 registers, used 0 barriers[, 144 bytes cumulative
 *                   stack size][, 4096 bytes smem]
 * and "Function properties for helper" plus a stack line for each non-entry
 * function it keeps. Older versions add ", 380 bytes cmem[0]" and may write
 * "1024+0 bytes smem". nvJitLink's info log (option -verbose) has the same
 * lines with the indented one written "ptxas         .     0 bytes ...",
 * then a link summary per kernel:
 *   info    : Function properties for 'vadd':
 *   info    : used 12 registers, used 0 barriers, 0 stack, 0 bytes smem,
 *             556 bytes cmem[0], 0 bytes lmem
 * whose smem includes 1 KiB the system reserves once a kernel uses shared
 * memory, so shared_bytes comes from the ptxas lines only. */

typedef struct FnRec {
  char *name;
  bool entry;
  CubinStats st;
} FnRec;

typedef struct LogParse {
  FnRec *fns;
  int n, cap;
  bool oom;
} LogParse;

/* The index of function `name`, added if new; -1 if memory ran out. */
static int parse_fn(LogParse *ps, const char *name, size_t len) {
  for (int i = 0; i < ps->n; i++)
    if (strlen(ps->fns[i].name) == len && memcmp(ps->fns[i].name, name, len) == 0) return i;
  if (ps->n == ps->cap) {
    int cap = ps->cap ? ps->cap * 2 : 8;
    FnRec *p = realloc(ps->fns, (size_t)cap * sizeof *p);
    if (!p) {
      ps->oom = true;
      return -1;
    }
    ps->fns = p;
    ps->cap = cap;
  }
  char *copy = xstrndup(name, len);
  if (!copy) {
    ps->oom = true;
    return -1;
  }
  ps->fns[ps->n] = (FnRec){.name = copy};
  return ps->n++;
}

static bool starts_with(const char *s, const char *end, const char *prefix) {
  size_t n = strlen(prefix);
  return (size_t)(end - s) >= n && memcmp(s, prefix, n) == 0;
}

static const char *skip_blanks(const char *s, const char *end) {
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  return s;
}

/* Parses "N" or "N+M" (summed) at *s; false on no digits or overflow. */
static bool parse_count(const char **s, const char *end, int *out) {
  long long total = 0;
  const char *p = *s;
  for (;;) {
    if (p == end || *p < '0' || *p > '9') return false;
    long long v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      v = v * 10 + (*p - '0');
      if (v > INT_MAX) return false;
      p++;
    }
    total += v;
    if (total > INT_MAX) return false;
    if (p < end && *p == '+') {
      p++;
      continue;
    }
    break;
  }
  *s = p;
  *out = (int)total;
  return true;
}

/* Where a stats line comes from: ptxas's lines, or nvJitLink's link
 * summary. */
typedef enum StatSource { FROM_PTXAS, FROM_LINK } StatSource;

/* Applies the comma-separated items of a stats line to st. */
static void apply_stat_items(CubinStats *st, const char *s, const char *end, StatSource src) {
  bool saw_cmem = false;
  int cmem = 0;
  while (s < end) {
    const char *item_end = memchr(s, ',', (size_t)(end - s));
    if (!item_end) item_end = end;
    const char *p = skip_blanks(s, item_end);
    if (starts_with(p, item_end, "Used ") || starts_with(p, item_end, "used "))
      p = skip_blanks(p + strlen("used "), item_end);
    int v;
    if (parse_count(&p, item_end, &v)) {
      p = skip_blanks(p, item_end);
      const char *u = p;
      size_t ulen = (size_t)(item_end - u);
      while (ulen && (u[ulen - 1] == ' ' || u[ulen - 1] == '\t')) ulen--;
#define UNIT_IS(str) (ulen == strlen(str) && memcmp(u, str, ulen) == 0)
      if (UNIT_IS("registers")) {
        st->registers = v;
        st->valid = true;
      } else if (UNIT_IS("barriers")) {
        st->barriers = v;
      } else if (UNIT_IS("bytes stack frame")) {
        st->stack_frame_bytes = v;
      } else if (UNIT_IS("bytes spill stores")) {
        st->spill_store_bytes = v;
      } else if (UNIT_IS("bytes spill loads")) {
        st->spill_load_bytes = v;
      } else if (UNIT_IS("bytes cumulative stack size") || UNIT_IS("stack")) {
        st->stack_bytes = v;
      } else if (UNIT_IS("bytes smem")) {
        if (src == FROM_PTXAS) st->shared_bytes = v;
      } else if (starts_with(u, u + ulen, "bytes cmem[")) {
        saw_cmem = true;
        cmem = cmem > INT_MAX - v ? INT_MAX : cmem + v;
      }
#undef UNIT_IS
    }
    s = item_end < end ? item_end + 1 : end;
  }
  if (saw_cmem) st->constant_bytes = cmem;
}

/* What a line of the log is, once its prefix is stripped. */
typedef enum LineKind { LINE_OTHER, LINE_PTXAS, LINE_LINK } LineKind;

static LineKind classify_line(const char *line, const char *end, const char **body) {
  const char *p;
  if (starts_with(line, end, "ptxas")) {
    p = skip_blanks(line + strlen("ptxas"), end);
    if (starts_with(p, end, "info")) {
      p = skip_blanks(p + strlen("info"), end);
      if (p == end || *p != ':') return LINE_OTHER;
      *body = skip_blanks(p + 1, end);
      return LINE_PTXAS;
    }
    if (p < end && *p == '.') { /* nvJitLink's form of an indented line */
      *body = skip_blanks(p + 1, end);
      return LINE_PTXAS;
    }
    return LINE_OTHER; /* warnings, errors, "ptxas fatal" */
  }
  if (starts_with(line, end, "info")) {
    p = skip_blanks(line + strlen("info"), end);
    if (p == end || *p != ':') return LINE_OTHER;
    *body = skip_blanks(p + 1, end);
    return LINE_LINK;
  }
  if (line < end && (*line == ' ' || *line == '\t')) {
    *body = skip_blanks(line, end);
    return LINE_PTXAS;
  }
  return LINE_OTHER;
}

/* A function name as printed: bare, or in quotes, maybe with a colon. */
static void trim_name(const char **s, const char **end) {
  const char *b = *s, *e = *end;
  if (e > b && e[-1] == ':') e--;
  if (e - b >= 2 && *b == '\'' && e[-1] == '\'') {
    b++;
    e--;
  }
  *s = b;
  *end = e;
}

/* "(C7510) Potential Performance Loss: wgmma.mma_async instructions are
 * serialized ... in the function 'k'" and the other C75xx notes: counted
 * for the function they name. */
static const char *find_in(const char *s, const char *e, const char *pat) {
  size_t n = strlen(pat);
  for (; s + n <= e; s++)
    if (!memcmp(s, pat, n)) return s;
  return NULL;
}

static bool note_wgmma(LogParse *ps, const char *body, const char *e) {
  static const char fn[] = "function '";
  const char *c = find_in(body, e, "(C75");
  if (!c) return false;
  const char *f = find_in(c, e, fn);
  if (!f) return true;
  const char *name = f + sizeof fn - 1;
  const char *q = memchr(name, '\'', (size_t)(e - name));
  if (!q) return true;
  int i = parse_fn(ps, name, (size_t)(q - name));
  if (i >= 0) ps->fns[i].st.wgmma_notes++;
  return true;
}

bool cubin_parse_info_log(const char *log, size_t len, CubinKernel **kernels, int *nkernels) {
  static const char compiling[] = "Compiling entry function '";
  static const char properties[] = "Function properties for ";
  *kernels = NULL;
  *nkernels = 0;
  LogParse ps = {0};
  int cur = -1;      /* the function the ptxas lines describe */
  int link_cur = -1; /* the kernel the link summary describes */
  const char *end = log ? log + len : NULL;
  for (const char *line = log; line && line < end && !ps.oom;) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    const char *line_end = nl ? nl : end;
    const char *e = line_end;
    while (e > line && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\0')) e--;
    const char *body = NULL;
    LineKind kind = classify_line(line, e, &body);
    if (kind == LINE_PTXAS && note_wgmma(&ps, body, e)) {
      /* counted */
    } else if (kind == LINE_PTXAS) {
      if (starts_with(body, e, compiling)) {
        const char *name = body + strlen(compiling);
        const char *q = memchr(name, '\'', (size_t)(e - name));
        if (q) {
          cur = parse_fn(&ps, name, (size_t)(q - name));
          if (cur >= 0) ps.fns[cur].entry = true;
        }
      } else if (starts_with(body, e, properties)) {
        const char *name = body + strlen(properties), *name_end = e;
        trim_name(&name, &name_end);
        cur = parse_fn(&ps, name, (size_t)(name_end - name));
      } else if (cur >= 0) {
        apply_stat_items(&ps.fns[cur].st, body, e, FROM_PTXAS);
      }
    } else if (kind == LINE_LINK) {
      if (starts_with(body, e, properties)) {
        const char *name = body + strlen(properties), *name_end = e;
        trim_name(&name, &name_end);
        link_cur = parse_fn(&ps, name, (size_t)(name_end - name));
        if (link_cur >= 0) ps.fns[link_cur].entry = true;
      } else if (link_cur >= 0 && (starts_with(body, e, "used ") || starts_with(body, e, "Used "))) {
        apply_stat_items(&ps.fns[link_cur].st, body, e, FROM_LINK);
      }
    }
    line = nl ? nl + 1 : end;
  }

  int nentries = 0;
  for (int i = 0; i < ps.n; i++) nentries += ps.fns[i].entry;
  CubinKernel *out = NULL;
  if (!ps.oom && nentries > 0) {
    out = calloc((size_t)nentries, sizeof *out);
    if (!out) ps.oom = true;
  }
  int k = 0;
  for (int i = 0; i < ps.n; i++) {
    FnRec *f = &ps.fns[i];
    if (!ps.oom && f->entry) {
      /* The total stack is at least the kernel's own frame (ptxas omits
       * the cumulative figure when there are no calls). */
      if (f->st.stack_bytes < f->st.stack_frame_bytes) f->st.stack_bytes = f->st.stack_frame_bytes;
      out[k].name = f->name;
      out[k].stats = f->st;
      k++;
    } else {
      free(f->name);
    }
  }
  free(ps.fns);
  if (ps.oom) {
    cubin_kernels_free(out, k);
    return false;
  }
  *kernels = out;
  *nkernels = k;
  return true;
}

/* ---- arguments ----------------------------------------------------------- */

/* Accepts "sm_" digits and an optional lowercase feature letter. */
static bool valid_arch(const char *arch) {
  size_t n = strlen(arch), pre = strlen(ARCH_PREFIX);
  if (n > ARCH_MAX_LEN || n <= pre || strncmp(arch, ARCH_PREFIX, pre) != 0) return false;
  size_t i = pre;
  while (i < n && arch[i] >= '0' && arch[i] <= '9') i++;
  if (i == pre) return false;
  if (i < n && arch[i] >= 'a' && arch[i] <= 'z') i++;
  return i == n;
}

/* The PTX as a NUL-terminated copy, trailing NULs dropped. */
static char *ptx_copy(const char *ptx, size_t len, size_t *out_len, char **error) {
  if (!ptx) {
    set_error(error, "no PTX given");
    return NULL;
  }
  while (len && ptx[len - 1] == '\0') len--;
  if (len == 0) {
    set_error(error, "the PTX text is empty");
    return NULL;
  }
  const char *nul = memchr(ptx, '\0', len);
  if (nul) {
    set_error(error, "the PTX text contains a NUL byte at offset %zu", (size_t)(nul - ptx));
    return NULL;
  }
  char *copy = xstrndup(ptx, len);
  if (!copy) set_error(error, "out of memory");
  *out_len = len;
  return copy;
}

static bool has_elf_magic(const unsigned char *data, size_t size) {
  return size >= ELF_MAGIC_LEN && memcmp(data, ELF_MAGIC, ELF_MAGIC_LEN) == 0;
}

/* Fills out's log and kernels from a finished link (data already set). */
static bool finish_result(CubinResult *out, Buf *log, CubinLinker linker, char **error) {
  out->linker = linker;
  out->info_log = buf_take(log);
  if (!out->info_log ||
      !cubin_parse_info_log(out->info_log, strlen(out->info_log), &out->kernels, &out->nkernels)) {
    set_error(error, "out of memory");
    return false;
  }
  return true;
}

/* ---- nvJitLink ----------------------------------------------------------- */

struct CubinNvJitLink {
  void *handle;
  char *path; /* what was dlopen'ed */
  NvjCreateFn create;
  NvjDestroyFn destroy;
  NvjAddDataFn add_data;
  NvjCompleteFn complete;
  NvjSizeFn cubin_size;
  NvjGetFn cubin;
  NvjSizeFn error_log_size;
  NvjGetLogFn error_log;
  NvjSizeFn info_log_size;
  NvjGetLogFn info_log;
  NvjVersionFn version; /* may be NULL */
};

/* Looks up the versioned export, else the plain one, into *fn (a function
 * pointer object of fn_size bytes). */
static bool load_sym(void *h, const char *base, void *fn, size_t fn_size, Buf *missing) {
  char versioned[SYMBOL_NAME_MAX];
  snprintf(versioned, sizeof versioned, "__%s%s", base, NVJ_SYMBOL_SUFFIX);
  void *sym = dlsym(h, versioned);
  if (!sym) sym = dlsym(h, base);
  if (!sym) {
    buf_printf(missing, "%s%s", missing->len ? ", " : "", versioned);
    return false;
  }
  memcpy(fn, &sym, fn_size);
  return true;
}
#define LOAD_SYM(h, base, field, missing) load_sym(h, base, &(field), sizeof(field), missing)

static void *try_dlopen(const char *path, Buf *tried) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char *why = dlerror();
    buf_printf(tried, "\n  %s: %s", path, why ? why : "cannot be loaded");
  }
  return h;
}

CubinNvJitLink *cubin_nvjitlink_open(const char *cuda_home, char **error) {
  if (error) *error = NULL;
  /* Candidates: an explicit toolkit first; otherwise the loader's own
   * search (LD_LIBRARY_PATH, ld.so.cache), then $CUDA_HOME and the
   * default toolkit. */
  const char *roots[2];
  int nroots = 0;
  if (cuda_home) {
    roots[nroots++] = cuda_home;
  } else {
    const char *env = getenv_nonempty("CUDA_HOME");
    if (env) roots[nroots++] = env;
    roots[nroots++] = DEFAULT_CUDA_HOME;
  }
  static const char *const libdirs[] = {"lib64/", "lib/"};
  Buf tried = {0};
  void *h = NULL;
  char *path = NULL;
  if (!cuda_home) {
    h = try_dlopen(NVJITLINK_SONAME, &tried);
    if (h) path = xstrndup(NVJITLINK_SONAME, strlen(NVJITLINK_SONAME));
  }
  for (int r = 0; r < nroots && !h; r++) {
    for (size_t d = 0; d < sizeof libdirs / sizeof *libdirs && !h; d++) {
      char *dir = path_join(roots[r], libdirs[d]);
      char *p = dir ? path_join(dir, NVJITLINK_SONAME) : NULL;
      free(dir);
      if (!p) break;
      h = try_dlopen(p, &tried);
      if (h)
        path = p;
      else
        free(p);
    }
  }
  if (cuda_home && !h) {
    h = try_dlopen(NVJITLINK_SONAME, &tried);
    if (h) path = xstrndup(NVJITLINK_SONAME, strlen(NVJITLINK_SONAME));
  }
  if (!h) {
    Buf msg = {0};
    buf_printf(&msg, "cannot load nvJitLink; tried:%s", tried.data ? tried.data : "");
    buf_free(&tried);
    give_error(error, &msg);
    return NULL;
  }
  buf_free(&tried);

  CubinNvJitLink *lib = calloc(1, sizeof *lib);
  if (!lib || !path) {
    free(lib);
    free(path);
    dlclose(h);
    set_error(error, "out of memory");
    return NULL;
  }
  lib->handle = h;
  lib->path = path;
  Buf missing = {0};
  bool ok = true;
  ok &= LOAD_SYM(h, "nvJitLinkCreate", lib->create, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkDestroy", lib->destroy, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkAddData", lib->add_data, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkComplete", lib->complete, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkGetLinkedCubinSize", lib->cubin_size, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkGetLinkedCubin", lib->cubin, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkGetErrorLogSize", lib->error_log_size, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkGetErrorLog", lib->error_log, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkGetInfoLogSize", lib->info_log_size, &missing);
  ok &= LOAD_SYM(h, "nvJitLinkGetInfoLog", lib->info_log, &missing);
  void *v = dlsym(h, "nvJitLinkVersion"); /* unversioned by design */
  if (v) memcpy(&lib->version, &v, sizeof lib->version);
  if (!ok) {
    Buf msg = {0};
    buf_printf(&msg, "%s is not a usable nvJitLink: missing %s", path,
               missing.data ? missing.data : "symbols");
    buf_free(&missing);
    give_error(error, &msg);
    cubin_nvjitlink_close(lib);
    return NULL;
  }
  buf_free(&missing);
  return lib;
}

void cubin_nvjitlink_close(CubinNvJitLink *lib) {
  if (!lib) return;
  if (lib->handle) dlclose(lib->handle);
  free(lib->path);
  free(lib);
}

bool cubin_nvjitlink_version(const CubinNvJitLink *lib, unsigned *major, unsigned *minor) {
  unsigned ma = 0, mi = 0;
  if (!lib || !lib->version || lib->version(&ma, &mi) != NVJ_SUCCESS) return false;
  if (major) *major = ma;
  if (minor) *minor = mi;
  return true;
}

static const char *nvj_result_name(NvjResult r) {
  static const char *const names[] = {
      "NVJITLINK_SUCCESS",
      "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
      "NVJITLINK_ERROR_MISSING_ARCH",
      "NVJITLINK_ERROR_INVALID_INPUT",
      "NVJITLINK_ERROR_PTX_COMPILE",
      "NVJITLINK_ERROR_NVVM_COMPILE",
      "NVJITLINK_ERROR_INTERNAL",
      "NVJITLINK_ERROR_THREADPOOL",
      "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
      "NVJITLINK_ERROR_FINALIZE",
      "NVJITLINK_ERROR_NULL_INPUT",
      "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
      "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
      "NVJITLINK_ERROR_ARCH_MISMATCH",
      "NVJITLINK_ERROR_OUTDATED_LIBRARY",
      "NVJITLINK_ERROR_MISSING_FATBIN",
      "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
      "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
      "NVJITLINK_ERROR_LTO_NOT_ENABLED",
  };
  if (r >= 0 && (size_t)r < sizeof names / sizeof *names) return names[r];
  return "unknown nvJitLink error";
}

/* Appends one of the handle's logs (error or info) to b. */
static void nvj_append_log(const CubinNvJitLink *lib, NvjHandle h, bool error_log, Buf *b) {
  size_t size = 0;
  NvjSizeFn size_fn = error_log ? lib->error_log_size : lib->info_log_size;
  NvjGetLogFn get_fn = error_log ? lib->error_log : lib->info_log;
  if (size_fn(h, &size) != NVJ_SUCCESS || size == 0) return;
  char *text = malloc(size + 1);
  if (!text) {
    b->oom = true;
    return;
  }
  if (get_fn(h, text) == NVJ_SUCCESS) {
    text[size] = '\0';
    buf_puts(b, text); /* the size counts a terminating NUL */
  }
  free(text);
}

static bool nvj_fail(const CubinNvJitLink *lib, NvjHandle *h, const char *what, NvjResult r,
                     const char *arch, char **error) {
  Buf msg = {0};
  buf_printf(&msg, "nvJitLink (%s, -arch=%s): %s failed with %s", lib->path, arch, what,
             nvj_result_name(r));
  if (*h) {
    Buf log = {0};
    nvj_append_log(lib, *h, true, &log);
    buf_rtrim(&log);
    if (log.len) buf_printf(&msg, ":\n%s", log.data);
    buf_free(&log);
    lib->destroy(h);
  }
  give_error(error, &msg);
  return false;
}

static bool compile_nvjitlink(const CubinNvJitLink *lib, const char *ptx, size_t len,
                              const char *arch, CubinResult *out, char **error) {
  char arch_opt[sizeof "-arch=" + ARCH_MAX_LEN];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  const char *const opts[] = {arch_opt, NVJITLINK_OPT_LEVEL, NVJITLINK_VERBOSE};
  NvjHandle h = NULL;
  NvjResult r = lib->create(&h, (uint32_t)(sizeof opts / sizeof *opts), opts);
  if (r != NVJ_SUCCESS) return nvj_fail(lib, &h, "nvJitLinkCreate", r, arch, error);
  /* nvJitLink assembles the PTX here, so a PTX error shows up now. */
  r = lib->add_data(h, NVJ_INPUT_PTX, ptx, len, NVJITLINK_INPUT_NAME);
  if (r != NVJ_SUCCESS) return nvj_fail(lib, &h, "nvJitLinkAddData", r, arch, error);
  r = lib->complete(h);
  if (r != NVJ_SUCCESS) return nvj_fail(lib, &h, "nvJitLinkComplete", r, arch, error);
  size_t size = 0;
  r = lib->cubin_size(h, &size);
  if (r != NVJ_SUCCESS) return nvj_fail(lib, &h, "nvJitLinkGetLinkedCubinSize", r, arch, error);
  unsigned char *data = malloc(size ? size : 1);
  if (!data) {
    lib->destroy(&h);
    set_error(error, "out of memory (a %zu byte cubin)", size);
    return false;
  }
  r = lib->cubin(h, data);
  if (r != NVJ_SUCCESS) {
    free(data);
    return nvj_fail(lib, &h, "nvJitLinkGetLinkedCubin", r, arch, error);
  }
  if (!has_elf_magic(data, size)) {
    free(data);
    lib->destroy(&h);
    set_error(error, "nvJitLink (%s) returned a %zu byte cubin that is not an ELF file", lib->path,
              size);
    return false;
  }
  Buf log = {0};
  nvj_append_log(lib, h, false, &log);
  lib->destroy(&h);
  out->data = data;
  out->size = size;
  return finish_result(out, &log, CUBIN_NVJITLINK, error);
}

/* ---- ptxas --------------------------------------------------------------- */

/* How the ptxas path ended: NOT_FOUND lets CUBIN_AUTO tell "no ptxas"
 * from "ptxas rejected the PTX". */
typedef enum PtxasStatus { PTXAS_OK, PTXAS_NOT_FOUND, PTXAS_FAILED } PtxasStatus;

/* The ptxas to run (malloc'd), or NULL with *error listing where it
 * looked. */
static char *find_ptxas(const CubinOptions *opts, char **error) {
  if (opts->ptxas) {
    if (is_executable_file(opts->ptxas)) return xstrndup(opts->ptxas, strlen(opts->ptxas));
    set_error(error, "ptxas not found: %s is not an executable file", opts->ptxas);
    return NULL;
  }
  Buf looked = {0};
  const char *roots[2];
  int nroots = 0;
  if (opts->cuda_home) {
    roots[nroots++] = opts->cuda_home;
  } else {
    const char *env = getenv_nonempty("CUDA_HOME");
    if (env) roots[nroots++] = env;
    roots[nroots++] = DEFAULT_CUDA_HOME;
  }
  for (int r = 0; r < nroots; r++) {
    char *bin = path_join(roots[r], "bin");
    char *p = bin ? path_join(bin, PTXAS_NAME) : NULL;
    free(bin);
    if (!p) {
      buf_free(&looked);
      set_error(error, "out of memory");
      return NULL;
    }
    if (is_executable_file(p)) {
      buf_free(&looked);
      return p;
    }
    buf_printf(&looked, "%s%s", looked.len ? ", " : "", p);
    free(p);
  }
  /* $PATH; an empty entry (the current directory) is skipped on purpose. */
  const char *path_env = getenv("PATH");
  for (const char *s = path_env; s && *s;) {
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n) {
      char *dir = xstrndup(s, n);
      char *p = dir ? path_join(dir, PTXAS_NAME) : NULL;
      free(dir);
      if (p && is_executable_file(p)) {
        buf_free(&looked);
        return p;
      }
      free(p);
    }
    s = colon ? colon + 1 : s + n;
  }
  Buf msg = {0};
  buf_printf(&msg, "ptxas not found (looked for %s and in $PATH=%s)",
             looked.data ? looked.data : "it", path_env ? path_env : "(unset)");
  buf_free(&looked);
  give_error(error, &msg);
  return NULL;
}

/* Writes all of data to path (created, must not exist). */
static bool write_file(const char *path, const char *data, size_t len, int *err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, data + done, len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      close(fd);
      return false;
    }
    done += (size_t)n;
  }
  if (close(fd) != 0 && errno != EINTR) {
    *err = errno;
    return false;
  }
  return true;
}

/* Reads all of path into a malloc'd buffer. */
static bool read_file(const char *path, unsigned char **data, size_t *size, int *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = errno;
    close(fd);
    return false;
  }
  size_t cap = st.st_size > 0 ? (size_t)st.st_size : READ_CHUNK_BYTES;
  unsigned char *buf = malloc(cap);
  size_t len = 0;
  for (;;) {
    if (!buf) {
      *err = ENOMEM;
      close(fd);
      return false;
    }
    if (len == cap) { /* the file grew: keep going */
      unsigned char *p = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (!p) free(buf);
      buf = p;
      cap *= 2;
      continue;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      free(buf);
      close(fd);
      return false;
    }
    if (n == 0) break;
    len += (size_t)n;
  }
  close(fd);
  *data = buf;
  *size = len;
  return true;
}

/* Moves fd above the standard streams, so dup2 onto 1 and 2 in the child
 * always creates a fresh descriptor (a dup2 onto itself would keep
 * close-on-exec). */
static int fd_above_stdio(int fd) {
  if (fd > STDERR_FILENO) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

/* Runs argv[0] with stdin from /dev/null and stdout+stderr into *output
 * (at most MAX_CAPTURE_BYTES kept, the rest counted in *dropped). Returns
 * the wait status in *status, or false with *err set if it could not run. */
static bool run_capture(char *const argv[], Buf *output, size_t *dropped, int *status, int *err) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    *err = errno;
    return false;
  }
  pfd[0] = fd_above_stdio(pfd[0]);
  pfd[1] = fd_above_stdio(pfd[1]);
  if (pfd[0] < 0 || pfd[1] < 0) {
    *err = errno;
    if (pfd[0] >= 0) close(pfd[0]);
    if (pfd[1] >= 0) close(pfd[1]);
    return false;
  }

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  bool fa_ok = false, attr_ok = false;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0) {
    fa_ok = true;
    rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, pfd[1], STDERR_FILENO);
  if (rc == 0) rc = posix_spawnattr_init(&attr);
  if (rc == 0) {
    attr_ok = true;
    /* The child starts with no blocked signals and default handling of the
     * ones a parent commonly ignores (ignored signals survive exec). */
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    static const int reset[] = {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof reset / sizeof *reset; i++) sigaddset(&defaults, reset[i]);
    rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &defaults);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  pid_t pid = -1;
  if (rc == 0) rc = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ);
  if (fa_ok) posix_spawn_file_actions_destroy(&fa);
  if (attr_ok) posix_spawnattr_destroy(&attr);
  close(pfd[1]); /* the child holds the only write end now */
  if (rc != 0) {
    close(pfd[0]);
    *err = rc;
    return false;
  }

  /* Drain to EOF (the child would block on a full pipe otherwise). */
  char chunk[PIPE_CHUNK_BYTES];
  int read_err = 0;
  for (;;) {
    ssize_t n = read(pfd[0], chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      read_err = errno; /* closing our end makes the child's writes fail */
      break;
    }
    if (n == 0) break;
    size_t keep = output->len < MAX_CAPTURE_BYTES ? MAX_CAPTURE_BYTES - output->len : 0;
    if (keep > (size_t)n) keep = (size_t)n;
    buf_putn(output, chunk, keep);
    *dropped += (size_t)n - keep;
  }
  close(pfd[0]);
  int wst = 0;
  pid_t w;
  do {
    w = waitpid(pid, &wst, 0);
  } while (w < 0 && errno == EINTR);
  if (w < 0) {
    *err = errno;
    return false;
  }
  *status = wst;
  if (read_err) {
    buf_printf(output, "\n[reading ptxas's output failed: error %d]", read_err);
  }
  return true;
}

static void describe_status(Buf *msg, int status) {
  if (WIFEXITED(status)) {
    buf_printf(msg, "exited with status %d", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
      buf_printf(msg, "was killed by signal %d (SIG%s)", sig, abbrev);
    else
#endif
      buf_printf(msg, "was killed by signal %d", sig);
  } else {
    buf_printf(msg, "ended with wait status %#x", (unsigned)status);
  }
}

/* Removes what the ptxas path left in dir; the .ptx is kept if keep_ptx. */
static void cleanup_tmp(const char *dir, const char *ptx_path, const char *cubin_path,
                        bool keep_ptx) {
  if (cubin_path) unlink(cubin_path);
  if (keep_ptx) return;
  if (ptx_path) unlink(ptx_path);
  if (dir) rmdir(dir);
}

static PtxasStatus compile_ptxas(const CubinOptions *opts, const char *ptx, size_t len,
                                 const char *arch, CubinResult *out, char **error) {
  char tmp[ERRSTR_BUF];
  char *ptxas = find_ptxas(opts, error);
  if (!ptxas) return PTXAS_NOT_FOUND;

  const char *tmpdir = getenv_nonempty("TMPDIR");
  char *dir = path_join(tmpdir ? tmpdir : TMPDIR_DEFAULT, TMPDIR_TEMPLATE);
  if (!dir) {
    free(ptxas);
    set_error(error, "out of memory");
    return PTXAS_FAILED;
  }
  if (!mkdtemp(dir)) {
    int e = errno;
    set_error(error, "ptxas: cannot create a temporary directory %s: %s", dir,
              errstr(e, tmp, sizeof tmp));
    free(dir);
    free(ptxas);
    return PTXAS_FAILED;
  }
  char *ptx_path = path_join(dir, TMP_PTX_NAME);
  char *cubin_path = path_join(dir, TMP_CUBIN_NAME);
  char arch_opt[sizeof "-arch=" + ARCH_MAX_LEN];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  char opt_v[] = PTXAS_VERBOSE, opt_o_level[] = PTXAS_OPT_LEVEL, opt_o[] = "-o";
  char *argv[] = {ptxas, arch_opt, opt_v, opt_o_level, opt_o, cubin_path, ptx_path, NULL};
  PtxasStatus result = PTXAS_FAILED;
  Buf output = {0};
  size_t dropped = 0;
  int err = 0, status = 0;

  if (!ptx_path || !cubin_path) {
    set_error(error, "out of memory");
    cleanup_tmp(dir, ptx_path, NULL, false);
    goto done;
  }
  if (!write_file(ptx_path, ptx, len, &err)) {
    set_error(error, "ptxas: cannot write %s: %s", ptx_path, errstr(err, tmp, sizeof tmp));
    cleanup_tmp(dir, ptx_path, NULL, false);
    goto done;
  }
  if (!run_capture(argv, &output, &dropped, &status, &err)) {
    set_error(error, "cannot run %s: %s", ptxas, errstr(err, tmp, sizeof tmp));
    cleanup_tmp(dir, ptx_path, cubin_path, false);
    goto done;
  }
  if (output.oom) {
    set_error(error, "out of memory (ptxas's output)");
    cleanup_tmp(dir, ptx_path, cubin_path, false);
    goto done;
  }

  bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  unsigned char *data = NULL;
  size_t size = 0;
  int read_err = 0;
  bool have_cubin = exited_ok && read_file(cubin_path, &data, &size, &read_err);
  if (have_cubin && !has_elf_magic(data, size)) {
    free(data);
    data = NULL;
    have_cubin = false;
  }
  if (!have_cubin) {
    /* Keep the PTX and say how to reproduce. */
    Buf msg = {0};
    buf_printf(&msg, "ptxas (%s) ", ptxas);
    if (!exited_ok)
      describe_status(&msg, status);
    else if (read_err)
      buf_printf(&msg, "exited with status 0 but its cubin %s cannot be read: %s", cubin_path,
                 errstr(read_err, tmp, sizeof tmp));
    else
      buf_printf(&msg, "exited with status 0 but wrote %zu bytes that are not an ELF cubin", size);
    buf_rtrim(&output);
    if (output.len) buf_printf(&msg, ":\n%s", output.data);
    if (dropped) buf_printf(&msg, "\n[... %zu more bytes of output not kept]", dropped);
    buf_puts(&msg, "\nreproduce with:");
    for (char **a = argv; *a; a++) {
      buf_puts(&msg, " ");
      buf_shell_quote(&msg, *a);
    }
    buf_printf(&msg, "\n(the PTX is kept in %s)", ptx_path);
    give_error(error, &msg);
    cleanup_tmp(dir, ptx_path, cubin_path, true);
    goto done;
  }
  cleanup_tmp(dir, ptx_path, cubin_path, false);
  out->data = data;
  out->size = size;
  if (dropped) buf_printf(&output, "\n[... %zu more bytes of output not kept]\n", dropped);
  result = finish_result(out, &output, CUBIN_PTXAS, error) ? PTXAS_OK : PTXAS_FAILED;

done:
  buf_free(&output);
  free(ptx_path);
  free(cubin_path);
  free(dir);
  free(ptxas);
  return result;
}

/* ---- entry points -------------------------------------------------------- */

/* The notes ptxas gives when calls serialize a kernel's wgmma, and when
 * it drops setmaxnreg in relocatable code. */
#define SERIALIZED_BY_CALLS "(C7509)"
#define SETMAXNREG_IGNORED "(C7504)"

/* Whether nvJitLink's cubin r of ptx is worth compiling again with ptxas:
 * its report says wgmma were serialized or setmaxnreg dropped, or it has
 * no report for some kernel. nvJitLink can answer from its cache on disk
 * with an empty report, and then neither the notes nor the kernels'
 * registers and spills are known. */
static bool needs_whole_program(const CubinResult *r, const char *ptx) {
  if (!r->info_log) return true;
  if (strstr(r->info_log, SERIALIZED_BY_CALLS) || strstr(r->info_log, SETMAXNREG_IGNORED)) return true;
  int entries = 0;
  for (const char *at = ptx; (at = strstr(at, ".entry ")); at++) entries++;
  return r->nkernels < entries;
}

bool cubin_compile(const CubinOptions *opts, const char *ptx, size_t len, CubinResult *out,
                   char **error) {
  static const CubinOptions defaults = {.linker = CUBIN_AUTO};
  if (error) *error = NULL;
  if (!out) {
    set_error(error, "no result to fill");
    return false;
  }
  *out = (CubinResult){0};
  if (!opts) opts = &defaults;
  const char *arch = opts->arch ? opts->arch : CUBIN_DEFAULT_ARCH;
  if (!valid_arch(arch)) {
    set_error(error, "invalid GPU arch '%s' (expected sm_ followed by digits and an optional "
                     "letter, as in %s)",
              arch, CUBIN_DEFAULT_ARCH);
    return false;
  }
  if (opts->linker != CUBIN_AUTO && opts->linker != CUBIN_NVJITLINK &&
      opts->linker != CUBIN_PTXAS) {
    set_error(error, "invalid linker choice %d", (int)opts->linker);
    return false;
  }
  size_t n = 0;
  char *text = ptx_copy(ptx, len, &n, error);
  if (!text) return false;

  bool ok = false;
  if (opts->linker == CUBIN_PTXAS) {
    ok = compile_ptxas(opts, text, n, arch, out, error) == PTXAS_OK;
    goto done;
  }
  /* setmaxnreg only works in a whole program (see below): straight to
   * ptxas when it is installed */
  if (opts->linker == CUBIN_AUTO && strstr(text, "setmaxnreg")) {
    char *ptxas_error = NULL;
    PtxasStatus st = compile_ptxas(opts, text, n, arch, out, &ptxas_error);
    free(ptxas_error);
    if (st == PTXAS_OK) {
      ok = true;
      goto done;
    }
    cubin_result_free(out);
  }
  CubinNvJitLink *lib = opts->nvjitlink;
  char *load_error = NULL;
  if (!lib) lib = cubin_nvjitlink_open(opts->cuda_home, &load_error);
  if (lib) {
    ok = compile_nvjitlink(lib, text, n, arch, out, error);
    if (lib != opts->nvjitlink) cubin_nvjitlink_close(lib);
    free(load_error);
    /* nvJitLink compiles PTX as relocatable code, where ptxas's
     * out-of-line slow path of a correctly rounded division counts as an
     * external call, and an external call serializes every wgmma of the
     * kernel (note C7509). In relocatable code ptxas also drops
     * setmaxnreg (note C7504), so a warp-specialized kernel would keep
     * one register budget for all its warps. A whole-program ptxas has neither problem: auto redoes such
     * a module with ptxas when it is installed. */
    if (ok && opts->linker == CUBIN_AUTO && needs_whole_program(out, text)) {
      CubinResult again = {0};
      char *ptxas_error = NULL;
      if (compile_ptxas(opts, text, n, arch, &again, &ptxas_error) == PTXAS_OK) {
        cubin_result_free(out);
        *out = again;
        free(ptxas_error);
      } else {
        out->redo_error = ptxas_error ? ptxas_error : xstrndup("ptxas failed", strlen("ptxas failed"));
      }
    }
    goto done;
  }
  if (opts->linker == CUBIN_NVJITLINK) {
    if (error)
      *error = load_error;
    else
      free(load_error);
    goto done;
  }
  /* AUTO without nvJitLink: ptxas; if that is missing too, say both. */
  char *ptxas_error = NULL;
  PtxasStatus st = compile_ptxas(opts, text, n, arch, out, &ptxas_error);
  ok = st == PTXAS_OK;
  if (st == PTXAS_NOT_FOUND)
    set_error(error, "no PTX assembler: %s; and %s", load_error ? load_error : "no nvJitLink",
              ptxas_error ? ptxas_error : "no ptxas");
  else if (error) {
    *error = ptxas_error;
    ptxas_error = NULL;
  }
  free(ptxas_error);
  free(load_error);

done:
  free(text);
  if (!ok) cubin_result_free(out);
  return ok;
}

bool cubin_from_ptx(const char *ptx, size_t len, const char *arch, CubinLinker linker,
                    CubinResult *out, char **error) {
  CubinOptions opts = {.arch = arch, .linker = linker};
  return cubin_compile(&opts, ptx, len, out, error);
}
