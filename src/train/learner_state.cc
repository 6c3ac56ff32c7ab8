// One learner's weights, digests, own state and checkpoints (the Learner of
// learner_impl.h): what a checkpoint saves and a resume restores.
#include "learner_impl.h"

namespace adacomp::train::learner_internal {

std::vector<uint8_t> Learner::WeightsBytes() const {
  std::vector<uint8_t> out;
  for (const auto& p : model_.params) {
    auto c = p.tensor.detach().contiguous();
    const auto* b = reinterpret_cast<const uint8_t*>(c.data_ptr<float>());
    out.insert(out.end(), b, b + c.numel() * sizeof(float));
  }
  return out;
}

Status Learner::SetWeights(std::span<const uint8_t> bytes, const std::string& origin) {
  size_t need = 0;
  for (const auto& p : model_.params) need += static_cast<size_t>(p.elements) * sizeof(float);
  if (bytes.size() != need) {
    return Status::Corruption(origin + ": " + std::to_string(bytes.size()) +
                              " bytes of weights, the model needs " + std::to_string(need));
  }
  torch::NoGradGuard no_grad;
  size_t pos = 0;
  for (auto& p : model_.params) {
    size_t n = static_cast<size_t>(p.elements) * sizeof(float);
    std::memcpy(p.tensor.data_ptr<float>(), bytes.data() + pos, n);
    pos += n;
  }
  return Status::OK();
}

std::string Learner::WeightsDigest() const {
  Sha256 h;
  for (const auto& p : model_.params) {
    auto c = p.tensor.detach().contiguous();
    h.Update(c.data_ptr<float>(), static_cast<size_t>(c.numel()) * sizeof(float));
  }
  return h.HexDigest();
}

std::string Learner::StateDigest() const {
  Sha256 h;
  h.Update(CompressorStates(*exchange_));
  h.Update(optimizer_->State());
  if (local_) h.Update(local_->Save());
  if (bins_->has_state()) h.Update(bins_->Save());
  return h.HexDigest();
}

// This learner's own state in a checkpoint: its compressors' states, with
// --local-optimizer its moments after them, with the adaptive schedule its
// windows after them, with --codec auto its chooser last (the fingerprint
// says which, so a checkpoint is never read the other way).
std::vector<uint8_t> Learner::OwnState() const {
  const bool windows = bins_->has_state();
  const bool speed = exchange_->auto_dense();
  if (!local_ && !windows && !speed) return CompressorStates(*exchange_);
  ByteWriter w;
  w.PutBytes(CompressorStates(*exchange_));
  if (local_) w.PutBytes(local_->Save());
  if (windows) w.PutBytes(bins_->Save());
  if (speed) w.PutBytes(exchange_->SaveSpeedState());
  return std::move(w.bytes);
}

Status Learner::LoadOwnState(std::span<const uint8_t> bytes) {
  const bool windows = bins_->has_state();
  const bool speed = exchange_->auto_dense();
  if (!local_ && !windows && !speed) return LoadCompressorStates(bytes, rank_, *exchange_);
  const std::string what = "checkpoint: state of learner " + std::to_string(rank_);
  ByteReader r(bytes, what);
  std::span<const uint8_t> compressors, moments, schedule, chooser;
  ADACOMP_RETURN_IF_ERROR(r.GetBytes(&compressors));
  if (local_) ADACOMP_RETURN_IF_ERROR(r.GetBytes(&moments));
  if (windows) ADACOMP_RETURN_IF_ERROR(r.GetBytes(&schedule));
  if (speed) ADACOMP_RETURN_IF_ERROR(r.GetBytes(&chooser));
  if (!r.AtEnd()) return Status::Corruption(what + " has trailing bytes");
  // As with the weights and the optimizer state before it, a failure here
  // fails the resume, and the run with it.
  ADACOMP_RETURN_IF_ERROR(LoadCompressorStates(compressors, rank_, *exchange_));
  if (local_) {
    ADACOMP_RETURN_IF_ERROR(local_->Load(moments, "checkpoint: learner " + std::to_string(rank_)));
  }
  if (windows) ADACOMP_RETURN_IF_ERROR(bins_->Load(schedule));
  if (speed) {
    ADACOMP_RETURN_IF_ERROR(exchange_->LoadSpeedState(chooser).WithContext(
        "checkpoint: learner " + std::to_string(rank_) + "'s auto choice"));
  }
  return Status::OK();
}

Status Learner::SaveCheckpoint() {
  return SaveRunCheckpoint(
      comm_, o_, fingerprint_, steps_per_epoch_, State(), OwnState(),
      [this] { return WeightsBytes(); }, [this] { return optimizer_->State(); });
}

Status Learner::Resume() {
  LoadedCheckpoint ck;
  bool found = false;
  ADACOMP_RETURN_IF_ERROR(LoadRunCheckpoint(
      comm_, o_, fingerprint_, steps_per_epoch_, [this](const std::string& m) { Message(m); }, &ck,
      &found));
  if (!found) return Status::OK();
  ADACOMP_RETURN_IF_ERROR(SetWeights(ck.weights, "checkpoint"));
  ADACOMP_RETURN_IF_ERROR(optimizer_->LoadState(ck.optimizer, "checkpoint"));
  ADACOMP_RETURN_IF_ERROR(LoadOwnState(ck.compressors));
  steps_done_ = ck.state.steps_done;
  skipped_ = ck.state.skipped;
  consecutive_bad_ = ck.state.consecutive_bad;
  run_totals_ = ck.state.run_totals;
  epoch_totals_ = ck.state.epoch_totals;
  epoch_loss_sum_ = ck.state.epoch_loss_sum;
  epoch_loss_count_ = ck.state.epoch_loss_count;
  resumed_from_ = steps_done_;
  Message("resumed from the checkpoint at step " + std::to_string(steps_done_));
  return Status::OK();
}

}  // namespace adacomp::train::learner_internal
