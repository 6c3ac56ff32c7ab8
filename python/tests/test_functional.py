"""Tests of the functional API (adacomp.Compressor, decompress_add, decompress_average, inspect).

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


def average_reference(frames, n):
    """decompress_average by hand: zero, decompress_add each frame in order, divide by the count."""
    acc = np.zeros(n, dtype=np.float32)
    for f in frames:
        adacomp.decompress_add(f, acc)
    return (acc / np.float32(len(frames))).astype(np.float32)


def assert_bits_equal(test, got, expect, msg=None):
    got = np.ascontiguousarray(got, dtype=np.float32).ravel()
    expect = np.ascontiguousarray(expect, dtype=np.float32).ravel()
    test.assertTrue(np.array_equal(got.view(np.uint32), expect.view(np.uint32)), msg)


def learner_frames(rng, n, count, tensor_id=4, steps=2, **config):
    """Each of `count` learners' last frame of one tensor after `steps` steps (residues non-zero)."""
    frames = []
    for _ in range(count):
        comp = adacomp.Compressor(n, tensor_id=tensor_id, **config)
        for step in range(steps):
            frame = comp.compress(sparse_gradient(rng, n, scale=0.01 * (step + 1)))
        frames.append(frame)
    return frames


class DecompressAverageTest(unittest.TestCase):
    CONFIGS = [
        dict(bin_size=50),
        dict(bin_size=500, values="fp16"),
        dict(bin_size=7, values="fp32"),
        dict(codec="dense"),
        dict(codec="topk", density=0.05),
        dict(codec="onebit"),
    ]

    def test_matches_sum_in_order_divided_by_count(self):
        rng = np.random.default_rng(21)
        n = 1003
        for config in self.CONFIGS:
            for count in (1, 2, 3, 5, 8):
                frames = learner_frames(rng, n, count, **config)
                expect = average_reference(frames, n)
                out = np.full(n, 9.0, dtype=np.float32)  # written over, not added to
                lengths = adacomp.decompress_average(frames, out, expected_tensor_id=4)
                self.assertEqual(lengths, [len(f) for f in frames])
                assert_bits_equal(self, out, expect, f"{config} count={count}")

    def test_same_bits_as_torch_division(self):
        # The DDP hook used to divide the summed bucket with torch's div_(world).
        rng = np.random.default_rng(22)
        n = 4099
        for count in (2, 3, 6, 7):
            frames = learner_frames(rng, n, count, bin_size=50)
            acc = torch.zeros(n)
            for f in frames:
                adacomp.decompress_add(f, acc)
            acc.div_(count)
            out = torch.empty(n)
            adacomp.decompress_average(frames, out)
            assert_bits_equal(self, out.numpy(), acc.numpy(), f"count={count}")

    def test_large_tensor_any_threads(self):
        # elements x frames >= 2^20: the blocked, threaded path of the core.
        rng = np.random.default_rng(23)
        n = (1 << 18) + 4097
        for count in (3, 4):
            frames = learner_frames(rng, n, count, steps=1, bin_size=50)
            expect = average_reference(frames, n)
            for threads in (1, 2, 3, 8):
                out = np.empty(n, dtype=np.float32)
                adacomp.decompress_average(frames, out, threads=threads)
                assert_bits_equal(self, out, expect, f"count={count} threads={threads}")

    def test_frames_in_place_with_trailing_bytes(self):
        rng = np.random.default_rng(24)
        sizes = [300, 50]
        # three learners, each sending two tensors' frames back to back
        bufs = []
        for _ in range(3):
            comps = [adacomp.Compressor(n, bin_size=50, tensor_id=i) for i, n in enumerate(sizes)]
            bufs.append(b"".join(c.compress(sparse_gradient(rng, n)) for c, n in zip(comps, sizes)))
        views = [memoryview(bytearray(b)) for b in bufs]
        pos = [0, 0, 0]
        for i, n in enumerate(sizes):
            parts = [v[p:] for v, p in zip(views, pos)]
            out = torch.zeros(n)
            used = adacomp.decompress_average(parts, out, expected_tensor_id=i)
            assert_bits_equal(self, out.numpy(), average_reference(parts, n), f"tensor {i}")
            pos = [p + u for p, u in zip(pos, used)]
        self.assertEqual(pos, [len(b) for b in bufs])
        # uint8 tensors and a tuple work as frames too
        tensors = tuple(torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in bufs)
        out = np.zeros(sizes[0], np.float32)
        adacomp.decompress_average(tensors, out)
        assert_bits_equal(self, out, average_reference(bufs, sizes[0]))

    def test_corrupt_frame_is_named_and_out_untouched(self):
        rng = np.random.default_rng(25)
        n = 600
        count = 4
        frames = learner_frames(rng, n, count, bin_size=50)
        for j in range(count):
            for how in ("flip", "truncate", "empty"):
                bad = list(frames)
                if how == "flip":
                    b = bytearray(frames[j])
                    b[len(b) // 2] ^= 0x04
                    bad[j] = bytes(b)
                elif how == "truncate":
                    bad[j] = frames[j][:-5]
                else:
                    bad[j] = b""
                out = np.full(n, 1.25, dtype=np.float32)
                with self.assertRaises(adacomp.FrameError, msg=f"{how} {j}") as ctx:
                    adacomp.decompress_average(bad, out)
                self.assertIn(f"frame {j} of {count}", str(ctx.exception))
                self.assertEqual(ctx.exception.frame, j)
                np.testing.assert_array_equal(out, np.full(n, 1.25, dtype=np.float32))
        # two bad frames: the first one is named
        b1, b3 = bytearray(frames[1]), bytearray(frames[3])
        b1[10] ^= 1
        b3[10] ^= 1
        with self.assertRaisesRegex(adacomp.FrameError, "frame 1 of 4"):
            adacomp.decompress_average([frames[0], bytes(b1), frames[2], bytes(b3)], out)

    def test_bad_arguments(self):
        rng = np.random.default_rng(26)
        n = 200
        frames = learner_frames(rng, n, 3, bin_size=50)
        out = np.full(n, 3.0, dtype=np.float32)
        untouched = out.copy()
        with self.assertRaisesRegex(ValueError, "elements") as ctx:  # wrong size
            adacomp.decompress_average(frames, np.zeros(n + 1, np.float32))
        self.assertNotIsInstance(ctx.exception, adacomp.FrameError)
        self.assertIn("frame 0 of 3", str(ctx.exception))
        with self.assertRaisesRegex(ValueError, "empty"):
            adacomp.decompress_average([], out)
        with self.assertRaisesRegex(ValueError, "tensor id") as ctx:
            adacomp.decompress_average(frames, out, expected_tensor_id=5)
        self.assertEqual(ctx.exception.frame, 0)
        with self.assertRaises(adacomp.FrameError):
            adacomp.decompress_average(frames, out, max_frame_bytes=min(map(len, frames)) - 1)
        with self.assertRaises(adacomp.FrameError):
            adacomp.decompress_average(frames, out, max_elements=n - 1)
        with self.assertRaises(ValueError):
            adacomp.decompress_average(frames, out, threads=0)
        with self.assertRaisesRegex(ValueError, "sequence"):
            adacomp.decompress_average(frames[0], out)  # one buffer, not a list of them
        with self.assertRaisesRegex(ValueError, "frames\\[1\\]"):
            adacomp.decompress_average([frames[0], 17], out)
        with self.assertRaisesRegex(ValueError, "float32"):
            adacomp.decompress_average(frames, np.zeros(n, np.float64))
        ro = np.zeros(n, np.float32)
        ro.flags.writeable = False
        with self.assertRaises(ValueError):
            adacomp.decompress_average(frames, ro)
        with self.assertRaisesRegex(ValueError, "contiguous"):
            adacomp.decompress_average(frames, np.zeros(2 * n, np.float32)[::2])
        np.testing.assert_array_equal(out, untouched)
        np.testing.assert_array_equal(ro, np.zeros(n, np.float32))


class DecompressAverageMessagesTest(unittest.TestCase):
    """Every rank's message (one frame per tensor, back to back) decoded at once."""

    SIZES = [300, 50, 1001]

    def messages(self, rng, count):
        msgs = []
        for _ in range(count):
            comps = [adacomp.Compressor(n, bin_size=50, tensor_id=10 + i)
                     for i, n in enumerate(self.SIZES)]
            msgs.append(b"".join(c.compress(sparse_gradient(rng, n))
                                 for c, n in zip(comps, self.SIZES)))
        return msgs

    def split(self, msg):
        frames, pos = [], 0
        while pos < len(msg):
            n = adacomp.inspect(msg[pos:])["frame_bytes"]
            frames.append(msg[pos:pos + n])
            pos += n
        return frames

    def test_equals_tensor_by_tensor_average(self):
        rng = np.random.default_rng(31)
        for count in (1, 2, 5):
            msgs = self.messages(rng, count)
            outs = [np.full(n, 7.0, np.float32) for n in self.SIZES]
            used = adacomp.decompress_average_messages(
                [memoryview(m) for m in msgs], outs, [10, 11, 12])
            per_rank = [self.split(m) for m in msgs]
            for k, n in enumerate(self.SIZES):
                frames = [p[k] for p in per_rank]
                assert_bits_equal(self, outs[k], average_reference(frames, n), f"tensor {k}")
                self.assertEqual(used[k], [len(f) for f in frames])

    def test_bad_messages_change_nothing(self):
        rng = np.random.default_rng(32)
        msgs = self.messages(rng, 3)
        cases = {
            "leftover": (2, len(self.SIZES), msgs[:2] + [msgs[2] + b"\0\0\0"]),
            "truncated": (1, len(self.SIZES) - 1, [msgs[0], msgs[1][:-3], msgs[2]]),
        }
        bad = bytearray(msgs[0])
        bad[-6] ^= 0x10  # inside the last frame: its checksum fails
        cases["corrupt"] = (0, len(self.SIZES) - 1, [bytes(bad)] + msgs[1:])
        for what, (rank, tensor, m) in cases.items():
            outs = [np.full(n, 3.0, np.float32) for n in self.SIZES]
            with self.assertRaises(adacomp.FrameError, msg=what) as cm:
                adacomp.decompress_average_messages(m, outs, [10, 11, 12])
            self.assertEqual((cm.exception.message, cm.exception.tensor), (rank, tensor), what)
            for o in outs:
                self.assertTrue(np.all(o == 3.0), what)
        outs = [np.zeros(n, np.float32) for n in self.SIZES]
        with self.assertRaises(ValueError):
            adacomp.decompress_average_messages([], outs, [10, 11, 12])
        with self.assertRaises(ValueError):
            adacomp.decompress_average_messages(msgs, outs, [10, 11])
        with self.assertRaises(ValueError):  # wrong tensor ids (a ValueError, as in decompress_add)
            adacomp.decompress_average_messages(msgs, outs, [11, 10, 12])


class CompressorThreadsTest(unittest.TestCase):
    def test_threads_give_same_frames_and_residue(self):
        n = (1 << 20) + 37
        rng = np.random.default_rng(31)
        grads = [sparse_gradient(rng, n, scale=0.01 * (s + 1)) for s in range(3)]
        comps = {t: adacomp.Compressor(n, bin_size=50, tensor_id=9, threads=t) for t in (1, 2, 3)}
        for t, c in comps.items():
            self.assertEqual(c.threads, t)
        for step, g in enumerate(grads):
            frames = {t: c.compress(g) for t, c in comps.items()}
            for t in (2, 3):
                msg = f"threads={t} step={step}"
                self.assertEqual(frames[t], frames[1], msg)
                self.assertEqual(comps[t].last_stats, comps[1].last_stats, msg)
                assert_bits_equal(self, comps[t].residue, comps[1].residue, msg)
        for t in (2, 3):
            self.assertEqual(comps[t]._save_state(), comps[1]._save_state())

    def test_threads_validated_and_read_only(self):
        for bad in (0, -1, 257, 1 << 40):
            with self.assertRaises(ValueError, msg=str(bad)):
                adacomp.Compressor(10, threads=bad)
        c = adacomp.Compressor(10)
        self.assertEqual(c.threads, 1)
        with self.assertRaises(AttributeError):
            c.threads = 2
        self.assertEqual(adacomp.Compressor(10, codec="dense", threads=256).threads, 256)


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


if __name__ == "__main__":
    unittest.main()
