// libFuzzer target: the pack index reader (PackSource) on any index. The
// input is an index without its trailing CRC-32 (the harness appends a valid
// one, so the fuzzer explores the structure, not the checksum), opened in a
// folder holding two shards of 4096 and 100 bytes. Opening either throws
// hdmlp's Error naming what is wrong, or gives a pack whose every sample lies
// inside a shard that exists, with a label that names a class.
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <fstream>
#include <string>

#include "hdmlp/errors.h"
#include "hdmlp/source/pack_source.h"

namespace {

const std::string& Folder() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/hdmlp_pack_fuzz.XXXXXX";
    const std::string d = mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
    std::ofstream(d + "/shard-00000.hdmlp-shard", std::ios::binary) << std::string(4096, 'a');
    std::ofstream(d + "/shard-00001.hdmlp-shard", std::ios::binary) << std::string(100, 'b');
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string index(reinterpret_cast<const char*>(data), size);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(index.data()), static_cast<uInt>(index.size()));
  const uint32_t sum = static_cast<uint32_t>(crc);
  index.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  const std::string path = Folder() + "/index.hdmlp-pack";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << index;
  try {
    hdmlp::PackSource pack(hdmlp::Env::Default(), Folder());
    for (int64_t i = 0; i < pack.size(); ++i) {
      const hdmlp::Source::Extent e = pack.ExtentOf(i);
      if (e.file < 0 || e.file >= pack.num_shards() || e.offset < 0 || e.size < 0 ||
          e.offset > INT64_MAX - e.size) {
        __builtin_trap();
      }
      const int32_t label = pack.labels()[static_cast<size_t>(i)];
      if (label < 0 || (!pack.classes().empty() && static_cast<size_t>(label) >= pack.classes().size())) {
        __builtin_trap();
      }
      if (e.size <= (1 << 20)) {
        try {
          if (pack.Read(i).size != e.size) __builtin_trap();  // the bytes, or an error (CRC, cut short)
        } catch (const hdmlp::Error&) {
        }
      }
    }
  } catch (const hdmlp::Error&) {
  }
  return 0;
}
