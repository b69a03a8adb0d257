"""Drives SGLang's real Scheduler on the CPU as its event loop does (get_next_batch_to_run, run_batch, process_batch_result; the overlap loop's order with --overlap), with requests arriving between steps; run under the twinscope shim by tests/engines/test_sglang_real.py."""

import argparse
import json
import os
import sys
import tempfile
import time


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


class Receiver:
    """Stands for the scheduler's ZMQ input: hands over each request once the scheduler has launched that many
    batches (forward_ct), and ends the loop (gracefully_exit) once every request has ended."""

    def __init__(self, sch, pending, all_at_once):
        self.sch, self.pending, self.all_at_once = sch, pending, all_at_once
        self.t_end = time.monotonic() + 240

    def recv_requests(self, local_reqs=None):
        s = self.sch
        out = []
        while self.pending and (self.all_at_once or self.pending[0]["step"] <= s.forward_ct):
            r = self.pending.pop(0)
            out.append(request(r["id"], r["prompt"], r["max_tokens"]))
        idle = not out and not self.pending and not s.waiting_queue and s.running_batch.is_empty() and \
            s.chunked_req is None and s.last_batch is None
        if idle or time.monotonic() > self.t_end:
            s.gracefully_exit = True
        return list(local_reqs or ()) + out


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
    process = sch.process_batch_result  # the class's (the adapter's wrapper around SGLang's own)

    def process_batch_result(b, res, *args, **kw):
        out = process(b, res, *args, **kw)
        for q in b.reqs:
            if q.finished() and q.rid not in tokens:
                tokens[q.rid] = [int(x) for x in q.output_ids]
        return out

    sch.process_batch_result = process_batch_result
    sch.request_receiver = Receiver(sch, pending, a.all_at_once)
    sch.run_event_loop()  # SGLang's own loop (normal or overlap), until the receiver says all requests ended
    with open(a.out, "w") as f:
        json.dump({"loops": sch.forward_ct, "overlap": bool(sch.enable_overlap), "tokens": tokens}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
