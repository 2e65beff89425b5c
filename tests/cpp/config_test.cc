#include "hdmlp/config/config.h"
#include "hdmlp/config/cpu_budget.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

namespace fs = std::filesystem;

// The shipped configs live in the source tree; ctest runs from the build dir,
// a manual run usually from the repository root.
std::string ShippedConfig(const std::string& name) {
#ifdef HDMLP_SOURCE_DIR
  return std::string(HDMLP_SOURCE_DIR) + "/configs/" + name;
#else
  return "configs/" + name;
#endif
}

#define EXPECT_CONTAINS(haystack, needle)                                         \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)               \
      << "expected to find: " << (needle) << "\nin: " << (haystack)

// Loads `text` expecting a ConfigError; returns its message ("" after
// recording a failure if something else happened).
std::string LoadFileError(const std::string& path) {
  try {
    Config::LoadFile(path);
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message: " << e.what();
    return "";
  }
  ADD_FAILURE() << "loaded without error: " << path;
  return "";
}

std::string LoadError(const std::string& text) {
  try {
    Config::LoadString(text, "test.cfg");
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message: " << e.what();
    return "";
  }
  ADD_FAILURE() << "loaded without error:\n" << text;
  return "";
}

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hdmlp_config_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
    if (path_.empty()) ADD_FAILURE() << "mkdtemp failed";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A staging class, then whatever the test appends.
const char* kStaging = "{ capacity = 64; threads = 2; }";

std::string WithClasses(const std::string& extra_classes, const std::string& top = "") {
  return top + "\nstorage_classes = ( " + kStaging +
         (extra_classes.empty() ? "" : ",\n" + extra_classes) + " );\n";
}

// ---------------------------------------------------------------- valid input

TEST(ConfigTest, FifosAndDevicesAreRefusedNotWaitedFor) {
  TempDir tmp;
  const std::string fifo = tmp.path() + "/pipe.cfg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // The config itself, or a file it includes: fopen would wait for a writer forever.
  std::string msg = LoadFileError(fifo);
  EXPECT_CONTAINS(msg, "FIFO");
  {
    std::ofstream(tmp.path() + "/main.cfg") << "@include \"pipe.cfg\"\nstorage_classes = ( { capacity = 1; threads = 1; } );\n";
    std::ofstream(tmp.path() + "/dev.cfg") << "b_c = 5;\n  @include \"/dev/zero\"\n";
    std::ofstream(tmp.path() + "/nested.cfg") << "@include \"main.cfg\"\n";
    std::ofstream(tmp.path() + "/ok_part.cfg") << "b_c = 7;\n";
    std::ofstream(tmp.path() + "/ok.cfg") << "@include \"ok_part.cfg\"\nstorage_classes = ( { capacity = 1; threads = 1; } );\n";
  }
  msg = LoadFileError(tmp.path() + "/main.cfg");
  EXPECT_CONTAINS(msg, "main.cfg:1: @include \"pipe.cfg\"");
  EXPECT_CONTAINS(msg, "FIFO");
  EXPECT_CONTAINS(LoadFileError(tmp.path() + "/nested.cfg"), "FIFO");
  // libconfig resolves even "/dev/zero" against a file's folder; a string's
  // includes are taken as written.
  LoadFileError(tmp.path() + "/dev.cfg");
  EXPECT_CONTAINS(LoadError("@include \"/dev/zero\"\n"), "character device");
  EXPECT_EQ(Config::LoadFile(tmp.path() + "/ok.cfg").b_c_mbps, 7);
}

TEST(ConfigTest, CapacitiesBeyondAnyMachineAreRefused) {
  // 1e300 MB would overflow the byte count (undefined behaviour before).
  for (const char* big : {"1e300", "9e12", "1e13"}) {
    try {
      Config::LoadString(std::string("storage_classes = ( { capacity = ") + big + "; threads = 3; } );");
      FAIL() << big << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("at most 1e+12"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(Config::LoadString("storage_classes = ( { capacity = 1e12; threads = 3; } );"));
}

TEST(ConfigTest, MinimalConfigGetsDefaults) {
  Config c = Config::LoadString("storage_classes = ( { capacity = 100; threads = 3; } );");
  EXPECT_EQ(c.b_c_mbps, 10000);
  EXPECT_EQ(c.b_fs_mbps, 2000);
  EXPECT_EQ(c.distributed_threads, 2);
  EXPECT_TRUE(c.checkpoint);  // the index cache is on unless switched off
  EXPECT_EQ(c.checkpoint_path, ExpandPath(UserCacheDir()));
  EXPECT_TRUE(c.pfs_bandwidth.empty());
  EXPECT_EQ(c.origin, "<string>");
  ASSERT_EQ(c.storage_classes.size(), 1u);
  const StorageClassConfig& s = c.storage_classes[0];
  EXPECT_EQ(s.name, "staging");
  EXPECT_EQ(s.backend, "staging");
  EXPECT_EQ(s.capacity_mb, 100);
  EXPECT_EQ(s.threads, 3);
  EXPECT_TRUE(s.path.empty());
  EXPECT_TRUE(s.bandwidth.empty());
}

TEST(ConfigTest, ReadsEveryKey) {
  TempDir tmp;
  Config c = Config::LoadString(R"(
    b_c = 123.5;
    b_fs = 77;
    distributed_threads = 5;
    checkpoint = true;
    checkpoint_path = ")" + tmp.path() + R"(/ckpt";
    storage_classes = (
      { backend = "staging"; capacity = 10.5; threads = 1;
        bandwidth = ( { threads = 1; bw = 100; }, { threads = 4; bw = 250.5; } ); },
      { backend = "memory"; capacity = 20; threads = 2; backend_options = {}; },
      { backend = "filesystem"; capacity = 30; threads = 4;
        backend_options = { path = ")" + tmp.path() + R"(/store/"; }; }
    );
    pfs_bandwidth = ( { processes = 1; bw = 900; }, { processes = 8; bw = 5000.0; } );
  )", "inline");
  EXPECT_EQ(c.origin, "inline");
  EXPECT_EQ(c.b_c_mbps, 123.5);
  EXPECT_EQ(c.b_fs_mbps, 77);
  EXPECT_EQ(c.distributed_threads, 5);
  EXPECT_TRUE(c.checkpoint);
  EXPECT_EQ(c.checkpoint_path, tmp.path() + "/ckpt");
  ASSERT_EQ(c.storage_classes.size(), 3u);
  EXPECT_EQ(c.storage_classes[0].capacity_mb, 10.5);
  ASSERT_EQ(c.storage_classes[0].bandwidth.size(), 2u);
  EXPECT_EQ(c.storage_classes[0].bandwidth[1].threads, 4);
  EXPECT_EQ(c.storage_classes[0].bandwidth[1].mbps, 250.5);
  EXPECT_EQ(c.storage_classes[1].name, "memory");
  EXPECT_EQ(c.storage_classes[1].backend, "memory");
  EXPECT_EQ(c.storage_classes[1].threads, 2);
  EXPECT_EQ(c.storage_classes[2].name, "filesystem");
  EXPECT_EQ(c.storage_classes[2].path, tmp.path() + "/store");  // Trailing '/' dropped.
  EXPECT_EQ(c.storage_classes[2].capacity_mb, 30);
  ASSERT_EQ(c.pfs_bandwidth.size(), 2u);
  EXPECT_EQ(c.pfs_bandwidth[0].threads, 1);
  EXPECT_EQ(c.pfs_bandwidth[1].threads, 8);
  EXPECT_EQ(c.pfs_bandwidth[1].mbps, 5000);
}

TEST(ConfigTest, AcceptsColonsAndMissingSemicolonsAsInThePaper) {
  Config c = Config::LoadString(
      "b_c = 10 # comment\n"
      "storage_classes: ( {\n capacity: 1024\n threads: 4\n} )\n");
  EXPECT_EQ(c.b_c_mbps, 10);
  EXPECT_EQ(c.storage_classes[0].capacity_mb, 1024);
}

TEST(ConfigTest, LargeIntegersAreNumbers) {
  // libconfig 1.5 needs the L suffix above 2^31-1 (else it truncates).
  Config c = Config::LoadString(WithClasses("", "b_c = 5000000000L;"));
  EXPECT_EQ(c.b_c_mbps, 5e9);
}

TEST(ConfigTest, EmptyBandwidthTablesMeanUnknown) {
  Config c = Config::LoadString(
      "storage_classes = ( { capacity = 1; threads = 1; bandwidth = (); } );\n"
      "pfs_bandwidth = [];");
  EXPECT_TRUE(c.storage_classes[0].bandwidth.empty());
  EXPECT_TRUE(c.pfs_bandwidth.empty());
}

TEST(ConfigTest, NamesAreUniquePerBackend) {
  Config c = Config::LoadString(WithClasses(R"(
      { backend = "memory"; capacity = 1; threads = 1; },
      { backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = "/tmp/a"; }; },
      { backend = "memory"; capacity = 1; threads = 1; },
      { backend = "memory"; capacity = 1; threads = 1; },
      { backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = "/tmp/b"; }; }
  )"));
  std::vector<std::string> names;
  for (const auto& s : c.storage_classes) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"staging", "memory", "filesystem", "memory_2",
                                             "memory_3", "filesystem_2"}));
}

TEST(ConfigTest, DescribeMentionsEveryClass) {
  Config c = Config::LoadString(WithClasses(
      R"({ backend = "filesystem"; capacity = 5; threads = 1; backend_options = { path = "/tmp/x"; }; })"));
  std::string d = c.Describe();
  EXPECT_CONTAINS(d, "<string>");
  EXPECT_CONTAINS(d, "staging");
  EXPECT_CONTAINS(d, "filesystem");
  EXPECT_CONTAINS(d, "/tmp/x");
  EXPECT_NE(d.back(), '\n');
}

// ------------------------------------------------------------------- percents

// MemAvailable and free disk space move while tests (and everything else on
// the machine) run; the resolved share must lie within N% of the range seen
// around the load, with some slack.
void ExpectShare(double got, double percent, double before, double after) {
  double lo = std::min(before, after) * percent / 100 * 0.9;
  double hi = std::max(before, after) * percent / 100 * 1.1;
  EXPECT_GE(got, lo) << percent << "%";
  EXPECT_LE(got, hi) << percent << "%";
}

TEST(ConfigTest, PercentOfAvailableMemory) {
  double before = AvailableMemoryMb();
  ASSERT_GT(before, 0);
  Config c = Config::LoadString(R"(storage_classes = (
      { capacity = "10%"; threads = 1; },
      { backend = "memory"; capacity = " 50 % "; threads = 1; },
      { backend = "memory"; capacity = "100%"; threads = 1; },
      { backend = "memory"; capacity = "0.5%"; threads = 1; } );)");
  double after = AvailableMemoryMb();
  ExpectShare(c.storage_classes[0].capacity_mb, 10, before, after);
  ExpectShare(c.storage_classes[1].capacity_mb, 50, before, after);
  ExpectShare(c.storage_classes[2].capacity_mb, 100, before, after);
  ExpectShare(c.storage_classes[3].capacity_mb, 0.5, before, after);
  EXPECT_EQ(c.storage_classes[0].capacity_spec, "10%");
  EXPECT_CONTAINS(c.Describe(), "(10%)");
}

TEST(ConfigTest, AvailableMemoryMatchesProcMeminfo) {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo) GTEST_SKIP() << "no /proc/meminfo";
  std::string key, unit;
  double kb = -1;
  while (meminfo >> key >> kb && key != "MemAvailable:") std::getline(meminfo, unit);
  if (key != "MemAvailable:") GTEST_SKIP() << "no MemAvailable";
  EXPECT_NEAR(AvailableMemoryMb(), kb / 1024, 0.05 * kb / 1024);
}

double StatvfsFreeMb(const std::string& dir) {
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) return -1;
  return static_cast<double>(vfs.f_bavail) * vfs.f_frsize / (1024.0 * 1024.0);
}

TEST(ConfigTest, PercentOfFreeSpaceUsesNearestExistingAncestor) {
  TempDir tmp;
  std::string missing = tmp.path() + "/not/yet/there";
  double before = StatvfsFreeMb(tmp.path());
  ASSERT_GT(before, 0);
  double direct = FreeSpaceMb(missing);
  Config c = Config::LoadString(WithClasses(R"({ backend = "filesystem"; capacity = "20%"; threads = 1;
      backend_options = { path = ")" + missing + R"("; }; })"));
  double after = StatvfsFreeMb(tmp.path());
  ExpectShare(direct, 100, before, after);
  ExpectShare(c.storage_classes[1].capacity_mb, 20, before, after);
  EXPECT_EQ(c.storage_classes[1].path, missing);
  EXPECT_FALSE(fs::exists(missing)) << "loading must not create directories";
}

TEST(ConfigTest, BadPercentStrings) {
  for (const char* bad : {"0%", "101%", "-5%", "abc", "50", "%", "1e2%", "5%%", "5.%", ".5%",
                          "nan%", "inf%", "0x10%", "1.2.3%", ""}) {
    SCOPED_TRACE(bad);
    std::string msg = LoadError(WithClasses(
        std::string(R"({ backend = "memory"; threads = 1; capacity = ")") + bad + "\"; }"));
    EXPECT_CONTAINS(msg, "storage_classes.[1].capacity");
    EXPECT_CONTAINS(msg, "N%");
  }
}

// ------------------------------------------------------------ paths & env vars

TEST(ConfigTest, UserCacheDirFollowsEnvironment) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv a("HDMLP_CACHE_DIR", "/fast/cache");
    ScopedEnv b("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(UserCacheDir(), "/fast/cache");
  }
  {
    ScopedEnv a("HDMLP_CACHE_DIR", "");  // Empty counts as unset.
    ScopedEnv b("XDG_CACHE_HOME", "/xdg/");
    EXPECT_EQ(UserCacheDir(), "/xdg/hdmlp");
  }
  {
    ScopedEnv a("HDMLP_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(UserCacheDir(), "/home/someone/.cache/hdmlp");
  }
  {
    ScopedEnv a("HDMLP_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", "relative/xdg");  // Ignored, as the XDG spec says.
    EXPECT_EQ(UserCacheDir(), "/home/someone/.cache/hdmlp");
  }
}

TEST(ConfigTest, PathsExpandHomeAndUserCache) {
  ScopedEnv home("HOME", "/home/someone");
  ScopedEnv cache("HDMLP_CACHE_DIR", "/cache/dir");
  EXPECT_EQ(ExpandPath("~"), "/home/someone");
  EXPECT_EQ(ExpandPath("~/data//x/../y/"), "/home/someone/data/y");
  EXPECT_EQ(ExpandPath("{user_cache}/storage"), "/cache/dir/storage");
  EXPECT_EQ(ExpandPath("/a/{user_cache}"), "/a/cache/dir");
  EXPECT_EQ(ExpandPath("rel"), (fs::current_path() / "rel").string());
  EXPECT_THROW(ExpandPath("~other/x"), InvalidArgumentError);
  EXPECT_THROW(ExpandPath(""), InvalidArgumentError);

  Config c = Config::LoadString(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = "{user_cache}/storage"; }; },
         { backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = "~/scratch"; }; })",
      R"(checkpoint_path = "~/ckpt";)"));
  EXPECT_EQ(c.checkpoint_path, "/home/someone/ckpt");
  EXPECT_EQ(c.storage_classes[1].path, "/cache/dir/storage");
  EXPECT_EQ(c.storage_classes[2].path, "/home/someone/scratch");
  EXPECT_EQ(Config::LoadString(WithClasses("")).checkpoint_path, "/cache/dir");
}

TEST(ConfigTest, FilesystemPathThatIsAFileIsRejected) {
  TempDir tmp;
  std::string file = tmp.path() + "/file";
  WriteFile(file, "x");
  std::string msg = LoadError(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = ")" + file + R"("; }; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path");
  EXPECT_CONTAINS(msg, "not a directory");
  msg = LoadError(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = ")" + file + R"(/below"; }; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path");
  EXPECT_CONTAINS(msg, "cannot be created");
  msg = LoadError(WithClasses("", "checkpoint_path = \"" + file + "\";"));
  EXPECT_CONTAINS(msg, "checkpoint_path");
  EXPECT_CONTAINS(msg, "not a directory");
}

TEST(ConfigTest, UnsupportedTildeUserIsAConfigError) {
  std::string msg = LoadError(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = "~bob/x"; }; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path");
  EXPECT_CONTAINS(msg, "~user");
}

// ------------------------------------------------------------------ bad input

TEST(ConfigTest, SyntaxErrorNamesOriginAndLine) {
  std::string msg = LoadError("b_c = 1;\nb_fs = ;\n");
  EXPECT_CONTAINS(msg, "test.cfg:2:");
  EXPECT_CONTAINS(msg, "syntax error");
}

TEST(ConfigTest, DuplicateKeyIsAnError) {
  EXPECT_CONTAINS(LoadError(WithClasses("", "b_c = 1;\nb_c = 2;")), "duplicate");
}

TEST(ConfigTest, MessagesNameTheLine) {
  std::string msg = LoadError(
      "storage_classes = (\n"
      "  { capacity = 1; threads = 1; },\n"
      "  { backend = \"memory\";\n"
      "    capacity = [1, 2];\n"
      "    threads = 1; }\n"
      ");\n");
  EXPECT_CONTAINS(msg, "test.cfg:4: storage_classes.[1].capacity");
  EXPECT_CONTAINS(msg, "an array");
}

TEST(ConfigTest, UnknownKeys) {
  std::string msg = LoadError(WithClasses("", "b_cc = 1;"));
  EXPECT_CONTAINS(msg, "b_cc");
  EXPECT_CONTAINS(msg, "unknown key");
  EXPECT_CONTAINS(msg, "did you mean \"b_c\"");

  msg = LoadError("storage_classes = ( { capacity = 1; threads = 1; thread = 2; } );");
  EXPECT_CONTAINS(msg, "storage_classes.[0].thread");
  EXPECT_CONTAINS(msg, "unknown key");

  msg = LoadError(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = "/tmp/x"; size = 3; }; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.size");

  msg = LoadError(WithClasses(
      R"({ backend = "memory"; capacity = 1; threads = 1; backend_options = { path = "/tmp/x"; }; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path");
  EXPECT_CONTAINS(msg, "memory backend takes no backend_options");

  msg = LoadError(
      "storage_classes = ( { capacity = 1; threads = 1;"
      " bandwidth = ( { threads = 1; bw = 2; mbps = 3; } ); } );");
  EXPECT_CONTAINS(msg, "storage_classes.[0].bandwidth.[0].mbps");

  msg = LoadError(WithClasses("", "pfs_bandwidth = ( { threads = 1; bw = 2; } );"));
  EXPECT_CONTAINS(msg, "pfs_bandwidth.[0].threads");
  EXPECT_CONTAINS(msg, "processes");
}

TEST(ConfigTest, WrongTypes) {
  struct Case {
    std::string text;
    const char* key;
  };
  std::vector<Case> cases = {
      {WithClasses("", "b_c = \"fast\";"), "b_c"},
      {WithClasses("", "b_fs = true;"), "b_fs"},
      {WithClasses("", "distributed_threads = 2.5;"), "distributed_threads"},
      {WithClasses("", "checkpoint = 1;"), "checkpoint"},
      {WithClasses("", "checkpoint = \"yes\";"), "checkpoint"},
      {WithClasses("", "checkpoint_path = 5;"), "checkpoint_path"},
      {"storage_classes = { capacity = 1; threads = 1; };", "storage_classes"},
      {"storage_classes = 3;", "storage_classes"},
      {"storage_classes = ( 3 );", "storage_classes.[0]"},
      {"storage_classes = ( { capacity = (1); threads = 1; } );", "storage_classes.[0].capacity"},
      {"storage_classes = ( { capacity = true; threads = 1; } );", "storage_classes.[0].capacity"},
      {"storage_classes = ( { capacity = 1; threads = \"4\"; } );", "storage_classes.[0].threads"},
      {"storage_classes = ( { capacity = 1; threads = 4.0; } );", "storage_classes.[0].threads"},
      {"storage_classes = ( { capacity = 1; threads = 1; backend = 0; } );",
       "storage_classes.[0].backend"},
      {WithClasses(R"({ backend = "memory"; capacity = 1; threads = 1; backend_options = 3; })"),
       "storage_classes.[1].backend_options"},
      {WithClasses(R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = 3; }; })"),
       "storage_classes.[1].backend_options.path"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = { threads = 1; bw = 2; }; } );",
       "storage_classes.[0].bandwidth"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = [1, 2]; } );",
       "storage_classes.[0].bandwidth"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = ( 1 ); } );",
       "storage_classes.[0].bandwidth.[0]"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = ( { threads = 1.5; bw = 2; } ); } );",
       "storage_classes.[0].bandwidth.[0].threads"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = ( { threads = 1; bw = \"2\"; } ); } );",
       "storage_classes.[0].bandwidth.[0].bw"},
      {WithClasses("", "pfs_bandwidth = 5;"), "pfs_bandwidth"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::string msg = LoadError(c.text);
    EXPECT_CONTAINS(msg, std::string(c.key) + ": ");
    EXPECT_CONTAINS(msg, "expected");
    EXPECT_CONTAINS(msg, "test.cfg:");
  }
}

TEST(ConfigTest, OutOfRangeValues) {
  struct Case {
    std::string text;
    const char* key;
  };
  std::vector<Case> cases = {
      {WithClasses("", "b_c = 0;"), "b_c"},
      {WithClasses("", "b_c = -1.5;"), "b_c"},
      {WithClasses("", "b_c = 1e999;"), "b_c"},
      {WithClasses("", "b_fs = 0.0;"), "b_fs"},
      {WithClasses("", "distributed_threads = 0;"), "distributed_threads"},
      {WithClasses("", "distributed_threads = 5000000000L;"), "distributed_threads"},
      {"storage_classes = ( { capacity = 0; threads = 1; } );", "storage_classes.[0].capacity"},
      {"storage_classes = ( { capacity = -3.5; threads = 1; } );", "storage_classes.[0].capacity"},
      {"storage_classes = ( { capacity = 1; threads = 0; } );", "storage_classes.[0].threads"},
      {"storage_classes = ( { capacity = 1; threads = 1025; } );", "storage_classes.[0].threads"},
      {WithClasses(R"({ backend = "memory"; capacity = 1; threads = -2; })"),
       "storage_classes.[1].threads"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = ( { threads = 0; bw = 2; } ); } );",
       "storage_classes.[0].bandwidth.[0].threads"},
      {"storage_classes = ( { capacity = 1; threads = 1; bandwidth = ( { threads = 1; bw = 0; } ); } );",
       "storage_classes.[0].bandwidth.[0].bw"},
      {WithClasses("", "pfs_bandwidth = ( { processes = 1; bw = -1; } );"), "pfs_bandwidth.[0].bw"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::string msg = LoadError(c.text);
    EXPECT_CONTAINS(msg, std::string(c.key) + ": ");
    EXPECT_CONTAINS(msg, "expected");
  }
}

TEST(ConfigTest, ThreadLimitsAreInclusive) {
  Config c = Config::LoadString(
      "distributed_threads = 1024;\nstorage_classes = ( { capacity = 1; threads = 1024; } );");
  EXPECT_EQ(c.distributed_threads, 1024);
  EXPECT_EQ(c.storage_classes[0].threads, 1024);
}

TEST(ConfigTest, BandwidthTablesMustIncrease) {
  std::string msg = LoadError(
      "storage_classes = ( { capacity = 1; threads = 1; bandwidth = (\n"
      "  { threads = 1; bw = 2; },\n"
      "  { threads = 4; bw = 3; },\n"
      "  { threads = 2; bw = 4; } ); } );");
  EXPECT_CONTAINS(msg, "test.cfg:4: storage_classes.[0].bandwidth.[2].threads");
  EXPECT_CONTAINS(msg, "strictly increasing");
  EXPECT_CONTAINS(msg, "[1]");

  msg = LoadError(WithClasses("",
      "pfs_bandwidth = ( { processes = 2; bw = 1; }, { processes = 2; bw = 2; } );"));
  EXPECT_CONTAINS(msg, "pfs_bandwidth.[1].processes");
  EXPECT_CONTAINS(msg, "strictly increasing");
}

TEST(ConfigTest, BandwidthEntriesNeedBothKeys) {
  EXPECT_CONTAINS(LoadError("storage_classes = ( { capacity = 1; threads = 1; bandwidth = ( { bw = 2; } ); } );"),
                  "storage_classes.[0].bandwidth.[0].threads: missing");
  EXPECT_CONTAINS(LoadError(WithClasses("", "pfs_bandwidth = ( { processes = 1; } );")),
                  "pfs_bandwidth.[0].bw: missing");
}

TEST(ConfigTest, BackendRules) {
  // Class 0 may say "staging" explicitly...
  EXPECT_EQ(Config::LoadString("storage_classes = ( { backend = \"staging\"; capacity = 1; threads = 1; } );")
                .storage_classes[0].backend,
            "staging");
  // ...but nothing else.
  std::string msg = LoadError("storage_classes = ( { backend = \"memory\"; capacity = 1; threads = 1; } );");
  EXPECT_CONTAINS(msg, "storage_classes.[0].backend");
  EXPECT_CONTAINS(msg, "staging");

  msg = LoadError(WithClasses(R"({ capacity = 1; threads = 1; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend: missing");
  EXPECT_CONTAINS(msg, "\"memory\" or \"filesystem\"");

  msg = LoadError(WithClasses(R"({ backend = "ssd"; capacity = 1; threads = 1; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend");
  EXPECT_CONTAINS(msg, "\"memory\" or \"filesystem\"");
  EXPECT_CONTAINS(msg, "\"ssd\"");

  msg = LoadError(WithClasses(R"({ backend = "staging"; capacity = 1; threads = 1; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend");
  EXPECT_CONTAINS(msg, "only class 0");
}

TEST(ConfigTest, FilesystemBackendNeedsPath) {
  std::string msg = LoadError(WithClasses(R"({ backend = "filesystem"; capacity = 1; threads = 1; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path: missing");
  msg = LoadError(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = {}; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path: missing");
  msg = LoadError(WithClasses(
      R"({ backend = "filesystem"; capacity = 1; threads = 1; backend_options = { path = ""; }; })"));
  EXPECT_CONTAINS(msg, "storage_classes.[1].backend_options.path");
}

TEST(ConfigTest, StorageClassRequiredKeys) {
  EXPECT_CONTAINS(LoadError("storage_classes = ( { threads = 1; } );"),
                  "storage_classes.[0].capacity: missing");
  EXPECT_CONTAINS(LoadError("storage_classes = ( { capacity = 1; } );"),
                  "storage_classes.[0].threads: missing");
}

TEST(ConfigTest, StorageClassesMissingOrEmpty) {
  std::string msg = LoadError("b_c = 1;");
  EXPECT_CONTAINS(msg, "test.cfg: storage_classes: missing");
  EXPECT_CONTAINS(LoadError(""), "storage_classes: missing");
  EXPECT_CONTAINS(LoadError("storage_classes = ();"), "storage_classes: is empty");
  EXPECT_CONTAINS(LoadError("storage_classes = [];"), "storage_classes: is empty");
}

// ------------------------------------------------------------------- files

TEST(ConfigTest, LoadFileReportsPathAndLine) {
  TempDir tmp;
  std::string path = tmp.path() + "/bad.cfg";
  WriteFile(path, "storage_classes = (\n  { capacity = 1; threads = 0; }\n);\n");
  try {
    Config::LoadFile(path);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), path + ":2: storage_classes.[0].threads");
  }
  WriteFile(path, "storage_classes = (\n  { capacity = = 1; threads = 1; }\n);\n");
  try {
    Config::LoadFile(path);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), path + ":2:");
  }
}

TEST(ConfigTest, LoadFileMissingIsNotFound) {
  TempDir tmp;
  std::string missing = tmp.path() + "/nope.cfg";
  try {
    Config::LoadFile(missing);
    FAIL() << "no error";
  } catch (const NotFoundError& e) {
    EXPECT_CONTAINS(e.what(), missing);
  }
  EXPECT_THROW(Config::LoadFile(""), NotFoundError);
  EXPECT_THROW(Config::LoadFile(tmp.path()), ConfigError);  // A directory.
}

TEST(ConfigTest, LoadFileSetsOriginAndResolvesIncludesNextToIt) {
  TempDir tmp;
  WriteFile(tmp.path() + "/classes.cfg", "storage_classes = ( { capacity = 7; threads = 1; } );\n");
  WriteFile(tmp.path() + "/main.cfg", "b_c = 3;\n@include \"classes.cfg\"\n");
  Config c = Config::LoadFile(tmp.path() + "/main.cfg");
  EXPECT_EQ(c.origin, tmp.path() + "/main.cfg");
  EXPECT_EQ(c.storage_classes[0].capacity_mb, 7);
}

// libconfig 1.5 wraps a bare integer literal to 32 bits; each such value is
// a range error naming the key and the line, never a wrapped number.
TEST(ConfigTest, IntegersBeyond32BitsAreRangeErrorsNotWrapped) {
  struct Case {
    std::string text, key, literal;
    int line;
  };
  const std::vector<Case> cases = {
      {"storage_classes = (\n  { capacity = 5000000000; threads = 2; } );\n", "capacity", "5000000000", 2},
      {"storage_classes = (\n  { capacity = 4294967296; threads = 2; } );\n", "capacity", "4294967296", 2},
      {"storage_classes = (\n  { capacity = 64;\n    threads = 4294967297; } );\n", "threads", "4294967297", 3},
      {WithClasses("", "pfs_bandwidth = ( { processes = 1; bw = 5000000000; } );"), "bw", "5000000000", 1},
      {"# capacity = 1 here is a comment\nstorage_classes = ( { capacity = -5000000000; threads = 2; } );\n",
       "capacity", "-5000000000", 2},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string e = LoadError(c.text);
    EXPECT_CONTAINS(e, "test.cfg:" + std::to_string(c.line) + ": " + c.key + ": " + c.literal + " is out of range");
  }
  // Strings, comments, floats and 64-bit literals are not integers to check.
  Config ok = Config::LoadString(
      "/* 99999999999 */ storage_classes = ( { capacity = 5000000000.0; threads = 2; },\n"
      "{ backend = \"filesystem\"; backend_options = { path = \"/tmp/x99999999999\"; }; capacity = 1e10;"
      " threads = 2; } ); // 88888888888\n",
      "test.cfg");
  EXPECT_EQ(ok.storage_classes[0].capacity_mb, 5e9);
}

TEST(ConfigTest, ByteOrderMarkIsAccepted) {
  TempDir tmp;
  WriteFile(tmp.path() + "/bom.cfg", "\xEF\xBB\xBF" + WithClasses(""));
  Config c = Config::LoadFile(tmp.path() + "/bom.cfg");
  EXPECT_EQ(c.storage_classes[0].capacity_mb, 64);
  // Errors after the mark still name the file and the line.
  WriteFile(tmp.path() + "/bad.cfg", "\xEF\xBB\xBF\nstorage_classes = ( { capacity = 0; threads = 2; } );\n");
  EXPECT_CONTAINS(LoadFileError(tmp.path() + "/bad.cfg"), tmp.path() + "/bad.cfg:2:");
}

TEST(ConfigTest, ShippedConfigsLoad) {
  for (const char* name : {"default.cfg", "laptop.cfg", "gpu_node_nvme.cfg", "hdmlp_paper.cfg"}) {
    SCOPED_TRACE(name);
    Config c;
    ASSERT_NO_THROW(c = Config::LoadFile(ShippedConfig(name)));
    ASSERT_FALSE(c.storage_classes.empty());
    EXPECT_EQ(c.storage_classes[0].name, "staging");
    for (const auto& s : c.storage_classes) {
      EXPECT_GE(s.capacity_mb, 0) << s.name;
      EXPECT_GE(s.threads, 1) << s.name;
      if (s.backend == "filesystem") {
        EXPECT_FALSE(s.path.empty()) << s.name;
      }
    }
    EXPECT_FALSE(c.Describe().empty());
  }
}

TEST(ConfigTest, DefaultConfigShape) {
  ScopedEnv cache("HDMLP_CACHE_DIR", "/some/cache");
  Config c = Config::LoadFile(ShippedConfig("default.cfg"));
  ASSERT_EQ(c.storage_classes.size(), 3u);
  EXPECT_EQ(c.storage_classes[0].capacity_spec, "3%");
  EXPECT_TRUE(c.storage_classes[0].threads_auto);  // one staging worker per usable CPU
  EXPECT_EQ(c.storage_classes[0].threads, ReadCpuBudget().UsableCpus());
  EXPECT_EQ(c.storage_classes[1].backend, "memory");
  EXPECT_EQ(c.storage_classes[1].capacity_spec, "25%");
  EXPECT_EQ(c.storage_classes[1].threads, 6);  // runs in flight over a high-latency store
  EXPECT_EQ(c.storage_classes[2].backend, "filesystem");
  EXPECT_EQ(c.storage_classes[2].capacity_spec, "10%");
  EXPECT_EQ(c.storage_classes[2].path, "/some/cache/storage");
  EXPECT_EQ(c.storage_classes[2].threads, 2);
  EXPECT_EQ(c.checkpoint_path, "/some/cache");
  EXPECT_FALSE(c.pfs_bandwidth.empty());
}

TEST(ConfigTest, PaperConfigMatchesTheSlide) {
  Config c = Config::LoadFile(ShippedConfig("hdmlp_paper.cfg"));
  EXPECT_EQ(c.b_c_mbps, 10000);
  EXPECT_EQ(c.b_fs_mbps, 2000);
  EXPECT_TRUE(c.checkpoint);
  EXPECT_EQ(c.checkpoint_path, "/tmp");
  ASSERT_EQ(c.storage_classes.size(), 3u);
  EXPECT_EQ(c.storage_classes[0].capacity_mb, 1024);
  EXPECT_EQ(c.storage_classes[1].capacity_mb, 2048);
  EXPECT_EQ(c.storage_classes[2].capacity_mb, 10240);
  EXPECT_EQ(c.storage_classes[2].path, "/tmp/hdmlp");
  EXPECT_EQ(c.storage_classes[0].bandwidth.size(), 4u);
  EXPECT_EQ(c.storage_classes[0].bandwidth[3].mbps, 21415);
}

// ------------------------------------------------------------- interpolation

TEST(InterpolateBandwidthTest, EmptyTableIsZero) { EXPECT_EQ(InterpolateBandwidth({}, 4), 0); }

TEST(InterpolateBandwidthTest, SinglePointIsConstant) {
  std::vector<BandwidthPoint> t = {{2, 100}};
  EXPECT_EQ(InterpolateBandwidth(t, 1), 100);
  EXPECT_EQ(InterpolateBandwidth(t, 2), 100);
  EXPECT_EQ(InterpolateBandwidth(t, 64), 100);
}

TEST(InterpolateBandwidthTest, LinearBetweenPointsAndClampedOutside) {
  std::vector<BandwidthPoint> t = {{1, 100}, {2, 300}, {4, 400}, {8, 400}};
  EXPECT_EQ(InterpolateBandwidth(t, 0), 100);
  EXPECT_EQ(InterpolateBandwidth(t, 1), 100);
  EXPECT_DOUBLE_EQ(InterpolateBandwidth(t, 1.5), 200);
  EXPECT_EQ(InterpolateBandwidth(t, 2), 300);
  EXPECT_DOUBLE_EQ(InterpolateBandwidth(t, 3), 350);
  EXPECT_EQ(InterpolateBandwidth(t, 4), 400);
  EXPECT_EQ(InterpolateBandwidth(t, 6), 400);
  EXPECT_EQ(InterpolateBandwidth(t, 100), 400);
}

TEST(InterpolateBandwidthTest, WorksOnLoadedTables) {
  Config c = Config::LoadFile(ShippedConfig("hdmlp_paper.cfg"));
  EXPECT_DOUBLE_EQ(InterpolateBandwidth(c.storage_classes[0].bandwidth, 1.5), (16550 + 21164) / 2.0);
}

}  // namespace
}  // namespace hdmlp
