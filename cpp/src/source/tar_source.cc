#include "hdmlp/source/tar_source.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"
#include "hdmlp/source/listing_cache.h"
#include "hdmlp/util/binary_io.h"
#include "hdmlp/util/parallel_for.h"

namespace hdmlp {
namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kWindow = 64 * 1024;  // header reads fetch this much, so small members come along
constexpr int64_t kMaxLabelBytes = 64;

std::string Absolute(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

// One indexed sample of a shard.
struct Record {
  std::string key;
  std::string member;
  int64_t offset = 0;
  int64_t size = 0;
  int32_t label = 0;
  bool has_label = false;
};

// Reads a file through a window, so consecutive small reads cost one read.
class WindowReader {
 public:
  WindowReader(ReadableFile* file, int64_t size) : file_(file), size_(size) {}
  void Read(int64_t pos, int64_t n, uint8_t* dst) {
    if (pos < begin_ || pos + n > begin_ + static_cast<int64_t>(window_.size())) {
      const int64_t len = std::min(std::max(n, kWindow), size_ - pos);
      window_.resize(static_cast<size_t>(len));
      file_->ReadExact(pos, window_.data(), len);
      begin_ = pos;
    }
    std::memcpy(dst, window_.data() + (pos - begin_), static_cast<size_t>(n));
  }

 private:
  ReadableFile* file_;
  int64_t size_;
  int64_t begin_ = 0;
  std::vector<uint8_t> window_;
};

// A tar number: octal digits (NUL/space terminated) or GNU base-256.
bool ParseNumber(const uint8_t* field, int n, int64_t* out) {
  if (field[0] & 0x80) {
    int64_t v = field[0] & 0x7f;
    for (int i = 1; i < n; ++i) {
      if (v > (INT64_MAX >> 8)) return false;
      v = (v << 8) | field[i];
    }
    *out = v;
    return true;
  }
  int64_t v = 0;
  int i = 0;
  while (i < n && field[i] == ' ') ++i;
  for (; i < n && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (INT64_MAX >> 3)) return false;
    v = v * 8 + (field[i] - '0');
  }
  *out = v;
  return true;
}

std::string Field(const uint8_t* p, int n) {
  int len = 0;
  while (len < n && p[len] != 0) ++len;
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
}

// The "path" record of a pax extended header, or "".
std::string PaxPath(const std::string& data) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t space = data.find(' ', pos);
    if (space == std::string::npos) break;
    const int64_t len = std::atoll(data.c_str() + pos);
    if (len <= 0 || pos + static_cast<size_t>(len) > data.size()) break;
    const std::string record = data.substr(space + 1, pos + static_cast<size_t>(len) - space - 2);  // minus '\n'
    if (record.compare(0, 5, "path=") == 0) return record.substr(5);
    pos += static_cast<size_t>(len);
  }
  return "";
}

// The sample key of a member name ("a/n0153.jpg" -> "a/n0153"), or ""
// when the name has no key.ext form.
std::string KeyOf(const std::string& name) {
  const size_t slash = name.find_last_of('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos || dot == 0 || name[dot - 1] == '/') return "";
  return name.substr(0, dot);
}

bool IsLabelSpace(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// A label member's text: optional spaces, an optional '+', decimal digits,
// optional spaces, and nothing else in its `size` bytes (a NUL ends nothing:
// "3\0junk" is not the label 3). Values past 2**62 are clamped (refused later).
bool ParseLabel(const uint8_t* text, int64_t size, int64_t* value) {
  int64_t i = 0;
  while (i < size && IsLabelSpace(text[i])) ++i;
  if (i < size && text[i] == '+') ++i;
  const int64_t digits_start = i;
  int64_t v = 0;
  constexpr int64_t kClamp = int64_t{1} << 62;
  for (; i < size && text[i] >= '0' && text[i] <= '9'; ++i) v = v > kClamp / 10 ? kClamp : v * 10 + (text[i] - '0');
  if (i == digits_start) return false;
  while (i < size && IsLabelSpace(text[i])) ++i;
  if (i != size) return false;
  *value = v;
  return true;
}

// Bytes for a message: printable ASCII as is, anything else as \xNN.
std::string Printable(const uint8_t* data, int64_t size) {
  std::string out;
  for (int64_t i = 0; i < size; ++i) {
    const uint8_t c = data[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

class ShardScanner {
 public:
  ShardScanner(const std::string& path, const SourceOptions& options, bool keep_damaged)
      : path_(path), options_(options), keep_damaged_(keep_damaged) {
    size_t start = 0;
    const std::string exts = AsciiLower(options.tar_sample_ext);
    while (!exts.empty() && start <= exts.size()) {
      const size_t semi = exts.find(';', start);
      const std::string e = exts.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
      if (!e.empty()) sample_exts_.push_back(e[0] == '.' ? e.substr(1) : e);
      if (semi == std::string::npos) break;
      start = semi + 1;
    }
    label_ext_ = AsciiLower(options.tar_label_ext);
    if (!label_ext_.empty() && label_ext_[0] == '.') label_ext_ = label_ext_.substr(1);
  }

  // The shard's samples. A shard cut short (the file ends inside a header
  // or a member, or where the next header or the end-of-archive blocks
  // should be) throws InvalidArgumentError naming the shard and the offset;
  // with keep_damaged the samples before the cut are kept, the one the cut
  // falls in is dropped (its members may go on past the cut), and damage()
  // says so.
  std::vector<Record> Scan(Env* env) {
    auto file = env->OpenForRead(path_);
    const int64_t size = file->Size();
    WindowReader reader(file.get(), size);
    std::string long_name;
    int64_t pos = 0;
    uint8_t h[kBlock];
    while (true) {
      if (pos + kBlock > size) {
        Cut(pos, pos == size  ? "the file ends where the next header or the end-of-archive blocks should be"
                 : pos > size ? "the file ends inside the padding of the member before"
                              : "the file ends inside a header, " + std::to_string(size - pos) + " of its 512 bytes",
            key_);
        return std::move(records_);
      }
      reader.Read(pos, kBlock, h);
      if (std::all_of(h, h + kBlock, [](uint8_t b) { return b == 0; })) break;  // end of archive
      int64_t stored_sum = 0, member_size = 0;
      ParseNumber(h + 148, 8, &stored_sum);
      int64_t sum = 0;
      for (int i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
      if (sum != stored_sum || !ParseNumber(h + 124, 12, &member_size) || member_size < 0) {
        throw InvalidArgumentError("'" + path_ + "' is not a tar file or is corrupt: the header at offset " +
                                   std::to_string(pos) + " fails its checksum");
      }
      const char type = static_cast<char>(h[156]);
      const int64_t data = pos + kBlock;
      std::string name = long_name;
      if (name.empty()) {
        name = Field(h, 100);
        const std::string prefix = std::memcmp(h + 257, "ustar", 5) == 0 ? Field(h + 345, 155) : "";
        if (!prefix.empty()) name = prefix + "/" + name;
      }
      if (member_size > size - data) {
        // Checked before anything is allocated for the member: a header
        // may claim any size. The sample before this member's is whole.
        if (KeyOf(name) != key_) Flush();
        Cut(pos,
            "the member '" + name + "' there claims " + std::to_string(member_size) + " bytes and the file ends " +
                std::to_string(size - data) + " bytes into it",
            KeyOf(name));
        return std::move(records_);
      }
      const int64_t next = data + (member_size + kBlock - 1) / kBlock * kBlock;
      if (type == 'L' || type == 'x') {
        if (member_size > (1 << 20) || data + member_size > size) {
          throw InvalidArgumentError("'" + path_ + "' is truncated or corrupt: the extended header at offset " +
                                     std::to_string(pos) + " is cut short or too long");
        }
        std::string text(static_cast<size_t>(member_size), '\0');
        reader.Read(data, member_size, reinterpret_cast<uint8_t*>(text.data()));
        if (type == 'L') {
          long_name = text.substr(0, text.find('\0'));
        } else {
          const std::string p = PaxPath(text);
          if (!p.empty()) long_name = p;
        }
      } else if (type == '0' || type == '\0' || type == '7') {
        long_name.clear();
        Member(&reader, size, name, data, member_size);
      } else {
        long_name.clear();  // directories, links, pax globals: not samples
      }
      pos = next;
    }
    Flush();
    return std::move(records_);
  }

  // Where the shard was cut, under keep_damaged.
  struct CutInfo {
    bool cut = false;
    int64_t offset = 0;
    std::string what;     // "tar shard '...' is cut short at offset N: why (...)"
    std::string key;      // the sample the cut fell in, or ""
  };
  const CutInfo& cut() const { return cut_; }

 private:
  struct Candidate {
    std::string ext;
    std::string name;
    int64_t offset, size;
  };

  // `cut_key`: the sample the cut falls in ("" at a boundary between samples).
  void Cut(int64_t offset, const std::string& why, const std::string& cut_key) {
    const std::string what = "tar shard '" + path_ + "' is cut short at offset " + std::to_string(offset) + ": " +
                             why + " (a truncated or partly copied shard)";
    if (!keep_damaged_) {
      throw InvalidArgumentError(what + "; copy the shard again, or open with on_error=\"skip\" to use the " +
                                 std::to_string(records_.size()) + " whole samples before the cut");
    }
    // The sample the cut falls in may have lost members: it is dropped too.
    cut_ = {true, offset, what, cut_key};
  }

  void Member(WindowReader* reader, int64_t file_size, const std::string& name, int64_t offset, int64_t size) {
    const std::string key = KeyOf(name);
    if (key.empty()) return;  // no key.ext: not part of a sample
    const size_t dot = key.size();
    const std::string ext = AsciiLower(name.substr(dot + 1));
    if (key != key_) {
      Flush();
      key_ = key;
    }
    // Two members with one extension: keeping either would be a guess.
    for (const auto& c : candidates_) {
      if (c.ext == ext) Duplicate(key, ext, c.name, c.offset, name, offset);
    }
    if (has_label_ && ext == label_ext_) Duplicate(key, ext, label_name_, label_offset_, name, offset);
    if (!label_ext_.empty() && ext == label_ext_) {
      if (size > kMaxLabelBytes || offset + size > file_size) {
        throw InvalidArgumentError("label member '" + name + "' at offset " + std::to_string(offset) + " of '" +
                                   path_ + "' is " + (size > kMaxLabelBytes ? "too long for a label" : "cut short") +
                                   ": it must hold a decimal integer");
      }
      uint8_t text[kMaxLabelBytes] = {};
      reader->Read(offset, size, text);
      int64_t v = -1;
      if (!ParseLabel(text, size, &v)) {
        throw InvalidArgumentError("label member '" + name + "' at offset " + std::to_string(offset) + " of '" +
                                   path_ + "' (sample '" + key + "') holds \"" + Printable(text, size) +
                                   "\", not a non-negative decimal integer (digits, with spaces or a newline "
                                   "around them at most: no NUL or other non-text byte); fix the member, or "
                                   "choose the label member with tar_label_ext");
      }
      if (v > kMaxLabel) {
        throw InvalidArgumentError("label member '" + name + "' at offset " + std::to_string(offset) + " of '" +
                                   path_ + "' (sample '" + key + "') holds " + std::to_string(v) +
                                   ", more than the largest label hdmlp takes, " + std::to_string(kMaxLabel) +
                                   " (the classes are \"0\" to the largest label, listed densely)");
      }
      label_ = static_cast<int32_t>(v);
      has_label_ = true;
      label_name_ = name;
      label_offset_ = offset;
      return;
    }
    candidates_.push_back({ext, name, offset, size});
  }

  [[noreturn]] void Duplicate(const std::string& key, const std::string& ext, const std::string& first,
                              int64_t first_offset, const std::string& second, int64_t second_offset) {
    throw InvalidArgumentError("sample '" + key + "' in tar shard '" + path_ + "' has two '" + ext + "' members ('" +
                               first + "' at offset " + std::to_string(first_offset) + " and '" + second +
                               "' at offset " + std::to_string(second_offset) +
                               "): a key names one sample with one member per extension; rename one of them");
  }

  void Flush() {
    if (key_.empty()) return;
    const Candidate* chosen = nullptr;
    if (!sample_exts_.empty()) {
      for (const auto& want : sample_exts_) {
        for (const auto& c : candidates_) {
          if (c.ext == want && chosen == nullptr) chosen = &c;
        }
      }
    } else {
      for (const auto& c : candidates_) {
        if (chosen == nullptr && HasImageExtension("x." + c.ext)) chosen = &c;
      }
    }
    if (chosen == nullptr) {
      std::string have;
      for (const auto& c : candidates_) have += (have.empty() ? "" : ", ") + c.ext;
      if (has_label_) have += (have.empty() ? "" : ", ") + label_ext_;
      throw InvalidArgumentError(
          "sample '" + key_ + "' in '" + path_ + "' has no " +
          (sample_exts_.empty() ? std::string("image member") : "'" + options_.tar_sample_ext + "' member") +
          " (its members: " + (have.empty() ? "none" : have) + "); choose the sample member with tar_sample_ext");
    }
    records_.push_back({key_, chosen->name, chosen->offset, chosen->size, label_, has_label_});
    key_.clear();
    candidates_.clear();
    label_ = 0;
    has_label_ = false;
  }

  std::string path_;
  const SourceOptions& options_;
  bool keep_damaged_;
  CutInfo cut_;
  std::string label_name_;
  int64_t label_offset_ = 0;
  std::vector<std::string> sample_exts_;
  std::string label_ext_;
  std::vector<Record> records_;
  std::string key_;
  std::vector<Candidate> candidates_;
  int32_t label_ = 0;
  bool has_label_ = false;
};

// The sample members that the index cache's `payload` (ListingCache::LoadLast) lists
// for `shard`, in order: the shard as a job last indexed it whole (a damaged
// listing is never kept). nullopt without one.
std::optional<std::vector<std::string>> LastListing(const std::string& payload, uint32_t shard) {
  BinaryReader r(payload.data(), payload.size());
  uint64_t n;
  if (!r.Count(&n, 8)) return std::nullopt;
  for (uint64_t c = 0; c < n; ++c) {
    std::string name;
    if (!r.Str(&name)) return std::nullopt;
  }
  if (!r.Count(&n, 36)) return std::nullopt;
  std::vector<std::string> members;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t s;
    int64_t offset, size;
    int32_t label;
    std::string member;
    if (!r.U32(&s) || !r.I64(&offset) || !r.I64(&size) || !r.I32(&label) || !r.Str(&member)) return std::nullopt;
    if (s == shard) members.push_back(std::move(member));
  }
  return members;
}

// What a cut shard lost, as damage() and damaged_samples() say it: the
// sample the cut fell in, and every later one, named from the shard's last
// whole listing where its first samples are the ones kept (else the unknown
// rest is one entry).
struct CutLoss {
  std::string damage;
  std::vector<std::string> samples;
};

CutLoss DescribeCut(const std::string& shard, const ShardScanner::CutInfo& cut, const std::vector<Record>& kept,
                    const std::optional<std::vector<std::string>>& listing) {
  CutLoss loss;
  const std::string why = "not delivered: " + cut.what;
  bool listed = listing.has_value() && listing->size() >= kept.size();
  for (size_t i = 0; listed && i < kept.size(); ++i) listed = (*listing)[i] == kept[i].member;
  std::vector<std::string> names;
  if (listed) {
    for (size_t i = kept.size(); i < listing->size(); ++i) names.push_back(shard + "/" + (*listing)[i]);
  } else if (!cut.key.empty()) {
    names.push_back(shard + "/" + cut.key);
  }
  for (const auto& name : names) loss.samples.push_back("'" + name + "': " + why);
  std::string shown;
  for (size_t i = 0; i < names.size() && i < 10; ++i) shown += (i == 0 ? "'" : ", '") + names[i] + "'";
  if (names.size() > 10) shown += " and " + std::to_string(names.size() - 10) + " more";
  loss.damage = cut.what + "; its " + std::to_string(kept.size()) + " whole samples before the cut are used";
  if (listed) {
    loss.damage += names.empty() ? "; no sample is lost (the shard's last listing in the index cache ends there)"
                                 : "; " + std::to_string(names.size()) + " sample(s) are not delivered, by the "
                                   "shard's last whole listing in the index cache: " + shown;
  } else {
    loss.samples.push_back("'" + shard + "' past offset " + std::to_string(cut.offset) + " (what followed " +
                           (cut.key.empty() ? "the cut" : "'" + cut.key + "'") + "; nothing lists it): " + why);
    loss.damage += (names.empty() ? "; not delivered: whatever followed the cut"
                                  : "; not delivered: " + shown + " (cut short) and whatever followed it") +
                   ", which nothing lists (how many samples that was is unknown: the index cache holds no whole "
                   "listing of the shard)";
  }
  loss.damage += "; copy the shard again to read them";
  return loss;
}

}  // namespace

std::vector<std::string> TarSource::ListShards(Env* env, const std::string& spec) {
  std::vector<std::string> paths;
  if (spec.find('{') != std::string::npos || spec.find(',') != std::string::npos) {
    paths = ExpandBraces(spec);
  } else {
    const FileInfo info = env->Stat(spec);
    if (!info.exists) throw NotFoundError("tar shard '" + spec + "' does not exist");
    if (info.is_dir) {
      for (const auto& e : env->ListDir(spec)) {
        if (!e.is_dir && HasExtension(e.name, {".tar"})) {
          paths.push_back(JoinPath(spec, e.name));
        }
      }
      std::sort(paths.begin(), paths.end());
      if (paths.empty()) throw NotFoundError("folder '" + spec + "' holds no .tar shard");
    } else {
      paths.push_back(spec);
    }
  }
  if (paths.empty()) throw NotFoundError("'" + spec + "' names no tar shard");
  for (const auto& p : paths) {
    const FileInfo info = env->Stat(p);
    if (!info.exists) throw NotFoundError("tar shard '" + p + "' (from '" + spec + "') does not exist");
    if (info.is_dir) throw InvalidArgumentError("tar shard '" + p + "' (from '" + spec + "') is a directory");
    if (info.kind != FileKind::kRegular) {
      // A FIFO would be read as a shard of size 0, i.e. "cut short".
      throw InvalidArgumentError("tar shard '" + p + "' (from '" + spec + "') is " + FileKindName(info.kind) +
                                 ", not a regular file");
    }
  }
  return paths;
}

namespace {

// The samples of an index cache's `payload` (ListingCache::Load, which checks
// every shard's path, size and time); false for a damaged one.
bool DecodeIndexCache(const std::string& payload, const std::vector<std::string>& paths, SampleIndex* index_out,
                      std::vector<TarSource::Entry>* entries_out) {
  BinaryReader r(payload.data(), payload.size());
  uint64_t n;
  SampleIndex index;
  std::vector<TarSource::Entry> entries;
  bool ok = r.Count(&n, 8);
  index.classes.resize(ok ? n : 0);
  for (auto& c : index.classes) ok = ok && r.Str(&c);
  ok = ok && r.Count(&n, 36);
  if (ok) {
    entries.resize(n);
    index.names.resize(n);
    index.labels.resize(n);
    index.sizes.resize(n);
  }
  for (uint64_t i = 0; ok && i < n; ++i) {
    ok = r.U32(&entries[i].shard) && r.I64(&entries[i].offset) && r.I64(&index.sizes[i]) &&
         r.I32(&index.labels[i]) && r.Str(&entries[i].member) && entries[i].shard < paths.size() &&
         index.labels[i] >= 0 && entries[i].offset >= 0 && index.sizes[i] >= 0;
    if (ok) index.names[i] = paths[entries[i].shard] + "/" + entries[i].member;
  }
  if (!ok || !r.AtEnd() || entries.empty()) return false;
  *index_out = std::move(index);
  *entries_out = std::move(entries);
  return true;
}

std::string EncodeIndexCache(const SampleIndex& index, const std::vector<TarSource::Entry>& entries) {
  BinaryWriter w;
  w.U64(index.classes.size());
  for (const auto& c : index.classes) w.Str(c);
  w.U64(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    w.U32(entries[i].shard);
    w.I64(entries[i].offset);
    w.I64(index.sizes[i]);
    w.I32(index.labels[i]);
    w.Str(entries[i].member);
  }
  return w.data();
}

// The scanned records, shard by shard, as samples: every one with a label
// member, or none (then all are class 0).
void IndexRecords(const std::vector<std::vector<Record>>& per_shard, const std::vector<std::string>& paths,
                  const std::string& spec, const SourceOptions& options, SampleIndex* index,
                  std::vector<TarSource::Entry>* entries) {
  bool any_label = false, all_labels = true;
  int32_t max_label = -1;
  for (size_t s = 0; s < per_shard.size(); ++s) {
    for (const auto& rec : per_shard[s]) {
      any_label = any_label || rec.has_label;
      if (!rec.has_label && all_labels) {
        all_labels = false;
        if (any_label) {
          throw InvalidArgumentError("sample '" + rec.key + "' in '" + paths[s] + "' has no '" + options.tar_label_ext +
                                     "' label member, unlike the samples before it; every sample needs one");
        }
      }
      max_label = std::max(max_label, rec.label);
      entries->push_back({static_cast<uint32_t>(s), rec.offset, rec.member});
      index->names.push_back(paths[s] + "/" + rec.member);
      index->labels.push_back(rec.label);
      index->sizes.push_back(rec.size);
    }
  }
  if (any_label && !all_labels) {
    throw InvalidArgumentError("some samples of '" + spec + "' have a '" + options.tar_label_ext +
                               "' label member and some do not; every sample needs one");
  }
  if (entries->empty()) throw InvalidArgumentError("'" + spec + "' holds no sample (no tar member named key.ext)");
  for (int32_t c = 0; c <= std::max(max_label, 0); ++c) index->classes.push_back(std::to_string(c));
}

}  // namespace

TarSource::TarSource(Env* env, const std::string& spec, const SourceOptions& options, const ScanOptions& scan)
    : Source("tar", env, spec) {
  paths_ = ListShards(env, spec);
  for (const auto& path : paths_) {
    const FileInfo info = env->Stat(path);
    shards_.push_back({path, Absolute(path), info.size, info.mtime_ns});
  }
  // The cache: valid while every shard has its recorded size and time (not
  // kept for a shard modified just before it was listed).
  const bool recent = RecentlyModified(shards_);
  const ListingCache cache(scan, "tar", options.tar_sample_ext + ";" + options.tar_label_ext, shards_);
  std::string payload;
  if (cache.Load(&payload) && DecodeIndexCache(payload, paths_, &index_, &entries_)) {
    from_cache_ = true;
    files_.resize(paths_.size());
    return;
  }

  std::vector<std::vector<Record>> per_shard(paths_.size());
  std::vector<ShardScanner::CutInfo> cuts(paths_.size());
  ParallelFor(static_cast<int64_t>(paths_.size()), scan.ListingThreads(), [&](int64_t s) {
    ShardScanner scanner(paths_[static_cast<size_t>(s)], options, scan.keep_damaged);
    per_shard[static_cast<size_t>(s)] = scanner.Scan(env);
    cuts[static_cast<size_t>(s)] = scanner.cut();
  });
  // A damaged shard's last whole listing names what the damage lost.
  const bool last = cache.LoadLast(&payload);
  for (size_t s = 0; s < paths_.size(); ++s) {
    if (!cuts[s].cut) continue;
    CutLoss loss = DescribeCut(paths_[s], cuts[s], per_shard[s],
                               last ? LastListing(payload, static_cast<uint32_t>(s)) : std::nullopt);
    damage_.push_back(std::move(loss.damage));
    damaged_samples_.insert(damaged_samples_.end(), loss.samples.begin(), loss.samples.end());
  }
  IndexRecords(per_shard, paths_, spec, options, &index_, &entries_);
  files_.resize(paths_.size());

  // A damaged shard's listing is not kept: opened again without
  // keep_damaged it must fail, and with it say again what was lost.
  if (damage_.empty() && !recent) cache.Store(EncodeIndexCache(index_, entries_));
}

std::string TarSource::Describe(int64_t i) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  return paths_[e.shard] + " member '" + e.member + "' at offset " + std::to_string(e.offset) + " (sample " +
         std::to_string(i) + ")";
}

SampleIdentity TarSource::Identity(int64_t i) const {
  return {index_.sizes[static_cast<size_t>(i)], shards_[entries_[static_cast<size_t>(i)].shard].mtime_ns};
}

ReadableFile* TarSource::ShardFile(uint32_t shard) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!files_[shard]) files_[shard] = Open(paths_[shard]);
  return files_[shard].get();
}

void TarSource::ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) {
  CheckRange(i, offset, n);
  const Entry& e = entries_[static_cast<size_t>(i)];
  const int64_t size = index_.sizes[static_cast<size_t>(i)];
  // The size the shard had when it was opened; a later truncation makes
  // ReadExact throw instead.
  const int64_t file_size = shards_[e.shard].size;
  if (e.offset + size > file_size) {
    throw InvalidArgumentError(Describe(i) + " is cut short: it needs " + std::to_string(size) + " bytes, the file ends " +
                               std::to_string(std::max<int64_t>(file_size - e.offset, 0)) +
                               " bytes into it (a truncated shard)");
  }
  ShardFile(e.shard)->ReadExact(e.offset + offset, dst, n);
}

Source::Extent TarSource::ExtentOf(int64_t i) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  return {static_cast<int64_t>(e.shard), e.offset, index_.sizes[static_cast<size_t>(i)]};
}

std::vector<SampleBuffer> TarSource::ReadRun(int64_t first, int64_t count) {
  return ReadExtentRun(
      first, count, [this](int64_t file) { return shards_[static_cast<size_t>(file)].size; },
      [this](int64_t file) { return ShardFile(static_cast<uint32_t>(file)); }, [](int64_t, const SampleBuffer&) {});
}

SampleBuffer TarSource::Read(int64_t i) {
  CheckSample(i);
  SampleBuffer bytes = SampleBuffer::Allocate(index_.sizes[static_cast<size_t>(i)]);
  ReadRange(i, 0, bytes.size, bytes.data.get());
  return bytes;
}

}  // namespace hdmlp
