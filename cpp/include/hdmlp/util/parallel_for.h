// ParallelFor: run fn(i) for i in [0, n) on up to `threads` threads.
//
// Items are handed out dynamically (one atomic counter), so uneven items
// balance. Every thread is joined before ParallelFor returns; an exception
// thrown by fn stops the hand-out of new items, and the exception of the
// lowest i that threw is rethrown to the caller. Items are handed out in
// order and every one started runs to its end, so that is the first failing
// item in order whatever the threads' timing: the same error every run (the
// first damaged file of a list, not whichever a thread reached first). fn
// must be safe to call concurrently for different i. Where a thread cannot be
// created (EAGAIN under RLIMIT_AS or a thread limit), the items run on the
// threads that could be, at least the caller's.
#ifndef HDMLP_UTIL_PARALLEL_FOR_H_
#define HDMLP_UTIL_PARALLEL_FOR_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace hdmlp {

template <typename Fn>
void ParallelFor(int64_t n, int threads, Fn&& fn) {
  if (n <= 0) return;
  if (threads < 1) threads = 1;
  if (threads > n) threads = static_cast<int>(n);
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  int64_t first_error_index = n;
  std::mutex error_mutex;
  auto body = [&] {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const int64_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (i < first_error_index) {
          first_error = std::current_exception();
          first_error_index = i;
        }
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(body);
    } catch (const std::system_error&) {
      break;  // no thread to be had (an address-space limit): the threads there are do all the items
    }
  }
  body();
  for (auto& th : pool) th.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace hdmlp

#endif  // HDMLP_UTIL_PARALLEL_FOR_H_
