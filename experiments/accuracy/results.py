#!/usr/bin/python3
"""Runs the accuracy grid and writes experiments/accuracy/report.md.

Each configuration is one `adacomp train ... --summary-out experiments/accuracy/data/quick/ID.json`
(or experiments/accuracy/data/full/ID.json) run; the script adds a "run" object (command line,
elapsed time, date) to the summary it keeps. experiments/accuracy/report.md is generated from
experiments/accuracy/data/quick/*.json and experiments/accuracy/data/full/*.json only, so it can be regenerated without training again (--skip-existing).

Usage:
  /usr/bin/python3 experiments/accuracy/results.py [--scale quick|full] [--only REGEX]
      [--skip-existing] [--adacomp PATH] [--cifar-dir DIR] [--doc-only]

Runs one training at a time (the trainer uses every core itself).
Standard library only (matplotlib for the plots, where installed). This file
is the command line; the work is in experiments/resultslib/ (configs: the run
lists; runs: loading; verdicts: the targets; fmt and tables: the markdown;
plots; doc: experiments/accuracy/report.md; runner: one training run).
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib.configs import (FULL_LENGTHS, FULL_SEEDS, REMEDIES, RECOMMENDED,  # noqa: E402
                                SCALES, TRAINING_OPTIONS, make_configs, make_full_configs)
from resultslib.doc import write_doc  # noqa: E402
from resultslib.paths import DOC, FULL_DIR, NOTES_DIR, QUICK_DIR, RESULTS  # noqa: E402
from resultslib.plots import plots  # noqa: E402
from resultslib.runner import default_adacomp, keep_result, run_one, utc_now  # noqa: E402
from resultslib.runs import result_path  # noqa: E402

# What other scripts use from here (experiments/ddp-compare/ddp_accuracy.py: utc_now,
# keep_result) and the run lists by their old names.
__all__ = ["FULL_DIR", "FULL_LENGTHS", "FULL_SEEDS", "RECOMMENDED", "REMEDIES",
           "TRAINING_OPTIONS", "keep_result", "main", "make_configs", "make_full_configs",
           "result_path", "utc_now"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES) + ["full"],
                    default="quick")
    ap.add_argument("--only", metavar="REGEX",
                    help="run only configurations whose id matches")
    ap.add_argument("--skip-existing", action="store_true",
                    help="reuse data/ID.json where present")
    ap.add_argument("--adacomp", default=default_adacomp(),
                    help="the adacomp program (default: build/tools/adacomp/"
                         "adacomp or $ADACOMP)")
    ap.add_argument("--cifar-dir",
                    help="CIFAR-10 binary directory for cifar-cnn (default: "
                         "Fashion-MNIST padded to 32x32x3)")
    ap.add_argument("--doc-only", action="store_true",
                    help="run nothing; write experiments/accuracy/report.md from data/")
    ap.add_argument("--list", action="store_true",
                    help="print the configuration ids and exit")
    ap.add_argument("--log", default=os.path.join(RESULTS, "run.log"),
                    help="trainer output goes here (default data/run.log)")
    args = ap.parse_args()

    if args.scale == "full":
        configs = make_full_configs(args.cifar_dir)
    else:
        configs = make_configs(args.scale, args.cifar_dir)
    if args.list:
        for c in configs:
            print(c["id"], " ".join(c["args"]))
        return 0
    os.makedirs(QUICK_DIR, exist_ok=True)
    failed = []
    if not args.doc_only:
        seen = set()
        todo = []
        for c in configs:  # the sweeps share their reference rows: run once
            if c["id"] in seen or (args.only and not re.search(args.only, c["id"])):
                continue
            seen.add(c["id"])
            todo.append(c)
        with open(args.log, "a") as log:
            for i, c in enumerate(todo):
                path = result_path(c)
                if args.skip_existing and os.path.exists(path):
                    continue
                print("[%d/%d] %s %s" % (i + 1, len(todo), utc_now(), c["id"]),
                      flush=True)
                if not run_one(args.adacomp, c, log):
                    failed.append(c["id"])
                    print("  failed; see %s" % args.log, flush=True)
    full = make_full_configs(args.cifar_dir)
    for path in plots(full):
        print("wrote %s" % path)
    print("%d of %d full-scale runs present" % (
        sum(os.path.exists(result_path(c)) for c in full), len(full)))
    quick = configs if args.scale == "quick" else make_configs("quick", args.cifar_dir)
    quick_command = "/usr/bin/python3 experiments/accuracy/results.py --scale quick%s" % (
        (" --cifar-dir " + args.cifar_dir) if args.cifar_dir else "")
    missing = write_doc(quick, "quick", quick_command,
                        os.path.join(NOTES_DIR, "discussion.md"))
    print("wrote %s (%d configurations missing)" % (DOC, len(missing)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
