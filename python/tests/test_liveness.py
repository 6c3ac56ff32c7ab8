"""adacomp.torch.Heartbeat: which rank stopped. Ranks are Heartbeat objects of one
process on a real TCPStore (each with its own client, as the examples use it), or on
a store that never answers; a stopped rank is one whose object stopped beating
without leave(), as a killed or frozen process would."""

import datetime
import os
import sys
import threading
import unittest

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from adacomp.torch import Heartbeat  # noqa: E402
from ddp_test_util import free_port  # noqa: E402

INTERVAL = 0.2  # a beat every 0.2 s, read 0.5 s apart
TIMEOUT = datetime.timedelta(seconds=10)


class _SilentStore:
    """A store whose host froze: every call blocks until the test ends."""

    def __init__(self):
        self.release = threading.Event()

    def add(self, key, n):
        self.release.wait()
        raise RuntimeError("released")


class HeartbeatTest(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        self.master = dist.TCPStore("127.0.0.1", self.port, 3, True, TIMEOUT,
                                    wait_for_workers=False)
        self.beats = [self._beat(r) for r in range(3)]

    def tearDown(self):
        for hb in self.beats:
            hb.close()

    def _beat(self, rank, world=3):
        client = dist.TCPStore("127.0.0.1", self.port, world, False, TIMEOUT)
        return Heartbeat(client, rank, world, interval=INTERVAL, answer_timeout=2.0).start()

    def test_nobody_stopped(self):
        self.assertEqual(self.beats[0].stopped(), [])
        self.assertEqual(self.beats[1].stopped(), [])
        self.assertIn("the link, not a rank, failed", self.beats[0].describe())
        self.assertGreater(self.beats[0].beats, 2)

    def test_names_the_stopped_rank(self):
        self.beats[2].close()  # killed or frozen: its counter stays where it is
        self.assertEqual(self.beats[0].stopped(), [2])
        self.assertEqual(self.beats[1].stopped(), [2])
        text = self.beats[0].describe()
        self.assertIn("rank 2 stopped", text)
        self.assertIn("gone or frozen", text)

    def test_names_several(self):
        self.beats[1].close()
        self.beats[2].close()
        self.assertEqual(self.beats[0].stopped(), [1, 2])
        self.assertIn("ranks 1, 2 stopped", self.beats[0].describe())

    def test_a_rank_that_left_is_not_named(self):
        # Rank 1 reported the failure and left; rank 2 froze: only 2 is named.
        self.beats[1].leave()
        self.beats[2].close()
        self.assertEqual(self.beats[0].stopped(), [2])

    def test_store_gone(self):
        del self.master  # the store's host died with it
        text = self.beats[0].describe()
        self.assertIn("the rendezvous store does not answer either", text)

    def test_store_frozen(self):
        store = _SilentStore()
        hb = Heartbeat(store, 0, 2, interval=INTERVAL, answer_timeout=0.3)
        try:
            t = threading.Thread(target=lambda: self.assertIn(
                "does not answer", hb.describe()), daemon=True)
            t.start()
            t.join(5)
            self.assertFalse(t.is_alive(), "describe() waited on a silent store")
        finally:
            store.release.set()

    def test_prefixes_keep_attempts_apart(self):
        # A rank that left in an earlier attempt (same store, other prefix) and froze in
        # this one is named.
        client = dist.TCPStore("127.0.0.1", self.port, 3, False, TIMEOUT)
        Heartbeat(client, 2, 3, interval=INTERVAL, prefix="attempt0/").leave()
        a1 = [Heartbeat(dist.TCPStore("127.0.0.1", self.port, 3, False, TIMEOUT), r, 3,
                        interval=INTERVAL, prefix="attempt1/").start() for r in range(3)]
        self.beats += a1
        a1[2].close()
        self.assertEqual(a1[0].stopped(), [2])

    def test_bad_settings(self):
        with self.assertRaisesRegex(ValueError, "rank 3 outside a world of 3"):
            Heartbeat(None, 3, 3)
        with self.assertRaisesRegex(ValueError, "must be positive"):
            Heartbeat(None, 0, 3, interval=0)


if __name__ == "__main__":
    unittest.main()
