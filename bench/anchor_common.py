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
