// python/src/module.cc: the `_adacomp` extension module (pybind11).
//
// Binds the framework-neutral core (include/adacomp/codec.h) for Python.
// Tensors come in through the buffer protocol (numpy arrays; a CPU torch
// tensor's .numpy() is a zero-copy view), so no gradient data is copied on
// the way in or out: Compress() reads the caller's buffer in place and
// DecodeAccumulate() / DecodeAverageAll() write into the caller's buffer in
// place (decompress_average reads every frame through the buffer protocol too).
// The only copy is of the (small) frame into a Python bytes object.
//
// The GIL is released while the core runs. A Compressor object guards itself
// with a mutex, so two Python threads calling the same object queue up instead
// of racing; distinct objects run in parallel.
//
// Errors: InvalidArgument -> ValueError; a frame that fails validation
// (Corruption, OutOfRange, NotFound) -> adacomp.FrameError (a ValueError
// subclass); anything else -> RuntimeError. Messages are the core's own
// (decompress_average prefixes "frame <j> of <n>: " and sets the exception's
// `frame` attribute to j when one of several frames is at fault).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/schedule.h"
#include "adacomp/status.h"
#include "adacomp/version.h"
#include "buffers.h"

namespace py = pybind11;

namespace adacomp {
namespace {

py::dict StatsToDict(const CompressStats& s) {
  py::dict d;
  d["elements"] = s.elements;
  d["selected"] = s.selected;
  d["bins"] = s.bins;
  d["frame_bytes"] = s.frame_bytes;
  d["compression_rate"] = s.CompressionRate();
  py::list hist;
  for (uint64_t v : s.bin_histogram) hist.append(v);
  d["bin_histogram"] = hist;
  return d;
}

py::dict InfoToDict(const FrameInfo& info) {
  py::dict d;
  d["version"] = info.version;
  d["codec"] = std::string(CodecName(info.codec));
  d["tensor_id"] = info.tensor_id;
  d["elements"] = info.elements;
  d["params_bytes"] = info.params_bytes;
  d["payload_bytes"] = info.payload_bytes;
  d["frame_bytes"] = info.frame_bytes;
  d["crc32c"] = info.crc32c;
  d["selected"] = info.selected;
  if (info.codec == Codec::kAdaComp) {
    d["bin_size"] = info.bin_size;
    d["values"] = std::string(ValueModeName(info.values));
  }
  d["scale"] = info.scale;
  d["scale2"] = info.scale2;
  return d;
}

// A `threads` argument as the core's int; values beyond int's range (which
// the core would reject anyway) raise ValueError here instead of pybind11's
// TypeError, so that every bad value raises the same exception type.
int ThreadsArg(int64_t threads, const char* what) {
  if (threads < std::numeric_limits<int>::min() || threads > std::numeric_limits<int>::max()) {
    throw py::value_error(std::string(what) + " is " + std::to_string(threads) + ", out of range");
  }
  return static_cast<int>(threads);
}

DecodeOptions MakeDecodeOptions(std::optional<uint32_t> expected_tensor_id,
                                std::optional<uint64_t> max_frame_bytes,
                                std::optional<uint64_t> max_elements) {
  DecodeOptions options;
  options.expected_tensor_id = expected_tensor_id;
  if (max_frame_bytes) options.max_frame_bytes = *max_frame_bytes;
  if (max_elements) options.max_elements = *max_elements;
  return options;
}

// One tensor's compressor plus the last call's statistics.
class PyCompressor {
 public:
  PyCompressor(uint64_t elements, const std::string& codec, uint32_t bin_size,
               const std::string& values, double density, float tau, uint64_t seed,
               uint32_t tensor_id, int64_t threads) {
    Result<Codec> c = ParseCodec(codec);
    if (!c.ok()) ThrowStatus(c.status(), false);
    Result<ValueMode> v = ParseValueMode(values);
    if (!v.ok()) ThrowStatus(v.status(), false);
    config_.codec = *c;
    config_.bin_size = bin_size;
    config_.values = *v;
    config_.density = density;
    config_.tau = tau;
    config_.seed = seed;
    config_.threads = ThreadsArg(threads, "threads");  // Create() checks 1..256 -> ValueError
    auto created = Compressor::Create(config_, tensor_id, elements);
    if (!created.ok()) ThrowStatus(created.status(), false);
    impl_ = std::move(created).value();
  }

  py::bytes Compress(const py::buffer& grad) {
    py::buffer_info info = RequestFloat32(grad, /*writable=*/false, "grad");
    size_t n = ContiguousElements(info, "grad");
    if (n != impl_->elements()) {
      throw py::value_error("grad has " + std::to_string(n) +
                            " elements, this compressor was created for " +
                            std::to_string(impl_->elements()));
    }
    std::span<const float> span(static_cast<const float*>(info.ptr), n);
    Status status;
    CompressStats stats;
    std::vector<uint8_t> frame;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      frame.reserve(last_stats_.frame_bytes);
      status = impl_->Compress(span, &frame, &stats);
      if (status.ok()) {
        last_stats_ = stats;
        ++compressed_since_snapshot_;
      }
    }
    if (!status.ok()) ThrowStatus(status, false);
    return py::bytes(reinterpret_cast<const char*>(frame.data()), frame.size());
  }

  py::dict LastStats() const {
    CompressStats copy;
    {
      std::lock_guard<std::mutex> lock(mu_);  // never held by a thread that waits for the GIL
      copy = last_stats_;
    }
    return StatsToDict(copy);
  }

  // A copy of the residue as a float32 numpy array; empty for codecs without one.
  py::array_t<float> Residue() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::span<const float> r = impl_->residue();
    return py::array_t<float>(static_cast<py::ssize_t>(r.size()), r.data());
  }

  py::bytes SaveState() const {
    std::vector<uint8_t> state;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      state = impl_->SaveState();
    }
    return py::bytes(reinterpret_cast<const char*>(state.data()), state.size());
  }

  void LoadState(const py::buffer& state) {
    py::buffer_info holder;
    std::span<const uint8_t> bytes = RequestBytes(state, &holder, "state");
    Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = impl_->LoadState(bytes);
      if (status.ok() && has_snapshot_) {  // a loaded state supersedes the snapshot
        impl_->KeepSinceMark();
        has_snapshot_ = false;
      }
    }
    if (!status.ok()) ThrowStatus(status, false);
  }

  // Remembers the current residue, step counter and last_stats, so that
  // Restore() can undo the compressions that follow (Compressor::Mark: for
  // adacomp no copy, the next compression writes its residue beside the
  // marked one; for the others one copy into a buffer kept between calls),
  // far less than SaveState(), which also encodes and checksums.
  void Snapshot() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    impl_->Mark();
    snapshot_stats_ = last_stats_;
    compressed_since_snapshot_ = 0;
    has_snapshot_ = true;
  }

  // Puts back what Snapshot() saw and forgets the snapshot. Returns whether it
  // had to change anything (false when nothing was compressed since).
  bool Restore() {
    Status status;
    bool changed = false;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      if (!has_snapshot_) {
        status = Status::Internal("restore: no snapshot (call snapshot() first)");
      } else if (compressed_since_snapshot_ > 0) {
        status = impl_->UndoToMark();
        changed = status.ok();
      } else {
        impl_->KeepSinceMark();  // nothing to undo
      }
      if (status.ok()) {
        last_stats_ = snapshot_stats_;
        compressed_since_snapshot_ = 0;
        has_snapshot_ = false;
      }
    }
    if (!status.ok()) ThrowStatus(status, false);
    return changed;
  }

  // Empties the residue (the hook's auto=True, once a dense step has sent
  // it); the step counter stays. Not while a snapshot is held.
  void ClearResidue() {
    Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = has_snapshot_
                   ? Status::Internal("clear_residue: a snapshot is held (end the step first)")
                   : impl_->ClearResidue();
    }
    if (!status.ok()) ThrowStatus(status, false);
  }

  // Forgets the snapshot (the compressions since are kept).
  void DiscardSnapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    if (has_snapshot_) impl_->KeepSinceMark();
    has_snapshot_ = false;
  }

  bool has_snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return has_snapshot_;
  }

  uint64_t elements() const { return impl_->elements(); }
  uint32_t tensor_id() const { return impl_->tensor_id(); }
  std::string codec() const { return std::string(CodecName(config_.codec)); }
  uint32_t bin_size() const { return config_.bin_size; }
  // The schedule's bin size from the next compress() on (Compressor::SetBinSize).
  void SetBinSize(uint32_t bin_size) {
    const Status status = impl_->SetBinSize(bin_size);
    if (!status.ok()) ThrowStatus(status, false);
    config_.bin_size = bin_size;
  }
  std::string values() const { return std::string(ValueModeName(config_.values)); }
  double density() const { return config_.density; }
  float tau() const { return config_.tau; }
  uint64_t seed() const { return config_.seed; }
  int threads() const { return config_.threads; }

 private:
  CodecConfig config_;
  std::unique_ptr<Compressor> impl_;
  mutable std::mutex mu_;
  CompressStats last_stats_;
  // Snapshot() / Restore().
  bool has_snapshot_ = false;
  CompressStats snapshot_stats_;
  uint64_t compressed_since_snapshot_ = 0;
};

// Runs op(bytes, dst) with the GIL released on the bytes of `frame` and the
// float32 elements of `out` (both read in place), and raises its Status.
template <class Op>
void WithFrameAndOut(const py::buffer& frame, const py::buffer& out, Op&& op) {
  py::buffer_info frame_holder;
  std::span<const uint8_t> bytes = RequestBytes(frame, &frame_holder, "frame");
  py::buffer_info out_info;
  std::span<float> dst = RequestOut(out, &out_info);
  Status status;
  {
    py::gil_scoped_release release;
    status = op(bytes, dst);
  }
  if (!status.ok()) ThrowStatus(status, true);
}

// Adds the frame at the start of `frame` into `out`; returns the bytes the
// frame occupies (so that concatenated frames can be walked).
uint64_t DecompressAdd(const py::buffer& frame, const py::buffer& out,
                       std::optional<uint32_t> expected_tensor_id,
                       std::optional<uint64_t> max_frame_bytes,
                       std::optional<uint64_t> max_elements) {
  const DecodeOptions options =
      MakeDecodeOptions(expected_tensor_id, max_frame_bytes, max_elements);
  FrameInfo info;
  WithFrameAndOut(frame, out, [&](std::span<const uint8_t> bytes, std::span<float> dst) {
    return DecodeAccumulate(bytes, dst, &info, options);
  });
  return info.frame_bytes;
}

// Writes over `out` the average of the frames (one tensor's frame from each
// learner, in order): bit for bit zeroing `out`, adding the frames in order
// and dividing by their count. Every frame is validated first; on any error
// `out` is untouched and the message names the failing frame's position.
// Each frame buffer is read in place (buffer protocol, no copy) and may run
// past its frame. Returns each frame's length in bytes. An error about one
// frame (FrameError, or ValueError for a wrong size or tensor id) has the
// message "frame <j> of <count>: <reason>" and the attribute `frame` = j.
// Every item of `seq` as bytes (`what`[j] in messages); holders (one per item,
// sized by the caller) keep the buffers exported while the spans are used.
std::vector<uint64_t> DecompressAverage(const py::sequence& frames, const py::buffer& out,
                                        std::optional<uint32_t> expected_tensor_id,
                                        std::optional<uint64_t> max_frame_bytes,
                                        std::optional<uint64_t> max_elements, int64_t threads) {
  if (py::isinstance<py::str>(frames) || py::isinstance<py::bytes>(frames) ||
      py::isinstance<py::bytearray>(frames) || py::isinstance<py::memoryview>(frames)) {
    throw py::value_error(
        "frames must be a sequence of bytes-like objects (one per frame), not "
        "a single buffer; wrap it in a list");
  }
  const size_t count = py::len(frames);
  if (count == 0) throw py::value_error("frames is empty; nothing to average");
  // The buffer_info objects keep every frame's buffer exported until the end.
  std::vector<py::buffer_info> holders(count);
  std::vector<std::span<const uint8_t>> spans = RequestByteSequence(frames, "frames", &holders);
  py::buffer_info out_info;
  std::span<float> dst = RequestOut(out, &out_info);
  DecodeOptions options = MakeDecodeOptions(expected_tensor_id, max_frame_bytes, max_elements);
  options.threads = ThreadsArg(threads, "threads");  // the core checks 1..256 -> ValueError
  std::vector<FrameInfo> infos(count);
  constexpr size_t kNoFrame = ~size_t{0};
  size_t failed = kNoFrame;
  Status status;
  {
    py::gil_scoped_release release;
    status = DecodeAverageAll(spans, dst, infos, options, &failed);
  }
  if (!status.ok()) {
    if (failed == kNoFrame) ThrowStatus(status, true);
    ThrowStatus(
        status.WithContext("frame " + std::to_string(failed) + " of " + std::to_string(count)),
        true, failed);
  }
  std::vector<uint64_t> lengths(count);
  for (size_t j = 0; j < count; ++j) lengths[j] = infos[j].frame_bytes;
  return lengths;
}

// Several ranks' messages for a set of tensors (adacomp::DecodeAverageMessages):
// messages[r] is rank r's frames, one per tensor in order; outs[k] (float32,
// writable) receives the average of tensor k over the messages. Everything is
// validated before any out is written. Returns [[frame bytes of tensor k in
// message r for r] for k]. Errors: FrameError / ValueError with attributes
// `message` (the rank) and `tensor` (its index; len(outs) for bytes left over
// after a message's last frame), the message text without that context.
std::vector<std::vector<uint64_t>> DecompressAverageMessages(const py::sequence& messages,
                                                             const py::sequence& outs,
                                                             const py::sequence& tensor_ids) {
  for (const py::sequence* seq : {&messages, &outs, &tensor_ids}) {
    if (py::isinstance<py::str>(*seq) || py::isinstance<py::bytes>(*seq) ||
        py::isinstance<py::bytearray>(*seq) || py::isinstance<py::memoryview>(*seq)) {
      throw py::value_error(
          "messages, outs and tensor_ids must be sequences (lists), not a "
          "single buffer");
    }
  }
  const size_t count = py::len(messages);
  const size_t tensors = py::len(outs);
  if (count == 0) throw py::value_error("messages is empty; nothing to average");
  if (py::len(tensor_ids) != tensors) {
    throw py::value_error("outs has " + std::to_string(tensors) + " entries, tensor_ids " +
                          std::to_string(py::len(tensor_ids)));
  }
  std::vector<py::buffer_info> holders(count);
  std::vector<std::span<const uint8_t>> spans = RequestByteSequence(messages, "messages", &holders);
  std::vector<py::buffer_info> out_holders;
  std::vector<MessageTensor> specs =
      RequestOutTensors(outs, py::cast<std::vector<uint32_t>>(tensor_ids), &out_holders);
  std::vector<FrameInfo> infos(count * tensors);
  MessageError where;
  Status status;
  {
    py::gil_scoped_release release;
    status = DecodeAverageMessages(spans, specs, infos, DecodeOptions{}, &where);
  }
  if (!status.ok()) {
    const std::string& msg = status.message().empty() ? status.ToString() : status.message();
    PyObject* type =
        status.code() == StatusCode::kInvalidArgument ? PyExc_ValueError : g_frame_error;
    py::object exc =
        py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", msg.c_str()));
    if (!exc) throw py::error_already_set();
    exc.attr("message") = py::int_(where.message);
    exc.attr("tensor") = py::int_(where.tensor);
    PyErr_SetObject(type, exc.ptr());
    throw py::error_already_set();
  }
  std::vector<std::vector<uint64_t>> lengths(tensors, std::vector<uint64_t>(count));
  for (size_t k = 0; k < tensors; ++k) {
    for (size_t r = 0; r < count; ++r) lengths[k][r] = infos[k * count + r].frame_bytes;
  }
  return lengths;
}

py::dict Inspect(const py::buffer& frame, std::optional<uint32_t> expected_tensor_id,
                 std::optional<uint64_t> max_frame_bytes, std::optional<uint64_t> max_elements) {
  py::buffer_info holder;
  std::span<const uint8_t> bytes = RequestBytes(frame, &holder, "frame");
  DecodeOptions options = MakeDecodeOptions(expected_tensor_id, max_frame_bytes, max_elements);
  FrameInfo info;
  Status status;
  {
    py::gil_scoped_release release;
    status = InspectFrame(bytes, &info, options);
  }
  if (!status.ok()) ThrowStatus(status, true);
  return InfoToDict(info);
}

// Index of the first NaN/Inf in a float32 buffer, or None.
std::optional<size_t> FindNonFinitePy(const py::buffer& values) {
  py::buffer_info info = RequestFloat32(values, false, "values");
  size_t n = ContiguousElements(info, "values");
  std::span<const float> span(static_cast<const float*>(info.ptr), n);
  py::gil_scoped_release release;
  return FindNonFinite(span);
}

}  // namespace
}  // namespace adacomp

PYBIND11_MODULE(_adacomp, m) {
  using adacomp::PyCompressor;
  m.doc() = "adacomp core bindings (use the `adacomp` package, not this module directly)";

  static py::exception<std::runtime_error> frame_error(m, "FrameError", PyExc_ValueError);
  adacomp::g_frame_error = frame_error.ptr();
  adacomp::AddSliceBindings(m);
  adacomp::AddLocalStepBindings(m);
  adacomp::AddSpeedChoiceBindings(m);

  py::class_<PyCompressor> compressor(m, "Compressor");
  compressor
      .def(py::init<uint64_t, const std::string&, uint32_t, const std::string&, double, float,
                    uint64_t, uint32_t, int64_t>(),
           py::arg("elements"), py::arg("codec") = "adacomp", py::arg("bin_size") = 500,
           py::arg("values") = "ternary", py::arg("density") = 0.01, py::arg("tau") = 1e-3f,
           py::arg("seed") = 0, py::arg("tensor_id") = 0, py::arg("threads") = 1)
      .def("compress", &PyCompressor::Compress, py::arg("grad"))
      .def_property_readonly("residue", &PyCompressor::Residue)
      .def("_save_state", &PyCompressor::SaveState)
      .def("_load_state", &PyCompressor::LoadState, py::arg("state"))
      .def("snapshot", &PyCompressor::Snapshot)
      .def("restore", &PyCompressor::Restore)
      .def("discard_snapshot", &PyCompressor::DiscardSnapshot)
      .def("clear_residue", &PyCompressor::ClearResidue)
      .def("set_bin_size", &PyCompressor::SetBinSize, py::arg("bin_size"));
  adacomp::AddReadOnly(compressor,
                       {"has_snapshot", "last_stats", "elements", "tensor_id", "codec", "bin_size",
                        "values", "density", "tau", "seed", "threads"},
                       &PyCompressor::has_snapshot, &PyCompressor::LastStats,
                       &PyCompressor::elements, &PyCompressor::tensor_id, &PyCompressor::codec,
                       &PyCompressor::bin_size, &PyCompressor::values, &PyCompressor::density,
                       &PyCompressor::tau, &PyCompressor::seed, &PyCompressor::threads);

  // The ramp of adacomp/schedule.h, so that the hook and the trainer share one formula.
  m.def(
      "ramp_bin_size",
      [](uint32_t target, int64_t step, int64_t ramp_steps, uint32_t ramp_start, int ramp_stages) {
        adacomp::BinSchedule s;
        s.ramp_steps = ramp_steps;
        s.ramp_start = ramp_start;
        s.ramp_stages = ramp_stages;
        const adacomp::Status status = s.Validate();
        if (!status.ok()) throw py::value_error(status.message());
        if (target < 1) throw py::value_error("target bin size must be >= 1");
        return adacomp::RampBinSize(s, target, step);
      },
      py::arg("target"), py::arg("step"), py::arg("ramp_steps"), py::arg("ramp_start") = 8,
      py::arg("ramp_stages") = 4);
  // The whole schedule (ramp and adaptive part) of adacomp/schedule.h, for the hook.
  py::class_<adacomp::BinScheduler>(m, "_BinScheduler")
      .def(py::init([](std::vector<uint32_t> targets, int64_t ramp_steps, uint32_t ramp_start,
                       int ramp_stages, double adapt_threshold, int64_t adapt_window,
                       int64_t adapt_hold, uint32_t adapt_bin_size) {
             adacomp::BinSchedule s;
             s.ramp_steps = ramp_steps;
             s.ramp_start = ramp_start;
             s.ramp_stages = ramp_stages;
             s.adapt_threshold = adapt_threshold;
             s.adapt_window = adapt_window;
             s.adapt_hold = adapt_hold;
             s.adapt_bin_size = adapt_bin_size;
             const adacomp::Status status = s.Validate();
             if (!status.ok()) throw py::value_error(status.message());
             return adacomp::BinScheduler(s, std::move(targets));
           }),
           py::arg("targets"), py::arg("ramp_steps"), py::arg("ramp_start"), py::arg("ramp_stages"),
           py::arg("adapt_threshold"), py::arg("adapt_window"), py::arg("adapt_hold"),
           py::arg("adapt_bin_size"))
      .def("bin_size",
           [](const adacomp::BinScheduler& s, size_t k, int64_t step) {
             if (k >= s.tensors()) throw py::index_error("tensor index out of range");
             return s.BinSize(k, step);
           })
      .def("lightened",
           [](const adacomp::BinScheduler& s, size_t k, int64_t step) {
             if (k >= s.tensors()) throw py::index_error("tensor index out of range");
             return s.Lightened(k, step);
           })
      .def("observe",
           [](adacomp::BinScheduler& s, int64_t step, const std::vector<double>& norms) {
             if (norms.size() != s.tensors()) {
               throw py::value_error(std::to_string(norms.size()) + " norms for " +
                                     std::to_string(s.tensors()) + " tensors");
             }
             s.Observe(step, norms);
           })
      .def("lr_dropped", &adacomp::BinScheduler::LrDropped)
      .def("save",
           [](const adacomp::BinScheduler& s) {
             const std::vector<uint8_t> b = s.Save();
             return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           })
      .def("load", [](adacomp::BinScheduler& s, const py::bytes& b) {
        const std::string bytes = b;
        const adacomp::Status st = s.Load(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
        if (!st.ok()) throw py::value_error(st.message());
      });
  // The L2 norm of a float32 array (adacomp::SumOfSquares: the same bits on every
  // rank, the adaptive schedule's input), without the GIL.
  m.def(
      "_l2_norm",
      [](const py::buffer& values) {
        py::buffer_info info = adacomp::RequestFloat32(values, false, "values");
        const size_t n = adacomp::ContiguousElements(info, "values");
        const std::span<const float> v(static_cast<const float*>(info.ptr), n);
        py::gil_scoped_release release;
        return std::sqrt(adacomp::SumOfSquares(v));
      },
      py::arg("values"));
  m.def("decompress_add", &adacomp::DecompressAdd, py::arg("frame"), py::arg("out"),
        py::arg("expected_tensor_id") = py::none(), py::arg("max_frame_bytes") = py::none(),
        py::arg("max_elements") = py::none());
  m.def("decompress_average", &adacomp::DecompressAverage, py::arg("frames"), py::arg("out"),
        py::arg("expected_tensor_id") = py::none(), py::arg("max_frame_bytes") = py::none(),
        py::arg("max_elements") = py::none(), py::arg("threads") = 1);
  m.def("decompress_average_messages", &adacomp::DecompressAverageMessages, py::arg("messages"),
        py::arg("outs"), py::arg("tensor_ids"));
  m.def("inspect", &adacomp::Inspect, py::arg("frame"), py::arg("expected_tensor_id") = py::none(),
        py::arg("max_frame_bytes") = py::none(), py::arg("max_elements") = py::none());
  m.def("find_non_finite", &adacomp::FindNonFinitePy, py::arg("values"));
  // Takes one more reference to obj and never gives it back, so obj outlives the
  // interpreter's shutdown (python/adacomp/torch/worker.py: tensors a Gloo worker thread
  // may still hold must not be freed while the interpreter finalizes).
  m.def(
      "_keep_past_exit", [](py::object obj) { obj.inc_ref(); }, py::arg("obj"));
  // The layer types of the codec level and their default bin sizes (L_T).
  py::tuple layer_types(adacomp::kLayerTypeCount);
  py::dict bin_sizes;
  for (int t = 0; t < adacomp::kLayerTypeCount; ++t) {
    const auto type = static_cast<adacomp::LayerType>(t);
    layer_types[t] = py::str(adacomp::LayerTypeName(type));
    bin_sizes[py::str(adacomp::LayerTypeName(type))] = adacomp::DefaultBinSize(type);
  }
  m.attr("LAYER_TYPES") = layer_types;
  m.attr("DEFAULT_BIN_SIZES") = bin_sizes;
  m.attr("__version__") = ADACOMP_VERSION_STRING;
}
