#include "hdmlp/plan/access_plan.h"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>

#include "hdmlp/errors.h"
#include "hdmlp/util/random.h"

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
  const int64_t n = options.num_samples, b = options.batch_size;
  const int world = options.world_size;
  if (n < 1) throw InvalidArgumentError("the dataset has no samples");
  if (b < 1) throw InvalidArgumentError("batch_size must be at least 1, got " + std::to_string(b));
  if (options.epochs < 1) throw InvalidArgumentError("epochs must be at least 1, got " + std::to_string(options.epochs));
  if (world < 1) throw InvalidArgumentError("world_size must be at least 1, got " + std::to_string(world));
  if (!(options.exchange_fraction >= 0 && options.exchange_fraction <= 1)) {
    throw InvalidArgumentError("exchange_fraction must be in [0, 1], got " + std::to_string(options.exchange_fraction));
  }
  if (b < world) {
    throw InvalidArgumentError("the global batch_size " + std::to_string(b) + " is smaller than the world size " +
                               std::to_string(world) +
                               ": every rank needs at least one sample of every global batch; give a global "
                               "batch_size of at least " + std::to_string(world) +
                               " (or batch_size_per_rank >= 1), or use fewer ranks");
  }
  if (n < world) {
    throw InvalidArgumentError("the dataset has " + std::to_string(n) + " samples, fewer than the " +
                               std::to_string(world) +
                               " ranks: every rank needs at least one sample in every step; use at most " +
                               std::to_string(n) + " ranks or a larger dataset");
  }
  if (options.drop_last && n < b) {
    throw InvalidArgumentError("the global batch_size " + std::to_string(b) + " is larger than the dataset (" +
                               std::to_string(n) +
                               " samples) and drop_last is set: every epoch would be empty; use a smaller "
                               "batch_size or drop_last=False");
  }
  cut_ = CutEpoch(n, b, world, options.drop_last);
  if (options.scheme != DistributionScheme::kUniform) {
    // Shards are cut without drop-last: with it, a rank reads a prefix of its shard's epoch order.
    const Cut whole = CutEpoch(n, b, world, /*drop_last=*/false);
    const auto ranks = static_cast<size_t>(world);
    shard_size_.resize(ranks);
    shard_start_.resize(ranks + 1, 0);
    exchange_.resize(ranks, 0);
    pool_start_.resize(ranks + 1, 0);
    for (size_t r = 0; r < ranks; ++r) {
      shard_size_[r] = EpochSize(whole, static_cast<int>(r));
      shard_start_[r + 1] = shard_start_[r] + shard_size_[r];
      // Without a shuffle nothing is exchanged: partial_local is local.
      if (options.scheme == DistributionScheme::kPartialLocal && options.shuffle) {
        exchange_[r] = static_cast<int64_t>(options.exchange_fraction * static_cast<double>(shard_size_[r]));
      }
      pool_start_[r + 1] = pool_start_[r] + exchange_[r];
    }
    pool_size_ = pool_start_[ranks];
  }
  SetUpStart();
}

void AccessPlan::SetUpStart() {
  const ResumePoint& start = options_.start;
  const int64_t b = options_.batch_size;
  const std::string epochs = std::to_string(options_.epochs);
  if (start.epoch < 0 || start.epoch > options_.epochs) {
    throw InvalidArgumentError("the resume point's epoch " + std::to_string(start.epoch) + " is outside 0.." + epochs +
                               " (" + epochs + ": all of the job's epochs delivered)");
  }
  if (start.order_world_size < 0) {
    throw InvalidArgumentError("the resume point's order_world_size must be at least 0, got " +
                               std::to_string(start.order_world_size));
  }
  if (start.position < 0 || start.position % b != 0) {
    throw InvalidArgumentError("the resume point's position " + std::to_string(start.position) +
                               " is not a global batch boundary (a multiple of the global batch size " +
                               std::to_string(b) + ")");
  }
  if (start.position == 0) return;
  if (start.epoch == options_.epochs) {
    throw InvalidArgumentError("the resume point is inside epoch " + epochs + ", after the job's last epoch (" +
                               std::to_string(options_.epochs - 1) + "): create the job with more epochs");
  }
  const int old_world = start.order_world_size > 0 ? start.order_world_size : options_.world_size;
  const Cut old_cut = CutEpoch(options_.num_samples, b, old_world, options_.drop_last);
  const int64_t h = start.position / b;
  const std::string where = "epoch " + std::to_string(start.epoch);
  if (old_world < 1 || h >= old_cut.batches) {
    throw InvalidArgumentError("the resume point's position " + std::to_string(start.position) + " is past the " +
                               std::to_string(old_cut.batches) + " global batches of " + where +
                               ": a position inside an epoch must come before its last global batch");
  }
  if (h >= cut_.batches) {
    // Only possible when this world size merges a last remainder that the
    // old one kept as its own batch: the remainder alone is left.
    const int64_t left = (old_cut.batches - 1) * b + old_cut.last - start.position;
    throw InvalidArgumentError(
        "the job stopped before the last global batch of " + where + ", which holds only " + std::to_string(left) +
        " samples: fewer than the " + std::to_string(options_.world_size) +
        " ranks of this job, and every rank needs a sample in every step. Resume on at most " +
        std::to_string(left) + " ranks to finish " + where + ", or start at epoch " +
        std::to_string(start.epoch + 1) + " (start_epoch) and leave those samples out");
  }
  start_batch_ = h;
  if (options_.scheme != DistributionScheme::kUniform && old_world != options_.world_size) {
    // A local scheme's order depends on the world size: the epoch goes on in
    // the order it began with.
    PlanOptions origin = options_;
    origin.world_size = old_world;
    origin.start = ResumePoint();
    try {
      origin_plan_ = std::make_shared<const AccessPlan>(origin);
    } catch (const InvalidArgumentError& e) {
      throw InvalidArgumentError("the resume point's order_world_size " + std::to_string(old_world) +
                                 " is impossible: " + e.what());
    }
  }
}

AccessPlan::Cut AccessPlan::CutEpoch(int64_t num_samples, int64_t batch_size, int world_size, bool drop_last) {
  const int64_t full = num_samples / batch_size, remainder = num_samples % batch_size;
  if (drop_last || remainder == 0) return Cut{full, batch_size};
  if (remainder >= world_size) return Cut{full + 1, remainder};
  // Too few for one sample per rank: the remainder joins the previous batch
  // (there is one: the constructor refuses num_samples < world_size).
  return Cut{full, batch_size + remainder};
}

PositionRange AccessPlan::Share(int rank, int64_t batch_samples) const {
  const int64_t world = options_.world_size;
  const int64_t q = batch_samples / world, m = batch_samples % world;
  const auto r = static_cast<int64_t>(rank);
  return PositionRange{r * q + std::min(r, m), q + (r < m ? 1 : 0)};
}

int64_t AccessPlan::EpochSize(const Cut& cut, int rank) const {
  return (cut.batches - 1) * Share(rank, options_.batch_size).size + Share(rank, cut.last).size;
}

uint64_t AccessPlan::Key(std::initializer_list<uint64_t> words) const {
  // Not keyed by the scheme: partial_local with Q = 0 is exactly local.
  uint64_t k = DeriveKey({options_.seed, 0x6c6f63616cULL});
  for (uint64_t w : words) k = DeriveKey({k, w});
  return k;
}

IndexPermutation AccessPlan::Permutation(uint64_t n, uint64_t key) const {
  return options_.shuffle ? IndexPermutation(n, key) : IndexPermutation::Identity(n);
}

EpochOrder::EpochOrder(const AccessPlan* plan, int rank, int epoch)
    : plan_(plan), rank_(rank), epoch_(epoch),
      global_(plan->options_.scheme == DistributionScheme::kUniform
                  ? plan->EpochPermutation(epoch)
                  : plan->Permutation(static_cast<uint64_t>(plan->pool_size_),
                                      plan->Key({0x706f6f6cULL, static_cast<uint64_t>(epoch)}))),
      rank_order_(plan->options_.scheme == DistributionScheme::kUniform
                      ? IndexPermutation(0, 0)
                      : plan->Permutation(static_cast<uint64_t>(plan->shard_size_[static_cast<size_t>(rank)]),
                                          plan->Key({0x6f72646572ULL, static_cast<uint64_t>(epoch),
                                                     static_cast<uint64_t>(rank)}))),
      shards_(plan->options_.scheme == DistributionScheme::kUniform
                  ? IndexPermutation(0, 0)
                  : plan->Permutation(static_cast<uint64_t>(plan->options_.num_samples), plan->Key({0x7368617264ULL}))),
      own_pick_(plan->options_.scheme == DistributionScheme::kUniform
                    ? IndexPermutation(0, 0)
                    : plan->Permutation(static_cast<uint64_t>(plan->shard_size_[static_cast<size_t>(rank)]),
                                        plan->Key({0x7069636bULL, static_cast<uint64_t>(epoch),
                                                   static_cast<uint64_t>(rank)}))) {
  if (plan->origin_plan_ && epoch == plan->options_.start.epoch) {
    const AccessPlan& origin = *plan->origin_plan_;
    auto orders = std::make_shared<std::vector<EpochOrder>>();
    orders->reserve(static_cast<size_t>(origin.options_.world_size));
    for (int r = 0; r < origin.options_.world_size; ++r) orders->push_back(origin.Epoch(r, epoch));
    origin_ = std::move(orders);
  }
}

int64_t EpochOrder::ShardSample(int rank, int64_t i) const {
  return static_cast<int64_t>(shards_.At(static_cast<uint64_t>(plan_->shard_start_[static_cast<size_t>(rank)] + i)));
}

int64_t EpochOrder::At(int64_t j) const {
  const AccessPlan& p = *plan_;
  if (origin_) return p.origin_plan_->SampleAtPosition(*origin_, p.GlobalPosition(rank_, j));
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
    const IndexPermutation order =
        p.Permutation(static_cast<uint64_t>(p.shard_size_[static_cast<size_t>(q)]),
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

int AccessPlan::RankOfOffset(int64_t batch_samples, int64_t offset) const {
  // The first m ranks take q + 1 positions, the others q (q >= 1: B >= N).
  const int64_t q = batch_samples / options_.world_size, m = batch_samples % options_.world_size;
  return static_cast<int>(offset < m * (q + 1) ? offset / (q + 1) : m + (offset - m * (q + 1)) / q);
}

int AccessPlan::RankAtPosition(int64_t q) const {
  const int64_t h = std::min(q / options_.batch_size, cut_.batches - 1);
  const int64_t begin = GlobalBatchBegin(h);
  return RankOfOffset(GlobalBatchEnd(h) - begin, q - begin);
}

int64_t AccessPlan::SampleAtPosition(const std::vector<EpochOrder>& orders, int64_t q) const {
  const int64_t h = std::min(q / options_.batch_size, cut_.batches - 1);
  const int64_t begin = GlobalBatchBegin(h);
  const int r = RankOfOffset(GlobalBatchEnd(h) - begin, q - begin);
  return orders[static_cast<size_t>(r)].At(LocalBatchStart(r, h) + (q - RankSlice(r, h).begin));
}

int64_t AccessPlan::LocalBatchStart(int rank, int64_t h) const {
  // Every global batch but the last holds batch_size positions.
  return h < cut_.batches ? h * NominalLocalBatchSize(rank) : RankEpochSize(rank);
}

int64_t AccessPlan::StartItem(int rank) const {
  return static_cast<int64_t>(options_.start.epoch) * RankEpochSize(rank) + LocalBatchStart(rank, start_batch_);
}

int64_t AccessPlan::PositionInEpoch(int64_t sample, int epoch) const {
  const int64_t n = options_.num_samples;
  if (sample < 0 || sample >= n) return -1;
  if (origin_plan_ && epoch == options_.start.epoch) return origin_plan_->PositionInEpoch(sample, epoch);
  const auto e = static_cast<uint64_t>(epoch);
  if (options_.scheme == DistributionScheme::kUniform) {
    const auto pos = static_cast<int64_t>(EpochPermutation(epoch).Inverse(static_cast<uint64_t>(sample)));
    return pos < GlobalBatchEnd(cut_.batches - 1) ? pos : -1;  // else dropped by drop-last
  }
  // Invert the local scheme: the sample's shard and place in its owner's
  // set-aside-first order, then (if set aside) where the pool deals it, then
  // the reader's epoch order.
  const IndexPermutation shards = Permutation(static_cast<uint64_t>(n), Key({0x7368617264ULL}));
  const int64_t s = static_cast<int64_t>(shards.Inverse(static_cast<uint64_t>(sample)));
  const auto owner_it = std::upper_bound(shard_start_.begin(), shard_start_.end(), s);
  const int q = static_cast<int>(owner_it - shard_start_.begin()) - 1;
  const auto qs = static_cast<size_t>(q);
  const IndexPermutation order =
      Permutation(static_cast<uint64_t>(shard_size_[qs]), Key({0x7069636bULL, e, static_cast<uint64_t>(q)}));
  const int64_t i = static_cast<int64_t>(order.Inverse(static_cast<uint64_t>(s - shard_start_[qs])));
  int reader = q;
  int64_t slot;  // its slot k in the reader's epoch order
  if (i >= exchange_[qs]) {
    slot = i - exchange_[qs];
  } else {
    const IndexPermutation pool = Permutation(static_cast<uint64_t>(pool_size_), Key({0x706f6f6cULL, e}));
    const int64_t p = static_cast<int64_t>(pool.Inverse(static_cast<uint64_t>(pool_start_[qs] + i)));
    const auto it = std::upper_bound(pool_start_.begin(), pool_start_.end(), p);
    reader = static_cast<int>(it - pool_start_.begin()) - 1;
    const auto rs = static_cast<size_t>(reader);
    slot = shard_size_[rs] - exchange_[rs] + (p - pool_start_[rs]);
  }
  const auto rs = static_cast<size_t>(reader);
  const IndexPermutation rank_order = Permutation(static_cast<uint64_t>(shard_size_[rs]),
                                                  Key({0x6f72646572ULL, e, static_cast<uint64_t>(reader)}));
  const int64_t j = static_cast<int64_t>(rank_order.Inverse(static_cast<uint64_t>(slot)));
  return j < RankEpochSize(reader) ? GlobalPosition(reader, j) : -1;  // else dropped by drop-last
}

int AccessPlan::FirstEpochReader(int64_t sample) const {
  const ResumePoint& start = options_.start;
  if (start.epoch >= options_.epochs) return -1;
  const int64_t q = PositionInEpoch(sample, start.epoch);
  if (q >= start.position) return RankAtPosition(q);  // q = -1: not read in the start epoch
  if (start.position == 0 || start.epoch + 1 >= options_.epochs) return -1;
  // Delivered before the start: first read again in the next epoch.
  const int64_t next = PositionInEpoch(sample, start.epoch + 1);
  return next < 0 ? -1 : RankAtPosition(next);
}

int64_t AccessPlan::BatchesPerEpoch() const { return cut_.batches; }

int64_t AccessPlan::GlobalBatchBegin(int64_t h) const { return h * options_.batch_size; }

int64_t AccessPlan::GlobalBatchEnd(int64_t h) const {
  return h + 1 < cut_.batches ? (h + 1) * options_.batch_size : h * options_.batch_size + cut_.last;
}

PositionRange AccessPlan::RankSlice(int rank, int64_t h) const {
  const int64_t begin = GlobalBatchBegin(h);
  const PositionRange share = Share(rank, GlobalBatchEnd(h) - begin);
  return PositionRange{begin + share.begin, share.size};
}

int64_t AccessPlan::RankEpochSize(int rank) const { return EpochSize(cut_, rank); }

int64_t AccessPlan::NominalLocalBatchSize(int rank) const { return Share(rank, options_.batch_size).size; }

int64_t AccessPlan::GlobalPosition(int rank, int64_t j) const {
  // Every global batch but the last has batch_size positions, so the rank's
  // slice has the same size in each of them.
  const int64_t per_batch = NominalLocalBatchSize(rank);  // >= 1: batch_size >= world_size
  const int64_t before_last = (cut_.batches - 1) * per_batch;
  if (j < before_last) {
    const int64_t h = j / per_batch;
    return RankSlice(rank, h).begin + j % per_batch;
  }
  return RankSlice(rank, cut_.batches - 1).begin + (j - before_last);
}

IndexPermutation AccessPlan::EpochPermutation(int epoch) const {
  return Permutation(static_cast<uint64_t>(options_.num_samples),
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
