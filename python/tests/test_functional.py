"""Tests of the functional API (adacomp.Compressor, decompress_add, inspect).

The C++ results are checked against a plain-loop reference of docs/algorithm.md section 2
written here, independently of the core: selected set, signs, scale, residue.
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_functional
"""

import math
import threading
import unittest

import numpy as np
import torch

import adacomp


def reference_adacomp_step(residue, grad, bin_size, values="ternary"):
    """One AdaComp step by docs/algorithm.md section 2, in scalar loops.

    Returns (gq, new_residue, selected_indices, scale, per_bin_counts), float32.
    """
    n = len(grad)
    g = np.empty(n, dtype=np.float32)
    h = np.empty(n, dtype=np.float32)
    for j in range(n):
        g[j] = np.float32(residue[j]) + np.float32(grad[j])
        h[j] = g[j] + np.float32(grad[j])
    bins = (n + bin_size - 1) // bin_size
    gmax = []
    selected = []
    counts = []
    for b in range(bins):
        lo, hi = b * bin_size, min(n, (b + 1) * bin_size)
        m = np.float32(0.0)
        for j in range(lo, hi):
            if abs(g[j]) > m:
                m = abs(g[j])
        gmax.append(float(m))
        c = 0
        for j in range(lo, hi):
            if abs(h[j]) >= m and g[j] != 0:
                selected.append(j)
                c += 1
        counts.append(c)
    # the maxima summed by groups of 4096 bins, then the group sums (in double)
    groups = [sum(gmax[i:i + 4096]) for i in range(0, bins, 4096)]
    scale = np.float32(sum(groups) / bins) if bins else np.float32(0)
    gq = np.zeros(n, dtype=np.float32)
    for j in selected:
        if values == "ternary":
            gq[j] = scale if g[j] > 0 else -scale
        elif values == "fp16":
            gq[j] = np.float32(np.float16(g[j]))
        else:
            gq[j] = g[j]
    new_residue = (g - gq).astype(np.float32)
    return gq, new_residue, selected, scale, counts


def sparse_gradient(rng, n, scale=1.0):
    """Random gradient with some exact zeros and a few large entries."""
    x = rng.standard_normal(n).astype(np.float32) * np.float32(scale)
    x[rng.random(n) < 0.1] = 0.0
    x[rng.integers(0, n, size=max(1, n // 100))] *= np.float32(8.0)
    return x


class AdaCompAgainstReferenceTest(unittest.TestCase):
    def check_steps(self, n, bin_size, values, steps=4, seed=1):
        rng = np.random.default_rng(seed)
        comp = adacomp.Compressor(n, bin_size=bin_size, values=values, tensor_id=7)
        residue = np.zeros(n, dtype=np.float32)
        for step in range(steps):
            grad = sparse_gradient(rng, n, scale=0.01 * (step + 1))
            frame = comp.compress(grad)
            gq, residue, selected, scale, counts = reference_adacomp_step(
                residue, grad, bin_size, values)
            msg = f"n={n} L={bin_size} values={values} step={step}"
            decoded = np.zeros(n, dtype=np.float32)
            used = adacomp.decompress_add(frame, decoded, expected_tensor_id=7)
            self.assertEqual(used, len(frame), msg)
            # Selected set and signs exactly; values to the scale's last bit.
            self.assertEqual(list(np.flatnonzero(decoded)), selected, msg)
            np.testing.assert_array_equal(np.sign(decoded), np.sign(gq), err_msg=msg)
            np.testing.assert_allclose(decoded, gq, rtol=1e-6, atol=0, err_msg=msg)
            np.testing.assert_allclose(comp.residue, residue, rtol=1e-6,
                                       atol=1e-6 * max(float(scale), 1e-30), err_msg=msg)
            # Nothing lost: Gq + R_new == R_old + dW (up to rounding) is implied
            # by the reference; check the stats and the header.
            st = comp.last_stats
            self.assertEqual(st["elements"], n)
            self.assertEqual(st["selected"], len(selected))
            self.assertEqual(st["bins"], len(counts))
            self.assertEqual(st["frame_bytes"], len(frame))
            self.assertAlmostEqual(st["compression_rate"], 32.0 * n / (8.0 * len(frame)))
            hist = [0] * 17
            for c in counts:
                hist[min(c, 16)] += 1
            self.assertEqual(st["bin_histogram"], hist)
            info = adacomp.inspect(frame)
            self.assertEqual(info["codec"], "adacomp")
            self.assertEqual(info["tensor_id"], 7)
            self.assertEqual(info["elements"], n)
            self.assertEqual(info["selected"], len(selected))
            self.assertEqual(info["frame_bytes"], len(frame))
            self.assertEqual(info["bin_size"], bin_size)
            self.assertEqual(info["values"], values)
            if values == "ternary":
                self.assertAlmostEqual(info["scale"], float(scale), delta=1e-6 * float(scale))

    def test_ternary_bins_of_50(self):
        self.check_steps(1003, 50, "ternary")

    def test_ternary_bins_of_500_short_last_bin(self):
        self.check_steps(2345, 500, "ternary")

    def test_ternary_bin_of_one_and_whole_tensor(self):
        self.check_steps(64, 1, "ternary", steps=2)
        self.check_steps(300, 1000, "ternary", steps=3)

    def test_fp16_and_fp32_values(self):
        self.check_steps(777, 50, "fp16")
        self.check_steps(777, 50, "fp32")

    def test_all_zero_gradient_selects_nothing(self):
        comp = adacomp.Compressor(100, bin_size=10)
        frame = comp.compress(np.zeros(100, dtype=np.float32))
        self.assertEqual(comp.last_stats["selected"], 0)
        out = np.ones(100, dtype=np.float32)
        adacomp.decompress_add(frame, out)
        np.testing.assert_array_equal(out, np.ones(100, dtype=np.float32))

    def test_decompress_add_accumulates(self):
        rng = np.random.default_rng(5)
        n = 500
        comps = [adacomp.Compressor(n, bin_size=50, tensor_id=3) for _ in range(3)]
        grads = [sparse_gradient(rng, n) for _ in comps]
        frames = [c.compress(g) for c, g in zip(comps, grads)]
        base = rng.standard_normal(n).astype(np.float32)
        out = base.copy()
        expect = base.copy()
        for g, f in zip(grads, frames):
            gq, _, _, _, _ = reference_adacomp_step(np.zeros(n, np.float32), g, 50)
            expect = expect + gq
            adacomp.decompress_add(f, out, expected_tensor_id=3)
        np.testing.assert_allclose(out, expect, rtol=1e-6, atol=1e-6)

    def test_concatenated_frames_walk(self):
        rng = np.random.default_rng(9)
        sizes = [10, 501, 64]
        comps = [adacomp.Compressor(n, bin_size=50, tensor_id=i) for i, n in enumerate(sizes)]
        frames = [c.compress(sparse_gradient(rng, n)) for c, n in zip(comps, sizes)]
        buf = b"".join(frames)
        walked = list(adacomp.iter_frames(buf))
        self.assertEqual([i["tensor_id"] for _, i in walked], [0, 1, 2])
        self.assertEqual([o for o, _ in walked], [0, len(frames[0]), len(frames[0]) + len(frames[1])])
        pos = 0
        for i, n in enumerate(sizes):
            out = np.zeros(n, np.float32)
            pos += adacomp.decompress_add(memoryview(buf)[pos:], out, expected_tensor_id=i)
            ref = np.zeros(n, np.float32)
            adacomp.decompress_add(frames[i], ref)
            np.testing.assert_array_equal(out, ref)
        self.assertEqual(pos, len(buf))

    def test_multidimensional_and_torch_inputs(self):
        rng = np.random.default_rng(11)
        grad = sparse_gradient(rng, 6 * 5 * 4).reshape(6, 5, 4)
        a = adacomp.Compressor(grad.size, bin_size=50)
        b = adacomp.Compressor(grad.size, bin_size=50)
        t = torch.from_numpy(grad.copy()).requires_grad_(True)
        fa = a.compress(grad)
        fb = b.compress(t)
        self.assertEqual(fa, fb)
        out = torch.zeros(6, 5, 4)
        adacomp.decompress_add(fb, out)
        ref = np.zeros(grad.size, np.float32)
        adacomp.decompress_add(fa, ref)
        np.testing.assert_array_equal(out.numpy().ravel(), ref)

    def test_threads_on_distinct_compressors(self):
        rng = np.random.default_rng(13)
        n = 20000
        grads = [sparse_gradient(rng, n) for _ in range(4)]
        serial = [adacomp.Compressor(n, bin_size=50).compress(g) for g in grads]
        results = [None] * 4

        def work(i):
            results[i] = adacomp.Compressor(n, bin_size=50).compress(grads[i])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(results, serial)


class OtherCodecsTest(unittest.TestCase):
    def test_dense_round_trip(self):
        rng = np.random.default_rng(2)
        g = rng.standard_normal(1000).astype(np.float32)
        comp = adacomp.Compressor(1000, codec="dense")
        out = np.zeros(1000, np.float32)
        adacomp.decompress_add(comp.compress(g), out)
        np.testing.assert_array_equal(out, g)
        self.assertEqual(comp.last_stats["selected"], 1000)
        self.assertEqual(comp.residue.size, 0)

    def test_topk_keeps_largest(self):
        rng = np.random.default_rng(3)
        n = 1000
        g = rng.standard_normal(n).astype(np.float32)
        comp = adacomp.Compressor(n, codec="topk", density=0.02)
        out = np.zeros(n, np.float32)
        adacomp.decompress_add(comp.compress(g), out)
        k = math.ceil(0.02 * n)
        largest = set(np.argsort(-np.abs(g))[:k].tolist())
        self.assertEqual(set(np.flatnonzero(out).tolist()), largest)
        np.testing.assert_array_equal(out[list(largest)], g[list(largest)])
        # The residue keeps the rest.
        np.testing.assert_array_equal(comp.residue + out, g)


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
