// A small MPI job for the failure tests (mpi_failure_test.sh): every rank runs
// a loop of collectives, and at step 5 one rank misbehaves as MODE says:
//   ok     nobody misbehaves; every rank finishes and exits 0
//   kill   the last rank kills itself with SIGKILL
//   abort  rank 1 reports a decode error through Communicator::Abort
//   stall  rank 1 stops calling collectives (sleeps 60 s)
//   leave  rank 1 stops early and exits cleanly (MPI_Finalize at exit)
//   stop   rank 1 stops itself (SIGSTOP), heartbeat thread and all: the
//          heartbeat, not the collective deadline, must name it
//   slow   rank 1 takes one step of 2.5 x HEARTBEAT_SECONDS (its heartbeat
//          goes on): it must not be taken for dead; every rank finishes
// A rank whose collective fails prints the Status and calls Abort(), as the
// trainer does.
// Usage: adacomp_comm_mpi_failure MODE [TIMEOUT_SECONDS [HEARTBEAT_SECONDS]]
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "adacomp/communicator.h"
#include "adacomp/mpi_communicator.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  if (mode != "ok" && mode != "kill" && mode != "abort" && mode != "stall" && mode != "leave" &&
      mode != "stop" && mode != "slow") {
    std::fprintf(stderr,
                 "usage: %s ok|kill|abort|stall|leave|stop|slow [TIMEOUT_SECONDS "
                 "[HEARTBEAT_SECONDS]]\n",
                 argv[0]);
    return 2;
  }
  adacomp::MpiOptions options;
  options.timeout_seconds = argc > 2 ? std::atof(argv[2]) : 5.0;
  if (argc > 3) options.heartbeat_seconds = std::atof(argv[3]);
  auto created = adacomp::CreateMpiCommunicator(options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  adacomp::Communicator& comm = **created;
  const int me = comm.rank();
  const int victim = mode == "kill" ? comm.size() - 1 : 1;
  constexpr int kSteps = 200;
  std::vector<float> grad(1000);
  for (int step = 0; step < kSteps; ++step) {
    if (step == 5 && me == victim) {
      if (mode == "kill") std::raise(SIGKILL);
      if (mode == "abort") {
        comm.Abort(adacomp::Status::Corruption("step 5: frame from rank 1 failed to decode"));
      }
      if (mode == "stall") std::this_thread::sleep_for(std::chrono::seconds(60));
      if (mode == "stop") {
        std::fprintf(stderr, "rank %d: stopping itself (SIGSTOP) at step %d\n", me, step);
        std::fflush(stderr);
        std::raise(SIGSTOP);
      }
      if (mode == "slow") {
        const double seconds = 2.5 * options.heartbeat_seconds;
        std::fprintf(stderr, "rank %d: a slow step of %g s at step %d\n", me, seconds, step);
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      }
      if (mode == "leave") {
        std::fprintf(stderr, "rank %d: leaving early at step %d\n", me, step);
        return 0;
      }
    }
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(me + i);
    adacomp::Status s = comm.AllReduceSum(grad);
    if (s.ok()) {
      adacomp::GatheredBuffers frames;
      std::vector<uint8_t> frame(10 + me, static_cast<uint8_t>(step));
      s = comm.AllGatherV(frame, &frames);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: step %d failed: %s\n", me, step, s.ToString().c_str());
      comm.Abort(s);
    }
    // Pace the loop like a training step.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::printf("rank %d: all %d steps done\n", me, kSteps);
  return 0;
}
