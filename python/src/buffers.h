// python/src/buffers.h: what the binding files of `_adacomp` share: the
// FrameError type, Status -> Python exceptions, and the checked views of
// Python buffers (float32 arrays, bytes) the bindings take. Private to
// python/src; needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"

namespace py = pybind11;

namespace adacomp {

// Set once at module import; raised for frames that fail validation.
inline PyObject* g_frame_error = nullptr;

// Raises an exception of Python type `type` with message `msg` whose
// attribute `frame` is the failing frame's position (decompress_average).
[[noreturn]] inline void ThrowWithFrame(PyObject* type, const std::string& msg, size_t frame) {
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", msg.c_str()));
  if (!exc) throw py::error_already_set();
  exc.attr("frame") = py::int_(frame);
  PyErr_SetObject(type, exc.ptr());
  throw py::error_already_set();
}

// `frame` (optional): the position of the failing frame among several; the
// ValueError or FrameError then carries it as its `frame` attribute.
[[noreturn]] inline void ThrowStatus(const Status& status, bool frame_context,
                                     std::optional<size_t> frame = std::nullopt) {
  const std::string& msg = status.message().empty() ? status.ToString() : status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      if (frame) ThrowWithFrame(PyExc_ValueError, msg, *frame);
      throw py::value_error(msg);
    case StatusCode::kCorruption:
    case StatusCode::kOutOfRange:
    case StatusCode::kNotFound:
      if (frame_context) {
        if (frame) ThrowWithFrame(g_frame_error, msg, *frame);
        PyErr_SetString(g_frame_error, msg.c_str());
        throw py::error_already_set();
      }
      throw py::value_error(msg);
    default:
      throw std::runtime_error(status.ToString());
  }
}

// Total elements of a buffer, after checking it is C-contiguous.
inline size_t ContiguousElements(const py::buffer_info& info, const char* what) {
  size_t n = 1;
  for (py::ssize_t d = 0; d < info.ndim; ++d) n *= static_cast<size_t>(info.shape[d]);
  // C-contiguous: walking the dimensions from the last, each stride equals the
  // item size times the product of the later extents (extent-1 dims are free).
  py::ssize_t expect = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expect) {
      throw py::value_error(std::string(what) +
                            " is not contiguous (strides do not match a C-contiguous layout); "
                            "pass a contiguous array, e.g. numpy.ascontiguousarray(x) or "
                            "tensor.contiguous()");
    }
    expect *= info.shape[d];
  }
  return n;
}

inline bool IsFloat32Format(const std::string& format) {
  // numpy writes "f"; other exporters may prefix a byte-order mark.
  return format == "f" || format == "<f" || format == "=f" || format == "@f";
}

// A float32, C-contiguous buffer; `writable` asks for write access.
inline py::buffer_info RequestFloat32(const py::buffer& buf, bool writable, const char* what) {
  py::buffer_info info;
  try {
    info = buf.request(writable);
  } catch (py::error_already_set& e) {
    throw py::value_error(std::string(what) + ": " + (writable ? "a writable " : "a ") +
                          "buffer is required (" + e.what() + ")");
  }
  if (info.itemsize != 4 || !IsFloat32Format(info.format)) {
    throw py::value_error(std::string(what) + " must hold float32 values (got buffer format '" +
                          info.format + "', item size " + std::to_string(info.itemsize) + ")");
  }
  ContiguousElements(info, what);
  return info;
}

// The decoders' destination `out`: a writable float32, C-contiguous buffer,
// held in *holder while the span is used.
inline std::span<float> RequestOut(const py::buffer& out, py::buffer_info* holder) {
  *holder = RequestFloat32(out, /*writable=*/true, "out");
  if (holder->readonly) throw py::value_error("out is read-only; pass a writable float32 array");
  return {static_cast<float*>(holder->ptr), ContiguousElements(*holder, "out")};
}

inline std::span<const uint8_t> RequestBytes(const py::buffer& buf, py::buffer_info* holder,
                                             const char* what) {
  try {
    *holder = buf.request(false);
  } catch (py::error_already_set& e) {
    throw py::value_error(std::string(what) + " must be a bytes-like object (" + e.what() + ")");
  }
  if (holder->itemsize != 1) {
    throw py::value_error(std::string(what) +
                          " must be a buffer of bytes (item size 1), got item size " +
                          std::to_string(holder->itemsize));
  }
  size_t n = ContiguousElements(*holder, what);
  return {static_cast<const uint8_t*>(holder->ptr), n};
}

inline std::vector<std::span<const uint8_t>> RequestByteSequence(
    const py::sequence& seq, const char* what, std::vector<py::buffer_info>* holders) {
  std::vector<std::span<const uint8_t>> spans(holders->size());
  for (size_t j = 0; j < spans.size(); ++j) {
    py::object item = seq[j];
    const std::string name = std::string(what) + "[" + std::to_string(j) + "]";
    if (!py::isinstance<py::buffer>(item)) {
      throw py::value_error(name + " must be a bytes-like object, got " +
                            std::string(py::str(py::type::of(item).attr("__name__"))));
    }
    spans[j] = RequestBytes(item.cast<py::buffer>(), &(*holders)[j], name.c_str());
  }
  return spans;
}

// The destinations of a message's tensors: outs[k] (a writable float32
// array, held in (*holders)[k]) for tensor id tensor_ids[k]. The caller has
// checked that the two have the same length.
inline std::vector<MessageTensor> RequestOutTensors(const py::sequence& outs,
                                                    const std::vector<uint32_t>& tensor_ids,
                                                    std::vector<py::buffer_info>* holders) {
  *holders = std::vector<py::buffer_info>(tensor_ids.size());
  std::vector<MessageTensor> tensors(tensor_ids.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    py::object item = outs[k];
    if (!py::isinstance<py::buffer>(item)) {
      throw py::value_error("outs[" + std::to_string(k) + "] must be a float32 array");
    }
    tensors[k] = {tensor_ids[k], RequestOut(item.cast<py::buffer>(), &(*holders)[k])};
  }
  return tensors;
}

// Read-only properties of `cls`: names[i] is getters[i] (a member function).
template <typename Class, typename... Getters>
void AddReadOnly(Class& cls, const std::array<const char*, sizeof...(Getters)>& names,
                 Getters... getters) {
  size_t i = 0;
  (cls.def_property_readonly(names[i++], getters), ...);
}

// The bindings of adacomp/slices.h (slices.cc), added to the module.
void AddSliceBindings(py::module_& m);
// local_step.cc: _LocalOptimizer, the binding of the library's local optimizer.
void AddLocalStepBindings(py::module_& m);
// python/src/speed_choice.cc: _SpeedChooser (adacomp/speed_choice.h).
void AddSpeedChoiceBindings(py::module_& m);

}  // namespace adacomp
