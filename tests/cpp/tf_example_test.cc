// FindExampleFeature: the features tf.train.Example records carry, found in
// any order, lists packed or not, the last entry of a key winning; malformed
// messages refused at every cut, never read past.
#include "hdmlp/source/tf_example.h"

#include <gtest/gtest.h>

#include "tfrecord_test_util.h"

namespace hdmlp {
namespace {

using testing::BytesFeature;
using testing::Example;
using testing::Int64Feature;

ExampleFeature Find(const std::string& example, const std::string& name, std::vector<std::string>* names = nullptr) {
  ExampleFeature f;
  std::string error;
  EXPECT_TRUE(FindExampleFeature(reinterpret_cast<const uint8_t*>(example.data()), example.size(), name, &f, &error,
                                 names))
      << error;
  return f;
}

TEST(TfExampleTest, FindsBytesAndInt64Features) {
  const std::string image(300, 'J');
  const std::string ex = Example({{"image/encoded", BytesFeature({image, "second"})},
                                  {"image/class/label", Int64Feature({417, 3})},
                                  {"unpacked", Int64Feature({-5, 9}, false)}});
  const ExampleFeature img = Find(ex, "image/encoded");
  ASSERT_EQ(img.kind, ExampleFeature::Kind::kBytes);
  EXPECT_EQ(img.count, 2);
  EXPECT_EQ(ex.substr(img.bytes_offset, img.bytes_size), image);
  const ExampleFeature label = Find(ex, "image/class/label");
  ASSERT_EQ(label.kind, ExampleFeature::Kind::kInt64);
  EXPECT_EQ(label.first_int, 417);
  EXPECT_EQ(label.count, 2);
  const ExampleFeature unpacked = Find(ex, "unpacked");
  EXPECT_EQ(unpacked.first_int, -5);  // a 10-byte varint
  EXPECT_EQ(unpacked.count, 2);
  std::vector<std::string> names;
  EXPECT_EQ(Find(ex, "missing", &names).kind, ExampleFeature::Kind::kMissing);
  EXPECT_EQ(names, (std::vector<std::string>{"image/encoded", "image/class/label", "unpacked"}));
}

TEST(TfExampleTest, LastEntryOfAKeyWinsAndRepeatedFeaturesMerge) {
  // Two `features` fields: protobuf merges them; the key given twice keeps the last.
  const std::string ex = Example({{"label", Int64Feature({1})}}) + Example({{"label", Int64Feature({2})}});
  EXPECT_EQ(Find(ex, "label").first_int, 2);
}

TEST(TfExampleTest, MalformedInputIsRefusedAtEveryCut) {
  const std::string ex = Example({{"image", BytesFeature({std::string(200, 'x')})}, {"label", Int64Feature({7})}});
  int refused = 0;
  for (size_t n = 1; n < ex.size(); ++n) {
    ExampleFeature f;
    std::string error;
    if (!FindExampleFeature(reinterpret_cast<const uint8_t*>(ex.data()), n, "label", &f, &error)) {
      EXPECT_FALSE(error.empty());
      ++refused;
    }
  }
  EXPECT_GT(refused, static_cast<int>(ex.size()) / 2);
  // A group wire type and a field 0.
  for (const std::string bad : {std::string("\x0b", 1), std::string("\x02\x00", 2)}) {
    ExampleFeature f;
    std::string error;
    EXPECT_FALSE(FindExampleFeature(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "x", &f, &error));
  }
}

}  // namespace
}  // namespace hdmlp
