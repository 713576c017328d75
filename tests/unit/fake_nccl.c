/* fake_nccl.c - a stand-in for libnccl.so.2, for testing tile_nccl.h on
 * machines without GPUs (tests/unit/test_devices.c loads it by path).
 *
 * It exports the functions libtile resolves, with NCCL's C ABI restated
 * (ints for the result and the enums, a pointer for a communicator, the
 * 128-byte id by value, a pointer for the stream). Each call is logged
 * with every argument it got (fake_nccl_log()); communicators remember
 * their rank, size and device. FAKE_NCCL_VERSION sets the version code
 * (default 22809, 2.28.9); FAKE_NCCL_FAIL_GROUP_END makes ncclGroupEnd
 * fail with ncclInternalError (3). ncclCommInitRank logs the device of
 * the calling thread's current context, as NCCL takes its device from
 * it, when FAKE_CUDA_LIB names the fake driver (tests/unit/fake_cuda.c).
 * Nothing is reduced: there is no memory behind the addresses. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_log.h"

#define FAKE_ID_BYTES 128
#define FAKE_INTERNAL_ERROR 3

typedef struct fake_id {
  char internal[FAKE_ID_BYTES];
} fake_id;

typedef struct fake_comm {
  int rank, size, device;
} fake_comm;

static char call_log[FAKE_LOG_BYTES];

const char *fake_nccl_log(void) { return call_log; }
void fake_nccl_reset(void) { call_log[0] = '\0'; }

int ncclGetVersion(int *version) {
  const char *env = getenv("FAKE_NCCL_VERSION");
  *version = env ? atoi(env) : 22809;
  return 0;
}

const char *ncclGetErrorString(int result) {
  return result == FAKE_INTERNAL_ERROR ? "fake internal error" : "fake error";
}
const char *ncclGetLastError(void *comm) {
  (void)comm;
  return "the fake's last error";
}

int ncclGetUniqueId(fake_id *id) {
  for (int i = 0; i < FAKE_ID_BYTES; i++)
    id->internal[i] = (char)(i * 7 + 1);
  return 0;
}

static fake_comm *new_comm(int rank, int size, int device) {
  fake_comm *c = malloc(sizeof *c);
  if (c) *c = (fake_comm){rank, size, device};
  return c;
}

int ncclCommInitAll(void **comms, int n, const int *devices) {
  char list[256] = "";
  for (int i = 0; i < n; i++) {
    snprintf(list + strlen(list), sizeof list - strlen(list), " %d", devices[i]);
    comms[i] = new_comm(i, n, devices[i]);
  }
  fake_log_append(call_log, "init_all %d devices:%s", n, list);
  return 0;
}

/* The device of the fake driver's current context on this thread, or -1. */
static int current_device(void) {
  const char *lib = getenv("FAKE_CUDA_LIB");
  void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!h) return -1;
  int device = -1;
  int (*get_current)(int **) = NULL;
  void *sym = dlsym(h, "cuCtxGetCurrent");
  memcpy(&get_current, &sym, sizeof sym);
  int *ctx = NULL; /* the fake's context starts with its device */
  if (get_current && get_current(&ctx) == 0 && ctx) device = *ctx;
  dlclose(h);
  return device;
}

int ncclCommInitRank(void **comm, int nranks, fake_id id, int rank) {
  int sum = 0;
  for (int i = 0; i < FAKE_ID_BYTES; i++)
    sum += (unsigned char)id.internal[i];
  int device = current_device();
  fake_log_append(call_log, "init_rank %d of %d, id sum %d, device %d", rank, nranks, sum, device);
  *comm = new_comm(rank, nranks, device);
  return 0;
}

int ncclCommDestroy(void *comm) {
  fake_comm *c = comm;
  fake_log_append(call_log, "destroy rank %d", c->rank);
  free(c);
  return 0;
}

int ncclGroupStart(void) {
  fake_log_append(call_log, "group_start");
  return 0;
}

int ncclGroupEnd(void) {
  fake_log_append(call_log, "group_end");
  return getenv("FAKE_NCCL_FAIL_GROUP_END") ? FAKE_INTERNAL_ERROR : 0;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, void *comm, void *stream) {
  fake_log_append(call_log, "all_reduce rank %d send %p recv %p count %zu type %d op %d stream %p",
                  ((fake_comm *)comm)->rank, send, recv, count, type, op, stream);
  return 0;
}

int ncclReduceScatter(const void *send, void *recv, size_t count, int type, int op, void *comm, void *stream) {
  fake_log_append(call_log, "reduce_scatter rank %d send %p recv %p count %zu type %d op %d stream %p",
                  ((fake_comm *)comm)->rank, send, recv, count, type, op, stream);
  return 0;
}

int ncclAllGather(const void *send, void *recv, size_t count, int type, void *comm, void *stream) {
  fake_log_append(call_log, "all_gather rank %d send %p recv %p count %zu type %d stream %p", ((fake_comm *)comm)->rank,
                  send, recv, count, type, stream);
  return 0;
}
