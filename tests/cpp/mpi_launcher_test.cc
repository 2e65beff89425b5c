// DetectMpiLauncher: which launcher started the process, and which MPI ABIs can join its job.
#include "hdmlp/transport/mpi_launcher.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

namespace hdmlp {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(MpiLauncherTest, NoLauncherVariablesIsNoLauncher) {
  EXPECT_FALSE(DetectMpiLauncher(Env({})).present);
  // torchrun's and Slurm's variables alone are not an MPI launcher's.
  EXPECT_FALSE(DetectMpiLauncher(Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_NTASKS", "4"}})).present);
  // An Open MPI setting in the environment is not mpirun's job.
  EXPECT_FALSE(DetectMpiLauncher(Env({{"OMPI_MCA_btl", "tcp,self"}})).present);
}

TEST(MpiLauncherTest, OpenMpisMpirunTakesOnlyOpenMpi) {
  const MpiLauncher l = DetectMpiLauncher(Env({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"},
                                               {"PMIX_RANK", "1"}}));
  EXPECT_TRUE(l.present);
  EXPECT_EQ(l.abis, std::vector<std::string>({"openmpi"}));
  EXPECT_EQ(l.world_size, 4);
  EXPECT_NE(l.name.find("Open MPI's mpirun"), std::string::npos) << l.name;
  EXPECT_NE(l.name.find("OMPI_COMM_WORLD_SIZE=4"), std::string::npos) << l.name;
}

TEST(MpiLauncherTest, HydraTakesMpichsAbiThenTheStandardAbi) {
  const MpiLauncher l = DetectMpiLauncher(Env({{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}, {"PMI_FD", "9"},
                                               {"HYDI_CONTROL_FD", "7"}, {"MPI_LOCALRANKID", "0"}}));
  EXPECT_TRUE(l.present);
  EXPECT_EQ(l.abis, std::vector<std::string>({"mpich", "mpiabi"}));
  EXPECT_EQ(l.world_size, 3);
  EXPECT_NE(l.name.find("Hydra"), std::string::npos) << l.name;
}

TEST(MpiLauncherTest, IntelMpiTakesMpichsAbi) {
  const MpiLauncher l =
      DetectMpiLauncher(Env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"I_MPI_ROOT", "/opt/intel/mpi"}}));
  EXPECT_EQ(l.abis, std::vector<std::string>({"mpich"}));
  EXPECT_NE(l.name.find("Intel MPI"), std::string::npos) << l.name;
}

TEST(MpiLauncherTest, SrunWithPmi2OrPmix) {
  const MpiLauncher pmi2 = DetectMpiLauncher(
      Env({{"PMI_RANK", "1"}, {"PMI_FD", "5"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "6"}}));
  EXPECT_EQ(pmi2.abis, std::vector<std::string>({"mpich", "mpiabi"}));
  EXPECT_EQ(pmi2.world_size, 6);  // PMI_SIZE missing: Slurm's count of the step's tasks
  EXPECT_NE(pmi2.name.find("srun --mpi=pmi2"), std::string::npos) << pmi2.name;
  const MpiLauncher pmix =
      DetectMpiLauncher(Env({{"PMIX_RANK", "2"}, {"SLURM_STEP_ID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}}));
  EXPECT_EQ(pmix.abis, MpiAbis());  // any MPI built with PMIx can join
  EXPECT_EQ(pmix.world_size, 4);
  EXPECT_NE(pmix.name.find("srun --mpi=pmix"), std::string::npos) << pmix.name;
  const MpiLauncher prterun = DetectMpiLauncher(Env({{"PMIX_RANK", "0"}}));
  EXPECT_TRUE(prterun.present);
  EXPECT_EQ(prterun.world_size, 0);  // not announced
}

TEST(MpiLauncherTest, HdmlpNoMpiWinsOverEveryLauncher) {
  for (const char* off : {"1", "yes", "TRUE", "on"}) {
    EXPECT_TRUE(NoMpiRequested(Env({{"HDMLP_NO_MPI", off}}))) << off;
    EXPECT_FALSE(DetectMpiLauncher(Env({{"HDMLP_NO_MPI", off}, {"OMPI_COMM_WORLD_SIZE", "2"}})).present) << off;
  }
  for (const char* on : {"", "0", "no", "False", "off"}) {
    EXPECT_FALSE(NoMpiRequested(Env({{"HDMLP_NO_MPI", on}}))) << on;
    EXPECT_TRUE(DetectMpiLauncher(Env({{"HDMLP_NO_MPI", on}, {"PMI_SIZE", "2"}})).present) << on;
  }
}

TEST(MpiLauncherTest, EveryAbiHasLibraryNamesAndAnInstallHint) {
  for (const auto& abi : MpiAbis()) {
    EXPECT_FALSE(MpiLibraryNames(abi).empty()) << abi;
    EXPECT_NE(InstallMpiHint(abi).find("pip install"), std::string::npos) << abi;
  }
  EXPECT_EQ(MpiLibraryNames("openmpi").front(), "libmpi.so.40");
  EXPECT_EQ(MpiLibraryNames("mpich").front(), "libmpi.so.12");
  EXPECT_EQ(MpiLibraryNames("mpiabi").front(), "libmpi_abi.so.1");
}

}  // namespace
}  // namespace hdmlp
