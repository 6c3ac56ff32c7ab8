// LaunchedUnderMpi(): whether a process launcher (mpirun, mpiexec, srun)
// started this process. Reads environment variables only, so it needs no MPI
// library and is part of adacomp_comm.
#include <cstdlib>

#include "adacomp/mpi_communicator.h"

namespace adacomp {

bool LaunchedUnderMpi() {
  // OpenMPI's mpirun, Hydra/MPICH and Slurm's PMI, PMIx, MVAPICH.
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') return true;
  }
  return false;
}

}  // namespace adacomp
