"""What the drivers that run on the namespace cluster (scripts/cluster.sh)
share: a logged shell call, the hosts' interface byte counters, and the lines
of a failed run that say what went wrong."""

import os
import re
import shlex
import subprocess
import sys
import time

from .paths import ROOT

CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(cmd, timeout=120, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def counters(name):
    """{host: (rx_bytes, tx_bytes)} from cluster.sh counters."""
    out = sh([CLUSTER, "--name", name, "counters"]).stdout
    res = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 4:
            res[f[0]] = (int(f[2]), int(f[3]))
    return res


def error_lines(text, limit=6):
    """The lines of a failed run's output that say what went wrong."""
    pat = re.compile(r"(Error|error|enforce|Enforce|terminate|Abort|abort|Traceback|Killed|"
                     r"Exception|timed out|exited)")
    lines = [ln.strip() for ln in text.splitlines() if pat.search(ln)]
    seen, keep = set(), []
    for ln in lines:
        if ln not in seen:
            seen.add(ln)
            keep.append(ln[:400])
    return keep[-limit:]
