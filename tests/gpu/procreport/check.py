#!/usr/bin/env python3
"""Checks the Processes section and the rank tables (docs/report.md, docs/sqlite-schema.md "Ranks") on
the GPU runs of scripts/gpu_trees.sh: after `scripts/gpu_trees.sh BUILD mp ranks_record ranks_twin`,
run `python3 tests/gpu/procreport/check.py BUILD/bin/twinscope /tmp/tree-runs`.

- every pair's report.html of a twin run of several processes (mp, ranks_twin) has the section, one row
  per pair of processes.json, the current pair marked, links that resolve to written reports;
- ranks_twin: the Ranks part names the slowest rank per processes.json, and the main pair's join.sqlite
  holds the comparison (one slowest row per step, the same slowest rank and kernel time as processes.json);
- ranks_record: `twinscope export RUN --format sqlite` holds the comparison `twinscope stats RUN` prints
  (the same findings).
Prints one line per check and exits 1 if any failed.
"""
import json
import os
import re
import sqlite3
import subprocess
import sys

failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += 0 if ok else 1


def reports_of(run):
    procs = json.load(open(os.path.join(run, "processes.json")))
    pairs = procs["pairs"]
    for pr in pairs:
        folder = os.path.normpath(os.path.join(run, pr["folder"]))
        path = os.path.join(folder, "report.html")
        if not os.path.exists(path):
            check(not pr.get("joined"), f"{path}: written (joined pair)")
            continue
        html = open(path, encoding="utf-8", errors="replace").read()
        a = html.find('<section id="processes">')
        check(a >= 0, f"{path}: Processes section")
        if a < 0:
            continue
        sec = html[a:html.find("</section>", a)]
        rows = re.findall(r'<tr[^>]*data-pair="([^"]*)"', sec)
        check(len(rows) == len(pairs), f"{path}: {len(rows)} pair rows of {len(pairs)}")
        cur = re.findall(r'<tr class="hl current" data-pair="([^"]*)"', sec)
        check(cur == [pr["label"]], f"{path}: current pair {cur} is {pr['label']}")
        links = re.findall(r'href="([^"#]+)"', sec)
        bad = [l for l in links if not os.path.exists(os.path.normpath(os.path.join(folder, l)))]
        check(links and not bad, f"{path}: {len(links)} links resolve ({bad[:3]} do not)")
    return procs


def check_twin_ranks(run):
    procs = reports_of(run)
    ranks = procs.get("ranks")
    check(ranks is not None, f"{run}: ranks compared in processes.json")
    if not ranks:
        return
    html = open(os.path.join(run, "report.html"), encoding="utf-8", errors="replace").read()
    check('<h3 id="ranks">Ranks</h3>' in html, f"{run}/report.html: Ranks part")
    for f in ranks["findings"][:3]:
        esc = f.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace("'", "&#39;")
        check(esc in html, f"{run}/report.html: finding {f[:60]}...")
    db = sqlite3.connect(os.path.join(run, "join.sqlite"))
    rows = db.execute("SELECT step_index, step, rank, kernel_ns FROM rank_step WHERE slowest = 1 ORDER BY step_index").fetchall()
    check(len(rows) == len(ranks["steps"]), f"{run}/join.sqlite: {len(rows)} slowest rows, {len(ranks['steps'])} steps")
    same = all(r[1] == s["range"] and r[2] == s["slowest_rank"] and r[3] == max(s["kernel_ns"])
               for r, s in zip(rows, ranks["steps"]))
    check(same, f"{run}/join.sqlite: slowest rank and kernel time per step as processes.json")
    n = db.execute("SELECT count(*) FROM rank_finding").fetchone()[0]
    check(n == ranks["steps_standing_out"], f"{run}/join.sqlite: {n} findings, {ranks['steps_standing_out']} steps stood out")


def check_record_ranks(twinscope, run):
    out = run.rstrip("/") + ".ranks.sqlite"
    subprocess.run([twinscope, "export", run, "--format", "sqlite", "-o", out], check=True, capture_output=True)
    stats = subprocess.run([twinscope, "stats", run], capture_output=True, text=True).stdout
    db = sqlite3.connect(out)
    n = db.execute("SELECT count(*) FROM ranks").fetchone()[0]
    check(n >= 2 and "ranks compared" in stats, f"{out}: {n} ranks; stats compares them")
    texts = [r[0] for r in db.execute("SELECT text FROM rank_finding ORDER BY step_index LIMIT 20")]
    check(all(("  " + t + "\n") in stats for t in texts), f"{out}: its {len(texts)} findings are stats' lines")
    slow = db.execute("SELECT rank, count(*) FROM rank_step WHERE stands_out = 1 GROUP BY rank ORDER BY 2 DESC").fetchall()
    print(f"     steps where a rank stood out, by rank: {slow}")


def main():
    twinscope, runs = sys.argv[1], sys.argv[2]
    for name in ("mp", "ranks_twin"):
        run = os.path.join(runs, name)
        if os.path.exists(os.path.join(run, "processes.json")):
            (check_twin_ranks if name == "ranks_twin" else reports_of)(run)
        else:
            print(f"skip {run}: no processes.json")
    # `record -o DIR/ranks_record` writes the top process's trace there (none if, like torchrun's launcher, it
    # launches nothing on the GPU) and the other processes' traces in ranks_record.d/: export and stats take
    # the path either way.
    record = os.path.join(runs, "ranks_record")
    if os.path.exists(record) or os.path.isdir(record + ".d"):
        check_record_ranks(twinscope, record)
    else:
        print(f"skip {record}: not recorded")
    print(f"{failed} check(s) failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
