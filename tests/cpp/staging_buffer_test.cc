#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/staging/staging_buffer.h"
#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;

int64_t SizeOf(int64_t item) { return 100 + (Mix64(static_cast<uint64_t>(item)) % 900); }

// Workers fill items after random delays; the consumer must still see them in
// order with their own contents, and the bytes in flight must stay bounded.
TEST(StagingBufferTest, InOrderUnderRandomDelaysAndBounded) {
  const int64_t items = 2000;
  const int64_t capacity = 5000;
  StagingBuffer buffer(capacity, items);
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      Rng rng(static_cast<uint64_t>(w));
      int64_t item;
      while (buffer.Claim(SizeOf, &item)) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng.Uniform(300)));
        SampleBuffer b = SampleBuffer::Allocate(SizeOf(item));
        std::fill(b.data.get(), b.data.get() + b.size, static_cast<uint8_t>(item % 251));
        buffer.Complete(item, std::move(b));
      }
    });
  }
  for (int64_t t = 0; t < items; ++t) {
    SampleBuffer b;
    CapturedError error;
    ASSERT_EQ(buffer.Take(t, std::chrono::steady_clock::now() + 10s, &b, &error), StagingBuffer::TakeResult::kReady);
    ASSERT_EQ(b.size, SizeOf(t));
    ASSERT_EQ(b.data[0], static_cast<uint8_t>(t % 251));
    ASSERT_EQ(b.data[static_cast<size_t>(b.size - 1)], static_cast<uint8_t>(t % 251));
  }
  for (auto& w : workers) w.join();
  EXPECT_LE(buffer.peak_bytes_in_flight(), capacity);
  EXPECT_GT(buffer.peak_bytes_in_flight(), capacity / 2);  // it did fill up
}

TEST(StagingBufferTest, OversizedItemDoesNotDeadlock) {
  StagingBuffer buffer(10, 3);
  std::thread worker([&] {
    int64_t item;
    while (buffer.Claim([](int64_t) { return 100; }, &item)) buffer.Complete(item, SampleBuffer::Allocate(100));
  });
  for (int64_t t = 0; t < 3; ++t) {
    SampleBuffer b;
    CapturedError e;
    ASSERT_EQ(buffer.Take(t, std::chrono::steady_clock::now() + 10s, &b, &e), StagingBuffer::TakeResult::kReady);
  }
  worker.join();
  EXPECT_EQ(buffer.peak_bytes_in_flight(), 100);  // one at a time
}

TEST(StagingBufferTest, FailureReachesConsumerInOrder) {
  StagingBuffer buffer(1000, 3);
  std::thread worker([&] {
    int64_t item;
    while (buffer.Claim([](int64_t) { return 1; }, &item)) {
      if (item == 1) {
        try {
          throw IOError("bad item 1");
        } catch (...) {
          buffer.Fail(item, CapturedError::FromCurrentException());
        }
      } else {
        buffer.Complete(item, SampleBuffer::Allocate(1));
      }
    }
  });
  SampleBuffer b;
  CapturedError e;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  EXPECT_EQ(buffer.Take(0, deadline, &b, &e), StagingBuffer::TakeResult::kReady);
  EXPECT_EQ(buffer.Take(1, deadline, &b, &e), StagingBuffer::TakeResult::kFailed);
  EXPECT_THROW(e.Throw(), IOError);
  EXPECT_EQ(e.message(), "bad item 1");
  EXPECT_EQ(buffer.Take(2, deadline, &b, &e), StagingBuffer::TakeResult::kReady);
  worker.join();
}

TEST(StagingBufferTest, SkipNeverReadsSkippedItems) {
  const int64_t items = 1000;
  StagingBuffer buffer(50, items);  // small: workers cannot run far ahead
  std::atomic<int64_t> read_count{0};
  std::atomic<int64_t> max_skipped_read{-1};
  std::thread worker([&] {
    int64_t item;
    while (buffer.Claim([](int64_t) { return 10; }, &item)) {
      ++read_count;
      if (item >= 10 && item < 900) max_skipped_read = std::max<int64_t>(max_skipped_read, item);
      std::this_thread::sleep_for(100us);
      buffer.Complete(item, SampleBuffer::Allocate(10));
    }
  });
  SampleBuffer b;
  CapturedError e;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (int64_t t = 0; t < 10; ++t) ASSERT_EQ(buffer.Take(t, deadline, &b, &e), StagingBuffer::TakeResult::kReady);
  buffer.SkipTo(900);
  for (int64_t t = 900; t < items; ++t) ASSERT_EQ(buffer.Take(t, deadline, &b, &e), StagingBuffer::TakeResult::kReady);
  worker.join();
  // Only what was already admitted before the skip (at most capacity/10 + 1
  // items past 10) was read of the skipped range.
  EXPECT_LT(max_skipped_read.load(), 10 + 50 / 10 + 2);
  EXPECT_LT(read_count.load(), 100 + 10 + 10);
}

TEST(StagingBufferTest, CloseWakesWaiters) {
  StagingBuffer buffer(100, 10);
  SampleBuffer b;
  CapturedError e;
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    buffer.Close();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(buffer.Take(0, start + 10s, &b, &e), StagingBuffer::TakeResult::kClosed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  closer.join();
  int64_t item;
  EXPECT_FALSE(buffer.Claim([](int64_t) { return 1; }, &item));
}

TEST(StagingBufferTest, TakeTimesOut) {
  StagingBuffer buffer(100, 10);
  SampleBuffer b;
  CapturedError e;
  EXPECT_EQ(buffer.Take(0, std::chrono::steady_clock::now() + 20ms, &b, &e), StagingBuffer::TakeResult::kTimeout);
}

}  // namespace
}  // namespace hdmlp

namespace hdmlp {
namespace {

TEST(StagingBufferTest, SetCapacityBoundsLaterClaims) {
  // Items of 100 bytes: 10 fit in 1000; after shrinking to 250, a claim
  // waits until the bytes in flight are below it; growing wakes it.
  StagingBuffer buffer(1000, 100);
  const auto hundred = [](int64_t) { return int64_t{100}; };
  int64_t item;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(buffer.Claim(hundred, &item));
  buffer.SetCapacity(250);
  EXPECT_EQ(buffer.capacity_bytes(), 250);
  std::atomic<bool> claimed{false};
  std::thread worker([&] {
    int64_t next;
    if (buffer.Claim(hundred, &next)) claimed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(claimed.load()) << "claimed past the new capacity";
  buffer.SetCapacity(1000);
  worker.join();
  EXPECT_TRUE(claimed.load());
  buffer.Close();
}

}  // namespace
}  // namespace hdmlp

namespace hdmlp {
namespace {

// Fills every item the workers claim after a random delay (up to 300 us).
std::vector<std::thread> StartWorkers(StagingBuffer* buffer, int n) {
  std::vector<std::thread> workers;
  for (int w = 0; w < n; ++w) {
    workers.emplace_back([buffer, w] {
      Rng rng(static_cast<uint64_t>(w) + 7);
      int64_t item;
      while (buffer->Claim([](int64_t) { return int64_t{10}; }, &item)) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng.Uniform(300)));
        SampleBuffer b = SampleBuffer::Allocate(10);
        b.data[0] = static_cast<uint8_t>(item % 251);
        buffer->Complete(item, std::move(b));
      }
    });
  }
  return workers;
}

TEST(StagingBufferTest, ABatchWakesTheConsumerAFewTimesNotOncePerItem) {
  // 20 batches of 64 items from 4 workers. Waiting for each batch's last
  // item, then taking its items, wakes the consumer about once per batch
  // (and once per item still in a worker's hands when the last one is done),
  // where waking on every completed item would wake it about 64 times.
  const int64_t batch = 64, batches = 20;
  StagingBuffer buffer(1 << 20, batch * batches);
  std::vector<std::thread> workers = StartWorkers(&buffer, 4);
  for (int64_t b = 0; b < batches; ++b) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    ASSERT_TRUE(buffer.WaitFor((b + 1) * batch - 1, deadline));
    for (int64_t t = b * batch; t < (b + 1) * batch; ++t) {
      SampleBuffer out;
      CapturedError error;
      ASSERT_EQ(buffer.Take(t, deadline, &out, &error), StagingBuffer::TakeResult::kReady);
      ASSERT_EQ(out.data[0], static_cast<uint8_t>(t % 251));
    }
  }
  for (auto& w : workers) w.join();
  // At most 1 + 3 per batch (the other workers' items), plus spurious wakeups.
  EXPECT_LE(buffer.consumer_wakeups(), batches * 4 + 10);
}

TEST(StagingBufferTest, WaitForReturnsWhenTheLastItemIsDoneOrAtTheDeadline) {
  StagingBuffer buffer(1000, 10);
  const auto ten = [](int64_t) { return int64_t{10}; };
  std::vector<int64_t> claimed(5);
  for (auto& item : claimed) ASSERT_TRUE(buffer.Claim(ten, &item));
  for (int64_t item = 0; item < 4; ++item) buffer.Complete(item, SampleBuffer::Allocate(10));
  EXPECT_FALSE(buffer.WaitFor(4, std::chrono::steady_clock::now() + 20ms));  // 0..3 done, 4 not
  std::thread finisher([&] {
    std::this_thread::sleep_for(20ms);
    try {
      throw IOError("bad");
    } catch (...) {
      buffer.Fail(4, CapturedError::FromCurrentException());
    }
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(buffer.WaitFor(4, start + 10s));  // a failed item is done too
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  finisher.join();
  EXPECT_TRUE(buffer.WaitFor(2, std::chrono::steady_clock::now()));  // already done: no wait
  // Issue 26: a failed item in the batch ends the wait at once, not after the
  // batch's other (perhaps stuck) items.
  const auto early = std::chrono::steady_clock::now();
  EXPECT_TRUE(buffer.WaitFor(7, early + 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - early, 5s);
  for (int64_t item = 0; item <= 4; ++item) {
    SampleBuffer out;
    CapturedError error;
    buffer.Take(item, std::chrono::steady_clock::now() + 1s, &out, &error);
  }
  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    buffer.Close();
  });
  EXPECT_FALSE(buffer.WaitFor(7, std::chrono::steady_clock::now() + 10s));  // closed
  closer.join();
}

TEST(StagingBufferTest, WaitingForABatchLargerThanTheBufferDoesNotStall) {
  // Room for 3 items of 10 bytes: the workers stop at the 4th, which only a
  // Take can make room for; WaitFor(9) must return at once, not at its
  // deadline, and every item must still come through.
  StagingBuffer buffer(30, 10);
  std::vector<std::thread> workers = StartWorkers(&buffer, 2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(buffer.WaitFor(9, start + 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (int64_t t = 0; t < 10; ++t) {
    SampleBuffer out;
    CapturedError error;
    ASSERT_EQ(buffer.Take(t, start + 10s, &out, &error), StagingBuffer::TakeResult::kReady);
    ASSERT_EQ(out.data[0], static_cast<uint8_t>(t));
  }
  for (auto& w : workers) w.join();
  EXPECT_LE(buffer.peak_bytes_in_flight(), 30);
}

}  // namespace
}  // namespace hdmlp
