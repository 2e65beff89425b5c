#include "hdmlp/job/job.h"

#include <random>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs before any member that depends on the arguments is built.
const JobOptions& Validated(const JobOptions& options) {
  if (options.batch_size < 1) {
    throw InvalidArgumentError("batch_size must be at least 1, got " + std::to_string(options.batch_size));
  }
  if (options.epochs < 1) throw InvalidArgumentError("epochs must be at least 1, got " + std::to_string(options.epochs));
  ParseDistributionScheme(options.distr_scheme);
  if (options.config_path.empty()) throw InvalidArgumentError("config_path is empty: give a configuration file");
  return options;
}

uint64_t DrawSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32 | device()) & 0x7fffffffffffffffULL;
}

}  // namespace

Job::Job(const JobOptions& options)
    : options_(Validated(options)),
      env_(options.env != nullptr ? options.env : Env::Default()),
      config_(Config::LoadFile(options.config_path)),
      metrics_(options.epochs) {
  index_ = ScanImageFolder(env_, options.dataset_path, options.scan);
  seed_ = options.has_seed ? options.seed : DrawSeed();

  PlanOptions plan;
  plan.num_samples = index_.size();
  plan.batch_size = options.batch_size;
  plan.epochs = options.epochs;
  plan.seed = seed_;
  plan.drop_last = options.drop_last;
  plan.world_size = world_size();
  plan.scheme = ParseDistributionScheme(options.distr_scheme);
  plan_ = std::make_unique<AccessPlan>(plan);
  epoch_size_ = plan_->RankEpochSize(rank());
  if (epoch_size_ == 0) {
    throw InvalidArgumentError("batch_size " + std::to_string(options.batch_size) + " is larger than the dataset ('" +
                               options.dataset_path + "', " + std::to_string(index_.size()) +
                               " samples) and drop_last_batch is set: every epoch would be empty");
  }

  cache_ = std::make_unique<CacheHierarchy>(config_, *plan_, rank(), index_, env_,
                                            options.local_env != nullptr ? options.local_env : Env::Default());
  cache_->Start();

  const StorageClassConfig& staging = config_.storage_classes.at(0);
  // MB in configs are MiB (docs/config.md).
  const auto capacity = static_cast<int64_t>(staging.capacity_mb * 1024 * 1024);
  staging_ = std::make_unique<StagingBuffer>(capacity, ItemOf(options.epochs, 0));
  workers_.reserve(static_cast<size_t>(staging.threads));
  for (int t = 0; t < staging.threads; ++t) workers_.emplace_back([this] { WorkerLoop(); });
}

Job::~Job() { Close(); }

void Job::Close() {
  if (closed_.exchange(true)) return;
  if (staging_) staging_->Close();
  // Wakes workers waiting for a prefetch, joins the prefetch threads and
  // removes on-disk classes; the classes' memory lives until the destructor.
  if (cache_) cache_->Close();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void Job::WorkerLoop() {
  const auto estimate = [this](int64_t item) {
    return index_.sizes[static_cast<size_t>(plan_->SampleAt(rank(), static_cast<int>(item / epoch_size_), item % epoch_size_))];
  };
  int64_t item;
  while (staging_->Claim(estimate, &item)) {
    const int epoch = static_cast<int>(item / epoch_size_);
    const int64_t sample = plan_->SampleAt(rank(), epoch, item % epoch_size_);
    const auto start = Clock::now();
    try {
      SampleBuffer bytes;
      const std::string& source = cache_->Fetch(sample, &bytes);
      metrics_.AddRead(epoch, source, bytes.size, SecondsSince(start));
      staging_->Complete(item, std::move(bytes));
    } catch (...) {
      staging_->Fail(item, std::current_exception());
    }
  }
}

void Job::BeginEpoch(int epoch) {
  if (closed_) throw ClosedError("the job is closed");
  if (epoch < 0 || epoch >= options_.epochs) {
    throw InvalidArgumentError("epoch " + std::to_string(epoch) + " is outside the job's " +
                               std::to_string(options_.epochs) + " epochs (0.." + std::to_string(options_.epochs - 1) +
                               "): create the Job with more epochs");
  }
  if (epoch <= epoch_) {
    throw InvalidArgumentError("epoch " + std::to_string(epoch) + " has already been started; epochs run in order");
  }
  if (epoch_ >= 0 && !pending_.ids.empty()) metrics_.AddDelivered(epoch_, 0, pending_stall_);
  epoch_ = epoch;
  batch_ = 0;
  next_j_ = 0;
  pending_ = Batch();
  pending_stall_ = 0;
  staging_->SkipTo(ItemOf(epoch, 0));
}

Job::Next Job::NextBatch(Batch* out, std::chrono::milliseconds max_wait) {
  if (closed_) throw ClosedError("the job is closed");
  if (epoch_ < 0) throw InvalidArgumentError("no epoch has been started: call BeginEpoch first");
  if (batch_ >= plan_->BatchesPerEpoch()) return Next::kEndOfEpoch;

  const int64_t size = plan_->LocalBatchSize(rank(), batch_);
  if (pending_.ids.empty() && pending_.samples.empty()) {
    pending_.epoch = epoch_;
    pending_.index = batch_;
    pending_.ids.reserve(static_cast<size_t>(size));
    pending_.labels.reserve(static_cast<size_t>(size));
    pending_.samples.reserve(static_cast<size_t>(size));
  }
  const auto deadline = Clock::now() + max_wait;
  while (static_cast<int64_t>(pending_.samples.size()) < size) {
    const int64_t j = next_j_;
    SampleBuffer bytes;
    std::exception_ptr error;
    const auto wait_start = Clock::now();
    const auto result = staging_->Take(ItemOf(epoch_, j), deadline, &bytes, &error);
    pending_stall_ += SecondsSince(wait_start);
    switch (result) {
      case StagingBuffer::TakeResult::kTimeout:
        return Next::kTimeout;
      case StagingBuffer::TakeResult::kClosed:
        throw ClosedError("the job was closed while waiting for a batch");
      case StagingBuffer::TakeResult::kFailed: {
        // Skip the rest of the batch so the next call starts a whole batch.
        const int64_t batch_end = next_j_ + (size - static_cast<int64_t>(pending_.samples.size()));
        next_j_ = batch_end;
        staging_->SkipTo(ItemOf(epoch_, batch_end));
        ++batch_;
        metrics_.AddDelivered(epoch_, 0, pending_stall_);
        pending_ = Batch();
        pending_stall_ = 0;
        std::rethrow_exception(error);
      }
      case StagingBuffer::TakeResult::kReady:
        break;
    }
    const int64_t sample = plan_->SampleAt(rank(), epoch_, j);
    pending_.ids.push_back(sample);
    pending_.labels.push_back(index_.labels[static_cast<size_t>(sample)]);
    pending_.samples.push_back(std::move(bytes));
    ++next_j_;
  }
  metrics_.AddDelivered(epoch_, size, pending_stall_);
  *out = std::move(pending_);
  pending_ = Batch();
  pending_stall_ = 0;
  ++batch_;
  return Next::kBatch;
}

}  // namespace hdmlp
