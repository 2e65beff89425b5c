#include "hdmlp/staging/staging_buffer.h"

#include <algorithm>

namespace hdmlp {

StagingBuffer::StagingBuffer(int64_t capacity_bytes, int64_t end_item, int64_t window)
    : capacity_(capacity_bytes), end_item_(end_item), window_(std::max<int64_t>(window, 1)),
      slots_(static_cast<size_t>(window_)) {}

bool StagingBuffer::Claim(const std::function<int64_t(int64_t)>& estimated_bytes, int64_t* item) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (closed_ || next_claim_ >= end_item_) return false;
    if (next_claim_ < consumer_next_ + window_) {
      const int64_t estimate = std::max<int64_t>(estimated_bytes(next_claim_), 0);
      if (items_in_flight_ == 0 || bytes_in_flight_ + estimate <= capacity_) {
        const int64_t claimed = next_claim_++;
        Slot& slot = SlotFor(claimed);
        slot = Slot();
        slot.item = claimed;
        slot.state = State::kClaimed;
        slot.charged = estimate;
        bytes_in_flight_ += estimate;
        ++items_in_flight_;
        peak_bytes_ = std::max(peak_bytes_, bytes_in_flight_);
        *item = claimed;
        // Another worker may be able to claim the next item too.
        producers_cv_.notify_one();
        return true;
      }
    }
    // Only the consumer can unblock this claim: one waiting for a whole
    // batch must take what is done instead.
    if (consumer_waits_for_batch_) consumer_cv_.notify_one();
    ++producers_waiting_;
    producers_cv_.wait(lock);
    --producers_waiting_;
  }
}

void StagingBuffer::Release(int64_t bytes) {
  bytes_in_flight_ -= bytes;
  --items_in_flight_;
  // One is enough: a worker that claims wakes the next (Claim), and one that
  // cannot claim means none can.
  producers_cv_.notify_one();
}

void StagingBuffer::Complete(int64_t item, SampleBuffer bytes, int64_t charged_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = SlotFor(item);
  if (item < consumer_next_ || slot.item != item) return;  // skipped while being read: SkipTo released it
  const int64_t charge = charged_bytes >= 0 ? charged_bytes : bytes.size;
  bytes_in_flight_ += charge - slot.charged;
  peak_bytes_ = std::max(peak_bytes_, bytes_in_flight_);
  slot.charged = charge;
  slot.bytes = std::move(bytes);
  slot.state = State::kReady;
  if (item == consumer_waits_for_) consumer_cv_.notify_one();
}

void StagingBuffer::Fail(int64_t item, CapturedError error) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = SlotFor(item);
  if (item < consumer_next_ || slot.item != item) return;
  slot.error = std::move(error);
  slot.state = State::kFailed;
  // A consumer waiting for a whole batch that holds this item wakes now: the
  // error is raised (or skipped) without waiting for the batch's other reads,
  // each of which may take up to its own deadline.
  if (item == consumer_waits_for_ || (consumer_waits_for_batch_ && item <= consumer_waits_for_)) {
    consumer_cv_.notify_one();
  }
}

bool StagingBuffer::AnyFailed(int64_t first, int64_t last) {
  for (int64_t item = first; item <= last; ++item) {
    const Slot& slot = SlotFor(item);
    if (slot.item == item && slot.state == State::kFailed) return true;
  }
  return false;
}

bool StagingBuffer::Done(int64_t item) {
  const Slot& slot = SlotFor(item);
  return slot.item == item && (slot.state == State::kReady || slot.state == State::kFailed);
}

bool StagingBuffer::WaitFor(int64_t last, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (last < consumer_next_) return true;
  consumer_waits_for_ = last;
  consumer_waits_for_batch_ = true;
  bool done = false;
  for (;;) {
    if (closed_) break;
    // A blocked worker waits for this consumer: waiting longer would stall.
    if (Done(last) || producers_waiting_ > 0 || AnyFailed(consumer_next_, last)) {
      done = true;
      break;
    }
    const std::cv_status status = consumer_cv_.wait_until(lock, deadline);
    ++consumer_wakeups_;
    if (status == std::cv_status::timeout) {
      done = !closed_ && (Done(last) || producers_waiting_ > 0);
      break;
    }
  }
  consumer_waits_for_ = -1;
  consumer_waits_for_batch_ = false;
  return done;
}

StagingBuffer::TakeResult StagingBuffer::Take(int64_t item, std::chrono::steady_clock::time_point deadline,
                                              SampleBuffer* out, CapturedError* error) {
  std::unique_lock<std::mutex> lock(mu_);
  if (item != consumer_next_) SkipToLocked(item);
  struct Waiting {  // the consumer waits for this item while in here
    int64_t& waits_for;
    ~Waiting() { waits_for = -1; }
  } waiting{consumer_waits_for_};
  consumer_waits_for_ = item;
  for (;;) {
    if (closed_) return TakeResult::kClosed;
    Slot& slot = SlotFor(item);
    if (slot.item == item && (slot.state == State::kReady || slot.state == State::kFailed)) {
      const bool failed = slot.state == State::kFailed;
      if (failed) {
        *error = slot.error;
      } else {
        *out = std::move(slot.bytes);
      }
      const int64_t charged = slot.charged;
      slot = Slot();
      consumer_next_ = item + 1;
      Release(charged);
      return failed ? TakeResult::kFailed : TakeResult::kReady;
    }
    const std::cv_status status = consumer_cv_.wait_until(lock, deadline);
    ++consumer_wakeups_;
    if (status == std::cv_status::timeout && !Done(item) && !closed_) return TakeResult::kTimeout;
  }
}

void StagingBuffer::SkipTo(int64_t item) {
  std::lock_guard<std::mutex> lock(mu_);
  SkipToLocked(item);
}

void StagingBuffer::SkipToLocked(int64_t item) {
  if (item <= consumer_next_) return;
  // Every claimed item below the new position is released now; one still
  // being read is dropped by Complete/Fail when its read ends.
  for (int64_t t = consumer_next_; t < std::min(item, next_claim_); ++t) {
    Slot& slot = SlotFor(t);
    if (slot.item == t && slot.state != State::kEmpty) {
      const int64_t charged = slot.charged;
      slot = Slot();
      Release(charged);
    }
  }
  consumer_next_ = item;
  next_claim_ = std::max(next_claim_, item);
  producers_cv_.notify_all();
}

void StagingBuffer::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  producers_cv_.notify_all();
  consumer_cv_.notify_all();
}

void StagingBuffer::SetCapacity(int64_t capacity_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = std::max<int64_t>(capacity_bytes, 0);
  producers_cv_.notify_all();
}

int64_t StagingBuffer::capacity_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_;
}

int64_t StagingBuffer::peak_bytes_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_bytes_;
}

int64_t StagingBuffer::consumer_wakeups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return consumer_wakeups_;
}

}  // namespace hdmlp
