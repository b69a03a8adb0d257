#!/usr/bin/env python3
"""Tables for scripts/gpu_cupti.sh: reads the JSON lines its steps left in a
log folder and prints one short table with a verdict per row.

  cupti_report.py stress <logdir>   example, graph stress (mitigated, kernels only)
  cupti_report.py long <logdir>     30M-record run, traced vs untraced
  cupti_report.py sigkill <logdir> <kill_monotonic_ns>   a SIGKILLed run: last counters vs file
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.strip().startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except OSError:
        return None


def c(trace, name):
    return int(trace.get("counters", {}).get(name, 0)) if trace else 0


def row(cells, widths):
    return "  ".join(str(x).ljust(w) for x, w in zip(cells, widths))


def stress(log):
    out = []
    head = ["case", "launched", "seen", "records", "invalid", "missing", "cupti_drop", "writer_drop",
            "nokey/fallback", "gpu_MiB", "verdict"]
    rows = []
    ok_all = True
    ex = load(os.path.join(log, "example.trace.json"))
    if ex:
        seen, rec = c(ex, "launches_seen"), c(ex, "kernel_records")
        good = (seen == rec == 62 and ex["kernel_invalid"] == 0 and ex["kernel_no_key"] == 0
                and ex["kernel_key_fallback"] == 0 and ex["read_end"] == "complete")
        ok_all &= good
        rows.append(["example", 62, seen, rec, ex["kernel_invalid"], c(ex, "kernel_records_missing"),
                     c(ex, "cupti_dropped_records"), c(ex, "writer_dropped_records"),
                     f'{ex["kernel_no_key"]}/{ex["kernel_key_fallback"]}', "-",
                     "PASS" if good else "FAIL (want 62 keyed records)"])
    for case in ("mitigated", "kernels_only"):
        prog = load(os.path.join(log, f"{case}.prog.json"))
        tr = load(os.path.join(log, f"{case}.trace.json"))
        if not prog or not tr:
            rows.append([case] + ["?"] * 9 + ["FAIL (no output: see logs)"])
            ok_all = False
            continue
        launched = prog["kernels_launched"]
        seen, rec, missing = c(tr, "launches_seen"), c(tr, "kernel_records"), c(tr, "kernel_records_missing")
        gpu = f'{prog["gpu_used_mib_before"]:.0f}->{prog["gpu_used_mib_after"]:.0f}'
        if case == "mitigated":
            good = (seen == launched and tr["kernel_valid"] == launched and missing == 0
                    and tr["kernel_invalid"] == 0 and c(tr, "cupti_dropped_records") == 0
                    and c(tr, "writer_dropped_records") == 0)
            verdict = "PASS (every record valid)" if good else "FAIL"
        else:
            consistent = seen == launched and seen - rec == missing
            good = consistent
            if not consistent:
                verdict = "FAIL (seen - records != missing)"
            elif missing > 0 or tr["kernel_invalid"] > 0:
                verdict = f"PASS (loss shown: {missing} missing, {tr['kernel_invalid']} invalid)"
            else:
                verdict = "PASS (accounted; seed-001 loss not reproduced)"
        ok_all &= good
        rows.append([case, launched, seen, rec, tr["kernel_invalid"], missing, c(tr, "cupti_dropped_records"),
                     c(tr, "writer_dropped_records"), f'{tr["kernel_no_key"]}/{tr["kernel_key_fallback"]}', gpu,
                     verdict])
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    out.append(row(head, widths))
    out += [row(r, widths) for r in rows]
    print("\n".join(out))
    return 0 if ok_all else 1


def long_run(log):
    plain = load(os.path.join(log, "long_untraced.prog.json"))
    prog = load(os.path.join(log, "long_traced.prog.json"))
    tr = load(os.path.join(log, "long_traced.trace.json"))
    if not (plain and prog and tr):
        print("long run: missing output (see logs in", log, ")")
        return 1
    launched = prog["kernels_launched"]
    lost = (c(tr, "kernel_records_missing") + c(tr, "cupti_dropped_records") + c(tr, "writer_dropped_records")
            + c(tr, "pending_launch_keys_evicted"))
    rss_delta = (prog["rss_peak_kib"] - plain["rss_peak_kib"]) / 1024.0
    gpu_growth = prog["gpu_used_mib_after"] - prog["gpu_used_mib_before"]
    checks = {
        f"kernel records {tr['kernel_valid']} valid of {launched}": tr["kernel_valid"] == launched,
        f"invalid timestamps {tr['kernel_invalid']}": tr["kernel_invalid"] == 0,
        f"lost (missing+cupti+writer+evicted) {lost}": lost == 0,
        f"GPU memory {prog['gpu_used_mib_before']:.0f} -> {prog['gpu_used_mib_after']:.0f} MiB": gpu_growth <= 2,
        f"host RSS peak {plain['rss_peak_kib'] // 1024} -> {prog['rss_peak_kib'] // 1024} MiB "
        f"(+{rss_delta:.0f}, limit +256)": rss_delta < 256,
        f"ns/kernel untraced {plain['ns_per_kernel']} traced {prog['ns_per_kernel']}": True,
        f"trace read {tr['read_end']}": tr["read_end"] == "complete",
    }
    w = max(len(k) for k in checks)
    for k, good in checks.items():
        print(k.ljust(w), " PASS" if good else " FAIL")
    return 0 if all(checks.values()) else 1


def sigkill(log, kill_ns):
    """stats.json / stats.txt of a trace whose program was SIGKILLed at kill_ns (CLOCK_MONOTONIC)."""
    try:
        with open(os.path.join(log, "stats.json")) as f:
            j = json.load(f)
        with open(os.path.join(log, "stats.txt")) as f:
            text = f.read()
    except (OSError, ValueError) as e:
        print(f"sigkill: no readable stats output in {log}: {e}")
        return 1
    loss, read = j["loss"], j["read"]
    cnt, fil = loss["counters"], loss["file"]
    taken = cnt.get("taken_after_start_ns")
    start = j["header"].get("start_monotonic_ns")
    age_s = (kill_ns - start - taken) / 1e9 if taken is not None and start is not None else None
    period_s = j["header"].get("config", {}).get("flush_ms", 500) / 1000
    widths = [16, 12, 15, 10, 0]
    print(row(["view", "launches", "kernel records", "missing", "note"], widths))
    note = f"taken {taken / 1e9:.2f} s after the start, {age_s:.2f} s before the kill" if age_s is not None else "-"
    print(row(["last counters", cnt.get("launches_seen"), cnt.get("kernel_records"), cnt.get("missing"), note], widths))
    after = fil["after_last_status"]
    print(row(["records in file", fil["launch_records"], fil["kernel_records"], fil["missing"],
               f"{after['launch_records']} launch, {after['kernel_records']} kernel records after the last status"],
              widths))
    print(f"verdict from: {loss['basis']} ({loss['basis_reason']})")
    print(f"read: {read['end']}, {read['chunks']} chunks, {read['records']} records")
    checks = {
        "read stops at the last whole chunk (no-summary/truncated)": read["end"] in ("no-summary", "truncated"),
        f"last counters at most a period ({period_s:.1f} s) + 0.5 s old at the kill":
            age_s is not None and age_s <= period_s + 0.5,
        "counters count no launch that is not in the file":
            cnt.get("launches_seen", 0) <= fil["launch_records"] + loss["writer_dropped"],
        "verdict taken from the records in the file": loss["basis"] == "file",
        "'loss accounting' printed once": text.count("loss accounting") == 1,
    }
    w = max(len(k) for k in checks)
    for k, good in checks.items():
        print(k.ljust(w), " PASS" if good else " FAIL")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "sigkill":
        sys.exit(sigkill(sys.argv[2], int(sys.argv[3])))
    if len(sys.argv) != 3 or sys.argv[1] not in ("stress", "long"):
        print(__doc__)
        sys.exit(2)
    sys.exit(stress(sys.argv[2]) if sys.argv[1] == "stress" else long_run(sys.argv[2]))
