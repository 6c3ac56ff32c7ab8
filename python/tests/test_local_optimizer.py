"""The hook's local optimizer (AdaCompState(local_optimizer=...), split_optimizer), one
process: against independent references, the velocity of "sgd" (with weight decay
added before it) and the zeroing of exactly the elements the frame carried; Adam's
step from float64 formulas; with the dense codec, the hook plus split_optimizer's SGD
trains as torch's SGD with momentum and torch's AdamW do; a failed step leaves the
moments as they were; a state_dict taken mid-run resumes bit for bit, and one that
does not fit is refused before anything changes; with a dense warm-up, SGD's velocity
travels whole and Adam runs on the exact average, then freezes its second moment
(1-bit Adam); split_optimizer's refusals.
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_local_optimizer
"""

import copy
import unittest
import warnings

import numpy as np
import torch

import adacomp
import adacomp.torch as adt
from ddp_test_util import OneProcessGroupTest
import test_hook_rollback as base  # its StepRollbackTest's model (Net) and buckets

STEPS = 3
NAMES = ("fc2.weight", "fc2.bias", "fc1.bias", "fc1.weight", "conv.weight", "conv.bias")


def adam_reference(grads, betas, eps, freeze_after=0):
    """Adam's step of every step and parameter in float64 ([{name: step}] per step);
    freeze_after > 0: the second moment stops changing after that many steps, and its
    bias correction stays that of its last update (1-bit Adam)."""
    m = {n: 0.0 for n in NAMES}
    v = {n: 0.0 for n in NAMES}
    out = []
    for s, step_grads in enumerate(grads):
        d = {}
        for n in NAMES:
            g = step_grads[n].reshape(-1).double()
            m[n] = betas[0] * m[n] + (1 - betas[0]) * g
            if not freeze_after or s < freeze_after:
                v[n] = betas[1] * v[n] + (1 - betas[1]) * g * g
            t_v = min(s + 1, freeze_after) if freeze_after else s + 1
            d[n] = (m[n] / (1 - betas[0] ** (s + 1))) / ((v[n] / (1 - betas[1] ** t_v)).sqrt()
                                                        + eps)
        out.append(d)
    return out


class LocalOptimizerTest(OneProcessGroupTest):
    setUp = base.StepRollbackTest.setUp
    bucket = base.StepRollbackTest.bucket

    def run_step(self, st, s, nan=False):
        """Both buckets of step s; {name: the averaged value the hook wrote}."""
        out = {}
        for k in (0, 1):
            b = self.bucket(k, s, last=k == 1, nan=nan and k == 1)
            try:
                st.reduce_bucket(b)
            except adt.StepAborted:
                if not nan:
                    raise
                return None
            for p, g in zip(b.parameters(), b.gradients()):
                out[self.names[id(p)]] = g.reshape(-1).clone()
        return out

    def moments(self, st, part="first"):
        return {n: t.clone() for n, t in st.state_dict()["local_optimizer"][part].items()}

    def test_sgd_velocity_and_masking(self):
        self.check_sgd_velocity(mask=True)

    def test_sgd_velocity_without_masking(self):
        """local_mask=False: the velocity is the plain recursion, sent or not."""
        self.check_sgd_velocity(mask=False)

    def check_sgd_velocity(self, mask):
        wd = 0.01
        p = dict(self.model.named_parameters())
        st = adt.AdaCompState(model=self.model, local_optimizer="sgd", momentum=0.9,
                              local_weight_decay=[([p["fc1.weight"]], wd)], local_mask=mask)
        ref = {n: adacomp.Compressor(p[n].numel(), bin_size=st._by_name[n].compressor.bin_size,
                                     tensor_id=st._by_name[n].tensor_id) for n in NAMES}
        u = {n: np.zeros(p[n].numel(), dtype=np.float32) for n in NAMES}
        for s in range(STEPS):
            got = self.run_step(st, s)
            for n in NAMES:
                g = self.grads[s][n].reshape(-1).numpy()
                w = p[n].detach().reshape(-1).numpy()
                step = np.empty_like(g)
                for j in range(len(g)):  # a scalar loop: u = 0.9 u + (g + wd w)
                    gj = np.float32(g[j] + np.float32(wd) * w[j]) if n == "fc1.weight" else g[j]
                    step[j] = np.float32(np.float32(0.9) * u[n][j]) + gj
                before = ref[n].residue
                frame = ref[n].compress(step)
                sent = np.zeros_like(step)
                adacomp.decompress_add(frame, sent)
                # What the frame carries is what changed the residue (the trainer's test).
                np.testing.assert_array_equal(sent != 0, ref[n].residue != before + step)
                np.testing.assert_array_equal(got[n].numpy(), sent, err_msg=f"{n} step {s}")
                # The elements the frame carries (non-zero after decoding) lose their
                # velocity, unless mask is False.
                u[n] = np.where(sent != 0, np.float32(0), step) if mask else step
                if s > 0:
                    self.assertTrue((sent != 0).any(), n)
            vel = self.moments(st)
            for n in NAMES:
                np.testing.assert_array_equal(vel[n].numpy(), u[n], err_msg=f"{n} step {s}")
        masked = st.state_dict()["local_optimizer"]["masked"]
        if mask:
            self.assertGreater(masked, 0)
        else:
            self.assertEqual(masked, 0)

    def test_adam_step_against_float64(self):
        betas, eps = (0.8, 0.9), 1e-6
        st = adt.AdaCompState(model=self.model, codec="dense", local_optimizer="adam",
                              betas=betas, eps=eps)
        for s, want in enumerate(adam_reference(self.grads, betas, eps)):
            got = self.run_step(st, s)
            for n in NAMES:
                torch.testing.assert_close(got[n].double(), want[n], rtol=2e-5, atol=1e-6)
        self.assertEqual(st.state_dict()["local_optimizer"]["steps"], STEPS)

    def train_through_hook(self, make_opt, codec="dense"):
        """Trains a copy of the model STEPS steps on the fixed gradients through the hook
        with split_optimizer, and the same with the torch optimizer itself; returns both
        models' parameters."""
        models = [copy.deepcopy(self.model) for _ in range(2)]
        local, opt = adt.split_optimizer(make_opt(models[0]))
        st = adt.AdaCompState(model=models[0], codec=codec, **local)
        ref_opt = make_opt(models[1])
        for s in range(STEPS):
            names = dict(models[0].named_parameters())
            for k, params in ((0, self.first), (1, self.second)):
                own = [names[self.names[id(q)]] for q in params]
                grads = [self.grads[s][self.names[id(q)]].clone() for q in params]
                b = base.FakeBucket(k, own, grads, k == 1)
                st.reduce_bucket(b)
                for q, g in zip(own, b.gradients()):
                    q.grad = g.clone()
            opt.step()
            for n, q in models[1].named_parameters():
                q.grad = self.grads[s][n].clone()
            ref_opt.step()
        return [dict(m.named_parameters()) for m in models]

    def test_sgd_trains_as_torch_sgd_with_momentum(self):
        def make(model):
            decay = [q for n, q in model.named_parameters() if n.endswith("weight")]
            rest = [q for n, q in model.named_parameters() if n.endswith("bias")]
            return torch.optim.SGD([{"params": decay, "weight_decay": 0.05},
                                    {"params": rest, "weight_decay": 0.0}], lr=0.1, momentum=0.9)
        ours, theirs = self.train_through_hook(make)
        for n in NAMES:
            torch.testing.assert_close(ours[n], theirs[n], rtol=1e-6, atol=1e-7, msg=n)

    def test_adam_trains_as_torch_adamw(self):
        def make(model):
            return torch.optim.AdamW(model.parameters(), lr=0.01, betas=(0.9, 0.95),
                                     weight_decay=0.1)
        ours, theirs = self.train_through_hook(make)
        for n in NAMES:
            torch.testing.assert_close(ours[n], theirs[n], rtol=1e-5, atol=1e-6, msg=n)
        # The compressed hook moves the weights too, away from their start.
        moved, _ = self.train_through_hook(make, codec="adacomp")
        self.assertFalse(torch.equal(moved["fc1.weight"], self.model.fc1.weight))

    def test_failed_step_keeps_the_moments(self):
        for kind in ("sgd", "adam"):
            st = adt.AdaCompState(model=self.model, local_optimizer=kind)
            self.run_step(st, 0)
            before = (self.moments(st), st.state_dict()["local_optimizer"]["steps"])
            self.assertIsNone(self.run_step(st, 1, nan=True))
            after = (self.moments(st), st.state_dict()["local_optimizer"]["steps"])
            self.assertEqual(before[1], after[1], kind)
            for n in NAMES:
                self.assertTrue(torch.equal(before[0][n], after[0][n]), (kind, n))
            # The next step goes on as if the failed one had never been tried.
            ref = adt.AdaCompState(model=self.model, local_optimizer=kind)
            self.run_step(ref, 0)
            a, b = self.run_step(st, 2), self.run_step(ref, 2)
            for n in NAMES:
                self.assertTrue(torch.equal(a[n], b[n]), (kind, n))

    def test_resume_mid_run_is_bit_exact(self):
        for kind in ("sgd", "adam"):
            whole = adt.AdaCompState(model=self.model, local_optimizer=kind)
            for s in range(2):
                self.run_step(whole, s)
            saved = copy.deepcopy(whole.state_dict())
            last = self.run_step(whole, 2)
            resumed = adt.AdaCompState(model=self.model, local_optimizer=kind)
            resumed.load_state_dict(saved)
            again = self.run_step(resumed, 2)
            for n in NAMES:
                self.assertTrue(torch.equal(last[n], again[n]), (kind, n))
            for part in ("first", "second"):
                a, b = self.moments(whole, part), self.moments(resumed, part)
                self.assertEqual(set(a), set(b))
                for n in a:
                    self.assertTrue(torch.equal(a[n], b[n]), (kind, part, n))

    def test_state_dict_that_does_not_fit_is_refused(self):
        st = adt.AdaCompState(model=self.model, local_optimizer="sgd")
        self.run_step(st, 0)
        good = copy.deepcopy(st.state_dict())
        plain = adt.AdaCompState(model=self.model)
        self.run_step(plain, 0)
        cases = {
            "has no local optimizer": plain.state_dict(),
            "is 'adam'": self._with(good, lambda d: d["local_optimizer"]["settings"].update(
                kind="adam")),
            "is not 72 float32": self._with(good, lambda d: d["local_optimizer"]["first"].update(
                {"conv.weight": torch.zeros(71)})),
            "does not have": self._with(good, lambda d: d["local_optimizer"]["first"].update(
                {"nope": torch.zeros(3)})),
        }
        for words, bad in cases.items():
            fresh = adt.AdaCompState(model=self.model, local_optimizer="sgd")
            self.run_step(fresh, 1)
            keep = copy.deepcopy(fresh.state_dict())
            with self.assertRaisesRegex(ValueError, words):
                fresh.load_state_dict(bad)
            now = fresh.state_dict()
            self.assertEqual(now["steps"], keep["steps"])
            for n in NAMES:  # nothing changed: residues and moments as before
                self.assertEqual(now["params"][n]["state"], keep["params"][n]["state"], n)
                self.assertTrue(torch.equal(now["local_optimizer"]["first"][n],
                                            keep["local_optimizer"]["first"][n]), n)
        with self.assertRaisesRegex(ValueError, "has a local optimizer, this state has none"):
            adt.AdaCompState(model=self.model).load_state_dict(good)

    def test_dense_warmup_sends_the_whole_velocity(self):
        """With dense_warmup_steps, "sgd" sends its velocity whole: the velocity of the
        first steps is the plain recursion (nothing masked) and no residue is touched;
        compression and masking start after them."""
        warm = 2
        st = adt.AdaCompState(model=self.model, local_optimizer="sgd", momentum=0.9,
                              dense_warmup_steps=warm)
        u = {n: np.zeros(self.grads[0][n].numel(), dtype=np.float32) for n in NAMES}
        for s in range(warm):
            got = self.run_step(st, s)
            for n in NAMES:
                g = self.grads[s][n].reshape(-1).numpy()
                u[n] = np.float32(0.9) * u[n] + g  # float32 all through, as the kernel
                np.testing.assert_array_equal(got[n].numpy(), u[n], err_msg=f"{n} step {s}")
                np.testing.assert_array_equal(self.moments(st)[n].numpy(), u[n])
            self.assertTrue(all(not r.any() for r in st.residues().values()), s)
        self.assertEqual(st.state_dict()["local_optimizer"]["masked"], 0)
        got = self.run_step(st, warm)  # compressed: the frames carry part of each step
        self.assertTrue(any(r.any() for r in st.residues().values()))
        self.assertGreater(st.state_dict()["local_optimizer"]["masked"], 0)
        vel = self.moments(st)
        for n in NAMES:
            g = self.grads[warm][n].reshape(-1).numpy()
            step = np.float32(0.9) * u[n] + g
            carried = got[n].numpy() != 0
            np.testing.assert_array_equal(vel[n].numpy(), np.where(carried, 0, step), n)

    def test_adam_after_a_dense_warmup_freezes_its_second_moment(self):
        """1-bit Adam: Adam on the exact average through the warm-up, then this rank's
        first moment over the warm-up's second moment, which no longer changes (float64
        reference; the dense codec, so the step itself comes back)."""
        warm, betas, eps = 1, (0.8, 0.9), 1e-6  # then STEPS - 1 frozen steps
        st = adt.AdaCompState(model=self.model, codec="dense", local_optimizer="adam",
                              betas=betas, eps=eps, dense_warmup_steps=warm)
        for s, want in enumerate(adam_reference(self.grads, betas, eps, freeze_after=warm)):
            got = self.run_step(st, s)
            for n in NAMES:
                torch.testing.assert_close(got[n].double(), want[n], rtol=2e-5, atol=1e-6,
                                           msg=f"{n} step {s}")
            if s == warm - 1:
                frozen = self.moments(st, "second")
        for n, t in self.moments(st, "second").items():
            self.assertTrue(torch.equal(t, frozen[n]), n)
        self.assertEqual(st.state_dict()["local_optimizer"]["settings"]
                         ["second_moment_frozen_after"], warm)

    def test_frozen_second_moment_resumes_and_refuses_a_mismatch(self):
        def make(warm):
            return adt.AdaCompState(model=self.model, local_optimizer="adam",
                                    dense_warmup_steps=warm)
        whole = make(2)
        for s in range(2):
            self.run_step(whole, s)
        saved = copy.deepcopy(whole.state_dict())
        last = self.run_step(whole, 2)  # the first compressed, frozen step
        resumed = make(2)
        resumed.load_state_dict(saved)
        again = self.run_step(resumed, 2)
        for n in NAMES:
            self.assertTrue(torch.equal(last[n], again[n]), n)
        for bad in (0, 3):
            with self.assertRaisesRegex(ValueError, "freezes its second moment"):
                make(bad).load_state_dict(saved)

    def test_local_clip_norm(self):
        """Each rank's gradient in a bucket is scaled to at most local_clip_norm before
        the moments (torch's clip_grad_norm_ factor); below it nothing changes."""
        def run(st, s, factor_of=None):
            out = {}
            for k in (0, 1):
                b = self.bucket(k, s, last=k == 1)
                if factor_of is not None:  # the reference: clip the bucket by hand
                    buf = b.buffer()
                    norm = float(np.linalg.norm(buf.numpy().astype(np.float64)))
                    buf.mul_(min(1.0, factor_of / (norm + 1e-6)))
                st.reduce_bucket(b)
                for p, g in zip(b.parameters(), b.gradients()):
                    out[self.names[id(p)]] = g.reshape(-1).clone()
            return out
        for kind in ("sgd", "adam"):
            clipped = adt.AdaCompState(model=self.model, codec="dense", local_optimizer=kind,
                                       local_clip_norm=0.05)
            ref = adt.AdaCompState(model=self.model, codec="dense", local_optimizer=kind)
            loose = adt.AdaCompState(model=self.model, codec="dense", local_optimizer=kind,
                                     local_clip_norm=1e6)
            plain = adt.AdaCompState(model=self.model, codec="dense", local_optimizer=kind)
            for s in range(STEPS):
                # Two buckets, each clipped on its own: said once per state, at bucket 1.
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    a, b = run(clipped, s), run(ref, s, factor_of=0.05)
                    c, d = run(loose, s), run(plain, s)
                self.assertEqual(len(said), 2 if s == 0 else 0, [str(w.message) for w in said])
                for w in said:
                    self.assertIs(w.category, RuntimeWarning)
                    self.assertIn("clips each DDP bucket's gradient on its own", str(w.message))
                for n in NAMES:
                    torch.testing.assert_close(a[n], b[n], rtol=1e-5, atol=1e-7,
                                               msg=f"{kind} {n} step {s}")
                    self.assertTrue(torch.equal(c[n], d[n]), (kind, n, s))
            self.assertFalse(all(torch.equal(a[n], c[n]) for n in NAMES), kind)  # it clipped
        for bad in (-1.0, float("nan"), float("inf"), True, "1"):
            with self.assertRaises(ValueError, msg=repr(bad)):
                adt.AdaCompState(model=self.model, local_optimizer="sgd", local_clip_norm=bad)
        with self.assertRaisesRegex(ValueError, "goes with local_optimizer"):
            adt.AdaCompState(model=self.model, local_clip_norm=1.0)

    @staticmethod
    def _with(state, change):
        d = copy.deepcopy(state)
        change(d)
        return d


class SplitOptimizerTest(unittest.TestCase):
    def setUp(self):
        self.model = base.Net()
        self.w = [p for n, p in self.model.named_parameters() if n.endswith("weight")]
        self.b = [p for n, p in self.model.named_parameters() if n.endswith("bias")]

    def test_sgd(self):
        opt = torch.optim.SGD([{"params": self.w, "weight_decay": 1e-4},
                               {"params": self.b, "weight_decay": 0.0, "lr": 0.5}],
                              lr=0.1, momentum=0.8)
        local, plain = adt.split_optimizer(opt)
        self.assertEqual(local["local_optimizer"], "sgd")
        self.assertEqual(local["momentum"], 0.8)
        self.assertEqual(local["local_weight_decay"], [(self.w, 1e-4)])
        self.assertIs(local["nesterov"], False)
        self.assertIsInstance(plain, torch.optim.SGD)
        self.assertEqual([(g["lr"], g["momentum"], g["weight_decay"]) for g in plain.param_groups],
                         [(0.1, 0.0, 0.0), (0.5, 0.0, 0.0)])

    def test_adamw(self):
        opt = torch.optim.AdamW([{"params": self.w, "weight_decay": 0.1},
                                 {"params": self.b, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.95), eps=1e-7)
        local, plain = adt.split_optimizer(opt)
        self.assertEqual(local, {"local_optimizer": "adam", "betas": (0.9, 0.95), "eps": 1e-7})
        self.assertEqual([(g["lr"], g["momentum"], g["weight_decay"]) for g in plain.param_groups],
                         [(1e-3, 0.0, 0.1), (1e-3, 0.0, 0.0)])

    def test_adam_with_an_l2_term(self):
        opt = torch.optim.Adam([{"params": self.w, "weight_decay": 0.1},
                                {"params": self.b, "weight_decay": 0.0}], lr=1e-3)
        local, plain = adt.split_optimizer(opt)
        self.assertEqual(local["local_weight_decay"], [(self.w, 0.1)])
        self.assertEqual([g["weight_decay"] for g in plain.param_groups], [0.0, 0.0])

    def test_sgd_nesterov(self):
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        local, plain = adt.split_optimizer(opt)
        self.assertIs(local["nesterov"], True)
        self.assertFalse(plain.param_groups[0]["nesterov"])
        state = adt.AdaCompState(model=self.model, **local)
        self.assertEqual(state.state_dict()["local_optimizer"]["settings"]["nesterov"], True)
        with self.assertRaisesRegex(ValueError, "nesterov goes with local_optimizer 'sgd'"):
            adt.AdaCompState(model=self.model, local_optimizer="adam", nesterov=True)
        with self.assertRaisesRegex(ValueError, "nesterov goes with local_optimizer 'sgd'"):
            adt.AdaCompState(model=self.model, nesterov=True)

    def test_refusals(self):
        p = list(self.model.parameters())
        cases = {
            "dampening": torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
            "without momentum": torch.optim.SGD(p, lr=0.1),
            "same momentum": torch.optim.SGD([{"params": self.w, "momentum": 0.5},
                                              {"params": self.b}], lr=0.1, momentum=0.9),
            "amsgrad": torch.optim.AdamW(p, lr=0.1, amsgrad=True),
            "RMSprop has no local form": torch.optim.RMSprop(p, lr=0.1),
        }
        for words, opt in cases.items():
            with self.assertRaisesRegex(ValueError, words):
                adt.split_optimizer(opt)

    def test_bad_settings(self):
        for kwargs, words in (({"local_optimizer": "lion"}, "'sgd' or 'adam'"),
                              ({"local_optimizer": "sgd", "momentum": 1.0}, r"\[0, 1\)"),
                              ({"local_optimizer": "adam", "betas": (0.9, 1.5)}, "betas"),
                              ({"local_optimizer": "adam", "nesterov": True}, "goes with")):
            with self.assertRaisesRegex(ValueError, words):
                adt.AdaCompState(model=self.model, **kwargs)
        with self.assertRaisesRegex(ValueError, "needs model="):
            adt.AdaCompState(local_optimizer="sgd")

    def test_library_optimizer_binding(self):
        """The library's optimizer as the hook calls it (the arithmetic is tested in
        C++, src/compress/local_optimizer_test.cc): the step is a view that the mask
        zeroes where the frame carries a value; refusals name what is wrong and change
        nothing."""
        rng = np.random.default_rng(3)
        g = rng.standard_normal(1001).astype(np.float32)
        opt = adt._adacomp._LocalOptimizer("sgd", momentum=0.9)
        k = opt.add_tensor(1001)
        step = opt.prepare(k, g)
        np.testing.assert_array_equal(step, g)  # the first step is the gradient itself
        c = adacomp.Compressor(1001, bin_size=50)
        frame = c.compress(step)
        sent = np.zeros_like(g)
        adacomp.decompress_add(frame, sent)
        opt.mask_sent(k, frame)
        np.testing.assert_array_equal(step, np.where(sent != 0, np.float32(0), g))
        opt.commit()
        self.assertEqual(opt.masked, int((sent != 0).sum()))
        self.assertEqual(opt.counts(k), (1, 1))
        for call, words in ((lambda: opt.prepare(k, g[:5]), "1001 elements, its gradient 5"),
                            (lambda: opt.prepare(k, g.astype(np.float64)), "float32"),
                            (lambda: opt.prepare(k, g, None, 0.1), "weight decay needs"),
                            (lambda: opt.mask_sent(k, frame), "no step in progress"),
                            (lambda: opt.set_moments(k, g, None, 1, 2), "counts"),
                            (lambda: adt._adacomp._LocalOptimizer("lion"), "'sgd' or 'adam'"),
                            (lambda: adt._adacomp._LocalOptimizer("adam", beta2=1.0), "betas")):
            with self.assertRaisesRegex(ValueError, words):
                call()
        with self.assertRaises(IndexError):
            opt.prepare(1, g)
        np.testing.assert_array_equal(opt.first(k), np.where(sent != 0, np.float32(0), g))
        self.assertEqual(opt.steps, 1)


if __name__ == "__main__":
    unittest.main()
