// Saving and resuming a run (see run_checkpoint.h).
#include "run_checkpoint.h"

#include <utility>

#include "byte_io.h"

namespace adacomp::train {

std::vector<uint8_t> CompressorStates(const GradientExchange& exchange) {
  ByteWriter w;
  w.Put<uint64_t>(exchange.compressors());
  for (size_t k = 0; k < exchange.compressors(); ++k) {
    w.PutBytes(exchange.compressor(k).SaveState());
  }
  return std::move(w.bytes);
}

Status LoadCompressorStates(std::span<const uint8_t> bytes, int rank, GradientExchange& exchange) {
  ByteReader r(bytes, "checkpoint: compressor state of learner " + std::to_string(rank));
  uint64_t count = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&count));
  if (count != exchange.compressors()) {
    return Status::Corruption("checkpoint: compressor count does not match the model");
  }
  for (size_t k = 0; k < exchange.compressors(); ++k) {
    Compressor& c = exchange.compressor(k);
    std::span<const uint8_t> state;
    ADACOMP_RETURN_IF_ERROR(r.GetBytes(&state));
    ADACOMP_RETURN_IF_ERROR(c.LoadState(state).WithContext("checkpoint: learner " +
                                                           std::to_string(rank) + " tensor " +
                                                           std::to_string(c.tensor_id())));
  }
  return Status::OK();
}

Status SaveRunCheckpoint(Communicator& comm, const TrainOptions& o, const std::string& fingerprint,
                         int64_t steps_per_epoch, const RunState& state,
                         std::span<const uint8_t> compressor_states,
                         const std::function<std::vector<uint8_t>()>& weights,
                         const std::function<std::vector<uint8_t>()>& optimizer) {
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm.AllGatherV(compressor_states, &all));
  const int rank = comm.rank();
  uint8_t ok = 1;
  Status write_status;
  if (rank == 0) {
    const int64_t done = state.steps_done;
    CheckpointBuilder b;
    b.AddString("fingerprint", fingerprint);
    b.AddU64("steps_done", static_cast<uint64_t>(done));
    b.AddU64("epoch", static_cast<uint64_t>(done / steps_per_epoch));
    b.AddU64("position_in_epoch", static_cast<uint64_t>(done % steps_per_epoch));
    b.AddU64("shuffle_seed", o.run.seed);
    b.AddU64("skipped", static_cast<uint64_t>(state.skipped));
    b.AddU64("consecutive_bad", static_cast<uint64_t>(state.consecutive_bad));
    b.Add("weights", weights());
    b.Add("optimizer", optimizer());
    for (int r = 0; r < comm.size(); ++r) {
      b.Add("compressors/" + std::to_string(r), all.rank(static_cast<size_t>(r)));
    }
    b.Add("totals/run", TotalsBytes(state.run_totals));
    b.Add("totals/epoch", TotalsBytes(state.epoch_totals));
    ByteWriter loss;
    loss.Put(state.epoch_loss_sum);
    loss.Put(state.epoch_loss_count);
    b.Add("epoch_loss", loss.bytes);
    write_status =
        SaveCheckpointFile(o.run.checkpoint_dir, done, b.Serialize(), o.run.keep_checkpoints);
    ok = write_status.ok() ? 1 : 0;
  }
  ADACOMP_RETURN_IF_ERROR(comm.Broadcast(std::span<uint8_t>(&ok, 1), 0));
  if (!ok) {
    return rank == 0 ? write_status : Status::Aborted("rank 0 could not write the checkpoint");
  }
  return Status::OK();
}

namespace {

// Rank 0: the newest usable checkpoint image. *size: its length, -2 for
// none, -1 for an error (in *error).
void FindCheckpoint(const TrainOptions& o, const std::string& fingerprint,
                    const std::function<void(const std::string&)>& message,
                    std::vector<uint8_t>* image, int64_t* size, Status* error) {
  auto list = ListCheckpoints(o.run.checkpoint_dir);
  std::string newest_error;
  for (const auto& [step, path] : list) {
    auto bytes = ReadWholeFile(path);
    Status st = bytes.ok() ? Status::OK() : bytes.status();
    if (st.ok()) {
      auto view = CheckpointView::Parse(*bytes, path);
      if (view.ok()) {
        auto fp = view->GetString("fingerprint");
        if (!fp.ok() || *fp != fingerprint) {
          *error = Status::InvalidArgument(
              path + ": written by a run with different settings; checkpoint has [" +
              (fp.ok() ? *fp : std::string("?")) + "], this run has [" + fingerprint + "]");
          *size = -1;
          return;
        }
        *image = std::move(*bytes);
        *size = static_cast<int64_t>(image->size());
        return;
      }
      st = view.status();
    }
    if (newest_error.empty()) newest_error = st.ToString();
    message("warning: " + st.ToString() + "; trying the previous checkpoint");
  }
  if (!list.empty()) {
    *error = Status::Corruption("no usable checkpoint in " + o.run.checkpoint_dir + " (" +
                                std::to_string(list.size()) +
                                " found, none valid; newest: " + newest_error + ")");
    *size = -1;
    return;
  }
  message("note: no checkpoint in " + o.run.checkpoint_dir + "; starting at step 0");
}

}  // namespace

Status LoadRunCheckpoint(Communicator& comm, const TrainOptions& o, const std::string& fingerprint,
                         int64_t steps_per_epoch,
                         const std::function<void(const std::string&)>& message,
                         LoadedCheckpoint* out, bool* found) {
  *found = false;
  const int rank = comm.rank();
  int64_t size = -2;  // -2: no checkpoint, -1: error on rank 0
  std::vector<uint8_t> image;
  Status rank0_error;
  if (rank == 0) FindCheckpoint(o, fingerprint, message, &image, &size, &rank0_error);
  ADACOMP_RETURN_IF_ERROR(
      comm.Broadcast(std::span<uint8_t>(reinterpret_cast<uint8_t*>(&size), sizeof(size)), 0));
  if (size == -1) {
    return rank == 0 ? rank0_error : Status::Aborted("rank 0 could not load a checkpoint");
  }
  if (size == -2) return Status::OK();
  image.resize(static_cast<size_t>(size));
  ADACOMP_RETURN_IF_ERROR(comm.Broadcast(image, 0));
  ADACOMP_ASSIGN_OR_RETURN(CheckpointView parsed, CheckpointView::Parse(image, "checkpoint"));
  out->view = std::move(parsed);
  const CheckpointView& view = *out->view;
  ADACOMP_ASSIGN_OR_RETURN(uint64_t done, view.GetU64("steps_done"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t skipped, view.GetU64("skipped"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t bad, view.GetU64("consecutive_bad"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t epoch, view.GetU64("epoch"));
  ADACOMP_ASSIGN_OR_RETURN(uint64_t pos, view.GetU64("position_in_epoch"));
  if (epoch != done / static_cast<uint64_t>(steps_per_epoch) ||
      pos != done % static_cast<uint64_t>(steps_per_epoch)) {
    return Status::Corruption("checkpoint: data position does not match its step count");
  }
  ADACOMP_ASSIGN_OR_RETURN(out->weights, view.Get("weights"));
  ADACOMP_ASSIGN_OR_RETURN(out->optimizer, view.Get("optimizer"));
  ADACOMP_ASSIGN_OR_RETURN(out->compressors, view.Get("compressors/" + std::to_string(rank)));
  RunState& s = out->state;
  ADACOMP_ASSIGN_OR_RETURN(auto run_totals, view.Get("totals/run"));
  ADACOMP_RETURN_IF_ERROR(ReadTotals(run_totals, "checkpoint totals", &s.run_totals));
  ADACOMP_ASSIGN_OR_RETURN(auto epoch_totals, view.Get("totals/epoch"));
  ADACOMP_RETURN_IF_ERROR(ReadTotals(epoch_totals, "checkpoint totals", &s.epoch_totals));
  ADACOMP_ASSIGN_OR_RETURN(auto loss, view.Get("epoch_loss"));
  ByteReader lr(loss, "checkpoint epoch loss");
  ADACOMP_RETURN_IF_ERROR(lr.Get(&s.epoch_loss_sum));
  ADACOMP_RETURN_IF_ERROR(lr.Get(&s.epoch_loss_count));
  s.steps_done = static_cast<int64_t>(done);
  s.skipped = static_cast<int64_t>(skipped);
  s.consecutive_bad = static_cast<int64_t>(bad);
  *found = true;
  return Status::OK();
}

}  // namespace adacomp::train
