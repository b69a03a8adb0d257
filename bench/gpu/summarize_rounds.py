#!/usr/bin/env python3
"""Summary of scripts/gpu_cupti.sh confirm: reads its results.jsonl (one line
per run result: {"round", "variant", "result": {"workload", "ns_per_kernel"}},
and per traced run {"round", "variant", "workload_set", "check": <cupti_trace_check
output>}) and prints, per workload, each variant's median ns/kernel over the
rounds and the added cost against plain; then the ratio of twinscope's added
cost to the reference's (bare CUPTI floor for the C benchmark, torch.profiler
for PyTorch) computed within each round (the variants of a round ran back to
back), as median [min..max] over the rounds; then whether every traced run
kept its records and keys. Exits 1 if a run is missing or a check failed.

Usage: summarize_rounds.py <results.jsonl>
"""
import json
import statistics
import sys

REFERENCE = {"eager": "bare", "eager_call": "bare", "graph": "bare", "torch_eager": "profiler",
             "torch_graph": "profiler"}


def ratio_text(rounds, plain, by, ref):
    """twinscope's added cost over the reference's, per round: median [min..max]."""
    ratios = []
    for r in rounds:
        if r in plain and r in by[ref] and by[ref][r] - plain[r] > 0:
            ratios.append((rounds[r] - plain[r]) / (by[ref][r] - plain[r]))
    if not ratios:
        return f"n/a ({ref} added <= 0 in every round)"
    return (f"{statistics.median(ratios):.2f} [{min(ratios):.2f}..{max(ratios):.2f}] "
            f"vs {ref}, {len(ratios)} rounds")


def main(path):
    ns = {}  # workload -> variant -> round -> ns/kernel
    checks = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if "check" in j:
            checks.append(j)
        elif "result" in j and "workload" in j["result"]:
            r = j["result"]
            ns.setdefault(r["workload"], {}).setdefault(j["variant"], {})[j["round"]] = r["ns_per_kernel"]
    if not ns:
        print("summarize_rounds: no results in", path)
        return 1
    ok = True
    print(f"{'workload':12} {'variant':10} {'rounds':>6} {'median ns':>10} {'added':>8}  "
          f"{'twinscope added / reference added, per round: median [min..max]':}")
    known = ["eager", "eager_call", "graph", "torch_eager", "torch_graph"]
    for wl in known + sorted(w for w in ns if w not in known):
        if wl not in ns:
            continue
        by = ns[wl]
        ref = REFERENCE.get(wl, "bare")
        plain = by.get("plain", {})
        order = ["plain", "bare", "bare_cb", "profiler"]
        for v in order + sorted(v for v in by if v not in order + ["twinscope"]) + ["twinscope"]:
            if v not in by:
                continue
            rounds = by[v]
            med = statistics.median(rounds.values())
            added = [rounds[r] - plain[r] for r in rounds if r in plain]
            added_s = "-" if v == "plain" or not added else f"{statistics.median(added):+.0f}"
            extra = ""
            if v == "twinscope":
                refs = [ref] + (["bare_cb"] if ref == "bare" and "bare_cb" in by else [])
                extra = "; ".join(ratio_text(rounds, plain, by, r) for r in refs if r in by)
            print(f"{wl:12} {v:10} {len(rounds):>6} {med:>10.0f} {added_s:>8}  {extra}")
        counts = {v: len(r) for v, r in by.items()}
        if len(set(counts.values())) > 1:
            print(f"  {wl}: unequal rounds per variant {counts} (a run failed: see runs.log)")
            ok = False
    for c in checks:
        k = c["check"]
        ctr = k.get("counters", {})
        seen, got = ctr.get("launches_seen", 0), ctr.get("kernel_records", 0)
        bad = []
        if k.get("read_end") != "complete":
            bad.append(f"read {k.get('read_end')}: {k.get('read_message')}")
        if ctr.get("kernel_records_missing", 0) or seen != got:
            bad.append(f"launches_seen {seen} != kernel_records {got}")
        if k.get("kernel_no_key", 0) or k.get("kernel_key_fallback", 0):
            bad.append(f"{k.get('kernel_no_key')} records without key, {k.get('kernel_key_fallback')} by fallback")
        if k.get("launch_records", 0) != seen:
            bad.append(f"{k.get('launch_records')} launch records for {seen} launches")
        drains = ctr.get("launch_ring_full_drains", "absent")
        if bad:
            ok = False
        print(f"check round {c['round']} {c['workload_set']:6}: {seen} launches, {got} kernel records, "
              f"ring-full drains {drains}: {'; '.join(bad) if bad else 'OK'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
