#include "hdmlp/job/metrics.h"

namespace hdmlp {

JobMetrics::JobMetrics(int epochs) : epochs_(static_cast<size_t>(epochs)) {
  for (int e = 0; e < epochs; ++e) epochs_[static_cast<size_t>(e)].epoch = e;
}

void JobMetrics::AddRead(int epoch, const std::string& source, int64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  EpochMetrics& m = epochs_.at(static_cast<size_t>(epoch));
  SourceCounters& c = m.reads[source];
  ++c.count;
  c.bytes += bytes;
  c.seconds += seconds;
  m.read_seconds += seconds;
}

void JobMetrics::AddDelivered(int epoch, int64_t samples, double stall_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  EpochMetrics& m = epochs_.at(static_cast<size_t>(epoch));
  m.samples += samples;
  m.stall_seconds += stall_seconds;
}

void JobMetrics::AddTransform(int epoch, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  epochs_.at(static_cast<size_t>(epoch)).transform_seconds += seconds;
}

void JobMetrics::AddHandoffWait(int epoch, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  epochs_.at(static_cast<size_t>(epoch)).handoff_wait_seconds += seconds;
}

void JobMetrics::AddAssembly(int epoch, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  epochs_.at(static_cast<size_t>(epoch)).assembly_seconds += seconds;
}

void JobMetrics::AddSkipped(int epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  ++epochs_.at(static_cast<size_t>(epoch)).skipped;
}

std::vector<EpochMetrics> JobMetrics::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epochs_;
}

}  // namespace hdmlp
