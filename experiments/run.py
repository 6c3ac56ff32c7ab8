#!/usr/bin/python3
"""The one entry point of the experiments: reruns any part of any experiment
from its config (experiments/NAME/config.toml).

    /usr/bin/python3 experiments/run.py                   # every experiment and its parts
    /usr/bin/python3 experiments/run.py NAME              # what NAME measures, its parts
    /usr/bin/python3 experiments/run.py NAME PART [...]   # run those parts, in order
    /usr/bin/python3 experiments/run.py NAME PART --dry-run

A config names the experiment's reports and its parts; a part is a list of
steps, each a command run in the experiment's folder: "adacomp" is the built
program ($ADACOMP, else build/tools/adacomp/adacomp), a *.py step runs with
/usr/bin/python3 and a *.sh step with bash, both from the experiment's folder.
A step's `stdout` keeps what it prints in a file. A part marked `root = true`
builds network namespaces (scripts/cluster.sh) and is refused without root.
Every part named `report` rewrites the reports and plots from data/ alone.
Standard library only.
"""

import argparse
import os
import shlex
import subprocess
import sys
import tomllib

EXPERIMENTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, EXPERIMENTS)
from resultslib.paths import adacomp_binary  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def names():
    """Every folder of experiments/ with a config.toml, sorted."""
    return sorted(d for d in os.listdir(EXPERIMENTS)
                  if os.path.isfile(os.path.join(EXPERIMENTS, d, "config.toml")))


def load(name):
    """The config of experiment NAME, checked: a title, what it measures, its
    reports, and parts whose steps each have a non-empty `run` list."""
    path = os.path.join(EXPERIMENTS, name, "config.toml")
    if not os.path.isfile(path):
        raise SystemExit(f"run.py: no experiment '{name}' (there is {', '.join(names())})")
    with open(path, "rb") as f:
        try:
            cfg = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise SystemExit(f"run.py: {path}: {e}")
    for key in ("title", "measures", "reports", "parts"):
        if key not in cfg:
            raise SystemExit(f"run.py: {path}: no '{key}'")
    for part, spec in cfg["parts"].items():
        steps = spec.get("steps")
        if not steps or any(not isinstance(s.get("run"), list) or not s["run"] for s in steps):
            raise SystemExit(f"run.py: {path}: part '{part}' needs steps, each with a run list")
    return cfg


def command(name, step):
    """The argument list of one step."""
    first, rest = step["run"][0], step["run"][1:]
    here = os.path.join(EXPERIMENTS, name)
    if first == "adacomp":
        return [adacomp_binary()] + rest
    if first.endswith(".py"):
        return [PYTHON, os.path.join(here, first)] + rest
    if first.endswith(".sh"):
        return ["bash", os.path.join(here, first)] + rest
    return list(step["run"])


def describe(name, cfg):
    lines = [f"{name}: {cfg['title']}", "", cfg["measures"].strip(), "",
             "reports: " + ", ".join(f"experiments/{name}/{r}" for r in cfg["reports"]), "",
             "parts:"]
    for part, spec in cfg["parts"].items():
        root = " (root)" if spec.get("root") else ""
        lines.append(f"  {part}{root}: {spec.get('about', '')}")
    return "\n".join(lines)


def run_part(name, cfg, part, dry_run):
    spec = cfg["parts"].get(part)
    if spec is None:
        raise SystemExit(f"run.py: {name} has no part '{part}' (it has "
                         f"{', '.join(cfg['parts'])})")
    if spec.get("root") and os.geteuid() != 0 and not dry_run:
        raise SystemExit(f"run.py: {name} {part} builds network namespaces: run it as root")
    here = os.path.join(EXPERIMENTS, name)
    for step in spec["steps"]:
        cmd = command(name, step)
        shown = shlex.join(cmd) + (f" > {step['stdout']}" if step.get("stdout") else "")
        print(f"[{name} {part}] {shown}", flush=True)
        if dry_run:
            continue
        if cmd[0] == adacomp_binary() and not os.access(cmd[0], os.X_OK):
            raise SystemExit(f"run.py: {cmd[0]} not found: build first (bash scripts/build.sh) "
                             "or set ADACOMP")
        out = open(os.path.join(here, step["stdout"]), "w") if step.get("stdout") else None
        try:
            rc = subprocess.run(cmd, cwd=here, stdout=out).returncode
        finally:
            if out:
                out.close()
        if rc != 0:
            raise SystemExit(f"run.py: {name} {part}: exit status {rc} from: {shown}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", nargs="?", help="the experiment (a folder of experiments/)")
    ap.add_argument("parts", nargs="*", help="its parts to run, in order")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = ap.parse_args(argv)
    if not args.name:
        for name in names():
            cfg = load(name)
            print(f"{name:16s} {cfg['title']}  [parts: {', '.join(cfg['parts'])}]")
        return 0
    cfg = load(args.name)
    if not args.parts:
        print(describe(args.name, cfg))
        return 0
    for part in args.parts:
        run_part(args.name, cfg, part, args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
