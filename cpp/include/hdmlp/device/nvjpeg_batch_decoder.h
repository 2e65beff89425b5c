// NvjpegBatchDecoder: a batch of JPEG files decoded by a GPU with nvJPEG, the
// whole batch in one call, each image into planar RGB device memory.
//
// This is the device half of ImgDecode(device="cuda") for when the node's
// CPUs cannot decode as fast as a small model trains (docs/gpu.md). It is
// built only where the CUDA toolkit's nvJPEG is found at build time, into its
// own module (hdmlp._nvjpeg); hdmlp_core never links CUDA.
//
// Backends, tried in this order by kAuto:
//   - kHardware: the GPU's JPEG engines (A100, H100, ...): the Huffman decode
//     too runs off the CPU. Baseline JPEGs of one scan only.
//   - kGpuHybrid: the Huffman decode in CUDA kernels for batches of more than
//     50 images (fewer go to the CPU, as kDefault).
//   - kDefault: nvJPEG's choice, which for a batch decodes the Huffman codes
//     on the calling thread (what torchvision's decode_jpeg does).
// Probe() parses each file's header on the host and says whether the chosen
// backend can decode it; a caller sends the others (progressive files on the
// hardware engines, CMYK, not a JPEG) to the CPU chain, which names a bad
// file in its error.
//
// Memory and streams belong to the caller: Decode() writes each image's three
// planes (R, G, B, each height x width bytes, rows packed) at the device
// address it is given and enqueues the work on the given CUDA stream; it
// returns once the work is enqueued. The calling thread's current CUDA
// context must be the one that owns that memory and stream.
//
// Thread-safety: one thread at a time per decoder (the state is reused from
// batch to batch). Not copyable.
#ifndef HDMLP_DEVICE_NVJPEG_BATCH_DECODER_H_
#define HDMLP_DEVICE_NVJPEG_BATCH_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hdmlp {

enum class NvjpegBackend { kAuto, kHardware, kGpuHybrid, kDefault };

// "auto", "hardware", "gpu_hybrid" or "default"; anything else throws std::invalid_argument naming the choices.
NvjpegBackend ParseNvjpegBackend(const std::string& name);
const char* NvjpegBackendName(NvjpegBackend backend);

struct EncodedJpeg {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct JpegProbe {
  int height = 0;
  int width = 0;
  int components = 0;
  bool decodable = false;  // by this decoder's backend, into RGB
};

class NvjpegBatchDecoder {
 public:
  // Throws std::runtime_error naming the nvJPEG call and status when no
  // backend of those asked for can start (no GPU, no driver, no engine).
  explicit NvjpegBatchDecoder(NvjpegBackend backend);
  ~NvjpegBatchDecoder();
  NvjpegBatchDecoder(const NvjpegBatchDecoder&) = delete;
  NvjpegBatchDecoder& operator=(const NvjpegBatchDecoder&) = delete;

  // The backend in use (never kAuto).
  NvjpegBackend backend() const { return backend_; }
  // The hardware engines and their cores, 0/0 for other backends.
  unsigned hardware_engines() const { return engines_; }
  unsigned hardware_cores_per_engine() const { return cores_per_engine_; }

  // Not decodable: files that are not JPEGs of 3 components ending in their end-of-image marker (grayscale
  // and CMYK files, files cut short), and those the backend cannot take (progressive files on the hardware
  // engines). The CPU chain decodes those, expanding grayscale to RGB as it always has, or names the file.
  std::vector<JpegProbe> Probe(const std::vector<EncodedJpeg>& files);

  // Decodes files[i] into the three planes at out[i] (3 * height * width
  // bytes, the sizes Probe gave; every file must be decodable). Throws
  // std::runtime_error naming the status if nvJPEG refuses the batch.
  void Decode(const std::vector<EncodedJpeg>& files, const std::vector<JpegProbe>& probes,
              const std::vector<uint8_t*>& out, void* cuda_stream);

 private:
  struct Handles;
  Handles* handles_ = nullptr;
  NvjpegBackend backend_ = NvjpegBackend::kAuto;
  unsigned engines_ = 0;
  unsigned cores_per_engine_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_DEVICE_NVJPEG_BATCH_DECODER_H_
