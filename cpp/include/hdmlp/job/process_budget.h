// ProcessBudget: the percent capacities of a configuration ("3%" of the
// memory for staging, "25%" for a memory class, "10%" of a disk), shared by
// the live Jobs of one process.
//
// A percent capacity is a share of this node meant for one training job. A
// process often runs several Jobs at once (training and validation); without
// this registry each would claim the whole share. Each budget is keyed by
// what it is a share of: "staging" and each memory class's name (the
// available memory), "filesystem:<path>" (the free space there). Its base
// (the MB the percent is taken of, per rank of the node) is the one measured
// by the first live job that claims it, since later jobs would count the
// memory the earlier ones took as gone; it is forgotten when no live job
// claims it any more.
//
//  - Staging buffers are split evenly between the live jobs that size theirs
//    by a percent, and re-split whenever such a job joins or leaves: a
//    staging buffer holds only the bytes in flight, so a shrunk one simply
//    admits new reads later. Each job's share is its own percent of the
//    base divided by the number of those jobs.
//  - A cache class is sized once, at start-up, and never shrinks: a job gets
//    its own percent of the base minus what the other live jobs hold of the
//    same budget (first come, first served), and then holds only what its
//    placement put there (a small validation set leaves the rest to the
//    next job).
// So the live jobs together never hold more of a budget than the largest
// percent of it one of them asked for.
//
// Thread-safety: every method may be called from any thread. The staging
// resizers are called with the registry's lock held; they must not call
// back into the registry.
// Not copyable; one instance per process (Global()).
#ifndef HDMLP_JOB_PROCESS_BUDGET_H_
#define HDMLP_JOB_PROCESS_BUDGET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace hdmlp {

class ProcessBudget {
 public:
  static ProcessBudget& Global();

  ProcessBudget() = default;
  ProcessBudget(const ProcessBudget&) = delete;
  ProcessBudget& operator=(const ProcessBudget&) = delete;

  // A new live job; returns its id for the calls below.
  int64_t Join();
  // Ends a job's claims; the other jobs' staging buffers grow back.
  void Leave(int64_t job);

  // Claims a cache class of `percent` of a budget whose base is `base_mb`
  // (when it is the first claim), and returns the MB this job may use: its
  // percent of the budget's base minus what other live jobs hold. The whole
  // allowance counts as held until Hold() lowers it.
  double ClaimCache(int64_t job, const std::string& key, double percent, double base_mb);
  // What the job really holds of `key` (its placed bytes), at most its claim.
  void Hold(int64_t job, const std::string& key, double mb);

  // Sizes the job's staging buffer by a percent of the "staging" budget:
  // `resize` is called at once with this job's share in bytes, and again
  // (for every such job) whenever the number of them changes.
  void JoinStaging(int64_t job, double percent, double base_mb, std::function<void(int64_t bytes)> resize);

  // Live jobs of the process (for metrics and tests).
  int live_jobs() const;

 private:
  struct Member {
    std::map<std::string, double> held_mb;  // cache budgets
    double staging_percent = 0;             // 0: not in the staging split
    std::function<void(int64_t)> resize_staging;
  };
  // The base of `key`, recorded by its first live claimant.
  double BaseLocked(const std::string& key, double base_mb);
  void ResplitStagingLocked();
  void ForgetUnusedBasesLocked();

  mutable std::mutex mu_;
  int64_t next_id_ = 0;
  std::map<int64_t, Member> members_;
  std::map<std::string, double> base_mb_;
};

// One live job's membership of ProcessBudget::Global(): joins on
// construction, leaves on Leave() or destruction. Not copyable.
class BudgetMember {
 public:
  BudgetMember() : id_(ProcessBudget::Global().Join()) {}
  ~BudgetMember() { Leave(); }
  BudgetMember(const BudgetMember&) = delete;
  BudgetMember& operator=(const BudgetMember&) = delete;

  double ClaimCache(const std::string& key, double percent, double base_mb) {
    return ProcessBudget::Global().ClaimCache(id_, key, percent, base_mb);
  }
  void Hold(const std::string& key, double mb) { ProcessBudget::Global().Hold(id_, key, mb); }
  void JoinStaging(double percent, double base_mb, std::function<void(int64_t bytes)> resize) {
    ProcessBudget::Global().JoinStaging(id_, percent, base_mb, std::move(resize));
  }
  // Idempotent; after it, no resize callback of this member runs.
  void Leave() {
    std::lock_guard<std::mutex> lock(mu_);
    if (id_ < 0) return;
    ProcessBudget::Global().Leave(id_);
    id_ = -1;
  }

 private:
  std::mutex mu_;
  int64_t id_;
};

}  // namespace hdmlp

#endif  // HDMLP_JOB_PROCESS_BUDGET_H_
