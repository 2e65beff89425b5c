// netfs: a small read-only network file system for emulating a parallel file system (PFS).
//
//   netfs serve --root DIR --listen ADDR:PORT [--open-delay-ms X] [--read-delay-ms Y] [--mbit B]
//               [--metadata-slots N] [--stats FILE] [--ready-file FILE] [--owner-pid PID]
//   netfs mount --server ADDR:PORT --mountpoint DIR [--threads N] [--max-read BYTES]
//               [--attr-timeout S] [--entry-timeout S] [--fsname NAME] [--owner-pid PID]
//               [--blksize BYTES]
//   netfs cat   --server ADDR:PORT PATH          (reads one file over the protocol, to stdout)
//
// Why not sshfs: sshfs's libfuse serves about 10 requests at once, each at most 128 KiB, so
// no reader can use a fast link with long round trips. Here the client is a multithreaded
// FUSE file system with a pool of TCP connections (one request in flight per connection,
// as many connections as FUSE threads), reads of up to --max-read bytes (1 MiB by default)
// go to the server as one request, and the server answers each connection on its own thread.
//
// The server emulates a busy PFS: every metadata request (stat, open, readdir) waits
// --open-delay-ms, every read request --read-delay-ms (both concurrently, per request: a
// latency, not a queue; --metadata-slots N serves only N metadata requests at once, as a
// metadata server busy with other clients would), and all reads together share --mbit of
// bandwidth (a token bucket over all clients). It refuses paths that leave the root (".." components, symlinks that
// resolve outside it). Its counters go to --stats as one JSON object, every 200 ms when they
// changed, at once on SIGUSR1, and at exit (SIGTERM/SIGINT); bytes_by_client splits the bytes
// served by the clients' addresses (the nodes of an emulated cluster).
//
// The client mounts read-only in the foreground (the caller owns the process; SIGTERM or
// SIGINT unmounts and exits). Files are opened with direct I/O: no page cache, so every read
// crosses the link, and a read(2) of N bytes is one request of N bytes (up to --max-read).
// Attributes are cached for --attr-timeout seconds (1 by default), names for --entry-timeout
// (60: a PFS's names do not change under a training job). Files report --blksize as st_blksize
// (1 MiB, Lustre's default stripe): Python's buffered I/O refills its buffer by that much, so a
// reader that seeks and reads a few bytes pays that much on the link, as on Lustre; benchmarks
// that scale sample sizes down scale it with them. Every open still pays the server's
// metadata delay. Folders are listed with their entries' attributes (readdirplus), so after a
// listing an open is one request (see FsReaddir).
//
// With --owner-pid, either mode exits (and the client unmounts) once that process is gone,
// so a killed benchmark leaves nothing running.
//
// Protocol (both ends on one machine, native byte order): a request is a RequestHeader
// followed by path_len bytes of path; a response is a ResponseHeader (status 0 or -errno)
// followed by len bytes of payload. One request at a time per connection.

#define FUSE_USE_VERSION 312
#include <fuse.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

constexpr uint32_t kMagic = 0x6e667331;  // "nfs1": refuses a peer that speaks something else

enum Op : uint32_t { kHello = 1, kGetattr = 2, kOpen = 3, kRead = 4, kRelease = 5, kReaddir = 6, kStatfs = 7 };

struct RequestHeader {
  uint32_t magic;
  uint32_t op;
  uint64_t handle;
  uint64_t offset;
  uint32_t size;
  uint32_t path_len;
};

struct ResponseHeader {
  int32_t status;
  uint32_t len;
};

struct WireStat {
  uint32_t mode;
  uint32_t nlink;
  uint64_t size;
  uint64_t ino;
  int64_t mtime_sec;
  int64_t mtime_nsec;
};

struct WireStatfs {
  uint64_t bsize, blocks, bfree, bavail, files, ffree, namemax;
};

constexpr uint32_t kMaxPath = 16 * 1024;
constexpr uint32_t kMaxRead = 64u << 20;

[[noreturn]] void Die(const std::string& msg) {
  fprintf(stderr, "netfs: %s\n", msg.c_str());
  fflush(stderr);
  exit(2);
}

bool SendAll(int fd, const void* data, size_t n, int flags = 0) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL | flags);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// "ADDR:PORT" (ADDR a numeric IPv4 address or a host name).
sockaddr_in ParseAddress(const std::string& text, const char* what) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) Die(std::string(what) + " '" + text + "' is not ADDR:PORT");
  std::string host = text.substr(0, colon), port = text.substr(colon + 1);
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) Die(std::string(what) + " '" + text + "': bad port");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(p));
  if (host.empty() || host == "*") {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
      Die(std::string(what) + " '" + text + "': cannot resolve host '" + host + "'");
    sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  return sa;
}

bool ProcessAlive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

double Seconds(const char* text, const char* flag) {
  char* end = nullptr;
  double v = strtod(text, &end);
  if (*end != '\0' || v < 0) Die(std::string(flag) + " needs a number >= 0, got '" + text + "'");
  return v;
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

struct ServerOptions {
  std::string root;
  std::string listen;
  double open_delay_ms = 0, read_delay_ms = 0, mbit = 0;
  int metadata_slots = 0;  // metadata requests served at once (0: no limit)
  std::string stats_path, ready_path;
  pid_t owner = 0;
};

// All reads share the PFS's bandwidth: each reserves its bytes' time on one timeline and waits
// until its reservation ends. A few ms of idle time may be banked (a burst), no more.
class TokenBucket {
 public:
  explicit TokenBucket(double mbit) : bytes_per_s_(mbit * 1e6 / 8) {}
  void Take(size_t bytes) {
    if (bytes_per_s_ <= 0) return;
    using namespace std::chrono;
    auto now = steady_clock::now();
    steady_clock::time_point done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto start = std::max(next_, now - milliseconds(2));
      next_ = start + duration_cast<steady_clock::duration>(duration<double>(bytes / bytes_per_s_));
      done = next_;
    }
    std::this_thread::sleep_until(done);
  }

 private:
  double bytes_per_s_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point next_{};
};

struct Counters {
  std::atomic<uint64_t> bytes_served{0}, reads{0}, opens{0}, stats{0}, readdirs{0}, refused{0}, errors{0};
  std::atomic<uint64_t> largest_read{0}, in_flight{0}, peak_concurrent{0}, connections{0}, requests{0};
};

class Server {
 public:
  explicit Server(ServerOptions o) : opt_(std::move(o)), bucket_(opt_.mbit) {
    char* real = realpath(opt_.root.c_str(), nullptr);
    if (!real) Die("the root '" + opt_.root + "' cannot be served: " + strerror(errno));
    root_ = real;
    free(real);
    struct stat st;
    if (stat(root_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) Die("the root '" + opt_.root + "' is not a folder");
  }

  int Run() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // every thread inherits it; the main thread waits for them

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa = ParseAddress(opt_.listen, "--listen");
    if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      Die("cannot listen on " + opt_.listen + ": " + strerror(errno));
    if (listen(lfd, 1024) != 0) Die("listen failed: " + std::string(strerror(errno)));
    socklen_t len = sizeof sa;
    getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    std::thread([this, lfd] { AcceptLoop(lfd); }).detach();
    WriteStats();
    if (!opt_.ready_path.empty()) {
      std::string tmp = opt_.ready_path + ".tmp";
      FILE* f = fopen(tmp.c_str(), "w");
      if (!f) Die("cannot write the ready file '" + opt_.ready_path + "': " + strerror(errno));
      fprintf(f, "%d\n", port_);
      fclose(f);
      rename(tmp.c_str(), opt_.ready_path.c_str());
    }
    fprintf(stderr, "netfs: serving %s read-only on %s (port %d)\n", root_.c_str(), opt_.listen.c_str(), port_);
    // Signals, periodic stats and the owner watch, all on this thread.
    uint64_t last_requests = UINT64_MAX;
    for (;;) {
      timespec timeout{0, 200 * 1000 * 1000};
      int sig = sigtimedwait(&set, nullptr, &timeout);
      if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) break;
      if (opt_.owner && !ProcessAlive(opt_.owner)) break;
      uint64_t r = counters_.requests.load();
      if (sig == SIGUSR1 || r != last_requests) {
        WriteStats();
        last_requests = r;
      }
    }
    WriteStats();
    return 0;
  }

 private:
  void AcceptLoop(int lfd) {
    for (;;) {
      int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      counters_.connections++;
      std::thread([this, fd] { Serve(fd); }).detach();
    }
  }

  // The real path of a client's path under the root, or -errno (-EACCES for an escape).
  int Resolve(const std::string& path, std::string* out) {
    if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos) return -EINVAL;
    std::string joined = root_;
    size_t i = 1;
    while (i <= path.size()) {
      size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      std::string part = path.substr(i, j - i);
      if (part == "..") {
        counters_.refused++;
        return -EACCES;
      }
      if (!part.empty() && part != ".") joined += "/" + part;
      i = j + 1;
    }
    char* real = realpath(joined.c_str(), nullptr);
    if (!real) return -errno;
    std::string r = real;
    free(real);
    if (r != root_ && r.compare(0, root_.size() + 1, root_ + "/") != 0) {
      counters_.refused++;  // a symlink that leads out of the root
      return -EACCES;
    }
    *out = r;
    return 0;
  }

  bool KnownHandle(uint64_t handle) {
    std::lock_guard<std::mutex> lock(handles_mu_);
    return handles_.count(static_cast<int>(handle)) != 0;
  }

  // A metadata server: each request takes open_delay_ms; with metadata_slots, only that many
  // are served at once and the rest queue (a server busy with other clients' requests too).
  void MetadataDelay() {
    if (opt_.metadata_slots > 0) {
      std::unique_lock<std::mutex> lock(slots_mu_);
      slots_cv_.wait(lock, [this] { return slots_busy_ < opt_.metadata_slots; });
      ++slots_busy_;
    }
    if (opt_.open_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.open_delay_ms));
    if (opt_.metadata_slots > 0) {
      std::lock_guard<std::mutex> lock(slots_mu_);
      --slots_busy_;
      slots_cv_.notify_one();
    }
  }

  static WireStat ToWire(const struct stat& st) {
    WireStat w{};
    w.mode = st.st_mode;
    w.nlink = static_cast<uint32_t>(st.st_nlink);
    w.size = static_cast<uint64_t>(st.st_size);
    w.ino = st.st_ino;
    w.mtime_sec = st.st_mtim.tv_sec;
    w.mtime_nsec = st.st_mtim.tv_nsec;
    return w;
  }

  // The bytes served to one client address (a node, in an emulated cluster): kept for the run.
  std::atomic<uint64_t>* ClientCounter(int fd) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    char text[INET_ADDRSTRLEN] = "unknown";
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0)
      inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
    std::lock_guard<std::mutex> lock(clients_mu_);
    auto& slot = clients_[text];
    if (!slot) slot = std::make_unique<std::atomic<uint64_t>>(0);
    return slot.get();
  }

  void Serve(int fd) {
    std::vector<char> buf;
    std::string path;
    std::atomic<uint64_t>* client_bytes = ClientCounter(fd);
    for (;;) {
      RequestHeader h;
      if (!RecvAll(fd, &h, sizeof h)) break;
      if (h.magic != kMagic || h.path_len > kMaxPath) break;  // not our protocol: drop the peer
      path.resize(h.path_len);
      if (h.path_len && !RecvAll(fd, &path[0], h.path_len)) break;
      uint64_t now = ++counters_.in_flight;
      for (uint64_t peak = counters_.peak_concurrent.load(); now > peak;)
        if (counters_.peak_concurrent.compare_exchange_weak(peak, now)) break;
      bool ok = Handle(fd, h, path, &buf, client_bytes);
      counters_.in_flight--;
      counters_.requests++;
      if (!ok) break;
    }
    close(fd);
    counters_.connections--;
  }

  bool Reply(int fd, int status, const void* payload, uint32_t len) {
    if (status < 0) counters_.errors++;
    ResponseHeader r{status, status < 0 ? 0u : len};
    if (!SendAll(fd, &r, sizeof r, r.len ? MSG_MORE : 0)) return false;
    return r.len == 0 || SendAll(fd, payload, r.len);
  }

  bool Handle(int fd, const RequestHeader& h, const std::string& path, std::vector<char>* buf,
              std::atomic<uint64_t>* client_bytes) {
    std::string real;
    switch (h.op) {
      case kHello:
        return Reply(fd, 0, &kMagic, sizeof kMagic);
      case kGetattr: {
        counters_.stats++;
        MetadataDelay();
        int rc = Resolve(path, &real);
        struct stat st;
        if (rc == 0 && stat(real.c_str(), &st) != 0) rc = -errno;
        WireStat w = rc == 0 ? ToWire(st) : WireStat{};
        return Reply(fd, rc, &w, sizeof w);
      }
      case kStatfs: {
        struct statvfs sv;
        if (statvfs(root_.c_str(), &sv) != 0) return Reply(fd, -errno, nullptr, 0);
        WireStatfs w{sv.f_bsize, sv.f_blocks, sv.f_bfree, sv.f_bavail, sv.f_files, sv.f_ffree, sv.f_namemax};
        return Reply(fd, 0, &w, sizeof w);
      }
      case kOpen: {
        counters_.opens++;
        MetadataDelay();
        int rc = Resolve(path, &real);
        if (rc != 0) return Reply(fd, rc, nullptr, 0);
        int file = open(real.c_str(), O_RDONLY | O_CLOEXEC);
        if (file < 0) return Reply(fd, -errno, nullptr, 0);
        uint64_t handle = static_cast<uint64_t>(file);  // the server's fd is the handle
        {
          std::lock_guard<std::mutex> lock(handles_mu_);
          handles_.insert(file);
        }
        return Reply(fd, 0, &handle, sizeof handle);
      }
      case kRelease: {
        std::lock_guard<std::mutex> lock(handles_mu_);
        // Only files this server opened: a confused client must not close its sockets.
        if (handles_.erase(static_cast<int>(h.handle)) == 0) return Reply(fd, -EBADF, nullptr, 0);
        close(static_cast<int>(h.handle));
        return Reply(fd, 0, nullptr, 0);
      }
      case kRead: {
        if (!KnownHandle(h.handle)) return Reply(fd, -EBADF, nullptr, 0);
        counters_.reads++;
        uint32_t size = std::min(h.size, kMaxRead);
        for (uint64_t big = counters_.largest_read.load(); size > big;)
          if (counters_.largest_read.compare_exchange_weak(big, size)) break;
        if (opt_.read_delay_ms > 0)
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.read_delay_ms));
        if (buf->size() < size) buf->resize(size);
        ssize_t got = pread(static_cast<int>(h.handle), buf->data(), size, static_cast<off_t>(h.offset));
        if (got < 0) return Reply(fd, -errno, nullptr, 0);
        bucket_.Take(static_cast<size_t>(got));
        counters_.bytes_served += static_cast<uint64_t>(got);
        *client_bytes += static_cast<uint64_t>(got);
        return Reply(fd, 0, buf->data(), static_cast<uint32_t>(got));
      }
      case kReaddir: {
        counters_.readdirs++;
        MetadataDelay();
        int rc = Resolve(path, &real);
        if (rc != 0) return Reply(fd, rc, nullptr, 0);
        DIR* dir = opendir(real.c_str());
        if (!dir) return Reply(fd, -errno, nullptr, 0);
        // Every entry with its attributes (readdirplus): see FsReaddir for why.
        std::string out;
        while (dirent* e = readdir(dir)) {
          struct stat st;
          if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
          WireStat w = ToWire(st);
          uint16_t n = static_cast<uint16_t>(strlen(e->d_name));
          out.append(reinterpret_cast<const char*>(&w), sizeof w);
          out.append(reinterpret_cast<const char*>(&n), sizeof n);
          out.append(e->d_name, n);
        }
        closedir(dir);
        return Reply(fd, 0, out.data(), static_cast<uint32_t>(out.size()));
      }
      default:
        return Reply(fd, -ENOSYS, nullptr, 0);
    }
  }

  void WriteStats() {
    auto& c = counters_;
    std::string tmp = opt_.stats_path + ".tmp";
    if (opt_.stats_path.empty()) return;
    FILE* f = fopen(tmp.c_str(), "w");
    if (!f) return;
    fprintf(f,
            "{\"seq\": %llu, \"port\": %d, \"bytes_served\": %llu, \"reads\": %llu, \"opens\": %llu, "
            "\"stats\": %llu, \"readdirs\": %llu, \"largest_read\": %llu, \"peak_concurrent\": %llu, "
            "\"in_flight\": %llu, \"connections\": %llu, \"requests\": %llu, \"refused\": %llu, "
            "\"errors\": %llu, \"bytes_by_client\": {",
            static_cast<unsigned long long>(++seq_), port_, (unsigned long long)c.bytes_served.load(),
            (unsigned long long)c.reads.load(), (unsigned long long)c.opens.load(),
            (unsigned long long)c.stats.load(), (unsigned long long)c.readdirs.load(),
            (unsigned long long)c.largest_read.load(), (unsigned long long)c.peak_concurrent.load(),
            (unsigned long long)c.in_flight.load(), (unsigned long long)c.connections.load(),
            (unsigned long long)c.requests.load(), (unsigned long long)c.refused.load(),
            (unsigned long long)c.errors.load());
    {
      std::lock_guard<std::mutex> lock(clients_mu_);
      const char* sep = "";
      for (const auto& [address, bytes] : clients_) {
        fprintf(f, "%s\"%s\": %llu", sep, address.c_str(), static_cast<unsigned long long>(bytes->load()));
        sep = ", ";
      }
    }
    fprintf(f, "}}\n");
    fclose(f);
    rename(tmp.c_str(), opt_.stats_path.c_str());
  }

  ServerOptions opt_;
  std::string root_;
  int port_ = 0;
  uint64_t seq_ = 0;
  TokenBucket bucket_;
  Counters counters_;
  std::mutex handles_mu_;
  std::unordered_set<int> handles_;
  std::mutex clients_mu_;
  std::map<std::string, std::unique_ptr<std::atomic<uint64_t>>> clients_;
  std::mutex slots_mu_;
  std::condition_variable slots_cv_;
  int slots_busy_ = 0;  // files opened for clients (the fds are the handles)
};

// ---------------------------------------------------------------------------------------------
// Client: a connection pool, the FUSE file system on top, and `cat`.
// ---------------------------------------------------------------------------------------------

class Client {
 public:
  Client(std::string address, int max_connections)
      : address_(std::move(address)), addr_(ParseAddress(address_, "--server")), max_(max_connections) {}

  // Connects once and checks the server speaks this protocol; the error names the address.
  std::string Probe() {
    std::string err;
    int fd = Connect(&err);
    if (fd < 0) return err;
    ResponseHeader r;
    uint32_t magic = 0;
    RequestHeader h{kMagic, kHello, 0, 0, 0, 0};
    if (!SendAll(fd, &h, sizeof h) || !RecvAll(fd, &r, sizeof r) || r.status != 0 || r.len != sizeof magic ||
        !RecvAll(fd, &magic, sizeof magic) || magic != kMagic) {
      close(fd);
      return "the server at " + address_ + " does not speak the netfs protocol";
    }
    Put(fd);
    return "";
  }

  // One request and its response. The payload goes to `out` (at most `out_cap` bytes) or, when
  // `out` is null, into `grow`. Returns the status (>= 0: payload bytes) or -errno.
  int Call(uint32_t op, const std::string& path, uint64_t handle, uint64_t offset, uint32_t size, char* out,
           size_t out_cap, std::string* grow = nullptr) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::string err;
      int fd = Get(&err);
      if (fd < 0) return -EIO;
      RequestHeader h{kMagic, op, handle, offset, size, static_cast<uint32_t>(path.size())};
      ResponseHeader r;
      bool sent = SendAll(fd, &h, sizeof h, path.empty() ? 0 : MSG_MORE) &&
                  (path.empty() || SendAll(fd, path.data(), path.size()));
      if (!sent || !RecvAll(fd, &r, sizeof r)) {
        close(fd);  // a dead connection (the server restarted or the link broke): retry once on a new one
        Drop();
        continue;
      }
      bool ok = true;
      if (r.status >= 0 && r.len > 0) {
        if (out) {
          ok = r.len <= out_cap && RecvAll(fd, out, r.len);
        } else if (grow) {
          grow->resize(r.len);
          ok = RecvAll(fd, &(*grow)[0], r.len);
        } else {
          ok = false;
        }
      }
      if (!ok) {
        close(fd);
        Drop();
        return -EIO;
      }
      Put(fd);
      return r.status < 0 ? r.status : static_cast<int>(r.len);
    }
    return -EIO;
  }

  const std::string& address() const { return address_; }

 private:
  int Connect(std::string* err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *err = std::string("socket: ") + strerror(errno);
      return -1;
    }
    timeval tv{10, 0};  // connecting to a namespace that is gone must not hang the caller
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) != 0) {
      *err = "cannot reach the netfs server at " + address_ + ": " + strerror(errno);
      close(fd);
      return -1;
    }
    tv = {120, 0};  // a request longer than this means the server is gone
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  // An idle connection, a new one while fewer than max exist, or waits for one.
  int Get(std::string* err) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!idle_.empty()) {
        int fd = idle_.back();
        idle_.pop_back();
        return fd;
      }
      if (open_ < max_) {
        ++open_;
        lock.unlock();
        int fd = Connect(err);
        if (fd < 0) {
          lock.lock();
          --open_;
          cv_.notify_one();
        }
        return fd;
      }
      cv_.wait(lock);
    }
  }

  void Put(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(fd);
    cv_.notify_one();
  }

  void Drop() {
    std::lock_guard<std::mutex> lock(mu_);
    --open_;
    cv_.notify_one();
  }

  std::string address_;
  sockaddr_in addr_;
  int max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> idle_;
  int open_ = 0;
};

struct MountOptions {
  std::string server, mountpoint, fsname;
  int threads = 64;
  unsigned max_read = 1u << 20;
  unsigned blksize = 1u << 20;  // st_blksize: Python's buffered I/O reads this much per refill, as on Lustre
  double attr_timeout = 1.0;
  double entry_timeout = 60.0;
  pid_t owner = 0;
};

Client* g_client = nullptr;
MountOptions g_mount;

void FromWire(const WireStat& w, struct stat* st) {
  memset(st, 0, sizeof *st);
  // Read-only to everyone: the mount is a PFS's export, whatever the server's own modes say.
  st->st_mode = (w.mode & S_IFMT) | ((w.mode & 0555) | 0444);
  if (S_ISDIR(w.mode)) st->st_mode |= 0111;
  st->st_nlink = w.nlink;
  st->st_size = static_cast<off_t>(w.size);
  st->st_ino = w.ino;
  st->st_mtim.tv_sec = w.mtime_sec;
  st->st_mtim.tv_nsec = w.mtime_nsec;
  st->st_ctim = st->st_atim = st->st_mtim;
  st->st_blksize = static_cast<blksize_t>(g_mount.blksize);
  st->st_blocks = static_cast<blkcnt_t>((w.size + 511) / 512);
}

int FsGetattr(const char* path, struct stat* st, fuse_file_info*) {
  WireStat w;
  int rc = g_client->Call(kGetattr, path, 0, 0, 0, reinterpret_cast<char*>(&w), sizeof w);
  if (rc < 0) return rc;
  if (rc != sizeof w) return -EIO;
  FromWire(w, st);
  return 0;
}

int FsOpen(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_CREAT))) return -EROFS;
  uint64_t handle;
  int rc = g_client->Call(kOpen, path, 0, 0, 0, reinterpret_cast<char*>(&handle), sizeof handle);
  if (rc < 0) return rc;
  if (rc != sizeof handle) return -EIO;
  fi->fh = handle;
  fi->direct_io = 1;   // no page cache: every read crosses the link, one request per read(2)
  fi->keep_cache = 0;
  return 0;
}

int FsRead(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  return g_client->Call(kRead, "", fi->fh, static_cast<uint64_t>(offset), static_cast<uint32_t>(size), buf, size);
}

int FsRelease(const char*, fuse_file_info* fi) {
  g_client->Call(kRelease, "", fi->fh, 0, 0, nullptr, 0);
  return 0;
}

// A folder's listing is fetched once per opendir (one metadata request) and kept in the handle.
int FsOpendir(const char* path, fuse_file_info* fi) {
  auto* list = new std::string;
  int rc = g_client->Call(kReaddir, path, 0, 0, 0, nullptr, 0, list);
  if (rc < 0) {
    delete list;
    return rc;
  }
  fi->fh = reinterpret_cast<uint64_t>(list);
  return 0;
}

int FsReleasedir(const char*, fuse_file_info* fi) {
  delete reinterpret_cast<std::string*>(fi->fh);
  return 0;
}

int FsReaddir(const char*, void* buf, fuse_fill_dir_t filler, off_t offset, fuse_file_info* fi,
              fuse_readdir_flags) {
  const std::string& list = *reinterpret_cast<std::string*>(fi->fh);
  constexpr size_t kHead = sizeof(WireStat) + sizeof(uint16_t);
  size_t i = 0;
  for (off_t index = 0; i + kHead <= list.size(); ++index) {
    WireStat w;
    uint16_t n;
    memcpy(&w, &list[i], sizeof w);
    memcpy(&n, &list[i + sizeof w], sizeof n);
    if (i + kHead + n > list.size()) return -EIO;
    std::string name = list.substr(i + kHead, n);
    i += kHead + n;
    if (index < offset) continue;
    struct stat st;
    FromWire(w, &st);
    // Attributes with every entry (readdirplus), so that once a folder is listed the kernel
    // knows each name and an open goes straight to an OPEN request. Without them every name
    // needs a LOOKUP first, and the kernel here sends one LOOKUP per folder at a time (seen
    // with strace, whatever FUSE_CAP_PARALLEL_DIROPS says), which would serialise a loader's
    // opens behind the metadata delay. Entries go with offsets: libfuse 3.14's high-level
    // library registers readdirplus names with the kernel only in that mode. Symlinks and the
    // dot entries go without attributes, so the server still judges links out of the root.
    bool plus = !S_ISLNK(w.mode) && name != "." && name != "..";
    if (filler(buf, name.c_str(), &st, index + 1, plus ? FUSE_FILL_DIR_PLUS : static_cast<fuse_fill_dir_flags>(0)))
      break;  // the kernel's buffer is full: it asks again from this offset
  }
  return 0;
}

int FsStatfs(const char*, struct statvfs* sv) {
  WireStatfs w;
  int rc = g_client->Call(kStatfs, "", 0, 0, 0, reinterpret_cast<char*>(&w), sizeof w);
  if (rc < 0) return rc;
  memset(sv, 0, sizeof *sv);
  sv->f_bsize = sv->f_frsize = w.bsize;
  sv->f_blocks = w.blocks;
  sv->f_bfree = w.bfree;
  sv->f_bavail = w.bavail;
  sv->f_files = w.files;
  sv->f_ffree = w.ffree;
  sv->f_namemax = w.namemax;
  sv->f_flag = ST_RDONLY;
  return 0;
}

int FsReadOnly() { return -EROFS; }
int FsMkdir(const char*, mode_t) { return FsReadOnly(); }
int FsUnlink(const char*) { return FsReadOnly(); }
int FsRename(const char*, const char*, unsigned) { return FsReadOnly(); }
int FsCreate(const char*, mode_t, fuse_file_info*) { return FsReadOnly(); }
int FsWrite(const char*, const char*, size_t, off_t, fuse_file_info*) { return FsReadOnly(); }
int FsTruncate(const char*, off_t, fuse_file_info*) { return FsReadOnly(); }
int FsChmod(const char*, mode_t, fuse_file_info*) { return FsReadOnly(); }

void* FsInit(fuse_conn_info* conn, fuse_config* cfg) {
  cfg->attr_timeout = g_mount.attr_timeout;
  cfg->entry_timeout = g_mount.entry_timeout;
  cfg->negative_timeout = g_mount.attr_timeout;
  cfg->kernel_cache = 0;
  cfg->direct_io = 1;
  cfg->use_ino = 0;
  // Many requests in flight: background requests (async reads) may use every thread.
  conn->max_background = static_cast<unsigned>(g_mount.threads);
  conn->congestion_threshold = static_cast<unsigned>(g_mount.threads) * 3 / 4;
  conn->max_read = g_mount.max_read;
  // Lookups and readdirs of one folder in parallel: without it the kernel sends one at a time,
  // and every lookup of a folder of samples would wait for the one before it.
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  if (conn->capable & FUSE_CAP_READDIRPLUS) {  // always with attributes (see FsReaddir)
    conn->want |= FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  }
  if (g_mount.owner) {
    std::thread([] {
      while (ProcessAlive(g_mount.owner)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      fprintf(stderr, "netfs: the owner process %d is gone: unmounting\n", static_cast<int>(g_mount.owner));
      kill(getpid(), SIGTERM);  // libfuse's handler ends the loop; main() unmounts
    }).detach();
  }
  return nullptr;
}

int Mount(const MountOptions& o) {
  g_mount = o;
  Client client(o.server, o.threads);
  std::string err = client.Probe();
  if (!err.empty()) Die(err);
  g_client = &client;

  fuse_operations ops{};
  ops.init = FsInit;
  ops.getattr = FsGetattr;
  ops.open = FsOpen;
  ops.read = FsRead;
  ops.release = FsRelease;
  ops.opendir = FsOpendir;
  ops.readdir = FsReaddir;
  ops.releasedir = FsReleasedir;
  ops.statfs = FsStatfs;
  ops.mkdir = FsMkdir;
  ops.unlink = FsUnlink;
  ops.rmdir = FsUnlink;
  ops.rename = FsRename;
  ops.create = FsCreate;
  ops.write = FsWrite;
  ops.truncate = FsTruncate;
  ops.chmod = FsChmod;

  std::string fsname = o.fsname.empty() ? "netfs@" + o.server : o.fsname;
  std::string opts = "ro,default_permissions,allow_other,subtype=netfs,fsname=" + fsname +
                     ",max_read=" + std::to_string(o.max_read);
  std::vector<std::string> argv_s = {"netfs", "-o", opts};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(&s[0]);
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse* f = fuse_new(&args, &ops, sizeof ops, nullptr);
  if (!f) Die("fuse_new failed (bad options: " + opts + ")");
  if (fuse_mount(f, o.mountpoint.c_str()) != 0) Die("cannot mount on '" + o.mountpoint + "' (is /dev/fuse usable?)");
  if (fuse_set_signal_handlers(fuse_get_session(f)) != 0) Die("cannot install signal handlers");
  fprintf(stderr, "netfs: %s mounted read-only on %s (%d threads, reads up to %u bytes)\n", o.server.c_str(),
          o.mountpoint.c_str(), o.threads, o.max_read);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 0);
  fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(o.threads));
  fuse_loop_cfg_set_idle_threads(cfg, static_cast<unsigned>(o.threads));
  int rc = fuse_loop_mt(f, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_remove_signal_handlers(fuse_get_session(f));
  fuse_unmount(f);
  fuse_destroy(f);
  fuse_opt_free_args(&args);
  return rc < 0 ? 1 : 0;
}

int Cat(const std::string& server, const std::string& path) {
  Client client(server, 1);
  std::string err = client.Probe();
  if (!err.empty()) Die(err);
  uint64_t handle;
  int rc = client.Call(kOpen, path, 0, 0, 0, reinterpret_cast<char*>(&handle), sizeof handle);
  if (rc < 0) {
    fprintf(stderr, "netfs: cannot open '%s' on %s: %s\n", path.c_str(), server.c_str(), strerror(-rc));
    return 1;
  }
  std::vector<char> buf(1 << 20);
  for (uint64_t off = 0;;) {
    rc = client.Call(kRead, "", handle, off, static_cast<uint32_t>(buf.size()), buf.data(), buf.size());
    if (rc < 0) {
      fprintf(stderr, "netfs: reading '%s' failed: %s\n", path.c_str(), strerror(-rc));
      return 1;
    }
    if (rc == 0) break;
    fwrite(buf.data(), 1, static_cast<size_t>(rc), stdout);
    off += static_cast<uint64_t>(rc);
  }
  client.Call(kRelease, "", handle, 0, 0, nullptr, 0);
  return 0;
}

int Usage() {
  fprintf(stderr,
          "usage: netfs serve --root DIR --listen ADDR:PORT [--open-delay-ms X] [--read-delay-ms Y] [--mbit B]\n"
          "                   [--metadata-slots N] [--stats FILE] [--ready-file FILE] [--owner-pid PID]\n"
          "       netfs mount --server ADDR:PORT --mountpoint DIR [--threads N] [--max-read BYTES]\n"
          "                   [--attr-timeout S] [--entry-timeout S] [--fsname NAME] [--owner-pid PID]\n"
          "                   [--blksize BYTES]\n"
          "       netfs cat --server ADDR:PORT PATH\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string mode = argv[1];
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) == 0) {
      if (i + 1 >= argc) Die(a + " needs a value");
      flags[a] = argv[++i];
    } else {
      positional.push_back(a);
    }
  }
  auto take = [&](const char* name, const char* fallback = nullptr) -> std::string {
    auto it = flags.find(name);
    if (it == flags.end()) {
      if (!fallback) Die(std::string(name) + " is required for '" + mode + "'");
      return fallback;
    }
    std::string v = it->second;
    flags.erase(it);
    return v;
  };
  int rc;
  if (mode == "serve") {
    ServerOptions o;
    o.root = take("--root");
    o.listen = take("--listen");
    o.open_delay_ms = Seconds(take("--open-delay-ms", "0").c_str(), "--open-delay-ms");
    o.read_delay_ms = Seconds(take("--read-delay-ms", "0").c_str(), "--read-delay-ms");
    o.mbit = Seconds(take("--mbit", "0").c_str(), "--mbit");
    o.metadata_slots = atoi(take("--metadata-slots", "0").c_str());
    o.stats_path = take("--stats", "");
    o.ready_path = take("--ready-file", "");
    o.owner = static_cast<pid_t>(atoi(take("--owner-pid", "0").c_str()));
    if (!flags.empty()) Die("unknown option " + flags.begin()->first + " for 'serve'");
    Server server(o);
    rc = server.Run();
  } else if (mode == "mount") {
    MountOptions o;
    o.server = take("--server");
    o.mountpoint = take("--mountpoint");
    o.threads = atoi(take("--threads", "64").c_str());
    o.max_read = static_cast<unsigned>(strtoul(take("--max-read", "1048576").c_str(), nullptr, 10));
    o.blksize = static_cast<unsigned>(strtoul(take("--blksize", "1048576").c_str(), nullptr, 10));
    o.attr_timeout = Seconds(take("--attr-timeout", "1").c_str(), "--attr-timeout");
    o.entry_timeout = Seconds(take("--entry-timeout", "60").c_str(), "--entry-timeout");
    o.fsname = take("--fsname", "");
    o.owner = static_cast<pid_t>(atoi(take("--owner-pid", "0").c_str()));
    if (!flags.empty()) Die("unknown option " + flags.begin()->first + " for 'mount'");
    if (o.threads < 1 || o.threads > 1024) Die("--threads must be 1..1024");
    if (o.max_read < 4096 || o.max_read > (16u << 20)) Die("--max-read must be 4096..16 MiB");
    if (o.blksize < 512 || o.blksize > (64u << 20)) Die("--blksize must be 512..64 MiB");
    rc = Mount(o);
  } else if (mode == "cat") {
    std::string server = take("--server");
    if (positional.size() != 1 || !flags.empty()) return Usage();
    rc = Cat(server, positional[0]);
  } else {
    return Usage();
  }
  fflush(stdout);
  // Detached connection threads may still be blocked in the kernel: leave without joining them.
  _exit(rc);
}
