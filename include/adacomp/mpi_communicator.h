// adacomp/mpi_communicator.h: the Communicator for one process per rank,
// launched with `mpirun -np P program ...` on one host or many (OpenMPI).
//
// Built into the library `adacomp_comm_mpi` (CMake alias adacomp::comm_mpi)
// only when MPI is found; that target defines ADACOMP_HAVE_MPI_COMM=1 for
// code that links it. LaunchedUnderMpi() needs no MPI and lives in
// adacomp_comm, so a program can always ask whether mpirun started it.
//
// Contract (every rank, same order, matching arguments; see communicator.h):
//  - Each collective first exchanges a 32-byte header (collective kind,
//    sequence number, element count, root) point to point with every peer.
//    This lets every rank check that all ranks call the same collective with
//    the same sizes (InvalidArgument on every rank otherwise) and name the
//    ranks that did not arrive when the deadline passes.
//  - AllGatherV: the counts come from the headers (no padding), then
//    MPI_Iallgatherv moves the bytes.
//  - AllReduceSum / AllReduceSumHalf: the ring all-reduce of communicator.h
//    (src/comm/ring.h), point to point: at each of the 2 (P - 1) steps a
//    rank MPI_Isends one chunk to rank + 1 and MPI_Irecvs one from rank - 1
//    (pieces of at most 2^24 values), so every rank moves 2 (P - 1) / P of
//    the buffer each way (float32, or binary16 for the Half variant). The
//    summation order is fixed per chunk, so every rank gets bit-identical
//    results that also equal the in-process group's for the same inputs.
//    (MPI_Allreduce is not used: it promises no order.)
//  - Broadcast: MPI_Ibcast. Barrier: the header exchange.
//  - Every step is non-blocking and polled (MPI_Test, then short sleeps) up
//    to MpiOptions::timeout_seconds per collective. On a timeout the
//    collective returns Unavailable naming the ranks that did not arrive.
//  - Heartbeats (MpiOptions::heartbeat_seconds) on a communicator of their
//    own: a rank that is gone (SIGSTOP, a host cut off) is named within
//    heartbeat_seconds, long before timeout_seconds. The heartbeat thread and
//    the caller's thread take turns on MPI (one mutex around every MPI call).
//  - Any failure is sticky: later collectives return the same Status without
//    touching MPI. A failed job cannot be finalized safely (MPI_Finalize would
//    wait for the peers that are stuck), so after a failure call Abort(), or
//    just destroy the Communicator, which then calls Abort() itself.
//  - Destroying the Communicator runs a last "leave" handshake with every
//    peer (like a barrier). If every rank leaves there, the job ends cleanly.
//    If a peer is inside another collective instead (one rank returned early,
//    e.g. on an error path), the leaving rank aborts the job naming both, and
//    a peer that sees the leave header fails with Unavailable naming the rank
//    that left. So: destroy the Communicator before exiting (RAII in main).
//  - Abort(why) prints "adacomp: rank R of P aborts the MPI job: <why>" on
//    stderr and calls MPI_Abort, so mpirun stops every rank (about 0.4 s
//    here). Abort never returns. Peers are killed rather than handed a Status:
//    under MPI the message naming the rank and cause is that stderr line,
//    plus mpirun's own report.
//    A rank killed by a signal or exiting without finalizing is detected by
//    mpirun itself, which stops the job and names the rank (about 1.5 s here).
//
// Lifetime: CreateMpiCommunicator calls MPI_Init_thread (MPI_THREAD_SERIALIZED)
// unless MPI is already initialized, and duplicates MPI_COMM_WORLD (errors are
// returned, MPI_ERRORS_RETURN). If it initialized MPI, MPI_Finalize runs at
// process exit (atexit) only after a clean leave handshake and no failure;
// otherwise the process exits unfinalized and mpirun ends the job (OpenMPI
// 4.1's mpirun can hang when one rank finalizes while others abort). When the
// caller initialized MPI, the caller finalizes it after destroying every
// Communicator. Create at most one MpiCommunicator at a time.
// Thread safety: one thread at a time (MPI_THREAD_SERIALIZED), as for every
// Communicator; the heartbeat thread is internal and serialized with it.
#pragma once

#include <memory>

#include "adacomp/communicator.h"
#include "adacomp/status.h"

namespace adacomp {

struct MpiOptions {
  // How long one collective waits for every rank before failing with
  // Unavailable (seconds; > 0). Set it above the longest time one rank can
  // spend between two collectives (e.g. evaluating on rank 0 alone).
  double timeout_seconds = 300.0;
  // Liveness, apart from the collectives' deadline: a thread of every rank
  // sends a tiny heartbeat to every peer each second (each heartbeat_seconds
  // / 5 when that is shorter), whatever its learner is doing, and a peer not
  // heard from for heartbeat_seconds is taken for dead (killed, stopped,
  // or its host's link down): the collective in progress, or the next one,
  // fails with Unavailable naming its rank and host. A peer that is merely
  // slow (a long step, evaluation on rank 0) keeps beating and is waited for
  // up to timeout_seconds. 0 turns the heartbeat off (also when MPI was
  // initialized by the caller below MPI_THREAD_SERIALIZED). Set it well above
  // the longest link outage to ride out (TCP resends after a cut back off to
  // a few seconds).
  double heartbeat_seconds = 20.0;
};

// True when this process was started by mpirun/mpiexec or another PMI
// launcher (reads OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, MV2_COMM_WORLD_SIZE).
// Needs no MPI library; defined in adacomp_comm.
bool LaunchedUnderMpi();

// A Communicator whose rank and size are those of MPI_COMM_WORLD.
// Fails with Unavailable when MPI cannot be initialized or lacks
// MPI_THREAD_SERIALIZED support.
Result<std::unique_ptr<Communicator>> CreateMpiCommunicator(const MpiOptions& options = {});

}  // namespace adacomp
