// The binding of adacomp/local_optimizer.h, so that the DDP hook's local
// optimizer (python/adacomp/torch/local_optimizer.py) runs the trainer's own
// implementation: _adacomp._LocalOptimizer. Python keeps the names and the
// saved form; the moments, the arithmetic and the masking are the library's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adacomp/local_optimizer.h"
#include "buffers.h"

namespace adacomp {
namespace {

void Raise(const Status& status) {
  if (!status.ok()) throw py::value_error(status.message());
}

LocalOptimizer& Check(LocalOptimizer& o, size_t k) {
  if (k >= o.tensors()) throw py::index_error("no tensor " + std::to_string(k));
  return o;
}

// A float32 C-contiguous input as a span (holder keeps the buffer).
std::span<const float> Input(const py::buffer& buf, const char* what, py::buffer_info* holder) {
  *holder = RequestFloat32(buf, false, what);
  const size_t n = ContiguousElements(*holder, what);
  return std::span<const float>(static_cast<const float*>(holder->ptr), n);
}

// A copy of a moment as a numpy array (None for a tensor without one).
py::object Copy(std::span<const float> v, bool started) {
  if (!started) return py::none();
  py::array_t<float> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(float));
  return std::move(out);
}

}  // namespace

void AddLocalStepBindings(py::module_& m) {
  using Kind = LocalOptimizerSettings::Kind;
  py::class_<LocalOptimizer>(m, "_LocalOptimizer")
      .def(py::init([](const std::string& kind, double momentum, double beta1, double beta2,
                       double eps, int64_t freeze_after, double step_scale, bool nesterov) {
             LocalOptimizerSettings s;
             if (kind == "sgd") {
               s.kind = Kind::kSgd;
             } else if (kind == "adam") {
               s.kind = Kind::kAdam;
             } else {
               throw py::value_error("local optimizer: 'sgd' or 'adam', not '" + kind + "'");
             }
             s.momentum = momentum;
             s.beta1 = beta1;
             s.beta2 = beta2;
             s.eps = eps;
             s.freeze_second_moment_after = freeze_after;
             s.adam_step_scale = step_scale;
             s.nesterov = nesterov;
             auto made = LocalOptimizer::Create(s);
             Raise(made.status());
             return std::move(made).value();
           }),
           py::arg("kind"), py::arg("momentum") = 0.9, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("eps") = 1e-8, py::arg("freeze_after") = 0,
           py::arg("step_scale") = 1.0, py::arg("nesterov") = false)
      .def("add_tensor", &LocalOptimizer::AddTensor, py::arg("elements"))
      .def(
          "prepare",
          [](py::object self, size_t k, const py::buffer& grad, const py::object& param,
             double weight_decay) {
            LocalOptimizer& o = Check(self.cast<LocalOptimizer&>(), k);
            py::buffer_info grad_info, param_info;
            const std::span<const float> g = Input(grad, "grad", &grad_info);
            std::span<const float> w;
            if (!param.is_none()) w = Input(param.cast<py::buffer>(), "param", &param_info);
            Result<std::span<float>> step = Status::OK();
            {
              py::gil_scoped_release release;
              step = o.Prepare(k, g, w, weight_decay);
            }
            Raise(step.status());
            // A view of the optimizer's buffer (valid until the next prepare of k
            // or commit/drop), kept alive by the optimizer object.
            return py::array_t<float>(static_cast<py::ssize_t>(step.value().size()),
                                      step.value().data(), self);
          },
          py::arg("k"), py::arg("grad"), py::arg("param") = py::none(),
          py::arg("weight_decay") = 0.0,
          "Tensor k's step for this gradient (a float32 view of the optimizer's buffer); "
          "its moments wait for commit().")
      .def(
          "mask_sent",
          [](LocalOptimizer& o, size_t k, const py::buffer& frame) {
            Check(o, k);
            py::buffer_info holder;
            const std::span<const uint8_t> bytes = RequestBytes(frame, &holder, "frame");
            Raise(o.MaskSent(k, bytes));
          },
          py::arg("k"), py::arg("frame"),
          "SGD: zeroes the prepared velocity where the frame carries a non-zero value.")
      .def(
          "set_rates",
          [](LocalOptimizer& o, double momentum, double beta1, double beta2) {
            Raise(o.SetRates(momentum, beta1, beta2));
          },
          py::arg("momentum"), py::arg("beta1"), py::arg("beta2"),
          "SGD's momentum, or Adam's betas, from the next prepare on (between steps).")
      .def(
          "set_step_scale", [](LocalOptimizer& o, double scale) { Raise(o.SetStepScale(scale)); },
          py::arg("scale"), "Adam's step scale from the next prepare on (between steps).")
      .def("commit", &LocalOptimizer::Commit)
      .def("drop", &LocalOptimizer::Drop)
      .def_property_readonly("tensors", &LocalOptimizer::tensors)
      .def_property_readonly("steps", [](const LocalOptimizer& o) { return o.steps(); })
      .def_property_readonly("masked", &LocalOptimizer::masked)
      .def_property_readonly("step_scale",
                             [](const LocalOptimizer& o) { return o.settings().adam_step_scale; })
      .def("started", [](LocalOptimizer& o, size_t k) { return Check(o, k).started(k); })
      .def("counts",
           [](LocalOptimizer& o, size_t k) {
             Check(o, k);
             return py::make_tuple(o.steps(k), o.second_steps(k));
           })
      .def("first",
           [](LocalOptimizer& o, size_t k) { return Copy(Check(o, k).first(k), o.started(k)); })
      .def("second",
           [](LocalOptimizer& o, size_t k) {
             const bool adam = o.settings().kind == Kind::kAdam;
             return Copy(Check(o, k).second(k), adam && o.started(k));
           })
      .def(
          "set_moments",
          [](LocalOptimizer& o, size_t k, const py::buffer& first, const py::object& second,
             int64_t steps, int64_t second_steps) {
            Check(o, k);
            py::buffer_info fi, si;
            const std::span<const float> f = Input(first, "first", &fi);
            std::span<const float> s;
            if (!second.is_none()) s = Input(second.cast<py::buffer>(), "second", &si);
            Raise(o.SetMoments(k, f, s, steps, second_steps));
          },
          py::arg("k"), py::arg("first"), py::arg("second"), py::arg("steps"),
          py::arg("second_steps"))
      .def("reset", &LocalOptimizer::Reset, py::arg("steps") = 0, py::arg("masked") = 0);
}

}  // namespace adacomp
