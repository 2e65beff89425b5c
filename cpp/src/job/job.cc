#include "hdmlp/job/job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <random>

#include <unistd.h>

#include "hdmlp/config/cpu_budget.h"
#include "hdmlp/errors.h"
#include "hdmlp/env/memory_limit.h"
#include "hdmlp/env/start_thread.h"
#include "hdmlp/job/memory_check.h"
#include "hdmlp/job/process_budget.h"
#include "hdmlp/transforms/raw_image.h"

namespace hdmlp {
namespace {

using Clock = std::chrono::steady_clock;

// Far above any real batch, and far enough below 2^63 that no sum of a few
// batch sizes overflows.
constexpr int64_t kMaxBatchSize = int64_t{1} << 62;

// The most seconds a wait may be given: beyond it a deadline would
// overflow the clock's nanoseconds.
constexpr double kMaxWaitSeconds = 1e9;

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

void CheckSeconds(const char* name, double value, bool zero_means_default) {
  if (zero_means_default && value == 0) return;
  if (!(value > 0 && value <= kMaxWaitSeconds)) {
    throw InvalidArgumentError(std::string(name) + " must be a number of seconds > 0 and at most 1e9, got " +
                               Number(value) + (std::isnan(value) || std::isinf(value)
                                                    ? " (a wait must end: an infinite one would hang on a missing "
                                                      "rank or a stuck read)"
                                                    : ""));
  }
}

// Runs before any member that depends on the arguments is built.
const JobOptions& Validated(const JobOptions& options) {
  if (options.batch_size_per_rank < 0 || options.batch_size_per_rank > kMaxBatchSize) {
    throw InvalidArgumentError("batch_size_per_rank must be from 1 to 2**62, got " +
                               std::to_string(options.batch_size_per_rank));
  }
  if (options.batch_size_per_rank > 0 && options.batch_size != 0) {
    throw InvalidArgumentError("give exactly one of batch_size (the global batch) and batch_size_per_rank, got "
                               "batch_size=" + std::to_string(options.batch_size) +
                               " and batch_size_per_rank=" + std::to_string(options.batch_size_per_rank));
  }
  if (options.batch_size_per_rank == 0 && (options.batch_size < 1 || options.batch_size > kMaxBatchSize)) {
    throw InvalidArgumentError("batch_size must be from 1 to 2**62, got " + std::to_string(options.batch_size));
  }
  if (options.epochs < 1) throw InvalidArgumentError("epochs must be at least 1, got " + std::to_string(options.epochs));
  if (options.staging_threads < 0 || options.staging_threads > 1024) {
    throw InvalidArgumentError("num_workers (the staging threads) must be from 1 to 1024, got " +
                               std::to_string(options.staging_threads));
  }
  if (options.spare_cores < 0 || options.spare_cores > 1024) {
    throw InvalidArgumentError("spare_cores (the CPUs the staging workers leave to the training process) must be "
                               "from 0 to 1024, got " + std::to_string(options.spare_cores));
  }
  if (options.launcher_world_size < 0 ||
      (options.launcher_world_size > 0 &&
       (options.launcher_rank < 0 || options.launcher_rank >= options.launcher_world_size))) {
    throw InvalidArgumentError("rank " + std::to_string(options.launcher_rank) + " of world size " +
                               std::to_string(options.launcher_world_size) + " from " + options.launcher_name +
                               " is impossible: the rank must be in [0, world size)");
  }
  ParseDistributionScheme(options.distr_scheme);
  if (options.start_epoch < 0 || options.start_epoch > options.epochs) {
    throw InvalidArgumentError("start_epoch must be in 0.." + std::to_string(options.epochs) +
                               " (the job's epochs), got " + std::to_string(options.start_epoch));
  }
  if (options.resume && options.start_epoch > 0) {
    throw InvalidArgumentError("give at most one of resume (a state) and start_epoch, got both");
  }
  if (options.config_path.empty()) throw InvalidArgumentError("config_path is empty: give a configuration file");
  CheckSeconds("timeout_s", options.timeout_s, false);
  CheckSeconds("read_timeout_s", options.read_timeout_s, true);
  if (!(options.exchange_fraction >= 0 && options.exchange_fraction <= 1)) {
    throw InvalidArgumentError("exchange_fraction must be in [0, 1], got " + Number(options.exchange_fraction));
  }
  return options;
}

std::shared_ptr<Env> SharedEnv(const JobOptions& o) {
  if (o.shared_env) return o.shared_env;
  // Not owned: the caller keeps it alive (Env::Default() lives forever).
  return std::shared_ptr<Env>(o.env != nullptr ? o.env : Env::Default(), [](Env*) {});
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

uint64_t DrawSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32 | device()) & 0x7fffffffffffffffULL;
}

std::string Signature(const JobOptions& o, const Source& source, const Config& config) {
  std::string s = "source=" + source.kind() + "\nsamples=" + std::to_string(source.size()) +
                  "\nfingerprint=" + std::to_string(source.Fingerprint()) +
                  "\nbatch_size=" + std::to_string(o.batch_size) + "\nepochs=" + std::to_string(o.epochs) +
                  "\ndistr_scheme=" + o.distr_scheme + "\ndrop_last_batch=" + (o.drop_last ? "true" : "false") +
                  "\nshuffle=" + (o.shuffle ? "true" : "false") +
                  "\nexchange_fraction=" + std::to_string(o.exchange_fraction) + "\nstorage classes=";
  for (const auto& c : config.storage_classes) s += c.backend + " ";
  s += "\ntransforms=";
  for (const auto& t : o.transforms) {
    s += t.op + "(";
    for (const auto& [key, values] : t.args) {
      s += key + ":";
      for (double v : values) s += std::to_string(v) + ",";
      s += " ";
    }
    s += ") ";
  }
  s += "\non_error=" + std::string(o.skip_bad_samples ? "skip" : "raise");
  s += "\nresume=" + (o.resume ? DescribeState(*o.resume)
                               : o.start_epoch > 0 ? "the start of epoch " + std::to_string(o.start_epoch) : "none");
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

// N of a percent capacity ("25%"), or 0 for one in MB.
double PercentOf(const StorageClassConfig& c) {
  if (c.capacity_spec.empty() || c.capacity_spec.back() != '%') return 0;
  return std::strtod(c.capacity_spec.c_str(), nullptr);  // the config loader checked the format
}

}  // namespace

Job::Job(const JobOptions& options)
    : options_(Validated(options)),
      creator_pid_(::getpid()),
      comm_(options.use_mpi ? Communicator::Create(options.timeout_s, options.interrupt) : nullptr),
      shared_env_(SharedEnv(options)),
      env_(shared_env_.get()),
      metrics_(options.epochs) {
  startup_.Lap("communicator");
  if (comm_) {
    rank_ = comm_->rank();
    world_size_ = comm_->size();
  } else if (options.launcher_world_size > 0) {
    rank_ = options.launcher_rank;
    world_size_ = options.launcher_world_size;
  }
  // A rank that cannot start must still take part in the check below, or
  // the others would wait for it until their timeout.
  const bool ranks_talk = comm_ != nullptr || static_cast<bool>(options.gather);
  CapturedError local_error;
  std::exception_ptr local_exception;
  try {
    LoadConfigAndChain();
    startup_.Lap("config");
    OpenDataset();
    startup_.Lap("scan");
  } catch (const std::exception&) {
    if (!ranks_talk) throw;
    local_error = CapturedError::FromCurrentException();
    local_exception = std::current_exception();
  }
  seed_ = options.resume ? options.resume->seed : options.has_seed ? options.seed : DrawSeed();
  if (ranks_talk) {
    try {
      CheckRanksAgree(local_error);
    } catch (...) {
      if (local_exception) std::rethrow_exception(local_exception);  // this rank's own error, as it was
      throw;
    }
  } else if (options.launcher_local_world_size > 0) {
    ranks_on_this_node_ = options.launcher_local_world_size;
    ranks_sharing_cpus_ = ranks_on_this_node_;  // no masks to compare: assume they share the node
  }
  // The ranks gathered what they needed: the hook may hold the caller's
  // objects (a Python function), which are not ours to keep.
  options_.gather = nullptr;
  SizeStagingThreads();
  startup_.Lap("startup_check");
  PlanAccess();
  startup_.Lap("access_plan");
  PlanBatchMemory();
  startup_.Lap("batch_memory");
  StartStorageClasses();
  startup_.Lap("cache_start");
  StartStaging();
  // The job's threads call MPI: they stop before MPI is finalised, however
  // the process exits. Registered last: a constructor that throws never
  // leaves a stop function behind (its members stop their own threads).
  if (comm_) mpi_user_ = Communicator::RegisterUser([this] { Close(); });
  startup_.Lap("staging");
}

void Job::LoadConfigAndChain() {
  const JobOptions& options = options_;
  if (comm_ && options.launcher_world_size > 0 &&
      (options.launcher_rank != rank_ || options.launcher_world_size != world_size_)) {
    throw InvalidArgumentError("MPI says this process is rank " + std::to_string(rank_) + " of " +
                               std::to_string(world_size_) + ", but according to " + options.launcher_name +
                               " it is rank " + std::to_string(options.launcher_rank) + " of " +
                               std::to_string(options.launcher_world_size) +
                               ": start the job with one launcher (mpirun/srun, or torchrun without MPI), or "
                               "give torch.distributed MPI's rank and world size");
  }
  if (options.batch_size_per_rank > kMaxBatchSize / world_size_) {
    throw InvalidArgumentError("batch_size_per_rank " + std::to_string(options.batch_size_per_rank) + " times " +
                               std::to_string(world_size_) + " ranks is more than 2**62 samples per batch");
  }
  if (options.batch_size_per_rank > 0) options_.batch_size = options.batch_size_per_rank * world_size_;
  config_ = Config::LoadFile(options.config_path);
  if (options.staging_threads > 0) {
    config_.storage_classes.at(0).threads = options.staging_threads;
    config_.storage_classes.at(0).threads_auto = false;
  }
  // An impossible chain is refused here, before anything is read.
  if (!options.transforms.empty()) pipeline_ = std::make_unique<TransformPipeline>(options.transforms);
}

void Job::OpenDataset() {
  const JobOptions& options = options_;
  // The config's "checkpoint" is the index cache: on or off, and where.
  ScanOptions scan = options.scan;
  if (!config_.checkpoint) scan.use_cache = false;
  if (scan.cache_dir.empty()) scan.cache_dir = JoinPath(config_.checkpoint_path, "index");
  scan.interrupt = options.interrupt;
  scan.keep_damaged = scan.keep_damaged || options.skip_bad_samples;
  source_ = OpenSource(env_, options.dataset_path, options.source, scan);
  // on_error="skip": a shard cut short gave what it had; every sample it
  // lost is counted and named, as a bad sample is, and each damage is a
  // warning (Warnings()).
  for (const auto& lost : source_->damaged_samples()) {
    skipped_.fetch_add(1);
    skipped_files_.push_back(lost);
  }
  arrays_ = source_->format() == SampleFormat::kArray;
  if (arrays_ && pipeline_) {
    throw InvalidArgumentError("'" + options.dataset_path + "' holds arrays (" + source_->sample_array()->ToString() +
                               ", a " + source_->kind() + " source), and transforms decode images: leave "
                               "transforms=None to receive each batch as one [B, ...] array");
  }
  // Every read of the dataset's storage from here on has a deadline.
  reader_ = std::make_shared<SourceReader>(source_, shared_env_,
                                           options.read_timeout_s > 0 ? options.read_timeout_s : options.timeout_s);
  fingerprint_ = source_->Fingerprint();
  if (options.resume) {
    JobState mine = Settings();
    mine.seed = options.has_seed ? options.seed : options.resume->seed;
    const std::string why = ResumeMismatch(*options.resume, mine, options.dataset_path);
    if (!why.empty()) throw InvalidArgumentError(why);
  }
}

// threads = "auto": this process's CPUs, split between the ranks that share
// them. Without transforms the workers mostly wait for reads, and 4 of them
// overlap a slow store's latency on any machine.
void Job::SizeStagingThreads() {
  StorageClassConfig& staging = config_.storage_classes.at(0);
  if (!staging.threads_auto) return;
  staging.threads = ThreadsPerRank(staging.threads, ranks_sharing_cpus_);
  if (pipeline_) staging.threads = std::max(1, staging.threads - options_.spare_cores);
  if (!pipeline_) staging.threads = std::max(staging.threads, 4);
}

void Job::PlanAccess() {
  const JobOptions& options = options_;
  PlanOptions plan;
  plan.num_samples = source_->size();
  plan.batch_size = options.batch_size;
  plan.epochs = options.epochs;
  plan.seed = seed_;
  plan.drop_last = options.drop_last;
  plan.shuffle = options.shuffle;
  plan.world_size = world_size();
  plan.scheme = ParseDistributionScheme(options.distr_scheme);
  plan.exchange_fraction = options.exchange_fraction;
  if (options.resume) {
    plan.start = ResumePointOf(*options.resume);
  } else {
    plan.start.epoch = options.start_epoch;
  }
  try {
    plan_ = std::make_unique<AccessPlan>(plan);
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError("'" + options.dataset_path + "': " + e.what());
  }
  epoch_size_ = plan_->RankEpochSize(rank());
  int64_t items = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(options.epochs), epoch_size_, &items)) {
    throw InvalidArgumentError("epochs * samples per epoch (" + std::to_string(options.epochs) + " * " +
                               std::to_string(epoch_size_) + ") exceeds 2**63: use fewer epochs");
  }
  SetPosition(plan_->start().epoch, plan_->StartBatch());
  ShareCapacities();
}

void Job::PlanBatchMemory() {
  if (pipeline_) {
    sample_shape_ = pipeline_->output().fixed ? pipeline_->output() : FirstImageShape();
    sample_bytes_ = sample_shape_.bytes();
  } else if (arrays_) {
    sample_bytes_ = source_->sample_array()->bytes();
    label_bytes_ = source_->label_array() != nullptr ? source_->label_array()->bytes() : 0;
  }
  memory_at_start_ = ReadMemoryLimit();
  if (!rows()) return;
  int64_t largest_batch = 1;
  for (int64_t b = 0; b < plan_->BatchesPerEpoch(); ++b) {
    largest_batch = std::max(largest_batch, plan_->LocalBatchSize(rank(), b));
  }
  // A batch that cannot fit in the memory this process may still take is
  // refused now, naming the sample size, the limit and the batch size that
  // fits, rather than a bad_alloc at the first batch or the kernel's OOM kill.
  BatchMemoryNeed need;
  need.sample = source_->Describe(0);
  need.row_kind = arrays_ ? "an array " + source_->sample_array()->ToString() +
                                (label_bytes_ > 0 ? " with its label array" : "")
                          : "a transformed image " + sample_shape_.ToString();
  need.row_bytes = sample_bytes_ + label_bytes_;
  need.read_bytes = arrays_ ? sample_bytes_ + label_bytes_ : 0;  // a file's own size is checked as it is read
  need.batch = largest_batch;
  need.world_size = world_size();
  need.per_rank = options_.batch_size_per_rank > 0;
  if (const std::string why = BatchMemoryError(need, memory_at_start_); !why.empty()) throw AllocationError(why);
  // One buffer per batch: its samples' rows, then (arrays) their label
  // arrays from a 64-byte aligned offset. Enough free buffers for the
  // batches the workers fill at once.
  const int64_t rows_bytes = sample_bytes_ * largest_batch;
  labels_offset_ = (rows_bytes + 63) / 64 * 64;
  pool_ = std::make_unique<BatchPool>(label_bytes_ > 0 ? labels_offset_ + label_bytes_ * largest_batch : rows_bytes,
                                      config_.storage_classes.at(0).threads + 4, options_.batch_allocator);
}

void Job::StartStorageClasses() {
  // One client slot per staging worker, and one for the consumer (it reads
  // the samples that replace skipped ones).
  cache_ = std::make_unique<CacheHierarchy>(config_, *plan_, rank(), *source_,
                                            options_.local_env != nullptr ? options_.local_env : Env::Default(),
                                            comm_.get(), config_.storage_classes.at(0).threads + 1, reader_,
                                            options_.interrupt, &startup_);
  cache_->Start();
  // What the classes really hold is what this job keeps of the process's budgets.
  const std::vector<ClassStatus> statuses = cache_->Status();
  for (size_t j = 1; j < config_.storage_classes.size(); ++j) {
    const StorageClassConfig& c = config_.storage_classes[j];
    if (PercentOf(c) > 0) {
      budget_->Hold(c.backend == "filesystem" ? "filesystem:" + c.path : c.name,
                    static_cast<double>(statuses.at(j - 1).planned_bytes) / (1024.0 * 1024.0));
    }
  }
}

void Job::StartStaging() {
  const StorageClassConfig& staging = config_.storage_classes.at(0);
  // MB in configs are MiB (docs/config.md).
  const auto capacity = static_cast<int64_t>(staging.capacity_mb * 1024 * 1024);
  staging_ = std::make_unique<StagingBuffer>(capacity, ItemOf(options_.epochs, 0));
  staging_->SkipTo(plan_->StartItem(rank()));  // a resumed job reads only what is left
  if (const double percent = PercentOf(staging); percent > 0) {
    budget_->JoinStaging(percent, staging.capacity_mb * 100 / percent,
                         [this](int64_t bytes) { staging_->SetCapacity(bytes); });
  }
  StartAssembly();
  workers_.reserve(static_cast<size_t>(staging.threads));
  for (int t = 0; t < staging.threads; ++t) {
    try {
      workers_.push_back(TryStartThread("hdmlp-stage-" + std::to_string(t), [this, t] { WorkerLoop(t); }));
    } catch (const ThreadStartFailed& failure) {
      // A constructor that throws runs no destructor: the workers started
      // so far, and the cache's threads, are stopped here.
      Close();
      ThrowThreadStartError(failure, "staging",
                            "the staging buffer's threads (" + std::to_string(staging.threads) +
                                " in the config's first storage class)");
    }
  }
}

void Job::StartAssembly() {
  BatchAssembly::Layout layout;
  layout.rank = rank();
  layout.epoch_size = epoch_size_;
  layout.batch_start.assign(static_cast<size_t>(plan_->BatchesPerEpoch() + 1), 0);
  for (int64_t b = 0; b < plan_->BatchesPerEpoch(); ++b) {
    const auto at = static_cast<size_t>(b);
    layout.batch_start[at + 1] = layout.batch_start[at] + plan_->LocalBatchSize(rank(), b);
  }
  layout.rows = rows();
  layout.row_bytes = sample_bytes_;
  layout.label_bytes = label_bytes_;
  layout.labels_offset = labels_offset_;
  layout.skip_bad_samples = options_.skip_bad_samples;
  layout.prototype.sample_shape = sample_shape_;
  if (arrays_) {
    layout.prototype.array = source_->sample_array();
    layout.prototype.label_array = source_->label_array();
  }
  BatchAssembly::Hooks hooks;
  hooks.batch_memory = [this](int epoch, int64_t batch) { return BatchMemory(epoch, batch); };
  hooks.read_into_row = [this](int epoch, int64_t sample, uint8_t* memory, int64_t row) {
    ReadIntoRow(epoch, sample, memory, row);
  };
  hooks.record_skip = [this](const std::string& why) { RecordSkip(why); };
  assembly_ = std::make_unique<BatchAssembly>(std::move(layout), staging_.get(), &source_->labels(), std::move(hooks));
}

void Job::ReportStartupFailure(const CapturedError& error, double timeout_s) {
  if (!Communicator::InMpiJob()) return;
  const std::unique_ptr<Communicator> comm = Communicator::Create(timeout_s);
  if (!comm) return;
  // The same collectives as a Job's constructor, up to its start-up check.
  comm->AllGather("error\n" + error.KindName() + "\n" + error.message(), "the start-up check of the job's arguments");
}

void Job::CheckRanksAgree(const CapturedError& local_error) {
  // Every rank sends either its error (type and message) or its view of the
  // job (and its seed and host); every rank then draws the same conclusion
  // from the same data, and raises the failing rank's error as its type.
  const std::vector<int> my_cpus = ReadCpuBudget().cpus;
  const std::string mine = !local_error ? "ok\n" + std::to_string(seed_) + "\n" + HostName() + " cpus=" +
                                              FormatCpuList(my_cpus) + "\n" + Signature(options_, *source_, config_)
                                        : "error\n" + local_error.KindName() + "\n" + local_error.message();
  const std::vector<std::string> all = comm_ ? comm_->AllGather(mine, "the start-up check of the job's arguments")
                                             : options_.gather(mine);
  if (static_cast<int>(all.size()) != world_size_) {
    throw InvalidArgumentError("the start-up check gathered " + std::to_string(all.size()) + " ranks' views, but " +
                               options_.launcher_name + " says the world size is " + std::to_string(world_size_));
  }
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].compare(0, 6, "error\n") == 0) {
      const size_t end = all[r].find('\n', 6);
      const std::string kind = all[r].substr(6, end == std::string::npos ? std::string::npos : end - 6);
      const std::string message = end == std::string::npos ? "" : all[r].substr(end + 1);
      CapturedError::FromKindName(kind, "rank " + std::to_string(r) + " could not start the job: " + message).Throw();
    }
  }
  // "ok", seed, "host cpus=<affinity>", then the signature.
  const auto line = [](const std::string& s, int n) {
    size_t begin = 0;
    for (int i = 0; i < n; ++i) begin = s.find('\n', begin) + 1;
    return s.substr(begin, s.find('\n', begin) - begin);
  };
  const auto body = [](const std::string& s) {
    size_t begin = 0;
    for (int i = 0; i < 3; ++i) begin = s.find('\n', begin) + 1;
    return s.substr(begin);
  };
  for (size_t r = 1; r < all.size(); ++r) {
    const std::string diff = FirstDifference(body(all[0]), body(all[r]), 0, static_cast<int>(r));
    if (!diff.empty()) throw InvalidArgumentError(diff);
  }
  seed_ = std::stoull(line(all[0], 1));  // rank 0's seed
  ranks_on_this_node_ = 0;
  ranks_sharing_cpus_ = 0;
  std::vector<std::string> hosts;
  for (const auto& s : all) {
    const std::string host = line(s, 2);
    const size_t cpus = host.find(" cpus=");
    hosts.push_back(host.substr(0, cpus));
    if (host.substr(0, cpus) != HostName()) continue;
    ++ranks_on_this_node_;
    if (cpus == std::string::npos || CpuListsIntersect(ParseCpuList(host.substr(cpus + 6)), my_cpus)) {
      ++ranks_sharing_cpus_;
    }
  }
  if (comm_) comm_->set_host_names(std::move(hosts));  // errors about a peer name its node
}

void Job::ShareCapacities() {
  budget_ = std::make_unique<BudgetMember>();
  for (size_t j = 0; j < config_.storage_classes.size(); ++j) {
    StorageClassConfig& c = config_.storage_classes[j];
    const double percent = PercentOf(c);
    if (percent <= 0) continue;
    // A percent is a share of this node: split it between its ranks.
    if (ranks_on_this_node_ > 1) c.capacity_mb /= ranks_on_this_node_;
    // The staging buffer joins once it exists (it is resized later).
    if (j == 0) continue;
    const std::string key = c.backend == "filesystem" ? "filesystem:" + c.path : c.name;
    c.capacity_mb = budget_->ClaimCache(key, percent, c.capacity_mb * 100 / percent);
  }
}

Job::~Job() {
  Close();
  if (mpi_user_ >= 0) Communicator::UnregisterUser(mpi_user_);
}

bool Job::InCreatingProcess() const { return ::getpid() == creator_pid_; }

void Job::CheckNotForked(const char* what) const {
  if (InCreatingProcess()) return;
  throw ForkedError(std::string("cannot ") + what + ": this hdmlp job was created in process " +
                    std::to_string(creator_pid_) + " and this is a forked child (process " +
                    std::to_string(::getpid()) +
                    ") where its loader threads do not exist; create the Job in the process that uses it (with "
                    "PyTorch: iterate HDMLPDataLoader in the main process, not a DataLoader with workers)");
}

void Job::Close() {
  if (!InCreatingProcess()) return;  // its threads are the parent's: nothing here to stop
  std::lock_guard<std::mutex> lock(close_mu_);
  if (closed_.exchange(true)) return;
  // First, so that the process's other jobs get their share back at once.
  if (budget_) budget_->Leave();
  if (staging_) staging_->Close();
  // Wakes workers waiting for a prefetch, a peer or the dataset's storage.
  if (cache_) cache_->Stop();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
  // Joins the prefetch threads, lingers while peers still read from this
  // rank, and removes on-disk classes; their memory lives until the
  // destructor.
  if (cache_) cache_->Close();
  if (reader_) reader_->Close();
}

// A sample larger than all the memory this process could still take when the
// job started can never be held: refused before it is read. Under a cgroup an
// allocation past the limit succeeds and the kernel ends the process as it is
// filled; under RLIMIT_AS the allocation fails (and is named the same way).
// Samples that fit only when little else is held are left to the allocation.
void Job::CheckSampleFits(int64_t sample) const {
  const int64_t size = source_->sizes()[static_cast<size_t>(sample)];
  if (memory_at_start_.available >= 0 && size > memory_at_start_.available) {
    throw AllocationError(SampleMemoryError(source_->Describe(sample), size, memory_at_start_));
  }
}

std::string Job::AllocationFailure(int64_t sample) const {
  const int64_t size = source_->sizes()[static_cast<size_t>(sample)];
  const MemoryLimit limit = ReadMemoryLimit();
  if (limit.available >= 0 && size > limit.available) return SampleMemoryError(source_->Describe(sample), size, limit);
  return "cannot hold sample " + source_->Describe(sample) + " (" + FormatBytes(size) + ", " + std::to_string(size) +
         " bytes) in memory: an allocation for it failed; this process may still take " + limit.Describe() +
         "; on_error=\"skip\" leaves such samples out, or " +
         (limit.raise.empty() ? std::string("give the job more memory") : limit.raise);
}

std::vector<std::string> Job::Warnings() const {
  std::vector<std::string> out = cache_->Warnings();
  for (const auto& damage : source_->damage()) {
    out.push_back("skipping the rest of a damaged shard (on_error=\"skip\"): " + damage);
  }
  return out;
}

OutputShape Job::FirstImageShape() {
  CapturedError first_error;
  for (int64_t i = 0; i < source_->size(); ++i) {
    try {
      const SampleBuffer bytes = reader_->Read(i);
      if (source_->format() == SampleFormat::kRawImage) {
        return RawImageShape(*pipeline_, bytes.data.get(), bytes.size, source_->Describe(i));
      }
      return pipeline_->ShapeOf(bytes.data.get(), bytes.size, source_->Describe(i));
    } catch (const InvalidArgumentError&) {
      if (!options_.skip_bad_samples) throw;
      if (!first_error) first_error = CapturedError::FromCurrentException();
    }
  }
  throw InvalidArgumentError("no image of '" + options_.dataset_path +
                             "' can be decoded, so the size of the transformed samples is unknown; first error: " +
                             first_error.message());
}

std::shared_ptr<uint8_t> Job::BatchMemory(int epoch, int64_t batch) {
  const int64_t key = static_cast<int64_t>(epoch) * plan_->BatchesPerEpoch() + batch;
  std::lock_guard<std::mutex> lock(assembly_mu_);
  if (key < assembly_floor_) return nullptr;
  auto& memory = assembling_[key];
  if (!memory) {
    try {
      memory = pool_->Acquire();
    } catch (const std::bad_alloc&) {
      assembling_.erase(key);
      const MemoryLimit limit = ReadMemoryLimit();
      throw AllocationError("cannot allocate the memory of batch " + std::to_string(batch) + " of epoch " +
                            std::to_string(epoch) + " (" + FormatBytes(pool_->buffer_bytes()) + ", " +
                            std::to_string(plan_->LocalBatchSize(rank(), batch)) + " samples of " +
                            FormatBytes(sample_bytes_ + label_bytes_) + "; " + std::to_string(assembling_.size()) +
                            " other batch(es) are being filled, and the training loop may still hold earlier "
                            "ones): this process may still take " + limit.Describe() +
                            "; use a smaller batch_size, or " +
                            (limit.raise.empty() ? std::string("give the job more memory") : limit.raise));
    }
  }
  return memory;
}

void Job::DropBatchesBelow(int epoch, int64_t batch) {
  const int64_t key = static_cast<int64_t>(epoch) * plan_->BatchesPerEpoch() + batch;
  std::vector<std::shared_ptr<uint8_t>> dropped;  // released outside the lock
  std::lock_guard<std::mutex> lock(assembly_mu_);
  assembly_floor_ = std::max(assembly_floor_, key);
  while (!assembling_.empty() && assembling_.begin()->first < key) {
    dropped.push_back(std::move(assembling_.begin()->second));
    assembling_.erase(assembling_.begin());
  }
}

bool Job::TransformIntoBatch(int epoch, int64_t j, int64_t sample, SampleView bytes) {
  const int64_t batch = assembly_->BatchOfPosition(j);
  // Holding the memory keeps it from being reused while this row is written,
  // even if the consumer hands the batch out meanwhile (then the row is
  // outside what it hands out: only moved samples are).
  std::shared_ptr<uint8_t> memory = BatchMemory(epoch, batch);
  if (!memory) return false;
  TransformInto(epoch, sample, bytes, memory.get(), j - assembly_->BatchBegin(batch));
  return true;
}

SampleBuffer Job::ReadSample(int epoch, int64_t sample, int slot) {
  const auto start = Clock::now();
  SampleBuffer bytes;
  const std::string& source = cache_->Fetch(sample, &bytes, slot);
  metrics_.AddRead(epoch, source, bytes.size, SecondsSince(start));
  return bytes;
}

SampleView Job::ReadSampleView(int epoch, int64_t sample, int slot, SampleBuffer* storage) {
  const auto start = Clock::now();
  SampleView bytes;
  const std::string& source = cache_->FetchView(sample, storage, &bytes, slot);
  metrics_.AddRead(epoch, source, bytes.size, SecondsSince(start));
  return bytes;
}

void Job::TransformInto(int epoch, int64_t sample, SampleView bytes, uint8_t* memory, int64_t row) {
  const auto start = Clock::now();
  const double cpu_start = ThreadCpuSeconds();
  uint8_t* dst = memory + row * sample_bytes_;
  if (arrays_) {
    if (bytes.size != sample_bytes_ + label_bytes_) {
      throw InvalidArgumentError(source_->Describe(sample) + " has " + std::to_string(bytes.size) + " bytes, not the " +
                                 std::to_string(sample_bytes_ + label_bytes_) + " of its array");
    }
    std::memcpy(dst, bytes.data, static_cast<size_t>(sample_bytes_));
    if (label_bytes_ > 0) {
      std::memcpy(memory + labels_offset_ + row * label_bytes_, bytes.data + sample_bytes_,
                  static_cast<size_t>(label_bytes_));
    }
  } else if (source_->format() == SampleFormat::kRawImage) {
    ApplyToRawImage(*pipeline_, bytes.data, bytes.size, source_->Describe(sample), seed_, epoch, sample,
                    sample_shape_, dst);
  } else {
    pipeline_->Apply(bytes.data, bytes.size, source_->Describe(sample), seed_, epoch, sample, sample_shape_, dst);
  }
  metrics_.AddTransform(epoch, SecondsSince(start), ThreadCpuSeconds() - cpu_start);
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
  // A transformed sample holds its file's bytes and then its row.
  const auto estimate = [&](int64_t item) {
    return source_->sizes()[static_cast<size_t>(sample_of(item))] + sample_bytes_ + label_bytes_;
  };
  int64_t item;
  for (auto wait_start = Clock::now(); staging_->Claim(estimate, &item); wait_start = Clock::now()) {
    const int epoch = static_cast<int>(item / epoch_size_);
    metrics_.AddHandoffWait(epoch, SecondsSince(wait_start));
    const int64_t sample = sample_of(item);
    try {
      CheckSampleFits(sample);
      if (rows() && assembly_->MovedAway(item)) {
        staging_->Complete(item, SampleBuffer(), 0);  // already delivered in another row
        continue;
      }
      if (rows()) {
        SampleBuffer storage;  // holds the bytes unless the RAM class lends them
        TransformIntoBatch(epoch, item % epoch_size_, sample, ReadSampleView(epoch, sample, slot, &storage));
        staging_->Complete(item, SampleBuffer(), sample_bytes_ + label_bytes_);
      } else {
        staging_->Complete(item, ReadSample(epoch, sample, slot));  // handed out: owned memory
      }
    } catch (const std::bad_alloc&) {
      // One sample too large for the memory left: a bad sample, named.
      staging_->Fail(item, CapturedError::FromKindName("allocation", AllocationFailure(sample)));
    } catch (const AllocationError&) {  // the check before the read, or the batch's memory: named already
      staging_->Fail(item, CapturedError::FromCurrentException());
    } catch (...) {
      CapturedError error = CapturedError::FromCurrentException();
      // A reader thread's bad_alloc arrives as a bare "std::bad_alloc": name the sample.
      if (error.message() == std::bad_alloc().what()) error = CapturedError::FromKindName("allocation", AllocationFailure(sample));
      staging_->Fail(item, error);
    }
  }
}

void Job::BeginEpoch(int epoch) {
  CheckNotForked("start an epoch");
  if (closed_) throw ClosedError("the job is closed");
  if (epoch < 0 || epoch >= options_.epochs) {
    throw InvalidArgumentError("epoch " + std::to_string(epoch) + " is outside the job's " +
                               std::to_string(options_.epochs) + " epochs (0.." + std::to_string(options_.epochs - 1) +
                               "): create the Job with more epochs");
  }
  if (epoch <= epoch_) {
    throw InvalidArgumentError("epoch " + std::to_string(epoch) + " has already been started; epochs run in order");
  }
  const ResumePoint& start = plan_->start();
  if (epoch < start.epoch) {
    throw InvalidArgumentError("epoch " + std::to_string(epoch) + " was delivered before this job resumed at epoch " +
                               std::to_string(start.epoch) + " (global batch " + std::to_string(plan_->StartBatch()) +
                               "); epochs run in order");
  }
  if (epoch_ >= 0 && assembly_->partial()) metrics_.AddDelivered(epoch_, 0, assembly_->stall());
  epoch_ = epoch;
  metrics_.BeginConsumerEpoch(epoch);
  // The epoch the job resumed in goes on at its next global batch.
  const int64_t batch = epoch == start.epoch ? plan_->StartBatch() : 0;
  if (rows()) DropBatchesBelow(epoch, batch);
  assembly_->BeginEpoch(epoch, plan_->Epoch(rank(), epoch), batch);
  SetPosition(epoch, batch);
}

JobState Job::Settings() const {
  JobState s;
  s.seed = seed_;
  s.batch_size = options_.batch_size;
  s.distr_scheme = options_.distr_scheme;
  s.exchange_fraction = options_.exchange_fraction;
  s.shuffle = options_.shuffle;
  s.drop_last = options_.drop_last;
  s.samples = source_->size();
  s.fingerprint = fingerprint_;
  s.world_size = world_size_;
  s.order_world_size = world_size_;
  s.epochs = options_.epochs;
  return s;
}

void Job::SetPosition(int epoch, int64_t batches) {
  if (batches >= plan_->BatchesPerEpoch()) {  // the epoch is done: the next one starts at 0
    ++epoch;
    batches = 0;
  }
  std::lock_guard<std::mutex> lock(position_mu_);
  position_epoch_ = epoch;
  position_batches_ = batches;
}

JobState Job::State() const {
  int epoch = 0;
  int64_t batches = 0;
  {
    std::lock_guard<std::mutex> lock(position_mu_);
    epoch = position_epoch_;
    batches = position_batches_;
  }
  return StateAt(epoch, batches);
}

JobState Job::StateAt(int epoch, int64_t batches) const {
  if (epoch < 0 || epoch > options_.epochs || batches < 0 || batches > plan_->BatchesPerEpoch()) {
    throw InvalidArgumentError("state_at: position (epoch " + std::to_string(epoch) + ", batch " +
                               std::to_string(batches) + ") is outside the job (epochs 0.." +
                               std::to_string(options_.epochs) + ", batches 0.." +
                               std::to_string(plan_->BatchesPerEpoch()) + ")");
  }
  if (batches == plan_->BatchesPerEpoch()) {  // the epoch is done: the next one starts at 0
    ++epoch;
    batches = 0;
  }
  JobState s = Settings();
  s.epoch = epoch;
  s.batches = batches;
  s.position = s.batches * s.batch_size;
  // Inside the epoch the job resumed in, the order is the one it began with.
  const ResumePoint& start = plan_->start();
  if (s.batches > 0 && s.epoch == start.epoch && start.order_world_size > 0) {
    s.order_world_size = start.order_world_size;
  }
  return s;
}

void Job::RecordSkip(const std::string& message) {
  skipped_.fetch_add(1);
  metrics_.AddSkipped(epoch_);
  std::lock_guard<std::mutex> lock(skipped_mu_);
  // Logged once per file: a bad file is bad in every epoch.
  if (std::find(skipped_files_.begin(), skipped_files_.end(), message) != skipped_files_.end()) return;
  skipped_files_.push_back(message);
  std::fprintf(stderr, "hdmlp: skipping a bad sample (on_error=\"skip\"): %s\n", message.c_str());
}

std::vector<std::string> Job::SkippedFiles() const {
  std::lock_guard<std::mutex> lock(skipped_mu_);
  return skipped_files_;
}

void Job::ReadIntoRow(int epoch, int64_t sample, uint8_t* memory, int64_t row) {
  try {
    CheckSampleFits(sample);
    const SampleBuffer bytes = ReadSample(epoch, sample, /*slot=*/static_cast<int>(workers_.size()));
    TransformInto(epoch, sample, SampleView(bytes), memory, row);
  } catch (const AllocationError&) {
    throw AllocationError(AllocationFailure(sample));
  } catch (const std::bad_alloc&) {
    throw AllocationError(AllocationFailure(sample));
  }
}

SampleBuffer Job::ReadOnConsumer(int64_t sample) {
  CheckNotForked("read a sample");
  if (closed_) throw ClosedError("the job is closed");
  if (epoch_ < 0) throw InvalidArgumentError("no epoch has been started: call BeginEpoch first");
  if (sample < 0 || sample >= source_->size()) {
    throw InvalidArgumentError("sample " + std::to_string(sample) + " is not in the dataset (0.." +
                               std::to_string(source_->size() - 1) + ")");
  }
  CheckSampleFits(sample);
  return ReadSample(epoch_, sample, /*slot=*/static_cast<int>(workers_.size()));
}

void Job::ThrowAndTellPeers(const CapturedError& error) {
  cache_->AbortPeers("rank " + std::to_string(rank()) + " stopped: " + error.message());
  error.Throw();
}

Job::Next Job::NextBatch(Batch* out, std::chrono::milliseconds max_wait) {
  CheckNotForked("read a batch");
  if (closed_) throw ClosedError("the job is closed");
  if (epoch_ < 0) throw InvalidArgumentError("no epoch has been started: call BeginEpoch first");
  BatchAssembly::Progress progress;
  // This call's time apart from waiting for samples: batch assembly (on every exit).
  struct AssemblyTimer {
    JobMetrics& metrics;
    int epoch;
    const double& waited;
    Clock::time_point start = Clock::now();
    ~AssemblyTimer() { metrics.AddAssembly(epoch, SecondsSince(start) - waited); }
  } assembly{metrics_, epoch_, progress.waited};
  const std::string peer_error = cache_->PeerAbortMessage();
  if (!peer_error.empty()) {
    // Passed on as it is, so that a rank that needs nothing from a lost peer stops too rather than
    // finishing and waiting for it at exit.
    cache_->AbortPeers(peer_error);
    throw IOError(peer_error + " (reported to rank " + std::to_string(rank()) + ")");
  }
  const BatchAssembly::Step step = assembly_->Next(out, Clock::now() + max_wait, &progress);
  if (step == BatchAssembly::Step::kEndOfEpoch) return Next::kEndOfEpoch;
  if (step == BatchAssembly::Step::kTimeout) return Next::kTimeout;
  const bool delivered = step == BatchAssembly::Step::kBatch;
  metrics_.AddDelivered(epoch_, delivered ? static_cast<int64_t>(out->ids.size()) : 0, progress.batch_stall);
  SetPosition(epoch_, assembly_->next_batch());
  if (rows()) DropBatchesBelow(epoch_, assembly_->next_batch());  // the memory now belongs to *out alone
  if (!delivered) ThrowAndTellPeers(progress.error);
  return Next::kBatch;
}

}  // namespace hdmlp
