"""The hook's settings in one object (adacomp.torch.Settings): the flat keyword
arguments and the grouped object make the same state and the same frames; the
settings round-trip through flat() and through torch.save; the state shows them
read-only; bad settings are refused naming the field; the state itself is not
pickled, with a message saying what to save instead.
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_settings
"""

import dataclasses
import io
import unittest

import numpy as np
import torch
from torch import nn

import adacomp.torch as adt
from ddp_test_util import OneProcessGroupTest


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 3))


class SettingsTest(OneProcessGroupTest):
    FLAT = dict(codec="adacomp", bin_size=None, bin_sizes={"conv": 20}, values="ternary",
                dense_types=("other",), ramp_steps=10, ramp_start=4, exchange="reduce-scatter",
                summed_values="fp16", max_failed_steps=5)

    def test_flat_and_grouped_make_the_same_state(self):
        grouped = adt.Settings(
            codec=adt.CodecSettings(bin_sizes={"conv": 20}, dense_types=("other",)),
            schedule=adt.ScheduleSettings(ramp_steps=10, ramp_start=4),
            exchange=adt.ExchangeSettings(exchange="reduce-scatter", summed_values="fp16"),
            max_failed_steps=5)
        self.assertEqual(adt.Settings.of(**self.FLAT), grouped)
        m = model()
        a = adt.AdaCompState(model=m, **self.FLAT)
        b = adt.AdaCompState(model=m, settings=grouped)
        try:
            self.assertEqual(a.settings, b.settings)
            for attr in ("codec", "bin_sizes", "dense_types", "exchange", "summed_values",
                         "max_failed_steps"):
                self.assertEqual(getattr(a, attr), getattr(b, attr), attr)
            self.assertEqual(a.bin_sizes["conv"], 20)
            self.assertEqual(a.bin_sizes["fc"], 500)
            # The same compressors: the same frames of the same gradients.
            rng = np.random.default_rng(0)
            for name in a.parameter_names():
                ea, eb = a._by_name[name], b._by_name[name]
                self.assertEqual(ea.compressor.codec, eb.compressor.codec, name)
                g = rng.standard_normal(ea.numel).astype(np.float32)
                self.assertEqual(bytes(ea.compressor.compress(g)),
                                 bytes(eb.compressor.compress(g)), name)
            self.assertEqual(a._by_name["2.bias"].compressor.codec, "dense")  # other: dense
        finally:
            a.close()
            b.close()

    def test_round_trips_and_overrides(self):
        local = adt.Settings.of(local_optimizer="adam", betas=(0.8, 0.9), eps=1e-6,
                                dense_warmup_steps=4)
        for s in (adt.Settings(), adt.Settings.of(**self.FLAT), local,
                  adt.Settings.of(auto=True, auto_options={"probe_steps": 2})):
            self.assertEqual(adt.Settings.of(**s.flat()), s)
            buf = io.BytesIO()
            torch.save(s, buf)
            buf.seek(0)
            self.assertEqual(torch.load(buf), s)
        self.assertEqual(local.local.kind, "adam")
        self.assertEqual(local.local.betas, (0.8, 0.9))
        # Keyword arguments over a settings object: only the named ones change.
        over = adt.Settings.of(local, eps=1e-7, codec="topk")
        self.assertEqual(over.local.eps, 1e-7)
        self.assertEqual(over.local.betas, (0.8, 0.9))
        self.assertEqual(over.codec.codec, "topk")
        self.assertEqual(over.schedule.dense_warmup_steps, 4)
        self.assertIsNone(adt.Settings.of(local, local_optimizer=None).local)
        self.assertEqual(adt.Settings.of(auto=True).auto, adt.AutoSettings())
        self.assertEqual(set(adt.Settings.names()), set(adt.Settings().flat()) | {
            "local_optimizer", "momentum", "nesterov", "betas", "eps", "local_weight_decay",
            "local_clip_norm", "local_mask", "local_step_scale", "auto_options"})
        nesterov = adt.Settings.of(local_optimizer="sgd", nesterov=True)
        self.assertTrue(nesterov.local.nesterov)
        self.assertEqual(adt.Settings.of(**nesterov.flat()), nesterov)
        scaled = adt.Settings.of(local_optimizer="adam", local_step_scale=2.0)
        self.assertEqual(scaled.local.step_scale, 2.0)
        self.assertEqual(adt.Settings.of(**scaled.flat()), scaled)
        nomask = adt.Settings.of(local_optimizer="sgd", local_mask=False)
        self.assertFalse(nomask.local.mask)
        self.assertEqual(adt.Settings.of(**nomask.flat()), nomask)
        self.assertTrue(adt.Settings.of(local_optimizer="sgd").local.mask)

    def test_the_state_shows_its_settings_read_only(self):
        st = adt.AdaCompState(model=model(), codec="topk", density=0.05)
        try:
            self.assertEqual(st.settings.codec.codec, "topk")
            self.assertEqual(st.density, 0.05)
            for attr, value in (("codec", "dense"), ("density", 0.1), ("exchange", "auto"),
                                ("bin_sizes", {}), ("max_failed_steps", 0)):
                with self.assertRaises(AttributeError):
                    setattr(st, attr, value)
            with self.assertRaises(dataclasses.FrozenInstanceError):
                st.settings.codec.codec = "dense"
            b = st.bin_sizes
            b["conv"] = 1
            self.assertEqual(st.bin_sizes["conv"], 50)  # a copy
            st.overlap = False  # the one setting a script may change between steps
            self.assertFalse(st.overlap)
            with self.assertRaisesRegex(TypeError, "state.settings .* state.state_dict"):
                torch.save(st, io.BytesIO())
        finally:
            st.close()

    def test_bad_settings_are_refused_naming_the_field(self):
        for kwargs, error, words in (
                ({"codc": "adacomp"}, TypeError, "unknown setting 'codc'"),
                ({"codec": "zip"}, ValueError, "unknown codec 'zip'"),
                ({"bin_sizes": {"conv2": 5}}, ValueError, "bin_sizes: unknown layer type"),
                ({"dense_types": ("bias",)}, ValueError, "dense_types: unknown layer type"),
                ({"exchange": "ring"}, ValueError, "unknown exchange 'ring'"),
                ({"summed_values": "bf16"}, ValueError, "summed_values"),
                ({"max_failed_steps": -1}, ValueError, "max_failed_steps"),
                ({"max_failed_steps": True}, ValueError, "max_failed_steps"),
                ({"local_clip_norm": 1.0}, ValueError, "goes with local_optimizer"),
                ({"local_optimizer": "lion"}, ValueError, "'sgd' or 'adam'"),
                ({"local_mask": False}, ValueError, "local_mask goes with"),
                ({"local_optimizer": "sgd", "local_mask": 0}, ValueError, "True or False"),
                ({"local_optimizer": "sgd", "local_clip_norm": -1}, ValueError,
                 "local_clip_norm"),
                ({"auto": True, "codec": "dense"}, ValueError, "auto chooses"),
                ({"auto": True, "auto_options": {"probes": 2}}, ValueError, "auto_options")):
            with self.assertRaisesRegex(error, words, msg=str(kwargs)):
                adt.Settings.of(**kwargs)
            with self.assertRaisesRegex(error, words, msg=str(kwargs)):
                adt.AdaCompState(model=model(), **kwargs)


if __name__ == "__main__":
    unittest.main()
