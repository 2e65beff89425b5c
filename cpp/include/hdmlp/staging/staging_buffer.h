// StagingBuffer: the bounded, ordered hand-off between the staging workers
// and the consumer (the training loop).
//
// The job's reads form one stream of items 0, 1, 2, ... over all epochs, in
// plan order. Workers Claim() items strictly in that order and fill them in
// any order; the consumer Take()s them strictly in order. The buffer bounds
// the bytes of items claimed but not yet taken by `capacity_bytes`: a claim
// waits until the item's estimated size fits (an item is always admitted
// when nothing else is in flight, so one oversized sample cannot deadlock
// the stream). Because claims are made in order, the oldest item the
// consumer waits for is always claimed, so the stream always progresses.
//
// Once taken, an item's bytes belong to the consumer (they become the
// memory a Python tensor sees) and no longer count against the capacity.
//
// The consumer is woken only when the item it waits for is done, never for
// another: WaitFor(last) lets it sleep until a whole batch is done and then
// Take() its items without a wakeup each (a wakeup per sample is a context
// switch per sample, taken from the workers' cores).
//
// The consumer may SkipTo() a later item (breaking out of an epoch): items
// not yet claimed below it are never read, those in flight are dropped when
// they complete.
//
// SetCapacity() changes the bound at any time (several jobs of a process
// share one budget, job/process_budget.h): a smaller bound delays new claims
// until the bytes in flight are below it; nothing in flight is dropped.
//
// Thread-safety: Claim/Complete/Fail from any number of worker threads,
// Take/SkipTo from one consumer thread, Close from any thread. Close wakes
// every waiter; afterwards Claim returns false and Take returns kClosed.
#ifndef HDMLP_STAGING_STAGING_BUFFER_H_
#define HDMLP_STAGING_STAGING_BUFFER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "hdmlp/errors.h"
#include "hdmlp/util/sample_buffer.h"

namespace hdmlp {

class StagingBuffer {
 public:
  enum class TakeResult { kReady, kFailed, kTimeout, kClosed };

  // end_item: one past the last item of the stream. window: at most this many
  // items between the consumer and the newest claim.
  StagingBuffer(int64_t capacity_bytes, int64_t end_item, int64_t window = 8192);
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // Worker side. Blocks until the next item may be claimed; returns false when
  // the buffer is closed or the stream has no items left.
  bool Claim(const std::function<int64_t(int64_t)>& estimated_bytes, int64_t* item);
  // charged_bytes: what the item holds until it is taken (-1: bytes.size);
  // a transformed sample lives in its batch's memory, not in `bytes`.
  void Complete(int64_t item, SampleBuffer bytes, int64_t charged_bytes = -1);
  void Fail(int64_t item, CapturedError error);

  // Consumer side: item must be the next one in order.
  TakeResult Take(int64_t item, std::chrono::steady_clock::time_point deadline, SampleBuffer* out,
                  CapturedError* error);
  // Waits until item `last` (at or after the next one to take) is done
  // (ready or failed) and returns true; also true, early, when the workers
  // cannot go on before the consumer takes (the capacity or the window is
  // full), so that waiting for a batch larger than the buffer cannot stall.
  // false at the deadline or when the buffer is closed. Nothing is taken.
  bool WaitFor(int64_t last, std::chrono::steady_clock::time_point deadline);
  // (Also early when an item up to `last` failed: its error is not held
  // back until the batch's slowest read ends.)
  void SkipTo(int64_t item);

  void Close();

  void SetCapacity(int64_t capacity_bytes);
  int64_t capacity_bytes() const;
  // Largest number of bytes ever held in flight (for tests of the bound).
  int64_t peak_bytes_in_flight() const;
  // How often the consumer woke up in Take or WaitFor (for tests of the above).
  int64_t consumer_wakeups() const;

 private:
  enum class State { kEmpty, kClaimed, kReady, kFailed };
  struct Slot {
    int64_t item = -1;
    State state = State::kEmpty;
    int64_t charged = 0;  // bytes counted against the capacity for this item
    SampleBuffer bytes;
    CapturedError error;
  };
  Slot& SlotFor(int64_t item) { return slots_[static_cast<size_t>(item % window_)]; }
  bool Done(int64_t item);  // ready or failed
  bool AnyFailed(int64_t first, int64_t last);  // an item of [first, last] failed (guarded by mu_)
  void Release(int64_t bytes);
  void SkipToLocked(int64_t item);

  int64_t capacity_;  // guarded by mu_
  const int64_t end_item_;
  const int64_t window_;
  mutable std::mutex mu_;
  std::condition_variable producers_cv_;
  std::condition_variable consumer_cv_;
  std::vector<Slot> slots_;
  bool closed_ = false;
  // The item whose completion wakes the consumer (-1: it is not waiting),
  // and whether it waits for a batch (WaitFor) rather than one item.
  int64_t consumer_waits_for_ = -1;
  bool consumer_waits_for_batch_ = false;
  int64_t producers_waiting_ = 0;  // workers blocked in Claim
  int64_t consumer_wakeups_ = 0;
  int64_t next_claim_ = 0;
  int64_t consumer_next_ = 0;
  int64_t bytes_in_flight_ = 0;
  int64_t items_in_flight_ = 0;
  int64_t peak_bytes_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_STAGING_STAGING_BUFFER_H_
