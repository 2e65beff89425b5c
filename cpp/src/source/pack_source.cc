#include "hdmlp/source/pack_source.h"

#include <cstdint>
#include <cstring>

#include "hdmlp/errors.h"
#include "hdmlp/source/regular_file.h"
#include "hdmlp/util/binary_io.h"
#include "hdmlp/util/crc32.h"

namespace hdmlp {
namespace {

constexpr char kIndexMagic[8] = {'H', 'D', 'M', 'L', 'P', 'P', 'K', '1'};
constexpr char kShardMagic[8] = {'H', 'D', 'M', 'L', 'P', 'S', 'H', '1'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kShardHeaderBytes = 32;

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

PackSource::PackSource(Env* env, const std::string& path) : Source("pack", env, path) {
  const FileInfo info = env->Stat(path);
  if (!info.exists) throw NotFoundError("pack '" + path + "' does not exist");
  index_path_ = info.is_dir ? JoinPath(path, kPackIndexName) : path;
  dir_ = info.is_dir ? path : Dirname(path);
  if (!RequireRegularFile(env, index_path_, "pack index '" + index_path_ + "'").exists) {
    throw NotFoundError("'" + path + "' holds no pack index (" + kPackIndexName +
                        "): the pack was not finished; run `hdmlp pack` again to complete it");
  }
  const std::string data = env->ReadWholeFile(index_path_);
  files_opened_.fetch_add(1);
  const std::string corrupt = "pack index '" + index_path_ + "' is corrupt";
  const std::string remake = ": make the pack again with `hdmlp pack`";
  if (data.size() < sizeof kIndexMagic + 8 || std::memcmp(data.data(), kIndexMagic, sizeof kIndexMagic) != 0) {
    throw InvalidArgumentError("'" + index_path_ + "' is not an hdmlp pack index (no HDMLPPK1 magic)");
  }
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data.data() + data.size() - 4, 4);
  if (stored_crc != Crc32(reinterpret_cast<const uint8_t*>(data.data()), static_cast<int64_t>(data.size()) - 4)) {
    throw InvalidArgumentError(corrupt + " (its checksum does not match: truncated or changed)" + remake);
  }
  BinaryReader r(data.data() + sizeof kIndexMagic, data.size() - sizeof kIndexMagic - 4);
  uint32_t version = 0, format = 0;
  if (!r.U32(&version) || version != kVersion) {
    throw InvalidArgumentError("pack index '" + index_path_ + "' has version " + std::to_string(version) +
                               ", this hdmlp reads version " + std::to_string(kVersion) + remake);
  }
  uint64_t n;
  if (!r.U32(&format) || format > 1 || !r.U64(&pack_id_) || !r.Str(&source_root_) || !r.Str(&source_kind_) ||
      !r.Count(&n, 8)) {
    throw InvalidArgumentError(corrupt + " (header)" + remake);
  }
  format_ = format == 1 ? SampleFormat::kRawImage : SampleFormat::kEncoded;
  index_.classes.resize(n);
  for (auto& c : index_.classes) {
    if (!r.Str(&c)) throw InvalidArgumentError(corrupt + " (classes)" + remake);
  }
  if (!r.Count(&n, 16)) throw InvalidArgumentError(corrupt + " (shards)" + remake);
  shards_.resize(n);
  for (auto& shard : shards_) {
    std::string name;
    uint64_t size;
    if (!r.Str(&name) || !r.U64(&size) || name.empty() || name.find('/') != std::string::npos ||
        size > static_cast<uint64_t>(INT64_MAX)) {
      throw InvalidArgumentError(corrupt + " (shards)" + remake);
    }
    shard.path = JoinPath(dir_, name);
    shard.indexed_size = static_cast<int64_t>(size);
  }
  if (!r.Count(&n, 36)) throw InvalidArgumentError(corrupt + " (samples)" + remake);
  entries_.resize(n);
  index_.names.resize(n);
  index_.labels.resize(n);
  index_.sizes.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    Entry& e = entries_[i];
    uint64_t offset, size;
    if (!r.U32(&e.shard) || !r.U64(&offset) || !r.U64(&size) || !r.I32(&index_.labels[i]) || !r.U32(&e.crc) ||
        !r.Str(&index_.names[i])) {
      throw InvalidArgumentError(corrupt + " (sample " + std::to_string(i) + ")" + remake);
    }
    e.offset = static_cast<int64_t>(offset);
    index_.sizes[i] = static_cast<int64_t>(size);
    // offset + size is not computed: two huge values would wrap past the check.
    if (e.shard >= shards_.size() || offset < static_cast<uint64_t>(kShardHeaderBytes) ||
        size > static_cast<uint64_t>(shards_[e.shard].indexed_size) ||
        offset > static_cast<uint64_t>(shards_[e.shard].indexed_size) - size || index_.labels[i] < 0 ||
        (!index_.classes.empty() && static_cast<size_t>(index_.labels[i]) >= index_.classes.size())) {
      throw InvalidArgumentError(corrupt + ": sample " + std::to_string(i) + " ('" + index_.names[i] +
                                 "') lies outside its shard or has no class" + remake);
    }
  }
  if (!r.AtEnd()) throw InvalidArgumentError(corrupt + " (trailing bytes)" + remake);
  if (entries_.empty()) throw InvalidArgumentError("pack '" + path + "' holds no sample");

  // One stat per shard: a missing shard or one that is larger than the
  // index says (rewritten by another pack) is refused now; a shorter one
  // (truncated) fails only the samples past its end, when they are read.
  for (auto& shard : shards_) {
    const FileInfo s = RequireRegularFile(env, shard.path, "shard '" + shard.path + "' of pack '" + index_path_ + "'");
    if (!s.exists) throw NotFoundError("shard '" + shard.path + "' of pack '" + index_path_ + "' does not exist");
    if (s.size > shard.indexed_size) {
      throw InvalidArgumentError("the index '" + index_path_ + "' does not match its shards: shard '" + shard.path +
                                 "' has " + std::to_string(s.size) + " bytes, the index says " +
                                 std::to_string(shard.indexed_size) + remake);
    }
    shard.size = s.size;
    shard.mtime_ns = s.mtime_ns;
  }
}

std::string PackSource::Describe(int64_t i) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  return shards_[e.shard].path + " at offset " + std::to_string(e.offset) + " (sample " + std::to_string(i) + ", '" +
         index_.names[static_cast<size_t>(i)] + "')";
}

SampleIdentity PackSource::Identity(int64_t i) const {
  return {index_.sizes[static_cast<size_t>(i)], shards_[entries_[static_cast<size_t>(i)].shard].mtime_ns};
}

ReadableFile* PackSource::ShardFile(uint32_t number) {
  std::lock_guard<std::mutex> lock(mu_);
  Shard& shard = shards_[number];
  if (shard.file) return shard.file.get();
  auto file = Open(shard.path);
  uint8_t header[kShardHeaderBytes] = {};
  if (file->Size() < kShardHeaderBytes) {
    throw InvalidArgumentError("shard '" + shard.path + "' is truncated: it has " + std::to_string(file->Size()) +
                               " bytes, less than its header");
  }
  file->ReadExact(0, header, kShardHeaderBytes);
  uint64_t id;
  uint32_t shard_number;
  std::memcpy(&id, header + 8, 8);
  std::memcpy(&shard_number, header + 16, 4);
  if (std::memcmp(header, kShardMagic, sizeof kShardMagic) != 0 || id != pack_id_ || shard_number != number) {
    throw InvalidArgumentError("the index '" + index_path_ + "' does not match its shards: '" + shard.path +
                               "' is not shard " + std::to_string(number) + " of this pack (another pack's shard, "
                               "or not a shard); make the pack again with `hdmlp pack`");
  }
  shard.file = std::move(file);
  return shard.file.get();
}

void PackSource::ReadChecked(int64_t i, int64_t offset, int64_t n, uint8_t* dst) {
  const Entry& e = entries_[static_cast<size_t>(i)];
  const Shard& shard = shards_[e.shard];
  const int64_t end = e.offset + index_.sizes[static_cast<size_t>(i)];
  if (end > shard.size) {
    throw InvalidArgumentError("shard '" + shard.path + "' is truncated: it ends at byte " + std::to_string(shard.size) +
                               ", before the end (" + std::to_string(end) + ") of " + Describe(i) +
                               "; make the pack again with `hdmlp pack`");
  }
  ShardFile(e.shard)->ReadExact(e.offset + offset, dst, n);
}

void PackSource::CheckCrc(int64_t i, const SampleBuffer& bytes) const {
  if (Crc32(bytes.data.get(), bytes.size) != entries_[static_cast<size_t>(i)].crc) {
    throw InvalidArgumentError(Describe(i) + " does not match its checksum: the shard changed after it was packed; "
                               "make the pack again with `hdmlp pack`");
  }
}

SampleBuffer PackSource::Read(int64_t i) {
  CheckSample(i);
  SampleBuffer bytes = SampleBuffer::Allocate(index_.sizes[static_cast<size_t>(i)]);
  ReadChecked(i, 0, bytes.size, bytes.data.get());
  CheckCrc(i, bytes);
  return bytes;
}

Source::Extent PackSource::ExtentOf(int64_t i) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  return {static_cast<int64_t>(e.shard), e.offset, index_.sizes[static_cast<size_t>(i)]};
}

std::vector<SampleBuffer> PackSource::ReadRun(int64_t first, int64_t count) {
  return ReadExtentRun(
      first, count, [this](int64_t file) { return shards_[static_cast<size_t>(file)].size; },
      [this](int64_t file) { return ShardFile(static_cast<uint32_t>(file)); },
      [this](int64_t i, const SampleBuffer& bytes) { CheckCrc(i, bytes); });
}

void PackSource::ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) {
  CheckRange(i, offset, n);
  ReadChecked(i, offset, n, dst);  // a part cannot be checked against the sample's CRC
}

}  // namespace hdmlp
