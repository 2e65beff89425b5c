#include "hdmlp/sim/calibration.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "hdmlp/errors.h"

namespace hdmlp::sim {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double MeasureMemoryBandwidth(int threads, int64_t bytes_per_thread, int rounds) {
  if (threads < 1 || bytes_per_thread < 1 || rounds < 1)
    throw InvalidArgumentError("memory calibration: threads, size and rounds must be >= 1");
  std::vector<std::unique_ptr<char[]>> src, dst;
  for (int t = 0; t < threads; ++t) {
    src.emplace_back(new char[static_cast<size_t>(bytes_per_thread)]);
    dst.emplace_back(new char[static_cast<size_t>(bytes_per_thread)]);
    // Touch every page first, so the timing does not include page faults.
    std::memset(src.back().get(), t + 1, static_cast<size_t>(bytes_per_thread));
    std::memset(dst.back().get(), 0, static_cast<size_t>(bytes_per_thread));
  }
  std::vector<std::thread> pool;
  const double start = Now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r)
        std::memcpy(dst[static_cast<size_t>(t)].get(), src[static_cast<size_t>(t)].get(),
                    static_cast<size_t>(bytes_per_thread));
    });
  }
  for (auto& th : pool) th.join();
  const double seconds = std::max(Now() - start, 1e-9);
  return static_cast<double>(bytes_per_thread) * threads * rounds / seconds / 1e6;
}

double MeasureReadBandwidth(Env* env, const std::vector<std::string>& paths, int threads, double min_seconds) {
  if (paths.empty()) throw InvalidArgumentError("read calibration: no files to read");
  if (threads < 1) throw InvalidArgumentError("read calibration: threads must be >= 1");
  std::atomic<size_t> next{0};
  std::atomic<int64_t> total{0};
  std::exception_ptr error;
  std::mutex mu;
  const double start = Now();
  // One pass over the files at least, and more passes until min_seconds:
  // short runs are dominated by the threads' start and the last stragglers.
  std::atomic<bool> failed{false};
  auto more = [&](size_t i) { return !failed && (i < paths.size() || Now() - start < min_seconds); };
  auto work = [&] {
    std::vector<uint8_t> buffer;
    for (size_t i = next++; more(i); i = next++) {
      try {
        auto file = env->OpenForRead(paths[i % paths.size()]);
        const int64_t size = file->Size();
        buffer.resize(static_cast<size_t>(std::max<int64_t>(size, 1)));
        file->ReadExact(0, buffer.data(), size);
        total += size;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  return static_cast<double>(total.load()) / std::max(Now() - start, 1e-9) / 1e6;
}

}  // namespace hdmlp::sim
