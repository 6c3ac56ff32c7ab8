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
2. All-gathers this rank's concatenated frames through the process group.
   Lengths differ per rank, so it gathers the lengths first (one int64 per
   rank), then every rank's frames padded with zeros to the longest.
3. Every rank writes over each parameter's slice of the bucket the average of
   every rank's frame of it (adacomp.decompress_average: the frames added in
   rank order into zero, then divided by the world size), so all replicas
   apply the same bits.

Compressors are keyed by parameter (its name in ``model`` when a model is
given, else the order in which the hook first saw it), never by bucket index,
so DDP's bucket rebuild after the first iteration does not mix residues up.
``state.state_dict()`` / ``state.load_state_dict()`` carry the residues for
checkpoints; pass the same model (parameter names) when resuming.

Statistics (``state.stats()``): "bytes sent" counts the frame bytes only,
headers and checksums included, as docs/algorithm.md section 5 defines the compression
rate; the zero padding and the 8-byte length that the Gloo all-gather moves
besides are counted separately as ``transport_bytes`` (they are an artefact of
the fixed-size all-gather, not of the code).

The hook runs the exchange synchronously and returns an already-completed
future. Steps are atomic for the state: if a bucket fails on any rank (a NaN
or Inf in a rank's gradient, which is checked for over the whole bucket before
anything is compressed; a frame that fails to decode; a failed collective),
the failing rank still takes part in the length exchange with a failure
marker, so every rank fails in the same bucket instead of hanging; then every
rank restores the residues (Compressor.snapshot() at the first compression of
each parameter in the step, restore() on failure) and statistics to the start
of the step, sets ``state.step_error`` and fails the rest of the step's
buckets without communicating. DDP raises the error from ``backward()``; the
caller skips ``optimizer.step()``, zeroes the gradients and goes on, as if
that batch had never been drawn (python/README.md).
"""

import atexit
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

LAYER_TYPES = ("conv", "fc", "lstm", "other")
DEFAULT_BIN_SIZES = {"conv": 50, "fc": 500, "lstm": 500, "other": 500}

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
    """One parameter: its key, wire tensor id, layer type and compressor."""

    __slots__ = ("name", "tensor_id", "layer_type", "numel", "param", "compressor")


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
    """

    def __init__(self, process_group=None, model=None, codec="adacomp", bin_size=None,
                 bin_sizes=None, values="ternary", density=0.01, tau=1e-3, seed=0,
                 dense_types=(), layer_types=None):
        if codec not in CODECS:
            raise ValueError(f"unknown codec {codec!r}; one of {', '.join(CODECS)}")
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
        self._skip = None       # ids of the parameters seen in a step that failed before its end
        self.step_error = None  # the StepAborted of the current/last step, None if it went well
        self.transport_bytes = 0
        self._totals = {t: _Counters() for t in LAYER_TYPES}
        self._step = {t: _Counters() for t in LAYER_TYPES}
        self._last_step = {t: _Counters() for t in LAYER_TYPES}
        # The tensors of each bucket's last exchange (see _CommTensors below).
        self._comm_tensors = {}
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
            self._skip = None
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

    def _layout(self, bucket):
        """[(entry, offset, numel)] of the bucket's parameters, in bucket order."""
        buf = bucket.buffer()
        params = bucket.parameters()
        grads = bucket.gradients()
        total = buf.numel()
        layout = []
        views_ok = len(grads) == len(params)
        if views_ok:
            base = buf.data_ptr()
            for p, g in zip(params, grads):
                delta = g.data_ptr() - base
                if (delta % 4 or not g.is_contiguous() or g.numel() != p.numel()
                        or delta // 4 + g.numel() > total or delta < 0):
                    views_ok = False
                    break
                layout.append((self._entry(p), delta // 4, p.numel()))
        if not views_ok:  # DDP lays the bucket out in parameter order without gaps
            layout, off = [], 0
            for p in params:
                layout.append((self._entry(p), off, p.numel()))
                off += p.numel()
            if off != total:
                raise RuntimeError(f"adacomp: bucket {bucket.index()} holds {total} elements, its "
                                   f"parameters {off}; cannot map gradients to parameters")
        return [x for x in layout if x[2] > 0]

    def _gather(self, payload, failed, slot):
        """All-gathers every rank's payload; returns (list of uint8 arrays, lengths).

        ``slot`` (the bucket index) names the tensors kept for this exchange; they
        replace the ones of that slot's previous exchange, a step earlier."""
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        world = dist.get_world_size(group)
        my_len = -1 if failed else len(payload)
        if world == 1:
            if failed:
                return None, [-1]
            return [np.frombuffer(payload, dtype=np.uint8)], [my_len]
        length = torch.tensor([my_len], dtype=torch.int64)
        lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        # Every tensor handed to a collective stays referenced by the state (see
        # _keep_comm_tensors_past_exit): never freed by a Gloo worker thread.
        self._comm_tensors[slot] = [length, *lengths]
        dist.all_gather(lengths, length, group=group)
        lengths = [int(x.item()) for x in lengths]
        if min(lengths) < 0:
            return None, lengths
        longest = max(lengths)
        send = torch.zeros(longest, dtype=torch.uint8)
        send.numpy()[:len(payload)] = np.frombuffer(payload, dtype=np.uint8)
        recv = [torch.empty(longest, dtype=torch.uint8) for _ in range(world)]
        self._comm_tensors[slot] += [send, *recv]
        dist.all_gather(recv, send, group=group)
        self.transport_bytes += world * (longest + 8)
        return [r.numpy() for r in recv], lengths

    def reduce_bucket(self, bucket):
        """Compresses, exchanges and averages one bucket in place; returns the bucket tensor.

        A step (the buckets of one backward pass, up to ``bucket.is_last()``)
        is atomic for this state: on any error in any bucket, on any rank, every
        compressor touched in the step gets its start-of-step residue, step
        counter and last_stats back, the step's statistics are dropped, and
        StepAborted is raised on every rank (the exchange tells every rank).
        The remaining buckets of that step raise StepAborted at once, without
        any communication, so that DDP can finish its backward pass.
        """
        with self._lock:
            ids = [id(p) for p in bucket.parameters()]
            if self._skip is not None:
                if not any(i in self._skip for i in ids):  # the rest of the failed step
                    self._skip.update(ids)
                    if bucket.is_last():
                        self._skip = None
                    err = self.step_error
                    raise StepAborted(f"adacomp hook: bucket {bucket.index()} skipped, step "
                                      f"{err.step} was aborted in bucket {err.bucket}: {err}",
                                      bucket=bucket.index(), step=err.step,
                                      failed_ranks=err.failed_ranks)
                self._skip = None  # a parameter seen twice: a new step
            if self._open is not None and any(i in self._open["seen"] for i in ids):
                # A parameter seen twice: the last step never reached its last bucket (its
                # backward failed outside the hook) and its gradient was not applied; undo it.
                self._rollback_step()
            if self._open is None:
                self._begin_step()
            self._open["seen"].update(ids)
            try:
                return self._reduce_bucket(bucket)
            except BaseException as exc:
                seen = self._open["seen"]
                self._rollback_step()
                if not isinstance(exc, Exception):
                    raise
                if not isinstance(exc, StepAborted):
                    msg = (f"adacomp hook: bucket {bucket.index()} of step {self.steps} failed: "
                           f"{type(exc).__name__}: {exc}; {_ROLLED_BACK}")
                    aborted = StepAborted(msg, bucket=bucket.index(), step=self.steps,
                                          failed_ranks=None)
                    aborted.__cause__ = exc
                    exc = aborted
                self.step_error = exc
                if not bucket.is_last():
                    self._skip = seen
                raise exc from exc.__cause__

    def abort_step(self):
        """Rolls back a step whose backward pass did not reach the last bucket.

        The hook does this itself when it raises; call it only if backward failed
        outside the hook (e.g. in your own autograd code) after some buckets were
        reduced on every rank. Returns whether a step was open.
        """
        with self._lock:
            if self._open is None:
                return False
            self._rollback_step()
            return True

    def _begin_step(self):
        self.step_error = None
        self._open = {"buckets": self.buckets, "transport_bytes": self.transport_bytes,
                      "touched": {}, "seen": set()}

    def _snapshot(self, layout):
        touched = self._open["touched"]
        for e, _, _ in layout:
            if id(e) in touched:
                continue
            e.compressor.snapshot()
            touched[id(e)] = e

    def _rollback_step(self):
        touched = self._open["touched"]
        self.buckets = self._open["buckets"]
        self.transport_bytes = self._open["transport_bytes"]
        self._step = {t: _Counters() for t in LAYER_TYPES}
        self._open = None
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

    def _reduce_bucket(self, bucket):
        buf = bucket.buffer()
        if buf.dtype != torch.float32 or buf.device.type != "cpu":
            raise ValueError(f"adacomp hook: bucket is {buf.dtype} on {buf.device}; it works "
                             f"on float32 CPU gradients")
        layout = self._layout(bucket)
        arr = buf.detach().numpy()
        frames, error = [], None
        step_stats = []
        # The whole bucket is checked before anything in it is compressed.
        bad = _adacomp.find_non_finite(arr)
        if bad is not None:
            where = next(((e, bad - off) for e, off, n in layout if off <= bad < off + n),
                         (None, bad))
            what = (f"parameter {where[0].name!r}, element {where[1]}" if where[0] is not None
                    else f"bucket element {bad}")
            error = ValueError(f"adacomp hook: non-finite gradient ({float(arr[bad])}) in {what}")
        else:
            self._snapshot(layout)
            for e, off, n in layout:
                try:
                    frames.append(e.compressor.compress(arr[off:off + n]))
                except Exception as exc:  # still join the exchange: peers fail, not hang
                    error = type(exc)(f"adacomp hook: parameter {e.name!r}: {exc}")
                    break
                step_stats.append(e.compressor.last_stats)
        payload = b"".join(frames)
        gathered, lengths = self._gather(payload, error is not None, bucket.index())
        if error is not None or gathered is None:
            bad = [r for r, n in enumerate(lengths) if n < 0]
            why = f"here: {type(error).__name__}: {error}" if error else "see their error"
            raise StepAborted(f"adacomp hook: rank(s) {bad} failed in bucket {bucket.index()} of "
                              f"step {self.steps} ({why}); {_ROLLED_BACK}",
                              bucket=bucket.index(), step=self.steps, failed_ranks=bad) from error
        for (e, _, _), s in zip(layout, step_stats):
            self._step[e.layer_type].add_compress(s)
        # Per parameter, one call averages every rank's frame in rank order: bit for bit
        # zeroing the slice, adding the frames rank after rank and dividing by the world
        # size. The gradient is not state: on a failure below the step is skipped.
        covered = 0  # elements of the bucket outside every parameter's slice are zeroed
        for _, off, n in sorted(layout, key=lambda x: x[1]):
            if off > covered:
                arr[covered:off] = 0
            covered = max(covered, off + n)
        if covered < arr.size:
            arr[covered:] = 0
        views = [memoryview(data)[:n_r] for data, n_r in zip(gathered, lengths)]
        pos = [0] * len(views)  # each rank's next frame
        for e, off, n in layout:
            try:
                used = _adacomp.decompress_average([v[p:] for v, p in zip(views, pos)],
                                                   arr[off:off + n], e.tensor_id)
            except (FrameError, ValueError) as exc:
                r = getattr(exc, "frame", None)
                if r is None:
                    raise
                why = str(exc)
                prefix = f"frame {r} of {len(views)}: "
                if why.startswith(prefix):
                    why = why[len(prefix):]
                raise type(exc)(f"rank {r}, bucket {bucket.index()}, parameter "
                                f"{e.name!r}: {why}") from None
            c = self._step[e.layer_type]
            for r, u in enumerate(used):
                pos[r] += u
                c.gathered_elements += n
                c.gathered_bytes += u
        for r, (p, n_r) in enumerate(zip(pos, lengths)):
            if p != n_r:
                raise FrameError(f"rank {r}, bucket {bucket.index()}: {n_r - p} bytes left "
                                 f"after the last parameter's frame")
        self.buckets += 1
        if bucket.is_last():
            self._commit_step()
        return buf


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
        _adacomp._keep_past_exit(state._comm_tensors)


def _total(counters):
    c = _Counters()
    for v in counters.values():
        c.merge(v)
    return c


def hook(state, bucket):
    """DDP communication hook: ``ddp_model.register_comm_hook(state, adacomp.torch.hook)``.

    ``state`` is an AdaCompState. Returns a completed future of the averaged bucket.
    """
    fut = torch.futures.Future()
    try:
        fut.set_result(state.reduce_bucket(bucket))
    except Exception as exc:  # noqa: BLE001 - handed to DDP, which raises it from backward()
        # Raising here would leave DDP's reducer mid-iteration, unable to run the next
        # one; a failed future lets it finish the backward pass and raise from there.
        # (A callback that raises marks the future failed for C++ too, so DDP's wait()
        # raises exc's message; Future.set_exception only fails it for Python callers.)
        def fail(_, exc=exc):
            raise exc
        child = fut.then(fail)
        fut.set_result(None)
        return child
    return fut


def register(ddp_model, **kwargs):
    """Creates an AdaCompState for ``ddp_model`` (keyword arguments as AdaCompState's),
    registers the hook on it and returns the state."""
    kwargs.setdefault("process_group", ddp_model.process_group)
    state = AdaCompState(model=ddp_model.module, **kwargs)
    ddp_model.register_comm_hook(state, hook)
    return state
