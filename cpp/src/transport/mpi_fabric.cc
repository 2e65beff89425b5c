#include "hdmlp/transport/mpi_fabric.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "hdmlp/errors.h"
#include "hdmlp/transport/mpi_launcher.h"

namespace hdmlp {
namespace {

std::mutex g_mu;
MpiFabric* g_fabric = nullptr;  // lives until the process ends: MPI's finalisation at exit uses it
std::vector<std::string> g_search_dirs;
std::set<std::string> g_described;  // libraries loaded (locally) only to describe them

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

// The file a loaded library's symbol comes from ("" when unknown).
std::string FileOf(void* symbol) {
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

// Libraries already loaded in this process that define MPI_Init_thread themselves.
std::vector<std::string> LoadedMpiLibraries() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::string base = BaseName(name);
        if (base.rfind("libmpi", 0) == 0 && base.find(".so") != std::string::npos) {
          static_cast<std::vector<std::string>*>(data)->push_back(name);
        }
        return 0;
      },
      &names);
  std::vector<std::string> found;
  for (const auto& name : names) {
    if (g_described.count(name) > 0) continue;
    void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    if (FileOf(dlsym(h, "MPI_Init_thread")) == name) found.push_back(name);
    dlclose(h);
  }
  return found;
}

// The ABI of a loaded MPI library, from its name and its symbols.
std::string AbiOf(void* handle, const std::string& path) {
  if (BaseName(path).rfind("libmpi_abi", 0) == 0) return "mpiabi";
  if (dlsym(handle, "ompi_mpi_comm_world") != nullptr) return "openmpi";
  using AbiVersion = int (*)(int*, int*);
  if (auto abi_version = reinterpret_cast<AbiVersion>(dlsym(handle, "MPI_Abi_get_version"))) {
    int major = 0, minor = 0;
    if (abi_version(&major, &minor) == 0 && major > 0) return "mpiabi";
  }
  return "mpich";
}

// The library's own name and version, from MPI_Get_library_version (callable
// before MPI_Init): its first line, spaces collapsed.
std::string LibraryVersion(void* handle) {
  using GetVersion = int (*)(char*, int*);
  auto get = reinterpret_cast<GetVersion>(dlsym(handle, "MPI_Get_library_version"));
  if (get == nullptr) return "an MPI library";
  std::vector<char> text(1 << 16, '\0');  // above every MPI's MPI_MAX_LIBRARY_VERSION_STRING
  int length = 0;
  if (get(text.data(), &length) != 0) return "an MPI library";
  // The length may count the terminating NUL (Open MPI's does).
  std::string line(text.data(), strnlen(text.data(), static_cast<size_t>(std::clamp(length, 0, static_cast<int>(text.size()) - 1))));
  line = line.substr(0, line.find('\n'));
  line = line.substr(0, line.find(", ident:"));  // Open MPI's build identifiers after its version and package
  std::string out;
  for (char c : line) {
    if (c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() > 120) out = out.substr(0, 117) + "...";
  return out.empty() ? "an MPI library" : out;
}

// Where a loaded library is on disk, for messages.
std::string PathOf(void* handle, const std::string& fallback) {
  const std::string file = FileOf(dlsym(handle, "MPI_Init_thread"));
  return file.empty() ? fallback : file;
}

struct Choice {
  void* handle = nullptr;
  std::string path;
  std::string abi;
  std::string why;
};

struct Attempts {
  std::vector<std::string> lines;
  void Add(const std::string& what, const std::string& error) { lines.push_back(what + ": " + error); }
  std::string Text() const {
    std::string s;
    for (const auto& l : lines) s += "\n  " + l;
    return s;
  }
};

std::string JoinAbis(const std::vector<std::string>& abis) {
  std::string s;
  for (size_t i = 0; i < abis.size(); ++i) s += (i == 0 ? "" : i + 1 == abis.size() ? " or " : ", ") + DescribeMpiAbi(abis[i]);
  return s;
}

// Folders looked in before the dynamic loader's own search: the Python environment's lib folders
// (SetSearchDirs), Intel MPI's, and LD_LIBRARY_PATH's (so that a library the user put first there wins
// over another ABI's in the system's folders).
std::vector<std::string> SearchDirs() {
  std::vector<std::string> dirs = g_search_dirs;
  if (const char* impi = std::getenv("I_MPI_ROOT"); impi != nullptr && impi[0] != '\0') {
    dirs.push_back(std::string(impi) + "/lib");
    dirs.push_back(std::string(impi) + "/lib/release");
  }
  if (const char* path = std::getenv("LD_LIBRARY_PATH"); path != nullptr) {
    std::string p = path;
    for (size_t at = 0; at <= p.size();) {
      const size_t colon = std::min(p.find(':', at), p.size());
      if (colon > at) dirs.push_back(p.substr(at, colon - at));
      at = colon + 1;
    }
  }
  return dirs;
}

// Loads `lib` and keeps it when it is an MPI library of `abi`.
Choice TryLibrary(const std::string& lib, const std::string& abi, int mode, Attempts* attempts) {
  dlerror();
  void* h = dlopen(lib.c_str(), mode);
  if (h == nullptr) {
    attempts->Add(lib, DlError());
    return {};
  }
  if (dlsym(h, "MPI_Init_thread") == nullptr) {
    attempts->Add(lib, "not an MPI library (no MPI_Init_thread)");
    dlclose(h);
    return {};
  }
  Choice c;
  c.handle = h;
  c.path = PathOf(h, lib);
  c.abi = AbiOf(h, c.path);
  if (c.abi != abi) {
    attempts->Add(lib, "its ABI is " + c.abi + ", not " + abi);
    dlclose(h);
    return {};
  }
  return c;
}

// The first library of `abis` (in that order) in each search folder in turn, then by the dynamic loader.
Choice TryAbis(const std::vector<std::string>& abis, int mode, Attempts* attempts) {
  for (const auto& dir : SearchDirs()) {
    for (const auto& abi : abis) {
      for (const auto& name : MpiLibraryNames(abi)) {
        if (!IsFile(dir + "/" + name)) continue;
        Choice c = TryLibrary(dir + "/" + name, abi, mode, attempts);
        if (c.handle == nullptr) continue;
        c.why = "its folder " + dir;
        return c;
      }
    }
  }
  for (const auto& abi : abis) {
    for (const auto& name : MpiLibraryNames(abi)) {
      Choice c = TryLibrary(name, abi, mode, attempts);
      if (c.handle == nullptr) continue;
      c.why = "the dynamic loader's search";
      return c;
    }
  }
  return {};
}

// Picks the process's MPI library (module comment, steps 1 to 4). describe:
// only find out which (loaded locally, not for MPI's use).
Choice Choose(bool describe) {
  const int mode = describe ? (RTLD_LAZY | RTLD_LOCAL) : (RTLD_LAZY | RTLD_GLOBAL);
  const MpiLauncher launcher = DetectMpiLauncher();
  const auto launcher_takes = [&](const std::string& abi) {
    return !launcher.present || std::find(launcher.abis.begin(), launcher.abis.end(), abi) != launcher.abis.end();
  };
  const auto refuse = [&](const Choice& c, const std::string& version) {
    throw IOError("hdmlp: this process was started by " + launcher.name + ", whose job only " +
                  JoinAbis(launcher.abis) + " can join, but " + c.why + " is " + version + " (" + c.path +
                  ", " + DescribeMpiAbi(c.abi) + "). Use the launcher of the MPI loaded (for " + c.abi +
                  ": " + (c.abi == "openmpi" ? "Open MPI's mpirun" : "its mpiexec or srun --mpi=pmi2/pmix") +
                  "), or load the launcher's MPI instead (unset HDMLP_MPI_LIBRARY or set it to that MPI's libmpi)");
  };
  // 1. Already loaded.
  if (const auto loaded = LoadedMpiLibraries(); !loaded.empty()) {
    Choice c;
    c.path = loaded.front();
    c.handle = dlopen(c.path.c_str(), describe ? (RTLD_LAZY | RTLD_NOLOAD) : (RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL));
    if (c.handle != nullptr) {
      c.abi = AbiOf(c.handle, c.path);
      c.why = "the MPI library already loaded in this process (by mpi4py, torch or the application)";
      if (!launcher_takes(c.abi)) refuse(c, LibraryVersion(c.handle));
      return c;
    }
  }
  // 2. HDMLP_MPI_LIBRARY: a path, or a name looked for in the search folders, then by the dynamic loader.
  if (const char* given = std::getenv("HDMLP_MPI_LIBRARY"); given != nullptr && given[0] != '\0') {
    std::string file = given;
    if (file.find('/') == std::string::npos) {
      for (const auto& dir : SearchDirs()) {
        if (IsFile(dir + "/" + file)) {
          file = dir + "/" + file;
          break;
        }
      }
    }
    dlerror();
    Choice c;
    c.handle = dlopen(file.c_str(), mode);
    if (c.handle == nullptr) {
      throw IOError(std::string("hdmlp: HDMLP_MPI_LIBRARY=") + given + " cannot be loaded: " + DlError() +
                    ". Set it to the path of your MPI's libmpi (e.g. /usr/lib/x86_64-linux-gnu/libmpi.so.12), or "
                    "to a name the dynamic loader finds on LD_LIBRARY_PATH, or unset it to let hdmlp look");
    }
    if (dlsym(c.handle, "MPI_Init_thread") == nullptr) {
      throw IOError(std::string("hdmlp: HDMLP_MPI_LIBRARY=") + given +
                    " is not an MPI library (it has no MPI_Init_thread): set it to your MPI's libmpi");
    }
    c.path = PathOf(c.handle, file);
    c.abi = AbiOf(c.handle, c.path);
    c.why = std::string("HDMLP_MPI_LIBRARY=") + given;
    if (!launcher_takes(c.abi)) refuse(c, LibraryVersion(c.handle));
    return c;
  }
  // 3 and 4. The launcher's ABIs (or all), in the search folders and by the dynamic loader.
  Attempts attempts;
  if (Choice c = TryAbis(launcher.present ? launcher.abis : MpiAbis(), mode, &attempts); c.handle != nullptr) {
    if (launcher.present) c.why = "the launcher's environment (" + launcher.name + ") and " + c.why;
    return c;
  }
  if (launcher.present) {
    // Another ABI that is here but cannot join this launcher's job: name both.
    for (const auto& abi : MpiAbis()) {
      if (launcher_takes(abi)) continue;
      Attempts ignored;
      Choice other = TryAbis({abi}, RTLD_LAZY | RTLD_LOCAL, &ignored);
      if (other.handle == nullptr) continue;
      g_described.insert(other.path);
      throw IOError("hdmlp: this process was started by " + launcher.name + ", whose job only " +
                    JoinAbis(launcher.abis) + " can join, but the only MPI hdmlp can load here is " +
                    LibraryVersion(other.handle) + " (" + other.path + ", " + DescribeMpiAbi(abi) +
                    "), which would start as a world of one. Either make the launcher's MPI loadable (" +
                    InstallMpiHint(launcher.abis.front()) + "; or set HDMLP_MPI_LIBRARY to its libmpi), or start "
                    "the job with the launcher of the MPI that is here (" +
                    (abi == "openmpi" ? "Open MPI's mpirun" : "that MPI's mpiexec") + "). Tried:" + attempts.Text());
    }
  }
  throw IOError(
      std::string("hdmlp: no MPI library can be loaded") +
      (launcher.present ? ", but this process was started by " + launcher.name +
                              (launcher.world_size > 1 ? " as one of " + std::to_string(launcher.world_size) + " ranks" : "")
                        : std::string()) +
      ". Install " + InstallMpiHint(launcher.present ? launcher.abis.front() : "openmpi") +
      (launcher.present ? "" : "; or " + InstallMpiHint("mpich")) +
      "; or set HDMLP_MPI_LIBRARY to your MPI's libmpi. Without MPI, start the ranks with torchrun (or set RANK and "
      "WORLD_SIZE) and HDMLP_NO_MPI=1: each rank then reads its share without peers' caches. Tried:" +
      attempts.Text());
}

std::string SelfPath() {
  const std::string file = FileOf(reinterpret_cast<void*>(&MpiFabric::ModuleDir));
  if (!file.empty() && file.find('/') != std::string::npos) return file;
  // The main program (a test or benchmark binary) has no name in dladdr's answer.
  std::vector<char> buf(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : file;
}

}  // namespace

std::string MpiFabric::ModuleDir() {
  if (const char* dir = std::getenv("HDMLP_MPI_MODULE_DIR"); dir != nullptr && dir[0] != '\0') return dir;
  const std::string self = SelfPath();
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/_mpi";
}

std::vector<std::string> MpiFabric::ModuleAbis() {
  std::vector<std::string> abis;
  for (const auto& abi : MpiAbis()) {
    if (IsFile(ModuleDir() + "/" + abi + ".so")) abis.push_back(abi);
  }
  return abis;
}

void MpiFabric::SetSearchDirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_search_dirs = std::move(dirs);
}

MpiFabric* MpiFabric::IfLoaded() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_fabric;
}

bool MpiFabric::LoadedAndInitialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fabric != nullptr) return g_fabric->Initialized();
  using Flag = int (*)(int*);
  for (const auto& name : LoadedMpiLibraries()) {
    void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    int initialized = 0;
    if (auto fn = reinterpret_cast<Flag>(dlsym(h, "MPI_Initialized"))) fn(&initialized);
    dlclose(h);
    if (initialized) return true;
  }
  return false;
}

MpiFabric* MpiFabric::Get() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fabric != nullptr) return g_fabric;
  if (NoMpiRequested()) {
    throw IOError("hdmlp: MPI is turned off in this process (HDMLP_NO_MPI=" + std::string(std::getenv("HDMLP_NO_MPI")) +
                  "); unset HDMLP_NO_MPI to use it");
  }
  Choice c = Choose(/*describe=*/false);
  const std::string version = LibraryVersion(c.handle);
  const std::string module_path = ModuleDir() + "/" + c.abi + ".so";
  if (!IsFile(module_path)) {
    std::string have;
    for (const auto& abi : ModuleAbis()) have += (have.empty() ? "" : ", ") + abi;
    throw IOError("hdmlp: the MPI chosen (" + version + ", " + c.path + ", from " + c.why + ") has " +
                  DescribeMpiAbi(c.abi) + ", and this build of hdmlp has no module for that ABI (" + module_path +
                  " is missing; it has: " + (have.empty() ? "none" : have) +
                  "). Install a wheel of hdmlp (it has every ABI's module), or rebuild it from source with that "
                  "MPI's headers (docs/install.md)");
  }
  dlerror();
  void* module = dlopen(module_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    throw IOError("hdmlp: cannot load its MPI module " + module_path + " against " + version + " (" + c.path +
                  "): " + DlError() + ". The library may be older than MPI 3 (hdmlp needs MPI_Improbe, "
                  "MPI_Comm_idup): load a newer one (HDMLP_MPI_LIBRARY)");
  }
  auto entry = reinterpret_cast<hdmlp_mpi_module_entry>(dlsym(module, HDMLP_MPI_MODULE_ENTRY));
  const hdmlp_mpi_module* table = entry != nullptr ? entry() : nullptr;
  if (table == nullptr || table->version != HDMLP_MPI_MODULE_VERSION || table->size < sizeof(hdmlp_mpi_module)) {
    throw IOError("hdmlp: " + module_path + " is not a module of this hdmlp version (its table is version " +
                  std::to_string(table != nullptr ? table->version : 0) + ", this hdmlp needs " +
                  std::to_string(HDMLP_MPI_MODULE_VERSION) + "): reinstall hdmlp");
  }
  FabricInfo info;
  info.library = version;
  info.abi = c.abi;
  info.path = c.path;
  info.why = c.why;
  info.module = module_path + " (built against " + table->header + ")";
  g_fabric = new MpiFabric(table, std::move(info));
  return g_fabric;
}

std::string MpiFabric::Describe() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fabric != nullptr) {
    const FabricInfo& i = g_fabric->info_;
    return i.library + " (" + i.path + ", ABI " + i.abi + "; chosen by " + i.why + ")";
  }
  if (NoMpiRequested()) return "off (HDMLP_NO_MPI is set)";
  try {
    Choice c = Choose(/*describe=*/true);
    if (!c.why.empty() && c.why.rfind("the MPI library already loaded", 0) != 0) g_described.insert(c.path);
    return "not loaded yet; would load " + LibraryVersion(c.handle) + " (" + c.path + ", ABI " + c.abi +
           "; chosen by " + c.why + ")";
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (why.rfind("hdmlp: ", 0) == 0) why = why.substr(7);
    for (size_t at; (at = why.find("\n  ")) != std::string::npos;) why.replace(at, 3, " ");  // one line
    return "none loadable: " + why;
  }
}

void MpiFabric::Check(int rc, const char* what) {
  if (rc != 0) throw IOError(std::string(what) + " failed: " + ErrorText(rc) + " (" + info_.library + ")");
}

bool MpiFabric::Initialized() {
  int flag = 0;
  m_->initialized(&flag);
  return flag != 0;
}

bool MpiFabric::Finalized() {
  int flag = 0;
  m_->finalized(&flag);
  return flag != 0;
}

int MpiFabric::InitThreadMultiple() {
  int provided = 0;
  Check(m_->init_thread(3, &provided), "MPI_Init_thread");
  return provided;
}

int MpiFabric::ThreadLevel() {
  int provided = 0;
  m_->query_thread(&provided);
  return provided;
}

int MpiFabric::WorldRank() {
  int rank = 0;
  m_->world_rank(&rank);
  return rank;
}

void MpiFabric::AbortWorld(int code) { m_->abort_world(code); }
void MpiFabric::Finalize() { m_->finalize(); }

std::string MpiFabric::ErrorText(int code) {
  char text[1024] = {0};
  if (m_->error_text(code, text, sizeof text) != 0 || text[0] == '\0') return "MPI error " + std::to_string(code);
  return text;
}

void MpiFabric::DupWorld(FabricHandle* comm, FabricHandle* request) {
  Check(m_->comm_idup_world(comm, request), "MPI_Comm_idup");
}

void MpiFabric::RankAndSize(FabricHandle comm, int* rank, int* size) {
  Check(m_->comm_rank_size(comm, rank, size), "MPI_Comm_rank/MPI_Comm_size");
}

void MpiFabric::ReturnErrors(FabricHandle comm) { m_->comm_errors_return(comm); }

}  // namespace hdmlp
