// PackSource: reading the documented pack layout back byte for byte, one
// open per shard, and every kind of damage reported, never served.
#include "hdmlp/source/pack_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/source/source.h"
#include "source_test_util.h"

namespace hdmlp {
namespace {

using testing::PackSample;
using testing::TempDir;

std::vector<PackSample> Samples(int n) {
  Rng rng(7);
  std::vector<PackSample> out;
  for (int i = 0; i < n; ++i) {
    std::string bytes(static_cast<size_t>(rng.Uniform(3000)), '\0');
    for (char& c : bytes) c = static_cast<char>(rng.Uniform(256));
    out.push_back({"c" + std::to_string(i % 3) + "/img" + std::to_string(i) + ".jpg", i % 3, bytes});
  }
  return out;
}

std::string AsString(const SampleBuffer& b) { return std::string(reinterpret_cast<const char*>(b.data.get()), b.size); }

void ExpectThrowContains(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "no exception";
  } catch (const InvalidArgumentError& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

// Flips the first byte of sample `i` in a one-shard pack written from `samples`; its offset in the shard.
int64_t CorruptSample(const TempDir& dir, const std::vector<PackSample>& samples, int i) {
  int64_t offset = 32;  // after the shard's header
  for (int k = 0; k < i; ++k) offset += static_cast<int64_t>(samples[static_cast<size_t>(k)].bytes.size());
  EXPECT_GT(samples[static_cast<size_t>(i)].bytes.size(), 0u);
  std::fstream f(dir / "shard-00000.hdmlp-shard", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.put(static_cast<char>(samples[static_cast<size_t>(i)].bytes[0] ^ 0x55));
  return offset;
}

TEST(PackSourceTest, ReadsEverySampleByteForByteWithOneOpenPerShard) {
  TempDir dir;
  const auto samples = Samples(40);
  const int shards = testing::WritePack(dir.path(), samples, {"c0", "c1", "c2"}, 20000);
  ASSERT_GT(shards, 2);
  auto source = OpenSource(Env::Default(), dir.path());  // the folder is recognised as a pack
  ASSERT_EQ(source->kind(), "pack");
  ASSERT_EQ(source->size(), 40);
  EXPECT_EQ(source->classes(), (std::vector<std::string>{"c0", "c1", "c2"}));
  EXPECT_EQ(source->SamplesRoot(), "/orig");
  // Twice over, from 4 threads: each shard is still opened once.
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round) {
        for (int i = t; i < 40; i += 4) {
          if (AsString(source->Read(i)) != samples[static_cast<size_t>(i)].bytes) mismatches.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(source->names()[static_cast<size_t>(i)], samples[static_cast<size_t>(i)].name);
    EXPECT_EQ(source->labels()[static_cast<size_t>(i)], samples[static_cast<size_t>(i)].label);
    EXPECT_EQ(source->sizes()[static_cast<size_t>(i)], static_cast<int64_t>(samples[static_cast<size_t>(i)].bytes.size()));
  }
  EXPECT_EQ(source->files_opened(), 1 + shards);  // the index, then each shard once
  // The index file itself names the pack too; a byte range reads part of a sample.
  auto by_index = OpenSource(Env::Default(), dir / "index.hdmlp-pack");
  std::string part(10, '\0');
  by_index->ReadRange(5, 3, 10, reinterpret_cast<uint8_t*>(part.data()));
  EXPECT_EQ(part, samples[5].bytes.substr(3, 10));
}

TEST(PackSourceTest, TruncatedShardFailsOnlyTheSamplesPastItsEnd) {
  TempDir dir;
  const auto samples = Samples(30);
  testing::WritePack(dir.path(), samples, {"c0", "c1", "c2"}, 1 << 20);  // one shard
  const std::string shard = dir / "shard-00000.hdmlp-shard";
  const auto size = std::filesystem::file_size(shard);
  std::filesystem::resize_file(shard, size - 100);
  PackSource source(Env::Default(), dir.path());
  EXPECT_EQ(AsString(source.Read(0)), samples[0].bytes);
  ExpectThrowContains([&] { source.Read(29); }, {"shard-00000.hdmlp-shard", "truncated", "offset", "sample 29"});
}

TEST(PackSourceTest, IndexThatDoesNotMatchItsShardsIsRefused) {
  TempDir a, b;
  const auto samples = Samples(20);
  testing::WritePack(a.path(), samples, {"c0", "c1", "c2"}, 1 << 20, /*pack_id=*/1);
  // A shard of another pack with the same size: caught by the shard's header.
  auto other = samples;
  other[0].bytes[0] ^= 1;
  testing::WritePack(b.path(), other, {"c0", "c1", "c2"}, 1 << 20, /*pack_id=*/2);
  std::filesystem::copy_file(b / "shard-00000.hdmlp-shard", a / "shard-00000.hdmlp-shard",
                             std::filesystem::copy_options::overwrite_existing);
  PackSource mixed(Env::Default(), a.path());
  ExpectThrowContains([&] { mixed.Read(3); }, {"does not match its shards", "shard-00000.hdmlp-shard"});
  // A larger shard: refused at open.
  {
    std::ofstream grow(a / "shard-00000.hdmlp-shard", std::ios::app | std::ios::binary);
    grow << "more";
  }
  ExpectThrowContains([&] { PackSource(Env::Default(), a.path()); }, {"does not match its shards", "bytes"});
}

TEST(PackSourceTest, ChangedBytesFailTheirChecksumNeverServed) {
  TempDir dir;
  const auto samples = Samples(10);
  testing::WritePack(dir.path(), samples, {"c0", "c1", "c2"}, 1 << 20);
  PackSource source(Env::Default(), dir.path());
  const int64_t offset = CorruptSample(dir, samples, 4);
  ExpectThrowContains([&] { source.Read(4); }, {"checksum", "sample 4", "offset " + std::to_string(offset)});
  EXPECT_EQ(AsString(source.Read(5)), samples[5].bytes);
}

TEST(PackSourceTest, ReadRunReadsNeighboursInOneSpanAndChecksEach) {
  TempDir dir;
  const auto samples = Samples(12);
  testing::WritePack(dir.path(), samples, {"c0", "c1", "c2"}, 1 << 20);  // one shard
  PackSource source(Env::Default(), dir.path());
  const auto run = source.ReadRun(3, 6);
  ASSERT_EQ(run.size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(AsString(run[static_cast<size_t>(k)]), samples[static_cast<size_t>(3 + k)].bytes);
  // A byte changed in sample 6 fails the run that holds it, naming the sample, as Read does.
  CorruptSample(dir, samples, 6);
  ExpectThrowContains([&] { source.ReadRun(3, 6); }, {"checksum", "sample 6"});
  EXPECT_EQ(AsString(source.ReadRun(7, 3)[0]), samples[7].bytes);
}

TEST(PackSourceTest, CorruptOrMissingIndexAndShardsAreNamed) {
  TempDir dir;
  testing::WritePack(dir.path(), Samples(10), {"c0", "c1", "c2"}, 1 << 20);
  const std::string index = dir / "index.hdmlp-pack";
  std::string bytes = Env::Default()->ReadWholeFile(index);
  bytes[bytes.size() / 2] ^= 1;
  testing::WriteFile(index + ".bad", bytes);
  ExpectThrowContains([&] { PackSource(Env::Default(), index + ".bad"); }, {"corrupt", "checksum"});
  std::filesystem::remove(dir / "shard-00000.hdmlp-shard");
  EXPECT_THROW(PackSource(Env::Default(), dir.path()), NotFoundError);
  TempDir empty;
  EXPECT_THROW(PackSource(Env::Default(), empty.path()), NotFoundError);
}

}  // namespace
}  // namespace hdmlp
