/* test_tp.c - tile_tp.h without a GPU: the tensor-parallel MLP over two
 * devices of the fake driver (fake_cuda.c, which loads the real cubins
 * and logs every launch with its arguments decoded from the kernels'
 * metadata) and the fake NCCL (fake_nccl.c, which logs every call). What
 * is checked is the plan: which kernel runs on which device with which
 * slice and which rows, where the residual goes, which stream each
 * all-reduce is on and what it covers, and the order of the events that
 * tie the streams together. Nothing runs; the GPU suite and the example
 * program (examples/tp_mlp) check the numbers on GPUs. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile_tp.h"
#include "fake_libs.h"

/* Where `want` is in text (fails the test if nowhere), searching from `from`. */
static const char *find(const char *text, const char *from, const char *want) {
  const char *at = strstr(from, want);
  cr_assert(at, "expected '%s' in (from offset %td):\n%s", want, from - text, text);
  return at;
}

#define RANKS 2
#define SMS 132 /* the fake's devices */

typedef struct setup {
  tile_runtime *rt[RANKS];
  tile_nccl *nccl;
  tile_comm *comm[RANKS];
  tile_tp_mlp *tp;
  tile_stream *stream[RANKS];
  tile_tp_mlp_rank rank[RANKS];
} setup;

static void make(setup *s, const tile_mlp_problem *p) {
  for (int r = 0; r < RANKS; r++)
    s->rt[r] = fake_runtime(r);
  cr_assert_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &s->nccl), TILE_OK, "%s", tile_last_error());
  cr_assert_eq(tile_comm_init_all(s->nccl, s->rt, RANKS, s->comm), TILE_OK, "%s", tile_last_error());
  cr_assert_eq(tile_tp_mlp_create(s->rt, s->comm, RANKS, &s->tp), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(tile_tp_mlp_ranks(s->tp), RANKS);
  size_t ws = tile_tp_mlp_workspace_bytes(s->tp, p);
  cr_expect_eq(ws, (size_t)p->tokens * (size_t)(p->d_ff / RANKS) * 2);
  size_t act = (size_t)p->tokens * p->d_model * 2, w = (size_t)p->d_model * (p->d_ff / RANKS) * 2;
  for (int r = 0; r < RANKS; r++) {
    tile_tp_mlp_rank *k = &s->rank[r];
    cr_assert_eq(tile_stream_create(s->rt[r], &s->stream[r]), TILE_OK);
    k->stream = s->stream[r];
    cr_assert_eq(tile_mem_alloc(s->rt[r], act, &k->y), TILE_OK);
    cr_assert_eq(tile_mem_alloc(s->rt[r], act, &k->x), TILE_OK);
    cr_assert_eq(tile_mem_alloc(s->rt[r], act, &k->residual), TILE_OK);
    cr_assert_eq(tile_mem_alloc(s->rt[r], w, &k->w_gate), TILE_OK);
    cr_assert_eq(tile_mem_alloc(s->rt[r], w, &k->w_up), TILE_OK);
    cr_assert_eq(tile_mem_alloc(s->rt[r], w, &k->w_down), TILE_OK);
    cr_assert_eq(tile_mem_alloc(s->rt[r], ws, &k->workspace), TILE_OK);
  }
}

static void unmake(setup *s) {
  tile_tp_mlp_destroy(s->tp);
  for (int r = 0; r < RANKS; r++)
    tile_stream_destroy(s->stream[r]), tile_comm_destroy(s->comm[r]);
  tile_nccl_close(s->nccl);
  for (int r = 0; r < RANKS; r++)
    tile_runtime_destroy(s->rt[r]);
}

Test(tp_mlp, chunked_forward_plans_slices_rows_and_streams) {
  const tile_mlp_problem p = {.tokens = 1000, .d_model = 256, .d_ff = 1024, .act = TILE_MLP_SWIGLU};
  setup s;
  make(&s, &p);
  const int slice = p.d_ff / RANKS, dm = p.d_model;
  tile_tp_mlp_options o = {.chunks = 4, .comm_sms = 16};
  cr_assert_eq(tile_tp_mlp_forward(s.tp, &p, s.rank, &o), TILE_OK, "%s", tile_last_error());
  const char *cl = cuda_log(), *nl = nccl_log();
  char want[512];
  /* each rank's gate/up projection: its slice of the columns, on every SM */
  for (int r = 0; r < RANKS; r++) {
    const tile_tp_mlp_rank *k = &s.rank[r];
    snprintf(want, sizeof want,
             "launch mlp_gate_up grid %dx1x1 on device %d: h=0x%llx[1000x%d] x=0x%llx[1000x%d] w_gate=0x%llx[%dx%d] "
             "w_up=0x%llx[%dx%d] tokens=1000 d_model=%d d_ff=%d\n",
             SMS, r, (unsigned long long)k->workspace, slice, (unsigned long long)k->x, dm,
             (unsigned long long)k->w_gate, dm, slice, (unsigned long long)k->w_up, dm, slice, dm, slice);
    find(cl, cl, want);
  }
  /* chunks of whole 128-row tiles: 250 rows rounded up to 256, so 256,
   * 256, 256 and 232; the down projection leaves 16 SMs to NCCL, adds the
   * residual on rank 0 only, and each chunk is reduced on the layer's own
   * stream after an event of the caller's */
  const int rows[4] = {256, 256, 256, 232};
  const char *at = cl;
  for (int c = 0, r0 = 0; c < 4; r0 += rows[c++]) {
    for (int r = 0; r < RANKS; r++) {
      const tile_tp_mlp_rank *k = &s.rank[r];
      unsigned long long y = k->y + (unsigned long long)r0 * dm * 2,
                         h = k->workspace + (unsigned long long)r0 * slice * 2;
      unsigned long long res = r == 0 ? k->residual + (unsigned long long)r0 * dm * 2 : y; /* (no residual: y) */
      snprintf(want, sizeof want,
               "launch mlp_down grid %dx1x1 on device %d: y=0x%llx[%dx%d] h=0x%llx[%dx%d] w_down=0x%llx[%dx%d] "
               "residual=0x%llx res_stride=%d tokens=%d d_ff=%d d_model=%d\n",
               SMS - 16, r, y, rows[c], dm, h, rows[c], slice, (unsigned long long)k->w_down, slice, dm, res, dm,
               rows[c], slice, dm);
      at = find(cl, at, want);
      snprintf(want, sizeof want, "record event of device %d on a stream of device %d (current %d)\n", r, r, r);
      at = find(cl, at, want);
      snprintf(want, sizeof want, "stream of device %d waits for an event of device %d", r, r);
      at = find(cl, at, want);
    }
  }
  /* the NCCL side: one group per chunk, in place on the chunk of y, bf16
   * sums, never on the caller's stream */
  const char *n = nl;
  for (int c = 0, r0 = 0; c < 4; r0 += rows[c++]) {
    n = find(nl, n, "group_start\n");
    for (int r = 0; r < RANKS; r++) {
      unsigned long long y = s.rank[r].y + (unsigned long long)r0 * dm * 2;
      snprintf(want, sizeof want, "all_reduce rank %d send 0x%llx recv 0x%llx count %d type 9 op 0 stream ", r, y, y,
               rows[c] * dm);
      n = find(nl, n, want);
      char mine[64];
      snprintf(mine, sizeof mine, "stream %p\n", tile_stream_handle(s.stream[r]));
      cr_expect_neq(strncmp(n + strlen(want) - strlen("stream "), mine, strlen(mine)), 0,
                    "chunk %d of rank %d was reduced on the caller's stream", c, r);
    }
    n = find(nl, n, "group_end\n");
  }
  cr_expect_null(strstr(n, "all_reduce"), "more all-reduces than chunks:\n%s", nl);
  /* last: the caller's streams wait for the layer's */
  for (int r = 0; r < RANKS; r++) {
    snprintf(want, sizeof want, "stream of device %d waits for an event of device %d", r, r);
    at = find(cl, at, want);
  }
  unmake(&s);
}

Test(tp_mlp, one_chunk_reduces_on_the_callerS_stream) {
  const tile_mlp_problem p = {.tokens = 7, .d_model = 64, .d_ff = 48, .act = TILE_MLP_GEGLU};
  setup s;
  make(&s, &p);
  s.rank[1].residual = 0; /* (read on rank 0 only anyway) */
  tile_tp_mlp_options o = {.chunks = 1, .comm_sms = 16};
  cr_assert_eq(tile_tp_mlp_forward(s.tp, &p, s.rank, &o), TILE_OK, "%s", tile_last_error());
  const char *cl = cuda_log(), *nl = nccl_log();
  char want[512];
  for (int r = 0; r < RANKS; r++) {
    /* the whole down projection on every SM (nothing overlaps it) */
    snprintf(want, sizeof want, "launch mlp_down grid %dx1x1 on device %d: y=0x%llx[7x64] h=0x%llx[7x24]", SMS, r,
             (unsigned long long)s.rank[r].y, (unsigned long long)s.rank[r].workspace);
    find(cl, cl, want);
    snprintf(want, sizeof want, "all_reduce rank %d send 0x%llx recv 0x%llx count %d type 9 op 0 stream %p\n", r,
             (unsigned long long)s.rank[r].y, (unsigned long long)s.rank[r].y, 7 * 64, tile_stream_handle(s.stream[r]));
    find(nl, nl, want);
  }
  cr_expect_null(strstr(cl, "waits for"), "no stream waits without chunks:\n%s", cl);
  unmake(&s);
}

Test(tp_mlp, forward_checks_the_split_and_the_options) {
  const tile_mlp_problem p = {.tokens = 100, .d_model = 64, .d_ff = 24, .act = TILE_MLP_SWIGLU};
  setup s;
  make(&s, &(tile_mlp_problem){.tokens = 100, .d_model = 64, .d_ff = 32, .act = TILE_MLP_SWIGLU});
  cr_expect_eq(tile_tp_mlp_forward(s.tp, &p, s.rank, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "d_ff (24) does not split into 2 slices of a multiple of 8"), "%s",
            tile_last_error());
  cr_expect_eq(tile_tp_mlp_workspace_bytes(s.tp, &p), 0);
  tile_mlp_problem q = p;
  q.d_ff = 32;
  tile_tp_mlp_options o = {.chunks = 17, .comm_sms = 0};
  cr_expect_eq(tile_tp_mlp_forward(s.tp, &q, s.rank, &o), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "chunks is 17: 1 to 16"), "%s", tile_last_error());
  o = (tile_tp_mlp_options){.chunks = 2, .comm_sms = SMS};
  cr_expect_eq(tile_tp_mlp_forward(s.tp, &q, s.rank, &o), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "comm_sms is 132: 0 to 131"), "%s", tile_last_error());
  o.comm_sms = 8;
  tile_tp_mlp_rank rk[RANKS] = {s.rank[0], s.rank[1]};
  rk[1].stream = NULL;
  cr_expect_eq(tile_tp_mlp_forward(s.tp, &q, rk, &o), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "ranks[1].stream is NULL with 2 chunks"), "%s", tile_last_error());
  rk[1] = s.rank[1], rk[1].w_down += 8;
  cr_expect_eq(tile_tp_mlp_forward(s.tp, &q, rk, &o), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "ranks[1].w_down"), "%s", tile_last_error());
  cr_expect_null(strstr(cuda_log(), "launch"), "a refused call launched something:\n%s", cuda_log());
  unmake(&s);
}

Test(tp_mlp, create_checks_runtimes_and_communicators) {
  tile_runtime *rt[2] = {fake_runtime(0), fake_runtime(1)};
  tile_tp_mlp *tp = (tile_tp_mlp *)&tp;
  cr_expect_eq(tile_tp_mlp_create(rt, NULL, 2, &tp), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(tp);
  cr_expect(strstr(tile_last_error(), "comms is NULL with 2 local ranks"), "%s", tile_last_error());
  tile_nccl *nccl;
  tile_comm *comm[2];
  cr_assert_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &nccl), TILE_OK);
  cr_assert_eq(tile_comm_init_all(nccl, rt, 2, comm), TILE_OK);
  tile_comm *swapped[2] = {comm[1], comm[0]};
  cr_expect_eq(tile_tp_mlp_create(rt, swapped, 2, &tp), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "comms[0] is not on rts[0]'s device"), "%s", tile_last_error());
  cr_expect_eq(tile_tp_mlp_create(rt, comm, 0, &tp), TILE_ERROR_INVALID_ARGUMENT);
  /* one rank without NCCL: the plain fused MLP, and any chunking is moot */
  cr_assert_eq(tile_tp_mlp_create(rt, NULL, 1, &tp), TILE_OK, "%s", tile_last_error());
  cr_expect_eq(tile_tp_mlp_ranks(tp), 1);
  tile_tp_mlp_destroy(tp);
  for (int r = 0; r < 2; r++)
    tile_comm_destroy(comm[r]);
  tile_nccl_close(nccl);
  tile_runtime_destroy(rt[0]), tile_runtime_destroy(rt[1]);
}

Test(tp_mlp, one_rank_over_nccl_runs_the_whole_plan) {
  tile_runtime *rt = fake_runtime(1);
  tile_nccl *nccl;
  tile_comm *comm;
  cr_assert_eq(tile_nccl_open(fake_path("FAKE_NCCL_LIB"), &nccl), TILE_OK);
  cr_assert_eq(tile_comm_init_all(nccl, &rt, 1, &comm), TILE_OK);
  tile_tp_mlp *tp;
  cr_assert_eq(tile_tp_mlp_create(&rt, &comm, 1, &tp), TILE_OK, "%s", tile_last_error());
  const tile_mlp_problem p = {.tokens = 300, .d_model = 64, .d_ff = 64, .act = TILE_MLP_SWIGLU};
  tile_stream *s;
  cr_assert_eq(tile_stream_create(rt, &s), TILE_OK);
  tile_tp_mlp_rank k = {.stream = s};
  uint64_t *ptrs[] = {&k.y, &k.x, &k.w_gate, &k.w_up, &k.w_down, &k.workspace};
  for (int i = 0; i < 6; i++)
    cr_assert_eq(tile_mem_alloc(rt, 1 << 20, ptrs[i]), TILE_OK);
  tile_tp_mlp_options o = {.chunks = 2, .comm_sms = 4};
  cr_assert_eq(tile_tp_mlp_forward(tp, &p, &k, &o), TILE_OK, "%s", tile_last_error());
  /* 150 rows rounded up to 256: one chunk of 256 rows, one of 44 */
  char want[256];
  snprintf(want, sizeof want, "all_reduce rank 0 send 0x%llx recv 0x%llx count %d type 9", (unsigned long long)k.y,
           (unsigned long long)k.y, 256 * 64);
  const char *nl = nccl_log(), *at = find(nl, nl, want);
  unsigned long long y1 = k.y + 256ull * 64 * 2;
  snprintf(want, sizeof want, "all_reduce rank 0 send 0x%llx recv 0x%llx count %d type 9", y1, y1, 44 * 64);
  find(nl, at, want);
  const char *cl = cuda_log();
  find(cl, cl, "launch mlp_down grid 128x1x1 on device 1: y=");
  tile_tp_mlp_destroy(tp);
  tile_stream_destroy(s);
  tile_comm_destroy(comm);
  tile_nccl_close(nccl);
  tile_runtime_destroy(rt);
}
