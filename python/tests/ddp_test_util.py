"""What the DDP hook tests share: a stand-in for DDP's GradBucket, a free port, a
test case run inside a one-process Gloo group, and a Gloo world of spawned processes
(spawn_world starts the workers; each one runs inside gloo_rank, which saves the
result spawn_world returns and, when the body went well, ends the process)."""

import contextlib
import os
import socket
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_gloo(rank, port, world):
    """A spawned worker's first step: joins its Gloo group on 127.0.0.1:port as rank
    `rank` of `world`, with one torch thread."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def _result_path(outdir, rank):
    return os.path.join(outdir, f"result{rank}.pt")


@contextlib.contextmanager
def gloo_rank(rank, port, world, outdir):
    """A spawned worker's body: joins the group (join_gloo), yields the dict of its
    result to fill, and on the way out, error or not, saves that dict where spawn_world
    reads it and leaves the group."""
    join_gloo(rank, port, world)
    result = {}
    try:
        yield result
    finally:
        torch.save(result, _result_path(outdir, rank))
        dist.destroy_process_group()
    end_spawned()  # the body went well (after an error the exception goes to mp.spawn)


def end_spawned():
    """Ends a spawned worker that went well, as the examples' end_rank does: without an
    interpreter shutdown, which a Gloo worker thread still letting go of a finished
    collective's tensor could abort (python/README.md, "Ending a script")."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn_world(worker, world):
    """Runs worker(rank, port, outdir) on `world` processes (a rank that dies fails the
    caller) and returns the results their gloo_rank blocks saved, in rank order."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as outdir:
        mp.spawn(worker, args=(free_port(), outdir), nprocs=world, join=True)
        return [torch.load(_result_path(outdir, r)) for r in range(world)]


class FakeBucket:
    """What the hook reads of a DDP GradBucket: a flat buffer (of `dtype`) with views
    per parameter."""

    def __init__(self, index, params, grads, last, dtype=torch.float32):
        self._index, self._params, self._last = index, params, last
        self._buf = torch.cat([g.reshape(-1) for g in grads]).to(dtype)
        self._grads, off = [], 0
        for p in params:
            self._grads.append(self._buf[off:off + p.numel()].view_as(p))
            off += p.numel()

    def buffer(self):
        return self._buf

    def parameters(self):
        return self._params

    def gradients(self):
        return self._grads

    def index(self):
        return self._index

    def is_last(self):
        return self._last


class OneProcessGroupTest(unittest.TestCase):
    """A test case whose tests run inside a one-process Gloo group (rank 0 of 1)."""

    @classmethod
    def setUpClass(cls):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(free_port())
        dist.init_process_group("gloo", rank=0, world_size=1)

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()


class ResumedScriptChecks:
    """The checks of a training script run on spawned ranks and then resumed from
    rank 0's checkpoint (test_popular_script, test_vision_script): cls.results holds
    each rank's "params" and "residues" at the end of the uninterrupted run and
    "resumed", "resumed_residues" at the end of the resumed one. Mixed into a
    unittest.TestCase; state_dict keys that NOT_REPLICATED matches (each rank's own,
    as BatchNorm's running statistics) are left out of the replicas' check."""

    NOT_REPLICATED = ()

    def test_replicas_identical(self):
        for k, v in self.results[0]["params"].items():
            if not any(part in k for part in self.NOT_REPLICATED):
                self.assertTrue(torch.equal(v, self.results[1]["params"][k]), k)

    def test_resume_from_rank_0s_file_is_bit_for_bit(self):
        for rank, r in enumerate(self.results):
            for k, v in r["params"].items():
                self.assertTrue(torch.equal(v, r["resumed"][k]), f"rank {rank} {k}")
            for k, v in r["residues"].items():
                self.assertTrue((v == r["resumed_residues"][k]).all(), f"rank {rank} {k}")
