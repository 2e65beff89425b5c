// SampleBuffer: the bytes of one sample, in memory handed to Python without
// a copy. A plain owning value (movable, not copyable).
// SampleView: a sample's bytes borrowed from memory someone else owns (a
// SampleBuffer, or a memory storage class's arena); the owner says how long
// they stay valid.
#ifndef HDMLP_UTIL_SAMPLE_BUFFER_H_
#define HDMLP_UTIL_SAMPLE_BUFFER_H_

#include <cstdint>
#include <memory>

namespace hdmlp {

struct SampleBuffer {
  std::unique_ptr<uint8_t[]> data;
  int64_t size = 0;

  static SampleBuffer Allocate(int64_t size) {
    SampleBuffer b;
    b.data.reset(new uint8_t[static_cast<size_t>(size > 0 ? size : 1)]);  // uninitialised: read() fills it
    b.size = size;
    return b;
  }
};

struct SampleView {
  const uint8_t* data = nullptr;
  int64_t size = 0;

  SampleView() = default;
  SampleView(const uint8_t* d, int64_t s) : data(d), size(s) {}
  explicit SampleView(const SampleBuffer& b) : data(b.data.get()), size(b.size) {}
};

}  // namespace hdmlp

#endif  // HDMLP_UTIL_SAMPLE_BUFFER_H_
