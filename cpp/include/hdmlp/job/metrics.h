// JobMetrics: where a job's time went, per epoch.
//
// For each epoch: the samples delivered to the consumer, the seconds the
// consumer waited for a batch that was not ready (stall), the seconds the
// staging workers spent reading (summed over workers), and per source
// ("pfs" for the dataset's own storage, later one key per storage class and
// "remote" for peers) the number of reads, their bytes and seconds. Reads
// are counted in the epoch of the item read, including items read ahead
// and later skipped by an early break. With transforms, the seconds spent
// decoding and transforming (summed over workers) and the bad samples left
// out. Where the rest of the time goes: the seconds the staging workers
// waited for room in the staging buffer, i.e. ahead of the consumer (hand-off
// wait, summed over workers), and the consumer's seconds in NextBatch apart
// from its stall (batch assembly).
//
// Data readiness (docs/gpu.md, "CPU budget and data readiness"): the batches
// delivered, those that were ready when the consumer asked (it waited less
// than kReadyWithinSeconds for them), and the consumer's span of the epoch,
// from BeginConsumerEpoch to its last batch. Set against the stall and the
// workers' busy time (reading, transforming) they say who waited for whom:
// the training loop (the GPU) for data, or the loader for the training loop
// (hdmlp/readiness.py derives the figures).
//
// Memory grows with the epochs that were touched (read or delivered), not
// with the job's epochs: a job of 10^7 epochs costs nothing until it runs,
// and one that skips ahead keeps no entries for the epochs it skipped (a
// Snapshot lists them, empty).
//
// Thread-safety: all methods may be called from any thread.
#ifndef HDMLP_JOB_METRICS_H_
#define HDMLP_JOB_METRICS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hdmlp {

struct SourceCounters {
  int64_t count = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

struct EpochMetrics {
  int epoch = 0;
  int64_t samples = 0;
  double stall_seconds = 0;
  double read_seconds = 0;
  double transform_seconds = 0;  // decoding and transforming, summed over workers
  // The same on the workers' CPU clocks: unlike the wall time it does not grow
  // when other processes take the cores, so it can be set against the
  // workers' whole CPU time to find what they spend outside the chain.
  double transform_cpu_seconds = 0;
  double handoff_wait_seconds = 0;  // workers waiting to claim an item, summed over workers
  double assembly_seconds = 0;      // the consumer in NextBatch, not waiting for samples
  int64_t skipped = 0;           // bad samples left out (skip_bad_samples)
  int64_t batches = 0;           // batches delivered with at least one sample
  int64_t ready_batches = 0;     // of them, ready when the consumer asked
  double span_seconds = 0;       // BeginConsumerEpoch to the epoch's last batch delivered
  std::map<std::string, SourceCounters> reads;
};

class JobMetrics {
 public:
  // A batch the consumer waited less than this for was ready: taking its
  // samples out of the staging buffer costs microseconds, a wait for a
  // worker at least a wakeup.
  static constexpr double kReadyWithinSeconds = 0.001;

  explicit JobMetrics(int epochs);
  JobMetrics(const JobMetrics&) = delete;
  JobMetrics& operator=(const JobMetrics&) = delete;

  void AddRead(int epoch, const std::string& source, int64_t bytes, double seconds);
  // The consumer starts `epoch` now (the start of its span).
  void BeginConsumerEpoch(int epoch);
  // One batch of `samples` (0: its samples failed) and the consumer's wait for it.
  void AddDelivered(int epoch, int64_t samples, double stall_seconds);
  void AddTransform(int epoch, double seconds, double cpu_seconds = 0);
  void AddHandoffWait(int epoch, double seconds);
  void AddAssembly(int epoch, double seconds);
  void AddSkipped(int epoch);
  // Epochs 0 .. the last one touched, epoch e at index e (an epoch skipped
  // without a read is all zeros).
  std::vector<EpochMetrics> Snapshot() const;

 private:
  EpochMetrics& At(int epoch);  // makes the entry on first use; needs mu_

  const int max_epochs_;
  mutable std::mutex mu_;
  std::map<int, EpochMetrics> epochs_;
  std::map<int, std::chrono::steady_clock::time_point> consumer_begin_;  // by epoch
};

}  // namespace hdmlp

#endif  // HDMLP_JOB_METRICS_H_
