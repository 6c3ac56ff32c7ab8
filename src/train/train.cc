// The public entry points of include/adacomp/trainer.h: Train() hosts
// every learner on a thread of this process (in-process group, one gate on
// the cores); TrainLearner() runs one learner over the caller's
// communicator. Torch-free: the loop is in learner.cc.
#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include "adacomp/trainer.h"
#include "dataset.h"
#include "learner.h"
#include "options.h"
#include "test_hooks.h"

namespace adacomp {

namespace {

Result<TrainOptions> ResolveWithHooks(const TrainOptions& options, const TrainTestHooks& hooks) {
  ADACOMP_ASSIGN_OR_RETURN(TrainOptions o, train::Resolve(options));
  ADACOMP_RETURN_IF_ERROR(train::CheckHooks(o, hooks));
  return o;
}

}  // namespace

Status ValidateTrainOptions(const TrainOptions& options, const TrainTestHooks& hooks) {
  return ResolveWithHooks(options, hooks).status();
}

Status ValidateTrainOptions(const TrainOptions& options) {
  return ValidateTrainOptions(options, TrainTestHooks{});
}

Result<TrainSummary> Train(const TrainOptions& options) { return Train(options, TrainTestHooks{}); }

Result<TrainSummary> TrainLearner(const TrainOptions& options, Communicator& comm) {
  return TrainLearner(options, comm, TrainTestHooks{});
}

Result<TrainSummary> Train(const TrainOptions& options, const TrainTestHooks& hooks) {
  ADACOMP_ASSIGN_OR_RETURN(TrainOptions o, ResolveWithHooks(options, hooks));
  ADACOMP_ASSIGN_OR_RETURN(auto data, train::LoadData(o));
  auto group = CreateInProcessGroup(o.run.learners);
  if (static_cast<int>(group.size()) != o.run.learners) {
    return Status::Internal("could not create an in-process group of " +
                            std::to_string(o.run.learners));
  }
  int slots = o.run.threads > 0
                  ? o.run.threads
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  train::Gate gate(std::min(slots, 4096));
  std::vector<std::optional<Result<TrainSummary>>> results(static_cast<size_t>(o.run.learners));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.run.learners; ++r) {
    threads.emplace_back([&, r] {
      results[static_cast<size_t>(r)] =
          train::RunLearner(o, hooks, *group[static_cast<size_t>(r)], data, &gate);
    });
  }
  for (auto& t : threads) t.join();
  // The root cause: the first error that is not another learner's abort.
  const Status* first = nullptr;
  for (auto& r : results) {
    if (r->ok()) continue;
    StatusCode c = r->status().code();
    if (c != StatusCode::kAborted && c != StatusCode::kUnavailable) return r->status();
    if (!first) first = &r->status();
  }
  if (first) return *first;
  return std::move(*results[0]);
}

Result<TrainSummary> TrainLearner(const TrainOptions& options, Communicator& comm,
                                  const TrainTestHooks& hooks) {
  ADACOMP_ASSIGN_OR_RETURN(TrainOptions o, ResolveWithHooks(options, hooks));
  if (comm.size() != o.run.learners) {
    return Status::InvalidArgument("--learners " + std::to_string(o.run.learners) +
                                   " does not match the " + std::to_string(comm.size()) +
                                   " processes of the communicator");
  }
  ADACOMP_ASSIGN_OR_RETURN(auto data, train::LoadData(o));
  return train::RunLearner(o, hooks, comm, std::move(data), nullptr);
}

}  // namespace adacomp
