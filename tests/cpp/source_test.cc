// OpenSource: the format is picked from what the path is, and anything else
// is refused with the list of what is supported; ExpandBraces; the image
// folder behind the Source interface.
#include "hdmlp/source/source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "hdmlp/errors.h"
#include "hdmlp/source/image_folder_source.h"
#include "source_test_util.h"

namespace hdmlp {
namespace {

using testing::TempDir;

TEST(SourceTest, ExpandBraces) {
  EXPECT_EQ(ExpandBraces("s-{08..11}.tar"), (std::vector<std::string>{"s-08.tar", "s-09.tar", "s-10.tar", "s-11.tar"}));
  EXPECT_EQ(ExpandBraces("a{0..1}b{1..2}"), (std::vector<std::string>{"a0b1", "a0b2", "a1b1", "a1b2"}));
  EXPECT_EQ(ExpandBraces("x.tar,y-{1..2}.tar"), (std::vector<std::string>{"x.tar", "y-1.tar", "y-2.tar"}));
  EXPECT_EQ(ExpandBraces("plain.tar"), (std::vector<std::string>{"plain.tar"}));
  EXPECT_THROW(ExpandBraces("s-{a..b}.tar"), InvalidArgumentError);
  EXPECT_THROW(ExpandBraces("s-{5..1}.tar"), InvalidArgumentError);
  EXPECT_THROW(ExpandBraces("s-{1,2}.tar"), InvalidArgumentError);
}

TEST(SourceTest, PicksTheFormatFromThePath) {
  TempDir dir;
  testing::WriteFile(dir / "folder/cat/a.jpg", "a");
  testing::WriteFile(dir / "folder/dog/b.png", "bb");
  testing::WritePack(dir / "pack", {{"cat/a.jpg", 0, "a"}}, {"cat"}, 1 << 20);
  testing::WriteFile(dir / "tars/one.tar", testing::MakeTar({{"k.jpg", "x"}}));
  testing::WriteFile(dir / "renamed.bin", testing::MakeTar({{"k.jpg", "x"}}));  // known by its ustar magic
  std::filesystem::create_directories(dir / "h");
  const hid_t f = H5Fcreate((dir / "h/x.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0) << "cannot create " << dir / "h/x.h5";
  testing::WriteFloats(f, "data", {2, 3}, {1, 2, 3, 4, 5, 6});
  H5Fclose(f);
  ScanOptions scan;
  scan.use_cache = false;
  const auto kind = [&](const std::string& path) { return OpenSource(Env::Default(), path, {}, scan)->kind(); };
  EXPECT_EQ(kind(dir / "folder"), "folder");
  EXPECT_EQ(kind(dir / "pack"), "pack");
  EXPECT_EQ(kind(dir / "pack/index.hdmlp-pack"), "pack");
  EXPECT_EQ(kind(dir / "tars"), "tar");
  EXPECT_EQ(kind(dir / "tars/one.tar"), "tar");
  EXPECT_EQ(kind(dir / "tars/one.tar," + dir / "tars/one.tar"), "tar");
  EXPECT_EQ(kind(dir / "renamed.bin"), "tar");
  EXPECT_EQ(kind(dir / "h/x.h5"), "hdf5");
  EXPECT_EQ(kind(dir / "h"), "hdf5");
  // An explicit kind wins: a folder of tars read as an image folder has no class folder.
  SourceOptions as_folder;
  as_folder.kind = "folder";
  EXPECT_THROW(OpenSource(Env::Default(), dir / "tars", as_folder, scan), NotFoundError);
  SourceOptions unknown;
  unknown.kind = "zarr";
  EXPECT_THROW(OpenSource(Env::Default(), dir / "tars", unknown, scan), InvalidArgumentError);

  testing::WriteFile(dir / "notes.txt", "hello");
  try {
    OpenSource(Env::Default(), dir / "notes.txt", {}, scan);
    FAIL();
  } catch (const NotADirectoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("notes.txt"), std::string::npos) << msg;
    for (const char* word : {"class folders", "pack", "HDF5", "tar", "brace"}) {
      EXPECT_NE(msg.find(word), std::string::npos) << msg << " lacks " << word;
    }
  }
  EXPECT_THROW(OpenSource(Env::Default(), dir / "missing", {}, scan), NotFoundError);
}

TEST(SourceTest, EachNamedKindOpensItsOwnClass) {
  TempDir dir;
  testing::WriteFile(dir / "folder/cat/a.jpg", "a");
  testing::WritePack(dir / "pack", {{"cat/a.jpg", 0, "a"}}, {"cat"}, 1 << 20);
  testing::WriteFile(dir / "one.tar", testing::MakeTar({{"k.jpg", "x"}}));
  ScanOptions scan;
  scan.use_cache = false;
  const std::vector<std::string> kinds = SourceKinds();
  EXPECT_EQ(kinds, (std::vector<std::string>{"folder", "pack", "hdf5", "tar", "tfrecord", "npy"}));
  for (const auto& [kind, path] : std::vector<std::pair<std::string, std::string>>{
           {"folder", dir / "folder"}, {"pack", dir / "pack"}, {"tar", dir / "one.tar"}}) {
    SourceOptions options;
    options.kind = kind;
    EXPECT_EQ(OpenSource(Env::Default(), path, options, scan)->kind(), kind);
  }
  // Named, a kind is opened as that class even where the path says otherwise: an image folder is no tar.
  SourceOptions as_tar;
  as_tar.kind = "tar";
  EXPECT_THROW(OpenSource(Env::Default(), dir / "folder", as_tar, scan), Error);
}

TEST(SourceTest, EachOptionKeySetsItsField) {
  for (const std::string& key : SourceOptionNames()) {
    SourceOptions options;
    const std::string value = key == "npy_as" ? "bytes" : "v-" + key;
    SetSourceOption(&options, key, value);
    const std::vector<std::string> fields = {
        options.hdf5_samples,    options.hdf5_labels,          options.tar_sample_ext,  options.tar_label_ext,
        options.tfrecord_label,  options.tfrecord_labels_file, options.tfrecord_sample, options.tfrecord_index,
        options.npy_as,          options.npz_member,           options.npz_label_member};
    EXPECT_EQ(std::count(fields.begin(), fields.end(), value), 1) << key;
  }
  EXPECT_EQ(SourceOptionNames().size(), 11u);
  SourceOptions options;
  try {
    SetSourceOption(&options, "hdf5_sample", "x");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown source option 'hdf5_sample': the options are hdf5_samples, "),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(SetSourceOption(&options, "npy_as", "list"), InvalidArgumentError);
}

TEST(SourceTest, ReadInPiecesReadsTheSameBytesAsOneRead) {
  TempDir dir;
  std::string data(3 * (1 << 20) + 12345, '\0');
  Rng rng(3);
  for (char& c : data) c = static_cast<char>(rng.Uniform(256));
  testing::WriteFile(dir / "big", data);
  ThrottledEnv env(Env::Default(), {});
  auto file = env.OpenForRead(dir / "big");
  std::string got(data.size() - 100, '\0');
  ReadInPieces(file.get(), 100, static_cast<int64_t>(got.size()), reinterpret_cast<uint8_t*>(got.data()));
  EXPECT_EQ(got, data.substr(100));
  EXPECT_EQ(env.reads(), 6);  // six pieces of at least 512 KiB, at once
  std::string small(1000, '\0');
  ReadInPieces(file.get(), 0, 1000, reinterpret_cast<uint8_t*>(small.data()));
  EXPECT_EQ(small, data.substr(0, 1000));
  EXPECT_EQ(env.reads(), 7);
  EXPECT_THROW(ReadInPieces(file.get(), static_cast<int64_t>(data.size()) - 10, 3 << 20,
                            reinterpret_cast<uint8_t*>(got.data())), Error);
}

TEST(SourceTest, ImageFolderSourceIsTheScan) {
  TempDir dir;
  testing::WriteFile(dir / "b/x.jpg", "xx");
  testing::WriteFile(dir / "a/sub/y.png", "yyy");
  testing::WriteFile(dir / "a/z.JPG", "z");
  ScanOptions scan;
  scan.use_cache = false;
  ImageFolderSource source(Env::Default(), dir.path(), scan);
  const ImageFolderIndex scanned = ScanImageFolder(Env::Default(), dir.path(), scan);
  EXPECT_EQ(source.names(), scanned.relpaths);
  EXPECT_EQ(source.labels(), scanned.labels);
  EXPECT_EQ(source.classes(), scanned.classes);
  EXPECT_EQ(source.sizes(), scanned.sizes);
  for (int64_t i = 0; i < source.size(); ++i) {
    const SampleBuffer b = source.Read(i);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data.get()), b.size), Env::Default()->ReadWholeFile(scanned.Path(i)));
  }
  EXPECT_EQ(source.files_opened(), 3);  // one per sample read
  EXPECT_NE(source.Fingerprint(), 0u);
}

}  // namespace
}  // namespace hdmlp
