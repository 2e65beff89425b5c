// BatchAssembly: how one rank's samples of an epoch become its batches, on
// the consumer's side of the staging buffer.
//
// The staging buffer's stream holds every epoch of this rank: item
// epoch * epoch_size + j is position j of the epoch's order, and local batch
// b is positions [BatchBegin(b), BatchBegin(b + 1)). Next() takes the next
// batch's positions in order and hands the batch out: its sample ids and
// labels, and each sample's bytes or (rows) the batch's memory, in which the
// staging workers wrote position j into row j - BatchBegin(b).
//
// A failed sample ends its batch: the rest of it is skipped and Next()
// reports kFailed with the error; the next call starts the next batch.
// With skip_bad_samples (rows only), a sample the pipeline rejects (an
// InvalidArgumentError) is left out instead (Hooks::record_skip) and its row
// is filled by the epoch's last sample not yet delivered, read on the
// consumer's thread (Hooks::read_into_row), as long as every later batch
// keeps at least one sample; rows that nothing fills close up. A batch left
// with no sample gets one good sample of the epoch again (the last one
// delivered, else a later one; counted in padded()), as DistributedSampler
// pads; when the epoch has none, kFailed with an InvalidArgumentError naming
// the bad files. So every rank takes BatchesPerEpoch() steps, none empty,
// and every other sample is delivered exactly once.
//
// Cost: per sample, one Take from the staging buffer and the order's At();
// no allocation beyond the batch's vectors and no virtual call. The hooks
// run once per batch (batch_memory) or only for bad samples.
//
// Thread-safety: one consumer thread calls everything except MovedAway()
// and padded(), which any thread may call (the staging workers ask
// MovedAway() to skip samples already delivered in another row).
#ifndef HDMLP_JOB_BATCH_ASSEMBLY_H_
#define HDMLP_JOB_BATCH_ASSEMBLY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hdmlp/errors.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/source/source.h"
#include "hdmlp/staging/staging_buffer.h"
#include "hdmlp/transforms/transform_pipeline.h"

namespace hdmlp {

struct Batch {
  int epoch = 0;
  int64_t index = 0;  // batch number within the epoch
  std::vector<int64_t> ids;
  std::vector<int64_t> labels;
  std::vector<SampleBuffer> samples;  // without transforms: each file's bytes
  // With transforms: ids.size() samples of sample_shape, one after another
  // (64-byte aligned with the default allocator), else null.
  std::shared_ptr<uint8_t> images;
  OutputShape sample_shape;
  // Array sources (HDF5): `images` holds ids.size() arrays of *array, and
  // `label_arrays` (when the source has them) as many arrays of *label_array.
  const ArraySpec* array = nullptr;
  std::shared_ptr<uint8_t> label_arrays;
  const ArraySpec* label_array = nullptr;
};

class BatchAssembly {
 public:
  struct Layout {
    int rank = 0;                      // named in errors
    int64_t epoch_size = 0;            // this rank's positions per epoch
    std::vector<int64_t> batch_start;  // local batch b: positions [batch_start[b], batch_start[b + 1])
    bool rows = false;                 // samples are rows of batch memory (transforms or arrays), else bytes
    int64_t row_bytes = 0;
    int64_t label_bytes = 0;    // arrays: each sample's label array, in rows from labels_offset on
    int64_t labels_offset = 0;
    bool skip_bad_samples = false;
    Batch prototype;  // what every batch carries: sample_shape, array, label_array
  };
  struct Hooks {
    // The memory of local batch `batch` of `epoch` (rows), asked at its start; may throw.
    std::function<std::shared_ptr<uint8_t>(int epoch, int64_t batch)> batch_memory;
    // Reads `sample` on the consumer's thread into row `row` of `memory`;
    // throws InvalidArgumentError (or AllocationError) when it is bad.
    std::function<void(int epoch, int64_t sample, uint8_t* memory, int64_t row)> read_into_row;
    // skip_bad_samples: a sample left out, and why.
    std::function<void(const std::string& why)> record_skip;
  };
  enum class Step { kBatch, kEndOfEpoch, kTimeout, kFailed };
  // What one Next() call waited for samples, and when a batch ended (kBatch
  // or kFailed) its whole wait over the calls it took, and its error.
  struct Progress {
    double waited = 0;
    double batch_stall = 0;
    CapturedError error;
  };

  BatchAssembly(Layout layout, StagingBuffer* staging, const std::vector<int32_t>* labels, Hooks hooks);
  BatchAssembly(const BatchAssembly&) = delete;
  BatchAssembly& operator=(const BatchAssembly&) = delete;

  // Starts `epoch` at local batch `first_batch` in `order`, dropping what
  // was left of the one before (the staging buffer skips to it).
  void BeginEpoch(int epoch, const EpochOrder& order, int64_t first_batch);
  // Fills *out with the next batch, or says why not; waits until `deadline`
  // at most (kTimeout: call again to go on with the same batch).
  // ClosedError when the staging buffer closes meanwhile.
  Step Next(Batch* out, std::chrono::steady_clock::time_point deadline, Progress* progress);

  int64_t batches() const { return static_cast<int64_t>(layout_.batch_start.size()) - 1; }
  int64_t BatchBegin(int64_t batch) const { return layout_.batch_start[static_cast<size_t>(batch)]; }
  int64_t BatchOfPosition(int64_t j) const;
  // The next batch of the epoch (batches() when it is done).
  int64_t next_batch() const { return batch_; }
  // A batch is half assembled (Next timed out in it), and its wait so far.
  bool partial() const { return !pending_.ids.empty(); }
  double stall() const { return stall_; }
  // Item `item` was delivered in another row already: its read may be skipped.
  bool MovedAway(int64_t item) const {
    const int64_t from = moved_from_item_.load(std::memory_order_relaxed);
    return item >= from && item / layout_.epoch_size == from / layout_.epoch_size;
  }
  int64_t padded() const { return padded_.load(); }

 private:
  int64_t ItemOf(int64_t j) const { return static_cast<int64_t>(epoch_) * layout_.epoch_size + j; }
  void Open(int64_t nominal);
  void Waited(double seconds, Progress* progress);
  void Add(int64_t j, int64_t start, SampleBuffer&& bytes);
  void Skip(int64_t j, const std::string& why, int64_t start);
  // Reads `sample` into the pending batch's row `row`; false (and the
  // reason in *why) when it is bad.
  bool ReadIntoRow(int64_t sample, int64_t row, std::string* why);
  bool FillFromEpochEnd(int64_t min_position);
  bool PadWithRepeat(int64_t from);
  Step Abandon(int64_t batch_end, CapturedError error, Progress* progress);
  Step Finish(Batch* out, int64_t batch_end, Progress* progress);

  const Layout layout_;
  StagingBuffer* const staging_;
  const std::vector<int32_t>* const labels_;
  const Hooks hooks_;

  int epoch_ = -1;
  std::optional<EpochOrder> order_;
  int64_t batch_ = 0;              // next batch in the epoch
  int64_t next_j_ = 0;             // next position of the epoch
  int64_t epoch_end_ = 0;          // positions from here on were moved into holes
  int64_t last_good_sample_ = -1;  // the epoch's last sample delivered, for PadWithRepeat
  Batch pending_;                  // the batch being assembled across timeouts
  std::vector<std::string> pending_bad_;  // why each of its samples was left out
  double stall_ = 0;
  // Items from here to the end of their epoch were moved forward into holes;
  // workers need not read them. A hint only.
  std::atomic<int64_t> moved_from_item_{INT64_MAX};
  std::atomic<int64_t> padded_{0};
};

}  // namespace hdmlp

#endif  // HDMLP_JOB_BATCH_ASSEMBLY_H_
