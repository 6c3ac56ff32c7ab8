"""adacomp.torch.DistributedOptimizer on one process (a Gloo group of 1): which
optimizers run on each rank and why the others do not, the learning rate read
from the shared parameter groups at each step, schedulers made before and after
the call, clip_grad_norm_ taken over (nothing clipped in .grad, each rank's
gradient clipped from the next step on, against a hand-computed clip) and the
clip that bypasses it refused, and state_dict() round trips and refusals; and on
two processes, local Adam's step scaled by a fixed sqrt(world size) against each
rank's first Adam step written here (and not with local_step_scale=1 nor at the
measured scale's first step, nor the decay)."""

import copy
import functools
import math
import unittest
import warnings

import numpy as np
import torch
from torch import nn

import adacomp.torch as adt
from ddp_test_util import OneProcessGroupTest, gloo_rank, spawn_world


def model_and_ddp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
    return model, nn.parallel.DistributedDataParallel(model)


def twin(model):
    """A plain copy of model_and_ddp()'s model: the run without DDP or the hook."""
    ref = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
    ref.load_state_dict(model.state_dict())
    return ref


def close_weights(a, b, tol, what=""):
    """Asserts that modules a and b hold the same weights to tol (rtol as atol x 10)."""
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=10 * tol,
                                   atol=tol, err_msg=what)


def weights_gap(a, b):
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def run_steps(opt, net, steps):
    """The script's loop over these steps (each its own batch)."""
    for step in steps:
        opt.zero_grad()
        backward(net, step)
        opt.step()


# SGD and Adam, and how close the one call comes to torch's own at world 1 with the
# dense codec (SGD: the same bits).
SGD_AND_ADAM = ((lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 0.0),
                (lambda p: torch.optim.Adam(p, lr=0.01, eps=1e-12), 2e-6))


def backward(ddp, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(16, 20, generator=g), torch.randint(0, 5, (16,), generator=g)
    nn.functional.cross_entropy(ddp(x), y).backward()


class PolicyTest(OneProcessGroupTest):
    def choose(self, make):
        model, ddp = model_and_ddp()
        opt = adt.DistributedOptimizer(ddp, make(model.parameters()))
        opt.hook.close()
        return opt

    def test_which_optimizers_run_on_each_rank(self):
        cases = [
            (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), "sgd", None),
            (lambda p: torch.optim.AdamW(p, lr=1e-3), "adam", None),
            (lambda p: torch.optim.Adam(p, lr=1e-3), "adam", None),
            (lambda p: torch.optim.SGD(p, lr=0.1), None, "SGD without momentum"),
            (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True), "sgd", None),
            (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.5), None,
             "dampening"),
            (lambda p: torch.optim.Adam(p, lr=1e-3, weight_decay=0.1), "adam", None),
            (lambda p: torch.optim.Adam(p, lr=1e-3, amsgrad=True), None, "amsgrad"),
            (lambda p: torch.optim.RMSprop(p, lr=1e-3), None, "RMSprop is not"),
        ]
        for make, kind, why in cases:
            opt = self.choose(make)
            self.assertEqual(opt.kind, kind, opt.why)
            self.assertEqual(opt.local, kind is not None)
            if why:
                self.assertIn(why, opt.why)
                self.assertIsNone(opt.hook._local)

    def test_sgd_masks_no_velocity_unless_asked(self):
        """SGD's velocity is left as it is where a frame sent it (local_mask=False), so
        nothing is masked over steps that send; local_mask=True masks."""
        for kwargs, mask in (({}, False), ({"local_mask": True}, True)):
            model, ddp = model_and_ddp()
            opt = adt.DistributedOptimizer(
                ddp, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), **kwargs)
            self.assertIs(opt.hook.settings.local.mask, mask)
            for step in range(4):
                opt.zero_grad(set_to_none=True)
                backward(ddp, step)
                opt.step()
            masked = opt.hook.state_dict()["local_optimizer"]["masked"]
            opt.hook.close()
            if mask:
                self.assertGreater(masked, 0)
            else:
                self.assertEqual(masked, 0)

    def test_groups_that_differ_in_momentum_run_on_the_average(self):
        model, ddp = model_and_ddp()
        base = torch.optim.SGD([{"params": model[0].parameters(), "momentum": 0.9},
                                {"params": model[2].parameters(), "momentum": 0.5}], lr=0.1)
        opt = adt.DistributedOptimizer(ddp, base)
        self.assertFalse(opt.local)
        self.assertIn("differ in momentum", opt.why)

    def test_an_optimizer_over_part_of_the_model_runs_on_the_average(self):
        """The head trained by a second optimizer: run on each rank, the first one's
        averaged velocity would reach the head's .grad (0.2 off here by step 1); on the
        average the head's .grad is its gradient. Frozen parameters do not count."""
        model, ddp = model_and_ddp()
        opt = adt.DistributedOptimizer(
            ddp, torch.optim.SGD(model[0].parameters(), lr=0.1, momentum=0.9), codec="dense")
        self.assertFalse(opt.local)
        self.assertIn("does not hold every trained parameter of the model (2.weight, "
                      "2.bias)", opt.why)
        head = torch.optim.SGD(model[2].parameters(), lr=0.1)
        for step in range(3):
            opt.zero_grad()
            head.zero_grad()
            backward(ddp, step)
            g = torch.Generator().manual_seed(step)
            x, y = torch.randn(16, 20, generator=g), torch.randint(0, 5, (16,), generator=g)
            want = torch.autograd.grad(nn.functional.cross_entropy(model(x), y),
                                       list(model[2].parameters()))
            for p, w in zip(model[2].parameters(), want):
                torch.testing.assert_close(p.grad, w, rtol=0, atol=1e-7)
            opt.step()
            head.step()
        opt.hook.close()
        with self.assertRaisesRegex(ValueError, "local=True, but the optimizer does not"):
            model, ddp = model_and_ddp()
            adt.DistributedOptimizer(ddp, torch.optim.SGD(model[0].parameters(), lr=0.1,
                                                          momentum=0.9), local=True)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
        for p in model[2].parameters():
            p.requires_grad_(False)
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), lr=0.1,
                                                           momentum=0.9))
        self.assertTrue(opt.local, opt.why)
        opt.hook.close()

    def test_local_true_where_it_cannot_is_refused(self):
        model, ddp = model_and_ddp()
        with self.assertRaisesRegex(ValueError, "local=True, but RMSprop"):
            adt.DistributedOptimizer(ddp, torch.optim.RMSprop(model.parameters()), local=True)

    def test_bad_arguments(self):
        model, ddp = model_and_ddp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        with self.assertRaisesRegex(TypeError, "DistributedDataParallel"):
            adt.DistributedOptimizer(model, opt)
        with self.assertRaisesRegex(ValueError, "parameters that the DDP model does not"):
            adt.DistributedOptimizer(ddp, torch.optim.SGD([nn.Parameter(torch.ones(3))],
                                                          lr=0.1, momentum=0.9))


class StepTest(OneProcessGroupTest):
    def test_local_sgd_step_is_lr_times_the_velocity_read_live(self):
        """World 1, the dense codec (no residue, so no velocity masking): bit for bit
        torch's SGD with momentum, with the learning rate the groups hold at step()."""
        model, ddp = model_and_ddp()
        base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt = adt.DistributedOptimizer(ddp, base, codec="dense")
        ref = twin(model)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        for step, lr in enumerate((0.1, 0.05, 0.0, 0.2)):
            for g in base.param_groups:  # the script sets it on its own optimizer
                g["lr"] = lr
            for g in ref_opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            backward(ddp, step)
            opt.step()
            ref_opt.zero_grad()
            backward(ref, step)
            ref_opt.step()
            for p, q in zip(model.parameters(), ref.parameters()):
                np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(),
                                              err_msg=f"step {step} lr {lr}")

    def test_local_nesterov_is_torchs(self):
        """SGD(nesterov=True) with weight decay (timm's default SGD), world 1, the dense
        codec: torch's Nesterov SGD to rounding over 8 steps."""
        model, ddp = model_and_ddp()
        ref = twin(model)
        kw = dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)
        opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), **kw),
                                       codec="dense")
        self.assertTrue(opt.hook.settings.local.nesterov)
        ref_opt = torch.optim.SGD(ref.parameters(), **kw)
        run_steps(opt, ddp, range(8))
        run_steps(ref_opt, ref, range(8))
        close_weights(model, ref, 1e-6)
        # ... and not plain momentum's, which ends elsewhere.
        plain = twin(model_and_ddp()[0])
        run_steps(torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9,
                                  weight_decay=1e-2), plain, range(8))
        self.assertGreater(weights_gap(model, plain), 1e-3)
        opt.hook.close()

    def test_local_adam_with_an_l2_term_is_torchs(self):
        """Adam(weight_decay) adds weight_decay w to the gradient before its moments (not
        AdamW's decoupled decay): world 1, the dense codec, no step scale at world 1,
        against torch's Adam to rounding over 6 steps, with groups of their own decay
        and one changed by the script mid-run; and AdamW at the same decay ends
        elsewhere."""
        model, ddp = model_and_ddp()
        ref = twin(model)

        def groups(net):
            return [{"params": net[0].parameters(), "weight_decay": 0.5},
                    {"params": net[2].parameters(), "weight_decay": 0.0}]

        kw = dict(lr=0.01, betas=(0.9, 0.95), eps=1e-12)
        opt = adt.DistributedOptimizer(ddp, torch.optim.Adam(groups(model), **kw),
                                       codec="dense")
        self.assertEqual(opt.kind, "adam")
        ref_opt = torch.optim.Adam(groups(ref), **kw)
        for o, net in ((opt, ddp), (ref_opt, ref)):
            run_steps(o, net, range(3))
            o.param_groups[1]["weight_decay"] = 0.25
            run_steps(o, net, range(3, 6))
        close_weights(model, ref, 1e-6)
        decoupled = twin(model_and_ddp()[0])
        run_steps(torch.optim.AdamW(groups(decoupled), **kw), decoupled, range(6))
        self.assertGreater(weights_gap(model, decoupled), 1e-3)
        opt.hook.close()

    def test_a_run_without_the_hook_goes_on_with_it(self):
        """The script's optimizer's own state_dict, saved by a run without the hook,
        loads into the one call: world 1, the dense codec, 3 steps without the hook,
        then 3 with it from the saved weights and optimizer, equal to 6 steps without it
        (SGD bit for bit; Adam to rounding); a state whose moments do not fit is
        refused with nothing changed."""
        for make, tol in SGD_AND_ADAM:
            plain = twin(model_and_ddp()[0])
            plain_opt = make(plain.parameters())
            run_steps(plain_opt, plain, range(3))
            weights = {k: v.clone() for k, v in plain.state_dict().items()}
            saved = copy.deepcopy(plain_opt.state_dict())
            run_steps(plain_opt, plain, range(3, 6))
            model, ddp = model_and_ddp()
            model.load_state_dict(weights)
            opt = adt.DistributedOptimizer(ddp, make(model.parameters()), codec="dense")
            self.assertTrue(opt.local)
            bad = copy.deepcopy(saved)
            key = "momentum_buffer" if opt.kind == "sgd" else "exp_avg"
            bad["state"][3][key] = torch.zeros(7)
            with self.assertRaisesRegex(ValueError, "have 7 elements, the parameter 5"):
                opt.load_state_dict(bad)
            other = copy.deepcopy(saved)
            other["state"][0] = {"square_avg": torch.zeros(30, 20)}  # RMSprop's
            # (torch's Adam refuses it itself: no step; SGD takes it, and the one call not)
            with self.assertRaisesRegex(ValueError, f"{type(opt.inner).__name__}"):
                opt.load_state_dict(other)
            self.assertEqual(opt.hook._local.steps, 0)
            self.assertEqual(len(opt.inner.state), 0)
            meter = opt.hook._local.meter  # Adam's measured step scale
            if meter is not None:  # as if measured before: the loaded moments measure anew
                meter.measured, meter.num[:] = 5, 1.0
            opt.load_state_dict(saved)
            self.assertEqual(len(opt.inner.state), 0)  # the moments are the hook's
            if meter is not None:
                self.assertEqual((meter.measured, float(meter.num.sum())), (0, 0.0))
            run_steps(opt, ddp, range(3, 6))
            for p, q in zip(model.parameters(), plain.parameters()):
                np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=0,
                                           atol=tol, err_msg=opt.kind)
            opt.hook.close()

    def test_a_run_with_the_hook_goes_on_without_it(self):
        """torch_state_dict(): the moments in torch's form. World 1, the dense codec: 3
        steps with the hook, then 3 with torch's own optimizer loaded from it, equal to
        6 steps without the hook (SGD bit for bit; Adam to rounding)."""
        for make, tol in SGD_AND_ADAM:
            plain = twin(model_and_ddp()[0])
            run_steps(make(plain.parameters()), plain, range(6))
            model, ddp = model_and_ddp()
            opt = adt.DistributedOptimizer(ddp, make(model.parameters()), codec="dense")
            run_steps(opt, ddp, range(3))
            saved = opt.torch_state_dict()
            opt.hook.close()
            self.assertEqual(len(saved["state"]), 4)
            after = make(model.parameters())
            after.load_state_dict(saved)
            run_steps(after, model, range(3, 6))
            for p, q in zip(model.parameters(), plain.parameters()):
                np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=0,
                                           atol=tol, err_msg=type(after).__name__)

    def test_schedulers_before_and_after_the_call(self):
        model, ddp = model_and_ddp()
        base = torch.optim.AdamW(model.parameters(), lr=1.0)
        before = torch.optim.lr_scheduler.LambdaLR(base, lambda i: 0.5 ** i)
        opt = adt.DistributedOptimizer(ddp, base)
        after = torch.optim.lr_scheduler.MultiplicativeLR(opt, lambda i: 0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "lr_scheduler.step() before optimizer.step()"
            for step in range(3):
                opt.zero_grad()
                backward(ddp, step)
                opt.step()
                before.step()
                after.step()
        # LambdaLR sets 0.5^3 of the initial lr; MultiplicativeLR then took 0.1 of that.
        self.assertAlmostEqual(opt.param_groups[0]["lr"], 0.125 * 0.1)
        self.assertIs(opt.param_groups, base.param_groups)

    def test_a_schedule_that_moves_momentum_or_betas_takes_effect(self):
        """OneCycleLR moves SGD's momentum and Adam's beta1 at every step by default
        (cycle_momentum=True): world 1, the dense codec, against torch's own optimizer
        under the same schedule; SGD bit for bit, AdamW to rounding. Without following
        the groups the hook's fixed rates end 0.1 (SGD) and 0.05 (AdamW) away."""
        for name, make, tol in (
                ("sgd", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), 0.0),
                ("adamw", lambda p: torch.optim.AdamW(p, lr=0.01), 2e-7)):
            model, ddp = model_and_ddp()
            ref = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
            ref.load_state_dict(model.state_dict())
            runs = []
            for net, hooked in ((model, True), (ref, False)):
                base = make(net.parameters())
                sched = torch.optim.lr_scheduler.OneCycleLR(base, max_lr=0.1,
                                                            total_steps=12)
                opt = adt.DistributedOptimizer(ddp, base, codec="dense") if hooked else base
                runs.append((net, ddp if hooked else net, opt, sched))
            rates = []
            for step in range(12):
                for net, fwd, opt, sched in runs:
                    opt.zero_grad(set_to_none=True)
                    backward(fwd, step)
                    opt.step()
                    sched.step()
                g = runs[0][2].param_groups[0]
                rates.append(g["momentum"] if name == "sgd" else g["betas"][0])
                for p, q in zip(model.parameters(), ref.parameters()):
                    np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(),
                                               rtol=0, atol=tol, err_msg=f"{name} {step}")
            self.assertGreater(max(rates) - min(rates), 0.05, rates)  # it did move
            local = runs[0][2].hook._local
            self.assertEqual(local.momentum if name == "sgd" else local.betas[0], rates[-2])
            runs[0][2].hook.close()

    def test_groups_whose_momentum_comes_to_differ_fail_the_step_with_why(self):
        model, ddp = model_and_ddp()
        params = list(model.parameters())
        base = torch.optim.SGD([{"params": params[:2]}, {"params": params[2:]}], lr=0.1,
                               momentum=0.9)
        opt = adt.DistributedOptimizer(ddp, base)
        base.param_groups[1]["momentum"] = 0.5
        with self.assertRaises(RuntimeError) as cm:  # backward's, with the StepAborted
            opt.zero_grad()
            backward(ddp)
        self.assertIn("StepAborted", str(cm.exception))
        self.assertIn("momentum differ (0.5, 0.9)", str(cm.exception))
        self.assertEqual(opt.hook.steps, 0)
        opt.hook.close()
        # Betas written as a list in one group and a tuple in another are the same.
        model, ddp = model_and_ddp()
        params = list(model.parameters())
        base = torch.optim.AdamW([{"params": params[:2]}, {"params": params[2:]}], lr=0.01)
        opt = adt.DistributedOptimizer(ddp, base)
        base.param_groups[1]["betas"] = [0.8, 0.99]
        base.param_groups[0]["betas"] = (0.8, 0.99)
        run_steps(opt, ddp, range(2))
        self.assertEqual(opt.hook.steps, 2)
        self.assertEqual(opt.hook._local.betas, (0.8, 0.99))
        opt.hook.close()

    def test_a_cpu_grad_scaler_passes_the_step_through(self):
        """torch.cuda.amp.GradScaler on a CPU machine disables itself: scale() and step()
        pass through, so a script written with one trains as without it."""
        model, ddp = model_and_ddp()
        opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), lr=0.1,
                                                           momentum=0.9))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "CUDA is not available. Disabling."
            scaler = torch.cuda.amp.GradScaler()
        before = [p.detach().clone() for p in model.parameters()]
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(16, 20, generator=g), torch.randint(0, 5, (16,), generator=g)
        opt.zero_grad()
        scaler.scale(nn.functional.cross_entropy(ddp(x), y)).backward()
        averaged = [p.grad.clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        self.assertEqual(opt.hook.steps, 1)
        for b, a, p in zip(before, averaged, model.parameters()):
            torch.testing.assert_close(p.detach(), b - 0.1 * a, rtol=0, atol=1e-7)

    def test_clip_is_taken_over(self):
        """.grad is left alone, the norm returned is this rank's gradient's, and from
        the next step on each rank's gradient is clipped before its velocity: with the
        dense codec and lr 0, .grad after step 1's backward must be 0.9 g0 + c g1, where
        c = 0.01 / (|g1| + 1e-6), g0 and g1 computed here on the same weights."""
        model, ddp = model_and_ddp()
        ref = twin(model)
        opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), lr=0.0,
                                                           momentum=0.9), codec="dense")
        opt.zero_grad()
        backward(ddp, 0)
        averaged = [p.grad.clone() for p in model.parameters()]
        with self.assertWarnsRegex(RuntimeWarning, "clips each rank's own gradient at 0.01"):
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
        for a, p in zip(averaged, model.parameters()):
            self.assertTrue(torch.equal(a, p.grad))  # .grad untouched
        opt.step()
        g = []
        for seed in (0, 1):
            ref.zero_grad()
            backward(ref, seed)
            g.append([p.grad.clone() for p in ref.parameters()])
        norms = [float(torch.sqrt(sum((t.double() ** 2).sum() for t in gs))) for gs in g]
        self.assertAlmostEqual(float(norm), norms[0], places=5)
        opt.zero_grad()
        backward(ddp, 1)
        c = 0.01 / (norms[1] + 1e-6)
        for g0, g1, p in zip(g[0], g[1], model.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), (0.9 * g0 + c * g1).numpy(),
                                       rtol=1e-5, atol=1e-7)
        self.assertAlmostEqual(opt.hook._local.last_norm, norms[1], places=5)

    def test_a_script_that_does_not_clip_measures_no_norm(self):
        """No clip at the first step: no norm is measured after it (a pass over the
        gradient saved per step); a clip that starts later returns NaN at its first
        call, then each rank's norm, and clips."""
        model, ddp = model_and_ddp()
        ref = twin(model)
        opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), lr=0.0,
                                                           momentum=0.9), codec="dense")
        local = opt.hook._local
        self.assertTrue(local.measure)
        for step in range(3):
            opt.zero_grad()
            backward(ddp, step)
            opt.step()
            self.assertFalse(local.measure)
            self.assertIsNone(local.last_norm)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the take-over's warning
            self.assertTrue(math.isnan(float(torch.nn.utils.clip_grad_norm_(
                model.parameters(), 1e-3))))
            opt.step()
            opt.zero_grad()
            backward(ddp, 3)
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3))
        ref.zero_grad()
        backward(ref, 3)
        want = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in ref.parameters())))
        self.assertAlmostEqual(norm, want, places=5)
        opt.hook.close()

    def _adam_clipped_like_torch(self, clip, torchs):
        """AdamW with clip(parameters) after every backward, world 1, float32 frames,
        against torch's AdamW with torchs(parameters) (which returns how much it cut):
        to rounding, the first step included (its moments are clipped at the first
        call; the step itself does not change). eps is small so that no element's first
        step depends on it. Returns what torchs returned at each step."""
        model, ddp = model_and_ddp()
        ref = twin(model)
        kw = dict(lr=0.01, betas=(0.9, 0.95), eps=1e-12, weight_decay=0.1)
        opt = adt.DistributedOptimizer(ddp, torch.optim.AdamW(model.parameters(), **kw),
                                       codec="dense")
        ref_opt = torch.optim.AdamW(ref.parameters(), **kw)
        cut = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the take-over's warning
            for step in range(6):
                opt.zero_grad()
                backward(ddp, step)
                clip(model.parameters())
                opt.step()
                ref_opt.zero_grad()
                backward(ref, step)
                cut.append(torchs(ref.parameters()))
                ref_opt.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4,
                                       atol=1e-6)
        opt.hook.close()
        return cut

    def test_adam_with_a_clip_from_the_first_step_is_torchs(self):
        norms = self._adam_clipped_like_torch(
            lambda p: torch.nn.utils.clip_grad_norm_(p, 0.05),
            lambda p: float(adt.clip._ORIGINAL["clip_grad_norm_"](p, 0.05)))
        self.assertGreater(min(norms), 0.1)  # every step was clipped, the first too

    def test_adam_with_a_value_clip_from_the_first_step_is_torchs(self):
        def torchs(params):
            params = list(params)
            clamped = sum(int((p.grad.abs() > 0.01).sum()) for p in params)
            adt.clip._ORIGINAL["clip_grad_value_"](params, 0.01)
            return clamped

        clamped = self._adam_clipped_like_torch(
            lambda p: torch.nn.utils.clip_grad_value_(p, 0.01), torchs)
        self.assertGreater(min(clamped), 10)  # every step was clamped, the first too

    def test_a_clip_that_bypasses_the_hook_is_refused_at_step(self):
        """torch's clip_grad_norm_ bound before adacomp's import (in place: the version
        counter moves); torch 1.13's clip_grad_value_, which clamps p.grad.data and
        leaves the version counter as it was, and any change of .grad.data (found by
        the norms): refused at step(), the weights untouched."""
        for change in (lambda m: adt.clip._ORIGINAL["clip_grad_norm_"](m.parameters(), 1e-4),
                       lambda m: adt.clip._ORIGINAL["clip_grad_value_"](m.parameters(), 1e-4),
                       lambda m: next(m.parameters()).grad.data.mul_(0.5)):
            model, ddp = model_and_ddp()
            opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), lr=0.1,
                                                               momentum=0.9))
            opt.zero_grad()
            backward(ddp, 0)
            before = [p.detach().clone() for p in model.parameters()]
            change(model)
            with self.assertRaisesRegex(RuntimeError, "holds the ranks' averaged optimizer "
                                                      "step(.|\\n)*also through .grad.data"):
                opt.step()
            for b, p in zip(before, model.parameters()):
                self.assertTrue(torch.equal(b, p))
            opt.hook.close()

    def test_clip_value_is_taken_over(self):
        """clip_grad_value_ after backward, world 1, the dense codec: .grad is left
        alone, and from the next step on each rank's gradient is clamped before its
        velocity: bit for bit torch's SGD whose gradient is clamped from step 1 on (its
        step 0 unclamped, as the hook's velocity of step 0 was made before the call)."""
        model, ddp = model_and_ddp()
        ref = twin(model)
        opt = adt.DistributedOptimizer(ddp, torch.optim.SGD(model.parameters(), lr=0.1,
                                                           momentum=0.9), codec="dense")
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        clamped = 0
        for step in range(5):
            opt.zero_grad()
            backward(ddp, step)
            averaged = [p.grad.clone() for p in model.parameters()]
            if step == 0:
                with self.assertWarnsRegex(RuntimeWarning, "clamps each rank's own gradient "
                                                           "to \\+-0.02"):
                    self.assertIsNone(torch.nn.utils.clip_grad_value_(model.parameters(),
                                                                      0.02))
            else:
                torch.nn.utils.clip_grad_value_(model.parameters(), 0.02)
            for a, p in zip(averaged, model.parameters()):
                self.assertTrue(torch.equal(a, p.grad))  # .grad untouched
            opt.step()
            ref_opt.zero_grad()
            backward(ref, step)
            if step > 0:
                clamped += sum(int((p.grad.abs() > 0.02).sum()) for p in ref.parameters())
                adt.clip._ORIGINAL["clip_grad_value_"](ref.parameters(), 0.02)
            ref_opt.step()
            for p, q in zip(model.parameters(), ref.parameters()):
                np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(),
                                              err_msg=f"step {step}")
        self.assertGreater(clamped, 10)  # the clamp did clamp
        self.assertEqual(opt.state_dict()["clip_value"], 0.02)
        opt.hook.close()

    def test_other_parameters_go_to_torchs_clip(self):
        p = nn.Parameter(torch.ones(4))
        p.grad = torch.full((4,), 3.0)
        norm = torch.nn.utils.clip_grad_norm_([p], 1.0)
        self.assertAlmostEqual(float(norm), 6.0)
        self.assertAlmostEqual(float(p.grad.norm()), 1.0, places=5)
        p.grad = torch.tensor([3.0, -3.0, 0.5, -0.5])
        torch.nn.utils.clip_grad_value_(p, 1.0)
        self.assertEqual(p.grad.tolist(), [1.0, -1.0, 0.5, -0.5])

    def test_state_dict_round_trip_and_refusals(self):
        model, ddp = model_and_ddp()
        opt = adt.DistributedOptimizer(ddp, torch.optim.AdamW(model.parameters(), lr=0.01))
        for step in range(2):
            opt.zero_grad()
            backward(ddp, step)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        sd = opt.state_dict()
        self.assertEqual(sd["clip_norm"], 1.0)
        self.assertEqual(sd["adacomp"]["local_optimizer"]["steps"], 2)
        model2, ddp2 = model_and_ddp()
        opt2 = adt.DistributedOptimizer(ddp2, torch.optim.AdamW(model2.parameters(), lr=0.5))
        for junk in ({"state": {}}, [1, 2], dict(sd, format="other/1")):
            with self.assertRaisesRegex(ValueError, "not a DistributedOptimizer state_dict, "
                                                    "nor a torch optimizer's"):
                opt2.load_state_dict(junk)
        bad = dict(sd, adacomp=dict(sd["adacomp"], rank=1))
        with self.assertRaisesRegex(ValueError, "rank 1's of"):
            opt2.load_state_dict(bad)
        self.assertEqual(opt2.param_groups[0]["lr"], 0.5)  # nothing changed
        opt2.load_state_dict(sd)
        self.assertEqual(opt2.param_groups[0]["lr"], 0.01)
        self.assertIs(opt2.param_groups, opt2.inner.param_groups)
        self.assertTrue(opt2.hook.clip_whole)
        self.assertEqual(opt2.hook.steps, 2)


LR, DECAY = 0.1, 0.5


def adam_worker(rank, port, outdir, kwargs):
    """One AdamW step through the one call on 2 ranks, float32 frames (no residue):
    returns the averaged step the weights moved by, and both ranks' gradients."""
    with gloo_rank(rank, port, 2, outdir) as result:
        torch.manual_seed(0)
        model = nn.Linear(6, 4)
        twin = nn.Linear(6, 4)
        twin.load_state_dict(model.state_dict())
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = adt.DistributedOptimizer(
            ddp, torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=DECAY),
            codec="dense", **kwargs)
        result["scale"] = opt.hook.settings.local.step_scale
        start = [p.detach().clone() for p in model.parameters()]
        grads = []
        for r in range(2):  # both ranks' gradients, each rank's batch computed here
            x = torch.randn(8, 6, generator=torch.Generator().manual_seed(10 + r))
            twin.zero_grad()
            twin(x).square().mean().backward()
            grads.append([p.grad.clone() for p in twin.parameters()])
        x = torch.randn(8, 6, generator=torch.Generator().manual_seed(10 + rank))
        ddp(x).square().mean().backward()
        opt.step()
        # w' = w (1 - lr decay) - lr avg  =>  avg = (w (1 - lr decay) - w') / lr
        result["avg"] = [(w * (1 - LR * DECAY) - p.detach()) / LR
                         for w, p in zip(start, model.parameters())]
        result["grads"] = grads
        opt.hook.close()


class AdamStepScaleTest(unittest.TestCase):
    """The one call scales each rank's Adam step by a measured scale (step_scale.py),
    or a fixed one: each rank's second moment is of a batch P times smaller than the
    average's (docs/local-adam.md)."""

    def run_step(self, **kwargs):
        return spawn_world(functools.partial(adam_worker, kwargs=kwargs), 2)

    def check(self, results, scale):
        for res in results:
            self.assertEqual(res["scale"], scale)
            g0, g1 = res["grads"]
            for avg, a, b in zip(res["avg"], g0, g1):
                # Adam's first step is g / (|g| + eps) on each rank (m_hat = g, v_hat = g^2).
                own = (a / (a.abs() + 1e-8) + b / (b.abs() + 1e-8)) / 2
                np.testing.assert_allclose(avg.numpy(), scale * own.numpy(), rtol=2e-5,
                                           atol=2e-6)
        for x, y in zip(results[0]["avg"], results[1]["avg"]):
            np.testing.assert_array_equal(x.numpy(), y.numpy())

    def test_measured_by_default(self):
        # (the first step has no measurement yet: scale 1; test_step_scale.py the rest)
        results = self.run_step()
        for res in results:
            self.assertEqual(res["scale"], "measured")
            res["scale"] = 1.0
        self.check(results, 1.0)

    def test_sqrt_world_fixed(self):
        self.check(self.run_step(local_step_scale=math.sqrt(2)), math.sqrt(2))

    def test_one_turns_it_off(self):
        self.check(self.run_step(local_step_scale=1.0), 1.0)

    def test_refused_with_sgd_and_with_a_dense_warmup(self):
        from adacomp.torch.settings import Settings
        with self.assertRaisesRegex(ValueError, "goes with local_optimizer 'adam'"):
            Settings.of(local_optimizer="sgd", local_step_scale=2.0)
        with self.assertRaisesRegex(ValueError, "1-bit Adam"):
            Settings.of(local_optimizer="adam", local_step_scale=2.0, dense_warmup_steps=5)
        for bad in (0.0, -1.0, float("nan"), float("inf"), True):
            with self.assertRaisesRegex(ValueError, "local_step_scale must be"):
                Settings.of(local_optimizer="adam", local_step_scale=bad)


if __name__ == "__main__":
    unittest.main()
