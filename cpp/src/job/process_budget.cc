#include "hdmlp/job/process_budget.h"

#include <algorithm>

namespace hdmlp {

ProcessBudget& ProcessBudget::Global() {
  // Never destroyed: a Job closed from an atexit handler may still leave.
  static ProcessBudget* budget = new ProcessBudget();
  return *budget;
}

int64_t ProcessBudget::Join() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = next_id_++;
  members_[id];
  return id;
}

void ProcessBudget::Leave(int64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = members_.find(job);
  if (it == members_.end()) return;
  const bool in_staging = it->second.staging_percent > 0;
  members_.erase(it);
  if (in_staging) ResplitStagingLocked();
  ForgetUnusedBasesLocked();
}

double ProcessBudget::BaseLocked(const std::string& key, double base_mb) {
  return base_mb_.emplace(key, base_mb).first->second;
}

double ProcessBudget::ClaimCache(int64_t job, const std::string& key, double percent, double base_mb) {
  std::lock_guard<std::mutex> lock(mu_);
  const double base = BaseLocked(key, base_mb);
  double others = 0;
  for (const auto& [id, member] : members_) {
    if (id == job) continue;
    const auto held = member.held_mb.find(key);
    if (held != member.held_mb.end()) others += held->second;
  }
  const double allowance = std::max(0.0, base * percent / 100.0 - others);
  members_[job].held_mb[key] = allowance;
  return allowance;
}

void ProcessBudget::Hold(int64_t job, const std::string& key, double mb) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = members_.find(job);
  if (it == members_.end()) return;
  double& held = it->second.held_mb[key];
  held = std::min(held, std::max(mb, 0.0));
}

void ProcessBudget::JoinStaging(int64_t job, double percent, double base_mb,
                                std::function<void(int64_t bytes)> resize) {
  std::lock_guard<std::mutex> lock(mu_);
  BaseLocked("staging", base_mb);
  Member& member = members_[job];
  member.staging_percent = percent;
  member.resize_staging = std::move(resize);
  ResplitStagingLocked();
}

void ProcessBudget::ResplitStagingLocked() {
  const auto base = base_mb_.find("staging");
  if (base == base_mb_.end()) return;
  int sharing = 0;
  for (const auto& [id, member] : members_) sharing += member.staging_percent > 0 ? 1 : 0;
  for (auto& [id, member] : members_) {
    if (member.staging_percent <= 0) continue;
    // MB in configs are MiB (docs/config.md).
    const double mb = base->second * member.staging_percent / 100.0 / sharing;
    member.resize_staging(static_cast<int64_t>(mb * 1024 * 1024));
  }
}

void ProcessBudget::ForgetUnusedBasesLocked() {
  for (auto it = base_mb_.begin(); it != base_mb_.end();) {
    bool used = false;
    for (const auto& [id, member] : members_) {
      used = used || member.held_mb.count(it->first) > 0 || (it->first == "staging" && member.staging_percent > 0);
    }
    it = used ? std::next(it) : base_mb_.erase(it);
  }
}

int ProcessBudget::live_jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(members_.size());
}

}  // namespace hdmlp
