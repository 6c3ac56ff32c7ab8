"""What the hook refuses when it is set up, with a message, before any step: a
parameter on a CUDA device (a parameter that reports one: no GPU is needed), on
the meta device, or of float64; a bad max_failed_steps. And what it accepts:
float32, float16 and bfloat16 parameters on the CPU."""

import unittest

import torch
from torch import nn

import adacomp.torch as adt
from ddp_test_util import OneProcessGroupTest


class CudaLooking(nn.Parameter):
    """A CPU parameter that says it is on cuda:0, as a model moved to a GPU would."""

    @property
    def device(self):
        return torch.device("cuda", 0)


class SetupRefusalsTest(OneProcessGroupTest):
    def test_cuda_parameter_is_refused_by_name(self):
        model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
        model[1].weight = CudaLooking(model[1].weight.detach().clone())
        with self.assertRaisesRegex(ValueError, r"parameter '1\.weight' is on cuda:0; this "
                                                r"build compresses CPU gradients only"):
            adt.AdaCompState(model=model)

    def test_meta_device_model_is_refused(self):
        model = nn.Linear(4, 3).to("meta")
        with self.assertRaisesRegex(ValueError, "is on meta"):
            adt.AdaCompState(model=model)

    def test_float64_model_is_refused(self):
        model = nn.Linear(4, 3).double()
        with self.assertRaisesRegex(ValueError, r"torch\.float64.*model\.float\(\)"):
            adt.AdaCompState(model=model)

    def test_register_refuses_before_touching_ddp(self):
        model = nn.Linear(4, 3)
        ddp = nn.parallel.DistributedDataParallel(model)
        model.double()  # after DDP's construction: the hook is what must refuse it
        with self.assertRaisesRegex(ValueError, "float64"):
            adt.register(ddp)

    def test_cpu_float_types_are_accepted(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            state = adt.AdaCompState(model=nn.Linear(4, 3).to(dtype))
            self.assertEqual(state.parameter_names(), ["weight", "bias"])
            state.close()

    def test_max_failed_steps_must_be_a_count(self):
        for bad in (-1, 1.5, True, "3"):
            with self.assertRaisesRegex(ValueError, "max_failed_steps"):
                adt.AdaCompState(model=nn.Linear(4, 3), max_failed_steps=bad)


if __name__ == "__main__":
    unittest.main()
