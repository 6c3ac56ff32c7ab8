"""The one call in a script written the way popular image-classification scripts are
(timm's train.py and its kin): SGD with Nesterov momentum (timm's default "sgd"), two
parameter groups (no weight decay on biases and norms), OneCycleLR made before the
call (it moves the learning rate and, by default, the momentum at every step),
gradient accumulation through DDP's no_sync(), clip_grad_value_ after backward, and
a checkpoint of model, optimizer and scheduler written by rank 0. 2 Gloo processes.

Added to the script: the DistributedOptimizer line; changed: the checkpoint asks for
gathered_state_dict() on every rank. Checked: the one call runs Nesterov on each rank
and follows the scheduler's momentum, the clamp is each rank's, the loss falls, the
replicas stay bit-identical, and resuming from rank 0's file equals the run that
never stopped, bit for bit on every rank."""

import os
import unittest

import torch
from torch import nn

import adacomp.torch
from ddp_test_util import ResumedScriptChecks, gloo_rank, spawn_world

WORLD, ITERS, CKPT_AT, ACCUM, CLAMP = 2, 12, 5, 2, 0.05


def make_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, 4))


def get_batch(it, micro, rank):
    """Images whose class is the quadrant holding a bright square, with noise."""
    g = torch.Generator().manual_seed(10_000 * it + 100 * micro + rank)
    y = torch.randint(0, 4, (16,), generator=g)
    x = 0.3 * torch.randn(16, 1, 12, 12, generator=g)
    for i, c in enumerate(y.tolist()):
        r, q = divmod(c, 2)
        x[i, 0, 6 * r + 1:6 * r + 5, 6 * q + 1:6 * q + 5] += 1.0
    return x, y


def train(rank, outdir, stop, resume):
    torch.manual_seed(42)
    model = make_model()
    ddp = nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=0.05, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.2,
                                                    total_steps=ITERS)
    optimizer = adacomp.torch.DistributedOptimizer(ddp, optimizer)  # the added line
    start = 0
    if resume:
        ckpt = torch.load(os.path.join(outdir, "ckpt.pt"))
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start = ckpt["iter"]
    losses, momenta = [], []
    for it in range(start, stop):
        if it == CKPT_AT and not resume:
            state = optimizer.gathered_state_dict()  # every rank (instead of state_dict())
            if rank == 0:
                torch.save({"model": model.state_dict(), "optimizer": state,
                            "scheduler": scheduler.state_dict(), "iter": it},
                           os.path.join(outdir, "ckpt.pt"))
        for micro in range(ACCUM):
            x, y = get_batch(it, micro, rank)
            if micro < ACCUM - 1:
                with ddp.no_sync():
                    (nn.functional.cross_entropy(ddp(x), y) / ACCUM).backward()
            else:
                loss = nn.functional.cross_entropy(ddp(x), y)
                (loss / ACCUM).backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), CLAMP)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        momenta.append((optimizer.param_groups[0]["momentum"],
                        optimizer.hook._local.momentum))
    optimizer.hook.wait_idle()
    return model, optimizer, losses, momenta


def worker(rank, port, outdir):
    with gloo_rank(rank, port, WORLD, outdir) as result:
        model, opt, losses, momenta = train(rank, outdir, ITERS, False)
        result["local"], result["nesterov"] = opt.local, opt.hook.settings.local.nesterov
        result["clamp"] = opt.hook._local.clip_value
        result["losses"], result["momenta"] = losses, momenta
        result["params"] = {k: v.clone() for k, v in model.state_dict().items()}
        result["residues"] = opt.hook.residues()
        torch.distributed.barrier()
        model2, opt2, _, _ = train(rank, outdir, ITERS, True)
        result["resumed"] = {k: v.clone() for k, v in model2.state_dict().items()}
        result["resumed_residues"] = opt2.hook.residues()


class VisionScriptTest(ResumedScriptChecks, unittest.TestCase):
    # BatchNorm's running statistics are each rank's own after its last forward, with or
    # without the hook (DDP broadcasts rank 0's at the next one).
    NOT_REPLICATED = ("running_", "num_batches")

    @classmethod
    def setUpClass(cls):
        cls.results = spawn_world(worker, WORLD)

    def test_nesterov_on_each_rank_with_the_schedulers_momentum_and_the_clamp(self):
        r = self.results[0]
        self.assertTrue(r["local"])
        self.assertTrue(r["nesterov"])
        self.assertEqual(r["clamp"], CLAMP)
        # The hook's momentum at each step's end is the one the groups held at its
        # start, i.e. the scheduler's value one step before (read at the first bucket).
        groups = [m for m, _ in r["momenta"]]
        hooks = [h for _, h in r["momenta"]]
        self.assertEqual(hooks[1:], groups[:-1])
        self.assertGreater(max(groups) - min(groups), 0.05, groups)  # it did move

    def test_it_trains(self):
        for r in self.results:
            first, last = sum(r["losses"][:3]) / 3, sum(r["losses"][-3:]) / 3
            self.assertLess(last, first - 0.3, r["losses"])


if __name__ == "__main__":
    unittest.main()
