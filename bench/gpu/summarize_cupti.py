#!/usr/bin/env python3
"""Summary table of scripts/gpu_cupti.sh bench: reads <logdir>/<variant>.<rep>.json
(JSON lines {"workload", "ns_per_kernel", ...}) and prints, per workload, the
median ns/kernel of each variant, the ns added per kernel against plain, and
twinscope's added cost over the bare-CUPTI floor's (activity only) and over
the floor with the same API callbacks enabled but empty (bare_cb).

Usage: summarize_cupti.py <logdir>
"""
import glob
import json
import os
import statistics
import sys


def main(log):
    data = {}  # workload -> variant -> [ns]
    for path in sorted(glob.glob(os.path.join(log, "*.*.json"))):
        variant = os.path.basename(path).split(".")[0]
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                if "workload" in j:
                    data.setdefault(j["workload"], {}).setdefault(variant, []).append(j["ns_per_kernel"])
    if not data:
        print("no results in", log)
        return 1
    variants = ["plain", "bare", "bare_cb", "twinscope", "profiler"]
    head = ["workload", "variant", "runs", "median ns/kernel", "added ns/kernel", "twinscope/floor",
            "twinscope/floor+cb"]
    rows = []
    for wl in sorted(data):
        med = {v: statistics.median(xs) for v, xs in data[wl].items()}
        plain = med.get("plain")
        for v in variants:
            if v not in med:
                continue
            added = med[v] - plain if plain is not None else None
            ratios = ["", ""]
            for i, base in enumerate(("bare", "bare_cb")):
                if v == "twinscope" and plain is not None and base in med:
                    floor = med[base] - plain
                    ratios[i] = f"{added / floor:.2f}" if floor > 0 else "n/a (floor <= 0)"
            rows.append([wl, v, len(data[wl][v]), f"{med[v]:.0f}",
                         "-" if added is None or v == "plain" else f"{added:+.0f}"] + ratios)
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
