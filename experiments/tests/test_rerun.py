"""Reruns the exchange-bytes experiment's small part from its config, in a
copy of the experiment, through the one entry point (experiments/run.py), then
its report part, and checks that the run data holds the same byte counts as
the committed data and that every report and plot regenerates byte for byte.

The committed 1M-element counts are removed from the copy first, so the report
can only come out equal if the rerun rewrote them with the same counts. The
25M-element counts (minutes to make) stay as committed.

Run: ctest -R experiments.rerun (it sets ADACOMP to the built program).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "exchange-bytes"
SMALL = ("n1m-own0.3", "n1m-own1", "n1m-own1-fp16")
REPORTS = ("report.md", "predictions.md")


def have_matplotlib():
    return subprocess.run([sys.executable, "-c", "import matplotlib"],
                          capture_output=True).returncode == 0


def rows(path):
    """The counts of a data file (what is measured, not the settings' spelling)."""
    with open(path) as f:
        return json.load(f)["rows"]


class RerunTest(unittest.TestCase):
    def setUp(self):
        if not os.access(os.environ.get("ADACOMP", ""), os.X_OK):
            self.skipTest("ADACOMP does not name the built adacomp program")
        self.tmp = tempfile.mkdtemp(prefix="adacomp-rerun-")
        self.copy = os.path.join(self.tmp, "experiments")
        os.makedirs(self.copy)
        shutil.copy(os.path.join(EXPERIMENTS, "run.py"), self.copy)
        shutil.copytree(os.path.join(EXPERIMENTS, "resultslib"),
                        os.path.join(self.copy, "resultslib"))
        shutil.copytree(os.path.join(EXPERIMENTS, NAME), os.path.join(self.copy, NAME))
        for stem in SMALL:
            for ext in (".json", ".txt"):
                os.remove(os.path.join(self.copy, NAME, "data", stem + ext))
        for report in REPORTS:
            os.remove(os.path.join(self.copy, NAME, report))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_parts(self, *parts):
        p = subprocess.run([sys.executable, os.path.join(self.copy, "run.py"), NAME, *parts],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_small_part_and_report_regenerate_byte_for_byte(self):
        printed = self.run_parts("small", "report")
        self.assertIn("[exchange-bytes small]", printed)  # the steps are named as they run
        for stem in SMALL:
            self.assertEqual(rows(os.path.join(self.copy, NAME, "data", stem + ".json")),
                             rows(os.path.join(EXPERIMENTS, NAME, "data", stem + ".json")), stem)
        for report in REPORTS:
            with open(os.path.join(self.copy, NAME, report)) as f:
                new = f.read()
            with open(os.path.join(EXPERIMENTS, NAME, report)) as f:
                self.assertEqual(new, f.read(), report)
        if have_matplotlib():
            with open(os.path.join(self.copy, NAME, "img", "exchange_bytes.png"), "rb") as f:
                new = f.read()
            with open(os.path.join(EXPERIMENTS, NAME, "img", "exchange_bytes.png"), "rb") as f:
                self.assertEqual(new, f.read(), "img/exchange_bytes.png")

    def test_unknown_part_is_refused_with_the_parts_named(self):
        p = subprocess.run([sys.executable, os.path.join(self.copy, "run.py"), NAME, "nope"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("has no part 'nope'", p.stderr)
        self.assertIn("small, large, report", p.stderr)

    def test_every_config_loads_and_names_existing_scripts(self):
        sys.path.insert(0, EXPERIMENTS)
        import run
        self.assertGreaterEqual(len(run.names()), 8)
        for name in run.names():
            cfg = run.load(name)
            for report in cfg["reports"]:
                self.assertTrue(os.path.isfile(os.path.join(EXPERIMENTS, name, report)),
                                f"{name}: report {report}")
            for part, spec in cfg["parts"].items():
                for step in spec["steps"]:
                    first = step["run"][0]
                    if first.endswith((".py", ".sh")):
                        self.assertTrue(os.path.isfile(os.path.join(EXPERIMENTS, name, first)),
                                        f"{name} {part}: {first}")
                    else:
                        self.assertEqual(first, "adacomp", f"{name} {part}")


if __name__ == "__main__":
    unittest.main()
