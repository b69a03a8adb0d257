"""Drives the fake continuous-batching engine as a server would: requests by id at their arrival times (or all at once, in reverse, as a replay may send them), then a stop; writes what each request got and the fake GPU's launches as JSON (tests/engines)."""

import argparse
import json
import sys
import threading
import time

import transformers  # noqa: F401  (as `transformers serve` does: the package first, then continuous batching)
from transformers.generation.continuous_batching import continuous_api


def cancel_late(m, rid, ids, timeout_s=20.0):
    """Waits until the schedule lists every request as ended (the last step is written while the engine idles),
    then queues request rid and its cancellation together, and waits until the engine has taken both."""
    import os

    path = os.environ.get("TWINSCOPE_SCHEDULE_OUT", "")
    deadline = time.monotonic() + timeout_s
    while True:
        ended = set()
        try:
            with open(path) as f:
                for line in f:
                    d = json.loads(line) if line.strip() else {}
                    if d.get("type") == "step":
                        ended.update(d["finished"] + d["cancelled"])
        except (OSError, ValueError):
            pass
        if ended >= set(ids):
            break
        if time.monotonic() > deadline:
            raise SystemExit("the schedule %s did not list every request as ended in %g s" % (path, timeout_s))
        time.sleep(0.005)
    with m.io_lock:
        m.add_request([5, 6, 7, 8], request_id=rid, max_new_tokens=4)
        m.cancel_request(rid)
    sch = m.batch_processor.scheduler
    while True:
        with m.io_lock:  # the engine takes both queues under it: empty queues and no cancellation left, it is done
            if m.input_queue.empty() and m.cancel_queue.empty() and not sch._requests_to_cancel:
                break
        if time.monotonic() > deadline:
            raise SystemExit("the engine did not take the late request %s in %g s" % (rid, timeout_s))
        time.sleep(0.005)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, help="JSON list of {id, prompt, max_tokens, at}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--all-at-once", action="store_true", help="submit every request at once, last first")
    ap.add_argument("--num-blocks", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=4)
    ap.add_argument("--max-batch-tokens", type=int, default=32)
    ap.add_argument("--scheduler", default="fifo")
    ap.add_argument("--wait-s", type=float, default=20.0)
    ap.add_argument(
        "--die-by-sigterm",
        action="store_true",
        help="after the stop, die by SIGTERM as uvicorn does after its shutdown (no atexit)",
    )
    ap.add_argument(
        "--no-engine-stop",
        action="store_true",
        help="never stop the engine, as `transformers serve` does at its shutdown (its lifespan unloads the model); "
        "the stop comes a little after the last response",
    )
    ap.add_argument(
        "--cancel-late",
        metavar="ID",
        help="once every request has ended and the adapter has written the last step (the engine idles), send request "
        "ID and cancel it at once (both reach the engine together): it ends after the last step",
    )
    a = ap.parse_args()
    with open(a.workload) as f:
        work = json.load(f)
    m = continuous_api.ContinuousBatchingManager(
        num_blocks=a.num_blocks, block_size=a.block_size, max_batch_tokens=a.max_batch_tokens, scheduler_type=a.scheduler
    )
    sys.stderr.write("fake engine: serving\n")
    sys.stderr.flush()
    m.start()
    t0 = time.monotonic()
    order = list(reversed(work)) if a.all_at_once else sorted(work, key=lambda r: r.get("at", 0))
    for r in order:
        if not a.all_at_once:
            delay = t0 + r.get("at", 0) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        prompt = [(7 * i + len(r["id"])) % 40 + 1 for i in range(r["prompt"])]
        m.add_request(prompt, request_id=r["id"], max_new_tokens=r["max_tokens"])
    deadline = time.monotonic() + a.wait_s
    for r in work:
        m.done[r["id"]].wait(max(0.0, deadline - time.monotonic()))
    if a.cancel_late:
        cancel_late(m, a.cancel_late, [r["id"] for r in work])
    if a.no_engine_stop:
        time.sleep(0.3)  # the server's stop comes after the last response; the engine idles meanwhile
    else:
        m.stop()
    gen = m._thread.ident if m._thread else None
    launches = [[where, kernel, grid, tid == gen] for tid, where, kernel, grid in continuous_api.LAUNCHES]
    try:
        from torch.cuda import nvtx

        ranges = [[op, name, tid == gen] for tid, op, name in nvtx.log]
    except ImportError:
        ranges = []
    out = {
        "results": m.results,
        "launches": launches,
        "ranges": ranges,
        "error": repr(m.error) if m.error else None,
        "served": sorted(m.results),
    }
    with open(a.out, "w") as f:
        json.dump(out, f)
    if a.die_by_sigterm:
        import os
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
