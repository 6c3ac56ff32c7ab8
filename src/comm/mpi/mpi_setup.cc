// MPI start-up, the finalize policy and host names (see mpi_setup.h).
#include "mpi_setup.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace adacomp::mpi_internal {
namespace {

std::atomic<bool> g_we_initialized{false};
std::atomic<bool> g_clean_leave{false};
std::atomic<bool> g_job_failed{false};

void FinalizeAtExit() {
  if (!g_we_initialized.load() || !g_clean_leave.load() || g_job_failed.load()) return;
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

Status StartMpi() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    return Status::Unavailable("MPI communicator: MPI was already finalized in this process");
  }
  if (initialized) return Status::OK();
  int provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    return Status::Unavailable("MPI communicator: MPI_Init_thread failed: " + MpiErrorText(rc));
  }
  g_we_initialized.store(true);
  std::atexit(FinalizeAtExit);
  if (provided < MPI_THREAD_SERIALIZED) {
    return Status::Unavailable("MPI communicator: this MPI offers thread level " +
                               std::to_string(provided) + ", below MPI_THREAD_SERIALIZED");
  }
  return Status::OK();
}

void SetCleanLeave(bool clean) { g_clean_leave.store(clean); }
void SetJobFailed() { g_job_failed.store(true); }

Result<std::vector<std::string>> HostNames(MPI_Comm comm, int size) {
  std::vector<char> names(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME, 0);
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, 0);
  int length = 0;
  MPI_Get_processor_name(mine.data(), &length);
  mine[MPI_MAX_PROCESSOR_NAME - 1] = 0;
  const int rc = MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  if (rc != MPI_SUCCESS) {
    return Status::Unavailable("MPI communicator: MPI_Allgather of host names failed: " +
                               MpiErrorText(rc));
  }
  std::vector<std::string> hosts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const char* name = names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts[static_cast<size_t>(r)] = std::string(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  }
  return hosts;
}

}  // namespace adacomp::mpi_internal
