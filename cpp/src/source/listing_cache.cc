#include "hdmlp/source/listing_cache.h"

#include <cstdio>
#include <cstring>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"
#include "hdmlp/util/random.h"
#include "hdmlp/util/binary_io.h"

namespace hdmlp {
namespace {

constexpr char kMagic[8] = {'H', 'D', 'M', 'L', 'P', 'L', 'S', 'T'};
constexpr uint32_t kVersion = 1;

uint64_t Hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, finished with Mix64
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return Mix64(h);
}

}  // namespace

ListingCache::ListingCache(const ScanOptions& scan, const std::string& kind, const std::string& options_key,
                           const std::vector<ListedFile>& files)
    : env_(scan.cache_env != nullptr ? scan.cache_env : Env::Default()),
      enabled_(scan.use_cache),
      kind_(kind),
      files_(files) {
  std::string all = kind + ";" + options_key + ";";
  for (const auto& f : files) all += f.absolute + "\n";
  char name[64];
  std::snprintf(name, sizeof name, "%s-%016llx.idx", kind.c_str(), static_cast<unsigned long long>(Hash(all)));
  path_ = JoinPath(scan.cache_dir.empty() ? JoinPath(UserCacheDir(), "index") : scan.cache_dir, name);
}

std::string ListingCache::Header() const {
  BinaryWriter w;
  w.Raw(kMagic, sizeof kMagic);
  w.U32(kVersion);
  w.Str(kind_);
  w.U64(files_.size());
  for (const auto& f : files_) {
    w.Str(f.absolute);
    w.I64(f.size);
    w.I64(f.mtime_ns);
  }
  return w.data();
}

bool ListingCache::Load(std::string* payload) const {
  if (!enabled_) return false;
  std::string data;
  try {
    data = env_->ReadWholeFile(path_);
  } catch (const Error&) {
    return false;
  }
  const std::string header = Header();
  if (data.size() < header.size() + 8 || data.compare(0, header.size(), header) != 0) return false;
  uint64_t stored;
  std::memcpy(&stored, data.data() + data.size() - 8, 8);
  if (stored != Hash(data.substr(0, data.size() - 8))) return false;
  payload->assign(data, header.size(), data.size() - 8 - header.size());
  return true;
}

void ListingCache::Store(const std::string& payload) const {
  if (!enabled_ || RecentlyModified(files_)) return;
  std::string data = Header() + payload;
  const uint64_t h = Hash(data);
  data.append(reinterpret_cast<const char*>(&h), 8);
  try {
    env_->CreateDirs(path_.substr(0, path_.find_last_of('/')));
    env_->WriteFileAtomic(path_, data.data(), static_cast<int64_t>(data.size()));
  } catch (const Error&) {
    // An unwritable cache only costs the next start a rescan.
  }
}

}  // namespace hdmlp
