"""What the DDP hook tests share: a stand-in for DDP's GradBucket, a free port, and a
test case run inside a one-process Gloo group."""

import os
import socket
import unittest

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
