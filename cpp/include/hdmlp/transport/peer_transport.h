// PeerTransport: asks other ranks for samples, and answers their requests.
//
// Serving threads (the config's distributed_threads) receive requests from
// any rank and answer each with the sample's bytes from this rank's storage
// classes (through the `serve` callback), or with "not here". MPI offers no
// wait that does not spin, so one serving thread at a time polls (the others
// wait on a mutex); it polls every 50 us while peers ask and backs off to
// every 2 ms when nobody has asked for a while, so that an idle rank (nothing
// cached, several ranks on a node) leaves its CPUs to the staging workers. A client asks
// one peer for one sample at a time per client slot (each staging worker and
// prefetch thread has its own slot, so replies never cross).
//
// Protocol, on the job's own communicator (bytes through its Fabric, which
// knows nothing of it): a request (tag 1) carries
// {sample, reply tag, sequence number}; the reply is a header {sequence,
// size or -1} followed, for a hit, by the payload, both on the reply tag. A
// rank that closes sends "bye" (tag 2: it reads nothing more) to every peer
// and then lingers: its serving threads keep answering until every peer
// has said bye too (or linger_s passes, or a peer stopped on an error), so a
// peer still reading gets its samples from here rather than from the PFS.
// Then it sends "gone" (tag 4: it serves nothing more) to the peers that
// still read (not to those that said bye) and stops serving;
// requests to a rank that is gone are not sent and report "not here", so
// the caller falls back to the PFS. A rank that stops on an error tells every peer why
// (tag 3, the message's bytes), so that every rank can raise it promptly
// instead of waiting for the missing rank. A peer that does not answer within timeout_s makes Fetch
// throw an IOError naming it and its host (it crashed, hung or left without saying bye). That peer
// is then lost for good: every later Fetch from it throws the same error at once (a dead node
// costs one timeout_s, not one per sample), PeerAbortMessage() reports it (so the job raises it at
// its next batch even when only a prefetch asked), and Linger() no longer waits for it.
//
// A peer that stops on an error, or does not answer in time, is reported to
// Communicator::MarkPeerFailure, so that the process does not wait for it
// in MPI_Finalize at exit.
//
// Thread-safety: Fetch may be called concurrently for different slots.
// StopClients() makes every Fetch return "not here" at once. Linger() says
// bye and waits as above; Close() (idempotent) lingers, then stops and joins
// the serving threads; the destructor calls it.
#ifndef HDMLP_TRANSPORT_PEER_TRANSPORT_H_
#define HDMLP_TRANSPORT_PEER_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hdmlp/errors.h"
#include "hdmlp/util/sample_buffer.h"
#include "hdmlp/transport/communicator.h"

namespace hdmlp {

// How long a Fetch that has waited `waited` for its reply sleeps before it
// looks again: 50 us for the first millisecond, then a twentieth of the wait
// so far, at most 1 ms. A reply that comes quickly is seen at once; one that
// is slow (the peer reads the sample from the PFS first, or waits for a core)
// is seen at most about 5% late, and the waiting threads stop costing CPU:
// every look is a wake-up and an MPI probe, and a rank's staging and prefetch
// threads may all wait at once.
std::chrono::microseconds FetchPollPause(std::chrono::steady_clock::duration waited);

class PeerTransport {
 public:
  // Fills *out with a sample this rank can serve; false: "not here".
  using ServeFn = std::function<bool(int64_t sample, SampleBuffer* out)>;

  PeerTransport(Communicator* comm, int serving_threads, int client_slots, ServeFn serve, double linger_s = 10);
  PeerTransport(const PeerTransport&) = delete;
  PeerTransport& operator=(const PeerTransport&) = delete;
  ~PeerTransport();

  void Start();
  // Asks `peer` for `sample`. True with the bytes; false for "not here" or a
  // peer that is gone. Throws IOError when the peer does not answer in time.
  bool Fetch(int peer, int64_t sample, int slot, SampleBuffer* out);
  bool PeerLeft(int peer) const;  // said "gone"
  // Tells every peer that this rank stops with `message` (waits at most a
  // second for the sends). Idempotent: only the first message is sent.
  void Abort(const std::string& message);
  // The first abort message a peer sent, or why a peer was found lost ("" while neither).
  std::string PeerAbortMessage() const;
  void StopClients();
  void Linger();
  void Close();

  int64_t requests_served() const { return served_.load(); }

 private:
  void ServeLoop();
  // Polls (one thread at a time) until a request comes (true, with it
  // matched) or the transport stops (false); handles bye, gone and abort.
  bool NextRequest(FabricMessage* message);
  bool TakeControlMessage();  // true: one was taken
  bool AllPeersLeft() const;
  // Marks `peer` lost (first time: reports it as PeerAbortMessage) and
  // returns the IOError to throw.
  IOError PeerLost(int peer, int64_t sample);
  // Sends to every rank but this one and those that are gone; waits at most
  // a second. `data` must outlive the transport: a send to a peer that is
  // gone is freed unfinished, and MPI may still read it.
  // only_readers: skip the peers that said bye.
  void SendToEveryPeer(const void* data, int bytes, int tag, bool only_readers = false);

  Communicator* comm_;
  int serving_threads_;
  int client_slots_;
  ServeFn serve_;
  const double linger_s_;
  std::unique_ptr<std::atomic<bool>[]> left_;      // said "gone": serves nothing more
  std::unique_ptr<std::atomic<bool>[]> said_bye_;  // said "bye" (or gone): reads nothing more
  std::unique_ptr<std::atomic<bool>[]> lost_;      // did not answer within timeout_s
  std::unique_ptr<std::atomic<int64_t>[]> sequence_;  // per client slot
  std::vector<std::thread> threads_;
  std::mutex poll_mu_;  // held by the serving thread that polls
  std::chrono::steady_clock::time_point last_request_;  // guarded by poll_mu_ (set before the threads start)
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closed_{false};
  std::atomic<bool> clients_stopped_{false};
  std::atomic<bool> bye_sent_{false};
  std::atomic<int64_t> served_{0};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> peer_aborted_{false};
  mutable std::mutex abort_mu_;
  std::string peer_abort_message_;
  std::string sent_abort_message_;  // written once, by the first Abort
  int64_t my_rank_message_ = 0;     // the "bye" payload
  // Payloads of replies cancelled because their asker left; freed with the
  // transport. Only serving threads append, under abandoned_mu_.
  std::mutex abandoned_mu_;
  std::vector<SampleBuffer> abandoned_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSPORT_PEER_TRANSPORT_H_
