#include "hdmlp/transport/communicator.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

std::mutex g_init_mu;
bool g_we_initialized = false;
std::vector<MPI_Comm> g_retired;  // closed jobs' communicators, guarded by g_init_mu

// Polls a nonblocking collective until it completes or timeout_s passes.
void WaitUntil(MPI_Request* request, double timeout_s, int rank, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw IOError("rank " + std::to_string(rank) + ": not every rank of the job reached " + what + " within " +
                    std::to_string(static_cast<int>(timeout_s)) +
                    " s; a rank may have failed before it, crashed or hung (see the other ranks' errors), "
                    "or raise timeout_s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

}  // namespace

bool Communicator::InMpiJob() {
  if (EnvSet("HDMLP_NO_MPI")) return false;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return true;
  return EnvSet("OMPI_COMM_WORLD_SIZE") || EnvSet("PMIX_RANK") || EnvSet("PMI_SIZE") || EnvSet("PMI_RANK");
}

void Communicator::EnsureInitialized() {
  if (!InMpiJob()) return;
  std::lock_guard<std::mutex> lock(g_init_mu);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    throw IOError("MPI_Init_thread failed");
  }
  g_we_initialized = true;
}

std::unique_ptr<Communicator> Communicator::Create(double timeout_s) {
  if (!InMpiJob()) return nullptr;
  std::lock_guard<std::mutex> lock(g_init_mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw InvalidArgumentError("MPI has already been finalised in this process: hdmlp cannot use it");
  int provided = 0;
  if (!initialized) {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw IOError("MPI_Init_thread failed");
    }
    g_we_initialized = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    throw InvalidArgumentError(
        "hdmlp needs MPI_THREAD_MULTIPLE, but MPI provides only thread level " + std::to_string(provided) +
        (initialized ? ": the application initialised MPI with a lower level; initialise it with "
                       "MPI_THREAD_MULTIPLE (mpi4py: set mpi4py.rc.thread_level = 'multiple' before importing MPI)"
                     : ": use an MPI build with thread support"));
  }
  // Duplicating is collective: done without blocking, so a rank that never
  // arrives is reported instead of waited for.
  MPI_Comm dup;
  MPI_Request request;
  if (MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request) != MPI_SUCCESS) throw IOError("MPI_Comm_idup failed");
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  WaitUntil(&request, timeout_s, world_rank, "the creation of hdmlp's communicator");
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(new Communicator(dup, timeout_s));
}

void Communicator::FinalizeIfOwned() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (!g_we_initialized) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  g_we_initialized = false;
}

Communicator::Communicator(MPI_Comm comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Communicator::~Communicator() {
  // Not MPI_Comm_free: a late message of this job (a peer's bye sent while
  // this rank's servers were stopping, a reply whose asker gave up) may
  // still be on its way, and MPI reuses a freed communicator's context for
  // the next one, where it would be taken for a message of the next job in
  // this process (measured: wrong replies and hangs when jobs follow each
  // other). The handle stays valid and unused until MPI is finalised.
  std::lock_guard<std::mutex> lock(g_init_mu);
  g_retired.push_back(comm_);
}

void Communicator::Wait(MPI_Request* request, const std::string& what) {
  WaitUntil(request, timeout_s_, rank_, what);
}

std::vector<std::string> Communicator::AllGather(const std::string& mine, const std::string& what) {
  int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(size_));
  MPI_Request request;
  MPI_Iallgather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm_, &request);
  Wait(&request, what);
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<int>(sizes[static_cast<size_t>(r)]);
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    total += sizes[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), counts.data(), displs.data(),
                  MPI_CHAR, comm_, &request);
  Wait(&request, what);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) {
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                             static_cast<size_t>(counts[static_cast<size_t>(r)])));
  }
  return out;
}

}  // namespace hdmlp

namespace hdmlp {

void Communicator::AbortIfInitialized(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace hdmlp
