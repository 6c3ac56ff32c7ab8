// The bindings of adacomp/slices.h: the reduce-scatter's messages, for the
// DDP hook's own transport (python/adacomp/torch/slices.py).
#include "adacomp/slices.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "buffers.h"

namespace adacomp {
namespace {

int GroupSize(int p) {
  if (p < 1) throw py::value_error("p must be at least 1, got " + std::to_string(p));
  return p;
}

ValueMode SummedMode(bool fp16) { return fp16 ? ValueMode::kFp16 : ValueMode::kFp32; }

std::span<const float> Floats(const py::handle& item, std::vector<py::buffer_info>* holders,
                              const std::string& what) {
  if (!py::isinstance<py::buffer>(item)) throw py::value_error(what + " must be a float32 array");
  holders->push_back(RequestFloat32(item.cast<py::buffer>(), false, what.c_str()));
  const py::buffer_info& b = holders->back();
  return {static_cast<const float*>(b.ptr), ContiguousElements(b, what.c_str())};
}

py::list CutFramePy(const py::buffer& frame, int p) {
  py::buffer_info holder;
  const std::span<const uint8_t> bytes = RequestBytes(frame, &holder, "frame");
  std::vector<std::vector<uint8_t>> pieces(static_cast<size_t>(GroupSize(p)));
  Status st;
  {
    py::gil_scoped_release release;
    st = CutFrame(bytes, p, &pieces);
  }
  if (!st.ok()) ThrowStatus(st, true);
  py::list out;
  for (const auto& piece : pieces) {
    out.append(py::bytes(reinterpret_cast<const char*>(piece.data()), piece.size()));
  }
  return out;
}

py::bytes SlicesMessagePy(const py::sequence& values, const std::vector<uint32_t>& tensor_ids,
                          const std::vector<std::pair<uint64_t, uint64_t>>& stats, bool fp16) {
  const size_t n = py::len(values);
  if (tensor_ids.size() != n || stats.size() != n) {
    throw py::value_error(std::to_string(n) + " slices, " + std::to_string(tensor_ids.size()) +
                          " tensor ids and " + std::to_string(stats.size()) + " statistics");
  }
  std::vector<py::buffer_info> holders;
  holders.reserve(n);
  std::vector<std::span<const float>> spans;
  for (size_t i = 0; i < n; ++i) {
    spans.push_back(Floats(values[i], &holders, "values[" + std::to_string(i) + "]"));
  }
  std::vector<uint8_t> m;
  Status st;
  {
    py::gil_scoped_release release;
    StartSlicesMessage(&m);
    for (const auto& [bytes, selected] : stats) PutSliceStats({bytes, selected}, &m);
    for (size_t i = 0; i < n && st.ok(); ++i) {
      st = EncodeSummedSlice(tensor_ids[i], spans[i], &m, SummedMode(fp16));
    }
  }
  if (!st.ok()) {
    if (st.code() == StatusCode::kOutOfRange) throw py::value_error(st.message());
    ThrowStatus(st, false);
  }
  return py::bytes(reinterpret_cast<const char*>(m.data()), m.size());
}

std::vector<std::pair<uint64_t, uint64_t>> ReadSlicesMessagePy(
    const py::buffer& message, const py::sequence& outs, const std::vector<uint32_t>& tensor_ids,
    bool decode) {
  const size_t n = py::len(outs);
  if (tensor_ids.size() != n) {
    throw py::value_error(std::to_string(n) + " outs and " + std::to_string(tensor_ids.size()) +
                          " tensor ids");
  }
  py::buffer_info holder;
  const std::span<const uint8_t> bytes = RequestBytes(message, &holder, "message");
  std::vector<py::buffer_info> holders;
  std::vector<MessageTensor> slices = RequestOutTensors(outs, tensor_ids, &holders);
  std::vector<SliceStats> stats(n);
  size_t bad = n;
  Status st;
  {
    py::gil_scoped_release release;
    st = ReadSlicesMessage(bytes, slices, stats, decode, &bad);
  }
  if (!st.ok()) {
    // FrameError (a ValueError) whose attribute `slice` is the slice at
    // fault (n when none is), whatever the status.
    const std::string msg = st.message().empty() ? st.ToString() : st.message();
    py::object exc =
        py::reinterpret_steal<py::object>(PyObject_CallFunction(g_frame_error, "s", msg.c_str()));
    if (!exc) throw py::error_already_set();
    exc.attr("slice") = py::int_(bad);
    PyErr_SetObject(g_frame_error, exc.ptr());
    throw py::error_already_set();
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const SliceStats& s : stats) out.emplace_back(s.bytes, s.selected);
  return out;
}

uint64_t SummedSlicesBytesPy(const py::buffer& values, uint32_t tensor_id, int p, bool fp16) {
  std::vector<py::buffer_info> holders;
  const std::span<const float> v = Floats(values, &holders, "values");
  GroupSize(p);
  py::gil_scoped_release release;
  return SummedSlicesBytes(tensor_id, v, p, SummedMode(fp16));
}

std::pair<double, double> EstimateReceivePy(const py::buffer& averaged, uint32_t tensor_id, int p,
                                            bool by_slices, uint64_t wire_bytes, bool fp16,
                                            bool exact) {
  std::vector<py::buffer_info> holders;
  const std::span<const float> v = Floats(averaged, &holders, "averaged");
  GroupSize(p);
  py::gil_scoped_release release;
  const ReceiveEstimate e =
      EstimateReceive(tensor_id, p, by_slices, wire_bytes, v, SummedMode(fp16), exact);
  return {e.allgather, e.reduce_scatter};
}

}  // namespace

void AddSliceBindings(py::module_& m) {
  m.def("_cut_frame", &CutFramePy, py::arg("frame"), py::arg("p"),
        "Cuts a frame into p pieces (b'' for empty slices), adacomp/slices.h CutFrame.");
  m.def("_slices_message", &SlicesMessagePy, py::arg("values"), py::arg("tensor_ids"),
        py::arg("stats"), py::arg("fp16") = false,
        "An owner's message: statistics (bytes, selected) and averaged slices.");
  m.def("_read_slices_message", &ReadSlicesMessagePy, py::arg("message"), py::arg("outs"),
        py::arg("tensor_ids"), py::arg("decode") = true,
        "Reads an owner's message into outs; returns its statistics.");
  m.def("_summed_slices_bytes", &SummedSlicesBytesPy, py::arg("values"), py::arg("tensor_id"),
        py::arg("p"), py::arg("fp16") = false,
        "Bytes the averaged slices of values would take in owners' messages.");
  m.def("_estimate_receive", &EstimateReceivePy, py::arg("averaged"), py::arg("tensor_id"),
        py::arg("p"), py::arg("by_slices"), py::arg("wire_bytes"), py::arg("fp16") = false,
        py::arg("exact") = false,
        "(all-gather, reduce-scatter) bytes one rank of p would receive for one tensor, "
        "adacomp/slices.h EstimateReceive (auto's estimate).");
  m.def(
      "_slice_of",
      [](uint64_t n, int p, int d) {
        if (d < 0 || d >= GroupSize(p)) throw py::value_error("slice index out of range");
        const SliceBounds b = SliceOf(n, p, d);
        return std::make_pair(b.begin, b.size);
      },
      py::arg("n"), py::arg("p"), py::arg("d"), "(begin, size) of slice d of n elements in p.");
}

}  // namespace adacomp
