"""What the DDP hook tests share: a stand-in for DDP's GradBucket and a free port."""

import socket

import torch


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
