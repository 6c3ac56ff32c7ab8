"""The messages of one bucket between the ranks (_Exchange): the 8-byte header, the
tags, the receive capacity every rank agrees on, and the overflow message.

Phase 0 is the all-gather of frames, or the reduce-scatter's pieces (a message of its
own for each peer); phase 1 the reduce-scatter's owners' messages (slices.py)."""

import numpy as np
import torch
import torch.distributed as dist

from .. import FrameError

# Message of one rank for one bucket, sent to every peer: an int64 header, then the
# rank's frames (its parameters' frames, concatenated in bucket order).
#   header >= 0: that many frame bytes follow in this message;
#   header == -1: the rank failed in this bucket (or skips it: its step failed); no frames;
#   header <= -2: the frames, -header - 2 bytes, are longer than the peers' receive
#                 capacity for this slot; they follow as a second message (tag + 1).
# Every rank computes the same capacity per slot from the lengths it saw in the slot's
# previous exchange (_Exchange.update_bound), so the second message is rare.
_HEADER = 8
_FAILED = -1


def _tag(index, second=False, phase=0):
    return 0x5AC0000 + 0x100000 * phase + 2 * index + (1 if second else 0)


class _Exchange:
    """One bucket's messages in flight, from _launch to _finish."""

    def __init__(self, state, bucket, step, skipped, phase=0):
        self.state = state
        self.index = bucket.index()
        self.is_last = bucket.is_last()
        self.params = bucket.parameters()
        self.phase = phase
        # The slot: capacity, receive buffers and tensors are kept per (bucket, phase).
        self.slot = self.index if phase == 0 else (self.index, phase)
        self.by_slices = False  # the reduce-scatter's pieces: payload is a list per rank
        # auto's dense step: the process group's all-reduce of the bucket (dense_sum.py)
        self.dense_sum = False
        self.sum_work = None
        self.step = step
        self.future = torch.futures.Future()
        self.stats = []
        self.layout = []
        self.buf = self.work = None
        self.error = None
        # A dense warm-up step of local Adam: the averaged gradient becomes the Adam step
        # (_LocalOptimizer.average_step) once decoded.
        self.average_step = False
        self.payload = None
        self.skipped = skipped  # the rest of a failed step: sent as failed, not compressed
        self.sent_bytes = 0
        group = state.process_group if state.process_group is not None else dist.group.WORLD
        self.group = group
        self.world = dist.get_world_size(group) if dist.is_initialized() else 1
        self.rank = dist.get_rank(group) if dist.is_initialized() else 0
        self.tensors = []
        self.sends = []
        self.recvs = []

    def _global(self, r):
        if self.group is dist.group.WORLD or self.group is None:
            return r
        return dist.distributed_c10d._get_global_rank(self.group, r)

    def _first_capacity(self):
        """Room every rank computes alike from the bucket's parameters: float32 frames of
        the bucket (pieces: of one slice of every parameter)."""
        params = self.params
        if self.by_slices:
            w = self.world
            return _HEADER + sum(4 * (p.numel() + w - 1) // w + 64 for p in params) + 256
        return _HEADER + 4 * sum(p.numel() for p in params) + 64 * len(params) + 256

    def _message(self, payload, cap):
        """(message, overflow message or None) carrying payload (None: failed)."""
        n = -1 if payload is None else len(payload)
        overflow = n >= 0 and _HEADER + n > cap
        head = np.array([-n - 2 if overflow else (_FAILED if n < 0 else n)],
                        dtype="<i8").view(np.uint8)
        if n >= 0 and not overflow:
            msg = torch.empty(_HEADER + n, dtype=torch.uint8)
            a = msg.numpy()
            a[:_HEADER] = head
            a[_HEADER:] = np.frombuffer(payload, dtype=np.uint8)
        else:
            msg = torch.from_numpy(head.copy())
        second = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if overflow else None
        return msg, second

    def post(self):
        """Sends this rank's message to every peer and posts the receives."""
        mine = self.payload[self.rank] if self.by_slices and self.payload is not None \
            else self.payload
        n = -1 if mine is None else len(mine)
        self.own_header = _FAILED if n < 0 else n
        self.own = mine
        if self.world == 1:
            return
        state = self.state
        cap = state._capacity.get(self.slot)
        if cap is None:
            # First exchange of the slot (pieces: every exchange, as the peers' messages
            # differ, so no rank sees what another would bound): from what every rank
            # knows alike (its parameters), even a rank that failed already.
            cap = self._first_capacity()
            if not self.by_slices:
                state._capacity[self.slot] = cap
        self.capacity = cap
        # Receive buffers persist per (slot, peer) and are reused while large enough.
        bufs = state._recv_buffers.get(self.slot)
        if bufs is None or len(bufs) != self.world or bufs[0].numel() != cap:
            bufs = [torch.empty(cap, dtype=torch.uint8) for _ in range(self.world)]
            state._recv_buffers[self.slot] = bufs
        self.recv_bufs = bufs
        g = None if self.group is dist.group.WORLD else self.group
        tag = _tag(self.index, phase=self.phase)
        for k in range(1, self.world):
            src = (self.rank - k) % self.world
            self.recvs.append((src, dist.irecv(bufs[src], self._global(src), group=g, tag=tag)))
        # Every tensor handed to the process group stays referenced by the state (see
        # _keep_comm_tensors_past_exit): never freed by a Gloo thread.
        self.tensors = list(bufs)
        shared = None if self.by_slices else self._message(self.payload, cap)
        for k in range(1, self.world):
            dst = (self.rank + k) % self.world
            if self.by_slices:
                msg, second = self._message(
                    None if self.payload is None else self.payload[dst], cap)
            else:
                msg, second = shared
            if k == 1 or self.by_slices:
                self.tensors += [msg] + ([second] if second is not None else [])
            self.sends.append(dist.isend(msg, self._global(dst), group=g, tag=tag))
            self.sent_bytes += msg.numel()
            if second is not None:
                self.sends.append(dist.isend(second, self._global(dst), group=g,
                                             tag=_tag(self.index, True, self.phase)))
                self.sent_bytes += second.numel()
        state._comm_tensors[self.slot] = self.tensors

    def receive(self):
        """Waits for every peer's message: [(rank, header, memoryview of its frames)]."""
        own = memoryview(self.own if self.own is not None else b"")
        if self.world == 1:
            return [(0, self.own_header, own)]
        got = {self.rank: (self.own_header, own)}
        g = None if self.group is dist.group.WORLD else self.group
        late = []
        for src, w in self.recvs:
            w.wait()
            a = self.recv_bufs[src].numpy()
            h = int(a[:_HEADER].view("<i8")[0])
            if h >= 0:
                if _HEADER + h > a.size:
                    raise FrameError(f"rank {src}, bucket {self.index}: message header says "
                                     f"{h} bytes, the receive buffer holds {a.size - _HEADER}")
                got[src] = (h, memoryview(a)[_HEADER:_HEADER + h])
            elif h == _FAILED:
                got[src] = (h, memoryview(b""))
            else:
                n = -h - 2
                if n > 1 << 34:
                    raise FrameError(f"rank {src}, bucket {self.index}: message header says "
                                     f"{n} bytes")
                t = torch.empty(n, dtype=torch.uint8)
                self.tensors.append(t)
                late.append((src, n, t, dist.irecv(t, self._global(src), group=g,
                                                   tag=_tag(self.index, True, self.phase))))
        for src, n, t, w in late:
            w.wait()
            got[src] = (n, memoryview(t.numpy()))
        for w in self.sends:
            w.wait()
        return [(r, *got[r]) for r in range(self.world)]

    def retire(self):
        """Drops the references to the works (the tensors stay with the state)."""
        self.sends, self.recvs = [], []

    def update_bound(self, lengths):
        """Receive capacity of the slot for its next exchange: the same on every rank
        (every rank sees every length), about 1.25 x the longest message this time.
        Not for pieces (each rank sees other lengths)."""
        if self.by_slices:
            return
        need = 8 + max(lengths)
        want = need + need // 4 + 256
        cap = self.state._capacity.get(self.slot)
        if cap is None or want > cap or cap > 4 * want:
            self.state._capacity[self.slot] = want
