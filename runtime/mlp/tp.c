/* tp.c - tile_tp.h: the gated MLP split by columns of the gate and up
 * projections and rows of the down projection over the ranks of an NCCL
 * communicator, one all-reduce of the partial outputs, optionally cut
 * into chunks of tokens that overlap the down projection's remaining
 * chunks. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "layer.h"
#include "tile_tp.h"

/* What the layer keeps per local rank. */
typedef struct tp_rank {
  tile_runtime *rt;
  tile_comm *comm; /* NULL in a layer of one rank */
  int rank;        /* the communicator rank: which slices this rank holds */
  tile_mlp *mlp;
  tile_stream *comm_stream;                    /* the chunks' all-reduces; NULL in a layer of one rank */
  tile_event *chunk_ready[TILE_TP_MAX_CHUNKS]; /* a chunk of y_r is written */
  tile_event *reduced;                         /* the last all-reduce is done */
} tp_rank;

struct tile_tp_mlp {
  int local, world;
  tile_nccl *nccl;
  tp_rank ranks[TILE_NCCL_MAX_LOCAL_RANKS];
};

void tile_tp_mlp_destroy(tile_tp_mlp *tp) {
  if (!tp) return;
  for (int i = 0; i < tp->local; i++) {
    tp_rank *r = &tp->ranks[i];
    for (int c = 0; c < TILE_TP_MAX_CHUNKS; c++)
      tile_event_destroy(r->chunk_ready[c]);
    tile_event_destroy(r->reduced);
    tile_stream_destroy(r->comm_stream);
    tile_mlp_destroy(r->mlp);
  }
  free(tp);
}

static tile_status check_comms(const char *fn, tile_runtime *const *rts, tile_comm *const *comms, int local) {
  if (!comms) {
    if (local != 1)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                         "%s: comms is NULL with %d local ranks (only a layer of one rank runs without NCCL)", fn,
                         local);
    return TILE_OK;
  }
  for (int i = 0; i < local; i++) {
    if (!comms[i]) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: comms[%d] is NULL", fn, i);
    if (tile_comm_runtime(comms[i]) != rts[i])
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: comms[%d] is not on rts[%d]'s device", fn, i, i);
    if (tile_comm_size(comms[i]) != tile_comm_size(comms[0]))
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: comms[0] has %d ranks but comms[%d] %d (one communicator)",
                         fn, tile_comm_size(comms[0]), i, tile_comm_size(comms[i]));
    for (int j = 0; j < i; j++)
      if (tile_comm_rank(comms[j]) == tile_comm_rank(comms[i]))
        return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: comms[%d] and comms[%d] are both rank %d", fn, j, i,
                           tile_comm_rank(comms[i]));
  }
  if (tile_comm_size(comms[0]) < local)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %d local ranks in a communicator of %d", fn, local,
                       tile_comm_size(comms[0]));
  return TILE_OK;
}

static tile_status make_rank(tp_rank *r, bool with_comm) {
  tile_status st = tile_mlp_create(r->rt, &r->mlp);
  if (st != TILE_OK || !with_comm) return st;
  st = tile_stream_create(r->rt, &r->comm_stream);
  for (int c = 0; c < TILE_TP_MAX_CHUNKS && st == TILE_OK; c++)
    st = tile_event_create(r->rt, &r->chunk_ready[c]);
  if (st == TILE_OK) st = tile_event_create(r->rt, &r->reduced);
  return st;
}

tile_status tile_tp_mlp_create(tile_runtime *const *rts, tile_comm *const *comms, int local_ranks, tile_tp_mlp **out) {
  static const char fn[] = "tile_tp_mlp_create";
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  *out = NULL;
  if (!rts) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: rts is NULL", fn);
  if (local_ranks < 1 || local_ranks > TILE_NCCL_MAX_LOCAL_RANKS)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: local_ranks is %d: 1 to %d", fn, local_ranks,
                       TILE_NCCL_MAX_LOCAL_RANKS);
  for (int i = 0; i < local_ranks; i++)
    if (!rts[i]) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: rts[%d] is NULL", fn, i);
  tile_status st = check_comms(fn, rts, comms, local_ranks);
  if (st != TILE_OK) return st;
  tile_tp_mlp *tp = calloc(1, sizeof *tp);
  if (!tp) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  tp->local = local_ranks;
  tp->world = comms ? tile_comm_size(comms[0]) : 1;
  tp->nccl = comms ? tile_comm_nccl(comms[0]) : NULL;
  for (int i = 0; i < local_ranks && st == TILE_OK; i++) {
    tp_rank *r = &tp->ranks[i];
    r->rt = rts[i];
    r->comm = comms ? comms[i] : NULL;
    r->rank = comms ? tile_comm_rank(comms[i]) : 0;
    if ((st = make_rank(r, tp->nccl != NULL)) != TILE_OK) tilert_error_prefix("%s: local rank %d", fn, i);
  }
  if (st != TILE_OK) {
    tile_tp_mlp_destroy(tp);
    return st;
  }
  *out = tp;
  return TILE_OK;
}

int tile_tp_mlp_ranks(const tile_tp_mlp *tp) { return tp ? tp->world : 0; }

/* p with d_ff cut to one rank's slice; the message names fn. */
static tile_status slice_problem(const char *fn, const tile_tp_mlp *tp, const tile_mlp_problem *p,
                                 tile_mlp_problem *slice) {
  if (!tp) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_tp_mlp is NULL", fn);
  if (!p) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the problem is NULL", fn);
  tile_status st = layer_check(fn, p->tokens, p->d_model, p->d_ff, p->act);
  if (st != TILE_OK) return st;
  if (p->d_ff % (tp->world * LAYER_DIM_MULTIPLE))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: d_ff (%d) does not split into %d slices of a multiple of %d (16-byte rows)", fn, p->d_ff,
                       tp->world, LAYER_DIM_MULTIPLE);
  *slice = *p;
  slice->d_ff = p->d_ff / tp->world;
  return TILE_OK;
}

size_t tile_tp_mlp_workspace_bytes(const tile_tp_mlp *tp, const tile_mlp_problem *p) {
  tile_mlp_problem s;
  if (slice_problem("tile_tp_mlp_workspace_bytes", tp, p, &s) != TILE_OK) return 0;
  return (size_t)s.tokens * (size_t)s.d_ff * LAYER_ELEM_BYTES;
}

static tile_status check_ranks(const char *fn, const tile_tp_mlp *tp, const tile_tp_mlp_rank *ranks, int chunks) {
  if (!ranks) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: ranks is NULL", fn);
  for (int i = 0; i < tp->local; i++) {
    const tile_tp_mlp_rank *k = &ranks[i];
    const char *names[] = {"y", "x", "w_gate", "w_up", "w_down", "workspace", "residual"};
    const uint64_t ptrs[] = {k->y, k->x, k->w_gate, k->w_up, k->w_down, k->workspace, k->residual};
    for (int j = 0; j < 7; j++) {
      char name[64];
      snprintf(name, sizeof name, "ranks[%d].%s", i, names[j]);
      tile_status st = layer_check_ptr(fn, name, ptrs[j], LAYER_PTR_ALIGN, j == 6);
      if (st != TILE_OK) return st;
    }
    if (chunks > 1 && !k->stream)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                         "%s: ranks[%d].stream is NULL with %d chunks: overlapping needs a stream of the caller's "
                         "(the legacy default stream waits for every other stream)",
                         fn, i, chunks);
  }
  return TILE_OK;
}

/* One all-reduce (sum, in place, bf16) per local rank over `elems` values
 * at byte offset `offset` of each y, in one NCCL group; on the ranks'
 * comm streams (chunked) or their own streams. */
static tile_status all_reduce(tile_tp_mlp *tp, const tile_tp_mlp_rank *ranks, size_t offset, size_t elems,
                              bool on_comm_streams) {
  tile_status st = tile_nccl_group_start(tp->nccl);
  for (int i = 0; i < tp->local && st == TILE_OK; i++) {
    uint64_t y = ranks[i].y + offset;
    tile_stream *s = on_comm_streams ? tp->ranks[i].comm_stream : ranks[i].stream;
    st = tile_all_reduce(tp->ranks[i].comm, y, y, elems, TILE_DTYPE_BF16, TILE_REDUCE_SUM, s);
  }
  tile_status end = tile_nccl_group_end(tp->nccl); /* (ends the group whatever happened in it) */
  return st != TILE_OK ? st : end;
}

tile_status tile_tp_mlp_forward(tile_tp_mlp *tp, const tile_mlp_problem *p, const tile_tp_mlp_rank *ranks,
                                const tile_tp_mlp_options *opt) {
  static const char fn[] = "tile_tp_mlp_forward";
  tile_mlp_problem s;
  tile_status st = slice_problem(fn, tp, p, &s);
  if (st != TILE_OK) return st;
  tile_tp_mlp_options o = opt ? *opt : (tile_tp_mlp_options){TILE_TP_DEFAULT_CHUNKS, TILE_TP_DEFAULT_COMM_SMS};
  uint32_t sms = mlp_programs(tp->ranks[0].mlp);
  if (o.chunks < 1 || o.chunks > TILE_TP_MAX_CHUNKS)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: chunks is %d: 1 to %d", fn, o.chunks, TILE_TP_MAX_CHUNKS);
  if (o.comm_sms < 0 || (uint32_t)o.comm_sms >= sms)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: comm_sms is %d: 0 to %u (the device has %u SMs)", fn,
                       o.comm_sms, sms - 1, sms);
  if (!tp->nccl) o.chunks = 1; /* one rank without NCCL: nothing to reduce, nothing to overlap */
  if ((st = check_ranks(fn, tp, ranks, o.chunks)) != TILE_OK) return st;

  size_t row_y = (size_t)s.d_model * LAYER_ELEM_BYTES, row_h = (size_t)s.d_ff * LAYER_ELEM_BYTES;
  for (int i = 0; i < tp->local && st == TILE_OK; i++)
    st = tile_mlp_gate_up(tp->ranks[i].mlp, &s, ranks[i].workspace, ranks[i].x, ranks[i].w_gate, ranks[i].w_up,
                          ranks[i].stream);
  if (st != TILE_OK) return st;

  if (o.chunks == 1) {
    for (int i = 0; i < tp->local && st == TILE_OK; i++) {
      uint64_t res = tp->ranks[i].rank == 0 ? ranks[i].residual : 0;
      st = mlp_down_on(tp->ranks[i].mlp, &s, ranks[i].y, ranks[i].workspace, ranks[i].w_down, res, ranks[i].stream, 0);
    }
    if (st == TILE_OK && tp->nccl) st = all_reduce(tp, ranks, 0, (size_t)s.tokens * (size_t)s.d_model, false);
    if (st != TILE_OK) tilert_error_prefix("%s", fn);
    return st;
  }

  /* chunks of whole tiles of rows, the last one shorter */
  int block = mlp_down_block_rows(tp->ranks[0].mlp);
  int rows = (s.tokens + o.chunks - 1) / o.chunks;
  rows = (rows + block - 1) / block * block;
  uint32_t programs = sms - (uint32_t)o.comm_sms;
  for (int r0 = 0, c = 0; r0 < s.tokens && st == TILE_OK; r0 += rows, c++) {
    tile_mlp_problem piece = s;
    piece.tokens = s.tokens - r0 < rows ? s.tokens - r0 : rows;
    size_t off_y = (size_t)r0 * row_y, off_h = (size_t)r0 * row_h;
    for (int i = 0; i < tp->local && st == TILE_OK; i++) {
      tp_rank *r = &tp->ranks[i];
      uint64_t res = r->rank == 0 && ranks[i].residual ? ranks[i].residual + off_y : 0;
      st = mlp_down_on(r->mlp, &piece, ranks[i].y + off_y, ranks[i].workspace + off_h, ranks[i].w_down, res,
                       ranks[i].stream, programs);
      if (st == TILE_OK) st = tile_event_record(r->chunk_ready[c], ranks[i].stream);
      if (st == TILE_OK) st = tile_stream_wait_event(r->comm_stream, r->chunk_ready[c]);
    }
    if (st == TILE_OK) st = all_reduce(tp, ranks, off_y, (size_t)piece.tokens * (size_t)s.d_model, true);
  }
  /* the caller's streams wait for the last all-reduce */
  for (int i = 0; i < tp->local && st == TILE_OK; i++) {
    st = tile_event_record(tp->ranks[i].reduced, tp->ranks[i].comm_stream);
    if (st == TILE_OK) st = tile_stream_wait_event(ranks[i].stream, tp->ranks[i].reduced);
  }
  if (st != TILE_OK) tilert_error_prefix("%s", fn);
  return st;
}
