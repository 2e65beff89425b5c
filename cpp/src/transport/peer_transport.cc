#include "hdmlp/transport/peer_transport.h"

#include <algorithm>
#include <chrono>

#include "hdmlp/env/start_thread.h"
#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

constexpr int kRequestTag = 1;
constexpr int kByeTag = 2;   // "I read nothing more": lingering peers wait for it
constexpr int kGoneTag = 4;  // "I serve nothing more": stop asking me
constexpr int kAbortTag = 3;
constexpr int kReplyTagBase = 16;

using Clock = std::chrono::steady_clock;

void Pause() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

// How long the polling serving thread sleeps between polls, given how long
// no request has come. Each poll is a wake-up and four probes, about 5 us of
// CPU: at 50 us pauses about 5% of a core per polling thread (measured on a
// 2-core node, where that made two ranks deliver 0.74x of one rank). While
// peers ask (a request within the last kHotWindow) a request waits at most
// kHotPause; a rank that nobody asks (nothing cached, or between epochs)
// sleeps longer the longer it has been quiet, at most kColdPause and at most
// a tenth of the quiet time, so a request after a long quiet waits little
// against that quiet.
std::chrono::microseconds PollPause(Clock::duration quiet) {
  constexpr auto kHotPause = std::chrono::microseconds(50);
  constexpr auto kHotWindow = std::chrono::milliseconds(20);
  constexpr auto kColdPause = std::chrono::microseconds(2000);
  if (quiet <= kHotWindow) return kHotPause;
  const auto more = std::chrono::duration_cast<std::chrono::microseconds>(quiet - kHotWindow) / 10;
  return std::min<std::chrono::microseconds>(kHotPause + more, kColdPause);
}

}  // namespace

std::chrono::microseconds FetchPollPause(Clock::duration waited) {
  // A twentieth of the wait, never under the quick pause: so the first
  // millisecond (20 x 50 us) is polled at the quick pause.
  constexpr auto kQuickPause = std::chrono::microseconds(50);
  constexpr auto kSlowPause = std::chrono::microseconds(1000);
  const auto share = std::chrono::duration_cast<std::chrono::microseconds>(waited) / 20;
  return std::clamp<std::chrono::microseconds>(share, kQuickPause, kSlowPause);
}

PeerTransport::PeerTransport(Communicator* comm, int serving_threads, int client_slots, ServeFn serve, double linger_s)
    : comm_(comm), serving_threads_(serving_threads), client_slots_(client_slots), serve_(std::move(serve)),
      linger_s_(linger_s),
      left_(new std::atomic<bool>[static_cast<size_t>(comm->size())]),
      said_bye_(new std::atomic<bool>[static_cast<size_t>(comm->size())]),
      lost_(new std::atomic<bool>[static_cast<size_t>(comm->size())]),
      sequence_(new std::atomic<int64_t>[static_cast<size_t>(client_slots)]) {
  for (int r = 0; r < comm->size(); ++r) {
    left_[static_cast<size_t>(r)] = said_bye_[static_cast<size_t>(r)] = lost_[static_cast<size_t>(r)] = false;
  }
  for (int s = 0; s < client_slots; ++s) sequence_[static_cast<size_t>(s)] = 0;
}

PeerTransport::~PeerTransport() { Close(); }

void PeerTransport::Start() {
  last_request_ = Clock::now();
  // On failure the threads started so far are joined by Close() (the
  // destructor's, when the job's constructor unwinds).
  for (int t = 0; t < serving_threads_; ++t) {
    threads_.push_back(StartThread("hdmlp-serve", "peer-serving",
                                   "the config's distributed_threads (" + std::to_string(serving_threads_) + ")",
                                   [this] { ServeLoop(); }));
  }
}

bool PeerTransport::PeerLeft(int peer) const { return left_[static_cast<size_t>(peer)].load(); }

bool PeerTransport::TakeControlMessage() {
  Fabric* fabric = comm_->fabric();
  const FabricHandle comm = comm_->handle();
  FabricMessage message;
  for (const int tag : {kByeTag, kGoneTag}) {  // a peer done with this rank's data, or gone for good
    if (!fabric->Probe(comm, Fabric::kAnySource, tag, &message)) continue;
    int64_t who = 0;
    message.bytes = std::min<int>(message.bytes, sizeof who);
    fabric->Receive(&message, &who);
    said_bye_[static_cast<size_t>(message.source)] = true;
    if (tag == kGoneTag) left_[static_cast<size_t>(message.source)] = true;
    return true;
  }
  if (fabric->Probe(comm, Fabric::kAnySource, kAbortTag, &message)) {
    std::string text(static_cast<size_t>(std::max(message.bytes, 0)), '\0');
    fabric->Receive(&message, text.data());
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (peer_abort_message_.empty()) peer_abort_message_ = text.empty() ? "(no message)" : text;
    peer_aborted_ = true;
    // That peer may never reach MPI_Finalize: this process must not wait for it there.
    Communicator::MarkPeerFailure();
    return true;
  }
  return false;
}

bool PeerTransport::NextRequest(FabricMessage* message) {
  // One serving thread polls at a time; the others wait here without
  // spending CPU. The poller hands over as soon as it has a request, so the
  // next one is taken while this one is served.
  std::lock_guard<std::mutex> poll(poll_mu_);
  Fabric* fabric = comm_->fabric();
  const FabricHandle comm = comm_->handle();
  while (!stopping_.load()) {
    if (TakeControlMessage()) continue;
    if (fabric->Probe(comm, Fabric::kAnySource, kRequestTag, message)) {
      last_request_ = Clock::now();
      return true;
    }
    std::this_thread::sleep_for(PollPause(Clock::now() - last_request_));
  }
  return false;
}

void PeerTransport::ServeLoop() {
  Fabric* fabric = comm_->fabric();
  const FabricHandle comm = comm_->handle();
  FabricMessage message;
  while (NextRequest(&message)) {
    int64_t request[3] = {0, 0, 0};
    const int asker = message.source;
    message.bytes = std::min<int>(message.bytes, sizeof request);
    fabric->Receive(&message, request);
    SampleBuffer bytes;
    bool hit = false;
    try {
      hit = serve_(request[0], &bytes);
    } catch (const std::exception&) {
      hit = false;  // e.g. the PFS read failed here: the asker reads it itself and sees the error
    }
    const int reply_tag = static_cast<int>(request[1]);
    int64_t header[2] = {request[2], hit ? bytes.size : -1};
    FabricHandle replies[2] = {0, 0};
    int count = 1;
    fabric->Send(comm, asker, reply_tag, header, sizeof header, &replies[0]);
    if (hit) {
      fabric->Send(comm, asker, reply_tag, bytes.data.get(), static_cast<int>(bytes.size), &replies[1]);
      count = 2;
    }
    // Never block on a reply: an asker that has said bye (or timed out and
    // left) will not receive it, and a blocked server could not stop. An
    // asker that died never takes it: after timeout_s (when it has given up
    // anyway) the server moves on rather than leave the other ranks unserved.
    const auto reply_deadline = Clock::now() + std::chrono::duration<double>(comm_->timeout_s());
    Clock::time_point stop_deadline{};
    for (;;) {
      bool done = true;
      for (int i = 0; i < count; ++i) {
        if (replies[i] != 0 && !fabric->Test(&replies[i])) done = false;
      }
      if (done) {
        if (hit) served_.fetch_add(1);
        break;
      }
      if (stopping_.load() && stop_deadline == Clock::time_point{}) stop_deadline = Clock::now() + std::chrono::seconds(1);
      if (left_[static_cast<size_t>(asker)].load() || lost_[static_cast<size_t>(asker)].load() ||
          Clock::now() > reply_deadline || (stop_deadline != Clock::time_point{} && Clock::now() > stop_deadline)) {
        for (int i = 0; i < count; ++i) fabric->Cancel(&replies[i]);
        // MPI may still read the payload until the cancel takes: keep it.
        std::lock_guard<std::mutex> lock(abandoned_mu_);
        abandoned_.push_back(std::move(bytes));
        break;
      }
      Pause();
    }
  }
}

IOError PeerTransport::PeerLost(int peer, int64_t sample) {
  // A peer's abort that arrived meanwhile names the cause (this peer may have
  // left because of it): raise that rather than blame this peer.
  if (peer_aborted_.load() && !lost_[static_cast<size_t>(peer)].load()) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    return IOError(peer_abort_message_ + " (reported to rank " + std::to_string(comm_->rank()) + ")");
  }
  const std::string message =
      comm_->DescribeRank(peer) + " did not answer " + comm_->DescribeRank(comm_->rank()) + "'s request for sample " +
      std::to_string(sample) + " within " + std::to_string(static_cast<int>(comm_->timeout_s())) +
      " s: it may have crashed, hung or left the job (its node may have failed); raise timeout_s if it is only slow";
  if (!lost_[static_cast<size_t>(peer)].exchange(true)) {
    Communicator::MarkPeerFailure();
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (peer_abort_message_.empty()) peer_abort_message_ = message;
    peer_aborted_ = true;
  }
  return IOError(message);
}

bool PeerTransport::Fetch(int peer, int64_t sample, int slot, SampleBuffer* out) {
  if (PeerLeft(peer) || clients_stopped_.load()) return false;
  if (lost_[static_cast<size_t>(peer)].load()) throw PeerLost(peer, sample);  // one timeout per lost peer
  Fabric* fabric = comm_->fabric();
  const FabricHandle comm = comm_->handle();
  const int reply_tag = kReplyTagBase + slot;
  const int64_t seq = sequence_[static_cast<size_t>(slot)].fetch_add(1) + 1;
  int64_t request[3] = {sample, reply_tag, seq};
  FabricHandle send = 0;
  fabric->Send(comm, peer, kRequestTag, request, sizeof request, &send);
  const auto asked = Clock::now();
  const auto deadline = asked + std::chrono::duration<double>(comm_->timeout_s());
  bool sent = false;
  for (;;) {
    if (!sent) sent = fabric->Test(&send);
    FabricMessage message;
    if (fabric->Probe(comm, peer, reply_tag, &message)) {
      int64_t header[2] = {0, -1};
      message.bytes = std::min<int>(message.bytes, sizeof header);
      fabric->Receive(&message, header);
      // A hit's payload follows its header on the same tag, in order.
      SampleBuffer payload = SampleBuffer::Allocate(std::max<int64_t>(header[1], 0));
      if (header[1] >= 0) {
        for (;;) {  // the peer may die between header and payload
          if (fabric->Probe(comm, peer, reply_tag, &message)) break;
          if (Clock::now() > deadline) throw PeerLost(peer, sample);
          Pause();
        }
        message.bytes = static_cast<int>(std::min<int64_t>(message.bytes, payload.size));
        fabric->Receive(&message, payload.data.get());
      }
      if (header[0] != seq) continue;  // a late reply to a request that timed out
      // The peer has our request: its send completes at once. Polled, never a blocking wait, so that
      // no MPI call of a transport thread can outlast the deadline.
      while (!sent) {
        sent = fabric->Test(&send);
        if (sent) break;
        if (Clock::now() > deadline) {
          fabric->Release(&send);
          break;
        }
        Pause();
      }
      if (header[1] < 0) return false;
      *out = std::move(payload);
      return true;
    }
    if (PeerLeft(peer) || clients_stopped_.load()) {
      if (!sent) fabric->Release(&send);
      return false;
    }
    const auto now = Clock::now();
    if (now > deadline) {
      if (!sent) fabric->Release(&send);
      throw PeerLost(peer, sample);
    }
    std::this_thread::sleep_for(FetchPollPause(now - asked));
  }
}

void PeerTransport::SendToEveryPeer(const void* data, int bytes, int tag, bool only_readers) {
  Fabric* fabric = comm_->fabric();
  const FabricHandle comm = comm_->handle();
  std::vector<FabricHandle> sends;
  for (int r = 0; r < comm_->size(); ++r) {
    if (r == comm_->rank() || PeerLeft(r)) continue;
    if (only_readers && said_bye_[static_cast<size_t>(r)].load()) continue;
    sends.emplace_back(0);
    fabric->Send(comm, r, tag, data, bytes, &sends.back());
  }
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  for (auto& request : sends) {
    bool done = false;
    while (!done && Clock::now() < deadline) {
      done = fabric->Test(&request);
      if (!done) Pause();
    }
    if (!done) fabric->Release(&request);  // a peer that is gone: do not wait for it
  }
}

void PeerTransport::Abort(const std::string& message) {
  if (closed_.load() || aborted_.exchange(true)) return;
  sent_abort_message_ = message;
  SendToEveryPeer(sent_abort_message_.data(), static_cast<int>(sent_abort_message_.size()), kAbortTag);
}

std::string PeerTransport::PeerAbortMessage() const {
  if (!peer_aborted_.load()) return "";
  std::lock_guard<std::mutex> lock(abort_mu_);
  return peer_abort_message_;
}

void PeerTransport::StopClients() { clients_stopped_ = true; }

bool PeerTransport::AllPeersLeft() const {
  for (int r = 0; r < comm_->size(); ++r) {
    if (r != comm_->rank() && !said_bye_[static_cast<size_t>(r)].load() && !lost_[static_cast<size_t>(r)].load()) {
      return false;
    }
  }
  return true;
}

void PeerTransport::Linger() {
  if (bye_sent_.exchange(true)) return;
  clients_stopped_ = true;
  // Say bye first, so peers stop asking this rank while its servers still
  // answer what is already on the way, and keep answering while peers
  // still read: a peer that has not closed yet would otherwise take this
  // rank's samples from the PFS.
  my_rank_message_ = comm_->rank();
  SendToEveryPeer(&my_rank_message_, sizeof my_rank_message_, kByeTag);
  const auto deadline = Clock::now() + std::chrono::duration<double>(linger_s_);
  while (Clock::now() < deadline && !peer_aborted_.load() && !AllPeersLeft()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void PeerTransport::Close() {
  if (closed_.exchange(true)) return;
  Linger();
  // From now on requests to this rank would not be answered: peers that
  // still read take those samples from the PFS at once.
  // Only to peers still reading: one that said bye asks nothing more (and may have exited: a
  // message to it could make the MPI library connect to a process that is gone).
  SendToEveryPeer(&my_rank_message_, sizeof my_rank_message_, kGoneTag, /*only_readers=*/true);
  stopping_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace hdmlp
