// The binding of adacomp/speed_choice.h, so that the DDP hook's auto=True
// (python/adacomp/torch/auto.py) decides with the trainer's own rule.
#include "adacomp/speed_choice.h"

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "buffers.h"

namespace adacomp {

void AddSpeedChoiceBindings(py::module_& m) {
  py::class_<SpeedChooser>(m, "_SpeedChooser")
      .def(py::init([](int probe_steps, int64_t reprobe_every, double probe_cost, double drift,
                       int64_t min_settled, double margin) {
             SpeedChoiceOptions o;
             o.probe_steps = probe_steps;
             o.reprobe_every = reprobe_every;
             o.probe_cost = probe_cost;
             o.drift = drift;
             o.min_settled = min_settled;
             o.margin = margin;
             const Status status = o.Validate();
             if (!status.ok()) throw py::value_error(status.message());
             return SpeedChooser(o);
           }),
           py::arg("probe_steps") = 3, py::arg("reprobe_every") = 500, py::arg("probe_cost") = 0.01,
           py::arg("drift") = 0.3, py::arg("min_settled") = 50, py::arg("margin") = 0.05)
      .def("decide", [](SpeedChooser& c) { return std::string(StepModeName(c.Decide())); })
      .def("record", &SpeedChooser::Record, py::arg("seconds"))
      .def_property_readonly("note", &SpeedChooser::note)
      .def_property_readonly("started", &SpeedChooser::started)
      .def_property_readonly("dense_seconds", &SpeedChooser::dense_seconds)
      .def_property_readonly("codec_seconds", &SpeedChooser::codec_seconds)
      .def("save_state",
           [](const SpeedChooser& c) {
             const std::vector<uint8_t> s = c.SaveState();
             return py::bytes(reinterpret_cast<const char*>(s.data()), s.size());
           })
      .def("load_state", [](SpeedChooser& c, const py::bytes& b) {
        const std::string s = b;
        const Status status = c.LoadState(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
        if (!status.ok()) throw py::value_error(status.message());
      });
}

}  // namespace adacomp
