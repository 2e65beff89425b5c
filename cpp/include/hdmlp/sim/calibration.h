// Calibration: measuring this machine's bandwidths by thread count, for the
// tables of a config (`hdmlp calibrate`, docs/simulator.md).
//
// MeasureMemoryBandwidth copies buffers in RAM with `threads` threads (what a
// memory class's reads cost); MeasureReadBandwidth reads whole files through
// an Env with `threads` threads, each taking the next file, the way staging
// workers and prefetch threads read samples (for the PFS table, read the
// dataset's files through the same Env the job uses; for a filesystem class,
// files in its folder). Both return aggregate MB/s (10^6 bytes per second)
// over the wall time of the measurement.
//
// Thread-safety: reentrant; the threads started are joined before return.
#ifndef HDMLP_SIM_CALIBRATION_H_
#define HDMLP_SIM_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/env/env.h"

namespace hdmlp::sim {

// Each of `threads` threads copies its own buffer of `bytes_per_thread`
// bytes `rounds` times. Throws InvalidArgumentError for values < 1.
double MeasureMemoryBandwidth(int threads, int64_t bytes_per_thread, int rounds = 4);

// Reads every file of `paths` whole with `threads` threads, once, and again
// round-robin until at least `min_seconds` have passed. Throws what env
// throws (NotFoundError, IOError naming the file) and InvalidArgumentError
// for no paths or threads < 1.
double MeasureReadBandwidth(Env* env, const std::vector<std::string>& paths, int threads, double min_seconds = 0);

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_CALIBRATION_H_
