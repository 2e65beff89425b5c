#include "hdmlp/staging/shared_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

TEST(SharedMemoryTest, CreatedSegmentIsZeroedAndSeenThroughAnotherMapping) {
  auto created = SharedMemory::Create(3 * 4096 + 5, "hdmlp-test");
  ASSERT_GE(created->fd(), 0);
  EXPECT_EQ(created->size(), 3 * 4096 + 5);
  for (int64_t i = 0; i < created->size(); ++i) ASSERT_EQ(created->data()[i], 0);
  std::memcpy(created->data() + 4090, "across a page", 13);
  // What another process does with the descriptor it received.
  auto attached = SharedMemory::Attach(dup(created->fd()), created->size());
  EXPECT_EQ(attached->fd(), -1);
  EXPECT_NE(attached->data(), created->data());
  EXPECT_EQ(std::memcmp(attached->data() + 4090, "across a page", 13), 0);
  attached->data()[0] = 42;
  EXPECT_EQ(created->data()[0], 42);
}

TEST(SharedMemoryTest, SegmentOutlivesTheCreatorWhileAttached) {
  auto created = SharedMemory::Create(16, "hdmlp-test");
  std::memcpy(created->data(), "kept", 4);
  auto attached = SharedMemory::Attach(dup(created->fd()), 16);
  created.reset();  // unmapped and its descriptor closed: the other mapping keeps the memory
  EXPECT_EQ(std::memcmp(attached->data(), "kept", 4), 0);
}

TEST(SharedMemoryTest, BadSizesAreRefusedAndAttachClosesTheDescriptor) {
  EXPECT_THROW(SharedMemory::Create(0, "hdmlp-test"), InvalidArgumentError);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_THROW(SharedMemory::Attach(fds[0], 0), InvalidArgumentError);
  EXPECT_EQ(close(fds[0]), -1);  // already closed by Attach
  EXPECT_THROW(SharedMemory::Attach(fds[1], 16), IOError);  // a pipe cannot be mapped
  EXPECT_EQ(close(fds[1]), -1);
}

}  // namespace
}  // namespace hdmlp
