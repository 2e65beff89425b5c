#include "hdmlp/job/metrics.h"

#include <stdexcept>
#include <string>

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

void JobMetrics::AddDelivered(int epoch, int64_t samples, double stall_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  EpochMetrics& m = At(epoch);
  m.samples += samples;
  m.stall_seconds += stall_seconds;
}

void JobMetrics::AddTransform(int epoch, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  At(epoch).transform_seconds += seconds;
}

void JobMetrics::AddSkipped(int epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  ++At(epoch).skipped;
}

std::vector<EpochMetrics> JobMetrics::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EpochMetrics> out;
  out.reserve(epochs_.size());
  for (const auto& [epoch, m] : epochs_) out.push_back(m);
  return out;
}

}  // namespace hdmlp
