#include "run_log.h"

#include <fstream>

namespace adacomp::train {
namespace {

// One counter of /sys/class/net/IFACE/statistics; -1 if it cannot be read.
int64_t ReadCounter(const std::string& iface, const char* name) {
  std::ifstream in("/sys/class/net/" + iface + "/statistics/" + name);
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

}  // namespace

Status SkippedStep(const TrainOptions& o, const GradientExchange& x, const ExchangeResult& xr,
                   int64_t step, int64_t consecutive, std::string* warning) {
  std::string where;
  for (auto [rank, tensor] : xr.non_finite) {
    const std::string name = tensor >= 0 && static_cast<size_t>(tensor) < x.tensors()
                                 ? x.tensor(static_cast<size_t>(tensor)).name
                                 : std::string("?");
    if (!where.empty()) where += "; ";
    where += "learner " + std::to_string(rank) + ", layer " + name;
  }
  *warning = "warning: step " + std::to_string(step + 1) + ": non-finite gradient (" + where +
             "): step skipped on every learner (" + std::to_string(consecutive) +
             " in a row; the run stops at " + std::to_string(o.run.max_bad_steps) + ")";
  if (consecutive < o.run.max_bad_steps) return Status::OK();
  return Status::InvalidArgument("stopping: " + std::to_string(consecutive) +
                                 " consecutive steps with non-finite gradients (last at step " +
                                 std::to_string(step + 1) + ": " + where +
                                 "); lower --lr or check the data");
}

Status RunLog::Open(const TrainOptions& o, bool append, std::vector<ResidueProbe::Tensor> tensors) {
  o_ = &o;
  if (!o.run.link_counters.empty()) {
    if (o.run.link_counters.find('/') != std::string::npos || o.run.link_counters[0] == '.' ||
        ReadCounter(o.run.link_counters, "rx_bytes") < 0) {
      return Status::InvalidArgument("--link-counters " + o.run.link_counters +
                                     ": no readable /sys/class/net/" + o.run.link_counters +
                                     "/statistics/rx_bytes on this host (see `ip link`)");
    }
  }
  if (!o.run.metrics_out.empty()) {
    metrics_ = std::make_unique<std::ofstream>(
        o.run.metrics_out, std::ios::out | (append ? std::ios::app : std::ios::trunc));
    if (!*metrics_) return Status::IOError(o.run.metrics_out + ": cannot open for writing");
  }
  if (!o.run.diagnostics_out.empty()) {
    probe_ = std::make_unique<ResidueProbe>(std::move(tensors));
    diagnostics_ = std::make_unique<std::ofstream>(o.run.diagnostics_out, std::ios::trunc);
    if (!*diagnostics_) return Status::IOError(o.run.diagnostics_out + ": cannot open for writing");
  }
  return Status::OK();
}

void RunLog::BeforeExchange(GradientExchange& x) {
  if (!probe_) return;
  for (size_t k = 0; k < x.compressors(); ++k) {
    if (!x.compressor(k).residue().empty()) probe_->Before(k, x.compressor(k).residue());
  }
}

void RunLog::AfterExchange(GradientExchange& x, std::span<const std::span<const float>> grads) {
  if (!probe_) return;
  for (size_t k = 0; k < x.compressors(); ++k) {
    if (!x.compressor(k).residue().empty()) probe_->After(k, grads[k], x.compressor(k).residue());
  }
  probe_->EndStep();
}

void RunLog::Step(const StepMetrics& m, bool log_point) {
  if (log_point && metrics_) {
    StepMetrics line = m;
    if (!o_->run.link_counters.empty()) {
      line.link_rx_bytes = ReadCounter(o_->run.link_counters, "rx_bytes");
      line.link_tx_bytes = ReadCounter(o_->run.link_counters, "tx_bytes");
    }
    *metrics_ << line.ToJson() << "\n";
    metrics_->flush();
  }
  if (log_point && diagnostics_) {
    *diagnostics_ << probe_->Line(m.step) << "\n";
    diagnostics_->flush();
  }
  if (o_ && o_->run.on_step) o_->run.on_step(m);
}

}  // namespace adacomp::train
