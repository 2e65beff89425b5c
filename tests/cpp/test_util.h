// Helpers shared by the C++ tests: temporary folders, small files, random
// rectangles.
#ifndef HDMLP_TESTS_CPP_TEST_UTIL_H_
#define HDMLP_TESTS_CPP_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hdmlp/plan/random.h"
#include "hdmlp/transforms/image_view.h"

namespace hdmlp::testing {

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
