"""A long PyTorch run to be SIGKILLed under `twinscope record` (scripts/gpu_cupti.sh sigkill).

Keeps the GPU busy without pause: eager element-wise ops and small matmuls, and
replays of a captured CUDA graph, until --seconds pass (a guard: the script
kills it long before). Every 0.2 s it replaces --progress with one JSON object:
iterations done and time.monotonic_ns(), the clock of the trace header's
start_monotonic_ns, so the script can tell how old the trace's last counters
were at the kill.

Usage: python sigkill_torch.py --progress FILE [--seconds 120]
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--progress", required=True)
    ap.add_argument("--seconds", type=float, default=120)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("sigkill_torch: torch.cuda.is_available() is False: no GPU for PyTorch", file=sys.stderr)
        return 2
    a = torch.randn(256, 256, device="cuda")
    b = torch.randn(256, 256, device="cuda")
    c = torch.zeros(256, 256, device="cuda")

    def step():
        a.mul_(0.999)
        a.add_(b, alpha=0.001)
        c.copy_(a @ b)
        c.relu_()

    # A CUDA graph of 20 steps, captured after a warm-up on a side stream.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(20):
            step()
    torch.cuda.synchronize()

    t0 = time.monotonic()
    last = 0.0
    it = 0
    while time.monotonic() - t0 < args.seconds:
        for _ in range(20):
            step()
        g.replay()
        it += 1
        if it % 10 == 0:
            torch.cuda.synchronize()  # bound the queue: the CPU side stays as busy as the GPU
        now = time.monotonic()
        if now - last >= 0.2:
            last = now
            tmp = args.progress + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"iterations": it, "monotonic_ns": time.monotonic_ns(), "seconds": now - t0}, f)
            os.replace(tmp, args.progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
