"""local_step_scale="measured" (step_scale.py): the scale of each rank's Adam step
measured from how much the ranks' gradients differ.

scale_from against a scalar loop written here; on 2 Gloo processes through
DistributedOptimizer: identical gradients on both ranks give exactly 1, independent
zero-mean gradients give close to sqrt(2), the library's optimizer takes the scale
each step, replicas stay identical, a failed step changes nothing, and a resume from
a checkpoint equals the uninterrupted run bit for bit; checkpoints that do not fit
are refused."""

import copy
import functools
import math
import unittest

import numpy as np
import torch
from torch import nn

import adacomp.torch as adt
from adacomp.torch.step_scale import PER_TENSOR, ScaleMeter, scale_from
from ddp_test_util import gloo_rank, spawn_world


class ScaleFromTest(unittest.TestCase):
    def reference(self, num, den, w, world):
        """The weighted geometric mean of clamp(sqrt(den / num), 1, sqrt(world)), element
        by element, over the elements where both are > 0."""
        top, logs, weights = math.sqrt(world), 0.0, 0.0
        for a, b, c in zip(num, den, w):
            if a > 0 and b > 0:
                f = min(max(math.sqrt(b / a), 1.0), top)
                logs += c * math.log(f)
                weights += c
        return math.exp(logs / weights) if weights else 1.0

    def test_against_a_loop(self):
        rng = np.random.default_rng(1)
        for world in (2, 4, 8):
            for _ in range(20):
                n = int(rng.integers(1, 60))
                num = rng.exponential(size=n) * (rng.random(n) > 0.2)
                den = num * rng.uniform(0.5, 2 * world, size=n) * (rng.random(n) > 0.1)
                w = rng.uniform(1, 100, size=n)
                self.assertAlmostEqual(scale_from(num, den, w, world),
                                       self.reference(num, den, w, world), places=12)
        self.assertEqual(scale_from(np.zeros(3), np.ones(3), np.ones(3), 4), 1.0)
        self.assertEqual(scale_from(np.ones(2), np.full(2, 100.0), np.ones(2), 4), 2.0)

    def test_samples_fit_each_tensor(self):
        meter = ScaleMeter()
        meter.build([("a", 3), ("b", 0), ("c", 1000)], 2)
        self.assertEqual(meter.size, 3 + PER_TENSOR)
        off, pos, w = meter._slots["c"]
        self.assertEqual((off, pos.size, w), (3, PER_TENSOR, 1000 / PER_TENSOR))
        self.assertEqual(len(set(pos.tolist())), PER_TENSOR)
        self.assertTrue(0 <= pos.min() and pos.max() < 1000)
        again = ScaleMeter()
        again.build([("a", 3), ("b", 0), ("c", 1000)], 2)
        np.testing.assert_array_equal(again._slots["c"][1], pos)  # every rank alike
        self.assertNotIn("b", meter._slots)


STEPS = 40


def batch(step, rank, same):
    """(x, t) of a step: the same on both ranks, or each rank's own."""
    g = torch.Generator().manual_seed(1000 * step + (0 if same else 1 + rank))
    return torch.randn(16, 12, generator=g), torch.randn(16, 6, generator=g)


def make(kind, **settings):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 6))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = adt.DistributedOptimizer(ddp, kind(model.parameters(), lr=1e-3),
                                   local_step_scale="measured", **settings)
    return model, ddp, opt


def run(ddp, opt, steps, rank, same, nan_at=(), out=None):
    """The script's loop, with README's skip of a failed step; out["scales"] gets the
    library optimizer's scale after each step."""
    state = opt.hook
    for step in steps:
        x, t = batch(step, rank, same)
        opt.zero_grad()
        # (output * t).mean(): a gradient of zero mean over the data, so that the ranks'
        # own batches give independent gradients
        loss = (ddp(x) * t).mean()
        if step in nan_at and rank == 0:
            loss = loss * float("nan")
        try:
            loss.backward()
        except RuntimeError:
            if state.step_error is None:
                raise
            if out is not None:
                out.setdefault("failed", []).append((step, str(state.step_error)))
            continue
        opt.step()
        if out is not None:
            out.setdefault("scales", []).append(state._local.opt.step_scale)


def worker(rank, port, outdir, same, kind, settings=None):
    with gloo_rank(rank, port, 2, outdir) as result:
        model, ddp, opt = make(kind, **(settings or {}))
        meter = opt.hook._local.meter
        result["first_scale"] = opt.hook._local.opt.step_scale
        run(ddp, opt, range(STEPS), rank, same, out=result)
        result["meter_scale"] = meter.scale
        result["measured"] = meter.measured
        result["stats"] = opt.hook.stats()["local_step_scale"]
        result["weights"] = [p.detach().clone() for p in model.parameters()]
        opt.hook.close()


def resume_worker(rank, port, outdir):
    """A failed step, then a checkpoint at step 10 (gathered, as rank 0 would save it),
    the run going on to 20; a new model and optimizer loading the checkpoint go on over
    the same steps."""
    with gloo_rank(rank, port, 2, outdir) as result:
        model, ddp, opt = make(torch.optim.AdamW)
        meter = opt.hook._local.meter
        run(ddp, opt, range(4), rank, False)
        before = (meter.num.copy(), meter.den.copy(), meter.measured, meter.scale)
        run(ddp, opt, [4], rank, False, nan_at=(4,), out=result)
        after = (meter.num, meter.den, meter.measured, meter.scale)
        result["failed_step_unchanged"] = (
            np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
            and before[2:] == after[2:])
        run(ddp, opt, range(5, 10), rank, False)
        saved = copy.deepcopy(opt.gathered_state_dict(dst=0))
        saved = [saved]
        torch.distributed.broadcast_object_list(saved, src=0)
        weights = copy.deepcopy(model.state_dict())
        run(ddp, opt, range(10, 20), rank, False)
        result["straight"] = [p.detach().clone() for p in model.parameters()]
        result["straight_scale"] = meter.scale
        opt.hook.close()

        model2, ddp2, opt2 = make(torch.optim.AdamW)
        model2.load_state_dict(weights)
        opt2.load_state_dict(saved[0])
        result["loaded_scale"] = opt2.hook._local.opt.step_scale
        run(ddp2, opt2, range(10, 20), rank, False)
        result["resumed"] = [p.detach().clone() for p in model2.parameters()]
        result["resumed_scale"] = opt2.hook._local.meter.scale
        opt2.hook.close()


class MeasuredScaleTest(unittest.TestCase):
    def check_replicas(self, results, key="weights"):
        for a, b in zip(results[0][key], results[1][key]):
            np.testing.assert_array_equal(a.numpy(), b.numpy())

    def test_identical_gradients_give_one(self):
        results = spawn_world(functools.partial(worker, same=True, kind=torch.optim.Adam), 2)
        for res in results:
            self.assertEqual(res["first_scale"], 1.0)
            self.assertEqual(res["measured"], STEPS)
            self.assertEqual(res["scales"], [1.0] * STEPS)
        self.check_replicas(results)

    def test_independent_gradients_give_about_sqrt_world(self):
        results = spawn_world(functools.partial(worker, same=False, kind=torch.optim.AdamW),
                              2)
        self.check_sqrt_world(results)

    def test_adams_l2_term_is_measured_with_the_gradient(self):
        """torch's Adam(weight_decay) adds wd x w to the gradient before the moments, the
        same on every rank: with it much larger than the ranks' independent gradients
        the moments agree, and the scale stays close to 1 (the gradients alone would
        give about sqrt(2))."""
        adam = functools.partial(torch.optim.Adam, weight_decay=10.0)
        results = spawn_world(functools.partial(worker, same=False, kind=adam), 2)
        for res in results:
            self.assertLess(res["scales"][-1], 1.1)
            self.assertGreaterEqual(min(res["scales"]), 1.0)
        self.check_replicas(results)

    def test_every_exchange_measures_alike(self):
        """The scale does not depend on how the buckets travel: the reduce-scatter
        exchange, and the exchange without overlap, measure the same scales as the
        default all-gather (the samples are the same gradients)."""
        runs = [spawn_world(functools.partial(worker, same=False, kind=torch.optim.AdamW,
                                              settings=s), 2)
                for s in ({}, {"exchange": "reduce-scatter"}, {"overlap": False})]
        for results in runs[1:]:
            self.check_sqrt_world(results)
            self.assertEqual(results[0]["scales"], runs[0][0]["scales"])

    def check_sqrt_world(self, results):
        for res in results:
            scales = res["scales"]
            self.assertEqual(res["measured"], STEPS)
            self.assertEqual(res["stats"], {"scale": res["meter_scale"], "measured": STEPS})
            # what the library's optimizer was given after each step is the meter's
            self.assertEqual(scales[-1], res["meter_scale"])
            self.assertGreater(scales[-1], 1.3)
            self.assertLessEqual(scales[-1], math.sqrt(2))
            self.assertGreater(len(set(scales)), 10)  # measured anew at each step
        self.assertEqual(results[0]["scales"], results[1]["scales"])
        self.check_replicas(results)

    def test_failed_step_and_resume(self):
        results = spawn_world(resume_worker, 2)
        for res, cause in zip(results, ("non-finite gradient", "rank(s) [0] failed")):
            (step, why), = res["failed"]
            self.assertEqual(step, 4)
            self.assertIn(cause, why)  # the cause, not the scale's messages
            self.assertTrue(res["failed_step_unchanged"])
            self.assertNotEqual(res["loaded_scale"], 1.0)
            self.assertEqual(res["resumed_scale"], res["straight_scale"])
            for a, b in zip(res["straight"], res["resumed"]):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        self.check_replicas(results, "straight")

    def test_checkpoints_that_do_not_fit_are_refused(self):
        from adacomp.torch.local_optimizer import _LocalOptimizer
        from adacomp.torch.settings import LocalSettings
        measured = _LocalOptimizer(LocalSettings(kind="adam", step_scale="measured"))
        measured.meter.build([("w", 40)], 2)
        fixed = _LocalOptimizer(LocalSettings(kind="adam", step_scale=2.0))
        with self.assertRaisesRegex(ValueError, "does not measure its step scale"):
            measured.check(fixed.save(), {"w": 40})
        with self.assertRaisesRegex(ValueError, "measures its step scale"):
            fixed.check(measured.save(), {"w": 40})
        saved = measured.save()
        saved["measured_step_scale"]["num"] = torch.zeros(3, dtype=torch.float64)
        with self.assertRaisesRegex(ValueError, "num is not 16 float64 values"):
            measured.check(saved, {"w": 40})
        other = _LocalOptimizer(LocalSettings(kind="adam", step_scale="measured"))
        other.meter.build([("w", 8)], 2)
        with self.assertRaisesRegex(ValueError, "samples 8 elements, this state 16"):
            measured.check(other.save(), {"w": 40})
        from adacomp.torch.settings import Settings
        with self.assertRaisesRegex(ValueError, "goes with local_optimizer 'adam'"):
            Settings.of(local_optimizer="sgd", local_step_scale="measured")
        with self.assertRaisesRegex(ValueError, "1-bit Adam"):
            Settings.of(local_optimizer="adam", local_step_scale="measured",
                        dense_warmup_steps=5)
        with self.assertRaisesRegex(ValueError, "or 'measured'"):
            Settings.of(local_optimizer="adam", local_step_scale="measure")


if __name__ == "__main__":
    unittest.main()
