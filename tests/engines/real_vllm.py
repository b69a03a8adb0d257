"""Drives vLLM's real V1 Scheduler on the CPU as its EngineCore does (schedule, a model output, update_from_output), with requests arriving between steps; run under the twinscope shim by tests/engines/test_vllm_real.py."""

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time


def build(args):
    import torch
    from transformers import LlamaConfig
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    model = tempfile.mkdtemp(prefix="twinscope-vllm-model-")
    atexit.register(shutil.rmtree, model, True)
    LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, max_position_embeddings=1024).save_pretrained(model)
    mc = ModelConfig(model=model, skip_tokenizer_init=True, dtype="float32", max_model_len=1024)
    cc = CacheConfig(block_size=args.block_size, enable_prefix_caching=False)
    cc.num_gpu_blocks = args.num_blocks
    sc = SchedulerConfig(max_num_batched_tokens=args.max_batch_tokens, max_num_seqs=args.max_seqs, max_model_len=1024,
                         is_encoder_decoder=False, async_scheduling=args.async_scheduling)
    vc = VllmConfig(model_config=mc, cache_config=cc, scheduler_config=sc, device_config=DeviceConfig(device="cpu"))
    spec = FullAttentionSpec(block_size=args.block_size, num_kv_heads=4, head_size=16, dtype=torch.float32)
    kvc = KVCacheConfig(num_blocks=args.num_blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
    cls = vc.scheduler_config.get_scheduler_cls()
    return cls(vllm_config=vc, kv_cache_config=kvc, structured_output_manager=StructuredOutputManager(vc),
               log_stats=False, block_size=args.block_size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, help="JSON list of {id, prompt, max_tokens, step}: arrives before that step")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reverse", action="store_true", help="requests that arrive together come in reverse order")
    ap.add_argument("--all-at-once", action="store_true", help="every request arrives before the first step, last first")
    ap.add_argument("--num-blocks", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--max-batch-tokens", type=int, default=64)
    ap.add_argument("--max-seqs", type=int, default=8)
    ap.add_argument("--async-scheduling", action="store_true")
    a = ap.parse_args()
    with open(a.workload) as f:
        work = json.load(f)
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    sch = build(a)
    sys.stderr.write("real vllm: serving with %s\n" % type(sch).__name__)
    sys.stderr.flush()
    pending = sorted(work, key=lambda r: (0 if a.all_at_once else r["step"], r["id"]), reverse=a.reverse or a.all_at_once)
    if not a.all_at_once:
        pending = sorted(pending, key=lambda r: r["step"])  # stable: within a step the order above stays
    results = {r["id"]: [] for r in work}
    loops, queue = 0, []  # the batch queue of async scheduling: (output), processed one step late
    t_end = time.monotonic() + 120
    while time.monotonic() < t_end:
        while pending and (a.all_at_once or pending[0]["step"] <= loops):
            r = pending.pop(0)
            prompt = [(7 * i + len(r["id"])) % 100 + 1 for i in range(r["prompt"])]
            # The OpenAI server's id: chatcmpl-<X-Request-Id>-<8 random hex> (different in each server).
            rid = "chatcmpl-%s-%s" % (r["id"], os.urandom(4).hex())
            sch.add_request(Request(rid, prompt, SamplingParams(max_tokens=r["max_tokens"], ignore_eos=True), None))
        loops += 1
        if not sch.has_requests() and not queue:
            if not pending:
                break
            continue
        out = sch.schedule()
        queue.append(out)
        if a.async_scheduling and len(queue) < 2 and sch.has_requests():
            continue
        done = queue.pop(0)
        ids = list(done.num_scheduled_tokens)
        sampled = []
        for rid in ids:
            req = sch.requests[rid]
            # A token once the prompt is computed: a function of the request and its length (the batches never change it).
            if done.num_scheduled_tokens[rid] + _computed_before(done, rid) >= req.num_prompt_tokens:
                tok = (sum(req.prompt_token_ids[:5]) + 3 * req.num_output_tokens) % 100 + 1
                sampled.append([tok])
            else:
                sampled.append([])
        for rid, s in zip(ids, sampled):
            if s:
                results[_client(rid)].append(s[0])
        sch.update_from_output(done, ModelRunnerOutput(req_ids=ids, sampled_token_ids=sampled))
    while queue:  # async: the outputs still in flight
        done = queue.pop(0)
        sch.update_from_output(done, ModelRunnerOutput(req_ids=list(done.num_scheduled_tokens),
                                                       sampled_token_ids=[[] for _ in done.num_scheduled_tokens]))
    sch.shutdown()
    with open(a.out, "w") as f:
        json.dump({"results": results, "scheduler": type(sch).__name__, "loops": loops}, f)
    return 0


def _computed_before(out, rid):
    for d in out.scheduled_new_reqs:
        if d.req_id == rid:
            return d.num_computed_tokens
    c = out.scheduled_cached_reqs
    return c.num_computed_tokens[c.req_ids.index(rid)]


def _client(rid):
    return rid[len("chatcmpl-") : -9]


if __name__ == "__main__":
    sys.exit(main())
