// Bindings of the plan and the job. Batches reach Python without a copy:
// each sample's bytes, or a transformed batch's memory, and the label array
// are OwnedBuffers (owned_buffer.h: buffer protocol and DLPack) that own the
// memory; a view or tensor on one keeps it alive, so a batch buffer goes
// back to its pool only after the last view on it is gone.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "bindings.h"
#include "hdmlp/env/env.h"
#include "hdmlp/errors.h"
#include "hdmlp/job/job.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/transport/communicator.h"
#include "owned_buffer.h"

namespace py = pybind11;

namespace hdmlp::python {
namespace {

using PySpec = std::pair<std::string, std::map<std::string, std::vector<double>>>;

// A batch in `memory` (aliased): n items of `dims`, each element `itemsize` bytes of `format`.
template <typename Dims>
OwnedBuffer FromBatchMemory(std::shared_ptr<uint8_t> memory, int64_t itemsize, const char* format, const Dims& dims,
                            int64_t n) {
  OwnedBuffer b;
  b.ptr = memory.get();
  b.owner = std::shared_ptr<void>(memory, memory.get());
  b.itemsize = static_cast<py::ssize_t>(itemsize);
  b.format = format;
  b.shape.push_back(static_cast<py::ssize_t>(n));
  for (int64_t d : dims) b.shape.push_back(static_cast<py::ssize_t>(d));
  b.count = 1;
  for (py::ssize_t d : b.shape) b.count *= d;
  return b;
}

// A transformed batch: [n, C, H, W] (or [n, H, W, C]) float32 or uint8.
OwnedBuffer FromBatchMemory(std::shared_ptr<uint8_t> memory, const OutputShape& shape, int64_t n) {
  return FromBatchMemory(std::move(memory), shape.element_size(), shape.type == OutputType::kFloat32 ? "f" : "B",
                         shape.dims(), n);
}

// An array batch: [n, ...] of the source's dtype.
OwnedBuffer FromArrayMemory(std::shared_ptr<uint8_t> memory, const ArraySpec& spec, int64_t n) {
  return FromBatchMemory(std::move(memory), spec.element_size, BufferFormatOf(spec.dtype), spec.shape, n);
}

OwnedBuffer FromSample(SampleBuffer&& sample) {
  OwnedBuffer b;
  const int64_t size = sample.size;
  std::shared_ptr<uint8_t[]> data(sample.data.release());
  b.ptr = data.get();
  b.owner = std::shared_ptr<void>(data, data.get());
  b.count = size;
  return b;
}

OwnedBuffer FromInt64(std::vector<int64_t>&& values) {
  auto data = std::make_shared<std::vector<int64_t>>(std::move(values));
  OwnedBuffer b;
  b.ptr = data->data();
  b.owner = data;
  b.count = static_cast<py::ssize_t>(data->size());
  b.itemsize = sizeof(int64_t);
  b.format = "q";
  return b;
}

// The job plus the storage it reads through. The storage is shared with
// reads the job may leave behind at close (env/deadline_reader.h).
class PyJob {
 public:
  PyJob(JobOptions options, double pfs_latency_s, double pfs_mbps, std::vector<std::string> failing_paths)
      : pid_(::getpid()) {
    if (pfs_latency_s > 0 || pfs_mbps > 0 || !failing_paths.empty()) {
      ThrottledEnv::Options throttle;
      throttle.read_latency_s = pfs_latency_s;
      throttle.read_bandwidth_mbps = pfs_mbps;
      throttle.failing_paths = std::move(failing_paths);
      env_ = std::make_shared<ThrottledEnv>(Env::Default(), throttle);
      options.shared_env = env_;
    }
    job_ = std::make_unique<Job>(options);
  }
  ~PyJob() {
    // In a forked child the job's threads, locks and condition variables are
    // the parent's: destroying it could wait forever. Leave it.
    if (::getpid() != pid_) {
      (void)job_.release();
      return;
    }
    Close();
  }

  Job& job() {
    if (!job_) throw ClosedError("the job is closed");
    return *job_;
  }
  void Close() {
    if (job_ && ::getpid() == pid_) {
      job_->Close();
      job_.reset();
    }
  }
  int64_t pfs_files_opened() const { return env_ ? env_->files_opened() : -1; }

 private:
  const pid_t pid_;
  std::shared_ptr<ThrottledEnv> env_;
  std::unique_ptr<Job> job_;
};

// A Ctrl-C seen by a long start-up phase: the Python exception it raised,
// re-raised once the phase has let go.
struct PendingInterrupt {
  std::unique_ptr<py::error_already_set> error;
};

// The next batch, None at the end of the epoch, or False when timeout_s
// (None: no limit) passed first (call again to go on).
py::object NextBatch(PyJob& self, std::optional<double> timeout_s) {
  Job& job = self.job();
  Batch batch;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s.value_or(0) * 1e6));
  for (;;) {
    Job::Next next;
    {
      py::gil_scoped_release release;
      auto wait = std::chrono::milliseconds(100);
      if (timeout_s) {
        wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::max(deadline - std::chrono::steady_clock::now(),
                                           std::chrono::steady_clock::duration::zero())));
      }
      next = job.NextBatch(&batch, wait);
    }
    if (next == Job::Next::kEndOfEpoch) return py::none();
    if (next == Job::Next::kBatch) break;
    if (timeout_s && std::chrono::steady_clock::now() >= deadline) return py::bool_(false);
    // Waiting in slices lets Ctrl-C interrupt a long stall.
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  // (epoch, index, ids, labels, samples), and for an array source its label arrays or None
  const auto n = static_cast<int64_t>(batch.ids.size());
  const py::object ids = py::cast(FromInt64(std::move(batch.ids)));
  const py::object labels = py::cast(FromInt64(std::move(batch.labels)));
  if (batch.array != nullptr) {
    py::object label_arrays = py::none();
    if (batch.label_arrays) label_arrays = py::cast(FromArrayMemory(std::move(batch.label_arrays), *batch.label_array, n));
    py::object arrays = py::cast(FromArrayMemory(std::move(batch.images), *batch.array, n));
    return py::make_tuple(batch.epoch, batch.index, ids, labels, arrays, label_arrays);
  }
  if (batch.images) {
    return py::make_tuple(batch.epoch, batch.index, ids, labels,
                          FromBatchMemory(std::move(batch.images), batch.sample_shape, n));
  }
  py::list samples(batch.samples.size());
  for (size_t i = 0; i < batch.samples.size(); ++i) samples[i] = py::cast(FromSample(std::move(batch.samples[i])));
  return py::make_tuple(batch.epoch, batch.index, ids, labels, samples);
}

// A Python gather function (every rank's bytes from each rank's own, e.g.
// over torch.distributed) as the core's hook. The core calls it without the
// GIL and may drop it on any thread: both take the GIL here.
std::function<std::vector<std::string>(const std::string&)> GatherThrough(py::object fn) {
  std::shared_ptr<py::object> held(new py::object(std::move(fn)), [](py::object* f) {
    py::gil_scoped_acquire acquire;
    delete f;
  });
  return [held](const std::string& mine) {
    py::gil_scoped_acquire acquire;
    const py::object all = (*held)(py::bytes(mine));
    std::vector<std::string> out;
    for (const py::handle item : all) out.push_back(item.cast<std::string>());
    return out;
  };
}

py::list MetricsToPython(const std::vector<EpochMetrics>& epochs) {
  py::list out;
  for (const auto& e : epochs) {
    py::dict reads;
    for (const auto& [source, c] : e.reads) {
      py::dict counters;
      counters["count"] = c.count;
      counters["bytes"] = c.bytes;
      counters["seconds"] = c.seconds;
      reads[FsStr(source)] = counters;
    }
    py::dict d;
    d["epoch"] = e.epoch;
    d["samples"] = e.samples;
    d["stall_seconds"] = e.stall_seconds;
    d["read_seconds"] = e.read_seconds;
    d["transform_seconds"] = e.transform_seconds;
    d["transform_cpu_seconds"] = e.transform_cpu_seconds;
    d["handoff_wait_seconds"] = e.handoff_wait_seconds;
    d["assembly_seconds"] = e.assembly_seconds;
    d["skipped"] = e.skipped;
    d["batches"] = e.batches;
    d["ready_batches"] = e.ready_batches;
    d["span_seconds"] = e.span_seconds;
    d["reads"] = reads;
    out.append(d);
  }
  return out;
}

py::list ClassStatusesToPython(const std::vector<ClassStatus>& statuses) {
  py::list out;
  for (const auto& s : statuses) {
    py::dict d;
    d["name"] = s.name;
    d["backend"] = s.backend;
    d["capacity_bytes"] = s.capacity_bytes;
    d["planned_samples"] = s.planned_samples;
    d["planned_bytes"] = s.planned_bytes;
    d["filled_samples"] = s.filled_samples;
    d["filled_bytes"] = s.filled_bytes;
    d["prefetched_samples"] = s.prefetched_samples;
    d["prefetched_bytes"] = s.prefetched_bytes;
    d["prefetch_seconds"] = s.prefetch_seconds;
    d["predicted_mbps"] = s.predicted_mbps;
    d["note"] = FsStr(s.note);
    d["warning"] = FsStr(s.warning);
    d["dropped_corrupt"] = s.dropped_corrupt;
    out.append(d);
  }
  return out;
}

py::dict ExchangeToPython(const CacheHierarchy::ExchangeStats& s) {
  py::dict d;
  d["sent_bytes"] = s.sent_bytes;
  d["received_bytes"] = s.received_bytes;
  d["self_bytes"] = s.self_bytes;
  d["rounds"] = s.rounds;
  d["seconds"] = s.seconds;
  return d;
}

py::dict StartupToPython(const PhaseTimer& timer) {
  py::dict phases;
  double wall = 0, cpu = 0, process_cpu = 0;
  for (const PhaseTime& p : timer.phases()) {
    py::dict d;
    d["wall_seconds"] = p.wall_seconds;
    d["cpu_seconds"] = p.cpu_seconds;
    d["process_cpu_seconds"] = p.process_cpu_seconds;
    phases[py::str(p.name)] = d;
    wall += p.wall_seconds;
    cpu += p.cpu_seconds;
    process_cpu += p.process_cpu_seconds;
  }
  py::dict d;
  d["phases"] = phases;
  d["wall_seconds"] = wall;
  d["cpu_seconds"] = cpu;
  d["process_cpu_seconds"] = process_cpu;
  d["started_at"] = timer.started_at();
  return d;
}

// (sample dims, dtype, (label dims, dtype) or None) of an array source, else None.
py::object ArraySpecOf(const Source& s) {
  if (s.sample_array() == nullptr) return py::none();
  py::object labels = py::none();
  if (s.label_array() != nullptr) labels = py::make_tuple(s.label_array()->shape, s.label_array()->dtype);
  return py::make_tuple(s.sample_array()->shape, s.sample_array()->dtype, labels);
}

// Opens the job on `options` without the GIL. Long start-up phases poll for
// Ctrl-C through options.interrupt: the KeyboardInterrupt it raised is
// re-raised here once the core has let go.
std::unique_ptr<PyJob> OpenJob(JobOptions options, double pfs_latency_s, double pfs_mbps,
                               std::vector<std::string> failing_paths) {
  auto pending = std::make_shared<PendingInterrupt>();
  options.interrupt = [pending] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      pending->error = std::make_unique<py::error_already_set>();
      throw InterruptedError("interrupted");
    }
  };
  try {
    py::gil_scoped_release release;
    return std::make_unique<PyJob>(std::move(options), pfs_latency_s, pfs_mbps, std::move(failing_paths));
  } catch (const InterruptedError&) {
    if (!pending->error) throw;
    pending->error->restore();
    throw py::error_already_set();
  }
}

void BindProcessFunctions(py::module_& m) {
  m.def("in_mpi_job", &Communicator::InMpiJob, "True when this process runs under an MPI launcher");
  m.def(
      "report_startup_failure",
      [](const std::string& kind, const std::string& message, double timeout_s) {
        py::gil_scoped_release release;
        Job::ReportStartupFailure(CapturedError::FromKindName(kind, message), timeout_s);
      },
      py::arg("kind"), py::arg("message"), py::arg("timeout_s"),
      "Under MPI: makes the other ranks' start-up check raise this rank's error (kind: not_found, "
      "not_a_directory, invalid_argument, config, io, ...)");
  // Both may block on the other ranks: without the GIL, so that the exit's
  // watchdog thread (hdmlp/job.py, after a start-up failure) can still run.
  m.def("finalize_mpi", &Communicator::FinalizeIfOwned, py::call_guard<py::gil_scoped_release>(),
        "Finalises MPI if hdmlp initialised it");
  m.def("init_mpi", &Communicator::EnsureInitialized, "Initialises MPI now when in an MPI job");
  m.def("abort_mpi", &Communicator::AbortIfInitialized, py::arg("code"), py::call_guard<py::gil_scoped_release>(),
        "MPI_Abort on MPI_COMM_WORLD when MPI is initialised (ends every rank)");
}

void BindAccessPlan(py::module_& m) {
  py::class_<AccessPlan>(m, "AccessPlan")
      .def(py::init([](int64_t num_samples, int64_t batch_size, int epochs, uint64_t seed, bool drop_last,
                       int world_size, const std::string& scheme, double exchange_fraction, bool shuffle) {
             PlanOptions o;
             o.num_samples = num_samples;
             o.batch_size = batch_size;
             o.epochs = epochs;
             o.seed = seed;
             o.drop_last = drop_last;
             o.world_size = world_size;
             o.scheme = ParseDistributionScheme(scheme);
             o.exchange_fraction = exchange_fraction;
             o.shuffle = shuffle;
             return std::make_unique<AccessPlan>(o);
           }),
           py::arg("num_samples"), py::arg("batch_size"), py::arg("epochs"), py::arg("seed"),
           py::arg("drop_last") = false, py::arg("world_size") = 1, py::arg("distr_scheme") = "uniform",
           py::arg("exchange_fraction") = 0.1, py::arg("shuffle") = true)
      .def("batches_per_epoch", &AccessPlan::BatchesPerEpoch)
      .def("rank_epoch_size", &AccessPlan::RankEpochSize, py::arg("rank"))
      .def("local_batch_size", &AccessPlan::LocalBatchSize, py::arg("rank"), py::arg("batch"))
      .def("global_batch_range",
           [](const AccessPlan& p, int64_t h) {
             if (h < 0 || h >= p.BatchesPerEpoch()) throw py::value_error("batch out of range");
             return py::make_tuple(p.GlobalBatchBegin(h), p.GlobalBatchEnd(h));
           },
           py::arg("batch"))
      .def("rank_slice",
           [](const AccessPlan& p, int rank, int64_t h) {
             if (rank < 0 || rank >= p.options().world_size) throw py::value_error("rank out of range");
             if (h < 0 || h >= p.BatchesPerEpoch()) throw py::value_error("batch out of range");
             const PositionRange r = p.RankSlice(rank, h);
             return py::make_tuple(r.begin, r.begin + r.size);
           },
           py::arg("rank"), py::arg("batch"))
      .def("rank_epoch_samples",
           [](const AccessPlan& p, int rank, int epoch) {
             if (rank < 0 || rank >= p.options().world_size) throw py::value_error("rank out of range");
             if (epoch < 0) throw py::value_error("epoch must be >= 0");
             return FromInt64(p.RankEpochSamples(rank, epoch));
           },
           py::arg("rank"), py::arg("epoch"));
}

// _core.JobOptions: the core's JobOptions (job/job.h), one property per field
// (the nested scan and source options flattened); hdmlp/job.py fills it from
// its checked arguments. The hooks that hold Python objects are set by methods.
void BindJobOptions(py::module_& m) {
  py::class_<JobOptions> options(m, "JobOptions", "The core's job options (hdmlp/job.py fills them)");
  options.def(py::init<>())
      .def_readwrite("dataset_path", &JobOptions::dataset_path)
      .def_readwrite("batch_size", &JobOptions::batch_size)
      .def_readwrite("batch_size_per_rank", &JobOptions::batch_size_per_rank)
      .def_readwrite("epochs", &JobOptions::epochs)
      .def_readwrite("distr_scheme", &JobOptions::distr_scheme)
      .def_readwrite("drop_last", &JobOptions::drop_last)
      .def_readwrite("shuffle", &JobOptions::shuffle)
      .def_readwrite("config_path", &JobOptions::config_path)
      .def_readwrite("exchange_fraction", &JobOptions::exchange_fraction)
      .def_readwrite("timeout_s", &JobOptions::timeout_s)
      .def_readwrite("read_timeout_s", &JobOptions::read_timeout_s)
      .def_readwrite("use_mpi", &JobOptions::use_mpi)
      .def_readwrite("staging_threads", &JobOptions::staging_threads)
      .def_readwrite("spare_cores", &JobOptions::spare_cores)
      .def_readwrite("launcher_rank", &JobOptions::launcher_rank)
      .def_readwrite("launcher_world_size", &JobOptions::launcher_world_size)
      .def_readwrite("launcher_local_world_size", &JobOptions::launcher_local_world_size)
      .def_readwrite("launcher_name", &JobOptions::launcher_name)
      .def_readwrite("skip_bad_samples", &JobOptions::skip_bad_samples)
      .def_readwrite("resume", &JobOptions::resume)
      .def_readwrite("start_epoch", &JobOptions::start_epoch)
      .def_property("use_index_cache", [](const JobOptions& o) { return o.scan.use_cache; },
                    [](JobOptions& o, bool use) { o.scan.use_cache = use; })
      .def_property("index_cache_dir", [](const JobOptions& o) { return o.scan.cache_dir; },
                    [](JobOptions& o, std::string dir) { o.scan.cache_dir = std::move(dir); })
      .def_property("keep_damaged", [](const JobOptions& o) { return o.scan.keep_damaged; },
                    [](JobOptions& o, bool keep) { o.scan.keep_damaged = keep; })
      .def_property("source", [](const JobOptions& o) { return o.source.kind; },
                    [](JobOptions& o, std::string kind) { o.source.kind = std::move(kind); })
      .def_property(
          "seed", [](const JobOptions& o) { return o.has_seed ? std::optional<uint64_t>(o.seed) : std::nullopt; },
          [](JobOptions& o, std::optional<uint64_t> seed) {
            o.has_seed = seed.has_value();
            o.seed = seed.value_or(0);
          })
      .def_property(
          "transforms",
          [](const JobOptions& o) {
            std::vector<PySpec> specs;
            for (const TransformSpec& t : o.transforms) specs.emplace_back(t.op, t.args);
            return specs;
          },
          [](JobOptions& o, const std::vector<PySpec>& specs) {
            o.transforms.clear();
            for (const auto& [op, args] : specs) o.transforms.push_back(TransformSpec{op, args});
          })
      .def("set_source_option", [](JobOptions& o, const std::string& key,
                                   const std::string& value) { SetSourceOption(&o.source, key, value); })
      .def("set_gather", [](JobOptions& o, py::object fn) {
        o.gather = fn.is_none() ? nullptr : GatherThrough(std::move(fn));
      }, "Every rank's bytes from each rank's own (e.g. over torch.distributed), for ranks without MPI")
      .def("set_pinned_allocator", [](JobOptions& o, uintptr_t cuda_host_alloc, uintptr_t cuda_free_host) {
        o.batch_allocator = HostAllocator::CudaPinned(cuda_host_alloc, cuda_free_host);
      }, "Batch buffers in CUDA pinned memory, through cudaHostAlloc/cudaFreeHost at these addresses");
}

// The job's figures and reports: what Job.metrics() and the properties of
// hdmlp.Job read.
void BindJobReports(py::class_<PyJob>& job) {
  job.def_property_readonly("rank", [](PyJob& j) { return j.job().rank(); })
      .def_property_readonly("world_size", [](PyJob& j) { return j.job().world_size(); })
      .def_property_readonly("seed", [](PyJob& j) { return j.job().seed(); })
      .def_property_readonly("batches_per_epoch", [](PyJob& j) { return j.job().BatchesPerEpoch(); })
      .def_property_readonly("batch_size", [](PyJob& j) { return j.job().plan().options().batch_size; })
      .def_property_readonly("local_batch_size_nominal",
                             [](PyJob& j) { return j.job().plan().NominalLocalBatchSize(j.job().rank()); })
      .def_property_readonly("rank_epoch_size", [](PyJob& j) { return j.job().plan().RankEpochSize(j.job().rank()); })
      .def_property_readonly("transport", [](PyJob& j) { return std::string(j.job().transport()); })
      .def_property_readonly("staging_threads", [](PyJob& j) { return j.job().config().storage_classes.at(0).threads; })
      .def_property_readonly("classes", [](PyJob& j) { return FsStrList(j.job().source().classes()); })
      .def_property_readonly("relpaths", [](PyJob& j) { return FsStrList(j.job().source().names()); })
      .def_property_readonly("labels", [](PyJob& j) { return j.job().source().labels(); })
      .def_property_readonly("sizes", [](PyJob& j) { return j.job().source().sizes(); })
      .def_property_readonly("index_from_cache", [](PyJob& j) { return j.job().source().from_cache(); })
      .def_property_readonly("source_kind", [](PyJob& j) { return j.job().source().kind(); })
      .def_property_readonly("samples_root", [](PyJob& j) { return FsStr(j.job().source().SamplesRoot()); })
      .def_property_readonly("source_files_opened", [](PyJob& j) { return j.job().source().files_opened(); })
      .def_property_readonly("has_arrays", [](PyJob& j) { return j.job().has_arrays(); })
      .def_property_readonly("array_spec", [](PyJob& j) { return ArraySpecOf(j.job().source()); })
      .def_property_readonly("staging_capacity_bytes", [](PyJob& j) { return j.job().staging_capacity_bytes(); })
      .def_property_readonly("staging_peak_bytes", [](PyJob& j) { return j.job().staging_peak_bytes(); })
      .def_property_readonly("pfs_files_opened", &PyJob::pfs_files_opened)
      .def_property_readonly("has_transforms", [](PyJob& j) { return j.job().has_transforms(); })
      .def_property_readonly("sample_shape",
                             [](PyJob& j) {
                               const OutputShape& s = j.job().sample_shape();
                               return py::make_tuple(s.dims(), s.type == OutputType::kFloat32 ? "float32" : "uint8");
                             })
      .def_property_readonly("skipped_samples", [](PyJob& j) { return j.job().skipped_samples(); })
      .def_property_readonly("padded_samples", [](PyJob& j) { return j.job().padded_samples(); })
      .def_property_readonly("skipped_files", [](PyJob& j) { return FsStrList(j.job().SkippedFiles()); })
      .def_property_readonly("changed_samples", [](PyJob& j) { return j.job().changed_samples(); })
      .def_property_readonly("changed_files", [](PyJob& j) { return FsStrList(j.job().ChangedFiles()); })
      .def_property_readonly("batch_allocations", [](PyJob& j) { return j.job().batch_allocations(); })
      .def("metrics", [](PyJob& j) { return MetricsToPython(j.job().Metrics()); })
      .def("class_statuses", [](PyJob& j) { return ClassStatusesToPython(j.job().ClassStatuses()); })
      .def("warnings", [](PyJob& j) { return FsStrList(j.job().Warnings()); })
      .def_property_readonly("pfs_reads", [](PyJob& j) { return j.job().cache().pfs_reads(); })
      .def_property_readonly("pfs_bytes", [](PyJob& j) { return j.job().cache().pfs_bytes(); })
      .def_property_readonly("remote_reads", [](PyJob& j) { return j.job().cache().remote_reads(); })
      .def_property_readonly("requests_served", [](PyJob& j) { return j.job().cache().requests_served(); })
      .def_property_readonly("placement_exchange",
                             [](PyJob& j) { return ExchangeToPython(j.job().cache().exchange_stats()); })
      .def_property_readonly("startup", [](PyJob& j) { return StartupToPython(j.job().StartupPhases()); });
}

// _core.Job: opened on a _core.JobOptions (and the storage's throttle, which
// wraps the Env it reads through); its passes, positions and reports.
void BindJobClass(py::module_& m) {
  py::class_<PyJob> job(m, "Job");
  job.def(py::init(&OpenJob), py::arg("options"), py::arg("pfs_latency_s") = 0.0, py::arg("pfs_mbps") = 0.0,
          py::arg("failing_paths") = std::vector<std::string>{})
      .def("state", [](PyJob& j) { return j.job().State(); })
      .def("state_at", [](PyJob& j, int epoch, int64_t batches) { return j.job().StateAt(epoch, batches); },
           py::arg("epoch"), py::arg("batches"))
      .def("local_batch_size", [](PyJob& j, int64_t batch) { return j.job().plan().LocalBatchSize(j.job().rank(), batch); })
      .def("rank_epoch_samples",
           [](PyJob& j, int rank, int epoch) {
             const AccessPlan& p = j.job().plan();
             if (rank < 0 || rank >= p.options().world_size) throw py::value_error("rank out of range");
             if (epoch < 0 || epoch >= p.epochs()) throw py::value_error("epoch out of range");
             return FromInt64(p.RankEpochSamples(rank, epoch));
           })
      .def("begin_epoch", [](PyJob& j, int epoch) { j.job().BeginEpoch(epoch); })
      .def("next_batch", &NextBatch, py::arg("timeout_s") = py::none())
      .def("read_on_consumer",
           [](PyJob& j, int64_t sample) {
             SampleBuffer bytes;
             {
               py::gil_scoped_release release;
               bytes = j.job().ReadOnConsumer(sample);
             }
             return FromSample(std::move(bytes));
           },
           py::arg("sample"))
      .def("path",
           [](PyJob& j, int64_t sample) {
             if (sample < 0 || sample >= j.job().source().size()) throw py::index_error("sample out of range");
             return j.job().source().Describe(sample);  // as the C++ side names a sample in messages
           },
           py::arg("sample"))
      .def("tell_peers_stopped", [](PyJob& j, const std::string& message) { j.job().TellPeersStopped(message); })
      .def("close", [](PyJob& j) {
        py::gil_scoped_release release;
        j.Close();
      });
  BindJobReports(job);
}

}  // namespace

void BindJob(py::module_& m) {
  BindProcessFunctions(m);
  BindAccessPlan(m);
  BindJobOptions(m);
  BindJobClass(m);
}

}  // namespace hdmlp::python
