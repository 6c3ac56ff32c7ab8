// The DDP hook's local SGD step in one pass over memory
// (python/adacomp/torch/local_optimizer.py): out = momentum * first + (grad +
// weight_decay * param), each operation rounded to float32 in that order, as
// the torch operations it replaces (torch.mul(param, wd).add_(grad), then
// torch.mul(first, momentum).add_(...)): the same bits, one pass instead of
// four. Compiled with -ffp-contract=off (python/CMakeLists.txt), so that no
// multiply-add is fused.
#include <pybind11/pybind11.h>

#include <string>

#include "buffers.h"

namespace adacomp {
namespace {

// A float32 C-contiguous input of `n` elements, or none for None.
const float* OptionalInput(const py::object& obj, size_t n, const char* what,
                           py::buffer_info* holder) {
  if (obj.is_none()) return nullptr;
  if (!py::isinstance<py::buffer>(obj)) {
    throw py::value_error(std::string(what) + " must be a float32 array or None");
  }
  *holder = RequestFloat32(obj.cast<py::buffer>(), false, what);
  const size_t m = ContiguousElements(*holder, what);
  if (m != n) {
    throw py::value_error(std::string(what) + " has " + std::to_string(m) + " elements, grad has " +
                          std::to_string(n));
  }
  return static_cast<const float*>(holder->ptr);
}

void MomentumStep(const py::object& first, const py::buffer& grad, const py::object& param,
                  double momentum, double weight_decay, const py::buffer& out) {
  py::buffer_info grad_info = RequestFloat32(grad, false, "grad");
  const size_t n = ContiguousElements(grad_info, "grad");
  py::buffer_info out_info;
  std::span<float> dst = RequestOut(out, &out_info);
  if (dst.size() != n) {
    throw py::value_error("out has " + std::to_string(dst.size()) + " elements, grad has " +
                          std::to_string(n));
  }
  py::buffer_info first_info, param_info;
  const float* u = OptionalInput(first, n, "first", &first_info);
  const float* w = OptionalInput(param, n, "param", &param_info);
  const float* g = static_cast<const float*>(grad_info.ptr);
  const float m = static_cast<float>(momentum);
  const float wd = static_cast<float>(weight_decay);
  float* o = dst.data();
  py::gil_scoped_release release;
  // Four loops rather than one with branches inside, so that each vectorizes.
  if (u && w) {
    for (size_t i = 0; i < n; ++i) o[i] = m * u[i] + (wd * w[i] + g[i]);
  } else if (u) {
    for (size_t i = 0; i < n; ++i) o[i] = m * u[i] + g[i];
  } else if (w) {
    for (size_t i = 0; i < n; ++i) o[i] = wd * w[i] + g[i];
  } else {
    for (size_t i = 0; i < n; ++i) o[i] = g[i];
  }
}

}  // namespace

void AddLocalStepBindings(py::module_& m) {
  m.def("_momentum_step", &MomentumStep, py::arg("first"), py::arg("grad"), py::arg("param"),
        py::arg("momentum"), py::arg("weight_decay"), py::arg("out"),
        "out = momentum * first + (grad + weight_decay * param), float32, in that order "
        "(first and param may be None: left out).");
}

}  // namespace adacomp
