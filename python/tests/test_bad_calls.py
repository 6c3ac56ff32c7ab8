"""Bad calls from Python (issue 15, item 7): every entry point of the module,
called with each kind of wrong argument, raises a Python exception with a
message (never a crash), and changes no state: the compressor's residue, the
output buffers and the hook state stay as they were.

Run: PYTHONPATH=build/python /usr/bin/python3 -m unittest test_bad_calls
"""

import unittest

import numpy as np
import torch

import adacomp
import adacomp.torch as adt

N = 120


def gradient(seed, n=N):
    rng = np.random.default_rng(seed)
    g = np.zeros(n, np.float32)
    idx = rng.choice(n, size=max(1, n // 10), replace=False)
    g[idx] = rng.standard_normal(idx.size).astype(np.float32)
    return g


def wrong_gradients():
    """(what, value) pairs that compress() must refuse for an N-element tensor."""
    return [
        ("float64 array", np.zeros(N, np.float64)),
        ("float16 array", np.zeros(N, np.float16)),
        ("int32 array", np.zeros(N, np.int32)),
        ("bool array", np.zeros(N, bool)),
        ("float64 tensor", torch.zeros(N, dtype=torch.float64)),
        ("bfloat16 tensor", torch.zeros(N, dtype=torch.bfloat16)),
        ("one element more", np.zeros(N + 1, np.float32)),
        ("one element less", np.zeros(N - 1, np.float32)),
        ("empty", np.zeros(0, np.float32)),
        ("strided array", np.zeros(2 * N, np.float32)[::2]),
        ("transposed tensor", torch.zeros(12, 10).t()),
        ("None", None),
        ("a list", [0.0] * N),
        ("a string", "x" * N),
        ("NaN inside", np.where(np.arange(N) == 7, np.nan, 0).astype(np.float32)),
    ]


def wrong_outputs():
    """(what, value) pairs that a decode into an N-element output must refuse."""
    ro = np.zeros(N, np.float32)
    ro.flags.writeable = False
    return [
        ("float64 array", np.zeros(N, np.float64)),
        ("int32 array", np.zeros(N, np.int32)),
        ("float64 tensor", torch.zeros(N, dtype=torch.float64)),
        ("one element more", np.zeros(N + 1, np.float32)),
        ("one element less", np.zeros(N - 1, np.float32)),
        ("strided array", np.zeros(2 * N, np.float32)[::2]),
        ("transposed tensor", torch.zeros(12, 10).t()),
        ("read-only array", ro),
        ("bytes (read-only)", b"\x00" * (4 * N)),
        ("None", None),
        ("a list", [0.0] * N),
    ]


class CompressBadCallsTest(unittest.TestCase):
    def test_each_wrong_gradient_raises_and_keeps_the_residue(self):
        comp = adacomp.Compressor(N, bin_size=10, tensor_id=3)
        comp.compress(gradient(2))
        before = comp.residue.copy()
        for what, value in wrong_gradients():
            with self.subTest(what):
                with self.assertRaises((ValueError, TypeError)) as cm:
                    comp.compress(value)
                self.assertTrue(str(cm.exception), what)
                np.testing.assert_array_equal(comp.residue, before)
        # The compressor still works, and exactly as an untouched twin does.
        twin = adacomp.Compressor(N, bin_size=10, tensor_id=3)
        twin.compress(gradient(2))
        g = gradient(3)
        self.assertEqual(comp.compress(g), twin.compress(g))

    def test_every_codec_refuses_a_wrong_size(self):
        for codec in adacomp.CODECS:
            with self.subTest(codec):
                comp = adacomp.Compressor(N, codec=codec)
                with self.assertRaisesRegex(ValueError, "elements"):
                    comp.compress(np.zeros(N + 3, np.float32))

    def test_bad_constructor_arguments(self):
        cases = {
            "negative elements": dict(elements=-1),
            "zero bin size": dict(elements=N, bin_size=0),
            "unknown codec": dict(elements=N, codec="zip"),
            "unknown values": dict(elements=N, values="int4"),
            "density above 1": dict(elements=N, codec="topk", density=1.5),
            "NaN tau": dict(elements=N, codec="threshold", tau=float("nan")),
            "threads 0": dict(elements=N, threads=0),
        }
        for what, kw in cases.items():
            with self.subTest(what):
                with self.assertRaises((ValueError, TypeError, OverflowError)) as cm:
                    adacomp.Compressor(**kw)
                self.assertTrue(str(cm.exception), what)


class DecodeBadCallsTest(unittest.TestCase):
    def setUp(self):
        self.comps = [adacomp.Compressor(N, bin_size=10, tensor_id=4) for _ in range(3)]
        self.frames = [c.compress(gradient(10 + i)) for i, c in enumerate(self.comps)]
        other = adacomp.Compressor(N, bin_size=10, tensor_id=9)
        self.foreign = other.compress(gradient(20))  # another tensor's frame, same size
        other_size = adacomp.Compressor(N + 5, bin_size=10, tensor_id=4)
        self.wrong_size = other_size.compress(gradient(21, N + 5))

    def test_decompress_add_refuses_wrong_outputs(self):
        for what, out in wrong_outputs():
            with self.subTest(what):
                with self.assertRaises((ValueError, TypeError)) as cm:
                    adacomp.decompress_add(self.frames[0], out)
                self.assertTrue(str(cm.exception), what)
                if isinstance(out, np.ndarray):
                    self.assertFalse(out.any(), what)

    def test_decompress_average_refuses_wrong_outputs(self):
        for what, out in wrong_outputs():
            with self.subTest(what):
                with self.assertRaises((ValueError, TypeError)):
                    adacomp.decompress_average(self.frames, out)
                if isinstance(out, np.ndarray):
                    self.assertFalse(out.any(), what)

    def test_frames_of_another_tensor_change_nothing(self):
        out = np.full(N, 1.5, np.float32)
        with self.assertRaisesRegex(ValueError, "tensor"):
            adacomp.decompress_add(self.foreign, out, expected_tensor_id=4)
        with self.assertRaisesRegex(ValueError, "tensor"):
            adacomp.decompress_average(self.frames + [self.foreign], out, expected_tensor_id=4)
        # A frame of another size, without an expected id: refused by size.
        with self.assertRaises(ValueError):
            adacomp.decompress_average(self.frames + [self.wrong_size], out)
        np.testing.assert_array_equal(out, np.full(N, 1.5, np.float32))

    def test_messages_with_the_wrong_tensors_change_nothing(self):
        outs = [np.full(N, 2.0, np.float32)]
        cases = {
            "another tensor's frame": ([self.frames[0], self.foreign], [4]),
            "tensor ids that do not match": (self.frames, [5]),
            "more ids than outputs": (self.frames, [4, 5]),
            "a frame of another size": ([self.frames[0], self.wrong_size], [4]),
            "a message with two frames for one tensor": ([self.frames[0] + self.frames[1]], [4]),
            "not bytes": ([None], [4]),
        }
        for what, (messages, ids) in cases.items():
            with self.subTest(what):
                with self.assertRaises((ValueError, TypeError)) as cm:
                    adacomp.decompress_average_messages(messages, outs, ids)
                self.assertTrue(str(cm.exception), what)
                np.testing.assert_array_equal(outs[0], np.full(N, 2.0, np.float32))

    def test_inspect_refuses_what_is_not_a_frame(self):
        for what, value in [("empty", b""), ("text", b"hello world, not a frame"),
                            ("truncated", self.frames[0][:-1]), ("None", None), ("int", 5)]:
            with self.subTest(what):
                with self.assertRaises((ValueError, TypeError)):
                    adacomp.inspect(value)


class HookStateBadCallsTest(unittest.TestCase):
    """AdaCompState.load_state_dict with a state_dict of another model."""

    @staticmethod
    def model(hidden):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(),
                                   torch.nn.Linear(hidden, 3))

    def test_a_state_dict_from_another_model_is_refused_and_changes_nothing(self):
        a = adt.AdaCompState(process_group=None, model=self.model(16))
        b = adt.AdaCompState(process_group=None, model=self.model(20))
        before = b.state_dict()
        with self.assertRaisesRegex(ValueError, "elements"):
            b.load_state_dict(a.state_dict())
        renamed = a.state_dict()
        renamed["params"] = {"x" + k: v for k, v in renamed["params"].items()}
        with self.assertRaisesRegex(ValueError, "does not have"):
            b.load_state_dict(renamed)
        with self.assertRaisesRegex(ValueError, "state_dict"):
            b.load_state_dict({"format": "something else"})
        after = b.state_dict()
        self.assertEqual(after.keys(), before.keys())
        for name, d in before["params"].items():
            self.assertEqual(after["params"][name], d, name)


class ExampleBinSizesTest(unittest.TestCase):
    """examples/ddp_fashion_mnist.py --bin-sizes: refused at parse time (a usage
    error, before any rank starts) unless every item is a known layer type with a
    positive size; the types it knows are the hook's."""

    @classmethod
    def setUpClass(cls):
        import importlib.util
        import os
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                            "ddp_fashion_mnist.py")
        spec = importlib.util.spec_from_file_location("ddp_fashion_mnist", path)
        cls.example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.example)

    def test_the_types_are_the_hooks(self):
        self.assertEqual(tuple(self.example.LAYER_TYPES), tuple(adt.LAYER_TYPES))

    def test_good_and_bad_values(self):
        import argparse
        parse = self.example.bin_sizes
        self.assertEqual(parse("fc=250"), {"fc": 250})
        self.assertEqual(parse("conv=25, fc=250"), {"conv": 25, "fc": 250})
        for bad in ("fc", "fc=", "fc=0", "fc=-3", "fc=x", "dense=5", "fc=2,fc=3", ""):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                parse(bad)


if __name__ == "__main__":
    unittest.main()
