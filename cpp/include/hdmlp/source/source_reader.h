// SourceReader: reads a Source's samples with a deadline, and notices
// samples that changed since the source was indexed.
//
// Every read runs on a DeadlineReader's pool (env/deadline_reader.h): a
// caller waits at most the read timeout (then an IOError names the sample)
// and, once its stop flag is set, not at all. A read left behind owns the
// Source and the Env it reads through (shared_ptrs) and its own result, so
// it never touches freed memory, however late it ends.
//
// The job delivers the dataset as it was when it was indexed. A sample read
// whose size or modification time (Source::ReadIdentified) is not the
// index's (Source::Identity) is still delivered as read, but counted once
// and named in ChangedFiles() (the first 100 names).
//
// Thread-safety: all methods may be called from any number of threads.
// Not copyable.
#ifndef HDMLP_SOURCE_SOURCE_READER_H_
#define HDMLP_SOURCE_SOURCE_READER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/env/deadline_reader.h"
#include "hdmlp/source/source.h"

namespace hdmlp {

class SourceReader {
 public:
  // `env` is what the source reads through (kept alive for reads left
  // behind; may be null when it is never freed). timeout_s > 0.
  SourceReader(std::shared_ptr<Source> source, std::shared_ptr<Env> env, double timeout_s);
  SourceReader(const SourceReader&) = delete;
  SourceReader& operator=(const SourceReader&) = delete;

  Source& source() const { return *source_; }

  // Sample i. Throws what the source throws, IOError past the deadline,
  // ClosedError once `stop` is set and WakeWaiters called.
  SampleBuffer Read(int64_t i, const std::atomic<bool>* stop = nullptr);
  // Samples first .. first + count - 1 of one shard in one read (Source::ReadRun).
  std::vector<SampleBuffer> ReadRun(int64_t first, int64_t count, const std::atomic<bool>* stop = nullptr);

  void WakeWaiters() { reader_.WakeWaiters(); }
  // Refuses new reads and leaves stuck ones behind (DeadlineReader::Close).
  void Close(double grace_s = 0.2) { reader_.Close(grace_s); }

  // Samples found changed so far (each counted once), and their names.
  int64_t changed_samples() const;
  std::vector<std::string> ChangedFiles() const;

 private:
  void NoteChanged(int64_t i);

  std::shared_ptr<Source> source_;
  std::shared_ptr<Env> env_;
  DeadlineReader reader_;
  mutable std::mutex changed_mu_;
  std::vector<bool> changed_;  // by sample; empty until one changes
  int64_t changed_count_ = 0;
  std::vector<std::string> changed_files_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_SOURCE_READER_H_
