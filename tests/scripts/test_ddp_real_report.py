"""scripts/ddp_real_report.py's check of the time-to-target estimate: a whole
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


if __name__ == "__main__":
    unittest.main()
