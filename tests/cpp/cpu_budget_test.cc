// The CPU budget behind threads = "auto": the affinity and cgroup parsing on
// fake /proc and /sys/fs/cgroup trees, and the split between ranks.
#include "hdmlp/config/cpu_budget.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <string>
#include <vector>

#include "hdmlp/config/config.h"
#include "hdmlp/env/cgroup.h"
#include "hdmlp/errors.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using testing::TempDir;
using testing::WriteFile;

// mountinfo lines as a hybrid (v1 + v2) host and a pure v2 container write them.
const char* kV2Mount = "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n";
const char* kV1CpuMount =
    "40 30 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:17 - cgroup cgroup rw,cpu,cpuacct\n"
    "41 30 0:36 / /sys/fs/cgroup/memory rw,nosuid shared:18 - cgroup cgroup rw,memory\n";

// A fake root with the given affinity and /proc/self/{cgroup,mountinfo}.
void FakeProc(const TempDir& root, const std::string& cpus, const std::string& cgroup, const std::string& mountinfo) {
  WriteFile(root / "proc/self/status", "Name:\tpython\nCpus_allowed:\tff\nCpus_allowed_list:\t" + cpus + "\nMems:\t1\n");
  WriteFile(root / "proc/self/cgroup", cgroup);
  WriteFile(root / "proc/self/mountinfo", mountinfo);
}

TEST(CpuBudgetTest, AffinityAloneWithoutAnyCgroupLimit) {
  TempDir root;
  FakeProc(root, "0-3,8", "0::/\n", kV2Mount);
  WriteFile(root / "sys/fs/cgroup/cgroup.procs", "1\n");  // the root cgroup has no cpu.max
  const CpuBudget b = ReadCpuBudget(root.path());
  EXPECT_EQ(b.cpus, (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(b.quota_cpus, 0);
  EXPECT_EQ(b.UsableCpus(), 5);
}

TEST(CpuBudgetTest, CgroupV2QuotaIsTheTightestAlongThePathAndRoundsUp) {
  TempDir root;
  FakeProc(root, "0-15", "0::/job.slice/step_0/task\n", kV2Mount);
  WriteFile(root / "sys/fs/cgroup/job.slice/cpu.max", "250000 100000\n");          // 2.5 CPUs
  WriteFile(root / "sys/fs/cgroup/job.slice/step_0/cpu.max", "max 100000\n");       // no limit here
  WriteFile(root / "sys/fs/cgroup/job.slice/step_0/task/cpu.max", "600000 100000\n");  // 6 CPUs
  const CpuBudget b = ReadCpuBudget(root.path());
  EXPECT_DOUBLE_EQ(b.quota_cpus, 2.5);
  EXPECT_EQ(b.quota_source, root / "sys/fs/cgroup/job.slice/cpu.max");
  EXPECT_EQ(b.UsableCpus(), 3);  // 2.5 CPUs of time: 3 threads can use it
}

TEST(CpuBudgetTest, AffinityTighterThanTheQuotaWins) {
  TempDir root;
  FakeProc(root, "4-5", "0::/box\n", kV2Mount);
  WriteFile(root / "sys/fs/cgroup/box/cpu.max", "800000 100000\n");
  EXPECT_EQ(ReadCpuBudget(root.path()).UsableCpus(), 2);
}

TEST(CpuBudgetTest, CgroupV1CfsQuotaOnAHybridHost) {
  TempDir root;
  // v1 cpu controller limited, the v2 tree (without a cpu controller) not.
  FakeProc(root, "0-7", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
           std::string(kV1CpuMount) + "50 30 0:40 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  WriteFile(root / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
  WriteFile(root / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  WriteFile(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");  // the root: unlimited
  WriteFile(root / "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const CpuBudget b = ReadCpuBudget(root.path());
  EXPECT_DOUBLE_EQ(b.quota_cpus, 1.5);
  EXPECT_EQ(b.UsableCpus(), 2);
}

TEST(CpuBudgetTest, CgroupPathOfAnotherNamespaceFallsBackToTheMountPoint) {
  // In a container the host's path (/docker/abc) is not under the mount,
  // whose root is the container's own cgroup: its files are at the mount point.
  TempDir root;
  FakeProc(root, "0-7", "4:cpu,cpuacct:/docker/abc\n",
           "40 30 0:35 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n");
  WriteFile(root / "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n");
  WriteFile(root / "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(ReadCpuBudget(root.path()).UsableCpus(), 2);
}

// The walk the memory limit (env/memory_limit.h) shares with the CPU quota:
// each hierarchy that holds the controller, from the process's cgroup up.
TEST(CpuBudgetTest, CgroupLevelsFollowOneControllerUpToEachMount) {
  TempDir root;
  FakeProc(root, "0-3", "5:memory:/job/step\n4:cpu,cpuacct:/other\n0::/slice/task\n", std::string(kV2Mount) + kV1CpuMount);
  WriteFile(root / "sys/fs/cgroup/slice/task/memory.max", "1000\n");
  WriteFile(root / "sys/fs/cgroup/memory/job/step/memory.limit_in_bytes", "1000\n");
  const std::string top = root.path() + "/sys/fs/cgroup";
  std::vector<std::string> dirs;
  for (const CgroupLevel& level : CgroupLevels("memory", root.path())) {
    dirs.push_back((level.v2 ? "v2 " : "v1 ") + level.dir.substr(top.size()));
  }
  EXPECT_EQ(dirs, (std::vector<std::string>{"v2 /slice/task", "v2 /slice", "v2 ", "v1 /memory/job/step",
                                            "v1 /memory/job", "v1 /memory"}));
  // Without a v1 line for the controller only the v2 hierarchy counts.
  FakeProc(root, "0-3", "0::/slice/task\n", std::string(kV2Mount) + kV1CpuMount);
  EXPECT_EQ(CgroupLevels("memory", root.path()).size(), 3u);
}

TEST(CpuBudgetTest, MissingOrBrokenFilesMeanNoLimit) {
  TempDir root;
  FakeProc(root, "0-1", "0::/x\n", kV2Mount);
  WriteFile(root / "sys/fs/cgroup/x/cpu.max", "garbage\n");
  EXPECT_EQ(ReadCpuBudget(root.path()).quota_cpus, 0);
  TempDir empty;  // no /proc at all: one CPU, no quota
  const CpuBudget b = ReadCpuBudget(empty.path());
  EXPECT_EQ(b.UsableCpus(), 1);
  EXPECT_EQ(b.quota_cpus, 0);
}

TEST(CpuBudgetTest, TheRealAffinityMatchesProcSelfStatus) {
  // The system call and the kernel's text view of the same mask agree.
  std::ifstream status("/proc/self/status");
  std::string line, listed;
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) listed = line.substr(18);
  }
  ASSERT_FALSE(listed.empty());
  const CpuBudget b = ReadCpuBudget();
  EXPECT_EQ(b.cpus, ParseCpuList(listed));
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(static_cast<int>(b.cpus.size()), CPU_COUNT(&set));
  EXPECT_GE(b.UsableCpus(), 1);
  EXPECT_LE(b.UsableCpus(), static_cast<int>(b.cpus.size()));
}

TEST(CpuBudgetTest, CpuListsParseAndFormat) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("5,1-2,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({7}), "7");
  for (const char* bad : {"", "a", "3-1", "1-", "-2", "1,,2", "0-3x"}) {
    EXPECT_THROW(ParseCpuList(bad), InvalidArgumentError) << bad;
  }
  EXPECT_TRUE(CpuListsIntersect({0, 1, 2}, {2, 3}));
  EXPECT_FALSE(CpuListsIntersect({0, 1}, {2, 3}));
  EXPECT_FALSE(CpuListsIntersect({}, {0}));
}

TEST(CpuBudgetTest, RanksSharingCpusSplitThem) {
  EXPECT_EQ(ThreadsPerRank(8, 1), 8);
  EXPECT_EQ(ThreadsPerRank(8, 2), 4);
  EXPECT_EQ(ThreadsPerRank(8, 3), 2);  // rounded down: the consumers need a share too
  EXPECT_EQ(ThreadsPerRank(2, 4), 1);  // never none
  EXPECT_EQ(ThreadsPerRank(1, 0), 1);
}

TEST(CpuBudgetTest, ConfigThreadsAutoResolvesToTheBudget) {
  const Config c = Config::LoadString("storage_classes = ( { capacity = 8; threads = \"auto\"; } );");
  EXPECT_TRUE(c.storage_classes[0].threads_auto);
  EXPECT_EQ(c.storage_classes[0].threads, ReadCpuBudget().UsableCpus());
  EXPECT_NE(c.Describe().find("threads (auto)"), std::string::npos) << c.Describe();
  EXPECT_FALSE(Config::LoadString("storage_classes = ( { capacity = 8; threads = 3; } );")
                   .storage_classes[0]
                   .threads_auto);
}

TEST(CpuBudgetTest, ConfigThreadsAutoOnlyForTheStagingBuffer) {
  const auto error = [](const std::string& text) {
    try {
      Config::LoadString(text, "t.cfg");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string cache =
      error("storage_classes = ( { capacity = 8; threads = 2; }, { backend = \"memory\"; capacity = 8; "
            "threads = \"auto\"; } );");
  EXPECT_NE(cache.find("storage_classes.[1].threads"), std::string::npos) << cache;
  EXPECT_NE(cache.find("only for class 0"), std::string::npos) << cache;
  const std::string typo = error("storage_classes = ( { capacity = 8; threads = \"atuo\"; } );");
  EXPECT_NE(typo.find("t.cfg:1: storage_classes.[0].threads"), std::string::npos) << typo;
  EXPECT_NE(typo.find("or \"auto\""), std::string::npos) << typo;
}

}  // namespace
}  // namespace hdmlp
