// LoopbackFabric: a Fabric for the ranks of one process, so that the peer
// transport's protocol can be tested (and run under the sanitizers) without
// MPI. Rank r's communicator handle is r + 1. A send is delivered at once
// into the receiver's queue (its pending operation is complete: handle 0);
// Probe takes the first queued message that matches, in the order sent, as
// MPI's matching does for one sender. No collectives. Thread-safe.
#ifndef HDMLP_TESTS_CPP_LOOPBACK_FABRIC_H_
#define HDMLP_TESTS_CPP_LOOPBACK_FABRIC_H_

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/transport/fabric.h"

namespace hdmlp {

class LoopbackFabric final : public Fabric {
 public:
  explicit LoopbackFabric(int ranks) : inbox_(static_cast<size_t>(ranks)) {
    info_.library = "loopback";
    info_.abi = "none";
    info_.why = "a test";
  }
  static FabricHandle CommOf(int rank) { return static_cast<FabricHandle>(rank + 1); }
  // Messages to `rank` not taken yet.
  size_t Queued(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return inbox_[static_cast<size_t>(rank)].size();
  }

  const FabricInfo& info() const override { return info_; }
  bool Initialized() override { return true; }
  bool Finalized() override { return false; }
  int InitThreadMultiple() override { return 3; }
  int ThreadLevel() override { return 3; }
  int WorldRank() override { return 0; }
  void AbortWorld(int) override {}
  void Finalize() override {}
  std::string ErrorText(int code) override { return "loopback error " + std::to_string(code); }
  void DupWorld(FabricHandle*, FabricHandle*) override {}
  void RankAndSize(FabricHandle comm, int* rank, int* size) override {
    *rank = static_cast<int>(comm) - 1;
    *size = static_cast<int>(inbox_.size());
  }
  void ReturnErrors(FabricHandle) override {}

  int Send(FabricHandle comm, int peer, int tag, const void* data, int bytes, FabricHandle* request) override {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.at(static_cast<size_t>(peer))
        .push_back({static_cast<int>(comm) - 1, tag, std::string(static_cast<const char*>(data), static_cast<size_t>(bytes))});
    *request = 0;
    return 0;
  }
  bool Probe(FabricHandle comm, int source, int tag, FabricMessage* message) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& queue = inbox_.at(static_cast<size_t>(comm - 1));
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->tag != tag || (source != kAnySource && it->source != source)) continue;
      message->handle = ++next_;
      message->source = it->source;
      message->bytes = static_cast<int>(it->bytes.size());
      taken_[message->handle] = std::move(it->bytes);
      queue.erase(it);
      return true;
    }
    return false;
  }
  int Receive(FabricMessage* message, void* data) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = taken_.find(message->handle);
    if (it == taken_.end()) return 1;
    if (static_cast<size_t>(message->bytes) < it->second.size()) return 2;  // truncated, as MPI_ERR_TRUNCATE
    std::copy(it->second.begin(), it->second.end(), static_cast<char*>(data));
    taken_.erase(it);
    message->handle = 0;
    return 0;
  }
  bool Test(FabricHandle* request) override { return *request == 0; }
  void Wait(FabricHandle*) override {}
  void Cancel(FabricHandle* request) override { *request = 0; }
  void Release(FabricHandle* request) override { *request = 0; }
  int AllGather(FabricHandle, const void*, int, void*, FabricHandle*) override { return 1; }
  int AllGatherV(FabricHandle, const void*, int, void*, const int*, const int*, FabricHandle*) override { return 1; }
  int AllToAll(FabricHandle, const void*, int, void*, FabricHandle*) override { return 1; }
  int AllToAllV(FabricHandle, const void*, const int*, const int*, void*, const int*, const int*,
                FabricHandle*) override {
    return 1;
  }

 private:
  struct Message {
    int source;
    int tag;
    std::string bytes;
  };
  FabricInfo info_;
  std::mutex mu_;
  std::vector<std::deque<Message>> inbox_;
  std::map<FabricHandle, std::string> taken_;
  FabricHandle next_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_TESTS_CPP_LOOPBACK_FABRIC_H_
