"""experiments/scaling/schedule_report.py's logic on hand-made runs: the targets come from the
float32 ring's run, the time to a target is the training seconds at the first
evaluation reaching it, and each verdict compares AdaComp with the ring that gets
there first on the same link (3x at 100 Mbit/s, no later at 1 Gbit/s)."""

import unittest

import schedule_report as sr


def run(codec, link, points, steps=1536, epochs=12):
    """A run of `epochs` epochs whose evaluations are (step, accuracy, training seconds)."""
    return {"codec": codec, "link": link, "command": f"adacomp train {codec}",
            "summary": {"steps": steps, "test_accuracy": points[-1][1],
                        "wire_bytes_per_step_per_learner": {"sent": 1000.0},
                        "compression_rate": {"end_to_end": 100.0},
                        "epoch_metrics": [{"step": s, "test_accuracy": a, "train_seconds": t,
                                           "epoch": min((s - 1) * epochs // steps, epochs - 1)}
                                          for s, a, t in points]}}


# The float32 ring: 0.80 after one epoch (step 128), 0.85 at half (768), 0.90 at the end.
DENSE = [(64, 0.70, 10.0), (128, 0.80, 20.0), (768, 0.85, 120.0), (1536, 0.90, 240.0)]


class ScheduleReportTest(unittest.TestCase):
    def test_targets_from_the_float32_ring(self):
        runs = {("dense", "1gbit"): run("dense", "1gbit", DENSE),
                ("fp16", "1gbit"): run("fp16", "1gbit", [(1536, 0.99, 1.0)])}
        ref, tg = sr.targets(runs)
        self.assertEqual(ref["codec"], "dense")
        self.assertEqual(tg["after one epoch"], 0.80)
        self.assertEqual(tg["after half the schedule"], 0.85)
        self.assertAlmostEqual(tg["final minus 0.3 points"], 0.897)

    def test_epochs_from_the_evaluations(self):
        # 8 epochs of 100 steps: one epoch is step 100, half the schedule step 400.
        # (A fixed 12 epochs would put them at steps 66 and 396.)
        points = [(80, 0.55, 1.0), (100, 0.60, 2.0), (396, 0.74, 3.0), (400, 0.75, 4.0),
                  (800, 0.88, 5.0)]
        ref, tg = sr.targets({("dense", "1gbit"): run("dense", "1gbit", points, 800, 8)})
        self.assertEqual(tg["after one epoch"], 0.60)
        self.assertEqual(tg["after half the schedule"], 0.75)

    def test_fp16_ring_when_no_float32_one(self):
        runs = {("fp16", "100mbit"): run("fp16", "100mbit", DENSE)}
        ref, tg = sr.targets(runs)
        self.assertEqual(ref["codec"], "fp16")
        self.assertEqual(tg["after one epoch"], 0.80)

    def test_time_to_is_the_first_evaluation_at_or_above(self):
        r = run("adacomp", "100mbit", [(32, 0.5, 1.0), (64, 0.8, 2.0), (96, 0.85, 3.0)])
        self.assertEqual(sr.time_to(r, 0.8), (2.0, 64))
        self.assertEqual(sr.time_to(r, 0.81), (3.0, 96))
        self.assertIsNone(sr.time_to(r, 0.9))

    def test_verdicts_against_the_fastest_ring(self):
        # At 100 Mbit/s the fp16 ring takes 300 s to 0.80; AdaComp 100 s (3x: met) and
        # 0.85 at 200 s against 600 s... then its final 0.897 never (missed).
        ring = [(128, 0.80, 300.0), (768, 0.85, 600.0), (1536, 0.90, 1200.0)]
        ada = [(160, 0.80, 100.0), (800, 0.85, 250.0), (1536, 0.89, 400.0)]
        runs = {("dense", "1gbit"): run("dense", "1gbit", DENSE),
                ("fp16", "100mbit"): run("fp16", "100mbit", ring),
                ("adacomp", "100mbit"): run("adacomp", "100mbit", ada)}
        _, tg = sr.targets(runs)
        text = "\n".join(sr.section(runs, tg))
        self.assertIn("AdaComp, after one epoch: 100.0 s against the fp16 ring's 300.0 s: "
                      "3.00x sooner (target 3x sooner: **met**)", text)
        self.assertIn("AdaComp, after half the schedule: 250.0 s against the fp16 ring's "
                      "600.0 s: 2.40x sooner (target 3x sooner: **missed**)", text)
        self.assertIn("AdaComp, final minus 0.3 points: not reached; the fp16 ring needs "
                      "1200.0 s: **missed**", text)
        # At 1 Gbit/s, no later than the ring: the float32 ring's own run is the ring.
        runs[("adacomp", "1gbit")] = run("adacomp", "1gbit",
                                         [(128, 0.80, 21.0), (768, 0.85, 119.0),
                                          (1536, 0.90, 240.0)])
        text = "\n".join(sr.section(runs, tg))
        self.assertIn("AdaComp, after one epoch: 21.0 s against the float32 ring's 20.0 s: "
                      "1.05x later (target 1x sooner: **missed**)", text)
        self.assertIn("AdaComp, after half the schedule: 119.0 s against the float32 ring's "
                      "120.0 s: 1.01x sooner (target 1x sooner: **met**)", text)


if __name__ == "__main__":
    unittest.main()
