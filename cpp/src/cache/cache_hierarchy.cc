#include "hdmlp/cache/cache_hierarchy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "hdmlp/errors.h"
#include "hdmlp/env/start_thread.h"

namespace hdmlp {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

CacheHierarchy::CacheHierarchy(const Config& config, const AccessPlan& plan, int rank, Source& source,
                               Env* local_env, Communicator* comm, int worker_slots,
                               std::shared_ptr<SourceReader> reader, const InterruptCheck& interrupt,
                               PhaseTimer* startup)
    : source_(source), model_(config, plan.options().world_size),
      reader_(reader != nullptr ? std::move(reader)
                                : std::make_shared<SourceReader>(std::shared_ptr<Source>(&source, [](Source*) {}),
                                                                 nullptr, 300.0)),
      my_rank_(rank), worker_slots_(worker_slots), coalesce_bytes_(int64_t{config.coalesce_kb} * 1024) {
  const size_t num_classes = config.storage_classes.size();
  levels_.resize(num_classes);
  std::vector<int64_t> capacities(num_classes, 0);
  for (size_t j = 1; j < num_classes; ++j) {
    const StorageClassConfig& c = config.storage_classes[j];
    auto level = std::make_unique<Level>();
    level->status.name = c.name;
    level->status.backend = c.backend;
    level->status.predicted_mbps = model_.ClassMbps(static_cast<int>(j));
    level->threads = c.threads;
    capacities[j] = static_cast<int64_t>(c.capacity_mb * 1024 * 1024);
    if (!model_.PreferClass(static_cast<int>(j))) {
      level->status.note = "not used: the model predicts " + std::to_string(std::lround(model_.ClassMbps(static_cast<int>(j)))) +
                           " MB/s per reader from this class, no faster than reading the dataset's own storage (" +
                           std::to_string(std::lround(model_.PfsMbps())) +
                           " MB/s, the config's \"pfs\" table), so caching here would not help";
      capacities[j] = 0;
    } else if (c.backend == "filesystem" && capacities[j] > 0) {
      try {
        level->storage = MakeFilesystemClass(local_env, c.name, c.path);
      } catch (const Error& e) {
        level->status.warning = e.what();
        capacities[j] = 0;
      }
    }
    level->status.capacity_bytes = capacities[j];
    if (!level->status.warning.empty()) warnings_.push_back(level->status.warning);
    levels_[j] = std::move(level);
  }

  const auto lap = [startup](const char* phase) {
    if (startup != nullptr) startup->Lap(phase);
  };
  lap("cache_classes");

  const bool several_ranks = comm != nullptr && comm->size() > 1;
  PlanningOptions planning;
  // Only ranks that serve each other gain from caching their first-epoch
  // samples first (cache_hierarchy.h); alone (or under a launcher without
  // MPI) the most-read samples win.
  planning.first_epoch_first = several_ranks;
  planning.keep_read_samples = several_ranks;  // what to ask the peer directory about
  planning.interrupt = interrupt;
  placement_ = PlanPlacement(plan, rank, source.sizes(), capacities, planning);
  lap("placement_plan");

  int64_t slots = 0;
  for (size_t j = 1; j < num_classes; ++j) {
    Level& level = *levels_[j];
    level.samples = placement_.class_samples[j];
    level.first_slot = slots;
    slots += static_cast<int64_t>(level.samples.size());
    std::vector<int64_t> sizes;
    sizes.reserve(level.samples.size());
    for (int64_t s : level.samples) sizes.push_back(source.sizes()[static_cast<size_t>(s)]);
    level.status.planned_samples = static_cast<int64_t>(sizes.size());
    level.status.planned_bytes = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
    slot_sizes_.insert(slot_sizes_.end(), sizes.begin(), sizes.end());
    if (config.storage_classes[j].backend == "memory" && !sizes.empty()) {
      level.storage = MakeMemoryClass(level.status.name, sizes);
    }
  }

  std::vector<std::pair<int64_t, int64_t>> by_sample;
  by_sample.reserve(static_cast<size_t>(slots));
  for (size_t j = 1; j < num_classes; ++j) {
    const Level& level = *levels_[j];
    for (size_t i = 0; i < level.samples.size(); ++i) {
      by_sample.emplace_back(level.samples[i], level.first_slot + static_cast<int64_t>(i));
    }
  }
  std::sort(by_sample.begin(), by_sample.end());
  for (const auto& [sample, slot] : by_sample) {
    slot_samples_.push_back(sample);
    slot_of_sorted_.push_back(slot);
  }
  states_.reset(new std::atomic<uint8_t>[static_cast<size_t>(std::max<int64_t>(slots, 1))]);
  for (int64_t s = 0; s < slots; ++s) states_[static_cast<size_t>(s)].store(kEmpty, std::memory_order_relaxed);
  lap("cache_slots");

  if (several_ranks) ExchangePlacements(plan, comm, placement_.read_samples);
  std::vector<int64_t>().swap(placement_.read_samples);
  lap("placement_exchange");
  if (several_ranks) {
    int prefetch_threads = 0;
    for (size_t j = 1; j < levels_.size(); ++j) prefetch_threads += levels_[j]->threads;
    // Lingering at close: long enough for a peer an epoch of a small job
    // behind, never longer than the job waits for a peer anyway.
    serve_wait_s_ = comm->timeout_s() / 2;
    transport_ = std::make_unique<PeerTransport>(
        comm, config.distributed_threads, worker_slots_ + prefetch_threads,
        [this](int64_t sample, SampleBuffer* out) { return Serve(sample, out); }, std::min(10.0, comm->timeout_s()));
  }
  lap("peer_transport");
}

void CacheHierarchy::ExchangePlacements(const AccessPlan& plan, Communicator* comm, const std::vector<int64_t>& reads) {
  std::vector<CachedSample> cached;
  cached.reserve(slot_samples_.size());
  for (size_t j = 1; j < levels_.size(); ++j) {
    for (int64_t sample : levels_[j]->samples) cached.push_back({sample, static_cast<int>(j)});
  }
  const auto start = std::chrono::steady_clock::now();
  ExchangeStats& stats = exchange_stats_;
  const size_t me = static_cast<size_t>(my_rank_);
  directory_ = PeerDirectory::Exchange(plan, my_rank_, cached, reads, [comm, me, &stats](const RankMessages& out) {
    RankMessages in = comm->AllToAll(out, "the exchange of cache placements");
    for (size_t r = 0; r < out.size(); ++r) {
      (r != me ? stats.sent_bytes : stats.self_bytes) += static_cast<int64_t>(out[r].size());
    }
    for (size_t r = 0; r < in.size(); ++r) {
      if (r != me) stats.received_bytes += static_cast<int64_t>(in[r].size());
    }
    ++stats.rounds;
    return in;
  });
  stats.seconds = SecondsSince(start);
}

CacheHierarchy::~CacheHierarchy() { Close(); }

void CacheHierarchy::Start() {
  if (transport_) transport_->Start();
  int client = worker_slots_;
  for (size_t j = 1; j < levels_.size(); ++j) {
    const Level& level = *levels_[j];
    if (level.samples.empty() || !level.storage) continue;
    const auto threads = std::min<int64_t>(level.threads, static_cast<int64_t>(level.samples.size()));
    for (int64_t t = 0; t < threads; ++t, ++client) {
      // On failure the threads started so far are joined by Close() (the
      // destructor's, when the job's constructor unwinds).
      threads_.push_back(StartThread("hdmlp-fill-" + std::to_string(j), "prefetch",
                                     "the 'threads' of storage class '" + level.status.name + "' (" +
                                         std::to_string(level.threads) + ")",
                                     [this, j, client] { PrefetchLoop(static_cast<int>(j), client); }));
    }
  }
}

int64_t CacheHierarchy::SlotOf(int64_t sample, int* level) const {
  const auto it = std::lower_bound(slot_samples_.begin(), slot_samples_.end(), sample);
  if (it == slot_samples_.end() || *it != sample) return -1;
  const int64_t slot = slot_of_sorted_[static_cast<size_t>(it - slot_samples_.begin())];
  int j = static_cast<int>(levels_.size()) - 1;
  while (j > 1 && levels_[static_cast<size_t>(j)]->first_slot > slot) --j;
  *level = j;
  return slot;
}

int CacheHierarchy::ClassOf(int64_t sample) const {
  int level = -1;
  return SlotOf(sample, &level) < 0 ? -1 : level;
}

SampleBuffer CacheHierarchy::ReadFromPfs(int64_t sample, const std::atomic<bool>* stop) {
  SampleBuffer bytes = reader_->Read(sample, stop);
  pfs_reads_.fetch_add(1);
  pfs_bytes_.fetch_add(bytes.size);
  return bytes;
}

int64_t CacheHierarchy::changed_samples() const { return reader_->changed_samples(); }

std::vector<std::string> CacheHierarchy::ChangedFiles() const { return reader_->ChangedFiles(); }

const std::string& CacheHierarchy::ReadUncached(int64_t sample, SampleBuffer* out, int client, bool may_ask_peers,
                                                const std::atomic<bool>* stop) {
  int peer = -1, storage_class = 0;
  // A peer only when the model predicts it faster than the PFS: b_c caps
  // what its class can deliver.
  if (may_ask_peers && transport_ && directory_.Lookup(sample, &peer, &storage_class) && peer != my_rank_ &&
      std::min(model_.RemoteLinkMbps(), model_.ClassMbps(storage_class)) > model_.PfsMbps() &&
      transport_->Fetch(peer, sample, client, out)) {
    remote_reads_.fetch_add(1);
    return remote_name_;
  }
  *out = ReadFromPfs(sample, stop);
  return pfs_name_;
}

void CacheHierarchy::FailFill(int64_t slot, const CapturedError& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error.IsInvalidArgument()) fill_errors_[slot] = error;
  }
  SetState(slot, kFailed);
}

void CacheHierarchy::SetState(int64_t slot, State state) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    states_[static_cast<size_t>(slot)].store(state, std::memory_order_release);
  }
  filled_cv_.notify_all();
}

const std::string& CacheHierarchy::FillSlot(int level, int64_t slot, int64_t sample, SampleBuffer* out, int client,
                                            bool may_ask_peers, const std::atomic<bool>* stop) {
  const std::string* source;
  try {
    source = &ReadUncached(sample, out, client, may_ask_peers, stop);
  } catch (...) {
    FailFill(slot, CapturedError::FromCurrentException());
    throw;
  }
  StoreFilled(level, slot, sample, *out);
  return *source;
}

bool CacheHierarchy::StoreFilled(int level, int64_t slot, int64_t sample, const SampleBuffer& bytes) {
  Level& l = *levels_[static_cast<size_t>(level)];
  const int64_t local = slot - l.first_slot;
  // A file whose size changed since the scan does not fit its planned place.
  const bool stored = bytes.size == slot_sizes_[static_cast<size_t>(slot)] &&
                      l.storage->Store(local, sample, bytes.data.get(), bytes.size);
  if (stored) {
    l.filled_samples.fetch_add(1);
    l.filled_bytes.fetch_add(bytes.size);
  }
  SetState(slot, stored ? kReady : kFailed);
  return stored;
}

bool CacheHierarchy::ReadsItself(int64_t sample) const {
  if (!transport_) return true;
  int peer = -1, storage_class = 0;
  return !directory_.Lookup(sample, &peer, &storage_class) || peer == my_rank_;
}

std::vector<std::pair<int64_t, int64_t>> CacheHierarchy::ClaimRun(int level, int64_t sample, int64_t slot) {
  std::vector<std::pair<int64_t, int64_t>> run{{sample, slot}};
  if (coalesce_bytes_ <= 0 || !ReadsItself(sample)) return run;
  const Source::Extent first = source_.ExtentOf(sample);
  if (first.file < 0) return run;
  constexpr int64_t kMaxGap = 64 * 1024;  // bytes between two samples read along (tar headers, labels)
  Source::Extent prev = first;
  for (int64_t s = sample + 1; s < source_.size(); ++s) {
    const Source::Extent e = source_.ExtentOf(s);
    const int64_t prev_end = prev.offset + prev.size;
    if (e.file != first.file || e.offset < prev_end || e.offset - prev_end > kMaxGap ||
        e.offset + e.size - first.offset > coalesce_bytes_) {
      break;
    }
    int l = -1;
    const int64_t next_slot = SlotOf(s, &l);
    if (next_slot < 0 || l != level || !ReadsItself(s)) break;
    uint8_t expected = kEmpty;
    if (!states_[static_cast<size_t>(next_slot)].compare_exchange_strong(expected, kFilling)) break;
    run.emplace_back(s, next_slot);
    prev = e;
  }
  return run;
}

bool CacheHierarchy::WaitWhileFilling(const std::atomic<uint8_t>& state, const std::atomic<bool>& stop,
                                      double max_wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto filled = [&] { return stop.load() || state.load() != kFilling; };
  if (max_wait_s <= 0) {
    filled_cv_.wait(lock, filled);
  } else if (!filled_cv_.wait_for(lock, std::chrono::duration<double>(max_wait_s), filled)) {
    return false;
  }
  return !stop.load();
}

const std::string& CacheHierarchy::Fetch(int64_t sample, SampleBuffer* out, int client) {
  return FetchInto(sample, out, nullptr, client);
}

const std::string& CacheHierarchy::FetchView(int64_t sample, SampleBuffer* out, SampleView* view, int client) {
  *view = SampleView();
  const std::string& source = FetchInto(sample, out, view, client);
  if (!view->data) *view = SampleView(*out);
  return source;
}

const std::string& CacheHierarchy::FetchInto(int64_t sample, SampleBuffer* out, SampleView* view, int client) {
  int level = -1;
  const int64_t slot = SlotOf(sample, &level);
  if (slot < 0) return ReadUncached(sample, out, client, true, &closed_);
  std::atomic<uint8_t>& state = states_[static_cast<size_t>(slot)];
  Level& l = *levels_[static_cast<size_t>(level)];
  for (;;) {
    uint8_t s = state.load(std::memory_order_acquire);
    switch (s) {
      case kReady:
        if (view) {
          // Ready means stored (the acquire above pairs with SetState's
          // release), and a stored slot is never rewritten.
          if (const uint8_t* stored = l.storage->StoredBytes(slot - l.first_slot)) {
            *view = SampleView(stored, slot_sizes_[static_cast<size_t>(slot)]);
            return l.status.name;
          }
        }
        if (l.storage->Read(slot - l.first_slot, sample, slot_sizes_[static_cast<size_t>(slot)], out)) {
          return l.status.name;
        }
        // What the class holds is not what was stored: never serve it.
        state.compare_exchange_strong(s, kFailed);
        continue;
      case kEmpty:
        if (state.compare_exchange_strong(s, kFilling)) {
          return FillSlot(level, slot, sample, out, client, true, &closed_);
        }
        continue;
      case kFilling: {
        // Another thread is reading it: wait rather than read twice; when
        // the storage failed that read, its error is this one too.
        if (!WaitWhileFilling(state, closed_)) throw ClosedError("the job was closed");
        CapturedError failed;
        {
          std::lock_guard<std::mutex> lock(mu_);
          const auto it = fill_errors_.find(slot);
          if (it != fill_errors_.end()) failed = it->second;
        }
        if (failed) failed.Throw();
        continue;
      }
      default:
        return ReadUncached(sample, out, client, true, &closed_);
    }
  }
}

bool CacheHierarchy::Serve(int64_t sample, SampleBuffer* out) {
  int level = -1;
  const int64_t slot = SlotOf(sample, &level);
  if (slot < 0) return false;
  std::atomic<uint8_t>& state = states_[static_cast<size_t>(slot)];
  Level& l = *levels_[static_cast<size_t>(level)];
  for (;;) {
    uint8_t s = state.load(std::memory_order_acquire);
    switch (s) {
      case kReady:
        return l.storage->Read(slot - l.first_slot, sample, slot_sizes_[static_cast<size_t>(slot)], out);
      case kEmpty:
        // Asked before its prefetch got to it: this rank is the one that
        // reads it from the PFS, so it does so now (never asking a peer).
        if (state.compare_exchange_strong(s, kFilling)) {
          FillSlot(level, slot, sample, out, 0, false, &serving_stopped_);
          return true;
        }
        continue;
      case kFilling:
        if (!WaitWhileFilling(state, serving_stopped_, serve_wait_s_)) return false;
        continue;
      default:
        return false;
    }
  }
}

void CacheHierarchy::PrefetchLoop(int level, int client) {
  Level& l = *levels_[static_cast<size_t>(level)];
  const auto count = static_cast<int64_t>(l.samples.size());
  while (!closed_.load()) {
    const int64_t i = l.next_prefetch.fetch_add(1);
    if (i >= count) return;
    const int64_t slot = l.first_slot + i;
    uint8_t expected = kEmpty;
    if (!states_[static_cast<size_t>(slot)].compare_exchange_strong(expected, kFilling)) continue;
    const auto start = Clock::now();
    const int64_t sample = l.samples[static_cast<size_t>(i)];
    const auto run = ClaimRun(level, sample, slot);
    std::vector<SampleBuffer> many;
    if (run.size() > 1) {
      try {
        many = reader_->ReadRun(sample, static_cast<int64_t>(run.size()), &closed_);
        pfs_reads_.fetch_add(static_cast<int64_t>(run.size()));
      } catch (const Error&) {
        const CapturedError error = CapturedError::FromCurrentException();
        if (!error.IsInvalidArgument()) {
          // The storage failed (a stuck read past its deadline): reading
          // each again would cost a deadline per sample.
          for (const auto& entry : run) FailFill(entry.second, error);
          continue;
        }
        many.clear();  // one bad sample among them: read each on its own below
      }
    }
    for (size_t k = 0; k < run.size(); ++k) {
      SampleBuffer bytes;
      try {
        if (!many.empty()) {
          bytes = std::move(many[k]);
          pfs_bytes_.fetch_add(bytes.size);
          StoreFilled(level, run[k].second, run[k].first, bytes);
        } else {
          FillSlot(level, run[k].second, run[k].first, &bytes, client, true, &closed_);
        }
        l.prefetched_samples.fetch_add(1);
        l.prefetched_bytes.fetch_add(bytes.size);
      } catch (const Error&) {
        // The staging worker that needs this sample reads it itself and reports the error.
      }
    }
    l.prefetch_micros.fetch_add(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
  }
}

void CacheHierarchy::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  filled_cv_.notify_all();
  reader_->WakeWaiters();
  if (transport_) transport_->StopClients();
}

void CacheHierarchy::Close() {
  Stop();
  if (close_started_.exchange(true)) return;
  for (auto& t : threads_) t.join();
  threads_.clear();
  // Serves peers until they have all said bye (or a few seconds): a peer
  // still reading then gets its samples from here, not from the PFS. Then
  // the serving threads stop, also when a read of theirs hangs.
  if (transport_) transport_->Linger();
  {
    std::lock_guard<std::mutex> lock(mu_);
    serving_stopped_ = true;
  }
  filled_cv_.notify_all();
  reader_->WakeWaiters();
  if (transport_) transport_->Close();
  // A read still stuck in the dataset's storage is left behind.
  reader_->Close();
  for (size_t j = 1; j < levels_.size(); ++j) {
    if (levels_[j]->storage) levels_[j]->storage->Release();
  }
}

std::vector<ClassStatus> CacheHierarchy::Status() const {
  std::vector<ClassStatus> out;
  for (size_t j = 1; j < levels_.size(); ++j) {
    const Level& l = *levels_[j];
    ClassStatus s = l.status;
    s.filled_samples = l.filled_samples.load();
    s.filled_bytes = l.filled_bytes.load();
    s.prefetched_samples = l.prefetched_samples.load();
    s.prefetched_bytes = l.prefetched_bytes.load();
    s.prefetch_seconds = static_cast<double>(l.prefetch_micros.load()) / 1e6;
    if (l.storage && s.warning.empty()) s.warning = l.storage->warning();
    if (l.storage) s.dropped_corrupt = l.storage->dropped_corrupt();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> CacheHierarchy::Warnings() const {
  std::vector<std::string> out = warnings_;
  for (size_t j = 1; j < levels_.size(); ++j) {
    if (!levels_[j]->storage) continue;
    if (!levels_[j]->storage->warning().empty()) out.push_back(levels_[j]->storage->warning());
    if (!levels_[j]->storage->corruption_warning().empty()) out.push_back(levels_[j]->storage->corruption_warning());
  }
  return out;
}

}  // namespace hdmlp
