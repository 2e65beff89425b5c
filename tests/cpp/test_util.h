// Helpers shared by the C++ tests: temporary folders and small files.
#ifndef HDMLP_TESTS_CPP_TEST_UTIL_H_
#define HDMLP_TESTS_CPP_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

}  // namespace hdmlp::testing

#endif  // HDMLP_TESTS_CPP_TEST_UTIL_H_
