// SourceModel: the predicted per-reader bandwidth of every place a sample can
// be read from, from the configuration's tables (HDMLP seed 001's model).
//
//   PFS:           min(b_fs, t(gamma) / gamma), t = pfs_bandwidth interpolated
//                  at gamma = the processes reading it (the ranks); b_fs alone
//                  when the table is empty.
//   local class j: r_j(p_j) / p_j, r_j = class j's bandwidth table
//                  interpolated at its p_j threads; unknown (empty table) counts
//                  as faster than any remote source.
//
// A local class is used for reads only where it is predicted at least as fast
// as the PFS (ties prefer local); a class predicted slower gets no samples.
// Thread-safety: immutable after construction.
#ifndef HDMLP_CACHE_SOURCE_MODEL_H_
#define HDMLP_CACHE_SOURCE_MODEL_H_

#include <vector>

#include "hdmlp/config/config.h"

namespace hdmlp {

class SourceModel {
 public:
  SourceModel(const Config& config, int processes);

  double PfsMbps() const { return pfs_mbps_; }
  // j >= 1; +infinity when the class's table is empty.
  double ClassMbps(int j) const { return class_mbps_.at(static_cast<size_t>(j)); }
  bool PreferClass(int j) const { return ClassMbps(j) >= PfsMbps(); }
  // b_c: what one link between nodes delivers; a peer's class j gives
  // min(b_c, ClassMbps(j)), chosen only when strictly faster than the PFS.
  double RemoteLinkMbps() const { return b_c_mbps_; }

 private:
  double pfs_mbps_;
  double b_c_mbps_;
  std::vector<double> class_mbps_;
};

}  // namespace hdmlp

#endif  // HDMLP_CACHE_SOURCE_MODEL_H_
