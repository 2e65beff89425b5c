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

uint64_t Hash(const std::string& s) { return HashBytes(s.data(), s.size()); }

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

bool ListingCache::Load(std::string* payload) const { return Read(true, payload); }

// An entry of these files (exact: with their sizes and times now) whose checksum holds.
bool ListingCache::Read(bool exact, std::string* payload) const {
  if (!enabled_) return false;
  std::string data;
  try {
    data = env_->ReadWholeFile(path_);
  } catch (const Error&) {
    return false;
  }
  if (data.size() < 8) return false;
  uint64_t stored;
  std::memcpy(&stored, data.data() + data.size() - 8, 8);
  if (stored != Hash(data.substr(0, data.size() - 8))) return false;
  BinaryReader r(data.data(), data.size() - 8);
  char magic[sizeof kMagic];
  uint32_t version;
  std::string kind;
  uint64_t n;
  bool ok = r.Raw(magic, sizeof magic) && std::memcmp(magic, kMagic, sizeof kMagic) == 0 && r.U32(&version) &&
            version == kVersion && r.Str(&kind) && kind == kind_ && r.U64(&n) && n == files_.size();
  for (size_t i = 0; ok && i < files_.size(); ++i) {
    std::string absolute;
    int64_t size, mtime_ns;
    ok = r.Str(&absolute) && r.I64(&size) && r.I64(&mtime_ns) && absolute == files_[i].absolute &&
         (!exact || (size == files_[i].size && mtime_ns == files_[i].mtime_ns));
  }
  if (!ok) return false;
  payload->assign(data, r.position(), data.size() - 8 - r.position());
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
