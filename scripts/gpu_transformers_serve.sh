#!/usr/bin/env bash
# `transformers serve --continuous-batching` under `twinscope twin --serve` with the engine adapter
# (docs/engines.md): builds the CLI from this tree, makes a small random-initialised Llama-style model
# (save_pretrained into $RUNS/model, no download), and serves 8 concurrent then 16 staggered streaming chat
# requests (greedy, no EOS: every request gets max_tokens) in four runs, then prints a table last:
#   plain   the server alone (no twinscope): the completion_tokens every other run must give
#   record  `twinscope record` of the server with the adapter recording (TWINSCOPE_ROLE=primary): step times alone
#   auto    `twin --serve --kernel index_copy_kernel_impl` (adapter auto: the shadow forces the primary's steps)
#   off     the same with `--engine-adapter off` (the twins batch on their own)
#   engine  no server, no twinscope CLI: tests/engines/real_cb.py (a tiny random Llama on the GPU) as primary,
#           then as shadow forcing its schedule, with synchronous and with async batching: schedules equal?
# Needs, on the GPU machine: /opt/torch/.venv (torch, transformers 5.17.0) and transformers' serving extras as
# cp312 wheels in .whl/ (FACTS: fastapi, starlette, uvicorn, pydantic, pydantic-core, openai, httpx2,
# httpcore2, truststore, jiter, sniffio, typing-inspection, annotated-types, opentelemetry-api,
# typing-extensions>=4.16; about 6 MB); every wheel in .whl/ but nvidia_* and twinscope* is installed into a
# venv layered on the torch venv ($RUNS/venv). transformers serve flags (5.17 cli/serve.py): MODEL (preloaded),
# --continuous-batching, --cb-num-blocks, --cb-max-batch-tokens (always both, or the KV cache takes 90% of free
# memory), --host, --port, --log-level.
# Usage: scripts/gpu_transformers_serve.sh [build-dir] [run...]   (default: build-gpu, engine plain record auto off)
# Logs, schedules, statuses and the table go to $OUT (default gpu-logs)/transformers-serve.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-build-gpu}
shift || true
SCEN=("$@")
((${#SCEN[@]})) || SCEN=(engine plain record auto off)
source scripts/gpu_common.sh
[[ ${ENGINE:-gpu} == cpu ]] || require_gpu "gpu_transformers_serve"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
OUTDIR=${OUT:-gpu-logs}/transformers-serve
RUNS=${TF_RUNS:-/tmp/tf-serve-runs}
rm -rf "$RUNS" && mkdir -p "$RUNS" "$OUTDIR"
PY=${TORCH_PY:-/opt/torch/.venv/bin/python3}
[[ -x $PY ]] || PY=python3
BLOCKS=${CB_NUM_BLOCKS:-1024}
BATCH_TOKENS=${CB_MAX_BATCH_TOKENS:-256}
MAX_TOKENS=${MAX_TOKENS:-48}
PORT=${SERVE_PORT:-18431}
MIRROR=${MIRROR_PORT:-18430}
LOG=$OUTDIR/serve.log
: >"$LOG"
say() { echo "== $*" | tee -a "$LOG"; }

# 1. twinscope, built from this tree (with the mirror: twin --serve needs it).
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  say "build ($BUILD)"
  gpu_build_cli "$BUILD" "$RUNS" twinscope twinscope_cupti twinscope_guard twinscope_blocks
fi
T=$ROOT/$BUILD/bin/twinscope
[[ -x $T ]] || { echo "gpu_transformers_serve: $T was not built" >&2; exit 1; }

# 2. The serving extras, from .whl only (the GPU machine reaches no index).
say "venv with transformers' serving extras ($RUNS/venv)"
"$PY" -m venv --system-site-packages "$RUNS/venv" >>"$LOG" 2>&1
VPY=$RUNS/venv/bin/python
# A venv made from a venv sees only the base interpreter's packages: point it at the torch venv's
# site-packages (torch, transformers) with a .pth file, as scripts/gpu_wheel.sh does.
"$PY" -c 'import site; print(site.getsitepackages()[0])' >"$("$VPY" -c 'import site; print(site.getsitepackages()[0])')/torch-site.pth"
mapfile -t wheels < <(ls .whl/*.whl 2>/dev/null | grep -v -e '/nvidia_' -e '/twinscope')
if ((${#wheels[@]})); then
  "$VPY" -m pip install -q --no-index --find-links .whl "${wheels[@]}" >>"$LOG" 2>&1 || true
fi
if ! "$VPY" -c "import fastapi, uvicorn, openai, pydantic, transformers; print('transformers', transformers.__version__)" \
  2>>"$LOG" | tee -a "$LOG"; then
  echo "gpu_transformers_serve: transformers serve's extras are missing: put their cp312 wheels in .whl/ (see" \
    "this script's header), e.g. pip download --only-binary=:all: --python-version 3.12 --platform" \
    "manylinux2014_x86_64 -d .whl fastapi uvicorn openai pydantic rich" >&2
  exit 1
fi

# 3. A small random-initialised Llama-style model and a byte-level BPE tokenizer trained here.
say "model ($RUNS/model)"
cat >"$RUNS/make_model.py" <<'EOF'
import sys
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = sys.argv[1]
torch.manual_seed(0)
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
text = ["the quick brown fox jumps over the lazy dog %d times, said the profiler" % i for i in range(200)]
tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=1024, special_tokens=["<s>", "</s>", "<pad>"],
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
fast.save_pretrained(out)
cfg = LlamaConfig(vocab_size=len(fast), hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                  num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=4096,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None, torch_dtype="bfloat16")
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.generation_config = GenerationConfig(do_sample=False, eos_token_id=None, bos_token_id=None, pad_token_id=None)
model.save_pretrained(out)
print("model", out, sum(p.numel() for p in model.parameters()), "parameters")
EOF
"$VPY" "$RUNS/make_model.py" "$RUNS/model" >>"$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
SERVER=("$VPY" -m transformers.cli.transformers serve "$RUNS/model" --continuous-batching --cb-num-blocks "$BLOCKS"
  --cb-max-batch-tokens "$BATCH_TOKENS" --host 127.0.0.1 --log-level warning)

# 4. The client: 8 requests at once, then 16 every 0.25 s, streamed to the end; ids client-0..client-23.
cat >"$RUNS/client.py" <<'EOF'
import http.client, json, sys, threading, time

port, model, max_tokens, out = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
res = {}

def one(i):
    words = " ".join(["fox"] * (12 + 9 * (i % 8)))
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "request %d: %s" % (i, words)}],
                       "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    r = {"status": 0, "chunks": 0, "completion_tokens": None}
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json",
                                                          "X-Request-Id": "client-%d" % i})
        resp = c.getresponse()
        r["status"] = resp.status
        for line in resp:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            d = json.loads(line[5:])
            if d.get("usage"):
                r["completion_tokens"] = d["usage"].get("completion_tokens")
            if any((ch.get("delta") or {}).get("content") for ch in d.get("choices") or []):
                r["chunks"] += 1
    except Exception as e:
        r["error"] = repr(e)
    res["client-%d" % i] = r

threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
for t in threads: t.start()
time.sleep(0.5)
for i in range(8, 24):
    t = threading.Thread(target=one, args=(i,)); t.start(); threads.append(t); time.sleep(0.25)
for t in threads: t.join()
json.dump(res, open(out, "w"), indent=1)
print("client:", sum(r["status"] == 200 for r in res.values()), "of", len(res), "got 200")
EOF

wait_health() {  # wait_health PORT SECONDS
  local i
  for ((i = 0; i < $2; i++)); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}

stop_and_wait() {  # stop_and_wait PID SECONDS: SIGINT, then SIGTERM, then SIGKILL
  local pid=$1 i
  kill -INT "$pid" 2>/dev/null
  for ((i = 0; i < $2; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -TERM "$pid" 2>/dev/null && sleep 5
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

SHIM=$ROOT/python/twinscope/engines/shim
for s in "${SCEN[@]}"; do
  say "run $s"
  t0=$SECONDS
  case $s in
    plain | record | record[0-9])
      mkdir -p "$RUNS/$s"
      if [[ $s == plain ]]; then
        "${SERVER[@]}" --port "$PORT" >"$RUNS/$s/server.log" 2>&1 &
      else
        PYTHONPATH=$SHIM${PYTHONPATH:+:$PYTHONPATH} TWINSCOPE_ROLE=primary \
          TWINSCOPE_SCHEDULE_OUT=$RUNS/$s/schedule-primary.jsonl TWINSCOPE_REQUEST_TRACE=$RUNS/$s/requests-primary.jsonl \
          TWINSCOPE_ADAPTER_STATUS=$RUNS/$s/adapter-primary.json \
          "$T" record -o "$RUNS/$s/trace.tsc" -- "${SERVER[@]}" --port "$PORT" >"$RUNS/$s/server.log" 2>&1 &
      fi
      pid=$!
      if wait_health "$PORT" 300; then
        "$VPY" "$RUNS/client.py" "$PORT" "$RUNS/model" "$MAX_TOKENS" "$RUNS/$s/client.json" | tee -a "$LOG"
      else
        say "$s: the server never answered /health (log: $RUNS/$s/server.log)"
      fi
      # transformers serve never stops its generation thread at shutdown: after SIGINT it may not exit at all.
      stop_and_wait "$pid" "${PLAIN_STOP_S:-10}"
      ;;
    auto | auto[0-9] | off)
      args=(twin --serve --kernel index_copy_kernel_impl --listen "127.0.0.1:$MIRROR" -o "$RUNS/$s"
        --schedule "$RUNS/$s/schedule-primary.jsonl")
      [[ $s == off ]] && args+=(--engine-adapter off)
      "$T" "${args[@]}" -- "${SERVER[@]}" --port '{port}' >"$RUNS/$s.twin.log" 2>&1 &
      pid=$!
      if wait_health "$MIRROR" 300; then
        "$VPY" "$RUNS/client.py" "$MIRROR" "$RUNS/model" "$MAX_TOKENS" "$RUNS/$s.client.json" | tee -a "$LOG"
      else
        say "$s: the mirror never answered /health (log: $RUNS/$s.twin.log)"
      fi
      # The stop: the primary stops, then (sequential serving) the shadow replays the logged requests and the
      # twins are joined; allow it the time of the replay.
      stop_and_wait "$pid" "${REPLAY_TIMEOUT:-400}"
      cat "$RUNS/$s.twin.log" >>"$LOG"
      ;;
    engine)
      # The adapter on the real engine without a server: primary, then a shadow given the requests at once in
      # reverse that forces the primary's schedule; sync and async batching (async needs CUDA).
      for mode in sync async; do
        e=$RUNS/engine-$mode
        mkdir -p "$e"
        flag=()
        [[ $mode == async ]] && flag=(--async-batching)
        for role in primary shadow; do
          extra=()
          envs=(PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}" TWINSCOPE_ROLE=$role
            TWINSCOPE_SCHEDULE_OUT="$e/schedule-$role.jsonl" TWINSCOPE_REQUEST_TRACE="$e/requests-$role.jsonl"
            TWINSCOPE_ADAPTER_STATUS="$e/adapter-$role.json")
          if [[ $role == shadow ]]; then
            extra=(--all-at-once)
            envs+=(TWINSCOPE_SCHEDULE_FOLLOW="$e/schedule-primary.jsonl")
          fi
          env "${envs[@]}" "$VPY" tests/engines/real_cb.py --out "$e/$role.json" "${flag[@]}" "${extra[@]}" \
            >"$e/$role.log" 2>&1
        done
        "$VPY" - "$e" <<'PYEOF' | tee -a "$LOG"
import json, os, sys
e = sys.argv[1]
def steps(p):
    try:
        return [{k: v for k, v in json.loads(l).items() if k not in ("start_us", "dur_us")} for l in open(p) if json.loads(l).get("type") == "step"]
    except Exception:
        return []
a, b = steps(os.path.join(e, "schedule-primary.jsonl")), steps(os.path.join(e, "schedule-shadow.jsonl"))
st = json.load(open(os.path.join(e, "adapter-shadow.json"))) if os.path.exists(os.path.join(e, "adapter-shadow.json")) else {}
r = [json.load(open(os.path.join(e, x + ".json"))).get("results") if os.path.exists(os.path.join(e, x + ".json")) else None for x in ("primary", "shadow")]
print("engine %s: %d primary steps (%d mixed), shadow %d, equal %s, forced %s, tokens equal %s, shadow adapter: %s" % (
    os.path.basename(e), len(a), sum(s["kind"] == "mixed" for s in a), len(b), bool(a) and a == b,
    st.get("forced_steps"), r[0] == r[1] and r[0] is not None, st.get("message")))
PYEOF
      done
      ;;
    *) say "unknown run $s" ;;
  esac
  say "$s: $((SECONDS - t0)) s"
done

# 5. Each run's primary trace as Chrome JSON (its kernels carry their launch key: the step range they ran in), for the
# GPU time of each step (tests/gpu/serve/step_gpu_time.py reads them).
for s in "${SCEN[@]}"; do
  case $s in
    record | record[0-9] | auto | auto[0-9])
      tsc=$(find "$RUNS/$s" -name '*.tsc' -path '*primary*' 2>/dev/null | head -1)
      [[ $s == record* ]] && tsc=$RUNS/$s/trace.tsc
      [[ -f $tsc ]] && "$T" export --format chrome --trace-only -o "$RUNS/$s/primary-chrome.json" "$tsc" >>"$LOG" 2>&1
      ;;
  esac
done

# 6. The table.
cat >"$RUNS/table.py" <<'EOF'
import json, os, statistics, sys

runs = sys.argv[1]

def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except Exception:
        return None

def steps(p):
    try:
        with open(p) as f:
            return [json.loads(l) for l in f if l.strip() and json.loads(l).get("type") == "step"]
    except Exception:
        return []

def walk(x, pred, out):
    if isinstance(x, dict):
        if pred(x):
            out.append(x)
        for v in x.values():
            walk(v, pred, out)
    elif isinstance(x, list):
        for v in x:
            walk(v, pred, out)
    return out

def cut(ss):
    return [{k: v for k, v in s.items() if k not in ("start_us", "dur_us")} for s in ss]

def median_us(ss):
    d = [s["dur_us"] for s in ss if isinstance(s.get("dur_us"), int)]
    return "%.0f us" % statistics.median(d) if d else "-"

def decode_medians(ss):
    """Median dur_us of the decode steps of each batch size: steps of one size do the same work in any run."""
    by = {}
    for s in ss:
        if s.get("kind") == "decode" and isinstance(s.get("dur_us"), int):
            by.setdefault(len(s["batch"]), []).append(s["dur_us"])
    return {k: statistics.median(v) for k, v in by.items()}

def ids_consistent(join, sched):
    """Client ids in join.json whose steps equal the schedule's steps naming them, and whose scheduled tokens add
    up to prompt + completion - 1 (the last generated token is never fed back)."""
    rows = ((join or {}).get("requests") or {}).get("rows") or []
    steps, tokens = {}, {}
    for s in sched:
        for b in s["batch"]:
            steps.setdefault(b["id"], []).append(s["step"])
            tokens[b["id"]] = tokens.get(b["id"], 0) + b["tokens"]
    ok = 0
    for r in rows:
        i = r.get("id")
        if i in steps and r.get("steps") == steps[i] and \
                tokens[i] == (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0) - 1:
            ok += 1
    return ok, len(rows)

plain = load(os.path.join(runs, "plain", "client.json")) or {}
rows = [("run", "requests 200 (client)", "completion_tokens = plain", "primary target launches in served steps", "exact",
         "diverged", "shadow-only", "schedule equal", "client ids in join.json", "overlapped primary kernels",
         "median step (dur_us)", "adapters (primary / shadow)")]
names = [n for n in ("plain", "record", "record2", "auto", "auto2", "off")
         if os.path.isdir(os.path.join(runs, n)) or os.path.exists(os.path.join(runs, n + ".client.json"))]
for name in names:
    client = load(os.path.join(runs, name, "client.json")) or load(os.path.join(runs, name + ".client.json")) or {}
    ok = sum(r.get("status") == 200 for r in client.values())
    same = sum(1 for k, r in client.items() if k in plain and r.get("completion_tokens") == plain[k].get("completion_tokens")
               and r.get("chunks") == plain[k].get("chunks"))
    d = os.path.join(runs, name)
    join = load(os.path.join(d, "join.json"))
    head = walk(join, lambda x: "exact" in x and "shadow_launches" in x and "unmatched_shadow" in x, [])[:1] if join else []
    h = head[0] if head else {}
    st = walk(join, lambda x: "step" in x and "kind" in x and "target_launches" in x, []) if join else []
    in_steps = sum(len(x["target_launches"]) if isinstance(x["target_launches"], list) else int(x["target_launches"] or 0) for x in st)
    text = json.dumps(join) if join else ""
    ids = sum(('"client-%d"' % i) in text for i in range(24))
    sp, ss = steps(os.path.join(d, "schedule-primary.jsonl")), steps(os.path.join(d, "schedule-shadow.jsonl"))
    equal = ("yes (%d steps)" % len(sp) if sp and cut(sp) == cut(ss) else "no (%d vs %d steps)" % (len(sp), len(ss))) if sp else "-"
    ad = [load(os.path.join(d, "adapter-%s.json" % side)) or {} for side in ("primary", "shadow")]
    rows.append((name, "%d/%d" % (ok, len(client)), "%d/%d" % (same, len(plain)), in_steps or "-",
                 h.get("exact", "-"), h.get("diverged", "-"), h.get("unmatched_shadow", "-"), equal,
                 "%d/24" % ids if join else "-", h.get("overlapped_primary_kernels", "-"),
                 median_us(sp),
                 " / ".join("%s %s" % (a.get("mode", "-"), a.get("forced_steps", "")) for a in ad)))
print("transformers serve --continuous-batching under twin --serve (runs in %s)" % runs)
for r in zip(*rows):
    print("%-42s" % r[0] + "".join("%-22s" % str(c) for c in r[1:]))
# The primary under twin --serve against the same server under record alone: all steps, and decode steps of equal
# batch size (the two runs' batches differ with arrival times; a decode step of N requests is the same work).
rec, auto = steps(os.path.join(runs, "record", "schedule-primary.jsonl")), steps(os.path.join(runs, "auto", "schedule-primary.jsonl"))
if rec and auto:
    a, b = [s["dur_us"] for s in rec], [s["dur_us"] for s in auto]
    print("median step: record %.0f us (%d steps), auto primary %.0f us (%d steps): ratio %.3f" % (
        statistics.median(a), len(a), statistics.median(b), len(b), statistics.median(b) / statistics.median(a)))
    ma, mb = decode_medians(rec), decode_medians(auto)
    common = sorted(set(ma) & set(mb))
    if common:
        ratios = [mb[k] / ma[k] for k in common]
        print("decode steps by batch size (record us / auto us): " + ", ".join("%d: %.0f/%.0f" % (k, ma[k], mb[k]) for k in common))
        print("median of the per-size ratios auto/record: %.3f over %d sizes" % (statistics.median(ratios), len(common)))
j = load(os.path.join(runs, "auto", "join.json"))
if j and auto:
    ok, n = ids_consistent(j, auto)
    print("auto: client ids whose join.json steps equal the schedule's and whose tokens add up: %d of %d" % (ok, n))
EOF
"$VPY" "$RUNS/table.py" "$RUNS" | tee "$OUTDIR/table.txt"
"$VPY" tests/gpu/serve/step_gpu_time.py "$RUNS" "${SCEN[@]}" | tee -a "$OUTDIR/table.txt"
for s in auto off record; do
  for f in "$RUNS/$s"/adapter-*.json "$RUNS/$s"/schedule-*.jsonl "$RUNS/$s"/requests-*.jsonl "$RUNS/$s/twin.json"; do
    if [[ -f $f ]]; then cp "$f" "$OUTDIR/$s-$(basename "$f")"; fi
  done
done
