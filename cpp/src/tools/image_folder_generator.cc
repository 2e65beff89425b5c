#include "hdmlp/tools/image_folder_generator.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "hdmlp/env/env.h"
#include "hdmlp/errors.h"
#include "hdmlp/util/parallel_for.h"
#include "hdmlp/util/random.h"

namespace hdmlp {

const char kGeneratedManifestName[] = ".hdmlp_generated";

namespace {

namespace fs = std::filesystem;

// Bump whenever a change to this file changes the pixels or bytes produced,
// so existing folders are regenerated instead of silently mixing versions.
constexpr int kGeneratorVersion = 1;
constexpr char kManifestMagic[] = "hdmlp-generated-image-folder";
constexpr char kLockName[] = ".hdmlp_generated.lock";
constexpr char kDefaultPhotosDir[] = "/usr/share/doc/opencv-doc/examples/data";
constexpr int kClassStride = 1117;
constexpr int kMinPhotoSide = 200;
constexpr int kMaxSide = 8192;  // beyond this a "demo" image is surely a typo

// Grain amplitude, in 8-bit levels, drawn per image in [kNoiseLow,
// kNoiseHigh]. The sample photos are smooth (a third are calibration
// chessboards) and compress to about 32 KB at these sizes; ImageNet's train
// set averages about 110 KB, and a loader's I/O and decode costs follow file
// size, so the grain is as strong as it takes to reach about 100 KB on
// average with the default spec (measured: 98.6-99.7 KB over 500 images for
// seeds 0-2, 99.2 KB over 1000). The
// spread gives the wide size distribution a loader meets in ImageNet too.
constexpr double kNoiseLow = 36.0;
constexpr double kNoiseHigh = 104.0;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// ---------------------------------------------------------------- naming

bool AllDigits(const std::string& s, size_t begin, size_t end) {
  if (begin >= end) return false;
  for (size_t i = begin; i < end; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// Only names this generator could have produced are ever deleted, so the
// pattern is strict: 'n', at least 8 digits, a multiple of kClassStride.
bool IsGeneratedClassName(const std::string& name) {
  if (name.size() < 9 || name.size() > 19 || name[0] != 'n') return false;
  if (!AllDigits(name, 1, name.size())) return false;
  return std::strtoull(name.c_str() + 1, nullptr, 10) % kClassStride == 0;
}

bool IsGeneratedFileName(const std::string& wnid, const std::string& name) {
  static const std::string kExt = ".JPEG";
  const size_t prefix = wnid.size() + 1;
  if (name.size() < prefix + 6 + kExt.size()) return false;
  if (name.compare(0, wnid.size(), wnid) != 0 || name[wnid.size()] != '_') return false;
  if (name.compare(name.size() - kExt.size(), kExt.size(), kExt) != 0) return false;
  return AllDigits(name, prefix, name.size() - kExt.size());
}

// ".<file>.tmp.<pid>": hidden and without an image extension, so a reader
// that lists the folder mid-write never picks it up.
std::string TempName(const std::string& name) {
  return "." + name + ".tmp." + std::to_string(static_cast<long long>(::getpid()));
}

bool IsTempName(const std::string& wnid, const std::string& name) {
  const size_t tmp = name.rfind(".tmp.");
  if (name.empty() || name[0] != '.' || tmp == std::string::npos) return false;
  return AllDigits(name, tmp + 5, name.size()) && IsGeneratedFileName(wnid, name.substr(1, tmp - 1));
}

// A manifest write that was interrupted.
bool IsManifestTempName(const std::string& name) {
  const std::string prefix = std::string(".") + kGeneratedManifestName + ".tmp.";
  return name.compare(0, prefix.size(), prefix) == 0 && AllDigits(name, prefix.size(), name.size());
}

// ---------------------------------------------------------------- files

// Written under a temporary name in the same folder and renamed, so the final
// name only ever holds a complete file, even if the process dies mid-write.
void WriteFileAtomically(const std::string& dir, const std::string& name, const void* data, size_t size) {
  const std::string path = JoinPath(dir, name);
  const std::string tmp = JoinPath(dir, TempName(name));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError("cannot create '" + tmp + "': " + ErrnoText(errno));
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IOError("cannot write '" + tmp + "': " + ErrnoText(err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IOError("cannot write '" + tmp + "': " + ErrnoText(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IOError("cannot rename '" + tmp + "' to '" + path + "': " + ErrnoText(err));
  }
}

// Serialises generators on one root (one per rank on a shared file system is
// the expected case). File systems without flock() (some Lustre/NFS mounts)
// get no lock rather than an error: the atomic renames still keep every
// visible file whole.
class RootLock {
 public:
  explicit RootLock(const std::string& root) {
    const std::string path = JoinPath(root, kLockName);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IOError("image folder root '" + root + "' is not writable: " + ErrnoText(errno));
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~RootLock() { ::close(fd_); }
  RootLock(const RootLock&) = delete;
  RootLock& operator=(const RootLock&) = delete;

 private:
  int fd_ = -1;
};

// ---------------------------------------------------------------- photos

// Little-endian words so the hash, and hence the photo order, is the same on
// every platform.
uint64_t HashBytes(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  uint64_t h = DeriveKey({0x70686f746fULL, static_cast<uint64_t>(n)});  // "photo"
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    for (int k = 7; k >= 0; --k) w = (w << 8) | p[i + static_cast<size_t>(k)];
    h = Mix64(h ^ w);
  }
  uint64_t w = 0;
  for (size_t k = n; k > i; --k) w = (w << 8) | p[k - 1];
  return Mix64(h ^ w);
}

struct Photo {
  std::string path;
  std::string bytes;
  uint64_t hash = 0;
  std::once_flag decoded;
  cv::Mat image;  // BGR, possibly shrunk; empty when unusable
};

// The source photos, ordered by content hash: where or in which order they
// are listed does not change the output. Decoding is lazy (a small folder
// touches few photos) and happens at most once per photo across threads.
class PhotoSet {
 public:
  PhotoSet(const std::vector<std::string>& paths, int max_side) : max_side_(max_side) {
    for (const auto& path : paths) {
      auto photo = std::make_unique<Photo>();
      photo->path = path;
      photo->bytes = Env::Default()->ReadWholeFile(path);
      photo->hash = HashBytes(photo->bytes);
      photos_.push_back(std::move(photo));
    }
    std::stable_sort(photos_.begin(), photos_.end(),
                     [](const auto& a, const auto& b) { return a->hash < b->hash; });
    uint64_t id = DeriveKey({static_cast<uint64_t>(photos_.size())});
    for (const auto& photo : photos_) id = Mix64(id ^ photo->hash);
    identity_ = id;
  }

  size_t size() const { return photos_.size(); }
  uint64_t identity() const { return identity_; }

  // A uniformly drawn usable photo. Unusable ones are rejected and redrawn,
  // which is deterministic because usability depends only on the bytes.
  const cv::Mat& Pick(Rng& rng) {
    for (;;) {
      Photo& photo = *photos_[rng.Uniform(photos_.size())];
      std::call_once(photo.decoded, [&] { Decode(photo); });
      if (!photo.image.empty()) return photo.image;
      if (unusable_.load() == photos_.size()) {
        throw InvalidArgumentError("none of the " + std::to_string(photos_.size()) +
                                   " photos given to the image folder generator decodes to an image of at least " +
                                   std::to_string(kMinPhotoSide) + "x" + std::to_string(kMinPhotoSide) +
                                   " pixels (one of them: '" + photos_.front()->path + "')");
      }
    }
  }

 private:
  void Decode(Photo& photo) {
    cv::Mat image;
    try {
      image = cv::imdecode(cv::Mat(1, static_cast<int>(photo.bytes.size()), CV_8U, photo.bytes.data()),
                           cv::IMREAD_COLOR);
    } catch (const cv::Exception&) {
      image.release();  // a corrupt photo is skipped like an undecodable one
    }
    if (image.empty() || image.cols < kMinPhotoSide || image.rows < kMinPhotoSide) {
      ++unusable_;
      return;
    }
    // Huge photos (the 3595x3723 chessboard) would only be shrunk again per
    // image; halving them once saves memory and time.
    const int keep = 2 * std::max(max_side_, 512);
    while (std::min(image.cols, image.rows) >= keep) {
      cv::Mat half;
      cv::pyrDown(image, half);
      image = half;
    }
    photo.image = image;
  }

  std::vector<std::unique_ptr<Photo>> photos_;
  std::atomic<size_t> unusable_{0};
  uint64_t identity_ = 0;
  int max_side_;
};

// ---------------------------------------------------------------- images

// RandomResizedCrop-style box with area scale in [0.25, 1] and aspect ratio
// in [3/4, 4/3]. Only sqrt (exactly rounded by IEEE 754) is used, so the box
// is the same on every libm.
cv::Rect DrawCrop(Rng& rng, int width, int height) {
  const double area = static_cast<double>(width) * height;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double scale = rng.UniformDouble(0.25, 1.0);
    const double ratio = rng.UniformDouble(3.0 / 4.0, 4.0 / 3.0);
    const int w = static_cast<int>(std::lround(std::sqrt(area * scale * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(area * scale / ratio)));
    if (w >= 1 && h >= 1 && w <= width && h <= height) {
      const int x = static_cast<int>(rng.UniformInt(0, width - w));
      const int y = static_cast<int>(rng.UniformInt(0, height - h));
      return {x, y, w, h};
    }
  }
  // Photos far from square: the central crop with the nearest allowed ratio.
  int w = width, h = height;
  if (w * 3 > h * 4) w = h * 4 / 3;
  if (h * 3 > w * 4) h = w * 4 / 3;
  return {(width - w) / 2, (height - h) / 2, w, h};
}

// Halving with pyrDown and finishing with INTER_LINEAR_EXACT keeps the
// resize in OpenCV's bit-exact integer paths, whatever SIMD the CPU has.
cv::Mat ResizeTo(const cv::Mat& crop, int width, int height) {
  cv::Mat src = crop;
  while (src.cols >= 2 * width && src.rows >= 2 * height) {
    cv::Mat half;
    cv::pyrDown(src, half);
    src = half;
  }
  if (src.cols == width && src.rows == height) return src.clone();
  cv::Mat out;
  cv::resize(src, out, cv::Size(width, height), 0, 0, cv::INTER_LINEAR_EXACT);
  return out;
}

// Colour jitter (per-channel gain, brightness, and for half the images a hue
// rotation about the grey axis) plus grain, in 12-bit fixed point.
// The hue angle comes from t = tan(angle / 2) via the rational
// parametrisation cos = (1 - t^2) / (1 + t^2), sin = 2t / (1 + t^2): no
// cos/sin, whose last bits differ between libms.
void Recolour(Rng& rng, cv::Mat& image) {
  constexpr int kShift = 12;
  constexpr double kOne = 1 << kShift;
  double gain[3];
  for (double& g : gain) g = rng.UniformDouble(0.8, 1.2);
  const double brightness = rng.UniformDouble(-20.0, 20.0);
  double rot[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  if (rng.Uniform(2) == 1) {
    const double t = rng.UniformDouble(-0.27, 0.27);  // about +-30 degrees
    const double c = (1 - t * t) / (1 + t * t);
    const double s = 2 * t / (1 + t * t);
    const double diag = c + (1 - c) / 3;
    const double plus = (1 - c) / 3 + s / std::sqrt(3.0);
    const double minus = (1 - c) / 3 - s / std::sqrt(3.0);
    const double r[3][3] = {{diag, minus, plus}, {plus, diag, minus}, {minus, plus, diag}};
    std::copy(&r[0][0], &r[0][0] + 9, &rot[0][0]);
  }
  int32_t m[3][3];
  int32_t offset[3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) m[i][j] = static_cast<int32_t>(std::lround(gain[i] * rot[i][j] * kOne));
    offset[i] = static_cast<int32_t>(std::lround(brightness * kOne)) + (1 << (kShift - 1));
  }
  const double amplitude = rng.UniformDouble(kNoiseLow, kNoiseHigh);
  const int32_t noise_scale = static_cast<int32_t>(std::lround(amplitude / 255.0 * kOne));

  // Each pixel takes one 64-bit draw: four sums of two bytes, each
  // triangular in [-255, 255] (cheaper than Gaussian, as good at defeating
  // JPEG's quantiser). The first is shared by the channels (luminance
  // grain), the others are per channel (colour grain). The draws for a row
  // are made first so the pixel loop has no serial dependency and
  // vectorises.
  std::vector<uint64_t> draws(static_cast<size_t>(image.cols));
  for (int y = 0; y < image.rows; ++y) {
    for (uint64_t& d : draws) d = rng.NextU64();
    uint8_t* px = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x) {
      const uint64_t d = draws[static_cast<size_t>(x)];
      int32_t tri[4];
      for (int k = 0; k < 4; ++k) {
        tri[k] = static_cast<int32_t>((d >> (16 * k)) & 0xff) + static_cast<int32_t>((d >> (16 * k + 8)) & 0xff) - 255;
      }
      const int32_t b = px[3 * x], g = px[3 * x + 1], r = px[3 * x + 2];
      for (int c = 0; c < 3; ++c) {
        const int32_t v = m[c][0] * b + m[c][1] * g + m[c][2] * r + offset[c] + (tri[0] + tri[c + 1]) * noise_scale;
        px[3 * x + c] = static_cast<uint8_t>(std::min(std::max(v, 0) >> kShift, 255));
      }
    }
  }
}

std::vector<uchar> EncodeImage(const ImageFolderSpec& spec, PhotoSet& photos, int index) {
  Rng rng(DeriveKey({spec.seed, static_cast<uint64_t>(index)}));
  const int width = static_cast<int>(rng.UniformInt(spec.min_side, spec.max_side));
  const int height = static_cast<int>(rng.UniformInt(spec.min_side, spec.max_side));
  const int quality = static_cast<int>(rng.UniformInt(spec.min_quality, spec.max_quality));
  const cv::Mat& photo = photos.Pick(rng);
  const cv::Rect box = DrawCrop(rng, photo.cols, photo.rows);
  cv::Mat image = ResizeTo(photo(box), width, height);
  Recolour(rng, image);
  std::vector<uchar> jpeg;
  if (!cv::imencode(".jpg", image, jpeg, {cv::IMWRITE_JPEG_QUALITY, quality})) {
    throw IOError("OpenCV could not encode image " + std::to_string(index) + " as JPEG");
  }
  return jpeg;
}

// ---------------------------------------------------------------- manifest

void Validate(const ImageFolderSpec& spec) {
  auto fail = [](const std::string& field, const std::string& why) {
    throw InvalidArgumentError("image folder spec: " + field + " " + why);
  };
  if (spec.root.empty()) fail("root", "must not be empty");
  if (spec.num_images < 1) fail("num_images", "must be >= 1, got " + std::to_string(spec.num_images));
  if (spec.num_classes < 1 || spec.num_classes > spec.num_images) {
    fail("num_classes", "must be in [1, num_images=" + std::to_string(spec.num_images) + "], got " +
                            std::to_string(spec.num_classes));
  }
  if (spec.min_side < 16 || spec.min_side > kMaxSide) {
    fail("min_side", "must be in [16, " + std::to_string(kMaxSide) + "], got " + std::to_string(spec.min_side));
  }
  if (spec.max_side < spec.min_side || spec.max_side > kMaxSide) {
    fail("max_side", "must be in [min_side=" + std::to_string(spec.min_side) + ", " + std::to_string(kMaxSide) +
                         "], got " + std::to_string(spec.max_side));
  }
  if (spec.min_quality < 1 || spec.min_quality > 100) {
    fail("min_quality", "must be in [1, 100], got " + std::to_string(spec.min_quality));
  }
  if (spec.max_quality < spec.min_quality || spec.max_quality > 100) {
    fail("max_quality", "must be in [min_quality=" + std::to_string(spec.min_quality) + ", 100], got " +
                            std::to_string(spec.max_quality));
  }
  if (spec.threads < 0) fail("threads", "must be >= 0 (0: one per core), got " + std::to_string(spec.threads));
}

// What decides each image's bytes. Files made under an equal key are reused
// even when num_images or num_classes changed, since image i does not depend
// on them (its class folder is part of its name).
std::string ContentKey(const ImageFolderSpec& spec, const PhotoSet& photos) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(photos.identity()));
  std::ostringstream out;
  out << kManifestMagic << ' ' << kGeneratorVersion << '\n'
      << "seed " << spec.seed << '\n'
      << "min_side " << spec.min_side << '\n'
      << "max_side " << spec.max_side << '\n'
      << "min_quality " << spec.min_quality << '\n'
      << "max_quality " << spec.max_quality << '\n'
      << "photos " << photos.size() << ' ' << hex << '\n';
  return out.str();
}

std::string Layout(const ImageFolderSpec& spec) {
  return "num_images " + std::to_string(spec.num_images) + "\nnum_classes " + std::to_string(spec.num_classes) +
         "\n";
}

struct Manifest {
  bool found = false;
  std::string key;     // ContentKey() text
  std::string layout;  // Layout() text
  bool complete = false;
  std::unordered_map<std::string, int64_t> sizes;
};

// Anything unreadable or malformed reads as "no manifest": the worst outcome
// is regenerating files.
Manifest ReadManifest(const std::string& root) {
  Manifest manifest;
  std::ifstream in(JoinPath(root, kGeneratedManifestName), std::ios::binary);
  if (!in) return manifest;
  std::string line;
  std::vector<std::string> head;
  while (head.size() < 10 && std::getline(in, line)) head.push_back(line);
  if (head.size() < 10 || head[0].rfind(kManifestMagic, 0) != 0) return manifest;
  for (size_t i = 0; i < 7; ++i) manifest.key += head[i] + "\n";
  manifest.layout = head[7] + "\n" + head[8] + "\n";
  if (head[9] != "state complete" && head[9] != "state writing") return manifest;
  manifest.complete = head[9] == "state complete";
  while (std::getline(in, line)) {
    const size_t space = line.rfind(' ');
    if (space == std::string::npos || !AllDigits(line, space + 1, line.size())) return Manifest{};
    manifest.sizes[line.substr(0, space)] = std::strtoll(line.c_str() + space + 1, nullptr, 10);
  }
  manifest.found = true;
  return manifest;
}

void WriteManifest(const std::string& root, const std::string& key, const std::string& layout,
                   const std::vector<std::string>* names, const std::vector<int64_t>* sizes) {
  std::string text = key + layout + (names ? "state complete\n" : "state writing\n");
  if (names) {
    for (size_t i = 0; i < names->size(); ++i) text += (*names)[i] + " " + std::to_string((*sizes)[i]) + "\n";
  }
  WriteFileAtomically(root, kGeneratedManifestName, text.data(), text.size());
}

// Which of the spec's files can be kept: made under the same content key (so
// byte-identical to what we would write) and, where the manifest lists a
// size, still that size.
struct Survey {
  bool had_manifest = false;
  bool up_to_date = false;
  std::vector<char> keep;
  std::vector<int64_t> sizes;
};

Survey TakeSurvey(const std::string& root, const std::string& key, const std::string& layout,
                  const std::vector<std::string>& names) {
  const Manifest manifest = ReadManifest(root);
  Survey survey;
  survey.keep.assign(names.size(), 0);
  survey.sizes.assign(names.size(), 0);
  survey.had_manifest = manifest.found;
  if (!manifest.found || manifest.key != key) return survey;
  bool all = true;
  for (size_t i = 0; i < names.size(); ++i) {
    struct stat st;
    const std::string path = JoinPath(root, names[i]);
    bool ok = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    if (ok) {
      const auto listed = manifest.sizes.find(names[i]);
      ok = listed == manifest.sizes.end() || listed->second == static_cast<int64_t>(st.st_size);
    }
    survey.keep[i] = ok;
    survey.sizes[i] = ok ? static_cast<int64_t>(st.st_size) : 0;
    all = all && ok;
  }
  survey.up_to_date = all && manifest.complete && manifest.layout == layout;
  return survey;
}

// Removes generated files that are not kept (stale spec) and generated class
// folders left empty. Only a folder that has a manifest can hold generated
// files (the manifest is written before the first image), so without one
// nothing but our own temporary files is touched: pointing the generator at
// a real dataset by mistake adds folders to it but never deletes from it.
void RemoveStale(const std::string& root, bool had_manifest, const std::unordered_set<std::string>& kept) {
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string wnid = it->path().filename().string();
    if (IsManifestTempName(wnid)) {
      ::unlink(it->path().c_str());
      continue;
    }
    std::error_code type_ec;
    if (!IsGeneratedClassName(wnid) || it->is_symlink(type_ec) || !it->is_directory(type_ec)) continue;
    const std::string dir = it->path().string();
    bool empty = true;
    std::error_code dir_ec;
    for (fs::directory_iterator f(dir, dir_ec), fend; !dir_ec && f != fend; f.increment(dir_ec)) {
      const std::string name = f->path().filename().string();
      const bool stale = had_manifest && IsGeneratedFileName(wnid, name) && !kept.count(wnid + "/" + name);
      if ((stale || IsTempName(wnid, name)) && !f->is_directory(type_ec)) {
        if (::unlink(f->path().c_str()) != 0 && errno != ENOENT) {
          throw IOError("cannot remove stale generated file '" + f->path().string() + "': " + ErrnoText(errno));
        }
      } else {
        empty = false;
      }
    }
    if (dir_ec) throw IOError("cannot list '" + dir + "': " + dir_ec.message());
    if (empty) ::rmdir(dir.c_str());  // a failure only leaves an empty folder
  }
  if (ec) throw IOError("cannot list image folder root '" + root + "': " + ec.message());
}

void PrepareRoot(const std::string& root) {
  std::error_code ec;
  const fs::file_status status = fs::status(root, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    throw NotADirectoryError("image folder root '" + root + "' exists and is not a directory");
  }
  fs::create_directories(root, ec);
  if (ec) throw IOError("cannot create image folder root '" + root + "': " + ec.message());
}

}  // namespace

std::string GeneratedClassName(int class_index) {
  char name[32];
  std::snprintf(name, sizeof(name), "n%08lld", static_cast<long long>(class_index) * kClassStride);
  return name;
}

std::string GeneratedRelativePath(int image_index, int num_classes) {
  const std::string wnid = GeneratedClassName(image_index % num_classes);
  char file[32];
  std::snprintf(file, sizeof(file), "_%06d.JPEG", image_index);
  return wnid + "/" + wnid + file;
}

std::vector<std::string> FindDefaultPhotos() {
  const char* env = std::getenv("HDMLP_PHOTOS_DIR");
  const std::string dir = env && *env ? env : kDefaultPhotosDir;
  std::vector<std::string> photos;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    std::error_code type_ec;
    if ((ext == ".jpg" || ext == ".jpeg" || ext == ".png") && it->is_regular_file(type_ec)) {
      photos.push_back(it->path().string());
    }
  }
  if (photos.empty()) {
    throw NotFoundError("no photos (*.jpg, *.jpeg, *.png) found in '" + dir +
                        "' to generate images from: install Debian's opencv-doc (apt-get install opencv-doc) "
                        "or set HDMLP_PHOTOS_DIR to a directory of photos");
  }
  std::sort(photos.begin(), photos.end());
  return photos;
}

GeneratedFolder GenerateImageFolder(const ImageFolderSpec& spec) {
  Validate(spec);
  PhotoSet photos(spec.photos.empty() ? FindDefaultPhotos() : spec.photos, spec.max_side);
  const std::string key = ContentKey(spec, photos);
  const std::string layout = Layout(spec);
  std::vector<std::string> names(static_cast<size_t>(spec.num_images));
  for (int i = 0; i < spec.num_images; ++i) names[static_cast<size_t>(i)] = GeneratedRelativePath(i, spec.num_classes);

  GeneratedFolder result;
  auto finish = [&](const Survey& survey) {
    for (size_t i = 0; i < names.size(); ++i) result.total_bytes += survey.sizes[i];
    return result;
  };

  // Fast path without the lock, so a complete folder on a read-only mount
  // works too.
  Survey survey = TakeSurvey(spec.root, key, layout, names);
  if (survey.up_to_date) {
    result.files_kept = spec.num_images;
    return finish(survey);
  }

  PrepareRoot(spec.root);
  RootLock lock(spec.root);
  survey = TakeSurvey(spec.root, key, layout, names);  // another process may have finished it
  if (survey.up_to_date) {
    result.files_kept = spec.num_images;
    return finish(survey);
  }

  // Order matters for crash safety: stale files go before the manifest names
  // the new key, so every generated file present is always valid for the key
  // in the manifest.
  std::unordered_set<std::string> kept;
  std::vector<int> todo;
  for (size_t i = 0; i < names.size(); ++i) {
    if (survey.keep[i]) {
      kept.insert(names[i]);
    } else {
      todo.push_back(static_cast<int>(i));
    }
  }
  RemoveStale(spec.root, survey.had_manifest, kept);
  WriteManifest(spec.root, key, layout, nullptr, nullptr);
  for (int c = 0; c < spec.num_classes; ++c) {
    const std::string dir = JoinPath(spec.root, GeneratedClassName(c));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      throw IOError("cannot create class folder '" + dir + "': " + ErrnoText(errno));
    }
  }

  int threads = spec.threads;
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ParallelFor(static_cast<int64_t>(todo.size()), threads, [&](int64_t t) {
    const int index = todo[static_cast<size_t>(t)];
    const std::vector<uchar> jpeg = EncodeImage(spec, photos, index);
    const std::string& name = names[static_cast<size_t>(index)];
    const size_t slash = name.find('/');
    WriteFileAtomically(JoinPath(spec.root, name.substr(0, slash)), name.substr(slash + 1), jpeg.data(),
                        jpeg.size());
    survey.sizes[static_cast<size_t>(index)] = static_cast<int64_t>(jpeg.size());
  });

  WriteManifest(spec.root, key, layout, &names, &survey.sizes);
  result.files_written = static_cast<int64_t>(todo.size());
  result.files_kept = spec.num_images - result.files_written;
  return finish(survey);
}

}  // namespace hdmlp
