"""Where things are: the run data under results/ and the generated doc, its
plots and its hand-written parts under docs/."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "results")
QUICK_DIR = os.path.join(RESULTS, "quick")  # the quick-scale runs
# The machine of the quick-scale runs made before each run recorded its own.
QUICK_MACHINE = os.path.join(QUICK_DIR, "MACHINE")
FULL_DIR = os.path.join(ROOT, "results", "full")  # --scale full
DDP_DIR = os.path.join(ROOT, "results", "ddp_full")  # scripts/ddp_accuracy.py
DOC = os.path.join(ROOT, "docs", "results.md")
IMG_DIR = os.path.join(ROOT, "docs", "img")
# The hand-written parts docs/results.md includes (diagnosis, recommendations,
# discussion).
NOTES_DIR = os.path.join(ROOT, "docs", "results")
