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

namespace hdmlp {
namespace {

std::mutex g_init_mu;
bool g_we_initialized = false;
std::vector<MPI_Comm> g_retired;  // closed jobs' communicators, guarded by g_init_mu
pid_t g_initialized_by = 0;  // the process that initialised MPI (a forked child must not finalise it)
std::atomic<bool> g_peer_failed{false};

// Registered stop functions; FinalizeIfOwned runs them holding this mutex,
// so UnregisterUser (run before its owner is destroyed) waits for them.
std::mutex g_users_mu;
std::map<int, std::function<void()>> g_users;
int g_next_user = 0;

// Polls a nonblocking collective until it completes or timeout_s passes.
void WaitUntil(MPI_Request* request, double timeout_s, int rank, const std::string& what,
               const InterruptCheck& interrupt = {}) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  auto next_check = start + std::chrono::milliseconds(100);
  for (;;) {
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
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

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

// HDMLP_NO_MPI=1 (or yes, true, on) keeps hdmlp out of MPI; 0, no, false,
// off or empty do not.
bool NoMpiRequested() {
  const char* v = std::getenv("HDMLP_NO_MPI");
  if (v == nullptr) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(s.empty() || s == "0" || s == "no" || s == "false" || s == "off");
}

}  // namespace

bool Communicator::InMpiJob() {
  if (NoMpiRequested()) return false;
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
  g_initialized_by = ::getpid();
}

std::unique_ptr<Communicator> Communicator::Create(double timeout_s, const InterruptCheck& interrupt) {
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
    g_initialized_by = ::getpid();
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
  WaitUntil(&request, timeout_s, world_rank, "the creation of hdmlp's communicator", interrupt);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  auto comm = std::unique_ptr<Communicator>(new Communicator(dup, timeout_s));
  comm->set_interrupt(interrupt);
  return comm;
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
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_peer_failed.load()) {
    std::fprintf(stderr,
                 "hdmlp: a peer rank stopped on an error or did not answer: aborting the MPI job rather than "
                 "waiting for that rank in MPI_Finalize\n");
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
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

std::string Communicator::DescribeRank(int rank) const {
  const std::string name = "rank " + std::to_string(rank);
  if (rank < 0 || static_cast<size_t>(rank) >= hosts_.size() || hosts_[static_cast<size_t>(rank)].empty()) return name;
  return name + " on " + hosts_[static_cast<size_t>(rank)];
}

void Communicator::Wait(MPI_Request* request, const std::string& what) {
  WaitUntil(request, timeout_s_, rank_, what, interrupt_);
}

std::vector<std::string> Communicator::AllToAll(const std::vector<std::string>& out, const std::string& what) {
  if (static_cast<int>(out.size()) != size_) {
    throw InvalidArgumentError("AllToAll: " + std::to_string(out.size()) + " messages for " + std::to_string(size_) +
                               " ranks");
  }
  const auto n = static_cast<size_t>(size_);
  std::vector<int64_t> send_sizes(n), recv_sizes(n);
  for (size_t r = 0; r < n; ++r) send_sizes[r] = static_cast<int64_t>(out[r].size());
  MPI_Request request;
  MPI_Ialltoall(send_sizes.data(), 1, MPI_INT64_T, recv_sizes.data(), 1, MPI_INT64_T, comm_, &request);
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
  MPI_Ialltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_CHAR, recv.data(), recv_counts.data(),
                 recv_displs.data(), MPI_CHAR, comm_, &request);
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
