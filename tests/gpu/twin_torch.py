"""A PyTorch workload for `twinscope twin` on the GPU machine: NVTX step
ranges, eager steps and CUDA-graph replays of the same forward pass.

Deterministic given its arguments (seeded weights and inputs, fixed shapes),
so a primary and a shadow of it launch the same kernels under the same NVTX
paths: every shadow launch of the target kernel should match a primary kernel
exactly by launch key. Prints one line per phase with its time per step.

usage: twin_torch.py [--hidden H] [--tokens T] [--layers L] [--eager N] [--replays N]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--eager", type=int, default=20)
    ap.add_argument("--replays", type=int, default=50)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(a.layers):
        ln = torch.nn.LayerNorm(a.hidden).to(dev, torch.bfloat16)
        lin = torch.nn.Linear(a.hidden, a.hidden, bias=False).to(dev, torch.bfloat16)
        layers.append((ln, lin))
    x0 = torch.randn(a.tokens, a.hidden, device=dev, dtype=torch.bfloat16)

    def forward(x):
        for ln, lin in layers:
            x = torch.softmax(lin(ln(x)), dim=-1) + x
        return x

    nvtx = torch.cuda.nvtx
    with torch.no_grad():
        t = time.perf_counter()
        for _ in range(a.eager):
            nvtx.range_push("eager_step")
            y = forward(x0)
            nvtx.range_pop()
        torch.cuda.synchronize()
        eager_ms = (time.perf_counter() - t) * 1e3 / max(1, a.eager)

        static_x = x0.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                forward(static_x)  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = forward(static_x)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(a.replays):
            nvtx.range_push("graph_step")
            g.replay()
            nvtx.range_pop()
        torch.cuda.synchronize()
        graph_ms = (time.perf_counter() - t) * 1e3 / max(1, a.replays)
    print(f"twin_torch: eager {a.eager} steps {eager_ms:.3f} ms/step, graph {a.replays} replays {graph_ms:.3f} ms/replay, "
          f"checksum {float(static_y.float().sum()):.3f} {float(y.float().sum()):.3f}", flush=True)


if __name__ == "__main__":
    main()
