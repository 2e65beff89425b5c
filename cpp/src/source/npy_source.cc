#include "hdmlp/source/npy_source.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/source/listing_cache.h"
#include "hdmlp/source/npy_header.h"
#include "hdmlp/source/zip_directory.h"
#include "hdmlp/util/binary_io.h"
#include "hdmlp/util/crc32.h"
#include "hdmlp/util/parallel_for.h"

namespace hdmlp {
namespace {

constexpr int64_t kHeadRead = 512;             // what an .npy header usually fits in (numpy's: 128 bytes)
constexpr int64_t kMaxLabelMember = 1 << 20;   // a label member is a few hundred bytes

// Inflates raw deflate data in[0, in_n) into out[0, out_n). With `whole`,
// the stream must end exactly there; without, it stops once out is full.
// Returns the bytes produced, or -1 with *error.
int64_t Inflate(const uint8_t* in, int64_t in_n, uint8_t* out, int64_t out_n, bool whole, std::string* error) {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {
    *error = "zlib could not start inflating";
    return -1;
  }
  int64_t in_left = in_n, out_left = out_n;
  z.next_in = const_cast<Bytef*>(in);
  z.next_out = out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (z.avail_in == 0 && in_left > 0) {
      z.avail_in = static_cast<uInt>(std::min<int64_t>(in_left, 1 << 30));
      in_left -= z.avail_in;
    }
    if (z.avail_out == 0 && out_left > 0) {
      z.avail_out = static_cast<uInt>(std::min<int64_t>(out_left, 1 << 30));
      out_left -= z.avail_out;
    }
    if (z.avail_out == 0 && !whole) break;
    const uInt before_in = z.avail_in, before_out = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && (z.avail_in != before_in || z.avail_out != before_out)) rc = Z_OK;
  }
  const int64_t produced = out_n - out_left - z.avail_out;
  inflateEnd(&z);
  if (rc == Z_STREAM_END) {
    if (whole && produced != out_n) {
      *error = "it inflates to " + std::to_string(produced) + " bytes, its directory says " + std::to_string(out_n);
      return -1;
    }
    return produced;
  }
  if (rc == Z_OK && !whole) return produced;
  if (whole && rc == Z_BUF_ERROR && produced == out_n) {
    *error = "it inflates to more than the " + std::to_string(out_n) + " bytes its directory says";
  } else {
    *error = std::string("its deflate stream is damaged (zlib: ") + (z.msg != nullptr ? z.msg : zError(rc)) + ")";
  }
  return -1;
}

void SwapBytes(uint8_t* data, int64_t bytes, int64_t element_size) {
  for (int64_t i = 0; i + element_size <= bytes; i += element_size) std::reverse(data + i, data + i + element_size);
}

struct Scanned {
  NpySource::Entry entry;
  NpyHeader header;
  int32_t label = 0;
};

class FileScanner {
 public:
  FileScanner(const ListedFile& f, const SourceOptions& o) : f_(f), o_(o) {}

  Scanned Scan(Env* env) {
    auto file = env->OpenForRead(f_.path);
    uint8_t magic[4] = {0, 0, 0, 0};
    file->ReadUpTo(0, magic, std::min<int64_t>(4, f_.size));
    const bool npz = std::memcmp(magic, "PK\x03\x04", 4) == 0 || (f_.size < 22 && HasExtension(f_.path, {".npz"}));
    if (!npz && !o_.npz_label_member.empty()) {
      Fail("is an .npy file, which has no member '" + o_.npz_label_member +
           "' to take a label from (npz_label_member applies to .npz files)");
    }
    if (!npz) return ScanNpy(file.get());
    return ScanNpz(file.get());
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw InvalidArgumentError("NumPy file '" + f_.path + "' " + why);
  }

  NpyHeader Header(const uint8_t* data, int64_t n, int64_t available, const std::string& what,
                   const std::function<std::vector<uint8_t>(int64_t)>& more) {
    NpyHeader h;
    std::string error;
    size_t needed = 0;
    if (ParseNpyHeader(data, static_cast<size_t>(n), &h, &error, &needed)) return h;
    if (needed > 0 && static_cast<int64_t>(needed) <= available) {
      const std::vector<uint8_t> bigger = more(static_cast<int64_t>(needed));
      if (ParseNpyHeader(bigger.data(), bigger.size(), &h, &error, &needed)) return h;
    }
    if (error.empty()) error = "it ends inside its .npy header (cut short)";
    Fail(what + "has a bad header: " + error);
  }

  Scanned ScanNpy(ReadableFile* file) {
    Scanned s;
    const int64_t n = std::min(kHeadRead, f_.size);
    std::vector<uint8_t> head(static_cast<size_t>(n));
    file->ReadExact(0, head.data(), n);
    s.header = Header(head.data(), n, f_.size, "", [&](int64_t need) {
      std::vector<uint8_t> b(static_cast<size_t>(need));
      file->ReadExact(0, b.data(), need);
      return b;
    });
    if (s.header.header_size + s.header.data_bytes > f_.size) {
      Fail("is cut short: its header says " + std::to_string(s.header.data_bytes) + " bytes of " + s.header.descr +
           " elements after byte " + std::to_string(s.header.header_size) + ", and the file has " +
           std::to_string(f_.size) + " bytes; copy it again");
    }
    s.entry.offset = s.header.header_size;
    s.entry.header_size = s.header.header_size;
    s.entry.byte_swapped = s.header.byte_swapped;
    return s;
  }

  // The first `n` bytes of member m (stored or deflated).
  std::vector<uint8_t> MemberHead(ReadableFile* file, const ZipMember& m, int64_t n) {
    n = std::min(n, m.size);
    std::vector<uint8_t> out(static_cast<size_t>(n));
    if (m.method == 0) {
      file->ReadExact(m.data_offset, out.data(), n);
      return out;
    }
    // Deflate: at most ~1032:1, so the compressed bytes that can hold n
    // bytes of output, plus a margin, are enough.
    const int64_t c = std::min(m.compressed_size, n + 1024 + n / 2);
    std::vector<uint8_t> in(static_cast<size_t>(c));
    file->ReadExact(m.data_offset, in.data(), c);
    std::string error;
    const int64_t got = Inflate(in.data(), c, out.data(), n, false, &error);
    if (got < 0) Fail("member '" + m.name + "' does not inflate: " + error);
    out.resize(static_cast<size_t>(got));
    return out;
  }

  const ZipMember& Member(const ZipDirectory& dir, const std::string& want, const std::string& option) {
    const ZipMember* m = nullptr;
    if (want.empty()) {
      if (!dir.members().empty()) m = &dir.members().front();
    } else {
      m = dir.Find(want + ".npy");
      if (m == nullptr) m = dir.Find(want);
    }
    if (m == nullptr) {
      std::string names;
      for (const auto& x : dir.members()) {
        std::string name = x.name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
        names += (names.empty() ? "'" : ", '") + name + "'";
      }
      Fail(want.empty() ? std::string("is an empty .npz archive")
                        : "has no member '" + want + "' (its members: " + (names.empty() ? "none" : names) +
                              "); choose it with " + option);
    }
    if (m->method != 0 && m->method != 8) {
      Fail("member '" + m->name + "' is compressed with zip method " + std::to_string(m->method) +
           "; hdmlp reads stored and deflated members (np.savez, np.savez_compressed)");
    }
    return *m;
  }

  Scanned ScanNpz(ReadableFile* file) {
    Scanned s;
    const ZipDirectory dir = ZipDirectory::Read(file, f_.size, f_.path);
    const ZipMember& m = Member(dir, o_.npz_member, "npz_member");
    const std::vector<uint8_t> head = MemberHead(file, m, kHeadRead);
    s.header = Header(head.data(), static_cast<int64_t>(head.size()), m.size, "member '" + m.name + "' ",
                      [&](int64_t need) { return MemberHead(file, m, need); });
    if (s.header.header_size + s.header.data_bytes != m.size) {
      Fail("member '" + m.name + "' holds " + std::to_string(m.size) + " bytes, and its header says " +
           std::to_string(s.header.header_size) + " + " + std::to_string(s.header.data_bytes) +
           " (a damaged archive); write it again");
    }
    s.entry.npz = true;
    s.entry.method = m.method;
    s.entry.crc32 = m.crc32;
    s.entry.offset = m.data_offset;
    s.entry.stored_size = m.compressed_size;
    s.entry.member_size = m.size;
    s.entry.header_size = s.header.header_size;
    s.entry.byte_swapped = s.header.byte_swapped;
    s.entry.member = m.name;
    if (!o_.npz_label_member.empty()) s.label = Label(file, Member(dir, o_.npz_label_member, "npz_label_member"));
    return s;
  }

  int32_t Label(ReadableFile* file, const ZipMember& m) {
    if (m.size > kMaxLabelMember) Fail("label member '" + m.name + "' is too large for a label");
    const std::vector<uint8_t> bytes = MemberHead(file, m, m.size);
    if (static_cast<int64_t>(bytes.size()) != m.size || Crc32(bytes.data(), m.size) != m.crc32) {
      Fail("label member '" + m.name + "' fails its CRC-32 (a damaged archive)");
    }
    NpyHeader h;
    std::string error;
    size_t needed = 0;
    if (!ParseNpyHeader(bytes.data(), bytes.size(), &h, &error, &needed)) {
      Fail("label member '" + m.name + "' has a bad header: " + (error.empty() ? "cut short" : error));
    }
    const char kind = h.descr.size() > 1 ? h.descr[1] : '?';
    if ((kind != 'i' && kind != 'u') || h.data_bytes != h.element_size || h.element_size > 8 ||
        h.header_size + h.data_bytes > m.size) {
      Fail("label member '" + m.name + "' holds " + h.descr + " of " + std::to_string(h.data_bytes / h.element_size) +
           " elements; a label member holds one integer");
    }
    uint8_t raw[8] = {};
    std::memcpy(raw, bytes.data() + h.header_size, static_cast<size_t>(h.element_size));
    if (h.byte_swapped) std::reverse(raw, raw + h.element_size);
    // The integer in its own width and signedness (the type of x), widened.
    const auto as = [&raw](auto x) {
      std::memcpy(&x, raw, sizeof x);
      return static_cast<int64_t>(x);
    };
    const bool u = kind == 'u';
    int64_t v = 0;
    switch (h.element_size) {
      case 1: v = u ? as(uint8_t{}) : as(int8_t{}); break;
      case 2: v = u ? as(uint16_t{}) : as(int16_t{}); break;
      case 4: v = u ? as(uint32_t{}) : as(int32_t{}); break;
      default: v = as(int64_t{}) < 0 && u ? -1 : as(int64_t{}); break;  // a u8 past 2**63: -1, out of range
    }
    if (v < 0 || v > kMaxLabel) {
      Fail("label member '" + m.name + "' holds " + std::to_string(v) + "; labels are 0 to " +
           std::to_string(kMaxLabel));
    }
    return static_cast<int32_t>(v);
  }

  const ListedFile& f_;
  const SourceOptions& o_;
};

void EncodeScanned(BinaryWriter* w, const Scanned& s) {
  const auto& e = s.entry;
  w->U32(static_cast<uint32_t>(e.npz) | (static_cast<uint32_t>(e.byte_swapped) << 1) |
         (static_cast<uint32_t>(s.header.fortran_order) << 2) | (static_cast<uint32_t>(e.method) << 16));
  w->U32(e.crc32);
  w->I64(e.offset);
  w->I64(e.stored_size);
  w->I64(e.member_size);
  w->I64(e.header_size);
  w->Str(e.member);
  w->Str(s.header.descr);
  w->Str(s.header.dtype);
  w->I64(s.header.element_size);
  w->I64(s.header.data_bytes);
  w->U64(s.header.shape.size());
  for (int64_t d : s.header.shape) w->I64(d);
  w->I32(s.label);
}

bool DecodeScanned(BinaryReader* r, Scanned* s) {
  uint32_t bits = 0;
  uint64_t dims = 0;
  auto& e = s->entry;
  if (!(r->U32(&bits) && r->U32(&e.crc32) && r->I64(&e.offset) && r->I64(&e.stored_size) && r->I64(&e.member_size) &&
        r->I64(&e.header_size) && r->Str(&e.member) && r->Str(&s->header.descr) && r->Str(&s->header.dtype) &&
        r->I64(&s->header.element_size) && r->I64(&s->header.data_bytes) && r->Count(&dims, 8))) {
    return false;
  }
  e.npz = bits & 1;
  e.byte_swapped = (bits >> 1) & 1;
  s->header.fortran_order = (bits >> 2) & 1;
  s->header.byte_swapped = e.byte_swapped;
  e.method = static_cast<uint16_t>(bits >> 16);
  s->header.header_size = e.header_size;
  s->header.shape.resize(dims);
  for (auto& d : s->header.shape) {
    if (!r->I64(&d)) return false;
  }
  return r->I32(&s->label) && s->label >= 0 && s->label <= kMaxLabel && e.offset >= 0 && e.header_size >= 0 &&
         s->header.element_size > 0 && s->header.data_bytes >= 0 && (e.method == 0 || e.method == 8);
}

}  // namespace

const std::vector<std::string>& NpySource::Extensions() {
  static const std::vector<std::string> extensions = {".npy", ".npz"};
  return extensions;
}

NpySource::NpySource(Env* env, const std::string& spec, const SourceOptions& options, const ScanOptions& scan)
    : Source("npy", env, spec) {
  if (options.npy_as != "array" && options.npy_as != "bytes") {
    throw InvalidArgumentError("source option npy_as is '" + options.npy_as + "': it is \"array\" or \"bytes\"");
  }
  arrays_ = options.npy_as == "array";
  files_ = ListDatasetFiles(env, spec, "NumPy file", Extensions());
  const size_t n = files_.size();
  std::vector<Scanned> scanned(n);
  ListingCache cache(scan, "npy", options.npz_member + ";" + options.npz_label_member, files_);
  std::string cached;
  bool loaded = false;
  if (cache.Load(&cached)) {
    BinaryReader r(cached.data(), cached.size());
    uint64_t count = 0;
    bool ok = r.U64(&count) && count == n;
    for (size_t i = 0; ok && i < n; ++i) {
      ok = DecodeScanned(&r, &scanned[i]) &&
           (scanned[i].entry.npz ? scanned[i].entry.offset + scanned[i].entry.stored_size <= files_[i].size
                                 : scanned[i].entry.offset + scanned[i].header.data_bytes <= files_[i].size);
    }
    loaded = ok && r.AtEnd();
    from_cache_ = loaded;
  }
  if (!loaded) {
    ParallelFor(static_cast<int64_t>(n), scan.ListingThreads(), [&](int64_t i) {
      scanned[static_cast<size_t>(i)] = FileScanner(files_[static_cast<size_t>(i)], options).Scan(env);
    });
    BinaryWriter w;
    w.U64(n);
    for (const auto& s : scanned) EncodeScanned(&w, s);
    cache.Store(w.data());
  }
  if (arrays_) {
    const NpyHeader& first = scanned.front().header;
    const std::string problem = first.ArrayProblem();
    if (!problem.empty()) {
      throw InvalidArgumentError("NumPy file '" + files_.front().path + "' cannot be delivered as an array: " +
                                 problem + "; or open with source_options={\"npy_as\": \"bytes\"} for its bytes");
    }
    for (size_t i = 1; i < n; ++i) {
      const NpyHeader& h = scanned[i].header;
      if (h.dtype != first.dtype || h.shape != first.shape || h.fortran_order) {
        const ArraySpec a{first.dtype, first.shape, first.element_size};
        const ArraySpec b{h.dtype.empty() ? h.descr : h.dtype, h.shape, h.element_size};
        throw InvalidArgumentError("NumPy file '" + files_[i].path + "' holds " + b.ToString() +
                                   (h.fortran_order ? " in Fortran order" : "") + ", and '" + files_.front().path +
                                   "' holds " + a.ToString() +
                                   ": array samples must all have one dtype and shape; open with "
                                   "source_options={\"npy_as\": \"bytes\"} to receive each file's bytes instead");
      }
    }
    spec_ = {first.dtype, first.shape, first.element_size};
  }
  int32_t max_label = 0;
  for (size_t i = 0; i < n; ++i) {
    entries_.push_back(scanned[i].entry);
    index_.names.push_back(files_[i].path);
    index_.labels.push_back(scanned[i].label);
    index_.sizes.push_back(arrays_ ? scanned[i].header.data_bytes : files_[i].size);
    max_label = std::max(max_label, scanned[i].label);
  }
  for (int32_t c = 0; c <= max_label; ++c) index_.classes.push_back(std::to_string(c));
}

std::string NpySource::Describe(int64_t i) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  return files_[static_cast<size_t>(i)].path + (e.npz && arrays_ ? " member '" + e.member + "'" : std::string()) +
         " (sample " + std::to_string(i) + ")";
}

SampleIdentity NpySource::Identity(int64_t i) const {
  return {index_.sizes[static_cast<size_t>(i)], files_[static_cast<size_t>(i)].mtime_ns};
}

SampleBuffer NpySource::Read(int64_t i) {
  CheckSample(i);
  if (arrays_) return ReadArray(i);
  const ListedFile& f = files_[static_cast<size_t>(i)];
  auto file = Open(f.path);
  SampleBuffer bytes = SampleBuffer::Allocate(f.size);
  file->ReadExact(0, bytes.data.get(), f.size);
  return bytes;
}

SampleBuffer NpySource::ReadMember(int64_t i, ReadableFile* file) {
  const Entry& e = entries_[static_cast<size_t>(i)];
  SampleBuffer member = SampleBuffer::Allocate(e.member_size);
  if (e.method == 0) {
    file->ReadExact(e.offset, member.data.get(), e.member_size);
  } else {
    std::unique_ptr<uint8_t[]> packed(new uint8_t[static_cast<size_t>(std::max<int64_t>(e.stored_size, 1))]);
    file->ReadExact(e.offset, packed.get(), e.stored_size);
    std::string error;
    if (Inflate(packed.get(), e.stored_size, member.data.get(), e.member_size, true, &error) < 0) {
      throw InvalidArgumentError(Describe(i) + " does not inflate: " + error + " (a damaged archive)");
    }
  }
  if (Crc32(member.data.get(), e.member_size) != e.crc32) {
    throw InvalidArgumentError(Describe(i) + " fails its CRC-32 (the file was damaged or changed after it was indexed)");
  }
  return member;
}

SampleBuffer NpySource::ReadArray(int64_t i) {
  const Entry& e = entries_[static_cast<size_t>(i)];
  const int64_t bytes = index_.sizes[static_cast<size_t>(i)];
  auto file = Open(files_[static_cast<size_t>(i)].path);
  SampleBuffer out;
  if (!e.npz) {
    out = SampleBuffer::Allocate(bytes);
    file->ReadExact(e.offset, out.data.get(), bytes);
  } else {
    out = ReadMember(i, file.get());
    std::memmove(out.data.get(), out.data.get() + e.header_size, static_cast<size_t>(bytes));
    out.size = bytes;
  }
  if (e.byte_swapped) SwapBytes(out.data.get(), bytes, spec_.element_size);
  return out;
}

}  // namespace hdmlp
