#!/usr/bin/env python3
"""Summary of scripts/gpu_cupti.sh levels: reads its results.jsonl (one line per
phase: {"proc", "variant", "result": {"workload": "levels", "round", "level",
"ns_per_kernel"}}, and for plain processes {"proc", "variant": "plain",
"result": {"workload": "eager_call", "ns_per_kernel"}}) and prints per variant
the median launch call cost at each level over every phase of every process,
then the ratios computed inside one process and round (the three levels ran
back to back in it): added(2) / added(1), where added(L) = ns(L) - ns(0), as
median [10th..90th percentile] over the rounds. Level 0 is CUPTI loaded with
nothing enabled; the plain processes (no injection) show what that costs.
Exits 1 if a variant has no complete round.

Usage: summarize_levels.py <results.jsonl>
"""
import json
import statistics
import sys


def pct(values, q):
    """The q-th quantile (0..1) of values, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main(path):
    levels = {}  # variant -> (proc, round) -> level -> ns
    plain = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        r = j.get("result", {})
        if r.get("workload") == "levels":
            levels.setdefault(j["variant"], {}).setdefault((j["proc"], r["round"]), {})[r["level"]] = r["ns_per_kernel"]
        elif j.get("variant") == "plain" and r.get("workload") == "eager_call":
            plain.append(r["ns_per_kernel"])
    if not levels:
        print("summarize_levels: no level results in", path)
        return 1
    ok = True
    print(f"{'variant':15} {'rounds':>6} {'L0 ns':>7} {'L1 ns':>7} {'L2 ns':>7} {'L1-L0':>6} {'L2-L0':>6} {'L2-L1':>6}"
          f"  added(2)/added(1) per round: median [p10..p90]")
    if plain:
        print(f"{'plain (no inj.)':15} {len(plain):>6} {statistics.median(plain):>7.0f}   "
              f"(eager_call of processes without an injection: compare with L0)")
    for v in sorted(levels, key=lambda v: (v != "twinscope", v)):
        complete = [lv for lv in levels[v].values() if all(l in lv for l in (0, 1, 2))]
        if not complete:
            print(f"{v:15} no complete round")
            ok = False
            continue
        med = {l: statistics.median(lv[l] for lv in complete) for l in (0, 1, 2)}
        d1 = [lv[1] - lv[0] for lv in complete]
        d2 = [lv[2] - lv[0] for lv in complete]
        d21 = [lv[2] - lv[1] for lv in complete]
        ratios = [lv_d2 / lv_d1 for lv_d2, lv_d1 in zip(d2, d1) if lv_d1 > 0]
        rtext = (f"{statistics.median(ratios):.2f} [{pct(ratios, 0.1):.2f}..{pct(ratios, 0.9):.2f}], "
                 f"{len(ratios)} rounds" if ratios else "n/a (added(1) <= 0 in every round)")
        print(f"{v:15} {len(complete):>6} {med[0]:>7.0f} {med[1]:>7.0f} {med[2]:>7.0f} {statistics.median(d1):>+6.0f} "
              f"{statistics.median(d2):>+6.0f} {statistics.median(d21):>+6.0f}  {rtext}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
