// JobState: a job's position and what it must match to be resumed.
//
// A state is what `job.state_dict()` returns in Python: small, taken without
// I/O at any batch boundary, and the same on every rank after the same step
// (the position is global: epoch, global batches delivered in it, and the
// positions of the epoch's global order they hold). Resuming a job from it
// (JobOptions::resume) starts exactly at the next global batch.
//
// What a resumed job must share with the state, else it is refused with the
// difference named (ResumeMismatch): the dataset (sample count and index
// fingerprint), the global batch size, the scheme and its exchange fraction,
// shuffle and drop-last (together they define the order and the batches),
// and the seed (a job given a seed must give the state's). What may change:
// the configuration, the transform chain, the epochs (at least the ones
// delivered) and the world size (plan/resume_point.h says what a changed
// world size means for each scheme).
//
// Thread-safety: plain values and pure functions.
#ifndef HDMLP_JOB_JOB_STATE_H_
#define HDMLP_JOB_JOB_STATE_H_

#include <cstdint>
#include <string>

#include "hdmlp/plan/resume_point.h"

namespace hdmlp {

struct JobState {
  static constexpr int kVersion = 1;
  int version = kVersion;
  uint64_t seed = 0;
  // Position: the epoch being (or next to be) delivered, the global batches
  // of it delivered, and the positions of its global order they hold; the
  // world size whose global order the epoch follows (resume_point.h).
  int epoch = 0;
  int64_t batches = 0;
  int64_t position = 0;
  int order_world_size = 1;
  // What the order depends on.
  int64_t batch_size = 1;  // global
  std::string distr_scheme = "uniform";
  double exchange_fraction = 0.1;
  bool shuffle = true;
  bool drop_last = false;
  // The dataset.
  int64_t samples = 0;
  uint64_t fingerprint = 0;
  // Informational: the job that took the state.
  int world_size = 1;
  int epochs = 1;
};

// "" when `state` can resume a job whose own settings are `job` (its
// position fields are ignored), else a complete message naming the first
// difference and what to do. `dataset` names the job's dataset in messages.
std::string ResumeMismatch(const JobState& state, const JobState& job, const std::string& dataset);

// Where a plan for `state` starts. Call after ResumeMismatch found nothing.
ResumePoint ResumePointOf(const JobState& state);

// One line describing the state's position and identity: two ranks resume
// from the same state exactly when their lines are equal.
std::string DescribeState(const JobState& state);

}  // namespace hdmlp

#endif  // HDMLP_JOB_JOB_STATE_H_
