"""What the PyTorch anchor scripts of the benchmarks share: the timing
(CUDA events around each call after warm-up, median of the repetitions,
as the C benchmarks time)."""
import statistics

import torch


def median_ms(fn, warmup=5, reps=30, calls=1):
    """Median milliseconds per call of `reps` timings of `calls` calls
    issued back to back (events around them), after `warmup` calls. With
    calls > 1 the host's launch latency in front of each call is hidden
    (as under a CUDA graph), as bench_time_queued_ms in C."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)
