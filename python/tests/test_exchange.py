"""The hook's exchange on its own: exact bytes on the wire, overlap, accumulation, dtypes.

- ExchangeTest: 2, 4 and 8 Gloo processes exchange two buckets per step, both in
  flight at once, with frames of uneven length per rank (each rank's gradient has
  a different share of zeros) and one step whose frames outgrow the receive
  capacity learnt from the step before (the second-message path). Every rank's
  result equals the rank-order average of every rank's frames decoded one by one
  with the functional API, bit for bit; what crossed the wire (every isend,
  counted here) is the frames plus 8 bytes per message, within 1.15x of the
  frame bytes the exchange must move, and equals the state's transport_bytes.
- NoSyncTest: with ``ddp.no_sync()`` two micro-batches accumulate locally and the
  synchronized step compresses their sum once: averages and residues equal a
  reference that compresses the summed local gradients with fresh compressors.
- BucketKindsTest (one process): float16 and bfloat16 buckets are compressed from
  a float32 copy (equal to the float32 path, rounded back); buckets on another
  device, non-contiguous, empty or of another dtype fail with a clear message,
  and the state is left as it was.
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_exchange
"""

import os
import tempfile
import unittest

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import adacomp
import adacomp.torch as adt
from ddp_test_util import FakeBucket, OneProcessGroupTest, end_spawned, free_port, join_gloo

STEPS = 4
OVERFLOW_STEP = 2  # dense gradients after a step of sparse ones


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(400, 250)   # 100,000 + 250
        self.fc2 = nn.Linear(250, 40)    # 10,000 + 40


def rank_gradient(shape, step, rank, world):
    """A gradient whose share of zeros depends on the rank (uneven frames) and which
    is mostly zero at step OVERFLOW_STEP - 1 and dense at OVERFLOW_STEP."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(shape, generator=g) * (1.0 + 0.1 * rank)
    keep = 1.0 - rank / (2.0 * world)
    if step == OVERFLOW_STEP - 1:
        keep = 0.02
    if step == OVERFLOW_STEP:
        keep = 1.0
    mask = torch.rand(shape, generator=g) < keep
    return x * mask


class SendCounter:
    def __init__(self):
        self.wire_bytes = 0
        self.messages = 0
        self.second_messages = 0
        self.original = dist.isend

    def __call__(self, tensor, dst, group=None, tag=0):
        if tensor.dtype == torch.uint8:
            self.wire_bytes += tensor.numel()
            self.messages += 1
            self.second_messages += tag % 2
        return self.original(tensor, dst, group=group, tag=tag)


def exchange_worker(rank, port, world, outdir):
    join_gloo(rank, port, world)
    counter = SendCounter()
    dist.isend = counter
    out = {"frames": [], "averaged": [], "frame_bytes": 0}
    try:
        torch.manual_seed(0)
        model = Mlp()
        state = adt.AdaCompState(model=model)
        p = dict(model.named_parameters())
        groups = [["fc2.weight", "fc2.bias"], ["fc1.weight", "fc1.bias"]]
        frames = {}
        for name in p:  # record every frame this rank sends, for the reference
            comp = state._by_name[name].compressor
            real = comp.compress

            def recording(g, real=real, name=name):
                f = real(g)
                frames[name] = f
                return f
            comp.compress = recording
        for step in range(STEPS):
            grads = {n: rank_gradient(q.shape, step, rank, world) for n, q in p.items()}
            buckets = [FakeBucket(k, [p[n] for n in names], [grads[n] for n in names],
                                  k == len(groups) - 1) for k, names in enumerate(groups)]
            futures = [state.exchange_bucket(b) for b in buckets]  # both in flight
            results = [f.wait() for f in futures]
            for r in results:
                assert not isinstance(r, adt._Failed), r.error
            out["averaged"].append({n: buckets[k].gradients()[j].clone()
                                    for k, names in enumerate(groups)
                                    for j, n in enumerate(names)})
            out["frames"].append(dict(frames))
            out["frame_bytes"] += sum(len(f) for f in frames.values())
        out["wire_bytes"] = counter.wire_bytes
        out["messages"] = counter.messages
        out["second_messages"] = counter.second_messages
        out["stats"] = state.stats()
    finally:
        dist.isend = counter.original
        torch.save(out, os.path.join(outdir, f"x{world}_{rank}.pt"))
        dist.destroy_process_group()
    end_spawned()


class ExchangeTest(unittest.TestCase):
    def run_world(self, world):
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(exchange_worker, args=(free_port(), world, d), nprocs=world, join=True)
            res = [torch.load(os.path.join(d, f"x{world}_{r}.pt")) for r in range(world)]
        for step in range(STEPS):
            for name in res[0]["averaged"][step]:
                acc = np.zeros(res[0]["averaged"][step][name].numel(), np.float32)
                for r in range(world):
                    adacomp.decompress_add(res[r]["frames"][step][name], acc)
                expect = acc / np.float32(world)
                for r in range(world):
                    got = res[r]["averaged"][step][name].numpy().ravel()
                    np.testing.assert_array_equal(got, expect,
                                                  err_msg=f"P={world} step {step} {name} rank {r}")
        lengths = [r["frame_bytes"] for r in res]
        self.assertGreater(max(lengths), 1.05 * min(lengths), "frames should be uneven")
        ratios = []
        for r in res:
            must_move = (world - 1) * r["frame_bytes"]  # its frames, to each peer
            # Frames plus one 8-byte header per bucket and peer (a second message, where
            # there is one, carries frames only).
            self.assertEqual(r["wire_bytes"], must_move + 8 * (world - 1) * 2 * STEPS)
            self.assertEqual(r["stats"]["transport_bytes"], r["wire_bytes"])
            ratios.append(r["wire_bytes"] / must_move)
            self.assertLessEqual(r["wire_bytes"], 1.15 * must_move, f"P={world}")
        # The dense step outgrew the capacity learnt from the sparse one on every rank.
        self.assertTrue(all(r["second_messages"] > 0 for r in res))
        print(f"P={world}: wire / frame bytes per rank {['%.4f' % x for x in ratios]}")

    def test_two_ranks(self):
        self.run_world(2)

    def test_four_ranks(self):
        self.run_world(4)

    def test_eight_ranks(self):
        self.run_world(8)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)
        self.fc1 = nn.Linear(8 * 6 * 6, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        x = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))


CYCLES = 3


def no_sync_worker(rank, port, outdir):
    join_gloo(rank, port, 2)
    out = {"local_sums": [], "averaged": []}
    try:
        torch.manual_seed(0)
        model = Net()
        local = Net()
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.02)
        state = adt.register(ddp)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(77 + rank)
        for _ in range(CYCLES):
            xs = [torch.randn(16, 1, 8, 8, generator=g) for _ in range(2)]
            ys = [torch.randint(0, 4, (16,), generator=g) for _ in range(2)]
            # This rank's two local gradients, summed, without DDP.
            local.load_state_dict(model.state_dict())
            local.zero_grad()
            for x, y in zip(xs, ys):
                nn.functional.cross_entropy(local(x), y).backward()
            out["local_sums"].append({n: q.grad.clone() for n, q in local.named_parameters()})
            opt.zero_grad()
            with ddp.no_sync():
                nn.functional.cross_entropy(ddp(xs[0]), ys[0]).backward()
            nn.functional.cross_entropy(ddp(xs[1]), ys[1]).backward()
            out["averaged"].append({n: q.grad.clone() for n, q in model.named_parameters()})
            opt.step()
        out["residues"] = state.residues()
        out["steps"] = state.steps
        out["tensor_ids"] = {n: state._by_name[n].tensor_id for n in state.parameter_names()}
        out["bin_sizes"] = {n: state._by_name[n].compressor.bin_size
                            for n in state.parameter_names()}
    finally:
        torch.save(out, os.path.join(outdir, f"ns{rank}.pt"))
        dist.destroy_process_group()
    end_spawned()


class NoSyncTest(unittest.TestCase):
    def test_accumulated_gradient_is_compressed_once(self):
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(no_sync_worker, args=(free_port(), d), nprocs=2, join=True)
            res = [torch.load(os.path.join(d, f"ns{r}.pt")) for r in range(2)]
        self.assertEqual(res[0]["steps"], CYCLES)  # one hook step per synchronized step
        names = list(res[0]["tensor_ids"])
        refs = [{n: adacomp.Compressor(res[0]["local_sums"][0][n].numel(),
                                       bin_size=res[0]["bin_sizes"][n],
                                       tensor_id=res[0]["tensor_ids"][n]) for n in names}
                for _ in range(2)]
        for c in range(CYCLES):
            for n in names:
                acc = np.zeros(res[0]["local_sums"][c][n].numel(), np.float32)
                for r in range(2):
                    frame = refs[r][n].compress(res[r]["local_sums"][c][n].numpy().ravel())
                    adacomp.decompress_add(frame, acc)
                expect = acc / np.float32(2)
                for r in range(2):
                    np.testing.assert_array_equal(res[r]["averaged"][c][n].numpy().ravel(),
                                                  expect, err_msg=f"cycle {c} {n} rank {r}")
        for r in range(2):
            for n in names:
                np.testing.assert_array_equal(res[r]["residues"][n], refs[r][n].residue,
                                              err_msg=f"residue {n} rank {r}")


class BucketKindsTest(OneProcessGroupTest):
    def setUp(self):
        torch.manual_seed(5)
        self.model = Mlp()
        p = dict(self.model.named_parameters())
        self.params = [p["fc2.weight"], p["fc2.bias"]]
        g = torch.Generator().manual_seed(9)
        self.grads = [torch.randn(q.shape, generator=g) for q in self.params]

    def test_half_buckets_equal_the_float32_path_rounded(self):
        for dtype in (torch.float16, torch.bfloat16):
            ref_state = adt.AdaCompState(model=self.model)
            st = adt.AdaCompState(model=self.model)
            grads = [g.to(dtype).float() for g in self.grads]  # what the half bucket holds
            ref = ref_state.reduce_bucket(FakeBucket(0, self.params, grads, True))
            got = st.reduce_bucket(FakeBucket(0, self.params, self.grads, True, dtype))
            self.assertEqual(got.dtype, dtype)
            self.assertTrue(torch.equal(got, ref.to(dtype)), str(dtype))
            for n, r in ref_state.residues().items():
                np.testing.assert_array_equal(st.residues()[n], r, err_msg=f"{dtype} {n}")
            self.assertGreater(st.stats()["end_to_end"]["compression_rate"], 10)

    def assertRefused(self, bucket, words):
        st = adt.AdaCompState(model=self.model)
        before = st.state_dict()
        with self.assertRaises(adt.StepAborted) as cm:
            st.reduce_bucket(bucket)
        for w in words:
            self.assertIn(w, str(cm.exception))
        after = st.state_dict()
        for n in before["params"]:
            self.assertEqual(before["params"][n]["state"], after["params"][n]["state"], n)
        self.assertEqual(after["steps"], 0)
        # The state goes on normally afterwards.
        st.reduce_bucket(FakeBucket(0, self.params, self.grads, True))
        self.assertEqual(st.steps, 1)

    def test_refused_buckets(self):
        b = FakeBucket(0, self.params, self.grads, True)
        b._buf = torch.empty(b._buf.numel(), device="meta")
        self.assertRefused(b, ["on meta", "CPU tensors only"])
        b = FakeBucket(0, self.params, self.grads, True)
        b._buf = torch.zeros(2 * b._buf.numel())[::2]
        self.assertRefused(b, ["not a dense contiguous tensor"])
        b = FakeBucket(0, self.params, self.grads, True)
        b._buf = torch.zeros(0)
        self.assertRefused(b, ["is empty"])
        self.assertRefused(FakeBucket(0, self.params, self.grads, True, torch.float64),
                           ["torch.float64", "float32, float16 and bfloat16"])

    def test_hook_future_fails_for_ddp(self):
        """Through hook(), a refused bucket's future raises when waited for (DDP's
        wait() raises it from backward()), instead of crashing the process."""
        st = adt.AdaCompState(model=self.model)
        b = FakeBucket(0, self.params, self.grads, True, torch.float64)
        fut = adt.hook(st, b)
        with self.assertRaises(Exception) as cm:
            fut.wait()
        self.assertIn("float64", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
