/* tile_nccl.h - collectives between GPUs with NCCL, on libtile streams.
 *
 * libtile does not link NCCL: tile_nccl_open loads libnccl.so.2 with
 * dlopen, so a program using this header starts on any machine and,
 * where NCCL is missing or older than 2.10 (the first with bfloat16),
 * gets TILE_ERROR_NO_NCCL with a message naming the library. Every other
 * NCCL failure is TILE_ERROR_NCCL with NCCL's own text.
 *
 * One process driving several GPUs of a host:
 *
 *   tile_runtime *rt[2];                      (tile_config.device = 0, 1)
 *   tile_nccl *nccl;
 *   tile_comm *comm[2];
 *   tile_nccl_open(NULL, &nccl);
 *   tile_comm_init_all(nccl, rt, 2, comm);    (ranks 0 and 1, in that order)
 *   tile_nccl_group_start(nccl);              (one thread, several devices:
 *   for (int r = 0; r < 2; r++)                the calls of one collective
 *     tile_all_reduce(comm[r], buf[r], buf[r], n, TILE_DTYPE_BF16, TILE_REDUCE_SUM, stream[r]);
 *   tile_nccl_group_end(nccl);                 go in one group)
 *
 * One process per GPU: rank 0 makes an id with tile_nccl_unique_id, the
 * program hands its bytes to every other process (a pipe, a file, MPI),
 * and each calls tile_comm_init_rank with its own rank.
 *
 * Collectives are asynchronous on the stream (NULL: the runtime's default
 * stream), as launches are; buffers are device addresses of the
 * communicator's device. Counts are in elements. The library is
 * thread-safe as NCCL is: a communicator is used from one thread at a
 * time. */
#ifndef TILE_NCCL_H
#define TILE_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "tile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The oldest NCCL accepted: 2.10.0, the first with bfloat16 and average
 * reductions (NCCL's version code: major * 10000 + minor * 100 + patch). */
#define TILE_NCCL_MIN_VERSION 21000
/* The first NCCL with fp8 (e4m3, e5m2) collectives: 2.24.0. */
#define TILE_NCCL_FP8_VERSION 22400
/* Bytes of a communicator id (NCCL_UNIQUE_ID_BYTES). */
#define TILE_NCCL_ID_BYTES 128
/* Largest communicator tile_comm_init_all makes in one process: the GPUs
 * of one host (8 on an HGX board), twice over; the ranks' handles live in
 * stack arrays of this size. */
#define TILE_NCCL_MAX_LOCAL_RANKS 16

typedef struct tile_nccl tile_nccl; /* the loaded library */
typedef struct tile_comm tile_comm; /* one rank of a communicator, on one runtime's device */

/* The bytes that name a communicator, from tile_nccl_unique_id, copied
 * unchanged to every process of the job. */
typedef struct tile_nccl_id {
  unsigned char bytes[TILE_NCCL_ID_BYTES];
} tile_nccl_id;

typedef enum tile_reduce_op {
  TILE_REDUCE_SUM = 0,
  TILE_REDUCE_PROD = 1,
  TILE_REDUCE_MAX = 2,
  TILE_REDUCE_MIN = 3,
  TILE_REDUCE_AVG = 4,
} tile_reduce_op;

/* Loads NCCL: the library path or soname given, else the environment's
 * TILE_NCCL_LIBRARY, else "libnccl.so.2" (found by the dynamic loader:
 * LD_LIBRARY_PATH, the system's directories). Checks its version and
 * resolves every function this header uses. */
tile_status tile_nccl_open(const char *library, tile_nccl **out);
/* Frees the handle: destroy its communicators first. NULL is allowed.
 * The library itself stays loaded until the process exits (NCCL's own
 * threads may outlive the handle). */
void tile_nccl_close(tile_nccl *nccl);
/* NCCL's version code (22809 for 2.28.9); 0 for NULL. */
int tile_nccl_version(const tile_nccl *nccl);
/* The path or name the library was loaded from. */
const char *tile_nccl_library(const tile_nccl *nccl);

/* A new communicator id (ncclGetUniqueId), made once by one process. */
tile_status tile_nccl_unique_id(tile_nccl *nccl, tile_nccl_id *id);

/* A communicator over the devices of count runtimes of this process
 * (ncclCommInitAll): comms[i] is rank i on rts[i]'s device. The devices
 * must differ. count 1 to TILE_NCCL_MAX_LOCAL_RANKS. */
tile_status tile_comm_init_all(tile_nccl *nccl, tile_runtime *const *rts, int count, tile_comm **comms);

/* This process's rank of an nranks-wide communicator named by id
 * (ncclCommInitRank), on rt's device. Blocks until every rank has joined. */
tile_status tile_comm_init_rank(tile_nccl *nccl, tile_runtime *rt, int nranks, const tile_nccl_id *id, int rank,
                                tile_comm **out);

/* Waits for the communicator's work, then frees it. NULL is allowed. */
tile_status tile_comm_destroy(tile_comm *comm);

int tile_comm_rank(const tile_comm *comm); /* -1 for NULL */
int tile_comm_size(const tile_comm *comm); /* 0 for NULL */
tile_runtime *tile_comm_runtime(const tile_comm *comm);
tile_nccl *tile_comm_nccl(const tile_comm *comm); /* the library it was made with */

/* Brackets the collectives that one thread issues for several ranks (of
 * one or several communicators), which NCCL then starts together. */
tile_status tile_nccl_group_start(tile_nccl *nccl);
tile_status tile_nccl_group_end(tile_nccl *nccl);

/* recv = op over the ranks of send, count elements on every rank;
 * in place when send == recv. */
tile_status tile_all_reduce(tile_comm *comm, uint64_t send, uint64_t recv, size_t count, tile_dtype dtype,
                            tile_reduce_op op, tile_stream *stream);
/* send holds size * recv_count elements; rank r gets the op over the ranks
 * of elements [r * recv_count, (r + 1) * recv_count). */
tile_status tile_reduce_scatter(tile_comm *comm, uint64_t send, uint64_t recv, size_t recv_count, tile_dtype dtype,
                                tile_reduce_op op, tile_stream *stream);
/* recv holds size * send_count elements: rank r's send at r * send_count. */
tile_status tile_all_gather(tile_comm *comm, uint64_t send, uint64_t recv, size_t send_count, tile_dtype dtype,
                            tile_stream *stream);

#ifdef __cplusplus
}
#endif

#endif /* TILE_NCCL_H */
