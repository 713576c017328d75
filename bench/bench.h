/* bench.h - what the benchmark files of `tile-gpu bench` share
 * (gpu_bench.c holds the table and the timing). */
#ifndef TILE_BENCH_H
#define TILE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_common.h"

/* A row of the final table: value and anchor in `unit`; anchor 0 when
 * the anchor is measured outside this program (its ratio is then left to
 * the script that measures it: bench/attention_anchor.py,
 * bench/mlp_anchor.py). */
void bench_add_row(const char *name, double value, double anchor, const char *unit);

/* Median milliseconds of timed calls of fn after warm-up calls (CUDA
 * events around each call); -1 when a call fails. */
typedef bool (*LaunchFn)(void *ctx);
double bench_time_ms(Gpu *g, LaunchFn fn, void *ctx);
/* Medians of two functions' times measured in alternating rounds (so that
 * the GPU's clock and power state drift alike for both); false when a
 * call fails. */
bool bench_time_pair_ms(Gpu *g, LaunchFn fn_a, void *ctx_a, LaunchFn fn_b, void *ctx_b, double *ms_a, double *ms_b);
/* Median milliseconds per call of rounds of calls issued back to back
 * (events around each round): the device time without the host's launch
 * latency in front of each call, as in a CUDA graph or a stream kept
 * busy. -1 when a call fails. */
double bench_time_queued_ms(Gpu *g, LaunchFn fn, void *ctx);

/* A device buffer of n elements: uniform in [-range, range] (a random
 * pattern of FILL_PATTERN_ELEMS repeated by device copies, so that filling
 * gigabytes takes seconds), or zeros for range 0. 0 on failure. */
uint64_t bench_dev_fill(Gpu *g, const char *elem, size_t n, double range, uint64_t seed);

/* The device-to-device copy's GB/s over buffers of `bytes` (read plus
 * written bytes per second). */
double bench_copy_gbps(Gpu *g, size_t bytes);

/* decode_bench.c: paged decode attention at the anchor shapes. */
void bench_decode(Gpu *g);
/* decode_bench.c: paged prefill against the contiguous forward. */
void bench_prefill(Gpu *g);

/* attention_bench.c: the flash attention forwards and the backward at the
 * anchor shapes (../shared/ANCHORS.md). */
void bench_attention(Gpu *g);

/* mlp_bench.c: the fused MLP and the MoE layers at the anchor shapes. */
void bench_mlp(Gpu *g);

#endif
