/* test_runtime.c - unit tests of libtile (runtime/) that need no GPU.
 *
 * The runtime's GPU paths are tested on the GPU machine; everything that
 * decides whether a launch is right is pure and tested here:
 *   - tile_runtime_create on a machine without libcuda.so.1 returns
 *     TILE_ERROR_NO_DRIVER with a message saying so (skipped where a
 *     driver is installed); a driver library path that does not exist or
 *     is not libcuda fails the same way everywhere; bad configurations are
 *     rejected; the allocator and log callbacks are used and balanced;
 *   - error names, the thread-local error message, NULL handles;
 *   - tile_meta_parse on valid metadata (every field) and on malformed
 *     texts, each with the line and reason in the message;
 *   - tile_check_args: argument counts, kinds, integer ranges, alignment,
 *     multiple_of, grids, float ranges and descriptors, with messages that
 *     name the argument; tensors (tile_arg_tensor) against every TMA rule
 *     and the metadata's box and swizzle;
 *   - the tensor-map encoder and cache (runtime/tmap.c) through a fake
 *     encoder: the arguments cuTensorMapEncodeTiled would get (reversed
 *     dimensions, byte strides, box, swizzle, data type), hits, misses,
 *     eviction, errors, threads, and packing into the 64-byte slot;
 *   - the f16/bf16 rounding used to pack half-precision scalars.
 *
 * It includes runtime/internal.h (and so the CUDA headers) to reach the
 * packing and the tensor-map cache, which have no public entry point.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "tile.h"

/* ---- helpers ----------------------------------------------------------- */

#define MSG_SIZE 512

static void expect_contains(const char *text, const char *part) {
  cr_expect(strstr(text, part) != NULL, "expected \"%s\" in:\n  %s", part, text);
}

static bool driver_installed(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != NULL;
}

/* Parses text that must be malformed; checks the status and that the
 * message contains each of the (up to two) parts. */
static void expect_bad_meta(const char *text, const char *part1, const char *part2) {
  tile_kernel_info *info = (tile_kernel_info *)1;
  tile_status st = tile_meta_parse(text, &info);
  cr_expect_eq(st, TILE_ERROR_BAD_METADATA, "status %s for:\n%s", tile_status_name(st), text);
  cr_expect_null(info);
  expect_contains(tile_last_error(), part1);
  if (part2) expect_contains(tile_last_error(), part2);
  tile_meta_free(info == (tile_kernel_info *)1 ? NULL : info);
}

/* A metadata text: the header, name, warps and shared lines, then body. */
static const char *with_header(const char *body, char *buf, size_t size) {
  snprintf(buf, size, "tile-kernel 1\nname k\nwarps 4\nshared 0\n%s", body);
  return buf;
}

static void expect_bad_body(const char *body, const char *part1, const char *part2) {
  char buf[1024];
  expect_bad_meta(with_header(body, buf, sizeof buf), part1, part2);
}

static const char softmax_meta[] = "tile-kernel 1\n"
                                   "name softmax\n"
                                   "warps 4\n"
                                   "shared 0\n"
                                   "param out ptr f32 align 16\n"
                                   "param x ptr f32 align 16\n"
                                   "param n i32 multiple_of 16\n"
                                   "param stride i32\n"
                                   "const BLOCK i32 1024\n"
                                   "end\n";

/* Everything check_args looks at, one parameter of each kind and type. */
static const char wide_meta[] = "tile-kernel 1\n"
                                "name wide\n"
                                "warps 8\n"
                                "shared 65536\n"
                                "param p ptr bf16\n"
                                "param a i8\n"
                                "param b u32\n"
                                "param c i64\n"
                                "param d u64\n"
                                "param e f16\n"
                                "param f f32\n"
                                "param g f64\n"
                                "param q desc bf16 2 box 64 64 swizzle 128\n"
                                "param flag i1\n"
                                "end\n";

static tile_kernel_info *parse_ok(const char *text) {
  tile_kernel_info *info = NULL;
  tile_status st = tile_meta_parse(text, &info);
  cr_assert_eq(st, TILE_OK, "tile_meta_parse failed: %s", tile_last_error());
  cr_assert_not_null(info);
  return info;
}

static const uint32_t grid1[3] = {1, 1, 1};
static const unsigned char fake_tensor_map[128] __attribute__((aligned(64)));

/* Valid arguments for wide_meta. */
static void wide_args(tile_arg args[10]) {
  args[0] = tile_arg_ptr(0x10000);
  args[1] = tile_arg_i32(-128);
  args[2] = tile_arg_u32(UINT32_MAX);
  args[3] = tile_arg_i64(INT64_MIN);
  args[4] = tile_arg_u64(UINT64_MAX);
  args[5] = tile_arg_f32(1.5f);
  args[6] = tile_arg_f64(-2.5);
  args[7] = tile_arg_f64(1e300);
  args[8] = tile_arg_desc(fake_tensor_map);
  args[9] = tile_arg_bool(true);
}

/* Checks args against the metadata text (grid 1 x 1 x 1): part "" expects
 * success, else the message must contain part, or be it if exact. */
static void expect_check(const char *text, const tile_arg *args, int nargs, const char *part, bool exact) {
  tile_kernel_info *info = parse_ok(text);
  char msg[MSG_SIZE] = "";
  tile_status st = tile_check_args(info, grid1, args, nargs, msg, sizeof msg);
  if (!*part) {
    cr_expect_eq(st, TILE_OK, "unexpected failure: %s", msg);
  } else {
    cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "accepted, expected \"%s\"", part);
    if (exact)
      cr_expect_str_eq(msg, part);
    else
      expect_contains(msg, part);
  }
  tile_meta_free(info);
}

/* Checks one changed argument of wide_meta; expect "" for success. */
static void expect_wide(int index, tile_arg arg, const char *part) {
  tile_arg args[10];
  wide_args(args);
  args[index] = arg;
  expect_check(wide_meta, args, 10, part, false);
}

/* Checks softmax_meta with the given args and grid. */
static tile_status check_softmax(const uint32_t grid[3], const tile_arg *args, int nargs, char *msg) {
  tile_kernel_info *info = parse_ok(softmax_meta);
  tile_status st = tile_check_args(info, grid, args, nargs, msg, MSG_SIZE);
  tile_meta_free(info);
  return st;
}

/* ---- runtime creation without a driver --------------------------------- */

Test(runtime, create_reports_no_driver) {
  if (driver_installed()) cr_skip_test("libcuda.so.1 is installed here");
  tile_runtime *rt = (tile_runtime *)1;
  tile_status st = tile_runtime_create(NULL, &rt);
  cr_expect_eq(st, TILE_ERROR_NO_DRIVER, "status %s", tile_status_name(st));
  cr_expect_null(rt);
  expect_contains(tile_last_error(), "no CUDA driver: libcuda.so.1 could not be loaded (");
}

Test(runtime, create_with_missing_library_fails_everywhere) {
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.driver_library = "/nonexistent/dir/libcuda.so.1";
  tile_runtime *rt = NULL;
  cr_expect_eq(tile_runtime_create(&cfg, &rt), TILE_ERROR_NO_DRIVER);
  cr_expect_null(rt);
  expect_contains(tile_last_error(), "no CUDA driver: /nonexistent/dir/libcuda.so.1 could not be loaded (");
}

Test(runtime, create_with_a_library_that_is_not_libcuda) {
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.driver_library = "libm.so.6";
  tile_runtime *rt = NULL;
  cr_expect_eq(tile_runtime_create(&cfg, &rt), TILE_ERROR_NO_DRIVER);
  cr_expect_null(rt);
  expect_contains(tile_last_error(), "libm.so.6 has no function cuInit");
}

Test(runtime, create_rejects_bad_calls) {
  cr_expect_eq(tile_runtime_create(NULL, NULL), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "out is NULL");
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.alloc = (tile_alloc_fn)1; /* alloc without free */
  tile_runtime *rt = NULL;
  cr_expect_eq(tile_runtime_create(&cfg, &rt), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "set both alloc and free");
  tile_config_init(&cfg);
  cfg.device = -1;
  cr_expect_eq(tile_runtime_create(&cfg, &rt), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "device ordinal -1 is negative");
  cr_expect_null(rt);
}

Test(runtime, config_defaults) {
  tile_config cfg;
  memset(&cfg, 0xab, sizeof cfg);
  tile_config_init(&cfg);
  cr_expect_eq(cfg.device, 0);
  cr_expect_null(cfg.alloc);
  cr_expect_null(cfg.free);
  cr_expect_null(cfg.log);
  cr_expect_null(cfg.driver_library);
  cr_expect_eq(cfg.log_level, TILE_LOG_INFO);
}

typedef struct counting_allocator {
  int allocs, frees;
  size_t live_bytes;
} counting_allocator;

static void *counting_alloc(void *user, size_t size) {
  counting_allocator *c = user;
  c->allocs++;
  c->live_bytes += size;
  return malloc(size);
}

static void counting_free(void *user, void *ptr, size_t size) {
  counting_allocator *c = user;
  c->frees++;
  c->live_bytes -= size;
  free(ptr);
}

typedef struct log_record {
  int count;
  tile_log_level level;
  char last[512];
} log_record;

static void record_log(void *user, tile_log_level level, const char *message) {
  log_record *r = user;
  r->count++;
  r->level = level;
  snprintf(r->last, sizeof r->last, "%s", message);
}

Test(runtime, failed_create_uses_and_balances_the_callbacks) {
  counting_allocator c = {0};
  log_record log = {0};
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.alloc = counting_alloc;
  cfg.free = counting_free;
  cfg.alloc_user = &c;
  cfg.log = record_log;
  cfg.log_user = &log;
  cfg.driver_library = "/nonexistent/libcuda.so.1";
  tile_runtime *rt = NULL;
  cr_expect_eq(tile_runtime_create(&cfg, &rt), TILE_ERROR_NO_DRIVER);
  cr_expect_gt(c.allocs, 0, "the runtime did not use the allocator");
  cr_expect_eq(c.allocs, c.frees);
  cr_expect_eq(c.live_bytes, 0);
  cr_expect_eq(log.count, 1);
  cr_expect_eq(log.level, TILE_LOG_ERROR);
  expect_contains(log.last, "no CUDA driver");
}

/* ---- errors and NULL handles ------------------------------------------- */

Test(errors, status_names) {
  cr_expect_str_eq(tile_status_name(TILE_OK), "TILE_OK");
  cr_expect_str_eq(tile_status_name(TILE_ERROR_NO_DRIVER), "TILE_ERROR_NO_DRIVER");
  cr_expect_str_eq(tile_status_name(TILE_ERROR_INVALID_ARGUMENT), "TILE_ERROR_INVALID_ARGUMENT");
  cr_expect_str_eq(tile_status_name(TILE_ERROR_BAD_METADATA), "TILE_ERROR_BAD_METADATA");
  cr_expect_str_eq(tile_status_name(TILE_ERROR_UNSUPPORTED), "TILE_ERROR_UNSUPPORTED");
  for (int s = TILE_OK; s <= TILE_ERROR_UNSUPPORTED; s++)
    cr_expect(strncmp(tile_status_name((tile_status)s), "TILE_", 5) == 0, "status %d has no name", s);
  cr_expect_str_eq(tile_status_name((tile_status)999), "TILE_ERROR_UNKNOWN_STATUS");
}

static void *fail_in_thread(void *arg) {
  (void)arg;
  tile_kernel_info *info;
  tile_meta_parse("garbage", &info);
  return strstr(tile_last_error(), "not tile kernel metadata") ? (void *)1 : NULL;
}

Test(errors, last_error_is_per_thread) {
  tile_meta_parse(NULL, &(tile_kernel_info *){NULL});
  expect_contains(tile_last_error(), "text is NULL");
  pthread_t t;
  void *ok = NULL;
  cr_assert_eq(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
  pthread_join(t, &ok);
  cr_expect_not_null(ok, "the other thread did not see its own error");
  expect_contains(tile_last_error(), "text is NULL"); /* unchanged here */
}

Test(errors, null_handles) {
  cr_expect_eq(tile_runtime_destroy(NULL), TILE_OK);
  cr_expect_eq(tile_module_unload(NULL), TILE_OK);
  cr_expect_eq(tile_stream_destroy(NULL), TILE_OK);
  cr_expect_eq(tile_event_destroy(NULL), TILE_OK);
  cr_expect_eq(tile_graph_destroy(NULL), TILE_OK);
  tile_module *m = (tile_module *)1;
  cr_expect_eq(tile_module_load(NULL, "x", 1, &m), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(m);
  tile_kernel *k = (tile_kernel *)1;
  cr_expect_eq(tile_kernel_get(NULL, "k", &k), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(k);
  cr_expect_null(tile_kernel_get_info(NULL));
  cr_expect_eq(tile_launch(NULL, grid1, NULL, NULL, 0), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "kernel is NULL");
  cr_expect_eq(tile_stream_synchronize(NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(tile_graph_begin_capture(NULL), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "default stream cannot be captured");
  uint64_t p = 1;
  cr_expect_eq(tile_mem_alloc(NULL, 16, &p), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(p, 0);
  cr_expect_eq(tile_mem_free(NULL, 0), TILE_OK);
}

/* ---- metadata: valid --------------------------------------------------- */

Test(meta, parses_every_field) {
  tile_kernel_info *info = parse_ok(wide_meta);
  cr_expect_str_eq(info->name, "wide");
  cr_expect_eq(info->warps, 8);
  cr_expect_eq(info->threads, 256);
  cr_expect_eq(info->shared_bytes, 65536u);
  cr_assert_eq(info->nparams, 10);
  cr_expect_eq(info->nconsts, 0);
  const tile_param_info *p = info->params;
  cr_expect_str_eq(p[0].name, "p");
  cr_expect_eq(p[0].kind, TILE_PARAM_PTR);
  cr_expect_str_eq(p[0].elem, "bf16");
  cr_expect_eq(p[0].dtype, TILE_DTYPE_BF16);
  cr_expect_eq(p[0].elem_bytes, 2);
  cr_expect_eq(p[0].align, 0);
  cr_expect_eq(p[1].kind, TILE_PARAM_INT);
  cr_expect_eq(p[1].elem_bytes, 1);
  cr_expect(p[1].elem_signed);
  cr_expect_eq(p[2].dtype, TILE_DTYPE_U32);
  cr_expect(!p[2].elem_signed);
  cr_expect_eq(p[5].kind, TILE_PARAM_FLOAT);
  cr_expect_eq(p[5].dtype, TILE_DTYPE_F16);
  cr_expect_eq(p[7].elem_bytes, 8);
  const tile_param_info *q = &p[8];
  cr_expect_eq(q->kind, TILE_PARAM_DESC);
  cr_expect_str_eq(q->elem, "bf16");
  cr_expect_eq(q->desc_rank, 2);
  cr_expect_eq(q->box[0], 64);
  cr_expect_eq(q->box[1], 64);
  cr_expect_eq(q->box[2], 0);
  cr_expect_eq(q->swizzle, 128);
  cr_expect_eq(p[9].dtype, TILE_DTYPE_I1);
  cr_expect_eq(p[9].elem_bytes, 1);
  tile_meta_free(info);
}

Test(meta, parses_facts_and_consts) {
  const char text[] = "tile-kernel 1\nname attn\nwarps 12\nshared 229376\n"
                      "param o ptr f8e4m3 align 128\nparam n i32 multiple_of 64\n"
                      "const BLOCK i32 1024\nconst T type bf16\nconst SCALE f32 0.125\nconst CAUSAL i1 true\n"
                      "const NEG i64 -7\nend"; /* no final newline */
  tile_kernel_info *info = parse_ok(text);
  cr_expect_eq(info->warps, 12);
  cr_expect_eq(info->shared_bytes, 229376u);
  cr_expect_eq(info->params[0].align, 128);
  cr_expect_eq(info->params[0].elem_bytes, 1);
  cr_expect_eq(info->params[1].multiple_of, 64);
  cr_assert_eq(info->nconsts, 5);
  cr_expect_str_eq(info->consts[0].name, "BLOCK");
  cr_expect_str_eq(info->consts[0].type, "i32");
  cr_expect_str_eq(info->consts[0].value, "1024");
  cr_expect_str_eq(info->consts[1].type, "type");
  cr_expect_str_eq(info->consts[1].value, "bf16");
  cr_expect_str_eq(info->consts[4].value, "-7");
  tile_meta_free(info);
}

Test(meta, minimal_kernel_without_parameters) {
  tile_kernel_info *info = parse_ok("tile-kernel 1\nname empty\nwarps 1\nshared 0\nend\n");
  cr_expect_eq(info->nparams, 0);
  cr_expect_eq(info->threads, 32);
  char msg[MSG_SIZE];
  cr_expect_eq(tile_check_args(info, grid1, NULL, 0, msg, sizeof msg), TILE_OK);
  tile_meta_free(info);
  tile_meta_free(NULL);
}

Test(meta, parses_descriptor_lines) {
  const char text[] = "tile-kernel 1\nname d\nwarps 4\nshared 0\n"
                      "param a desc f16 1 box 256\n"
                      "param b desc f8e5m2 3 box 2 64 128 swizzle 128\n"
                      "param c desc f32 4 box 1 2 8 16 swizzle 0\n"
                      "param e desc u64 2 box 16 4 swizzle 32\nend\n";
  tile_kernel_info *info = parse_ok(text);
  cr_assert_eq(info->nparams, 4);
  const tile_param_info *p = info->params;
  cr_expect_eq(p[0].kind, TILE_PARAM_DESC);
  cr_expect_eq(p[0].desc_rank, 1);
  cr_expect_eq(p[0].box[0], 256);
  cr_expect_eq(p[0].swizzle, 0, "swizzle defaults to 0");
  cr_expect_eq(p[1].dtype, TILE_DTYPE_F8E5M2);
  cr_expect_eq(p[1].elem_bytes, 1);
  cr_expect_eq(p[1].desc_rank, 3);
  cr_expect(p[1].box[0] == 2 && p[1].box[1] == 64 && p[1].box[2] == 128 && p[1].box[3] == 0);
  cr_expect_eq(p[1].swizzle, 128);
  cr_expect_eq(p[2].desc_rank, 4);
  cr_expect(p[2].box[0] == 1 && p[2].box[1] == 2 && p[2].box[2] == 8 && p[2].box[3] == 16);
  cr_expect_eq(p[2].swizzle, 0);
  cr_expect_eq(p[3].swizzle, 32);
  cr_expect_eq(p[3].elem_bytes, 8);
  tile_meta_free(info);
}

/* ---- metadata: malformed ----------------------------------------------- */

/* cluster N: the grid's x must be a multiple of N (absent: 1) */
Test(meta, cluster_line_and_the_grid_it_needs) {
  tile_kernel_info *info = parse_ok("tile-kernel 1\nname g\nwarps 12\nshared 0\ncluster 2\nend\n");
  cr_expect_eq(info->cluster, 2);
  char msg[MSG_SIZE] = "";
  cr_expect_eq(tile_check_args(info, (const uint32_t[3]){132, 1, 1}, NULL, 0, msg, sizeof msg), TILE_OK, "%s", msg);
  cr_expect_eq(tile_check_args(info, (const uint32_t[3]){3, 1, 1}, NULL, 0, msg, sizeof msg),
               TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "grid (3, 1, 1) of kernel 'g': size in x is 3, not a multiple of its cluster size 2");
  tile_meta_free(info);
  info = parse_ok("tile-kernel 1\nname g\nwarps 4\nshared 0\nend\n");
  cr_expect_eq(info->cluster, 1);
  tile_meta_free(info);
  expect_bad_body("cluster 0\nend\n", "line 5: bad cluster size '0'", "from 1 to 8");
  expect_bad_body("cluster 9\nend\n", "bad cluster size '9'", NULL);
  expect_bad_body("cluster 2\ncluster 2\nend\n", "line 6: second 'cluster' line", NULL);
  expect_bad_body("cluster 2 1\nend\n", "line 5:", "cluster N");
}

Test(meta_bad, unknown_parameter_kind) {
  expect_bad_body("param x foo\nend\n", "metadata line 5:", "unknown kind 'foo' for parameter 'x'");
}

Test(meta_bad, missing_name) {
  expect_bad_meta("tile-kernel 1\nwarps 4\nshared 0\nend\n", "missing 'name' line", NULL);
}

Test(meta_bad, missing_warps_and_shared) {
  expect_bad_meta("tile-kernel 1\nname k\nshared 0\nend\n", "missing 'warps' line", NULL);
  expect_bad_meta("tile-kernel 1\nname k\nwarps 2\nend\n", "missing 'shared' line", NULL);
}

Test(meta_bad, bad_numbers) {
  expect_bad_meta("tile-kernel 1\nname k\nwarps four\nshared 0\nend\n", "line 3:", "bad warp count 'four'");
  expect_bad_meta("tile-kernel 1\nname k\nwarps 0\nshared 0\nend\n", "bad warp count '0'", "from 1 to 32");
  expect_bad_meta("tile-kernel 1\nname k\nwarps 33\nshared 0\nend\n", "bad warp count '33'", NULL);
  expect_bad_meta("tile-kernel 1\nname k\nwarps 04\nshared 0\nend\n", "bad warp count '04'", NULL);
  /* a count far out of range is refused before anything is computed from
   * it (32 times it overflowed an int: found by fuzz_meta under UBSan) */
  expect_bad_meta("tile-kernel 1\nname k\nwarps 2242157228\nshared 0\nend\n", "bad warp count '2242157228'", NULL);
  expect_bad_meta("tile-kernel 1\nname k\nwarps 4\nshared 99999999999999999999999\nend\n",
                  "line 4:", "bad shared memory size");
  expect_bad_meta("tile-kernel 1\nname k\nwarps 4\nshared -1\nend\n", "bad shared memory size '-1'", NULL);
}

Test(meta_bad, unknown_line) { expect_bad_body("color blue\nend\n", "metadata line 5: unknown line 'color'", NULL); }

Test(meta_bad, missing_end) { expect_bad_body("param n i32\n", "missing 'end' line", NULL); }

Test(meta_bad, text_after_end) { expect_bad_body("end\nparam n i32\n", "line 6: text after 'end'", NULL); }

Test(meta_bad, wrong_header_or_version) {
  expect_bad_meta("tile-kernal 1\nname k\nwarps 4\nshared 0\nend\n", "line 1:", "not tile kernel metadata");
  expect_bad_meta("tile-kernel 2\nname k\nwarps 4\nshared 0\nend\n", "version '2' is not supported", "reads version 1");
  expect_bad_meta("name k\ntile-kernel 1\nwarps 4\nshared 0\nend\n", "line 1:", NULL);
  expect_bad_meta("", "empty text", NULL);
}

Test(meta_bad, spacing) {
  expect_bad_body("param  n i32\nend\n", "line 5: empty field 2", "single spaces");
  expect_bad_body("param n i32 \nend\n", "line 5: empty field 4", NULL);
  expect_bad_body("\nend\n", "line 5: empty line", NULL);
}

Test(meta_bad, duplicates) {
  expect_bad_body("param n i32\nparam n i64\nend\n", "line 6: second parameter named 'n'", NULL);
  expect_bad_body("name j\nend\n", "second 'name' line", NULL);
  expect_bad_body("param p ptr f32 align 16 align 16\nend\n", "second 'align' for parameter 'p'", NULL);
  expect_bad_body("const B i32 1\nconst B i32 2\nend\n", "second const named 'B'", NULL);
}

Test(meta_bad, pointer_options) {
  expect_bad_body("param p ptr f32 align 12\nend\n", "alignment 12 of parameter 'p' is not a power of two", NULL);
  expect_bad_body("param p ptr f32 multiple_of 16\nend\n", "unknown option 'multiple_of' for parameter 'p'", NULL);
  expect_bad_body("param p ptr f32 align\nend\n", "option 'align' of parameter 'p' has no value", NULL);
  expect_bad_body("param p ptr f33\nend\n", "unknown element type 'f33' for parameter 'p'", NULL);
  expect_bad_body("param p ptr\nend\n", "parameter 'p' has no element type", NULL);
}

Test(meta_bad, scalar_types) {
  expect_bad_body("param x f8e4m3\nend\n", "parameter 'x' cannot be a scalar of type f8e4m3", NULL);
  expect_bad_body("param x f32 multiple_of 2\nend\n", "unknown option 'multiple_of' for parameter 'x'", NULL);
  expect_bad_body("param n i32 multiple_of 0\nend\n", "bad multiple_of '0'", NULL);
  expect_bad_body("param 9n i32\nend\n", "bad parameter name '9n'", NULL);
  expect_bad_body("param n\nend\n", "expected 'param NAME KIND ...'", NULL);
}

Test(meta_bad, descriptors) {
  expect_bad_body("param q desc bf16 2 box 64 64 swizzle 100\nend\n", "swizzle 100 of parameter 'q'", NULL);
  expect_bad_body("param q desc bf16 5 box 1 1 1 1 1\nend\n", "bad descriptor rank '5'", NULL);
  expect_bad_body("param q desc bf16 2 64 64\nend\n", "expected 'box' and 2 box sizes", NULL);
  expect_bad_body("param q desc bf16 2 box 64\nend\n", "box size is missing", NULL);
  expect_bad_body("param q desc bf16 2 box 64 512\nend\n", "bad box size '512'", NULL);
  expect_bad_body("param q desc bf16 2 box 64 0\nend\n", "bad box size '0'", NULL);
  expect_bad_body("param q desc bf16 0 box\nend\n", "bad descriptor rank '0'", NULL);
  expect_bad_body("param q desc bf16 2 box 64 64 64\nend\n", "more than 2 box sizes for parameter 'q' of rank 2",
                  NULL);
  expect_bad_body("param q desc bf16 2 box 64 64 swizzle 64 swizzle 64\nend\n", "second 'swizzle' for parameter 'q'",
                  NULL);
  expect_bad_body("param q desc bf16 2 box 64 64 swizzle\nend\n", "option 'swizzle' of parameter 'q' has no value",
                  NULL);
  expect_bad_body("param q desc bf16 2 box 64 64 align 16\nend\n", "unknown option 'align' for parameter 'q'", NULL);
  expect_bad_body("param q desc i1 2 box 64 64\nend\n", "line 5: descriptor parameter 'q' cannot have i1 elements",
                  NULL);
  expect_bad_body("param q desc bf16 2 box 64 64 swizzle -1\nend\n", "bad swizzle '-1'", NULL);
  expect_bad_body("param p ptr f32 swizzle 128\nend\n", "unknown option 'swizzle' for parameter 'p'", NULL);
}

Test(meta_bad, consts) {
  expect_bad_body("const BLOCK i32 abc\nend\n", "bad value 'abc' for const 'BLOCK' of type i32", NULL);
  expect_bad_body("const T type float\nend\n", "bad value 'float' for const 'T'", NULL);
  expect_bad_body("const X q7 1\nend\n", "unknown type 'q7' of const 'X'", NULL);
  expect_bad_body("const X i32\nend\n", "expected 'const NAME TYPE VALUE'", NULL);
}

/* A bad body and two parts of the message it must give (NULL: none). */
typedef struct bad_body {
  const char *body, *part1, *part2;
} bad_body;

static void expect_bad_bodies(const bad_body *cases, size_t n) {
  for (size_t i = 0; i < n; i++) expect_bad_body(cases[i].body, cases[i].part1, cases[i].part2);
}

/* A float const must be finite unless spelled inf or nan (as %.17g writes
 * them), in range of its type, and in %.17g's form; an integer const in
 * range of its type. */
Test(meta_bad, consts_out_of_range_or_not_as_written) {
  static const bad_body cases[] = {
      {"const X f32 1e999\nend\n", "bad value '1e999' for const 'X' of type f32", "out of range: not finite as a double"},
      {"const X f64 -1e400\nend\n", "bad value '-1e400'", "not finite"},
      {"const X f32 1e39\nend\n", "bad value '1e39' for const 'X' of type f32", "out of range for its type"},
      {"const X f16 65520\nend\n", "bad value '65520' for const 'X' of type f16", "out of range for its type"},
      {"const X f32 0x1p3\nend\n", "bad value '0x1p3'", "as %.17g writes it"},
      {"const X f32 infinity\nend\n", "bad value 'infinity'", NULL},
      {"const X f32 +1\nend\n", "bad value '+1'", NULL},
      {"const X f32 1.\nend\n", "bad value '1.'", NULL},
      {"const X f32 1e\nend\n", "bad value '1e'", NULL},
      {"const X f32 \t1\nend\n", "line 5: control character 0x09 in field 4", NULL},
      /* Integers lie in their type's range (unsigned ones are written with
       * %llu, so never negative). */
      {"const X i8 128\nend\n", "bad value '128' for const 'X' of type i8", NULL},
      {"const X i8 -129\nend\n", "bad value '-129'", NULL},
      {"const X u8 256\nend\n", "bad value '256'", NULL},
      {"const X u64 -1\nend\n", "bad value '-1' for const 'X' of type u64", NULL},
      {"const X i64 9223372036854775808\nend\n", "bad value '9223372036854775808'", NULL},
      {"const X i32 -0\nend\n", "bad value '-0'", NULL},
      {"const X i32 007\nend\n", "bad value '007'", NULL},
  };
  expect_bad_bodies(cases, sizeof cases / sizeof cases[0]);
}

Test(meta, consts_as_the_compiler_writes_them) {
  tile_kernel_info *info = parse_ok("tile-kernel 1\nname k\nwarps 1\nshared 0\n"
                                    "const A f32 0.10000000149011612\nconst B f32 inf\nconst C f64 -inf\n"
                                    "const D f32 nan\nconst E f64 -1.5e-07\nconst F f16 65504\n"
                                    "const G f64 1.7976931348623157e+308\nconst H bf16 -0\nend\n");
  cr_expect_eq(info->nconsts, 8);
  cr_expect_str_eq(info->consts[1].value, "inf");
  tile_meta_free(info);
  info = parse_ok("tile-kernel 1\nname k\nwarps 1\nshared 0\nconst A i8 -128\nconst B i64 -9223372036854775808\n"
                  "const C u64 18446744073709551615\nconst D u8 255\nconst E i1 1\nend");
  cr_expect_eq(info->nconsts, 5);
  tile_meta_free(info);
}

/* CRLF line ends are rejected with a message that says so, on the first
 * line that has one (not as "version '1' is not supported"). */
Test(meta_bad, crlf_line_ends) {
  expect_bad_meta("tile-kernel 1\r\nname k\r\nwarps 4\r\nshared 0\r\nend\r\n",
                  "metadata line 1: carriage return (CRLF line ends are not accepted)", NULL);
  expect_bad_body("param n i32\r\nend\n", "metadata line 5: carriage return (CRLF line ends are not accepted)", NULL);
  expect_bad_meta("tile-kernel 1\nname k\nwarps 4\nshared 0\nend\r",
                  "metadata line 5: carriage return (CRLF line ends are not accepted)", NULL);
  expect_bad_body("param n\x01 i32\nend\n", "line 5: control character 0x01 in field 2", NULL);
}

Test(meta_bad, bad_kernel_name) {
  expect_bad_meta("tile-kernel 1\nname 1k\nwarps 4\nshared 0\nend\n", "line 2: bad kernel name '1k'", NULL);
  expect_bad_meta("tile-kernel 1\nname\nwarps 4\nshared 0\nend\n", "line 2: expected 'name KERNEL'", NULL);
}

/* ---- check_args -------------------------------------------------------- */

Test(check_args, correct_call_passes) {
  tile_arg args[] = {tile_arg_ptr(0x7f0000001000), tile_arg_ptr(0x7f0000002000), tile_arg_i32(4096),
                     tile_arg_i32(4096)};
  char msg[MSG_SIZE] = "";
  cr_expect_eq(check_softmax((const uint32_t[3]){1024, 1, 1}, args, 4, msg), TILE_OK, "%s", msg);
  tile_arg wide[10];
  wide_args(wide);
  tile_kernel_info *info = parse_ok(wide_meta);
  cr_expect_eq(tile_check_args(info, (const uint32_t[3]){2147483647u, 65535, 65535}, wide, 10, msg, sizeof msg),
               TILE_OK, "%s", msg);
  tile_meta_free(info);
}

Test(check_args, count_mismatch) {
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_i32(16)};
  char msg[MSG_SIZE] = "";
  cr_expect_eq(check_softmax(grid1, args, 3, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "kernel 'softmax' takes 4 arguments, got 3");
}

Test(check_args, pointer_for_integer) {
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_ptr(0x3000), tile_arg_i32(1)};
  char msg[MSG_SIZE] = "";
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 2 'n' of kernel 'softmax': expected i32, got a pointer");
}

Test(check_args, integer_for_pointer) {
  tile_arg args[] = {tile_arg_i64(0x1000), tile_arg_ptr(0x2000), tile_arg_i32(16), tile_arg_i32(1)};
  char msg[MSG_SIZE] = "";
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 0 'out' of kernel 'softmax': expected a pointer to f32, got an integer");
}

Test(check_args, float_for_integer_and_integer_for_float) {
  char msg[MSG_SIZE] = "";
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_f32(16.0f), tile_arg_i32(1)};
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 2 'n' of kernel 'softmax': expected i32, got a float");
  expect_wide(6, tile_arg_i32(1), "argument 6 'f' of kernel 'wide': expected f32, got an integer");
}

Test(check_args, integer_ranges) {
  expect_wide(1, tile_arg_i32(127), "");
  expect_wide(1, tile_arg_i32(128), "value 128 is out of range for i8 [-128, 127]");
  expect_wide(1, tile_arg_i32(-129), "value -129 is out of range for i8");
  expect_wide(2, tile_arg_i32(-1), "value -1 is out of range for u32 [0, 4294967295]");
  expect_wide(2, tile_arg_u64(4294967296u), "value 4294967296 is out of range for u32");
  expect_wide(2, tile_arg_i64(4294967295), "");
  expect_wide(3, tile_arg_u64(9223372036854775808u), "value 9223372036854775808 is out of range for i64");
  expect_wide(4, tile_arg_i64(-1), "value -1 is out of range for u64");
  expect_wide(9, tile_arg_i32(2), "value 2 is out of range for i1 [0, 1]");
  expect_wide(9, tile_arg_u32(0), "");
}

Test(check_args, i32_range) {
  char msg[MSG_SIZE] = "";
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_i32(16), tile_arg_i64(2147483648)};
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 3 'stride' of kernel 'softmax': value 2147483648 is out of range for i32 "
                        "[-2147483648, 2147483647]");
  args[3] = tile_arg_i64(INT32_MIN);
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_OK, "%s", msg);
}

Test(check_args, misaligned_pointer) {
  char msg[MSG_SIZE] = "";
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2008), tile_arg_i32(16), tile_arg_i32(1)};
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 1 'x' of kernel 'softmax': pointer 0x2008 is not aligned to 16 bytes (the kernel "
                        "was compiled for 'x align 16')");
  args[1] = tile_arg_ptr(0x2010);
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_OK, "%s", msg);
  args[1] = tile_arg_ptr(0); /* NULL is aligned; the kernel may not use it */
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_OK, "%s", msg);
}

Test(check_args, pointer_not_aligned_to_its_element) {
  expect_wide(0, tile_arg_ptr(0x10001), "pointer 0x10001 is not aligned to 2 bytes (the size of bf16)");
  expect_wide(0, tile_arg_ptr(0x10002), "");
}

Test(check_args, multiple_of_violated) {
  char msg[MSG_SIZE] = "";
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_i32(100), tile_arg_i32(1)};
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 2 'n' of kernel 'softmax': value 100 is not a multiple of 16 (the kernel was "
                        "compiled for 'n multiple_of 16')");
  args[2] = tile_arg_i32(-32);
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_OK, "%s", msg);
  args[2] = tile_arg_u32(48);
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_OK, "%s", msg);
  args[2] = tile_arg_u32(40);
  cr_expect_eq(check_softmax(grid1, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
}

Test(check_args, zero_grid) {
  char msg[MSG_SIZE] = "";
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_i32(16), tile_arg_i32(1)};
  cr_expect_eq(check_softmax((const uint32_t[3]){0, 1, 1}, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "grid (0, 1, 1) of kernel 'softmax': size in x is 0, must be at least 1");
  cr_expect_eq(check_softmax((const uint32_t[3]){8, 1, 0}, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(msg, "size in z is 0");
}

Test(check_args, grid_above_cuda_limits) {
  char msg[MSG_SIZE] = "";
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_i32(16), tile_arg_i32(1)};
  cr_expect_eq(check_softmax((const uint32_t[3]){1, 65536, 1}, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "grid (1, 65536, 1) of kernel 'softmax': size in y is 65536, above the device limit 65535");
  cr_expect_eq(check_softmax((const uint32_t[3]){2147483648u, 1, 1}, args, 4, msg), TILE_ERROR_INVALID_ARGUMENT);
}

Test(check_args, float_ranges) {
  expect_wide(5, tile_arg_f64(65504.0), "");
  expect_wide(5, tile_arg_f64(65520.0), "value 65520 is out of range for f16");
  expect_wide(5, tile_arg_f64(-1e6), "out of range for f16");
  expect_wide(5, tile_arg_f64(INFINITY), "");
  expect_wide(6, tile_arg_f64(1e39), "value 1e+39 is out of range for f32");
  expect_wide(6, tile_arg_f64(3.4028234663852886e38), "");
  expect_wide(6, tile_arg_f64(NAN), "");
}

Test(check_args, descriptor_expected) {
  expect_wide(8, tile_arg_ptr(0x1000),
              "argument 8 'q' of kernel 'wide': expected a tensor descriptor of bf16 (rank 2), got a pointer");
  expect_wide(8, tile_arg_desc(NULL), "argument 8 'q' of kernel 'wide': the tensor descriptor pointer is NULL");
  expect_wide(0, tile_arg_desc(fake_tensor_map), "expected a pointer to bf16, got a tensor descriptor");
}

Test(check_args, unknown_argument_kind) {
  tile_arg bad = tile_arg_i32(1);
  bad.kind = (tile_arg_kind)77;
  expect_wide(1, bad, "expected i8, got an argument of unknown kind");
}

Test(check_args, bad_calls_and_small_buffers) {
  tile_kernel_info *info = parse_ok(softmax_meta);
  char msg[MSG_SIZE] = "";
  cr_expect_eq(tile_check_args(NULL, grid1, NULL, 0, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "tile_check_args: info is NULL");
  cr_expect_eq(tile_check_args(info, NULL, NULL, 0, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(tile_check_args(info, grid1, NULL, 4, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "tile_check_args: args is NULL");
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_ptr(0x2000), tile_arg_ptr(0x3000), tile_arg_i32(1)};
  cr_expect_eq(tile_check_args(info, grid1, args, 4, NULL, 0), TILE_ERROR_INVALID_ARGUMENT);
  char tiny[8];
  cr_expect_eq(tile_check_args(info, grid1, args, 4, tiny, sizeof tiny), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(tiny, "argumen");
  tile_meta_free(info);
}

/* tile_check_args also takes a tile_kernel_info a program filled in: the
 * fields the checks index with or divide by are checked, not trusted. */
Test(check_args, inconsistent_hand_made_info) {
  tile_param_info p = {.name = "n", .kind = TILE_PARAM_INT, .elem = "i32", .dtype = TILE_DTYPE_I32, .elem_bytes = 4};
  tile_kernel_info info = {.name = "k", .warps = 1, .threads = 32, .nparams = 1, .params = &p};
  tile_arg a = tile_arg_i32(INT32_MIN);
  char msg[MSG_SIZE] = "";
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_OK, "%s", msg);
  p.dtype = TILE_DTYPE_F32; /* an integer parameter of a float type: int_ranges has no entry */
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "parameter 0 of kernel 'k': inconsistent tile_param_info (an integer parameter has a "
                        "non-integer dtype)");
  p.dtype = (tile_dtype)99;
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(msg, "its dtype is not a tile_dtype");
  p.dtype = TILE_DTYPE_I32;
  p.multiple_of = -1; /* INT32_MIN % -1 */
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(msg, "its multiple_of is negative");
  tile_param_info q = {.name = "p", .kind = TILE_PARAM_PTR, .elem = "f32", .dtype = TILE_DTYPE_F32};
  info.params = &q; /* elem_bytes 0: the alignment check would divide by it */
  a = tile_arg_ptr(0x1000);
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(msg, "its elem_bytes is not 1 to 8");
  tile_param_info d = {.name = "d", .kind = TILE_PARAM_DESC, .elem = "f32", .dtype = TILE_DTYPE_F32, .elem_bytes = 4};
  info.params = &d; /* desc_rank 0: box[desc_rank - 1] */
  a = tile_arg_desc(fake_tensor_map);
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(msg, "its desc_rank is not 1 to 4");
  info.params = NULL;
  cr_expect_eq(tile_check_args(&info, grid1, &a, 1, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "tile_check_args: info->params is NULL");
}

Test(check_args, leaves_last_error_alone) {
  tile_meta_parse(NULL, &(tile_kernel_info *){NULL});
  tile_kernel_info *info = parse_ok(softmax_meta);
  char msg[MSG_SIZE] = "";
  cr_expect_eq(tile_check_args(info, grid1, NULL, 0, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "text is NULL");
  tile_meta_free(info);
}

/* ---- check_args: tensors ----------------------------------------------- */

/* A GEMM-like kernel with descriptor parameters of 2- and 1-byte elements. */
static const char gemm_meta[] = "tile-kernel 1\n"
                                "name gemm\n"
                                "warps 4\n"
                                "shared 0\n"
                                "param c ptr f32 align 16\n"
                                "param a desc bf16 2 box 64 64 swizzle 128\n"
                                "param b desc f8e4m3 3 box 2 64 128 swizzle 128\n"
                                "param n i32\n"
                                "end\n";

/* A valid bf16 matrix of 1000 x 4096 for 'a'. */
static tile_tensor matrix_a(void) {
  return (tile_tensor){.ptr = 0x7f0000000000, .rank = 2, .shape = {1000, 4096}, .strides = {4096, 1}};
}

/* A valid f8e4m3 tensor of 4 x 100 x 256 (rows padded to 272) for 'b'. */
static tile_tensor tensor_b(void) {
  return (tile_tensor){.ptr = 0x7f0000100000, .rank = 3, .shape = {4, 100, 256}, .strides = {27200, 272, 1}};
}

/* Checks gemm_meta (or text, with the same parameters) with a and b as
 * given; "" expects success, else the message must contain part. */
static void expect_tensor_args(const char *text, tile_arg a, tile_arg b, const char *part) {
  tile_arg args[] = {tile_arg_ptr(0x1000), a, b, tile_arg_i32(64)};
  expect_check(text ? text : gemm_meta, args, 4, part, false);
}

/* Checks gemm_meta with t as argument index (1: 'a', 2: 'b') and the valid
 * tensor for the other: "" expects success, else the message contains
 * part (or is it, if exact). */
static void expect_tensor(int index, tile_tensor t, const char *part, bool exact) {
  tile_tensor a = index == 1 ? t : matrix_a(), b = index == 2 ? t : tensor_b();
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_tensor(&a), tile_arg_tensor(&b), tile_arg_i32(64)};
  expect_check(gemm_meta, args, 4, part, exact);
}

static tile_tensor valid_tensor(int index) { return index == 1 ? matrix_a() : tensor_b(); }

/* The valid tensor for argument index with one thing changed. */
static void expect_base(int index, uint64_t ptr, const char *part, bool exact) {
  tile_tensor t = valid_tensor(index);
  t.ptr = ptr;
  expect_tensor(index, t, part, exact);
}

static void expect_size(int index, int dim, int64_t size, const char *part) {
  tile_tensor t = valid_tensor(index);
  t.shape[dim] = size;
  expect_tensor(index, t, part, false);
}

static void expect_stride(int index, int dim, int64_t stride, const char *part, bool exact) {
  tile_tensor t = valid_tensor(index);
  t.strides[dim] = stride;
  expect_tensor(index, t, part, exact);
}

Test(check_tensor, accepted) {
  expect_tensor(1, matrix_a(), "", false);
  expect_tensor(2, tensor_b(), "", false);
  /* smaller than the box: TMA fills the rest with zeros */
  expect_tensor(1, (tile_tensor){.ptr = 0x10000, .rank = 2, .shape = {1, 1}, .strides = {8, 1}}, "", false);
  /* an encoded map is still accepted for a descriptor parameter */
  tile_tensor b = tensor_b();
  expect_tensor_args(NULL, tile_arg_desc(fake_tensor_map), tile_arg_tensor(&b), "");
}

Test(check_tensor, null_description) {
  tile_tensor b = tensor_b();
  expect_tensor_args(NULL, tile_arg_tensor(NULL), tile_arg_tensor(&b),
                     "argument 1 'a' of kernel 'gemm': the tile_tensor pointer is NULL");
}

Test(check_tensor, rank_mismatch) {
  expect_tensor(1, tensor_b(),
                "argument 1 'a' of kernel 'gemm': tensor of rank 3 for a parameter of rank 2 (tensor<bf16, 2>)", true);
  tile_tensor a = matrix_a();
  a.rank = 0;
  expect_tensor(1, a, "tensor of rank 0 for a parameter of rank 2", false);
  a.rank = 99;
  expect_tensor(1, a, "tensor of rank 99 for a parameter of rank 2", false);
}

Test(check_tensor, misaligned_or_null_base) {
  expect_base(1, 0x7f0000000008,
              "argument 1 'a' of kernel 'gemm': tensor base 0x7f0000000008 is not aligned to 16 bytes (TMA needs a "
              "16-byte aligned base)",
              true);
  expect_base(1, 0x7f0000000010, "", false);
  expect_base(1, 0, "argument 1 'a' of kernel 'gemm': tensor base is 0 (a NULL device pointer)", false);
  /* 1-byte elements need the 16-byte base too */
  expect_base(2, 0x7f0000100001, "argument 2 'b' of kernel 'gemm': tensor base 0x7f0000100001 is not aligned", false);
}

Test(check_tensor, stride_not_a_multiple_of_16_bytes) {
  expect_stride(1, 0, 100,
                "argument 1 'a' of kernel 'gemm': stride of dimension 0 is 100 elements (200 bytes), not a multiple "
                "of 16 bytes",
                true);
  expect_stride(1, 0, 104, "", false); /* 208 bytes */
  expect_stride(2, 1, 288, "", false); /* 288 bytes of f8 */
  expect_stride(2, 1, 260,
                "argument 2 'b' of kernel 'gemm': stride of dimension 1 is 260 elements (260 bytes), not a multiple "
                "of 16 bytes",
                true);
  /* broadcast rows are rejected: strides are at least 1 */
  expect_stride(1, 0, 0, "stride of dimension 0 is 0 elements, must be at least 1", false);
  expect_stride(2, 0, -27200, "stride of dimension 0 is -27200 elements, must be at least 1", false);
}

Test(check_tensor, last_stride_not_1) {
  expect_stride(1, 1, 2,
                "argument 1 'a' of kernel 'gemm': stride of dimension 1 is 2 elements, must be 1 (TMA needs the last "
                "dimension contiguous)",
                true);
  expect_stride(2, 2, 0, "stride of dimension 2 is 0 elements, must be 1", false);
}

Test(check_tensor, stride_too_large) {
  /* 2^39 bf16 elements are 2^40 bytes */
  expect_stride(1, 0, INT64_C(1) << 39,
                "argument 1 'a' of kernel 'gemm': stride of dimension 0 is 549755813888 elements of bf16, not below "
                "2^40 bytes (the TMA limit)",
                true);
  expect_stride(1, 0, (INT64_C(1) << 39) - 8, "", false); /* 2^40 - 16 bytes */
  expect_stride(1, 0, INT64_MAX, "not below 2^40 bytes", false);
}

Test(check_tensor, sizes_out_of_range) {
  expect_size(1, 0, (INT64_C(1) << 32) + 1,
              "argument 1 'a' of kernel 'gemm': size of dimension 0 is 4294967297, must be from 1 to 2^32");
  expect_size(1, 0, INT64_C(1) << 32, "");
  expect_size(1, 1, 0, "size of dimension 1 is 0, must be from 1 to 2^32");
  expect_size(2, 2, -5, "argument 2 'b' of kernel 'gemm': size of dimension 2 is -5");
}

Test(check_tensor, box_too_large_for_the_swizzle) {
  const char *text = "tile-kernel 1\nname k\nwarps 4\nshared 0\nparam c ptr f32\n"
                     "param a desc bf16 2 box 64 128 swizzle 128\nparam b desc f8e4m3 3 box 2 64 128\n"
                     "param n i32\nend\n";
  tile_tensor a = matrix_a(), b = tensor_b();
  expect_tensor_args(text, tile_arg_tensor(&a), tile_arg_tensor(&b),
                     "argument 1 'a' of kernel 'k': the kernel's box 64 x 128 has an inner dimension of 256 bytes (128 "
                     "x bf16), more than its 128-byte swizzle span");
  text = "tile-kernel 1\nname k\nwarps 4\nshared 0\nparam c ptr f32\n"
         "param a desc bf16 2 box 64 32 swizzle 32\nparam b desc f8e4m3 3 box 2 64 128\nparam n i32\nend\n";
  expect_tensor_args(text, tile_arg_tensor(&a), tile_arg_tensor(&b), "inner dimension of 64 bytes (32 x bf16), more "
                                                                     "than its 32-byte swizzle span");
  /* without a swizzle a wide box is fine: 256 bf16 = 512 bytes */
  text = "tile-kernel 1\nname k\nwarps 4\nshared 0\nparam c ptr f32\n"
         "param a desc bf16 2 box 8 256\nparam b desc f8e4m3 3 box 2 64 128\nparam n i32\nend\n";
  expect_tensor_args(text, tile_arg_tensor(&a), tile_arg_tensor(&b), "");
}

Test(check_tensor, box_not_a_multiple_of_16_bytes) {
  const char *text = "tile-kernel 1\nname k\nwarps 4\nshared 0\nparam c ptr f32\n"
                     "param a desc bf16 2 box 64 4\nparam b desc f8e4m3 3 box 2 64 8\nparam n i32\nend\n";
  tile_tensor a = matrix_a(), b = tensor_b();
  expect_tensor_args(text, tile_arg_tensor(&a), tile_arg_tensor(&b),
                     "argument 1 'a' of kernel 'k': the kernel's box 64 x 4 has an inner dimension of 8 bytes (4 x "
                     "bf16), not a multiple of 16 bytes");
  expect_tensor_args(text, tile_arg_desc(fake_tensor_map), tile_arg_tensor(&b),
                     "argument 2 'b' of kernel 'k': the kernel's box 2 x 64 x 8 has an inner dimension of 8 bytes");
}

Test(check_tensor, box_dimension_above_256) {
  /* The parser rejects such a box; a hand-made tile_kernel_info may not. */
  tile_kernel_info *info = parse_ok(gemm_meta);
  ((tile_param_info *)info->params)[1].box[0] = 300;
  tile_tensor a = matrix_a(), b = tensor_b();
  tile_arg args[] = {tile_arg_ptr(0x1000), tile_arg_tensor(&a), tile_arg_tensor(&b), tile_arg_i32(64)};
  char msg[MSG_SIZE] = "";
  cr_expect_eq(tile_check_args(info, grid1, args, 4, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(msg, "argument 1 'a' of kernel 'gemm': the kernel's box 300 x 64 has dimension 0 of 300 elements, "
                        "TMA allows 1 to 256");
  tile_meta_free(info);
}

Test(check_tensor, wrong_kinds) {
  tile_tensor a = matrix_a(), b = tensor_b();
  expect_tensor_args(NULL, tile_arg_ptr(0x7f0000000000), tile_arg_tensor(&b),
                     "argument 1 'a' of kernel 'gemm': expected a tensor descriptor of bf16 (rank 2), got a pointer");
  expect_wide(0, tile_arg_tensor(&a), "argument 0 'p' of kernel 'wide': expected a pointer to bf16, got a tensor");
  expect_wide(3, tile_arg_tensor(&a), "expected i64, got a tensor");
}

/* ---- tensor maps: the encoder and the cache ----------------------------- */

/* What the fake encoder was given, for one call. */
typedef struct encode_call {
  CUtensorMapDataType dtype;
  cuuint32_t rank;
  uint64_t address;
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], element_strides[5];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2;
  CUtensorMapFloatOOBfill oob;
} encode_call;

/* The fake encoder's record; each Criterion test runs in a process of its
 * own, so these start at zero in every test. The mutex is for the threads
 * test. */
static pthread_mutex_t fake_mutex = PTHREAD_MUTEX_INITIALIZER;
static int fake_calls, fake_misaligned_maps;
static encode_call fake_last;
static CUresult fake_result = CUDA_SUCCESS;

/* Records its arguments and writes a map that identifies them: the
 * address, the dimensions and the number of the call. */
static CUresult fake_encode(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *address,
                            const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                            const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
                            CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  pthread_mutex_lock(&fake_mutex);
  int call = ++fake_calls;
  encode_call c = {dtype, rank, (uint64_t)(uintptr_t)address, {0}, {0}, {0}, {0}, interleave, swizzle, l2, oob};
  for (cuuint32_t i = 0; i < rank && i < 5; i++) {
    c.dims[i] = dims[i];
    c.box[i] = box[i];
    c.element_strides[i] = element_strides[i];
    if (i + 1 < rank) c.strides[i] = strides[i];
  }
  fake_last = c;
  if ((uintptr_t)map % 64 != 0) fake_misaligned_maps++; /* the driver wants 64-byte alignment */
  pthread_mutex_unlock(&fake_mutex);
  if (fake_result != CUDA_SUCCESS) return fake_result;
  map->opaque[0] = (uint64_t)(uintptr_t)address;
  for (cuuint32_t i = 0; i < rank; i++) map->opaque[1 + i] = dims[i];
  map->opaque[15] = (uint64_t)call;
  return CUDA_SUCCESS;
}

static CUresult fake_error_name(CUresult r, const char **name) {
  *name = r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_SOMETHING";
  return CUDA_SUCCESS;
}

static tilert_tmap_cache *fake_cache(void) {
  tilert_tmap_cache *c = NULL;
  cr_assert_eq(tilert_tmap_cache_create(&tilert_default_allocator, fake_encode, fake_error_name, &c), TILE_OK);
  return c;
}

/* The map for t as argument index, which must succeed. */
static void get_map(tilert_tmap_cache *c, const tile_kernel_info *info, int index, const tile_tensor *t,
                    uint64_t map[16]) {
  tile_status st = tilert_tmap_get(c, info, index, t, map);
  cr_assert_eq(st, TILE_OK, "tilert_tmap_get: %s", tile_last_error());
}

Test(tensor_map, encoder_gets_reversed_dims_and_byte_strides) {
  tile_kernel_info *info = parse_ok("tile-kernel 1\nname k\nwarps 4\nshared 0\n"
                                    "param x desc f16 3 box 1 32 64 swizzle 128\nend\n");
  tilert_tmap_cache *c = fake_cache();
  tile_tensor t = {.ptr = 0x7f0000200000, .rank = 3, .shape = {8, 1000, 256}, .strides = {512000, 512, 1}};
  uint64_t map[16];
  get_map(c, info, 0, &t, map);
  cr_expect_eq(fake_calls, 1);
  encode_call e = fake_last;
  cr_expect_eq(e.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  cr_expect_eq(e.rank, 3);
  cr_expect_eq(e.address, 0x7f0000200000u);
  cr_expect(e.dims[0] == 256 && e.dims[1] == 1000 && e.dims[2] == 8, "dims %llu %llu %llu",
            (unsigned long long)e.dims[0], (unsigned long long)e.dims[1], (unsigned long long)e.dims[2]);
  cr_expect(e.strides[0] == 1024 && e.strides[1] == 1024000, "strides %llu %llu", (unsigned long long)e.strides[0],
            (unsigned long long)e.strides[1]);
  cr_expect(e.box[0] == 64 && e.box[1] == 32 && e.box[2] == 1, "box %u %u %u", e.box[0], e.box[1], e.box[2]);
  cr_expect(e.element_strides[0] == 1 && e.element_strides[1] == 1 && e.element_strides[2] == 1);
  cr_expect_eq(e.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
  cr_expect_eq(e.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  cr_expect_eq(e.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  cr_expect_eq(e.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  cr_expect(map[0] == 0x7f0000200000u && map[1] == 256 && map[3] == 8 && map[15] == 1,
            "the encoded map was not copied");
  cr_expect_eq(fake_misaligned_maps, 0);
  tilert_tmap_cache_destroy(c);
  tile_meta_free(info);
}

Test(tensor_map, rank_1_has_no_strides) {
  tile_kernel_info *info = parse_ok("tile-kernel 1\nname k\nwarps 4\nshared 0\nparam x desc f32 1 box 128\nend\n");
  tilert_tmap_cache *c = fake_cache();
  tile_tensor t = {.ptr = 0x10000, .rank = 1, .shape = {5000}, .strides = {1}};
  uint64_t map[16];
  get_map(c, info, 0, &t, map);
  cr_expect(fake_last.rank == 1 && fake_last.dims[0] == 5000 && fake_last.box[0] == 128);
  cr_expect_eq(fake_last.swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
  cr_expect_eq(fake_last.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  tilert_tmap_cache_destroy(c);
  tile_meta_free(info);
}

Test(tensor_map, data_types_and_swizzles) {
  static const struct {
    const char *elem;
    CUtensorMapDataType type;
  } types[] = {{"u8", CU_TENSOR_MAP_DATA_TYPE_UINT8},        {"i8", CU_TENSOR_MAP_DATA_TYPE_UINT8},
               {"f8e4m3", CU_TENSOR_MAP_DATA_TYPE_UINT8},    {"f8e5m2", CU_TENSOR_MAP_DATA_TYPE_UINT8},
               {"u16", CU_TENSOR_MAP_DATA_TYPE_UINT16},      {"i16", CU_TENSOR_MAP_DATA_TYPE_UINT16},
               {"f16", CU_TENSOR_MAP_DATA_TYPE_FLOAT16},     {"bf16", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16},
               {"f32", CU_TENSOR_MAP_DATA_TYPE_FLOAT32},     {"f64", CU_TENSOR_MAP_DATA_TYPE_FLOAT64},
               {"i32", CU_TENSOR_MAP_DATA_TYPE_INT32},       {"u32", CU_TENSOR_MAP_DATA_TYPE_UINT32},
               {"i64", CU_TENSOR_MAP_DATA_TYPE_INT64},       {"u64", CU_TENSOR_MAP_DATA_TYPE_UINT64}};
  static const struct {
    int bytes;
    CUtensorMapSwizzle mode;
  } swizzles[] = {{0, CU_TENSOR_MAP_SWIZZLE_NONE},
                  {32, CU_TENSOR_MAP_SWIZZLE_32B},
                  {64, CU_TENSOR_MAP_SWIZZLE_64B},
                  {128, CU_TENSOR_MAP_SWIZZLE_128B}};
  tile_tensor t = {.ptr = 0x10000, .rank = 2, .shape = {64, 64}, .strides = {64, 1}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    char text[256];
    snprintf(text, sizeof text,
             "tile-kernel 1\nname k\nwarps 4\nshared 0\nparam x desc %s 2 box 8 16 swizzle %d\nend\n", types[i].elem,
             swizzles[i % 4].bytes);
    tile_kernel_info *info = parse_ok(text);
    tilert_tmap_cache *c = fake_cache();
    uint64_t map[16];
    get_map(c, info, 0, &t, map);
    cr_expect_eq(fake_last.dtype, types[i].type, "%s: data type %d", types[i].elem, (int)fake_last.dtype);
    cr_expect_eq(fake_last.swizzle, swizzles[i % 4].mode, "swizzle %d: mode %d", swizzles[i % 4].bytes,
                 (int)fake_last.swizzle);
    cr_expect_eq(fake_last.strides[0], 64u * (cuuint64_t)info->params[0].elem_bytes, "%s: stride bytes",
                 types[i].elem);
    tilert_tmap_cache_destroy(c);
    tile_meta_free(info);
  }
}

/* The tests of the cache with gemm_meta: its info and a cache with the
 * fake encoder, made before each test and freed after it. */
static tile_kernel_info *gemm_info;
static tilert_tmap_cache *gemm_cache;

static void gemm_cache_setup(void) {
  gemm_info = parse_ok(gemm_meta);
  gemm_cache = fake_cache();
}

static void gemm_cache_teardown(void) {
  tilert_tmap_cache_destroy(gemm_cache);
  tile_meta_free(gemm_info);
}

Test(tensor_map, hits_do_not_reencode, .init = gemm_cache_setup, .fini = gemm_cache_teardown) {
  tile_tensor a = matrix_a();
  uint64_t first[16], again[16];
  get_map(gemm_cache, gemm_info, 1, &a, first);
  for (int i = 0; i < 100; i++) get_map(gemm_cache, gemm_info, 1, &a, again);
  cr_expect_eq(fake_calls, 1, "a repeated tensor was encoded %d times", fake_calls);
  cr_expect(memcmp(first, again, sizeof first) == 0, "the cached map differs from the encoded one");
  tile_tensor copy = a; /* the key is the value, not the tile_tensor's address */
  get_map(gemm_cache, gemm_info, 1, &copy, again);
  cr_expect_eq(fake_calls, 1);
}

Test(tensor_map, different_tensors_reencode, .init = gemm_cache_setup, .fini = gemm_cache_teardown) {
  uint64_t map[16];
  tile_tensor a = matrix_a();
  get_map(gemm_cache, gemm_info, 1, &a, map);
  tile_tensor other_ptr = a, other_shape = a, other_stride = a;
  other_ptr.ptr += 4096;
  other_shape.shape[0] = 999;
  other_stride.strides[0] = 4104;
  get_map(gemm_cache, gemm_info, 1, &other_ptr, map);
  cr_expect_eq(fake_calls, 2, "a new pointer must be encoded");
  cr_expect_eq(map[0], other_ptr.ptr);
  get_map(gemm_cache, gemm_info, 1, &other_shape, map);
  cr_expect_eq(fake_calls, 3, "a new shape must be encoded");
  cr_expect_eq(map[2], 999u, "dims[1] (dimension 0) of the new map");
  get_map(gemm_cache, gemm_info, 1, &other_stride, map);
  cr_expect_eq(fake_calls, 4, "new strides must be encoded");
  cr_expect_eq(fake_last.strides[0], 8208u);
  /* the same tensor for another parameter is another map (another box) */
  tile_kernel_info *two = parse_ok("tile-kernel 1\nname k\nwarps 4\nshared 0\nparam x desc bf16 2 box 64 64 "
                                   "swizzle 128\nparam y desc bf16 2 box 128 64 swizzle 128\nend\n");
  tilert_tmap_cache *c2 = fake_cache();
  get_map(c2, two, 0, &a, map);
  get_map(c2, two, 1, &a, map);
  cr_expect_eq(fake_calls, 6);
  cr_expect_eq(fake_last.box[1], 128u);
  get_map(c2, two, 0, &a, map);
  get_map(c2, two, 1, &a, map);
  cr_expect_eq(fake_calls, 6, "both maps should be cached");
  /* every earlier tensor is still cached */
  get_map(gemm_cache, gemm_info, 1, &a, map);
  get_map(gemm_cache, gemm_info, 1, &other_ptr, map);
  get_map(gemm_cache, gemm_info, 1, &other_shape, map);
  get_map(gemm_cache, gemm_info, 1, &other_stride, map);
  cr_expect_eq(fake_calls, 6);
  tilert_tmap_cache_destroy(c2);
  tile_meta_free(two);
}

Test(tensor_map, least_recently_used_is_evicted, .init = gemm_cache_setup, .fini = gemm_cache_teardown) {
  uint64_t map[16];
  tile_tensor t[TILE_TMAP_CACHE_ENTRIES + 1];
  for (int i = 0; i <= TILE_TMAP_CACHE_ENTRIES; i++) {
    t[i] = matrix_a();
    t[i].ptr += (uint64_t)i * 0x100000;
  }
  for (int i = 0; i < TILE_TMAP_CACHE_ENTRIES; i++) get_map(gemm_cache, gemm_info, 1, &t[i], map);
  cr_expect_eq(fake_calls, TILE_TMAP_CACHE_ENTRIES);
  /* t[0] is now the oldest */
  for (int i = 1; i < TILE_TMAP_CACHE_ENTRIES; i++) get_map(gemm_cache, gemm_info, 1, &t[i], map);
  cr_expect_eq(fake_calls, TILE_TMAP_CACHE_ENTRIES, "a full table should still hit");
  get_map(gemm_cache, gemm_info, 1, &t[TILE_TMAP_CACHE_ENTRIES], map); /* evicts t[0] */
  cr_expect_eq(fake_calls, TILE_TMAP_CACHE_ENTRIES + 1);
  for (int i = 1; i <= TILE_TMAP_CACHE_ENTRIES; i++) get_map(gemm_cache, gemm_info, 1, &t[i], map);
  cr_expect_eq(fake_calls, TILE_TMAP_CACHE_ENTRIES + 1, "only the least recently used map should go");
  get_map(gemm_cache, gemm_info, 1, &t[0], map); /* re-encoded, evicting t[1] */
  cr_expect_eq(fake_calls, TILE_TMAP_CACHE_ENTRIES + 2, "the evicted tensor must be encoded again");
  cr_expect_eq(map[0], t[0].ptr);
  get_map(gemm_cache, gemm_info, 1, &t[1], map);
  cr_expect_eq(fake_calls, TILE_TMAP_CACHE_ENTRIES + 3);
}

Test(tensor_map, encoder_error_names_every_value, .init = gemm_cache_setup, .fini = gemm_cache_teardown) {
  fake_result = CUDA_ERROR_INVALID_VALUE;
  tile_tensor a = matrix_a();
  uint64_t map[16];
  cr_expect_eq(tilert_tmap_get(gemm_cache, gemm_info, 1, &a, map), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_str_eq(tile_last_error(),
                   "argument 1 'a' of kernel 'gemm': cuTensorMapEncodeTiled failed with CUDA_ERROR_INVALID_VALUE (1): "
                   "data type BFLOAT16, rank 2, address 0x7f0000000000, dims [4096, 1000], strides [8192] bytes, box "
                   "[64, 64], element strides [1, 1], interleave NONE, swizzle 128B, L2 promotion 128B, OOB fill NONE "
                   "(arrays innermost dimension first)");
  cr_expect_eq(tilert_tmap_get(gemm_cache, gemm_info, 1, &a, map), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(fake_calls, 2, "a failed encode must not be cached");
  fake_result = CUDA_SUCCESS;
  get_map(gemm_cache, gemm_info, 1, &a, map);
  get_map(gemm_cache, gemm_info, 1, &a, map);
  cr_expect_eq(fake_calls, 3);
}

Test(tensor_map, driver_without_an_encoder) {
  tile_kernel_info *info = parse_ok(gemm_meta);
  tilert_tmap_cache *c = NULL;
  cr_assert_eq(tilert_tmap_cache_create(&tilert_default_allocator, NULL, NULL, &c), TILE_OK);
  tile_tensor a = matrix_a();
  uint64_t map[16];
  cr_expect_eq(tilert_tmap_get(c, info, 1, &a, map), TILE_ERROR_UNSUPPORTED);
  expect_contains(tile_last_error(), "argument 1 'a' of kernel 'gemm': this CUDA driver has no cuTensorMapEncodeTiled");
  tilert_tmap_cache_destroy(c);
  tilert_tmap_cache_destroy(NULL);
  cr_expect(tilert_has_desc_params(info));
  tile_kernel_info *plain = parse_ok(softmax_meta);
  cr_expect_not(tilert_has_desc_params(plain));
  tile_meta_free(plain);
  tile_meta_free(info);
}

Test(tensor_map, packed_into_the_64_byte_slot) {
  tile_kernel_info *info = parse_ok("tile-kernel 1\nname k\nwarps 4\nshared 0\nparam n i32\n"
                                    "param a desc bf16 2 box 64 64 swizzle 128\nparam x f32\n"
                                    "param b desc bf16 2 box 64 64 swizzle 128\nend\n");
  tilert_param_slot slots[4];
  cr_assert_eq(tilert_layout_params(info, slots), TILE_OK);
  cr_expect(slots[0].offset == 0 && slots[1].offset == 64 && slots[2].offset == 192 && slots[3].offset == 256,
            "offsets %u %u %u %u", slots[0].offset, slots[1].offset, slots[2].offset, slots[3].offset);
  cr_expect_eq(slots[1].size, TILE_DESC_BYTES);
  tilert_tmap_cache *c = fake_cache();
  _Alignas(TILE_DESC_ALIGN) unsigned char buf[TILE_MAX_PARAM_BYTES];
  void *params[4];
  memset(buf, 0xee, sizeof buf);
  tile_tensor a = matrix_a();
  _Alignas(64) uint64_t encoded_b[16];
  for (int i = 0; i < 16; i++) encoded_b[i] = 0xb0b0b0b000000000u + (uint64_t)i;
  tile_arg args[] = {tile_arg_i32(7), tile_arg_tensor(&a), tile_arg_f32(2.5f), tile_arg_desc(encoded_b)};
  cr_assert_eq(tilert_pack_args(info, slots, c, args, buf, params), TILE_OK, "%s", tile_last_error());
  cr_expect(params[0] == buf && params[1] == buf + 64 && params[2] == buf + 192 && params[3] == buf + 256);
  cr_expect_eq((uintptr_t)params[1] % 64, 0u);
  uint64_t map[16];
  memcpy(map, buf + 64, sizeof map);
  cr_expect(map[0] == a.ptr && map[1] == 4096 && map[2] == 1000 && map[15] == 1, "the encoded map is not in the slot");
  cr_expect(memcmp(buf + 256, encoded_b, sizeof encoded_b) == 0, "the pre-encoded map is not in its slot");
  int32_t n;
  float x;
  memcpy(&n, buf, 4);
  memcpy(&x, buf + 192, 4);
  cr_expect(n == 7 && x == 2.5f);
  /* a second launch hits the cache and packs the same bytes */
  unsigned char again[TILE_MAX_PARAM_BYTES] __attribute__((aligned(64)));
  cr_assert_eq(tilert_pack_args(info, slots, c, args, again, params), TILE_OK);
  cr_expect(memcmp(again + 64, buf + 64, TILE_DESC_BYTES) == 0);
  cr_expect_eq(fake_calls, 1);
  /* an encoder failure fails the packing */
  tile_tensor other = a;
  other.ptr += 16;
  args[1] = tile_arg_tensor(&other);
  fake_result = CUDA_ERROR_INVALID_VALUE;
  cr_expect_eq(tilert_pack_args(info, slots, c, args, again, params), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "argument 1 'a' of kernel 'k': cuTensorMapEncodeTiled failed");
  tilert_tmap_cache_destroy(c);
  tile_meta_free(info);
}

/* Threads of the concurrency test, tensors each one cycles through, and
 * lookups per thread. */
#define TMAP_THREADS 8
#define TMAP_THREAD_TENSORS 6
#define TMAP_THREAD_LOOKUPS 2000

typedef struct tmap_job {
  tilert_tmap_cache *cache;
  const tile_kernel_info *info;
  int wrong;
} tmap_job;

static void *tmap_thread(void *arg) {
  tmap_job *job = arg;
  for (int i = 0; i < TMAP_THREAD_LOOKUPS; i++) {
    tile_tensor t = matrix_a();
    t.ptr += (uint64_t)(i % TMAP_THREAD_TENSORS) * 0x1000;
    t.shape[0] = 100 + i % TMAP_THREAD_TENSORS;
    uint64_t map[16];
    if (tilert_tmap_get(job->cache, job->info, 1, &t, map) != TILE_OK || map[0] != t.ptr ||
        map[2] != (uint64_t)t.shape[0])
      job->wrong++;
  }
  return NULL;
}

Test(tensor_map, threads_share_one_cache, .init = gemm_cache_setup, .fini = gemm_cache_teardown) {
  pthread_t threads[TMAP_THREADS];
  tmap_job jobs[TMAP_THREADS];
  for (int i = 0; i < TMAP_THREADS; i++) {
    jobs[i] = (tmap_job){gemm_cache, gemm_info, 0};
    cr_assert_eq(pthread_create(&threads[i], NULL, tmap_thread, &jobs[i]), 0);
  }
  int wrong = 0;
  for (int i = 0; i < TMAP_THREADS; i++) {
    pthread_join(threads[i], NULL);
    wrong += jobs[i].wrong;
  }
  cr_expect_eq(wrong, 0, "%d lookups returned a wrong map", wrong);
  /* each tensor is encoded at least once, and at most once per thread
   * (threads that miss together each encode it) */
  cr_expect(fake_calls >= TMAP_THREAD_TENSORS && fake_calls <= TMAP_THREADS * TMAP_THREAD_TENSORS, "%d encodes",
            fake_calls);
}

/* ---- half-precision packing -------------------------------------------- */

static uint16_t f16_reference(double x) {
  _Float16 h = (_Float16)x;
  uint16_t bits;
  memcpy(&bits, &h, sizeof bits);
  return bits;
}

Test(packing, f16_matches_the_compiler) {
  const double values[] = {0.0,
                           -0.0,
                           1.0,
                           -2.5,
                           0.1,
                           65504.0,
                           65519.99,
                           65520.0,
                           1e-5,
                           5.960464477539063e-08,
                           2.9802322387695312e-08,
                           2.98023223876953125e-08 * 1.0000001,
                           6.103515625e-05,
                           1.00048828125,
                           1.00146484375,
                           3.14159265358979,
                           -1e10,
                           INFINITY,
                           -INFINITY};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
    cr_expect_eq(tilert_f16_bits(values[i]), f16_reference(values[i]), "f16 of %.17g: 0x%04x, expected 0x%04x",
                 values[i], tilert_f16_bits(values[i]), f16_reference(values[i]));
  cr_expect_eq(tilert_f16_bits(NAN) & 0x7e00, 0x7e00, "NaN is not a quiet NaN");
}

/* Doubles spread over every exponent a half can round to (and beyond),
 * with random fractions, including exact halfway cases. */
Test(packing, f16_sweep_matches_the_compiler) {
  uint64_t state = 0x9e3779b97f4a7c15u;
  int wrong = 0;
  double first_wrong = 0;
  for (int i = 0; i < 200000; i++) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17; /* xorshift64 */
    uint64_t exp = 1023 - 30 + (state >> 58) % 48;                   /* 2^-30 .. 2^17 */
    uint64_t fraction = state & ((UINT64_C(1) << 52) - 1);
    if (i % 4 == 0) fraction &= ~((UINT64_C(1) << 41) - 1) | (UINT64_C(1) << 40); /* a tie for normals */
    uint64_t bits = (state & (UINT64_C(1) << 63)) | exp << 52 | fraction;
    double x;
    memcpy(&x, &bits, sizeof x);
    uint16_t got = tilert_f16_bits(x), want = f16_reference(x);
    if (got != want && wrong++ == 0) first_wrong = x;
  }
  cr_expect_eq(wrong, 0, "%d wrong f16 conversions, the first of %a: 0x%04x, expected 0x%04x", wrong, first_wrong,
               tilert_f16_bits(first_wrong), f16_reference(first_wrong));
}

Test(packing, bf16_rounds_to_nearest_even) {
  cr_expect_eq(tilert_bf16_bits(1.0), 0x3f80);
  cr_expect_eq(tilert_bf16_bits(-2.0), 0xc000);
  /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0). */
  cr_expect_eq(tilert_bf16_bits(1.00390625), 0x3f80);
  /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even. */
  cr_expect_eq(tilert_bf16_bits(1.01171875), 0x3f82);
  /* just above the first halfway point rounds up */
  cr_expect_eq(tilert_bf16_bits(1.0039063), 0x3f81);
  cr_expect_eq(tilert_bf16_bits(3.3895313892515355e38), 0x7f7f); /* largest finite */
  cr_expect_eq(tilert_bf16_bits(3.40e38), 0x7f80);               /* rounds to infinity */
  cr_expect_eq(tilert_bf16_bits(9.183549615799121e-41), 0x0001); /* smallest subnormal */
  cr_expect_eq(tilert_bf16_bits(0.0), 0x0000);
}
