#include "hdmlp/job/batch_assembly.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "hdmlp/util/phase_timer.h"

namespace hdmlp {
using Clock = std::chrono::steady_clock;

BatchAssembly::BatchAssembly(Layout layout, StagingBuffer* staging, const std::vector<int32_t>* labels, Hooks hooks)
    : layout_(std::move(layout)), staging_(staging), labels_(labels), hooks_(std::move(hooks)) {}

int64_t BatchAssembly::BatchOfPosition(int64_t j) const {
  const auto it = std::upper_bound(layout_.batch_start.begin(), layout_.batch_start.end(), j);
  return static_cast<int64_t>(it - layout_.batch_start.begin()) - 1;
}

void BatchAssembly::BeginEpoch(int epoch, const EpochOrder& order, int64_t first_batch) {
  epoch_ = epoch;
  order_ = order;
  batch_ = first_batch;
  next_j_ = BatchBegin(first_batch);
  epoch_end_ = layout_.epoch_size;
  last_good_sample_ = -1;
  moved_from_item_.store(INT64_MAX);
  pending_ = Batch();
  pending_bad_.clear();
  stall_ = 0;
  staging_->SkipTo(ItemOf(next_j_));
}

void BatchAssembly::Open(int64_t nominal) {
  pending_.epoch = epoch_;
  pending_.index = batch_;
  pending_.ids.reserve(static_cast<size_t>(nominal));
  pending_.labels.reserve(static_cast<size_t>(nominal));
  if (!layout_.rows) {
    pending_.samples.reserve(static_cast<size_t>(nominal));
    return;
  }
  pending_.images = hooks_.batch_memory(epoch_, batch_);
  pending_.sample_shape = layout_.prototype.sample_shape;
  pending_.array = layout_.prototype.array;
  pending_.label_array = layout_.prototype.label_array;
  if (layout_.label_bytes > 0) {
    pending_.label_arrays = std::shared_ptr<uint8_t>(pending_.images, pending_.images.get() + layout_.labels_offset);
  }
}

inline void BatchAssembly::Waited(double seconds, Progress* progress) {
  stall_ += seconds;
  progress->waited += seconds;
}

// Per sample: `inline`, or under -fPIC GCC would not inline it (a member could be interposed).
inline void BatchAssembly::Add(int64_t j, int64_t start, SampleBuffer&& bytes) {
  const int64_t sample = order_->At(j);
  if (layout_.rows) {
    // Rows left by holes nothing could fill close up: the batch's rows are
    // its first ids.size() rows (and so are its label arrays').
    const int64_t row = j - start, to = static_cast<int64_t>(pending_.ids.size());
    if (row != to) {
      uint8_t* rows = pending_.images.get();
      std::memmove(rows + to * layout_.row_bytes, rows + row * layout_.row_bytes,
                   static_cast<size_t>(layout_.row_bytes));
      if (layout_.label_bytes > 0) {
        uint8_t* labels = rows + layout_.labels_offset;
        std::memmove(labels + to * layout_.label_bytes, labels + row * layout_.label_bytes,
                     static_cast<size_t>(layout_.label_bytes));
      }
    }
  } else {
    pending_.samples.push_back(std::move(bytes));
  }
  pending_.ids.push_back(sample);
  pending_.labels.push_back((*labels_)[static_cast<size_t>(sample)]);
}

BatchAssembly::Step BatchAssembly::Next(Batch* out, Clock::time_point deadline, Progress* progress) {
  if (batch_ >= batches()) return Step::kEndOfEpoch;
  const int64_t start = BatchBegin(batch_), end = BatchBegin(batch_ + 1);
  if (pending_.ids.empty() && pending_.samples.empty() && !pending_.images) Open(end - start);
  // The last batch ends early when its last samples were moved into holes.
  if (const int64_t last = std::min(end, epoch_end_) - 1; last > next_j_) {
    // One wakeup for the batch, not one per sample (staging_buffer.h).
    const auto wait_start = Clock::now();
    staging_->WaitFor(ItemOf(last), deadline);
    Waited(SecondsSince(wait_start), progress);
  }
  while (next_j_ < std::min(end, epoch_end_)) {
    const int64_t j = next_j_;
    SampleBuffer bytes;
    CapturedError error;
    const auto wait_start = Clock::now();
    const auto result = staging_->Take(ItemOf(j), deadline, &bytes, &error);
    Waited(SecondsSince(wait_start), progress);
    switch (result) {
      case StagingBuffer::TakeResult::kTimeout:
        return Step::kTimeout;
      case StagingBuffer::TakeResult::kClosed:
        throw ClosedError("the job was closed while waiting for a batch");
      case StagingBuffer::TakeResult::kFailed:
        if (!(layout_.rows && layout_.skip_bad_samples && error.IsInvalidArgument())) {
          return Abandon(end, std::move(error), progress);
        }
        Skip(j, error.message(), start);
        break;
      case StagingBuffer::TakeResult::kReady:
        Add(j, start, std::move(bytes));
        break;
    }
    ++next_j_;
  }
  return Finish(out, end, progress);
}

// A hole takes a sample from the epoch's end only while every later batch
// keeps at least one (so every rank takes every step).
void BatchAssembly::Skip(int64_t j, const std::string& why, int64_t start) {
  hooks_.record_skip(why);
  pending_bad_.push_back(why);
  const int64_t last_batch_start = BatchBegin(batches() - 1);
  FillFromEpochEnd(start == last_batch_start ? j + 1 : last_batch_start + 1);
}

bool BatchAssembly::ReadIntoRow(int64_t sample, int64_t row, std::string* why) {
  try {
    hooks_.read_into_row(epoch_, sample, pending_.images.get(), row);
    return true;
  } catch (const InvalidArgumentError& e) {
    *why = e.what();
  } catch (const std::bad_alloc& e) {
    *why = e.what();
  }
  return false;
}

bool BatchAssembly::FillFromEpochEnd(int64_t min_position) {
  while (epoch_end_ - 1 >= min_position) {
    const int64_t t = --epoch_end_;
    moved_from_item_.store(ItemOf(t));
    const int64_t sample = order_->At(t);
    std::string why;
    if (ReadIntoRow(sample, static_cast<int64_t>(pending_.ids.size()), &why)) {
      pending_.ids.push_back(sample);
      pending_.labels.push_back((*labels_)[static_cast<size_t>(sample)]);
      return true;
    }
    hooks_.record_skip(why);  // bad too: try the one before it
    pending_bad_.push_back(why);
  }
  return false;
}

bool BatchAssembly::PadWithRepeat(int64_t from) {
  std::vector<int64_t> candidates;
  if (last_good_sample_ >= 0) candidates.push_back(last_good_sample_);
  for (int64_t t = from; t < epoch_end_; ++t) candidates.push_back(order_->At(t));
  for (const int64_t sample : candidates) {
    std::string why;  // a bad one is skipped (and counted) when its own turn comes
    if (ReadIntoRow(sample, 0, &why)) {
      pending_.ids.push_back(sample);
      pending_.labels.push_back((*labels_)[static_cast<size_t>(sample)]);
      padded_.fetch_add(1);
      return true;
    }
  }
  return false;
}

// Skips the rest of the batch, so that the next call starts a whole batch.
BatchAssembly::Step BatchAssembly::Abandon(int64_t batch_end, CapturedError error, Progress* progress) {
  next_j_ = batch_end;
  staging_->SkipTo(ItemOf(batch_end));
  ++batch_;
  progress->batch_stall = stall_;
  progress->error = std::move(error);
  stall_ = 0;
  pending_ = Batch();
  pending_bad_.clear();
  return Step::kFailed;
}

BatchAssembly::Step BatchAssembly::Finish(Batch* out, int64_t batch_end, Progress* progress) {
  // Every sample of this batch was bad, and taking one from a later batch
  // would have emptied that one: an empty step would desynchronise the
  // ranks' collectives, so a good sample of the epoch is delivered again.
  if (pending_.ids.empty() && layout_.rows && layout_.skip_bad_samples) PadWithRepeat(batch_end);
  ++batch_;
  progress->batch_stall = stall_;
  stall_ = 0;
  if (pending_.ids.empty()) {
    // Not one sample of this rank's epoch is good: nothing can fill a step.
    std::string files;
    for (const auto& why : pending_bad_) files += (files.empty() ? "" : "; ") + why;
    progress->error = CapturedError::FromKindName(
        "invalid_argument",
        "rank " + std::to_string(layout_.rank) + ": every sample of batch " + std::to_string(batch_ - 1) +
            " of epoch " + std::to_string(epoch_) + " is bad, and this rank's epoch has no good sample to repeat "
            "in its place (on_error=\"skip\" keeps every step non-empty so that the ranks stay in step): " +
            files + "; remove or fix these files");
    pending_ = Batch();
    pending_bad_.clear();
    return Step::kFailed;
  }
  last_good_sample_ = pending_.ids.back();
  *out = std::move(pending_);
  pending_ = Batch();
  pending_bad_.clear();
  return Step::kBatch;
}

}  // namespace hdmlp
