// libFuzzer target: the tar index reader (TarSource's scan of a shard's
// headers) on any bytes. The input is the shard; it is opened through a
// memfd, so nothing touches the disk. Opening either throws hdmlp's Error
// (a corrupt or cut-short shard, named) or gives an index whose every
// sample lies inside the file with a label in range; reading every sample
// then returns exactly its indexed size. Also run with keep_damaged
// (on_error="skip"), which keeps the whole samples before a cut.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "hdmlp/errors.h"
#include "hdmlp/source/tar_source.h"

namespace {

void Check(const std::string& path, int64_t file_size, bool keep_damaged) {
  hdmlp::ScanOptions scan;
  scan.use_cache = false;
  scan.threads = 1;
  scan.keep_damaged = keep_damaged;
  try {
    hdmlp::TarSource source(hdmlp::Env::Default(), path, {}, scan);
    if (source.size() < 1 || source.classes().empty()) __builtin_trap();
    for (int64_t i = 0; i < source.size(); ++i) {
      const hdmlp::Source::Extent e = source.ExtentOf(i);
      if (e.offset < 0 || e.size < 0 || e.offset + e.size > file_size) __builtin_trap();
      const int32_t label = source.labels()[static_cast<size_t>(i)];
      if (label < 0 || label > hdmlp::kMaxLabel || static_cast<size_t>(label) >= source.classes().size()) {
        __builtin_trap();
      }
      if (source.Read(i).size != e.size) __builtin_trap();
    }
    if (!keep_damaged && !source.damage().empty()) __builtin_trap();
  } catch (const hdmlp::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("tar_index_fuzz", 0);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  Check(path, static_cast<int64_t>(written), false);
  Check(path, static_cast<int64_t>(written), true);
  close(fd);
  return 0;
}
