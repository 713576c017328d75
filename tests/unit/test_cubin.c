/* test_cubin.c - unit tests of PTX -> cubin (compiler/nvptx/cubin.c).
 *
 * The back end trusts this module for two things: a loadable cubin, and
 * resource statistics (registers, spills) that tests and reports use to
 * catch register-pressure regressions without a GPU. So these tests pin
 * down:
 *   - the info-log parser, on real ptxas 13.0 `-v` output and on nvJitLink
 *     13.0 `-verbose` info logs captured from small hand-written kernels
 *     (only "Compile time" figures edited), plus older and malformed text;
 *   - both linkers on a hand-written sm_90a vector add (ELF magic, stats,
 *     the two agreeing), on a kernel forced to spill, from several threads
 *     at once, and with a caller-owned nvJitLink;
 *   - errors: a PTX syntax error (ptxas's message, and for ptxas a command
 *     that reproduces it, with the PTX kept), bad arguments, ptxas missing,
 *     and fake ptxas scripts that fail, get killed by a signal, flood their
 *     output, or write no or a bad cubin.
 * Tests that need the CUDA toolkit skip when /usr/local/cuda is absent.
 * Criterion runs each test in its own process, so tests may setenv().
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvptx/cubin.h"

/* ---- fixtures ------------------------------------------------------------ */

#define CUDA_ROOT "/usr/local/cuda"
#define CUDA_PTXAS CUDA_ROOT "/bin/ptxas"
#define ELF_MAGIC "\177ELF"

/* out[i] = a[i] + b[i] for i < n; 12 registers with ptxas 13.0. */
static const char VADD_PTX[] =
    ".version 8.0\n"
    ".target sm_90a\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry vadd(\n"
    "\t.param .u64 vadd_param_0,\n"
    "\t.param .u64 vadd_param_1,\n"
    "\t.param .u64 vadd_param_2,\n"
    "\t.param .u32 vadd_param_3\n"
    ")\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .b32 %r<6>;\n"
    "\t.reg .f32 %f<4>;\n"
    "\t.reg .b64 %rd<11>;\n"
    "\n"
    "\tld.param.u64 %rd1, [vadd_param_0];\n"
    "\tld.param.u64 %rd2, [vadd_param_1];\n"
    "\tld.param.u64 %rd3, [vadd_param_2];\n"
    "\tld.param.u32 %r2, [vadd_param_3];\n"
    "\tmov.u32 %r3, %ctaid.x;\n"
    "\tmov.u32 %r4, %ntid.x;\n"
    "\tmov.u32 %r5, %tid.x;\n"
    "\tmad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "\tsetp.ge.s32 %p1, %r1, %r2;\n"
    "\t@%p1 bra $L__BB0_2;\n"
    "\tcvta.to.global.u64 %rd4, %rd1;\n"
    "\tcvta.to.global.u64 %rd5, %rd2;\n"
    "\tcvta.to.global.u64 %rd6, %rd3;\n"
    "\tmul.wide.s32 %rd7, %r1, 4;\n"
    "\tadd.s64 %rd8, %rd5, %rd7;\n"
    "\tld.global.f32 %f1, [%rd8];\n"
    "\tadd.s64 %rd9, %rd6, %rd7;\n"
    "\tld.global.f32 %f2, [%rd9];\n"
    "\tadd.f32 %f3, %f1, %f2;\n"
    "\tadd.s64 %rd10, %rd4, %rd7;\n"
    "\tst.global.f32 [%rd10], %f3;\n"
    "$L__BB0_2:\n"
    "\tret;\n"
    "}\n";

/* The same with an unknown instruction on line 35 ("addx.f32"). */
static char *bad_ptx(void) {
  const char *at = strstr(VADD_PTX, "add.f32");
  cr_assert_not_null(at);
  size_t head = (size_t)(at - VADD_PTX) + strlen("add");
  char *s = malloc(sizeof VADD_PTX + 1);
  memcpy(s, VADD_PTX, head);
  s[head] = 'x';
  memcpy(s + head + 1, VADD_PTX + head, sizeof VADD_PTX - head);
  cr_assert_not_null(strstr(s, "\taddx.f32 %f3"));
  return s;
}

/* Builds a kernel with 48 values live at once under .maxnreg 24, plus 4 KiB
 * of shared memory: ptxas 13.0 spills 144 bytes. */
static char *spill_ptx(void) {
  enum { LIVE = 48, STRIDE = 512, SIZE = 1 << 16 };
  char *s = malloc(SIZE);
  size_t n = 0;
#define EMIT(...) n += (size_t)snprintf(s + n, SIZE - n, __VA_ARGS__)
  EMIT(".version 8.0\n.target sm_90a\n.address_size 64\n\n");
  EMIT(".visible .entry spilly(.param .u64 p) .maxnreg 24\n{\n");
  EMIT("  .reg .f32 %%f<%d>;\n  .reg .b64 %%rd<4>;\n  .reg .b32 %%r<3>;\n", LIVE + 2);
  EMIT("  .shared .align 16 .b8 sm[4096];\n");
  EMIT("  ld.param.u64 %%rd1, [p];\n  cvta.to.global.u64 %%rd2, %%rd1;\n");
  EMIT("  mov.u32 %%r1, %%tid.x;\n  mul.wide.u32 %%rd3, %%r1, 4;\n  add.u64 %%rd2, %%rd2, %%rd3;\n");
  for (int i = 0; i < LIVE; i++) EMIT("  ld.volatile.global.f32 %%f%d, [%%rd2+%d];\n", i, i * STRIDE);
  for (int i = 0; i < LIVE; i++)
    EMIT("  st.volatile.global.f32 [%%rd2+%d], %%f%d;\n", i * STRIDE + 4, (i * 7) % LIVE);
  EMIT("  ld.shared.f32 %%f%d, [sm];\n  st.global.f32 [%%rd2], %%f%d;\n  ret;\n}\n", LIVE, LIVE);
#undef EMIT
  cr_assert_lt(n, (size_t)SIZE);
  return s;
}

static bool have_cuda(void) { return access(CUDA_PTXAS, X_OK) == 0; }

#define NEED_CUDA()                                                                  \
  do {                                                                               \
    if (!have_cuda()) cr_skip_test("no CUDA toolkit in " CUDA_ROOT);                 \
  } while (0)

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh directory under /tmp (free the result, rm_tree it). */
static char *make_tmpdir(void) {
  char *d = strdup("/tmp/test_cubin-XXXXXX");
  cr_assert_not_null(mkdtemp(d));
  return d;
}

static bool dir_is_empty(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  bool empty = true;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
  closedir(d);
  return empty;
}

/* Writes a shell script `dir/bin/ptxas` with the given body: a fake
 * toolkit rooted at dir. */
static void fake_ptxas(const char *dir, const char *body) {
  char path[512];
  snprintf(path, sizeof path, "%s/bin", dir);
  cr_assert_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/bin/ptxas", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "#!/bin/sh\n%s\n", body);
  fclose(f);
  cr_assert_eq(chmod(path, 0755), 0);
}

/* Shell that finds the output file after -o. */
#define FIND_OUT "out=; prev=; for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done; "

static const CubinStats *stats_of(CubinKernel *ks, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(ks[i].name, name) == 0) return &ks[i].stats;
  return NULL;
}

static void parse_text(const char *text, CubinKernel **ks, int *n) {
  cr_assert(cubin_parse_info_log(text, strlen(text), ks, n));
}

/* ---- the info-log parser: real ptxas 13.0 output -------------------------- */

/* `ptxas -arch=sm_90a -v -O3` on VADD_PTX (stderr). */
static const char LOG_PTXAS_VADD[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'vadd' for 'sm_90a'\n"
    "ptxas info    : Function properties for vadd\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 12 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 1.000 ms\n";

/* Two entries (one with shared memory, a barrier and a call to a .func
 * with a 64-byte local array, one empty) and the helper. */
static const char LOG_PTXAS_MULTI[] =
    "ptxas info    : 4 bytes gmem\n"
    "ptxas info    : Compiling entry function 'empty' for 'sm_90a'\n"
    "ptxas info    : Function properties for empty\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 4 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 1.000 ms\n"
    "ptxas info    : Compiling entry function 'with_smem' for 'sm_90a'\n"
    "ptxas info    : Function properties for with_smem\n"
    "    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 12 registers, used 1 barriers, 64 bytes cumulative stack size, 1024 bytes smem\n"
    "ptxas info    : Compile time = 1.000 ms\n"
    "ptxas info    : Function properties for helper\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";

/* spill_ptx(). */
static const char LOG_PTXAS_SPILL[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'spilly' for 'sm_90a'\n"
    "ptxas info    : Function properties for spilly\n"
    "    144 bytes stack frame, 144 bytes spill stores, 144 bytes spill loads\n"
    "ptxas info    : Used 24 registers, used 0 barriers, 144 bytes cumulative stack size, 4096 bytes smem\n"
    "ptxas info    : Compile time = 1.000 ms\n";

/* nvJitLink 13.0 info log (-arch=sm_90a -O3 -verbose) for the two-entry
 * module: ptxas compiles separately (the helper is not inlined), then the
 * link summary, whose smem includes the 1 KiB system reservation. */
static const char LOG_NVJ_MULTI[] =
    "ptxas info    : 4 bytes gmem\n"
    "ptxas info    : Function properties for helper\n"
    "ptxas         .     64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Compile time = 1.000 ms\n"
    "ptxas info    : Compiling entry function 'empty' for 'sm_90a'\n"
    "ptxas info    : Function properties for empty\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 4 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 1.000 ms\n"
    "ptxas info    : Compiling entry function 'with_smem' for 'sm_90a'\n"
    "ptxas info    : Function properties for with_smem\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 24 registers, used 1 barriers, 1024 bytes smem\n"
    "ptxas info    : Compile time = 1.000 ms\n"
    "info    : 4 bytes gmem, 256 bytes cmem[3]\n"
    "info    : Function properties for 'with_smem':\n"
    "info    : used 24 registers, used 1 barriers, 64 stack, 2048 bytes smem, 536 bytes cmem[0], 0 bytes lmem\n"
    "info    : Function properties for 'empty':\n"
    "info    : used 4 registers, used 0 barriers, 0 stack, 0 bytes smem, 528 bytes cmem[0], 0 bytes lmem\n";

static const char LOG_NVJ_SPILL[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'spilly' for 'sm_90a'\n"
    "ptxas info    : Function properties for spilly\n"
    "ptxas         .     144 bytes stack frame, 144 bytes spill stores, 144 bytes spill loads\n"
    "ptxas info    : Used 24 registers, used 0 barriers, 4096 bytes smem\n"
    "ptxas info    : Compile time = 1.000 ms\n"
    "info    : 0 bytes gmem\n"
    "info    : Function properties for 'spilly':\n"
    "info    : used 24 registers, used 0 barriers, 144 stack, 5120 bytes smem, 536 bytes cmem[0], 0 bytes lmem\n";

Test(parse, ptxas_vadd) {
  CubinKernel *ks;
  int n;
  parse_text(LOG_PTXAS_VADD, &ks, &n);
  cr_assert_eq(n, 1);
  cr_assert_str_eq(ks[0].name, "vadd");
  CubinStats s = ks[0].stats;
  cr_assert(s.valid);
  cr_assert_eq(s.registers, 12);
  cr_assert_eq(s.barriers, 0);
  cr_assert_eq(s.spill_store_bytes, 0);
  cr_assert_eq(s.spill_load_bytes, 0);
  cr_assert_eq(s.stack_frame_bytes, 0);
  cr_assert_eq(s.stack_bytes, 0);
  cr_assert_eq(s.shared_bytes, 0);
  cr_assert_eq(s.constant_bytes, 0);
  cubin_kernels_free(ks, n);
}

Test(parse, ptxas_two_entries_and_a_helper) {
  CubinKernel *ks;
  int n;
  parse_text(LOG_PTXAS_MULTI, &ks, &n);
  cr_assert_eq(n, 2, "the .func helper is not a kernel");
  cr_assert_str_eq(ks[0].name, "empty"); /* order of first mention */
  cr_assert_str_eq(ks[1].name, "with_smem");
  cr_assert_eq(ks[0].stats.registers, 4);
  const CubinStats *w = stats_of(ks, n, "with_smem");
  cr_assert_eq(w->registers, 12);
  cr_assert_eq(w->barriers, 1);
  cr_assert_eq(w->stack_frame_bytes, 64);
  cr_assert_eq(w->stack_bytes, 64);
  cr_assert_eq(w->shared_bytes, 1024);
  cr_assert_eq(w->spill_store_bytes, 0);
  cubin_kernels_free(ks, n);
}

Test(parse, ptxas_spills) {
  CubinKernel *ks;
  int n;
  parse_text(LOG_PTXAS_SPILL, &ks, &n);
  cr_assert_eq(n, 1);
  CubinStats s = ks[0].stats;
  cr_assert_eq(s.registers, 24);
  cr_assert_eq(s.spill_store_bytes, 144);
  cr_assert_eq(s.spill_load_bytes, 144);
  cr_assert_eq(s.stack_frame_bytes, 144);
  cr_assert_eq(s.stack_bytes, 144);
  cr_assert_eq(s.shared_bytes, 4096);
  cubin_kernels_free(ks, n);
}

Test(parse, nvjitlink_log_with_link_summary) {
  CubinKernel *ks;
  int n;
  parse_text(LOG_NVJ_MULTI, &ks, &n);
  cr_assert_eq(n, 2);
  const CubinStats *w = stats_of(ks, n, "with_smem");
  const CubinStats *e = stats_of(ks, n, "empty");
  cr_assert_not_null(w);
  cr_assert_not_null(e);
  cr_assert(w->valid);
  cr_assert_eq(w->registers, 24);
  cr_assert_eq(w->barriers, 1);
  cr_assert_eq(w->stack_frame_bytes, 0, "the helper's frame is its own");
  cr_assert_eq(w->stack_bytes, 64, "the link summary's stack includes callees");
  cr_assert_eq(w->shared_bytes, 1024, "declared shared memory, not the summary's 2048");
  cr_assert_eq(w->constant_bytes, 536);
  cr_assert_eq(e->registers, 4);
  cr_assert_eq(e->constant_bytes, 528);
  cubin_kernels_free(ks, n);

  parse_text(LOG_NVJ_SPILL, &ks, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(ks[0].stats.spill_store_bytes, 144);
  cr_assert_eq(ks[0].stats.spill_load_bytes, 144);
  cr_assert_eq(ks[0].stats.shared_bytes, 4096);
  cr_assert_eq(ks[0].stats.stack_bytes, 144);
  cubin_kernels_free(ks, n);
}

/* Older ptxas versions print constant banks and "static+dynamic" smem. */
Test(parse, older_format) {
  static const char log[] =
      "ptxas info    : Compiling entry function '_Z4gemmPfS_' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z4gemmPfS_\n"
      "    8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 1024+16 bytes smem, 380 bytes cmem[0], "
      "4 bytes cmem[2]\n";
  CubinKernel *ks;
  int n;
  parse_text(log, &ks, &n);
  cr_assert_eq(n, 1);
  cr_assert_str_eq(ks[0].name, "_Z4gemmPfS_");
  CubinStats s = ks[0].stats;
  cr_assert_eq(s.registers, 40);
  cr_assert_eq(s.shared_bytes, 1040);
  cr_assert_eq(s.constant_bytes, 384);
  cr_assert_eq(s.spill_store_bytes, 4);
  cr_assert_eq(s.spill_load_bytes, 8);
  cr_assert_eq(s.stack_bytes, 8, "at least the kernel's own frame");
  cubin_kernels_free(ks, n);
}

Test(parse, noise_crlf_nul_and_no_final_newline) {
  static const char log[] =
      "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill stores\r\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\r\n"
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized\r\n"
      "ptxas info    : Function properties for k\r\n"
      "    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\r\n"
      "garbage line 99 registers\n"
      "ptxas info    : Used 168 registers, used 1 barriers";
  CubinKernel *ks;
  int n;
  /* nvJitLink's log sizes count the terminating NUL: pass it too. */
  cr_assert(cubin_parse_info_log(log, sizeof log, &ks, &n));
  cr_assert_eq(n, 1);
  cr_assert_str_eq(ks[0].name, "k");
  cr_assert_eq(ks[0].stats.registers, 168);
  cr_assert_eq(ks[0].stats.barriers, 1);
  cr_assert_eq(ks[0].stats.spill_store_bytes, 8);
  cr_assert_eq(ks[0].stats.spill_load_bytes, 12);
  cubin_kernels_free(ks, n);
}

Test(parse, empty_truncated_and_overflowing) {
  CubinKernel *ks = (CubinKernel *)1;
  int n = -1;
  cr_assert(cubin_parse_info_log(NULL, 0, &ks, &n));
  cr_assert_null(ks);
  cr_assert_eq(n, 0);
  cr_assert(cubin_parse_info_log("", 0, &ks, &n));
  cr_assert_eq(n, 0);
  parse_text("ptxas fatal   : Ptx assembly aborted due to errors\n", &ks, &n);
  cr_assert_eq(n, 0);

  /* An entry with no "Used" line (the log was cut) is listed, not valid. */
  parse_text("ptxas info    : Compiling entry function 'cut' for 'sm_90a'\n", &ks, &n);
  cr_assert_eq(n, 1);
  cr_assert_not(ks[0].stats.valid);
  cr_assert_eq(ks[0].stats.registers, 0);
  cubin_kernels_free(ks, n);

  /* A count beyond int is ignored rather than wrapped. */
  parse_text("ptxas info    : Compiling entry function 'big' for 'sm_90a'\n"
             "ptxas info    : Used 99999999999999999999 registers, used 2 barriers\n",
             &ks, &n);
  cr_assert_eq(n, 1);
  cr_assert_not(ks[0].stats.valid);
  cr_assert_eq(ks[0].stats.barriers, 2);
  cubin_kernels_free(ks, n);

  /* A length shorter than the text is respected. */
  const char *text = LOG_PTXAS_VADD;
  const char *cut = strstr(text, "ptxas info    : Used");
  cr_assert(cubin_parse_info_log(text, (size_t)(cut - text), &ks, &n));
  cr_assert_eq(n, 1);
  cr_assert_not(ks[0].stats.valid);
  cubin_kernels_free(ks, n);
}

/* ---- small API ----------------------------------------------------------- */

Test(api, names_and_free) {
  cr_assert_str_eq(cubin_linker_name(CUBIN_AUTO), "auto");
  cr_assert_str_eq(cubin_linker_name(CUBIN_NVJITLINK), "nvJitLink");
  cr_assert_str_eq(cubin_linker_name(CUBIN_PTXAS), "ptxas");
  CubinResult r = {0};
  cubin_result_free(&r);
  cubin_result_free(&r);
  cubin_result_free(NULL);
  cr_assert_null(cubin_result_kernel(&r, "vadd"));
}

Test(api, bad_arguments) {
  CubinResult r;
  char *err = NULL;
  static const char *const bad_arches[] = {"sm90", "sm_", "sm_90ab", "-arch=sm_90a", "sm_90a -O0",
                                           "compute_90", ""};
  for (size_t i = 0; i < sizeof bad_arches / sizeof *bad_arches; i++) {
    cr_assert_not(cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), bad_arches[i], CUBIN_PTXAS, &r, &err));
    cr_assert_not_null(strstr(err, "invalid GPU arch"), "%s: %s", bad_arches[i], err);
    free(err);
  }
  cr_assert_not(cubin_from_ptx("", 0, NULL, CUBIN_AUTO, &r, &err));
  cr_assert_not_null(strstr(err, "empty"), "%s", err);
  free(err);
  cr_assert_not(cubin_from_ptx("\0\0", 2, NULL, CUBIN_AUTO, &r, &err));
  free(err);
  cr_assert_not(cubin_from_ptx(NULL, 3, NULL, CUBIN_AUTO, &r, &err));
  free(err);
  static const char nul_inside[] = ".version 8.0\0.target sm_90a\n";
  cr_assert_not(cubin_from_ptx(nul_inside, sizeof nul_inside - 1, NULL, CUBIN_AUTO, &r, &err));
  cr_assert_not_null(strstr(err, "NUL byte at offset 12"), "%s", err);
  free(err);
  /* error may be NULL. */
  cr_assert_not(cubin_from_ptx("", 0, NULL, CUBIN_AUTO, &r, NULL));
  cr_assert_null(r.data);
}

/* ---- both linkers on real PTX -------------------------------------------- */

static void check_vadd(const CubinResult *r, CubinLinker linker) {
  cr_assert_eq(r->linker, linker);
  cr_assert_gt(r->size, (size_t)64);
  cr_assert_eq(memcmp(r->data, ELF_MAGIC, 4), 0, "not an ELF file");
  cr_assert_not_null(r->info_log);
  cr_assert_not_null(strstr(r->info_log, "Compiling entry function 'vadd'"), "%s", r->info_log);
  cr_assert_eq(r->nkernels, 1, "%s", r->info_log);
  const CubinStats *s = cubin_result_kernel(r, "vadd");
  cr_assert_not_null(s);
  cr_assert(s->valid);
  cr_assert_geq(s->registers, 4);
  cr_assert_leq(s->registers, 32);
  cr_assert_eq(s->spill_store_bytes, 0);
  cr_assert_eq(s->spill_load_bytes, 0);
  cr_assert_eq(s->stack_bytes, 0);
  cr_assert_eq(s->shared_bytes, 0);
}

Test(linkers, nvjitlink_vadd) {
  NEED_CUDA();
  CubinResult r;
  char *err = NULL;
  cr_assert(cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), "sm_90a", CUBIN_NVJITLINK, &r, &err), "%s",
            err ? err : "");
  check_vadd(&r, CUBIN_NVJITLINK);
  cr_assert_gt(cubin_result_kernel(&r, "vadd")->constant_bytes, 0, "the link summary has cmem[0]");
  cubin_result_free(&r);
}

Test(linkers, ptxas_vadd_and_cleans_up) {
  NEED_CUDA();
  char *tmp = make_tmpdir();
  setenv("TMPDIR", tmp, 1);
  CubinResult r;
  char *err = NULL;
  cr_assert(cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), NULL, CUBIN_PTXAS, &r, &err), "%s",
            err ? err : "");
  check_vadd(&r, CUBIN_PTXAS);
  cr_assert(dir_is_empty(tmp), "temporary files left in %s", tmp);
  cubin_result_free(&r);
  rm_tree(tmp);
  free(tmp);
}

/* auto runs nvJitLink when it loads (a plain kernel stays with it). */
Test(linkers, auto_prefers_nvjitlink) {
  NEED_CUDA();
  CubinResult r;
  char *err = NULL;
  /* The length may count the terminating NUL. */
  cr_assert(cubin_from_ptx(VADD_PTX, sizeof VADD_PTX, NULL, CUBIN_AUTO, &r, &err), "%s",
            err ? err : "");
  check_vadd(&r, CUBIN_NVJITLINK);
  cubin_result_free(&r);
}

/* auto compiles a module with setmaxnreg with ptxas (nvJitLink's
 * relocatable code drops it). */
Test(linkers, auto_takes_ptxas_for_setmaxnreg) {
  NEED_CUDA();
  const char *at = strstr(VADD_PTX, "\tmov.u32 %r3");
  cr_assert_not_null(at);
  const char *insn = "\tsetmaxnreg.inc.sync.aligned.u32 32;\n";
  size_t head = (size_t)(at - VADD_PTX), len = strlen(VADD_PTX) + strlen(insn);
  char *ptx = calloc(len + 1, 1);
  cr_assert_not_null(ptx);
  memcpy(ptx, VADD_PTX, head);
  strcat(ptx, insn);
  strcat(ptx, at);
  CubinResult r;
  char *err = NULL;
  cr_assert(cubin_from_ptx(ptx, len, NULL, CUBIN_AUTO, &r, &err), "%s", err ? err : "");
  check_vadd(&r, CUBIN_PTXAS);
  cr_assert_null(r.redo_error);
  cubin_result_free(&r);
  free(ptx);
}

Test(linkers, agree_on_registers_and_spills) {
  NEED_CUDA();
  char *spill = spill_ptx();
  const char *texts[] = {VADD_PTX, spill};
  const char *names[] = {"vadd", "spilly"};
  for (int t = 0; t < 2; t++) {
    CubinResult a, b;
    char *err = NULL;
    cr_assert(cubin_from_ptx(texts[t], strlen(texts[t]), NULL, CUBIN_NVJITLINK, &a, &err), "%s",
              err ? err : "");
    cr_assert(cubin_from_ptx(texts[t], strlen(texts[t]), NULL, CUBIN_PTXAS, &b, &err), "%s",
              err ? err : "");
    const CubinStats *sa = cubin_result_kernel(&a, names[t]);
    const CubinStats *sb = cubin_result_kernel(&b, names[t]);
    cr_assert_not_null(sa);
    cr_assert_not_null(sb);
    cr_assert_eq(sa->registers, sb->registers, "%s: nvJitLink %d, ptxas %d", names[t],
                 sa->registers, sb->registers);
    cr_assert_eq(sa->spill_store_bytes, sb->spill_store_bytes);
    cr_assert_eq(sa->spill_load_bytes, sb->spill_load_bytes);
    cr_assert_eq(sa->shared_bytes, sb->shared_bytes);
    if (t == 1) {
      cr_assert_leq(sa->registers, 24, ".maxnreg 24");
      cr_assert_gt(sa->spill_store_bytes, 0, "%s", a.info_log);
      cr_assert_gt(sa->spill_load_bytes, 0);
      cr_assert_eq(sa->shared_bytes, 4096);
    }
    cubin_result_free(&a);
    cubin_result_free(&b);
  }
  free(spill);
}

Test(linkers, caller_owned_nvjitlink) {
  NEED_CUDA();
  char *err = NULL;
  CubinNvJitLink *lib = cubin_nvjitlink_open(NULL, &err);
  cr_assert_not_null(lib, "%s", err ? err : "");
  unsigned major = 0, minor = 0;
  cr_assert(cubin_nvjitlink_version(lib, &major, &minor));
  cr_assert_geq(major, 13u);
  CubinOptions opts = {.linker = CUBIN_NVJITLINK, .nvjitlink = lib};
  for (int i = 0; i < 3; i++) {
    CubinResult r;
    cr_assert(cubin_compile(&opts, VADD_PTX, strlen(VADD_PTX), &r, &err), "%s", err ? err : "");
    check_vadd(&r, CUBIN_NVJITLINK);
    cubin_result_free(&r);
  }
  cubin_nvjitlink_close(lib);
  cubin_nvjitlink_close(NULL);

  /* An explicit toolkit root works too; a wrong one still finds the
   * library through the loader's own search. */
  lib = cubin_nvjitlink_open(CUDA_ROOT, &err);
  cr_assert_not_null(lib, "%s", err ? err : "");
  cubin_nvjitlink_close(lib);
}

/* Each thread compiles with both linkers; results must match the
 * single-threaded ones (no shared state between calls). */
typedef struct ThreadJob {
  CubinLinker linker;
  int registers;
  bool ok;
} ThreadJob;

static void *thread_main(void *arg) {
  ThreadJob *job = arg;
  for (int i = 0; i < 3; i++) {
    CubinResult r;
    char *err = NULL;
    job->ok = cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), NULL, job->linker, &r, &err);
    free(err);
    if (!job->ok) return NULL;
    const CubinStats *s = cubin_result_kernel(&r, "vadd");
    job->registers = s ? s->registers : -1;
    cubin_result_free(&r);
  }
  return NULL;
}

Test(linkers, concurrent_calls) {
  NEED_CUDA();
  enum { THREADS = 6 };
  pthread_t th[THREADS];
  ThreadJob jobs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i] = (ThreadJob){.linker = i % 2 ? CUBIN_PTXAS : CUBIN_NVJITLINK};
    cr_assert_eq(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    cr_assert(jobs[i].ok, "thread %d", i);
    cr_assert_eq(jobs[i].registers, jobs[0].registers);
  }
}

/* ---- errors from the real tools ------------------------------------------ */

Test(errors, syntax_error_nvjitlink) {
  NEED_CUDA();
  char *bad = bad_ptx();
  CubinResult r;
  char *err = NULL;
  cr_assert_not(cubin_from_ptx(bad, strlen(bad), NULL, CUBIN_NVJITLINK, &r, &err));
  cr_assert_not_null(err);
  cr_assert_not_null(strstr(err, "line 35; error   : Not a name of any known instruction: 'addx'"),
                     "%s", err);
  cr_assert_not_null(strstr(err, "NVJITLINK_ERROR_PTX_COMPILE"), "%s", err);
  cr_assert_null(r.data);
  free(err);
  free(bad);
}

/* The text after "reproduce with: " up to the end of its line. */
static char *reproduce_command(const char *err) {
  const char *s = strstr(err, "reproduce with: ");
  cr_assert_not_null(s, "%s", err);
  s += strlen("reproduce with: ");
  return strndup(s, strcspn(s, "\n"));
}

Test(errors, syntax_error_ptxas_keeps_ptx_and_reproduces) {
  NEED_CUDA();
  char *tmp = make_tmpdir();
  setenv("TMPDIR", tmp, 1);
  char *bad = bad_ptx();
  CubinResult r;
  char *err = NULL;
  cr_assert_not(cubin_from_ptx(bad, strlen(bad), NULL, CUBIN_PTXAS, &r, &err));
  cr_assert_not_null(err);
  cr_assert_not_null(strstr(err, "exited with status 255"), "%s", err);
  cr_assert_not_null(strstr(err, "line 35; error   : Not a name of any known instruction: 'addx'"),
                     "%s", err);
  cr_assert_not_null(strstr(err, "ptxas fatal   : Ptx assembly aborted due to errors"), "%s", err);
  char *cmd = reproduce_command(err);
  cr_assert_not_null(strstr(cmd, "/bin/ptxas -arch=sm_90a -v -O3 -o "), "%s", cmd);
  cr_assert_not_null(strstr(cmd, tmp), "%s", cmd);

  /* The PTX is kept where the message says. */
  const char *kept = strstr(err, "(the PTX is kept in ");
  cr_assert_not_null(kept, "%s", err);
  kept += strlen("(the PTX is kept in ");
  char *path = strndup(kept, strcspn(kept, ")"));
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  cr_assert_str_eq(text, bad);

  /* And the command fails the same way. */
  char shell[8192];
  snprintf(shell, sizeof shell, "%s >%s/out.txt 2>&1", cmd, tmp);
  cr_assert_neq(system(shell), 0);
  snprintf(shell, sizeof shell, "grep -q \"Not a name of any known instruction: 'addx'\" %s/out.txt",
           tmp);
  cr_assert_eq(system(shell), 0);

  free(path);
  free(cmd);
  free(err);
  free(bad);
  rm_tree(tmp);
  free(tmp);
}

Test(errors, unsupported_arch) {
  NEED_CUDA();
  CubinResult r;
  char *err = NULL;
  cr_assert_not(cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), "sm_999", CUBIN_NVJITLINK, &r, &err));
  cr_assert_not_null(strstr(err, "nvJitLinkCreate"), "%s", err);
  cr_assert_not_null(strstr(err, "NVJITLINK_ERROR_UNRECOGNIZED_ARCH"), "%s", err);
  cr_assert_not_null(strstr(err, "unrecognized architecture"), "%s", err);
  free(err);

  char *tmp = make_tmpdir();
  setenv("TMPDIR", tmp, 1);
  cr_assert_not(cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), "sm_999", CUBIN_PTXAS, &r, &err));
  cr_assert_not_null(strstr(err, "Value 'sm_999' is not defined for option 'gpu-name'"), "%s", err);
  cr_assert_not_null(strstr(err, "-arch=sm_999"), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);
}

/* ---- ptxas missing or misbehaving ----------------------------------------- */

Test(ptxas, explicit_path_missing) {
  char *tmp = make_tmpdir();
  char missing[512];
  snprintf(missing, sizeof missing, "%s/ptxas", tmp);
  CubinOptions opts = {.linker = CUBIN_PTXAS, .ptxas = missing};
  CubinResult r;
  char *err = NULL;
  cr_assert_not(cubin_compile(&opts, VADD_PTX, strlen(VADD_PTX), &r, &err));
  cr_assert_not_null(strstr(err, "ptxas not found"), "%s", err);
  cr_assert_not_null(strstr(err, missing), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);
}

Test(ptxas, not_found_anywhere) {
  char *empty = make_tmpdir();
  setenv("CUDA_HOME", empty, 1);
  setenv("PATH", empty, 1);
  CubinOptions opts = {.linker = CUBIN_PTXAS, .cuda_home = empty};
  CubinResult r;
  char *err = NULL;
  cr_assert_not(cubin_compile(&opts, VADD_PTX, strlen(VADD_PTX), &r, &err));
  cr_assert_not_null(strstr(err, "ptxas not found"), "%s", err);
  char looked[512];
  snprintf(looked, sizeof looked, "%s/bin/ptxas", empty);
  cr_assert_not_null(strstr(err, looked), "%s", err);
  snprintf(looked, sizeof looked, "$PATH=%s", empty);
  cr_assert_not_null(strstr(err, looked), "%s", err);
  cr_assert_null(r.data);
  free(err);
  rm_tree(empty);
  free(empty);
}

/* Runs VADD_PTX through a fake toolkit whose ptxas is `script`, found
 * through $CUDA_HOME. Returns the error (or NULL on success, *r filled). */
static char *run_fake(const char *script, char *tmp, CubinResult *r) {
  fake_ptxas(tmp, script);
  setenv("CUDA_HOME", tmp, 1);
  char tmpfiles[512];
  snprintf(tmpfiles, sizeof tmpfiles, "%s/tmp", tmp);
  cr_assert_eq(mkdir(tmpfiles, 0700), 0);
  setenv("TMPDIR", tmpfiles, 1);
  char *err = NULL;
  if (cubin_from_ptx(VADD_PTX, strlen(VADD_PTX), NULL, CUBIN_PTXAS, r, &err)) return NULL;
  cr_assert_not_null(err);
  return err;
}

Test(ptxas, cuda_home_first_and_argv) {
  char *tmp = make_tmpdir();
  CubinResult r;
  /* Checks its arguments, writes a minimal "ELF" and a verbose report. */
  char *err = run_fake(
      FIND_OUT "[ \"$1\" = -arch=sm_90a ] && [ \"$2\" = -v ] && [ \"$3\" = -O3 ] || exit 9\n"
               "[ -f \"$6\" ] || exit 8\n"
               "printf '\\177ELF fake' > \"$out\"\n"
               "echo \"ptxas info    : Compiling entry function 'vadd' for 'sm_90a'\" >&2\n"
               "echo 'ptxas info    : Used 7 registers, used 0 barriers' >&2\n",
      tmp, &r);
  cr_assert_null(err, "%s", err);
  cr_assert_eq(r.linker, CUBIN_PTXAS);
  cr_assert_eq(r.size, strlen("\177ELF fake"));
  cr_assert_eq(cubin_result_kernel(&r, "vadd")->registers, 7);
  char tmpfiles[512];
  snprintf(tmpfiles, sizeof tmpfiles, "%s/tmp", tmp);
  cr_assert(dir_is_empty(tmpfiles));
  cubin_result_free(&r);
  rm_tree(tmp);
  free(tmp);
}

Test(ptxas, exit_status) {
  char *tmp = make_tmpdir();
  CubinResult r;
  char *err = run_fake("echo 'ptxas fatal   : something broke' >&2; exit 3", tmp, &r);
  cr_assert_not_null(strstr(err, "exited with status 3:\nptxas fatal   : something broke\n"), "%s",
                     err);
  cr_assert_not_null(strstr(err, "reproduce with: "), "%s", err);
  cr_assert_not_null(strstr(err, "(the PTX is kept in "), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);
}

Test(ptxas, killed_by_signal) {
  char *tmp = make_tmpdir();
  CubinResult r;
  char *err = run_fake("echo dying; kill -SEGV $$", tmp, &r);
  cr_assert_not_null(strstr(err, "was killed by signal 11 (SIGSEGV)"), "%s", err);
  cr_assert_not_null(strstr(err, "dying"), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);
}

Test(ptxas, huge_output_does_not_block) {
  char *tmp = make_tmpdir();
  CubinResult r;
  /* 24 MiB on each of stdout and stderr, more than the 16 MiB kept. */
  char *err = run_fake("head -c 25165824 /dev/zero | tr '\\0' x; "
                       "head -c 25165824 /dev/zero | tr '\\0' y >&2; exit 1",
                       tmp, &r);
  cr_assert_not_null(strstr(err, "exited with status 1"), "%.200s", err);
  cr_assert_not_null(strstr(err, "more bytes of output not kept"), "%.200s", err);
  cr_assert_not_null(strstr(err, "reproduce with: "));
  free(err);
  rm_tree(tmp);
  free(tmp);
}

Test(ptxas, success_without_a_cubin) {
  char *tmp = make_tmpdir();
  CubinResult r;
  char *err = run_fake("exit 0", tmp, &r);
  cr_assert_not_null(strstr(err, "exited with status 0 but its cubin"), "%s", err);
  cr_assert_not_null(strstr(err, "No such file or directory"), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);

  tmp = make_tmpdir();
  err = run_fake(FIND_OUT "echo 'not elf' > \"$out\"", tmp, &r);
  cr_assert_not_null(strstr(err, "not an ELF cubin"), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);
}

Test(ptxas, not_executable) {
  char *tmp = make_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/ptxas", tmp);
  FILE *f = fopen(path, "w");
  fputs("#!/bin/sh\nexit 0\n", f);
  fclose(f);
  chmod(path, 0644);
  CubinOptions opts = {.linker = CUBIN_PTXAS, .ptxas = path};
  CubinResult r;
  char *err = NULL;
  cr_assert_not(cubin_compile(&opts, VADD_PTX, strlen(VADD_PTX), &r, &err));
  cr_assert_not_null(strstr(err, "not an executable file"), "%s", err);
  free(err);

  /* Executable but not runnable (no interpreter): posix_spawn's error. */
  f = fopen(path, "w");
  fputs("#!/nonexistent/interpreter\n", f);
  fclose(f);
  chmod(path, 0755);
  setenv("TMPDIR", tmp, 1);
  cr_assert_not(cubin_compile(&opts, VADD_PTX, strlen(VADD_PTX), &r, &err));
  cr_assert_not_null(strstr(err, "cannot run"), "%s", err);
  cr_assert_not_null(strstr(err, "No such file or directory"), "%s", err);
  free(err);
  rm_tree(tmp);
  free(tmp);
}

Test(nvjitlink, missing_library_is_reported) {
  /* A toolkit root without nvJitLink: CUBIN_NVJITLINK with cuda_home set
   * still tries the loader's search last, so only check the message shape
   * when that fails too. */
  char *empty = make_tmpdir();
  char *err = NULL;
  CubinNvJitLink *lib = cubin_nvjitlink_open(empty, &err);
  if (lib) {
    cubin_nvjitlink_close(lib);
  } else {
    cr_assert_not_null(strstr(err, "cannot load nvJitLink"), "%s", err);
    cr_assert_not_null(strstr(err, empty), "%s", err);
  }
  free(err);
  rm_tree(empty);
  free(empty);
}
