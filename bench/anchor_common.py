"""What the PyTorch anchor scripts of the benchmarks share: the timing
(CUDA events around each call after warm-up, median of the repetitions,
as the C benchmarks time)."""
import statistics

import torch


def median_ms(fn, warmup=5, reps=30):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def queued_ms(fn, warmup=5, rounds=9, calls=20):
    """Median milliseconds per call of rounds of calls issued back to back
    (events around each round), as bench_time_queued_ms in C: the device
    time without the host's launch latency in front of each call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)
