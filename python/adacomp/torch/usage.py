"""Which parameters a backward pass used, for DDP with find_unused_parameters (or
static_graph): DDP leaves the gradient of a parameter that no rank used untouched,
so whatever the hook sent of that parameter's residue would be lost. A parameter
this rank did not use since its bucket's last exchange is therefore sent as a frame
that selects nothing, its residue (and local moments) left whole: sent + residue =
sum of gradients holds for it as for the others.

A parameter counts as used when autograd computed a gradient for it (a tensor hook
on the parameter, which runs before DDP's own hook); the mark stays until its
bucket is exchanged, so the micro-batches of gradient accumulation (no_sync) count."""

import numpy as np

from .. import Compressor


class _Usage:
    def __init__(self, entries):
        self._marked = set()
        self._handles = [e.param.register_hook(self._marker(id(e.param))) for e in entries]
        self._zero = {}  # entry name -> a compressor whose residue stays zero

    def _marker(self, key):
        marked = self._marked

        def mark(grad):
            marked.add(key)  # returns None: the gradient goes on unchanged

        return mark

    def take(self, layout):
        """The ids of the layout's parameters used since their last take; their marks
        are consumed."""
        used = set()
        for e, _, _ in layout:
            key = id(e.param)
            if key in self._marked:
                used.add(key)
                self._marked.discard(key)
        return used

    def empty_frame(self, e, like):
        """A frame of parameter e that adds nothing, in the codec and settings of the
        compressor ``like`` (e's own, or the dense warm-up's), and its stats."""
        comp = like
        if len(like.residue) > 0:  # a codec with a residue: compress zeros with a twin
            comp = self._zero.get(e.name)
            if comp is None or comp.codec != like.codec or comp.bin_size != like.bin_size:
                comp = Compressor(e.numel, codec=like.codec, bin_size=like.bin_size,
                                  values=like.values, density=like.density,
                                  tau=like.tau, tensor_id=e.tensor_id)
                self._zero[e.name] = comp
        frame = comp.compress(np.zeros(e.numel, dtype=np.float32))
        return frame, comp.last_stats

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []
