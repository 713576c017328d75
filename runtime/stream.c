/* stream.c - streams, events (for timing) and CUDA graphs.
 *
 * Each handle is a small wrapper that remembers its runtime, so calls that
 * take only a stream, event or graph can still make the right context
 * current and report errors through the runtime's log. A NULL tile_stream
 * is the default (legacy) stream. Graphs are made by capturing the work
 * issued to a stream, the cheapest way to replay a fixed sequence of
 * launches (a benchmark loop, a decode step) with one driver call.
 */
#include "internal.h"

tile_status tilert_stream_of(const tile_runtime *rt, const tile_stream *s, CUstream *out) {
  if (!s) {
    *out = NULL;
    return TILE_OK;
  }
  if (s->rt != rt) return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT, "the stream belongs to another tile_runtime");
  *out = s->stream;
  return TILE_OK;
}

/* Counts a created (+1) or destroyed (-1) object of the runtime. */
static void count_live(tile_runtime *rt, long *counter, long delta) {
  tilert_lock(rt);
  *counter += delta;
  tilert_unlock(rt);
}

/* ---- streams ----------------------------------------------------------- */

static tile_status new_stream(tile_runtime *rt, CUstream cs, bool owned, tile_stream **out) {
  tile_stream *s = tilert_calloc(&rt->alloc, sizeof *s);
  if (!s) return TILE_ERROR_OUT_OF_MEMORY;
  *s = (tile_stream){rt, cs, owned};
  count_live(rt, &rt->live.streams, 1);
  *out = s;
  return TILE_OK;
}

tile_status tile_stream_create(tile_runtime *rt, tile_stream **out) {
  if (!out || !rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_stream_create: NULL argument");
  *out = NULL;
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  CUstream cs = NULL;
  CUresult r = rt->drv.stream_create(&cs, CU_STREAM_DEFAULT);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuStreamCreate failed");
  st = new_stream(rt, cs, true, out);
  if (st != TILE_OK) rt->drv.stream_destroy(cs);
  return st;
}

tile_status tile_stream_wrap(tile_runtime *rt, void *cu_stream, tile_stream **out) {
  if (!out || !rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_stream_wrap: NULL argument");
  *out = NULL;
  return new_stream(rt, (CUstream)cu_stream, false, out);
}

void *tile_stream_handle(const tile_stream *s) { return s ? (void *)s->stream : NULL; }

tile_status tile_stream_synchronize(tile_stream *s) {
  if (!s)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "tile_stream_synchronize: stream is NULL (use tile_synchronize for the whole device)");
  tile_status st = tilert_bind(s->rt);
  if (st != TILE_OK) return st;
  CUresult r = s->rt->drv.stream_synchronize(s->stream);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(s->rt, r, TILE_ERROR_CUDA, "cuStreamSynchronize failed");
  return TILE_OK;
}

tile_status tile_stream_destroy(tile_stream *s) {
  if (!s) return TILE_OK;
  tile_runtime *rt = s->rt;
  tile_status st = TILE_OK;
  if (s->owned && (st = tilert_bind(rt)) == TILE_OK) {
    CUresult r = rt->drv.stream_destroy(s->stream);
    if (r != CUDA_SUCCESS) st = tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuStreamDestroy failed");
  }
  count_live(rt, &rt->live.streams, -1);
  tilert_free(&rt->alloc, s, sizeof *s);
  return st;
}

/* ---- events ------------------------------------------------------------ */

tile_status tile_event_create(tile_runtime *rt, tile_event **out) {
  if (!out || !rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_event_create: NULL argument");
  *out = NULL;
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  tile_event *e = tilert_calloc(&rt->alloc, sizeof *e);
  if (!e) return TILE_ERROR_OUT_OF_MEMORY;
  CUresult r = rt->drv.event_create(&e->event, CU_EVENT_DEFAULT);
  if (r != CUDA_SUCCESS) {
    tilert_free(&rt->alloc, e, sizeof *e);
    return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuEventCreate failed");
  }
  e->rt = rt;
  count_live(rt, &rt->live.events, 1);
  *out = e;
  return TILE_OK;
}

tile_status tile_event_record(tile_event *e, tile_stream *s) {
  if (!e) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_event_record: event is NULL");
  CUstream cs = NULL;
  tile_status st = tilert_stream_of(e->rt, s, &cs);
  if (st == TILE_OK) st = tilert_bind(e->rt);
  if (st != TILE_OK) return st;
  CUresult r = e->rt->drv.event_record(e->event, cs);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(e->rt, r, TILE_ERROR_CUDA, "cuEventRecord failed");
  return TILE_OK;
}

tile_status tile_event_synchronize(tile_event *e) {
  if (!e) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_event_synchronize: event is NULL");
  tile_status st = tilert_bind(e->rt);
  if (st != TILE_OK) return st;
  CUresult r = e->rt->drv.event_synchronize(e->event);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(e->rt, r, TILE_ERROR_CUDA, "cuEventSynchronize failed");
  return TILE_OK;
}

tile_status tile_event_elapsed_ms(const tile_event *start, const tile_event *end, float *ms) {
  if (!start || !end || !ms) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_event_elapsed_ms: NULL argument");
  *ms = 0;
  if (start->rt != end->rt)
    return tilert_rt_fail(start->rt, TILE_ERROR_INVALID_ARGUMENT, "tile_event_elapsed_ms: events of two runtimes");
  tile_status st = tilert_bind(start->rt);
  if (st != TILE_OK) return st;
  CUresult r = start->rt->drv.event_elapsed_time(ms, start->event, end->event);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(start->rt, r, TILE_ERROR_CUDA,
                          "cuEventElapsedTime failed (were both events recorded and completed?)");
  return TILE_OK;
}

tile_status tile_event_destroy(tile_event *e) {
  if (!e) return TILE_OK;
  tile_runtime *rt = e->rt;
  tile_status st = tilert_bind(rt);
  if (st == TILE_OK) {
    CUresult r = rt->drv.event_destroy(e->event);
    if (r != CUDA_SUCCESS) st = tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuEventDestroy failed");
  }
  count_live(rt, &rt->live.events, -1);
  tilert_free(&rt->alloc, e, sizeof *e);
  return st;
}

/* ---- graphs ------------------------------------------------------------ */

tile_status tile_graph_begin_capture(tile_stream *s) {
  if (!s)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "tile_graph_begin_capture: stream is NULL (the default stream cannot be captured)");
  tile_status st = tilert_bind(s->rt);
  if (st != TILE_OK) return st;
  /* Thread-local mode: other threads may keep using the driver while this
   * one captures; only this thread's unsafe calls are refused. */
  CUresult r = s->rt->drv.stream_begin_capture(s->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(s->rt, r, TILE_ERROR_CUDA, "cuStreamBeginCapture failed");
  return TILE_OK;
}

static tile_status instantiate(tile_runtime *rt, CUgraph graph, tile_graph **out) {
  CUgraphExec exec = NULL;
  CUresult r = rt->drv.graph_instantiate(&exec, graph, 0);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuGraphInstantiate failed");
  tile_graph *g = tilert_calloc(&rt->alloc, sizeof *g);
  if (!g) {
    rt->drv.graph_exec_destroy(exec);
    return TILE_ERROR_OUT_OF_MEMORY;
  }
  *g = (tile_graph){rt, graph, exec};
  count_live(rt, &rt->live.graphs, 1);
  *out = g;
  return TILE_OK;
}

tile_status tile_graph_end_capture(tile_stream *s, tile_graph **out) {
  if (!out || !s) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_graph_end_capture: NULL argument");
  *out = NULL;
  tile_runtime *rt = s->rt;
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  CUgraph graph = NULL;
  CUresult r = rt->drv.stream_end_capture(s->stream, &graph);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuStreamEndCapture failed (was the capture begun on this stream?)");
  st = instantiate(rt, graph, out);
  if (st != TILE_OK) rt->drv.graph_destroy(graph);
  return st;
}

tile_status tile_graph_launch(const tile_graph *g, tile_stream *s) {
  if (!g) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_graph_launch: graph is NULL");
  CUstream cs = NULL;
  tile_status st = tilert_stream_of(g->rt, s, &cs);
  if (st == TILE_OK) st = tilert_bind(g->rt);
  if (st != TILE_OK) return st;
  CUresult r = g->rt->drv.graph_launch(g->exec, cs);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(g->rt, r, TILE_ERROR_LAUNCH, "cuGraphLaunch failed");
  return TILE_OK;
}

tile_status tile_graph_destroy(tile_graph *g) {
  if (!g) return TILE_OK;
  tile_runtime *rt = g->rt;
  tile_status st = tilert_bind(rt);
  if (st == TILE_OK) {
    CUresult r = rt->drv.graph_exec_destroy(g->exec);
    if (r == CUDA_SUCCESS) r = rt->drv.graph_destroy(g->graph);
    if (r != CUDA_SUCCESS) st = tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "destroying a CUDA graph failed");
  }
  count_live(rt, &rt->live.graphs, -1);
  tilert_free(&rt->alloc, g, sizeof *g);
  return st;
}
