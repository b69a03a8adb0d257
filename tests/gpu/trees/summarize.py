"""Summarizes scripts/gpu_trees.sh's runs as one table: per scenario, the exit code, traces per side,
pairs, and per pair the shadow's traced launches, exact matches (and the rate), diverged, time-only and
the primary's target launches left unmatched; for runs with ranks, the steps where a rank stood out.

usage: summarize.py RUNS_DIR
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def join_row(j):
    s = (j or {}).get("summary", {})
    shadow = s.get("shadow_launches", 0)
    exact = s.get("exact", 0)
    rate = f"{100.0 * exact / shadow:.1f}%" if shadow else "-"
    return (f"shadow {shadow}, exact {exact} ({rate}), diverged {s.get('diverged', '-')}, "
            f"time-only {s.get('time_only', 0)}, primary unmatched {s.get('primary_target_unmatched', 0)}, "
            f"shape-differs-called-exact {s.get('exact_shape_differs', 0)}")


def main():
    runs = sys.argv[1]
    rcs = {}
    if os.path.exists(os.path.join(runs, "rcs.txt")):
        for line in open(os.path.join(runs, "rcs.txt")):
            label, rc, secs = line.split()
            rcs[label] = (rc, secs)
    print("| scenario | exit | seconds | traces (primary/shadow) | pairs | joins |")
    print("|---|---|---|---|---|---|")
    for label, (rc, secs) in rcs.items():
        d = os.path.join(runs, label)
        sides = []
        for side in ("primary", "shadow"):
            p = os.path.join(d, side)
            sides.append(str(len([f for f in os.listdir(p) if f.endswith(".tsc")])) if os.path.isdir(p) else "-")
        if not os.path.isdir(os.path.join(d, "primary")):
            # record -o PATH: PATH (a trace) and PATH.d/ (the other processes' traces), or a folder PATH/.
            n = 1 if os.path.isfile(d) else 0
            for folder in (d + ".d", d):
                if os.path.isdir(folder):
                    n += len([f for f in os.listdir(folder) if f.endswith(".tsc")])
            sides = [str(n), "-"]
        procs = load(os.path.join(d, "processes.json")) or {}
        pairs = procs.get("pairs", [])
        joins = []
        if pairs:
            for pr in pairs:
                folder = os.path.join(d, pr.get("folder", "."))
                joins.append(f"{pr.get('label')} [{pr.get('rule')}]: " + join_row(load(os.path.join(folder, "join.json"))))
        elif os.path.exists(os.path.join(d, "join.json")):
            joins.append(join_row(load(os.path.join(d, "join.json"))))
        print(f"| {label} | {rc} | {secs} | {'/'.join(sides)} | {len(pairs) or '-'} | {'<br>'.join(joins) or '-'} |")
    for label in rcs:
        procs = load(os.path.join(runs, label, "processes.json")) or {}
        ranks = procs.get("ranks") or {}
        for f in (ranks.get("findings") or [])[:3]:
            print(f"{label}: {f}")
        for n in (procs.get("notes") or [])[:5]:
            print(f"{label}: note: {n}")


if __name__ == "__main__":
    main()
