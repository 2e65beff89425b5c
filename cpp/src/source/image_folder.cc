#include "hdmlp/source/image_folder.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"
#include "hdmlp/source/file_list.h"
#include "hdmlp/source/index_cache.h"
#include "hdmlp/util/parallel_for.h"
#include "hdmlp/util/random.h"

namespace hdmlp {

const std::vector<std::string> kImageExtensions = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                                   ".pgm", ".tif",  ".tiff", ".webp"};

namespace {

// os.walk(followlinks=True) follows symbolic links; a link cycle would recurse
// forever, so the walk stops at a depth no real dataset reaches.
constexpr int kMaxWalkDepth = 64;

struct WalkedDirectory {
  std::string relpath;
  int64_t mtime_ns = 0;
  std::vector<std::string> files;  // names of valid files, sorted
};

void Walk(Env* env, const std::string& root, const std::string& relpath, int depth,
          std::vector<WalkedDirectory>* out, const std::function<void()>& between_folders) {
  between_folders();
  const std::string path = JoinPath(root, relpath);
  WalkedDirectory dir;
  dir.relpath = relpath;
  dir.mtime_ns = env->Stat(path).mtime_ns;
  std::vector<std::string> subdirs;
  for (auto& entry : env->ListDir(path)) {
    if (entry.is_dir) {
      subdirs.push_back(std::move(entry.name));
    } else if (HasImageExtension(entry.name)) {
      dir.files.push_back(std::move(entry.name));
    }
  }
  std::sort(dir.files.begin(), dir.files.end());
  out->push_back(std::move(dir));
  if (depth >= kMaxWalkDepth) {
    throw InvalidArgumentError("folder '" + path + "' is nested more than " + std::to_string(kMaxWalkDepth) +
                               " levels deep; is there a symbolic link loop?");
  }
  for (const auto& sub : subdirs) Walk(env, root, relpath + "/" + sub, depth + 1, out, between_folders);
}

std::string ExtensionList() {
  std::string s;
  for (const auto& e : kImageExtensions) s += (s.empty() ? "" : ", ") + e;
  return s;
}

std::string AbsolutePath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

}  // namespace

bool HasImageExtension(const std::string& file_name) {
  const std::string lower = AsciiLower(file_name);
  for (const auto& ext : kImageExtensions) {
    if (lower.size() >= ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) return true;
  }
  return false;
}

uint64_t ImageFolderIndex::Fingerprint() const {
  uint64_t h = DeriveKey({static_cast<uint64_t>(classes.size()), static_cast<uint64_t>(relpaths.size())});
  auto add_string = [&h](const std::string& s) {
    uint64_t f = 0xcbf29ce484222325ULL;  // FNV-1a
    for (unsigned char c : s) f = (f ^ c) * 0x100000001b3ULL;
    h = Mix64(h ^ f);
  };
  for (const auto& c : classes) add_string(c);
  for (size_t i = 0; i < relpaths.size(); ++i) {
    add_string(relpaths[i]);
    h = Mix64(h ^ static_cast<uint64_t>(labels[i]) ^ (static_cast<uint64_t>(sizes[i]) << 20));
  }
  return h;
}

ImageFolderIndex ScanImageFolder(Env* env, const std::string& root, const ScanOptions& options) {
  if (root.empty()) throw NotFoundError("dataset path is empty: pass the folder that holds one sub-folder per class");
  const FileInfo info = env->Stat(root);
  if (!info.exists) throw NotFoundError("dataset folder '" + root + "' does not exist");
  if (!info.is_dir) throw NotADirectoryError("dataset path '" + root + "' is not a directory");

  const std::string absolute_root = AbsolutePath(root);
  // The cache is on local disk, not on the (possibly slow) dataset storage,
  // but the folder times it checks are the dataset's.
  IndexCache cache(options.cache_env != nullptr ? options.cache_env : Env::Default(), env,
                   options.cache_dir.empty() ? JoinPath(UserCacheDir(), "index") : options.cache_dir);
  ImageFolderIndex index;
  if (options.use_cache && cache.Load(absolute_root, &index)) {
    index.root = root;
    index.from_cache = true;
    return index;
  }

  const int64_t scan_start_ns = NowRealtimeNs();
  const int64_t root_mtime = info.mtime_ns;
  for (auto& entry : env->ListDir(root)) {
    if (entry.is_dir) index.classes.push_back(std::move(entry.name));
  }
  std::sort(index.classes.begin(), index.classes.end());
  if (index.classes.empty()) {
    throw NotFoundError("Couldn't find any class folder in '" + root +
                        "': a dataset is a folder with one sub-folder of images per class");
  }

  const int threads = options.ListingThreads();

  // Listing is I/O-bound and classes are independent: one task per class.
  // Only the calling thread polls for an interrupt (see interrupt.h).
  const auto caller = std::this_thread::get_id();
  const std::function<void()> between_folders = [&] {
    if (std::this_thread::get_id() == caller) CheckInterrupt(options.interrupt);
  };
  const auto num_classes = static_cast<int64_t>(index.classes.size());
  std::vector<std::vector<WalkedDirectory>> walked(index.classes.size());
  std::vector<std::vector<FileInfo>> class_files(index.classes.size());
  std::vector<std::vector<std::string>> not_regular(index.classes.size());
  ParallelFor(num_classes, threads, [&](int64_t c) {
    auto& dirs = walked[static_cast<size_t>(c)];
    Walk(env, root, index.classes[static_cast<size_t>(c)], 0, &dirs, between_folders);
    std::sort(dirs.begin(), dirs.end(),
              [](const WalkedDirectory& a, const WalkedDirectory& b) { return a.relpath < b.relpath; });
    auto& files = class_files[static_cast<size_t>(c)];
    for (const auto& dir : dirs) {
      for (const auto& file : dir.files) {
        const std::string path = JoinPath(root, dir.relpath + "/" + file);
        files.push_back(env->Stat(path));
        const FileKind kind = files.back().kind;
        if (kind != FileKind::kRegular && kind != FileKind::kMissing) {
          not_regular[static_cast<size_t>(c)].push_back("'" + path + "' (" + FileKindName(kind) + ")");
        }
      }
    }
    if (files.empty()) {
      throw NotFoundError("Found no valid file for the class '" + index.classes[static_cast<size_t>(c)] + "' in '" +
                          root + "'. Supported extensions are: " + ExtensionList());
    }
  });
  std::vector<std::string> refused;
  for (auto& names : not_regular) refused.insert(refused.end(), names.begin(), names.end());
  if (!refused.empty()) {
    std::string list;
    for (size_t i = 0; i < refused.size() && i < 10; ++i) list += (i == 0 ? "" : ", ") + refused[i];
    if (refused.size() > 10) list += " and " + std::to_string(refused.size() - 10) + " more";
    throw InvalidArgumentError("dataset '" + root + "' has " + std::to_string(refused.size()) +
                               " file(s) with an image extension that are not regular files: " + list +
                               "; a reader of a FIFO, socket or device may wait forever or never reach its end: "
                               "remove them or replace them by the files they stand for");
  }

  std::vector<ScannedDirectory> scanned{{"", root_mtime}};
  bool racy = root_mtime > scan_start_ns - 2'000'000'000LL;
  for (int64_t c = 0; c < num_classes; ++c) {
    size_t k = 0;
    for (const auto& dir : walked[static_cast<size_t>(c)]) {
      scanned.push_back({dir.relpath, dir.mtime_ns});
      racy = racy || dir.mtime_ns > scan_start_ns - 2'000'000'000LL;
      for (const auto& file : dir.files) {
        index.relpaths.push_back(dir.relpath + "/" + file);
        index.labels.push_back(static_cast<int32_t>(c));
        const FileInfo& info = class_files[static_cast<size_t>(c)][k++];
        index.sizes.push_back(info.size);
        index.mtimes_ns.push_back(info.mtime_ns);
      }
    }
  }
  index.root = root;
  // A folder changed in the last two seconds may change again within the
  // file system's timestamp granularity, unseen; only cache settled folders.
  if (options.use_cache && !racy) cache.Store(absolute_root, index, scanned);
  return index;
}

}  // namespace hdmlp
