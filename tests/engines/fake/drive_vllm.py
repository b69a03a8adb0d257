"""Drives the fake vLLM as `vllm serve` runs: this process (the API server) imports vllm and starts the EngineCore in another process (multiprocessing, fork or spawn, as vLLM does), sends it requests by id at their arrival times (or all at once, last first, as a replay may), then a stop; writes what each request got and the fake GPU's launches as JSON (tests/engines)."""

import argparse
import json
import multiprocessing
import os
import queue
import sys
import threading
import time

import vllm  # noqa: F401  (the API server imports vllm first: the version is checked there)


def engine_core(a, inq, outq):
    """The EngineCore process: its busy loop (EngineCoreProc.run_busy_loop: take requests, step)."""
    from vllm.config import CacheConfig, ParallelConfig, SchedulerConfig, VllmConfig
    from vllm.sampling_params import SamplingParams
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.executor import uniproc_executor
    from vllm.v1.request import Request, RequestStatus

    cc = CacheConfig(block_size=a.block_size)
    cc.num_gpu_blocks = a.num_blocks
    vc = VllmConfig(scheduler_config=SchedulerConfig(max_num_batched_tokens=a.max_batch_tokens, max_num_seqs=a.max_seqs,
                                                     async_scheduling=a.async_scheduling),
                    cache_config=cc, parallel_config=ParallelConfig(a.executor))
    core = EngineCore(vc, uniproc_executor.UniProcExecutor, log_stats=False)
    stop = False
    while not stop:
        block = not core.scheduler.has_requests()
        while True:
            try:
                msg = inq.get(block=block, timeout=None if block else 0)
            except queue.Empty:
                break
            block = False
            if msg[0] == "add":
                _, rid, prompt, max_tokens = msg
                core.scheduler.add_request(Request(rid, prompt, SamplingParams(max_tokens=max_tokens), None))
            elif msg[0] == "abort":
                core.scheduler.finish_requests(msg[1], RequestStatus.FINISHED_ABORTED)
            elif msg[0] == "stop":
                stop = True
        if stop:
            break
        outputs, _ = core.step()
        for items in outputs.values():
            for rid, tokens, finished in items:
                outq.put(("out", rid, tokens, finished))
    core.shutdown()
    try:
        from torch.cuda import nvtx

        ranges = [[op, name, tid == threading.get_ident()] for tid, op, name in nvtx.log]
    except ImportError:
        ranges = []
    launches = [[where, kernel, grid, tid == threading.get_ident()] for tid, where, kernel, grid in uniproc_executor.LAUNCHES]
    outq.put(("report", launches, ranges, os.getpid()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, help="JSON list of {id, prompt, max_tokens, at}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--all-at-once", action="store_true", help="submit every request at once, last first")
    ap.add_argument("--mp", default="fork", choices=("fork", "spawn"), help="how the EngineCore process is started")
    ap.add_argument("--num-blocks", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=4)
    ap.add_argument("--max-batch-tokens", type=int, default=32)
    ap.add_argument("--max-seqs", type=int, default=16)
    ap.add_argument("--executor", default="uni")
    ap.add_argument("--async-scheduling", action="store_true")
    ap.add_argument("--abort", default="", help="a request id to abort once it has its first token")
    ap.add_argument("--wait-s", type=float, default=20.0)
    a = ap.parse_args()
    with open(a.workload) as f:
        work = json.load(f)
    sys.stderr.write("fake vllm: serving\n")
    sys.stderr.flush()
    ctx = multiprocessing.get_context(a.mp)
    inq, outq = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=engine_core, args=(a, inq, outq), name="EngineCore_DP0")
    proc.start()
    t0 = time.monotonic()
    order = list(reversed(work)) if a.all_at_once else sorted(work, key=lambda r: r.get("at", 0))
    engine_ids = {}
    for r in order:
        if not a.all_at_once:
            delay = t0 + r.get("at", 0) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        prompt = [(7 * i + len(r["id"])) % 40 + 1 for i in range(r["prompt"])]
        # As the OpenAI server and the input processor name it: chatcmpl-<X-Request-Id>-<8 random hex>.
        engine_ids[r["id"]] = rid = "chatcmpl-%s-%s" % (r["id"], os.urandom(4).hex())
        inq.put(("add", rid, prompt, r["max_tokens"]))
    results = {r["id"]: [] for r in work}
    client = {v: k for k, v in engine_ids.items()}
    left = set(results)
    deadline = time.monotonic() + a.wait_s
    while left and time.monotonic() < deadline:
        try:
            _, rid, tokens, finished = outq.get(timeout=0.5)
        except queue.Empty:
            continue
        cid = client[rid]
        results[cid].extend(tokens)
        if cid == a.abort and tokens:
            inq.put(("abort", rid))
            left.discard(cid)
        if finished:
            left.discard(cid)
    inq.put(("stop",))
    report = None
    while report is None and time.monotonic() < deadline + 10:
        try:
            msg = outq.get(timeout=0.5)
        except queue.Empty:
            continue
        if msg[0] == "report":
            report = msg
    proc.join(10)
    out = {
        "results": results,
        "launches": report[1] if report else [],
        "ranges": report[2] if report else [],
        "core_pid": report[3] if report else None,
        "api_pid": os.getpid(),
        "exitcode": proc.exitcode,
        "unfinished": sorted(left),
    }
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
