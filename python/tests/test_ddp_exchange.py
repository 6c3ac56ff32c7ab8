"""The hook's exchanges side by side: exchange="reduce-scatter" and "auto" train the
same weights and residues as the all-gather, bit for bit, on 3 Gloo processes and
several buckets per step; float16 sums keep the replicas identical; with dense
frames auto moves the buckets to the reduce-scatter after the first step; a piece
damaged in transit fails the step on every rank (its owner names the sender), and the step is
rolled back (the state as if that batch was never seen).
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_ddp_exchange
"""

import unittest
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import adacomp.torch as adt
import adacomp.torch.slices as slices_mod
from adacomp import _adacomp
import adacomp.torch.state as hook_state
from ddp_test_util import gloo_rank, spawn_world

WORLD = 3
STEPS = 6
CONFIGS = {
    "allgather": dict(exchange="allgather"),
    "reduce-scatter": dict(exchange="reduce-scatter"),
    "auto": dict(exchange="auto"),
    "rs-fp16": dict(exchange="reduce-scatter", summed_values="fp16"),
    "auto-dense": dict(exchange="auto", codec="dense"),
    "ag-dense": dict(exchange="allgather", codec="dense"),
}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)
        self.fc1 = nn.Linear(8 * 6 * 6, 64)
        self.fc2 = nn.Linear(64, 2)  # a bias of fewer elements than ranks: an empty slice

    def forward(self, x):
        x = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 2, (8,), generator=g)


def run(rank, name, damage_at=None):
    torch.manual_seed(0)
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.02)
    state = adt.AdaCompState(model=model, **CONFIGS[name])
    ddp.register_comm_hook(state, adt.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    original = hook_state._cut
    errors = []
    for step in range(STEPS):
        if step == damage_at and rank == 1:
            def damaged(frames, world):
                out = original(frames, world)
                out[0] = out[0][:5] + bytes([out[0][5] ^ 0x40]) + out[0][6:]
                return out
            hook_state._cut = damaged
        x, y = batch(step, rank)
        try:
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        except Exception as exc:  # noqa: BLE001 - the damaged step
            errors.append(str(exc))
        finally:
            hook_state._cut = original
        opt.zero_grad()
    return {
        "params": {k: v.clone() for k, v in model.state_dict().items()},
        "residues": state.residues(),
        "steps": state.stats()["steps"],
        "by_slices": dict(state._by_slices_next),
        "errors": errors,
    }


def worker(rank, port, outdir):
    with gloo_rank(rank, port, WORLD, outdir) as out:
        dist._DEFAULT_FIRST_BUCKET_BYTES = 4096  # several buckets per step
        for name in CONFIGS:
            out[name] = run(rank, name)
        out["damaged"] = run(rank, "reduce-scatter", damage_at=3)


class HookExchangeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.r = spawn_world(worker, WORLD)

    def same(self, a, b, what):
        self.assertEqual(set(a), set(b), what)
        for k in a:
            x, y = np.asarray(a[k]), np.asarray(b[k])
            self.assertTrue(x.shape == y.shape and x.tobytes() == y.tobytes(),
                            f"{what}: {k} differs")

    def test_reduce_scatter_and_auto_equal_the_allgather_bit_for_bit(self):
        for rank in range(WORLD):
            ag = self.r[rank]["allgather"]
            self.assertEqual(ag["steps"], STEPS)
            for name in ("reduce-scatter", "auto"):
                got = self.r[rank][name]
                self.assertEqual(got["steps"], STEPS, name)
                self.same(got["params"], ag["params"], f"rank {rank} {name} weights")
                self.same(got["residues"], ag["residues"], f"rank {rank} {name} residues")
            self.same(self.r[rank]["auto-dense"]["params"], self.r[rank]["ag-dense"]["params"],
                      f"rank {rank} dense auto")

    def test_float16_sums_keep_the_replicas_identical(self):
        for rank in range(1, WORLD):
            self.same(self.r[rank]["rs-fp16"]["params"], self.r[0]["rs-fp16"]["params"],
                      f"rank {rank} against rank 0")
        differ = any(not torch.equal(a, b) for a, b in zip(
            self.r[0]["rs-fp16"]["params"].values(), self.r[0]["reduce-scatter"]["params"].values()))
        self.assertTrue(differ, "binary16 sums should round something")

    def test_auto_takes_the_reduce_scatter_for_dense_frames_only(self):
        for rank in range(WORLD):
            dense = self.r[rank]["auto-dense"]["by_slices"]
            self.assertTrue(dense and all(dense.values()), dense)
            sparse = self.r[rank]["auto"]["by_slices"]
            self.assertTrue(sparse and not any(sparse.values()), sparse)

    def test_a_damaged_piece_fails_the_step_everywhere_and_rolls_it_back(self):
        for rank in range(WORLD):
            d = self.r[rank]["damaged"]
            self.assertEqual(len(d["errors"]), 1, d["errors"])
            # Rank 0 owns the damaged piece's slice: it fails and says why; the others
            # learn of it from rank 0's failure marker.
            self.assertIn("rank(s) [0] failed", d["errors"][0])
            if rank == 0:
                self.assertIn("rank 1's piece for rank 0", d["errors"][0])
            self.assertEqual(d["steps"], STEPS - 1)
            self.assertFalse(torch.equal(d["params"]["fc1.weight"],
                                         self.r[rank]["reduce-scatter"]["params"]["fc1.weight"]))


class AutoEstimateTest(unittest.TestCase):
    """auto's estimate in the hook: the bound C++ EstimateReceive against its documented
    formula, and the bucket's sum (slices.py _estimate), which must be the exact figure
    whenever it chooses the reduce-scatter."""

    P = 4

    def formula(self, averaged, wire, by_slices, h, slices):
        p = self.P
        extra = p * (p - 1) * h
        frames = max(0.0, wire - extra) if by_slices else wire
        pieces = wire if by_slices else wire + extra
        return (frames * (p - 1) / p,
                pieces * (p - 1) / (p * p) + slices * (p - 1) / p + 8 * (p - 1))

    def test_the_binding_follows_the_formula(self):
        p, n, tid = self.P, 4000, 7
        rng = np.random.default_rng(3)
        averaged = np.zeros(n, np.float32)
        averaged[rng.choice(n, 60, replace=False)] = rng.standard_normal(60)
        wire = 50_000
        # The empty piece's header h, read from the reduce-scatter's own frames figure.
        ag_rs, _ = _adacomp._estimate_receive(averaged, tid, p, True, wire, exact=True)
        h = (wire - ag_rs * p / (p - 1)) / (p * (p - 1))
        self.assertEqual(h, round(h))
        self.assertTrue(10 <= h <= 40, h)
        for fp16 in (False, True):
            slices = _adacomp._summed_slices_bytes(averaged, tid, p, fp16)
            for by_slices in (False, True):
                got = _adacomp._estimate_receive(averaged, tid, p, by_slices, wire, fp16,
                                                 exact=True)
                want = self.formula(averaged, wire, by_slices, h, slices)
                self.assertAlmostEqual(got[0], want[0], places=6)
                self.assertAlmostEqual(got[1], want[1], places=6)
        # Not exact: a floor of 4 (float16: 2) bytes per non-zero average, kept when it
        # already costs more than the all-gather.
        dense = rng.standard_normal(n).astype(np.float32)
        for fp16, per in ((False, 4), (True, 2)):
            got = _adacomp._estimate_receive(dense, tid, p, False, 2_000, fp16)
            want = self.formula(dense, 2_000, False, h, per * n)
            self.assertGreaterEqual(got[1], got[0])
            self.assertAlmostEqual(got[1], want[1], places=6)

    def test_the_bucket_sum_is_exact_where_it_picks_the_reduce_scatter(self):
        p = self.P
        rng = np.random.default_rng(5)
        # Tensor a: dense averages, few frame bytes (its floor settles it: all-gather);
        # tensor b: few averages, many frame bytes (reduce-scatter). Together b wins.
        a = rng.standard_normal(3000).astype(np.float32)
        b = np.zeros(20000, np.float32)
        b[:30] = 1.0
        work = torch.from_numpy(np.concatenate([a, b]))
        ea = SimpleNamespace(tensor_id=0)
        eb = SimpleNamespace(tensor_id=1)
        ex = SimpleNamespace(world=p, work=work, by_slices=False,
                             layout=[(ea, 0, a.size), (eb, a.size, b.size)],
                             wire_bytes={id(ea): 3_000, id(eb): 400_000})
        floor_a = _adacomp._estimate_receive(a, 0, p, False, 3_000)
        self.assertGreaterEqual(floor_a[1], floor_a[0])  # a kept its floor
        exact = [_adacomp._estimate_receive(v, t, p, False, w, exact=True)
                 for v, t, w in ((a, 0, 3_000), (b, 1, 400_000))]
        ag, rs = slices_mod._estimate(ex, False)
        self.assertAlmostEqual(ag, exact[0][0] + exact[1][0], places=6)
        self.assertAlmostEqual(rs, exact[0][1] + exact[1][1] + 8 * (p - 1), places=6)
        self.assertLess(rs, ag)


if __name__ == "__main__":
    unittest.main()
