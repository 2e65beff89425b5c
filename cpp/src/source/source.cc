#include "hdmlp/source/source.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>
#include <type_traits>

#include "hdmlp/env/start_thread.h"
#include "hdmlp/errors.h"
#include "hdmlp/source/file_list.h"
#include "hdmlp/source/hdf5_source.h"
#include "hdmlp/source/image_folder_source.h"
#include "hdmlp/source/pack_source.h"
#include "hdmlp/source/npy_source.h"
#include "hdmlp/source/regular_file.h"
#include "hdmlp/source/tar_source.h"
#include "hdmlp/source/tfrecord_source.h"
#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

const char kSupported[] =
    "supported datasets are: a folder of class folders (root/<class>/<image>, as torchvision's ImageFolder); "
    "an hdmlp pack (its folder or its index.hdmlp-pack file, made by `hdmlp pack`); an HDF5 file (.h5, .hdf5) "
    "or a folder of them; WebDataset tar shards (a .tar file, a comma-separated list, a brace pattern such as "
    "shard-{000..009}.tar, or a folder of .tar files); TFRecord shards (.tfrecord, .tfrecords, .tfrec: a file, a "
    "list, a brace pattern or a folder of them); NumPy files (.npy, .npz, or a folder of them); or name the format "
    "with source=\"folder\"|\"pack\"|\"hdf5\"|\"tar\"|\"tfrecord\"|\"npy\"";

bool EndsWith(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    char c = s[s.size() - suffix.size() + i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}

bool IsHdf5Name(const std::string& name) { return EndsWith(name, ".h5") || EndsWith(name, ".hdf5"); }
bool IsTFRecordName(const std::string& name) { return HasExtension(name, TFRecordSource::Extensions()); }
bool IsNpyName(const std::string& name) { return HasExtension(name, NpySource::Extensions()); }

// The first bytes of a file, or "" when it cannot be read.
std::string Head(Env* env, const std::string& path, int64_t n) {
  try {
    auto file = env->OpenForRead(path);
    const int64_t size = std::min(n, file->Size());
    std::string data(static_cast<size_t>(size), '\0');
    file->ReadExact(0, reinterpret_cast<uint8_t*>(data.data()), size);
    return data;
  } catch (const Error&) {
    return "";
  }
}

// What kind of dataset a path is, from its name, its first bytes or what a
// folder holds; "" when none.
std::string Detect(Env* env, const std::string& path) {
  if (path.find('{') != std::string::npos || path.find(',') != std::string::npos) {
    // A list or a pattern: the format its first name has (tar by default,
    // whose source then reports a malformed pattern).
    std::vector<std::string> names;
    try {
      names = ExpandBraces(path);
    } catch (const Error&) {
    }
    if (!names.empty() && IsTFRecordName(names.front())) return "tfrecord";
    if (!names.empty() && IsNpyName(names.front())) return "npy";
    return "tar";
  }
  const FileInfo info = env->Stat(path);
  if (!info.exists) return "";
  if (!info.is_dir) {
    if (EndsWith(path, kPackIndexName) || EndsWith(path, ".hdmlp-pack")) return "pack";
    if (IsHdf5Name(path)) return "hdf5";
    if (EndsWith(path, ".tar")) return "tar";
    if (IsTFRecordName(path)) return "tfrecord";
    if (IsNpyName(path)) return "npy";
    const std::string head = Head(env, path, 512);
    if (head.compare(0, 8, "HDMLPPK1") == 0) return "pack";
    if (head.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0) return "hdf5";
    if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0) return "tar";
    if (head.compare(0, 6, "\x93NUMPY") == 0) return "npy";
    if (TFRecordSource::LooksLikeTFRecord(reinterpret_cast<const uint8_t*>(head.data()),
                                          static_cast<int64_t>(head.size()))) {
      return "tfrecord";
    }
    return "";
  }
  bool has_dir = false, has_h5 = false, has_tar = false, has_shard = false, has_tfrecord = false, has_npy = false;
  for (const auto& e : env->ListDir(path)) {
    if (e.is_dir) {
      has_dir = true;
    } else if (e.name == kPackIndexName) {
      return "pack";
    } else if (EndsWith(e.name, ".hdmlp-shard") || e.name == ".hdmlp-pack-progress") {
      has_shard = true;  // an unfinished pack (no index yet): PackSource says so
    } else if (IsHdf5Name(e.name)) {
      has_h5 = true;
    } else if (EndsWith(e.name, ".tar")) {
      has_tar = true;
    } else if (IsTFRecordName(e.name)) {
      has_tfrecord = true;
    } else if (IsNpyName(e.name)) {
      has_npy = true;
    }
  }
  if (has_shard && !has_dir) return "pack";
  if (has_dir) return "folder";
  if (has_h5) return "hdf5";
  if (has_tar) return "tar";
  if (has_tfrecord) return "tfrecord";
  if (has_npy) return "npy";
  return "folder";  // an empty folder: the image folder's scan says what is missing
}

// Opens a source of class S with the arguments its constructor takes.
template <class S>
std::unique_ptr<Source> Open(Env* env, const std::string& path, const SourceOptions& options,
                             const ScanOptions& scan) {
  if constexpr (std::is_constructible_v<S, Env*, const std::string&, const SourceOptions&, const ScanOptions&>) {
    return std::make_unique<S>(env, path, options, scan);
  } else if constexpr (std::is_constructible_v<S, Env*, const std::string&, const ScanOptions&>) {
    return std::make_unique<S>(env, path, scan);
  } else {
    return std::make_unique<S>(env, path);
  }
}

// One line per format: its name (SourceOptions::kind, Python's source=) and its class.
struct SourceEntry {
  const char* kind;
  std::unique_ptr<Source> (*open)(Env*, const std::string&, const SourceOptions&, const ScanOptions&);
};
constexpr SourceEntry kSources[] = {
    {"folder", &Open<ImageFolderSource>}, {"pack", &Open<PackSource>}, {"hdf5", &Open<Hdf5Source>},
    {"tar", &Open<TarSource>},           {"tfrecord", &Open<TFRecordSource>}, {"npy", &Open<NpySource>},
};

// One line per option: its key (the field's name) and the field.
struct SourceOptionEntry {
  const char* key;
  std::string SourceOptions::*field;
};
constexpr SourceOptionEntry kSourceOptions[] = {
    {"hdf5_samples", &SourceOptions::hdf5_samples},
    {"hdf5_labels", &SourceOptions::hdf5_labels},
    {"tar_sample_ext", &SourceOptions::tar_sample_ext},
    {"tar_label_ext", &SourceOptions::tar_label_ext},
    {"tfrecord_label", &SourceOptions::tfrecord_label},
    {"tfrecord_labels_file", &SourceOptions::tfrecord_labels_file},
    {"tfrecord_sample", &SourceOptions::tfrecord_sample},
    {"tfrecord_index", &SourceOptions::tfrecord_index},
    {"npy_as", &SourceOptions::npy_as},
    {"npz_member", &SourceOptions::npz_member},
    {"npz_label_member", &SourceOptions::npz_label_member},
};

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::vector<std::string> SourceOptionNames() {
  std::vector<std::string> names;
  for (const auto& entry : kSourceOptions) names.emplace_back(entry.key);
  return names;
}

void SetSourceOption(SourceOptions* options, const std::string& key, const std::string& value) {
  if (key == "npy_as" && value != "array" && value != "bytes") {
    throw InvalidArgumentError("source option npy_as is '" + value + "': it is \"array\" or \"bytes\"");
  }
  for (const auto& entry : kSourceOptions) {
    if (key == entry.key) {
      options->*entry.field = value;
      return;
    }
  }
  throw InvalidArgumentError("unknown source option '" + key + "': the options are " + JoinNames(SourceOptionNames()));
}

int64_t ArraySpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ArraySpec::ToString() const {
  std::string s = dtype + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t Source::Fingerprint() const {
  uint64_t h = DeriveKey({static_cast<uint64_t>(index_.classes.size()), static_cast<uint64_t>(index_.names.size())});
  auto add_string = [&h](const std::string& s) {
    uint64_t f = 0xcbf29ce484222325ULL;  // FNV-1a
    for (unsigned char c : s) f = (f ^ c) * 0x100000001b3ULL;
    h = Mix64(h ^ f);
  };
  add_string(kind_);
  for (const auto& c : index_.classes) add_string(c);
  for (size_t i = 0; i < index_.names.size(); ++i) {
    add_string(index_.names[i]);
    h = Mix64(h ^ static_cast<uint64_t>(index_.labels[i]) ^ (static_cast<uint64_t>(index_.sizes[i]) << 20));
  }
  return h;
}

void Source::ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) {
  const SampleBuffer whole = Read(i);
  if (offset < 0 || n < 0 || offset + n > whole.size) {
    throw InvalidArgumentError("bytes [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                               ") are outside " + Describe(i) + " (" + std::to_string(whole.size) + " bytes)");
  }
  std::memcpy(dst, whole.data.get() + offset, static_cast<size_t>(n));
}

std::vector<SampleBuffer> Source::ReadRun(int64_t first, int64_t count) {
  std::vector<SampleBuffer> out;
  for (int64_t i = first; i < first + count; ++i) out.push_back(Read(i));
  return out;
}

void Source::CheckRange(int64_t i, int64_t offset, int64_t n) const {
  CheckSample(i);
  if (offset < 0 || n < 0 || offset + n > index_.sizes[static_cast<size_t>(i)]) {
    throw InvalidArgumentError("bytes [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                               ") are outside " + Describe(i));
  }
}

std::vector<SampleBuffer> Source::ReadExtentRun(int64_t first, int64_t count,
                                                const std::function<int64_t(int64_t file)>& file_size,
                                                const std::function<ReadableFile*(int64_t file)>& open_file,
                                                const std::function<void(int64_t, const SampleBuffer&)>& check) {
  CheckSample(first);
  CheckSample(first + count - 1);
  const Extent a = ExtentOf(first), b = ExtentOf(first + count - 1);
  // The span holds whatever lies between the samples too (a tar's other members and headers).
  if (count == 1 || a.file != b.file || b.offset < a.offset || b.offset + b.size > file_size(a.file)) {
    return Source::ReadRun(first, count);
  }
  const int64_t span_size = b.offset + b.size - a.offset;
  std::unique_ptr<uint8_t[]> span(new uint8_t[static_cast<size_t>(span_size)]);
  ReadInPieces(open_file(a.file), a.offset, span_size, span.get());
  std::vector<SampleBuffer> out;
  for (int64_t i = first; i < first + count; ++i) {
    const Extent e = ExtentOf(i);
    if (e.file != a.file || e.offset < a.offset || e.offset + e.size > b.offset + b.size) {
      throw InvalidArgumentError(kind_ + " source: samples " + std::to_string(first) + ".." +
                                 std::to_string(first + count - 1) + " do not lie in order in one shard");
    }
    SampleBuffer bytes = SampleBuffer::Allocate(e.size);
    std::memcpy(bytes.data.get(), span.get() + (e.offset - a.offset), static_cast<size_t>(e.size));
    check(i, bytes);
    out.push_back(std::move(bytes));
  }
  return out;
}

void ReadInPieces(ReadableFile* file, int64_t offset, int64_t n, uint8_t* dst, int pieces) {
  constexpr int64_t kMinPiece = 512 << 10;
  const int64_t count = std::clamp<int64_t>(n / kMinPiece, 1, std::max(pieces, 1));
  if (count == 1) {
    file->ReadExact(offset, dst, n);
    return;
  }
  const int64_t piece = (n + count - 1) / count;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));
  const auto read_piece = [&](int64_t k) {
    try {
      const int64_t begin = k * piece;
      file->ReadExact(offset + begin, dst + begin, std::min(piece, n - begin));
    } catch (...) {
      errors[static_cast<size_t>(k)] = std::current_exception();
    }
  };
  // Pieces whose thread the OS refused (a memory or thread limit) are read
  // here, after the first: slower, never lost.
  int64_t started = 1;
  for (; started < count; ++started) {
    try {
      threads.push_back(TryStartThread("hdmlp-piece", [&read_piece, started] { read_piece(started); }));
    } catch (const ThreadStartFailed&) {
      break;
    }
  }
  read_piece(0);
  for (int64_t k = started; k < count; ++k) read_piece(k);
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::unique_ptr<ReadableFile> Source::Open(const std::string& path) {
  auto file = env_->OpenForRead(path);
  files_opened_.fetch_add(1, std::memory_order_relaxed);
  return file;
}

void Source::CheckSample(int64_t i) const {
  if (i < 0 || i >= size()) {
    throw InvalidArgumentError("sample " + std::to_string(i) + " is outside '" + root_ + "' (" +
                               std::to_string(size()) + " samples)");
  }
}

std::unique_ptr<Source> OpenSource(Env* env, const std::string& path, const SourceOptions& options,
                                   const ScanOptions& scan) {
  if (path.empty()) throw NotFoundError("dataset path is empty: pass the dataset's path; " + std::string(kSupported));
  // Before anything reads it (the format's detection reads the first bytes).
  if (path.find('{') == std::string::npos && path.find(',') == std::string::npos) {
    RequireRegularFile(env, path, "dataset path '" + path + "'");
  }
  std::string kind = options.kind;
  if (kind.empty()) {
    kind = Detect(env, path);
    if (kind.empty()) {
      const FileInfo info = env->Stat(path);
      if (!info.exists) throw NotFoundError("dataset path '" + path + "' does not exist");
      throw NotADirectoryError("dataset path '" + path + "' is not a directory, nor a dataset file hdmlp knows; " +
                               kSupported);
    }
  }
  for (const auto& entry : kSources) {
    if (kind == entry.kind) return entry.open(env, path, options, scan);
  }
  throw InvalidArgumentError("unknown source \"" + kind + "\" for '" + path + "': " + kSupported);
}

std::vector<std::string> SourceKinds() {
  std::vector<std::string> kinds;
  for (const auto& entry : kSources) kinds.emplace_back(entry.kind);
  return kinds;
}

std::vector<std::string> ExpandBraces(const std::string& pattern) {
  std::vector<std::string> out;
  // Commas outside braces separate patterns.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= pattern.size(); ++i) {
    const char c = i < pattern.size() ? pattern[i] : ',';
    if (c == '{') ++depth;
    if (c == '}') --depth;
    if (c == ',' && depth == 0) {
      const std::string part = pattern.substr(start, i - start);
      start = i + 1;
      if (part.empty()) continue;
      const size_t open = part.find('{');
      if (open == std::string::npos) {
        out.push_back(part);
        continue;
      }
      const size_t close = part.find('}', open);
      const size_t dots = part.find("..", open);
      if (close == std::string::npos || dots == std::string::npos || dots > close) {
        throw InvalidArgumentError("malformed brace pattern '" + part + "': write a range as {000..009}");
      }
      const std::string lo = part.substr(open + 1, dots - open - 1);
      const std::string hi = part.substr(dots + 2, close - dots - 2);
      const auto digits = [](const std::string& s) {
        return !s.empty() && s.size() < 18 && std::all_of(s.begin(), s.end(), [](char d) { return d >= '0' && d <= '9'; });
      };
      if (!digits(lo) || !digits(hi) || std::stoll(lo) > std::stoll(hi)) {
        throw InvalidArgumentError("malformed brace range '{" + lo + ".." + hi + "}' in '" + part +
                                   "': write it as {000..009} (first <= last, digits only)");
      }
      const std::string tail = part.substr(close + 1);
      const std::vector<std::string> rests = tail.empty() ? std::vector<std::string>{""} : ExpandBraces(tail);
      for (int64_t v = std::stoll(lo); v <= std::stoll(hi); ++v) {
        std::string number = std::to_string(v);
        if (number.size() < lo.size()) number.insert(0, lo.size() - number.size(), '0');
        for (const auto& rest : rests) out.push_back(part.substr(0, open) + number + rest);
      }
    }
  }
  return out;
}

}  // namespace hdmlp
