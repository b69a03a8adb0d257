"""Summarises a `twinscope twin` folder (DIR/join.json, DIR/twin.json) for the
GPU scripts: match rates, the time-only join's accuracy, the target kernel's
primary durations, and (with --concurrent) the overlapped kernels.

usage: twin_report.py LABEL DIR [LABEL DIR ...]   prints one table row per run
"""
import json
import statistics
import sys


def row(label, d):
    j = json.load(open(f"{d}/join.json"))
    t = json.load(open(f"{d}/twin.json"))
    s = j["summary"]
    durs = sorted(l["primary"]["dur_ns"] for l in j["launches"] if "dur_ns" in l["primary"])
    over = sum(1 for l in j["launches"] if l["primary"].get("overlapped"))
    acc = s["time_only_accuracy"]
    def pct(a, b):
        return f"{100.0 * a / b:.1f}%" if b else "-"
    p50 = statistics.median(durs) / 1e3 if durs else 0
    p99 = durs[min(len(durs) - 1, int(0.99 * len(durs)))] / 1e3 if durs else 0
    mx = durs[-1] / 1e3 if durs else 0
    print(f"| {label} | {s['shadow_launches']} | {s['exact']} ({pct(s['exact'], s['shadow_launches'])}) | "
          f"{s['time_only']} | {s['unmatched_shadow']} | {acc['agree']}/{acc['evaluated']} "
          f"({pct(acc['agree'], acc['evaluated'])}) | {p50:.1f} / {p99:.1f} / {mx:.1f} | {over} | "
          f"{t.get('primary_elapsed_s', 0):.1f} / {t.get('shadow_elapsed_s', 0):.1f} |")


def alone(path, pattern):
    """The target kernel's durations in a primary recorded without any shadow (stats --json)."""
    j = json.load(open(path))
    for k in j["kernels"]:
        if pattern in k["name"]:
            print(f"| alone (record, no shadow) | - | - | - | - | - | {k['p50_ns'] / 1e3:.1f} / {k['p99_ns'] / 1e3:.1f} / "
                  f"{k['max_ns'] / 1e3:.1f} | - | - |")
            return


def main():
    args = sys.argv[1:]
    extra = None
    if len(args) >= 3 and args[0] == "--alone":
        extra = (args[1], args[2])
        args = args[3:]
    print("| run | shadow launches | exact | time only | unmatched | time-only join agrees | "
          "target primary us p50 / p99 / max | overlapped | primary / shadow s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in range(0, len(args), 2):
        try:
            row(args[i], args[i + 1])
        except Exception as e:  # noqa: BLE001 - one broken run must not hide the others
            print(f"| {args[i]} | error: {e} |")
    if extra:
        try:
            alone(*extra)
        except Exception as e:  # noqa: BLE001
            print(f"| alone | error: {e} |")


if __name__ == "__main__":
    main()
