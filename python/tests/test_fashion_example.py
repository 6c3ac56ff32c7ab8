"""examples/ddp_fashion_mnist.py's options for the early-lag measurements, on 2 Gloo
processes and 1,024 training images: --local-optimizer and --ramp-steps reach the
hook (its title, the summary), --one-call leaves SGD's velocity unmasked and
--mask masks it, --eval-every scores the whole test set at the
steps it names and at each epoch end (the epoch's own accuracy), and the options
that need the AdaComp hook are refused without it, before any rank starts. The
last evaluation is checked against the saved final weights scored here, with the
test's own loop."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "ddp_fashion_mnist.py")
DATA = "/usr/share/datasets/fashion-mnist"


def run(args, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, EXAMPLE] + args, env=env, capture_output=True,
                          text=True, timeout=timeout)


@unittest.skipUnless(os.path.exists(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")),
                     "dataset-fashion-mnist is not installed")
class EarlyEvalTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="adacomp-fashion-")
        path = os.path.join(cls.tmp, "local.json")
        # 1,024 images / (2 x 32) = 16 steps an epoch; evaluations every 6 steps and at
        # the epoch ends (16, 32).
        cls.weights = os.path.join(cls.tmp, "final.pt")
        cls.proc = run(["--procs", "2", "--epochs", "2", "--train-limit", "1024",
                        "--local-optimizer", "--ramp-steps", "8", "--eval-every", "6",
                        "--summary-json", path, "--save-model", cls.weights])
        cls.summary = None
        if cls.proc.returncode == 0 and os.path.exists(path):
            with open(path) as f:
                cls.summary = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertIsNotNone(self.summary, self.proc.stdout[-2000:] + self.proc.stderr[-2000:])

    def test_options_reach_the_hook(self):
        s = self.summary
        self.assertTrue(s["local_optimizer"])
        self.assertTrue(s["local_mask"])  # --local-optimizer masks
        self.assertEqual(s["ramp_steps"], 8)
        self.assertIn("local sgd", s["title"])
        self.assertIn("ramp 8 -> L_T over 8 steps", s["title"])
        self.assertIn("momentum 0.9 (in the hook)", self.proc.stdout)

    def test_evaluations(self):
        s = self.summary
        self.assertEqual([e["step"] for e in s["evals"]], [6, 12, 16, 18, 24, 30, 32])
        # The epoch ends' evaluations are the epochs' own accuracies.
        ends = [e for e in s["evals"] if "epoch" in e]
        self.assertEqual([e["epoch"] for e in ends], [1, 2])
        self.assertEqual([e["step"] for e in ends], [16, 32])
        for e in s["evals"]:
            self.assertGreaterEqual(e["test_acc"], 0.0)
            self.assertLessEqual(e["test_acc"], 1.0)
        # Learning happened: better than chance (10 %) at the end.
        self.assertGreater(s["evals"][-1]["test_acc"], 0.3)

    def test_last_evaluation_is_the_final_weights_accuracy(self):
        """The example's accuracy (each rank scores its share, then an all-reduce)
        against the saved weights scored here, one image batch at a time."""
        import torch
        spec = importlib.util.spec_from_file_location("ddp_fashion_mnist", EXAMPLE)
        ex = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(EXAMPLE))
        try:
            spec.loader.exec_module(ex)
        finally:
            sys.path.pop(0)
        model = ex.Cnn()
        model.load_state_dict(torch.load(self.weights))
        model.eval()
        x, y = ex.load_split(DATA, "t10k")
        correct = 0
        with torch.no_grad():
            for lo in range(0, x.shape[0], 500):
                correct += int((model(x[lo:lo + 500]).argmax(1) == y[lo:lo + 500]).sum())
        # Batches of another size may round a logit differently: allow 2 images of 10,000.
        self.assertAlmostEqual(correct / x.shape[0], self.summary["evals"][-1]["test_acc"],
                               delta=2e-4)


@unittest.skipUnless(os.path.exists(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")),
                     "dataset-fashion-mnist is not installed")
class OneCallMaskTest(unittest.TestCase):
    """--one-call leaves SGD's velocity unmasked; --mask masks (the summary reads the
    hook state's settings)."""

    def test_mask_option(self):
        with tempfile.TemporaryDirectory() as d:
            for extra, masked in (([], False), (["--mask"], True)):
                path = os.path.join(d, "s.json")
                p = run(["--procs", "2", "--epochs", "1", "--train-limit", "256",
                         "--one-call", "--summary-json", path] + extra)
                self.assertEqual(p.returncode, 0, p.stderr[-2000:])
                with open(path) as f:
                    s = json.load(f)
                self.assertTrue(s["one_call"])
                self.assertIs(s["local_mask"], masked, extra)
                self.assertEqual("velocity masked" in s["title"], masked, s["title"])


class RefusedTest(unittest.TestCase):

    def test_needs_the_adacomp_hook(self):
        for extra in (["--local-optimizer"], ["--ramp-steps", "8"]):
            p = run(["--hook", "none"] + extra, timeout=60)
            self.assertEqual(p.returncode, 2, extra)
            self.assertIn("apply to --hook adacomp only", p.stderr)
        for extra in (["--eval-every", "-1"], ["--ramp-steps", "-1"]):
            p = run(extra, timeout=60)
            self.assertEqual(p.returncode, 2, extra)
            self.assertIn("must not be negative", p.stderr)
        # The checks the model examples share (examples/ddp_hooks.py).
        for extra, says in ((["--one-call", "--adam-step-scale", "2"], "optimizer is SGD"),
                            (["--local-clip", "1"], "with --local-optimizer"),
                            (["--local-optimizer", "--mask"], "--mask goes with --one-call"),
                            (["--one-call", "--mask", "--no-mask"], "not both")):
            p = run(extra, timeout=60)
            self.assertEqual(p.returncode, 2, extra)
            self.assertIn(says, p.stderr)


if __name__ == "__main__":
    unittest.main()
