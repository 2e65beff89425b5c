#include "hdmlp/env/start_thread.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>

#include "hdmlp/env/memory_limit.h"
#include "hdmlp/errors.h"
#include "hdmlp/util/thread_name.h"

namespace hdmlp {
namespace {

// Which starts fail (tests only).
struct InjectedFailures {
  std::mutex mu;
  std::string prefix;
  int after = 0;  // matching starts still let through
  int count = 0;  // matching starts still to fail
};
InjectedFailures& Injected() {
  static InjectedFailures* failures = new InjectedFailures;  // never destroyed: threads may start at exit
  return *failures;
}
std::atomic<bool> g_injecting{false};

bool InjectedFailure(const std::string& name) {
  if (!g_injecting.load(std::memory_order_relaxed)) return false;
  InjectedFailures& f = Injected();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.count <= 0 || name.compare(0, f.prefix.size(), f.prefix) != 0) return false;
  if (f.after > 0) {
    --f.after;
    return false;
  }
  --f.count;
  return true;
}

}  // namespace

std::thread TryStartThread(const std::string& name, std::function<void()> body) {
  if (InjectedFailure(name)) {
    throw ThreadStartFailed("'" + name + "': " + std::strerror(EAGAIN) + " (a failure injected by a test)");
  }
  try {
    std::thread thread(std::move(body));
    NameThread(thread, name);
    return thread;
  } catch (const std::system_error& e) {
    throw ThreadStartFailed("'" + name + "': " + e.what());
  }
}

void ThrowThreadStartError(const ThreadStartFailed& failure, const std::string& role,
                           const std::string& what_to_lower) {
  const MemoryLimit limit = ReadMemoryLimit();
  std::string message = "cannot start hdmlp's " + role + " thread " + failure.what() +
                        ": the operating system refused a new thread, as it does when a process reaches its "
                        "address-space limit (RLIMIT_AS, ulimit -v; each thread's stack counts) or its limit "
                        "of processes and threads (ulimit -u, a cgroup's pids.max)";
  if (limit.available >= 0) message += "; this process may still take " + limit.Describe();
  message += "; " + (limit.raise.empty() ? std::string("give the job more memory or threads") : limit.raise) +
             ", or lower " + what_to_lower;
  throw AllocationError(message);
}

std::thread StartThread(const std::string& name, const std::string& role, const std::string& what_to_lower,
                        std::function<void()> body) {
  try {
    return TryStartThread(name, std::move(body));
  } catch (const ThreadStartFailed& failure) {
    ThrowThreadStartError(failure, role, what_to_lower);
  }
}

void FailThreadStartsForTesting(const std::string& name_prefix, int after, int count) {
  InjectedFailures& f = Injected();
  std::lock_guard<std::mutex> lock(f.mu);
  f.prefix = name_prefix;
  f.after = after;
  f.count = count;
  g_injecting = count > 0;
}

}  // namespace hdmlp
