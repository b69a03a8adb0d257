"""torch.compile(mode="reduce-overhead") for twinscope on the GPU machine: a small
MLP block compiled by Inductor (Triton kernels, CUDA graphs); Inductor's compile
workers are processes of their own. NVTX step ranges around each call.

usage: compiled.py [--steps N]
"""
import argparse

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    blocks = torch.nn.Sequential(*[
        torch.nn.Sequential(torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 1024)) for _ in range(4)
    ]).to(dev)
    model = torch.compile(blocks, mode="reduce-overhead")
    x = torch.randn(256, 1024, device=dev)
    nvtx = torch.cuda.nvtx
    with torch.no_grad():
        for s in range(a.steps):
            nvtx.range_push(f"step {s}")
            y = model(x)
            nvtx.range_pop()
        torch.cuda.synchronize()
    print(f"compiled: {a.steps} steps, checksum {float(y.sum()):.3f}", flush=True)


if __name__ == "__main__":
    main()
