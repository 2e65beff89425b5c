#include "hdmlp/job/metrics.h"

#include <stdexcept>
#include <string>

#include "hdmlp/util/phase_timer.h"

namespace hdmlp {

JobMetrics::JobMetrics(int epochs) : max_epochs_(epochs) {}

EpochMetrics& JobMetrics::At(int epoch) {
  if (epoch < 0 || epoch >= max_epochs_) throw std::out_of_range("JobMetrics: epoch " + std::to_string(epoch));
  EpochMetrics& m = epochs_[epoch];
  m.epoch = epoch;
  return m;
}

void JobMetrics::AddRead(int epoch, const std::string& source, int64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  EpochMetrics& m = At(epoch);
  SourceCounters& c = m.reads[source];
  ++c.count;
  c.bytes += bytes;
  c.seconds += seconds;
  m.read_seconds += seconds;
}

void JobMetrics::BeginConsumerEpoch(int epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  At(epoch);
  consumer_begin_[epoch] = std::chrono::steady_clock::now();
}

void JobMetrics::AddDelivered(int epoch, int64_t samples, double stall_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  EpochMetrics& m = At(epoch);
  m.samples += samples;
  m.stall_seconds += stall_seconds;
  if (samples > 0) {
    ++m.batches;
    if (stall_seconds < kReadyWithinSeconds) ++m.ready_batches;
  }
  if (const auto begin = consumer_begin_.find(epoch); begin != consumer_begin_.end()) {
    m.span_seconds = SecondsSince(begin->second);
  }
}

void JobMetrics::AddTransform(int epoch, double seconds, double cpu_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  EpochMetrics& m = At(epoch);
  m.transform_seconds += seconds;
  m.transform_cpu_seconds += cpu_seconds;
}

void JobMetrics::AddHandoffWait(int epoch, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  At(epoch).handoff_wait_seconds += seconds;
}

void JobMetrics::AddAssembly(int epoch, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  At(epoch).assembly_seconds += seconds;
}

void JobMetrics::AddSkipped(int epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  ++At(epoch).skipped;
}

std::vector<EpochMetrics> JobMetrics::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Epoch e at index e, as callers index them; epochs skipped unread are empty.
  std::vector<EpochMetrics> out;
  if (epochs_.empty()) return out;
  out.resize(static_cast<size_t>(epochs_.rbegin()->first) + 1);
  for (size_t e = 0; e < out.size(); ++e) out[e].epoch = static_cast<int>(e);
  for (const auto& [epoch, m] : epochs_) out[static_cast<size_t>(epoch)] = m;
  return out;
}

}  // namespace hdmlp
