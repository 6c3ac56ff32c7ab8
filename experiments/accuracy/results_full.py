"""The names experiments/accuracy/results_full.py had, for what imports them (the tests
in tests/scripts): the full-scale part of experiments/accuracy/report.md now lives in
experiments/resultslib/ (verdicts, tables, ddp, plots, doc). Nothing here but
the imports."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib.ddp import ddp_row, ddp_section  # noqa: E402
from resultslib.doc import full_section as section  # noqa: E402
from resultslib.paths import DDP_DIR, FULL_DIR, IMG_DIR  # noqa: E402
from resultslib.plots import plots  # noqa: E402
from resultslib.runs import (TRAINING_OPTIONS, cell_runs, codec_of, codec_options,  # noqa: E402
                             ddp_variant_options, final_metric, load_runs)
from resultslib.tables import (longer_table, recommended_table, remedies_table,  # noqa: E402
                               sweep_table)
from resultslib.verdicts import (ACC_TOLERANCE, EARLY_ACC_TOLERANCE,  # noqa: E402
                                 EARLY_LOSS_TOLERANCE, LOSS_TOLERANCE, early_tolerances,
                                 early_verdict, per_epoch_gaps, verdict,
                                 worst_gap_from_epoch2)

__all__ = ["ACC_TOLERANCE", "DDP_DIR", "EARLY_ACC_TOLERANCE", "EARLY_LOSS_TOLERANCE",
           "FULL_DIR", "IMG_DIR", "LOSS_TOLERANCE", "TRAINING_OPTIONS", "cell_runs",
           "codec_of", "codec_options", "ddp_row", "ddp_section", "ddp_variant_options",
           "early_tolerances", "early_verdict", "final_metric", "load_runs",
           "longer_table", "per_epoch_gaps", "plots", "recommended_table",
           "remedies_table", "section", "sweep_table", "verdict", "worst_gap_from_epoch2"]
