// The simulator and calibration (issue #7) as plain functions returning dicts;
// hdmlp/simulate.py wraps them with typed, documented Python functions.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "hdmlp/config/config.h"
#include "hdmlp/env/env.h"
#include "hdmlp/errors.h"
#include "hdmlp/sim/calibration.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/policy.h"
#include "hdmlp/sim/simulator.h"
#include "hdmlp/source/source.h"

namespace py = pybind11;

namespace hdmlp::python {
namespace {

py::dict ResultToDict(const sim::SimulationResult& r) {
  py::dict bytes;
  for (const auto& [name, n] : r.bytes) bytes[py::str(name)] = n;
  py::dict d;
  d["seconds"] = r.seconds;
  d["stall_seconds"] = r.stall_seconds;
  d["compute_seconds"] = r.compute_seconds;
  d["startup_seconds"] = r.startup_seconds;
  d["epochs"] = r.epoch_seconds;
  d["bytes"] = bytes;
  d["pfs_read_bytes"] = r.pfs_read_bytes;
  d["cached_samples"] = r.cached_samples;
  d["events"] = r.events;
  d["planning_seconds"] = r.planning_seconds;
  d["simulation_seconds"] = r.simulation_seconds;
  return d;
}

py::dict Simulate(const std::string& config_path, int nodes, int64_t batch_size, int epochs, double compute_mbps,
                  double preprocess_mbps, const std::vector<std::string>& policies, uint64_t seed, int64_t samples,
                  double sample_mb, double sample_std_mb, const std::string& dataset, int threads,
                  const std::string& model, const std::vector<std::string>& without_artifacts) {
  sim::SimulationOptions options;
  options.threads = threads;
  options.reading = sim::ParseReading(model);
  for (const std::string& name : without_artifacts) {
    if (name == "full-class-rate") {
      options.artifacts.full_class_rate_per_thread = false;
    } else if (name == "locality-never-reorders") {
      options.artifacts.locality_never_reorders = false;
    } else if (name == "staging-copies-lower-shards") {
      options.artifacts.parallel_staging_copies_lower_shards = false;
    } else {
      throw InvalidArgumentError("--without: unknown thesis artifact \"" + name +
                                 "\"; valid: full-class-rate, locality-never-reorders, staging-copies-lower-shards");
    }
  }
  const Config config = Config::LoadFile(config_path);
  std::vector<sim::Policy> chosen;
  for (const std::string& name : policies) {
    if (name == "all") {
      chosen = sim::AllPolicies();
      break;
    }
    chosen.push_back(sim::ParsePolicy(name));
  }
  if (chosen.empty()) throw InvalidArgumentError("--policy: name at least one policy, or all");
  sim::Workload w;
  w.nodes = nodes;
  w.batch_size = batch_size;
  w.epochs = epochs;
  w.compute_mbps = compute_mbps;
  w.preprocess_mbps = preprocess_mbps;
  w.seed = seed;
  py::dict out;
  py::dict results;
  {
    py::gil_scoped_release release;
    if (!dataset.empty()) {
      w.sizes = OpenSource(Env::Default(), dataset)->sizes();  // any format
    } else {
      w.sizes = sim::NormalSampleSizes(samples, sample_mb, sample_std_mb, seed);
    }
    sim::ValidateWorkload(w);
  }
  int64_t dataset_bytes = 0;
  for (int64_t s : w.sizes) dataset_bytes += s;
  for (sim::Policy p : chosen) {
    sim::SimulationResult r;
    {
      py::gil_scoped_release release;
      r = sim::Simulate(config, w, p, options);
    }
    results[py::str(r.policy)] = ResultToDict(r);
  }
  out["policies"] = results;
  out["samples"] = static_cast<int64_t>(w.sizes.size());
  out["dataset_bytes"] = dataset_bytes;
  return out;
}

double ReadBandwidth(const std::vector<std::string>& paths, int threads, double latency_s, double mbps,
                     double min_seconds) {
  py::gil_scoped_release release;
  if (latency_s > 0 || mbps > 0) {
    ThrottledEnv::Options throttle;
    throttle.read_latency_s = latency_s;
    throttle.read_bandwidth_mbps = mbps;
    ThrottledEnv env(Env::Default(), throttle);
    return sim::MeasureReadBandwidth(&env, paths, threads, min_seconds);
  }
  return sim::MeasureReadBandwidth(Env::Default(), paths, threads, min_seconds);
}

}  // namespace

void BindSim(py::module_& m) {
  m.def("simulate", &Simulate, py::arg("config_path"), py::arg("nodes"), py::arg("batch_size"), py::arg("epochs"),
        py::arg("compute_mbps"), py::arg("preprocess_mbps"), py::arg("policies"), py::arg("seed"),
        py::arg("samples"), py::arg("sample_mb"), py::arg("sample_std_mb"), py::arg("dataset"),
        py::arg("threads") = 0, py::arg("model") = "physical",
        py::arg("without_artifacts") = std::vector<std::string>{},
        "Simulate a job under the named policies; returns {'policies': {name: result}, 'samples', "
        "'dataset_bytes'}. Sizes come from `dataset` (an ImageFolder) if non-empty, else are drawn.");
  m.def("policy_names", [] {
    std::vector<std::string> names;
    for (sim::Policy p : sim::AllPolicies()) names.emplace_back(sim::PolicyName(p));
    return names;
  });
  m.def(
      "measure_memory_bandwidth",
      [](int threads, int64_t bytes_per_thread) {
        py::gil_scoped_release release;
        return sim::MeasureMemoryBandwidth(threads, bytes_per_thread);
      },
      py::arg("threads"), py::arg("bytes_per_thread"), "Aggregate memcpy MB/s with `threads` threads.");
  m.def("measure_read_bandwidth", &ReadBandwidth, py::arg("paths"), py::arg("threads"), py::arg("latency_s") = 0.0,
        py::arg("mbps") = 0.0, py::arg("min_seconds") = 0.0,
        "Aggregate MB/s reading every file (round-robin until min_seconds) with `threads` threads, optionally\n"
        "through a throttled store.");
}

}  // namespace hdmlp::python
