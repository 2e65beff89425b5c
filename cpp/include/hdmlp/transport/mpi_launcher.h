// MpiLauncher: which MPI launcher started this process, read from the
// variables it sets in each process it starts, and which MPI ABIs can join
// the job it started.
//
//   Open MPI's mpirun/prterun   OMPI_COMM_WORLD_SIZE ...      Open MPI only (libmpi.so.40)
//   Intel MPI's mpiexec         PMI_RANK and I_MPI_* ...      MPICH's ABI (libmpi.so.12)
//   MPICH's Hydra mpiexec       PMI_RANK with HYDI_CONTROL_FD or MPI_LOCALRANKID
//                               (also MVAPICH, ParaStation)   MPICH's ABI or the standard ABI
//   Slurm's srun --mpi=pmi2     PMI_RANK/PMI_FD and SLURM_*   MPICH's ABI or the standard ABI
//   any other PMI-1/PMI-2       PMI_RANK or PMI_SIZE          MPICH's ABI or the standard ABI
//   a PMIx launcher (srun --mpi=pmix, prterun without Open MPI's variables)
//                               PMIX_RANK                     any ABI built with PMIx
//
// A process that inherited such variables from its parent rank (a child
// started by another launcher) is told apart elsewhere (hdmlp/launcher.py).
// HDMLP_NO_MPI=1 (or yes, true, on) keeps hdmlp out of MPI whatever the
// environment says. Pure functions of the environment; thread-safe.
#ifndef HDMLP_TRANSPORT_MPI_LAUNCHER_H_
#define HDMLP_TRANSPORT_MPI_LAUNCHER_H_

#include <functional>
#include <string>
#include <vector>

namespace hdmlp {

// getenv's contract: the variable's value, or nullptr when it is not set.
using EnvLookup = std::function<const char*(const char*)>;
// The process's own environment.
const char* ProcessEnv(const char* name);

struct MpiLauncher {
  bool present = false;
  // For messages: "Open MPI's mpirun (OMPI_COMM_WORLD_SIZE=2)".
  std::string name;
  // The ABIs that can join, in the order to try them ("openmpi", "mpich",
  // "mpiabi"); every ABI when the launcher does not tell.
  std::vector<std::string> abis;
  // The job's size as the launcher announces it; 0 when it does not.
  int world_size = 0;
};

MpiLauncher DetectMpiLauncher(const EnvLookup& env = ProcessEnv);

// HDMLP_NO_MPI set to anything but "", 0, no, false or off.
bool NoMpiRequested(const EnvLookup& env = ProcessEnv);

// Every ABI hdmlp knows, in the order the dynamic loader's candidates are tried.
const std::vector<std::string>& MpiAbis();
// The library names of an ABI, tried in this order: {"libmpi.so.40"} for "openmpi", ...
const std::vector<std::string>& MpiLibraryNames(const std::string& abi);
// For messages: "Open MPI (libmpi.so.40)", "an MPI with MPICH's ABI (libmpi.so.12: MPICH, Intel MPI, ...)".
std::string DescribeMpiAbi(const std::string& abi);
// What to install for an ABI, for messages.
std::string InstallMpiHint(const std::string& abi);

}  // namespace hdmlp

#endif  // HDMLP_TRANSPORT_MPI_LAUNCHER_H_
