#include "hdmlp/transport/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/transport/mpi_fabric.h"
#include "hdmlp/transport/mpi_launcher.h"

namespace hdmlp {
namespace {

std::mutex g_init_mu;
bool g_we_initialized = false;
std::vector<FabricHandle> g_retired;  // closed jobs' communicators, guarded by g_init_mu
pid_t g_initialized_by = 0;  // the process that initialised MPI (a forked child must not finalise it)
std::atomic<bool> g_peer_failed{false};

// Registered stop functions; FinalizeIfOwned runs them holding this mutex,
// so UnregisterUser (run before its owner is destroyed) waits for them.
std::mutex g_users_mu;
std::map<int, std::function<void()>> g_users;
int g_next_user = 0;

// Polls a nonblocking collective until it completes or timeout_s passes.
void WaitUntil(Fabric* fabric, FabricHandle* request, double timeout_s, int rank, const std::string& what,
               const InterruptCheck& interrupt = {}) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  auto next_check = start + std::chrono::milliseconds(100);
  for (;;) {
    if (fabric->Test(request)) return;
    if (interrupt && std::chrono::steady_clock::now() > next_check) {
      CheckInterrupt(interrupt);  // a rank interrupted here leaves the others to time out
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      Communicator::MarkPeerFailure();
      throw IOError("rank " + std::to_string(rank) + ": not every rank of the job reached " + what + " within " +
                    std::to_string(static_cast<int>(timeout_s)) +
                    " s; a rank may have failed before it, crashed or hung (see the other ranks' errors), "
                    "or raise timeout_s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// The process's MPI for a launcher's job, initialised with
// MPI_THREAD_MULTIPLE (under g_init_mu). Returns nullptr for a job of one rank
// whose MPI cannot be loaded (said once on stderr): it runs as one rank.
Fabric* InitializedFabric(bool* we_initialized_now) {
  *we_initialized_now = false;
  Fabric* fabric = nullptr;
  try {
    fabric = MpiFabric::Get();
  } catch (const IOError& e) {
    const MpiLauncher launcher = DetectMpiLauncher();
    if (MpiFabric::LoadedAndInitialized() || launcher.world_size != 1) throw;
    static std::once_flag said;
    std::call_once(said, [&] {
      std::fprintf(stderr, "hdmlp: running as a single rank without MPI: %s\n", e.what());
      std::fflush(stderr);
    });
    return nullptr;
  }
  if (fabric->Finalized()) {
    throw InvalidArgumentError("MPI has already been finalised in this process: hdmlp cannot use it");
  }
  if (!fabric->Initialized()) {
    fabric->InitThreadMultiple();
    g_we_initialized = true;
    g_initialized_by = ::getpid();
    *we_initialized_now = true;
  }
  return fabric;
}

}  // namespace

bool Communicator::InMpiJob() {
  if (NoMpiRequested()) return false;
  return MpiFabric::LoadedAndInitialized() || DetectMpiLauncher().present;
}

void Communicator::EnsureInitialized() {
  if (!InMpiJob()) return;
  std::lock_guard<std::mutex> lock(g_init_mu);
  bool now = false;
  InitializedFabric(&now);
}

std::unique_ptr<Communicator> Communicator::Create(double timeout_s, const InterruptCheck& interrupt) {
  if (!InMpiJob()) return nullptr;
  std::lock_guard<std::mutex> lock(g_init_mu);
  bool initialized_now = false;
  Fabric* fabric = InitializedFabric(&initialized_now);
  if (fabric == nullptr) return nullptr;
  const int provided = fabric->ThreadLevel();
  if (provided < 3) {
    throw InvalidArgumentError(
        "hdmlp needs MPI_THREAD_MULTIPLE, but " + fabric->info().library + " provides only thread level " +
        std::to_string(provided) +
        (!initialized_now ? ": the application initialised MPI with a lower level; initialise it with "
                            "MPI_THREAD_MULTIPLE (mpi4py: set mpi4py.rc.thread_level = 'multiple' before importing MPI)"
                          : ": use an MPI build with thread support"));
  }
  // Duplicating is collective: done without blocking, so a rank that never
  // arrives is reported instead of waited for.
  FabricHandle dup = 0, request = 0;
  fabric->DupWorld(&dup, &request);
  const int world_rank = fabric->WorldRank();
  WaitUntil(fabric, &request, timeout_s, world_rank, "the creation of hdmlp's communicator", interrupt);
  fabric->ReturnErrors(dup);
  auto comm = std::unique_ptr<Communicator>(new Communicator(fabric, dup, timeout_s));
  comm->set_interrupt(interrupt);
  // A launcher's job of several ranks that this MPI joined as a world of one
  // (an MPI the launcher cannot start, e.g. mpi4py's own libmpi under another
  // MPI's launcher): every rank would read the whole dataset.
  const MpiLauncher launcher = DetectMpiLauncher();
  if (launcher.present && launcher.world_size > 1 && comm->size() == 1) {
    const FabricInfo& info = fabric->info();
    throw InvalidArgumentError(
        "hdmlp: this process was started by " + launcher.name + " as one of " + std::to_string(launcher.world_size) +
        " ranks, but " + info.library + " (" + info.path + ", chosen by " + info.why +
        ") started as a world of one rank: the launcher and the MPI library do not belong together. Load the "
        "launcher's MPI (HDMLP_MPI_LIBRARY=<its libmpi>; for " + launcher.name + ": " +
        DescribeMpiAbi(launcher.abis.front()) + "), or start the job with the launcher of " + info.library);
  }
  return comm;
}

std::unique_ptr<Communicator> Communicator::Over(Fabric* fabric, FabricHandle comm, double timeout_s) {
  return std::unique_ptr<Communicator>(new Communicator(fabric, comm, timeout_s));
}

int Communicator::RegisterUser(std::function<void()> stop) {
  std::lock_guard<std::mutex> lock(g_users_mu);
  const int token = g_next_user++;
  g_users.emplace(token, std::move(stop));
  return token;
}

void Communicator::UnregisterUser(int token) {
  std::lock_guard<std::mutex> lock(g_users_mu);
  g_users.erase(token);
}

void Communicator::MarkPeerFailure() { g_peer_failed = true; }
bool Communicator::PeerFailed() { return g_peer_failed.load(); }

void Communicator::FinalizeIfOwned() {
  {
    std::lock_guard<std::mutex> users(g_users_mu);
    if (g_initialized_by == ::getpid()) {
      // Threads that use MPI stop before it goes away.
      for (auto& [token, stop] : g_users) {
        try {
          stop();
        } catch (...) {
        }
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (!g_we_initialized || g_initialized_by != ::getpid()) return;
  Fabric* fabric = MpiFabric::IfLoaded();
  if (fabric == nullptr || fabric->Finalized()) return;
  if (g_peer_failed.load()) {
    std::fprintf(stderr,
                 "hdmlp: a peer rank stopped on an error or did not answer: aborting the MPI job rather than "
                 "waiting for that rank in MPI_Finalize\n");
    std::fflush(stderr);
    fabric->AbortWorld(1);
  }
  fabric->Finalize();
  g_we_initialized = false;
}

Communicator::Communicator(Fabric* fabric, FabricHandle comm, double timeout_s)
    : fabric_(fabric), comm_(comm), timeout_s_(timeout_s) {
  fabric_->RankAndSize(comm_, &rank_, &size_);
  // A call into the library that never returns (a peer's node gone, under
  // MPICH) ends the process with a report instead of hanging it.
  if (size_ > 1) {
    watched_ = std::make_unique<WatchedFabric>(fabric_, timeout_s_, rank_, [this](int r) { return DescribeRank(r); });
    fabric_ = watched_.get();
  }
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

std::string Communicator::DescribeRank(int rank) const {
  const std::string name = "rank " + std::to_string(rank);
  if (rank < 0 || static_cast<size_t>(rank) >= hosts_.size() || hosts_[static_cast<size_t>(rank)].empty()) return name;
  return name + " on " + hosts_[static_cast<size_t>(rank)];
}

void Communicator::Wait(FabricHandle* request, const std::string& what) {
  WaitUntil(fabric_, request, timeout_s_, rank_, what, interrupt_);
}

std::vector<std::string> Communicator::AllToAll(const std::vector<std::string>& out, const std::string& what) {
  if (static_cast<int>(out.size()) != size_) {
    throw InvalidArgumentError("AllToAll: " + std::to_string(out.size()) + " messages for " + std::to_string(size_) +
                               " ranks");
  }
  const auto n = static_cast<size_t>(size_);
  std::vector<int64_t> send_sizes(n), recv_sizes(n);
  for (size_t r = 0; r < n; ++r) send_sizes[r] = static_cast<int64_t>(out[r].size());
  FabricHandle request = 0;
  fabric_->AllToAll(comm_, send_sizes.data(), sizeof(int64_t), recv_sizes.data(), &request);
  Wait(&request, what);
  std::vector<int> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  int64_t send_total = 0, recv_total = 0;
  for (size_t r = 0; r < n; ++r) {
    send_counts[r] = static_cast<int>(send_sizes[r]);
    send_displs[r] = static_cast<int>(send_total);
    recv_counts[r] = static_cast<int>(recv_sizes[r]);
    recv_displs[r] = static_cast<int>(recv_total);
    send_total += send_sizes[r];
    recv_total += recv_sizes[r];
  }
  // Every rank checks the same totals' limit on its side; a rank that
  // throws here leaves its peers to time out on the next collective.
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (send_total > kMax || recv_total > kMax) {
    throw IOError("rank " + std::to_string(rank_) + ": " + what + " needs " + std::to_string(std::max(send_total, recv_total)) +
                  " bytes in one MPI message, more than MPI's 2 GiB limit");
  }
  std::string send(static_cast<size_t>(send_total), '\0');
  for (size_t r = 0; r < n; ++r) send.replace(static_cast<size_t>(send_displs[r]), out[r].size(), out[r]);
  std::string recv(static_cast<size_t>(recv_total), '\0');
  fabric_->AllToAllV(comm_, send.data(), send_counts.data(), send_displs.data(), recv.data(), recv_counts.data(),
                     recv_displs.data(), &request);
  Wait(&request, what);
  std::vector<std::string> in(n);
  for (size_t r = 0; r < n; ++r) {
    in[r] = recv.substr(static_cast<size_t>(recv_displs[r]), static_cast<size_t>(recv_counts[r]));
  }
  return in;
}

std::vector<std::string> Communicator::AllGather(const std::string& mine, const std::string& what) {
  int64_t my_size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(size_));
  FabricHandle request = 0;
  fabric_->AllGather(comm_, &my_size, sizeof(int64_t), sizes.data(), &request);
  Wait(&request, what);
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<int>(sizes[static_cast<size_t>(r)]);
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    total += sizes[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  fabric_->AllGatherV(comm_, mine.data(), static_cast<int>(mine.size()), all.data(), counts.data(), displs.data(),
                      &request);
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
  Fabric* fabric = MpiFabric::IfLoaded();
  if (fabric != nullptr && fabric->Initialized() && !fabric->Finalized()) fabric->AbortWorld(code);
}

}  // namespace hdmlp
