"""The package behind scripts/results.py: it runs the result set and writes
docs/results.md and its plots from results/quick, results/full and
results/ddp_full.

Modules: paths (where things are), configs (the run lists), runs (loading
runs, read by named fields), verdicts (tolerances and met / missed),
fmt (numbers and markdown cells), tables (the trainer's tables), ddp (the
PyTorch DDP section), plots (docs/img/full_*.png), doc (docs/results.md
assembled), runner (one training run).
"""
