"""PyTorch workload for the block probe's --budget (scripts/gpu_blocks_toggle.sh).

A GPU-bound stack of pre-norm MLP blocks (LayerNorm -> Linear -> GELU -> Linear,
residual; bf16), run eagerly and as a captured CUDA graph. Under
`twinscope blocks --kernel layer_norm --budget 5` the LayerNorm kernels' module
is patched only around the few sampled launches. Prints one JSON line per
phase with milliseconds per step, so the script compares it with a plain run.

Usage: python blocks_torch_budget.py [--steps N] [--hidden H] [--rows R] [--layers L]
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=8)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("blocks_torch_budget: torch.cuda.is_available() is False: no GPU for PyTorch", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    h = args.hidden
    layers = torch.nn.ModuleList()
    for _ in range(args.layers):
        layers.append(torch.nn.ModuleDict({
            "norm": torch.nn.LayerNorm(h, device=dev, dtype=dt),
            "up": torch.nn.Linear(h, 4 * h, device=dev, dtype=dt),
            "down": torch.nn.Linear(4 * h, h, device=dev, dtype=dt),
        }))
    x0 = torch.randn(args.rows, h, device=dev, dtype=dt)

    @torch.no_grad()
    def step(x):
        for l in layers:
            x = x + l["down"](torch.nn.functional.gelu(l["up"](l["norm"](x))))
        return x

    for _ in range(5):
        y = step(x0)
    torch.cuda.synchronize()

    t0 = time.perf_counter()
    for _ in range(args.steps):
        y = step(x0)
    torch.cuda.synchronize()
    eager_ms = (time.perf_counter() - t0) * 1e3 / args.steps

    static_x = x0.clone()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step(static_x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        static_y = step(static_x)
    g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        g.replay()
    torch.cuda.synchronize()
    graph_ms = (time.perf_counter() - t0) * 1e3 / args.steps

    print(json.dumps({"phase": "eager", "ms_per_step": round(eager_ms, 4), "steps": args.steps}), flush=True)
    print(json.dumps({"phase": "graph", "ms_per_step": round(graph_ms, 4), "steps": args.steps,
                      "checksum": float(static_y.float().abs().mean())}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
