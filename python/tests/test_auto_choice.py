"""The hook's auto=True in one process: the bound chooser (adacomp/speed_choice.h)
decides as the trainer's does, its state round-trips, and what auto cannot run with
is refused at construction."""

import unittest

import torch
from torch import nn

import adacomp.torch
from adacomp import _adacomp


def drive(chooser, steps, times):
    modes = []
    for s in range(steps):
        m = chooser.decide()
        modes.append(m[0].upper())
        chooser.record(times(m, s))
    return "".join(modes)


class AutoChoiceTest(unittest.TestCase):
    def test_probes_dense_then_the_codec_then_settles(self):
        c = _adacomp._SpeedChooser(reprobe_every=0)
        self.assertEqual(drive(c, 12, lambda m, s: 1.0 if m == "dense" else 0.25),
                         "DDDDCCCCCCCC")
        c = _adacomp._SpeedChooser(reprobe_every=0)
        self.assertEqual(drive(c, 12, lambda m, s: 1.0 if m == "dense" else 2.0),
                         "DDDDCCCCDDDD")
        self.assertEqual(c.dense_seconds, 1.0)
        self.assertEqual(c.codec_seconds, 2.0)

    def test_state_round_trips_and_bad_state_is_refused(self):
        times = lambda m, s: (1.0 if m == "dense" else 0.5) + 0.01 * (s % 3)  # noqa: E731
        whole = _adacomp._SpeedChooser(reprobe_every=6, probe_cost=0.0)
        first = _adacomp._SpeedChooser(reprobe_every=6, probe_cost=0.0)
        all_modes = drive(whole, 30, times)
        head = drive(first, 11, times)
        second = _adacomp._SpeedChooser(reprobe_every=6, probe_cost=0.0)
        second.load_state(first.save_state())
        tail = drive(second, 19, lambda m, s: times(m, s + 11))
        self.assertEqual(head + tail, all_modes)
        self.assertIn("D", all_modes[11:])  # a re-probe after the cut
        with self.assertRaises(ValueError):
            second.load_state(b"nonsense")

    def test_bad_settings_and_combinations_are_refused(self):
        with self.assertRaises(ValueError):
            _adacomp._SpeedChooser(probe_steps=0)
        model = nn.Linear(4, 2)
        with self.assertRaises(ValueError):
            adacomp.torch.AdaCompState(model=model, auto=True, codec="dense")
        with self.assertRaises(ValueError):
            adacomp.torch.AdaCompState(model=model, auto=True, dense_warmup_steps=3)
        with self.assertRaises(ValueError):
            adacomp.torch.AdaCompState(model=model, auto=True, auto_options={"margin": 2.0})

    def test_auto_state_does_not_load_into_a_state_without_it(self):
        model = nn.Linear(4, 2)
        with_auto = adacomp.torch.AdaCompState(model=model, auto=True)
        without = adacomp.torch.AdaCompState(model=model)
        sd = with_auto.state_dict()
        self.assertIn("auto", sd)
        with self.assertRaises(ValueError):
            without.load_state_dict(sd)
        with self.assertRaises(ValueError):
            with_auto.load_state_dict(without.state_dict())
        with_auto.load_state_dict(sd)  # its own loads
        torch.save(sd, "/dev/null")  # and saves with torch.save


if __name__ == "__main__":
    unittest.main()
