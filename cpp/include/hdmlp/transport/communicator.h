// Communicator: hdmlp's own MPI communicator, and the rank collectives it
// needs at start-up, each with a deadline. It reaches MPI only through the
// Fabric interface (transport/fabric.h): MPI is loaded at run time, at the
// first use that needs it (transport/mpi_fabric.h), never at import.
//
// Create() returns nullptr when the process is not part of an MPI job (no
// launcher variables and MPI not initialised): hdmlp then runs as a single
// rank without loading MPI. A launcher's job whose MPI cannot be loaded is an
// error that says what to install (or, for a job of one rank, a notice and
// a single rank); one whose MPI starts as a world of one while the launcher
// announced more ranks is an error naming both. Otherwise it initialises MPI with
// MPI_THREAD_MULTIPLE if nobody has (and then owns its finalisation, which
// FinalizeIfOwned does at process exit), or reuses an MPI already
// initialised by mpi4py, Horovod or torch.distributed (never finalising it),
// and duplicates MPI_COMM_WORLD so hdmlp's messages never mix with the
// application's. A thread level below MPI_THREAD_MULTIPLE is refused with a
// clear error.
//
// Destroying a Communicator retires its MPI communicator instead of freeing
// it: MPI would reuse its context for the next job's, and a late message of
// the closed job could then be matched there. One communicator per Job is
// kept until MPI is finalised.
//
// Collectives wait at most timeout_s: a rank that never arrives (crashed,
// hung, or stuck before the call) makes the others raise an IOError naming
// the ranks that did not arrive, instead of hanging.
//
// Exit: whatever uses MPI from threads of its own (a Job's serving and
// prefetch threads) registers a stop function (RegisterUser), and
// FinalizeIfOwned runs every registered one before it finalises MPI, so no
// thread calls MPI after MPI_Finalize, however the process exits. Once a
// peer was reported stopped or unresponsive (MarkPeerFailure), finalising
// could wait for it forever: FinalizeIfOwned aborts the MPI job instead, as
// for an uncaught error. A process forked from the one that initialised MPI
// never finalises it.
// Thread-safety: the collectives are called from one thread (the job's
// constructor); comm() may be used from any thread (MPI_THREAD_MULTIPLE).
#ifndef HDMLP_TRANSPORT_COMMUNICATOR_H_
#define HDMLP_TRANSPORT_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hdmlp/transport/fabric.h"
#include "hdmlp/transport/watched_fabric.h"
#include "hdmlp/util/interrupt.h"

namespace hdmlp {

class Communicator {
 public:
  // interrupt is polled while waiting for the other ranks (and kept for the
  // collectives).
  static std::unique_ptr<Communicator> Create(double timeout_s, const InterruptCheck& interrupt = {});
  // A communicator of another Fabric (not the process's MPI), already made
  // there: `comm` is its handle. For fabrics that start themselves (tests'
  // in-process fabric; a later transport without MPI).
  static std::unique_ptr<Communicator> Over(Fabric* fabric, FabricHandle comm, double timeout_s);
  // Initialises MPI now if this process is in an MPI job (Create does it
  // otherwise). MPI_Init itself waits for every rank: it cannot time out.
  static void EnsureInitialized();
  // True when this process was started by an MPI launcher or MPI is up.
  static bool InMpiJob();
  // Finalises MPI if hdmlp initialised it (in this process, not a forked
  // child), after running every registered stop function; aborts the MPI
  // job instead after MarkPeerFailure. Safe to call more than once.
  static void FinalizeIfOwned();
  // A stop function run by FinalizeIfOwned (and never after Unregister
  // returns); returns a token for UnregisterUser.
  static int RegisterUser(std::function<void()> stop);
  static void UnregisterUser(int token);
  // A peer stopped on an error or did not answer in time.
  static void MarkPeerFailure();
  static bool PeerFailed();
  // MPI_Abort on MPI_COMM_WORLD when MPI is initialised and not finalised
  // (a rank that ends on an uncaught error: finalising would wait for the
  // others forever); otherwise nothing.
  static void AbortIfInitialized(int code);

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }
  // The library and this job's communicator in it, for the peer transport's
  // point-to-point messages (any thread).
  Fabric* fabric() const { return fabric_; }
  FabricHandle handle() const { return comm_; }
  // Polled while a collective waits (set before calling them).
  void set_interrupt(InterruptCheck interrupt) { interrupt_ = std::move(interrupt); }
  // Every rank's host name, in rank order, for messages that name a rank
  // (set once, by the job's start-up check, before any thread uses it).
  void set_host_names(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }
  // "rank 2 on node3", or "rank 2" while the host names are not known.
  std::string DescribeRank(int rank) const;

  // Every rank's string, in rank order; strings may differ in length.
  std::vector<std::string> AllGather(const std::string& mine, const std::string& what);
  // out[r] goes to rank r; returns what every rank sent to this one, in rank
  // order (each message below 2 GiB).
  std::vector<std::string> AllToAll(const std::vector<std::string>& out, const std::string& what);

 private:
  Communicator(Fabric* fabric, FabricHandle comm, double timeout_s);
  // Waits for a request until the deadline; names `what` on timeout.
  void Wait(FabricHandle* request, const std::string& what);

  Fabric* fabric_;  // watched_ when there are peers, else the library's
  std::unique_ptr<WatchedFabric> watched_;
  FabricHandle comm_;
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_;
  InterruptCheck interrupt_;
  std::vector<std::string> hosts_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSPORT_COMMUNICATOR_H_
