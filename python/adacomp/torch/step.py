"""One step's transaction (_Step): the buckets of one backward pass, and what rolling
them back needs.

A step opens at its first bucket and ends at the bucket DDP marks last, or when a
parameter comes round again (a new backward pass). Until then the state can undo
it: each compressor it touched keeps a snapshot from before its first compression
in the step, and the state's counters at the start are kept here. The state
(AdaCompState._rollback_step, _commit_step) restores or discards them.
"""


class _Step:
    """The step in progress (AdaCompState._open)."""

    __slots__ = ("buckets", "transport_bytes", "touched", "seen", "failed")

    def __init__(self, buckets, transport_bytes):
        self.buckets = buckets                  # the state's counters at the start of the step
        self.transport_bytes = transport_bytes
        self.touched = {}    # id(entry) -> entry whose compressor holds a start-of-step snapshot
        self.seen = set()    # id(param) of every parameter of the step's buckets so far
        self.failed = False  # rolled back: its remaining buckets are skipped, not compressed

    def has_seen(self, ids):
        """Whether any of these parameters was in a bucket of this step already."""
        return any(i in self.seen for i in ids)

    def snapshot(self, layout):
        """Snapshots each compressor of the layout at its first compression in the step."""
        touched = self.touched
        for e, _, _ in layout:
            if id(e) in touched:
                continue
            e.compressor.snapshot()
            touched[id(e)] = e

    def restore(self):
        """Marks the step failed and gives every touched compressor its start-of-step
        residue, step counter and last_stats back."""
        touched = self.touched
        self.failed = True
        self.touched = {}
        for e in touched.values():
            e.compressor.restore()

    def discard(self):
        """Drops the snapshots: the step is applied."""
        for e in self.touched.values():
            e.compressor.discard_snapshot()
