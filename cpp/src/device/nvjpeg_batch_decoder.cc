#include "hdmlp/device/nvjpeg_batch_decoder.h"

#include <nvjpeg.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace hdmlp {
namespace {

// nvJPEG grows its buffers as larger batches come; every regrowth frees the old buffer, and cudaFree waits for
// the whole device (the training stream too). Growing by this much at a time makes that rare.
constexpr size_t kMemoryPadding = size_t{16} << 20;

const char* StatusName(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS: return "success";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocator failure (no GPU memory, or no CUDA driver)";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed (no GPU, or no CUDA driver?)";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "not supported by this GPU";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error (no GPU or no CUDA driver?)";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "not implemented for this backend";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "incomplete bitstream";
  }
  return "unknown status";
}

std::string Describe(const char* call, nvjpegStatus_t status) {
  return std::string("nvJPEG: ") + call + " failed: " + StatusName(status) + " (status " +
         std::to_string(static_cast<int>(status)) + ")";
}

void Check(const char* call, nvjpegStatus_t status) {
  if (status != NVJPEG_STATUS_SUCCESS) throw std::runtime_error(Describe(call, status));
}

nvjpegBackend_t ToNvjpeg(NvjpegBackend backend) {
  switch (backend) {
    case NvjpegBackend::kHardware: return NVJPEG_BACKEND_HARDWARE;
    case NvjpegBackend::kGpuHybrid: return NVJPEG_BACKEND_GPU_HYBRID;
    default: return NVJPEG_BACKEND_DEFAULT;
  }
}

}  // namespace

NvjpegBackend ParseNvjpegBackend(const std::string& name) {
  if (name == "auto") return NvjpegBackend::kAuto;
  if (name == "hardware") return NvjpegBackend::kHardware;
  if (name == "gpu_hybrid") return NvjpegBackend::kGpuHybrid;
  if (name == "default") return NvjpegBackend::kDefault;
  throw std::invalid_argument("nvJPEG backend '" + name + "': use one of auto, hardware, gpu_hybrid, default");
}

const char* NvjpegBackendName(NvjpegBackend backend) {
  switch (backend) {
    case NvjpegBackend::kAuto: return "auto";
    case NvjpegBackend::kHardware: return "hardware";
    case NvjpegBackend::kGpuHybrid: return "gpu_hybrid";
    case NvjpegBackend::kDefault: return "default";
  }
  return "?";
}

struct NvjpegBatchDecoder::Handles {
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t state = nullptr;
  nvjpegJpegStream_t parsed = nullptr;  // Probe's header parser

  ~Handles() {
    // Destruction statuses are dropped: there is nothing left to do about them.
    if (parsed != nullptr) nvjpegJpegStreamDestroy(parsed);
    if (state != nullptr) nvjpegJpegStateDestroy(state);
    if (handle != nullptr) nvjpegDestroy(handle);
  }
};

NvjpegBatchDecoder::NvjpegBatchDecoder(NvjpegBackend backend) {
  std::vector<NvjpegBackend> tries;
  if (backend == NvjpegBackend::kAuto) {
    tries = {NvjpegBackend::kHardware, NvjpegBackend::kGpuHybrid, NvjpegBackend::kDefault};
  } else {
    tries = {backend};
  }
  std::string why;
  for (NvjpegBackend candidate : tries) {
    auto handles = std::make_unique<Handles>();
    nvjpegStatus_t status = nvjpegCreateEx(ToNvjpeg(candidate), nullptr, nullptr, 0, &handles->handle);
    if (status != NVJPEG_STATUS_SUCCESS) {
      handles->handle = nullptr;
      why += (why.empty() ? "" : "; ") + std::string(NvjpegBackendName(candidate)) + ": " +
             Describe("nvjpegCreateEx", status);
      continue;
    }
    unsigned engines = 0;
    unsigned cores = 0;
    if (candidate == NvjpegBackend::kHardware) {
      status = nvjpegGetHardwareDecoderInfo(handles->handle, &engines, &cores);
      if (status != NVJPEG_STATUS_SUCCESS || engines == 0) {
        why += (why.empty() ? "" : "; ") + std::string("hardware: ") +
               (status != NVJPEG_STATUS_SUCCESS ? Describe("nvjpegGetHardwareDecoderInfo", status)
                                                : std::string("the GPU has no JPEG engine"));
        continue;
      }
    }
    Check("nvjpegSetDeviceMemoryPadding", nvjpegSetDeviceMemoryPadding(kMemoryPadding, handles->handle));
    Check("nvjpegSetPinnedMemoryPadding", nvjpegSetPinnedMemoryPadding(kMemoryPadding, handles->handle));
    Check("nvjpegJpegStateCreate", nvjpegJpegStateCreate(handles->handle, &handles->state));
    Check("nvjpegJpegStreamCreate", nvjpegJpegStreamCreate(handles->handle, &handles->parsed));
    handles_ = handles.release();
    backend_ = candidate;
    engines_ = engines;
    cores_per_engine_ = cores;
    return;
  }
  throw std::runtime_error("no nvJPEG decoder could start (" + why + ")");
}

NvjpegBatchDecoder::~NvjpegBatchDecoder() { delete handles_; }

std::vector<JpegProbe> NvjpegBatchDecoder::Probe(const std::vector<EncodedJpeg>& files) {
  std::vector<JpegProbe> out(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    JpegProbe& probe = out[i];
    const EncodedJpeg& file = files[i];
    // A file cut short (no end-of-image marker last) goes to the CPU chain, whose error names it: the GPU's
    // decoders would fill the missing part silently.
    const uint8_t* d = file.data;
    const size_t n = file.size;
    if (n < 4 || d[0] != 0xFF || d[1] != 0xD8 || d[n - 2] != 0xFF || d[n - 1] != 0xD9) continue;
    int components = 0;
    nvjpegChromaSubsampling_t subsampling{};
    int widths[NVJPEG_MAX_COMPONENT] = {};
    int heights[NVJPEG_MAX_COMPONENT] = {};
    if (nvjpegGetImageInfo(handles_->handle, file.data, file.size, &components, &subsampling, widths, heights) !=
        NVJPEG_STATUS_SUCCESS) {
      continue;  // not a JPEG nvJPEG reads: the CPU chain decodes it or names it in its error
    }
    probe.height = heights[0];
    probe.width = widths[0];
    probe.components = components;
    if (components != 3 || probe.height <= 0 || probe.width <= 0) continue;
    if (nvjpegJpegStreamParseHeader(handles_->handle, file.data, file.size, handles_->parsed) !=
        NVJPEG_STATUS_SUCCESS) {
      continue;
    }
    if (backend_ == NvjpegBackend::kHardware) {
      int unsupported = 1;  // nvJPEG's sense: 0 is "supported"
      if (nvjpegDecodeBatchedSupported(handles_->handle, handles_->parsed, &unsupported) != NVJPEG_STATUS_SUCCESS) {
        continue;
      }
      probe.decodable = unsupported == 0;
    } else {
      nvjpegJpegEncoding_t encoding = NVJPEG_ENCODING_UNKNOWN;
      if (nvjpegJpegStreamGetJpegEncoding(handles_->parsed, &encoding) != NVJPEG_STATUS_SUCCESS) continue;
      probe.decodable = encoding == NVJPEG_ENCODING_BASELINE_DCT ||
                        encoding == NVJPEG_ENCODING_EXTENDED_SEQUENTIAL_DCT_HUFFMAN ||
                        encoding == NVJPEG_ENCODING_PROGRESSIVE_DCT_HUFFMAN;
    }
  }
  return out;
}

void NvjpegBatchDecoder::Decode(const std::vector<EncodedJpeg>& files, const std::vector<JpegProbe>& probes,
                                const std::vector<uint8_t*>& out, void* cuda_stream) {
  const size_t n = files.size();
  if (probes.size() != n || out.size() != n) {
    throw std::invalid_argument("NvjpegBatchDecoder::Decode: files, probes and outputs differ in length");
  }
  if (n == 0) return;
  std::vector<const unsigned char*> data(n);
  std::vector<size_t> sizes(n);
  std::vector<nvjpegImage_t> images(n);
  for (size_t i = 0; i < n; ++i) {
    if (!probes[i].decodable) {
      throw std::invalid_argument("NvjpegBatchDecoder::Decode: file " + std::to_string(i) +
                                  " of the batch is not decodable by the " + NvjpegBackendName(backend_) +
                                  " backend (Probe says so)");
    }
    data[i] = files[i].data;
    sizes[i] = files[i].size;
    const size_t plane = static_cast<size_t>(probes[i].height) * static_cast<size_t>(probes[i].width);
    nvjpegImage_t& image = images[i];
    image = nvjpegImage_t{};
    for (int c = 0; c < 3; ++c) {
      image.channel[c] = out[i] + static_cast<size_t>(c) * plane;
      image.pitch[c] = static_cast<size_t>(probes[i].width);
    }
  }
  // Re-initialised every batch: the batch size changes (a CPU share, files left to the CPU), and a failed
  // batch leaves the state to be reset.
  Check("nvjpegDecodeBatchedInitialize",
        nvjpegDecodeBatchedInitialize(handles_->handle, handles_->state, static_cast<int>(n), 1, NVJPEG_OUTPUT_RGB));
  Check("nvjpegDecodeBatched", nvjpegDecodeBatched(handles_->handle, handles_->state, data.data(), sizes.data(),
                                                   images.data(), static_cast<cudaStream_t>(cuda_stream)));
}

}  // namespace hdmlp
