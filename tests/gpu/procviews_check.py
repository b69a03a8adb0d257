"""Checks the merged views of a run of several processes against `twinscope stats --json` of the same
run (docs/processes.md, "Every process in one view"): per process, the kernels in the Chrome file's
process group and in the SQLite database equal the kernel records of its trace (less those with
invalid timestamps for Chrome, which leaves them off the timeline); the Perfetto file exists and
is not empty. Prints one line per process and "OK" or the differences; exits 1 on a difference.

usage: procviews_check.py STATS_JSON CHROME_JSON SQLITE_DB PERFETTO_FILE
"""
import json
import os
import sqlite3
import sys
from collections import Counter


def main():
    stats_path, chrome_path, db_path, perfetto_path = sys.argv[1:5]
    stats = json.load(open(stats_path))
    chrome = json.load(open(chrome_path))
    # A machine without sqlite3.h builds twinscope without SQLite: `export --format sqlite` says so and
    # writes nothing; the check then says SQLite was not checked rather than opening an empty database.
    db = sqlite3.connect(db_path) if os.path.exists(db_path) else None
    if db is None:
        print(f"sqlite: {db_path} was not written (twinscope built without SQLite here): not checked")
    kernels_by_pid = Counter(e["pid"] for e in chrome["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel")
    run = chrome["otherData"]["twinscope_run"]
    group_of = {p["trace"]: p["chrome_pid"] for p in run["processes"]}
    print("alignment:", run["alignment"])
    bad = 0
    for p in stats["processes"]:
        if not p.get("gpu_work"):
            continue
        trace = p["path"]
        kernels = p.get("counts", {}).get("kernel", 0)
        invalid = p.get("loss", {}).get("invalid_timestamps_in_file", 0)
        group = group_of.get(trace)
        in_chrome = kernels_by_pid.get(group, 0)
        in_db = None
        if db is not None:
            row = db.execute("SELECT p.id, count(k.process_id) FROM process p LEFT JOIN kernels k "
                             "ON k.process_id = p.id WHERE p.trace = ? GROUP BY p.id", (trace,)).fetchone()
            in_db = row[1] if row else -1
        ok = kernels - invalid <= in_chrome <= kernels and (db is None or in_db == kernels)
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {trace}: kernel records {kernels} (invalid {invalid}), chrome group {group}: "
              f"{in_chrome}, sqlite: {'not checked' if db is None else in_db}")
    size = os.path.getsize(perfetto_path) if os.path.exists(perfetto_path) else 0
    print(f"perfetto: {size} bytes")
    bad += size == 0
    print("OK" if not bad else f"{bad} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
