// TfExample: finds one feature of a serialized tf.train.Example, without
// TensorFlow or the protobuf library.
//
// A TFRecord's payload is usually a tf.train.Example: a protobuf message
// Example { Features features = 1; }, Features { map<string, Feature>
// feature = 1; }, Feature { oneof { BytesList bytes_list = 1; FloatList
// float_list = 2; Int64List int64_list = 3; } }, each list a repeated field
// `value = 1` (int64 and float values packed or not). The TFRecord source
// reads labels from an int64_list feature and, optionally, the sample from a
// bytes_list feature (tfrecord_source.h); this is all it parses. Protobuf's
// rules are kept where they matter: fields in any order, unknown fields
// skipped, a repeated `features` message merged, the last entry of a key
// winning.
//
// Malformed input (a varint or a length running past the end, a group wire
// type, a field 0) is reported, never read past: FindExampleFeature returns
// false with the reason in *error.
//
// Thread-safety: reentrant.
#ifndef HDMLP_SOURCE_TF_EXAMPLE_H_
#define HDMLP_SOURCE_TF_EXAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hdmlp {

struct ExampleFeature {
  enum class Kind { kMissing, kBytes, kFloat, kInt64 };
  Kind kind = Kind::kMissing;
  int64_t count = 0;  // how many values the list holds
  // kBytes: where the first value lies in the serialized Example.
  size_t bytes_offset = 0;
  size_t bytes_size = 0;
  // kInt64: the first value.
  int64_t first_int = 0;
};

// "bytes_list", "float_list", "int64_list" or "missing".
const char* ExampleFeatureKindName(ExampleFeature::Kind kind);

// Finds feature `name` in the Example data[0, n). True with *out filled
// (kind kMissing when the Example has no such feature; then *names, when
// given, lists the features it has); false with *error for malformed input.
bool FindExampleFeature(const uint8_t* data, size_t n, const std::string& name, ExampleFeature* out,
                        std::string* error, std::vector<std::string>* names = nullptr);

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_TF_EXAMPLE_H_
