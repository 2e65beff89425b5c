// StartThread: starts a named thread, or raises an error that says which
// thread could not be started, which limit stopped it and what to change.
//
// The OS refuses a new thread (EAGAIN) when the process is at its
// address-space limit (RLIMIT_AS, `ulimit -v`: each thread's stack is mapped
// from it), at its limit of processes (`ulimit -u`) or its cgroup's pids.max.
// std::thread then throws a bare std::system_error ("Resource temporarily
// unavailable"), which, thrown where nothing catches it, ends the process.
// Every long-lived thread of the core is started here instead: the failure is
// an AllocationError (Python: MemoryError) naming the thread's role, the
// memory limit (env/memory_limit.h) and `what_to_lower`, the setting that
// needs fewer threads. The caller stops the threads it did start before
// passing the error on. Places that can do the work without another thread
// (ParallelFor, a read in pieces, a reader pool that has a thread) catch
// ThreadStartFailed and do so instead.
//
// Tests make starts fail as the OS would with FailThreadStartsForTesting.
//
// Thread-safe.
#ifndef HDMLP_ENV_START_THREAD_H_
#define HDMLP_ENV_START_THREAD_H_

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

namespace hdmlp {

// What std::thread threw, kept for the caller that can go on without the
// thread; ThreadStartError turns it into the error a user sees.
class ThreadStartFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A started thread named `name` (15 characters are kept), or ThreadStartFailed.
std::thread TryStartThread(const std::string& name, std::function<void()> body);

// The AllocationError a user sees for a thread that could not be started:
// "cannot start hdmlp's <role> thread '<name>' (<why>): <limit>; <what to do>".
[[noreturn]] void ThrowThreadStartError(const ThreadStartFailed& failure, const std::string& role,
                                        const std::string& what_to_lower);

// TryStartThread, failing with ThrowThreadStartError.
std::thread StartThread(const std::string& name, const std::string& role, const std::string& what_to_lower,
                        std::function<void()> body);

// From now on, starts of threads whose name begins with `name_prefix` ("":
// any) fail as under EAGAIN: all but the first `after` of them, `count` in
// all. Count 0 ends that. For tests only.
void FailThreadStartsForTesting(const std::string& name_prefix, int after, int count);

}  // namespace hdmlp

#endif  // HDMLP_ENV_START_THREAD_H_
