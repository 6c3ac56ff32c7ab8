"""experiments/ddp-real-models/auto_speed_report.py's logic on hand-made summaries: the
step auto settled on, read from its first note; the settled median counted from that
step (the probes left out) and the mean over every timed step (probes in); the checks
(unshaped: auto at most 1.03x no hook; 100 Mbit/s: at most 1.05x the one call)."""

import os
import tempfile
import unittest

import auto_speed_report as asr


def summary(times, untimed=2, choices=None):
    s = {"step_times_s": times, "untimed_steps": untimed, "machine": "test"}
    if choices is not None:
        s["auto"] = {"choices": choices, "dense_steps": 0, "codec_steps": 0}
    return s


class AutoSpeedReportTest(unittest.TestCase):
    def test_settled_steps_start_at_the_first_note(self):
        # Timed steps are steps 3..12; settled on the codec at step 9: steps 9..12 count.
        s = summary([5.0, 5.0, 5.0, 9.0, 1.0, 1.0, 1.2, 1.0, 1.1, 1.3], choices=[
            "step 9: auto: codec, 1.0 s a step against dense's 5.0 s",
            "step 11: auto: probing dense again (drift)"])
        all_mean, settled, way = asr.times(s)
        self.assertEqual(way, "codec")
        self.assertAlmostEqual(all_mean, sum(s["step_times_s"]) / 10)
        self.assertAlmostEqual(settled, 1.15)  # steps 9-12: median of 1.2, 1.0, 1.1, 1.3
        self.assertIsNone(asr.settled_from(summary([1.0])))

    def test_checks_per_link(self):
        runs = {}
        for link, none, one, auto in (("unshaped", 1.00, 1.20, 1.02),
                                      ("100mbit", 6.0, 1.20, 1.30),
                                      ("1gbit", 1.5, 1.25, 1.20)):
            runs[("gpt", "none", link)] = summary([none] * 10)
            runs[("gpt", "adacomp-one", link)] = summary([one] * 10)
            a = summary([auto] * 10, choices=["step 9: auto: dense, 1 s a step against "
                                              "codec's 2 s"])
            a["auto"].update(dense_steps=18, codec_steps=4)
            runs[("gpt", "adacomp-one-auto", link)] = a
        table = {r["link"]: r for r in asr.rows(runs)}
        self.assertEqual(set(table), {"unshaped", "100mbit", "1gbit"})
        (what, v, lim, ok), = asr.verdicts(table["unshaped"])
        self.assertAlmostEqual(v, 1.02)
        self.assertTrue(ok)
        (what, v, lim, ok), = asr.verdicts(table["100mbit"])
        self.assertAlmostEqual(v, 1.30 / 1.20)
        self.assertFalse(ok)  # 1.08x the one call: missed
        self.assertEqual(asr.verdicts(table["1gbit"]), [])
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "auto-speed.md")
            asr.report(runs, doc=doc, img=os.path.join(d, "a.png"), rs_runs={}, ar_runs={},
                       repeats={}, nowait={})
            with open(doc) as f:
                text = f.read()
            self.assertIn("missed", text)
            self.assertIn("| gpt | unshaped | 1.000 | 1.200 | 1.020 |", text)
            self.assertTrue(os.path.exists(os.path.join(d, "a.png")))

    def test_the_by_slices_set_needs_no_hook_and_auto_only(self):
        runs = {("gpt", "none", "unshaped"): summary([1.0] * 10),
                ("gpt", "adacomp-one-auto", "unshaped"): summary(
                    [1.3] * 6 + [1.1] * 4, choices=["step 9: auto: codec, 1.1 s a step "
                                                    "against dense's 1.3 s"])}
        (r,) = asr.rs_rows(runs)
        self.assertAlmostEqual(r["auto_settled"], 1.1)
        self.assertAlmostEqual(r["dense_probe"], 1.3)
        text = "\n".join(asr.rs_section(runs))
        self.assertIn("1.300 (1.30x no hook's) | 1.10x |", text)

    def test_the_all_reduce_set_comes_first(self):
        def one_set(none, auto):
            out = {}
            for link in asr.LINKS:
                out[("gpt", "none", link)] = summary([none] * 10)
                out[("gpt", "adacomp-one", link)] = summary([1.5] * 10)
                a = summary([auto] * 10, choices=[f"step 9: auto: dense, {auto} s a step "
                                                  f"against codec's 2 s"])
                a["auto"].update(dense_steps=20, codec_steps=4)
                out[("gpt", "adacomp-one-auto", link)] = a
            return out
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "auto-speed.md")
            rep = {"rep1": {k: v for k, v in one_set(1.0, 1.05).items() if k[2] == "unshaped"},
                   "rep2": {k: v for k, v in one_set(2.0, 2.02).items() if k[2] == "unshaped"}}
            nowait = {"rep1": {k: v for k, v in one_set(1.0, 1.02).items()
                               if k[2] == "unshaped"},
                      "rep2": {k: v for k, v in one_set(2.0, 2.1).items()
                               if k[2] == "unshaped"}}
            asr.report(one_set(1.0, 3.0), doc=doc, img=os.path.join(d, "a.png"), rs_runs={},
                       ar_runs=one_set(1.0, 1.01), repeats=rep, nowait=nowait)
            with open(doc) as f:
                text = f.read()
        ar, before = text.index("as torch's all-reduce"), text.index("all-gather (before)")
        self.assertLess(ar, before)
        # the all-reduce set's row (1.01x no hook: met) before the all-gather's (3x: missed)
        self.assertLess(text.index("| gpt | unshaped | 1.000 | 1.500 | 1.010 |"), before)
        self.assertGreater(text.index("| gpt | unshaped | 1.000 | 1.500 | 3.000 |"), before)
        self.assertIn("1.01x no hook's) | 20 / 4 | auto settled / no hook 1.01x (at most "
                      "1.03x: met)", text)
        self.assertIn("unshaped: gpt dense", text)
        # the repeats: only the pair they hold, the first set's ratio first; median 1.01
        self.assertIn("- gpt unshaped: auto settled / no hook 1.010, 1.050, 1.010 (the first "
                      "from the table above); median 1.010 (at most 1.03: met).", text)
        self.assertNotIn("gpt 1gbit: auto settled", text)
        # the sets after the agreement stopped waiting: their own section, median 1.035
        self.assertLess(text.index("median 1.010 (at most 1.03: met)"),
                        text.index("## After the ranks stopped waiting"))
        self.assertIn("- gpt unshaped: auto settled / no hook 1.020, 1.050; median 1.035 (at "
                      "most 1.03: missed).", text)
        # no hook over the same steps (constant times here: the same ratios), and the
        # earlier sets' (the all-reduce set's 1.01, the repeats' 1.05 and 1.01)
        self.assertIn("- gpt unshaped: not waiting: auto settled / no hook 1.020, 1.050; "
                      "median 1.035", text)
        self.assertIn("- gpt unshaped: waiting (the sets above): auto settled / no hook 1.010, "
                      "1.050, 1.010; median 1.010", text)

    def test_same_steps_leave_out_no_hooks_first_steps(self):
        # auto settled at step 5 (timed steps are 3..10): no hook's steps 5..10 count
        none = summary([3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
        auto = summary([2.0, 2.0, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1],
                       choices=["step 5: auto: dense, 1.1 s a step against codec's 2 s"])
        runs = {("gpt", "none", "unshaped"): none,
                ("gpt", "adacomp-one-auto", "unshaped"): auto}
        (r,), = asr.same_steps_ratios([runs]).values()
        self.assertAlmostEqual(r, 1.1)

    def test_a_model_missing_a_hook_has_no_row(self):
        runs = {("resnet18", "none", "unshaped"): summary([1.0] * 4)}
        self.assertEqual(asr.rows(runs), [])


if __name__ == "__main__":
    unittest.main()
