// Hdf5Source: both layouts, contiguous and chunked+compressed datasets,
// label arrays, reads from many threads, and corrupt files named.
#include "hdmlp/source/hdf5_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "hdmlp/errors.h"
#include "source_test_util.h"

namespace hdmlp {
namespace {

using testing::TempDir;

constexpr int kN = 24;
constexpr int kRow = 2 * 6 * 5;  // a sample: [2, 6, 5]

float Value(int sample, int k) { return static_cast<float>(sample * 1000 + k) * 0.5f; }

std::vector<float> Values() {
  std::vector<float> v;
  for (int i = 0; i < kN; ++i) {
    for (int k = 0; k < kRow; ++k) v.push_back(Value(i, k));
  }
  return v;
}

// data: contiguous; chunked: chunks of 5 rows, gzip; label: [N] ints;
// target: [N, 3] floats.
void WriteOneFile(const std::string& path) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  testing::WriteFloats(f, "data", {kN, 2, 6, 5}, Values());
  testing::WriteFloats(f, "group/chunked", {kN, 2, 6, 5}, Values(), {5, 2, 3, 5});
  std::vector<int64_t> labels;
  std::vector<float> targets;
  for (int i = 0; i < kN; ++i) {
    labels.push_back(i % 3);
    for (int k = 0; k < 3; ++k) targets.push_back(static_cast<float>(i * 10 + k));
  }
  testing::WriteInts(f, "label", labels);
  testing::WriteFloats(f, "target", {kN, 3}, targets);
  H5Fclose(f);
}

std::vector<float> Floats(const SampleBuffer& b, int64_t from, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  std::memcpy(out.data(), b.data.get() + from * 4, static_cast<size_t>(n) * 4);
  return out;
}

std::vector<float> Row(int i) {
  std::vector<float> out;
  for (int k = 0; k < kRow; ++k) out.push_back(Value(i, k));
  return out;
}

TEST(Hdf5SourceTest, OneFileContiguousAndChunkedWithLabels) {
  TempDir dir;
  WriteOneFile(dir / "set.h5");
  auto source = OpenSource(Env::Default(), dir / "set.h5");
  ASSERT_EQ(source->kind(), "hdf5");
  ASSERT_EQ(source->size(), kN);
  ASSERT_EQ(source->format(), SampleFormat::kArray);
  EXPECT_EQ(source->sample_array()->ToString(), "float32[2, 6, 5]");
  EXPECT_EQ(source->label_array(), nullptr);
  EXPECT_EQ(source->classes(), (std::vector<std::string>{"0", "1", "2"}));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(source->labels()[static_cast<size_t>(i)], i % 3);
    EXPECT_EQ(Floats(source->Read(i), 0, kRow), Row(i));
  }
  // Contiguous rows are read at their offset, without the library.
  EXPECT_EQ(static_cast<Hdf5Source*>(source.get())->library_reads(), 0);

  SourceOptions chunked;
  chunked.hdf5_samples = "group/chunked";
  chunked.hdf5_labels = "target";
  Hdf5Source c(Env::Default(), dir / "set.h5", chunked);
  ASSERT_NE(c.label_array(), nullptr);
  EXPECT_EQ(c.label_array()->ToString(), "float32[3]");
  // From 4 threads at once: the chunks are read outside the library's lock.
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kN; i += 4) {
        const SampleBuffer b = c.Read(i);
        if (Floats(b, 0, kRow) != Row(i)) wrong.fetch_add(1);
        if (Floats(b, kRow, 3) != std::vector<float>{i * 10.f, i * 10.f + 1, i * 10.f + 2}) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(c.library_reads(), kN);  // the chunked samples; the contiguous label arrays were read directly
  EXPECT_EQ(c.files_opened(), 2);        // the library's handle and the direct one, once
}

TEST(Hdf5SourceTest, FolderOfOneSampleFilesLikeCosmoFlow) {
  TempDir dir;
  for (int i = 0; i < 6; ++i) {
    const hid_t f = H5Fcreate((dir / ("univ_" + std::to_string(i) + ".hdf5")).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT,
                              H5P_DEFAULT);
    testing::WriteFloats(f, "full", {2, 6, 5}, Row(i), i % 2 ? std::vector<hsize_t>{1, 6, 5} : std::vector<hsize_t>{});
    testing::WriteFloats(f, "unitPar", {4}, {i * 1.f, 1, 2, 3});
    H5Fclose(f);
  }
  testing::WriteFile(dir / "README", "not a sample");
  SourceOptions o;
  o.hdf5_samples = "full";
  o.hdf5_labels = "unitPar";
  auto source = OpenSource(Env::Default(), dir.path(), o);
  ASSERT_EQ(source->kind(), "hdf5");
  ASSERT_EQ(source->size(), 6);
  EXPECT_EQ(source->sample_array()->ToString(), "float32[2, 6, 5]");
  EXPECT_EQ(source->label_array()->ToString(), "float32[4]");
  for (int i = 0; i < 6; ++i) {
    const SampleBuffer b = source->Read(i);
    EXPECT_EQ(Floats(b, 0, kRow), Row(i));
    EXPECT_EQ(Floats(b, kRow, 4), (std::vector<float>{i * 1.f, 1, 2, 3}));
  }
  EXPECT_EQ(source->files_opened(), 1 + 6);  // the first file at open, then one per read
}

TEST(Hdf5SourceTest, MissingDatasetListsTheFilesDatasets) {
  TempDir dir;
  WriteOneFile(dir / "set.h5");
  SourceOptions o;
  o.hdf5_samples = "images";
  try {
    Hdf5Source(Env::Default(), dir / "set.h5", o);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'images'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("set.h5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("data"), std::string::npos) << msg;  // what it has
  }
}

// Expects opening `path` with `o` to fail naming each of `parts`.
void ExpectOpenFails(const std::string& path, const SourceOptions& o, const std::vector<std::string>& parts) {
  try {
    Hdf5Source source(Env::Default(), path, o);
    ADD_FAILURE() << "opened " << path << " with " << source.size() << " samples";
  } catch (const InvalidArgumentError& e) {
    for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// A chunked float dataset of `dims` with nothing written: the file stays
// small whatever the shape claims.
void WriteEmptyChunked(const std::string& path, const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunks) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, static_cast<int>(chunks.size()), chunks.data());
  const hid_t d = H5Dcreate2(f, "data", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

// Issue 26: what a file claims is checked before anything is allocated for it.
TEST(Hdf5SourceTest, HugeShapesAndLabelsAreRefusedNamingFileAndDataset) {
  TempDir dir;
  WriteEmptyChunked(dir / "rows.h5", {hsize_t{1} << 40, 4}, {1024, 4});
  ExpectOpenFails(dir / "rows.h5", {}, {"rows.h5", "'data'", "1099511627776 rows"});
  WriteEmptyChunked(dir / "wide.h5", {4, 100000, 100000}, {1, 100, 100});
  ExpectOpenFails(dir / "wide.h5", {}, {"wide.h5", "'data'", "float32[100000, 100000]", "40000000000 bytes"});
  // A label far beyond any class count: refused, not 50M class names.
  for (int64_t label : {int64_t{50000000}, int64_t{2147483647}}) {
    const hid_t f = H5Fcreate((dir / "labels.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    testing::WriteFloats(f, "data", {3, 2}, {1, 2, 3, 4, 5, 6});
    testing::WriteInts(f, "label", {0, label, 1});
    H5Fclose(f);
    ExpectOpenFails(dir / "labels.h5", {}, {"labels.h5", "label " + std::to_string(label) + " of sample 1", "1048575"});
  }
}

TEST(Hdf5SourceTest, ANamedLabelDatasetThatDoesNotExistIsAnError) {
  TempDir dir;
  WriteOneFile(dir / "set.h5");
  SourceOptions o;
  o.hdf5_labels = "targets";
  ExpectOpenFails(dir / "set.h5", o, {"'targets'", "set.h5", "label"});
  // The default "label" stays optional.
  const hid_t f = H5Fcreate((dir / "nolabel.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  testing::WriteFloats(f, "data", {3, 2}, {1, 2, 3, 4, 5, 6});
  H5Fclose(f);
  EXPECT_EQ(Hdf5Source(Env::Default(), dir / "nolabel.h5").size(), 3);
}

TEST(Hdf5SourceTest, CorruptDataIsAnErrorNamingFileDatasetAndSample) {
  TempDir dir;
  WriteOneFile(dir / "set.h5");
  SourceOptions chunked;
  chunked.hdf5_samples = "group/chunked";
  Hdf5Source source(Env::Default(), dir / "set.h5", chunked);
  // Overwrite the compressed chunks (the largest run of non-metadata bytes
  // past the contiguous dataset) with garbage: find them by their address.
  const hid_t f = H5Fopen((dir / "set.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "group/chunked", H5P_DEFAULT);
  hsize_t origin[4] = {10, 0, 0, 0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  ASSERT_GE(H5Dget_chunk_info_by_coord(d, origin, &mask, &addr, &size), 0);
  H5Dclose(d);
  H5Fclose(f);
  {
    std::fstream out(dir / "set.h5", std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(addr));
    for (hsize_t k = 0; k < size; ++k) out.put(static_cast<char>(0xA5 ^ k));
  }
  EXPECT_EQ(Floats(source.Read(0), 0, kRow), Row(0));  // other chunks are fine
  try {
    source.Read(11);
    FAIL() << "decoded a corrupt chunk";
  } catch (const InvalidArgumentError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("set.h5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("group/chunked"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sample 11"), std::string::npos) << msg;
  }
  // A file truncated while open: the rows past its end fail, never short;
  // opened truncated, it is refused by name.
  WriteOneFile(dir / "cut.h5");
  Hdf5Source whole(Env::Default(), dir / "cut.h5");
  std::filesystem::resize_file(dir / "cut.h5", 1024);  // the datasets lie past the first 1024 bytes
  EXPECT_THROW(whole.Read(kN - 1), Error);
  try {
    Hdf5Source(Env::Default(), dir / "cut.h5");
    FAIL() << "opened a truncated file";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.h5"), std::string::npos) << e.what();
  }
  // Not an HDF5 file at all.
  testing::WriteFile(dir / "fake.h5", std::string(4096, 'x'));
  try {
    Hdf5Source(Env::Default(), dir / "fake.h5");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("fake.h5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hdmlp
