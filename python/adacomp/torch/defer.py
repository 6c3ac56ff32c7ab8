"""Whole-gradient clipping with a local optimizer over DDP's normal buckets.

torch's clip_grad_norm_ scales the whole gradient by one factor from its L2 norm
over every parameter. With a local optimizer each rank clips its own gradient
before its moments (local_optimizer.py), and a bucket's local step is compressed
when DDP hands the bucket over: with several buckets the norm is not known then.
So while a whole-gradient clip is on, the hook holds each bucket until DDP hands
over the last one (returning a future that completes later: DDP waits for every
bucket's future only at the end of backward), computes this rank's norm over all
of them, and then compresses and exchanges them in order with that one factor.
The cost: compression no longer overlaps backward.

Also here: _after_ddp, a callback after DDP's own end of backward."""

import math

import torch

from .bucket import _layout
from .local_optimizer import squared_norm


class _Deferred:
    def __init__(self):
        self.held = []  # (bucket, placeholder future) of the step so far
        self.seen = set()

    def hold(self, state, bucket, launch):
        """Holds ``bucket``; at the last one, clips and launches every held bucket
        (launch(bucket) -> its future). Returns the bucket's placeholder future."""
        ids = {id(p) for p in bucket.parameters()}
        if ids & self.seen:  # a backward that never reached its last bucket: drop it
            self.held, self.seen = [], set()
        self.seen |= ids
        fut = torch.futures.Future()
        self.held.append((bucket, fut))
        if not bucket.is_last():
            return fut
        held, self.held, self.seen = self.held, [], set()
        local = state._local
        total = 0.0
        for b, _ in held:
            buf = b.buffer()
            arr = (buf if buf.dtype == torch.float32 else buf.float()).numpy()
            total += squared_norm(arr, _layout(b, buf, state._entry), local.clip_value)
        norm = math.sqrt(total)
        local.last_norm = norm
        local.step_factor = min(1.0, local.clip_norm / (norm + 1e-6))
        try:
            for b, f in held:
                launch(b).then(lambda done, f=f: f.set_result(done.value()))
        finally:
            local.step_factor = None
        return fut


def _after_ddp(fn):
    """Runs fn after DDP's own end-of-backward work (which writes .grad): a callback
    queued now, from the last bucket's hook, runs before DDP's finalizer (queued
    right after this hook returns); the callback it queues in turn runs after it."""
    engine = torch.autograd.Variable._execution_engine
    engine.queue_callback(lambda: engine.queue_callback(fn))
