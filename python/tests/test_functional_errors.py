"""The functional API's state and errors: Compressor.state_dict() round trips and
refusals (StateDictTest); wrong inputs, non-finite gradients and corrupt frames raise
and change nothing (ErrorsTest).
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_functional_errors
"""

import unittest

import numpy as np
import torch

import adacomp
from test_functional import sparse_gradient


class StateDictTest(unittest.TestCase):
    def test_round_trip_continues_identically(self):
        rng = np.random.default_rng(4)
        n = 1234
        a = adacomp.Compressor(n, bin_size=50)
        for _ in range(3):
            a.compress(sparse_gradient(rng, n))
        sd = a.state_dict()
        self.assertEqual(sd["elements"], n)
        b = adacomp.Compressor(n, bin_size=50)
        b.load_state_dict(sd)
        np.testing.assert_array_equal(a.residue, b.residue)
        g = sparse_gradient(rng, n)
        self.assertEqual(a.compress(g), b.compress(g))
        np.testing.assert_array_equal(a.residue, b.residue)

    def test_mismatched_state_is_rejected_and_changes_nothing(self):
        rng = np.random.default_rng(6)
        a = adacomp.Compressor(100, bin_size=10)
        a.compress(sparse_gradient(rng, 100))
        b = adacomp.Compressor(200, bin_size=10)
        b.compress(sparse_gradient(rng, 200))
        before = b.residue.copy()
        with self.assertRaises(ValueError):
            b.load_state_dict(a.state_dict())
        sd = a.state_dict()
        sd["elements"] = 200  # lie about the size: the C++ check must still refuse
        with self.assertRaises(ValueError):
            b.load_state_dict(sd)
        with self.assertRaises(ValueError):
            b._load_state(b"\x00" * 7)
        np.testing.assert_array_equal(b.residue, before)


class ErrorsTest(unittest.TestCase):
    def setUp(self):
        self.n = 100
        self.comp = adacomp.Compressor(self.n, bin_size=10, tensor_id=5)
        rng = np.random.default_rng(8)
        self.comp.compress(sparse_gradient(rng, self.n))
        self.residue = self.comp.residue.copy()
        self.frame = self.comp.compress(sparse_gradient(rng, self.n))
        self.residue = self.comp.residue.copy()

    def assert_state_unchanged(self):
        np.testing.assert_array_equal(self.comp.residue, self.residue)

    def test_bad_config(self):
        with self.assertRaises(ValueError):
            adacomp.Compressor(10, bin_size=0)
        with self.assertRaises(ValueError):
            adacomp.Compressor(10, codec="nope")
        with self.assertRaises(ValueError):
            adacomp.Compressor(10, values="int3")
        with self.assertRaises(ValueError):
            adacomp.Compressor(10, codec="topk", density=0.0)

    def test_wrong_dtype(self):
        with self.assertRaisesRegex(ValueError, "float32"):
            self.comp.compress(np.zeros(self.n, dtype=np.float64))
        with self.assertRaisesRegex(ValueError, "float32"):
            self.comp.compress(torch.zeros(self.n, dtype=torch.float64))
        self.assert_state_unchanged()

    def test_wrong_size(self):
        with self.assertRaisesRegex(ValueError, "elements"):
            self.comp.compress(np.zeros(self.n + 1, dtype=np.float32))
        self.assert_state_unchanged()

    def test_non_contiguous(self):
        with self.assertRaisesRegex(ValueError, "contiguous"):
            self.comp.compress(np.zeros(2 * self.n, dtype=np.float32)[::2])
        with self.assertRaisesRegex(ValueError, "contiguous"):
            self.comp.compress(torch.zeros(10, 10).t())
        self.assert_state_unchanged()

    def test_nan_and_inf(self):
        for bad in (np.nan, np.inf, -np.inf):
            g = np.ones(self.n, dtype=np.float32)
            g[37] = bad
            with self.assertRaises(ValueError):
                self.comp.compress(g)
            self.assertEqual(adacomp.find_non_finite(g), 37)
        self.assertIsNone(adacomp.find_non_finite(np.ones(3, np.float32)))
        self.assert_state_unchanged()

    def test_corrupt_frames_raise_frame_error_and_leave_out_untouched(self):
        out = np.full(self.n, 2.5, dtype=np.float32)
        bad = bytearray(self.frame)
        bad[len(bad) // 2] ^= 0x10
        cases = {
            "flipped bit": bytes(bad),
            "truncated": self.frame[:-3],
            "empty": b"",
            "header only": self.frame[:6],
            "garbage": bytes(range(64)),
        }
        for what, frame in cases.items():
            with self.assertRaises(adacomp.FrameError, msg=what) as ctx:
                adacomp.decompress_add(frame, out)
            self.assertTrue(str(ctx.exception), what)
            with self.assertRaises(adacomp.FrameError, msg=what):
                adacomp.inspect(frame)
        np.testing.assert_array_equal(out, np.full(self.n, 2.5, dtype=np.float32))
        self.assertTrue(issubclass(adacomp.FrameError, ValueError))

    def test_frame_limits_and_tensor_id(self):
        out = np.zeros(self.n, dtype=np.float32)
        with self.assertRaises(ValueError):
            adacomp.decompress_add(self.frame, out, expected_tensor_id=6)
        with self.assertRaises(adacomp.FrameError):
            adacomp.decompress_add(self.frame, out, max_frame_bytes=len(self.frame) - 1)
        with self.assertRaises(adacomp.FrameError):
            adacomp.decompress_add(self.frame, out, max_elements=self.n - 1)
        np.testing.assert_array_equal(out, np.zeros(self.n, dtype=np.float32))

    def test_bad_out(self):
        with self.assertRaises(ValueError):
            adacomp.decompress_add(self.frame, np.zeros(self.n + 1, np.float32))
        with self.assertRaisesRegex(ValueError, "float32"):
            adacomp.decompress_add(self.frame, np.zeros(self.n, np.float64))
        ro = np.zeros(self.n, np.float32)
        ro.flags.writeable = False
        with self.assertRaises(ValueError):
            adacomp.decompress_add(self.frame, ro)
        with self.assertRaisesRegex(ValueError, "contiguous"):
            adacomp.decompress_add(self.frame, np.zeros(2 * self.n, np.float32)[::2])
        with self.assertRaises(ValueError):
            adacomp.decompress_add(self.frame, b"\x00" * (4 * self.n))  # bytes are read-only


if __name__ == "__main__":
    unittest.main()
