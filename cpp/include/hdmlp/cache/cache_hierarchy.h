// CacheHierarchy: a rank's storage classes 1..J, filled ahead of need.
//
// At start-up the hierarchy plans the placement (placement.h: the most-read
// samples into the fastest classes, each class in order of first read),
// makes the classes, and starts each class's prefetch threads, which read
// their class's samples from the PFS in that order at once: the first epoch
// already profits, with no separate placement epoch.
//
// Fetch() is what the staging workers call for every sample: it reads the
// sample from the class holding it when the class has it and the source
// model prefers it, else from a peer rank's class (when the model predicts
// that faster than the PFS), else from the PFS. Workers that transform the
// sample at once call FetchView() instead: a sample in a memory class is then
// decoded where it lies, without a copy.
//
// Several ranks ("make it once"): every cached sample gets one designated
// rank: the rank that reads it in the first epoch when that rank caches it
// (placement puts those samples first, so when the ranks' storage together
// holds the dataset, it always does), else the lowest rank that caches it.
// Each rank learns the designated rank of the samples it reads through a
// PeerDirectory (peer_directory.h), never every rank's placement. Only the designated rank reads
// the sample from the PFS; every other rank asks it, and a designated rank
// asked for a sample it has not filled yet fills it then. So when the
// dataset fits in the ranks' aggregate storage, the job reads each sample
// from the PFS once. Serving threads never ask other ranks, so requests
// cannot wait on each other in a cycle. Every cached sample has a state
// (empty, filling, ready, failed) changed only by compare-and-swap, so a
// sample is read from the PFS once: a worker that needs a sample before its
// class holds it reads it and stores it on the way; one that finds the
// sample being filled waits for that read instead of starting another.
// Coalescing: a prefetch thread that claims a sample also claims the samples
// stored right after it in the same shard (a pack's or a tar shard's; the
// source's ExtentOf) that its class holds and that are still empty, up to
// the config's coalesce_kb, and reads them with one read (Source::ReadRun):
// over a store where every request costs round trips, a class filling from
// a pack reads it in large sequential pieces.
// A class that cannot store (full disk, vanished folder) leaves the sample
// on the PFS, with a warning; bytes are never served from a class unless
// they are what was stored (a filesystem class checks a checksum).
//
// Reads of the dataset's storage go through a SourceReader
// (source/source_reader.h): a read that does not finish within the read
// timeout is an IOError naming the sample, and a closing job does not wait
// for it. The job delivers the dataset as it was when it was indexed: a
// sample read from the dataset's storage whose size or modification time
// is no longer the index's is counted (changed_samples) and named;
// cached copies keep the bytes of their first read.
//
// Thread-safety: Fetch may be called from any number of threads. Stop()
// wakes any waiting Fetch (which then throws ClosedError) and every read
// waiting for the dataset's storage; Close() also joins the prefetch
// threads, lingers while peers still read from this rank (until every peer
// has said bye, or a few seconds), and removes on-disk classes. Both are
// idempotent; the destructor calls Close().
#ifndef HDMLP_CACHE_CACHE_HIERARCHY_H_
#define HDMLP_CACHE_CACHE_HIERARCHY_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hdmlp/cache/peer_directory.h"
#include "hdmlp/cache/source_model.h"
#include "hdmlp/cache/storage_class.h"
#include "hdmlp/config/config.h"
#include "hdmlp/env/env.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/plan/placement.h"
#include "hdmlp/source/source.h"
#include "hdmlp/source/source_reader.h"
#include "hdmlp/transport/communicator.h"
#include "hdmlp/transport/peer_transport.h"
#include "hdmlp/util/interrupt.h"
#include "hdmlp/util/phase_timer.h"
#include "hdmlp/util/sample_buffer.h"

namespace hdmlp {

struct ClassStatus {
  std::string name;
  std::string backend;
  int64_t capacity_bytes = 0;
  int64_t planned_samples = 0;
  int64_t planned_bytes = 0;
  int64_t filled_samples = 0;  // stored, by the prefetch threads or on the way
  int64_t filled_bytes = 0;
  int64_t prefetched_samples = 0;  // read from the PFS by this class's prefetch threads
  int64_t prefetched_bytes = 0;
  double prefetch_seconds = 0;     // prefetch threads' time reading the PFS
  double predicted_mbps = 0;       // per reader, from the source model
  std::string note;                // why the class holds nothing, when the model decided so
  std::string warning;             // a problem: unwritable folder, full disk
  int64_t dropped_corrupt = 0;     // stored files found changed (checksum) and dropped
};

class CacheHierarchy {
 public:
  // The source, plan, env and communicator must outlive the hierarchy.
  // `source` reads the dataset (the "PFS"); local_env holds the filesystem
  // classes; comm is null for a single rank. Client slots [0, worker_slots) belong to the
  // caller's staging workers; the prefetch threads take the ones after.
  // reader reads the dataset's storage (null: one on `source` with a 300 s
  // timeout); interrupt is polled during the placement's long phases.
  // startup (optional) gets a lap per construction phase: "cache_classes"
  // (the classes' storage set up), "placement_plan" (PlanPlacement),
  // "cache_slots" (the slots, and the memory classes' arenas),
  // "placement_exchange" (the peer directory's all-to-alls) and
  // "peer_transport" (the transport built); the last two take no time alone.
  CacheHierarchy(const Config& config, const AccessPlan& plan, int rank, Source& source, Env* local_env,
                 Communicator* comm = nullptr, int worker_slots = 0, std::shared_ptr<SourceReader> reader = nullptr,
                 const InterruptCheck& interrupt = {}, PhaseTimer* startup = nullptr);
  CacheHierarchy(const CacheHierarchy&) = delete;
  CacheHierarchy& operator=(const CacheHierarchy&) = delete;
  ~CacheHierarchy();

  // Starts the prefetch threads.
  void Start();

  // Reads `sample` from the best source into *out and returns that source's
  // name ("pfs", "remote" or a class name). `slot` is the caller's client
  // slot. Throws what the PFS read throws, or IOError for a peer that does
  // not answer.
  const std::string& Fetch(int64_t sample, SampleBuffer* out, int slot = 0);
  // As Fetch, for a caller that only reads the bytes before it lets go of
  // the hierarchy: points *view at them. A sample held by a memory class is
  // lent in place, without a copy (valid while the hierarchy lives, the
  // class's contract); any other is read into *out and *view points there.
  const std::string& FetchView(int64_t sample, SampleBuffer* out, SampleView* view, int slot = 0);

  void Stop();
  void Close();

  std::vector<ClassStatus> Status() const;
  std::vector<std::string> Warnings() const;
  // Every read of the dataset's storage this rank made (staging, prefetch,
  // serving peers), and every sample it received from a peer.
  int64_t pfs_reads() const { return pfs_reads_.load(); }
  int64_t pfs_bytes() const { return pfs_bytes_.load(); }
  int64_t remote_reads() const { return remote_reads_.load(); }
  int64_t requests_served() const { return transport_ ? transport_->requests_served() : 0; }
  // Samples read from the dataset's storage with another size or
  // modification time than the index's (each counted once), and their names.
  int64_t changed_samples() const;
  std::vector<std::string> ChangedFiles() const;
  // The placement exchange at construction (several ranks; zeros alone): the
  // message bytes this rank sent to and received from other ranks over its
  // all-to-all rounds, its messages to itself apart (they stay in memory), the
  // rounds, and its wall time. The planning benchmark's model
  // (benchmarks/peer_directory.cc) counts sent + self per rank: 8 bytes per
  // cached sample and per distinct sample read, 4 per query answered. Read
  // once the hierarchy is built.
  struct ExchangeStats {
    int64_t sent_bytes = 0;
    int64_t received_bytes = 0;
    int64_t self_bytes = 0;
    int rounds = 0;
    double seconds = 0;
  };
  const ExchangeStats& exchange_stats() const { return exchange_stats_; }
  // Tells the other ranks that this one stops on `message` (no-op alone).
  void AbortPeers(const std::string& message) {
    if (transport_) transport_->Abort(message);
  }
  // The first stop message another rank sent; "" while none has.
  std::string PeerAbortMessage() const { return transport_ ? transport_->PeerAbortMessage() : ""; }
  // The class that will hold `sample`, or -1.
  int ClassOf(int64_t sample) const;

 private:
  enum State : uint8_t { kEmpty, kFilling, kReady, kFailed };
  struct Level {
    std::unique_ptr<StorageClass> storage;
    std::vector<int64_t> samples;  // in order of first read
    int64_t first_slot = 0;        // global slot of samples[0]
    int threads = 1;               // prefetch threads
    std::atomic<int64_t> next_prefetch{0};
    std::atomic<int64_t> filled_samples{0};
    std::atomic<int64_t> filled_bytes{0};
    std::atomic<int64_t> prefetched_samples{0};
    std::atomic<int64_t> prefetched_bytes{0};
    std::atomic<int64_t> prefetch_micros{0};
    ClassStatus status;
  };

  int64_t SlotOf(int64_t sample, int* level) const;
  // Reads the sample (from a peer when allowed and predicted faster, else
  // the PFS) and stores it in its class; the caller owns the slot (state
  // kFilling). Returns the source's name.
  // `stop` is the caller's cancel flag for reads of the dataset's storage.
  // Fetch, and FetchView when `view` is not null (it is left empty when the
  // bytes were read into *out).
  const std::string& FetchInto(int64_t sample, SampleBuffer* out, SampleView* view, int client);
  const std::string& FillSlot(int level, int64_t slot, int64_t sample, SampleBuffer* out, int client, bool may_ask_peers,
                              const std::atomic<bool>* stop);
  const std::string& ReadUncached(int64_t sample, SampleBuffer* out, int client, bool may_ask_peers,
                                  const std::atomic<bool>* stop);
  void SetState(int64_t slot, State state);
  // Marks a fill failed, keeping its error when the storage failed (fill_errors_).
  void FailFill(int64_t slot, const CapturedError& error);
  // Waits until another thread has filled (or failed) a slot; false if `stop` was set meanwhile
  // or `max_wait_s` (when above 0) passed.
  bool WaitWhileFilling(const std::atomic<uint8_t>& state, const std::atomic<bool>& stop, double max_wait_s = 0);
  void PrefetchLoop(int level, int client);
  // Stores `bytes` of `sample` in its slot (the caller owns it: kFilling)
  // and sets the slot's state; true when stored.
  bool StoreFilled(int level, int64_t slot, int64_t sample, const SampleBuffer& bytes);
  // The samples after `sample` in its shard that can be read with it: this
  // class's, empty (now claimed), this rank's to read. (sample, slot) pairs,
  // `sample` first.
  std::vector<std::pair<int64_t, int64_t>> ClaimRun(int level, int64_t sample, int64_t slot);
  // True unless another rank is the one that reads `sample` from the PFS.
  bool ReadsItself(int64_t sample) const;
  SampleBuffer ReadFromPfs(int64_t sample, const std::atomic<bool>* stop);
  // A peer's request: bytes of a sample this rank is designated for.
  bool Serve(int64_t sample, SampleBuffer* out);
  void ExchangePlacements(const AccessPlan& plan, Communicator* comm, const std::vector<int64_t>& reads);

  Source& source_;
  SourceModel model_;
  std::shared_ptr<SourceReader> reader_;
  Placement placement_;
  std::vector<std::unique_ptr<Level>> levels_;  // index = storage class; [0] unused
  std::vector<int64_t> slot_samples_;           // every cached sample, sorted
  std::vector<int64_t> slot_of_sorted_;         // its global slot
  std::unique_ptr<std::atomic<uint8_t>[]> states_;
  std::vector<int64_t> slot_sizes_;
  std::vector<std::string> warnings_;
  const std::string pfs_name_ = "pfs";
  const std::string remote_name_ = "remote";

  // Several ranks: whom to ask for the samples this rank reads.
  int my_rank_ = 0;
  PeerDirectory directory_;
  ExchangeStats exchange_stats_;  // written only by ExchangePlacements, in the constructor
  std::unique_ptr<PeerTransport> transport_;
  int worker_slots_ = 0;
  // How long a peer's request waits for a slot this rank is filling before it is answered "not
  // here": half the asker's timeout_s, so that a fill waiting on a lost third rank makes the asker
  // read from the PFS rather than time out on this rank (and name the wrong one).
  double serve_wait_s_ = 0;
  int64_t coalesce_bytes_ = 0;
  std::atomic<int64_t> pfs_reads_{0}, pfs_bytes_{0}, remote_reads_{0};

  std::mutex mu_;
  std::condition_variable filled_cv_;
  // Why a slot's fill failed, when the storage failed (a read past its
  // deadline, a missing file): a thread that waited for that fill raises it
  // instead of reading again, so a stuck read costs one read_timeout_s, not
  // two. Guarded by mu_.
  std::map<int64_t, CapturedError> fill_errors_;
  std::atomic<bool> closed_{false};        // Stop() was called
  std::atomic<bool> close_started_{false};
  std::atomic<bool> serving_stopped_{false};  // after the linger: serving threads' reads give up
  std::vector<std::thread> threads_;
};

}  // namespace hdmlp

#endif  // HDMLP_CACHE_CACHE_HIERARCHY_H_
