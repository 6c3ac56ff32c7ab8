"""Which rank stopped: a heartbeat per rank in a c10d store.

When a rank of a process group dies or freezes, every collective the others
start fails (Gloo: at once for a closed connection, after the group's timeout
for a frozen peer), but the error names an address at best, never the rank.
``Heartbeat`` answers that question. Each rank's thread adds 1 to its own
counter in a store every ``interval`` seconds, whatever the training thread is
doing (a rank blocked in a collective still beats; a killed or stopped one
does not). After a failure, ``stopped()`` reads every counter, waits
``2.5 x interval`` and reads them again: the ranks whose counters did not move,
and that did not say they were leaving (``leave()``), are gone or frozen.
Counters, not clocks: hosts need not agree on the time.

Use a store of its own (a second TCPStore client of the rendezvous store, as
the examples do), since the heartbeat thread calls it while training runs::

    hb = Heartbeat(dist.TCPStore(addr, port, is_master=False), rank, world).start()
    ...
    except RuntimeError:
        print(hb.describe())      # "rank 1 stopped: its heartbeat did not move in 2.5 s ..."
        hb.leave()
"""

import threading
import time

PREFIX = "adacomp/heartbeat/"


class Heartbeat:
    """This rank's heartbeat, and the reading of every rank's."""

    def __init__(self, store, rank, world, interval=1.0, answer_timeout=10.0, prefix=PREFIX):
        if not 0 <= rank < world:
            raise ValueError(f"Heartbeat: rank {rank} outside a world of {world}")
        if not interval > 0 or not answer_timeout > 0:
            raise ValueError("Heartbeat: interval and answer_timeout must be positive")
        self.store, self.rank, self.world = store, rank, world
        self.interval, self.answer_timeout = float(interval), float(answer_timeout)
        # Keys live as long as the store: a launcher that restarts the job on the same
        # store (torchrun's elastic restarts) needs a prefix per attempt.
        self.prefix = prefix
        self._lock = threading.Lock()  # one store call at a time from this object
        self._stop = threading.Event()
        self._thread = None
        self.beats = 0
        self.error = None  # the store error that stopped this rank's beating, if any

    def _key(self, what, rank):
        return f"{self.prefix}{what}/{rank}"

    def _add(self, key, n):
        with self._lock:
            return self.store.add(key, n)

    def start(self):
        """Beats once now (so every counter exists once start() returned on every rank),
        then every ``interval`` seconds on a daemon thread. Returns self."""
        self._add(self._key("beat", self.rank), 1)
        self.beats = 1
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.rank}",
                                        daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self._add(self._key("beat", self.rank), 1)
                self.beats += 1
            except Exception as e:  # the store is gone: nothing left to tell
                self.error = e
                return

    def close(self):
        """Stops beating (the counter stays where it is)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.answer_timeout)

    def leave(self):
        """Says that this rank is leaving on purpose (after a failure it has reported), so
        that peers still reading the heartbeats do not take it for a stopped rank; then
        stops beating. Never raises: the store may be gone too."""
        try:
            self._call(lambda: self._add(self._key("left", self.rank), 1))
        except Exception:
            pass
        self.close()

    def _call(self, fn):
        """fn() on a helper thread: its value, or TimeoutError when the store does not
        answer within answer_timeout (a frozen store host never would)."""
        box = {}

        def target():
            try:
                box["value"] = fn()
            except Exception as e:
                box["error"] = e

        t = threading.Thread(target=target, daemon=True)
        t.start()
        t.join(self.answer_timeout)
        if t.is_alive():
            raise TimeoutError(f"the store did not answer within {self.answer_timeout:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _read(self, what):
        # add(key, 0) reads a counter without waiting for it (get() would block on a
        # counter that was never written).
        return self._call(lambda: [self._add(self._key(what, r), 0) for r in range(self.world)])

    def stopped(self, wait=None):
        """The ranks other than this one whose heartbeat did not move during ``wait``
        seconds (default 2.5 x interval) and that did not call leave(). Raises
        TimeoutError or the store's error when the store itself does not answer."""
        wait = 2.5 * self.interval if wait is None else float(wait)
        before = self._read("beat")
        time.sleep(wait)  # this rank's own thread beats on meanwhile
        after = self._read("beat")
        left = self._read("left")
        return [r for r in range(self.world)
                if r != self.rank and after[r] == before[r] and not left[r]]

    def describe(self, wait=None):
        """One sentence naming the stopped ranks (or saying why it cannot)."""
        wait = 2.5 * self.interval if wait is None else float(wait)
        try:
            ranks = self.stopped(wait)
        except Exception as e:
            first = (str(e).strip().splitlines() or [""])[0][:200]
            return (f"the rendezvous store does not answer either ({type(e).__name__}: "
                    f"{first}): the rank or launcher that hosts it is gone or frozen")
        if not ranks:
            return (f"every other rank's heartbeat still moves (read {wait:g} s apart): "
                    f"the link, not a rank, failed")
        names = ", ".join(str(r) for r in ranks)
        return (f"rank{'s' if len(ranks) > 1 else ''} {names} stopped: "
                f"{'their heartbeats' if len(ranks) > 1 else 'its heartbeat'} did not move "
                f"in {wait:g} s (gone or frozen)")
