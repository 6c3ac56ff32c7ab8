"""Checkpoints and failures across ranks, on 2 Gloo processes.

Checkpoints: a rank's state_dict() names its rank and world size, and another rank
refuses it; gathered_state_dict() puts every rank's state in one object on rank 0
(None elsewhere), which the rank-0-only save pattern writes once and every rank
loads its own part from, resuming bit for bit like the run that never stopped.

Failures: the documented skip-the-step loop (python/README.md) skips a failed step
(a NaN on rank 1) with state.step_error set, and after max_failed_steps failures in
a row raises StepsKeepFailing instead, on every rank; an applied step in between
starts the count again."""

import os
import unittest

import numpy as np
import torch
from torch import nn

import adacomp.torch as adt
from ddp_test_util import gloo_rank, spawn_world

WORLD = 2
STEPS, RESUME_AT = 8, 4


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    return model, ddp, opt


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 20, generator=g), torch.randint(0, 5, (8,), generator=g)


def train(ddp, opt, first, count, rank):
    for step in range(first, first + count):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()


def checkpoint_worker(rank, port, outdir):
    with gloo_rank(rank, port, WORLD, outdir) as result:
        model, ddp, opt = make()
        state = adt.register(ddp)
        train(ddp, opt, 0, RESUME_AT, rank)
        state.wait_idle()
        own = state.state_dict()
        gathered = state.gathered_state_dict()
        result["gathered_is_none"] = gathered is None
        if rank == 0:  # the usual pattern: one file, written by rank 0
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "adacomp": gathered}, os.path.join(outdir, "ckpt.pt"))
            torch.save(own, os.path.join(outdir, "rank0_own.pt"))
        torch.distributed.barrier()
        # Rank 0's own state on rank 1 is refused, and nothing changes.
        before = state.residues()
        if rank == 1:
            try:
                state.load_state_dict(torch.load(os.path.join(outdir, "rank0_own.pt")))
                result["wrong_rank_error"] = None
            except ValueError as exc:
                result["wrong_rank_error"] = str(exc)
            result["unchanged"] = all(np.array_equal(v, state.residues()[k])
                                      for k, v in before.items())
        try:
            state.load_state_dict({**(gathered or own), "format": "adacomp.torch."
                                   "AdaCompState/gathered/1", "world_size": 3,
                                   "ranks": [own] * 3})
            result["wrong_world_error"] = None
        except ValueError as exc:
            result["wrong_world_error"] = str(exc)
        # The run that never stopped.
        train(ddp, opt, RESUME_AT, STEPS - RESUME_AT, rank)
        state.wait_idle()
        result["params"] = {k: v.clone() for k, v in model.state_dict().items()}
        result["residues"] = state.residues()
        # Every rank resumes from rank 0's one file.
        ckpt = torch.load(os.path.join(outdir, "ckpt.pt"))
        model2, ddp2, opt2 = make()
        model2.load_state_dict(ckpt["model"])
        opt2.load_state_dict(ckpt["opt"])
        state2 = adt.register(ddp2)
        state2.load_state_dict(ckpt["adacomp"])
        result["loaded_steps"] = state2.steps
        train(ddp2, opt2, RESUME_AT, STEPS - RESUME_AT, rank)
        state2.wait_idle()
        result["resumed_params"] = {k: v.clone() for k, v in model2.state_dict().items()}
        result["resumed_residues"] = state2.residues()


def failing_worker(rank, port, outdir):
    with gloo_rank(rank, port, WORLD, outdir) as result:
        model, ddp, opt = make()
        state = adt.register(ddp, max_failed_steps=3)
        # nan: the steps whose batch has a NaN on rank 1.
        plan = [False, True, True, False, True, True, True, False]
        skipped, stop = [], None
        for step, nan in enumerate(plan):  # the loop of python/README.md
            x, y = batch(step, rank)
            if nan and rank == 1:
                x[0, 0] = float("nan")
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(x), y)
            try:
                loss.backward()
            except RuntimeError as exc:
                if state.step_error is None:
                    stop = (step, str(exc))
                    break
                skipped.append(step)
                opt.zero_grad()
                continue
            opt.step()
        result["skipped"] = skipped
        result["stop"] = stop
        result["steps"] = state.steps
        result["failed_in_a_row"] = state.failed_in_a_row


class RankSafetyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ckpt = spawn_world(checkpoint_worker, WORLD)
        cls.failing = spawn_world(failing_worker, WORLD)

    def test_gathered_state_is_on_rank_0_only(self):
        self.assertEqual([r["gathered_is_none"] for r in self.ckpt], [False, True])

    def test_another_ranks_state_is_refused_and_changes_nothing(self):
        err = self.ckpt[1]["wrong_rank_error"]
        self.assertIsNotNone(err)
        self.assertIn("rank 0's of 2, loaded on rank 1 of 2", err)
        self.assertIn("gathered_state_dict()", err)
        self.assertTrue(self.ckpt[1]["unchanged"])

    def test_another_world_size_is_refused(self):
        for r in self.ckpt:
            self.assertIn("a world of 3 ranks, this one has 2", r["wrong_world_error"])

    def test_every_rank_resumes_bit_for_bit_from_rank_0s_file(self):
        for rank, r in enumerate(self.ckpt):
            self.assertEqual(r["loaded_steps"], RESUME_AT)
            for k, v in r["params"].items():
                self.assertTrue(torch.equal(v, r["resumed_params"][k]), f"rank {rank} {k}")
            for k, v in r["residues"].items():
                np.testing.assert_array_equal(v, r["resumed_residues"][k],
                                              err_msg=f"rank {rank} {k}")
        # The ranks' residues differ: a rank-0-only file of rank 0's own state would not do.
        self.assertFalse(all(np.array_equal(v, self.ckpt[1]["residues"][k])
                             for k, v in self.ckpt[0]["residues"].items()))

    def test_failed_steps_are_skipped_then_the_loop_stops(self):
        for rank, r in enumerate(self.failing):
            # Steps 1 and 2 fail and are skipped; step 3 applies and restarts the count;
            # 4 and 5 fail and are skipped; the third in a row (6) stops the loop.
            self.assertEqual(r["skipped"], [1, 2, 4, 5], f"rank {rank}")
            self.assertIsNotNone(r["stop"], f"rank {rank} trained on")
            step, message = r["stop"]
            self.assertEqual(step, 6)
            self.assertIn("3 steps in a row failed; stopping rather than training on", message)
            self.assertIn("rank(s) [1] failed", message)
            if rank == 1:
                self.assertIn("non-finite gradient", message)
            self.assertEqual(r["steps"], 2)  # steps 0 and 3 were applied
            self.assertEqual(r["failed_in_a_row"], 3)


if __name__ == "__main__":
    unittest.main()
