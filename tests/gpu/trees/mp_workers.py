"""A process tree for twinscope on the GPU machine: the parent touches CUDA, then
starts two worker processes (multiprocessing, spawn), each running NVTX steps of
silu and a matmul. Deterministic given its arguments, so the primary's and the
shadow's workers launch the same kernels under the same ranges.

usage: mp_workers.py [--workers N] [--steps N]
"""
import argparse

import torch
import torch.multiprocessing as mp


def worker(rank, steps):
    torch.manual_seed(rank)
    dev = torch.device("cuda")
    x = torch.randn(2048, 1024, device=dev)
    w = torch.randn(1024, 1024, device=dev) / 32
    nvtx = torch.cuda.nvtx
    for s in range(steps):
        nvtx.range_push(f"step {s}")
        x = torch.nn.functional.silu(x @ w)
        nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"worker {rank}: {steps} steps, checksum {float(x.float().sum()):.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    torch.zeros(1, device="cuda")  # the parent initializes CUDA too
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r, a.steps)) for r in range(a.workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
