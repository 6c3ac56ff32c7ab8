"""Two-process DistributedDataParallel run on Gloo with the AdaComp hook.

Checks: replicas stay bit-identical; the loss falls; the compression rate the
state reports equals 32 x elements x world / bits of the frames actually
gathered, counted here independently by wrapping torch.distributed.all_gather
and walking the gathered bytes with adacomp.inspect; residues are keyed by
parameter name across DDP's bucket rebuild (several buckets, reordered after
step 1); a checkpoint (model + optimizer + hook state) resumes bit-identically;
a NaN on one rank makes every rank raise instead of hanging; a step that fails
in a late bucket on one rank (NaN gradient, or a frame that fails to decode) is
rolled back on every rank, so skipping it leaves the state bit-identical to a
run that never saw that batch (AtomicStepTest); the same rollbacks on buckets
(the one-process tests of rollbacks without DDP, the ramp, the state's
checks and snapshots are in test_hook_rollback.py).
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_ddp_hook
"""

import copy
import hashlib
import os
import unittest

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import adacomp
import adacomp.torch as adt
from ddp_test_util import gloo_rank, spawn_world

WORLD = 2
STEPS = 40
RESUME_AT = 25
BATCH = 32


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)             # conv weight (72) + bias
        self.fc1 = nn.Linear(8 * 6 * 6, 64)        # fc weight (18432) + bias
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        x = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))


def make_data():
    """A fixed synthetic classification task (same on every rank)."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(WORLD * BATCH * 8, 1, 8, 8, generator=g)
    teacher = torch.randn(64, 4, generator=g)
    y = (x.flatten(1) @ teacher).argmax(1)
    return x, y


def batch_for(x, y, step, rank):
    n = x.shape[0]
    start = ((step * WORLD + rank) * BATCH) % n
    idx = torch.arange(start, start + BATCH) % n
    return x[idx], y[idx]


class SendCounter:
    """Wraps dist.isend inside a with block; counts what this rank sends and walks the
    frames in it.

    The hook's message layout (python/adacomp/torch/transport.py, _Exchange): a message on an
    even tag is an int64 header, then the rank's frames when the header is >= 0;
    a message on an odd tag holds frames only (the rare second message)."""

    def __init__(self):
        self.wire_bytes = 0        # every byte this rank handed to isend
        self.messages = 0
        self.frame_bytes = 0       # frame bytes in those messages
        self.elements = 0
        self.original = dist.isend

    def __enter__(self):
        dist.isend = self
        return self

    def __exit__(self, *exc):
        dist.isend = self.original

    def __call__(self, tensor, dst, group=None, tag=0):
        work = self.original(tensor, dst, group=group, tag=tag)
        if tensor.dtype == torch.uint8:
            data = tensor.numpy()
            self.wire_bytes += data.size
            self.messages += 1
            pos = 0
            if tag % 2 == 0:
                header = int(data[:8].view("<i8")[0])
                pos = 8 if header >= 0 else data.size
            while pos < data.size:
                info = adacomp.inspect(data[pos:])
                pos += info["frame_bytes"]
                self.frame_bytes += info["frame_bytes"]
                self.elements += info["elements"]
        return work


def train(ddp, opt, x, y, rank, steps, first_step, on_grads=None):
    losses = []
    for step in range(first_step, first_step + steps):
        xb, yb = batch_for(x, y, step, rank)
        loss = nn.functional.cross_entropy(ddp(xb), yb)
        opt.zero_grad()
        loss.backward()
        if on_grads is not None:
            on_grads(step)
        opt.step()
        losses.append(loss.item())
    return losses


def full_loss(model, x, y):
    with torch.no_grad():
        return nn.functional.cross_entropy(model(x), y).item()


def worker(rank, port, outdir):
    with gloo_rank(rank, port, WORLD, outdir) as result, SendCounter() as counter:
        # Small buckets: several per step, and DDP reorders them after step 1.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 4096
        x, y = make_data()
        torch.manual_seed(0)
        model = Net()
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.02)
        state = adt.AdaCompState(model=model)
        steps = [[]]  # per step, the parameter names of each bucket the hook saw

        def recording_hook(st, bucket):
            steps[-1].append([st._entry(p).name for p in bucket.parameters()])
            if bucket.is_last():
                steps.append([])
            return adt.hook(st, bucket)

        ddp.register_comm_hook(state, recording_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        result["loss_before"] = full_loss(model, x, y)
        # This rank's own step-0 gradient, without DDP, for the parent to redo the hook's math.
        local = copy.deepcopy(model)
        xb, yb = batch_for(x, y, 0, rank)
        nn.functional.cross_entropy(local(xb), yb).backward()
        result["local_grads0"] = {n: p.grad.clone() for n, p in local.named_parameters()}

        def on_grads(step):
            if step == 0:
                result["averaged_grads0"] = {n: p.grad.clone() for n, p in model.named_parameters()}
        losses = train(ddp, opt, x, y, rank, RESUME_AT, 0, on_grads)
        ckpt = {
            "model": {k: v.clone() for k, v in model.state_dict().items()},
            "opt": opt.state_dict(),
            "hook": state.state_dict(),
        }
        torch.save(ckpt, os.path.join(outdir, f"ckpt{rank}.pt"))
        losses += train(ddp, opt, x, y, rank, STEPS - RESUME_AT, RESUME_AT)
        result["loss_after"] = full_loss(model, x, y)
        result["losses"] = losses
        result["stats"] = state.stats()
        result["counted_frame_bytes"] = counter.frame_bytes
        result["counted_elements"] = counter.elements
        result["counted_wire_bytes"] = counter.wire_bytes
        result["counted_messages"] = counter.messages
        result["elements_per_step"] = sum(p.numel() for p in model.parameters())
        result["params"] = {k: v.clone() for k, v in model.state_dict().items()}
        result["residues"] = state.residues()
        result["names"] = state.parameter_names()
        result["types"] = {n: state.layer_type(n) for n in state.parameter_names()}
        result["bucket_steps"] = steps[:-1]

        # Resume from the checkpoint in a fresh model, optimizer, DDP and state.
        ckpt = torch.load(os.path.join(outdir, f"ckpt{rank}.pt"))
        model2 = Net()
        model2.load_state_dict(ckpt["model"])
        ddp2 = nn.parallel.DistributedDataParallel(model2, bucket_cap_mb=0.02)
        opt2 = torch.optim.SGD(ddp2.parameters(), lr=0.05, momentum=0.9)
        opt2.load_state_dict(ckpt["opt"])
        state2 = adt.register(ddp2)
        state2.load_state_dict(ckpt["hook"])
        train(ddp2, opt2, x, y, rank, STEPS - RESUME_AT, RESUME_AT)
        result["resumed_params"] = {k: v.clone() for k, v in model2.state_dict().items()}
        result["resumed_residues"] = state2.residues()
        result["resumed_steps"] = state2.stats()["steps"]

        # A NaN on rank 1 only: every rank must raise, none may hang.
        xb, yb = batch_for(x, y, 0, rank)
        if rank == 1:
            xb = xb.clone()
            xb[0, 0, 0, 0] = float("nan")
        try:
            nn.functional.cross_entropy(ddp2(xb), yb).backward()
            result["nan_error"] = None
        except Exception as exc:  # noqa: BLE001 - any error type is fine, a hang is not
            result["nan_error"] = f"{type(exc).__name__}: {exc}"


class DdpHookTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = spawn_world(worker, WORLD)

    def test_replicas_identical(self):
        p0, p1 = self.results[0]["params"], self.results[1]["params"]
        self.assertEqual(set(p0), set(p1))
        for k in p0:
            self.assertTrue(torch.equal(p0[k], p1[k]), f"{k} differs between ranks")

    def test_loss_falls(self):
        r = self.results[0]
        self.assertLess(r["loss_after"], 0.7 * r["loss_before"], r)
        losses = r["losses"]
        self.assertLess(np.mean(losses[-5:]), np.mean(losses[:5]))

    def test_compression_rate_matches_gathered_bytes(self):
        peers = WORLD - 1
        # Every rank's frames are in every message it sent (one to each peer).
        own = [r["counted_frame_bytes"] // peers for r in self.results]
        for rank, r in enumerate(self.results):
            st = r["stats"]
            e2e = st["end_to_end"]
            self.assertEqual(st["steps"], STEPS)
            self.assertEqual(r["counted_frame_bytes"] % peers, 0)
            self.assertEqual(r["counted_elements"], r["elements_per_step"] * peers * STEPS)
            # What this rank decoded: every rank's frames, counted by the senders.
            self.assertEqual(e2e["gathered_bytes"], sum(own))
            expect = 32.0 * r["elements_per_step"] * WORLD * STEPS / (8.0 * sum(own))
            self.assertAlmostEqual(e2e["gathered_compression_rate"], expect, places=9)
            # This rank's own frames are exactly what it sent.
            self.assertEqual(e2e["bytes_sent"], own[rank])
            self.assertAlmostEqual(
                e2e["compression_rate"],
                32.0 * r["elements_per_step"] * STEPS / (8.0 * own[rank]), places=9)
            self.assertEqual(e2e["elements"], r["elements_per_step"] * STEPS)
            # No padding: what crossed the wire is the frames plus one 8-byte header
            # per message, and the state reports exactly that.
            self.assertEqual(r["counted_wire_bytes"],
                             r["counted_frame_bytes"] + 8 * r["counted_messages"])
            self.assertEqual(st["transport_bytes"], r["counted_wire_bytes"])
            # Per-type totals add up to the end-to-end ones.
            self.assertEqual(sum(t["bytes_sent"] for t in st["per_type"].values()),
                             e2e["bytes_sent"])
            # AdaComp does compress: far fewer bytes than float32.
            self.assertGreater(e2e["compression_rate"], 10.0)
            self.assertGreater(st["per_type"]["fc"]["compression_rate"],
                               st["per_type"]["conv"]["compression_rate"])

    def test_residues_keyed_by_parameter_across_bucket_rebuild(self):
        r = self.results[0]
        self.assertEqual(r["names"], ["conv.weight", "conv.bias", "fc1.weight", "fc1.bias",
                                      "fc2.weight", "fc2.bias"])
        self.assertEqual(r["types"], {"conv.weight": "conv", "conv.bias": "other",
                                      "fc1.weight": "fc", "fc1.bias": "other",
                                      "fc2.weight": "fc", "fc2.bias": "other"})
        steps = r["bucket_steps"]
        self.assertEqual(len(steps), STEPS)
        for buckets in steps:  # every parameter exactly once per step
            self.assertEqual(sorted(n for b in buckets for n in b), sorted(r["names"]))
        self.assertGreater(len(steps[-1]), 1)
        self.assertNotEqual(steps[0], steps[1])  # DDP rebuilt its buckets after step 1
        for name, res in r["residues"].items():
            self.assertEqual(res.size, r["params"][name].numel(), name)
            self.assertTrue(np.all(np.isfinite(res)))
        self.assertTrue(any(np.abs(res).max() > 0 for res in r["residues"].values()))

    def test_checkpoint_resumes_bit_identically(self):
        for r in self.results:
            for k, v in r["params"].items():
                self.assertTrue(torch.equal(v, r["resumed_params"][k]), f"{k} after resume")
            for k, v in r["residues"].items():
                np.testing.assert_array_equal(v, r["resumed_residues"][k], err_msg=k)
            self.assertEqual(r["resumed_steps"], STEPS)

    def test_first_step_equals_functional_api(self):
        """Step 0 (zero residues): the bucket DDP hands back is the rank-order sum of
        every rank's decoded frame divided by the world size, bit for bit."""
        names = self.results[0]["names"]
        types = self.results[0]["types"]
        for name in names:
            bin_size = 50 if types[name] == "conv" else 500
            total = None
            for r in self.results:
                g = r["local_grads0"][name].numpy().ravel()
                frame = adacomp.Compressor(g.size, bin_size=bin_size).compress(g)
                out = np.zeros(g.size, np.float32) if total is None else total
                adacomp.decompress_add(frame, out)
                total = out
            expect = total / np.float32(WORLD)
            for rank, r in enumerate(self.results):
                got = r["averaged_grads0"][name].numpy().ravel()
                np.testing.assert_array_equal(got, expect, err_msg=f"{name} on rank {rank}")

    def test_nan_on_one_rank_fails_every_rank(self):
        for rank, r in enumerate(self.results):
            self.assertIsNotNone(r["nan_error"], f"rank {rank} did not raise")
        self.assertIn("rank(s) [1]", self.results[0]["nan_error"])


FAIL_NAN_AT = 4       # rank 1's conv.weight gradient gets a NaN at this step
FAIL_FRAME_AT = 7     # rank 1 sends a corrupt fc1.bias frame at this step
ATOMIC_STEPS = 10


def digest(model, opt, state):
    """SHA-256 of the weights, the optimizer state and the hook's state_dict."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.numpy().tobytes())
    for k, v in sorted(opt.state_dict()["state"].items()):
        h.update(str(k).encode())
        h.update(v["momentum_buffer"].numpy().tobytes())
    sd = state.state_dict()
    for name in sorted(sd["params"]):
        h.update(name.encode())
        h.update(sd["params"][name]["state"])
    h.update(repr((sd["steps"], sd["buckets"], sd["transport_bytes"],
                   sorted((t, sorted(c.items())) for t, c in sd["totals"].items()))).encode())
    return h.hexdigest()


def atomic_run(rank, x, y, fail):
    """Trains ATOMIC_STEPS batches. fail=True: rank 1 fails at FAIL_NAN_AT and FAIL_FRAME_AT,
    every rank catches the error and skips the step; fail=False: those batches are skipped
    without running them at all."""
    torch.manual_seed(0)
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.02)
    state = adt.register(ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    out = {"errors": {}, "buckets_before_failure": {}, "step_errors": {},
           "initial_digest": digest(model, opt, state)}
    hook_calls = []

    def nan_in_conv_grad(g):  # conv.weight's gradient is the last one backward computes
        if fail and rank == 1 and cur_step[0] == FAIL_NAN_AT:
            g = g.clone()
            g.view(-1)[5] = float("nan")
        return g
    cur_step = [0]
    model.conv.weight.register_hook(nan_in_conv_grad)
    fc1_bias = state._by_name["fc1.bias"].compressor
    real_compress = fc1_bias.compress

    def corrupt_compress(g):
        frame = real_compress(g)
        if fail and rank == 1 and cur_step[0] == FAIL_FRAME_AT:
            frame = bytearray(frame)
            frame[-5] ^= 0x40  # a payload bit: the checksum no longer matches
            frame = bytes(frame)
        return frame
    fc1_bias.compress = corrupt_compress
    real_exchange = state.exchange_bucket

    def counting_exchange(bucket):
        hook_calls.append((cur_step[0], bucket.index()))
        return real_exchange(bucket)
    state.exchange_bucket = counting_exchange

    for step in range(ATOMIC_STEPS):
        cur_step[0] = step
        if not fail and step in (FAIL_NAN_AT, FAIL_FRAME_AT):
            continue
        xb, yb = batch_for(x, y, step, rank)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(xb), yb)
        try:
            loss.backward()
        except RuntimeError as exc:  # what python/README.md tells users to do
            if state.step_error is None:
                raise
            out["errors"][step] = f"{type(exc).__name__}: {exc}"
            err = state.step_error  # pickling would drop __cause__: keep what the test needs
            out["step_errors"][step] = (type(err).__name__, err.failed_ranks,
                                        type(err.__cause__).__name__)
            out["buckets_before_failure"][step] = sum(1 for s, _ in hook_calls if s == step) - 1
            opt.zero_grad()
            continue
        opt.step()
        if step == FAIL_NAN_AT + 1:
            out["step_error_after_success"] = state.step_error
    out["digest"] = digest(model, opt, state)
    out["params"] = {k: v.clone() for k, v in model.state_dict().items()}
    out["residues"] = state.residues()
    out["steps"] = state.stats()["steps"]
    out["aborted_steps"] = state.aborted_steps
    out["last_stats"] = {n: e.compressor.last_stats for n, e in state._by_name.items()}
    return out


def atomic_worker(rank, port, outdir):
    with gloo_rank(rank, port, WORLD, outdir) as result:
        dist._DEFAULT_FIRST_BUCKET_BYTES = 4096
        x, y = make_data()
        result["failing"] = atomic_run(rank, x, y, fail=True)
        result["skipping"] = atomic_run(rank, x, y, fail=False)


class AtomicStepTest(unittest.TestCase):
    """A failed step, caught and skipped, equals never having run that batch."""

    @classmethod
    def setUpClass(cls):
        cls.results = spawn_world(atomic_worker, WORLD)

    def test_every_rank_raises_at_the_failed_steps_only(self):
        for rank, r in enumerate(self.results):
            errors = r["failing"]["errors"]
            self.assertEqual(sorted(errors), [FAIL_NAN_AT, FAIL_FRAME_AT], f"rank {rank}")
            for step, msg in errors.items():
                self.assertIn("rolled back", msg, f"rank {rank} step {step}")
            self.assertIn("rank(s) [1]", errors[FAIL_NAN_AT])
            self.assertIn("rank 1,", errors[FAIL_FRAME_AT])  # every rank decodes rank 1's frame
            self.assertIn("fc1.bias", errors[FAIL_FRAME_AT])
            self.assertEqual(r["skipping"]["errors"], {})
        for rank, r in enumerate(self.results):
            errs = r["failing"]["step_errors"]
            # Rank 0's own cause: none (it learnt of rank 1's failure in the exchange).
            nan_cause = "ValueError" if rank == 1 else "NoneType"
            self.assertEqual(errs[FAIL_NAN_AT], ("StepAborted", [1], nan_cause), f"rank {rank}")
            # A frame that fails to decode fails every rank after the exchange.
            self.assertEqual(errs[FAIL_FRAME_AT], ("StepAborted", None, "FrameError"))
            self.assertIsNone(r["failing"]["step_error_after_success"])
        self.assertIn("non-finite", self.results[1]["failing"]["errors"][FAIL_NAN_AT])
        self.assertIn("conv.weight", self.results[1]["failing"]["errors"][FAIL_NAN_AT])

    def test_failures_came_after_other_buckets_were_reduced(self):
        """Otherwise the rollback would have nothing to undo."""
        for r in self.results:
            for step, n in r["failing"]["buckets_before_failure"].items():
                self.assertGreater(n, 0, f"step {step}")

    def test_state_equals_a_run_without_those_batches(self):
        for rank, r in enumerate(self.results):
            a, b = r["failing"], r["skipping"]
            self.assertEqual(a["aborted_steps"], 2)
            self.assertEqual(b["aborted_steps"], 0)
            self.assertEqual(a["steps"], ATOMIC_STEPS - 2)
            self.assertEqual(a["steps"], b["steps"])
            for k in b["params"]:
                self.assertTrue(torch.equal(a["params"][k], b["params"][k]), f"rank {rank} {k}")
            for k in b["residues"]:
                np.testing.assert_array_equal(a["residues"][k], b["residues"][k],
                                              err_msg=f"rank {rank} {k}")
            self.assertEqual(a["last_stats"], b["last_stats"])
            self.assertEqual(a["digest"], b["digest"], f"rank {rank}")
        # Training did move on after the failures, and the replicas agree.
        failing = self.results[0]["failing"]
        self.assertNotEqual(failing["digest"], failing["initial_digest"])
        for k, v in self.results[0]["failing"]["params"].items():
            self.assertTrue(torch.equal(v, self.results[1]["failing"]["params"][k]), k)


if __name__ == "__main__":
    unittest.main()
