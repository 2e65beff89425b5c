#include "hdmlp/staging/batch_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace hdmlp {
namespace {

// Counts the buffers alive in *live.
HostAllocator CountingAllocator(std::atomic<int>* live) {
  HostAllocator counting;
  counting.context = live;
  counting.allocate = [](size_t bytes, void* context) -> void* {
    ++*static_cast<std::atomic<int>*>(context);
    return ::operator new(bytes);
  };
  counting.free = [](void* memory, void* context) {
    --*static_cast<std::atomic<int>*>(context);
    ::operator delete(memory);
  };
  return counting;
}

TEST(BatchPoolTest, ReusesABufferOnlyAfterItsLastReferenceIsGone) {
  BatchPool pool(1000, 4);
  std::shared_ptr<uint8_t> a = pool.Acquire();
  uint8_t* first = a.get();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  std::shared_ptr<uint8_t> view = a;  // a second holder, as a tensor would be
  a.reset();
  std::shared_ptr<uint8_t> b = pool.Acquire();
  EXPECT_NE(b.get(), first) << "reused while still referenced";
  view.reset();
  std::shared_ptr<uint8_t> c = pool.Acquire();
  EXPECT_EQ(c.get(), first) << "a released buffer should be reused";
  EXPECT_EQ(pool.allocations(), 2);
}

TEST(BatchPoolTest, KeepsAtMostKeepFreeBuffers) {
  std::atomic<int> live{0};
  {
    BatchPool pool(64, 2, CountingAllocator(&live));
    std::vector<std::shared_ptr<uint8_t>> held;
    for (int i = 0; i < 5; ++i) held.push_back(pool.Acquire());
    EXPECT_EQ(live.load(), 5);
    held.clear();
    EXPECT_EQ(live.load(), 2);  // three freed, two kept for reuse
  }
  EXPECT_EQ(live.load(), 0);
}

TEST(BatchPoolTest, AnAllocatorWhoseFreeWaitsIsOnlyCalledWhenThePoolIsGone) {
  // cudaFreeHost waits for the whole device: a batch dropped by the training
  // loop must not free one while the job runs.
  std::atomic<int> live{0};
  HostAllocator pinned = CountingAllocator(&live);
  pinned.free_waits = true;
  std::shared_ptr<uint8_t> survivor;
  {
    BatchPool pool(64, 2, pinned);
    std::vector<std::shared_ptr<uint8_t>> held;
    for (int i = 0; i < 5; ++i) held.push_back(pool.Acquire());
    held.clear();
    EXPECT_EQ(live.load(), 5);  // none freed: all kept for reuse
    for (int i = 0; i < 6; ++i) held.push_back(pool.Acquire());
    EXPECT_EQ(live.load(), 6);
    EXPECT_EQ(pool.allocations(), 6);  // five reused, one more made
    survivor = held.back();
    held.clear();
  }
  EXPECT_EQ(live.load(), 1);  // the pool's five freed with it; the one still held lives
  survivor.reset();
  EXPECT_EQ(live.load(), 0);
}

TEST(BatchPoolTest, BuffersOutliveThePool) {
  std::shared_ptr<uint8_t> survivor;
  {
    BatchPool pool(256, 2);
    survivor = pool.Acquire();
    survivor.get()[255] = 7;
  }
  EXPECT_EQ(survivor.get()[255], 7);  // ASan: still valid
  survivor.reset();                   // and freed now, without the pool
}

TEST(BatchPoolTest, ConcurrentAcquireAndRelease) {
  // What the pool guarantees under contention: the memory alive at once is
  // at most what the threads hold plus the free list, and buffers are reused.
  // (A release that finds the free list full frees its buffer, so the count
  // of allocations over time has no tighter bound.)
  struct Counts {
    std::atomic<int> live{0};
    std::atomic<int> peak{0};
  } counts;
  HostAllocator counting;
  counting.context = &counts;
  counting.allocate = [](size_t bytes, void* context) -> void* {
    auto* c = static_cast<Counts*>(context);
    const int live = ++c->live;
    int peak = c->peak.load();
    while (live > peak && !c->peak.compare_exchange_weak(peak, live)) {
    }
    return ::operator new(bytes);
  };
  counting.free = [](void* memory, void* context) {
    --static_cast<Counts*>(context)->live;
    ::operator delete(memory);
  };
  constexpr int kThreads = 4, kKeepFree = 3, kRounds = 500;
  {
    BatchPool pool(128, kKeepFree, counting);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&pool, t] {
        for (int i = 0; i < kRounds; ++i) {
          auto b = pool.Acquire();
          for (int k = 0; k < 128; ++k) b.get()[k] = static_cast<uint8_t>(t);
          for (int k = 0; k < 128; ++k) ASSERT_EQ(b.get()[k], static_cast<uint8_t>(t));
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_LE(counts.peak.load(), kThreads + kKeepFree);
    EXPECT_LT(pool.allocations(), kThreads * kRounds / 10) << "buffers should be reused";
  }
  EXPECT_EQ(counts.live.load(), 0);
}

}  // namespace
}  // namespace hdmlp
