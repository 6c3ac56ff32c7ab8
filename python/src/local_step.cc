// The DDP hook's local optimizer steps in one pass over memory each. SGD
// (python/adacomp/torch/local_optimizer.py): out = momentum * first + (grad +
// weight_decay * param), each operation rounded to float32 in that order, as
// the torch operations it replaces (torch.mul(param, wd).add_(grad), then
// torch.mul(first, momentum).add_(...)): the same bits, one pass instead of
// four. Adam (_adam_step): the moments and the bias-corrected step in one
// float32 pass instead of nine torch operations. Compiled with
// -ffp-contract=off (python/CMakeLists.txt), so that no multiply-add is fused.
#include <pybind11/pybind11.h>

#include <cmath>
#include <string>

#include "buffers.h"

namespace adacomp {
namespace {

// A float32 C-contiguous array of `n` elements (writable for an output).
float* Float32Of(const py::buffer& buf, size_t n, const char* what, bool writable,
                 py::buffer_info* holder) {
  *holder = RequestFloat32(buf, writable, what);
  const size_t m = ContiguousElements(*holder, what);
  if (m != n) {
    throw py::value_error(std::string(what) + " has " + std::to_string(m) + " elements, grad has " +
                          std::to_string(n));
  }
  return static_cast<float*>(holder->ptr);
}

// A float32 C-contiguous input of `n` elements, or none for None.
const float* OptionalInput(const py::object& obj, size_t n, const char* what,
                           py::buffer_info* holder) {
  if (obj.is_none()) return nullptr;
  if (!py::isinstance<py::buffer>(obj)) {
    throw py::value_error(std::string(what) + " must be a float32 array or None");
  }
  return Float32Of(obj.cast<py::buffer>(), n, what, false, holder);
}

void MomentumStep(const py::object& first, const py::buffer& grad, const py::object& param,
                  double momentum, double weight_decay, const py::buffer& out) {
  py::buffer_info grad_info = RequestFloat32(grad, false, "grad");
  const size_t n = ContiguousElements(grad_info, "grad");
  py::buffer_info out_info;
  float* o = Float32Of(out, n, "out", true, &out_info);
  py::buffer_info first_info, param_info;
  const float* u = OptionalInput(first, n, "first", &first_info);
  const float* w = OptionalInput(param, n, "param", &param_info);
  const float* g = static_cast<const float*>(grad_info.ptr);
  const float m = static_cast<float>(momentum);
  const float wd = static_cast<float>(weight_decay);
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

struct AdamConstants {
  float b1, c1, b2, c2, bc1, bc2, eps;
};

// The loop of AdamStep over arrays that do not overlap (restrict, so that it
// vectorizes; the compiler takes the tests of m0 and v0 out of the loop).
void AdamLoop(const AdamConstants& k, size_t n, const float* __restrict m0,
              const float* __restrict v0, const float* __restrict g, bool frozen,
              float* __restrict m, float* __restrict v, float* __restrict d) {
  const float b1 = k.b1, c1 = k.c1, b2 = k.b2, c2 = k.c2, bc1 = k.bc1, bc2 = k.bc2, e = k.eps;
  if (frozen) {
    for (size_t i = 0; i < n; ++i) {
      const float mi = (m0 ? b1 * m0[i] : 0.0f) + c1 * g[i];
      m[i] = mi;
      d[i] = (mi / bc1) / (std::sqrt(v0[i] / bc2) + e);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float mi = (m0 ? b1 * m0[i] : 0.0f) + c1 * g[i];
    const float vi = (v0 ? b2 * v0[i] : 0.0f) + c2 * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    d[i] = (mi / bc1) / (std::sqrt(vi / bc2) + e);
  }
}

// Adam's moments and bias-corrected step in one pass, float32 throughout:
// m = b1 first + (1 - b1) g, v = b2 second + (1 - b2) g g (first / second None:
// zero), step = (m / bc1) / (sqrt(v / bc2) + eps). With frozen, v is `second`
// itself (1-bit Adam after its warm-up) and out_v is not written.
void AdamStep(const py::object& first, const py::object& second, const py::buffer& grad,
              double beta1, double beta2, double eps, double bias1, double bias2, bool frozen,
              const py::buffer& out_m, const py::object& out_v, const py::buffer& out_step) {
  py::buffer_info grad_info = RequestFloat32(grad, false, "grad");
  const size_t n = ContiguousElements(grad_info, "grad");
  py::buffer_info first_info, second_info, m_info, v_info, d_info;
  const float* m0 = OptionalInput(first, n, "first", &first_info);
  const float* v0 = OptionalInput(second, n, "second", &second_info);
  if (frozen && !v0) throw py::value_error("frozen: the second moment must be given");
  float* m = Float32Of(out_m, n, "out_m", true, &m_info);
  float* v = nullptr;
  if (!frozen) {
    if (out_v.is_none()) throw py::value_error("out_v is needed unless frozen");
    v = Float32Of(out_v.cast<py::buffer>(), n, "out_v", true, &v_info);
  }
  float* d = Float32Of(out_step, n, "out_step", true, &d_info);
  if (!(bias1 > 0 && bias2 > 0 && eps > 0)) {
    throw py::value_error("bias corrections and eps must be > 0");
  }
  const float* g = static_cast<const float*>(grad_info.ptr);
  // The outputs overlap no input (so the loop below may take them as restrict).
  const auto overlap = [n](const float* x, const float* y) {
    return x && y && x < y + n && y < x + n;
  };
  for (const float* out :
       {static_cast<const float*>(m), static_cast<const float*>(v), static_cast<const float*>(d)}) {
    for (const float* in : {m0, v0, g}) {
      if (overlap(out, in)) throw py::value_error("an output overlaps an input");
    }
  }
  if (overlap(m, d) || overlap(v, d) || overlap(m, v)) {
    throw py::value_error("the outputs overlap");
  }
  const AdamConstants k{static_cast<float>(beta1), static_cast<float>(1.0 - beta1),
                        static_cast<float>(beta2), static_cast<float>(1.0 - beta2),
                        static_cast<float>(bias1), static_cast<float>(bias2),
                        static_cast<float>(eps)};
  py::gil_scoped_release release;
  AdamLoop(k, n, m0, v0, g, frozen, m, v, d);
}

}  // namespace

void AddLocalStepBindings(py::module_& m) {
  m.def("_momentum_step", &MomentumStep, py::arg("first"), py::arg("grad"), py::arg("param"),
        py::arg("momentum"), py::arg("weight_decay"), py::arg("out"),
        "out = momentum * first + (grad + weight_decay * param), float32, in that order "
        "(first and param may be None: left out).");
  m.def("_adam_step", &AdamStep, py::arg("first"), py::arg("second"), py::arg("grad"),
        py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("bias1"), py::arg("bias2"),
        py::arg("frozen"), py::arg("out_m"), py::arg("out_v"), py::arg("out_step"),
        "Adam's moments and bias-corrected step in one float32 pass: out_m = b1 first + "
        "(1 - b1) grad, out_v = b2 second + (1 - b2) grad^2 (None: zero), out_step = "
        "(out_m / bias1) / (sqrt(out_v / bias2) + eps); frozen: second is the second moment "
        "as it is (out_v unused).");
}

}  // namespace adacomp
