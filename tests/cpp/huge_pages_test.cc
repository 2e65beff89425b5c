// util/huge_pages.h: a large block advised for huge pages is backed by them
// once touched, where the kernel offers transparent huge pages at all.
#include "hdmlp/util/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace hdmlp {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The kB of AnonHugePages in /proc/self/smaps of the mapping that holds `address`.
int64_t HugeKilobytesAt(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto where = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= where && where < end;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stoll(line.substr(14));
    }
  }
  return -1;
}

TEST(HugePagesTest, AnAdvisedBlockIsBackedByHugePagesOnceTouched) {
  const std::string mode = ReadFile("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[never]") != std::string::npos || mode.empty()) {
    GTEST_SKIP() << "this kernel gives no transparent huge pages (" << mode << ")";
  }
  constexpr size_t kBytes = size_t{64} << 20;
  void* block = std::malloc(kBytes);  // glibc maps a block this large on its own
  ASSERT_NE(block, nullptr);
  AdviseHugePages(block, kBytes);
  std::memset(block, 1, kBytes);
  const int64_t huge_kb = HugeKilobytesAt(static_cast<char*>(block) + kBytes / 2);
  std::free(block);
  // The kernel may lack free huge pages at the moment; it then falls back to small ones. On a
  // machine with memory to spare at least one of the 31 whole huge pages inside the block is huge.
  EXPECT_GT(huge_kb, 0) << "no huge page backs a 64 MiB block advised with MADV_HUGEPAGE (THP: " << mode << ")";
}

}  // namespace
}  // namespace hdmlp
