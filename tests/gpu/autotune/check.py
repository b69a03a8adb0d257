"""Checks a `twin` run of tests/gpu/autotune/triton_autotune.py (issue 31): per step after the first,
the shadow's exact launches against the primary's target launches there, the diverged ones, the
shadow's grid against the primary's final choice; and the launches the join called autotuning.
Reads DIR's join.sqlite (every launch) and join.json (summary, reasons, instance pairing); without
join.sqlite (a build without SQLite), join.json's pairs and per-range target counts, when it lists every pair.
Usage: check.py TWIN_DIR   (exit 1 when a step after the first is not all exact)"""
import collections
import glob
import json
import os
import re
import sqlite3
import sys

TOP = re.compile(r"^(.*?[^ ]#\d+)(?:/|$)")


def top_range(path):
    m = TOP.match(path or "")
    return m.group(1) if m else (path or "")


def find(root, name):
    hits = sorted(glob.glob(os.path.join(root, "**", name), recursive=True), key=lambda p: (p.count(os.sep), p))
    return hits[0] if hits else None


def new_step():
    return {"primary": 0, "exact": 0, "diverged": 0, "pgrid": collections.Counter(), "sgrid": collections.Counter()}


def main():
    root = sys.argv[1]
    jpath, spath = find(root, "join.json"), find(root, "join.sqlite")
    if not jpath:
        print(f"check: no join.json under {root}: did twin finish? (its log says)")
        return 1
    j = json.load(open(jpath))
    s = j.get("summary", {})
    steps = collections.OrderedDict()
    ok_steps = bad_steps = 0
    if spath:
        db = sqlite3.connect(spath)
        rows = db.execute(
            "SELECT l.side, l.key_path, l.grid_x, l.block_x, m.kind FROM launches l "
            "LEFT JOIN matches m ON m.id = l.match_id ORDER BY l.id").fetchall()
        for side, path, gx, bx, kind in rows:
            st = steps.setdefault(top_range(path), new_step())
            if side == "primary":
                st["primary"] += 1
                st["pgrid"][(gx, bx)] += 1
            else:
                st["sgrid"][(gx, bx)] += 1
                if kind == "exact":
                    st["exact"] += 1
                elif kind == "diverged":
                    st["diverged"] += 1
    elif j.get("launches_total") == len(j.get("launches", [])) and j.get("steps_total") == len(j.get("steps", [])):
        # join.json lists every pair (kind, both grids) and each range's primary target launches.
        for r in j.get("steps", []):
            if r.get("targets"):
                steps.setdefault(top_range(r["range"]), new_step())["primary"] += r["targets"]
        for l in j["launches"]:
            st = steps.setdefault(top_range(l["key"]["path"]), new_step())
            p, sh = l.get("primary"), l.get("shadow")
            if p:
                st["pgrid"][(p["grid"][0], p["block"][0])] += 1
            if sh:  # join.json gives the shadow's grid; its block is the primary's unless the join says the shape differs
                block = sh.get("block") or (p["block"] if p and not l.get("shape_differs") else [None])
                st["sgrid"][(sh["grid"][0], block[0])] += 1
            if l["match"] in ("exact", "diverged"):
                st[l["match"]] += 1
        spath = jpath
    final = collections.Counter()
    for name, st in steps.items():
        if not name.startswith("step 0#") and st["pgrid"]:
            final[st["pgrid"].most_common(1)[0][0]] += 1
    final_choice = final.most_common(1)[0][0] if final else None
    print(f"{'step':<12} {'primary':>8} {'exact':>6} {'diverged':>8}  shadow grid,block  (primary's final choice {final_choice})")
    for name, st in steps.items():
        sg = st["sgrid"].most_common(1)[0][0] if st["sgrid"] else None
        if not name.startswith("step 0#"):
            good = st["exact"] == st["primary"] and st["diverged"] == 0 and sg == final_choice
            ok_steps += good
            bad_steps += not good
        print(f"{name:<12} {st['primary']:>8} {st['exact']:>6} {st['diverged']:>8}  {sg}")
    at = s.get("autotuning", {})
    print(f"launches called autotuning: primary {at.get('primary')}, shadow {at.get('shadow')}, "
          f"pairs of another final choice {at.get('pairs')}, one-sided {at.get('one_sided')}")
    al = s.get("alignment", {})
    print(f"alignment: depth {al.get('depth')}, instances {al.get('instances_primary')}/{al.get('instances_shadow')}, "
          f"pairs {al.get('instance_pairs')}, bounded {al.get('bounded_instances')}")
    for r in j.get("reasons", []):
        print(f"reason {r['code']}: {r['text']}" + (f" (remedy: {r['remedy']})" if r.get("remedy") else ""))
    if not spath:
        print("check: no join.sqlite (built without SQLite) and join.json does not list every pair: per-step rows need one")
        return 1
    print(f"steps after the first all exact on the primary's final choice: {ok_steps} of {ok_steps + bad_steps}")
    return 0 if bad_steps == 0 and ok_steps > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
