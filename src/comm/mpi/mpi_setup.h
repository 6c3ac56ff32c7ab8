// src/comm/mpi/mpi_setup.h: what the MPI communicator needs of MPI besides
// its collectives: start-up (MPI_Init_thread once, at the thread level it
// needs), the finalize policy at exit, MPI's error texts and every rank's
// host name. Internal to adacomp_comm_mpi (mpi_communicator.cc).
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp::mpi_internal {

// MPI's text for an error code.
std::string MpiErrorText(int code);

// Initializes MPI (MPI_THREAD_SERIALIZED) unless it is already; Unavailable
// when it was finalized or offers less. Registers the finalize policy below.
Status StartMpi();

// The finalize policy: MPI_Finalize at exit is safe only when every rank
// leaves together (a rank that finalizes while its peers still run or abort
// can hang the job or mpirun itself, as seen with OpenMPI 4.1.4). So the
// process finalizes only if StartMpi initialized MPI, a communicator left
// with a clean handshake with every peer (SetCleanLeave(true)), and nothing
// failed (SetJobFailed()). Otherwise it exits without MPI_Finalize and
// mpirun ends the job, reporting the rank.
void SetCleanLeave(bool clean);
void SetJobFailed();

// Every rank's host name, in rank order (collective over comm).
Result<std::vector<std::string>> HostNames(MPI_Comm comm, int size);

}  // namespace adacomp::mpi_internal
