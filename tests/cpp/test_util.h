// Helpers shared by the C++ tests: temporary folders, small files, random
// rectangles.
#ifndef HDMLP_TESTS_CPP_TEST_UTIL_H_
#define HDMLP_TESTS_CPP_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/env/env.h"
#include "hdmlp/transforms/image_view.h"
#include "hdmlp/util/random.h"

// Whether this build runs under ASan or TSan (make sanitize). A test whose
// point is many values, not threads or memory, then runs a smaller set of its
// cases: the plain build runs them all.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HDMLP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HDMLP_TEST_SANITIZED 1
#endif
#endif
#ifndef HDMLP_TEST_SANITIZED
#define HDMLP_TEST_SANITIZED 0
#endif

namespace hdmlp::testing {

inline constexpr bool kSanitizedBuild = HDMLP_TEST_SANITIZED != 0;

// Several Jobs in one process as the ranks of a launcher without MPI: the
// start-up gather hook, answered once every rank has sent its view.
class InProcessGather {
 public:
  explicit InProcessGather(int ranks) : views_(static_cast<size_t>(ranks)) {}
  std::vector<std::string> Gather(int rank, const std::string& mine) {
    std::unique_lock<std::mutex> lock(mu_);
    views_[static_cast<size_t>(rank)] = mine;
    if (++arrived_ == static_cast<int>(views_.size())) cv_.notify_all();
    cv_.wait(lock, [&] { return arrived_ == static_cast<int>(views_.size()); });
    return views_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> views_;
  int arrived_ = 0;
};

// A regular file that says it is larger than any memory (2^60 bytes).
class HugeFile : public ReadableFile {
 public:
  explicit HugeFile(const std::string& path) : ReadableFile(path) {}
  FileInfo Info() override {
    FileInfo info;
    info.exists = true;
    info.kind = FileKind::kRegular;
    info.size = int64_t{1} << 60;
    return info;
  }
  int64_t ReadUpTo(int64_t, uint8_t*, int64_t) override { return 0; }
};

// A folder under the test temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "hdmlp_test_XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// Sets a folder's modification time into the past, so the index cache treats
// it as settled.
inline void AgeDirectory(const std::string& path, int seconds = 60) {
  auto t = std::filesystem::last_write_time(path);
  std::filesystem::last_write_time(path, t - std::chrono::seconds(seconds));
}

inline void AgeTree(const std::string& root) {
  AgeDirectory(root);
  for (auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_directory()) AgeDirectory(e.path().string());
  }
}

// A rectangle inside a width x height image, every size and place equally
// likely.
inline PixelRect RandomRect(Rng& rng, int width, int height) {
  PixelRect r;
  r.width = 1 + static_cast<int>(rng.Uniform(static_cast<uint64_t>(width)));
  r.height = 1 + static_cast<int>(rng.Uniform(static_cast<uint64_t>(height)));
  r.x = static_cast<int>(rng.Uniform(static_cast<uint64_t>(width - r.width + 1)));
  r.y = static_cast<int>(rng.Uniform(static_cast<uint64_t>(height - r.height + 1)));
  return r;
}

}  // namespace hdmlp::testing

#endif  // HDMLP_TESTS_CPP_TEST_UTIL_H_
