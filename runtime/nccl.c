/* nccl.c - tile_nccl.h: NCCL loaded with dlopen, its communicators bound
 * to libtile runtimes, and the collectives on libtile streams.
 *
 * NCCL's header is not needed to build this: the few types its functions
 * take are restated below as NCCL defines them in its stable C ABI (the
 * result and enum arguments are ints; a communicator is a pointer; the
 * unique id is 128 bytes passed by value; a cudaStream_t is the driver's
 * CUstream). NCCL runs on the CUDA runtime, which uses each device's
 * primary context, the same context libtile's runtimes use, so buffers and
 * streams pass between the two unchanged. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tile_nccl.h"

/* The library looked for when neither the caller nor the environment names one. */
#define NCCL_DEFAULT_LIBRARY "libnccl.so.2"
/* The environment variable naming the library. */
#define NCCL_LIBRARY_ENV "TILE_NCCL_LIBRARY"
/* Longest library path kept for messages. */
#define NCCL_MAX_PATH 1024

/* NCCL's ncclUniqueId: the bytes, passed by value to ncclCommInitRank. */
typedef struct nccl_unique_id {
  char internal[TILE_NCCL_ID_BYTES];
} nccl_unique_id;

typedef void *nccl_comm;

/* ncclResult_t's success and the data types NCCL numbers (ncclInt8 = 0 ...
 * ncclFloat8e5m2 = 11; -1 here: no NCCL type). */
#define NCCL_SUCCESS 0
#define NCCL_NO_TYPE (-1)

/* X(field, return type, symbol, parameters, required) */
#define NCCL_FUNCTIONS(X)                                                                                              \
  X(get_version, int, "ncclGetVersion", (int *), true)                                                                 \
  X(get_error_string, const char *, "ncclGetErrorString", (int), true)                                                 \
  X(get_last_error, const char *, "ncclGetLastError", (nccl_comm), false)                                              \
  X(get_unique_id, int, "ncclGetUniqueId", (nccl_unique_id *), true)                                                   \
  X(comm_init_rank, int, "ncclCommInitRank", (nccl_comm *, int, nccl_unique_id, int), true)                            \
  X(comm_init_all, int, "ncclCommInitAll", (nccl_comm *, int, const int *), true)                                      \
  X(comm_destroy, int, "ncclCommDestroy", (nccl_comm), true)                                                           \
  X(group_start, int, "ncclGroupStart", (void), true)                                                                  \
  X(group_end, int, "ncclGroupEnd", (void), true)                                                                      \
  X(all_reduce, int, "ncclAllReduce", (const void *, void *, size_t, int, int, nccl_comm, void *), true)               \
  X(reduce_scatter, int, "ncclReduceScatter", (const void *, void *, size_t, int, int, nccl_comm, void *), true)       \
  X(all_gather, int, "ncclAllGather", (const void *, void *, size_t, int, nccl_comm, void *), true)

struct tile_nccl {
  void *library;
  int version;
  char path[NCCL_MAX_PATH];
#define NCCL_FIELD(field, ret, symbol, params, required) ret(*field) params;
  NCCL_FUNCTIONS(NCCL_FIELD)
#undef NCCL_FIELD
};

struct tile_comm {
  tile_nccl *nccl;
  tile_runtime *rt;
  nccl_comm comm;
  int rank, size;
};

/* ---- errors ---------------------------------------------------------------- */

/* TILE_ERROR_NCCL with "what: NCCL error N (text)" and, where NCCL has
 * one, its last error message. */
static tile_status nccl_fail(const tile_nccl *n, nccl_comm comm, int result, const char *what) {
  const char *text = n->get_error_string ? n->get_error_string(result) : NULL;
  const char *last = n->get_last_error ? n->get_last_error(comm) : NULL;
  return tilert_fail(TILE_ERROR_NCCL, "%s: NCCL error %d (%s)%s%s", what, result, text ? text : "no description",
                     last && *last ? ": " : "", last && *last ? last : "");
}

/* ---- the library ------------------------------------------------------------ */

/* Frees the handle. A library that loaded is never unloaded: NCCL starts
 * threads of its own (a bootstrap listener from ncclGetUniqueId on, proxy
 * threads per communicator) that may outlive every handle, and unmapping
 * their code under them would crash the process. Opening it again takes
 * the loaded copy. */
static void free_handle(tile_nccl *n) { free(n); }

static tile_status resolve(tile_nccl *n) {
  void *sym;
#define NCCL_RESOLVE(field, ret, symbol, params, required)                                                             \
  sym = dlsym(n->library, symbol);                                                                                     \
  if (!sym && (required))                                                                                              \
    return tilert_fail(TILE_ERROR_NO_NCCL,                                                                             \
                       "no usable NCCL: %s has no function %s (not NCCL, or an NCCL older than 2.10)", n->path,        \
                       symbol);                                                                                        \
  memcpy(&n->field, &sym, sizeof sym);
  NCCL_FUNCTIONS(NCCL_RESOLVE)
#undef NCCL_RESOLVE
  return TILE_OK;
}

/* "2.28.9" from a version code (both of NCCL's encodings: before 2.9,
 * major * 1000 + minor * 100 + patch). */
static void version_text(int code, char *buf, size_t size) {
  if (code >= 10000)
    snprintf(buf, size, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  else
    snprintf(buf, size, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
}

tile_status tile_nccl_open(const char *library, tile_nccl **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_nccl_open: out is NULL");
  *out = NULL;
  const char *env = getenv(NCCL_LIBRARY_ENV);
  if (!library) library = env && *env ? env : NCCL_DEFAULT_LIBRARY;
  tile_nccl *n = calloc(1, sizeof *n);
  if (!n) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_nccl_open: out of host memory");
  snprintf(n->path, sizeof n->path, "%s", library);
  dlerror();
  n->library = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!n->library) {
    const char *why = dlerror();
    tilert_fail(TILE_ERROR_NO_NCCL,
                "no NCCL: %s could not be loaded (%s); install NCCL 2.10 or newer (libnccl2, or the nvidia-nccl "
                "Python wheel) or set " NCCL_LIBRARY_ENV " to the library's path",
                library, why ? why : "unknown reason");
    free_handle(n);
    return TILE_ERROR_NO_NCCL;
  }
  tile_status st = resolve(n);
  int r = st == TILE_OK ? n->get_version(&n->version) : NCCL_SUCCESS;
  if (st == TILE_OK && r != NCCL_SUCCESS) st = nccl_fail(n, NULL, r, "tile_nccl_open: ncclGetVersion");
  if (st == TILE_OK && n->version < TILE_NCCL_MIN_VERSION) {
    char v[32];
    version_text(n->version, v, sizeof v);
    st = tilert_fail(TILE_ERROR_NO_NCCL, "no usable NCCL: %s is NCCL %s; libtile needs 2.10 or newer (bfloat16)",
                     n->path, v);
  }
  if (st != TILE_OK) {
    free_handle(n);
    return st;
  }
  *out = n;
  return TILE_OK;
}

void tile_nccl_close(tile_nccl *nccl) { free_handle(nccl); }

int tile_nccl_version(const tile_nccl *nccl) { return nccl ? nccl->version : 0; }

const char *tile_nccl_library(const tile_nccl *nccl) { return nccl ? nccl->path : ""; }

tile_status tile_nccl_unique_id(tile_nccl *nccl, tile_nccl_id *id) {
  if (!nccl || !id) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_nccl_unique_id: NULL argument");
  nccl_unique_id u;
  int r = nccl->get_unique_id(&u);
  if (r != NCCL_SUCCESS) return nccl_fail(nccl, NULL, r, "tile_nccl_unique_id: ncclGetUniqueId");
  memcpy(id->bytes, u.internal, sizeof id->bytes);
  return TILE_OK;
}

tile_status tile_nccl_group_start(tile_nccl *nccl) {
  if (!nccl) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_nccl_group_start: nccl is NULL");
  int r = nccl->group_start();
  return r == NCCL_SUCCESS ? TILE_OK : nccl_fail(nccl, NULL, r, "ncclGroupStart");
}

tile_status tile_nccl_group_end(tile_nccl *nccl) {
  if (!nccl) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_nccl_group_end: nccl is NULL");
  int r = nccl->group_end();
  return r == NCCL_SUCCESS ? TILE_OK : nccl_fail(nccl, NULL, r, "ncclGroupEnd");
}

/* ---- communicators ---------------------------------------------------------- */

static tile_comm *wrap_comm(tile_nccl *nccl, tile_runtime *rt, nccl_comm c, int rank, int size) {
  tile_comm *t = calloc(1, sizeof *t);
  if (t) *t = (tile_comm){nccl, rt, c, rank, size};
  return t;
}

tile_status tile_comm_init_all(tile_nccl *nccl, tile_runtime *const *rts, int count, tile_comm **comms) {
  static const char fn[] = "tile_comm_init_all";
  if (!nccl || !rts || !comms) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: NULL argument", fn);
  if (count < 1 || count > TILE_NCCL_MAX_LOCAL_RANKS)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: count is %d: 1 to %d devices", fn, count,
                       TILE_NCCL_MAX_LOCAL_RANKS);
  int devices[TILE_NCCL_MAX_LOCAL_RANKS];
  for (int i = 0; i < count; i++) {
    comms[i] = NULL;
    if (!rts[i]) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: rts[%d] is NULL", fn, i);
    devices[i] = rts[i]->props.ordinal;
    for (int j = 0; j < i; j++)
      if (devices[j] == devices[i])
        return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                           "%s: rts[%d] and rts[%d] are both device %d (one rank per device)", fn, j, i, devices[i]);
  }
  nccl_comm raw[TILE_NCCL_MAX_LOCAL_RANKS] = {0};
  int r = nccl->comm_init_all(raw, count, devices);
  if (r != NCCL_SUCCESS) return nccl_fail(nccl, NULL, r, "tile_comm_init_all: ncclCommInitAll");
  for (int i = 0; i < count; i++) {
    comms[i] = wrap_comm(nccl, rts[i], raw[i], i, count);
    if (!comms[i]) {
      for (int j = 0; j < count; j++) {
        if (j < i) free(comms[j]), comms[j] = NULL;
        nccl->comm_destroy(raw[j]);
      }
      return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
  }
  return TILE_OK;
}

tile_status tile_comm_init_rank(tile_nccl *nccl, tile_runtime *rt, int nranks, const tile_nccl_id *id, int rank,
                                tile_comm **out) {
  static const char fn[] = "tile_comm_init_rank";
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
  *out = NULL;
  if (!nccl || !rt || !id) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: NULL argument", fn);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: rank %d of %d: need 0 <= rank < nranks", fn, rank, nranks);
  /* NCCL takes the calling thread's current device: rt's */
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  nccl_unique_id u;
  memcpy(u.internal, id->bytes, sizeof u.internal);
  nccl_comm raw = NULL;
  int r = nccl->comm_init_rank(&raw, nranks, u, rank);
  if (r != NCCL_SUCCESS) return nccl_fail(nccl, NULL, r, "tile_comm_init_rank: ncclCommInitRank");
  *out = wrap_comm(nccl, rt, raw, rank, nranks);
  if (!*out) {
    nccl->comm_destroy(raw);
    return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  return TILE_OK;
}

tile_status tile_comm_destroy(tile_comm *comm) {
  if (!comm) return TILE_OK;
  /* the device's work first, so no collective is cut off */
  tile_status st = tile_synchronize(comm->rt);
  int r = comm->nccl->comm_destroy(comm->comm);
  if (r != NCCL_SUCCESS && st == TILE_OK)
    st = nccl_fail(comm->nccl, comm->comm, r, "tile_comm_destroy: ncclCommDestroy");
  free(comm);
  return st;
}

int tile_comm_rank(const tile_comm *comm) { return comm ? comm->rank : -1; }
int tile_comm_size(const tile_comm *comm) { return comm ? comm->size : 0; }
tile_runtime *tile_comm_runtime(const tile_comm *comm) { return comm ? comm->rt : NULL; }
tile_nccl *tile_comm_nccl(const tile_comm *comm) { return comm ? comm->nccl : NULL; }

/* ---- collectives ------------------------------------------------------------ */

/* NCCL's number for a tile_dtype, or NCCL_NO_TYPE. */
static int nccl_type(tile_dtype t) {
  switch (t) {
  case TILE_DTYPE_I8: return 0;
  case TILE_DTYPE_U8: return 1;
  case TILE_DTYPE_I32: return 2;
  case TILE_DTYPE_U32: return 3;
  case TILE_DTYPE_I64: return 4;
  case TILE_DTYPE_U64: return 5;
  case TILE_DTYPE_F16: return 6;
  case TILE_DTYPE_F32: return 7;
  case TILE_DTYPE_F64: return 8;
  case TILE_DTYPE_BF16: return 9;
  case TILE_DTYPE_F8E4M3: return 10;
  case TILE_DTYPE_F8E5M2: return 11;
  default: return NCCL_NO_TYPE;
  }
}

/* What every collective checks: the communicator, the type (and the
 * version fp8 needs), the operation, the buffers (send_count and
 * recv_count elements: non-zero and aligned to the element where there
 * are any) and that the stream is the communicator's runtime's. Makes the
 * runtime's context current and gives NCCL's type and the CUstream. */
static tile_status enter(const char *fn, tile_comm *comm, uint64_t send, size_t send_count, uint64_t recv,
                         size_t recv_count, tile_dtype dtype, int op, tile_stream *stream, int *type, CUstream *cs) {
  if (!comm) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the communicator is NULL", fn);
  *type = nccl_type(dtype);
  const tilert_dtype_info *d = (unsigned)dtype <= TILE_DTYPE_F8E5M2 ? tilert_dtype(dtype) : NULL;
  if (*type == NCCL_NO_TYPE || !d)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: NCCL has no %s type", fn, d ? d->name : "such");
  if ((dtype == TILE_DTYPE_F8E4M3 || dtype == TILE_DTYPE_F8E5M2) && comm->nccl->version < TILE_NCCL_FP8_VERSION) {
    char v[32];
    version_text(comm->nccl->version, v, sizeof v);
    return tilert_fail(TILE_ERROR_UNSUPPORTED, "%s: %s collectives need NCCL 2.24 or newer; %s is NCCL %s", fn, d->name,
                       comm->nccl->path, v);
  }
  if (op < TILE_REDUCE_SUM || op > TILE_REDUCE_AVG)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: op is %d: TILE_REDUCE_SUM to TILE_REDUCE_AVG (0 to 4)", fn,
                       op);
  size_t bytes = (size_t)d->bytes;
  const struct {
    const char *name;
    uint64_t ptr;
    size_t count;
  } bufs[2] = {{"send", send, send_count}, {"recv", recv, recv_count}};
  for (int i = 0; i < 2; i++) {
    if (bufs[i].count == 0) continue;
    if (!bufs[i].ptr) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is 0", fn, bufs[i].name);
    if (bufs[i].ptr % bytes)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s (0x%llx) is not aligned to its %zu-byte %s elements", fn,
                         bufs[i].name, (unsigned long long)bufs[i].ptr, bytes, d->name);
    if (bufs[i].count > SIZE_MAX / bytes)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %zu elements of %s overflow a size", fn, bufs[i].count,
                         bufs[i].name);
  }
  tile_status st = tilert_stream_of(comm->rt, stream, cs);
  if (st != TILE_OK) {
    tilert_error_prefix("%s: rank %d", fn, comm->rank);
    return st;
  }
  return tilert_bind(comm->rt);
}

/* The element counts a collective reads and writes on this rank: n of
 * the per-rank count, or n times the ranks. */
static size_t times_ranks(const tile_comm *comm, size_t n) {
  size_t ranks = comm && comm->size > 0 ? (size_t)comm->size : 1;
  return n > SIZE_MAX / ranks ? SIZE_MAX : n * ranks;
}

tile_status tile_all_reduce(tile_comm *comm, uint64_t send, uint64_t recv, size_t count, tile_dtype dtype,
                            tile_reduce_op op, tile_stream *stream) {
  int type;
  CUstream cs;
  tile_status st = enter("tile_all_reduce", comm, send, count, recv, count, dtype, (int)op, stream, &type, &cs);
  if (st != TILE_OK) return st;
  int r = comm->nccl->all_reduce((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, count, type, (int)op,
                                 comm->comm, (void *)cs);
  return r == NCCL_SUCCESS ? TILE_OK : nccl_fail(comm->nccl, comm->comm, r, "tile_all_reduce: ncclAllReduce");
}

tile_status tile_reduce_scatter(tile_comm *comm, uint64_t send, uint64_t recv, size_t recv_count, tile_dtype dtype,
                                tile_reduce_op op, tile_stream *stream) {
  int type;
  CUstream cs;
  tile_status st = enter("tile_reduce_scatter", comm, send, times_ranks(comm, recv_count), recv, recv_count, dtype,
                         (int)op, stream, &type, &cs);
  if (st != TILE_OK) return st;
  int r = comm->nccl->reduce_scatter((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, recv_count, type, (int)op,
                                     comm->comm, (void *)cs);
  return r == NCCL_SUCCESS ? TILE_OK : nccl_fail(comm->nccl, comm->comm, r, "tile_reduce_scatter: ncclReduceScatter");
}

tile_status tile_all_gather(tile_comm *comm, uint64_t send, uint64_t recv, size_t send_count, tile_dtype dtype,
                            tile_stream *stream) {
  int type;
  CUstream cs;
  tile_status st = enter("tile_all_gather", comm, send, send_count, recv, times_ranks(comm, send_count), dtype,
                         TILE_REDUCE_SUM, stream, &type, &cs);
  if (st != TILE_OK) return st;
  int r = comm->nccl->all_gather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, send_count, type, comm->comm,
                                 (void *)cs);
  return r == NCCL_SUCCESS ? TILE_OK : nccl_fail(comm->nccl, comm->comm, r, "tile_all_gather: ncclAllGather");
}
