"""experiments/accuracy/results_full.py decides which cells are "met" and "missed" in
experiments/accuracy/report.md; these tests feed it small hand-made run summaries whose
answers are worked out here by hand (or by a plain loop) and compare.

Run: ctest -R experiments.results_full (it sets PYTHONPATH to experiments/accuracy
and experiments/). Standard library only.
"""

import unittest

import results_full as rf


def config(model, codec, opt, seed, table="models", extra=(), tag="", epochs=4,
           decay=(2, 3)):
  """A configuration shaped like results.py's full-scale ones."""
  args = ["--model", model, "--codec", codec, "--optimizer", opt, "--learners", "4",
          "--batch-size", "128", "--epochs", str(epochs), "--lr-decay-epochs",
          ",".join(str(d) for d in decay), "--seed", str(seed)] + list(extra)
  rid = "%s_%s_%s_e%d_s%d%s" % (model, codec, opt, epochs, seed, tag)
  return {"id": rid, "table": table, "args": args, "seed": seed, "tag": tag,
          "order": 0}


def summary(model, curve, lr=0.02, rates=None, train_loss=None, seed=1):
  """A summary whose per-epoch test metric is `curve` (accuracy for images,
  loss per character for char-lstm); the last point is the final value."""
  lstm = model == "char-lstm"
  epochs = []
  for i, v in enumerate(curve):
    e = {"epoch": i + 1, "train_loss": (train_loss if train_loss is not None else 1.0)}
    if lstm:
      e["test_loss"] = v
    else:
      e["test_accuracy"] = v
    epochs.append(e)
  r = {"model": model, "lr": lr, "seed": seed, "epoch_metrics": epochs,
       "compression_rate": dict(rates or {"end_to_end": 1.0})}
  if lstm:
    r["test_loss_per_char"] = curve[-1]
  else:
    r["test_accuracy"] = curve[-1]
  return r


def runs_of(*pairs):
  out = {}
  for i, (c, r) in enumerate(pairs):
    c = dict(c, order=i)
    out[c["id"]] = (c, r)
  return out


def row_of(lines, *cells):
  """The one table row that starts with these cells."""
  prefix = "| " + " | ".join(cells) + " |"
  rows = [l for l in lines if l.startswith(prefix)]
  if len(rows) != 1:
    raise AssertionError("%d rows start with %r in:\n%s" % (len(rows), prefix, "\n".join(lines)))
  return [x.strip() for x in rows[0].strip("|").split("|")]


class VerdictTest(unittest.TestCase):

  def verdict(self, model, dense, ada, rates=None):
    return rf.verdict(model, [summary(model, [v]) for v in dense],
                      [summary(model, [v]) for v in ada], rates or {})

  def test_gap_within_the_fixed_tolerance_is_met(self):
    # Gap -0.25 points, spreads 0: inside 0.3 points.
    self.assertEqual(self.verdict("mnist-cnn", [0.9100], [0.9075]), "met")

  def test_gap_beyond_the_tolerance_is_missed(self):
    # Dense 0.910/0.914 (spread 0.4 pt), AdaComp 0.905/0.909 (0.4 pt): mean
    # gap -0.5 pt > max(0.3, 0.4, 0.4).
    self.assertEqual(self.verdict("mnist-cnn", [0.910, 0.914], [0.905, 0.909]), "missed")

  def test_a_larger_seed_spread_widens_the_tolerance(self):
    # AdaComp 0.900/0.912: spread 1.2 pt, mean gap -0.6 pt: within the spread.
    self.assertEqual(self.verdict("mnist-cnn", [0.910, 0.914], [0.900, 0.912]), "met")

  def test_char_lstm_is_judged_in_nats_lower_is_better(self):
    self.assertEqual(self.verdict("char-lstm", [1.600], [1.615]), "met")
    self.assertEqual(self.verdict("char-lstm", [1.600], [1.625]), "missed")
    # A lower AdaComp loss than dense is never a miss.
    self.assertEqual(self.verdict("char-lstm", [1.600], [1.500]), "met")

  def test_a_rate_under_its_target_is_named(self):
    self.assertEqual(self.verdict("mnist-cnn", [0.91], [0.91], {"conv": 39.0, "fc": 500.0}),
                     "met, rate below target")
    self.assertEqual(self.verdict("mnist-cnn", [0.91], [0.91], {"conv": 40.0, "fc": 200.0}),
                     "met")

  def test_nothing_run(self):
    self.assertEqual(rf.verdict("mnist-cnn", [], [summary("mnist-cnn", [0.9])], {}), "not run")


class EpochGapTest(unittest.TestCase):

  def test_per_epoch_gaps_and_the_worst_from_epoch_two_match_a_plain_loop(self):
    dense = [summary("fc-dnn", [0.80, 0.85, 0.88, 0.90]),
             summary("fc-dnn", [0.82, 0.86, 0.87, 0.91])]
    ada = [summary("fc-dnn", [0.75, 0.84, 0.86, 0.90]),
           summary("fc-dnn", [0.77, 0.83, 0.88]),  # one epoch short
           ]
    got = rf.per_epoch_gaps("fc-dnn", dense, ada)
    want = []
    for i in range(3):  # the shortest run has 3 epochs
      d = sum(r["epoch_metrics"][i]["test_accuracy"] for r in dense) / 2
      a = sum(r["epoch_metrics"][i]["test_accuracy"] for r in ada) / 2
      want.append(a - d)
    self.assertEqual(len(got), 3)
    for g, w in zip(got, want):
      self.assertAlmostEqual(g, w, places=12)
    # Epoch 1 (-0.05) is left out; from epoch 2 on the worst is epoch 2.
    self.assertAlmostEqual(rf.worst_gap_from_epoch2("fc-dnn", dense, ada),
                           min(want[1:]), places=12)
    self.assertAlmostEqual(min(want[1:]), -0.02, places=12)

  def test_loss_gaps_have_the_sign_of_accuracy_gaps(self):
    dense = [summary("char-lstm", [2.0, 1.8])]
    ada = [summary("char-lstm", [2.2, 1.9])]
    got = rf.per_epoch_gaps("char-lstm", dense, ada)
    self.assertAlmostEqual(got[0], -0.2, places=12)
    self.assertAlmostEqual(got[1], -0.1, places=12)
    self.assertIsNone(rf.worst_gap_from_epoch2("char-lstm", [summary("char-lstm", [2.0])],
                                               [summary("char-lstm", [2.1])]))


class EarlyTargetTest(unittest.TestCase):
  """The target beyond the paper: from epoch 2 on, every mean gap within the
  larger of 1 point and that epoch's seed spreads."""

  def test_a_gap_inside_that_epochs_seed_spread_is_met(self):
    # Epoch 2: mean gap -1.5 pt, but dense's seeds spread 2 pt there.
    dense = [summary("fc-dnn", [0.80, 0.86, 0.90]), summary("fc-dnn", [0.80, 0.84, 0.90])]
    ada = [summary("fc-dnn", [0.70, 0.835, 0.898]), summary("fc-dnn", [0.70, 0.835, 0.898])]
    tols = rf.early_tolerances("fc-dnn", dense, ada)
    for t, want in zip(tols, [0.01, 0.02, 0.01]):
      self.assertAlmostEqual(t, want, places=12)
    # Epoch 1 (-10 points) does not count.
    self.assertEqual(rf.early_verdict("fc-dnn", dense, ada), "met")

  def test_the_first_epoch_beyond_its_tolerance_is_named(self):
    dense = [summary("fc-dnn", [0.80, 0.85, 0.90, 0.91])]
    ada = [summary("fc-dnn", [0.70, 0.845, 0.885, 0.89])]
    self.assertEqual(rf.early_verdict("fc-dnn", dense, ada),
                     "missed (ep 3: -1.50 pt, tolerance 1.00 pt)")

  def test_char_lstm_uses_nats(self):
    dense = [summary("char-lstm", [2.0, 1.80, 1.70])]
    ok = [summary("char-lstm", [2.3, 1.84, 1.74])]
    bad = [summary("char-lstm", [2.3, 1.84, 1.76])]
    self.assertEqual(rf.early_verdict("char-lstm", dense, ok), "met")
    self.assertEqual(rf.early_verdict("char-lstm", dense, bad),
                     "missed (ep 3: -0.060, tolerance 0.050)")

  def test_one_epoch_has_nothing_to_judge(self):
    self.assertEqual(rf.early_verdict("fc-dnn", [summary("fc-dnn", [0.8])],
                                      [summary("fc-dnn", [0.7])]), "-")


class RemediesTableTest(unittest.TestCase):

  def table(self):
    m, o = "mnist-cnn", "sgd"
    return rf.remedies_table(runs_of(
        (config(m, "dense", o, 1), summary(m, [0.80, 0.900])),
        (config(m, "adacomp", o, 1), summary(m, [0.79, 0.890], rates={"end_to_end": 300.0})),
        # A learning-rate remedy; dense at that lr is stronger (0.920).
        (config(m, "adacomp", o, 1, "remedies", ["--lr", "0.04"], "_lr2x"),
         summary(m, [0.80, 0.915], lr=0.04, rates={"end_to_end": 310.0})),
        (config(m, "dense", o, 1, "remedies", ["--lr", "0.04"], "_lr2x"),
         summary(m, [0.81, 0.920], lr=0.04)),
        # A codec remedy at under half the rate: judged against default dense.
        (config(m, "adacomp", o, 1, "remedies", ["--bin-sizes", "conv=10"], "_c10"),
         summary(m, [0.80, 0.899], rates={"end_to_end": 140.0})),
    ))

  def test_a_learning_rate_remedy_is_judged_against_the_strongest_dense_run(self):
    row = row_of(self.table(), "mnist-cnn", "sgd", "`--lr 0.04`")
    # seed, dense, dense lr, default, remedy, gap default -> remedy
    self.assertEqual(row[3:8], ["1", "92.00%", "0.04", "89.00%", "91.50%"])
    self.assertEqual(row[8], "-3.00 pt -> -0.50 pt")
    self.assertEqual(row[12], "missed")

  def test_a_codec_remedy_is_judged_at_the_default_lr_and_its_rate_share_shown(self):
    row = row_of(self.table(), "mnist-cnn", "sgd", "`--bin-sizes conv=10`")
    self.assertEqual(row[3:8], ["1", "90.00%", "default", "89.00%", "89.90%"])
    self.assertEqual(row[8], "-1.00 pt -> -0.10 pt")
    self.assertEqual(row[10], "300x -> 140x")
    self.assertEqual(row[11], "0.47")
    self.assertEqual(row[12], "met, rate below half")


class LongerTableTest(unittest.TestCase):

  def test_each_length_uses_its_strongest_lr_only_dense_run(self):
    m, o = "char-lstm", "sgd"
    long = dict(epochs=8, decay=(4, 6))
    lines = rf.longer_table(runs_of(
        (config(m, "dense", o, 1), summary(m, [1.80, 1.70])),
        (config(m, "adacomp", o, 1), summary(m, [1.90, 1.78], lr=1.0,
                                             rates={"end_to_end": 350.0})),
        (config(m, "dense", o, 1, "longer", ["--lr", "2"], "_lr2x", **long),
         summary(m, [1.7, 1.60], lr=2.0, train_loss=1.5)),
        # Dense with a codec-like option never counts as the reference.
        (config(m, "dense", o, 1, "longer", ["--lr", "2", "--values", "fp32"], "_x", **long),
         summary(m, [1.7, 1.40], lr=2.0)),
        (config(m, "adacomp", o, 1, "longer", ["--lr", "4"], "_lr4x", **long),
         summary(m, [1.7, 1.615], lr=4.0, rates={"end_to_end": 360.0}, train_loss=1.54)),
        (config(m, "adacomp", o, 1, "longer", ["--lr", "4", "--bin-sizes", "lstm=250"],
                "_lr4x_lstm250", **long),
         summary(m, [1.7, 1.625], lr=4.0, rates={"end_to_end": 210.0})),
        (config(m, "adacomp", o, 1, "longer", ["--lr", "4", "--bin-sizes", "lstm=100"],
                "_lr4x_lstm100", **long),
         summary(m, [1.7, 1.610], lr=4.0, rates={"end_to_end": 150.0})),
    ))
    row = row_of(lines, m, o, "8 (4,6)", "4 / 2", "-")
    self.assertEqual(row[5:], ["1.600", "1.615", "-0.015", "+0.040", "360x", "1.03", "met"])
    row = row_of(lines, m, o, "8 (4,6)", "4 / 2", "`--bin-sizes lstm=250`")
    self.assertEqual(row[5:], ["1.600", "1.625", "-0.025", "-0.500", "210x", "0.60", "missed"])
    row = row_of(lines, m, o, "8 (4,6)", "4 / 2", "`--bin-sizes lstm=100`")
    self.assertEqual(row[-1], "met, rate below half")
    # The default-length pair is there too, against its own dense run.
    row = row_of(lines, m, o, "4 (2,3)", "1 / 0.02", "-")
    self.assertEqual(row[5:8], ["1.700", "1.780", "-0.080"])

    # A clipped dense run is a training setting, not a codec option: when it
    # is the strongest, it is the reference.
    lines = rf.longer_table(runs_of(
        (config(m, "dense", o, 1, "longer", ["--lr", "2"], "_lr2x", **long),
         summary(m, [1.7, 1.60], lr=2.0)),
        (config(m, "dense", o, 1, "longer", ["--lr", "4", "--clip-grad-norm", "0.25"],
                "_clip", **long),
         dict(summary(m, [1.7, 1.55], lr=4.0), clip_grad_norm=0.25)),
        (config(m, "adacomp", o, 1, "longer", ["--lr", "4", "--clip-grad-norm", "0.25"],
                "_clip", **long),
         dict(summary(m, [1.7, 1.58], lr=4.0, rates={"end_to_end": 350.0}),
              clip_grad_norm=0.25)),
    ))
    row = row_of(lines, m, o, "8 (4,6)", "4, clip 0.25 / 4, clip 0.25", "-")
    self.assertEqual(row[5:8], ["1.550", "1.580", "-0.030"])


class RecommendedTableTest(unittest.TestCase):

  def run_pair(self, codec, seed, table, extra, tag, curve, rate=None, lr=8.0):
    m = "char-lstm"
    c = config(m, codec, "sgd", seed, table, extra, tag)
    r = dict(summary(m, curve, lr=lr, rates={"end_to_end": rate or 1.0}, seed=seed),
             run={"args": c["args"]}, clip_grad_norm=0.25)
    return c, r

  def table(self, ada_ends, extra_seed=False):
    m, o = "char-lstm", "sgd"
    dense_x = ["--lr", "8", "--clip-grad-norm", "0.25"]
    ada_x = dense_x + ["--momentum-correction"]
    pairs = []
    for seed, d_end in zip((1, 2, 3), (1.59, 1.60, 1.58)):
      # The paper's default at the cell's own settings (rate 350x).
      pairs.append((config(m, "dense", o, seed), summary(m, [1.8, 1.70], lr=1.0, seed=seed)))
      pairs.append((config(m, "adacomp", o, seed),
                    summary(m, [1.9, 1.78], lr=1.0, rates={"end_to_end": 350.0}, seed=seed)))
      table = "remedies" if seed == 1 else "recommended"
      pairs.append(self.run_pair("dense", seed, table, dense_x, "_lr8x_clip", [1.70, d_end]))
    for seed, a_end in zip((1, 2, 3), ada_ends):
      table = "remedies" if seed == 1 else "recommended"
      pairs.append(self.run_pair("adacomp", seed, table, ada_x, "_lr8x_clip_mc", [1.72, a_end],
                                 rate=300.0))
    # The same settings trained for longer belong to the longer table only.
    c = config(m, "dense", o, 1, "longer", dense_x, "_lr8x_clip", epochs=8, decay=(4, 6))
    pairs.append((c, dict(summary(m, [1.7, 1.6, 1.40], lr=8.0), run={"args": c["args"]})))
    if extra_seed:  # a fourth AdaComp seed without its dense run is left out
      pairs.append(self.run_pair("adacomp", 4, "recommended", ada_x, "_lr8x_clip_mc",
                                 [1.72, 1.90], rate=300.0))
    return rf.recommended_table(runs_of(*pairs))

  def test_the_mean_gap_over_the_seeds_within_the_tolerance_is_met(self):
    # dense mean 1.590 (spread 0.020), AdaComp 1.600/1.615/1.605: mean 1.60667,
    # gap -0.01667, within max(0.02, 0.02, 0.015).
    row = row_of(self.table((1.600, 1.615, 1.605), extra_seed=True), "char-lstm", "sgd")
    self.assertEqual(row[2:5], ["8, clip 0.25", "8, clip 0.25, `--momentum-correction`", "3"])
    self.assertEqual(row[5:8], ["1.590", "1.607", "-0.017"])
    self.assertEqual(row[8], "0.020 / 0.015")
    self.assertEqual(row[9:12], ["300x", "0.86", "met"])
    # Epoch 1: dense 1.70, AdaComp 1.72 (not judged); epoch 2 is the end.
    self.assertEqual(row[12:], ["-0.017", "met"])

  def test_a_gap_beyond_the_spread_is_missed(self):
    # AdaComp 1.62/1.63/1.62: gap -0.0333 beyond max(0.02, 0.02, 0.01).
    row = row_of(self.table((1.62, 1.63, 1.62)), "char-lstm", "sgd")
    self.assertEqual(row[7], "-0.033")
    self.assertEqual(row[11], "missed")
    self.assertEqual(row[13], "met")  # 0.05 nats/char from epoch 2 on

  def test_no_recommended_run_no_table(self):
    self.assertEqual(rf.recommended_table(runs_of(
        (config("mnist-cnn", "dense", "sgd", 1), summary("mnist-cnn", [0.9])))), [])


def ddp_run(seed, accs, rate=200.0):
  """An examples/ddp_fashion_mnist.py summary with these per-epoch test
  accuracies (the last is the final one)."""
  return {"seed": seed, "test_acc": accs[-1], "compression_rate": rate,
          "epochs": [{"epoch": i + 1, "test_acc": a} for i, a in enumerate(accs)]}


class DdpRowTest(unittest.TestCase):
  """The DDP table row: gaps over the seeds both settings have, per-epoch
  tolerances of at least 1 point, the verdicts."""

  def test_gaps_use_the_common_seeds_and_the_verdicts_follow(self):
    dense = [ddp_run(1, [0.85, 0.88, 0.90]), ddp_run(2, [0.86, 0.89, 0.91]),
             ddp_run(3, [0.50, 0.50, 0.50])]
    # Seed 3 has no AdaComp run: it must not count (it would move dense's
    # mean by 13 points).
    ada = [ddp_run(1, [0.80, 0.875, 0.899], rate=300.0),
           ddp_run(2, [0.82, 0.865, 0.905], rate=100.0)]
    row, gaps, tols, rate = rf.ddp_row(dense, ada, "x", default_rate=400.0)
    cells = [c.strip() for c in row.strip("|").split("|")]
    # By hand: dense mean 0.905, AdaComp 0.902 -> -0.30 pt; spreads 1.00 and
    # 0.60 pt so the end tolerance is 1.00 pt: met.
    self.assertEqual(cells[1], "1, 2")
    self.assertEqual(cells[2], "90.50%")
    self.assertEqual(cells[3], "90.20%")
    self.assertEqual(cells[4], "-0.30 pt")
    self.assertEqual(cells[5], "1.00 pt / 0.60 pt")
    self.assertEqual(cells[6], "200x")
    self.assertEqual(rate, 200.0)
    self.assertEqual(cells[7], "0.50")
    self.assertEqual(cells[8], "met")
    # Epoch 2: dense 0.885, AdaComp 0.870 -> -1.50 pt against a tolerance of
    # max(1 pt, spreads 1.0 and 1.0 pt) = 1 pt: missed there.
    for got, want in zip(gaps, [-0.045, -0.015, -0.003]):
      self.assertAlmostEqual(got, want, places=9)
    for got, want in zip(tols, [0.02, 0.01, 0.01]):
      self.assertAlmostEqual(got, want, places=9)
    self.assertEqual(cells[9], "-1.50 pt")
    self.assertTrue(cells[10].startswith("missed (ep 2: -1.50 pt"), cells[10])

  def test_no_common_seed_no_row(self):
    self.assertIsNone(rf.ddp_row([ddp_run(1, [0.9])], [ddp_run(2, [0.9])], "x"))

  def test_a_variant_shows_the_options_it_adds(self):
    r = ddp_run(1, [0.9])
    r["run"] = {"args": ["--procs", "2", "--seed", "1", "--hook", "adacomp", "--bin-sizes",
                         "fc=250"]}
    self.assertEqual(rf.ddp_variant_options([r]), "--bin-sizes fc=250")


def batch_run(codec, seed, batch, lr, acc, extra=(), tag="", warmup=0, rate=100.0):
  """A batch-sweep configuration and its summary."""
  c = config("mnist-cnn", codec, "sgd", seed, table="batch", tag=tag,
             extra=["--lr", "%g" % lr] + list(extra))
  c["id"] += "_B%d" % batch
  r = {"model": "mnist-cnn", "codec": codec, "batch_size": batch, "lr": lr, "seed": seed,
       "learners": 4, "lr_warmup_steps": warmup, "test_accuracy": acc,
       "compression_rate": {"end_to_end": rate}}
  return c, r


class SweepTableTest(unittest.TestCase):
  """The learner and batch sweeps over seeds: AdaComp against dense at the
  same learner count, batch, lr, warm-up and seeds only."""

  def test_groups_common_seeds_and_verdicts(self):
    runs = runs_of(
        batch_run("dense", 1, 512, 0.08, 0.910),
        batch_run("dense", 2, 512, 0.08, 0.914),
        batch_run("dense", 3, 512, 0.08, 0.700),  # no AdaComp run at seed 3: not counted
        batch_run("adacomp", 1, 512, 0.08, 0.900, rate=400.0),
        batch_run("adacomp", 2, 512, 0.08, 0.898, rate=500.0),
        batch_run("adacomp", 1, 512, 0.08, 0.909, extra=["--bin-sizes", "fc=250"],
                  tag="_fc250"),
        # A warm-up run is compared with the dense run of the same warm-up.
        batch_run("dense", 1, 512, 0.08, 0.920, extra=["--lr-warmup-steps", "117"], tag="_wu",
                  warmup=117),
        batch_run("adacomp", 1, 512, 0.08, 0.905, extra=["--lr-warmup-steps", "117"],
                  tag="_wu", warmup=117))
    lines = rf.sweep_table(runs)
    # By hand: dense 0.912 (spread 0.4 pt), AdaComp 0.899 (0.2 pt): -1.30 pt,
    # beyond max(0.3, 0.4) pt.
    default = row_of(lines, "4", "512", "0.08", "the paper's default")
    self.assertEqual(default[4:], ["1, 2", "91.20%", "89.90%", "-1.30 pt", "0.40 pt / 0.20 pt",
                                   "450x", "missed"])
    # Seed 1 only: dense 0.910 -> -0.10 pt, met.
    fc = row_of(lines, "4", "512", "0.08", "`--bin-sizes fc=250`")
    self.assertEqual(fc[4:8], ["1", "91.00%", "90.90%", "-0.10 pt"])
    self.assertEqual(fc[-1], "met")
    # Against the warmed-up dense (0.920), not the other one: -1.50 pt.
    warm = row_of(lines, "4", "512", "0.08, warm-up 117 steps", "the paper's default")
    self.assertEqual(warm[7], "-1.50 pt")

  def test_learner_counts_are_kept_apart(self):
    def at(p, codec, seed, acc):
      c, r = batch_run(codec, seed, 128, 0.02, acc)
      c = dict(c, table="learners", id=c["id"] + "_P%d" % p)
      return c, dict(r, learners=p)
    lines = rf.sweep_table(runs_of(at(1, "dense", 1, 0.915), at(1, "adacomp", 1, 0.914),
                                   at(16, "dense", 1, 0.900), at(16, "adacomp", 1, 0.905)))
    self.assertEqual(row_of(lines, "1", "128", "0.02", "the paper's default")[7], "-0.10 pt")
    self.assertEqual(row_of(lines, "16", "128", "0.02", "the paper's default")[7], "+0.50 pt")

  def test_no_sweep_runs_no_table(self):
    self.assertEqual(rf.sweep_table(runs_of(
        (config("mnist-cnn", "dense", "sgd", 1), summary("mnist-cnn", [0.9])))), [])



class QuickMachineTest(unittest.TestCase):
  """experiments/accuracy/report.md names the machine the quick-scale runs ran on, not the one
  that regenerates the page."""

  def test_what_the_runs_recorded(self):
    from resultslib import doc
    done = [{"run": {"machine": "B"}}, {"run": {"machine": "A"}}, {"run": {"machine": "A"}},
            {"run": {}}]
    self.assertEqual(doc.quick_machine(done), "A; B")

  def test_the_file_for_runs_that_did_not(self):
    import os
    import tempfile
    from resultslib import doc
    with tempfile.TemporaryDirectory() as d:
      path = os.path.join(d, "MACHINE")
      with open(path, "w") as f:
        f.write("x86_64, 2 cores (`lscpu` model name: Old CPU), Linux\n")
      saved, doc.QUICK_MACHINE = doc.QUICK_MACHINE, path
      try:
        self.assertEqual(doc.quick_machine([{"run": {}}]),
                         "x86_64, 2 cores (`lscpu` model name: Old CPU), Linux")
        os.remove(path)
        self.assertIn("the machine that wrote this page", doc.quick_machine([{"run": {}}]))
      finally:
        doc.QUICK_MACHINE = saved


if __name__ == "__main__":
  unittest.main()
