// TFRecordSource: records read in place and checked, from a list, a pattern
// or a folder; labels and samples from the records' Examples or a side file;
// .idx index files used where present; cut and corrupt shards named.
#include "hdmlp/source/tfrecord_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "hdmlp/errors.h"
#include "test_util.h"
#include "tfrecord_test_util.h"

namespace hdmlp {
namespace {

using testing::TempDir;

std::string AsString(const SampleBuffer& b) { return std::string(reinterpret_cast<const char*>(b.data.get()), b.size); }

std::string Image(int i) { return "image-" + std::to_string(i) + std::string(static_cast<size_t>(i * 53 % 700), 'p'); }

std::string Payload(int i) {
  return testing::Example({{"image", testing::BytesFeature({Image(i)})}, {"label", testing::Int64Feature({i % 5})}});
}

// Shard s holds records [s * per, (s + 1) * per); returns each shard's bytes.
std::vector<std::string> WriteShards(const std::string& dir, int shards, int per, bool index = false) {
  std::vector<std::string> out;
  for (int s = 0; s < shards; ++s) {
    std::string data, idx;
    for (int i = s * per; i < (s + 1) * per; ++i) {
      const std::string rec = testing::TFRecord(Payload(i));
      idx += std::to_string(data.size()) + " " + std::to_string(rec.size()) + "\n";
      data += rec;
    }
    const std::string path = dir + "/train-" + std::to_string(s) + ".tfrecord";
    testing::WriteFile(path, data);
    if (index) testing::WriteFile(path + ".idx", idx);
    out.push_back(data);
  }
  return out;
}

ScanOptions NoCache() {
  ScanOptions scan;
  scan.use_cache = false;
  return scan;
}

TEST(TFRecordSourceTest, RecordsInShardOrderFromAListAPatternOrAFolder) {
  TempDir dir;
  WriteShards(dir.path(), 3, 4);
  for (const std::string spec : {dir.path(), dir / "train-{0..2}.tfrecord",
                                 dir / "train-0.tfrecord," + dir / "train-1.tfrecord," + dir / "train-2.tfrecord"}) {
    auto source = OpenSource(Env::Default(), spec, {}, NoCache());
    ASSERT_EQ(source->kind(), "tfrecord") << spec;
    ASSERT_EQ(source->size(), 12);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(AsString(source->Read(i)), Payload(i)) << spec << " " << i;
    EXPECT_EQ(source->names()[5], dir / "train-1.tfrecord#1");
    EXPECT_EQ(source->classes(), std::vector<std::string>{"0"});  // no labels asked for
    // Coalesced reads of neighbours check each record as single reads do.
    const auto run = source->ReadRun(4, 4);
    ASSERT_EQ(run.size(), 4u);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(AsString(run[static_cast<size_t>(k)]), Payload(4 + k));
    EXPECT_EQ(source->ExtentOf(5).file, 1);
  }
}

TEST(TFRecordSourceTest, LabelsAndSamplesFromTheExamplesOrASideFile) {
  TempDir dir;
  WriteShards(dir.path(), 2, 5);
  SourceOptions options;
  options.tfrecord_label = "label";
  options.tfrecord_sample = "image";
  TFRecordSource source(Env::Default(), dir.path(), options, NoCache());
  ASSERT_EQ(source.size(), 10);
  EXPECT_EQ(source.classes().size(), 5u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(source.labels()[static_cast<size_t>(i)], i % 5);
    EXPECT_EQ(AsString(source.Read(i)), Image(i));
    EXPECT_EQ(source.sizes()[static_cast<size_t>(i)], static_cast<int64_t>(Image(i).size()));
  }
  const auto run = source.ReadRun(0, 5);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(AsString(run[static_cast<size_t>(k)]), Image(k));

  SourceOptions side;
  side.tfrecord_labels_file = dir / "labels.txt";
  testing::WriteFile(side.tfrecord_labels_file, "3\n1\n4\n1\n5\n9\n2\n6\n5\n3\n");
  TFRecordSource from_file(Env::Default(), dir.path(), side, NoCache());
  EXPECT_EQ(from_file.labels()[5], 9);
  EXPECT_EQ(from_file.classes().size(), 10u);
  testing::WriteFile(side.tfrecord_labels_file, "3\n1\n");
  try {
    TFRecordSource short_file(Env::Default(), dir.path(), side, NoCache());
    FAIL() << "two labels for ten records";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 2 labels and the shards hold 10 records"), std::string::npos) << e.what();
  }

  SourceOptions wrong;
  wrong.tfrecord_label = "image";
  try {
    TFRecordSource bad(Env::Default(), dir.path(), wrong, NoCache());
    FAIL() << "a bytes feature as the label";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train-0.tfrecord' at offset 0"), std::string::npos) << what;
    EXPECT_NE(what.find("a bytes_list"), std::string::npos) << what;
    EXPECT_NE(what.find("'image', 'label'"), std::string::npos) << what;
  }
}

TEST(TFRecordSourceTest, IndexFilesAreUsedAndAStaleOneIsNamed) {
  TempDir dir;
  const auto shards = WriteShards(dir.path(), 2, 3, /*index=*/true);
  {
    TFRecordSource source(Env::Default(), dir.path(), {}, NoCache());
    EXPECT_EQ(source.index_files_used().size(), 2u);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(AsString(source.Read(i)), Payload(i));
  }
  // DLIO's layout: <data>/train/x.tfrecord, <data>/index/train/x.tfrecord.idx.
  TempDir dlio;
  WriteShards(dlio / "train", 1, 3, /*index=*/true);
  std::filesystem::create_directories(dlio / "index/train");
  std::filesystem::rename(dlio / "train/train-0.tfrecord.idx", dlio / "index/train/train-0.tfrecord.idx");
  {
    TFRecordSource source(Env::Default(), dlio / "train", {}, NoCache());
    EXPECT_EQ(source.index_files_used(), std::vector<std::string>{dlio / "index/train/train-0.tfrecord.idx"});
  }
  // The tfrecord package's folder mode: <stem>.tfindex.
  std::filesystem::rename(dir / "train-0.tfrecord.idx", dir / "train-0.tfindex");
  {
    TFRecordSource source(Env::Default(), dir / "train-0.tfrecord", {}, NoCache());
    EXPECT_EQ(source.index_files_used(), std::vector<std::string>{dir / "train-0.tfindex"});
  }
  // The shard written again with one more record: its old index no longer tiles it.
  testing::WriteFile(dir / "train-1.tfrecord", shards[1] + testing::TFRecord("extra"));
  try {
    TFRecordSource source(Env::Default(), dir.path(), {}, NoCache());
    FAIL() << "a stale index";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train-1.tfrecord.idx' does not match shard"), std::string::npos) << what;
    EXPECT_NE(what.find("tfrecord2idx"), std::string::npos) << what;
  }
  testing::WriteFile(dir / "train-1.tfrecord.idx", "0 20\nnot a number\n");
  EXPECT_THROW(TFRecordSource(Env::Default(), dir.path(), {}, NoCache()), InvalidArgumentError);
}

TEST(TFRecordSourceTest, ACutShardIsNamedAtItsOffsetOrKeepsItsWholeRecords) {
  TempDir dir;
  const auto shards = WriteShards(dir.path(), 1, 3);
  const std::string whole = shards[0];
  const size_t last = whole.size() - testing::TFRecord(Payload(2)).size();
  for (size_t cut : {last + 5, last + 12, last + 40, whole.size() - 1}) {
    testing::WriteFile(dir / "train-0.tfrecord", whole.substr(0, cut));
    try {
      TFRecordSource source(Env::Default(), dir.path(), {}, NoCache());
      FAIL() << "cut at " << cut;
    } catch (const InvalidArgumentError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("train-0.tfrecord' is damaged at offset " + std::to_string(last)), std::string::npos) << what;
      EXPECT_NE(what.find("on_error=\"skip\""), std::string::npos) << what;
    }
    ScanOptions skip = NoCache();
    skip.keep_damaged = true;
    TFRecordSource kept(Env::Default(), dir.path(), {}, skip);
    EXPECT_EQ(kept.size(), 2) << cut;
    ASSERT_EQ(kept.damage().size(), 1u);
    EXPECT_NE(kept.damage()[0].find("2 whole records before it are used"), std::string::npos);
    EXPECT_EQ(AsString(kept.Read(1)), Payload(1));
  }
}

TEST(TFRecordSourceTest, CorruptRecordsFailTheirReadNamingShardAndOffset) {
  TempDir dir;
  const auto shards = WriteShards(dir.path(), 1, 3);
  TFRecordSource source(Env::Default(), dir.path(), {}, NoCache());
  const int64_t second = static_cast<int64_t>(testing::TFRecord(Payload(0)).size());
  std::string damaged = shards[0];
  damaged[static_cast<size_t>(second) + 20] ^= 0x40;  // a byte of record 1's payload
  testing::WriteFile(dir / "train-0.tfrecord", damaged);
  EXPECT_EQ(AsString(source.Read(0)), Payload(0));
  try {
    source.Read(1);
    FAIL() << "a corrupt payload was read";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train-0.tfrecord record at offset " + std::to_string(second) + " (sample 1) is corrupt"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("payload fails its CRC-32C"), std::string::npos) << what;
  }
  EXPECT_THROW(source.ReadRun(0, 3), InvalidArgumentError);
  // Read through for labels, the damage is found while indexing; skip leaves that record out.
  SourceOptions labels;
  labels.tfrecord_label = "label";
  EXPECT_THROW(TFRecordSource(Env::Default(), dir.path(), labels, NoCache()), InvalidArgumentError);
  ScanOptions skip = NoCache();
  skip.keep_damaged = true;
  TFRecordSource kept(Env::Default(), dir.path(), labels, skip);
  EXPECT_EQ(kept.size(), 2);
  EXPECT_EQ(kept.labels()[1], 2);
  // A length field that fails its CRC: the shard cannot be walked past it.
  damaged = shards[0];
  damaged[static_cast<size_t>(second) + 1] ^= 0x01;
  testing::WriteFile(dir / "train-0.tfrecord", damaged);
  try {
    TFRecordSource bad(Env::Default(), dir.path(), {}, NoCache());
    FAIL() << "a corrupt length";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("at offset " + std::to_string(second) + ": the length field"),
              std::string::npos)
        << e.what();
  }
}

TEST(TFRecordSourceTest, TheListingIsCachedUntilAShardChanges) {
  TempDir dir, cache;
  WriteShards(dir.path(), 2, 3);
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    std::filesystem::last_write_time(e.path(), std::filesystem::last_write_time(e.path()) - std::chrono::seconds(60));
  }
  ScanOptions scan;
  scan.cache_dir = cache.path();
  SourceOptions options;
  options.tfrecord_label = "label";
  EXPECT_FALSE(TFRecordSource(Env::Default(), dir.path(), options, scan).from_cache());
  TFRecordSource again(Env::Default(), dir.path(), options, scan);
  EXPECT_TRUE(again.from_cache());
  EXPECT_EQ(again.labels()[4], 4);
  EXPECT_FALSE(TFRecordSource(Env::Default(), dir.path(), {}, scan).from_cache());  // other options
  testing::WriteFile(dir / "train-1.tfrecord", testing::TFRecord(Payload(9)));
  TFRecordSource changed(Env::Default(), dir.path(), options, scan);
  EXPECT_FALSE(changed.from_cache());
  EXPECT_EQ(changed.size(), 4);
}

TEST(TFRecordSourceTest, NonRegularFilesAndEmptyFoldersAreRefusedBeforeReading) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "a.tfrecord").c_str(), 0600), 0);
  try {
    TFRecordSource source(Env::Default(), dir / "a.tfrecord", {}, NoCache());
    FAIL() << "a FIFO";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  TempDir empty;
  EXPECT_THROW(TFRecordSource(Env::Default(), empty.path(), {}, NoCache()), NotFoundError);
  // A file of other bytes, named as a shard.
  testing::WriteFile(dir / "b.tfrecord", "this is not a TFRecord file at all");
  EXPECT_THROW(TFRecordSource(Env::Default(), dir / "b.tfrecord", {}, NoCache()), InvalidArgumentError);
}

}  // namespace
}  // namespace hdmlp
