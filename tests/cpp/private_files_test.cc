// Private cache folders and files (issue 40): a filesystem storage class on a
// scratch disk several users share keeps its samples from the others and
// cannot be steered by what they plant. Folders are 0700 and files 0600
// whatever the umask; nothing found at a new folder's or file's path (a
// folder, a symbolic link) is reused, followed or written through; the sweep
// of stale folders leaves other users' folders and planted links alone.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hdmlp/cache/storage_class.h"
#include "hdmlp/env/env.h"
#include "hdmlp/errors.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using testing::TempDir;
using testing::WriteFile;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

int ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return static_cast<int>(st.st_mode & 07777);
}

std::string Contents(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Sets the umask for one test and puts the old one back.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST(PrivateFilesTest, WrittenFilesAreTheUsersAloneWhateverTheUmask) {
  TempDir dir;
  for (const mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0777}}) {
    Umask umask(mask);
    const std::string path = dir / ("f" + std::to_string(mask));
    Env::Default()->WriteFileAtomic(path, "abc", 3);
    EXPECT_EQ(ModeOf(path), 0600) << "umask " << mask;
    EXPECT_EQ(Contents(path), "abc");
  }
  // No temporary file is left beside them.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(Contains(e.path().filename().string(), ".tmp.")) << e.path();
  }
}

TEST(PrivateFilesTest, AWriteReplacesASymbolicLinkAtItsPathNeverItsTarget) {
  TempDir dir;
  const std::string victim = dir / "victim";
  WriteFile(victim, "someone else's");
  const std::string path = dir / "7.bin";
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  Env::Default()->WriteFileAtomic(path, "sample", 6);
  EXPECT_EQ(Contents(victim), "someone else's");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(path)));
  EXPECT_EQ(Contents(path), "sample");
  EXPECT_EQ(ModeOf(path), 0600);
}

TEST(PrivateFilesTest, APrivateFolderIsMode0700AndNeverReused) {
  TempDir dir;
  {
    Umask umask(0);
    Env::Default()->CreatePrivateDir(dir / "job");
  }
  EXPECT_EQ(ModeOf(dir / "job"), 0700);
  const std::string other = dir / "other";
  std::filesystem::create_directory(other);
  ASSERT_EQ(::symlink(other.c_str(), (dir / "link").c_str()), 0);
  WriteFile(dir / "file", "x");
  for (const auto& [name, what] : {std::pair<std::string, std::string>{"job", "a directory"},
                                   {"link", "a symbolic link"},
                                   {"file", "a regular file"}}) {
    try {
      Env::Default()->CreatePrivateDir(dir / name);
      ADD_FAILURE() << name << " was reused";
    } catch (const IOError& e) {
      EXPECT_TRUE(Contains(e.what(), dir / name)) << e.what();
      EXPECT_TRUE(Contains(e.what(), what + " is already there")) << e.what();
    }
  }
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link"));
  EXPECT_TRUE(std::filesystem::is_empty(other));
}

TEST(PrivateFilesTest, ARenameNeverReplacesAFolderOrALink) {
  TempDir dir;
  std::filesystem::create_directory(dir / "a");
  std::filesystem::create_directory(dir / "planted");  // empty: rename(2) alone would replace it
  ASSERT_EQ(::symlink("planted", (dir / "link").c_str()), 0);
  for (const char* to : {"planted", "link"}) {
    EXPECT_THROW(Env::Default()->RenameNoReplace(dir / "a", dir / to), IOError) << to;
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir / "a"));
  Env::Default()->RenameNoReplace(dir / "a", dir / "b");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "b"));
}

// Plants a folder or a symbolic link at the path the class is about to take,
// as another user racing the job would (the real names are not guessable).
class PlantingEnv : public ThrottledEnv {
 public:
  enum class What { kFolderAtNewFolder, kLinkAtNewFolder, kFolderAtJobFolder, kLinkAtJobFolder };
  PlantingEnv(What what, std::string victim) : ThrottledEnv(Env::Default(), {}), what_(what), victim_(std::move(victim)) {}

  void CreatePrivateDir(const std::string& path) override {
    Plant(path, what_ == What::kFolderAtNewFolder, what_ == What::kLinkAtNewFolder);
    ThrottledEnv::CreatePrivateDir(path);
  }
  void RenameNoReplace(const std::string& from, const std::string& to) override {
    Plant(to, what_ == What::kFolderAtJobFolder, what_ == What::kLinkAtJobFolder);
    ThrottledEnv::RenameNoReplace(from, to);
  }
  std::string planted;

 private:
  void Plant(const std::string& path, bool folder, bool link) {
    if (folder) std::filesystem::create_directory(path);
    if (link) std::filesystem::create_directory_symlink(victim_, path);
    if (folder || link) planted = path;
  }
  What what_;
  std::string victim_;
};

TEST(PrivateFilesTest, AFolderOrLinkPlantedAtTheJobsPathIsRefusedNotUsed) {
  using What = PlantingEnv::What;
  for (const What what : {What::kFolderAtNewFolder, What::kLinkAtNewFolder, What::kFolderAtJobFolder,
                          What::kLinkAtJobFolder}) {
    TempDir dir;
    const std::string victim = dir / "victim";
    std::filesystem::create_directory(victim);
    PlantingEnv env(what, victim);
    try {
      auto cls = MakeFilesystemClass(&env, "ssd", dir / "disk");
      ADD_FAILURE() << "the class used what was planted at " << env.planted;
    } catch (const IOError& e) {
      EXPECT_TRUE(Contains(e.what(), "storage class 'ssd'")) << e.what();
      EXPECT_TRUE(Contains(e.what(), env.planted)) << e.what();
      EXPECT_TRUE(Contains(e.what(), "is already there")) << e.what();
    }
    EXPECT_TRUE(std::filesystem::is_empty(victim)) << "something was written through the planted path";
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(env.planted))) << "the planted path was removed";
    // What the class made itself is gone: only the planted path is left.
    int left = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir / "disk")) {
      EXPECT_EQ(e.path().string(), env.planted);
      ++left;
    }
    EXPECT_EQ(left, 1);
  }
}

TEST(PrivateFilesTest, TheJobsFolderIs0700AndItsCachedSamples0600WhateverTheUmask) {
  TempDir dir;
  Umask umask(0);
  auto cls = MakeFilesystemClass(Env::Default(), "ssd", dir / "disk");
  const std::string folder = FilesystemClassFolder(*cls);
  EXPECT_EQ(ModeOf(folder), 0700);
  const std::string payload = "pixels";
  ASSERT_TRUE(cls->Store(0, 42, reinterpret_cast<const uint8_t*>(payload.data()), 6));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    EXPECT_EQ(ModeOf(e.path().string()), 0600) << e.path();
    ++files;
  }
  EXPECT_EQ(files, 2);  // the sample and the lock
}

TEST(PrivateFilesTest, TheSweepLeavesOtherUsersFoldersAndPlantedLinksAlone) {
  TempDir dir;
  const std::string disk = dir / "disk";
  const std::string mine = disk + "/hdmlp-job-host-1-00000001";  // stale, this user's: removed
  const std::string theirs = disk + "/hdmlp-job-host-2-00000002";
  const std::string target = dir / "target";
  for (const auto& f : {mine, theirs, target}) {
    WriteFile(f + "/1.bin", "x");
    WriteFile(f + "/.lock", "");
  }
  std::filesystem::create_directory_symlink(target, disk + "/hdmlp-job-host-3-00000003");
  const bool root = ::geteuid() == 0;
  if (root) {  // another user's stale folder: nobody holds its lock, but it is not ours to remove
    for (const auto& f : {theirs, theirs + "/1.bin", theirs + "/.lock"}) ASSERT_EQ(::chown(f.c_str(), 65534, 65534), 0);
  }
  auto cls = MakeFilesystemClass(Env::Default(), "ssd", disk);
  EXPECT_FALSE(std::filesystem::exists(mine));
  EXPECT_TRUE(std::filesystem::exists(target + "/1.bin")) << "the sweep followed a planted link";
  EXPECT_TRUE(std::filesystem::is_symlink(disk + "/hdmlp-job-host-3-00000003"));
  if (root) {
    EXPECT_TRUE(std::filesystem::exists(theirs + "/1.bin")) << "the sweep removed another user's folder";
  } else {
    std::cout << "[ note ] not root: another user's folder is tested in tests/python/test_cache_privacy.py\n";
  }
}

}  // namespace
}  // namespace hdmlp
