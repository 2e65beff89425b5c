// NpyHeader, ZipDirectory and NpySource: .npy headers of every version and
// byte order, refused headers with their reason, arrays delivered in this
// machine's byte order, a stored .npz member read in place, and cut or
// mismatched files named.
#include "hdmlp/source/npy_source.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "hdmlp/errors.h"
#include "hdmlp/source/npy_header.h"
#include "hdmlp/source/zip_directory.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using testing::TempDir;

// An .npy file as numpy writes it (version 1 unless asked).
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data, int version = 1,
                bool fortran = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const size_t preamble = version == 1 ? 10 : 12;
  while ((preamble + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(dict.size());
  out.append(reinterpret_cast<const char*>(&n), version == 1 ? 2 : 4);
  return out + dict + data;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string BigEndian(const std::vector<float>& v) {
  std::string s = Floats(v);
  for (size_t i = 0; i < s.size(); i += 4) std::reverse(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(i) + 4);
  return s;
}

void PutU16(std::string* s, uint16_t v) { s->append(reinterpret_cast<const char*>(&v), 2); }
void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }

// A zip of stored members, as zipfile writes it without compression.
std::string Zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, dir;
  for (const auto& [name, data] : members) {
    const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()),
                                                     static_cast<uInt>(data.size())));
    const uint32_t offset = static_cast<uint32_t>(out.size());
    PutU32(&out, 0x04034b50);
    PutU16(&out, 20); PutU16(&out, 0); PutU16(&out, 0); PutU16(&out, 0); PutU16(&out, 0);
    PutU32(&out, crc); PutU32(&out, static_cast<uint32_t>(data.size())); PutU32(&out, static_cast<uint32_t>(data.size()));
    PutU16(&out, static_cast<uint16_t>(name.size())); PutU16(&out, 0);
    out += name + data;
    PutU32(&dir, 0x02014b50);
    PutU16(&dir, 20); PutU16(&dir, 20); PutU16(&dir, 0); PutU16(&dir, 0); PutU16(&dir, 0); PutU16(&dir, 0);
    PutU32(&dir, crc); PutU32(&dir, static_cast<uint32_t>(data.size())); PutU32(&dir, static_cast<uint32_t>(data.size()));
    PutU16(&dir, static_cast<uint16_t>(name.size())); PutU16(&dir, 0); PutU16(&dir, 0); PutU16(&dir, 0); PutU16(&dir, 0);
    PutU32(&dir, 0); PutU32(&dir, offset);
    dir += name;
  }
  const uint32_t dir_offset = static_cast<uint32_t>(out.size());
  out += dir;
  PutU32(&out, 0x06054b50);
  PutU16(&out, 0); PutU16(&out, 0);
  PutU16(&out, static_cast<uint16_t>(members.size())); PutU16(&out, static_cast<uint16_t>(members.size()));
  PutU32(&out, static_cast<uint32_t>(dir.size())); PutU32(&out, dir_offset);
  PutU16(&out, 0);
  return out;
}

NpyHeader Parse(const std::string& bytes, std::string* error = nullptr) {
  NpyHeader h;
  std::string e;
  size_t needed = 0;
  const bool ok = ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &h, &e, &needed);
  if (error != nullptr) *error = e;
  if (error == nullptr) EXPECT_TRUE(ok) << e;
  return h;
}

ScanOptions NoCache() {
  ScanOptions scan;
  scan.use_cache = false;
  return scan;
}

TEST(NpyHeaderTest, VersionsByteOrdersAndShapes) {
  for (int version : {1, 2, 3}) {
    const std::string npy = Npy("<f4", "(2, 3)", Floats({1, 2, 3, 4, 5, 6}), version);
    const NpyHeader h = Parse(npy);
    EXPECT_EQ(h.dtype, "float32");
    EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(h.header_size, static_cast<int64_t>(npy.size()) - 24);
    EXPECT_EQ(h.header_size % 64, 0);
    EXPECT_EQ(h.data_bytes, 24);
    EXPECT_FALSE(h.byte_swapped);
  }
  EXPECT_TRUE(Parse(Npy(">i8", "(5,)", "")).byte_swapped);
  EXPECT_EQ(Parse(Npy("|u1", "()", "x")).data_bytes, 1);  // a scalar
  EXPECT_EQ(Parse(Npy("<U3", "(2,)", "")).element_size, 12);
  EXPECT_EQ(Parse(Npy("<U3", "(2,)", "")).dtype, "");  // bytes only
  EXPECT_NE(Parse(Npy("<f2", "(2,)", "")).ArrayProblem(), "");
  EXPECT_NE(Parse(Npy("<f4", "(2,)", "", 1, true)).ArrayProblem().find("Fortran"), std::string::npos);
  // Python 2's long integers in the shape.
  EXPECT_EQ(Parse(Npy("<f8", "(3L, 4L)", "")).shape, (std::vector<int64_t>{3, 4}));
}

TEST(NpyHeaderTest, BadHeadersAreRefusedWithTheirReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"GIF89a not numpy at all", "magic"},
      {Npy("<f4", "(2, 3)", "").replace(6, 1, "\x07"), "version is 7"},
      {std::string("\x93NUMPY\x01\x00\x10\x00{'descr': [('a',", 26), "structured"},
      {Npy("|O", "(2,)", ""), "object"},
      {Npy("<f4", "(2, x)", ""), "shape"},
  };
  for (const auto& [bytes, expect] : cases) {
    std::string error;
    Parse(bytes, &error);
    EXPECT_NE(error.find(expect), std::string::npos) << expect << ": " << error;
  }
  // Too short for the header: asks for more instead of failing.
  const std::string npy = Npy("<f4", "(2,)", Floats({1, 2}));
  NpyHeader h;
  std::string error;
  size_t needed = 0;
  EXPECT_FALSE(ParseNpyHeader(reinterpret_cast<const uint8_t*>(npy.data()), 20, &h, &error, &needed));
  EXPECT_EQ(needed, npy.size() - 8);
  EXPECT_TRUE(error.empty());
}

TEST(NpySourceTest, ArraysInThisMachinesByteOrderFromNpyAndStoredNpz) {
  TempDir dir;
  const std::vector<float> a = {1.5f, -2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12.25f}, c = {0, 1, 0, 1, 0, 1};
  testing::WriteFile(dir / "a.npy", Npy("<f4", "(2, 3)", Floats(a)));
  testing::WriteFile(dir / "b.npy", Npy(">f4", "(2, 3)", BigEndian(b), 2));
  const std::string label = Npy("<i8", "(1,)", std::string("\x03\0\0\0\0\0\0\0", 8));
  testing::WriteFile(dir / "c.npz", Zip({{"x.npy", Npy("<f4", "(2, 3)", Floats(c))}, {"y.npy", label}}));
  SourceOptions options;
  options.npz_label_member = "y";
  EXPECT_THROW(NpySource(Env::Default(), dir.path(), options, NoCache()), InvalidArgumentError);  // .npy has no y
  auto source = OpenSource(Env::Default(), dir / "c.npz," + dir / "a.npy," + dir / "b.npy", {}, NoCache());
  ASSERT_EQ(source->kind(), "npy");
  ASSERT_EQ(source->format(), SampleFormat::kArray);
  EXPECT_EQ(source->sample_array()->ToString(), "float32[2, 3]");
  const std::vector<std::vector<float>> want = {c, a, b};
  for (int i = 0; i < 3; ++i) {
    const SampleBuffer got = source->Read(i);
    ASSERT_EQ(got.size, 24);
    EXPECT_EQ(std::memcmp(got.data.get(), want[static_cast<size_t>(i)].data(), 24), 0) << i;
  }
  options.npz_member = "x";
  NpySource labelled(Env::Default(), dir / "c.npz", options, NoCache());
  EXPECT_EQ(labelled.labels()[0], 3);
  EXPECT_EQ(labelled.classes().size(), 4u);
  options.npz_member = "z";
  try {
    NpySource missing(Env::Default(), dir / "c.npz", options, NoCache());
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("has no member 'z' (its members: 'x', 'y')"), std::string::npos) << e.what();
  }
}

TEST(NpySourceTest, MismatchedShapesAskForBytesAndBytesAreTheFiles) {
  TempDir dir;
  const std::string a = Npy("<f4", "(2, 3)", Floats({1, 2, 3, 4, 5, 6}));
  const std::string b = Npy("<f4", "(3,)", Floats({1, 2, 3}));
  testing::WriteFile(dir / "a.npy", a);
  testing::WriteFile(dir / "b.npy", b);
  try {
    NpySource source(Env::Default(), dir.path(), {}, NoCache());
    FAIL() << "two shapes as one array";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("b.npy' holds float32[3]"), std::string::npos) << what;
    EXPECT_NE(what.find("npy_as"), std::string::npos) << what;
  }
  SourceOptions bytes;
  bytes.npy_as = "bytes";
  NpySource source(Env::Default(), dir.path(), bytes, NoCache());
  EXPECT_EQ(source.format(), SampleFormat::kEncoded);
  const SampleBuffer got = source.Read(1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.data.get()), static_cast<size_t>(got.size)), b);
}

TEST(NpySourceTest, CutFilesAreNamed) {
  TempDir dir;
  const std::string npy = Npy("<f4", "(2, 3)", Floats({1, 2, 3, 4, 5, 6}));
  for (size_t cut : {size_t{3}, size_t{30}, npy.size() - 1}) {
    testing::WriteFile(dir / "a.npy", npy.substr(0, cut));
    try {
      NpySource source(Env::Default(), dir / "a.npy", {}, NoCache());
      FAIL() << cut;
    } catch (const InvalidArgumentError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("NumPy file '" + dir / "a.npy'"), std::string::npos) << what;
      EXPECT_TRUE(what.find("cut short") != std::string::npos || what.find("magic") != std::string::npos) << what;
    }
  }
  const std::string zip = Zip({{"x.npy", npy}});
  for (size_t cut : {size_t{10}, zip.size() / 2, zip.size() - 1}) {
    testing::WriteFile(dir / "b.npz", zip.substr(0, cut));
    try {
      NpySource source(Env::Default(), dir / "b.npz", {}, NoCache());
      FAIL() << cut;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("b.npz"), std::string::npos) << e.what();
    }
  }
}

TEST(NpySourceTest, ADamagedMemberFailsItsReadNamingFileAndMember) {
  TempDir dir;
  const std::string npy = Npy("<f4", "(2, 3)", Floats({1, 2, 3, 4, 5, 6}));
  std::string zip = Zip({{"x.npy", npy}});
  testing::WriteFile(dir / "b.npz", zip);
  NpySource source(Env::Default(), dir / "b.npz", {}, NoCache());
  zip[30 + 5 + 64 + 3] ^= 0x10;  // an element's byte: local header, name, .npy header, then the data
  testing::WriteFile(dir / "b.npz", zip);
  try {
    source.Read(0);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("b.npz member 'x.npy' (sample 0) fails its CRC-32"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hdmlp
