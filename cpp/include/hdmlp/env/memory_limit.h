// MemoryLimit: how much more memory this process may take, and which limit
// says so.
//
// Three limits apply to a process and the tightest decides: its address
// space limit (RLIMIT_AS, `ulimit -v`: an allocation past it fails, a bare
// std::bad_alloc), its cgroup's memory limit (cgroup v2 memory.max, v1
// memory.limit_in_bytes, at every level from its own cgroup up: a batch
// system's or a container's; past it the kernel ends the process) and the
// memory the machine has available (MemAvailable). A Job checks its batch
// memory against it when it starts, and a large sample's size before reading
// it, so that what cannot fit is an error naming the sample, its size, this
// limit and the setting that would fix it, instead of a bad_alloc or a kill.
//
// ReadMemoryLimit() reads /proc and /sys each call (a few small files); call
// it at start-up or for large allocations only. Thread-safe.
#ifndef HDMLP_ENV_MEMORY_LIMIT_H_
#define HDMLP_ENV_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

namespace hdmlp {

struct MemoryLimit {
  int64_t available = -1;  // bytes this process may still take; -1: no limit hdmlp can see
  int64_t limit = -1;      // the limit itself (bytes)
  int64_t used = -1;       // what counts against it now
  std::string what;        // "the cgroup memory limit of '/sys/fs/cgroup/...' (memory.max)", ...
  std::string raise;       // how to raise it: "ask the batch system for more memory (Slurm: --mem=...)", ...

  // "5.7 GiB under the memory limit of cgroup '...' (memory.max) of 6.0 GiB (0.3 GiB of it in use)".
  std::string Describe() const;
};

// The tightest of the limits above, now. Where nothing can be read,
// available is -1 and nothing is refused.
MemoryLimit ReadMemoryLimit();

// 3221225472 -> "3.0 GiB", 1536 -> "1.5 KiB", 12 -> "12 bytes".
std::string FormatBytes(int64_t bytes);

}  // namespace hdmlp

#endif  // HDMLP_ENV_MEMORY_LIMIT_H_
