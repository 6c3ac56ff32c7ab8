"""The adaptive bin size in the hook (AdaCompState(adapt_threshold=...)), one process:
a parameter whose averaged-gradient norm jumps is sent at the light bin size for
adapt_hold steps, exactly when an independent reading of the rule says so; every
parameter after lr_dropped(); a state_dict taken while lightened resumes bit for bit;
bad settings and a schedule-less state_dict are refused.
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_hook_schedule
"""

import copy
import math
import unittest

import torch

import adacomp.torch as adt
from ddp_test_util import OneProcessGroupTest
import test_hook_rollback as base  # its StepRollbackTest's model and buckets

ADAPT = dict(adapt_threshold=0.5, adapt_window=4, adapt_hold=3, adapt_bin_size=8)
STEPS = 16


def expected_light(norms, window, threshold, hold):
    """Independently: the steps at which a tensor with these per-step norms is light."""
    light, previous, until = set(), None, -1
    for w in range(len(norms) // window):
        mean = sum(norms[w * window:(w + 1) * window]) / window
        end = (w + 1) * window - 1
        if previous is not None and previous > 0 and abs(mean - previous) / previous >= threshold:
            until = end + 1 + hold
        previous = mean
        for s in range(end + 1, min(until, len(norms))):
            light.add(s)
    return light


class AdaptiveScheduleTest(OneProcessGroupTest):
    setUp = base.StepRollbackTest.setUp
    bucket = base.StepRollbackTest.bucket

    def make_grads(self):
        # fc1.weight's gradient triples from step 8 on; the others stay alike.
        g = torch.Generator().manual_seed(5)
        p = dict(self.model.named_parameters())
        self.grads = []
        for s in range(STEPS):
            step = {n: torch.randn(q.shape, generator=g) for n, q in p.items()}
            if s >= 8:
                step["fc1.weight"] *= 3.0
            self.grads.append(step)

    def run_steps(self, st, steps, drop_at=None):
        sizes = []
        for s in steps:
            if s == drop_at:
                st.lr_dropped()
            st.reduce_bucket(self.bucket(0, s))
            st.reduce_bucket(self.bucket(1, s, last=True))
            sizes.append({e.name: e.compressor.bin_size for e in st._by_name.values()})
        return sizes

    def test_a_jump_lightens_that_parameter_for_hold_steps(self):
        self.make_grads()
        st = adt.AdaCompState(model=self.model, **ADAPT)
        sizes = self.run_steps(st, range(STEPS))
        norms = [math.sqrt(float((self.grads[s]["fc1.weight"].double() ** 2).sum()))
                 for s in range(STEPS)]  # one process: the average is the gradient
        light = expected_light(norms, 4, 0.5, 3)
        self.assertEqual(light, {12, 13, 14})
        for s in range(STEPS):
            self.assertEqual(sizes[s]["fc1.weight"], 8 if s in light else 500, s)
            self.assertEqual(sizes[s]["conv.weight"], 50, s)  # no jump there

    def test_lr_dropped_lightens_every_parameter(self):
        self.make_grads()
        st = adt.AdaCompState(model=self.model, **ADAPT)
        sizes = self.run_steps(st, range(6), drop_at=2)
        for s in range(6):
            want = 8 if s in (2, 3, 4) else None
            for name in ("fc1.weight", "conv.weight", "fc2.weight"):
                if want:
                    self.assertEqual(sizes[s][name], want, (s, name))
                else:
                    self.assertNotEqual(sizes[s][name], 8, (s, name))

    def test_state_dict_mid_hold_resumes_bit_for_bit(self):
        self.make_grads()
        full = adt.AdaCompState(model=self.model, **ADAPT)
        sizes = self.run_steps(full, range(STEPS))
        first = adt.AdaCompState(model=self.model, **ADAPT)
        self.run_steps(first, range(13))  # inside the hold (12-14)
        resumed = adt.AdaCompState(model=self.model, **ADAPT)
        resumed.load_state_dict(copy.deepcopy(first.state_dict()))
        self.assertEqual(self.run_steps(resumed, range(13, STEPS)), sizes[13:])
        base.StepRollbackTest.assertSameState(self, resumed, full)

    def test_bad_settings_and_mismatched_state(self):
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=self.model, codec="topk", adapt_threshold=0.5)
        with self.assertRaises(ValueError):
            adt.AdaCompState(adapt_threshold=0.5)  # no model
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=self.model, adapt_threshold=0.5, adapt_window=0)
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=self.model).lr_dropped()
        plain = adt.AdaCompState(model=self.model).state_dict()
        st = adt.AdaCompState(model=self.model, **ADAPT)
        before = st.state_dict()
        with self.assertRaises(ValueError):
            st.load_state_dict(plain)
        bad = copy.deepcopy(before)
        bad["schedule"] = bad["schedule"][:-3]
        with self.assertRaises(ValueError):
            st.load_state_dict(bad)
        self.assertEqual(st.state_dict()["schedule"], before["schedule"])


class DenseStepsTest(OneProcessGroupTest):
    """dense_warmup_steps: the first steps travel as float32 frames (one process: the average is
    the gradient itself, bit for bit) and leave the residues alone; then compression
    starts; a failed dense step is not counted; a state_dict taken inside them resumes
    bit for bit."""
    setUp = base.StepRollbackTest.setUp
    bucket = base.StepRollbackTest.bucket
    make_grads = AdaptiveScheduleTest.make_grads
    assertSameState = base.StepRollbackTest.assertSameState

    def step(self, st, s, nan=False):
        """Both buckets of step s: their averaged values and the gradients sent."""
        out, sent = [], []
        for k in (0, 1):
            b = self.bucket(k, s, last=k == 1, nan=nan and k == 1)
            sent.append(b.buffer().clone())
            out.append(st.reduce_bucket(b).clone())
        return out, sent

    def residues_zero(self, st):
        return all(not r.any() for r in st.residues().values())

    def test_exact_then_compressed(self):
        self.make_grads()
        st = adt.AdaCompState(model=self.model, dense_warmup_steps=3)
        for s in range(3):
            out, sent = self.step(st, s)
            for o, g in zip(out, sent):
                self.assertTrue(torch.equal(o, g), s)
            self.assertTrue(self.residues_zero(st), s)
            # float32 frames: at least 4 bytes an element
            self.assertLessEqual(st.stats()["last_step"]["end_to_end"]["compression_rate"], 1.0)
        out, sent = self.step(st, 3)
        self.assertFalse(all(torch.equal(o, g) for o, g in zip(out, sent)))
        self.assertFalse(self.residues_zero(st))
        self.assertGreater(st.stats()["last_step"]["end_to_end"]["compression_rate"], 5.0)
        # From then on as a state that never had dense steps, one step behind.
        plain = adt.AdaCompState(model=self.model)
        self.step(plain, 3)
        self.assertEqual(st.residues().keys(), plain.residues().keys())
        for n, r in st.residues().items():
            self.assertTrue((r == plain.residues()[n]).all(), n)

    def test_a_failed_dense_step_is_not_counted(self):
        self.make_grads()
        st = adt.AdaCompState(model=self.model, dense_warmup_steps=2)
        self.step(st, 0)
        with self.assertRaises(adt.StepAborted):
            self.step(st, 1, nan=True)
        self.assertEqual(st.steps, 1)
        out, sent = self.step(st, 2)  # still a dense step
        for o, g in zip(out, sent):
            self.assertTrue(torch.equal(o, g))
        self.assertTrue(self.residues_zero(st))
        self.assertEqual(st.steps, 2)

    def test_state_dict_inside_the_dense_warmup_steps_resumes_bit_for_bit(self):
        self.make_grads()
        full = adt.AdaCompState(model=self.model, dense_warmup_steps=3)
        outs = [self.step(full, s)[0] for s in range(6)]
        first = adt.AdaCompState(model=self.model, dense_warmup_steps=3)
        for s in range(2):
            self.step(first, s)
        resumed = adt.AdaCompState(model=self.model, dense_warmup_steps=3)
        resumed.load_state_dict(copy.deepcopy(first.state_dict()))
        for s in range(2, 6):
            out, _ = self.step(resumed, s)
            for o, f in zip(out, outs[s]):
                self.assertTrue(torch.equal(o, f), s)
        self.assertSameState(resumed, full)

    def test_bad_settings(self):
        for bad in (-1, 1.5, True, "3"):
            with self.assertRaises((ValueError, TypeError), msg=repr(bad)):
                adt.AdaCompState(model=self.model, dense_warmup_steps=bad)


if __name__ == "__main__":
    unittest.main()
