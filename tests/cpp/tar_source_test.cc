// TarSource: WebDataset shards read in place, grouped by key, labelled by
// their .cls member, indexed once and cached until a shard changes.
#include "hdmlp/source/tar_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "hdmlp/errors.h"
#include "source_test_util.h"

namespace hdmlp {
namespace {

using testing::MakeTar;
using testing::TempDir;

std::string AsString(const SampleBuffer& b) { return std::string(reinterpret_cast<const char*>(b.data.get()), b.size); }

std::string Image(int i) { return "jpeg-bytes-of-" + std::to_string(i) + std::string(static_cast<size_t>(i * 37), 'x'); }

// Shard s holds samples [s * per, (s + 1) * per): key.jpg, key.cls and key.json.
void WriteShards(const std::string& dir, int shards, int per) {
  for (int s = 0; s < shards; ++s) {
    std::vector<std::pair<std::string, std::string>> members;
    for (int i = s * per; i < (s + 1) * per; ++i) {
      const std::string key = "part/k" + std::to_string(1000 + i);
      members.push_back({key + ".cls", std::to_string(i % 4) + "\n"});
      members.push_back({key + ".jpg", Image(i)});
      members.push_back({key + ".json", "{}"});
    }
    char name[32];
    std::snprintf(name, sizeof name, "/shard-%03d.tar", s);
    testing::WriteFile(dir + name, MakeTar(members));
  }
}

ScanOptions NoCache() {
  ScanOptions scan;
  scan.use_cache = false;
  return scan;
}

TEST(TarSourceTest, GroupsMembersByKeyAndReadsInPlace) {
  TempDir dir;
  WriteShards(dir.path(), 3, 5);
  for (const std::string spec : {dir / "shard-{000..002}.tar", dir.path(),
                                 dir / "shard-000.tar," + dir / "shard-001.tar," + dir / "shard-002.tar"}) {
    auto source = OpenSource(Env::Default(), spec, {}, NoCache());
    ASSERT_EQ(source->kind(), "tar") << spec;
    ASSERT_EQ(source->size(), 15) << spec;
    EXPECT_EQ(source->classes(), (std::vector<std::string>{"0", "1", "2", "3"}));
    for (int i = 0; i < 15; ++i) {
      EXPECT_EQ(AsString(source->Read(i)), Image(i));
      EXPECT_EQ(source->labels()[static_cast<size_t>(i)], i % 4);
    }
    EXPECT_EQ(source->files_opened(), 3);  // one per shard
  }
  // The member holding the sample can be chosen.
  SourceOptions json;
  json.tar_sample_ext = "png;json";
  TarSource by_json(Env::Default(), dir.path(), json, NoCache());
  EXPECT_EQ(AsString(by_json.Read(2)), "{}");
}

TEST(TarSourceTest, ReadRunCutsNeighboursOutOfOneSpanOfTheShard) {
  TempDir dir;
  WriteShards(dir.path(), 2, 6);
  auto source = OpenSource(Env::Default(), dir.path(), {}, NoCache());
  // Samples 1..4 of shard 0: one span with the .cls and .json members between them left out.
  const auto run = source->ReadRun(1, 4);
  ASSERT_EQ(run.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(AsString(run[static_cast<size_t>(k)]), Image(1 + k));
  // Across two shards: read one by one, the same bytes.
  const auto across = source->ReadRun(4, 4);
  ASSERT_EQ(across.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(AsString(across[static_cast<size_t>(k)]), Image(4 + k));
}

TEST(TarSourceTest, IndexIsCachedUntilAShardChanges) {
  TempDir dir, cache;
  WriteShards(dir.path(), 2, 4);
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    std::filesystem::last_write_time(e.path(), std::filesystem::last_write_time(e.path()) - std::chrono::seconds(60));
  }
  ScanOptions scan;
  scan.cache_dir = cache.path();
  EXPECT_FALSE(TarSource(Env::Default(), dir.path(), {}, scan).from_cache());
  TarSource cached(Env::Default(), dir.path(), {}, scan);
  EXPECT_TRUE(cached.from_cache());
  EXPECT_EQ(AsString(cached.Read(6)), Image(6));
  // Shard 1 rewritten with other samples: rescanned, and the new bytes read.
  testing::WriteFile(dir / "shard-001.tar", MakeTar({{"z/new.jpg", "fresh"}, {"z/new.cls", "3"}}));
  std::filesystem::last_write_time(dir / "shard-001.tar",
                                   std::filesystem::last_write_time(dir / "shard-001.tar") - std::chrono::seconds(30));
  TarSource rescanned(Env::Default(), dir.path(), {}, scan);
  EXPECT_FALSE(rescanned.from_cache());
  ASSERT_EQ(rescanned.size(), 5);
  EXPECT_EQ(AsString(rescanned.Read(4)), "fresh");
  EXPECT_EQ(rescanned.labels()[4], 3);
}

// Expects opening `path` to fail with InvalidArgumentError containing each of `parts`.
void ExpectOpenFails(const std::string& path, const std::vector<std::string>& parts) {
  try {
    TarSource source(Env::Default(), path, {}, NoCache());
    ADD_FAILURE() << "opened " << path << " with " << source.size() << " samples";
  } catch (const InvalidArgumentError& e) {
    for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Four samples of a.jpg + a.cls: member k's header is at 1024 * k (each
// member is one 512-byte block of data).
std::string FourSamples() {
  std::vector<std::pair<std::string, std::string>> members;
  for (const char* key : {"a", "b", "c", "d"}) {
    members.push_back({std::string(key) + ".jpg", std::string(500, key[0])});
    members.push_back({std::string(key) + ".cls", "1"});
  }
  return MakeTar(members);
}

// A shard cut short anywhere (at a member boundary, inside a header, inside
// a member, to 0 bytes, or just before its end-of-archive blocks) is an
// error naming the shard and the offset, never fewer samples in silence.
TEST(TarSourceTest, ShardCutShortIsAnErrorNamingShardAndOffset) {
  TempDir dir;
  const std::string tar = FourSamples();
  ASSERT_EQ(tar.size(), 8u * 1024 + 1024);
  struct Cut {
    int64_t at;
    std::string offset;
    int whole;  // samples kept with keep_damaged
  };
  const std::vector<Cut> cuts = {
      {4 * 1024, "offset 4096", 1},        // at a member boundary (b may have had more members)
      {5 * 1024 + 100, "offset 5120", 2},  // inside c.cls's header
      {2 * 1024 + 700, "offset 2048", 1},  // inside b.jpg's data
      {0, "offset 0", 0},                  // 0 bytes
      {8 * 1024, "offset 8192", 3},        // every member, no end-of-archive blocks
  };
  for (const auto& c : cuts) {
    SCOPED_TRACE(c.at);
    const std::string path = dir / ("cut-" + std::to_string(c.at) + ".tar");
    testing::WriteFile(path, tar.substr(0, static_cast<size_t>(c.at)));
    ExpectOpenFails(path, {"'" + path + "'", "cut short at " + c.offset});
    // on_error="skip": the whole samples before the cut, and a message.
    ScanOptions keep = NoCache();
    keep.keep_damaged = true;
    if (c.whole == 0) {
      EXPECT_THROW(TarSource(Env::Default(), path, {}, keep), InvalidArgumentError);  // no sample at all
      continue;
    }
    TarSource source(Env::Default(), path, {}, keep);
    EXPECT_EQ(source.size(), c.whole);
    ASSERT_EQ(source.damage().size(), 1u);
    EXPECT_NE(source.damage()[0].find(path), std::string::npos) << source.damage()[0];
    EXPECT_NE(source.damage()[0].find(c.offset), std::string::npos) << source.damage()[0];
    for (int i = 0; i < c.whole; ++i) EXPECT_EQ(AsString(source.Read(i)), std::string(500, "abcd"[i]));
    EXPECT_EQ(source.labels(), std::vector<int32_t>(static_cast<size_t>(c.whole), 1));
  }
  // A damaged shard's listing is not cached: without skip it fails again.
  TempDir cache;
  const std::string path = dir / "cut-8192.tar";
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) - std::chrono::seconds(60));
  ScanOptions keep;
  keep.cache_dir = cache.path();
  keep.keep_damaged = true;
  EXPECT_EQ(TarSource(Env::Default(), path, {}, keep).size(), 3);
  ScanOptions strict;
  strict.cache_dir = cache.path();
  EXPECT_THROW(TarSource(Env::Default(), path, {}, strict), InvalidArgumentError);
  // One zero block is end enough (a cut between the two loses nothing).
  testing::WriteFile(dir / "one-zero.tar", tar.substr(0, 8 * 1024 + 512));
  EXPECT_EQ(TarSource(Env::Default(), dir / "one-zero.tar", {}, NoCache()).size(), 4);
}

// A header may claim any size: 8 GB in a 2 KB file is refused before
// anything is allocated, naming the shard and the offset.
TEST(TarSourceTest, MemberLargerThanItsShardIsRefused) {
  TempDir dir;
  std::string tar = MakeTar({{"a.jpg", "x"}, {"b.jpg", "y"}});
  char* h = tar.data() + 1024;  // b.jpg's header
  std::snprintf(h + 124, 12, "%011llo", (8ULL << 30) - 1);  // the largest 11 octal digits hold
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(h[i]);
  std::snprintf(h + 148, 8, "%06o", sum);
  testing::WriteFile(dir / "huge.tar", tar);
  ExpectOpenFails(dir / "huge.tar", {"huge.tar", "offset 1024", "b.jpg", "claims 8589934591 bytes"});
}

// A label far beyond any class count is refused naming the shard and the
// sample, instead of a class list of 50M names (or a bad_alloc at 2^31).
TEST(TarSourceTest, HugeLabelIsRefusedNamingShardAndSample) {
  TempDir dir;
  for (const std::string label : {"50000000", "2147483647", "99999999999999999999"}) {
    testing::WriteFile(dir / "big.tar", MakeTar({{"a.jpg", "x"}, {"a.cls", "1"}, {"b.jpg", "y"}, {"b.cls", label}}));
    ExpectOpenFails(dir / "big.tar", {"big.tar", "'b.cls'", "sample 'b'", "1048575"});
  }
}

TEST(TarSourceTest, AFifoInPlaceOfAShardIsNamedAsSuch) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "pipe.tar").c_str(), 0600), 0);
  ExpectOpenFails(dir / "pipe.tar", {"pipe.tar", "FIFO", "not a regular file"});
}

TEST(TarSourceTest, KeyWithTwoMembersOfOneExtensionIsAnError) {
  TempDir dir;
  testing::WriteFile(dir / "twice.tar",
                     MakeTar({{"k/a.jpg", "x"}, {"k/a.cls", "1"}, {"k/b.jpg", "1"}, {"k/b.JPG", "2"}}));
  ExpectOpenFails(dir / "twice.tar", {"twice.tar", "'k/b'", "two 'jpg' members", "offset 2560", "offset 3584"});
  testing::WriteFile(dir / "labels.tar", MakeTar({{"a.jpg", "x"}, {"a.cls", "1"}, {"a.cls", "2"}}));
  ExpectOpenFails(dir / "labels.tar", {"labels.tar", "'a'", "two 'cls' members"});
}

TEST(TarSourceTest, BadShardsAreRefusedWithTheirName) {
  TempDir dir;
  testing::WriteFile(dir / "nolabel.tar", MakeTar({{"a.jpg", "x"}, {"a.cls", "one"}}));
  EXPECT_THROW(TarSource(Env::Default(), dir / "nolabel.tar", {}, NoCache()), InvalidArgumentError);
  testing::WriteFile(dir / "noimage.tar", MakeTar({{"a.txt", "x"}, {"a.cls", "1"}}));
  try {
    TarSource(Env::Default(), dir / "noimage.tar", {}, NoCache());
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tar_sample_ext"), std::string::npos) << e.what();
  }
  std::string garbage = MakeTar({{"a.jpg", "x"}});
  garbage[100] ^= 0x7f;  // inside the header: its checksum fails
  testing::WriteFile(dir / "garbage.tar", garbage);
  EXPECT_THROW(TarSource(Env::Default(), dir / "garbage.tar", {}, NoCache()), InvalidArgumentError);
  EXPECT_THROW(TarSource(Env::Default(), dir / "s-{0..3}.tar", {}, NoCache()), NotFoundError);
  EXPECT_THROW(TarSource(Env::Default(), dir / "s-{3..0}.tar", {}, NoCache()), InvalidArgumentError);
}

}  // namespace
}  // namespace hdmlp
