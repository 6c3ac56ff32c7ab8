"""torch.nn.utils.clip_grad_norm_ and clip_grad_value_ for the parameters of a
DistributedOptimizer that runs its optimizer on each rank.

There, each rank compresses the step its optimizer makes from its own gradient,
and what DDP leaves in .grad after backward is the averaged *step*, not a
gradient: clipping it would be another algorithm, silently. So the call is taken
over: it clips each rank's own gradient at max_norm before the moments, over the
whole gradient (defer.py), from the next step on (this step's local steps were
made already; said once in a warning; Adam's moments of a first step, whose step
a clip does not change, are clipped then and there), changes nothing in .grad,
and returns this rank's gradient norm of the step. clip_grad_value_ is taken over
the same way: each rank's own gradient is clamped to [-clip_value, clip_value]
before its moments (before the norm clip, when there is one too), from the next
step on. Other parameters go to torch's functions.

The functions are replaced in torch.nn.utils and torch.nn.utils.clip_grad when the
first such optimizer is made. A script that bound torch's function to a name of
its own before that bypasses this; the optimizer's step() then finds .grad
changed after backward and raises, never applying a clipped averaged step."""

import weakref

import torch

_OWNERS = weakref.WeakSet()  # the DistributedOptimizers whose hook runs the optimizer
_ORIGINAL = {}  # torch's functions by name, once replaced


def take_over(owner):
    """Routes clip_grad_norm_ and clip_grad_value_ calls on owner's parameters to
    owner.clip_requested and owner.clip_value_requested."""
    _OWNERS.add(owner)
    if not _ORIGINAL:
        for name, fn in (("clip_grad_norm_", clip_grad_norm_),
                         ("clip_grad_value_", clip_grad_value_)):
            _ORIGINAL[name] = getattr(torch.nn.utils, name)
            setattr(torch.nn.utils, name, fn)
            setattr(torch.nn.utils.clip_grad, name, fn)


def _owner(params, what):
    """The DistributedOptimizer whose parameters these all are, or None if none is."""
    for owner in list(_OWNERS):
        mine = sum(1 for p in params if id(p) in owner._param_ids)
        if not mine:
            continue
        if mine != len(params):
            raise ValueError(
                f"{what}: some of these parameters are an adacomp DistributedOptimizer's, "
                f"whose hook clips each rank's gradient before its optimizer, and some are "
                f"not; clip the two sets in separate calls")
        return owner
    return None


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """torch.nn.utils.clip_grad_norm_, or, on a DistributedOptimizer's parameters whose
    hook runs the optimizer, the clip of each rank's own gradient (see the module)."""
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    owner = _owner(params, "clip_grad_norm_")
    if owner is not None:
        return owner.clip_requested(float(max_norm), float(norm_type))
    return _ORIGINAL["clip_grad_norm_"](params, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters, clip_value):
    """torch.nn.utils.clip_grad_value_, or, on a DistributedOptimizer's parameters whose
    hook runs the optimizer, the clamp of each rank's own gradient (see the module)."""
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    owner = _owner(params, "clip_grad_value_")
    if owner is not None:
        return owner.clip_value_requested(float(clip_value))
    return _ORIGINAL["clip_grad_value_"](params, clip_value)
