"""One training run: the `adacomp train` command line of a configuration,
its summary kept whole (with the "run" object: arguments, elapsed time,
date) under results/, and the trainer's output logged."""

import datetime
import json
import os
import platform
import shlex
import subprocess
import time

from .paths import adacomp_binary
from .runs import result_path


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
    log.write("== %s %s\n$ %s\n" % (cfg["id"], utc_now(),
                                    " ".join(shlex.quote(c) for c in cmd)))
    log.flush()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - t0
    if proc.returncode != 0 or not os.path.exists(tmp):
        log.write("!! %s failed with exit status %d\n" % (cfg["id"],
                                                          proc.returncode))
        log.flush()
        return False
    with open(tmp) as f:
        summary = json.load(f)
    os.unlink(tmp)
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
    with open(out + ".part", "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(out + ".part", out)
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
