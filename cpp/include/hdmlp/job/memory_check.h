// Memory checks of a Job: the messages for a batch or a sample that cannot be
// held in the memory this process may still take (env/memory_limit.h).
//
// A batch of fixed-size rows (HDF5 arrays, a transform chain's output) needs
// its rows twice (the batch the training loop holds while the next one is
// filled) and, for arrays, one sample read on its way into a row; a Job checks
// that at start-up and refuses with BatchMemoryError. A sample larger than
// what is left is refused before it is read (SampleMemoryError), as a bad
// sample: on_error="skip" leaves it out. Every message names the sample, its
// size, the limit it exceeds and the setting that would make it fit.
// Stateless; thread-safe.
#ifndef HDMLP_JOB_MEMORY_CHECK_H_
#define HDMLP_JOB_MEMORY_CHECK_H_

#include <cstdint>
#include <string>

#include "hdmlp/env/memory_limit.h"

namespace hdmlp {

struct BatchMemoryNeed {
  std::string sample;      // a sample for the message ("data.h5:data[0]")
  std::string row_kind;    // what a row is ("an HDF5 sample float32[3, 1024]", "a transformed image float32[3, 224, 224]")
  int64_t row_bytes = 0;   // one sample's row (label row included)
  int64_t read_bytes = 0;  // a sample read on its way into its row (0: not counted)
  int64_t batch = 0;       // this rank's largest batch
  int64_t batches = 2;     // batches held at once: the one handed out and the one being filled
  int world_size = 1;
  bool per_rank = false;   // the job was given batch_size_per_rank
  std::string smaller = "store smaller samples";  // the other way out when no batch fits
};

// The bytes the batches need: batches * batch * row_bytes + read_bytes.
int64_t BatchMemoryBytes(const BatchMemoryNeed& m);

// "" when the batch fits in limit.available (or no limit is known); else the
// message: what it needs, the limit, and the largest batch that fits or, when
// none does, the memory to ask for.
std::string BatchMemoryError(const BatchMemoryNeed& m, const MemoryLimit& limit);

// The message for one sample of `bytes` that cannot be read into memory.
std::string SampleMemoryError(const std::string& sample, int64_t bytes, const MemoryLimit& limit);

}  // namespace hdmlp

#endif  // HDMLP_JOB_MEMORY_CHECK_H_
