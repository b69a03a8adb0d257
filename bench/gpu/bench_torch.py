"""PyTorch launch-overhead workloads for the CUPTI collector benchmark.

Prints one JSON line per workload with ns per kernel:
  torch_eager: N in-place adds on a 1-element CUDA tensor (one kernel each)
  torch_graph: a captured CUDA graph of 100 such adds, replayed R times
With --profiler the timed loops run inside torch.profiler with CPU and CUDA
activities (the comparison point for the collector).

Usage: python bench_torch.py [--eager N] [--replays R] [--profiler]
"""
import argparse
import contextlib
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eager", type=int, default=100000)
    ap.add_argument("--replays", type=int, default=2000)
    ap.add_argument("--profiler", action="store_true")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bench_torch: torch.cuda.is_available() is False: no GPU for PyTorch", file=sys.stderr)
        return 2
    x = torch.zeros(1, device="cuda")
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()

    if args.profiler:
        from torch.profiler import ProfilerActivity, profile

        ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        ctx = contextlib.nullcontext()

    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(100):
            x.add_(1)
    g.replay()
    torch.cuda.synchronize()

    results = []
    with ctx:
        t0 = time.perf_counter()
        for _ in range(args.eager):
            x.add_(1)
        torch.cuda.synchronize()
        results.append(("torch_eager", args.eager, time.perf_counter() - t0))
        t0 = time.perf_counter()
        for _ in range(args.replays):
            g.replay()
        torch.cuda.synchronize()
        results.append(("torch_graph", args.replays * 100, time.perf_counter() - t0))
    for name, kernels, secs in results:
        print(json.dumps({"workload": name, "kernels": kernels, "seconds": round(secs, 4),
                          "ns_per_kernel": round(secs * 1e9 / kernels, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
