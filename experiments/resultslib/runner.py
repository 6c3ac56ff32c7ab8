"""The one runner every experiment driver uses: run_command runs a command
(a training run, an example, a cluster job) with a time limit, its output
captured and, when a log is given, appended to it after the command line;
keep_json writes a record whole or not at all. run_one is the accuracy grid's
training run on top of them: the `adacomp train` command line of a
configuration, its summary kept whole (with the "run" object: arguments,
elapsed time, date) under experiments/accuracy/data/."""

import datetime
import json
import os
import platform
import shlex
import subprocess
import time

from .paths import adacomp_binary
from .runs import result_path


def run_command(cmd, timeout=None, env=None, log=None, cwd=None):
    """Runs `cmd`; returns (exit status, stdout + stderr, seconds). A command
    past `timeout` seconds is killed and returns 124, with what it printed and
    a line saying so. `log`: an open text file that gets "$ CMD" and the output."""
    if log is not None:
        log.write("$ %s\n" % shlex.join(cmd))
        log.flush()
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=cwd)
        rc, out = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, out = 124, text + "\ntimed out after %d s" % timeout
    elapsed = time.monotonic() - t0
    if log is not None:
        log.write(out)
        log.flush()
    return rc, out, elapsed


def keep_json(path, obj, **dump_options):
    """Writes `obj` as JSON to `path` whole or not at all (through PATH.part)."""
    with open(path + ".part", "w") as f:
        json.dump(obj, f, **dump_options)
        f.write("\n")
    os.replace(path + ".part", path)


def load_and_remove(path):
    """The JSON a run wrote to a temporary path, which is then removed."""
    with open(path) as f:
        obj = json.load(f)
    os.unlink(path)
    return obj


def default_adacomp():
    """The first of $ADACOMP and build/tools/adacomp/adacomp that can be run,
    else "adacomp" (on the PATH)."""
    for cand in (os.environ.get("ADACOMP"),
                 adacomp_binary()):
        if cand and os.access(cand, os.X_OK):
            return cand
    return "adacomp"


def run_one(adacomp, cfg, log):
    """Trains one configuration; False when the trainer failed."""
    out = result_path(cfg)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    cmd = [adacomp, "train"] + cfg["args"] + ["--quiet", "--summary-out", tmp]
    metrics = None
    if cfg.get("metrics"):
        metrics = os.path.join(os.path.dirname(out), cfg["id"] + ".metrics.jsonl")
        cmd += ["--metrics-out", metrics + ".tmp", "--log-every", "50"]
    log.write("== %s %s\n" % (cfg["id"], utc_now()))
    rc, _, elapsed = run_command(cmd, log=log)
    if rc != 0 or not os.path.exists(tmp):
        log.write("!! %s failed with exit status %d\n" % (cfg["id"], rc))
        log.flush()
        return False
    summary = load_and_remove(tmp)
    # Keep the files small: per-learner digests are equal when replicas agree.
    if summary.get("replicas_identical"):
        summary.pop("learner_weights_sha256", None)
    summary["run"] = {
        "id": cfg["id"],
        "table": cfg["table"],
        "data_label": cfg["data_label"],
        "args": cfg["args"],
        "elapsed_seconds": round(elapsed, 1),
        "finished_utc": utc_now(),
        "machine": machine_now(),
    }
    if metrics:
        os.replace(metrics + ".tmp", metrics)
    keep_result(out, summary, log, cfg["id"], elapsed)
    return True


def keep_result(out, summary, log, run_id, elapsed):
    """Writes the summary to `out` whole or not at all, and logs the run done."""
    keep_json(out, summary, indent=1, sort_keys=True)
    log.write("-- %s done in %.1f s\n" % (run_id, elapsed))
    log.flush()


def machine_now():
    """This machine, as lscpu and platform name it."""
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "%s, %d cores (`lscpu` model name: %s), %s" % (
        platform.machine(), os.cpu_count() or 0, model, platform.system())


def utc_now():
    """The time now, as the summaries' "finished_utc" gives it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")
