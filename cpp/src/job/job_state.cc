#include "hdmlp/job/job_state.h"

#include <cinttypes>
#include <cstdio>

namespace hdmlp {
namespace {

std::string Hex(uint64_t x) {
  char buffer[24];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, x);
  return buffer;
}

std::string Bool(bool b) { return b ? "True" : "False"; }

}  // namespace

std::string ResumeMismatch(const JobState& state, const JobState& job, const std::string& dataset) {
  const std::string refused = "cannot resume from this state: ";
  if (state.version != JobState::kVersion) {
    return refused + "its format version is " + std::to_string(state.version) + ", this hdmlp reads version " +
           std::to_string(JobState::kVersion);
  }
  if (state.samples != job.samples || state.fingerprint != job.fingerprint) {
    return refused + "it is from another dataset: " + std::to_string(state.samples) + " samples, index fingerprint " +
           Hex(state.fingerprint) + ", while '" + dataset + "' has " + std::to_string(job.samples) +
           " samples, fingerprint " + Hex(job.fingerprint) +
           " (the fingerprint covers the source's kind and the names, labels and sizes of the samples); resume "
           "on the dataset the state was taken on";
  }
  if (state.batch_size != job.batch_size) {
    return refused + "its global batch size is " + std::to_string(state.batch_size) + ", this job's is " +
           std::to_string(job.batch_size) +
           "; the global batches can only go on with the same size: give batch_size=" +
           std::to_string(state.batch_size) + " (the global batch, whatever the number of ranks)";
  }
  if (state.distr_scheme != "uniform" && state.distr_scheme != "local" && state.distr_scheme != "partial_local") {
    return refused + "its distr_scheme '" + state.distr_scheme +
           "' is none hdmlp has (uniform, local, partial_local): the state is damaged or not an hdmlp state";
  }
  if (state.distr_scheme != job.distr_scheme) {
    return refused + "its distr_scheme is '" + state.distr_scheme + "', this job's is '" + job.distr_scheme +
           "'; give distr_scheme='" + state.distr_scheme + "'";
  }
  if (state.distr_scheme == "partial_local" && state.exchange_fraction != job.exchange_fraction) {
    return refused + "its exchange_fraction is " + std::to_string(state.exchange_fraction) + ", this job's is " +
           std::to_string(job.exchange_fraction) + "; give the state's";
  }
  if (state.shuffle != job.shuffle) {
    return refused + "it has shuffle=" + Bool(state.shuffle) + ", this job shuffle=" + Bool(job.shuffle) +
           "; give the state's";
  }
  if (state.drop_last != job.drop_last) {
    return refused + "it has drop_last_batch=" + Bool(state.drop_last) + ", this job drop_last_batch=" +
           Bool(job.drop_last) + "; give the state's";
  }
  if (state.seed != job.seed) {
    return refused + "its seed is " + std::to_string(state.seed) + ", but this job was given seed=" +
           std::to_string(job.seed) + "; leave seed out (None) to take the state's";
  }
  if (state.epoch < 0 || state.batches < 0 || state.order_world_size < 1 || state.world_size < 1) {
    return refused + "its position is impossible (epoch " + std::to_string(state.epoch) + ", batches " +
           std::to_string(state.batches) + ", order_world_size " + std::to_string(state.order_world_size) +
           ", world_size " + std::to_string(state.world_size) + ")";
  }
  if (state.position != state.batches * state.batch_size) {
    return refused + "it is inconsistent: " + std::to_string(state.batches) + " global batches of " +
           std::to_string(state.batch_size) + " hold positions [0, " +
           std::to_string(state.batches * state.batch_size) + "), but its position is " +
           std::to_string(state.position) + " (was it edited?)";
  }
  if (state.epoch > job.epochs || (state.epoch == job.epochs && state.batches > 0)) {
    return refused + "it has delivered " + std::to_string(state.epoch) + " epochs" +
           (state.batches > 0 ? " and " + std::to_string(state.batches) + " batches of the next" : "") +
           ", more than this job's epochs=" + std::to_string(job.epochs) + "; create the job with more epochs";
  }
  return "";
}

ResumePoint ResumePointOf(const JobState& state) {
  ResumePoint point;
  point.epoch = state.epoch;
  point.position = state.position;
  point.order_world_size = state.batches > 0 ? state.order_world_size : 0;
  return point;
}

std::string DescribeState(const JobState& s) {
  return "epoch " + std::to_string(s.epoch) + " after " + std::to_string(s.batches) +
         (s.batches == 1 ? " global batch" : " global batches") + " (position " +
         std::to_string(s.position) + ", order of " + std::to_string(s.order_world_size) + " ranks), seed " +
         std::to_string(s.seed) + ", batch_size " + std::to_string(s.batch_size) + ", " + s.distr_scheme +
         (s.distr_scheme == "partial_local" ? " " + std::to_string(s.exchange_fraction) : "") + ", shuffle " +
         Bool(s.shuffle) + ", drop_last_batch " + Bool(s.drop_last) + ", " + std::to_string(s.samples) +
         " samples (fingerprint " + Hex(s.fingerprint) + "), taken on " + std::to_string(s.world_size) +
         " ranks of a job of " + std::to_string(s.epochs) + " epochs";
}

}  // namespace hdmlp
