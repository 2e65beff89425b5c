// SharedMemory: an anonymous shared memory segment, mapped in this process
// and, through its file descriptor, in others.
//
// hdmlp's Python transform workers (other processes) read each sample's
// bytes from, and write each result into, such segments. A segment is a
// memfd: it has no name in /dev/shm, so nothing outlives the last process
// that maps it or holds its descriptor, even after a crash. Create() makes
// one and keeps its descriptor (to send to other processes over a Unix
// socket); Attach() maps one received from another process and closes the
// descriptor. The mapping lives as long as the object.
//
// Not copyable. Thread-safety: immutable after construction; the memory is
// the caller's to synchronise.
#ifndef HDMLP_STAGING_SHARED_MEMORY_H_
#define HDMLP_STAGING_SHARED_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

namespace hdmlp {

class SharedMemory {
 public:
  // A new zero-filled segment of `bytes` (>= 1); `name` shows in /proc/<pid>/maps.
  // Throws InvalidArgumentError for bytes < 1, IOError when the system refuses.
  static std::unique_ptr<SharedMemory> Create(int64_t bytes, const std::string& name);
  // Maps `bytes` of the segment behind `fd` (from another process) and closes fd,
  // also when it throws.
  static std::unique_ptr<SharedMemory> Attach(int fd, int64_t bytes);

  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();

  // The descriptor of a created segment; -1 for an attached one.
  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  uint8_t* data() const { return data_; }

 private:
  SharedMemory(int fd, int64_t bytes);
  int fd_;
  int64_t size_;
  uint8_t* data_ = nullptr;
};

}  // namespace hdmlp

#endif  // HDMLP_STAGING_SHARED_MEMORY_H_
