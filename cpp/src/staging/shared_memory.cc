#include "hdmlp/staging/shared_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hdmlp/errors.h"

namespace hdmlp {

SharedMemory::SharedMemory(int fd, int64_t bytes) : fd_(fd), size_(bytes) {
  void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    throw IOError("cannot map a shared memory segment of " + std::to_string(bytes) + " bytes: " + std::strerror(e));
  }
  data_ = static_cast<uint8_t*>(p);
}

std::unique_ptr<SharedMemory> SharedMemory::Create(int64_t bytes, const std::string& name) {
  if (bytes < 1) throw InvalidArgumentError("a shared memory segment needs at least 1 byte, got " + std::to_string(bytes));
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) throw IOError("cannot create a shared memory segment (memfd_create): " + std::string(std::strerror(errno)));
  if (ftruncate(fd, bytes) != 0) {
    const int e = errno;
    close(fd);
    throw IOError("cannot size a shared memory segment to " + std::to_string(bytes) + " bytes: " + std::strerror(e));
  }
  return std::unique_ptr<SharedMemory>(new SharedMemory(fd, bytes));
}

std::unique_ptr<SharedMemory> SharedMemory::Attach(int fd, int64_t bytes) {
  if (bytes < 1) {
    close(fd);
    throw InvalidArgumentError("a shared memory segment needs at least 1 byte, got " + std::to_string(bytes));
  }
  std::unique_ptr<SharedMemory> memory(new SharedMemory(fd, bytes));
  close(memory->fd_);  // the mapping keeps the segment
  memory->fd_ = -1;
  return memory;
}

SharedMemory::~SharedMemory() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(size_));
  if (fd_ >= 0) close(fd_);
}

}  // namespace hdmlp
