"""The hook's state on one process, without DDP: Compressor.snapshot()/restore()
for every codec (SnapshotTest); the rollbacks of buckets handed to reduce_bucket
directly and abort_step() (StepRollbackTest); the bin-size ramp (RampTest); the
state's settings and state_dict checks (StateTest).
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_hook_rollback
"""

import copy
import unittest

import numpy as np
import torch
from torch import nn

import adacomp
import adacomp.torch as adt
from ddp_test_util import FakeBucket, OneProcessGroupTest
from test_ddp_hook import Net


class SnapshotTest(unittest.TestCase):
    """Compressor.snapshot() / restore() for every codec, fast and two-pass AdaComp paths."""

    def test_restore_undoes_compressions(self):
        rng = np.random.default_rng(5)
        for codec in adacomp.CODECS:
            for big in (False, True):
                c = adacomp.Compressor(700, codec=codec, bin_size=50, seed=9)
                for _ in range(3):
                    c.compress(rng.standard_normal(700).astype(np.float32))
                before, stats = c.state_dict()["state"], c.last_stats
                c.snapshot()
                self.assertTrue(c.has_snapshot)
                g = rng.standard_normal(700).astype(np.float32) * (1e37 if big else 1)
                first = c.compress(g)
                c.compress(rng.standard_normal(700).astype(np.float32))
                self.assertNotEqual(c.state_dict()["state"], before, codec)
                self.assertTrue(c.restore())
                self.assertFalse(c.has_snapshot)
                self.assertEqual(c.state_dict()["state"], before, f"{codec} big={big}")
                self.assertEqual(c.last_stats, stats, codec)
                self.assertEqual(c.compress(g), first, codec)  # same frame as before the undo
                with self.assertRaises(RuntimeError):
                    c.restore()  # no snapshot any more
                c.snapshot()
                self.assertFalse(c.restore())  # nothing compressed since: nothing to do
                c.snapshot()
                c.load_state_dict({"state": before})
                self.assertFalse(c.has_snapshot)  # a load supersedes the snapshot


class StepRollbackTest(OneProcessGroupTest):
    """reduce_bucket called directly in a one-process group: rollbacks without DDP."""

    def setUp(self):
        torch.manual_seed(3)
        self.model = Net()
        p = dict(self.model.named_parameters())
        self.first = [p["fc2.weight"], p["fc2.bias"], p["fc1.bias"]]
        self.second = [p["fc1.weight"], p["conv.weight"], p["conv.bias"]]
        g = torch.Generator().manual_seed(7)
        self.grads = [{n: torch.randn(q.shape, generator=g) for n, q in p.items()}
                      for _ in range(3)]
        names = {id(q): n for n, q in p.items()}
        self.names = names

    def bucket(self, k, step, last=False, nan=False):
        params = self.first if k == 0 else self.second
        grads = [self.grads[step][self.names[id(q)]].clone() for q in params]
        if nan:
            grads[-1].view(-1)[3] = float("inf")
        return FakeBucket(k, params, grads, last)

    def reference(self, steps):
        st = adt.AdaCompState(model=self.model)
        for s in steps:
            st.reduce_bucket(self.bucket(0, s))
            st.reduce_bucket(self.bucket(1, s, last=True))
        return st

    def assertSameState(self, a, b):
        sa, sb = a.state_dict(), b.state_dict()
        for n in sb["params"]:
            self.assertEqual(sa["params"][n]["state"], sb["params"][n]["state"], n)
        for k in ("steps", "buckets", "transport_bytes", "totals"):
            self.assertEqual(sa[k], sb[k], k)

    def test_failure_in_last_bucket_rolls_back_the_first(self):
        st = adt.AdaCompState(model=self.model)
        st.reduce_bucket(self.bucket(0, 0))
        st.reduce_bucket(self.bucket(1, 0, last=True))
        st.reduce_bucket(self.bucket(0, 1))
        with self.assertRaises(adt.StepAborted) as cm:
            st.reduce_bucket(self.bucket(1, 1, last=True, nan=True))
        self.assertIn("conv.bias", str(cm.exception))
        self.assertIs(st.step_error, cm.exception)
        self.assertEqual(st.aborted_steps, 1)
        self.assertSameState(st, self.reference([0]))
        st.reduce_bucket(self.bucket(0, 2))
        self.assertIsNone(st.step_error)  # a new step began
        st.reduce_bucket(self.bucket(1, 2, last=True))
        self.assertSameState(st, self.reference([0, 2]))

    def test_rest_of_a_failed_step_is_failed_without_work(self):
        st2 = adt.AdaCompState(model=self.model)
        bad = self.bucket(0, 0, nan=True)
        with self.assertRaises(adt.StepAborted):
            st2.reduce_bucket(bad)
        with self.assertRaises(adt.StepAborted) as cm:  # same step, later bucket: no compression
            st2.reduce_bucket(self.bucket(1, 0, last=True))
        self.assertIn("skipped", str(cm.exception))
        for r in st2.residues().values():
            self.assertFalse(r.any())
        st2.reduce_bucket(self.bucket(0, 1))
        st2.reduce_bucket(self.bucket(1, 1, last=True))
        self.assertSameState(st2, self.reference([1]))

    def test_abort_step_and_parameter_seen_twice(self):
        st = adt.AdaCompState(model=self.model)
        self.assertFalse(st.abort_step())
        st.reduce_bucket(self.bucket(0, 0))
        self.assertTrue(st.abort_step())
        self.assertSameState(st, self.reference([]))
        st.reduce_bucket(self.bucket(0, 1))  # its step never ends ...
        st.reduce_bucket(self.bucket(0, 2))  # ... a parameter seen again: rolled back first
        st.reduce_bucket(self.bucket(1, 2, last=True))
        self.assertEqual(st.aborted_steps, 2)
        self.assertSameState(st, self.reference([2]))


class RampTest(OneProcessGroupTest):
    """The bin-size ramp in the hook: the sizes per step are adacomp/schedule.h's, the
    frames change with them, and a state_dict taken mid-ramp resumes bit for bit."""

    RAMP = dict(ramp_steps=4, ramp_start=4, ramp_stages=2)
    setUp = StepRollbackTest.setUp
    bucket = StepRollbackTest.bucket
    assertSameState = StepRollbackTest.assertSameState

    def grads_for(self, steps):
        g = torch.Generator().manual_seed(11)
        p = dict(self.model.named_parameters())
        self.grads = [{n: torch.randn(q.shape, generator=g) for n, q in p.items()}
                      for _ in range(steps)]

    def run_steps(self, st, steps):
        sizes = []
        for s in steps:
            st.reduce_bucket(self.bucket(0, s))
            st.reduce_bucket(self.bucket(1, s, last=True))
            sizes.append({e.name: e.compressor.bin_size for e in st._by_name.values()})
        return sizes

    def test_sizes_follow_the_ramp_and_resume_mid_ramp(self):
        self.grads_for(7)
        st = adt.AdaCompState(model=self.model, **self.RAMP)
        sizes = self.run_steps(st, range(7))
        # fc weights (500): 4 in steps 0-1, round(4 x 125^0.5) = 45 in 2-3, then 500;
        # the conv weight (50): 4, then round(4 x 12.5^0.5) = 14, then 50.
        want_fc = [4, 4, 45, 45, 500, 500, 500]
        want_conv = [4, 4, 14, 14, 50, 50, 50]
        self.assertEqual([z["fc1.weight"] for z in sizes], want_fc)
        self.assertEqual([z["conv.weight"] for z in sizes], want_conv)
        for step in range(7):
            self.assertEqual(adacomp._adacomp.ramp_bin_size(500, step, 4, 4, 2), want_fc[step])
        # The ramp changes what is sent; without it the state differs.
        fixed = self.run_steps(adt.AdaCompState(model=self.model), range(7))
        self.assertEqual(fixed[0]["fc1.weight"], 500)
        plain = adt.AdaCompState(model=self.model)
        self.run_steps(plain, range(7))
        self.assertNotEqual(plain.state_dict()["params"]["fc1.weight"]["state"],
                            st.state_dict()["params"]["fc1.weight"]["state"])
        # Stopped after step 2 (inside the ramp), resumed into a new state.
        first = adt.AdaCompState(model=self.model, **self.RAMP)
        self.run_steps(first, range(3))
        resumed = adt.AdaCompState(model=self.model, **self.RAMP)
        resumed.load_state_dict(copy.deepcopy(first.state_dict()))
        self.assertEqual(self.run_steps(resumed, range(3, 7)), sizes[3:])
        self.assertSameState(resumed, st)

    def test_bad_ramp_settings(self):
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=self.model, ramp_steps=4, ramp_start=0)
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=self.model, ramp_steps=2, ramp_stages=3)
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=self.model, codec="topk", ramp_steps=4)


class StateTest(unittest.TestCase):
    """AdaCompState without a process group: typing, bin sizes, checkpoint checks."""

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.conv = nn.Conv1d(4, 6, 3)
            self.bn = nn.BatchNorm1d(6)
            self.lstm = nn.LSTM(6, 5, num_layers=2)
            self.head = nn.Linear(5, 3)
            self.frozen = nn.Linear(3, 3)
            self.frozen.weight.requires_grad_(False)

    def test_layer_types(self):
        types = adt.layer_types_of(self.Mixed())
        self.assertEqual(types["conv.weight"], "conv")
        self.assertEqual(types["conv.bias"], "other")
        self.assertEqual(types["bn.weight"], "norm")
        self.assertEqual(types["bn.bias"], "norm")
        self.assertEqual(types["emb.weight"], "embedding")
        for n in ("weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"):
            self.assertEqual(types[f"lstm.{n}"], "lstm")
        self.assertEqual(types["lstm.bias_ih_l0"], "other")
        self.assertEqual(types["head.weight"], "fc")

    def test_bin_sizes_and_dense_types(self):
        model = self.Mixed()
        st = adt.AdaCompState(model=model, dense_types=("other",), bin_sizes={"lstm": 250})
        names = st.parameter_names()
        self.assertNotIn("frozen.weight", names)  # no gradient, no compressor
        self.assertIn("frozen.bias", names)
        comp = {n: st._by_name[n].compressor for n in names}
        self.assertEqual(comp["conv.weight"].bin_size, 50)
        self.assertEqual(comp["head.weight"].bin_size, 500)
        self.assertEqual(comp["lstm.weight_hh_l1"].bin_size, 250)
        self.assertEqual(comp["conv.bias"].codec, "dense")
        self.assertEqual(comp["head.weight"].codec, "adacomp")
        self.assertEqual(sorted({c.tensor_id for c in comp.values()}), list(range(len(names))))
        st2 = adt.AdaCompState(model=model, bin_size=64)
        self.assertEqual({c.compressor.bin_size for c in st2._by_name.values()}, {64})
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=model, bin_sizes={"transformer": 10})
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=model, codec="zip")
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=model, layer_types={"nope.weight": "fc"})

    def test_state_dict_checks_before_changing_anything(self):
        model = self.Mixed()
        st = adt.AdaCompState(model=model)
        rng = np.random.default_rng(0)
        for e in st._by_name.values():
            e.compressor.compress(rng.standard_normal(e.numel).astype(np.float32))
        sd = st.state_dict()
        fresh = adt.AdaCompState(model=model)
        fresh.load_state_dict(sd)
        for n, r in st.residues().items():
            np.testing.assert_array_equal(fresh.residues()[n], r, err_msg=n)
        # An unknown parameter, a wrong size, or corrupt bytes: refused, nothing changed.
        other = adt.AdaCompState(model=model)
        bad = copy.deepcopy(sd)
        bad["params"]["ghost.weight"] = bad["params"]["head.weight"]
        with self.assertRaises(ValueError):
            other.load_state_dict(bad)
        bad = copy.deepcopy(sd)
        bad["params"]["head.weight"]["elements"] += 1
        with self.assertRaises(ValueError):
            other.load_state_dict(bad)
        bad = copy.deepcopy(sd)
        bad["params"]["head.weight"]["state"] = bad["params"]["head.weight"]["state"][:-4]
        with self.assertRaises(ValueError):
            other.load_state_dict(bad)
        for r in other.residues().values():
            self.assertFalse(r.any())
        self.assertEqual(other.stats()["steps"], 0)


if __name__ == "__main__":
    unittest.main()
