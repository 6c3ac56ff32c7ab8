"""The one call in a script written the way popular GPT training scripts are: two
AdamW parameter groups (weight decay on the matrices only), gradient accumulation
through require_backward_grad_sync, clip_grad_norm_ after backward, the learning
rate set on the groups every iteration (warm-up, then cosine), a checkpoint written
by rank 0, DDP's own bucket sizes (the model spans two buckets, so the clip holds
them: defer.py). 2 Gloo processes.

Added to the script: the DistributedOptimizer line; changed: the checkpoint asks
for gathered_state_dict() (on every rank) instead of state_dict() (on rank 0),
since each rank's residues are its own. Checked: the loss falls, the replicas stay
bit-identical, rank 0 is really given both buckets, and resuming from rank 0's file
equals the run that never stopped, bit for bit on every rank. The same again with
auto=True in the one call (PopularScriptAutoTest), switching both ways after the
checkpoint."""

import functools
import math
import os
import unittest

import torch
from torch import nn

import adacomp.torch
from ddp_test_util import ResumedScriptChecks, gloo_rank, spawn_world

WORLD, ITERS, CKPT_AT, ACCUM, VOCAB, CTX = 2, 12, 6, 2, 64, 16
CLIP = 0.4


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 128)
        self.pos = nn.Parameter(torch.zeros(CTX, 128))
        layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.norm = nn.LayerNorm(128)
        self.head = nn.Linear(128, VOCAB, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((CTX, CTX), float("-inf")), 1))

    def forward(self, idx):
        h = self.blocks(self.tok(idx) + self.pos, mask=self.mask)
        return self.head(self.norm(h))


def get_batch(it, micro, rank):
    """A sequence rule to learn (next = 5 x token + 3 mod VOCAB, one in eight noise)."""
    g = torch.Generator().manual_seed(10_000 * it + 100 * micro + rank)
    x = torch.empty(8, CTX + 1, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (8,), generator=g)
    for t in range(CTX):
        noise = torch.randint(0, VOCAB, (8,), generator=g)
        keep = torch.rand(8, generator=g) > 0.125
        x[:, t + 1] = torch.where(keep, (5 * x[:, t] + 3) % VOCAB, noise)
    return x[:, :-1], x[:, 1:]


def get_lr(it, lr=3e-3, warmup=3):
    if it < warmup:
        return lr * (it + 1) / warmup
    return 0.1 * lr + 0.45 * lr * (1 + math.cos(math.pi * (it - warmup) / (ITERS - warmup)))


# auto=True with a choice that cannot depend on this machine's timings (the codec would
# need under 1 % of dense's time). A step's time reaches the chooser a step late
# (auto.py), so each probe runs 3 steps: dense 1-3, the codec 4-6 (the checkpoint after
# step 6), settled on dense at step 7, the codec probed again at steps 9-11, dense again
# from step 12.
AUTO = {"auto": True, "auto_options": {"probe_steps": 1, "reprobe_every": 2, "drift": 0.0,
                                       "probe_cost": 0.0, "margin": 0.99}}


def train(rank, outdir, start, stop, resume, auto=False):
    """The script: model, groups, the one call, the loop (from `start` to `stop`)."""
    torch.manual_seed(1337)
    model = TinyGPT()
    ddp = nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=3e-3, betas=(0.9, 0.95))
    optimizer = adacomp.torch.DistributedOptimizer(ddp, optimizer,  # the added line
                                                   **(AUTO if auto else {}))
    if resume:
        ckpt = torch.load(os.path.join(outdir, "ckpt.pt"))
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start = ckpt["iter"]
    losses, buckets, norms = [], [], []
    for it in range(start, stop):
        lr = get_lr(it)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if it == CKPT_AT and not resume:
            state = optimizer.gathered_state_dict()  # every rank (instead of state_dict())
            if rank == 0:
                torch.save({"model": model.state_dict(), "optimizer": state, "iter": it},
                           os.path.join(outdir, "ckpt.pt"))
        before = optimizer.hook.buckets
        for micro in range(ACCUM):
            ddp.require_backward_grad_sync = micro == ACCUM - 1
            x, y = get_batch(it, micro, rank)
            loss = nn.functional.cross_entropy(ddp(x).reshape(-1, VOCAB), y.reshape(-1))
            (loss / ACCUM).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        norms.append(norm.item())
        buckets.append(optimizer.hook.buckets - before)
    optimizer.hook.wait_idle()
    return model, optimizer, losses, buckets, norms


def worker(rank, port, outdir, auto=False):
    with gloo_rank(rank, port, WORLD, outdir) as result:
        model, opt, losses, buckets, norms = train(rank, outdir, 0, ITERS, False, auto)
        result["norms"] = norms
        result["losses"] = losses
        result["buckets"] = buckets
        result["local"] = opt.local
        result["params"] = {k: v.clone() for k, v in model.state_dict().items()}
        result["residues"] = opt.hook.residues()
        result["deferred"] = opt.hook.clip_whole
        torch.distributed.barrier()
        if auto:
            result["auto"] = opt.hook.stats()["auto"]
        model2, opt2, _, _, _ = train(rank, outdir, 0, ITERS, True, auto)
        result["resumed"] = {k: v.clone() for k, v in model2.state_dict().items()}
        result["resumed_residues"] = opt2.hook.residues()
        if auto:
            result["resumed_auto"] = opt2.hook.stats()["auto"]


class PopularScriptTest(ResumedScriptChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = spawn_world(worker, WORLD)

    def test_it_runs_the_optimizer_on_each_rank_over_two_buckets(self):
        r = self.results[0]
        self.assertTrue(r["local"])
        self.assertTrue(r["deferred"])  # the clip over the whole gradient
        self.assertEqual(set(r["buckets"][1:]), {2})  # DDP's own buckets after the first step
        # The clip is active after the checkpoint too (else resuming would not test it).
        self.assertGreater(max(r["norms"][CKPT_AT:]), CLIP, r["norms"])

    def test_it_trains(self):
        for r in self.results:
            first, last = sum(r["losses"][:3]) / 3, sum(r["losses"][-3:]) / 3
            self.assertLess(last, first - 0.5, r["losses"])


class PopularScriptAutoTest(PopularScriptTest):
    """The same script with auto=True in the one call: dense steps (each rank's Adam
    step with its residue) and codec steps on both sides of the checkpoint; the resumed
    run makes the same choices and ends bit for bit where the uninterrupted one does."""

    @classmethod
    def setUpClass(cls):
        cls.results = spawn_world(functools.partial(worker, auto=True), WORLD)

    def test_it_switches_both_ways_after_the_checkpoint(self):
        for r in self.results:
            a = r["auto"]
            self.assertEqual((a["dense_steps"], a["codec_steps"]), (6, 6), a)
            steps = [c.split(":")[0] for c in a["choices"]]  # (the times they quote vary)
            self.assertEqual(steps, ["step 7", "step 9", "step 12"], a["choices"])
            self.assertEqual([c.split(":")[0] for c in r["resumed_auto"]["choices"]], steps)
            self.assertEqual(r["resumed_auto"]["dense_steps"], a["dense_steps"])


if __name__ == "__main__":
    unittest.main()
