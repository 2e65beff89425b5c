// Config as plain Python data: the Python package only reads a config (to
// show it, or to check one before starting a job), so dicts and lists are
// enough and keep _core free of a mirrored class hierarchy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "hdmlp/config/config.h"
#include "hdmlp/config/cpu_budget.h"
#include "hdmlp/env/memory_limit.h"
#include "hdmlp/job/memory_check.h"

namespace py = pybind11;

namespace hdmlp::python {
namespace {

// `x` names the table's first column: "threads" for a storage class,
// "processes" for the PFS table, as in the config file.
py::list TableToList(const std::vector<BandwidthPoint>& table, const char* x) {
  py::list out;
  for (const BandwidthPoint& p : table) {
    py::dict row;
    row[x] = p.threads;
    row["mbps"] = p.mbps;
    out.append(row);
  }
  return out;
}

py::dict ConfigToDict(const Config& c) {
  py::list classes;
  for (const StorageClassConfig& s : c.storage_classes) {
    py::dict d;
    d["name"] = s.name;
    d["backend"] = s.backend;
    d["capacity_mb"] = s.capacity_mb;
    d["capacity_spec"] = s.capacity_spec;
    d["threads"] = s.threads;
    d["threads_auto"] = s.threads_auto;
    d["path"] = FsStr(s.path);
    d["bandwidth"] = TableToList(s.bandwidth, "threads");
    classes.append(d);
  }
  py::dict d;
  d["origin"] = FsStr(c.origin);
  d["b_c_mbps"] = c.b_c_mbps;
  d["b_fs_mbps"] = c.b_fs_mbps;
  d["distributed_threads"] = c.distributed_threads;
  d["checkpoint"] = c.checkpoint;
  d["checkpoint_path"] = FsStr(c.checkpoint_path);
  d["storage_classes"] = classes;
  d["pfs_bandwidth"] = TableToList(c.pfs_bandwidth, "processes");
  d["description"] = FsStr(c.Describe());
  return d;
}

}  // namespace

void BindConfig(py::module_& m) {
  m.def(
      "load_config", [](const std::string& path) { return ConfigToDict(Config::LoadFile(path)); },
      py::arg("path"),
      "Load and validate a libconfig file; returns a dict of the resolved settings.\n"
      "Raises FileNotFoundError if it is missing, ConfigError (a ValueError) if invalid.");
  m.def(
      "load_config_string",
      [](const std::string& text, const std::string& origin) {
        return ConfigToDict(Config::LoadString(text, origin));
      },
      py::arg("text"), py::arg("origin") = "<string>",
      "Like load_config, from the text of a config; `origin` labels error messages.");
  m.def(
      "cpu_budget",
      []() {
        const CpuBudget b = ReadCpuBudget();
        py::dict d;
        d["cpus"] = b.cpus;
        d["quota_cpus"] = b.quota_cpus;
        d["quota_source"] = b.quota_source;
        d["usable_cpus"] = b.UsableCpus();
        d["description"] = b.Describe();
        return d;
      },
      "The CPUs this process may use: its affinity mask and its cgroup's CPU quota (what threads = \"auto\" "
      "resolves to).");
  m.def(
      "memory_limit",
      []() {
        const MemoryLimit l = ReadMemoryLimit();
        py::dict d;
        d["available"] = l.available;
        d["limit"] = l.limit;
        d["used"] = l.used;
        d["what"] = l.what;
        d["raise"] = l.raise;
        d["description"] = l.Describe();
        return d;
      },
      "How much more memory this process may take (available, -1: no limit seen) and which limit says so: "
      "RLIMIT_AS, its cgroup's memory limit or MemAvailable, the tightest (env/memory_limit.h).");
  m.def("format_bytes", &FormatBytes, py::arg("bytes"), "3221225472 -> '3.0 GiB'.");
  m.def(
      "batch_memory_error",
      [](const std::string& sample, const std::string& row_kind, int64_t row_bytes, int64_t read_bytes, int64_t batch,
         int64_t batches, int world_size, bool per_rank, const std::string& smaller) {
        BatchMemoryNeed need;
        need.sample = sample, need.row_kind = row_kind, need.row_bytes = row_bytes, need.read_bytes = read_bytes;
        need.batch = batch, need.batches = batches, need.world_size = world_size, need.per_rank = per_rank;
        need.smaller = smaller;
        return BatchMemoryError(need, ReadMemoryLimit());
      },
      py::arg("sample"), py::arg("row_kind"), py::arg("row_bytes"), py::arg("read_bytes"), py::arg("batch"),
      py::arg("batches"), py::arg("world_size"), py::arg("per_rank"), py::arg("smaller") = "store smaller samples",
      "The Job's message for batches that cannot fit in the memory this process may still take, or '' "
      "(job/memory_check.h).");
  m.def("user_cache_dir", [] { return FsStr(UserCacheDir()); },
        "hdmlp's per-user cache directory ($HDMLP_CACHE_DIR, $XDG_CACHE_HOME/hdmlp or "
        "~/.cache/hdmlp); not created.");
}

}  // namespace hdmlp::python
