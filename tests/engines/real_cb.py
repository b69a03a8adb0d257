"""A check of the transformers adapter on the real continuous-batching engine (transformers 5.17 and torch installed; CPU or GPU, no server): a tiny random Llama serves requests by id under TWINSCOPE_* as `twin --serve` sets them; run it as primary, then as shadow with the primary's schedule (docs/engines.md)."""

import argparse
import json
import sys
import time

import torch
import transformers
from transformers import ContinuousBatchingConfig, GenerationConfig, LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--all-at-once", action="store_true", help="every request at once, last first (as a replay)")
    ap.add_argument("--at-once", action="store_true", help="every request at once, in order (a primary that does not "
                    "depend on the machine's speed)")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--num-blocks", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--max-batch-tokens", type=int, default=64)
    ap.add_argument("--async-batching", action="store_true")
    ap.add_argument("--cancel-late", action="store_true",
                    help="once every request is served and the engine idles, send one more and cancel it at once")
    a = ap.parse_args()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(a.device).eval()
    gen = GenerationConfig(do_sample=False, max_new_tokens=16, eos_token_id=-1)
    cb = ContinuousBatchingConfig(num_blocks=a.num_blocks, block_size=a.block_size, max_batch_tokens=a.max_batch_tokens,
                                  use_cuda_graph=False, use_async_batching=a.async_batching)
    m = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    m.start()
    work = [("req-%d" % i, [(5 * i + j) % 200 + 1 for j in range(7 + 11 * i)], 6 + 2 * i) for i in range(a.requests)]
    order = list(reversed(work)) if a.all_at_once else work
    at_once = a.all_at_once or a.at_once
    # At once: no thread switch between the adds (they only queue), so the engine's loop takes them all in one go.
    interval = sys.getswitchinterval()
    if at_once:
        sys.setswitchinterval(5.0)
    try:
        for k, (rid, ids, n) in enumerate(order):
            if not at_once and k:
                time.sleep(0.05 if k < 4 else 0.2)
            m.add_request(ids, request_id=rid, max_new_tokens=n)
    finally:
        sys.setswitchinterval(interval)
    got = {}
    deadline = time.monotonic() + 120
    while len(got) < len(work) and time.monotonic() < deadline:
        r = m.get_result(timeout=1)
        if r is not None and r.is_finished():
            got[r.request_id] = list(r.generated_tokens)
    if a.cancel_late:
        time.sleep(0.5)  # the engine idles past its last step
        # The add and the cancel reach the engine's loop together (no thread switch between them), so the request is
        # cancelled before any step schedules it: it ends after the last step, on the end line.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(5.0)
        try:
            m.add_request(work[0][1], request_id="late-cancel", max_new_tokens=4)
            m.cancel_request("late-cancel")
        finally:
            sys.setswitchinterval(interval)
        time.sleep(0.5)
    m.stop(block=True)
    with open(a.out, "w") as f:
        json.dump({"transformers": transformers.__version__, "results": got}, f)
    print("served", len(got), "of", len(work))
    return 0 if len(got) == len(work) else 1


if __name__ == "__main__":
    sys.exit(main())
