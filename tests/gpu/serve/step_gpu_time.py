"""The GPU time of each served step of a primary (scripts/gpu_transformers_serve.sh): from a run's primary trace
exported as Chrome JSON, every kernel whose launch key lies in a step range (`prefill|decode|mixed step N [...]`) is
summed into its step; then each run under `twin --serve` (auto*) is compared with each under `record` alone (record*):
the median GPU time of decode steps of equal batch size (the same work in any run: the runs' batches differ with
arrival times), the target kernel's median duration, and the steps' host (wall) times from the schedules.
Usage: step_gpu_time.py RUNS RUN... ; prints a short table."""

import json
import os
import re
import statistics
import sys

STEP = re.compile(r"^(prefill|decode|mixed) step (\d+) \[(.*)\]$")
TARGET = os.environ.get("TARGET_KERNEL", "index_copy_kernel_impl")


def step_of(path):
    top = path.split("/", 1)[0]
    top = re.sub(r"#\d+$", "", top)
    m = STEP.match(top)
    if not m:
        return None
    return int(m.group(2)), m.group(1), len([e for e in m.group(3).split(",") if e])


def gpu_steps(chrome):
    with open(chrome) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    steps, target = {}, []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        a = e.get("args") or {}
        if TARGET in e.get("name", ""):
            target.append(float(e["dur"]))
        s = step_of(a.get("key_path") or "")
        if s is None:
            continue
        d = steps.setdefault(s[0], {"kind": s[1], "batch": s[2], "gpu_us": 0.0, "kernels": 0})
        d["gpu_us"] += float(e["dur"])
        d["kernels"] += 1
    return steps, target


def wall_steps(sched):
    try:
        with open(sched) as f:
            return {d["step"]: d for d in (json.loads(l) for l in f if l.strip()) if d.get("type") == "step"}
    except OSError:
        return {}


def by_size(steps, key):
    out = {}
    for s in steps.values():
        if s["kind"] == "decode" and isinstance(s.get(key), (int, float)):
            out.setdefault(s["batch"], []).append(s[key])
    return {k: statistics.median(v) for k, v in out.items()}


def main():
    runs, names = sys.argv[1], sys.argv[2:]
    data = {}
    for n in names:
        if not (n.startswith("record") or n.startswith("auto")):
            continue
        chrome = os.path.join(runs, n, "primary-chrome.json")
        if not os.path.exists(chrome):
            print("%s: no primary-chrome.json" % n)
            continue
        steps, target = gpu_steps(chrome)
        for k, w in wall_steps(os.path.join(runs, n, "schedule-primary.jsonl")).items():
            if k in steps and isinstance(w.get("dur_us"), int):
                steps[k]["wall_us"] = w["dur_us"]
        data[n] = (steps, target)
        g = [s["gpu_us"] for s in steps.values()]
        w = [s["wall_us"] for s in steps.values() if "wall_us" in s]
        print("%-8s steps %3d  GPU time per step: median %8.1f us  wall per step: median %9.0f us  %s: %d launches, median %.2f us"
              % (n, len(steps), statistics.median(g) if g else 0, statistics.median(w) if w else 0, TARGET,
                 len(target), statistics.median(target) if target else 0))
    for a in [n for n in data if n.startswith("auto")]:
        for r in [n for n in data if n.startswith("record")]:
            for key, what in (("gpu_us", "GPU time"), ("wall_us", "wall time")):
                ma, mr = by_size(data[a][0], key), by_size(data[r][0], key)
                common = sorted(set(ma) & set(mr))
                if not common:
                    continue
                ratios = [ma[k] / mr[k] for k in common]
                print("%s / %s, decode steps' %s by batch size: median ratio %.3f over %d sizes (min %.3f, max %.3f)"
                      % (a, r, what, statistics.median(ratios), len(common), min(ratios), max(ratios)))
            ta, tr = data[a][1], data[r][1]
            if ta and tr:
                print("%s / %s, %s median duration: %.3f" % (a, r, TARGET, statistics.median(ta) / statistics.median(tr)))


if __name__ == "__main__":
    main()
