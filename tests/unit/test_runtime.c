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
 *     name the argument;
 *   - the f16/bf16 rounding used to pack half-precision scalars.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tile.h"

/* Internal to libtile, declared here to test the packing of f16/bf16
 * scalar arguments (runtime/args.c). */
uint16_t tilert_f16_bits(double x);
uint16_t tilert_bf16_bits(double x);

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

/* Checks one changed argument of wide_meta; expect "" for success. */
static void expect_wide(int index, tile_arg arg, const char *part) {
  tile_kernel_info *info = parse_ok(wide_meta);
  tile_arg args[10];
  wide_args(args);
  args[index] = arg;
  char msg[MSG_SIZE] = "";
  tile_status st = tile_check_args(info, grid1, args, 10, msg, sizeof msg);
  if (!*part) {
    cr_expect_eq(st, TILE_OK, "unexpected failure: %s", msg);
  } else {
    cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "argument %d was accepted", index);
    expect_contains(msg, part);
  }
  tile_meta_free(info);
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

/* ---- metadata: malformed ----------------------------------------------- */

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
}

Test(meta_bad, consts) {
  expect_bad_body("const BLOCK i32 abc\nend\n", "bad value 'abc' for const 'BLOCK' of type i32", NULL);
  expect_bad_body("const T type float\nend\n", "bad value 'float' for const 'T'", NULL);
  expect_bad_body("const X q7 1\nend\n", "unknown type 'q7' of const 'X'", NULL);
  expect_bad_body("const X i32\nend\n", "expected 'const NAME TYPE VALUE'", NULL);
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

Test(check_args, leaves_last_error_alone) {
  tile_meta_parse(NULL, &(tile_kernel_info *){NULL});
  tile_kernel_info *info = parse_ok(softmax_meta);
  char msg[MSG_SIZE] = "";
  cr_expect_eq(tile_check_args(info, grid1, NULL, 0, msg, sizeof msg), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "text is NULL");
  tile_meta_free(info);
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
