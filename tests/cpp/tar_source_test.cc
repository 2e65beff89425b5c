// TarSource: WebDataset shards read in place, grouped by key, labelled by
// their .cls member, indexed once and cached until a shard changes.
#include "hdmlp/source/tar_source.h"

#include <gtest/gtest.h>

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

TEST(TarSourceTest, MemberCutShortFailsItsReadNamingFileAndOffset) {
  TempDir dir;
  const std::string tar = MakeTar(
      {{"a.jpg", std::string(3000, 'a')}, {"a.cls", "1"}, {"b.cls", "2"}, {"b.jpg", std::string(5000, 'b')}});
  // Cut inside b.jpg's data, which starts after 4 headers, a.jpg's 3072 bytes and two 512-byte labels.
  const int64_t b_data = 512 * 6 + 3072;
  testing::WriteFile(dir / "cut.tar", tar.substr(0, b_data + 1000));
  TarSource source(Env::Default(), dir / "cut.tar", {}, NoCache());
  ASSERT_EQ(source.size(), 2);
  EXPECT_EQ(AsString(source.Read(0)), std::string(3000, 'a'));
  try {
    source.Read(1);
    FAIL() << "read a member that was cut short";
  } catch (const InvalidArgumentError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cut.tar"), std::string::npos) << msg;
    EXPECT_NE(msg.find("b.jpg"), std::string::npos) << msg;
    EXPECT_NE(msg.find("offset " + std::to_string(b_data)), std::string::npos) << msg;
  }
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
