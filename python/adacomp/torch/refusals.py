"""What the hook refuses when it is set up, with a message a person can act on,
rather than failing every step later: a parameter it cannot compress (CUDA or
meta device, float64) and a process group whose backend cannot carry its
messages."""

import torch
import torch.distributed as dist


def _check_parameter(name, p):
    """Refuses, when the hook is set up, a parameter whose gradients it cannot compress
    (rather than failing every step later)."""
    if p.device.type != "cpu":
        raise ValueError(
            f"adacomp hook: parameter {name!r} is on {p.device}; this build compresses CPU "
            f"gradients only (no GPU path has run on a GPU yet). Train on CPU with the Gloo "
            f"backend, or leave this model without the hook")
    if p.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(
            f"adacomp hook: parameter {name!r} is {p.dtype}; the hook compresses float32, "
            f"float16 and bfloat16 gradients (model.float() for float32)")


def _check_group(process_group):
    """Refuses a process group whose backend cannot carry the hook's messages."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    backend = dist.get_backend(process_group)
    if backend != "gloo":
        raise ValueError(
            f"adacomp hook: the process group's backend is {backend!r}; the hook sends its "
            f"frames as CPU byte tensors, which needs the 'gloo' backend "
            f"(dist.init_process_group('gloo'))")
