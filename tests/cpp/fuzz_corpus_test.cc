// Replays the fuzz targets' seed corpora (tests/fuzz/corpus), which hold the
// inputs the fuzzers found bugs with, through the same entry points under
// GoogleTest, and so under make asan / make tsan too: every input is decoded
// or refused with the documented error, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "hdmlp/config/config.h"
#include "hdmlp/source/index_cache.h"
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

}  // namespace
}  // namespace hdmlp
