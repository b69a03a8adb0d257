"""torch.profiler (Kineto, a legacy CUPTI client) inside a small PyTorch
program: E eager in-place adds and R replays of a captured graph of 100 adds
under the profiler; prints one JSON line with the number of GPU kernel
events the profiler recorded. scripts/gpu_cupti135.sh runs it alone and
under `twinscope record`: with CUPTI 13.5 the two counts must be equal.

Usage: python torch_profiler_count.py [--eager E] [--replays R]
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eager", type=int, default=2000)
    ap.add_argument("--replays", type=int, default=20)
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        print("torch_profiler_count: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    x = torch.zeros(1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(100):
            x.add_(1)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.eager):
            x.add_(1)
        for _ in range(args.replays):
            g.replay()
        torch.cuda.synchronize()
    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(json.dumps({"torch_kernel_events": kernels, "launched": args.eager + 100 * args.replays,
                      "torch": torch.__version__}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
