/* gpu_smoke.c - a smoke test of libtile on a real GPU, and a measurement
 * of what a checked launch costs over a bare cuLaunchKernel.
 *
 * The unit tests (tests/unit/test_runtime.c) cover everything that needs no
 * GPU; this program covers the rest with hand-written PTX, so it needs no
 * tilec: each kernel carries the metadata global tilec would emit
 * (__tile_meta_<kernel>, a .visible .global byte array of the metadata
 * text), built here from the text. It checks: runtime creation and device
 * properties; PTX and (given a path) cubin loading; metadata lookup,
 * caching and the parameter-size check against the code; argument packing
 * for pointers, f32, i32, i8, i64, u16, f16, bf16 and a 128-byte
 * descriptor; a TMA load through a map libtile encoded from a tile_tensor
 * (dimension order, byte strides, zero fill out of bounds, the map
 * cache); dynamic shared memory above 48 KiB; kernels without
 * metadata; argument errors; streams, events, graphs; launches from
 * several threads. It prints one line per check and "N passed, N failed",
 * and exits with 77 (skipped) where there is no driver or GPU.
 *
 * Build and run (on the GPU machine, from the repository root):
 *   gcc -std=c17 -O2 -D_GNU_SOURCE -Iruntime -I/usr/local/cuda/include \
 *       runtime/smoke/gpu_smoke.c runtime/[a-z]*.c -o gpu_smoke -ldl -lpthread
 *   ./gpu_smoke --ptx > smoke.ptx && ptxas -arch=sm_90a smoke.ptx -o smoke.cubin
 *   ./gpu_smoke smoke.cubin     (the cubin is optional)
 * It includes internal.h only to time the bare cuLaunchKernel baseline and
 * the driver's encoder.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../internal.h"
#include "../tile.h"

/* Launches per timing round, and rounds (the best round is reported). */
#define TIMING_LAUNCHES 20000
#define TIMING_ROUNDS 5

/* Threads in the multithreaded launch check, and launches per thread. */
#define SMOKE_THREADS 4
#define THREAD_LAUNCHES 1000

/* Elements of the axpy check. */
#define AXPY_N 1000

/* The TMA check: a ROWS x COLS f32 matrix in rows of PITCH elements (the
 * padding poisoned), and the box of the tma_copy kernel's metadata. */
#define TMA_ROWS 20
#define TMA_COLS 24
#define TMA_PITCH 32
#define TMA_BOX_ROWS 8
#define TMA_BOX_COLS 16

/* Calls of the driver's encoder timed to measure one encode. */
#define ENCODE_CALLS 20000

/* Dynamic shared memory of the big_shared kernel: above the default
 * 48 KiB, so the runtime must opt in. */
#define BIG_SHARED_BYTES 100000

/* The exit status test harnesses (meson, automake) read as "skipped". */
#define SKIP_EXIT_CODE 77

static int passed, failed;

static void check(bool ok, const char *what) {
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, ok ? "" : ": ", ok ? "" : tile_last_error());
  if (ok)
    passed++;
  else
    failed++;
}

/* ---- the module -------------------------------------------------------- */

static const char ptx_kernels[] =
    ".version 8.0\n.target sm_90a\n.address_size 64\n"
    /* axpy(out, x, a, n): out[i] = a * x[i] for i < n */
    ".visible .entry axpy(.param .u64 p_out, .param .u64 p_x, .param .f32 p_a, .param .u32 p_n)\n{\n"
    ".reg .pred %p<2>;\n.reg .b32 %r<6>;\n.reg .f32 %f<4>;\n.reg .b64 %rd<8>;\n"
    "ld.param.u64 %rd1, [p_out];\nld.param.u64 %rd2, [p_x];\nld.param.f32 %f1, [p_a];\nld.param.u32 %r1, [p_n];\n"
    "mov.u32 %r2, %ctaid.x;\nmov.u32 %r3, %ntid.x;\nmov.u32 %r4, %tid.x;\nmad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "setp.ge.s32 %p1, %r5, %r1;\n@%p1 bra DONE;\n"
    "cvta.to.global.u64 %rd3, %rd1;\ncvta.to.global.u64 %rd4, %rd2;\nmul.wide.s32 %rd5, %r5, 4;\n"
    "add.s64 %rd6, %rd4, %rd5;\nld.global.f32 %f2, [%rd6];\nmul.f32 %f3, %f2, %f1;\n"
    "add.s64 %rd7, %rd3, %rd5;\nst.global.f32 [%rd7], %f3;\nDONE:\nret;\n}\n"
    /* scalars(out, a: i8, b: i64, c: u16, h: f16, g: bf16): stores each, widened */
    ".visible .entry scalars(.param .u64 p_out, .param .s8 p_a, .param .s64 p_b, .param .u16 p_c, "
    ".param .b16 p_h, .param .b16 p_g)\n{\n"
    ".reg .b16 %h<6>;\n.reg .b64 %rd<8>;\n"
    "ld.param.u64 %rd1, [p_out];\ncvta.to.global.u64 %rd2, %rd1;\n"
    "ld.param.s8 %h1, [p_a];\ncvt.s64.s16 %rd3, %h1;\nst.global.u64 [%rd2], %rd3;\n"
    "ld.param.s64 %rd4, [p_b];\nst.global.u64 [%rd2+8], %rd4;\n"
    "ld.param.u16 %h2, [p_c];\ncvt.u64.u16 %rd5, %h2;\nst.global.u64 [%rd2+16], %rd5;\n"
    "ld.param.b16 %h3, [p_h];\ncvt.u64.u16 %rd6, %h3;\nst.global.u64 [%rd2+24], %rd6;\n"
    "ld.param.b16 %h4, [p_g];\ncvt.u64.u16 %rd7, %h4;\nst.global.u64 [%rd2+32], %rd7;\nret;\n}\n"
    /* desc_first(q: 128-byte descriptor, out): out[0..1] = first and last 8 bytes of q */
    ".visible .entry desc_first(.param .align 64 .b8 p_q[128], .param .u64 p_out)\n{\n"
    ".reg .b64 %rd<5>;\nld.param.u64 %rd1, [p_out];\ncvta.to.global.u64 %rd2, %rd1;\n"
    "ld.param.u64 %rd3, [p_q];\nst.global.u64 [%rd2], %rd3;\nld.param.u64 %rd4, [p_q+120];\n"
    "st.global.u64 [%rd2+8], %rd4;\nret;\n}\n"
    /* big_shared(out): writes through dynamic shared memory at its far end */
    ".extern .shared .align 16 .b8 smem[];\n"
    ".visible .entry big_shared(.param .u64 p_out)\n{\n"
    ".reg .b32 %r<4>;\n.reg .b64 %rd<3>;\nmov.u32 %r1, smem;\nmov.u32 %r2, 12345;\n"
    "st.shared.u32 [%r1+99996], %r2;\nbar.sync 0;\nld.shared.u32 %r3, [%r1+99996];\n"
    "ld.param.u64 %rd1, [p_out];\ncvta.to.global.u64 %rd2, %rd1;\nst.global.u32 [%rd2], %r3;\nret;\n}\n"
    /* tma_copy(m: f32 map with box 8 x 16, out, c0, c1): thread 0 loads
     * the box at coordinates (c0, c1) (innermost first) with one TMA copy
     * into shared memory and writes its 128 words to out */
    ".visible .entry tma_copy(.param .align 64 .b8 p_m[128], .param .u64 p_out, .param .u32 p_c0, "
    ".param .u32 p_c1)\n{\n"
    ".reg .pred %p<3>;\n.reg .b32 %r<10>;\n.reg .b64 %rd<8>;\n"
    ".shared .align 128 .b8 tma_buf[512];\n.shared .align 8 .b64 tma_bar;\n"
    "mov.u32 %r1, %tid.x;\nsetp.ne.u32 %p1, %r1, 0;\n@%p1 bra TMA_DONE;\n"
    "mov.u64 %rd1, p_m;\ncvta.param.u64 %rd2, %rd1;\n"
    "mov.u32 %r2, tma_bar;\nmov.u32 %r3, tma_buf;\nld.param.u32 %r4, [p_c0];\nld.param.u32 %r5, [p_c1];\n"
    "mbarrier.init.shared::cta.b64 [%r2], 1;\nfence.proxy.async.shared::cta;\n"
    "mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r2], 512;\n"
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r4, %r5}], "
    "[%r2];\n"
    "TMA_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;\n@!%p2 bra TMA_WAIT;\n"
    "ld.param.u64 %rd4, [p_out];\ncvta.to.global.u64 %rd5, %rd4;\nmov.u32 %r6, 0;\n"
    "TMA_LOOP:\nshl.b32 %r7, %r6, 2;\nadd.u32 %r8, %r3, %r7;\nld.shared.u32 %r9, [%r8];\n"
    "cvt.u64.u32 %rd6, %r7;\nadd.s64 %rd7, %rd5, %rd6;\nst.global.u32 [%rd7], %r9;\n"
    "add.u32 %r6, %r6, 1;\nsetp.lt.u32 %p1, %r6, 128;\n@%p1 bra TMA_LOOP;\n"
    "TMA_DONE:\nret;\n}\n"
    /* empty kernels: with metadata, and without (raw) */
    ".visible .entry empty()\n{\nret;\n}\n"
    ".visible .entry raw(.param .u64 p_out)\n{\n.reg .b64 %rd<3>;\n.reg .b32 %r<2>;\n"
    "ld.param.u64 %rd1, [p_out];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, 7;\n"
    "st.global.u32 [%rd2], %r1;\nret;\n}\n"
    /* mismatch(out): its metadata wrongly says the parameter is an i32 */
    ".visible .entry mismatch(.param .u64 p_out)\n{\nret;\n}\n";

static const char *const metadata[][2] = {
    {"axpy", "tile-kernel 1\nname axpy\nwarps 4\nshared 0\nparam out ptr f32 align 16\nparam x ptr f32 align 16\n"
             "param a f32\nparam n i32\nend\n"},
    {"scalars", "tile-kernel 1\nname scalars\nwarps 1\nshared 0\nparam out ptr u64\nparam a i8\nparam b i64\n"
                "param c u16\nparam h f16\nparam g bf16\nend\n"},
    {"desc_first", "tile-kernel 1\nname desc_first\nwarps 1\nshared 0\nparam q desc bf16 2 box 64 64 swizzle 128\n"
                   "param out ptr u64\nend\n"},
    {"tma_copy", "tile-kernel 1\nname tma_copy\nwarps 1\nshared 0\nparam m desc f32 2 box 8 16\n"
                 "param out ptr u32\nparam c0 i32\nparam c1 i32\nend\n"},
    {"big_shared", "tile-kernel 1\nname big_shared\nwarps 1\nshared 100000\nparam out ptr u32\nend\n"},
    {"empty", "tile-kernel 1\nname empty\nwarps 1\nshared 0\nend\n"},
    {"mismatch", "tile-kernel 1\nname mismatch\nwarps 1\nshared 0\nparam out i32\nend\n"},
};

/* Appends ".visible .global .align 1 .b8 __tile_meta_K[N] = {...};" for
 * every kernel's metadata, as tilec emits it, to the PTX. */
static char *build_ptx(void) {
  size_t cap = sizeof ptx_kernels + 64 * 1024, len = 0;
  char *ptx = malloc(cap);
  len += (size_t)snprintf(ptx, cap, "%s", ptx_kernels);
  for (size_t i = 0; i < sizeof metadata / sizeof metadata[0]; i++) {
    const char *text = metadata[i][1];
    size_t n = strlen(text) + 1; /* with its NUL */
    len += (size_t)snprintf(ptx + len, cap - len, ".visible .global .align 1 .b8 __tile_meta_%s[%zu] = {",
                            metadata[i][0], n);
    for (size_t j = 0; j < n; j++)
      len += (size_t)snprintf(ptx + len, cap - len, "%s%d", j ? ", " : "", (unsigned char)text[j]);
    len += (size_t)snprintf(ptx + len, cap - len, "};\n");
  }
  return ptx;
}

/* ---- checks ------------------------------------------------------------ */

static void log_line(void *user, tile_log_level level, const char *message) {
  (void)user;
  printf("     [log %d] %.300s\n", (int)level, message);
}

static tile_kernel *get(tile_module *m, const char *name) {
  tile_kernel *k = NULL;
  char what[128];
  snprintf(what, sizeof what, "tile_kernel_get(%s)", name);
  check(tile_kernel_get(m, name, &k) == TILE_OK, what);
  return k;
}

static void check_axpy(tile_runtime *rt, tile_kernel *k) {
  float x[AXPY_N], out[AXPY_N];
  for (int i = 0; i < AXPY_N; i++)
    x[i] = (float)i;
  uint64_t dx = 0, dout = 0;
  check(tile_mem_alloc(rt, sizeof x, &dx) == TILE_OK && tile_mem_alloc(rt, sizeof out, &dout) == TILE_OK,
        "tile_mem_alloc");
  check(tile_memcpy_htod(rt, dx, x, sizeof x) == TILE_OK, "tile_memcpy_htod");
  check(tile_memset_d8(rt, dout, 0xff, sizeof out) == TILE_OK, "tile_memset_d8");
  tile_arg args[] = {tile_arg_ptr(dout), tile_arg_ptr(dx), tile_arg_f32(2.5f), tile_arg_i32(AXPY_N)};
  const uint32_t grid[3] = {(AXPY_N + 127) / 128, 1, 1};
  check(tile_launch(k, grid, NULL, args, 4) == TILE_OK, "tile_launch(axpy)");
  check(tile_memcpy_dtoh(rt, out, dout, sizeof out) == TILE_OK, "tile_memcpy_dtoh");
  bool right = true;
  for (int i = 0; i < AXPY_N; i++)
    right = right && out[i] == 2.5f * (float)i;
  check(right, "axpy computed out = 2.5 * x");
  tile_arg wrong[] = {tile_arg_ptr(dout), tile_arg_ptr(dx + 4), tile_arg_f32(1), tile_arg_i32(AXPY_N)};
  check(tile_launch(k, grid, NULL, wrong, 4) == TILE_ERROR_INVALID_ARGUMENT &&
            strstr(tile_last_error(), "argument 1 'x' of kernel 'axpy'"),
        "misaligned pointer rejected before the driver");
  check(tile_launch(k, (const uint32_t[3]){1, 1, 70000}, NULL, args, 4) == TILE_ERROR_INVALID_ARGUMENT,
        "grid above the device limit rejected");
  tile_mem_free(rt, dx);
  tile_mem_free(rt, dout);
}

static void check_scalars(tile_runtime *rt, tile_kernel *k) {
  uint64_t dout = 0, out[5] = {0};
  tile_mem_alloc(rt, sizeof out, &dout);
  tile_arg args[] = {tile_arg_ptr(dout),  tile_arg_i32(-5),   tile_arg_i64(-1234567890123LL),
                     tile_arg_u32(65535), tile_arg_f32(1.5f), tile_arg_f64(-3.0)};
  check(tile_launch(k, (const uint32_t[3]){1, 1, 1}, NULL, args, 6) == TILE_OK, "tile_launch(scalars)");
  tile_memcpy_dtoh(rt, out, dout, sizeof out);
  check((int64_t)out[0] == -5 && (int64_t)out[1] == -1234567890123LL && out[2] == 65535,
        "i8, i64 and u16 arguments packed");
  check(out[3] == 0x3e00 && out[4] == 0xc040, "f16 1.5 = 0x3e00 and bf16 -3.0 = 0xc040 packed");
  tile_mem_free(rt, dout);
}

static void check_desc(tile_runtime *rt, tile_kernel *k) {
  _Alignas(64) uint64_t map[16];
  for (int i = 0; i < 16; i++)
    map[i] = 0x1111111111111111ull * (uint64_t)(i + 1);
  uint64_t dout = 0, out[2] = {0};
  tile_mem_alloc(rt, sizeof out, &dout);
  tile_arg args[] = {tile_arg_desc(map), tile_arg_ptr(dout)};
  check(tile_launch(k, (const uint32_t[3]){1, 1, 1}, NULL, args, 2) == TILE_OK, "tile_launch(desc_first)");
  tile_memcpy_dtoh(rt, out, dout, sizeof out);
  check(out[0] == map[0] && out[1] == map[15], "128-byte descriptor passed by value");
  tile_mem_free(rt, dout);
}

/* Loads the box at (row, col) of the tensor t (values r * 100 + c, inside
 * TMA_ROWS x TMA_COLS of the full matrix from row0) through tma_copy and
 * compares it with what TMA promises: the tensor's elements, zeros
 * outside it. col * 4 must be a multiple of 16: on the H200 a box whose
 * innermost coordinate is not 16-byte aligned traps (illegal
 * instruction). */
static bool tma_box_right(tile_runtime *rt, tile_kernel *k, const tile_tensor *t, int row0, int row, int col,
                          uint64_t dout) {
  tile_arg args[] = {tile_arg_tensor(t), tile_arg_ptr(dout), tile_arg_i32(col), tile_arg_i32(row)};
  float out[TMA_BOX_ROWS * TMA_BOX_COLS];
  tile_memset_d8(rt, dout, 0xff, sizeof out);
  if (tile_launch(k, (const uint32_t[3]){1, 1, 1}, NULL, args, 4) != TILE_OK) return false;
  if (tile_memcpy_dtoh(rt, out, dout, sizeof out) != TILE_OK) return false;
  for (int i = 0; i < TMA_BOX_ROWS; i++)
    for (int j = 0; j < TMA_BOX_COLS; j++) {
      int r = row + i, c = col + j;
      bool inside = r >= 0 && c >= 0 && r < t->shape[0] && c < t->shape[1];
      float want = inside ? (float)((row0 + r) * 100 + c) : 0.0f;
      if (out[i * TMA_BOX_COLS + j] != want) {
        printf("     box (%d, %d): element (%d, %d) is %g, expected %g\n", row, col, i, j, out[i * TMA_BOX_COLS + j],
               want);
        return false;
      }
    }
  return true;
}

static void check_tma(tile_runtime *rt, tile_kernel *k) {
  float host[TMA_ROWS * TMA_PITCH];
  for (int r = 0; r < TMA_ROWS; r++)
    for (int c = 0; c < TMA_PITCH; c++)
      host[r * TMA_PITCH + c] = c < TMA_COLS ? (float)(r * 100 + c) : -1.0f; /* the padding is poison */
  uint64_t dm = 0, dout = 0;
  tile_mem_alloc(rt, sizeof host, &dm);
  tile_mem_alloc(rt, TMA_BOX_ROWS * TMA_BOX_COLS * sizeof(float), &dout);
  tile_memcpy_htod(rt, dm, host, sizeof host);
  tile_tensor t = {.ptr = dm, .rank = 2, .shape = {TMA_ROWS, TMA_COLS}, .strides = {TMA_PITCH, 1}};
  check(tma_box_right(rt, k, &t, 0, 0, 0, dout), "TMA load through an encoded tile_tensor map");
  check(tma_box_right(rt, k, &t, 0, 16, 16, dout), "TMA box past the edge: rows and columns outside read as zeros");
  check(tma_box_right(rt, k, &t, 0, 8, 4, dout), "same tensor again (cached map), another box");
  check(tma_box_right(rt, k, &t, 0, -3, -4, dout), "negative coordinates read zeros before the tensor");
  tile_tensor lower = t;
  lower.ptr += 4 * TMA_PITCH * sizeof(float); /* from row 4: 512 bytes on, 16-byte aligned */
  lower.shape[0] = TMA_ROWS - 4;
  check(tma_box_right(rt, k, &lower, 4, 12, 8, dout), "a new pointer and shape get a new map");
  check(tma_box_right(rt, k, &t, 0, 16, 16, dout), "and the first map is still right");
  tile_tensor bad = t;
  bad.strides[0] = 30; /* 120 bytes */
  tile_arg args[] = {tile_arg_tensor(&bad), tile_arg_ptr(dout), tile_arg_i32(0), tile_arg_i32(0)};
  check(tile_launch(k, (const uint32_t[3]){1, 1, 1}, NULL, args, 4) == TILE_ERROR_INVALID_ARGUMENT &&
            strstr(tile_last_error(), "stride of dimension 0 is 30 elements (120 bytes), not a multiple of 16 bytes"),
        "a stride TMA cannot take is rejected before the driver");
  tile_mem_free(rt, dm);
  tile_mem_free(rt, dout);
}

static void check_shared_and_raw(tile_runtime *rt, tile_module *m) {
  uint64_t dout = 0;
  uint32_t v = 0;
  tile_mem_alloc(rt, 4, &dout);
  tile_kernel *big = get(m, "big_shared");
  tile_arg args[] = {tile_arg_ptr(dout)};
  check(big && tile_kernel_get_info(big)->shared_bytes == BIG_SHARED_BYTES, "big_shared metadata");
  check(big && tile_launch(big, (const uint32_t[3]){1, 1, 1}, NULL, args, 1) == TILE_OK,
        "launch with 100000 bytes of shared");
  tile_memcpy_dtoh(rt, &v, dout, 4);
  check(v == 12345, "big_shared wrote through its far shared memory");
  tile_kernel *raw = get(m, "raw");
  check(raw && !tile_kernel_get_info(raw), "a kernel without metadata has no info");
  check(raw && tile_launch(raw, (const uint32_t[3]){1, 1, 1}, NULL, args, 1) == TILE_ERROR_INVALID_ARGUMENT,
        "tile_launch refuses a kernel without metadata");
  void *params[] = {&dout};
  check(raw && tile_launch_unchecked(raw, (const uint32_t[3]){1, 1, 1}, (const uint32_t[3]){32, 1, 1}, 0, NULL,
                                     params) == TILE_OK,
        "tile_launch_unchecked");
  tile_memcpy_dtoh(rt, &v, dout, 4);
  check(v == 7, "the unchecked kernel ran");
  tile_mem_free(rt, dout);
}

static void check_errors(tile_module *m) {
  tile_kernel *k = NULL;
  check(tile_kernel_get(m, "nonexistent", &k) == TILE_ERROR_NOT_FOUND, "missing kernel is TILE_ERROR_NOT_FOUND");
  tile_status st = tile_kernel_get(m, "mismatch", &k);
  printf("     mismatch: %s: %s\n", tile_status_name(st), tile_last_error());
  check(st == TILE_ERROR_BAD_METADATA || st == TILE_OK,
        "metadata/code size mismatch (BAD_METADATA where the driver can tell)");
  tile_kernel *a = NULL, *b = NULL;
  tile_kernel_get(m, "axpy", &a);
  tile_kernel_get(m, "axpy", &b);
  check(a && a == b, "kernel lookups are cached");
}

/* ---- streams, events, graphs ------------------------------------------- */

static void check_graph(tile_runtime *rt, tile_kernel *k) {
  tile_stream *s = NULL;
  tile_event *e0 = NULL, *e1 = NULL;
  tile_graph *g = NULL;
  check(tile_stream_create(rt, &s) == TILE_OK, "tile_stream_create");
  check(tile_event_create(rt, &e0) == TILE_OK && tile_event_create(rt, &e1) == TILE_OK, "tile_event_create");
  const uint32_t grid[3] = {1, 1, 1};
  check(tile_graph_begin_capture(s) == TILE_OK, "tile_graph_begin_capture");
  for (int i = 0; i < 100; i++)
    tile_launch(k, grid, s, NULL, 0);
  check(tile_graph_end_capture(s, &g) == TILE_OK, "tile_graph_end_capture (100 launches)");
  tile_event_record(e0, s);
  for (int i = 0; i < 10; i++)
    tile_graph_launch(g, s);
  tile_event_record(e1, s);
  check(tile_stream_synchronize(s) == TILE_OK, "graph replays ran");
  float ms = 0;
  check(tile_event_elapsed_ms(e0, e1, &ms) == TILE_OK, "tile_event_elapsed_ms");
  printf("     1000 empty kernels through a graph: %.3f ms (%.2f us each)\n", ms, ms * 1000 / 1000);
  tile_graph_destroy(g);
  tile_event_destroy(e0);
  tile_event_destroy(e1);
  tile_stream_destroy(s);
}

typedef struct thread_job {
  tile_runtime *rt;
  tile_kernel *k;
  bool ok;
} thread_job;

static void *launch_from_thread(void *arg) {
  thread_job *job = arg;
  tile_stream *s = NULL;
  job->ok = tile_stream_create(job->rt, &s) == TILE_OK;
  for (int i = 0; i < THREAD_LAUNCHES && job->ok; i++)
    job->ok = tile_launch(job->k, (const uint32_t[3]){1, 1, 1}, s, NULL, 0) == TILE_OK;
  job->ok = job->ok && tile_stream_synchronize(s) == TILE_OK;
  tile_stream_destroy(s);
  return NULL;
}

static void check_threads(tile_runtime *rt, tile_kernel *k) {
  pthread_t threads[SMOKE_THREADS];
  thread_job jobs[SMOKE_THREADS];
  for (int i = 0; i < SMOKE_THREADS; i++) {
    jobs[i] = (thread_job){rt, k, false};
    pthread_create(&threads[i], NULL, launch_from_thread, &jobs[i]);
  }
  bool ok = true;
  for (int i = 0; i < SMOKE_THREADS; i++) {
    pthread_join(threads[i], NULL);
    ok = ok && jobs[i].ok;
  }
  check(ok, "launches from 4 threads on their own streams");
}

/* ---- launch cost ------------------------------------------------------- */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Host time per launch of axpy with n = 0: 0 = bare cuLaunchKernel with
 * pre-packed params, 1 = tile_launch, 2 = tile_launch_unchecked. */
static double time_launches(tile_runtime *rt, tile_kernel *k, int how, uint64_t buf) {
  float a = 1;
  int32_t n = 0;
  void *params[] = {&buf, &buf, &a, &n};
  tile_arg args[] = {tile_arg_ptr(buf), tile_arg_ptr(buf), tile_arg_f32(1), tile_arg_i32(0)};
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  tile_synchronize(rt);
  double t0 = now_us();
  for (int i = 0; i < TIMING_LAUNCHES; i++) {
    if (how == 0)
      rt->drv.launch_kernel(k->func, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
    else if (how == 1)
      tile_launch(k, grid, NULL, args, 4);
    else
      tile_launch_unchecked(k, grid, block, 0, NULL, params);
  }
  double t1 = now_us();
  tile_synchronize(rt);
  return (t1 - t0) / TIMING_LAUNCHES;
}

/* Host time per launch of desc_first: bare cuLaunchKernel with a
 * pre-encoded map, tile_launch with the map (tile_arg_desc), tile_launch
 * with a tile_tensor (a cache hit after the first), tile_launch with
 * tensors that always miss (twice as many as the cache holds, in turn),
 * and one call of the driver's encoder. */
static void measure_descriptor_cost(tile_runtime *rt, tile_kernel *k) {
  uint64_t buf = 0;
  if (tile_mem_alloc(rt, 1 << 20, &buf) != TILE_OK) return;
  tile_tensor t = {.ptr = buf, .rank = 2, .shape = {256, 512}, .strides = {512, 1}};
  CUtensorMap map;
  cuuint64_t dims[2] = {512, 256}, strides[1] = {1024};
  cuuint32_t box[2] = {64, 64}, ones[2] = {1, 1};
  CUresult r = rt->drv.tensor_map_encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)(uintptr_t)buf, dims,
                                               strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  check(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled by hand");
  double t0 = now_us();
  for (int i = 0; i < ENCODE_CALLS; i++)
    rt->drv.tensor_map_encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)(uintptr_t)buf, dims, strides,
                                    box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  double encode_us = (now_us() - t0) / ENCODE_CALLS;
  void *params[] = {&map, &buf};
  tile_arg with_map[] = {tile_arg_desc(&map), tile_arg_ptr(buf)};
  tile_arg with_tensor[] = {tile_arg_tensor(&t), tile_arg_ptr(buf)};
  tile_tensor rotating[2 * TILE_TMAP_CACHE_ENTRIES];
  for (int i = 0; i < 2 * TILE_TMAP_CACHE_ENTRIES; i++) {
    rotating[i] = t;
    rotating[i].ptr += (uint64_t)i * 256;
  }
  const uint32_t grid[3] = {1, 1, 1};
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  for (int round = 0; round < TIMING_ROUNDS; round++)
    for (int how = 0; how < 4; how++) {
      tile_synchronize(rt);
      t0 = now_us();
      for (int i = 0; i < TIMING_LAUNCHES; i++) {
        if (how == 0) {
          rt->drv.launch_kernel(k->func, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
        } else if (how == 3) {
          tile_arg missing[] = {tile_arg_tensor(&rotating[i % (2 * TILE_TMAP_CACHE_ENTRIES)]), tile_arg_ptr(buf)};
          tile_launch(k, grid, NULL, missing, 2);
        } else {
          tile_launch(k, grid, NULL, how == 1 ? with_map : with_tensor, 2);
        }
      }
      double us = (now_us() - t0) / TIMING_LAUNCHES;
      tile_synchronize(rt);
      if (us < best[how]) best[how] = us;
    }
  printf("     descriptor launch cost (host us, best of %d x %d): bare cuLaunchKernel %.3f, tile_arg_desc %.3f "
         "(%+.1f%%), tile_arg_tensor cached %.3f (%+.1f%%), tile_arg_tensor always missing %.3f (%+.1f%%); one "
         "cuTensorMapEncodeTiled %.3f\n",
         TIMING_ROUNDS, TIMING_LAUNCHES, best[0], best[1], 100 * (best[1] / best[0] - 1), best[2],
         100 * (best[2] / best[0] - 1), best[3], 100 * (best[3] / best[0] - 1), encode_us);
  check(best[2] <= best[0] * 1.2, "tile_launch with a cached tile_tensor map within 20% of a bare cuLaunchKernel");
  tile_mem_free(rt, buf);
}

static void measure_launch_cost(tile_runtime *rt, tile_kernel *k) {
  uint64_t buf = 0;
  tile_mem_alloc(rt, 256, &buf);
  double best[3] = {1e9, 1e9, 1e9};
  for (int round = 0; round < TIMING_ROUNDS; round++)
    for (int how = 0; how < 3; how++) {
      double t = time_launches(rt, k, how, buf);
      if (t < best[how]) best[how] = t;
    }
  printf("     launch cost (host us per launch, best of %d x %d): bare cuLaunchKernel %.3f, tile_launch %.3f "
         "(%+.1f%%), tile_launch_unchecked %.3f\n",
         TIMING_ROUNDS, TIMING_LAUNCHES, best[0], best[1], 100 * (best[1] / best[0] - 1), best[2]);
  check(best[1] <= best[0] * 1.2, "tile_launch within 20% of a bare cuLaunchKernel");
  tile_mem_free(rt, buf);
}

/* ---- main -------------------------------------------------------------- */

static void check_cubin(tile_runtime *rt, const char *path) {
  tile_module *m = NULL;
  check(tile_module_load_file(rt, path, &m) == TILE_OK, "tile_module_load_file(cubin)");
  tile_kernel *k = m ? get(m, "axpy") : NULL;
  if (k) check_axpy(rt, k);
  tile_module_unload(m);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--ptx") == 0) { /* for ptxas, to make a cubin */
    char *ptx = build_ptx();
    fputs(ptx, stdout);
    free(ptx);
    return 0;
  }
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.log = log_line;
  tile_runtime *rt = NULL;
  tile_status st = tile_runtime_create(&cfg, &rt);
  if (st == TILE_ERROR_NO_DRIVER || st == TILE_ERROR_NO_DEVICE) {
    printf("SKIP: %s\n", tile_last_error());
    return SKIP_EXIT_CODE;
  }
  if (st != TILE_OK) {
    printf("no runtime: %s\n", tile_last_error());
    return 1;
  }
  tile_device_properties p;
  tile_device_info(rt, &p);
  printf("     %s: sm_%d%d, %d SMs, %zu KiB shared opt-in, %zu MiB L2, %zu GiB, driver %d\n", p.name, p.cc_major,
         p.cc_minor, p.sm_count, p.max_shared_per_block_optin / 1024, p.l2_bytes >> 20, p.total_memory >> 30,
         p.driver_version);
  char *ptx = build_ptx();
  tile_module *m = NULL;
  check(tile_module_load(rt, ptx, strlen(ptx), &m) == TILE_OK, "tile_module_load(PTX)");
  free(ptx);
  if (!m) return 1;
  tile_kernel *axpy = get(m, "axpy"), *scalars = get(m, "scalars"), *desc = get(m, "desc_first");
  tile_kernel *empty = get(m, "empty"), *tma = get(m, "tma_copy");
  if (axpy) check_axpy(rt, axpy);
  if (scalars) check_scalars(rt, scalars);
  if (desc) check_desc(rt, desc);
  if (tma) check_tma(rt, tma);
  check_shared_and_raw(rt, m);
  check_errors(m);
  if (empty) check_graph(rt, empty);
  if (empty) check_threads(rt, empty);
  if (axpy) measure_launch_cost(rt, axpy);
  if (desc) measure_descriptor_cost(rt, desc);
  check(tile_synchronize(rt) == TILE_OK, "no asynchronous errors");
  tile_module_unload(m);
  if (argc > 1) check_cubin(rt, argv[1]);
  check(tile_runtime_destroy(rt) == TILE_OK, "tile_runtime_destroy");
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
