"""experiments/early-lag/early_lag.py on hand-made summaries of examples/ddp_fashion_mnist.py
(--model ddp-example): from_example gives the report the trainer's fields (the
evaluations, steps per epoch, the frames of every rank), and the steps to a target
and the epoch ends are read from them. The grid's cells (experiments/early-lag/early_lag_grid.py):
the optimizer of a cell, char-lstm scored on its loss, the bytes sent so far at each
evaluation, and a cell's figures from hand-made trainer summaries."""

import json
import os
import tempfile
import unittest
from unittest import mock

import early_lag as el
import early_lag_grid as grid
import early_lag_tradeoff as tradeoff


def example(hook_frames, evals, world=2, parameters=1000):
    """Two epochs of 10 steps; hook_frames: frame bytes per step per epoch (None: no
    hook)."""
    epochs = [{"epoch": e + 1, "steps": 10 * (e + 1), "test_acc": a}
              for e, a in enumerate((evals[4][1], evals[-1][1]))]
    for ep, f in zip(epochs, hook_frames):
        if f is not None:
            ep["frame_bytes_per_step"] = f
    return {"epochs": epochs, "steps": 20, "test_acc": evals[-1][1], "world": world,
            "parameters": parameters,
            "evals": [dict({"step": s, "test_acc": a}, **({"epoch": 1} if s == 10 else {}))
                      for s, a in evals]}


EVALS = [(2, 0.30), (4, 0.50), (6, 0.60), (8, 0.62), (10, 0.65), (20, 0.80)]


class FromExampleTest(unittest.TestCase):
    def test_fields(self):
        s = el.from_example(example([100.0, 50.0], EVALS))
        self.assertEqual(s["steps_per_epoch"], 10)
        self.assertEqual(s["epochs"], 2)
        self.assertEqual(s["steps"], 20)
        self.assertEqual(s["test_accuracy"], 0.80)
        # 10 steps at 100 bytes, 10 at 50, from each of the 2 ranks.
        self.assertEqual(s["bytes_sent"], (10 * 100 + 10 * 50) * 2)
        self.assertEqual(el.curve(s), EVALS)

    def test_no_hook_counts_float32_gradients(self):
        s = el.from_example(example([None, None], EVALS, world=4, parameters=1000))
        self.assertEqual(s["bytes_sent"], 20 * 4 * 1000 * 4)

    def test_targets_read_from_the_curve(self):
        s = el.from_example(example([100.0, 50.0], EVALS))
        self.assertEqual(el.epoch_ends(s), [0.65, 0.80])
        self.assertEqual(el.steps_to(s, 0.60), 6)
        self.assertEqual(el.steps_to(s, 0.61), 8)
        self.assertIsNone(el.steps_to(s, 0.81))

    def test_configs_and_docs_by_model(self):
        self.assertIs(el.configs("ddp-example"), el.DDP_CONFIGS)
        self.assertIs(el.configs("mnist-cnn"), el.CONFIGS)
        self.assertTrue(el.doc_path("mnist-cnn").endswith("experiments/early-lag/report.md"))
        self.assertTrue(el.doc_path("ddp-example").endswith("experiments/early-lag/ddp-example.md"))


def trainer_run(values, per=10, rate=None, key="test_accuracy", dense_per_step=1000.0):
    """A trainer summary of len(values) // 2 epochs of `per` steps, evaluated every
    per / 2 steps with these metric values; `rate`: the end-to-end rate of every
    evaluation (None: dense)."""
    steps = per * len(values) // 2
    metrics = [{"step": (i + 1) * per // 2, key: v,
                "compression_rate": {"end_to_end": rate or 1.0}}
               for i, v in enumerate(values)]
    return {"steps_per_epoch": per, "epochs": steps // per, "steps": steps,
            "epoch_metrics": metrics, "dense_bytes": dense_per_step * steps,
            "bytes_sent": dense_per_step * steps / (rate or 1.0),
            "early_lag": {"machine": "m", "date": "d"}}


class GridCellTest(unittest.TestCase):
    def test_cells_name_model_and_optimizer(self):
        self.assertEqual(el.cell_parts("fc-dnn"), ("fc-dnn", []))
        self.assertEqual(el.cell_parts("cifar-cnn-adam"), ("cifar-cnn", ["--optimizer", "adam"]))
        self.assertEqual(el.metric("char-lstm-adam")[0], "test_loss")
        self.assertFalse(el.metric("char-lstm")[1])
        self.assertEqual(el.metric("mnist-cnn-adam")[0], "test_accuracy")

    def test_a_sweep_of_some_cells_reports_every_cell_and_seed(self):
        cells, seeds = grid.report_scope([2, 3])
        self.assertEqual(cells, list(grid.CELLS))
        self.assertEqual(seeds, [1, 2, 3])
        self.assertEqual(grid.report_scope([4])[1], [1, 2, 3, 4])

    def test_steps_to_a_loss_counts_down(self):
        s = trainer_run([2.0, 1.8, 1.7, 1.5], key="test_loss")
        self.assertEqual(el.steps_to(s, 1.75, "test_loss", higher=False), 15)
        self.assertEqual(el.steps_to(s, 1.8, "test_loss", higher=False), 10)
        self.assertIsNone(el.steps_to(s, 1.4, "test_loss", higher=False))
        self.assertEqual(el.epoch_ends(s, "test_loss"), [1.8, 1.5])

    def test_bytes_so_far_restart_each_epoch(self):
        # Epoch 1: 5 steps at rate 10 then the epoch's 10 steps at rate 5 (so the
        # second half was dearer); epoch 2: rate 20 over its first 5 steps.
        s = trainer_run([0.1, 0.2, 0.3, 0.4], per=10)
        for m, r in zip(s["epoch_metrics"], (10.0, 5.0, 20.0, 20.0)):
            m["compression_rate"]["end_to_end"] = r
        got = grid.cumulative_bytes(s)
        self.assertEqual([t for t, _ in got], [5, 10, 15, 20])
        self.assertAlmostEqual(got[0][1], 1000 * 5 / 10)
        self.assertAlmostEqual(got[1][1], 1000 * 10 / 5)
        self.assertAlmostEqual(got[2][1], 2000 + 1000 * 5 / 20)
        self.assertAlmostEqual(got[3][1], 2000 + 1000 * 10 / 20)

    def test_cell_figures_of_a_loss_cell(self):
        runs = {
            "dense": [trainer_run([2.0, 1.8, 1.6, 1.5], key="test_loss"),
                      trainer_run([2.0, 1.8, 1.6, 1.5], key="test_loss")],
            "adacomp": [trainer_run([2.1, 1.9, 1.8, 1.6], rate=100, key="test_loss"),
                        trainer_run([2.1, 1.9, 1.75, 1.58], rate=100, key="test_loss")],
            "ramp-128": [trainer_run([2.0, 1.84, 1.6, 1.5], rate=50, key="test_loss"),
                         trainer_run([2.0, 1.84, 1.6, 1.5], rate=50, key="test_loss")],
            "local": [trainer_run([2.0, 1.84, 1.6, 1.5], rate=50, key="test_loss")],
        }
        with mock.patch.object(el, "load", return_value=runs):
            st = el.cell_stats("char-lstm", [1, 2], full_epochs=4)
        self.assertAlmostEqual(st["target"], 1.8)
        self.assertEqual(st["dense_mean"], 10)
        rows = {r["name"]: r for r in st["rows"]}
        self.assertEqual(rows["adacomp"]["steps"], [15, 15])
        self.assertAlmostEqual(rows["adacomp"]["ratio"], 1.5)
        # Loss 0.1 higher at epoch 1: behind, beyond the 0.05 nats tolerance (the
        # spreads are 0); at epoch 2, 0.09 higher, spread 0.02: still behind.
        (d1, tol1, bold1), (d2, tol2, bold2) = rows["adacomp"]["gaps"]
        self.assertAlmostEqual(d1, 0.1)
        self.assertTrue(bold1)
        self.assertAlmostEqual(tol2, 0.05)
        self.assertTrue(bold2)
        # The ramp is 0.04 behind at epoch 1 (within 0.05) and level at epoch 2.
        self.assertFalse(rows["ramp-128"]["gaps"][0][2])
        self.assertFalse(rows["ramp-128"]["gaps"][1][2])
        # The ramp's whole run: 2 epochs at rate 50, then 2 at the default's 100.
        full = 20 * 1000 / 50 + 20 * 1000 / 100
        self.assertAlmostEqual(rows["ramp-128"]["rate_vs"], (40 * 1000 / 100) / full)
        # The same bytes kept on for the whole run: half the default's rate.
        self.assertAlmostEqual(rows["local"]["rate_vs"], 0.5)

    def test_tradeoff_points_leave_out_dense_and_set_apart_runs_that_never_reached(self):
        runs = {
            "dense": [trainer_run([0.5, 0.7, 0.8, 0.9])],
            "adacomp": [trainer_run([0.4, 0.6, 0.7, 0.8], rate=100)],
            "ramp-128": [trainer_run([0.5, 0.6, 0.7, 0.8], rate=50)],
            "local": [trainer_run([0.3, 0.4, 0.5, 0.6], rate=50)],
        }
        with mock.patch.object(el, "load", return_value=runs):
            st = el.cell_stats("mnist-cnn", [1], full_epochs=4)
        reached, missed = tradeoff.tradeoff_points(st)
        rows = {r["name"]: r for r in st["rows"]}
        # dense reaches its own target at step 10; the default at 15, the ramp at 15.
        self.assertEqual([n for n, _, _ in reached], ["adacomp", "ramp-128"])
        self.assertEqual(reached[0][1:], (1.0, 1.5))
        self.assertEqual(reached[1][1:], (rows["ramp-128"]["rate_vs"], 1.5))
        # local (kept on) never gets to 0.8: apart, at half the default's rate.
        self.assertEqual(missed, [("local", 0.5, None)])

    def test_grid_tradeoff_points_are_the_image_cells_runs(self):
        acc = {"dense": [trainer_run([0.5, 0.7, 0.8, 0.9])],
               "adacomp": [trainer_run([0.4, 0.6, 0.7, 0.8], rate=100)],
               "ramp-128": [trainer_run([0.5, 0.6, 0.7, 0.8], rate=50)],
               "l8": [trainer_run([0.5, 0.7, 0.8, 0.9], rate=10)]}  # not a grid run
        loss = {"dense": [trainer_run([2.0, 1.8, 1.6, 1.5], key="test_loss")],
                "adacomp": [trainer_run([2.1, 1.9, 1.8, 1.6], rate=100, key="test_loss")]}
        stats = {}
        for cell, runs in (("mnist-cnn", acc), ("char-lstm", loss)):
            with mock.patch.object(el, "load", return_value=runs):
                stats[cell] = el.cell_stats(cell, [1], full_epochs=4)
        # A measured full-run rate, where there is one, is the ramp's.
        with mock.patch.object(grid, "full_run_rate",
                               lambda cell, name: 0.9 if name == "ramp-128" else None):
            got = grid.tradeoff_points(stats)
        self.assertEqual(got, [("mnist-cnn", "default", 1.0, 1.5),
                               ("mnist-cnn", "ramp", 0.9, 1.5)])

    def test_windows_of_the_first_epoch(self):
        # Evaluations every 5 steps of 10-step epochs: the first window holds step 5
        # only (0 < step <= 4), none; (0.4, 1.16] holds 5 and 10.
        s = trainer_run([0.5, 0.7, 0.8, 0.9])
        self.assertIsNone(el.window_mean(s, 0.0, 0.4))
        self.assertAlmostEqual(el.window_mean(s, 0.4, 1.16), 0.6)
        s = trainer_run([0.5, 0.7, 0.8, 0.9], per=20)  # evaluations every 10 steps
        self.assertAlmostEqual(el.window_mean(s, 0.0, 0.5), 0.5)

    def test_windows_reading_picks_by_rate(self):
        st = {"rows": [
            {"name": "dense", "windows": [0.0, 0.0], "rate_vs": 1, "label": "dense"},
            {"name": "adacomp", "windows": [-0.04, -0.02], "rate_vs": 1.0, "label": "default"},
            {"name": "cheap", "windows": [-0.01, -0.03], "rate_vs": 0.9, "label": "cheap"},
            {"name": "dear", "windows": [0.0, -0.005], "rate_vs": 0.1, "label": "dear"}]}
        text = "\n".join(el.windows_reading(st, el.ACCURACY[3]))
        self.assertIn("- epoch 0-0.4: the default -4.00 pt; at 0.8x the default's rate or "
                      "more, at best -1.00 pt (cheap); below that rate, at best +0.00 pt "
                      "(dear, 0.10x the default's rate).", text)
        self.assertIn("- epoch 0.4-1.16: the default -2.00 pt; at 0.8x the default's rate "
                      "or more, at best -2.00 pt (default)", text)

    def test_local_rate_from_the_full_runs(self):
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(grid, "FULL_DIR", os.path.join(tmp, "full")):
            self.assertIsNone(grid.full_run_rate("fc-dnn-adam", "local"))  # no runs
            full = os.path.join(tmp, "full")
            os.makedirs(full)
            for tag, rate in (("", 400.0), ("_local", 220.0)):
                with open(os.path.join(full, f"fc-dnn_adacomp_adam_P4_B128_e12_s1{tag}.json"),
                          "w") as f:
                    json.dump({"compression_rate": {"end_to_end": rate}}, f)
            self.assertAlmostEqual(grid.full_run_rate("fc-dnn-adam", "local"), 0.55)
            self.assertIsNone(grid.full_run_rate("fc-dnn-adam", "ramp-128"))  # not kept on
            self.assertIsNone(grid.full_run_rate("fc-dnn", "local"))  # no SGD runs here

    def test_grid_doc_and_verdicts(self):
        runs = {
            "dense": [trainer_run([0.70, 0.80, 0.85, 0.86])],
            "adacomp": [trainer_run([0.60, 0.75, 0.80, 0.86], rate=100)],
            "ramp-128": [trainer_run([0.72, 0.80, 0.85, 0.86], rate=90)],
            "local": [trainer_run([0.70, 0.79, 0.85, 0.86], rate=95)],
        }
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(el, "load", side_effect=lambda cell, seeds:
                                  runs if cell in ("fc-dnn", "fc-dnn-adam") else {}), \
                mock.patch.object(grid, "DOC", os.path.join(tmp, "grid.md")), \
                mock.patch.object(grid, "FULL_DIR", os.path.join(tmp, "full")), \
                mock.patch.object(grid, "plot", lambda stats: None):
            grid.report(["fc-dnn", "fc-dnn-adam"], [1])
            with open(os.path.join(tmp, "grid.md")) as f:
                doc = f.read()
        self.assertIn("| fc-dnn | default | 1 | 80.00% | 10 | 1.50x | **-5.00 pt** / "
                      "+0.00 pt |", doc)
        self.assertIn("| fc-dnn | ramp | 1 | 80.00% | 10 | 1.00x | +0.00 pt / +0.00 pt |", doc)
        # The local optimizer is a run of the Adam cells only.
        self.assertNotIn("| fc-dnn | local optimizer |", doc)
        self.assertIn("| fc-dnn-adam | local optimizer | 1 | 80.00% | 10 | 1.50x |", doc)
        self.assertNotIn("DDP example", doc)  # no runs of it here
        self.assertIn("- fc-dnn, ramp: steps 1.00x (met); epoch gaps all within tolerance; "
                      "whole-run rate 0.98x (met).", doc)
        self.assertIn("- fc-dnn, default: steps 1.50x (missed); epoch gaps beyond tolerance "
                      "at epoch 1.", doc)

    def test_whole_schedule_with_the_ramp(self):
        def summary(model, finals, rate):
            key = "test_loss" if model == "char-lstm" else "test_accuracy"
            out = {"model": model, "epoch_metrics": [{key: v} for v in finals],
                   "compression_rate": {"end_to_end": rate}}
            out["test_loss_per_char" if model == "char-lstm" else key] = finals[-1]
            return out

        runs = {  # (model, codec, tag, seed): per-epoch metric, the last the final one
            ("fc-dnn", "dense", "", 1): summary("fc-dnn", [0.80, 0.85, 0.90], 1),
            ("fc-dnn", "adacomp", "", 1): summary("fc-dnn", [0.70, 0.84, 0.895], 400),
            ("fc-dnn", "adacomp", "_ramp128", 1): summary("fc-dnn", [0.79, 0.82, 0.901], 300),
            ("fc-dnn", "dense", "", 2): summary("fc-dnn", [0.80, 0.85, 0.90], 1),
            ("fc-dnn", "adacomp", "", 2): summary("fc-dnn", [0.70, 0.84, 0.885], 400),
            ("fc-dnn", "adacomp", "_ramp128", 2): summary("fc-dnn", [0.79, 0.84, 0.899], 320),
            # Seed 3 has no ramp run: left out.
            ("fc-dnn", "dense", "", 3): summary("fc-dnn", [0.10, 0.10, 0.10], 1),
            ("fc-dnn", "adacomp", "", 3): summary("fc-dnn", [0.10, 0.10, 0.10], 1),
            ("char-lstm", "dense", "", 1): summary("char-lstm", [2.0, 1.8, 1.6], 1),
            ("char-lstm", "adacomp", "", 1): summary("char-lstm", [2.2, 1.9, 1.7], 400),
            ("char-lstm", "adacomp", "_ramp128", 1): summary("char-lstm", [2.1, 1.85, 1.61],
                                                            360),
        }

        def full_run(cell, codec, tag="", seed=1):
            return runs.get((el.cell_parts(cell)[0], codec, tag, seed))

        st = {"rows": [{"name": grid.RAMP, "rate_vs": 0.8}]}
        with mock.patch.object(grid, "full_run", side_effect=full_run):
            fc = grid.whole_schedule_row("fc-dnn", st)
            lstm = grid.whole_schedule_row("char-lstm", st)
            self.assertIsNone(grid.whole_schedule_row("mnist-cnn", st))  # no runs
            lines = grid.whole_schedule_lines({"fc-dnn": st, "mnist-cnn": st})
        # Seeds 1 and 2: end -1.00 pt (spread 1.0 pt: met) -> 0.00 pt; worst from epoch 2
        # -1.00 -> -2.00 pt (epoch 2 means 0.84 and 0.83 against 0.85); rate (0.75 + 0.8) / 2.
        self.assertEqual(fc, "| fc-dnn | 2 | -1.00 pt (met) -> +0.00 pt (met) | -1.00 pt -> "
                             "-2.00 pt | 0.78x | 0.80x |")
        # Loss: behind by 0.1 (beyond 0.02: missed) -> 0.01 at the end.
        self.assertEqual(lstm, "| char-lstm | 1 | -0.100 (missed) -> -0.010 (met) | -0.100 -> "
                               "-0.050 | 0.90x | 0.80x |")
        self.assertIn("## The whole schedule with the ramp", lines)
        self.assertEqual([line for line in lines if line.startswith("| fc-dnn")], [fc])

if __name__ == "__main__":
    unittest.main()
