"""A plain Triton @triton.autotune program (issue 31): five configs of different BLOCK sizes (so
different grids), 100 NVTX steps named "step N", one autotuned launch per step. Run under `twin`
by scripts/gpu_autotune.sh; tests/gpu/autotune/check.py reads the joined result."""
import argparse

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((128, 1), (256, 2), (512, 4), (1024, 4), (2048, 8))],
    key=["n"],
)
@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--n", type=int, default=1 << 22)
    args = ap.parse_args()
    x = torch.randn(args.n, device="cuda")
    y = torch.randn(args.n, device="cuda")
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(args.n, meta["BLOCK"]),)
    for step in range(args.steps):
        torch.cuda.nvtx.range_push(f"step {step}")
        scale_add_kernel[grid](x, y, out, args.n)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    best = getattr(scale_add_kernel, "best_config", None)
    print(f"best config: {best}")


if __name__ == "__main__":
    main()
