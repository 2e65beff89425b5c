// libFuzzer target: the index cache's reader on any entry. The input is an
// entry without its trailing checksum (the harness appends a valid one, so
// the fuzzer explores the structure, not the checksum). Decode returns true
// with a consistent index, or false; it never crashes or throws.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "hdmlp/source/index_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string entry(reinterpret_cast<const char*>(data), size);
  const uint64_t sum = hdmlp::IndexCache::Checksum(entry.data(), entry.size());
  entry.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  hdmlp::ImageFolderIndex index;
  const bool loaded = hdmlp::IndexCache::Decode(
      entry, "/fuzz/data", [](const std::string&, int64_t mtime) { return mtime != 42; }, &index);
  if (loaded) {
    if (index.relpaths.size() != index.labels.size() || index.labels.size() != index.sizes.size() ||
        index.sizes.size() != index.mtimes_ns.size()) {
      __builtin_trap();
    }
    for (int32_t label : index.labels) {
      if (label < 0 || static_cast<size_t>(label) >= index.classes.size()) __builtin_trap();
    }
  }
  return 0;
}
