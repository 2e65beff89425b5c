// Job: one training job's data loading on this rank, from start to close.
//
// A Job opens the dataset (a Source: an image folder, a pack, tar shards or
// HDF5; source/source.h), builds the access plan (plan), loads the
// configuration, plans and starts the storage classes (cache), and starts
// the staging workers, which fetch this rank's samples in plan order, each
// from its best source, into the staging buffer ahead of the consumer. The
// consumer walks the epochs in order: BeginEpoch(e), then NextBatch() until
// it reports the end of the epoch. Beginning a later epoch skips whatever
// is left of the current one (an early `break`), without reading it.
//
// Several ranks (under mpirun): the ranks check at start-up that they agree
// on the dataset (size and fingerprint), batch size, epochs, scheme,
// drop-last, shuffle and configuration shape, and take rank 0's seed; a rank
// that fails to start or disagrees makes every rank raise the same error.
// Ranks on one node (same host name) split the configuration's percent
// capacities ("25%" of the node's memory is 12.5% per rank with two ranks
// there), and the live Jobs of one process split them again
// (job/process_budget.h). The ranks whose affinity masks overlap split the
// staging buffer's threads = "auto" (config/cpu_budget.h): two unbound ranks
// on 8 cores run 4 workers each, two ranks bound to 4 cores each run 4 each.
//
// Without MPI, a launcher such as torchrun gives the rank and world size
// (JobOptions::launcher_*): the job plans the same global order and reads
// this rank's slice; peers do not serve each other (transport() is "none"),
// and the start-up check and rank 0's seed go through `gather` when the
// caller has one (torch.distributed). Under MPI, a launcher whose rank or
// world size differs from MPI's is an error on every rank.
//
// Transforms: with a transform chain (transforms/transform_pipeline.h) the
// staging workers decode and transform every sample straight into its row
// of its batch's memory (a BatchPool buffer, one per batch), and the batch
// is handed out as that memory: no copy. Without one, each sample is its
// file's bytes, or, for an array source (HDF5), its array, copied into its
// row of the batch's memory the same way (label arrays after the rows). A chain whose output size depends on the image takes the
// size of the dataset's first readable image (in index order, so every
// rank agrees); an image of another size is a bad sample.
//
// Errors: the constructor validates everything (dataset, arguments, config,
// transform chain) before any thread starts. A sample that cannot be read
// or transformed is reported by NextBatch when the consumer reaches it, as
// the exception the read or decode threw (naming the file); the rest of that
// batch is skipped, every other rank is told (their next NextBatch raises an
// IOError naming this rank and the file), and the job may go on.
// With skip_bad_samples, a sample the pipeline rejects (a corrupt, truncated,
// empty, unsupported or oversized image, or one of another size) is left
// out instead and counted. Every rank still takes BatchesPerEpoch() steps,
// none empty: holes are filled from the end of the rank's epoch, and a
// batch left with no good sample repeats one (padded_samples()), by the
// rules of job/batch_assembly.h; only a rank's epoch with no good sample
// raises InvalidArgumentError naming the rank, epoch and files (the other
// ranks are told). Every other sample is still delivered exactly
// once. Storage errors (missing file, failing reads) are raised in both
// modes.
//
// Resuming (job/job_state.h): State() is the job's global position (the
// epoch, the global batches of it delivered) with what the order depends on.
// A job created with JobOptions::resume = a state (or start_epoch = k, the
// start of epoch k) begins there: its plan starts at that point
// (plan/resume_point.h), so the staging workers, the stream of items and
// the caches' placement cover only what is left, and BeginEpoch of that
// epoch starts at its next global batch. Every rank must resume from the
// same state (part of the start-up check).
//
// Waits: every read of the dataset's storage has a deadline (read_timeout_s,
// default timeout_s): past it the consumer gets an IOError naming the file.
// Long start-up phases (the scan, the placement count) poll
// options.interrupt. Start-up does not grow with epochs beyond what the
// placement counts (placement.h). StartupPhases() says where the
// constructor's time went, phase by phase (wall, this thread's CPU and the
// process's CPU; util/phase_timer.h).
//
// Lifetime: Close() (also run by the destructor) stops and joins every
// thread; a read stuck in the dataset's storage is left behind on a thread
// that owns only shared state (source/source_reader.h). Under MPI it then
// lingers while peers still read from this rank (a few seconds at most),
// and it runs before MPI is finalised at exit (Communicator::RegisterUser).
// It is safe to call more than once, from several threads.
// Fork: a Job belongs to the process that made it. In a forked child (where
// its threads do not exist) BeginEpoch/NextBatch throw ForkedError and
// Close() does nothing; the child must not destroy it (the Python binding
// leaks it there).
// Thread-safety: one consumer thread calls BeginEpoch/NextBatch; Metrics(),
// State() and Close() may be called from any thread.
#ifndef HDMLP_JOB_JOB_H_
#define HDMLP_JOB_JOB_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hdmlp/cache/cache_hierarchy.h"
#include "hdmlp/config/config.h"
#include "hdmlp/env/env.h"
#include "hdmlp/env/memory_limit.h"
#include "hdmlp/job/batch_assembly.h"
#include "hdmlp/job/job_state.h"
#include "hdmlp/job/metrics.h"
#include "hdmlp/job/process_budget.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/source/source.h"
#include "hdmlp/source/source_reader.h"
#include "hdmlp/staging/batch_pool.h"
#include "hdmlp/staging/staging_buffer.h"
#include "hdmlp/transforms/transform_pipeline.h"
#include "hdmlp/transport/communicator.h"
#include "hdmlp/util/interrupt.h"
#include "hdmlp/util/phase_timer.h"

namespace hdmlp {

struct JobOptions {
  std::string dataset_path;
  int64_t batch_size = 1;           // global, over all ranks; 0 when batch_size_per_rank is given
  int64_t batch_size_per_rank = 0;  // > 0: the global batch is this times the world size
  int epochs = 1;
  std::string distr_scheme = "uniform";
  bool drop_last = false;
  bool shuffle = true;      // false: every epoch in index order (validation)
  bool has_seed = false;
  uint64_t seed = 0;
  std::string config_path;  // required: the Python package passes its default
  double exchange_fraction = 0.1;  // partial_local only
  double timeout_s = 300;   // how long to wait for other ranks before failing
  double read_timeout_s = 0;  // how long one read of the dataset may take; 0: timeout_s
  bool use_mpi = true;      // join the MPI job when there is one
  int staging_threads = 0;  // > 0: the staging workers, instead of the config's class 0 threads
  // With threads = "auto" and transforms: the staging workers leave this many of the
  // rank's CPUs to the training process (at least one worker remains). A job that
  // hands its batches to a GPU sets 1: the training thread launches the kernels.
  int spare_cores = 0;
  // A launcher without MPI (torchrun's RANK and WORLD_SIZE, or an initialised
  // torch.distributed): this process's rank of launcher_world_size (0: no
  // launcher), its ranks on this node (0: unknown), and where they came from.
  int launcher_rank = 0;
  int launcher_world_size = 0;
  int launcher_local_world_size = 0;
  std::string launcher_name = "the launcher";
  // Without MPI: every rank's string from each rank's own (the start-up
  // check and rank 0's seed); empty: the ranks cannot talk at start-up.
  std::function<std::vector<std::string>(const std::string&)> gather;
  Env* env = nullptr;       // storage of the dataset; nullptr: Env::Default()
  // Or the same, owned: reads left behind by Close() keep it alive. Set
  // this when the Env may be destroyed while the process goes on.
  std::shared_ptr<Env> shared_env;
  InterruptCheck interrupt;  // polled by long start-up phases (util/interrupt.h)
  Env* local_env = nullptr; // storage of the filesystem classes; nullptr: Env::Default()
  ScanOptions scan;
  SourceOptions source;     // which dataset format, and its options (source.h)
  std::vector<TransformSpec> transforms;  // empty: deliver each file's bytes
  bool skip_bad_samples = false;          // else a bad sample raises
  HostAllocator batch_allocator = HostAllocator::Default();  // memory of transformed batches
  // Resume from this state (job/job_state.h), or start at the beginning of
  // epoch start_epoch; at most one of the two.
  std::optional<JobState> resume;
  int start_epoch = 0;
};

class Job {
 public:
  enum class Next { kBatch, kEndOfEpoch, kTimeout };

  explicit Job(const JobOptions& options);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job();

  const Source& source() const { return *source_; }
  const AccessPlan& plan() const { return *plan_; }
  const Config& config() const { return config_; }
  uint64_t seed() const { return seed_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // "mpi" when peers serve each other's caches, else "none".
  const char* transport() const { return comm_ && comm_->size() > 1 ? "mpi" : "none"; }
  int64_t BatchesPerEpoch() const { return plan_->BatchesPerEpoch(); }
  int64_t staging_capacity_bytes() const { return staging_->capacity_bytes(); }
  int64_t staging_peak_bytes() const { return staging_->peak_bytes_in_flight(); }
  bool has_transforms() const { return pipeline_ != nullptr; }
  // Samples are arrays (an HDF5 source): batches are [B, ...] arrays.
  bool has_arrays() const { return arrays_; }
  // The shape of every transformed sample (default-constructed without transforms).
  const OutputShape& sample_shape() const { return sample_shape_; }
  // Samples left out by skip_bad_samples, over the job, and their files (each once).
  int64_t skipped_samples() const { return skipped_.load(); }
  // Samples delivered a second time in an epoch to fill a batch that had no
  // good sample left (skip_bad_samples; job/batch_assembly.h).
  int64_t padded_samples() const { return assembly_ ? assembly_->padded() : 0; }
  std::vector<std::string> SkippedFiles() const;
  // Batch buffers allocated so far (reused ones are not counted again).
  int64_t batch_allocations() const { return pool_ ? pool_->allocations() : 0; }

  // Starts epoch `epoch` (0-based), which must be later than the current one
  // and not before the epoch the job resumed at (where it starts at the
  // resume point's global batch).
  void BeginEpoch(int epoch);
  // The job's position now, with what the order depends on (no I/O): the
  // epoch being delivered (or next) and its global batches delivered; after
  // an epoch's last batch, the next epoch and 0.
  JobState State() const;
  // The state of another position: `batches` global batches of `epoch`
  // delivered (normalised as State() is). For a consumer that delivers
  // behind NextBatch, e.g. the Python transforms' stage, which reads ahead.
  JobState StateAt(int epoch, int64_t batches) const;
  // Fills *out with the next batch of the current epoch, or reports the end of
  // the epoch; waits at most max_wait (kTimeout: call again to go on).
  Next NextBatch(Batch* out, std::chrono::milliseconds max_wait);
  // For a stage after the job on the consumer's thread (hdmlp's Python
  // transforms, which apply skip_bad_samples' rule themselves): the bytes of
  // `sample` read now from its best source, counted in the current epoch
  // (it fills a bad sample's place from the epoch's end); and telling every
  // other rank that this one stopped on `message`, as NextBatch does for its
  // own errors (their next NextBatch raises it).
  SampleBuffer ReadOnConsumer(int64_t sample);
  void TellPeersStopped(const std::string& message) { cache_->AbortPeers(message); }

  // Under MPI, a rank that cannot even build its JobOptions (the caller
  // refused an argument) still takes part in the other ranks' start-up
  // check, so that they raise `error` (its type and message) at once
  // instead of waiting timeout_s for it. Nothing happens outside MPI.
  static void ReportStartupFailure(const CapturedError& error, double timeout_s);
  // The process that made the job.
  bool InCreatingProcess() const;

  std::vector<EpochMetrics> Metrics() const { return metrics_.Snapshot(); }
  // The constructor's phases in order: "communicator" (MPI_Init_thread when
  // hdmlp initialises MPI, and the duplicated communicator), "config" (the
  // config file and the transform chain), "scan" (the dataset's index:
  // scanned, or loaded from the index cache), "startup_check" (every rank's
  // view gathered and compared: includes the wait for the last rank to
  // arrive), "access_plan", "batch_memory" (the output shape, reading the
  // first image when the chain's size depends on it, and the batch pool),
  // the cache hierarchy's "cache_classes", "placement_plan",
  // "cache_slots", "placement_exchange" and "peer_transport"
  // (cache/cache_hierarchy.h), "cache_start" (its threads) and "staging"
  // (the staging buffer and workers). Written only by the constructor.
  const PhaseTimer& StartupPhases() const { return startup_; }
  std::vector<ClassStatus> ClassStatuses() const { return cache_->Status(); }
  // The caches' warnings, then the damaged containers on_error="skip" read around.
  std::vector<std::string> Warnings() const;
  // Samples read from the dataset's storage in another form than indexed.
  int64_t changed_samples() const { return cache_->changed_samples(); }
  std::vector<std::string> ChangedFiles() const { return cache_->ChangedFiles(); }
  const CacheHierarchy& cache() const { return *cache_; }
  void Close();

 private:
  // The constructor's steps, in order (each a phase of StartupPhases()).
  // The launcher's view, the batch size, the config and the transform chain.
  void LoadConfigAndChain();
  // The source (scanned or from the index cache), its reader, and a resume
  // state checked against it.
  void OpenDataset();
  // Every rank's view of the job must agree; throws the same error on every rank.
  void CheckRanksAgree(const CapturedError& local_error);
  // threads = "auto": the staging workers' share of this rank's CPUs.
  void SizeStagingThreads();
  // The access plan, this rank's batches in it, and the classes' capacities.
  void PlanAccess();
  // Sizes the storage classes for this rank and this process's live jobs.
  void ShareCapacities();
  // The output shape and the batch pool (rows only), refused when a batch cannot fit.
  void PlanBatchMemory();
  // The cache hierarchy: its classes, placement, exchange and threads.
  void StartStorageClasses();
  // The staging buffer, the batch assembly after it, and its workers.
  void StartStaging();
  void StartAssembly();

  void WorkerLoop(int slot);
  // Transforms `bytes` of `sample` into its row; false when the batch was
  // already handed out or dropped (nothing written).
  bool TransformIntoBatch(int epoch, int64_t j, int64_t sample, SampleView bytes);
  // A sample's bytes from its best source, with the read counted in `epoch`.
  SampleBuffer ReadSample(int epoch, int64_t sample, int slot);
  // A sample larger than the memory this process may still take is an
  // AllocationError naming it (job/memory_check.h), before it is read.
  void CheckSampleFits(int64_t sample) const;
  // The message for a sample whose allocation failed (or would fail).
  std::string AllocationFailure(int64_t sample) const;
  // The same, for bytes that are transformed at once: a sample in the RAM
  // class is decoded where it lies there (no copy); any other is read into
  // *storage, which the view then points into.
  SampleView ReadSampleView(int epoch, int64_t sample, int slot, SampleBuffer* storage);
  // Decodes and transforms `bytes` (or copies an array and its label array)
  // into row `row` of batch memory `memory`, with the time counted in `epoch`.
  void TransformInto(int epoch, int64_t sample, SampleView bytes, uint8_t* memory, int64_t row);
  // Samples land in rows of batch memory: with transforms, or arrays.
  bool rows() const { return pipeline_ != nullptr || arrays_; }
  // The memory of local batch `batch` of `epoch`, made on first use; null
  // when that batch is below the assembly floor (handed out or skipped).
  std::shared_ptr<uint8_t> BatchMemory(int epoch, int64_t batch);
  void DropBatchesBelow(int epoch, int64_t batch);
  // The output shape for a chain that is not fixed: the first readable image's.
  OutputShape FirstImageShape();
  // skip_bad_samples: reads and transforms `sample` on the consumer's thread
  // into row `row` of `memory` (BatchAssembly::Hooks::read_into_row); a
  // sample too large for memory is an AllocationError naming it.
  void ReadIntoRow(int epoch, int64_t sample, uint8_t* memory, int64_t row);
  void RecordSkip(const std::string& message);
  [[noreturn]] void ThrowAndTellPeers(const CapturedError& error);
  void CheckNotForked(const char* what) const;
  int64_t ItemOf(int epoch, int64_t j) const { return static_cast<int64_t>(epoch) * epoch_size_ + j; }
  // The settings a state must match, and records the consumer's position.
  JobState Settings() const;
  void SetPosition(int epoch, int64_t batches);

  PhaseTimer startup_;  // first: its clock starts before anything else is built
  JobOptions options_;
  const pid_t creator_pid_;
  std::unique_ptr<Communicator> comm_;
  int rank_ = 0;
  int world_size_ = 1;
  std::shared_ptr<Env> shared_env_;
  Env* env_;

  Config config_;
  // Shared with reads left behind at close (source/source_reader.h).
  std::shared_ptr<Source> source_;
  std::shared_ptr<SourceReader> reader_;
  uint64_t fingerprint_ = 0;  // source_->Fingerprint(), computed once
  uint64_t seed_ = 0;
  std::unique_ptr<AccessPlan> plan_;
  int64_t epoch_size_ = 0;  // this rank's samples per epoch
  int ranks_on_this_node_ = 1;
  int ranks_sharing_cpus_ = 1;  // ranks on this node whose affinity overlaps this one's
  JobMetrics metrics_;
  std::unique_ptr<CacheHierarchy> cache_;
  std::unique_ptr<StagingBuffer> staging_;
  std::vector<std::thread> workers_;
  std::atomic<bool> closed_{false};
  // This job's share of the process's percent capacities; declared after
  // staging_ so that it leaves (and stops resizing it) before that goes.
  std::unique_ptr<BudgetMember> budget_;
  std::mutex close_mu_;   // a second Close waits for the first
  int mpi_user_ = -1;     // Communicator::RegisterUser token

  // Transforms.
  std::unique_ptr<TransformPipeline> pipeline_;
  OutputShape sample_shape_;
  int64_t sample_bytes_ = 0;
  bool arrays_ = false;
  int64_t label_bytes_ = 0;    // arrays: each sample's label array
  int64_t labels_offset_ = 0;  // arrays: where the label arrays start in a batch's memory
  std::unique_ptr<BatchPool> pool_;
  // The memory this process could still take when the batch memory was planned (CheckSampleFits).
  MemoryLimit memory_at_start_;
  std::mutex assembly_mu_;
  std::map<int64_t, std::shared_ptr<uint8_t>> assembling_;  // by batch key, guarded by assembly_mu_
  int64_t assembly_floor_ = 0;                              // guarded by assembly_mu_
  std::unique_ptr<BatchAssembly> assembly_;  // the consumer's; workers ask it only MovedAway() and the layout
  std::atomic<int64_t> skipped_{0};
  mutable std::mutex skipped_mu_;
  std::vector<std::string> skipped_files_;

  int epoch_ = -1;  // the consumer's epoch
  // The position State() reports: written by the consumer, read by anyone.
  mutable std::mutex position_mu_;
  int position_epoch_ = 0;      // guarded by position_mu_
  int64_t position_batches_ = 0;  // guarded by position_mu_
};

}  // namespace hdmlp

#endif  // HDMLP_JOB_JOB_H_
