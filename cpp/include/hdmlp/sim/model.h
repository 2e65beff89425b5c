// Performance model of a data-parallel training job's I/O (HDMLP seed 001).
//
// The model's variables, as in seed 001 (units: MB = 10^6 bytes, MB/s):
//   N        nodes (one rank each)              -> Workload::nodes
//   c        compute throughput of a consumer   -> Workload::compute_mbps
//   b_c      node-to-node link bandwidth        -> Config::b_c_mbps
//   b_fs     one node's link to the PFS         -> Config::b_fs_mbps
//   p_j      prefetch threads of class j        -> storage_classes[j].threads
//   d_j      capacity of class j (MiB)          -> storage_classes[j].capacity_mb
//   r_j(p)   read throughput of class j         -> storage_classes[j].bandwidth
//   w_j(p)   write throughput of class j        -> taken equal to r_j(p): the
//                                                  runtime's config has no write table
//   t(g)     aggregate PFS throughput, g readers -> Config::pfs_bandwidth
//   beta     preprocessing rate                 -> Workload::preprocess_mbps
//   F, s_k   samples and their sizes            -> Workload::sizes
//   B, E     global batch and epochs            -> Workload::batch_size, epochs
// Tables are interpolated by the runtime's own InterpolateBandwidth, and the
// per-reader rates of the local and peer classes come from the runtime's
// SourceModel, so the simulator predicts with exactly the numbers the runtime
// uses to pick a source.
//
// Per sample k of size s_k, one reader stream spends
//   PFS:            s_k / min(b_fs / q, t(g) / g)   g = PFS reader streams of all
//                                                    nodes at that moment, q = those
//                                                    of this node (with one stream per
//                                                    node: min(b_fs, t(g)/g), seed 001)
//   peer class j:   s_k / min(b_c, r_j(p_j) / p_j)
//   local class j:  s_k / (r_j(p_j) / p_j)
//   + s_k / beta to preprocess (staging workers), s_k / w_j(p_j)/p_j to store
//     into class j (prefetch threads and fills on the way),
// and the consumer spends s_k / c computing on it. docs/simulator.md has the
// whole model and the policies.
//
// Two readings of the same model (docs/simulator.md, "Two readings"):
//   kPhysical (the default) as above: the PFS's aggregate rate never exceeds
//     t(g) for g streams, whether they are threads of one node or nodes.
//   kThesis, the reading of the thesis's own simulator (Table 5.2): PFS
//     readers are counted per node, so each reading thread gets
//     min(b_fs, t(gamma) / gamma) with gamma = nodes reading (Eq. 3.5); every
//     read, fills included, pays the staging write max(s/beta, s/(w_0/p_0))
//     instead of s/beta and s/w_j; and, behind its switch
//     (full_class_rate_per_thread), a class's reader gets the whole r_j(p_j)
//     where Eq. 3.7 divides it by p_j, as that code does.
//
// Thread-safety: PerformanceModel is immutable after construction; the free
// functions are reentrant.
#ifndef HDMLP_SIM_MODEL_H_
#define HDMLP_SIM_MODEL_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hdmlp/cache/source_model.h"
#include "hdmlp/config/config.h"

namespace hdmlp::sim {

// What is simulated, apart from the machine (the Config).
struct Workload {
  int nodes = 1;                  // N
  std::vector<int64_t> sizes;     // s_k in bytes; F = sizes.size()
  int64_t batch_size = 1;         // B, the global batch
  int epochs = 1;                 // E
  double compute_mbps = 0;        // c > 0
  double preprocess_mbps = 0;     // beta; <= 0 means no preprocessing cost
  uint64_t seed = 0;              // the access plan's seed
  bool drop_last = false;
};

// Throws InvalidArgumentError naming the setting (as the CLI spells it).
void ValidateWorkload(const Workload& workload);

// `count` sample sizes drawn from a normal distribution (mean_mb, std_mb MB),
// cut below at 1 byte; deterministic in `seed` and portable (xoshiro256** and
// Box-Muller, no std distributions). Throws InvalidArgumentError for
// count < 1, mean_mb <= 0 or std_mb < 0.
std::vector<int64_t> NormalSampleSizes(int64_t count, double mean_mb, double std_mb, uint64_t seed);

// Seconds to move `bytes` at `mbps`; 0 for an unknown (infinite) rate.
// Inline: the simulator calls it several times per event.
inline double TransferSeconds(int64_t bytes, double mbps) {
  if (!(mbps < std::numeric_limits<double>::infinity())) return 0;
  return static_cast<double>(bytes) / (mbps * 1e6);
}

enum class Reading { kPhysical, kThesis };

// "physical" or "thesis"; ParseReading throws InvalidArgumentError naming
// --model and the valid names.
const char* ReadingName(Reading reading);
Reading ParseReading(const std::string& name);

class PerformanceModel {
 public:
  // `full_class_rate_per_thread` only matters for Reading::kThesis.
  PerformanceModel(const Config& config, int nodes, Reading reading = Reading::kPhysical,
                   bool full_class_rate_per_thread = false);

  Reading reading() const { return reading_; }

  const Config& config() const { return config_; }
  // The runtime's source model for N processes: what hdmlp itself would choose.
  const SourceModel& sources() const { return sources_; }
  int num_classes() const { return static_cast<int>(config_.storage_classes.size()); }

  // Per-stream PFS rate when `all_streams` streams read the PFS at once, of
  // which `node_streams` on the reader's node (both >= 1):
  // min(b_fs / q, t(g) / g); b_fs / q when the table is empty.
  double PfsStreamMbps(int all_streams, int node_streams) const;
  // The thesis's per-thread PFS rate with `nodes_reading` nodes (>= 1) on
  // the PFS: min(b_fs, t(gamma) / gamma), whatever the node's thread count.
  double ThesisPfsMbps(int nodes_reading) const;
  // r_j(p_j) / p_j (+inf when class j's table is empty), j >= 1; r_j(p_j)
  // in the thesis reading with full_class_rate_per_thread.
  double LocalClassMbps(int j) const;
  // min(b_c, LocalClassMbps(j)).
  double PeerClassMbps(int j) const;
  // The thesis's staging write rate w_0(p_0) / p_0 (taken as r_0(p_0) / p_0;
  // +inf when class 0 has no table).
  double StagingWriteMbps() const;
  // w_j(p_j) / p_j, taken as r_j(p_j) / p_j.
  double WriteClassMbps(int j) const { return sources_.ClassMbps(j); }
  // The runtime's choice for a peer's copy in class j: strictly faster than
  // the PFS as the SourceModel predicts it for N readers.
  // (Thesis reading: faster than the PFS with every node reading.)
  bool PreferPeer(int j) const;
  // The runtime's choice to cache in class j at all: faster than the PFS.
  bool PreferClass(int j) const;
  // Class j's capacity in bytes (MiB as the runtime counts it).
  int64_t CapacityBytes(int j) const;

 private:
  Config config_;
  SourceModel sources_;
  Reading reading_;
  bool full_class_rate_;
  int nodes_;
};

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_MODEL_H_
