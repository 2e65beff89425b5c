#include "hdmlp/plan/access_plan.h"

#include <algorithm>

#include "hdmlp/errors.h"
#include "hdmlp/plan/random.h"

namespace hdmlp {

DistributionScheme ParseDistributionScheme(const std::string& name) {
  if (name == "uniform") return DistributionScheme::kUniform;
  throw InvalidArgumentError("unknown distr_scheme '" + name + "': supported schemes are 'uniform'");
}

const char* DistributionSchemeName(DistributionScheme scheme) {
  switch (scheme) {
    case DistributionScheme::kUniform:
      return "uniform";
  }
  return "?";
}

AccessPlan::AccessPlan(const PlanOptions& options) : options_(options) {
  if (options.num_samples < 1) throw InvalidArgumentError("the dataset has no samples");
  if (options.batch_size < 1) {
    throw InvalidArgumentError("batch_size must be at least 1, got " + std::to_string(options.batch_size));
  }
  if (options.epochs < 1) throw InvalidArgumentError("epochs must be at least 1, got " + std::to_string(options.epochs));
  if (options.world_size < 1) {
    throw InvalidArgumentError("world_size must be at least 1, got " + std::to_string(options.world_size));
  }
  local_batch_ = (options.batch_size + options.world_size - 1) / options.world_size;
  full_batches_ = options.num_samples / options.batch_size;
  remainder_ = options.drop_last ? 0 : options.num_samples % options.batch_size;
}

int64_t AccessPlan::Share(int rank, int64_t batch_samples) const {
  return std::clamp<int64_t>(batch_samples - static_cast<int64_t>(rank) * local_batch_, 0, local_batch_);
}

int64_t AccessPlan::BatchesPerEpoch() const { return full_batches_ + (remainder_ > 0 ? 1 : 0); }

int64_t AccessPlan::RankEpochSize(int rank) const {
  return full_batches_ * Share(rank, options_.batch_size) + Share(rank, remainder_);
}

int64_t AccessPlan::LocalBatchSize(int rank, int64_t batch) const {
  return batch < full_batches_ ? Share(rank, options_.batch_size) : Share(rank, remainder_);
}

int64_t AccessPlan::GlobalPosition(int rank, int64_t j) const {
  const int64_t per_batch = Share(rank, options_.batch_size);
  const int64_t offset = static_cast<int64_t>(rank) * local_batch_;
  if (j < full_batches_ * per_batch) return (j / per_batch) * options_.batch_size + offset + j % per_batch;
  return full_batches_ * options_.batch_size + offset + (j - full_batches_ * per_batch);
}

IndexPermutation AccessPlan::EpochPermutation(int epoch) const {
  return IndexPermutation(static_cast<uint64_t>(options_.num_samples),
                          DeriveKey({options_.seed, static_cast<uint64_t>(epoch), 0x65706f6368ULL}));
}

int64_t AccessPlan::SampleAt(int rank, int epoch, int64_t j) const {
  return static_cast<int64_t>(EpochPermutation(epoch).At(static_cast<uint64_t>(GlobalPosition(rank, j))));
}

std::vector<int64_t> AccessPlan::RankEpochSamples(int rank, int epoch) const {
  const IndexPermutation perm = EpochPermutation(epoch);
  const int64_t n = RankEpochSize(rank);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) out[static_cast<size_t>(j)] = static_cast<int64_t>(perm.At(static_cast<uint64_t>(GlobalPosition(rank, j))));
  return out;
}

}  // namespace hdmlp
