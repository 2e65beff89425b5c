#include "hdmlp/tools/image_folder_generator.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

namespace fs = std::filesystem;

std::string PhotosDir() {
  const char* env = std::getenv("HDMLP_TEST_PHOTOS");
  return env && *env ? env : "/usr/share/doc/opencv-doc/examples/data";
}

std::vector<std::string> ListPhotos() {
  std::vector<std::string> photos;
  std::error_code ec;
  for (fs::directory_iterator it(PhotosDir(), ec), end; !ec && it != end; it.increment(ec)) {
    std::string ext = it->path().extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".jpg" || ext == ".jpeg" || ext == ".png") photos.push_back(it->path().string());
  }
  std::sort(photos.begin(), photos.end());
  return photos;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every regular file under root, relative path -> bytes; hidden entries in
// root (manifest, lock) are left out, as ImageFolder leaves them out.
std::map<std::string, std::string> ReadTree(const std::string& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = fs::relative(entry.path(), root).string();
    if (rel[0] == '.') continue;
    files[rel] = ReadFile(entry.path().string());
  }
  return files;
}

class ImageFolderGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    photos_ = ListPhotos();
    if (photos_.empty()) GTEST_SKIP() << "no photos in " << PhotosDir() << " (apt-get install opencv-doc)";
    std::string pattern = (fs::path(::testing::TempDir()) / "hdmlp_gen_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    tmp_ = pattern;
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // Small images keep the tests fast; the size band test uses the defaults.
  ImageFolderSpec Small(const std::string& name, int num_images, int num_classes, uint64_t seed = 1) {
    ImageFolderSpec spec;
    spec.root = tmp_ + "/" + name;
    spec.num_images = num_images;
    spec.num_classes = num_classes;
    spec.seed = seed;
    spec.min_side = 48;
    spec.max_side = 96;
    spec.photos = photos_;
    spec.threads = 2;
    return spec;
  }

  std::vector<std::string> photos_;
  std::string tmp_;
};

TEST_F(ImageFolderGeneratorTest, NamesLookLikeImageNet) {
  EXPECT_EQ(GeneratedClassName(0), "n00000000");
  EXPECT_EQ(GeneratedClassName(3), "n00003351");
  EXPECT_EQ(GeneratedRelativePath(7, 3), "n00001117/n00001117_000007.JPEG");
  EXPECT_EQ(GeneratedRelativePath(1234567, 1), "n00000000/n00000000_1234567.JPEG");
}

TEST_F(ImageFolderGeneratorTest, LayoutAndCounts) {
  const ImageFolderSpec spec = Small("layout", 23, 5);
  const GeneratedFolder result = GenerateImageFolder(spec);
  EXPECT_EQ(result.files_written, 23);
  EXPECT_EQ(result.files_kept, 0);

  std::vector<std::string> dirs;
  for (const auto& entry : fs::directory_iterator(spec.root)) {
    const std::string name = entry.path().filename().string();
    if (name[0] == '.') {
      EXPECT_TRUE(entry.is_regular_file()) << name;  // manifest and lock: files, not classes
      continue;
    }
    ASSERT_TRUE(entry.is_directory()) << name;
    dirs.push_back(name);
  }
  std::sort(dirs.begin(), dirs.end());
  EXPECT_EQ(dirs, (std::vector<std::string>{"n00000000", "n00001117", "n00002234", "n00003351", "n00004468"}));
  EXPECT_TRUE(fs::is_regular_file(spec.root + "/" + kGeneratedManifestName));

  const auto files = ReadTree(spec.root);
  ASSERT_EQ(files.size(), 23u);
  int64_t total = 0;
  for (int i = 0; i < spec.num_images; ++i) {
    const std::string rel = GeneratedRelativePath(i, spec.num_classes);
    ASSERT_TRUE(files.count(rel)) << rel;
    const std::string& bytes = files.at(rel);
    total += static_cast<int64_t>(bytes.size());
    const cv::Mat image = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8U,
                                               const_cast<char*>(bytes.data())),
                                       cv::IMREAD_COLOR);
    ASSERT_FALSE(image.empty()) << rel;
    EXPECT_GE(image.cols, spec.min_side);
    EXPECT_LE(image.cols, spec.max_side);
    EXPECT_GE(image.rows, spec.min_side);
    EXPECT_LE(image.rows, spec.max_side);
  }
  EXPECT_EQ(result.total_bytes, total);
  // Round-robin: 23 over 5 classes gives 5,5,5,4,4.
  int in_last_class = 0;
  for (const auto& [rel, bytes] : files) in_last_class += rel.rfind("n00004468/", 0) == 0;
  EXPECT_EQ(in_last_class, 4);
}

TEST_F(ImageFolderGeneratorTest, SameSeedSameBytesWhateverTheThreadsAndPhotoOrder) {
  ImageFolderSpec one = Small("one", 30, 3);
  one.threads = 1;
  ImageFolderSpec three = Small("three", 30, 3);
  three.threads = 3;
  std::reverse(three.photos.begin(), three.photos.end());
  GenerateImageFolder(one);
  GenerateImageFolder(three);
  const auto a = ReadTree(one.root);
  EXPECT_EQ(a.size(), 30u);
  EXPECT_TRUE(a == ReadTree(three.root));

  ImageFolderSpec other = Small("other", 30, 3, /*seed=*/2);
  GenerateImageFolder(other);
  const auto b = ReadTree(other.root);
  ASSERT_EQ(b.size(), a.size());
  for (const auto& [rel, bytes] : a) EXPECT_NE(bytes, b.at(rel)) << rel;
}

TEST_F(ImageFolderGeneratorTest, AverageSizeIsImageNetLike) {
  ImageFolderSpec spec;  // the defaults, as `hdmlp demo` uses them
  spec.root = tmp_ + "/band";
  spec.num_images = 200;
  spec.photos = photos_;
  const auto start = std::chrono::steady_clock::now();
  const GeneratedFolder result = GenerateImageFolder(spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double average_kb = static_cast<double>(result.total_bytes) / spec.num_images / 1024.0;
  std::cout << "[          ] average " << average_kb << " KB, " << spec.num_images / seconds << " images/s\n";
  EXPECT_GE(average_kb, 90.0);
  EXPECT_LE(average_kb, 110.0);
}

TEST_F(ImageFolderGeneratorTest, SecondCallWritesNothingAndMissingFilesComeBack) {
  const ImageFolderSpec spec = Small("idem", 40, 4);
  const GeneratedFolder first = GenerateImageFolder(spec);
  EXPECT_EQ(first.files_written, 40);
  const auto before = ReadTree(spec.root);

  const GeneratedFolder second = GenerateImageFolder(spec);
  EXPECT_EQ(second.files_written, 0);
  EXPECT_EQ(second.files_kept, 40);
  EXPECT_EQ(second.total_bytes, first.total_bytes);

  const std::string victim = GeneratedRelativePath(17, 4);
  ASSERT_TRUE(fs::remove(spec.root + "/" + victim));
  const GeneratedFolder third = GenerateImageFolder(spec);
  EXPECT_EQ(third.files_written, 1);
  EXPECT_EQ(third.files_kept, 39);
  EXPECT_EQ(third.total_bytes, first.total_bytes);
  EXPECT_TRUE(ReadTree(spec.root) == before);
}

TEST_F(ImageFolderGeneratorTest, ChangedSpecKeepsWhatIsStillValidAndRemovesTheRest) {
  ImageFolderSpec spec = Small("change", 20, 4);
  GenerateImageFolder(spec);
  const std::string user_file = spec.root + "/n00000000/notes.txt";
  std::ofstream(user_file) << "mine";
  fs::create_directory(spec.root + "/n01440764");  // a real wnid: not ours

  // Fewer classes: images whose class folder did not change are kept.
  spec.num_images = 10;
  spec.num_classes = 2;
  const GeneratedFolder shrunk = GenerateImageFolder(spec);
  EXPECT_EQ(shrunk.files_kept, 6);  // i % 4 == i % 2: 0, 1, 4, 5, 8, 9
  EXPECT_EQ(shrunk.files_written + shrunk.files_kept, 10);

  ImageFolderSpec fresh = spec;
  fresh.root = tmp_ + "/fresh";
  GenerateImageFolder(fresh);
  auto tree = ReadTree(spec.root);
  EXPECT_EQ(tree.erase("n00000000/notes.txt"), 1u);
  EXPECT_TRUE(tree == ReadTree(fresh.root));
  EXPECT_FALSE(fs::exists(spec.root + "/n00002234"));
  EXPECT_FALSE(fs::exists(spec.root + "/n00003351"));
  EXPECT_TRUE(fs::exists(spec.root + "/n01440764"));

  // Growing keeps every existing image: image i does not depend on num_images.
  spec.num_images = 25;
  const GeneratedFolder grown = GenerateImageFolder(spec);
  EXPECT_EQ(grown.files_kept, 10);
  EXPECT_EQ(grown.files_written, 15);

  // A new seed rewrites everything.
  spec.seed = 99;
  const GeneratedFolder reseeded = GenerateImageFolder(spec);
  EXPECT_EQ(reseeded.files_written, 25);
  EXPECT_EQ(reseeded.files_kept, 0);
  EXPECT_TRUE(fs::exists(user_file));
}

TEST_F(ImageFolderGeneratorTest, WithoutManifestNothingIsDeleted) {
  const ImageFolderSpec spec = Small("foreign", 6, 2);
  // Looks generated, but no manifest vouches for it: it may be someone's data.
  fs::create_directories(spec.root + "/n00000000");
  const std::string theirs = spec.root + "/n00000000/n00000000_999999.JPEG";
  std::ofstream(theirs) << "not ours";
  const std::string temp = spec.root + "/n00000000/.n00000000_000000.JPEG.tmp.12345";
  std::ofstream(temp) << "interrupted";
  const std::string manifest_temp = spec.root + "/..hdmlp_generated.tmp.12345";
  std::ofstream(manifest_temp) << "interrupted";

  const GeneratedFolder result = GenerateImageFolder(spec);
  EXPECT_EQ(result.files_written, 6);
  EXPECT_TRUE(fs::exists(theirs));
  EXPECT_FALSE(fs::exists(temp));  // our own leftovers do go
  EXPECT_FALSE(fs::exists(manifest_temp));
}

TEST_F(ImageFolderGeneratorTest, LostManifestRegeneratesIdenticalFiles) {
  const ImageFolderSpec spec = Small("lost", 12, 3);
  GenerateImageFolder(spec);
  const auto before = ReadTree(spec.root);
  fs::remove(spec.root + "/" + kGeneratedManifestName);
  const GeneratedFolder again = GenerateImageFolder(spec);
  EXPECT_EQ(again.files_written, 12);
  EXPECT_TRUE(ReadTree(spec.root) == before);
  EXPECT_EQ(GenerateImageFolder(spec).files_written, 0);
}

TEST_F(ImageFolderGeneratorTest, ConcurrentCallsOnOneRootAgree) {
  const ImageFolderSpec spec = Small("concurrent", 24, 4);
  GeneratedFolder a, b;
  std::thread other([&] { a = GenerateImageFolder(spec); });
  b = GenerateImageFolder(spec);
  other.join();
  EXPECT_EQ(a.files_written + b.files_written, 24);
  EXPECT_EQ(a.total_bytes, b.total_bytes);
  EXPECT_EQ(ReadTree(spec.root).size(), 24u);
}

template <typename Error>
void ExpectError(const ImageFolderSpec& spec, const std::string& words) {
  try {
    GenerateImageFolder(spec);
    ADD_FAILURE() << "no error; expected one naming " << words;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST_F(ImageFolderGeneratorTest, BadSpecsThrow) {
  auto with = [&](auto change) {
    ImageFolderSpec spec = Small("bad", 10, 2);
    change(spec);
    return spec;
  };
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.num_images = 0; }), "num_images");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.num_classes = 0; }), "num_classes");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.num_classes = 11; }), "num_classes");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.min_side = 15; }), "min_side");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.max_side = 40; }), "max_side");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.min_quality = 0; }), "min_quality");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.max_quality = 101; }), "max_quality");
  ExpectError<InvalidArgumentError>(with([](auto& s) {
                                      s.min_quality = 90;
                                      s.max_quality = 80;
                                    }), "max_quality");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.threads = -1; }), "threads");
  ExpectError<InvalidArgumentError>(with([](auto& s) { s.root.clear(); }), "root");
  ExpectError<NotFoundError>(with([&](auto& s) { s.photos = {tmp_ + "/missing.jpg"}; }), "missing.jpg");
  EXPECT_FALSE(fs::exists(tmp_ + "/bad"));  // validation happens before anything is written

  ExpectError<IOError>(with([](auto& s) { s.root = "/proc/hdmlp-cannot-exist/data"; }),
                       "/proc/hdmlp-cannot-exist/data");
  std::ofstream(tmp_ + "/plain_file") << "x";
  ExpectError<NotADirectoryError>(with([&](auto& s) { s.root = tmp_ + "/plain_file"; }), "plain_file");

  const std::string tiny = tmp_ + "/tiny.png";
  ASSERT_TRUE(cv::imwrite(tiny, cv::Mat(100, 300, CV_8UC3, cv::Scalar(10, 20, 30))));
  const std::string junk = tmp_ + "/junk.jpg";
  std::ofstream(junk) << "not a jpeg";
  ExpectError<InvalidArgumentError>(with([&](auto& s) { s.photos = {tiny, junk}; }), "200x200");
}

TEST_F(ImageFolderGeneratorTest, UnusablePhotosAreSkipped) {
  const std::string tiny = tmp_ + "/tiny.png";
  ASSERT_TRUE(cv::imwrite(tiny, cv::Mat(100, 300, CV_8UC3, cv::Scalar(10, 20, 30))));
  ImageFolderSpec spec = Small("skip", 20, 2);
  spec.photos = {tiny, photos_.front()};
  EXPECT_EQ(GenerateImageFolder(spec).files_written, 20);
}

TEST_F(ImageFolderGeneratorTest, DefaultPhotosHonourTheEnvironment) {
  const char* old = std::getenv("HDMLP_PHOTOS_DIR");
  const std::string saved = old ? old : "";
  fs::create_directories(tmp_ + "/empty");
  ::setenv("HDMLP_PHOTOS_DIR", (tmp_ + "/empty").c_str(), 1);
  try {
    FindDefaultPhotos();
    ADD_FAILURE() << "an empty photo directory should throw";
  } catch (const NotFoundError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("opencv-doc"), std::string::npos) << what;
    EXPECT_NE(what.find("HDMLP_PHOTOS_DIR"), std::string::npos) << what;
  }
  ::setenv("HDMLP_PHOTOS_DIR", PhotosDir().c_str(), 1);
  EXPECT_EQ(FindDefaultPhotos().size(), photos_.size());
  if (old) {
    ::setenv("HDMLP_PHOTOS_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("HDMLP_PHOTOS_DIR");
  }
}

}  // namespace
}  // namespace hdmlp
