// libFuzzer target: the TFRecord source (its index walk, .idx files, CRCs and
// tf.train.Example features) and the NumPy source (.npy headers, .npz zip
// directories, inflating) on any bytes. The first input byte picks the case:
//   0: the rest is a TFRecord shard, opened plain and reading its records'
//      "label" and "image" features, with and without keep_damaged;
//   1: the next two bytes give a length L; L bytes are the shard's .idx file
//      text, the rest the shard;
//   2: the rest is an .npy or .npz file, opened as arrays (with and without
//      the label member "y") and as bytes.
// Each open either throws hdmlp's Error naming the file, or gives samples
// whose every read returns exactly the indexed size (or throws Error for a
// record or member that fails its check). Files go to a private folder in
// /dev/shm, removed at exit.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "hdmlp/errors.h"
#include "hdmlp/source/npy_source.h"
#include "hdmlp/source/tfrecord_source.h"

namespace {

std::string Folder() {
  static const std::string dir = [] {
    std::string d = "/dev/shm/hdmlp-fuzz-records-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    std::atexit([] { std::filesystem::remove_all("/dev/shm/hdmlp-fuzz-records-" + std::to_string(::getpid())); });
    return d;
  }();
  return dir;
}

void Write(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

void ReadAll(hdmlp::Source& source) {
  if (source.size() < 1 || source.classes().empty()) __builtin_trap();
  for (int64_t i = 0; i < source.size(); ++i) {
    const int32_t label = source.labels()[static_cast<size_t>(i)];
    if (label < 0 || label > hdmlp::kMaxLabel || static_cast<size_t>(label) >= source.classes().size()) {
      __builtin_trap();
    }
    try {
      if (source.Read(i).size != source.sizes()[static_cast<size_t>(i)]) __builtin_trap();
    } catch (const hdmlp::Error&) {
    }
  }
}

template <typename S>
void Open(const std::string& path, const hdmlp::SourceOptions& options, bool keep_damaged) {
  hdmlp::ScanOptions scan;
  scan.use_cache = false;
  scan.threads = 1;
  scan.keep_damaged = keep_damaged;
  try {
    S source(hdmlp::Env::Default(), path, options, scan);
    if (!keep_damaged && !source.damage().empty()) __builtin_trap();
    ReadAll(source);
  } catch (const hdmlp::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 3;
  ++data;
  --size;
  const std::string dir = Folder();
  if (mode == 2) {
    const std::string path = dir + "/f.npy";
    Write(path, data, size);
    hdmlp::SourceOptions options;
    Open<hdmlp::NpySource>(path, options, false);
    options.npz_label_member = "y";
    Open<hdmlp::NpySource>(path, options, false);
    hdmlp::SourceOptions bytes;
    bytes.npy_as = "bytes";
    Open<hdmlp::NpySource>(path, bytes, false);
    return 0;
  }
  const std::string shard = dir + "/s.tfrecord";
  std::filesystem::remove(shard + ".idx");
  if (mode == 1) {
    if (size < 2) return 0;
    const size_t n = std::min<size_t>(size - 2, data[0] | (data[1] << 8));
    Write(shard + ".idx", data + 2, n);
    data += 2 + n;
    size -= 2 + n;
  }
  Write(shard, data, size);
  for (bool keep : {false, true}) {
    Open<hdmlp::TFRecordSource>(shard, {}, keep);
    if (mode == 0) {
      hdmlp::SourceOptions features;
      features.tfrecord_label = "label";
      features.tfrecord_sample = "image";
      Open<hdmlp::TFRecordSource>(shard, features, keep);
    }
  }
  return 0;
}
