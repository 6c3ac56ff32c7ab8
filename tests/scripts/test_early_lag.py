"""scripts/early_lag.py on hand-made summaries of examples/ddp_fashion_mnist.py
(--model ddp-example): from_example gives the report the trainer's fields (the
evaluations, steps per epoch, the frames of every rank), and the steps to a target
and the epoch ends are read from them."""

import unittest

import early_lag as el


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
        self.assertTrue(el.doc_path("mnist-cnn").endswith("docs/early-lag.md"))
        self.assertTrue(el.doc_path("ddp-example").endswith("docs/early-lag-ddp-example.md"))


if __name__ == "__main__":
    unittest.main()
