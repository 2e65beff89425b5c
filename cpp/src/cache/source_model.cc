#include "hdmlp/cache/source_model.h"

#include <algorithm>
#include <limits>

namespace hdmlp {

SourceModel::SourceModel(const Config& config, int processes) {
  pfs_mbps_ = config.b_fs_mbps;
  b_c_mbps_ = config.b_c_mbps;
  if (!config.pfs_bandwidth.empty()) {
    const double gamma = std::max(processes, 1);
    pfs_mbps_ = std::min(config.b_fs_mbps, InterpolateBandwidth(config.pfs_bandwidth, gamma) / gamma);
  }
  class_mbps_.resize(config.storage_classes.size(), std::numeric_limits<double>::infinity());
  for (size_t j = 1; j < config.storage_classes.size(); ++j) {
    const auto& c = config.storage_classes[j];
    if (!c.bandwidth.empty()) class_mbps_[j] = InterpolateBandwidth(c.bandwidth, c.threads) / c.threads;
  }
}

}  // namespace hdmlp
