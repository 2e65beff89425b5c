#include "hdmlp/source/tf_example.h"

namespace hdmlp {
namespace {

constexpr int kVarint = 0, k64Bit = 1, kLength = 2, k32Bit = 5;

// A bounds-checked reader of protobuf's wire format over [pos, end).
class Wire {
 public:
  Wire(const uint8_t* data, size_t begin, size_t end) : data_(data), pos_(begin), end_(end) {}
  bool AtEnd() const { return pos_ >= end_; }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) return Fail("a varint runs past the end of its message");
      const uint8_t b = data_[pos_++];
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return Fail("a varint is longer than 10 bytes");
  }

  // The next field's number and wire type; a length-delimited field's
  // payload as [*begin, *end).
  bool Field(uint32_t* number, int* type, size_t* begin, size_t* end) {
    uint64_t tag;
    if (!Varint(&tag)) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<int>(tag & 7);
    if (tag >> 3 == 0 || (tag >> 3) > 0x1fffffff) return Fail("a field has number 0 or one too large");
    switch (*type) {
      case kVarint: {
        uint64_t ignored;
        *begin = pos_;
        if (!Varint(&ignored)) return false;
        *end = pos_;
        return true;
      }
      case k64Bit:
        return Skip(8, begin, end);
      case k32Bit:
        return Skip(4, begin, end);
      case kLength: {
        uint64_t len;
        if (!Varint(&len)) return false;
        return Skip(len, begin, end);
      }
      default:
        return Fail("a field has wire type " + std::to_string(*type) + " (groups are not used by tf.train.Example)");
    }
  }

  const std::string& error() const { return error_; }

 private:
  bool Skip(uint64_t n, size_t* begin, size_t* end) {
    if (n > end_ - pos_) return Fail("a field of " + std::to_string(n) + " bytes runs past the end of its message");
    *begin = pos_;
    pos_ += static_cast<size_t>(n);
    *end = pos_;
    return true;
  }
  bool Fail(const std::string& why) {
    error_ = why;
    return false;
  }

  const uint8_t* data_;
  size_t pos_, end_;
  std::string error_;
};

// Reads a Feature message [begin, end) into *out.
bool ReadFeature(const uint8_t* data, size_t begin, size_t end, ExampleFeature* out, std::string* error) {
  *out = ExampleFeature();
  Wire feature(data, begin, end);
  while (!feature.AtEnd()) {
    uint32_t number;
    int type;
    size_t b, e;
    if (!feature.Field(&number, &type, &b, &e)) {
      *error = feature.error();
      return false;
    }
    if (type != kLength || number < 1 || number > 3) continue;
    // A oneof: the last list given wins; lists of one kind merge.
    const auto kind = number == 1 ? ExampleFeature::Kind::kBytes
                      : number == 2 ? ExampleFeature::Kind::kFloat
                                    : ExampleFeature::Kind::kInt64;
    if (out->kind != kind) *out = ExampleFeature();
    out->kind = kind;
    Wire list(data, b, e);
    while (!list.AtEnd()) {
      uint32_t n;
      int t;
      size_t vb, ve;
      if (!list.Field(&n, &t, &vb, &ve)) {
        *error = list.error();
        return false;
      }
      if (n != 1) continue;
      if (kind == ExampleFeature::Kind::kBytes && t == kLength) {
        if (out->count == 0) {
          out->bytes_offset = vb;
          out->bytes_size = ve - vb;
        }
        ++out->count;
      } else if (kind == ExampleFeature::Kind::kInt64 && t == kVarint) {
        if (out->count == 0) {
          Wire v(data, vb, ve);
          uint64_t x = 0;
          v.Varint(&x);
          out->first_int = static_cast<int64_t>(x);
        }
        ++out->count;
      } else if (kind == ExampleFeature::Kind::kInt64 && t == kLength) {  // packed
        Wire packed(data, vb, ve);
        while (!packed.AtEnd()) {
          uint64_t x;
          if (!packed.Varint(&x)) {
            *error = "int64_list: " + packed.error();
            return false;
          }
          if (out->count == 0) out->first_int = static_cast<int64_t>(x);
          ++out->count;
        }
      } else if (kind == ExampleFeature::Kind::kFloat && t == k32Bit) {
        ++out->count;
      } else if (kind == ExampleFeature::Kind::kFloat && t == kLength) {  // packed
        if ((ve - vb) % 4 != 0) {
          *error = "a packed float_list of " + std::to_string(ve - vb) + " bytes, not a multiple of 4";
          return false;
        }
        out->count += static_cast<int64_t>((ve - vb) / 4);
      } else {
        *error = std::string("a ") + ExampleFeatureKindName(kind) + " value has wire type " + std::to_string(t);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

const char* ExampleFeatureKindName(ExampleFeature::Kind kind) {
  switch (kind) {
    case ExampleFeature::Kind::kBytes:
      return "bytes_list";
    case ExampleFeature::Kind::kFloat:
      return "float_list";
    case ExampleFeature::Kind::kInt64:
      return "int64_list";
    default:
      return "missing";
  }
}

bool FindExampleFeature(const uint8_t* data, size_t n, const std::string& name, ExampleFeature* out,
                        std::string* error, std::vector<std::string>* names) {
  *out = ExampleFeature();
  if (names != nullptr) names->clear();
  Wire example(data, 0, n);
  while (!example.AtEnd()) {
    uint32_t number;
    int type;
    size_t fb, fe;
    if (!example.Field(&number, &type, &fb, &fe)) {
      *error = "not a tf.train.Example: " + example.error();
      return false;
    }
    if (number != 1 || type != kLength) continue;  // not `features`
    Wire features(data, fb, fe);
    while (!features.AtEnd()) {
      size_t eb, ee;
      if (!features.Field(&number, &type, &eb, &ee)) {
        *error = "not a tf.train.Example (its Features): " + features.error();
        return false;
      }
      if (number != 1 || type != kLength) continue;  // not a map entry
      Wire entry(data, eb, ee);
      std::string key;
      size_t value_begin = 0, value_end = 0;
      bool has_value = false;
      while (!entry.AtEnd()) {
        size_t b, e;
        if (!entry.Field(&number, &type, &b, &e)) {
          *error = "not a tf.train.Example (a feature entry): " + entry.error();
          return false;
        }
        if (number == 1 && type == kLength) key.assign(reinterpret_cast<const char*>(data + b), e - b);
        if (number == 2 && type == kLength) {
          value_begin = b;
          value_end = e;
          has_value = true;
        }
      }
      if (names != nullptr) names->push_back(key);
      if (key != name) continue;
      ExampleFeature feature;
      if (has_value && !ReadFeature(data, value_begin, value_end, &feature, error)) {
        *error = "feature '" + name + "': " + *error;
        return false;
      }
      *out = feature;  // the last entry of a key wins, as in a protobuf map
      if (!has_value) out->kind = ExampleFeature::Kind::kMissing;
    }
  }
  return true;
}

}  // namespace hdmlp
