"""The exchange thread of a state (_exchange_thread, started by _enqueue, ended by
_close), and what the module does at interpreter exit for every live state
(_LIVE_STATES): join the thread and keep the tensors of its collectives alive past it."""

import atexit
import threading
import weakref

# torch first, as the single module did: atexit runs the handler registered last
# first, so _keep_comm_tensors_past_exit runs before any of torch's.
import torch.distributed  # noqa: F401

from .. import _adacomp


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


def _enqueue(state, ex):
    """Hands exchange ex to the state's thread, starting the thread if none runs."""
    with state._cv:
        state._inflight.append(ex)
        state._closing = False
        if state._thread is None or not state._thread.is_alive():
            state._thread = threading.Thread(target=_exchange_thread, args=(state,),
                                             name="adacomp-exchange", daemon=True)
            state._thread.start()
        state._cv.notify_all()


def _close(state, timeout):
    """AdaCompState.close()."""
    state.wait_idle(timeout)
    with state._cv:
        state._closing = True
        state._cv.notify_all()
        t = state._thread
    if t is not None:
        t.join(timeout)
        return not t.is_alive()
    return True
