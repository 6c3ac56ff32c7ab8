"""AdaComp as a PyTorch DistributedDataParallel communication hook.

Two lines on any process group DDP already uses (Gloo on CPU here)::

    state = adacomp.torch.AdaCompState(model=model)          # model: the module DDP wraps
    ddp_model.register_comm_hook(state, adacomp.torch.hook)

or ``state = adacomp.torch.register(ddp_model)``, which does both.

What the hook does with each bucket DDP hands it (docs/algorithm.md sections 2, 3):

1. For every parameter in the bucket, compresses its slice of the bucket's flat
   gradient with that parameter's own Compressor (its residue lives there).
   The bin size follows the layer type: conv weights 50, fully-connected and
   LSTM/GRU/RNN weights 500, biases and other tensors 500 (all compressed with
   AdaComp by default; pass ``dense_types=("other",)`` to send them as float32).
2. Sends this rank's frames of the bucket to every other rank (one isend per
   peer: an 8-byte header, then the frames; no padding; see _Exchange) and
   returns a future, so that DDP goes on with backward meanwhile.
3. A thread of the state receives every peer's frames and writes over each
   parameter's slice of the bucket the average of every rank's frame of it
   (adacomp.decompress_average: the frames added in rank order into zero,
   then divided by the world size), so all replicas apply the same bits; then
   it completes the future.

Compressors are keyed by parameter (its name in ``model`` when a model is
given, else the order in which the hook first saw it), never by bucket index,
so DDP's bucket rebuild after the first iteration does not mix residues up.
``state.state_dict()`` / ``state.load_state_dict()`` carry the residues for
checkpoints; pass the same model (parameter names) when resuming.

Statistics (``state.stats()``): "bytes sent" counts the frame bytes only,
headers and checksums included, as docs/algorithm.md section 5 defines the
compression rate; ``transport_bytes`` counts every byte handed to the process
group (frames, the 8-byte headers, second messages).

Steps are atomic for the state: if a bucket fails on any rank (a NaN or Inf
in a rank's gradient, which is checked for over the whole bucket before
anything is compressed; a bucket the hook cannot compress; a frame that fails
to decode; a failed send or receive), the failing rank still sends every peer
a failure marker for that bucket, so every rank fails in the same bucket
instead of hanging; then every rank restores the residues
(Compressor.snapshot() at the first compression of each parameter in the
step, restore() on failure) and statistics to the start of the step, sets
``state.step_error`` and fails the rest of the step's buckets without
compressing them (their markers are still exchanged). DDP raises the error
from ``backward()``; the caller skips ``optimizer.step()``, zeroes the
gradients and goes on, as if that batch had never been drawn
(python/README.md).
"""

import atexit
import collections
import threading
import weakref

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from . import CODECS, Compressor, FrameError, _adacomp

__all__ = [
    "AdaCompState",
    "StepAborted",
    "hook",
    "register",
    "layer_types_of",
    "LAYER_TYPES",
    "DEFAULT_BIN_SIZES",
]

# From the codec level (include/adacomp/codec.h: LayerType, DefaultBinSize).
LAYER_TYPES = tuple(_adacomp.LAYER_TYPES)
DEFAULT_BIN_SIZES = dict(_adacomp.DEFAULT_BIN_SIZES)

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
         nn.ConvTranspose3d)
_FC = (nn.Linear, nn.Bilinear)
_RNN = (nn.RNNBase, nn.RNNCellBase)


def _type_by_shape(param):
    if param.dim() >= 3:
        return "conv"
    if param.dim() == 2:
        return "fc"
    return "other"


def layer_types_of(model):
    """Maps each parameter name of ``model`` to its layer type.

    conv: weights of Conv*/ConvTranspose*; fc: weights of Linear/Bilinear;
    lstm: weight_ih*/weight_hh* of LSTM/GRU/RNN (and their cells); other:
    biases. Parameters of other modules go by shape: >= 3-D conv, 2-D fc, else other.
    """
    by_id = {}
    for mod_name, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if pname.startswith("bias"):
                t = "other"
            elif isinstance(mod, _CONV) and pname == "weight":
                t = "conv"
            elif isinstance(mod, _FC) and pname == "weight":
                t = "fc"
            elif isinstance(mod, _RNN) and pname.startswith("weight"):
                t = "lstm"
            else:
                t = _type_by_shape(p)
            by_id.setdefault(id(p), t)
    return {name: by_id[id(p)] for name, p in model.named_parameters()}


def _mix_seed(seed, rank, tensor_id):
    """A distinct 64-bit generator seed per (seed, rank, tensor) (splitmix64 finaliser)."""
    z = (seed * 0x9E3779B97F4A7C15 + rank * 0xBF58476D1CE4E5B9 + tensor_id + 1) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)


_ROLLED_BACK = ("the residues and statistics of the whole step are rolled back to its start; "
                "skip optimizer.step(), call zero_grad() and go on with the next batch")


class StepAborted(RuntimeError):
    """Raised by the hook on every rank when a step fails on any rank.

    The hook state is back where it was before the step (residues, step
    counters, statistics), so the caller can skip ``optimizer.step()``, call
    ``zero_grad()`` and continue. Attributes: ``step`` (the hook's step
    counter, ``state.steps``, when the step failed), ``bucket`` (bucket
    index), ``failed_ranks`` (the ranks that reported a failure in the
    exchange, or None for an error after it, such as a frame that fails to
    decode; a rank's own error is the ``__cause__``).
    Through DDP it reaches the caller as a RuntimeError raised by
    ``backward()`` with this message; ``state.step_error`` holds the object.
    """

    def __init__(self, message, bucket=None, step=None, failed_ranks=None):
        super().__init__(message)
        self.bucket = bucket
        self.step = step
        self.failed_ranks = failed_ranks


class _Counters:
    """Byte and element counters of one layer type (or of everything)."""

    __slots__ = ("elements", "bytes_sent", "selected", "bins", "frames", "bin_histogram",
                 "gathered_elements", "gathered_bytes")

    def __init__(self):
        self.elements = 0           # this rank's elements compressed
        self.bytes_sent = 0         # this rank's frame bytes
        self.selected = 0
        self.bins = 0
        self.frames = 0
        self.bin_histogram = [0] * 17
        self.gathered_elements = 0  # elements of every rank's frames (elements x world)
        self.gathered_bytes = 0     # frame bytes of every rank (no padding, no lengths)

    def add_compress(self, s):
        self.elements += s["elements"]
        self.bytes_sent += s["frame_bytes"]
        self.selected += s["selected"]
        self.bins += s["bins"]
        self.frames += 1
        for k, v in enumerate(s["bin_histogram"]):
            self.bin_histogram[k] += v

    def merge(self, other):
        for f in self.__slots__:
            if f == "bin_histogram":
                self.bin_histogram = [a + b for a, b in zip(self.bin_histogram, other.bin_histogram)]
            else:
                setattr(self, f, getattr(self, f) + getattr(other, f))

    def as_dict(self):
        d = {f: getattr(self, f) for f in self.__slots__}
        d["bin_histogram"] = list(self.bin_histogram)
        d["bytes_dense"] = 4 * self.elements
        d["compression_rate"] = (4.0 * self.elements / self.bytes_sent) if self.bytes_sent else 0.0
        d["gathered_compression_rate"] = (
            4.0 * self.gathered_elements / self.gathered_bytes if self.gathered_bytes else 0.0)
        d["selected_per_bin"] = (self.selected / self.bins) if self.bins else 0.0
        return d

    @classmethod
    def from_dict(cls, d):
        c = cls()
        for f in cls.__slots__:
            if f in d:
                setattr(c, f, list(d[f]) if f == "bin_histogram" else int(d[f]))
        return c


class _Entry:
    """One parameter: its key, wire tensor id, layer type, compressor and bin size
    after any ramp."""

    __slots__ = ("name", "tensor_id", "layer_type", "numel", "param", "compressor",
                 "target_bin_size")


class AdaCompState:
    """State of the AdaComp DDP hook: per-parameter compressors and statistics.

    Args:
        process_group: the group to all-gather over (None: the default group).
        model: the module DDP wraps (or the DDP module itself). Gives stable
            parameter names (residue keys, checkpoints) and layer types.
            Without it, parameters are named "param<k>" in the order the hook
            first meets them and typed by shape; that order is deterministic
            for a given model and DDP setup, but a model is recommended.
        codec: any codec of ``adacomp.CODECS``; "adacomp" by default.
        bin_size: one L_T for every tensor, or None for the layer-type defaults.
        bin_sizes: per-type overrides, e.g. {"conv": 25}.
        values, density, tau, seed: as in ``adacomp.Compressor`` (terngrad's
            seed is mixed with the rank and the tensor id).
        dense_types: layer types to send uncompressed (codec "dense").
        layer_types: {parameter name: type} overrides of the automatic typing.
        overlap: True (default): the hook returns as soon as a bucket's frames are
            sent, and a thread of the state receives and decodes them while DDP
            goes on with backward; False: each bucket is exchanged and decoded
            before the hook returns (same results, bit for bit).
        ramp_steps, ramp_start, ramp_stages: the bin-size ramp of
            ``adacomp train --ramp-steps`` (docs/algorithm.md section 6): over the
            first ramp_steps steps L_T climbs from ramp_start to each tensor's
            bin size in ramp_stages geometric stages; 0 (default): fixed L_T.
    """

    def __init__(self, process_group=None, model=None, codec="adacomp", bin_size=None,
                 bin_sizes=None, values="ternary", density=0.01, tau=1e-3, seed=0,
                 dense_types=(), layer_types=None, overlap=True, ramp_steps=0, ramp_start=8,
                 ramp_stages=4):
        if codec not in CODECS:
            raise ValueError(f"unknown codec {codec!r}; one of {', '.join(CODECS)}")
        self.ramp_steps, self.ramp_start, self.ramp_stages = (
            int(ramp_steps), int(ramp_start), int(ramp_stages))
        if self.ramp_steps:
            if codec != "adacomp":
                raise ValueError(f"ramp_steps needs codec 'adacomp', not {codec!r}")
            _adacomp.ramp_bin_size(1, 0, self.ramp_steps, self.ramp_start, self.ramp_stages)
        self.process_group = process_group
        self.codec = codec
        self.values = values
        self.density = float(density)
        self.tau = float(tau)
        self.seed = int(seed)
        self.bin_sizes = dict(DEFAULT_BIN_SIZES)
        if bin_sizes:
            for t, v in bin_sizes.items():
                if t not in LAYER_TYPES:
                    raise ValueError(f"bin_sizes: unknown layer type {t!r}; one of {LAYER_TYPES}")
                self.bin_sizes[t] = int(v)
        if bin_size is not None:
            self.bin_sizes = {t: int(bin_size) for t in LAYER_TYPES}
        for t in dense_types:
            if t not in LAYER_TYPES:
                raise ValueError(f"dense_types: unknown layer type {t!r}; one of {LAYER_TYPES}")
        self.dense_types = tuple(dense_types)
        self._lock = threading.Lock()
        self._by_id = {}        # id(param) -> _Entry
        self._by_name = {}      # name -> _Entry
        self._pending = {}      # name -> compressor state_dict loaded before the entry existed
        self._next_id = 0
        self._model_given = model is not None
        self.steps = 0
        self.buckets = 0
        self.aborted_steps = 0  # steps rolled back after an error (not in state_dict)
        self._open = None       # the step in progress: counters at its start, touched entries
        self.step_error = None  # the StepAborted of the current/last step, None if it went well
        self.transport_bytes = 0
        self._totals = {t: _Counters() for t in LAYER_TYPES}
        self._step = {t: _Counters() for t in LAYER_TYPES}
        self._last_step = {t: _Counters() for t in LAYER_TYPES}
        self.overlap = bool(overlap)
        # The exchange (see _Exchange): per bucket slot, the receive capacity every rank
        # agrees on, the receive buffers, and the tensors of the slot's last exchange.
        self._capacity = {}
        self._recv_buffers = {}
        self._comm_tensors = {}
        self._inflight = collections.deque()  # exchanges started, not finished, in order
        self._cv = threading.Condition()
        self._thread = None
        self._closing = False
        _LIVE_STATES.add(self)
        if model is not None:
            if isinstance(model, nn.parallel.DistributedDataParallel):
                model = model.module
            types = layer_types_of(model)
            if layer_types:
                for name, t in layer_types.items():
                    if name not in types:
                        raise ValueError(f"layer_types: the model has no parameter {name!r}")
                    if t not in LAYER_TYPES:
                        raise ValueError(f"layer_types: unknown layer type {t!r} for {name!r}")
                    types[name] = t
            for name, p in model.named_parameters():
                if p.requires_grad:
                    self._add_entry(p, name, types[name])
        elif layer_types:
            raise ValueError("layer_types needs model=")

    # ----- parameters and their compressors -------------------------------------------------

    def _rank(self):
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(self.process_group)
        return 0

    def _add_entry(self, param, name, layer_type):
        e = _Entry()
        e.name = name
        e.tensor_id = self._next_id
        self._next_id += 1
        e.layer_type = layer_type
        e.numel = param.numel()
        e.param = param  # keeps id(param) from being reused while the entry exists
        e.compressor = None
        if e.numel > 0:
            codec = "dense" if layer_type in self.dense_types else self.codec
            e.target_bin_size = self.bin_sizes[layer_type]
            e.compressor = Compressor(
                e.numel, codec=codec, bin_size=self.bin_sizes[layer_type], values=self.values,
                density=self.density, tau=self.tau,
                seed=_mix_seed(self.seed, self._rank(), e.tensor_id), tensor_id=e.tensor_id)
            if name in self._pending:
                e.compressor.load_state_dict(self._pending.pop(name))
        self._by_id[id(param)] = e
        self._by_name[name] = e
        return e

    def _entry(self, param):
        e = self._by_id.get(id(param))
        if e is None:
            name = f"param{self._next_id}"
            while name in self._by_name:
                name += "_"
            e = self._add_entry(param, name, _type_by_shape(param))
        return e

    def parameter_names(self):
        """The residue keys, in tensor-id order."""
        return sorted(self._by_name, key=lambda n: self._by_name[n].tensor_id)

    def layer_type(self, name):
        return self._by_name[name].layer_type

    def residues(self):
        """{parameter name: copy of its residue as a float32 numpy array}."""
        return {n: e.compressor.residue for n, e in self._by_name.items() if e.compressor}

    # ----- checkpoints -----------------------------------------------------------------------

    def state_dict(self):
        """Residues (and generator states) by parameter name, plus step counters and totals."""
        with self._lock:
            params = {}
            for name, e in self._by_name.items():
                if e.compressor is None:
                    continue
                d = e.compressor.state_dict()
                d["layer_type"] = e.layer_type
                params[name] = d
            params.update({n: s for n, s in self._pending.items() if n not in params})
            return {
                "format": "adacomp.torch.AdaCompState/1",
                "codec": self.codec,
                "params": params,
                "steps": self.steps,
                "buckets": self.buckets,
                "transport_bytes": self.transport_bytes,
                "totals": {t: c.as_dict() for t, c in self._totals.items()},
            }

    def load_state_dict(self, state):
        """Restores what state_dict() returned. Checks every entry before changing anything."""
        if state.get("format") != "adacomp.torch.AdaCompState/1":
            raise ValueError(f"not an AdaCompState state_dict (format {state.get('format')!r})")
        with self._lock:
            params = state["params"]
            for name, d in params.items():
                e = self._by_name.get(name)
                if e is None:
                    if self._model_given:
                        raise ValueError(f"state_dict has a residue for parameter {name!r}, which "
                                         f"the model does not have")
                    continue
                if e.compressor is None or d.get("elements") != e.numel:
                    raise ValueError(f"state_dict entry {name!r} has {d.get('elements')} elements, "
                                     f"the parameter has {e.numel}")
                if d.get("codec") != e.compressor.codec:
                    raise ValueError(f"state_dict entry {name!r} is for codec {d.get('codec')!r}, "
                                     f"this state uses {e.compressor.codec!r}")
            # Validate the state bytes on scratch compressors so a failure changes nothing.
            for name, d in params.items():
                e = self._by_name.get(name)
                if e is not None:
                    scratch = Compressor(e.numel, codec=e.compressor.codec,
                                         bin_size=e.compressor.bin_size,
                                         values=e.compressor.values, density=self.density,
                                         tau=self.tau, tensor_id=e.tensor_id)
                    scratch.load_state_dict(d)
            for name, d in params.items():
                e = self._by_name.get(name)
                if e is None:
                    self._pending[name] = d
                else:
                    e.compressor.load_state_dict(d)
            self._open = None  # a step in progress is superseded by the loaded state
            self.steps = int(state.get("steps", 0))
            self.buckets = int(state.get("buckets", 0))
            self.transport_bytes = int(state.get("transport_bytes", 0))
            totals = state.get("totals", {})
            self._totals = {t: _Counters.from_dict(totals.get(t, {})) for t in LAYER_TYPES}

    # ----- statistics ------------------------------------------------------------------------

    def stats(self):
        """Totals since the start (or the loaded checkpoint), per layer type and end to end.

        Keys: steps, buckets, transport_bytes, end_to_end, per_type {conv, fc, lstm, other},
        last_step {end_to_end, per_type}. Each counter dict has elements, bytes_sent,
        bytes_dense (4 x elements), compression_rate (bytes_dense / bytes_sent, this rank),
        gathered_elements, gathered_bytes (frame bytes of all ranks) and
        gathered_compression_rate (32 x elements x world / bits of all ranks' frames),
        selected, bins, selected_per_bin, frames, bin_histogram.
        """
        with self._lock:
            return {
                "steps": self.steps,
                "buckets": self.buckets,
                "transport_bytes": self.transport_bytes,
                "end_to_end": _total(self._totals).as_dict(),
                "per_type": {t: c.as_dict() for t, c in self._totals.items()},
                "last_step": {
                    "end_to_end": _total(self._last_step).as_dict(),
                    "per_type": {t: c.as_dict() for t, c in self._last_step.items()},
                },
            }

    def compression_rate(self):
        """End-to-end rate of this rank's frames since the start: 32-bit bytes / frame bytes."""
        return self.stats()["end_to_end"]["compression_rate"]

    def reset_stats(self):
        with self._lock:
            self.transport_bytes = 0
            self._totals = {t: _Counters() for t in LAYER_TYPES}

    # ----- the exchange ----------------------------------------------------------------------

    def _layout(self, bucket, buf):
        """[(entry, offset, numel)] of the bucket's parameters, in bucket order."""
        params = bucket.parameters()
        grads = bucket.gradients()
        total = buf.numel()
        layout = []
        views_ok = len(grads) == len(params)
        if views_ok:
            base = buf.data_ptr()
            size = buf.element_size()
            for p, g in zip(params, grads):
                delta = g.data_ptr() - base
                if (delta % size or not g.is_contiguous() or g.numel() != p.numel()
                        or delta // size + g.numel() > total or delta < 0):
                    views_ok = False
                    break
                layout.append((self._entry(p), delta // size, p.numel()))
        if not views_ok:  # DDP lays the bucket out in parameter order without gaps
            layout, off = [], 0
            for p in params:
                layout.append((self._entry(p), off, p.numel()))
                off += p.numel()
            if off != total:
                raise RuntimeError(f"adacomp: bucket {bucket.index()} holds {total} elements, its "
                                   f"parameters {off}; cannot map gradients to parameters")
        return [x for x in layout if x[2] > 0]

    def exchange_bucket(self, bucket):
        """Compresses one bucket and starts its exchange; returns a torch Future.

        The future completes with the bucket tensor, which then holds every
        rank's average, once all peers' frames have arrived and been decoded
        (on the state's exchange thread, so that DDP goes on with backward and
        the next buckets meanwhile; ``overlap=False`` does it all before
        returning). It fails with a StepAborted when the step failed on any rank.

        A step (the buckets of one backward pass, up to ``bucket.is_last()``)
        is atomic for this state: on any error in any bucket, on any rank, every
        compressor touched in the step gets its start-of-step residue, step
        counter and last_stats back, the step's statistics are dropped, and the
        futures of that bucket and of the rest of the step fail on every rank.
        Every bucket is exchanged all the same (a failed rank sends a failure
        marker instead of frames), so no rank waits for a message never sent.
        """
        with self._lock:
            ex = self._launch(bucket)
        if ex.world == 1 or not self.overlap:
            self._finish(ex)
        else:
            self._enqueue(ex)
        return ex.future

    def reduce_bucket(self, bucket):
        """exchange_bucket, waited for: returns the averaged bucket tensor or raises
        the StepAborted that failed the step."""
        v = self.exchange_bucket(bucket).wait()
        if isinstance(v, _Failed):
            raise v.error
        return v

    def abort_step(self):
        """Rolls back a step whose backward pass did not reach the last bucket.

        The hook does this itself when it fails a step; call it only if backward
        failed outside the hook (e.g. in your own autograd code) after some
        buckets were reduced on every rank. Returns whether a step was open.
        """
        self.wait_idle()
        with self._lock:
            if self._open is None:
                return False
            if not self._open["failed"]:
                self._rollback_step()
            self._open = None
            return True

    def close(self, timeout=5.0):
        """Waits (up to ``timeout`` seconds each) for the exchanges in flight and for the
        state's exchange thread to end; a later bucket starts a new thread. The
        thread holds the state, so a state that has exchanged with overlap lives
        until closed; the module closes every live state at interpreter exit.
        Returns whether the thread ended."""
        self.wait_idle(timeout)
        with self._cv:
            self._closing = True
            self._cv.notify_all()
            t = self._thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def wait_idle(self, timeout=None):
        """Waits until no exchange of this state is in flight. Returns whether it is idle."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._inflight, timeout)

    def _begin_step(self):
        self.step_error = None
        self._open = {"buckets": self.buckets, "transport_bytes": self.transport_bytes,
                      "touched": {}, "seen": set(), "failed": False}

    def _snapshot(self, layout):
        touched = self._open["touched"]
        for e, _, _ in layout:
            if id(e) in touched:
                continue
            e.compressor.snapshot()
            touched[id(e)] = e

    def _rollback_step(self):
        """Undoes the open step's compressions and statistics; the step stays open, failed."""
        touched = self._open["touched"]
        self.buckets = self._open["buckets"]
        self.transport_bytes = self._open["transport_bytes"]
        self._step = {t: _Counters() for t in LAYER_TYPES}
        self._open["failed"] = True
        self._open["touched"] = {}
        self.aborted_steps += 1
        for e in touched.values():
            e.compressor.restore()

    def _commit_step(self):
        for e in self._open["touched"].values():
            e.compressor.discard_snapshot()
        self._open = None
        self.steps += 1
        for t in LAYER_TYPES:
            self._totals[t].merge(self._step[t])
        self._last_step = self._step
        self._step = {t: _Counters() for t in LAYER_TYPES}

    def _launch(self, bucket):
        """On the caller's thread, under the lock: compresses and posts the messages."""
        ids = [id(p) for p in bucket.parameters()]
        if self._open is not None and any(i in self._open["seen"] for i in ids):
            # A parameter seen twice: a new step. If the last one never reached its last
            # bucket (its backward failed outside the hook), it was not applied; undo it.
            self.wait_idle_locked()
            if self._open is not None:
                if not self._open["failed"]:
                    self._rollback_step()
                self._open = None
        if self._open is None:
            self._begin_step()
        step = self._open
        step["seen"].update(ids)
        ex = _Exchange(self, bucket, self.steps)
        ex.skipped = step["failed"]  # the rest of a failed step: no compression
        frames, error = [], None
        try:
            buf = bucket.buffer()
            ex.buf = buf
            ex.work = _working_copy(buf, bucket.index())
            ex.layout = self._layout(bucket, buf)
        except Exception as exc:  # still join the exchange: peers fail, not hang
            error = exc
        arr = ex.work.numpy() if error is None else None
        if error is None and not ex.skipped:
            # The whole bucket is checked before anything in it is compressed.
            bad = _adacomp.find_non_finite(arr)
            if bad is not None:
                where = next(((e, bad - off) for e, off, n in ex.layout if off <= bad < off + n),
                             (None, bad))
                what = (f"parameter {where[0].name!r}, element {where[1]}"
                        if where[0] is not None else f"bucket element {bad}")
                error = ValueError(f"adacomp hook: non-finite gradient ({float(arr[bad])}) "
                                   f"in {what}")
            else:
                self._snapshot(ex.layout)
                for e, off, n in ex.layout:
                    try:
                        self._schedule(e)
                        frames.append(e.compressor.compress(arr[off:off + n]))
                    except Exception as exc:
                        error = type(exc)(f"adacomp hook: parameter {e.name!r}: {exc}")
                        break
                    ex.stats.append(e.compressor.last_stats)
        ex.error = error
        ex.payload = None if (error is not None or ex.skipped) else b"".join(frames)
        ex.post()
        return ex

    def _schedule(self, e):
        """The ramp's bin size for this step (self.steps: steps applied so far)."""
        if not self.ramp_steps or e.compressor.codec != "adacomp":
            return
        size = _adacomp.ramp_bin_size(e.target_bin_size, self.steps, self.ramp_steps,
                                      self.ramp_start, self.ramp_stages)
        if size != e.compressor.bin_size:
            e.compressor.set_bin_size(size)

    def wait_idle_locked(self):
        """wait_idle() for a caller that holds self._lock (released while waiting)."""
        if not self._inflight:
            return
        self._lock.release()
        try:
            self.wait_idle()
        finally:
            self._lock.acquire()

    def _enqueue(self, ex):
        with self._cv:
            self._inflight.append(ex)
            self._closing = False
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=_exchange_thread, args=(self,),
                                                name="adacomp-exchange", daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def _finish(self, ex):
        """Waits for the bucket's messages, decodes, settles the step, completes the future."""
        try:
            received = ex.receive()
            result = self._settle(ex, received, None)
        except Exception as exc:  # noqa: BLE001 - a failed collective fails the step
            result = self._settle(ex, None, exc)
        ex.future.set_result(_Failed(result) if isinstance(result, Exception) else result)

    def _settle(self, ex, received, comm_error):
        """received: [(rank, header, memoryview of frames)] in rank order, or None."""
        index = ex.index
        with self._lock:
            step = self._open
            ex.retire()
            if step is not None and ex.skipped is False and step["failed"]:
                ex.skipped = True  # failed by an earlier bucket while this one travelled
            failed_ranks = None if received is None else [r for r, h, _ in received if h < 0]
            if received is not None and not failed_ranks and not ex.skipped:
                self._update_bound(ex, [h for _, h, _ in received])
            if step is None or ex.skipped:
                err = self.step_error
                if err is None:
                    err = StepAborted(f"adacomp hook: bucket {index} skipped: the step was "
                                      f"rolled back", bucket=index, step=ex.step)
                exc = StepAborted(f"adacomp hook: bucket {index} skipped, step {err.step} was "
                                  f"aborted in bucket {err.bucket}: {err}", bucket=index,
                                  step=err.step, failed_ranks=err.failed_ranks)
                return self._end_bucket(ex, exc)
            if comm_error is not None or failed_ranks:
                if comm_error is not None:
                    why = f"the exchange failed: {type(comm_error).__name__}: {comm_error}"
                    cause, bad = comm_error, None
                else:
                    cause, bad = ex.error, failed_ranks
                    here = (f"here: {type(ex.error).__name__}: {ex.error}" if ex.error
                            else "see their error")
                    why = f"rank(s) {bad} failed in bucket {index} of step {ex.step} ({here})"
                exc = StepAborted(f"adacomp hook: {why}; {_ROLLED_BACK}", bucket=index,
                                  step=ex.step, failed_ranks=bad)
                exc.__cause__ = cause
                return self._fail_step(ex, exc)
            try:
                self._decode(ex, received)
            except Exception as e:  # noqa: BLE001 - a frame that fails to decode
                exc = StepAborted(f"adacomp hook: bucket {index} of step {ex.step} failed: "
                                  f"{type(e).__name__}: {e}; {_ROLLED_BACK}", bucket=index,
                                  step=ex.step, failed_ranks=None)
                exc.__cause__ = e
                return self._fail_step(ex, exc)
            self.buckets += 1
            self.transport_bytes += ex.sent_bytes
            if ex.is_last:
                self._commit_step()
            return ex.buf

    def _fail_step(self, ex, exc):
        self._rollback_step()
        self.step_error = exc
        return self._end_bucket(ex, exc)

    def _end_bucket(self, ex, exc):
        if ex.is_last and self._open is not None:
            self._open = None
        return exc

    def _update_bound(self, ex, lengths):
        """Receive capacity of the slot for its next exchange: the same on every rank
        (every rank sees every length), about 1.25 x the longest message this time."""
        need = 8 + max(lengths)
        want = need + need // 4 + 256
        cap = self._capacity.get(ex.index)
        if cap is None or want > cap or cap > 4 * want:
            self._capacity[ex.index] = want

    def _decode(self, ex, received):
        for (e, _, _), s in zip(ex.layout, ex.stats):
            self._step[e.layer_type].add_compress(s)
        arr = ex.work.numpy()
        # Per parameter, the average of every rank's frame in rank order: bit for bit
        # zeroing the slice, adding the frames rank after rank and dividing by the world
        # size. The gradient is not state: on a failure below the step is skipped.
        covered = 0  # elements of the bucket outside every parameter's slice are zeroed
        for _, off, n in sorted(ex.layout, key=lambda x: x[1]):
            if off > covered:
                arr[covered:off] = 0
            covered = max(covered, off + n)
        if covered < arr.size:
            arr[covered:] = 0
        views = [v for _, _, v in received]
        if ex.layout:
            # Every rank's message (its frames, one per parameter in bucket order) at
            # once: all frames and the absence of leftover bytes are checked before
            # any slice is written.
            try:
                used = _adacomp.decompress_average_messages(
                    views, [arr[off:off + n] for _, off, n in ex.layout],
                    [e.tensor_id for e, _, _ in ex.layout])
            except (FrameError, ValueError) as exc:
                r, k = getattr(exc, "message", None), getattr(exc, "tensor", None)
                if r is None:
                    raise
                if k < len(ex.layout):
                    where = f"parameter {ex.layout[k][0].name!r}"
                else:
                    where = "after the last parameter's frame"
                raise type(exc)(f"rank {r}, bucket {ex.index}, {where}: {exc}") from None
            for (e, _, n), lengths in zip(ex.layout, used):
                c = self._step[e.layer_type]
                c.gathered_elements += n * len(views)
                c.gathered_bytes += sum(lengths)
        else:
            for r, v in enumerate(views):
                if len(v):
                    raise FrameError(f"rank {r}, bucket {ex.index}: {len(v)} bytes for a "
                                     f"bucket without parameters")
        if ex.work is not ex.buf:
            ex.buf.copy_(ex.work)


class _Failed:
    """The value of a bucket's inner future when its step failed (see hook())."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _working_copy(buf, index):
    """The float32 CPU tensor the bucket is compressed from and decoded into."""
    if buf.device.type != "cpu":
        raise ValueError(f"adacomp hook: bucket {index} is on {buf.device}; this build "
                         f"compresses CPU tensors only (use the Gloo backend with CPU "
                         f"gradients)")
    if buf.is_sparse or not buf.is_contiguous():
        raise ValueError(f"adacomp hook: bucket {index} is not a dense contiguous tensor")
    if buf.numel() == 0:
        raise ValueError(f"adacomp hook: bucket {index} is empty")
    if buf.dtype == torch.float32:
        return buf.detach()
    if buf.dtype in (torch.float16, torch.bfloat16):
        return buf.detach().float()  # residues stay float32; the result is rounded back
    raise ValueError(f"adacomp hook: bucket {index} holds {buf.dtype} gradients; the hook "
                     f"compresses float32, float16 and bfloat16")


# Message of one rank for one bucket, sent to every peer: an int64 header, then the
# rank's frames (its parameters' frames, concatenated in bucket order).
#   header >= 0: that many frame bytes follow in this message;
#   header == -1: the rank failed in this bucket (or skips it: its step failed); no frames;
#   header <= -2: the frames, -header - 2 bytes, are longer than the peers' receive
#                 capacity for this slot; they follow as a second message (tag + 1).
# Every rank computes the same capacity per slot from the lengths it saw in the slot's
# previous exchange (AdaCompState._update_bound), so the second message is rare.
_HEADER = 8
_FAILED = -1


def _tag(index, second=False):
    return 0x5AC0000 + 2 * index + (1 if second else 0)


class _Exchange:
    """One bucket's messages in flight, from _launch to _finish."""

    def __init__(self, state, bucket, step):
        self.state = state
        self.index = bucket.index()
        self.is_last = bucket.is_last()
        self.params = bucket.parameters()
        self.step = step
        self.future = torch.futures.Future()
        self.stats = []
        self.layout = []
        self.buf = self.work = None
        self.error = None
        self.payload = None
        self.skipped = False
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

    def post(self):
        """Sends this rank's message to every peer and posts the receives."""
        n = -1 if self.payload is None else len(self.payload)
        self.own_header = _FAILED if n < 0 else n
        if self.world == 1:
            return
        state = self.state
        cap = state._capacity.get(self.index)
        if cap is None:
            # First exchange of the slot: room for float32 frames of the bucket, from what
            # every rank knows alike (its parameters), even a rank that failed already.
            params = self.params
            cap = _HEADER + 4 * sum(p.numel() for p in params) + 64 * len(params) + 256
            state._capacity[self.index] = cap
        self.capacity = cap
        overflow = n >= 0 and _HEADER + n > cap
        head = np.array([-n - 2 if overflow else self.own_header], dtype="<i8").view(np.uint8)
        if n >= 0 and not overflow:
            msg = torch.empty(_HEADER + n, dtype=torch.uint8)
            a = msg.numpy()
            a[:_HEADER] = head
            a[_HEADER:] = np.frombuffer(self.payload, dtype=np.uint8)
        else:
            msg = torch.from_numpy(head.copy())
        second = torch.frombuffer(bytearray(self.payload), dtype=torch.uint8) \
            if overflow else None
        # Receive buffers persist per (slot, peer) and are reused while large enough.
        bufs = state._recv_buffers.get(self.index)
        if bufs is None or len(bufs) != self.world or bufs[0].numel() != cap:
            bufs = [torch.empty(cap, dtype=torch.uint8) for _ in range(self.world)]
            state._recv_buffers[self.index] = bufs
        self.recv_bufs = bufs
        # Every tensor handed to the process group stays referenced by the state (see
        # _keep_comm_tensors_past_exit): never freed by a Gloo thread.
        self.tensors = [msg] + ([second] if second is not None else []) + list(bufs)
        state._comm_tensors[self.index] = self.tensors
        g = None if self.group is dist.group.WORLD else self.group
        for k in range(1, self.world):
            src = (self.rank - k) % self.world
            self.recvs.append((src, dist.irecv(bufs[src], self._global(src), group=g,
                                               tag=_tag(self.index))))
        for k in range(1, self.world):
            dst = (self.rank + k) % self.world
            self.sends.append(dist.isend(msg, self._global(dst), group=g, tag=_tag(self.index)))
            self.sent_bytes += msg.numel()
            if second is not None:
                self.sends.append(dist.isend(second, self._global(dst), group=g,
                                             tag=_tag(self.index, True)))
                self.sent_bytes += second.numel()

    def receive(self):
        """Waits for every peer's message: [(rank, header, memoryview of its frames)]."""
        own = memoryview(self.payload if self.payload is not None else b"")
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
                                                   tag=_tag(self.index, True))))
        for src, n, t, w in late:
            w.wait()
            got[src] = (n, memoryview(t.numpy()))
        for w in self.sends:
            w.wait()
        return [(r, *got[r]) for r in range(self.world)]

    def retire(self):
        """Drops the references to the works (the tensors stay with the state)."""
        self.sends, self.recvs = [], []


def _exchange_thread(state):
    """Finishes a state's exchanges in the order they were started (one thread per
    state), until the state is closed with nothing in flight.

    The thread holds the state (which therefore lives until close()), and close()
    joins it, which the module does for every live state at exit. So this thread
    never runs while the interpreter finalizes: if it did, taking the GIL back
    (after a wait on Gloo, or in the destructor of a work object or a future it
    drops, which release the GIL) would end it inside a C++ destructor and abort
    the process ("terminate called without an active exception").
    """
    while True:
        with state._cv:
            while not state._inflight and not state._closing:
                state._cv.wait()
            if not state._inflight:
                return
            ex = state._inflight[0]
        state._finish(ex)
        with state._cv:
            state._inflight.popleft()
            state._cv.notify_all()
        ex = None


# Why the state keeps the tensors of its collectives, and keeps them past exit.
#
# A tensor created in Python and handed to a collective is referenced by the Gloo
# process group's work object, which the group's worker thread
# (ProcessGroupGloo::runLoop) drops a moment after the collective completes. If the
# Python object of the tensor is gone by then, torch 1.13 has kept that object
# alive for the C++ side, and the worker thread must take the GIL to free it. When
# the main thread is already finalizing the interpreter (a process that ends right
# after its last step), taking the GIL makes the worker thread exit (pthread_exit)
# inside a destructor: the process aborts with "terminate called without an active
# exception". So: the Python objects of every exchange's tensors stay referenced by
# the state (until the same bucket's next exchange, a step later, when the worker
# has long let go), and at exit, before the interpreter finalizes, one extra
# reference to them is taken that is never given back, so no such tensor is freed
# while it shuts down.
_LIVE_STATES = weakref.WeakSet()


@atexit.register
def _keep_comm_tensors_past_exit():
    for state in list(_LIVE_STATES):
        # The exchange thread must not be running when the interpreter finalizes: a
        # thread that takes the GIL back then (leaving a wait on Gloo, or the end of
        # Future.set_result) is ended inside a C++ destructor, which aborts the
        # process. So: wait for the exchanges in flight (a program that left
        # mid-step; torch 1.13 cannot abort a receive from Python) and join it.
        state.close(timeout=5.0)
        _adacomp._keep_past_exit(state._comm_tensors)
        _adacomp._keep_past_exit(state._recv_buffers)


def _total(counters):
    c = _Counters()
    for v in counters.values():
        c.merge(v)
    return c


def _unwrap(fut):
    v = fut.value()
    if isinstance(v, _Failed):
        raise v.error
    return v


def hook(state, bucket):
    """DDP communication hook: ``ddp_model.register_comm_hook(state, adacomp.torch.hook)``.

    ``state`` is an AdaCompState. Returns a future of the averaged bucket that
    completes when every rank's frames of it have arrived and been decoded.
    """
    # A callback that raises marks the future failed for C++ too, so DDP's wait()
    # raises the StepAborted's message from backward(); Future.set_exception would
    # fail it for Python callers only.
    return state.exchange_bucket(bucket).then(_unwrap)


def register(ddp_model, **kwargs):
    """Creates an AdaCompState for ``ddp_model`` (keyword arguments as AdaCompState's),
    registers the hook on it and returns the state."""
    kwargs.setdefault("process_group", ddp_model.process_group)
    state = AdaCompState(model=ddp_model.module, **kwargs)
    ddp_model.register_comm_hook(state, hook)
    return state
