// DeadlineReader: reads that a caller waits for at most a deadline.
//
// A read of the dataset's storage can block without end (a hung network
// mount, a device that never answers), and a thread blocked in the kernel
// cannot be interrupted. So the reader runs every read (a task) on a thread
// of its own pool and the caller waits for it with a deadline: past it, the
// caller gets an IOError naming what it read, and the task's thread is left
// to finish (or hang) on its own. A caller may also give a stop flag: when
// it is set and WakeWaiters() is called, the caller stops waiting at once
// with a ClosedError (how a closing job leaves slow reads behind).
//
// Memory safety of reads left behind: a task must own (through shared_ptr)
// everything it touches: the storage it reads, where it puts its result.
// A pool thread owns only shared state (the pool's, and its task), so a read
// that ends after its caller gave up, or after the reader was closed and
// destroyed, touches nothing that was freed. Close() joins the threads that
// are idle or finish within a grace period and detaches the others.
//
// ReadToEnd reads an open file to its end, whatever size stat reports
// (files under /proc report 0 bytes but have content), and returns the
// open file's size and modification time as fstat saw them before reading.
// An allocation that fails is an AllocationError naming the file.
//
// Threads are started when a read finds none idle (at most max_threads;
// beyond that reads queue), so the pool holds about as many threads as
// reads run at once, plus reads that hang.
//
// Thread-safety: Read may be called from any number of threads at once;
// WakeWaiters and Close from any thread. Not copyable.
#ifndef HDMLP_ENV_DEADLINE_READER_H_
#define HDMLP_ENV_DEADLINE_READER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hdmlp/env/env.h"
#include "hdmlp/util/sample_buffer.h"

namespace hdmlp {

struct FileContents {
  SampleBuffer bytes;
  FileInfo info;  // fstat of the open file, before reading
};

// Reads an open file to its end. Throws IOError, or AllocationError naming
// the file when its bytes cannot be allocated.
FileContents ReadToEnd(ReadableFile* file);

class DeadlineReader {
 public:
  // timeout_s > 0: how long a caller waits for one read.
  explicit DeadlineReader(double timeout_s, int max_threads = 256);
  DeadlineReader(const DeadlineReader&) = delete;
  DeadlineReader& operator=(const DeadlineReader&) = delete;
  ~DeadlineReader();  // Close(0)

  // Runs `read` on the pool and waits for it. Throws what it throws, an
  // IOError naming `what` ("reading 'x.jpg'") past the deadline, a
  // ClosedError once `stop` is set (and WakeWaiters called) or the reader is
  // closed. `read` must own what it touches (see above).
  void Run(std::function<void()> read, const std::string& what, const std::atomic<bool>* stop = nullptr);

  // Wakes every waiting caller so that it checks its stop flag.
  void WakeWaiters();

  // Refuses new reads, wakes every caller, joins the pool's threads that end
  // within grace_s and detaches the rest. Idempotent.
  void Close(double grace_s = 0.2);

  double timeout_s() const { return timeout_s_; }
  // Reads that passed their deadline so far.
  int64_t timed_out_reads() const;

 private:
  struct State;
  struct Task;
  static void PoolLoop(std::shared_ptr<State> state, std::shared_ptr<bool> exited);

  std::shared_ptr<State> state_;
  const double timeout_s_;
};

}  // namespace hdmlp

#endif  // HDMLP_ENV_DEADLINE_READER_H_
