"""experiments/scaling/auto_schedule_report.py's logic on hand-made runs: what auto sent
each step, rebuilt from its recorded choices; each target compares auto with the sooner
of fixed AdaComp and the rings on its link (at most 1.05x later), and at 100 Mbit/s with
the fastest ring (at least 3x sooner); the final accuracy with the fastest ring's."""

import unittest

import auto_schedule_report as ar
from test_schedule_report import DENSE, run


def auto_run(link, points, choices, steps=1536, dense_steps=4):
    r = run("auto", link, points, steps=steps)
    r["summary"]["auto"] = {"choices": choices, "dense_steps": dense_steps,
                            "codec_steps": steps - dense_steps}
    return r


class AutoScheduleReportTest(unittest.TestCase):
    def test_modes_from_the_choices(self):
        r = auto_run("1gbit", DENSE, ["step 9: auto: codec, 0.01 s a step against dense's 0.1 s",
                                      "step 20: auto: probing dense again (drift)",
                                      "step 24: auto: dense, 0.01 s a step against codec's "
                                      "0.02 s"], steps=30)
        m = ar.modes(r)
        self.assertEqual(len(m), 30)
        self.assertEqual(m[:4], ["dense"] * 4)        # the first probe: dense, then
        self.assertEqual(m[4:8], ["codec"] * 4)       # the codec, with no note
        self.assertEqual(m[8:19], ["codec"] * 11)     # settled from step 9
        self.assertEqual(m[19:23], ["dense"] * 4)     # probing dense from step 20
        self.assertEqual(m[23:], ["dense"] * 7)       # settled on dense at step 24

    def test_verdicts(self):
        tg = {"after one epoch": 0.80, "final minus 0.3 points": 0.897}
        fp16 = [(128, 0.80, 300.0), (1536, 0.90, 3000.0)]
        ada = [(128, 0.78, 30.0), (256, 0.80, 60.0), (1536, 0.899, 600.0)]
        # auto: the epoch target at 62 s (1.03x AdaComp's 60: met; 4.8x sooner than the
        # ring: met), the final one at 700 s (1.17x AdaComp's 600: missed), final
        # accuracy 0.898 against the ring's 0.90 (-0.2 points: met).
        auto = [(128, 0.80, 62.0), (1536, 0.898, 700.0)]
        runs = {("fp16", "100mbit"): run("fp16", "100mbit", fp16),
                ("adacomp", "100mbit"): run("adacomp", "100mbit", ada),
                ("auto", "100mbit"): auto_run("100mbit", auto, [])}
        lines, verdicts = ar.section(runs, tg)
        text = "\n".join(lines)
        self.assertEqual(verdicts, [True, True, False, True, True])
        self.assertIn("1.03x (target at most 1.05x: **met**)", text)
        self.assertIn("4.84x sooner than the fp16 ring (target at least 3x: **met**)", text)
        self.assertIn("1.17x (target at most 1.05x: **missed**)", text)
        self.assertIn("auto -0.20 points", text)
        # A target auto never reaches is missed; a link without auto is left out.
        runs[("auto", "100mbit")] = auto_run("100mbit", [(1536, 0.79, 500.0)], [])
        runs[("adacomp", "1gbit")] = run("adacomp", "1gbit", ada)
        lines, verdicts = ar.section(runs, tg)
        self.assertNotIn("### 1 Gbit/s", lines)
        self.assertIn("- after one epoch: auto does not reach it; the AdaComp needs 60.0 s: "
                      "**missed**.", lines)
        self.assertEqual(verdicts, [False, False, False])

    def test_a_variant_is_judged_against_every_fixed_run_given(self):
        # auto with the local SGD reaches the epoch target at 70 s. Given both fixed runs,
        # the sooner is AdaComp's (60 s): 1.17x, missed; given the fixed local run
        # alone (80 s): 0.88x, met.
        tg = {"after one epoch": 0.80}
        runs = {("fp16", "1gbit"): run("fp16", "1gbit", [(128, 0.80, 300.0)]),
                ("adacomp", "1gbit"): run("adacomp", "1gbit", [(128, 0.80, 60.0)]),
                ("adacomp-local", "1gbit"): run("adacomp-local", "1gbit", [(128, 0.80, 80.0)]),
                ("auto", "1gbit"): auto_run("1gbit", [(128, 0.80, 50.0)], []),
                ("auto-local", "1gbit"): auto_run("1gbit", [(128, 0.80, 70.0)], [])}
        lines, verdicts = ar.section(runs, tg, who="auto-local",
                                     fixed=("adacomp", "adacomp-local"))
        text = "\n".join(lines)
        self.assertEqual(verdicts[0], False)
        self.assertIn("auto, unmasked local SGD 70.0 s against the sooner of ring and AdaComp "
                      "and AdaComp, unmasked local SGD (AdaComp, 60.0 s): 1.17x", text)
        # Its own row first, the plain auto's beside it.
        rows = [x.split(" | ")[0] for x in lines if x.startswith("| ") and " s (step " in x]
        self.assertEqual(rows[:3], ["| auto, unmasked local SGD", "| auto", "| AdaComp"])
        lines, verdicts = ar.section(runs, tg, who="auto-local", fixed=("adacomp-local",))
        self.assertEqual(verdicts[0], True)
        self.assertIn("(AdaComp, unmasked local SGD, 80.0 s): 0.88x", "\n".join(lines))

    def test_adacomp_made_again_is_the_reference(self):
        old = run("adacomp", "100mbit", [(128, 0.80, 30.0)])
        new = run("adacomp", "100mbit", [(128, 0.80, 90.0)])
        for r, date in ((old, "2026-12-04 10:00:00 UTC"), (new, "2026-12-06 10:00:00 UTC")):
            r.update(model="mnist-cnn", date=date)
        runs = {("adacomp", "100mbit"): old, ("auto", "100mbit"): auto_run(
            "100mbit", [(128, 0.80, 60.0)], [])}
        replaced, earlier = ar.with_again(runs, {("mnist-cnn", "100mbit"): new})
        self.assertIs(replaced[("adacomp", "100mbit")], new)
        self.assertIs(earlier["100mbit"], old)
        self.assertIs(runs[("adacomp", "100mbit")], old)  # the caller's dict unchanged
        lines, verdicts = ar.section(replaced, {"after one epoch": 0.80}, earlier)
        # auto 60 s against AdaComp's 90 s made beside it: met (against the earlier
        # 30 s it would be 2x later).
        self.assertEqual(verdicts[0], True)
        self.assertTrue(any("its earlier run (2026-12-04) trained 30.0 s" in x for x in lines))


if __name__ == "__main__":
    unittest.main()
