"""A torchrun job for twinscope on the GPU machine: each rank (RANK, WORLD_SIZE
from torchrun) runs NVTX steps of layer_norm, a matmul and silu on the one GPU,
with a gloo barrier per step (NCCL needs one GPU per rank). With --slow-rank R,
rank R does 4x the work in every 10th step: a planted straggler rank.

usage: torchrun --nproc-per-node 2 ranks.py [--steps N] [--slow-rank R]
"""
import argparse
import os

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--slow-rank", type=int, default=-1)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(1024).to(dev)
    w = torch.randn(1024, 1024, device=dev) / 32
    x = torch.randn(4096, 1024, device=dev)
    nvtx = torch.cuda.nvtx
    for s in range(a.steps):
        nvtx.range_push(f"step {s}")
        reps = 4 if (rank == a.slow_rank and s % 10 == 0) else 1
        for _ in range(reps):
            y = torch.nn.functional.silu(ln(x) @ w)
        x = x + 0.001 * y
        nvtx.range_pop()
        torch.cuda.synchronize()
        dist.barrier()
    print(f"rank {rank}: {a.steps} steps, checksum {float(x.sum()):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
