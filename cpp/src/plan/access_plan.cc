#include "hdmlp/plan/access_plan.h"

#include <algorithm>
#include <initializer_list>

#include "hdmlp/errors.h"
#include "hdmlp/plan/random.h"

namespace hdmlp {

DistributionScheme ParseDistributionScheme(const std::string& name) {
  if (name == "uniform") return DistributionScheme::kUniform;
  if (name == "local") return DistributionScheme::kLocal;
  if (name == "partial_local") return DistributionScheme::kPartialLocal;
  throw InvalidArgumentError("unknown distr_scheme '" + name +
                             "': supported schemes are 'uniform', 'local' and 'partial_local'");
}

const char* DistributionSchemeName(DistributionScheme scheme) {
  switch (scheme) {
    case DistributionScheme::kUniform:
      return "uniform";
    case DistributionScheme::kLocal:
      return "local";
    case DistributionScheme::kPartialLocal:
      return "partial_local";
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
  if (!(options.exchange_fraction >= 0 && options.exchange_fraction <= 1)) {
    throw InvalidArgumentError("exchange_fraction must be in [0, 1], got " + std::to_string(options.exchange_fraction));
  }
  local_batch_ = (options.batch_size + options.world_size - 1) / options.world_size;
  full_batches_ = options.num_samples / options.batch_size;
  remainder_ = options.num_samples % options.batch_size;  // for the shards: without drop-last
  if (options.scheme != DistributionScheme::kUniform) {
    const auto n = static_cast<size_t>(options.world_size);
    shard_size_.resize(n);
    shard_start_.resize(n + 1, 0);
    exchange_.resize(n, 0);
    pool_start_.resize(n + 1, 0);
    for (size_t r = 0; r < n; ++r) {
      shard_size_[r] = RankEpochSize(static_cast<int>(r));
      shard_start_[r + 1] = shard_start_[r] + shard_size_[r];
      if (options.scheme == DistributionScheme::kPartialLocal) {
        exchange_[r] = static_cast<int64_t>(options.exchange_fraction * static_cast<double>(shard_size_[r]));
      }
      pool_start_[r + 1] = pool_start_[r] + exchange_[r];
    }
    pool_size_ = pool_start_[n];
  }
  if (options.drop_last) remainder_ = 0;
}

uint64_t AccessPlan::Key(std::initializer_list<uint64_t> words) const {
  // Not keyed by the scheme: partial_local with Q = 0 is exactly local.
  uint64_t k = DeriveKey({options_.seed, 0x6c6f63616cULL});
  for (uint64_t w : words) k = DeriveKey({k, w});
  return k;
}

EpochOrder::EpochOrder(const AccessPlan* plan, int rank, int epoch)
    : plan_(plan), rank_(rank), epoch_(epoch),
      global_(plan->options_.scheme == DistributionScheme::kUniform
                  ? plan->EpochPermutation(epoch)
                  : IndexPermutation(static_cast<uint64_t>(plan->pool_size_),
                                     plan->Key({0x706f6f6cULL, static_cast<uint64_t>(epoch)}))),
      rank_order_(plan->options_.scheme == DistributionScheme::kUniform
                      ? IndexPermutation(0, 0)
                      : IndexPermutation(static_cast<uint64_t>(plan->shard_size_[static_cast<size_t>(rank)]),
                                         plan->Key({0x6f72646572ULL, static_cast<uint64_t>(epoch),
                                                    static_cast<uint64_t>(rank)}))),
      shards_(plan->options_.scheme == DistributionScheme::kUniform
                  ? IndexPermutation(0, 0)
                  : IndexPermutation(static_cast<uint64_t>(plan->options_.num_samples), plan->Key({0x7368617264ULL}))),
      own_pick_(plan->options_.scheme == DistributionScheme::kUniform
                    ? IndexPermutation(0, 0)
                    : IndexPermutation(static_cast<uint64_t>(plan->shard_size_[static_cast<size_t>(rank)]),
                                       plan->Key({0x7069636bULL, static_cast<uint64_t>(epoch),
                                                  static_cast<uint64_t>(rank)}))) {}

int64_t EpochOrder::ShardSample(int rank, int64_t i) const {
  return static_cast<int64_t>(shards_.At(static_cast<uint64_t>(plan_->shard_start_[static_cast<size_t>(rank)] + i)));
}

int64_t EpochOrder::At(int64_t j) const {
  const AccessPlan& p = *plan_;
  if (p.options_.scheme == DistributionScheme::kUniform) {
    return static_cast<int64_t>(global_.At(static_cast<uint64_t>(p.GlobalPosition(rank_, j))));
  }
  // Which of the rank's T_r epoch slots it reads j-th.
  const auto r = static_cast<size_t>(rank_);
  const int64_t k = static_cast<int64_t>(rank_order_.At(static_cast<uint64_t>(j)));
  const int64_t kept = p.shard_size_[r] - p.exchange_[r];
  auto pick = [&](int q, int64_t i) {
    // The i-th sample of rank q's shard in this epoch's set-aside-first order.
    if (q == rank_) return ShardSample(q, static_cast<int64_t>(own_pick_.At(static_cast<uint64_t>(i))));
    const IndexPermutation order(static_cast<uint64_t>(p.shard_size_[static_cast<size_t>(q)]),
                                 p.Key({0x7069636bULL, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(q)}));
    return ShardSample(q, static_cast<int64_t>(order.At(static_cast<uint64_t>(i))));
  };
  if (k < kept) return pick(rank_, p.exchange_[r] + k);
  // A slot filled from the pool: find whose set-aside sample lands here.
  const int64_t g = static_cast<int64_t>(global_.At(static_cast<uint64_t>(p.pool_start_[r] + (k - kept))));
  const auto it = std::upper_bound(p.pool_start_.begin(), p.pool_start_.end(), g);
  const int q = static_cast<int>(it - p.pool_start_.begin()) - 1;
  return pick(q, g - p.pool_start_[static_cast<size_t>(q)]);
}

int AccessPlan::FirstEpochReader(int64_t sample) const {
  const int64_t n = options_.num_samples;
  if (sample < 0 || sample >= n) return -1;
  auto rank_of_uniform_position = [&](int64_t pos) {
    const int64_t kept = full_batches_ * options_.batch_size + remainder_;
    if (pos >= kept) return -1;  // dropped by drop-last
    return static_cast<int>((pos % options_.batch_size) / local_batch_);
  };
  if (options_.scheme == DistributionScheme::kUniform) {
    return rank_of_uniform_position(static_cast<int64_t>(EpochPermutation(0).Inverse(static_cast<uint64_t>(sample))));
  }
  const IndexPermutation shards(static_cast<uint64_t>(n), Key({0x7368617264ULL}));
  const int64_t s = static_cast<int64_t>(shards.Inverse(static_cast<uint64_t>(sample)));
  const auto owner_it = std::upper_bound(shard_start_.begin(), shard_start_.end(), s);
  const int q = static_cast<int>(owner_it - shard_start_.begin()) - 1;
  const auto qs = static_cast<size_t>(q);
  const IndexPermutation order(static_cast<uint64_t>(shard_size_[qs]),
                               Key({0x7069636bULL, 0, static_cast<uint64_t>(q)}));
  const int64_t i = static_cast<int64_t>(order.Inverse(static_cast<uint64_t>(s - shard_start_[qs])));
  int reader = q;
  int64_t slot;  // its slot k in the reader's epoch order
  if (i >= exchange_[qs]) {
    slot = i - exchange_[qs];
  } else {
    const IndexPermutation pool(static_cast<uint64_t>(pool_size_), Key({0x706f6f6cULL, 0}));
    const int64_t p = static_cast<int64_t>(pool.Inverse(static_cast<uint64_t>(pool_start_[qs] + i)));
    const auto it = std::upper_bound(pool_start_.begin(), pool_start_.end(), p);
    reader = static_cast<int>(it - pool_start_.begin()) - 1;
    const auto rs = static_cast<size_t>(reader);
    slot = shard_size_[rs] - exchange_[rs] + (p - pool_start_[rs]);
  }
  const auto rs = static_cast<size_t>(reader);
  const IndexPermutation rank_order(static_cast<uint64_t>(shard_size_[rs]),
                                    Key({0x6f72646572ULL, 0, static_cast<uint64_t>(reader)}));
  const int64_t j = static_cast<int64_t>(rank_order.Inverse(static_cast<uint64_t>(slot)));
  return j < RankEpochSize(reader) ? reader : -1;
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

int64_t AccessPlan::SampleAt(int rank, int epoch, int64_t j) const { return Epoch(rank, epoch).At(j); }

std::vector<int64_t> AccessPlan::RankEpochSamples(int rank, int epoch) const {
  const EpochOrder order = Epoch(rank, epoch);
  const int64_t n = RankEpochSize(rank);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) out[static_cast<size_t>(j)] = order.At(j);
  return out;
}

}  // namespace hdmlp
