"""The DDP communication hook: hook() for ``ddp_model.register_comm_hook``, and
register(), which makes the state and registers the hook in one call."""

from .errors import _Failed
from .state import AdaCompState


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
    state.track_usage(ddp_model)
    ddp_model.register_comm_hook(state, hook)
    return state
