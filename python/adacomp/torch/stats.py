"""Statistics: the byte and element counters of one layer type (_Counters), and the
report AdaCompState.stats() returns."""

from .layers import LAYER_TYPES


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


def _per_type():
    """Zeroed counters, one per layer type."""
    return {t: _Counters() for t in LAYER_TYPES}


def _total(counters):
    c = _Counters()
    for v in counters.values():
        c.merge(v)
    return c


def _report(steps, buckets, transport_bytes, totals, last_step, auto=None):
    """The dict of AdaCompState.stats() (see there)."""
    out = {
        "steps": steps,
        "buckets": buckets,
        "transport_bytes": transport_bytes,
        "end_to_end": _total(totals).as_dict(),
        "per_type": {t: c.as_dict() for t, c in totals.items()},
        "last_step": {
            "end_to_end": _total(last_step).as_dict(),
            "per_type": {t: c.as_dict() for t, c in last_step.items()},
        },
    }
    if auto is not None:
        out["auto"] = {"dense_steps": auto.dense_steps, "codec_steps": auto.codec_steps,
                       "choices": list(auto.choices)}
    return out
