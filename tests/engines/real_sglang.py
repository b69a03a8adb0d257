"""Drives SGLang's real Scheduler on the CPU as its event loop does (get_next_batch_to_run, run_batch, process_batch_result; the overlap loop's order with --overlap), with requests arriving between steps; run under the twinscope shim by tests/engines/test_sglang_real.py."""

import argparse
import json
import os
import sys
import tempfile
import time
from collections import deque


def build(a):
    import sglang  # noqa: F401  (first, as `python -m sglang.launch_server` imports it: the sglang adapter's server)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    model = tempfile.mkdtemp(prefix="twinscope-sglang-model-")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=512, torch_dtype="bfloat16")
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(model)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    import sglang.srt.managers.scheduler as S
    from sglang.srt.server_args import PortArgs, ServerArgs

    sa = ServerArgs(model_path=model, device="cpu", skip_tokenizer_init=True, disable_cuda_graph=True,
                    max_total_tokens=a.max_total_tokens, chunked_prefill_size=a.chunk, max_running_requests=a.max_running,
                    attention_backend="torch_native", sampling_backend="pytorch", dtype="bfloat16",
                    disable_overlap_schedule=not a.overlap, enable_mixed_chunk=a.mixed, random_seed=0)
    pa = PortArgs.init_new(sa)
    # what run_scheduler_process does before it builds the Scheduler
    S.load_plugins()
    S.publish(sa, role="scheduler", ranks=S.SpawnRanks(world_rank=S.spawn_world_rank(sa, tp_rank=0, pp_rank=0),
                                                       dp_rank=S.resolve_spawn_dp_rank(None), gpu_id=0))
    S.configure_scheduler_process(sa, 0, display_tp_rank=None, display_dp_rank=None, display_moe_ep_rank=None)
    return S.Scheduler(sa, pa)


def request(rid, n, max_tokens):
    from array import array

    from sglang.srt.managers.io_struct import TokenizedGenerateReqInput
    from sglang.srt.sampling.sampling_params import SamplingParams

    sp = SamplingParams(max_new_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    sp.normalize(None)
    sp.verify(256)
    seed = sum(ord(c) for c in rid)
    ids = array("q", [(7 * i + seed) % 250 + 1 for i in range(n)])  # no two prompts share a prefix
    return TokenizedGenerateReqInput(rid=rid, input_text=None, input_ids=ids, input_embeds=None, mm_inputs=None,
                                     token_type_ids=None, sampling_params=sp, return_logprob=False, logprob_start_len=-1,
                                     top_logprobs_num=0, token_ids_logprob=None, stream=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True, help="JSON list of {id, prompt, max_tokens, step}: arrives before that step")
    ap.add_argument("--out", required=True)
    ap.add_argument("--all-at-once", action="store_true", help="every request arrives before the first step, last first")
    ap.add_argument("--overlap", action="store_true", help="overlap scheduling (SGLang's default) and its loop")
    ap.add_argument("--mixed", action="store_true", help="--enable-mixed-chunk")
    ap.add_argument("--max-total-tokens", type=int, default=2048)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--max-running", type=int, default=8)
    a = ap.parse_args()
    with open(a.workload) as f:
        work = json.load(f)
    sch = build(a)
    sys.stderr.write("real sglang: serving with %s (overlap %s)\n" % (type(sch).__name__, sch.enable_overlap))
    sys.stderr.flush()
    if a.all_at_once:
        pending = sorted(work, key=lambda r: r["id"], reverse=True)
    else:
        pending = sorted(work, key=lambda r: r["step"])
    tokens = {}

    def proc(b, res):
        sch.process_batch_result(b, res)
        for q in b.reqs:
            if q.finished() and q.rid not in tokens:
                tokens[q.rid] = [int(x) for x in q.output_ids]

    loops, idle = 0, 0
    result_queue = deque()
    t_end = time.monotonic() + 240
    while time.monotonic() < t_end:
        arrived = []
        while pending and (a.all_at_once or pending[0]["step"] <= loops):
            r = pending.pop(0)
            arrived.append(request(r["id"], r["prompt"], r["max_tokens"]))
        if arrived:
            sch.process_input_requests(arrived)
        loops += 1
        plan = sch.get_next_batch_to_run(running_batch=sch.running_batch, last_batch=sch.last_batch)
        sch.running_batch = plan.running_batch
        batch = plan.batch_to_run
        if not a.overlap:  # event_loop_normal
            if batch:
                proc(batch, sch.run_batch(batch))
        else:  # event_loop_overlap (no grammar, no speculative decoding)
            if sch.is_disable_overlap_for_batch(batch, last_batch=sch.last_batch):
                b, res = result_queue.popleft()
                proc(b, res)
                disabled = True
            else:
                disabled = False
            result = None
            if batch:
                result = sch.run_batch(batch)
                sch._apply_war_barrier()
                result_queue.append((batch.copy(), result))
            if sch.last_batch and not disabled:
                b, res = result_queue.popleft()
                proc(b, res)
            sch.launch_batch_sample_if_needed(result, batch)
        sch.last_batch = batch
        if not batch:
            idle += 1
            if not pending and not result_queue and sch.running_batch.is_empty() and not sch.waiting_queue:
                break
    with open(a.out, "w") as f:
        json.dump({"loops": loops, "overlap": bool(sch.enable_overlap), "tokens": tokens}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
