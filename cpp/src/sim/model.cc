#include "hdmlp/sim/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "hdmlp/errors.h"
#include "hdmlp/util/random.h"

namespace hdmlp::sim {

void ValidateWorkload(const Workload& w) {
  if (w.nodes < 1) throw InvalidArgumentError("--nodes must be >= 1, got " + std::to_string(w.nodes));
  if (w.sizes.empty()) throw InvalidArgumentError("--samples must be >= 1 (the dataset is empty)");
  if (w.sizes.size() >= (uint64_t{1} << 32))
    throw InvalidArgumentError("--samples must be < 2^32, got " + std::to_string(w.sizes.size()));
  if (w.batch_size < 1) throw InvalidArgumentError("--batch-size must be >= 1, got " + std::to_string(w.batch_size));
  if (w.epochs < 1) throw InvalidArgumentError("--epochs must be >= 1, got " + std::to_string(w.epochs));
  if (!(w.compute_mbps > 0) || !std::isfinite(w.compute_mbps))
    throw InvalidArgumentError("--compute-mbps must be a number > 0 (MB/s a consumer computes on)");
  if (std::isnan(w.preprocess_mbps))
    throw InvalidArgumentError("--preprocess-mbps must be a number (<= 0: no preprocessing)");
  for (int64_t s : w.sizes)
    if (s < 0) throw InvalidArgumentError("sample sizes must be >= 0 bytes, got " + std::to_string(s));
}

std::vector<int64_t> NormalSampleSizes(int64_t count, double mean_mb, double std_mb, uint64_t seed) {
  if (count < 1) throw InvalidArgumentError("--samples must be >= 1, got " + std::to_string(count));
  if (!(mean_mb > 0) || !std::isfinite(mean_mb))
    throw InvalidArgumentError("--sample-mb must be a number > 0, got " + std::to_string(mean_mb));
  if (!(std_mb >= 0) || !std::isfinite(std_mb))
    throw InvalidArgumentError("--sample-std-mb must be a number >= 0, got " + std::to_string(std_mb));
  Rng rng(DeriveKey({seed, 0x73697a6573ULL}));  // "sizes": its own stream, not the plan's
  const double unit = std::ldexp(1.0, -53);
  std::vector<int64_t> sizes(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; i += 2) {
    // Box-Muller: two independent standard normals per pair of uniforms.
    const double u1 = (static_cast<double>(rng.NextU64() >> 11) + 1.0) * unit;  // (0, 1]
    const double u2 = static_cast<double>(rng.NextU64() >> 11) * unit;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double z[2] = {radius * std::cos(2 * M_PI * u2), radius * std::sin(2 * M_PI * u2)};
    for (int k = 0; k < 2 && i + k < count; ++k) {
      const double bytes = std::round((mean_mb + std_mb * z[k]) * 1e6);
      sizes[static_cast<size_t>(i + k)] = static_cast<int64_t>(std::max(bytes, 1.0));
    }
  }
  return sizes;
}

const char* ReadingName(Reading reading) { return reading == Reading::kThesis ? "thesis" : "physical"; }

Reading ParseReading(const std::string& name) {
  if (name == "physical") return Reading::kPhysical;
  if (name == "thesis") return Reading::kThesis;
  throw InvalidArgumentError("--model: unknown reading \"" + name + "\"; valid: physical, thesis");
}

PerformanceModel::PerformanceModel(const Config& config, int nodes, Reading reading, bool full_class_rate_per_thread)
    : config_(config), sources_(config, nodes), reading_(reading),
      full_class_rate_(reading == Reading::kThesis && full_class_rate_per_thread), nodes_(std::max(nodes, 1)) {}

double PerformanceModel::PfsStreamMbps(int all_streams, int node_streams) const {
  const double link = config_.b_fs_mbps / std::max(node_streams, 1);
  if (config_.pfs_bandwidth.empty()) return link;
  const double g = std::max(all_streams, 1);
  return std::min(link, InterpolateBandwidth(config_.pfs_bandwidth, g) / g);
}

double PerformanceModel::ThesisPfsMbps(int nodes_reading) const { return PfsStreamMbps(nodes_reading, 1); }

double PerformanceModel::LocalClassMbps(int j) const {
  const double per_thread = sources_.ClassMbps(j);
  if (!full_class_rate_) return per_thread;
  return per_thread * std::max(1, config_.storage_classes.at(static_cast<size_t>(j)).threads);
}

double PerformanceModel::PeerClassMbps(int j) const { return std::min(config_.b_c_mbps, LocalClassMbps(j)); }

double PerformanceModel::StagingWriteMbps() const {
  const StorageClassConfig& staging = config_.storage_classes.at(0);
  if (staging.bandwidth.empty()) return std::numeric_limits<double>::infinity();
  const int p = std::max(1, staging.threads);
  return InterpolateBandwidth(staging.bandwidth, p) / p;
}

bool PerformanceModel::PreferPeer(int j) const {
  if (reading_ == Reading::kThesis) return PeerClassMbps(j) > ThesisPfsMbps(nodes_);
  return PeerClassMbps(j) > sources_.PfsMbps();
}

bool PerformanceModel::PreferClass(int j) const {
  if (reading_ == Reading::kThesis) return LocalClassMbps(j) >= ThesisPfsMbps(nodes_);
  return sources_.PreferClass(j);
}

int64_t PerformanceModel::CapacityBytes(int j) const {
  return static_cast<int64_t>(config_.storage_classes.at(static_cast<size_t>(j)).capacity_mb * 1024 * 1024);
}

}  // namespace hdmlp::sim
