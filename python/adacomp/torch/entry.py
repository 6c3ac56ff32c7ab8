"""One parameter the hook serves (_Entry: its key, wire tensor id, layer type and
compressor) and the generator seed of its compressor."""


def _mix_seed(seed, rank, tensor_id):
    """A distinct 64-bit generator seed per (seed, rank, tensor) (splitmix64 finaliser)."""
    z = (seed * 0x9E3779B97F4A7C15 + rank * 0xBF58476D1CE4E5B9 + tensor_id + 1) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)


class _Entry:
    """One parameter: its key, wire tensor id, layer type and compressor."""

    __slots__ = ("name", "tensor_id", "layer_type", "numel", "param", "compressor")
