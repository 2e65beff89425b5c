#include "hdmlp/source/hdf5_source.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "hdmlp/errors.h"
#include "hdmlp/source/file_list.h"
#include "hdmlp/source/regular_file.h"

namespace hdmlp {
namespace {

// ---- The library lock and its errors -------------------------------------

std::mutex& LibraryMutex() {
  static std::mutex* mu = new std::mutex();  // never destroyed: threads may outlive static destruction
  return *mu;
}

// Holds the library for one thread; hdmlp reports errors itself, so the
// library's printing of error stacks is turned off on every thread that uses it.
class LibraryLock {
 public:
  LibraryLock() : lock_(LibraryMutex()) {
    thread_local bool quiet = false;
    if (!quiet) {
      H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
      quiet = true;
    }
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// Bytes the calling thread already read for the library (outside its lock).
struct Prefetched {
  std::string path;
  int64_t begin = 0;
  const uint8_t* data = nullptr;
  int64_t size = 0;
  bool whole_file = false;  // the whole file: the driver opens nothing
};
thread_local const std::vector<Prefetched>* t_prefetched = nullptr;
thread_local std::string t_driver_error;

class PrefetchScope {
 public:
  explicit PrefetchScope(const std::vector<Prefetched>* p) { t_prefetched = p; }
  ~PrefetchScope() { t_prefetched = nullptr; }
};

// The library's reason for the last failure on this thread, then cleared.
std::string LibraryError() {
  std::vector<std::string> parts;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        if (e->desc != nullptr && *e->desc != '\0') static_cast<std::vector<std::string>*>(data)->push_back(e->desc);
        return 0;
      },
      &parts);
  H5Eclear2(H5E_DEFAULT);
  std::string msg;
  for (size_t i = 0; i < parts.size() && i < 4; ++i) msg += (i ? ": " : "") + parts[i];
  if (!t_driver_error.empty()) {
    msg = t_driver_error + (msg.empty() ? "" : " (" + msg + ")");
    t_driver_error.clear();
  }
  return msg.empty() ? "the HDF5 library gave no reason" : msg;
}

// ---- The virtual file driver: every byte through Env ----------------------

struct DriverInfo {
  Env* env;
};

struct EnvFile {
  H5FD_t pub;  // first: the library sees an H5FD_t
  std::string path;
  std::unique_ptr<ReadableFile> file;
  const Prefetched* whole = nullptr;
  haddr_t eoa = 0;
  haddr_t eof = 0;
};

H5FD_t* DriverOpen(const char* name, unsigned flags, hid_t fapl, haddr_t) {
  if ((flags & (H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC)) != 0) {
    t_driver_error = std::string("'") + name + "': hdmlp opens HDF5 files read-only";
    return nullptr;
  }
  auto f = std::make_unique<EnvFile>();
  std::memset(&f->pub, 0, sizeof f->pub);
  f->path = name;
  if (t_prefetched != nullptr) {
    for (const auto& p : *t_prefetched) {
      if (p.whole_file && p.path == f->path) f->whole = &p;
    }
  }
  try {
    if (f->whole != nullptr) {
      f->eof = static_cast<haddr_t>(f->whole->size);
    } else {
      const auto* info = static_cast<const DriverInfo*>(H5Pget_driver_info(fapl));
      if (info == nullptr) throw IOError(std::string("'") + name + "': no Env given to the hdmlp_env driver");
      f->file = info->env->OpenForRead(name);
      f->eof = static_cast<haddr_t>(f->file->Size());
    }
  } catch (const std::exception& e) {
    t_driver_error = e.what();
    return nullptr;
  }
  return &f.release()->pub;
}

herr_t DriverClose(H5FD_t* file) {
  delete reinterpret_cast<EnvFile*>(file);
  return 0;
}

herr_t DriverQuery(const H5FD_t*, unsigned long* flags) {
  *flags = H5FD_FEAT_ACCUMULATE_METADATA;  // fewer, larger metadata reads
  return 0;
}

haddr_t DriverGetEoa(const H5FD_t* file, H5FD_mem_t) { return reinterpret_cast<const EnvFile*>(file)->eoa; }
herr_t DriverSetEoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  reinterpret_cast<EnvFile*>(file)->eoa = addr;
  return 0;
}
haddr_t DriverGetEof(const H5FD_t* file, H5FD_mem_t) { return reinterpret_cast<const EnvFile*>(file)->eof; }

herr_t DriverRead(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buf) {
  auto* f = reinterpret_cast<EnvFile*>(file);
  auto* out = static_cast<uint8_t*>(buf);
  const auto begin = static_cast<int64_t>(addr);
  const auto n = static_cast<int64_t>(size);
  if (t_prefetched != nullptr) {
    for (const auto& p : *t_prefetched) {
      if (p.path == f->path && begin >= p.begin && begin + n <= p.begin + p.size) {
        std::memcpy(out, p.data + (begin - p.begin), size);
        return 0;
      }
    }
  }
  // Past the end of the file reads as zeros, as with the library's own drivers.
  const int64_t available = std::clamp<int64_t>(static_cast<int64_t>(f->eof) - begin, 0, n);
  try {
    if (f->whole != nullptr) {
      std::memcpy(out, f->whole->data + begin, static_cast<size_t>(available));
    } else if (available > 0) {
      f->file->ReadExact(begin, out, available);
    }
  } catch (const std::exception& e) {
    t_driver_error = e.what();
    return -1;
  }
  std::memset(out + available, 0, static_cast<size_t>(n - available));
  return 0;
}

herr_t DriverWrite(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t, size_t, const void*) {
  t_driver_error = "'" + reinterpret_cast<EnvFile*>(file)->path + "': hdmlp opens HDF5 files read-only";
  return -1;
}

// Registered once, under the library lock.
hid_t DriverId() {
  static hid_t id = [] {
    static H5FD_class_t cls;
    std::memset(&cls, 0, sizeof cls);
    cls.name = "hdmlp_env";
    cls.maxaddr = (static_cast<haddr_t>(1) << 62) - 1;
    cls.fc_degree = H5F_CLOSE_WEAK;
    cls.fapl_size = sizeof(DriverInfo);
    cls.open = DriverOpen;
    cls.close = DriverClose;
    cls.query = DriverQuery;
    cls.get_eoa = DriverGetEoa;
    cls.set_eoa = DriverSetEoa;
    cls.get_eof = DriverGetEof;
    cls.read = DriverRead;
    cls.write = DriverWrite;
    const H5FD_mem_t map[] = H5FD_FLMAP_DICHOTOMY;
    std::memcpy(cls.fl_map, map, sizeof map);
    return H5FDregister(&cls);
  }();
  if (id < 0) throw IOError("cannot register hdmlp's HDF5 file driver: " + LibraryError());
  return id;
}

// Opens `path` read-only through Env (the lock must be held); on failure
// returns a negative id and the library's reason in *reason.
hid_t OpenFile(Env* env, const std::string& path, std::string* reason) {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  DriverInfo info{env};
  H5Pset_driver(fapl, DriverId(), &info);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (id < 0) *reason = LibraryError();  // before H5Pclose clears the error stack
  H5Pclose(fapl);
  return id;
}

// The datasets of a file, for messages ("data, label"), at most 10.
std::string DatasetNames(hid_t file) {
  std::vector<std::string> names;
  H5Ovisit2(
      file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        auto* out = static_cast<std::vector<std::string>*>(data);
        if (info->type == H5O_TYPE_DATASET) out->push_back(name);
        return out->size() >= 10 ? 1 : 0;
      },
      &names, H5O_INFO_BASIC);
  H5Eclear2(H5E_DEFAULT);
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

// Limits of what one source indexes: a row costs its name in memory, a
// class its name (classes are "0".."max label"), a sample one buffer.
constexpr int64_t kMaxRows = int64_t{1} << 32;
constexpr int64_t kMaxSampleBytes = int64_t{4} << 30;

bool HasLink(hid_t file, const std::string& name) {
  // H5Lexists checks one level at a time.
  size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (pos == std::string::npos) return true;
  }
}

}  // namespace

// ---- Datasets --------------------------------------------------------------

struct Hdf5Source::Dataset {
  std::string name;
  hid_t id = -1;
  hid_t mem_type = -1;           // the stored type in this machine's byte order
  std::vector<hsize_t> dims;     // the whole dataset's
  std::vector<hsize_t> chunk;    // chunked: the chunk's dims; else empty
  ArraySpec spec;                // its elements' type; shape set by the caller
  int64_t row_bytes = 0;         // one row (dims[1:]) in mem_type
  bool direct = false;           // contiguous, allocated, native: rows are read at offset
  int64_t offset = 0;

  ~Dataset() {
    if (mem_type >= 0) H5Tclose(mem_type);
    if (id >= 0) H5Dclose(id);
  }
};

namespace {

// Opens dataset `name` of `file` (the lock must be held).
std::unique_ptr<Hdf5Source::Dataset> OpenDataset(hid_t file, const std::string& name, const std::string& path) {
  auto d = std::make_unique<Hdf5Source::Dataset>();
  d->name = name;
  if (!HasLink(file, name) || (d->id = H5Dopen2(file, name.c_str(), H5P_DEFAULT)) < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InvalidArgumentError("HDF5 file '" + path + "' has no dataset '" + name + "' (its datasets: " +
                               DatasetNames(file) + "); name the samples' and labels' datasets with the hdf5 options");
  }
  const hid_t type = H5Dget_type(d->id);
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  std::string dtype;
  if (cls == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8)) {
    dtype = std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(size * 8);
  } else if (cls == H5T_FLOAT && (size == 4 || size == 8)) {
    dtype = size == 4 ? "float32" : "float64";
  }
  if (dtype.empty()) {
    H5Tclose(type);
    throw InvalidArgumentError("dataset '" + name + "' of '" + path + "' holds elements of HDF5 class " +
                               std::to_string(static_cast<int>(cls)) + " and " + std::to_string(size) +
                               " bytes; hdmlp reads arrays of 1-8 byte integers and 4 or 8 byte floats");
  }
  d->mem_type = H5Tget_native_type(type, H5T_DIR_ASCEND);
  const bool native = H5Tequal(type, d->mem_type) > 0;
  H5Tclose(type);
  d->spec.dtype = dtype;
  d->spec.element_size = static_cast<int64_t>(size);

  const hid_t space = H5Dget_space(d->id);
  const int rank = H5Sget_simple_extent_ndims(space);
  d->dims.assign(static_cast<size_t>(std::max(rank, 0)), 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, d->dims.data(), nullptr);
  H5Sclose(space);
  if (rank < 0) throw InvalidArgumentError("dataset '" + name + "' of '" + path + "' has no simple shape");

  const hid_t dcpl = H5Dget_create_plist(d->id);
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_CHUNKED) {
    d->chunk.assign(d->dims.size(), 0);
    H5Pget_chunk(dcpl, rank, d->chunk.data());
  } else if (layout == H5D_CONTIGUOUS && native && H5Pget_external_count(dcpl) == 0) {
    const haddr_t offset = H5Dget_offset(d->id);
    d->direct = offset != HADDR_UNDEF;
    d->offset = static_cast<int64_t>(offset);
  }
  H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  int64_t row = 1;
  for (size_t k = 1; k < d->dims.size(); ++k) row *= static_cast<int64_t>(d->dims[k]);
  d->row_bytes = row * d->spec.element_size;
  return d;
}

std::vector<int64_t> Dims(const std::vector<hsize_t>& dims, size_t from) {
  std::vector<int64_t> out;
  for (size_t k = from; k < dims.size(); ++k) out.push_back(static_cast<int64_t>(dims[k]));
  return out;
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// The file ranges of the allocated chunks that hold row `row` (the lock
// must be held); empty when there are too many to be worth it.
std::vector<std::pair<int64_t, int64_t>> ChunkRanges(const Hdf5Source::Dataset& d, int64_t row) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const size_t rank = d.dims.size();
  std::vector<hsize_t> origin(rank, 0), counts(rank, 1);
  origin[0] = static_cast<hsize_t>(row) / d.chunk[0] * d.chunk[0];
  int64_t total = 1;
  for (size_t k = 1; k < rank; ++k) {
    counts[k] = (d.dims[k] + d.chunk[k] - 1) / d.chunk[k];
    total *= static_cast<int64_t>(counts[k]);
  }
  if (total > 4096) return ranges;
  std::vector<hsize_t> index(rank, 0);
  for (int64_t c = 0; c < total; ++c) {
    for (size_t k = 1; k < rank; ++k) origin[k] = index[k] * d.chunk[k];
    unsigned filter_mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(d.id, origin.data(), &filter_mask, &addr, &size) >= 0 && addr != HADDR_UNDEF &&
        size > 0) {
      ranges.emplace_back(static_cast<int64_t>(addr), static_cast<int64_t>(size));
    }
    for (size_t k = rank; k-- > 1;) {  // next chunk, last dimension fastest
      if (++index[k] < counts[k]) break;
      index[k] = 0;
    }
  }
  H5Eclear2(H5E_DEFAULT);
  return ranges;
}

// Integer labels [N], each a class index: the classes are "0" to the largest.
void ReadClassLabels(hid_t dataset, int64_t n, const std::string& name, const std::string& path, SampleIndex* index) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  if (H5Dread(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    throw InvalidArgumentError("cannot read the labels '" + name + "' of '" + path + "': " + LibraryError());
  }
  int64_t max_label = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > kMaxLabel) {
      throw InvalidArgumentError("label " + std::to_string(values[i]) + " of sample " + std::to_string(i) + " in '" +
                                 name + "' of '" + path + "' is not a class index (0 to " + std::to_string(kMaxLabel) +
                                 "; the classes are \"0\" to the largest label, listed densely)");
    }
    max_label = std::max(max_label, values[i]);
  }
  index->labels.assign(values.begin(), values.end());
  for (int64_t c = 0; c <= max_label; ++c) index->classes.push_back(std::to_string(c));
}

// A sample is one buffer in memory: refused here, naming the dataset,
// rather than a bare bad_alloc at its first read.
void CheckSampleBytes(const ArraySpec& sample, const ArraySpec* label, const std::string& name,
                      const std::string& path) {
  double sample_bytes = static_cast<double>(sample.element_size);
  for (int64_t d : sample.shape) sample_bytes *= static_cast<double>(d);
  if (label != nullptr) {
    double label_bytes = static_cast<double>(label->element_size);
    for (int64_t d : label->shape) label_bytes *= static_cast<double>(d);
    sample_bytes += label_bytes;
  }
  if (sample_bytes > static_cast<double>(kMaxSampleBytes)) {
    throw InvalidArgumentError("dataset '" + name + "' of '" + path + "' has samples of " + sample.ToString() + ", " +
                               std::to_string(static_cast<int64_t>(sample_bytes)) + " bytes each: more than the " +
                               std::to_string(kMaxSampleBytes >> 30) +
                               " GiB a sample may have (each is read whole into memory); is the sample "
                               "dimension the first?");
  }
  if (sample.bytes() == 0) {
    throw InvalidArgumentError("dataset '" + name + "' of '" + path + "' has empty samples (shape " +
                               sample.ToString() + ")");
  }
}

}  // namespace

// ---- The source ---------------------------------------------------------------

Hdf5Source::Hdf5Source(Env* env, const std::string& path, const SourceOptions& options, const ScanOptions&)
    : Source("hdf5", env, path), options_(options) {
  const FileInfo info = env->Stat(path);
  if (!info.exists) throw NotFoundError("HDF5 dataset '" + path + "' does not exist");
  if (options.hdf5_samples.empty()) throw InvalidArgumentError("hdf5 samples dataset name is empty");
  folder_ = info.is_dir;
  if (folder_) {
    for (const auto& e : env->ListDir(path)) {
      if (!e.is_dir && HasExtension(e.name, {".h5", ".hdf5"})) files_.push_back(e.name);
    }
    std::sort(files_.begin(), files_.end());
    if (files_.empty()) throw NotFoundError("folder '" + path + "' holds no .h5 or .hdf5 file");
    for (const auto& name : files_) {
      RequireRegularFile(env, JoinPath(path, name), "HDF5 file '" + JoinPath(path, name) + "'");
    }
  } else {
    files_.push_back(path);
  }
  const std::string first = folder_ ? JoinPath(path, files_[0]) : path;

  LibraryLock lock;
  std::string reason;
  file_id_ = OpenFile(env, first, &reason);
  if (file_id_ < 0) throw InvalidArgumentError("cannot open HDF5 file '" + first + "': " + reason);
  files_opened_.fetch_add(1);
  try {
    samples_ = OpenDataset(file_id_, options.hdf5_samples, first);
    // The default "label" is optional; a label dataset the user named must exist.
    const bool named = options.hdf5_labels != SourceOptions().hdf5_labels;
    const bool has_labels = !options.hdf5_labels.empty() && (named || HasLink(file_id_, options.hdf5_labels));
    if (has_labels) labels_ = OpenDataset(file_id_, options.hdf5_labels, first);
    int64_t n;
    if (folder_) {
      n = static_cast<int64_t>(files_.size());
      sample_spec_ = samples_->spec;
      sample_spec_.shape = Dims(samples_->dims, 0);
      if (labels_) {
        has_label_array_ = true;
        label_spec_ = labels_->spec;
        label_spec_.shape = Dims(labels_->dims, 0);
      }
      index_.names = files_;
    } else {
      if (samples_->dims.empty()) {
        throw InvalidArgumentError("dataset '" + options.hdf5_samples + "' of '" + path +
                                   "' is a scalar; the samples must be a dataset [N, ...]");
      }
      n = static_cast<int64_t>(samples_->dims[0]);
      sample_spec_ = samples_->spec;
      sample_spec_.shape = Dims(samples_->dims, 1);
      if (samples_->dims[0] > static_cast<hsize_t>(kMaxRows)) {
        // Each row costs its name and label in memory before anything is read.
        throw InvalidArgumentError("dataset '" + options.hdf5_samples + "' of '" + path + "' has " +
                                   std::to_string(samples_->dims[0]) + " rows, more than the " +
                                   std::to_string(kMaxRows) + " (2^32) samples hdmlp indexes");
      }
      if (labels_) {
        if (labels_->dims.empty() || static_cast<int64_t>(labels_->dims[0]) != n) {
          throw InvalidArgumentError("label dataset '" + options.hdf5_labels + "' of '" + path + "' has shape " +
                                     ShapeString(Dims(labels_->dims, 0)) + ", but the sample dataset '" +
                                     options.hdf5_samples + "' has " + std::to_string(n) +
                                     " rows: it needs one label (or label array) per sample");
        }
        if (labels_->dims.size() == 1 && labels_->spec.dtype.find("int") != std::string::npos) {
          ReadClassLabels(labels_->id, n, options.hdf5_labels, path, &index_);
          labels_.reset();
        } else {
          has_label_array_ = true;
          label_spec_ = labels_->spec;
          label_spec_.shape = Dims(labels_->dims, 1);
        }
      }
      index_.names.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) index_.names.push_back(path + ":" + options.hdf5_samples + "[" + std::to_string(i) + "]");
    }
    if (n == 0) throw InvalidArgumentError("dataset '" + options.hdf5_samples + "' of '" + path + "' holds no sample");
    CheckSampleBytes(sample_spec_, has_label_array_ ? &label_spec_ : nullptr, options.hdf5_samples, path);
    if (index_.labels.empty()) index_.labels.assign(static_cast<size_t>(n), 0);
    index_.sizes.assign(static_cast<size_t>(n), sample_spec_.bytes() + (has_label_array_ ? label_spec_.bytes() : 0));
    if (folder_) {
      // Each file is opened per sample; nothing stays open.
      samples_.reset();
      labels_.reset();
      H5Fclose(file_id_);
      file_id_ = -1;
    }
  } catch (...) {
    samples_.reset();
    labels_.reset();
    if (file_id_ >= 0) H5Fclose(file_id_);
    file_id_ = -1;
    throw;
  }
  if (!folder_) {
    direct_ = Open(path);
    direct_size_ = direct_->Size();
  }
}

Hdf5Source::~Hdf5Source() {
  LibraryLock lock;
  samples_.reset();
  labels_.reset();
  if (file_id_ >= 0) H5Fclose(file_id_);
}

std::string Hdf5Source::Describe(int64_t i) const {
  if (folder_) return JoinPath(root_, files_[static_cast<size_t>(i)]) + " (sample " + std::to_string(i) + ")";
  return root_ + " dataset '" + options_.hdf5_samples + "' sample " + std::to_string(i);
}

SampleBuffer Hdf5Source::Read(int64_t i) {
  CheckSample(i);
  SampleBuffer out = SampleBuffer::Allocate(index_.sizes[static_cast<size_t>(i)]);
  if (folder_) {
    ReadFromFolder(i, out.data.get());
  } else {
    ReadFromFile(i, out.data.get());
  }
  return out;
}

void Hdf5Source::ReadRow(Dataset& d, ReadableFile* direct, int64_t row, uint8_t* dst, const std::string& what) {
  const int64_t file_size = direct_size_;
  const auto check = [&](int64_t begin, int64_t n) {
    if (begin < 0 || begin + n > file_size) {
      throw InvalidArgumentError("cannot read " + what + ": it lies at bytes [" + std::to_string(begin) + ", " +
                                 std::to_string(begin + n) + ") of '" + root_ + "', which has " +
                                 std::to_string(file_size) + " bytes (a truncated file)");
    }
  };
  if (d.direct) {
    const int64_t begin = d.offset + row * d.row_bytes;
    check(begin, d.row_bytes);
    direct->ReadExact(begin, dst, d.row_bytes);
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (!d.chunk.empty()) {
    LibraryLock lock;
    ranges = ChunkRanges(d, row);
  }
  // The chunks are read here, in parallel with other threads; the library
  // then only decodes them.
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
  std::vector<Prefetched> prefetched;
  for (const auto& [begin, n] : ranges) {
    check(begin, n);
    buffers.emplace_back(new uint8_t[static_cast<size_t>(n)]);
    direct->ReadExact(begin, buffers.back().get(), n);
    prefetched.push_back({files_[0], begin, buffers.back().get(), n, false});
  }
  LibraryLock lock;
  PrefetchScope scope(&prefetched);
  const auto rank = static_cast<int>(d.dims.size());
  std::vector<hsize_t> start(d.dims.size(), 0), count = d.dims;
  start[0] = static_cast<hsize_t>(row);
  count[0] = 1;
  const hid_t file_space = H5Dget_space(d.id);
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  const hid_t mem_space = H5Screate_simple(rank, count.data(), nullptr);
  const herr_t status = H5Dread(d.id, d.mem_type, mem_space, file_space, H5P_DEFAULT, dst);
  // Before any other call: each clears the error stack.
  const std::string reason = status < 0 ? LibraryError() : "";
  H5Sclose(mem_space);
  H5Sclose(file_space);
  if (status < 0) throw InvalidArgumentError("cannot read " + what + ": " + reason);
  library_reads_.fetch_add(1);
}

void Hdf5Source::ReadFromFile(int64_t i, uint8_t* dst) {
  ReadRow(*samples_, direct_.get(), i, dst, Describe(i));
  if (has_label_array_) {
    ReadRow(*labels_, direct_.get(), i, dst + sample_spec_.bytes(),
            "the label array of sample " + std::to_string(i) + " ('" + options_.hdf5_labels + "' in '" + root_ + "')");
  }
}

void Hdf5Source::ReadFromFolder(int64_t i, uint8_t* dst) {
  const std::string path = JoinPath(root_, files_[static_cast<size_t>(i)]);
  // The whole file is read here, outside the library's lock.
  auto file = Open(path);
  const int64_t size = file->Size();
  std::unique_ptr<uint8_t[]> bytes(new uint8_t[static_cast<size_t>(std::max<int64_t>(size, 1))]);
  file->ReadExact(0, bytes.get(), size);
  file.reset();
  const std::vector<Prefetched> whole{{path, 0, bytes.get(), size, true}};

  LibraryLock lock;
  PrefetchScope scope(&whole);
  std::string reason;
  const hid_t id = OpenFile(env_, path, &reason);
  if (id < 0) {
    throw InvalidArgumentError("cannot open HDF5 file '" + path + "' (sample " + std::to_string(i) + "): " + reason);
  }
  struct Closer {
    hid_t id;
    ~Closer() { H5Fclose(id); }
  } closer{id};
  const auto read_whole = [&](const std::string& name, const ArraySpec& spec, uint8_t* out) {
    std::unique_ptr<Dataset> d = OpenDataset(id, name, path);
    if (Dims(d->dims, 0) != spec.shape || d->spec.dtype != spec.dtype) {
      throw InvalidArgumentError("dataset '" + name + "' of '" + path + "' is " + d->spec.dtype +
                                 ShapeString(Dims(d->dims, 0)) + ", but the folder's first file has " +
                                 spec.ToString() + "; every file of the folder needs the same shape and type");
    }
    if (H5Dread(d->id, d->mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
      throw InvalidArgumentError("cannot read dataset '" + name + "' of '" + path + "' (sample " + std::to_string(i) +
                                 "): " + LibraryError());
    }
  };
  read_whole(options_.hdf5_samples, sample_spec_, dst);
  if (has_label_array_) read_whole(options_.hdf5_labels, label_spec_, dst + sample_spec_.bytes());
  library_reads_.fetch_add(1);
}

}  // namespace hdmlp
