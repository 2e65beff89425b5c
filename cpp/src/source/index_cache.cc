#include "hdmlp/source/index_cache.h"

#include <cstdio>
#include <cstring>

#include "hdmlp/errors.h"
#include "hdmlp/util/binary_io.h"
#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

constexpr char kMagic[8] = {'H', 'D', 'M', 'L', 'P', 'I', 'D', 'X'};
// 2: every file's modification time follows its size.
constexpr uint32_t kVersion = 2;

uint64_t ExtensionsHash() {
  std::string all;
  for (const auto& e : kImageExtensions) all += e + ";";
  return HashBytes(all.data(), all.size());
}

}  // namespace

IndexCache::IndexCache(Env* cache_env, Env* dataset_env, std::string cache_dir)
    : env_(cache_env), dataset_env_(dataset_env), cache_dir_(std::move(cache_dir)) {}

std::string IndexCache::EntryPath(const std::string& absolute_root) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.idx",
                static_cast<unsigned long long>(HashBytes(absolute_root.data(), absolute_root.size())));
  return JoinPath(cache_dir_, name);
}

bool IndexCache::Load(const std::string& absolute_root, ImageFolderIndex* index) {
  std::string data;
  try {
    data = env_->ReadWholeFile(EntryPath(absolute_root));
  } catch (const Error&) {
    return false;
  }
  const auto fresh = [&](const std::string& rel, int64_t mtime) {
    FileInfo info;
    try {
      info = dataset_env_->Stat(JoinPath(absolute_root, rel));
    } catch (const Error&) {
      return false;
    }
    return info.exists && info.is_dir && info.mtime_ns == mtime;
  };
  return Decode(data, absolute_root, fresh, index);
}

uint64_t IndexCache::Checksum(const char* data, size_t size) { return HashBytes(data, size); }

bool IndexCache::Decode(const std::string& data, const std::string& absolute_root,
                        const std::function<bool(const std::string&, int64_t)>& fresh, ImageFolderIndex* index) {
  if (data.size() < sizeof kMagic + 4 + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) return false;
  uint64_t stored_checksum;
  std::memcpy(&stored_checksum, data.data() + data.size() - 8, 8);
  if (stored_checksum != HashBytes(data.data(), data.size() - 8)) return false;

  BinaryReader r(data.data(), data.size() - 8);
  char magic[8];
  uint32_t version;
  uint64_t extensions, n;
  std::string root;
  if (!r.Raw(magic, 8) || !r.U32(&version) || version != kVersion) return false;
  if (!r.U64(&extensions) || extensions != ExtensionsHash()) return false;
  if (!r.Str(&root) || root != absolute_root) return false;

  // Check freshness first: it is cheap and usually decides.
  if (!r.Count(&n, 16)) return false;
  for (uint64_t i = 0; i < n; ++i) {
    std::string rel;
    int64_t mtime;
    if (!r.Str(&rel) || !r.I64(&mtime)) return false;
    if (!fresh(rel, mtime)) return false;
  }

  ImageFolderIndex loaded;
  if (!r.Count(&n, 8)) return false;
  loaded.classes.resize(n);
  for (auto& c : loaded.classes) {
    if (!r.Str(&c)) return false;
  }
  if (!r.Count(&n, 28)) return false;
  loaded.relpaths.resize(n);
  loaded.labels.resize(n);
  loaded.sizes.resize(n);
  loaded.mtimes_ns.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (!r.Str(&loaded.relpaths[i]) || !r.I32(&loaded.labels[i]) || !r.I64(&loaded.sizes[i]) ||
        !r.I64(&loaded.mtimes_ns[i])) {
      return false;
    }
    if (loaded.labels[i] < 0 || static_cast<size_t>(loaded.labels[i]) >= loaded.classes.size()) return false;
    if (loaded.sizes[i] < 0) return false;
  }
  if (!r.AtEnd() || loaded.relpaths.empty()) return false;
  *index = std::move(loaded);
  return true;
}

std::string IndexCache::Encode(const std::string& absolute_root, const ImageFolderIndex& index,
                               const std::vector<ScannedDirectory>& directories) {
  BinaryWriter w;
  w.Raw(kMagic, sizeof kMagic);
  w.U32(kVersion);
  w.U64(ExtensionsHash());
  w.Str(absolute_root);
  w.U64(directories.size());
  for (const auto& d : directories) {
    w.Str(d.relpath);
    w.I64(d.mtime_ns);
  }
  w.U64(index.classes.size());
  for (const auto& c : index.classes) w.Str(c);
  w.U64(index.relpaths.size());
  for (size_t i = 0; i < index.relpaths.size(); ++i) {
    w.Str(index.relpaths[i]);
    w.I32(index.labels[i]);
    w.I64(index.sizes[i]);
    w.I64(i < index.mtimes_ns.size() ? index.mtimes_ns[i] : 0);
  }
  w.U64(HashBytes(w.data().data(), w.data().size()));
  return w.data();
}

void IndexCache::Store(const std::string& absolute_root, const ImageFolderIndex& index,
                       const std::vector<ScannedDirectory>& directories) {
  const std::string entry = Encode(absolute_root, index, directories);
  try {
    env_->CreateDirs(cache_dir_);
    env_->WriteFileAtomic(EntryPath(absolute_root), entry.data(), static_cast<int64_t>(entry.size()));
  } catch (const Error&) {
    // An unwritable cache only costs the next start a rescan.
  }
}

}  // namespace hdmlp
