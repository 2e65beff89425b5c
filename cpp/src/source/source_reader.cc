#include "hdmlp/source/source_reader.h"

#include <utility>

namespace hdmlp {

SourceReader::SourceReader(std::shared_ptr<Source> source, std::shared_ptr<Env> env, double timeout_s)
    : source_(std::move(source)), env_(std::move(env)), reader_(timeout_s) {}

SampleBuffer SourceReader::Read(int64_t i, const std::atomic<bool>* stop) {
  struct Result {
    SampleBuffer bytes;
    SampleIdentity found;
  };
  auto result = std::make_shared<Result>();
  // Owns what it touches: it may outlive this call.
  reader_.Run([source = source_, env = env_, result, i] { result->bytes = source->ReadIdentified(i, &result->found); },
              "reading " + source_->Describe(i), stop);
  const SampleIdentity indexed = source_->Identity(i);
  if (result->found.size != indexed.size ||
      (indexed.mtime_ns != 0 && result->found.mtime_ns != 0 && result->found.mtime_ns != indexed.mtime_ns)) {
    NoteChanged(i);
  }
  return std::move(result->bytes);
}

std::vector<SampleBuffer> SourceReader::ReadRun(int64_t first, int64_t count, const std::atomic<bool>* stop) {
  auto result = std::make_shared<std::vector<SampleBuffer>>();
  reader_.Run([source = source_, env = env_, result, first, count] { *result = source->ReadRun(first, count); },
              "reading " + std::to_string(count) + " samples from " + source_->Describe(first), stop);
  return std::move(*result);
}

void SourceReader::NoteChanged(int64_t i) {
  std::lock_guard<std::mutex> lock(changed_mu_);
  if (changed_.empty()) changed_.assign(static_cast<size_t>(source_->size()), false);
  if (changed_[static_cast<size_t>(i)]) return;
  changed_[static_cast<size_t>(i)] = true;
  ++changed_count_;
  if (changed_files_.size() < 100) changed_files_.push_back(source_->Describe(i));
}

int64_t SourceReader::changed_samples() const {
  std::lock_guard<std::mutex> lock(changed_mu_);
  return changed_count_;
}

std::vector<std::string> SourceReader::ChangedFiles() const {
  std::lock_guard<std::mutex> lock(changed_mu_);
  return changed_files_;
}

}  // namespace hdmlp
