#include "hdmlp/transport/peer_transport.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

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
  for (int t = 0; t < serving_threads_; ++t) threads_.emplace_back([this] { ServeLoop(); });
}

bool PeerTransport::PeerLeft(int peer) const { return left_[static_cast<size_t>(peer)].load(); }

bool PeerTransport::TakeControlMessage() {
  MPI_Comm comm = comm_->comm();
  int found = 0;
  MPI_Message message;
  MPI_Status status;
  MPI_Improbe(MPI_ANY_SOURCE, kByeTag, comm, &found, &message, &status);
  if (found) {
    int64_t who = 0;
    MPI_Mrecv(&who, 1, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
    said_bye_[static_cast<size_t>(status.MPI_SOURCE)] = true;
    return true;
  }
  MPI_Improbe(MPI_ANY_SOURCE, kGoneTag, comm, &found, &message, &status);
  if (found) {
    int64_t who = 0;
    MPI_Mrecv(&who, 1, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
    said_bye_[static_cast<size_t>(status.MPI_SOURCE)] = true;
    left_[static_cast<size_t>(status.MPI_SOURCE)] = true;
    return true;
  }
  MPI_Improbe(MPI_ANY_SOURCE, kAbortTag, comm, &found, &message, &status);
  if (found) {
    int size = 0;
    MPI_Get_count(&status, MPI_CHAR, &size);
    std::string text(static_cast<size_t>(std::max(size, 0)), '\0');
    MPI_Mrecv(text.data(), size, MPI_CHAR, &message, MPI_STATUS_IGNORE);
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (peer_abort_message_.empty()) peer_abort_message_ = text.empty() ? "(no message)" : text;
    peer_aborted_ = true;
    // That peer may never reach MPI_Finalize: this process must not wait for it there.
    Communicator::MarkPeerFailure();
    return true;
  }
  return false;
}

bool PeerTransport::NextRequest(MPI_Message* message, MPI_Status* status) {
  // One serving thread polls at a time; the others wait here without
  // spending CPU. The poller hands over as soon as it has a request, so the
  // next one is taken while this one is served.
  std::lock_guard<std::mutex> poll(poll_mu_);
  MPI_Comm comm = comm_->comm();
  while (!stopping_.load()) {
    if (TakeControlMessage()) continue;
    int found = 0;
    MPI_Improbe(MPI_ANY_SOURCE, kRequestTag, comm, &found, message, status);
    if (found) {
      last_request_ = Clock::now();
      return true;
    }
    std::this_thread::sleep_for(PollPause(Clock::now() - last_request_));
  }
  return false;
}

void PeerTransport::ServeLoop() {
  pthread_setname_np(pthread_self(), "hdmlp-serve");  // for top -H and perf: which threads poll
  MPI_Comm comm = comm_->comm();
  MPI_Message message;
  MPI_Status status;
  while (NextRequest(&message, &status)) {
    int64_t request[3];
    MPI_Mrecv(request, 3, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
    SampleBuffer bytes;
    bool hit = false;
    try {
      hit = serve_(request[0], &bytes);
    } catch (const std::exception&) {
      hit = false;  // e.g. the PFS read failed here: the asker reads it itself and sees the error
    }
    const int reply_tag = static_cast<int>(request[1]);
    const int asker = status.MPI_SOURCE;
    int64_t header[2] = {request[2], hit ? bytes.size : -1};
    MPI_Request replies[2];
    int count = 1;
    MPI_Isend(header, 2, MPI_INT64_T, asker, reply_tag, comm, &replies[0]);
    if (hit) {
      MPI_Isend(bytes.data.get(), static_cast<int>(bytes.size), MPI_BYTE, asker, reply_tag, comm, &replies[1]);
      count = 2;
    }
    // Never block on a reply: an asker that has said bye (or timed out and
    // left) will not receive it, and a blocked server could not stop. An
    // asker that died never takes it: after timeout_s (when it has given up
    // anyway) the server moves on rather than leave the other ranks unserved.
    const auto reply_deadline = Clock::now() + std::chrono::duration<double>(comm_->timeout_s());
    Clock::time_point stop_deadline{};
    for (;;) {
      int done = 0;
      MPI_Testall(count, replies, &done, MPI_STATUSES_IGNORE);
      if (done) {
        if (hit) served_.fetch_add(1);
        break;
      }
      if (stopping_.load() && stop_deadline == Clock::time_point{}) stop_deadline = Clock::now() + std::chrono::seconds(1);
      if (left_[static_cast<size_t>(asker)].load() || lost_[static_cast<size_t>(asker)].load() ||
          Clock::now() > reply_deadline || (stop_deadline != Clock::time_point{} && Clock::now() > stop_deadline)) {
        for (int i = 0; i < count; ++i) {
          if (replies[i] == MPI_REQUEST_NULL) continue;
          MPI_Cancel(&replies[i]);
          MPI_Request_free(&replies[i]);
        }
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
  MPI_Comm comm = comm_->comm();
  const int reply_tag = kReplyTagBase + slot;
  const int64_t seq = sequence_[static_cast<size_t>(slot)].fetch_add(1) + 1;
  int64_t request[3] = {sample, reply_tag, seq};
  MPI_Request send;
  MPI_Isend(request, 3, MPI_INT64_T, peer, kRequestTag, comm, &send);
  const auto asked = Clock::now();
  const auto deadline = asked + std::chrono::duration<double>(comm_->timeout_s());
  bool sent = false;
  for (;;) {
    if (!sent) {
      int done = 0;
      MPI_Test(&send, &done, MPI_STATUS_IGNORE);
      sent = done != 0;
    }
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(peer, reply_tag, comm, &found, &message, &status);
    if (found) {
      int64_t header[2];
      MPI_Mrecv(header, 2, MPI_INT64_T, &message, MPI_STATUS_IGNORE);
      // A hit's payload follows its header on the same tag, in order.
      SampleBuffer payload = SampleBuffer::Allocate(std::max<int64_t>(header[1], 0));
      if (header[1] >= 0) {
        for (;;) {  // the peer may die between header and payload
          MPI_Improbe(peer, reply_tag, comm, &found, &message, &status);
          if (found) break;
          if (Clock::now() > deadline) throw PeerLost(peer, sample);
          Pause();
        }
        MPI_Mrecv(payload.data.get(), static_cast<int>(payload.size), MPI_BYTE, &message, MPI_STATUS_IGNORE);
      }
      if (header[0] != seq) continue;  // a late reply to a request that timed out
      if (!sent) MPI_Wait(&send, MPI_STATUS_IGNORE);
      if (header[1] < 0) return false;
      *out = std::move(payload);
      return true;
    }
    if (PeerLeft(peer) || clients_stopped_.load()) {
      if (!sent) MPI_Request_free(&send);
      return false;
    }
    const auto now = Clock::now();
    if (now > deadline) {
      if (!sent) MPI_Request_free(&send);
      throw PeerLost(peer, sample);
    }
    std::this_thread::sleep_for(FetchPollPause(now - asked));
  }
}

void PeerTransport::SendToEveryPeer(const void* data, int count, MPI_Datatype type, int tag) {
  MPI_Comm comm = comm_->comm();
  std::vector<MPI_Request> sends;
  for (int r = 0; r < comm_->size(); ++r) {
    if (r == comm_->rank() || PeerLeft(r)) continue;
    sends.emplace_back();
    MPI_Isend(data, count, type, r, tag, comm, &sends.back());
  }
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  for (auto& request : sends) {
    int done = 0;
    while (!done && Clock::now() < deadline) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done) Pause();
    }
    if (!done) MPI_Request_free(&request);  // a peer that is gone: do not wait for it
  }
}

void PeerTransport::Abort(const std::string& message) {
  if (closed_.load() || aborted_.exchange(true)) return;
  sent_abort_message_ = message;
  SendToEveryPeer(sent_abort_message_.data(), static_cast<int>(sent_abort_message_.size()), MPI_CHAR, kAbortTag);
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
  SendToEveryPeer(&my_rank_message_, 1, MPI_INT64_T, kByeTag);
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
  SendToEveryPeer(&my_rank_message_, 1, MPI_INT64_T, kGoneTag);
  stopping_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace hdmlp
