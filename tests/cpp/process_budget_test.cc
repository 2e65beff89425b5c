// ProcessBudget: the live jobs of a process share each percent budget.
#include <gtest/gtest.h>

#include <map>

#include "hdmlp/job/process_budget.h"

namespace hdmlp {
namespace {

TEST(ProcessBudgetTest, StagingIsSplitEvenlyAndGrowsBackWhenAJobLeaves) {
  ProcessBudget budget;
  std::map<int, int64_t> staging;
  const int64_t a = budget.Join();
  budget.JoinStaging(a, 3, 1000, [&](int64_t bytes) { staging[0] = bytes; });
  EXPECT_EQ(staging[0], static_cast<int64_t>(30 * 1024 * 1024));  // 3% of 1000 MB
  const int64_t b = budget.Join();
  // B measured less memory (A took some): the base stays A's.
  budget.JoinStaging(b, 3, 900, [&](int64_t bytes) { staging[1] = bytes; });
  EXPECT_EQ(staging[0], static_cast<int64_t>(15 * 1024 * 1024));
  EXPECT_EQ(staging[1], static_cast<int64_t>(15 * 1024 * 1024));
  EXPECT_EQ(budget.live_jobs(), 2);
  budget.Leave(b);
  EXPECT_EQ(staging[0], static_cast<int64_t>(30 * 1024 * 1024));
  budget.Leave(a);
  EXPECT_EQ(budget.live_jobs(), 0);
  // With no live job the base is forgotten: a new job measures again.
  const int64_t c = budget.Join();
  budget.JoinStaging(c, 3, 2000, [&](int64_t bytes) { staging[2] = bytes; });
  EXPECT_EQ(staging[2], static_cast<int64_t>(60 * 1024 * 1024));
  budget.Leave(c);
}

TEST(ProcessBudgetTest, CacheClassesAreFirstComeAndHoldOnlyWhatTheyPlaced) {
  ProcessBudget budget;
  const int64_t a = budget.Join();
  EXPECT_DOUBLE_EQ(budget.ClaimCache(a, "memory", 25, 1000), 250);
  const int64_t b = budget.Join();
  // A still holds its whole claim: B gets nothing of it.
  EXPECT_DOUBLE_EQ(budget.ClaimCache(b, "memory", 25, 800), 0);
  // A placed only 100 MB (a small dataset): the next job gets the rest.
  budget.Hold(a, "memory", 100);
  const int64_t c = budget.Join();
  EXPECT_DOUBLE_EQ(budget.ClaimCache(c, "memory", 25, 800), 150);
  // Another budget (a disk) is separate.
  EXPECT_DOUBLE_EQ(budget.ClaimCache(c, "filesystem:/scratch", 10, 5000), 500);
  budget.Leave(a);
  const int64_t d = budget.Join();
  EXPECT_DOUBLE_EQ(budget.ClaimCache(d, "memory", 25, 800), 100);  // 250 - C's 150 (B holds 0)
  // Together they never hold more than the largest percent asked for.
  budget.Leave(b);
  budget.Leave(c);
  budget.Leave(d);
  EXPECT_EQ(budget.live_jobs(), 0);
}

TEST(ProcessBudgetTest, AMemberLeavesOnDestruction) {
  const int before = ProcessBudget::Global().live_jobs();
  {
    BudgetMember member;
    EXPECT_EQ(ProcessBudget::Global().live_jobs(), before + 1);
    member.Leave();
    member.Leave();  // idempotent
    EXPECT_EQ(ProcessBudget::Global().live_jobs(), before);
  }
  {
    BudgetMember member;
  }
  EXPECT_EQ(ProcessBudget::Global().live_jobs(), before);
}

}  // namespace
}  // namespace hdmlp
