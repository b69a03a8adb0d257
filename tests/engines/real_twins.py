"""What the real-engine suites (test_transformers_real.py, test_vllm_real.py, test_sglang_real.py) share: an engine's driver run as one twin under the TWINSCOPE_* environment `twin --serve` sets, and its schedule, request trace and adapter status read back."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("TWINSCOPE_TEST_SOURCE", os.path.join(HERE, "..", ".."))
SHIM = os.path.join(SOURCE, "python", "twinscope", "engines", "shim")
TIMES = ("start_us", "dur_us")

_TMP = []


def mkdtemp(prefix):
    """A temporary folder removed by tearDownModule."""
    d = tempfile.mkdtemp(prefix=prefix)
    _TMP.append(d)
    return d


def tearDownModule():
    for d in _TMP:
        shutil.rmtree(d, ignore_errors=True)


def run_driver(driver, what, tmp, role, name, args=(), workload=None, follow=None, extra_env=None,
               drop_env=("TWINSCOPE_",), timeout=300):
    """Runs DRIVER (a real engine's driver script: --out, and --workload when a workload is given) as one twin:
    returns (its output, its stderr lines from the adapter, the paths of its files); raises naming WHAT if it fails.
    Variables starting with drop_env are not passed on; extra_env is set last."""
    argv = [sys.executable, driver]
    if workload is not None:
        wl = os.path.join(tmp, name + "-workload.json")
        with open(wl, "w") as f:
            json.dump(workload, f)
        argv += ["--workload", wl]
    paths = {k: os.path.join(tmp, "%s-%s.%s" % (k, name, ext)) for k, ext in
             (("schedule", "jsonl"), ("trace", "jsonl"), ("status", "json"), ("out", "json"))}
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop_env)}
    env.update(PYTHONPATH=SHIM, TWINSCOPE_ROLE=role, TWINSCOPE_SCHEDULE_OUT=paths["schedule"],
               TWINSCOPE_REQUEST_TRACE=paths["trace"], TWINSCOPE_ADAPTER_STATUS=paths["status"],
               TWINSCOPE_FOLLOW_STEP_TIMEOUT_S="20")
    if follow:
        env["TWINSCOPE_SCHEDULE_FOLLOW"] = follow
    env.update(extra_env or {})
    p = subprocess.run(argv + ["--out", paths["out"]] + list(args), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (what, p.returncode, p.stderr[-3000:]))
    with open(paths["out"]) as f:
        out = json.load(f)
    said = [x for x in p.stderr.splitlines() if x.startswith("twinscope adapter: ")]
    return out, said, paths


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def steps(path, drop=()):
    """The schedule's step lines without their times (and the keys in drop)."""
    return [{k: v for k, v in d.items() if k not in TIMES + tuple(drop)} for d in lines(path) if d["type"] == "step"]


def status(paths, missing_ok=False):
    """The adapter's status; with missing_ok, {} when it wrote none (it did not run)."""
    if missing_ok and not os.path.exists(paths["status"]):
        return {}
    with open(paths["status"]) as f:
        return json.load(f)
