#include "hdmlp/env/deadline_reader.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "hdmlp/env/start_thread.h"
#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

std::unique_ptr<uint8_t[]> AllocateFor(int64_t bytes, const std::string& path) {
  uint8_t* p = new (std::nothrow) uint8_t[static_cast<size_t>(std::max<int64_t>(bytes, 1))];
  if (p == nullptr) {
    throw AllocationError("cannot hold '" + path + "' in memory: allocating " + std::to_string(bytes) +
                          " bytes for it failed (not enough memory, or a memory limit); remove the file from the "
                          "dataset or give the job more memory");
  }
  return std::unique_ptr<uint8_t[]>(p);
}

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

}  // namespace

FileContents ReadToEnd(ReadableFile* file) {
  FileContents out;
  out.info = file->Info();
  // One byte more than fstat says, so that a file longer than that is seen.
  int64_t capacity = std::max<int64_t>(out.info.size, 0) + 1;
  out.bytes.data = AllocateFor(capacity, file->path());
  int64_t done = 0;
  for (;;) {
    done += file->ReadUpTo(done, out.bytes.data.get() + done, capacity - done);
    if (done < capacity) break;  // a short read: the end of the file
    const int64_t grown = std::max<int64_t>(capacity * 2, 64 * 1024);
    std::unique_ptr<uint8_t[]> bigger = AllocateFor(grown, file->path());
    std::memcpy(bigger.get(), out.bytes.data.get(), static_cast<size_t>(done));
    out.bytes.data = std::move(bigger);
    capacity = grown;
  }
  out.bytes.size = done;
  return out;
}

struct DeadlineReader::Task {
  std::function<void()> read;
  bool started = false;  // guarded by State::mu, as are the fields below
  bool done = false;
  CapturedError error;
};

struct DeadlineReader::State {
  int max_threads = 1;
  std::mutex mu;
  std::condition_variable work_cv;  // pool threads: a task or closing
  std::condition_variable done_cv;  // callers: a task done, closing, or WakeWaiters
  std::condition_variable exit_cv;  // Close: a pool thread ended
  std::deque<std::shared_ptr<Task>> queue;
  int idle = 0;
  int alive = 0;
  bool closing = false;
  int64_t timed_out = 0;
  struct Worker {
    std::thread thread;
    std::shared_ptr<bool> exited;  // guarded by mu
  };
  std::vector<Worker> workers;
};

DeadlineReader::DeadlineReader(double timeout_s, int max_threads)
    : state_(std::make_shared<State>()), timeout_s_(timeout_s) {
  if (!(timeout_s > 0)) throw InvalidArgumentError("read timeout must be > 0 s, got " + Seconds(timeout_s));
  state_->max_threads = std::max(1, max_threads);
}

DeadlineReader::~DeadlineReader() { Close(0); }

void DeadlineReader::PoolLoop(std::shared_ptr<State> state, std::shared_ptr<bool> exited) {
  State& st = *state;
  std::unique_lock<std::mutex> lock(st.mu);
  for (;;) {
    ++st.idle;
    st.work_cv.wait(lock, [&] { return st.closing || !st.queue.empty(); });
    --st.idle;
    if (st.closing) break;
    std::shared_ptr<Task> task = std::move(st.queue.front());
    st.queue.pop_front();
    task->started = true;
    lock.unlock();
    CapturedError error;
    try {
      task->read();
    } catch (...) {
      error = CapturedError::FromCurrentException();
    }
    lock.lock();
    task->error = std::move(error);
    task->done = true;
    st.done_cv.notify_all();
  }
  --st.alive;
  *exited = true;
  st.exit_cv.notify_all();
}

void DeadlineReader::Run(std::function<void()> read, const std::string& what, const std::atomic<bool>* stop) {
  State& st = *state_;
  auto task = std::make_shared<Task>();
  task->read = std::move(read);
  std::unique_lock<std::mutex> lock(st.mu);
  if (st.closing) throw ClosedError("the job was closed before " + what);
  st.queue.push_back(task);
  if (static_cast<int64_t>(st.queue.size()) > st.idle && st.alive < st.max_threads) {
    auto exited = std::make_shared<bool>(false);
    try {
      st.workers.push_back({TryStartThread("hdmlp-read", [state = state_, exited] { PoolLoop(state, exited); }),
                            exited});
      ++st.alive;
    } catch (const ThreadStartFailed&) {
      // The OS refused a thread (a memory or thread limit). The pool's
      // threads take the task when there are any; with none, the caller
      // reads it itself, without a deadline: slower to notice a hang,
      // but no read is refused.
      if (st.alive == 0) {
        st.queue.pop_back();
        lock.unlock();
        task->read();
        return;
      }
      st.work_cv.notify_one();
    }
  } else {
    st.work_cv.notify_one();
  }
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s_));
  const auto abandon = [&] {
    if (task->started) return;  // its thread finishes it and drops it
    const auto it = std::find(st.queue.begin(), st.queue.end(), task);
    if (it != st.queue.end()) st.queue.erase(it);
  };
  while (!task->done) {
    if (st.closing || (stop != nullptr && stop->load())) {
      abandon();
      throw ClosedError("the job was closed while " + what);
    }
    if (st.done_cv.wait_until(lock, deadline) == std::cv_status::timeout && !task->done) {
      abandon();
      ++st.timed_out;
      throw IOError(what + " did not finish within read_timeout_s = " + Seconds(timeout_s_) +
                    " s: the dataset's storage may hang (a stale network mount, a device that does not answer); "
                    "raise read_timeout_s if it is only slow");
    }
  }
  if (task->error) task->error.Throw();
}

void DeadlineReader::WakeWaiters() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->done_cv.notify_all();
}

void DeadlineReader::Close(double grace_s) {
  State& st = *state_;
  std::vector<State::Worker> workers;
  {
    std::unique_lock<std::mutex> lock(st.mu);
    if (st.closing) return;
    st.closing = true;
    st.queue.clear();
    st.work_cv.notify_all();
    st.done_cv.notify_all();
    st.exit_cv.wait_for(lock, std::chrono::duration<double>(std::max(grace_s, 0.0)),
                        [&] { return st.alive == 0; });
    workers = std::move(st.workers);
    st.workers.clear();
  }
  for (auto& worker : workers) {
    bool exited;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      exited = *worker.exited;
    }
    // A thread still in a read owns only shared state: leave it be.
    if (exited) {
      worker.thread.join();
    } else {
      worker.thread.detach();
    }
  }
}

int64_t DeadlineReader::timed_out_reads() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->timed_out;
}

}  // namespace hdmlp
