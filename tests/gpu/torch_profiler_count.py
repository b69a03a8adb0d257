"""torch.profiler (Kineto, a legacy CUPTI client) inside a small PyTorch
program: E eager in-place adds and R replays of a captured graph of 100 adds
under the profiler; prints one JSON line with the number of GPU kernel
events the profiler recorded. scripts/gpu_cupti135.sh runs it alone and
under `twinscope record`: with CUPTI 13.5 the two counts must be equal.

It also checks the events' times across clocks: each cudaLaunchKernel (a
CUPTI runtime record, in CUPTI's clock or translated into Kineto's by the
twinscope guard) must lie inside the aten::add_ op that made it (Kineto's own
CPU clock); a clock error of a microsecond or more shows as launches outside.

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
    events = prof.events()
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    out = {"torch_kernel_events": kernels, "launched": args.eager + 100 * args.replays, "torch": torch.__version__}
    try:
        out.update(launches_inside_ops(events, torch.autograd.DeviceType.CPU))
    except Exception as e:  # the count above must come out whatever happens here
        out["time_check"] = f"error: {e!r}"
    print(json.dumps(out), flush=True)
    return 0


def launches_inside_ops(events, cpu):
    """How many cudaLaunchKernel events lie inside an aten::add_ interval."""
    def spans(pred):
        return sorted((e.time_range.start, e.time_range.end) for e in events if e.device_type == cpu and pred(e.name))
    ops = spans(lambda n: n == "aten::add_")
    launches = spans(lambda n: n.startswith("cudaLaunchKernel"))
    inside, i = 0, 0
    for start, end in launches:
        while i < len(ops) and ops[i][1] < start:
            i += 1
        if i < len(ops) and ops[i][0] <= start and end <= ops[i][1]:
            inside += 1
    return {"launches": len(launches), "launches_inside_ops": inside, "ops": len(ops)}


if __name__ == "__main__":
    sys.exit(main())
