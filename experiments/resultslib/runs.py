"""Loading the runs (experiments/accuracy/data/quick, experiments/accuracy/data/full, experiments/ddp-compare/data/full) and reading
them by named fields: a configuration's trainer options through spec() (model,
codec, optimizer, learners, batch, epochs, seed, ...), a summary's metrics
through final_metric() and epoch_metric(), and the selections of runs the
tables and plots use (one cell's seeds, one tag's seeds)."""

import collections
import json
import os

from .paths import DDP_DIR, FULL_DIR, QUICK_DIR

LAYER_TYPES = ("conv", "fc", "lstm", "other")
# Options that are training settings rather than codec options (dense runs
# with them too; see remedies_table and longer_table).
TRAINING_OPTIONS = ("--lr", "--clip-grad-norm", "--lr-warmup-steps")

# A configuration by name. table, tag and seed are the configuration's own
# fields (None, "" and None for a summary's "run" object, which keeps only
# some); the others are read from its trainer options (None where not set).
Spec = collections.namedtuple("Spec", (
    "table", "tag", "seed", "model", "codec", "optimizer", "learners", "batch", "epochs",
    "steps", "decay"))


def option(args, name):
    """The value that follows `name` on a trainer command line, or None."""
    if name in args:
        return args[args.index(name) + 1]
    return None


def _int(text):
    return None if text is None else int(text)


def spec(cfg):
    """The named fields of a configuration, or of a summary's "run" object
    (which keeps the configuration's args). decay is the --lr-decay-epochs
    text ("6,9")."""
    a = cfg["args"]
    return Spec(table=cfg.get("table"), tag=cfg.get("tag", ""), seed=cfg.get("seed"),
                model=option(a, "--model"), codec=option(a, "--codec"),
                optimizer=option(a, "--optimizer"), learners=_int(option(a, "--learners")),
                batch=_int(option(a, "--batch-size")), epochs=_int(option(a, "--epochs")),
                steps=_int(option(a, "--steps")), decay=option(a, "--lr-decay-epochs"))


def remedy_options(c):
    """The options a remedy adds to the default AdaComp run, as text."""
    args = c["args"]
    i = args.index("--seed")
    return " ".join(args[i + 2:])


def sets_training(c):
    """Whether a run sets a training option (TRAINING_OPTIONS) beyond the
    cell's defaults."""
    return any(o in c["args"] for o in TRAINING_OPTIONS)


def codec_options(c):
    """remedy_options() less the training options, as a list."""
    extra = remedy_options(c).split()
    for o in TRAINING_OPTIONS:
        if o in extra:
            i = extra.index(o)
            del extra[i:i + 2]
    return extra


def ddp_variant_options(rs):
    """The example's options a variant adds to the default hook's (from its
    first run's recorded arguments), as the table shows them."""
    args = rs[0].get("run", {}).get("args", [])
    extra = []
    if "--hook" in args:
        extra = args[args.index("--hook") + 2:]
    return " ".join(extra)


# ------------------------------------------------------------ the summaries


def is_lstm(model):
    return model == "char-lstm"


def final_metric(r):
    """Test accuracy (images) or test loss per character (char-lstm)."""
    if is_lstm(r["model"]):
        return r.get("test_loss_per_char", r.get("test_loss"))
    return r["test_accuracy"]


def epoch_metric(model, e):
    return e["test_loss"] if is_lstm(model) else e["test_accuracy"]


def codec_of(r):
    """The codec of a summary ("compressor" in summaries before 0.3)."""
    return r.get("codec", r.get("compressor"))


# ----------------------------------------------------------------- loading


def result_path(cfg):
    return os.path.join(cfg.get("out_dir", QUICK_DIR), cfg["id"] + ".json")


def load(cfg):
    """A configuration's summary, or None when it has not run."""
    path = result_path(cfg)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_runs(configs):
    """{config id: (config, summary)} for the full-scale runs present."""
    out = {}
    for c in configs:
        path = os.path.join(FULL_DIR, c["id"] + ".json")
        if os.path.exists(path):
            with open(path) as f:
                out[c["id"]] = (c, json.load(f))
    return out


def read_metrics(run_id):
    """A full-scale run's step metrics (ID.metrics.jsonl), [] if absent."""
    path = os.path.join(FULL_DIR, run_id + ".metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_ddp_runs():
    """{setting: [summary, ...] in seed order} from experiments/ddp-compare/data/full/: the
    setting is the hook ("none", "adacomp") followed by the run's variant tag
    (experiments/ddp-compare/ddp_accuracy.py VARIANTS), e.g. "adacomp_fc250", and for a
    run on another set-up (ddp_accuracy.py SETUPS) "@" and its name: "none@lr01"."""
    out = {}
    if not os.path.isdir(DDP_DIR):
        return out
    for name in sorted(os.listdir(DDP_DIR)):
        if name.endswith(".json"):
            with open(os.path.join(DDP_DIR, name)) as f:
                r = json.load(f)
            run = r.get("run", {})
            key = r["hook"] + run.get("tag", "") + ("@" + run["setup"] if run.get("setup") else "")
            out.setdefault(key, []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r.get("seed", 0))
    return out


# -------------------------------------------------------------- selections


def cell_runs(runs, model, optimizer, codec, table="models", tag=""):
    """The summaries of one cell, one per seed, seed order."""
    out = []
    for c, r in runs.values():
        s = spec(c)
        if (s.table == table and s.model == model and s.optimizer == optimizer and
                s.codec == codec and s.tag == tag):
            out.append((s.seed, r))
    return [r for _, r in sorted(out, key=lambda x: x[0])]


def tagged_runs(runs, model, opt, codec, tag):
    """Every run of (model, optimizer, codec, tag) at the cell's own length
    (any table but "longer"), seed order: the recommended settings' seed-1
    runs are the remedies table's."""
    out = {}
    for c, r in runs.values():
        s = spec(c)
        if s.model == model and s.optimizer == opt and s.codec == codec and s.tag == tag and \
                s.table != "longer":
            out[s.seed] = r
    return [out[k] for k in sorted(out)]
