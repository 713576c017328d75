/* test_devices.c - libtile's multi-device calls and tile_nccl.h without a
 * GPU: over a fake driver with two devices (fake_cuda.c) and a fake NCCL
 * (fake_nccl.c) that log what they are asked, so the tests see which
 * context was current, which stream and which NCCL type and operation
 * each call passed on; and the errors where the driver or NCCL is missing
 * or too old. meson passes the fakes' paths in FAKE_CUDA_LIB and
 * FAKE_NCCL_LIB. A real NCCL, where one is installed, is opened too. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"
#include "tile_nccl.h"
#include "fake_libs.h"


static void expect_contains(const char *text, const char *want) {
  cr_expect(strstr(text, want), "expected '%s' in:\n%s", want, text);
}

static tile_nccl *fake_nccl(void) {
  tile_nccl *n = NULL;
  cr_assert_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &n), TILE_OK, "%s", tile_last_error());
  return n;
}

/* ---- devices ---- */

Test(devices, count_without_a_driver_and_with_the_fake) {
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.driver_library = "/nonexistent/libcuda.so.1";
  int n = -1;
  cr_expect_eq(tile_device_count(&cfg, &n), TILE_ERROR_NO_DRIVER);
  cr_expect_eq(n, 0);
  expect_contains(tile_last_error(), "no CUDA driver: /nonexistent/libcuda.so.1 could not be loaded");
  cfg.driver_library = fake_path("FAKE_CUDA_LIB");
  cr_expect_eq(tile_device_count(&cfg, &n), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(n, 2);
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  n = -1;
  cr_expect_eq(tile_device_count(&cfg, &n), TILE_OK, "a driver without devices is no error");
  cr_expect_eq(n, 0);
  cr_expect_eq(tile_device_count(&cfg, NULL), TILE_ERROR_INVALID_ARGUMENT);
}

Test(devices, a_runtime_per_device_and_a_missing_one_is_named) {
  tile_runtime *a = fake_runtime(0), *b = fake_runtime(1);
  tile_device_properties pa, pb;
  cr_assert_eq(tile_device_info(a, &pa), TILE_OK);
  cr_assert_eq(tile_device_info(b, &pb), TILE_OK);
  cr_expect_eq(pa.ordinal, 0);
  cr_expect_eq(pb.ordinal, 1);
  cr_expect_str_eq(pb.name, "Fake GPU 1");
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.driver_library = fake_path("FAKE_CUDA_LIB");
  cfg.device = 2;
  tile_runtime *c = (tile_runtime *)&cfg;
  cr_expect_eq(tile_runtime_create(&cfg, &c), TILE_ERROR_NO_DEVICE);
  cr_expect_null(c);
  expect_contains(tile_last_error(), "no CUDA device 2: there are 2 devices");
  tile_runtime_destroy(a);
  tile_runtime_destroy(b);
}

Test(devices, peer_access_copies_and_cross_device_waits) {
  tile_runtime *a = fake_runtime(0), *b = fake_runtime(1);
  bool on = false;
  cr_expect_eq(tile_peer_access_enable(a, b, &on), TILE_OK, "%s", tile_last_error());
  cr_expect(on);
  cr_expect_eq(tile_peer_access_enable(a, b, &on), TILE_OK, "enabling twice: %s", tile_last_error());
  cr_expect(on);
  cr_expect_eq(tile_peer_access_enable(b, b, &on), TILE_OK);
  cr_expect(on, "a device reaches its own memory");
  expect_contains(cuda_log(), "device 0 reaches device 1\n");
  cr_expect_null(strstr(cuda_log(), "device 1 reaches device 1"));

  tile_stream *sb = NULL;
  tile_event *ea = NULL;
  cr_assert_eq(tile_stream_create(b, &sb), TILE_OK);
  cr_assert_eq(tile_event_create(a, &ea), TILE_OK);
  /* a copy issued on the source's stream, with the source's context current */
  cr_expect_eq(tile_memcpy_peer(a, 0x1000, b, 0x2000, 64, sb), TILE_OK, "%s", tile_last_error());
  expect_contains(cuda_log(),
                  "copy 64 bytes 0x2000 (device 1) -> 0x1000 (device 0) on a stream of device 1 (current 1)");
  cr_expect_eq(tile_memcpy_peer(a, 0x1000, b, 0x2000, 0, sb), TILE_OK, "0 bytes: nothing to do");
  cr_expect_eq(tile_memcpy_peer(a, 0, b, 0x2000, 64, sb), TILE_ERROR_INVALID_ARGUMENT);
  tile_runtime *c = fake_runtime(0);
  tile_stream *sc = NULL;
  cr_assert_eq(tile_stream_create(c, &sc), TILE_OK);
  cr_expect_eq(tile_memcpy_peer(a, 0x1000, b, 0x2000, 64, sc), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "the stream belongs to neither");

  /* device 1's stream waits for an event recorded on device 0 */
  cr_expect_eq(tile_event_record(ea, NULL), TILE_OK);
  cr_expect_eq(tile_stream_wait_event(sb, ea), TILE_OK, "%s", tile_last_error());
  expect_contains(cuda_log(), "stream of device 1 waits for an event of device 0 (current 1, flags 0)");
  cr_expect_eq(tile_stream_wait_event(NULL, ea), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "tile_stream_wait_event: the stream is NULL");
  cr_expect_eq(tile_stream_wait_event(sb, NULL), TILE_ERROR_INVALID_ARGUMENT);

  tile_stream_destroy(sb), tile_stream_destroy(sc), tile_event_destroy(ea);
  tile_runtime_destroy(a), tile_runtime_destroy(b), tile_runtime_destroy(c);
}

Test(devices, no_peer_path_is_reported_not_failed) {
  setenv("FAKE_CUDA_NO_PEER", "1", 1);
  tile_runtime *a = fake_runtime(0), *b = fake_runtime(1);
  bool on = true;
  cr_expect_eq(tile_peer_access_enable(a, b, &on), TILE_OK, "%s", tile_last_error());
  cr_expect_not(on);
  cr_expect_null(strstr(cuda_log(), "reaches"), "no peer access was enabled:\n%s", cuda_log());
  tile_runtime_destroy(a), tile_runtime_destroy(b);
}

/* ---- NCCL: loading ---- */

Test(nccl, a_missing_library_is_named_with_the_way_out) {
  tile_nccl *n = (tile_nccl *)&n;
  cr_expect_eq(tile_nccl_open("/nonexistent/libnccl.so.2", &n), TILE_ERROR_NO_NCCL);
  cr_expect_null(n);
  expect_contains(tile_last_error(), "no NCCL: /nonexistent/libnccl.so.2 could not be loaded (");
  expect_contains(tile_last_error(), "set TILE_NCCL_LIBRARY to the library's path");
  cr_expect_str_eq(tile_status_name(TILE_ERROR_NO_NCCL), "TILE_ERROR_NO_NCCL");
  cr_expect_str_eq(tile_status_name(TILE_ERROR_NCCL), "TILE_ERROR_NCCL");
}

Test(nccl, the_environment_names_the_library) {
  setenv("TILE_NCCL_LIBRARY", "/nonexistent/from-the-environment.so", 1);
  tile_nccl *n = NULL;
  cr_expect_eq(tile_nccl_open(NULL, &n), TILE_ERROR_NO_NCCL);
  expect_contains(tile_last_error(), "no NCCL: /nonexistent/from-the-environment.so could not be loaded");
  setenv("TILE_NCCL_LIBRARY", fake_path("FAKE_NCCL_LIB"), 1);
  cr_expect_eq(tile_nccl_open(NULL, &n), TILE_OK, "%s", tile_last_error());
  cr_expect_str_eq(tile_nccl_library(n), fake_path("FAKE_NCCL_LIB"));
  tile_nccl_close(n);
}

Test(nccl, a_library_that_is_not_nccl) {
  tile_nccl *n = NULL;
  cr_expect_eq(tile_nccl_open("libm.so.6", &n), TILE_ERROR_NO_NCCL);
  expect_contains(tile_last_error(), "no usable NCCL: libm.so.6 has no function ncclGetVersion");
}

Test(nccl, too_old_versions_in_both_encodings) {
  tile_nccl *n = NULL;
  setenv("FAKE_NCCL_VERSION", "2804", 1); /* 2.8.4, the old encoding */
  cr_expect_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &n), TILE_ERROR_NO_NCCL);
  expect_contains(tile_last_error(), "is NCCL 2.8.4; libtile needs 2.10 or newer (bfloat16)");
  setenv("FAKE_NCCL_VERSION", "20905", 1); /* 2.9.5 */
  cr_expect_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &n), TILE_ERROR_NO_NCCL);
  expect_contains(tile_last_error(), "is NCCL 2.9.5;");
  setenv("FAKE_NCCL_VERSION", "21003", 1);
  cr_expect_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &n), TILE_OK, "2.10.3 is new enough: %s", tile_last_error());
  cr_expect_eq(tile_nccl_version(n), 21003);
  tile_nccl_close(n);
}

Test(nccl, unique_ids_and_group_errors_carry_ncclS_text) {
  tile_nccl *n = fake_nccl();
  tile_nccl_id id;
  memset(&id, 0, sizeof id);
  cr_assert_eq(tile_nccl_unique_id(n, &id), TILE_OK);
  for (int i = 0; i < TILE_NCCL_ID_BYTES; i++)
    cr_expect_eq(id.bytes[i], (unsigned char)(i * 7 + 1), "byte %d", i);
  cr_expect_eq(tile_nccl_group_start(n), TILE_OK);
  setenv("FAKE_NCCL_FAIL_GROUP_END", "1", 1);
  cr_expect_eq(tile_nccl_group_end(n), TILE_ERROR_NCCL);
  expect_contains(tile_last_error(), "ncclGroupEnd: NCCL error 3 (fake internal error): the fake's last error");
  cr_expect_eq(tile_nccl_group_start(NULL), TILE_ERROR_INVALID_ARGUMENT);
  tile_nccl_close(n);
}

/* ---- NCCL: communicators and collectives ---- */

Test(nccl, init_all_over_two_runtimes_then_collectives_in_a_group) {
  tile_runtime *rt[2] = {fake_runtime(0), fake_runtime(1)};
  tile_nccl *n = fake_nccl();
  tile_comm *comm[2] = {NULL, NULL};
  cr_assert_eq(tile_comm_init_all(n, rt, 2, comm), TILE_OK, "%s", tile_last_error());
  expect_contains(nccl_log(), "init_all 2 devices: 0 1\n");
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(tile_comm_rank(comm[r]), r);
    cr_expect_eq(tile_comm_size(comm[r]), 2);
    cr_expect_eq(tile_comm_runtime(comm[r]), rt[r]);
  }
  tile_stream *s[2];
  for (int r = 0; r < 2; r++)
    cr_assert_eq(tile_stream_create(rt[r], &s[r]), TILE_OK);
  cr_assert_eq(tile_nccl_group_start(n), TILE_OK);
  for (int r = 0; r < 2; r++)
    cr_expect_eq(tile_all_reduce(comm[r], 0x10000, 0x10000, 4096, TILE_DTYPE_BF16, TILE_REDUCE_SUM, s[r]), TILE_OK,
                 "%s", tile_last_error());
  cr_assert_eq(tile_nccl_group_end(n), TILE_OK);
  char want[256];
  for (int r = 0; r < 2; r++) {
    snprintf(want, sizeof want, "all_reduce rank %d send 0x10000 recv 0x10000 count 4096 type 9 op 0 stream %p\n", r,
             tile_stream_handle(s[r]));
    expect_contains(nccl_log(), want);
  }
  expect_contains(nccl_log(), "group_start\nall_reduce rank 0");
  cr_expect_eq(tile_reduce_scatter(comm[1], 0x20000, 0x30000, 100, TILE_DTYPE_F32, TILE_REDUCE_MAX, NULL), TILE_OK);
  expect_contains(nccl_log(), "reduce_scatter rank 1 send 0x20000 recv 0x30000 count 100 type 7 op 2 stream (nil)");
  cr_expect_eq(tile_all_gather(comm[0], 0x20000, 0x30000, 10, TILE_DTYPE_I64, s[0]), TILE_OK);
  snprintf(want, sizeof want, "all_gather rank 0 send 0x20000 recv 0x30000 count 10 type 4 stream %p",
           tile_stream_handle(s[0]));
  expect_contains(nccl_log(), want);
  cr_expect_eq(tile_all_reduce(comm[0], 0x10000, 0x10000, 8, TILE_DTYPE_F8E4M3, TILE_REDUCE_SUM, NULL), TILE_OK,
               "2.28 has fp8: %s", tile_last_error());
  expect_contains(nccl_log(), "count 8 type 10 op 0");

  for (int r = 0; r < 2; r++)
    tile_stream_destroy(s[r]);
  for (int r = 0; r < 2; r++)
    cr_expect_eq(tile_comm_destroy(comm[r]), TILE_OK);
  expect_contains(nccl_log(), "destroy rank 0\n");
  expect_contains(nccl_log(), "destroy rank 1\n");
  expect_contains(cuda_log(), "synchronize device 1\n");
  tile_nccl_close(n);
  tile_runtime_destroy(rt[0]), tile_runtime_destroy(rt[1]);
}

Test(nccl, collectives_check_their_arguments) {
  tile_runtime *rt[2] = {fake_runtime(0), fake_runtime(1)};
  setenv("FAKE_NCCL_VERSION", "22300", 1); /* 2.23: no fp8 */
  tile_nccl *n = fake_nccl();
  tile_comm *comm[2];
  cr_assert_eq(tile_comm_init_all(n, rt, 2, comm), TILE_OK);
  cr_expect_eq(tile_all_reduce(NULL, 16, 16, 1, TILE_DTYPE_F32, TILE_REDUCE_SUM, NULL), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "tile_all_reduce: the communicator is NULL");
  cr_expect_eq(tile_all_reduce(comm[0], 16, 16, 1, TILE_DTYPE_I1, TILE_REDUCE_SUM, NULL), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "NCCL has no i1 type");
  cr_expect_eq(tile_all_reduce(comm[0], 16, 16, 1, TILE_DTYPE_U16, TILE_REDUCE_SUM, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(tile_all_reduce(comm[0], 16, 16, 1, (tile_dtype)99, TILE_REDUCE_SUM, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_eq(tile_all_reduce(comm[0], 16, 16, 1, TILE_DTYPE_F8E5M2, TILE_REDUCE_SUM, NULL), TILE_ERROR_UNSUPPORTED);
  expect_contains(tile_last_error(), "f8e5m2 collectives need NCCL 2.24 or newer;");
  expect_contains(tile_last_error(), "is NCCL 2.23.0");
  cr_expect_eq(tile_all_reduce(comm[0], 16, 16, 1, TILE_DTYPE_F32, (tile_reduce_op)5, NULL),
               TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "op is 5");
  cr_expect_eq(tile_all_reduce(comm[0], 0x1002, 0x2000, 4, TILE_DTYPE_F32, TILE_REDUCE_SUM, NULL),
               TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "send (0x1002) is not aligned to its 4-byte f32 elements");
  cr_expect_eq(tile_all_gather(comm[0], 0x1000, 0, 4, TILE_DTYPE_F32, NULL), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "tile_all_gather: recv is 0");
  cr_expect_eq(tile_all_reduce(comm[0], 0, 0, 0, TILE_DTYPE_F32, TILE_REDUCE_SUM, NULL), TILE_OK,
               "no elements, no buffers needed: %s", tile_last_error());
  /* a stream of the other device */
  tile_stream *s1;
  cr_assert_eq(tile_stream_create(rt[1], &s1), TILE_OK);
  cr_expect_eq(tile_all_reduce(comm[0], 16, 16, 1, TILE_DTYPE_F32, TILE_REDUCE_SUM, s1), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "tile_all_reduce: rank 0: the stream belongs to another tile_runtime");
  cr_expect_null(strstr(nccl_log(), "all_reduce rank 0 send 0x10"), "no refused call reached NCCL:\n%s", nccl_log());
  tile_stream_destroy(s1);
  for (int r = 0; r < 2; r++)
    tile_comm_destroy(comm[r]);
  tile_nccl_close(n);
  tile_runtime_destroy(rt[0]), tile_runtime_destroy(rt[1]);
}

Test(nccl, init_all_refuses_bad_device_lists) {
  tile_runtime *a = fake_runtime(0), *b = fake_runtime(0);
  tile_nccl *n = fake_nccl();
  tile_runtime *twice[2] = {a, b};
  tile_comm *comm[TILE_NCCL_MAX_LOCAL_RANKS + 1];
  cr_expect_eq(tile_comm_init_all(n, twice, 2, comm), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "rts[0] and rts[1] are both device 0 (one rank per device)");
  cr_expect_eq(tile_comm_init_all(n, twice, 0, comm), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "count is 0: 1 to 16 devices");
  cr_expect_eq(tile_comm_init_all(n, twice, TILE_NCCL_MAX_LOCAL_RANKS + 1, comm), TILE_ERROR_INVALID_ARGUMENT);
  tile_runtime *holes[2] = {a, NULL};
  cr_expect_eq(tile_comm_init_all(n, holes, 2, comm), TILE_ERROR_INVALID_ARGUMENT);
  expect_contains(tile_last_error(), "rts[1] is NULL");
  cr_expect_null(strstr(nccl_log(), "init_all"), "nothing reached NCCL:\n%s", nccl_log());
  tile_nccl_close(n);
  tile_runtime_destroy(a), tile_runtime_destroy(b);
}

Test(nccl, init_rank_runs_on_the_runtimeS_device) {
  tile_runtime *a = fake_runtime(0), *b = fake_runtime(1);
  tile_nccl *n = fake_nccl();
  tile_nccl_id id;
  cr_assert_eq(tile_nccl_unique_id(n, &id), TILE_OK);
  int sum = 0;
  for (int i = 0; i < TILE_NCCL_ID_BYTES; i++)
    sum += id.bytes[i];
  tile_runtime_bind(a); /* device 0 current: the call must switch to b's */
  tile_comm *c = NULL;
  cr_assert_eq(tile_comm_init_rank(n, b, 4, &id, 3, &c), TILE_OK, "%s", tile_last_error());
  char want[128];
  snprintf(want, sizeof want, "init_rank 3 of 4, id sum %d, device 1\n", sum);
  expect_contains(nccl_log(), want);
  cr_expect_eq(tile_comm_rank(c), 3);
  cr_expect_eq(tile_comm_size(c), 4);
  tile_comm *bad = (tile_comm *)&bad;
  cr_expect_eq(tile_comm_init_rank(n, b, 4, &id, 4, &bad), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(bad);
  expect_contains(tile_last_error(), "rank 4 of 4: need 0 <= rank < nranks");
  cr_expect_eq(tile_comm_destroy(c), TILE_OK);
  cr_expect_eq(tile_comm_destroy(NULL), TILE_OK);
  cr_expect_eq(tile_comm_rank(NULL), -1);
  cr_expect_eq(tile_comm_size(NULL), 0);
  tile_nccl_close(n);
  tile_runtime_destroy(a), tile_runtime_destroy(b);
}

/* A real NCCL, where the loader finds one (or TILE_NCCL_LIBRARY names
 * it): it loads, is new enough, and makes ids without a GPU. */
Test(nccl, a_real_nccl_where_installed) {
  tile_nccl *n = NULL;
  if (tile_nccl_open(NULL, &n) != TILE_OK) cr_skip_test("no NCCL here: %s", tile_last_error());
  cr_expect_geq(tile_nccl_version(n), TILE_NCCL_MIN_VERSION);
  tile_nccl_id id;
  memset(&id, 0, sizeof id);
  tile_status st = tile_nccl_unique_id(n, &id);
  if (st == TILE_OK) {
    int nonzero = 0;
    for (int i = 0; i < TILE_NCCL_ID_BYTES; i++)
      nonzero += id.bytes[i] != 0;
    cr_expect_gt(nonzero, 0, "an id of zeros");
  } else {
    cr_expect_eq(st, TILE_ERROR_NCCL, "%s", tile_last_error());
  }
  tile_nccl_close(n);
}
