"""Parameters that a step leaves unused (DDP find_unused_parameters=True): nothing
of their residue may be sent that DDP will not apply. Conservation, per parameter:
the sum over steps of the ranks' average gradient equals the weights' change
(SGD lr 1, no momentum) plus the ranks' mean residue, to float rounding, for a
branch used on even steps only, on one rank only, and for the always-used layers.
2 Gloo processes; the local gradients are taken by tensor hooks before DDP sees
them. With the one call (DistributedOptimizer, SGD with momentum: each rank
compresses its velocity; with AdamW, Adam's step, each parameter counting only the
steps that used it), the same holds for the steps each rank compressed. With
auto=True set to switch between dense and the codec every other step, the same holds
across the switches both ways, and both ranks choose alike, with the default hook and
with the one call (each rank's velocity or Adam step going dense with its residue)."""

import functools
import unittest

import numpy as np
import torch
from torch import nn

import adacomp.torch
from ddp_test_util import gloo_rank, spawn_world

STEPS = 20


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(40, 60)
        self.even = nn.Linear(60, 10)    # used on even steps, on every rank
        self.rank0 = nn.Linear(60, 10)   # used on rank 0 only, on odd steps
        self.head = nn.Linear(60, 10)

    def forward(self, x, step, rank):
        h = torch.relu(self.trunk(x))
        out = self.head(h)
        if step % 2 == 0:
            out = out + self.even(h)
        elif rank == 0:
            out = out + self.rank0(h)
        return out


def worker(rank, port, outdir, kwargs):
    with gloo_rank(rank, port, 2, outdir) as result:
        torch.manual_seed(0)
        model = Branchy()
        start = {n: p.detach().clone() for n, p in model.named_parameters()}
        ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
        local = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        if kwargs.get("one_call"):
            # The one call with SGD and momentum (or AdamW): what each rank compresses
            # is its local step (the velocity, or Adam's step), so that is what is summed.
            inner = (torch.optim.AdamW(ddp.parameters(), lr=1.0, weight_decay=0.0)
                     if kwargs.get("adam") else
                     torch.optim.SGD(ddp.parameters(), lr=1.0, momentum=0.9))
            opt = adacomp.torch.DistributedOptimizer(
                ddp, inner, **{k: v for k, v in kwargs.items() if k.startswith("auto")})
            state = opt.hook
            real = state._local.prepare

            def prepared(e, grad):  # each rank's step, whether it goes dense or compressed
                step = real(e, grad)
                local[e.name].view(-1).add_(torch.from_numpy(step))
                return step
            state._local.prepare = prepared
        else:
            state = adacomp.torch.register(ddp, **kwargs)

            def keep(name):
                def hook(grad):
                    local[name].add_(grad)  # and return None: the gradient goes on unchanged
                return hook
            for n, p in model.named_parameters():
                p.register_hook(keep(n))
            opt = torch.optim.SGD(ddp.parameters(), lr=1.0)
        gen = torch.Generator().manual_seed(100 + rank)
        for step in range(STEPS):
            x = torch.randn(16, 40, generator=gen)
            opt.zero_grad(set_to_none=True)
            ddp(x, step, rank).square().mean().backward()
            opt.step()
        state.wait_idle()
        result["grad_sum"] = {n: g.numpy().astype(np.float64) for n, g in local.items()}
        result["change"] = {n: (start[n] - p.detach()).numpy().astype(np.float64)
                            for n, p in model.named_parameters()}
        result["residue"] = {n: r.astype(np.float64) for n, r in state.residues().items()}
        result["steps"] = state.steps
        if state._local is not None:
            result["counts"] = state._local.save()["counts"]
        if "auto" in state.stats():
            a = state.stats()["auto"]
            result["auto"] = (a["dense_steps"], a["codec_steps"], a["choices"])


def check(test, results):
    r0, r1 = results
    test.assertEqual(r0["steps"], STEPS)
    for name in r0["change"]:
        avg_grad = (r0["grad_sum"][name] + r1["grad_sum"][name]).reshape(-1) / 2
        mean_res = (r0["residue"][name] + r1["residue"][name]) / 2
        change = r0["change"][name].reshape(-1)
        np.testing.assert_array_equal(change, r1["change"][name].reshape(-1))  # replicas
        err = np.abs(avg_grad - (change + mean_res)).max()
        scale = max(np.abs(avg_grad).max(), 1e-3)
        test.assertLess(err / scale, 1e-5, f"{name}: sent + residue != sum of gradients "
                                           f"(max error {err:.3g}, scale {scale:.3g})")
    # The branches were really left unused on some steps and used on others.
    test.assertGreater(np.abs(r0["change"]["even.weight"]).max(), 0)
    test.assertGreater(np.abs(r0["change"]["rank0.weight"]).max(), 0)
    test.assertEqual(np.abs(r1["grad_sum"]["rank0.weight"]).max(), 0)


class UnusedParametersTest(unittest.TestCase):
    def test_default_hook_conserves(self):
        check(self, spawn_world(functools.partial(worker, kwargs={}), 2))

    def test_reduce_scatter_conserves(self):
        check(self, spawn_world(functools.partial(worker, kwargs={"exchange": "reduce-scatter"}), 2))

    def test_one_call_conserves_the_local_steps(self):
        check(self, spawn_world(functools.partial(worker, kwargs={"one_call": True}), 2))

    def test_one_call_with_adam_counts_each_parameters_steps(self):
        """AdamW through the one call: conservation as above, and each parameter's step
        count (its bias corrections) counts only the steps that used it, as torch's
        Adam does: the trunk all 20, the even-step branch 10 on each rank, the rank-0
        branch 10 on rank 0 and none on rank 1."""
        r0, r1 = spawn_world(functools.partial(worker, kwargs={"one_call": True,
                                                              "adam": True}), 2)
        check(self, (r0, r1))
        for r, rank0_steps in ((r0, STEPS // 2), (r1, 0)):
            self.assertEqual(r["counts"]["trunk.weight"][0], STEPS)
            self.assertEqual(r["counts"]["head.bias"][0], STEPS)
            self.assertEqual(r["counts"]["even.weight"][0], STEPS // 2)
            # (a parameter never used has no moments and no count saved)
            self.assertEqual(r["counts"].get("rank0.weight", [0, 0])[0], rank0_steps)
        self.assertNotIn("rank0.weight", r1["counts"])

    def test_auto_conserves_across_switches(self):
        self.auto_conserves({})

    def test_one_call_auto_conserves_across_switches(self):
        """auto through the one call: SGD's velocity and AdamW's step go dense (with the
        residue) or compressed, and nothing is lost either way."""
        self.auto_conserves({"one_call": True})
        self.auto_conserves({"one_call": True, "adam": True})

    def auto_conserves(self, kwargs):
        # One timed step a probe, the other way again after two settled steps,
        # whatever it costs: dense and codec steps alternate in short runs.
        opts = {"probe_steps": 1, "reprobe_every": 2, "probe_cost": 0.0}
        r0, r1 = spawn_world(functools.partial(
            worker, kwargs={"auto": True, "auto_options": opts, **kwargs}), 2)
        check(self, (r0, r1))
        dense, codec, choices = r0["auto"]
        self.assertEqual(dense + codec, STEPS)
        self.assertGreaterEqual(dense, 5)
        self.assertGreaterEqual(codec, 5)
        self.assertEqual(r1["auto"], r0["auto"])  # the same choices on both ranks
        # (which way it settles depends on this machine's timings; either way it
        # probes the other way again)
        self.assertTrue(any(" again " in c for c in choices), choices)

    def test_without_overlap_conserves(self):
        check(self, spawn_world(functools.partial(worker, kwargs={"overlap": False}), 2))


if __name__ == "__main__":
    unittest.main()
