"""experiments/scaling/cost_model_oos.py's P = 16 rounds: auto against the faster of the two
exchanges on the medians over rounds (experiments/scaling/scaling.py --part auto16), met within
5 %."""

import unittest

import cost_model_oos as oos


def run(steps=45):
    return {"steps": steps, "machine": {"cpu": "Test CPU", "cores": 2}}


class RoundsSectionTest(unittest.TestCase):
    def test_medians_over_rounds(self):
        runs = {("1gbit", "adacomp"): [0.10, 0.13, 0.11],
                ("1gbit", "adacomp-rs"): [0.20, 0.12, 0.30],
                ("1gbit", "adacomp-auto"): [0.14, 0.11, 0.115]}
        lines, verdicts = oos.rounds_section(runs, {("1gbit", "adacomp"): run()})
        # medians: all-gather 0.11, reduce-scatter 0.20, auto 0.115: 1.045x the faster.
        row = [l for l in lines if l.startswith("| 1 Gbit/s")][0]
        self.assertIn("| 3 | 0.1100 (0.1000, 0.1300, 0.1100) | 0.2000 (0.2000, 0.1200, 0.3000) "
                      "| 0.1150 (0.1400, 0.1100, 0.1150) | 1.045x | 1.40, 0.85, 1.05 |", row)
        self.assertEqual(verdicts, ["P = 16, 1 Gbit/s: auto 1.045x the faster exchange over 3 "
                                    "rounds (target within 5 %: met)"])
        self.assertTrue(any("45 steps each" in l for l in lines))

    def test_missed_beyond_five_percent(self):
        runs = {("unshaped", "adacomp"): [0.2], ("unshaped", "adacomp-rs"): [0.1],
                ("unshaped", "adacomp-auto"): [0.106]}
        _, verdicts = oos.rounds_section(runs, {("unshaped", "adacomp"): run()})
        self.assertEqual(verdicts, ["P = 16, unshaped: auto 1.060x the faster exchange over 1 "
                                    "rounds (target within 5 %: missed)"])

    def test_a_link_without_every_exchange_is_left_out(self):
        runs = {("1gbit", "adacomp"): [0.1], ("1gbit", "adacomp-auto"): [0.1]}
        self.assertEqual(oos.rounds_section(runs, {("1gbit", "adacomp"): run()}), ([], []))


class CommLineTest(unittest.TestCase):
    def test_each_link_with_every_exchange(self):
        comm = {("1gbit", "adacomp"): 0.0381, ("1gbit", "adacomp-rs"): 0.0445,
                ("1gbit", "adacomp-auto"): 0.0408, ("unshaped", "adacomp"): 0.03}
        lines = oos.comm_line(comm)
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[1].endswith(": 1 Gbit/s 38.1 / 44.5 / 40.8 ms."), lines[1])

    def test_nothing_without_a_whole_link(self):
        self.assertEqual(oos.comm_line({("unshaped", "adacomp"): 0.03}), [])


if __name__ == "__main__":
    unittest.main()
