#include "hdmlp/util/phase_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <thread>

namespace hdmlp {
namespace {

double UnixNow() { return static_cast<double>(std::time(nullptr)); }

TEST(PhaseTimerTest, WaitingCostsWallNotCpuAndWorkCostsBoth) {
  const double before = UnixNow();
  PhaseTimer timer;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  timer.Lap("sleep");
  const double spin_from = ThreadCpuSeconds();
  volatile uint64_t sink = 0;
  while (ThreadCpuSeconds() - spin_from < 0.02) sink = sink + 1;
  timer.Lap("spin");
  timer.Lap("nothing");

  ASSERT_EQ(timer.phases().size(), 3u);
  const PhaseTime& sleep = timer.phases()[0];
  const PhaseTime& spin = timer.phases()[1];
  EXPECT_EQ(sleep.name, "sleep");
  EXPECT_EQ(spin.name, "spin");
  EXPECT_EQ(timer.phases()[2].name, "nothing");
  EXPECT_GE(sleep.wall_seconds, 0.05);
  EXPECT_LT(sleep.cpu_seconds, 0.01);
  EXPECT_GE(spin.cpu_seconds, 0.02);
  EXPECT_GE(spin.process_cpu_seconds, 0.019);  // the process's clock includes this thread's
  EXPECT_GE(spin.wall_seconds, spin.cpu_seconds - 1e-3);
  for (const PhaseTime& p : timer.phases()) {
    EXPECT_GE(p.wall_seconds, 0) << p.name;
    EXPECT_GE(p.cpu_seconds, 0) << p.name;
  }
  EXPECT_GE(timer.started_at(), before - 1);
  EXPECT_LE(timer.started_at(), UnixNow() + 1);
}

TEST(PhaseTimerTest, AnotherThreadsCpuIsTheProcessesNotThisThreads) {
  PhaseTimer timer;
  std::thread helper([] {
    const double from = ThreadCpuSeconds();
    volatile uint64_t sink = 0;
    while (ThreadCpuSeconds() - from < 0.02) sink = sink + 1;
  });
  helper.join();
  timer.Lap("helper");
  const PhaseTime& p = timer.phases().at(0);
  EXPECT_GE(p.process_cpu_seconds, 0.019);
  EXPECT_LT(p.cpu_seconds, 0.01);
}

}  // namespace
}  // namespace hdmlp
