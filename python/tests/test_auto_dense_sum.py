"""auto's dense steps go through the process group's all-reduce (dense_sum.py), and a
failure in one stays atomic and agreed: 2 Gloo processes, DDP, auto=True set to
switch between dense and the codec every few steps, with the default hook and with
the one call (SGD with momentum).

- Dense steps call torch.distributed.all_reduce once per bucket; codec steps never.
- At the first dense step after a codec step (the residues hold something), rank 1's
  gradient gets a NaN: both ranks' backward() fails at that step, both ranks'
  residues are what they were before it, and the weights are not changed.
- At the next such step, rank 0 fails in its own code (a raise where it adds the
  residue): both fail again; rank 0's error names itself and its cause, rank 1's the
  non-finite sum that rank 0's NaN bucket gave it.
- The runs go on: all but the two failed steps are applied, auto counts them only,
  a local optimizer's moments advance on applied steps only, and the replicas end
  identical."""

import functools
import unittest

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import adacomp.torch
from adacomp.torch import dense_sum
from ddp_test_util import gloo_rank, spawn_world

STEPS = 24
OPTS = {"probe_steps": 1, "reprobe_every": 2, "probe_cost": 0.0}


def worker(rank, port, outdir, one_call):
    with gloo_rank(rank, port, 2, outdir) as result:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
        ddp = nn.parallel.DistributedDataParallel(model)
        if one_call:
            opt = adacomp.torch.DistributedOptimizer(
                ddp, torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9),
                auto=True, auto_options=OPTS)
            state = opt.hook
        else:
            state = adacomp.torch.register(ddp, auto=True, auto_options=OPTS)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)

        calls = [0]
        real_all_reduce = dist.all_reduce

        def counting(*args, **kwargs):
            calls[0] += 1
            return real_all_reduce(*args, **kwargs)
        dist.all_reduce = counting

        # Which steps fail, decided alike on both ranks from the modes both saw.
        modes, plan = [], {"nan": None, "raise": None}
        now = [0]
        real_fill, real_fold = dense_sum.fill, state._auto.fold

        def codec_since(s):
            return "codec" in modes[s:]

        def fill(st, ex, arr):
            s = now[0]
            if plan["nan"] is None and codec_since(0):
                plan["nan"] = s
            elif (plan["nan"] is not None and plan["raise"] is None and s > plan["nan"]
                  and codec_since(plan["nan"] + 1)):
                plan["raise"] = s
            error = real_fill(st, ex, arr)
            if rank == 1 and s == plan["nan"]:
                arr[ex.layout[0][1]] = float("nan")  # after the fill: no local check sees it
            return error
        dense_sum.fill = fill

        def fold(e, g):
            if rank == 0 and now[0] == plan["raise"]:
                raise RuntimeError("injected failure on rank 0")
            real_fold(e, g)
        state._auto.fold = fold

        gen = torch.Generator().manual_seed(100 + rank)
        steps = []
        for s in range(STEPS):
            now[0] = s
            residues = {n: r.copy() for n, r in state.residues().items()}
            weights = {n: p.detach().clone() for n, p in model.named_parameters()}
            x = torch.randn(8, 20, generator=gen)
            opt.zero_grad(set_to_none=True)
            calls[0] = 0
            error = None
            try:
                ddp(x).square().mean().backward()
            except RuntimeError as exc:
                if state.step_error is None:
                    raise
                error = str(exc)
            state.wait_idle()
            modes.append(state._auto.mode)
            if error is None:
                opt.step()
            kept = all(np.array_equal(r, residues[n]) for n, r in state.residues().items())
            unchanged = all(torch.equal(p.detach(), weights[n])
                            for n, p in model.named_parameters())
            steps.append({"mode": modes[-1], "error": error, "all_reduces": calls[0],
                          "residues_kept": kept, "weights_kept": unchanged})
        result["steps"] = steps
        result["plan"] = dict(plan)
        result["params"] = {n: p.detach().clone() for n, p in model.named_parameters()}
        a = state.stats()["auto"]
        result["auto"] = (a["dense_steps"], a["codec_steps"])
        result["applied"] = state.steps
        result["local_steps"] = state._local.steps if state._local is not None else None


class AutoDenseSumTest(unittest.TestCase):
    def run_world(self, one_call):
        r0, r1 = spawn_world(functools.partial(worker, one_call=one_call), 2)
        self.assertEqual(r0["plan"], r1["plan"])
        nan_step, raise_step = r0["plan"]["nan"], r0["plan"]["raise"]
        self.assertIsNotNone(nan_step, r0["steps"])
        self.assertIsNotNone(raise_step, r0["steps"])
        for r in (r0, r1):
            for s, st in enumerate(r["steps"]):
                failed = s in (nan_step, raise_step)
                self.assertEqual(st["error"] is not None, failed, (s, st))
                # a dense step all-reduces its one bucket; a codec step never
                self.assertEqual(st["all_reduces"], 1 if st["mode"] == "dense" else 0, (s, st))
                if failed:
                    self.assertEqual(st["mode"], "dense")
                    self.assertTrue(st["residues_kept"], s)
                    self.assertTrue(st["weights_kept"], s)
                elif st["mode"] == "codec":
                    self.assertFalse(st["residues_kept"], s)  # the codec filled them
            self.assertEqual(r["applied"], STEPS - 2)
            self.assertEqual(sum(r["auto"]), STEPS - 2)
            self.assertGreaterEqual(r["auto"][0], 3)
            self.assertGreaterEqual(r["auto"][1], 3)
        # both ranks see the non-finite sum of the NaN step
        for r in (r0, r1):
            self.assertIn("not finite", r["steps"][nan_step]["error"])
        # the raise: rank 0 names itself and its cause; rank 1 sees its NaN bucket
        self.assertIn("rank(s) [0] failed", r0["steps"][raise_step]["error"])
        self.assertIn("injected failure on rank 0", r0["steps"][raise_step]["error"])
        self.assertIn("not finite", r1["steps"][raise_step]["error"])
        for n in r0["params"]:
            self.assertTrue(torch.equal(r0["params"][n], r1["params"][n]), n)
        return r0, r1

    def test_default_hook(self):
        r0, _ = self.run_world(one_call=False)
        self.assertIsNone(r0["local_steps"])

    def test_one_call(self):
        r0, r1 = self.run_world(one_call=True)
        self.assertEqual(r0["local_steps"], STEPS - 2)  # moments of applied steps only
        self.assertEqual(r1["local_steps"], STEPS - 2)


if __name__ == "__main__":
    unittest.main()
