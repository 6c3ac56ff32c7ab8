"""The reduce-scatter exchange of a bucket (AdaCompState(exchange="reduce-scatter"),
docs/wire-format.md section 10): each parameter's frame is cut at the world's slice
boundaries and rank d gets slice d's pieces of every parameter (phase 0, a message
for each peer); it averages them, and its averaged slices go to every rank (phase 1,
the owner's message). The same averaged bits as the all-gather with float32 sums.

A rank whose pieces fail to decode sends the failure marker in phase 1, so every rank
fails the step; phase 1 is skipped on every rank alike when any rank failed phase 0.
auto (exchange="auto") picks per bucket, from the figures of the slot's previous
exchange that every rank holds alike, the exchange that receives fewer bytes
(src/exchange/exchange_choice.h's estimate)."""

from .. import _adacomp
from .bucket import _zero_gaps
from .transport import _Exchange


def _cut(frames, world):
    """Phase 0's payloads: for each rank, every parameter's piece of its slice."""
    per = [[] for _ in range(world)]
    for f in frames:
        for d, piece in enumerate(_adacomp._cut_frame(f, world)):
            per[d].append(piece)
    return [b"".join(p) for p in per]


def _owned(layout, world, r):
    """[(entry, begin in the bucket, size)] of slice r of every parameter (non-empty)."""
    out = []
    for e, off, n in layout:
        begin, size = _adacomp._slice_of(n, world, r)
        if size:
            out.append((e, off + begin, size))
    return out


def _sum_pieces(ex, received, fp16):
    """Averages this rank's slices from every rank's pieces (into the working copy) and
    returns its owner's message. received: phase 0's [(rank, header, view)]."""
    arr = ex.work.numpy()
    mine = _owned(ex.layout, ex.world, ex.rank)
    views = [v for _, _, v in received]
    if not mine:
        return _adacomp._slices_message([], [], [], fp16)
    try:
        used = _adacomp.decompress_average_messages(
            views, [arr[a:a + s] for _, a, s in mine], [e.tensor_id for e, _, _ in mine])
    except ValueError as exc:  # FrameError included
        r, k = getattr(exc, "message", None), getattr(exc, "tensor", None)
        if r is None:
            raise
        where = f"parameter {mine[k][0].name!r}" if k < len(mine) else "after the last piece"
        raise type(exc)(f"rank {r}'s piece for rank {ex.rank}, bucket {ex.index}, "
                        f"{where}: {exc}") from None
    stats, at = [], [0] * len(views)
    for lengths in used:
        selected = 0
        for r, v in enumerate(views):
            selected += _adacomp.inspect(v[at[r]:at[r] + lengths[r]])["selected"]
            at[r] += lengths[r]
        stats.append((sum(lengths), selected))
    return _adacomp._slices_message([arr[a:a + s] for _, a, s in mine],
                                    [e.tensor_id for e, _, _ in mine], stats, fp16)


class _Slot:
    """What _Exchange needs of a bucket, for phase 1 on the exchange thread."""

    def __init__(self, ex):
        self._ex = ex

    def index(self):
        return self._ex.index

    def is_last(self):
        return self._ex.is_last

    def parameters(self):
        return self._ex.params


def _second_phase(state, ex, received):
    """Phase 1 after phase 0's messages: returns the owners' [(rank, header, view)],
    or phase 0's received when a rank failed it (every rank skips phase 1 alike)."""
    if any(h < 0 for _, h, _ in received):
        return received
    owner = None
    try:
        owner = _sum_pieces(ex, received, state.summed_values == "fp16")
    except Exception as exc:  # noqa: BLE001 - the peers must still get a message
        ex.error = exc
    ex2 = _Exchange(state, _Slot(ex), ex.step, skipped=False, phase=1)
    ex2.payload = owner
    ex2.post()
    ex.phase1 = ex2
    return ex2.receive()


def _average_slices(ex, received, counters, fp16):
    """Writes every owner's averaged slices over the bucket (ex.buf) and counts them;
    raises on a message that fails to read. received: phase 1's, in rank order."""
    for (e, _, _), s in zip(ex.layout, ex.stats):
        counters[e.layer_type].add_compress(s)
    arr = ex.work.numpy()
    _zero_gaps(arr, ex.layout)  # the parameters' slices are all written below
    pieces = {}
    for r, _, view in received:
        slices = _owned(ex.layout, ex.world, r)
        decode = r != ex.rank or fp16  # own slices are averaged already, unless rounded
        try:
            stats = _adacomp._read_slices_message(
                view, [arr[a:a + s] for _, a, s in slices], [e.tensor_id for e, _, _ in slices],
                decode)
        except ValueError as exc:
            k = getattr(exc, "slice", len(slices))
            where = f", parameter {slices[k][0].name!r}" if k < len(slices) else ""
            raise type(exc)(f"rank {r}'s averaged slices, bucket {ex.index}{where}: "
                            f"{exc}") from None
        for (e, _, _), (nbytes, _) in zip(slices, stats):
            pieces[id(e)] = pieces.get(id(e), 0) + nbytes
    for e, _, n in ex.layout:
        c = counters[e.layer_type]
        c.gathered_elements += n * ex.world
        c.gathered_bytes += pieces.get(id(e), 0)
    ex.wire_bytes = pieces
    if ex.work.data_ptr() != ex.buf.data_ptr():  # a float16 / bfloat16 bucket's copy
        ex.buf.copy_(ex.work)


def _estimate(ex, fp16):
    """(all-gather, reduce-scatter) bytes one rank would receive for the bucket in a step
    like this one, from figures every rank holds alike: per parameter, the C++ estimate
    of --exchange auto (adacomp/slices.h EstimateReceive) from its frames' or pieces'
    bytes summed over the ranks (ex.wire_bytes) and its averaged values, summed over
    the bucket; plus the reduce-scatter's second message per peer (8 bytes: the hook
    sends a bucket's pieces, then its averaged slices, as one message per peer each).
    The averaged slices are sized exactly only where their values' floor does not
    already settle the bucket's choice (as EstimateReceive does per tensor)."""
    p = ex.world
    arr = ex.work.numpy()
    one = [(arr[off:off + n], e.tensor_id, ex.wire_bytes.get(id(e), 0))
           for e, off, n in ex.layout]
    est = [_adacomp._estimate_receive(v, t, p, ex.by_slices, w, fp16) for v, t, w in one]
    ag = sum(a for a, _ in est)
    rs = sum(r for _, r in est) + 8 * (p - 1)
    if rs < ag:
        # A tensor whose floor already exceeded its all-gather kept the floor; the
        # bucket's choice needs its exact figure.
        rs = 8 * (p - 1) + sum(
            _adacomp._estimate_receive(v, t, p, ex.by_slices, w, fp16, exact=True)[1]
            if r >= a else r for (v, t, w), (a, r) in zip(one, est))
    return ag, rs
