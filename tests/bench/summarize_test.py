#!/usr/bin/env python3
"""Tests of bench/gpu/summarize_rounds.py (gpu_cupti.sh confirm),
summarize_levels.py (gpu_cupti.sh levels) and summarize_cupti.py (gpu_cupti.sh
bench) on results written here: the ratios they print are computed per round
(or per process and round, or from per-variant medians) as their docstrings
say, incomplete data makes them fail, and every check of a traced run is
applied. Usage: summarize_test.py <bench/gpu folder>"""
import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import unittest

GPU_DIR = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../bench/gpu")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(GPU_DIR, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(mod, lines):
    """Runs mod.main on a results file of `lines` (dicts); returns (exit code, printed text)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
        path = f.name
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            rc = mod.main(path)
    finally:
        os.unlink(path)
    return rc, out.getvalue()


def row(text, first, second):
    """The printed line that starts with `first` and `second` (workload/variant columns)."""
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 2 and cols[0] == first and cols[1] == second:
            return line
    raise AssertionError(f"no row {first} {second} in:\n{text}")


def check(round_, set_, seen, got, launches=None, **extra):
    c = {"read_end": "complete", "counters": {"launches_seen": seen, "kernel_records": got},
         "launch_records": seen if launches is None else launches, "kernel_no_key": 0, "kernel_key_fallback": 0}
    c.update(extra)
    return {"round": round_, "variant": "twinscope", "workload_set": set_, "check": c}


class Rounds(unittest.TestCase):
    mod = load("summarize_rounds")

    def results(self, per_round):
        """per_round: list of {variant: ns} for workload eager_call; one check per round."""
        lines = []
        for r, by in enumerate(per_round, 1):
            for v, ns in by.items():
                lines.append({"round": r, "variant": v, "result": {"workload": "eager_call", "ns_per_kernel": ns}})
            lines.append(check(r, "kernels", 10, 10))
        return lines

    def test_ratio_is_per_round_then_median_against_both_floors(self):
        # Round ratios vs bare: (1600-1000)/(1400-1000)=1.5, (2600-2000)/(2200-2000)=3.0, (1300-1000)/(1300-1000)=1.0
        rc, text = run(self.mod, self.results([
            {"plain": 1000, "bare": 1400, "bare_cb": 1500, "twinscope": 1600},
            {"plain": 2000, "bare": 2200, "bare_cb": 2400, "twinscope": 2600},
            {"plain": 1000, "bare": 1300, "bare_cb": 1200, "twinscope": 1300},
        ]))
        self.assertEqual(rc, 0, text)
        line = row(text, "eager_call", "twinscope")
        self.assertIn("1.50 [1.00..3.00] vs bare, 3 rounds", line)
        # vs bare_cb: 600/500=1.2, 600/400=1.5, 300/200=1.5
        self.assertIn("1.50 [1.20..1.50] vs bare_cb, 3 rounds", line)
        self.assertIn("+600", row(text, "eager_call", "twinscope"))  # median added over plain: 600, 600, 300
        self.assertIn("+300", row(text, "eager_call", "bare"))  # 400, 200, 300

    def test_a_missing_run_fails(self):
        lines = self.results([{"plain": 1000, "bare": 1400, "twinscope": 1600},
                              {"plain": 1000, "bare": 1400, "twinscope": 1600}])
        lines = [l for l in lines if not (l.get("round") == 2 and l.get("variant") == "bare" and "result" in l)]
        rc, text = run(self.mod, lines)
        self.assertEqual(rc, 1, text)
        self.assertIn("unequal rounds per variant", text)

    def test_every_check_is_applied(self):
        base = self.results([{"plain": 1000, "bare": 1400, "twinscope": 1600}])
        base = [l for l in base if "check" not in l]
        for bad, says in [(check(1, "kernels", 10, 9), "launches_seen 10 != kernel_records 9"),
                          (check(1, "kernels", 10, 10, launches=8), "8 launch records for 10 launches"),
                          (check(1, "kernels", 10, 10, kernel_no_key=2), "2 records without key"),
                          (check(1, "kernels", 10, 10, read_end="truncated"), "read truncated")]:
            rc, text = run(self.mod, base + [bad])
            self.assertEqual(rc, 1, text)
            self.assertIn(says, text)
        rc, text = run(self.mod, base + [check(1, "kernels", 10, 10)])
        self.assertEqual(rc, 0, text)
        self.assertIn(": OK", text)


class Levels(unittest.TestCase):
    mod = load("summarize_levels")

    def results(self, variant, rounds, plain=None):
        """rounds: list of (ns at level 0, 1, 2), each one (process 1, round i)."""
        lines = []
        for i, ns in enumerate(rounds):
            for level, v in enumerate(ns):
                lines.append({"proc": 1, "variant": variant,
                              "result": {"workload": "levels", "round": i, "level": level, "ns_per_kernel": v}})
        for p, v in enumerate(plain or [], 1):
            lines.append({"proc": p, "variant": "plain", "result": {"workload": "eager_call", "ns_per_kernel": v}})
        return lines

    def test_differences_and_ratios_are_taken_inside_each_round(self):
        # Rounds: L1-L0 = 400, 200, 100; L2-L0 = 600, 600, 400; ratios 1.5, 3.0, 4.0; L2-L1 = 200, 400, 300.
        rc, text = run(self.mod, self.results("twinscope", [(1000, 1400, 1600), (3000, 3200, 3600),
                                                            (2000, 2100, 2400)], plain=[900, 1100]))
        self.assertEqual(rc, 0, text)
        cols = row(text, "twinscope", "3").split()
        self.assertEqual(cols[2:8], ["2000", "2100", "2400", "+200", "+600", "+300"], text)
        self.assertIn("3.00 [1.50..4.00], 3 rounds", text)
        self.assertRegex(text, r"plain \(no inj\.\)\s+2\s+1000")

    def test_a_round_missing_a_level_is_left_out_and_none_complete_fails(self):
        lines = self.results("bare_cb", [(1000, 1400, 1600), (1000, 1200, 1500)])
        lines = [l for l in lines if not (l["result"]["round"] == 1 and l["result"]["level"] == 2)]
        rc, text = run(self.mod, lines)
        self.assertEqual(rc, 0, text)
        self.assertTrue(row(text, "bare_cb", "1"))  # one complete round
        only_partial = [l for l in lines if l["result"]["round"] == 1]
        rc, text = run(self.mod, only_partial)
        self.assertEqual(rc, 1, text)
        self.assertIn("no complete round", text)

    def test_no_level_results_fail(self):
        rc, text = run(self.mod, [{"proc": 1, "variant": "plain",
                                   "result": {"workload": "eager_call", "ns_per_kernel": 1}}])
        self.assertEqual(rc, 1, text)


class Cupti(unittest.TestCase):
    mod = load("summarize_cupti")

    def run_dir(self, files):
        """files: {name: [lines (dicts, or text kept as is)]} in a log folder; returns (exit code, text)."""
        with tempfile.TemporaryDirectory() as d:
            for name, lines in files.items():
                with open(os.path.join(d, name), "w") as f:
                    for line in lines:
                        f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = self.mod.main(d)
        return rc, out.getvalue()

    @staticmethod
    def res(ns, workload="eager"):
        return {"workload": workload, "ns_per_kernel": ns}

    def test_medians_added_cost_and_ratios_to_both_floors(self):
        # Medians over every file of a variant: plain 1000, bare 1100 (+100), bare_cb 1200 (+200),
        # twinscope 1300 (+300): 300/100 = 3.00 over the floor, 300/200 = 1.50 over the floor with callbacks.
        rc, text = self.run_dir({
            "plain.1.json": ["log line, not JSON", self.res(990), self.res(1000)],
            "plain.2.json": [self.res(1010), {"note": "no workload"}],
            "bare.1.json": [self.res(1100)],
            "bare_cb.1.json": [self.res(1200), "{broken json"],
            "twinscope.1.json": [self.res(1250), self.res(1400)],
            "twinscope.2.json": [self.res(1300)],
        })
        self.assertEqual(rc, 0, text)
        self.assertEqual(row(text, "eager", "plain").split()[2:], ["3", "1000", "-"], text)
        self.assertEqual(row(text, "eager", "bare").split()[2:], ["1", "1100", "+100"], text)
        self.assertEqual(row(text, "eager", "bare_cb").split()[2:], ["1", "1200", "+200"], text)
        self.assertEqual(row(text, "eager", "twinscope").split()[2:], ["3", "1300", "+300", "3.00", "1.50"], text)
        self.assertNotIn("profiler", text)

    def test_each_workload_has_its_own_rows_and_a_floor_at_or_below_plain_is_said(self):
        rc, text = self.run_dir({
            "plain.1.json": [self.res(1000), self.res(500, "graph")],
            "bare.1.json": [self.res(1000), self.res(600, "graph")],
            "bare_cb.1.json": [self.res(1100), self.res(700, "graph")],
            "twinscope.1.json": [self.res(1200), self.res(800, "graph")],
        })
        self.assertEqual(rc, 0, text)
        self.assertIn("n/a (floor <= 0)", row(text, "eager", "twinscope"), text)
        self.assertEqual(row(text, "eager", "twinscope").split()[-1], "2.00", text)
        self.assertEqual(row(text, "graph", "twinscope").split()[2:], ["1", "800", "+300", "3.00", "1.50"], text)

    def test_no_results_fail(self):
        rc, text = self.run_dir({"plain.1.json": ["nothing here"]})
        self.assertEqual(rc, 1, text)
        self.assertIn("no results in", text)


if __name__ == "__main__":
    unittest.main(verbosity=1)
