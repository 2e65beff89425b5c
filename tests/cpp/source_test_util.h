// Writers of small test datasets in each source format: an hdmlp pack (the
// layout of pack_source.h, written independently of hdmlp/pack.py so the
// reader is checked against the documented format), ustar tar shards, and
// HDF5 files through the C library.
#ifndef HDMLP_TESTS_CPP_SOURCE_TEST_UTIL_H_
#define HDMLP_TESTS_CPP_SOURCE_TEST_UTIL_H_

#include <hdf5.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace hdmlp::testing {

struct PackSample {
  std::string name;
  int32_t label = 0;
  std::string bytes;
};

inline void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
inline void PutU64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }
inline void PutStr(std::string* s, const std::string& v) {
  PutU64(s, v.size());
  s->append(v);
}
inline uint32_t Crc(const std::string& s) {
  return static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

// Writes a pack of `samples` into dir, a new shard whenever one would pass
// shard_size bytes. Returns the number of shards.
inline int WritePack(const std::string& dir, const std::vector<PackSample>& samples,
                     const std::vector<std::string>& classes, int64_t shard_size, uint64_t pack_id = 42,
                     const std::string& source_root = "/orig", uint32_t format = 0) {
  std::vector<std::string> shards;
  std::string index_samples;
  for (const auto& s : samples) {
    if (shards.empty() || (shards.back().size() + s.bytes.size() > static_cast<size_t>(shard_size) &&
                           shards.back().size() > 32)) {
      std::string header = "HDMLPSH1";
      PutU64(&header, pack_id);
      PutU32(&header, static_cast<uint32_t>(shards.size()));
      PutU32(&header, format);
      PutU64(&header, 0);
      shards.push_back(header);
    }
    PutU32(&index_samples, static_cast<uint32_t>(shards.size() - 1));
    PutU64(&index_samples, shards.back().size());
    PutU64(&index_samples, s.bytes.size());
    index_samples.append(reinterpret_cast<const char*>(&s.label), 4);
    PutU32(&index_samples, Crc(s.bytes));
    PutStr(&index_samples, s.name);
    shards.back() += s.bytes;
  }
  std::string index = "HDMLPPK1";
  PutU32(&index, 1);
  PutU32(&index, format);
  PutU64(&index, pack_id);
  PutStr(&index, source_root);
  PutStr(&index, "folder");
  PutU64(&index, classes.size());
  for (const auto& c : classes) PutStr(&index, c);
  PutU64(&index, shards.size());
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[40];
    std::snprintf(name, sizeof name, "shard-%05zu.hdmlp-shard", k);
    PutStr(&index, name);
    PutU64(&index, shards[k].size());
    WriteFile(dir + "/" + name, shards[k]);
  }
  PutU64(&index, samples.size());
  index += index_samples;
  PutU32(&index, Crc(index));
  WriteFile(dir + "/index.hdmlp-pack", index);
  return static_cast<int>(shards.size());
}

// A ustar tar of (name, bytes) members, with the two zero blocks at the end.
inline std::string MakeTar(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string tar;
  for (const auto& [name, data] : members) {
    char h[512] = {};
    std::snprintf(h, 100, "%s", name.c_str());
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011lo", static_cast<unsigned long>(data.size()));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : std::string(h, 512)) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    tar.append(h, 512);
    tar += data;
    tar.append((512 - data.size() % 512) % 512, '\0');
  }
  tar.append(1024, '\0');
  return tar;
}

// Writes a float32 dataset of `dims` (chunks: empty for contiguous; with
// gzip when chunked) into an open HDF5 file.
inline void WriteFloats(hid_t file, const std::string& name, const std::vector<hsize_t>& dims,
                        const std::vector<float>& values, const std::vector<hsize_t>& chunks = {}) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunks.empty()) {
    H5Pset_chunk(dcpl, static_cast<int>(chunks.size()), chunks.data());
    H5Pset_deflate(dcpl, 4);
  }
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  const hid_t d = H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space, lcpl, dcpl, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
}

inline void WriteInts(hid_t file, const std::string& name, const std::vector<int64_t>& values) {
  const hsize_t n = values.size();
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t d = H5Dcreate2(file, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(d);
  H5Sclose(space);
}

}  // namespace hdmlp::testing

#endif  // HDMLP_TESTS_CPP_SOURCE_TEST_UTIL_H_
