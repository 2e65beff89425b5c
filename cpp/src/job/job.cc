#include "hdmlp/job/job.h"

#include <optional>
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

std::string Signature(const JobOptions& o, const ImageFolderIndex& index, const Config& config) {
  std::string s = "samples=" + std::to_string(index.size()) + "\nfingerprint=" + std::to_string(index.Fingerprint()) +
                  "\nbatch_size=" + std::to_string(o.batch_size) + "\nepochs=" + std::to_string(o.epochs) +
                  "\ndistr_scheme=" + o.distr_scheme + "\ndrop_last_batch=" + (o.drop_last ? "true" : "false") +
                  "\nexchange_fraction=" + std::to_string(o.exchange_fraction) + "\nstorage classes=";
  for (const auto& c : config.storage_classes) s += c.backend + " ";
  return s;
}

std::string FirstDifference(const std::string& a, const std::string& b, int rank_a, int rank_b) {
  size_t i = 0, j = 0;
  for (;;) {
    const size_t ea = a.find('\n', i), eb = b.find('\n', j);
    const std::string la = a.substr(i, ea == std::string::npos ? std::string::npos : ea - i);
    const std::string lb = b.substr(j, eb == std::string::npos ? std::string::npos : eb - j);
    if (la != lb) {
      const std::string key = la.substr(0, la.find('='));
      return "ranks disagree on " + key + ": rank " + std::to_string(rank_a) + " has " + la.substr(la.find('=') + 1) +
             ", rank " + std::to_string(rank_b) + " has " + lb.substr(lb.find('=') + 1) +
             "; every rank must create the Job with the same arguments, dataset and configuration shape";
    }
    if (ea == std::string::npos || eb == std::string::npos) return "";
    i = ea + 1;
    j = eb + 1;
  }
}

}  // namespace

Job::Job(const JobOptions& options)
    : options_(Validated(options)),
      comm_(options.use_mpi ? Communicator::Create(options.timeout_s) : nullptr),
      env_(options.env != nullptr ? options.env : Env::Default()),
      metrics_(options.epochs) {
  // Under MPI a rank that cannot start must still take part in the check
  // below, or the others would wait for it until their timeout.
  std::string local_error;
  std::exception_ptr local_exception;
  try {
    config_ = Config::LoadFile(options.config_path);
    index_ = ScanImageFolder(env_, options.dataset_path, options.scan);
  } catch (const std::exception& e) {
    if (!comm_) throw;
    local_error = e.what();
    local_exception = std::current_exception();
  }
  seed_ = options.has_seed ? options.seed : DrawSeed();
  if (comm_) {
    try {
      CheckRanksAgree(local_error);
    } catch (...) {
      if (local_exception) std::rethrow_exception(local_exception);  // this rank's own error, as it was
      throw;
    }
  }

  PlanOptions plan;
  plan.num_samples = index_.size();
  plan.batch_size = options.batch_size;
  plan.epochs = options.epochs;
  plan.seed = seed_;
  plan.drop_last = options.drop_last;
  plan.world_size = world_size();
  plan.scheme = ParseDistributionScheme(options.distr_scheme);
  plan.exchange_fraction = options.exchange_fraction;
  plan_ = std::make_unique<AccessPlan>(plan);
  epoch_size_ = plan_->RankEpochSize(rank());
  if (epoch_size_ == 0) {
    throw InvalidArgumentError("batch_size " + std::to_string(options.batch_size) + " is larger than the dataset ('" +
                               options.dataset_path + "', " + std::to_string(index_.size()) +
                               " samples) and drop_last_batch is set: every epoch would be empty");
  }

  const StorageClassConfig& staging = config_.storage_classes.at(0);
  cache_ = std::make_unique<CacheHierarchy>(config_, *plan_, rank(), index_, env_,
                                            options.local_env != nullptr ? options.local_env : Env::Default(),
                                            comm_.get(), staging.threads);
  cache_->Start();

  // MB in configs are MiB (docs/config.md).
  const auto capacity = static_cast<int64_t>(staging.capacity_mb * 1024 * 1024);
  staging_ = std::make_unique<StagingBuffer>(capacity, ItemOf(options.epochs, 0));
  workers_.reserve(static_cast<size_t>(staging.threads));
  for (int t = 0; t < staging.threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

void Job::CheckRanksAgree(const std::string& local_error) {
  // Every rank sends either its error or its view of the job (and its seed);
  // every rank then draws the same conclusion from the same data.
  const std::string mine = local_error.empty()
                               ? "ok\n" + std::to_string(seed_) + "\n" + Signature(options_, index_, config_)
                               : "error\n" + local_error;
  const std::vector<std::string> all = comm_->AllGather(mine, "the start-up check of the job's arguments");
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].compare(0, 6, "error\n") == 0) {
      throw InvalidArgumentError("rank " + std::to_string(r) + " could not start the job: " + all[r].substr(6));
    }
  }
  auto body = [](const std::string& s) { return s.substr(s.find('\n', 3) + 1); };
  for (size_t r = 1; r < all.size(); ++r) {
    const std::string diff = FirstDifference(body(all[0]), body(all[r]), 0, static_cast<int>(r));
    if (!diff.empty()) throw InvalidArgumentError(diff);
  }
  seed_ = std::stoull(all[0].substr(3, all[0].find('\n', 3) - 3));  // rank 0's seed
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

void Job::WorkerLoop(int slot) {
  // The sample of a stream item, keeping the epoch's order between calls:
  // building an EpochOrder (its permutations) costs more than evaluating it.
  std::optional<EpochOrder> order;
  int order_epoch = -1;
  const auto sample_of = [&](int64_t item) {
    const int epoch = static_cast<int>(item / epoch_size_);
    if (epoch != order_epoch) {
      order = plan_->Epoch(rank(), epoch);
      order_epoch = epoch;
    }
    return order->At(item % epoch_size_);
  };
  // Claim calls this on the claiming thread, so sharing sample_of is safe.
  const auto estimate = [&](int64_t item) { return index_.sizes[static_cast<size_t>(sample_of(item))]; };
  int64_t item;
  while (staging_->Claim(estimate, &item)) {
    const int epoch = static_cast<int>(item / epoch_size_);
    const int64_t sample = sample_of(item);
    const auto start = Clock::now();
    try {
      SampleBuffer bytes;
      const std::string& source = cache_->Fetch(sample, &bytes, slot);
      metrics_.AddRead(epoch, source, bytes.size, SecondsSince(start));
      staging_->Complete(item, std::move(bytes));
    } catch (...) {
      staging_->Fail(item, CapturedError::FromCurrentException());
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
  epoch_order_ = plan_->Epoch(rank(), epoch);
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
    CapturedError error;
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
        error.Throw();
      }
      case StagingBuffer::TakeResult::kReady:
        break;
    }
    const int64_t sample = epoch_order_->At(j);
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
