#include <gtest/gtest.h>

#include "hdmlp/env/env.h"
#include "hdmlp/errors.h"
#include "hdmlp/source/image_folder.h"
#include "hdmlp/source/index_cache.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using testing::AgeTree;
using testing::TempDir;
using testing::WriteFile;

// torchvision's rules: classes are sorted sub-folders; within a class the
// walk is sorted by directory path string, then by file name; extensions
// are matched case-insensitively; other files are ignored.
TEST(ImageFolderTest, OrderAndFilterMatchTorchvision) {
  TempDir dir;
  const std::string root = dir / "data";
  WriteFile(root + "/b/2.jpg", "b2");
  WriteFile(root + "/b/10.JPG", "b10");
  WriteFile(root + "/b/notes.txt", "ignored");
  WriteFile(root + "/a/x.png", "ax");
  WriteFile(root + "/a/sub/y.jpeg", "asuby");
  WriteFile(root + "/a/sub b/z.webp", "asubbz");
  WriteFile(root + "/a/sub/deeper/w.tif", "deep");  // "a/sub b" < "a/sub/deeper" byte-wise
  WriteFile(root + "/a/A.bmp", "aA");
  WriteFile(root + "/README.jpg", "not a class");  // files in root are not classes
  ScanOptions options;
  options.use_cache = false;
  ImageFolderIndex index = ScanImageFolder(Env::Default(), root, options);
  EXPECT_EQ(index.classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(index.relpaths, (std::vector<std::string>{"a/A.bmp", "a/x.png", "a/sub/y.jpeg", "a/sub b/z.webp",
                                                      "a/sub/deeper/w.tif", "b/10.JPG", "b/2.jpg"}));
  EXPECT_EQ(index.labels, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(index.sizes[0], 2);
  EXPECT_EQ(index.Path(0), root + "/a/A.bmp");
}

TEST(ImageFolderTest, BadFolders) {
  TempDir dir;
  ScanOptions options;
  options.use_cache = false;
  EXPECT_THROW(ScanImageFolder(Env::Default(), dir / "missing", options), NotFoundError);
  WriteFile(dir / "file", "x");
  EXPECT_THROW(ScanImageFolder(Env::Default(), dir / "file", options), NotADirectoryError);
  std::filesystem::create_directories(dir / "empty");
  EXPECT_THROW(ScanImageFolder(Env::Default(), dir / "empty", options), NotFoundError);
  WriteFile(dir / "oneempty/a/1.jpg", "x");
  std::filesystem::create_directories(dir / "oneempty/b");
  try {
    ScanImageFolder(Env::Default(), dir / "oneempty", options);
    FAIL() << "expected an error";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
}

TEST(ImageFolderTest, IndexCacheIsUsedAndInvalidated) {
  TempDir dir;
  const std::string root = dir / "data";
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 5; ++i) WriteFile(root + "/c" + std::to_string(c) + "/" + std::to_string(i) + ".jpg", "x");
  }
  AgeTree(root);
  ScanOptions options;
  options.cache_dir = dir / "cache";
  ImageFolderIndex first = ScanImageFolder(Env::Default(), root, options);
  EXPECT_FALSE(first.from_cache);
  ImageFolderIndex second = ScanImageFolder(Env::Default(), root, options);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.relpaths, first.relpaths);
  EXPECT_EQ(second.Fingerprint(), first.Fingerprint());

  // A new file changes its folder's time: the cache entry is stale.
  WriteFile(root + "/c1/new.jpg", "y");
  ImageFolderIndex third = ScanImageFolder(Env::Default(), root, options);
  EXPECT_FALSE(third.from_cache);
  EXPECT_EQ(third.size(), 16);
  EXPECT_NE(third.Fingerprint(), first.Fingerprint());

  // A corrupt entry is ignored, never trusted.
  AgeTree(root);
  ScanImageFolder(Env::Default(), root, options);
  IndexCache cache(Env::Default(), Env::Default(), options.cache_dir);
  const std::string absolute = std::filesystem::canonical(root).string();
  WriteFile(cache.EntryPath(absolute), "HDMLPIDX garbage");
  ImageFolderIndex fourth = ScanImageFolder(Env::Default(), root, options);
  EXPECT_FALSE(fourth.from_cache);
  EXPECT_EQ(fourth.size(), 16);
}

TEST(ImageFolderTest, UnwritableCacheIsNotAnError) {
  TempDir dir;
  const std::string root = dir / "data";
  WriteFile(root + "/c/1.jpg", "x");
  AgeTree(root);
  WriteFile(dir / "blocker", "a file where the cache folder should be");
  ScanOptions options;
  options.cache_dir = dir / "blocker/cache";
  EXPECT_EQ(ScanImageFolder(Env::Default(), root, options).size(), 1);
}

}  // namespace
}  // namespace hdmlp
