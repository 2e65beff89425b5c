#include "hdmlp/source/tfrecord_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/source/listing_cache.h"
#include "hdmlp/source/tf_example.h"
#include "hdmlp/util/binary_io.h"
#include "hdmlp/util/crc32c.h"
#include "hdmlp/util/parallel_for.h"

namespace hdmlp {
namespace {

constexpr int64_t kHeader = 12;  // length, its CRC
constexpr int64_t kFooter = 4;   // the payload's CRC
constexpr int64_t kWindow = 1 << 20;
// A length field larger than this is not believed (no TFRecord holds a
// record of 1 TiB): it is a damaged or foreign file.
constexpr int64_t kMaxRecord = int64_t{1} << 40;

bool LengthCrcOk(const uint8_t* header) { return MaskCrc32c(Crc32c(header, 8)) == LoadLe32(header + 8); }

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Reads a file through a window, so the headers of small records cost one
// read together; a request larger than the window is read whole.
class WindowReader {
 public:
  WindowReader(ReadableFile* file, int64_t size) : file_(file), size_(size) {}
  const uint8_t* Get(int64_t pos, int64_t n) {
    if (pos < begin_ || pos + n > begin_ + static_cast<int64_t>(window_.size())) {
      const int64_t len = std::min(std::max(n, kWindow), size_ - pos);
      window_.resize(static_cast<size_t>(len));
      file_->ReadExact(pos, window_.data(), len);
      begin_ = pos;
    }
    return window_.data() + (pos - begin_);
  }

 private:
  ReadableFile* file_;
  int64_t size_;
  int64_t begin_ = 0;
  std::vector<uint8_t> window_;
};

struct ScannedRecord {
  int64_t offset = 0;
  int64_t length = 0;
  int64_t sample_offset = 0;
  int64_t sample_size = 0;
  int32_t label = 0;
};

struct ShardScan {
  std::vector<ScannedRecord> records;
  std::string damage;
  // What the damage left out, one line per skipped sample (Source::damaged_samples): each
  // record that fails its CRC, and the unknown rest of a cut shard as one entry.
  std::vector<std::string> lost;
  std::string index_file;  // the .idx file used, if any
};

class ShardScanner {
 public:
  ShardScanner(const ListedFile& shard, const SourceOptions& options, bool keep_damaged)
      : shard_(shard), options_(options), keep_damaged_(keep_damaged) {}

  // Walks the shard's records: headers only, or (read_through) every
  // payload too, for labels and sample features.
  ShardScan Scan(Env* env, bool read_through) {
    auto file = env->OpenForRead(shard_.path);
    const int64_t size = shard_.size;
    WindowReader reader(file.get(), size);
    int64_t pos = 0;
    while (pos < size) {
      if (size - pos < kHeader) {
        Damaged(pos, "the file ends inside a record's header (" + std::to_string(size - pos) + " of its 12 bytes)");
        break;
      }
      const uint8_t* h = reader.Get(pos, kHeader);
      const uint64_t length = LoadLe64(h);
      if (!LengthCrcOk(h)) {
        Damaged(pos, pos == 0 ? "its first record's length field fails its CRC-32C: not a TFRecord file, or damaged"
                              : "the length field of the record there fails its CRC-32C (damaged)");
        break;
      }
      if (length > static_cast<uint64_t>(kMaxRecord) ||
          static_cast<int64_t>(length) > size - pos - kHeader - kFooter) {
        Damaged(pos, "the record there claims " + std::to_string(length) + " bytes of payload and the file ends " +
                         std::to_string(std::max<int64_t>(size - pos - kHeader, 0)) +
                         " bytes after its header (a truncated or partly copied shard)");
        break;
      }
      ScannedRecord rec;
      rec.offset = pos;
      rec.length = static_cast<int64_t>(length);
      rec.sample_size = rec.length;
      bool keep = true;
      if (read_through) keep = Inspect(&reader, &rec);
      if (keep) scan_.records.push_back(rec);
      pos += kHeader + rec.length + kFooter;
    }
    return std::move(scan_);
  }

  // The records an index file lists, checked against the shard's size.
  ShardScan FromIndex(const std::string& index_path, const std::string& text) {
    const auto entries = TFRecordSource::ParseIndexFile(text, index_path);
    int64_t expected = 0;
    size_t line = 0;
    for (const auto& [offset, whole] : entries) {
      ++line;
      if (offset != expected || whole < kHeader + kFooter) {
        throw InvalidArgumentError(
            "TFRecord index '" + index_path + "' does not match shard '" + shard_.path + "': line " +
            std::to_string(line) + " says a record of " + std::to_string(whole) + " bytes at offset " +
            std::to_string(offset) + (offset != expected ? ", where the record before ends at " + std::to_string(expected)
                                                         : ", shorter than a record's 16 bytes of framing") +
            "; it is the index of another file or of an older version of this one: delete it, or make it again "
            "(tfrecord2idx SHARD INDEX)");
      }
      ScannedRecord rec;
      rec.offset = offset;
      rec.length = whole - kHeader - kFooter;
      rec.sample_size = rec.length;
      scan_.records.push_back(rec);
      expected = offset + whole;
    }
    if (expected != shard_.size) {
      throw InvalidArgumentError("TFRecord index '" + index_path + "' does not match shard '" + shard_.path +
                                 "': its " + std::to_string(entries.size()) + " records end at byte " +
                                 std::to_string(expected) + " and the shard has " + std::to_string(shard_.size) +
                                 " bytes; delete the index, or make it again (tfrecord2idx SHARD INDEX)");
    }
    scan_.index_file = index_path;
    return std::move(scan_);
  }

 private:
  std::string Where(int64_t offset) const {
    return "TFRecord shard '" + shard_.path + "' at offset " + std::to_string(offset) + " (record " +
           std::to_string(scan_.records.size() + skipped_) + " of the shard)";
  }

  // The rest of the shard from `offset` on cannot be read.
  void Damaged(int64_t offset, const std::string& why) {
    const std::string what = "TFRecord shard '" + shard_.path + "' is damaged at offset " + std::to_string(offset) +
                             ": " + why;
    if (!keep_damaged_) {
      throw InvalidArgumentError(what + "; copy the shard again, or open with on_error=\"skip\" to use the " +
                                 std::to_string(scan_.records.size()) + " whole records before it");
    }
    scan_.damage = what + "; its " + std::to_string(scan_.records.size()) +
                   " whole records before it are used, the rest of the shard is left out";
    scan_.lost.push_back(what + ": not delivered (the record there and whatever followed it in the shard)");
  }

  // Reads the record's payload: checks its CRC, finds the label and the
  // sample feature. False when the record is left out (keep_damaged).
  bool Inspect(WindowReader* reader, ScannedRecord* rec) {
    const uint8_t* payload = reader->Get(rec->offset + kHeader, rec->length + kFooter);
    if (MaskCrc32c(Crc32c(payload, static_cast<size_t>(rec->length))) != LoadLe32(payload + rec->length)) {
      const std::string what = Where(rec->offset) + ": the record's payload fails its CRC-32C (damaged)";
      if (!keep_damaged_) {
        throw InvalidArgumentError(what + "; copy the shard again, or open with on_error=\"skip\" to leave it out");
      }
      scan_.damage += (scan_.damage.empty() ? "" : "; ") + what + ", left out";
      scan_.lost.push_back(what + ": not delivered");
      ++skipped_;
      return false;
    }
    std::string error;
    std::vector<std::string> names;
    if (!options_.tfrecord_label.empty()) {
      ExampleFeature f;
      if (!FindExampleFeature(payload, static_cast<size_t>(rec->length), options_.tfrecord_label, &f, &error, &names)) {
        throw InvalidArgumentError(Where(rec->offset) + ": " + error + " (tfrecord_label needs tf.train.Example records)");
      }
      if (f.kind != ExampleFeature::Kind::kInt64 || f.count < 1) {
        throw InvalidArgumentError(Where(rec->offset) + ": the label feature '" + options_.tfrecord_label + "' is " +
                                   (f.kind == ExampleFeature::Kind::kMissing ? std::string("not there")
                                                                             : std::string("a ") + ExampleFeatureKindName(f.kind) +
                                                                                   " of " + std::to_string(f.count) + " values") +
                                   ", not an int64_list with a value" + FeatureList(names) +
                                   "; choose it with tfrecord_label");
      }
      if (f.first_int < 0 || f.first_int > kMaxLabel) {
        throw InvalidArgumentError(Where(rec->offset) + ": the label feature '" + options_.tfrecord_label + "' holds " +
                                   std::to_string(f.first_int) + "; labels are 0 to " + std::to_string(kMaxLabel) +
                                   " (the classes are \"0\" to the largest label, listed densely)");
      }
      rec->label = static_cast<int32_t>(f.first_int);
    }
    if (!options_.tfrecord_sample.empty()) {
      ExampleFeature f;
      if (!FindExampleFeature(payload, static_cast<size_t>(rec->length), options_.tfrecord_sample, &f, &error,
                              &names)) {
        throw InvalidArgumentError(Where(rec->offset) + ": " + error + " (tfrecord_sample needs tf.train.Example records)");
      }
      if (f.kind != ExampleFeature::Kind::kBytes || f.count < 1) {
        throw InvalidArgumentError(Where(rec->offset) + ": the sample feature '" + options_.tfrecord_sample + "' is " +
                                   (f.kind == ExampleFeature::Kind::kMissing ? std::string("not there")
                                                                             : std::string("a ") + ExampleFeatureKindName(f.kind)) +
                                   ", not a bytes_list with a value" + FeatureList(names) +
                                   "; choose it with tfrecord_sample");
      }
      rec->sample_offset = static_cast<int64_t>(f.bytes_offset);
      rec->sample_size = static_cast<int64_t>(f.bytes_size);
    }
    return true;
  }

  static std::string FeatureList(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + ("'" + n + "'");
    return " (the record's features: " + (s.empty() ? std::string("none") : s) + ")";
  }

  const ListedFile& shard_;
  const SourceOptions& options_;
  bool keep_damaged_;
  ShardScan scan_;
  int64_t skipped_ = 0;
};

// The index file of a shard, or "" when none exists.
std::string FindIndexFile(Env* env, const ListedFile& shard, const SourceOptions& options) {
  const std::string name = Basename(shard.path) + ".idx";
  std::vector<std::string> candidates;
  if (!options.tfrecord_index.empty()) candidates.push_back(JoinPath(options.tfrecord_index, name));
  candidates.push_back(shard.path + ".idx");
  // The tfrecord package's tfrecord2idx, given a folder, writes <stem>.tfindex beside each shard.
  const std::string base = Basename(shard.path);
  if (base.find('.') != std::string::npos && base.find('.') > 0) {
    candidates.push_back(shard.path.substr(0, shard.path.size() - (base.size() - base.rfind('.'))) + ".tfindex");
  }
  const std::string dir = Dirname(shard.path);
  candidates.push_back(JoinPath(JoinPath(JoinPath(Dirname(dir), "index"), Basename(dir)), name));  // DLIO's layout
  for (const auto& c : candidates) {
    const FileInfo info = env->Stat(c);
    if (info.exists && info.kind == FileKind::kRegular) return c;
  }
  return "";
}

std::vector<int32_t> ReadLabelsFile(Env* env, const std::string& path, size_t expected) {
  const FileInfo info = env->Stat(path);
  if (!info.exists) throw NotFoundError("tfrecord_labels_file '" + path + "' does not exist");
  if (info.kind != FileKind::kRegular) {
    throw InvalidArgumentError("tfrecord_labels_file '" + path + "' is " + FileKindName(info.kind) +
                               ", not a regular file");
  }
  const std::string text = env->ReadWholeFile(path);
  std::vector<int32_t> labels;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    size_t lead = 0;
    while (lead < s.size() && (s[lead] == ' ' || s[lead] == '\t')) ++lead;
    s = s.substr(lead);
    if (s.empty()) continue;
    char* stop = nullptr;
    const long long v = std::strtoll(s.c_str(), &stop, 10);
    if (stop == s.c_str() || *stop != '\0' || v < 0 || v > kMaxLabel) {
      throw InvalidArgumentError("tfrecord_labels_file '" + path + "' line " + std::to_string(line) + " is '" + s +
                                 "': each line must be one label, an integer from 0 to " + std::to_string(kMaxLabel));
    }
    labels.push_back(static_cast<int32_t>(v));
  }
  if (labels.size() != expected) {
    throw InvalidArgumentError("tfrecord_labels_file '" + path + "' holds " + std::to_string(labels.size()) +
                               " labels and the shards hold " + std::to_string(expected) +
                               " records: it needs one label per record, in the shards' order");
  }
  return labels;
}

}  // namespace

const std::vector<std::string>& TFRecordSource::Extensions() {
  static const std::vector<std::string> extensions = {".tfrecord", ".tfrecords", ".tfrec"};
  return extensions;
}

bool TFRecordSource::LooksLikeTFRecord(const uint8_t* data, int64_t n) {
  return n >= kHeader && LengthCrcOk(data) && LoadLe64(data) <= static_cast<uint64_t>(kMaxRecord);
}

std::vector<std::pair<int64_t, int64_t>> TFRecordSource::ParseIndexFile(const std::string& text,
                                                                         const std::string& path) {
  std::vector<std::pair<int64_t, int64_t>> entries;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    long long v[2] = {0, 0};
    const char* p = s.c_str();
    bool ok = true;
    for (auto& x : v) {
      while (*p == ' ' || *p == '\t') ++p;
      char* stop = nullptr;
      if (*p < '0' || *p > '9') {
        ok = false;
        break;
      }
      errno = 0;
      x = std::strtoll(p, &stop, 10);
      if (errno != 0 || stop == p) ok = false;
      p = stop;
    }
    while (ok && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (!ok || *p != '\0' || v[0] > kMaxRecord * 1024 || v[1] > kMaxRecord) {
      throw InvalidArgumentError("TFRecord index '" + path + "' line " + std::to_string(line) + " is '" +
                                 s.substr(0, 80) +
                                 "': each line must be a record's offset and length, two non-negative integers "
                                 "(tfrecord2idx's format)");
    }
    entries.emplace_back(v[0], v[1]);
  }
  return entries;
}

TFRecordSource::TFRecordSource(Env* env, const std::string& spec, const SourceOptions& options,
                               const ScanOptions& scan)
    : Source("tfrecord", env, spec), options_(options) {
  if (!options.tfrecord_label.empty() && !options.tfrecord_labels_file.empty()) {
    throw InvalidArgumentError("tfrecord_label and tfrecord_labels_file both name labels for '" + spec +
                               "': give one of them");
  }
  shards_ = ListDatasetFiles(env, spec, "TFRecord shard", Extensions());
  const bool read_through = !options.tfrecord_label.empty() || !options.tfrecord_sample.empty();
  const size_t n_shards = shards_.size();
  std::vector<ShardScan> scans(n_shards);

  // Index files first: they need no read of the shards at all.
  std::vector<std::string> index_paths(n_shards);
  bool all_indexed = !read_through;
  if (!read_through) {
    for (size_t s = 0; s < n_shards; ++s) {
      index_paths[s] = FindIndexFile(env, shards_[s], options);
      all_indexed = all_indexed && !index_paths[s].empty();
    }
  }
  ListingCache cache(scan, "tfrecord", options.tfrecord_label + ";" + options.tfrecord_sample, shards_);
  std::string cached;
  bool loaded = false;
  if (!all_indexed && cache.Load(&cached)) {
    BinaryReader r(cached.data(), cached.size());
    uint64_t n = 0;
    bool ok = r.Count(&n, 40);
    std::vector<Record> records(ok ? n : 0);
    std::vector<int32_t> labels(ok ? n : 0);
    std::vector<int64_t> sizes(ok ? n : 0);
    for (uint64_t i = 0; ok && i < n; ++i) {
      Record& rec = records[i];
      ok = r.U32(&rec.shard) && r.I64(&rec.offset) && r.I64(&rec.length) && r.I64(&rec.sample_offset) &&
           r.I64(&sizes[i]) && r.I32(&labels[i]) && rec.shard < n_shards && rec.offset >= 0 && rec.length >= 0 &&
           rec.sample_offset >= 0 && sizes[i] >= 0 && rec.sample_offset + sizes[i] <= rec.length &&
           rec.offset + kHeader + rec.length + kFooter <= shards_[rec.shard].size && labels[i] >= 0 &&
           labels[i] <= kMaxLabel;
    }
    if (ok && r.AtEnd()) {
      records_ = std::move(records);
      index_.labels = std::move(labels);
      index_.sizes = std::move(sizes);
      loaded = true;
      from_cache_ = true;
    }
  }
  if (!loaded) {
    ParallelFor(static_cast<int64_t>(n_shards), scan.ListingThreads(), [&](int64_t s) {
      const auto k = static_cast<size_t>(s);
      ShardScanner scanner(shards_[k], options_, scan.keep_damaged);
      if (!index_paths[k].empty()) {
        scans[k] = scanner.FromIndex(index_paths[k], env->ReadWholeFile(index_paths[k]));
      } else {
        scans[k] = scanner.Scan(env, read_through);
      }
    });
    for (size_t s = 0; s < n_shards; ++s) {
      if (!scans[s].damage.empty()) damage_.push_back(scans[s].damage);
      damaged_samples_.insert(damaged_samples_.end(), scans[s].lost.begin(), scans[s].lost.end());
      if (!scans[s].index_file.empty()) index_files_used_.push_back(scans[s].index_file);
      for (const auto& rec : scans[s].records) {
        records_.push_back({static_cast<uint32_t>(s), rec.offset, rec.length, rec.sample_offset});
        index_.labels.push_back(rec.label);
        index_.sizes.push_back(rec.sample_size);
      }
    }
    if (!all_indexed && damage_.empty() && !records_.empty()) {
      BinaryWriter w;
      w.U64(records_.size());
      for (size_t i = 0; i < records_.size(); ++i) {
        w.U32(records_[i].shard);
        w.I64(records_[i].offset);
        w.I64(records_[i].length);
        w.I64(records_[i].sample_offset);
        w.I64(index_.sizes[i]);
        w.I32(index_.labels[i]);
      }
      cache.Store(w.data());
    }
  }
  if (records_.empty()) {
    throw InvalidArgumentError("'" + spec + "' holds no TFRecord record (" + std::to_string(n_shards) +
                               " shard(s), all empty or damaged at their start)");
  }
  if (!options.tfrecord_labels_file.empty()) {
    index_.labels = ReadLabelsFile(env, options.tfrecord_labels_file, records_.size());
  }
  int32_t max_label = 0;
  for (int32_t l : index_.labels) max_label = std::max(max_label, l);
  for (int32_t c = 0; c <= max_label; ++c) index_.classes.push_back(std::to_string(c));
  index_.names.reserve(records_.size());
  std::vector<int64_t> ordinal(n_shards, 0);
  for (const auto& rec : records_) {
    index_.names.push_back(shards_[rec.shard].path + "#" + std::to_string(ordinal[rec.shard]++));
  }
  files_.resize(n_shards);
}

std::string TFRecordSource::Describe(int64_t i) const {
  const Record& r = records_[static_cast<size_t>(i)];
  return shards_[r.shard].path + " record at offset " + std::to_string(r.offset) + " (sample " + std::to_string(i) +
         ")";
}

SampleIdentity TFRecordSource::Identity(int64_t i) const {
  return {index_.sizes[static_cast<size_t>(i)], shards_[records_[static_cast<size_t>(i)].shard].mtime_ns};
}

ReadableFile* TFRecordSource::ShardFile(uint32_t shard) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!files_[shard]) files_[shard] = Open(shards_[shard].path);
  return files_[shard].get();
}

void TFRecordSource::CheckRecord(int64_t i, const uint8_t* record) const {
  const Record& r = records_[static_cast<size_t>(i)];
  const uint64_t length = LoadLe64(record);
  std::string why;
  if (!LengthCrcOk(record)) {
    why = "its length field fails its CRC-32C";
  } else if (length != static_cast<uint64_t>(r.length)) {
    why = "its length field says " + std::to_string(length) + " bytes, the index " + std::to_string(r.length);
  } else if (MaskCrc32c(Crc32c(record + kHeader, static_cast<size_t>(r.length))) !=
             LoadLe32(record + kHeader + r.length)) {
    why = "its payload fails its CRC-32C";
  }
  if (!why.empty()) {
    throw InvalidArgumentError(Describe(i) + " is corrupt: " + why +
                               " (the shard was damaged or changed after it was indexed)");
  }
}

SampleBuffer TFRecordSource::Read(int64_t i) {
  CheckSample(i);
  const Record& r = records_[static_cast<size_t>(i)];
  const int64_t whole = kHeader + r.length + kFooter;
  if (r.offset + whole > shards_[r.shard].size) {
    throw InvalidArgumentError(Describe(i) + " is cut short: the shard ends before the record's " +
                               std::to_string(whole) + " bytes");
  }
  SampleBuffer bytes = SampleBuffer::Allocate(whole);
  ShardFile(r.shard)->ReadExact(r.offset, bytes.data.get(), whole);
  CheckRecord(i, bytes.data.get());
  const int64_t size = index_.sizes[static_cast<size_t>(i)];
  std::memmove(bytes.data.get(), bytes.data.get() + kHeader + r.sample_offset, static_cast<size_t>(size));
  bytes.size = size;
  return bytes;
}

Source::Extent TFRecordSource::ExtentOf(int64_t i) const {
  const Record& r = records_[static_cast<size_t>(i)];
  return {static_cast<int64_t>(r.shard), r.offset + kHeader + r.sample_offset, index_.sizes[static_cast<size_t>(i)]};
}

std::vector<SampleBuffer> TFRecordSource::ReadRun(int64_t first, int64_t count) {
  CheckSample(first);
  CheckSample(first + count - 1);
  const Record& a = records_[static_cast<size_t>(first)];
  const Record& b = records_[static_cast<size_t>(first + count - 1)];
  const int64_t end = b.offset + kHeader + b.length + kFooter;
  bool in_order = count > 1 && a.shard == b.shard && end <= shards_[a.shard].size;
  for (int64_t i = first + 1; in_order && i < first + count; ++i) {
    const Record& prev = records_[static_cast<size_t>(i - 1)];
    const Record& r = records_[static_cast<size_t>(i)];
    in_order = r.shard == a.shard && r.offset >= prev.offset + kHeader + prev.length + kFooter;
  }
  if (!in_order) return Source::ReadRun(first, count);
  std::unique_ptr<uint8_t[]> span(new uint8_t[static_cast<size_t>(end - a.offset)]);
  ReadInPieces(ShardFile(a.shard), a.offset, end - a.offset, span.get());
  std::vector<SampleBuffer> out;
  for (int64_t i = first; i < first + count; ++i) {
    const Record& r = records_[static_cast<size_t>(i)];
    const uint8_t* record = span.get() + (r.offset - a.offset);
    CheckRecord(i, record);
    SampleBuffer bytes = SampleBuffer::Allocate(index_.sizes[static_cast<size_t>(i)]);
    std::memcpy(bytes.data.get(), record + kHeader + r.sample_offset, static_cast<size_t>(bytes.size));
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace hdmlp
