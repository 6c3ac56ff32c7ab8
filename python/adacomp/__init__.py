"""AdaComp gradient compression for Python, backed by the adacomp C++ core.

Functional API (numpy arrays or CPU torch tensors, float32, contiguous):

    import adacomp
    comp = adacomp.Compressor(grad.numel(), codec="adacomp", bin_size=500)
    frame = comp.compress(grad)          # bytes; the residue stays inside comp
    comp.last_stats                      # selected, frame_bytes, compression_rate, ...
    adacomp.decompress_add(frame, out)   # out += dequantized frame, in place
    adacomp.decompress_average([f0, f1], out)  # out = mean of the frames, in place
    adacomp.inspect(frame)               # header fields as a dict

PyTorch DistributedDataParallel hook: see ``adacomp.torch``.

No gradient data is copied between Python and C++: arrays are passed through
the buffer protocol (a CPU tensor's ``.numpy()`` is a zero-copy view) and the
GIL is released while the core runs. Errors raise ``ValueError`` for a bad
argument (wrong dtype, size, layout, NaN/Inf in a gradient) and
``adacomp.FrameError`` (a ``ValueError`` subclass) for a frame that fails
validation; a rejected frame leaves ``out`` untouched.
"""

from . import _adacomp

__all__ = [
    "Compressor",
    "FrameError",
    "decompress_add",
    "decompress_average",
    "decompress_average_messages",
    "inspect",
    "iter_frames",
    "find_non_finite",
    "CODECS",
    "VALUE_MODES",
    "__version__",
]

__version__ = _adacomp.__version__
FrameError = _adacomp.FrameError

CODECS = ("dense", "adacomp", "topk", "threshold", "onebit", "terngrad")
VALUE_MODES = ("ternary", "fp16", "fp32")


def _as_buffer(x, name):
    """Returns a buffer-protocol view of x without copying data.

    numpy arrays and bytes-like objects pass through; a torch tensor becomes
    its zero-copy numpy view (it must live on the CPU). Checks of dtype and
    layout are done by the C++ side, which names the problem.
    """
    mod = type(x).__module__
    if mod == "torch" or mod.startswith("torch."):
        if x.device.type != "cpu":
            raise ValueError(f"{name} is on device {x.device}; adacomp works on CPU tensors "
                             f"(move it with .cpu())")
        if x.is_sparse:
            raise ValueError(f"{name} is a sparse tensor; pass a dense float32 tensor")
        return x.detach().numpy()
    return x


class Compressor(_adacomp.Compressor):
    """The compressor of ONE tensor: its residue and settings.

    Args:
        elements: number of float32 elements of the tensor (any shape, flattened).
        codec: "adacomp" (default), "dense", "topk", "threshold", "onebit", "terngrad".
        bin_size: AdaComp bin size L_T (docs/algorithm.md section 2); 50 suits conv weights,
            500 fully-connected and LSTM weights.
        values: AdaComp value mode, "ternary" (default), "fp16" or "fp32".
        density: top-k density, 0 < density <= 1.
        tau: threshold codec's tau.
        seed: terngrad's generator seed.
        tensor_id: written into each frame (uint32); decoders may check it.
        threads: threads one compress() call may use for this tensor (1..256; AdaComp only,
            used above 2^18 elements). Frames and residue do not depend on it.

    Not thread-safe across concurrent calls on the same object (they queue on
    an internal lock); distinct objects may run in parallel threads.
    """

    def __init__(self, elements, codec="adacomp", bin_size=500, values="ternary",
                 density=0.01, tau=1e-3, seed=0, tensor_id=0, threads=1):
        super().__init__(int(elements), codec, int(bin_size), values, float(density), float(tau),
                         int(seed), int(tensor_id), int(threads))

    def compress(self, grad):
        """Compresses this step's gradient; returns the frame as bytes.

        grad: float32, C-contiguous, ``elements`` values (numpy array or CPU
        tensor; any shape). Updates the residue. On error (ValueError) neither
        the residue nor ``last_stats`` change.
        """
        return super().compress(_as_buffer(grad, "grad"))

    def snapshot(self):
        """Remembers the residue, step counter and last_stats, so that restore() can undo the
        compressions after it. adacomp copies nothing (its next compress() writes the new
        residue into a second buffer); the other codecs copy the residue into a buffer kept
        between calls."""
        super().snapshot()

    def restore(self):
        """Undoes every compress() since snapshot() and forgets the snapshot. Returns whether
        anything had changed. RuntimeError without a snapshot; load_state_dict() drops it."""
        return super().restore()

    def discard_snapshot(self):
        """Forgets the snapshot, keeping the compressions since."""
        super().discard_snapshot()

    def state_dict(self):
        """All mutable state (residue, generator) plus the settings it belongs to."""
        return {
            "codec": self.codec,
            "elements": self.elements,
            "tensor_id": self.tensor_id,
            "bin_size": self.bin_size,
            "values": self.values,
            "state": self._save_state(),
        }

    def load_state_dict(self, state):
        """Restores what state_dict() returned; ValueError (state unchanged) on a mismatch."""
        for key in ("codec", "elements"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(f"state_dict is for {key}={state[key]!r}, this compressor has "
                                 f"{key}={getattr(self, key)!r}")
        if "state" not in state:
            raise ValueError("state_dict has no 'state' entry")
        self._load_state(state["state"])

    def __repr__(self):
        return (f"adacomp.Compressor(elements={self.elements}, codec={self.codec!r}, "
                f"bin_size={self.bin_size}, values={self.values!r}, tensor_id={self.tensor_id}"
                + (f", threads={self.threads})" if self.threads != 1 else ")"))


def decompress_add(frame, out, expected_tensor_id=None, max_frame_bytes=None, max_elements=None):
    """Adds the dequantized frame at the start of ``frame`` into ``out``, in place.

    ``frame`` is bytes-like (more frames may follow it); ``out`` is a writable,
    contiguous float32 array or CPU tensor with the frame's element count.
    The frame is validated completely before ``out`` is touched. Returns the
    number of bytes the frame occupies, so concatenated frames can be walked.
    Raises FrameError for a corrupt or mismatched frame, ValueError for a bad ``out``.
    """
    return _adacomp.decompress_add(_as_buffer(frame, "frame"), _as_buffer(out, "out"),
                                   expected_tensor_id, max_frame_bytes, max_elements)


def decompress_average(frames, out, expected_tensor_id=None, max_frame_bytes=None,
                       max_elements=None, threads=1):
    """Writes over ``out`` the average of several frames of one tensor (e.g. every rank's).

    ``frames`` is a sequence of bytes-like objects (or CPU uint8 tensors), each
    starting at a frame (more bytes may follow it); they are read in place,
    not copied. ``out`` is as for decompress_add. The result is bit for bit
    zeroing ``out``, decompress_add of each frame in order, then dividing by
    ``len(frames)`` (in float32), in one pass over ``out``. Every frame is
    validated before ``out`` is touched. ``threads`` (1..256) spreads the
    validation and the additions over threads for large tensors; the result
    does not depend on it. Returns the list of the frames' lengths in bytes.
    Raises FrameError for a corrupt or mismatched frame (the message starts
    with "frame j of n", j its position in ``frames``), ValueError for a bad
    ``out``, a frame of the wrong size or an empty ``frames``; ``out`` is then untouched.
    """
    if not isinstance(frames, (list, tuple)):
        if isinstance(frames, (bytes, bytearray, memoryview, str)):
            raise ValueError("frames must be a sequence of bytes-like objects (one per frame), "
                             "not a single buffer; wrap it in a list")
        frames = list(frames)
    frames = [_as_buffer(f, f"frames[{j}]") for j, f in enumerate(frames)]
    return _adacomp.decompress_average(frames, _as_buffer(out, "out"), expected_tensor_id,
                                       max_frame_bytes, max_elements, int(threads))


def decompress_average_messages(messages, outs, tensor_ids):
    """Decodes several ranks' messages for a set of tensors at once.

    ``messages[r]`` is rank r's contribution: one frame per tensor, back to back,
    in the order of ``outs`` (bytes-like or CPU uint8 tensors, read in place).
    ``outs[k]`` (float32, writable) receives tensor k's average over the
    messages, bit for bit what ``decompress_average`` of the messages' k-th
    frames gives; ``tensor_ids[k]`` is the tensor id its frames must carry.
    Every frame is validated, and every message must end right after its last
    frame, before any ``out`` is written. Returns ``[[frame bytes of tensor k
    in message r for r] for k]``. Raises FrameError (ValueError for bad
    arguments) with attributes ``message`` (the rank) and ``tensor`` (k, or
    ``len(outs)`` for bytes left after a message's last frame); every ``out``
    is then untouched.
    """
    if isinstance(messages, (bytes, bytearray, memoryview, str)):
        raise ValueError("messages must be a sequence of bytes-like objects (one per rank)")
    messages = [_as_buffer(m, f"messages[{r}]") for r, m in enumerate(messages)]
    outs = [_as_buffer(o, f"outs[{k}]") for k, o in enumerate(outs)]
    return _adacomp.decompress_average_messages(messages, outs, [int(t) for t in tensor_ids])


def inspect(frame, expected_tensor_id=None, max_frame_bytes=None, max_elements=None):
    """Validates the frame at the start of ``frame`` and returns its header fields as a dict."""
    return _adacomp.inspect(_as_buffer(frame, "frame"), expected_tensor_id, max_frame_bytes,
                            max_elements)


def iter_frames(buffer):
    """Yields (offset, info) for each frame of a buffer of concatenated frames."""
    view = memoryview(_as_buffer(buffer, "buffer")).cast("B")
    pos = 0
    while pos < len(view):
        info = inspect(view[pos:])
        yield pos, info
        pos += info["frame_bytes"]


def find_non_finite(values):
    """Index of the first NaN/Inf in a float32 array, or None."""
    return _adacomp.find_non_finite(_as_buffer(values, "values"))
