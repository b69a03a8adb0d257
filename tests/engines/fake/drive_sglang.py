"""Drives the fake SGLang as `python -m sglang.launch_server` runs: this process (the HTTP server) imports sglang and its TokenizerManager, starts the scheduler in a spawned process (as SGLang does), sends it requests by id (the X-Request-Id header) at their arrival times or all at once, last first (as a replay may), then a stop; writes what each request got and the fake GPU's launches as JSON (tests/engines)."""

import argparse
import json
import multiprocessing
import sys
import time

import sglang  # noqa: F401  (the HTTP server imports sglang first: the version is checked there)


class FakeHttpRequest:
    def __init__(self, headers):
        self.headers = {k.lower(): v for k, v in headers.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, help="JSON list of {id, prompt, max_tokens, at[, rid][, no_header]}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--all-at-once", action="store_true")
    ap.add_argument("--max-total-tokens", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=48)
    a = ap.parse_args()
    with open(a.workload) as f:
        work = json.load(f)
    from sglang.srt.managers import scheduler as S
    from sglang.srt.managers.tokenizer_manager import TokenizerManager

    ctx = multiprocessing.get_context("spawn")
    inq, outq = ctx.Queue(), ctx.Queue()
    sa = S.ServerArgs(max_total_tokens=a.max_total_tokens, chunked_prefill_size=a.chunk)
    proc = ctx.Process(target=S.run_scheduler_process, args=(sa, inq, outq))
    proc.start()
    tm = TokenizerManager(lambda obj: inq.put(("add", obj)))
    order = sorted(work, key=lambda r: r["id"], reverse=True) if a.all_at_once else sorted(work, key=lambda r: r["at"])
    t0 = time.monotonic()
    rids = {}
    for r in order:
        if not a.all_at_once:
            time.sleep(max(0.0, r["at"] - (time.monotonic() - t0)))
        prompt = [(7 * i + len(r["id"])) % 100 + 1 for i in range(r["prompt"])]
        obj = S.FakeInput(r.get("rid"), prompt, r["max_tokens"])
        headers = {} if r.get("no_header") else {"X-Request-Id": r["id"]}
        rids[r["id"]] = tm.generate_request(obj, FakeHttpRequest(headers))
    results = {rid: [] for rid in rids.values()}
    left = set(rids.values())
    deadline = time.monotonic() + 30
    while left and time.monotonic() < deadline:
        try:
            kind, rid, tok = outq.get(timeout=0.5)
        except Exception:
            continue
        if kind == "out":
            results.setdefault(rid, []).append(tok)
        elif kind == "done":
            left.discard(rid)
    inq.put(("stop",))
    report = None
    while report is None:
        msg = outq.get(timeout=30)
        if msg[0] == "report":
            report = msg
    proc.join(30)
    with open(a.out, "w") as f:
        json.dump({"results": results, "rids": rids, "unfinished": sorted(left), "launches": report[1],
                   "ranges": report[2], "scheduler_pid": report[3], "exitcode": proc.exitcode}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
