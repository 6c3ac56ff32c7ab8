"""The configurations: every run of the result set, in run order, as the
trainer options it passes (the quick scale's and --scale full's run lists,
the remedies and the recommended settings measured, the models and
optimizers of the main table)."""

import tomllib
from pathlib import Path

from .paths import FULL_DIR
from .runs import TRAINING_OPTIONS, spec

MODELS = ("mnist-cnn", "fc-dnn", "cifar-cnn", "char-lstm")
OPTIMIZERS = ("sgd", "adam")
BASELINES = ("topk", "threshold", "onebit", "terngrad")

# Length of each kind of run, per scale. "epochs" or "steps".
SCALES = {
    # About 45 minutes on 2 shared cores (what experiments/accuracy/report.md shows).
    "quick": {
        "mnist-cnn-main": ("epochs", 3),   # the headline dense-vs-AdaComp rows
        "mnist-cnn-sweep": ("epochs", 3),  # learners, batch sizes, baselines
        "cifar-cnn": ("epochs", 1),
        "fc-dnn": ("epochs", 3),
        "char-lstm": ("epochs", 1),        # 377 steps of 128 sequences
    },
}

# Adam learning rate for char-lstm used for both dense and AdaComp rows (see
# the char-lstm section of the doc for why it is not the trainer's default).
CHAR_LSTM_ADAM_LR = None  # None: the trainer's default


# --scale full: every model trained to the end with a step learning-rate
# schedule (x0.1 at the two epochs listed), three seeds for the eight
# model x optimizer cells, one seed for the mnist-cnn sweeps. Results go to
# experiments/accuracy/data/full/; each run also keeps its step metrics (ID.metrics.jsonl) for
# the curves. (epochs, decay epochs) per model:
FULL_LENGTHS = {
    "mnist-cnn": (12, (6, 9)),
    "fc-dnn": (12, (6, 9)),
    "cifar-cnn": (8, (4, 6)),
    "char-lstm": (6, (3, 5)),
}
FULL_SEEDS = (1, 2, 3)
# (model, optimizer, id tag, extra trainer options) of the remedies measured
# at full scale, in run order; the list and why each was run are data, in
# remedies.toml beside this file.
with open(Path(__file__).with_name("remedies.toml"), "rb") as _f:
    REMEDIES = tuple((r["model"], r["optimizer"], r["tag"], r["options"])
                     for r in tomllib.load(_f)["remedies"])
# The settings experiments/accuracy/report.md recommends where the default misses, run at
# every seed beside the strongest dense run at the same seeds:
# (model, optimizer, [(codec, tag, options)]); the tags are those of the
# remedies' seed-1 runs.
RECOMMENDED = (
    ("char-lstm", "sgd", [
        ("dense", "_lr8x_clip", ["--lr", "8", "--clip-grad-norm", "0.25"]),
        ("adacomp", "_lr8x_clip_mc",
         ["--lr", "8", "--clip-grad-norm", "0.25", "--momentum-correction"]),
    ]),
    # Local Adam closed fc-dnn's early lag at seed 1 (worst from epoch 2:
    # -0.24 pt; the default -3.10): against the main table's dense runs.
    ("fc-dnn", "adam", [
        ("dense", "", []),
        ("adacomp", "_local", ["--local-optimizer"]),
    ]),
    # Local Adam at 1.6e-2 ended 0.10 nats/char ahead of dense's best (8e-3;
    # dense at 1.6e-2: 1.861) at seed 1.
    ("char-lstm", "adam", [
        ("dense", "_lr4x", ["--lr", "0.008"]),
        ("adacomp", "_lr8x_local", ["--lr", "0.016", "--local-optimizer"]),
    ]),
    # Momentum correction took fc-dnn SGD from -0.37 to +0.01 pt at seed 1.
    ("fc-dnn", "sgd", [
        ("dense", "", []),
        ("adacomp", "_mc", ["--momentum-correction"]),
    ]),
    # Local Adam on the fc weights only: cifar-cnn within 1.00 pt of dense
    # after epoch 2 and 0.31 or less after it at seed 1 (the default: -2.19,
    # then -0.88), -0.36 pt at the end, at 0.91 of the default's rate.
    ("cifar-cnn", "adam", [
        ("dense", "", []),
        ("adacomp", "_localfc", ["--local-optimizer-types", "fc"]),
    ]),
)


def length_tag(length):
    kind, n = length
    return ("e%d" % n) if kind == "epochs" else ("s%d" % n)


def length_args(length):
    kind, n = length
    return ["--epochs", str(n)] if kind == "epochs" else ["--steps", str(n)]


def make_configs(scale, cifar_dir):
    """The ordered list of runs: most important first."""
    s = SCALES[scale]
    runs = []

    def add(table, model, compressor, optimizer, learners, batch, length,
            extra=(), lr=None, data_label=None):
        rid = "%s_%s_%s_P%d_B%d_%s" % (model, compressor, optimizer, learners,
                                       batch, length_tag(length))
        if lr is not None:
            rid += "_lr%g" % lr
        args = ["--model", model, "--codec", compressor, "--optimizer",
                optimizer, "--learners", str(learners), "--batch-size",
                str(batch)] + length_args(length)
        if lr is not None:
            args += ["--lr", repr(lr)]
        args += list(extra)
        runs.append({"id": rid, "table": table, "args": args,
                     "data_label": data_label})

    # Table 1: the four models, dense vs AdaComp, SGD+momentum and Adam, P=4.
    def four_models(optimizer):
        for comp in ("dense", "adacomp"):
            add("models", "mnist-cnn", comp, optimizer, 4, 128,
                s["mnist-cnn-main"])
        for comp in ("dense", "adacomp"):
            add("models", "fc-dnn", comp, optimizer, 4, 128, s["fc-dnn"])
        for comp in ("dense", "adacomp"):
            if cifar_dir:
                add("models", "cifar-cnn", comp, optimizer, 4, 128, s["cifar-cnn"],
                    extra=["--data-dir", cifar_dir])
            else:
                add("models", "cifar-cnn", comp, optimizer, 4, 128, s["cifar-cnn"],
                    data_label="Fashion-MNIST padded to 32x32x3 (no CIFAR-10 here)")
        lr = CHAR_LSTM_ADAM_LR if optimizer == "adam" else None
        for comp in ("dense", "adacomp"):
            add("models", "char-lstm", comp, optimizer, 4, 128, s["char-lstm"],
                lr=lr)

    four_models("sgd")
    four_models("adam")
    sweep = s["mnist-cnn-sweep"]
    # Reference rows for the sweeps (P=4, B=128, SGD) and the baselines.
    for comp in ("dense", "adacomp") + BASELINES:
        add("baselines", "mnist-cnn", comp, "sgd", 4, 128, sweep)
    for p in (1, 16):
        for comp in ("dense", "adacomp"):
            add("learners", "mnist-cnn", comp, "sgd", p, 128, sweep)
    for b in (64, 256):
        for comp in ("dense", "adacomp"):
            add("batch", "mnist-cnn", comp, "sgd", 4, b, sweep)
    # Run order: the longest rows of table 1 (mnist-cnn with Adam) after the
    # learner sweep, so that a run cut short loses the least. The doc's row
    # order does not depend on this.
    def rank(c):
        f = spec(c)
        if f.table == "models" and f.model == "mnist-cnn" and f.optimizer == "adam":
            return 2.5
        return {"models": 0, "baselines": 1, "learners": 2, "batch": 3}[c["table"]]
    for i, c in enumerate(runs):
        c["order"] = i
    return sorted(runs, key=lambda c: (rank(c), c["order"]))


def make_full_configs(cifar_dir):
    """--scale full, in run order: seed 1 of every cell first, so that a run
    cut short still has every cell once; then the other seeds; then the
    mnist-cnn sweeps (learners, batch sizes, baselines) at seed 1."""
    runs = []

    def add(table, model, codec, optimizer, seed, learners=4, batch=128,
            extra=(), tag="", length=None):
        epochs, decay = length or FULL_LENGTHS[model]
        rid = "%s_%s_%s_P%d_B%d_e%d_s%d%s" % (model, codec, optimizer, learners,
                                              batch, epochs, seed, tag)
        args = ["--model", model, "--codec", codec, "--optimizer", optimizer,
                "--learners", str(learners), "--batch-size", str(batch),
                "--epochs", str(epochs),
                "--lr-decay-epochs", ",".join(str(e) for e in decay),
                "--seed", str(seed)]
        data_label = None
        if model == "cifar-cnn":
            if cifar_dir:
                args += ["--data-dir", cifar_dir]
            else:
                data_label = "Fashion-MNIST padded to 32x32x3 (no CIFAR-10 here)"
        args += list(extra)
        runs.append({"id": rid, "table": table, "args": args,
                     "data_label": data_label, "seed": seed, "tag": tag,
                     "out_dir": FULL_DIR, "metrics": True})

    def batch_lr_scaled(seed, batches, codecs, tag, extra=()):
        """The mnist-cnn batch sweep (SGD) at the learning rate scaled with the
        batch, 0.02 x B / 128: each batch size, each codec."""
        for b in batches:
            for codec in codecs:
                add("batch", "mnist-cnn", codec, "sgd", seed, batch=b,
                    extra=["--lr", "%g" % (0.02 * b / 128)] + list(extra), tag=tag)

    for seed in FULL_SEEDS:
        for model in MODELS:
            for optimizer in OPTIMIZERS:
                for codec in ("dense", "adacomp"):
                    add("models", model, codec, optimizer, seed)
    # Remedies (options beside the paper's default, never instead of it),
    # seed 1, each against the same cell's dense and default AdaComp rows. The
    # settings come from the residue diagnostics (experiments/accuracy/notes/diagnosis.md).
    for model, opt, tag, extra in REMEDIES:
        add("remedies", model, "adacomp", opt, 1, extra=extra, tag=tag)
    # The early lag's ramp (the remedy tagged _ramp128) at seeds 2
    # and 3 too, beside the main table's runs at those seeds: its end gap
    # against the seed spread (experiments/early-lag/grid.md reads them).
    for seed in FULL_SEEDS[1:]:
        for model, opt, tag, extra in REMEDIES:
            if tag == "_ramp128":
                add("ramp", model, "adacomp", opt, seed, extra=extra, tag=tag)
    # Dense with the same options where they are not codec options (a learning
    # rate, clipping): the remedy must beat the strongest dense run.
    for model, opt, tag, extra in REMEDIES:
        if set(extra[::2]) <= set(TRAINING_OPTIONS):
            add("remedies", model, "dense", opt, 1, extra=extra, tag=tag)
    # Is char-lstm trained to the end at 6 epochs? Dense's training loss is
    # still falling at the first decay, and both dense and AdaComp do better at
    # lr 2 than at the default 1: twice as long (the schedule of the 12-epoch
    # models) at lr 2.
    # At 12 epochs the gap halved (0.067 -> 0.034) and dense still gained 0.06:
    # 24 epochs (x0.1 at 12 and 18) shows whether it keeps closing.
    for length in ((12, (6, 9)), (24, (12, 18))):
        for codec in ("dense", "adacomp"):
            add("longer", "char-lstm", codec, "sgd", 1, length=length,
                extra=["--lr", "2"], tag="_lr2x")
    # At 6 epochs AdaComp is best at lr 4 (1.686; 2: 1.712) where dense at lr 4
    # fails to train (2.363): AdaComp at lr 4 for 12 epochs against dense at 2.
    add("longer", "char-lstm", "adacomp", "sgd", 1, length=(12, (6, 9)),
        extra=["--lr", "4"], tag="_lr4x")
    # The gap at each one's best lr went 0.041 (6 epochs) -> 0.027 (12): at 24?
    add("longer", "char-lstm", "adacomp", "sgd", 1, length=(24, (12, 18)),
        extra=["--lr", "4"], tag="_lr4x")
    # With clipping dense is at its best at lr 8 (1.588 at 6 epochs), AdaComp
    # at lr 4 (1.683; lr 8: 1.720): does that gap close over 12 epochs?
    add("longer", "char-lstm", "dense", "sgd", 1, length=(12, (6, 9)),
        extra=["--lr", "8", "--clip-grad-norm", "0.25"], tag="_lr8x_clip")
    add("longer", "char-lstm", "adacomp", "sgd", 1, length=(12, (6, 9)),
        extra=["--lr", "4", "--clip-grad-norm", "0.25"], tag="_lr4x_clip")
    # 12 epochs left AdaComp at lr 4 0.027 behind dense; at 6 epochs lstm=250
    # added 0.008 to lr 2 (at 0.62 of the rate): both together.
    add("longer", "char-lstm", "adacomp", "sgd", 1, length=(12, (6, 9)),
        extra=["--lr", "4", "--bin-sizes", "lstm=250"], tag="_lr4x_lstm250")
    # The recommended settings over three seeds (seed 1 is the remedies
    # table's run of the same tag): AdaComp's and the strongest dense run's.
    for model, opt, settings in RECOMMENDED:
        for seed in FULL_SEEDS[1:]:
            for codec, tag, extra in settings:
                if tag:  # untagged: the main table's runs, already listed
                    add("recommended", model, codec, opt, seed, extra=extra, tag=tag)
    for codec in BASELINES:
        add("baselines", "mnist-cnn", codec, "sgd", 1)
    for p in (1, 16):
        for codec in ("dense", "adacomp"):
            add("learners", "mnist-cnn", codec, "sgd", 1, learners=p)
    # The learner sweep's second seed (its gaps at seed 1: -0.12 and +0.12 pt).
    for p in (1, 16):
        for codec in ("dense", "adacomp"):
            add("learners", "mnist-cnn", codec, "sgd", 2, learners=p)
    # One learner ends -0.60 pt at seed 2: momentum correction on the fc
    # weights, which closed batch 512, at both seeds.
    for seed in (1, 2):
        add("learners", "mnist-cnn", "adacomp", "sgd", seed, learners=1,
            extra=["--local-optimizer-types", "fc"], tag="_mcfc")
    for b in (64, 256, 512):
        for codec in ("dense", "adacomp"):
            add("batch", "mnist-cnn", codec, "sgd", 1, batch=b)
    # At lr 0.02 dense itself is undertrained at batch 512 (89.54% against
    # 91.58% at 128): the learning rate scaled with the batch (0.02 x B / 128),
    # as a user would run it.
    batch_lr_scaled(1, (64, 256, 512), ("dense", "adacomp"), "_lrB")
    # With the lr scaled to batch 256 and 512 AdaComp falls behind (-0.53 and
    # -1.02 pt): larger steps, as on char-lstm, where momentum correction let
    # AdaComp keep up with dense at lr 8.
    batch_lr_scaled(1, (256, 512), ("adacomp",), "_lrB_mc", ["--momentum-correction"])
    # Fewer, larger steps: at batch 512 an epoch is 117 steps, and fc weights
    # wait 400-600 steps in the residue at L_T 500 (experiments/accuracy/notes/diagnosis.md), a
    # third of the whole run. Half the bin sizes (fc; fc and conv) halve the
    # wait at about half the rate.
    for b in (256, 512):
        batch_lr_scaled(1, (b,), ("adacomp",), "_lrB_fc250", ["--bin-sizes", "fc=250"])
        batch_lr_scaled(1, (b,), ("adacomp",), "_lrB_bins2", ["--bin-sizes", "conv=25,fc=250"])
    # Large-batch training scales the lr with a warm-up (Goyal et al.: linear
    # over the first epochs): one epoch here, dense and AdaComp alike.
    for b in (256, 512):
        batch_lr_scaled(1, (b,), ("dense", "adacomp"), "_lrB_wu1",
                        ["--lr-warmup-steps", str(60000 // b)])
    # A second seed of the batch sweep with the lr scaled to the batch (at lr
    # 0.02 dense itself is mistuned at 256 and 512): are its gaps beyond noise?
    batch_lr_scaled(2, (64, 256, 512), ("dense", "adacomp"), "_lrB")
    # Half the conv and fc bin sizes took batch 512 from -1.02 to -0.16 pt at
    # seed 1 (256: no change, -0.53): the second seed of both.
    batch_lr_scaled(2, (256, 512), ("adacomp",), "_lrB_bins2", ["--bin-sizes", "conv=25,fc=250"])
    # At seed 2 the halved bins did not help at 512 (-1.58 pt; default -1.41).
    # Is it the number of steps, 1404 at batch 512 against 5616 at 128, in
    # which each element is sent about a quarter as often per example? Bins a
    # quarter of the size (L_T x 128 / B, every type) send each element about
    # as often per example as at batch 128: a diagnostic, at a quarter of the
    # rate.
    for seed in (1, 2):
        batch_lr_scaled(seed, (512,), ("adacomp",), "_lrB_bins4",
                        ["--bin-sizes", "conv=12,fc=125,other=125"])
    # Four times the step: an element released from the residue carries four
    # times the gradient into the momentum, as on char-lstm at lr 8, where
    # momentum correction closed the gap. On CNNs its factor masking of the
    # conv weights costs (batch 128), so on the fc weights only.
    for seed in (1, 2):
        batch_lr_scaled(seed, (512, 256), ("adacomp",), "_lrB_mcfc",
                        ["--local-optimizer-types", "fc"])
    # Batch 512, where the default misses most: a third seed of dense, the
    # default and momentum correction on the fc weights.
    batch_lr_scaled(3, (512,), ("dense", "adacomp"), "_lrB")
    batch_lr_scaled(3, (512,), ("adacomp",), "_lrB_mcfc", ["--local-optimizer-types", "fc"])
    # Batch 256, where the default misses narrowly (-0.38 pt over two seeds):
    # a third seed of dense, the default and both remedies.
    for codec, tag, extra in (("dense", "_lrB", []), ("adacomp", "_lrB", []),
                              ("adacomp", "_lrB_bins2", ["--bin-sizes", "conv=25,fc=250"]),
                              ("adacomp", "_lrB_mcfc", ["--local-optimizer-types", "fc"])):
        batch_lr_scaled(3, (256,), (codec,), tag, extra)
    # Is local Adam's lead on char-lstm the optimizer or the compression?
    # Dense with the same optimizer on each learner (every tensor sent dense,
    # so nothing is masked: each learner's Adam step, averaged).
    add("remedies", "char-lstm", "dense", "adam", 1, extra=["--lr", "0.016", "--local-optimizer"],
        tag="_lr8x_local")
    # Momentum correction without its masking (--no-local-mask): each
    # learner's SGD velocity is compressed and nothing of it is zeroed, the
    # DDP hook's one-call setting since masking lost on five Fashion-MNIST
    # seeds there. Masking is what cost the CNNs here (mnist-cnn -1.24 pt,
    # cifar-cnn -1.54 with it); fc-dnn is where the default misses most.
    for seed in FULL_SEEDS:
        for model in ("fc-dnn", "mnist-cnn", "cifar-cnn"):
            add("remedies", model, "adacomp", "sgd", seed,
                extra=["--local-optimizer", "--no-local-mask"], tag="_mcnm")
    for i, c in enumerate(runs):
        c["order"] = i
    return runs
