"""StepAborted and StepsKeepFailing, what a bucket's future holds when its step failed (_Failed), and the
messages of the three ways a bucket fails: skipped, a failed exchange, a frame that
fails to decode."""

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


class StepsKeepFailing(RuntimeError):
    """Raised instead of a StepAborted when ``max_failed_steps`` steps in a row have
    failed: the run would otherwise go on skipping every step, never updating the
    weights. The step was rolled back like the others; ``state.step_error`` is None,
    so the skip-the-step loop (python/README.md) raises. ``__cause__``: the last
    step's StepAborted."""

    def __init__(self, message, failed_steps):
        super().__init__(message)
        self.failed_steps = failed_steps


def _keep_failing(count, last):
    exc = StepsKeepFailing(f"adacomp hook: {count} steps in a row failed; stopping rather "
                           f"than training on without updates. The last: {last}", count)
    exc.__cause__ = last
    return exc


class _Failed:
    """The value of a bucket's inner future when its step failed (see hook())."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _skipped(index, step, step_error):
    """A bucket of a step that failed before it was settled (step_error: the state's
    step_error, None when the step ended without one, e.g. superseded by
    load_state_dict)."""
    err = step_error
    if err is None:
        err = StepAborted(f"adacomp hook: bucket {index} skipped: the step was "
                          f"rolled back", bucket=index, step=step)
    return StepAborted(f"adacomp hook: bucket {index} skipped, step {err.step} was "
                       f"aborted in bucket {err.bucket}: {err}", bucket=index,
                       step=err.step, failed_ranks=err.failed_ranks)


def _exchange_failed(index, step, comm_error, own_error, failed_ranks):
    """The bucket's exchange failed (comm_error), or ranks reported a failure in it
    (failed_ranks; own_error: this rank's, if it is one of them)."""
    if comm_error is not None:
        why = f"the exchange failed: {type(comm_error).__name__}: {comm_error}"
        cause, bad = comm_error, None
    else:
        cause, bad = own_error, failed_ranks
        here = (f"here: {type(own_error).__name__}: {own_error}" if own_error
                else "see their error")
        why = f"rank(s) {bad} failed in bucket {index} of step {step} ({here})"
    exc = StepAborted(f"adacomp hook: {why}; {_ROLLED_BACK}", bucket=index,
                      step=step, failed_ranks=bad)
    exc.__cause__ = cause
    return exc


def _decode_failed(index, step, error):
    """Every rank's message of the bucket arrived, and decoding them raised error."""
    exc = StepAborted(f"adacomp hook: bucket {index} of step {step} failed: "
                      f"{type(error).__name__}: {error}; {_ROLLED_BACK}", bucket=index,
                      step=step, failed_ranks=None)
    exc.__cause__ = error
    return exc
