#include "hdmlp/config/config.h"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <libconfig.h++>
#include <limits>
#include <locale>
#include <map>
#include <sstream>
#include <system_error>

#include "hdmlp/config/cpu_budget.h"
#include "hdmlp/errors.h"

namespace hdmlp {

namespace fs = std::filesystem;
using libconfig::Setting;

namespace {

constexpr int kMaxThreads = 1024;
constexpr double kBytesPerMb = 1024.0 * 1024.0;
constexpr double kMaxCapacityMb = 1e12;

const char* NonEmptyEnv(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && v[0] != '\0') ? v : nullptr;
}

std::string HomeDir() {
  if (const char* home = NonEmptyEnv("HOME")) return home;
  // Batch systems sometimes start jobs without HOME; the passwd entry is the
  // next best answer before giving up on a per-user location.
  struct passwd pw;
  struct passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr &&
      result->pw_dir != nullptr && result->pw_dir[0] != '\0') {
    return result->pw_dir;
  }
  return "/tmp";
}

std::string JoinPath(std::string base, const std::string& rest) {
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base + "/" + rest;
}

// Shortest round-trip-ish form for messages: 1024, 2.5, 1e+06.
std::string Num(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

// MB for Describe(): whole MB once it no longer matters, else one decimal.
std::string Mb(double v) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(v >= 100 ? 0 : 1);
  os << v;
  return os.str();
}

const char* TypeName(const Setting& s) {
  switch (s.getType()) {
    case Setting::TypeInt:
    case Setting::TypeInt64:
      return "an integer";
    case Setting::TypeFloat:
      return "a float";
    case Setting::TypeString:
      return "a string";
    case Setting::TypeBoolean:
      return "a boolean";
    case Setting::TypeGroup:
      return "a group { ... }";
    case Setting::TypeArray:
      return "an array [ ... ]";
    case Setting::TypeList:
      return "a list ( ... )";
    default:
      return "an unknown type";
  }
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "12.5%" -> 12.5. Deliberately strict (no sign, exponent, hex or inf) so a
// typo is reported instead of being read as some other number.
bool ParsePercent(const std::string& text, double* percent) {
  size_t b = text.find_first_not_of(" \t");
  size_t e = text.find_last_not_of(" \t");
  if (b == std::string::npos || text[e] != '%') return false;
  std::string number = text.substr(b, e - b);
  while (!number.empty() && (number.back() == ' ' || number.back() == '\t')) number.pop_back();
  if (number.empty() || number.front() == '.' || number.back() == '.') return false;
  int dots = 0;
  for (char c : number) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  if (dots > 1) return false;
  // A stream in the classic locale, unlike strtod, ignores the C locale (a host
  // program may have set a decimal comma). (std::from_chars for double would do
  // too, but GCC 10's libstdc++, which the wheels are built with, lacks it.)
  std::istringstream in(number);
  in.imbue(std::locale::classic());
  in >> *percent;
  return !in.fail() && in.peek() == std::char_traits<char>::eof();
}

// The deepest prefix of `path` that exists (`path` itself included): where a
// later create_directories starts, hence the file system that will hold it.
// "" if nothing exists (a relative path below a missing directory).
fs::path NearestExisting(const fs::path& path) {
  for (fs::path p = path;; p = p.parent_path()) {
    std::error_code ec;
    if (fs::exists(fs::status(p, ec))) return p;
    if (p.empty() || p == p.parent_path()) return {};
  }
}

// Reads and checks one parsed file. Every check goes through Fail so that all
// messages share one shape: "<file>:<line>: <key path>: <what is expected>".
class Loader {
 public:
  explicit Loader(std::string origin) : origin_(std::move(origin)) {}

  Config Load(const Setting& root) {
    Config c;
    c.origin = origin_;
    CheckKeys(root, "",
              {"b_c", "b_fs", "distributed_threads", "checkpoint", "checkpoint_path",
               "storage_classes", "pfs_bandwidth", "coalesce_kb"});
    if (root.exists("coalesce_kb")) c.coalesce_kb = Int(root["coalesce_kb"], "coalesce_kb", 0, 1 << 20);
    if (root.exists("b_c")) c.b_c_mbps = PositiveNumber(root["b_c"], "b_c", "a bandwidth in MB/s");
    if (root.exists("b_fs")) {
      c.b_fs_mbps = PositiveNumber(root["b_fs"], "b_fs", "a bandwidth in MB/s");
    }
    if (root.exists("distributed_threads")) {
      c.distributed_threads =
          Int(root["distributed_threads"], "distributed_threads", 1, kMaxThreads);
    }
    if (root.exists("checkpoint")) {
      const Setting& s = root["checkpoint"];
      if (s.getType() != Setting::TypeBoolean) {
        Fail(&s, "checkpoint", std::string("expected true or false, got ") + TypeName(s));
      }
      c.checkpoint = s;
    }
    if (root.exists("checkpoint_path")) {
      c.checkpoint_path = DirectoryPath(root["checkpoint_path"], "checkpoint_path");
    } else {
      c.checkpoint_path = ExpandPath(UserCacheDir());
    }

    if (!root.exists("storage_classes")) {
      Fail(nullptr, "storage_classes",
           "missing; expected a list ( { capacity = ...; threads = ...; }, ... ) whose "
           "first entry is the staging buffer");
    }
    const Setting& classes = root["storage_classes"];
    bool empty_aggregate = (classes.getType() == Setting::TypeList ||
                            classes.getType() == Setting::TypeArray) &&
                           classes.getLength() == 0;
    if (empty_aggregate) {
      Fail(&classes, "storage_classes",
           "is empty; expected at least one entry, the staging buffer "
           "( { capacity = 1024; threads = 4; } )");
    }
    if (classes.getType() != Setting::TypeList) {
      Fail(&classes, "storage_classes",
           std::string("expected a list ( { capacity = ...; threads = ...; }, ... ), got ") +
               TypeName(classes));
    }
    std::map<std::string, int> per_backend;
    for (int i = 0; i < classes.getLength(); ++i) {
      StorageClassConfig sc = StorageClass(classes[i], i);
      int n = ++per_backend[sc.backend];
      sc.name = n == 1 ? sc.backend : sc.backend + "_" + std::to_string(n);
      c.storage_classes.push_back(std::move(sc));
    }

    if (root.exists("pfs_bandwidth")) {
      c.pfs_bandwidth = Table(root["pfs_bandwidth"], "pfs_bandwidth", "processes");
    }
    return c;
  }

 private:
  [[noreturn]] void Fail(const Setting* at, const std::string& key, const std::string& what) const {
    std::string where = origin_;
    if (at != nullptr) {
      // An @include'd setting is reported in the file it came from.
      if (const char* file = at->getSourceFile(); file != nullptr && file[0] != '\0') where = file;
      if (unsigned line = at->getSourceLine(); line > 0) where += ":" + std::to_string(line);
    }
    throw ConfigError(where + ": " + (key.empty() ? "" : key + ": ") + what);
  }

  static std::string Child(const std::string& parent, const std::string& name) {
    return parent.empty() ? name : parent + "." + name;
  }
  static std::string Element(const std::string& parent, int i) {
    return parent + ".[" + std::to_string(i) + "]";
  }

  void CheckKeys(const Setting& group, const std::string& path,
                 std::initializer_list<const char*> allowed, const char* hint = nullptr) {
    for (int i = 0; i < group.getLength(); ++i) {
      const Setting& s = group[i];
      std::string name = s.getName() != nullptr ? s.getName() : "";
      bool known = std::any_of(allowed.begin(), allowed.end(),
                               [&](const char* a) { return name == a; });
      if (known) continue;
      std::string what = "unknown key";
      std::string best;
      size_t best_distance = 3;  // Suggest only near misses.
      for (const char* a : allowed) {
        size_t d = EditDistance(name, a);
        if (d < best_distance) best_distance = d, best = a;
      }
      if (!best.empty()) what += " (did you mean \"" + best + "\"?)";
      if (hint != nullptr) {
        what += std::string("; ") + hint;
      } else {
        what += "; valid keys here: ";
        bool first = true;
        for (const char* a : allowed) what += (first ? "" : ", ") + std::string(a), first = false;
      }
      Fail(&s, Child(path, name), what);
    }
  }

  // A required member; `expect` is the tail of the "missing" message.
  const Setting& Member(const Setting& group, const std::string& path, const char* name,
                        const std::string& expect) {
    if (!group.exists(name)) Fail(&group, Child(path, name), "missing; expected " + expect);
    return group[name];
  }

  double Number(const Setting& s, const std::string& key, const std::string& what) {
    switch (s.getType()) {
      case Setting::TypeInt:
        return static_cast<int>(s);
      case Setting::TypeInt64:
        return static_cast<double>(static_cast<long long>(s));
      case Setting::TypeFloat:
        return static_cast<double>(s);
      default:
        Fail(&s, key, "expected a number (" + what + "), got " + TypeName(s));
    }
  }

  double PositiveNumber(const Setting& s, const std::string& key, const std::string& what) {
    double v = Number(s, key, what);
    if (!(v > 0) || !std::isfinite(v)) {
      Fail(&s, key, "expected a number > 0 (" + what + "), got " + Num(v));
    }
    return v;
  }

  int Int(const Setting& s, const std::string& key, long long lo, long long hi) {
    std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (s.getType() != Setting::TypeInt && s.getType() != Setting::TypeInt64) {
      Fail(&s, key, "expected " + range + ", got " + TypeName(s));
    }
    long long v = s.getType() == Setting::TypeInt ? static_cast<int>(s) : static_cast<long long>(s);
    if (v < lo || v > hi) Fail(&s, key, "expected " + range + ", got " + std::to_string(v));
    return static_cast<int>(v);
  }

  std::string String(const Setting& s, const std::string& key, const std::string& what) {
    if (s.getType() != Setting::TypeString) {
      Fail(&s, key, "expected a string (" + what + "), got " + TypeName(s));
    }
    return s.c_str();
  }

  // A directory that may not exist yet (it is created on first use) but must
  // not be a file, and must be creatable: a file among its ancestors is an
  // error now rather than an ENOTDIR in a prefetch thread later.
  std::string DirectoryPath(const Setting& s, const std::string& key) {
    std::string raw = String(s, key, "a directory path");
    std::string path;
    try {
      path = ExpandPath(raw);
    } catch (const InvalidArgumentError& e) {
      Fail(&s, key, e.what());
    }
    std::error_code ec;
    fs::file_status st = fs::status(path, ec);
    if (fs::exists(st) && !fs::is_directory(st)) {
      Fail(&s, key, "\"" + path + "\" exists and is not a directory; expected a directory");
    }
    std::error_code ignored;
    if (fs::path at = NearestExisting(path); !at.empty() && !fs::is_directory(at, ignored)) {
      Fail(&s, key,
           "\"" + path + "\" cannot be created: \"" + at.string() + "\" is not a directory");
    }
    return path;
  }

  std::vector<BandwidthPoint> Table(const Setting& s, const std::string& key, const char* x) {
    std::string example = std::string("( { ") + x + " = 1; bw = 1000.0; }, { " + x +
                          " = 2; bw = 1800.0; } )";
    std::vector<BandwidthPoint> table;
    // "[]" is how some write an empty list; it can hold no groups anyway.
    if (s.getType() == Setting::TypeArray && s.getLength() == 0) return table;
    if (s.getType() != Setting::TypeList) {
      Fail(&s, key, "expected a list " + example + ", got " + TypeName(s));
    }
    for (int i = 0; i < s.getLength(); ++i) {
      const Setting& e = s[i];
      std::string path = Element(key, i);
      if (e.getType() != Setting::TypeGroup) {
        Fail(&e, path, "expected a group { " + std::string(x) + " = N; bw = MB/s; }, got " +
                           TypeName(e));
      }
      CheckKeys(e, path, {x, "bw"});
      const Setting& xs = Member(e, path, x, std::string("an integer >= 1"));
      int n = Int(xs, Child(path, x), 1, std::numeric_limits<int>::max());
      double bw = PositiveNumber(Member(e, path, "bw", "a bandwidth in MB/s > 0"),
                                 Child(path, "bw"), "a bandwidth in MB/s");
      if (!table.empty() && n <= table.back().threads) {
        Fail(&xs, Child(path, x),
             "expected more than " + std::to_string(table.back().threads) + " (entry [" +
                 std::to_string(i - 1) + "]) since entries must be in strictly increasing " +
                 x + " order; got " + std::to_string(n));
      }
      table.push_back({n, bw});
    }
    return table;
  }

  StorageClassConfig StorageClass(const Setting& s, int index) {
    const std::string path = Element("storage_classes", index);
    if (s.getType() != Setting::TypeGroup) {
      Fail(&s, path, std::string("expected a group { capacity = ...; threads = ...; }, got ") +
                         TypeName(s));
    }
    CheckKeys(s, path, {"capacity", "threads", "backend", "backend_options", "bandwidth"});
    StorageClassConfig sc;

    const std::string backend_key = Child(path, "backend");
    if (index == 0) {
      sc.backend = "staging";
      if (s.exists("backend")) {
        std::string b = String(s["backend"], backend_key, "\"staging\"");
        if (b != "staging") {
          Fail(&s["backend"], backend_key,
               "class 0 is the staging buffer; expected \"staging\" or no backend key, got \"" +
                   b + "\" (list a \"" + b + "\" class after it)");
        }
      }
    } else {
      const char* valid = "\"memory\" or \"filesystem\"";
      sc.backend = String(Member(s, path, "backend", valid), backend_key, valid);
      if (sc.backend != "memory" && sc.backend != "filesystem") {
        std::string what = std::string("expected ") + valid + ", got \"" + sc.backend + "\"";
        if (sc.backend == "staging") what += " (only class 0 is the staging buffer)";
        Fail(&s["backend"], backend_key, what);
      }
    }

    const std::string options_key = Child(path, "backend_options");
    bool filesystem = sc.backend == "filesystem";
    if (s.exists("backend_options")) {
      const Setting& o = s["backend_options"];
      if (o.getType() != Setting::TypeGroup) {
        Fail(&o, options_key, std::string("expected a group { ... }, got ") + TypeName(o));
      }
      if (filesystem) {
        CheckKeys(o, options_key, {"path"});
      } else {
        std::string hint = "the " + sc.backend + " backend takes no backend_options";
        CheckKeys(o, options_key, {}, hint.c_str());
      }
    }
    if (filesystem) {
      const std::string expect =
          "a directory path (backend_options = { path = \"/local/scratch/hdmlp\"; })";
      const Setting& owner = s.exists("backend_options") ? s["backend_options"] : s;
      if (!owner.exists("path")) {
        Fail(&owner, Child(options_key, "path"), "missing; expected " + expect);
      }
      sc.path = DirectoryPath(owner["path"], Child(options_key, "path"));
    }

    sc.capacity_mb = Capacity(Member(s, path, "capacity", "a number of MB > 0 or a string \"N%\""),
                              Child(path, "capacity"), sc, &sc.capacity_spec);
    const std::string threads_key = Child(path, "threads");
    const Setting& threads =
        Member(s, path, "threads", index == 0 ? "an integer from 1 to 1024 or \"auto\"" : "an integer from 1 to 1024");
    if (threads.getType() == Setting::TypeString) {
      const std::string t = threads.c_str();
      if (t != "auto" || index != 0) {
        Fail(&threads, threads_key,
             index == 0 ? "expected an integer from 1 to 1024 or \"auto\" (the CPUs this process may use), got \"" +
                              t + "\""
                        : "expected an integer from 1 to 1024, got \"" + t +
                              "\" (\"auto\" is only for class 0, the staging buffer, whose workers decode on the "
                              "CPUs; a cache class's threads wait for reads: give their number)");
      }
      sc.threads_auto = true;
      sc.threads = std::min(kMaxThreads, ReadCpuBudget().UsableCpus());
    } else {
      sc.threads = Int(threads, threads_key, 1, kMaxThreads);
    }
    if (s.exists("bandwidth")) {
      sc.bandwidth = Table(s["bandwidth"], Child(path, "bandwidth"), "threads");
    }
    return sc;
  }

  double Capacity(const Setting& s, const std::string& key, const StorageClassConfig& sc,
                  std::string* spec) {
    bool on_disk = sc.backend == "filesystem";
    const std::string of = on_disk ? "the free space where backend_options.path lives"
                                   : "the available memory (MemAvailable)";
    const std::string expect =
        "expected a number of MB > 0, or \"N%\" with 0 < N <= 100 for N% of " + of;
    if (s.getType() == Setting::TypeString) {
      *spec = s.c_str();
      double percent = 0;
      if (!ParsePercent(*spec, &percent) || !(percent > 0) || percent > 100) {
        std::string what = expect + "; got \"" + *spec + "\"";
        if (ParsePercent(*spec + "%", &percent)) {
          what += " (for MB, write the number without quotes)";
        }
        Fail(&s, key, what);
      }
      double base = on_disk ? FreeSpaceMb(sc.path) : AvailableMemoryMb();
      if (base < 0) {
        Fail(&s, key, "cannot resolve \"" + *spec + "\": the " + of +
                          " could not be determined on this machine; give a number of MB");
      }
      return base * percent / 100.0;
    }
    if (s.getType() != Setting::TypeInt && s.getType() != Setting::TypeInt64 &&
        s.getType() != Setting::TypeFloat) {
      Fail(&s, key, expect + "; got " + TypeName(s));
    }
    double mb = Number(s, key, "MB");
    if (!(mb > 0) || !std::isfinite(mb)) Fail(&s, key, expect + "; got " + Num(mb));
    // Bytes are counted in 64 bits: a million TB is far beyond any machine.
    if (mb > kMaxCapacityMb) Fail(&s, key, "expected at most " + Num(kMaxCapacityMb) + " MB; got " + Num(mb));
    *spec = Num(mb);
    return mb;
  }

  std::string origin_;
};

Config Parse(libconfig::Config& parsed, const std::string& origin) {
  return Loader(origin).Load(parsed.getRoot());
}

[[noreturn]] void ThrowParseError(const libconfig::ParseException& e, const std::string& origin) {
  std::string where = (e.getFile() != nullptr && e.getFile()[0] != '\0') ? e.getFile() : origin;
  throw ConfigError(where + ":" + std::to_string(e.getLine()) + ": " + e.getError() +
                    " (not valid libconfig syntax; see docs/config.md)");
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// libconfig 1.5 reads an integer literal without the L suffix into 32 bits
// and silently wraps it (capacity = 4294967296 became 0, threads =
// 4294967297 became 1). So the text is scanned first, skipping strings and
// comments, and a bare integer outside the 32-bit range is a ConfigError
// naming the key before it and the line.
void CheckIntegerLiterals(const std::string& text, const std::string& origin) {
  auto ident_start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '*'; };
  auto ident_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '*';
  };
  std::string key;
  int line = 1;
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == '#' || (c == '/' && i + 1 < n && text[i + 1] == '/')) {
      while (i < n && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      for (i += 2; i < n && !(text[i] == '*' && i + 1 < n && text[i + 1] == '/'); ++i) line += text[i] == '\n';
      i += 2;
    } else if (c == '"') {
      for (++i; i < n && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
        else if (text[i] == '\n') ++line;
      }
      ++i;
    } else if (ident_start(c)) {
      const size_t start = i;
      while (i < n && ident_char(text[i])) ++i;
      key = text.substr(start, i - start);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               ((c == '-' || c == '+') && i + 1 < n && std::isdigit(static_cast<unsigned char>(text[i + 1])))) {
      const size_t start = i;
      if (c == '-' || c == '+') ++i;
      const bool hex = text.compare(i, 2, "0x") == 0 || text.compare(i, 2, "0X") == 0;
      if (hex) i += 2;
      while (i < n && (hex ? std::isxdigit(static_cast<unsigned char>(text[i])) != 0
                           : std::isdigit(static_cast<unsigned char>(text[i])) != 0)) {
        ++i;
      }
      if (!hex && i < n && (text[i] == '.' || text[i] == 'e' || text[i] == 'E')) {
        // A float: the rest of it (digits, exponent) cannot wrap.
        while (i < n && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == 'e' ||
                         text[i] == 'E' || text[i] == '+' || text[i] == '-')) {
          ++i;
        }
        continue;
      }
      if (i < n && text[i] == 'L') {  // a 64-bit literal: libconfig reads it whole
        ++i;
        continue;
      }
      const std::string literal = text.substr(start, i - start);
      errno = 0;
      const long long v = hex ? static_cast<long long>(std::strtoull(literal.c_str(), nullptr, 16))
                              : std::strtoll(literal.c_str(), nullptr, 10);
      if (errno == ERANGE || (!hex && (v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min())) ||
          (hex && static_cast<unsigned long long>(v) > 0xffffffffULL)) {
        throw ConfigError(origin + ":" + std::to_string(line) + ": " + (key.empty() ? "a value" : key) + ": " +
                          literal + " is out of range: an integer here holds at most " +
                          std::to_string(std::numeric_limits<int>::max()) +
                          " (libconfig would wrap it silently); the key's own range is in docs/config.md, and a "
                          "number of MB this large is written as a float (" + literal + ".0)");
      }
    } else {
      ++i;
    }
  }
}

// libconfig opens @include'd files itself with fopen: a FIFO or a device
// there would block the load forever, or never end. So every @include line
// is checked first (recursively, as deep as libconfig follows them), and a
// file that is not regular is a ConfigError naming it. A missing one is left
// to libconfig, which reports it.
void CheckIncludes(const std::string& text, const std::string& include_dir, const std::string& origin, int depth) {
  constexpr int kMaxDepth = 10;
  CheckIntegerLiterals(text, origin);
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    size_t at = line.find_first_not_of(" \t");
    if (at == std::string::npos || line.compare(at, 8, "@include") != 0) continue;
    const size_t open = line.find('"', at + 8);
    const size_t close = open == std::string::npos ? open : line.find('"', open + 1);
    if (close == std::string::npos) continue;  // a syntax error libconfig reports
    const std::string file = line.substr(open + 1, close - open - 1);
    const std::string path = include_dir.empty() ? file : include_dir + "/" + file;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (!S_ISREG(st.st_mode)) {
      throw ConfigError(origin + ":" + std::to_string(number) + ": @include \"" + file + "\": \"" + path + "\" is " +
                        KindOf(st.st_mode) + "; expected a config file");
    }
    if (depth >= kMaxDepth) continue;
    std::ifstream in(path, std::ios::binary);
    std::string included((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CheckIncludes(included, include_dir, path, depth + 1);
  }
}

}  // namespace

Config Config::LoadFile(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    int err = path.empty() ? ENOENT : errno;
    if (err == ENOENT || err == ENOTDIR) {
      throw NotFoundError("config file not found: \"" + path + "\"");
    }
    throw IOError("cannot access config file \"" + path + "\": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    // A FIFO or device would block the parser forever, or never end.
    throw ConfigError("\"" + path + "\" is " + KindOf(st.st_mode) +
                      "; expected a config file such as configs/default.cfg");
  }
  libconfig::Config parsed;
  // @include "x.cfg" then means next to this file, not the current directory.
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  parsed.setIncludeDir(dir.c_str());
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Some editors start a UTF-8 file with a byte-order mark, which libconfig
  // reads as a syntax error; it says nothing, so it is dropped.
  const bool bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0;
  if (bom) text.erase(0, 3);
  CheckIncludes(text, dir, path, 1);
  try {
    if (bom) {
      parsed.readString(text);
    } else {
      parsed.readFile(path.c_str());
    }
  } catch (const libconfig::ParseException& e) {
    ThrowParseError(e, path);
  } catch (const libconfig::FileIOException&) {
    throw IOError("cannot read config file \"" + path + "\": " + std::strerror(errno));
  }
  return Parse(parsed, path);
}

Config Config::LoadString(const std::string& text, const std::string& origin) {
  CheckIncludes(text, "", origin, 1);
  libconfig::Config parsed;
  try {
    parsed.readString(text);
  } catch (const libconfig::ParseException& e) {
    ThrowParseError(e, origin);
  }
  return Parse(parsed, origin);
}

std::string Config::Describe() const {
  auto range = [](const std::vector<BandwidthPoint>& t, const char* what) {
    if (t.empty()) return std::string("bandwidth unknown");
    std::string s =
        "bandwidth " + Num(t.front().mbps) + " MB/s @ " + std::to_string(t.front().threads);
    if (t.size() > 1) {
      s += " .. " + Num(t.back().mbps) + " MB/s @ " + std::to_string(t.back().threads);
    }
    return s + " " + what;
  };
  std::ostringstream os;
  os << "config " << origin << "\n";
  os << "  links: b_c " << Num(b_c_mbps) << " MB/s, b_fs " << Num(b_fs_mbps)
     << " MB/s, distributed_threads " << distributed_threads << "\n";
  os << "  pfs: " << range(pfs_bandwidth, "processes") << "\n";
  os << "  checkpoint: " << (checkpoint ? "on" : "off") << ", " << checkpoint_path;
  for (size_t i = 0; i < storage_classes.size(); ++i) {
    const StorageClassConfig& c = storage_classes[i];
    os << "\n  [" << i << "] " << c.name << ": " << Mb(c.capacity_mb) << " MB";
    if (!c.capacity_spec.empty() && c.capacity_spec.back() == '%') {
      os << " (" << c.capacity_spec << ")";
    }
    os << ", " << c.threads << " threads" << (c.threads_auto ? " (auto)" : "") << ", "
       << range(c.bandwidth, "threads");
    if (!c.path.empty()) os << ", " << c.path;
  }
  return os.str();
}

double InterpolateBandwidth(const std::vector<BandwidthPoint>& table, double threads) {
  if (table.empty()) return 0;
  if (threads <= table.front().threads) return table.front().mbps;
  if (threads >= table.back().threads) return table.back().mbps;
  auto hi = std::upper_bound(table.begin(), table.end(), threads,
                             [](double t, const BandwidthPoint& p) { return t < p.threads; });
  auto lo = hi - 1;
  double f = (threads - lo->threads) / static_cast<double>(hi->threads - lo->threads);
  return lo->mbps + f * (hi->mbps - lo->mbps);
}

std::string UserCacheDir() {
  if (const char* dir = NonEmptyEnv("HDMLP_CACHE_DIR")) {
    // A relative one means the current directory's, now: not wherever a
    // later chdir leads.
    std::error_code ec;
    const fs::path absolute = fs::absolute(dir, ec);
    return ec ? std::string(dir) : absolute.lexically_normal().string();
  }
  if (const char* xdg = NonEmptyEnv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return JoinPath(xdg, "hdmlp");
  }
  return JoinPath(HomeDir(), ".cache/hdmlp");
}

std::string ExpandPath(const std::string& path) {
  if (path.empty()) throw InvalidArgumentError("empty path; expected a directory path");
  std::string p = path;
  if (p[0] == '~') {
    if (p.size() > 1 && p[1] != '/') {
      throw InvalidArgumentError("\"" + path +
                                 "\": \"~user\" paths are not supported; write the full path");
    }
    p = HomeDir() + p.substr(1);
  }
  static const std::string kUserCache = "{user_cache}";
  for (size_t at = p.find(kUserCache); at != std::string::npos; at = p.find(kUserCache, at)) {
    std::string dir = UserCacheDir();
    p.replace(at, kUserCache.size(), dir);
    at += dir.size();
  }
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  std::string out = abs.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

double AvailableMemoryMb() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kb / 1024.0;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages < 0 || page_size <= 0) return -1;
  return static_cast<double>(pages) * static_cast<double>(page_size) / kBytesPerMb;
}

double FreeSpaceMb(const std::string& path) {
  fs::path at = NearestExisting(path.empty() ? fs::path(".") : fs::path(path));
  if (at.empty()) at = ".";  // A relative path whose first component is missing.
  struct statvfs vfs;
  if (::statvfs(at.c_str(), &vfs) != 0) return -1;
  return static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) / kBytesPerMb;
}

}  // namespace hdmlp
