// Replays the fuzz targets' seed corpora (tests/fuzz/corpus), which hold the
// inputs the fuzzers found bugs with, through the same entry points under
// GoogleTest, and so under make asan / make tsan too: every input is decoded
// or refused with the documented error, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "hdmlp/config/config.h"
#include "hdmlp/source/index_cache.h"
#include "hdmlp/source/pack_source.h"
#include "hdmlp/source/tar_source.h"
#include "hdmlp/transforms/decode.h"

namespace hdmlp {
namespace {

std::vector<std::pair<std::string, std::string>> Corpus(const std::string& target) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(HDMLP_SOURCE_DIR) + "/tests/fuzz/corpus/" + target)) {
    std::ifstream in(e.path(), std::ios::binary);
    files.emplace_back(e.path().filename().string(), std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return files;
}

TEST(FuzzCorpusTest, ImagesDecodeOrAreRefused) {
  int decoded = 0, refused = 0;
  for (const auto& [name, bytes] : Corpus("decode")) {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    try {
      const ImageHeader header = ReadImageHeader(data, static_cast<int64_t>(bytes.size()), name, true);
      DecodedImage image;
      const PixelRect bounds = DecodedBounds(header, 1);
      DecodeImage(data, static_cast<int64_t>(bytes.size()), header, 1, bounds, name, &image);
      EXPECT_EQ(image.view.width, bounds.width) << name;
      ++decoded;
    } catch (const DecodeError&) {
      ++refused;
    }
  }
  EXPECT_GT(decoded, 10);
  EXPECT_GE(refused, 1);  // bigtiff-ifd-offset-wraps: read past the buffer before the fix
}

TEST(FuzzCorpusTest, JpegRegionsDecodeOrAreRefused) {
  int refused = 0;
  for (const auto& [name, bytes] : Corpus("jpeg_region")) {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data()) + 9;  // after the region bytes
    try {
      const ImageHeader header = ReadImageHeader(data, static_cast<int64_t>(bytes.size()) - 9, name, true);
      const PixelRect bounds = DecodedBounds(header, 2);
      EXPECT_GT(bounds.width, 0) << name;
      EXPECT_GT(bounds.height, 0) << name;
      JpegScratch scratch;
      ImageView view;
      DecodeJpegRegion(data, static_cast<int64_t>(bytes.size()) - 9, header.width, header.height, 2, bounds, name,
                       &scratch, &view);
    } catch (const DecodeError&) {
      ++refused;  // jpeg-width-0: accepted with a width of 0 before the fix
    }
  }
  EXPECT_GE(refused, 1);
}

TEST(FuzzCorpusTest, ConfigsLoadOrAreRefused) {
  for (const auto& [name, text] : Corpus("config")) {
    try {
      Config::LoadString(text, name);
    } catch (const ConfigError&) {
    }
  }
}

TEST(FuzzCorpusTest, IndexEntriesDecodeOrAreRefused) {
  int loaded = 0;
  for (auto [name, entry] : Corpus("index_cache")) {
    const uint64_t sum = IndexCache::Checksum(entry.data(), entry.size());
    entry.append(reinterpret_cast<const char*>(&sum), sizeof sum);
    ImageFolderIndex index;
    if (IndexCache::Decode(entry, "/fuzz/data", [](const std::string&, int64_t t) { return t != 42; }, &index)) {
      ++loaded;
      EXPECT_EQ(index.mtimes_ns.size(), index.relpaths.size());
    }
  }
  EXPECT_EQ(loaded, 2);  // three.idx, one.idx (stale.idx is stale, other_root.idx another root)
}

// The tar index reader's corpus: whole shards open; every cut-short one is
// refused naming the offset, or with keep_damaged keeps what lies before it.
TEST(FuzzCorpusTest, TarShardsIndexOrAreRefusedNamingTheCut) {
  const std::string dir = std::filesystem::temp_directory_path() / ("hdmlp_tar_corpus_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ScanOptions scan;
  scan.use_cache = false;
  int opened = 0, cut = 0;
  for (const auto& [name, bytes] : Corpus("tar_index")) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      TarSource source(Env::Default(), path, {}, scan);
      for (int64_t i = 0; i < source.size(); ++i) {
        EXPECT_EQ(source.Read(i).size, source.sizes()[static_cast<size_t>(i)]);
      }
      ++opened;
    } catch (const InvalidArgumentError& e) {
      EXPECT_EQ(name.compare(0, 4, "cut-") == 0 || name == "huge-member.tar", true) << name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("cut short at offset"), std::string::npos) << e.what();
      ++cut;
    }
  }
  EXPECT_EQ(opened, 3);  // ustar, pax and GNU long names
  EXPECT_EQ(cut, 6);
  std::filesystem::remove_all(dir);
}

TEST(FuzzCorpusTest, PackIndexesOpenOrAreRefused) {
  const std::string dir = std::filesystem::temp_directory_path() / ("hdmlp_pack_corpus_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/shard-00000.hdmlp-shard", std::ios::binary) << std::string(4096, 'a');
  std::ofstream(dir + "/shard-00001.hdmlp-shard", std::ios::binary) << std::string(100, 'b');
  int opened = 0;
  for (auto [name, index] : Corpus("pack_index")) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(index.data()), static_cast<uInt>(index.size())));
    index.append(reinterpret_cast<const char*>(&crc), 4);
    std::ofstream(dir + "/index.hdmlp-pack", std::ios::binary | std::ios::trunc) << index;
    try {
      PackSource pack(Env::Default(), dir);
      EXPECT_EQ(name, "three-samples");
      EXPECT_EQ(pack.size(), 3);
      ++opened;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(name, "three-samples") << e.what();  // wrapping-offset: offset + size wrapped past the check
    }
  }
  EXPECT_EQ(opened, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hdmlp
