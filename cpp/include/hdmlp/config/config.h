// Configuration of an hdmlp process: link bandwidths and the storage hierarchy.
//
// A Config is read once from a libconfig file (configs/default.cfg when the
// user names none; docs/config.md lists every key) and is from then on a plain
// value: fully validated, with every relative quantity already resolved
// ("25%" -> MB, "~" and "{user_cache}" -> absolute directories), so the rest of
// the core never re-parses or re-checks it. Loading rejects anything it does
// not understand -- unknown keys, wrong types, out-of-range values -- with a
// ConfigError naming the file, the line and the key path, because a silently
// ignored typo in a prefetcher config only shows up hours later as a slow job.
//
// Percent capacities are resolved at load time against this machine's state
// (MemAvailable, free disk space), per process; a Job then divides them by the
// number of its ranks on the node (job/job.h), so that the ranks of one node
// share the percentage instead of each claiming it, and shares them with the
// other live Jobs of its process (job/process_budget.h).
// Likewise the staging buffer's threads = "auto" becomes the CPUs this
// process may use (affinity and cgroup quota), which a Job divides among the
// ranks sharing them.
//
// Units: bandwidths in MB/s; capacities in MB of 2^20 bytes.
//
// Thread-safety: LoadFile and LoadString may run concurrently (each call owns
// its parser). A loaded Config has no hidden state; like any std value, it
// may be read from several threads at once. UserCacheDir and ExpandPath read
// the environment and so must not race with setenv/unsetenv.
#ifndef HDMLP_CONFIG_CONFIG_H_
#define HDMLP_CONFIG_CONFIG_H_

#include <string>
#include <vector>

namespace hdmlp {

// One row of a measured bandwidth table. In a storage class's table `threads`
// is the number of prefetch threads; in the PFS table it is the number of
// processes reading from the parallel file system at once.
struct BandwidthPoint {
  int threads;
  double mbps;
};

struct StorageClassConfig {
  // Key for metrics and logs: "staging" for class 0, else the backend name,
  // suffixed when several classes share a backend ("memory", "memory_2", ...).
  std::string name;
  double capacity_mb;         // Resolved; 0 only if a percent of nothing.
  std::string capacity_spec;  // As written ("1024", "25%"), for messages.
  int threads;                // 1..1024; for "auto", the CPUs this process may use
  // threads = "auto" (class 0 only): `threads` was resolved from the CPU
  // budget (config/cpu_budget.h) when loaded; a Job splits it between the
  // ranks of the node that share those CPUs.
  bool threads_auto = false;
  std::string backend;        // "staging" (class 0), "memory" or "filesystem"
  std::string path;           // filesystem only: absolute, expanded; may not exist yet
  std::vector<BandwidthPoint> bandwidth;  // strictly increasing threads; empty = unknown
};

struct Config {
  double b_c_mbps = 10000;  // key b_c: node-to-node links
  double b_fs_mbps = 2000;  // key b_fs: one node's link to the PFS
  int distributed_threads = 2;
  // key coalesce_kb: a prefetch thread reads samples that lie next to each
  // other in one shard (packs, tar shards) in one read of up to this many
  // KiB; 0 reads every sample on its own.
  int coalesce_kb = 4096;
  // The index cache ("checkpoint file" of the dataset's scan): on or off,
  // and the folder whose index/ sub-folder holds it (source/index_cache.h).
  bool checkpoint = true;
  std::string checkpoint_path;  // absolute; defaults to UserCacheDir()
  // [0] is the staging buffer; never empty after a successful load. Order is
  // the user's: the planner fills classes in this order.
  std::vector<StorageClassConfig> storage_classes;
  std::vector<BandwidthPoint> pfs_bandwidth;  // key pfs_bandwidth; threads = processes
  std::string origin;  // the file path as given, or the origin passed to LoadString

  // Throws NotFoundError if `path` does not exist, IOError if it cannot be
  // read, ConfigError for anything wrong in it.
  static Config LoadFile(const std::string& path);
  // `origin` only labels error messages. Throws ConfigError.
  static Config LoadString(const std::string& text, const std::string& origin = "<string>");

  // A few lines for logs and `hdmlp info`; no trailing newline.
  std::string Describe() const;
};

// Piecewise-linear in threads between the table's points, clamped to the
// first and last points outside them; 0 for an empty table. The table must be
// sorted by threads (a loaded Config's tables are).
double InterpolateBandwidth(const std::vector<BandwidthPoint>& table, double threads);

// $HDMLP_CACHE_DIR if set (made absolute against the current directory),
// else $XDG_CACHE_HOME/hdmlp (if set and absolute, as the XDG spec asks),
// else $HOME/.cache/hdmlp. Empty variables count as unset. Not created here.
std::string UserCacheDir();

// The path expansion config files get: a leading "~" or "~/" becomes $HOME,
// every "{user_cache}" becomes UserCacheDir(), and the result is made absolute
// (against the current directory) and lexically normal. Throws
// InvalidArgumentError for an empty path or "~user" (not supported).
std::string ExpandPath(const std::string& path);

// What a percent capacity is taken of, in MB; exposed for tests and
// diagnostics. AvailableMemoryMb is MemAvailable from /proc/meminfo (falling
// back to free physical pages), or -1 if neither can be read. FreeSpaceMb is
// the space available to unprivileged users on the file system holding
// `path`'s nearest existing ancestor, or -1 if statvfs fails.
double AvailableMemoryMb();
double FreeSpaceMb(const std::string& path);

}  // namespace hdmlp

#endif  // HDMLP_CONFIG_CONFIG_H_
