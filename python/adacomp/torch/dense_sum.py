"""auto's dense step (AdaCompState(auto=True) when auto chose dense): the bucket goes
through the process group's own all-reduce, as DDP without a hook sends it, instead
of the hook's frames.

Each rank writes what it sends over its bucket (its working copy): the gradient with
the residue added, or with a local optimizer its step (SGD's velocity, Adam's step)
with the residue added; a parameter this rank left unused sends zeros and keeps its
residue. Nothing else is done to it before the all-reduce (no frame; a pass only for
what a local optimizer needs: its step, and the one call's norm of each rank's
gradient), and after it one pass checks the sum and one divides it.

Failures stay atomic and agreed without a message of their own: a rank that failed
the bucket (or skips it, its step failed already) all-reduces a bucket of NaN
instead, and a non-finite gradient is non-finite in the sum too. Every rank holds
the same sum, so every rank finds the same non-finite element after the all-reduce
and fails the step alike; the residues are emptied only when the step is applied
(auto.py's commit)."""

import torch
import torch.distributed as dist

from .. import _adacomp
from .bucket import _zero_gaps

_NO_BINS = [0] * 17


def _stats(n):
    """A parameter's compress statistics for a dense step: every element, 4 bytes each."""
    return {"elements": n, "frame_bytes": 4 * n, "selected": n, "bins": 0,
            "bin_histogram": _NO_BINS}


def fill(st, ex, arr):
    """Writes this rank's part of state st's dense step over the working copy arr (the
    bucket, float32), for every parameter of ex.layout; returns None, or the error
    (the bucket is then sent as NaN by post())."""
    local = st._local
    try:
        if local is not None:
            local.clip(arr, ex.layout, ex.index)
        used = None if st._usage is None else st._usage.take(ex.layout)
        _zero_gaps(arr, ex.layout)
        for e, off, n in ex.layout:
            g = arr[off:off + n]
            ex.stats.append(_stats(n))
            if used is not None and id(e.param) not in used:
                g[:] = 0  # unused here: nothing of it is sent, its residue stays whole
                continue
            if local is not None:
                g[:] = local.prepare(e, g)  # the step, in the gradient's place
            st._auto.fold(e, g)
    except Exception as exc:  # noqa: BLE001 - still join the all-reduce: peers fail, not hang
        return exc
    return None


def post(ex):
    """Starts the bucket's all-reduce (a sum) on the process group: the working copy,
    or a bucket of NaN when this rank failed or skips it."""
    if ex.error is None and not ex.skipped:
        t = ex.work
    else:
        n = ex.buf.numel() if ex.buf is not None else sum(p.numel() for p in ex.params)
        t = torch.full((n,), float("nan"), dtype=torch.float32)
    if ex.world == 1:
        return
    g = None if ex.group is dist.group.WORLD else ex.group
    ex.sum_work = dist.all_reduce(t, group=g, async_op=True)
    # Kept by the state until the slot's next exchange (worker.py says why).
    ex.tensors = [t]
    ex.state._comm_tensors[ex.slot] = ex.tensors
    # What a ring all-reduce sends from each rank: 2 (P - 1) / P of the bucket.
    ex.sent_bytes = 2 * (ex.world - 1) * 4 * t.numel() // ex.world


def wait(ex):
    """Waits for the all-reduce (raises what it raised)."""
    if ex.sum_work is not None:
        ex.sum_work.wait()


def average(ex, counters):
    """Divides the all-reduced sum by the world size, checks it, writes it over the
    bucket (ex.buf) and counts the step; raises ValueError naming the first
    non-finite element (the same one on every rank)."""
    arr = ex.work.numpy()
    bad = _adacomp.find_non_finite(arr)
    if bad is not None:
        where = "outside every parameter"
        for e, off, n in ex.layout:
            if off <= bad < off + n:
                where = f"parameter {e.name!r}, element {bad - off}"
                break
        raise ValueError(f"the all-reduced dense step is not finite ({float(arr[bad])}, "
                         f"{where}): a rank's gradient was not finite, or a rank failed "
                         f"in this bucket")
    if ex.world > 1:
        ex.work.div_(ex.world)
    for (e, _, n), s in zip(ex.layout, ex.stats):
        c = counters[e.layer_type]
        c.add_compress(s)
        c.gathered_elements += n * ex.world
        c.gathered_bytes += 4 * n * ex.world
    if ex.work.data_ptr() != ex.buf.data_ptr():  # a float16 / bfloat16 bucket's copy
        ex.buf.copy_(ex.work)
