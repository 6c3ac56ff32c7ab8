"""The package behind experiments/accuracy/results.py: it runs the result set and writes
experiments/accuracy/report.md and its plots from experiments/accuracy/data/quick, experiments/accuracy/data/full and
results/ddp_full.

Modules: paths (where things are), configs (the run lists), runs (loading
runs, read by named fields), verdicts (tolerances and met / missed),
fmt (numbers and markdown cells), tables (the trainer's tables), ddp (the
PyTorch DDP section), plots (experiments/accuracy/img/full_*.png), doc (experiments/accuracy/report.md
assembled), runner (one training run).
"""
