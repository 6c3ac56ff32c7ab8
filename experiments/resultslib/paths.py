"""Where things are. Each experiment is a folder experiments/NAME/ holding its
drivers, its config (config.toml), its run data (data/), its generated reports
(*.md) and their plots (img/); the repository root holds the build and the
examples the experiments run."""

import os

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(EXPERIMENTS)


def experiment(name, *parts):
    """A path inside experiments/NAME/."""
    return os.path.join(EXPERIMENTS, name, *parts)


def adacomp_binary():
    """$ADACOMP where it is set, else build/tools/adacomp/adacomp of this checkout."""
    return os.environ.get("ADACOMP") or os.path.join(ROOT, "build", "tools", "adacomp",
                                                     "adacomp")


def module_dir():
    """Where the build puts the Python module (the PYTHONPATH of the DDP runs)."""
    return os.path.join(ROOT, "build", "python")


# The trainer's accuracy grid (experiments/accuracy).
RESULTS = experiment("accuracy", "data")
QUICK_DIR = os.path.join(RESULTS, "quick")  # the quick-scale runs
# The machine of the quick-scale runs made before each run recorded its own.
QUICK_MACHINE = os.path.join(QUICK_DIR, "MACHINE")
FULL_DIR = os.path.join(RESULTS, "full")  # --scale full
DDP_DIR = experiment("ddp-compare", "data", "full")  # experiments/ddp-compare/ddp_accuracy.py
DOC = experiment("accuracy", "report.md")
IMG_DIR = experiment("accuracy", "img")
# The hand-written parts experiments/accuracy/report.md includes (diagnosis, recommendations,
# discussion).
NOTES_DIR = experiment("accuracy", "notes")
