"""experiments/ddp-real-models/ddp_real_report.py's check of the time-to-target estimate: a whole
schedule's training time (wall clock less evaluations) against steps x the time per
step of the short runs, the one timed from the start and those timed after a
mid-schedule checkpoint (speed --from-step), each called met within 10 %."""

import unittest

import ddp_real_report as rep


def short(step_s, timed=10):
    return {"step_time_mean_s": step_s, "timed_steps": timed}


class CheckEstimateTest(unittest.TestCase):
    def setUp(self):
        self.full = {"steps": 100, "wall_s": 130.0,
                     "evals": [{"eval_s": 10.0}, {"eval_s": 20.0}]}  # trained 100 s

    def test_each_short_run_scored(self):
        spd = {"m_h_P4_link_full": self.full, "m_h_P4_link": short(1.2),
               "m_h_P4_link_from50": short(0.95), "other_P4_link": short(9.0)}
        text = "\n".join(rep.check_estimate(spd))
        self.assertIn("(m_h_P4_link): the whole 100-step schedule on the cluster trained "
                      "for 100 s (wall clock 130 s less 30 s of evaluations)", text)
        self.assertIn("- the 10 steps timed from the start (1.200 s/step): 120 s, +20.0 % "
                      "(missed)", text)
        self.assertIn("- the 10 steps timed after a checkpoint of step 50 (0.950 s/step): "
                      "95 s, -5.0 % (met)", text)
        self.assertNotIn("9.000", text)

    def test_only_checkpoint_runs(self):
        spd = {"m_h_P4_link_full": self.full, "m_h_P4_link_from75": short(1.1, timed=12)}
        text = "\n".join(rep.check_estimate(spd))
        self.assertNotIn("from the start", text)
        self.assertIn("the 12 steps timed after a checkpoint of step 75", text)
        self.assertIn("+10.0 % (met)", text)

    def test_no_short_run_no_line(self):
        self.assertEqual(rep.check_estimate({"m_h_P4_link_full": self.full}), [])


def evals(*pairs):
    return {"evals": [{"step": st, "loss": v} for st, v in pairs]}


class MidScheduleRowsTest(unittest.TestCase):
    """The time to the final target with steps timed after a checkpoint: this run's
    steps to the target x its step after K, against no hook's steps x no hook's own run
    after K where there is one, else its run timed from the start."""

    def setUp(self):
        self.found = {"none": evals((0, 5.0), (100, 2.5), (200, 2.2)),
                      "adacomp": evals((0, 5.0), (100, 2.3), (200, 2.2))}
        self.tg = {"final": 2.35}  # no hook reaches it at step 200, adacomp at 100

    def rows(self, spd):
        return [l for l in rep.mid_schedule_rows("gpt", "loss", self.found, self.tg, spd)
                if l.startswith("| 4 ")]

    def test_against_no_hooks_run_after_k(self):
        spd = {"gpt_none_P4_100mbit": short(9.0), "gpt_none_P4_100mbit_from100": short(3.0),
               "gpt_adacomp_P4_100mbit": short(1.5), "gpt_adacomp_P4_100mbit_from100": short(1.2),
               "resnet18_adacomp_P4_100mbit_from100": short(7.0)}
        rows = self.rows(spd)
        self.assertEqual(len(rows), 2)
        # no hook: 200 x 3.0 = 600 s; adacomp: 100 x 1.2 = 120 s, 5x sooner.
        self.assertEqual(rows[0], "| 4 | 100mbit | no hook | 100 | 3.000 | 9.000 | - | 600 s | - |")
        self.assertEqual(rows[1],
                         "| 4 | 100mbit | AdaComp | 100 | 1.200 | 1.500 | - | 120 s | 5.00x sooner |")

    def test_no_hook_from_the_start_when_it_has_no_run_after_k(self):
        spd = {"gpt_none_P4_1gbit": short(2.4), "gpt_adacomp_P4_1gbit_from50": short(1.2)}
        rows = self.rows(spd)
        self.assertEqual(rows, ["| 4 | 1gbit | AdaComp | 50 | 1.200 | - | - | 120 s | 4.00x sooner |"])

    def test_nothing_without_runs_after_a_checkpoint(self):
        self.assertEqual(rep.mid_schedule_rows("gpt", "loss", self.found, self.tg,
                                               {"gpt_none_P4_1gbit": short(2.4)}), [])


class FullRunRowsTest(unittest.TestCase):
    """Whole schedules on the cluster: training time (wall clock less evaluations so far)
    at the first evaluation at or past each target, against no hook's."""

    def full(self, losses, eval_s=1.0, step_s=2.0):
        ev, wall = [], 0.0
        for i, v in enumerate(losses):
            wall += (step_s * 100 if i else 0.0) + eval_s
            ev.append({"step": 100 * i, "loss": v, "wall_s": wall, "eval_s": eval_s})
        return {"evals": ev, "wall_s": wall}

    def test_measured_times_and_ratio(self):
        spd = {"gpt_none_P4_100mbit_full": self.full([5.0, 2.6, 2.2], step_s=3.0),
               "gpt_adacomp_P4_100mbit_full": self.full([5.0, 2.3, 2.2], step_s=1.0),
               "gpt_adacomp_P4_100mbit": short(1.0)}
        tg = {"early": 2.6, "final": 2.35}
        rows = [l for l in rep.full_run_rows("gpt", "loss", tg, spd) if l.startswith("| 4 ")]
        # no hook: early at step 100 (300 s of training), final at 200 (600 s);
        # adacomp: both at step 100 (100 s): 6x sooner.
        self.assertEqual(rows, [
            "| 4 | 100mbit | no hook | 2.2000 | 600 | 300 s | 600 s | - |",
            "| 4 | 100mbit | AdaComp | 2.2000 | 200 | 100 s | 100 s | 6.00x sooner |"])

    def test_not_reached(self):
        spd = {"gpt_adacomp_P4_1gbit_full": self.full([5.0, 2.9, 2.8])}
        rows = rep.full_run_rows("gpt", "loss", {"early": 2.6, "final": 2.35}, spd)
        self.assertIn("| 4 | 1gbit | AdaComp | 2.8000 | 400 | not reached | not reached | - |",
                      rows)


if __name__ == "__main__":
    unittest.main()
